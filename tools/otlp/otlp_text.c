/* SPDX-License-Identifier: MIT */
/*
 * otlp_text.c - the text primitives of the OTLP export beyond util/'s
 * buffer (obuf.h) and decimals (dec.h): ids and times formatted from
 * tables or a few bit operations (a span has three ids and two 19-digit
 * times).
 */
#include <endian.h>
#include <string.h>

#include "dec.h"
#include "otlp_int.h"

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
		return dec_u64(p, lo);
	if (hi != t->hi || !t->len) {
		t->hi = hi;
		t->len = (uint8_t)(dec_u64(t->text, hi) - t->text);
	}
	memcpy(p, t->text, sizeof(t->text));
	p += t->len;
	for (int i = 3; i >= 0; i--, lo /= 100)
		memcpy(p + 2 * i, dec_pairs + 2 * (lo % 100), 2);
	return p + 8;
}
