/* SPDX-License-Identifier: MIT */
/*
 * hop.c - the producer of the OTLP tests (tests/e2e/otlp.sh): one process
 * per "host" records its side of requests that cross hosts.
 *
 *   otlp-hop RING origin N TRACEPARENT   makes N flows (shmtrace_flow_new)
 *       and one from TRACEPARENT; for each records a "send" span holding a
 *       "sent" instant, prints the flow id (and the header) one per line
 *   otlp-hop RING serve < lines          for each line (a flow id, or a
 *       traceparent header) records a "handle" span after it; an "idle"
 *       span outside any flow; and an instant outside any span
 *   otlp-hop RING args                   spans and instants with arguments
 *       (hostile strings, INT64_MIN/MAX, a key twice), two spans that
 *       overlap without nesting, a ring-local flow 7,
 *       then SIGKILLs itself inside outer > middle (flow 7) > inner (an
 *       argument added to inner while it is open)
 *
 * Ends with "done N" on stderr. Exit 0, 1 on an error, 2 on a usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmtrace.h"

static void span(shmtrace_t *t, uint32_t cat, uint32_t name, uint32_t iname, uint64_t flow)
{
	uint64_t t0 = shmtrace_now();

	/* an instant inside the span (exported as an event of it): the end
	 * is read after it, so no two spans overlap however long calls take */
	shmtrace_instant(t, cat, iname, 0);
	shmtrace_span(t, cat, name, t0, shmtrace_now() + 1, flow);
}

/* Never returns: the process dies inside three open spans. */
static void args_then_die(shmtrace_t *t, uint32_t cat)
{
	struct shmtrace_open_span sp;
	struct shmtrace_arg a[SHMTRACE_MAX_ARGS];
	uint64_t t0;

	shmtrace_set_process_name(t, "args");
	a[0] = shmtrace_arg_str(shmtrace_intern(t, "q\"uote\\ \xe2\x80\xa8"),
				shmtrace_intern(t, "a\"b\x01\n\t</script>\xff"));
	a[1] = shmtrace_arg_int(shmtrace_intern(t, "min"), INT64_MIN);
	a[2] = shmtrace_arg_int(shmtrace_intern(t, "max"), INT64_MAX);
	a[3] = shmtrace_arg_int(shmtrace_intern(t, "min"), -1);
	for (unsigned i = 0; i < 3; i++) {
		t0 = shmtrace_now();
		/* an instant inside the span, one outside any */
		shmtrace_instant_args(t, cat, shmtrace_intern(t, "mark"), 0, &a[i], 1);
		shmtrace_span_args(t, cat, shmtrace_intern(t, "work"), t0, shmtrace_now() + 1, 0,
				   a, SHMTRACE_MAX_ARGS - i);
		shmtrace_instant_args(t, cat, shmtrace_intern(t, "alone"), 0, a + i, 2);
	}
	/* two spans that overlap without nesting, however the process is
	 * scheduled: the second begins inside the first and ends after it */
	t0 = shmtrace_now();
	shmtrace_span(t, cat, shmtrace_intern(t, "early"), t0, t0 + 2000, 0);
	shmtrace_span(t, cat, shmtrace_intern(t, "across"), t0 + 1000, t0 + 3000, 0);
	/* what follows begins after both, in every run */
	while (shmtrace_now() <= t0 + 3000)
		;
	/* flow 7's step, holding the flow's instant */
	t0 = shmtrace_now();
	shmtrace_instant_args(t, cat, shmtrace_intern(t, "hop"), 7, &a[0], 2);
	shmtrace_span_args(t, cat, shmtrace_intern(t, "step"), t0, shmtrace_now() + 1, 7, &a[2], 1);
	{
		SHMTRACE_SCOPE("rpc", "outer");
		{
			SHMTRACE_SCOPE_FLOW("rpc", "middle", 7);

			shmtrace_begin(t, &sp, cat, shmtrace_intern(t, "inner"), 0);
			shmtrace_span_arg(&sp, a[1]);
			{
				SHMTRACE_SCOPE_VAR(done, "rpc", "done", 0);
				SHMTRACE_ARG_INT(done, "bytes", 4096);
			}
			shmtrace_instant_args(t, cat, shmtrace_intern(t, "last"), 0, &a[2], 1);
			fprintf(stderr, "done 0\n");
			raise(SIGKILL);
		}
	}
	exit(1);
}

/* origin mode: WANT new flows, then the one of TRACEPARENT; each flow
 * printed. Counts the spans in *n. 0, or 1 on a bad TRACEPARENT. */
static int run_origin(shmtrace_t *t, uint32_t cat, const char *want_s, const char *traceparent,
		      unsigned long *n)
{
	unsigned long want = strtoul(want_s, NULL, 10);
	uint32_t name = shmtrace_intern(t, "send"), iname = shmtrace_intern(t, "sent");
	uint64_t flow;

	shmtrace_set_process_name(t, "client");
	shmtrace_set_thread_name(t, "client-main");
	for (; *n < want; (*n)++) {
		flow = shmtrace_flow_new(t);
		span(t, cat, name, iname, flow);
		printf("%" PRIu64 "\n", flow);
	}
	flow = shmtrace_flow_from_traceparent(t, traceparent);
	if (!flow) {
		fprintf(stderr, "otlp-hop: '%s' is not a traceparent\n", traceparent);
		return 1;
	}
	span(t, cat, name, iname, flow);
	printf("%s\n", traceparent);
	(*n)++;
	return 0;
}

/* The flow of one input line (a flow id or a traceparent header), 0 if bad. */
static uint64_t parse_flow_line(shmtrace_t *t, const char *line)
{
	uint64_t flow;
	char *end;

	if (!strncmp(line, "00-", 3))
		return shmtrace_flow_from_traceparent(t, line);
	errno = 0;
	flow = strtoull(line, &end, 10);
	if (errno || end == line || *end)
		flow = 0;
	return flow;
}

/* serve mode: a "handle" span per stdin line, then the idle span and the
 * lone instant. Counts the spans in *n. 0, or 1 on a bad line. */
static int run_serve(shmtrace_t *t, uint32_t cat, unsigned long *n)
{
	uint32_t name = shmtrace_intern(t, "handle"), iname = shmtrace_intern(t, "parsed");
	uint32_t idle = shmtrace_intern(t, "idle"), lone = shmtrace_intern(t, "tick");
	char line[128];

	shmtrace_set_process_name(t, "server");
	shmtrace_set_thread_name(t, "server-main");
	while (fgets(line, sizeof(line), stdin)) {
		uint64_t flow;

		line[strcspn(line, "\n")] = 0;
		flow = parse_flow_line(t, line);
		if (!flow) {
			fprintf(stderr, "otlp-hop: bad line '%s'\n", line);
			return 1;
		}
		span(t, cat, name, iname, flow);
		(*n)++;
	}
	span(t, cat, idle, iname, 0);
	shmtrace_instant(t, cat, lone, 0);
	return 0;
}

int main(int argc, char **argv)
{
	shmtrace_t *t;
	uint32_t cat;
	unsigned long n = 0;
	int ret;

	if (argc < 3 || (!strcmp(argv[2], "origin") && argc != 5)) {
		fprintf(stderr, "usage: otlp-hop RING origin N TRACEPARENT | otlp-hop RING serve | "
			"otlp-hop RING args\n");
		return 2;
	}
	if (!strcmp(argv[2], "args")) {
		/* the scope macros record through the default handle */
		ret = shmtrace_default_open(argv[1]);
		t = shmtrace_default;
	} else {
		ret = shmtrace_open(argv[1], &t);
	}
	if (ret < 0) {
		fprintf(stderr, "otlp-hop: open %s: %s\n", argv[1], shmtrace_strerror(ret));
		return 1;
	}
	cat = shmtrace_intern(t, "rpc");
	if (!strcmp(argv[2], "origin")) {
		if (run_origin(t, cat, argv[3], argv[4], &n))
			return 1;
	} else if (!strcmp(argv[2], "serve")) {
		if (run_serve(t, cat, &n))
			return 1;
	} else if (!strcmp(argv[2], "args")) {
		args_then_die(t, cat);
	} else {
		fprintf(stderr, "otlp-hop: unknown mode '%s'\n", argv[2]);
		return 2;
	}
	shmtrace_close(t);
	fprintf(stderr, "done %lu\n", n);
	return 0;
}
