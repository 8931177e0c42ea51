/* SPDX-License-Identifier: MIT */
/*
 * bench_lttng_tail.c - the LTTng-UST side of case 9 of `make bench`, the
 * producers' tail under stress: the runs of tests/bench/bench_tail.c
 * (tests/bench/bench_tail.h, the same settings), with the tracepoint in
 * place of shmtrace_span(), producer processes exec'd (so that each
 * registers with the session daemon), and the events the session's
 * channels discarded over each run's timed part in place of the ring's
 * loss counters. Built by tests/bench/run.sh with bench_lttng.c.
 *
 *   bench_lttng oversub|frozen|threads
 *   bench_lttng tailchild READY GO RES RATE RUN_NS COUNT WARM IDX   (a producer)
 */
#include "../bench_tail.h"
#include "bench_lttng.h"
#include "bench_tp.h"

static int lt_emit(void *ctx, uint64_t t0, uint64_t t1, uint64_t i)
{
	(void)ctx;
	(void)i;
	tracepoint(shmtbench, span, t0, t1 - t0, 0, 2, 1, 1);
	return 0;
}

#define CHILD_ARGS 8	/* after "tailchild" */

static pid_t lt_spawn(const struct bench_tail_role *role, struct bench_barrier *b, int res)
{
	uint64_t v[CHILD_ARGS] = {
		(uint64_t)b->ready[1], (uint64_t)b->go[0], (uint64_t)res, role->rate,
		role->run_ns, role->count, role->warm, (uint64_t)role->idx,
	};
	char a[CHILD_ARGS][24];
	char *argv[CHILD_ARGS + 3] = { NULL, (char *)"tailchild" };

	for (int i = 0; i < CHILD_ARGS; i++) {
		snprintf(a[i], sizeof(a[i]), "%llu", (unsigned long long)v[i]);
		argv[2 + i] = a[i];
	}
	return spawn_argv(argv);
}

int lt_tail_child(int argc, char **argv)
{
	struct bench_barrier b = { { -1, -1 }, { -1, -1 } };
	struct bench_tail_role role;
	uint64_t v[CHILD_ARGS];

	if (argc != CHILD_ARGS + 2)
		return 2;
	for (int i = 0; i < CHILD_ARGS; i++)
		v[i] = strtoull(argv[2 + i], NULL, 10);
	b.ready[1] = (int)v[0];
	b.go[0] = (int)v[1];
	role = (struct bench_tail_role){ .rate = v[3], .run_ns = v[4], .count = v[5], .warm = v[6],
					 .idx = (int)v[7] };
	return bench_tail_child(lt_emit, NULL, &role, &b, (int)v[2]);
}

/* discarded events when the run's timed part began (-1: no session) */
static int64_t g_disc0;

static void lt_ready(void)
{
	g_disc0 = lt_checkpoint();
}

/* the events discarded since lt_ready(), or -1 without a session */
static int64_t lt_lost(void)
{
	int64_t d = lt_checkpoint();

	return d < 0 || g_disc0 < 0 ? -1 : d - g_disc0;
}

/* " lost=N" (the median over the runs), unless there was no session */
static void print_lost(const int64_t *lost, int n)
{
	uint64_t v[BENCH_MAX_RUNS];

	for (int r = 0; r < n; r++) {
		if (lost[r] < 0)
			return;
		v[r] = (uint64_t)lost[r];
	}
	printf(" lost=%.0f", bench_median_u64(v, n));
}

static const struct bench_tail_side lt_side = { lt_spawn, lt_ready, NULL, lt_emit, NULL, NULL };

/* Case name's runs and its RESULT line: the calls, the events discarded. */
int lt_tail_case(const char *name)
{
	struct bench_tail_env e;
	struct bench_tail tail[BENCH_MAX_RUNS];
	struct bench_tail_freezes fz = { 0, 0 };
	int64_t lost[BENCH_MAX_RUNS];
	int runs = (int)g_runs;

	bench_tail_env(&e);
	for (int r = 0; r < runs; r++) {
		bench_tail_run(name, &lt_side, &e, r, &tail[r], &fz);
		lost[r] = lt_lost();
	}
	printf("RESULT lttng_%s runs=%d", name, runs);
	bench_tail_print_settings(name, &lt_side, &e, &fz);
	bench_tail_print(tail, runs);
	print_lost(lost, runs);
	printf("\n");
	return 0;
}
