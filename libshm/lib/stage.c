/* SPDX-License-Identifier: MIT */
/*
 * stage.c - a thread's staging block: claiming one, and moving what it
 * holds into the ring under the ring lock (tried at half a block, waited
 * for only when the block is full); and writing under the lock directly
 * when a thread has no block.
 */
#include <errno.h>
#include <stdlib.h>

#include "producer.h"

/*
 * A thread tries the lock (never waits on it) once half its block is
 * staged, and again every FLUSH_RETRY records while the lock stays busy; it
 * waits only when its whole block is full. One call in block_records / 2
 * pays for a flush (1 in 2048 in rings of 256K records and more), so the
 * p99.9 call never does, and no call waits on a busy lock while its block
 * has room (docs/DESIGN.md, "The span call's tail").
 */
#define FLUSH_RETRY 16u

/* Claims a free block for the calling thread. Lock held. Returns the
 * index, or -ENOSPC. */
static int claim_block_locked(struct shmt_att *a, uint32_t tid, const struct shmt_owner *dead)
{
	struct shmt_view *v = &a->v;

	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < v->nblocks; i++) {
			struct shmt_block *b = shmt_block_at(v, i);

			if (load_relaxed(&b->state) != SHMT_BLOCK_FREE)
				continue;
			if (load_relaxed(&b->written) != load_relaxed(&b->taken))
				shmt_flush_block_locked(v, i);
			/* read without the lock by those looking for dead owners */
			store_relaxed(&b->pid, shmt_pid);
			store_relaxed(&b->tid, tid);
			store_relaxed(&b->start_time, shmt_start);
			/* a dead owner's stack was recorded when it was adopted */
			store_relaxed(&b->open_depth, 0);
			store_relaxed(&b->open_closing, 0);
			store_release(&b->state, SHMT_BLOCK_OWNED);
			shmt_claimed_set(a, i, true);
			return (int)i;
		}
		/* none free: take back those of threads that died */
		if (!dead)
			break;
		shmt_adopt_blocks_locked(v, false, dead);
	}
	return -ENOSPC;
}

/* From the block's taken (the collector may have flushed it meanwhile):
 * where the block is full, and where to try a flush. */
static void set_marks(struct shmt_tls_slot *s)
{
	uint64_t taken = load_acquire(&s->b->taken);

	s->limit = taken + s->mask + 1;
	s->soft = taken + (s->mask + 1) / 2;
}

/* The calling thread moved to attachment a: its blocks in the retired
 * rings before it go back, with what they hold, so that those rings'
 * collectors drain them and wait for no thread that has left. */
static void release_retired(shmtrace_t *t, struct shmt_att *a)
{
	for (struct shmt_att *o = a->prev; o; o = o->prev)
		for (int i = 0; i < SHMT_TLS_SLOTS; i++)
			if (shmt_slot_is(&shmt_tls[i], o) && shmt_att_retired(o))
				shmt_slot_release(t, o, &shmt_tls[i]);
}

/*
 * The rings this thread has its name slot in (or was counted in
 * names_dropped for): a thread is named once per ring, when it claims a
 * block or, when it gets none, on its first write under the lock, so that
 * every thread's name is kept or counted. NAMED_RINGS, reused oldest
 * first: a thread writing to more rings than that without a block may be
 * named twice in one (a slot more, never a name less).
 */
#define NAMED_RINGS 8
static __thread struct { uint64_t id; uint32_t gen; } tls_named[NAMED_RINGS]
	__attribute__((tls_model("initial-exec")));
static __thread uint32_t tls_named_next __attribute__((tls_model("initial-exec")));

/* Whether the calling thread is named in a's ring (or was counted). */
static bool named(const struct shmt_att *a)
{
	for (int i = 0; i < NAMED_RINGS; i++)
		if (tls_named[i].id == a->id && tls_named[i].gen == shmt_fork_gen)
			return true;
	return false;
}

static void set_named(const struct shmt_att *a)
{
	tls_named[tls_named_next % NAMED_RINGS].id = a->id;
	tls_named[tls_named_next % NAMED_RINGS].gen = shmt_fork_gen;
	tls_named_next++;
}

/* Appends the calling thread's name slot to a's ring unless it has one
 * there already: kept, or counted in names_dropped when the table is
 * full. Lock held. */
static void name_once_locked(struct shmt_att *a, uint32_t tid)
{
	char tname[SHMT_NAME_LEN];

	if (named(a))
		return;
	shmt_thread_name(tname);
	shmt_name_append_locked(&a->v, shmt_pid, tid, shmt_start, shmt_pidns, a->slot_flags,
				tname, shmt_pname);
	set_named(a);
}

/* The thread's first record in a's ring was dropped for want of the lock:
 * its name, which would have gone with it, is counted lost as well (once),
 * so that every thread's name is kept or counted. */
static void name_lost(struct shmt_att *a)
{
	if (named(a))
		return;
	fetch_add(&a->v.h->names_dropped.v, 1);
	set_named(a);
}

/* Whether some block looks free (read without the lock: a hint). */
static bool any_free_block(const struct shmt_view *v)
{
	for (uint32_t i = 0; i < v->nblocks; i++)
		if (load_relaxed(&shmt_block_at(v, i)->state) == SHMT_BLOCK_FREE)
			return true;
	return false;
}

/* Whether this thread is the one of its process to look for dead owners'
 * blocks in /proc now: at most once per lock timeout (10 ms at least) per
 * attachment, so that a crowd of threads without a block does not each
 * read /proc for every block. */
#define DEAD_SCAN_MIN_NS (10ull * 1000 * 1000)
static bool dead_scan_due(shmtrace_t *t, struct shmt_att *a)
{
	uint64_t now = shmt_mono_ns(), last = load_relaxed(&a->dead_scan_ns);
	uint64_t period = t->lock_timeout_ns > DEAD_SCAN_MIN_NS ? t->lock_timeout_ns : DEAD_SCAN_MIN_NS;

	if (last && now - last < period)
		return false;
	return __atomic_compare_exchange_n(&a->dead_scan_ns, &last, now, false, __ATOMIC_RELAXED,
					   __ATOMIC_RELAXED);
}

/* Writes r[0..n) into the ring under the lock (held): the event first,
 * its arguments after it while it was written, so that an argument never
 * reaches the ring without its event. Returns 0 or -ENOSPC (the ring was
 * full: what did not fit is dropped and counted). */
static int write_direct_locked(struct shmt_att *a, const struct shmt_record *r, unsigned n)
{
	int ret = 0;

	for (unsigned i = 0; i < n; i++) {
		ret = shmt_write_direct_locked(&a->v, &r[i]);
		if (ret < 0) {
			if (n - i - 1)
				fetch_add(&a->v.h->dropped.v, n - i - 1);
			break;
		}
	}
	return ret;
}

/*
 * Finds or makes the calling thread's slot for attachment a. NULL means
 * no block: then r[0..n) (none when n is 0) were written into the ring
 * under the lock instead, or dropped and counted, and *ret says which (0,
 * -ENOSPC: the ring was full, -ETIMEDOUT: the lock could not be had in
 * time). The lock is waited for once, bounded as every producer's wait.
 */
struct shmt_tls_slot *shmt_slot_slow(shmtrace_t *t, struct shmt_att *a,
				     const struct shmt_record *r, unsigned n, int *ret)
{
	struct shmt_tls_slot *s = NULL;
	struct shmt_owner *dead = NULL;
	uint32_t tid = shmt_my_tid();
	int idx;

	*ret = 0;
	for (int i = 0; i < SHMT_TLS_SLOTS; i++) {
		if (shmt_slot_is(&shmt_tls[i], a)) {
			struct shmt_tls_slot tmp = shmt_tls[i];

			/* move to the front: the fast path checks slot 0 only */
			shmt_tls[i] = shmt_tls[0];
			shmt_tls[0] = tmp;
			return &shmt_tls[0];
		}
	}
	for (int i = 0; i < SHMT_TLS_SLOTS; i++) {
		if (shmt_tls[i].id == 0 || shmt_tls[i].gen != shmt_fork_gen) {
			s = &shmt_tls[i];
			break;
		}
	}
	/* all taken: find dead owners before the lock (it reads /proc), one
	 * thread of the process at a time; claim_block_locked() adopts them */
	if (s && !any_free_block(&a->v) && dead_scan_due(t, a)) {
		dead = calloc(a->v.nblocks, sizeof(*dead));
		if (dead)
			shmt_find_dead_blocks(&a->v, dead);
	}
	if (shmt_producer_lock(t, a) < 0) {
		/* -EBUSY from a wedged lock's try is a timeout too */
		free(dead);
		if (n) {
			shmt_loss_lock_dropped(&a->v, n);
			name_lost(a);
		}
		*ret = -ETIMEDOUT;
		return NULL;
	}
	idx = s ? claim_block_locked(a, tid, dead) : -ENOSPC;
	free(dead);
	name_once_locked(a, tid);
	/* idx < nblocks (claim_block_locked): shmt_block_at() is never NULL */
	if (idx < 0 || !shmt_block_at(&a->v, (uint32_t)idx)) {
		*ret = write_direct_locked(a, r, n);
		shmt_unlock(&a->v);
		if (n)
			shmt_wake_collector(&a->v);
		return NULL;
	}
	shmt_unlock(&a->v);
	s->id = a->id;
	s->gen = shmt_fork_gen;
	s->idx = (uint32_t)idx;
	s->b = shmt_block_at(&a->v, (uint32_t)idx);
	s->mask = a->v.block_records - 1;
	s->recs = shmt_block_recs(s->b);
	s->written = load_relaxed(&s->b->written);
	set_marks(s);
	shmt_thread_watch();
	release_retired(t, a);
	return s;
}

/* Flushes the slot's block into the ring, waiting for the lock or (try)
 * only trying it. Returns 0, -ENOSPC if the ring was full and some of the
 * block's records were dropped (and counted), or another -errno (nothing
 * moved; -EBUSY: the try failed). Then, if it is time, looks whether the
 * ring's name now refers to another segment (the next record goes there). */
int shmt_flush_slot(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s, bool try)
{
	uint64_t pending, done;
	int ret = try ? shmt_lock(&a->v, 0) : shmt_producer_lock(t, a);

	if (ret < 0)
		return ret;
	pending = s->written - load_relaxed(&s->b->taken);
	done = shmt_flush_block_locked(&a->v, s->idx);
	shmt_unlock(&a->v);
	shmt_wake_collector(&a->v);
	set_marks(s);
	shmt_attach_current(t);
	return pending <= s->mask + 1 && done < pending ? -ENOSPC : 0;
}

/*
 * Makes room for n records in the slot's block, off the hot path. Below the
 * full mark it only tries the lock: a busy lock costs this call nothing,
 * the records stay staged and the try comes again FLUSH_RETRY records on.
 * Returns 0 (room made), -ENOSPC (room made, earlier records dropped and
 * counted), or -ETIMEDOUT (no room: the caller drops and counts).
 */
int shmt_make_room(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s, unsigned n)
{
	uint64_t w = s->written;
	int ret;

	set_marks(s);
	if (w + n < s->soft)
		return 0;	/* the collector flushed us */
	if (w + n < s->limit) {
		ret = shmt_flush_slot(t, a, s, true);
		if (ret == 0 || ret == -ENOSPC)
			return ret;
		s->soft = w + n + FLUSH_RETRY < s->limit ? w + n + FLUSH_RETRY : s->limit;
		return 0;
	}
	ret = shmt_flush_slot(t, a, s, false);
	return ret == 0 || ret == -ENOSPC ? ret : -ETIMEDOUT;
}
