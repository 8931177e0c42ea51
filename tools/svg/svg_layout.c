/* SPDX-License-Identifier: MIT */
/*
 * svg_layout.c - where `shmtrace svg` puts things: the spans' nesting depth
 * on a thread, one lane per thread or counter, process groups top to
 * bottom in the order their first record appears.
 */
#include <errno.h>
#include <stdlib.h>

#include "svg_int.h"

unsigned svg_nest(struct svg_item *v, size_t n)
{
	/* ends of the open spans; deeper than this is drawn at the last depth */
	uint64_t stack[256];
	unsigned sp = 0, max = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t end = shmt_time_end(v[i].ts, v[i].dur);

		if (v[i].kind != SHMTRACE_KIND_SPAN) {
			v[i].depth = 0;
			continue;
		}
		while (sp && stack[sp - 1] <= v[i].ts)
			sp--;
		/* a span that outlives its parent still goes inside it: a
		 * partial overlap is drawn one deeper rather than on top */
		v[i].depth = (uint16_t)sp;
		if (sp > max)
			max = sp;
		if (sp < sizeof(stack) / sizeof(stack[0]))
			stack[sp++] = end;
	}
	return max;
}

/* Threads before counters in a process; then by thread or counter name. */
static uint32_t item_key(const struct svg_item *it)
{
	return it->kind == SHMTRACE_KIND_COUNTER ? it->name : it->tid;
}

static int cmp_item(const void *pa, const void *pb)
{
	const struct svg_item *a = pa, *b = pb;
	int ca = a->kind == SHMTRACE_KIND_COUNTER, cb = b->kind == SHMTRACE_KIND_COUNTER;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (ca != cb)
		return ca - cb;
	if (item_key(a) != item_key(b))
		return item_key(a) < item_key(b) ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	/* the outer of two spans starting together comes first */
	if (a->kind == SHMTRACE_KIND_SPAN && b->kind == SHMTRACE_KIND_SPAN && a->dur != b->dur)
		return a->dur > b->dur ? -1 : 1;
	return (a->kind == SHMTRACE_KIND_SPAN) ? -1 : (b->kind == SHMTRACE_KIND_SPAN);
}

static int cmp_porder(const void *pa, const void *pb)
{
	const struct proc_order *a = pa, *b = pb;

	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	return a->pid < b->pid ? -1 : a->pid > b->pid;
}

/* Groups the sorted items into lanes, nests them and lays the lanes out;
 * processes are ordered by their first record in the window, so a
 * request reads from top to bottom. */
int svg_layout(struct svg *g, struct proc_order **porder, size_t *nproc)
{
	struct proc_order *po;
	struct lane *sorted;
	size_t np = 0, k = 0;
	double y = TRACKS_Y;

	/* an empty window has no items, and may have no array (NULL) */
	if (g->n)
		qsort(g->v, g->n, sizeof(*g->v), cmp_item);
	g->lanes = calloc(g->n ? g->n : 1, sizeof(*g->lanes));
	po = calloc(g->n ? g->n : 1, sizeof(*po));
	if (!g->lanes || !po) {
		free(po);
		return -ENOMEM;
	}
	for (size_t i = 0; i < g->n;) {
		struct lane *l = &g->lanes[g->nlanes++];
		size_t j = i;

		l->pid = g->v[i].pid;
		l->counter = g->v[i].kind == SHMTRACE_KIND_COUNTER;
		l->key = item_key(&g->v[i]);
		while (j < g->n && g->v[j].pid == l->pid && item_key(&g->v[j]) == l->key &&
		       (g->v[j].kind == SHMTRACE_KIND_COUNTER) == l->counter)
			j++;
		l->first = i;
		l->n = j - i;
		if (l->counter) {
			l->vmin = l->vmax = (int64_t)g->v[i].dur;
			for (size_t m = i; m < j; m++) {
				int64_t val = (int64_t)g->v[m].dur;

				l->vmin = val < l->vmin ? val : l->vmin;
				l->vmax = val > l->vmax ? val : l->vmax;
			}
		} else {
			l->depth = svg_nest(&g->v[i], j - i);
		}
		if (!np || po[np - 1].pid != l->pid)
			po[np++] = (struct proc_order){ .pid = l->pid, .first = UINT64_MAX,
							.lane = g->nlanes - 1 };
		po[np - 1].nlanes++;
		for (size_t m = i; m < j; m++)
			if (g->v[m].ts < po[np - 1].first)
				po[np - 1].first = g->v[m].ts;
		i = j;
	}
	qsort(po, np, sizeof(*po), cmp_porder);
	/* lanes reordered by process; items keep pointing at them by index */
	sorted = calloc(g->nlanes ? g->nlanes : 1, sizeof(*sorted));
	if (!sorted) {
		free(po);
		return -ENOMEM;
	}
	for (size_t p = 0; p < np; p++) {
		y += p ? PROC_GAP : 0;
		y += PROC_H;
		for (size_t m = 0; m < po[p].nlanes; m++) {
			struct lane *l = &sorted[k];

			*l = g->lanes[po[p].lane + m];
			l->y = y;
			l->h = l->counter ? COUNTER_H : (l->depth + 1) * ROW_H + 2 * LANE_PAD;
			y += l->h;
			for (size_t q = l->first; q < l->first + l->n; q++)
				g->v[q].lane = (uint32_t)k;
			k++;
		}
		po[p].lane = k - po[p].nlanes;
	}
	free(g->lanes);
	g->lanes = sorted;
	g->height = y + 24;
	*porder = po;
	*nproc = np;
	return 0;
}
