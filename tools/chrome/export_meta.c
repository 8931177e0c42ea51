/* SPDX-License-Identifier: MIT */
/*
 * export_meta.c - what a Chrome Trace JSON export says about itself: the
 * losses (instants at its start, and warnings in words) and the closing
 * metadata object (inputs, rings, counters, the trace's start).
 */
#include <stdio.h>
#include <string.h>

#include "export_int.h"
#include "fmt.h"

/* One loss instant at the start of the trace (source_loss_lines()). */
static void put_loss(void *ctx, const char *line)
{
	struct exporter *e = ctx;

	export_sep(e);
	jw_puts(e->w, "{\"ph\":\"i\",\"s\":\"g\",");
	export_where(e->w, 0, 0, e->first_ts);
	jw_puts(e->w, ",\"cat\":\"shmtrace\",\"name\":");
	jw_cstr(e->w, line);
	jw_puts(e->w, "}");
}

/* A snapshot among the inputs, in words: an instant where it was
 * triggered (source_snapshot_lines()). */
static void put_snapshot(void *ctx, uint64_t ts, const char *line)
{
	struct exporter *e = ctx;

	export_sep(e);
	jw_puts(e->w, "{\"ph\":\"i\",\"s\":\"g\",");
	export_where(e->w, 0, 0, ts);
	jw_puts(e->w, ",\"cat\":\"shmtrace\",\"name\":");
	jw_cstr(e->w, line);
	jw_puts(e->w, "}");
}

/* Makes the losses impossible to miss: instants at the start of the trace
 * (and a snapshot's, which says what its copy lost, where it was taken). */
void export_loss(struct exporter *e)
{
	uint32_t zero = 0;

	if (source_loss_lines(&e->src->loss, e->names_lost, put_loss, e) +
	    source_snapshot_lines(e->src, put_snapshot, e)) {
		export_meta_event(e, 0, NULL, "process_name", "shmtrace (loss)", 0);
		export_meta_event(e, 0, &zero, "thread_name", "loss", 0);
	}
	/* the input's losses are every piece's: said once, by the first */
	if (e->pick->split_ns && e->pick->piece)
		return;
	source_warn_lost(&e->src->loss);
	source_warn_names(e->src, e->names_lost, "event", e->threads_unnamed);
}

/* "inputs": every file (or the ring), "rings": the rings they come from. */
static void put_inputs(struct exporter *e)
{
	struct jw *w = e->w;
	const char *in;

	jw_puts(w, ",\"inputs\":[");
	for (size_t i = 0; (in = source_input(e->src, i)); i++) {
		jw_puts(w, i ? "," : "");
		jw_cstr(w, in);
	}
	jw_puts(w, "],\"rings\":[");
	for (uint32_t i = 0; i < e->src->nrings; i++) {
		const char *name;
		uint64_t ring_id, run_id;
		char hex[20];

		if (source_ring_info(e->src, i, &name, &ring_id, &run_id) < 0)
			break;
		jw_puts(w, i ? ",{\"name\":" : "{\"name\":");
		jw_cstr(w, name);
		if (e->src->nhosts > 1) {
			/* captures of several hosts: which ring is whose */
			jw_puts(w, ",\"host\":");
			jw_cstr(w, e->src->hosts[e->src->host_of[i]]);
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

struct count {
	const char *name;
	uint64_t n;
};

/* ,"name":n */
static void put_count(struct jw *w, const char *name, uint64_t n)
{
	jw_puts(w, ",\"");
	jw_puts(w, name);
	jw_puts(w, "\":");
	jw_u64(w, n);
}

/* ,"name":null: a counter found corrupt, which is no count, or a time
 * there is none of */
static void put_null(struct jw *w, const char *name)
{
	jw_puts(w, ",\"");
	jw_puts(w, name);
	jw_puts(w, "\":null");
}

/* put_count() for each of v, up to the one without a name. */
static void put_counts(struct jw *w, const struct count *v)
{
	for (; v->name; v++)
		put_count(w, v->name, v->n);
}

/* ,"name":["...",...] */
static void put_strings(struct jw *w, const char *name, char *const *v, size_t n)
{
	jw_puts(w, ",\"");
	jw_puts(w, name);
	jw_puts(w, "\":[");
	for (size_t i = 0; i < n; i++) {
		jw_puts(w, i ? "," : "");
		jw_cstr(w, v[i]);
	}
	jw_puts(w, "]");
}

/* ,"missing_parts":[...],"missing_records":N,"deleted_parts":N,
 * "deleted_records":N,"missing_why":[...]: parts of a rotated capture not
 * among the inputs (source_parts.c), the records they hold where the
 * parts present tell, those of them their collector deleted for
 * --max-files, and why, in words; nothing when none is missing. */
static void put_missing(struct exporter *e)
{
	const struct source *s = e->src;

	if (!s->nmissing_parts && !s->nmissing_why)
		return;
	put_strings(e->w, "missing_parts", s->missing_parts, s->nmissing_parts);
	put_counts(e->w, (const struct count[]){
		{ "missing_records", s->loss.missing },
		{ "deleted_parts", s->deleted_parts },
		{ "deleted_records", s->loss.deleted },
		{ NULL, 0 },
	});
	put_strings(e->w, "missing_why", s->missing_why, s->nmissing_why);
}

/* ,"snapshots":[{...}]: the snapshots among the inputs (a live ring's
 * copy: why, its window, what the copy lost); nothing when none is. */
static void put_snapshots(struct exporter *e)
{
	const struct source *s = e->src;
	struct jw *w = e->w;

	if (!s->nsnaps)
		return;
	jw_puts(w, ",\"snapshots\":[");
	for (size_t i = 0; i < s->nsnaps; i++) {
		const struct source_snapshot *sn = &s->snaps[i];

		jw_puts(w, i ? ",{\"ring\":" : "{\"ring\":");
		jw_cstr(w, sn->ring);
		jw_puts(w, ",\"cause\":");
		jw_cstr(w, sn->cause);
		jw_puts(w, ",\"trigger\":");
		jw_cstr(w, sn->trigger);
		put_counts(w, (const struct count[]){
			{ "trigger_ns", sn->trigger_ns },
			{ "trigger_pid", sn->trigger_pid },
			{ "trigger_tid", sn->trigger_tid },
			{ "first_seq", sn->first_seq },
			{ "end_seq", sn->end_seq },
			{ NULL, 0 },
		});
		/* a snapshot that holds no record has no start */
		if (sn->from_ns)
			put_count(w, "from_ns", sn->from_ns);
		else
			put_null(w, "from_ns");
		put_counts(w, (const struct count[]){
			{ "to_ns", sn->to_ns },
			{ "overwritten_during_copy", sn->overwritten },
			{ "staged", sn->staged },
			{ "triggers", sn->triggers },
			{ "triggers_suppressed", sn->suppressed },
			{ "cut", sn->cut },
			{ NULL, 0 },
		});
		jw_puts(w, "}");
	}
	jw_puts(w, "]");
}

/* ,"piece":{...}: which piece of a split this is, and its window, in ns
 * relative to the earliest record (origin_ns, on the trace's clock) as
 * --from and --to take them; nothing when not split. */
static void put_piece(struct exporter *e)
{
	const struct pick *p = e->pick;
	uint64_t to = p->lo + p->split_ns;

	if (!p->split_ns)
		return;
	jw_puts(e->w, ",\"piece\":{\"index\":");
	jw_u64(e->w, p->piece);
	put_counts(e->w, (const struct count[]){
		{ "count", p->npieces },
		{ "from_ns", p->lo },
		/* the last piece also holds what starts after its end */
		{ "to_ns", to >= p->lo ? to : UINT64_MAX },
		{ "origin_ns", p->t0 },
		{ NULL, 0 },
	});
	jw_puts(e->w, "}");
}

void export_metadata(struct exporter *e)
{
	const struct source_loss *l = &e->src->loss;
	struct jw *w = e->w;
	/* realtime0 + (first_ts - mono0) in wrapping unsigned arithmetic:
	 * the same bits for sane inputs, no signed overflow for forged ones
	 * (found by fuzz_capture and fuzz_ring) */
	uint64_t wall = e->src->realtime0 + (e->first_ts - e->src->mono0);
	char iso[64];

	fmt_iso_ns(iso, sizeof(iso), wall);

	jw_puts(w, "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{\"shmtrace\":{\"version\":");
	jw_cstr(w, SHMTRACE_VERSION);
	jw_puts(w, ",\"source\":");
	jw_cstr(w, source_kind(e->src));
	jw_puts(w, ",\"input\":");
	jw_cstr(w, e->src->name);
	put_inputs(e);
	jw_puts(w, ",\"clock\":");
	jw_cstr(w, e->src->clock_tsc ? "tsc" : "monotonic");
	put_counts(w, (const struct count[]){
		{ "records", e->events },
		{ "flows", e->flows },
		{ "flow_starts_moved", e->bind.moved },
		{ NULL, 0 },
	});
	/* the loss counters as loss.h's table names them, and their sum in
	 * records (lock_timeouts, attempts, is not in it) */
	for (size_t i = 0; i < SHMT_LOSS_NKINDS; i++) {
		if (l->corrupt)
			put_null(w, shmt_loss_kinds[i].name);
		else
			put_count(w, shmt_loss_kinds[i].name,
				  shmt_loss_get(&l->counters, &shmt_loss_kinds[i]));
	}
	/* counters that cannot be true: null, and said in words */
	if (l->corrupt) {
		put_null(w, "records_lost");
		put_null(w, "unaccounted");
		jw_puts(w, ",\"counters_corrupt\":true,\"counters_corrupt_why\":");
		jw_cstr(w, l->corrupt_why);
	} else {
		put_count(w, "records_lost", shmt_loss_records(&l->counters));
		put_count(w, "unaccounted", l->unaccounted);
	}
	put_counts(w, (const struct count[]){
		{ "names_lost", e->names_lost },
		{ "max_strings", e->src->tables.max_strings },
		{ "string_bytes", e->src->tables.string_bytes },
		{ "threads_unnamed", e->threads_unnamed },
		{ "max_threads", e->src->tables.max_threads },
		{ "args", e->pend.args },
		{ "args_lost", e->pend.lost },
		{ "unfinished", e->unfinished },
		{ "triggers", e->triggers },
		{ NULL, 0 },
	});
	put_missing(e);
	put_snapshots(e);
	put_piece(e);
	jw_puts(w, ",\"complete\":");
	jw_puts(w, source_complete(e->src) ? "true" : "false");
	/* the first record's time: none without a record, not the clock's 0
	 * (the machine's boot) */
	if (e->any) {
		put_count(w, "trace_start_ns", e->first_ts);
		put_count(w, "trace_start_wall_ns", wall);
		jw_puts(w, ",\"trace_start\":");
		jw_cstr(w, iso);
	} else {
		put_null(w, "trace_start_ns");
		put_null(w, "trace_start_wall_ns");
		put_null(w, "trace_start");
	}
	jw_puts(w, "}}}\n");
}
