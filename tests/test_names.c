/* SPDX-License-Identifier: MIT */
/*
 * test_names.c - names that do not fit the ring are counted and reported
 * as what they are: records whose name or category string was never
 * interned (the string table was full), threads whose name slot did not
 * fit; in the ring, the capture, `shmtrace stat` and the export, with no
 * "records were lost" warning when no record was.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "cli_run.h"
#include "capture.h"
#include "crc32c.h"

/* Starts a collector that creates the ring (keeping it on exit), with the
 * extra options given and its stderr to tmp("col.err"), and waits on a
 * pipe until it drains. */
static pid_t start_collector(const char *ring, const char *out, const char *const *extra)
{
	char fdarg[16], ready[8] = "";
	int rfd[2];
	pid_t pid;

	assert_int_equal(pipe(rfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[32] = { collector_bin, "--ring", (char *)ring, "--output", (char *)out,
				   "--create", "--keep-ring", "--quiet", "--ready-fd", fdarg };
		int n = 10;

		int fe = open(tmp("col.err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fe, 2);
		close(rfd[0]);
		snprintf(fdarg, sizeof(fdarg), "%d", rfd[1]);
		for (; extra && *extra && n < 30; extra++)
			argv[n++] = (char *)*extra;
		argv[n] = NULL;
		execv(collector_bin, argv);
		_exit(127);
	}
	close(rfd[1]);
	/* the collector says when it drains; no sleeping */
	assert_int_equal(read(rfd[0], ready, sizeof(ready) - 1), 6);
	close(rfd[0]);
	return pid;
}

static void stop_collector(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Interns n distinct names, one span each, with the name as category too. */
static void spans_with_distinct_names(const char *ring, int n)
{
	shmtrace_t *t;
	uint64_t t0;

	assert_int_equal(shmtrace_open(ring, &t), 0);
	t0 = shmtrace_now();
	for (int i = 0; i < n; i++) {
		char name[32];
		uint32_t id;

		snprintf(name, sizeof(name), "name-%d", i);
		id = shmtrace_intern(t, name);
		/* a second call for a name that did not fit is not a second loss */
		assert_int_equal(shmtrace_intern(t, name), id);
		assert_int_equal(shmtrace_span(t, id, id, t0 + (uint64_t)i * 10,
					       t0 + (uint64_t)i * 10 + 5, 0), 0);
	}
	shmtrace_close(t);
}

/* Exports the capture, and the ring after it (what the capture does not
 * hold: a ring's blocks written out may be freed early for producers,
 * DESIGN.md), and runs stat on both; every output goes to
 * tmp(<what>.json|.err|.stat). */
static void export_and_stat(const char *ring, const char *cap)
{
	char *ecap[] = { bin, "export", (char *)cap, "-o", (char *)tmp("cap.json"), NULL };
	char *ering[] = { bin, "export", (char *)cap, "--ring", (char *)ring, "-o",
			  (char *)tmp("ring.json"), NULL };
	char *scap[] = { bin, "stat", "--json", (char *)cap, NULL };
	char *sring[] = { bin, "stat", "--json", (char *)ring, NULL };
	char *tcap[] = { bin, "stat", (char *)cap, NULL };

	assert_int_equal(run(NULL, tmp("cap.err"), ecap), 0);
	assert_int_equal(run(NULL, tmp("ring.err"), ering), 0);
	assert_int_equal(run(tmp("cap.stat"), NULL, scap), 0);
	assert_int_equal(run(tmp("ring.stat"), NULL, sring), 0);
	assert_int_equal(run(tmp("cap.txt"), NULL, tcap), 0);
}

/* After export_and_stat(): both exports warned with msg and not of lost
 * records, stat --json of the capture and of the ring says json, and stat
 * of the capture says text. */
static void expect_reported(const char *msg, const char *json, const char *text)
{
	for (int i = 0; i < 2; i++) {
		const char *err = tmp(i ? "ring.err" : "cap.err");

		expect_in(err, msg);
		expect_not_in(err, "records were lost");
	}
	expect_in(tmp("cap.stat"), json);
	expect_in(tmp("ring.stat"), json);
	expect_in(tmp("cap.txt"), text);
}

/* 6,000 distinct names into the default table of 4,096 strings: 1,904
 * events (spans) lost their names, and every output says so in those
 * words. */
static void test_string_table_full(void **state)
{
	const char *ring = test_ring_name("strfull");
	const char *cap = tmp("strfull.cap");
	const char *msg = "shmtrace: warning: 1,904 events lost their names: the ring's string "
			  "table (4,096) is full; create the ring with a larger --strings";
	pid_t cpid;

	(void)state;
	shmtrace_ring_unlink(ring);
	cpid = start_collector(ring, cap, NULL);
	spans_with_distinct_names(ring, 6000);
	stop_collector(cpid);
	export_and_stat(ring, cap);
	shmtrace_ring_unlink(ring);

	for (int i = 0; i < 2; i++) {
		char *s = slurp(tmp(i ? "ring.json" : "cap.json"));

		assert_int_equal(count(s, "\"name\":\"?\""), 1904);
		assert_non_null(strstr(s, "\"records\":6000,"));
		assert_non_null(strstr(s, "\"names_lost\":1904,"));
		assert_non_null(strstr(s, "\"strings_dropped\":1904,"));
		assert_non_null(strstr(s, "\"names_dropped\":0,"));
		free(s);
	}
	expect_reported(msg, "\"strings_dropped\":1904,", "strings_dropped:    1904\n");
	expect_in(tmp("cap.stat"), "\"names_dropped\":0,");
	expect_in(tmp("col.err"), "shmtrace-collector: warning: 1904 strings were not interned: "
		  "the ring's string table (4096 strings, 262144 bytes of text) is full");
}

/* A ring made with --strings large enough keeps every name. */
static void test_strings_option(void **state)
{
	const char *ring = test_ring_name("strbig");
	const char *cap = tmp("strbig.cap");
	const char *const extra[] = { "--strings", "8192", "--threads", "2048", NULL };
	pid_t cpid;
	char *s;

	(void)state;
	shmtrace_ring_unlink(ring);
	cpid = start_collector(ring, cap, extra);
	spans_with_distinct_names(ring, 6000);
	stop_collector(cpid);
	export_and_stat(ring, cap);
	shmtrace_ring_unlink(ring);

	expect_in(tmp("ring.stat"), "\"max_strings\":8192,");
	expect_in(tmp("ring.stat"), "\"max_threads\":2048,");
	s = slurp(tmp("cap.json"));
	assert_int_equal(count(s, "\"name\":\"?\""), 0);
	assert_non_null(strstr(s, "\"name\":\"name-5999\""));
	assert_non_null(strstr(s, "\"names_lost\":0,"));
	assert_non_null(strstr(s, "\"strings_dropped\":0,"));
	free(s);
	expect_not_in(tmp("cap.err"), "warning");

	/* out of range: a usage error */
	{
		char *a[] = { collector_bin, "--ring", (char *)ring, "-o", (char *)cap, "--create",
			      "--strings", "70000", NULL };
		char *b[] = { collector_bin, "--ring", (char *)ring, "-o", (char *)cap, "--threads", "8",
			      NULL };

		assert_int_equal(run(NULL, tmp("usage.err"), a), 2);
		expect_in(tmp("usage.err"), "--strings '70000'");
		assert_int_equal(run(NULL, tmp("usage.err"), b), 2);
		expect_in(tmp("usage.err"), "need --create");
	}
}

struct tw {
	shmtrace_t *t;
	uint32_t name;
};

static void *short_lived(void *arg)
{
	struct tw *w = arg;
	uint64_t t0 = shmtrace_now();

	for (int i = 0; i < 20; i++)
		shmtrace_span(w->t, w->name, w->name, t0 + (uint64_t)i * 10,
			      t0 + (uint64_t)i * 10 + 5, 0);
	return NULL;
}

/* 1,500 short-lived threads and 1,024 name slots: every record exported,
 * 476 threads without a name, reported as that and not as lost records. */
static void test_thread_names_full(void **state)
{
	const char *ring = test_ring_name("thrfull");
	const char *cap = tmp("thrfull.cap");
	const char *const extra[] = { "--capacity", "65536", NULL };
	const char *msg = "shmtrace: warning: 476 threads lost their names: the ring's "
			  "thread-name table (1,024) is full; create the ring with a larger --threads";
	struct tw w;
	pid_t cpid;

	(void)state;
	shmtrace_ring_unlink(ring);
	cpid = start_collector(ring, cap, extra);
	assert_int_equal(shmtrace_open(ring, &w.t), 0);
	w.name = shmtrace_intern(w.t, "work");
	for (int i = 0; i < 1500; i++) {
		pthread_t th;

		assert_int_equal(pthread_create(&th, NULL, short_lived, &w), 0);
		assert_int_equal(pthread_join(th, NULL), 0);
	}
	shmtrace_close(w.t);
	stop_collector(cpid);
	export_and_stat(ring, cap);
	shmtrace_ring_unlink(ring);

	for (int i = 0; i < 2; i++) {
		const char *json = tmp(i ? "ring.json" : "cap.json");
		const char *err = tmp(i ? "ring.err" : "cap.err");
		char *s = slurp(json);

		assert_non_null(strstr(s, "\"records\":30000,"));
		assert_non_null(strstr(s, "\"dropped\":0,"));
		assert_non_null(strstr(s, "\"names_dropped\":476,"));
		assert_non_null(strstr(s, "\"threads_unnamed\":476,"));
		assert_non_null(strstr(s, "\"names_lost\":0,"));
		free(s);
		expect_not_in(err, "spans lost");
	}
	expect_reported(msg, "\"names_dropped\":476,", "names_dropped:      476\n");
	expect_in(tmp("col.err"), "shmtrace-collector: warning: 476 thread names were not "
		  "recorded: the ring's thread-name table (1024) is full");
}

/* A thread that names itself again with the name it has takes no new slot
 * of the ring's name table: 2,000 renamings to one name in a table of
 * 1,024 all succeed and take one slot, a new name the next; a fork's child
 * is named anew under its own pid, and a name first said where no ring is
 * yet is new to the ring. It took a slot each, and the 1,025th failed with
 * ENOSPC. */
static void test_the_same_thread_name_again_takes_no_slot(void **state)
{
	const char *ring = test_ring_name("samename");
	struct shmt_view v;
	char err[256];
	shmtrace_t *t, *none;
	int st;
	pid_t pid;

	(void)state;
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (int i = 0; i < 2000; i++)
		assert_int_equal(shmtrace_set_thread_name(t, "worker"), 0);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	assert_int_equal(shmt_ring_nthreads(&v), 1);
	assert_int_equal(shmtrace_set_thread_name(t, "renamed"), 0);
	assert_int_equal(shmt_ring_nthreads(&v), 2);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(shmtrace_set_thread_name(t, "renamed") == 0 && shmt_ring_nthreads(&v) == 3 ? 0 : 1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* a new name said where no ring is yet is new to this ring too */
	assert_int_equal(shmtrace_open_wait(test_ring_name("samename-none"), &none), 0);
	assert_int_equal(shmtrace_set_thread_name(none, "elsewhere"), -ENOENT);
	assert_int_equal(shmtrace_set_thread_name(t, "elsewhere"), 0);
	assert_int_equal(shmt_ring_nthreads(&v), 4);
	shmtrace_close(none);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* The LOSS frame carries the name counts and the table sizes; a frame of
 * six fields (captures written before them) still decodes, as zeros. */
static void test_loss_frame(void **state)
{
	struct shmt_cap_loss l = {
		.at_ns = 1, .dropped = 2, .overwritten = 3, .lock_timeouts = 4, .torn = 5,
		.names_dropped = 6, .strings_dropped = 7, .max_strings = 4096,
		.string_bytes = 262144, .max_threads = 1024,
	};
	msgpack_sbuffer b;
	msgpack_zone z;
	struct shmt_cap_frame f;
	char err[256];

	(void)state;
	msgpack_sbuffer_init(&b);
	msgpack_zone_init(&z, 4096);
	assert_int_equal(shmt_cap_put_loss(&b, &l), 0);
	assert_int_equal(shmt_cap_decode((const uint8_t *)b.data, b.size, &f, &z, err, sizeof(err)),
			 (long)b.size);
	assert_int_equal(f.type, SHMT_CAP_LOSS);
	assert_memory_equal(&f.loss, &l, sizeof(l));

	/* [5, 1, 2, 3, 4, 5, 6, crc]: CRC-32C of the bytes before 0xce */
	{
		uint8_t old[] = { 0x98, 5, 1, 2, 3, 4, 5, 6, 0xce, 0, 0, 0, 0 };
		uint32_t crc = shmt_crc32c(0, old, 8);

		old[9] = (uint8_t)(crc >> 24);
		old[10] = (uint8_t)(crc >> 16);
		old[11] = (uint8_t)(crc >> 8);
		old[12] = (uint8_t)crc;
		memset(&f, 0xff, sizeof(f));
		assert_int_equal(shmt_cap_decode(old, sizeof(old), &f, &z, err, sizeof(err)),
				 (long)sizeof(old));
		assert_int_equal(f.loss.names_dropped, 6);
		assert_int_equal(f.loss.strings_dropped, 0);
		assert_int_equal(f.loss.max_strings, 0);
		assert_int_equal(f.loss.string_bytes, 0);
		assert_int_equal(f.loss.max_threads, 0);
	}
	msgpack_zone_destroy(&z);
	msgpack_sbuffer_destroy(&b);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("names", true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_string_table_full),
		cmocka_unit_test(test_strings_option),
		cmocka_unit_test(test_thread_names_full),
		cmocka_unit_test(test_the_same_thread_name_again_takes_no_slot),
		cmocka_unit_test(test_loss_frame),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
