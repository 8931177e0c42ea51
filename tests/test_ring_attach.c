/* SPDX-License-Identifier: MIT */
/*
 * test_ring_attach.c - a producer started before its ring exists attaches
 * when it appears (through SHMTRACE_RING and the macros, and through
 * shmtrace_open_wait()), and one whose ring is removed and made again
 * moves to the new ring without losing a record silently.
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

/* How many of d's records come from pid (and have name id name, if not 0). */
static uint64_t count_pid(const struct ring_dump *d, uint32_t pid)
{
	uint64_t n = 0;

	for (size_t i = 0; i < d->n; i++)
		n += d->recs[i].pid == pid;
	return n;
}

/* The flags of pid's name slots, or-ed. */
static uint32_t slot_flags(const char *ring, uint32_t pid)
{
	struct shmt_view v;
	struct shmt_thread t;
	uint32_t flags = 0;
	char err[256];

	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	for (uint32_t i = 0; i < shmt_ring_nthreads(&v); i++)
		if (shmt_ring_thread(&v, i, &t) == 0 && t.pid == pid)
			flags |= t.flags;
	shmt_view_close(&v);
	return flags;
}

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
	shmtrace_close(t);
	ring_dump(ring, &d);
	assert_int_equal(d.n, 501);
	assert_true(slot_flags(ring, (uint32_t)getpid()) & SHMT_THREAD_LATE);
	free(d.recs);
	shmtrace_ring_unlink(ring);
}

/* What the re-attach test's producer and the test share. */
struct shared {
	uint64_t written;	/* spans whose call returned 0 or -ENOSPC */
	uint32_t stop;
	uint32_t reattaches;
};

static void reattach_child(const char *ring, struct shared *sh)
{
	struct shmtrace_attach_stats as;
	uint32_t name;
	shmtrace_t *t;
	uint64_t i;

	if (shmtrace_open(ring, &t) < 0)
		_exit(3);
	name = shmtrace_intern(t, "reattach");
	for (i = 0; !__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE); i++) {
		int ret = shmtrace_span(t, name, name, i, i + 1, 0);

		/* -ENOENT: refused while the ring was removed, and counted */
		if (ret < 0 && ret != -ENOSPC && ret != -ENOENT)
			_exit(4);
		__atomic_store_n(&sh->written, i + 1, __ATOMIC_RELEASE);
		if (i % 64 == 0)
			sched_yield();	/* leave the test a core */
	}
	shmtrace_attach_stats(t, &as);
	sh->reattaches = (uint32_t)as.reattaches;
	shmtrace_close(t);
	_exit(0);
}

/* Counts d's spans by their index (ts), failing on a duplicate, and
 * checks that they all carry the string "reattach". */
static uint64_t tally_spans(const struct shmt_view *v, const struct ring_dump *d, uint8_t *seen,
			    uint64_t n)
{
	char buf[64];
	uint64_t k = 0;

	for (size_t i = 0; i < d->n; i++) {
		assert_true(d->recs[i].ts < n);
		assert_int_equal(seen[d->recs[i].ts]++, 0);
		assert_true(shmt_ring_string(v, d->recs[i].name, buf, sizeof(buf)) > 0);
		assert_string_equal(buf, "reattach");
		k++;
	}
	return k;
}

static void test_reattach_after_ring_made_again(void **state)
{
	const char *ring = test_ring_name("again");
	struct shmtrace_ring_config c = { .capacity = 1 << 20 };
	struct shmt_view v1, v2;
	struct ring_dump d1, d2;
	struct shared *sh;
	uint64_t n, got, dropped;
	uint8_t *seen;
	char err[256];
	int status;
	pid_t kid;

	(void)state;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	/* keep the first ring mapped: a post-mortem look at it after */
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v1, err, sizeof(err)), 0);
	kid = fork();
	if (kid == 0)
		reattach_child(ring, sh);
	while (shmt_ring_head(&v1) < 5000)
		sched_yield();
	/* remove it and make it again under load */
	assert_int_equal(shmtrace_ring_unlink(ring), 0);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v2, err, sizeof(err)), 0);
	while (shmt_ring_head(&v2) < 5000)
		sched_yield();
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
	assert_int_equal(waitpid(kid, &status, 0), kid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(sh->reattaches, 1);

	n = sh->written;
	seen = calloc(n, 1);
	assert_non_null(seen);
	ring_dump_view(&v1, &d1);
	ring_dump_view(&v2, &d2);
	got = tally_spans(&v1, &d1, seen, n) + tally_spans(&v2, &d2, seen, n);
	dropped = load_relaxed(&v1.h->dropped.v) + load_relaxed(&v2.h->dropped.v) +
		  load_relaxed(&v2.h->orphaned.v);
	print_message("written %llu: old ring %zu, new ring %zu, dropped or refused %llu\n",
		      (unsigned long long)n, d1.n, d2.n, (unsigned long long)dropped);
	assert_int_equal(d1.torn + d2.torn, 0);
	assert_int_equal(got + dropped, n);
	assert_true(slot_flags(ring, (uint32_t)kid) & SHMT_THREAD_REATTACHED);
	free(seen);
	free(d1.recs);
	free(d2.recs);
	shmt_view_close(&v1);
	shmt_view_close(&v2);
	munmap(sh, sizeof(*sh));
	shmtrace_ring_unlink(ring);
}

/* Records of ring v (published and staged) by this process. */
static size_t my_records(const struct shmt_view *v)
{
	struct ring_dump d;
	size_t n = 0;

	ring_dump_view(v, &d);
	for (size_t i = 0; i < d.n; i++)
		n += d.recs[i].pid == (uint32_t)getpid();
	free(d.recs);
	return n;
}

static void spans(shmtrace_t *t, uint32_t name, int n)
{
	for (int i = 0; i < n; i++)
		assert_int_equal(shmtrace_span(t, name, name, 1, 2, 0), 0);
}

/*
 * A ring replaced (a collector's --create of another configuration) or
 * removed and made again is marked retired, and a handle that writes one
 * call at a time moves: at its first call after a replacement, within 64
 * calls of a new ring's appearance after a removal. Its block in the old
 * ring is given back with its records in that ring. While a removed ring
 * has no successor and no collector, calls refuse their records and count
 * them into the next ring: every call is in a segment or counted.
 */
static void test_retired_ring_moves_within_bound(void **state)
{
	const char *ring = test_ring_name("retire");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	struct shmtrace_ring_config bigger = { .capacity = 1 << 17, .flags = SHMTRACE_CREATE_REPLACE };
	struct shmt_view v1, v2, v3;
	size_t refused = 0;
	shmtrace_t *t;
	uint32_t name;
	char err[256];

	(void)state;
	assert_int_equal(shmtrace_ring_create(ring, &c), SHMTRACE_CREATED);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v1, err, sizeof(err)), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	name = shmtrace_intern(t, "retire");
	spans(t, name, 10);
	/* the same configuration is adopted, as it is */
	c.flags = SHMTRACE_CREATE_ADOPT;
	assert_int_equal(shmtrace_ring_create(ring, &c), SHMTRACE_ADOPTED);
	assert_int_equal(load_relaxed(&v1.h->retired), 0);

	assert_int_equal(shmtrace_ring_create(ring, &bigger), SHMTRACE_REPLACED);
	assert_int_equal(load_relaxed(&v1.h->retired), 1);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v2, err, sizeof(err)), 0);
	spans(t, name, 1);
	assert_int_equal(my_records(&v2), 1);
	/* the old block went back, its ten records published in the old ring */
	assert_int_equal(shmt_ring_head(&v1), 10);
	for (uint32_t i = 0; i < v1.nblocks; i++)
		assert_int_equal(load_relaxed(&shmt_block_at(&v1, i)->state), SHMT_BLOCK_FREE);

	/* removed, and no collector drains it: calls refuse (-ENOENT) and count */
	assert_int_equal(shmtrace_ring_unlink(ring), 0);
	assert_int_equal(load_relaxed(&v2.h->retired), 1);
	for (int i = 0; i < 100; i++)
		assert_int_equal(shmtrace_span(t, name, name, 1, 2, 0), -ENOENT);
	assert_int_equal(my_records(&v2), 1);
	c.flags = 0;
	assert_int_equal(shmtrace_ring_create(ring, &c), SHMTRACE_CREATED);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, &v3, err, sizeof(err)), 0);
	for (int i = 0; i < 65; i++) {
		int ret = shmtrace_span(t, name, name, 1, 2, 0);

		assert_true(ret == 0 || ret == -ENOENT);
		refused += ret == -ENOENT;
	}
	print_message("calls refused after the new ring appeared: %zu\n", refused);
	assert_true(refused <= SHMT_LOOK_RETIRED_CALLS);
	assert_int_equal(my_records(&v3), 65 - refused);
	/* the refused ones reach the reports through the ring it moved to */
	assert_int_equal(load_relaxed(&v3.h->orphaned.v), 100 + refused);
	assert_int_equal(my_records(&v1) + my_records(&v2) + my_records(&v3) +
			 load_relaxed(&v3.h->orphaned.v), 10 + 1 + 100 + 65);

	/* removed while its collector runs (a live pid there): records go on
	 * into it, for that collector to drain */
	store_relaxed(&v3.h->collector_pid.v, (uint64_t)getpid());
	assert_int_equal(shmtrace_ring_unlink(ring), 0);
	spans(t, name, 5);
	assert_int_equal(my_records(&v3), 65 - refused + 5);
	shmtrace_close(t);
	shmt_view_close(&v1);
	shmt_view_close(&v2);
	shmt_view_close(&v3);
	shmtrace_ring_unlink(ring);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_macros_attach_late),
		cmocka_unit_test(test_late_attach_to_collector_create),
		cmocka_unit_test(test_macros_reattach),
		cmocka_unit_test(test_api_open_wait),
		cmocka_unit_test(test_reattach_after_ring_made_again),
		cmocka_unit_test(test_retired_ring_moves_within_bound),
	};

	if (argc == 3 && !strcmp(argv[1], "--late-child"))
		return late_child(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "--reattach-child"))
		return reattach_macro_child(atoi(argv[2]), atoi(argv[3]));
	if (!realpath("/proc/self/exe", g_self))
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
