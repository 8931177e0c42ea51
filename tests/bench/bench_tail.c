/* SPDX-License-Identifier: MIT */
/*
 * bench_tail.c - the shmtrace side of case 9 of `make bench`, the
 * producers' tail under stress; linked into bench_shmtrace, which
 * dispatches to it. tests/bench/bench_tail.h has the loops and runs both
 * tracers share; tests/bench/lttng/bench_lttng_tail.c is LTTng's side.
 *
 *   bench_shmtrace oversub  BENCH_PROCS (32) producer processes flat out
 *                           for BENCH_N ms (3000) each run
 *   bench_shmtrace frozen   a producer flat out, frozen BENCH_N times (25)
 *                           for BENCH_FREEZE_MS (200) each, beside two
 *                           producers paced at BENCH_RATE (1 M) spans/s each
 *   bench_shmtrace threads  BENCH_THREADS (1000) threads of one process,
 *                           BENCH_N spans (1000) each, into a ring of the
 *                           default configuration
 *   bench_shmtrace stopped  a process stopped (SIGSTOP) holding the lock of a
 *                           ring without a collector, BENCH_N timed span
 *                           calls (100000) beside it; stopped-ow: an
 *                           overwrite ring
 *   bench_shmtrace oversub-bare, threads-bare  the control: the same
 *                           loops timing a call that does nothing, with no
 *                           tracer and no collector, what the scheduler
 *                           alone makes of the case's calls
 *
 * (the defaults: bench_tail_env()). BENCH_RUNS runs each, with no warm-up
 * run (the producers of 9a and 9b warm up in each run), each into a ring
 * of its own (the bench's 1M records but in 9c) with a collector of its
 * own draining it. What the ring lost is its counters (libshm/ring/loss.h)
 * over the run's timed part.
 */
#include <linux/futex.h>
#include <sys/prctl.h>

#include "bench_shmtrace.h"
#include "bench_tail.h"
#include "loss.h"
#include "ring_writer.h"

/* the ring the producers of the case write to */
static const char *g_ring;

struct shm_producer {
	shmtrace_t *t;
	uint32_t cat, name;
};

static int shm_emit(void *ctx, uint64_t t0, uint64_t t1, uint64_t i)
{
	const struct shm_producer *p = ctx;

	(void)i;
	return shmtrace_span(p->t, p->cat, p->name, t0, t1, 0);
}

static void shm_producer_open(struct shm_producer *p)
{
	p->t = ring_open(g_ring);
	p->cat = shmtrace_intern(p->t, "bench");
	p->name = shmtrace_intern(p->t, "tail");
}

/* The control's call: nothing, behind a compiler barrier, through the
 * same pointer as a traced call. */
static int bare_emit(void *ctx, uint64_t t0, uint64_t t1, uint64_t i)
{
	(void)ctx, (void)t0, (void)t1, (void)i;
	__asm__ volatile("" ::: "memory");
	return 0;
}

/* A producer asked to stop itself stops holding the ring lock, as one
 * preempted for good inside it would (g_view: the parent's, inherited);
 * if the lock cannot be had, it stops all the same, and the freeze counts
 * as one outside it (shm_holds_lock()). */
static void shm_stop_in_lock(void)
{
	bool held = shmt_lock(&g_view, 1000000000ull) == 0;

	raise(SIGSTOP);
	if (held)
		shmt_unlock(&g_view);
}

/* A producer process of role: traced into g_ring, or the control's. */
static pid_t fork_producer(const struct bench_tail_role *role, struct bench_barrier *b, int res, bool traced)
{
	pid_t pid = fork();

	if (pid < 0)
		bench_die("fork");
	if (pid == 0) {
		struct shm_producer p = { .t = NULL };
		int ret;

		/* a producer left stopped (9b) by a bench that died would
		 * hold the ring lock for good */
		prctl(PR_SET_PDEATHSIG, SIGKILL);

		if (traced) {
			shm_producer_open(&p);
			bench_tail_stop_self = shm_stop_in_lock;
		}
		ret = bench_tail_child(traced ? shm_emit : bare_emit, &p, role, b, res);
		if (traced)
			shmtrace_close(p.t);
		_exit(ret);
	}
	return pid;
}

static pid_t shm_spawn(const struct bench_tail_role *role, struct bench_barrier *b, int res)
{
	return fork_producer(role, b, res, true);
}

static pid_t bare_spawn(const struct bench_tail_role *role, struct bench_barrier *b, int res)
{
	return fork_producer(role, b, res, false);
}

/* the ring's counters when the run's timed part began */
static struct shmt_loss g_loss0;

static void shm_ready(void)
{
	wait_drained(10000);
	shmt_loss_read(&g_view, &g_loss0, false);
}

/* What the ring lost since g_loss0, once the collector has drained it. */
static void loss_since(struct shmt_loss *d)
{
	struct shmt_loss now;

	wait_drained(10000);
	shmt_loss_read(&g_view, &now, false);
	for (int k = 0; k < SHMT_LOSS_NKINDS; k++)
		*shmt_loss_at(d, &shmt_loss_kinds[k]) = shmt_loss_get(&now, &shmt_loss_kinds[k]) -
							 shmt_loss_get(&g_loss0, &shmt_loss_kinds[k]);
}

/* " lost=... dropped=... lock_dropped=... names_dropped=...": the median
 * of each over the runs; lost is the records lost, all causes */
static void print_losses(const struct shmt_loss *runs, int n)
{
	uint64_t v[BENCH_MAX_RUNS];

	for (int r = 0; r < n; r++)
		v[r] = shmt_loss_records(&runs[r]);
	printf(" lost=%.0f", bench_median_u64(v, n));
	for (int k = 0; k < SHMT_LOSS_NKINDS; k++) {
		for (int r = 0; r < n; r++)
			v[r] = shmt_loss_get(&runs[r], &shmt_loss_kinds[k]);
		printf(" %s=%.0f", shmt_loss_kinds[k].name, bench_median_u64(v, n));
	}
}

/* A stopped producer holds the ring lock: a robust mutex's futex word
 * holds its owner's tid (a producer process here is one thread). */
static bool shm_holds_lock(pid_t pid)
{
	unsigned lock = (unsigned)load_relaxed(&g_view.h->mutex.__data.__lock);

	return (lock & FUTEX_TID_MASK) == (unsigned)pid;
}

/* 9c's threads write through a handle of this process */
static struct shm_producer g_parent;

static void *shm_open_parent(void)
{
	shm_producer_open(&g_parent);
	return &g_parent;
}

static void shm_close_parent(void *ctx)
{
	shmtrace_close(((struct shm_producer *)ctx)->t);
}

static const struct bench_tail_side shm_side = {
	shm_spawn, shm_ready, shm_holds_lock, shm_emit, shm_open_parent, shm_close_parent,
};

static void bare_ready(void)
{
}

static const struct bench_tail_side bare_side = {
	bare_spawn, bare_ready, NULL, bare_emit, NULL, NULL,
};

/* The control of case name ("oversub" or "threads"): its runs with no
 * tracer, and its RESULT line, as name-bare. */
static int case_tail_bare(const char *name)
{
	struct bench_tail_env e;
	struct bench_tail tail[BENCH_MAX_RUNS];
	struct bench_tail_freezes fz = { 0, 0 };
	int runs = (int)g_runs;

	bench_tail_env(&e);
	for (int r = 0; r < runs; r++)
		bench_tail_run(name, &bare_side, &e, r, &tail[r], &fz);
	printf("RESULT %s-bare runs=%d", name, runs);
	bench_tail_print_settings(name, &bare_side, &e, &fz);
	bench_tail_print(tail, runs);
	printf("\n");
	return 0;
}

/*
 * 9d, one run: a fresh ring of mode with no collector, whose lock a
 * process holds, stopped (SIGSTOP), while this one makes count timed span
 * calls (it interned its strings before). *lost: what the ring lost.
 */
static void stopped_holder_run(uint32_t mode, uint64_t count, struct bench_tail *t, struct shmt_loss *lost)
{
	const struct bench_tail_role role = { .count = count };
	struct shm_producer p;
	char ring[128];
	pid_t holder;
	int st;

	ring_name(ring, sizeof(ring), mode == SHMTRACE_MODE_OVERWRITE ? "stopped-ow" : "stopped");
	ring_make(ring, mode);
	view_open(ring);
	g_ring = ring;
	shm_producer_open(&p);
	holder = fork();
	if (holder < 0)
		bench_die("fork");
	if (holder == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);	/* never left stopped in the lock */
		if (shmt_lock(&g_view, 1000000000ull))
			_exit(1);
		raise(SIGSTOP);
		shmt_unlock(&g_view);
		_exit(0);
	}
	if (waitpid(holder, &st, WUNTRACED) != holder || !WIFSTOPPED(st))
		bench_die("the lock holder did not stop");
	shmt_loss_read(&g_view, &g_loss0, false);
	bench_tail_loop(shm_emit, &p, &role, t);
	shmt_loss_read(&g_view, lost, false);
	for (int k = 0; k < SHMT_LOSS_NKINDS; k++)
		*shmt_loss_at(lost, &shmt_loss_kinds[k]) -= shmt_loss_get(&g_loss0, &shmt_loss_kinds[k]);
	kill(holder, SIGCONT);
	if (waitpid(holder, &st, 0) != holder || !WIFEXITED(st) || WEXITSTATUS(st))
		bench_die("the lock holder failed");
	shmtrace_close(p.t);
	shmtrace_ring_unlink(ring);
}

/* 9d: stopped_holder_run() BENCH_RUNS times in a ring of mode, and its
 * RESULT line (name: "stopped" or "stopped-ow"): the calls, what the
 * ring lost. */
static int case_stopped(const char *name, uint32_t mode)
{
	const uint64_t count = bench_env_u64("BENCH_N", 100000);
	struct bench_tail tail[BENCH_MAX_RUNS];
	struct shmt_loss lost[BENCH_MAX_RUNS];
	int runs = (int)g_runs;

	for (int r = 0; r < runs; r++)
		stopped_holder_run(mode, count, &tail[r], &lost[r]);
	printf("RESULT %s runs=%d capacity=%u blocks=%u n=%llu", name, runs, g_view.capacity, g_view.nblocks,
	       (unsigned long long)count);
	bench_tail_print(tail, runs);
	print_losses(lost, runs);
	printf("\n");
	return 0;
}

/*
 * Case name's runs, each into a ring of its own (9c: of the default
 * configuration; else the bench's) with a collector of its own, and its
 * RESULT line: the calls, what the ring lost, the last collector's
 * summary.
 */
int case_tail(const char *name)
{
	if (!strcmp(name, "stopped") || !strcmp(name, "stopped-ow"))
		return case_stopped(name, strcmp(name, "stopped") ? SHMTRACE_MODE_OVERWRITE : SHMTRACE_MODE_DISCARD);
	if (!strcmp(name, "oversub-bare") || !strcmp(name, "threads-bare"))
		return case_tail_bare(!strcmp(name, "oversub-bare") ? "oversub" : "threads");

	/* the defaults but for the mode: capacity, blocks, thread name slots */
	const struct shmtrace_ring_config defaults = { .mode = SHMTRACE_MODE_DISCARD };
	struct bench_tail_env e;
	struct bench_tail tail[BENCH_MAX_RUNS];
	struct shmt_loss lost[BENCH_MAX_RUNS];
	struct bench_tail_freezes fz = { 0, 0 };
	char ring[128], summary[1024] = "";
	struct drainer d = { .pid = 0 };
	int runs = (int)g_runs;

	bench_tail_env(&e);
	for (int r = 0; r < runs; r++) {
		ring_name(ring, sizeof(ring), name);
		if (!strcmp(name, "threads"))
			ring_make_cfg(ring, &defaults);
		else
			ring_make(ring, SHMTRACE_MODE_DISCARD);
		view_open(ring);
		drainer_start(&d, ring, name);
		g_ring = ring;
		bench_tail_run(name, &shm_side, &e, r, &tail[r], &fz);
		loss_since(&lost[r]);
		drainer_stop(&d);
		if (d.collector)
			collector_summary(&d, summary, sizeof(summary));
		drainer_drop_capture(&d);
		shmtrace_ring_unlink(ring);
	}
	printf("RESULT %s runs=%d drainer=%s capacity=%u blocks=%u", name, runs, drainer_kind(&d), g_view.capacity,
	       g_view.nblocks);
	bench_tail_print_settings(name, &shm_side, &e, &fz);
	bench_tail_print(tail, runs);
	print_losses(lost, runs);
	printf(" summary=\"%s\"\n", summary);
	return 0;
}
