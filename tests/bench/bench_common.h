/* SPDX-License-Identifier: MIT */
/*
 * bench_common.h - helpers shared by the shmtrace and the LTTng-UST
 * benchmarks (tests/bench/bench_shmtrace.c, tests/bench/lttng/bench_lttng.c):
 * clocks, the TSC, medians and percentiles, a start barrier for processes.
 * Header-only so that the LTTng side (built by run.sh, not by the Makefile)
 * needs nothing from libshm.
 */
#ifndef SHMTRACE_BENCH_COMMON_H
#define SHMTRACE_BENCH_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define BENCH_NOINLINE __attribute__((noinline))
#define BENCH_BARRIER() __asm__ __volatile__("" ::: "memory")

static inline uint64_t bench_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread: what a loop cost, without the time the
 * thread spent preempted by other work on a shared machine */
static inline uint64_t bench_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* rdtsc fenced on both sides, for timing one short call */
static inline uint64_t bench_tsc_begin(void)
{
	uint64_t t;

	_mm_lfence();
	t = __rdtsc();
	_mm_lfence();
	return t;
}

static inline uint64_t bench_tsc_end(void)
{
	unsigned int aux;
	uint64_t t = __rdtscp(&aux);

	_mm_lfence();
	return t;
}

/* TSC ticks per ns, measured against CLOCK_MONOTONIC over ~100 ms */
static inline double bench_tsc_per_ns(void)
{
	struct timespec nap = { 0, 100 * 1000 * 1000 };
	uint64_t m0 = bench_mono_ns(), t0 = __rdtsc();

	nanosleep(&nap, NULL);
	return (double)(__rdtsc() - t0) / (double)(bench_mono_ns() - m0);
}

static inline int bench_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static inline int bench_cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* sorts v in place */
static inline double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_dbl);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* v sorted ascending */
static inline uint64_t bench_pct(const uint64_t *v, size_t n, double p)
{
	size_t i = (size_t)(p / 100.0 * (double)n);

	return v[i >= n ? n - 1 : i];
}

static inline uint64_t bench_env_u64(const char *name, uint64_t def)
{
	const char *s = getenv(name);

	return s && *s ? strtoull(s, NULL, 0) : def;
}

static inline void bench_die(const char *what)
{
	fprintf(stderr, "bench: %s: %s\n", what, strerror(errno));
	exit(2);
}

/*
 * Start barrier for processes: each child writes one byte to ready[1] and
 * blocks reading go[0]; the parent waits for n bytes and closes go[1].
 */
struct bench_barrier {
	int ready[2];
	int go[2];
};

static inline void bench_barrier_init(struct bench_barrier *b)
{
	if (pipe(b->ready) || pipe(b->go))
		bench_die("pipe");
}

static inline void bench_barrier_child(struct bench_barrier *b)
{
	char c = 'r';

	close(b->go[1]);
	if (write(b->ready[1], &c, 1) != 1)
		bench_die("barrier write");
	while (read(b->go[0], &c, 1) < 0 && errno == EINTR)
		;
}

static inline void bench_barrier_wait(struct bench_barrier *b, int n)
{
	char c;

	close(b->ready[1]);
	for (int i = 0; i < n; i++)
		if (read(b->ready[0], &c, 1) != 1)
			bench_die("barrier: a child died before the start");
}

static inline void bench_barrier_go(struct bench_barrier *b)
{
	close(b->go[1]);
	close(b->ready[0]);
	close(b->go[0]);
}

static inline void bench_barrier_release(struct bench_barrier *b, int n)
{
	bench_barrier_wait(b, n);
	bench_barrier_go(b);
}

#endif
