/* SPDX-License-Identifier: MIT */
/*
 * hosts.h - the processes of a trace whose rings come from several hosts:
 * one process table per host, and pids of different hosts kept apart in
 * the output by a per-host stride.
 */
#ifndef SHMTRACE_HOSTS_H
#define SHMTRACE_HOSTS_H

#include <stddef.h>
#include <stdint.h>

#include "procs.h"
#include "source.h"

/* Output pid = the host's own output pid + host * HOSTS_PID_STRIDE: host
 * 0 keeps its pids, the others get pids that no process of host 0 has
 * (procs' synthetic pids stay below it up to 32 processes of one pid).
 * HOSTS_MAX strides fit in 31 bits: Perfetto's pids are int32. */
#define HOSTS_PID_STRIDE	(1u << 27)
#define HOSTS_MAX		16u

struct hosts {
	uint32_t n;
	struct procs ps[HOSTS_MAX];
	struct shmt_thread *slots[HOSTS_MAX];	/* each host's name slots */
	const struct source *src;
};

/* Builds one process table per host of src. Returns 0, -ENOMEM, or
 * -E2BIG when src has more than HOSTS_MAX hosts. */
int hosts_build(struct hosts *h, const struct source *src);
void hosts_free(struct hosts *h);

/* The output pid of a record of src's current ring (src->ring). */
uint32_t hosts_outpid(const struct hosts *h, uint32_t pid, uint64_t start_time, uint64_t ts);

/* The host index of an output pid, and the pid it has on that host. */
uint32_t hosts_host_of(const struct hosts *h, uint32_t outpid);
uint32_t hosts_local(uint32_t outpid);

/* The host's name. */
const char *hosts_name(const struct hosts *h, uint32_t host);

/* procs_name(), prefixed with "HOST: " when there are several hosts. */
void hosts_proc_name(const struct hosts *h, uint32_t outpid, char *buf, size_t len);

/* The process (or NULL) and the thread name (or NULL) of an output pid. */
const struct proc *hosts_proc(const struct hosts *h, uint32_t outpid);
const char *hosts_thread_name(const struct hosts *h, uint32_t outpid, uint32_t tid);

#endif
