/* SPDX-License-Identifier: MIT */
/*
 * array.c - growing arrays (array.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"

int array_reserve_max(void *arrayp, size_t *cap, size_t need, size_t size, size_t first,
		      size_t max)
{
	size_t c = *cap ? *cap : first ? first : 1;
	void *old, *p;

	if (need <= *cap)
		return 0;
	if (max && need > max)
		return -ENOMEM;
	while (c < need) {
		if (c > (size_t)-1 / 2)
			return -ENOMEM;
		c *= 2;
	}
	if (max && c > max)
		c = max;
	/* *arrayp is a T *: read and written as the pointer it is */
	memcpy(&old, arrayp, sizeof(old));
	p = reallocarray(old, c, size);
	if (!p)
		return -ENOMEM;
	memcpy(arrayp, &p, sizeof(p));
	*cap = c;
	return 0;
}
