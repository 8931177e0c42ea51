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
	const struct source_loss *l = &e->src->loss;
	const struct source_tables *t = &e->src->tables;
	char a[32], b[32], what[96];
	uint64_t bytes;
	uint32_t held;

	/* counters found corrupt are no counts (source.c said so once) */
	if (l->corrupt && !e->names_lost)
		return;
	if (e->names_lost)
		snprintf(what, sizeof(what), "%s %s", grouped(a, sizeof(a), e->names_lost),
			 e->names_lost == 1 ? "span lost its name" : "spans lost their names");
	else
		snprintf(what, sizeof(what), "%s %s", grouped(a, sizeof(a), l->strings_dropped),
			 l->strings_dropped == 1 ? "string was not interned" : "strings were not interned");
	source_strings_used(e->src, &held, &bytes);
	if (l->strings_dropped && t->max_strings && held < t->max_strings && t->string_bytes)
		/* room for more strings, not for their text */
		source_warnx("%s: the ring's string table is out of text space (%s bytes); create the "
		       "ring with a larger --string-bytes", what, grouped(b, sizeof(b), t->string_bytes));
	else if (l->strings_dropped && t->max_strings)
		source_warnx("%s: the ring's string table (%s) is full; create the ring with a larger "
		       "--strings", what, grouped(b, sizeof(b), t->max_strings));
	else if (l->strings_dropped)
		source_warnx("%s: the ring's string table is full; create the ring with a larger --strings",
		       what);
	else if (e->names_lost)
		source_warnx("%s: their name or category id is not one of the trace's strings "
		       "(shmtrace_intern() returned 0, or the id was never interned)", what);

	if (l->corrupt || !l->names_dropped)
		return;
	if (e->threads_unnamed)
		snprintf(what, sizeof(what), "%s %s", grouped(a, sizeof(a), e->threads_unnamed),
			 e->threads_unnamed == 1 ? "thread lost its name" : "threads lost their names");
	else
		snprintf(what, sizeof(what), "%s thread %s not recorded",
			 grouped(a, sizeof(a), l->names_dropped),
			 l->names_dropped == 1 ? "name was" : "names were");
	if (t->max_threads)
		source_warnx("%s: the ring's thread-name table (%s) is full; create the ring with a "
		       "larger --threads", what, grouped(b, sizeof(b), t->max_threads));
	else
		source_warnx("%s: the ring's thread-name table is full; create the ring with a larger "
		       "--threads", what);
}

/* Makes the losses impossible to miss: instants at the start of the trace. */
void export_loss(struct exporter *e)
{
	const struct source_loss *l = &e->src->loss;
	/* loss.h's kinds, each in its own words, then the exporter's own */
	struct {
		uint64_t n;
		const char *what;
	} v[SHMT_LOSS_NKINDS + 3];
	size_t nv = 0;
	uint32_t zero = 0;
	bool any = false;

	/* counters that cannot be true are no counts: one instant says so */
	for (size_t i = 0; i < SHMT_LOSS_NKINDS && !l->corrupt; i++, nv++) {
		v[nv].n = shmt_loss_get(&l->counters, &shmt_loss_kinds[i]);
		v[nv].what = shmt_loss_kinds[i].words;
	}
	v[nv].n = e->names_lost;
	v[nv++].what = "spans exported as \"?\" (name or category unknown)";
	v[nv].n = l->corrupt ? 0 : l->unaccounted;
	v[nv++].what = "records missing that no counter accounts for (a bug: please report it)";
	v[nv].n = l->corrupt;
	v[nv++].what = NULL;
	for (size_t i = 0; i < nv; i++) {
		char name[256];

		if (!v[i].n)
			continue;
		if (!v[i].what)
			snprintf(name, sizeof(name), "shmtrace: loss counters corrupt (%s): not reported",
				 l->corrupt_why);
		else
			snprintf(name, sizeof(name), "shmtrace: %llu %s", (unsigned long long)v[i].n,
				 v[i].what);
		export_sep(e);
		jw_puts(e->w, "{\"ph\":\"i\",\"s\":\"g\",");
		export_where(e->w, 0, 0, e->first_ts);
		jw_puts(e->w, ",\"cat\":\"shmtrace\",\"name\":");
		jw_cstr(e->w, name);
		jw_puts(e->w, "}");
		any = true;
	}
	if (any) {
		export_meta_event(e, 0, NULL, "process_name", "shmtrace (loss)", 0);
		export_meta_event(e, 0, &zero, "thread_name", "loss", 0);
	}
	source_warn_lost(l);
	warn_names(e);
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

/* ,"name":null: a counter found corrupt, which is no count */
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
		{ NULL, 0 },
	});
	put_missing(e);
	jw_puts(w, ",\"complete\":");
	jw_puts(w, source_complete(e->src) ? "true" : "false");
	jw_puts(w, ",\"trace_start_ns\":");
	jw_u64(w, e->first_ts);
	jw_puts(w, ",\"trace_start_wall_ns\":");
	jw_u64(w, wall);
	jw_puts(w, ",\"trace_start\":");
	jw_cstr(w, iso);
	jw_puts(w, "}}}\n");
}
