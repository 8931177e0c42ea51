/* SPDX-License-Identifier: MIT */
/*
 * test_otlp_send.c - the OTLP export's endpoint: the URLs it accepts, the
 * path it POSTs to, and an endpoint that fails part way (an error status,
 * retries spent, a refused connection) with the spans sent and not sent
 * counted exactly; answers no endpoint should give (a status line with a
 * tab, a body without end, more spans rejected than sent) read safely;
 * what a kept connection is used for; an answer given before the request
 * was taken; long headers; Retry-After and the wait before a retry.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "cli_run.h"
#include "export_read.h"
#include "http.h"
#include "otlp_int.h"
#include "otlp_run.h"

static void test_urls(void **state)
{
	struct http_url u;
	char err[512];

	(void)state;
	assert_int_equal(http_parse_url("http://127.0.0.1:4318", "/v1/traces", &u, err, sizeof(err)), 0);
	assert_string_equal(u.host, "127.0.0.1");
	assert_string_equal(u.port, "4318");
	assert_string_equal(u.path, "/v1/traces");
	assert_string_equal(u.hostport, "127.0.0.1:4318");
	assert_int_equal(http_parse_url("http://collector/otlp/", "/v1/traces", &u, err, sizeof(err)), 0);
	assert_string_equal(u.port, "80");
	assert_string_equal(u.path, "/otlp/v1/traces");
	assert_int_equal(http_parse_url("http://[::1]:4318/", "/v1/traces", &u, err, sizeof(err)), 0);
	assert_string_equal(u.host, "::1");
	assert_string_equal(u.hostport, "[::1]:4318");
	assert_string_equal(u.path, "/v1/traces");
	/* a URL that ends in the suffix already is the whole URL (a traces
	 * endpoint, not a base): used as it is */
	assert_int_equal(http_parse_url("http://h:4318/v1/traces", "/v1/traces", &u, err, sizeof(err)), 0);
	assert_string_equal(u.path, "/v1/traces");
	assert_int_equal(http_parse_url("http://h/otlp/v1/traces/", "/v1/traces", &u, err, sizeof(err)), 0);
	assert_string_equal(u.path, "/otlp/v1/traces");
	/* only a whole last step: /x/v1/tracesfoo is a base */
	assert_int_equal(http_parse_url("http://h/x/v1/tracesfoo", "/v1/traces", &u, err, sizeof(err)), 0);
	assert_string_equal(u.path, "/x/v1/tracesfoo/v1/traces");
	assert_int_equal(http_parse_url("https://x", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "only http://"));
	assert_non_null(strstr(err, "in front of an https one"));
	/* another scheme: no https hint; no scheme at all: not a URL */
	assert_int_equal(http_parse_url("ftp://x", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "'ftp://x': only http:// endpoints are supported");
	assert_int_equal(http_parse_url("foo", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "'foo': not a URL (expected http://HOST:PORT[/PATH])");
	assert_int_equal(http_parse_url("localhost:4318", "/v1/traces", &u, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "not a URL"));
	assert_int_equal(http_parse_url("http://x:0", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
	assert_int_equal(http_parse_url("http://x:70000", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
	assert_int_equal(http_parse_url("http://:80", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
	assert_int_equal(http_parse_url("http://x/a?b", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
	/* a space or a control character would end the request line early */
	assert_int_equal(http_parse_url("http://x/a b", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no space or control character"));
	assert_int_equal(http_parse_url("http://x/a\r\nX-Evil: 1", "/v1/traces", &u, err,
					sizeof(err)), -EINVAL);
	assert_int_equal(http_parse_url("http://[::1", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
}

/* ------------------------------------------------- a failing endpoint */

/* A listening socket on 127.0.0.1; its port in *port. */
static int listen_local(int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s, 8), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
	*port = ntohs(sa.sin_port);
	return s;
}

/* In the endpoint's child: takes one request on s and answers it with
 * answer, then, with trickle, sends a byte every 50 ms for as long as the
 * client reads; returns the spans the request held, or -1. */
static long serve_answer(int s, const char *answer, bool trickle)
{
	size_t got = 0, cap = 1 << 16, want = 0;
	char *buf = malloc(cap + 1), *hend = NULL;
	int fd = accept4(s, NULL, NULL, SOCK_CLOEXEC);
	long spans = -1;

	while (fd >= 0 && buf && (!hend || got < want)) {
		ssize_t r;

		if (got == cap) {
			char *nb = realloc(buf, (cap *= 2) + 1);

			if (!nb)
				break;
			buf = nb;
		}
		r = read(fd, buf + got, cap - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		buf[got] = 0;
		if (!hend && (hend = strstr(buf, "\r\n\r\n"))) {
			const char *cl = strstr(buf, "Content-Length: ");

			want = (size_t)(hend + 4 - buf) + (cl ? strtoul(cl + 16, NULL, 10) : 0);
		}
	}
	if (fd >= 0 && hend && got >= want) {
		spans = (long)count(hend, "\"spanId\"");
		if (write(fd, answer, strlen(answer)) != (ssize_t)strlen(answer))
			spans = -1;
		while (trickle && send(fd, "x", 1, MSG_NOSIGNAL) == 1)
			usleep(50000);
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	return spans;
}

static long serve_one(int s, const char *answer)
{
	return serve_answer(s, answer, false);
}

/*
 * A stand-in endpoint on 127.0.0.1 (*port): answers 200 to the first ok
 * requests, then status to the next bad ones and ends; the spans it took
 * (answered 200) are what endpoint_took() reads from *took_fd.
 */
static pid_t endpoint(int ok, int bad, const char *status, int *port, int *took_fd)
{
	int s = listen_local(port), p[2];
	pid_t pid;

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char no[256];
		long took = 0, n;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);
		close(p[0]);
		snprintf(no, sizeof(no), "HTTP/1.1 %s\r\nContent-Type: text/plain\r\n"
			 "Content-Length: 20\r\nConnection: close\r\n\r\nnot for this test\r\n", status);
		for (int i = 0; i < ok + bad; i++) {
			n = serve_one(s, i < ok ? "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
						  "Content-Length: 21\r\nConnection: close\r\n\r\n"
						  "{\"partialSuccess\":{}}" : no);
			if (n < 0)
				_exit(3);
			took += i < ok ? n : 0;
		}
		_exit(write(p[1], &took, sizeof(took)) == sizeof(took) ? 0 : 3);
	}
	close(s);
	close(p[1]);
	*took_fd = p[0];
	return pid;
}

static long endpoint_took(pid_t pid, int fd)
{
	long took = -1;
	int st;

	assert_int_equal(read(fd, &took, sizeof(took)), sizeof(took));
	close(fd);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return took;
}

/*
 * A trace that lost records and holds no span (nothing but a LOSS frame of
 * 5 records): the endpoint is sent one request of no span whose scope
 * carries the losses, the file beside it (-o) the same line, as the file
 * export alone writes it. It was sent nothing. Refused, the export fails.
 */
static void test_losses_without_spans_reach_the_endpoint(void **state)
{
	char cap[512], out[512], url[64], *said;
	char *argv[] = { bin, "export", cap, "--format", "otlp", "--retries", "1", "--otlp-endpoint",
			 url, "-o", out, NULL };
	int port, fd;
	pid_t pid;

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("lossonly.cap"));
	snprintf(out, sizeof(out), "%s", tmp("lossonly.jsonl"));
	put_small_capture(cap, 0, 0, NULL, 0, 5, 0);
	pid = endpoint(1, 0, "200 OK", &port, &fd);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	assert_int_equal(run(NULL, tmp("lossonly.err"), argv), 0);
	/* its one request taken, of no span */
	assert_int_equal(endpoint_took(pid, fd), 0);
	said = slurp(out);
	assert_int_equal(count(said, "\n"), 1);
	assert_non_null(strstr(said, "{\"key\":\"shmtrace.dropped\",\"value\":{\"intValue\":5}}"));
	free(said);

	/* refused: the export fails, as for a request of spans */
	pid = endpoint(0, 1, "400 Bad Request", &port, &fd);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	assert_int_equal(run(NULL, tmp("lossonly.err"), argv), 1);
	assert_int_equal(endpoint_took(pid, fd), 0);
	expect_in(tmp("lossonly.err"), "400");
}

/*
 * A stand-in endpoint on 127.0.0.1 (*port) that takes one request, answers
 * 200 and writes the request line's path to *path_fd.
 */
static pid_t path_endpoint(int *port, int *path_fd)
{
	int s = listen_local(port), p[2];
	pid_t pid;

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
					 "Connection: close\r\n\r\n{}";
		char req[8192], *sp, *end, *hend = NULL;
		size_t got = 0, want = 0, body = 0;
		int fd;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);
		close(p[0]);
		fd = accept4(s, NULL, NULL, SOCK_CLOEXEC);
		/* the headers, then the body to its Content-Length (read and
		 * thrown away) */
		while (fd >= 0 && !hend && got < sizeof(req) - 1) {
			ssize_t r = read(fd, req + got, sizeof(req) - 1 - got);

			if (r <= 0)
				break;
			got += (size_t)r;
			req[got] = 0;
			if ((hend = strstr(req, "\r\n\r\n"))) {
				const char *cl = strstr(req, "Content-Length: ");

				want = cl ? strtoul(cl + 16, NULL, 10) : 0;
				body = got - (size_t)(hend + 4 - req);
			}
		}
		while (hend && body < want) {
			char sink[65536];
			ssize_t r = read(fd, sink, sizeof(sink));

			if (r <= 0)
				_exit(3);
			body += (size_t)r;
		}
		sp = strchr(req, ' ');
		end = sp ? strchr(sp + 1, ' ') : NULL;
		if (fd < 0 || !hend || !end || strncmp(req, "POST ", 5))
			_exit(3);
		*end = 0;
		if (write(fd, ok, sizeof(ok) - 1) != (ssize_t)sizeof(ok) - 1)
			_exit(3);
		close(fd);
		_exit(write(p[1], sp + 1, strlen(sp + 1)) > 0 ? 0 : 3);
	}
	close(s);
	close(p[1]);
	*path_fd = p[0];
	return pid;
}

/* The path the export to url (its "%d" the port) POSTed to. */
static void expect_posted_to(const char *ring, const char *url_fmt, const char *want)
{
	char url[128], path[1024] = "";
	char *argv[] = { bin, "export", "--ring", (char *)ring, "--format", "otlp", "--retries", "1",
			 "--otlp-endpoint", url, NULL };
	int port, fd, st;
	ssize_t n;
	pid_t pid = path_endpoint(&port, &fd);

	snprintf(url, sizeof(url), url_fmt, port);
	assert_int_equal(run(NULL, tmp("path.err"), argv), 0);
	n = read(fd, path, sizeof(path) - 1);
	close(fd);
	assert_true(n > 0);
	path[n] = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (strcmp(path, want))
		fprintf(stderr, "--otlp-endpoint %s: POSTed to %s, not %s\n", url, path, want);
	assert_string_equal(path, want);
}

/*
 * --otlp-endpoint as the OpenTelemetry exporters take a base URL
 * (OTEL_EXPORTER_OTLP_ENDPOINT: /v1/traces appended) or a traces URL
 * (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: used as it is), told by whether it
 * ends in /v1/traces: never .../v1/traces/v1/traces.
 */
static void test_endpoint_path(void **state)
{
	const char *ring = test_ring_name("otlp-path");

	(void)state;
	ring_of_spans(ring);	/* one request of the default batch size */
	expect_posted_to(ring, "http://127.0.0.1:%d", "/v1/traces");
	expect_posted_to(ring, "http://127.0.0.1:%d/", "/v1/traces");
	expect_posted_to(ring, "http://127.0.0.1:%d/v1/traces", "/v1/traces");
	expect_posted_to(ring, "http://127.0.0.1:%d/v1/traces/", "/v1/traces");
	expect_posted_to(ring, "http://127.0.0.1:%d/otlp", "/otlp/v1/traces");
	expect_posted_to(ring, "http://127.0.0.1:%d/otlp/v1/traces", "/otlp/v1/traces");
	shmtrace_ring_unlink(ring);
}

/*
 * Exports ring with --retries retries to the endpoint at port (pid, with
 * took_fd, as endpoint() made it; 0: none listens), which must fail (exit
 * 1) saying why, and then on the same line "; SENT of SPANS spans sent,
 * REST not sent", SENT the spans the endpoint took. Returns SENT.
 */
static long export_fails(const char *ring, int port, const char *retries, const char *why,
			 pid_t pid, int took_fd)
{
	char url[64], want[512];
	char *argv[] = { bin, "export", "--ring", (char *)ring, "--format", "otlp", "--batch-size",
			 "64k", "--retries", (char *)retries, "--otlp-endpoint", url, NULL };
	long sent = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	assert_int_equal(run_for(NULL, tmp("fail.err"), argv, 120), 1);
	if (pid)
		sent = endpoint_took(pid, took_fd);
	snprintf(want, sizeof(want), "shmtrace export: OTLP endpoint %s/v1/traces: %s; %ld of %d "
		 "spans sent, %ld not sent\n", url, why, sent, SPANS, SPANS - sent);
	expect_in(tmp("fail.err"), want);
	return sent;
}

/*
 * An export whose endpoint fails part way (a 400, 503s past the retries)
 * or refuses the connection says exactly how many of all the spans were
 * sent (answered 2xx) and how many were not.
 */
static void test_endpoint_fails(void **state)
{
	const char *ring = test_ring_name("otlp-fail");
	char why[128];
	int port, fd, s;
	long took;
	pid_t pid;

	(void)state;
	ring_of_spans(ring);
	/* 5 requests taken, the 6th refused for good: no retry */
	pid = endpoint(5, 1, "400 Bad Request", &port, &fd);
	took = export_fails(ring, port, "3", "HTTP 400 Bad Request: not for this test", pid, fd);
	assert_true(took > 0 && took < SPANS);
	/* 3 taken, then 503 until the 2 attempts are spent */
	pid = endpoint(3, 2, "503 Service Unavailable", &port, &fd);
	took = export_fails(ring, port, "2", "HTTP 503 Service Unavailable: not for this test "
			    "(gave up after 2 attempts)", pid, fd);
	assert_true(took > 0 && took < SPANS);
	/* a port nobody listens on: refused at the first request */
	s = listen_local(&port);
	close(s);
	snprintf(why, sizeof(why), "connecting to 127.0.0.1:%d: Connection refused (gave up after 2 "
		 "attempts)", port);
	export_fails(ring, port, "2", why, 0, -1);
	shmtrace_ring_unlink(ring);
}

/*
 * Each step's bound comes from the OpenTelemetry exporters' variables,
 * the traces one first: an endpoint that takes the connection and never
 * answers is given up on after OTEL_EXPORTER_OTLP_TRACES_TIMEOUT (200 ms;
 * OTEL_EXPORTER_OTLP_TIMEOUT's hour would outlast the hang guard), said as
 * a timeout. A value that is not whole milliseconds is refused in one
 * line that names its variable.
 */
static void test_timeout_from_the_environment(void **state)
{
	const char *ring = test_ring_name("otlp-timeout");
	char url[64], why[128];
	char *argv[] = { bin, "export", "--ring", (char *)ring, "--format", "otlp",
			 "--otlp-endpoint", url, NULL };
	int port, s;

	(void)state;
	ring_of_spans(ring);
	/* the kernel completes the connection; nothing reads or answers */
	s = listen_local(&port);
	setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "3600000", 1);
	setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "200", 1);
	snprintf(why, sizeof(why), "127.0.0.1:%d: timed out before an answer (gave up after 1 "
		 "attempt)", port);
	export_fails(ring, port, "1", why, 0, -1);
	close(s);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2s", 1);
	assert_int_equal(run(NULL, tmp("tmo.err"), argv), 2);
	expect_in(tmp("tmo.err"), "shmtrace export: OTEL_EXPORTER_OTLP_TRACES_TIMEOUT='2s': "
		    "give whole milliseconds from 1 to 3600000\n");
	unsetenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT");
	setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0", 1);
	assert_int_equal(run(NULL, tmp("tmo.err"), argv), 2);
	expect_in(tmp("tmo.err"), "shmtrace export: OTEL_EXPORTER_OTLP_TIMEOUT='0': "
		    "give whole milliseconds from 1 to 3600000\n");
	unsetenv("OTEL_EXPORTER_OTLP_TIMEOUT");
	shmtrace_ring_unlink(ring);
}

/* A child answering each request on a new listening socket (*port)
 * with answer (trickle: serve_answer()), until killed. */
static pid_t answering(const char *answer, bool trickle, int *port)
{
	int s = listen_local(port);
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);
		while (serve_answer(s, answer, trickle) >= 0)
			;
		_exit(1);
	}
	close(s);
	return pid;
}

/* One POST of a small body to 127.0.0.1:port with a timeout of ms. */
static int post_to(int port, int ms, struct http_answer *a)
{
	struct http_req r = { .ctype = "application/json", .body = "{}", .len = 2 };
	struct http_conn c;
	struct http_url u;
	char url[64], err[512];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	assert_int_equal(http_parse_url(url, "/v1/traces", &u, err, sizeof(err)), 0);
	http_conn_init(&c, &u, ms, false, NULL);
	return http_conn_post(&c, &r, a, err, sizeof(err));
}

/*
 * Answers an endpoint (or anything between) may give that no endpoint
 * should: a status line whose code follows a tab, read as its status;
 * a body sent a byte at a time without end, given up once the request's
 * timeout passed (what the status said stands: it came whole); a partial
 * success that rejects more spans (2^64 - 1) than the request held,
 * counted as all of them.
 */
static void test_answers_no_endpoint_should_give(void **state)
{
	const char *ring = test_ring_name("otlp-odd");
	static struct http_answer a;
	char url[64], want[128];
	char *argv[] = { bin, "export", "--ring", (char *)ring, "--format", "otlp", "--batch-size",
			 "64k", "--otlp-endpoint", url, NULL };
	int port, st, rc;
	pid_t pid;

	(void)state;
	pid = answering("HTTP/1.1\t200\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", false,
			&port);
	assert_int_equal(post_to(port, 5000, &a), 0);
	assert_int_equal(a.status, 200);
	assert_string_equal(a.reason, "");
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);

	pid = answering("HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n", true, &port);
	alarm(30);	/* a client that reads on while bytes come hangs here */
	assert_int_equal(post_to(port, 300, &a), 0);
	alarm(0);
	assert_int_equal(a.status, 200);
	assert_true(a.body_len > 0);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);

	ring_of_spans(ring);
	pid = answering("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			"Content-Length: 41\r\nConnection: close\r\n\r\n"
			"{\"partialSuccess\":{\"rejectedSpans\":\"-1\"}}", false, &port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	rc = run_for(NULL, tmp("odd.err"), argv, 60);
	if (rc != 0)
		print_file(tmp("odd.err"));
	assert_int_equal(rc, 0);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	/* each request's count at most the spans it held: all of them */
	snprintf(want, sizeof(want), "the endpoint rejected %d of those spans", SPANS);
	expect_in(tmp("odd.err"), want);
	shmtrace_ring_unlink(ring);
}

/* -------------------------------------- what a connection is used for */

/* In a scripted endpoint's child: reads one request on fd, whole (its
 * headers, and the body as long as take_body), into buf; false if the
 * connection ended first. */
static bool take_request(int fd, bool take_body, char *buf, size_t cap)
{
	size_t got = 0, want = SIZE_MAX;

	while (got < want && got < cap - 1) {
		ssize_t r = read(fd, buf + got, cap - 1 - got);
		char *hend;

		if (r <= 0)
			return false;
		got += (size_t)r;
		buf[got] = 0;
		if (want == SIZE_MAX && (hend = strstr(buf, "\r\n\r\n"))) {
			const char *cl = strstr(buf, "Content-Length: ");

			want = (size_t)(hend + 4 - buf) + (take_body && cl ? strtoul(cl + 16, NULL, 10) : 0);
		}
	}
	return true;
}

/* A child running script on a new listening socket (*port) and the
 * pipes of the test (go: the test to the child; said: the child to the
 * test), killed with the test. */
struct script_io {
	int s, go, said;
};

static pid_t scripted(void (*script)(const struct script_io *io), int *port, int *go, int *said)
{
	int s = listen_local(port), p[2], q[2];
	pid_t pid;

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(pipe2(q, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		const struct script_io io = { s, p[0], q[1] };

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);
		script(&io);
		_exit(0);
	}
	close(s);
	close(p[0]);
	close(q[1]);
	*go = p[1];
	*said = q[0];
	return pid;
}

static void say(int fd)
{
	assert_int_equal(write(fd, "x", 1), 1);
}

static void hear(int fd)
{
	char c;

	assert_int_equal(read(fd, &c, 1), 1);
}

static void end_script(pid_t pid, int go, int said)
{
	int st;

	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	close(go);
	close(said);
}

/* Every later connection: each request answered 201, until killed. */
static void answer_201_on_new_connections(const struct script_io *io)
{
	static char buf[1 << 16];
	int fd;

	while ((fd = accept4(io->s, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		while (take_request(fd, true, buf, sizeof(buf)))
			if (write(fd, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", 43) != 43)
				break;
}

/* The first connection: its request answered 200, then, once the test
 * says, a 408 and the end of the connection, said to the test. */
static void stale_408(const struct script_io *io)
{
	static char buf[1 << 16];
	const char *a = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		   *late = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
	int fd = accept4(io->s, NULL, NULL, SOCK_CLOEXEC);
	char c;

	if (fd < 0 || !take_request(fd, true, buf, sizeof(buf)) ||
	    write(fd, a, strlen(a)) != (ssize_t)strlen(a) || read(io->go, &c, 1) != 1 ||
	    write(fd, late, strlen(late)) != (ssize_t)strlen(late))
		_exit(3);
	close(fd);
	if (write(io->said, "x", 1) != 1)
		_exit(3);
	answer_201_on_new_connections(io);
}

/* The first connection's one request answered by what g_first_answer
 * holds, the connection then left open, never read again. */
static const char *g_first_answer;

static void first_answer_then_silence(const struct script_io *io)
{
	static char buf[1 << 16];
	int fd = accept4(io->s, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0 || !take_request(fd, true, buf, sizeof(buf)) ||
	    write(fd, g_first_answer, strlen(g_first_answer)) != (ssize_t)strlen(g_first_answer))
		_exit(3);
	answer_201_on_new_connections(io);
}

/* One POST on the kept connection c. */
static int post_on(struct http_conn *c, struct http_answer *a)
{
	struct http_req r = { .ctype = "application/json", .body = "{}", .len = 2 };
	char err[512];

	return http_conn_post(c, &r, a, err, sizeof(err));
}

static void kept_conn(struct http_conn *c, int port, int ms, const char *headers)
{
	struct http_url u;
	char url[64], err[512];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	assert_int_equal(http_parse_url(url, "/v1/traces", &u, err, sizeof(err)), 0);
	http_conn_init(c, &u, ms, true, headers);
}

/*
 * A kept connection carries only answers to what was sent on it: one the
 * endpoint wrote to while it was idle (a 408 before it closed), or that
 * held bytes past an answer's body, or whose body's length could not be
 * told (two Content-Lengths that differ, a chunk size that is not hex or
 * is missing, chunk data longer than its size said),
 * is not used again: the next request goes on a new connection and gets
 * that one's answer (201), not the stale bytes nor a wait for an answer
 * that never comes.
 */
static void test_kept_connection_carries_only_its_own_answers(void **state)
{
	static const char *const firsts[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 500 Stale\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcde\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\nHTTP/1.1 500 Stale\r\n\r\n",
	};
	static struct http_answer a;
	struct http_conn c;
	int port, go, said;
	pid_t pid;

	(void)state;
	pid = scripted(stale_408, &port, &go, &said);
	kept_conn(&c, port, 2000, NULL);
	assert_int_equal(post_on(&c, &a), 0);
	assert_int_equal(a.status, 200);
	say(go);
	hear(said);
	assert_int_equal(post_on(&c, &a), 0);
	assert_int_equal(a.status, 201);
	assert_int_equal(c.connects, 2);
	http_conn_close(&c);
	end_script(pid, go, said);

	for (size_t i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++) {
		g_first_answer = firsts[i];
		pid = scripted(first_answer_then_silence, &port, &go, &said);
		kept_conn(&c, port, 2000, NULL);
		assert_int_equal(post_on(&c, &a), 0);
		assert_int_equal(a.status, 200);
		assert_int_equal(post_on(&c, &a), 0);
		assert_int_equal(a.status, 201);
		assert_int_equal(c.connects, 2);
		http_conn_close(&c);
		end_script(pid, go, said);
	}
}

/* The first connection's requests answered in turn by g_first_answer,
 * then 201; later connections: none taken. */
static void first_answer_then_201_on_it(const struct script_io *io)
{
	static char buf[1 << 16];
	const char *ok = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
	int fd = accept4(io->s, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0 || !take_request(fd, true, buf, sizeof(buf)) ||
	    write(fd, g_first_answer, strlen(g_first_answer)) != (ssize_t)strlen(g_first_answer))
		_exit(3);
	while (take_request(fd, true, buf, sizeof(buf)))
		if (write(fd, ok, strlen(ok)) != (ssize_t)strlen(ok))
			_exit(3);
}

/*
 * Answers whose body's end can be told though their lengths look odd: a
 * Content-Length given as a list of the same value, and a chunked body
 * beside a Content-Length that is no number (the chunks' framing wins):
 * the body is read and the connection used again for the next request.
 */
static void test_kept_connection_reused_after_lengths_that_agree(void **state)
{
	static const char *const firsts[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: x\r\nTransfer-Encoding: chunked\r\n\r\n"
		"2\r\nok\r\n0\r\n\r\n",
	};
	static struct http_answer a;
	struct http_conn c;
	int port, go, said;
	pid_t pid;

	(void)state;
	for (size_t i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++) {
		g_first_answer = firsts[i];
		pid = scripted(first_answer_then_201_on_it, &port, &go, &said);
		kept_conn(&c, port, 2000, NULL);
		assert_int_equal(post_on(&c, &a), 0);
		assert_int_equal(a.status, 200);
		assert_int_equal(a.body_len, 2);
		assert_int_equal(post_on(&c, &a), 0);
		assert_int_equal(a.status, 201);
		assert_int_equal(c.connects, 1);
		http_conn_close(&c);
		end_script(pid, go, said);
	}
}

/* Reads a request's headers only, answers 413 and keeps the connection
 * open without reading on. */
static void answer_413_before_the_body(const struct script_io *io)
{
	static char buf[1 << 16];
	const char *a = "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n";
	int fd = accept4(io->s, NULL, NULL, SOCK_CLOEXEC);
	char c;

	if (fd < 0 || !take_request(fd, false, buf, sizeof(buf)) ||
	    write(fd, a, strlen(a)) != (ssize_t)strlen(a))
		_exit(3);
	/* until killed */
	if (read(io->go, &c, 1) < 0)
		_exit(3);
}

/*
 * An endpoint that answers (413) without taking the request, and keeps
 * the connection open: the send waits its whole timeout on full socket
 * buffers, and the answer, there all along, is still read. Taken for a
 * timeout, it was retried (never to be taken) as a failure to connect.
 */
static void test_answer_given_before_the_request_is_taken(void **state)
{
	const size_t big = 64u << 20;
	static struct http_answer a;
	struct http_req r = { .ctype = "application/json", .len = big };
	struct http_conn c;
	char err[512];
	int port, go, said;
	char *body = calloc(1, big);
	pid_t pid;

	(void)state;
	assert_non_null(body);
	r.body = body;
	pid = scripted(answer_413_before_the_body, &port, &go, &said);
	kept_conn(&c, port, 300, NULL);
	assert_int_equal(http_conn_post(&c, &r, &a, err, sizeof(err)), 0);
	assert_int_equal(a.status, 413);
	http_conn_close(&c);
	end_script(pid, go, said);
	free(body);
}

/* Answers one request 200, and says through the pipe whether it held
 * the header g_header whole. */
static const char *g_header;

static void answer_if_header(const struct script_io *io)
{
	static char buf[1 << 16];
	const char *a = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	int fd = accept4(io->s, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0 || !take_request(fd, true, buf, sizeof(buf)) ||
	    write(io->said, strstr(buf, g_header) ? "y" : "n", 1) != 1 ||
	    write(fd, a, strlen(a)) != (ssize_t)strlen(a))
		_exit(3);
	close(fd);
}

/* A header as long as a token for authentication can be (8 KiB) goes
 * with the request; a head of a fixed 4 KiB refused every request. */
static void test_long_header_sent(void **state)
{
	static char hdr[8300];
	static struct http_answer a;
	struct http_conn c;
	int port, go, said;
	char seen;
	pid_t pid;

	(void)state;
	memcpy(hdr, "Authorization: Bearer ", 22);
	memset(hdr + 22, 'k', 8192);
	memcpy(hdr + 22 + 8192, "\r\n", 3);
	g_header = hdr;
	pid = scripted(answer_if_header, &port, &go, &said);
	kept_conn(&c, port, 2000, hdr);
	assert_int_equal(post_on(&c, &a), 0);
	assert_int_equal(a.status, 200);
	assert_int_equal(read(said, &seen, 1), 1);
	assert_int_equal(seen, 'y');
	http_conn_close(&c);
	end_script(pid, go, said);
}

/* Answers every request with the status line and headers of
 * g_retry_answer (a "%s" in it: an HTTP-date 120 s from now). */
static const char *g_retry_answer;

static void answer_retry(const struct script_io *io)
{
	static char buf[1 << 16];
	char date[64], a[256];
	time_t t = time(NULL) + 120;
	int fd;

	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", gmtime(&t));
	snprintf(a, sizeof(a), g_retry_answer, date);
	while ((fd = accept4(io->s, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		if (take_request(fd, true, buf, sizeof(buf)) &&
		    write(fd, a, strlen(a)) != (ssize_t)strlen(a))
			_exit(3);
		close(fd);
	}
}

/*
 * Retry-After in seconds or as an HTTP-date (the two forms the HTTP
 * specification gives it), and anything else, a negative number above
 * all, taken as none; and the wait before the next try: what Retry-After
 * asked, up to 300 s, else half the back-off and a random part of the
 * other half, the back-off doubling up to its bound.
 */
static void test_retry_after_and_the_wait_before_a_retry(void **state)
{
	static const struct {
		const char *answer;
		unsigned lo, hi;
	} cases[] = {
		{ "HTTP/1.1 503 Busy\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n%s", 7, 7 },
		{ "HTTP/1.1 503 Busy\r\nRetry-After: %s\r\nContent-Length: 0\r\n\r\n", 100, 120 },
		{ "HTTP/1.1 503 Busy\r\nRetry-After: -1\r\nContent-Length: 0\r\n\r\n%s", 0, 0 },
		{ "HTTP/1.1 503 Busy\r\nRetry-After: 4294967300\r\nContent-Length: 0\r\n\r\n%s",
		  UINT_MAX, UINT_MAX },
		{ "HTTP/1.1 503 Busy\r\nRetry-After: soon\r\nContent-Length: 0\r\n\r\n%s", 0, 0 },
	};
	static struct http_answer a;
	unsigned delay = 100, w;
	int port, go, said;
	pid_t pid;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		g_retry_answer = cases[i].answer;
		pid = scripted(answer_retry, &port, &go, &said);
		assert_int_equal(post_to(port, 2000, &a), 0);
		assert_int_equal(a.status, 503);
		if (a.retry_after < cases[i].lo || a.retry_after > cases[i].hi)
			fail_msg("%s: Retry-After read as %u, not %u to %u", cases[i].answer,
				 a.retry_after, cases[i].lo, cases[i].hi);
		end_script(pid, go, said);
	}
	assert_int_equal(otlp_retry_wait(&delay, 5000, 7), 7000);
	assert_int_equal(delay, 200);
	assert_int_equal(otlp_retry_wait(&delay, 5000, UINT_MAX), OTLP_RETRY_AFTER_MAX_S * 1000u);
	for (int i = 0; i < 10; i++) {
		unsigned before = delay;

		w = otlp_retry_wait(&delay, 5000, 0);
		assert_true(w >= before / 2 && w <= before);
		assert_int_equal(delay, before * 2 > 5000 ? 5000 : before * 2);
	}
}

/*
 * A protobuf partial success whose error_message runs past what is kept of
 * an answer (4 KiB): its rejected_spans, which comes first, is still
 * counted, and its message left out; a message kept whole is said,
 * escaped for a terminal. A length past the end of an answer kept whole
 * is no partial success.
 */
static void test_partial_success_read_from_a_long_answer(void **state)
{
	static struct http_answer a;
	const size_t msg = 5000;
	char said[256];
	char *p = a.body;

	(void)state;
	snprintf(a.ctype, sizeof(a.ctype), "application/x-protobuf");
	/* {1: {1: 5, 2: "x" * 5000}}: lengths 5000 + 3 + 2 and 5000 */
	*p++ = 0x0a;
	*p++ = (char)(0x80 | ((msg + 5) & 0x7f));
	*p++ = (char)((msg + 5) >> 7);
	*p++ = 0x08;
	*p++ = 5;
	*p++ = 0x12;
	*p++ = (char)(0x80 | (msg & 0x7f));
	*p++ = (char)(msg >> 7);
	memset(p, 'x', HTTP_BODY_KEEP - (size_t)(p - a.body));
	a.body_len = HTTP_BODY_KEEP;
	assert_int_equal(otlp_partial_success(&a, said, sizeof(said)), 5);
	assert_string_equal(said, "");

	/* a whole one, its message with an escape sequence */
	p = a.body;
	memcpy(p, "\x0a\x0b\x08\x07\x12\x07" "bad\x1b" "[2J", 13);
	a.body_len = 13;
	assert_int_equal(otlp_partial_success(&a, said, sizeof(said)), 7);
	assert_string_equal(said, "bad\\x1b[2J");

	/* a length past the end of an answer kept whole */
	a.body[1] = 0x40;
	assert_int_equal(otlp_partial_success(&a, said, sizeof(said)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_urls),
		cmocka_unit_test(test_endpoint_fails),
		cmocka_unit_test(test_endpoint_path),
		cmocka_unit_test(test_losses_without_spans_reach_the_endpoint),
		cmocka_unit_test(test_timeout_from_the_environment),
		cmocka_unit_test(test_answers_no_endpoint_should_give),
		cmocka_unit_test(test_kept_connection_carries_only_its_own_answers),
		cmocka_unit_test(test_kept_connection_reused_after_lengths_that_agree),
		cmocka_unit_test(test_answer_given_before_the_request_is_taken),
		cmocka_unit_test(test_long_header_sent),
		cmocka_unit_test(test_retry_after_and_the_wait_before_a_retry),
		cmocka_unit_test(test_partial_success_read_from_a_long_answer),
	};

	return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
