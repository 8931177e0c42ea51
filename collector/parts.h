/* SPDX-License-Identifier: MIT */
/*
 * parts.h - the parts of a rotated capture (FILE, FILE.1, ...): their
 * names, and the bound of --max-files. The parts this collector ended are
 * remembered with the identity of their file; when a new part begins, the
 * oldest beyond the bound are deleted, each only while it is still the
 * file the collector wrote. What was deleted is what every later part's
 * header says (struct shmt_cap_deleted), so that the parts left name it.
 */
#ifndef SHMTRACE_COLLECTOR_PARTS_H
#define SHMTRACE_COLLECTOR_PARTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture.h"

#define PARTS_PATH_MAX	4200	/* a path of at most 4095 bytes, ".", a part number */

/* The path of part `part` of the capture output: output itself for part
 * 0, else output.part. Returns 0, or -ENAMETOOLONG when it does not fit. */
int parts_path(const char *output, uint32_t part, char *buf, size_t len);

/* A part the collector ended (rotated away from). */
struct part_ended {
	uint32_t part;
	uint64_t dev, ino;	/* its file, as written (cw_identity()); 0: not known */
	uint64_t records;	/* the run's records up to its end: its END frame's */
	uint64_t started_ns;	/* ring time it began: its header's started_ns */
	uint64_t end_ns;	/* ... and ended: its END frame's end_ns */
};

struct parts;

/* The parts of the capture output, at most max_files of them kept (0: no
 * bound, nothing remembered). NULL when out of memory. output is not
 * copied: it must outlive the value. */
struct parts *parts_new(const char *output, uint32_t max_files);
void parts_free(struct parts *p);

/* Part e ended, in order: part 0 first, then 1, ... */
void parts_ended(struct parts *p, const struct part_ended *e);

/*
 * A new part began: deletes the oldest parts ended so that, with the new
 * one, at most max_files remain. A part that is not the file written any
 * more (moved away, replaced, a link put in its place) is left alone, and
 * a failed deletion is reported; both are said on stderr, never fatal,
 * and counted with the deleted ones (the capture no longer vouches for
 * them).
 */
void parts_prune(struct parts *p);

/*
 * Before a collector writes the capture output: a capture already there
 * (a collector before this one, restarted with the same -o) is kept, not
 * truncated. FILE, its parts FILE.N and FILE.replaced, those that are
 * captures of ours (regular files of one name that begin as a capture
 * does), are renamed to FILE.prevK, FILE.prevK.N, FILE.prevK.replaced with
 * the first K whose names are all free; nothing is ever renamed onto a
 * file. With none, the usual start. Returns the files moved (0: none) with
 * their new base in kept ("" when none), or -errno with err saying why
 * (then nothing is overwritten either: the collector must not start).
 */
int parts_keep_previous(const char *output, char *kept, size_t len, char *err, size_t errlen);

/* What the parts given up so far were: what the next header says. */
const struct shmt_cap_deleted *parts_deleted(const struct parts *p);

#endif
