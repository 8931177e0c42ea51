/* SPDX-License-Identifier: MIT */
/*
 * ring_write.c - moving records into the ring, always under the ring lock.
 *
 * Publication protocol (docs/FORMAT.md, "Publishing"): a slot's commit word
 * is zeroed, the fields are stored, then the commit word is release-stored
 * with the record's sequence; after a batch, head is release-stored. A
 * reader acquire-loads head, then each commit word, copies, and re-reads
 * the commit word (a seqlock), so it never accepts a half-written record,
 * even on a slot that overwrite mode is reusing under it.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "ring_writer.h"

#if SHMT_TSAN
/* One record, field by field: the build under ThreadSanitizer (below). */
static void put_record(struct shmt_view *v, uint64_t seq, const struct shmt_record *s)
{
	struct shmt_record *d = &v->records[seq & v->mask];

	store_relaxed(&d->commit, 0);
	/* orders the invalidation before the new fields: a reader that sees
	 * any new field re-reads a commit word that is no longer its own */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	store_relaxed(&d->ts, s->ts);
	store_relaxed(&d->dur, s->dur);
	store_relaxed(&d->flow, s->flow);
	store_relaxed(&d->pid, s->pid);
	store_relaxed(&d->tid, s->tid);
	store_relaxed(&d->name, s->name);
	store_relaxed(&d->cat, s->cat);
	/* pairs with the acquire load of commit in shmt_ring_read() */
	store_release(&d->commit, SHMT_COMMIT(seq, SHMT_COMMIT_KIND(s->commit)));
}
#endif

/*
 * Moves n records, src[(k + i) & smask], into the slots of sequences
 * head + i, with the protocol of put_record() done a pass at a time: every
 * commit word invalidated, one fence, every record's fields, then every
 * commit word. The middle pass copies the 36 bytes before the commit word
 * as plain memory (a seqlock's copy, like the kernel's): a record's worth
 * of loads and stores instead of seven of each, under the lock that other
 * producers may be trying. The stores to cold ring lines still dominate a
 * flush: its effect on the span call's tail was within the noise
 * (docs/BENCHMARKS.md, "What changed").
 * ThreadSanitizer sees plain stores racing the reader's copy, so its build
 * keeps the atomic stores of put_record().
 */
static void put_records(struct shmt_view *v, uint64_t head, const struct shmt_record *src,
			uint64_t k, uint64_t smask, uint64_t n)
{
#if SHMT_TSAN
	for (uint64_t i = 0; i < n; i++) {
		put_record(v, head + i, &src[(k + i) & smask]);
		if (i == n / 2)
			SHMT_HOOK("flush-middle");
	}
#else
	for (uint64_t i = 0; i < n; i++)
		store_relaxed(&v->records[(head + i) & v->mask].commit, 0);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (uint64_t i = 0; i < n; i++)
		memcpy(&v->records[(head + i) & v->mask], &src[(k + i) & smask],
		       offsetof(struct shmt_record, commit));
	SHMT_HOOK("flush-middle");
	/* pairs with the acquire load of commit in shmt_ring_read() */
	for (uint64_t i = 0; i < n; i++)
		store_release(&v->records[(head + i) & v->mask].commit,
			      SHMT_COMMIT(head + i, SHMT_COMMIT_KIND(src[(k + i) & smask].commit)));
#endif
}

/*
 * How many of n new records fit. Overwrite mode takes them all: which of
 * the records they replace were never read only the reader can tell (it
 * may have copied them and not yet moved tail), so the reader counts
 * `overwritten`, never the producers (docs/FORMAT.md, "Accounting").
 */
static uint64_t plan(struct shmt_view *v, uint64_t head, uint64_t n)
{
	uint64_t tail = load_acquire(&v->h->tail.v);
	uint64_t cap = v->capacity, room;

	if (v->mode != SHMTRACE_MODE_DISCARD)
		return n;
	/* tail is written by another process: never trust it past head */
	if (tail > head)
		tail = head;
	if (head - tail > cap)
		tail = head - cap;
	room = cap - (head - tail);
	return n < room ? n : room;
}

/* Moves n records from src (a staging block's ring of block_records, from
 * index k) into the ring under the journal. Returns records written. */
static uint64_t publish_locked(struct shmt_view *v, uint32_t block, const struct shmt_record *src,
			       uint64_t k, uint64_t n, uint64_t taken_before, uint64_t consumed)
{
	struct shmt_header *h = v->h;
	struct shmt_journal *j = &h->journal;
	uint64_t head = load_relaxed(&h->head.v);
	uint64_t fit = plan(v, head, n), mask = v->block_records - 1;

	j->stage = 1;
	j->block = block;
	j->head_before = head;
	j->taken_before = taken_before;
	j->count = fit;
	j->consumed = consumed;
	j->ndrop = n - fit;
	j->in_place = SHMT_JOURNAL_FLUSH;
	j->active = 1;
	/* the journal before any commit word is zeroed: a reader that sees
	 * a zero (acquire) sees the journal that covers it
	 * (shmt_ring_reused()) */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	SHMT_HOOK("flush-begin");
	put_records(v, head, src, k, mask, fit);
	/* pairs with the collector's acquire load of head */
	store_release(&h->head.v, head + fit);
	SHMT_HOOK("flush-head");
	j->stage = 2;
	if (n - fit)
		fetch_add(&h->dropped.v, n - fit);
	j->stage = 3;
	return fit;
}

/*
 * Moves a block's pending records into the ring. The caller holds the lock.
 * Returns the number of records published (the rest, if the ring was full
 * in discard mode, are counted as dropped).
 */
uint64_t shmt_flush_block_locked(struct shmt_view *v, uint32_t idx)
{
	struct shmt_block *b = shmt_block_at(v, idx);
	uint64_t w, k, k0, n, done;

	if (!b)
		return 0;
	/* pairs with the owner's release store of written */
	w = load_acquire(&b->written);
	k = k0 = load_relaxed(&b->taken);

	/* written behind taken: only a peer scribbling on the block does
	 * this; nothing is pending (and no count may go below zero) */
	if (w <= k)
		return 0;
	n = w - k;
	/* more pending than the block holds: only a peer scribbling on the
	 * block does this; take the newest block-full and count the rest */
	if (n > v->block_records) {
		fetch_add(&v->h->dropped.v, n - v->block_records);
		k = w - v->block_records;
		n = v->block_records;
	}
	/* the journal says what was checked above, not a second read of
	 * taken, which a writer of the ring may have moved since */
	done = publish_locked(v, idx, shmt_block_recs(b), k, n, k0, w - k0);
	/* pairs with the owner's acquire load of taken: the slots are free */
	store_release(&b->taken, w);
	/* after the records, head and taken: a reader that finds the journal
	 * clear finds what the flush wrote (shmt_ring_reused()) */
	store_release(&v->h->journal.active, 0);
	return done;
}

/*
 * Gives full block idx's pending records the ring's next sequences where
 * they are (2.0: the collector's, lock held): the block becomes SEQUENCED
 * with seq0 the first, head moves past them, and no record is copied, so
 * the lock is held for a few stores whatever the block holds. A block
 * whose records do not all fit a discard ring, or that holds more than a
 * block (forged counts), is moved by a copy as before and freed. Returns
 * the records published; *seq0 is their first sequence when they stay in
 * place, else UINT64_MAX, and *taken the block record they start at (the
 * one read of it that was checked: a forger may change it since).
 */
uint64_t shmt_sequence_block_locked(struct shmt_view *v, uint32_t idx, uint64_t *seq0,
				    uint64_t *taken)
{
	struct shmt_block *b = shmt_block_at(v, idx);
	struct shmt_header *h = v->h;
	struct shmt_journal *j = &h->journal;
	uint64_t w, k, head, done;

	*seq0 = UINT64_MAX;
	if (!b)
		return 0;
	/* pairs with the owner's release store of written */
	w = load_acquire(&b->written);
	k = load_relaxed(&b->taken);
	*taken = k;
	head = load_relaxed(&h->head.v);
	if (w <= k || w - k > v->block_records || plan(v, head, w - k) < w - k) {
		/* nothing in it, or counts only a forger makes, or no room:
		 * moved (or dropped and counted) as a full block always was */
		done = shmt_flush_block_locked(v, idx);
		store_release(&b->state, SHMT_BLOCK_FREE);
		__atomic_fetch_sub(&h->full_blocks.v, 1, __ATOMIC_RELAXED);
		return done;
	}
	j->stage = 1;
	j->block = idx;
	j->head_before = head;
	j->taken_before = k;
	j->count = w - k;
	j->consumed = 0;	/* a repair that finishes it leaves taken */
	j->ndrop = 0;
	j->in_place = SHMT_JOURNAL_IN_PLACE;
	j->active = 1;
	store_relaxed(&b->seq0, head);
	/* pairs with readers' acquire load of the state: seq0 first */
	store_release(&b->state, SHMT_BLOCK_SEQUENCED);
	SHMT_HOOK("sequence-state");
	/* pairs with readers' acquire load of head */
	store_release(&h->head.v, head + (w - k));
	SHMT_HOOK("sequence-head");
	/* stage 3 first: a repair of stage 2 or less takes the block off
	 * full_blocks itself, so a death between the two leaves it one too
	 * high (a look at the blocks for nothing), never too low */
	j->stage = 3;
	__atomic_fetch_sub(&h->full_blocks.v, 1, __ATOMIC_RELAXED);
	store_release(&j->active, 0);
	*seq0 = head;
	return w - k;
}

/*
 * Publishes the copy e describes (2.2, the collector's, lock held): block
 * e->copy, claimed by the caller, holds records [e->taken, + e->n) of
 * owned block e->i in its life e->no, copied there without the lock
 * (adopt.c). If they are still that block's next records (the same life,
 * its taken where it was, so the owner never rewrote them) and a discard
 * ring has room for them, the copy becomes a SEQUENCED block holding them
 * at the ring's next sequences and the block's taken moves past them, in
 * one journalled step of a few stores (SHMT_JOURNAL_COPY): no record is
 * copied under the lock. e then describes the copy, as a block sequenced
 * in place (shmt_flush_full_locked()). Returns the records published, or
 * 0 with nothing changed (the caller frees the copy).
 */
uint64_t shmt_sequence_copy_locked(struct shmt_view *v, struct shmt_full *e)
{
	struct shmt_block *b = shmt_block_at(v, e->i), *c = shmt_block_at(v, e->copy);
	struct shmt_header *h = v->h;
	struct shmt_journal *j = &h->journal;
	uint64_t head = load_relaxed(&h->head.v), n = e->n, w, ct;

	if (!b || !c || !e->copied || !n || n > v->block_records || v->minor < SHMT_MINOR_COPY)
		return 0;
	/* pairs with the owner's release store of written */
	w = load_acquire(&b->written);
	if (load_relaxed(&b->state) != SHMT_BLOCK_OWNED || load_relaxed(&b->claim_no) != e->no ||
	    load_relaxed(&b->taken) != e->taken || w < e->taken || w - e->taken < n ||
	    plan(v, head, n) < n)
		return 0;
	/* the copy as it was made: still claimed, still empty (a peer's
	 * words: moved, the copy would be published out of place) */
	ct = e->copy_taken;
	if (load_relaxed(&c->state) != (SHMT_BLOCK_CLAIMING | e->copier << 8) ||
	    load_relaxed(&c->taken) != ct || load_relaxed(&c->written) != ct)
		return 0;
	j->stage = 1;
	j->block = e->copy;
	j->head_before = head;
	j->taken_before = e->taken;
	j->count = n;
	j->consumed = 0;
	j->ndrop = 0;
	j->in_place = SHMT_JOURNAL_COPY | (uint64_t)e->i << 32;
	j->active = 1;
	store_relaxed(&c->seq0, head);
	/* pairs with readers' acquire load of the state: the journal and
	 * seq0 first. Sequenced empty: a claim never holds records, for the
	 * reaper frees a dead claimer's block as it is */
	store_release(&c->state, SHMT_BLOCK_SEQUENCED);
	SHMT_HOOK("copy-state");
	/* the copy's records, counted: not pending for anyone while the
	 * journal names the copy, and no extent until head covers them */
	store_release(&c->written, ct + n);
	SHMT_HOOK("copy-written");
	/* pairs with readers' acquire load of head */
	store_release(&h->head.v, head + n);
	SHMT_HOOK("copy-head");
	j->stage = 2;
	/* pairs with the owner's acquire load of taken: the slots are free */
	store_release(&b->taken, e->taken + n);
	SHMT_HOOK("copy-taken");
	j->stage = 3;
	store_release(&j->active, 0);
	*e = (struct shmt_full){ .no = load_relaxed(&c->claim_no), .i = e->copy, .n = (uint32_t)n,
				 .seq = head, .taken = ct };
	return n;
}

/* Writes one record straight into the ring (no staging block available).
 * Returns 0, or -ENOSPC if the ring was full (the record is counted). */
int shmt_write_direct_locked(struct shmt_view *v, const struct shmt_record *r)
{
	uint64_t done = publish_locked(v, UINT32_MAX, r, 0, 1, 0, 1);

	store_release(&v->h->journal.active, 0);
	return done ? 0 : -ENOSPC;
}

/* Whether producers wake a sleeping collector: the ring a quarter full,
 * or a quarter of the blocks handed over (minor 10). A backstop, since a
 * collector under load comes every millisecond on its own (drain.c), and
 * a wake-up from inside a span call can preempt that very call. */
bool shmt_wake_due(const struct shmt_view *v)
{
	const struct shmt_header *h = v->h;

	return load_relaxed(&h->head.v) - load_relaxed(&h->tail.v) >= v->capacity / 4 ||
	       (v->minor >= SHMT_MINOR_HANDOFF && load_relaxed(&h->full_blocks.v) > v->nblocks / 4);
}

/* Wakes a sleeping collector when shmt_wake_due(). The futex is the low
 * 32 bits of wake_seq (little-endian), shared across processes. */
void shmt_wake_collector(struct shmt_view *v)
{
	struct shmt_header *h = v->h;

	/* pairs with the collector's fence in its nap (collector/drain.c): our head,
	 * full_blocks and state stores before our look at its flag (one in
	 * a block's worth of calls) */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!load_relaxed(&h->collector_sleeping.v) || !shmt_wake_due(v))
		return;
	store_relaxed(&h->collector_sleeping.v, 0);
	__atomic_fetch_add((uint32_t *)&h->wake_seq.v, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, (uint32_t *)&h->wake_seq.v, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
