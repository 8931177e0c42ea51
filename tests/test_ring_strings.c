/* SPDX-License-Identifier: MIT */
/*
 * test_ring_strings.c - the ring's string table: strings stored intact, a
 * full table refused and counted, interning that survives a table a
 * crashed or hostile process scribbled on, and a fork during an intern.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "helpers.h"

static void test_strings_stored_intact(void **state)
{
	static const char *odd[] = {
		"quote\"back\\slash", "ctl\x01\x1f\ttab\nnl", "bad\xff\xfe utf8", "\xc3\x28",
		"caf\xc3\xa9", "\xed\xa0\x80 surrogate",
	};
	const char *name = test_ring_name("str");
	struct shmt_view v;
	char err[256], buf[128];
	uint32_t id[6];
	shmtrace_t *t;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	for (int i = 0; i < 6; i++)
		id[i] = shmtrace_intern(t, odd[i]);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(shmt_ring_string(&v, id[i], buf, sizeof(buf)), (int)strlen(odd[i]));
		assert_memory_equal(buf, odd[i], strlen(odd[i]));
	}
	assert_int_equal(shmtrace_intern(t, NULL), 0);
	/* the empty string is a name like any other, with an id of its own */
	id[0] = shmtrace_intern(t, "");
	assert_true(id[0] > 0);
	assert_int_equal(shmtrace_intern(t, ""), id[0]);
	assert_int_equal(shmt_ring_string(&v, id[0], buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

static void test_string_table_full(void **state)
{
	const char *name = test_ring_name("full");
	struct shmtrace_ring_config c;
	shmtrace_t *t;
	char s[32];
	uint32_t last = 0;

	(void)state;
	small_cfg(&c, 1024, 0);
	c.max_strings = 8;
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	for (int i = 0; i < 8; i++) {
		snprintf(s, sizeof(s), "s%d", i);
		last = shmtrace_intern(t, s);
		assert_true(last > 0);
	}
	assert_int_equal(shmtrace_intern(t, "one too many"), 0);
	assert_int_equal(shmtrace_intern(t, "s7"), last);	/* old ones still resolve */
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

/*
 * A peer scribbles the published string count and every hash slot: the
 * lookup must stay inside the validated table (it used to bound ids by
 * the header's count and read past the segment).
 */
static void test_intern_scribbled_table(void **state)
{
	const char *name = test_ring_name("scrib");
	struct shmtrace_ring_config c;
	struct shmt_view v;
	char err[256];
	int status;
	pid_t kid;

	(void)state;
	small_cfg(&c, 64, 0);
	c.max_strings = 8;
	c.string_bytes = 4096;
	c.max_threads = 4;
	c.blocks = 2;
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	/* strings[60000] lies far past this small segment */
	assert_true(v.h->strings_off + 60000ull * sizeof(struct shmt_string) > v.size);
	v.h->strings = 65535;
	for (uint32_t i = 0; i < v.hash_slots; i++)
		v.hash[i] = 60000;
	kid = fork();
	if (kid == 0) {
		shmtrace_t *t;

		/* a fault kills the child, not cmocka's handler in it */
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		if (shmtrace_open(name, &t) < 0)
			_exit(3);
		/* the table is "full" by its count: refused, never read past */
		_exit(shmtrace_intern(t, "new") == 0 ? 0 : 4);
	}
	assert_int_equal(waitpid(kid, &status, 0), kid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	/* the lock-free reader, every index a peer can choose: bounded by the
	 * validated tables, whatever the header's counts say */
	v.h->threads = 65535;
	assert_true(v.h->threads_off + 60000ull * sizeof(struct shmt_thread) > v.size);
	kid = fork();
	if (kid == 0) {
		struct shmt_view r;
		struct shmt_thread th;
		struct shmt_block_info info;
		struct shmt_record recs[64];
		char buf[64];

		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		if (shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &r, buf, sizeof(buf)) < 0)
			_exit(3);
		if (shmt_ring_nstrings(&r) != r.max_strings + 1 ||
		    shmt_ring_nthreads(&r) != r.max_threads)
			_exit(4);
		for (uint32_t id = 0; id < 65536; id++)
			if (shmt_ring_string(&r, id, buf, sizeof(buf)) >= 0 && id > r.max_strings)
				_exit(5);
		for (uint32_t i = 0; i < 65536; i++)
			if (shmt_ring_thread(&r, i, &th) == 0 && i >= r.max_threads)
				_exit(6);
		for (uint32_t i = 0; i < 65536; i++)
			if (shmt_ring_block_pending(&r, i, recs, &info) != 0 && i >= r.nblocks)
				_exit(7);
		/* and the accessors themselves */
		if (shmt_string_at(&r, 60000) || shmt_thread_at(&r, 60000) ||
		    shmt_hash_at(&r, r.hash_slots) || shmt_block_at(&r, r.nblocks))
			_exit(8);
		_exit(0);
	}
	assert_int_equal(waitpid(kid, &status, 0), kid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	shmt_view_close(&v);
	shmtrace_ring_unlink(name);
}

#if !SHMT_TSAN	/* ThreadSanitizer reports the parent's thread leaked in the child */
/* A thread interning a new string while the ring's lock is held by
 * another (its word forged to tid 1, which runs: the wait is the whole
 * 100 ms bound), with the handle's own lock taken for that wait. */
struct intern_waiting {
	shmtrace_t *t;
	uint32_t id;
};

static unsigned g_lock_slices;

static void count_lock_slices(const char *where)
{
	if (!strcmp(where, "lock-slice"))
		__atomic_add_fetch(&g_lock_slices, 1, __ATOMIC_RELEASE);
}

static void *intern_while_held(void *arg)
{
	struct intern_waiting *w = arg;

	w->id = shmtrace_intern(w->t, "interned while the lock was held");
	return NULL;
}

/*
 * fork() while another thread waits for the ring lock inside an intern:
 * the fork waits for that thread's hold of the handle, so the child's own
 * first string is interned (or refused, the lock still held) at once. A
 * child forked in the middle inherited the handle's lock held by a thread
 * it does not have, and its first new string waited forever.
 */
static void test_fork_during_an_intern_leaves_the_child_a_free_handle(void **state)
{
	const char *name = test_ring_name("forkintern");
	struct intern_waiting w = { 0 };
	struct shmt_view v;
	uint32_t *word;
	char err[256];
	pthread_t th;
	int status;
	pid_t pid;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &w.t), 0);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	word = (uint32_t *)&v.h->mutex;	/* glibc's lock word first (docs/FORMAT.md) */
	__atomic_store_n(word, 1, __ATOMIC_RELEASE);
	g_lock_slices = 0;
	shmt_test_hook = count_lock_slices;
	assert_int_equal(pthread_create(&th, NULL, intern_while_held, &w), 0);
	/* a slice of its wait ended: it waits, its handle's lock held */
	while (!__atomic_load_n(&g_lock_slices, __ATOMIC_ACQUIRE))
		sched_yield();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(10);	/* a child that waits forever fails, not hangs */
		(void)shmtrace_intern(w.t, "the child's own string");
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	pthread_join(th, NULL);
	shmt_test_hook = NULL;
	__atomic_store_n(word, 0, __ATOMIC_RELEASE);
	shmt_view_close(&v);
	shmtrace_close(w.t);
	shmtrace_ring_unlink(name);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strings_stored_intact),
		cmocka_unit_test(test_string_table_full),
		cmocka_unit_test(test_intern_scribbled_table),
#if !SHMT_TSAN
		cmocka_unit_test(test_fork_during_an_intern_leaves_the_child_a_free_handle),
#endif
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
