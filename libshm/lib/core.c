/* SPDX-License-Identifier: MIT */
/*
 * core.c - the bottom of libshm/lib/: the process's identity and the
 * calling thread's slots (the variables every part reads), attachment ids,
 * the ring lock taken for a producer and a thread's block given back. It
 * calls the ring layer only, never another file of libshm/lib/, so that
 * the files above it (docs/DESIGN.md, "Layers") depend on it and not on
 * each other.
 */
#include <errno.h>
#include <stdlib.h>

#include "core.h"

#define WEDGE_NS (1000ull * 1000 * 1000)	/* after a timeout, only try for this long */

uint32_t shmt_pid;
uint64_t shmt_start;
uint64_t shmt_pidns;
uint32_t shmt_fork_gen = 1;
char shmt_pname[SHMT_NAME_LEN];

__thread struct shmt_tls_slot shmt_tls[SHMT_TLS_SLOTS] SHMT_TLS;
__thread uint32_t shmt_tls_tid SHMT_TLS;
__thread uint32_t shmt_tls_tid_gen SHMT_TLS;

static uint64_t g_next_id = 1;

uint64_t shmt_next_att_id(void)
{
	return __atomic_fetch_add(&g_next_id, 1, __ATOMIC_RELAXED);
}

/* Takes the ring lock for a producer: bounded, and after a timeout only
 * tries for a while, so a wedged lock costs each call microseconds, not
 * the wait. Only waits as short as the one that timed out or shorter are
 * cut to a try: a span call's 2 ms timing out says nothing of a thread's
 * exit flush, which waits its 100 ms once. */
int shmt_producer_lock(struct shmt_att *a, uint64_t wait_ns)
{
	uint64_t wedged = load_relaxed(&a->wedged_until);
	int ret;

	if (unlikely(wedged) && shmt_mono_ns() < wedged && wait_ns <= load_relaxed(&a->wedged_wait)) {
		ret = shmt_lock(&a->v, 0);
		if (ret == -EBUSY)
			fetch_add(&a->v.h->lock_timeouts.v, 1);
		return ret;
	}
	ret = shmt_lock(&a->v, wait_ns);
	if (ret == -ETIMEDOUT) {
		store_relaxed(&a->wedged_wait, wait_ns);
		store_relaxed(&a->wedged_until, shmt_mono_ns() + WEDGE_NS);
	} else if (ret == 0 && wedged) {
		store_relaxed(&a->wedged_until, 0);
	}
	return ret;
}

uint32_t shmt_full_list(const struct shmt_view *v, enum shmt_whose whose, struct shmt_full **order)
{
	const struct shmt_owner o = { .pid = shmt_pid, .tid = whose == SHMT_FULL_MINE ? shmt_my_tid() : 0,
				      .start_time = shmt_start };

	*order = NULL;
	if (v->minor < SHMT_MINOR_HANDOFF || !load_relaxed(&v->h->full_blocks.v))
		return 0;
	*order = malloc(v->nblocks * sizeof(**order));
	return *order ? shmt_full_blocks(v, whose == SHMT_FULL_ANY ? NULL : &o, *order) : 0;
}

/* Hands the block over (a collector drains a ring of minor 10), or
 * flushes and frees it, unless the lock cannot be had in time. */
void shmt_slot_release(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s)
{
	shmt_slot_name_lost(a, s);
	if (shmt_handoff_on(&a->v)) {
		/* the collector flushes it after the thread's full blocks */
		shmt_claimed_set(a, s->idx, false);
		shmt_block_leave(&a->v, s->idx);
	} else {
		/* the blocks it handed over itself (a spare, or a full block
		 * waiting to be sequenced) go first; what the ring has no room
		 * for is dropped and counted */
		struct shmt_full *order;
		uint32_t n = shmt_full_list(&a->v, SHMT_FULL_MINE, &order), left;

		if (shmt_producer_lock(a, t->lock_timeout_ns) == 0) {
			/* with no collector, its full ones sequenced in place
			 * where it would sequence them (asked under the lock),
			 * the last block, partly filled, copied after them */
			if (n)
				shmt_flush_full_locked(&a->v, order, n, UINT64_MAX,
						       SHMT_FLUSH_OWN | (shmt_self_sequence_on(&a->v) ?
									 SHMT_FLUSH_IN_PLACE : 0), &left);
			shmt_flush_block_locked(&a->v, s->idx);
			store_release(&s->b->state, SHMT_BLOCK_FREE);
			shmt_claimed_set(a, s->idx, false);
			shmt_unlock(&a->v);
			shmt_wake_collector(&a->v);
		}
		free(order);
	}
	/* on a lock timeout the block stays owned: the collector adopts it
	 * once it sees its owner dead */
	s->id = 0;
}
