/* SPDX-License-Identifier: MIT */
/*
 * handle.c - a producer handle: open, close, its attachments to successive
 * segments behind one ring name, the ring's counters, and error strings.
 *
 * A handle writes into its current attachment (struct shmt_att). Off the
 * hot path, at most every SHMT_LOOK_NS, it looks at the ring's name: a
 * handle opened before its ring existed attaches once it appears, and one
 * whose ring was removed and made again moves to the new one. A ring
 * removed or replaced through the library is marked retired, which every
 * call reads: then the look comes every SHMT_LOOK_RETIRED_NS, so the
 * handle moves within a millisecond of the new ring's appearance.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "producer.h"

/* Maps the ring behind t's name as a new attachment. Returns 0 or -errno. */
static int att_open(shmtrace_t *t, struct shmt_att **out)
{
	char err[256];
	struct shmt_att *a = calloc(1, sizeof(*a));
	int ret;

	if (!a)
		return -ENOMEM;
	ret = shmt_view_open(t->name, SHMT_OPEN_WRITE, &a->v, err, sizeof(err));
	if (ret < 0) {
		free(a);
		return ret;
	}
	/* pids from another pid namespace would collide with the ring's own
	 * (a container's pid 1 is not the host's): refuse unless asked */
	if (a->v.h->created_pidns && shmt_pidns && a->v.h->created_pidns != shmt_pidns &&
	    !getenv("SHMTRACE_ALLOW_PIDNS")) {
		shmt_view_close(&a->v);
		free(a);
		return -EXDEV;
	}
	a->claimed = calloc((a->v.nblocks + 63) / 64, sizeof(uint64_t));
	if (!a->claimed) {
		shmt_view_close(&a->v);
		free(a);
		return -ENOMEM;
	}
	a->id = shmt_next_att_id();
	*out = a;
	return 0;
}

static void att_free(struct shmt_att *a)
{
	free(a->claimed);
	free(a->remap);
	shmt_view_close(&a->v);
	free(a);
}

/* Attaches t to the segment behind its name unless it is attached to it
 * already. t->local held. Returns the current attachment (maybe NULL). */
static struct shmt_att *attach_locked(shmtrace_t *t)
{
	struct shmt_att *old = t->cur, *a;
	uint64_t dev, ino, n;

	if (shmt_ring_identity(t->name, &dev, &ino) < 0)
		return old;	/* not there: keep writing where we were */
	if (old && old->v.dev == dev && old->v.ino == ino)
		return old;	/* another thread moved us meanwhile */
	t->attach_attempts++;
	if (att_open(t, &a) < 0)
		return old;
	if (old) {
		a->slot_flags = SHMT_THREAD_REATTACHED;
		if (shmt_intern_remap(t, a) < 0) {
			att_free(a);
			return old;
		}
		t->reattaches++;
	} else {
		a->slot_flags = SHMT_THREAD_LATE;	/* it waited for the ring */
	}
	a->prev = old;
	shmt_clock_adopt(&a->v.clock);
	/* what was refused meanwhile reaches the reports through this ring */
	store_relaxed(&t->orphan, false);
	n = __atomic_exchange_n(&t->orphaned, 0, __ATOMIC_RELAXED);
	if (n)
		shmt_loss_orphaned(&a->v, n);
	/* pairs with the acquire load of cur in emit(): a is complete */
	store_release(&t->cur, a);
	return a;
}

/* Whether a collector drains a's ring: the pid it wrote there lives.
 * Untrusted, and a reused pid reads as alive: records then go on into the
 * ring as before, never refused for nothing. */
static bool drained(const struct shmt_att *a)
{
	uint64_t pid = load_relaxed(&a->v.h->collector_pid.v);

	return pid && pid <= INT32_MAX && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

struct shmt_att *shmt_attach_current(shmtrace_t *t)
{
	struct shmt_att *a = load_acquire(&t->cur);
	uint64_t now = shmt_mono_ns(), dev, ino;
	bool retired = a && shmt_att_retired(a);

	if (retired && load_relaxed(&t->retired_seen) != a->id)
		store_relaxed(&t->retired_seen, a->id);	/* just retired: look now */
	else if (retired && fetch_add(&t->retired_calls, 1) + 1 >= SHMT_LOOK_RETIRED_CALLS)
		;	/* the count bound */
	else if (now - load_relaxed(&t->last_look_ns) < (retired ? SHMT_LOOK_RETIRED_NS : SHMT_LOOK_NS))
		return a;
	store_relaxed(&t->last_look_ns, now);
	store_relaxed(&t->retired_calls, 0);
	if (shmt_ring_identity(t->name, &dev, &ino) < 0) {
		/* removed, and no new ring yet: its collector (if one still
		 * runs) drains what goes on into it; else nobody would */
		if (retired)
			store_relaxed(&t->orphan, !drained(a));
		return a;
	}
	if (a && a->v.dev == dev && a->v.ino == ino)
		return a;
	pthread_mutex_lock(&t->local);
	a = attach_locked(t);
	pthread_mutex_unlock(&t->local);
	return a;
}

/* Opens a handle; with wait, one that need not find its ring yet. */
static int handle_open(const char *name, bool wait, shmtrace_t **out)
{
	shmtrace_t *t;
	int ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (shmt_name_check(name) < 0)
		return -EINVAL;
	shmt_process_init();
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	snprintf(t->name, sizeof(t->name), "%s", name);
	pthread_mutex_init(&t->local, NULL);
	t->lock_timeout_ns = SHMT_LOCK_TIMEOUT_NS;
	{
		const char *ms = getenv("SHMTRACE_LOCK_TIMEOUT_MS");

		if (ms)
			t->lock_timeout_ns = strtoull(ms, NULL, 10) * 1000000ull;
	}
	t->attach_attempts = 1;
	ret = att_open(t, &t->cur);
	if (ret < 0 && !(wait && ret == -ENOENT)) {
		pthread_mutex_destroy(&t->local);
		free(t);
		return ret;
	}
	if (t->cur)
		shmt_clock_adopt(&t->cur->v.clock);
	else
		t->last_look_ns = shmt_mono_ns();

	ret = shmt_registry_add(t);
	if (ret < 0) {
		pthread_mutex_destroy(&t->local);
		if (t->cur)
			att_free(t->cur);
		free(t);
		return ret;
	}
	*out = t;
	return 0;
}

SHMT_API int shmtrace_open(const char *name, shmtrace_t **out)
{
	return handle_open(name, false, out);
}

SHMT_API int shmtrace_open_wait(const char *name, shmtrace_t **out)
{
	return handle_open(name, true, out);
}

/* Flushes and frees the blocks claimed through a, then unmaps it. */
static void att_close(shmtrace_t *t, struct shmt_att *a)
{
	struct shmt_view *v = &a->v;

	/* the threads that wrote through this handle are done; blocks of
	 * other handles of this process (other threads, other libraries) are
	 * still being written */
	if (shmt_producer_lock(t, a) == 0) {
		for (uint32_t i = 0; i < v->nblocks; i++) {
			struct shmt_block *b = shmt_block_at(v, i);

			if (!shmt_claimed_get(a, i) || load_relaxed(&b->state) != SHMT_BLOCK_OWNED ||
			    load_relaxed(&b->pid) != shmt_pid || load_relaxed(&b->start_time) != shmt_start)
				continue;
			shmt_flush_block_locked(v, i);
			store_release(&b->state, SHMT_BLOCK_FREE);
			shmt_claimed_set(a, i, false);
		}
		shmt_unlock(v);
		shmt_wake_collector(v);
	}
	for (int i = 0; i < SHMT_TLS_SLOTS; i++)
		if (shmt_tls[i].id == a->id)
			shmt_tls[i].id = 0;
	att_free(a);
}

SHMT_API void shmtrace_close(shmtrace_t *t)
{
	struct shmt_att *a, *prev;

	if (!t)
		return;
	shmt_registry_remove(t);
	for (a = t->cur; a; a = prev) {
		prev = a->prev;
		att_close(t, a);
	}
	shmt_intern_cache_free(t);
	pthread_mutex_destroy(&t->local);
	free(t->ids_used);
	free(t);
}

SHMT_API int shmtrace_stats(shmtrace_t *t, struct shmtrace_stats *st)
{
	struct shmt_header *h;
	struct shmt_loss l;
	struct shmt_att *a;

	if (!t || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	a = shmt_attach_current(t);
	if (!a)
		return -ENOENT;
	h = a->v.h;
	st->capacity = a->v.capacity;
	st->head = load_acquire(&h->head.v);
	st->tail = load_acquire(&h->tail.v);
	shmt_loss_read(&a->v, &l, true);
	/* the caller's view: every record its calls staged that the ring did
	 * not get, whatever the cause (stat and the exports tell them apart) */
	st->dropped = l.dropped + l.lock_dropped + l.orphaned;
	st->overwritten = l.overwritten;
	st->lock_timeouts = l.lock_timeouts;
	st->mode = a->v.mode;
	st->strings = load_acquire(&h->strings);
	return 0;
}

SHMT_API int shmtrace_attach_stats(shmtrace_t *t, struct shmtrace_attach_stats *st)
{
	struct shmt_att *a;

	if (!t || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	a = shmt_attach_current(t);
	pthread_mutex_lock(&t->local);
	st->attached = a != NULL;
	st->late = a && (a->slot_flags & SHMT_THREAD_LATE);
	st->attempts = t->attach_attempts;
	st->reattaches = t->reattaches;
	pthread_mutex_unlock(&t->local);
	return 0;
}

SHMT_API const char *shmtrace_strerror(int err)
{
	switch (err) {
	case -EPROTO: return "not a shmtrace ring, or a ring format version this library cannot read";
	case -EBADMSG: return "ring header inconsistent or segment truncated";
	case -EPERM: return "ring owned by another user or writable by others";
	case -ETIMEDOUT: return "ring lock held too long (owner wedged); records dropped and counted";
	case -ENOSPC: return "no space (ring, string table, or /dev/shm full)";
	case -EXDEV: return "ring created in another pid namespace (set SHMTRACE_ALLOW_PIDNS=1 to attach anyway)";
	default: return strerror(err < 0 ? -err : err);
	}
}
