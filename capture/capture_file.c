/* SPDX-License-Identifier: MIT */
/*
 * capture_file.c - reads a capture file frame by frame through a bounded
 * buffer (shmt_cap_open/next/close), telling a clean END from a cut file
 * and keeping the first error for every later call; or follows one still
 * being written (shmt_cap_follow()), whose end is only where the writer
 * has got to.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "capture_dec.h"
#include "outfile.h"

#define READ_MIN	(256u << 10)	/* first size of the reader's buffer */

/* Where a reader is; every call after FAILED returns its sticky error. */
enum reader_state {
	READING,		/* frames before END */
	END_SEEN,		/* END returned; next: EOF is clean, a byte is damage */
	DONE,			/* the clean end was returned (0) */
	FAILED,			/* error holds the -errno, msg its message */
};

struct shmt_cap_reader {
	int fd;
	int eof;
	enum reader_state state;
	int error;		/* the sticky -errno once FAILED */
	uint8_t *buf;
	size_t cap;
	size_t start, end;	/* unconsumed bytes buf[start..end) */
	uint64_t base;		/* file offset of buf[0] */
	msgpack_zone *z;
	struct shmt_cap_header header;
	uint32_t mode;		/* the file's permission bits at open */
	char msg[256];		/* the sticky error */
};

static int seterr(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int seterr(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Reads more bytes, moving the unconsumed ones to the front and growing the
 * buffer (never past SHMT_CAP_MAX_FRAME) when it is full. */
static int fill(struct shmt_cap_reader *r, char *err, size_t errlen)
{
	ssize_t got;

	if (r->start) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->base += r->start;
		r->end -= r->start;
		r->start = 0;
	}
	if (r->end == r->cap) {
		size_t cap = r->cap * 2 > SHMT_CAP_MAX_FRAME ? SHMT_CAP_MAX_FRAME : r->cap * 2;
		uint8_t *nb;

		if (cap == r->cap)	/* shmt_cap_walk() refused it first */
			return seterr(err, errlen, -EBADMSG, "frame at offset %llu is too long",
				      (unsigned long long)r->base);
		nb = realloc(r->buf, cap);
		if (!nb)
			return seterr(err, errlen, -ENOMEM, "out of memory for a %zu-byte frame", cap);
		r->buf = nb;
		r->cap = cap;
	}
	do {
		got = read(r->fd, r->buf + r->end, r->cap - r->end);
	} while (got < 0 && errno == EINTR);
	if (got < 0)
		return seterr(err, errlen, -errno, "reading capture at offset %llu: %s",
			      (unsigned long long)(r->base + r->end), strerror(errno));
	if (!got)
		r->eof = 1;
	r->end += got;
	return 0;
}

/* Frames are at most SHMT_CAP_MAX_FRAME, so this loop ends: each fill()
 * either adds bytes, hits EOF, or fails on a full maximum-size buffer. */
static int next_frame(struct shmt_cap_reader *r, struct shmt_cap_frame *f,
		      char *err, size_t errlen)
{
	for (;;) {
		uint64_t off = r->base + r->start;
		long n;
		int rc;

		if (r->start < r->end) {
			msgpack_zone_clear(r->z);
			n = shmt_cap_decode_at(r->buf + r->start, r->end - r->start, off, f,
					       r->z, err, errlen);
			if (n < 0)
				return (int)n;
			if (n > 0) {
				r->start += n;
				return 1;
			}
		}
		if (r->eof) {
			if (r->start == r->end)
				return seterr(err, errlen, -EPIPE,
					      "capture ends at offset %llu without an END frame (cut)",
					      (unsigned long long)off);
			return seterr(err, errlen, -EPIPE,
				      "capture cut at offset %llu inside the frame at offset %llu",
				      (unsigned long long)(r->base + r->end),
				      (unsigned long long)off);
		}
		if ((rc = fill(r, err, errlen)))
			return rc;
	}
}

int shmt_cap_looks_like(const uint8_t *b, size_t len)
{
	static const uint8_t magic[] = { SHMT_CAP_HEADER, 0xa7, 'S', 'H', 'M', 'T', 'C', 'A', 'P' };
	size_t h;

	if (b[0] >= 0x90 && b[0] <= 0x9f)
		h = 1;
	else if (b[0] == 0xdc)
		h = 3;
	else if (b[0] == 0xdd)
		h = 5;
	else
		return 0;
	for (size_t i = 0; i < sizeof(magic) && h + i < len; i++)
		if (b[h + i] != magic[i])
			return 0;
	return 1;
}

int shmt_cap_open(const char *path, struct shmt_cap_reader **out, char *err, size_t errlen)
{
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f = { .type = 0 };
	struct stat st;
	int rc;

	*out = NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return seterr(err, errlen, -ENOMEM, "out of memory");
	r->fd = -1;
	r->cap = READ_MIN;
	r->buf = malloc(r->cap);
	r->z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	if (!r->buf || !r->z) {
		rc = seterr(err, errlen, -ENOMEM, "out of memory");
		goto fail;
	}
	/* O_NONBLOCK: the open() of a FIFO no one writes would wait for a
	 * writer; it is refused below instead (on a regular file the flag
	 * changes nothing) */
	r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (r->fd < 0 || fstat(r->fd, &st) < 0) {
		rc = seterr(err, errlen, -errno, "%s: %s", path, strerror(errno));
		goto fail;
	}
	/* a capture is a file: read again from its start by exports, which
	 * read their inputs twice, and by restarts; a pipe's bytes would be
	 * gone, a directory or a device holds none */
	if (!S_ISREG(st.st_mode)) {
		rc = seterr(err, errlen, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL,
			    "%s: is %s, not a capture file", path, file_kind_name(st.st_mode));
		goto fail;
	}
	r->mode = (uint32_t)st.st_mode & 07777;
	if ((rc = fill(r, err, errlen)))
		goto fail;
	if (r->end == 0) {
		rc = seterr(err, errlen, -EBADMSG, "%s: empty capture file", path);
		goto fail;
	}
	if (!shmt_cap_looks_like(r->buf, r->end)) {
		rc = seterr(err, errlen, -EPROTO, "%s: not a shmtrace capture", path);
		goto fail;
	}
	rc = next_frame(r, &f, err, errlen);
	if (rc == 1 && f.type != SHMT_CAP_HEADER)	/* cannot pass the magic check */
		rc = seterr(err, errlen, -EBADMSG, "no header frame");
	if (rc < 0) {
		char why[200] = "";

		if (err && errlen)
			snprintf(why, sizeof(why), "%s", err);
		seterr(err, errlen, rc, "%s: %s%s", path,
		       rc == -EBADMSG ? "damaged capture header: " : "", why);
		goto fail;
	}
	r->header = f.header;
	*out = r;
	return 0;
fail:
	shmt_cap_close(r);
	return rc;
}

int shmt_cap_next(struct shmt_cap_reader *r, struct shmt_cap_frame *f, char *err, size_t errlen)
{
	int rc;

	if (r->state == FAILED)
		return seterr(err, errlen, r->error, "%s", r->msg);
	if (r->state == DONE)
		return 0;
	if (r->state == END_SEEN) {
		/* after END: only EOF is clean */
		if (r->start == r->end && !r->eof && (rc = fill(r, err, errlen)))
			goto failed;
		if (r->start < r->end) {
			rc = seterr(err, errlen, -EBADMSG,
				    "bytes follow the END frame, at offset %llu",
				    (unsigned long long)(r->base + r->start));
			goto failed;
		}
		r->state = DONE;
		return 0;
	}
	rc = next_frame(r, f, err, errlen);
	if (rc == 1 && f->type == SHMT_CAP_HEADER)
		rc = seterr(err, errlen, -EBADMSG, "second HEADER frame at offset %llu",
			    (unsigned long long)f->offset);
	if (rc == 1) {
		if (f->type == SHMT_CAP_END)
			r->state = END_SEEN;
		return 1;
	}
failed:
	r->state = FAILED;
	r->error = rc;
	snprintf(r->msg, sizeof(r->msg), "%s", err && errlen ? err : "capture read failed");
	return rc;
}

/* Forgets the bytes read from the frame at r->base + r->start on, and
 * reads them again next time: they may have been a hole the writer had
 * not filled yet. */
static int unread(struct shmt_cap_reader *r)
{
	uint64_t off = r->base + r->start;

	if (lseek(r->fd, (off_t)off, SEEK_SET) < 0)
		return -errno;
	r->base = off;
	r->start = r->end = 0;
	r->eof = 0;
	return 0;
}

/* Whether the file reaches SHMT_CAP_FOLLOW_SLACK bytes past off: a frame
 * there that does not decode is damage, not a write still on its way. */
static bool written_past(const struct shmt_cap_reader *r, uint64_t off)
{
	struct stat st;

	return fstat(r->fd, &st) == 0 && (uint64_t)st.st_size >= off + SHMT_CAP_FOLLOW_SLACK;
}

int shmt_cap_follow(struct shmt_cap_reader *r, struct shmt_cap_frame *f, char *err, size_t errlen)
{
	uint64_t off;
	int rc;

	if (r->state != READING)
		return shmt_cap_next(r, f, err, errlen);
	off = r->base + r->start;
	rc = shmt_cap_next(r, f, err, errlen);
	if (rc != -EPIPE && (rc != -EBADMSG || written_past(r, off)))
		return rc;
	/* not written yet: from that frame again, next time */
	r->state = READING;
	if ((rc = unread(r)) < 0)
		return seterr(err, errlen, rc, "reading capture at offset %llu: %s",
			      (unsigned long long)off, strerror(-rc));
	return -EAGAIN;
}

uint64_t shmt_cap_offset(const struct shmt_cap_reader *r)
{
	return r->base + r->start;
}

uint32_t shmt_cap_mode(const struct shmt_cap_reader *r)
{
	return r->mode;
}

const struct shmt_cap_header *shmt_cap_header_of(const struct shmt_cap_reader *r)
{
	return &r->header;
}

void shmt_cap_close(struct shmt_cap_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	if (r->z)
		msgpack_zone_free(r->z);
	free(r->buf);
	free(r);
}
