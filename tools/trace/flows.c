/* SPDX-License-Identifier: MIT */
/*
 * flows.c - flow records kept in memory (the only per-record memory the
 * exporter has) and assembled into s/t/f chains at the end.
 */
#include <errno.h>
#include <stdlib.h>

#include "array.h"
#include "flows.h"
#include "ring_format.h"

void flows_init(struct flows *f)
{
	f->v = NULL;
	f->n = f->cap = 0;
}

void flows_free(struct flows *f)
{
	free(f->v);
	flows_init(f);
}

int flows_add(struct flows *f, const struct flow_ev *e)
{
	if (array_reserve(&f->v, &f->cap, f->n + 1, sizeof(*f->v), 1024) < 0)
		return -ENOMEM;
	f->v[f->n] = *e;
	f->v[f->n].order = (uint32_t)f->n;
	f->n++;
	return 0;
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

	if ((c = CMP(scope(a), scope(b))) || (c = CMP(a->flow, b->flow)) || (c = CMP(a->ts, b->ts)) || (c = CMP(a->pid, b->pid)) ||
	    (c = CMP(a->tid, b->tid)))
		return c;
	return CMP(a->order, b->order);
}

struct group {
	size_t start, n;
	uint32_t first;		/* arrival of its earliest-arriving record */
};

static int cmp_group(const void *pa, const void *pb)
{
	const struct group *a = pa, *b = pb;

	return CMP(a->first, b->first);
}

int flows_assemble(struct flows *f, flows_emit_fn emit, void *ctx, uint64_t *nflows)
{
	struct group *g = NULL;
	size_t ng = 0, cap = 0;
	int ret = 0;

	if (nflows)
		*nflows = 0;
	if (!f->n)
		return 0;
	qsort(f->v, f->n, sizeof(*f->v), cmp_ev);
	for (size_t i = 0; i < f->n;) {
		size_t j = i;
		uint32_t first = f->v[i].order;

		while (j < f->n && f->v[j].flow == f->v[i].flow && scope(&f->v[j]) == scope(&f->v[i])) {
			if (f->v[j].order < first)
				first = f->v[j].order;
			j++;
		}
		if (j - i == 1) {
			ret = emit(ctx, 0, 0, &f->v[i], &f->v[i], 1);
			if (ret) {
				free(g);
				return ret;
			}
		} else {
			if (array_reserve(&g, &cap, ng + 1, sizeof(*g), 256) < 0) {
				free(g);
				return -ENOMEM;
			}
			g[ng++] = (struct group){ .start = i, .n = j - i, .first = first };
		}
		i = j;
	}
	if (ng)
		qsort(g, ng, sizeof(*g), cmp_group);
	for (size_t k = 0; k < ng && !ret; k++) {
		for (size_t i = 0; i < g[k].n && !ret; i++) {
			char ph = i == 0 ? 's' : i + 1 == g[k].n ? 'f' : 't';

			ret = emit(ctx, ph, k + 1, &f->v[g[k].start + i], &f->v[g[k].start], g[k].n);
		}
	}
	if (nflows)
		*nflows = ng;
	free(g);
	return ret;
}
