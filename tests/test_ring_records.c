/* SPDX-License-Identifier: MIT */
/*
 * test_ring_records.c - records through the ring, in one process: they
 * read back as written, a full ring keeps the first (discard) or the last
 * (overwrite) and counts the rest, a call whose flush found the ring full
 * says so, unfinished slots are refused, extents (format 2.0) are read
 * only as the geometry and the head allow, a thread's exit publishes its
 * block (in place, in a discard ring with no collector), a thread's slots
 * of handles another thread closed serve its next handles, the scope macros
 * and the default handle, the clock and flow ids, and open spans keep
 * their flow.
 */
#include <errno.h>
#include <pthread.h>

#include "helpers.h"

static void test_records_round_trip(void **state)
{
	const char *name = test_ring_name("rt");
	struct ring_dump d;
	shmtrace_t *t;
	uint32_t cat, nm;
	char buf[64];
	struct shmt_view v;
	char err[256];

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	cat = shmtrace_intern(t, "cat");
	nm = shmtrace_intern(t, "work");
	assert_true(cat > 0 && nm > 0 && cat != nm);
	assert_int_equal(shmtrace_intern(t, "cat"), cat);
	assert_int_equal(shmtrace_span(t, cat, nm, 1000, 1500, 42), 0);
	/* a role is recorded with the id, the field as given */
	assert_int_equal(shmtrace_instant(t, cat, nm, shmtrace_flow_end(7)), 0);
	assert_int_equal(shmtrace_counter(t, cat, nm, -5), 0);
	/* staged, not yet in the ring, but already readable post-mortem */
	ring_dump(name, &d);
	assert_int_equal(d.n, 3);
	free(d.recs);
	assert_int_equal(shmtrace_flush(t), 0);
	ring_dump(name, &d);
	assert_int_equal(d.n, 3);
	assert_int_equal(d.torn, 0);
	assert_int_equal(SHMT_COMMIT_KIND(d.recs[0].commit), SHMTRACE_KIND_SPAN);
	assert_int_equal(d.recs[0].ts, 1000);
	assert_int_equal(d.recs[0].dur, 500);
	assert_int_equal(d.recs[0].flow, 42);
	assert_int_equal(d.recs[0].pid, getpid());
	assert_int_equal(d.recs[0].tid, gettid());
	assert_int_equal(d.recs[0].name, nm);
	assert_int_equal(d.recs[0].cat, cat);
	assert_int_equal(SHMT_COMMIT_KIND(d.recs[1].commit), SHMTRACE_KIND_INSTANT);
	assert_true(d.recs[1].flow == (7 | SHMTRACE_FLOW_TERMINATES));
	assert_int_equal(SHMT_COMMIT_KIND(d.recs[2].commit), SHMTRACE_KIND_COUNTER);
	assert_int_equal((int64_t)d.recs[2].dur, -5);
	free(d.recs);

	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
	assert_int_equal(shmt_ring_string(&v, nm, buf, sizeof(buf)), 4);
	assert_string_equal(buf, "work");
	assert_int_equal(shmt_ring_string(&v, 60000, buf, sizeof(buf)), -ENOENT);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

/* With no reader, a discard ring keeps the first records and counts the
 * rest; an overwrite ring keeps the last and counts what it overwrote. */
static void fill_unread(uint32_t mode, uint64_t *dropped, uint64_t *overwritten, struct ring_dump *d)
{
	const char *name = test_ring_name(mode ? "ow" : "disc");
	struct shmtrace_ring_config c;
	struct shmtrace_stats st;
	shmtrace_t *t;

	small_cfg(&c, 1024, mode);
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	for (uint64_t i = 0; i < 5000; i++)
		assert_true(shmtrace_span(t, 1, 1, i, i + 1, 0) == 0 || mode == 0);
	shmtrace_flush(t);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	*dropped = st.dropped;
	*overwritten = st.overwritten;
	shmtrace_close(t);
	ring_dump(name, d);
	shmtrace_ring_unlink(name);
}

static void test_full_discard_ring_keeps_the_first_counts_the_rest(void **state)
{
	uint64_t dropped, overwritten;
	struct ring_dump d;

	(void)state;
	fill_unread(SHMTRACE_MODE_DISCARD, &dropped, &overwritten, &d);
	assert_int_equal(d.n, 1024);
	assert_int_equal(dropped, 5000 - 1024);
	assert_int_equal(overwritten, 0);
	assert_int_equal(d.torn, 0);
	for (size_t i = 0; i < d.n; i++)
		assert_int_equal(d.recs[i].ts, i);	/* the first ones are kept */
	free(d.recs);
}

static void test_full_overwrite_ring_keeps_the_last_counts_the_rest(void **state)
{
	uint64_t dropped, overwritten;
	struct ring_dump d;

	(void)state;
	fill_unread(SHMTRACE_MODE_OVERWRITE, &dropped, &overwritten, &d);
	assert_int_equal(d.n, 1024);
	assert_int_equal(dropped, 0);
	assert_int_equal(overwritten, 5000 - 1024);
	assert_int_equal(d.torn, 0);
	for (size_t i = 0; i < d.n; i++)
		assert_int_equal(d.recs[i].ts, 5000 - 1024 + i);	/* the last ones */
	free(d.recs);
}

#define NOSPC_SPANS	100000u
#define NOSPC_CAP	1024u

/*
 * Writes NOSPC_SPANS spans into ring, a fresh discard ring of NOSPC_CAP
 * records and `blocks` staging blocks that no collector drains, and
 * flushes: the ring keeps the first NOSPC_CAP and counts the rest
 * dropped. Returns how many span calls returned -ENOSPC (the others
 * returned 0).
 */
static uint64_t spans_past_full(const char *ring, uint32_t blocks)
{
	struct shmtrace_ring_config c = { .capacity = NOSPC_CAP, .blocks = blocks };
	struct shmtrace_stats st;
	uint64_t enospc = 0, ok = 0;
	shmtrace_t *t;

	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (uint64_t i = 0; i < NOSPC_SPANS; i++) {
		int ret = shmtrace_span(t, 1, 1, i, i + 1, 0);

		if (ret == -ENOSPC)
			enospc++;
		else if (ret == 0)
			ok++;
	}
	assert_int_equal(enospc + ok, NOSPC_SPANS);
	/* the thread's last block is still staged: shmtrace_flush() copies
	 * it into the full ring, which drops it, and says so */
	assert_int_equal(shmtrace_flush(t), -ENOSPC);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	assert_int_equal(st.dropped, NOSPC_SPANS - NOSPC_CAP);
	shmtrace_close(t);
	return enospc;
}

/* The records staged after the last call that made room, when a call
 * makes room every `every` records: those the final flush drops. */
static uint64_t last_staged(uint64_t every)
{
	return NOSPC_SPANS - (NOSPC_SPANS - 1) / every * every;
}

/*
 * The ring holds the first NOSPC_CAP spans, none torn: the first
 * `in_place` in blocks sequenced where they are (extents of a block each,
 * their slots never written), the rest copied into the slots.
 */
static void check_kept_first(const char *ring, uint64_t in_place)
{
	struct shmt_extent e[NOSPC_CAP / SHMT_BLOCK_RECORDS_MIN];
	struct shmt_view v;
	struct ring_dump d;
	char err[256];
	uint64_t block;

	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	block = v.block_records;
	assert_int_equal(shmt_ring_head(&v), NOSPC_CAP);
	assert_int_equal(shmt_ring_extents(&v, 0, NOSPC_CAP, e, NOSPC_CAP / SHMT_BLOCK_RECORDS_MIN),
			 in_place / block);
	for (uint64_t k = 0; k < in_place / block; k++) {
		assert_int_equal(e[k].seq, k * block);
		assert_int_equal(e[k].n, block);
	}
	for (uint64_t s = 0; s < NOSPC_CAP; s++)
		assert_int_equal(shmt_commit_is(load_relaxed(&v.records[s].commit), s),
				 s >= in_place);
	ring_dump_view(&v, &d);
	assert_int_equal(d.n, NOSPC_CAP);
	assert_int_equal(d.torn, 0);
	for (size_t i = 0; i < d.n; i++)
		assert_int_equal(d.recs[i].ts, i);	/* the first ones are kept */
	free(d.recs);
	shmt_view_close(&v);
}

/*
 * A call whose block found the ring full returns -ENOSPC, once per block
 * that dropped records; the others return 0. With no collector, a thread
 * in a discard ring that holds under a quarter of its blocks' records
 * (1024 / 4 blocks of 64 here, more than the ring) fills its block
 * whole, and the call after that sequences it in place: the first
 * NOSPC_CAP / 64 blocks fit, every later one is dropped whole (its
 * records fit nowhere) and its next call says so. The last block is
 * dropped by shmtrace_flush(), not by a span call.
 */
static void test_span_whose_flush_dropped_returns_enospc(void **state)
{
	const char *ring = test_ring_name("nospc");
	const uint64_t block = shmt_block_records_for(NOSPC_CAP, SHMT_RING_MINOR);
	uint64_t enospc;

	(void)state;
	enospc = spans_past_full(ring, 0);
	assert_int_equal(enospc, (NOSPC_SPANS - NOSPC_CAP - last_staged(block)) / block);
	check_kept_first(ring, NOSPC_CAP);
	shmtrace_ring_unlink(ring);
}

/*
 * The same in the copy path: in a ring of 16 blocks, a quarter of the
 * blocks' records is 4 blocks, sequenced in place; past that a thread
 * copies its block into the slots once half of it is staged, and a call
 * whose copy found the ring full returns -ENOSPC, once per copy that
 * dropped. The ring fills at the end of a half block (4 blocks and
 * NOSPC_CAP are whole half blocks), so every later copy drops a half
 * block, and the final flush the last one.
 */
static void test_span_whose_copy_dropped_returns_enospc(void **state)
{
	const char *ring = test_ring_name("nospc-copy");
	const uint64_t block = shmt_block_records_for(NOSPC_CAP, SHMT_RING_MINOR);
	uint64_t enospc;

	(void)state;
	enospc = spans_past_full(ring, 16);
	assert_int_equal(enospc, (NOSPC_SPANS - NOSPC_CAP - last_staged(block / 2)) / (block / 2));
	check_kept_first(ring, 16 / 4 * block);
	shmtrace_ring_unlink(ring);
}

static void test_reader_refuses_unfinished_slots(void **state)
{
	const char *name = test_ring_name("torn");
	struct shmt_record r;
	struct shmt_view v;
	char err[256];
	shmtrace_t *t;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	for (int i = 0; i < 100; i++)
		shmtrace_span(t, 1, 1, i, i + 1, 0);
	shmtrace_flush(t);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	assert_int_equal(shmt_ring_read(&v, 5, &r), 0);
	v.records[5].commit = 0;				/* half-written */
	assert_int_equal(shmt_ring_read(&v, 5, &r), -EAGAIN);
	v.records[6].commit = SHMT_COMMIT(6 + 1, 1);		/* another sequence */
	assert_int_equal(shmt_ring_read(&v, 6, &r), -EAGAIN);
	v.records[7].commit = SHMT_COMMIT(7, 200);		/* unknown kind */
	assert_int_equal(shmt_ring_read(&v, 7, &r), -EAGAIN);
	assert_int_equal(shmt_ring_read(&v, 100, &r), -EAGAIN);	/* never written */
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

/*
 * A commit word keeps 24 bits of the sequence: in a ring of 2^24 records
 * one lap later, and in any ring a multiple of 2^24 sequences later, a
 * slot's record names the earlier sequence too. A reader that asked for
 * the earlier one (a snapshot or an export that a producer lapped while it
 * copied) must not take the later record for it: the head past the slot
 * says it was given to another lap, which is counted as lapped.
 */
static void test_a_record_2_to_the_24_later_is_not_read_as_the_earlier(void **state)
{
	const char *name = test_ring_name("lap24");
	struct shmtrace_ring_config c = { .capacity = 1 << 12, .mode = SHMTRACE_MODE_OVERWRITE };
	const uint64_t seq = 100, later = seq + (1u << 24);
	struct shmt_record r = { .ts = 1, .pid = 1, .tid = 1, .commit = SHMTRACE_KIND_INSTANT };
	struct shmt_view v;
	char err[256];

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	assert_int_equal(shmt_lock(&v, 0), 0);
	v.h->head.v = seq;
	v.h->tail.v = seq;
	assert_int_equal(shmt_write_direct_locked(&v, &r), 0);
	/* the ring as 2^24 sequences later: the slot rewritten, its word the same */
	v.h->head.v = later;
	v.h->tail.v = later - v.capacity;
	r.ts = 2;
	assert_int_equal(shmt_write_direct_locked(&v, &r), 0);
	shmt_unlock(&v);
	assert_int_equal(load_relaxed(&v.records[seq & v.mask].commit),
			 SHMT_COMMIT(seq, SHMTRACE_KIND_INSTANT));
	assert_int_equal(shmt_ring_read(&v, seq, &r), -EAGAIN);
	assert_true(shmt_ring_lapped(&v, seq));
	assert_int_equal(shmt_ring_read(&v, later, &r), 0);
	assert_int_equal(r.ts, 2);
	shmt_view_close(&v);
	shmtrace_ring_unlink(name);
}

/* Counts what a range read hands over: records, and slots skipped. */
static int count_read(void *arg, uint64_t seq, const struct shmt_record *r)
{
	uint64_t *n = arg;

	(void)seq;
	n[r ? 0 : 1]++;
	return 0;
}

/* Makes block i of v SEQUENCED at seq0, holding n records (kind kind,
 * ts 0, 1, ...) from taken 0. */
static void forge_extent(struct shmt_view *v, uint32_t i, uint64_t seq0, uint64_t n, uint32_t kind)
{
	struct shmt_block *b = shmt_block_at(v, i);

	for (uint64_t k = 0; k < n && k < v->block_records; k++)
		shmt_block_recs(b)[k] = (struct shmt_record){ .ts = k, .pid = 1, .tid = 1, .commit = kind };
	b->taken = 0;
	b->written = n;
	b->seq0 = seq0;
	b->claim_no = 7 + i;
	b->state = SHMT_BLOCK_SEQUENCED;
}

/*
 * Format 2.0's extents, forged in every way a peer could: an extent
 * overlapping another, one longer than a block, one past the head, one of
 * records of no known kind. Readers take the ring's geometry and the head
 * for the truth: the first of two overlapping extents is read, the others
 * are not extents (one past the head is pending, as a full block's), a
 * record of no kind is skipped, and a block freed since it was listed is
 * read as no record.
 */
static void test_reader_checks_extents(void **state)
{
	const char *name = test_ring_name("extents");
	struct shmt_extent e[8];
	struct shmt_block_info bi;
	struct shmt_ring_skips skips = { 0 };
	struct shmt_record r, *pend;
	struct shmt_view v;
	uint64_t got[2] = { 0, 0 };
	char err[256];

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	pend = calloc(v.block_records, sizeof(*pend));
	assert_non_null(pend);
	v.h->head.v = 200;
	forge_extent(&v, 0, 100, 50, SHMTRACE_KIND_SPAN);
	forge_extent(&v, 1, 120, 30, SHMTRACE_KIND_SPAN);		/* overlaps 0 */
	forge_extent(&v, 2, 0, v.block_records + 1, SHMTRACE_KIND_SPAN);	/* past a block */
	forge_extent(&v, 3, 190, 20, SHMTRACE_KIND_SPAN);		/* past the head */
	forge_extent(&v, 4, 150, 10, 200);				/* no known kind */
	assert_int_equal(shmt_ring_extents(&v, 0, 200, e, 8), 2);
	assert_true(e[0].seq == 100 && e[0].block == 0 && e[0].n == 50);
	assert_true(e[1].seq == 150 && e[1].block == 4 && e[1].n == 10);
	assert_int_equal(shmt_ring_read(&v, 125, &r), 0);
	assert_int_equal(r.ts, 25);
	assert_int_equal(r.commit, SHMT_COMMIT(125, SHMTRACE_KIND_SPAN));
	assert_int_equal(shmt_ring_read(&v, 155, &r), -EAGAIN);
	assert_int_equal(shmt_ring_read_range(&v, 100, 160, 0, &skips, count_read, got), 0);
	assert_int_equal(got[0], 50);
	assert_int_equal(got[1], 10);
	assert_int_equal(skips.torn, 10);
	/* block 3's records are not the ring's yet: pending, as a full block's */
	assert_int_equal(shmt_ring_block_pending(&v, 3, pend, &bi), 20);
	assert_int_equal(shmt_ring_block_pending(&v, 0, pend, &bi), 0);
	/* freed since it was listed */
	shmt_block_at(&v, 0)->state = SHMT_BLOCK_FREE;
	assert_int_equal(shmt_extent_read(&v, &e[0], 110, &r), -EAGAIN);
	free(pend);
	shmt_view_close(&v);
	shmtrace_ring_unlink(name);
}

static void *thread_body(void *arg)
{
	shmtrace_t *t = arg;

	shmtrace_set_thread_name(t, "worker-thread");
	for (int i = 0; i < 10; i++)
		shmtrace_span(t, 1, 1, i, i + 1, 0);
	return NULL;	/* exit publishes the block and gives it up */
}

/*
 * A thread's exit publishes its staged records and leaves no block owned:
 * with no collector, its partly filled block is copied into the slots and
 * freed, in a discard ring as in an overwrite ring (a block sequenced in
 * place would stay held until a collector frees it: only full ones are).
 * Either way the name set before the first record wins.
 */
static void exit_publishes(uint32_t mode)
{
	const char *name = test_ring_name(mode ? "thr-ow" : "thr");
	struct shmtrace_ring_config c;
	struct shmt_extent e[2];
	struct shmt_record r;
	struct shmt_view v;
	struct shmt_thread th;
	char err[256];
	pthread_t p;
	shmtrace_t *t;
	char last[SHMT_NAME_LEN] = "";

	small_cfg(&c, 0, mode);
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	assert_int_equal(pthread_create(&p, NULL, thread_body, t), 0);
	pthread_join(p, NULL);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
	assert_int_equal(shmt_ring_head(&v), 10);
	/* a partly filled block is copied at exit, in either mode (a block
	 * sequenced in place stays until a collector frees it: only full
	 * ones are), and the block freed */
	for (uint32_t i = 0; i < v.nblocks; i++)
		assert_int_equal(load_relaxed(&shmt_block_at(&v, i)->state), SHMT_BLOCK_FREE);
	assert_int_equal(shmt_ring_extents(&v, 0, 10, e, 2), 0);
	for (uint64_t s = 0; s < 10; s++) {
		assert_true(shmt_commit_is(load_relaxed(&v.records[s].commit), s));
		assert_int_equal(shmt_ring_read(&v, s, &r), 0);
		assert_int_equal(r.ts, s);
	}
	for (uint32_t i = 0; i < shmt_ring_nthreads(&v); i++) {
		assert_int_equal(shmt_ring_thread(&v, i, &th), 0);
		if (th.pid == (uint32_t)getpid() && th.tid != (uint32_t)gettid())
			memcpy(last, th.name, sizeof(last));
	}
	/* the last slot wins: a name set before the first record survives
	 * the slot the first record adds */
	assert_string_equal(last, "worker-thread");
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

static void test_thread_exit_flushes(void **state)
{
	(void)state;
	exit_publishes(SHMTRACE_MODE_DISCARD);
	exit_publishes(SHMTRACE_MODE_OVERWRITE);
}

/* A thread writing through four handles (its slots) that another thread
 * closes, then through a fifth. */
struct closed_elsewhere {
	shmtrace_t *h[4], *t;
	pthread_barrier_t step;
};

static void *closed_elsewhere_body(void *arg)
{
	struct closed_elsewhere *c = arg;

	for (int i = 0; i < 4; i++)
		assert_int_equal(shmtrace_span(c->h[i], 0, 0, 1, 2, 0), 0);
	pthread_barrier_wait(&c->step);	/* the other thread closes them */
	pthread_barrier_wait(&c->step);
	assert_int_equal(shmtrace_span(c->t, 0, 0, 3, 4, 0), 0);
	pthread_barrier_wait(&c->step);	/* the other thread reads the head */
	pthread_barrier_wait(&c->step);
	return NULL;
}

static void test_slots_of_handles_closed_by_another_thread_are_reused(void **state)
{
	const char *name = test_ring_name("slots");
	struct closed_elsewhere c;
	struct shmt_view v;
	char err[256];
	uint64_t head;
	pthread_t p;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(shmtrace_open(name, &c.h[i]), 0);
	assert_int_equal(shmtrace_open(name, &c.t), 0);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
	pthread_barrier_init(&c.step, NULL, 2);
	assert_int_equal(pthread_create(&p, NULL, closed_elsewhere_body, &c), 0);
	pthread_barrier_wait(&c.step);
	for (int i = 0; i < 4; i++)
		shmtrace_close(c.h[i]);	/* copies the thread's blocks out */
	head = shmt_ring_head(&v);
	assert_int_equal(head, 4);
	pthread_barrier_wait(&c.step);
	pthread_barrier_wait(&c.step);
	/* staged in a block of the thread's, in a slot the closed handles
	 * held: not written under the lock, which would have moved the head */
	assert_int_equal(shmt_ring_head(&v), head);
	pthread_barrier_wait(&c.step);
	pthread_join(p, NULL);
	assert_int_equal(shmt_ring_head(&v), head + 1);	/* published at its exit */
	pthread_barrier_destroy(&c.step);
	shmt_view_close(&v);
	shmtrace_close(c.t);
	shmtrace_ring_unlink(name);
}

static void test_scope_macros_record_through_the_default_handle(void **state)
{
	const char *name = test_ring_name("scope");
	struct ring_dump d;
	struct shmt_view v;
	char err[256], buf[64];

	(void)state;
	assert_null(shmtrace_default);
	{
		SHMTRACE_SCOPE("cat", "off");	/* no default handle: records nothing */
	}
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_default_open(name), 0);
	assert_non_null(shmtrace_default);
	{
		SHMTRACE_SCOPE_FLOW("cat", "scoped", 99);
		SHMTRACE_INSTANT("cat", "mark", 0);
		SHMTRACE_COUNTER("cat", "depth", 3);
	}
	ring_dump(name, &d);
	assert_int_equal(d.n, 3);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
	/* the span is recorded at scope exit, after the instant and counter */
	assert_int_equal(SHMT_COMMIT_KIND(d.recs[2].commit), SHMTRACE_KIND_SPAN);
	assert_int_equal(d.recs[2].flow, 99);
	shmt_ring_string(&v, d.recs[2].name, buf, sizeof(buf));
	assert_string_equal(buf, "scoped");
	shmt_ring_string(&v, d.recs[1].name, buf, sizeof(buf));
	assert_string_equal(buf, "depth");
	assert_int_equal((int64_t)d.recs[1].dur, 3);
	shmt_view_close(&v);
	free(d.recs);
	assert_int_equal(shmtrace_default_open(NULL), 0);
	assert_null(shmtrace_default);
	shmtrace_ring_unlink(name);
}

static void test_clock_monotonic_and_flow_ids(void **state)
{
	const char *name = test_ring_name("clk");
	uint64_t a, b, f1, f2;
	shmtrace_t *t;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	a = shmtrace_now();
	b = shmtrace_now();
	assert_true(b >= a);
	/* the ring clock tracks CLOCK_MONOTONIC (calibration error is ppm) */
	b = shmt_mono_ns();
	a = shmtrace_now();
	assert_true(a > b - 5000000);
	b = shmt_mono_ns();
	assert_true(a < b + 5000000);
	f1 = shmtrace_flow_new(t);
	f2 = shmtrace_flow_new(t);
	assert_true(f1 && f2 && f1 != f2 && f2 < (1ull << 53));
	assert_int_equal(shmtrace_flow_new(NULL), 0);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

/* An open span keeps its flow id, ring-local or this ring's global one,
 * and its role in the flow (a post-mortem export places and ends the flow
 * by it). */
static void test_open_span_keeps_flow(void **state)
{
	const char *name = test_ring_name("openflow");
	struct shmtrace_ring_config c;
	struct shmtrace_open_span sp[3];
	struct shmt_record r[SHMT_OPEN_MAX];
	uint64_t global, foreign;
	struct shmt_view v;
	char err[256];
	shmtrace_t *t;
	uint32_t n = 0, cat;

	(void)state;
	small_cfg(&c, 1024, 0);
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	cat = shmtrace_intern(t, "c");
	global = shmtrace_flow_new(t);
	assert_true(global > UINT32_MAX);	/* this ring's global series */
	foreign = global ^ (1ull << 40);	/* another ring's prefix */
	assert_int_equal(shmtrace_begin(t, &sp[0], cat, cat, shmtrace_flow_reply(global)), 0);
	assert_int_equal(shmtrace_begin(t, &sp[1], cat, cat, 77), 0);
	assert_int_equal(shmtrace_begin(t, &sp[2], cat, cat, shmtrace_flow_recv(foreign)), 0);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	for (uint32_t i = 0; i < v.nblocks && !n; i++)
		n = shmt_block_open_spans(&v, i, r);
	assert_int_equal(n, 3);
	assert_true(r[0].flow == shmtrace_flow_reply(global));
	assert_int_equal(r[1].flow, 77);	/* no role, none read */
	assert_int_equal(r[2].flow, 0);	/* not kept: 32 bits cannot hold it */
	for (int i = 2; i >= 0; i--)
		assert_int_equal(shmtrace_end(&sp[i]), 0);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_records_round_trip),
		cmocka_unit_test(test_full_discard_ring_keeps_the_first_counts_the_rest),
		cmocka_unit_test(test_full_overwrite_ring_keeps_the_last_counts_the_rest),
		cmocka_unit_test(test_span_whose_flush_dropped_returns_enospc),
		cmocka_unit_test(test_span_whose_copy_dropped_returns_enospc),
		cmocka_unit_test(test_reader_refuses_unfinished_slots),
		cmocka_unit_test(test_a_record_2_to_the_24_later_is_not_read_as_the_earlier),
		cmocka_unit_test(test_reader_checks_extents),
		cmocka_unit_test(test_thread_exit_flushes),
		cmocka_unit_test(test_slots_of_handles_closed_by_another_thread_are_reused),
		cmocka_unit_test(test_scope_macros_record_through_the_default_handle),
		cmocka_unit_test(test_clock_monotonic_and_flow_ids),
		cmocka_unit_test(test_open_span_keeps_flow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
