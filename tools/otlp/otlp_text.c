/* SPDX-License-Identifier: MIT */
/*
 * otlp_text.c - the text primitives of the OTLP export: a growing output
 * buffer, JSON strings, and integers, ids and times formatted from tables
 * or a few bit operations (a span has three ids and two 19-digit times).
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "json_writer.h"
#include "otlp_int.h"

static const char dig2[] =
	"0001020304050607080910111213141516171819"
	"2021222324252627282930313233343536373839"
	"4041424344454647484950515253545556575859"
	"6061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

char *otlp_dec(char *p, uint64_t v)
{
	char d[20], *q = d + sizeof(d);
	size_t n;

	while (v >= 100) {
		q -= 2;
		memcpy(q, dig2 + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10) {
		q -= 2;
		memcpy(q, dig2 + 2 * v, 2);
	} else {
		*--q = (char)('0' + v);
	}
	n = (size_t)(d + sizeof(d) - q);
	memcpy(p, q, n);
	return p + n;
}

/* The 8 hex digits of v at p, all at once: each nibble spread to a byte,
 * '0' or 'a' - 10 added by a carry trick, most significant first. */
static void put_hex32(char *p, uint32_t v)
{
	uint64_t x = v;

	x = (x | x << 16) & 0x0000ffff0000ffffull;
	x = (x | x << 8) & 0x00ff00ff00ff00ffull;
	x = (x | x << 4) & 0x0f0f0f0f0f0f0f0full;
	/* 0x01 in the bytes that are 10..15 */
	x += 0x3030303030303030ull + (((x + 0x0606060606060606ull) >> 4) &
				      0x0101010101010101ull) * ('a' - '0' - 10);
	/* the top byte holds the top nibble: first in memory, any byte order */
	x = htobe64(x);
	memcpy(p, &x, 8);
}

char *otlp_hex(char *p, uint64_t v)
{
	put_hex32(p, (uint32_t)(v >> 32));
	put_hex32(p + 8, (uint32_t)v);
	return p + 16;
}

char *otlp_time(struct time_text *t, char *p, uint64_t ns)
{
	uint64_t hi = ns / 100000000u;
	uint32_t lo = (uint32_t)(ns % 100000000u);

	if (!hi)
		return otlp_dec(p, lo);
	if (hi != t->hi || !t->len) {
		t->hi = hi;
		t->len = (uint8_t)(otlp_dec(t->text, hi) - t->text);
	}
	memcpy(p, t->text, sizeof(t->text));
	p += t->len;
	for (int i = 3; i >= 0; i--, lo /= 100)
		memcpy(p + 2 * i, dig2 + 2 * (lo % 100), 2);
	return p + 8;
}

/* ------------------------------------------------------------ buffers */

bool ob_reserve(struct obuf *b, size_t n)
{
	size_t cap;
	char *p;

	if (b->oom)
		return false;
	if (n <= b->cap - b->len)
		return true;
	cap = b->cap ? b->cap : 4096;
	while (cap - b->len < n)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void ob_free(struct obuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void ob_str_pre(struct obuf *b, const char *pre, const char *s, size_t n)
{
	size_t need, plen = strlen(pre);

	if (!ob_reserve(b, plen + n + 3))
		return;
	b->p[b->len++] = '"';
	memcpy(b->p + b->len, pre, plen);
	b->len += plen;
	need = json_escape(s, n, b->p + b->len, b->cap - b->len);
	if (need >= b->cap - b->len) {
		if (!ob_reserve(b, need + 2))
			return;
		json_escape(s, n, b->p + b->len, b->cap - b->len);
	}
	b->len += need;
	b->p[b->len++] = '"';
}

void ob_str(struct obuf *b, const char *s, size_t n)
{
	ob_str_pre(b, "", s, n);
}

/* in unsigned arithmetic: INT64_MIN has no positive int64 */
void ob_int(struct obuf *b, uint64_t v, bool neg)
{
	if (!ob_reserve(b, 21))
		return;
	if (neg)
		b->p[b->len++] = '-';
	b->len = (size_t)(otlp_dec(b->p + b->len, neg ? 0 - v : v) - b->p);
}
