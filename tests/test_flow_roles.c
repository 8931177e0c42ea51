/* SPDX-License-Identifier: MIT */
/*
 * test_flow_roles.c - a request and its reply instrumented with flow
 * roles, by real processes: the client sends (a span with the flow), the
 * server handles, the client's "wait reply" span receives and ends the
 * flow, twice with one flow id. Recorded through the collector into a
 * capture, and read post-mortem from the ring (also with the client
 * killed while it waits: the role comes from its open span), exported to
 * Chrome JSON and checked by the DevTools engine: each request's arrows
 * go client -> server -> client, and the id used again is a second flow
 * (in the SVG timeline too).
 */
#include "cli_run.h"

#define REQUESTS 2

/*
 * The client: REQUESTS requests with one flow id, each a "send" span
 * with the flow and then, until the reply comes, an open "wait reply"
 * span that receives and ends it. die: killed in the first wait, after
 * the request went out.
 */
static pid_t client(shmtrace_t *t, const int req[2], const int rep[2], bool die)
{
	pid_t pid = fork();
	uint64_t id;

	assert_true(pid >= 0);
	if (pid)
		return pid;
	close(req[0]);
	close(rep[1]);
	id = shmtrace_flow_new(t);
	for (int i = 0; i < REQUESTS; i++) {
		struct shmtrace_open_span wait;

		hop(t, "send", id);
		shmtrace_begin(t, &wait, shmtrace_intern(t, "rpc"), shmtrace_intern(t, "wait reply"),
			       shmtrace_flow_reply(id));
		send_flow(req[1], id);
		if (die)
			raise(SIGKILL);
		recv_flow(rep[0]);
		shmtrace_end(&wait);
	}
	shmtrace_close(t);
	_exit(0);
}

/* The server: handles what comes (a span with the request's flow), and
 * replies; until the client hangs up (or is gone before the reply). */
static pid_t server(shmtrace_t *t, const int req[2], const int rep[2])
{
	pid_t pid = fork();
	uint64_t id;

	assert_true(pid >= 0);
	if (pid)
		return pid;
	close(req[1]);
	close(rep[0]);
	signal(SIGPIPE, SIG_IGN);
	while (read(req[0], &id, sizeof(id)) == (ssize_t)sizeof(id)) {
		hop(t, "handle", id);
		if (write(rep[1], &id, sizeof(id)) != (ssize_t)sizeof(id))
			break;
	}
	shmtrace_close(t);
	_exit(0);
}

/* Runs the two processes on ring; *c and *s get their pids. */
static void request_reply(const char *ring, bool die, pid_t *c, pid_t *s)
{
	int req[2], rep[2], st;
	shmtrace_t *t;

	assert_int_equal(shmtrace_open(ring, &t), 0);
	assert_int_equal(pipe(req), 0);
	assert_int_equal(pipe(rep), 0);
	*s = server(t, req, rep);
	*c = client(t, req, rep, die);
	/* the server sees the end of requests once the client is gone */
	close(req[0]);
	close(req[1]);
	close(rep[0]);
	close(rep[1]);
	waitpid(*c, &st, 0);
	assert_true(die ? WIFSIGNALED(st) : WIFEXITED(st) && WEXITSTATUS(st) == 0);
	waitpid(*s, &st, 0);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	shmtrace_close(t);
}

/* What DevTools draws from json: flows, each one's processes in order. */
static void expect_devtools(const char *json, const char *flows, const char *chain)
{
	const char *expect[2 + 2 * REQUESTS + 1] = { "--expect-flows", flows };
	int n = 2;

	for (int i = 0; i < atoi(flows); i++) {
		expect[n++] = "--expect-flow-pids";
		expect[n++] = chain;
	}
	expect[n] = NULL;
	expect_trace(json, expect);
}

/* Each request is a flow of three steps, the last one the instant that
 * ends the client's wait, and the arrows come back to the client. */
static void expect_round_trips(const char *json_path, pid_t c, pid_t s)
{
	char *json = slurp(json_path), chain[64];

	assert_int_equal(count(json, "\"ph\":\"s\""), REQUESTS);
	assert_int_equal(count(json, "\"ph\":\"t\""), REQUESTS);
	assert_int_equal(count(json, "\"ph\":\"f\""), REQUESTS);
	/* the spans as they were, and their steps at their ends */
	assert_int_equal(count(json, "\"ph\":\"X\""), 3 * REQUESTS);
	assert_int_equal(count(json, "\"receives\":true"), REQUESTS);
	free(json);
	snprintf(chain, sizeof(chain), "%d,%d,%d", c, s, c);
	expect_devtools(json_path, "2", chain);
}

static void test_wait_reply_through_the_collector(void **state)
{
	const char *ring = test_ring_name("rolecol");
	char *argv[] = { bin, "export", (char *)tmp("roles.cap"), "-o", (char *)tmp("roles.json"),
			 NULL };
	/* the whole run in the window: the default, 2 ms, may cut a slow
	 * one (a sanitizer build's server starting) short */
	char *svg[] = { bin, "svg", (char *)tmp("roles.cap"), "--to", "60s",
			 "-o", (char *)tmp("roles.svg"), NULL };
	char *doc;
	pid_t cpid, c, s;
	int st;

	(void)state;
	cpid = cli_collector_create(ring, tmp("roles.cap"));
	request_reply(ring, false, &c, &s);
	kill(cpid, SIGTERM);
	waitpid(cpid, &st, 0);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(run(NULL, tmp("roles.err"), argv), 0);
	expect_round_trips(tmp("roles.json"), c, s);
	/* the SVG timeline: two arrows a request, none from a reply to the
	 * next request */
	assert_int_equal(run(NULL, tmp("svg.err"), svg), 0);
	doc = slurp(tmp("roles.svg"));
	assert_int_equal(count(doc, "<path class=\"a\""), 2 * REQUESTS);
	free(doc);
	shmtrace_ring_unlink(ring);
}

static void test_wait_reply_post_mortem(void **state)
{
	const char *ring = test_ring_name("rolepm");
	struct shmtrace_ring_config cfg = { .capacity = 1024 };
	pid_t c, s;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &cfg), 0);
	request_reply(ring, false, &c, &s);
	assert_int_equal(export_ring(ring, tmp("pm.json"), tmp("pm.err")), 0);
	expect_round_trips(tmp("pm.json"), c, s);
	shmtrace_ring_unlink(ring);
}

/*
 * The client dies waiting: its open span, read from its staging block,
 * keeps its role. Unfinished, it lasts until the client was found dead
 * (by the collector) or, post-mortem, to the end of the trace: past the
 * server's step, which came while it waited, so it receives and ends the
 * flow after it, the round trip drawn whole.
 */
static void expect_killed_wait(const char *json_path, pid_t c, pid_t s)
{
	char chain[64], *json = slurp(json_path);

	assert_int_equal(count(json, "\"unfinished\":true"), 1);
	assert_int_equal(count(json, "\"receives\":true"), 1);
	assert_int_equal(count(json, "\"name\":\"handle\""), 1);
	assert_int_equal(count(json, "\"ph\":\"s\""), 1);
	assert_int_equal(count(json, "\"ph\":\"t\""), 1);
	assert_int_equal(count(json, "\"ph\":\"f\""), 1);
	free(json);
	snprintf(chain, sizeof(chain), "%d,%d,%d", c, s, c);
	expect_devtools(json_path, "1", chain);
}

static void test_client_killed_while_waiting(void **state)
{
	const char *ring = test_ring_name("rolekill");
	struct shmtrace_ring_config cfg = { .capacity = 1024 };
	pid_t c, s;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &cfg), 0);
	request_reply(ring, true, &c, &s);
	assert_int_equal(export_ring(ring, tmp("kill.json"), tmp("kill.err")), 0);
	expect_killed_wait(tmp("kill.json"), c, s);
	shmtrace_ring_unlink(ring);
}

/* The same through the collector, which adopts the dead client's block:
 * the open span it writes into the ring keeps its role in the capture. */
static void test_client_killed_while_waiting_collected(void **state)
{
	const char *ring = test_ring_name("rolekcol");
	char *argv[] = { bin, "export", (char *)tmp("kill.cap"), "-o", (char *)tmp("kcol.json"),
			 NULL };
	pid_t cpid, c, s;
	int st;

	(void)state;
	cpid = cli_collector_create(ring, tmp("kill.cap"));
	request_reply(ring, true, &c, &s);
	kill(cpid, SIGTERM);
	waitpid(cpid, &st, 0);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(run(NULL, tmp("kcol.err"), argv), 0);
	expect_killed_wait(tmp("kcol.json"), c, s);
	shmtrace_ring_unlink(ring);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wait_reply_through_the_collector),
		cmocka_unit_test(test_wait_reply_post_mortem),
		cmocka_unit_test(test_client_killed_while_waiting),
		cmocka_unit_test(test_client_killed_while_waiting_collected),
	};

	return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
