/* SPDX-License-Identifier: MIT */
/*
 * mp_records.h - what the multi-process ring tests share: records whose
 * fields derive from one number, so that a torn or mixed one shows.
 */
#ifndef SHMTRACE_TEST_MP_RECORDS_H
#define SHMTRACE_TEST_MP_RECORDS_H

#include "helpers.h"

/* A record's fields are derived from its (pid, i) so a reader can tell a
 * torn or mixed record from a whole one. */
static inline void fill(uint64_t i, uint64_t *ts, uint64_t *dur, uint64_t *flow)
{
	*ts = i;
	*dur = i ^ 0x5555555555ull;
	*flow = i * 3 + 1;
}

static inline bool whole(const struct shmt_record *r)
{
	uint64_t ts, dur, flow;

	fill(r->ts, &ts, &dur, &flow);
	return r->dur == dur && r->flow == flow && r->pid == r->tid && r->name == 1 && r->cat == 2;
}

#endif
