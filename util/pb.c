/* SPDX-License-Identifier: MIT */
/*
 * pb.c - the protocol buffers wire format into an obuf (pb.h).
 */
#include <errno.h>
#include <string.h>

#include "pb.h"
#include "utf8.h"

void pb_fixed64(struct obuf *b, uint32_t field, uint64_t v)
{
	char le[8];

	for (int i = 0; i < 8; i++)
		le[i] = (char)(v >> (8 * i));
	pb_key(b, field, PB_I64);
	ob_raw(b, le, sizeof(le));
}

void pb_bytes(struct obuf *b, uint32_t field, const void *s, size_t n)
{
	pb_key(b, field, PB_LEN);
	pb_varint(b, n);
	ob_raw(b, s, n);
}

/* The length of s[0..n) once each invalid subpart is one U+FFFD; n when
 * it is all valid (nearly always: then it is copied as it is). */
static size_t repaired_len(const unsigned char *s, size_t n)
{
	size_t len = 0;

	for (size_t i = 0; i < n;) {
		int32_t cp = 0;
		size_t k = s[i] < 0x80 ? 1 : utf8_next(s + i, n - i, &cp);

		len += cp < 0 ? sizeof(UTF8_REPLACEMENT) - 1 : k;
		i += k;
	}
	return len;
}

void pb_string(struct obuf *b, uint32_t field, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len = repaired_len(u, n);

	if (len == n) {
		pb_bytes(b, field, s, n);
		return;
	}
	pb_key(b, field, PB_LEN);
	pb_varint(b, len);
	for (size_t i = 0; i < n;) {
		int32_t cp = 0;
		size_t k = u[i] < 0x80 ? 1 : utf8_next(u + i, n - i, &cp);

		if (cp < 0)
			ob_raw(b, UTF8_REPLACEMENT, sizeof(UTF8_REPLACEMENT) - 1);
		else
			ob_raw(b, s + i, k);
		i += k;
	}
}

void pb_end_long(struct obuf *b, size_t mark)
{
	size_t len, n;

	if (b->oom || mark >= b->len)
		return;
	len = b->len - mark - 1;
	n = pb_varint_len(len);
	if (n > 1) {
		if (!ob_reserve(b, n - 1))
			return;
		memmove(b->p + mark + n, b->p + mark + 1, len);
		b->len += n - 1;
	}
	pb_put_varint(b->p + mark, len);
}

int pb_get_varint(const char **p, size_t *n, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		unsigned char c;

		if (!*n)
			return -EBADMSG;
		c = (unsigned char)*(*p)++;
		(*n)--;
		*v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return 1;
	}
	return -EBADMSG;
}

int pb_next(const char **p, size_t *n, uint32_t *field, unsigned *wire, uint64_t *v,
	    const char **data, size_t *len)
{
	uint64_t key;
	size_t k;

	if (!*n)
		return 0;
	if (pb_get_varint(p, n, &key) < 0)
		return -EBADMSG;
	*field = (uint32_t)(key >> 3);
	*wire = (unsigned)(key & 7);
	switch (*wire) {
	case PB_VARINT:
		return pb_get_varint(p, n, v);
	case PB_I64:
	case 5:		/* fixed32 */
		k = *wire == PB_I64 ? 8 : 4;
		if (*n < k)
			return -EBADMSG;
		*v = 0;
		for (size_t i = 0; i < k; i++)
			*v |= (uint64_t)(unsigned char)(*p)[i] << (8 * i);
		*p += k;
		*n -= k;
		return 1;
	case PB_LEN:
		if (pb_get_varint(p, n, v) < 0 || *v > *n)
			return -EBADMSG;
		*data = *p;
		*len = (size_t)*v;
		*p += *len;
		*n -= *len;
		return 1;
	default:
		return -EBADMSG;
	}
}
