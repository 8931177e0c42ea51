/* SPDX-License-Identifier: MIT */
/*
 * source.h - one iterator over a trace, whether it comes from capture
 * files (all parts of a run, in any order) or straight from a ring in
 * /dev/shm: its strings, its name slots, its loss counters, and a pass
 * over its records.
 */
#ifndef SHMTRACE_SOURCE_H
#define SHMTRACE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "ring_view.h"
#include "loss.h"
#include "record.h"

struct source_loss {
	/* the ring's counters; torn also counts records a reader skipped
	 * as half-written or overwritten */
	SHMT_LOSS_MEMBER;
	/* published records that are neither exported nor counted above: a
	 * bug or a forged counter, never expected (see reconcile()) */
	uint64_t unaccounted;
	/* records in parts of a rotated capture that are not among the
	 * inputs, where the parts present tell how many (source_parts.c) */
	uint64_t missing;
	/* of those, the records of parts its collector deleted to keep
	 * within --max-files (the parts left say so in their headers) */
	uint64_t deleted;
	/* the counters cannot be true (shmt_loss_plausible(): forged, or a
	 * writer's bug): every tool shows them as "corrupt" (JSON: null and
	 * "counters_corrupt": true), never as counts; why says which
	 * relation failed, in words */
	bool corrupt;
	char corrupt_why[192];
};

/* The ring's name tables, to say which one was full: 0 when not known
 * (a capture written before the LOSS frame carried them). */
struct source_tables {
	uint32_t max_strings, string_bytes, max_threads;
};

struct source_ops;
struct source_open;

/* A snapshot among the inputs: a live ring's copy, as its header tells
 * it (docs/CAPTURE-FORMAT.md, "Snapshots"; the exports see no capture
 * header, only this). Times are on the trace's clock. */
struct source_snapshot {
	uint32_t ring_index;		/* the source's ring (run) it is of */
	char ring[256];
	const char *cause;		/* "trigger", "command", "signal", "death", ... */
	char trigger[SHMT_STRING_MAX + 1];	/* the trigger's name, or what died */
	uint64_t trigger_ns;
	uint32_t trigger_pid, trigger_tid;
	uint64_t first_seq, end_seq;	/* the window, ring sequences ... */
	uint64_t from_ns, to_ns;	/* ... and times (from_ns 0: no record, no start) */
	uint64_t overwritten;		/* records of the window lost during the copy */
	uint64_t staged;		/* records from staging blocks, open spans */
	uint64_t triggers, suppressed;	/* triggers it answers; not answered (rate) */
	uint64_t cut;			/* oldest records left out for a size bound */
};

struct source {
	/* the back-end, source_ring.c or source_capture.c (source_int.h),
	 * and its own state */
	const struct source_ops *ops;
	void *be;
	const char *name;		/* ring name, or the first file */
	char *const *inputs;		/* the files as given (capture input) */
	size_t ninputs;
	/* the permission bits every input has (st_mode & 07777 of each, the
	 * ring's and the files' as opened, ANDed): what an output made of
	 * them may let others read (outfile_mode_within()) */
	uint32_t perm;
	/*
	 * The ring the record being handed to a source_record_fn comes from,
	 * 0..nrings-1. Flow ids only mean something within one ring, so
	 * whoever joins records by flow id joins them per ring. A ring is
	 * told by its ring_id, or by the run_id in files without one (one
	 * ring's life has one run_id). String ids are per ring too: when
	 * the inputs come from several rings the source renumbers them into
	 * one table (source_string), so records carry ids of that table.
	 */
	uint32_t ring;
	uint32_t nrings;
	/*
	 * The host ring i was created on is host_of[i] (0..nhosts-1, named
	 * hosts[]): the capture header's host field, or this machine for a
	 * ring input. When the inputs come from several hosts, the records
	 * of a host other than the first file's have their ts moved onto
	 * the first file's clock by the two rings' wall-clock anchors, plus
	 * the offset given to source_clock_offset() (so everything reading a
	 * source sees one time line).
	 */
	uint32_t *host_of;
	char (*hosts)[64];
	uint32_t nhosts;
	uint32_t *thr_ring;		/* the ring of each name slot in thr */
	bool cut;			/* some file ended without its END frame */
	bool damaged;			/* some file had a damaged frame */
	/* parts of a rotated capture not among the inputs, by file name
	 * (the first 64), and how many of them its collector deleted for
	 * --max-files */
	char **missing_parts;
	size_t nmissing_parts;
	uint64_t deleted_parts;
	/* each run of them in words, as warned: "parts 0-3 of the capture
	 * of ring 'app' (...) were deleted by shmtrace-collector --max-files
	 * 4 ...", "part of ... missing from the inputs: ..." (the first 16) */
	char **missing_why;
	size_t nmissing_why;
	char **str;			/* id -> NUL-terminated text, or NULL */
	uint32_t *slen;
	uint32_t nstr;
	struct shmt_thread *thr;	/* name slots in the order they were made */
	size_t nthr, thrcap;
	struct source_loss loss;
	struct source_tables tables;
	uint64_t realtime0, mono0;	/* wall-clock anchor */
	bool clock_tsc;
	uint32_t capacity, mode;
	uint64_t records;		/* records delivered by the last pass */
	/* while a record is handed over: it comes right after the one
	 * handed over before it in its ring's sequence (same run, same
	 * staging block), so an argument record belongs to that one */
	bool follows;
	unsigned passes;
	/* the arguments of open spans, kept as a pass goes (source_open.c) */
	struct source_open *open;
	/* the snapshots among the capture inputs, in the inputs' order */
	struct source_snapshot *snaps;
	size_t nsnaps;
};

/*
 * Opens a ring (ring != NULL) or capture files and loads strings, name
 * slots and loss counters. Returns 0, or -errno with a one-line reason in
 * err. Warnings about cut or damaged files go to stderr once, here.
 */
int source_open_ring(struct source *s, const char *ring, char *err, size_t errlen);
int source_open_files(struct source *s, char *const *paths, size_t n, char *err, size_t errlen);
/* The n capture files and then, when ring is not NULL, what that ring (the
 * one they were drained from: the same ring_id, else refused) holds
 * beyond them, by ring sequence. */
int source_open_files_ring(struct source *s, const char *ring, char *const *paths, size_t n,
			   char *err, size_t errlen);
/* The ring when ring is not NULL and n is 0, the n capture files and
 * that ring with both, else the n capture files. */
int source_open(struct source *s, const char *ring, char *const *paths, size_t n,
		char *err, size_t errlen);
void source_close(struct source *s);

/*
 * Calls fn for every record, deduplicated; start_time is the producer
 * process's start time when known (staging blocks), else 0. A pass over a
 * ring is guarded against the segment shrinking. Torn records are counted
 * in s->loss.torn (once, on the first pass). Returns 0, fn's first
 * non-zero return, or -errno with err set.
 */
/* Records of kind SHMTRACE_KIND_ARG are handed over too, with s->follows
 * saying whether they may belong to the record before them; a ring's open
 * spans come as SHMTRACE_KIND_OPEN records after each block's records.
 * The arguments of open spans (argument records of count 0) are not
 * handed over: source_open_args() gives them with their span. */
typedef int (*source_record_fn)(void *ctx, const struct shmt_record *r, uint64_t start_time);

int source_records(struct source *s, source_record_fn fn, void *ctx, char *err, size_t errlen);

/*
 * While an open span (a record of kind SHMTRACE_KIND_OPEN) is handed over:
 * the arguments its thread added while it was open (docs/FORMAT.md,
 * arguments of open spans), or NULL when none came; a text argument's
 * bytes are text[off .. off + SHMT_TEXT_LEN(value)). Valid during that
 * call only.
 */
const struct open_args *source_open_args(const struct source *s);

/* Adds ns (signed) to the timestamps of host's records, after the
 * wall-clock alignment; before the first pass. Returns 0, -ENOENT when
 * no input comes from that host, or -ERANGE (nothing moved) when it would
 * move one of its records before 0 or past 2^63 - 1 ns. */
int source_clock_offset(struct source *s, const char *host, int64_t ns);

/* Ring i (0..nrings-1): its name, ring_id (0: unknown) and run_id (0
 * for a ring input). Returns 0, or -ENOENT past the last. */
int source_ring_info(const struct source *s, uint32_t i, const char **name, uint64_t *ring_id,
		     uint64_t *run_id);

/* What the source reads: "ring" or "capture". */
const char *source_kind(const struct source *s);
/* Input i as given: the capture files, or the ring's name (its only
 * input); NULL past the last. */
const char *source_input(const struct source *s, size_t i);

/* Whether the inputs hold the whole trace: no file cut short or
 * damaged, no part of a rotated capture missing or deleted. */
bool source_complete(const struct source *s);

/* The text of string id (len in *len): "?" for 0 and unknown ids. */
const char *source_string(struct source *s, uint32_t id, size_t *len);
/* The name a trigger record (SHMTRACE_KIND_TRIGGER) is exported under,
 * "trigger: NAME", in buf (its length in *len), the same in every
 * format. */
const char *source_trigger_label(struct source *s, const struct shmt_record *r, char *buf,
				 size_t buflen, size_t *len);
/* The room source_trigger_label() needs. */
#define SOURCE_TRIGGER_LABEL_MAX	(SHMT_STRING_MAX + 16)

/* The snapshots among the inputs in words, one line each (when, by what,
 * the window, what the copy lost, the triggers suppressed), as every
 * export puts them into its trace: fn(ctx, ts, line), ts the snapshot's
 * trigger time on the trace's clock. Returns how many. */
typedef void (*source_snap_fn)(void *ctx, uint64_t ts, const char *line);
size_t source_snapshot_lines(const struct source *s, source_snap_fn fn, void *ctx);
/* The records of the snapshots' windows left out for a size bound (their
 * `cut`), summed over the snapshots among the inputs. */
uint64_t source_snapshots_cut(const struct source *s);

/* Whether id names a string of the trace (not "?"). */
bool source_has_string(const struct source *s, uint32_t id);
/* Strings known and the bytes they take in the ring (one more each). */
void source_strings_used(const struct source *s, uint32_t *n, uint64_t *bytes);

/* Warns about lost records, and records no counter accounts for, on
 * stderr (source_warn.c); nothing when there are none. Counters found
 * corrupt were warned about once, when found, and are not repeated. */
void source_warn_lost(const struct source_loss *l);

/* Says in words which names were lost and why (stderr): names_lost of
 * what kind names, "event" (what an export writes, of every kind) or
 * "span" (what summary counts), written as "?" because the ring's string
 * table was full (or an id was never interned),
 * threads_unnamed threads shown as "tid N" because its thread-name
 * table was. Neither is a lost record. */
void source_warn_names(const struct source *s, uint64_t names_lost, const char *kind,
		       uint64_t threads_unnamed);

/* The losses in words, one line each, as every export puts them at the
 * start of its trace ("shmtrace: 3 records dropped ..."): loss.h's kinds,
 * the names_lost events written as "?", the records no counter accounts
 * for, or that the counters are corrupt. Calls fn for each line; returns
 * how many. */
typedef void (*source_loss_fn)(void *ctx, const char *line);
size_t source_loss_lines(const struct source_loss *l, uint64_t names_lost, source_loss_fn fn,
			 void *ctx);

/* Prints "shmtrace: warning: ..." on stderr. */
void source_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
