/* SPDX-License-Identifier: MIT */
/*
 * hold.c - a ring as one collector holds it (hold.h): the claim, and the
 * staging blocks moved and adopted under the lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hold.h"
#include "ring_reader.h"

#define LOCK_WAIT_NS (50ull * 1000 * 1000)
#define REAP_EVERY_NS (1000ull * 1000 * 1000)
#define FLUSH_MOST (64u * 1024)	/* records of full blocks moved per pass */

/* A descriptor on ring holding its claim, the exclusive advisory lock a
 * collector holds (*st its file), or -EBUSY when another holds it, or
 * -errno. Opened as every ring is (shmt_ring_open_fd()). */
static int lock_ring(const char *ring, struct stat *st)
{
	char err[256];
	int fd = shmt_ring_open_fd(ring, SHMT_OPEN_ANY_OWNER, st, err, sizeof(err));

	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;

		close(fd);
		return e == EWOULDBLOCK ? -EBUSY : -e;
	}
	return fd;
}

/* Opens a second descriptor on the ring only to hold its claim, and only
 * if it is the segment mapped. */
static int claim_ring(const struct shmt_view *v, const char *ring)
{
	struct stat st;
	int fd = lock_ring(ring, &st);

	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_dev != v->dev || (uint64_t)st.st_ino != v->ino) {
		close(fd);
		return -ESTALE;
	}
	return fd;	/* kept open (and locked) until hold_free() */
}

bool hold_claimed(const char *ring)
{
	struct stat st;
	int fd = lock_ring(ring, &st);

	/* closing the descriptor gives back the claim this took */
	if (fd >= 0)
		close(fd);
	return fd == -EBUSY;
}

int hold_init(struct hold *h, struct shmt_view *v, const char *ring, uint64_t settle_ns)
{
	int ret;

	memset(h, 0, sizeof(*h));
	h->v = v;
	h->settle_ns = settle_ns;
	h->tid = (uint32_t)gettid();
	h->claim_fd = ret = claim_ring(v, ring);
	if (ret < 0)
		return ret;
	h->dead = calloc(v->nblocks + 1, sizeof(*h->dead));
	h->order = calloc(v->nblocks + 1, sizeof(*h->order));
	h->ext = calloc(v->nblocks + 1, sizeof(*h->ext));
	h->staged = calloc(v->nblocks + 1, sizeof(*h->staged));
	h->seen = calloc(v->nblocks + 1, sizeof(*h->seen));
	if (h->seen)
		for (uint32_t i = 0; i < v->nblocks; i++)
			h->seen[i].no = UINT64_MAX;
	return h->dead && h->order && h->ext && h->staged && h->seen ? 0 : -ENOMEM;
}

/* Which of the dead owners found died inside open spans. */
static void note_died_open(struct hold *h)
{
	struct shmt_record open[SHMT_OPEN_MAX];

	h->died_open = 0;
	for (uint32_t i = 0; i < h->v->nblocks; i++) {
		if (!h->dead[i].pid || !shmt_block_open_spans(h->v, i, open))
			continue;
		if (!h->died_open++)
			h->died = h->dead[i];
	}
}

/* Keeps extent e (in sequence order after those kept). */
static void keep_extent(struct hold *h, const struct shmt_full *e)
{
	if (h->ext_n < h->v->nblocks)
		h->ext[(h->ext_first + h->ext_n++) % h->v->nblocks] = *e;
}

/* Frees extent e's block: taken first, so that a reader of the block
 * that sees it free sees it empty. Only a block still that extent. */
static void free_extent(struct shmt_view *v, const struct shmt_full *e)
{
	struct shmt_block *b = shmt_block_at(v, e->i);

	if (!b || !shmt_block_is_extent(b, e->seq, e->taken))
		return;
	store_release(&b->taken, e->taken + e->n);
	store_release(&b->state, SHMT_BLOCK_FREE);
}

bool hold_pending(const struct hold *h)
{
	return (h->next < h->nfull && h->moved < FLUSH_MOST && !h->full_stuck) || h->idle_due;
}

/* Ends the pass: nothing more to hold the lock for. */
static void pass_end(struct hold *h)
{
	h->nfull = h->next;
	h->idle_due = false;
}

/*
 * Of the blocks listed with staged records, keeps those a flush should
 * copy now. While full blocks keep coming (loaded), a live thread's block
 * that moved since the last look is about to be handed over and read in
 * place: it is left until it stops moving or its records have waited
 * settle_ns (the poll interval); moving still then, its owner is asked to
 * hand it over as it is at its next call (ring format 2.1), and it is
 * left once more; moving at the look after that (an owner that does not
 * answer, or finds no free block), it is copied. Otherwise (a quiet ring,
 * the last pass, a dead owner's block, a free block) all are kept.
 */
static uint32_t settled_only(struct hold *h, uint32_t n, bool loaded)
{
	uint64_t now = shmt_mono_ns();
	uint32_t k = 0;

	for (uint32_t j = 0; j < n; j++) {
		struct shmt_full *e = &h->staged[j];
		struct hold_seen *s = &h->seen[e->i];
		uint64_t w = load_acquire(&shmt_block_at(h->v, e->i)->written);
		bool live = e->no != UINT64_MAX && !(h->reaped && h->dead[e->i].pid);

		if (loaded && live && s->no != e->no) {
			/* first seen in this life: since now */
			*s = (struct hold_seen){ .no = e->no, .written = w, .since_ns = now };
			continue;
		}
		if (loaded && live && s->written != w && now - s->since_ns < h->settle_ns) {
			s->written = w;
			continue;
		}
		if (loaded && live && s->written != w && !s->asked && h->v->minor >= SHMT_MINOR_ASK) {
			/* for the life listed: a claim since clears the word,
			 * and an owner ignores another life's tag */
			SHMT_HOOK("collector-asking");
			store_relaxed(&shmt_block_at(h->v, e->i)->ask, shmt_ask_tag(e->no));
			s->asked = true;
			s->written = w;
			continue;
		}
		s->no = UINT64_MAX;	/* flushed: waits afresh */
		h->staged[k++] = *e;
	}
	return k;
}

/* One hold of the lock: full blocks first, in order, then the owned ones
 * (once the full ones are done or stuck), at most about HOLD_MOST records. */
static bool hold_once(struct hold *h, bool first)
{
	struct shmt_view *v = h->v;
	uint64_t t0, held, done = 0;
	bool full = h->next < h->nfull && h->moved < FLUSH_MOST && !h->full_stuck;
	/* live threads' staged records too, once no full block waits */
	bool all = h->next >= h->nfull;
	uint32_t idle_from, idle_end = h->nstaged;

	if (!full && h->idle_due && !h->listed) {
		/* the blocks with staged records, each block's header read
		 * here and not under the lock; after the full blocks, which
		 * an owned block may have to wait for (adopt.c) */
		h->nstaged = settled_only(h, shmt_staged_blocks(v, h->reaped ? h->dead : NULL, h->staged),
					  h->loaded);
		h->idle_next = 0;
		h->listed = true;
	}
	idle_from = h->idle_next;
	if (!full && !h->idle_due) {
		/* no full block, and no look due: while full blocks keep
		 * coming, a pass that finds none waits for the next look */
		h->full_left = h->nfull - h->next;
		return false;
	}
	if (!full && h->idle_due && !h->nstaged && !(first && h->reaped)) {
		/* nothing to flush: no hold */
		h->idle_due = false;
		h->last_idle_ns = shmt_mono_ns();
		h->full_left = h->nfull - h->next;
		return false;
	}
	if (!full && h->idle_due) {
		/* live threads' records copied here, not under the lock
		 * (2.2): the hold publishes each copy in a few stores */
		if (h->in_place && all)
			idle_end = shmt_adopt_listed_copy(v, h->staged, h->nstaged, h->idle_next,
							  HOLD_MOST, HOLD_COPIES, h->tid);
		SHMT_HOOK("collector-copied");
		h->warmed += shmt_adopt_listed_warm(v, h->staged, h->nstaged, h->idle_next, HOLD_MOST);
	}
	if (shmt_lock(v, LOCK_WAIT_NS) < 0) {
		if (!h->lock_warned)
			fprintf(stderr, "shmtrace-collector: warning: ring lock held for over %llu ms "
				"(owner stuck or gone); staged records of live threads wait\n",
				LOCK_WAIT_NS / 1000000);
		h->lock_warned = true;
		shmt_adopt_listed_uncopy(v, h->staged, h->nstaged, idle_from);
		pass_end(h);
		return false;
	}
	if (first && h->reaped)
		note_died_open(h);
	t0 = shmt_mono_ns();
	if (full) {
		uint64_t most = FLUSH_MOST - h->moved;
		uint32_t left;

		/* a thread's full blocks before what it stages now: in order,
		 * a few at a time */
		done = shmt_flush_full_locked(v, h->order + h->next, h->nfull - h->next,
					      most < HOLD_MOST ? most : HOLD_MOST,
					      SHMT_FLUSH_KEEP | (h->in_place ? SHMT_FLUSH_IN_PLACE : 0), &left);
		for (uint32_t k = h->next; k < h->nfull - left; k++)
			if (h->order[k].seq != UINT64_MAX)
				keep_extent(h, &h->order[k]);
		h->next = h->nfull - left;
		h->moved += done;
		/* stopped before any: the ring has no room, or the block is
		 * in a later life than listed; the next pass lists again */
		h->full_stuck = !done && left;
	} else if (h->idle_due) {
		/* what waits in owned blocks, once the full ones are moved
		 * (only dead threads' while some wait) */
		/* no further than the copies made: the next hold copies on */
		done = shmt_adopt_listed_locked(v, h->staged, idle_end, all,
						h->reaped ? h->dead : NULL, HOLD_MOST, &h->idle_next);
		/* the copies published, kept as blocks sequenced in place */
		for (uint32_t k = idle_from; k < h->idle_next; k++)
			if (h->staged[k].seq != UINT64_MAX)
				keep_extent(h, &h->staged[k]);
		if (h->idle_next >= h->nstaged) {
			h->idle_due = false;
			h->idle_next = 0;
			h->last_idle_ns = shmt_mono_ns();
		}
	}
	h->full_left = h->nfull - h->next;
	SHMT_HOOK("collector-hold");
	held = shmt_mono_ns() - t0;
	shmt_unlock(v);
	/* copies of blocks this hold did not reach: made again, fresh, by
	 * the hold that does */
	if (!full)
		shmt_adopt_listed_uncopy(v, h->staged, h->nstaged, idle_from);
	if (held > h->lock_hold_max_ns)
		h->lock_hold_max_ns = held;
	h->lock_holds++;
	h->lock_holds_long += held > HOLD_LONG_NS;
	return done != 0;
}

bool hold_adopt(struct hold *h, bool final)
{
	struct shmt_view *v = h->v;
	bool reap = final || shmt_mono_ns() - h->last_reap_ns > REAP_EVERY_NS;
	uint64_t now;

	h->died_open = 0;
	h->nfull = h->next = 0;
	h->moved = 0;
	h->full_stuck = false;
	h->idle_due = false;
	h->full_left = 0;
	if (!shmt_mutex_sane(v)) {
		if (!h->lock_warned)
			fprintf(stderr, "shmtrace-collector: warning: ring lock bytes are corrupt; "
				"staged records of live threads cannot be collected\n");
		h->lock_warned = true;
		return false;
	}
	/* who died is read from /proc before the lock, not under it, and
	 * the full blocks sorted */
	if (reap) {
		shmt_find_dead_blocks(v, h->dead);
		shmt_reap_claims(v);
		h->last_reap_ns = shmt_mono_ns();
	}
	h->reaped = reap;
	/* each look reads every block's header: only when some are full,
	 * and the owned ones' (idle threads' records) every IDLE_EVERY_NS
	 * while full blocks keep coming (loaded), at every pass otherwise */
	h->nfull = load_relaxed(&v->h->full_blocks.v) ? shmt_full_blocks(v, NULL, h->order) : 0;
	h->full_left = h->nfull;
	now = shmt_mono_ns();
	if (h->nfull)
		h->last_full_ns = now;
	/* only where full blocks are read in place: elsewhere a block
	 * handed over is copied anyway. Full blocks keep coming while one
	 * was listed within settle_ns, not only at this pass: a pass that
	 * drained them all finds the producers' blocks partly filled again,
	 * and copying those copied much of what producers flat out wrote,
	 * which they hand over whole a moment later */
	h->loaded = !final && h->in_place && h->last_full_ns &&
		    now - h->last_full_ns < h->settle_ns;
	/* a look cut short by the last pass is made again (the blocks it
	 * emptied are not listed) */
	h->idle_due = reap || (!h->nfull && !h->loaded) || h->idle_next ||
		      now - h->last_idle_ns > IDLE_EVERY_NS;
	h->listed = false;
	return hold_once(h, true);
}

bool hold_next(struct hold *h)
{
	return hold_pending(h) && hold_once(h, false);
}

void hold_mark(struct hold *h)
{
	store_relaxed(&h->v->h->collector_pid.v, (uint64_t)getpid());
	h->marked = true;
}

/* The mark taken off, unless another collector put its own since. */
static int unmark(void *arg)
{
	struct shmt_header *hd = arg;

	if (load_relaxed(&hd->collector_pid.v) == (uint64_t)getpid())
		store_relaxed(&hd->collector_pid.v, 0);
	return 0;
}

void hold_free(struct hold *h)
{
	/* guarded: a peer may have truncated the segment, the header too,
	 * which must end the collector with its error, not SIGBUS */
	if (h->marked)
		(void)shmt_guarded(unmark, h->v->h);
	h->marked = false;
	/* the lock goes, and with the descriptor the last reference a
	 * replaced ring's unlinked segment had: its memory is freed */
	if (h->claim_fd >= 0)
		close(h->claim_fd);
	h->claim_fd = -1;
	free(h->dead);
	free(h->order);
	free(h->ext);
	free(h->staged);
	free(h->seen);
	h->staged = NULL;
	h->seen = NULL;
	h->dead = NULL;
	h->order = NULL;
	h->ext = NULL;
}

void hold_in_place(struct hold *h, uint64_t tail)
{
	struct shmt_view *v = h->v;
	struct shmt_extent *e = calloc(v->nblocks + 1, sizeof(*e));
	uint32_t n;
	bool locked;

	h->in_place = v->minor >= SHMT_MINOR_IN_PLACE && v->mode == SHMTRACE_MODE_DISCARD;
	if (!h->in_place || !e) {
		free(e);
		return;
	}
	/* a collector killed between the two stores of a free leaves a
	 * block sequenced with nothing in it: no extent, nobody's */
	for (uint32_t i = 0; i < v->nblocks; i++) {
		struct shmt_block *b = shmt_block_at(v, i);

		if (load_acquire(&b->state) == SHMT_BLOCK_SEQUENCED &&
		    load_relaxed(&b->written) == load_relaxed(&b->taken))
			store_release(&b->state, SHMT_BLOCK_FREE);
	}
	/* under the lock: a producer that sequenced its own blocks with no
	 * collector (it checks for one under the lock) has finished, and no
	 * other starts (a wedged lock: none can sequence either) */
	locked = shmt_mutex_sane(v) && shmt_lock(v, LOCK_WAIT_NS) == 0;
	n = shmt_ring_extents(v, 0, UINT64_MAX, e, v->nblocks);
	if (locked)
		shmt_unlock(v);
	for (uint32_t k = 0; k < n; k++) {
		struct shmt_full f = { .no = e[k].claim_no, .i = e[k].block, .n = e[k].n,
				       .seq = e[k].seq, .taken = e[k].taken };

		keep_extent(h, &f);
	}
	free(e);
	hold_release(h, tail);
}

static const struct shmt_full *kept_extent(const struct hold *h, uint32_t k)
{
	uint32_t at = h->ext_first + k;

	return &h->ext[at >= h->v->nblocks ? at - h->v->nblocks : at];
}

/*
 * Halving: the extents are kept in sequence order, and those written out
 * stay at the front (a quarter of the blocks, for a reader of the ring),
 * so a scan from the front crossed them all at every frame. Extents a
 * peer's forged words put out of order give some extent that holds or
 * follows seq, never one that ends before it (copy_extent() reads from
 * seq on).
 */
const struct shmt_full *hold_extent(const struct hold *h, uint64_t seq)
{
	uint32_t lo = 0, hi = h->ext_n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct shmt_full *e = kept_extent(h, mid);

		if (e->seq + e->n > seq)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo < h->ext_n ? kept_extent(h, lo) : NULL;
}

/*
 * Whether extent e may be freed: written out (below tail), and either a
 * ring's worth of sequences behind the head, where a slot of the ring
 * would have been reused too, or one of more than a quarter of the blocks
 * kept, or one of blocks kept that, with those full and waiting for the
 * collector, make half the ring's: producers need them more (kept while
 * blocks wait, they leave none free to hand over to, and producers copy
 * under the lock or drop). Until then the ring holds its records as its
 * slots hold theirs, for a reader of the ring as it is (a post-mortem
 * export, a snapshot).
 */
static bool releasable(const struct hold *h, const struct shmt_full *e, uint64_t tail,
		       uint64_t waiting)
{
	uint64_t end = e->seq + e->n;

	return end <= tail && (end + h->v->capacity <= shmt_ring_head(h->v) ||
			       h->ext_n > h->v->nblocks / 4 || h->ext_n + waiting >= h->v->nblocks / 2);
}

void hold_release(struct hold *h, uint64_t tail)
{
	/* (ext_n is at most nblocks, which a valid ring never has 0 of) */
	/* a peer's word: forged, it frees written-out blocks sooner */
	uint64_t waiting = load_relaxed(&h->v->h->full_blocks.v);

	while (h->ext_n && h->v->nblocks) {
		const struct shmt_full *e = &h->ext[h->ext_first];

		if (!releasable(h, e, tail, waiting))
			break;
		free_extent(h->v, e);
		h->ext_first = (h->ext_first + 1) % h->v->nblocks;
		h->ext_n--;
	}
}
