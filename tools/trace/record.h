/* SPDX-License-Identifier: MIT */
/*
 * record.h - a trace record as the tools read it.
 */
#ifndef SHMTRACE_RECORD_H
#define SHMTRACE_RECORD_H

#include <stdbool.h>
#include <stdint.h>

#include "ring_format.h"

/*
 * A record's kind (SHMTRACE_KIND_*). `commit` means two things: in shared
 * memory the word (seq << 8) | kind that publishes a slot, after a reader
 * (the ring reader, the capture decoder, hence every record a source hands
 * to a source_record_fn) the kind alone. The tools never read commit
 * themselves, only this; it masks, so it is right for either.
 */
static inline uint32_t shmt_record_kind(const struct shmt_record *r)
{
	return SHMT_COMMIT_KIND(r->commit);
}

/*
 * Whether r is a step of a flow, as the exports draw them: a span, an
 * instant or an open span with a flow id (the flow field's low 53 bits:
 * a role alone is no flow). A counter's flow id is not drawn, and an
 * argument record's flow field is its type and index.
 */
static inline bool shmt_record_in_flow(const struct shmt_record *r)
{
	uint32_t k = shmt_record_kind(r);

	return shmtrace_flow_id(r->flow) && (k == SHMTRACE_KIND_SPAN || k == SHMTRACE_KIND_INSTANT ||
					     k == SHMTRACE_KIND_OPEN);
}

/* The end of what lasts dur from ts: a forged ts + dur past 2^64 ends at
 * the end of time, never before ts. */
static inline uint64_t shmt_time_end(uint64_t ts, uint64_t dur)
{
	return ts + dur < ts ? UINT64_MAX : ts + dur;
}

/* Whether r belongs to the event before it (an argument record, or the
 * text of one) instead of being an event: every reader of events skips
 * these, the exports attach them (args.h). */
static inline bool shmt_record_attached(const struct shmt_record *r)
{
	return shmt_kind_attached(shmt_record_kind(r));
}

/* Where r ends: a span's saturated end, any other record's time. */
static inline uint64_t shmt_record_end(const struct shmt_record *r)
{
	return shmt_time_end(r->ts, shmt_record_kind(r) == SHMTRACE_KIND_SPAN ? r->dur : 0);
}

#endif
