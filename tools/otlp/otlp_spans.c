/* SPDX-License-Identifier: MIT */
/*
 * otlp_spans.c - the OTLP export's model: records to spans. A flow becomes
 * a trace whose spans are each a child of the step before; a span outside
 * flows is a trace of its own; an instant is an event of the span of its
 * thread that encloses it, else a zero-length span. Arguments are
 * attributes, open spans end where the Chrome export ends them
 * (tools/trace/args.c for both). Memory: the flow records (as in the Chrome
 * export), a few instants per thread waiting for their enclosing span,
 * and one batch.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_int.h"

/* Whether r is exported (pick.h: --pid, --from/--to). */
static bool wanted(struct otlp *o, const struct shmt_record *r)
{
	return pick_record(o->o->pick, r, o->s->ring, &o->pass);
}

static int single_span(struct otlp *o, uint32_t outpid, uint32_t tid, uint32_t kind,
		       uint64_t ts, uint64_t dur, uint32_t cat, uint32_t name, uint64_t seq,
		       const struct ev_args *a, const struct inst *ev, size_t nev)
{
	struct span sp = {
		.outpid = outpid, .tid = tid, .name = name, .cat = cat, .kind = kind, .ts = ts,
		.dur = dur, .id = otlp_span_id(o, seq), .args = a, .ev = ev, .nev = nev,
	};

	otlp_trace_id(o->salt ^ hash_splitmix64(seq ^ 0x7472616365ull), &sp.thi, &sp.tlo);
	return otlp_span(o, &sp);
}

/* Moves the waiting instants of p inside [ts, ts + dur] to ev[]. */
static size_t claim(struct pend *p, uint64_t ts, uint64_t dur, struct inst *ev)
{
	size_t n = 0, k = 0;

	for (uint32_t i = 0; i < p->n; i++) {
		if (p->v[i].ts >= ts && p->v[i].ts - ts <= dur)
			ev[n++] = p->v[i];
		else
			p->v[k++] = p->v[i];
	}
	p->n = (uint32_t)k;
	return n;
}

/* Keeps ev[0..n) as the events of the flow span numbered seq. */
static int keep_flow_events(struct otlp *o, const struct inst *ev, size_t n, uint64_t seq)
{
	if (array_reserve(&o->fev, &o->fevcap, o->nfev + n, sizeof(*o->fev), 16) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		o->fev[o->nfev] = ev[i];
		o->fev[o->nfev++].seq = seq;
	}
	return 0;
}

/* r, an instant of thread (outpid, r->tid) in no flow, waits in p for a
 * span that encloses it; the oldest waiting goes out alone if p is full. */
static int wait_instant(struct otlp *o, struct pend *p, const struct shmt_record *r,
			uint32_t outpid, uint64_t seq, const struct ev_args *a)
{
	if (p->n == PEND_MAX) {
		struct inst old = p->v[0];

		memmove(p->v, p->v + 1, (PEND_MAX - 1) * sizeof(p->v[0]));
		p->n--;
		if (!o->o->flows_only) {
			int ret = single_span(o, outpid, r->tid, SHMTRACE_KIND_INSTANT, old.ts, 0,
					      old.cat, old.name, old.seq, &old.a, NULL, 0);

			if (ret < 0)
				return ret;
		}
	}
	p->v[p->n] = (struct inst){ .ts = r->ts, .seq = seq, .name = r->name, .cat = r->cat };
	if (a)
		p->v[p->n].a = *a;
	p->n++;
	return 0;
}

/*
 * One span, instant or open span (kind SHMTRACE_KIND_OPEN, its dur set)
 * of thread (outpid, r->tid), with its arguments a (or NULL); ring is the
 * source's index of its ring (flow ids are per ring).
 */
static int put_event(struct otlp *o, const struct shmt_record *r, uint32_t outpid, uint32_t ring,
		     uint64_t seq, const struct ev_args *a)
{
	struct inst ev[PEND_MAX];
	bool added;
	struct pend *p = keyed_get(&o->pend, (uint64_t)outpid << 32 | r->tid, &added);
	size_t n;
	int ret;

	if (!p)
		return -ENOMEM;
	if (shmt_record_in_flow(r)) {
		struct flow_ev fe = flow_ev_of(r, ring, outpid);

		fe.seq = seq;
		ret = args_keep(&o->fargs, a, &fe.args);
		if (ret < 0)
			return ret;
		if (shmt_record_kind(r) != SHMTRACE_KIND_INSTANT && p->n) {
			/* its events, written with the flow at the end */
			n = claim(p, r->ts, r->dur, ev);
			ret = keep_flow_events(o, ev, n, seq);
			if (ret < 0)
				return ret;
		}
		return flows_add(&o->fl, &fe);
	}
	if (shmt_record_kind(r) == SHMTRACE_KIND_INSTANT)
		return wait_instant(o, p, r, outpid, seq, a);
	n = p->n ? claim(p, r->ts, r->dur, ev) : 0;
	if (o->o->flows_only)
		return 0;
	return single_span(o, outpid, r->tid, shmt_record_kind(r), r->ts, r->dur, r->cat, r->name, seq, a,
			   ev, n);
}

/* The held-back span or instant, now that no more of its arguments can come. */
static int put_held(struct otlp *o)
{
	struct args_pend *h = &o->held;

	if (!args_take(h))
		return 0;
	return put_event(o, &h->r, h->pid, h->ring, h->seq, &h->a);
}

static int on_record(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct otlp *o = ctx;
	uint32_t outpid;
	uint64_t seq;
	int ret;

	if (!wanted(o, r))
		/* its arguments are not wanted either */
		return shmt_record_kind(r) == SHMTRACE_KIND_ARG ? 0 : put_held(o);
	if (shmt_record_kind(r) == SHMTRACE_KIND_ARG) {
		args_on_arg(&o->held, r, o->s->follows);
		return 0;
	}
	ret = put_held(o);
	if (ret < 0)
		return ret;
	outpid = hosts_outpid(&o->hosts, r->pid, start_time, r->ts);
	/* the thread's last recorded moment: where its open spans end */
	ret = open_note(&o->open, &o->last, (uint64_t)outpid << 32 | r->tid, r);
	if (ret < 0)
		return ret;
	if (shmt_record_kind(r) == SHMTRACE_KIND_OPEN)
		/* numbered after the pass: the other spans keep their ids */
		return open_add(&o->open, r, outpid, o->s->ring);
	seq = ++o->seq;
	if (shmt_record_kind(r) == SHMTRACE_KIND_COUNTER) {
		o->counters++;
		return 0;
	}
	args_hold(&o->held, r, outpid, o->s->ring, seq);
	return 0;
}

/*
 * Open spans, after the pass, ending where the Chrome export ends them;
 * innermost first, so that an instant inside several becomes an event of
 * the innermost (as a finished span, written first, would claim it).
 */
static int put_open(struct otlp *o)
{
	for (size_t i = o->open.n; i-- > 0;) {
		struct shmt_record r = open_span_at(&o->open, &o->last, i);
		int ret = put_event(o, &r, o->open.v[i].pid, o->open.v[i].ring, ++o->seq, NULL);

		if (ret < 0)
			return ret;
	}
	return 0;
}

/* The instants no span enclosed, as zero-length spans. */
static int flush_pending(struct otlp *o)
{
	size_t pos = 0;
	uint64_t key;
	void *e;

	while (keyed_next(&o->pend, &pos, &key, &e)) {
		struct pend *p = e;
		int ret;

		for (uint32_t k = 0; k < p->n && !o->o->flows_only; k++) {
			ret = single_span(o, (uint32_t)(key >> 32), (uint32_t)key,
					  SHMTRACE_KIND_INSTANT, p->v[k].ts, 0, p->v[k].cat,
					  p->v[k].name, p->v[k].seq, &p->v[k].a, NULL, 0);
			if (ret < 0)
				return ret;
		}
		p->n = 0;
	}
	return 0;
}

/* A flow's first record: its trace id and parent, from the traceparent it
 * carries if it does. */
static void flow_begin(struct otlp *o, const struct flow_ev *group, size_t n)
{
	uint64_t a, b, c;

	o->thi = o->tlo = o->parent = 0;
	o->tp_ev = NULL;
	for (size_t i = 0; i < n; i++) {
		if (otlp_is_traceparent(o, &group[i], &a, &b, &c)) {
			o->thi = a;
			o->tlo = b;
			o->parent = c;
			o->tp_ev = &group[i];
			return;
		}
	}
	otlp_flow_trace_id(o, group, &o->thi, &o->tlo);
}

static int on_flow(void *ctx, char ph, uint64_t id, const struct flow_ev *fe,
		   const struct flow_ev *group, size_t n)
{
	struct otlp *o = ctx;
	struct span sp = { 0 };
	size_t lo = 0, hi = o->nfev;

	(void)id;
	if (fe == group) {
		flow_begin(o, group, n);
		if (ph)
			o->flows++;
	}
	if (fe == o->tp_ev)
		return 0;
	/* its events: fev is in seq order */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (o->fev[mid].seq < fe->seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (hi = lo; hi < o->nfev && o->fev[hi].seq == fe->seq; hi++)
		;
	sp = (struct span){
		.outpid = fe->pid, .tid = fe->tid, .name = fe->name, .cat = fe->cat, .kind = fe->kind,
		.ts = fe->ts, .dur = fe->kind == SHMTRACE_KIND_INSTANT ? 0 : fe->dur, .flow = fe->flow,
		.thi = o->thi, .tlo = o->tlo, .id = otlp_span_id(o, fe->seq), .parent = o->parent,
		.args = args_get(&o->fargs, fe->args), .ev = o->fev + lo, .nev = hi - lo,
	};
	/* each step a child of the step before it, as the arrows go */
	o->parent = sp.id;
	return otlp_span(o, &sp);
}

int otlp_run(struct otlp *o)
{
	char serr[sizeof(o->err)] = "";
	int ret;

	/* a ring's pass would put "ring 'NAME': Input/output error" over the
	 * reason on_record() gave (a write that failed, say) */
	ret = source_records(o->s, on_record, o, serr, sizeof(serr));
	if (ret < 0 && !o->err[0])
		snprintf(o->err, sizeof(o->err), "%s", serr);
	if (ret == 0)
		ret = put_held(o);
	if (ret == 0)
		ret = put_open(o);
	if (ret < 0)
		return ret;
	ret = flows_assemble(&o->fl, on_flow, o, NULL);
	if (ret < 0)
		return ret;
	ret = flush_pending(o);
	if (ret < 0)
		return ret;
	ret = otlp_deliver(o);
	if (ret < 0)
		return ret;
	o->counted = true;
	return o->send_failed;
}
