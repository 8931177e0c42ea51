/* SPDX-License-Identifier: MIT */
/*
 * loss.c - reading and merging the ring's loss counters (loss.h).
 */
#include "internal.h"
#include "loss.h"

void shmt_loss_merge(struct shmt_loss *dst, const struct shmt_loss *src, enum shmt_loss_op op)
{
#define MERGE(f)							\
	dst->f = op == SHMT_LOSS_ADD ? dst->f + src->f			\
				     : (src->f > dst->f ? src->f : dst->f);
	SHMT_LOSS_COUNTERS(MERGE)
#undef MERGE
}

void shmt_loss_read(const struct shmt_view *v, struct shmt_loss *l)
{
	const struct shmt_header *h = v->h;

	l->dropped = load_relaxed(&h->dropped.v);
	l->overwritten = load_relaxed(&h->overwritten.v);
	l->lock_timeouts = load_relaxed(&h->lock_timeouts.v);
	l->torn = load_relaxed(&h->torn.v);
	l->names_dropped = load_relaxed(&h->names_dropped.v);
	/* reserved, so zero, in a ring of minor 0 */
	l->strings_dropped = v->minor >= 1 ? load_relaxed(&h->strings_dropped.v) : 0;
}
