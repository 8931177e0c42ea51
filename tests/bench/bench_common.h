/* SPDX-License-Identifier: MIT */
/*
 * bench_common.h - helpers shared by the shmtrace and the LTTng-UST
 * benchmarks (tests/bench/bench_shmtrace.c, tests/bench/lttng/bench_lttng.c):
 * clocks, the TSC, medians and percentiles, a start barrier for processes,
 * and what cases 2 to 4 do alike on both sides (collecting the producers'
 * results, latency percentiles over runs, a loop against an empty one).
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
#include <sys/wait.h>
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

/*
 * Latency over runs (case 3, both tracers): each run's samples, TSC ticks
 * of one timed call, are sorted and read at p50, p99, p99.9 and p99.99 (in
 * ns); the table shows the median of each over the runs, the largest
 * sample of all, and the median of each run's largest (max_med: one call
 * the scheduler took the CPU from sets a run's largest, and the largest of
 * all is the unluckiest run's).
 */
#define BENCH_MAX_RUNS 64
struct bench_lat {
	double p50[BENCH_MAX_RUNS], p99[BENCH_MAX_RUNS], p999[BENCH_MAX_RUNS], p9999[BENCH_MAX_RUNS];
	double run_max[BENCH_MAX_RUNS];
	uint64_t max;
	double tsc_per_ns;
};

static inline void bench_lat_init(struct bench_lat *l)
{
	memset(l, 0, sizeof(*l));
	l->tsc_per_ns = bench_tsc_per_ns();
}

/* The median ns of timing nothing, which every sample includes; lat is n
 * samples of scratch. */
static inline double bench_lat_overhead(const struct bench_lat *l, uint64_t *lat, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		uint64_t a = bench_tsc_begin(), b = bench_tsc_end();

		lat[i] = b - a;
	}
	qsort(lat, n, sizeof(*lat), bench_cmp_u64);
	return (double)bench_pct(lat, n, 50) / l->tsc_per_ns;
}

/* Run r's n samples (sorted in place). */
static inline void bench_lat_run(struct bench_lat *l, int r, uint64_t *lat, uint64_t n)
{
	qsort(lat, n, sizeof(*lat), bench_cmp_u64);
	l->p50[r] = (double)bench_pct(lat, n, 50) / l->tsc_per_ns;
	l->p99[r] = (double)bench_pct(lat, n, 99) / l->tsc_per_ns;
	l->p999[r] = (double)bench_pct(lat, n, 99.9) / l->tsc_per_ns;
	l->p9999[r] = (double)bench_pct(lat, n, 99.99) / l->tsc_per_ns;
	l->run_max[r] = (double)lat[n - 1] / l->tsc_per_ns;
	if (lat[n - 1] > l->max)
		l->max = lat[n - 1];
}

/* " p50=... max=...": the medians over runs (reorders them) */
static inline void bench_lat_print(struct bench_lat *l, int runs)
{
	printf(" p50=%.1f p99=%.1f p999=%.1f p9999=%.1f max=%.1f max_med=%.1f", bench_median(l->p50, runs),
	       bench_median(l->p99, runs), bench_median(l->p999, runs), bench_median(l->p9999, runs),
	       (double)l->max / l->tsc_per_ns, bench_median(l->run_max, runs));
}

/* ns per iteration of a loop that does nothing (the compiler kept out).
 * Not inline, so that it is timed as the loops it is compared with are;
 * unused in a file that includes this header for the rest. */
static BENCH_NOINLINE __attribute__((unused)) double bench_loop_empty(uint64_t n)
{
	uint64_t a = bench_mono_ns();

	for (uint64_t i = 0; i < n; i++)
		BENCH_BARRIER();
	return (double)(bench_mono_ns() - a) / (double)n;
}

/*
 * Case 4, both tracers: the empty loop and loop (a call site compiled in,
 * tracing off) alternated runs times after one warm-up each; the medians
 * of each and of their difference, per iteration.
 */
static inline void bench_alternate(double (*loop)(uint64_t), uint64_t n, int runs,
				   double *empty, double *with, double *diff)
{
	double e[BENCH_MAX_RUNS], w[BENCH_MAX_RUNS], d[BENCH_MAX_RUNS];

	bench_loop_empty(n);
	loop(n);
	for (int r = 0; r < runs; r++) {
		e[r] = bench_loop_empty(n);
		w[r] = loop(n);
		d[r] = w[r] - e[r];
	}
	*empty = bench_median(e, runs);
	*with = bench_median(w, runs);
	*diff = bench_median(d, runs);
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

/* What each producer process of case 2 writes back when it is done. */
struct bench_mp_result {
	uint64_t start, end;	/* CLOCK_MONOTONIC ns around its measured spans */
	uint64_t errors;	/* its calls that returned an error */
};

/*
 * Case 2, both tracers: reads the nproc producers' results from fd (closed
 * after), reaps them, adds their errors to *errors (may be NULL) and
 * returns spans/s in total, n_per_proc each, from the first start to the
 * last end.
 */
static inline double bench_mp_collect(int fd, const pid_t *pids, int nproc, uint64_t n_per_proc,
				      uint64_t *errors)
{
	uint64_t start = UINT64_MAX, end = 0;

	for (int i = 0; i < nproc; i++) {
		struct bench_mp_result m;

		if (read(fd, &m, sizeof(m)) != sizeof(m))
			bench_die("a producer died");
		start = m.start < start ? m.start : start;
		end = m.end > end ? m.end : end;
		if (errors)
			*errors += m.errors;
	}
	close(fd);
	for (int i = 0; i < nproc; i++)
		waitpid(pids[i], NULL, 0);
	return (double)n_per_proc * nproc / ((double)(end - start) / 1e9);
}

#endif
