/* SPDX-License-Identifier: MIT */
/*
 * test_otlp_tree.c - the OTLP export's span model on captures made by
 * hand, for the shapes a real run seldom makes: one thread's tree holding
 * two flows (the spans above and between the hops join the first flow;
 * the second hop keeps its flow's trace, a child of the hop before it,
 * linked to the span enclosing it); instants beyond the events a span
 * takes; hops of one flow with identical times, and a receiving span
 * around earlier steps of its flow (parents never in a circle); nesting
 * deeper than the walk follows; a span whose enclosing span --from
 * leaves out. The prefork shape from real producers is
 * tests/e2e/otlp_tree.sh.
 */
#include "cli_run.h"
#include "otlp_run.h"
#include "otlp_int.h"

#define T0 1000000ull	/* the records' times start here */

/* String ids: 1 "cat", then NAMES from 2. */
static const char *const NAMES[] = { "R", "A0", "A1", "x", "y", "B0", "B1", "z", "S", "inner",
				     "i", "deep", "lone", "P", "Q", "Z", "Zs", "Zi", "n", "top",
				     "at_max", "beyond", "beyond2", "early", "late", "ask", "reply",
				     "ask2", "reply2", "send", "handle", "call", "work", "req" };
#define NNAMES (sizeof(NAMES) / sizeof(NAMES[0]))

static uint32_t id_of(const char *name)
{
	for (uint32_t i = 0; i < NNAMES; i++)
		if (!strcmp(NAMES[i], name))
			return i + 2;
	fail_msg("no name %s", name);
	return 0;
}

/* A record of thread 1 (pid 100) or 2 (pid 200), at T0 + ts. */
static struct shmt_record rec(int thread, uint32_t kind, const char *name, uint64_t ts,
			      uint64_t dur, uint64_t flow)
{
	return (struct shmt_record){ .ts = T0 + ts, .dur = dur, .flow = flow,
				     .pid = thread == 1 ? 100 : 200, .tid = thread == 1 ? 100 : 201,
				     .name = id_of(name), .cat = 1, .commit = kind };
}

static struct shmt_record span(int thread, const char *name, uint64_t ts, uint64_t dur,
			       uint64_t flow)
{
	return rec(thread, SHMTRACE_KIND_SPAN, name, ts, dur, flow);
}

static struct shmt_record instant(int thread, const char *name, uint64_t ts, uint64_t flow)
{
	return rec(thread, SHMTRACE_KIND_INSTANT, name, ts, 0, flow);
}

/* Writes a capture of r[0..n), in their order of arrival, to tmp(name). */
static void capture(const char *name, const struct shmt_record *r, size_t n)
{
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .run_id = 9, .ring_capacity = 1 << 16,
		.realtime0 = 1700000000000000000ull, .mono0 = 1000, .started_ns = 1000,
	};
	struct shmt_cap_string s[NNAMES + 1] = { { 1, 3, "cat" } };
	struct shmt_thread th[2] = { { .pid = 100, .tid = 100, .start_time = 5 },
				     { .pid = 200, .tid = 201, .start_time = 6 } };
	struct shmt_cap_end e = { .records = n, .end_ns = T0 + 1000000 };
	msgpack_sbuffer b;

	snprintf(h.ring, sizeof(h.ring), "treering");
	for (uint32_t i = 0; i < NNAMES; i++)
		s[i + 1] = (struct shmt_cap_string){ i + 2, (uint32_t)strlen(NAMES[i]), NAMES[i] };
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, s, NNAMES + 1), 0);
	assert_int_equal(shmt_cap_put_threads(&b, th, 2), 0);
	for (size_t i = 0; i < n; i += 4096)
		assert_int_equal(shmt_cap_put_records(&b, i, r + i, n - i < 4096 ? n - i : 4096), 0);
	assert_int_equal(shmt_cap_put_end(&b, &e), 0);
	put_file(tmp(name), b.data, b.size);
	msgpack_sbuffer_destroy(&b);
}

/* The OTLP export of capture cap (with opt, if not NULL); the text (to free). */
static char *export_otlp(const char *cap, const char *opt, const char *arg)
{
	char *argv[] = { bin, "export", (char *)tmp(cap), "--format", "otlp", "-o",
			 (char *)tmp("out.jsonl"), (char *)opt, (char *)arg, NULL };

	if (run(NULL, tmp("export.err"), argv)) {
		print_file(tmp("export.err"));
		fail_msg("shmtrace export --format otlp %s failed", cap);
	}
	return slurp(tmp("out.jsonl"));
}

/* What the export says of one span. */
struct ospan {
	char id[17], trace[33], parent[17];	/* "": none */
	char lid[17], ltrace[33], why[24];	/* its link, "": none */
	size_t events;
};

/* The hex digits (or text) after key in from, up to the next '"'. */
static void after(const char *from, const char *key, char *out, size_t size)
{
	const char *p = from ? strstr(from, key) : NULL;
	size_t n = 0;

	if (p)
		for (p += strlen(key); *p && *p != '"' && n + 1 < size; p++)
			out[n++] = *p;
	out[n] = 0;
}

static struct ospan find(const char *jsonl, const char *name)
{
	char *sp = otlp_span_text(jsonl, name);
	const char *links = strstr(sp, "\"links\":[");
	struct ospan o;

	after(sp, "{\"traceId\":\"", o.trace, sizeof(o.trace));
	after(sp, "\"spanId\":\"", o.id, sizeof(o.id));
	after(sp, "\"parentSpanId\":\"", o.parent, sizeof(o.parent));
	assert_non_null(links);
	links += strlen("\"links\":[");
	if (*links == '{') {
		after(links, "{\"traceId\":\"", o.ltrace, sizeof(o.ltrace));
		after(links, "\"spanId\":\"", o.lid, sizeof(o.lid));
		after(links, "\"shmtrace.link\",\"value\":{\"stringValue\":\"", o.why, sizeof(o.why));
	} else {
		o.ltrace[0] = o.lid[0] = o.why[0] = 0;
	}
	o.events = count(sp, "\"timeUnixNano\"");
	free(sp);
	return o;
}

/* a's parent is b, in b's trace, with no link */
static void child_of(const struct ospan *a, const struct ospan *b)
{
	assert_string_equal(a->parent, b->id);
	assert_string_equal(a->trace, b->trace);
	assert_string_equal(a->why, "");
}

/* a links to b, for why */
static void links_to(const struct ospan *a, const struct ospan *b, const char *why)
{
	assert_string_equal(a->why, why);
	assert_string_equal(a->lid, b->id);
	assert_string_equal(a->ltrace, b->trace);
}

/* The spans of an export: each span's id, trace and parent. */
struct tspan {
	char id[17], trace[33], parent[17];
};

static size_t all_spans(const char *jsonl, struct tspan *v, size_t max)
{
	size_t n = 0;

	/* a span's name follows its ids; a link's attributes follow its ids */
	for (const char *p = jsonl; (p = strstr(p, "{\"traceId\":\"")); p++) {
		const char *next = strstr(p + 1, "{\"traceId\":\""), *name = strstr(p, "\"name\":\"");
		const char *attrs = strstr(p, "\"attributes\":");

		if (!name || (attrs && attrs < name) || (next && next < name))
			continue;
		assert_true(n < max);
		after(p, "{\"traceId\":\"", v[n].trace, sizeof(v[n].trace));
		after(p, "\"spanId\":\"", v[n].id, sizeof(v[n].id));
		v[n].parent[0] = 0;
		if (strstr(p, "\"parentSpanId\":\"") && strstr(p, "\"parentSpanId\":\"") < name)
			after(p, "\"parentSpanId\":\"", v[n].parent, sizeof(v[n].parent));
		n++;
	}
	return n;
}

/* Every span of the export reaches a root through parents of its own
 * trace, within as many steps as there are spans (else parents make a
 * circle), and each trace has one root. Returns how many spans there are. */
static size_t expect_trees(const char *jsonl)
{
	struct tspan v[64];
	size_t n = all_spans(jsonl, v, 64);

	for (size_t i = 0; i < n; i++) {
		size_t at = i, steps = 0, roots = 0;

		while (v[at].parent[0]) {
			size_t k = 0;

			while (k < n && strcmp(v[k].id, v[at].parent))
				k++;
			assert_true(k < n);
			assert_string_equal(v[k].trace, v[at].trace);
			at = k;
			if (++steps > n)
				fail_msg("span %s: its parents make a circle", v[i].id);
		}
		for (size_t k = 0; k < n; k++)
			roots += !v[k].parent[0] && !strcmp(v[k].trace, v[i].trace);
		assert_int_equal(roots, 1);
	}
	return n;
}

/*
 * Thread 1: R [0, 1000] holds hop A1 of flow 1 (x inside it), y, and hop B1
 * of flow 2 (z inside it); thread 2 has the hops before them, A0 and B0.
 */
static void two_flows(void)
{
	const struct shmt_record r[] = {
		span(2, "A0", 50, 40, 1), span(1, "x", 150, 50, 0), span(1, "A1", 100, 200, 1),
		span(1, "y", 400, 100, 0), span(2, "B0", 550, 30, 2), span(1, "z", 700, 100, 0),
		span(1, "B1", 600, 300, 2), span(1, "R", 0, 1000, 0),
	};

	capture("two.cap", r, sizeof(r) / sizeof(r[0]));
}

static void test_one_tree_two_flows(void **state)
{
	struct ospan R, A0, A1, x, y, B0, B1, z;
	char *j;

	(void)state;
	two_flows();
	j = export_otlp("two.cap", NULL, NULL);
	assert_int_equal(expect_trees(j), 8);
	R = find(j, "R"), A0 = find(j, "A0"), A1 = find(j, "A1"), x = find(j, "x");
	y = find(j, "y"), B0 = find(j, "B0"), B1 = find(j, "B1"), z = find(j, "z");
	/* the tree joins its first flow: R a child of the hop before A1 */
	assert_string_equal(A0.parent, "");
	child_of(&R, &A0);
	assert_string_equal(A1.parent, R.id);
	links_to(&A1, &A0, "previous_hop");
	child_of(&x, &A1);
	child_of(&y, &R);
	/* the second flow keeps its trace: B1 follows B0, links to R */
	assert_string_equal(B0.parent, "");
	assert_string_not_equal(B0.trace, A0.trace);
	assert_string_equal(B1.parent, B0.id);
	assert_string_equal(B1.trace, B0.trace);
	links_to(&B1, &R, "enclosing_span");
	child_of(&z, &B1);
	free(j);

	/* --flows-only: the hops, each a child of the one before */
	j = export_otlp("two.cap", "--flows-only", NULL);
	assert_null(strstr(j, "\"name\":\"R\""));
	assert_null(strstr(j, "\"name\":\"x\""));
	A0 = find(j, "A0"), A1 = find(j, "A1"), B0 = find(j, "B0"), B1 = find(j, "B1");
	child_of(&A1, &A0);
	child_of(&B1, &B0);
	free(j);
}

/*
 * S [0, 10000] holds 130 instants "i" and inner [5000, 6000], which holds
 * "deep"; "lone" is inside nothing. S takes OTLP_EVENTS_MAX of the "i" as
 * events, the others are zero-length spans, its children.
 */
static void test_events_and_instants_alone(void **state)
{
	struct shmt_record r[136];
	struct ospan S, inner, lone;
	size_t n = 0, alone = 0;
	const char *p;
	char *j;

	(void)state;
	for (uint64_t k = 1; k <= 130; k++)
		r[n++] = instant(1, "i", k * 10, 0);
	r[n++] = instant(1, "deep", 5500, 0);
	r[n++] = span(1, "inner", 5000, 1000, 0);
	r[n++] = span(1, "S", 0, 10000, 0);
	r[n++] = instant(1, "lone", 20000, 0);
	capture("ev.cap", r, n);
	j = export_otlp("ev.cap", NULL, NULL);
	S = find(j, "S"), inner = find(j, "inner"), lone = find(j, "lone");
	assert_int_equal(S.events, OTLP_EVENTS_MAX);
	assert_int_equal(inner.events, 1);
	child_of(&inner, &S);
	assert_string_equal(lone.parent, "");
	assert_int_equal(count(j, "{\"key\":\"shmtrace.instant\""), 130 - OTLP_EVENTS_MAX + 1);
	/* the instants beyond the events: zero-length children of S */
	for (p = j; (p = strstr(p, "\"name\":\"i\",\"kind\":")); p++) {
		const char *sp = p;
		char parent[17];

		while (strncmp(sp, "{\"traceId\"", 10))
			sp--;
		after(sp, "\"parentSpanId\":\"", parent, sizeof(parent));
		assert_string_equal(parent, S.id);
		alone++;
	}
	assert_int_equal(alone, 130 - OTLP_EVENTS_MAX);
	free(j);
}

/*
 * Hops of one flow with the same start on one thread: P and Q identical
 * (P arrived first, so it encloses Q), Z later on thread 2; a zero-length
 * span Zs and an instant Zi of flow 4 at one time (Zi arrived first). The
 * hop before each is its enclosing span, or its parent: never a circle.
 */
static void test_ties_make_no_circle(void **state)
{
	const struct shmt_record r[] = {
		span(1, "P", 1000, 500, 3), span(1, "Q", 1000, 500, 3), span(2, "Z", 2000, 100, 3),
		instant(1, "Zi", 3000, 4), span(1, "Zs", 3000, 0, 4),
	};
	struct ospan P, Q, Z, Zs, Zi;
	char *j;

	(void)state;
	capture("ties.cap", r, sizeof(r) / sizeof(r[0]));
	j = export_otlp("ties.cap", NULL, NULL);
	assert_int_equal(expect_trees(j), 5);
	P = find(j, "P"), Q = find(j, "Q"), Z = find(j, "Z"), Zs = find(j, "Zs"), Zi = find(j, "Zi");
	assert_string_equal(P.parent, "");
	child_of(&Q, &P);
	child_of(&Z, &Q);
	assert_string_equal(Zs.parent, "");
	child_of(&Zi, &Zs);
	free(j);
}

/* The export of capture r[0..n) of spans, saved as cap: all n spans,
 * each reaching its trace's one root. The text, to free. */
static char *export_trees(const char *cap, const struct shmt_record *r, size_t n)
{
	char *j;

	capture(cap, r, n);
	j = export_otlp(cap, NULL, NULL);
	assert_int_equal(expect_trees(j), n);
	return j;
}

/* Flow 7's "send", "handle" and "call" as a receiving "call" around "send"
 * leaves them: "send" first, a root linked to the span around it
 * (enclosing), "handle" its child, "call" the child of "handle". */
static void expect_send_first(const char *j, const char *enclosing)
{
	struct ospan send = find(j, "send"), handle = find(j, "handle"), call = find(j, "call");
	struct ospan around = find(j, enclosing);

	assert_string_equal(send.parent, "");
	links_to(&send, &around, "enclosing_span");
	child_of(&handle, &send);
	child_of(&call, &handle);
}

/*
 * A receiving span is placed in its flow by its end, so it can enclose
 * steps of its flow that come before it: "call" (receiving, around
 * "send") is placed after "handle", which follows "send". The parent of
 * "send" cannot be "call" (which follows "handle", which follows "send"):
 * it is the step before it (none), and it links to "call".
 */
static void test_receiving_span_around_its_flow(void **state)
{
	const struct shmt_record r[] = {
		span(1, "send", 100, 10, 7), span(2, "handle", 120, 30, 7),
		span(1, "call", 90, 110, shmtrace_flow_recv(7)),
	};
	char *j;

	(void)state;
	j = export_trees("recv.cap", r, 3);
	expect_send_first(j, "call");
	free(j);
}

/*
 * The same with a span between: "work" (no step) inside "call", around
 * "send", hangs from "call"; so "send" is no child of it either. And a
 * tree whose root "req" is no step, whose first step by start "call"
 * (receiving, [10, 100]) comes after "send" [95, 150], which overlaps it:
 * "req" is the child of the step before "call", so "send" is none of
 * "req"'s.
 */
static void test_receiving_span_around_a_span_of_its_flow(void **state)
{
	const struct shmt_record r[] = {
		span(1, "send", 100, 10, 7), span(1, "work", 95, 20, 0), span(2, "handle", 120, 30, 7),
		span(1, "call", 90, 110, shmtrace_flow_recv(7)),
	};
	const struct shmt_record r2[] = {
		span(1, "call", 10, 90, shmtrace_flow_recv(8)), span(1, "send", 95, 55, 8),
		span(1, "req", 0, 1000, 0),
	};
	struct ospan send, call, work, req;
	char *j;

	(void)state;
	j = export_trees("recv2.cap", r, 4);
	call = find(j, "call"), work = find(j, "work");
	child_of(&work, &call);
	expect_send_first(j, "work");
	free(j);

	j = export_trees("recv3.cap", r2, 3);
	send = find(j, "send"), call = find(j, "call"), req = find(j, "req");
	assert_string_equal(send.parent, "");
	links_to(&send, &req, "enclosing_span");
	child_of(&req, &send);
	assert_string_equal(call.parent, req.id);
	links_to(&call, &send, "previous_hop");
	free(j);
}

/* OTLP_DEPTH_MAX + 2 spans, each inside the one before: the two deepest
 * are children of the deepest span the walk follows. */
static void test_nesting_deeper_than_followed(void **state)
{
	size_t n = OTLP_DEPTH_MAX + 2;
	struct shmt_record *r = calloc(n, sizeof(*r));
	struct ospan top, at_max, beyond, beyond2;
	char *j;

	(void)state;
	assert_non_null(r);
	/* innermost first: each ends before the one enclosing it */
	for (size_t k = n; k-- > 0;) {
		const char *name = k == 0 ? "top" : k == n - 3 ? "at_max" : k == n - 2 ? "beyond" :
				   k == n - 1 ? "beyond2" : "n";

		r[n - 1 - k] = span(1, name, k, 2 * (n - k), 0);
	}
	capture("deep.cap", r, n);
	free(r);
	j = export_otlp("deep.cap", NULL, NULL);
	top = find(j, "top"), at_max = find(j, "at_max");
	beyond = find(j, "beyond"), beyond2 = find(j, "beyond2");
	assert_string_equal(top.parent, "");
	child_of(&beyond, &at_max);
	child_of(&beyond2, &at_max);
	assert_string_equal(at_max.trace, top.trace);
	free(j);
}

/* A span whose enclosing span --from leaves out is a root. */
static void test_from_cuts_the_tree(void **state)
{
	const struct shmt_record r[] = { span(1, "late", 600, 100, 0), span(1, "early", 0, 1000, 0) };
	struct ospan late;
	char *j;

	(void)state;
	capture("cut.cap", r, 2);
	j = export_otlp("cut.cap", "--from", "500ns");
	assert_null(strstr(j, "\"name\":\"early\""));
	late = find(j, "late");
	assert_string_equal(late.parent, "");
	free(j);
}

/* An id reused after a step that terminated its flow: two flows, two
 * traces, each hop the child of the one before in its own. */
static void test_reused_id_is_a_trace_of_its_own(void **state)
{
	const struct shmt_record r[] = {
		span(1, "ask", 0, 100, 7), span(2, "reply", 200, 100, shmtrace_flow_end(7)),
		span(1, "ask2", 1000, 100, 7), span(2, "reply2", 1200, 100, 7),
	};
	struct ospan ask, reply, ask2, reply2;
	char *j;

	(void)state;
	capture("reuse.cap", r, 4);
	j = export_otlp("reuse.cap", NULL, NULL);
	ask = find(j, "ask");
	reply = find(j, "reply");
	ask2 = find(j, "ask2");
	reply2 = find(j, "reply2");
	child_of(&reply, &ask);
	child_of(&reply2, &ask2);
	assert_string_equal(ask2.parent, "");
	assert_string_not_equal(ask.trace, ask2.trace);
	free(j);
}

/* The number after key in text (a time, in quotes). */
static uint64_t time_after(const char *text, const char *key)
{
	char digits[24];

	after(text, key, digits, sizeof(digits));
	assert_true(digits[0]);
	return strtoull(digits, NULL, 10);
}

/*
 * A forged duration that runs past 2^64 ends at the end of time, never
 * before its start: on the wall clock (the capture's realtime0 - mono0
 * added) as in the walk. Both encodings take their times from
 * otlp_span_times().
 */
static void test_end_never_before_start(void **state)
{
	const uint64_t wall = 1700000000000000000ull - 1000;	/* capture()'s clocks */
	const struct shmt_record r[] = { span(1, "top", 5, UINT64_MAX - 100, 0),
					 span(1, "n", 10, 20, 0) };
	struct otlp o = { .wall_off = wall };
	struct span sp = { .ts = T0, .dur = UINT64_MAX - T0 - wall + 1 };
	uint64_t start, end;
	char *j, *top, *n;

	(void)state;
	capture("end.cap", r, 2);
	j = export_otlp("end.cap", NULL, NULL);
	top = otlp_span_text(j, "top");
	n = otlp_span_text(j, "n");
	assert_int_equal(time_after(top, "\"startTimeUnixNano\":\""), T0 + 5 + wall);
	assert_true(time_after(top, "\"endTimeUnixNano\":\"") == UINT64_MAX);
	/* still the span around the other */
	assert_string_equal(find(j, "n").parent, find(j, "top").id);
	assert_int_equal(time_after(n, "\"endTimeUnixNano\":\""), T0 + 30 + wall);
	free(top);
	free(n);
	free(j);

	/* wrapping only once the wall clock's offset is added */
	otlp_span_times(&o, &sp, &start, &end);
	assert_int_equal(start, T0 + wall);
	assert_true(end == UINT64_MAX);
	sp.dur = 7;
	otlp_span_times(&o, &sp, &start, &end);
	assert_int_equal(end, T0 + wall + 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_tree_two_flows),
		cmocka_unit_test(test_events_and_instants_alone),
		cmocka_unit_test(test_ties_make_no_circle),
		cmocka_unit_test(test_receiving_span_around_its_flow),
		cmocka_unit_test(test_receiving_span_around_a_span_of_its_flow),
		cmocka_unit_test(test_nesting_deeper_than_followed),
		cmocka_unit_test(test_from_cuts_the_tree),
		cmocka_unit_test(test_reused_id_is_a_trace_of_its_own),
		cmocka_unit_test(test_end_never_before_start),
	};

	if (cli_setup_for("otlp-tree", false) < 0) {
		fprintf(stderr, "shmtrace not built\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, cli_teardown);
}
