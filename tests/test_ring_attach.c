/* SPDX-License-Identifier: MIT */
/*
 * test_ring_attach.c - a producer started before its ring exists attaches
 * when it appears (through SHMTRACE_RING and the macros, and through
 * shmtrace_open_wait()), and one whose ring is removed and made again
 * by a restarted program moves to it (test_ring_retire.c: the same under
 * load, and rings retired on purpose).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "helpers.h"
#include "source.h"

static char g_self[4096];

/*
 * The child of test_macros_attach_late, exec'd with SHMTRACE_RING set to
 * a ring that does not exist: it tells the parent it runs, traces until
 * the library has attached, then writes exactly 1000 scoped spans.
 */
static int late_child(int fd)
{
	int n = 0;

	if (__atomic_load_n(&shmtrace_default, __ATOMIC_ACQUIRE) != NULL)
		return 3;	/* the ring must not exist yet */
	if (write(fd, "w", 1) != 1)
		return 4;
	close(fd);
	/* spans before the ring exists go nowhere: the branch is not taken */
	while (__atomic_load_n(&shmtrace_default, __ATOMIC_ACQUIRE) == NULL) {
		SHMTRACE_SCOPE("late", "before");
		sched_yield();
	}
	for (n = 0; n < 1000; n++) {
		SHMTRACE_SCOPE("late", "after");
	}
	return 0;	/* the library's destructor flushes */
}

static void test_macros_attach_late(void **state)
{
	const char *ring = test_ring_name("late");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	struct ring_dump d;
	char fd[16], env[256], buf[1];
	int p[2], status;
	pid_t kid;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(pipe(p), 0);
	kid = fork();
	if (kid == 0) {
		char *envp[] = { env, NULL };

		close(p[0]);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		snprintf(env, sizeof(env), "SHMTRACE_RING=%s", ring);
		execle(g_self, g_self, "--late-child", fd, (char *)NULL, envp);
		_exit(127);
	}
	close(p[1]);
	/* the child runs, with tracing on and no ring: now make the ring */
	assert_int_equal(read(p[0], buf, 1), 1);
	close(p[0]);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(waitpid(kid, &status, 0), kid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	ring_dump(ring, &d);
	/* every span after the attach, and those of the loop that saw it */
	assert_true(count_pid(&d, (uint32_t)kid) >= 1000);
	assert_int_equal(d.torn, 0);
	assert_true(slot_flags(ring, (uint32_t)kid) & SHMT_THREAD_LATE);
	free(d.recs);
	shmtrace_ring_unlink(ring);
}

struct pid_count {
	uint32_t pid;
	uint64_t n;
};

static int count_pid_record(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct pid_count *c = ctx;

	(void)start_time;
	c->n += r->pid == c->pid;
	return 0;
}

/*
 * The scenario of a script or a unit file: the application starts first,
 * then `shmtrace-collector --create` makes its ring (a large one, whose
 * making takes a while). The application attaches when the ring appears,
 * never to a half-made one, and its spans are in the capture.
 */
static void test_late_attach_to_collector_create(void **state)
{
	const char *ring = test_ring_name("latecol");
	const char *bin = getenv("SHMTRACE_BIN");
	char col_bin[4200], out[256], fd[16], env[256], buf[16], err[512];
	struct pid_count pc = { 0 };
	struct source src;
	char *paths[1] = { out };
	int p[2], r[2], status;
	pid_t kid, col;

	(void)state;
	snprintf(col_bin, sizeof(col_bin), "%s/shmtrace-collector", bin ? bin : "build");
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	shmtrace_ring_unlink(ring);
	assert_int_equal(pipe(p), 0);
	kid = fork();
	if (kid == 0) {
		char *envp[] = { env, NULL };

		close(p[0]);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		snprintf(env, sizeof(env), "SHMTRACE_RING=%s", ring);
		execle(g_self, g_self, "--late-child", fd, (char *)NULL, envp);
		_exit(127);
	}
	close(p[1]);
	assert_int_equal(read(p[0], buf, 1), 1);
	close(p[0]);
	/* the application runs; now the collector makes the ring */
	assert_int_equal(pipe(r), 0);
	col = fork();
	if (col == 0) {
		close(r[0]);
		snprintf(fd, sizeof(fd), "%d", r[1]);
		execl(col_bin, "shmtrace-collector", "--ring", ring, "--create", "--capacity",
		      "4194304", "--output", out, "--ready-fd", fd, "--poll-interval", "5",
		      (char *)NULL);
		_exit(127);
	}
	close(r[1]);
	assert_true(read(r[0], buf, sizeof(buf)) > 0);
	close(r[0]);
	assert_int_equal(waitpid(kid, &status, 0), kid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	kill(col, SIGTERM);
	assert_int_equal(waitpid(col, &status, 0), col);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(source_open(&src, NULL, paths, 1, err, sizeof(err)), 0);
	pc.pid = (uint32_t)kid;
	assert_int_equal(source_records(&src, count_pid_record, &pc, err, sizeof(err)), 0);
	print_message("late producer: %llu spans in the capture\n", (unsigned long long)pc.n);
	assert_true(pc.n >= 1000);
	assert_int_equal(src.loss.dropped + src.loss.torn, 0);
	source_close(&src);
	unlink(out);
	shmtrace_ring_unlink(ring);	/* gone already: the collector made it */
}

/*
 * The child of test_macros_reattach: SHMTRACE_RING names an existing
 * ring; it writes scoped spans until the parent closes the pipe's other
 * end (read returns 0), through the ring being removed and made again.
 */
static int reattach_macro_child(int wfd, int rfd)
{
	char c;

	if (write(wfd, "r", 1) != 1)
		return 4;
	close(wfd);
	/* non-blocking: the parent closing its end is the signal to stop */
	fcntl(rfd, F_SETFL, O_NONBLOCK);
	for (;;) {
		for (int i = 0; i < 64; i++) {
			SHMTRACE_SCOPE("again", "macro");
		}
		if (read(rfd, &c, 1) == 0)
			return 0;
		sched_yield();
	}
}

static void test_macros_reattach(void **state)
{
	const char *ring = test_ring_name("mreat");
	struct shmtrace_ring_config c = { .capacity = 1 << 20 };
	struct shmt_view v2;
	char fd[16], env[256], buf[1], err[256], name[64];
	int p[2], q[2], status;
	uint64_t mine = 0;
	struct ring_dump d;
	pid_t kid;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(pipe(p), 0);	/* child -> parent: running */
	assert_int_equal(pipe(q), 0);	/* parent -> child: closed = stop */
	kid = fork();
	if (kid == 0) {
		char *envp[] = { env, NULL };

		close(p[0]);
		close(q[1]);
		dup2(p[1], 3);
		dup2(q[0], 4);
		snprintf(fd, sizeof(fd), "%d", 4);
		snprintf(env, sizeof(env), "SHMTRACE_RING=%s", ring);
		execle(g_self, g_self, "--reattach-child", "3", fd, (char *)NULL, envp);
		_exit(127);
	}
	close(p[1]);
	close(q[0]);
	assert_int_equal(read(p[0], buf, 1), 1);
	close(p[0]);
	/* the ring goes and comes back under the same name */
	assert_int_equal(shmtrace_ring_unlink(ring), 0);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v2, err, sizeof(err)), 0);
	while (shmt_ring_head(&v2) < 5000)
		sched_yield();
	close(q[1]);
	assert_int_equal(waitpid(kid, &status, 0), kid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	ring_dump_view(&v2, &d);
	for (size_t i = 0; i < d.n; i++) {
		if (d.recs[i].pid != (uint32_t)kid)
			continue;
		/* the call site's ids were mapped to the new ring's */
		assert_true(shmt_ring_string(&v2, d.recs[i].name, name, sizeof(name)) > 0);
		assert_string_equal(name, "macro");
		mine++;
	}
	assert_true(mine >= 5000);
	assert_true(slot_flags(ring, (uint32_t)kid) & SHMT_THREAD_REATTACHED);
	free(d.recs);
	shmt_view_close(&v2);
	shmtrace_ring_unlink(ring);
}

static void test_api_open_wait(void **state)
{
	const char *ring = test_ring_name("wait");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	struct shmtrace_attach_stats as;
	struct ring_dump d;
	uint32_t name;
	shmtrace_t *t;
	int ret;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_open(ring, &t), -ENOENT);
	assert_int_equal(shmtrace_open_wait(ring, &t), 0);
	assert_int_equal(shmtrace_span(t, 0, 0, 1, 2, 0), -ENOENT);
	assert_int_equal(shmtrace_intern(t, "x"), 0);
	assert_int_equal(shmtrace_attach_stats(t, &as), 0);
	assert_int_equal(as.attached, 0);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	/* it looks at most every 100 ms: calls fail until then */
	do
		ret = shmtrace_span(t, 0, 0, 1, 2, 0);
	while (ret == -ENOENT);
	assert_int_equal(ret, 0);
	name = shmtrace_intern(t, "after");
	assert_true(name > 0);
	for (int i = 0; i < 500; i++)
		assert_int_equal(shmtrace_span(t, name, name, 10, 20, 0), 0);
	assert_int_equal(shmtrace_attach_stats(t, &as), 0);
	assert_int_equal(as.attached, 1);
	assert_int_equal(as.late, 1);
	assert_int_equal(as.reattaches, 0);
	/* attached inside a span call: no page read ahead there */
	assert_int_equal(t->cur->prefaulted, 0);
	shmtrace_close(t);
	ring_dump(ring, &d);
	assert_int_equal(d.n, 501);
	assert_true(slot_flags(ring, (uint32_t)getpid()) & SHMT_THREAD_LATE);
	free(d.recs);
	shmtrace_ring_unlink(ring);
}

/*
 * shmtrace_open() reads every page of the ring once, so that span calls
 * do not pay the first touch of a page (several microseconds each on some
 * virtual machines, this project's among them); SHMTRACE_PREFAULT=0
 * leaves the pages to the calls.
 */
static void test_open_reads_every_page_ahead_unless_prefault_is_0(void **state)
{
	const char *ring = test_ring_name("prefault");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	const char *const values[] = { NULL, "1", "0" };
	shmtrace_t *t;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		uint64_t pages;

		if (values[i])
			setenv("SHMTRACE_PREFAULT", values[i], 1);
		else
			unsetenv("SHMTRACE_PREFAULT");
		assert_int_equal(shmtrace_open(ring, &t), 0);
		pages = t->cur->v.size / 4096;
		assert_true(pages > 1);
		assert_int_equal(t->cur->v.size % 4096, 0);
		/* only "0" turns it off */
		assert_int_equal(t->cur->prefaulted, strcmp(values[i] ? values[i] : "", "0") == 0 ? 0 : pages);
		assert_int_equal(shmtrace_span(t, 0, 0, 1, 2, 0), 0);
		shmtrace_close(t);
	}
	unsetenv("SHMTRACE_PREFAULT");
	shmtrace_ring_unlink(ring);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_macros_attach_late),
		cmocka_unit_test(test_late_attach_to_collector_create),
		cmocka_unit_test(test_macros_reattach),
		cmocka_unit_test(test_api_open_wait),
		cmocka_unit_test(test_open_reads_every_page_ahead_unless_prefault_is_0),
	};

	if (argc == 3 && !strcmp(argv[1], "--late-child"))
		return late_child(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "--reattach-child"))
		return reattach_macro_child(atoi(argv[2]), atoi(argv[3]));
	if (!realpath("/proc/self/exe", g_self))
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
