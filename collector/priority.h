/* SPDX-License-Identifier: MIT */
/*
 * priority.h - the collector's nice value, following its backlog: the
 * producers' own while the drain keeps up, a higher priority only while it
 * falls behind (docs/DESIGN.md, "The collector's priority").
 *
 * A collector at a higher priority than the producers keeps up where many
 * producers share few cores, but each time it wakes, or runs on, it takes
 * the CPU from a producer, often inside a span call, which then waits the
 * drain's whole slice. So it starts raised, is let down once the backlog
 * has stayed under PRIO_CALM_BELOW for a while, and raised again when what
 * waits for it passes PRIO_RAISE_AT, short of the producers dropping; a
 * collector let down too early (it fell behind again within the calm it
 * had waited for) waits twice as long before the next time, and one that
 * stayed down four times that long half as long again.
 */
#ifndef SHMTRACE_COLLECTOR_PRIORITY_H
#define SHMTRACE_COLLECTOR_PRIORITY_H

#include <stdbool.h>
#include <stdint.h>

/* A backlog is in 1024ths of what producers can stage before they drop. */
#define PRIO_BACKLOG_FULL	1024u
#define PRIO_RAISE_AT		(PRIO_BACKLOG_FULL / 2)
#define PRIO_CALM_BELOW		(PRIO_BACKLOG_FULL / 4)
/* how long the backlog stays calm before the priority is let down: at
 * first, and at most after lettings-down undone soon after */
#define PRIO_CALM_FIRST_NS	(1000ull * 1000 * 1000)
#define PRIO_CALM_MOST_NS	(64ull * 1000 * 1000 * 1000)

struct prio {
	bool adaptive;		/* false: the nice value stays as set */
	bool governed;		/* adaptive at the start (for the summary) */
	int low, high;		/* the nice values between which it moves */
	bool raised;
	uint64_t calm_since;	/* raised and calm since (0: not calm) */
	uint64_t calm_ns;	/* calm this long before letting down */
	uint64_t raised_at, lowered_at;
	uint64_t raised_ns;	/* time raised before raised_at */
};

/* A governor moving the calling thread between nice values low (its
 * value now) and high, raised now to high; or, with adaptive false or
 * where the system refuses high, one that leaves it. Its clock starts at
 * prio_count_from(). */
void prio_init(struct prio *p, bool adaptive, int low, int high);

/* Sets the calling thread's priority for backlog (0 to PRIO_BACKLOG_FULL)
 * at time now_ns. Where the system refuses the higher priority, the
 * governor stops moving it (silently: the default asks for nothing). */
void prio_update(struct prio *p, uint32_t backlog, uint64_t now_ns);

/* Starts the governor's clock at now_ns (a session's start, once set
 * up): the time at the higher priority counts from there. */
void prio_count_from(struct prio *p, uint64_t now_ns);

/* How long the thread was at the higher priority, up to now_ns. */
uint64_t prio_raised_ns(const struct prio *p, uint64_t now_ns);

#endif /* SHMTRACE_COLLECTOR_PRIORITY_H */
