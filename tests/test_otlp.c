/* SPDX-License-Identifier: MIT */
/*
 * test_otlp.c - what the OTLP export carries: arguments as attributes
 * (hostile strings, int64 extremes, repeated keys) and the spans a producer
 * SIGKILLed in nested scopes left open, ending where the Chrome export ends
 * them; and how requests reach a file or stdout, and a write that fails.
 * The flow ids it rests on: test_flow_ids.c; its endpoint: test_otlp_send.c.
 */
#include <signal.h>
#include <sys/wait.h>

#include "cli_run.h"
#include "otlp_run.h"

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
	uint64_t t0, t1;
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
	/* an instant inside a span (an event of it), one inside none; the
	 * span's ends are read around the instant, so it holds it however
	 * long the calls take */
	t0 = shmtrace_now();
	shmtrace_instant_args(t, c, shmtrace_intern(t, "i"), 0, &a[1], 1);
	t1 = shmtrace_now() + 1;
	shmtrace_span(t, c, shmtrace_intern(t, "encl"), t0 - 1000000, t1, 0);
	shmtrace_instant_args(t, c, shmtrace_intern(t, "lone"), 0, &a[2], 1);
	/* of no length: "fi" after it is never inside it */
	t0 = shmtrace_now();
	shmtrace_span_args(t, c, shmtrace_intern(t, "fs"), t0, t0, 7, &a[3], 1);
	shmtrace_instant_args(t, c, shmtrace_intern(t, "fi"), 7, &a[0], 1);
	{
		SHMTRACE_SCOPE("test", "outer");
		{
			SHMTRACE_SCOPE_FLOW("test", "middle", 7);

			shmtrace_begin(t, &sp, c, shmtrace_intern(t, "inner"), 0);
			shmtrace_span_arg(&sp, shmtrace_arg_int(shmtrace_intern(t, "bytes"), 1));
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

/* Creates ring and has child_args_dies() record on it and die. */
static void record_and_kill(const char *ring)
{
	struct shmtrace_ring_config rc = { .capacity = 4096, .blocks = 16 };
	int p[2], st;
	pid_t kid;
	char c;

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
}

/* The arguments in the OTLP export oj: as attributes, escaped, exact. */
static void check_otlp_args(const char *oj)
{
	char *sp;

	/* hostile strings escaped as in the Chrome export, int64 exact */
	sp = otlp_span_text(oj, "s");
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
	sp = otlp_span_text(oj, "h");
	assert_int_equal(count(sp, "shmtrace.arg.k"), 1);
	assert_non_null(strstr(sp, "{\"key\":\"shmtrace.arg.k\",\"value\":{\"intValue\":\"3\"}}],"
			       "\"droppedAttributesCount\":3,"));
	free(sp);
	/* an instant's arguments: on its event, or on its zero-length span */
	sp = otlp_span_text(oj, "encl");
	assert_non_null(strstr(sp, "\"name\":\"i\",\"attributes\":[{\"key\":\"shmtrace.category\","
			       "\"value\":{\"stringValue\":\"c\"}},{\"key\":\"shmtrace.arg.min\","
			       "\"value\":{\"intValue\":\"-9223372036854775808\"}}],"
			       "\"droppedAttributesCount\":0}"));
	free(sp);
	sp = otlp_span_text(oj, "lone");
	assert_non_null(strstr(sp, "{\"key\":\"shmtrace.instant\",\"value\":{\"boolValue\":true}},"
			       "{\"key\":\"shmtrace.arg.bad\xef\xbf\xbd\""));
	free(sp);
	/* a flow's span and instant keep theirs */
	sp = otlp_span_text(oj, "fs");
	assert_non_null(strstr(sp, "{\"key\":\"shmtrace.arg.max\",\"value\":"
			       "{\"intValue\":\"9223372036854775807\"}}]"));
	free(sp);
	sp = otlp_span_text(oj, "fi");
	assert_non_null(strstr(sp, "{\"key\":\"shmtrace.arg.q\\\"uote\\\\\""));
	free(sp);
}

/* The spans left open in the OTLP export oj: marked, UNSET, ending where
 * those of the Chrome export cj end (off: wall clock minus ring clock). */
static void check_open_spans(const char *cj, const char *oj, uint64_t off)
{
	const char *names[] = { "outer", "middle", "inner" };
	uint64_t ts, end;
	char *sp;

	/* the open spans: marked, UNSET, ending at the Chrome export's ends */
	assert_int_equal(count(oj, "{\"key\":\"shmtrace.unfinished\",\"value\":{\"boolValue\":true}}"),
			 3);
	for (int i = 0; i < 3; i++) {
		chrome_slice(cj, names[i], &ts, &end);
		sp = otlp_span_text(oj, names[i]);
		assert_non_null(strstr(sp, "\"shmtrace.unfinished\""));
		assert_non_null(strstr(sp, "\"status\":{\"code\":0}"));
		assert_int_equal(field_u64(sp, "\"startTimeUnixNano\":\""), ts + off);
		assert_int_equal(field_u64(sp, "\"endTimeUnixNano\":\""), end + off);
		/* the argument added to inner while it was open */
		assert_true((strstr(sp, "{\"key\":\"shmtrace.arg.bytes\",\"value\":"
				    "{\"intValue\":\"1\"}}") != NULL) == (i == 2));
		if (i == 1) {
			/* in flow 7: a child of outer, which encloses it, linked
			 * to the step before it */
			assert_non_null(strstr(sp, "\"parentSpanId\":"));
			assert_non_null(strstr(sp, "\"links\":[{\"traceId\":"));
			assert_non_null(strstr(sp, "{\"key\":\"shmtrace.link\",\"value\":"
					       "{\"stringValue\":\"previous_hop\"}}"));
			assert_non_null(strstr(sp, "{\"key\":\"shmtrace.flow.id\",\"value\":"
					       "{\"intValue\":7}}"));
		}
		if (i == 2)
			/* the instant inside the innermost open span is its event */
			assert_non_null(strstr(sp, "\"name\":\"last\",\"attributes\":"));
		free(sp);
	}
	sp = otlp_span_text(oj, "done");
	assert_null(strstr(sp, "unfinished"));
	free(sp);
}

static void test_args_and_open_spans(void **state)
{
	const char *ring = test_ring_name("otlp-args");
	char *chrome[] = { bin, "export", "--ring", (char *)ring, "-o", (char *)tmp("t.json"), NULL };
	char *otlp[] = { bin, "export", "--ring", (char *)ring, "--format", "otlp", "-o",
			 (char *)tmp("t.jsonl"), NULL };
	char *cj, *oj;
	uint64_t off;

	(void)state;
	record_and_kill(ring);
	assert_int_equal(run(NULL, NULL, chrome), 0);
	assert_int_equal(run(NULL, NULL, otlp), 0);
	cj = slurp(tmp("t.json"));
	oj = slurp(tmp("t.jsonl"));
	off = field_u64(cj, "\"trace_start_wall_ns\":") - field_u64(cj, "\"trace_start_ns\":");
	check_otlp_args(oj);
	check_open_spans(cj, oj, off);
	assert_null(strstr(oj, "shmtrace.args_lost"));
	free(cj);
	free(oj);
	shmtrace_ring_unlink(ring);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_args_and_open_spans),
		cmocka_unit_test(test_file_output),
	};

	return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
