/* SPDX-License-Identifier: MIT */
/*
 * stage.c - a thread's staging block: claiming one, handing it over when
 * full (minor 10, a collector draining), sequencing it in place when full
 * (2.0, a discard ring with no collector) or moving what it holds into the
 * ring under the ring lock (tried at half a block, waited for only when
 * the block is full); and writing under the lock directly when a thread
 * has no block.
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

/* The calling thread as a block's owner. */
static struct shmt_owner me(uint32_t tid)
{
	return (struct shmt_owner){ .pid = shmt_pid, .tid = tid, .start_time = shmt_start };
}

/* Every full block into the ring, oldest claim first, as a collector
 * would (what a discard ring has no room for waits). Lock held. */
static void flush_all_full_locked(struct shmt_view *v)
{
	struct shmt_full *order;
	uint32_t left, n = shmt_full_list(v, SHMT_FULL_ANY, &order);

	if (n)
		shmt_flush_full_locked(v, order, n, UINT64_MAX, SHMT_FLUSH_KEEP, &left);
	free(order);
}

/*
 * Whether a thread whose block is full while the lock is busy may go on in
 * a spare: in a discard ring. Not in an overwrite ring (a flight
 * recorder): `shmtrace snapshot` copies a live ring counting a thread's
 * records that flushes move during the copy against the blocks it copied,
 * and a full block flushed together with a spare claimed during the copy
 * would be counted twice (tests/test_snapshot.c caught it). There the call
 * waits at once, for the same short bound.
 */
static bool spare_ok(const struct shmt_att *a)
{
	return a->v.mode == SHMTRACE_MODE_DISCARD;
}

/* Claims a free block for the calling thread. Lock held (producers of
 * minor 10 claim without it too: the claim is a compare-and-swap either
 * way). Returns the index, or -ENOSPC. */
static int claim_block_locked(struct shmt_att *a, uint32_t tid, const struct shmt_owner *dead)
{
	struct shmt_view *v = &a->v;
	const struct shmt_owner o = me(tid);

	for (int pass = 0; pass < 2; pass++) {
		int i = shmt_block_claim(v, &o, tid);

		if (i >= 0) {
			shmt_claimed_set(a, (uint32_t)i, true);
			return i;
		}
		/* none free: with no collector, full blocks (spares whose
		 * thread went idle or died) flushed in claim order, which
		 * also lets the owned blocks claimed after them be adopted;
		 * empty free blocks still holding records, and take back
		 * those of threads that died */
		if (pass == 0 && !shmt_handoff_on(v))
			flush_all_full_locked(v);
		shmt_adopt_blocks_locked(v, false, dead);
	}
	return -ENOSPC;
}

/*
 * From the block's taken (the collector may have flushed it meanwhile):
 * where the block is full, and where to try a flush: at half the block,
 * unless full blocks are handed over (then only the name, below, brings
 * the thread back before the block is full).
 */
#define NAME_RETRY 64u
static void set_marks(struct shmt_tls_slot *s, bool handoff)
{
	uint64_t taken = load_acquire(&s->b->taken);

	s->limit = taken + s->mask + 1;
	s->soft = handoff ? s->limit : taken + (s->mask + 1) / 2;
	if (s->unnamed && s->written + NAME_RETRY < s->soft)
		s->soft = s->written + NAME_RETRY;
}

/* Whether a thread's block leaves it only when full: handed over to the
 * collector, or to the thread itself to be sequenced in place. */
static bool whole_blocks(const struct shmt_view *v)
{
	return shmt_handoff_on(v) || shmt_self_sequence_on(v);
}

/* Points slot s at block idx of attachment a. */
static void slot_set(struct shmt_tls_slot *s, struct shmt_att *a, uint32_t idx)
{
	s->idx = idx;
	s->b = shmt_block_at(&a->v, idx);
	s->mask = a->v.block_records - 1;
	s->recs = shmt_block_recs(s->b);
	s->written = load_relaxed(&s->b->written);
	s->nofree_skip = 0;
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
	SHMT_TLS;
static __thread uint32_t tls_named_next SHMT_TLS;

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
 * full. Lock held. tname is the thread's name, read before the lock
 * (name_read()). */
static void name_once_locked(struct shmt_att *a, uint32_t tid, const char *tname)
{
	if (named(a))
		return;
	shmt_name_append_locked(&a->v, shmt_pid, tid, shmt_start, shmt_pidns, a->slot_flags,
				tname, shmt_pname);
	set_named(a);
}

/* The calling thread's name into tname when a's ring has no slot of it
 * yet. Read before the lock: it may take a system call (prctl), where a
 * busy host preempts the thread, and a thread preempted holding the lock
 * holds it until it runs again (the first calls of `bench_shmtrace
 * threads`, a thousand threads woken at once on 2 cores, held it through
 * preemptions of 2.6 to 60 ms when the read was under it). */
static void name_read(const struct shmt_att *a, char *tname)
{
	tname[0] = 0;
	if (!named(a))
		shmt_thread_name(tname);
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

/* A thread that claimed its block without the lock names itself when the
 * lock is free: tried on its first record, then every NAME_RETRY records
 * (set_marks()); never waited for, so a crowd of new threads does not
 * queue on the lock. Until then s->unnamed, which a release counts as a
 * name lost (core.c). */
static void name_try(struct shmt_att *a, struct shmt_tls_slot *s)
{
	char tname[SHMT_NAME_LEN];

	if (named(a)) {
		s->unnamed = false;
		return;
	}
	shmt_thread_name(tname);	/* before the lock: name_read() */
	if (shmt_lock(&a->v, 0) < 0) {
		s->unnamed = true;
		return;
	}
	name_once_locked(a, shmt_my_tid(), tname);
	shmt_unlock(&a->v);
	s->unnamed = false;
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
	char tname[SHMT_NAME_LEN];
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
	if (!s)
		s = shmt_slot_of_closed();
	/* minor 10: a free block claimed without the lock, the name when the
	 * lock is free (name_try()) */
	if (s && a->v.minor >= SHMT_MINOR_HANDOFF) {
		const struct shmt_owner o = me(tid);

		idx = shmt_block_claim(&a->v, &o, tid);
		if (idx >= 0) {
			shmt_claimed_set(a, (uint32_t)idx, true);
			s->id = a->id;
			s->gen = shmt_fork_gen;
			s->spare = false;
			s->npend = 0;
			s->listed = false;
			slot_set(s, a, (uint32_t)idx);
			name_try(a, s);
			set_marks(s, whole_blocks(&a->v));
			shmt_thread_watch();
			release_retired(t, a);
			return s;
		}
	}
	/* all taken: find dead owners before the lock (it reads /proc), one
	 * thread of the process at a time; claim_block_locked() adopts them */
	if (s && !any_free_block(&a->v) && dead_scan_due(t, a)) {
		dead = calloc(a->v.nblocks, sizeof(*dead));
		if (dead)
			shmt_find_dead_blocks(&a->v, dead);
	}
	name_read(a, tname);
	if (shmt_producer_lock(a, t->full_wait_ns) < 0) {
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
	name_once_locked(a, tid, tname);
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
	s->unnamed = false;
	s->spare = false;
	s->npend = 0;
	s->listed = false;
	slot_set(s, a, (uint32_t)idx);
	set_marks(s, whole_blocks(&a->v));
	shmt_thread_watch();
	release_retired(t, a);
	return s;
}

/*
 * Flushes the slot's block into the ring, waiting for the lock at most
 * wait_ns (0: only trying it). The blocks this thread handed over and
 * nobody has flushed yet go first, oldest claim first (handoff.c), so
 * that none of its records pass its older ones; other threads' wait for
 * the collector. When the ring has no room for all of those, the slot's
 * own are left staged. Returns 0, -ENOSPC if the ring was full and some
 * of the block's records were dropped (and counted), -ENOBUFS if the ring
 * had no room for the blocks before them (nothing of the slot's moved),
 * or another -errno (nothing moved; -EBUSY: the try failed). Then, if it
 * is time, looks whether the ring's name now refers to another segment
 * (the next record goes there).
 */
int shmt_flush_slot(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s, uint64_t wait_ns)
{
	struct shmt_view *v = &a->v;
	struct shmt_full *order;
	uint32_t n = shmt_full_list(v, SHMT_FULL_MINE, &order), left = 0;
	uint64_t pending, done;
	int ret;

	ret = wait_ns ? shmt_producer_lock(a, wait_ns) : shmt_lock(v, 0);
	if (ret < 0) {
		free(order);
		return ret;
	}
	if (n)
		shmt_flush_full_locked(v, order, n, UINT64_MAX, SHMT_FLUSH_KEEP | SHMT_FLUSH_OWN, &left);
	free(order);
	pending = s->written - load_relaxed(&s->b->taken);
	done = left ? 0 : shmt_flush_block_locked(v, s->idx);
	shmt_unlock(v);
	shmt_wake_collector(v);
	if (!left) {
		/* its full blocks, those waiting to be sequenced too, moved */
		s->spare = false;
		s->npend = 0;
		s->listed = true;
	}
	set_marks(s, whole_blocks(v));
	shmt_attach_current(t);
	if (left)
		return -ENOBUFS;
	return pending <= s->mask + 1 && done < pending ? -ENOSPC : 0;
}

/* Full blocks waiting for the collector at which hand-overs stop: seven
 * eighths of them. */
#define SHMT_FAR_BEHIND(v)	((v)->nblocks - (v)->nblocks / 8)

/*
 * Hands the slot's block over and goes on in a free block (handoff.c), no
 * lock: while fewer than seven eighths of the blocks wait. An eighth is
 * kept for threads' first ones, so that a thread whose collector stopped
 * (or fell far behind) copies, as before, rather than take every free
 * block. Returns whether it did.
 */
static bool hand_over(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s)
{
	const struct shmt_owner o = me(shmt_my_tid());
	int idx;

	if (a->v.minor < SHMT_MINOR_HANDOFF ||
	    load_relaxed(&a->v.h->full_blocks.v) >= SHMT_FAR_BEHIND(&a->v))
		return false;
	idx = shmt_block_handoff(&a->v, &o, s->idx);
	if (idx < 0)
		return false;
	/* the old block is the collector's (or this thread's next flush's)
	 * now, not this handle's */
	shmt_claimed_set(a, s->idx, false);
	shmt_claimed_set(a, (uint32_t)idx, true);
	slot_set(s, a, (uint32_t)idx);
	set_marks(s, whole_blocks(&a->v));
	shmt_attach_current(t);
	return true;
}

/*
 * A collector drains a discard ring and the thread's block is full: it is
 * handed over, or, with no block free to go on in while the collector is
 * far behind (SHMT_FAR_BEHIND: as many blocks full and waiting for it as
 * hand-overs may fill), the call's records are dropped and counted as a
 * full ring's, at once and without the lock: the blocks are the ring the
 * collector drains. Copying into the ring's slots under the lock instead
 * made the lock pass from one copier to the next, each preempted inside
 * it on a busy host, and the collector queue behind them to sequence the
 * very blocks that would have freed some (32 producers flat out on 2
 * cores, `bench_shmtrace oversub`: docs/DESIGN.md, "No block free"). A
 * look reads shared words, and every block's state while hand-overs may
 * go on: after a call that dropped, the next SHMT_NO_FREE_SKIP calls drop
 * without looking, unless the collector's tail moved (it may have freed
 * some). Returns 0 (handed over), -ENOBUFS (the caller drops and counts),
 * or -EAGAIN: the block is copied as before, into the ring's slots, when
 * the blocks are not free for another reason than a collector far behind
 * (a thread each in most of them, or kept for readers, or a burst the
 * collector is still catching up with: the slots absorb it) or the
 * collector drains nothing (gone, stopped by a debugger, a zombie).
 */
static int hand_over_or_drop(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s)
{
	struct shmt_view *v = &a->v;
	uint64_t tail = load_relaxed(&v->h->tail.v);

	if (s->nofree_skip && tail == s->nofree_tail) {
		s->nofree_skip--;
		return -ENOBUFS;
	}
	s->nofree_skip = 0;
	if (hand_over(t, a, s))
		return 0;
	/* the ring's slots too full for the block: dropped in any case */
	if (shmt_ring_has_room(v, s->b) &&
	    (load_relaxed(&v->h->full_blocks.v) < SHMT_FAR_BEHIND(v) || !shmt_att_draining(a)))
		return -EAGAIN;
	shmt_wake_collector(v);
	s->nofree_tail = tail;
	s->nofree_skip = SHMT_NO_FREE_SKIP;
	return -ENOBUFS;
}

/*
 * The thread's full blocks sequenced in place, oldest claim first, unless
 * a collector came meanwhile: it takes full blocks itself, and lists what
 * it sequences. Those waiting in s->pend, or, when the thread may have
 * others (s->listed false: blocks handed to a collector that left before
 * it took them, a spare), every one it has, listed from the blocks, so
 * that its records take sequences in the order it wrote them. Lock held.
 * Returns 0, -ENOSPC when the ring had no room for some of their records
 * (dropped and counted), or -ENOMEM (none sequenced: no memory to list).
 */
static int sequence_pending_locked(struct shmt_view *v, struct shmt_tls_slot *s)
{
	struct shmt_full *list = s->pend, *order = NULL;
	uint64_t pending = 0, done;
	uint32_t n = s->npend, left;

	if (shmt_handoff_on(v)) {
		s->npend = 0;
		s->listed = false;
		return 0;
	}
	if (!s->listed) {
		n = shmt_full_list(v, SHMT_FULL_MINE, &order);
		if (!order) {
			if (load_relaxed(&v->h->full_blocks.v))
				return -ENOMEM;	/* no memory to list them: they wait */
			n = 0;	/* none to list */
		}
		list = order;
	}
	/* a block listed that is no longer the full one of its life (a
	 * collector or a peer's flush took it) is skipped, and not counted;
	 * counts only a forger makes are the flush's to bound */
	for (uint32_t k = 0; k < n; k++) {
		struct shmt_block *b = shmt_block_at(v, list[k].i);
		uint64_t w, t;

		if (!b || load_acquire(&b->state) != SHMT_BLOCK_FULL || load_relaxed(&b->claim_no) != list[k].no)
			continue;
		w = load_relaxed(&b->written);
		t = load_relaxed(&b->taken);
		if (w >= t && w - t <= v->block_records)
			pending += w - t;
	}
	done = n ? shmt_flush_full_locked(v, list, n, UINT64_MAX, SHMT_FLUSH_OWN | SHMT_FLUSH_IN_PLACE, &left) : 0;
	free(order);
	s->npend = 0;
	s->listed = true;
	return done < pending ? -ENOSPC : 0;
}

/*
 * No collector draining a 2.0 discard ring (shmt_self_sequence_on()): the
 * full block is handed over to the thread itself, which goes on in a free
 * one, and its records are given the ring's next sequences where they are
 * when the lock is free: no record is copied, and the lock is held for a
 * few stores a block. A busy lock costs the call nothing: the block waits,
 * with the thread's others that waited before it, for its next full
 * block, which waits for the lock (at most t->full_wait_ns) only when
 * SHMT_SELF_PENDING wait already. A collector that starts later reads
 * and frees the sequenced blocks as its own (hold.c). Returns 0, -ENOSPC
 * (room made; the ring had no room for some of the blocks' records:
 * dropped and counted), -ETIMEDOUT (no room: the lock; the caller drops
 * and counts), or -EAGAIN: no block to go on in (none free, or seven
 * eighths handed over), and the caller copies as before.
 */
static int sequence_own(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s, bool *dropped)
{
	struct shmt_view *v = &a->v;
	struct shmt_full f = { .no = load_relaxed(&s->b->claim_no), .i = s->idx, .seq = UINT64_MAX };
	int ret = 0;

	if (s->npend == SHMT_SELF_PENDING) {
		if (shmt_producer_lock(a, t->full_wait_ns) < 0)
			return -ETIMEDOUT;
		ret = sequence_pending_locked(v, s);
		shmt_unlock(v);
		if (ret == -ENOMEM)
			return -EAGAIN;	/* still waiting: the copy lists them again */
		*dropped = ret < 0;
	}
	/* no block to go on in: the caller copies (what the sequencing
	 * above dropped is counted, and *dropped says so) */
	if (!hand_over(t, a, s))
		return -EAGAIN;
	s->pend[s->npend++] = f;
	SHMT_HOOK("self-handed");
	if (shmt_lock(v, 0) == 0) {
		if (sequence_pending_locked(v, s) == -ENOSPC)
			ret = -ENOSPC;
		shmt_unlock(v);
	}
	return ret;
}

/* Whether the ask word's value ask is for the life of block b, ours. */
static bool asked_us(const struct shmt_block *b, uint32_t ask)
{
	return ask == SHMT_ASK_ANY || ask == shmt_ask_tag(load_relaxed(&b->claim_no));
}

/*
 * Makes room for n records in the slot's block, off the hot path. While a
 * collector drains a ring of minor 10, a full block is handed over and a
 * free one taken, no lock, no copy (handoff.c); with none free, or no
 * collector, the block is copied into the ring under the lock, as
 * before: below the full mark the lock is only tried (a busy lock costs
 * this call nothing, the records stay staged and the try comes again
 * FLUSH_RETRY records on). A full block whose lock is busy is handed over
 * to the thread itself: it goes on in a spare block and flushes both, in
 * order, at its next flush. Only with that spare full too does the call
 * wait for the lock, at most t->full_wait_ns (2 ms), and then drops (an
 * overwrite ring takes no spare: spare_ok()).
 * Returns 0 (room made), -ENOSPC (room made, earlier records dropped and
 * counted), -ENOBUFS (no room: the ring is full of older blocks; the
 * caller drops its records and counts them as a full ring's), or
 * -ETIMEDOUT (no room: the lock; the caller drops and counts).
 */
int shmt_make_room(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s, unsigned n)
{
	uint64_t w = s->written;
	bool handoff = shmt_handoff_on(&a->v);
	bool self = !handoff && shmt_self_sequence_on(&a->v);
	uint32_t ask = load_relaxed(&s->b->ask);
	int ret;

	/* a block handed to a collector may be left unsequenced if it goes:
	 * the next sequencing of its own lists the thread's full blocks */
	if (handoff)
		s->listed = false;
	if (ask && !asked_us(s->b, ask)) {
		/* for the block's life before ours (stored after our claim
		 * cleared the word), or a peer's scribble: cleared, unless
		 * the collector asked for our life meanwhile (then ask holds
		 * that, and is answered below) */
		SHMT_HOOK("ask-clearing");
		if (__atomic_compare_exchange_n(&s->b->ask, &ask, 0, false, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			ask = 0;
	}
	if (ask && asked_us(s->b, ask)) {
		/* the collector asks for the block while it fills: it is
		 * handed over as it is and read in place, rather than copied
		 * under the lock; with no block free it stays (the collector
		 * copies it), and the ask is answered either way */
		store_relaxed(&s->b->ask, 0);
		if (handoff && w != load_relaxed(&s->b->taken) && hand_over(t, a, s))
			return 0;
	}
	if (s->unnamed)
		name_try(a, s);
	set_marks(s, handoff || self);
	if (w + n < s->soft)
		return 0;	/* the collector flushed us, or the name was tried */
	if ((handoff || self) && w + n < s->limit)
		return 0;	/* only the name was due */
	if (handoff && a->v.mode == SHMTRACE_MODE_DISCARD) {
		ret = hand_over_or_drop(t, a, s);
		if (ret != -EAGAIN)
			return ret;
	} else if (handoff && hand_over(t, a, s)) {
		return 0;
	}
	if (self) {
		bool dropped = false;

		ret = sequence_own(t, a, s, &dropped);
		if (ret != -EAGAIN)
			return ret;
		if (dropped) {
			ret = shmt_flush_slot(t, a, s, t->full_wait_ns);
			return ret == 0 || ret == -ENOSPC ? -ENOSPC : ret == -ENOBUFS ? ret : -ETIMEDOUT;
		}
	}
	if (w + n < s->limit) {
		ret = shmt_flush_slot(t, a, s, 0);
		if (ret == 0 || ret == -ENOSPC)
			return ret;
		s->soft = w + n + FLUSH_RETRY < s->limit ? w + n + FLUSH_RETRY : s->limit;
		return 0;
	}
	ret = shmt_flush_slot(t, a, s, 0);
	/* (with a collector, hand_over() was tried above) */
	if (ret == -EBUSY && !handoff && !s->spare && spare_ok(a) && hand_over(t, a, s)) {
		s->spare = true;
		s->listed = false;
		return 0;
	}
	if (ret == -EBUSY)
		ret = shmt_flush_slot(t, a, s, t->full_wait_ns);
	return ret == 0 || ret == -ENOSPC || ret == -ENOBUFS ? ret : -ETIMEDOUT;
}
