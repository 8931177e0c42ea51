/* SPDX-License-Identifier: MIT */
/*
 * hist.h - a log-linear histogram of durations in fixed memory, for
 * percentiles without keeping every span (an HdrHistogram-lite).
 *
 * Values below 128 ns have a bucket each; above, every power of two is cut
 * into 64 equal buckets, so a bucket spans at most 1/64 of its lower bound.
 * A percentile is reported as its bucket's midpoint (clamped to the exact
 * min and max), so it is within 1/128 (0.8%) of a true sample's value.
 */
#ifndef SHMTRACE_HIST_H
#define SHMTRACE_HIST_H

#include <stdint.h>

#define HIST_SUB	64u
#define HIST_BUCKETS	(128u + (64u - 7u) * HIST_SUB)

struct hist {
	uint64_t count, total, min, max;
	uint64_t b[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_add(struct hist *h, uint64_t v);
/* Adds every value src holds to h, as if each had been hist_add()ed. */
void hist_merge(struct hist *h, const struct hist *src);
/* The value at quantile q (0..1]: the smallest bucket holding the
 * ceil(q * count)-th smallest value. 0 when empty. */
uint64_t hist_quantile(const struct hist *h, double q);

/* Bucket index of v, and the bounds [lo, hi] of bucket i. */
uint32_t hist_bucket(uint64_t v);
void hist_bounds(uint32_t i, uint64_t *lo, uint64_t *hi);

#endif
