// SPDX-License-Identifier: MIT
/*
 * otlp.c - `shmtrace export --format otlp`: spans as OpenTelemetry
 * ExportTraceServiceRequests (OTLP/JSON), a batch at a time to a file (one
 * request per line) or POSTed to an OTLP/HTTP endpoint. A flow becomes a
 * trace whose spans are each a child of the step before; a span outside
 * flows is a trace of its own. Arguments are attributes, open spans end
 * where the Chrome export ends them (tools/args.c for both). Memory: the
 * flow records (as in the Chrome export), a few instants per thread
 * waiting for their enclosing span, and one batch.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "flows.h"
#include "hosts.h"
#include "http.h"
#include "json_writer.h"
#include "otlp.h"

/* Instants of a thread kept until a span that encloses them arrives (a
 * span's record is written at its end, after the instants inside it);
 * the oldest beyond this is exported as a zero-length span. */
#define PEND_MAX	32u
#define HTTP_TIMEOUT_MS	10000
#define BACKOFF_MIN_MS	100u
#define BACKOFF_MAX_MS	5000u

struct obuf {
	char *p;
	size_t len, cap;
	bool oom;
};

/* An instant: waiting on its thread (seq its own), or claimed as an event
 * by a flow span (seq that span's). */
struct inst {
	uint64_t ts, seq;
	uint32_t name, cat;
	struct ev_args a;
};

struct pend {
	uint32_t n;
	struct inst v[PEND_MAX];
};

struct pbatch {
	uint32_t outpid;
	uint32_t nspans;
	struct obuf spans;
};

struct otlp {
	struct source *s;
	const struct otlp_opts *o;
	struct hosts hosts;
	struct flows fl;
	struct args_pend held;		/* the last span or instant, and its arguments */
	struct args_store fargs;	/* arguments of flow records (flow_ev.args) */
	struct open_spans open;		/* open spans, exported after the pass */
	struct u64map last;		/* (outpid << 32 | tid) -> its last moment */
	struct u64map pmap;		/* (outpid << 32 | tid) -> pend index + 1 */
	struct pend *pend;
	size_t npend, pendcap;
	struct inst *fev;		/* instants claimed by flow spans, by seq */
	size_t nfev, fevcap;
	struct u64map bmap;		/* outpid -> batch index + 1 */
	struct pbatch *b;
	size_t nb, bcap;
	size_t batch_len;		/* span bytes in the batch */
	uint32_t batch_procs;		/* processes with spans in the batch */
	uint64_t batch_spans;
	struct obuf req;
	char **esc;			/* quoted, escaped text of each string id */
	uint32_t *esclen;
	uint64_t seq, salt, t0, wall_off;
	bool any;
	FILE *f;
	bool to_http;
	struct http_url url;
	/* the current flow */
	uint64_t thi, tlo, parent;
	const struct flow_ev *tp_ev;
	/* what happened */
	uint64_t spans, events, counters, flows, names_lost;
	uint64_t requests, spans_sent, requests_sent, retries_used, rejected;
	char err[768];
};

/* ------------------------------------------------------------ buffers */

static bool ob_reserve(struct obuf *b, size_t n)
{
	size_t cap;
	char *p;

	if (b->oom)
		return false;
	if (n <= b->cap - b->len)
		return true;
	cap = b->cap ? b->cap : 4096;
	while (cap - b->len < n)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

static inline void ob_raw(struct obuf *b, const char *s, size_t n)
{
	if (!ob_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static inline void ob_puts(struct obuf *b, const char *s)
{
	ob_raw(b, s, strlen(s));
}

/* "pre" then s[0..n) as one quoted JSON string (json_writer's escaping;
 * pre needs none). */
static void ob_str_pre(struct obuf *b, const char *pre, const char *s, size_t n)
{
	size_t need, plen = strlen(pre);

	if (!ob_reserve(b, plen + n + 3))
		return;
	b->p[b->len++] = '"';
	memcpy(b->p + b->len, pre, plen);
	b->len += plen;
	need = json_escape(s, n, b->p + b->len, b->cap - b->len);
	if (need >= b->cap - b->len) {
		if (!ob_reserve(b, need + 2))
			return;
		json_escape(s, n, b->p + b->len, b->cap - b->len);
	}
	b->len += need;
	b->p[b->len++] = '"';
}

/* s[0..n) as a quoted JSON string. */
static void ob_str(struct obuf *b, const char *s, size_t n)
{
	ob_str_pre(b, "", s, n);
}

static void ob_u64(struct obuf *b, uint64_t v)
{
	char d[24], *p = d + sizeof(d);

	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	ob_raw(b, p, (size_t)(d + sizeof(d) - p));
}

static void ob_i64(struct obuf *b, int64_t v)
{
	if (v < 0)
		ob_raw(b, "-", 1);
	/* in unsigned arithmetic: INT64_MIN has no positive int64 */
	ob_u64(b, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

/* v as 16 lowercase hex digits. */
static void ob_hex(struct obuf *b, uint64_t v)
{
	static const char x[] = "0123456789abcdef";
	char d[16];

	for (int i = 15; i >= 0; i--, v >>= 4)
		d[i] = x[v & 15];
	ob_raw(b, d, 16);
}

static void ob_free(struct obuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---------------------------------------------------------------- ids */

static uint64_t mix64(uint64_t x)
{
	/* splitmix64's finaliser: every input bit moves every output bit */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void trace_id_of(uint64_t key, uint64_t *hi, uint64_t *lo)
{
	*hi = mix64(key ^ 0x5348545241434531ull);
	*lo = mix64(key ^ 0x5348545241434532ull);
	if (!*hi && !*lo)
		*lo = 1;
}

static uint64_t span_id_of(const struct otlp *o, uint64_t seq)
{
	uint64_t id = mix64(o->salt ^ mix64(seq));

	return id ? id : 1;
}

/* A flow's trace id when no traceparent names one: a global flow id
 * alone, so that every host's export of the flow agrees; a ring-local
 * one with its ring's identity. */
static void flow_trace_id(struct otlp *o, const struct flow_ev *fe, uint64_t *hi, uint64_t *lo)
{
	const char *name;
	uint64_t ring_id = 0, run_id = 0;

	if (fe->flow & SHMT_FLOW_GLOBAL) {
		trace_id_of(fe->flow, hi, lo);
		return;
	}
	source_ring_info(o->s, fe->ring, &name, &ring_id, &run_id);
	trace_id_of(mix64(ring_id ? ring_id : run_id) ^ fe->flow, hi, lo);
}

static int hexdig(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool parse_hex(const char *s, size_t n, uint64_t *v)
{
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		int d = hexdig(s[i]);

		if (d < 0)
			return false;
		*v = *v << 4 | (uint64_t)d;
	}
	return true;
}

/* "traceparent VV-TRACE-PARENT-FF" as shmtrace_flow_from_traceparent()
 * records it: the trace id and the remote parent span. */
static bool parse_traceparent(const char *s, size_t len, uint64_t *hi, uint64_t *lo,
			      uint64_t *parent)
{
	if (len < 12 + 55 || memcmp(s, "traceparent ", 12))
		return false;
	s += 12;
	if (s[2] != '-' || s[35] != '-' || s[52] != '-')
		return false;
	return parse_hex(s + 3, 16, hi) && parse_hex(s + 19, 16, lo) &&
	       parse_hex(s + 36, 16, parent) && (*hi || *lo);
}

/* ------------------------------------------------------------ strings */

static void put_string(struct otlp *o, struct obuf *b, uint32_t id)
{
	size_t len;
	const char *t;

	if (id < o->s->nstr && o->esc[id]) {
		ob_raw(b, o->esc[id], o->esclen[id]);
		return;
	}
	t = source_string(o->s, id, &len);
	if (id < o->s->nstr) {
		struct obuf e = { 0 };

		ob_str(&e, t, len);
		if (!e.oom) {
			o->esc[id] = e.p;
			o->esclen[id] = (uint32_t)e.len;
			ob_raw(b, e.p, e.len);
			return;
		}
		ob_free(&e);
	}
	ob_str(b, t, len);
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
	ob_u64(b, v);
	ob_puts(b, "}}");
}

static void attr_cstr(struct obuf *b, const char *key, const char *v)
{
	attr_key(b, key);
	ob_puts(b, "\"stringValue\":");
	ob_str(b, v, strlen(v));
	ob_puts(b, "}}");
}

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
		} else {
			ob_puts(b, "\"intValue\":\"");
			ob_i64(b, (int64_t)a->a[i].value);
			ob_raw(b, "\"", 1);
		}
		ob_puts(b, "}}");
	}
}

static void put_time(struct obuf *b, const char *key, uint64_t wall)
{
	ob_puts(b, key);
	ob_raw(b, "\"", 1);
	ob_u64(b, wall);
	ob_raw(b, "\"", 1);
}

/* ------------------------------------------------------------- output */

static int deliver(struct otlp *o);

static struct pbatch *batch_of(struct otlp *o, uint32_t outpid)
{
	bool added;
	uint64_t *v = u64map_get(&o->bmap, outpid, 0, &added);

	if (!v)
		return NULL;
	if (added) {
		if (o->nb == o->bcap) {
			size_t cap = o->bcap ? o->bcap * 2 : 64;
			struct pbatch *nb = reallocarray(o->b, cap, sizeof(*nb));

			if (!nb)
				return NULL;
			o->b = nb;
			o->bcap = cap;
		}
		memset(&o->b[o->nb], 0, sizeof(o->b[0]));
		o->b[o->nb].outpid = outpid;
		*v = ++o->nb;
	}
	return &o->b[*v - 1];
}

/* kind: SHMTRACE_KIND_SPAN, _INSTANT (zero-length) or _OPEN (unfinished) */
struct span {
	uint32_t outpid, tid, name, cat, kind;
	uint64_t ts, dur, flow;
	uint64_t thi, tlo, id, parent;
	const struct ev_args *args;
	const struct inst *ev;
	size_t nev;
};

static int put_span(struct otlp *o, const struct span *sp)
{
	struct pbatch *pb = batch_of(o, sp->outpid);
	struct obuf *b;
	const char *tn;
	size_t before;
	uint32_t dropped = 0;

	if (!pb)
		return -ENOMEM;
	b = &pb->spans;
	before = b->len;
	if (!source_has_string(o->s, sp->name) || !source_has_string(o->s, sp->cat))
		o->names_lost++;
	if (pb->nspans++)
		ob_raw(b, ",", 1);
	else
		o->batch_procs++;
	ob_puts(b, "{\"traceId\":\"");
	ob_hex(b, sp->thi);
	ob_hex(b, sp->tlo);
	ob_puts(b, "\",\"spanId\":\"");
	ob_hex(b, sp->id);
	if (sp->parent) {
		ob_puts(b, "\",\"parentSpanId\":\"");
		ob_hex(b, sp->parent);
	}
	ob_puts(b, "\",\"name\":");
	put_string(o, b, sp->name);
	/* SPAN_KIND_INTERNAL: shmtrace does not know who called whom */
	ob_puts(b, ",\"kind\":1,");
	put_time(b, "\"startTimeUnixNano\":", sp->ts + o->wall_off);
	put_time(b, ",\"endTimeUnixNano\":", sp->ts + sp->dur + o->wall_off);
	ob_puts(b, ",\"attributes\":[");
	attr_int(b, "thread.id", sp->tid);
	tn = hosts_thread_name(&o->hosts, sp->outpid, sp->tid);
	if (tn) {
		ob_raw(b, ",", 1);
		attr_cstr(b, "thread.name", tn);
	}
	ob_raw(b, ",", 1);
	attr_key(b, "shmtrace.category");
	ob_puts(b, "\"stringValue\":");
	put_string(o, b, sp->cat);
	ob_puts(b, "}}");
	if (sp->flow) {
		ob_raw(b, ",", 1);
		attr_int(b, "shmtrace.flow.id", sp->flow);
	}
	if (sp->kind == SHMTRACE_KIND_INSTANT) {
		ob_raw(b, ",", 1);
		attr_key(b, "shmtrace.instant");
		ob_puts(b, "\"boolValue\":true}}");
	}
	if (sp->kind == SHMTRACE_KIND_OPEN) {
		/* its thread never ended it: it ends where its thread's record does */
		ob_raw(b, ",", 1);
		attr_key(b, "shmtrace.unfinished");
		ob_puts(b, "\"boolValue\":true}}");
	}
	put_args(o, b, sp->args, &dropped);
	ob_puts(b, "],\"droppedAttributesCount\":");
	ob_u64(b, dropped);
	ob_puts(b, ",\"events\":[");
	for (size_t i = 0; i < sp->nev; i++) {
		ob_puts(b, i ? ",{" : "{");
		put_time(b, "\"timeUnixNano\":", sp->ev[i].ts + o->wall_off);
		ob_puts(b, ",\"name\":");
		put_string(o, b, sp->ev[i].name);
		ob_puts(b, ",\"attributes\":[");
		attr_key(b, "shmtrace.category");
		ob_puts(b, "\"stringValue\":");
		put_string(o, b, sp->ev[i].cat);
		ob_puts(b, "}}");
		dropped = 0;
		put_args(o, b, &sp->ev[i].a, &dropped);
		ob_puts(b, "],\"droppedAttributesCount\":");
		ob_u64(b, dropped);
		ob_puts(b, "}");
		if (!source_has_string(o->s, sp->ev[i].name))
			o->names_lost++;
	}
	ob_puts(b, "],\"droppedEventsCount\":0,\"links\":[],\"droppedLinksCount\":0,"
		   "\"status\":{\"code\":0}}");
	if (b->oom)
		return -ENOMEM;
	o->spans++;
	o->events += sp->nev;
	o->batch_spans++;
	o->batch_len += b->len - before;
	/* room for each process's resource and scope, a few hundred bytes */
	if (o->batch_len + 1024ull * o->batch_procs >= o->o->batch_bytes - o->o->batch_bytes / 16)
		return deliver(o);
	return 0;
}

static void put_resource(struct otlp *o, struct obuf *b, uint32_t outpid)
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
}

/* Loss counters as scope attributes, the ones that are not zero (as known
 * when the batch is sent: torn records are counted at the end of a pass). */
static void put_scope_losses(struct otlp *o, struct obuf *b)
{
	const struct source_loss *l = &o->s->loss;
	const struct {
		const char *key;
		uint64_t v;
	} c[] = {
		{ "shmtrace.records_dropped", l->dropped },
		{ "shmtrace.records_overwritten", l->overwritten },
		{ "shmtrace.lock_timeouts", l->lock_timeouts },
		{ "shmtrace.records_torn", l->torn },
		{ "shmtrace.strings_dropped", l->strings_dropped },
		{ "shmtrace.thread_names_dropped", l->names_dropped },
		{ "shmtrace.records_unaccounted", l->unaccounted },
		{ "shmtrace.names_lost", o->names_lost },
		{ "shmtrace.args_lost", o->held.lost },
	};
	bool any = false;

	ob_puts(b, ",\"attributes\":[");
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		if (!c[i].v)
			continue;
		if (any)
			ob_raw(b, ",", 1);
		attr_int(b, c[i].key, c[i].v);
		any = true;
	}
	if (o->s->cut || o->s->damaged) {
		if (any)
			ob_raw(b, ",", 1);
		attr_key(b, "shmtrace.capture_complete");
		ob_puts(b, "\"boolValue\":false}}");
	}
	ob_puts(b, "],\"droppedAttributesCount\":0}");
}

/* Reads an OTLP partial success: {"partialSuccess":{"rejectedSpans":"N",...}}. */
static uint64_t rejected_spans(const char *body)
{
	const char *p = strstr(body, "\"rejectedSpans\"");

	if (!p)
		return 0;
	p += strlen("\"rejectedSpans\"");
	p += strspn(p, " \t:\"");
	return strtoull(p, NULL, 10);
}

static bool retryable(int ret, int status)
{
	if (ret < 0)
		return ret == -ECONNREFUSED || ret == -ECONNRESET || ret == -ETIMEDOUT ||
		       ret == -EPIPE;
	return status == 429 || status == 502 || status == 503 || status == 504;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* POSTs o->req, retrying with back-off within the budget. */
static int post(struct otlp *o)
{
	unsigned delay = BACKOFF_MIN_MS;
	struct http_answer a;
	char why[512];
	int ret = 0;

	for (unsigned attempt = 1;; attempt++) {
		ret = http_post(&o->url, o->req.p, o->req.len, HTTP_TIMEOUT_MS, &a, why, sizeof(why));
		if (ret == 0 && a.status >= 200 && a.status < 300) {
			uint64_t rej = rejected_spans(a.body);

			o->rejected += rej;
			return 0;
		}
		if (!retryable(ret, a.status) || attempt >= o->o->retries)
			break;
		o->retries_used++;
		if (ret == 0 && a.retry_after) {
			unsigned ra = a.retry_after > BACKOFF_MAX_MS / 1000 ? BACKOFF_MAX_MS
									    : a.retry_after * 1000;

			if (ra > delay)
				delay = ra;
		}
		sleep_ms(delay);
		delay = delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay * 2;
	}
	if (ret < 0) {
		snprintf(o->err, sizeof(o->err), "%s%s", why,
			 retryable(ret, 0) ? " (gave up after the retries)" : "");
		return ret;
	}
	/* the first line of the body says why, for most collectors */
	a.body[strcspn(a.body, "\r\n")] = 0;
	snprintf(o->err, sizeof(o->err), "%.200s%.200s answered %d%s%.200s%s", o->url.hostport,
		 o->url.path, a.status, a.body[0] ? ": " : "", a.body,
		 retryable(0, a.status) ? " (gave up after the retries)" : "");
	return -EPROTO;
}

/* Writes the batch as one request to the file and/or the endpoint. */
static int deliver(struct otlp *o)
{
	struct obuf *r = &o->req;
	bool first = true;
	int ret;

	if (!o->batch_spans)
		return 0;
	r->len = 0;
	ob_puts(r, "{\"resourceSpans\":[");
	for (size_t i = 0; i < o->nb; i++) {
		struct pbatch *pb = &o->b[i];

		if (!pb->nspans)
			continue;
		if (!first)
			ob_raw(r, ",", 1);
		first = false;
		put_resource(o, r, pb->outpid);
		put_scope_losses(o, r);
		ob_puts(r, ",\"spans\":[");
		ob_raw(r, pb->spans.p, pb->spans.len);
		ob_puts(r, "]}]}");
		pb->spans.len = 0;
		pb->nspans = 0;
		if (pb->spans.cap > (256u << 10)) {
			/* a process busy in one batch only keeps no big buffer */
			ob_free(&pb->spans);
		}
	}
	ob_puts(r, "]}");
	if (r->oom)
		return -ENOMEM;
	o->requests++;
	if (o->f) {
		ob_raw(r, "\n", 1);
		if (r->oom)
			return -ENOMEM;
		if (fwrite(r->p, 1, r->len, o->f) != r->len) {
			snprintf(o->err, sizeof(o->err), "writing the output: %s", strerror(errno));
			return -EIO;
		}
		r->len--;
	}
	if (o->to_http) {
		ret = post(o);
		if (ret < 0)
			return ret;
		o->requests_sent++;
		o->spans_sent += o->batch_spans;
	}
	o->batch_spans = 0;
	o->batch_len = 0;
	o->batch_procs = 0;
	return 0;
}

/* ------------------------------------------------------------ records */

static bool wanted(const struct otlp *o, const struct shmt_record *r)
{
	const struct filter *f = o->o->flt;

	if (!filter_pid(f, r->pid))
		return false;
	if (f->has_from || f->has_to) {
		uint64_t rel = r->ts > o->t0 ? r->ts - o->t0 : 0;

		if ((f->has_from && rel < f->from) || (f->has_to && rel > f->to))
			return false;
	}
	return true;
}

static int single_span(struct otlp *o, uint32_t outpid, uint32_t tid, uint32_t kind,
		       uint64_t ts, uint64_t dur, uint32_t cat, uint32_t name, uint64_t seq,
		       const struct ev_args *a, const struct inst *ev, size_t nev)
{
	struct span sp = {
		.outpid = outpid, .tid = tid, .name = name, .cat = cat, .kind = kind, .ts = ts,
		.dur = dur, .id = span_id_of(o, seq), .args = a, .ev = ev, .nev = nev,
	};

	trace_id_of(o->salt ^ mix64(seq ^ 0x7472616365ull), &sp.thi, &sp.tlo);
	return put_span(o, &sp);
}

static struct pend *pend_of(struct otlp *o, uint32_t outpid, uint32_t tid)
{
	bool added;
	uint64_t *v = u64map_get(&o->pmap, (uint64_t)outpid << 32 | tid, 0, &added);

	if (!v)
		return NULL;
	if (added) {
		if (o->npend == o->pendcap) {
			size_t cap = o->pendcap ? o->pendcap * 2 : 64;
			struct pend *np = reallocarray(o->pend, cap, sizeof(*np));

			if (!np)
				return NULL;
			o->pend = np;
			o->pendcap = cap;
		}
		o->pend[o->npend].n = 0;
		*v = ++o->npend;
	}
	return &o->pend[*v - 1];
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

/*
 * One span, instant or open span (kind SHMTRACE_KIND_OPEN, its dur set)
 * of thread (outpid, r->tid), with its arguments a (or NULL); ring is the
 * source's index of its ring (flow ids are per ring).
 */
static int put_event(struct otlp *o, const struct shmt_record *r, uint32_t outpid, uint32_t ring,
		     uint64_t seq, const struct ev_args *a)
{
	struct inst ev[PEND_MAX];
	struct pend *p = pend_of(o, outpid, r->tid);
	size_t n;
	int ret;

	if (!p)
		return -ENOMEM;
	if (r->flow) {
		struct flow_ev fe = {
			.flow = r->flow, .ring = ring, .ts = r->ts, .dur = r->dur, .pid = outpid,
			.tid = r->tid, .cat = r->cat, .name = r->name, .kind = r->commit, .seq = seq,
		};

		ret = args_keep(&o->fargs, a, &fe.args);
		if (ret < 0)
			return ret;
		if (r->commit != SHMTRACE_KIND_INSTANT && p->n) {
			/* its events, written with the flow at the end */
			n = claim(p, r->ts, r->dur, ev);
			if (o->nfev + n > o->fevcap) {
				size_t cap = o->fevcap ? o->fevcap * 2 : 1024;
				struct inst *nf;

				while (cap < o->nfev + n)
					cap *= 2;
				nf = reallocarray(o->fev, cap, sizeof(*nf));
				if (!nf)
					return -ENOMEM;
				o->fev = nf;
				o->fevcap = cap;
			}
			for (size_t i = 0; i < n; i++) {
				o->fev[o->nfev] = ev[i];
				o->fev[o->nfev++].seq = seq;
			}
		}
		return flows_add(&o->fl, &fe);
	}
	if (r->commit == SHMTRACE_KIND_INSTANT) {
		if (p->n == PEND_MAX) {
			struct inst old = p->v[0];

			memmove(p->v, p->v + 1, (PEND_MAX - 1) * sizeof(p->v[0]));
			p->n--;
			if (!o->o->flows_only) {
				ret = single_span(o, outpid, r->tid, SHMTRACE_KIND_INSTANT, old.ts, 0,
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
	n = claim(p, r->ts, r->dur, ev);
	if (o->o->flows_only)
		return 0;
	return single_span(o, outpid, r->tid, r->commit, r->ts, r->dur, r->cat, r->name, seq, a,
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
		return r->commit == SHMTRACE_KIND_ARG ? 0 : put_held(o);
	if (r->commit == SHMTRACE_KIND_ARG) {
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
	if (r->commit == SHMTRACE_KIND_OPEN)
		/* numbered after the pass: the other spans keep their ids */
		return open_add(&o->open, r, outpid, o->s->ring);
	seq = ++o->seq;
	if (r->commit == SHMTRACE_KIND_COUNTER) {
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
	uint64_t key, *v;

	while (u64map_next(&o->pmap, &pos, &key, &v)) {
		struct pend *p = &o->pend[*v - 1];
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

static bool is_traceparent(struct otlp *o, const struct flow_ev *fe, uint64_t *hi, uint64_t *lo,
			   uint64_t *parent)
{
	size_t clen, nlen;
	const char *cat, *name;

	if (fe->kind != SHMTRACE_KIND_INSTANT)
		return false;
	cat = source_string(o->s, fe->cat, &clen);
	if (clen != 8 || memcmp(cat, "shmtrace", 8))
		return false;
	name = source_string(o->s, fe->name, &nlen);
	return parse_traceparent(name, nlen, hi, lo, parent);
}

static int on_flow(void *ctx, char ph, uint64_t id, const struct flow_ev *fe,
		   const struct flow_ev *group, size_t n)
{
	struct otlp *o = ctx;
	struct span sp = { 0 };
	size_t lo = 0, hi = o->nfev;
	uint64_t a, b, c;

	(void)id;
	if (fe == group) {
		o->thi = o->tlo = o->parent = 0;
		o->tp_ev = NULL;
		for (size_t i = 0; i < n; i++) {
			if (is_traceparent(o, &group[i], &a, &b, &c)) {
				o->thi = a;
				o->tlo = b;
				o->parent = c;
				o->tp_ev = &group[i];
				break;
			}
		}
		if (!o->tp_ev)
			flow_trace_id(o, fe, &o->thi, &o->tlo);
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
		.thi = o->thi, .tlo = o->tlo, .id = span_id_of(o, fe->seq), .parent = o->parent,
		.args = args_get(&o->fargs, fe->args), .ev = o->fev + lo, .nev = hi - lo,
	};
	/* each step a child of the step before it, as the arrows go */
	o->parent = sp.id;
	return put_span(o, &sp);
}

static int on_min_ts(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct otlp *o = ctx;

	(void)start_time;
	if (filter_pid(o->o->flt, r->pid) && (!o->any || r->ts < o->t0)) {
		o->t0 = r->ts;
		o->any = true;
	}
	return 0;
}

static void warn_losses(struct otlp *o)
{
	const struct source_loss *l = &o->s->loss;

	if (l->dropped || l->overwritten || l->lock_timeouts || l->torn)
		warnx_("records were lost: %llu dropped, %llu overwritten, %llu lock timeouts, "
		       "%llu torn", (unsigned long long)l->dropped,
		       (unsigned long long)l->overwritten, (unsigned long long)l->lock_timeouts,
		       (unsigned long long)l->torn);
	if (l->unaccounted)
		warnx_("%llu records are missing that no counter accounts for",
		       (unsigned long long)l->unaccounted);
	if (o->names_lost)
		warnx_("%llu spans or events lost their names (exported as \"?\"); see "
		       "'shmtrace export' to Chrome for why", (unsigned long long)o->names_lost);
}

static int run(struct otlp *o)
{
	const struct filter *f = o->o->flt;
	int ret;

	if (f->has_from || f->has_to) {
		ret = source_records(o->s, on_min_ts, o, o->err, sizeof(o->err));
		if (ret < 0)
			return ret;
	}
	ret = source_records(o->s, on_record, o, o->err, sizeof(o->err));
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
	return deliver(o);
}

int otlp_export(struct source *src, const struct otlp_opts *opts, const char *out)
{
	struct otlp *o = calloc(1, sizeof(*o));
	const char *rname;
	uint64_t ring_id = 0, run_id = 0;
	int ret, rc = EXIT_RUNTIME;

	if (!o)
		return cli_runtime_error("export", "out of memory");
	o->s = src;
	o->o = opts;
	if (opts->endpoint) {
		ret = http_parse_url(opts->endpoint, "/v1/traces", &o->url, o->err, sizeof(o->err));
		if (ret < 0) {
			cli_runtime_error("export", "--otlp-endpoint %s", o->err);
			free(o);
			return EXIT_USAGE;
		}
		o->to_http = true;
	}
	flows_init(&o->fl);
	u64map_init(&o->pmap);
	u64map_init(&o->bmap);
	u64map_init(&o->last);
	ret = hosts_build(&o->hosts, src);
	if (ret == -E2BIG) {
		rc = cli_runtime_error("export", "the inputs come from %u hosts; at most %u can be merged",
				       src->nhosts, HOSTS_MAX);
		goto done;
	}
	o->esc = calloc(src->nstr ? src->nstr : 1, sizeof(*o->esc));
	o->esclen = calloc(src->nstr ? src->nstr : 1, sizeof(*o->esclen));
	if (ret < 0 || !o->esc || !o->esclen) {
		rc = cli_runtime_error("export", "out of memory");
		goto done;
	}
	/* ids differ between captures, and are the same on every export of one */
	source_ring_info(src, 0, &rname, &ring_id, &run_id);
	o->salt = mix64(ring_id ^ mix64(run_id ^ src->realtime0));
	o->wall_off = src->realtime0 - src->mono0;
	if (out)
		o->f = strcmp(out, "-") ? fopen(out, "w") : stdout;
	if (out && !o->f) {
		rc = cli_runtime_error("export", "cannot create %s: %s", out, strerror(errno));
		goto done;
	}
	ret = run(o);
	if (o->f && o->f != stdout && fclose(o->f) != 0 && ret == 0) {
		snprintf(o->err, sizeof(o->err), "writing %s: %s", out, strerror(errno));
		ret = -EIO;
	}
	if (o->f == stdout && fflush(stdout) != 0 && ret == 0) {
		snprintf(o->err, sizeof(o->err), "writing the output: %s", strerror(errno));
		ret = -EIO;
	}
	o->f = NULL;
	warn_losses(o);
	if (ret < 0) {
		cli_runtime_error("export", "%s", o->err[0] ? o->err : strerror(-ret));
		if (o->to_http)
			fprintf(stderr, "shmtrace export: %llu spans in %llu requests were sent to %s%s "
				"before that; the other %llu spans were not sent\n",
				(unsigned long long)o->spans_sent,
				(unsigned long long)o->requests_sent, o->url.hostport, o->url.path,
				(unsigned long long)(o->spans - o->spans_sent));
		if (out && strcmp(out, "-") && !o->to_http)
			unlink(out);
		goto done;
	}
	rc = EXIT_OK;
	if (o->to_http)
		fprintf(stderr, "shmtrace export: %llu spans (%llu flows) in %llu requests sent to "
			"%s%s%s\n", (unsigned long long)o->spans_sent, (unsigned long long)o->flows,
			(unsigned long long)o->requests_sent, o->url.hostport, o->url.path,
			o->retries_used ? " (after retries)" : "");
	if (o->rejected)
		warnx_("the endpoint rejected %llu of those spans (OTLP partial success)",
		       (unsigned long long)o->rejected);
	if (o->counters)
		fprintf(stderr, "shmtrace export: %llu counter records are not exported to OTLP\n",
			(unsigned long long)o->counters);
	if (src->cut || src->damaged)
		fprintf(stderr, "shmtrace export: exported from an incomplete capture (see above)\n");
done:
	if (o->f && o->f != stdout)
		fclose(o->f);
	for (uint32_t i = 0; o->esc && i < src->nstr; i++)
		free(o->esc[i]);
	free(o->esc);
	free(o->esclen);
	for (size_t i = 0; i < o->nb; i++)
		ob_free(&o->b[i].spans);
	free(o->b);
	ob_free(&o->req);
	free(o->pend);
	free(o->fev);
	u64map_free(&o->pmap);
	u64map_free(&o->bmap);
	u64map_free(&o->last);
	args_store_free(&o->fargs);
	open_free(&o->open);
	flows_free(&o->fl);
	hosts_free(&o->hosts);
	free(o);
	return rc;
}
