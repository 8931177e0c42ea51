/* SPDX-License-Identifier: MIT */
/*
 * snapshot_copy.c - a live ring copied without its lock: the staging
 * blocks first, each settled against the head (which of its records a
 * flush had moved into the ring), then the ring's slots up to a head read
 * after all of them, a batch at a time as a seqlock, then the blocks'
 * records that flushes moved into those slots meanwhile taken out of the
 * blocks' copies, so that each record is copied once (docs/DESIGN.md,
 * "Snapshots of a live ring").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "snapshot_int.h"

/* Appends records r[0..n) of sequences first_seq on to f as one frame. */
static int frames_put(struct snap_frames *f, uint64_t first_seq, const struct shmt_record *r,
		      uint32_t n, uint64_t overwritten, uint64_t torn)
{
	size_t off = f->buf.size;
	uint64_t min_ts;

	if (!n)
		return 0;
	if (array_reserve(&f->v, &f->cap, f->n + 1, sizeof(*f->v), 64) < 0 ||
	    shmt_cap_put_records(&f->buf, first_seq, r, n) < 0)
		return -ENOMEM;
	/* records are in the order they were committed: a span committed
	 * after another may have begun before it */
	min_ts = r[0].ts;
	for (uint32_t i = 1; i < n; i++)
		if (r[i].ts < min_ts)
			min_ts = r[i].ts;
	f->v[f->n++] = (struct snap_frame){ off, first_seq, n, min_ts, overwritten, torn };
	return 0;
}

/* The header's trigger, when the caller left it to the copy: the first
 * trigger record at or after o->trigger_from_ns. */
static void note_trigger(struct snap *s, const struct shmt_record *r)
{
	struct shmt_cap_snapshot *in = &s->info;

	if (s->trigger_found || in->cause != SHMT_SNAP_TRIGGER || in->trigger[0] ||
	    r->commit != SHMTRACE_KIND_TRIGGER || r->ts < s->o->trigger_from_ns)
		return;
	s->trigger_found = true;
	if (shmt_ring_string(s->v, r->name, in->trigger, sizeof(in->trigger)) < 0)
		in->trigger[0] = 0;
	in->trigger_ns = r->ts;
	in->trigger_pid = r->pid;
	in->trigger_tid = r->tid;
}

/* The run of consecutive window records framed. */
static int run_end(struct snap *s)
{
	int ret = frames_put(&s->win, s->run_first, s->run, s->nrun, s->info.overwritten, s->torn);

	s->records += s->nrun;
	s->nrun = 0;
	return ret;
}

/* Where a record's event ends: a span's (or an open span's) end, else
 * its time. */
static uint64_t end_of(const struct shmt_record *r)
{
	return r->commit == SHMTRACE_KIND_SPAN || r->commit == SHMTRACE_KIND_OPEN ? r->ts + r->dur
										 : r->ts;
}

/* Slot seq read as r (NULL: not a finished record of its sequence, torn,
 * which the copy told apart from lapped). */
static int take(struct snap *s, uint64_t seq, const struct shmt_record *r)
{
	int ret = 0;

	if (!r) {
		/* before the window: no record of it lost */
		if (!s->started)
			return 0;
		/* the run before it framed first: a frame's count is of the
		 * slots lost before it, which a cut there leaves out with it */
		ret = run_end(s);
		s->torn++;
		return ret;
	}
	if (!s->started) {
		/* the window begins with an event that ends in it */
		if (shmt_kind_attached(r->commit) || end_of(r) < s->since)
			return 0;
		s->started = true;
		s->info.first_seq = seq;
	}
	if (s->nrun == SNAP_FRAME && (ret = run_end(s)) < 0)
		return ret;
	if (!s->nrun)
		s->run_first = seq;
	s->run[s->nrun++] = *r;
	note_trigger(s, r);
	/* a block's record a flush moved here after the block was copied */
	if (seq >= s->head_min) {
		if (array_reserve(&s->late, &s->caplate, s->nlate + 1, sizeof(*s->late), 256) < 0)
			return -ENOMEM;
		s->late[s->nlate++] = (struct snap_late){ seq, *r };
	}
	return 0;
}

/*
 * Slots [from, from + n), n at most SNAP_CHUNK, into buf, a pass at a
 * time as the writer stores them (ring_write.c): every commit word
 * (acquire), then every record, one fence, every commit word again. A
 * slot whose two words differ, or are not a finished record of its
 * sequence, was being written or is another lap's: ok[i] false; so is one
 * that a later lap took while it was copied (shmt_ring_overtaken()).
 */
static void copy_chunk(const struct shmt_view *v, uint64_t from, uint32_t n,
		       struct shmt_record *buf, uint8_t *ok)
{
	uint32_t c1[SNAP_CHUNK];

	for (uint32_t i = 0; i < n; i++)
		/* pairs with the release store of commit in put_records() */
		c1[i] = load_acquire(&v->records[(from + i) & v->mask].commit);
	for (uint32_t i = 0; i < n; i++)
		shmt_record_fields(&buf[i], &v->records[(from + i) & v->mask]);
	/* the copies complete before the second look at the commit words */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c2 = load_relaxed(&v->records[(from + i) & v->mask].commit);

		ok[i] = c1[i] == c2 && shmt_commit_is(c1[i], from + i) &&
			!shmt_ring_overtaken(v, from + i);
		buf[i].commit = SHMT_COMMIT_KIND(c1[i]);
	}
}

/*
 * Ring format 2.0, a discard ring: the extents of [from, end) (full
 * blocks a collector sequenced in place), sorted, and its tail read after
 * they were listed (a collector frees an extent's block only once its
 * tail passed it, so a freed one is below this tail).
 */
struct copy_ext {
	struct shmt_extent *e;
	uint32_t n;
	bool on;
	uint64_t tail;
};

static int extents_of(const struct shmt_view *v, uint64_t from, uint64_t end, struct copy_ext *ce)
{
	memset(ce, 0, sizeof(*ce));
	if (v->minor < SHMT_MINOR_IN_PLACE || v->mode != SHMTRACE_MODE_DISCARD)
		return 0;
	ce->e = malloc((v->nblocks + 1) * sizeof(*ce->e));
	if (!ce->e)
		return -ENOMEM;
	ce->on = true;
	ce->n = shmt_ring_extents(v, from, end, ce->e, v->nblocks);
	ce->tail = shmt_ring_tail(v);
	return 0;
}

/*
 * The slots the ring held when the copy began, [from, end), copied into
 * buf newest first, a chunk at a time, at the speed of memory: producers
 * overwrite the oldest slots first, so the copy meets them there, at the
 * first slot (from the top) that another lap took. Every slot below it is
 * taken too (laps go in order): returns that slot + 1, from when none was.
 * A slot that is no record and no other lap's is torn: ok 0. The
 * sequences of extents are read from their blocks; one whose block was
 * freed, or, in a 2.0 discard ring, one below the tail that neither a slot
 * nor an extent holds, was written out by the collector and let go, as a
 * lapped slot is: the window ends above it too.
 */
static uint64_t copy_back(const struct shmt_view *v, uint64_t from, uint64_t end,
			  struct shmt_record *buf, uint8_t *ok, const struct copy_ext *ce)
{
	uint32_t k = ce->n;

	for (uint64_t hi = end; hi > from;) {
		uint64_t lo = hi - from > SNAP_CHUNK ? hi - SNAP_CHUNK : from;

		copy_chunk(v, lo, (uint32_t)(hi - lo), buf + (lo - from), ok + (lo - from));
		for (uint64_t x = hi; x-- > lo;) {
			if (ok[x - from])
				continue;
			while (k && ce->e[k - 1].seq > x)
				k--;
			if (k && x - ce->e[k - 1].seq < ce->e[k - 1].n) {
				if (shmt_extent_read(v, &ce->e[k - 1], x, &buf[x - from]) < 0)
					return x + 1;
				ok[x - from] = 1;
				continue;
			}
			if ((ce->on && x < ce->tail) || shmt_ring_reused(v, x))
				return x + 1;
		}
		hi = lo;
	}
	return from;
}

/* The first slot of [seq, end) holding an event, or end. */
static uint64_t first_event(const struct shmt_record *buf, const uint8_t *ok, uint64_t from,
			    uint64_t seq, uint64_t end)
{
	for (; seq < end; seq++)
		if (ok[seq - from] && !shmt_kind_attached(buf[seq - from].commit))
			return seq;
	return end;
}

/*
 * Where the window starts: since, or keep before the trigger, the first
 * trigger record the copy holds (the slots [kept, end) of buf, the
 * blocks') at or after trigger_from_ns, else the time the caller was
 * asked at.
 */
static void window_start(struct snap *s, const struct shmt_record *buf, const uint8_t *ok,
			 uint64_t from, uint64_t kept, uint64_t end)
{
	const struct shmt_record *first = NULL;
	uint64_t at = s->info.trigger_ns;

	s->since = s->o->since_ns;
	for (uint64_t seq = kept; seq < end; seq++)
		if (ok[seq - from] && buf[seq - from].commit == SHMTRACE_KIND_TRIGGER &&
		    buf[seq - from].ts >= s->o->trigger_from_ns &&
		    (!first || buf[seq - from].ts < first->ts))
			first = &buf[seq - from];
	for (size_t i = 0; i < s->nbrecs; i++)
		if (s->brecs[i].commit == SHMTRACE_KIND_TRIGGER &&
		    s->brecs[i].ts >= s->o->trigger_from_ns && (!first || s->brecs[i].ts < first->ts))
			first = &s->brecs[i];
	if (first && s->info.cause == SHMT_SNAP_TRIGGER) {
		note_trigger(s, first);
		at = first->ts;
	}
	if (s->o->keep_ns)
		s->since = at > s->o->keep_ns ? at - s->o->keep_ns : 0;
}

/*
 * The window: the slots of [from, end) from the first whose record ends at
 * or after since (all of them without since). Those the producers
 * overwrote before the copy reached them are of the window when the first
 * record after them is (nothing tells where it would have begun among
 * them): then counted, and the window begins at from.
 */
static int copy_slots(struct snap *s, uint64_t end)
{
	uint64_t from = end > s->v->capacity ? end - s->v->capacity : 0, kept, ev;
	/* calloc: the large ones come zeroed from mmap at no cost */
	struct shmt_record *buf = calloc(end - from ? end - from : 1, sizeof(*buf));
	uint8_t *ok = calloc(end - from ? end - from : 1, 1);
	int ret = buf && ok ? 0 : -ENOMEM;
	struct copy_ext ce = { 0 };

	if (!ret)
		ret = extents_of(s->v, from, end, &ce);
	if (!ret) {
		kept = copy_back(s->v, from, end, buf, ok, &ce);
		free(ce.e);
		ev = first_event(buf, ok, from, kept, end);
		window_start(s, buf, ok, from, kept, end);
		if (kept > from && (!s->since ||
				    (ev < end && end_of(&buf[ev - from]) >= s->since))) {
			s->started = true;
			s->info.first_seq = from;
			s->info.overwritten = kept - from;
		}
		for (uint64_t seq = kept; seq < end && !ret; seq++)
			ret = take(s, seq, ok[seq - from] ? &buf[seq - from] : NULL);
	}
	free(buf);
	free(ok);
	if (!ret)
		ret = run_end(s);
	if (!s->started)
		s->info.first_seq = end;	/* an empty window */
	s->info.end_seq = end;
	s->win_overwritten = s->info.overwritten;
	s->win_torn = s->torn;
	return ret;
}

/* Block i: its pending records copied, then settled against the head. */
static int copy_block(struct snap *s, uint32_t i)
{
	const struct shmt_view *v = s->v;
	struct snap_block *b;
	int n;

	if (array_reserve(&s->blk, &s->capblk, s->nblk + 1, sizeof(*s->blk), 16) < 0 ||
	    array_reserve(&s->brecs, &s->capbrecs, s->nbrecs + v->block_records,
			  sizeof(*s->brecs), v->block_records) < 0)
		return -ENOMEM;
	b = &s->blk[s->nblk];
	memset(b, 0, sizeof(*b));
	n = shmt_ring_block_copy(v, i, &s->brecs[s->nbrecs], &b->info);
	if (b->info.state != SHMT_BLOCK_OWNED && n <= 0)
		return 0;
	b->idx = i;
	b->k = b->info.taken;
	b->off = s->nbrecs;
	b->n = n > 0 ? (uint32_t)n : 0;
	b->nopen = shmt_block_open_spans_seen(v, i, &b->info, b->open);
	b->settled = shmt_ring_block_settled(v, i, &b->below, &b->head) == 0;
	if (b->settled && b->head < s->head_min)
		s->head_min = b->head;
	s->nbrecs += b->n;
	s->nblk++;
	return 0;
}

/* Whether two records are one (a block's record and its copy in a slot:
 * the slot's commit word is reduced to the kind, as the block's). */
static bool same(const struct shmt_record *a, const struct shmt_record *b)
{
	return a->ts == b->ts && a->dur == b->dur && a->flow == b->flow && a->pid == b->pid &&
	       a->tid == b->tid && a->name == b->name && a->cat == b->cat && a->commit == b->commit;
}

/*
 * The slots read after the blocks (late, after) are looked up by each
 * block's thread: sorted by thread, then sequence, once, so that a block
 * reads its own thread's records, not every one of them (a ring's worth,
 * for each of thousands of blocks: a snapshot a peer could stretch to
 * minutes).
 */
static int by_thread(const void *pa, const void *pb)
{
	const struct snap_late *a = pa, *b = pb;

	if (a->r.pid != b->r.pid)
		return a->r.pid < b->r.pid ? -1 : 1;
	if (a->r.tid != b->r.tid)
		return a->r.tid < b->r.tid ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static bool is_thread(const struct shmt_record *r, const struct snap_block *b)
{
	return r->pid == b->info.pid && r->tid == b->info.tid;
}

/* The first of l[0..n) (sorted by_thread()) of b's thread, or n. */
static size_t thread_first(const struct snap_late *l, size_t n, const struct snap_block *b)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct shmt_record *r = &l[mid].r;

		if (r->pid < b->info.pid || (r->pid == b->info.pid && r->tid < b->info.tid))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Of block b's records not below b->below (the others are in the
 * window): how many a flush moved into the window's slots after the block
 * was settled. Flushes move a block's records in order from its taken on,
 * into slots in order: of the below2 - below moved since, the last ones
 * are its owner's in the slots past the window's end, the others in the
 * window, whether the copy found them there or counted them overwritten.
 * With another owner since (its thread ended, flushing all, and the block
 * was taken again), the count is not known: the copies found in the
 * window's slots are matched instead.
 */
static uint32_t moved_since(const struct snap *s, const struct snap_block *b,
			    const struct shmt_record *kept, uint32_t n)
{
	uint64_t moved = b->below2 - b->below, past = 0;
	size_t i;
	uint32_t j = 0;

	if (b->same_owner && !moved)
		return 0;	/* the common case: no list of slots to look through */
	if (b->same_owner) {
		for (i = thread_first(s->after, s->nafter, b); i < s->nafter &&
		     is_thread(&s->after[i].r, b) && s->after[i].seq < b->head2; i++)
			past += s->after[i].r.commit != SHMTRACE_KIND_OPEN;
		moved = moved > past ? moved - past : 0;
		return moved < n ? (uint32_t)moved : n;
	}
	for (i = thread_first(s->late, s->nlate, b); i < s->nlate && is_thread(&s->late[i].r, b) &&
	     j < n; i++) {
		const struct shmt_record *r = &s->late[i].r;

		if (s->late[i].seq >= b->head && r->commit != SHMTRACE_KIND_OPEN && same(r, &kept[j]))
			j++;
	}
	return j;
}

/* A record published after the window's end, kept (NULL: none there). */
static int note_after(void *arg, uint64_t seq, const struct shmt_record *r)
{
	struct snap *s = arg;

	if (!r)
		return 0;
	if (array_reserve(&s->after, &s->capafter, s->nafter + 1, sizeof(*s->after), 256) < 0)
		return -ENOMEM;
	s->after[s->nafter++] = (struct snap_late){ seq, *r };
	return 0;
}

/* Each block settled again, and the slots published since the window's
 * end read: what flushes moved after it. */
static int settle_again(struct snap *s, uint64_t end)
{
	const struct shmt_view *v = s->v;
	struct shmt_ring_skips skips = { 0 };
	uint64_t top = end, from = end;

	for (size_t i = 0; i < s->nblk; i++) {
		struct snap_block *b = &s->blk[i];
		const struct shmt_block *blk = shmt_block_at(v, b->idx);

		if (!b->settled)
			continue;
		b->settled = shmt_ring_block_settled(v, b->idx, &b->below2, &b->head2) == 0 &&
			     b->below2 >= b->below;
		b->same_owner = blk && load_relaxed(&blk->pid) == b->info.pid &&
				load_relaxed(&blk->tid) == b->info.tid &&
				load_relaxed(&blk->start_time) == b->info.start_time;
		if (b->settled && b->head2 > top)
			top = b->head2;
	}
	/* the ring holds a capacity's worth below the head at most: a head
	 * that ran further on since (or a peer's, forged 2^62 on) is read
	 * over its last capacity, never slot by slot from end */
	if (top - from > v->capacity)
		from = top - v->capacity;
	return shmt_ring_read_range(v, from, top, UINT64_MAX, &skips, note_after, s);
}

/* Whether open span o of block b ended (its span) or was recorded by the
 * block's adopter (an open span) in the slots read after the block. */
static bool open_in_slots(const struct snap *s, const struct snap_block *b,
			  const struct shmt_record *o)
{
	for (size_t i = thread_first(s->late, s->nlate, b); i < s->nlate &&
	     is_thread(&s->late[i].r, b); i++) {
		const struct shmt_record *r = &s->late[i].r;

		if (s->late[i].seq >= b->head &&
		    (r->commit == SHMTRACE_KIND_SPAN || r->commit == SHMTRACE_KIND_OPEN) &&
		    r->ts == o->ts && r->name == o->name)
			return true;
	}
	return false;
}

/* Frames run r[0..n) after the window at *seq, and leaves a sequence
 * free after it, so that a reader never takes its first record for one
 * that follows the run before (as a ring's reader starts each block). */
static int staged_put(struct snap *s, uint64_t *seq, const struct shmt_record *r, uint32_t n)
{
	int ret;

	if (!n)
		return 0;
	ret = frames_put(&s->staged, *seq, r, n, 0, 0);
	*seq += n + 1;
	s->records += n;
	s->info.staged += n;
	return ret;
}

/* Block b's records that are in no slot of the window, and its open
 * spans that neither ended nor were recorded there. */
static int block_put(struct snap *s, const struct snap_block *b, uint64_t *seq)
{
	struct shmt_record *kept = &s->brecs[b->off], open[SHMT_OPEN_MAX];
	uint64_t from = b->below > b->k ? b->below - b->k : 0;
	uint32_t n = 0, skip, nopen = 0, start = 0;
	int ret;

	if (!b->settled) {
		/* which of them the ring has is not known: lost to the copy */
		s->info.overwritten += b->n;
		return 0;
	}
	if (from < b->n) {
		kept += from;
		n = b->n - (uint32_t)from;
		skip = moved_since(s, b, kept, n);
		kept += skip;
		n -= skip;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (shmt_kind_valid(kept[i].commit)) {
			note_trigger(s, &kept[i]);
			continue;
		}
		/* a forged slot: counted, and the run breaks there */
		s->torn++;
		if ((ret = staged_put(s, seq, kept + start, i - start)) < 0)
			return ret;
		start = i + 1;
	}
	if ((ret = staged_put(s, seq, kept + start, n - start)) < 0)
		return ret;
	for (uint32_t i = 0; i < b->nopen; i++)
		if (!open_in_slots(s, b, &b->open[i]))
			open[nopen++] = b->open[i];
	return staged_put(s, seq, open, nopen);
}

int snap_copy(struct snap *s)
{
	const struct shmt_view *v = s->v;
	uint64_t end, seq;
	int ret = 0;

	s->info = s->o->info;
	s->head_min = UINT64_MAX;
	for (uint32_t i = 0; i < v->nblocks && !ret; i++)
		ret = copy_block(s, i);
	/* after every block was settled: what a flush moved out of a block
	 * before its settling is below this */
	end = shmt_ring_head(v);
	if (!ret)
		ret = copy_slots(s, end);
	if (!ret)
		ret = settle_again(s, end);
	if (s->nlate)
		qsort(s->late, s->nlate, sizeof(*s->late), by_thread);
	if (s->nafter)
		qsort(s->after, s->nafter, sizeof(*s->after), by_thread);
	seq = end;
	for (size_t i = 0; i < s->nblk && !ret; i++)
		ret = block_put(s, &s->blk[i], &seq);
	return ret;
}

static void frames_free(struct snap_frames *f)
{
	msgpack_sbuffer_destroy(&f->buf);
	free(f->v);
	memset(f, 0, sizeof(*f));
}

void snap_free(struct snap *s)
{
	frames_free(&s->win);
	frames_free(&s->staged);
	free(s->blk);
	free(s->brecs);
	free(s->late);
	free(s->after);
	s->blk = NULL;
	s->brecs = NULL;
	s->late = NULL;
	s->after = NULL;
}
