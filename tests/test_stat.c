/* SPDX-License-Identifier: MIT */
/*
 * test_stat.c - `shmtrace stat`: a ring's loss counters and producers,
 * as JSON and text, and a capture's clean or cut end.
 */
#include "cli_run.h"

/* ---------------------------------------------------------------- stat */

/* The JSON object of producer pid in stat's output, up to its closing brace. */
static void expect_producer(const char *json, pid_t pid, const char *name, bool alive)
{
	char key[96];
	const char *p, *e;

	snprintf(key, sizeof(key), "{\"pid\":%d,\"name\":\"%s\",\"start_time\":", (int)pid, name);
	p = strstr(json, key);
	if (!p)
		fprintf(stderr, "no %s in %s\n", key, json);
	assert_non_null(p);
	e = strchr(p, '}');
	assert_non_null(e);
	assert_true((size_t)(e - p) > strlen(key));
	assert_int_equal(strncmp(e - (alive ? 12 : 13), alive ? "\"alive\":true" : "\"alive\":false",
				 alive ? 12 : 13),
			 0);
}

/* A ring filled past capacity in discard mode by a producer that exited
 * and one that lives on: the counters and who is alive, as JSON and text. */
static void test_stat_ring(void **state)
{
	const char *ring = test_ring_name("expstat");
	struct shmtrace_ring_config cfg = { .capacity = 1024, .mode = SHMTRACE_MODE_DISCARD };
	char *argv[] = { bin, "stat", "--json", (char *)ring, NULL };
	char *targv[] = { bin, "stat", (char *)ring, NULL };
	char want[64];
	shmtrace_t *t;
	pid_t kid;
	char *out;
	int st;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &cfg), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		uint32_t n = shmtrace_intern(t, "dead");

		shmtrace_set_process_name(t, "stat-dead");
		for (int i = 0; i < 10; i++)
			shmtrace_span(t, n, n, 100, 200, 0);
		shmtrace_close(t);
		_exit(0);
	}
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	shmtrace_set_process_name(t, "stat-live");
	{
		uint32_t n = shmtrace_intern(t, "live");

		/* no collector: the ring fills at 1024 and the rest is dropped */
		for (int i = 0; i < 2000; i++)
			shmtrace_span(t, n, n, 300, 400, 0);
	}
	/* the ring is full: the flush drops its records and says so */
	assert_int_equal(shmtrace_flush(t), -ENOSPC);

	assert_int_equal(run(tmp("stat.json"), tmp("stat.err"), argv), 0);
	out = slurp(tmp("stat.json"));
	assert_non_null(strstr(out, "\"capacity\":1024,"));
	assert_non_null(strstr(out, "\"mode\":\"discard\""));
	/* published is the head: everything that fitted */
	assert_non_null(strstr(out, "\"published\":1024,"));
	assert_non_null(strstr(out, "\"consumed\":0,"));
	assert_non_null(strstr(out, "\"fill\":1024,"));
	assert_non_null(strstr(out, "\"dropped\":986,"));
	assert_non_null(strstr(out, "\"overwritten\":0,"));
	assert_non_null(strstr(out, "\"collector_pid\":0,"));
	snprintf(want, sizeof(want), "\"ring\":\"%s\"", ring);
	assert_non_null(strstr(out, want));
	expect_producer(out, kid, "stat-dead", false);
	expect_producer(out, getpid(), "stat-live", true);
	/* one object, one line */
	assert_int_equal(out[0], '{');
	assert_int_equal(count(out, "\n"), 1);
	assert_string_equal(out + strlen(out) - 3, "]}\n");
	free(out);

	assert_int_equal(run(tmp("stat.txt"), NULL, targv), 0);
	out = slurp(tmp("stat.txt"));
	assert_non_null(strstr(out, "\ncapacity:           1024\n"));
	assert_non_null(strstr(out, "\ndropped:            986\n"));
	snprintf(want, sizeof(want), "  %8d  stat-dead  dead\n", (int)kid);
	assert_non_null(strstr(out, want));
	snprintf(want, sizeof(want), "  %8d  stat-live  alive\n", (int)getpid());
	assert_non_null(strstr(out, want));
	free(out);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* Runs stat RING, --json or as text, its output to tmp("stat.out"). */
static void stat_of(const char *ring, bool json)
{
	char *jargv[] = { bin, "stat", "--json", (char *)ring, NULL };
	char *targv[] = { bin, "stat", (char *)ring, NULL };

	assert_int_equal(run(tmp("stat.out"), NULL, json ? jargv : targv), 0);
}

/* The collector draining the ring is named by its pid; once SIGKILLed
 * (its pid left in the header, its lock gone), it is said not to run. */
static void test_stat_collector(void **state)
{
	const char *ring = test_ring_name("statcol");
	struct shmtrace_ring_config cfg = { .capacity = 4096 };
	char want[160];
	pid_t col;
	int st;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &cfg), 0);
	col = cli_collector(ring, tmp("statcol.cap"));
	stat_of(ring, true);
	snprintf(want, sizeof(want), "\"collector\":true,\"collector_pid\":%d,"
		 "\"collector_pid_recorded\":%d,", (int)col, (int)col);
	expect_in(tmp("stat.out"), want);
	stat_of(ring, false);
	snprintf(want, sizeof(want), "\ncollector:          %d\n", (int)col);
	expect_in(tmp("stat.out"), want);

	kill(col, SIGKILL);
	assert_int_equal(waitpid(col, &st, 0), col);
	assert_true(WIFSIGNALED(st));
	stat_of(ring, true);
	snprintf(want, sizeof(want), "\"collector\":false,\"collector_pid\":0,"
		 "\"collector_pid_recorded\":%d,", (int)col);
	expect_in(tmp("stat.out"), want);
	stat_of(ring, false);
	snprintf(want, sizeof(want), "\ncollector:          none (pid %d recorded, not running)\n",
		 (int)col);
	expect_in(tmp("stat.out"), want);
	shmtrace_ring_unlink(ring);
}

/* A capture that ended with its END frame is clean; one without is cut,
 * which stat reports (exit 0: the file is still readable). */
static void test_stat_capture_clean_cut(void **state)
{
	msgpack_sbuffer b;
	char clean[512], cut[512];
	char *sargv[] = { bin, "stat", clean, NULL };
	char *jargv[] = { bin, "stat", "--json", cut, NULL };
	char *cargv[] = { bin, "stat", cut, NULL };
	char *out;

	(void)state;
	/* copies: tmp() reuses its buffers */
	snprintf(clean, sizeof(clean), "%s", tmp("clean.cap"));
	snprintf(cut, sizeof(cut), "%s", tmp("cut.cap"));
	make_part(&b, 0, 0, 10, true, NULL);
	put_file(clean, b.data, b.size);
	msgpack_sbuffer_destroy(&b);
	make_part(&b, 0, 0, 10, false, NULL);
	put_file(cut, b.data, b.size);
	msgpack_sbuffer_destroy(&b);

	assert_int_equal(run(tmp("clean.out"), NULL, sargv), 0);
	out = slurp(tmp("clean.out"));
	assert_non_null(strstr(out, "\nend:                clean\n"));
	assert_non_null(strstr(out, "\nrecords:            10\n"));
	assert_non_null(strstr(out, "\ndropped:            3\n"));
	assert_null(strstr(out, "end_detail"));
	free(out);

	assert_int_equal(run(tmp("cut.out"), NULL, cargv), 0);
	out = slurp(tmp("cut.out"));
	assert_non_null(strstr(out, "\nend:                cut\n"));
	assert_non_null(strstr(out, "\nend_detail:"));
	free(out);

	assert_int_equal(run(tmp("cut.json"), NULL, jargv), 0);
	out = slurp(tmp("cut.json"));
	assert_non_null(strstr(out, "\"end\":\"cut\""));
	assert_non_null(strstr(out, "\"records\":10,"));
	assert_non_null(strstr(out, "\"end_frames\":0,"));
	free(out);
}

/* The group setup: shmtrace and shmtrace-collector. */
static int stat_setup(void **state)
{
	(void)state;
	return cli_setup_for("stat", true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stat_ring),
		cmocka_unit_test(test_stat_collector),
		cmocka_unit_test(test_stat_capture_clean_cut),
	};

	return cmocka_run_group_tests(tests, stat_setup, cli_teardown);
}
