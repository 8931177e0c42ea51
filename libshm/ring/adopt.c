/* SPDX-License-Identifier: MIT */
/*
 * adopt.c - a dead thread's staging block taken back: its owner found dead
 * without the lock (reading /proc), then, under the lock, its records
 * flushed into the ring (ring_write.c), the spans it died inside recorded
 * (read by inflight.c) and the block freed. A producer that finds no free
 * block and the collector on each poll both come here; the files it calls
 * never call back.
 */
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
 * Flushes staging blocks. With all, every block's pending records are
 * flushed (the collector does this each poll so that an idle thread's few
 * records are not held back); free blocks are always emptied. Blocks named
 * in dead (from shmt_find_dead_blocks(), may be NULL) that still have the
 * same owner are flushed and freed. Lock held. Returns records published.
 */
uint64_t shmt_adopt_blocks_locked(struct shmt_view *v, bool all, const struct shmt_owner *dead)
{
	uint64_t done = 0;

	for (uint32_t i = 0; i < v->nblocks; i++) {
		struct shmt_block *b = shmt_block_at(v, i);
		uint32_t state = load_relaxed(&b->state);
		bool pending = load_acquire(&b->written) != load_relaxed(&b->taken);
		bool gone = dead && dead[i].pid && state == SHMT_BLOCK_OWNED &&
			    load_relaxed(&b->pid) == dead[i].pid &&
			    load_relaxed(&b->tid) == dead[i].tid &&
			    load_relaxed(&b->start_time) == dead[i].start_time;

		if (pending && (all || gone || state != SHMT_BLOCK_OWNED))
			done += shmt_flush_block_locked(v, i);
		if (gone) {
			/* the spans it died in, after its last records */
			done += open_publish_locked(v, i, dead[i].seen);
			store_release(&b->state, SHMT_BLOCK_FREE);
		}
	}
	return done;
}
