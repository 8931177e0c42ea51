/* SPDX-License-Identifier: MIT */
/*
 * trigger.c - the header's trigger counter (ring format 1.9): bumped by a
 * producer's shmtrace_trigger() once its record is staged, read by whoever
 * keeps the ring as a flight recorder, who sleeps on it as a futex so that
 * a trigger wakes it at once, not at its next poll.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ring_reader.h"
#include "ring_writer.h"

/* The futex word: the counter's low 32 bits (little-endian). */
static uint32_t *futex_word(const struct shmt_view *v)
{
	return (uint32_t *)&v->h->triggers.v;
}

uint64_t shmt_ring_triggers(const struct shmt_view *v)
{
	/* pairs with the release add in shmt_trigger_note(): the trigger's
	 * record, staged before, is in its block for whoever reads it */
	return v->minor >= SHMT_MINOR_TRIGGER ? load_acquire(&v->h->triggers.v) : 0;
}

void shmt_trigger_note(struct shmt_view *v)
{
	struct shmt_header *h = v->h;

	if (v->minor < SHMT_MINOR_TRIGGER)
		return;
	__atomic_fetch_add(&h->triggers.v, 1, __ATOMIC_RELEASE);
	/* the bump before the look at trigger_waiting, as the waiter sets it
	 * before its look at the counter: one of the two sees the other */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (load_relaxed(&h->trigger_waiting.v))
		syscall(SYS_futex, futex_word(v), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int shmt_trigger_wait(struct shmt_view *v, uint64_t seen, uint64_t timeout_ns)
{
	struct shmt_header *h = v->h;
	struct timespec ts = { (time_t)(timeout_ns / 1000000000ull),
			       (long)(timeout_ns % 1000000000ull) };
	int ret = 0;

	if (v->minor < SHMT_MINOR_TRIGGER) {
		nanosleep(&ts, NULL);
		return 0;
	}
	store_relaxed(&h->trigger_waiting.v, 1);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (load_relaxed(&h->triggers.v) == seen) {
#if SHMT_TSAN
		/* ThreadSanitizer runs a signal's handler only inside a call it
		 * intercepts, which a raw futex is not (collector/drain.c) */
		if (nanosleep(&ts, NULL) < 0)
			ret = -errno;
#else
		if (syscall(SYS_futex, futex_word(v), FUTEX_WAIT, (uint32_t)seen, &ts, NULL, 0) < 0 &&
		    errno == EINTR)
			ret = -EINTR;
#endif
	}
	store_relaxed(&h->trigger_waiting.v, 0);
	return ret;
}
