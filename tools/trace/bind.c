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
#include "hash.h"

#define BLOOM_LINES	(1u << 17)	/* 64-byte lines: 8 MiB */
/*
 * The events of one thread within one window of viewer time go to one
 * group of lines, so that the events streamed one after the other touch
 * a few cache lines and not one random line of 8 MiB each (a cache miss
 * that was a third of the export's time). A thread's next window takes
 * the next group: a busy thread's windows tile the filter evenly instead
 * of piling up where random groups collide (which made the false "maybe"s
 * of a million-event trace a hundred times more frequent).
 */
#define GROUP_LINES	8u		/* lines of one (thread, window) */
#define WINDOW_SHIFT	6		/* window: 64 us of viewer time */

#define ASK_BITS	(1u << 20)	/* askbits: 128 KiB */
#define ASK_BIT(k)	((k) >> 44)	/* the key's top 20 bits */

enum { TAKEN = 1, FREE = 2, UNKNOWN = 3 };

/* The timestamp a viewer compares: the JSON's microseconds as a double.
 * Exact for ts below 2^53 ns (104 days of ring clock): the division is
 * correctly rounded, as the parse of the printed decimal is. */
static double view_ts(uint64_t ts)
{
	return (double)ts / 1000.0;
}

/* One 64-bit key per (pid, tid, viewer ts). Two keys that collide only
 * ever make a free timestamp look taken: a needless move, never a missed
 * collision. *line is where the filter keeps it. */
static uint64_t key_at(const struct bind *b, uint32_t pid, uint32_t tid, uint64_t ts,
		       uint64_t **line)
{
	double d = view_ts(ts);
	uint64_t bits, thread = hash_fmix64(((uint64_t)pid << 32 | tid) ^ 0x9e3779b97f4a7c15ull), k, g;

	memcpy(&bits, &d, sizeof(bits));
	k = hash_fmix64(thread ^ bits);
	/* d < 2^64 for every ts: the conversion is defined */
	g = thread + ((uint64_t)d >> WINDOW_SHIFT);
	*line = &b->bloom[((g * GROUP_LINES + (k & (GROUP_LINES - 1))) & (BLOOM_LINES - 1)) * 8];
	return k;
}

int bind_init(struct bind *b)
{
	memset(b, 0, sizeof(*b));
	u64map_init(&b->known);
	u64map_init(&b->ask);
	/* calloc'd pages stay untouched (and unmapped) until used */
	b->bloom = calloc((size_t)BLOOM_LINES * 8, sizeof(*b->bloom));
	return b->bloom ? 0 : -ENOMEM;
}

void bind_free(struct bind *b)
{
	free(b->bloom);
	free(b->askbits);
	u64map_free(&b->known);
	u64map_free(&b->ask);
	memset(b, 0, sizeof(*b));
}

/*
 * BITS bits of its 512-bit line per key (key bits 3.. : bits 0..2 chose
 * the line in its group). Six, not three: at a million events (8 per
 * line) they leave about one free timestamp in a million uncleared, so
 * such an export reads its input once; at ten million (70 per line) the
 * rate of false "maybe"s is within a few per cent of the best count's.
 */
#define BITS		6
#define BIT(k, i)	((unsigned)((k) >> (3 + 9 * (i))) & 511u)

void bind_note(struct bind *b, uint32_t pid, uint32_t tid, uint64_t ts)
{
	uint64_t *line, k = key_at(b, pid, tid, ts, &line);

	for (int i = 0; i < BITS; i++)
		line[BIT(k, i) / 64] |= 1ull << (BIT(k, i) % 64);
}

static bool maybe(const uint64_t *line, uint64_t k)
{
	for (int i = 0; i < BITS; i++)
		if (!(line[BIT(k, i) / 64] & 1ull << (BIT(k, i) % 64)))
			return false;
	return true;
}

void bind_seen(struct bind *b, uint32_t pid, uint32_t tid, uint64_t ts)
{
	uint64_t *line, k = key_at(b, pid, tid, ts, &line), *v;

	/* a verification pass sees every event: most are not asked about,
	 * and one bit in 128 KiB says so without a probe of the map */
	if (!b->askbits || !(b->askbits[ASK_BIT(k) / 64] & 1ull << (ASK_BIT(k) % 64)))
		return;
	v = u64map_find(&b->ask, k);
	if (v)
		*v = TAKEN;
}

/* The bits of askbits for the keys of ask, before a verification pass. */
static int mark_asked(struct bind *b)
{
	uint64_t key, *val;

	if (!b->askbits && !(b->askbits = malloc(ASK_BITS / 8)))
		return -ENOMEM;
	memset(b->askbits, 0, ASK_BITS / 8);
	for (size_t pos = 0; u64map_next(&b->ask, &pos, &key, &val);)
		b->askbits[ASK_BIT(key) / 64] |= 1ull << (ASK_BIT(key) % 64);
	return 0;
}

static int state(struct bind *b, uint32_t pid, uint32_t tid, uint64_t ts)
{
	uint64_t *line, k = key_at(b, pid, tid, ts, &line);
	const uint64_t *v = u64map_find(&b->known, k);
	bool added;

	if (v)
		return (int)*v;
	if (!maybe(line, k))
		return FREE;
	/* the next verification pass answers it; FREE unless seen */
	if (!u64map_get(&b->ask, k, FREE, &added))
		return -ENOMEM;
	return UNKNOWN;
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

#define CMP(a, b) ((a) < (b) ? -1 : (a) > (b))

/* By thread, then start; the longer span first, so it keeps the start. */
static int cmp_thread(const void *pa, const void *pb)
{
	const struct flow_ev *a = pa, *b = pb;
	int c;

	if ((c = CMP(a->pid, b->pid)) || (c = CMP(a->tid, b->tid)) || (c = CMP(a->ts, b->ts)) ||
	    (c = CMP(b->dur, a->dur)))
		return c;
	return CMP(a->order, b->order);
}

/* One round: proposes a start for every record; returns how many
 * timestamps it could not settle (then the proposals are not final). */
static long propose(struct bind *b, struct flow_ev *v, size_t n, uint64_t *start)
{
	long unknown = 0;

	for (size_t i = 0; i < n; i++) {
		bool same = i && v[i].pid == v[i - 1].pid && v[i].tid == v[i - 1].tid;
		uint64_t t = v[i].ts;
		int st;

		/* after the previous flow record of the thread, as seen */
		if (same && view_ts(t) <= view_ts(start[i - 1]))
			t = next_view(start[i - 1]);
		while ((st = state(b, v[i].pid, v[i].tid, t)) != FREE) {
			uint64_t next = next_view(t);

			if (st < 0)
				return st;
			/* an unsettled timestamp counts as taken for now, so
			 * that one pass answers the next candidates too */
			unknown += st == UNKNOWN;
			if (next == t)
				break;	/* the end of the clock: it stays */
			t = next;
		}
		start[i] = t;
	}
	return unknown;
}

int bind_resolve(struct bind *b, struct flow_ev *v, size_t n, bind_rescan_fn rescan, void *ctx)
{
	uint64_t *start, key, *val;
	long unknown;
	int ret = 0;

	if (!n)
		return 0;
	start = malloc(n * sizeof(*start));
	if (!start)
		return -ENOMEM;
	qsort(v, n, sizeof(*v), cmp_thread);
	while ((unknown = propose(b, v, n, start)) > 0) {
		/* a pass over the input settles every timestamp asked */
		b->passes++;
		if ((ret = mark_asked(b)) != 0 || (ret = rescan(ctx)) != 0)
			break;
		for (size_t pos = 0; u64map_next(&b->ask, &pos, &key, &val);) {
			if (!u64map_get(&b->known, key, *val, NULL)) {
				ret = -ENOMEM;
				break;
			}
		}
		u64map_free(&b->ask);
		u64map_init(&b->ask);
		if (ret)
			break;
	}
	if (unknown < 0)
		ret = (int)unknown;
	for (size_t i = 0; i < n && !ret; i++) {
		uint64_t shift = start[i] - v[i].ts;

		if (!shift)
			continue;
		v[i].ts = start[i];
		/* the end stays: the slice stays inside its parent */
		v[i].dur = v[i].dur > shift ? v[i].dur - shift : 0;
		b->moved++;
	}
	free(start);
	return ret;
}
