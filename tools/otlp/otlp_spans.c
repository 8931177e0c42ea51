/* SPDX-License-Identifier: MIT */
/*
 * otlp_spans.c - the OTLP export's pass: every span, instant and open span
 * wanted becomes a node, sorted by thread and start for the walk of the
 * threads' trees (otlp_tree.c), and each record of a flow a hop of it as
 * well (otlp_hops.c). Arguments are kept with them (tools/trace/args.c, as
 * for the Chrome export), open spans end where the Chrome export ends them.
 * Memory: the sorts' buffers (util/extsort.h), and one batch.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_int.h"

/* Whether r is exported (pick.h: --pid, --from/--to, whole flows; the
 * stream takes every record). */
static bool wanted(struct otlp *o, const struct shmt_record *r)
{
	return !o->o->pick || pick_record(o->o->pick, r, o->s->ring, &o->pass);
}

/* A trigger is a node as an instant of category OTLP_CAT_TRIGGER. */
int otlp_node(struct otlp *o, const struct shmt_record *r, uint32_t outpid, uint32_t ring,
	      uint64_t seq, const struct ev_args *a)
{
	uint32_t kind = shmt_record_kind(r);
	bool trigger = kind == SHMTRACE_KIND_TRIGGER;
	struct node nd = {
		.k = { .ts = r->ts, .dur = kind == SHMTRACE_KIND_INSTANT || trigger ? 0 : r->dur,
		       .seq = seq, .pid = outpid, .tid = r->tid,
		       .kind = trigger ? SHMTRACE_KIND_INSTANT : kind, .user = r->name },
		.cat = trigger ? OTLP_CAT_TRIGGER : r->cat,
	};
	int ret = args_keep(&o->args, a, &nd.args);

	if (ret == 0 && shmt_record_in_flow(r)) {
		struct flow_ev fe = flow_ev_of(r, ring, outpid);

		/* as the node has it: an instant's duration is 0 */
		fe.ts = nd.k.ts;
		fe.dur = nd.k.dur;
		fe.seq = seq;
		ret = flows_add(&o->fl, &fe);
	}
	return ret < 0 ? ret : extsort_add(o->nodes, &nd);
}

/* The held-back span or instant, now that no more of its arguments can
 * come: a node, or, streaming, held by the stream until its tree and
 * flow are whole (stream_model.c). */
static int put_held(struct otlp *o)
{
	struct args_pend *h = &o->held;

	if (!args_take(h))
		return 0;
	if (o->st)
		return stream_hold_event(o, &h->r, h->pid, h->seq, &h->a);
	return otlp_node(o, &h->r, h->pid, h->ring, h->seq, &h->a);
}

int otlp_take_held(struct otlp *o)
{
	return put_held(o);
}

int otlp_on_record(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct otlp *o = ctx;
	uint32_t outpid;
	uint64_t seq;
	int ret;

	if (!wanted(o, r))
		/* its arguments are not wanted either */
		return shmt_record_attached(r) ? 0 : put_held(o);
	if (shmt_record_attached(r))
		return args_on_arg(&o->held, o->arrive, r, o->s->follows);
	ret = put_held(o);
	if (ret < 0)
		return ret;
	outpid = hosts_outpid(&o->hosts, r->pid, start_time, r->ts);
	/* the thread's last moment and the trace's, for open spans' ends (args.h) */
	ret = open_note(&o->open, &o->last, (uint64_t)outpid << 32 | r->tid, r);
	if (ret < 0)
		return ret;
	/* numbered apart (OTLP_OPEN_SEQ): the other spans keep their ids */
	if (shmt_record_kind(r) == SHMTRACE_KIND_OPEN && o->st)
		return stream_hold_open(o, r, outpid, OTLP_OPEN_SEQ - o->nopen++,
					source_open_args(o->s));
	if (shmt_record_kind(r) == SHMTRACE_KIND_OPEN)
		return open_add(&o->open, &o->args, r, outpid, o->s->ring,
				source_open_args(o->s));
	seq = ++o->seq;
	if (shmt_record_kind(r) == SHMTRACE_KIND_COUNTER) {
		o->counters++;
		return 0;
	}
	args_hold(&o->held, r, outpid, o->s->ring, seq);
	return 0;
}

/* Open spans, after the pass, ending where the Chrome export ends them;
 * numbered by arrival, down from OTLP_OPEN_SEQ (the stream numbers them
 * so as they come). */
static int put_open(struct otlp *o)
{
	struct open_ev e;
	struct shmt_record r;
	int ret = open_spans_rewind(&o->open);

	/* the newest first (o->open.newest_first) */
	while (ret == 0 && (ret = open_spans_next(&o->open, &o->last, &e, &r)) == 1)
		ret = otlp_node(o, &r, e.pid, e.ring, OTLP_OPEN_SEQ - e.i, open_args(&e));
	return ret;
}

int otlp_run(struct otlp *o)
{
	char serr[sizeof(o->err)] = "";
	int ret;

	/* a ring's pass would put "ring 'NAME': Input/output error" over the
	 * reason on_record() gave (a write that failed, say) */
	ret = source_records(o->s, otlp_on_record, o, serr, sizeof(serr));
	if (ret < 0 && !o->err[0])
		snprintf(o->err, sizeof(o->err), "%s", serr);
	if (ret == 0)
		ret = put_held(o);
	if (ret == 0)
		ret = put_open(o);
	if (ret == 0)
		ret = otlp_hops(o);
	if (ret == 0)
		ret = otlp_tree(o);
	if (ret < 0)
		return ret;
	ret = otlp_deliver(o);
	/* a trace of no span still says what it lost, to a file or an
	 * endpoint */
	if (ret == 0 && !o->requests && otlp_scope_lossy(o))
		ret = o->to_http ? otlp_deliver_losses(o) : o->w ? otlp_write_losses(o) : 0;
	if (ret < 0)
		return ret;
	o->counted = true;
	return o->send_failed;
}
