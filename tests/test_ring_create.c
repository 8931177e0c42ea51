/* SPDX-License-Identifier: MIT */
/*
 * test_ring_create.c - a ring appears under its name only when it is
 * whole: openers racing a large creation, creators killed half-way, and
 * the temporary names those leave behind.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "helpers.h"
#include "cli.h"
#include "ring_reader.h"
#include "ring_writer.h"

/* How many creation temporaries of process pid are in /dev/shm. */
static int temporaries_of(pid_t pid)
{
	char mark[32];
	struct dirent *de;
	DIR *d = opendir("/dev/shm");
	int n = 0;

	assert_non_null(d);
	snprintf(mark, sizeof(mark), ".%d.", (int)pid);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, SHMT_TMP_PREFIX, strlen(SHMT_TMP_PREFIX)) &&
		    strstr(de->d_name + strlen(SHMT_TMP_PREFIX), mark))
			n++;
	closedir(d);
	return n;
}

/*
 * An opener spins on shmtrace_open() while a 4M-record ring (160 MB, tens
 * of milliseconds of fallocate and page population) is created: every
 * failure must be ENOENT; the first success is a whole ring.
 */
static void test_open_never_sees_half_made(void **state)
{
	const char *name = test_ring_name("half");
	struct shmtrace_ring_config c = { .capacity = 1u << 22 };
	unsigned long total = 0;

	(void)state;
	for (int round = 0; round < 3; round++) {
		int ready[2], res[2], st;
		unsigned long tries = 0;
		long got;
		char b;
		pid_t p;

		assert_int_equal(pipe(ready), 0);
		assert_int_equal(pipe(res), 0);
		p = fork();
		assert_true(p >= 0);
		if (p == 0) {
			shmtrace_t *t;
			int ret;

			close(ready[0]);
			close(res[0]);
			if (write(ready[1], "r", 1) != 1)
				_exit(3);
			for (;;) {
				ret = shmtrace_open(name, &t);
				if (ret == 0)
					break;
				if (ret != -ENOENT) {
					got = ret;
					_exit(write(res[1], &got, sizeof(got)) == sizeof(got) ? 1 : 3);
				}
				tries++;
			}
			shmtrace_close(t);
			got = (long)tries;
			_exit(write(res[1], &got, sizeof(got)) == sizeof(got) ? 0 : 3);
		}
		close(ready[1]);
		close(res[1]);
		assert_int_equal(read(ready[0], &b, 1), 1);
		assert_int_equal(shmtrace_ring_create(name, &c), 0);
		assert_int_equal(read(res[0], &got, sizeof(got)), (ssize_t)sizeof(got));
		assert_int_equal(waitpid(p, &st, 0), p);
		if (WEXITSTATUS(st) == 1)
			fail_msg("round %d: shmtrace_open() failed with %s while the ring was made",
				 round, strerror((int)-got));
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		total += (unsigned long)got;
		close(ready[0]);
		close(res[0]);
		assert_int_equal(shmtrace_ring_unlink(name), 0);
	}
	printf("opens refused with ENOENT while 3 rings were made: %lu\n", total);
}

static const char *g_stop_at;
static int g_stop_fd = -1;

/* Dies at g_stop_at, or (g_stop_fd >= 0) waits there for the parent. */
static void stop_hook(const char *where)
{
	char b;

	if (strcmp(where, g_stop_at))
		return;
	if (g_stop_fd < 0)
		raise(SIGKILL);
	if (write(g_stop_fd, "s", 1) != 1 || read(g_stop_fd, &b, 1) != 1)
		_exit(4);
}

static pid_t create_killed_at(const char *name, const char *where)
{
	struct shmtrace_ring_config c = { .capacity = 1024 };
	int st;
	pid_t p = fork();

	assert_true(p >= 0);
	if (p == 0) {
		g_stop_at = where;
		shmt_test_hook = stop_hook;
		shmtrace_ring_create(name, &c);
		_exit(0);	/* the hook did not fire: the test fails below */
	}
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	return p;
}

/* A creator killed before the ring was whole leaves no name: openers see
 * ENOENT, the next create succeeds and sweeps the dead one's temporary. */
static void test_creator_killed_while_sizing(void **state)
{
	const char *name = test_ring_name("killed");
	shmtrace_t *t;
	pid_t p;

	(void)state;
	p = create_killed_at(name, "create-sized");
	assert_int_equal(shmtrace_open(name, &t), -ENOENT);
	assert_int_equal(temporaries_of(p), 1);
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(temporaries_of(p), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	shmtrace_close(t);
	assert_int_equal(shmtrace_ring_unlink(name), 0);
}

/* Killed between publishing the ring and dropping its temporary name: the
 * ring is whole and usable, and the next create of any ring sweeps the
 * leftover name. */
static void test_creator_killed_after_link(void **state)
{
	const char *name = test_ring_name("linked");
	const char *other = test_ring_name("other");
	shmtrace_t *t;
	pid_t p;

	(void)state;
	p = create_killed_at(name, "create-linked");
	assert_int_equal(shmtrace_open(name, &t), 0);
	shmtrace_close(t);
	assert_int_equal(temporaries_of(p), 1);
	assert_int_equal(shmtrace_ring_create(other, NULL), 0);
	assert_int_equal(temporaries_of(p), 0);
	assert_int_equal(shmtrace_ring_create(name, NULL), -EEXIST);
	assert_int_equal(shmtrace_ring_unlink(name), 0);
	assert_int_equal(shmtrace_ring_unlink(other), 0);
}

/* The sweep spares the temporary of a creator that is alive. */
static void test_live_creator_spared(void **state)
{
	const char *name = test_ring_name("slow");
	const char *other = test_ring_name("fast");
	int sv[2], st;
	shmtrace_t *t;
	char b;
	pid_t p;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		close(sv[0]);
		g_stop_at = "create-sized";
		g_stop_fd = sv[1];
		shmt_test_hook = stop_hook;
		_exit(shmtrace_ring_create(name, NULL) == 0 ? 0 : 1);
	}
	close(sv[1]);
	assert_int_equal(read(sv[0], &b, 1), 1);	/* the child is half-way */
	assert_int_equal(temporaries_of(p), 1);
	assert_int_equal(shmtrace_open(name, &t), -ENOENT);
	assert_int_equal(shmtrace_ring_create(other, NULL), 0);
	assert_int_equal(temporaries_of(p), 1);
	assert_int_equal(write(sv[0], "g", 1), 1);
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(temporaries_of(p), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	shmtrace_close(t);
	close(sv[0]);
	assert_int_equal(shmtrace_ring_unlink(name), 0);
	assert_int_equal(shmtrace_ring_unlink(other), 0);
}

/* A failed create (the name is taken, or is a planted symlink) leaves
 * nothing of its own behind and does not touch what is there. */
static void test_failed_create_cleans_up(void **state)
{
	const char *name = test_ring_name("taken");
	const char *link_name = test_ring_name("planted");
	char path[256];
	struct stat st;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_ring_create(name, NULL), -EEXIST);
	assert_int_equal(temporaries_of(getpid()), 0);
	snprintf(path, sizeof(path), "/dev/shm/%s", link_name);
	assert_int_equal(symlink("/nonexistent-target", path), 0);
	assert_int_equal(shmtrace_ring_create(link_name, NULL), -EEXIST);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(lstat("/nonexistent-target", &st), -1);
	assert_int_equal(temporaries_of(getpid()), 0);
	unlink(path);
	assert_int_equal(shmtrace_ring_unlink(name), 0);
}

static const char *g_remake;

/* Makes g_remake anew at "unlink_seen": between rm's look and its unlink. */
static void remake_hook(const char *where)
{
	struct shmtrace_ring_config c = { .capacity = 1024 };

	if (strcmp(where, "unlink_seen"))
		return;
	assert_int_equal(shmtrace_ring_unlink(g_remake), 0);
	assert_int_equal(shmtrace_ring_create(g_remake, &c), 0);
}

/*
 * rm looked at one ring and removed whatever had its name when it came to
 * the unlink: a ring made anew in between, with live producers, went
 * without a word. It removes only the ring it looked at: a ring made anew
 * is "changed, not removed" (exit 1) and stays; else the ring it looked at
 * is removed and marked retired for its producers.
 */
static void test_rm_removes_the_ring_it_looked_at(void **state)
{
	const char *name = test_ring_name("remade");
	struct shmtrace_ring_config c = { .capacity = 1024 };
	char *argv[] = { "rm", "--force", (char *)name, NULL };
	uint64_t dev0, ino0, dev, ino;
	struct shmt_view v;
	char err[256];

	(void)state;
	shmtrace_ring_unlink(name);
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmt_ring_identity(name, &dev0, &ino0), 0);
	g_remake = name;
	shmt_test_hook = remake_hook;
	optind = 0;
	assert_int_equal(cmd_rm(3, argv), 1);
	shmt_test_hook = NULL;
	assert_int_equal(shmt_ring_identity(name, &dev, &ino), 0);
	assert_true(dev != dev0 || ino != ino0);

	/* left alone, the ring looked at is removed, and retired */
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	optind = 0;
	assert_int_equal(cmd_rm(3, argv), 0);
	assert_int_equal(shmt_ring_identity(name, &dev, &ino), -ENOENT);
	assert_int_equal(load_acquire(&v.h->retired), 1);
	shmt_view_close(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_never_sees_half_made),
		cmocka_unit_test(test_creator_killed_while_sizing),
		cmocka_unit_test(test_creator_killed_after_link),
		cmocka_unit_test(test_live_creator_spared),
		cmocka_unit_test(test_failed_create_cleans_up),
		cmocka_unit_test(test_rm_removes_the_ring_it_looked_at),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
