/* SPDX-License-Identifier: MIT */
/*
 * test_inflight_crash.c - the spans a process dies inside, and arguments on
 * events: a producer SIGKILLed in nested spans is exported post-mortem with
 * them open ("unfinished"), nested, with the argument added to one while
 * it was open, and nothing else changed; a collector records them for its
 * capture, ending where it found the producer dead; arguments with hostile
 * strings, the maximum count, and argument records whose event was lost
 * (never attached to another one). How long an unfinished span lasts:
 * test_unfinished.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "export_read.h"


/* Exports the ring post-mortem and returns the JSON (the caller frees it). */
static char *export_ring_json(const char *ring)
{
	char *argv[] = { bin, "export", "--ring", (char *)ring, "-o", (char *)tmp("t.json"), NULL };

	assert_int_equal(run(NULL, tmp("t.err"), argv), 0);
	return slurp(tmp("t.json"));
}

static void make_ring(const char *ring, uint32_t capacity, uint32_t mode)
{
	struct shmtrace_ring_config c = { .capacity = capacity, .mode = mode, .blocks = 16 };

	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
}

/*
 * The child: finished spans, then outer > middle (SHMTRACE_SCOPE) > inner
 * (shmtrace_begin) with a finished "done" span inside, then SIGKILL.
 * depth extra scopes more are opened inside inner first.
 */
static void child_dies_nested(const char *ring, int extra, int ready)
{
	shmtrace_t *t;
	struct shmtrace_open_span sp;

	if (shmtrace_default_open(ring) < 0)
		_exit(2);
	t = shmtrace_default;
	{
		uint32_t c = shmtrace_intern(t, "test"), n = shmtrace_intern(t, "before");
		uint64_t t0 = shmtrace_now();

		for (int i = 0; i < 100; i++)	/* more than a block: some reach the ring */
			shmtrace_span(t, c, n, t0 + (uint64_t)i, t0 + (uint64_t)i + 1, 0);
	}
	{
		SHMTRACE_SCOPE("test", "outer");
		{
			SHMTRACE_SCOPE_FLOW("test", "middle", 0);

			shmtrace_begin(t, &sp, shmtrace_intern(t, "test"), shmtrace_intern(t, "inner"), 0);
			shmtrace_span_arg(&sp, shmtrace_arg_int(shmtrace_intern(t, "bytes"), 1));
			{
				SHMTRACE_SCOPE("test", "done");
			}
			for (int i = 0; i < extra; i++) {
				struct shmtrace_open_span *x = malloc(sizeof(*x));

				shmtrace_begin(t, x, shmtrace_intern(t, "test"),
					       shmtrace_intern(t, "deep"), 0);
			}
			if (write(ready, "k", 1) != 1)
				_exit(3);
			raise(SIGKILL);
		}
	}
	_exit(4);
}

static pid_t spawn_dying(const char *ring, int extra)
{
	int p[2], st;
	char c;
	pid_t kid;

	assert_int_equal(pipe(p), 0);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		close(p[0]);
		child_dies_nested(ring, extra, p[1]);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	return kid;
}

/* outer, middle and inner open, nested, ending together: post-mortem at
 * the trace's last recorded moment (where "done" ended, or where the last
 * "deep" began: its thread was the only one), with a collector where it
 * found the thread dead (seen_dead), which is no earlier. */
static void check_nested(const char *json, bool seen_dead)
{
	struct ev outer, middle, inner, done, x;
	uint64_t last;

	assert_true(find_event(json, "outer", 0, &outer));
	assert_true(find_event(json, "middle", 0, &middle));
	assert_true(find_event(json, "inner", 0, &inner));
	assert_true(find_event(json, "done", 0, &done));
	assert_false(find_event(json, "outer", 1, &x));
	assert_false(find_event(json, "inner", 1, &x));
	assert_true(ev_has(&outer, "\"args\":{\"unfinished\":true}"));
	assert_true(ev_has(&middle, "\"args\":{\"unfinished\":true}"));
	/* the argument added while it was open */
	assert_true(ev_has(&inner, "\"args\":{\"bytes\":1,\"unfinished\":true}"));
	assert_false(ev_has(&done, "unfinished"));
	assert_true(outer.ts <= middle.ts && middle.ts <= inner.ts && inner.ts <= done.ts);
	last = done.ts + done.dur;
	for (int k = 0; find_event(json, "deep", k, &x); k++)
		last = x.ts;
	if (seen_dead) {
		assert_true(outer.ts + outer.dur >= last);
		last = outer.ts + outer.dur;
	}
	assert_int_equal(outer.ts + outer.dur, last);
	assert_int_equal(middle.ts + middle.dur, last);
	assert_int_equal(inner.ts + inner.dur, last);
}

static void test_killed_in_nested_scope(void **state)
{
	const char *ring = test_ring_name("nest");
	char *json;

	(void)state;
	make_ring(ring, 4096, SHMTRACE_MODE_DISCARD);
	spawn_dying(ring, 0);
	json = export_ring_json(ring);
	check_nested(json, false);
	/* nothing else changed: the 100 spans before, "done", three open */
	assert_int_equal(count(json, "\"name\":\"before\""), 100);
	assert_int_equal(count(json, "\"ph\":\"X\""), 100 + 1 + 3);
	assert_int_equal(count(json, "unfinished\":true"), 3);
	assert_non_null(strstr(json, "\"unfinished\":3,"));
	free(json);
	{
		char *argv[] = { bin, "summary", "--ring", (char *)ring, "--json", NULL };

		assert_int_equal(run(tmp("sum.json"), NULL, argv), 0);
		json = slurp(tmp("sum.json"));
		assert_non_null(strstr(json, "\"name\":\"outer\",\"count\":0,"));
		assert_non_null(strstr(json, "\"unfinished\":1}"));
		free(json);
	}
	shmtrace_ring_unlink(ring);
}

/* Deeper than SHMTRACE_OPEN_MAX: the outermost ones are shown. */
static void test_depth_bound(void **state)
{
	const char *ring = test_ring_name("deep");
	struct ev x;
	char *json;

	(void)state;
	make_ring(ring, 4096, SHMTRACE_MODE_DISCARD);
	spawn_dying(ring, 3);	/* outer, middle, inner, deep x3: 6 open */
	json = export_ring_json(ring);
	check_nested(json, false);
	assert_int_equal(SHMTRACE_OPEN_MAX, SHMT_OPEN_MAX);
	assert_true(find_event(json, "deep", 0, &x));
	assert_true(ev_has(&x, "unfinished"));
	assert_int_equal(x.dur, 0);
	assert_false(find_event(json, "deep", 1, &x));
	assert_int_equal(count(json, "unfinished\":true"), SHMTRACE_OPEN_MAX);
	free(json);
	shmtrace_ring_unlink(ring);
}

/* A collector running while the producer dies records its open spans. */
static void test_collector_records_open_spans(void **state)
{
	const char *ring = test_ring_name("col");
	char *json;
	int st;
	pid_t cpid;

	(void)state;
	cpid = cli_collector_create(ring, tmp("c.cap"));
	spawn_dying(ring, 0);
	/* its last pass adopts the dead thread's block */
	kill(cpid, SIGTERM);
	assert_int_equal(waitpid(cpid, &st, 0), cpid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	{
		char *argv[] = { bin, "export", (char *)tmp("c.cap"), "-o", (char *)tmp("c.json"), NULL };

		assert_int_equal(run(NULL, NULL, argv), 0);
	}
	json = slurp(tmp("c.json"));
	check_nested(json, true);
	assert_int_equal(count(json, "\"ph\":\"X\""), 100 + 1 + 3);
	free(json);
}

/* A live thread's open span is shown; a forked child ending its parent's
 * span records its own and leaves the parent's stack alone. */
static void test_live_and_fork(void **state)
{
	const char *ring = test_ring_name("live");
	struct shmtrace_open_span sp;
	shmtrace_t *t;
	struct ev e;
	char *json;
	pid_t kid;
	int st;

	(void)state;
	make_ring(ring, 4096, SHMTRACE_MODE_DISCARD);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	assert_int_equal(shmtrace_begin(t, &sp, shmtrace_intern(t, "c"), shmtrace_intern(t, "held"),
					 0), 0);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		_exit(shmtrace_end(&sp) == 0 ? 0 : 1);
	}
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	json = export_ring_json(ring);
	/* the child's finished one and our open one */
	assert_true(find_event(json, "held", 0, &e));
	assert_true(find_event(json, "held", 1, &e));
	assert_int_equal(count(json, "unfinished\":true"), 1);
	free(json);
	assert_int_equal(shmtrace_end(&sp), 0);
	json = export_ring_json(ring);
	assert_int_equal(count(json, "unfinished\":true"), 0);
	assert_non_null(strstr(json, "\"unfinished\":0,"));
	free(json);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* Hostile keys and values, the maximum count, and one too many. */
static void test_args_hostile(void **state)
{
	const char *ring = test_ring_name("args");
	struct shmtrace_arg a[SHMTRACE_MAX_ARGS + 1];
	struct shmtrace_open_span sp;
	shmtrace_t *t;
	uint32_t c, n;
	struct ev e;
	char *json;

	(void)state;
	make_ring(ring, 4096, SHMTRACE_MODE_DISCARD);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	c = shmtrace_intern(t, "c");
	n = shmtrace_intern(t, "s");
	a[0] = shmtrace_arg_str(shmtrace_intern(t, "q\"uote\\"), shmtrace_intern(t, "a\"b\x01\n"));
	a[1] = shmtrace_arg_int(shmtrace_intern(t, "min"), INT64_MIN);
	a[2] = shmtrace_arg_str(shmtrace_intern(t, "bad\xff"), shmtrace_intern(t, "x\xc3(y"));
	a[3] = shmtrace_arg_int(shmtrace_intern(t, "max"), INT64_MAX);
	a[4] = shmtrace_arg_int(shmtrace_intern(t, "five"), 5);
	assert_int_equal(shmtrace_span_args(t, c, n, 1000, 2000, 0, a, SHMTRACE_MAX_ARGS), 0);
	/* one too many: refused, nothing recorded */
	assert_int_equal(shmtrace_span_args(t, c, shmtrace_intern(t, "no"), 1000, 2000, 0, a,
					    SHMTRACE_MAX_ARGS + 1), -EINVAL);
	a[4].type = 9;
	assert_int_equal(shmtrace_instant_args(t, c, shmtrace_intern(t, "no"), 0, &a[4], 1), -EINVAL);
	assert_int_equal(shmtrace_instant_args(t, c, shmtrace_intern(t, "i"), 42, &a[1], 1), 0);
	/* the open-span API: a fifth argument is not kept */
	shmtrace_begin(t, &sp, c, shmtrace_intern(t, "h"), 0);
	for (int i = 0; i < SHMTRACE_MAX_ARGS; i++)
		assert_int_equal(shmtrace_span_arg(&sp, shmtrace_arg_int(shmtrace_intern(t, "k"), i)), 0);
	assert_int_equal(shmtrace_span_arg(&sp, shmtrace_arg_int(c, 9)), -ENOSPC);
	assert_int_equal(shmtrace_end(&sp), 0);
	shmtrace_span(t, c, shmtrace_intern(t, "plain"), 3000, 4000, 0);
	shmtrace_close(t);

	json = export_ring_json(ring);
	assert_null(strstr(json, "\"name\":\"no\""));
	assert_true(find_event(json, "s", 0, &e));
	assert_true(ev_has(&e, "\"args\":{\"q\\\"uote\\\\\":\"a\\\"b\\u0001\\u000a\","
			   "\"min\":-9223372036854775808,\"bad\xef\xbf\xbd\":\"x\xef\xbf\xbd(y\","
			   "\"max\":9223372036854775807}"));
	assert_true(find_event(json, "h", 0, &e));
	assert_true(ev_has(&e, "\"args\":{\"k\":0,\"k\":1,\"k\":2,\"k\":3}"));
	assert_true(find_event(json, "plain", 0, &e));
	assert_false(ev_has(&e, "args"));
	/* the instant has a flow of one record: written with its args too */
	assert_non_null(strstr(json, "\"name\":\"i\",\"args\":{\"min\":-9223372036854775808}"));
	assert_non_null(strstr(json, "\"args\":9,\"args_lost\":0,"));
	free(json);
	shmtrace_ring_unlink(ring);
}

/*
 * Argument records whose event is gone: a twin span (same thread, start
 * and name) right before a span whose slot is torn must not get its
 * arguments; a group cut after its first argument keeps that one only.
 */
static void test_args_cut(void **state)
{
	const char *ring = test_ring_name("cut");
	struct shmtrace_arg a[3];
	struct shmt_view v;
	shmtrace_t *t;
	uint32_t c, n, m;
	uint64_t head;
	struct ev e;
	char *json;

	(void)state;
	make_ring(ring, 4096, SHMTRACE_MODE_DISCARD);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	c = shmtrace_intern(t, "c");
	n = shmtrace_intern(t, "twin");
	m = shmtrace_intern(t, "staged");
	a[0] = shmtrace_arg_int(shmtrace_intern(t, "a"), 1);
	a[1] = shmtrace_arg_int(shmtrace_intern(t, "b"), 2);
	a[2] = shmtrace_arg_str(shmtrace_intern(t, "c"), c);
	shmtrace_span(t, c, n, 1000, 2000, 0);
	shmtrace_span_args(t, c, n, 1000, 2000, 0, a, 2);
	assert_int_equal(shmtrace_flush(t), 0);
	shmtrace_span_args(t, c, m, 5000, 6000, 0, a, 3);

	ring_view_rw(ring, &v);
	head = shmt_ring_head(&v);
	assert_int_equal(head, 4);
	/* the second twin's slot torn: its arguments follow the first twin */
	store_release(&v.records[1].commit, 0);
	/* the staged group cut after its first argument */
	for (uint32_t i = 0; i < v.nblocks; i++) {
		struct shmt_block *b = shmt_block_at(&v, i);

		if (b->state == SHMT_BLOCK_OWNED && b->pid == (uint32_t)getpid())
			store_release(&b->written, b->written - 2);
	}
	json = export_ring_json(ring);
	assert_true(find_event(json, "twin", 0, &e));
	assert_false(ev_has(&e, "args"));
	assert_false(find_event(json, "twin", 1, &e));
	assert_true(find_event(json, "staged", 0, &e));
	assert_true(ev_has(&e, "\"args\":{\"a\":1}"));
	assert_non_null(strstr(json, "\"args\":1,\"args_lost\":2,"));
	assert_non_null(strstr(json, "\"torn\":1,"));
	free(json);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* A full ring in discard mode drops the end of a flush: a span may lose
 * its arguments (counted as dropped), never the other way round. */
static void test_args_ring_full(void **state)
{
	const char *ring = test_ring_name("full");
	struct shmtrace_arg a[2];
	shmtrace_t *t;
	uint32_t c, n;
	char *json;

	(void)state;
	make_ring(ring, 64, SHMTRACE_MODE_DISCARD);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	c = shmtrace_intern(t, "c");
	n = shmtrace_intern(t, "s");
	a[0] = shmtrace_arg_int(shmtrace_intern(t, "x"), 7);
	a[1] = shmtrace_arg_int(shmtrace_intern(t, "y"), 8);
	/* 21 groups of 3: 63 records, then one more group: 64 fit */
	for (int i = 0; i < 22; i++)
		shmtrace_span_args(t, c, n, 1000 + (uint64_t)i, 2000, 0, a, 2);
	shmtrace_flush(t);
	shmtrace_close(t);
	json = export_ring_json(ring);
	assert_int_equal(count(json, "\"name\":\"s\""), 22);
	assert_int_equal(count(json, "\"args\":{\"x\":7,\"y\":8}"), 21);
	assert_int_equal(count(json, "\"args\":{\"x\":7}"), 0);
	assert_non_null(strstr(json, "\"args_lost\":0,"));
	assert_non_null(strstr(json, "\"dropped\":2,"));
	free(json);
	shmtrace_ring_unlink(ring);
}

static int setup(void **state)
{
	const char *b = getenv("SHMTRACE_BIN");

	(void)state;
	snprintf(bin, sizeof(bin), "%s/shmtrace", b ? b : "build");
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/shmt-inflight-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	return access(bin, X_OK);
}

static int teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_killed_in_nested_scope),
		cmocka_unit_test(test_depth_bound),
		cmocka_unit_test(test_collector_records_open_spans),
		cmocka_unit_test(test_live_and_fork),
		cmocka_unit_test(test_args_hostile),
		cmocka_unit_test(test_args_cut),
		cmocka_unit_test(test_args_ring_full),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
