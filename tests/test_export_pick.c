/* SPDX-License-Identifier: MIT */
/*
 * test_export_pick.c - which records `shmtrace export --pid` and
 * `--from/--to` write: the selected records and every step of the flows
 * they are in, other processes' and outside the window too, so that the
 * arrows stay whole (Chrome, checked with the DevTools engine, and OTLP);
 * records of other processes in no such flow stay out.
 */
#include "cli_run.h"

enum { A = 100, B = 200, C = 300 };
enum { CAT = 1, A_SPAN, B_SPAN, C_SPAN, A_HOP, B_HOP, C_HOP, B_OTHER, C_OTHER, BYTES };

/*
 * Three processes, one thread each. Flows: 1 = A -> B -> A, 2 = A -> C,
 * 3 = B -> C (A not in it: its steps are named *-other), 4 = C -> A -> B.
 * Spans in no flow: 3 of A, 4 of B, 2 of C. B's step of flow 1 has the
 * argument bytes=42, one of B's spans in no flow bytes=7. The other
 * processes' records come first, so that an export must know A's flows
 * before it meets A's records.
 */
static void make_abc(const char *path)
{
	static const struct shmt_cap_string str[] = {
		{ CAT, 3, "rpc" }, { A_SPAN, 6, "a-span" }, { B_SPAN, 6, "b-span" },
		{ C_SPAN, 6, "c-span" }, { A_HOP, 5, "a-hop" }, { B_HOP, 5, "b-hop" },
		{ C_HOP, 5, "c-hop" }, { B_OTHER, 7, "b-other" }, { C_OTHER, 7, "c-other" },
		{ BYTES, 5, "bytes" },
	};
	struct shmt_thread th[3] = { { .pid = A, .tid = A, .start_time = 5 },
				     { .pid = B, .tid = B, .start_time = 6 },
				     { .pid = C, .tid = C, .start_time = 7 } };
#define S(t, f, p, n) { .ts = t, .dur = 500, .flow = f, .pid = p, .tid = p, .name = n, \
			      .cat = CAT, .commit = SHMTRACE_KIND_SPAN }
#define ARG(t, p, owner, v) { .ts = t, .dur = v, .pid = p, .tid = p, .name = BYTES, .cat = owner, \
			      .flow = SHMT_ARG_FLOW(SHMTRACE_ARG_INT, 1, 1), \
			      .commit = SHMTRACE_KIND_ARG }
	const struct shmt_record r[] = {
		S(40000, 4, C, C_HOP), S(7000, 0, C, C_SPAN), S(21000, 2, C, C_HOP),
		S(31000, 3, C, C_OTHER), S(27000, 0, C, C_SPAN),
		S(6000, 0, B, B_SPAN), S(11000, 1, B, B_HOP), ARG(11000, B, B_HOP, 42),
		S(26000, 0, B, B_SPAN), ARG(26000, B, B_SPAN, 7), S(30000, 3, B, B_OTHER),
		S(42000, 4, B, B_HOP), S(51000, 0, B, B_SPAN), S(52000, 0, B, B_SPAN),
		S(5000, 0, A, A_SPAN), S(10000, 1, A, A_HOP), S(12000, 1, A, A_HOP),
		S(20000, 2, A, A_HOP), S(25000, 0, A, A_SPAN), S(41000, 4, A, A_HOP),
		S(50000, 0, A, A_SPAN),
	};
#undef S
#undef ARG
	struct cap_spec c = {
		.h = { .version = SHMT_CAP_VERSION, .run_id = 3, .ring_id = 0x5eed,
		       .ring_capacity = 1024, .realtime0 = 1700000000000000000ull, .mono0 = 1000,
		       .started_ns = 1000 },
		.str = str, .nstr = sizeof(str) / sizeof(str[0]), .th = th, .nth = 3,
		.r = r, .nr = sizeof(r) / sizeof(r[0]),
	};

	snprintf(c.h.ring, sizeof(c.h.ring), "abc");
	for (int i = 0; i < 3; i++) {
		snprintf(th[i].pname, sizeof(th[i].pname), "%s", i == 0 ? "alpha" : i == 1 ? "beta" : "gamma");
		snprintf(th[i].name, sizeof(th[i].name), "%c-main", 'a' + i);
	}
	put_capture(path, &c);
}

/* Exports the capture with the options in opts (ended by NULL) to out;
 * returns the exit status. */
static int export_with(const char *out, const char *const *opts)
{
	return export_with_opts(tmp("abc.cap"), out, tmp("pick.err"), opts);
}

/* How many spans named name the export at path holds. */
static size_t spans_named(const char *json, const char *name)
{
	char needle[64];

	snprintf(needle, sizeof(needle), "\"name\":\"%s\"", name);
	return count(json, needle);
}

static void test_pid_keeps_its_flows_whole(void **state)
{
	const char *opts[] = { "--pid", "100", NULL };
	char *json;

	(void)state;
	make_abc(tmp("abc.cap"));
	assert_int_equal(export_with(tmp("a.json"), opts), 0);
	json = slurp(tmp("a.json"));
	/* A's 7, and exactly the steps of B and C in A's flows 1, 2 and 4 */
	assert_int_equal(count(json, "\"ph\":\"X\""), 11);
	assert_int_equal(spans_named(json, "a-span"), 3);
	assert_int_equal(spans_named(json, "a-hop"), 4);
	assert_int_equal(spans_named(json, "b-hop"), 2);
	assert_int_equal(spans_named(json, "c-hop"), 2);
	/* B's and C's records in no flow with A stay out */
	assert_int_equal(spans_named(json, "b-span"), 0);
	assert_int_equal(spans_named(json, "c-span"), 0);
	assert_int_equal(spans_named(json, "b-other"), 0);
	assert_int_equal(spans_named(json, "c-other"), 0);
	/* three arrows, the two of three steps with a middle one */
	assert_int_equal(count(json, "\"ph\":\"s\""), 3);
	assert_int_equal(count(json, "\"ph\":\"t\""), 2);
	assert_int_equal(count(json, "\"ph\":\"f\""), 3);
	/* B's step keeps its argument; the argument of B's span left out
	 * is neither written nor counted as lost */
	assert_int_equal(count(json, "\"args\":{\"bytes\":42}"), 1);
	assert_int_equal(count(json, "\"bytes\":7"), 0);
	assert_non_null(strstr(json, "\"args\":1,\"args_lost\":0,"));
	/* the other ends are named */
	assert_non_null(strstr(json, "\"args\":{\"name\":\"beta\"}"));
	assert_non_null(strstr(json, "\"args\":{\"name\":\"c-main\"}"));
	free(json);
	expect_trace(tmp("a.json"), (const char *[]){
		"--expect-flows", "3", "--expect-flow-pids", "100,200,100",
		"--expect-flow-pids", "100,300", "--expect-flow-pids", "300,100,200",
		"--expect-process", "200=beta", "--expect-process", "300=gamma",
		"--expect-thread", "200:200=b-main", "--expect-thread", "300:300=c-main", NULL });
}

/* --pid B: B's own records, and A's and C's steps of B's flows 1, 3, 4. */
static void test_pid_of_a_middle_step(void **state)
{
	const char *opts[] = { "--pid", "200", NULL };
	char *json;

	(void)state;
	make_abc(tmp("abc.cap"));
	assert_int_equal(export_with(tmp("b.json"), opts), 0);
	json = slurp(tmp("b.json"));
	assert_int_equal(count(json, "\"ph\":\"X\""), 12);
	assert_int_equal(spans_named(json, "b-span"), 4);
	assert_int_equal(spans_named(json, "b-hop"), 2);
	assert_int_equal(spans_named(json, "b-other"), 1);
	assert_int_equal(spans_named(json, "a-hop"), 3);
	assert_int_equal(spans_named(json, "c-hop"), 1);
	assert_int_equal(spans_named(json, "c-other"), 1);
	assert_int_equal(spans_named(json, "a-span") + spans_named(json, "c-span"), 0);
	assert_non_null(strstr(json, "\"args\":2,\"args_lost\":0,"));
	free(json);
	expect_trace(tmp("b.json"), (const char *[]){
		"--expect-flows", "3", "--expect-flow-pids", "100,200,100",
		"--expect-flow-pids", "200,300", "--expect-flow-pids", "300,100,200", NULL });
}

/*
 * --from/--to: the records that start in the window, and every step of
 * the flows one of them is in, before or after the window.
 */
static void test_window_keeps_its_flows_whole(void **state)
{
	/* the trace starts at 5 us: 5..6 us after it holds A's and B's
	 * first steps of flow 1 */
	const char *first[] = { "--from", "5us", "--to", "6us", NULL };
	/* 36 us: A's step of flow 4 alone; C's step before it comes too */
	const char *middle[] = { "--from", "35.5us", "--to", "36.5us", NULL };
	/* A's window is relative to A's first record (5 us): 20..41 us
	 * holds A's steps of flows 2 and 4, and a span */
	const char *pid_win[] = { "--pid", "100", "--from", "15us", "--to", "36us", NULL };
	char *json;

	(void)state;
	make_abc(tmp("abc.cap"));
	assert_int_equal(export_with(tmp("w1.json"), first), 0);
	json = slurp(tmp("w1.json"));
	assert_int_equal(count(json, "\"ph\":\"X\""), 3);
	assert_int_equal(count(json, "\"ts\":12.000,\"dur\""), 1);	/* after the window */
	assert_int_equal(count(json, "\"ph\":\"t\""), 1);
	free(json);

	assert_int_equal(export_with(tmp("w2.json"), middle), 0);
	json = slurp(tmp("w2.json"));
	assert_int_equal(count(json, "\"ph\":\"X\""), 3);
	assert_int_equal(count(json, "\"ts\":40.000,\"dur\""), 1);	/* before it */
	assert_int_equal(count(json, "\"ts\":42.000,\"dur\""), 1);
	free(json);
	expect_trace(tmp("w2.json"), (const char *[]){ "--expect-flows", "1",
		"--expect-flow-pids", "300,100,200", NULL });

	assert_int_equal(export_with(tmp("w3.json"), pid_win), 0);
	json = slurp(tmp("w3.json"));
	assert_int_equal(count(json, "\"ph\":\"X\""), 6);
	assert_int_equal(spans_named(json, "a-span"), 1);
	assert_int_equal(spans_named(json, "a-hop"), 2);
	assert_int_equal(spans_named(json, "c-hop"), 2);
	assert_int_equal(spans_named(json, "b-hop"), 1);
	free(json);
}

/*
 * An argument whose event is not the record before it (the event torn or
 * lapped) is answered as a record of its own: counted as lost where its
 * process is exported, the first record of the input included, and left
 * out with its process.
 */
static void test_orphan_argument_counted_with_its_process(void **state)
{
	static const struct shmt_cap_string str[] = { { CAT, 3, "rpc" }, { A_SPAN, 6, "a-span" },
						      { B_SPAN, 6, "b-span" }, { BYTES, 5, "bytes" } };
	const struct shmt_thread th[2] = { { .pid = A, .tid = A, .start_time = 5 },
					   { .pid = B, .tid = B, .start_time = 6 } };
	const struct shmt_record r[] = {
		/* B's span at 1000 is gone; its argument is first */
		{ .ts = 1000, .dur = 1, .pid = B, .tid = B, .name = BYTES, .cat = B_SPAN,
		  .flow = SHMT_ARG_FLOW(SHMTRACE_ARG_INT, 1, 1), .commit = SHMTRACE_KIND_ARG },
		{ .ts = 2000, .dur = 5, .pid = A, .tid = A, .name = A_SPAN, .cat = CAT,
		  .commit = SHMTRACE_KIND_SPAN },
		{ .ts = 3000, .dur = 5, .pid = B, .tid = B, .name = B_SPAN, .cat = CAT,
		  .commit = SHMTRACE_KIND_SPAN },
	};
	struct cap_spec c = {
		.h = { .version = SHMT_CAP_VERSION, .run_id = 4, .ring_capacity = 1024,
		       .realtime0 = 1700000000000000000ull, .mono0 = 1000, .started_ns = 1000 },
		.str = str, .nstr = 4, .th = th, .nth = 2, .r = r, .nr = 3,
	};
	const char *none[] = { NULL }, *of_a[] = { "--pid", "100", NULL };
	const char *of_b[] = { "--pid", "200", NULL };

	(void)state;
	put_capture(tmp("abc.cap"), &c);
	assert_int_equal(export_with(tmp("o.json"), none), 0);
	expect_in(tmp("o.json"), "\"args\":0,\"args_lost\":1,");
	assert_int_equal(export_with(tmp("o.json"), of_b), 0);
	expect_in(tmp("o.json"), "\"args\":0,\"args_lost\":1,");
	assert_int_equal(export_with(tmp("o.json"), of_a), 0);
	expect_in(tmp("o.json"), "\"args\":0,\"args_lost\":0,");
}

/* The OTLP export picks the same records: A's flows whole, as traces. */
static void test_otlp_pid_keeps_its_flows_whole(void **state)
{
	const char *opts[] = { "--pid", "100", "--format", "otlp", NULL };
	char *out;

	(void)state;
	make_abc(tmp("abc.cap"));
	assert_int_equal(export_with(tmp("a.jsonl"), opts), 0);
	out = slurp(tmp("a.jsonl"));
	assert_int_equal(count(out, "\"spanId\""), 11);
	assert_int_equal(spans_named(out, "b-hop"), 2);
	assert_int_equal(spans_named(out, "c-hop"), 2);
	assert_int_equal(spans_named(out, "b-span") + spans_named(out, "b-other"), 0);
	/* the steps after the first of each flow: children of the one before */
	assert_int_equal(count(out, "\"parentSpanId\""), 5);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pid_keeps_its_flows_whole),
		cmocka_unit_test(test_pid_of_a_middle_step),
		cmocka_unit_test(test_window_keeps_its_flows_whole),
		cmocka_unit_test(test_orphan_argument_counted_with_its_process),
		cmocka_unit_test(test_otlp_pid_keeps_its_flows_whole),
	};

	return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
