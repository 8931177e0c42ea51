/* SPDX-License-Identifier: MIT */
/*
 * hostile_run.h - what the tests of hostile neighbours share: running a
 * command with a hang turned into a failure, and a small ring of spans.
 */
#ifndef SHMTRACE_TEST_HOSTILE_RUN_H
#define SHMTRACE_TEST_HOSTILE_RUN_H

#include "cli_run.h"

#define GUARD_S 60	/* a command that blocks this long is hung: killed, and the test fails */

/* run(), with a hang turned into a failure (see run_for()). */
static inline int run_guarded(const char *out, const char *err, char *const argv[])
{
	return run_for(out, err, argv, GUARD_S);
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
