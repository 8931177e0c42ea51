/* SPDX-License-Identifier: MIT */
/*
 * test_collector_output.c - shmtrace-collector when its output fails: a
 * file-size limit, a full disk, a failing fsync. Each is a clear error and
 * exit 1, the capture reads up to its last whole frame, and what did not
 * reach the file is still in the ring.
 */
#include <sys/mount.h>

#include "collector_run.h"

/* A producer of 60000 records against collector col, whose output fails:
 * exit 1, the capture at out read (into t) up to its last whole frame, cut,
 * and the ring's tail never past what reached the file. Returns the ring's
 * stats. */
static struct shmtrace_stats expect_output_failure(const char *ring, const char *out, pid_t col,
						   struct tally *t)
{
	struct shmtrace_stats st;
	shmtrace_t *h;
	int status;

	run_producers(ring, t, 1, 60000);
	wait_producers(t);
	assert_int_equal(waitpid(col, &status, 0), col);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	read_capture(out, t);
	assert_true(t->records > 0);
	assert_int_equal(t->cut_ends, 1);
	assert_int_equal(shmtrace_open(ring, &h), 0);
	shmtrace_stats(h, &st);
	assert_true(st.tail <= t->records);
	shmtrace_close(h);
	return st;
}

/* A file-size limit: a clear error, exit 1, the file readable, and what
 * was not written is still in the ring. */
static void test_file_size_limit_exits_1_rest_stays_in_ring(void **state)
{
	const char *ring = test_ring_name("fsz");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	char out[256];
	struct tally t = { 0 };
	struct shmtrace_stats st;
	pid_t col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	/* 60000 records take over 300 KB even packed (5 bytes at least) */
	col = start_collector(ring, out, NULL, 256 * 1024);
	st = expect_output_failure(ring, out, col, &t);
	assert_true(st.head - st.tail + t.records >= 60000 - st.dropped);
	unlink(out);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/* A full disk (a 128 KiB tmpfs: 60000 records take over 300 KB packed): a clear error, exit 1, the capture
 * readable up to its last whole frame, the rest still in the ring. */
static void test_full_disk_exits_1_rest_stays_in_ring(void **state)
{
	const char *ring = test_ring_name("enospc");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	char dir[] = "/tmp/shmt-enospc-XXXXXX", out[300];
	struct tally t = { 0 };
	pid_t col;

	(void)state;
	assert_non_null(mkdtemp(dir));
	if (geteuid() != 0 || mount("tmpfs", dir, "tmpfs", 0, "size=128k") < 0) {
		rmdir(dir);
		print_message("cannot mount a small tmpfs here; skipped\n");
		skip();
	}
	snprintf(out, sizeof(out), "%s/full.cap", dir);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, out, NULL, 0);
	expect_output_failure(ring, out, col, &t);
	figure("ENOSPC (128 KiB tmpfs)", 1, 60000, t.records, 0, 0, 0,
	       "exit 1, file readable, the rest kept in the ring");
	umount(dir);
	rmdir(dir);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/* A failing fsync is final: the collector reports it and exits 1 (fsync
 * of /dev/null fails with EINVAL after every write succeeded). */
static void test_failed_fsync_reported_and_final(void **state)
{
	const char *ring = test_ring_name("fsync");
	char line[1024];

	(void)state;
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	{
		int p[2], status;
		char fd[16], buf[8];
		pid_t pid;
		size_t got = 0;
		ssize_t n;
		int e[2];

		assert_int_equal(pipe(p), 0);
		assert_int_equal(pipe(e), 0);
		pid = fork();
		if (pid == 0) {
			close(p[0]);
			close(e[0]);
			dup2(e[1], 2);
			snprintf(fd, sizeof(fd), "%d", p[1]);
			execl(g_bin, "shmtrace-collector", "--ring", ring, "--output", "/dev/null",
			      "--ready-fd", fd, (char *)NULL);
			_exit(127);
		}
		close(p[1]);
		close(e[1]);
		assert_int_equal(read(p[0], buf, sizeof(buf)), 6);
		close(p[0]);
		kill(pid, SIGTERM);
		while ((n = read(e[0], line + got, sizeof(line) - 1 - got)) > 0)
			got += (size_t)n;
		line[got] = 0;
		close(e[0]);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 1);
		assert_non_null(strstr(line, "fsync of '/dev/null'"));
	}
	figure("fsync fails (EINVAL on /dev/null)", 1, 0, 0, 0, 0, 0, "reported, exit 1, never retried");
	shmtrace_ring_unlink(ring);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_size_limit_exits_1_rest_stays_in_ring),
		cmocka_unit_test(test_full_disk_exits_1_rest_stays_in_ring),
		cmocka_unit_test(test_failed_fsync_reported_and_final),
	};

	if (collector_bin_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
