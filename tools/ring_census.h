/* SPDX-License-Identifier: MIT */
/*
 * ring_census.h - what `shmtrace ls`, `rm` and `stat` tell of a ring
 * beyond its header: whether a collector drains it now.
 */
#ifndef SHMTRACE_RING_CENSUS_H
#define SHMTRACE_RING_CENSUS_H

#include <stdint.h>

struct shmt_view;

/*
 * The collector that drains the ring v maps: its pid, 0 when one drains it
 * from another pid namespace (pid unknown), or -1 when none does (the pid
 * in the header, if any, is then a collector that died or was killed).
 * The header alone cannot tell: a collector SIGKILLed leaves its pid there.
 * Reads the header: call it where v's segment may be read (shmt_guarded()).
 */
int64_t ring_collector(const struct shmt_view *v);

#endif
