/* SPDX-License-Identifier: MIT */
/*
 * traceparent.c - flow ids: new ones, unique across the ring's processes
 * and across rings, and joining a trace begun by another tracer (a W3C
 * traceparent header turned into a global flow id, its trace id recorded
 * so that the OTLP export gives the flow that trace id).
 */
#include <stdio.h>
#include <string.h>

#include "producer.h"

SHMT_API uint64_t shmtrace_flow_new(shmtrace_t *t)
{
	struct shmt_att *a;
	uint64_t id;

	if (!t || !(a = shmt_attach_current(t)))
		return 0;
	/* a shared counter: unique across every process of the ring; low
	 * bits of 0 (no flow) are passed over once, and a peer that keeps
	 * the counter there gets an id with them set instead of a loop */
	id = __atomic_add_fetch(&a->v.h->flow_seq.v, 1, __ATOMIC_RELAXED);
	if (!(id & 0xffffffffull))
		id = __atomic_add_fetch(&a->v.h->flow_seq.v, 1, __ATOMIC_RELAXED);
	if (!(id & 0xffffffffull))
		id |= 1;
	if (a->v.minor < 1 || !a->v.h->ring_id)
		/* no ring_id to tell this ring from others: a ring-local id */
		return id & (SHMT_FLOW_MASK >> 1);
	/* unique across rings (hosts) too: the ring's random prefix above
	 * a 32-bit counter, marked global (ring_format.h) */
	return SHMT_FLOW_GLOBAL | shmt_flow_prefix(a->v.h->ring_id) << 32 | (id & 0xffffffffull);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Parses n lowercase hex digits; returns false on anything else, or when
 * they are all zero (an invalid id in W3C Trace Context). */
static bool hex_field(const char *s, size_t n, uint64_t *hi, uint64_t *lo)
{
	bool nonzero = false;

	*hi = *lo = 0;
	for (size_t i = 0; i < n; i++) {
		int v = hexval(s[i]);

		if (v < 0)
			return false;
		nonzero |= v != 0;
		*hi = *hi << 4 | *lo >> 60;
		*lo = *lo << 4 | (uint64_t)v;
	}
	return nonzero;
}

/*
 * version "-" trace-id (32 hex) "-" parent-id (16 hex) "-" flags (2 hex),
 * lowercase; a later version may append "-..." which is ignored, version
 * ff is invalid (W3C Trace Context, section 3.2).
 */
static bool parse(const char *w3c, uint64_t *thi, uint64_t *tlo)
{
	size_t len = strnlen(w3c, 512);
	uint64_t phi, plo;
	int ver;

	if (len < 55 || w3c[2] != '-' || w3c[35] != '-' || w3c[52] != '-')
		return false;
	if (hexval(w3c[0]) < 0 || hexval(w3c[1]) < 0 || hexval(w3c[53]) < 0 ||
	    hexval(w3c[54]) < 0)
		return false;
	ver = hexval(w3c[0]) << 4 | hexval(w3c[1]);
	if (ver == 0xff || (ver == 0 && len != 55) || (len > 55 && w3c[55] != '-'))
		return false;
	return hex_field(w3c + 3, 32, thi, tlo) && hex_field(w3c + 36, 16, &phi, &plo);
}

SHMT_API uint64_t shmtrace_flow_from_traceparent(shmtrace_t *t, const char *w3c)
{
	uint64_t hi, lo, id;
	char name[80];

	if (!w3c || !parse(w3c, &hi, &lo))
		return 0;
	/* the trace id's low 52 bits (the random part of most trace ids),
	 * the same on every host that sees this trace */
	id = lo & (SHMT_FLOW_GLOBAL - 1);
	if (!id)
		id = (hi ^ lo >> 52) & (SHMT_FLOW_GLOBAL - 1);
	if (!id)
		id = 1;
	id |= SHMT_FLOW_GLOBAL;
	if (!t)
		t = __atomic_load_n(&shmtrace_default, __ATOMIC_ACQUIRE);
	if (t) {
		/* "traceparent" and the header as received (first 55 bytes),
		 * on an instant of the flow: the exporter reads the trace id
		 * and the remote parent span from it */
		snprintf(name, sizeof(name), "traceparent %.55s", w3c);
		shmtrace_instant(t, shmtrace_intern(t, "shmtrace"), shmtrace_intern(t, name), id);
	}
	return id;
}
