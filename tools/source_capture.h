/* SPDX-License-Identifier: MIT */
/*
 * source_capture.h - the state of a source's capture back-end: the files
 * sorted by run and part, and the runs (one ring's life each) they form;
 * shared by source_capture.c and source_merge.c.
 */
#ifndef SHMTRACE_SOURCE_CAPTURE_H
#define SHMTRACE_SOURCE_CAPTURE_H

#include "capture.h"
#include "source_int.h"

#define CAP_MAX_STRINGS 65536u	/* record string ids are 16 bits */

struct source_file {
	char *path;
	struct shmt_cap_header h;
};

/* One ring's life: the files that share a run_id (and a ring_id). */
struct source_run {
	uint64_t run_id;
	uint64_t ring_id;	/* 0: its files carry none (older collector) */
	char ring[256];		/* the ring's name */
	uint64_t realtime0, mono0;	/* its wall-clock anchor */
	uint64_t shift;		/* added to its records' ts (wrapping: signed) */
	uint64_t next_seq;	/* records below it were delivered already */
	/* the ring's counters, the largest seen; torn is the collectors' */
	struct shmt_loss loss;
	uint64_t published;	/* the ring's head in the last loss frame */
	bool clean_last;	/* its newest file ended with an END frame */
	/* of the current pass */
	uint64_t records;	/* distinct records delivered */
	uint64_t bad;		/* records with an invalid kind */
	char **str;		/* its own string table, while loading */
	uint32_t *slen;
	uint16_t *map;		/* its string ids -> the source's, or NULL */
};

struct source_capture {
	struct source_file *files;
	size_t nfiles;
	struct source_run *runs;
	size_t nruns;
	/* the run and sequence of the record handed over last */
	const struct source_run *prev_run;
	uint64_t prev_seq;
};

/* The run of run_id, or NULL. */
struct source_run *source_run_of(struct source_capture *c, uint64_t run_id);

/*
 * Gives the source one string table: the one ring's own, or, for several
 * rings, one id per distinct text and a map per ring (source_merge.c).
 * Returns 0 or -errno with err set.
 */
int source_merge_strings(struct source *s, struct source_capture *c, char *err, size_t errlen);
/* Groups the runs by host and puts other hosts' on the first file's clock. */
int source_group_hosts(struct source *s, struct source_capture *c, char *err, size_t errlen);

#endif
