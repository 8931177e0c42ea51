/* SPDX-License-Identifier: MIT */
/*
 * handoff.c - staging blocks changing hands without the lock (minor 10):
 * a producer claims a free block by a compare-and-swap, and, while a
 * collector drains the ring, hands its block over when it is full instead
 * of copying it into the ring under the lock; the collector flushes the
 * full blocks, oldest claim first, and frees them. So a producer's call
 * never copies records and never waits on another process while a
 * collector keeps blocks free (docs/DESIGN.md, "Handing a full block
 * over").
 */
#include <errno.h>
#include <stdlib.h>

#include "ring_reader.h"
#include "ring_writer.h"

/* Takes block i from FREE to CLAIMING by tid: 0, or -EAGAIN (not free). */
static int claim_at(struct shmt_view *v, uint32_t i, uint32_t tid)
{
	struct shmt_block *b = shmt_block_at(v, i);
	uint32_t free_ = SHMT_BLOCK_FREE;

	if (!b || load_relaxed(&b->state) != SHMT_BLOCK_FREE ||
	    load_relaxed(&b->written) != load_relaxed(&b->taken))
		return -EAGAIN;	/* a free block still holding records: the collector's */
	if (!__atomic_compare_exchange_n(&b->state, &free_, SHMT_BLOCK_CLAIMING | tid << 8, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return -EAGAIN;
	return 0;
}

/* Sets up block b, CLAIMING by us, for owner me: its owner words, a claim
 * number, and the open-span stack of block from (NULL: an empty one). */
static void set_up(struct shmt_view *v, struct shmt_block *b, const struct shmt_owner *me,
		   struct shmt_block *from)
{
	store_relaxed(&b->pid, me->pid);
	store_relaxed(&b->tid, me->tid);
	store_relaxed(&b->start_time, me->start_time);
	/* in a ring before minor 10 these words are reserved; release: a
	 * reader that sees this number sees the claim (adopt.c) */
	if (v->minor >= SHMT_MINOR_HANDOFF)
		store_release(&b->claim_no, fetch_add(&v->h->claim_seq.v, 1));
	store_relaxed(&b->open_closing, 0);
	/* an ask of the block's last life is not for us */
	store_relaxed(&b->ask, 0);
	if (from && v->minor >= 2) {
		/* our own words: a peer that scribbled on them only hides spans */
		uint32_t d = load_relaxed(&from->open_depth);

		for (uint32_t k = 0; k < SHMT_OPEN_MAX; k++) {
			*shmt_block_open(b, k) = *shmt_block_open(from, k);
			b->open_roles[k] = from->open_roles[k];
		}
		store_relaxed(&b->open_depth, d);
	} else {
		store_relaxed(&b->open_depth, 0);
	}
}

/* Sets up block i, CLAIMING by us, for owner me with the open-span stack
 * of block from (NULL: an empty one); then, if from is given, hands from
 * over (FULL); then makes i OWNED. A reader sees the stack on exactly one
 * OWNED block, or, in the instant between, on none. */
static void own(struct shmt_view *v, uint32_t i, const struct shmt_owner *me,
		struct shmt_block *from)
{
	struct shmt_block *b = shmt_block_at(v, i);

	set_up(v, b, me, from);
	if (from) {
		/* counted first: full_blocks is never below the blocks in
		 * state FULL, so a reader that sees it 0 may skip the look */
		fetch_add(&v->h->full_blocks.v, 1);
		/* pairs with the collector's acquire load of the state: the
		 * records it flushes are the owner's last */
		store_release(&from->state, SHMT_BLOCK_FULL);
		SHMT_HOOK("handoff-full");
	}
	/* pairs with the acquire load of readers: the set-up is seen first */
	store_release(&b->state, SHMT_BLOCK_OWNED);
}

bool shmt_ring_has_room(const struct shmt_view *v, struct shmt_block *b)
{
	uint64_t pending = load_acquire(&b->written) - load_relaxed(&b->taken);
	uint64_t head = load_relaxed(&v->h->head.v), tail = load_acquire(&v->h->tail.v);

	/* a count past a block or the ring (forged, or a ring smaller than
	 * a block) is the flush's to bound: it moves what fits, counting the
	 * rest, rather than waiting for room that never comes */
	if (v->mode != SHMTRACE_MODE_DISCARD || pending > v->block_records ||
	    pending > v->capacity || tail > head)
		return true;
	return head - tail + pending <= v->capacity;
}

/* Claims the first free block from block from on (cyclic) for tid: its
 * index, CLAIMING, or -ENOSPC. */
static int claim_from(struct shmt_view *v, uint32_t tid, uint32_t from)
{
	for (uint32_t k = 0; k < v->nblocks; k++) {
		uint32_t i = (from + k) % v->nblocks;

		if (claim_at(v, i, tid) == 0)
			return (int)i;
	}
	return -ENOSPC;
}

int shmt_block_claim(struct shmt_view *v, const struct shmt_owner *me, uint32_t from)
{
	int i = claim_from(v, me->tid, from);

	if (i >= 0)
		own(v, (uint32_t)i, me, NULL);
	return i;
}

int shmt_block_claim_copy(struct shmt_view *v, uint32_t tid, uint32_t from,
			  const struct shmt_block *of)
{
	/* what readers see of the copy once it is sequenced: its records'
	 * thread, and nothing open (the thread's stack stays on its block) */
	const struct shmt_owner o = { .pid = load_relaxed(&of->pid), .tid = load_relaxed(&of->tid),
				      .start_time = load_relaxed(&of->start_time) };
	int i = claim_from(v, tid, from);

	if (i >= 0)
		set_up(v, shmt_block_at(v, (uint32_t)i), &o, NULL);
	return i;
}

int shmt_block_handoff(struct shmt_view *v, const struct shmt_owner *me, uint32_t old)
{
	struct shmt_block *ob = shmt_block_at(v, old);

	if (!ob)
		return -EINVAL;
	for (uint32_t k = 1; k < v->nblocks; k++) {
		uint32_t i = (old + k) % v->nblocks;

		if (claim_at(v, i, me->tid) == 0) {
			SHMT_HOOK("handoff-claimed");
			own(v, i, me, ob);
			shmt_wake_collector(v);
			return (int)i;
		}
	}
	return -ENOSPC;
}

void shmt_block_leave(struct shmt_view *v, uint32_t idx)
{
	struct shmt_block *b = shmt_block_at(v, idx);

	if (!b)
		return;
	if (load_relaxed(&b->written) == load_relaxed(&b->taken)) {
		store_release(&b->state, SHMT_BLOCK_FREE);
		return;
	}
	/* counted first, as in own(); the state pairs with the collector's
	 * acquire load */
	fetch_add(&v->h->full_blocks.v, 1);
	store_release(&b->state, SHMT_BLOCK_FULL);
	shmt_wake_collector(v);
}

bool shmt_handoff_on(const struct shmt_view *v)
{
	/* the word is the collector's; forged, it only makes producers hand
	 * blocks over until none is free, then copy as before */
	return v->minor >= SHMT_MINOR_HANDOFF && load_relaxed(&v->h->collector_pid.v) != 0;
}

/*
 * Blocks sequenced in place keep their records until a collector has
 * written them out and frees them; with none draining, nobody does. So a
 * producer sequences its own only while the ring holds under a quarter of
 * the blocks' records (a collector keeps at most a quarter of the blocks
 * the same way: hold.c's releasable()), and copies past that, as before:
 * the pool stays three quarters free for the threads' blocks (a collector
 * that left may hold up to a quarter more until the next one frees them).
 * Every block a producer sequences is full (a last one, partly filled, is
 * copied: stage.c, core.c), so a quarter of the blocks' records is a
 * quarter of the blocks. tail and head are peers' words: a tail past the
 * head (forged) says no.
 */
bool shmt_self_sequence_on(const struct shmt_view *v)
{
	uint64_t head, tail;

	if (v->minor < SHMT_MINOR_IN_PLACE || v->mode != SHMTRACE_MODE_DISCARD || shmt_handoff_on(v))
		return false;
	head = load_relaxed(&v->h->head.v);
	tail = load_relaxed(&v->h->tail.v);
	return tail <= head && head - tail < (uint64_t)(v->nblocks / 4) * v->block_records;
}

static int cmp_claim(const void *a, const void *b)
{
	const struct shmt_full *x = a, *y = b;

	return x->no < y->no ? -1 : x->no > y->no;
}

/* Whether block b's owner words are of's (NULL: anyone's; tid 0: any
 * thread of its process). */
static bool owned_by(struct shmt_block *b, const struct shmt_owner *of)
{
	return !of || (load_relaxed(&b->pid) == of->pid && (!of->tid || load_relaxed(&b->tid) == of->tid) &&
		       load_relaxed(&b->start_time) == of->start_time);
}

uint32_t shmt_full_blocks(const struct shmt_view *v, const struct shmt_owner *of, struct shmt_full *order)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < v->nblocks; i++) {
		struct shmt_block *b = shmt_block_at(v, i);
		uint64_t no;

		/* pairs with the owner's release store of the state */
		if (load_acquire(&b->state) != SHMT_BLOCK_FULL)
			continue;
		no = load_relaxed(&b->claim_no);
		if (!owned_by(b, of))
			continue;
		/* an owner read in one life and a claim in the next would
		 * list another thread's block as of's: the same life twice */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (of && (load_relaxed(&b->state) != SHMT_BLOCK_FULL || load_relaxed(&b->claim_no) != no))
			continue;
		order[n++] = (struct shmt_full){ .no = no, .i = i, .seq = UINT64_MAX };
	}
	qsort(order, n, sizeof(*order), cmp_claim);
	return n;
}

uint64_t shmt_flush_full_locked(struct shmt_view *v, struct shmt_full *order, uint32_t n,
				uint64_t most, unsigned flags, uint32_t *left)
{
	uint64_t done = 0;
	uint32_t k;

	for (k = 0; k < n; k++) {
		struct shmt_block *b = shmt_block_at(v, order[k].i);
		uint64_t w, t, pending;

		if (!b || load_acquire(&b->state) != SHMT_BLOCK_FULL)
			continue;
		/* full again in a later life since it was listed (freed and
		 * claimed in between): its order is not the list's, so stop
		 * here and let the next list place it; in a list of one
		 * owner's blocks it is another thread's now, and skipped */
		if (load_relaxed(&b->claim_no) != order[k].no) {
			if (flags & SHMT_FLUSH_OWN)
				continue;
			break;
		}
		/* pairs with the owner's release store of the state */
		w = load_acquire(&b->written);
		t = load_relaxed(&b->taken);
		/* what the flush moves of it: counts only a forger makes
		 * clamped as the flush clamps them, so that such a block
		 * neither stops the list for good nor wraps the sum */
		pending = w <= t ? 0 : w - t > v->block_records ? v->block_records : w - t;
		/* a discard ring takes a block only whole, so that the pool
		 * keeps what the ring has no room for yet, in order (unless
		 * the flush is the blocks' last: then what does not fit is
		 * dropped and counted) */
		if (done + pending > most || ((flags & SHMT_FLUSH_KEEP) && !shmt_ring_has_room(v, b)))
			break;
		if (flags & SHMT_FLUSH_IN_PLACE) {
			/* it takes the block off full_blocks */
			order[k].n = (uint32_t)shmt_sequence_block_locked(v, order[k].i, &order[k].seq,
									  &order[k].taken);
			done += order[k].n;
		} else {
			done += shmt_flush_block_locked(v, order[k].i);
			store_release(&b->state, SHMT_BLOCK_FREE);
			__atomic_fetch_sub(&v->h->full_blocks.v, 1, __ATOMIC_RELAXED);
		}
	}
	*left = n - k;
	return done;
}

uint32_t shmt_reap_claims(struct shmt_view *v)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < v->nblocks; i++) {
		struct shmt_block *b = shmt_block_at(v, i);
		uint32_t st = load_relaxed(&b->state);

		if (SHMT_BLOCK_KIND(st) != SHMT_BLOCK_CLAIMING || shmt_tid_alive(SHMT_BLOCK_CLAIMER(st)))
			continue;
		/* the claimer died between its swap and OWNED: the block was
		 * free, and holds nothing of its */
		if (__atomic_compare_exchange_n(&b->state, &st, SHMT_BLOCK_FREE, false,
						__ATOMIC_RELEASE, __ATOMIC_RELAXED))
			n++;
	}
	return n;
}
