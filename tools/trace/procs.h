/* SPDX-License-Identifier: MIT */
/*
 * procs.h - processes and threads as the trace shows them: names from the
 * name slots (the last slot of a thread wins), and a pid reused by another
 * process split into separate processes with synthetic pids.
 */
#ifndef SHMTRACE_PROCS_H
#define SHMTRACE_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ring_format.h"
#include "u64map.h"

/* Synthetic pids: instance k (0-based) of a reused pid is pid + k * this,
 * above any real pid (pid_max is at most 2^22); the instances past the
 * last whose pid fits in 32 bits (k 1023 for a real pid) share its pid,
 * with a warning. */
#define PROCS_PID_STRIDE 4194304u

struct proc {
	uint32_t pid;		/* real pid */
	uint32_t outpid;	/* pid in the trace */
	uint64_t start_time;	/* clock ticks after boot */
	uint64_t start_ns;	/* the same on the ring clock, approximately */
	uint32_t k;		/* 1-based instance number among processes of this pid */
	uint32_t nk;		/* instances of this pid */
	char pname[SHMT_NAME_LEN];
};

struct procs {
	struct proc *p;		/* sorted by (pid, start_time) */
	size_t n;
	struct u64map tname;	/* (outpid << 32 | tid) -> slot index + 1 */
	const struct shmt_thread *slots;
	uint64_t capped;	/* instances shown as an earlier one: their
				 * synthetic pid would not fit in 32 bits */
	unsigned said;		/* pids warned about (once is enough) */
};

/* Builds the table from name slots (kept by reference). Returns 0 or -ENOMEM. */
int procs_build(struct procs *ps, const struct shmt_thread *slots, size_t n);
void procs_free(struct procs *ps);

/* The pid a record of (pid, start_time or 0 if unknown) at ring time ts
 * appears under. */
uint32_t procs_outpid(const struct procs *ps, uint32_t pid, uint64_t start_time, uint64_t ts);

/* The process instance shown as outpid, or NULL when no slot names it. */
const struct proc *procs_find(const struct procs *ps, uint32_t outpid);

/* Writes the process's display name into buf: "name", or "name (pid N, #k)"
 * for a reused pid, or "pid N" without a slot. */
void procs_name(const struct procs *ps, uint32_t outpid, char *buf, size_t len);

/* Whether process pid runs here now with a name (its comm, which the
 * kernel cuts to 15 bytes) that begins with comm. */
bool procs_running_as(uint32_t pid, const char *comm);

/* The thread's name from its last slot, or NULL. */
const char *procs_thread_name(const struct procs *ps, uint32_t outpid, uint32_t tid);

#endif
