/* SPDX-License-Identifier: MIT */
/*
 * ring_census.h - what `shmtrace ls`, `rm` and `stat` tell of a ring
 * beyond its header: its producer processes, and whether a collector
 * drains it now.
 */
#ifndef SHMTRACE_RING_CENSUS_H
#define SHMTRACE_RING_CENSUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct shmt_view;
struct shmt_thread;

/* A producer process, as its thread slots tell. */
struct ring_proc {
	uint64_t start_time;
	uint32_t pid;
	uint32_t flags;		/* SHMT_THREAD_* of all its slots, or-ed */
	uint32_t slot;		/* its first thread slot */
};

/*
 * The processes of v's thread slots, each once (pid and start time: a
 * process is counted, and listed, once), in the order of their first
 * slot. Copies each slot once into private memory and sorts there:
 * O(n log n) in slots, which a ring may have 2^20 and more of. *out is
 * set (to free) before any slot is read, so the caller frees it even when
 * the pass fails; *n is how many. Runs where v's segment may be read
 * (shmt_guarded()). Returns 0 or -ENOMEM.
 */
int ring_processes(const struct shmt_view *v, struct ring_proc **out, size_t *n);

/* Whether process p still runs. */
bool ring_process_alive(const struct ring_proc *p);

/*
 * The collector that drains the ring v maps: its pid, or -1 when none
 * does. recorded is the pid the header names (shmt_ring_collector_pid(),
 * read by the caller where the segment may be read): the header alone
 * cannot tell, a collector SIGKILLed leaves its pid there, and the lock
 * alone cannot either, any reader may take one; a collector counts only
 * where the two agree. Reads /proc only, never the segment.
 */
int64_t ring_collector(const struct shmt_view *v, uint64_t recorded);

#endif
