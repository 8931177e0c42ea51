/* SPDX-License-Identifier: MIT */
/*
 * flowmap.h - a value per flow, a flow being what flows.c joins: a
 * ring-local id within its ring, or a global id in any ring
 * (flow_scope()), its role taken off (shmtrace_flow_id()). Exact: two
 * flows never share an entry; the flows of one id that a terminating
 * step ends and the id begins again (flows.h) share one.
 */
#ifndef SHMTRACE_FLOWMAP_H
#define SHMTRACE_FLOWMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "u64map.h"

/* One map by id per scope: [0] the global ids, [1 + ring] ring's own. */
struct flowmap {
	struct u64map *by_scope;
	size_t n, cap;
};

void flowmap_init(struct flowmap *m);
void flowmap_free(struct flowmap *m);

/* The value of the flow of id flow on a record of ring (the source's
 * ring index), inserted as def when absent (*added then, if not NULL);
 * NULL when out of memory. Valid until the next insertion. */
uint64_t *flowmap_get(struct flowmap *m, uint64_t flow, uint32_t ring, uint64_t def, bool *added);
/* The same without inserting: NULL when absent. */
uint64_t *flowmap_find(const struct flowmap *m, uint64_t flow, uint32_t ring);

#endif
