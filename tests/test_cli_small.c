/* SPDX-License-Identifier: MIT */
/*
 * test_cli_small.c - what a new user meets in the first hour: a ring made
 * with `shmtrace create` (no collector) that stat shows, producers write
 * into, a collector with the same options adopts and rm removes, and a
 * name that is taken refused saying how to free it (or, taken by a file
 * that is no ring, to choose another).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cli_run.h"

/* `shmtrace create` with the options given (NULL-ended), which must exit
 * with rc. */
static void create(int rc, const char *ring, ...)
{
	char *argv[16] = { bin, "create", (char *)ring };
	int n = 3;
	va_list ap;

	va_start(ap, ring);
	for (const char *a; n < 15 && (a = va_arg(ap, const char *));)
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	if (run(NULL, tmp("create.err"), argv) != rc) {
		char *e = slurp(tmp("create.err"));

		fprintf(stderr, "shmtrace create %s: not exit %d; said: %s\n", ring, rc, e);
		free(e);
		fail();
	}
}

/* `shmtrace stat ring` into tmp("stat.out"). */
static void stat_ring(const char *ring)
{
	char *argv[] = { bin, "stat", (char *)ring, NULL };

	assert_int_equal(run(tmp("stat.out"), tmp("stat.err"), argv), 0);
}

/*
 * create makes the ring with the options asked (stat shows them), a
 * producer attaches and writes, a second create of the name fails (exit
 * 1) naming `shmtrace rm`, and rm removes it.
 */
static void test_create_stat_write_rm(void **state)
{
	const char *ring = test_ring_name("create");
	char path[256], *rm[] = { bin, "rm", (char *)ring, NULL };
	struct stat st;
	pid_t pid;
	int wst;

	(void)state;
	shmtrace_ring_unlink(ring);
	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	create(0, ring, "--capacity", "1024", "--mode", "overwrite", "--strings", "16",
	       "--threads", "64", "--group", NULL);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0660);
	stat_ring(ring);
	expect_in(tmp("stat.out"), "capacity:           1024\n");
	expect_in(tmp("stat.out"), "mode:               overwrite\n");
	expect_in(tmp("stat.out"), "max_strings:        16\n");
	expect_in(tmp("stat.out"), "max_threads:        64\n");
	expect_in(tmp("stat.out"), "published:          0\n");

	/* a producer attaches and writes (in a child: rm refuses a ring whose
	 * producers live) */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		uint64_t t0;
		shmtrace_t *t;

		if (shmtrace_open(ring, &t) < 0)
			_exit(1);
		t0 = shmtrace_now();
		if (shmtrace_span(t, shmtrace_intern(t, "c"), shmtrace_intern(t, "n"), t0, t0 + 10, 0))
			_exit(1);
		shmtrace_close(t);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &wst, 0), pid);
	assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
	stat_ring(ring);
	expect_in(tmp("stat.out"), "published:          1\n");

	/* taken: refused, the ring untouched */
	create(1, ring, NULL);
	expect_in(tmp("create.err"), "shmtrace create: ring '");
	expect_in(tmp("create.err"), "already exists");
	expect_in(tmp("create.err"), "shmtrace rm ");
	stat_ring(ring);
	expect_in(tmp("stat.out"), "published:          1\n");

	if (run(NULL, tmp("rm.err"), rm) != 0) {
		char *e = slurp(tmp("rm.err"));

		fprintf(stderr, "rm: %s\n", e);
		free(e);
		fail();
	}
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(errno, ENOENT);
}

/* The defaults are the collector's: a ring made by create with none is a
 * ring shmtrace-collector --create without options adopts as its own. */
static void test_create_defaults_as_collector(void **state)
{
	const char *ring = test_ring_name("create-dflt");
	char cap[600], *argv[] = { collector_bin, "--ring", (char *)ring, "--output", cap,
				   "--create", "--keep-ring", "--quiet", NULL };
	int st, fe;
	pid_t pid;

	(void)state;
	if (access(collector_bin, X_OK) < 0)
		skip();
	snprintf(cap, sizeof(cap), "%s", tmp("c.cap"));	/* tmp()'s buffers are reused */
	shmtrace_ring_unlink(ring);
	create(0, ring, NULL);
	stat_ring(ring);
	expect_in(tmp("stat.out"), "capacity:           262144\n");
	expect_in(tmp("stat.out"), "mode:               discard\n");
	expect_in(tmp("stat.out"), "max_strings:        4096\n");
	expect_in(tmp("stat.out"), "max_threads:        1024\n");
	fe = open(tmp("c.err"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fe >= 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fe, 2);
		alarm(30);
		execv(collector_bin, argv);
		_exit(127);
	}
	close(fe);
	/* it says so before it drains; then stop it */
	for (int i = 0; i < 3000; i++) {
		char *e = slurp(tmp("c.err"));
		bool said = strstr(e, "adopted ring") != NULL;

		free(e);
		if (said)
			break;
		usleep(10000);
	}
	kill(pid, SIGTERM);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		char *e = slurp(tmp("c.err"));

		fprintf(stderr, "collector: status 0x%x, said: %s\n", st, e);
		free(e);
	}
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	expect_in(tmp("c.err"), "adopted ring");
	expect_not_in(tmp("c.err"), "replaced");
	shmtrace_ring_unlink(ring);
}

/* Usage errors: exit 2, one line saying what, and where help is. */
static void test_create_usage(void **state)
{
	const char *ring = test_ring_name("create-usage");
	char path[256];
	int fd;

	(void)state;
	shmtrace_ring_unlink(ring);
	create(2, ring, "--capacity", "1000", NULL);
	expect_in(tmp("create.err"), "--capacity '1000': need a power of two");
	create(2, ring, "--mode", "ring", NULL);
	expect_in(tmp("create.err"), "--mode 'ring': need discard or overwrite");
	create(2, ring, "--strings", "70000", NULL);
	create(2, ring, "--bogus", NULL);
	expect_in(tmp("create.err"), "Try 'shmtrace create --help'.");
	create(2, "a/b", NULL);
	expect_in(tmp("create.err"), "invalid ring name 'a/b'");
	create(2, ring, "other", NULL);
	expect_in(tmp("create.err"), "one ring at a time");
	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	assert_int_equal(access(path, F_OK), -1);
	create(0, "--help", NULL);
	/* a file there that is no ring: shmtrace rm would refuse it too */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "junk", 4), 4);
	close(fd);
	create(1, ring, NULL);
	expect_in(tmp("create.err"), "exists and is not a shmtrace ring");
	expect_not_in(tmp("create.err"), "shmtrace rm");
	assert_int_equal(unlink(path), 0);
}

/*
 * An empty name or category is a name: span("") exports as "", is not one
 * of the names lost ("?", names_lost) and costs no strings_dropped; a
 * string that did not fit the table is still "?" and counted.
 */
static void test_empty_name(void **state)
{
	const char *ring = test_ring_name("empty-name");
	char *stat_argv[] = { bin, "stat", (char *)ring, NULL };
	char *otlp[] = { bin, "export", "--ring", (char *)ring, "--format", "otlp", "-o",
			 (char *)tmp("e.jsonl"), NULL };
	char json[600];
	struct shmtrace_ring_config c;
	uint32_t empty, cat, name;
	shmtrace_t *t, *t2;
	uint64_t t0;
	char *s;

	(void)state;
	shmtrace_ring_unlink(ring);
	small_cfg(&c, 1024, 0);
	c.max_strings = 3;
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	empty = shmtrace_intern(t, "");
	cat = shmtrace_intern(t, "cat");
	name = shmtrace_intern(t, "name");
	assert_int_equal(shmtrace_intern(t, ""), empty);
	/* every process of the ring has the same id for it */
	assert_int_equal(shmtrace_open(ring, &t2), 0);
	assert_int_equal(shmtrace_intern(t2, ""), empty);
	shmtrace_close(t2);
	t0 = shmtrace_now();
	assert_int_equal(shmtrace_span(t, cat, empty, t0, t0 + 1000, 0), 0);
	assert_int_equal(shmtrace_span(t, empty, name, t0 + 2000, t0 + 3000, 0), 0);
	assert_int_equal(shmtrace_instant(t, empty, empty, 0), 0);
	shmtrace_close(t);
	snprintf(json, sizeof(json), "%s", tmp("e.json"));
	assert_int_equal(export_ring(ring, json, tmp("e.err")), 0);
	s = slurp(json);
	assert_int_equal(count(s, "\"name\":\"?\""), 0);
	assert_int_equal(count(s, "\"cat\":\"?\""), 0);
	assert_int_equal(count(s, "\"cat\":\"cat\",\"name\":\"\"}"), 1);
	assert_int_equal(count(s, "\"cat\":\"\",\"name\":\"name\"}"), 1);
	assert_int_equal(count(s, "\"cat\":\"\",\"name\":\"\"}"), 1);
	assert_non_null(strstr(s, "\"strings_dropped\":0,"));
	assert_non_null(strstr(s, "\"names_lost\":0,"));
	free(s);
	expect_not_in(tmp("e.err"), "lost their names");
	expect_not_in(tmp("e.err"), "lost its name");
	assert_int_equal(run(tmp("stat.out"), NULL, stat_argv), 0);
	expect_in(tmp("stat.out"), "strings_dropped:    0\n");
	assert_int_equal(run(NULL, tmp("o.err"), otlp), 0);
	s = slurp(tmp("e.jsonl"));
	assert_int_equal(count(s, "\"name\":\"\","), 2);
	assert_null(strstr(s, "\"name\":\"?\""));
	assert_null(strstr(s, "shmtrace.names_lost"));
	free(s);

	/* the table (3 strings) is full: a fourth is lost, and said */
	assert_int_equal(shmtrace_open(ring, &t), 0);
	assert_int_equal(shmtrace_intern(t, "one too many"), 0);
	assert_int_equal(shmtrace_intern(t, ""), empty);
	assert_int_equal(shmtrace_span(t, cat, 0, t0 + 4000, t0 + 5000, 0), 0);
	shmtrace_close(t);
	assert_int_equal(export_ring(ring, json, tmp("e.err")), 0);
	s = slurp(json);
	assert_int_equal(count(s, "\"name\":\"?\""), 1);
	assert_non_null(strstr(s, "\"strings_dropped\":1,"));
	assert_non_null(strstr(s, "\"names_lost\":1,"));
	free(s);
	shmtrace_ring_unlink(ring);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_stat_write_rm),
		cmocka_unit_test(test_create_defaults_as_collector),
		cmocka_unit_test(test_create_usage),
		cmocka_unit_test(test_empty_name),
	};

	return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
