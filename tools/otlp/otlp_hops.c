/* SPDX-License-Identifier: MIT */
/*
 * otlp_hops.c - the OTLP export's flows: each flow is one trace, and each
 * of its records (a hop) learns that trace, the hop before it (the span it
 * follows from) and whether it is the instant that records the W3C
 * traceparent the flow came with (which names the caller's trace and
 * span, and is no span of its own). The hops are sorted as the nodes
 * are, so that the walk of the threads' trees meets each with its node.
 */
#include <errno.h>

#include "otlp_int.h"

/* A flow's first record: its trace, owner and first parent, from the
 * traceparent it carries if it does. */
static void flow_begin(struct otlp *o, const struct flow_ev *group, size_t n)
{
	uint64_t a, b, c;

	o->owner = group[0].seq;
	o->prev = 0;
	for (size_t i = 0; i < n; i++) {
		if (otlp_is_traceparent(o, &group[i], &a, &b, &c)) {
			o->thi = a;
			o->tlo = b;
			o->prev = c;
			return;
		}
	}
	otlp_flow_trace_id(o, group, &o->thi, &o->tlo);
	/* the id's next flow after a terminating step (flows_assemble()
	 * hands the flows of one id one after the other): a trace of its
	 * own; the id's first flow keeps the id's trace, which every host's
	 * export of it agrees on */
	if (o->flows_seen && group[0].flow == o->last_flow &&
	    flow_scope(group[0].flow, group[0].ring) == o->last_scope) {
		o->reuse++;
		o->thi ^= hash_splitmix64(o->reuse);
		o->tlo ^= hash_splitmix64(o->reuse ^ 0x6e657874ull);
	} else {
		o->reuse = 0;
	}
	o->last_flow = group[0].flow;
	o->last_scope = flow_scope(group[0].flow, group[0].ring);
	o->flows_seen = true;
}

static int on_flow(void *ctx, char ph, uint64_t id, const struct flow_ev *fe,
		   const struct flow_ev *group, size_t n)
{
	struct otlp *o = ctx;
	struct hop h = {
		.k = { .ts = fe->ts, .dur = fe->dur, .seq = fe->seq, .pid = fe->pid, .tid = fe->tid,
		       .kind = fe->kind, .user = fe->name },
		.flow = fe->flow,
	};
	uint64_t a, b, c;

	(void)id;
	if (fe == group) {
		flow_begin(o, group, n);
		if (ph)
			o->flows++;
	}
	h.thi = o->thi;
	h.tlo = o->tlo;
	h.owner = o->owner;
	/* each step follows the one before it, as the arrows go */
	h.prev = o->prev;
	h.skip = otlp_is_traceparent(o, fe, &a, &b, &c);
	if (!h.skip)
		o->prev = otlp_span_id(o, fe->seq);
	return extsort_add(o->hops, &h);
}

int otlp_hops(struct otlp *o)
{
	int ret;

	o->hops = extsort_new(sizeof(struct hop), nest_cmp, HOPS_MEM);
	if (!o->hops)
		return -ENOMEM;
	ret = flows_assemble(&o->fl, on_flow, o, NULL);
	/* the flows' buffer is not needed by the walks */
	flows_free(&o->fl);
	return ret < 0 ? ret : extsort_rewind(o->hops);
}
