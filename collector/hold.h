/* SPDX-License-Identifier: MIT */
/*
 * hold.h - a ring as one collector holds it, whether it drains it into a
 * capture (drain.c) or keeps it as a flight recorder (flight.c): claimed
 * against a second collector, and its staging blocks flushed and dead
 * threads' blocks adopted under the lock, briefly, never waiting long.
 */
#ifndef SHMTRACE_COLLECTOR_HOLD_H
#define SHMTRACE_COLLECTOR_HOLD_H

#include <stdbool.h>
#include <stdint.h>

#include "ring_writer.h"

struct hold {
	struct shmt_view *v;
	int claim_fd;			/* the ring, flock()ed: one collector a ring */
	bool marked;			/* our pid in the header's collector_pid */
	struct shmt_owner *dead;	/* per block: owner found dead */
	uint64_t last_reap_ns;
	uint64_t last_idle_ns;		/* owned blocks last flushed */
	uint64_t lock_hold_max_ns;	/* the longest the lock was held */
	uint64_t lock_holds, lock_holds_long;	/* holds, and those over HOLD_LONG_NS */
	bool lock_warned;
	/* the last hold_adopt() that looked for the dead: blocks whose
	 * owner it found dead inside open spans, and the first such owner */
	uint32_t died_open;
	struct shmt_owner died;
	struct shmt_full *order;	/* full blocks, oldest claim first */
	uint32_t full_left;		/* full blocks listed and not yet reached */
	/* the pass under way (hold_adopt(), then hold_next()): order[next ..
	 * nfull) are still to move, moved records of them moved so far;
	 * while idle_due, the blocks with staged records listed without the
	 * lock, staged[idle_next .. nstaged), are flushed (a look a pass cut
	 * short is made again in the next) */
	uint32_t nfull, next;
	uint64_t moved;
	bool full_stuck;		/* a hold moved none: no room, or relisting */
	bool idle_due, reaped, listed;
	bool loaded;			/* full blocks listed within settle_ns, not the last pass */
	uint64_t last_full_ns;		/* when full blocks were last listed (0: never) */
	uint64_t settle_ns;
	struct shmt_full *staged;
	uint32_t nstaged, idle_next;
	uint64_t warmed;		/* shmt_adopt_listed_warm()'s sums, kept */
	/* per block: its claim and written count when a loaded look first
	 * left it (no UINT64_MAX: none), since when, and whether its owner
	 * was asked to hand it over (settled_only()) */
	struct hold_seen {
		uint64_t no, written, since_ns;
		bool asked;
	} *seen;
	/* ring format 2.0, a discard ring drained into a capture: full blocks
	 * sequenced where they are (SHMT_FLUSH_IN_PLACE), kept in sequence
	 * order, ext[(ext_first + k) % nblocks] for k < ext_n, until the
	 * tail passes them */
	bool in_place;
	/* ring format 2.2 too: a live thread's staged records are copied
	 * into a block claimed by this thread (tid), without the lock, and
	 * the copy sequenced in the hold (shmt_adopt_listed_copy()) */
	uint32_t tid;
	struct shmt_full *ext;
	uint32_t ext_first, ext_n;
};

/* Records one hold of the lock moves into the ring at most (a block more
 * when one block is larger): a few blocks, tens of microseconds of copy,
 * so that a producer waiting for the lock (for a string, a name slot, a
 * block when none is free) waits that long, not a pass's worth. */
#define HOLD_MOST 4096u
/* Blocks one hold claims for copies of live threads' records at most: a
 * copy keeps its block until the records are written out, and producers
 * need the pool more (an eighth of the default ring's 1024 blocks). */
#define HOLD_COPIES 128u
/* While full blocks come (one was listed within a poll interval), the
 * owned blocks are looked at once in this long (every pass otherwise):
 * each look reads every block's header. */
#define IDLE_EVERY_NS (10ull * 1000 * 1000)
/* A hold longer than this was more than its copy (the collector was
 * preempted inside it, most likely): counted for the summary line. */
#define HOLD_LONG_NS (100ull * 1000)

/*
 * Claims ring (mapped in v) for this collector: an advisory lock on a
 * second descriptor of the segment, kept until exit, since two collectors
 * on one ring would both advance its tail. settle_ns (the poll interval)
 * bounds how long a live thread's partly filled block that keeps moving
 * keeps its records while full blocks come (hold_adopt()). Returns 0,
 * -EBUSY (another collector has it), -ESTALE (the name now refers to
 * another segment) or -errno; -ENOMEM.
 */
int hold_init(struct hold *h, struct shmt_view *v, const char *ring, uint64_t settle_ns);

/* Whether another collector holds ring's claim now (false when there is
 * no such ring): a look, taking nothing. */
bool hold_claimed(const char *ring);

/*
 * A pass over the ring's blocks, in holds of the lock of at most
 * HOLD_MOST records each: hold_adopt() begins it and makes its first
 * hold, hold_next() makes each next one while hold_pending() says one is
 * due (the drain encodes in between, when waiters may take the lock).
 * A pass moves the blocks producers handed over (oldest first, while a
 * discard ring has room for them, up to 64K records: full_left says how
 * many wait) and live threads' staged records into the ring (while full
 * blocks come, a thread's block only once it stopped moving, or after
 * settle_ns: it is about to be handed over), and, once a
 * second (or with final), adopts dead threads' blocks: their records
 * flushed, the spans they died in recorded, the blocks freed; and frees
 * blocks whose claimer died. A lock whose bytes are insane or held too
 * long is said once and ends the pass. Each returns whether any record
 * moved (producers are active).
 */
bool hold_adopt(struct hold *h, bool final);
bool hold_pending(const struct hold *h);
bool hold_next(struct hold *h);

/*
 * Ring format 2.0: a drain into a capture has full blocks sequenced in
 * place instead of copied into the ring (a discard ring's; an overwrite
 * ring's are copied, as its slots may be lapped). hold_in_place() turns
 * that on, taking over the blocks a collector before it left sequenced.
 * hold_extent() is the extent holding sequence seq, or the first after
 * it (NULL: none); hold_release() frees the blocks whose records are all
 * below tail (written out) and that the ring need keep no longer: a
 * ring's worth of sequences behind its head, as its slots would be
 * reused, or beyond a quarter of its blocks, or beyond half of them with
 * those full and waiting.
 */
void hold_in_place(struct hold *h, uint64_t tail);
const struct shmt_full *hold_extent(const struct hold *h, uint64_t seq);
void hold_release(struct hold *h, uint64_t tail);

/* Puts our pid in the header's collector_pid: producers hand their full
 * blocks over from now on (handoff.c), and readers know the ring drained. */
void hold_mark(struct hold *h);

/* Frees what hold_init() took, the ring's lock and descriptor too, and
 * takes hold_mark()'s pid off the header (guarded: the segment may have
 * been truncated under us). */
void hold_free(struct hold *h);

#endif
