/* SPDX-License-Identifier: MIT */
/*
 * writer.c - writes of capture buffers at explicit offsets, through
 * io_uring or by the calling thread.
 *
 * Writes are independent (not linked: one short write would cancel the rest
 * of a chain with -ECANCELED), each at its own offset, so they may complete
 * in any order; we release ring records only over the longest prefix of
 * fully written buffers. A short write is resubmitted for its remainder.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <liburing.h>

#include "outfile.h"
#include "writer.h"

struct cw_req {
	msgpack_sbuffer buf;
	uint64_t off;			/* file offset of buf.data[0] */
	size_t done;			/* bytes the kernel accepted */
	uint64_t end_seq;		/* ring sequence covered once written */
	bool busy;			/* a write of it is the kernel's: its completion not yet seen */
	bool complete;
};

struct cwriter {
	struct io_uring ring;
	int fd;
	enum cw_engine engine;		/* PWRITE or IO_URING */
	bool ring_up;			/* the io_uring ring is set up (IO_URING) */
	char path[4200];
	uint64_t off;			/* where the next buffer goes */
	uint64_t bytes;			/* bytes fully written */
	struct cw_req req[CW_DEPTH];
	unsigned first, count;		/* FIFO of requests in submission order */
	uint64_t done_seq;		/* highest end_seq with all before it written */
	int error;			/* first -errno seen; sticky */
	bool fsync_failed;		/* that error came from fsync */
};

struct cwriter *cw_new(void)
{
	struct cwriter *w = calloc(1, sizeof(*w));

	if (w)
		w->fd = -1;
	return w;
}

static const char *const engine_names[] = {
	[CW_ENGINE_AUTO] = "auto",
	[CW_ENGINE_PWRITE] = "pwrite",
	[CW_ENGINE_IO_URING] = "io_uring",
};

int cw_engine_parse(const char *name, enum cw_engine *e)
{
	for (unsigned i = 0; i < sizeof(engine_names) / sizeof(engine_names[0]); i++)
		if (strcmp(name, engine_names[i]) == 0) {
			*e = (enum cw_engine)i;
			return 0;
		}
	return -EINVAL;
}

/* A file in memory has no disk to wait for (a write waits at most for
 * memory), so the calling thread's copy is short; io_uring would hand
 * every write to its worker there (no non-blocking buffered writes), and
 * the worker is what preempts a producer (docs/DESIGN.md, "Collector:
 * ordering and durability", which thread writes). */
static enum cw_engine resolve_engine(int fd, enum cw_engine e)
{
	struct statfs sf;

	if (e != CW_ENGINE_AUTO)
		return e;
	if (fstatfs(fd, &sf) == 0 && (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC))
		return CW_ENGINE_PWRITE;
	return CW_ENGINE_IO_URING;
}

int cw_open(struct cwriter *w, const char *path, enum cw_engine engine, unsigned mode, char *err,
	    size_t errlen)
{
	struct outfile of;
	int ret;

	memset(w, 0, sizeof(*w));
	snprintf(w->path, sizeof(w->path), "%s", path);
	/* never through a link, nor into a FIFO, planted at the path */
	ret = outfile_open(&of, path, OUTFILE_IN_PLACE, mode, err, errlen);
	w->fd = of.fd;
	if (ret < 0)
		return ret;
	w->engine = resolve_engine(w->fd, engine);
	/* pwrite needs no ring: it works where io_uring is disabled */
	ret = w->engine == CW_ENGINE_IO_URING ? io_uring_queue_init(CW_DEPTH * 2, &w->ring, 0) : 0;
	if (ret < 0 && engine == CW_ENGINE_AUTO) {
		/* the default must run where io_uring is denied (Docker's
		 * seccomp profile, kernel.io_uring_disabled): the same bytes,
		 * written from the collector's thread; said once a run */
		static bool said;

		if (!said)
			fprintf(stderr, "shmtrace-collector: io_uring: %s; writing with pwrite\n",
				strerror(-ret));
		said = true;
		w->engine = CW_ENGINE_PWRITE;
		ret = 0;
	}
	if (ret < 0) {
		snprintf(err, errlen, "cannot write '%.400s': io_uring: %s (--write-engine=pwrite "
			 "does without it)", path, strerror(-ret));
		close(w->fd);
		w->fd = -1;
		w->engine = CW_ENGINE_AUTO;
		return ret;
	}
	w->ring_up = w->engine == CW_ENGINE_IO_URING;
	for (int i = 0; i < CW_DEPTH; i++)
		msgpack_sbuffer_init(&w->req[i].buf);
	/* slot 0 is the first buffer being filled */
	w->count = 0;
	w->first = 0;
	return 0;
}

static struct cw_req *filling(struct cwriter *w)
{
	return &w->req[(w->first + w->count) % CW_DEPTH];
}

msgpack_sbuffer *cw_buffer(struct cwriter *w)
{
	return &filling(w)->buf;
}

/* The pwrite engine: the whole buffer now, a short write continued and
 * an interrupted one made again, as the ring's completions would be. */
static int write_now(struct cwriter *w, struct cw_req *r)
{
	while (r->done < r->buf.size) {
		ssize_t n = pwrite(w->fd, r->buf.data + r->done, r->buf.size - r->done,
				   (off_t)(r->off + r->done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;	/* no progress and no error: do not spin */
		r->done += (size_t)n;
	}
	r->complete = true;
	return 0;
}

static int queue_write(struct cwriter *w, struct cw_req *r)
{
	struct io_uring_sqe *sqe;
	int ret;

	if (w->engine == CW_ENGINE_PWRITE)
		return write_now(w, r);
	sqe = io_uring_get_sqe(&w->ring);
	if (!sqe) {
		/* the SQ holds twice the buffers we own: only a bug gets here */
		return -EBUSY;
	}
	io_uring_prep_write(sqe, w->fd, r->buf.data + r->done, (unsigned)(r->buf.size - r->done),
			    r->off + r->done);
	io_uring_sqe_set_data(sqe, r);
	r->busy = true;
	ret = io_uring_submit(&w->ring);
	return ret < 0 ? ret : 0;
}

/* The requests with a write in the kernel's hands. */
static unsigned writes_pending(const struct cwriter *w)
{
	unsigned n = 0;

	for (unsigned i = 0; i < w->count; i++)
		n += w->req[(w->first + i) % CW_DEPTH].busy;
	return n;
}

/* Pops fully written requests from the front of the FIFO. */
static void retire(struct cwriter *w)
{
	while (w->count) {
		struct cw_req *r = &w->req[w->first];

		if (!r->complete)
			break;
		if (r->end_seq > w->done_seq)
			w->done_seq = r->end_seq;
		w->bytes += r->buf.size;
		msgpack_sbuffer_clear(&r->buf);
		/* give back memory a burst made the buffer grab */
		if (r->buf.alloc > 2 * CW_BUF_LIMIT) {
			msgpack_sbuffer_destroy(&r->buf);
			msgpack_sbuffer_init(&r->buf);
		}
		r->busy = r->complete = false;
		r->done = 0;
		w->first = (w->first + 1) % CW_DEPTH;
		w->count--;
	}
}

static int handle_cqe(struct cwriter *w, struct io_uring_cqe *cqe)
{
	struct cw_req *r = io_uring_cqe_get_data(cqe);
	int res = cqe->res;

	io_uring_cqe_seen(&w->ring, cqe);
	if (!r)
		return 0;
	r->busy = false;	/* until queued again below */
	if (res < 0) {
		if (res == -EINTR || res == -EAGAIN)
			return queue_write(w, r);
		return res;
	}
	if (res == 0)
		return -EIO;	/* no progress and no error: do not spin */
	r->done += (size_t)res;
	if (r->done < r->buf.size)
		return queue_write(w, r);	/* short write: the rest */
	r->complete = true;
	return 0;
}

int cw_reap(struct cwriter *w, bool wait)
{
	struct io_uring_cqe *cqe;
	int ret;

	/* (pwrite: a buffer submitted is written; there is nothing to reap) */
	while (!w->error && w->ring_up) {
		if (wait && writes_pending(w)) {
			ret = io_uring_wait_cqe(&w->ring, &cqe);
			if (ret == -EINTR)
				continue;
			wait = false;
		} else {
			ret = io_uring_peek_cqe(&w->ring, &cqe);
			if (ret == -EAGAIN)
				break;
		}
		if (ret < 0) {
			w->error = ret;
			break;
		}
		ret = handle_cqe(w, cqe);
		if (ret < 0)
			w->error = ret;
	}
	/* buffers written whole count after an error too: the summary goes
	 * as far as the file does (the drain releases no tail after one) */
	retire(w);
	return w->error;
}

int cw_submit(struct cwriter *w, uint64_t end_seq)
{
	struct cw_req *r = filling(w);
	int ret;

	if (w->error)
		return w->error;
	if (r->buf.size == 0) {
		/* nothing to write: the sequence is safe as soon as all before is */
		if (end_seq > w->done_seq && w->count == 0)
			w->done_seq = end_seq;
		else if (w->count)
			w->req[(w->first + w->count - 1) % CW_DEPTH].end_seq =
				end_seq > w->req[(w->first + w->count - 1) % CW_DEPTH].end_seq ?
				end_seq : w->req[(w->first + w->count - 1) % CW_DEPTH].end_seq;
		return 0;
	}
	r->off = w->off;
	r->end_seq = end_seq;
	r->done = 0;
	r->complete = false;
	w->off += r->buf.size;
	w->count++;
	ret = queue_write(w, r);
	if (ret < 0) {
		w->error = ret;
		retire(w);
		return ret;
	}
	/* keep one slot free to fill */
	while (w->count >= CW_DEPTH - 1) {
		ret = cw_reap(w, true);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int cw_drain(struct cwriter *w)
{
	while (w->count) {
		int ret = cw_reap(w, true);

		if (ret < 0)
			return ret;
	}
	return w->error;
}

int cw_fsync(struct cwriter *w)
{
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int ret = cw_drain(w);

	if (ret < 0)
		return ret;
	if (!w->ring_up) {
		ret = fsync(w->fd) < 0 ? -errno : 0;
	} else {
		sqe = io_uring_get_sqe(&w->ring);
		if (!sqe)
			return -EBUSY;
		io_uring_prep_fsync(sqe, w->fd, 0);
		io_uring_sqe_set_data(sqe, NULL);
		ret = io_uring_submit(&w->ring);
		if (ret < 0)
			return ret;
		do {
			ret = io_uring_wait_cqe(&w->ring, &cqe);
		} while (ret == -EINTR);
		if (ret < 0)
			return ret;
		ret = cqe->res;
		io_uring_cqe_seen(&w->ring, cqe);
	}
	if (ret < 0) {
		w->error = ret;	/* final: never retried into a false success */
		w->fsync_failed = true;
	}
	return ret < 0 ? ret : 0;
}

/* Waits for the writes still in the kernel's hands (after an error, the
 * others' are not waited for by cw_drain()), so that no worker copies
 * from a buffer freed under it; their results no longer matter. A second
 * at most for each: a stuck device does not stop the collector's exit. */
static void abandon_pending(struct cwriter *w)
{
	struct __kernel_timespec second = { .tv_sec = 1 };
	struct io_uring_cqe *cqe;

	while (writes_pending(w)) {
		struct cw_req *r;
		int ret = io_uring_wait_cqe_timeout(&w->ring, &cqe, &second);

		if (ret == -EINTR)
			continue;
		if (ret < 0)
			return;
		r = io_uring_cqe_get_data(cqe);
		io_uring_cqe_seen(&w->ring, cqe);
		if (r)
			r->busy = false;
	}
}

void cw_close(struct cwriter *w)
{
	if (w->fd >= 0) {
		if (w->ring_up) {
			abandon_pending(w);
			io_uring_queue_exit(&w->ring);
		}
		close(w->fd);
	}
	w->ring_up = false;
	/* emptied again, so that a second close frees nothing twice; a
	 * write still in flight after abandon_pending() gave up on it (a
	 * stuck device) keeps its buffer: the kernel ends the ring's
	 * requests after the ring is gone, and a buffer freed and reused
	 * under such a write would put other bytes in the file. Left to
	 * the exit, which a collector whose writes are stuck is near. */
	for (int i = 0; i < CW_DEPTH; i++) {
		if (w->req[i].busy)
			(void)msgpack_sbuffer_release(&w->req[i].buf);
		msgpack_sbuffer_destroy(&w->req[i].buf);
		msgpack_sbuffer_init(&w->req[i].buf);
		w->req[i].busy = false;
	}
	w->fd = -1;
}

void cw_free(struct cwriter *w)
{
	if (!w)
		return;
	cw_close(w);
	free(w);
}

int cw_check_file(const struct cwriter *w)
{
	struct stat fst, pst;

	if (w->fd < 0 || fstat(w->fd, &fst) < 0)
		return 0;	/* nothing open, or nothing to tell */
	if (fst.st_nlink == 0)
		return -ESTALE;
	/* lstat: a link put in its place is another file too */
	if (lstat(w->path, &pst) < 0)
		return errno == ENOENT ? -ESTALE : 0;
	return pst.st_ino != fst.st_ino || pst.st_dev != fst.st_dev ? -ESTALE : 0;
}

int cw_identity(const struct cwriter *w, uint64_t *dev, uint64_t *ino)
{
	struct stat st;

	if (w->fd < 0)
		return -EBADF;
	if (fstat(w->fd, &st) < 0)
		return -errno;
	*dev = (uint64_t)st.st_dev;
	*ino = (uint64_t)st.st_ino;
	return 0;
}

enum cw_engine cw_engine(const struct cwriter *w)
{
	return w->engine;
}

const char *cw_path(const struct cwriter *w)
{
	return w->path;
}

uint64_t cw_offset(const struct cwriter *w)
{
	return w->off;
}

uint64_t cw_written(const struct cwriter *w)
{
	return w->bytes;
}

unsigned cw_in_flight(const struct cwriter *w)
{
	return w->count;
}

uint64_t cw_done_seq(const struct cwriter *w)
{
	return w->done_seq;
}

bool cw_fsync_failed(const struct cwriter *w)
{
	return w->fsync_failed;
}
