/* SPDX-License-Identifier: MIT */
/*
 * bench_tp.h - the LTTng-UST tracepoint provider of the comparison: one event
 * with the payload of a shmtrace record (ts, dur, flow, name, cat, kind).
 * Built by tests/bench/run.sh, never by the Makefile.
 */
#undef TRACEPOINT_PROVIDER
#define TRACEPOINT_PROVIDER shmtbench

#undef TRACEPOINT_INCLUDE
#define TRACEPOINT_INCLUDE "./bench_tp.h"

#if !defined(SHMTBENCH_TP_H) || defined(TRACEPOINT_HEADER_MULTI_READ)
#define SHMTBENCH_TP_H

#include <stdint.h>
#include <lttng/tracepoint.h>

TRACEPOINT_EVENT(
	shmtbench,
	span,
	TP_ARGS(uint64_t, ts, uint64_t, dur, uint64_t, flow, uint32_t, name, uint32_t, cat, uint32_t, kind),
	TP_FIELDS(
		ctf_integer(uint64_t, ts, ts)
		ctf_integer(uint64_t, dur, dur)
		ctf_integer(uint64_t, flow, flow)
		ctf_integer(uint32_t, name, name)
		ctf_integer(uint32_t, cat, cat)
		ctf_integer(uint32_t, kind, kind)
	)
)

#endif

#include <lttng/tracepoint-event.h>
