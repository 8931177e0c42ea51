/* SPDX-License-Identifier: MIT */
/*
 * capture_dec.h - what the decoder's files share (capture_walk.c,
 * capture_dec.c, capture_dec_records.c, capture_file.c): the error context
 * of the frame being decoded, and the steps of decoding one.
 */
#ifndef SHMTRACE_CAPTURE_DEC_H
#define SHMTRACE_CAPTURE_DEC_H

#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>

#include "capture.h"

/* The frame being decoded, for its error messages. */
struct shmt_cap_ctx {
	uint64_t off;		/* file offset of the frame */
	char *err;
	size_t errlen;
};

/* Writes "frame at offset N: " and the message into c->err; returns rc. */
int shmt_cap_fail(const struct shmt_cap_ctx *c, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Finds the end of the msgpack object at p. Returns 1 with *flen set,
 * 0 if more bytes are needed (and the frame could still fit in
 * SHMT_CAP_MAX_FRAME), or -EBADMSG.
 */
int shmt_cap_walk(const uint8_t *p, size_t len, size_t *flen, const struct shmt_cap_ctx *c);

/* An unsigned field of at most max, or -EBADMSG naming it as what. */
int shmt_cap_get_uint(const msgpack_object *o, uint64_t max, uint64_t *v,
		      const char *what, const struct shmt_cap_ctx *c);

/* Reads field o into dst, returning from the calling decoder on error;
 * the caller's context is c. */
#define SHMT_CAP_GET(o, max, dst, what) do {				\
	uint64_t v_ = 0;						\
	int rc_ = shmt_cap_get_uint(o, max, &v_, what, c);		\
	if (rc_)							\
		return rc_;						\
	(dst) = v_;							\
} while (0)

/* The fields v[0..n) of a RECORDS (version 1) or PACKED (version 2) frame
 * into f->records. Return 0 or -errno. */
int shmt_cap_dec_records(const msgpack_object *v, size_t n, struct shmt_cap_frame *f,
			 msgpack_zone *z, const struct shmt_cap_ctx *c);
int shmt_cap_dec_packed(const msgpack_object *v, size_t n, struct shmt_cap_frame *f,
			msgpack_zone *z, const struct shmt_cap_ctx *c);

/* Decodes the frame at buf, at file offset off: returns the frame's length,
 * 0 if buf holds only its beginning, or -errno (shmt_cap_decode()). */
long shmt_cap_decode_at(const uint8_t *buf, size_t len, uint64_t off,
			struct shmt_cap_frame *f, msgpack_zone *z, char *err, size_t errlen);

#endif /* SHMTRACE_CAPTURE_DEC_H */
