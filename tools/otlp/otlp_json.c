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

/* A category: string id cat, or a trigger's. */
static void put_cat(struct otlp *o, struct obuf *b, uint32_t cat)
{
	if (cat == OTLP_CAT_TRIGGER)
		ob_puts(b, "\"shmtrace\"");
	else
		put_string(o, b, cat);
}

/* The JSON string of an event's name: string id name, or, for a
 * trigger, "trigger: NAME" (in o->scratch). NULL: out of memory. */
static const char *name_of(struct otlp *o, uint32_t name, uint32_t cat, size_t *len)
{
	struct shmt_record r = { .name = (uint16_t)name };
	char label[SOURCE_TRIGGER_LABEL_MAX];
	size_t n;

	if (cat != OTLP_CAT_TRIGGER)
		return jstr(o, name, len);
	source_trigger_label(o->s, &r, label, sizeof(label), &n);
	o->scratch.len = 0;
	ob_str(&o->scratch, label, n);
	*len = o->scratch.len;
	return o->scratch.oom ? NULL : o->scratch.p;
}

/* Whether an event's name and category are strings of the trace. */
static bool names_known(struct otlp *o, uint32_t name, uint32_t cat)
{
	return source_has_string(o->s, name) &&
	       (cat == OTLP_CAT_TRIGGER || source_has_string(o->s, cat));
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

/* The attributes every span of thread (outpid, tid) in category cat
 * begins with. NULL: out of memory. */
static const struct obuf *frag_of(struct otlp *o, uint32_t outpid, uint32_t tid, uint32_t cat)
{
	uint32_t h = (tid * 0x9e3779b1u + cat * 0x85ebca6bu + outpid) >> 24;
	struct frag *f = &o->frags[h % OTLP_FRAGS];
	const char *tn;

	if (f->used && f->outpid == outpid && f->tid == tid && f->cat == cat)
		return &f->text;
	f->used = false;
	f->text.len = 0;
	attr_int(&f->text, "thread.id", tid);
	tn = hosts_thread_name(&o->hosts, outpid, tid);
	if (tn) {
		ob_raw(&f->text, ",", 1);
		attr_cstr(&f->text, "thread.name", tn);
	}
	ob_raw(&f->text, ",", 1);
	attr_key(&f->text, "shmtrace.category");
	ob_puts(&f->text, "\"stringValue\":");
	put_cat(o, &f->text, cat);
	ob_puts(&f->text, "}}");
	if (f->text.oom)
		return NULL;
	f->outpid = outpid;
	f->tid = tid;
	f->cat = cat;
	f->used = true;
	return &f->text;
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
		size_t klen, olen;
		const char *key = source_string(o->s, a->a[i].key, &klen);
		bool again = false;

		for (uint32_t j = i + 1; j < a->n && !again; j++) {
			const char *other = source_string(o->s, a->a[j].key, &olen);

			again = olen == klen && !memcmp(other, key, klen);
		}
		if (again) {
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
		if (!source_has_string(o->s, ev[i].name))
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
	LIT(p, "\",\"attributes\":[{\"key\":\"shmtrace.link\",\"value\":{\"stringValue\":");
	if (sp->link == LINK_PREV_HOP)
		LIT(p, "\"previous_hop\"");
	else
		LIT(p, "\"enclosing_span\"");
	LIT(p, "}}],\"droppedAttributesCount\":0}");
	return p;
}

int otlp_put_span(struct otlp *o, struct pbatch *pb, const struct span *sp)
{
	struct obuf *b = &pb->spans;
	const struct obuf *fr;
	const char *name;
	uint32_t dropped = 0;
	size_t nlen;
	char *p;

	if (!names_known(o, sp->name, sp->cat))
		o->names_lost++;
	fr = frag_of(o, sp->outpid, sp->tid, sp->cat);
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
	p = otlp_time(&o->time, p, sp->ts + o->wall_off);
	LIT(p, "\",\"endTimeUnixNano\":\"");
	p = otlp_time(&o->time, p, sp->ts + sp->dur + o->wall_off);
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
	const struct source_loss *l = &o->s->loss;
	/* "shmtrace." and loss.h's name for each kind, then the exporter's
	 * own counts */
	struct {
		char key[48];
		uint64_t v;
	} c[SHMT_LOSS_NKINDS + 6] = { { "", 0 } };
	size_t n = 0;
	bool any = false;

	/* counters that cannot be true are no counts: left out, and
	 * shmtrace.counters_corrupt says so */
	for (size_t i = 0; i < SHMT_LOSS_NKINDS && !l->corrupt; i++, n++) {
		snprintf(c[n].key, sizeof(c[n].key), "shmtrace.%s", shmt_loss_kinds[i].name);
		c[n].v = shmt_loss_get(&l->counters, &shmt_loss_kinds[i]);
	}
	if (!l->corrupt) {
		snprintf(c[n].key, sizeof(c[n].key), "shmtrace.records_lost");
		c[n++].v = shmt_loss_records(&l->counters);
		snprintf(c[n].key, sizeof(c[n].key), "shmtrace.records_unaccounted");
		c[n++].v = l->unaccounted;
	}
	snprintf(c[n].key, sizeof(c[n].key), "shmtrace.names_lost");
	c[n++].v = o->names_lost;
	snprintf(c[n].key, sizeof(c[n].key), "shmtrace.args_lost");
	c[n++].v = o->held.lost;
	/* snapshots among the inputs: what their copies lost, the triggers
	 * their recorder did not answer */
	snprintf(c[n].key, sizeof(c[n].key), "shmtrace.snapshot.overwritten_during_copy");
	snprintf(c[n + 1].key, sizeof(c[n + 1].key), "shmtrace.snapshot.triggers_suppressed");
	for (size_t i = 0; i < o->s->nsnaps; i++) {
		c[n].v += o->s->snaps[i].overwritten;
		c[n + 1].v += o->s->snaps[i].suppressed;
	}
	n += 2;

	ob_puts(b, ",\"attributes\":[");
	for (size_t i = 0; i < n; i++) {
		if (!c[i].v)
			continue;
		if (any)
			ob_raw(b, ",", 1);
		attr_int(b, c[i].key, c[i].v);
		any = true;
	}
	if (l->corrupt) {
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

void otlp_put_resource(struct otlp *o, struct obuf *b, uint32_t outpid)
{
	const struct proc *p = hosts_proc(&o->hosts, outpid);
	uint32_t host = hosts_host_of(&o->hosts, outpid);
	uint32_t pid = p ? p->pid : hosts_local(outpid) % PROCS_PID_STRIDE;
	char name[128];

	if (p && p->pname[0] && p->nk <= 1)
		snprintf(name, sizeof(name), "%s", p->pname);
	else if (p && p->pname[0])
		snprintf(name, sizeof(name), "%s (#%u)", p->pname, p->k);
	else
		snprintf(name, sizeof(name), "pid %u", pid);
	ob_puts(b, "{\"resource\":{\"attributes\":[");
	attr_cstr(b, "service.name", o->o->service ? o->o->service : name);
	ob_raw(b, ",", 1);
	attr_cstr(b, "host.name", hosts_name(&o->hosts, host));
	ob_raw(b, ",", 1);
	attr_int(b, "process.pid", pid);
	if (p && p->pname[0]) {
		ob_raw(b, ",", 1);
		attr_cstr(b, "process.executable.name", p->pname);
	}
	ob_puts(b, "],\"droppedAttributesCount\":0},\"scopeSpans\":[{\"scope\":{\"name\":\"shmtrace\","
		   "\"version\":\"" SHMTRACE_VERSION "\"");
	put_scope_losses(o, b);
	ob_puts(b, ",\"spans\":[");
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
