/* SPDX-License-Identifier: MIT */
/*
 * writer.h - the collector's io_uring file writer: several buffers in flight,
 * every completion checked, short writes resubmitted, completions reported
 * in submission order so that the ring's tail only ever advances over bytes
 * the kernel has accepted.
 */
#ifndef SHMTRACE_COLLECTOR_WRITER_H
#define SHMTRACE_COLLECTOR_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>

#define CW_DEPTH 8			/* buffers in flight */
#define CW_BUF_LIMIT (1u << 20)		/* a buffer is submitted past this */

struct cwriter;

/* A writer with no file open yet, or NULL when out of memory. */
struct cwriter *cw_new(void);

/* Opens (creating or truncating) path and sets up the ring. Returns 0, or
 * -errno with a one-line reason in err: path is never followed when it is
 * a symbolic link, nor written when it is not a regular file (outfile.h). */
int cw_open(struct cwriter *w, const char *path, char *err, size_t errlen);

/* Returns the buffer being filled (the newest request, not yet submitted). */
msgpack_sbuffer *cw_buffer(struct cwriter *w);

/* Submits the buffer being filled; end_seq is the ring sequence that is
 * safe to release once it is written (0: none). Waits for a free slot when
 * all are in flight. Returns 0 or the sticky -errno. */
int cw_submit(struct cwriter *w, uint64_t end_seq);

/* Handles completions: waits for at least one when wait is true and some are
 * in flight. Returns 0 or the sticky -errno (ENOSPC, EFBIG, EIO...). */
int cw_reap(struct cwriter *w, bool wait);

/* Waits until nothing is in flight. */
int cw_drain(struct cwriter *w);

/* fsync through the ring; an error is final (a retried fsync can lie). */
int cw_fsync(struct cwriter *w);

/* Closes the file; cw_open() may open another with the same writer. */
void cw_close(struct cwriter *w);

/* Closes the file and frees w (NULL is a no-op). */
void cw_free(struct cwriter *w);

/* Whether the file being written is still the one at its path: 0, or
 * -ESTALE when it was deleted (no link left) or its path now names another
 * file (renamed over, recreated); what is written to it then is lost. */
int cw_check_file(const struct cwriter *w);

/* The identity (device, inode) of the file open: 0, or -errno when none
 * is open or fstat fails. What is at the path later is this file only if
 * it has this identity. */
int cw_identity(const struct cwriter *w, uint64_t *dev, uint64_t *ino);

/* The file's path; where the next buffer goes in it (the bytes submitted
 * so far); the bytes fully written; the buffers in flight; the highest
 * ring sequence whose buffer and all before it are written; whether the
 * sticky error came from fsync. */
const char *cw_path(const struct cwriter *w);
uint64_t cw_offset(const struct cwriter *w);
uint64_t cw_written(const struct cwriter *w);
unsigned cw_in_flight(const struct cwriter *w);
uint64_t cw_done_seq(const struct cwriter *w);
bool cw_fsync_failed(const struct cwriter *w);

#endif
