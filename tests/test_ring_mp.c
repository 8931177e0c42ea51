/* SPDX-License-Identifier: MIT */
/*
 * test_ring_mp.c - many processes on one ring, and its lock: producers
 * killed inside the lock (the next taker recovers it, every returned record
 * found once, none torn; killed while sequencing its own full block in
 * place, with no collector), a lock whose dead owner the kernel cannot
 * see, and a busy lock never waited on before a thread's block and the
 * full one it left waiting (or its spare) are full, flushed in order. The rest of sharing
 * a ring between processes: test_ring_mp_share.c. A holder stopped in the
 * lock is given up on at once; one asleep in it is waited for.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "mp_records.h"

static const char *g_kill_at;
static int g_kill_countdown;

static void kill_hook(const char *where)
{
	if (!strcmp(where, g_kill_at) && --g_kill_countdown <= 0)
		raise(SIGKILL);
}

/* The child of crash_inside_lock: writes n records on ring name until
 * kill_hook kills it at where (the countdown-th time it passes there),
 * flushing every flush_every records (0: never). With no collector a full
 * block is sequenced in place; a flush before the block fills copies it,
 * so the kill points of a copy are reached that way. */
static void victim(const char *name, const char *where, int countdown, uint64_t n, uint64_t flush_every)
{
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
		if (flush_every && i % flush_every == flush_every - 1)
			shmtrace_flush(ct);
	}
	shmtrace_flush(ct);
	_exit(0);	/* the hook did not fire: the test fails below */
}

/* Every string of ring name reads back, none half-appended. */
static void check_strings_readable(const char *name)
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

/* A producer dies at `where` inside the lock after writing `n` records
 * (all of whose calls returned); the next taker must recover, and every
 * one of those records must be found exactly once, none torn. */
static void crash_inside_lock(const char *where, int countdown, uint64_t flush_every, uint64_t exact)
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
	if (pid == 0)
		victim(name, where, countdown, n, flush_every);
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
	if (exact)
		assert_int_equal(found, exact);
	check_strings_readable(name);
	print_message("%s: %llu of the victim's records kept\n", where, (unsigned long long)found);
	free(seen);
	free(d.recs);
	shmtrace_ring_unlink(name);
}

/* a copy of a partly filled block (flushed every 50 records: blocks of 64) */
static void test_kill_at_flush_begin(void **s) { (void)s; crash_inside_lock("flush-begin", 3, 50, 0); }
static void test_kill_at_flush_middle(void **s) { (void)s; crash_inside_lock("flush-middle", 5, 50, 0); }
static void test_kill_at_flush_head(void **s) { (void)s; crash_inside_lock("flush-head", 4, 50, 0); }
static void test_kill_at_intern(void **s) { (void)s; crash_inside_lock("intern", 1, 0, 0); }
static void test_kill_at_name_slot(void **s) { (void)s; crash_inside_lock("name-slot", 1, 0, 0); }
/* a full block sequenced in place by its own thread (no collector): dead
 * before head (the block is full again, its records pending) and after
 * (its sequences stand, read in the block); killed at its second full
 * block of 64, every one of the 128 calls that returned is found */
static void test_kill_at_own_sequencing_state(void **s) { (void)s; crash_inside_lock("sequence-state", 2, 0, 128); }
static void test_kill_at_own_sequencing_head(void **s) { (void)s; crash_inside_lock("sequence-head", 2, 0, 128); }

/* An owner that unmapped the ring before dying is never reported dead:
 * producers must not wait forever; what they cannot flush is counted. A
 * new thread still claims its block (no lock) and stages into it; only
 * the copy of a full block waits, bounded. */
static void test_unmarked_dead_owner_is_bounded(void **state)
{
	const char *name = test_ring_name("wedge");
	struct shmtrace_stats st;
	struct shmt_loss l;
	struct ring_dump d;
	shmtrace_t *t;
	int timeouts = 0;
	uint64_t n = 3000;	/* past a block of the default ring (1024) */

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

/*
 * With no collector, a producer neither copies nor waits on a busy lock
 * while its block or the one full block it may leave waiting has room.
 * With the lock free, the call that finds its block full hands it over to
 * the thread itself and gives its records the ring's first sequences where
 * they are: head moves, the block is SEQUENCED, and the ring's slot of
 * the first sequence was never written. Then another process holds the
 * lock: the next full block is left waiting and the thread goes on in a
 * new one, every call returning 0 at once (no timeout, nothing dropped,
 * nothing sequenced); only the call that finds that one full too waits
 * (and, the lock held past the handle's 20 ms, its record is dropped and
 * counted). Once the lock is free, every staged record reaches the ring,
 * in order.
 */
static void test_busy_lock_never_waited_on_before_the_waiting_block_is_full(void **state)
{
	const char *name = test_ring_name("busy");
	const struct shmtrace_ring_config cfg = { .capacity = 16384 };
	const uint64_t block = shmt_block_records_for(cfg.capacity, SHMT_RING_MINOR);
	int held[2], release[2], go[2], status;
	struct shmtrace_stats st;
	struct shmt_view v;
	struct shmt_loss l;
	struct ring_dump d;
	shmtrace_t *t;
	uint64_t ts = 0;
	char c = 0, err[256];
	uint32_t first;
	pid_t pid;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, &cfg), 0);
	assert_int_equal(pipe(held), 0);
	assert_int_equal(pipe(release), 0);
	assert_int_equal(pipe(go), 0);
	pid = fork();
	if (pid == 0) {
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
	for (; ts < block; ts++)
		assert_int_equal(shmtrace_span(t, 1, 1, ts, ts + 1, 0), 0);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	assert_int_equal(st.head, 0);	/* all staged: nothing moves at half a block */
	first = t->cur->v.nblocks;
	for (uint32_t i = 0; i < t->cur->v.nblocks; i++)
		if (load_relaxed(&shmt_block_at(&t->cur->v, i)->state) == SHMT_BLOCK_OWNED)
			first = i;
	assert_true(first < t->cur->v.nblocks);
	/* finds the block full: sequenced, and this record staged in the next */
	assert_int_equal(shmtrace_span(t, 1, 1, ts, ts + 1, 0), 0);
	ts++;
	assert_int_equal(shmtrace_stats(t, &st), 0);
	assert_int_equal(st.head, block);
	assert_int_equal(load_relaxed(&shmt_block_at(&t->cur->v, first)->state), SHMT_BLOCK_SEQUENCED);
	assert_int_equal(load_relaxed(&shmt_block_at(&t->cur->v, first)->seq0), 0);
	assert_int_equal(load_relaxed(&t->cur->v.records[0].commit), 0);	/* never copied */

	assert_int_equal(write(go[1], "g", 1), 1);
	assert_int_equal(read(held[0], &c, 1), 1);
	for (; ts < 3 * block; ts++)
		assert_int_equal(shmtrace_span(t, 1, 1, ts, ts + 1, 0), 0);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	assert_int_equal(st.lock_timeouts, 0);
	assert_int_equal(st.dropped, 0);
	/* nothing more sequenced: one block left waiting, full (shmtrace_stats()
	 * counts it in head as a block's worth), one staging */
	assert_int_equal(st.head, 2 * block);
	/* that one full too: this call waits for the lock, and gives up */
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
	assert_int_equal(d.n, 3 * block);
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

/* A process that takes ring name's lock, says so on held, then, with
 * stop, stops itself (SIGSTOP) inside it, or else waits for a byte on
 * release (asleep in read()) and lets go. */
static pid_t hold_lock(const char *name, int held, int release, bool stop)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		struct shmt_view v;
		char err[256], c;

		if (shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)) < 0 ||
		    shmt_lock(&v, 1000000000ull) < 0)
			_exit(1);
		if (write(held, "h", 1) != 1)
			_exit(2);
		if (stop)
			raise(SIGSTOP);
		else if (read(release, &c, 1) != 1)
			_exit(3);
		shmt_unlock(&v);
		_exit(0);
	}
	return pid;
}

/* A ring whose lock a process holds, asleep in it (hold_lock()), and a
 * handle of this process on it. */
struct held_ring {
	const char *name;
	int held[2], release[2];
	pid_t holder;
	shmtrace_t *t;
};

/* Makes ring name with cfg, opens it, and returns once the holder has
 * its lock; a hang guard of 30 s is set (held_ring_end() clears it). */
static void held_ring_start(struct held_ring *h, const char *name, const struct shmtrace_ring_config *cfg)
{
	char c;

	h->name = name;
	assert_int_equal(shmtrace_ring_create(name, cfg), 0);
	assert_int_equal(pipe(h->held), 0);
	assert_int_equal(pipe(h->release), 0);
	assert_int_equal(shmtrace_open(name, &h->t), 0);
	alarm(30);
	h->holder = hold_lock(name, h->held[1], h->release[0], false);
	assert_int_equal(read(h->held[0], &c, 1), 1);
}

/* The holder gone (let go, and reaped by the caller) and the handle
 * closed (by the caller, whose test it may be): closes the pipes and
 * removes the ring. */
static void held_ring_end(struct held_ring *h)
{
	alarm(0);
	for (int i = 0; i < 2; i++) {
		close(h->held[i]);
		close(h->release[i]);
	}
	shmtrace_ring_unlink(h->name);
}

/* A thread that stages SPARE_SPANS spans through g_spare_t while the lock
 * is held (its block fills, it goes on in a spare), says so on
 * g_spare_fd[1], and exits once a byte comes on g_spare_fd[0]'s pair. */
static shmtrace_t *g_spare_t;
static int g_staged[2], g_exit[2];
static uint64_t g_spare_spans;

static void *spare_thread(void *arg)
{
	char c;

	(void)arg;
	for (uint64_t i = 0; i < g_spare_spans; i++)
		assert_int_equal(shmtrace_span(g_spare_t, 1, 1, i, i + 1, 0), 0);
	assert_int_equal(write(g_staged[1], "s", 1), 1);
	assert_int_equal(read(g_exit[0], &c, 1), 1);
	return NULL;
}

/* How many of ring name's blocks are full (handed over, not flushed). */
static uint32_t full_blocks(const char *name)
{
	struct shmt_view v;
	char err[256];
	uint32_t n = 0;

	assert_int_equal(shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	for (uint32_t i = 0; i < v.nblocks; i++)
		n += load_relaxed(&shmt_block_at(&v, i)->state) == SHMT_BLOCK_FULL;
	shmt_view_close(&v);
	return n;
}

/*
 * No collector, the lock held: two threads each fill their block and go
 * on in a spare (two blocks full). Once the lock is free, the thread that
 * exits, and then the handle's close, flush each thread's full block
 * before the block it went on in: every record in the ring, each
 * thread's in the order written, no block left full.
 */
static void test_spare_flushed_before_its_successor_at_exit_and_close(void **state)
{
	const struct shmtrace_ring_config cfg = { .capacity = 16384 };
	const uint64_t block = shmt_block_records_for(cfg.capacity, SHMT_RING_MINOR);
	struct held_ring h;
	struct ring_dump d;
	uint64_t last[2] = { 0, 0 };
	uint32_t tids[2] = { 0, 0 };
	pthread_t th;
	int status;
	char c;

	(void)state;
	g_spare_spans = block + 10;
	assert_int_equal(pipe(g_staged), 0);
	assert_int_equal(pipe(g_exit), 0);
	held_ring_start(&h, test_ring_name("spare"), &cfg);
	g_spare_t = h.t;
	assert_int_equal(pthread_create(&th, NULL, spare_thread, NULL), 0);
	assert_int_equal(read(g_staged[0], &c, 1), 1);
	for (uint64_t i = 0; i < g_spare_spans; i++)
		assert_int_equal(shmtrace_span(g_spare_t, 1, 1, i, i + 1, 0), 0);
	assert_int_equal(full_blocks(h.name), 2);

	assert_int_equal(write(h.release[1], "r", 1), 1);
	assert_int_equal(waitpid(h.holder, &status, 0), h.holder);
	assert_int_equal(write(g_exit[1], "x", 1), 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(full_blocks(h.name), 1);
	shmtrace_close(g_spare_t);
	assert_int_equal(full_blocks(h.name), 0);

	ring_dump(h.name, &d);
	assert_int_equal(d.n, 2 * g_spare_spans);
	for (size_t i = 0; i < d.n; i++) {
		int k = tids[0] == 0 || d.recs[i].tid == tids[0] ? 0 : 1;

		tids[k] = d.recs[i].tid;
		assert_true(d.recs[i].ts >= last[k]);
		last[k] = d.recs[i].ts;
	}
	assert_true(tids[1] != 0);
	free(d.recs);
	for (int i = 0; i < 2; i++) {
		close(g_staged[i]);
		close(g_exit[i]);
	}
	held_ring_end(&h);
}

/* A thread that writes one span through g_spare_t (claiming a block),
 * says so on g_staged, and exits once g_exit is closed. */
static void *one_span_then_wait(void *arg)
{
	char c;

	(void)arg;
	assert_int_equal(shmtrace_span(g_spare_t, 1, 1, 1, 2, 0), 0);
	assert_int_equal(write(g_staged[1], "s", 1), 1);
	assert_int_equal(read(g_exit[0], &c, 1), 0);
	return NULL;
}

/*
 * No collector, 8 blocks: this thread's spare stays full while it idles,
 * and six other threads hold the other blocks. A new thread finding no
 * free block flushes the full one into the ring (oldest claim first, as a
 * collector would) and claims it, rather than write under the lock for
 * want of a block while a spare nobody will flush holds one.
 */
static void test_full_spare_flushed_by_a_thread_without_a_block(void **state)
{
	const struct shmtrace_ring_config cfg = { .capacity = 4096, .blocks = 8 };
	const uint64_t block = shmt_block_records_for(cfg.capacity, SHMT_RING_MINOR);
	struct shmtrace_stats st;
	struct held_ring h;
	pthread_t th[7];
	int status;
	char c;

	(void)state;
	assert_int_equal(pipe(g_staged), 0);
	assert_int_equal(pipe(g_exit), 0);
	held_ring_start(&h, test_ring_name("sparefree"), &cfg);
	g_spare_t = h.t;
	for (uint64_t i = 0; i < block + 1; i++)
		assert_int_equal(shmtrace_span(g_spare_t, 1, 1, i, i + 1, 0), 0);
	assert_int_equal(full_blocks(h.name), 1);
	assert_int_equal(write(h.release[1], "r", 1), 1);
	assert_int_equal(waitpid(h.holder, &status, 0), h.holder);
	for (int k = 0; k < 7; k++) {
		assert_int_equal(pthread_create(&th[k], NULL, one_span_then_wait, NULL), 0);
		assert_int_equal(read(g_staged[0], &c, 1), 1);
	}
	/* the seventh found none free: the spare went into the ring */
	assert_int_equal(full_blocks(h.name), 0);
	assert_int_equal(shmtrace_stats(g_spare_t, &st), 0);
	assert_int_equal(st.head, block);
	close(g_exit[1]);
	for (int k = 0; k < 7; k++)
		assert_int_equal(pthread_join(th[k], NULL), 0);
	shmtrace_close(g_spare_t);
	close(g_exit[0]);
	for (int i = 0; i < 2; i++)
		close(g_staged[i]);
	held_ring_end(&h);
}

static int g_slices, g_release_fd;

/* At the second slice of a wait that went on (the owner not stopped),
 * the holder is let go. */
static void slice_hook(const char *where)
{
	if (!strcmp(where, "lock-slice") && ++g_slices == 2)
		assert_int_equal(write(g_release_fd, "r", 1), 1);
}

/*
 * With a lock timeout of a minute, a full block's flush waits on a holder
 * that is only asleep (descheduled, or in a system call) for as long as it
 * holds the lock, and gets it: nothing dropped. A holder stopped inside
 * the lock (SIGSTOP, a debugger) is given up on after a slice
 * (SHMT_LOCK_STOPPED_NS), not the minute: dropped and counted. (The
 * alarm is a hang guard: a wait of the whole minute fails the test.)
 */
static void test_stopped_holder_given_up_on_asleep_one_waited_for(void **state)
{
	const char *name = test_ring_name("stopped");
	const struct shmtrace_ring_config cfg = { .capacity = 16384 };
	const uint64_t block = shmt_block_records_for(cfg.capacity, SHMT_RING_MINOR);
	int held[2], release[2], status;
	struct shmtrace_stats st;
	shmtrace_t *t;
	uint64_t ts = 0;
	char c;
	pid_t pid;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, &cfg), 0);
	assert_int_equal(pipe(held), 0);
	assert_int_equal(pipe(release), 0);
	setenv("SHMTRACE_LOCK_TIMEOUT_MS", "60000", 1);
	assert_int_equal(shmtrace_open(name, &t), 0);
	unsetenv("SHMTRACE_LOCK_TIMEOUT_MS");
	alarm(30);
	/* the block claimed (under the lock), one record staged in it */
	assert_int_equal(shmtrace_span(t, 1, 1, ts, ts + 1, 0), 0);
	ts++;

	/* asleep in the lock: once block and spare are full, waited for
	 * past two slices, then had */
	pid = hold_lock(name, held[1], release[0], false);
	assert_int_equal(read(held[0], &c, 1), 1);
	for (uint64_t i = 1; i < 2 * block; i++, ts++)
		assert_int_equal(shmtrace_span(t, 1, 1, ts, ts + 1, 0), 0);
	g_release_fd = release[1];
	shmt_test_hook = slice_hook;
	assert_int_equal(shmtrace_span(t, 1, 1, ts, ts + 1, 0), 0);
	ts++;
	shmt_test_hook = NULL;
	/* released at the second slice: had once it unlocks, a slice or
	 * more later on a busy machine */
	assert_true(g_slices >= 2);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	assert_int_equal(st.lock_timeouts, 0);
	assert_int_equal(st.dropped, 0);

	/* stopped in the lock: given up on, the record counted */
	pid = hold_lock(name, held[1], release[0], true);
	assert_int_equal(read(held[0], &c, 1), 1);
	assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
	assert_true(WIFSTOPPED(status));
	/* the record of the call that waited is staged: block and a new
	 * spare full again */
	for (uint64_t i = 1; i < 2 * block; i++, ts++)
		assert_int_equal(shmtrace_span(t, 1, 1, ts, ts + 1, 0), 0);
	assert_int_equal(shmtrace_span(t, 1, 1, ts, ts + 1, 0), -ETIMEDOUT);
	alarm(0);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	assert_int_equal(st.lock_timeouts, 1);
	assert_int_equal(st.dropped, 1);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	shmtrace_close(t);
	close(held[0]);
	close(held[1]);
	close(release[0]);
	close(release[1]);
	shmtrace_ring_unlink(name);
}

/*
 * A span call's short wait timing out (block and spare full, the lock
 * held by a process asleep in it) makes the handle only try the lock for
 * waits as short, not for longer ones: shmtrace_flush() after it still
 * waits (slices go by), gets the lock once the holder lets go, and moves
 * every staged record.
 */
static void test_short_timeout_leaves_long_waits_waiting(void **state)
{
	const struct shmtrace_ring_config cfg = { .capacity = 16384 };
	const uint64_t block = shmt_block_records_for(cfg.capacity, SHMT_RING_MINOR);
	struct shmtrace_stats st;
	struct held_ring h;
	uint64_t ts = 0;
	int status;

	(void)state;
	held_ring_start(&h, test_ring_name("shortwait"), &cfg);
	for (; ts < 2 * block; ts++)
		assert_int_equal(shmtrace_span(h.t, 1, 1, ts, ts + 1, 0), 0);
	assert_int_equal(shmtrace_span(h.t, 1, 1, ts, ts + 1, 0), -ETIMEDOUT);

	g_slices = 0;
	g_release_fd = h.release[1];
	shmt_test_hook = slice_hook;
	/* the flush's long wait, however slowly the holder lets go */
	h.t->lock_timeout_ns = 60ull * 1000 * 1000 * 1000;
	assert_int_equal(shmtrace_flush(h.t), 0);
	shmt_test_hook = NULL;
	assert_true(g_slices >= 2);
	assert_int_equal(waitpid(h.holder, &status, 0), h.holder);
	assert_int_equal(shmtrace_stats(h.t, &st), 0);
	assert_int_equal(st.head, 2 * block);
	assert_int_equal(st.lock_timeouts, 1);
	shmtrace_close(h.t);
	held_ring_end(&h);
}

/* Counts the slices of a wait that went on (the owner not stopped). */
static void count_slices_hook(const char *where)
{
	if (!strcmp(where, "lock-slice"))
		g_slices++;
}

/*
 * An overwrite ring (a flight recorder) gives a thread no spare, but the
 * same short bound: with its block full and the lock held by a process
 * asleep in it, a span call waits SHMT_FULL_WAIT_NS, within the first
 * slice of a wait (a bound of the lock timeout's 100 ms would go through
 * about fifty), then drops its record and counts it to the lock. Once the
 * holder lets go, the staged block moves whole.
 */
static void test_overwrite_ring_span_call_waits_the_short_bound(void **state)
{
	const struct shmtrace_ring_config cfg = { .capacity = 16384, .mode = SHMTRACE_MODE_OVERWRITE };
	const uint64_t block = shmt_block_records_for(cfg.capacity, SHMT_RING_MINOR);
	struct shmtrace_stats st;
	struct held_ring h;
	struct shmt_loss l;
	uint64_t ts = 0;
	int status;

	(void)state;
	held_ring_start(&h, test_ring_name("owshort"), &cfg);
	for (; ts < block; ts++)
		assert_int_equal(shmtrace_span(h.t, 1, 1, ts, ts + 1, 0), 0);
	g_slices = 0;
	shmt_test_hook = count_slices_hook;
	assert_int_equal(shmtrace_span(h.t, 1, 1, ts, ts + 1, 0), -ETIMEDOUT);
	shmt_test_hook = NULL;
	assert_int_equal(g_slices, 0);
	ring_loss(h.name, &l);
	assert_int_equal(l.lock_dropped, 1);

	assert_int_equal(write(h.release[1], "r", 1), 1);
	assert_int_equal(waitpid(h.holder, &status, 0), h.holder);
	assert_int_equal(shmtrace_flush(h.t), 0);
	assert_int_equal(shmtrace_stats(h.t, &st), 0);
	assert_int_equal(st.head, block);
	shmtrace_close(h.t);
	held_ring_end(&h);
}

/* SHMTRACE_LOCK_TIMEOUT_MS: whole milliseconds up to a minute; garbage,
 * a sign, a unit or a number whose nanoseconds overflow keep the default
 * (an overflow used to wrap to a timeout of almost nothing). */
static void test_lock_timeout_from_env(void **state)
{
	static const struct { const char *v; uint64_t ns; } cases[] = {
		{ "20", 20000000ull }, { "0", 0 }, { "60000", 60000000000ull },
		{ "60001", 100000000ull }, { "-5", 100000000ull }, { "20ms", 100000000ull },
		{ "", 100000000ull }, { " 7", 100000000ull },
		{ "18446744073709", 100000000ull }, { "99999999999999999999", 100000000ull },
	};
	const char *name = test_ring_name("lockenv");
	struct shmtrace_ring_config c = { .capacity = 256 };
	shmtrace_t *t;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		setenv("SHMTRACE_LOCK_TIMEOUT_MS", cases[i].v, 1);
		assert_int_equal(shmtrace_open(name, &t), 0);
		assert_int_equal(t->lock_timeout_ns, cases[i].ns);
		shmtrace_close(t);
	}
	unsetenv("SHMTRACE_LOCK_TIMEOUT_MS");
	shmtrace_ring_unlink(name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kill_at_flush_begin),
		cmocka_unit_test(test_kill_at_flush_middle),
		cmocka_unit_test(test_kill_at_flush_head),
		cmocka_unit_test(test_kill_at_intern),
		cmocka_unit_test(test_kill_at_name_slot),
		cmocka_unit_test(test_kill_at_own_sequencing_state),
		cmocka_unit_test(test_kill_at_own_sequencing_head),
		cmocka_unit_test(test_unmarked_dead_owner_is_bounded),
		cmocka_unit_test(test_busy_lock_never_waited_on_before_the_waiting_block_is_full),
		cmocka_unit_test(test_spare_flushed_before_its_successor_at_exit_and_close),
		cmocka_unit_test(test_full_spare_flushed_by_a_thread_without_a_block),
		cmocka_unit_test(test_stopped_holder_given_up_on_asleep_one_waited_for),
		cmocka_unit_test(test_short_timeout_leaves_long_waits_waiting),
		cmocka_unit_test(test_overwrite_ring_span_call_waits_the_short_bound),
		cmocka_unit_test(test_lock_timeout_from_env),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
