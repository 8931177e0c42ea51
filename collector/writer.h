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
#include <stdint.h>
#include <liburing.h>
#include <msgpack.h>

#define CW_DEPTH 8			/* buffers in flight */
#define CW_BUF_LIMIT (1u << 20)		/* a buffer is submitted past this */

struct cw_req {
	msgpack_sbuffer buf;
	uint64_t off;			/* file offset of buf.data[0] */
	size_t done;			/* bytes the kernel accepted */
	uint64_t end_seq;		/* ring sequence covered once written */
	bool busy;			/* submitted, not yet fully written */
	bool complete;
};

struct cwriter {
	struct io_uring ring;
	int fd;
	char path[4200];
	uint64_t off;			/* where the next buffer goes */
	uint64_t bytes;			/* bytes fully written */
	struct cw_req req[CW_DEPTH];
	unsigned first, count;		/* FIFO of requests in submission order */
	uint64_t done_seq;		/* highest end_seq with all before it written */
	int error;			/* first -errno seen; sticky */
	bool fsync_failed;		/* that error came from fsync */
};

/* Opens (creating or truncating) path and sets up the ring. Returns 0 or -errno. */
int cw_open(struct cwriter *w, const char *path);

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

void cw_close(struct cwriter *w);

#endif
