/* SPDX-License-Identifier: MIT */
/*
 * test_otlp.c - what the OTLP export rests on: global flow ids (a random
 * prefix per ring, below 2^53), W3C traceparent headers turned into flow
 * ids and recorded for the exporter, and the endpoint URLs it accepts.
 * And what the export carries: arguments as attributes (hostile strings,
 * int64 extremes, repeated keys) and the spans a producer SIGKILLed in
 * nested scopes left open, ending where the Chrome export ends them; and
 * how requests reach a file or stdout, and a write that fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "cli_run.h"
#include "http.h"
#include "ring_writer.h"
#include "ring_reader.h"

static void test_flow_ids_global(void **state)
{
	const char *na = test_ring_name("otlp-a"), *nb = test_ring_name("otlp-b");
	shmtrace_t *a, *b;
	struct shmt_view v;
	char err[256];
	uint64_t fa1, fa2, fb;

	(void)state;
	assert_int_equal(shmtrace_ring_create(na, NULL), 0);
	assert_int_equal(shmtrace_ring_create(nb, NULL), 0);
	assert_int_equal(shmtrace_open(na, &a), 0);
	assert_int_equal(shmtrace_open(nb, &b), 0);
	fa1 = shmtrace_flow_new(a);
	fa2 = shmtrace_flow_new(a);
	fb = shmtrace_flow_new(b);
	/* global, below 2^53, the counter in the low 32 bits */
	assert_true(fa1 & SHMT_FLOW_GLOBAL);
	assert_true(fb & SHMT_FLOW_GLOBAL);
	assert_true(fa1 < (1ull << 53) && fb < (1ull << 53));
	assert_int_equal(fa1 & 0xffffffffull, 1);
	assert_int_equal(fa2, fa1 + 1);
	assert_int_equal(fb & 0xffffffffull, 1);
	/* the prefix is the ring's: two rings' first ids differ */
	assert_int_equal(shmt_view_open(na, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	assert_int_equal((fa1 >> 32) & 0xfffff, shmt_flow_prefix(v.h->ring_id));
	shmt_view_close(&v);
	assert_true(fa1 != fb);
	shmtrace_close(a);
	shmtrace_close(b);
	shmtrace_ring_unlink(na);
	shmtrace_ring_unlink(nb);
}

static void test_traceparent(void **state)
{
	const char *tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	const char *name = test_ring_name("otlp-tp");
	struct ring_dump d;
	shmtrace_t *t;
	uint64_t id;
	uint32_t s;

	(void)state;
	/* the trace id's low 52 bits, marked global; no handle needed */
	id = shmtrace_flow_from_traceparent(NULL, tp);
	assert_int_equal(id, SHMT_FLOW_GLOBAL | 0xa3ce929d0e0e4736ull % (1ull << 52));
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"), id);
	/* a later version may append fields */
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz"), id);
	/* invalid ones: 0 */
	assert_int_equal(shmtrace_flow_from_traceparent(NULL, NULL), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL, ""), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "00-00000000000000000000000000000000-00f067aa0ba902b7-01"), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x"), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(NULL,
			 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"), 0);
	/* with a handle: the header is interned, for the exporter */
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	assert_int_equal(shmtrace_flow_from_traceparent(t, tp), id);
	s = shmtrace_intern(t, "traceparent 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
	assert_true(s != 0);
	assert_int_equal(shmtrace_flush(t), 0);
	ring_dump(name, &d);
	assert_int_equal(d.n, 1);
	assert_int_equal(d.recs[0].flow, id);
	assert_int_equal(d.recs[0].name, s);
	assert_int_equal(SHMT_COMMIT_KIND(d.recs[0].commit), SHMTRACE_KIND_INSTANT);
	free(d.recs);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

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
	assert_int_equal(http_parse_url("http://x:0", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
	assert_int_equal(http_parse_url("http://x:70000", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
	assert_int_equal(http_parse_url("http://:80", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
	assert_int_equal(http_parse_url("http://x/a?b", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
	assert_int_equal(http_parse_url("http://[::1", "/v1/traces", &u, err, sizeof(err)), -EINVAL);
}

/*
 * The child: spans and instants with arguments (hostile strings, INT64
 * extremes, a key four times), a flow 7 of a span and an instant, then
 * outer > middle (flow 7) > inner open, a finished "done" and an instant
 * "last" inside inner, and SIGKILL.
 */
static void child_args_dies(const char *ring, int ready)
{
	struct shmtrace_open_span sp;
	struct shmtrace_arg a[SHMTRACE_MAX_ARGS];
	shmtrace_t *t;
	uint32_t c;

	if (shmtrace_default_open(ring) < 0)
		_exit(2);
	t = shmtrace_default;
	c = shmtrace_intern(t, "c");
	a[0] = shmtrace_arg_str(shmtrace_intern(t, "q\"uote\\"), shmtrace_intern(t, "a\"b\x01\n"));
	a[1] = shmtrace_arg_int(shmtrace_intern(t, "min"), INT64_MIN);
	a[2] = shmtrace_arg_str(shmtrace_intern(t, "bad\xff"), shmtrace_intern(t, "x\xc3(y"));
	a[3] = shmtrace_arg_int(shmtrace_intern(t, "max"), INT64_MAX);
	shmtrace_span_args(t, c, shmtrace_intern(t, "s"), 1000, 2000, 0, a, SHMTRACE_MAX_ARGS);
	shmtrace_begin(t, &sp, c, shmtrace_intern(t, "h"), 0);
	for (int i = 0; i < SHMTRACE_MAX_ARGS; i++)
		shmtrace_span_arg(&sp, shmtrace_arg_int(shmtrace_intern(t, "k"), i));
	shmtrace_end(&sp);
	/* an instant inside a span (an event of it), one inside none */
	shmtrace_instant_args(t, c, shmtrace_intern(t, "i"), 0, &a[1], 1);
	shmtrace_span(t, c, shmtrace_intern(t, "encl"), shmtrace_now() - 1000000, shmtrace_now() + 1,
		      0);
	shmtrace_instant_args(t, c, shmtrace_intern(t, "lone"), 0, &a[2], 1);
	shmtrace_span_args(t, c, shmtrace_intern(t, "fs"), shmtrace_now(), shmtrace_now() + 10, 7,
			   &a[3], 1);
	shmtrace_instant_args(t, c, shmtrace_intern(t, "fi"), 7, &a[0], 1);
	{
		SHMTRACE_SCOPE("test", "outer");
		{
			SHMTRACE_SCOPE_FLOW("test", "middle", 7);

			shmtrace_begin(t, &sp, c, shmtrace_intern(t, "inner"), 0);
			shmtrace_span_arg(&sp, shmtrace_arg_int(shmtrace_intern(t, "lost"), 1));
			{
				SHMTRACE_SCOPE("test", "done");
			}
			shmtrace_instant_args(t, c, shmtrace_intern(t, "last"), 0, &a[3], 1);
			if (write(ready, "k", 1) != 1)
				_exit(3);
			raise(SIGKILL);
		}
	}
	_exit(4);
}

/* ns of a Chrome "ts"/"dur" (us with 3 decimals) after key in ev. */
static uint64_t chrome_ns(const char *ev, const char *key)
{
	unsigned long long us = 0, frac = 0;
	const char *p = strstr(ev, key);

	assert_non_null(p);
	assert_int_equal(sscanf(p + strlen(key), "%llu.%3llu", &us, &frac), 2);
	return us * 1000 + frac;
}

static uint64_t field_u64(const char *from, const char *key)
{
	const char *p = strstr(from, key);

	assert_non_null(p);
	return strtoull(p + strlen(key), NULL, 10);
}

/* The Chrome slice named name (exactly one): start and end, ring clock ns. */
static void chrome_slice(const char *json, const char *name, uint64_t *ts, uint64_t *end)
{
	char key[96];
	const char *p, *ev;

	snprintf(key, sizeof(key), ",\"name\":\"%s\"", name);
	p = strstr(json, key);
	assert_non_null(p);
	assert_null(strstr(p + 1, key));
	for (ev = p; *ev != '{'; ev--)
		;
	*ts = chrome_ns(ev, "\"ts\":");
	*end = *ts + chrome_ns(ev, "\"dur\":");
}

/* The text of the OTLP span named name (exactly one; the caller frees it). */
static char *otlp_span(const char *jsonl, const char *name)
{
	char key[96];
	const char *p, *q, *start;

	snprintf(key, sizeof(key), "\"name\":\"%s\",\"kind\":", name);
	p = strstr(jsonl, key);
	assert_non_null(p);
	assert_null(strstr(p + 1, key));
	start = p;
	while (start > jsonl && strncmp(start, "{\"traceId\"", 10))
		start--;
	q = strstr(p, "{\"traceId\"");
	return strndup(start, q ? (size_t)(q - start) : strlen(start));
}

static void test_args_and_open_spans(void **state)
{
	const char *ring = test_ring_name("otlp-args");
	struct shmtrace_ring_config rc = { .capacity = 4096, .blocks = 16 };
	char *chrome[] = { bin, "export", "--ring", (char *)ring, "-o", (char *)tmp("t.json"), NULL };
	char *otlp[] = { bin, "export", "--ring", (char *)ring, "--format", "otlp", "-o",
			 (char *)tmp("t.jsonl"), NULL };
	const char *names[] = { "outer", "middle", "inner" };
	char *cj, *oj, *sp;
	uint64_t off, ts, end;
	int p[2], st;
	pid_t kid;
	char c;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &rc), 0);
	assert_int_equal(pipe(p), 0);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		close(p[0]);
		child_args_dies(ring, p[1]);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	assert_int_equal(run(NULL, NULL, chrome), 0);
	assert_int_equal(run(NULL, NULL, otlp), 0);
	cj = slurp(tmp("t.json"));
	oj = slurp(tmp("t.jsonl"));
	off = field_u64(cj, "\"trace_start_wall_ns\":") - field_u64(cj, "\"trace_start_ns\":");

	/* hostile strings escaped as in the Chrome export, int64 exact */
	sp = otlp_span(oj, "s");
	assert_non_null(strstr(sp, "\"value\":{\"stringValue\":\"c\"}},"
			       "{\"key\":\"shmtrace.arg.q\\\"uote\\\\\",\"value\":"
			       "{\"stringValue\":\"a\\\"b\\u0001\\u000a\"}},"
			       "{\"key\":\"shmtrace.arg.min\",\"value\":"
			       "{\"intValue\":\"-9223372036854775808\"}},"
			       "{\"key\":\"shmtrace.arg.bad\xef\xbf\xbd\",\"value\":"
			       "{\"stringValue\":\"x\xef\xbf\xbd(y\"}},"
			       "{\"key\":\"shmtrace.arg.max\",\"value\":"
			       "{\"intValue\":\"9223372036854775807\"}}],"
			       "\"droppedAttributesCount\":0,"));
	free(sp);
	/* one key four times: the last kept, three dropped */
	sp = otlp_span(oj, "h");
	assert_int_equal(count(sp, "shmtrace.arg.k"), 1);
	assert_non_null(strstr(sp, "{\"key\":\"shmtrace.arg.k\",\"value\":{\"intValue\":\"3\"}}],"
			       "\"droppedAttributesCount\":3,"));
	free(sp);
	/* an instant's arguments: on its event, or on its zero-length span */
	sp = otlp_span(oj, "encl");
	assert_non_null(strstr(sp, "\"name\":\"i\",\"attributes\":[{\"key\":\"shmtrace.category\","
			       "\"value\":{\"stringValue\":\"c\"}},{\"key\":\"shmtrace.arg.min\","
			       "\"value\":{\"intValue\":\"-9223372036854775808\"}}],"
			       "\"droppedAttributesCount\":0}"));
	free(sp);
	sp = otlp_span(oj, "lone");
	assert_non_null(strstr(sp, "{\"key\":\"shmtrace.instant\",\"value\":{\"boolValue\":true}},"
			       "{\"key\":\"shmtrace.arg.bad\xef\xbf\xbd\""));
	free(sp);
	/* a flow's span and instant keep theirs */
	sp = otlp_span(oj, "fs");
	assert_non_null(strstr(sp, "{\"key\":\"shmtrace.arg.max\",\"value\":"
			       "{\"intValue\":\"9223372036854775807\"}}]"));
	free(sp);
	sp = otlp_span(oj, "fi");
	assert_non_null(strstr(sp, "{\"key\":\"shmtrace.arg.q\\\"uote\\\\\""));
	free(sp);

	/* the open spans: marked, UNSET, ending at the Chrome export's ends */
	assert_int_equal(count(oj, "{\"key\":\"shmtrace.unfinished\",\"value\":{\"boolValue\":true}}"),
			 3);
	for (int i = 0; i < 3; i++) {
		chrome_slice(cj, names[i], &ts, &end);
		sp = otlp_span(oj, names[i]);
		assert_non_null(strstr(sp, "\"shmtrace.unfinished\""));
		assert_non_null(strstr(sp, "\"status\":{\"code\":0}"));
		assert_int_equal(field_u64(sp, "\"startTimeUnixNano\":\""), ts + off);
		assert_int_equal(field_u64(sp, "\"endTimeUnixNano\":\""), end + off);
		/* the argument added to inner was never recorded */
		assert_null(strstr(sp, "shmtrace.arg.lost"));
		if (i == 1) {
			/* in flow 7, a child of the step before */
			assert_non_null(strstr(sp, "\"parentSpanId\":"));
			assert_non_null(strstr(sp, "{\"key\":\"shmtrace.flow.id\",\"value\":"
					       "{\"intValue\":7}}"));
		}
		if (i == 2)
			/* the instant inside the innermost open span is its event */
			assert_non_null(strstr(sp, "\"name\":\"last\",\"attributes\":"));
		free(sp);
	}
	sp = otlp_span(oj, "done");
	assert_null(strstr(sp, "unfinished"));
	free(sp);
	assert_null(strstr(oj, "shmtrace.args_lost"));
	free(cj);
	free(oj);
	shmtrace_ring_unlink(ring);
}

/* Makes ring anew with SPANS spans, one in ten in flow 5: about 25
 * requests of 64 KiB. */
#define SPANS 3000
static void ring_of_spans(const char *ring)
{
	uint32_t cat[2], name[3];
	uint64_t ts;
	shmtrace_t *t;

	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	cat[0] = shmtrace_intern(t, "c0");
	cat[1] = shmtrace_intern(t, "c1");
	for (int i = 0; i < 3; i++)
		name[i] = shmtrace_intern(t, i == 0 ? "n0" : i == 1 ? "n1" : "n2");
	ts = shmtrace_now();
	for (int i = 0; i < SPANS; i++, ts += 1000)
		assert_int_equal(shmtrace_span(t, cat[i % 2], name[i % 3], ts, ts + 500,
					       i % 10 == 0 ? 5 : 0), 0);
	shmtrace_close(t);
}

/*
 * To a file: requests of at most --batch-size, one a line, all the spans;
 * the same bytes on stdout; a write that fails (the file size limit) is
 * an error, exit 1, and no output file is left behind.
 */
static void test_file_output(void **state)
{
	const char *ring = test_ring_name("otlp-file");
	char *file[] = { bin, "export", "--ring", (char *)ring, "--format", "otlp", "--batch-size",
			 "64k", "-o", (char *)tmp("f.jsonl"), NULL };
	char *out[] = { bin, "export", "--ring", (char *)ring, "--format", "otlp", "--batch-size",
			"64k", "-o", "-", NULL };
	char *cut[] = { bin, "export", "--ring", (char *)ring, "--format", "otlp", "--batch-size",
			"64k", "-o", (char *)tmp("c.jsonl"), NULL };
	char *a, *b, *e;
	size_t lines = 0;

	(void)state;
	ring_of_spans(ring);
	assert_int_equal(run(NULL, NULL, file), 0);
	a = slurp(tmp("f.jsonl"));
	for (const char *p = a; (p = strchr(p, '\n')); p++)
		lines++;
	/* 3000 spans of ~500 bytes: ~25 requests of 64 KiB */
	assert_true(lines >= 20);
	assert_int_equal(count(a, "{\"resourceSpans\":["), lines);
	assert_int_equal(count(a, "]}\n"), lines);
	assert_int_equal(count(a, "\"spanId\""), 3000);
	assert_int_equal(count(a, "\"stringValue\":\"c1\"}}"), 1500);
	assert_int_equal(count(a, "\"name\":\"n2\""), 1000);

	assert_int_equal(run(tmp("o.jsonl"), NULL, out), 0);
	b = slurp(tmp("o.jsonl"));
	assert_string_equal(a, b);

	fsize_limit = 200000;
	assert_int_equal(run(NULL, tmp("c.err"), cut), 1);
	fsize_limit = 0;
	e = slurp(tmp("c.err"));
	assert_non_null(strstr(e, "shmtrace export: writing "));
	assert_non_null(strstr(e, ": File too large\n"));
	assert_int_equal(access(tmp("c.jsonl"), F_OK), -1);
	free(a);
	free(b);
	free(e);
	shmtrace_ring_unlink(ring);
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
 * answer; returns the spans the request held, or -1. */
static long serve_one(int s, const char *answer)
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
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	return spans;
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
	assert_int_equal(run(NULL, tmp("fail.err"), argv), 1);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flow_ids_global),
		cmocka_unit_test(test_traceparent),
		cmocka_unit_test(test_urls),
		cmocka_unit_test(test_args_and_open_spans),
		cmocka_unit_test(test_file_output),
		cmocka_unit_test(test_endpoint_fails),
		cmocka_unit_test(test_endpoint_path),
	};

	return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
