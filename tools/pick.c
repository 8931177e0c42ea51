/* SPDX-License-Identifier: MIT */
/*
 * pick.c - which records an export writes (pick.h): the passes that find
 * the window's origin and the flows of the selected records, and the
 * answer for each record of the export's own passes.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pick.h"

/* ts relative to the earliest record of the pids. */
static uint64_t rel(const struct pick *p, uint64_t ts)
{
	return ts > p->t0 ? ts - p->t0 : 0;
}

/* Whether --pid and --from/--to select r. */
static bool selected(const struct pick *p, const struct shmt_record *r)
{
	const struct filter *f = p->flt;
	uint64_t t = rel(p, r->ts);

	return filter_pid(f, r->pid) && !(f->has_from && t < f->from) && !(f->has_to && t > f->to);
}

/* Whether ts starts in the current piece (always, without --split). */
static bool in_piece(const struct pick *p, uint64_t ts)
{
	uint64_t t = rel(p, ts);

	return !p->split_ns || (t >= p->lo && (t < p->hi || p->hi == UINT64_MAX));
}

/* The answer for r as a record of its own. */
static bool wanted(const struct pick *p, const struct shmt_record *r, uint32_t ring)
{
	const uint64_t *first;

	if (p->all)
		return true;
	/* a flow that the passes did not see (a ring written since) is
	 * taken as starting at this record */
	if (shmt_record_in_flow(r) &&
	    (first = flowmap_find(&p->flows, shmtrace_flow_id(r->flow), ring)))
		return in_piece(p, *first);
	return selected(p, r) && in_piece(p, r->ts);
}

bool pick_record(const struct pick *p, const struct shmt_record *r, uint32_t ring,
		 struct pick_pass *st)
{
	if (shmt_record_kind(r) == SHMTRACE_KIND_ARG) {
		/* an argument carries its event's pid, tid and ts */
		if (r->pid == st->pid && r->tid == st->tid && r->ts == st->ts)
			return st->wanted;
		return wanted(p, r, ring);
	}
	*st = (struct pick_pass){ .pid = r->pid, .tid = r->tid, .ts = r->ts,
				  .wanted = wanted(p, r, ring) };
	return st->wanted;
}

/* What the passes before the export read into. */
struct prep {
	struct pick *p;
	struct source *src;
	bool starts;		/* the pass notes t0 and t_end too */
};

static void note_start(struct pick *p, const struct shmt_record *r)
{
	if (shmt_record_kind(r) == SHMTRACE_KIND_ARG || !filter_pid(p->flt, r->pid))
		return;
	if (!p->any || r->ts < p->t0)
		p->t0 = r->ts;
	if (!p->any || r->ts > p->t_end)
		p->t_end = r->ts;
	p->any = true;
}

static int on_start(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	(void)start_time;
	note_start(((struct prep *)ctx)->p, r);
	return 0;
}

static int on_flow(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct prep *q = ctx;
	uint64_t *first;

	(void)start_time;
	if (q->starts)
		note_start(q->p, r);
	if (!shmt_record_in_flow(r) || !selected(q->p, r))
		return 0;
	first = flowmap_get(&q->p->flows, shmtrace_flow_id(r->flow), q->src->ring, r->ts, NULL);
	if (!first)
		return -ENOMEM;
	if (r->ts < *first)
		*first = r->ts;
	return 0;
}

/* The pieces of [--from or 0, --to or the last record's start]. */
static void count_pieces(struct pick *p)
{
	const struct filter *f = p->flt;
	uint64_t last = p->any ? p->t_end - p->t0 : 0;

	if (f->has_to && f->to < last)
		last = f->to;
	p->first_ns = f->has_from ? f->from : 0;
	p->npieces = last >= p->first_ns ? (last - p->first_ns) / p->split_ns + 1 : 1;
	pick_piece(p, 0);
}

void pick_warn_past_end(const struct filter *f, uint64_t last, const char *what)
{
	/* an empty trace must not look like an idle one */
	if (f->has_from && f->from > last)
		source_warnx("--from %.6f s is past the end of the trace (%s %.6f s); the output "
			     "has no events", (double)f->from / 1e9, what, (double)last / 1e9);
}

bool pick_pids_missing(const struct filter *f, bool any, const struct source *src, char *err,
		       size_t errlen)
{
	char pids[FILTER_MAX_PIDS * 12] = "", more[64] = "";
	size_t n = 0, nin = 0;

	if (!f->npids || any)
		return false;
	for (size_t i = 0; i < f->npids && n < sizeof(pids); i++)
		n += (size_t)snprintf(pids + n, sizeof(pids) - n, "%s%u", i ? ", " : "", f->pids[i]);
	while (source_input(src, nin))
		nin++;
	if (nin > 1)
		snprintf(more, sizeof(more), " and %zu other input%s", nin - 1, nin > 2 ? "s" : "");
	snprintf(err, errlen, "no records of pid%s %s in %s'%s'%s", f->npids > 1 ? "s" : "", pids,
		 strcmp(source_kind(src), "ring") ? "" : "ring ", src->name, more);
	return true;
}

int pick_prepare(struct pick *p, struct source *src, const struct filter *f, uint64_t split_ns,
		 char *err, size_t errlen)
{
	struct prep q = { .p = p, .src = src };
	bool window = f->has_from || f->has_to;
	int ret;

	memset(p, 0, sizeof(*p));
	p->flt = f;
	p->split_ns = split_ns;
	flowmap_init(&p->flows);
	p->all = !f->npids && !window && !split_ns;
	if (p->all)
		return 0;
	if (window) {
		/* the window is relative to the earliest record: find it first */
		ret = source_records(src, on_start, &q, err, errlen);
		if (ret < 0)
			return ret;
		if (p->any)
			pick_warn_past_end(f, p->t_end - p->t0, "its last record starts at");
	}
	q.starts = !window;
	ret = source_records(src, on_flow, &q, err, errlen);
	if (ret < 0)
		return ret;
	if (split_ns)
		count_pieces(p);
	return 0;
}

void pick_piece(struct pick *p, uint64_t i)
{
	p->piece = i;
	p->lo = p->first_ns + i * p->split_ns;
	p->hi = i + 1 < p->npieces ? p->lo + p->split_ns : UINT64_MAX;
}

void pick_free(struct pick *p)
{
	flowmap_free(&p->flows);
}
