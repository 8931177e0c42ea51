/* SPDX-License-Identifier: MIT */
/*
 * pb.h - the protocol buffers wire format written into an obuf: varints,
 * fields by number and wire type, and length-delimited fields (strings,
 * nested messages) whose length is put in front when they end. Knows no
 * message: the writer of a format names its own fields.
 */
#ifndef SHMTRACE_PB_H
#define SHMTRACE_PB_H

#include <stddef.h>
#include <stdint.h>

#include "obuf.h"

/* wire types */
#define PB_VARINT	0u
#define PB_I64		1u
#define PB_LEN		2u

/* The most bytes a varint takes. */
#define PB_VARINT_MAX	10u

/* The bytes v takes as a varint (1..10). */
static inline size_t pb_varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* v as a varint, at p (room for PB_VARINT_MAX); returns the end. */
static inline char *pb_put_varint(char *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (char)(v | 0x80);
		v >>= 7;
	}
	*p++ = (char)v;
	return p;
}

/* Appends v as a varint. Inline: most of a message is small varints, and
 * the room is there but once a buffer's growth. */
static inline void pb_varint(struct obuf *b, uint64_t v)
{
	if (b->cap - b->len < PB_VARINT_MAX && !ob_reserve(b, PB_VARINT_MAX))
		return;
	b->len = (size_t)(pb_put_varint(b->p + b->len, v) - b->p);
}

/* A field's key: its number and wire type. */
static inline void pb_key(struct obuf *b, uint32_t field, unsigned wire)
{
	pb_varint(b, (uint64_t)field << 3 | wire);
}

/* A varint field: uint32/64, enum, bool, and int32/64 as their two's
 * complement (a negative value takes ten bytes, as the format says). */
static inline void pb_uint(struct obuf *b, uint32_t field, uint64_t v)
{
	pb_key(b, field, PB_VARINT);
	pb_varint(b, v);
}

/* A fixed64 field, little-endian. */
void pb_fixed64(struct obuf *b, uint32_t field, uint64_t v);

/* A bytes field of s[0..n). */
void pb_bytes(struct obuf *b, uint32_t field, const void *s, size_t n);

/* A string field of s[0..n), invalid UTF-8 replaced by U+FFFD as the JSON
 * writer replaces it (util/utf8.h), so that both formats carry one text. */
void pb_string(struct obuf *b, uint32_t field, const char *s, size_t n);

/*
 * Opens a length-delimited field (a nested message): writes its key and
 * one byte for the length, and returns where that byte is. pb_end()
 * closes it; fields opened inside it must be closed first.
 */
static inline size_t pb_begin(struct obuf *b, uint32_t field)
{
	pb_key(b, field, PB_LEN);
	/* one byte, the length of most messages; pb_end() makes more room */
	if (b->cap - b->len < 1 && !ob_reserve(b, 1))
		return b->len;
	b->p[b->len++] = 0;
	return b->len - 1;
}

/* pb_end() of a field of 128 bytes or more (or after running out of memory). */
void pb_end_long(struct obuf *b, size_t mark);

/* Closes the field opened at mark: writes its length, moving what follows
 * when the length takes more than one byte (128 bytes or more). */
static inline void pb_end(struct obuf *b, size_t mark)
{
	if (!b->oom && mark < b->len && b->len - mark - 1 < 0x80)
		b->p[mark] = (char)(b->len - mark - 1);
	else
		pb_end_long(b, mark);
}

/* Reading: a varint at *p[0..*n), moving past it. Returns 1 with *v, or
 * -EBADMSG (cut, or longer than 10 bytes). */
int pb_get_varint(const char **p, size_t *n, uint64_t *v);

/*
 * Reading: the next field of a message p[0..*n), moving p and *n past
 * it: its number and wire type, a varint's or fixed64's value in *v, a
 * length-delimited field's bytes in *data and *len (a fixed32's value in
 * *v too). Returns 1, 0 at the end of the message, or -EBADMSG (cut, or a
 * wire type it does not know).
 */
int pb_next(const char **p, size_t *n, uint32_t *field, unsigned *wire, uint64_t *v,
	    const char **data, size_t *len);

#endif
