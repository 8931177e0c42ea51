/* SPDX-License-Identifier: MIT */
/*
 * test_stream.c - shmtrace-collector --otlp-endpoint: the spans of real
 * processes' requests reach a loopback OTLP/HTTP receiver while they are
 * captured, each once, with the traces and parents the file export gives
 * the same capture; an endpoint that fails (429, 503, a closed
 * connection, 400, a partial success) is tried again or counted; one
 * that stalls holds back neither the producers nor the capture, and the
 * stream catches up; one that is down and comes back gets everything; a
 * collector SIGKILLed and started again with the same --output sends
 * nothing twice and misses nothing.
 */
#include "stream_run.h"

static void stop_collector(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_flow_run_reaches_the_endpoint_once_as_the_export_models_it(void **state)
{
	const char *ring = test_ring_name("strflow");
	char cap[512];
	const char *caps[] = { cap, NULL };
	char want[32];
	const char *opts[] = { "--spans", want, NULL };
	struct receiver r;
	pid_t col;

	(void)state;
	if (!have_receiver())
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("flow.cap"));
	receiver_start(&r, "recv-flow", NULL, 0, 0);
	col = stream_collector(ring, cap, &r, tmp("flow.err"), NULL);
	flow_run(ring, 200);
	stop_collector(col);
	/* the collector's summary says the stream's */
	expect_in(tmp("flow.err"), "stream: 1000 spans sent to http://127.0.0.1:");
	expect_in(tmp("flow.err"), "(finished)");
	/* protobuf, gzipped, over connections kept open */
	expect_in(tmp2(r.dir, "log"), "200 application/x-protobuf gzip ");
	expect_not_in(tmp2(r.dir, "log"), "application/json");
	snprintf(want, sizeof(want), "%d", 200 * FLOW_RUN_SPANS);
	expect_as_export(&r, caps, opts);
	assert_int_equal(stream_stat(cap, "sent"), 200 * FLOW_RUN_SPANS);
	assert_int_equal(stream_stat(cap, "rejected"), 0);
	receiver_stop(&r);
	shmtrace_ring_unlink(ring);
}

/* 503, 429 (Retry-After), a connection closed without an answer twice
 * (the second on a fresh connection: a failure), then 400 (not tried
 * again: its spans rejected), a partial success of 7: the rest arrives
 * once, in JSON as asked, and the counts say so. */
static void test_failures_are_tried_again_or_counted_rejected(void **state)
{
	const char *ring = test_ring_name("strfail");
	char cap[512];
	const char *caps[] = { cap, NULL };
	const char *more[] = { "--otlp-batch", "100", "--otlp-protocol", "json",
			       "--otlp-compression", "none", NULL };
	const char *opts[] = { "--rejected", "107", NULL };
	struct receiver r;
	pid_t col;

	(void)state;
	if (!have_receiver())
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("fail.cap"));
	receiver_start(&r, "recv-fail", "503,429,close,close,400,p7", 0, 0);
	col = stream_collector(ring, cap, &r, tmp("fail.err"), more);
	flow_run(ring, 100);
	stop_collector(col);
	expect_in(tmp2(r.dir, "log"), "200 application/json identity 100 7");
	expect_not_in(tmp2(r.dir, "log"), "protobuf");
	expect_in(tmp("fail.err"), "answered HTTP 400 Bad Request: receiver says 400: 100 spans "
		  "rejected, not sent again");
	expect_in(tmp("fail.err"), "the endpoint rejected 7 of 100 spans (partial success): "
		  "test rejects");
	expect_as_export(&r, caps, opts);
	assert_int_equal(stream_stat(cap, "retried"), 3);
	assert_int_equal(stream_stat(cap, "rejected"), 107);
	assert_int_equal(stream_stat(cap, "sent"), 100 * FLOW_RUN_SPANS - 107);
	receiver_stop(&r);
	shmtrace_ring_unlink(ring);
}

/* Nothing listens at the endpoint when the stream sends (connections
 * refused); once it said so, the endpoint comes up on that port: the
 * spans arrive, once. */
static void test_endpoint_down_then_up_loses_nothing(void **state)
{
	const char *ring = test_ring_name("strdown");
	char cap[512];
	const char *caps[] = { cap, NULL };
	const char *more[] = { "--otlp-batch", "200", NULL };
	struct receiver r;
	int port, fd, st;
	pid_t col;

	(void)state;
	if (!have_receiver())
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("down.cap"));
	/* a port that refuses connections now */
	receiver_start(&r, "recv-down", NULL, 0, 0);
	port = r.port;
	receiver_stop(&r);
	col = stream_collector_to(ring, cap, &r, NULL, &fd, more);
	flow_run(ring, 100);
	/* the capture ends: the stream sends what it holds, and fails */
	kill(col, SIGTERM);
	assert_true(read_until(fd, tmp("down.err"), "Connection refused; trying again"));
	receiver_start(&r, "recv-down", NULL, 0, port);
	read_until(fd, tmp("down.err"), NULL);
	close(fd);
	assert_int_equal(waitpid(col, &st, 0), col);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	expect_in(tmp("down.err"), "(finished)");
	expect_as_export(&r, caps, NULL);
	assert_true(stream_stat(cap, "retried") >= 1);
	assert_int_equal(stream_stat(cap, "sent"), 100 * FLOW_RUN_SPANS);
	receiver_stop(&r);
	shmtrace_ring_unlink(ring);
}

static void test_stalled_endpoint_drops_nothing_and_the_stream_catches_up(void **state)
{
	const char *ring = test_ring_name("strstall");
	char cap[512], line[16];
	const char *caps[] = { cap, NULL };
	const char *more[] = { "--capacity", "8192", "--otlp-batch", "100", NULL };
	char *argv[] = { bin, "stat", (char *)cap, NULL };
	struct receiver r;
	size_t requests;
	char *s;
	pid_t col;

	(void)state;
	if (!have_receiver())
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("stall.cap"));
	/* the second request waits until the test lets it go */
	receiver_start(&r, "recv-stall", "200,stall", 0, 0);
	/* the stalled request waits for the test, however slow: not given
	 * up on after the default 10 s and sent again */
	setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "600000", 1);
	col = stream_collector(ring, cap, &r, tmp("stall.err"), more);
	unsetenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT");
	flow_run(ring, 40);
	alarm(300);	/* a hang guard: see receiver_wait() */
	assert_true(read(r.notify, line, sizeof(line)) > 0);
	alarm(0);
	assert_memory_equal(line, "stall\n", 6);
	/* while the endpoint stalls: 3000 requests, 39000 records through a
	 * ring of 8192, each written once the ring is half drained, so they
	 * all get in only while the drain runs */
	flow_run_paced(ring, 3000, true);
	assert_int_equal(run(tmp("stall.stat"), NULL, argv), 0);
	s = slurp(tmp("stall.stat"));
	assert_non_null(strstr(s, "\ndropped:            0\n"));
	assert_non_null(strstr(s, "\nlock_dropped:       0\n"));
	free(s);
	/* one request taken, the next one stalled */
	assert_int_equal(stream_stat(cap, "sent"), 100);
	receiver_release(&r);
	stop_collector(col);
	expect_in(tmp("stall.err"), " in 1 file, 0 dropped, 0 lost to lock timeouts");
	expect_as_export(&r, caps, NULL);
	assert_int_equal(stream_stat(cap, "sent"), 3040 * FLOW_RUN_SPANS);
	/* every request over the one connection kept open */
	assert_int_equal(receiver_connections(&r, &requests), 1);
	assert_int_equal(requests, 3040 * FLOW_RUN_SPANS / 100);
	receiver_stop(&r);
	shmtrace_ring_unlink(ring);
}

/* kill -9 the collector once the endpoint took 3 requests, start it
 * again with the same --output while the producers go on: every span
 * arrives once, those the first capture held (kept aside from the new
 * collector's truncation until sent) and the new one's. */
static void test_collector_killed_and_started_again_sends_each_span_once(void **state)
{
	const char *ring = test_ring_name("strkill");
	char cap[512];
	char old[512];
	const char *caps[] = { old, cap, NULL };
	const char *more[] = { "--otlp-batch", "100", NULL };
	char cmd[1200];
	struct receiver r;
	pid_t col;
	int st;

	(void)state;
	if (!have_receiver())
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("kill.cap"));
	snprintf(old, sizeof(old), "%s", tmp("kill-first.cap"));
	receiver_start(&r, "recv-kill", NULL, 3, 0);
	col = stream_collector(ring, cap, &r, tmp("kill.err"), more);
	flow_run(ring, 300);
	receiver_wait(&r);
	kill(col, SIGKILL);
	assert_int_equal(waitpid(col, &st, 0), col);
	/* what the first collector wrote, to compare with (the stream moves
	 * it aside, and removes it once sent) */
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", cap, old);
	assert_int_equal(system(cmd), 0);
	col = stream_collector(ring, cap, &r, tmp("kill.err"), more);
	flow_run(ring, 100);
	stop_collector(col);
	expect_in(tmp("kill.err"), "not sent yet kept aside");
	expect_as_export(&r, caps, NULL);
	assert_int_equal(stream_stat(cap, "sent"), 400 * FLOW_RUN_SPANS);
	assert_int_equal(stream_stat(cap, "skipped"), 0);
	receiver_stop(&r);
	shmtrace_ring_unlink(ring);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("stream", true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flow_run_reaches_the_endpoint_once_as_the_export_models_it),
		cmocka_unit_test(test_failures_are_tried_again_or_counted_rejected),
		cmocka_unit_test(test_endpoint_down_then_up_loses_nothing),
		cmocka_unit_test(test_stalled_endpoint_drops_nothing_and_the_stream_catches_up),
		cmocka_unit_test(test_collector_killed_and_started_again_sends_each_span_once),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
