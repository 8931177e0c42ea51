/* SPDX-License-Identifier: MIT */
/*
 * attach.c - a handle's attachments to successive segments behind one
 * ring name.
 *
 * A handle writes into its current attachment (struct shmt_att). Off the
 * hot path, at most every SHMT_LOOK_NS, it looks at the ring's name: a
 * handle opened before its ring existed attaches once it appears, and one
 * whose ring was removed and made again moves to the new one (its string
 * ids remapped, intern_cache.c). A ring removed or replaced through the
 * library is marked retired, which every call reads: then the look comes
 * every SHMT_LOOK_RETIRED_NS, so the handle moves within a millisecond of
 * the new ring's appearance.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>

#include "producer.h"

/* Maps the ring behind t's name as a new attachment. Returns 0 or -errno. */
int shmt_att_open(shmtrace_t *t, struct shmt_att **out)
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

void shmt_att_free(struct shmt_att *a)
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
	if (shmt_att_open(t, &a) < 0)
		return old;
	if (old) {
		a->slot_flags = SHMT_THREAD_REATTACHED;
		if (shmt_intern_remap(t, a) < 0) {
			shmt_att_free(a);
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

bool shmt_att_drained(const struct shmt_att *a)
{
	uint64_t pid = load_relaxed(&a->v.h->collector_pid.v);
	int saved = errno;
	bool alive = pid && pid <= INT32_MAX && (kill((pid_t)pid, 0) == 0 || errno == EPERM);

	errno = saved;
	return alive;
}

bool shmt_att_draining(struct shmt_att *a)
{
	uint64_t now = shmt_mono_ns(), seen = load_relaxed(&a->draining_ns), pid;
	int saved;
	bool on;
	char st;

	if (seen && now - seen < SHMT_DRAINING_LOOK_NS)
		return load_relaxed(&a->draining);
	saved = errno;
	pid = load_relaxed(&a->v.h->collector_pid.v);
	/* stopped (SIGSTOP, a debugger) or dead unreaped (a zombie): it
	 * drains nothing meanwhile; a state not readable (another user's
	 * process under hidepid) is the word of kill() alone */
	st = pid && pid <= INT32_MAX ? shmt_tid_state((uint32_t)pid) : 0;
	on = shmt_att_drained(a) && st != 'T' && st != 't' && st != 'Z' && st != 'X' && st != 'x';
	errno = saved;
	store_relaxed(&a->draining, on);
	store_relaxed(&a->draining_ns, now);
	return on;
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
			store_relaxed(&t->orphan, !shmt_att_drained(a));
		return a;
	}
	if (a && a->v.dev == dev && a->v.ino == ino)
		return a;
	pthread_mutex_lock(&t->local);
	a = attach_locked(t);
	pthread_mutex_unlock(&t->local);
	return a;
}
