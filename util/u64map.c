/* SPDX-License-Identifier: MIT */
/*
 * u64map.c - linear probing, doubling at half full, in one allocation.
 */
#include <stdlib.h>

#include "u64map.h"

struct u64map_tab {
	size_t cap, n;		/* cap: a power of two */
	uint64_t *keys, *vals;
	uint8_t *used;
};

void u64map_init(struct u64map *m)
{
	m->tab = NULL;
}

void u64map_free(struct u64map *m)
{
	free(m->tab);
	m->tab = NULL;
}

/* Half of hash.h's hash_fmix64(), on purpose: maps are walked in slot
 * order (u64map_next()), so what is written from one comes out in the
 * order this hash gives; it stays as it is. */
static size_t hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (size_t)k;
}

static struct u64map_tab *tab_new(size_t cap)
{
	struct u64map_tab *t = calloc(1, sizeof(*t) + cap * (2 * sizeof(uint64_t) + 1));

	if (!t)
		return NULL;
	t->cap = cap;
	t->keys = (uint64_t *)(t + 1);
	t->vals = t->keys + cap;
	t->used = (uint8_t *)(t->vals + cap);
	return t;
}

static int grow(struct u64map *m)
{
	const struct u64map_tab *o = m->tab;
	struct u64map_tab *t = tab_new(o ? o->cap * 2 : 64);

	if (!t)
		return -1;
	for (size_t i = 0; o && i < o->cap; i++) {
		size_t j;

		if (!o->used[i])
			continue;
		for (j = hash(o->keys[i]) & (t->cap - 1); t->used[j]; j = (j + 1) & (t->cap - 1))
			;
		t->used[j] = 1;
		t->keys[j] = o->keys[i];
		t->vals[j] = o->vals[i];
		t->n++;
	}
	free(m->tab);
	m->tab = t;
	return 0;
}

uint64_t *u64map_find(const struct u64map *m, uint64_t key)
{
	const struct u64map_tab *t = m->tab;

	if (!t)
		return NULL;
	for (size_t j = hash(key) & (t->cap - 1); t->used[j]; j = (j + 1) & (t->cap - 1))
		if (t->keys[j] == key)
			return &t->vals[j];
	return NULL;
}

uint64_t *u64map_get(struct u64map *m, uint64_t key, uint64_t def, bool *added)
{
	uint64_t *v = u64map_find(m, key);
	struct u64map_tab *t;
	size_t j;

	if (added)
		*added = false;
	if (v)
		return v;
	if ((!m->tab || (m->tab->n + 1) * 2 > m->tab->cap) && grow(m) < 0)
		return NULL;
	t = m->tab;
	for (j = hash(key) & (t->cap - 1); t->used[j]; j = (j + 1) & (t->cap - 1))
		;
	t->used[j] = 1;
	t->keys[j] = key;
	t->vals[j] = def;
	t->n++;
	if (added)
		*added = true;
	return &t->vals[j];
}

size_t u64map_count(const struct u64map *m)
{
	return m->tab ? m->tab->n : 0;
}

bool u64map_next(const struct u64map *m, size_t *pos, uint64_t *key, uint64_t **val)
{
	const struct u64map_tab *t = m->tab;

	for (; t && *pos < t->cap; (*pos)++) {
		if (t->used[*pos]) {
			*key = t->keys[*pos];
			*val = &t->vals[*pos];
			(*pos)++;
			return true;
		}
	}
	return false;
}
