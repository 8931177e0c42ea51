/* SPDX-License-Identifier: MIT */
/*
 * test_snapshot.c - `shmtrace snapshot` of a live ring: producers writing
 * at full speed into an overwrite ring that wraps hundreds of times while
 * it is copied. Each snapshot holds every record of its window once, none
 * torn, and what producers overwrote during the copy is counted to the
 * record (the records in the file are the window's slots, less those
 * counted, plus the staging blocks'), with the records flushes move out
 * of the blocks during the copy taken once; it completes with the ring's
 * lock held by a stopped process (it never takes it), leaves the tail and
 * the counters as they were, bounds its size by leaving the oldest out,
 * and exports with its trigger markers, names and window; a head a peer
 * flips by 2^62 while it copies does not make it read 2^62 slots.
 */
#include "cli_run.h"
#include "snapshot_read.h"

#define WRAPS	200u	/* laps of the ring before the snapshots */

/* `shmtrace snapshot RING -o PATH [opts...]`, which must succeed, under a
 * hang guard; its file read into s. */
static void snapshot(const char *ring, const char *path, const char *opt, const char *arg,
		     struct snap_file *s)
{
	char *argv[] = { bin, "snapshot", (char *)ring, "-o", (char *)path, (char *)opt,
			 (char *)arg, NULL };

	int rc = run_for(NULL, tmp("snap.err"), argv, 120);

	if (rc != 0)
		print_file(tmp("snap.err"));
	assert_int_equal(rc, 0);
	snap_read(path, s);
}

/* A fresh overwrite ring of cap records named ring. */
static void overwrite_ring(const char *ring, uint32_t cap)
{
	struct shmtrace_ring_config cfg;

	small_cfg(&cfg, cap, SHMTRACE_MODE_OVERWRITE);
	shmtrace_ring_unlink(ring);
	assert_true(shmtrace_ring_create(ring, &cfg) >= 0);
}

/* The file holds the window's slots less those the copy counted lost,
 * plus the blocks' records: the copy's accounting, exact. */
static void assert_window_exact(const struct snap_file *s)
{
	const struct shmt_cap_snapshot *in = &s->h.snapshot;

	assert_true(s->ended);
	assert_int_equal(in->cause, SHMT_SNAP_COMMAND);
	assert_true(in->end_seq >= in->first_seq);
	assert_int_equal(s->loss.overwritten, in->overwritten);
	assert_int_equal((uint64_t)s->n, in->end_seq - in->first_seq - in->overwritten -
					 s->loss.torn + in->staged);
	/* no slot of a ring that only producers write is torn */
	assert_int_equal(s->loss.torn, 0);
}

/* The records of pid, its one thread's spans named name whose dur is
 * their index, in a snapshot of a ring only it writes. */
static void assert_slots_and_blocks_in_order(const struct snap_file *s, uint32_t pid,
					     uint32_t name)
{
	const struct shmt_cap_snapshot *in = &s->h.snapshot;
	uint64_t c = 0, slots = 0, next = 0;
	bool any = false;

	for (size_t i = 0; i < s->n; i++) {
		const struct shmt_record *r = &s->r[i];

		assert_int_equal(r->pid, pid);
		assert_int_equal(r->name, name);
		assert_int_equal(r->flow, r->dur * 7 + 1);
		if (s->seq[i] < in->end_seq) {
			if (!any)
				c = r->dur - s->seq[i];
			any = true;
			assert_int_equal(r->dur - s->seq[i], c);
			slots++;
			continue;
		}
		/* the block's: from the index after the window's last slot on */
		if (!next)
			next = any ? c + in->end_seq : r->dur;
		assert_int_equal(r->dur, next);
		next++;
	}
	assert_int_equal(slots + in->overwritten, in->end_seq - in->first_seq);
}

/* One producer thread: a snapshot holds each of its records once, in
 * the order written, or counts it as overwritten during the copy; with
 * the producer paused between calls, it holds the whole window. */
static void test_one_producer_every_record_once_or_counted(void **state)
{
	const char *ring = test_ring_name("snap1");
	const uint32_t cap = 65536;
	struct snap_file *s = calloc(1, sizeof(*s));
	struct snap_tally t;
	struct shmt_view v;
	uint32_t tick;
	int ready;
	pid_t pid;

	(void)state;
	overwrite_ring(ring, cap);
	pid = churn_start(ring, 1, (uint64_t)WRAPS * cap, true, &ready);
	ring_view_rw(ring, &v);
	for (int k = 0; k < 8; k++) {
		uint64_t tail = shmt_ring_tail(&v), head = shmt_ring_head(&v);

		snapshot(ring, tmp("one.cap"), NULL, NULL, s);
		assert_window_exact(s);
		assert_true(s->h.snapshot.end_seq >= (uint64_t)WRAPS * cap);
		tick = snap_string(s, "tick");
		snap_tally(s, (uint32_t)pid, snap_tid_of(s, (uint32_t)pid, tick), tick, true, &t);
		/* a copy the producer lapped whole (the snapshot's process
		 * descheduled for a lap) holds none, and counts them */
		assert_int_equal(t.dup, 0);
		assert_int_equal(t.torn, 0);
		/* one thread wrote every slot: a record's index is its slot's
		 * sequence moved by one constant, the window's losses are the
		 * slots without their record, and the records of its block
		 * follow the window's last slot, none missing, none twice */
		assert_slots_and_blocks_in_order(s, (uint32_t)pid, tick);
		assert_true(snap_has_process(s, (uint32_t)pid, "churn"));
		/* nothing of the ring moved but by its producer */
		assert_int_equal(shmt_ring_tail(&v), tail);
		assert_true(shmt_ring_head(&v) >= head);
		snap_free(s);
	}
	/* nothing moves during the copy: every slot of the window holds its
	 * record, and the block's follow */
	churn_pause(ready, 1);
	snapshot(ring, tmp("one.cap"), NULL, NULL, s);
	assert_window_exact(s);
	assert_int_equal(s->h.snapshot.overwritten, 0);
	assert_int_equal(s->h.snapshot.end_seq - s->h.snapshot.first_seq, cap);
	tick = snap_string(s, "tick");
	snap_tally(s, (uint32_t)pid, snap_tid_of(s, (uint32_t)pid, tick), tick, true, &t);
	assert_int_equal(t.found, (uint64_t)cap + s->h.snapshot.staged);
	assert_int_equal(t.missing + t.dup + t.torn, 0);
	assert_slots_and_blocks_in_order(s, (uint32_t)pid, tick);
	churn_resume();
	snap_free(s);
	free(s);
	shmt_view_close(&v);
	churn_stop(pid, ready);
	shmtrace_ring_unlink(ring);
}

/*
 * Four threads in a ring of 64-record blocks, each flushing every 32
 * records: flushes move blocks' records into the slots all through the
 * copy. None is copied twice (from its block and from its slot), none is
 * lost uncounted.
 */
static void test_blocks_flushed_during_the_copy_are_copied_once(void **state)
{
	const char *ring = test_ring_name("snap4");
	int ready;
	pid_t pid;

	(void)state;
	overwrite_ring(ring, 4096);
	pid = churn_start(ring, 4, (uint64_t)WRAPS * 4096 / 4, true, &ready);
	for (int k = 0; k < 8; k++) {
		struct snap_file *s = calloc(1, sizeof(*s));
		uint32_t tids[8];
		uint64_t missing = 0;
		int ntids = 0;

		snapshot(ring, tmp("four.cap"), NULL, NULL, s);
		assert_window_exact(s);
		for (size_t i = 0; i < s->n; i++) {
			int j;

			for (j = 0; j < ntids && tids[j] != s->r[i].tid; j++)
				;
			if (j == ntids && ntids < 8)
				tids[ntids++] = s->r[i].tid;
		}
		for (int j = 0; j < ntids; j++) {
			struct snap_tally t;

			snap_tally(s, (uint32_t)pid, tids[j], snap_string(s, "tick"), true, &t);
			assert_int_equal(t.dup, 0);
			assert_int_equal(t.torn, 0);
			missing += t.missing;
		}
		/* a thread's gaps are slots of the window lost to the copy
		 * (counted); a lost slot before a thread's first record of the
		 * window is counted without being a gap of it */
		assert_true(missing <= s->h.snapshot.overwritten);
		snap_free(s);
		free(s);
	}
	churn_stop(pid, ready);
	shmtrace_ring_unlink(ring);
}

/* A process takes the ring's lock and stops (SIGSTOP) holding it. */
static pid_t stop_in_lock(const char *ring)
{
	int p[2], status;
	pid_t owner;
	char c;

	assert_int_equal(pipe(p), 0);
	owner = fork();
	assert_true(owner >= 0);
	if (owner == 0) {
		struct shmt_view v;
		char e[256];

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (shmt_view_open(ring, SHMT_OPEN_WRITE, &v, e, sizeof(e)) < 0 ||
		    shmt_lock(&v, 1000000000ull) < 0 || write(p[1], "h", 1) != 1)
			_exit(1);
		raise(SIGSTOP);
		shmt_unlock(&v);
		_exit(0);
	}
	assert_int_equal(read(p[0], &c, 1), 1);
	assert_int_equal(waitpid(owner, &status, WUNTRACED), owner);
	assert_true(WIFSTOPPED(status));
	close(p[0]);
	close(p[1]);
	return owner;
}

/* Whether a thread's block holds records not yet in the ring; at most
 * 20 s for one to (polled: nothing signals a record staged). */
static void wait_staged(const struct shmt_view *v)
{
	for (int k = 0; k < 20000; k++) {
		for (uint32_t i = 0; i < v->nblocks; i++) {
			struct shmt_block *b = shmt_block_at(v, i);

			if (load_relaxed(&b->state) == SHMT_BLOCK_OWNED &&
			    load_acquire(&b->written) > load_relaxed(&b->taken))
				return;
		}
		usleep(1000);
	}
	fail_msg("no record staged");
}

/*
 * The snapshot never takes the lock: with it held by a stopped process
 * while a producer writes on, it completes, with the producer's records
 * (those it staged: it cannot flush them), and leaves the tail, the
 * lock's repair count and the loss counters as they were.
 */
static void test_completes_with_the_lock_held_by_a_stopped_process(void **state)
{
	const char *ring = test_ring_name("snaplock");
	const uint32_t cap = 16384;
	struct shmt_loss before, after;
	struct shmt_ring_status st0, st1;
	struct snap_file *s = calloc(1, sizeof(*s));
	struct shmt_view v;
	int ready, status;
	pid_t pid, owner;

	(void)state;
	overwrite_ring(ring, cap);
	pid = churn_start(ring, 1, (uint64_t)WRAPS * cap, true, &ready);
	owner = stop_in_lock(ring);
	ring_view_rw(ring, &v);
	/* the producer stages on in its block, unable to flush */
	wait_staged(&v);
	shmt_ring_status(&v, &st0);
	shmt_loss_read(&v, &before, false);
	snapshot(ring, tmp("lock.cap"), NULL, NULL, s);
	assert_window_exact(s);
	assert_true(s->n > 0);
	assert_true(s->h.snapshot.staged > 0);
	shmt_ring_status(&v, &st1);
	shmt_loss_read(&v, &after, false);
	assert_int_equal(st1.tail, st0.tail);
	assert_int_equal(st1.lock_recoveries, st0.lock_recoveries);
	/* counters only grow: the producer's lock timeouts, nothing reset */
	assert_true(after.lock_dropped >= before.lock_dropped);
	assert_int_equal(after.overwritten, before.overwritten);
	assert_int_equal(after.torn, before.torn);
	assert_int_equal(kill(owner, SIGCONT), 0);
	assert_int_equal(waitpid(owner, &status, 0), owner);
	shmt_view_close(&v);
	churn_stop(pid, ready);
	snap_free(s);
	free(s);
	shmtrace_ring_unlink(ring);
}

/* Spans of the calling process: n of them named name, starting at t0
 * with ts one apart, each 100 ns long. */
static void spans_at(shmtrace_t *t, const char *name, uint64_t t0, uint64_t n)
{
	uint32_t cat = shmtrace_intern(t, "test"), nm = shmtrace_intern(t, name);

	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(shmtrace_span(t, cat, nm, t0 + i, t0 + i + 100, 0), 0);
	assert_int_equal(shmtrace_flush(t), 0);
}

/*
 * --last D: the window begins with the first record that ends in the last
 * D, here the first of those written a millisecond ago after a thousand
 * of twenty seconds ago (D ten seconds: however slowly the snapshot
 * starts);
 * --max-size: the oldest are left out, counted, until
 * the file fits, the newest kept.
 */
static void test_last_and_max_size_bound_the_window(void **state)
{
	const char *ring = test_ring_name("snaplast");
	struct snap_file *s = calloc(1, sizeof(*s));
	uint32_t recent;
	struct stat st;
	shmtrace_t *t;

	(void)state;
	overwrite_ring(ring, 16384);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	spans_at(t, "old", shmtrace_now() - 20000000000ull, 1000);
	spans_at(t, "recent", shmtrace_now() - 1000000ull, 9000);
	snapshot(ring, tmp("last.cap"), "--last", "10s", s);
	assert_window_exact(s);
	assert_int_equal(s->h.snapshot.first_seq, 1000);
	assert_int_equal(s->h.snapshot.end_seq, 10000);
	assert_int_equal(s->n, 9000);
	assert_true(s->h.snapshot.from_ns >= s->h.snapshot.trigger_ns - 10000000000ull);
	recent = snap_string(s, "recent");
	for (size_t i = 0; i < s->n; i++)
		assert_int_equal(s->r[i].name, recent);
	snap_free(s);

	snapshot(ring, tmp("max.cap"), "--max-size", "40k", s);
	assert_window_exact(s);
	assert_int_equal(stat(tmp("max.cap"), &st), 0);
	assert_true(st.st_size <= 40 * 1024);
	assert_true(s->h.snapshot.cut > 0);
	assert_int_equal(s->h.snapshot.first_seq, s->h.snapshot.cut);
	/* the newest are kept: the last span written is the last one */
	assert_int_equal(s->seq[s->n - 1], 9999);
	snap_free(s);
	free(s);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/*
 * --max-size that leaves out every frame of the window: the window's
 * losses go with it, and those the copy counted past it stay: here a
 * record a writer of the ring forged among those a thread has staged
 * (torn, counted), which a cut that zeroed the counts lost silently.
 */
static void test_max_size_cutting_the_whole_window_keeps_the_blocks_losses(void **state)
{
	const char *ring = test_ring_name("snapcut");
	struct snap_file *s = calloc(1, sizeof(*s));
	uint32_t cat, nm, forged = 0;
	struct shmt_view v;
	char err[256];
	shmtrace_t *t;

	(void)state;
	overwrite_ring(ring, 16384);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	spans_at(t, "old", shmtrace_now() - 1000000ull, 10000);
	cat = shmtrace_intern(t, "test");
	nm = shmtrace_intern(t, "staged");
	for (int i = 0; i < 10; i++)
		assert_int_equal(shmtrace_span(t, cat, nm, 1000 + (uint64_t)i, 1100 + (uint64_t)i, 0), 0);
	/* the thread's staged records: one made no record of any kind */
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	for (uint32_t i = 0; i < v.nblocks && !forged; i++) {
		struct shmt_block *b = shmt_block_at(&v, i);

		if (b->written - b->taken == 10) {
			shmt_block_recs(b)[(b->taken + 3) & (v.block_records - 1)].commit = 0x7f;
			forged = 1;
		}
	}
	assert_int_equal(forged, 1);
	snapshot(ring, tmp("cut.cap"), "--max-size", "4k", s);
	assert_int_equal(s->h.snapshot.first_seq, s->h.snapshot.end_seq);
	assert_true(s->h.snapshot.cut > 0);
	assert_int_equal(s->loss.torn, 1);
	assert_int_equal(s->h.snapshot.overwritten, 0);
	assert_int_equal(s->n, 9);
	snap_free(s);
	free(s);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* A peer of the ring flipping its head between two values, 2^62 apart,
 * until told to stop; then the true one again. */
struct head_flipper {
	struct shmt_view v;
	uint64_t head;
	int stop;
};

static void *flip_head(void *arg)
{
	struct head_flipper *f = arg;

	while (!load_relaxed(&f->stop)) {
		store_relaxed(&f->v.h->head.v, f->head + (1ull << 62));
		store_relaxed(&f->v.h->head.v, f->head);
	}
	return NULL;
}

/*
 * A head a peer moves on by 2^62 between the window's end and the
 * blocks' second settling (it flips it back and forth while snapshots
 * are taken): each snapshot still completes within seconds, reading at
 * most a ring's worth of slots past the window.
 */
static void test_head_flipped_by_a_peer_never_read_slot_by_slot(void **state)
{
	const char *ring = test_ring_name("snapflip");
	struct head_flipper f = { .stop = 0 };
	shmtrace_t *t;
	pthread_t th;

	(void)state;
	overwrite_ring(ring, 4096);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	/* the ring wrapped, and a block holds records a snapshot settles */
	spans_at(t, "flip", shmtrace_now(), 4096 + 20);
	ring_view_rw(ring, &f.v);
	f.head = shmt_ring_head(&f.v);
	assert_int_equal(pthread_create(&th, NULL, flip_head, &f), 0);
	for (int k = 0; k < 8; k++) {
		char *argv[] = { bin, "snapshot", (char *)ring, "-o", (char *)tmp("flip.cap"), NULL };
		int rc = run_for(NULL, tmp("flip.err"), argv, 20);

		if (rc != 0)
			print_file(tmp("flip.err"));
		assert_int_equal(rc, 0);
	}
	store_relaxed(&f.stop, 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	shmt_view_close(&f.v);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/*
 * The export of a snapshot: its trigger markers, the spans open when it
 * was taken (unfinished), the names of the process and thread, and what
 * it is (metadata and an instant: the ring, the cause, the window, what
 * the copy lost), with no loss unaccounted for.
 */
static void test_export_shows_triggers_open_spans_and_the_window(void **state)
{
	const char *ring = test_ring_name("snapexp");
	struct shmtrace_open_span sp;
	char *argv[] = { bin, "export", (char *)tmp("exp.cap"), "-o", (char *)tmp("exp.json"),
			 NULL };
	struct snap_file *s = calloc(1, sizeof(*s));
	shmtrace_t *t;

	(void)state;
	overwrite_ring(ring, 16384);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	assert_int_equal(shmtrace_set_thread_name(t, "snapper"), 0);
	spans_at(t, "before", shmtrace_now(), 100);
	assert_int_equal(shmtrace_begin(t, &sp, shmtrace_intern(t, "test"),
				       shmtrace_intern(t, "waiting"), 0), 0);
	assert_int_equal(shmtrace_trigger(t, "request timed out", 0), 0);
	assert_int_equal(shmtrace_trigger(NULL, "x", 0), -EINVAL);
	assert_int_equal(shmtrace_trigger(t, "x", 1), -EINVAL);
	snapshot(ring, tmp("exp.cap"), NULL, NULL, s);
	assert_window_exact(s);
	/* the trigger and the open span were staged: the copy has them */
	assert_true(s->h.snapshot.staged >= 2);
	assert_true(snap_has_thread(s, (uint32_t)getpid(), (uint32_t)gettid(), "snapper"));
	assert_int_equal(run(NULL, tmp("exp.err"), argv), 0);
	expect_in(tmp("exp.json"), "\"name\":\"trigger: request timed out\"");
	expect_in(tmp("exp.json"), "\"args\":{\"trigger\":\"request timed out\"}");
	expect_in(tmp("exp.json"), "\"name\":\"waiting\",\"args\":{\"unfinished\":true}");
	expect_in(tmp("exp.json"), "\"name\":\"snapper\"");
	expect_in(tmp("exp.json"), "\"snapshots\":[{\"ring\":");
	expect_in(tmp("exp.json"), "\"cause\":\"command\"");
	expect_in(tmp("exp.json"), "\"triggers\":1,");
	expect_in(tmp("exp.json"), "\"unaccounted\":0");
	expect_in(tmp("exp.json"), "shmtrace: snapshot of ring '");
	expect_not_in(tmp("exp.err"), "no counter accounts for");
	shmtrace_end(&sp);
	snap_free(s);
	free(s);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* A ring made before triggers (format 1.8): its readers would take the
 * record kind for a torn slot, so none is written (-EOPNOTSUPP), and the
 * header's reserved bytes are left alone. */
static void test_no_trigger_into_a_ring_before_triggers(void **state)
{
	const char *ring = test_ring_name("snapold");
	struct ring_dump d;
	struct shmt_view v;
	shmtrace_t *t;

	(void)state;
	overwrite_ring(ring, 4096);
	ring_view_rw(ring, &v);
	v.h->major = 1;	/* a format 1.x minor */
	v.h->minor = SHMT_MINOR_TRIGGER - 1;
	shmt_view_close(&v);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	assert_int_equal(shmtrace_trigger(t, "too old", 0), -EOPNOTSUPP);
	assert_int_equal(shmtrace_flush(t), 0);
	ring_dump(ring, &d);
	assert_int_equal(d.n, 0);
	free(d.recs);
	ring_view_rw(ring, &v);
	assert_int_equal(v.h->triggers.v, 0);
	assert_int_equal(shmt_ring_triggers(&v), 0);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* What it is given wrong: one line saying so, and the exit status. */
static void test_bad_input_is_said_in_one_line(void **state)
{
	const char *ring = test_ring_name("snapbad");
	char *no_out[] = { bin, "snapshot", (char *)ring, NULL };
	char *no_ring[] = { bin, "snapshot", (char *)test_ring_name("snapnone"), "-o",
			    (char *)tmp("none.cap"), NULL };
	char *bad_last[] = { bin, "snapshot", (char *)ring, "-o", (char *)tmp("x.cap"), "--last",
			     "soon", NULL };
	char *two[] = { bin, "snapshot", (char *)ring, (char *)ring, "-o", (char *)tmp("x.cap"),
			NULL };
	char *link_out[] = { bin, "snapshot", (char *)ring, "-o", (char *)tmp("link.cap"), NULL };

	(void)state;
	overwrite_ring(ring, 4096);
	run_says(2, no_out, "no output given", NULL);
	run_says(1, no_ring, "shmtrace snapshot: ", NULL);
	run_says(2, bad_last, "invalid duration 'soon' for --last", NULL);
	run_says(2, two, "one ring at a time", NULL);
	assert_int_equal(symlink("/tmp/elsewhere", tmp("link.cap")), 0);
	run_says(1, link_out, "symbolic link", NULL);
	shmtrace_ring_unlink(ring);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("snapshot", false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_producer_every_record_once_or_counted),
		cmocka_unit_test(test_blocks_flushed_during_the_copy_are_copied_once),
		cmocka_unit_test(test_completes_with_the_lock_held_by_a_stopped_process),
		cmocka_unit_test(test_last_and_max_size_bound_the_window),
		cmocka_unit_test(test_max_size_cutting_the_whole_window_keeps_the_blocks_losses),
		cmocka_unit_test(test_head_flipped_by_a_peer_never_read_slot_by_slot),
		cmocka_unit_test(test_export_shows_triggers_open_spans_and_the_window),
		cmocka_unit_test(test_no_trigger_into_a_ring_before_triggers),
		cmocka_unit_test(test_bad_input_is_said_in_one_line),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
