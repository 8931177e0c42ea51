/* SPDX-License-Identifier: MIT */
/*
 * otlp_run.h - what the tests of the OTLP export share: a ring of many
 * spans, enough for a few dozen requests, and a span found in the export.
 */
#ifndef SHMTRACE_TEST_OTLP_RUN_H
#define SHMTRACE_TEST_OTLP_RUN_H

#include "helpers.h"

/* Makes ring anew with SPANS spans, one in ten in flow 5: about 25
 * requests of 64 KiB. */
#define SPANS 3000
static inline void ring_of_spans(const char *ring)
{
	uint32_t cat[2], name[3];
	uint64_t ts;
	shmtrace_t *t;

	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	cat[0] = shmtrace_intern(t, "c0");
	cat[1] = shmtrace_intern(t, "c1");
	for (int i = 0; i < 3; i++)
		name[i] = shmtrace_intern(t, i == 0 ? "n0" : i == 1 ? "n1" : "n2");
	ts = shmtrace_now();
	for (int i = 0; i < SPANS; i++, ts += 1000)
		assert_int_equal(shmtrace_span(t, cat[i % 2], name[i % 3], ts, ts + 500,
					       i % 10 == 0 ? 5 : 0), 0);
	shmtrace_close(t);
}

/* The text of the OTLP span named name (exactly one; the caller frees it). */
static inline char *otlp_span_text(const char *jsonl, const char *name)
{
	char key[96];
	const char *p, *q, *start;

	snprintf(key, sizeof(key), "\"name\":\"%s\",\"kind\":", name);
	p = strstr(jsonl, key);
	assert_non_null(p);
	assert_null(strstr(p + 1, key));
	start = p;
	while (start > jsonl && strncmp(start, "{\"traceId\"", 10))
		start--;
	/* its end: its status, after its links (which hold trace ids too) */
	q = strstr(p, "\"status\":{");
	assert_non_null(q);
	q = strstr(q, "}}");
	assert_non_null(q);
	return strndup(start, (size_t)(q + 2 - start));
}

#endif
