/* SPDX-License-Identifier: MIT */
/*
 * pick.h - the records an export writes. --pid and --from/--to select
 * records; every flow that a selected record is in is written whole, the
 * steps of other processes and outside the window too, so that no arrow
 * is cut. With --split, one time window at a time: a flow goes into the
 * window its first selected record starts in, with all its steps.
 */
#ifndef SHMTRACE_PICK_H
#define SHMTRACE_PICK_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "flowmap.h"
#include "source.h"

struct pick {
	const struct filter *flt;
	bool all;		/* nothing selects: every record, no pass made */
	/* each flow with a selected record -> the start of its first one */
	struct flowmap flows;
	uint64_t t0, t_end;	/* earliest and latest start of a record of the pids */
	bool any;		/* there is such a record */
	/* --split: piece i of npieces starts split_ns * i after first_ns
	 * (relative to t0, as --from); the last one takes all after it */
	uint64_t split_ns, first_ns, npieces;
	uint64_t piece, lo, hi;	/* the current piece: [lo, hi) relative to t0 */
};

/*
 * Reads src as the selection needs before an export: not at all without
 * --pid, --from, --to and --split; once for the flows of the selected
 * records (and t0 with --split); twice with --from or --to (t0 first:
 * the window is relative to it). Memory: one entry per flow that has a
 * selected record. split_ns is --split's length (0: none); npieces is
 * then how many pieces the window makes, piece 0 selected. Returns 0 or
 * -errno (err set when the source says why).
 */
int pick_prepare(struct pick *p, struct source *src, const struct filter *f, uint64_t split_ns,
		 char *err, size_t errlen);
void pick_free(struct pick *p);

/* Warns when --from (f) is past last, the trace's end relative to its
 * first record (what says which end: "its last record starts at"): the
 * output has no events. */
void pick_warn_past_end(const struct filter *f, uint64_t last, const char *what);

/* Whether --pid (f) selects nothing: none of its pids has a record in
 * src (any: whether one does). Then err says so ("no records of pid 1 in
 * 'run.cap'"), the one message of export and svg, which both fail with
 * it (exit 1): a trace of none of the processes asked for is taken for
 * a mistake, not written empty. */
bool pick_pids_missing(const struct filter *f, bool any, const struct source *src, char *err,
		       size_t errlen);

/* Selects piece i (< npieces) of a split. */
void pick_piece(struct pick *p, uint64_t i);

/* What pick_record() remembers within one pass (the caller's, zeroed at
 * its start): the last record that is not an argument, and its answer. */
struct pick_pass {
	uint32_t pid, tid;
	uint64_t ts;
	bool wanted;
};

/*
 * Whether r, a record of the source's ring ring, is written. An argument
 * record goes with the record it belongs to, the one before it; one
 * whose record is not that one (torn or lapped) is answered as a record
 * of its own, so that the export counts it (args_lost) where it would
 * have shown it.
 */
bool pick_record(const struct pick *p, const struct shmt_record *r, uint32_t ring,
		 struct pick_pass *st);

#endif
