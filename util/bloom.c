/* SPDX-License-Identifier: MIT */
/*
 * bloom.c - the blocked Bloom filter (bloom.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "bloom.h"
#include "hash.h"

#define GROUP_LINES	64u	/* the lines one hint's keys spread over: a page */
#define GROUP_SHIFT	6	/* the key bits that choose one of them */
#define BITS		6	/* bits per key, of its line's 512 */
#define BIT(k, i)	((unsigned)((k) >> (GROUP_SHIFT + 9 * (i))) & 511u)

int bloom_init(struct bloom *b, size_t lines)
{
	b->lines = lines;
	b->bits = calloc(lines * 8, sizeof(*b->bits));
	return b->bits ? 0 : -ENOMEM;
}

void bloom_free(struct bloom *b)
{
	free(b->bits);
	b->bits = NULL;
	b->lines = 0;
}

/* The line of key near hint: key bits 0..5 choose it in the hint's group
 * (bits 6.. choose the bits). */
static uint64_t *line_of(const struct bloom *b, uint64_t hint, uint64_t key)
{
	size_t line = (size_t)((hash_fmix64(hint) * GROUP_LINES + (key & (GROUP_LINES - 1))) &
			       (b->lines - 1));

	return &b->bits[line * 8];
}

bool bloom_test(const struct bloom *b, uint64_t hint, uint64_t key)
{
	const uint64_t *l = line_of(b, hint, key);

	for (int i = 0; i < BITS; i++)
		if (!(l[BIT(key, i) / 64] & 1ull << (BIT(key, i) % 64)))
			return false;
	return true;
}

bool bloom_add(struct bloom *b, uint64_t hint, uint64_t key)
{
	uint64_t *l = line_of(b, hint, key);
	bool maybe = true;

	for (int i = 0; i < BITS; i++) {
		uint64_t m = 1ull << (BIT(key, i) % 64);

		maybe &= (l[BIT(key, i) / 64] & m) != 0;
		l[BIT(key, i) / 64] |= m;
	}
	return maybe;
}
