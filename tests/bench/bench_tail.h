/* SPDX-License-Identifier: MIT */
/*
 * bench_tail.h - the producers' tail under stress (case 9 of `make bench`),
 * what the shmtrace side (tests/bench/bench_tail.c) and the LTTng-UST side
 * (tests/bench/lttng/bench_lttng_tail.c) share: every call timed with
 * CLOCK_MONOTONIC and counted over thresholds, the producer's loop (flat
 * out or paced; for a time, a count, or until SIGTERM) and the runs of the
 * three cases, which each side drives with its own way of starting a
 * producer process (shmtrace: fork; LTTng: exec, so that it registers):
 *
 *   9a oversub  many producer processes flat out for a fixed time
 *   9b frozen   a flat-out producer stopped at random moments (every other
 *               time holding its tracer's lock, where it has one), two
 *               paced producers beside it timed
 *   9c threads  a thousand threads of one process behind a barrier
 *
 * These measure; they assert nothing. Header-only, as bench_common.h, for
 * the LTTng side.
 */
#ifndef SHMTRACE_BENCH_TAIL_H
#define SHMTRACE_BENCH_TAIL_H

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/resource.h>

#include "bench_common.h"

/* a call is counted over each threshold it exceeds (ascending) */
#define BENCH_TAIL_NTHRESH 4
static const uint64_t bench_tail_thresh_ns[BENCH_TAIL_NTHRESH] = {
	100 * 1000, 1000 * 1000, 5 * 1000 * 1000, 10 * 1000 * 1000,
};
static const char *const bench_tail_thresh_key[BENCH_TAIL_NTHRESH] = {
	"over_100us", "over_1ms", "over_5ms", "over_10ms",
};

/* What a producer's (or a run's) timed calls came to. */
struct bench_tail {
	uint64_t calls;
	uint64_t errors;		/* calls that returned < 0 (shmtrace: a record dropped) */
	uint64_t over[BENCH_TAIL_NTHRESH];
	uint64_t max_ns;
	uint64_t start_ns, end_ns;	/* CLOCK_MONOTONIC around the calls; 0: none */
	/* with BENCH_TAIL_RUSAGE: the calls over 1 ms during which the
	 * thread was preempted (an involuntary context switch), blocked (a
	 * voluntary one: it waited in the kernel), or neither */
	uint64_t slow_preempted, slow_blocked, slow_neither;
};

/* BENCH_TAIL_RUSAGE=1: every timed call between two getrusage() calls
 * of its thread, to tell what made the slow ones slow. A diagnostic: the
 * system calls make every call slower and more often preempted, so its
 * times are not the case's figures. */
static int bench_tail_rusage;
#define BENCH_TAIL_SLOW_NS 1000000ull

static inline void bench_tail_add(struct bench_tail *t, uint64_t ns)
{
	t->calls++;
	if (ns > t->max_ns)
		t->max_ns = ns;
	for (int k = 0; k < BENCH_TAIL_NTHRESH && ns > bench_tail_thresh_ns[k]; k++)
		t->over[k]++;
}

static inline void bench_tail_merge(struct bench_tail *d, const struct bench_tail *s)
{
	d->calls += s->calls;
	d->errors += s->errors;
	for (int k = 0; k < BENCH_TAIL_NTHRESH; k++)
		d->over[k] += s->over[k];
	if (s->max_ns > d->max_ns)
		d->max_ns = s->max_ns;
	if (s->start_ns && (!d->start_ns || s->start_ns < d->start_ns))
		d->start_ns = s->start_ns;
	if (s->end_ns > d->end_ns)
		d->end_ns = s->end_ns;
	d->slow_preempted += s->slow_preempted;
	d->slow_blocked += s->slow_blocked;
	d->slow_neither += s->slow_neither;
}

/* calls/s from the first call's start to the last one's end */
static inline double bench_tail_rate(const struct bench_tail *t)
{
	return t->end_ns > t->start_ns ? (double)t->calls / ((double)(t->end_ns - t->start_ns) / 1e9) : 0.0;
}

static inline double bench_median_u64(const uint64_t *v, int n)
{
	double d[BENCH_MAX_RUNS] = { 0 };

	for (int i = 0; i < n; i++)
		d[i] = (double)v[i];
	return bench_median(d, n);
}

/*
 * " calls=... rate=... errors=... over_100us=... max_us=...": of n runs,
 * each the merged calls of the producers that run timed, the median of
 * each count (a run's total) and the slowest call of all runs.
 */
static inline void bench_tail_print(const struct bench_tail *runs, int n)
{
	uint64_t v[BENCH_MAX_RUNS] = { 0 }, max = 0;
	double rate[BENCH_MAX_RUNS] = { 0 };

	for (int r = 0; r < n; r++) {
		v[r] = runs[r].calls;
		rate[r] = bench_tail_rate(&runs[r]);
		max = runs[r].max_ns > max ? runs[r].max_ns : max;
	}
	printf(" calls=%.0f rate=%.0f", bench_median_u64(v, n), bench_median(rate, n));
	for (int r = 0; r < n; r++)
		v[r] = runs[r].errors;
	printf(" errors=%.0f", bench_median_u64(v, n));
	for (int k = 0; k < BENCH_TAIL_NTHRESH; k++) {
		for (int r = 0; r < n; r++)
			v[r] = runs[r].over[k];
		printf(" %s=%.0f", bench_tail_thresh_key[k], bench_median_u64(v, n));
	}
	printf(" max_us=%.1f", (double)max / 1e3);
	if (bench_tail_rusage) {
		struct bench_tail all = { 0 };

		for (int r = 0; r < n; r++)
			bench_tail_merge(&all, &runs[r]);
		printf(" diag_over_1ms_preempted=%llu diag_over_1ms_blocked=%llu diag_over_1ms_neither=%llu",
		       (unsigned long long)all.slow_preempted, (unsigned long long)all.slow_blocked,
		       (unsigned long long)all.slow_neither);
	}
}

/*
 * The cases' settings, the same on both sides: BENCH_N is each case's own
 * count (9a: ms a run lasts, 9b: freezes, 9c: spans per thread),
 * BENCH_PROCS the producer processes of 9a, BENCH_FREEZE_MS how long a
 * freeze of 9b lasts, BENCH_RATE the calls/s of each paced producer of 9b,
 * BENCH_THREADS the threads of 9c.
 */
struct bench_tail_env {
	int procs;
	uint64_t ms;
	int freezes;
	uint64_t freeze_ms, rate;
	int threads;
	uint64_t spans;
};

static inline void bench_tail_env(struct bench_tail_env *e)
{
	e->procs = (int)bench_env_u64("BENCH_PROCS", 32);
	e->ms = bench_env_u64("BENCH_N", 3000);
	e->freezes = (int)bench_env_u64("BENCH_N", 25);
	e->freeze_ms = bench_env_u64("BENCH_FREEZE_MS", 200);
	e->rate = bench_env_u64("BENCH_RATE", 1000000);
	e->threads = (int)bench_env_u64("BENCH_THREADS", 1000);
	e->spans = bench_env_u64("BENCH_N", 1000);
	bench_tail_rusage = bench_env_u64("BENCH_TAIL_RUSAGE", 0) != 0;
}

/* ------------------------------------------------------------ producers */

/* One traced call of a tracer: a span from t0 to t1, the i-th of its
 * producer. Returns < 0 when the tracer says the record was dropped. */
typedef int (*bench_tail_emit_fn)(void *ctx, uint64_t t0, uint64_t t1, uint64_t i);

/* What one producer does. */
struct bench_tail_role {
	uint64_t rate;		/* calls/s; 0: flat out */
	uint64_t run_ns;	/* for this long; 0: no limit */
	uint64_t count;		/* this many calls; 0: no limit */
	uint64_t warm;		/* untimed calls before the start */
	int idx;		/* which producer of its run */
};

static volatile sig_atomic_t bench_tail_stop;
static inline void bench_tail_on_term(int sig) { (void)sig; bench_tail_stop = 1; }

/* SIGUSR1 asks a producer to stop itself (SIGSTOP) between two calls,
 * through the side's bench_tail_stop_self: with its tracer's lock held,
 * where the tracer has one. */
static volatile sig_atomic_t bench_tail_stop_asked;
static inline void bench_tail_on_usr1(int sig) { (void)sig; bench_tail_stop_asked = 1; }

static inline void bench_tail_raise_stop(void)
{
	raise(SIGSTOP);
}

static void (*bench_tail_stop_self)(void) = bench_tail_raise_stop;

static inline void bench_sleep_until(uint64_t mono_ns)
{
	struct timespec ts = { (time_t)(mono_ns / 1000000000ull), (long)(mono_ns % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !bench_tail_stop)
		;
}

/* A paced producer sleeps once per this many calls: at 1 M/s, once a ms. */
#define BENCH_TAIL_BATCH 1000u

/*
 * The producer's loop: each call is timed alone, with CLOCK_MONOTONIC read
 * before and after it (the same clock on both tracers; its ~20 ns are in
 * every sample, far below the thresholds), and its span runs from the
 * previous call's end to this one's start. A paced producer sleeps to its
 * schedule between batches, untimed; one that fell behind (a stalled call)
 * runs flat out until it has caught up, as one serving a queue would. The
 * loop ends at role's count or time, or at SIGTERM.
 */
static inline void bench_tail_loop(bench_tail_emit_fn emit, void *ctx, const struct bench_tail_role *role,
				   struct bench_tail *t)
{
	uint64_t last = bench_mono_ns(), end = role->run_ns ? last + role->run_ns : UINT64_MAX;
	uint64_t period = role->rate ? (uint64_t)(BENCH_TAIL_BATCH * 1e9 / (double)role->rate) : 0;
	uint64_t due = last;

	memset(t, 0, sizeof(*t));
	t->start_ns = last;
	for (uint64_t i = 0; (!role->count || i < role->count) && last < end && !bench_tail_stop; i++) {
		struct rusage ru0, ru1;
		uint64_t a;

		if (bench_tail_rusage)
			getrusage(RUSAGE_THREAD, &ru0);
		a = bench_mono_ns();
		if (emit(ctx, last, a, i) < 0)
			t->errors++;
		last = bench_mono_ns();
		bench_tail_add(t, last - a);
		if (bench_tail_rusage && last - a > BENCH_TAIL_SLOW_NS) {
			getrusage(RUSAGE_THREAD, &ru1);
			t->slow_preempted += ru1.ru_nivcsw > ru0.ru_nivcsw;
			t->slow_blocked += ru1.ru_nvcsw > ru0.ru_nvcsw;
			t->slow_neither += ru1.ru_nivcsw == ru0.ru_nivcsw && ru1.ru_nvcsw == ru0.ru_nvcsw;
		}
		if (bench_tail_stop_asked) {
			bench_tail_stop_asked = 0;
			bench_tail_stop_self();
		}
		if (period && i % BENCH_TAIL_BATCH == BENCH_TAIL_BATCH - 1) {
			due += period;
			if (due > last) {
				bench_sleep_until(due);
				last = bench_mono_ns();
			}
		}
	}
	t->end_ns = last;
}

/* What a producer process sends back: its calls, and which it was. */
struct bench_tail_msg {
	int32_t idx;
	uint32_t pad;
	struct bench_tail t;
};

/*
 * A producer process: role's warm-up (untimed), the start barrier, the
 * timed loop, its result on res. SIGTERM ends the loop. Returns the
 * process's exit status.
 */
static inline int bench_tail_child(bench_tail_emit_fn emit, void *ctx, const struct bench_tail_role *role,
				   struct bench_barrier *b, int res)
{
	struct bench_tail_msg m;

	memset(&m, 0, sizeof(m));
	m.idx = role->idx;
	signal(SIGTERM, bench_tail_on_term);
	signal(SIGUSR1, bench_tail_on_usr1);
	for (uint64_t i = 0; i < role->warm; i++) {
		uint64_t a = bench_mono_ns();

		emit(ctx, a, a, i);
	}
	bench_barrier_child(b);
	bench_tail_loop(emit, ctx, role, &m.t);
	/* < PIPE_BUF: the producers' messages never interleave */
	return write(res, &m, sizeof(m)) == (ssize_t)sizeof(m) ? 0 : 1;
}

/* ---------------------------------------------------------------- runs */

#define BENCH_TAIL_MAX_PROCS 64

/* How a side runs its producers. */
struct bench_tail_side {
	/* starts a producer process of role that ends in bench_tail_child()
	 * with b and res (the parent's ends of both are close-on-exec) */
	pid_t (*spawn)(const struct bench_tail_role *role, struct bench_barrier *b, int res);
	/* every producer is warm and waits at the barrier (or, in 9c, is
	 * about to start): the side drains and reads its loss counters */
	void (*ready)(void);
	/* a stopped producer: whether it holds the tracer's lock (NULL: the
	 * tracer has none) */
	bool (*holds_lock)(pid_t pid);
	/* 9c, in this process: the call, and what it is given, made before
	 * the threads and ended after them (open, close: NULL for none) */
	bench_tail_emit_fn emit;
	void *(*open)(void);
	void (*close)(void *ctx);
};

/* A run's pipes and producers. */
struct bench_tail_procs {
	struct bench_barrier b;
	int res[2];
	pid_t pids[BENCH_TAIL_MAX_PROCS];
	int n;
};

static inline void bench_tail_spawn(const struct bench_tail_side *s, struct bench_tail_procs *p,
				    const struct bench_tail_role *roles, int n)
{
	if (n < 1 || n > BENCH_TAIL_MAX_PROCS) {
		fprintf(stderr, "bench: 1 to %d producer processes, not %d\n", BENCH_TAIL_MAX_PROCS, n);
		exit(2);
	}
	bench_barrier_init(&p->b);
	if (pipe(p->res))
		bench_die("pipe");
	/* exec'd producers must not hold the parent's ends, or go never closes */
	fcntl(p->b.go[1], F_SETFD, FD_CLOEXEC);
	fcntl(p->b.ready[0], F_SETFD, FD_CLOEXEC);
	fcntl(p->res[0], F_SETFD, FD_CLOEXEC);
	for (int i = 0; i < n; i++)
		p->pids[i] = s->spawn(&roles[i], &p->b, p->res[1]);
	p->n = n;
	close(p->res[1]);
	bench_barrier_wait(&p->b, n);
	s->ready();
	bench_barrier_go(&p->b);
}

/* Reads every producer's result into per[idx] and reaps them. */
static inline void bench_tail_collect(struct bench_tail_procs *p, struct bench_tail *per)
{
	for (int i = 0; i < p->n; i++) {
		struct bench_tail_msg m;

		if (read(p->res[0], &m, sizeof(m)) != (ssize_t)sizeof(m) || m.idx < 0 || m.idx >= p->n)
			bench_die("a producer died");
		per[m.idx] = m.t;
	}
	close(p->res[0]);
	for (int i = 0; i < p->n; i++)
		waitpid(p->pids[i], NULL, 0);
}

/* The producers of a run of 9a or 9b together make this many untimed
 * calls first: a lap of the bench's shmtrace ring (1M records), so that
 * they start with their blocks claimed and pages of the ring mapped. */
#define BENCH_TAIL_WARM 1048576ull

/* 9a, one run: nproc producers flat out for run_ns; *out: all their calls. */
static inline void bench_tail_oversub(const struct bench_tail_side *s, int nproc, uint64_t run_ns,
				      struct bench_tail *out)
{
	struct bench_tail_role roles[BENCH_TAIL_MAX_PROCS];
	struct bench_tail per[BENCH_TAIL_MAX_PROCS];
	struct bench_tail_procs p;

	for (int i = 0; i < nproc && i < BENCH_TAIL_MAX_PROCS; i++)
		roles[i] = (struct bench_tail_role){ .run_ns = run_ns, .warm = BENCH_TAIL_WARM / (uint64_t)nproc,
						     .idx = i };
	bench_tail_spawn(s, &p, roles, nproc);
	bench_tail_collect(&p, per);
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < nproc; i++)
		bench_tail_merge(out, &per[i]);
}

/* splitmix64: the freezes' moments, the same for both tracers per seed */
static inline uint64_t bench_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#define BENCH_TAIL_GAP_MAX_NS (100ull * 1000 * 1000)	/* between two freezes: 0 to this */

/* What a run of 9b froze. */
struct bench_tail_freezes {
	int freezes;
	int in_lock;		/* of them, with the victim holding the tracer's lock */
};

/* Stops pid (SIGSTOP, or SIGUSR1: it stops itself, bench_tail_stop_self),
 * and returns once it is stopped (its parent sees it). */
static inline void bench_freeze(pid_t pid, int sig)
{
	int st;

	kill(pid, sig);
	if (waitpid(pid, &st, WUNTRACED) != pid || !WIFSTOPPED(st))
		bench_die("a frozen producer did not stop");
}

/*
 * 9b, one run: producer 0 (the victim) flat out, producers 1 and 2 paced
 * at rate calls/s each. The victim is frozen nfreeze times for freeze_ns
 * each, after a random gap (seeded) each: by SIGSTOP wherever it is, and,
 * where the tracer has a lock, every other time by asking it to stop
 * itself between two calls with the lock held (a tracer without one is
 * stopped wherever it is every time, inside its calls too). A last gap
 * after the last freeze, then all are stopped. *paced: the two paced
 * producers' calls.
 */
static inline void bench_tail_frozen(const struct bench_tail_side *s, int nfreeze, uint64_t freeze_ns,
				     uint64_t rate, uint64_t seed, struct bench_tail *paced,
				     struct bench_tail_freezes *fz)
{
	const uint64_t warm = BENCH_TAIL_WARM / 3;
	struct bench_tail_role roles[3] = {
		{ .warm = warm, .idx = 0 },
		{ .rate = rate, .warm = warm, .idx = 1 },
		{ .rate = rate, .warm = warm, .idx = 2 },
	};
	struct bench_tail per[3];
	struct bench_tail_procs p;
	uint64_t rnd = seed;

	bench_tail_spawn(s, &p, roles, 3);
	for (int f = 0; f <= nfreeze; f++) {
		bench_sleep_until(bench_mono_ns() + bench_rand(&rnd) % BENCH_TAIL_GAP_MAX_NS);
		if (f == nfreeze)
			break;
		bench_freeze(p.pids[0], f % 2 && s->holds_lock ? SIGUSR1 : SIGSTOP);
		fz->freezes++;
		if (s->holds_lock && s->holds_lock(p.pids[0]))
			fz->in_lock++;
		bench_sleep_until(bench_mono_ns() + freeze_ns);
		kill(p.pids[0], SIGCONT);
	}
	for (int i = 0; i < 3; i++)
		kill(p.pids[i], SIGTERM);
	bench_tail_collect(&p, per);
	memset(paced, 0, sizeof(*paced));
	bench_tail_merge(paced, &per[1]);
	bench_tail_merge(paced, &per[2]);
}

/* 9c: a thread of the run */
struct bench_tail_thread {
	pthread_t th;
	int idx;
	bench_tail_emit_fn emit;
	void *ctx;
	struct bench_tail_role role;
	pthread_barrier_t *start, *end;
	struct bench_tail t;
};

static inline void *bench_tail_thread_main(void *arg)
{
	struct bench_tail_thread *x = arg;
	char name[16];

	/* named, so that a tracer keeping thread names has one to keep */
	snprintf(name, sizeof(name), "tail-%d", x->idx);
	pthread_setname_np(pthread_self(), name);
	pthread_barrier_wait(x->start);
	bench_tail_loop(x->emit, x->ctx, &x->role, &x->t);
	pthread_barrier_wait(x->end);
	return NULL;
}

/*
 * 9c, one run: nthreads threads of this process, each count calls of emit
 * once all of them are alive (a barrier); 256 KiB stacks. *out: all their
 * calls. The threads wait at a second barrier once their calls are timed,
 * and this thread with them, so that it wakes only once all are done:
 * joining them in turn, it was woken by every exit while the others ran,
 * and took the CPU from a timed call (the same for every tracer).
 */
static inline void bench_tail_threads(bench_tail_emit_fn emit, void *ctx, int nthreads, uint64_t count,
				      struct bench_tail *out)
{
	struct bench_tail_thread *x = calloc((size_t)nthreads, sizeof(*x));
	pthread_barrier_t start, end;
	pthread_attr_t attr;

	if (!x || nthreads < 1 || pthread_barrier_init(&start, NULL, (unsigned)nthreads) ||
	    pthread_barrier_init(&end, NULL, (unsigned)nthreads + 1) ||
	    pthread_attr_init(&attr) || pthread_attr_setstacksize(&attr, 256 * 1024))
		bench_die("threads: setup");
	for (int i = 0; i < nthreads; i++) {
		x[i] = (struct bench_tail_thread){ .idx = i, .emit = emit, .ctx = ctx,
						   .role = { .count = count, .idx = i }, .start = &start,
						   .end = &end };
		errno = pthread_create(&x[i].th, &attr, bench_tail_thread_main, &x[i]);
		if (errno)
			bench_die("pthread_create");
	}
	memset(out, 0, sizeof(*out));
	pthread_barrier_wait(&end);
	for (int i = 0; i < nthreads; i++) {
		pthread_join(x[i].th, NULL);
		bench_tail_merge(out, &x[i].t);
	}
	pthread_attr_destroy(&attr);
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&end);
	free(x);
}

/* Run r of case name ("oversub", "frozen" or "threads") on side s: all
 * its timed calls in *t; the freezes of "frozen" added to *fz. */
static inline void bench_tail_run(const char *name, const struct bench_tail_side *s,
				  const struct bench_tail_env *e, int r, struct bench_tail *t,
				  struct bench_tail_freezes *fz)
{
	void *ctx;

	if (!strcmp(name, "oversub")) {
		bench_tail_oversub(s, e->procs, e->ms * 1000000ull, t);
	} else if (!strcmp(name, "frozen")) {
		bench_tail_frozen(s, e->freezes, e->freeze_ms * 1000000ull, e->rate, (uint64_t)r + 1, t, fz);
	} else {
		ctx = s->open ? s->open() : NULL;
		s->ready();
		bench_tail_threads(s->emit, ctx, e->threads, e->spans, t);
		if (s->close)
			s->close(ctx);
	}
}

/* " procs=32 ms=3000" and the like: case name's settings, and for
 * "frozen" what the runs froze (inside the lock: when s has one) */
static inline void bench_tail_print_settings(const char *name, const struct bench_tail_side *s,
					     const struct bench_tail_env *e, const struct bench_tail_freezes *fz)
{
	if (!strcmp(name, "oversub")) {
		printf(" procs=%d ms=%llu", e->procs, (unsigned long long)e->ms);
	} else if (!strcmp(name, "frozen")) {
		printf(" freezes=%d freeze_ms=%llu paced_rate=%llu", fz->freezes, (unsigned long long)e->freeze_ms,
		       (unsigned long long)e->rate);
		if (s->holds_lock)
			printf(" in_lock=%d", fz->in_lock);
	} else {
		printf(" threads=%d n=%llu", e->threads, (unsigned long long)e->spans);
	}
}

#endif
