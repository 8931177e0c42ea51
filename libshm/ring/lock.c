/* SPDX-License-Identifier: MIT */
/*
 * lock.c - the ring's robust, process-shared mutex, and the repair done by
 * whoever inherits it from a dead owner.
 *
 * Every wait is bounded: an owner that unmapped the ring before dying is
 * never reported dead by the kernel (measured: docs/DESIGN.md, "Why a
 * robust, process-shared mutex"; tests/test_ring_mp.c), so a producer
 * that cannot get the lock in time gives up, counts what it drops, and for
 * a while only tries the lock instead of waiting on it.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "ring_writer.h"


void (*shmt_test_hook)(const char *where);

/*
 * The links glibc keeps in a robust mutex it holds: the mutex is on its
 * thread's robust list, and the unlock unlinks it by writing through the
 * mutex's own __list pointers, which lie in the segment, where any writer
 * of the ring may point them anywhere while we hold it: a write of its
 * choice into our process. So they are kept here as glibc set them when
 * it gave us the lock, and put back just before we give it back (an
 * honest peer never writes a mutex it does not hold). The window left is
 * the nanoseconds between, as for shmt_mutex_sane()'s check.
 */
static __thread struct {
	const pthread_mutex_t *m;
	__pthread_list_t list;
} held;

static void links_keep(pthread_mutex_t *m)
{
	held.m = m;
	memcpy(&held.list, (const void *)&m->__data.__list, sizeof(held.list));
}

static void links_restore(pthread_mutex_t *m)
{
	if (held.m != m)
		return;
	memcpy((void *)&m->__data.__list, &held.list, sizeof(held.list));
	held.m = NULL;
}

int shmt_mutex_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int ret;

	ret = pthread_mutexattr_init(&a);
	if (ret)
		return -ret;
	ret = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	if (!ret)
		ret = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (!ret)
		ret = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return -ret;
}

/* The kind glibc gives a robust, process-shared mutex (computed once). */
static int robust_kind(void)
{
	static int kind = -1;
	int k = load_relaxed(&kind);
	pthread_mutex_t ref;

	if (k != -1)
		return k;
	memset(&ref, 0, sizeof(ref));
	if (shmt_mutex_init(&ref) < 0)
		return -1;
	k = ref.__data.__kind;
	pthread_mutex_destroy(&ref);
	store_relaxed(&kind, k);
	return k;
}

/*
 * Returns true if the mutex bytes look like a robust shared mutex in a
 * state glibc can handle. Random bytes there can make glibc abort or hang
 * (docs/DESIGN.md), so shmt_lock() and shmt_unlock() check before every
 * call into glibc on it. This reads glibc's struct __pthread_mutex_s,
 * which is ABI-stable.
 */
bool shmt_mutex_sane(const struct shmt_view *v)
{
	const struct __pthread_mutex_s *d = &v->h->mutex.__data;
	int lock, owner, kind, ref_kind = robust_kind();
	unsigned count;

	if (ref_kind == -1)
		return false;
	lock = load_relaxed(&d->__lock);
	owner = load_relaxed(&d->__owner);
	kind = load_relaxed(&d->__kind);
	count = load_relaxed(&d->__count);
	if (kind != ref_kind)
		return false;
	if (count > 1)
		return false;
	/* the futex word holds the owner's tid (plus the waiters and
	 * owner-died bits) or 0; the kernel clears the tid of an owner that
	 * died holding it and sets owner-died (0x40000000), which glibc
	 * reports as EOWNERDEAD: sane. Waiters and no owner is not. */
	if ((unsigned)lock == 0x80000000u)
		return false;
	if (owner < 0 && owner != 0x7fffffff /* PTHREAD_MUTEX_NOTRECOVERABLE */)
		return false;
	return true;
}

/*
 * Finishes or undoes whatever the dead owner was doing, from the journal.
 * Records a flush had written but not published are never exposed (head is
 * the only publication), strings not yet counted are rolled back.
 */
void shmt_repair(struct shmt_view *v)
{
	struct shmt_header *h = v->h;
	struct shmt_journal *j = &h->journal;
	uint32_t n;

	if (j->active) {
		uint32_t step = shmt_journal_step(v);
		struct shmt_block *b = shmt_block_at(v, j->block);

		uint64_t head = load_relaxed(&h->head.v);
		/* a peer's word: read once, the value checked the one stored */
		uint64_t hb = load_relaxed(&j->head_before);

		if (!shmt_journal_published(j, head)) {
			/* undo: nothing of it was published; the block keeps its
			 * records. A flush only moves head on: a journal that
			 * would move it on is forged, and leaves it */
			if (hb <= head)
				store_release(&h->head.v, hb);
			bool undone = b && load_relaxed(&b->state) == SHMT_BLOCK_SEQUENCED &&
				      load_relaxed(&b->seq0) == hb;

			if (undone && step == SHMT_JOURNAL_COPY) {
				/* a copy nobody reads: emptied, then free */
				store_release(&b->taken, load_relaxed(&b->written));
				store_release(&b->state, SHMT_BLOCK_FREE);
			} else if (undone && step == SHMT_JOURNAL_IN_PLACE) {
				/* a block sequenced in place is full again */
				store_release(&b->state, SHMT_BLOCK_FULL);
			}
		} else {
			uint64_t taken = 0;
			struct shmt_block *src = shmt_block_at(v, shmt_journal_moves(v, &taken));

			/* stage 1 here: died between storing head and the stage */
			if (j->stage <= 2)
				fetch_add(&h->dropped.v, j->ndrop);
			/* sequenced in place: the block is the ring's as it is;
			 * only full_blocks still counts it (a count at 0 was
			 * forged, and is not wrapped) */
			if (step == SHMT_JOURNAL_IN_PLACE && j->stage <= 2 && load_relaxed(&h->full_blocks.v))
				__atomic_fetch_sub(&h->full_blocks.v, 1, __ATOMIC_RELAXED);
			/* a flush's block, or the one a copy was made of: its
			 * records are the ring's. A flush moves taken on, and
			 * never past written: a journal that says otherwise is
			 * forged, and moves nothing (its owner's next records
			 * would fall behind taken, where nobody moves them) */
			if (src && taken >= load_relaxed(&src->taken) && taken <= load_relaxed(&src->written))
				store_release(&src->taken, taken);
		}
		j->active = 0;
	}

	/* strings: everything past the published count is rolled back */
	n = load_relaxed(&h->strings);
	if (n < 1 || n > v->max_strings + 1) {
		n = n < 1 ? 1 : v->max_strings + 1;
		store_release(&h->strings, n);
	}
	for (uint32_t i = 0; i < v->hash_slots; i++) {
		uint16_t *slot = shmt_hash_at(v, i);

		if (*slot >= n)
			*slot = 0;
	}
	{
		uint64_t end = 1;

		if (n > 1) {
			/* n - 1 <= max_strings: clamped above */
			struct shmt_string s = *shmt_string_at(v, n - 1);

			end = (uint64_t)s.off + s.len + 1;
		}
		if (end > v->string_bytes)
			end = v->string_bytes;
		h->heap_used = (uint32_t)end;
	}
	j->intern_active = 0;
	fetch_add(&h->lock_recoveries, 1);
}

static void deadline_after(struct timespec *ts, clockid_t clk, uint64_t ns)
{
	clock_gettime(clk, ts);
	ts->tv_sec += (time_t)(ns / 1000000000ull);
	ts->tv_nsec += (long)(ns % 1000000000ull);
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static bool past(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > deadline->tv_sec ||
	       (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

/*
 * Mutex bytes glibc cannot handle (forged by a writer of the ring, or
 * torn): treated as a lock held by a wedged owner. A try fails (-EBUSY);
 * a wait looks again every millisecond until the deadline, then times out
 * as a wait on a held lock does (counted). Returns 0 once the bytes are
 * sane again, with the deadline left to the wait.
 */
static int wait_sane(struct shmt_view *v, uint64_t timeout_ns, struct timespec *deadline)
{
	struct timespec nap = { 0, 1000000 };

	if (!timeout_ns)
		return -EBUSY;
	deadline_after(deadline, CLOCK_MONOTONIC, timeout_ns);
	do {
		nanosleep(&nap, NULL);
		if (shmt_mutex_sane(v))
			return 0;
	} while (!past(deadline));
	fetch_add(&v->h->lock_timeouts.v, 1);
	return -ETIMEDOUT;
}

/*
 * Whether the lock's owner, the tid its futex word names, is stopped
 * (SIGSTOP, a debugger: 'T' or 't' in /proc/TID/stat), so that it will
 * not release the lock before someone continues it. A holder that is only
 * descheduled ('R', 'S', 'D') will run again soon. A tid not found, or an
 * owner in another pid namespace (the tid means another thread here), is
 * not known to be stopped: the wait goes on to its timeout.
 */
static bool owner_stopped(const struct shmt_view *v)
{
	char st = shmt_tid_state((uint32_t)load_relaxed(&v->h->mutex.__data.__lock) & 0x3fffffffu);

	return st == 'T' || st == 't';
}

/*
 * Waits for the lock until the deadline, giving up early (ETIMEDOUT) once
 * its owner is seen stopped, looked at every SHMT_LOCK_STOPPED_NS: a
 * stopped holder costs the waiter that, not the timeout. Returns what
 * pthread_mutex_clocklock() does.
 */
static int wait_lock(struct shmt_view *v, const struct timespec *deadline)
{
	pthread_mutex_t *m = &v->h->mutex;

	for (;;) {
		struct timespec slice;
		int ret;

		deadline_after(&slice, CLOCK_MONOTONIC, SHMT_LOCK_STOPPED_NS);
		if (slice.tv_sec > deadline->tv_sec ||
		    (slice.tv_sec == deadline->tv_sec && slice.tv_nsec > deadline->tv_nsec))
			slice = *deadline;
#if SHMT_TSAN
		/* ThreadSanitizer intercepts neither clocklock nor, for
		 * EOWNERDEAD, timedlock: under it, wait with trylock (whose
		 * interceptor knows EOWNERDEAD) and short naps instead */
		struct timespec nap = { 0, 20000 };

		for (;;) {
			nanosleep(&nap, NULL);
			if (!shmt_mutex_sane(v))
				return ETIMEDOUT;
			ret = pthread_mutex_trylock(m);
			if (ret != EBUSY)
				break;
			if (past(&slice)) {
				ret = ETIMEDOUT;
				break;
			}
		}
#else
		ret = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &slice);
#endif
		if (ret != ETIMEDOUT || past(deadline) || owner_stopped(v))
			return ret;
		SHMT_HOOK("lock-slice");
	}
}

/*
 * Takes the ring lock, waiting at most timeout_ns (0: only try), and less
 * when its owner is stopped (wait_lock()). Repairs the
 * ring if the previous owner died. Returns 0, -ETIMEDOUT (counted in the
 * header), -EBUSY for a failed try, or -ENOTRECOVERABLE. Mutex bytes that
 * are not a sane robust mutex (shmt_mutex_sane()) are never handed to
 * glibc, which could abort on them: they count as a lock held too long.
 * (A writer who rewrites them between the check and glibc's read wins the
 * race; the check closes the door, not the window.)
 */
int shmt_lock(struct shmt_view *v, uint64_t timeout_ns)
{
	pthread_mutex_t *m = &v->h->mutex;
	struct timespec ts;
	bool deadline_set = false;
	int ret;

	if (unlikely(!shmt_mutex_sane(v))) {
		ret = wait_sane(v, timeout_ns, &ts);
		if (ret < 0)
			return ret;
		deadline_set = true;
	}
	ret = pthread_mutex_trylock(m);
	if (ret == EBUSY && timeout_ns) {
		if (!deadline_set)
			deadline_after(&ts, CLOCK_MONOTONIC, timeout_ns);
		ret = wait_lock(v, &ts);
	}
	if (ret == 0 || ret == EOWNERDEAD)
		links_keep(m);
	if (ret == EOWNERDEAD) {
		shmt_repair(v);
		pthread_mutex_consistent(m);
		SHMT_HOOK("recovered");
		return 0;
	}
	if (ret == ETIMEDOUT) {
		fetch_add(&v->h->lock_timeouts.v, 1);
		return -ETIMEDOUT;
	}
	return -ret;
}

/* Releases the lock, unless its bytes were forged while we held it: then
 * they are left as they are (glibc could abort on them), and the lock
 * counts as wedged for everyone. Its robust-list links are put back as
 * glibc left them first (links_keep()), whatever the bytes: a mutex left
 * held stays on this thread's robust list, which the kernel walks through
 * those links when the thread exits, marking as its owner dead any word
 * that holds its tid wherever a forged link points. */
void shmt_unlock(struct shmt_view *v)
{
	SHMT_HOOK("unlock");
	links_restore(&v->h->mutex);
	if (likely(shmt_mutex_sane(v)))
		pthread_mutex_unlock(&v->h->mutex);
}
