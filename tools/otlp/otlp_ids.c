/* SPDX-License-Identifier: MIT */
/*
 * otlp_ids.c - the OTLP export's trace and span ids: hashed from the
 * capture's identity so that they differ between captures and are the
 * same on every export of one, a flow's from its flow id (or from the W3C
 * traceparent recorded at its start, so that it joins the caller's trace).
 */
#include <string.h>

#include "otlp_int.h"

void otlp_trace_id(uint64_t key, uint64_t *hi, uint64_t *lo)
{
	*hi = hash_splitmix64(key ^ 0x5348545241434531ull);
	*lo = hash_splitmix64(key ^ 0x5348545241434532ull);
	if (!*hi && !*lo)
		*lo = 1;
}

uint64_t otlp_span_id(const struct otlp *o, uint64_t seq)
{
	uint64_t id = hash_splitmix64(o->salt ^ hash_splitmix64(seq));

	return id ? id : 1;
}

/* A flow's trace id when no traceparent names one: a global flow id
 * alone, so that every host's export of the flow agrees; a ring-local
 * one with its ring's identity. */
void otlp_flow_trace_id(struct otlp *o, const struct flow_ev *fe, uint64_t *hi, uint64_t *lo)
{
	const char *name;
	uint64_t ring_id = 0, run_id = 0;

	if (fe->flow & SHMT_FLOW_GLOBAL) {
		otlp_trace_id(fe->flow, hi, lo);
		return;
	}
	source_ring_info(o->s, fe->ring, &name, &ring_id, &run_id);
	otlp_trace_id(hash_splitmix64(ring_id ? ring_id : run_id) ^ fe->flow, hi, lo);
}

static int hexdig(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool parse_hex(const char *s, size_t n, uint64_t *v)
{
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		int d = hexdig(s[i]);

		if (d < 0)
			return false;
		*v = *v << 4 | (uint64_t)d;
	}
	return true;
}

/* "traceparent VV-TRACE-PARENT-FF" as shmtrace_flow_from_traceparent()
 * records it: the trace id and the remote parent span. */
static bool parse_traceparent(const char *s, size_t len, uint64_t *hi, uint64_t *lo,
			      uint64_t *parent)
{
	if (len < 12 + 55 || memcmp(s, "traceparent ", 12))
		return false;
	s += 12;
	if (s[2] != '-' || s[35] != '-' || s[52] != '-')
		return false;
	return parse_hex(s + 3, 16, hi) && parse_hex(s + 19, 16, lo) &&
	       parse_hex(s + 36, 16, parent) && (*hi || *lo);
}

/* Whether fe is the instant (category "shmtrace") that records the
 * traceparent its flow came with; if so, its trace id and parent. */
bool otlp_is_traceparent(struct otlp *o, const struct flow_ev *fe, uint64_t *hi, uint64_t *lo,
			 uint64_t *parent)
{
	size_t clen, nlen;
	const char *cat, *name;

	if (fe->kind != SHMTRACE_KIND_INSTANT)
		return false;
	cat = source_string(o->s, fe->cat, &clen);
	if (clen != 8 || memcmp(cat, "shmtrace", 8))
		return false;
	name = source_string(o->s, fe->name, &nlen);
	return parse_traceparent(name, nlen, hi, lo, parent);
}
