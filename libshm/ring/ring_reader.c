/* SPDX-License-Identifier: MIT */
/*
 * ring_reader.c - lock-free, bounds-checked reading of a ring.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ring_reader.h"

uint64_t shmt_ring_head(const struct shmt_view *v)
{
	/* pairs with the release store of head in publish_locked() */
	return load_acquire(&v->h->head.v);
}

uint64_t shmt_ring_tail(const struct shmt_view *v)
{
	/* pairs with the collector's release store of tail */
	return load_acquire(&v->h->tail.v);
}

uint64_t shmt_ring_id(const struct shmt_view *v)
{
	return v->minor >= 1 ? v->h->ring_id : 0;
}

void shmt_ring_status(const struct shmt_view *v, struct shmt_ring_status *st)
{
	uint32_t heap_used;

	st->head = shmt_ring_head(v);
	st->tail = shmt_ring_tail(v);
	heap_used = load_relaxed(&v->h->heap_used);	/* untrusted: clamped */
	st->heap_used = heap_used > v->string_bytes ? v->string_bytes : heap_used;
	st->lock_recoveries = load_relaxed(&v->h->lock_recoveries);
}

uint64_t shmt_ring_collector_pid(const struct shmt_view *v)
{
	return load_relaxed(&v->h->collector_pid.v);
}

bool shmt_block_sequenced(const struct shmt_view *v, uint64_t w, uint64_t k, uint64_t s)
{
	/* only a discard ring's collector sequences blocks in place */
	return v->minor >= SHMT_MINOR_IN_PLACE && v->mode == SHMTRACE_MODE_DISCARD && w > k &&
	       w - k <= v->block_records &&
	       s + (w - k) > s && s + (w - k) <= shmt_ring_head(v);
}

static int cmp_extent(const void *a, const void *b)
{
	const struct shmt_extent *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

uint32_t shmt_ring_extents(const struct shmt_view *v, uint64_t from, uint64_t to,
			   struct shmt_extent *out, uint32_t max)
{
	uint32_t n = 0, kept = 0;

	if (v->minor < SHMT_MINOR_IN_PLACE || v->mode != SHMTRACE_MODE_DISCARD)
		return 0;
	for (uint32_t i = 0; i < v->nblocks && n < max; i++) {
		const struct shmt_block *b = shmt_block_at(v, i);
		uint64_t w, k, s;

		/* pairs with the sequencer's release store: seq0 first */
		if (load_acquire(&b->state) != SHMT_BLOCK_SEQUENCED)
			continue;
		w = load_relaxed(&b->written);
		k = load_relaxed(&b->taken);
		s = load_relaxed(&b->seq0);
		/* freed and claimed again while read: not one extent's words */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (!shmt_block_is_extent(b, s, k))
			continue;
		if (!shmt_block_sequenced(v, w, k, s) || s >= to || s + (w - k) <= from)
			continue;
		out[n] = (struct shmt_extent){ .seq = s, .taken = k, .claim_no = load_relaxed(&b->claim_no),
					       .block = i, .n = (uint32_t)(w - k) };
		n++;
	}
	qsort(out, n, sizeof(*out), cmp_extent);
	for (uint32_t i = 0; i < n; i++)
		if (!kept || out[i].seq >= out[kept - 1].seq + out[kept - 1].n)
			out[kept++] = out[i];
	return kept;
}

int shmt_extent_read(const struct shmt_view *v, const struct shmt_extent *e, uint64_t seq,
		     struct shmt_record *out)
{
	const struct shmt_block *b = shmt_block_at(v, e->block);
	const struct shmt_record *r;

	if (!b || seq < e->seq || seq - e->seq >= e->n)
		return -EAGAIN;
	r = &shmt_block_recs((struct shmt_block *)b)[(e->taken + (seq - e->seq)) & (v->block_records - 1)];
	/* a seqlock on the block: the collector frees it (taken, then the
	 * state) only after its tail passed the extent; its words are read
	 * before the record (acquire), and again after it */
	if (!shmt_block_is_extent(b, e->seq, e->taken) || load_relaxed(&b->claim_no) != e->claim_no)
		return -EAGAIN;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	shmt_record_fields(out, r);
	out->commit = SHMT_COMMIT_KIND(load_relaxed(&r->commit));
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (!shmt_block_is_extent(b, e->seq, e->taken) || !shmt_kind_valid(out->commit))
		return -EAGAIN;
	return 0;
}

/* The later lap's sequence a flush under way (or cut short by its
 * flusher's death) is writing into the slot of seq, as its journal says,
 * or 0: none. */
static uint64_t rewriting_lap(const struct shmt_view *v, uint64_t seq)
{
	const struct shmt_journal *j = &v->h->journal;
	uint64_t hb, n, lap;

	/* pairs with the release store that clears it in ring_write.c */
	if (!load_acquire(&j->active))
		return 0;
	hb = load_relaxed(&j->head_before);
	n = load_relaxed(&j->count);
	/* the one sequence of [hb, hb + n) (n at most a lap) in seq's slot */
	lap = hb + ((seq - hb) & v->mask);
	if (n > v->capacity)
		return 0;
	/* a later lap's, within the flush (and no wrap: the journal is
	 * untrusted) */
	return lap - hb < n && lap >= hb && lap > seq && lap - seq >= v->capacity ? lap : 0;
}

static bool rewriting(const struct shmt_view *v, uint64_t seq)
{
	return rewriting_lap(v, seq) != 0;
}

bool shmt_ring_overtaken(const struct shmt_view *v, uint64_t seq)
{
	/* the journal first: a flush clears it (release) after it stored
	 * head, so a journal seen cleared is seen with that head */
	uint64_t lap = rewriting_lap(v, seq), head = shmt_ring_head(v);

	/* a flush stores head after its records, and under way its journal
	 * says which lap it writes. A later record whose commit word names
	 * seq too is 2^24 sequences on at least (a capacity at most, so a
	 * lap of the largest ring): nearer ones read another word, which the
	 * seqlock's two loads catch */
	if (head > seq && head - seq > SHMT_COMMIT_SEQ_SPAN)
		return true;
	return lap && SHMT_COMMIT(lap, 0) == SHMT_COMMIT(seq, 0);
}

/* A slot's record of sequence seq, from the slot only. */
static int read_slot(const struct shmt_view *v, uint64_t seq, struct shmt_record *out)
{
	const struct shmt_record *r = &v->records[seq & v->mask];
	/* pairs with the release store of commit in put_record() */
	uint32_t c1 = load_acquire(&r->commit), c2;

	if (!shmt_commit_is(c1, seq))
		return -EAGAIN;
	shmt_record_fields(out, r);
	/* the copy must complete before the second look at commit (seqlock) */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	c2 = load_relaxed(&r->commit);
	if (c2 != c1 || shmt_ring_overtaken(v, seq))
		return -EAGAIN;
	out->commit = c1;
	return 0;
}

int shmt_ring_read(const struct shmt_view *v, uint64_t seq, struct shmt_record *out)
{
	struct shmt_extent e;

	/* an extent's sequences are its block's, whatever their slots hold:
	 * a slot an in-place sequence never wrote may still hold a finished
	 * record of the same sequence bits (a copy cut short by its copier's
	 * death, or a lap a multiple of 2^24 sequences back) */
	if (shmt_ring_extents(v, seq, seq + 1, &e, 1) == 1) {
		if (shmt_extent_read(v, &e, seq, out) < 0)
			return -EAGAIN;
		/* as a slot's: the commit word with the sequence */
		out->commit = SHMT_COMMIT(seq, out->commit);
		return 0;
	}
	return read_slot(v, seq, out);
}

/*
 * A slot whose commit word is 0 is being written by a flush right now, or
 * was left so (a flusher's death, a forger). Every write of a slot is a
 * flush under the journal, which is active from before the commit word
 * is zeroed until after the record is committed and head published: so
 * either the journal read after the zero covers the slot, or the flush
 * is over, and a second look at the slot and head (both stored before the
 * journal was cleared) finds its lap. No wait: a ring whose commit words
 * a peer zeroed costs a reader two looks per slot, not a spin.
 */
bool shmt_ring_reused(const struct shmt_view *v, uint64_t seq)
{
	const struct shmt_record *r = &v->records[seq & v->mask];

	for (int look = 0; look < 2; look++) {
		uint64_t head = shmt_ring_head(v);
		/* pairs with the release store of commit in put_record() */
		uint32_t c = load_acquire(&r->commit);
		uint32_t ahead = (SHMT_COMMIT_SEQ(c) - (uint32_t)seq) & 0xffffffu;

		if (head > seq && head - seq >= v->capacity)
			return true;
		/* a later lap's record: ahead by a multiple of capacity (and
		 * not behind, which would read as a large distance) */
		if (c && ahead && ahead < (1u << 23) && ahead % v->capacity == 0)
			return true;
		if (c)
			return false;	/* a finished record of no lap of ours */
		if (rewriting(v, seq))
			return true;
	}
	return false;
}

bool shmt_ring_lapped(const struct shmt_view *v, uint64_t seq)
{
	/* discard mode never reuses an unread slot */
	return v->mode == SHMTRACE_MODE_OVERWRITE && shmt_ring_reused(v, seq);
}

int shmt_ring_read_range(const struct shmt_view *v, uint64_t from, uint64_t to, uint64_t counted,
			 struct shmt_ring_skips *skips, shmt_ring_record_fn fn, void *arg)
{
	struct shmt_extent *ext = NULL;
	uint32_t next = 0, next_ext = 0;
	struct shmt_record r;
	int ret = 0;

	if (v->minor >= SHMT_MINOR_IN_PLACE && v->mode == SHMTRACE_MODE_DISCARD && from < to) {
		ext = malloc((v->nblocks + 1) * sizeof(*ext));
		if (!ext)
			return -ENOMEM;
		next_ext = shmt_ring_extents(v, from, to, ext, v->nblocks);
	}
	for (uint64_t seq = from; seq < to; seq++) {
		int got;

		while (next < next_ext && ext[next].seq + ext[next].n <= seq)
			next++;
		if (next < next_ext && ext[next].seq <= seq)
			got = shmt_extent_read(v, &ext[next], seq, &r);
		else
			got = read_slot(v, seq, &r);
		if (got == 0) {
			r.commit = SHMT_COMMIT_KIND(r.commit);
			ret = fn(arg, seq, &r);
		} else {
			/* below counted, a collector read (or counted) it already */
			if (seq >= counted) {
				if (shmt_ring_lapped(v, seq))
					skips->lapped++;
				else
					skips->torn++;
			}
			ret = fn(arg, seq, NULL);
		}
		if (ret != 0)
			break;
	}
	free(ext);
	return ret;
}

uint64_t shmt_ring_unread_below(const struct shmt_view *v, uint64_t from)
{
	uint64_t tail = load_acquire(&v->h->tail.v);

	return from > tail ? from - tail : 0;
}

uint32_t shmt_ring_nstrings(const struct shmt_view *v)
{
	uint32_t n = load_acquire(&v->h->strings);

	return n > v->max_strings + 1 ? v->max_strings + 1 : n;
}

int shmt_ring_string(const struct shmt_view *v, uint32_t id, char *buf, size_t buflen)
{
	const struct shmt_string *t;
	struct shmt_string e;
	size_t n;

	if (!buflen)
		return -EINVAL;
	buf[0] = 0;
	if (id == 0)
		return 0;
	if (id >= shmt_ring_nstrings(v) || !(t = shmt_string_at(v, id)))
		return -ENOENT;
	e.off = load_relaxed(&t->off);
	e.len = load_relaxed(&t->len);
	if (e.off >= v->string_bytes || e.len > v->string_bytes - e.off || e.len > SHMT_STRING_MAX)
		return -EBADMSG;
	n = e.len < buflen - 1 ? e.len : buflen - 1;
	memcpy(buf, v->heap + e.off, n);
	buf[n] = 0;
	return (int)n;
}

uint32_t shmt_ring_nthreads(const struct shmt_view *v)
{
	uint32_t n = load_acquire(&v->h->threads);

	return n > v->max_threads ? v->max_threads : n;
}

int shmt_ring_thread(const struct shmt_view *v, uint32_t i, struct shmt_thread *out)
{
	const struct shmt_thread *t = shmt_thread_at(v, i);

	if (i >= shmt_ring_nthreads(v) || !t)
		return -ENOENT;
	memcpy(out, t, sizeof(*out));
	out->name[SHMT_NAME_LEN - 1] = 0;
	out->pname[SHMT_NAME_LEN - 1] = 0;
	return 0;
}

/* Whether block i is the copy a collector is publishing (2.2, a step
 * under way or cut short by a death): its records are still its source's
 * until the repair or the head says otherwise, never pending in it. */
static bool copy_in_step(const struct shmt_view *v, uint32_t i)
{
	const struct shmt_journal *j = &v->h->journal;

	/* pairs with the release store that clears it */
	return load_acquire(&j->active) && load_relaxed(&j->block) == i &&
	       shmt_journal_step(v) == SHMT_JOURNAL_COPY;
}

/* Block i's taken t, or where a journalled step of it (a flush of the
 * block, or the collector's copy of it) that published below head and
 * has yet to move taken (its maker holds the lock, or died in it) leaves
 * it: those records are the ring's already (see shmt_repair). */
static uint64_t taken_past_step(const struct shmt_view *v, uint32_t i, uint64_t t, uint64_t head)
{
	uint64_t moved = 0;

	/* pairs with the release store that clears it */
	if (load_acquire(&v->h->journal.active) && shmt_journal_moves(v, &moved) == i &&
	    shmt_journal_published(&v->h->journal, head) && moved > t)
		return moved;
	return t;
}

int shmt_ring_block_copy(const struct shmt_view *v, uint32_t i, struct shmt_record *out,
			 struct shmt_block_info *info)
{
	struct shmt_block *b;
	const struct shmt_record *recs;
	uint64_t w, k;

	memset(info, 0, sizeof(*info));
	b = shmt_block_at(v, i);
	if (!b)
		return 0;
	recs = shmt_block_recs(b);
	/* pairs with the release store of a state: the journal of a copy
	 * being published, stored before its state, is seen with it */
	info->state = load_acquire(&b->state);
	info->pid = load_relaxed(&b->pid);
	info->tid = load_relaxed(&b->tid);
	info->start_time = load_relaxed(&b->start_time);
	/* pairs with the owner's release store of written */
	w = load_acquire(&b->written);
	k = load_acquire(&b->taken);
	k = taken_past_step(v, i, k, load_relaxed(&v->h->head.v));
	/* sequenced in place: its records are the ring's (extents); a copy
	 * being published (2.2) holds its source's, read there until the
	 * head covers them */
	if (info->state == SHMT_BLOCK_SEQUENCED &&
	    (copy_in_step(v, i) || shmt_block_sequenced(v, w, k, load_relaxed(&b->seq0))))
		k = w;
	if (k > w)
		k = w;
	if (w - k > v->block_records)
		k = w - v->block_records;
	info->written = w;
	info->taken = k;
	for (uint64_t s = k; s < w; s++) {
		const struct shmt_record *r = &recs[s & (v->block_records - 1)];
		struct shmt_record *d = &out[s - k];

		shmt_record_fields(d, r);
		d->commit = SHMT_COMMIT_KIND(load_relaxed(&r->commit));
	}
	return (int)(w - k);
}

int shmt_ring_block_pending(const struct shmt_view *v, uint32_t i, struct shmt_record *out,
			    struct shmt_block_info *info)
{
	int n = shmt_ring_block_copy(v, i, out, info), k = 0;

	for (int s = 0; s < n; s++) {
		if (!shmt_kind_valid(out[s].commit)) {
			info->skipped++;
			continue;
		}
		out[k++] = out[s];
	}
	return k;
}

int shmt_ring_block_settled(const struct shmt_view *v, uint32_t i, uint64_t *below,
			    uint64_t *head)
{
	const struct shmt_journal *j = &v->h->journal;
	struct shmt_block *b = shmt_block_at(v, i);

	if (!b)
		return -ENOENT;
	for (int spin = 0; spin < 100000; spin++) {
		/* pairs with the flusher's release store of taken, which
		 * follows its store of head */
		uint64_t k = load_acquire(&b->taken), h = shmt_ring_head(v), cnt, moved = 0;
		/* sequenced in place, below h: all of it is the ring's (its
		 * written the one checked: a peer's word, read once) */
		uint64_t w = load_relaxed(&b->written);
		bool sequenced = load_acquire(&b->state) == SHMT_BLOCK_SEQUENCED &&
				 shmt_block_sequenced(v, w, k, load_relaxed(&b->seq0));
		/* the journal is written before the head it publishes: seen
		 * with any head that holds its flush (or a copy of the block) */
		bool mine = load_acquire(&j->active) && shmt_journal_moves(v, &moved) == i &&
			    load_relaxed(&j->taken_before) == k;
		uint64_t hb = load_relaxed(&j->head_before);

		cnt = load_relaxed(&j->count);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		/* a flush of the block ended in between: the journal may be
		 * another's, and the head may not hold it */
		if (load_acquire(&b->taken) != k) {
			cpu_relax();
			continue;
		}
		*head = h;
		*below = k;
		/* a flush (or a copy) of the block under way (its flusher
		 * holds the lock, or died holding it) whose head is in h: its
		 * records are in the ring below h, or were dropped and counted */
		if (mine && (cnt ? hb + cnt <= h : true) && moved >= k)
			*below = moved;
		if (sequenced)
			*below = w;
		return 0;
	}
	return -EAGAIN;
}

static __thread sigjmp_buf *guard_env;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	(void)uc;
	if (guard_env)
		siglongjmp(*guard_env, 1);
	/* not ours: die as SIGBUS would have */
	signal(sig, SIG_DFL);
	raise(sig);
}

int shmt_guarded(int (*fn)(void *), void *arg)
{
	struct sigaction sa, old;
	sigjmp_buf env;
	int ret;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &old) < 0)
		return -errno;
	if (sigsetjmp(env, 1)) {
		guard_env = NULL;
		sigaction(SIGBUS, &old, NULL);
		return -EFAULT;
	}
	guard_env = &env;
	ret = fn(arg);
	guard_env = NULL;
	sigaction(SIGBUS, &old, NULL);
	return ret;
}

uint32_t shmt_ring_live_writers(const struct shmt_view *v)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < v->nblocks; i++) {
		struct shmt_block *b = shmt_block_at(v, i);

		if (load_acquire(&b->state) == SHMT_BLOCK_OWNED &&
		    shmt_owner_alive(load_relaxed(&b->pid), load_relaxed(&b->tid),
				     load_relaxed(&b->start_time)))
			n++;
	}
	return n;
}

uint64_t shmt_ring_undrained(const struct shmt_view *v)
{
	uint64_t head = shmt_ring_head(v), tail = load_acquire(&v->h->tail.v);
	uint64_t n = head > tail ? head - tail : 0;

	if (n > v->capacity)
		n = v->capacity;
	for (uint32_t i = 0; i < v->nblocks; i++) {
		struct shmt_block *b = shmt_block_at(v, i);
		uint64_t w = load_acquire(&b->written);
		uint64_t t = taken_past_step(v, i, load_relaxed(&b->taken), head);

		/* a sequenced block's are counted in head already, and a copy
		 * being published (2.2) holds its source's */
		if (load_relaxed(&b->state) == SHMT_BLOCK_SEQUENCED &&
		    (copy_in_step(v, i) || shmt_block_sequenced(v, w, t, load_relaxed(&b->seq0))))
			continue;
		n += w > t && w - t <= v->block_records ? w - t : 0;
	}
	return n;
}
