/* SPDX-License-Identifier: MIT */
/*
 * priority.c - the collector's nice value, following its backlog
 * (priority.h).
 */
#include <sys/resource.h>

#include "priority.h"

/* On Linux a nice value is a thread's: PRIO_PROCESS with 0 is the caller. */
static bool set_to(int nice)
{
	return setpriority(PRIO_PROCESS, 0, nice) == 0;
}

void prio_init(struct prio *p, bool adaptive, int low, int high)
{
	*p = (struct prio){ .low = low, .high = high, .calm_ns = PRIO_CALM_FIRST_NS };
	/* a session starts raised: the backlog a collector starts to is
	 * unknown, and a ring's worth comes in tens of milliseconds */
	if (adaptive && set_to(high))
		p->adaptive = p->governed = p->raised = true;
}

void prio_update(struct prio *p, uint32_t backlog, uint64_t now_ns)
{
	if (!p->adaptive)
		return;
	if (!p->raised) {
		if (backlog < PRIO_RAISE_AT)
			return;
		if (!set_to(p->high)) {
			p->adaptive = false;	/* no longer allowed: stays down */
			return;
		}
		/* let down too early: the next calm must last twice as long;
		 * long enough down: half as long again */
		if (now_ns - p->lowered_at < p->calm_ns)
			p->calm_ns = p->calm_ns * 2 < PRIO_CALM_MOST_NS ? p->calm_ns * 2 : PRIO_CALM_MOST_NS;
		else if (now_ns - p->lowered_at >= 4 * p->calm_ns && p->calm_ns / 2 >= PRIO_CALM_FIRST_NS)
			p->calm_ns /= 2;
		p->raised = true;
		p->raised_at = now_ns;
		p->calm_since = 0;
		return;
	}
	if (backlog >= PRIO_CALM_BELOW) {
		p->calm_since = 0;
		return;
	}
	if (!p->calm_since) {
		p->calm_since = now_ns;
		return;
	}
	if (now_ns - p->calm_since < p->calm_ns)
		return;
	/* a higher nice value is always allowed */
	set_to(p->low);
	p->raised = false;
	p->lowered_at = now_ns;
	p->raised_ns += now_ns - p->raised_at;
}

void prio_count_from(struct prio *p, uint64_t now_ns)
{
	p->raised_ns = 0;
	if (p->raised)
		p->raised_at = now_ns;
}

uint64_t prio_raised_ns(const struct prio *p, uint64_t now_ns)
{
	return p->raised_ns + (p->raised ? now_ns - p->raised_at : 0);
}
