/* SPDX-License-Identifier: MIT */
/*
 * intern_cache.c - a handle's string cache (string -> handle id) behind
 * shmtrace_intern() (intern.c), and the ids it hands out: the same as the
 * ring's in the first ring, remapped when the handle moves to another ring
 * (attach.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "producer.h"

/* Grows the table when it is fuller than one entry per bucket. */
int shmt_intern_cache_put(shmtrace_t *t, const char *s, size_t len, uint32_t h, uint32_t id)
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

/* Marks handle id hid used. */
static void id_use(shmtrace_t *t, uint32_t hid)
{
	t->ids_used[hid / 64] |= 1ull << (hid % 64);
}

static bool id_used(const shmtrace_t *t, uint32_t hid)
{
	return t->ids_used[hid / 64] >> (hid % 64) & 1;
}

uint32_t shmt_handle_id(shmtrace_t *t, struct shmt_att *a, uint32_t ring_id)
{
	uint32_t hid = ring_id;

	if (!a->remap)
		return ring_id;	/* the first ring's ids are the handle's */
	if (id_used(t, hid)) {
		/* taken by a string of an earlier ring: the lowest free one */
		for (hid = 1; hid < SHMT_HANDLE_IDS && id_used(t, hid); hid++)
			;
		if (hid == SHMT_HANDLE_IDS)
			return 0;
	}
	id_use(t, hid);
	a->remap[hid] = (uint16_t)ring_id;
	return hid;
}

/*
 * A handle moves to a new ring (a): every string it interned gets its id
 * there, and the ids the callers hold map to those. Ids it never handed
 * out map to themselves. t->local held (lock order: local, then ring).
 * Returns 0 or -errno.
 */
int shmt_intern_remap(shmtrace_t *t, struct shmt_att *a)
{
	struct intern_cache *c = t->cache;
	int ret;

	a->remap = malloc(SHMT_HANDLE_IDS * sizeof(*a->remap));
	if (!t->ids_used)
		t->ids_used = calloc(SHMT_HANDLE_IDS / 64, sizeof(uint64_t));
	if (!a->remap || !t->ids_used)
		return -ENOMEM;
	for (uint32_t i = 0; i < SHMT_HANDLE_IDS; i++)
		a->remap[i] = (uint16_t)i;
	ret = shmt_producer_lock(a, t->lock_timeout_ns);
	if (ret < 0)
		return ret;
	for (uint32_t i = 0; c && i < c->nbuckets; i++) {
		for (struct intern_entry *e = c->bucket[i]; e; e = e->next) {
			int id = shmt_intern_locked(&a->v, e->s, e->len);

			/* a full table: the string exports as "?" (counted) */
			a->remap[e->id] = id > 0 ? (uint16_t)id : 0;
			id_use(t, e->id);
		}
	}
	shmt_unlock(&a->v);
	return 0;
}
