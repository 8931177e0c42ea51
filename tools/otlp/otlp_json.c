/* SPDX-License-Identifier: MIT */
/*
 * otlp_json.c - the OTLP/JSON text of spans, resources and scopes, in the
 * field order and encodings of the official OpenTelemetry JS exporter.
 * Fast: what every span of a thread and category repeats is made once
 * (struct frag), every string of the trace is escaped once (struct estr),
 * ids and times are formatted from tables, and a span's fixed part is
 * written after one bounds check.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dec.h"
#include "otlp_int.h"

/* The most bytes a span's fixed part takes besides its name and its
 * (thread, category) attributes: the literals, two ids, two times, the
 * flow id and the flags (about 420). */
#define SPAN_FIXED_MAX	512u
/* Its tail after the attributes: a count and the literals (about 120). */
#define SPAN_TAIL_MAX	160u
/* A link: the literals, two ids (about 180). */
#define LINK_MAX	224u

/* Appends the literal s at p and moves p past it. */
#define LIT(p, s)	(memcpy((p), (s), sizeof(s) - 1), (p) += sizeof(s) - 1)

/* ------------------------------------------------------------ strings */

/* The quoted JSON text of string id: made once for the ids of the trace;
 * for others, in o->scratch until the next call. NULL: out of memory. */
static const char *jstr(struct otlp *o, uint32_t id, size_t *len)
{
	struct estr *e = id < o->s->nstr ? &o->esc[id] : NULL;
	const char *t;
	size_t n;

	if (e && e->made) {
		*len = e->len;
		return e->p;
	}
	t = source_string(o->s, id, &n);
	o->scratch.len = 0;
	ob_str(&o->scratch, t, n);
	if (o->scratch.oom)
		return NULL;
	*len = o->scratch.len;
	if (e && (e->p = malloc(o->scratch.len))) {
		memcpy(e->p, o->scratch.p, o->scratch.len);
		e->len = (uint32_t)o->scratch.len;
		e->made = true;
	}
	return o->scratch.p;
}

static void put_string(struct otlp *o, struct obuf *b, uint32_t id)
{
	size_t n;
	const char *t = jstr(o, id, &n);

	if (t)
		ob_raw(b, t, n);
	else
		b->oom = true;
}

/* A category: string id cat, or a trigger's (cached as jstr() caches). */
static void put_cat(struct otlp *o, struct obuf *b, uint32_t cat)
{
	size_t n;
	const char *t;

	if (cat != OTLP_CAT_TRIGGER) {
		put_string(o, b, cat);
		return;
	}
	t = otlp_event_cat(o, cat, &n);
	ob_str(b, t, n);
}

/* The JSON string of an event's name: string id name, or, for a
 * trigger, "trigger: NAME" (in o->scratch). NULL: out of memory. */
static const char *name_of(struct otlp *o, uint32_t name, uint32_t cat, size_t *len)
{
	char label[SOURCE_TRIGGER_LABEL_MAX];
	const char *t;
	size_t n;

	if (cat != OTLP_CAT_TRIGGER)
		return jstr(o, name, len);
	t = otlp_event_name(o, name, cat, label, &n);
	o->scratch.len = 0;
	ob_str(&o->scratch, t, n);
	*len = o->scratch.len;
	return o->scratch.oom ? NULL : o->scratch.p;
}

static void attr_key(struct obuf *b, const char *key)
{
	ob_puts(b, "{\"key\":\"");
	ob_puts(b, key);
	ob_puts(b, "\",\"value\":{");
}

static void attr_int(struct obuf *b, const char *key, uint64_t v)
{
	attr_key(b, key);
	ob_puts(b, "\"intValue\":");
	ob_int(b, v, false);
	ob_puts(b, "}}");
}

static void attr_cstr(struct obuf *b, const char *key, const char *v)
{
	attr_key(b, key);
	ob_puts(b, "\"stringValue\":");
	ob_str(b, v, strlen(v));
	ob_puts(b, "}}");
}

/* The attributes every span of thread tid (named tname, or NULL) in
 * category cat begins with (otlp_frag()). */
static void frag_json(struct otlp *o, struct obuf *b, const char *tname, uint32_t tid, uint32_t cat)
{
	attr_int(b, "thread.id", tid);
	if (tname) {
		ob_raw(b, ",", 1);
		attr_cstr(b, "thread.name", tname);
	}
	ob_raw(b, ",", 1);
	attr_key(b, "shmtrace.category");
	ob_puts(b, "\"stringValue\":");
	put_cat(o, b, cat);
	ob_puts(b, "}}");
}

/* ---------------------------------------------------------------- spans */

/*
 * An event's arguments, as attributes "shmtrace.arg.KEY" after others
 * (never the same keys as the export's own); integers as intValue strings
 * (an int64 is a decimal string in OTLP/JSON: exact past 2^53). Of several
 * arguments with one key the last is kept, as a reader of the Chrome
 * export's "args" object keeps it; the others are counted in *dropped.
 */
static void put_args(struct otlp *o, struct obuf *b, const struct ev_args *a, uint32_t *dropped)
{
	for (uint32_t i = 0; a && i < a->n; i++) {
		size_t klen;
		const char *key = source_string(o->s, a->a[i].key, &klen);

		if (otlp_arg_repeated(o, a, i)) {
			(*dropped)++;
			continue;
		}
		ob_puts(b, ",{\"key\":");
		ob_str_pre(b, "shmtrace.arg.", key, klen);
		ob_puts(b, ",\"value\":{");
		if (a->a[i].type == SHMTRACE_ARG_STR) {
			ob_puts(b, "\"stringValue\":");
			put_string(o, b, a->a[i].value <= UINT16_MAX ? (uint32_t)a->a[i].value : 0);
		} else if (a->a[i].type == SHMTRACE_ARG_TEXT) {
			size_t len;
			const char *t = args_text(&o->args, a, i, &len);

			ob_puts(b, "\"stringValue\":");
			ob_str(b, t ? t : "?", t ? len : 1);
		} else {
			ob_puts(b, "\"intValue\":\"");
			ob_int(b, a->a[i].value, (int64_t)a->a[i].value < 0);
			ob_raw(b, "\"", 1);
		}
		ob_puts(b, "}}");
	}
}

/* The instants inside a span, as its events. */
static void put_events(struct otlp *o, struct obuf *b, const struct inst *ev, size_t n)
{
	uint32_t dropped;

	for (size_t i = 0; i < n; i++) {
		size_t nlen;
		const char *name = name_of(o, ev[i].name, ev[i].cat, &nlen);

		ob_puts(b, i ? ",{\"timeUnixNano\":\"" : "{\"timeUnixNano\":\"");
		ob_int(b, ev[i].ts + o->wall_off, false);
		ob_puts(b, "\",\"name\":");
		if (name)
			ob_raw(b, name, nlen);
		else
			b->oom = true;
		ob_puts(b, ",\"attributes\":[");
		attr_key(b, "shmtrace.category");
		ob_puts(b, "\"stringValue\":");
		put_cat(o, b, ev[i].cat);
		ob_puts(b, "}}");
		dropped = 0;
		put_args(o, b, args_get(&o->args, ev[i].args), &dropped);
		ob_puts(b, "],\"droppedAttributesCount\":");
		ob_int(b, dropped, false);
		ob_puts(b, "}");
		if (!otlp_names_known(o, ev[i].name, ev[i].cat))
			o->names_lost++;
	}
}

/* A span's link, if it has one (at p, LINK_MAX bytes of room); returns
 * the end. shmtrace.link says why it links: the hop before it in its flow,
 * or the span enclosing it on its thread, of another trace. */
static char *put_link(char *p, const struct span *sp)
{
	if (sp->link == LINK_NONE)
		return p;
	LIT(p, "{\"traceId\":\"");
	p = otlp_hex(p, sp->lhi);
	p = otlp_hex(p, sp->llo);
	LIT(p, "\",\"spanId\":\"");
	p = otlp_hex(p, sp->lid);
	LIT(p, "\",\"attributes\":[{\"key\":\"shmtrace.link\",\"value\":{\"stringValue\":\"");
	p = stpcpy(p, otlp_link_why[sp->link]);
	LIT(p, "\"}}],\"droppedAttributesCount\":0}");
	return p;
}

int otlp_put_span(struct otlp *o, struct pbatch *pb, const struct span *sp)
{
	struct obuf *b = &pb->spans;
	const struct obuf *fr;
	const char *name;
	uint32_t dropped = 0;
	uint64_t start, end;
	size_t nlen;
	char *p;

	if (!otlp_names_known(o, sp->name, sp->cat))
		o->names_lost++;
	fr = otlp_frag(o, sp->outpid, sp->tid, sp->cat, frag_json);
	/* after frag_of(): both may use o->scratch */
	name = fr ? name_of(o, sp->name, sp->cat, &nlen) : NULL;
	if (!name || !ob_reserve(b, SPAN_FIXED_MAX + nlen + fr->len))
		return -ENOMEM;
	p = b->p + b->len;
	if (pb->nspans++)
		*p++ = ',';
	else
		o->batch_procs++;
	LIT(p, "{\"traceId\":\"");
	p = otlp_hex(p, sp->thi);
	p = otlp_hex(p, sp->tlo);
	LIT(p, "\",\"spanId\":\"");
	p = otlp_hex(p, sp->id);
	if (sp->parent) {
		LIT(p, "\",\"parentSpanId\":\"");
		p = otlp_hex(p, sp->parent);
	}
	LIT(p, "\",\"name\":");
	memcpy(p, name, nlen);
	p += nlen;
	/* SPAN_KIND_INTERNAL: shmtrace does not know who called whom */
	LIT(p, ",\"kind\":1,\"startTimeUnixNano\":\"");
	otlp_span_times(o, sp, &start, &end);
	p = otlp_time(&o->time, p, start);
	LIT(p, "\",\"endTimeUnixNano\":\"");
	p = otlp_time(&o->time, p, end);
	LIT(p, "\",\"attributes\":[");
	memcpy(p, fr->p, fr->len);
	p += fr->len;
	if (sp->flow) {
		LIT(p, ",{\"key\":\"shmtrace.flow.id\",\"value\":{\"intValue\":");
		p = dec_u64(p, sp->flow);
		LIT(p, "}}");
	}
	if (sp->kind == SHMTRACE_KIND_INSTANT)
		LIT(p, ",{\"key\":\"shmtrace.instant\",\"value\":{\"boolValue\":true}}");
	/* its thread never ended it: it ends where its thread's record does */
	if (sp->kind == SHMTRACE_KIND_OPEN)
		LIT(p, ",{\"key\":\"shmtrace.unfinished\",\"value\":{\"boolValue\":true}}");
	b->len = (size_t)(p - b->p);
	put_args(o, b, args_get(&o->args, sp->args), &dropped);
	if (!ob_reserve(b, SPAN_TAIL_MAX))
		return -ENOMEM;
	p = b->p + b->len;
	LIT(p, "],\"droppedAttributesCount\":");
	p = dec_u64(p, dropped);
	LIT(p, ",\"events\":[");
	b->len = (size_t)(p - b->p);
	put_events(o, b, sp->ev, sp->nev);
	if (!ob_reserve(b, SPAN_TAIL_MAX + LINK_MAX))
		return -ENOMEM;
	p = b->p + b->len;
	LIT(p, "],\"droppedEventsCount\":0,\"links\":[");
	p = put_link(p, sp);
	LIT(p, "],\"droppedLinksCount\":0,\"status\":{\"code\":0}}");
	b->len = (size_t)(p - b->p);
	return 0;
}

/* ------------------------------------------------ resources and scopes */

/* Loss counters as scope attributes, the ones that are not zero (as known
 * when the batch is sent: torn records are counted at the end of a pass). */
static void put_scope_losses(struct otlp *o, struct obuf *b)
{
	struct otlp_counter c[OTLP_COUNTERS_MAX];
	size_t n = otlp_scope_counters(o, c);
	bool any = n > 0;

	ob_puts(b, ",\"attributes\":[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			ob_raw(b, ",", 1);
		attr_int(b, c[i].key, c[i].v);
	}
	if (o->s->loss.corrupt) {
		if (any)
			ob_raw(b, ",", 1);
		attr_key(b, "shmtrace.counters_corrupt");
		ob_puts(b, "\"boolValue\":true}}");
		any = true;
	}
	if (!source_complete(o->s)) {
		if (any)
			ob_raw(b, ",", 1);
		attr_key(b, "shmtrace.capture_complete");
		ob_puts(b, "\"boolValue\":false}}");
	}
	ob_puts(b, "],\"droppedAttributesCount\":0}");
}

/* The end of a resource's attributes, and its scope up to the spans. */
static void put_scope(struct otlp *o, struct obuf *b)
{
	ob_puts(b, "],\"droppedAttributesCount\":0},\"scopeSpans\":[{\"scope\":{\"name\":\"shmtrace\","
		   "\"version\":\"" SHMTRACE_VERSION "\"");
	put_scope_losses(o, b);
	ob_puts(b, ",\"spans\":[");
}

/* Resource r, and its scope up to the spans. */
static void put_resource(struct otlp *o, struct obuf *b, const struct otlp_resource *r)
{
	ob_puts(b, "{\"resource\":{\"attributes\":[");
	attr_cstr(b, "service.name", r->service);
	ob_raw(b, ",", 1);
	attr_cstr(b, "host.name", r->host);
	if (r->process) {
		ob_raw(b, ",", 1);
		attr_int(b, "process.pid", r->pid);
	}
	if (r->process && r->pname) {
		ob_raw(b, ",", 1);
		attr_cstr(b, "process.executable.name", r->pname);
	}
	put_scope(o, b);
}

void otlp_put_resource(struct otlp *o, struct obuf *b, uint32_t outpid)
{
	struct otlp_resource r;

	otlp_resource_of(o, outpid, &r);
	put_resource(o, b, &r);
}

void otlp_put_loss_request(struct otlp *o, struct obuf *b)
{
	struct otlp_resource r;

	otlp_loss_resource(o, &r);
	ob_puts(b, "{\"resourceSpans\":[");
	put_resource(o, b, &r);
	ob_puts(b, "]}]}]}\n");
}

void otlp_json_free(struct otlp *o)
{
	for (uint32_t i = 0; o->esc && i < o->s->nstr; i++)
		free(o->esc[i].p);
	free(o->esc);
	for (uint32_t i = 0; o->frags && i < OTLP_FRAGS; i++)
		ob_free(&o->frags[i].text);
	free(o->frags);
	ob_free(&o->scratch);
}
