/* SPDX-License-Identifier: MIT */
/*
 * test_ring_retire.c - a ring removed and made again under load, or
 * retired on purpose (replaced, removed): its producers move to the ring
 * behind the name within the bound, and every record is in one of the
 * segments or counted.
 */
#include <errno.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "helpers.h"

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
	size_t n;

	ring_dump_view(v, &d);
	n = (size_t)count_pid(&d, (uint32_t)getpid());
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
 * ring is given back with its records in that ring (sequenced in place:
 * no collector drains it). While a removed ring has no successor and no
 * collector, calls refuse their records and count them into the next
 * ring: every call is in a segment or counted.
 */
static void test_retired_ring_moves_within_bound(void **state)
{
	const char *ring = test_ring_name("retire");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	struct shmtrace_ring_config bigger = { .capacity = 1 << 17, .flags = SHMTRACE_CREATE_REPLACE };
	struct shmt_view v1, v2, v3;
	struct shmt_extent e[2];
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
	/* the old block went back, its ten records published in the old
	 * ring (with no collector there, a partly filled block is copied:
	 * one sequenced in place would stay held until a collector frees it) */
	assert_int_equal(shmt_ring_head(&v1), 10);
	assert_int_equal(shmt_ring_extents(&v1, 0, 10, e, 2), 0);
	for (uint32_t i = 0; i < v1.nblocks; i++)
		assert_int_equal(load_relaxed(&shmt_block_at(&v1, i)->state), SHMT_BLOCK_FREE);
	for (uint64_t s = 0; s < 10; s++)
		assert_true(shmt_commit_is(load_relaxed(&v1.records[s].commit), s));
	assert_int_equal(my_records(&v1), 10);

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reattach_after_ring_made_again),
		cmocka_unit_test(test_retired_ring_moves_within_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
