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
#include <stdlib.h>

#include "otlp_int.h"

/* ---------------------------------------------------------------- carry */

/* At most this many flows are carried; beyond, the least recently met
 * half is forgotten, and so is a flow whose last step is CARRY_AGE_NS
 * older than the stream's records (a step of it, or the id's next flow,
 * after that starts as the id's first flow would). What the checkpoint
 * of every request holds: bounded, not the whole history. */
#define CARRY_MAX	16384u
#define CARRY_AGE_NS	(60ull * 1000000000ull)

struct otlp_carry {
	struct u64map map;		/* key -> 1 + index in v */
	struct carry_ent *v;
	size_t n, cap;
	uint64_t clock;			/* uses so far, for forgetting */
	size_t kept;			/* flows left by the last forgetting by age */
	struct carry_ent *pend;		/* what the last otlp_hops() learnt */
	size_t npend, pendcap;
};

struct otlp_carry *otlp_carry_new(void)
{
	struct otlp_carry *c = calloc(1, sizeof(*c));

	if (c)
		u64map_init(&c->map);
	return c;
}

void otlp_carry_free(struct otlp_carry *c)
{
	if (!c)
		return;
	u64map_free(&c->map);
	free(c->v);
	free(c->pend);
	free(c);
}

/* The key of a flow: its id and its scope (flow ids are below 2^53, ring
 * indexes below 2^11). */
static uint64_t carry_key(const struct flow_ev *e)
{
	return e->flow | (uint64_t)(flow_scope(e->flow, e->ring) & 0x7ff) << 53;
}

static struct carry_ent *carry_find(const struct otlp_carry *c, uint64_t key)
{
	const uint64_t *i = u64map_find(&c->map, key);

	return i && *i ? &c->v[*i - 1] : NULL;
}

/* Keeps the flows met since used and placed at or after at. */
static int carry_forget(struct otlp_carry *c, uint64_t used, uint64_t at)
{
	struct carry_ent *v = c->v;
	size_t n = c->n;

	c->v = NULL;
	c->n = c->cap = 0;
	u64map_free(&c->map);
	u64map_init(&c->map);
	for (size_t i = 0; v && i < n; i++) {
		int ret = v[i].used >= used && v[i].at >= at ? otlp_carry_put(c, &v[i]) : 0;

		if (ret < 0) {
			free(v);
			return ret;
		}
	}
	free(v);
	return 0;
}

int otlp_carry_put(struct otlp_carry *c, const struct carry_ent *e)
{
	struct carry_ent *have = carry_find(c, e->key);
	uint64_t *slot;

	if (have) {
		*have = *e;
		return 0;
	}
	if (c->n >= CARRY_MAX && carry_forget(c, c->clock - CARRY_MAX / 2, 0) < 0)
		return -ENOMEM;
	if (array_reserve(&c->v, &c->cap, c->n + 1, sizeof(*c->v), 64) < 0 ||
	    !(slot = u64map_get(&c->map, e->key, 0, NULL)))
		return -ENOMEM;
	c->v[c->n++] = *e;
	*slot = c->n;
	if (e->used > c->clock)
		c->clock = e->used;
	return 0;
}

int otlp_carry_commit(struct otlp_carry *c, uint64_t now)
{
	int ret = 0;

	for (size_t i = 0; i < c->npend && ret == 0; i++)
		ret = otlp_carry_put(c, &c->pend[i]);
	c->npend = 0;
	/* the old ones forgotten, when they may be many (amortised) */
	if (ret == 0 && c->n >= 1024 && c->n >= 2 * c->kept && now > CARRY_AGE_NS) {
		ret = carry_forget(c, 0, now - CARRY_AGE_NS);
		c->kept = c->n;
	}
	return ret;
}

void otlp_carry_drop(struct otlp_carry *c)
{
	c->npend = 0;
}

size_t otlp_carry_count(const struct otlp_carry *c)
{
	return c->n;
}

const struct carry_ent *otlp_carry_at(const struct otlp_carry *c, size_t i)
{
	return &c->v[i];
}

/* The flow just assembled, whose last record is last, to be continued by
 * the next release (once this one is sent: otlp_carry_commit()). */
static int carry_note(struct otlp *o, const struct flow_ev *last)
{
	struct otlp_carry *c = o->carry;

	if (array_reserve(&c->pend, &c->pendcap, c->npend + 1, sizeof(*c->pend), 64) < 0)
		return -ENOMEM;
	c->pend[c->npend++] = (struct carry_ent){
		.key = carry_key(last), .thi = o->thi, .tlo = o->tlo, .owner = o->owner,
		.last = o->prev, .at = flow_ev_at(last), .used = ++c->clock, .reuse = o->reuse,
		.terminated = (last->role & SHMT_ROLE_TERMINATES) != 0,
	};
	return 0;
}

/* A flow whose id an earlier release had: the same flow when that one did
 * not terminate or this one is placed before its end (a step that came
 * late), which it then continues (true); else the id's next flow, whose
 * number among the id's flows *reuse gets. */
static bool carry_continue(struct otlp *o, const struct flow_ev *first, uint32_t *reuse)
{
	const struct carry_ent *e = o->carry ? carry_find(o->carry, carry_key(first)) : NULL;

	if (!e)
		return false;
	if (e->terminated && flow_ev_at(first) > e->at) {
		*reuse = e->reuse + 1;
		return false;
	}
	o->thi = e->thi;
	o->tlo = e->tlo;
	o->owner = e->owner;
	o->prev = e->last;
	o->reuse = e->reuse;
	return true;
}

/* ---------------------------------------------------------------- flows */

/* A flow's first record: its trace, owner and first parent, from the
 * traceparent it carries if it does. */
static void flow_begin(struct otlp *o, const struct flow_ev *group, size_t n)
{
	bool same = o->flows_seen && group[0].flow == o->last_flow &&
		    flow_scope(group[0].flow, group[0].ring) == o->last_scope;
	uint32_t reuse = 0;
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
	o->last_flow = group[0].flow;
	o->last_scope = flow_scope(group[0].flow, group[0].ring);
	o->flows_seen = true;
	if (!same && carry_continue(o, group, &reuse))
		return;
	otlp_flow_trace_id(o, group, &o->thi, &o->tlo);
	/* the id's next flow after a terminating step (flows_assemble()
	 * hands the flows of one id one after the other): a trace of its
	 * own; the id's first flow keeps the id's trace, which every host's
	 * export of it agrees on */
	o->reuse = same ? o->reuse + 1 : reuse;
	if (o->reuse) {
		o->thi ^= hash_splitmix64(o->reuse);
		o->tlo ^= hash_splitmix64(o->reuse ^ 0x6e657874ull);
	}
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
	/* flows come whole, each in its order: one count rises along each */
	h.step = o->steps++;
	h.skip = otlp_is_traceparent(o, fe, &a, &b, &c);
	if (!h.skip)
		o->prev = otlp_span_id(o, fe->seq);
	if (o->carry && fe == group + n - 1 && carry_note(o, fe) < 0)
		return -ENOMEM;
	return extsort_add(o->hops, &h);
}

int otlp_hops(struct otlp *o)
{
	int ret;

	/* a release of the stream begins again: the flows of an id before it
	 * are in the carry */
	o->flows_seen = false;
	o->hops = extsort_new(sizeof(struct hop), nest_cmp, HOPS_MEM);
	if (!o->hops)
		return -ENOMEM;
	ret = flows_assemble(&o->fl, on_flow, o, NULL);
	/* the flows' buffer is not needed by the walks */
	flows_free(&o->fl);
	return ret < 0 ? ret : extsort_rewind(o->hops);
}
