// SPDX-License-Identifier: MIT
/*
 * u64map.c - linear probing, doubling at half full.
 */
#include <stdlib.h>

#include "u64map.h"

void u64map_init(struct u64map *m)
{
	m->keys = m->vals = NULL;
	m->used = NULL;
	m->cap = m->n = 0;
}

void u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	u64map_init(m);
}

static size_t hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (size_t)k;
}

static int grow(struct u64map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct u64map n = {
		.keys = calloc(cap, sizeof(uint64_t)), .vals = calloc(cap, sizeof(uint64_t)),
		.used = calloc(cap, 1), .cap = cap,
	};

	if (!n.keys || !n.vals || !n.used) {
		u64map_free(&n);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->used[i])
			continue;
		for (j = hash(m->keys[i]) & (cap - 1); n.used[j]; j = (j + 1) & (cap - 1))
			;
		n.used[j] = 1;
		n.keys[j] = m->keys[i];
		n.vals[j] = m->vals[i];
	}
	n.n = m->n;
	{
		struct u64map old = *m;

		*m = n;
		u64map_free(&old);
	}
	return 0;
}

uint64_t *u64map_find(const struct u64map *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	for (size_t j = hash(key) & (m->cap - 1); m->used[j]; j = (j + 1) & (m->cap - 1))
		if (m->keys[j] == key)
			return &m->vals[j];
	return NULL;
}

uint64_t *u64map_get(struct u64map *m, uint64_t key, uint64_t def, bool *added)
{
	uint64_t *v = u64map_find(m, key);
	size_t j;

	if (added)
		*added = false;
	if (v)
		return v;
	if ((m->n + 1) * 2 > m->cap && grow(m) < 0)
		return NULL;
	if (!m->used || !m->keys || !m->vals)
		return NULL;
	for (j = hash(key) & (m->cap - 1); m->used[j]; j = (j + 1) & (m->cap - 1))
		;
	m->used[j] = 1;
	m->keys[j] = key;
	m->vals[j] = def;
	m->n++;
	if (added)
		*added = true;
	return &m->vals[j];
}
