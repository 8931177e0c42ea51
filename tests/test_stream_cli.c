/* SPDX-License-Identifier: MIT */
/*
 * test_stream_cli.c - `shmtrace stream` on captures: stopped part way and
 * run again, it goes on from its checkpoint, sending nothing twice;
 * --otlp-sample keeps the flows' traces, or the same fraction of traces
 * on every run; records further behind than --otlp-max-lag are skipped
 * and counted; past --otlp-max-held events held, the oldest go out
 * without the span around them; it waits while its collector's drain is
 * behind; the collector starts its stream again when it stops; the spans
 * a killed producer was inside go out unfinished; bad options are one
 * line and exit 2, from the stream or the collector; a capture that is
 * none leaves no file beside it, and the status is as private as the
 * capture.
 */
#include <poll.h>
#include <sys/inotify.h>

#include "stream_run.h"

/* A capture of flow_run(n) and of solo spans in no flow, made by a
 * collector without a stream. */
static void flow_capture(const char *ring, const char *cap, int n, int solo)
{
	struct shmtrace_ring_config cfg = { .capacity = 1 << 16 };
	pid_t col;
	int st;

	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &cfg), 0);
	col = cli_collector(ring, cap);
	flow_run(ring, n);
	if (solo) {
		shmtrace_t *t;
		uint32_t name;

		assert_int_equal(shmtrace_open(ring, &t), 0);
		name = shmtrace_intern(t, "solo");
		for (int i = 0; i < solo; i++) {
			uint64_t t0 = shmtrace_now();

			shmtrace_span(t, name, name, t0, t0 + 100, 0);
		}
		shmtrace_close(t);
	}
	kill(col, SIGTERM);
	assert_int_equal(waitpid(col, &st, 0), col);
	shmtrace_ring_unlink(ring);
}

static void copy(const char *from, const char *to)
{
	char cmd[1200];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	assert_int_equal(system(cmd), 0);
}

/* `shmtrace stream cap --otlp-endpoint URL` and more (NULL-terminated):
 * its exit status, stderr in err. */
static int stream(const char *cap, const struct receiver *r, const char *err,
		  const char *const *more)
{
	char url[64];
	const char *argv[24] = { bin, "stream", cap, "--otlp-endpoint", url };
	int n = 5;

	endpoint_of(r, url, sizeof(url));
	for (; more && *more && n < 22; more++)
		argv[n++] = *more;
	return run_for(NULL, err, (char *const *)argv, 120);
}

/* SIGTERM while the third request waits on the endpoint, which takes it
 * then: run again, the stream sends the rest, each span once. */
static void test_stopped_stream_goes_on_from_its_checkpoint(void **state)
{
	const char *ring = test_ring_name("strcp");
	char cap[512], url[64];
	const char *caps[] = { cap, NULL };
	const char *argv[] = { bin, "stream", cap, "--otlp-endpoint", url, "--otlp-batch", "100",
			       NULL };
	const char *more[] = { "--otlp-batch", "100", NULL };
	struct receiver r;
	pid_t p;
	int st;

	(void)state;
	if (!have_receiver())
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("cp.cap"));
	flow_capture(ring, cap, 200, 0);
	receiver_start(&r, "recv-cp", "200,200,stall", 2, 0);
	endpoint_of(&r, url, sizeof(url));
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		int e = open(tmp("cp1.err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(e, 2);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	receiver_wait(&r);
	kill(p, SIGTERM);
	receiver_release(&r);
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	expect_in(tmp("cp1.err"), "(stopped)");
	assert_true(stream_stat(cap, "sent") < 200 * FLOW_RUN_SPANS);
	assert_int_equal(stream(cap, &r, tmp("cp2.err"), more), 0);
	expect_in(tmp("cp2.err"), "(finished)");
	expect_as_export(&r, caps, NULL);
	assert_int_equal(stream_stat(cap, "sent"), 200 * FLOW_RUN_SPANS);
	/* and again: nothing more to send */
	assert_int_equal(stream(cap, &r, tmp("cp3.err"), more), 0);
	assert_int_equal(stream_stat(cap, "sent"), 200 * FLOW_RUN_SPANS);
	expect_as_export(&r, caps, NULL);
	receiver_stop(&r);
}

static void test_sampling_keeps_flows_or_a_ratio_of_traces(void **state)
{
	const char *ring = test_ring_name("strsmp");
	char cap[512], capf[512], capr[512];
	const char *caps[] = { cap, NULL };
	const char *flows[] = { "--otlp-sample", "flows", NULL };
	const char *ratio[] = { "--otlp-sample", "ratio=0.5", NULL };
	const char *cflows[] = { "--sample", "flows", NULL };
	const char *cratio[] = { "--sample", "ratio=0.5", NULL };
	struct receiver rf, rr;

	(void)state;
	if (!have_receiver())
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("smp.cap"));
	snprintf(capf, sizeof(capf), "%s", tmp("smp-flows.cap"));
	snprintf(capr, sizeof(capr), "%s", tmp("smp-ratio.cap"));
	flow_capture(ring, cap, 100, 300);
	copy(cap, capf);
	copy(cap, capr);
	receiver_start(&rf, "recv-flows", NULL, 0, 0);
	receiver_start(&rr, "recv-ratio", NULL, 0, 0);
	assert_int_equal(stream(capf, &rf, tmp("smpf.err"), flows), 0);
	assert_int_equal(stream(capr, &rr, tmp("smpr.err"), ratio), 0);
	expect_as_export(&rf, caps, cflows);
	expect_as_export(&rr, caps, cratio);
	assert_int_equal(stream_stat(capf, "sampled_out"), 300);
	assert_int_equal(stream_stat(capf, "sent"), 100 * FLOW_RUN_SPANS);
	receiver_stop(&rf);
	receiver_stop(&rr);
}

/* Ends the capture in b, of that many records, and writes it to path. */
static void capture_end(const char *path, msgpack_sbuffer *b, uint64_t records)
{
	struct shmt_cap_end e = { .records = records };
	FILE *f;

	assert_int_equal(shmt_cap_put_end(b, &e), 0);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(b->data, 1, b->size, f), b->size);
	fclose(f);
	msgpack_sbuffer_destroy(b);
}

/* A capture whose records are an hour old: past --otlp-max-lag 60 each is
 * skipped and counted; with 0, none. */
static void old_capture(const char *path, int n)
{
	struct timespec now;
	struct shmt_cap_header h = { .run_id = 77, .ring_capacity = 4096, .mono0 = 1000,
				     .collector_pid = 1 };
	const struct shmt_cap_string s[] = { { 1, 3, "old" } };
	msgpack_sbuffer b;

	clock_gettime(CLOCK_REALTIME, &now);
	h.realtime0 = ((uint64_t)now.tv_sec - 3600) * 1000000000ull;
	snprintf(h.host, sizeof(h.host), "old-host");
	snprintf(h.ring, sizeof(h.ring), "old-ring");
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, s, 1), 0);
	for (int i = 0; i < n; i++) {
		struct shmt_record r = { .ts = 2000 + 1000 * (uint64_t)i, .dur = 500, .pid = 9,
					 .tid = 9, .name = 1, .cat = 1,
					 .commit = SHMTRACE_KIND_SPAN };

		assert_int_equal(shmt_cap_put_records(&b, (uint64_t)i, &r, 1), 0);
	}
	capture_end(path, &b, (uint64_t)n);
}

static void test_records_past_max_lag_are_skipped_and_counted(void **state)
{
	char cap[512], cap0[512];
	const char *caps[] = { cap0, NULL };
	const char *lag60[] = { "--otlp-max-lag", "60", NULL };
	const char *lag0[] = { "--otlp-max-lag", "0", NULL };
	const char *spans[] = { "--spans", "50", NULL };
	struct receiver r, r0;

	(void)state;
	if (!have_receiver())
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("old.cap"));
	snprintf(cap0, sizeof(cap0), "%s", tmp("old0.cap"));
	old_capture(cap, 50);
	copy(cap, cap0);
	receiver_start(&r, "recv-lag", NULL, 0, 0);
	receiver_start(&r0, "recv-lag0", NULL, 0, 0);
	assert_int_equal(stream(cap, &r, tmp("lag.err"), lag60), 0);
	expect_in(tmp("lag.err"), "behind the capture (--otlp-max-lag 60): skipping ahead");
	assert_int_equal(stream_stat(cap, "skipped"), 50);
	assert_int_equal(stream_stat(cap, "sent"), 0);
	assert_int_equal(access(tmp2(r.dir, "spans.jsonl"), F_OK), -1);
	assert_int_equal(stream(cap0, &r0, tmp("lag0.err"), lag0), 0);
	assert_int_equal(stream_stat(cap0, "skipped"), 0);
	expect_as_export(&r0, caps, spans);
	receiver_stop(&r);
	receiver_stop(&r0);
}

/* A capture of one thread: n "inner" spans one after another and, with
 * tail below n, the "outer" span around all but the last tail, coming
 * after those it holds, as a thread writes it. */
static void nest_capture(const char *path, int n, int tail)
{
	struct shmt_cap_header h = { .run_id = 78, .ring_capacity = 4096, .mono0 = 1000,
				     .collector_pid = 1 };
	const struct shmt_cap_string s[] = { { 1, 5, "inner" }, { 2, 5, "outer" } };
	struct shmt_record r = { .pid = 9, .tid = 9, .cat = 1, .commit = SHMTRACE_KIND_SPAN };
	msgpack_sbuffer b;

	h.realtime0 = 1000000000ull;
	snprintf(h.host, sizeof(h.host), "nest-host");
	snprintf(h.ring, sizeof(h.ring), "nest-ring");
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, s, 2), 0);
	for (int k = 0, i = 0; k < n + (tail < n); k++) {
		bool outer = tail < n && k == n - tail;

		r.name = outer ? 2 : 1;
		r.ts = outer ? 1500 : 2000 + 1000 * (uint64_t)i;
		r.dur = outer ? 1000 * (uint64_t)(n - tail) : 500;
		i += !outer;
		assert_int_equal(shmt_cap_put_records(&b, (uint64_t)k, &r, 1), 0);
	}
	capture_end(path, &b, (uint64_t)n + (tail < n));
}

/* How many spans the receiver took whose parent is the span named name. */
static int children_of(const struct receiver *r, const char *name)
{
	char *all = slurp(tmp2(r->dir, "spans.jsonl")), want[96], *p;
	int n = 0;

	snprintf(want, sizeof(want), "\"name\": \"%s\"", name);
	p = strstr(all, want);
	assert_non_null(p);
	while (p > all && p[-1] != '\n')
		p--;
	p = strstr(p, "\"spanId\": \"");
	assert_non_null(p);
	snprintf(want, sizeof(want), "\"parentSpanId\": \"%.16s\"", p + 11);
	for (p = all; (p = strstr(p, want)); p++)
		n++;
	free(all);
	return n;
}

/* Past --otlp-max-held events held, the oldest go as they are, down to
 * an eighth below the bound: a span around 2900 others keeps as children
 * only those still held when it comes, and every span goes out once,
 * the 100 after it too; under the default bound, all 2900 are its
 * children. With a bound of 1024: 1024 held, the 1025th sends 129 (896
 * left), and so every 129 after; after 2900, 896 + (2900 - 1025) % 129
 * = 965 are held. And 2871 spans in no span: the release at the 2831st
 * leaves 896 held, with the entries of what was sent past the bound (a
 * heap of 2831) dropped from the order the rest goes out in by time;
 * those 896 and the 40 after still go out at the end. */
static void test_spans_past_max_held_go_out_without_their_parent(void **state)
{
	char cap[512], cap0[512], flat[512];
	const char *held[] = { "--otlp-max-lag", "0", "--otlp-max-held", "1024", NULL };
	const char *whole[] = { "--otlp-max-lag", "0", NULL };
	struct receiver r, r0, rf;
	int kept;

	(void)state;
	if (!have_receiver())
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("nest.cap"));
	snprintf(cap0, sizeof(cap0), "%s", tmp("nest0.cap"));
	snprintf(flat, sizeof(flat), "%s", tmp("flat.cap"));
	nest_capture(cap, 3000, 100);
	copy(cap, cap0);
	nest_capture(flat, 2871, 2871);
	receiver_start(&r, "recv-held", NULL, 0, 0);
	receiver_start(&r0, "recv-held0", NULL, 0, 0);
	receiver_start(&rf, "recv-flat", NULL, 0, 0);
	assert_int_equal(stream(cap, &r, tmp("held.err"), held), 0);
	assert_int_equal(stream_stat(cap, "sent"), 3001);
	kept = children_of(&r, "outer");
	if (kept != 965)
		fail_msg("the outer span has %d children, not 965", kept);
	assert_int_equal(stream(cap0, &r0, tmp("held0.err"), whole), 0);
	assert_int_equal(stream_stat(cap0, "sent"), 3001);
	assert_int_equal(children_of(&r0, "outer"), 2900);
	assert_int_equal(stream(flat, &rf, tmp("flat.err"), held), 0);
	assert_int_equal(stream_stat(flat, "sent"), 2871);
	receiver_stop(&r);
	receiver_stop(&r0);
	receiver_stop(&rf);
}

/* The collector's stream stops (SIGTERM, as a crash would make it end):
 * the collector starts it again, and it goes on; each span once. */
static void test_collector_starts_its_stream_again(void **state)
{
	const char *ring = test_ring_name("strre");
	char cap[512], *status, *pid;
	const char *caps[] = { cap, NULL };
	const char *more[] = { "--otlp-batch", "100", NULL };
	struct receiver r;
	pid_t col;
	int st, fd;

	(void)state;
	if (!have_receiver())
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("re.cap"));
	receiver_start(&r, "recv-re", NULL, 1, 0);
	col = stream_collector_to(ring, cap, &r, NULL, &fd, more);
	flow_run(ring, 100);
	receiver_wait(&r);
	status = slurp(tmp(".re.cap.otlp-status"));
	pid = strstr(status, "\npid ");
	assert_non_null(pid);
	kill((pid_t)atoi(pid + 5), SIGTERM);
	free(status);
	/* the collector says it starts it again */
	assert_true(read_until(fd, tmp("re.err"), "; starting it again"));
	flow_run(ring, 100);
	kill(col, SIGTERM);
	read_until(fd, tmp("re.err"), NULL);
	close(fd);
	assert_int_equal(waitpid(col, &st, 0), col);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	expect_in(tmp("re.err"), "(finished)");
	expect_as_export(&r, caps, NULL);
	assert_int_equal(stream_stat(cap, "sent"), 200 * FLOW_RUN_SPANS);
	receiver_stop(&r);
	shmtrace_ring_unlink(ring);
}

/* A producer killed inside two open spans, under a streaming collector:
 * both go out unfinished, ending where the collector found it dead, as
 * the export of the capture has them. */
static void test_spans_of_a_killed_producer_go_out_unfinished(void **state)
{
	const char *ring = test_ring_name("strdead");
	char cap[512], *spans;
	const char *caps[] = { cap, NULL };
	struct receiver r;
	pid_t col, p;
	int st;

	(void)state;
	if (!have_receiver())
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("dead.cap"));
	receiver_start(&r, "recv-dead", NULL, 0, 0);
	col = stream_collector(ring, cap, &r, tmp("dead.err"), NULL);
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		struct shmtrace_open_span outer, inner;
		shmtrace_t *t;
		uint32_t cat, k;
		uint64_t t0;

		if (shmtrace_open(ring, &t) < 0)
			_exit(2);
		cat = shmtrace_intern(t, "job");
		k = shmtrace_intern(t, "step");
		shmtrace_begin(t, &outer, cat, shmtrace_intern(t, "outer"), 0);
		shmtrace_begin(t, &inner, cat, shmtrace_intern(t, "inner"), 0);
		shmtrace_span_arg(&inner, shmtrace_arg_int(k, 3));
		t0 = shmtrace_now();
		shmtrace_span(t, cat, shmtrace_intern(t, "done"), t0, shmtrace_now(), 0);
		raise(SIGKILL);
		_exit(1);
	}
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFSIGNALED(st));
	/* the collector's last pass adopts the dead thread's block */
	kill(col, SIGTERM);
	assert_int_equal(waitpid(col, &st, 0), col);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	expect_as_export(&r, caps, NULL);
	spans = slurp(tmp2(r.dir, "spans.jsonl"));
	assert_int_equal(count(spans, "\"shmtrace.unfinished\": true"), 2);
	assert_int_equal(count(spans, "\"shmtrace.arg.step\": 3"), 1);
	free(spans);
	receiver_stop(&r);
	shmtrace_ring_unlink(ring);
}

/* Waits, through inotify (a minute at most: a hang guard), until the
 * stream's status file (written aside, then renamed) says "state WHAT". */
static void wait_state(const char *status, const char *what)
{
	char dir[600], want[64], buf[1024];
	int in = inotify_init1(IN_CLOEXEC);

	snprintf(dir, sizeof(dir), "%s", status);
	*strrchr(dir, '/') = 0;
	snprintf(want, sizeof(want), "state %s\n", what);
	assert_true(in >= 0);
	assert_true(inotify_add_watch(in, dir, IN_MOVED_TO) >= 0);
	for (;;) {
		FILE *f = fopen(status, "re");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		struct pollfd p = { .fd = in, .events = POLLIN };

		if (f)
			fclose(f);
		buf[n] = 0;
		if (strstr(buf, want))
			break;
		assert_int_equal(poll(&p, 1, 60000), 1);
		assert_true(read(in, buf, sizeof(buf)) > 0);
	}
	close(in);
}

/*
 * --pace-fd, the collector's word: at 'p' (its drain is behind) the
 * stream waits before it sends anything, says "paused", and reads on at
 * 'g', or when the collector's end of the pipe closes (it died), sending
 * every span once either way.
 */
static void test_stream_waits_while_its_collector_says_behind(void **state)
{
	const char *ring = test_ring_name("strpace");
	char cap[512], url[64], fd[16];
	const char *caps[] = { cap, NULL };
	const char *argv[] = { bin, "stream", cap, "--otlp-endpoint", url, "--pace-fd", fd, NULL };
	struct receiver r;
	int pp[2], st;
	pid_t p;

	(void)state;
	if (!have_receiver())
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("pace.cap"));
	flow_capture(ring, cap, 100, 0);
	for (int by_close = 0; by_close < 2; by_close++) {
		char ckpt[600];

		snprintf(ckpt, sizeof(ckpt), "%s", tmp(".pace.cap.otlp-checkpoint"));
		unlink(ckpt);
		receiver_start(&r, by_close ? "recv-pace2" : "recv-pace1", NULL, 0, 0);
		endpoint_of(&r, url, sizeof(url));
		assert_int_equal(pipe(pp), 0);
		assert_int_equal(write(pp[1], "p", 1), 1);
		snprintf(fd, sizeof(fd), "%d", pp[0]);
		p = fork();
		assert_true(p >= 0);
		if (p == 0) {
			int e = open(tmp("pace.err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);

			dup2(e, 2);
			close(pp[1]);
			execv(bin, (char *const *)argv);
			_exit(127);
		}
		close(pp[0]);
		wait_state(tmp(".pace.cap.otlp-status"), "paused");
		/* no request came: the receiver logs each */
		assert_int_not_equal(access(tmp2(r.dir, "log"), F_OK), 0);
		if (by_close)
			close(pp[1]);
		else
			assert_int_equal(write(pp[1], "g", 1), 1);
		assert_int_equal(waitpid(p, &st, 0), p);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		if (!by_close)
			close(pp[1]);
		expect_in(tmp("pace.err"), "(finished)");
		expect_as_export(&r, caps, NULL);
		assert_int_equal(stream_stat(cap, "sent"), 100 * FLOW_RUN_SPANS);
		receiver_stop(&r);
	}
}

/* Whether tmp(".NAME.otlp-WHAT") is there. */
static bool side_file(const char *name, const char *what)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/.%s.otlp-%s", tmpdir, name, what);
	return access(path, F_OK) == 0;
}

/*
 * A capture that is not there, or is none (a directory, an empty file,
 * other bytes), fails the stream before anything is made beside it, and
 * a stream that follows one that fails so removes the lock and status it
 * made; a lock from before stays.
 */
static void test_bad_capture_leaves_nothing_beside_it(void **state)
{
	/* followed, a capture not there yet, or with no whole header yet,
	 * is waited for: only the others fail then */
	static const struct {
		const char *name;
		bool followed_fails;
	} bad[] = { { "nothere.cap", false }, { "adir", true }, { "empty.cap", false },
		    { "bytes.cap", true } };
	char lock[600], bytes[256];
	char *argv[] = { bin, "stream", NULL, "--otlp-endpoint", "http://127.0.0.1:1", NULL, NULL };

	(void)state;
	assert_int_equal(mkdir(tmp("adir"), 0700), 0);
	put_file(tmp("empty.cap"), "", 0);
	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (char)(i * 37 + 11);
	put_file(tmp("bytes.cap"), bytes, sizeof(bytes));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		argv[2] = (char *)tmp(bad[i].name);
		for (int follow = 0; follow <= bad[i].followed_fails; follow++) {
			argv[5] = follow ? "--follow" : NULL;
			assert_int_equal(run_for(NULL, tmp("badin.err"), argv, 60), 1);
			assert_false(side_file(bad[i].name, "lock"));
			assert_false(side_file(bad[i].name, "status"));
			assert_false(side_file(bad[i].name, "checkpoint"));
		}
	}
	/* a lock an earlier stream left is not this run's to remove */
	snprintf(lock, sizeof(lock), "%s/.adir.otlp-lock", tmpdir);
	put_file(lock, "", 0);
	assert_int_equal(chmod(lock, 0600), 0);
	argv[2] = (char *)tmp("adir");
	argv[5] = "--follow";
	assert_int_equal(run_for(NULL, tmp("badin.err"), argv, 60), 1);
	assert_true(side_file("adir", "lock"));
	assert_false(side_file("adir", "status"));
	unlink(lock);
	rmdir(tmp("adir"));
}

/*
 * The status describes the capture: readable by no one the capture does
 * not let read it. It was 0644 beside a 0600 capture.
 */
static void test_status_is_as_private_as_the_capture(void **state)
{
	const char *ring = test_ring_name("strpriv");
	char cap[512], status[600];
	char *argv[] = { bin, "stream", cap, "--otlp-endpoint", "http://127.0.0.1:1", NULL };
	struct stat sb;
	pid_t p;
	int st;

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("private.cap"));
	snprintf(status, sizeof(status), "%s/.private.cap.otlp-status", tmpdir);
	flow_capture(ring, cap, 5, 0);
	assert_int_equal(chmod(cap, 0600), 0);
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		int e = open(tmp("private.err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(e, 2);
		execv(bin, argv);
		_exit(127);
	}
	/* the endpoint refuses: the stream retries, "running"; stopped
	 * before the check, a failed one leaves no stream behind */
	wait_state(status, "running");
	assert_int_equal(stat(status, &sb), 0);
	kill(p, SIGTERM);
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(sb.st_mode & 077, 0);
	/* and so is the last, written as it stopped */
	assert_int_equal(stat(status, &sb), 0);
	assert_int_equal(sb.st_mode & 077, 0);
}

/*
 * Files planted beside the capture by another user, as one can in a
 * folder anyone may write: a FIFO at the checkpoint's name (reading it
 * would hang), and, as root, a lock of another user (who could hold it
 * for good) are refused in one line at once; a backlog that is a link to
 * another capture is left, said, and none of its spans sent.
 */
static void test_files_planted_beside_the_capture_refused(void **state)
{
	const char *ring = test_ring_name("strplant");
	char cap[512], other[512], ckpt[600], lock[600], backlog[600];
	const char *caps[] = { cap, NULL };
	char *const argv[] = { bin, "stream", cap, "--otlp-endpoint", "http://127.0.0.1:1", NULL };
	struct receiver r;
	int fd;

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("plant.cap"));
	snprintf(other, sizeof(other), "%s", tmp("other.cap"));
	snprintf(ckpt, sizeof(ckpt), "%s", tmp(".plant.cap.otlp-checkpoint"));
	snprintf(lock, sizeof(lock), "%s", tmp(".plant.cap.otlp-lock"));
	snprintf(backlog, sizeof(backlog), "%s", tmp(".plant.cap.otlp-backlog.0"));
	flow_capture(ring, cap, 20, 0);
	assert_int_equal(mkfifo(ckpt, 0666), 0);
	run_says(1, argv, ".plant.cap.otlp-checkpoint: not a regular file of this user with no "
		 "other name: refusing it", NULL);
	unlink(ckpt);
	if (geteuid() == 0) {
		/* the run above, refused, removed the lock it made */
		assert_int_equal(access(lock, F_OK), -1);
		fd = open(lock, O_WRONLY | O_CREAT | O_EXCL, 0644);
		assert_true(fd >= 0);
		assert_int_equal(fchown(fd, 65534, 65534), 0);
		close(fd);
		run_says(1, argv, ".plant.cap.otlp-lock: not a regular file of this user", NULL);
		unlink(lock);
	}
	if (have_receiver()) {
		flow_capture(ring, other, 30, 0);
		assert_int_equal(symlink(other, backlog), 0);
		receiver_start(&r, "recv-plant", NULL, 0, 0);
		assert_int_equal(stream(cap, &r, tmp("plant.err"), NULL), 0);
		expect_in(tmp("plant.err"), "shmtrace stream: warning: backlog ");
		expect_in(tmp("plant.err"), ".plant.cap.otlp-backlog.0: not a regular file of this "
			  "user");
		expect_as_export(&r, caps, NULL);
		assert_int_equal(stream_stat(cap, "sent"), 20 * FLOW_RUN_SPANS);
		receiver_stop(&r);
		unlink(backlog);
	}
}

static void test_bad_options_say_one_line(void **state)
{
	const char *ring = test_ring_name("strbad");
	char *const none[] = { bin, "stream", NULL };
	char *const noep[] = { bin, "stream", "x.cap", NULL };
	char *const ratio[] = { bin, "stream", "x.cap", "--otlp-endpoint", "http://h:1",
				"--otlp-sample", "ratio=2", NULL };
	char *const hdr[] = { bin, "stream", "x.cap", "--otlp-endpoint", "http://h:1",
			      "--otlp-header", "Content-Type=text/plain", NULL };
	char *const held[] = { bin, "stream", "x.cap", "--otlp-endpoint", "http://h:1",
			       "--otlp-max-held", "1000", NULL };
	char *const https[] = { bin, "stream", "x.cap", "--otlp-endpoint", "https://h", NULL };
	char *const nocap[] = { bin, "stream", "/nonexistent/x.cap", "--otlp-endpoint",
				"http://h:1", NULL };
	char *const colsample[] = { collector_bin, "--ring", (char *)ring, "-o", "x.cap",
				    "--otlp-sample", "flows", NULL };
	char *const colproto[] = { collector_bin, "--ring", (char *)ring, "-o", (char *)tmp("bad.cap"),
				   "--create", "--otlp-endpoint", "http://127.0.0.1:1",
				   "--otlp-protocol", "xml", NULL };

	(void)state;
	run_says(2, none, "shmtrace stream: no capture given", NULL);
	run_says(2, noep, "shmtrace stream: --otlp-endpoint URL is required", NULL);
	run_says(2, ratio, "--otlp-sample 'ratio=2': need all, flows or ratio=R", NULL);
	run_says(2, hdr, "--otlp-header 'Content-Type': the stream sets that header", NULL);
	run_says(2, held, "--otlp-max-held '1000': need 1024 to 16777216 events", NULL);
	run_says(2, https, "only http:// endpoints are supported", NULL);
	run_says(1, nocap, "shmtrace stream: /nonexistent/x.cap: No such file or directory", NULL);
	run_says(2, colsample, "--service and the --otlp-* options need --otlp-endpoint", NULL);
	/* the stream checks the options it is passed, before the capture is
	 * opened or the ring kept */
	run_says(2, colproto, "shmtrace stream: --otlp-protocol 'xml': protobuf or json", NULL);
	assert_int_equal(access(tmp("bad.cap"), F_OK), -1);
	assert_int_equal(shmtrace_ring_unlink(ring), -ENOENT);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("streamcli", true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stopped_stream_goes_on_from_its_checkpoint),
		cmocka_unit_test(test_sampling_keeps_flows_or_a_ratio_of_traces),
		cmocka_unit_test(test_records_past_max_lag_are_skipped_and_counted),
		cmocka_unit_test(test_spans_past_max_held_go_out_without_their_parent),
		cmocka_unit_test(test_collector_starts_its_stream_again),
		cmocka_unit_test(test_spans_of_a_killed_producer_go_out_unfinished),
		cmocka_unit_test(test_stream_waits_while_its_collector_says_behind),
		cmocka_unit_test(test_files_planted_beside_the_capture_refused),
		cmocka_unit_test(test_bad_capture_leaves_nothing_beside_it),
		cmocka_unit_test(test_status_is_as_private_as_the_capture),
		cmocka_unit_test(test_bad_options_say_one_line),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
