// SPDX-License-Identifier: MIT
/*
 * export.c - `shmtrace export`: capture files or a ring to Chrome Trace
 * Event JSON, streamed as it is produced. Only flow records are kept in
 * memory; spans go straight to the output.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "bind.h"
#include "cli.h"
#include "cmd_common.h"
#include "flows.h"
#include "fmt.h"
#include "hosts.h"
#include "json_writer.h"
#include "otlp.h"
#include "procs.h"
#include "source.h"

#define PROGRESS_EVERY 1000000ull

struct exporter {
	struct source src;
	struct hosts hosts;
	struct flows fl;
	struct bind bind;		/* where events without a flow start */
	/* (outpid << 32 | tid) of every record written: its last moment */
	struct u64map seen;
	struct jw *w;
	struct filter flt;		/* window relative to t0 = earliest record */
	bool progress;
	uint64_t t0, t_end;		/* earliest and latest record start (window pass) */
	uint64_t first_ts, last_ts, events, flows;
	uint64_t names_lost;		/* events exported with a name or category "?" */
	uint64_t threads_unnamed;	/* threads exported without a name slot */
	struct args_pend pend;		/* the last span or instant, and its arguments */
	struct args_store fargs;	/* arguments of flow records (flow_ev.args) */
	struct open_spans open;		/* open spans (SHMTRACE_KIND_OPEN) */
	uint64_t unfinished;		/* open spans exported */
	char *fcat;			/* the current flow's category list, or NULL */
	size_t fcatlen;
	bool any, sep;
};

static const char export_usage[] =
	"Usage: shmtrace export CAPTURE... -o OUT [options]\n"
	"       shmtrace export --ring NAME -o OUT [options]\n"
	"       shmtrace export CAPTURE... --format otlp --otlp-endpoint URL [options]\n"
	"Converts capture files (all parts of one run, any order; captures of several\n"
	"rings or hosts are merged onto one time line) or a ring left in /dev/shm to\n"
	"Chrome Trace Event JSON (chrome://tracing, Perfetto, DevTools), or to\n"
	"OpenTelemetry (OTLP/JSON) spans.\n"
	"\n"
	"  -o, --output FILE  write the trace to FILE ('-' for stdout)\n"
	"  -f, --format F     chrome (default) or otlp: OTLP/JSON ExportTraceServiceRequest\n"
	"                     objects, one per line, each at most --batch-size bytes;\n"
	"                     spans and instants only (counters are not exported)\n"
	"      --otlp-endpoint URL  send the OTLP requests to URL/v1/traces (http://\n"
	"                     only) instead of, or as well as, writing them to -o\n"
	"      --service NAME service.name of every process (default: its name)\n"
	"      --flows-only   OTLP: only the spans of flows\n"
	"      --batch-size N OTLP: bytes per request (default 4M; 64k..64M)\n"
	"      --retries N    OTLP/HTTP: attempts per request on 429/502/503/504 or a\n"
	"                     refused connection, with back-off (default 6)\n"
	"      --clock-offset HOST=NS  add NS (signed, ns) to the times of HOST's\n"
	"                     captures after aligning hosts by wall clock (repeatable)\n"
	"  -r, --ring NAME    read the ring /dev/shm/NAME directly, read-only\n"
	"  -p, --pid PID      only records of PID (repeatable)\n"
	"      --from T       only records starting at or after T\n"
	"      --to T         only records starting at or before T\n"
	"                     (T is relative to the earliest record: 1.5s, 200ms, 300us)\n"
	"  -h, --help         show this help\n";

static void sep(struct exporter *e)
{
	jw_puts(e->w, e->sep ? ",\n" : "\n");
	e->sep = true;
}

static void put_str_id(struct exporter *e, uint32_t id)
{
	size_t len;
	const char *s = source_string(&e->src, id, &len);

	jw_str(e->w, s, len);
}

/* "pid":P,"tid":T,"ts":TS */
static void put_where(struct jw *w, uint32_t pid, uint32_t tid, uint64_t ts)
{
	jw_puts(w, "\"pid\":");
	jw_u64(w, pid);
	jw_puts(w, ",\"tid\":");
	jw_u64(w, tid);
	jw_puts(w, ",\"ts\":");
	jw_us(w, ts);
}

static bool wanted(const struct exporter *e, const struct shmt_record *r)
{
	if (!filter_pid(&e->flt, r->pid))
		return false;
	if (e->flt.has_from || e->flt.has_to) {
		uint64_t rel = r->ts > e->t0 ? r->ts - e->t0 : 0;

		if ((e->flt.has_from && rel < e->flt.from) || (e->flt.has_to && rel > e->flt.to))
			return false;
	}
	return true;
}

/* ,"args":{...} of a span or instant: its arguments, "unfinished":true
 * for a span its thread never ended. */
static void put_args(struct exporter *e, const struct ev_args *a, bool unfinished)
{
	struct jw *w = e->w;
	uint32_t n = a ? a->n : 0;

	if (!n && !unfinished)
		return;
	jw_puts(w, ",\"args\":{");
	for (uint32_t i = 0; i < n; i++) {
		if (i)
			jw_puts(w, ",");
		put_str_id(e, a->a[i].key);
		jw_puts(w, ":");
		if (a->a[i].type == SHMTRACE_ARG_STR)
			put_str_id(e, a->a[i].value <= UINT16_MAX ? (uint32_t)a->a[i].value : 0);
		else
			jw_i64(w, (int64_t)a->a[i].value);
	}
	if (unfinished)
		jw_puts(w, n ? ",\"unfinished\":true" : "\"unfinished\":true");
	jw_puts(w, "}");
}

/* Writes one record as an event, under category cat[0..catlen). */
static void put_event(struct exporter *e, uint32_t kind, uint32_t pid, uint32_t tid, uint64_t ts,
		      uint64_t dur, const char *cat, size_t catlen, uint32_t name,
		      const struct ev_args *a)
{
	struct jw *w = e->w;

	sep(e);
	switch (kind) {
	case SHMTRACE_KIND_OPEN:
	case SHMTRACE_KIND_SPAN:
		jw_puts(w, "{\"ph\":\"X\",");
		put_where(w, pid, tid, ts);
		jw_puts(w, ",\"dur\":");
		jw_us(w, dur);
		break;
	case SHMTRACE_KIND_INSTANT:
		jw_puts(w, "{\"ph\":\"i\",\"s\":\"t\",");
		put_where(w, pid, tid, ts);
		break;
	default:
		jw_puts(w, "{\"ph\":\"C\",");
		put_where(w, pid, tid, ts);
		break;
	}
	jw_puts(w, ",\"cat\":");
	jw_str(w, cat, catlen);
	jw_puts(w, ",\"name\":");
	put_str_id(e, name);
	if (kind == SHMTRACE_KIND_COUNTER) {
		jw_puts(w, ",\"args\":{");
		put_str_id(e, name);
		jw_puts(w, ":");
		jw_i64(w, (int64_t)dur);
		jw_puts(w, "}");
	} else {
		put_args(e, a, kind == SHMTRACE_KIND_OPEN);
	}
	jw_puts(w, "}");
}

/* An event whose name or category is not a known string is written as
 * "?": its string did not fit the ring's table (or never was interned). */
static void count_names(struct exporter *e, uint32_t name, uint32_t cat)
{
	if (!source_has_string(&e->src, name) || !source_has_string(&e->src, cat))
		e->names_lost++;
}

/* Writes (or keeps for its flow) one span, instant or open span. */
/* ring: the source's index of the ring r comes from (flow ids are per ring) */
static int put_record(struct exporter *e, const struct shmt_record *r, uint32_t pid,
		      const struct ev_args *a, uint32_t ring)
{
	if (r->flow && r->commit != SHMTRACE_KIND_COUNTER) {
		/* written with its flow at the end, when the flow's category is known */
		struct flow_ev fe = {
			.flow = r->flow, .ring = ring, .ts = r->ts, .dur = r->dur, .pid = pid, .tid = r->tid,
			.cat = r->cat, .name = r->name, .kind = r->commit,
		};

		int ret = args_keep(&e->fargs, a, &fe.args);

		if (ret < 0)
			return ret;
		return flows_add(&e->fl, &fe);
	} else {
		size_t len;
		const char *cat = source_string(&e->src, r->cat, &len);

		count_names(e, r->name, r->cat);
		bind_note(&e->bind, pid, r->tid, r->ts);
		put_event(e, r->commit, pid, r->tid, r->ts, r->dur, cat, len, r->name, a);
	}
	return e->w->err;
}

/* The held-back event, now that no more of its arguments can come. */
static int put_pending(struct exporter *e)
{
	struct args_pend *p = &e->pend;

	if (!args_take(p))
		return 0;
	return put_record(e, &p->r, p->pid, &p->a, p->ring);
}

static int on_record(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct exporter *e = ctx;
	uint32_t pid;
	int ret;

	if (!wanted(e, r)) {
		/* its arguments are not wanted either */
		if (r->commit != SHMTRACE_KIND_ARG && (ret = put_pending(e)) != 0)
			return ret;
		return 0;
	}
	if (r->commit == SHMTRACE_KIND_ARG) {
		args_on_arg(&e->pend, r, e->src.follows);
		return 0;
	}
	if ((ret = put_pending(e)) != 0)
		return ret;
	pid = hosts_outpid(&e->hosts, r->pid, start_time, r->ts);
	/* the thread's last recorded moment: where its open spans end */
	ret = open_note(&e->open, &e->seen, (uint64_t)pid << 32 | r->tid, r);
	if (ret < 0)
		return ret;
	if (!e->any || r->ts < e->first_ts)
		e->first_ts = r->ts;
	if (!e->any || r->ts > e->last_ts)
		e->last_ts = r->ts;
	e->any = true;
	if (++e->events % PROGRESS_EVERY == 0 && e->progress)
		fprintf(stderr, "\rshmtrace: %llu records exported", (unsigned long long)e->events);

	switch (r->commit) {
	case SHMTRACE_KIND_OPEN:
		return open_add(&e->open, r, pid, e->src.ring);
	case SHMTRACE_KIND_SPAN:
	case SHMTRACE_KIND_INSTANT:
		args_hold(&e->pend, r, pid, e->src.ring, 0);
		return 0;
	default:
		return put_record(e, r, pid, NULL, e->src.ring);
	}
}

/* Open spans, after the pass: each ends at its thread's last recorded
 * moment (args.h), so the spans a thread died in nest as they were. */
static int put_open(struct exporter *e)
{
	for (size_t i = 0; i < e->open.n; i++) {
		struct shmt_record r = open_span_at(&e->open, &e->seen, i);
		int ret;

		e->unfinished++;
		if ((ret = put_record(e, &r, e->open.v[i].pid, NULL, e->open.v[i].ring)) != 0)
			return ret;
	}
	return 0;
}

static int cmp_cstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The category of a flow's slices and flow events. DevTools binds a flow
 * event only to a slice of identical (ts, pid, tid, cat) and groups a
 * flow's events by (cat, name, id): both hold only if every slice of the
 * flow has one category. When they differ, the slices get the list of
 * them, "a,b", which is how the format writes an event of several
 * categories, so no slice loses its own.
 */
static int flow_cat(struct exporter *e, const struct flow_ev *g, size_t n)
{
	const char **v;
	size_t m = 0, len = 0;
	bool same = true;
	char *out;

	free(e->fcat);
	e->fcat = NULL;
	for (size_t i = 1; i < n && same; i++)
		same = g[i].cat == g[0].cat;
	if (same)
		return 0;
	v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t l;

		v[m++] = source_string(&e->src, g[i].cat, &l);
	}
	qsort(v, m, sizeof(*v), cmp_cstr);
	for (size_t i = 0; i < m; i++)
		len += strlen(v[i]) + 1;
	out = malloc(len + 1);
	if (!out) {
		free(v);
		return -ENOMEM;
	}
	out[0] = 0;
	len = 0;
	for (size_t i = 0; i < m; i++) {
		if (i && !strcmp(v[i], v[i - 1]))
			continue;
		len += (size_t)sprintf(out + len, "%s%s", len ? "," : "", v[i]);
	}
	free(v);
	e->fcat = out;
	e->fcatlen = len;
	return 0;
}

static int on_flow(void *ctx, char ph, uint64_t id, const struct flow_ev *fe,
		   const struct flow_ev *group, size_t n)
{
	struct exporter *e = ctx;
	struct jw *w = e->w;
	char p[2] = { ph, 0 };
	const char *cat;
	size_t len;
	int ret;

	if (fe == group && (ret = flow_cat(e, group, n)) < 0)
		return ret;
	count_names(e, fe->name, fe->cat);
	if (e->fcat) {
		cat = e->fcat;
		len = e->fcatlen;
	} else {
		cat = source_string(&e->src, fe->cat, &len);
	}
	put_event(e, fe->kind, fe->pid, fe->tid, fe->ts, fe->dur, cat, len, fe->name,
		  args_get(&e->fargs, fe->args));
	if (!ph)
		return w->err;
	sep(e);
	jw_puts(w, "{\"ph\":\"");
	jw_puts(w, p);
	jw_puts(w, "\",\"id\":");
	jw_u64(w, id);
	jw_puts(w, ",\"name\":\"flow\",\"cat\":");
	/* byte for byte the slice's: DevTools binds on identical strings */
	jw_str(w, cat, len);
	jw_puts(w, ",");
	put_where(w, fe->pid, fe->tid, fe->ts);
	if (ph == 'f')
		jw_puts(w, ",\"bp\":\"e\"");
	jw_puts(w, "}");
	return w->err;
}

static void put_meta(struct exporter *e, uint32_t pid, const uint32_t *tid, const char *what,
		     const char *name, uint64_t sort_index)
{
	struct jw *w = e->w;

	sep(e);
	jw_puts(w, "{\"ph\":\"M\",\"pid\":");
	jw_u64(w, pid);
	if (tid) {
		jw_puts(w, ",\"tid\":");
		jw_u64(w, *tid);
	}
	jw_puts(w, ",\"name\":");
	jw_cstr(w, what);
	jw_puts(w, ",\"args\":{");
	if (name) {
		jw_puts(w, "\"name\":");
		jw_cstr(w, name);
	} else {
		jw_puts(w, "\"sort_index\":");
		jw_u64(w, sort_index);
	}
	jw_puts(w, "}}");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* process_name/thread_name and sort indices for every thread seen. */
static int put_names(struct exporter *e)
{
	size_t n = u64map_count(&e->seen), pos = 0;
	uint64_t *keys = malloc((n ? n : 1) * sizeof(*keys)), k, *v;
	uint32_t last = 0;

	if (!keys)
		return -ENOMEM;
	n = 0;
	while (u64map_next(&e->seen, &pos, &k, &v))
		keys[n++] = k;
	qsort(keys, n, sizeof(*keys), cmp_u64);
	for (size_t i = 0; i < n; i++) {
		uint32_t pid = (uint32_t)(keys[i] >> 32), tid = (uint32_t)keys[i];
		const char *tn = hosts_thread_name(&e->hosts, pid, tid);
		char buf[128];

		if (i == 0 || pid != last) {
			hosts_proc_name(&e->hosts, pid, buf, sizeof(buf));
			put_meta(e, pid, NULL, "process_name", buf, 0);
			put_meta(e, pid, NULL, "process_sort_index", NULL, pid);
			last = pid;
		}
		if (!tn) {
			e->threads_unnamed++;
			snprintf(buf, sizeof(buf), "tid %u", tid);
			tn = buf;
		}
		put_meta(e, pid, &tid, "thread_name", tn, 0);
		put_meta(e, pid, &tid, "thread_sort_index", NULL, tid);
	}
	free(keys);
	return e->w->err;
}

/* v with thousands separators: "1,904". */
static const char *grouped(char *buf, size_t len, uint64_t v)
{
	char digits[24];
	int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v);
	size_t o = 0;

	for (int i = 0; i < n && o + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = 0;
	return buf;
}

/*
 * Says in words which names were lost and why: events written as "?"
 * because the ring's string table was full, threads shown as "tid N"
 * because its thread-name table was. Neither is a lost record.
 */
static void warn_names(struct exporter *e)
{
	const struct source_loss *l = &e->src.loss;
	const struct source_tables *t = &e->src.tables;
	char a[32], b[32], what[96];
	uint64_t bytes;
	uint32_t held;

	if (e->names_lost)
		snprintf(what, sizeof(what), "%s %s", grouped(a, sizeof(a), e->names_lost),
			 e->names_lost == 1 ? "span lost its name" : "spans lost their names");
	else
		snprintf(what, sizeof(what), "%s %s", grouped(a, sizeof(a), l->strings_dropped),
			 l->strings_dropped == 1 ? "string was not interned" : "strings were not interned");
	source_strings_used(&e->src, &held, &bytes);
	if (l->strings_dropped && t->max_strings && held < t->max_strings && t->string_bytes)
		/* room for more strings, not for their text */
		warnx_("%s: the ring's string table is out of text space (%s bytes); create the "
		       "ring with a larger --string-bytes", what, grouped(b, sizeof(b), t->string_bytes));
	else if (l->strings_dropped && t->max_strings)
		warnx_("%s: the ring's string table (%s) is full; create the ring with a larger "
		       "--strings", what, grouped(b, sizeof(b), t->max_strings));
	else if (l->strings_dropped)
		warnx_("%s: the ring's string table is full; create the ring with a larger --strings",
		       what);
	else if (e->names_lost)
		warnx_("%s: their name or category id is not one of the trace's strings "
		       "(shmtrace_intern() returned 0, or the id was never interned)", what);

	if (!l->names_dropped)
		return;
	if (e->threads_unnamed)
		snprintf(what, sizeof(what), "%s %s", grouped(a, sizeof(a), e->threads_unnamed),
			 e->threads_unnamed == 1 ? "thread lost its name" : "threads lost their names");
	else
		snprintf(what, sizeof(what), "%s thread %s not recorded",
			 grouped(a, sizeof(a), l->names_dropped),
			 l->names_dropped == 1 ? "name was" : "names were");
	if (t->max_threads)
		warnx_("%s: the ring's thread-name table (%s) is full; create the ring with a "
		       "larger --threads", what, grouped(b, sizeof(b), t->max_threads));
	else
		warnx_("%s: the ring's thread-name table is full; create the ring with a larger "
		       "--threads", what);
}

/* Makes the losses impossible to miss: instants at the start of the trace. */
static void put_loss(struct exporter *e)
{
	const struct source_loss *l = &e->src.loss;
	const struct {
		uint64_t n;
		const char *what;
	} v[] = {
		{ l->dropped, "records dropped (ring full)" },
		{ l->overwritten, "records overwritten before being read (overwrite mode)" },
		{ l->lock_timeouts, "records lost to lock timeouts" },
		{ l->torn, "torn records skipped" },
		{ e->names_lost, "spans exported as \"?\" (name or category unknown)" },
		{ l->strings_dropped, "strings not interned (string table full)" },
		{ l->names_dropped, "thread names dropped (thread-name table full)" },
		{ l->unaccounted, "records missing that no counter accounts for (a bug: please report it)" },
	};
	uint32_t zero = 0;
	bool any = false;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char name[160];

		if (!v[i].n)
			continue;
		snprintf(name, sizeof(name), "shmtrace: %llu %s", (unsigned long long)v[i].n, v[i].what);
		sep(e);
		jw_puts(e->w, "{\"ph\":\"i\",\"s\":\"g\",");
		put_where(e->w, 0, 0, e->first_ts);
		jw_puts(e->w, ",\"cat\":\"shmtrace\",\"name\":");
		jw_cstr(e->w, name);
		jw_puts(e->w, "}");
		any = true;
	}
	if (any) {
		put_meta(e, 0, NULL, "process_name", "shmtrace (loss)", 0);
		put_meta(e, 0, &zero, "thread_name", "loss", 0);
	}
	if (l->dropped || l->overwritten || l->lock_timeouts || l->torn)
		warnx_("records were lost: %llu dropped, %llu overwritten, %llu lock timeouts, "
		       "%llu torn", (unsigned long long)l->dropped,
		       (unsigned long long)l->overwritten, (unsigned long long)l->lock_timeouts,
		       (unsigned long long)l->torn);
	if (l->unaccounted)
		warnx_("%llu records are missing that no counter accounts for",
		       (unsigned long long)l->unaccounted);
	warn_names(e);
}

/* "inputs": every file (or the ring), "rings": the rings they come from. */
static void put_inputs(struct exporter *e)
{
	struct jw *w = e->w;
	const char *in;

	jw_puts(w, ",\"inputs\":[");
	for (size_t i = 0; (in = source_input(&e->src, i)); i++) {
		jw_puts(w, i ? "," : "");
		jw_cstr(w, in);
	}
	jw_puts(w, "],\"rings\":[");
	for (uint32_t i = 0; i < e->src.nrings; i++) {
		const char *name;
		uint64_t ring_id, run_id;
		char hex[20];

		if (source_ring_info(&e->src, i, &name, &ring_id, &run_id) < 0)
			break;
		jw_puts(w, i ? ",{\"name\":" : "{\"name\":");
		jw_cstr(w, name);
		if (e->src.nhosts > 1) {
			/* captures of several hosts: which ring is whose */
			jw_puts(w, ",\"host\":");
			jw_cstr(w, e->src.hosts[e->src.host_of[i]]);
		}
		/* hex strings: JSON numbers lose bits past 2^53 */
		jw_puts(w, ",\"ring_id\":");
		snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)ring_id);
		if (ring_id)
			jw_cstr(w, hex);
		else
			jw_puts(w, "null");
		if (run_id) {
			snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)run_id);
			jw_puts(w, ",\"run_id\":");
			jw_cstr(w, hex);
		}
		jw_puts(w, "}");
	}
	jw_puts(w, "]");
}

static void put_metadata(struct exporter *e)
{
	const struct source_loss *l = &e->src.loss;
	struct jw *w = e->w;
	/* realtime0 + (first_ts - mono0) in wrapping unsigned arithmetic:
	 * the same bits for sane inputs, no signed overflow for forged ones
	 * (found by fuzz_capture and fuzz_ring) */
	uint64_t wall = e->src.realtime0 + (e->first_ts - e->src.mono0);
	char iso[64];

	fmt_iso_ns(iso, sizeof(iso), wall);

	jw_puts(w, "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{\"shmtrace\":{\"version\":");
	jw_cstr(w, SHMTRACE_VERSION);
	jw_puts(w, ",\"source\":");
	jw_cstr(w, source_kind(&e->src));
	jw_puts(w, ",\"input\":");
	jw_cstr(w, e->src.name);
	put_inputs(e);
	jw_puts(w, ",\"clock\":");
	jw_cstr(w, e->src.clock_tsc ? "tsc" : "monotonic");
	jw_puts(w, ",\"records\":");
	jw_u64(w, e->events);
	jw_puts(w, ",\"flows\":");
	jw_u64(w, e->flows);
	jw_puts(w, ",\"flow_starts_moved\":");
	jw_u64(w, e->bind.moved);
	jw_puts(w, ",\"dropped\":");
	jw_u64(w, l->dropped);
	jw_puts(w, ",\"overwritten\":");
	jw_u64(w, l->overwritten);
	jw_puts(w, ",\"lock_timeouts\":");
	jw_u64(w, l->lock_timeouts);
	jw_puts(w, ",\"torn\":");
	jw_u64(w, l->torn);
	jw_puts(w, ",\"names_lost\":");
	jw_u64(w, e->names_lost);
	jw_puts(w, ",\"strings_dropped\":");
	jw_u64(w, l->strings_dropped);
	jw_puts(w, ",\"max_strings\":");
	jw_u64(w, e->src.tables.max_strings);
	jw_puts(w, ",\"string_bytes\":");
	jw_u64(w, e->src.tables.string_bytes);
	jw_puts(w, ",\"thread_names_dropped\":");
	jw_u64(w, l->names_dropped);
	jw_puts(w, ",\"threads_unnamed\":");
	jw_u64(w, e->threads_unnamed);
	jw_puts(w, ",\"max_threads\":");
	jw_u64(w, e->src.tables.max_threads);
	jw_puts(w, ",\"unaccounted\":");
	jw_u64(w, l->unaccounted);
	jw_puts(w, ",\"args\":");
	jw_u64(w, e->pend.args);
	jw_puts(w, ",\"args_lost\":");
	jw_u64(w, e->pend.lost);
	jw_puts(w, ",\"unfinished\":");
	jw_u64(w, e->unfinished);
	jw_puts(w, ",\"complete\":");
	jw_puts(w, e->src.cut || e->src.damaged ? "false" : "true");
	jw_puts(w, ",\"trace_start_ns\":");
	jw_u64(w, e->first_ts);
	jw_puts(w, ",\"trace_start_wall_ns\":");
	jw_u64(w, wall);
	jw_puts(w, ",\"trace_start\":");
	jw_cstr(w, iso);
	jw_puts(w, "}}}\n");
}

static int on_min_ts(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct exporter *e = ctx;

	(void)start_time;
	if (e->flt.npids && !wanted(e, r))
		return 0;
	if (!e->any || r->ts < e->t0)
		e->t0 = r->ts;
	if (!e->any || r->ts > e->t_end)
		e->t_end = r->ts;
	e->any = true;
	return 0;
}

/* The verification pass of bind_resolve(): the events on_record() wrote
 * as they came, again. */
struct rescan {
	struct exporter *e;
	char *err;
	size_t errlen;
};

static int on_rescan(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct exporter *e = ctx;

	if (!wanted(e, r) || (r->flow && r->commit != SHMTRACE_KIND_COUNTER))
		return 0;
	bind_seen(&e->bind, hosts_outpid(&e->hosts, r->pid, start_time, r->ts), r->tid, r->ts);
	return 0;
}

static int rescan(void *ctx)
{
	struct rescan *rs = ctx;
	int ret = source_records(&rs->e->src, on_rescan, rs->e, rs->err, rs->errlen);

	return ret < 0 ? ret : 0;
}

static int run_export(struct exporter *e, FILE *out, char *err, size_t errlen)
{
	struct rescan rs = { .e = e, .err = err, .errlen = errlen };

	int ret;

	ret = hosts_build(&e->hosts, &e->src);
	if (ret == -E2BIG)
		snprintf(err, errlen, "the inputs come from %u hosts; at most %u can be merged",
			 e->src.nhosts, HOSTS_MAX);
	if (ret < 0)
		return ret;
	if (e->flt.has_from || e->flt.has_to) {
		bool f = e->flt.has_from, t = e->flt.has_to;

		/* the window is relative to the earliest record: find it first */
		e->flt.has_from = e->flt.has_to = false;
		ret = source_records(&e->src, on_min_ts, e, err, errlen);
		if (ret < 0)
			return ret;
		e->flt.has_from = f;
		e->flt.has_to = t;
		/* an empty trace must not look like an idle one */
		if (f && e->any && e->flt.from > e->t_end - e->t0)
			warnx_("--from %.6f s is past the end of the trace (its last record "
			       "starts at %.6f s); the output has no events",
			       (double)e->flt.from / 1e9, (double)(e->t_end - e->t0) / 1e9);
		e->any = false;
	}
	jw_init(e->w, out);
	jw_puts(e->w, "{\"traceEvents\":[");
	ret = source_records(&e->src, on_record, e, err, errlen);
	if (ret == 0)
		ret = put_pending(e);
	if (ret == 0)
		ret = put_open(e);
	if (e->progress && e->events >= PROGRESS_EVERY)
		fputs("\r\033[K", stderr);
	if (e->w->err) {
		/* a write error, not the input's: say so */
		err[0] = 0;
		return e->w->err;
	}
	if (ret < 0)
		return ret;
	/* each flow's slice the only event of its thread at its start */
	ret = bind_resolve(&e->bind, e->fl.v, e->fl.n, rescan, &rs);
	if (ret < 0)
		return ret;
	ret = flows_assemble(&e->fl, on_flow, e, &e->flows);
	if (e->w->err) {
		err[0] = 0;
		return e->w->err;
	}
	if (ret < 0)
		return ret;
	ret = put_names(e);
	if (ret < 0)
		return ret;
	put_loss(e);
	put_metadata(e);
	return jw_flush(e->w);
}

/* N, Nk or NM (binary). */
static int parse_size(const char *arg, uint64_t *v)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(arg, &end, 10);
	if (errno || end == arg || n > (1ull << 40))
		return -EINVAL;
	if (*end == 'k' || *end == 'K')
		n <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		n <<= 20, end++;
	if (*end)
		return -EINVAL;
	*v = n;
	return 0;
}

/* HOST=NS, NS a signed integer of nanoseconds. */
static int parse_offset(const char *arg, char *host, size_t hostlen, int64_t *ns)
{
	const char *eq = strrchr(arg, '=');
	char *end;
	long long v;

	if (!eq || eq == arg || (size_t)(eq - arg) >= hostlen || !eq[1])
		return -EINVAL;
	errno = 0;
	v = strtoll(eq + 1, &end, 10);
	if (errno || *end)
		return -EINVAL;
	memcpy(host, arg, (size_t)(eq - arg));
	host[eq - arg] = 0;
	*ns = v;
	return 0;
}

#define MAX_OFFSETS 16

/* What export's own options set. */
struct export_opts {
	struct otlp_opts oo;
	bool otlp;
	char offhost[MAX_OFFSETS][64];
	int64_t offns[MAX_OFFSETS];
	size_t noff;
};

static int export_option(void *ctx, int c, const char *arg)
{
	struct export_opts *x = ctx;

	switch (c) {
	case 'f':
		if (!strcmp(arg, "otlp"))
			x->otlp = true;
		else if (strcmp(arg, "chrome"))
			return cli_usage_error("export", "unknown format '%s' (chrome or otlp)", arg);
		return 0;
	case 'E':
		x->oo.endpoint = arg;
		return 0;
	case 'S':
		x->oo.service = arg;
		return 0;
	case 'L':
		x->oo.flows_only = true;
		return 0;
	case 'B': {
		uint64_t v;

		if (parse_size(arg, &v) < 0 || v < (64u << 10) || v > (64u << 20))
			return cli_usage_error("export", "bad --batch-size '%s' (64k..64M)", arg);
		x->oo.batch_bytes = (size_t)v;
		return 0;
	}
	case 'R': {
		char *end;
		unsigned long v = strtoul(arg, &end, 10);

		if (*end || end == arg || v < 1 || v > 100)
			return cli_usage_error("export", "bad --retries '%s' (1..100)", arg);
		x->oo.retries = (unsigned)v;
		return 0;
	}
	case 'C':
		if (x->noff == MAX_OFFSETS ||
		    parse_offset(arg, x->offhost[x->noff], sizeof(x->offhost[0]), &x->offns[x->noff]) < 0)
			return cli_usage_error("export", "bad --clock-offset '%s' (HOST=NS, at most %d)",
					       arg, MAX_OFFSETS);
		x->noff++;
		return 0;
	default:
		return cli_usage_error("export", "unknown option");
	}
}

/* Says how the inputs' clocks are joined; returns 0 or EXIT_RUNTIME. */
static int export_clocks(struct exporter *e, const struct export_opts *x)
{
	for (size_t i = 0; i < x->noff; i++)
		if (source_clock_offset(&e->src, x->offhost[i], x->offns[i]) < 0)
			return cli_runtime_error("export", "--clock-offset: no input comes from host '%s'",
						 x->offhost[i]);
	if (e->src.nhosts > 1)
		fprintf(stderr, "shmtrace export: the inputs come from %u hosts; their times are "
			"aligned by each capture's wall clock\n", e->src.nhosts);
	else if (e->src.nrings > 1)
		/* not an error (two runs side by side is a fair thing to
		 * look at), but flows and names are kept apart per ring */
		fprintf(stderr, "shmtrace export: the inputs come from %u different rings; "
			"flows are joined only within a ring, or by a global flow id\n",
			e->src.nrings);
	return 0;
}

/* The Chrome JSON export proper, once the source is open. */
static int export_chrome(struct exporter *e, struct cmd *c)
{
	char err[768];
	int ret, rc;

	if ((rc = cmd_create(c)) != 0)
		return rc;
	e->progress = isatty(STDERR_FILENO);
	flows_init(&e->fl);
	u64map_init(&e->seen);
	err[0] = 0;
	ret = bind_init(&e->bind);
	if (ret == 0)
		ret = run_export(e, c->f, err, sizeof(err));
	rc = cmd_finish(c, ret, err);
	if (rc == EXIT_OK && (e->src.cut || e->src.damaged))
		fprintf(stderr, "shmtrace export: %s written from an incomplete capture (see above)\n",
			c->out);
	flows_free(&e->fl);
	bind_free(&e->bind);
	free(e->fcat);
	args_store_free(&e->fargs);
	open_free(&e->open);
	u64map_free(&e->seen);
	hosts_free(&e->hosts);
	return rc;
}

int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "otlp-endpoint", required_argument, NULL, 'E' },
		{ "service", required_argument, NULL, 'S' },
		{ "flows-only", no_argument, NULL, 'L' },
		{ "batch-size", required_argument, NULL, 'B' },
		{ "retries", required_argument, NULL, 'R' },
		{ "clock-offset", required_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 },
	};
	struct exporter *e = calloc(1, sizeof(*e));
	struct export_opts *x = calloc(1, sizeof(*x));
	struct cmd c = {
		.name = "export", .usage = export_usage, .shortopts = "f:", .longopts = opts,
		.option = export_option, .ctx = x,
	};
	int rc;

	if (!e || !x || !(e->w = malloc(sizeof(*e->w)))) {
		free(e);
		free(x);
		return cli_runtime_error("export", "out of memory");
	}
	x->oo.batch_bytes = OTLP_BATCH_DEFAULT;
	x->oo.retries = OTLP_RETRIES_DEFAULT;
	c.flt = &e->flt;
	c.src = &e->src;
	rc = cmd_parse(&c, argc, argv);
	if (rc != CMD_CONTINUE)
		goto done;
	if (!x->otlp && (x->oo.endpoint || x->oo.service || x->oo.flows_only)) {
		rc = cli_usage_error("export", "--otlp-endpoint, --service and --flows-only need --format otlp");
		goto done;
	}
	rc = cmd_open(&c, x->otlp && x->oo.endpoint ? NULL : "use -o FILE, or -o - for stdout");
	if (rc)
		goto done;
	rc = export_clocks(e, x);
	if (rc == 0 && x->otlp) {
		x->oo.flt = &e->flt;
		x->oo.progress = isatty(STDERR_FILENO);
		rc = otlp_export(&e->src, &x->oo, c.out);
	} else if (rc == 0) {
		rc = export_chrome(e, &c);
	}
	source_close(&e->src);
done:
	free(e->w);
	free(e);
	free(x);
	return rc;
}
