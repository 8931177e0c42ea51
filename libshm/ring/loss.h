/* SPDX-License-Identifier: MIT */
/*
 * loss.h - the ring's loss counters as one value: read from a ring, carried
 * by a capture's LOSS frame, and merged over a run's parts and over rings.
 * The public struct shmtrace_stats (ABI) is filled from the ring directly.
 */
#ifndef SHMT_RING_LOSS_H
#define SHMT_RING_LOSS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct shmt_view;

/* What a counter counts. Only records are lost records: the others are
 * said apart, never added to them. */
enum shmt_loss_unit {
	SHMT_LOSS_RECORDS,	/* records lost: each counted once, under its cause */
	SHMT_LOSS_ATTEMPTS,	/* lock attempts given up on (not records) */
	SHMT_LOSS_STRINGS,	/* strings not interned (not records) */
	SHMT_LOSS_NAMES,	/* thread names not recorded (not records) */
};

/*
 * The kinds of loss, once (docs/DESIGN.md, "Losses, each counted once";
 * docs/FORMAT.md, "Accounting"): X(name, unit, since, frame, words) per
 * counter, each cumulative over the ring's life. name is the ring header's
 * field and the key every tool prints; since the ring format minor that
 * added it (a reader takes 0 from an older ring); frame its field in a
 * capture's LOSS frame (docs/CAPTURE-FORMAT.md); words what users read
 * after the count. The records lost are the sum of the RECORDS kinds:
 * exported + dropped + overwritten + lock_dropped + torn + orphaned = written.
 */
#define SHMT_LOSS_KINDS(X)						\
	X(dropped, SHMT_LOSS_RECORDS, 0, 1,				\
	  "records dropped (ring full)")				\
	X(overwritten, SHMT_LOSS_RECORDS, 0, 2,				\
	  "records overwritten before being read (overwrite mode)")	\
	X(lock_dropped, SHMT_LOSS_RECORDS, 5, 11,			\
	  "records lost to lock timeouts")				\
	X(torn, SHMT_LOSS_RECORDS, 1, 4,				\
	  "torn records skipped")					\
	X(orphaned, SHMT_LOSS_RECORDS, 5, 12,				\
	  "records refused while their ring was removed")		\
	X(lock_timeouts, SHMT_LOSS_ATTEMPTS, 0, 3,			\
	  "lock timeouts (attempts, not records)")			\
	X(strings_dropped, SHMT_LOSS_STRINGS, 1, 6,			\
	  "strings not interned (string table full)")			\
	X(names_dropped, SHMT_LOSS_NAMES, 0, 5,				\
	  "thread names dropped (thread-name table full)")

#define SHMT_LOSS_FIELD(name, unit, since, frame, words) uint64_t name;

struct shmt_loss {
	SHMT_LOSS_KINDS(SHMT_LOSS_FIELD)
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
		struct { SHMT_LOSS_KINDS(SHMT_LOSS_FIELD) };		\
	}

/* The table as data, for the loops of those who print it. */
struct shmt_loss_kind {
	const char *name;		/* field and key: "lock_dropped" */
	enum shmt_loss_unit unit;
	const char *words;		/* after the count: "records lost to lock timeouts" */
	size_t off;			/* of the counter in struct shmt_loss */
};

#define SHMT_LOSS_COUNT(name, unit, since, frame, words) + 1
enum { SHMT_LOSS_NKINDS = 0 SHMT_LOSS_KINDS(SHMT_LOSS_COUNT) };
#undef SHMT_LOSS_COUNT

extern const struct shmt_loss_kind shmt_loss_kinds[SHMT_LOSS_NKINDS];

/* The counter of kind k in l. */
static inline uint64_t *shmt_loss_at(struct shmt_loss *l, const struct shmt_loss_kind *k)
{
	return (uint64_t *)((char *)l + k->off);
}

static inline uint64_t shmt_loss_get(const struct shmt_loss *l, const struct shmt_loss_kind *k)
{
	return *(const uint64_t *)((const char *)l + k->off);
}

/* The records lost: the sum of the kinds counted in records. */
uint64_t shmt_loss_records(const struct shmt_loss *l);

enum shmt_loss_op {
	SHMT_LOSS_ADD,	/* two rings' (or disjoint) counts: a sum */
	SHMT_LOSS_MAX,	/* two snapshots of one ring's cumulative counts */
};

/* dst = dst + src, or max(dst, src), counter by counter. */
void shmt_loss_merge(struct shmt_loss *dst, const struct shmt_loss *src, enum shmt_loss_op op);

/*
 * The ring's counters now (untrusted numbers: report them, never size
 * anything by them); a counter the ring's minor predates reads 0.
 * `overwritten` is what collectors counted, plus, with lapped, what the
 * head has lapped beyond the collector's tail since (no collector
 * running: a reader of the ring as it is). The collector itself, and a
 * reader that counts what it finds lapped as it goes, pass false.
 */
void shmt_loss_read(const struct shmt_view *v, struct shmt_loss *l, bool lapped);

/*
 * What a reader can check a ring's counters against, as far as it can
 * tell; 0 (or false) for what it does not know. Counters are only ever
 * added to, one record (or attempt, or string) per producer call, so:
 * none reaches 2^63; none passes what the ring's age allows at
 * SHMT_LOSS_PER_NS a nanosecond (more than any machine writes); a discard
 * ring overwrites nothing; the tail never passes the head; and the
 * published records are each read (exported), overwritten or torn at
 * most once (torn also counts slots of staging blocks, which may hold
 * `staged` records beyond the ring).
 */
struct shmt_loss_scope {
	uint64_t published;	/* the ring's head: records ever published */
	uint64_t consumed;	/* its tail: records collectors released */
	uint64_t read;		/* records the reader found in the ring and blocks */
	uint64_t staged;	/* records the staging blocks can hold */
	uint64_t age_ns;	/* since the ring was made (shmt_loss_age_ns()) */
	bool heads;		/* published and consumed are the ring's words */
	bool has_read;		/* read, published and staged are of one pass */
	bool has_published;	/* published is known (a capture's LOSS frame) */
	bool discard;		/* the ring is known to be in discard mode */
};

#define SHMT_LOSS_PER_NS	64ull	/* counts a ring can take per ns of its life */
#define SHMT_LOSS_SLACK_NS	(60ull * 1000000000ull)	/* wall-clock steps */

/* The age of a ring made at wall-clock time realtime0 (its anchor): 0
 * when not known (no anchor, or one in the future). */
uint64_t shmt_loss_age_ns(uint64_t realtime0);

/*
 * Whether the counters l can be true of the ring sc describes. Returns
 * true, or false with the first impossible relation in why, in words
 * ("dropped 0x3782dace9d900000 > 3840000000000, what the ring could take
 * in its 1 s"): numbers of 10^12 and more are shown in hex, never as a
 * count. Every tool that shows counters asks this first and, when it
 * says false, shows none of them (docs/DESIGN.md, "Plausible counters").
 */
bool shmt_loss_plausible(const struct shmt_loss *l, const struct shmt_loss_scope *sc,
			 char *why, size_t len);

/* The counters producers add to are ring_writer.h's (shmt_loss_lock_dropped(),
 * shmt_loss_orphaned()). */

#endif /* SHMT_RING_LOSS_H */
