/* SPDX-License-Identifier: MIT */
/*
 * otlp_pb.c - the OTLP protobuf encoding of spans, resources and scopes
 * (ExportTraceServiceRequest of opentelemetry-proto's trace service),
 * written by hand over util/pb.c: the same spans, attributes, events and
 * links as the OTLP/JSON text (otlp_json.c), what both say decided in
 * otlp_attrs.c. Ids are bytes, times fixed64 nanoseconds since the epoch.
 */
#include <errno.h>
#include <string.h>

#include "otlp_int.h"
#include "pb.h"

/* Field numbers of opentelemetry-proto (trace/v1, common/v1, resource/v1,
 * collector/trace/v1). */
enum {
	REQ_RESOURCE_SPANS = 1,
	RS_RESOURCE = 1, RS_SCOPE_SPANS = 2,
	RES_ATTRIBUTES = 1,
	SS_SCOPE = 1, SS_SPANS = 2,
	SCOPE_NAME = 1, SCOPE_VERSION = 2, SCOPE_ATTRIBUTES = 3,
	SPAN_TRACE_ID = 1, SPAN_SPAN_ID = 2, SPAN_PARENT_SPAN_ID = 4, SPAN_NAME = 5,
	SPAN_KIND = 6, SPAN_START = 7, SPAN_END = 8, SPAN_ATTRIBUTES = 9,
	SPAN_DROPPED_ATTRIBUTES = 10, SPAN_EVENTS = 11, SPAN_LINKS = 13,
	EVENT_TIME = 1, EVENT_NAME = 2, EVENT_ATTRIBUTES = 3, EVENT_DROPPED_ATTRIBUTES = 4,
	LINK_TRACE_ID = 1, LINK_SPAN_ID = 2, LINK_ATTRIBUTES = 4,
	KV_KEY = 1, KV_VALUE = 2,
	ANY_STRING = 1, ANY_BOOL = 2, ANY_INT = 3,
};

/* SPAN_KIND_INTERNAL: shmtrace does not know who called whom */
#define KIND_INTERNAL 1u

/* ------------------------------------------------------------ attributes */

static void kv_str(struct obuf *b, uint32_t field, const char *key, const char *v, size_t vlen)
{
	size_t m = pb_begin(b, field), mv;

	pb_string(b, KV_KEY, key, strlen(key));
	mv = pb_begin(b, KV_VALUE);
	pb_string(b, ANY_STRING, v, vlen);
	pb_end(b, mv);
	pb_end(b, m);
}

static void kv_int(struct obuf *b, uint32_t field, const char *key, uint64_t v)
{
	size_t m = pb_begin(b, field), mv;

	pb_string(b, KV_KEY, key, strlen(key));
	mv = pb_begin(b, KV_VALUE);
	pb_uint(b, ANY_INT, v);
	pb_end(b, mv);
	pb_end(b, m);
}

static void kv_true(struct obuf *b, uint32_t field, const char *key)
{
	size_t m = pb_begin(b, field), mv;

	pb_string(b, KV_KEY, key, strlen(key));
	mv = pb_begin(b, KV_VALUE);
	pb_uint(b, ANY_BOOL, 1);
	pb_end(b, mv);
	pb_end(b, m);
}

/* Attribute key = category cat's text (a trigger's too). */
static void kv_cat(struct otlp *o, struct obuf *b, uint32_t field, const char *key, uint32_t cat)
{
	size_t len;
	const char *t = otlp_event_cat(o, cat, &len);

	kv_str(b, field, key, t, len);
}

/* An event's arguments as attributes "shmtrace.arg.KEY" (otlp_json.c's
 * put_args() says why); the ones left out counted in *dropped. */
static void put_args(struct otlp *o, struct obuf *b, uint32_t field, const struct ev_args *a,
		     uint32_t *dropped)
{
	for (uint32_t i = 0; a && i < a->n; i++) {
		char key[13 + SHMT_STRING_MAX + 1] = "shmtrace.arg.";
		size_t klen, m, mv, len;
		const char *k = source_string(o->s, a->a[i].key, &klen), *t;

		if (otlp_arg_repeated(o, a, i)) {
			(*dropped)++;
			continue;
		}
		if (klen > SHMT_STRING_MAX)
			klen = SHMT_STRING_MAX;
		memcpy(key + 13, k, klen);
		m = pb_begin(b, field);
		pb_string(b, KV_KEY, key, 13 + klen);
		mv = pb_begin(b, KV_VALUE);
		if (a->a[i].type == SHMTRACE_ARG_STR) {
			t = source_string(o->s, a->a[i].value <= UINT16_MAX ? (uint32_t)a->a[i].value
									     : 0, &len);
			pb_string(b, ANY_STRING, t, len);
		} else if (a->a[i].type == SHMTRACE_ARG_TEXT) {
			t = args_text(&o->args, a, i, &len);
			pb_string(b, ANY_STRING, t ? t : "?", t ? len : 1);
		} else {
			pb_uint(b, ANY_INT, a->a[i].value);
		}
		pb_end(b, mv);
		pb_end(b, m);
	}
}

/* The attributes of thread tid's spans in category cat (otlp_frag()). */
static void frag_pb(struct otlp *o, struct obuf *b, const char *tname, uint32_t tid, uint32_t cat)
{
	kv_int(b, SPAN_ATTRIBUTES, "thread.id", tid);
	if (tname)
		kv_str(b, SPAN_ATTRIBUTES, "thread.name", tname, strlen(tname));
	kv_cat(o, b, SPAN_ATTRIBUTES, "shmtrace.category", cat);
}

/* ----------------------------------------------------------------- spans */

static void put_id(struct obuf *b, uint32_t field, uint64_t hi, uint64_t lo, bool trace)
{
	char id[16];

	for (int i = 0; i < 8; i++) {
		id[i] = (char)(hi >> (56 - 8 * i));
		id[8 + i] = (char)(lo >> (56 - 8 * i));
	}
	/* a span id is lo alone */
	if (trace)
		pb_bytes(b, field, id, 16);
	else
		pb_bytes(b, field, id + 8, 8);
}

static void put_events(struct otlp *o, struct obuf *b, const struct inst *ev, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char label[SOURCE_TRIGGER_LABEL_MAX];
		size_t m = pb_begin(b, SPAN_EVENTS), len;
		const char *name = otlp_event_name(o, ev[i].name, ev[i].cat, label, &len);
		uint32_t dropped = 0;

		pb_fixed64(b, EVENT_TIME, ev[i].ts + o->wall_off);
		pb_string(b, EVENT_NAME, name, len);
		kv_cat(o, b, EVENT_ATTRIBUTES, "shmtrace.category", ev[i].cat);
		put_args(o, b, EVENT_ATTRIBUTES, args_get(&o->args, ev[i].args), &dropped);
		if (dropped)
			pb_uint(b, EVENT_DROPPED_ATTRIBUTES, dropped);
		pb_end(b, m);
		if (!otlp_names_known(o, ev[i].name, ev[i].cat))
			o->names_lost++;
	}
}

static void put_link(struct obuf *b, const struct span *sp)
{
	size_t m;
	const char *why = otlp_link_why[sp->link];

	if (sp->link == LINK_NONE)
		return;
	m = pb_begin(b, SPAN_LINKS);
	put_id(b, LINK_TRACE_ID, sp->lhi, sp->llo, true);
	put_id(b, LINK_SPAN_ID, 0, sp->lid, false);
	kv_str(b, LINK_ATTRIBUTES, "shmtrace.link", why, strlen(why));
	pb_end(b, m);
}

int otlp_pb_span(struct otlp *o, struct pbatch *pb, const struct span *sp)
{
	struct obuf *b = &pb->spans;
	const struct obuf *fr = otlp_frag(o, sp->outpid, sp->tid, sp->cat, frag_pb);
	char label[SOURCE_TRIGGER_LABEL_MAX];
	size_t m, nlen;
	const char *name = otlp_event_name(o, sp->name, sp->cat, label, &nlen);
	uint32_t dropped = 0;
	uint64_t start, end;

	if (!fr)
		return -ENOMEM;
	if (!otlp_names_known(o, sp->name, sp->cat))
		o->names_lost++;
	if (!pb->nspans++)
		o->batch_procs++;
	m = pb_begin(b, SS_SPANS);
	put_id(b, SPAN_TRACE_ID, sp->thi, sp->tlo, true);
	put_id(b, SPAN_SPAN_ID, 0, sp->id, false);
	if (sp->parent)
		put_id(b, SPAN_PARENT_SPAN_ID, 0, sp->parent, false);
	pb_string(b, SPAN_NAME, name, nlen);
	pb_uint(b, SPAN_KIND, KIND_INTERNAL);
	otlp_span_times(o, sp, &start, &end);
	pb_fixed64(b, SPAN_START, start);
	pb_fixed64(b, SPAN_END, end);
	ob_raw(b, fr->p, fr->len);
	if (sp->flow)
		kv_int(b, SPAN_ATTRIBUTES, "shmtrace.flow.id", sp->flow);
	if (sp->kind == SHMTRACE_KIND_INSTANT)
		kv_true(b, SPAN_ATTRIBUTES, "shmtrace.instant");
	/* its thread never ended it: it ends where its thread's record does */
	if (sp->kind == SHMTRACE_KIND_OPEN)
		kv_true(b, SPAN_ATTRIBUTES, "shmtrace.unfinished");
	put_args(o, b, SPAN_ATTRIBUTES, args_get(&o->args, sp->args), &dropped);
	if (dropped)
		pb_uint(b, SPAN_DROPPED_ATTRIBUTES, dropped);
	put_events(o, b, sp->ev, sp->nev);
	put_link(b, sp);
	pb_end(b, m);
	return b->oom ? -ENOMEM : 0;
}

/* ------------------------------------------------ resources and scopes */

/* Resource r (field RS_RESOURCE) and the scope (field SS_SCOPE) into pre:
 * where the scope starts in *scope_off. */
static void put_resource(struct otlp *o, struct obuf *pre, const struct otlp_resource *r,
			 size_t *scope_off)
{
	struct otlp_counter c[OTLP_COUNTERS_MAX];
	size_t m, n;

	m = pb_begin(pre, RS_RESOURCE);
	kv_str(pre, RES_ATTRIBUTES, "service.name", r->service, strlen(r->service));
	kv_str(pre, RES_ATTRIBUTES, "host.name", r->host, strlen(r->host));
	if (r->process)
		kv_int(pre, RES_ATTRIBUTES, "process.pid", r->pid);
	if (r->process && r->pname)
		kv_str(pre, RES_ATTRIBUTES, "process.executable.name", r->pname, strlen(r->pname));
	pb_end(pre, m);
	*scope_off = pre->len;
	m = pb_begin(pre, SS_SCOPE);
	pb_string(pre, SCOPE_NAME, "shmtrace", 8);
	pb_string(pre, SCOPE_VERSION, SHMTRACE_VERSION, strlen(SHMTRACE_VERSION));
	n = otlp_scope_counters(o, c);
	for (size_t i = 0; i < n; i++)
		kv_int(pre, SCOPE_ATTRIBUTES, c[i].key, c[i].v);
	if (o->s->loss.corrupt)
		kv_true(pre, SCOPE_ATTRIBUTES, "shmtrace.counters_corrupt");
	if (!source_complete(o->s)) {
		size_t mk = pb_begin(pre, SCOPE_ATTRIBUTES), mv;

		pb_string(pre, KV_KEY, "shmtrace.capture_complete", 25);
		mv = pb_begin(pre, KV_VALUE);
		pb_uint(pre, ANY_BOOL, 0);
		pb_end(pre, mv);
		pb_end(pre, mk);
	}
	pb_end(pre, m);
}

/* A length-delimited field's key and length, its bytes to follow. */
static void len_prefix(struct obuf *b, uint32_t field, size_t len)
{
	pb_key(b, field, PB_LEN);
	pb_varint(b, len);
}

/* One ResourceSpans into body: the resource and scope made in pre (the
 * scope from scope_off), then the spans' len bytes. */
static void put_resource_spans(struct obuf *body, const struct obuf *pre, size_t scope_off,
			       const char *spans, size_t len)
{
	/* the lengths first, so that the spans are copied once */
	size_t ss_len = pre->len - scope_off + len;
	size_t rs_len = scope_off + 1 + pb_varint_len(ss_len) + ss_len;

	len_prefix(body, REQ_RESOURCE_SPANS, rs_len);
	ob_raw(body, pre->p, scope_off);
	len_prefix(body, RS_SCOPE_SPANS, ss_len);
	ob_raw(body, pre->p + scope_off, pre->len - scope_off);
	ob_raw(body, spans, len);
}

int otlp_pb_request(struct otlp *o, struct obuf *pre, struct obuf *body)
{
	body->len = 0;
	for (size_t i = 0; i < o->batch.n; i++) {
		struct pbatch *pb = keyed_at(&o->batch, i);
		struct otlp_resource r;
		size_t scope_off;

		if (!pb->nspans)
			continue;
		pre->len = 0;
		otlp_resource_of(o, pb->outpid, &r);
		put_resource(o, pre, &r, &scope_off);
		put_resource_spans(body, pre, scope_off, pb->spans.p, pb->spans.len);
	}
	return pre->oom || body->oom ? -ENOMEM : 0;
}

int otlp_pb_loss_request(struct otlp *o, struct obuf *pre, struct obuf *body)
{
	struct otlp_resource r;
	size_t scope_off;

	body->len = 0;
	pre->len = 0;
	otlp_loss_resource(o, &r);
	put_resource(o, pre, &r, &scope_off);
	put_resource_spans(body, pre, scope_off, "", 0);
	return pre->oom || body->oom ? -ENOMEM : 0;
}
