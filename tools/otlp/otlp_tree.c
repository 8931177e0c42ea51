/* SPDX-License-Identifier: MIT */
/*
 * otlp_tree.c - the OTLP export's spans as trees. The nodes, sorted by
 * thread and start (nest.h), walk each thread's tree in preorder; the
 * hops of the flows come along with their nodes. The rules
 * (docs/DESIGN.md, "The span model of the OTLP export"):
 *
 *   - a span's parent is the span that encloses it on its thread, and it
 *     is in that span's trace;
 *   - a hop (a record of a flow) is in its flow's trace; its parent is the
 *     span enclosing it if that span is in the same trace and hangs from
 *     no later hop of the flow (then it links to the hop before it), else
 *     the hop before it (then it links to the span enclosing it, if any);
 *   - a root that is no hop is in the trace of the first hop of its tree,
 *     a child of the hop before that one, or, with no hop in its tree, in
 *     a trace of its own;
 *   - an instant is an event of the span enclosing it (at most
 *     OTLP_EVENTS_MAX a span), else a zero-length span.
 *
 * A span is written when the walk reaches it, before what it encloses, so
 * what is known only after it (the first hop of a root's tree, the
 * instants inside a span) comes from a first walk: its joins (struct join,
 * in root order) and events (struct event, sorted by span), read along
 * the second walk, which writes. Memory: the sorts' buffers and one stack.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_int.h"

/* A span open on the stack of the first walk, and of the second. */
struct ent1 {
	struct nest_ent e;
	uint64_t index;		/* its number in the walk */
	uint32_t nev;		/* instants taken as its events */
};

struct ent2 {
	struct nest_ent e;
	/* step: of the hop it hangs from (itself, the nearest above it, or,
	 * above every hop, its tree's first: struct hop) */
	uint64_t index, id, owner, thi, tlo, step;
	uint32_t nev;
	bool in_flow;
};

struct walk {
	struct otlp *o;
	struct nest st;
	struct node nd;		/* the node walked */
	struct hop h;		/* its hop, if hop */
	struct hop next;	/* the next hop, if have_next */
	uint64_t index;		/* spans walked */
	/* the first walk: the root whose tree is walked (0: none, or a hop),
	 * and its first hop, if joined */
	uint64_t root;
	struct join j;
	/* the second walk: the next join and event */
	struct extsort *joins, *events;
	struct join nj;
	struct event ne;
	struct inst ev[OTLP_EVENTS_MAX];
	bool hop, have_next, joined, have_nj, have_ne;
};

#define CMP(a, b) ((a) < (b) ? -1 : (a) > (b))

/* Events by span, then time, then arrival. */
static int cmp_event(const void *pa, const void *pb)
{
	const struct event *a = pa, *b = pb;
	int c;

	if ((c = CMP(a->span, b->span)) || (c = CMP(a->ts, b->ts)))
		return c;
	return CMP(a->seq, b->seq);
}

/* The next node and, if it is a hop, its hop: 1, 0 at the end, or -errno. */
static int next_node(struct walk *w)
{
	int ret = extsort_next(w->o->nodes, &w->nd);

	if (ret <= 0)
		return ret;
	w->hop = w->have_next && w->next.k.seq == w->nd.k.seq;
	if (w->hop) {
		w->h = w->next;
		ret = extsort_next(w->o->hops, &w->next);
		if (ret < 0)
			return ret;
		w->have_next = ret > 0;
	}
	return 1;
}

/* Starts a walk: both sorts from their first item. */
static int rewind_walk(struct walk *w, size_t entry_size)
{
	int ret;

	nest_free(&w->st);
	nest_init(&w->st, entry_size, OTLP_DEPTH_MAX);
	w->index = 0;
	w->root = 0;
	w->have_next = false;
	ret = extsort_rewind(w->o->nodes);
	if (ret == 0)
		ret = extsort_rewind(w->o->hops);
	if (ret == 0)
		ret = extsort_next(w->o->hops, &w->next);
	w->have_next = ret > 0;
	return ret < 0 ? ret : 0;
}

/* ---------------------------------------------------------- first walk */

/* The tree walked has ended: its join kept, if it has one. */
static int end_tree(struct walk *w)
{
	int ret = 0;

	if (w->root && w->joined)
		ret = extsort_add(w->joins, &w->j);
	w->root = 0;
	return ret;
}

static int first_node(struct walk *w)
{
	struct ent1 *top = nest_find(&w->st, &w->nd.k), *e = NULL;
	int ret;

	if (!top && (ret = end_tree(w)) < 0)
		return ret;
	if (w->hop && top && w->root && !w->joined) {
		w->j = (struct join){ .seq = w->root, .thi = w->h.thi, .tlo = w->h.tlo,
				      .owner = w->h.owner, .prev = w->h.prev,
				      .step = w->h.step };
		w->joined = true;
	}
	if (w->nd.k.kind == SHMTRACE_KIND_INSTANT) {
		struct event ev = { .ts = w->nd.k.ts, .seq = w->nd.k.seq, .name = w->nd.k.user,
				    .cat = w->nd.cat, .args = w->nd.args };

		/* a hop is a span of its flow; an instant in none, one alone */
		if (w->hop || !top || top->nev >= OTLP_EVENTS_MAX)
			return 0;
		top->nev++;
		ev.span = top->index;
		return extsort_add(w->events, &ev);
	}
	w->index++;
	if (!top && !w->hop) {
		w->root = w->nd.k.seq;
		w->joined = false;
	}
	ret = nest_push(&w->st, &w->nd.k, (void **)&e);
	if (e)
		e->index = w->index;
	return ret;
}

/* --------------------------------------------------------- second walk */

/* The events of the span walked, from w->events into w->ev: how many. */
static int take_events(struct walk *w, size_t *n)
{
	int ret;

	*n = 0;
	while (w->have_ne && w->ne.span <= w->index) {
		if (w->ne.span == w->index && *n < OTLP_EVENTS_MAX)
			w->ev[(*n)++] = (struct inst){ .ts = w->ne.ts, .name = w->ne.name,
						       .cat = w->ne.cat, .args = w->ne.args };
		ret = extsort_next(w->events, &w->ne);
		if (ret < 0)
			return ret;
		w->have_ne = ret > 0;
	}
	return 0;
}

static void link_to(struct span *sp, uint32_t why, uint64_t hi, uint64_t lo, uint64_t id)
{
	sp->link = why;
	sp->lhi = hi;
	sp->llo = lo;
	sp->lid = id;
}

/* A hop's trace, parent and link; top encloses it (or is NULL). */
static void place_hop(struct walk *w, const struct ent2 *top, struct span *sp, uint64_t *owner,
		      uint64_t *step)
{
	const struct hop *h = &w->h;
	bool nested = top && !w->o->o->flows_only;

	sp->thi = h->thi;
	sp->tlo = h->tlo;
	sp->flow = h->flow;
	sp->in_flow = true;
	*owner = h->owner;
	*step = h->step;
	/* a receiving span, placed by its end, may enclose earlier hops of
	 * its flow: a span that hangs from a later hop is no parent (the
	 * later hop descends from this one), so parents never circle */
	if (nested && top->owner == h->owner && top->step <= h->step) {
		sp->parent = top->id;
		if (h->prev && h->prev != top->id)
			link_to(sp, LINK_PREV_HOP, h->thi, h->tlo, h->prev);
		return;
	}
	/* the first hop of its trace in this tree, or its only span there */
	sp->parent = h->prev;
	if (nested)
		link_to(sp, LINK_ENCLOSING, top->thi, top->tlo, top->id);
}

/* A span that is no hop, numbered seq: its trace and parent; top encloses
 * it (or is NULL). */
static int place(struct walk *w, const struct ent2 *top, uint64_t seq, struct span *sp,
		 uint64_t *owner, uint64_t *step)
{
	int ret;

	if (top) {
		sp->thi = top->thi;
		sp->tlo = top->tlo;
		sp->parent = top->id;
		sp->in_flow = top->in_flow;
		*owner = top->owner;
		*step = top->step;
		return 0;
	}
	if (w->have_nj && w->nj.seq == seq) {
		/* a root whose tree holds a hop: in that hop's trace */
		sp->thi = w->nj.thi;
		sp->tlo = w->nj.tlo;
		sp->in_flow = true;
		sp->parent = w->nj.prev;
		*owner = w->nj.owner;
		*step = w->nj.step;
		ret = extsort_next(w->joins, &w->nj);
		w->have_nj = ret > 0;
		return ret < 0 ? ret : 0;
	}
	otlp_trace_id(w->o->salt ^ hash_splitmix64(seq ^ 0x7472616365ull), &sp->thi, &sp->tlo);
	*owner = seq;
	return 0;
}

static int second_node(struct walk *w)
{
	struct otlp *o = w->o;
	const struct node *nd = &w->nd;
	struct ent2 *top = nest_find(&w->st, &nd->k), *e = NULL;
	struct span sp = {
		.outpid = nd->k.pid, .tid = nd->k.tid, .name = nd->k.user, .cat = nd->cat,
		.kind = nd->k.kind, .ts = nd->k.ts, .dur = nd->k.dur, .args = nd->args,
		.id = otlp_span_id(o, nd->k.seq),
	};
	bool span = nd->k.kind != SHMTRACE_KIND_INSTANT;
	uint64_t owner = 0, step = 0;
	int ret;

	if (!span && !w->hop && top && top->nev < OTLP_EVENTS_MAX) {
		/* an event, written with the span it is in */
		top->nev++;
		return 0;
	}
	if (w->hop)
		place_hop(w, top, &sp, &owner, &step);
	else if ((ret = place(w, top, nd->k.seq, &sp, &owner, &step)) < 0)
		return ret;
	if (span) {
		w->index++;
		ret = take_events(w, &sp.nev);
		if (ret == 0)
			ret = nest_push(&w->st, &nd->k, (void **)&e);
		if (ret < 0)
			return ret;
		sp.ev = w->ev;
		if (e)
			*e = (struct ent2){ .e = e->e, .index = w->index, .id = sp.id, .owner = owner,
					    .thi = sp.thi, .tlo = sp.tlo, .step = step,
					    .in_flow = sp.in_flow };
	}
	if ((w->hop && w->h.skip) || (o->o->flows_only && !w->hop))
		return 0;
	return otlp_span(o, &sp);
}

/* --------------------------------------------------------------- walks */

static int walk(struct walk *w, int (*visit)(struct walk *w))
{
	int ret;

	while ((ret = next_node(w)) > 0)
		if ((ret = visit(w)) < 0)
			return ret;
	return ret;
}

static int walks(struct walk *w)
{
	int ret;

	w->joins = extsort_new(sizeof(struct join), NULL, JOINS_MEM);
	w->events = extsort_new(sizeof(struct event), cmp_event, EVENTS_MEM);
	if (!w->joins || !w->events)
		return -ENOMEM;
	ret = rewind_walk(w, sizeof(struct ent1));
	if (ret == 0)
		ret = walk(w, first_node);
	if (ret == 0)
		ret = end_tree(w);
	if (ret == 0)
		ret = rewind_walk(w, sizeof(struct ent2));
	if (ret == 0)
		ret = extsort_rewind(w->joins);
	if (ret == 0)
		ret = extsort_rewind(w->events);
	if (ret == 0 && (ret = extsort_next(w->joins, &w->nj)) >= 0)
		w->have_nj = ret > 0;
	if (ret >= 0 && (ret = extsort_next(w->events, &w->ne)) >= 0)
		w->have_ne = ret > 0;
	if (ret >= 0)
		ret = walk(w, second_node);
	return ret;
}

int otlp_tree(struct otlp *o)
{
	struct walk *w = calloc(1, sizeof(*w));
	int ret;

	if (!w)
		return -ENOMEM;
	w->o = o;
	nest_init(&w->st, sizeof(struct ent1), OTLP_DEPTH_MAX);
	ret = walks(w);
	extsort_free(w->joins);
	extsort_free(w->events);
	nest_free(&w->st);
	free(w);
	return ret;
}
