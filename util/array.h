/* SPDX-License-Identifier: MIT */
/*
 * array.h - growing arrays: the one way an array of any element type is
 * made to hold more (capacity doubled, from a first size).
 */
#ifndef SHMTRACE_ARRAY_H
#define SHMTRACE_ARRAY_H

#include <stddef.h>

/*
 * Makes the array *arrayp (a T *, of elements of size bytes, *cap of them
 * allocated) hold at least need elements: its capacity doubled from *cap,
 * or from first when it is 0, until need fits, but never above max (0: no
 * bound; need itself must then be at most max). Returns 0, or -ENOMEM with
 * *arrayp and *cap as they were (need above max counts as no memory).
 */
int array_reserve_max(void *arrayp, size_t *cap, size_t need, size_t size, size_t first,
		      size_t max);

/* array_reserve_max() with no bound. */
static inline int array_reserve(void *arrayp, size_t *cap, size_t need, size_t size, size_t first)
{
	return array_reserve_max(arrayp, cap, need, size, first, 0);
}

#endif
