/* SPDX-License-Identifier: MIT */
/*
 * ring_census.h - what `shmtrace ls`, `rm` and `stat` tell of a ring
 * beyond its header: its producer processes, and whether a collector
 * drains it now.
 */
#ifndef SHMTRACE_RING_CENSUS_H
#define SHMTRACE_RING_CENSUS_H

#include <stdbool.h>
#include <stdint.h>

struct shmt_view;
struct shmt_thread;

/*
 * Reads thread slot i of v into *t; true when it is the first slot of its
 * process (pid and start time): a process is counted, and listed, once.
 * With all, t->flags has the flags of every slot of the process (how it
 * came to the ring). Runs where v's segment may be read (shmt_guarded()).
 */
bool ring_process_at(const struct shmt_view *v, uint32_t i, struct shmt_thread *t, bool all);

/* Whether the process of t (from a thread slot) still runs. */
bool ring_process_alive(const struct shmt_thread *t);

/*
 * The collector that drains the ring v maps: its pid, 0 when one drains it
 * from another pid namespace (pid unknown), or -1 when none does (the pid
 * in the header, if any, is then a collector that died or was killed).
 * The header alone cannot tell: a collector SIGKILLed leaves its pid there.
 * Reads the header: call it where v's segment may be read (shmt_guarded()).
 */
int64_t ring_collector(const struct shmt_view *v);

#endif
