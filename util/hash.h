/* SPDX-License-Identifier: MIT */
/*
 * hash.h - the hashes: of text, FNV-1a 32 (short strings: names,
 * categories, no need for more), and two 64-bit mixers of integers. All
 * inline, so that libshm/ring's string table, which every producer process
 * shares, needs no util object to link (libshmtrace is the ring and lib
 * layers alone). What they give is fixed: the ring's string table is laid
 * out by fnv1a32(), exported ids and layouts come from the mixers.
 */
#ifndef SHMTRACE_HASH_H
#define SHMTRACE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a of s[0..len). The ring's string table is laid out by it: its
 * values are part of the shared-memory format and never change. */
static inline uint32_t fnv1a32(const void *s, size_t len)
{
	const unsigned char *p = s;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* MurmurHash3's 64-bit finaliser: every input bit moves every output bit.
 * (util/u64map.c keeps its own shorter one: the order it walks a map in,
 * and so the order of what is written from one, follows from it.) */
static inline uint64_t hash_fmix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* splitmix64's step and finaliser: x + the golden ratio, then mixed. */
static inline uint64_t hash_splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

#endif
