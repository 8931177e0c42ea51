// SPDX-License-Identifier: MIT
/*
 * test_export_e2e.c - `shmtrace export` end to end: processes exchanging
 * flow ids over pipes, killed (one inside a flush, holding the lock), then
 * the ring exported post-mortem and checked by the Chrome DevTools trace
 * engine (tests/devtools/check-trace.mjs); capture files made with the
 * encoder, cut, damaged and split into parts; bad input of every kind.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "helpers.h"
#include "capture.h"
#include "internal.h"

static char bin[512];
static long fsize_limit;	/* > 0: the child may write files of at most this */
static char tmpdir[256];

/* Runs argv with stdout and stderr to files; returns the exit status, or
 * 128 + signal. */
static int run(const char *out, const char *err, char *const argv[])
{
	pid_t p = fork();
	int st;

	assert_true(p >= 0);
	if (p == 0) {
		int fo = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int fe = open(err ? err : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fo, 1);
		dup2(fe, 2);
		if (fsize_limit > 0) {
			struct rlimit rl = { (rlim_t)fsize_limit, (rlim_t)fsize_limit };

			/* a write past the limit fails with EFBIG instead of killing */
			signal(SIGXFSZ, SIG_IGN);
			setrlimit(RLIMIT_FSIZE, &rl);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	assert_int_equal(waitpid(p, &st, 0), p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *tmp(const char *name)
{
	static char buf[8][512];
	static int k;
	char *b = buf[k++ % 8];

	snprintf(b, 512, "%s/%s", tmpdir, name);
	return b;
}

static int export_ring(const char *ring, const char *out, const char *err)
{
	char *argv[] = { bin, "export", "--ring", (char *)ring, "-o", (char *)out, NULL };

	return run(NULL, err, argv);
}

/* The DevTools engine is there, or installed from the lock file. */
static bool have_devtools(void)
{
	static int ok = -1;

	if (ok < 0) {
		struct stat st;

		if (stat("tests/devtools/node_modules/@paulirish/trace_engine", &st) == 0)
			ok = 1;
		else
			ok = system("npm ci --prefix tests/devtools >/dev/null 2>&1") == 0;
	}
	return ok;
}

static int check_trace(const char *json, const char *const *expect)
{
	char *argv[32] = { "/usr/bin/env", "node", "tests/devtools/check-trace.mjs", (char *)json };
	int n = 4;

	for (; *expect && n < 30; expect++)
		argv[n++] = (char *)*expect;
	argv[n] = NULL;
	return run(tmp("check.out"), tmp("check.err"), argv);
}

static void print_file(const char *path)
{
	char *s = slurp(path);

	fprintf(stderr, "%s: %s\n", path, s);
	free(s);
}

/* ---------------------------------------------------------------- flows */

struct pipes {
	int ab[2], bc[2], ca[2];
};

static void send_flow(int fd, uint64_t f)
{
	assert_int_equal(write(fd, &f, sizeof(f)), (ssize_t)sizeof(f));
}

static uint64_t recv_flow(int fd)
{
	uint64_t f = 0;

	if (read(fd, &f, sizeof(f)) != (ssize_t)sizeof(f))
		_exit(3);
	return f;
}

/* One span of the flow, recorded after the previous hop's span ended. */
static void hop(shmtrace_t *t, const char *name, uint64_t flow)
{
	uint32_t cat = shmtrace_intern(t, "rpc");
	uint32_t n = shmtrace_intern(t, name);
	uint64_t t0 = shmtrace_now();

	while (shmtrace_now() == t0)
		;
	shmtrace_span(t, cat, n, t0, shmtrace_now(), flow);
}

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

static void test_killed_while_holding_lock(void **state)
{
	const char *ring = test_ring_name("explock");
	struct shmtrace_ring_config cfg = { .capacity = 4096 };
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

		shmt_test_hook = die_in_flush;
		/* the 65th record fills the block: the flush dies half-way */
		for (int i = 0; i < 100; i++)
			shmtrace_span(t, n, n, 5000 + (uint64_t)i, 6000 + (uint64_t)i, 0);
		_exit(1);
	}
	waitpid(p2, &st, 0);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

	/* the exporter never takes the lock, so a dead holder cannot stop it */
	assert_int_equal(export_ring(ring, tmp("lock.json"), tmp("lock.err")), 0);
	json = slurp(tmp("lock.json"));
	err = slurp(tmp("lock.err"));
	assert_int_equal(count(json, "\"name\":\"clean\""), 10);
	/* all 64 published to the block, none of them twice, none torn */
	assert_int_equal(count(json, "\"name\":\"killed\""), 64);
	assert_non_null(strstr(json, "\"torn\":0"));
	assert_null(strstr(err, "warning"));
	free(json);
	free(err);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* ------------------------------------------------------------ capture files */

static void put_file(const char *path, const void *buf, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, n), (ssize_t)n);
	close(fd);
}

/* A capture part with records [first, first + n) of run 7, spans named
 * "s<seq>", on pid 100 or 200 alternately. */
static void make_part(msgpack_sbuffer *b, uint32_t part, uint64_t first, size_t n, bool end,
		      size_t *frame_at)
{
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .part = part, .run_id = 7, .ring_capacity = 1024,
		.realtime0 = 1700000000000000000ull, .mono0 = 1000, .started_ns = 1000,
	};
	struct shmt_cap_string s[2] = { { 1, 3, "cat" }, { 2, 4, "span" } };
	struct shmt_thread th[2] = { { .pid = 100, .tid = 100, .start_time = 5 },
				     { .pid = 200, .tid = 201, .start_time = 6 } };
	struct shmt_record r[64];
	struct shmt_cap_loss loss = { .at_ns = 2000, .dropped = 3 };
	struct shmt_cap_end e = { .records = n, .end_ns = 9000, .next_part = 0 };

	snprintf(h.ring, sizeof(h.ring), "testring");
	strcpy(th[0].name, "main");
	strcpy(th[0].pname, "alpha");
	strcpy(th[1].name, "io");
	strcpy(th[1].pname, "beta");
	assert_true(n <= 64);
	for (size_t i = 0; i < n; i++)
		r[i] = (struct shmt_record){ .ts = 10000 + (first + i) * 100, .dur = 50,
					     .pid = (first + i) % 2 ? 200 : 100,
					     .tid = (first + i) % 2 ? 201 : 100, .name = 2, .cat = 1,
					     .flow = (first + i) < 4 ? 99 : 0,
					     .commit = SHMTRACE_KIND_SPAN };
	msgpack_sbuffer_init(b);
	assert_int_equal(shmt_cap_put_header(b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(b, s, 2), 0);
	assert_int_equal(shmt_cap_put_threads(b, th, 2), 0);
	if (frame_at)
		*frame_at = b->size;
	assert_int_equal(shmt_cap_put_records(b, first, r, n), 0);
	assert_int_equal(shmt_cap_put_loss(b, &loss), 0);
	if (end)
		assert_int_equal(shmt_cap_put_end(b, &e), 0);
}

static int export_files(const char *out, const char *err, const char *f1, const char *f2)
{
	char *argv[] = { bin, "export", (char *)f1, (char *)f2, "-o", (char *)out, NULL };

	if (!f2) {
		argv[3] = "-o";
		argv[4] = (char *)out;
		argv[5] = NULL;
	}
	return run(NULL, err, argv);
}

static void test_capture_parts_dedup_cut(void **state)
{
	msgpack_sbuffer p0, p1;
	size_t at;
	char *json, *err;

	(void)state;
	/* part 1 repeats records 20..29 of part 0, as a restarted write would */
	make_part(&p0, 0, 0, 30, true, NULL);
	make_part(&p1, 1, 20, 40, true, &at);
	put_file(tmp("cap.0"), p0.data, p0.size);
	put_file(tmp("cap.1"), p1.data, p1.size);
	/* given in the wrong order */
	assert_int_equal(export_files(tmp("cap.json"), tmp("cap.err"), tmp("cap.1"), tmp("cap.0")), 0);
	json = slurp(tmp("cap.json"));
	assert_int_equal(count(json, "\"ph\":\"X\""), 60);
	assert_int_equal(count(json, "\"ts\":10.000,"), 2);	/* the span and its flow start */
	assert_int_equal(count(json, "\"ts\":15.900,"), 1);	/* record 59, once */
	assert_int_equal(count(json, "\"ph\":\"s\""), 1);
	assert_int_equal(count(json, "\"ph\":\"t\""), 2);
	assert_int_equal(count(json, "\"ph\":\"f\""), 1);
	assert_non_null(strstr(json, "\"args\":{\"name\":\"alpha\"}"));
	assert_non_null(strstr(json, "\"args\":{\"name\":\"io\"}"));
	assert_non_null(strstr(json, "\"dropped\":3"));
	assert_non_null(strstr(json, "records dropped (ring full)"));
	assert_non_null(strstr(json, "\"trace_start\":\"2023-11-14T22:13:20.000009000Z\""));
	free(json);
	err = slurp(tmp("cap.err"));
	assert_non_null(strstr(err, "3 dropped"));
	free(err);

	/* a window relative to the first record, and one process */
	{
		char *w[] = { bin, "export", (char *)tmp("cap.0"), (char *)tmp("cap.1"), "--from", "1us",
			      "--to", "0.002ms", "-o", (char *)tmp("win.json"), NULL };
		char *p[] = { bin, "export", (char *)tmp("cap.0"), (char *)tmp("cap.1"), "--pid", "200",
			      "-o", (char *)tmp("pid.json"), NULL };

		assert_int_equal(run(NULL, NULL, w), 0);
		json = slurp(tmp("win.json"));
		assert_int_equal(count(json, "\"ph\":\"X\""), 11);	/* records 10..20 */
		assert_non_null(strstr(json, "\"ts\":11.000,"));
		assert_non_null(strstr(json, "\"ts\":12.000,"));
		free(json);
		assert_int_equal(run(NULL, NULL, p), 0);
		json = slurp(tmp("pid.json"));
		assert_int_equal(count(json, "\"ph\":\"X\""), 30);
		assert_int_equal(count(json, "\"pid\":100,"), 0);
		free(json);
	}

	/* cut inside the records frame of part 1: part 0 and a warning */
	put_file(tmp("cut.1"), p1.data, at + 10);
	assert_int_equal(export_files(tmp("cut.json"), tmp("cut.err"), tmp("cap.0"), tmp("cut.1")), 0);
	json = slurp(tmp("cut.json"));
	err = slurp(tmp("cut.err"));
	assert_int_equal(count(json, "\"ph\":\"X\""), 30);
	assert_non_null(strstr(json, "\"complete\":false"));
	assert_non_null(strstr(err, "cut.1"));
	free(json);
	free(err);

	/* a flipped byte in the records frame: warning, what came before kept */
	p1.data[at + 20] ^= 0x55;
	put_file(tmp("bad.1"), p1.data, p1.size);
	assert_int_equal(export_files(tmp("bad.json"), tmp("bad.err"), tmp("bad.1"), NULL), 0);
	json = slurp(tmp("bad.json"));
	err = slurp(tmp("bad.err"));
	assert_int_equal(count(json, "\"ph\":\"X\""), 0);
	assert_non_null(strstr(err, "bad.1"));
	free(json);
	free(err);
	msgpack_sbuffer_destroy(&p0);
	msgpack_sbuffer_destroy(&p1);
}

/* A run of a ring of its own: flows 1..5 from process pa to process pb
 * (ids count from 1 in every ring), names interned in its own order. */
static void make_run(const char *path, const char *ring, uint64_t run_id, uint64_t ring_id,
		     uint32_t pa, uint32_t pb, const struct shmt_cap_string *s, uint64_t ts0)
{
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .run_id = run_id, .ring_id = ring_id,
		.ring_capacity = 1024, .realtime0 = 1700000000000000000ull, .mono0 = 1000,
		.started_ns = ts0,
	};
	struct shmt_thread th[2] = { { .pid = pa, .tid = pa, .start_time = 5 },
				     { .pid = pb, .tid = pb, .start_time = 6 } };
	struct shmt_cap_end e = { .records = 10, .end_ns = ts0 + 100000 };
	struct shmt_record r[10];
	msgpack_sbuffer b;

	snprintf(h.ring, sizeof(h.ring), "%s", ring);
	snprintf(th[0].pname, sizeof(th[0].pname), "%s-client", ring);
	snprintf(th[1].pname, sizeof(th[1].pname), "%s-server", ring);
	for (uint32_t i = 0; i < 5; i++) {
		/* send: name 2, cat 1; recv: name 3, cat 1 */
		r[2 * i] = (struct shmt_record){ .ts = ts0 + i * 1000, .dur = 100, .flow = i + 1,
						 .pid = pa, .tid = pa, .name = 2, .cat = 1,
						 .commit = SHMTRACE_KIND_SPAN };
		r[2 * i + 1] = (struct shmt_record){ .ts = ts0 + i * 1000 + 200, .dur = 100,
						     .flow = i + 1, .pid = pb, .tid = pb, .name = 3,
						     .cat = 1, .commit = SHMTRACE_KIND_SPAN };
	}
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, s, 3), 0);
	assert_int_equal(shmt_cap_put_threads(&b, th, 2), 0);
	assert_int_equal(shmt_cap_put_records(&b, 0, r, 10), 0);
	assert_int_equal(shmt_cap_put_end(&b, &e), 0);
	put_file(path, b.data, b.size);
	msgpack_sbuffer_destroy(&b);
}

/* Two runs of two rings exported together: each ring's flow ids and string
 * ids are its own, so no arrow joins the rings and every name is right; the
 * second capture has no ring_id (an older collector): its run_id tells it. */
static void test_two_rings(void **state)
{
	/* the same ids for other texts, and "rpc" under two ids */
	const struct shmt_cap_string sa[3] = { { 1, 3, "rpc" }, { 2, 6, "send-A" }, { 3, 6, "recv-A" } };
	const struct shmt_cap_string sb[3] = { { 1, 3, "net" }, { 2, 6, "send-B" }, { 3, 3, "rpc" } };
	char ra[512], rb[512], rc[512], out[512], one[512], bad[512];
	char *argv[] = { bin, "export", ra, rb, "-o", out, NULL };
	char *json, *err, want[1200];

	(void)state;
	/* tmp() reuses its buffers: argv needs its own */
	snprintf(ra, sizeof(ra), "%s", tmp("ra.cap"));
	snprintf(rb, sizeof(rb), "%s", tmp("rb.cap"));
	snprintf(rc, sizeof(rc), "%s", tmp("rc.cap"));
	snprintf(out, sizeof(out), "%s", tmp("two.json"));
	snprintf(one, sizeof(one), "%s", tmp("one.json"));
	snprintf(bad, sizeof(bad), "%s", tmp("bad.json"));
	/* interleaved in time: flow n of A and flow n of B overlap */
	make_run(tmp("ra.cap"), "ringA", 11, 0x1234567890abcdefull, 100, 200, sa, 10000);
	make_run(tmp("rb.cap"), "ringB", 22, 0, 300, 400, sb, 10500);
	assert_int_equal(run(NULL, tmp("two.err"), argv), 0);
	json = slurp(tmp("two.json"));
	err = slurp(tmp("two.err"));
	/* ten flows of two records each, not five of four */
	assert_int_equal(count(json, "\"ph\":\"s\""), 10);
	assert_int_equal(count(json, "\"ph\":\"t\""), 0);
	assert_int_equal(count(json, "\"ph\":\"f\""), 10);
	assert_non_null(strstr(json, "\"flows\":10,"));
	/* names from each ring's own table */
	assert_int_equal(count(json, "\"name\":\"send-A\""), 5);
	assert_int_equal(count(json, "\"name\":\"recv-A\""), 5);
	assert_int_equal(count(json, "\"name\":\"send-B\""), 5);
	assert_int_equal(count(json, "\"name\":\"rpc\""), 5);
	assert_int_equal(count(json, "\"cat\":\"rpc\""), 20);
	assert_int_equal(count(json, "\"cat\":\"net\""), 20);	/* spans and flow events */
	assert_int_equal(count(json, "\"name\":\"?\""), 0);
	assert_non_null(strstr(err, "the inputs come from 2 different rings"));
	assert_int_equal(count(err, "\n"), 1);
	snprintf(want, sizeof(want), "\"input\":\"%s\",\"inputs\":[\"%s\",\"%s\"],"
		 "\"rings\":[{\"name\":\"ringA\",\"ring_id\":\"1234567890abcdef\","
		 "\"run_id\":\"000000000000000b\"},{\"name\":\"ringB\",\"ring_id\":null,"
		 "\"run_id\":\"0000000000000016\"}]", tmp("ra.cap"), tmp("ra.cap"), tmp("rb.cap"));
	if (!strstr(json, want))
		fprintf(stderr, "no %s in %s\n", want, json);
	assert_non_null(strstr(json, want));
	free(json);
	free(err);
	if (have_devtools()) {
		const char *expect[] = { "--expect-flows", "10", "--expect-flow-pids", "100,200",
					 "--expect-flow-pids", "300,400", NULL };
		int rc = check_trace(tmp("two.json"), expect);

		if (rc) {
			print_file(tmp("check.err"));
			print_file(tmp("check.out"));
		}
		assert_int_equal(rc, 0);
	}

	/* svg draws the same ten arrows, not fifteen between four processes */
	{
		char svg[512];
		char *sargv[] = { bin, "svg", ra, rb, "-o", svg, NULL };

		snprintf(svg, sizeof(svg), "%s", tmp("two.svg"));
		assert_int_equal(run(NULL, NULL, sargv), 0);
		json = slurp(svg);
		assert_int_equal(count(json, "<path class=\"a\""), 10);
		free(json);
	}

	/* one ring alone: no word about rings */
	argv[3] = "-o";
	argv[4] = one;
	argv[5] = NULL;
	assert_int_equal(run(NULL, tmp("one.err"), argv), 0);
	err = slurp(tmp("one.err"));
	assert_null(strstr(err, "rings"));
	free(err);
	json = slurp(tmp("one.json"));
	assert_int_equal(count(json, "\"ph\":\"s\""), 5);
	assert_int_equal(count(json, "\"name\":\"send-A\""), 5);
	free(json);

	/* one run id with two ring ids: the files contradict each other */
	make_run(tmp("rc.cap"), "ringC", 11, 0x42, 500, 600, sb, 10000);
	argv[3] = rc;
	argv[4] = "-o";
	argv[5] = bad;
	argv[6] = NULL;
	assert_int_equal(run(NULL, tmp("bad.err"), argv), 1);
	err = slurp(tmp("bad.err"));
	assert_non_null(strstr(err, "export them separately"));
	assert_int_equal(count(err, "\n"), 1);
	free(err);
}

/* Spans that start together on one thread: each flow must bind to the
 * slice that carries it, not to an outer one of the same start. */
static void test_flow_start_collisions(void **state)
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
	char cap[512], out[512];
	char *argv[] = { bin, "export", cap, "-o", out, NULL };
	msgpack_sbuffer b;
	char *json;

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("coll.cap"));
	snprintf(out, sizeof(out), "%s", tmp("coll.json"));
	snprintf(h.ring, sizeof(h.ring), "coll");
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, str, 7), 0);
	assert_int_equal(shmt_cap_put_threads(&b, th, 2), 0);
	assert_int_equal(shmt_cap_put_records(&b, 0, r, 12), 0);
	assert_int_equal(shmt_cap_put_end(&b, &end), 0);
	put_file(cap, b.data, b.size);
	msgpack_sbuffer_destroy(&b);

	assert_int_equal(run(NULL, tmp("coll.err"), argv), 0);
	json = slurp(out);
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

/* ---------------------------------------------------------------- bad input */

static void test_bad_files(void **state)
{
	unsigned char junk[4096];
	char *err;

	(void)state;
	put_file(tmp("empty"), "", 0);
	srand(1);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)rand();
	put_file(tmp("junk"), junk, sizeof(junk));
	assert_int_equal(export_files(tmp("x.json"), tmp("x.err"), tmp("empty"), NULL), 1);
	err = slurp(tmp("x.err"));
	assert_non_null(strstr(err, "empty"));
	assert_int_equal(count(err, "\n"), 1);
	free(err);
	assert_int_equal(export_files(tmp("x.json"), tmp("x.err"), tmp("junk"), NULL), 1);
	assert_int_equal(export_files(tmp("x.json"), tmp("x.err"), tmp("missing"), NULL), 1);
	{
		char *a1[] = { bin, "stat", (char *)tmp("junk"), NULL };
		char *a2[] = { bin, "summary", (char *)tmp("empty"), NULL };
		char *a3[] = { bin, "export", "--bogus", NULL };
		char *a4[] = { bin, "export", "--ring", NULL };
		char *a5[] = { bin, "export", "--from", "soon", "x", "-o", "-", NULL };
		char *a6[] = { bin, "export", "x", NULL };
		char *a7[] = { bin, "--version", NULL };

		assert_int_equal(run(NULL, NULL, a1), 1);
		assert_int_equal(run(NULL, NULL, a2), 1);
		assert_int_equal(run(NULL, tmp("u.err"), a3), 2);
		err = slurp(tmp("u.err"));
		assert_non_null(strstr(err, "Try 'shmtrace export --help'"));
		free(err);
		assert_int_equal(run(NULL, NULL, a4), 2);
		assert_int_equal(run(NULL, NULL, a5), 2);
		assert_int_equal(run(NULL, NULL, a6), 2);
		assert_int_equal(run(tmp("v.out"), NULL, a7), 0);
		err = slurp(tmp("v.out"));
		assert_string_equal(err, "shmtrace " SHMTRACE_VERSION "\n");
		free(err);
	}
	/* a write error (here: file too large) is an error exit, not a
	 * silent truncation, and the partial output is removed */
	if (access(tmp("cap.0"), R_OK) == 0) {
		char *a[] = { bin, "export", (char *)tmp("cap.0"), "-o", (char *)tmp("big.json"), NULL };

		fsize_limit = 1000;
		assert_int_equal(run(NULL, tmp("big.err"), a), 1);
		fsize_limit = 0;
		err = slurp(tmp("big.err"));
		assert_non_null(strstr(err, "big.json"));
		free(err);
		assert_int_equal(access(tmp("big.json"), F_OK), -1);
	}
}

static void scribble(const char *ring, uint64_t off, const void *buf, size_t n)
{
	char path[300];
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, n, (off_t)off), (ssize_t)n);
	close(fd);
}

static void test_bad_rings(void **state)
{
	const char *ring = test_ring_name("expbad");
	struct shmtrace_ring_config cfg = { .capacity = 256 };
	struct shmt_header h;
	shmtrace_t *t;
	unsigned char junk[512];
	uint64_t huge = 1ull << 62;
	char *json;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &cfg), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (int i = 0; i < 100; i++) {
		uint32_t n = shmtrace_intern(t, i % 2 ? "odd" : "even");

		shmtrace_span(t, n, n, 100 + (uint64_t)i, 200 + (uint64_t)i, (uint64_t)i % 3);
	}
	shmtrace_flush(t);
	{
		char path[300];
		int fd;

		snprintf(path, sizeof(path), "/dev/shm/%s", ring);
		fd = open(path, O_RDONLY);
		assert_int_equal(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
		close(fd);
	}
	/* garbage in the string table and heap, a head far ahead */
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 37 + 11);
	scribble(ring, h.strings_off, junk, 64);
	scribble(ring, h.heap_off, junk, sizeof(junk));
	scribble(ring, offsetof(struct shmt_header, head), &huge, sizeof(huge));
	scribble(ring, offsetof(struct shmt_header, threads), &huge, 4);
	assert_int_equal(export_ring(ring, tmp("bad.json"), tmp("badring.err")), 0);
	json = slurp(tmp("bad.json"));
	/* everything in the window is torn now; the output still parses */
	assert_non_null(strstr(json, "\"torn\":256"));
	free(json);
	if (have_devtools()) {
		const char *none[] = { NULL };

		assert_int_equal(check_trace(tmp("bad.json"), none), 0);
	}
	{
		char *a[] = { bin, "stat", (char *)ring, NULL };

		assert_int_equal(run(NULL, NULL, a), 0);
	}
	/* a broken header: refused with a reason */
	scribble(ring, 0, junk, 64);
	assert_int_equal(export_ring(ring, tmp("bad.json"), tmp("badring.err")), 1);
	json = slurp(tmp("badring.err"));
	assert_non_null(strstr(json, ring));
	free(json);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* ------------------------------------------------- through the collector */

static void test_capture_from_collector(void **state)
{
	const char *ring = test_ring_name("expcol");
	char col[600], fdarg[16], ready[8] = "";
	int rfd[2], st;
	pid_t cpid, kid;
	shmtrace_t *t;
	char *json;

	(void)state;
	snprintf(col, sizeof(col), "%s-collector", bin);
	if (access(col, X_OK) < 0)
		skip();
	shmtrace_ring_unlink(ring);
	assert_int_equal(pipe(rfd), 0);
	cpid = fork();
	assert_true(cpid >= 0);
	if (cpid == 0) {
		char *argv[] = { col, "--ring", (char *)ring, "--output", (char *)tmp("col.cap"),
				 "--create", "--capacity", "4096", "--ready-fd", fdarg, NULL };

		close(rfd[0]);
		snprintf(fdarg, sizeof(fdarg), "%d", rfd[1]);
		execv(col, argv);
		_exit(127);
	}
	close(rfd[1]);
	/* the collector says when it drains; no sleeping */
	assert_int_equal(read(rfd[0], ready, sizeof(ready) - 1), 6);
	close(rfd[0]);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	kid = fork();
	if (kid == 0) {
		uint32_t n = shmtrace_intern(t, "child");
		uint64_t t0 = shmtrace_now();

		for (int i = 0; i < 200; i++)
			shmtrace_span(t, n, n, t0 + (uint64_t)i * 10, t0 + (uint64_t)i * 10 + 5,
				      i == 100 ? 77 : 0);
		shmtrace_close(t);
		_exit(0);
	}
	waitpid(kid, &st, 0);
	{
		uint32_t n = shmtrace_intern(t, "parent");
		uint64_t t1 = shmtrace_now();

		shmtrace_span(t, n, n, t1, t1 + 5, 77);
	}
	shmtrace_close(t);
	kill(cpid, SIGTERM);
	waitpid(cpid, &st, 0);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	{
		char *argv[] = { bin, "export", (char *)tmp("col.cap"), "-o", (char *)tmp("col.json"), NULL };
		char *sargv[] = { bin, "stat", (char *)tmp("col.cap"), NULL };
		char *margv[] = { bin, "summary", (char *)tmp("col.cap"), "--json", NULL };

		assert_int_equal(run(NULL, tmp("col.err"), argv), 0);
		assert_int_equal(run(tmp("stat.out"), NULL, sargv), 0);
		json = slurp(tmp("stat.out"));
		assert_non_null(strstr(json, "clean"));
		free(json);
		assert_int_equal(run(tmp("sum.out"), NULL, margv), 0);
		json = slurp(tmp("sum.out"));
		assert_non_null(strstr(json, "\"name\":\"child\",\"count\":200,\"total_ns\":1000,"));
		free(json);
	}
	json = slurp(tmp("col.json"));
	assert_int_equal(count(json, "\"name\":\"child\""), 200);
	assert_int_equal(count(json, "\"name\":\"parent\""), 1);
	assert_int_equal(count(json, "\"ph\":\"s\""), 1);
	assert_int_equal(count(json, "\"ph\":\"f\""), 1);
	assert_non_null(strstr(json, "\"complete\":true"));
	{
		char want[400];

		/* the collector carried the ring's random identity over */
		snprintf(want, sizeof(want), "\"rings\":[{\"name\":\"%s\",\"ring_id\":\"", ring);
		assert_non_null(strstr(json, want));
	}
	free(json);
	if (have_devtools()) {
		char chain[64];
		const char *expect[] = { "--expect-flows", "1", "--expect-flow-pids", chain, NULL };

		snprintf(chain, sizeof(chain), "%d,%d", kid, getpid());
		int rc = check_trace(tmp("col.json"), expect);

		if (rc) {
			print_file(tmp("check.err"));
			print_file(tmp("check.out"));
		}
		assert_int_equal(rc, 0);
	}
	shmtrace_ring_unlink(ring);
}

/* ---------------------------------------------------------------- stat */

/* The JSON object of producer pid in stat's output, up to its closing brace. */
static void expect_producer(const char *json, pid_t pid, const char *name, bool alive)
{
	char key[96];
	const char *p, *e;

	snprintf(key, sizeof(key), "{\"pid\":%d,\"name\":\"%s\",\"start_time\":", (int)pid, name);
	p = strstr(json, key);
	if (!p)
		fprintf(stderr, "no %s in %s\n", key, json);
	assert_non_null(p);
	e = strchr(p, '}');
	assert_non_null(e);
	assert_true((size_t)(e - p) > strlen(key));
	assert_int_equal(strncmp(e - (alive ? 12 : 13), alive ? "\"alive\":true" : "\"alive\":false",
				 alive ? 12 : 13),
			 0);
}

/* A ring filled past capacity in discard mode by a producer that exited
 * and one that lives on: the counters and who is alive, as JSON and text. */
static void test_stat_ring(void **state)
{
	const char *ring = test_ring_name("expstat");
	struct shmtrace_ring_config cfg = { .capacity = 1024, .mode = SHMTRACE_MODE_DISCARD };
	char *argv[] = { bin, "stat", "--json", (char *)ring, NULL };
	char *targv[] = { bin, "stat", (char *)ring, NULL };
	char want[64];
	shmtrace_t *t;
	pid_t kid;
	char *out;
	int st;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &cfg), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		uint32_t n = shmtrace_intern(t, "dead");

		shmtrace_set_process_name(t, "stat-dead");
		for (int i = 0; i < 10; i++)
			shmtrace_span(t, n, n, 100, 200, 0);
		shmtrace_close(t);
		_exit(0);
	}
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	shmtrace_set_process_name(t, "stat-live");
	{
		uint32_t n = shmtrace_intern(t, "live");

		/* no collector: the ring fills at 1024 and the rest is dropped */
		for (int i = 0; i < 2000; i++)
			shmtrace_span(t, n, n, 300, 400, 0);
	}
	/* the ring is full: the flush drops its records and says so */
	assert_int_equal(shmtrace_flush(t), -ENOSPC);

	assert_int_equal(run(tmp("stat.json"), tmp("stat.err"), argv), 0);
	out = slurp(tmp("stat.json"));
	assert_non_null(strstr(out, "\"capacity\":1024,"));
	assert_non_null(strstr(out, "\"mode\":\"discard\""));
	/* published is the head: everything that fitted */
	assert_non_null(strstr(out, "\"published\":1024,"));
	assert_non_null(strstr(out, "\"consumed\":0,"));
	assert_non_null(strstr(out, "\"fill\":1024,"));
	assert_non_null(strstr(out, "\"dropped\":986,"));
	assert_non_null(strstr(out, "\"overwritten\":0,"));
	assert_non_null(strstr(out, "\"collector_pid\":0,"));
	snprintf(want, sizeof(want), "\"ring\":\"%s\"", ring);
	assert_non_null(strstr(out, want));
	expect_producer(out, kid, "stat-dead", false);
	expect_producer(out, getpid(), "stat-live", true);
	/* one object, one line */
	assert_int_equal(out[0], '{');
	assert_int_equal(count(out, "\n"), 1);
	assert_string_equal(out + strlen(out) - 3, "]}\n");
	free(out);

	assert_int_equal(run(tmp("stat.txt"), NULL, targv), 0);
	out = slurp(tmp("stat.txt"));
	assert_non_null(strstr(out, "\ncapacity:           1024\n"));
	assert_non_null(strstr(out, "\ndropped:            986\n"));
	snprintf(want, sizeof(want), "  %8d  stat-dead  dead\n", (int)kid);
	assert_non_null(strstr(out, want));
	snprintf(want, sizeof(want), "  %8d  stat-live  alive\n", (int)getpid());
	assert_non_null(strstr(out, want));
	free(out);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* A capture that ended with its END frame is clean; one without is cut,
 * which stat reports (exit 0: the file is still readable). */
static void test_stat_capture_clean_cut(void **state)
{
	msgpack_sbuffer b;
	char clean[512], cut[512];
	char *sargv[] = { bin, "stat", clean, NULL };
	char *jargv[] = { bin, "stat", "--json", cut, NULL };
	char *cargv[] = { bin, "stat", cut, NULL };
	char *out;

	(void)state;
	/* copies: tmp() reuses its buffers */
	snprintf(clean, sizeof(clean), "%s", tmp("clean.cap"));
	snprintf(cut, sizeof(cut), "%s", tmp("cut.cap"));
	make_part(&b, 0, 0, 10, true, NULL);
	put_file(clean, b.data, b.size);
	msgpack_sbuffer_destroy(&b);
	make_part(&b, 0, 0, 10, false, NULL);
	put_file(cut, b.data, b.size);
	msgpack_sbuffer_destroy(&b);

	assert_int_equal(run(tmp("clean.out"), NULL, sargv), 0);
	out = slurp(tmp("clean.out"));
	assert_non_null(strstr(out, "\nend:                clean\n"));
	assert_non_null(strstr(out, "\nrecords:            10\n"));
	assert_non_null(strstr(out, "\ndropped:            3\n"));
	assert_null(strstr(out, "end_detail"));
	free(out);

	assert_int_equal(run(tmp("cut.out"), NULL, cargv), 0);
	out = slurp(tmp("cut.out"));
	assert_non_null(strstr(out, "\nend:                cut\n"));
	assert_non_null(strstr(out, "\nend_detail:"));
	free(out);

	assert_int_equal(run(tmp("cut.json"), NULL, jargv), 0);
	out = slurp(tmp("cut.json"));
	assert_non_null(strstr(out, "\"end\":\"cut\""));
	assert_non_null(strstr(out, "\"records\":10,"));
	assert_non_null(strstr(out, "\"end_frames\":0,"));
	free(out);
}

static int setup(void **state)
{
	const char *b = getenv("SHMTRACE_BIN");

	(void)state;
	snprintf(bin, sizeof(bin), "%s/shmtrace", b ? b : "build");
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/shmt-export-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	return access(bin, X_OK);
}

static int teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flows_across_killed_processes),
		cmocka_unit_test(test_killed_while_holding_lock),
		cmocka_unit_test(test_capture_parts_dedup_cut),
		cmocka_unit_test(test_two_rings),
		cmocka_unit_test(test_flow_start_collisions),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_bad_rings),
		cmocka_unit_test(test_capture_from_collector),
		cmocka_unit_test(test_stat_ring),
		cmocka_unit_test(test_stat_capture_clean_cut),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
