/* SPDX-License-Identifier: MIT */
/*
 * loss.h - the ring's loss counters as one value: read from a ring, carried
 * by a capture's LOSS frame, and merged over a run's parts and over rings.
 * The public struct shmtrace_stats (ABI) is filled from the ring directly.
 */
#ifndef SHMT_RING_LOSS_H
#define SHMT_RING_LOSS_H

#include <stdint.h>

struct shmt_view;

/* The counters, once: X(name) per counter, each cumulative over the
 * ring's life (docs/FORMAT.md, "Accounting"). */
#define SHMT_LOSS_COUNTERS(X)						\
	X(dropped)		/* ring full, discard mode */		\
	X(overwritten)		/* lapped before read, overwrite mode */ \
	X(lock_timeouts)	/* flushes given up on the lock */	\
	X(torn)			/* slots collectors skipped as torn */	\
	X(names_dropped)	/* thread name slots that did not fit */ \
	X(strings_dropped)	/* interning refused: string table full */

#define SHMT_LOSS_FIELD(f) uint64_t f;

struct shmt_loss {
	SHMT_LOSS_COUNTERS(SHMT_LOSS_FIELD)
};

/*
 * A struct member holding the counters both as a struct shmt_loss (named
 * `counters`, for shmt_loss_merge()) and by their own names (l.dropped),
 * so that a capture frame or a reader's totals carry them without a
 * second field list.
 */
#define SHMT_LOSS_MEMBER						\
	union {								\
		struct shmt_loss counters;				\
		struct { SHMT_LOSS_COUNTERS(SHMT_LOSS_FIELD) };	\
	}

enum shmt_loss_op {
	SHMT_LOSS_ADD,	/* two rings' (or disjoint) counts: a sum */
	SHMT_LOSS_MAX,	/* two snapshots of one ring's cumulative counts */
};

/* dst = dst + src, or max(dst, src), counter by counter. */
void shmt_loss_merge(struct shmt_loss *dst, const struct shmt_loss *src, enum shmt_loss_op op);

/* The ring's counters now (untrusted numbers: report them, never size
 * anything by them). strings_dropped is 0 in a ring of minor 0. */
void shmt_loss_read(const struct shmt_view *v, struct shmt_loss *l);

#endif /* SHMT_RING_LOSS_H */
