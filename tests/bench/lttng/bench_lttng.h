/* SPDX-License-Identifier: MIT */
/*
 * bench_lttng.h - what bench_lttng.c shares with bench_lttng_tail.c (both
 * built by tests/bench/run.sh): the run's settings, starting a producer
 * process, the session's checkpoint, and the tail cases' entry points.
 */
#ifndef SHMTRACE_BENCH_LTTNG_H
#define SHMTRACE_BENCH_LTTNG_H

#include <stdint.h>
#include <sys/types.h>

extern uint64_t g_runs;		/* BENCH_RUNS: measured runs */
extern char *g_self;		/* this program, for the producers it starts */

/* Starts this program with argv (argv[0] is set here): a producer that
 * registers with the session daemon, which a forked one would not. */
pid_t spawn_argv(char *argv[]);

/* Stops the session (its consumer writes out what was traced), reads the
 * events its channels discarded so far, and starts it again; -1 without
 * a session (BENCH_LT_SESSION). */
int64_t lt_checkpoint(void);

/* bench_lttng_tail.c: the producers' tail under stress, name "oversub",
 * "frozen" or "threads"; a producer process of theirs ("tailchild") */
int lt_tail_case(const char *name);
int lt_tail_child(int argc, char **argv);

#endif
