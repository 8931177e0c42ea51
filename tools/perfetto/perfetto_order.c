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
 * Spans that overlap without nesting (one begins inside the span that
 * ended last and ends after it) are counted in pf->overlapping: a track
 * of stacked slices cannot show them (the viewers of Chrome JSON drop
 * them), and their ends come out exchanged.
 *
 * What a thread holds is bounded: past PF_HOLD_MAX (records that do not
 * come in the order of their ends, or a plan that expected more), all of
 * it is written, counted in pf->forced. So is what all threads hold:
 * past PF_HOLD_ALL_MAX, every thread's is written (counted the same), and
 * a thread that holds nothing keeps no array.
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

static int hold(struct pf *pf, struct pf_thread *th, const struct pf_ev *ev, bool grouped)
{
	if (!th->holder &&
	    array_reserve(&pf->holders, &pf->capholders, pf->nholders + 1, sizeof(*pf->holders),
			  64) < 0)
		return -ENOMEM;
	/* most threads hold one or two at a time */
	if (array_reserve(&th->held, &th->caph, th->nheld + 1, sizeof(*th->held), 2) < 0)
		return -ENOMEM;
	th->held[th->nheld].ev = *ev;
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

/* Writes the begins of group g in their order, and frees its instants to
 * wait for their time only. */
static int write_group(struct pf *pf, struct pf_thread *th, const struct pf_group *g)
{
	struct pf_held *b;
	size_t k = 0, nb = 0;

	for (size_t i = 0; i < th->nheld; i++)
		nb += begins_in(&th->held[i], g);
	b = malloc((nb ? nb : 1) * sizeof(*b));
	if (!b)
		return -ENOMEM;
	nb = 0;
	for (size_t i = 0; i < th->nheld; i++) {
		struct pf_held h = th->held[i];

		if (begins_in(&h, g)) {
			b[nb++] = h;
			continue;
		}
		/* an instant of the group's time: waits for its time only */
		if (h.ev.ts == g->ts)
			h.grouped = false;
		th->held[k++] = h;
	}
	th->nheld = k;
	if (nb)
		qsort(b, nb, sizeof(*b), cmp_begin);
	for (size_t i = 0; i < nb; i++)
		packet_event(pf, th->uuid, &b[i].ev);
	free(b);
	return 0;
}

/*
 * Writes what thread th may write now: the begins of each group all of
 * whose slices came, then the instants whose time is settled, in the order
 * they came. force: all of it.
 */
static int release(struct pf *pf, struct pf_thread *th, bool force)
{
	size_t k = 0, was = th->nheld;

	for (size_t gi = 0; gi < th->ngrp;) {
		struct pf_group *g = &th->grp[gi];
		int ret;

		if (!force && g->arrived < g->expected) {
			gi++;
			continue;
		}
		if ((ret = write_group(pf, th, g)) < 0)
			return ret;
		th->grp[gi] = th->grp[--th->ngrp];
	}
	for (size_t i = 0; i < th->nheld; i++) {
		const struct pf_held *h = &th->held[i];

		if (!h->grouped && (force || th->max_end > h->ev.ts))
			packet_event(pf, th->uuid, &h->ev);
		else
			th->held[k++] = *h;
	}
	th->nheld = k;
	pf->held_all -= was - k;
	if (!k && !th->ngrp && th->holder)
		unhold(pf, th);
	return 0;
}

/* Writes what every thread holds. */
static int release_all(struct pf *pf)
{
	int ret = 0;

	/* each release that empties a thread moves the last holder in */
	while (pf->nholders && ret == 0) {
		struct pf_thread *th = &pf->thr[pf->holders[pf->nholders - 1]];

		pf->forced += th->nheld;
		ret = release(pf, th, true);
	}
	return ret;
}

int order_put(struct pf *pf, struct pf_thread *th, const struct pf_ev *ev)
{
	uint64_t key = plan_key(th->pid, th->tid, ev->ts), end = end_of(ev);
	uint32_t expected;
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
		ret = hold(pf, th, ev, true);
	} else if (ev->point) {
		ret = hold(pf, th, ev, false);
	} else {
		packet_event(pf, th->uuid, ev);
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
	if ((ret = release(pf, th, false)) < 0)
		return ret;
	if (th->nheld > PF_HOLD_MAX) {
		pf->forced += th->nheld;
		ret = release(pf, th, true);
	}
	if (ret == 0 && pf->held_all > PF_HOLD_ALL_MAX)
		ret = release_all(pf);
	return ret;
}

int order_flush(struct pf *pf)
{
	int ret = 0;

	for (size_t i = 0; i < pf->nthr && ret == 0; i++) {
		ret = release(pf, &pf->thr[i], true);
		if (ret == 0)
			ret = packet_flush(pf, false);
	}
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
	pf->thr = NULL;
	pf->holders = NULL;
	pf->nthr = pf->capthr = 0;
	pf->nholders = pf->capholders = 0;
	pf->held_all = 0;
}
