/* SPDX-License-Identifier: MIT */
/*
 * gz.c - gzip into an obuf (gz.h), over zlib's deflate with a gzip
 * wrapper (window bits 15 + 16).
 */
#include <errno.h>
#include <stdlib.h>
#include <zlib.h>

#include "gz.h"

void gz_init(struct gz *g, int level)
{
	g->z = NULL;
	g->level = level;
}

void gz_free(struct gz *g)
{
	if (g->z) {
		deflateEnd(g->z);
		free(g->z);
	}
	g->z = NULL;
}

/* The stream, made once and reset for each body. */
static z_stream *stream_of(struct gz *g)
{
	z_stream *z = g->z;

	if (z)
		return deflateReset(z) == Z_OK ? z : NULL;
	z = calloc(1, sizeof(*z));
	if (!z)
		return NULL;
	/* 15 + 16: a gzip header and trailer around the deflate data; 8: zlib's
	 * default memory level */
	if (deflateInit2(z, g->level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		free(z);
		return NULL;
	}
	g->z = z;
	return z;
}

int gz_compress(struct gz *g, const void *in, size_t n, struct obuf *out)
{
	z_stream *z = stream_of(g);
	size_t bound;
	int ret;

	out->len = 0;
	if (!z)
		return -ENOMEM;
	/* deflateBound() is enough for one call with Z_FINISH */
	bound = deflateBound(z, (uLong)n);
	if (!ob_reserve(out, bound))
		return -ENOMEM;
	z->next_in = (Bytef *)(uintptr_t)in;
	z->avail_in = (uInt)n;
	z->next_out = (Bytef *)out->p;
	z->avail_out = (uInt)bound;
	ret = deflate(z, Z_FINISH);
	if (ret != Z_STREAM_END)
		return -ENOMEM;
	out->len = bound - z->avail_out;
	return 0;
}

int gz_decompress(const void *in, size_t n, struct obuf *out, size_t max)
{
	z_stream z = { 0 };
	int ret;

	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)(uintptr_t)in;
	z.avail_in = (uInt)n;
	do {
		if (!ob_reserve(out, 64u << 10)) {
			ret = Z_MEM_ERROR;
			break;
		}
		z.next_out = (Bytef *)out->p + out->len;
		z.avail_out = (uInt)(out->cap - out->len);
		ret = inflate(&z, Z_NO_FLUSH);
		out->len = out->cap - z.avail_out;
		if (out->len > max) {
			inflateEnd(&z);
			return -EFBIG;
		}
	} while (ret == Z_OK);
	inflateEnd(&z);
	if (ret == Z_STREAM_END)
		return 0;
	return ret == Z_MEM_ERROR ? -ENOMEM : -EBADMSG;
}
