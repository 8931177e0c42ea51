/* SPDX-License-Identifier: MIT */
/*
 * bind.c - finding flow slices that share their start with another event
 * of their thread, and moving them by the smallest step that viewers can
 * tell apart, without keeping the streamed events in memory.
 *
 * DevTools binds a flow event to the first event with the same (ts, pid,
 * tid, cat), and Perfetto to the slice open on the thread at ts; an outer
 * span started at the same instant as the flow's span wins both. Events
 * without a flow are written as they come and cannot move, so the flow's
 * slice does: the filter remembers where the written ones are, well
 * enough to say "free" for certain, and a second read of the input
 * settles the rest.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bind.h"
#include "bloom.h"
#include "hash.h"

#define NOTE_LINES	(1u << 18)	/* 64-byte lines: 16 MiB */
/* The events of one thread within one window of viewer time are keys
 * near one another (util/bloom.h's hint): those streamed one after the
 * other touch a few cache lines, not one random line of 16 MiB each. */
#define WINDOW_SHIFT	6		/* window: 64 us of viewer time */

/* asked: a filter of the asked keys, 64 bytes for every 32 of them, from
 * 128 KiB (in a core's cache, which the verification pass probes for
 * every event) to 16 MiB */
#define ASK_LINES_MIN	(1u << 11)
#define ASK_LINES_MAX	(1u << 18)

/* the sorts' memory: asked, answered, found */
#define SORT_MEM	(8u << 20)

/* Candidates one record may ask about in one round: true collisions at
 * more than a few consecutive nanoseconds of one thread are rare, and a
 * saturated filter must not make every record ask a long chain. */
#define ASK_AHEAD	4
/* ... unless it has already walked past as many taken ones: a record
 * whose chain is long asks as far again as it came, so a chain of n
 * taken timestamps (a forged ring can make one) costs log n passes
 * over the input, not n / ASK_AHEAD */
#define ASK_AHEAD_MAX	(1u << 16)

static uint64_t ask_limit(uint64_t taken)
{
	return taken < ASK_AHEAD ? ASK_AHEAD : taken < ASK_AHEAD_MAX ? taken : ASK_AHEAD_MAX;
}

enum { TAKEN = 1, FREE = 2, UNKNOWN = 3 };

/* The timestamp a viewer compares: the JSON's microseconds as a double.
 * Exact for ts below 2^53 ns (104 days of ring clock): the division is
 * correctly rounded, as the parse of the printed decimal is. */
static double view_ts(uint64_t ts)
{
	return (double)ts / 1000.0;
}

/* One 64-bit key per (pid, tid, viewer ts), and *hint, its thread and
 * window. Two keys that collide only ever make a free timestamp look
 * taken: a needless move, never a missed collision. */
static uint64_t key_at(uint32_t pid, uint32_t tid, uint64_t ts, uint64_t *hint)
{
	double d = view_ts(ts);
	uint64_t bits, thread = hash_fmix64(((uint64_t)pid << 32 | tid) ^ 0x9e3779b97f4a7c15ull);

	memcpy(&bits, &d, sizeof(bits));
	/* d < 2^64 for every ts: the conversion is defined */
	*hint = thread + ((uint64_t)d >> WINDOW_SHIFT);
	return hash_fmix64(thread ^ bits);
}

int bind_init(struct bind *b)
{
	memset(b, 0, sizeof(*b));
	return bloom_init(&b->note, NOTE_LINES);
}

void bind_free(struct bind *b)
{
	bloom_free(&b->note);
	bloom_free(&b->asked);
	extsort_free(b->hits);
	memset(b, 0, sizeof(*b));
}

void bind_note(struct bind *b, uint32_t pid, uint32_t tid, uint64_t ts)
{
	uint64_t hint, k = key_at(pid, tid, ts, &hint);

	bloom_add(&b->note, hint, k);
}

/* A timestamp of a thread: what is asked, answered and found. */
struct bkey {
	uint32_t pid, tid;
	uint64_t ts;
	uint32_t state;		/* answers: TAKEN or FREE */
	uint32_t pad;
};

#define CMP(a, b) ((a) < (b) ? -1 : (a) > (b))

/* By thread, then start. */
static int cmp_key(const struct bkey *a, const struct bkey *b)
{
	int c;

	if ((c = CMP(a->pid, b->pid)) || (c = CMP(a->tid, b->tid)))
		return c;
	return CMP(a->ts, b->ts);
}

static int cmp_bkey(const void *a, const void *b)
{
	return cmp_key(a, b);
}

int bind_seen(struct bind *b, uint32_t pid, uint32_t tid, uint64_t ts)
{
	uint64_t hint, k = key_at(pid, tid, ts, &hint);
	struct bkey h = { .pid = pid, .tid = tid, .ts = ts };

	/* a verification pass sees every event: most are not asked about,
	 * and the filter of the asked keys says so */
	if (!b->asked.bits || !b->hits || !bloom_test(&b->asked, hint, k))
		return 0;
	return extsort_add(b->hits, &h);
}

/* The first ns after ts that a viewer tells apart from ts, or ts itself
 * when there is none before the clock wraps (a forged ts near 2^64: the
 * loop used to run on from 0, for ever). */
static uint64_t next_view(uint64_t ts)
{
	uint64_t n = ts + 1;

	while (n > ts && view_ts(n) <= view_ts(ts))
		n++;
	return n > ts ? n : ts;
}

/* By thread, then start; the longer span first, so it keeps the start. */
int bind_order(const void *pa, const void *pb)
{
	const struct flow_ev *a = pa, *b = pb;
	int c;

	if ((c = CMP(a->pid, b->pid)) || (c = CMP(a->tid, b->tid)) || (c = CMP(a->ts, b->ts)) ||
	    (c = CMP(b->dur, a->dur)))
		return c;
	return CMP(a->order, b->order);
}

/* A cursor over answers sorted by cmp_key: asked in increasing order. */
struct answers {
	struct extsort *s;
	struct bkey cur;
	int have;		/* 1: cur is the next answer; 0: none left */
};

static int answers_start(struct answers *a)
{
	int ret;

	a->have = 0;
	if (!a->s)
		return 0;
	ret = extsort_rewind(a->s);
	if (ret == 0)
		ret = a->have = extsort_next(a->s, &a->cur);
	return ret < 0 ? ret : 0;
}

/* The answer for q (TAKEN, FREE), 0 when it was never asked, or -errno.
 * Calls come in increasing order of q. */
static int answer(struct answers *a, const struct bkey *q)
{
	int ret;

	while (a->have == 1 && cmp_key(&a->cur, q) < 0)
		if ((ret = a->have = extsort_next(a->s, &a->cur)) < 0)
			return ret;
	return a->have == 1 && cmp_key(&a->cur, q) == 0 ? (int)a->cur.state : 0;
}

/* One round over the flow records by thread. Proposes a start for each
 * and, when out is not NULL, puts the record moved there into out.
 * Timestamps neither answered nor cleared by the filter go to asks.
 * Returns how many it could not settle (then out is not final). */
static long propose(struct bind *b, struct extsort *byth, struct answers *known,
		    struct extsort *asks, struct flows *out)
{
	struct flow_ev e, prev = { 0 };
	uint64_t prev_start = 0;
	uint64_t moved = 0;
	long unknown = 0;
	int ret;
	bool any = false;

	if ((ret = extsort_rewind(byth)) < 0 || (ret = answers_start(known)) < 0)
		return ret;
	while ((ret = extsort_next(byth, &e)) > 0) {
		bool same = any && e.pid == prev.pid && e.tid == prev.tid;
		struct bkey q = { .pid = e.pid, .tid = e.tid, .ts = e.ts };
		uint64_t asked = 0, taken = 0;
		int st;

		/* after the previous flow record of the thread, as seen */
		if (same && view_ts(q.ts) <= view_ts(prev_start))
			q.ts = next_view(prev_start);
		for (;;) {
			uint64_t hint, k = key_at(q.pid, q.tid, q.ts, &hint), next;

			if ((st = answer(known, &q)) < 0)
				return st;
			if (!st)
				st = bloom_test(&b->note, hint, k) ? UNKNOWN : FREE;
			if (st == FREE)
				break;
			/* an unsettled timestamp counts as taken for now, so
			 * that one pass answers the next candidates too */
			if (st == UNKNOWN) {
				unknown++;
				if ((ret = extsort_add(asks, &q)) < 0)
					return ret;
				if (++asked >= ask_limit(taken))
					break;
			} else {
				taken++;
			}
			next = next_view(q.ts);
			if (next == q.ts)
				break;	/* the end of the clock: it stays */
			q.ts = next;
		}
		prev = e;
		prev_start = q.ts;
		any = true;
		if (out && !unknown) {
			uint64_t shift = q.ts - e.ts;

			if (shift) {
				e.ts = q.ts;
				/* the end stays: the slice stays inside its parent */
				e.dur = e.dur > shift ? e.dur - shift : 0;
				moved++;
			}
			if ((ret = flows_put(out, &e)) < 0)
				return ret;
		}
	}
	if (ret < 0)
		return ret;
	if (out && !unknown)
		b->moved = moved;
	return unknown;
}

/* Whether hit h is before the asked q: by thread, then as a viewer
 * reads their starts. */
static bool hit_before(const struct bkey *h, const struct bkey *q)
{
	int c = CMP(h->pid, q->pid);

	if (!c)
		c = CMP(h->tid, q->tid);
	return c < 0 || (c == 0 && view_ts(h->ts) < view_ts(q->ts));
}

/* The asks answered by the hits of a verification pass, merged with the
 * answers known before (none of which was asked again) into new ones. */
static int merge_answers(struct bind *b, struct extsort *asks, struct answers *known)
{
	struct extsort *merged = extsort_new(sizeof(struct bkey), NULL, SORT_MEM);
	struct bkey q, h;
	int ret, hit;

	if (!merged)
		return -ENOMEM;
	if ((ret = answers_start(known)) < 0 || (ret = extsort_rewind(asks)) < 0 ||
	    (ret = extsort_rewind(b->hits)) < 0 || (ret = hit = extsort_next(b->hits, &h)) < 0)
		goto out;
	while ((ret = extsort_next(asks, &q)) > 0) {
		while (known->have == 1 && cmp_key(&known->cur, &q) < 0) {
			if ((ret = extsort_add(merged, &known->cur)) < 0 ||
			    (ret = known->have = extsort_next(known->s, &known->cur)) < 0)
				goto out;
		}
		while (hit == 1 && hit_before(&h, &q))
			if ((ret = hit = extsort_next(b->hits, &h)) < 0)
				goto out;
		q.state = hit == 1 && h.pid == q.pid && h.tid == q.tid &&
			  view_ts(h.ts) == view_ts(q.ts) ? TAKEN : FREE;
		if ((ret = extsort_add(merged, &q)) < 0)
			goto out;
	}
	while (ret == 0 && known->have == 1) {
		if ((ret = extsort_add(merged, &known->cur)) < 0)
			break;
		ret = known->have = extsort_next(known->s, &known->cur);
		if (ret > 0)
			ret = 0;
	}
out:
	if (ret < 0) {
		extsort_free(merged);
		return ret;
	}
	extsort_free(known->s);
	known->s = merged;
	return 0;
}

/* A verification pass: the input read again for the asked timestamps. */
static int verify(struct bind *b, struct extsort *asks, struct answers *known,
		  bind_rescan_fn rescan, void *ctx)
{
	uint64_t n = extsort_count(asks);
	size_t lines = ASK_LINES_MIN;
	struct bkey q;
	int ret;

	b->passes++;
	while (lines < ASK_LINES_MAX && lines * 32 < n)
		lines *= 2;
	bloom_free(&b->asked);
	if (bloom_init(&b->asked, lines) < 0)
		return -ENOMEM;
	if ((ret = extsort_rewind(asks)) < 0)
		return ret;
	while ((ret = extsort_next(asks, &q)) > 0) {
		uint64_t hint, k = key_at(q.pid, q.tid, q.ts, &hint);

		bloom_add(&b->asked, hint, k);
	}
	if (ret < 0)
		return ret;
	if (!(b->hits = extsort_new(sizeof(struct bkey), cmp_bkey, SORT_MEM)))
		return -ENOMEM;
	ret = rescan(ctx);
	if (ret == 0)
		ret = merge_answers(b, asks, known);
	extsort_free(b->hits);
	b->hits = NULL;
	return ret;
}

/* f's records, by thread. */
static struct extsort *by_thread(struct flows *f, int *err)
{
	struct extsort *s;
	struct flow_ev e;
	int ret;

	if (f->cmp == bind_order) {
		/* in that order already: taken over */
		s = f->s;
		f->s = NULL;
		return s;
	}
	if (!(s = extsort_new(sizeof(struct flow_ev), bind_order, FLOWS_MEM))) {
		*err = -ENOMEM;
		return NULL;
	}
	ret = flows_rewind(f);
	while (ret == 0 && (ret = flows_next(f, &e)) > 0)
		ret = extsort_add(s, &e);
	if (ret < 0) {
		extsort_free(s);
		*err = ret;
		return NULL;
	}
	return s;
}

int bind_resolve(struct bind *b, struct flows *f, bind_rescan_fn rescan, void *ctx)
{
	struct answers known = { 0 };
	struct extsort *byth;
	int ret = 0;

	if (!f->n)
		return 0;
	if (!(byth = by_thread(f, &ret)))
		return ret;
	flows_free(f);
	for (;;) {
		struct extsort *asks = extsort_new(sizeof(struct bkey), NULL, SORT_MEM);
		struct flows out;
		long unknown;

		if (!asks) {
			ret = -ENOMEM;
			break;
		}
		flows_init(&out);
		unknown = propose(b, byth, &known, asks, &out);
		if (unknown == 0)
			*f = out;
		else
			flows_free(&out);
		if (unknown > 0)
			ret = verify(b, asks, &known, rescan, ctx);
		else
			ret = (int)unknown;
		extsort_free(asks);
		if (unknown <= 0 || ret)
			break;
	}
	extsort_free(known.s);
	extsort_free(byth);
	return ret;
}
