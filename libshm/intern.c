/* SPDX-License-Identifier: MIT */
/*
 * intern.c - shmtrace_intern(): a per-process cache in front of the shared
 * string table, so that interning a known string costs no ring lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct intern_entry {
	struct intern_entry *next;
	uint32_t hash;
	uint32_t id;
	size_t len;
	char s[];
};

/* Failures cached per handle at most: strings that did not fit are not
 * bounded by the table's size, as ids are. */
#define INTERN_MAX_FAILED 65536u

struct intern_cache {
	uint32_t nbuckets;
	uint32_t count;
	uint32_t failed;	/* entries with id 0: the table had no room */
	struct intern_entry *bucket[];
};

static struct intern_entry *cache_find(struct intern_cache *c, const char *s, size_t len, uint32_t h)
{
	if (!c)
		return NULL;
	for (struct intern_entry *e = c->bucket[h & (c->nbuckets - 1)]; e; e = e->next)
		if (e->hash == h && e->len == len && !memcmp(e->s, s, len))
			return e;
	return NULL;
}

/* Grows the table when it is fuller than one entry per bucket. */
static int cache_put(shmtrace_t *t, const char *s, size_t len, uint32_t h, uint32_t id)
{
	struct intern_cache *c = t->cache;
	struct intern_entry *e;

	if (!c || c->count >= c->nbuckets) {
		uint32_t nb = c ? c->nbuckets * 2 : 256;
		struct intern_cache *n = calloc(1, sizeof(*n) + nb * sizeof(n->bucket[0]));

		if (!n)
			return -ENOMEM;
		n->nbuckets = nb;
		n->failed = c ? c->failed : 0;
		for (uint32_t i = 0; c && i < c->nbuckets; i++) {
			while (c->bucket[i]) {
				e = c->bucket[i];
				c->bucket[i] = e->next;
				e->next = n->bucket[e->hash & (nb - 1)];
				n->bucket[e->hash & (nb - 1)] = e;
				n->count++;
			}
		}
		free(c);
		t->cache = c = n;
	}
	e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return -ENOMEM;
	e->hash = h;
	e->id = id;
	e->len = len;
	memcpy(e->s, s, len);
	e->s[len] = 0;
	e->next = c->bucket[h & (c->nbuckets - 1)];
	c->bucket[h & (c->nbuckets - 1)] = e;
	c->count++;
	c->failed += id == 0;
	return 0;
}

void shmt_intern_cache_free(shmtrace_t *t)
{
	struct intern_cache *c = t->cache;

	for (uint32_t i = 0; c && i < c->nbuckets; i++) {
		while (c->bucket[i]) {
			struct intern_entry *e = c->bucket[i];

			c->bucket[i] = e->next;
			free(e);
		}
	}
	free(c);
	t->cache = NULL;
}

SHMT_API uint32_t shmtrace_intern(shmtrace_t *t, const char *s)
{
	struct intern_entry *e;
	size_t len;
	uint32_t h;
	int id;

	if (!t || !s)
		return 0;
	len = strnlen(s, SHMT_STRING_MAX);
	h = shmt_hash(s, len);
	pthread_mutex_lock(&t->local);
	e = cache_find(t->cache, s, len, h);
	if (e) {
		id = (int)e->id;
		pthread_mutex_unlock(&t->local);
		return (uint32_t)id;
	}
	/* the ring lock is taken with the local one held: lock order is
	 * always local, then ring */
	id = shmt_lock(&t->v, 100ull * 1000 * 1000);
	if (id == 0) {
		id = shmt_intern_locked(&t->v, s, len);
		shmt_unlock(&t->v);
	}
	/* A string that did not fit never will (the table and its heap only
	 * fill up): remember the failure too, so that it is counted once per
	 * handle in strings_dropped and does not take the ring lock again. */
	if (id > 0)
		cache_put(t, s, len, h, (uint32_t)id);
	else if (id == -ENOSPC && (!t->cache || t->cache->failed < INTERN_MAX_FAILED))
		cache_put(t, s, len, h, 0);
	pthread_mutex_unlock(&t->local);
	return id > 0 ? (uint32_t)id : 0;
}
