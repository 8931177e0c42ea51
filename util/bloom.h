/* SPDX-License-Identifier: MIT */
/*
 * bloom.h - a blocked Bloom filter of 64-bit keys: all bits of a key in one
 * 64-byte line, so that a test costs one cache miss at most, and keys the
 * caller says are near each other (a hint) in a few neighbouring lines, so
 * that a stream of such keys costs hardly any. "No" is certain; "maybe"
 * is wrong at a rate that grows with the keys per line.
 */
#ifndef SHMTRACE_BLOOM_H
#define SHMTRACE_BLOOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bloom {
	uint64_t *bits;
	size_t lines;		/* a power of two */
};

/* A filter of lines 64-byte lines (a power of two); calloc'd, so pages
 * stay untouched until used. Returns 0 or -ENOMEM. */
int bloom_init(struct bloom *b, size_t lines);
void bloom_free(struct bloom *b);

/* Adds key (well mixed: its bits choose the bits set) near hint; returns
 * whether it may have been added before (false: certainly not). */
bool bloom_add(struct bloom *b, uint64_t hint, uint64_t key);

/* Whether key may have been added near hint (false: certainly not). */
bool bloom_test(const struct bloom *b, uint64_t hint, uint64_t key);

#endif
