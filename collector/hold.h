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
	struct shmt_owner *dead;	/* per block: owner found dead */
	uint64_t last_reap_ns;
	uint64_t last_idle_ns;		/* owned blocks last flushed */
	uint64_t lock_hold_max_ns;	/* the longest the lock was held */
	bool lock_warned;
	/* the last hold_adopt() that looked for the dead: blocks whose
	 * owner it found dead inside open spans, and the first such owner */
	uint32_t died_open;
	struct shmt_owner died;
	struct shmt_full *order;	/* full blocks, oldest claim first */
	uint32_t full_left;		/* full blocks the last hold_adopt() left */
};

/*
 * Claims ring (mapped in v) for this collector: an advisory lock on a
 * second descriptor of the segment, kept until exit, since two collectors
 * on one ring would both advance its tail. Returns 0, -EBUSY (another
 * collector has it), -ESTALE (the name now refers to another segment) or
 * -errno; -ENOMEM.
 */
int hold_init(struct hold *h, struct shmt_view *v, const char *ring);

/*
 * Moves the blocks producers handed over (oldest first, while a discard
 * ring has room for them: full_left says how many wait) and live
 * threads' staged records into the ring under the lock, and, once a
 * second (or with final), adopts dead threads' blocks: their records
 * flushed, the spans they died in recorded, the blocks freed; and frees
 * blocks whose claimer died. A lock whose bytes are insane or held too
 * long is said once and skipped. Returns whether any record moved
 * (producers are active).
 */
bool hold_adopt(struct hold *h, bool final);

void hold_free(struct hold *h);

#endif
