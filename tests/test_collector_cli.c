/* SPDX-License-Identifier: MIT */
/*
 * test_collector_cli.c - shmtrace-collector's command line: bad options,
 * a missing ring, a ring of another version and an output it cannot write
 * each exit with a code and a message that says what is wrong.
 */
#include "collector_run.h"

/* Runs the collector with args; returns its exit code and stderr's first line. */
static int run_cli(char *line, size_t len, const char *a1, const char *a2, const char *a3,
		   const char *a4, const char *a5)
{
	int p[2], status;
	pid_t pid;
	ssize_t n;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 2);
		close(p[0]);
		execl(g_bin, "shmtrace-collector", a1, a2, a3, a4, a5, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	/* until EOF: stderr is unbuffered, a message may come in pieces */
	for (size_t got = 0;; got += (size_t)n) {
		n = read(p[0], line + got, len - 1 - got);
		if (n <= 0) {
			line[got] = 0;
			break;
		}
	}
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void test_bad_command_lines_exit_with_a_reason(void **state)
{
	const char *ring = test_ring_name("cli");
	char line[1024];
	uint16_t major = 99;
	char path[256];
	int fd;

	(void)state;
	assert_int_equal(run_cli(line, sizeof(line), "--bogus", NULL, NULL, NULL, NULL), 2);
	assert_non_null(strstr(line, "--help"));
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, NULL, NULL, NULL), 2);
	assert_non_null(strstr(line, "--output"));
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "--output", "/tmp/x.cap",
				 "--capacity"), 2);
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/tmp/x.cap", NULL), 1);
	assert_non_null(strstr(line, "no ring named"));
	/* a ring of another version */
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &major, 2, offsetof(struct shmt_header, major)), 2);
	assert_int_equal(pwrite(fd, &major, 2, offsetof(struct shmt_header, compat)), 2);
	close(fd);
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/tmp/x.cap", NULL), 1);
	assert_non_null(strstr(line, "version"));
	shmtrace_ring_unlink(ring);
	/* an output that cannot be written */
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/nonexistent/dir/x.cap",
				 NULL), 1);
	assert_non_null(strstr(line, "cannot write"));
	shmtrace_ring_unlink(ring);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_command_lines_exit_with_a_reason),
	};

	if (collector_bin_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
