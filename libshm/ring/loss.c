/* SPDX-License-Identifier: MIT */
/*
 * loss.c - the table of loss kinds, and reading and merging the ring's
 * loss counters (loss.h).
 */
#include "ring_writer.h"
#include "loss.h"
#include "ring_reader.h"

const struct shmt_loss_kind shmt_loss_kinds[SHMT_LOSS_NKINDS] = {
#define KIND(f, u, minor, frame, w) { #f, u, w, offsetof(struct shmt_loss, f) },
	SHMT_LOSS_KINDS(KIND)
#undef KIND
};

uint64_t shmt_loss_records(const struct shmt_loss *l)
{
	uint64_t n = 0;

	for (size_t i = 0; i < SHMT_LOSS_NKINDS; i++)
		if (shmt_loss_kinds[i].unit == SHMT_LOSS_RECORDS)
			n += shmt_loss_get(l, &shmt_loss_kinds[i]);
	return n;
}

void shmt_loss_merge(struct shmt_loss *dst, const struct shmt_loss *src, enum shmt_loss_op op)
{
#define MERGE(f, u, minor, frame, w)					\
	dst->f = op == SHMT_LOSS_ADD ? dst->f + src->f			\
				     : (src->f > dst->f ? src->f : dst->f);
	SHMT_LOSS_KINDS(MERGE)
#undef MERGE
}

void shmt_loss_read(const struct shmt_view *v, struct shmt_loss *l, bool lapped)
{
	const struct shmt_header *h = v->h;
	uint64_t head;

	/* a counter the ring's minor predates is reserved space: zero, or
	 * whatever a forger put there; read as 0 either way */
#define READ(f, u, since, frame, w)					\
	l->f = v->minor >= (since) ? load_relaxed(&h->f.v) : 0;
	SHMT_LOSS_KINDS(READ)
#undef READ
	if (!lapped)
		return;
	/* the one place `overwritten` is computed for a ring as it is: what
	 * collectors counted, plus what the head lapped past their tail */
	head = shmt_ring_head(v);
	if (head > v->capacity)
		l->overwritten += shmt_ring_unread_below(v, head - v->capacity);
}

void shmt_loss_lock_dropped(struct shmt_view *v, uint64_t n)
{
	struct shmt_header *h = v->h;

	fetch_add(v->minor >= 5 ? &h->lock_dropped.v : &h->dropped.v, n);
}

void shmt_loss_orphaned(struct shmt_view *v, uint64_t n)
{
	struct shmt_header *h = v->h;

	fetch_add(v->minor >= 5 ? &h->orphaned.v : &h->dropped.v, n);
}
