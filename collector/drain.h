/* SPDX-License-Identifier: MIT */
/*
 * drain.h - one collector session: a ring drained into a capture file.
 * The session's state is private to collector/drain*.c (drain_int.h);
 * main.c drives it and reads what it reports through these functions.
 */
#ifndef SHMTRACE_COLLECTOR_DRAIN_H
#define SHMTRACE_COLLECTOR_DRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "loss.h"
#include "writer.h"

#define DRAIN_BATCH 8192u	/* records copied out per lock-free pass */

struct drain_opts {
	const char *ring;
	const char *output;
	uint64_t poll_ns;	/* wake at least this often */
	uint64_t max_size;	/* 0: unbounded; else rotate to FILE.1, FILE.2 ... */
	uint32_t max_files;	/* 0: keep every part; else the newest max_files */
	enum cw_engine engine;	/* how each part is written (writer.h) */
};

struct drain_stats {
	uint64_t records;	/* records written to the capture */
	uint64_t bytes;		/* bytes written, all parts */
	uint64_t torn;		/* slots skipped: not a finished record */
	uint64_t lapped;	/* slots lapped before we read them (overwrite) */
	uint64_t lock_hold_max_ns;
	uint64_t lock_holds, lock_holds_long;	/* hold.h's */
	uint32_t parts;
	/* parts deleted for --max-files (each, or given up on: the
	 * collector said which on stderr), and the records they held */
	uint32_t parts_deleted;
	uint64_t records_deleted;
	struct shmt_loss ring;	/* the ring's counters, at the last LOSS frame */
	/* those counters cannot be true (shmt_loss_plausible(): forged, or
	 * a producer's bug): no counts, and why in words */
	bool ring_corrupt;
	char ring_corrupt_why[192];
};

struct drain;

/* A session not yet open, or NULL when out of memory. */
struct drain *drain_new(void);

/* Attaches to the ring: maps it, checks it (there, of a format this
 * collector reads) and takes its claim (no other collector drains it),
 * and nothing else: what can refuse the ring, asked before anything on
 * disk changes. Returns 0 or -errno, and then drain_error() says why. */
int drain_attach(struct drain *d, const struct drain_opts *o);

/* Attaches to the ring, unless drain_attach() did (with the same o), and
 * opens the output. Returns 0 or -errno, and then drain_error() says why
 * (and the ring is let go). */
int drain_open(struct drain *d, const struct drain_opts *o);

/* Why drain_open() failed, in one line; "" if it gave no reason. Also
 * why a pass failed with -ESTALE: the capture part being written was
 * deleted or replaced ("capture 'FILE' was deleted or replaced while
 * writing; ..."), checked once a pass, so at least once a nap. */
const char *drain_error(const struct drain *d);

/* Whether the last error was a capture part that could not be opened
 * (drain_error() says why: a symbolic link or a FIFO at its path, no
 * permission, ...), at drain_open() or at a rotation. */
bool drain_part_failed(const struct drain *d);

/* One pass: flush staging blocks, copy out what is published, submit it,
 * reap completions, release the ring over what is written. Returns the
 * number of records copied (0 = nothing to do), or -errno. */
long drain_pass(struct drain *d, bool final);

/* Whether the last pass stopped before all there was to copy (a pass
 * copies at most 4 x DRAIN_BATCH records): the drain is behind. */
bool drain_behind(const struct drain *d);

/* How far behind the drain was at the end of the last pass, in 1024ths
 * (PRIO_BACKLOG_FULL, priority.h) of what producers can stage before they
 * drop: the larger share of the staging blocks handed over and not yet
 * moved, and of the ring's sequences not yet written out. */
uint32_t drain_backlog(const struct drain *d);

/* Sleeps until producers wake us or poll_ns passes: after a pass that
 * found nothing. */
void drain_sleep(struct drain *d);

/* Whether, at now_ns, the drain has been awake long since its last nap
 * (DRAIN_AWAKE_MOST_NS, 1 ms) with its backlog under a sixteenth: then it
 * yields (drain.c says why). */
bool drain_awake_long(const struct drain *d, uint64_t now_ns);

/* A nap of 50 us, which producers can cut short, though records wait: a
 * producer the drain took the CPU from gets it back. */
void drain_yield(struct drain *d);

/* Drains everything published before it, then on for at most 2 s while
 * producers still write (the rest stays in the ring), writes the end
 * frame, fsyncs. Returns 0 or -errno. */
int drain_finish(struct drain *d);

/* After a write error: the file it happened on, and whether it was the
 * fsync (the bytes were written but may not be on disk). */
const char *drain_error_path(const struct drain *d);
bool drain_fsync_failed(const struct drain *d);

/* The session's figures. With failed (the session ended on an error),
 * records and bytes count only what the kernel confirmed written. */
void drain_get_stats(const struct drain *d, bool failed, struct drain_stats *st);

/* Warns on stderr about names the ring's tables had no room for: they are
 * not lost records, and a larger table keeps them. */
void drain_warn_names(const struct drain *d);

/* The ring's lifecycle, for main.c: threads attached to the ring now (see
 * shmt_ring_live_writers()); records it holds not yet drained (only
 * loads: a signal handler may ask); and removing it, only if its name
 * still refers to the segment drained (0, -ESTALE if the name now refers
 * to another ring, or -errno). */
uint32_t drain_live_writers(const struct drain *d);
/* Other processes that have the ring mapped now: producers with a handle
 * open, written through or not (see shmt_segment_mappers()). */
uint32_t drain_mappers(const struct drain *d);
uint64_t drain_undrained(const struct drain *d);
int drain_unlink_ring(struct drain *d);

/* Detaches from the ring, closes the output and frees d (NULL is a no-op). */
void drain_free(struct drain *d);

#endif
