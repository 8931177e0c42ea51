/* SPDX-License-Identifier: MIT */
/*
 * snapshot.h - a live ring copied into a capture file of its own: a
 * snapshot. What `shmtrace snapshot` and shmtrace-collector
 * --flight-recorder write (docs/DESIGN.md, "Snapshots of a live ring").
 *
 * The copy reads the ring as every reader does, without its lock, while
 * producers write on: it never takes the lock, never moves the tail (a
 * collector draining the ring goes on as if nothing happened) and writes
 * nothing into the segment. A record of the window that a producer
 * overwrites while it is copied is seen by its commit word, counted and
 * left out, never copied torn; the records the threads have staged in
 * their blocks are copied too, each once, whether or not a flush moves
 * them into the ring meanwhile. The file is a capture (its header says
 * it is a snapshot, of which window, why, and what the copy lost:
 * docs/CAPTURE-FORMAT.md, "Snapshots"), with every string and name slot
 * of the ring, and reads with `shmtrace export` like any.
 */
#ifndef SHMTRACE_SNAPSHOT_H
#define SHMTRACE_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>

#include "capture.h"
#include "ring_view.h"

struct shmt_snap_opts {
	const char *ring;	/* the ring's name, for the header */
	/* the window: the records that end at or after this ring time (0:
	 * all the ring holds) */
	uint64_t since_ns;
	/* or, when not 0: those that end at most keep_ns before the trigger
	 * (the record the copy finds, see trigger_from_ns; else
	 * info.trigger_ns) */
	uint64_t keep_ns;
	/* 0: no bound; else the oldest records of the window are left out
	 * (counted in `cut`) until the file is at most this size, its names
	 * and the records staged in blocks always whole */
	uint64_t max_bytes;
	/* with cause SHMT_SNAP_TRIGGER and no trigger name: the header
	 * names the first trigger record at or after this ring time */
	uint64_t trigger_from_ns;
	bool exclusive;		/* the path must not exist (OUTFILE_NEW) */
	bool sync;		/* fsync the file before naming it */
	/* the cause, the trigger (name, time, who: where the caller knows
	 * them), the triggers it answers and those suppressed: the rest of
	 * the header's snapshot fields are the copy's */
	struct shmt_cap_snapshot info;
};

/* What a snapshot wrote. */
struct shmt_snap_result {
	struct shmt_cap_snapshot info;	/* the header's snapshot fields */
	uint64_t records;		/* records in the file */
	uint64_t bytes;			/* the file's size */
};

/*
 * Copies what ring v holds into a new capture at path (written whole,
 * then named: a failure leaves nothing behind). Returns 0 with *res
 * filled, or -errno with a one-line reason in err: -EEXIST (exclusive and
 * the path exists), -EFAULT (the segment shrank under the copy), -ENOMEM,
 * or the file's error.
 */
int shmt_snapshot_write(const struct shmt_view *v, const char *path,
			const struct shmt_snap_opts *o, struct shmt_snap_result *res,
			char *err, size_t errlen);

#endif
