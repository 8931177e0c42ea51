/* SPDX-License-Identifier: MIT */
/*
 * test_ring_mp.c - many processes on one ring: exact accounting, producers
 * killed inside the lock, a lock whose dead owner the kernel cannot see,
 * fork, and readers racing overwrites.
 */
#include <errno.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "helpers.h"

/* A record's fields are derived from its (pid, i) so a reader can tell a
 * torn or mixed record from a whole one. */
static void fill(uint64_t i, uint64_t *ts, uint64_t *dur, uint64_t *flow)
{
	*ts = i;
	*dur = i ^ 0x5555555555ull;
	*flow = i * 3 + 1;
}

static bool whole(const struct shmt_record *r)
{
	uint64_t ts, dur, flow;

	fill(r->ts, &ts, &dur, &flow);
	return r->dur == dur && r->flow == flow && r->pid == r->tid && r->name == 1 && r->cat == 2;
}

static void produce(const char *name, uint64_t from, uint64_t n)
{
	shmtrace_t *t;
	uint64_t ts, dur, flow;

	if (shmtrace_open(name, &t) < 0)
		_exit(3);
	for (uint64_t i = from; i < from + n; i++) {
		fill(i, &ts, &dur, &flow);
		shmtrace_span(t, 2, 1, ts, ts + dur, flow);
	}
	shmtrace_close(t);
}

struct drainer {
	const char *name;
	volatile int stop;
	uint64_t got, bad;
	uint8_t *seen;		/* per producer, per i */
	uint32_t *pids;
	int nproc;
	uint64_t per;
};

static void note(struct drainer *d, const struct shmt_record *r)
{
	if (!whole(r) || r->ts >= d->per) {
		d->bad++;
		return;
	}
	for (int p = 0; p < d->nproc; p++) {
		if (d->pids[p] != r->pid)
			continue;
		d->seen[(uint64_t)p * d->per + r->ts]++;
		d->got++;
		return;
	}
	d->bad++;
}

/* A minimal collector: reads up to head, then releases the tail. */
static void *drain_thread(void *arg)
{
	struct drainer *d = arg;
	struct shmt_view v;
	struct shmt_record r;
	char err[256];
	uint64_t pos = 0;
	bool last = false;

	assert_int_equal(shmt_view_open(d->name, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	for (;;) {
		uint64_t head = shmt_ring_head(&v);

		for (; pos < head; pos++) {
			if (shmt_ring_read(&v, pos, &r) == 0)
				note(d, &r);
			else
				d->bad++;
		}
		store_release(&v.h->tail.v, pos);
		if (last)
			break;
		if (__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE))
			last = true;	/* one more pass after the producers are gone */
		else
			sched_yield();
	}
	shmt_view_close(&v);
	return NULL;
}

static void test_many_processes_exact_accounting(void **state)
{
	const char *name = test_ring_name("mp");
	enum { NPROC = 4, PER = 200000 };
	struct shmtrace_ring_config c = { .capacity = 1 << 14 };
	uint32_t pids[NPROC];
	struct drainer d = { .name = name, .nproc = NPROC, .per = PER, .pids = pids };
	struct shmtrace_stats st;
	pthread_t th;
	shmtrace_t *t;
	uint64_t dups = 0, missing = 0;
	int go[2];

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	d.seen = calloc((size_t)NPROC * PER, 1);
	assert_non_null(d.seen);
	/* the children wait on a pipe until the drainer knows their pids */
	assert_int_equal(pipe(go), 0);
	for (int p = 0; p < NPROC; p++) {
		pid_t pid = fork();

		if (pid == 0) {
			char c;

			close(go[1]);
			if (read(go[0], &c, 1) != 0)
				_exit(5);
			produce(name, 0, PER);
			_exit(0);
		}
		pids[p] = (uint32_t)pid;
	}
	close(go[0]);
	assert_int_equal(pthread_create(&th, NULL, drain_thread, &d), 0);
	close(go[1]);	/* EOF: go */
	for (int p = 0; p < NPROC; p++) {
		int status;

		assert_int_equal(waitpid((pid_t)pids[p], &status, 0), (pid_t)pids[p]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	__atomic_store_n(&d.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);

	assert_int_equal(shmtrace_open(name, &t), 0);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	shmtrace_close(t);
	for (uint64_t i = 0; i < (uint64_t)NPROC * PER; i++) {
		dups += d.seen[i] > 1;
		missing += d.seen[i] == 0;
	}
	print_message("written %d, drained %llu, dropped %llu\n", NPROC * PER,
		      (unsigned long long)d.got, (unsigned long long)st.dropped);
	assert_int_equal(d.bad, 0);
	assert_int_equal(dups, 0);
	/* published + dropped = written, and what is missing is what was dropped */
	assert_int_equal(d.got + st.dropped, (uint64_t)NPROC * PER);
	assert_int_equal(missing, st.dropped);
	free(d.seen);
	shmtrace_ring_unlink(name);
}

static const char *g_kill_at;
static int g_kill_countdown;

static void kill_hook(const char *where)
{
	if (!strcmp(where, g_kill_at) && --g_kill_countdown <= 0)
		raise(SIGKILL);
}

/* A producer dies at `where` inside the lock after writing `n` records
 * (all of whose calls returned); the next taker must recover, and every
 * one of those records must be found exactly once, none torn. */
static void crash_inside_lock(const char *where, int countdown)
{
	const char *name = test_ring_name("crash");
	struct shmtrace_ring_config c = { .capacity = 1 << 12 };
	struct ring_dump d;
	shmtrace_t *t;
	uint8_t *seen;
	uint64_t n = 1000, recoveries, found = 0;
	int status;
	pid_t pid;

	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	pid = fork();
	if (pid == 0) {
		shmtrace_t *ct;
		uint64_t ts, dur, flow;

		if (shmtrace_open(name, &ct) < 0)
			_exit(3);
		shmtrace_set_thread_name(ct, "victim");
		g_kill_at = where;
		g_kill_countdown = countdown;
		shmt_test_hook = kill_hook;
		if (!strcmp(where, "intern"))
			shmtrace_intern(ct, "half-appended");
		for (uint64_t i = 0; i < n; i++) {
			fill(i, &ts, &dur, &flow);
			shmtrace_span(ct, 2, 1, ts, ts + dur, flow);
		}
		shmtrace_flush(ct);
		_exit(0);	/* the hook did not fire: the test fails below */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	/* post-mortem first, with the lock still held by the dead */
	ring_dump(name, &d);
	assert_int_equal(d.torn, 0);
	free(d.recs);

	/* the next producer gets the lock back, within the lock timeout */
	assert_int_equal(shmtrace_open(name, &t), 0);
	recoveries = t->cur->v.h->lock_recoveries;
	assert_true(shmtrace_intern(t, "half-appended") > 0);
	for (int i = 0; i < 200; i++)
		assert_int_equal(shmtrace_span(t, 9, 9, 1, 2, 0), 0);
	assert_int_equal(shmtrace_flush(t), 0);
	assert_int_equal(t->cur->v.h->lock_recoveries, recoveries + 1);
	assert_int_equal(t->cur->v.h->journal.active, 0);
	shmtrace_close(t);

	ring_dump(name, &d);
	assert_int_equal(d.torn, 0);
	seen = calloc(n, 1);
	for (size_t i = 0; i < d.n; i++) {
		if (d.recs[i].pid != (uint32_t)pid)
			continue;
		assert_true(whole(&d.recs[i]));
		assert_true(d.recs[i].ts < n);
		assert_int_equal(seen[d.recs[i].ts]++, 0);	/* never twice */
		found++;
	}
	/* every call that returned before the kill left its record */
	for (uint64_t i = 0; i < found; i++)
		assert_int_equal(seen[i], 1);
	assert_true(found >= (strcmp(where, "intern") && strcmp(where, "name-slot") ? 64u : 0u));
	{
		struct shmt_view v;
		char err[256], buf[64];
		uint32_t id;

		assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
		id = shmtrace_intern(NULL, "x");	/* NULL handle: 0 */
		assert_int_equal(id, 0);
		for (uint32_t i = 1; i < shmt_ring_nstrings(&v); i++)
			assert_true(shmt_ring_string(&v, i, buf, sizeof(buf)) > 0);
		shmt_view_close(&v);
	}
	print_message("%s: %llu of the victim's records kept\n", where, (unsigned long long)found);
	free(seen);
	free(d.recs);
	shmtrace_ring_unlink(name);
}

static void test_kill_at_flush_begin(void **s) { (void)s; crash_inside_lock("flush-begin", 3); }
static void test_kill_at_flush_middle(void **s) { (void)s; crash_inside_lock("flush-middle", 5); }
static void test_kill_at_flush_head(void **s) { (void)s; crash_inside_lock("flush-head", 4); }
static void test_kill_at_intern(void **s) { (void)s; crash_inside_lock("intern", 1); }
static void test_kill_at_name_slot(void **s) { (void)s; crash_inside_lock("name-slot", 1); }

/* An owner that unmapped the ring before dying is never reported dead:
 * producers must not wait forever; what they cannot flush is counted. */
static void test_unmarked_dead_owner_is_bounded(void **state)
{
	const char *name = test_ring_name("wedge");
	struct shmtrace_stats st;
	struct shmt_loss l;
	struct ring_dump d;
	shmtrace_t *t;
	int timeouts = 0;
	uint64_t n = 300;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	ring_lock_by_unseen_dead_owner(name);

	assert_int_equal(shmtrace_open(name, &t), 0);
	t->lock_timeout_ns = 20ull * 1000 * 1000;
	for (uint64_t i = 0; i < n; i++) {
		int ret = shmtrace_span(t, 1, 1, i, i + 1, 0);

		assert_true(ret == 0 || ret == -ETIMEDOUT || ret == -EBUSY);
		timeouts += ret != 0;
	}
	assert_int_equal(shmtrace_stats(t, &st), 0);
	assert_true(timeouts > 0);
	assert_true(st.lock_timeouts > 0);
	ring_dump(name, &d);
	ring_loss(name, &l);
	/* staged + lost to lock timeouts = written: nothing vanished without
	 * a count, and nothing counted as ring full (the ring never was); the
	 * caller's stats sum every cause */
	assert_int_equal(l.dropped, 0);
	assert_true(l.lock_dropped > 0);
	assert_int_equal(st.dropped, l.lock_dropped);
	assert_int_equal(d.n + l.lock_dropped, n);
	figure_acct("lock held by an owner the kernel cannot see dead", 1, n, d.n, l.lock_dropped,
		    d.torn, n - d.n - l.lock_dropped, "bounded wait, then drop and count");
	free(d.recs);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

static void test_fork_child_records_own_pid(void **state)
{
	const char *name = test_ring_name("fork");
	struct ring_dump d;
	shmtrace_t *t;
	int status;
	pid_t pid;
	size_t mine = 0, child = 0;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	assert_int_equal(shmtrace_span(t, 1, 1, 1, 2, 0), 0);
	pid = fork();
	if (pid == 0) {
		for (int i = 0; i < 100; i++)
			shmtrace_span(t, 1, 1, 10, 20, 0);
		shmtrace_close(t);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(shmtrace_span(t, 1, 1, 3, 4, 0), 0);
	ring_dump(name, &d);
	for (size_t i = 0; i < d.n; i++) {
		mine += d.recs[i].pid == (uint32_t)getpid();
		child += d.recs[i].pid == (uint32_t)pid && d.recs[i].tid == (uint32_t)pid;
	}
	assert_int_equal(mine, 2);
	assert_int_equal(child, 100);
	free(d.recs);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

/* Two producers overwrite a small ring while a reader reads it without the
 * lock: every record the reader accepts is whole. */
static void test_overwrite_readers_never_see_torn(void **state)
{
	const char *name = test_ring_name("owr");
	struct shmtrace_ring_config c = { .capacity = 256, .mode = SHMTRACE_MODE_OVERWRITE };
	struct shmt_record r;
	struct shmt_view v;
	char err[256];
	uint64_t accepted = 0, rejected = 0;
	pid_t pids[2];

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	for (int p = 0; p < 2; p++) {
		pids[p] = fork();
		if (pids[p] == 0) {
			produce(name, 0, 300000);
			_exit(0);
		}
	}
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
	while (pids[0] || pids[1]) {
		uint64_t head = shmt_ring_head(&v);
		int status;

		for (uint64_t s = head > 256 ? head - 256 : 0; s < head; s++) {
			if (shmt_ring_read(&v, s, &r) == 0) {
				assert_true(whole(&r));
				accepted++;
			} else {
				rejected++;
			}
		}
		for (int p = 0; p < 2; p++)
			if (pids[p] && waitpid(pids[p], &status, WNOHANG) == pids[p])
				pids[p] = 0;
	}
	print_message("accepted %llu, rejected %llu while overwriting\n",
		      (unsigned long long)accepted, (unsigned long long)rejected);
	assert_true(accepted > 0);
	shmt_view_close(&v);
	shmtrace_ring_unlink(name);
}

/* A producer in another pid namespace is refused: its pids would collide
 * with the ring's (root only: unshare needs CAP_SYS_ADMIN). */
static void test_other_pid_namespace_refused(void **state)
{
	const char *name = test_ring_name("pidns");
	int status;
	pid_t pid;

	(void)state;
	if (geteuid() != 0) {
		print_message("not root; skipped\n");
		skip();
	}
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	pid = fork();
	if (pid == 0) {
		pid_t inner;

		if (unshare(CLONE_NEWPID) < 0)
			_exit(77);
		inner = fork();
		if (inner == 0) {
			shmtrace_t *t;

			if (shmtrace_open(name, &t) != -EXDEV)
				_exit(1);
			setenv("SHMTRACE_ALLOW_PIDNS", "1", 1);
			if (shmtrace_open(name, &t) != 0)
				_exit(2);
			shmtrace_close(t);
			_exit(0);
		}
		if (waitpid(inner, &status, 0) != inner)
			_exit(3);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 4);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77) {
		print_message("unshare(CLONE_NEWPID) not permitted here; skipped\n");
		shmtrace_ring_unlink(name);
		skip();
	}
	assert_int_equal(WEXITSTATUS(status), 0);
	shmtrace_ring_unlink(name);
}

/*
 * A producer never waits on a busy lock while its block has
 * room. A thread's block in a ring of 16384 records holds 256 (ring format
 * 1.4: 1/64 of the capacity); it tries the lock once 128 are staged and
 * waits only when all 256 are. With the lock
 * free, the 129th record finds 128 staged and moves them. Then another
 * process holds the lock: 255 more calls each return 0 at once (no timeout,
 * nothing dropped, nothing moved), and only the next, with the block full,
 * waits (and, the lock held past the handle's 20 ms, is dropped and
 * counted). Once the lock is free, every staged record reaches the ring.
 */
static void test_busy_lock_never_waited_on_below_full(void **state)
{
	const char *name = test_ring_name("busy");
	const struct shmtrace_ring_config cfg = { .capacity = 16384 };
	const uint64_t block = shmt_block_records_for(cfg.capacity), half = block / 2;
	int held[2], release[2], go[2], status;
	struct shmtrace_stats st;
	struct shmt_loss l;
	struct ring_dump d;
	shmtrace_t *t;
	uint64_t ts = 0;
	char c = 0;
	pid_t pid;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, &cfg), 0);
	assert_int_equal(pipe(held), 0);
	assert_int_equal(pipe(release), 0);
	assert_int_equal(pipe(go), 0);
	pid = fork();
	if (pid == 0) {
		struct shmt_view v;
		char err[256];

		/* EOF on release if the parent dies: its ends only */
		close(held[0]);
		close(release[1]);
		close(go[1]);
		if (read(go[0], &c, 1) != 1 ||
		    shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)) < 0 ||
		    shmt_lock(&v, 1000000000ull) < 0)
			_exit(1);
		if (write(held[1], "h", 1) != 1 || read(release[0], &c, 1) != 1)
			_exit(2);
		shmt_unlock(&v);
		_exit(0);
	}
	close(held[1]);
	close(release[0]);
	setenv("SHMTRACE_LOCK_TIMEOUT_MS", "20", 1);
	assert_int_equal(shmtrace_open(name, &t), 0);
	unsetenv("SHMTRACE_LOCK_TIMEOUT_MS");
	for (; ts < half + 1; ts++)
		assert_int_equal(shmtrace_span(t, 1, 1, ts, ts + 1, 0), 0);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	assert_int_equal(st.head, half);	/* the 129th moved the first 128 */

	assert_int_equal(write(go[1], "g", 1), 1);
	assert_int_equal(read(held[0], &c, 1), 1);
	for (; ts < half + block; ts++)
		assert_int_equal(shmtrace_span(t, 1, 1, ts, ts + 1, 0), 0);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	assert_int_equal(st.lock_timeouts, 0);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(st.head, half);	/* all staged, none moved */
	/* the block is full: this one waits for the lock, and gives up */
	assert_int_equal(shmtrace_span(t, 1, 1, 99999, 100000, 0), -ETIMEDOUT);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	assert_int_equal(st.lock_timeouts, 1);
	/* lost to the lock, not to a full ring: counted once, there (the
	 * caller's stats sum every cause) */
	assert_int_equal(st.dropped, 1);
	ring_loss(name, &l);
	assert_int_equal(l.lock_dropped, 1);
	assert_int_equal(l.dropped, 0);

	assert_int_equal(write(release[1], "r", 1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(shmtrace_flush(t), 0);
	ring_dump(name, &d);
	assert_int_equal(d.n, half + block);
	for (size_t i = 0; i < d.n; i++)
		assert_int_equal(d.recs[i].ts, i);
	free(d.recs);
	shmtrace_close(t);
	close(held[0]);
	close(release[1]);
	close(go[0]);
	close(go[1]);
	shmtrace_ring_unlink(name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_processes_exact_accounting),
		cmocka_unit_test(test_kill_at_flush_begin),
		cmocka_unit_test(test_kill_at_flush_middle),
		cmocka_unit_test(test_kill_at_flush_head),
		cmocka_unit_test(test_kill_at_intern),
		cmocka_unit_test(test_kill_at_name_slot),
		cmocka_unit_test(test_unmarked_dead_owner_is_bounded),
		cmocka_unit_test(test_fork_child_records_own_pid),
		cmocka_unit_test(test_overwrite_readers_never_see_torn),
		cmocka_unit_test(test_other_pid_namespace_refused),
		cmocka_unit_test(test_busy_lock_never_waited_on_below_full),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
