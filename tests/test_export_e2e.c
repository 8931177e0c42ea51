/* SPDX-License-Identifier: MIT */
/*
 * test_export_e2e.c - `shmtrace export` end to end: processes exchanging
 * flow ids over pipes, killed (one inside a flush, holding the lock), then
 * the ring exported post-mortem and checked by the Chrome DevTools trace
 * engine (tests/devtools/check-trace.mjs); flows bound to the right slice,
 * and a flow of two categories bound under their list, whole past a NUL.
 */
#include "cli_run.h"
#include "json_writer.h"

/* ---------------------------------------------------------------- flows */

struct pipes {
	int ab[2], bc[2], ca[2];
};

/* A child: names itself, then runs its part of two flows, then is killed
 * (no flush: its records live only in its staging block). */
static pid_t child(shmtrace_t *t, struct pipes *p, char who)
{
	pid_t pid = fork();
	char pname[16], tname[16];

	assert_true(pid >= 0);
	if (pid)
		return pid;
	snprintf(pname, sizeof(pname), "proc-%c", who);
	snprintf(tname, sizeof(tname), "worker-%c", who);
	prctl(PR_SET_NAME, tname, 0, 0, 0);
	shmtrace_set_process_name(t, pname);
	if (who == 'a') {
		uint64_t f1 = shmtrace_flow_new(t);

		hop(t, "a.send", f1);
		send_flow(p->ab[1], f1);
		/* flow 2 comes back from c */
		hop(t, "a.reply", recv_flow(p->ca[0]));
	} else if (who == 'b') {
		hop(t, "b.work", recv_flow(p->ab[0]));
		hop(t, "b.untracked", 0);
		/* wakes c; the parent then sends c the flow id */
		send_flow(p->bc[1], 0);
	} else {
		uint64_t f2 = shmtrace_flow_new(t);

		recv_flow(p->bc[0]);
		/* b forwarded nothing: c ends flow 1 by a lookup of a's id */
		hop(t, "c.recv", recv_flow(p->bc[0]));
		hop(t, "c.send", f2);
		send_flow(p->ca[1], f2);
	}
	raise(SIGKILL);
	_exit(1);
}

static void test_flows_across_killed_processes(void **state)
{
	const char *ring = test_ring_name("expflow");
	struct shmtrace_ring_config cfg = { .capacity = 1024 };
	char pids[3][32], expect_p[3][64], expect_t[3][64], chain1[96], chain2[64];
	struct pipes p;
	shmtrace_t *t;
	pid_t a, b, c;
	char *json;
	int st;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &cfg), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	assert_int_equal(pipe(p.ab), 0);
	assert_int_equal(pipe(p.bc), 0);
	assert_int_equal(pipe(p.ca), 0);
	a = child(t, &p, 'a');
	b = child(t, &p, 'b');
	c = child(t, &p, 'c');
	waitpid(b, &st, 0);
	assert_true(WIFSIGNALED(st));
	/* c waits for a second id: flow 1's, which b did not forward; we read
	 * it from a's record in the ring, so the id crosses a third process */
	{
		struct ring_dump d;
		uint64_t f1 = 0;

		ring_dump(ring, &d);
		for (size_t i = 0; i < d.n; i++)
			if (d.recs[i].pid == (uint32_t)a && d.recs[i].flow)
				f1 = d.recs[i].flow;
		free(d.recs);
		assert_true(f1 != 0);
		send_flow(p.bc[1], f1);
	}
	waitpid(a, &st, 0);
	assert_true(WIFSIGNALED(st));
	waitpid(c, &st, 0);
	assert_true(WIFSIGNALED(st));
	shmtrace_close(t);

	assert_int_equal(export_ring(ring, tmp("flows.json"), tmp("flows.err")), 0);
	json = slurp(tmp("flows.json"));
	/* every span made it out of the dead processes' staging blocks */
	assert_int_equal(count(json, "\"ph\":\"X\""), 6);
	assert_int_equal(count(json, "\"ph\":\"s\""), 2);
	assert_int_equal(count(json, "\"ph\":\"f\""), 2);
	assert_non_null(strstr(json, "\"torn\":0"));
	free(json);
	if (!have_devtools()) {
		shmtrace_ring_unlink(ring);
		skip();
	}
	snprintf(pids[0], 32, "%d", a);
	snprintf(pids[1], 32, "%d", b);
	snprintf(pids[2], 32, "%d", c);
	snprintf(chain1, sizeof(chain1), "%d,%d,%d", a, b, c);
	snprintf(chain2, sizeof(chain2), "%d,%d", c, a);
	for (int i = 0; i < 3; i++) {
		snprintf(expect_p[i], 64, "%s=proc-%c", pids[i], 'a' + i);
		snprintf(expect_t[i], 64, "%s:%s=worker-%c", pids[i], pids[i], 'a' + i);
	}
	{
		const char *expect[] = {
			"--expect-flows", "2", "--expect-flow-pids", chain1, "--expect-flow-pids", chain2,
			"--expect-process", expect_p[0], "--expect-process", expect_p[1],
			"--expect-process", expect_p[2], "--expect-thread", expect_t[0],
			"--expect-thread", expect_t[1], "--expect-thread", expect_t[2], NULL,
		};
		int rc = check_trace(tmp("flows.json"), expect);

		if (rc) {
			print_file(tmp("check.err"));
			print_file(tmp("check.out"));
		}
		assert_int_equal(rc, 0);
	}
	shmtrace_ring_unlink(ring);
}

/* ------------------------------------------------- killed holding the lock */

static void die_in_flush(const char *where)
{
	if (!strcmp(where, "flush-middle"))
		raise(SIGKILL);
}

/*
 * A producer killed half-way through copying its staged records into the
 * ring's slots, holding the lock: the exporter, which never takes the
 * lock, shows every record once, none torn. The copy is an explicit
 * shmtrace_flush(): with no collector, a block left to fill is sequenced
 * in place, not copied.
 */
static void test_killed_while_holding_lock(void **state)
{
	const char *ring = test_ring_name("explock");
	struct shmtrace_ring_config cfg = { .capacity = 65536 };	/* blocks of 256 */
	/* fewer than a block: all of them staged when the flush copies */
	const int nkilled = 200;
	shmtrace_t *t;
	pid_t p1, p2;
	char *json, *err;
	int st;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &cfg), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	p1 = fork();
	if (p1 == 0) {
		uint32_t n = shmtrace_intern(t, "clean");

		for (int i = 0; i < 10; i++)
			shmtrace_span(t, n, n, 1000 + (uint64_t)i, 2000 + (uint64_t)i, 0);
		shmtrace_close(t);
		_exit(0);
	}
	waitpid(p1, &st, 0);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	p2 = fork();
	if (p2 == 0) {
		uint32_t n = shmtrace_intern(t, "killed");

		for (int i = 0; i < nkilled; i++)
			shmtrace_span(t, n, n, 5000 + (uint64_t)i, 6000 + (uint64_t)i, 0);
		/* the copy dies half-way */
		shmt_test_hook = die_in_flush;
		shmtrace_flush(t);
		_exit(1);
	}
	waitpid(p2, &st, 0);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

	/* the exporter never takes the lock, so a dead holder cannot stop it */
	assert_int_equal(export_ring(ring, tmp("lock.json"), tmp("lock.err")), 0);
	json = slurp(tmp("lock.json"));
	err = slurp(tmp("lock.err"));
	assert_int_equal(count(json, "\"name\":\"clean\""), 10);
	/* all of them, none twice, none torn */
	assert_int_equal(count(json, "\"name\":\"killed\""), nkilled);
	assert_non_null(strstr(json, "\"torn\":0"));
	assert_null(strstr(err, "warning"));
	free(json);
	free(err);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}


/* Writes to cap the capture of test_flow_start_collisions: spans that
 * start together on one thread, with and without flows. */
static void write_collisions_capture(const char *cap)
{
	const struct shmt_cap_string str[] = {
		{ 1, 3, "rpc" }, { 2, 7, "request" }, { 3, 4, "send" }, { 4, 4, "recv" },
		{ 5, 4, "tick" }, { 6, 4, "step" }, { 7, 4, "mark" },
	};
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .run_id = 5, .ring_id = 55, .ring_capacity = 1024,
		.realtime0 = 1700000000000000000ull, .mono0 = 1000, .started_ns = 1000,
	};
	struct shmt_thread th[2] = { { .pid = 100, .tid = 100, .start_time = 5 },
				     { .pid = 200, .tid = 200, .start_time = 6 } };
#define R(ts_, dur_, flow_, pid_, name_, kind_) \
	{ .ts = ts_, .dur = dur_, .flow = flow_, .pid = pid_, .tid = pid_, .name = name_, \
	  .cat = 1, .commit = kind_ }
	/* in ring order: a span is recorded when it ends, so the inner first */
	const struct shmt_record r[] = {
		/* inner "send" with flow 1 under an outer "request" without,
		 * an instant 1 ns later: the send moves by 2 ns */
		R(50000, 200, 1, 100, 3, SHMTRACE_KIND_SPAN),
		R(50001, 0, 0, 100, 5, SHMTRACE_KIND_INSTANT),
		R(50000, 1000, 0, 100, 2, SHMTRACE_KIND_SPAN),
		R(50500, 100, 1, 200, 4, SHMTRACE_KIND_SPAN),
		/* two sends with flows 2 and 3 inside a request, all at once:
		 * the longer send first (+1 ns), the shorter after (+2 ns) */
		R(60000, 100, 2, 100, 3, SHMTRACE_KIND_SPAN),
		R(60000, 300, 3, 100, 3, SHMTRACE_KIND_SPAN),
		R(60000, 1000, 0, 100, 2, SHMTRACE_KIND_SPAN),
		R(60500, 100, 2, 200, 4, SHMTRACE_KIND_SPAN),
		R(60600, 100, 3, 200, 4, SHMTRACE_KIND_SPAN),
		/* the event without a flow comes first this time: an instant
		 * with flow 4 where a span starts */
		R(70000, 50, 0, 100, 6, SHMTRACE_KIND_SPAN),
		R(70000, 0, 4, 100, 7, SHMTRACE_KIND_INSTANT),
		R(70500, 100, 4, 200, 4, SHMTRACE_KIND_SPAN),
	};
#undef R
	struct shmt_cap_end end = { .records = 12, .end_ns = 90000 };
	msgpack_sbuffer b;

	snprintf(h.ring, sizeof(h.ring), "coll");
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, str, 7), 0);
	assert_int_equal(shmt_cap_put_threads(&b, th, 2), 0);
	assert_int_equal(shmt_cap_put_records(&b, 0, r, 12), 0);
	assert_int_equal(shmt_cap_put_end(&b, &end), 0);
	put_file(cap, b.data, b.size);
	msgpack_sbuffer_destroy(&b);
}

/* The exported JSON out: the flows' slices moved, the others not. */
static void check_collisions_json(const char *out)
{
	char *json = slurp(out);

	/* the slice and its flow event, at the new start; the end kept */
	assert_int_equal(count(json, "\"ts\":50.002,\"dur\":0.198,"), 1);
	assert_int_equal(count(json, "\"ts\":50.002"), 2);
	assert_int_equal(count(json, "\"ts\":60.001,\"dur\":0.299,"), 1);
	assert_int_equal(count(json, "\"ts\":60.002,\"dur\":0.098,"), 1);
	assert_int_equal(count(json, "\"ts\":70.001"), 2);
	/* the events without a flow did not move */
	assert_int_equal(count(json, "\"ts\":50.000,\"dur\":1.000,"), 1);
	assert_int_equal(count(json, "\"ts\":50.001"), 1);
	assert_int_equal(count(json, "\"ts\":70.000,\"dur\":0.050,"), 1);
	assert_non_null(strstr(json, "\"flow_starts_moved\":4,"));
	free(json);
}

/* DevTools (when here) bound each flow of out to the slice carrying it. */
static void check_collisions_devtools(const char *out)
{
	if (have_devtools()) {
		const char *expect[] = { "--expect-flows", "4", NULL };
		int rc = check_trace(out, expect);
		char *seen;

		if (rc) {
			print_file(tmp("check.err"));
			print_file(tmp("check.out"));
		}
		assert_int_equal(rc, 0);
		/* what DevTools bound each flow to */
		seen = slurp(tmp("check.out"));
		if (count(seen, "request") || count(seen, "step"))
			fprintf(stderr, "%s\n", seen);
		assert_int_equal(count(seen, "\"request\""), 0);
		assert_int_equal(count(seen, "\"step\""), 0);
		assert_non_null(strstr(seen, "[100,100,50.002,\"send\"],[200,200,50.5,\"recv\"]"));
		assert_non_null(strstr(seen, "[100,100,60.001,\"send\"],[200,200,60.6,\"recv\"]"));
		assert_non_null(strstr(seen, "[100,100,60.002,\"send\"],[200,200,60.5,\"recv\"]"));
		assert_non_null(strstr(seen, "[100,100,70.001,\"mark\"],[200,200,70.5,\"recv\"]"));
		free(seen);
	}
}

/* Spans that start together on one thread: each flow must bind to the
 * slice that carries it, not to an outer one of the same start. */
static void test_flow_start_collisions(void **state)
{
	char cap[512], out[512];
	char *argv[] = { bin, "export", cap, "-o", out, NULL };

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("coll.cap"));
	snprintf(out, sizeof(out), "%s", tmp("coll.json"));
	write_collisions_capture(cap);
	assert_int_equal(run(NULL, tmp("coll.err"), argv), 0);
	check_collisions_json(out);
	check_collisions_devtools(out);
}

/*
 * A flow whose records have two categories (the client's span in "cli",
 * the server's in "srv"): its slices and flow events all carry "cli,srv",
 * so DevTools binds the flow; a flow of one category and an event outside
 * flows keep their own.
 */
static void test_flow_of_two_categories(void **state)
{
	static const struct shmt_cap_string str[] = { { 1, 3, "cli" }, { 2, 3, "srv" },
						      { 3, 4, "call" }, { 4, 5, "serve" },
						      { 5, 5, "alone" } };
	const struct shmt_thread th[2] = { { .pid = 100, .tid = 100, .start_time = 5 },
					   { .pid = 200, .tid = 201, .start_time = 6 } };
	const struct { uint32_t pid; uint64_t ts, dur, flow; uint16_t name, cat; } sp[] = {
		{ 100, 1000, 5000, 5, 3, 1 }, { 200, 2000, 1000, 5, 4, 2 },
		{ 100, 9000, 5000, 6, 3, 1 }, { 200, 10000, 1000, 6, 4, 1 },
		{ 200, 20000, 10, 0, 5, 2 },
	};
	struct shmt_record r[5];
	const char *const expect[] = { "--expect-flows", "2", "--expect-flow-pids", "100,200",
				       "--expect-flow-pids", "100,200", NULL };
	char *argv[] = { bin, "export", (char *)tmp("cats.cap"), "-o", (char *)tmp("cats.json"),
			 NULL };
	char *json;
	int rc;

	(void)state;
	for (int i = 0; i < 5; i++)
		r[i] = (struct shmt_record){ .ts = sp[i].ts, .dur = sp[i].dur, .flow = sp[i].flow,
					     .pid = sp[i].pid, .tid = th[i % 2].tid,
					     .name = sp[i].name, .cat = sp[i].cat,
					     .commit = SHMTRACE_KIND_SPAN };
	r[4].tid = 201;
	write_capture(tmp("cats.cap"), 7, str, 5, th, 2, r, 5);
	assert_int_equal(run(NULL, tmp("cats.err"), argv), 0);
	json = slurp(tmp("cats.json"));
	assert_int_equal(count(json, "\"cat\":\"cli,srv\",\"name\":\"call\""), 1);
	assert_int_equal(count(json, "\"cat\":\"cli,srv\",\"name\":\"serve\""), 1);
	assert_int_equal(count(json, "\"name\":\"flow\",\"cat\":\"cli,srv\""), 2);
	assert_int_equal(count(json, "\"cat\":\"cli\",\"name\":\"call\""), 1);
	assert_int_equal(count(json, "\"cat\":\"cli\",\"name\":\"serve\""), 1);
	assert_int_equal(count(json, "\"name\":\"flow\",\"cat\":\"cli\""), 2);
	assert_int_equal(count(json, "\"cat\":\"srv\",\"name\":\"alone\""), 1);
	free(json);
	if (!have_devtools())
		skip();
	rc = check_trace(tmp("cats.json"), expect);
	if (rc)
		print_file(tmp("check.err"));
	assert_int_equal(rc, 0);
}

/* How many times json has key followed by the JSON string of bytes
 * s[0..n) (as the writer escapes it), then tail. */
static size_t count_str(const char *json, const char *key, const char *s, size_t n,
			const char *tail)
{
	char esc[128], want[256];

	assert_true(json_escape(s, n, esc, sizeof(esc)) < sizeof(esc));
	snprintf(want, sizeof(want), "%s\"%s\"%s", key, esc, tail);
	return count(json, want);
}

/*
 * Categories are bytes: a flow of "x\0y\nz" and "w" lists both whole, and
 * one of "x\0a" and "x\0b" (alike up to the NUL) both, while "x\0a" under
 * two ids is one category.
 */
static void test_flow_categories_past_a_nul(void **state)
{
	static const struct shmt_cap_string str[] = { { 1, 5, "x\0y\nz" }, { 2, 1, "w" },
						      { 3, 3, "x\0a" }, { 4, 3, "x\0b" },
						      { 5, 4, "call" }, { 6, 5, "serve" },
						      { 7, 3, "x\0a" } };
	const struct shmt_thread th[2] = { { .pid = 100, .tid = 100, .start_time = 5 },
					   { .pid = 200, .tid = 201, .start_time = 6 } };
	const struct { uint64_t ts, flow; uint16_t cat; } sp[] = {
		{ 1000, 5, 1 }, { 2000, 5, 2 }, { 9000, 6, 3 }, { 10000, 6, 4 },
		{ 20000, 7, 3 }, { 21000, 7, 7 },
	};
	struct shmt_record r[6];
	char *argv[] = { bin, "export", (char *)tmp("nul.cap"), "-o", (char *)tmp("nul.json"),
			 NULL };
	char *json;

	(void)state;
	for (int i = 0; i < 6; i++)
		r[i] = (struct shmt_record){ .ts = sp[i].ts, .dur = 500, .flow = sp[i].flow,
					     .pid = th[i % 2].pid, .tid = th[i % 2].tid,
					     .name = 5 + i % 2, .cat = sp[i].cat,
					     .commit = SHMTRACE_KIND_SPAN };
	write_capture(tmp("nul.cap"), 8, str, 7, th, 2, r, 6);
	assert_int_equal(run(NULL, tmp("nul.err"), argv), 0);
	json = slurp(tmp("nul.json"));
	assert_int_equal(count_str(json, "\"cat\":", "w,x\0y\nz", 7, ",\"name\":\"call\""), 1);
	assert_int_equal(count_str(json, "\"cat\":", "w,x\0y\nz", 7, ",\"name\":\"serve\""), 1);
	assert_int_equal(count_str(json, "\"name\":\"flow\",\"cat\":", "w,x\0y\nz", 7, ","), 2);
	assert_int_equal(count_str(json, "\"cat\":", "x\0a,x\0b", 7, ",\"name\":\"call\""), 1);
	assert_int_equal(count_str(json, "\"cat\":", "x\0a,x\0b", 7, ",\"name\":\"serve\""), 1);
	assert_int_equal(count_str(json, "\"name\":\"flow\",\"cat\":", "x\0a,x\0b", 7, ","), 2);
	/* one category under two ids: one flow of it, not a list */
	assert_int_equal(count_str(json, "\"cat\":", "x\0a", 3, ",\"name\":\"call\""), 1);
	assert_int_equal(count_str(json, "\"cat\":", "x\0a", 3, ",\"name\":\"serve\""), 1);
	assert_int_equal(count_str(json, "\"name\":\"flow\",\"cat\":", "x\0a", 3, ","), 2);
	free(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flows_across_killed_processes),
		cmocka_unit_test(test_killed_while_holding_lock),
		cmocka_unit_test(test_flow_start_collisions),
		cmocka_unit_test(test_flow_of_two_categories),
		cmocka_unit_test(test_flow_categories_past_a_nul),
	};

	return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
