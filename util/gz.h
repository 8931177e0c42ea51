/* SPDX-License-Identifier: MIT */
/*
 * gz.h - gzip (RFC 1952) of a buffer into an obuf, through zlib: what an
 * HTTP body sent with Content-Encoding: gzip is made of.
 */
#ifndef SHMTRACE_GZ_H
#define SHMTRACE_GZ_H

#include <stddef.h>

#include "obuf.h"

/* The compressor's state, kept between calls so that each body does not
 * set up zlib's tables again. */
struct gz {
	void *z;		/* z_stream, NULL until the first call */
	int level;
};

/* level: zlib's 1 (fastest) .. 9 (smallest). */
void gz_init(struct gz *g, int level);
void gz_free(struct gz *g);

/* Replaces out's contents with in[0..n) as one gzip member. Returns 0 or
 * -ENOMEM (out->oom, or zlib out of memory). */
int gz_compress(struct gz *g, const void *in, size_t n, struct obuf *out);

/* Decompresses a gzip member in[0..n) into out (appended), at most max
 * bytes of it: 0, -EBADMSG (not gzip, or cut), -EFBIG (more than max) or
 * -ENOMEM. For tests and answers; the stream never decompresses. */
int gz_decompress(const void *in, size_t n, struct obuf *out, size_t max);

#endif
