/* SPDX-License-Identifier: MIT */
/*
 * test_ring.c - the ring's segment, in one process: creation and opening,
 * names and configurations refused, permissions under a umask, segments
 * that are not a ring of this version refused, the staging block sized
 * with the ring, and a clock conversion in the header not taken on trust.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <signal.h>
#include <sys/wait.h>

#include "helpers.h"

static void test_create_open_close(void **state)
{
	const char *name = test_ring_name("create");
	shmtrace_t *t;
	struct stat st;
	char path[256];

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_ring_create(name, NULL), -EEXIST);
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(shmtrace_open(name, &t), 0);
	shmtrace_close(t);
	assert_int_equal(shmtrace_ring_unlink(name), 0);
	assert_int_equal(shmtrace_open(name, &t), -ENOENT);
	assert_null(t);
}

static void test_bad_names_and_config(void **state)
{
	struct shmtrace_ring_config c;
	shmtrace_t *t;

	(void)state;
	assert_int_equal(shmtrace_ring_create("", NULL), -EINVAL);
	assert_int_equal(shmtrace_ring_create("a/b", NULL), -EINVAL);
	assert_int_equal(shmtrace_ring_create("..", NULL), -EINVAL);
	assert_int_equal(shmtrace_open(NULL, &t), -EINVAL);
	small_cfg(&c, 1000, 0);	/* not a power of two */
	assert_int_equal(shmtrace_ring_create(test_ring_name("cfg"), &c), -EINVAL);
	small_cfg(&c, 1024, 7);
	assert_int_equal(shmtrace_ring_create(test_ring_name("cfg"), &c), -EINVAL);
	small_cfg(&c, 1024, 0);
	c.perm = 0666;	/* others may never write */
	assert_int_equal(shmtrace_ring_create(test_ring_name("cfg"), &c), -EINVAL);
}

static void test_group_mode_under_umask(void **state)
{
	const char *name = test_ring_name("group");
	struct shmtrace_ring_config c;
	char path[256];
	struct stat st;
	mode_t old = umask(077);

	(void)state;
	small_cfg(&c, 1024, 0);
	c.perm = 0660;
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	umask(old);
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0660);
	shmtrace_ring_unlink(name);
}

/* Rewrites bytes of a ring's segment as any local process could. */
static void poke(const char *name, off_t off, const void *buf, size_t len)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

static void test_refuses_foreign_segments(void **state)
{
	const char *name = test_ring_name("foreign");
	struct shmtrace_ring_config c;
	uint16_t major = SHMT_RING_MAJOR + 1, compat = SHMT_RING_MAJOR + 1;
	uint64_t magic = 0x1122334455667788ull, size;
	char path[256], err[256];
	struct shmt_view v;
	shmtrace_t *t;

	(void)state;
	small_cfg(&c, 1024, 0);
	snprintf(path, sizeof(path), "/dev/shm/%s", name);

	/* a newer major version that declares itself incompatible */
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	poke(name, offsetof(struct shmt_header, major), &major, 2);
	poke(name, offsetof(struct shmt_header, compat), &compat, 2);
	assert_int_equal(shmtrace_open(name, &t), -EPROTO);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "version"));
	shmtrace_ring_unlink(name);

	/* not a ring at all */
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	poke(name, 0, &magic, 8);
	assert_int_equal(shmtrace_open(name, &t), -EPROTO);
	shmtrace_ring_unlink(name);

	/* truncated: the header's size no longer matches the file */
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(truncate(path, 8192), 0);
	assert_int_equal(shmtrace_open(name, &t), -EBADMSG);
	assert_int_equal(truncate(path, 100), 0);
	assert_int_equal(shmtrace_open(name, &t), -EBADMSG);
	shmtrace_ring_unlink(name);

	/* a capacity that does not fit the segment */
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	size = 1u << 20;
	poke(name, offsetof(struct shmt_header, capacity), &size, 4);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), -EBADMSG);
	shmtrace_ring_unlink(name);

	/* a ring whose blocks do not have the size its capacity gives (format
	 * 1.3's 256 records in a ring of 1024, whose blocks hold 64 since
	 * 1.4): refused by name, not misread */
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	{
		uint32_t old = 256;

		poke(name, offsetof(struct shmt_header, block_records), &old, 4);
	}
	assert_int_equal(shmtrace_open(name, &t), -EBADMSG);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), -EBADMSG);
	assert_int_equal(shmt_block_records_for(1024, SHMT_RING_MINOR), 64);
	assert_non_null(strstr(err, "block size 256 is not 64 records, as a ring of 1024 records has"));
	shmtrace_ring_unlink(name);

	/* writable by others */
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(chmod(path, 0666), 0);
	assert_int_equal(shmtrace_open(name, &t), -EPERM);
	shmtrace_ring_unlink(name);

	/* a symlink planted under the name is never followed */
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(shmtrace_open(name, &t), -ELOOP);
	assert_int_equal(shmtrace_ring_create(name, &c), -EEXIST);
	unlink(path);
}

/*
 * A staging block holds 1/256 of the ring, 64 to 1024 records (1/64, 64
 * to 4096 before format 1.10), as the header says. With no collector to
 * hand full blocks to, a thread moves its block into the ring when it is
 * full, in a discard ring (under a quarter of its blocks' records held):
 * the next call sequences the whole block where it is, writing no slot,
 * and goes on in another block. A thread that copies (an overwrite ring)
 * copies once half its block is staged (docs/DESIGN.md).
 */
static void block_moves(const char *name, uint32_t cap, uint32_t mode)
{
	struct shmtrace_ring_config c = { .capacity = cap, .mode = mode };
	uint64_t block = shmt_block_records_for(cap, SHMT_RING_MINOR);
	/* what the thread stages before the call that moves it */
	uint64_t staged = mode == SHMTRACE_MODE_DISCARD ? block : block / 2;
	struct shmtrace_stats st;
	struct shmt_extent e[2];
	struct shmt_block *b;
	struct shmt_view v;
	char err[256];
	shmtrace_t *t;

	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	assert_int_equal(v.block_records, block);
	assert_int_equal(v.h->block_records, block);
	assert_int_equal(shmtrace_open(name, &t), 0);
	for (uint64_t i = 0; i < staged; i++)
		assert_int_equal(shmtrace_span(t, 1, 1, i, i + 1, 0), 0);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	assert_int_equal(st.head, 0);	/* all staged */
	assert_int_equal(load_relaxed(&block_of_this_thread(&v)->written), staged);
	assert_int_equal(shmtrace_span(t, 1, 1, staged, staged + 1, 0), 0);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	assert_int_equal(st.head, staged);	/* the next call moved them */
	b = block_of_this_thread(&v);
	if (mode == SHMTRACE_MODE_DISCARD) {
		/* in place: the full block is the extent of [0, block), and
		 * the call's record is the first of the thread's next block */
		assert_int_equal(shmt_ring_extents(&v, 0, block, e, 2), 1);
		assert_true(e[0].seq == 0 && e[0].n == block);
		assert_true(shmt_block_at(&v, e[0].block) != b);
		assert_int_equal(load_relaxed(&shmt_block_at(&v, e[0].block)->state),
				 SHMT_BLOCK_SEQUENCED);
		assert_int_equal(load_relaxed(&b->written) - load_relaxed(&b->taken), 1);
	} else {
		/* copied: the block stays the thread's, the call's record in it */
		assert_int_equal(load_relaxed(&b->written), staged + 1);
		assert_int_equal(load_relaxed(&b->taken), staged);
	}
	for (uint64_t s = 0; s < staged; s++)
		assert_int_equal(shmt_commit_is(load_relaxed(&v.records[s].commit), s),
				 mode == SHMTRACE_MODE_OVERWRITE);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

static void test_block_grows_with_ring(void **state)
{
	static const uint32_t caps[] = { 1024, 16384, 1u << 18 };
	const char *name = test_ring_name("blocksize");

	(void)state;
	assert_int_equal(shmt_block_records_for(2, SHMT_RING_MINOR), 64);
	assert_int_equal(shmt_block_records_for(1u << 14, SHMT_RING_MINOR), 64);
	assert_int_equal(shmt_block_records_for(1u << 18, SHMT_RING_MINOR), 1024);
	assert_int_equal(shmt_block_records_for(SHMT_MAX_CAPACITY, SHMT_RING_MINOR), 1024);
	/* rings made before: their readers and producers keep their size */
	assert_int_equal(shmt_block_records_for(1u << 14, 9), 256);
	assert_int_equal(shmt_block_records_for(1u << 18, 9), 4096);
	for (size_t k = 0; k < sizeof(caps) / sizeof(caps[0]); k++) {
		block_moves(name, caps[k], SHMTRACE_MODE_DISCARD);
		block_moves(name, caps[k], SHMTRACE_MODE_OVERWRITE);
	}
}

/*
 * A fresh process opening the ring: 0 if shmtrace_now() agrees with
 * CLOCK_MONOTONIC within a millisecond, 1 if not, 2 if it cannot open it.
 * Run as `test_ring clock-child NAME`, so that no ring of this process
 * has set the clock before (the first ring a process attaches does).
 */
static int clock_child(const char *name)
{
	struct timespec ts;
	shmtrace_t *t;
	uint64_t now, m0, m1;

	if (shmtrace_open(name, &t) < 0)
		return 2;
	/* read between two CLOCK_MONOTONIC reads: a preemption between
	 * them widens the bracket, never fails the check */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	m0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	now = shmtrace_now();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	m1 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	shmtrace_close(t);
	return now + 1000000 > m0 && now < m1 + 1000000 ? 0 : 1;
}

static int run_clock_child(const char *name)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		execl("/proc/self/exe", "test_ring", "clock-child", name, (char *)NULL);
		_exit(3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/*
 * The creator's TSC conversion uses shift 24, and producers convert with
 * that constant: a ring whose header states another shift (a peer wrote
 * it), here 28 with a mult that goes with 28, is read with
 * CLOCK_MONOTONIC. Converted with the constant 24 instead, that mult would
 * make a clock 16 times too fast, off by more than a millisecond by the
 * time the child has been exec'd.
 */
static void test_foreign_clock_shift_not_used(void **state)
{
	const char *name = test_ring_name("shift");
	struct shmtrace_ring_config c;
	struct shmt_view v;
	char err[256];
	uint32_t shift = 28, mult, tsc_ok;

	(void)state;
	small_cfg(&c, 1024, 0);
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	tsc_ok = v.clock.tsc_ok;
	mult = v.clock.mult << 4;
	assert_true(!tsc_ok || (v.clock.shift == 24 && mult >> 4 == v.clock.mult));
	shmt_view_close(&v);
	if (!tsc_ok) {
		shmtrace_ring_unlink(name);
		skip();	/* no invariant TSC here: the ring clock is CLOCK_MONOTONIC anyway */
	}
	assert_int_equal(run_clock_child(name), 0);	/* the TSC, converted right */
	poke(name, offsetof(struct shmt_header, clock.shift), &shift, 4);
	poke(name, offsetof(struct shmt_header, clock.mult), &mult, 4);
	assert_int_equal(run_clock_child(name), 0);	/* not used: CLOCK_MONOTONIC */
	shmtrace_ring_unlink(name);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "clock-child"))
		return clock_child(argv[2]);

	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_open_close),
		cmocka_unit_test(test_bad_names_and_config),
		cmocka_unit_test(test_group_mode_under_umask),
		cmocka_unit_test(test_refuses_foreign_segments),
		cmocka_unit_test(test_block_grows_with_ring),
		cmocka_unit_test(test_foreign_clock_shift_not_used),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
