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

/* Opaque: its table is private to u64map.c; use the functions below. */
struct u64map {
	struct u64map_tab *tab;
};

void u64map_init(struct u64map *m);
void u64map_free(struct u64map *m);
/* Returns a pointer to key's value, inserting it with value def when
 * absent (*added set then, if not NULL); NULL when out of memory. The
 * pointer is valid until the next insertion. */
uint64_t *u64map_get(struct u64map *m, uint64_t key, uint64_t def, bool *added);
/* Returns key's value slot or NULL, without inserting. */
uint64_t *u64map_find(const struct u64map *m, uint64_t key);
/* The number of keys. */
size_t u64map_count(const struct u64map *m);
/*
 * Walks the entries in no particular order: start with *pos = 0; each call
 * sets *key and *val to the next entry and returns true, or returns false
 * after the last. Inserting during a walk is not allowed.
 */
bool u64map_next(const struct u64map *m, size_t *pos, uint64_t *key, uint64_t **val);

#endif
