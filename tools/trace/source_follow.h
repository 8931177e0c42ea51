/* SPDX-License-Identifier: MIT */
/*
 * source_follow.h - a source that follows a capture as the collector
 * writes it (`shmtrace stream --follow`): the records of the parts FILE,
 * FILE.1, ... as they reach the file, each once, the strings, name slots
 * and loss counters as their frames come. Files left by an earlier
 * collector that were not read to their end (the backlog) come first.
 * One pass, which ends at the END frame of the last part, or when the
 * caller's idle hook says so.
 */
#ifndef SHMTRACE_SOURCE_FOLLOW_H
#define SHMTRACE_SOURCE_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "source.h"

struct follow_opts {
	const char *output;		/* the capture: FILE, then FILE.1, ... */
	char *const *backlog;		/* files read before it, in order */
	size_t nbacklog;
	/* the collector writing it (its parts' headers name it); 0: take
	 * the file there, whoever wrote it */
	uint32_t collector_pid;
	/* wait for the output to grow, until the END frame of its last part;
	 * else stop where the files end */
	bool follow;
	/* records of run run_id below from_seq were handled before: not
	 * handed over */
	uint64_t run_id, from_seq;
	/*
	 * Called when nothing more is there yet (caught_up: every file read
	 * to where it is written), after waiting at most poll_ms for it to
	 * grow: 0 waits on, 1 ends the pass (source_records() returns 0),
	 * else a -errno that ends it.
	 */
	int (*idle)(void *ctx);
	/* Before the first record of run run_id (the first file's, and
	 * another ring's after it): 0 or -errno. The source still holds the
	 * run before it, if any: its tables, anchors and ring_info(). */
	int (*run_begin)(void *ctx, uint64_t run_id);
	void *ctx;
	unsigned poll_ms;
};

/* Sets s up to follow o->output (nothing is read before the pass but,
 * unless o->follow, its header: a capture that is not there or is none
 * is an error now). Returns 0 or -errno with err set. */
int source_open_follow(struct source *s, const struct follow_opts *o, char *err, size_t errlen);
/* Before the pass: the backlog (files read first), and where a run was
 * read to before (records of run_id below from_seq not handed over). */
void source_follow_from(struct source *s, char *const *backlog, size_t nbacklog, uint64_t run_id,
			uint64_t from_seq);

/* Where the record handed over last is: its ring sequence, and the run. */
uint64_t source_follow_seq(const struct source *s);
uint64_t source_follow_run(const struct source *s);
/* Records of parts deleted (--max-files) before they were read. */
uint64_t source_follow_skipped(const struct source *s);
/* The backlog files read to their end (they may be removed once what
 * they held is sent). */
size_t source_follow_backlog_done(const struct source *s);
/* Whether the files were read to their clean end (the END of the last
 * part), so that nothing more will come. */
bool source_follow_ended(const struct source *s);

/* Whether the capture part at path is one of run run_id, written by
 * another collector than collector_pid, that holds a record of sequence
 * next_seq or later: 1, else 0 (also when it cannot be read). */
int source_part_unsent(const char *path, uint64_t run_id, uint32_t collector_pid,
		       uint64_t next_seq);
/* The path of part part of a capture: output, output.1, ... */
void source_part_path(const char *output, uint32_t part, char *buf, size_t len);
/* The smallest part number above above whose file is there (newest: the
 * largest), 0 when there is none. */
uint32_t source_part_scan(const char *output, uint32_t above, bool newest);

#endif
