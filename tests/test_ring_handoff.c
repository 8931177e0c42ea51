/* SPDX-License-Identifier: MIT */
/*
 * test_ring_handoff.c - full blocks handed to the collector instead of
 * copied into the ring (format 1.10): every record captured once and in
 * its thread's order; a thread's open spans moving with it from block to
 * block; a producer killed at each step of a hand-over losing nothing and
 * leaving no block the collector cannot free; copying as before when no
 * block is free or the ring is older, a thread's own handed-over blocks
 * first and no one else's; a full block the ring has no room for dropped
 * at once, without the lock; the collector's idle flush listing blocks
 * without the lock and flushing each in the life listed; since format
 * 2.0, full blocks read in place
 * by the collector, copied into no slot, kept for a snapshot as slots
 * would be, a collector killed while it sequences one losing and
 * doubling nothing, and a block a peer forged full with counts no
 * producer writes freed without stopping the real ones behind it.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "collector_run.h"
#include "drain.h"
#include "snapshot.h"
#include "snapshot_read.h"

#define CAP 4096u	/* blocks of 64 records */

static const char *g_kill_at;

static void kill_hook(const char *where)
{
	if (g_kill_at && !strcmp(where, g_kill_at))
		raise(SIGKILL);
}

/* Makes ring name (capacity CAP, nblocks blocks: 0 the default). */
static void make_ring(const char *name, uint32_t nblocks)
{
	struct shmtrace_ring_config c = { .capacity = CAP, .blocks = nblocks };

	shmtrace_ring_unlink(name);
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
}

/* Says, as a collector does, that one drains the ring: producers then
 * hand full blocks over; nobody frees them until a collector runs. */
static void say_collector(const char *name, uint64_t pid)
{
	struct shmt_view v;

	ring_view_rw(name, &v);
	store_relaxed(&v.h->collector_pid.v, pid);
	shmt_view_close(&v);
}

/* The ring's header counter at offset off. */
static uint64_t header_word(const char *name, size_t off)
{
	struct shmt_view v;
	uint64_t w;

	ring_view_rw(name, &v);
	w = load_relaxed((uint64_t *)((char *)v.h + off));
	shmt_view_close(&v);
	return w;
}

/* Blocks of ring name in each state kind (FREE, OWNED, FULL, CLAIMING,
 * SEQUENCED; any other counts as FREE). */
static void block_states(const char *name, uint32_t n[5])
{
	struct shmt_view v;

	ring_view_rw(name, &v);
	memset(n, 0, 5 * sizeof(*n));
	for (uint32_t i = 0; i < v.nblocks; i++) {
		uint32_t k = SHMT_BLOCK_KIND(load_relaxed(&shmt_block_at(&v, i)->state));

		n[k < 5 ? k : 0]++;
	}
	shmt_view_close(&v);
}

/* Ring name of 64 blocks, a collector said to drain it, and a producer
 * *t of this thread that handed one block over full and holds 10
 * records in the next; *v a read-write view of the ring. */
static void one_full_ten_staged(const char *ring, shmtrace_t **t, struct shmt_view *v)
{
	make_ring(ring, 64);
	say_collector(ring, 1);
	assert_int_equal(shmtrace_open(ring, t), 0);
	for (uint32_t i = 0; i < 64 + 10; i++)
		assert_int_equal(shmtrace_span(*t, 0, 0, 1000 + i, 1001 + i, 0), 0);
	ring_view_rw(ring, v);
}

/*
 * One producer writing 100 blocks' worth while the collector drains: it
 * hands each full block over (claims counted in the header), the capture
 * has every record once, in the order the thread wrote them, and once the
 * collector stopped no block is left full.
 */
static void test_full_blocks_handed_over_in_order(void **state)
{
	const char *ring = test_ring_name("handoff");
	const char *out = "/tmp/shmt-handoff.cap";
	const uint64_t n = 6400;
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	struct tally t = { 0 };
	uint32_t st[5];
	uint64_t last = 0;
	char err[256];
	pid_t col;

	(void)state;
	make_ring(ring, 0);
	col = start_collector(ring, out, NULL, 0);
	/* the subject is order: a collector slowed by a sanitizer may hold
	 * the lock past a span call's 2 ms, which drops (test_ring_mp.c
	 * covers that); the producer waits for it here */
	setenv("SHMTRACE_LOCK_TIMEOUT_MS", "60000", 1);
	run_producers(ring, &t, 1, n);
	unsetenv("SHMTRACE_LOCK_TIMEOUT_MS");
	wait_producers(&t);
	assert_clean_exit(stop(col, SIGTERM));
	/* a claim per block: the first, and one at each hand-over */
	assert_true(header_word(ring, offsetof(struct shmt_header, claim_seq)) >= n / 64);
	assert_int_equal(header_word(ring, offsetof(struct shmt_header, full_blocks)), 0);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_FULL] + st[SHMT_BLOCK_CLAIMING] + st[SHMT_BLOCK_OWNED], 0);
	read_capture(out, &t);
	check_exactly_once(&t);
	assert_int_equal(t.records, n);
	assert_int_equal(t.dropped, 0);
	/* in sequence order, the thread's records are in the order written */
	assert_int_equal(shmt_cap_open(out, &r, err, sizeof(err)), 0);
	while (shmt_cap_next(r, &f, err, sizeof(err)) == 1) {
		if (f.type != SHMT_CAP_RECORDS)
			continue;
		for (size_t i = 0; i < f.records.n; i++) {
			assert_true(f.records.v[i].ts >= last);
			last = f.records.v[i].ts;
		}
	}
	shmt_cap_close(r);
	figure_row(true, "full blocks handed over to a draining collector", n / 64, n, n, 0, 0, 0,
		   "every record once, in its thread's order");
	tally_free(&t);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/* Open spans of ring name as a post-mortem reader finds them. */
static uint32_t open_spans(const char *name)
{
	struct shmt_record open[SHMT_OPEN_MAX];
	struct shmt_view v;
	uint32_t n = 0;

	ring_view_rw(name, &v);
	for (uint32_t i = 0; i < v.nblocks; i++)
		n += shmt_block_open_spans(&v, i, open);
	shmt_view_close(&v);
	return n;
}

/*
 * A thread's stack of open spans goes with it from block to block: a
 * span begun, then many blocks' worth of records, then ended, leaves no
 * open span behind; one still open when its thread is killed is found
 * once.
 */
static void test_open_span_moves_with_its_thread(void **state)
{
	const char *ring = test_ring_name("handoffopen");
	int status;
	pid_t pid;

	(void)state;
	for (int killed = 0; killed < 2; killed++) {
		make_ring(ring, 0);
		say_collector(ring, 1);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct shmtrace_open_span sp;
			shmtrace_t *t;

			if (shmtrace_open(ring, &t) < 0)
				_exit(3);
			shmtrace_begin(t, &sp, 1, 1, 0);
			for (int i = 0; i < 5 * 64; i++)
				shmtrace_span(t, 2, 2, (uint64_t)i, (uint64_t)i + 1, 0);
			if (killed)
				raise(SIGKILL);
			shmtrace_end(&sp);
			_exit(0);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(header_word(ring, offsetof(struct shmt_header, full_blocks)) >= 4);
		assert_int_equal(open_spans(ring), killed ? 1 : 0);
		shmtrace_ring_unlink(ring);
	}
}

/*
 * A producer killed at each step of a hand-over, the collector started
 * after: every record whose call returned is captured once, none torn,
 * and a block the dead thread was claiming is freed again.
 */
static void killed_in_handoff(const char *where)
{
	const char *ring = test_ring_name("handoffkill");
	const char *out = "/tmp/shmt-handoffkill.cap";
	const uint64_t n = 1000;
	struct ring_dump d;
	struct tally t = { 0 };
	uint32_t st[5];
	int status;
	pid_t col;

	make_ring(ring, 0);
	say_collector(ring, 1);
	tally_init(&t, 1, n);
	t.pids[0] = (uint32_t)fork();
	assert_true((pid_t)t.pids[0] >= 0);
	if (t.pids[0] == 0) {
		g_kill_at = where;
		shmt_test_hook = kill_hook;
		produce(ring, n);
	}
	assert_int_equal(waitpid((pid_t)t.pids[0], &status, 0), (pid_t)t.pids[0]);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* post-mortem: the 64 records of the first block at least, none torn */
	ring_dump(ring, &d);
	assert_int_equal(d.torn, 0);
	assert_true(d.n >= 64);
	free(d.recs);
	block_states(ring, st);
	/* the block it was taking: claimed, never owned */
	assert_int_equal(st[SHMT_BLOCK_CLAIMING], 1);
	say_collector(ring, 0);
	col = start_collector(ring, out, NULL, 0);
	assert_clean_exit(stop(col, SIGTERM));
	read_capture(out, &t);
	assert_int_equal(t.dup_seq, 0);
	assert_int_equal(t.bad, 0);
	assert_true(t.records >= 64);
	for (uint64_t i = 0; i < t.records; i++)
		assert_int_equal(t.seen[i], 1);	/* a prefix: the calls that returned */
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_OWNED] + st[SHMT_BLOCK_FULL] + st[SHMT_BLOCK_CLAIMING], 0);
	figure_row(false, where[8] == 'c' ? "producer killed claiming its next block" :
		   "producer killed handing its block over", 1, t.records, t.records, 0, 0, 0,
		   "captured once, none torn; the block freed");
	tally_free(&t);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/*
 * With no collector, a producer killed after handing its first full block
 * over to itself, before it had the lock to sequence it: the block stays
 * full, its 64 records pending for a post-mortem read and for the next
 * collector, which captures each once and frees every block the dead
 * thread held.
 */
static void test_killed_between_its_own_hand_over_and_the_lock(void **state)
{
	const char *ring = test_ring_name("selfkill");
	const char *out = "/tmp/shmt-selfkill.cap";
	struct ring_dump d;
	struct tally t = { 0 };
	uint32_t st[5];
	int status;
	pid_t col;

	(void)state;
	make_ring(ring, 0);
	tally_init(&t, 1, 1000);
	t.pids[0] = (uint32_t)fork();
	assert_true((pid_t)t.pids[0] >= 0);
	if (t.pids[0] == 0) {
		g_kill_at = "self-handed";
		shmt_test_hook = kill_hook;
		produce(ring, 1000);
	}
	assert_int_equal(waitpid((pid_t)t.pids[0], &status, 0), (pid_t)t.pids[0]);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_FULL], 1);
	assert_int_equal(st[SHMT_BLOCK_SEQUENCED], 0);
	ring_dump(ring, &d);
	assert_int_equal(d.torn, 0);
	assert_int_equal(d.n, 64);
	free(d.recs);
	col = start_collector(ring, out, NULL, 0);
	assert_clean_exit(stop(col, SIGTERM));
	read_capture(out, &t);
	assert_int_equal(t.dup_seq, 0);
	assert_int_equal(t.bad, 0);
	assert_int_equal(t.records, 64);
	for (uint64_t i = 0; i < 64; i++)
		assert_int_equal(t.seen[i], 1);	/* the calls that returned */
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_OWNED] + st[SHMT_BLOCK_FULL] + st[SHMT_BLOCK_CLAIMING], 0);
	tally_free(&t);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

static void test_killed_claiming(void **s) { (void)s; killed_in_handoff("handoff-claimed"); }
static void test_killed_handing_over(void **s) { (void)s; killed_in_handoff("handoff-full"); }

/* A drain session in this process on ring, into out: producers hand
 * their full blocks over to it. */
static struct drain *drain_here(const char *ring, const char *out)
{
	struct drain_opts o = { .ring = ring, .output = out, .poll_ns = 1000000 };
	struct drain *d = drain_new();

	assert_non_null(d);
	assert_int_equal(drain_open(d, &o), 0);
	return d;
}

/* A producer process writing n records (tally's producer 0), waited for. */
static void produce_all(const char *ring, struct tally *t, uint64_t n)
{
	pid_t p;

	tally_init(t, 1, n);
	p = fork();
	assert_true(p >= 0);
	if (p == 0)
		produce(ring, n);
	t->pids[0] = (uint32_t)p;
	wait_producers(t);
}

/* Records of ring name written into its slots (a commit word set). */
static uint64_t slots_written(const char *name)
{
	struct shmt_view v;
	uint64_t n = 0;

	ring_view_rw(name, &v);
	for (uint32_t i = 0; i < v.capacity; i++)
		n += load_relaxed(&v.records[i].commit) != 0;
	shmt_view_close(&v);
	return n;
}

/*
 * Format 2.0: the collector copies no record of a full block into the
 * ring: every slot stays as it was (never written, here), while the
 * capture has every record once. Written out, the blocks still hold them
 * for a reader of the ring, as its slots would (less than a ring's worth
 * came after them): a post-mortem read finds them all, none torn.
 */
static void test_full_blocks_read_in_place(void **state)
{
	const char *ring = test_ring_name("inplace");
	const char *out = "/tmp/shmt-inplace.cap";
	const uint64_t n = 10 * 64 + 5;
	struct tally t = { 0 };
	struct ring_dump dump;
	struct drain *d;
	uint32_t st[5];

	(void)state;
	make_ring(ring, 0);
	d = drain_here(ring, out);
	produce_all(ring, &t, n);	/* its last block handed over at close */
	while (drain_pass(d, false) > 0)
		;
	assert_int_equal(header_word(ring, offsetof(struct shmt_header, head)), n);
	assert_int_equal(slots_written(ring), 0);
	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	read_capture(out, &t);
	check_exactly_once(&t);
	assert_int_equal(t.records, n);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_FULL] + st[SHMT_BLOCK_OWNED], 0);
	assert_int_equal(st[SHMT_BLOCK_SEQUENCED], (n + 63) / 64);
	ring_dump(ring, &dump);
	assert_int_equal(dump.torn, 0);
	assert_int_equal(dump.n, n);
	free(dump.recs);
	tally_free(&t);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/*
 * With no collector, a producer sequences its full blocks in place itself
 * (2.0, a discard ring): none of their records is in a slot, only the
 * last block's, partly filled, copied when it closes; a post-mortem read
 * finds every record once. A collector that starts afterwards takes those
 * blocks as its own: the capture has every record once, none torn (a
 * block it did not know of would be read from its empty slots), and it
 * keeps them, as slots would be kept, while fewer than a quarter of the
 * 16 blocks are.
 */
static void test_blocks_sequenced_by_their_thread_taken_over_by_a_collector(void **state)
{
	const char *ring = test_ring_name("selfseq");
	const char *out = "/tmp/shmt-selfseq.cap";
	const uint64_t n = 3 * 64 + 5;
	struct tally t = { 0 };
	struct ring_dump dump;
	struct drain *d;
	uint32_t st[5];

	(void)state;
	make_ring(ring, 16);
	produce_all(ring, &t, n);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_FULL] + st[SHMT_BLOCK_OWNED], 0);
	assert_int_equal(st[SHMT_BLOCK_SEQUENCED], 3);
	assert_int_equal(slots_written(ring), 5);
	assert_int_equal(header_word(ring, offsetof(struct shmt_header, head)), n);
	ring_dump(ring, &dump);
	assert_int_equal(dump.torn, 0);
	assert_int_equal(dump.n, n);
	free(dump.recs);

	d = drain_here(ring, out);
	while (drain_pass(d, false) > 0)
		;
	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	read_capture(out, &t);
	check_exactly_once(&t);
	assert_int_equal(t.records, n);
	assert_int_equal(t.torn, 0);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_SEQUENCED], 3);
	tally_free(&t);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/*
 * A collector that leaves with blocks handed over to it and not yet
 * sequenced (stopped between its last pass and its exit): the thread that
 * goes on with no collector sequences those first, then its own, so its
 * records keep the order it wrote them in, in the ring's sequences, each
 * once; also when it had sequenced blocks of its own before the collector
 * came.
 */
static void test_blocks_left_by_a_collector_sequenced_before_the_threads_next(void **state)
{
	const char *ring = test_ring_name("selfafter");
	struct ring_dump dump;
	shmtrace_t *t;
	uint32_t st[5];
	uint64_t i = 0;

	(void)state;
	make_ring(ring, 32);	/* a quarter: 8 blocks' records, more than written */
	assert_int_equal(shmtrace_open(ring, &t), 0);
	/* one block sequenced by the thread itself first */
	for (; i < 64 + 1; i++)
		assert_int_equal(shmtrace_span(t, 1, 1, i, i + 1, 0), 0);
	assert_int_equal(header_word(ring, offsetof(struct shmt_header, head)), 64);
	say_collector(ring, (uint64_t)getpid());
	for (; i < 3 * 64 + 1; i++)
		assert_int_equal(shmtrace_span(t, 1, 1, i, i + 1, 0), 0);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_FULL], 2);
	say_collector(ring, 0);
	for (; i < 6 * 64 + 1; i++)
		assert_int_equal(shmtrace_span(t, 1, 1, i, i + 1, 0), 0);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_FULL], 0);
	assert_int_equal(st[SHMT_BLOCK_SEQUENCED], 6);
	assert_int_equal(header_word(ring, offsetof(struct shmt_header, head)), 6 * 64);
	ring_dump(ring, &dump);
	assert_int_equal(dump.torn, 0);
	assert_int_equal(dump.n, i);
	for (uint64_t k = 0; k < dump.n; k++)
		assert_int_equal(dump.recs[k].ts, k);
	free(dump.recs);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/*
 * With no collector, blocks sequenced in place stay until one comes: so a
 * producer sequences its own only while the ring holds under a quarter of
 * the blocks' records (4 of 16 blocks here), and copies after that, as
 * before, leaving the other blocks free for threads. Every record is
 * still read once, in order.
 */
static void test_own_sequencing_stops_at_a_quarter_of_the_blocks(void **state)
{
	const char *ring = test_ring_name("selfquarter");
	const uint64_t n = 10 * 64;
	struct tally t = { 0 };
	struct ring_dump dump;
	uint32_t st[5];

	(void)state;
	make_ring(ring, 16);
	produce_all(ring, &t, n);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_SEQUENCED], 4);
	assert_int_equal(st[SHMT_BLOCK_FREE], 12);
	assert_int_equal(slots_written(ring), n - 4 * 64);
	ring_dump(ring, &dump);
	assert_int_equal(dump.torn, 0);
	assert_int_equal(dump.n, n);
	for (uint64_t i = 1; i < dump.n; i++)
		assert_true(dump.recs[i].ts > dump.recs[i - 1].ts);
	free(dump.recs);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/*
 * A snapshot of a drained 2.0 discard ring: the blocks the collector
 * still keeps are read in place, the sequences whose blocks it let go
 * (more than a quarter of the 16 blocks were sequenced) are counted
 * overwritten, as lapped slots are, and nothing is torn or doubled.
 */
static void test_snapshot_reads_the_blocks_kept_in_place(void **state)
{
	const char *ring = test_ring_name("inplacesnap");
	const char *out = "/tmp/shmt-inplacesnap.cap", *path = "/tmp/shmt-inplacesnap.snap";
	const uint64_t n = 10 * 64;
	struct shmt_snap_opts o = { .ring = ring, .info = { .cause = SHMT_SNAP_COMMAND } };
	struct shmt_snap_result res;
	struct snap_file *s = calloc(1, sizeof(*s));
	struct tally t = { 0 };
	struct shmt_view v;
	struct drain *d;
	uint32_t st[5];
	char err[256];

	(void)state;
	assert_non_null(s);
	make_ring(ring, 16);
	d = drain_here(ring, out);
	produce_all(ring, &t, n);
	while (drain_pass(d, false) > 0)
		;
	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_SEQUENCED], 16 / 4);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	unlink(path);
	assert_int_equal(shmt_snapshot_write(&v, path, &o, &res, err, sizeof(err)), 0);
	shmt_view_close(&v);
	snap_read(path, s);
	assert_int_equal(s->n, 4 * 64);
	assert_int_equal(s->h.snapshot.overwritten, n - 4 * 64);
	assert_int_equal(s->loss.torn, 0);
	for (size_t i = 0; i < s->n; i++)
		assert_int_equal(s->seq[i], n - 4 * 64 + i);
	snap_free(s);
	free(s);
	tally_free(&t);
	unlink(path);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/*
 * No block free while the collector drains nothing: stopped (SIGSTOP, a
 * debugger) it drains nothing until continued, and dead but not reaped
 * (a zombie) never again; either way the thread copies its blocks into
 * the ring's slots under the lock, as with no collector, rather than
 * drop: nothing is lost while the slots have room.
 */
static void test_no_block_free_copies_while_the_collector_drains_nothing(void **state)
{
	(void)state;
	for (int zombie = 0; zombie < 2; zombie++) {
		const char *ring = test_ring_name(zombie ? "handoffzombie" : "handoffstopped");
		struct shmt_loss l;
		struct shmt_view v;
		uint32_t st[5];
		shmtrace_t *t;
		int status;
		pid_t c = fork();

		assert_true(c >= 0);
		if (c == 0) {
			/* gone with the test, failed or not, and holding none
			 * of its output open meanwhile */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(STDOUT_FILENO);
			close(STDERR_FILENO);
			if (!zombie)
				raise(SIGSTOP);
			_exit(0);
		}
		/* stopped, or exited and left unreaped */
		assert_int_equal(waitid(P_PID, (id_t)c, NULL,
					(zombie ? WEXITED : WSTOPPED) | WNOWAIT), 0);
		make_ring(ring, 8);
		say_collector(ring, (uint64_t)c);
		assert_int_equal(shmtrace_open(ring, &t), 0);
		for (uint32_t i = 0; i < 8 * 64 + 10; i++)
			assert_int_equal(shmtrace_span(t, 0, 0, i, i + 1, 0), 0);
		block_states(ring, st);
		assert_int_equal(st[SHMT_BLOCK_FULL], 0);
		ring_view_rw(ring, &v);
		assert_int_equal(shmt_ring_head(&v), 8 * 64);
		shmt_view_close(&v);
		ring_loss(ring, &l);
		assert_int_equal(l.dropped, 0);
		shmtrace_close(t);
		kill(c, SIGKILL);
		assert_int_equal(waitpid(c, &status, 0), c);
		shmtrace_ring_unlink(ring);
	}
}

static pthread_barrier_t g_owners;

/* A thread that writes one span (claiming a block) and keeps its block
 * until the barrier lets it go. */
static void *own_a_block(void *arg)
{
	shmtrace_span(arg, 0, 0, 1, 2, 0);
	pthread_barrier_wait(&g_owners);
	pthread_barrier_wait(&g_owners);
	return NULL;
}

/*
 * No block free because threads hold them all, not because the collector
 * is far behind (none full and waiting): the thread copies its full block
 * into the ring's slots under the lock and loses nothing, as a ring of
 * more threads than blocks does.
 */
static void test_no_block_free_copies_while_the_collector_keeps_up(void **state)
{
	const char *ring = test_ring_name("handoffowned");
	pthread_t th[7];
	struct shmt_loss l;
	struct shmt_view v;
	uint32_t st[5];
	shmtrace_t *t;

	(void)state;
	make_ring(ring, 8);
	say_collector(ring, (uint64_t)getpid());
	assert_int_equal(shmtrace_open(ring, &t), 0);
	assert_int_equal(pthread_barrier_init(&g_owners, NULL, 8), 0);
	for (int i = 0; i < 7; i++)
		assert_int_equal(pthread_create(&th[i], NULL, own_a_block, t), 0);
	pthread_barrier_wait(&g_owners);
	for (uint32_t i = 0; i < 64 + 10; i++)
		assert_int_equal(shmtrace_span(t, 0, 0, 10 + i, 11 + i, 0), 0);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_OWNED], 8);
	ring_view_rw(ring, &v);
	assert_int_equal(shmt_ring_head(&v), 64);
	shmt_view_close(&v);
	ring_loss(ring, &l);
	assert_int_equal(l.dropped, 0);
	pthread_barrier_wait(&g_owners);
	for (int i = 0; i < 7; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	pthread_barrier_destroy(&g_owners);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/*
 * Blocks written out are kept for a reader of the ring only while
 * producers do not need them: the blocks kept and those waiting for the
 * collector stay under half the ring's. A collector that finds the four
 * (a quarter of 16) a drain left kept and four full ones waiting frees
 * the oldest kept one at once.
 */
static void test_blocks_kept_for_readers_freed_while_blocks_wait(void **state)
{
	const char *ring = test_ring_name("inplacewait");
	const char *out = "/tmp/shmt-inplacewait.cap";
	struct tally tl = { 0 };
	struct drain *d;
	uint32_t st[5];
	shmtrace_t *t;

	(void)state;
	make_ring(ring, 16);
	d = drain_here(ring, out);
	produce_all(ring, &tl, 10 * 64);
	while (drain_pass(d, false) > 0)
		;
	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_SEQUENCED], 4);
	/* four blocks handed over while the next collector starts */
	say_collector(ring, (uint64_t)getpid());
	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (uint32_t i = 0; i < 4 * 64 + 1; i++)
		assert_int_equal(shmtrace_span(t, 0, 0, i, i + 1, 0), 0);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_FULL], 4);
	d = drain_here(ring, out);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_SEQUENCED], 3);
	assert_int_equal(st[SHMT_BLOCK_FULL], 4);
	while (drain_pass(d, false) > 0)
		;
	shmtrace_close(t);
	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	tally_free(&tl);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/* A collector process makes a pass over ring (capturing into dead_out)
 * and is killed inside it at the test hook named where; with produced,
 * a producer process first writes that many spans and exits. */
static void collector_killed_in_pass(const char *ring, const char *dead_out, const char *where,
				     uint64_t produced)
{
	int status;
	pid_t col = fork();

	assert_true(col >= 0);
	if (col == 0) {
		struct drain *d = drain_here(ring, dead_out);
		pid_t prod = produced ? fork() : 0;

		if (produced && prod == 0)
			produce(ring, produced);
		if (produced && (prod < 0 || waitpid(prod, &status, 0) != prod))
			_exit(6);
		g_kill_at = where;
		shmt_test_hook = kill_hook;
		drain_pass(d, false);
		_exit(5);	/* not reached: killed in the pass */
	}
	assert_int_equal(waitpid(col, &status, 0), col);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/*
 * A collector killed while it sequences a full block in place, holding
 * the lock: after the block's state, before the head (the repair gives it
 * back to the full blocks), or after the head (its sequences stand). A
 * post-mortem read finds every record once, none torn; the next collector
 * captures every record once and leaves no block behind.
 */
static void killed_sequencing(const char *where)
{
	const char *ring = test_ring_name("inplacekill");
	const char *dead_out = "/tmp/shmt-inplacekill-dead.cap", *out = "/tmp/shmt-inplacekill.cap";
	const uint64_t n = 10 * 64 + 5;
	struct ring_dump dump;
	struct tally t = { 0 };
	uint32_t st[5];
	pid_t col;

	make_ring(ring, 0);
	collector_killed_in_pass(ring, dead_out, where, n);
	ring_dump(ring, &dump);
	assert_int_equal(dump.torn, 0);
	assert_int_equal(dump.n, n);
	col = start_collector(ring, out, NULL, 0);
	assert_clean_exit(stop(col, SIGTERM));
	tally_init(&t, 1, n);
	t.pids[0] = dump.recs[0].pid;	/* the producer, gone */
	free(dump.recs);
	read_capture(out, &t);
	assert_int_equal(t.dup_seq, 0);
	assert_int_equal(t.records, n);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_OWNED] + st[SHMT_BLOCK_FULL] + st[SHMT_BLOCK_CLAIMING], 0);
	/* the repair or the sequencing took each block off the count once */
	assert_int_equal(header_word(ring, offsetof(struct shmt_header, full_blocks)), 0);
	figure_row(false, strcmp(where, "sequence-state") == 0 ?
		   "collector killed sequencing a block, before the head" :
		   "collector killed sequencing a block, after the head", 1, n, t.records, 0, 0, 0,
		   "captured once, none torn; no block left full");
	tally_free(&t);
	unlink(out);
	unlink(dead_out);
	shmtrace_ring_unlink(ring);
}

/*
 * A collector killed between the two stores that free a block leaves it
 * sequenced with nothing in it, an extent of nothing: the next collector
 * frees it when it starts, so that producers can claim it.
 */
static void test_block_half_freed_is_freed_by_the_next_collector(void **state)
{
	const char *ring = test_ring_name("inplacehalf");
	const char *out = "/tmp/shmt-inplacehalf.cap";
	struct shmt_view v;
	struct drain *d;
	uint32_t st[5];

	(void)state;
	make_ring(ring, 16);
	ring_view_rw(ring, &v);
	shmt_block_at(&v, 3)->written = shmt_block_at(&v, 3)->taken = 64;
	shmt_block_at(&v, 3)->state = SHMT_BLOCK_SEQUENCED;
	shmt_view_close(&v);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_SEQUENCED], 1);
	d = drain_here(ring, out);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_SEQUENCED], 0);
	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

static void test_collector_killed_sequencing_before_head(void **s)
{
	(void)s;
	killed_sequencing("sequence-state");
}

static void test_collector_killed_sequencing_after_head(void **s)
{
	(void)s;
	killed_sequencing("sequence-head");
}

/* Writes n spans (fill()'s) through a handle of this thread, opened on
 * ring; they stay staged in its block. */
static shmtrace_t *stage_here(const char *ring, uint64_t n)
{
	uint64_t ts, dur, flow;
	shmtrace_t *t;

	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (uint64_t i = 0; i < n; i++) {
		fill(i, &ts, &dur, &flow);
		assert_int_equal(shmtrace_span(t, 2, 1, ts, ts + dur, flow), 0);
	}
	return t;
}

/* Ends drain d: its capture out holds the n spans stage_here() wrote,
 * each once; the capture and the ring are removed. */
static void finish_here(struct drain *d, const char *out, const char *ring, uint64_t n)
{
	struct tally tl = { 0 };

	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	tally_init(&tl, 1, n);
	tl.pids[0] = (uint32_t)getpid();
	read_capture(out, &tl);
	check_exactly_once(&tl);
	assert_int_equal(tl.records, n);
	tally_free(&tl);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/* Where a test hook was called, and how often: flush-begin is a copy of
 * records into the ring's slots, under the lock. */
static uint32_t g_copy_steps, g_slot_copies;

static void count_hook(const char *where)
{
	g_copy_steps += !strcmp(where, "copy-state");
	g_slot_copies += !strcmp(where, "flush-begin");
}

/* One pass of drain d with hook (count_hook, or one that calls it): it
 * published `steps` copies, copied `copies` times into the slots under
 * the lock, and ring's slots then hold `slots` records. */
static void pass_counting(struct drain *d, void (*hook)(const char *), const char *ring,
			  uint32_t steps, uint32_t copies, uint64_t slots)
{
	g_copy_steps = g_slot_copies = 0;
	shmt_test_hook = hook;
	drain_pass(d, false);
	shmt_test_hook = NULL;
	assert_int_equal(g_copy_steps, steps);
	assert_int_equal(g_slot_copies, copies);
	assert_int_equal(slots_written(ring), slots);
}

/*
 * Format 2.2: the records a live thread left staged in its partly filled
 * block are copied by the collector without the lock, into a block it
 * claims, and under the lock the copy is sequenced in place in a few
 * stores: no record copied into a slot under it, the thread's block
 * emptied and still its own. The capture has every record once, and so
 * has a post-mortem read of the ring. In a 2.1 ring, whose older
 * libraries would not repair the step, they are copied into the slots
 * under the lock as before.
 */
static void test_idle_block_copied_without_the_lock(void **state)
{
	const char *ring = test_ring_name("idlecopy");
	const char *out = "/tmp/shmt-idlecopy.cap";
	const uint64_t n = 37;

	(void)state;
	for (int older = 0; older < 2; older++) {
		struct ring_dump dump;
		struct shmt_view v;
		struct drain *d;
		shmtrace_t *t;
		uint32_t st[5];

		make_ring(ring, 0);
		if (older) {
			ring_view_rw(ring, &v);
			store_relaxed(&v.h->minor, SHMT_MINOR_ASK - SHMT_LEVEL_MAJOR2);
			shmt_view_close(&v);
		}
		d = drain_here(ring, out);
		t = stage_here(ring, n);
		pass_counting(d, count_hook, ring, older ? 0 : 1, older ? 1 : 0, older ? n : 0);
		assert_int_equal(header_word(ring, offsetof(struct shmt_header, head)), n);
		block_states(ring, st);
		assert_int_equal(st[SHMT_BLOCK_OWNED], 1);
		assert_int_equal(st[SHMT_BLOCK_SEQUENCED], older ? 0 : 1);
		assert_int_equal(st[SHMT_BLOCK_CLAIMING], 0);
		ring_view_rw(ring, &v);
		for (uint32_t i = 0; i < v.nblocks; i++) {
			struct shmt_block *b = shmt_block_at(&v, i);

			if (b->state == SHMT_BLOCK_OWNED) {
				assert_int_equal(b->tid, (uint32_t)gettid());
				assert_int_equal(b->taken, b->written);
			}
			if (b->state == SHMT_BLOCK_SEQUENCED) {
				assert_int_equal(b->tid, (uint32_t)gettid());
				assert_int_equal(b->written - b->taken, n);
				assert_int_equal(b->open_depth, 0);
			}
		}
		shmt_view_close(&v);
		ring_dump(ring, &dump);
		assert_int_equal(dump.torn, 0);
		assert_int_equal(dump.n, n);
		free(dump.recs);
		shmtrace_close(t);
		finish_here(d, out, ring, n);
	}
}

/*
 * A dead thread's block is copied without the lock too: under it the
 * copy is published, the block freed, and the span the thread died in
 * written after its records (a record of its own, into a slot). A
 * post-mortem read finds the 37 spans, then the open one, each once.
 */
static void test_dead_threads_block_copied_without_the_lock(void **state)
{
	const char *ring = test_ring_name("idlecopydead");
	const char *out = "/tmp/shmt-idlecopydead.cap";
	struct shmtrace_open_span sp;
	struct tally tl = { 0 };
	struct ring_dump dump;
	struct drain *d;
	uint32_t st[5];
	int status;
	pid_t p;

	(void)state;
	make_ring(ring, 0);
	d = drain_here(ring, out);
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		shmtrace_t *t = stage_here(ring, 37);

		_exit(shmtrace_begin(t, &sp, 2, 1, 0) == 0 ? 0 : 3);	/* no close */
	}
	assert_int_equal(waitpid(p, &status, 0), p);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* the copy published, and the open span written into a slot */
	pass_counting(d, count_hook, ring, 1, 1, 1);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_OWNED] + st[SHMT_BLOCK_CLAIMING], 0);
	assert_int_equal(st[SHMT_BLOCK_SEQUENCED], 1);
	ring_dump(ring, &dump);
	assert_int_equal(dump.torn, 0);
	assert_int_equal(dump.n, 38);
	for (uint32_t k = 0; k < 38; k++) {
		assert_int_equal(dump.recs[k].pid, (uint32_t)p);
		assert_int_equal(SHMT_COMMIT_KIND(dump.recs[k].commit),
				 k < 37 ? SHMTRACE_KIND_SPAN : SHMTRACE_KIND_OPEN);
	}
	free(dump.recs);
	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	/* the capture: the 37 once, and the open span (not one of them) */
	tally_init(&tl, 1, 37);
	tl.pids[0] = (uint32_t)p;
	/* and room for the open span's sequence, the 38th */
	free(tl.seq_seen);
	tl.max_seq = 38;
	tl.seq_seen = calloc(tl.max_seq, 1);
	assert_non_null(tl.seq_seen);
	read_capture(out, &tl);
	assert_int_equal(tl.records, 37);
	assert_int_equal(tl.bad, 1);
	tl.bad = 0;
	check_exactly_once(&tl);
	tally_free(&tl);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/* The handle whose thread flushes its block itself once the collector
 * copied it (flush_hook). */
static shmtrace_t *g_flusher;

/* Blocks of ring name claimed by thread tid. */
static uint32_t claimed_by(const char *name, uint32_t tid)
{
	struct shmt_view v;
	uint32_t n = 0;

	ring_view_rw(name, &v);
	for (uint32_t i = 0; i < v.nblocks; i++)
		n += load_relaxed(&shmt_block_at(&v, i)->state) == (SHMT_BLOCK_CLAIMING | tid << 8);
	shmt_view_close(&v);
	return n;
}

static const char *g_flusher_ring;

static void flush_hook(const char *where)
{
	count_hook(where);
	if (strcmp(where, "collector-copied") || !g_flusher)
		return;
	/* the copy made, by this thread, the collector's */
	assert_int_equal(claimed_by(g_flusher_ring, (uint32_t)gettid()), 1);
	assert_int_equal(shmtrace_flush(g_flusher), 0);
}

/*
 * A copy made without the lock is published only while the records it
 * holds are still the block's next: the thread flushing its block itself
 * after the collector copied it (into the slots, under the lock) makes
 * the copy stale, and the collector frees it unpublished. The capture has
 * every record once, and no block is left claimed or sequenced.
 */
static void test_idle_copy_freed_when_the_thread_flushed_first(void **state)
{
	const char *ring = test_ring_name("idlecopystale");
	const char *out = "/tmp/shmt-idlecopystale.cap";
	const uint64_t n = 37;
	struct drain *d;
	uint32_t st[5];

	(void)state;
	make_ring(ring, 0);
	d = drain_here(ring, out);
	g_flusher = stage_here(ring, n);
	g_flusher_ring = ring;
	/* the thread's own flush, and no copy published nor copied again */
	pass_counting(d, flush_hook, ring, 0, 1, n);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_CLAIMING] + st[SHMT_BLOCK_SEQUENCED], 0);
	assert_int_equal(st[SHMT_BLOCK_OWNED], 1);
	shmtrace_close(g_flusher);
	g_flusher = NULL;
	finish_here(d, out, ring, n);
}

/* A process that writes CAP spans into ring's slots, flushing its block
 * before the block's flush mark (a half block), so none is handed over:
 * a discard ring nobody drained since is then full. Its pid. */
static pid_t fill_slots(const char *ring)
{
	uint64_t ts, dur, flow;
	shmtrace_t *t;
	int status;
	pid_t p = fork();

	assert_true(p >= 0);
	if (p == 0) {
		shmt_test_hook = NULL;	/* the parent's, inherited */
		if (shmtrace_open(ring, &t))
			_exit(3);
		for (uint64_t i = 0; i < CAP; i++) {
			fill(i, &ts, &dur, &flow);
			if (shmtrace_span(t, 2, 1, ts, ts + dur, flow) ||
			    (i % 16 == 15 && shmtrace_flush(t)))
				_exit(4);
		}
		shmtrace_close(t);
		_exit(0);
	}
	assert_int_equal(waitpid(p, &status, 0), p);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return p;
}

static pid_t g_filler;

static void fill_hook(const char *where)
{
	count_hook(where);

	if (strcmp(where, "collector-copied") || g_filler)
		return;
	/* the copy made, by this thread, the collector's; then the ring
	 * filled before the collector takes the lock */
	assert_int_equal(claimed_by(g_flusher_ring, (uint32_t)gettid()), 1);
	g_filler = fill_slots(g_flusher_ring);
}

/*
 * A copy is published only while a discard ring has room for it: the
 * ring filled between the copy and the lock, the collector frees its copy
 * unpublished and leaves the records staged in their thread's block,
 * dropping none. The next pass, the ring drained meanwhile, publishes a
 * new copy of them. The capture has every record of both processes once.
 */
static void test_idle_copy_not_published_into_a_full_ring(void **state)
{
	const char *ring = test_ring_name("idlecopyfull");
	const char *out = "/tmp/shmt-idlecopyfull.cap";
	const uint64_t n = 37;
	struct tally tl = { 0 };
	struct shmt_view v;
	struct drain *d;
	shmtrace_t *t;
	uint32_t st[5];

	(void)state;
	make_ring(ring, 0);
	d = drain_here(ring, out);
	t = stage_here(ring, n);
	g_flusher_ring = ring;
	g_filler = 0;
	pass_counting(d, fill_hook, ring, 0, 0, CAP);
	assert_true(g_filler > 0);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_CLAIMING] + st[SHMT_BLOCK_SEQUENCED], 0);
	assert_int_equal(st[SHMT_BLOCK_OWNED], 1);
	ring_view_rw(ring, &v);
	for (uint32_t i = 0; i < v.nblocks; i++) {
		struct shmt_block *b = shmt_block_at(&v, i);

		if (b->state == SHMT_BLOCK_OWNED)
			assert_int_equal(b->written - b->taken, n);
	}
	assert_int_equal(load_relaxed(&v.h->dropped.v), 0);
	shmt_view_close(&v);
	/* once the capture holds the slots' records (tail moved: room
	 * again), the next look publishes a copy of them, into no slot */
	g_copy_steps = g_slot_copies = 0;
	shmt_test_hook = count_hook;
	for (int k = 0; k < 1000 && !g_copy_steps; k++) {
		drain_sleep(d);
		drain_pass(d, false);
	}
	shmt_test_hook = NULL;
	assert_int_equal(g_copy_steps, 1);
	assert_int_equal(g_slot_copies, 0);
	assert_int_equal(header_word(ring, offsetof(struct shmt_header, head)), CAP + n);
	shmtrace_close(t);
	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	tally_init(&tl, 2, CAP);
	tl.pids[0] = (uint32_t)g_filler;
	tl.pids[1] = (uint32_t)getpid();
	read_capture(out, &tl);
	assert_int_equal(tl.dropped, 0);
	assert_int_equal(tl.dup_seq, 0);
	assert_int_equal(tl.bad, 0);
	assert_int_equal(tl.records, CAP + n);
	for (uint64_t i = 0; i < CAP; i++) {
		assert_int_equal(tl.seen[i], 1);
		assert_int_equal(tl.seen[CAP + i], i < n);
	}
	tally_free(&tl);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/*
 * A hold makes at most 128 copies without the lock, and flushes no block
 * past them: the blocks of 129 idle threads, a span each, are all copied
 * off the lock, over two holds, and none is copied into a slot.
 */
static void test_idle_copies_beyond_a_hold_wait_for_the_next(void **state)
{
	const char *ring = test_ring_name("idlecopymany");
	const char *out = "/tmp/shmt-idlecopymany.cap";
	enum { THREADS = 129 };
	pthread_t th[THREADS];
	struct drain *d;
	shmtrace_t *t;

	(void)state;
	make_ring(ring, 0);
	d = drain_here(ring, out);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	assert_int_equal(pthread_barrier_init(&g_owners, NULL, THREADS + 1), 0);
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, own_a_block, t), 0);
	pthread_barrier_wait(&g_owners);
	g_copy_steps = g_slot_copies = 0;
	shmt_test_hook = count_hook;
	for (int pass = 0; pass < 10 && header_word(ring, offsetof(struct shmt_header, head)) < THREADS;
	     pass++)
		drain_pass(d, false);
	shmt_test_hook = NULL;
	assert_int_equal(header_word(ring, offsetof(struct shmt_header, head)), THREADS);
	assert_int_equal(g_copy_steps, THREADS);
	assert_int_equal(g_slot_copies, 0);
	assert_int_equal(slots_written(ring), 0);
	pthread_barrier_wait(&g_owners);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&g_owners);
	shmtrace_close(t);
	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/*
 * Copies leave an eighth of the blocks free for the threads: of 16
 * blocks, 13 more owned besides this thread's (alive: this one, as far as
 * the ring can tell) leave 2 free, and none is taken for a copy: the idle
 * thread's records are copied into the slots under the lock, as before;
 * 12 more leave 3, and one is.
 */
static void test_idle_block_copied_under_the_lock_when_few_blocks_are_free(void **state)
{
	const char *ring = test_ring_name("idlecopyfew");
	const char *out = "/tmp/shmt-idlecopyfew.cap";
	const uint64_t n = 37;

	(void)state;
	for (uint32_t more = 13; more >= 12; more--) {
		uint32_t st[5], owner = UINT32_MAX, forged = 0;
		bool copy = more == 12;
		struct shmt_view v;
		struct drain *d;
		shmtrace_t *t;

		make_ring(ring, 16);
		d = drain_here(ring, out);
		t = stage_here(ring, n);
		ring_view_rw(ring, &v);
		for (uint32_t i = 0; i < v.nblocks && owner == UINT32_MAX; i++)
			if (shmt_block_at(&v, i)->state == SHMT_BLOCK_OWNED)
				owner = i;
		assert_true(owner != UINT32_MAX);
		for (uint32_t i = 0; i < v.nblocks && forged < more; i++) {
			struct shmt_block *b = shmt_block_at(&v, i), *o = shmt_block_at(&v, owner);

			if (i == owner)
				continue;
			b->pid = o->pid;
			b->tid = o->tid;
			b->start_time = o->start_time;
			b->state = SHMT_BLOCK_OWNED;
			forged++;
		}
		shmt_view_close(&v);
		pass_counting(d, count_hook, ring, copy ? 1 : 0, copy ? 0 : 1, copy ? 0 : n);
		block_states(ring, st);
		assert_int_equal(st[SHMT_BLOCK_OWNED], more + 1);
		assert_int_equal(st[SHMT_BLOCK_SEQUENCED], copy ? 1 : 0);
		shmtrace_close(t);
		finish_here(d, out, ring, n);
	}
}

/*
 * A collector killed with its copy of a live thread's records made:
 * before the lock (the copy is still its claim, which the next
 * collector's reaper frees), or holding it, while it publishes the copy:
 * after the copy's state, or its count, before the head (the repair
 * frees the copy: the records are still the thread's), after the head,
 * or after the thread's taken (the copy stands, and the thread's block
 * holds none of them). A post-mortem read finds every record once, none
 * torn, and counts each once as waiting, before the repair and after it;
 * once the thread left, the next
 * collector captures every record once, and leaves no block claimed or
 * full.
 */
static void killed_copying(const char *where, bool locked, bool published, const char *row)
{
	const char *ring = test_ring_name("idlecopykill");
	const char *dead_out = "/tmp/shmt-idlecopykill-dead.cap", *out = "/tmp/shmt-idlecopykill.cap";
	const uint64_t n = 37;
	struct ring_dump dump;
	struct tally tl = { 0 };
	struct shmt_view v;
	shmtrace_t *t;
	uint32_t st[5];
	pid_t col;

	make_ring(ring, 0);
	t = stage_here(ring, n);
	collector_killed_in_pass(ring, dead_out, where, 0);
	for (int repaired = 0; repaired < 2; repaired++) {
		ring_dump(ring, &dump);
		assert_int_equal(dump.torn, 0);
		assert_int_equal(dump.n, n);
		free(dump.recs);
		/* what `shmtrace ls` says waits: each record once too */
		ring_view_rw(ring, &v);
		assert_int_equal(shmt_ring_undrained(&v), n);
		shmt_view_close(&v);
		if (repaired)
			break;
		/* the lock taken: the repair runs if the collector held it */
		ring_view_rw(ring, &v);
		assert_int_equal(shmt_lock(&v, 1000000000ull), 0);
		shmt_unlock(&v);
		assert_int_equal(load_relaxed(&v.h->lock_recoveries), locked ? 1 : 0);
		shmt_view_close(&v);
		block_states(ring, st);
		assert_int_equal(st[SHMT_BLOCK_SEQUENCED], published ? 1 : 0);
		assert_int_equal(st[SHMT_BLOCK_CLAIMING], locked ? 0 : 1);
	}
	/* the thread leaves: its block goes over as it is */
	shmtrace_close(t);
	col = start_collector(ring, out, NULL, 0);
	assert_clean_exit(stop(col, SIGTERM));
	tally_init(&tl, 1, n);
	tl.pids[0] = (uint32_t)getpid();
	read_capture(out, &tl);
	assert_int_equal(tl.dup_seq, 0);
	check_exactly_once(&tl);
	assert_int_equal(tl.records, n);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_CLAIMING] + st[SHMT_BLOCK_FULL] + st[SHMT_BLOCK_OWNED], 0);
	figure_row(false, row, 1, n, tl.records, 0, 0, 0, "captured once, none torn; no block left claimed");
	tally_free(&tl);
	unlink(out);
	unlink(dead_out);
	shmtrace_ring_unlink(ring);
}

static void test_collector_killed_publishing_a_copy(void **s)
{
	(void)s;
	killed_copying("collector-copied", false, false, "collector killed with a copy made, before the lock");
	killed_copying("copy-state", true, false, "collector killed publishing a copy, before the head");
	killed_copying("copy-written", true, false, "collector killed publishing a copy, its records counted");
	killed_copying("copy-head", true, true, "collector killed publishing a copy, after the head");
	killed_copying("copy-taken", true, true, "collector killed publishing a copy, after the taken");
}

/*
 * With no block free (8 blocks) and the collector that was handed them
 * gone, a thread copies into the ring under the lock as before, the full
 * blocks first; once the ring has no room for them either, its new
 * records are dropped and counted as a full ring's: nothing lost that is
 * not counted. A ring of format 1.9 is never handed blocks.
 */
static void test_copies_when_no_block_is_free_or_ring_is_older(void **state)
{
	const char *ring = test_ring_name("handoffdry");
	const uint64_t n = 6000;	/* more than the ring (4096) and the blocks hold */
	struct ring_dump d;
	struct shmt_loss l;
	uint32_t st[5];

	(void)state;
	for (int older = 0; older < 2; older++) {
		struct tally t = { 0 };

		make_ring(ring, 8);
		say_collector(ring, (uint64_t)gone_pid());
		if (older) {
			struct shmt_view v;

			ring_view_rw(ring, &v);
			store_relaxed(&v.h->major, 1);	/* format 1.9 */
			store_relaxed(&v.h->minor, 9);
			shmt_view_close(&v);
		}
		run_producers(ring, &t, 1, n);
		wait_producers(&t);
		ring_dump(ring, &d);
		ring_loss(ring, &l);
		assert_int_equal(d.torn, 0);
		assert_true(l.dropped > 0);
		assert_int_equal(d.n + l.dropped, n);
		block_states(ring, st);
		/* seven handed over, then copies; the last one left at close */
		assert_int_equal(st[SHMT_BLOCK_FULL], older ? 0 : 8);
		free(d.recs);
		tally_free(&t);
		shmtrace_ring_unlink(ring);
	}
}

static uint32_t g_spans_per_thread;

/* A thread of this process writing g_spans_per_thread spans, then exiting
 * (its last block handed over as it goes). */
static void *write_spans(void *arg)
{
	shmtrace_t *t = arg;

	for (uint32_t i = 0; i < g_spans_per_thread; i++)
		shmtrace_span(t, 0, 0, 1000 + i, 1001 + i, 0);
	return NULL;
}

/*
 * Thread B hands four blocks over and exits; thread A then hands three
 * over (seven of eight are full) and, the collector gone, copies at its
 * next full block: its own three handed-over blocks and then its full one
 * reach the ring, in order, while B's four stay full for the next
 * collector.
 */
static void test_copy_moves_only_the_threads_own_blocks(void **state)
{
	const char *ring = test_ring_name("handoffown");
	struct shmt_view v;
	shmtrace_t *t;
	pthread_t b;
	uint32_t st[5];
	uint64_t head;

	(void)state;
	make_ring(ring, 8);
	say_collector(ring, (uint64_t)gone_pid());
	assert_int_equal(shmtrace_open(ring, &t), 0);
	g_spans_per_thread = 3 * 64 + 10;
	assert_int_equal(pthread_create(&b, NULL, write_spans, t), 0);
	assert_int_equal(pthread_join(b, NULL), 0);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_FULL], 4);
	for (uint32_t i = 0; i < 4 * 64 + 5; i++)
		assert_int_equal(shmtrace_span(t, 0, 0, 5000 + i, 5001 + i, 0), 0);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_FULL], 4);
	ring_view_rw(ring, &v);
	head = shmt_ring_head(&v);
	assert_int_equal(head, 4 * 64);
	for (uint64_t s = 0; s < head; s++) {
		struct shmt_record r;

		assert_int_equal(shmt_ring_read(&v, s, &r), 0);
		assert_int_equal(r.tid, shmt_my_tid());
		assert_int_equal(r.ts, 5000 + s);
	}
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/*
 * No block free while a collector lives and is far behind (seven of the
 * eight blocks full and waiting for it): a call whose block is full drops
 * its records at once, counted as a full ring's, without the lock (held
 * here by an owner that never comes back) and without a slot of the ring
 * written; once the collector's tail moves (it wrote blocks out and freed
 * them), the next full block is handed over again.
 */
static void test_no_block_free_drops_while_the_collector_lives(void **state)
{
	const char *ring = test_ring_name("handoffbehind");
	struct shmt_loss before, after;
	struct shmt_view v;
	uint32_t st[5], freed = 0;
	shmtrace_t *t;

	(void)state;
	make_ring(ring, 8);
	say_collector(ring, (uint64_t)getpid());
	assert_int_equal(shmtrace_open(ring, &t), 0);
	/* seven blocks handed over, the eighth filled */
	for (uint32_t i = 0; i < 8 * 64; i++)
		assert_int_equal(shmtrace_span(t, 0, 0, i, i + 1, 0), 0);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_FULL], 7);
	ring_loss(ring, &before);
	ring_lock_by_unseen_dead_owner(ring);
	for (uint32_t i = 0; i < 200; i++)
		assert_int_equal(shmtrace_span(t, 0, 0, 1000 + i, 1001 + i, 0), -ENOSPC);
	ring_loss(ring, &after);
	assert_int_equal(after.dropped - before.dropped, 200);
	assert_int_equal(after.lock_dropped, 0);
	assert_int_equal(after.lock_timeouts, 0);
	ring_view_rw(ring, &v);
	assert_int_equal(shmt_ring_head(&v), 0);
	/* a collector frees two full blocks and moves its tail */
	for (uint32_t i = 0; i < v.nblocks && freed < 2; i++) {
		struct shmt_block *b = shmt_block_at(&v, i);

		if (load_relaxed(&b->state) != SHMT_BLOCK_FULL)
			continue;
		store_relaxed(&b->taken, load_relaxed(&b->written));
		store_relaxed(&b->state, SHMT_BLOCK_FREE);
		__atomic_fetch_sub(&v.h->full_blocks.v, 1, __ATOMIC_RELAXED);
		freed++;
	}
	store_relaxed(&v.h->tail.v, 64);
	shmt_view_close(&v);
	assert_int_equal(shmtrace_span(t, 0, 0, 5000, 5001, 0), 0);
	block_states(ring, st);
	assert_int_equal(st[SHMT_BLOCK_FULL], 6);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/*
 * The ring full and seven of eight blocks handed over, the lock held by
 * an owner that never comes back: a call whose block is full drops its
 * record at once and counts it as a full ring's, never waiting for the
 * lock (no lock timeout, nothing counted lost to the lock).
 */
static void test_full_block_without_room_drops_without_the_lock(void **state)
{
	const char *ring = test_ring_name("handoffnoroom");
	const uint32_t fill = CAP + 8 * 64;
	struct shmt_loss before, after;
	struct shmt_view v;
	shmtrace_t *t;

	(void)state;
	make_ring(ring, 8);
	/* its collector gone: the thread copies until the ring is full */
	say_collector(ring, (uint64_t)gone_pid());
	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (uint32_t i = 0; i < fill; i++)
		shmtrace_span(t, 0, 0, i, i + 1, 0);
	ring_view_rw(ring, &v);
	assert_int_equal(shmt_ring_head(&v), CAP);
	shmt_view_close(&v);
	ring_loss(ring, &before);
	ring_lock_by_unseen_dead_owner(ring);
	for (uint32_t i = 0; i < 3 * 64; i++)
		shmtrace_span(t, 0, 0, fill + i, fill + i + 1, 0);
	ring_loss(ring, &after);
	assert_true(after.dropped > before.dropped);
	assert_int_equal(after.lock_dropped, 0);
	assert_int_equal(after.lock_timeouts, 0);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* Flushes the blocks of list[0 .. n) the way the collector's idle flush
 * does (every live thread's records too), under the lock; returns what
 * moved. */
static uint64_t flush_listed(struct shmt_view *v, struct shmt_full *list, uint32_t n)
{
	uint32_t from = 0;
	uint64_t done;

	assert_int_equal(shmt_lock(v, 1000000000ull), 0);
	done = shmt_adopt_listed_locked(v, list, n, true, NULL, UINT64_MAX, &from);
	shmt_unlock(v);
	assert_int_equal(from, n);
	return done;
}

/*
 * The collector lists the blocks with staged records without the lock and
 * flushes them under it in holds that follow: a thread's owned block is
 * not listed while the full block it handed over before it waits (its
 * records would come first), and a block listed in one life and claimed
 * again before the flush (its claim number another) is left for the next
 * look; listed in the life it is in, its records move, in order.
 */
static void test_staged_blocks_listed_then_flushed_in_the_life_listed(void **state)
{
	const char *ring = test_ring_name("handoffstaged");
	struct shmt_full list[64 + 1], full[64 + 1];
	struct shmt_view v;
	shmtrace_t *t;
	uint32_t n, left;
	uint64_t no;

	(void)state;
	one_full_ten_staged(ring, &t, &v);
	assert_int_equal(shmt_staged_blocks(&v, NULL, list), 0);
	assert_int_equal(shmt_full_blocks(&v, NULL, full), 1);
	assert_int_equal(shmt_lock(&v, 1000000000ull), 0);
	assert_int_equal(shmt_flush_full_locked(&v, full, 1, UINT64_MAX, 0, &left), 64);
	shmt_unlock(&v);
	n = shmt_staged_blocks(&v, NULL, list);
	assert_int_equal(n, 1);
	/* claimed again since it was listed: not flushed */
	no = list[0].no;
	store_relaxed(&shmt_block_at(&v, list[0].i)->claim_no, no + 1000);
	assert_int_equal(flush_listed(&v, list, n), 0);
	assert_int_equal(shmt_ring_head(&v), 64);
	/* the life listed: its 10 records follow the handed-over block's */
	store_relaxed(&shmt_block_at(&v, list[0].i)->claim_no, no);
	assert_int_equal(flush_listed(&v, list, n), 10);
	assert_int_equal(shmt_ring_head(&v), 64 + 10);
	for (uint64_t s = 0; s < 64 + 10; s++) {
		struct shmt_record r;

		assert_int_equal(shmt_ring_read(&v, s, &r), 0);
		assert_int_equal(r.ts, 1000 + s);
	}
	assert_int_equal(shmt_staged_blocks(&v, NULL, list), 0);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* A ring of 64 blocks a collector is said to drain, t's thread with 10
 * records (ts 1000 to 1009) staged in its first block, and v on it. */
static void ten_staged(const char *ring, shmtrace_t **t, struct shmt_view *v)
{
	make_ring(ring, 64);
	say_collector(ring, 1);
	assert_int_equal(shmtrace_open(ring, t), 0);
	for (uint32_t i = 0; i < 10; i++)
		assert_int_equal(shmtrace_span(*t, 0, 0, 1000 + i, 1001 + i, 0), 0);
	ring_view_rw(ring, v);
}

/* The sum of the commit words of the ring slots of sequences head to
 * head + n. */
static uint64_t commit_sum(const struct shmt_view *v, uint64_t head, uint64_t n)
{
	uint64_t sum = 0;

	for (uint64_t s = head; s < head + n; s++)
		sum += v->records[s & v->mask].commit;
	return sum;
}

/*
 * Before a hold, the collector reads what the hold will copy (the staged
 * records listed, up to its bound) and the ring slots they go to: the sum
 * it returns is of exactly those words, so it reads the records a flush
 * would move and no others; a forged count or block index makes it read
 * within the block and the ring, never past them.
 */
static void test_warm_reads_what_the_flush_copies_within_the_geometry(void **state)
{
	const char *ring = test_ring_name("handoffwarm");
	struct shmt_full list[64 + 2];
	struct shmt_view v;
	struct shmt_block *b;
	shmtrace_t *t;
	uint64_t staged = 0, all = 0, head;
	uint32_t n;

	(void)state;
	ten_staged(ring, &t, &v);
	n = shmt_staged_blocks(&v, NULL, list);
	assert_int_equal(n, 1);
	b = shmt_block_at(&v, list[0].i);
	/* every word it may read distinct: the slots the ring would take the
	 * records into, and the block's slots that hold none of them */
	for (uint64_t s = 0; s < v.capacity; s++)
		store_relaxed(&v.records[s].commit, 7 * s + 3);
	for (uint64_t i = 10; i < v.block_records; i++)
		shmt_block_recs(b)[i].ts = 5000 + i;
	for (uint32_t i = 0; i < 10; i++)
		staged += 1000 + i;
	for (uint64_t i = 0; i < v.block_records; i++)
		all += shmt_block_recs(b)[i].ts;
	head = shmt_ring_head(&v);
	assert_int_equal(shmt_adopt_listed_warm(&v, list, n, 0, UINT64_MAX),
			 staged + commit_sum(&v, head, 10));
	/* the bound of a hold: it stops after the block that reaches it */
	list[1] = list[0];
	assert_int_equal(shmt_adopt_listed_warm(&v, list, 2, 0, UINT64_MAX),
			 2 * staged + commit_sum(&v, head, 20));
	assert_int_equal(shmt_adopt_listed_warm(&v, list, 2, 0, 5), staged + commit_sum(&v, head, 10));
	/* from past the list, or a list of no block: nothing read */
	assert_int_equal(shmt_adopt_listed_warm(&v, list, n, n, UINT64_MAX), 0);
	list[1] = (struct shmt_full){ .no = 0, .i = v.nblocks + 7 };
	assert_int_equal(shmt_adopt_listed_warm(&v, list + 1, 1, 0, UINT64_MAX), 0);
	/* a forged count: a block's worth read, each slot once, never more */
	store_relaxed(&b->written, (uint64_t)1 << 40);
	assert_int_equal(shmt_adopt_listed_warm(&v, list, n, 0, UINT64_MAX),
			 all + commit_sum(&v, head, v.block_records));
	store_relaxed(&b->written, 10);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/*
 * A collector that finds a live thread's partly filled block still moving
 * once its settle time passed asks for it (ring format 2.1): the thread's
 * next call hands it over as it is, a full block of the records it holds,
 * and writes on in a fresh block, in order; an ask left in a free block
 * from its last life is dropped when the block is claimed (the thread
 * does not hand its new block over). Asked again with no block free
 * (seven eighths handed over), the block stays where it is and the ask is
 * answered, so that the calls after it take the fast path again.
 */
static void test_asked_block_handed_over_at_the_next_call(void **state)
{
	const char *ring = test_ring_name("handoffask");
	struct shmt_full list[64 + 1], full[64 + 1];
	struct shmt_view v;
	struct shmt_block *b;
	shmtrace_t *t;
	uint32_t n, left, first;
	uint64_t seq;

	(void)state;
	ten_staged(ring, &t, &v);
	assert_true(v.minor >= SHMT_MINOR_ASK);
	assert_int_equal(shmt_staged_blocks(&v, NULL, list), 1);
	first = list[0].i;
	/* every block asked, the free ones too (a life before) */
	for (uint32_t i = 0; i < v.nblocks; i++)
		store_relaxed(&shmt_block_at(&v, i)->ask, 1);
	b = shmt_block_at(&v, first);
	assert_int_equal(shmtrace_span(t, 0, 0, 1010, 1011, 0), 0);
	/* the 10 records went over as a full block; the 11th is in the next */
	assert_int_equal(load_relaxed(&b->state), SHMT_BLOCK_FULL);
	assert_int_equal(load_relaxed(&b->written) - load_relaxed(&b->taken), 10);
	assert_int_equal(header_word(ring, offsetof(struct shmt_header, full_blocks)), 1);
	n = shmt_staged_blocks(&v, NULL, list);
	assert_int_equal(n, 0);	/* its successor waits behind it */
	for (uint32_t i = 0; i < v.nblocks; i++)
		if (load_relaxed(&shmt_block_at(&v, i)->state) == SHMT_BLOCK_OWNED)
			assert_int_equal(load_relaxed(&shmt_block_at(&v, i)->ask), 0);
	assert_int_equal(shmt_full_blocks(&v, NULL, full), 1);
	assert_int_equal(full[0].i, first);
	assert_int_equal(shmt_lock(&v, 1000000000ull), 0);
	assert_int_equal(shmt_flush_full_locked(&v, full, 1, UINT64_MAX, 0, &left), 10);
	shmt_unlock(&v);
	n = shmt_staged_blocks(&v, NULL, list);
	assert_int_equal(n, 1);
	assert_int_not_equal(list[0].i, first);
	assert_int_equal(flush_listed(&v, list, n), 1);
	for (seq = 0; seq < 11; seq++) {
		struct shmt_record r;

		assert_int_equal(shmt_ring_read(&v, seq, &r), 0);
		assert_int_equal(r.ts, 1000 + seq);
	}
	/* no block free: asked, the block (one record staged) stays, the
	 * ask answered, the record after it staged behind that one */
	b = shmt_block_at(&v, list[0].i);
	assert_int_equal(shmtrace_span(t, 0, 0, 1011, 1012, 0), 0);
	store_relaxed(&v.h->full_blocks.v, v.nblocks);
	store_relaxed(&b->ask, 1);
	assert_int_equal(shmtrace_span(t, 0, 0, 1012, 1013, 0), 0);
	assert_int_equal(load_relaxed(&b->state), SHMT_BLOCK_OWNED);
	assert_int_equal(load_relaxed(&b->ask), 0);
	assert_int_equal(load_relaxed(&b->written) - load_relaxed(&b->taken), 2);
	store_relaxed(&v.h->full_blocks.v, 0);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* the value ask_meanwhile() stores in the block, as a collector would
 * between the owner's look at the word and its clearing of it */
static struct shmt_block *ask_block;
static uint32_t ask_value;

static void ask_meanwhile(const char *where)
{
	if (ask_block && strcmp(where, "ask-clearing") == 0)
		store_relaxed(&ask_block->ask, ask_value);
}

/*
 * An ask names the life it is for (its claim number's tag). The tag of
 * the owner's life is answered by a hand-over. One of another life (the
 * collector listed the block in a life before and stored the ask after
 * the block was claimed again), or any other value a peer scribbled, is
 * cleared by the owner's next call and not answered: the block stays its
 * own and the calls after it take the fast path. An ask for the owner's
 * life that the collector stores while the owner clears another one
 * stands, and is answered by the same call.
 */
static void test_ask_for_another_life_cleared_unanswered(void **state)
{
	const char *ring = test_ring_name("handoffasktag");
	struct shmt_view v;
	struct shmt_block *b, *b2;
	shmtrace_t *t;
	uint64_t no, no2;

	(void)state;
	ten_staged(ring, &t, &v);
	b = block_of_this_thread(&v);
	no = load_relaxed(&b->claim_no);
	assert_int_not_equal(shmt_ask_tag(no), SHMT_ASK_ANY);
	assert_int_not_equal(shmt_ask_tag(no), 0);
	/* our life's tag: handed over with its 10 records, the 11th in the
	 * thread's next block, a later claim */
	store_relaxed(&b->ask, shmt_ask_tag(no));
	assert_int_equal(shmtrace_span(t, 0, 0, 1010, 1011, 0), 0);
	assert_int_equal(load_relaxed(&b->state), SHMT_BLOCK_FULL);
	assert_int_equal(load_relaxed(&b->written) - load_relaxed(&b->taken), 10);
	b2 = block_of_this_thread(&v);
	no2 = load_relaxed(&b2->claim_no);
	assert_true(no2 > no);
	assert_int_not_equal(shmt_ask_tag(no), shmt_ask_tag(no2));
	/* the earlier life's tag, then scribbles that are no life's of ours */
	const uint32_t asks[] = { shmt_ask_tag(no), 0x5a5a5a5au, 0xffffffffu };

	for (uint32_t k = 0; k < 3; k++) {
		assert_int_not_equal(asks[k], shmt_ask_tag(no2));
		store_relaxed(&b2->ask, asks[k]);
		assert_int_equal(shmtrace_span(t, 0, 0, 1011 + k, 1012 + k, 0), 0);
		assert_int_equal(load_relaxed(&b2->state), SHMT_BLOCK_OWNED);
		assert_int_equal(load_relaxed(&b2->ask), 0);
		assert_int_equal(load_relaxed(&b2->written) - load_relaxed(&b2->taken), 2 + k);
	}
	/* another life's tag, and ours stored while it is cleared: answered */
	store_relaxed(&b2->ask, shmt_ask_tag(no));
	ask_block = b2;
	ask_value = shmt_ask_tag(no2);
	shmt_test_hook = ask_meanwhile;
	assert_int_equal(shmtrace_span(t, 0, 0, 1014, 1015, 0), 0);
	shmt_test_hook = NULL;
	ask_block = NULL;
	assert_int_equal(load_relaxed(&b2->state), SHMT_BLOCK_FULL);
	assert_int_equal(load_relaxed(&b2->written) - load_relaxed(&b2->taken), 4);
	assert_int_equal(load_relaxed(&b2->ask), 0);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/*
 * A block forged FULL by a peer, first in the list (claim 0) and holding
 * "taken one past written" (2^64 - 1 records by a plain difference): the
 * collector's flush frees it, holding nothing, and goes on to the real
 * full block behind it, sequenced in place; the forged one neither stops
 * the list nor adds a record.
 */
static void test_forged_full_block_neither_stops_the_list_nor_counts(void **state)
{
	const char *ring = test_ring_name("handoffforged");
	struct shmt_full order[2];
	struct shmt_block *fb;
	struct shmt_view v;
	shmtrace_t *t;
	uint32_t left, forged = UINT32_MAX;

	(void)state;
	one_full_ten_staged(ring, &t, &v);
	assert_int_equal(shmt_full_blocks(&v, NULL, &order[1]), 1);
	for (uint32_t i = 0; i < v.nblocks && forged == UINT32_MAX; i++)
		if (load_relaxed(&shmt_block_at(&v, i)->state) == SHMT_BLOCK_FREE)
			forged = i;
	assert_int_not_equal(forged, UINT32_MAX);
	fb = shmt_block_at(&v, forged);
	store_relaxed(&fb->written, 5);
	store_relaxed(&fb->taken, 6);
	store_relaxed(&fb->claim_no, 0);
	store_relaxed(&fb->state, SHMT_BLOCK_FULL);
	__atomic_fetch_add(&v.h->full_blocks.v, 1, __ATOMIC_RELAXED);
	order[0] = (struct shmt_full){ .no = 0, .i = forged, .seq = UINT64_MAX };

	assert_int_equal(shmt_lock(&v, 1000000000ull), 0);
	assert_int_equal(shmt_flush_full_locked(&v, order, 2, 4096,
						SHMT_FLUSH_KEEP | SHMT_FLUSH_IN_PLACE, &left), 64);
	shmt_unlock(&v);
	assert_int_equal(left, 0);
	assert_int_equal(load_relaxed(&fb->state), SHMT_BLOCK_FREE);
	assert_int_equal(load_relaxed(&shmt_block_at(&v, order[1].i)->state), SHMT_BLOCK_SEQUENCED);
	assert_int_equal(order[1].seq, 0);
	assert_int_equal(order[1].n, 64);
	assert_int_equal(shmt_ring_head(&v), 64);
	assert_int_equal(load_relaxed(&v.h->full_blocks.v), 0);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_blocks_handed_over_in_order),
		cmocka_unit_test(test_open_span_moves_with_its_thread),
		cmocka_unit_test(test_killed_claiming),
		cmocka_unit_test(test_killed_handing_over),
		cmocka_unit_test(test_killed_between_its_own_hand_over_and_the_lock),
		cmocka_unit_test(test_copies_when_no_block_is_free_or_ring_is_older),
		cmocka_unit_test(test_copy_moves_only_the_threads_own_blocks),
		cmocka_unit_test(test_full_block_without_room_drops_without_the_lock),
		cmocka_unit_test(test_no_block_free_drops_while_the_collector_lives),
		cmocka_unit_test(test_no_block_free_copies_while_the_collector_drains_nothing),
		cmocka_unit_test(test_no_block_free_copies_while_the_collector_keeps_up),
		cmocka_unit_test(test_staged_blocks_listed_then_flushed_in_the_life_listed),
		cmocka_unit_test(test_warm_reads_what_the_flush_copies_within_the_geometry),
		cmocka_unit_test(test_asked_block_handed_over_at_the_next_call),
		cmocka_unit_test(test_ask_for_another_life_cleared_unanswered),
		cmocka_unit_test(test_full_blocks_read_in_place),
		cmocka_unit_test(test_blocks_sequenced_by_their_thread_taken_over_by_a_collector),
		cmocka_unit_test(test_own_sequencing_stops_at_a_quarter_of_the_blocks),
		cmocka_unit_test(test_blocks_left_by_a_collector_sequenced_before_the_threads_next),
		cmocka_unit_test(test_snapshot_reads_the_blocks_kept_in_place),
		cmocka_unit_test(test_blocks_kept_for_readers_freed_while_blocks_wait),
		cmocka_unit_test(test_block_half_freed_is_freed_by_the_next_collector),
		cmocka_unit_test(test_collector_killed_sequencing_before_head),
		cmocka_unit_test(test_collector_killed_sequencing_after_head),
		cmocka_unit_test(test_idle_block_copied_without_the_lock),
		cmocka_unit_test(test_dead_threads_block_copied_without_the_lock),
		cmocka_unit_test(test_idle_copy_freed_when_the_thread_flushed_first),
		cmocka_unit_test(test_idle_copy_not_published_into_a_full_ring),
		cmocka_unit_test(test_idle_copies_beyond_a_hold_wait_for_the_next),
		cmocka_unit_test(test_idle_block_copied_under_the_lock_when_few_blocks_are_free),
		cmocka_unit_test(test_collector_killed_publishing_a_copy),
		cmocka_unit_test(test_forged_full_block_neither_stops_the_list_nor_counts),
	};

	if (collector_bin_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
