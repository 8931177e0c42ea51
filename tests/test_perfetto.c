/* SPDX-License-Identifier: MIT */
/*
 * test_perfetto.c - `shmtrace export --format perfetto` on a capture made
 * of the orders that nesting depends on (slices that begin together,
 * recorded innermost first; instants where a span begins and where it
 * ends; siblings sharing a boundary; a span of no length; a flow slice
 * that begins with its parent; records out of the order of their ends; an
 * open span beginning with its child; flows whose steps receive and end
 * them; flows whose steps share a time), each compared with the Chrome export of the same records by
 * tests/perfetto/check-perfetto.py, also under --pid and --from/--to; and how the command fails: a bad input, an
 * output through a symbolic link, a write that fails, options of another
 * format. The demo's capture and a ring read post-mortem: tests/e2e/perfetto.sh.
 */
#include "export_read.h"

enum { S_CAT = 1, S_A, S_B, S_C, S_I, S_J, S_Z, S_F, S_K1, S_K2, S_V, S_CTR, S_N };

#define R(ts_, dur_, flow_, pid_, tid_, name_, kind_)                                        \
	{ .ts = (ts_), .dur = (dur_), .flow = (flow_), .pid = (pid_), .tid = (tid_),          \
	  .name = (name_), .cat = S_CAT, .commit = SHMTRACE_KIND_##kind_ }
/* argument i of n of the event before it (pid 100, tid 100, ts, name) */
#define ARG(ts_, ev, i, n, type, key, value)                                                 \
	{ .ts = (ts_), .dur = (uint64_t)(value), .flow = SHMT_ARG_FLOW(type, i, n), .pid = 100, \
	  .tid = 100, .name = (key), .cat = (ev), .commit = SHMTRACE_KIND_ARG }

/* A capture of records r[0..n) of the threads "alpha"/"main" (100, 100)
 * and "beta"/"io" (200, 201), with the strings of S_*. */
static void put_records(const char *path, const struct shmt_record *r, size_t n)
{
	struct shmt_cap_header h = {
		.part = 0, .run_id = 9, .ring_capacity = 1024,
		.realtime0 = 1700000000000000000ull, .mono0 = 500, .started_ns = 500,
	};
	struct shmt_cap_string s[] = {
		{ S_CAT, 3, "cat" }, { S_A, 1, "a" }, { S_B, 1, "b" }, { S_C, 1, "c" },
		{ S_I, 4, "inst" }, { S_J, 3, "end" }, { S_Z, 4, "zero" }, { S_F, 3, "hop" },
		{ S_K1, 5, "bytes" }, { S_K2, 6, "st\"at" }, { S_V, 4, "ok\xff!" },
		{ S_CTR, 5, "depth" },
	};
	struct shmt_thread th[2] = { { .pid = 100, .tid = 100, .start_time = 5 },
				     { .pid = 200, .tid = 201, .start_time = 6 } };
	struct shmt_cap_end e = { .records = n, .end_ns = 90000 };
	msgpack_sbuffer b;

	snprintf(h.ring, sizeof(h.ring), "pfring");
	strcpy(th[0].name, "main");
	strcpy(th[0].pname, "alpha");
	strcpy(th[1].name, "io");
	strcpy(th[1].pname, "beta");
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, s, sizeof(s) / sizeof(s[0])), 0);
	assert_int_equal(shmt_cap_put_threads(&b, th, 2), 0);
	assert_int_equal(shmt_cap_put_records(&b, 0, r, n), 0);
	assert_int_equal(shmt_cap_put_end(&b, &e), 0);
	put_file(path, b.data, b.size);
	msgpack_sbuffer_destroy(&b);
}

static void make_capture(const char *path)
{
	struct shmt_record r[] = {
		/* three slices that begin together, recorded innermost first */
		R(1000, 50, 0, 100, 100, S_C, SPAN), R(1000, 100, 0, 100, 100, S_B, SPAN),
		R(1000, 1000, 0, 100, 100, S_A, SPAN),
		/* instants where a span begins (in it) and where it ends (not) */
		R(3000, 0, 0, 100, 100, S_I, INSTANT), R(3500, 0, 0, 100, 100, S_J, INSTANT),
		R(3000, 500, 0, 100, 100, S_B, SPAN),
		/* siblings sharing a boundary; a span of no length in a third */
		R(5000, 100, 0, 100, 100, S_B, SPAN), R(5100, 100, 0, 100, 100, S_C, SPAN),
		R(6000, 0, 0, 100, 100, S_Z, SPAN), R(5900, 600, 0, 100, 100, S_A, SPAN),
		/* a span with arguments */
		R(6600, 10, 0, 100, 100, S_B, SPAN),
		ARG(6600, S_B, 1, 2, SHMTRACE_ARG_INT, S_K1, -5),
		ARG(6600, S_B, 2, 2, SHMTRACE_ARG_STR, S_K2, S_V),
		/* a flow's first hop begins with its parent, which has none */
		R(8000, 100, 5, 100, 100, S_F, SPAN), R(8000, 1000, 0, 100, 100, S_A, SPAN),
		R(8200, 100, 5, 200, 201, S_F, SPAN), R(8300, 0, 5, 200, 201, S_I, INSTANT),
		R(8400, 30, 9, 200, 201, S_F, SPAN),	/* a flow of one record */
		R(8500, 7, 0, 100, 100, S_CTR, COUNTER), R(8600, 3, 0, 100, 100, S_CTR, COUNTER),
		/* a record older than the one before it */
		R(21000, 100, 0, 100, 100, S_B, SPAN), R(20000, 100, 0, 100, 100, S_C, SPAN),
		/* an open span and its child, begun together; then its last moment */
		R(30000, 50, 0, 100, 100, S_C, SPAN), R(30000, 0, 0, 100, 100, S_A, OPEN),
		R(30200, 0, 0, 100, 100, S_I, INSTANT),
	};

	put_records(path, r, sizeof(r) / sizeof(r[0]));
}

/* Exports the capture t.cap both ways with the options opts and compares
 * them (export_read.h). */
static void compare(const char *opts, const char *expect)
{
	perfetto_compare("\"$d/t.cap\"", opts, expect);
}

static void test_nesting_as_chrome(void **state)
{
	(void)state;
	if (!have_protoc())
		skip();
	make_capture(tmp("t.cap"));
	compare("", "--expect-flows 1 --expect-unfinished 1");
	expect_in(tmp("check.out"), "21 slices and instants, 1 flows, 2 counters, 3 arguments");
	expect_in(tmp("check.out"), "deepest nesting 2");
	/* nothing to warn about: every record came in the order of its end */
	expect_not_in(tmp("t.err"), "warning");
	/* each process alone (with the whole of its flow: the other
	 * process's hops come along), and a window */
	compare("--pid 200", "--expect-flows 1 --expect-unfinished 0");
	compare("--pid 100", "--expect-flows 1 --expect-unfinished 1");
	compare("--from 2us --to 9us", "--expect-flows 1 --expect-unfinished 0");
}

/*
 * Flow roles: a request (a, pid 100) handled (hop, pid 200) whose wait
 * for the reply (b) receives and ends the flow, twice with flow 5, the
 * second wait ending where a span begins (the Chrome export moves its
 * step); then flow 8, whose unfinished wait receives at its thread's last
 * moment. Both exports draw each receiving span's step as an instant at
 * its end, in the same flows; Perfetto ends each flow with
 * terminating_flow_ids there.
 */
static void test_flow_roles_as_chrome(void **state)
{
	/* in the order of their ends, as a ring has them */
	const struct shmt_record r[] = {
		R(1000, 100, 5, 100, 100, S_A, SPAN), R(1500, 500, 5, 200, 201, S_F, SPAN),
		R(1200, 1800, shmtrace_flow_reply(5), 100, 100, S_B, SPAN),
		R(4000, 100, 5, 100, 100, S_A, SPAN), R(4500, 500, 5, 200, 201, S_F, SPAN),
		R(4200, 1800, shmtrace_flow_reply(5), 100, 100, S_B, SPAN),
		R(6000, 100, 0, 100, 100, S_C, SPAN),
		R(7000, 100, 8, 100, 100, S_A, SPAN), R(7500, 100, 8, 200, 201, S_F, SPAN),
		R(8000, 10, 0, 100, 100, S_C, SPAN),
		R(7200, 0, shmtrace_flow_recv(8), 100, 100, S_B, OPEN),
	};
	char *json;

	(void)state;
	if (!have_protoc())
		skip();
	put_records(tmp("t.cap"), r, sizeof(r) / sizeof(r[0]));
	compare("", "--expect-flows 3 --expect-unfinished 1");
	expect_in(tmp("check.out"), "14 slices and instants, 3 flows");
	json = slurp(tmp("t.json"));
	assert_int_equal(count(json, "\"receives\":true"), 3);
	assert_non_null(strstr(json, "\"flow_starts_moved\":1,"));
	free(json);
}

/*
 * Flows whose hops share a time on two threads, each recorded so that
 * the later hop's record comes first: flow 5's receiving span (pid 200)
 * begins with the sending one (pid 100) and ends before it; flow 6's step
 * that receives ends (pid 100) where the next step begins (pid 200); flow
 * 7 has three hops at one time, the first on pid 100, whose record comes
 * last. The trace processor takes the events of one time in file order,
 * so each hop must be written after the one before it in its flow, or the
 * terminating id ends nothing and the flow is cut. Both exports draw
 * the same three flows, hop for hop; nothing is forced out of order.
 */
static void test_a_flow_whose_steps_share_a_time_is_whole(void **state)
{
	const struct shmt_record r[] = {
		R(1000, 100, 5, 200, 201, S_F, SPAN), R(1000, 500, 5, 100, 100, S_A, SPAN),
		R(2500, 100, 6, 100, 100, S_A, SPAN),
		R(2800, 300, shmtrace_flow_recv(6), 100, 100, S_B, SPAN),
		R(3100, 50, 6, 200, 201, S_F, SPAN),
		R(5000, 10, 7, 200, 201, S_F, SPAN), R(5000, 0, 7, 200, 201, S_I, INSTANT),
		R(5000, 500, 7, 100, 100, S_A, SPAN),
	};

	(void)state;
	if (!have_protoc())
		skip();
	put_records(tmp("t.cap"), r, sizeof(r) / sizeof(r[0]));
	compare("", "--expect-flows 3 --expect-unfinished 0");
	expect_in(tmp("check.out"), "9 slices and instants, 3 flows");
	expect_not_in(tmp("t.err"), "warning");
}

/*
 * Two flows between the same two threads at one time, each thread's
 * outer span the first hop of one and its inner span the last of the
 * other: the begins of the two threads must be written in turn, each hop
 * after the one before it in its flow, for both flows to be whole.
 */
static void test_two_flows_crossing_at_one_time_are_whole(void **state)
{
	const struct shmt_record x[] = {
		R(1000, 100, 5, 200, 201, S_F, SPAN), R(1000, 100, 6, 100, 100, S_C, SPAN),
		R(1000, 500, 6, 200, 201, S_B, SPAN), R(1000, 500, 5, 100, 100, S_A, SPAN),
	};

	(void)state;
	if (!have_protoc())
		skip();
	put_records(tmp("t.cap"), x, sizeof(x) / sizeof(x[0]));
	compare("", "--expect-flows 2 --expect-unfinished 0");
	expect_in(tmp("check.out"), "4 slices and instants, 2 flows");
	expect_not_in(tmp("t.err"), "warning");
}

/*
 * Timestamps: each track's on a clock of its own, as the time since its
 * last event: thread 100's spans, then thread 201's, earlier, are all
 * deltas. Then 70 threads, more than the clocks, each with one span and
 * each earlier than the one before: the tracks that share a clock with
 * one ahead of them are written absolute. Either way the trace
 * processor's reading of the clocks gives the Chrome export's times.
 */
static void test_timestamps_as_deltas_per_track(void **state)
{
	struct shmt_record r[80];
	const char *said;
	size_t n = 0;

	(void)state;
	if (!have_protoc())
		skip();
	for (uint64_t i = 0; i < 10; i++)
		r[n++] = (struct shmt_record)R(1000 + 1000 * i, 400, 0, 100, 100, S_A, SPAN);
	for (uint64_t i = 0; i < 10; i++)
		r[n++] = (struct shmt_record)R(500 + 1000 * i, 400, 0, 200, 201, S_B, SPAN);
	put_records(tmp("t.cap"), r, n);
	compare("", "--expect-flows 0 --expect-unfinished 0");
	expect_in(tmp("check.out"), "20 slices and instants");
	said = "as deltas, 0 absolute";
	expect_in(tmp("check.out"), said);

	for (n = 0; n < 70; n++)
		r[n] = (struct shmt_record)R(100000 - 1000 * n, 400, 0, 300, (uint32_t)(300 + n), S_C,
					     SPAN);
	put_records(tmp("t.cap"), r, n);
	compare("", "--expect-flows 0 --expect-unfinished 0");
	expect_in(tmp("check.out"), "70 slices and instants");
	expect_not_in(tmp("check.out"), said);
}

/*
 * Captures of 16 hosts, one span of pid 100 each: host h's pid is 100 +
 * h * 2^27, every one below 2^31, as the int32 pid of Perfetto's
 * ProcessDescriptor and ThreadDescriptor must be (at 2^28 a host, hosts
 * 8 to 15 decoded negative).
 */
static void test_pids_of_16_hosts_fit_int32(void **state)
{
	const struct shmt_cap_string s[] = { { S_CAT, 3, "cat" }, { S_A, 1, "a" } };
	struct shmt_thread th = { .pid = 100, .tid = 100, .start_time = 5 };
	struct shmt_record r = R(1000, 50, 0, 100, 100, S_A, SPAN);
	char cmd[4096], name[32], want[64], *txt;
	size_t len = 0;

	(void)state;
	if (!have_protoc())
		skip();
	len = (size_t)snprintf(cmd, sizeof(cmd), "'%s' export", bin);
	for (uint32_t h = 0; h < 16; h++) {
		struct cap_spec c = {
			.h = { .version = SHMT_CAP_VERSION, .run_id = 100 + h, .ring_id = 100 + h,
			       .ring_capacity = 1024, .realtime0 = 1700000000000000000ull,
			       .mono0 = 1000, .started_ns = 1000 },
			.str = s, .nstr = 2, .th = &th, .nth = 1, .r = &r, .nr = 1,
		};

		snprintf(c.h.ring, sizeof(c.h.ring), "ring%u", h);
		snprintf(c.h.host, sizeof(c.h.host), "host%02u", h);
		snprintf(name, sizeof(name), "h%02u.cap", h);
		put_capture(tmp(name), &c);
		len += (size_t)snprintf(cmd + len, sizeof(cmd) - len, " '%s'", tmp(name));
	}
	snprintf(cmd + len, sizeof(cmd) - len,
		 " --format perfetto -o '%s' 2>/dev/null && protoc --decode=perfetto.Trace -I "
		 "tests/perfetto tests/perfetto/perfetto_trace.proto <'%s' >'%s'",
		 tmp("h.pftrace"), tmp("h.pftrace"), tmp("h.txt"));
	assert_int_equal(system(cmd), 0);
	txt = slurp(tmp("h.txt"));
	assert_null(strstr(txt, "pid: -"));
	/* each host's process and thread */
	for (uint32_t h = 0; h < 16; h++) {
		snprintf(want, sizeof(want), "pid: %u\n", 100 + h * (1u << 27));
		assert_int_equal(count(txt, want), 2);
	}
	free(txt);
}

/* The trace goes to stdout with -o -: the same bytes as to a file. */
static void test_stdout(void **state)
{
	char *argv[] = { bin, "export", (char *)tmp("t.cap"), "--format", "perfetto", "-o", "-", NULL };
	char *argf[] = { bin, "export", (char *)tmp("t.cap"), "--format", "perfetto", "-o",
			 (char *)tmp("f.pftrace"), NULL };
	char *a, *b;

	(void)state;
	make_capture(tmp("t.cap"));
	assert_int_equal(run(tmp("o.pftrace"), NULL, argv), 0);
	assert_int_equal(run(NULL, NULL, argf), 0);
	a = slurp(tmp("o.pftrace"));
	b = slurp(tmp("f.pftrace"));
	/* a Trace: its first field is packet (1), length-delimited */
	assert_int_equal((unsigned char)a[0], 0x0a);
	assert_int_equal(memcmp(a, b, 64), 0);
	free(a);
	free(b);
}

/* `shmtrace export IN --format perfetto [more] -o OUT`, which must exit
 * with rc and say said. */
static void export_says(const char *in, const char *out, const char *more, int rc,
			const char *said)
{
	char pin[512], pout[512];
	char *argv[] = { bin, "export", pin, "--format", "perfetto", "-o", pout, NULL, NULL, NULL };

	snprintf(pin, sizeof(pin), "%s", tmp(in));
	snprintf(pout, sizeof(pout), "%s", tmp(out));
	if (more) {
		argv[7] = "--otlp-endpoint";
		argv[8] = (char *)more;
	}
	run_says(rc, argv, said, NULL);
}

static void test_failures(void **state)
{
	char *fmt[] = { bin, "export", (char *)tmp("t.cap"), "--format", "pftrace", "-o",
			(char *)tmp("o4"), NULL };
	char *s;

	(void)state;
	make_capture(tmp("t.cap"));
	/* not a capture: one line, and no output */
	put_file(tmp("junk"), "not a capture\n", 14);
	export_says("junk", "o1.pftrace", NULL, 1, "junk: not a shmtrace capture");
	s = slurp(tmp("run.err"));
	assert_int_equal(count(s, "\n"), 1);
	free(s);
	assert_int_equal(access(tmp("o1.pftrace"), F_OK), -1);
	/* through a symbolic link: refused, its target untouched */
	put_file(tmp("target"), "keep", 4);
	assert_int_equal(symlink(tmp("target"), tmp("link.pftrace")), 0);
	export_says("t.cap", "link.pftrace", NULL, 1, "symbolic link");
	s = slurp(tmp("target"));
	assert_string_equal(s, "keep");
	free(s);
	/* a write that fails: no file left behind */
	fsize_limit = 200;
	export_says("t.cap", "o2.pftrace", NULL, 1, "o2.pftrace");
	fsize_limit = 0;
	assert_int_equal(access(tmp("o2.pftrace"), F_OK), -1);
	/* options of another format, an unknown format */
	export_says("t.cap", "o3", "http://127.0.0.1:1", 2, "need --format otlp");
	run_says(2, fmt, "chrome, otlp or perfetto", NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nesting_as_chrome),
		cmocka_unit_test(test_flow_roles_as_chrome),
		cmocka_unit_test(test_a_flow_whose_steps_share_a_time_is_whole),
		cmocka_unit_test(test_two_flows_crossing_at_one_time_are_whole),
		cmocka_unit_test(test_timestamps_as_deltas_per_track),
		cmocka_unit_test(test_pids_of_16_hosts_fit_int32),
		cmocka_unit_test(test_stdout),
		cmocka_unit_test(test_failures),
	};

	return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
