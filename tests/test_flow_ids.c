/* SPDX-License-Identifier: MIT */
/*
 * test_flow_ids.c - what the producer library gives the OTLP export to
 * rest on: global flow ids (a random prefix per ring, below 2^53), and W3C
 * traceparent headers turned into flow ids and recorded for the exporter.
 */
#include "helpers.h"
#include "ring_reader.h"

static void test_flow_ids_global(void **state)
{
	const char *na = test_ring_name("otlp-a"), *nb = test_ring_name("otlp-b");
	shmtrace_t *a, *b;
	struct shmt_view v;
	char err[256];
	uint64_t fa1, fa2, fb;

	(void)state;
	assert_int_equal(shmtrace_ring_create(na, NULL), 0);
	assert_int_equal(shmtrace_ring_create(nb, NULL), 0);
	assert_int_equal(shmtrace_open(na, &a), 0);
	assert_int_equal(shmtrace_open(nb, &b), 0);
	fa1 = shmtrace_flow_new(a);
	fa2 = shmtrace_flow_new(a);
	fb = shmtrace_flow_new(b);
	/* global, below 2^53, the counter in the low 32 bits */
	assert_true(fa1 & SHMT_FLOW_GLOBAL);
	assert_true(fb & SHMT_FLOW_GLOBAL);
	assert_true(fa1 < (1ull << 53) && fb < (1ull << 53));
	assert_int_equal(fa1 & 0xffffffffull, 1);
	assert_int_equal(fa2, fa1 + 1);
	assert_int_equal(fb & 0xffffffffull, 1);
	/* the prefix is the ring's: two rings' first ids differ */
	assert_int_equal(shmt_view_open(na, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	assert_int_equal((fa1 >> 32) & 0xfffff, shmt_flow_prefix(v.h->ring_id));
	shmt_view_close(&v);
	assert_true(fa1 != fb);
	shmtrace_close(a);
	shmtrace_close(b);
	shmtrace_ring_unlink(na);
	shmtrace_ring_unlink(nb);
}

static void test_traceparent(void **state)
{
	const char *tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	const char *name = test_ring_name("otlp-tp");
	struct ring_dump d;
	shmtrace_t *t;
	uint64_t id;
	uint32_t s;

	(void)state;
	/* the trace id's low 52 bits, marked global; no handle needed */
	id = shmtrace_flow_from_traceparent(NULL, tp);
	assert_int_equal(id, SHMT_FLOW_GLOBAL | 0xa3ce929d0e0e4736ull % (1ull << 52));
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"), id);
	/* a later version may append fields */
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz"), id);
	/* invalid ones: 0 */
	assert_int_equal(shmtrace_flow_from_traceparent(NULL, NULL), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL, ""), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "00-00000000000000000000000000000000-00f067aa0ba902b7-01"), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x"), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"), 0);
	/* with a handle: the header is interned, for the exporter */
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(t, tp), id);
	s = shmtrace_intern(t, "traceparent 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
	assert_true(s != 0);
	assert_int_equal(shmtrace_flush(t), 0);
	ring_dump(name, &d);
	assert_int_equal(d.n, 1);
	assert_int_equal(d.recs[0].flow, id);
	assert_int_equal(d.recs[0].name, s);
	assert_int_equal(SHMT_COMMIT_KIND(d.recs[0].commit), SHMTRACE_KIND_INSTANT);
	free(d.recs);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flow_ids_global),
		cmocka_unit_test(test_traceparent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
