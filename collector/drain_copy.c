/* SPDX-License-Identifier: MIT */
/*
 * drain_copy.c - records copied out of the ring into capture frames, and
 * the ring's tail moved only over records whose frames io_uring reported
 * written, with the slots skipped below it counted into the ring's loss
 * counters exactly once.
 */
#include "drain_int.h"

/*
 * Ring format 2.0: records of a full block sequenced in place, encoded
 * from the block, up to the end of its ring of records (the rest next
 * time); a record of no known kind (forged) ends the frame before it, and
 * one first is left to the slow path (0), which counts it.
 */
static long copy_extent(struct drain *d, const struct shmt_full *e, uint64_t head)
{
	struct shmt_block *b = shmt_block_at(&d->v, e->i);
	uint64_t off = d->pos - e->seq, n = e->n - off;
	uint64_t at = (e->taken + off) & (d->v.block_records - 1);
	long k;

	if (!b)
		return 0;
	/* a head forged back below an extent: only what it publishes */
	if (n > head - d->pos)
		n = head - d->pos;
	if (at + n > d->v.block_records)
		n = d->v.block_records - at;
	if (n > DRAIN_BATCH)
		n = DRAIN_BATCH;
	k = shmt_cap_put_block_records(cw_buffer(d->w), d->pos, &shmt_block_recs(b)[at], n);
	if (k <= 0)
		return k;
	d->pos += (uint64_t)k;
	d->st.records += (uint64_t)k;
	return k;
}

/*
 * Discard mode's fast path: slots in [tail, head) are never written again
 * until the tail passes them (head's acquire load orders their contents
 * before us), so they are encoded straight from the ring into the frame,
 * each slot read once and checked. Returns records copied, or 0 to take
 * the slow path (the first slot is not a finished record of its sequence:
 * forged or torn); a bad slot later on ends the frame before it.
 */
static long copy_records_fast(struct drain *d, uint64_t head)
{
	const struct shmt_full *e = d->hold.in_place ? hold_extent(&d->hold, d->pos) : NULL;
	uint64_t n, slot = d->pos & d->v.mask;
	long k;

	if (e && e->seq <= d->pos)
		return copy_extent(d, e, head);
	if (e && e->seq < head)
		head = e->seq;	/* the slots up to the next extent */
	n = head - d->pos;
	if (n > DRAIN_BATCH)
		n = DRAIN_BATCH;
	if (slot + n > d->v.capacity)
		n = d->v.capacity - slot;	/* up to the wrap; the rest next time */
	k = shmt_cap_put_ring_records(cw_buffer(d->w), d->pos, &d->v.records[slot], n);
	if (k <= 0)
		return k;
	d->pos += (uint64_t)k;
	d->st.records += (uint64_t)k;
	return k;
}

/* The slow path's run of consecutive records, framed as one. */
struct copy_run {
	struct drain *d;
	uint64_t first;		/* sequence of scratch[0] */
	uint32_t k;		/* records in scratch */
	long total;		/* records framed */
};

static int put_run(struct copy_run *c)
{
	int ret = 0;

	if (c->k) {
		ret = shmt_cap_put_records(cw_buffer(c->d->w), c->first, c->d->scratch, c->k);
		c->total += c->k;
	}
	c->k = 0;
	return ret < 0 ? ret : 0;
}

static int copy_one(void *arg, uint64_t seq, const struct shmt_record *r)
{
	struct copy_run *c = arg;

	/* not a finished record: flush the run before it, skip it */
	if (!r)
		return put_run(c);
	if (!c->k)
		c->first = seq;
	c->d->scratch[c->k++] = *r;
	return 0;
}

/* Copies records [pos, head) out in contiguous runs, one frame per run. */
long drain_copy_records(struct drain *d, uint64_t head)
{
	struct copy_run c = { .d = d };
	uint64_t n = head - d->pos;
	int ret;

	if (d->v.mode == SHMTRACE_MODE_DISCARD) {
		long fast = copy_records_fast(d, head);

		if (fast != 0)
			return fast;
	}
	if (n > DRAIN_BATCH)
		n = DRAIN_BATCH;
	ret = shmt_ring_read_range(&d->v, d->pos, d->pos + n, 0, &d->skipped, copy_one, &c);
	if (!ret)
		ret = put_run(&c);
	if (ret < 0)
		return ret;
	d->pos += n;
	d->st.records += (uint64_t)c.total;
	return (long)n;
}

/* Notes, with the submission, what was skipped below d->pos for
 * drain_release_tail(). */
int drain_submit(struct drain *d)
{
	struct drain_checkpoint *last = d->nckpt ? &d->ckpt[d->nckpt - 1] : NULL;

	if (!last || last->seq != d->pos) {
		/* full: fold into the newest (its counts wait a little longer) */
		if (d->nckpt == DRAIN_CHECKPOINTS)
			last = &d->ckpt[d->nckpt - 1];
		else
			last = &d->ckpt[d->nckpt++];
	}
	last->seq = d->pos;
	last->skipped = d->skipped;
	last->records = d->st.records;
	return cw_submit(d->w, d->pos);
}

uint64_t drain_records_written(const struct drain *d, uint64_t done)
{
	uint64_t records = d->records_published;

	for (uint32_t i = 0; i < d->nckpt && d->ckpt[i].seq <= done; i++)
		records = d->ckpt[i].records;
	return records;
}

void drain_release_tail(struct drain *d)
{
	struct shmt_header *h = d->v.h;
	uint64_t done = cw_done_seq(d->w);
	uint32_t n = 0;

	/* the skips below what is written now count, once */
	while (n < d->nckpt && d->ckpt[n].seq <= done)
		n++;
	if (n) {
		const struct shmt_ring_skips *s = &d->ckpt[n - 1].skipped;

		fetch_add(&h->overwritten.v, s->lapped - d->skipped_published.lapped);
		fetch_add(&h->torn.v, s->torn - d->skipped_published.torn);
		d->st.lapped += s->lapped - d->skipped_published.lapped;
		d->st.torn += s->torn - d->skipped_published.torn;
		d->skipped_published = *s;
		d->records_published = d->ckpt[n - 1].records;
		memmove(d->ckpt, d->ckpt + n, (d->nckpt - n) * sizeof(d->ckpt[0]));
		d->nckpt -= n;
	}
	/* pairs with producers' acquire load of tail in plan(): the slots
	 * below it may be reused */
	if (done > load_relaxed(&h->tail.v))
		store_release(&h->tail.v, done);
	/* and the blocks sequenced in place below it freed */
	hold_release(&d->hold, done);
}
