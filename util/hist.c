/* SPDX-License-Identifier: MIT */
/*
 * hist.c - log-linear buckets: exact below 128, then 64 per octave.
 */
#include <math.h>
#include <string.h>

#include "hist.h"

void hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
}

uint32_t hist_bucket(uint64_t v)
{
	unsigned e, shift;

	if (v < 128)
		return (uint32_t)v;
	e = 63u - (unsigned)__builtin_clzll(v);	/* 7..63 */
	shift = e - 6;				/* keep the top 7 bits: 64..127 */
	return 128u + (e - 7) * HIST_SUB + (uint32_t)((v >> shift) - 64);
}

void hist_bounds(uint32_t i, uint64_t *lo, uint64_t *hi)
{
	unsigned e, shift;
	uint64_t m;

	if (i < 128) {
		*lo = *hi = i;
		return;
	}
	e = (i - 128) / HIST_SUB + 7;
	m = (i - 128) % HIST_SUB + 64;
	shift = e - 6;
	*lo = m << shift;
	*hi = *lo + ((1ull << shift) - 1);
}

void hist_add(struct hist *h, uint64_t v)
{
	if (!h->count || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->count++;
	h->total += v;
	h->b[hist_bucket(v)]++;
}

void hist_merge(struct hist *h, const struct hist *src)
{
	if (!src->count)
		return;
	if (!h->count || src->min < h->min)
		h->min = src->min;
	if (src->max > h->max)
		h->max = src->max;
	h->count += src->count;
	h->total += src->total;
	for (uint32_t i = 0; i < HIST_BUCKETS; i++)
		h->b[i] += src->b[i];
}

uint64_t hist_quantile(const struct hist *h, double q)
{
	uint64_t rank, seen = 0;

	if (!h->count)
		return 0;
	rank = (uint64_t)ceil(q * (double)h->count);
	if (rank < 1)
		rank = 1;
	if (rank > h->count)
		rank = h->count;
	for (uint32_t i = 0; i < HIST_BUCKETS; i++) {
		uint64_t lo, hi, mid;

		seen += h->b[i];
		if (seen < rank)
			continue;
		hist_bounds(i, &lo, &hi);
		mid = lo + (hi - lo) / 2;
		if (mid < h->min)
			mid = h->min;
		if (mid > h->max)
			mid = h->max;
		return mid;
	}
	return h->max;
}
