/* SPDX-License-Identifier: MIT */
/*
 * drain.h - one collector session: a ring drained into a capture file.
 */
#ifndef SHMTRACE_COLLECTOR_DRAIN_H
#define SHMTRACE_COLLECTOR_DRAIN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "internal.h"
#include "loss.h"
#include "ring_reader.h"
#include "writer.h"

#define DRAIN_BATCH 8192u	/* records copied out per lock-free pass */
#define DRAIN_CHECKPOINTS 64u	/* submissions whose skip counts wait for tail */

struct drain_opts {
	const char *ring;
	const char *output;
	uint64_t poll_ns;	/* wake at least this often */
	uint64_t max_size;	/* 0: unbounded; else rotate to FILE.1, FILE.2 ... */
};

struct drain_stats {
	uint64_t records;	/* records written to the capture */
	uint64_t bytes;		/* bytes written, all parts */
	uint64_t torn;		/* slots skipped: not a finished record */
	uint64_t lapped;	/* slots lapped before we read them (overwrite) */
	uint64_t lock_hold_max_ns;
	uint32_t parts;
	struct shmt_loss ring;	/* the ring's counters, at the last LOSS frame */
};

struct drain {
	struct drain_opts o;
	struct shmt_view v;
	struct cwriter w;
	uint64_t run_id;
	uint64_t pos;		/* next ring sequence to copy */
	uint32_t strings_sent;	/* strings already in the capture part */
	uint32_t threads_sent;
	uint32_t part;
	struct shmt_loss loss_sent;	/* the counters of the last LOSS frame */
	uint64_t last_reap_ns;
	uint64_t idle_ns;	/* next nap; grows while nothing happens */
	bool lock_warned;
	struct shmt_record *scratch;	/* DRAIN_BATCH records */
	struct shmt_owner *dead;	/* per block: owner found dead */
	uint64_t start_seq;		/* ring sequence we started from */
	/*
	 * Slots we skipped, counted into the ring's `overwritten` and `torn`
	 * only once the capture holds everything before them (tail moved
	 * past them): a collector killed before that leaves them to the next
	 * one, which visits them again, so each is counted exactly once.
	 */
	struct shmt_ring_skips skipped, skipped_published;
	struct drain_checkpoint {
		uint64_t seq;			/* submitted up to here ... */
		struct shmt_ring_skips skipped;	/* ... having skipped these */
	} ckpt[DRAIN_CHECKPOINTS];
	uint32_t nckpt;
	struct drain_stats st;
	char err[512];
};

/* Attaches to the ring and opens the output. Returns 0 or -errno (err set). */
int drain_open(struct drain *d, const struct drain_opts *o);

/* One pass: flush staging blocks, copy out what is published, submit it,
 * reap completions, release the ring over what is written. Returns the
 * number of records copied (0 = nothing to do), or -errno. */
long drain_pass(struct drain *d, bool final);

/* Sleeps until producers wake us or poll_ns passes. */
void drain_sleep(struct drain *d);

/* Drains everything, writes the end frame, fsyncs. Returns 0 or -errno. */
int drain_finish(struct drain *d);

void drain_close(struct drain *d);

#endif
