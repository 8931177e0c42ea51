/* SPDX-License-Identifier: MIT */
/*
 * perfetto_plan.c - what the first pass learns for the second: the flows,
 * assembled as the Chrome export assembles them (tools/trace/flows.c: the
 * same ids, the same first and last hops), and the times at which several
 * events of a thread begin.
 *
 * Why the times: Perfetto has no complete event, so a span is a
 * SLICE_BEGIN and a SLICE_END, and the trace processor sorts all events by
 * time and, within one time, keeps their order in the file. A span's
 * record comes when it ends, after the spans it encloses; two that begin
 * at one time (an outer and an inner span given the same start) must have
 * their begins written outer first, so the inner one's begin waits for the
 * outer one's record. The first pass says which times of a thread are
 * begun by several events, and how many slices begin there, without
 * keeping the events: a Bloom filter of (thread, time) finds the times
 * seen twice, and only those are counted, in a bounded map.
 */
#include <errno.h>
#include <stdlib.h>

#include "bloom.h"
#include "extsort.h"
#include "hash.h"
#include "perfetto_int.h"

#define BLOOM_LINES	(1u << 18)	/* 16 MiB */
#define WINDOW_SHIFT	16		/* a thread's keys within ~65 us share a page */
#define TIES_MAX	(1u << 20)	/* times counted at most */
#define TIE_BITS	(1u << 20)	/* tiebits: 128 KiB */
#define TIE_BIT(k)	((k) >> 44)	/* the key's top 20 bits */
#define NB_MASK		0xffffffull	/* begins counted, in a tie's low 24 bits */

int plan_init(struct pf_plan *p)
{
	flows_init(&p->fl);
	u64map_init(&p->ties);
	return bloom_init(&p->bloom, BLOOM_LINES);
}

void plan_free(struct pf_plan *p)
{
	flows_free(&p->fl);
	extsort_free(p->hops);
	bloom_free(&p->bloom);
	u64map_free(&p->ties);
	free(p->tiebits);
	p->hops = NULL;
	p->tiebits = NULL;
}

uint64_t plan_key(uint32_t pid, uint32_t tid, uint64_t ts)
{
	return hash_fmix64(hash_fmix64((uint64_t)pid << 32 | tid) ^ ts);
}

/* A time of the thread: counted when seen before (maybe), from then on. */
static int note_time(struct pf_plan *p, uint32_t pid, uint32_t tid, uint64_t ts, uint64_t n,
		     bool begin)
{
	uint64_t key = plan_key(pid, tid, ts), *v;
	uint64_t hint = hash_fmix64((uint64_t)pid << 32 | tid) + (ts >> WINDOW_SHIFT);

	if (!bloom_add(&p->bloom, hint, key))
		return 0;
	v = u64map_find(&p->ties, key);
	if (!v) {
		if (u64map_count(&p->ties) >= TIES_MAX) {
			p->untracked++;
			return 0;
		}
		/* from this event on: the one before, if any, is the
		 * second pass's to count (plan_tie()) */
		if (!(v = u64map_get(&p->ties, key, n << 24, NULL)))
			return -ENOMEM;
	}
	if (begin && (*v & NB_MASK) < NB_MASK)
		(*v)++;
	return 0;
}

int plan_event(struct pf *pf, const struct pf_ev *ev, const struct shmt_record *r, uint32_t pid,
	       uint32_t ring)
{
	struct pf_plan *p = &pf->plan;

	if (shmt_record_in_flow(r)) {
		/* as the Chrome export keeps it, in the same order */
		struct flow_ev fe = flow_ev_of(r, ring, pid);
		int ret;

		fe.dur = ev->dur;
		if ((ret = flows_add(&p->fl, &fe)) < 0)
			return ret;
	}
	return note_time(p, pid, r->tid, ev->ts, ev->n, !ev->point);
}

static int cmp_hop(const void *a, const void *b)
{
	uint64_t x = ((const struct pf_hop *)a)->order, y = ((const struct pf_hop *)b)->order;

	return x < y ? -1 : x > y;
}

static int on_hop(void *ctx, char ph, uint64_t id, const struct flow_ev *e,
		  const struct flow_ev *group, size_t n)
{
	struct pf_plan *p = ctx;
	struct pf_hop h = { .order = e->order, .id = id, .flow = e->flow, .ts = e->ts,
			    .pid = e->pid, .tid = e->tid, .ph = ph };
	size_t i = (size_t)(e - group);

	/* the trace processor takes the events of one time in the file's
	 * order: hops of a flow at one time must be written in the flow's
	 * order (perfetto_order.c), so each says which of its neighbours
	 * are at its time */
	if (i > 0 && group[i - 1].ts == e->ts) {
		h.after = group[i - 1].order + 1;
		h.after_thread = (uint64_t)group[i - 1].pid << 32 | group[i - 1].tid;
	}
	if (i + 1 < n && group[i + 1].ts == e->ts) {
		h.awaited = 1;
		h.next_thread = (uint64_t)group[i + 1].pid << 32 | group[i + 1].tid;
	}
	return extsort_add(p->hops, &h);
}

int plan_done(struct pf_plan *p, uint64_t *nflows)
{
	size_t pos = 0;
	uint64_t key, *val;
	int ret;

	p->tiebits = calloc(TIE_BITS / 64, sizeof(*p->tiebits));
	p->hops = extsort_new(sizeof(struct pf_hop), cmp_hop, FLOWS_MEM);
	if (!p->tiebits || !p->hops)
		return -ENOMEM;
	ret = flows_assemble(&p->fl, on_hop, p, nflows);
	if (ret < 0)
		return ret;
	flows_free(&p->fl);
	ret = extsort_rewind(p->hops);
	if (ret == 0)
		ret = p->have = extsort_next(p->hops, &p->cur);
	if (ret < 0)
		return ret;
	while (u64map_next(&p->ties, &pos, &key, &val))
		p->tiebits[TIE_BIT(key) / 64] |= 1ull << (TIE_BIT(key) % 64);
	/* the filter has done its work */
	bloom_free(&p->bloom);
	return 0;
}

bool plan_tie(const struct pf_plan *p, uint64_t key, uint64_t n, bool begin, uint32_t *expected)
{
	const uint64_t *v;
	uint64_t ins, nb;

	if (!(p->tiebits[TIE_BIT(key) / 64] & 1ull << (TIE_BIT(key) % 64)))
		return false;
	if (!(v = u64map_find(&p->ties, key)))
		return false;
	ins = *v >> 24;
	nb = *v & NB_MASK;
	/* the map counts from the event that found the time seen before;
	 * an earlier one is this, the first, which it did not count */
	*expected = (uint32_t)(n < ins ? nb + begin : nb);
	return true;
}

void plan_hop(struct pf *pf, uint64_t k, struct pf_ev *ev, uint32_t pid, uint32_t tid,
	      uint64_t flow)
{
	struct pf_plan *p = &pf->plan;
	const struct pf_hop *h = &p->cur;

	/* k grows by one a call: the hops are read in the same order */
	while (p->have == 1 && h->order < k)
		if (extsort_next(p->hops, &p->cur) != 1)
			p->have = 0;
	/* a ring read live may have changed between the passes */
	if (p->have != 1 || h->order != k || h->flow != flow || h->ts != ev->ts || h->pid != pid ||
	    h->tid != tid) {
		pf->hops_unmatched++;
		return;
	}
	ev->flow_id = h->id;
	ev->ph = h->ph;
	ev->hop = k + 1;
	ev->after = h->after;
	ev->after_thread = h->after_thread;
	ev->awaited = h->awaited;
	ev->next_thread = h->next_thread;
}
