/* SPDX-License-Identifier: MIT */
/*
 * test_unfinished.c - how long a span lasts that its process died inside,
 * and what it carries: a worker killed after half a second inside
 * "compute" shows it lasting at least as long as the test saw it inside,
 * unfinished, with the arguments added while it was open (an integer, a
 * string and a text), in the Chrome,
 * OTLP and Perfetto exports, both of a collector's capture (ending where
 * the collector found the worker dead) and of the ring read post-mortem
 * (ending with the trace, no one having seen it die); a live worker's
 * span lasts until the ring is read. A crafted capture pins which open
 * span the staged arguments go to, and the end of one whose recorded end
 * comes before what it holds.
 */
#include <signal.h>
#include <time.h>
#include <sys/wait.h>

#include "export_read.h"
#include "otlp_run.h"

/* how long the worker stays inside "compute" before it is killed */
#define STAY_NS 500000000ull

#define URL "/compute?job=7&shard=12"	/* a text of two records */

/*
 * The worker: a finished "warmup" with an argument, then "compute" open
 * with three (an integer, a string and a text), which it says on ready;
 * then it waits to be killed.
 */
static void worker(const char *ring, int ready)
{
	struct shmtrace_open_span sp;
	shmtrace_t *t;
	uint32_t cat;

	if (shmtrace_open(ring, &t) < 0)
		_exit(2);
	cat = shmtrace_intern(t, "work");
	shmtrace_begin(t, &sp, cat, shmtrace_intern(t, "warmup"), 0);
	shmtrace_span_arg(&sp, shmtrace_arg_int(shmtrace_intern(t, "items"), 1));
	shmtrace_end(&sp);
	shmtrace_begin(t, &sp, cat, shmtrace_intern(t, "compute"), 0);
	shmtrace_span_arg(&sp, shmtrace_arg_int(shmtrace_intern(t, "items"), 42));
	shmtrace_span_arg(&sp, shmtrace_arg_str(shmtrace_intern(t, "phase"),
						shmtrace_intern(t, "crunch")));
	shmtrace_span_arg(&sp, shmtrace_arg_text(shmtrace_intern(t, "url"), URL));
	if (write(ready, "i", 1) != 1)
		_exit(3);
	for (;;)
		pause();
}

/* Starts the worker; returns when it is inside "compute", *t_in then. */
static pid_t start_worker(const char *ring, uint64_t *t_in)
{
	int p[2];
	pid_t kid;
	char c;

	assert_int_equal(pipe(p), 0);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		/* a failed assertion must not leave it waiting */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		worker(ring, p[1]);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	*t_in = shmtrace_now();
	close(p[0]);
	return kid;
}

/* Lets the worker stay inside until STAY_NS after t_in by the clock, then
 * kills it; *t_kill is the moment the test killed it. */
static void kill_after_stay(pid_t kid, uint64_t t_in, uint64_t *t_kill)
{
	uint64_t until = t_in + STAY_NS;
	struct timespec ts = { .tv_sec = (time_t)(until / 1000000000ull),
			       .tv_nsec = (long)(until % 1000000000ull) };
	int st;

	/* the rings here read CLOCK_MONOTONIC (setup()) */
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
	*t_kill = shmtrace_now();
	assert_true(*t_kill - t_in >= STAY_NS);
	assert_int_equal(kill(kid, SIGKILL), 0);
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/* The unfinished "compute" of the Chrome export of in, checked for its
 * arguments, and "warmup" for its own; returns compute's start and end. */
static void chrome_compute(const char *const in[], uint64_t *ts, uint64_t *end)
{
	struct ev e;
	char *json;

	json = export_caps(in, NULL, tmp("t.json"));
	assert_true(find_event(json, "compute", 0, &e));
	assert_false(find_event(json, "compute", 1, &(struct ev){ 0 }));
	/* exactly those added while it was open, none of warmup's */
	assert_true(ev_has(&e, "\"args\":{\"items\":42,\"phase\":\"crunch\",\"url\":\"" URL "\","
			   "\"unfinished\":true}"));
	*ts = e.ts;
	*end = e.ts + e.dur;
	assert_true(find_event(json, "warmup", 0, &e));
	assert_true(ev_has(&e, "\"args\":{\"items\":1}}"));
	free(json);
}

static uint64_t field_u64(const char *from, const char *key)
{
	const char *p = strstr(from, key);

	assert_non_null(p);
	return strtoull(p + strlen(key), NULL, 10);
}

/*
 * The exports of in: "compute" in the Chrome export, lasting at least
 * observed, unfinished, with its arguments; the same span in the OTLP
 * export (as long, marked, its arguments as attributes) and in the
 * Perfetto one (compared with the Chrome export). Its start and end (ring
 * clock) in *ts and *end.
 */
static void check_exports(const char *const in[], const char *pf_in, uint64_t observed, uint64_t *ts,
			  uint64_t *end)
{
	uint64_t s, e;
	char *oj, *sp;

	chrome_compute(in, ts, end);
	assert_true(*end - *ts >= observed);
	oj = export_caps(in, "otlp", tmp("t.jsonl"));
	sp = otlp_span_text(oj, "compute");
	s = field_u64(sp, "\"startTimeUnixNano\":\"");
	e = field_u64(sp, "\"endTimeUnixNano\":\"");
	assert_int_equal(e - s, *end - *ts);
	assert_non_null(strstr(sp, "{\"key\":\"shmtrace.unfinished\",\"value\":{\"boolValue\":true}}"));
	assert_non_null(strstr(sp, "{\"key\":\"shmtrace.arg.items\",\"value\":{\"intValue\":\"42\"}}"));
	assert_non_null(strstr(sp, "{\"key\":\"shmtrace.arg.phase\",\"value\":"
			       "{\"stringValue\":\"crunch\"}}"));
	assert_non_null(strstr(sp, "{\"key\":\"shmtrace.arg.url\",\"value\":"
			       "{\"stringValue\":\"" URL "\"}}"));
	free(sp);
	free(oj);
	if (have_protoc())
		perfetto_compare(pf_in, "", "--expect-unfinished 1 --expect-flows 0");
}

/* With a collector: "compute" ends where the collector found the worker
 * dead, after the kill and before the collector stopped. */
static void test_collector_sees_death(void **state)
{
	const char *ring = test_ring_name("unf-col");
	char cap[512];
	const char *in[] = { cap, NULL };
	uint64_t t_in, t_kill, t_stop, ts, end;
	pid_t cpid, kid;
	int st;

	(void)state;
	/* kept: tmp()'s buffers are reused */
	snprintf(cap, sizeof(cap), "%s", tmp("c.cap"));
	cpid = cli_collector_create(ring, cap);
	kid = start_worker(ring, &t_in);
	kill_after_stay(kid, t_in, &t_kill);
	/* its last pass finds the worker dead, if no pass before did */
	assert_int_equal(kill(cpid, SIGTERM), 0);
	assert_int_equal(waitpid(cpid, &st, 0), cpid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	t_stop = shmtrace_now();
	check_exports(in, "\"$d/c.cap\"", t_kill - t_in, &ts, &end);
	assert_true(ts <= t_in);
	assert_true(end >= t_kill && end <= t_stop);
}

/*
 * Post-mortem, no collector: while the worker lives, "compute" lasts until
 * the ring is read; once it is killed (nobody seeing when), until the end
 * of the trace, which a survivor's span after the kill makes.
 */
static void test_post_mortem_ends_with_trace(void **state)
{
	const char *ring = test_ring_name("unf-pm");
	struct shmtrace_ring_config c = { .capacity = 4096, .blocks = 16,
					  .flags = SHMTRACE_CREATE_NO_TSC };
	const char *in[] = { "--ring", ring, NULL };
	char pf_in[160];
	uint64_t t_in, t_kill, t0, t1, ts, end;
	shmtrace_t *t;
	pid_t kid;
	struct ev e;
	char *json;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	kid = start_worker(ring, &t_in);
	t0 = shmtrace_now();
	chrome_compute(in, &ts, &end);
	t1 = shmtrace_now();
	assert_true(end >= t0 && end <= t1);
	kill_after_stay(kid, t_in, &t_kill);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	t0 = shmtrace_now();
	assert_int_equal(shmtrace_span(t, shmtrace_intern(t, "work"), shmtrace_intern(t, "after"),
				       t0, t0 + 1000, 0), 0);
	shmtrace_close(t);
	snprintf(pf_in, sizeof(pf_in), "--ring '%s'", ring);
	check_exports(in, pf_in, t_kill - t_in, &ts, &end);
	json = slurp(tmp("t.json"));
	assert_true(find_event(json, "after", 0, &e));
	assert_int_equal(end, e.ts + e.dur);
	free(json);
	shmtrace_ring_unlink(ring);
}

enum { S_CAT = 1, S_A, S_B, S_C, S_P, S_K, S_V, S_N };

#define R(ts_, dur_, flow_, pid_, name_, kind_)                                              \
	{ .ts = (ts_), .dur = (dur_), .flow = (flow_), .pid = (pid_), .tid = (pid_),          \
	  .name = (name_), .cat = S_CAT, .commit = SHMTRACE_KIND_##kind_ }
/* argument i of the span of pid begun at ts, named span, at depth d */
#define OARG(ts_, pid_, span, i, d, type, value)                                             \
	{ .ts = (ts_), .dur = (uint64_t)(value), .flow = SHMT_OPEN_ARG_FLOW(type, i, d),        \
	  .pid = (pid_), .tid = (pid_), .name = S_K, .cat = (span), .commit = SHMTRACE_KIND_ARG }

#define TEXT1 "hello, open span world"	/* 22 bytes: two text records */

/* Appends to r (at *n) the text records of text (len bytes), of the
 * argument before them; only the first `whole` of them. */
static void put_text(struct shmt_record *r, size_t *n, uint64_t ts, uint32_t pid,
		     const char *text, uint32_t len, uint32_t whole)
{
	for (uint32_t off = 0, k = 0; off < len && k < whole; off += SHMT_TEXT_CHUNK, k++) {
		struct shmt_record *d = &r[(*n)++];

		*d = (struct shmt_record){ .ts = ts, .pid = pid, .tid = pid,
					   .commit = SHMTRACE_KIND_TEXT };
		shmt_text_put(d, text + off, len - off < SHMT_TEXT_CHUNK ? len - off :
					     SHMT_TEXT_CHUNK);
	}
}

/*
 * Thread 100: A staged one argument and ended (with it); A again, begun
 * later at depth 0 and in flow 5, staged an integer, a string and a text;
 * B at depth 1 staged its second only (the first lost) and forged ones (a
 * depth, an index, a type out of range); both died open, B's end known
 * (5000 after its start), A's not. Thread 300: P, whose recorded end
 * comes before that of the span it holds, staged a text whose last record
 * is missing, then an integer. Thread 200, in flow 5, ends the trace at
 * 10000.
 */
static void make_capture(const char *path)
{
	static const struct shmt_cap_string s[] = {
		{ S_CAT, 3, "cat" }, { S_A, 1, "A" }, { S_B, 1, "B" }, { S_C, 1, "C" },
		{ S_P, 1, "P" }, { S_K, 1, "k" }, { S_V, 2, "ok" },
	};
	static const struct shmt_thread th[] = { { .pid = 100, .tid = 100, .start_time = 5 },
						 { .pid = 200, .tid = 200, .start_time = 6 },
						 { .pid = 300, .tid = 300, .start_time = 7 } };
	static const struct shmt_record head[] = {
		OARG(1000, 100, S_A, 1, 0, SHMTRACE_ARG_INT, 1), R(1000, 100, 0, 100, S_A, SPAN),
		{ .ts = 1000, .dur = 1, .flow = SHMT_ARG_FLOW(SHMTRACE_ARG_INT, 1, 1), .pid = 100,
		  .tid = 100, .name = S_K, .cat = S_A, .commit = SHMTRACE_KIND_ARG },
		OARG(2000, 100, S_A, 1, 0, SHMTRACE_ARG_INT, 2),
		OARG(2000, 100, S_A, 2, 0, SHMTRACE_ARG_STR, S_V),
		OARG(2000, 100, S_A, 3, 0, SHMTRACE_ARG_TEXT, SHMT_TEXT_VALUE(sizeof(TEXT1) - 1, 0)),
	};
	static const struct shmt_record mid[] = {
		OARG(2100, 100, S_B, 2, 1, SHMTRACE_ARG_INT, 3),
		OARG(2100, 100, S_B, 1, 9, SHMTRACE_ARG_INT, 4),
		OARG(2100, 100, S_B, 9, 1, SHMTRACE_ARG_INT, 5), OARG(2100, 100, S_B, 1, 1, 9, 6),
		R(2200, 50, 0, 100, S_C, SPAN),
		R(2000, 0, 5, 100, S_A, OPEN), R(2100, 5000, 0, 100, S_B, OPEN),
		OARG(100, 300, S_P, 1, 0, SHMTRACE_ARG_TEXT, SHMT_TEXT_VALUE(sizeof(TEXT1) - 1, 0)),
	};
	static const struct shmt_record tail[] = {
		OARG(100, 300, S_P, 2, 0, SHMTRACE_ARG_INT, 7),
		R(500, 400, 0, 300, S_C, SPAN), R(100, 300, 0, 300, S_P, OPEN),
		R(9000, 1000, 5, 200, S_C, SPAN),
	};
	struct shmt_record r[48];
	struct cap_spec c = {
		.h = { .version = SHMT_CAP_VERSION, .run_id = 11, .ring_capacity = 1024,
		       .realtime0 = 1700000000000000000ull, .mono0 = 50, .started_ns = 50 },
		.str = s, .nstr = sizeof(s) / sizeof(s[0]), .th = th, .nth = 3, .r = r,
	};

	memcpy(r, head, sizeof(head));
	c.nr = sizeof(head) / sizeof(head[0]);
	put_text(r, &c.nr, 2000, 100, TEXT1, sizeof(TEXT1) - 1, 2);
	memcpy(r + c.nr, mid, sizeof(mid));
	c.nr += sizeof(mid) / sizeof(mid[0]);
	put_text(r, &c.nr, 100, 300, TEXT1, sizeof(TEXT1) - 1, 1);
	memcpy(r + c.nr, tail, sizeof(tail));
	c.nr += sizeof(tail) / sizeof(tail[0]);
	snprintf(c.h.ring, sizeof(c.h.ring), "craft");
	put_capture(path, &c);
}

/* The k-th Chrome slice named name in json, which must start at ts, end
 * at end and say args. */
static void expect_slice(const char *json, const char *name, int k, uint64_t ts, uint64_t end,
			 const char *args)
{
	struct ev e;

	assert_true(find_event(json, name, k, &e));
	assert_int_equal(e.ts, ts);
	assert_int_equal(e.ts + e.dur, end);
	if (!ev_has(&e, args))
		fail_msg("%s: no %s in %.*s", name, args, (int)e.len, e.at);
}

static void test_open_args_matched(void **state)
{
	char cap[512];
	const char *all[] = { cap, NULL };
	const char *pid200[] = { cap, "--pid", "200", NULL };
	char *json;

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("k.cap"));
	make_capture(cap);
	json = export_caps(all, NULL, tmp("k.json"));
	expect_slice(json, "A", 0, 1000, 1100, "\"args\":{\"k\":1}}");
	/* the trace's end; its own arguments only, the string as its text */
	expect_slice(json, "A", 1, 2000, 10000,
		     "\"args\":{\"k\":2,\"k\":\"ok\",\"k\":\"" TEXT1 "\",\"unfinished\":true}}");
	/* its recorded end; a lone second argument and forged ones: none */
	expect_slice(json, "B", 0, 2100, 7100, "\"args\":{\"unfinished\":true}}");
	/* not before the end of the span it holds; a text cut short is
	 * never shown in part, and the argument after it is out of place */
	expect_slice(json, "P", 0, 100, 900, "\"args\":{\"unfinished\":true}}");
	/* the staged arguments are neither events' arguments nor lost */
	assert_non_null(strstr(json, "\"args\":4,\"args_lost\":0,"));
	assert_non_null(strstr(json, "\"unfinished\":3,"));
	free(json);
	/* a selection that takes A by its flow only keeps its arguments */
	json = export_caps(pid200, NULL, tmp("p.json"));
	assert_non_null(strstr(json, "\"args\":{\"k\":2,\"k\":\"ok\",\"k\":\"" TEXT1 "\","
			       "\"unfinished\":true}"));
	free(json);
	if (have_protoc())
		perfetto_compare("\"$d/k.cap\"", "", "--expect-unfinished 3 --expect-flows 1");
}

/*
 * A ring of the minor before arguments of open spans (made by an older
 * shmtrace): its readers would count an argument record of count 0 as an
 * argument whose event was lost, so the library stages none there; the
 * span ends with its arguments as ever.
 */
static void test_older_ring_gets_no_staged_args(void **state)
{
	const char *ring = test_ring_name("unf-old");
	struct shmtrace_ring_config c = { .capacity = 4096, .blocks = 16,
					  .flags = SHMTRACE_CREATE_NO_TSC };
	const char *in[] = { "--ring", ring, NULL };
	struct shmtrace_open_span sp;
	struct shmt_view v;
	shmtrace_t *t;
	char *json;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	ring_view_rw(ring, &v);
	v.h->major = 1;	/* a format 1.x minor */
	v.h->minor = SHMT_MINOR_OPEN_ARGS - 1;
	shmt_view_close(&v);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	shmtrace_begin(t, &sp, shmtrace_intern(t, "work"), shmtrace_intern(t, "compute"), 0);
	shmtrace_span_arg(&sp, shmtrace_arg_int(shmtrace_intern(t, "items"), 42));
	assert_int_equal(shmtrace_flush(t), 0);
	/* nothing staged but the name: the ring holds no record yet */
	ring_view_rw(ring, &v);
	assert_int_equal(shmt_ring_head(&v), 0);
	shmt_view_close(&v);
	assert_int_equal(shmtrace_end(&sp), 0);
	shmtrace_close(t);
	json = export_caps(in, NULL, tmp("o.json"));
	assert_non_null(strstr(json, "\"name\":\"compute\",\"args\":{\"items\":42}}"));
	assert_non_null(strstr(json, "\"args\":1,\"args_lost\":0,"));
	free(json);
	shmtrace_ring_unlink(ring);
}

static int setup(void **state)
{
	(void)state;
	/* every ring of this test reads CLOCK_MONOTONIC, as the test itself
	 * does: one clock for the worker, the collector and the test's own
	 * measure (a TSC calibrated per ring would differ between rings) */
	setenv("SHMTRACE_CLOCK", "monotonic", 1);
	return cli_setup_for("unfinished", true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_collector_sees_death),
		cmocka_unit_test(test_post_mortem_ends_with_trace),
		cmocka_unit_test(test_open_args_matched),
		cmocka_unit_test(test_older_ring_gets_no_staged_args),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
