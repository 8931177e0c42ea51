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
#define FLUSH_MOST (64u * 1024)	/* records of full blocks moved per hold */
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

bool hold_adopt(struct hold *h, bool final)
{
	struct shmt_view *v = h->v;
	uint64_t t0, held;
	bool reap = final || shmt_mono_ns() - h->last_reap_ns > REAP_EVERY_NS, moved, idle;
	uint32_t nfull;

	h->died_open = 0;
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
	/* each look reads every block's header: only when some are full,
	 * and the owned ones' (idle threads' records) every IDLE_EVERY_NS
	 * while full blocks keep coming, at every pass otherwise */
	nfull = load_relaxed(&v->h->full_blocks.v) ? shmt_full_blocks(v, NULL, h->order) : 0;
	idle = reap || !nfull || shmt_mono_ns() - h->last_idle_ns > IDLE_EVERY_NS;
	if (shmt_lock(v, LOCK_WAIT_NS) < 0) {
		if (!h->lock_warned)
			fprintf(stderr, "shmtrace-collector: warning: ring lock held for over %llu ms "
				"(owner stuck or gone); staged records of live threads wait\n",
				LOCK_WAIT_NS / 1000000);
		h->lock_warned = true;
		return false;
	}
	if (reap)
		note_died_open(h);
	t0 = shmt_mono_ns();
	/* a thread's full blocks before what it stages now: in order, a
	 * pass's worth at a time, so that the lock is held briefly and the
	 * drain encodes in between */
	moved = shmt_flush_full_locked(v, h->order, nfull, FLUSH_MOST, SHMT_FLUSH_KEEP, &h->full_left) != 0;
	if (idle) {
		moved |= shmt_adopt_blocks_locked(v, !h->full_left, reap ? h->dead : NULL) != 0;
		h->last_idle_ns = shmt_mono_ns();
	}
	held = shmt_mono_ns() - t0;
	shmt_unlock(v);
	if (held > h->lock_hold_max_ns)
		h->lock_hold_max_ns = held;
	return moved;
}

void hold_free(struct hold *h)
{
	free(h->dead);
	free(h->order);
	h->dead = NULL;
	h->order = NULL;
}
