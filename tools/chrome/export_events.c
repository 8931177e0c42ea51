/* SPDX-License-Identifier: MIT */
/*
 * export_events.c - the events of a Chrome Trace JSON export: spans,
 * instants, counters and open spans as they stream from the source, and
 * the metadata events that name processes and threads.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "export_int.h"

void export_sep(struct exporter *e)
{
	jw_puts(e->w, e->sep ? ",\n" : "\n");
	e->sep = true;
}

void export_str_id(struct exporter *e, uint32_t id)
{
	size_t len;
	const char *s = source_string(e->src, id, &len);

	jw_str(e->w, s, len);
}

/* "pid":P,"tid":T,"ts":TS */
void export_where(struct jw *w, uint32_t pid, uint32_t tid, uint64_t ts)
{
	jw_puts(w, "\"pid\":");
	jw_u64(w, pid);
	jw_puts(w, ",\"tid\":");
	jw_u64(w, tid);
	jw_puts(w, ",\"ts\":");
	jw_us(w, ts);
}

bool export_wanted(struct exporter *e, const struct shmt_record *r)
{
	return pick_record(e->pick, r, e->src->ring, &e->pass);
}

/* ,"args":{...} of a span or instant: its arguments, "unfinished":true
 * for a span its thread never ended, "receives":true for the step of a
 * flow that receives (flow_split_receiving(): the instant at the end of a
 * receiving span). */
static void put_args(struct exporter *e, const struct ev_args *a, bool unfinished,
		     bool receives)
{
	struct jw *w = e->w;
	uint32_t n = a ? a->n : 0;

	if (!n && !unfinished && !receives)
		return;
	jw_puts(w, ",\"args\":{");
	for (uint32_t i = 0; i < n; i++) {
		if (i)
			jw_puts(w, ",");
		export_str_id(e, a->a[i].key);
		jw_puts(w, ":");
		if (a->a[i].type == SHMTRACE_ARG_STR) {
			export_str_id(e, a->a[i].value <= UINT16_MAX ? (uint32_t)a->a[i].value : 0);
		} else if (a->a[i].type == SHMTRACE_ARG_TEXT) {
			size_t len;
			const char *t = args_text(&e->fargs, a, i, &len);

			jw_str(w, t ? t : "?", t ? len : 1);
		} else {
			jw_i64(w, (int64_t)a->a[i].value);
		}
	}
	if (unfinished)
		jw_puts(w, n++ ? ",\"unfinished\":true" : "\"unfinished\":true");
	if (receives)
		jw_puts(w, n ? ",\"receives\":true" : "\"receives\":true");
	jw_puts(w, "}");
}

/* Writes one record as an event, under category cat[0..catlen). */
void export_event(struct exporter *e, uint32_t kind, uint32_t pid, uint32_t tid, uint64_t ts,
		      uint64_t dur, const char *cat, size_t catlen, uint32_t name,
		      const struct ev_args *a, bool receives)
{
	struct jw *w = e->w;

	export_sep(e);
	switch (kind) {
	case SHMTRACE_KIND_OPEN:
	case SHMTRACE_KIND_SPAN:
		jw_puts(w, "{\"ph\":\"X\",");
		export_where(w, pid, tid, ts);
		jw_puts(w, ",\"dur\":");
		jw_us(w, dur);
		break;
	case SHMTRACE_KIND_INSTANT:
		jw_puts(w, "{\"ph\":\"i\",\"s\":\"t\",");
		export_where(w, pid, tid, ts);
		break;
	default:
		jw_puts(w, "{\"ph\":\"C\",");
		export_where(w, pid, tid, ts);
		break;
	}
	jw_puts(w, ",\"cat\":");
	jw_str(w, cat, catlen);
	jw_puts(w, ",\"name\":");
	export_str_id(e, name);
	if (kind == SHMTRACE_KIND_COUNTER) {
		jw_puts(w, ",\"args\":{");
		export_str_id(e, name);
		jw_puts(w, ":");
		jw_i64(w, (int64_t)dur);
		jw_puts(w, "}");
	} else {
		put_args(e, a, kind == SHMTRACE_KIND_OPEN, receives);
	}
	jw_puts(w, "}");
}

/* An event whose name or category is not a known string is written as
 * "?": its string did not fit the ring's table (or never was interned). */
void export_count_names(struct exporter *e, uint32_t name, uint32_t cat)
{
	if (!source_has_string(e->src, name) || !source_has_string(e->src, cat))
		e->names_lost++;
}

bool export_streams(const struct shmt_record *r)
{
	return !shmt_record_attached(r) && (!shmt_record_in_flow(r) || flow_receiving_span(r));
}

/* Writes one record as it comes (export_streams()): where it starts is
 * taken. */
static int stream_record(struct exporter *e, const struct shmt_record *r, uint32_t pid,
			 const struct ev_args *a)
{
	size_t len;
	const char *cat = source_string(e->src, r->cat, &len);

	export_count_names(e, r->name, r->cat);
	bind_note(&e->bind, pid, r->tid, r->ts);
	export_event(e, shmt_record_kind(r), pid, r->tid, r->ts, r->dur, cat, len, r->name, a,
		     false);
	return e->w->err;
}

/* Writes (or keeps for its flow) one span, instant or open span. */
/* ring: the source's index of the ring r comes from (flow ids are per ring) */
static int put_record(struct exporter *e, const struct shmt_record *r, uint32_t pid,
		      const struct ev_args *a, uint32_t ring)
{
	struct shmt_record span, mark;
	struct flow_ev fe;
	int ret;

	if (flow_split_receiving(r, &span, &mark)) {
		/* the span as it comes, its step an instant at its end */
		if ((ret = stream_record(e, &span, pid, a)) != 0)
			return ret;
		r = &mark;
		a = NULL;
	} else if (!shmt_record_in_flow(r)) {
		return stream_record(e, r, pid, a);
	}
	/* written with its flow at the end, when the flow's category is known */
	fe = flow_ev_of(r, ring, pid);
	ret = args_keep(&e->fargs, a, &fe.args);
	if (ret < 0)
		return ret;
	return flows_add(&e->fl, &fe);
}

/* The held-back event, now that no more of its arguments can come. */
int export_pending(struct exporter *e)
{
	struct args_pend *p = &e->pend;

	if (!args_take(p))
		return 0;
	return put_record(e, &p->r, p->pid, &p->a, p->ring);
}

/* A trigger (shmtrace_trigger()): an instant "trigger: NAME" of its
 * thread, its name in its args. */
static int put_trigger(struct exporter *e, const struct shmt_record *r, uint32_t pid)
{
	char label[SOURCE_TRIGGER_LABEL_MAX];
	size_t len, nlen;
	const char *name = source_string(e->src, r->name, &nlen);

	source_trigger_label(e->src, r, label, sizeof(label), &len);
	export_count_names(e, r->name, r->name);
	bind_note(&e->bind, pid, r->tid, r->ts);
	e->triggers++;
	export_sep(e);
	jw_puts(e->w, "{\"ph\":\"i\",\"s\":\"t\",");
	export_where(e->w, pid, r->tid, r->ts);
	jw_puts(e->w, ",\"cat\":\"shmtrace\",\"name\":");
	jw_str(e->w, label, len);
	jw_puts(e->w, ",\"args\":{\"trigger\":");
	jw_str(e->w, name, nlen);
	jw_puts(e->w, "}}");
	return e->w->err;
}

int export_on_record(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct exporter *e = ctx;
	uint32_t pid;
	int ret;

	if (!export_wanted(e, r)) {
		/* its arguments are not wanted either */
		if (!shmt_record_attached(r) && (ret = export_pending(e)) != 0)
			return ret;
		return 0;
	}
	if (shmt_record_attached(r))
		return args_on_arg(&e->pend, &e->fargs, r, e->src->follows);
	if ((ret = export_pending(e)) != 0)
		return ret;
	pid = hosts_outpid(&e->hosts, r->pid, start_time, r->ts);
	/* the thread's last moment and the trace's, for open spans' ends (args.h) */
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

	switch (shmt_record_kind(r)) {
	case SHMTRACE_KIND_OPEN:
		return open_add(&e->open, &e->fargs, r, pid, e->src->ring,
				source_open_args(e->src));
	case SHMTRACE_KIND_SPAN:
	case SHMTRACE_KIND_INSTANT:
		args_hold(&e->pend, r, pid, e->src->ring, 0);
		return 0;
	case SHMTRACE_KIND_TRIGGER:
		return put_trigger(e, r, pid);
	default:
		return put_record(e, r, pid, NULL, e->src->ring);
	}
}

/* Open spans, after the pass, with the arguments they had: each ends
 * where its thread was last seen in it, or with the trace (args.h), so
 * the spans a thread died in nest as they were. */
int export_open_spans(struct exporter *e)
{
	struct open_ev oe;
	struct shmt_record r;
	int ret = open_spans_rewind(&e->open);

	while (ret == 0 && (ret = open_spans_next(&e->open, &e->seen, &oe, &r)) == 1) {
		const struct ev_args *a = open_args(&oe);

		e->unfinished++;
		e->pend.args += a ? a->n : 0;
		ret = put_record(e, &r, oe.pid, a, oe.ring);
	}
	return ret;
}

void export_meta_event(struct exporter *e, uint32_t pid, const uint32_t *tid, const char *what,
		     const char *name, uint64_t sort_index)
{
	struct jw *w = e->w;

	export_sep(e);
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
int export_names(struct exporter *e)
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
			export_meta_event(e, pid, NULL, "process_name", buf, 0);
			export_meta_event(e, pid, NULL, "process_sort_index", NULL, pid);
			last = pid;
		}
		if (!tn) {
			e->threads_unnamed++;
			snprintf(buf, sizeof(buf), "tid %u", tid);
			tn = buf;
		}
		export_meta_event(e, pid, &tid, "thread_name", tn, 0);
		export_meta_event(e, pid, &tid, "thread_sort_index", NULL, tid);
	}
	free(keys);
	return e->w->err;
}
