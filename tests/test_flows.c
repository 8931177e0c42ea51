/* SPDX-License-Identifier: MIT */
/*
 * test_flows.c - assembling flow records into s/t/f chains: order, ids,
 * which records bind, and the steps' roles (placed by their end, ending
 * their flow); and moving flow slices off the starts of other events of
 * their thread (bind.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bind.h"
#include "flows.h"

struct out {
	char ph;
	uint64_t id;
	struct flow_ev e;
};

static struct out got[256];
static size_t ngot;

static size_t nsingle;

static int collect(void *ctx, char ph, uint64_t id, const struct flow_ev *e,
		   const struct flow_ev *group, size_t n)
{
	(void)ctx;
	/* the group is the whole flow, in order, and holds e */
	assert_true(e >= group && e < group + n);
	for (size_t i = 1; i < n; i++)
		assert_true(flow_ev_at(&group[i - 1]) <= flow_ev_at(&group[i]));
	if (!ph) {
		/* a one-record flow: handed over, drawn as nothing */
		assert_int_equal(n, 1);
		assert_int_equal(id, 0);
		nsingle++;
		return 0;
	}
	assert_true(n >= 2);
	assert_true(ngot < 256);
	got[ngot++] = (struct out){ ph, id, *e };
	return 0;
}

static void add(struct flows *f, uint64_t flow, uint64_t ts, uint32_t pid, uint32_t tid)
{
	struct flow_ev e = { .flow = flow, .ts = ts, .pid = pid, .tid = tid, .cat = 7, .name = pid };

	assert_int_equal(flows_add(f, &e), 0);
}

static uint64_t run(struct flows *f)
{
	uint64_t n = 99;

	ngot = nsingle = 0;
	assert_int_equal(flows_assemble(f, collect, NULL, &n), 0);
	return n;
}

static void expect(size_t i, char ph, uint64_t id, uint64_t ts, uint32_t pid)
{
	assert_true(i < ngot);
	assert_int_equal(got[i].ph, ph);
	assert_int_equal(got[i].id, id);
	assert_int_equal(got[i].e.ts, ts);
	assert_int_equal(got[i].e.pid, pid);
	assert_int_equal(got[i].e.cat, 7);
}

static void test_one_hop(void **state)
{
	struct flows f;

	(void)state;
	flows_init(&f);
	/* arrival order is not time order: the consumer's record came first */
	add(&f, 42, 2000, 20, 21);
	add(&f, 42, 1000, 10, 11);
	assert_int_equal(run(&f), 1);
	assert_int_equal(ngot, 2);
	expect(0, 's', 1, 1000, 10);
	expect(1, 'f', 1, 2000, 20);
	assert_int_equal(got[1].e.tid, 21);
	flows_free(&f);
}

static void test_many_hops_three_processes(void **state)
{
	struct flows f;

	(void)state;
	flows_init(&f);
	for (int i = 0; i < 10; i++)
		add(&f, 5, 100 + (uint64_t)i * 10, 1 + (uint32_t)i % 3, 1);
	assert_int_equal(run(&f), 1);
	assert_int_equal(ngot, 10);
	expect(0, 's', 1, 100, 1);
	for (int i = 1; i < 9; i++)
		expect((size_t)i, 't', 1, 100 + (uint64_t)i * 10, 1 + (uint32_t)i % 3);
	expect(9, 'f', 1, 190, 1);
	flows_free(&f);
}

static void test_interleaved_flows_and_ids(void **state)
{
	struct flows f;
	uint64_t seen[4] = { 0 };

	(void)state;
	flows_init(&f);
	/* producer ids beyond 2^53 and in no particular order */
	add(&f, UINT64_MAX, 10, 1, 1);
	add(&f, 3, 11, 2, 2);
	add(&f, 1ull << 60, 12, 3, 3);
	add(&f, 3, 13, 1, 1);
	add(&f, UINT64_MAX, 14, 2, 2);
	add(&f, 1ull << 60, 15, 1, 1);
	add(&f, UINT64_MAX, 16, 3, 3);
	assert_int_equal(run(&f), 3);
	assert_int_equal(ngot, 7);
	/* flows in the order of their keys (ring-local ids, then global
	 * ones), each id one more than its first record's arrival */
	expect(0, 's', 2, 11, 2);
	expect(1, 'f', 2, 13, 1);
	expect(2, 's', 3, 12, 3);
	expect(3, 'f', 3, 15, 1);
	expect(4, 's', 1, 10, 1);
	expect(5, 't', 1, 14, 2);
	expect(6, 'f', 1, 16, 3);
	for (size_t i = 0; i < ngot; i++) {
		assert_true(got[i].id >= 1 && got[i].id <= 3);
		assert_true(got[i].id < (1ull << 53));
		seen[got[i].id]++;
	}
	assert_int_equal(seen[1], 3);
	assert_int_equal(seen[2], 2);
	assert_int_equal(seen[3], 2);
	flows_free(&f);
}

static void test_single_record_draws_nothing(void **state)
{
	struct flows f;

	(void)state;
	flows_init(&f);
	add(&f, 9, 10, 1, 1);
	add(&f, 8, 10, 1, 1);
	add(&f, 8, 20, 2, 2);
	assert_int_equal(run(&f), 1);
	assert_int_equal(ngot, 2);
	/* flow 9 drew nothing; flow 8's id is its first record's arrival + 1 */
	assert_int_equal(nsingle, 1);
	expect(0, 's', 2, 10, 1);
	expect(1, 'f', 2, 20, 2);
	flows_free(&f);
	flows_init(&f);
	add(&f, 9, 10, 1, 1);
	assert_int_equal(run(&f), 0);
	assert_int_equal(ngot, 0);
	flows_free(&f);
	flows_init(&f);
	assert_int_equal(run(&f), 0);
	flows_free(&f);
}

static void test_same_thread_spans(void **state)
{
	struct flows f;

	(void)state;
	flows_init(&f);
	add(&f, 4, 300, 1, 1);
	add(&f, 4, 100, 1, 1);
	add(&f, 4, 200, 1, 1);
	assert_int_equal(run(&f), 1);
	expect(0, 's', 1, 100, 1);
	expect(1, 't', 1, 200, 1);
	expect(2, 'f', 1, 300, 1);
	flows_free(&f);
}

static void test_equal_timestamps(void **state)
{
	struct flows f;

	(void)state;
	flows_init(&f);
	/* ties break by pid, then tid, then arrival: deterministic output */
	add(&f, 6, 50, 3, 1);
	add(&f, 6, 50, 2, 9);
	add(&f, 6, 50, 2, 4);
	add(&f, 6, 50, 2, 4);
	assert_int_equal(run(&f), 1);
	assert_int_equal(ngot, 4);
	expect(0, 's', 1, 50, 2);
	assert_int_equal(got[0].e.tid, 4);
	assert_int_equal(got[0].e.order, 2);
	expect(1, 't', 1, 50, 2);
	assert_int_equal(got[1].e.order, 3);
	expect(2, 't', 1, 50, 2);
	assert_int_equal(got[2].e.tid, 9);
	expect(3, 'f', 1, 50, 3);
	flows_free(&f);
}

static int stop_at_two(void *ctx, char ph, uint64_t id, const struct flow_ev *e,
		       const struct flow_ev *group, size_t ng)
{
	int *n = ctx;

	(void)ph;
	(void)id;
	(void)e;
	(void)group;
	(void)ng;
	return ++*n == 2 ? -28 : 0;
}

static void test_emit_error_stops(void **state)
{
	struct flows f;
	int n = 0;

	(void)state;
	flows_init(&f);
	for (int i = 0; i < 5; i++)
		add(&f, 1, (uint64_t)i, 1, 1);
	assert_int_equal(flows_assemble(&f, stop_at_two, &n, NULL), -28);
	assert_int_equal(n, 2);
	flows_free(&f);
}

/* every flow of test_many_flows: s then f, by flow id (the last added
 * first), each id its first record's arrival + 1 */
static int check(void *ctx, char ph, uint64_t id, const struct flow_ev *e,
		 const struct flow_ev *group, size_t n)
{
	uint64_t *next = ctx;

	assert_int_equal(n, 2);
	assert_ptr_equal(group, ph == 's' ? e : e - 1);
	assert_int_equal(id, 2 * *next + 1);
	assert_int_equal(e->flow, 1000000 - *next);
	if (ph == 's') {
		assert_int_equal(e->ts, *next);
		assert_int_equal(e->pid, 1);
	} else {
		assert_int_equal(ph, 'f');
		assert_int_equal(e->pid, 2);
		--*next;
	}
	return 0;
}

static void test_many_flows(void **state)
{
	struct flows f;
	uint64_t n, next = 4999;

	(void)state;
	flows_init(&f);
	/* past the initial allocation, ids still unique and ordered */
	for (uint64_t i = 0; i < 5000; i++) {
		add(&f, 1000000 - i, i, 1, 1);
		add(&f, 1000000 - i, i + 1, 2, 2);
	}
	ngot = 0;
	assert_int_equal(f.n, 10000);
	assert_int_equal(flows_assemble(&f, check, &next, &n), 0);
	assert_int_equal(n, 5000);
	assert_int_equal(next, UINT64_MAX);
	flows_free(&f);
}

/*
 * Arrival numbers past 2^32 (the count set as if that many records had
 * come: adding them would take hours): a flow begun there has an id of
 * its own, not that of a flow begun 2^32 records earlier.
 */
static void test_ids_past_2_32_records(void **state)
{
	struct flows f;

	(void)state;
	flows_init(&f);
	add(&f, 3, 10, 1, 1);
	add(&f, 3, 20, 2, 2);
	f.n = 1ull << 32;
	add(&f, 4, 30, 1, 1);
	add(&f, 4, 40, 2, 2);
	assert_int_equal(run(&f), 2);
	assert_int_equal(ngot, 4);
	expect(0, 's', 1, 10, 1);
	expect(1, 'f', 1, 20, 2);
	expect(2, 's', (1ull << 32) + 1, 30, 1);
	expect(3, 'f', (1ull << 32) + 1, 40, 2);
	assert_true(got[3].e.order == (1ull << 32) + 1);
	flows_free(&f);
}

/* A thread with an event every microsecond, as a busy producer has. */
#define BIND_T0		10000000000000ull	/* ns: ~3 hours of uptime */
#define BIND_EVENTS	1000000u
#define BIND_FLOWS	100000u

struct rescan_ctx {
	struct bind *b;
	unsigned calls;
};

/* The verification pass: every event bind_note() was given, again. */
static int rescan_all(void *ctx)
{
	struct rescan_ctx *rc = ctx;

	rc->calls++;
	for (uint64_t i = 0; i < BIND_EVENTS; i++)
		assert_int_equal(bind_seen(rc->b, 1, 1, BIND_T0 + i * 1000), 0);
	return 0;
}

/* A flow slice of 100 ns on the events' thread. */
static void add_at(struct flows *f, uint64_t flow, uint64_t ts)
{
	struct flow_ev e = { .flow = flow, .ts = ts, .dur = 100, .pid = 1, .tid = 1 };

	assert_int_equal(flows_add(f, &e), 0);
}

static void note_events(struct bind *b)
{
	assert_int_equal(bind_init(b), 0);
	for (uint64_t i = 0; i < BIND_EVENTS; i++)
		bind_note(b, 1, 1, BIND_T0 + i * 1000);
}

/*
 * Flow slices that start between the events, on free timestamps: the
 * filter alone must clear them, so the export reads its input once. With
 * 3 bits per event it could not clear a few of these 100000 (10 % of the
 * events in flows), and such an export read its input twice.
 */
static void test_bind_free_starts_need_no_second_read(void **state)
{
	struct rescan_ctx rc = { 0 };
	struct flows f;
	struct flow_ev e;
	struct bind b;
	size_t i = 0;

	(void)state;
	note_events(&b);
	rc.b = &b;
	flows_init(&f);
	for (i = 0; i < BIND_FLOWS; i++)
		add_at(&f, i + 1, BIND_T0 + i * 10000 + 500);
	assert_int_equal(bind_resolve(&b, &f, rescan_all, &rc), 0);
	assert_int_equal(rc.calls, 0);
	assert_int_equal(b.moved, 0);
	assert_int_equal(flows_rewind(&f), 0);
	for (i = 0; flows_next(&f, &e) == 1; i++)
		assert_int_equal(e.ts, BIND_T0 + i * 10000 + 500);
	assert_int_equal(i, BIND_FLOWS);
	flows_free(&f);
	bind_free(&b);
}

/* Flow slices on taken starts: found by the second read, moved 1 ns. */
static void test_bind_taken_starts_move(void **state)
{
	struct rescan_ctx rc = { 0 };
	struct flows f;
	struct flow_ev e;
	struct bind b;
	size_t i;

	(void)state;
	note_events(&b);
	rc.b = &b;
	flows_init(&f);
	for (i = 0; i < 3; i++)
		add_at(&f, i + 1, BIND_T0 + i * 300000);
	assert_int_equal(bind_resolve(&b, &f, rescan_all, &rc), 0);
	assert_int_equal(rc.calls, 1);
	assert_int_equal(b.moved, 3);
	assert_int_equal(flows_rewind(&f), 0);
	for (i = 0; flows_next(&f, &e) == 1; i++) {
		assert_int_equal(e.ts, BIND_T0 + i * 300000 + 1);
		assert_int_equal(e.dur, 99);
	}
	assert_int_equal(i, 3);
	flows_free(&f);
	bind_free(&b);
}

/* A thread with an event at each of BIND_CHAIN consecutive ns. */
#define BIND_CHAIN	100000u

static int rescan_chain(void *ctx)
{
	struct rescan_ctx *rc = ctx;

	rc->calls++;
	for (uint64_t i = 0; i < BIND_CHAIN; i++)
		assert_int_equal(bind_seen(rc->b, 1, 2, BIND_T0 + i), 0);
	return 0;
}

/*
 * A flow slice at the start of a chain of taken timestamps (a forged ring
 * can write one): moved past the chain, to its first free ns, in a number
 * of reads of the input that grows with the chain's logarithm. Asking a
 * few candidates a read made this 25,000 reads of 100,000 events each.
 */
static void test_bind_long_chain_in_few_reads(void **state)
{
	struct rescan_ctx rc = { 0 };
	struct flow_ev e = { .flow = 1, .ts = BIND_T0, .dur = 100, .pid = 1, .tid = 2 };
	struct flows f;
	struct bind b;

	(void)state;
	assert_int_equal(bind_init(&b), 0);
	for (uint64_t i = 0; i < BIND_CHAIN; i++)
		bind_note(&b, 1, 2, BIND_T0 + i);
	rc.b = &b;
	flows_init(&f);
	assert_int_equal(flows_add(&f, &e), 0);
	assert_int_equal(bind_resolve(&b, &f, rescan_chain, &rc), 0);
	/* log2(100000 / 4) + 3 */
	assert_in_range(rc.calls, 2, 18);
	assert_int_equal(b.moved, 1);
	assert_int_equal(flows_rewind(&f), 0);
	assert_int_equal(flows_next(&f, &e), 1);
	assert_int_equal(e.ts, BIND_T0 + BIND_CHAIN);
	assert_int_equal(e.dur, 0);
	assert_int_equal(flows_next(&f, &e), 0);
	flows_free(&f);
	bind_free(&b);
}

/* A span of pid (its thread too) in flow, with a role (SHMT_ROLE_*). */
static void add_step(struct flows *f, uint64_t flow, uint32_t role, uint64_t ts, uint64_t dur,
		     uint32_t pid)
{
	struct flow_ev e = { .flow = flow, .role = role, .ts = ts, .dur = dur, .pid = pid,
			     .tid = pid, .cat = 7, .name = pid, .kind = SHMTRACE_KIND_SPAN };

	assert_int_equal(flows_add(f, &e), 0);
}

/* A step that receives is placed by its end: the client's wait for the
 * reply, begun before the server's step and ended after it, follows it. */
static void test_receiving_step_placed_by_its_end(void **state)
{
	struct flows f;

	(void)state;
	flows_init(&f);
	add_step(&f, 3, 0, 100, 10, 1);			/* send */
	add_step(&f, 3, SHMT_ROLE_RECEIVES, 120, 500, 1);	/* wait reply, to 620 */
	add_step(&f, 3, 0, 200, 100, 2);			/* handle */
	add_step(&f, 3, 0, 610, 5, 3);				/* a step before its end */
	assert_int_equal(run(&f), 1);
	assert_int_equal(ngot, 4);
	expect(0, 's', 1, 100, 1);
	expect(1, 't', 1, 200, 2);
	expect(2, 't', 1, 610, 3);
	expect(3, 'f', 1, 120, 1);
	flows_free(&f);
}

/* A terminating step ends its flow: the id's later records are the next
 * flow, with an id of its own; a lone record after an end draws nothing. */
static void test_terminating_step_ends_its_flow(void **state)
{
	struct flows f;

	(void)state;
	flows_init(&f);
	add_step(&f, 3, 0, 100, 10, 1);
	add_step(&f, 3, SHMT_ROLE_TERMINATES, 200, 10, 2);
	add_step(&f, 3, 0, 300, 10, 1);
	add_step(&f, 3, SHMT_ROLE_RECEIVES | SHMT_ROLE_TERMINATES, 310, 100, 1);
	add_step(&f, 3, 0, 350, 10, 2);
	add_step(&f, 3, 0, 500, 10, 1);
	assert_int_equal(run(&f), 2);
	assert_int_equal(ngot, 5);
	expect(0, 's', 1, 100, 1);
	expect(1, 'f', 1, 200, 2);
	expect(2, 's', 3, 300, 1);
	expect(3, 't', 3, 350, 2);
	expect(4, 'f', 3, 310, 1);
	assert_int_equal(nsingle, 1);
	flows_free(&f);
}

/* What viewers get for a span that receives: the span outside its flow,
 * and at its end an instant that is the step; nothing else is split. */
static void test_receiving_span_split_for_viewers(void **state)
{
	struct shmt_record r = { .ts = 1000, .dur = 500, .flow = shmtrace_flow_reply(9), .pid = 5,
				 .tid = 6, .name = 2, .cat = 3, .commit = SHMTRACE_KIND_SPAN };
	struct shmt_record span, mark;
	struct flow_ev fe;

	(void)state;
	assert_true(flow_split_receiving(&r, &span, &mark));
	assert_true(span.ts == 1000 && span.dur == 500 && span.flow == 0 && span.name == 2);
	assert_int_equal(shmt_record_kind(&span), SHMTRACE_KIND_SPAN);
	assert_true(mark.ts == 1500 && mark.dur == 0 && mark.flow == r.flow && mark.tid == 6);
	assert_int_equal(shmt_record_kind(&mark), SHMTRACE_KIND_INSTANT);
	fe = flow_ev_of(&mark, 4, 77);
	assert_true(fe.flow == 9 && fe.ring == 4 && fe.pid == 77);
	assert_int_equal(fe.role, SHMT_ROLE_RECEIVES | SHMT_ROLE_TERMINATES);
	r.commit = SHMTRACE_KIND_OPEN;		/* an unfinished one too */
	assert_true(flow_split_receiving(&r, &span, &mark));
	r.flow = shmtrace_flow_end(9);		/* a step that only ends */
	assert_false(flow_split_receiving(&r, &span, &mark));
	r.flow = shmtrace_flow_recv(9);		/* an instant: its start is its end */
	r.commit = SHMTRACE_KIND_INSTANT;
	assert_false(flow_split_receiving(&r, &span, &mark));
	r.flow = SHMTRACE_FLOW_RECEIVES;	/* a role without an id: no flow */
	r.commit = SHMTRACE_KIND_SPAN;
	assert_false(flow_split_receiving(&r, &span, &mark));
	assert_false(shmt_record_in_flow(&r));
	assert_int_equal(shmtrace_flow_recv(0), 0);
	assert_int_equal(shmtrace_flow_reply(0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_hop),
		cmocka_unit_test(test_many_hops_three_processes),
		cmocka_unit_test(test_interleaved_flows_and_ids),
		cmocka_unit_test(test_single_record_draws_nothing),
		cmocka_unit_test(test_same_thread_spans),
		cmocka_unit_test(test_equal_timestamps),
		cmocka_unit_test(test_emit_error_stops),
		cmocka_unit_test(test_many_flows),
		cmocka_unit_test(test_ids_past_2_32_records),
		cmocka_unit_test(test_bind_free_starts_need_no_second_read),
		cmocka_unit_test(test_bind_taken_starts_move),
		cmocka_unit_test(test_bind_long_chain_in_few_reads),
		cmocka_unit_test(test_receiving_step_placed_by_its_end),
		cmocka_unit_test(test_terminating_step_ends_its_flow),
		cmocka_unit_test(test_receiving_span_split_for_viewers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
