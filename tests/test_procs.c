/* SPDX-License-Identifier: MIT */
/*
 * test_procs.c - telling processes apart: a pid reused by a second
 * process becomes two processes with distinct output pids and names, its
 * records split at the second one's start; a pid used once keeps its
 * real pid and name.
 */
#include <time.h>

#include "helpers.h"
#include "procs.h"

static uint64_t ns_of(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct shmt_thread slot(uint32_t pid, uint32_t tid, uint64_t start, const char *tname,
			       const char *pname)
{
	struct shmt_thread t = { .pid = pid, .tid = tid, .start_time = start };

	snprintf(t.name, sizeof(t.name), "%s", tname);
	snprintf(t.pname, sizeof(t.pname), "%s", pname);
	return t;
}

static void test_pid_reuse_split(void **state)
{
	long tck = sysconf(_SC_CLK_TCK);
	uint64_t st1 = 100 * (uint64_t)tck, st2 = 1000 * (uint64_t)tck;
	/* the ring clock is CLOCK_MONOTONIC; start times count from boot */
	uint64_t off = ns_of(CLOCK_BOOTTIME) - ns_of(CLOCK_MONOTONIC);
	uint64_t start2 = 1000000000000ull - off;
	/* the second instance listed first: the order of slots must not matter */
	struct shmt_thread s[] = {
		slot(42, 42, st2, "new-main", "svc"),
		slot(42, 42, st1, "old-main", "svc"),
		slot(42, 43, st1, "old-io", "svc"),
	};
	const uint32_t p1 = 42, p2 = 42 + PROCS_PID_STRIDE;
	struct procs ps;
	char buf[128];

	(void)state;
	assert_int_equal(procs_build(&ps, s, 3), 0);
	assert_int_equal(ps.n, 2);
	/* a regression of the boot-offset wrap would zero every start_ns */
	assert_true(ps.p[0].start_ns != 0);
	/* records without a start time: split at the second one's start,
	 * well outside the 10 ms of slack either side */
	assert_int_equal(procs_outpid(&ps, 42, 0, start2 - 100000000ull), p1);
	assert_int_equal(procs_outpid(&ps, 42, 0, start2 + 100000000ull), p2);
	assert_int_equal(procs_outpid(&ps, 42, 0, 1), p1);
	/* records with a start time (staging blocks) go by it, whatever their ts */
	assert_int_equal(procs_outpid(&ps, 42, st1, start2 + 100000000ull), p1);
	assert_int_equal(procs_outpid(&ps, 42, st2, 1), p2);
	assert_true(p1 != p2);

	procs_name(&ps, p1, buf, sizeof(buf));
	assert_string_equal(buf, "svc (pid 42, #1)");
	procs_name(&ps, p2, buf, sizeof(buf));
	assert_string_equal(buf, "svc (pid 42, #2)");
	assert_non_null(procs_find(&ps, p2));
	assert_int_equal(procs_find(&ps, p2)->pid, 42);
	assert_int_equal(procs_find(&ps, p2)->k, 2);
	assert_int_equal(procs_find(&ps, p1)->nk, 2);
	assert_null(procs_find(&ps, 42 + 2 * PROCS_PID_STRIDE));
	/* each instance's threads keep their own names */
	assert_string_equal(procs_thread_name(&ps, p1, 42), "old-main");
	assert_string_equal(procs_thread_name(&ps, p2, 42), "new-main");
	assert_string_equal(procs_thread_name(&ps, p1, 43), "old-io");
	assert_null(procs_thread_name(&ps, p2, 43));
	procs_free(&ps);
}

/*
 * 1100 processes of one pid (forged slots): instance 1024's synthetic pid
 * wrapped to the pid of instance 0. The first 1024 keep pids of their
 * own, the later ones are shown as #1024 (and counted); each record
 * still goes to the latest instance started by its time, found by a
 * binary search, and a time near 2^64 does not wrap back to the first.
 */
static void test_many_instances(void **state)
{
	long tck = sysconf(_SC_CLK_TCK);
	uint64_t off = ns_of(CLOCK_BOOTTIME) - ns_of(CLOCK_MONOTONIC);
	const uint32_t n = 1100, last = 42 + 1023 * PROCS_PID_STRIDE;
	struct shmt_thread *s = calloc(n, sizeof(*s));
	struct procs ps;
	char buf[128];

	(void)state;
	assert_non_null(s);
	/* instance k started at 100 + k seconds after boot */
	for (uint32_t k = 0; k < n; k++)
		s[k] = slot(42, 42, (100 + (uint64_t)k) * (uint64_t)tck, "t", "svc");
	assert_int_equal(procs_build(&ps, s, n), 0);
	assert_int_equal(ps.capped, n - 1024);
	for (uint32_t k = 0; k < n; k++) {
		uint64_t at = (100 + (uint64_t)k) * 1000000000ull - off + 500000000ull;
		uint32_t want = k < 1024 ? 42 + k * PROCS_PID_STRIDE : last;

		assert_int_equal(procs_outpid(&ps, 42, 0, at), want);
	}
	assert_int_equal(procs_outpid(&ps, 42, 0, 1), 42);
	assert_int_equal(procs_outpid(&ps, 42, 0, UINT64_MAX - 1), last);
	assert_int_equal(procs_find(&ps, last)->k, 1024);
	procs_name(&ps, last, buf, sizeof(buf));
	assert_string_equal(buf, "svc (pid 42, #1024)");
	procs_free(&ps);
	free(s);
}

static void test_single_instance(void **state)
{
	struct shmt_thread s[] = {
		slot(7, 7, 500, "main", "early-name"),
		slot(7, 8, 500, "worker", ""),
		/* a later slot renames the process and the thread */
		slot(7, 7, 500, "main2", "solo"),
		slot(11, 11, 600, "t", ""),
	};
	struct procs ps;
	char buf[128];

	(void)state;
	assert_int_equal(procs_build(&ps, s, 4), 0);
	/* its real pid, whatever the record's time or start time */
	assert_int_equal(procs_outpid(&ps, 7, 0, 1), 7);
	assert_int_equal(procs_outpid(&ps, 7, 500, UINT64_MAX / 2), 7);
	assert_int_equal(procs_outpid(&ps, 7, 999, 5), 7);
	procs_name(&ps, 7, buf, sizeof(buf));
	assert_string_equal(buf, "solo");
	assert_string_equal(procs_thread_name(&ps, 7, 7), "main2");
	assert_string_equal(procs_thread_name(&ps, 7, 8), "worker");
	/* no process name: "pid N" */
	procs_name(&ps, 11, buf, sizeof(buf));
	assert_string_equal(buf, "pid 11");
	/* a pid no slot names passes through */
	assert_int_equal(procs_outpid(&ps, 9, 0, 1), 9);
	assert_null(procs_find(&ps, 9));
	procs_name(&ps, 9, buf, sizeof(buf));
	assert_string_equal(buf, "pid 9");
	assert_null(procs_thread_name(&ps, 9, 9));
	procs_free(&ps);

	/* no slots at all */
	assert_int_equal(procs_build(&ps, NULL, 0), 0);
	assert_int_equal(procs_outpid(&ps, 5, 0, 1), 5);
	procs_free(&ps);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pid_reuse_split),
		cmocka_unit_test(test_single_instance),
		cmocka_unit_test(test_many_instances),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
