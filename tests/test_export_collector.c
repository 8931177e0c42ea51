/* SPDX-License-Identifier: MIT */
/*
 * test_export_collector.c - a ring drained by shmtrace-collector into a
 * capture, exported with `shmtrace export` and checked by the DevTools engine.
 */
#include "cli_run.h"

/* ------------------------------------------------- through the collector */

static void test_capture_from_collector(void **state)
{
	const char *ring = test_ring_name("expcol");
	int st;
	pid_t cpid, kid;
	shmtrace_t *t;
	char *json;

	(void)state;
	cpid = cli_collector_create(ring, tmp("col.cap"));
	assert_int_equal(shmtrace_open(ring, &t), 0);
	kid = fork();
	if (kid == 0) {
		uint32_t n = shmtrace_intern(t, "child");
		uint64_t t0 = shmtrace_now();

		for (int i = 0; i < 200; i++)
			shmtrace_span(t, n, n, t0 + (uint64_t)i * 10, t0 + (uint64_t)i * 10 + 5,
				      i == 100 ? 77 : 0);
		shmtrace_close(t);
		_exit(0);
	}
	waitpid(kid, &st, 0);
	{
		uint32_t n = shmtrace_intern(t, "parent");
		uint64_t t1 = shmtrace_now();

		shmtrace_span(t, n, n, t1, t1 + 5, 77);
	}
	shmtrace_close(t);
	kill(cpid, SIGTERM);
	waitpid(cpid, &st, 0);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	{
		char *argv[] = { bin, "export", (char *)tmp("col.cap"), "-o", (char *)tmp("col.json"), NULL };
		char *sargv[] = { bin, "stat", (char *)tmp("col.cap"), NULL };
		char *margv[] = { bin, "summary", (char *)tmp("col.cap"), "--json", NULL };

		assert_int_equal(run(NULL, tmp("col.err"), argv), 0);
		assert_int_equal(run(tmp("stat.out"), NULL, sargv), 0);
		json = slurp(tmp("stat.out"));
		assert_non_null(strstr(json, "clean"));
		free(json);
		assert_int_equal(run(tmp("sum.out"), NULL, margv), 0);
		json = slurp(tmp("sum.out"));
		assert_non_null(strstr(json, "\"name\":\"child\",\"count\":200,\"total_ns\":1000,"));
		free(json);
	}
	json = slurp(tmp("col.json"));
	assert_int_equal(count(json, "\"name\":\"child\""), 200);
	assert_int_equal(count(json, "\"name\":\"parent\""), 1);
	assert_int_equal(count(json, "\"ph\":\"s\""), 1);
	assert_int_equal(count(json, "\"ph\":\"f\""), 1);
	assert_non_null(strstr(json, "\"complete\":true"));
	{
		char want[400];

		/* the collector carried the ring's random identity over */
		snprintf(want, sizeof(want), "\"rings\":[{\"name\":\"%s\",\"ring_id\":\"", ring);
		assert_non_null(strstr(json, want));
	}
	free(json);
	if (have_devtools()) {
		char chain[64];
		const char *expect[] = { "--expect-flows", "1", "--expect-flow-pids", chain, NULL };

		snprintf(chain, sizeof(chain), "%d,%d", kid, getpid());
		int rc = check_trace(tmp("col.json"), expect);

		if (rc) {
			print_file(tmp("check.err"));
			print_file(tmp("check.out"));
		}
		assert_int_equal(rc, 0);
	}
	shmtrace_ring_unlink(ring);
}


int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capture_from_collector),
	};

	return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
