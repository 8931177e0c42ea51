/* SPDX-License-Identifier: MIT */
/*
 * drain_int.h - the collector session's state and the steps its files
 * share: drain.c (the session), drain_frames.c (headers, tables and loss
 * frames of a capture part), drain_copy.c (records out of the ring and the
 * tail released over what is written).
 */
#ifndef SHMTRACE_COLLECTOR_DRAIN_INT_H
#define SHMTRACE_COLLECTOR_DRAIN_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "capture.h"
#include "drain.h"
#include "hold.h"
#include "ring_writer.h"
#include "loss.h"
#include "parts.h"
#include "ring_reader.h"
#include "writer.h"

#define DRAIN_CHECKPOINTS 64u	/* submissions whose skip counts wait for tail */

struct drain {
	struct drain_opts o;
	struct shmt_view v;
	struct cwriter *w;
	bool attached;		/* the ring mapped and claimed (drain_attach()) */
	bool opened;		/* drain_open() succeeded: drain_free() detaches */
	bool part_failed;	/* the last error: a capture part could not be opened */
	uint64_t run_id;
	uint64_t pos;		/* next ring sequence to copy */
	bool behind;		/* the last pass did not copy all there was */
	uint32_t backlog;	/* at the last pass's end: drain_backlog() */
	/* the last pass found records or full blocks: the ring's words that
	 * say work waits (wake-ups') are believed for the next nap; and
	 * those words as the pass left them: moved since, they are too */
	bool worked;
	uint64_t seen_full, seen_tail;
	bool head_forged_said;	/* a head no producer stores was warned of */
	uint64_t head_last;	/* the head the last pass read */
	bool head_back;		/* a head read below the one before (since
				 * drain_finish() began, while it runs) */
	uint32_t strings_sent;	/* strings already in the capture part */
	uint32_t threads_sent;
	uint32_t part;
	uint64_t part_started_ns;	/* ring time the part began (its header's) */
	/* the part's bytes before its first record: its header and the
	 * tables it starts with, which a part never counts against
	 * --max-size (drain_part_full()) */
	uint64_t part_base;
	struct parts *parts;		/* the parts ended, for --max-files */
	struct shmt_loss loss_sent;	/* the counters of the last LOSS frame */
	uint64_t idle_ns;	/* next nap; grows while nothing happens */
	uint64_t awake_since;	/* when the last nap ended, or the session began */
	struct shmt_record *scratch;	/* DRAIN_BATCH records */
	struct hold hold;		/* the claim, blocks moved and adopted */
	uint64_t done_parts;		/* ring sequence written up to, in ended parts */
	/*
	 * Slots we skipped, counted into the ring's `overwritten` and `torn`
	 * only once the capture holds everything before them (tail moved
	 * past them): a collector killed before that leaves them to the next
	 * one, which visits them again, so each is counted exactly once.
	 */
	struct shmt_ring_skips skipped, skipped_published;
	uint64_t records_published;	/* records framed below the tail we moved */
	struct drain_checkpoint {
		uint64_t seq;			/* submitted up to here ... */
		struct shmt_ring_skips skipped;	/* ... having skipped these */
		uint64_t records;		/* ... and framed these */
	} ckpt[DRAIN_CHECKPOINTS];
	uint32_t nckpt;
	struct drain_stats st;
	char err[512];
};

/* drain_frames.c: opens part d->part of the output, deletes the parts
 * --max-files no longer keeps, and writes its header (0 or -errno, d->err
 * set); appends frames for strings and name slots the
 * part does not have yet, and a LOSS frame when the ring's counters moved
 * (or always, with force). */
int drain_open_part(struct drain *d);
int drain_put_tables(struct drain *d);
int drain_put_loss(struct drain *d, bool force);

/* drain_copy.c: copies records [d->pos, head) out, at most DRAIN_BATCH
 * (records copied, or -errno); submits what is buffered, covering the
 * ring up to d->pos; moves the ring's tail over what is written. */
long drain_copy_records(struct drain *d, uint64_t head);
int drain_submit(struct drain *d);
void drain_release_tail(struct drain *d);
/* The records framed in what is written up to ring sequence done (the
 * slots skipped below it are no records). */
uint64_t drain_records_written(const struct drain *d, uint64_t done);

#endif
