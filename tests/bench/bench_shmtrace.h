/* SPDX-License-Identifier: MIT */
/*
 * bench_shmtrace.h - what bench_shmtrace.c shares with the files of cases
 * linked into it (the Makefile's BENCH_CASES: bench_tail.c): the run's
 * settings, rings, the drainer beside the producers, and the cases' entry
 * points, which bench_shmtrace.c's main() dispatches to.
 */
#ifndef SHMTRACE_BENCH_SHMTRACE_H
#define SHMTRACE_BENCH_SHMTRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "ring_reader.h"
#include "shmtrace.h"

extern uint64_t g_runs;		/* BENCH_RUNS: measured runs, 1 to BENCH_MAX_RUNS */
extern struct shmt_view g_view;	/* the ring of the last view_open() */

/* rings: BENCH_PREFIX + what; made anew (the bench's capacity, or cfg) */
void ring_name(char *buf, size_t len, const char *what);
void ring_make(const char *name, uint32_t mode);
void ring_make_cfg(const char *name, const struct shmtrace_ring_config *cfg);
shmtrace_t *ring_open(const char *name);
void view_open(const char *name);
/* waits up to ms for the drainer to consume everything published */
bool wait_drained(unsigned ms);

/* the collector (BENCH_COLLECTOR), or a reader process when none is built */
struct drainer {
	pid_t pid;
	bool collector;
	char out[512];		/* capture file */
	char log[512];		/* collector's stderr */
	uint64_t spawned_ns, ready_ns;
	struct rusage ru;
	int status;
};

void drainer_start(struct drainer *d, const char *name, const char *tag);
int drainer_stop(struct drainer *d);
void drainer_drop_capture(const struct drainer *d);
const char *drainer_kind(const struct drainer *d);
/* the collector's one-line summary, quotes made ' */
void collector_summary(const struct drainer *d, char *buf, size_t len);

/* bench_tail.c: the producers' tail under stress, name "oversub",
 * "frozen" or "threads"; "oversub-bare" or "threads-bare" for their
 * loops with no tracer; "stopped" or "stopped-ow", calls beside a lock
 * holder stopped in it */
int case_tail(const char *name);

#endif
