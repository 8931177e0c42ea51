/* SPDX-License-Identifier: MIT */
/*
 * flowmap.c - a u64map of flow ids per flow scope: a ring's local ids and
 * the global ids are told apart by which map holds them, not by a hash
 * of both, so no two flows ever meet in one entry.
 */
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "flowmap.h"
#include "flows.h"

void flowmap_init(struct flowmap *m)
{
	memset(m, 0, sizeof(*m));
}

void flowmap_free(struct flowmap *m)
{
	for (size_t i = 0; i < m->n; i++)
		u64map_free(&m->by_scope[i]);
	free(m->by_scope);
	flowmap_init(m);
}

/* The index of scope's map: 0 for the global ids, 1 + ring for a ring's. */
static size_t slot(uint64_t flow, uint32_t ring)
{
	uint32_t s = flow_scope(flow, ring);

	return s == FLOW_SCOPE_ALL ? 0 : (size_t)s + 1;
}

uint64_t *flowmap_get(struct flowmap *m, uint64_t flow, uint32_t ring, uint64_t def, bool *added)
{
	size_t i = slot(flow, ring);

	if (i >= m->n) {
		if (array_reserve(&m->by_scope, &m->cap, i + 1, sizeof(*m->by_scope), 4) < 0)
			return NULL;
		/* maps not yet used hold no table */
		for (; m->n <= i; m->n++)
			u64map_init(&m->by_scope[m->n]);
	}
	return u64map_get(&m->by_scope[i], flow, def, added);
}

uint64_t *flowmap_find(const struct flowmap *m, uint64_t flow, uint32_t ring)
{
	size_t i = slot(flow, ring);

	return i < m->n ? u64map_find(&m->by_scope[i], flow) : NULL;
}
