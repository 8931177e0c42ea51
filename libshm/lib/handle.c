/* SPDX-License-Identifier: MIT */
/*
 * handle.c - a producer handle: open, close (its attachments' blocks
 * flushed and freed), the ring's counters, and error strings. Attaching
 * and moving between segments is attach.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "producer.h"

/* Opens a handle; with wait, one that need not find its ring yet. */
/* SHMTRACE_LOCK_TIMEOUT_MS: a whole number of milliseconds up to a minute
 * (0: only try the lock); anything else (a sign, a unit, a number that
 * would overflow the nanoseconds) leaves the default. */
#define LOCK_TIMEOUT_MS_MAX 60000ull
/* SHMTRACE_LOCK_TIMEOUT_MS, whole milliseconds up to a minute, sets every
 * wait of t's for the lock; unset or garbage, the defaults (core.h). */
static void lock_timeouts_from_env(shmtrace_t *t)
{
	const char *ms = getenv("SHMTRACE_LOCK_TIMEOUT_MS");
	unsigned long long v;
	char *end;

	t->lock_timeout_ns = SHMT_LOCK_TIMEOUT_NS;
	t->full_wait_ns = SHMT_FULL_WAIT_NS;
	if (!ms || *ms < '0' || *ms > '9')
		return;
	errno = 0;
	v = strtoull(ms, &end, 10);
	if (errno || *end || v > LOCK_TIMEOUT_MS_MAX)
		return;
	t->lock_timeout_ns = t->full_wait_ns = v * 1000000ull;
}

/* The first touch of each page of the ring in this process, paid here
 * rather than by span calls (shmt_view_prefault()), unless
 * SHMTRACE_PREFAULT=0. Only at open: a handle that attaches later does so
 * inside a call, where reading the whole ring would be the stall it saves. */
static void prefault_unless_told(struct shmt_att *a)
{
	const char *e = getenv("SHMTRACE_PREFAULT");

	if (!(e && strcmp(e, "0") == 0))
		a->prefaulted = shmt_view_prefault(&a->v);
}

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
	lock_timeouts_from_env(t);
	t->attach_attempts = 1;
	ret = shmt_att_open(t, &t->cur);
	if (ret < 0 && !(wait && ret == -ENOENT)) {
		pthread_mutex_destroy(&t->local);
		free(t);
		return ret;
	}
	if (t->cur) {
		shmt_clock_adopt(&t->cur->v.clock);
		prefault_unless_told(t->cur);
	} else
		t->last_look_ns = shmt_mono_ns();

	ret = shmt_registry_add(t);
	if (ret < 0) {
		pthread_mutex_destroy(&t->local);
		if (t->cur)
			shmt_att_free(t->cur);
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

/* Hands over (a collector draining a ring of minor 10), or flushes and
 * frees, the blocks claimed through a, then unmaps it. */
static void att_close(shmtrace_t *t, struct shmt_att *a)
{
	struct shmt_view *v = &a->v;

	/* the threads that wrote through this handle are done; blocks of
	 * other handles of this process (other threads, other libraries) are
	 * still being written */
	bool handoff = shmt_handoff_on(v);
	/* copying: the blocks this process's threads handed over themselves
	 * (spares, full blocks waiting to be sequenced) first, in order; what
	 * the ring has no room for is dropped and counted */
	struct shmt_full *order = NULL;
	uint32_t nfull = handoff ? 0 : shmt_full_list(v, SHMT_FULL_PROCESS, &order), left;

	if (handoff || shmt_producer_lock(a, t->lock_timeout_ns) == 0) {
		/* with no collector, the full ones sequenced in place where a
		 * thread would sequence its own (asked under the lock: a
		 * collector that came meanwhile reads slots, not these) */
		if (nfull)
			shmt_flush_full_locked(v, order, nfull, UINT64_MAX,
					       SHMT_FLUSH_OWN | (!handoff && shmt_self_sequence_on(v) ?
								 SHMT_FLUSH_IN_PLACE : 0), &left);
		for (uint32_t i = 0; i < v->nblocks; i++) {
			struct shmt_block *b = shmt_block_at(v, i);

			if (!shmt_claimed_get(a, i) || load_relaxed(&b->state) != SHMT_BLOCK_OWNED ||
			    load_relaxed(&b->pid) != shmt_pid || load_relaxed(&b->start_time) != shmt_start)
				continue;
			/* handed over: the collector flushes it after the full
			 * blocks before it */
			if (handoff) {
				shmt_block_leave(v, i);
			} else {
				shmt_flush_block_locked(v, i);
				store_release(&b->state, SHMT_BLOCK_FREE);
			}
			shmt_claimed_set(a, i, false);
		}
		if (!handoff)
			shmt_unlock(v);
		shmt_wake_collector(v);
	}
	free(order);
	for (int i = 0; i < SHMT_TLS_SLOTS; i++) {
		if (shmt_tls[i].id != a->id)
			continue;
		shmt_name_at_release(t, a, &shmt_tls[i]);
		shmt_slot_name_lost(a, &shmt_tls[i]);
		shmt_tls[i].id = 0;
	}
	shmt_att_free(a);
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
	/* blocks handed over (minor 10) wait for the collector as the ring's
	 * records do: a caller pacing itself on head - tail counts them */
	if (a->v.minor >= SHMT_MINOR_HANDOFF) {
		uint64_t full = load_relaxed(&h->full_blocks.v);

		st->head += (full < a->v.nblocks ? full : a->v.nblocks) * a->v.block_records;
	}
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
	case -ENODEV: return "not a shmtrace ring: not a regular file (a FIFO, directory or socket)";
	case -EPERM: return "ring owned by another user and not shared with our group, or writable by others";
	case -ETIMEDOUT: return "ring lock held too long (owner wedged); records dropped and counted";
	case -ENOSPC: return "no space (ring, string table, or /dev/shm full)";
	case -EXDEV: return "ring created in another pid namespace (set SHMTRACE_ALLOW_PIDNS=1 to attach anyway)";
	case -EOPNOTSUPP: return "ring made by a shmtrace older than triggers (ring format 1.9)";
	default: return strerror(err < 0 ? -err : err);
	}
}
