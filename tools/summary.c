/* SPDX-License-Identifier: MIT */
/*
 * summary.c - `shmtrace summary`: per process and span name, how many,
 * how long in total, and the latency distribution, from a histogram per
 * (process, name) so that memory does not grow with the number of spans.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "cli.h"
#include "fmt.h"
#include "hist.h"
#include "json_writer.h"
#include "procs.h"
#include "source.h"
#include "term.h"

/* Rows of (process, span name) kept apart: each holds a histogram of
 * ~30 KB, and a forged ring or capture may hold a span for each of
 * millions of pids. The spans of the rows past it go to one row "other"
 * (summed as --by-process-name sums), and a warning says so. */
#define MAX_ROWS	4096
#define OTHER		UINT64_MAX	/* the index of that row in idx */

struct row {
	uint32_t pid;		/* as in the trace (after reuse remapping); merged:
				 * the lowest of its processes' */
	uint32_t name;		/* string id */
	uint32_t procs;		/* processes summed into it (--by-process-name) */
	uint64_t unfinished;	/* spans open when their thread died (or now) */
	bool other;		/* the rows past MAX_ROWS, summed */
	struct hist h;
};

struct summary {
	struct source src;
	struct procs ps;
	struct u64map idx;	/* (pid << 32 | name) -> row index */
	struct row **rows;
	size_t n, cap;
	uint64_t triggers;	/* shmtrace_trigger() records, counted apart */
	uint64_t names_lost;	/* spans whose name is none of the trace's strings */
	struct row *other;	/* the rows past MAX_ROWS, summed; NULL: none */
	uint64_t folded;	/* how many rows it sums */
};

/* a command's help is its own text, whole: lines it shares with other
 * commands' help (the options) stay in it, so each reads in one piece */
static const char summary_usage[] =
	"Usage: shmtrace summary CAPTURE... [--by-process-name] [--json]\n"
	"       shmtrace summary --ring NAME [--by-process-name] [--json]\n"
	"Per process and span name: count, total, mean, p50, p99 and max duration,\n"
	"sorted by total time. Percentiles come from a log-linear histogram and are\n"
	"within 0.8% of the true value; count, total, mean and max are exact. Each\n"
	"duration column is in one unit, the one its smallest non-zero value reads\n"
	"best in (ns below 10 us, us below 10 ms, ms below 10 s, else s). Then the\n"
	"number of triggers (shmtrace_trigger()), when there are any. Past 4096\n"
	"rows, the spans of the rest are summed into one last row, \"(other)\".\n"
	"\n"
	"  -r, --ring NAME        read the ring /dev/shm/NAME directly, read-only\n"
	"      --by-process-name  one row per process name and span name: the\n"
	"                         processes of one name (a pool of workers) summed,\n"
	"                         \"NAME (N processes)\"; unnamed ones stay apart\n"
	"      --json             print JSON instead of a table\n"
	"  -h, --help             show this help\n"
	"  -V, --version          show the version\n";

static struct row *new_row(uint32_t pid, uint32_t name)
{
	struct row *row = malloc(sizeof(*row));

	if (!row)
		return NULL;
	row->pid = pid;
	row->name = name;
	row->procs = 1;
	row->unfinished = 0;
	row->other = false;
	hist_init(&row->h);
	return row;
}

static int on_span(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct summary *s = ctx;
	struct row *row;
	uint32_t pid;
	uint64_t *v;
	bool added;

	s->triggers += shmt_record_kind(r) == SHMTRACE_KIND_TRIGGER;
	if (shmt_record_kind(r) != SHMTRACE_KIND_SPAN && shmt_record_kind(r) != SHMTRACE_KIND_OPEN)
		return 0;
	s->names_lost += !source_has_string(&s->src, r->name);
	pid = procs_outpid(&s->ps, r->pid, start_time, r->ts);
	v = u64map_get(&s->idx, (uint64_t)pid << 32 | r->name, s->n, &added);
	if (!v)
		return -ENOMEM;
	if (added && s->n >= MAX_ROWS) {
		if (!s->other && !(s->other = new_row(0, 0)))
			return -ENOMEM;
		s->other->other = true;
		s->folded++;
		*v = OTHER;
	} else if (added) {
		struct row *row = new_row(pid, r->name);

		if (!row || array_reserve(&s->rows, &s->cap, s->n + 1, sizeof(*s->rows), 64) < 0) {
			free(row);
			return -ENOMEM;
		}
		s->rows[s->n++] = row;
	}
	row = *v == OTHER ? s->other : s->rows[*v];
	if (shmt_record_kind(r) == SHMTRACE_KIND_OPEN)
		row->unfinished++;	/* no duration: it never ended */
	else
		hist_add(&row->h, r->dur);
	return 0;
}

static int cmp_row(const void *pa, const void *pb)
{
	const struct row *a = *(struct row *const *)pa, *b = *(struct row *const *)pb;

	if (a->h.total != b->h.total)
		return a->h.total > b->h.total ? -1 : 1;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return a->name < b->name ? -1 : a->name > b->name;
}

/* The name processes are grouped under by --by-process-name: theirs, or
 * NULL for a process without one (which stays apart). */
static const char *group_name(const struct summary *s, uint32_t pid)
{
	const struct proc *p = procs_find(&s->ps, pid);

	return p && p->pname[0] ? p->pname : NULL;
}

static int cmp_group(const void *pa, const void *pb, void *arg)
{
	const struct row *a = *(struct row *const *)pa, *b = *(struct row *const *)pb;
	const char *na = group_name(arg, a->pid), *nb = group_name(arg, b->pid);
	int c = strcmp(na ? na : "", nb ? nb : "");

	if (c)
		return c;
	if (a->name != b->name)
		return a->name < b->name ? -1 : 1;
	return a->pid < b->pid ? -1 : a->pid > b->pid;
}

/* --by-process-name: the rows of processes with one name and one span
 * name summed into the first of them (rows sorted by group, then pid). */
static void merge_by_process_name(struct summary *s)
{
	size_t k = 0;

	qsort_r(s->rows, s->n, sizeof(*s->rows), cmp_group, s);
	for (size_t i = 0; i < s->n; i++) {
		struct row *r = s->rows[i], *g = k ? s->rows[k - 1] : NULL;
		const char *name = group_name(s, r->pid);

		if (g && name && g->name == r->name && group_name(s, g->pid) &&
		    !strcmp(group_name(s, g->pid), name)) {
			hist_merge(&g->h, &r->h);
			g->unfinished += r->unfinished;
			g->procs++;
			free(r);
			continue;
		}
		s->rows[k++] = r;
	}
	s->n = k;
}

/* A row's process as shown: its name, "NAME (N processes)" when merged,
 * "(other: N rows)" for the rows past MAX_ROWS. */
static void row_process(const struct summary *s, const struct row *r, char *buf, size_t len)
{
	if (r->other)
		snprintf(buf, len, "(other: %llu rows)", (unsigned long long)s->folded);
	else if (r->procs > 1)
		snprintf(buf, len, "%s (%u processes)", group_name(s, r->pid), r->procs);
	else
		procs_name(&s->ps, r->pid, buf, len);
}

/* A row's span name (its length in *len): "(other)" for the rows past
 * MAX_ROWS. */
static const char *row_name(struct summary *s, const struct row *r, size_t *len)
{
	if (r->other) {
		*len = strlen("(other)");
		return "(other)";
	}
	return source_string(&s->src, r->name, len);
}

/* The durations of row r: total, mean, p50, p99, max. */
static void row_durs(const struct row *r, uint64_t d[5])
{
	d[0] = r->h.total;
	d[1] = r->h.count ? r->h.total / r->h.count : 0;
	d[2] = hist_quantile(&r->h, 0.5);
	d[3] = hist_quantile(&r->h, 0.99);
	d[4] = r->h.max;
}

/* Each duration column's unit: its smallest non-zero value's, so that no
 * value of it reads as 0 and all of them compare at a glance. */
static void column_units(const struct summary *s, enum fmt_unit unit[5])
{
	uint64_t min[5] = { 0 };

	for (size_t i = 0; i < s->n; i++) {
		uint64_t d[5];

		row_durs(s->rows[i], d);
		for (int c = 0; c < 5; c++)
			if (d[c] && (!min[c] || d[c] < min[c]))
				min[c] = d[c];
	}
	for (int c = 0; c < 5; c++)
		unit[c] = fmt_dur_unit(min[c]);
}

static int print_table(struct summary *s)
{
	static const char *hdr[8] = { "PROCESS", "NAME", "COUNT", "TOTAL", "MEAN", "P50", "P99", "MAX" };
	size_t w[8];
	char (*cells)[8][160] = calloc(s->n ? s->n : 1, sizeof(*cells));
	enum fmt_unit unit[5];

	if (!cells)
		return -ENOMEM;
	column_units(s, unit);
	for (int c = 0; c < 8; c++)
		w[c] = strlen(hdr[c]);
	for (size_t i = 0; i < s->n; i++) {
		const struct row *r = s->rows[i];
		size_t len;
		const char *name = row_name(s, r, &len);
		char pname[160];
		uint64_t d[5];

		/* names are untrusted bytes: print them escaped, never raw */
		row_process(s, r, pname, sizeof(pname));
		term_escape(pname, strlen(pname), cells[i][0], sizeof(cells[i][0]));
		term_escape(name, len, cells[i][1], sizeof(cells[i][1]));
		snprintf(cells[i][2], sizeof(cells[i][2]), "%llu", (unsigned long long)r->h.count);
		row_durs(r, d);
		for (int c = 0; c < 5; c++)
			fmt_dur_in(cells[i][3 + c], sizeof(cells[i][3 + c]), d[c], unit[c]);
		for (int c = 0; c < 8; c++)
			if (strlen(cells[i][c]) > w[c])
				w[c] = strlen(cells[i][c]);
	}
	for (int c = 0; c < 8; c++)
		printf(c < 2 ? "%-*s  " : c < 7 ? "%*s  " : "%*s\n", (int)w[c], hdr[c]);
	for (size_t i = 0; i < s->n; i++)
		for (int c = 0; c < 8; c++)
			printf(c < 2 ? "%-*s  " : c < 7 ? "%*s  " : "%*s\n", (int)w[c], cells[i][c]);
	if (s->triggers)
		printf("%llu trigger%s (shmtrace_trigger())\n", (unsigned long long)s->triggers,
		       s->triggers == 1 ? "" : "s");
	free(cells);
	return 0;
}

/* ,"KEY":v, or null when the counters cannot be true (loss.h). */
static void put_loss_count(struct jw *w, const char *key, uint64_t v, bool corrupt)
{
	jw_puts(w, ",\"");
	jw_puts(w, key);
	jw_puts(w, "\":");
	if (corrupt)
		jw_puts(w, "null");
	else
		jw_u64(w, v);
}

/* The losses under the names the export's metadata gives them: each of
 * loss.h's counters, their sum in records, what no counter accounts for,
 * the spans whose name was lost, and whether the inputs are complete. */
static void put_loss_json(struct jw *w, const struct summary *s)
{
	const struct source_loss *l = &s->src.loss;

	for (size_t i = 0; i < SHMT_LOSS_NKINDS; i++)
		put_loss_count(w, shmt_loss_kinds[i].name,
			       shmt_loss_get(&l->counters, &shmt_loss_kinds[i]), l->corrupt);
	put_loss_count(w, "records_lost", shmt_loss_records(&l->counters), l->corrupt);
	put_loss_count(w, "unaccounted", l->unaccounted, l->corrupt);
	if (l->corrupt) {
		jw_puts(w, ",\"counters_corrupt\":true,\"counters_corrupt_why\":");
		jw_cstr(w, l->corrupt_why);
	}
	put_loss_count(w, "names_lost", s->names_lost, false);
	jw_puts(w, ",\"complete\":");
	jw_puts(w, source_complete(&s->src) ? "true" : "false");
}

static int print_json(struct summary *s)
{
	struct jw *w = malloc(sizeof(*w));
	int ret;

	if (!w)
		return -ENOMEM;
	jw_init(w, stdout);
	jw_puts(w, "{\"spans\":[");
	for (size_t i = 0; i < s->n; i++) {
		const struct row *r = s->rows[i];
		char pname[128];
		size_t len;
		const char *name = row_name(s, r, &len);

		if (r->other)
			snprintf(pname, sizeof(pname), "(other)");
		else if (r->procs > 1)
			snprintf(pname, sizeof(pname), "%s", group_name(s, r->pid));
		else
			procs_name(&s->ps, r->pid, pname, sizeof(pname));
		jw_puts(w, i ? ",\n{" : "\n{");
		jw_puts(w, "\"pid\":");
		jw_u64(w, r->pid);
		jw_puts(w, ",\"process\":");
		jw_cstr(w, pname);
		jw_puts(w, ",\"processes\":");
		jw_u64(w, r->procs);
		jw_puts(w, ",\"name\":");
		jw_str(w, name, len);
		jw_puts(w, ",\"count\":");
		jw_u64(w, r->h.count);
		jw_puts(w, ",\"total_ns\":");
		jw_u64(w, r->h.total);
		jw_puts(w, ",\"mean_ns\":");
		jw_u64(w, r->h.count ? r->h.total / r->h.count : 0);
		jw_puts(w, ",\"p50_ns\":");
		jw_u64(w, hist_quantile(&r->h, 0.5));
		jw_puts(w, ",\"p99_ns\":");
		jw_u64(w, hist_quantile(&r->h, 0.99));
		jw_puts(w, ",\"max_ns\":");
		jw_u64(w, r->h.max);
		jw_puts(w, ",\"unfinished\":");
		jw_u64(w, r->unfinished);
		jw_puts(w, "}");
	}
	jw_puts(w, "\n],\"rows_folded\":");
	jw_u64(w, s->folded);
	jw_puts(w, ",\"triggers\":");
	jw_u64(w, s->triggers);
	put_loss_json(w, s);
	jw_puts(w, "}\n");
	ret = jw_flush(w);
	free(w);
	return ret;
}

static const struct option summary_longopts[] = {
	{ "ring", required_argument, NULL, 'r' },
	{ "json", no_argument, NULL, 'j' },
	{ "by-process-name", no_argument, NULL, 'p' },
	{ NULL, 0, NULL, 0 },
};

static const struct cli_opts summary_opts = { "summary", summary_usage, ":r:", summary_longopts };

int cmd_summary(int argc, char **argv)
{
	struct summary *s;
	const char *ring = NULL;
	bool json = false, by_name = false;
	char err[768];
	int c, ret, rc = EXIT_RUNTIME;

	cli_getopt_start();
	while ((c = cli_getopt(&summary_opts, argc, argv, &rc)) > 0) {
		if (c == 'r')
			ring = optarg;
		else if (c == 'j')
			json = true;
		else if (c == 'p')
			by_name = true;
	}
	if (c == CLI_OPT_EXIT)
		return rc;
	ret = cli_check_inputs("summary", NULL, NULL, ring, argv + optind, argc - optind, NULL);
	if (ret)
		return ret;
	s = calloc(1, sizeof(*s));
	if (!s)
		return cli_runtime_error("summary", "out of memory");
	ret = source_open(&s->src, ring, argv + optind, (size_t)(argc - optind), err, sizeof(err));
	if (ret < 0) {
		cli_runtime_error("summary", "%s%s", err,
				  cli_ring_hint(argv + optind, (size_t)(argc - optind)));
		goto out;
	}
	u64map_init(&s->idx);
	if ((ret = procs_build(&s->ps, s->src.thr, s->src.nthr)) < 0 ||
	    (ret = source_records(&s->src, on_span, s, err, sizeof(err))) < 0) {
		cli_runtime_error("summary", "%s", ret == -ENOMEM ? "out of memory" : err);
		goto out_maps;
	}
	/* what was lost, as export says it: a summary of part of the
	 * records must not pass for one of all of them */
	source_warn_lost(&s->src.loss);
	source_warn_names(&s->src, s->names_lost, "span", 0);
	if (by_name)
		merge_by_process_name(s);
	qsort(s->rows, s->n, sizeof(*s->rows), cmp_row);
	/* the rows past MAX_ROWS, summed: last, whatever their total */
	if (s->other) {
		if (array_reserve(&s->rows, &s->cap, s->n + 1, sizeof(*s->rows), 64) < 0) {
			cli_runtime_error("summary", "out of memory");
			goto out_maps;
		}
		s->rows[s->n++] = s->other;
		s->other = NULL;
		source_warnx("more than %u (process, span name) rows: the spans of the other %llu "
			     "are summed into the last row, \"(other)\"", MAX_ROWS,
			     (unsigned long long)s->folded);
	}
	if (json) {
		if ((ret = print_json(s)) < 0) {
			cli_runtime_error("summary", "writing output: %s", strerror(-ret));
			goto out_maps;
		}
	} else {
		if (print_table(s) < 0) {
			cli_runtime_error("summary", "out of memory");
			goto out_maps;
		}
		if (fflush(stdout) != 0) {
			cli_runtime_error("summary", "writing output: %s", strerror(errno));
			goto out_maps;
		}
	}
	rc = EXIT_OK;
out_maps:
	for (size_t i = 0; i < s->n; i++)
		free(s->rows[i]);
	free(s->rows);
	free(s->other);
	u64map_free(&s->idx);
	procs_free(&s->ps);
out:
	source_close(&s->src);
	free(s);
	return rc;
}
