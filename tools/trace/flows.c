/* SPDX-License-Identifier: MIT */
/*
 * flows.c - flow records kept for the end of an export (in bounded memory:
 * sorted runs in a temporary file beyond FLOWS_MEM) and assembled into
 * s/t/f chains, one flow in memory at a time.
 */
#include <errno.h>
#include <stdlib.h>

#include "array.h"
#include "flows.h"
#include "ring_format.h"

static int cmp_ev(const void *pa, const void *pb);

void flows_init_by(struct flows *f, extsort_cmp_fn cmp)
{
	f->s = NULL;
	f->cmp = cmp;
	f->n = 0;
}

void flows_init(struct flows *f)
{
	flows_init_by(f, cmp_ev);
}

void flows_free(struct flows *f)
{
	extsort_free(f->s);
	flows_init_by(f, f->cmp);
}

int flows_put(struct flows *f, const struct flow_ev *e)
{
	int ret;

	if (!f->s && !(f->s = extsort_new(sizeof(*e), f->cmp, FLOWS_MEM)))
		return -ENOMEM;
	ret = extsort_add(f->s, e);
	if (ret == 0)
		f->n++;
	return ret;
}

/* an arrival number for every record a flows can count */
_Static_assert(sizeof(((struct flow_ev *)0)->order) == sizeof(((struct flows *)0)->n),
	       "flow_ev.order holds any arrival number");

int flows_add(struct flows *f, const struct flow_ev *e)
{
	struct flow_ev c = *e;

	c.order = f->n;
	return flows_put(f, &c);
}

int flows_rewind(struct flows *f)
{
	return f->s ? extsort_rewind(f->s) : 0;
}

int flows_next(struct flows *f, struct flow_ev *e)
{
	return f->s ? extsort_next(f->s, e) : 0;
}

struct flow_ev flow_ev_of(const struct shmt_record *r, uint32_t ring, uint32_t pid)
{
	return (struct flow_ev){
		.flow = shmtrace_flow_id(r->flow), .ring = ring, .role = shmt_flow_role(r->flow),
		.ts = r->ts, .dur = r->dur, .pid = pid, .tid = r->tid, .cat = r->cat,
		.name = r->name, .kind = shmt_record_kind(r),
	};
}

uint64_t flow_ev_at(const struct flow_ev *e)
{
	if (!(e->role & SHMT_ROLE_RECEIVES) || e->kind == SHMTRACE_KIND_INSTANT)
		return e->ts;
	return shmt_time_end(e->ts, e->dur);
}

bool flow_receiving_span(const struct shmt_record *r)
{
	uint32_t k = shmt_record_kind(r);

	/* whatever the length (an open span's is known only at the end):
	 * the rescan of the Chrome export must find the records it split */
	return shmt_record_in_flow(r) && (shmt_flow_role(r->flow) & SHMT_ROLE_RECEIVES) &&
	       (k == SHMTRACE_KIND_SPAN || k == SHMTRACE_KIND_OPEN);
}

bool flow_split_receiving(const struct shmt_record *r, struct shmt_record *span,
			  struct shmt_record *mark)
{
	if (!flow_receiving_span(r))
		return false;
	*span = *r;
	span->flow = 0;
	*mark = *r;
	mark->ts = shmt_time_end(r->ts, r->dur);
	mark->dur = 0;
	mark->commit = SHMTRACE_KIND_INSTANT;
	return true;
}

#define CMP(a, b) ((a) < (b) ? -1 : (a) > (b))

/* The rings an id joins records of: its own, or all for a global id. */
uint32_t flow_scope(uint64_t flow, uint32_t ring)
{
	return flow & SHMT_FLOW_GLOBAL ? FLOW_SCOPE_ALL : ring;
}

static uint32_t scope(const struct flow_ev *e)
{
	return flow_scope(e->flow, e->ring);
}

static int cmp_ev(const void *pa, const void *pb)
{
	const struct flow_ev *a = pa, *b = pb;
	int c;

	if ((c = CMP(scope(a), scope(b))) || (c = CMP(a->flow, b->flow)) ||
	    (c = CMP(flow_ev_at(a), flow_ev_at(b))) || (c = CMP(a->pid, b->pid)) ||
	    (c = CMP(a->tid, b->tid)))
		return c;
	/* ties of one thread as nest_cmp() breaks them: a hop that encloses
	 * another comes first in its flow too */
	if ((c = CMP(b->dur, a->dur)) ||
	    (c = CMP(a->kind == SHMTRACE_KIND_INSTANT, b->kind == SHMTRACE_KIND_INSTANT)))
		return c;
	return CMP(a->order, b->order);
}

/* One flow handed over: a one-record flow draws nothing. */
static int emit_group(const struct flow_ev *g, size_t n, flows_emit_fn emit, void *ctx,
		      uint64_t *nflows)
{
	uint64_t first = g[0].order;
	int ret = 0;

	if (n == 1)
		return emit(ctx, 0, 0, &g[0], g, 1);
	for (size_t i = 1; i < n; i++)
		if (g[i].order < first)
			first = g[i].order;
	for (size_t i = 0; i < n && !ret; i++) {
		char ph = i == 0 ? 's' : i + 1 == n ? 'f' : 't';

		ret = emit(ctx, ph, first + 1, &g[i], g, n);
	}
	(*nflows)++;
	return ret;
}

/* f's records read back by flow, into a new f if f is in another order. */
static int by_flow(struct flows *f)
{
	struct flows n;
	struct flow_ev e;
	int ret;

	if (f->cmp == cmp_ev)
		return flows_rewind(f);
	flows_init(&n);
	ret = flows_rewind(f);
	while (ret == 0 && (ret = flows_next(f, &e)) > 0)
		ret = flows_put(&n, &e);
	if (ret < 0) {
		flows_free(&n);
		return ret;
	}
	flows_free(f);
	*f = n;
	return flows_rewind(f);
}

int flows_assemble(struct flows *f, flows_emit_fn emit, void *ctx, uint64_t *nflows)
{
	struct flow_ev *g = NULL, e;
	size_t ng = 0, cap = 0;
	uint64_t nf = 0;
	int ret;

	ret = by_flow(f);
	while (ret == 0 && (ret = flows_next(f, &e)) > 0) {
		if (ng && (e.flow != g[0].flow || scope(&e) != scope(&g[0]))) {
			ret = emit_group(g, ng, emit, ctx, &nf);
			ng = 0;
			if (ret)
				break;
		}
		if (array_reserve(&g, &cap, ng + 1, sizeof(*g), 16) < 0) {
			ret = -ENOMEM;
			break;
		}
		g[ng++] = e;
		ret = 0;
		/* nothing after it joins: the id's next record begins a flow */
		if (e.role & SHMT_ROLE_TERMINATES) {
			ret = emit_group(g, ng, emit, ctx, &nf);
			ng = 0;
		}
	}
	if (ret == 0 && ng)
		ret = emit_group(g, ng, emit, ctx, &nf);
	if (nflows)
		*nflows = nf;
	free(g);
	return ret;
}
