/* SPDX-License-Identifier: MIT */
/*
 * clock.h - a clock's reading in nanoseconds: what the tools time their
 * waits, deadlines and pacing by. The span's own timestamps are the
 * ring's clock (libshm/ring/clock.c), not this.
 */
#ifndef SHMTRACE_UTIL_CLOCK_H
#define SHMTRACE_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* clock_gettime(id) in ns: CLOCK_MONOTONIC, CLOCK_REALTIME, ... Safe in a
 * signal handler (clock_gettime is async-signal-safe). */
static inline uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
