/* SPDX-License-Identifier: MIT */
/*
 * hostile_run.h - what the tests of hostile neighbours share: running a
 * command with a hang turned into a failure, and a small ring of spans.
 */
#ifndef SHMTRACE_TEST_HOSTILE_RUN_H
#define SHMTRACE_TEST_HOSTILE_RUN_H

#include "cli_run.h"

#define GUARD_S 60	/* a command that blocks this long is hung: killed, and the test fails */

/* run(), with a hang turned into a failure: the child is killed by
 * SIGALRM after GUARD_S seconds (128 + 14). */
static inline int run_guarded(const char *out, const char *err, char *const argv[])
{
	pid_t p = fork();
	int st;

	assert_true(p >= 0);
	if (p == 0) {
		int fo = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int fe = open(err ? err : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fo, 1);
		dup2(fe, 2);
		alarm(GUARD_S);	/* survives exec */
		execv(argv[0], argv);
		_exit(127);
	}
	assert_int_equal(waitpid(p, &st, 0), p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A ring of n spans named "s" from this process, closed again. */
static inline void small_ring(const char *ring, uint32_t capacity, int n)
{
	struct shmtrace_ring_config c = { .capacity = capacity };
	shmtrace_t *t;
	uint32_t name;

	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	name = shmtrace_intern(t, "s");
	for (int i = 0; i < n; i++)
		assert_int_equal(shmtrace_span(t, name, name, 1000 + (uint64_t)i, 1001 + (uint64_t)i, 0), 0);
	shmtrace_close(t);
}

#endif
