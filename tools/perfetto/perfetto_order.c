/* SPDX-License-Identifier: MIT */
/*
 * perfetto_order.c - the order in which a thread's events are written so
 * that the trace processor, which sorts events by time and keeps the
 * file's order within one time, nests them as the spans nested.
 *
 * A thread's records come as its spans end (a span after those it
 * encloses, its end never before theirs). A span's SLICE_END is written
 * when its record comes: the ends at one time then come inner first. Its
 * SLICE_BEGIN is written then too, unless other slices of the thread
 * begin at that time (the plan says so, perfetto_plan.c): then the begins
 * of that time wait until all of them came, and are written longest first
 * (the later record first when they end together: it is the outer one).
 * An event without duration (an instant, a span of no length) is written
 * after the begins of its time, and after the ends of spans ending at its
 * time, which come after it: it waits until the thread has recorded
 * something that ends later. That is the nesting Perfetto gives the same
 * spans in Chrome JSON (complete events sorted longest first, a slice
 * that ends where an instant is does not hold it).
 *
 * A flow's hops are bound in the order the trace processor takes them,
 * which within one time is the file's: a hop whose flow's previous hop
 * is at its time (the plan says so, perfetto_plan.c) is held until that
 * one is written, on whatever thread, and so are the begins of its time
 * on its thread that come after it in their order. Else a hop that sends
 * could come after the one that receives at its time and the terminating
 * id would end nothing: the flow would be cut.
 *
 * Spans that overlap without nesting (one begins inside the span that
 * ended last and ends after it) are counted in pf->overlapping: a track
 * of stacked slices cannot show them (the viewers of Chrome JSON drop
 * them), and their ends come out exchanged.
 *
 * What a thread holds is bounded: past PF_HOLD_MAX (records that do not
 * come in the order of their ends, or a plan that expected more), all of
 * it is written, counted in pf->forced. So is what all threads hold:
 * past PF_HOLD_ALL_MAX, every thread's is written (counted the same), and
 * a thread that holds nothing keeps no array. A thread's hop that waits
 * for another's costs no table: the plan names the thread of each, and
 * a hop that came and is no longer held has been written.
 */
#include <errno.h>
#include <stdlib.h>

#include "array.h"
#include "perfetto_int.h"

static uint64_t end_of(const struct pf_ev *ev)
{
	return shmt_time_end(ev->ts, ev->dur);
}

static struct pf_group *group_at(struct pf_thread *th, uint64_t ts)
{
	for (size_t i = 0; i < th->ngrp; i++)
		if (th->grp[i].ts == ts)
			return &th->grp[i];
	return NULL;
}

/* What release() writes: what is settled; what waits only for its time
 * (the end: hops still wait for the hops before them); everything. */
enum release_what { SETTLED, ENDED, ALL };

static struct pf_thread *thread_of(struct pf *pf, uint64_t key)
{
	const uint64_t *i = u64map_find(&pf->threads, key);

	return i ? &pf->thr[*i - 1] : NULL;
}

/* The held event of th that is hop (pf_ev.hop), or NULL. */
static struct pf_held *held_hop(struct pf_thread *th, uint64_t hop)
{
	for (size_t i = 0; th && i < th->nheld; i++)
		if (th->held[i].ev.hop == hop)
			return &th->held[i];
	return NULL;
}

/* Whether ev must wait for the hop before it in its flow: that one's
 * record comes later, or came and is held. */
static bool hop_waits(struct pf *pf, const struct pf_ev *ev)
{
	if (!ev->after)
		return false;
	if (ev->after > ev->hop)
		return true;
	return held_hop(thread_of(pf, ev->after_thread), ev->after) != NULL;
}

/* ev was written: the hop after it, if held waiting for it, waits no
 * more, and its thread is released again (release_woken()). */
static int hop_written(struct pf *pf, const struct pf_ev *ev)
{
	struct pf_thread *th;
	bool found = false;

	if (!ev->awaited || !(th = thread_of(pf, ev->next_thread)))
		return 0;
	/* every copy: a release() under way may hold two */
	for (size_t i = 0; i < th->nheld; i++) {
		if (th->held[i].ev.after == ev->hop) {
			th->held[i].waits = false;
			found = true;
		}
	}
	if (!found)
		return 0;
	if (array_reserve(&pf->woken, &pf->capwoken, pf->nwoken + 1, sizeof(*pf->woken), 16) < 0)
		return -ENOMEM;
	pf->woken[pf->nwoken++] = (uint32_t)(th - pf->thr);
	return 0;
}

/* Writes ev of thread th, and says so to the hop waiting for it. */
static int put(struct pf *pf, struct pf_thread *th, const struct pf_ev *ev)
{
	packet_event(pf, th->uuid, ev);
	return hop_written(pf, ev);
}

static int hold(struct pf *pf, struct pf_thread *th, const struct pf_ev *ev, bool grouped,
		bool waits)
{
	if (!th->holder &&
	    array_reserve(&pf->holders, &pf->capholders, pf->nholders + 1, sizeof(*pf->holders),
			  64) < 0)
		return -ENOMEM;
	/* most threads hold one or two at a time */
	if (array_reserve(&th->held, &th->caph, th->nheld + 1, sizeof(*th->held), 2) < 0)
		return -ENOMEM;
	th->held[th->nheld].ev = *ev;
	th->held[th->nheld].waits = waits;
	th->held[th->nheld++].grouped = grouped;
	pf->held_all++;
	if (!th->holder) {
		pf->holders[pf->nholders++] = (uint32_t)(th - pf->thr);
		th->holder = pf->nholders;
	}
	return 0;
}

/* th holds nothing more: its arrays freed, and it is no holder. */
static void unhold(struct pf *pf, struct pf_thread *th)
{
	uint32_t last = pf->holders[--pf->nholders];

	free(th->held);
	free(th->grp);
	th->held = NULL;
	th->grp = NULL;
	th->caph = th->capg = 0;
	/* the last holder takes its place */
	pf->holders[th->holder - 1] = last;
	pf->thr[last].holder = th->holder;
	th->holder = 0;
}

/* Longest first; of two that end together, the later record (the outer). */
static int cmp_begin(const void *pa, const void *pb)
{
	const struct pf_held *a = pa, *b = pb;
	uint64_t ea = end_of(&a->ev), eb = end_of(&b->ev);

	if (ea != eb)
		return ea < eb ? 1 : -1;
	return a->ev.n < b->ev.n ? 1 : a->ev.n > b->ev.n ? -1 : 0;
}

static bool begins_in(const struct pf_held *h, const struct pf_group *g)
{
	return h->grouped && h->ev.ts == g->ts && !h->ev.point;
}

/* Whether begin h of group g waits for a hop that is not one of g's own
 * (those are written in the group's order, which nesting decides). */
static bool waits_outside(struct pf_thread *th, const struct pf_held *h,
			  const struct pf_group *g)
{
	const struct pf_held *before;

	if (!h->waits)
		return false;
	before = h->ev.after_thread == ((uint64_t)th->pid << 32 | th->tid) ?
			 held_hop(th, h->ev.after) : NULL;
	return !before || !begins_in(before, g);
}

/* Whether b[0..n) holds the event numbered ev_n. */
static bool among(const struct pf_held *b, size_t n, uint64_t ev_n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i].ev.n == ev_n)
			return true;
	return false;
}

/*
 * Writes the begins of group g in their order, up to the first that waits
 * for a hop of another thread (what ALL: all of them); the rest stay
 * held, still grouped, to go on from there. Once all are written
 * (*done), the instants of its time wait for their time only.
 */
static int write_group(struct pf *pf, struct pf_thread *th, const struct pf_group *g,
		       enum release_what what, bool *done)
{
	struct pf_held *b;
	size_t k = 0, nb = 0, stop;
	int ret = 0;

	for (size_t i = 0; i < th->nheld; i++)
		nb += begins_in(&th->held[i], g);
	b = malloc((nb ? nb : 1) * sizeof(*b));
	if (!b)
		return -ENOMEM;
	nb = 0;
	for (size_t i = 0; i < th->nheld; i++)
		if (begins_in(&th->held[i], g))
			b[nb++] = th->held[i];
	if (nb)
		qsort(b, nb, sizeof(*b), cmp_begin);
	for (stop = 0; stop < nb; stop++)
		if (what != ALL && waits_outside(th, &b[stop], g))
			break;
	*done = stop == nb;
	/* the begins to write leave the held ones first: put() looks there
	 * for the hop that waits for each */
	for (size_t i = 0; i < th->nheld; i++) {
		struct pf_held h = th->held[i];

		if (begins_in(&h, g) && among(b, stop, h.ev.n))
			continue;
		/* an instant of the group's time: waits for its time only */
		if (*done && h.ev.ts == g->ts)
			h.grouped = false;
		th->held[k++] = h;
	}
	th->nheld = k;
	for (size_t i = 0; i < stop && ret == 0; i++)
		ret = put(pf, th, &b[i].ev);
	free(b);
	return ret;
}

/* Whether held event h of th is written now (what: release()'s). */
static bool ready(const struct pf_thread *th, const struct pf_held *h, enum release_what what)
{
	if (what == ALL)
		return true;
	if (h->grouped || h->waits)
		return false;
	/* an instant, once its time is settled */
	return what == ENDED || !h->ev.point || th->max_end > h->ev.ts;
}

/*
 * Writes what thread th may write now: the begins of each group all of
 * whose slices came (up to a hop that waits), then the events
 * that were held by themselves, in the order they came: instants whose
 * time is settled, hops whose wait is over. what: as enum release_what.
 */
static int release(struct pf *pf, struct pf_thread *th, enum release_what what)
{
	size_t k = 0, was = th->nheld, i;
	int ret = 0;

	for (size_t gi = 0; gi < th->ngrp;) {
		struct pf_group *g = &th->grp[gi];
		bool done;

		if (what == SETTLED && g->arrived < g->expected) {
			gi++;
			continue;
		}
		if ((ret = write_group(pf, th, g, what, &done)) < 0)
			return ret;
		if (done)
			th->grp[gi] = th->grp[--th->ngrp];
		else
			gi++;
	}
	for (i = 0; i < th->nheld && ret == 0; i++) {
		const struct pf_held h = th->held[i];

		if (ready(th, &h, what))
			ret = put(pf, th, &h.ev);
		else
			th->held[k++] = h;
	}
	/* what an error left */
	while (i < th->nheld)
		th->held[k++] = th->held[i++];
	th->nheld = k;
	pf->held_all -= was - k;
	if (!k && !th->ngrp && th->holder)
		unhold(pf, th);
	return ret;
}

/* Releases the threads whose hops waited for one just written. */
static int release_woken(struct pf *pf, enum release_what what)
{
	int ret = 0;

	while (pf->nwoken && ret == 0)
		ret = release(pf, &pf->thr[pf->woken[--pf->nwoken]], what);
	return ret;
}

/* Writes what every thread holds. */
static int release_all(struct pf *pf)
{
	int ret = 0;

	/* each release that empties a thread moves the last holder in */
	while (pf->nholders && ret == 0) {
		struct pf_thread *th = &pf->thr[pf->holders[pf->nholders - 1]];

		pf->forced += th->nheld;
		ret = release(pf, th, ALL);
	}
	return ret;
}

int order_put(struct pf *pf, struct pf_thread *th, const struct pf_ev *ev)
{
	uint64_t key = plan_key(th->pid, th->tid, ev->ts), end = end_of(ev);
	uint32_t expected;
	bool waits = hop_waits(pf, ev);
	int ret = 0;

	if (plan_tie(&pf->plan, key, ev->n, !ev->point, &expected)) {
		struct pf_group *g = group_at(th, ev->ts);

		if (!g) {
			if (array_reserve(&th->grp, &th->capg, th->ngrp + 1, sizeof(*th->grp), 4) < 0)
				return -ENOMEM;
			g = &th->grp[th->ngrp++];
			g->ts = ev->ts;
			g->expected = expected;
			g->arrived = 0;
		}
		g->arrived += !ev->point;
		ret = hold(pf, th, ev, true, waits);
	} else if (ev->point || waits) {
		ret = hold(pf, th, ev, false, waits);
	} else {
		ret = put(pf, th, ev);
	}
	if (ret < 0)
		return ret;
	if (!ev->point)
		packet_end(pf, th->uuid, end);
	/* a span that begins inside the one that ended last and ends after
	 * it: no nesting, which a track of stacked slices cannot show */
	if (!ev->point && th->max_start < ev->ts && ev->ts < th->max_end && end > th->max_end)
		pf->overlapping++;
	if (end > th->max_end) {
		th->max_end = end;
		th->max_start = ev->ts;
	}
	if ((ret = release(pf, th, SETTLED)) == 0)
		ret = release_woken(pf, SETTLED);
	if (ret == 0 && th->nheld > PF_HOLD_MAX) {
		pf->forced += th->nheld;
		ret = release(pf, th, ALL);
	}
	if (ret == 0 && pf->held_all > PF_HOLD_ALL_MAX)
		ret = release_all(pf);
	/* what those wrote woke: all of it is written already, or soon */
	if (ret == 0)
		ret = release_woken(pf, SETTLED);
	return ret;
}

int order_flush(struct pf *pf)
{
	int ret = 0;

	/* each hop after the one it waits for, then whatever is left (a
	 * hop whose flow's previous one never came, or that must also begin
	 * before it on their thread) */
	for (size_t i = 0; i < pf->nthr && ret == 0; i++) {
		ret = release(pf, &pf->thr[i], ENDED);
		if (ret == 0)
			ret = release_woken(pf, ENDED);
		if (ret == 0)
			ret = packet_flush(pf, false);
	}
	for (size_t i = 0; i < pf->nthr && ret == 0; i++) {
		ret = release(pf, &pf->thr[i], ALL);
		if (ret == 0)
			ret = packet_flush(pf, false);
	}
	pf->nwoken = 0;
	return ret;
}

void order_free(struct pf *pf)
{
	for (size_t i = 0; i < pf->nthr; i++) {
		free(pf->thr[i].held);
		free(pf->thr[i].grp);
	}
	free(pf->thr);
	free(pf->holders);
	free(pf->woken);
	pf->thr = NULL;
	pf->holders = NULL;
	pf->woken = NULL;
	pf->nwoken = pf->capwoken = 0;
	pf->nthr = pf->capthr = 0;
	pf->nholders = pf->capholders = 0;
	pf->held_all = 0;
}
