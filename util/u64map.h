/* SPDX-License-Identifier: MIT */
/*
 * u64map.h - an open-addressing hash map from a 64-bit key to a 64-bit
 * value, for the exporter's per-thread and per-name tables.
 */
#ifndef SHMTRACE_U64MAP_H
#define SHMTRACE_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct u64map {
	uint64_t *keys, *vals;
	uint8_t *used;
	size_t cap, n;
};

void u64map_init(struct u64map *m);
void u64map_free(struct u64map *m);
/* Returns a pointer to key's value, inserting it with value def when
 * absent (*added set then, if not NULL); NULL when out of memory. */
uint64_t *u64map_get(struct u64map *m, uint64_t key, uint64_t def, bool *added);
/* Returns key's value slot or NULL, without inserting. */
uint64_t *u64map_find(const struct u64map *m, uint64_t key);

#endif
