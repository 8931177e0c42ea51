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
#define IDLE_EVERY_NS (10ull * 1000 * 1000)

/* Opens a second descriptor on the ring only to hold an advisory lock.
 * Opened as every ring is (shmt_ring_open_fd()), and only if it is the
 * segment mapped. */
static int claim_ring(const struct shmt_view *v, const char *ring)
{
	char err[256];
	struct stat st;
	int fd = shmt_ring_open_fd(ring, SHMT_OPEN_ANY_OWNER, &st, err, sizeof(err));

	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_dev != v->dev || (uint64_t)st.st_ino != v->ino) {
		close(fd);
		return -ESTALE;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;

		close(fd);
		return e == EWOULDBLOCK ? -EBUSY : -e;
	}
	return fd;	/* kept open (and locked) until we exit */
}

int hold_init(struct hold *h, struct shmt_view *v, const char *ring)
{
	int ret;

	memset(h, 0, sizeof(*h));
	h->v = v;
	ret = claim_ring(v, ring);
	if (ret < 0)
		return ret;
	h->dead = calloc(v->nblocks + 1, sizeof(*h->dead));
	h->order = calloc(v->nblocks + 1, sizeof(*h->order));
	return h->dead && h->order ? 0 : -ENOMEM;
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

/* One hold of the lock: full blocks first, in order, then the owned ones
 * (once the full ones are done or stuck), at most about HOLD_MOST records. */
static bool hold_once(struct hold *h, bool first)
{
	struct shmt_view *v = h->v;
	uint64_t t0, held, done = 0;

	if (shmt_lock(v, LOCK_WAIT_NS) < 0) {
		if (!h->lock_warned)
			fprintf(stderr, "shmtrace-collector: warning: ring lock held for over %llu ms "
				"(owner stuck or gone); staged records of live threads wait\n",
				LOCK_WAIT_NS / 1000000);
		h->lock_warned = true;
		pass_end(h);
		return false;
	}
	if (first && h->reaped)
		note_died_open(h);
	t0 = shmt_mono_ns();
	if (h->next < h->nfull && h->moved < FLUSH_MOST && !h->full_stuck) {
		uint64_t most = FLUSH_MOST - h->moved;
		uint32_t left;

		/* a thread's full blocks before what it stages now: in order,
		 * a few at a time */
		done = shmt_flush_full_locked(v, h->order + h->next, h->nfull - h->next,
					      most < HOLD_MOST ? most : HOLD_MOST, SHMT_FLUSH_KEEP, &left);
		h->next = h->nfull - left;
		h->moved += done;
		/* stopped before any: the ring has no room, or the block is
		 * in a later life than listed; the next pass lists again */
		h->full_stuck = !done && left;
	} else if (h->idle_due) {
		/* what waits in owned blocks, once the full ones are moved
		 * (only dead threads' while some wait) */
		done = shmt_adopt_blocks_locked(v, h->next >= h->nfull, h->reaped ? h->dead : NULL,
						HOLD_MOST, &h->idle_next);
		if (h->idle_next >= v->nblocks) {
			h->idle_due = false;
			h->idle_next = 0;
			h->last_idle_ns = shmt_mono_ns();
		}
	}
	h->full_left = h->nfull - h->next;
	SHMT_HOOK("collector-hold");
	held = shmt_mono_ns() - t0;
	shmt_unlock(v);
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
	 * while full blocks keep coming, at every pass otherwise */
	h->nfull = load_relaxed(&v->h->full_blocks.v) ? shmt_full_blocks(v, NULL, h->order) : 0;
	h->full_left = h->nfull;
	/* a look cut short by the last pass goes on where it stopped */
	h->idle_due = reap || !h->nfull || h->idle_next ||
		      shmt_mono_ns() - h->last_idle_ns > IDLE_EVERY_NS;
	return hold_once(h, true);
}

bool hold_next(struct hold *h)
{
	return hold_pending(h) && hold_once(h, false);
}

void hold_free(struct hold *h)
{
	free(h->dead);
	free(h->order);
	h->dead = NULL;
	h->order = NULL;
}
