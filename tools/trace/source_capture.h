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
	/* what the first read found in it: its END frame, if any, and the
	 * records of its RECORDS and PACKED frames */
	bool ended;
	struct shmt_cap_end end;
	uint64_t nrec;
	uint64_t end_seq;	/* past its highest record sequence */
};

/* One ring's life: the files that share a run_id (and a ring_id). */
struct source_run {
	uint64_t run_id;
	uint64_t ring_id;	/* 0: its files carry none (older collector) */
	char ring[256];		/* the ring's name */
	uint64_t realtime0, mono0;	/* its wall-clock anchor */
	uint32_t mode;		/* the ring's, as its first file says */
	uint64_t shift;		/* added to its records' ts (wrapping: signed) */
	uint64_t ts_min, ts_max;	/* its records' ts (before the shift), if any */
	bool any_ts;
	uint64_t next_seq;	/* records below it were delivered already */
	/* the ring's counters, the largest seen; torn is the collectors' */
	struct shmt_loss loss;
	uint64_t published;	/* the ring's head in the last loss frame */
	bool clean_last;	/* its newest file ended with an END frame */
	/* parts of a rotated capture not among the inputs: the records
	 * they hold where the parts present tell, and whether some hold a
	 * number nobody can tell (source_parts.c) */
	uint64_t missing;
	bool missing_unknown;
	bool tail_covers;	/* the ring read with it holds all after it */
	/* a snapshot (its header says so): what its file holds, the window
	 * and the records staged, is all it vouches for, not the head */
	bool snapshot;
	uint64_t snap_records;
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
	/* the ring the captures were drained from, read after them
	 * (source_tail.c), or NULL */
	const char *tail_ring;
	struct source *tail;
};

/* The first record of a RECORDS frame (first_seq first, n of them) to
 * hand over: those below next_seq were handed over already (a restarted
 * collector may write a batch again). */
static inline size_t source_new_from(uint64_t next_seq, uint64_t first, size_t n)
{
	return next_seq <= first ? 0 : next_seq - first < n ? next_seq - first : n;
}

/* rec as a source hands it over: its commit word the kind alone (the one
 * place a source sets it); false, counted torn in p, when that is no kind. */
static inline bool source_take(struct shmt_record *rec, struct source_pass *p)
{
	rec->commit = shmt_record_kind(rec);
	if (shmt_kind_valid(rec->commit))
		return true;
	p->skips.torn++;
	return false;
}

/* The run of run_id, or NULL. */
struct source_run *source_run_of(struct source_capture *c, uint64_t run_id);

/*
 * Gives the source one string table: the one ring's own, or, for several
 * rings, one id per distinct text and a map per ring (source_merge.c).
 * Returns 0 or -errno with err set.
 */
int source_merge_strings(struct source *s, struct source_capture *c, char *err, size_t errlen);
/* After the first read: names the parts of rotated captures that are not
 * among the inputs, on stderr, with the records they hold where the parts
 * present tell (source_parts.c). Returns 0 or -ENOMEM. */
int source_find_missing(struct source *s, struct source_capture *c);
/* source_tail.c: opens ring as the rest of the captures' one run, refusing
 * a ring they were not drained from (0 or -errno with err set); whether it
 * holds everything from sequence end_seq on; a pass over what it holds
 * beyond the captures; closing it. */
int source_tail_open(struct source *s, struct source_capture *c, const char *ring, char *err,
		     size_t errlen);
bool source_tail_covers(const struct source_capture *c, uint64_t end_seq);
int source_tail_pass(struct source *s, struct source_capture *c, struct source_pass *p,
		     char *err, size_t errlen);
void source_tail_close(struct source_capture *c);
/* Says, for a file cut short, when the ring it names still exists (the
 * same ring_id) how to export the rest with it. */
void source_tail_hint(const struct source_file *sf);
/* Groups the runs by host and puts other hosts' on the first file's clock. */
int source_group_hosts(struct source *s, struct source_capture *c, char *err, size_t errlen);

#endif
