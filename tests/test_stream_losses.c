/* SPDX-License-Identifier: MIT */
/*
 * test_stream_losses.c - `shmtrace stream` tells the endpoint what the
 * capture lost even when no span carries it, as the file export writes
 * it: a capture of counters only, or of nothing but a LOSS frame, is one
 * request of no span whose scope carries the loss counters (protobuf and
 * JSON); losses that grow after the last span was sent go out in a
 * request of their own once the capture is quiet, or when it ends; a
 * stream run again does not tell the same losses twice; nothing lost,
 * nothing sent. What arrived is read from the receiver's scopes.jsonl
 * (tests/otlp/receiver.py, which decodes protobuf with protoc).
 */
#include "stream_run.h"

static const struct shmt_cap_string strs[] = { { 1, 3, "cat" }, { 2, 4, "work" } };

/* The beginning of a capture of run 7 on host "lossbox" into b: header,
 * strings, pid 100's name slot, records r[0..n) from sequence 0. */
static void cap_begin(msgpack_sbuffer *b, const struct shmt_record *r, size_t n)
{
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .run_id = 7, .ring_id = 7, .ring_capacity = 1024,
		.realtime0 = 1700000000000000000ull, .mono0 = 1000, .started_ns = 1000,
	};
	struct shmt_thread th = { .pid = 100, .tid = 100, .start_time = 5 };

	snprintf(h.ring, sizeof(h.ring), "lossring");
	snprintf(h.host, sizeof(h.host), "lossbox");
	strcpy(th.pname, "alpha");
	msgpack_sbuffer_init(b);
	assert_int_equal(shmt_cap_put_header(b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(b, strs, 2), 0);
	assert_int_equal(shmt_cap_put_threads(b, &th, 1), 0);
	if (n)
		assert_int_equal(shmt_cap_put_records(b, 0, r, n), 0);
}

/* A LOSS frame of dropped records (the ring's count so far: a total), and
 * with end an END frame after it, into b. */
static void cap_loss(msgpack_sbuffer *b, uint64_t dropped, bool end, uint64_t records)
{
	struct shmt_cap_loss loss = { .at_ns = 2000, .dropped = dropped };
	struct shmt_cap_end e = { .records = records, .end_ns = 90000 };

	if (dropped)
		assert_int_equal(shmt_cap_put_loss(b, &loss), 0);
	if (end)
		assert_int_equal(shmt_cap_put_end(b, &e), 0);
}

/* A whole capture at path: records r[0..n), a LOSS frame of dropped
 * records (none when 0), an END frame. */
static void put_cap(const char *path, const struct shmt_record *r, size_t n, uint64_t dropped)
{
	msgpack_sbuffer b;

	cap_begin(&b, r, n);
	cap_loss(&b, dropped, true, n);
	put_file(path, b.data, b.size);
	msgpack_sbuffer_destroy(&b);
}

/* b appended to the capture at path, in one write. */
static void append(const char *path, msgpack_sbuffer *b)
{
	int fd = open(path, O_WRONLY | O_APPEND);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, b->data, b->size), (ssize_t)b->size);
	close(fd);
	msgpack_sbuffer_destroy(b);
}

/* `shmtrace stream cap --otlp-endpoint URL` and more (NULL-terminated):
 * its exit status, stderr in err. The captures are of 2023: no record is
 * skipped for being late. */
static int stream(const char *cap, const struct receiver *r, const char *err,
		  const char *const *more)
{
	char url[64];
	const char *argv[24] = { bin, "stream", cap, "--otlp-endpoint", url, "--otlp-max-lag", "0" };
	int n = 7;

	endpoint_of(r, url, sizeof(url));
	for (; more && *more && n < 22; more++)
		argv[n++] = *more;
	return run_for(NULL, err, (char *const *)argv, 120);
}

/* The scopes the receiver took, one line each (to free; "" when none). */
static char *scopes(const struct receiver *r)
{
	const char *path = tmp2(r->dir, "scopes.jsonl");

	return access(path, F_OK) == 0 ? slurp(path) : strdup("");
}

static size_t lines(const char *s)
{
	size_t n = 0;

	for (; (s = strchr(s, '\n')); s++)
		n++;
	return n;
}

/* Line k of s (from 0), copied into buf. */
static const char *line_of(const char *s, size_t k, char *buf, size_t len)
{
	for (; k && s; k--)
		if ((s = strchr(s, '\n')))
			s++;
	assert_non_null(s);
	snprintf(buf, len, "%.*s", (int)strcspn(s, "\n"), s);
	return buf;
}

/* The integer attribute key of a scope's line (json.dumps: "key": N), or
 * -1 when it has none. */
static long long attr(const char *line, const char *key)
{
	char k[128];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\": ", key);
	p = strstr(line, k);
	return p ? strtoll(p + strlen(k), NULL, 10) : -1;
}

/* The receiver took n scopes in all: line k of them (from 0) into buf. */
static const char *scope_line(const struct receiver *r, size_t n, size_t k, char *buf, size_t len)
{
	char *s = scopes(r);

	assert_int_equal(lines(s), n);
	line_of(s, k, buf, len);
	free(s);
	return buf;
}

/* A scope's line of no span that tells dropped records dropped, and lost. */
static void expect_told(const char *line, long long dropped)
{
	assert_non_null(strstr(line, "\"spans\": 0"));
	assert_int_equal(attr(line, "shmtrace.dropped"), dropped);
	assert_int_equal(attr(line, "shmtrace.records_lost"), dropped);
}

/* Counters only, 3 records dropped: one request of no span, protobuf and
 * gzipped, its resource the stream's own and its scope the counters; run
 * again, nothing more is sent. Then nothing but a LOSS frame, in JSON;
 * and a capture that lost nothing sends nothing. */
static void test_losses_without_spans_reach_the_endpoint_once(void **state)
{
	const struct shmt_record r[] = {
		{ .ts = 3000, .dur = 7, .pid = 100, .tid = 100, .name = 2, .cat = 1,
		  .commit = SHMTRACE_KIND_COUNTER },
	};
	const char *json[] = { "--otlp-protocol", "json", "--otlp-compression", "none",
			       "--service", "svc", NULL };
	char cap[512], line[2048];
	struct receiver rv;

	(void)state;
	if (!have_receiver())
		skip();
	receiver_start(&rv, "recv-nospan", NULL, 0, 0);
	snprintf(cap, sizeof(cap), "%s", tmp("counters.cap"));
	put_cap(cap, r, 1, 3);
	assert_int_equal(stream(cap, &rv, tmp("counters.err"), NULL), 0);
	expect_in(tmp("counters.err"), "0 spans sent to http://127.0.0.1:");
	expect_in(tmp("counters.err"), " in 1 requests,");
	expect_in(tmp2(rv.dir, "log"), "200 application/x-protobuf gzip 0 0 ");
	expect_told(scope_line(&rv, 1, 0, line, sizeof(line)), 3);
	assert_non_null(strstr(line, "\"name\": \"shmtrace\""));
	assert_non_null(strstr(line, "\"service.name\": \"shmtrace\""));
	assert_non_null(strstr(line, "\"host.name\": \"lossbox\""));
	assert_null(strstr(line, "process.pid"));
	assert_int_equal(stream_stat(cap, "requests"), 1);
	assert_int_equal(stream_stat(cap, "sent"), 0);
	/* run again: its checkpoint says the endpoint was told */
	assert_int_equal(stream(cap, &rv, tmp("counters2.err"), NULL), 0);
	scope_line(&rv, 1, 0, line, sizeof(line));
	assert_int_equal(stream_stat(cap, "requests"), 1);

	/* nothing but the LOSS frame, in JSON */
	snprintf(cap, sizeof(cap), "%s", tmp("lossonly.cap"));
	put_cap(cap, NULL, 0, 5);
	assert_int_equal(stream(cap, &rv, tmp("lossonly.err"), json), 0);
	expect_in(tmp2(rv.dir, "log"), "200 application/json identity 0 0 ");
	expect_told(scope_line(&rv, 2, 1, line, sizeof(line)), 5);
	assert_non_null(strstr(line, "\"service.name\": \"svc\""));

	/* nothing lost: nothing to tell */
	snprintf(cap, sizeof(cap), "%s", tmp("clean.cap"));
	put_cap(cap, r, 1, 0);
	assert_int_equal(stream(cap, &rv, tmp("clean.err"), NULL), 0);
	scope_line(&rv, 2, 1, line, sizeof(line));
	assert_int_equal(stream_stat(cap, "requests"), 0);
	receiver_stop(&rv);
}

/* A followed capture: its one span is sent, with no loss to tell; then a
 * LOSS frame comes and the capture is quiet: a request of no span tells
 * the 4 records dropped; then another (6 in all) and the END frame: the
 * last request tells the 6. Run again, the stream sends nothing. */
static void test_losses_after_the_last_span_reach_the_endpoint(void **state)
{
	const struct shmt_record r[] = {
		{ .ts = 3000, .dur = 50, .pid = 100, .tid = 100, .name = 2, .cat = 1,
		  .commit = SHMTRACE_KIND_SPAN },
	};
	char cap[512], url[64], line[2048];
	const char *argv[] = { bin, "stream", cap, "--follow", "--otlp-endpoint", url,
			       "--otlp-hold", "0", "--otlp-max-lag", "0", NULL };
	struct receiver rv;
	msgpack_sbuffer b;
	pid_t p;
	int st;

	(void)state;
	if (!have_receiver())
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("grow.cap"));
	cap_begin(&b, r, 1);
	put_file(cap, b.data, b.size);
	msgpack_sbuffer_destroy(&b);
	receiver_start_at(&rv, "recv-grow", NULL, "1,2", 0);
	endpoint_of(&rv, url, sizeof(url));
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		int e = open(tmp("grow.err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(e, 2);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	/* the span, and no loss yet */
	receiver_wait(&rv);
	scope_line(&rv, 1, 0, line, sizeof(line));
	assert_non_null(strstr(line, "\"spans\": 1"));
	assert_int_equal(attr(line, "shmtrace.dropped"), -1);
	/* losses, and the capture quiet */
	msgpack_sbuffer_init(&b);
	cap_loss(&b, 4, false, 0);
	append(cap, &b);
	receiver_wait(&rv);
	expect_told(scope_line(&rv, 2, 1, line, sizeof(line)), 4);
	/* more, and the end */
	msgpack_sbuffer_init(&b);
	cap_loss(&b, 6, true, 1);
	append(cap, &b);
	alarm(300);	/* a hang guard, as receiver_wait()'s */
	assert_int_equal(waitpid(p, &st, 0), p);
	alarm(0);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	expect_in(tmp("grow.err"), "1 spans sent to http://127.0.0.1:");
	expect_in(tmp("grow.err"), "(finished)");
	expect_told(scope_line(&rv, 3, 2, line, sizeof(line)), 6);
	assert_int_equal(stream_stat(cap, "requests"), 3);
	/* run again: everything was told */
	assert_int_equal(stream(cap, &rv, tmp("grow2.err"), NULL), 0);
	scope_line(&rv, 3, 2, line, sizeof(line));
	assert_int_equal(stream_stat(cap, "requests"), 3);
	assert_int_equal(stream_stat(cap, "sent"), 1);
	receiver_stop(&rv);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("strloss", false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_losses_without_spans_reach_the_endpoint_once),
		cmocka_unit_test(test_losses_after_the_last_span_reach_the_endpoint),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
