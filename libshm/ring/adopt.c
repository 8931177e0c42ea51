/* SPDX-License-Identifier: MIT */
/*
 * adopt.c - a dead thread's staging block taken back: its owner found dead
 * without the lock (reading /proc), then, under the lock, its records
 * flushed into the ring (ring_write.c), the spans it died inside recorded
 * (read by inflight.c) and the block freed; and live threads' staged
 * records flushed (the collector's idle flush), the blocks that hold any
 * listed without the lock first. A producer that finds no free block and
 * the collector on each poll both come here; the files it calls never
 * call back.
 */
#include <stdlib.h>
#include <string.h>

#include "ring_reader.h"
#include "ring_writer.h"

/* Writes block i's open spans into the ring and empties its stack (a dead
 * owner's block, before it is freed), each lasting until seen, when its
 * owner was found dead. Lock held. Returns records written. */
static uint32_t open_publish_locked(struct shmt_view *v, uint32_t i, uint64_t seen)
{
	struct shmt_record r[SHMT_OPEN_MAX];
	uint32_t n = shmt_block_open_spans(v, i, r), done = 0;
	struct shmt_block *b;

	for (uint32_t k = 0; k < n; k++) {
		/* the end a reader would otherwise have to guess */
		r[k].dur = seen > r[k].ts ? seen - r[k].ts : SHMT_OPEN_END_UNKNOWN;
		if (shmt_write_direct_locked(v, &r[k]) == 0)
			done++;
	}
	b = shmt_block_at(v, i);
	if (b && v->minor >= 2)
		store_relaxed(&b->open_depth, 0);
	return done;
}

/*
 * Looks, without the lock, for owned blocks whose owner is dead (by pid,
 * tid and process start time in /proc: reading /proc under the lock would
 * stall every producer). Fills dead[i] with the owner seen and when (the
 * ring clock, read after /proc said so: the owner died before), or
 * zeroes. Returns how many were found.
 */
uint32_t shmt_find_dead_blocks(const struct shmt_view *v, struct shmt_owner *dead)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < v->nblocks; i++) {
		struct shmt_block *b = shmt_block_at(v, i);
		struct shmt_owner o = { .pid = load_relaxed(&b->pid), .tid = load_relaxed(&b->tid),
					.start_time = load_relaxed(&b->start_time) };

		memset(&dead[i], 0, sizeof(dead[i]));
		if (load_acquire(&b->state) != SHMT_BLOCK_OWNED)
			continue;
		if (!shmt_owner_alive(o.pid, o.tid, o.start_time)) {
			o.seen = shmt_clock_now(&v->clock);
			dead[i] = o;
			n++;
		}
	}
	return n;
}

/*
 * The oldest claim among the blocks handed over and not yet flushed
 * (UINT64_MAX: none), read after the caller saw the blocks it means to
 * flush owned. A thread's block becomes OWNED only after the one it
 * handed over became FULL (handoff.c), so a block seen owned first and
 * claimed after that oldest FULL one may have a FULL predecessor of its
 * thread: flushed now, its records would come before older ones.
 */
static uint64_t oldest_full(const struct shmt_view *v)
{
	uint64_t min = UINT64_MAX;

	if (v->minor < SHMT_MINOR_HANDOFF)
		return min;
	for (uint32_t i = 0; i < v->nblocks; i++) {
		struct shmt_block *b = shmt_block_at(v, i);

		if (load_acquire(&b->state) == SHMT_BLOCK_FULL && load_relaxed(&b->claim_no) < min)
			min = load_relaxed(&b->claim_no);
	}
	return min;
}

/* Whether a block in state may hold staged records a flush moves: not a
 * full block (the collector's to flush in order, handoff.c), a sequenced
 * one (its to free) or a claim under way (nothing in it). */
static bool staging(uint32_t state)
{
	return SHMT_BLOCK_KIND(state) != SHMT_BLOCK_FULL &&
	       SHMT_BLOCK_KIND(state) != SHMT_BLOCK_CLAIMING &&
	       SHMT_BLOCK_KIND(state) != SHMT_BLOCK_SEQUENCED;
}

/* Whether block i is owned by the owner dead[i] names (dead may be NULL). */
static bool owner_gone(struct shmt_block *b, uint32_t i, const struct shmt_owner *dead)
{
	return dead && dead[i].pid && load_relaxed(&b->pid) == dead[i].pid &&
	       load_relaxed(&b->tid) == dead[i].tid &&
	       load_relaxed(&b->start_time) == dead[i].start_time;
}

/* Frees the copy e made, unpublished. */
static void copy_drop(struct shmt_view *v, struct shmt_full *e)
{
	struct shmt_block *c = shmt_block_at(v, e->copy);
	uint32_t st = SHMT_BLOCK_CLAIMING | e->copier << 8;

	/* still our claim, and empty: its written never moved (a block a
	 * peer took from the claim meanwhile is left as it is) */
	if (e->copied && c && load_relaxed(&c->written) == load_relaxed(&c->taken))
		__atomic_compare_exchange_n(&c->state, &st, SHMT_BLOCK_FREE, false, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED);
	e->copied = false;
}

/*
 * Lock held: what a flush of staged records does in block i, seen owned
 * with claim number owned_no when listed (UINT64_MAX: not seen owned).
 * With all, an owned block's pending records are flushed (the collector
 * does this each poll so that an idle thread's few records are not held
 * back); a free block's always are; a block whose owner dead[i] names is
 * flushed and freed. Full, sequenced and claiming blocks are left alone
 * (staging()); so is an owned block in a later life than the one listed:
 * its thread's full block before it may not be flushed yet (see
 * oldest_full()), and it waits for the next look. Returns records
 * published.
 */
static uint64_t flush_staged_locked(struct shmt_view *v, struct shmt_full *e, bool all,
				    const struct shmt_owner *dead)
{
	uint32_t i = e->i;
	uint64_t owned_no = e->no;
	struct shmt_block *b = shmt_block_at(v, i);
	uint32_t state = load_relaxed(&b->state);
	bool gone = state == SHMT_BLOCK_OWNED && owner_gone(b, i, dead);
	bool pending;
	uint64_t done = 0;

	if (e->copied) {
		/* made without the lock: published in a few stores (e then
		 * describes the copy), unless the block moved on since (then
		 * flushed here, as before). What a live thread wrote since
		 * waits for the next look; a dead one's block is freed. */
		done = all || gone ? shmt_sequence_copy_locked(v, e) : 0;
		if (!done)
			copy_drop(v, e);
		else if (!gone)
			return done;
	}
	pending = load_acquire(&b->written) != load_relaxed(&b->taken);
	if (!staging(state))
		return done;
	if (state == SHMT_BLOCK_OWNED && (owned_no == UINT64_MAX ||
	    (v->minor >= SHMT_MINOR_HANDOFF && load_relaxed(&b->claim_no) != owned_no)))
		return done;
	/* an owned block's records wait in it while a discard ring has
	 * no room for them all: nothing is dropped that could wait */
	if (state == SHMT_BLOCK_OWNED && pending && !shmt_ring_has_room(v, b))
		return done;
	if (pending && (all || gone || state != SHMT_BLOCK_OWNED))
		done += shmt_flush_block_locked(v, i);
	if (gone) {
		/* the spans it died in, after its last records */
		done += open_publish_locked(v, i, dead[i].seen);
		store_release(&b->state, SHMT_BLOCK_FREE);
	}
	return done;
}

uint32_t shmt_staged_blocks(const struct shmt_view *v, const struct shmt_owner *dead,
			    struct shmt_full *out)
{
	uint64_t before;
	uint32_t n = 0, k = 0;

	for (uint32_t i = 0; i < v->nblocks; i++) {
		struct shmt_block *b = shmt_block_at(v, i);
		/* the claim before the state: a life that began in between
		 * has a number other than the one listed (the flush skips
		 * it), never the state of a life older than its number,
		 * whose thread's full block oldest_full() may not see yet
		 * (pairs with the claimer's release stores in handoff.c) */
		uint64_t no = load_acquire(&b->claim_no);
		uint32_t state = load_acquire(&b->state);
		bool pending = load_acquire(&b->written) != load_relaxed(&b->taken);

		if (state == SHMT_BLOCK_OWNED && (pending || owner_gone(b, i, dead)))
			out[n++] = (struct shmt_full){ .no = no, .i = i, .seq = UINT64_MAX };
		else if (state != SHMT_BLOCK_OWNED && staging(state) && pending)
			out[n++] = (struct shmt_full){ .no = UINT64_MAX, .i = i, .seq = UINT64_MAX };
	}
	/* read after the states: see oldest_full() */
	before = oldest_full(v);
	for (uint32_t j = 0; j < n; j++)
		if (out[j].no == UINT64_MAX || v->minor < SHMT_MINOR_HANDOFF || out[j].no < before)
			out[k++] = out[j];
	return k;
}

uint64_t shmt_adopt_listed_locked(struct shmt_view *v, struct shmt_full *list, uint32_t n,
				  bool all, const struct shmt_owner *dead, uint64_t most, uint32_t *from)
{
	uint64_t done = 0;
	uint32_t k = *from;

	for (; k < n && done < most; k++)
		if (list[k].i < v->nblocks)
			done += flush_staged_locked(v, &list[k], all, dead);
	*from = k;
	return done;
}

/*
 * Copies n records of a live thread's block, from index t on, into block
 * c from index ct on. Without the lock: should the owner flush them
 * itself meanwhile (an explicit flush, its exit) and write new ones in
 * their place, this reads those as they are written, a race whose
 * values are never used: the block's taken moved, and the copy is freed
 * unpublished (shmt_sequence_copy_locked()). ThreadSanitizer is told so.
 */
__attribute__((no_sanitize("thread")))
static void copy_records(const struct shmt_view *v, struct shmt_block *c, uint64_t ct,
			 const struct shmt_block *b, uint64_t t, uint64_t n)
{
	const struct shmt_record *src = shmt_block_recs((struct shmt_block *)b);
	struct shmt_record *dst = shmt_block_recs(c);
	uint64_t mask = v->block_records - 1;

	for (uint64_t k = 0; k < n; k++)
		dst[(ct + k) & mask] = src[(t + k) & mask];
}

/*
 * How many of `most` blocks the copies may claim: what leaves an eighth
 * of the ring's blocks free. A copy keeps its block until the collector
 * wrote its records out, and a thread whose block fills needs a free one
 * to go on without the lock; a thousand threads holding a block each
 * among 1024 leave none to copy into, and their records are copied
 * under the lock as before.
 */
static uint32_t copies_allowed(const struct shmt_view *v, uint32_t most)
{
	uint32_t free_ = 0, reserve = v->nblocks / 8;

	for (uint32_t i = 0; i < v->nblocks; i++) {
		struct shmt_block *b = shmt_block_at(v, i);

		free_ += load_relaxed(&b->state) == SHMT_BLOCK_FREE &&
			 load_relaxed(&b->written) == load_relaxed(&b->taken);
	}
	if (free_ <= reserve)
		return 0;
	return free_ - reserve < most ? free_ - reserve : most;
}

uint32_t shmt_adopt_listed_copy(struct shmt_view *v, struct shmt_full *list, uint32_t n,
				uint32_t from, uint64_t most, uint32_t blocks, uint32_t tid)
{
	uint64_t total = 0;
	uint32_t made = 0, hint = 0, k;

	if (v->minor < SHMT_MINOR_COPY || v->mode != SHMTRACE_MODE_DISCARD || from >= n)
		return n;
	blocks = copies_allowed(v, blocks);
	if (!blocks)
		return n;	/* no block to spare: all copied under the lock */
	for (k = from; k < n && total < most && made < blocks; k++) {
		struct shmt_full *e = &list[k];
		struct shmt_block *b = shmt_block_at(v, e->i), *c;
		uint64_t w, t;
		int ci;

		/* an owned block in the life listed, its thread alive or
		 * dead (then freed under the lock once its copy is
		 * published); a free one's are flushed under the lock */
		if (e->copied || e->no == UINT64_MAX || !b)
			continue;
		/* pairs with the owner's release store of written: the records */
		w = load_acquire(&b->written);
		t = load_relaxed(&b->taken);
		if (w <= t || w - t > v->block_records ||
		    load_relaxed(&b->state) != SHMT_BLOCK_OWNED || load_relaxed(&b->claim_no) != e->no)
			continue;
		ci = shmt_block_claim_copy(v, tid, hint, b);
		if (ci < 0)
			return n;	/* none free: the rest are copied under the lock */
		hint = (uint32_t)ci + 1;
		c = shmt_block_at(v, (uint32_t)ci);	/* ci < nblocks: a block */
		e->copy_taken = load_relaxed(&c->taken);
		copy_records(v, c, e->copy_taken, b, t, w - t);
		e->copied = true;
		e->copy = (uint32_t)ci;
		e->copier = tid;
		e->taken = t;
		e->n = (uint32_t)(w - t);
		total += w - t;
		made++;
	}
	return k;
}

void shmt_adopt_listed_uncopy(struct shmt_view *v, struct shmt_full *list, uint32_t n, uint32_t from)
{
	for (uint32_t k = from; k < n; k++)
		copy_drop(v, &list[k]);
}

/*
 * Reads, without the lock, what shmt_adopt_listed_locked() would copy
 * from list[from ..) (up to most records, as it stops) and the ring slots
 * it would copy them to, so that the copy under the lock finds them in
 * this core's cache: the staged records were last written on their
 * owners' cores and the slots a ring's worth ago, and fetching them made
 * the copy the longest part of every long hold. Only reads, each address
 * checked against the view's geometry; what moves meanwhile is only a
 * cache line fetched for nothing. Returns a sum of what it read, for the
 * caller to keep so that the reads are not optimised away.
 */
uint64_t shmt_adopt_listed_warm(const struct shmt_view *v, const struct shmt_full *list, uint32_t n,
				uint32_t from, uint64_t most)
{
#if SHMT_TSAN
	/* records read from a taken that is already stale race their
	 * owner's plain stores of new ones: harmless here (the values are
	 * dropped), a report under ThreadSanitizer, whose build skips this */
	(void)v, (void)list, (void)n, (void)from, (void)most;
	return 0;
#else
	uint64_t sum = 0, total = 0, head = load_relaxed(&v->h->head.v);

	for (uint32_t k = from; k < n && total < most; k++) {
		struct shmt_block *b = list[k].i < v->nblocks ? shmt_block_at(v, list[k].i) : NULL;
		uint64_t w, t, mask = v->block_records - 1;
		const struct shmt_record *recs;

		if (!b || list[k].copied)
			continue;	/* a copy made: published in a few stores */
		/* pairs with the owner's release store: the records below */
		w = load_acquire(&b->written);
		t = load_relaxed(&b->taken);
		if (w <= t)
			continue;
		if (w - t > v->block_records)
			t = w - v->block_records;
		recs = shmt_block_recs(b);
		/* a record's first word in every line: records are 40 bytes */
		for (uint64_t i = t; i < w; i++)
			sum += load_relaxed(&recs[i & mask].ts);
		total += w - t;
	}
	if (total > v->capacity)
		total = v->capacity;
	for (uint64_t i = 0; i < total; i++)
		sum += load_relaxed(&v->records[(head + i) & v->mask].commit);
	return sum;
#endif
}

uint64_t shmt_adopt_blocks_locked(struct shmt_view *v, bool all, const struct shmt_owner *dead)
{
	/* the collector's listing, made under the lock: one rule for which
	 * blocks a flush may take, and in what life */
	struct shmt_full *list = malloc((v->nblocks + 1) * sizeof(*list));
	uint32_t from = 0;
	uint64_t done;

	if (!list)
		return 0;	/* nothing adopted: the caller finds no block */
	done = shmt_adopt_listed_locked(v, list, shmt_staged_blocks(v, dead, list), all, dead,
					UINT64_MAX, &from);
	free(list);
	return done;
}
