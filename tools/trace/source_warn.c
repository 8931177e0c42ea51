/* SPDX-License-Identifier: MIT */
/*
 * source_warn.c - the tools' warnings on stderr, and the ones every export
 * of a source gives about the records and names it lost, and the lines its
 * trace shows them in, in one wording whatever the output format.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "source.h"
#include "term.h"

void source_warnx(const char *fmt, ...)
{
	char msg[2048], esc[TERM_ESC_MAX(2048)];
	va_list ap;

	/* warnings quote names from rings and captures: escaped, never raw */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	term_escape(msg, strlen(msg), esc, sizeof(esc));
	fprintf(stderr, "shmtrace: warning: %s\n", esc);
}

void source_warn_lost(const struct source_loss *l)
{
	uint64_t lost = shmt_loss_records(&l->counters);
	char what[512];
	size_t n = 0;

	/* each record lost is counted once, under its cause; lock timeouts
	 * are attempts, said apart and never added to the records (the
	 * names and strings tables have their own warnings); counters that
	 * cannot be true were said to be corrupt, and are no counts */
	if (l->corrupt)
		return;
	what[0] = 0;
	for (size_t i = 0; i < SHMT_LOSS_NKINDS; i++) {
		const struct shmt_loss_kind *k = &shmt_loss_kinds[i];
		uint64_t v = shmt_loss_get(&l->counters, k);
		int r;

		if (!v || k->unit != SHMT_LOSS_RECORDS || n >= sizeof(what))
			continue;
		r = snprintf(what + n, sizeof(what) - n, "%s%llu %s", n ? ", " : "",
			     (unsigned long long)v, k->words);
		n += r > 0 ? (size_t)r : 0;
	}
	if (lost)
		source_warnx("%llu records were lost: %s", (unsigned long long)lost, what);
	for (size_t i = 0; i < SHMT_LOSS_NKINDS; i++) {
		const struct shmt_loss_kind *k = &shmt_loss_kinds[i];
		uint64_t v = shmt_loss_get(&l->counters, k);

		if (v && k->unit == SHMT_LOSS_ATTEMPTS)
			source_warnx("%llu %s", (unsigned long long)v, k->words);
	}
	if (l->unaccounted)
		source_warnx("%llu records are missing that no counter accounts for",
		       (unsigned long long)l->unaccounted);
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

/* Which names were lost and why (source.h). */
void source_warn_names(const struct source *s, uint64_t names_lost, const char *kind,
		       uint64_t threads_unnamed)
{
	const struct source_loss *l = &s->loss;
	const struct source_tables *t = &s->tables;
	char a[32], b[32], what[96];
	uint64_t bytes;
	uint32_t held;

	/* counters found corrupt are no counts (source.c said so once) */
	if (l->corrupt && !names_lost)
		return;
	if (names_lost)
		snprintf(what, sizeof(what), "%s %s%s", grouped(a, sizeof(a), names_lost), kind,
			 names_lost == 1 ? " lost its name" : "s lost their names");
	else
		snprintf(what, sizeof(what), "%s %s", grouped(a, sizeof(a), l->strings_dropped),
			 l->strings_dropped == 1 ? "string was not interned" : "strings were not interned");
	source_strings_used(s, &held, &bytes);
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
	else if (names_lost)
		source_warnx("%s: their name or category id is not one of the trace's strings "
		       "(shmtrace_intern() returned 0, or the id was never interned)", what);

	if (l->corrupt || !l->names_dropped)
		return;
	if (threads_unnamed)
		snprintf(what, sizeof(what), "%s %s", grouped(a, sizeof(a), threads_unnamed),
			 threads_unnamed == 1 ? "thread lost its name" : "threads lost their names");
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

size_t source_loss_lines(const struct source_loss *l, uint64_t names_lost, source_loss_fn fn,
			 void *ctx)
{
	/* loss.h's kinds, each in its own words, then the exporter's own */
	struct {
		uint64_t n;
		const char *what;
	} v[SHMT_LOSS_NKINDS + 3];
	size_t nv = 0, lines = 0;

	/* counters that cannot be true are no counts: one line says so */
	for (size_t i = 0; i < SHMT_LOSS_NKINDS && !l->corrupt; i++, nv++) {
		v[nv].n = shmt_loss_get(&l->counters, &shmt_loss_kinds[i]);
		v[nv].what = shmt_loss_kinds[i].words;
	}
	v[nv].n = names_lost;
	v[nv++].what = "events exported as \"?\" (name or category unknown)";
	v[nv].n = l->corrupt ? 0 : l->unaccounted;
	v[nv++].what = "records missing that no counter accounts for (a bug: please report it)";
	v[nv].n = l->corrupt;
	v[nv++].what = NULL;
	for (size_t i = 0; i < nv; i++) {
		char line[256];

		if (!v[i].n)
			continue;
		if (!v[i].what)
			snprintf(line, sizeof(line), "shmtrace: loss counters corrupt (%s): not reported",
				 l->corrupt_why);
		else
			snprintf(line, sizeof(line), "shmtrace: %llu %s", (unsigned long long)v[i].n,
				 v[i].what);
		fn(ctx, line);
		lines++;
	}
	return lines;
}

/* One snapshot in words, into line. */
static void snapshot_line(const struct source_snapshot *sn, char *line, size_t len)
{
	char who[1200] = "", span[48] = ", no record";
	int n = 0;

	if (sn->trigger[0] && sn->trigger_pid)
		snprintf(who, sizeof(who), " '%s' by pid %u tid %u", sn->trigger, sn->trigger_pid,
			 sn->trigger_tid);
	else if (sn->trigger[0])
		snprintf(who, sizeof(who), " '%s'", sn->trigger);
	else if (sn->trigger_pid)
		snprintf(who, sizeof(who), " by pid %u", sn->trigger_pid);
	/* a snapshot without a record has no start, so no length */
	if (sn->from_ns)
		snprintf(span, sizeof(span), ", %.6f s", (double)(sn->to_ns - sn->from_ns) / 1e9);
	n = snprintf(line, len, "shmtrace: snapshot of ring '%s' (%s%s): sequences %llu to %llu "
		     "and %llu staged%s; %llu records of the window overwritten during the copy",
		     sn->ring, sn->cause, who, (unsigned long long)sn->first_seq,
		     (unsigned long long)sn->end_seq, (unsigned long long)sn->staged, span,
		     (unsigned long long)sn->overwritten);
	if (sn->suppressed && n > 0 && (size_t)n < len)
		n += snprintf(line + n, len - (size_t)n, "; %llu triggers not answered (rate limit)",
			      (unsigned long long)sn->suppressed);
	if (sn->cut && n > 0 && (size_t)n < len)
		snprintf(line + n, len - (size_t)n, "; the %llu oldest records left out (size bound)",
			 (unsigned long long)sn->cut);
}

size_t source_snapshot_lines(const struct source *s, source_snap_fn fn, void *ctx)
{
	for (size_t i = 0; i < s->nsnaps; i++) {
		const struct source_snapshot *sn = &s->snaps[i];
		char line[1600];

		snapshot_line(sn, line, sizeof(line));
		fn(ctx, sn->trigger_ns ? sn->trigger_ns : sn->from_ns ? sn->from_ns : sn->to_ns, line);
	}
	return s->nsnaps;
}

uint64_t source_snapshots_cut(const struct source *s)
{
	uint64_t cut = 0;

	for (size_t i = 0; i < s->nsnaps; i++)
		cut += s->snaps[i].cut;
	return cut;
}
