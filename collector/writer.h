/* SPDX-License-Identifier: MIT */
/*
 * writer.h - the collector's file writer: several buffers in flight through
 * io_uring (or written by the calling thread, the pwrite engine), every
 * completion checked, short writes resubmitted, completions reported in
 * submission order so that the ring's tail only ever advances over bytes
 * the kernel has accepted.
 */
#ifndef SHMTRACE_COLLECTOR_WRITER_H
#define SHMTRACE_COLLECTOR_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>

#define CW_DEPTH 8			/* buffers: CW_DEPTH - 1 in flight, one filling */
#define CW_BUF_LIMIT (1u << 20)		/* a buffer is submitted past this */

struct cwriter;

/* How buffers reach the file. io_uring hands a buffered write the file
 * cannot take without blocking (tmpfs and ext4 on Linux 6.x take none) to
 * a kernel worker thread, a third runnable task beside the collector and
 * a producer, which is what preempts producers; pwrite(2) copies in the
 * calling thread, and stops it while a disk is slow. */
enum cw_engine {
	CW_ENGINE_AUTO,		/* PWRITE on a memory filesystem, else IO_URING */
	CW_ENGINE_PWRITE,
	CW_ENGINE_IO_URING,
};

/* The engine --write-engine names (auto, pwrite, io_uring): 0, or
 * -EINVAL for a name that is none. */
int cw_engine_parse(const char *name, enum cw_engine *e);

/* A writer with no file open yet, or NULL when out of memory. */
struct cwriter *cw_new(void);

/* Opens (creating with mode, or truncating) path; engine AUTO is resolved
 * here, for this file, and an io_uring ring set up only for IO_URING.
 * Returns 0, or -errno with a one-line reason in err: path is never
 * followed when it is a symbolic link, nor written when it is not a
 * regular file (outfile.h). */
int cw_open(struct cwriter *w, const char *path, enum cw_engine engine, unsigned mode, char *err,
	    size_t errlen);

/* The engine writing the open file: PWRITE or IO_URING (AUTO before
 * cw_open() succeeded). */
enum cw_engine cw_engine(const struct cwriter *w);

/* Returns the buffer being filled (the newest request, not yet submitted). */
msgpack_sbuffer *cw_buffer(struct cwriter *w);

/* Submits the buffer being filled; end_seq is the ring sequence that is
 * safe to release once it is written (0: none). PWRITE writes it whole
 * now, and its write error is returned here; IO_URING queues it, and
 * waits for a free slot when all are in flight (CW_DEPTH - 1: one is
 * always left to fill). Returns 0 or the sticky -errno. */
int cw_submit(struct cwriter *w, uint64_t end_seq);

/* Handles completions: waits for at least one when wait is true and some are
 * in flight; then retires the buffers written whole, in order, even after
 * an error. Returns 0 or the sticky -errno (ENOSPC, EFBIG, EIO...). */
int cw_reap(struct cwriter *w, bool wait);

/* Waits until nothing is in flight. */
int cw_drain(struct cwriter *w);

/* fsync (through the ring with IO_URING); an error is final (a retried
 * fsync can lie). */
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
 * so far); the bytes fully written; the buffers in flight (with PWRITE,
 * written and not yet retired by cw_reap()); the highest
 * ring sequence whose buffer and all before it are written; whether the
 * sticky error came from fsync. */
const char *cw_path(const struct cwriter *w);
uint64_t cw_offset(const struct cwriter *w);
uint64_t cw_written(const struct cwriter *w);
unsigned cw_in_flight(const struct cwriter *w);
uint64_t cw_done_seq(const struct cwriter *w);
bool cw_fsync_failed(const struct cwriter *w);

#endif
