/* SPDX-License-Identifier: MIT */
/*
 * source_parts.c - the parts of a rotated capture (FILE, FILE.1, ...) that
 * are not among the inputs: named on stderr by file name, with the records
 * they hold where the parts present tell (each part's END frame carries
 * the records the collector wrote up to it, all parts, and the part that
 * follows), so that a partial export says what it lacks instead of
 * looking complete or blaming a bug.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "source_capture.h"

#define SHOW_NAMES 6		/* names in one warning; the rest are counted */
#define KEEP_NAMES 64		/* names kept for the metadata */

/* The parts one collector wrote: one run_id, one collector pid. */
struct session {
	const struct source_file **f;	/* by part, each part once */
	size_t n;
	char base[4096];		/* FILE, or "" when the names do not tell */
};

/* FILE from the path of part n: FILE.n, or FILE itself for part 0. */
static void base_of(const struct source_file *f, char *base, size_t len)
{
	char suffix[16];
	size_t pl = strlen(f->path), sl;

	base[0] = 0;
	if (f->h.part == 0) {
		snprintf(base, len, "%s", f->path);
		return;
	}
	sl = (size_t)snprintf(suffix, sizeof(suffix), ".%u", f->h.part);
	if (pl > sl && pl - sl < len && !strcmp(f->path + pl - sl, suffix))
		snprintf(base, len, "%.*s", (int)(pl - sl), f->path);
}

/* The name of part k: FILE.k, or "part k of FILE'S capture" unknown. */
static void part_name(const struct session *ss, uint32_t k, char *buf, size_t len)
{
	if (!ss->base[0])
		snprintf(buf, len, "part %u of the capture of %s", k, ss->f[0]->path);
	else if (k == 0)
		snprintf(buf, len, "%s", ss->base);
	else
		snprintf(buf, len, "%s.%u", ss->base, k);
}

/* The records the session wrote before its i-th file, when an END frame
 * at or after it tells; false when none does. */
static bool records_before(const struct session *ss, size_t i, uint64_t *n)
{
	uint64_t after = 0;

	for (size_t k = i; k < ss->n; k++) {
		after += ss->f[k]->nrec;
		if (ss->f[k]->ended) {
			if (ss->f[k]->end.records < after)
				return false;	/* forged: nothing to tell */
			*n = ss->f[k]->end.records - after;
			return true;
		}
	}
	return false;
}

static int keep_name(struct source *s, const char *name)
{
	char **v, *c;

	if (s->nmissing_parts == KEEP_NAMES)
		return 0;
	v = reallocarray(s->missing_parts, s->nmissing_parts + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->missing_parts = v;
	if (!(c = strdup(name)))
		return -ENOMEM;
	v[s->nmissing_parts++] = c;
	return 0;
}

/*
 * Parts from..to of the session are not among the inputs (to == from
 * and trailing: part from and any after it). records: what they hold,
 * when known.
 */
static int report_gap(struct source *s, struct source_run *run, const struct session *ss,
		      uint32_t from, uint32_t to, bool trailing, const uint64_t *records)
{
	char names[1024] = "", name[4200], tail[128];
	size_t o = 0;
	unsigned found = 0, total = to - from + 1;
	int ret;

	for (uint32_t k = from; k <= to; k++) {
		part_name(ss, k, name, sizeof(name));
		if ((ret = keep_name(s, name)) < 0)
			return ret;
		found += ss->base[0] && access(name, F_OK) == 0;
		if (k - from < SHOW_NAMES && o < sizeof(names))
			o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s",
					      k > from ? ", " : "", name);
	}
	if (total > SHOW_NAMES)
		snprintf(names + o, sizeof(names) - (o < sizeof(names) ? o : sizeof(names)),
			 " and %u more", total - SHOW_NAMES);
	if (records)
		snprintf(tail, sizeof(tail), "%s %llu records, not exported",
			 total == 1 && !trailing ? "it holds" : "they hold",
			 (unsigned long long)*records);
	else
		snprintf(tail, sizeof(tail), "how many records %s is not known",
			 total == 1 && !trailing ? "it holds" : "they hold");
	source_warnx("part%s of the capture of ring '%s' missing from the inputs: %s%s (%s); %s",
		     total == 1 && !trailing ? "" : "s", run->ring, names,
		     trailing ? " and any part after it" : "",
		     found == total ? (total == 1 ? "it exists: add it to the inputs" :
				       "they exist: add them to the inputs") :
		     found ? "some not found" : "not found",
		     tail);
	if (records)
		run->missing += *records;
	else
		run->missing_unknown = true;
	return 0;
}

/* The gaps in one session's parts, and the parts after its last. */
static int session_gaps(struct source *s, struct source_capture *c, const struct session *ss)
{
	struct source_run *run = source_run_of(c, ss->f[0]->h.run_id);
	const struct source_file *prev = NULL, *last = ss->f[ss->n - 1];
	uint32_t expect = 0;
	int ret;

	for (size_t i = 0; i < ss->n; i++) {
		const struct source_file *f = ss->f[i];
		uint64_t before, in_gap;
		/* the session wrote nothing before part 0 */
		bool known = (!prev || prev->ended) && records_before(ss, i, &before) &&
			     before >= (prev ? prev->end.records : 0);

		if (f->h.part > expect) {
			in_gap = known ? before - (prev ? prev->end.records : 0) : 0;
			ret = report_gap(s, run, ss, expect, f->h.part - 1, false,
					 known ? &in_gap : NULL);
			if (ret < 0)
				return ret;
		}
		prev = f;
		expect = f->h.part + 1;
	}
	/* the ring read with them holds what parts after the last had */
	if (last->ended && last->end.next_part > last->h.part && !run->tail_covers)
		return report_gap(s, run, ss, last->end.next_part, last->end.next_part, true, NULL);
	return 0;
}

static int cmp_part(const void *pa, const void *pb)
{
	const struct source_file *a = *(const struct source_file *const *)pa;
	const struct source_file *b = *(const struct source_file *const *)pb;

	return a->h.part < b->h.part ? -1 : a->h.part > b->h.part;
}

int source_find_missing(struct source *s, struct source_capture *c)
{
	struct session ss;
	bool *done = calloc(c->nfiles + 1, sizeof(*done));
	int ret = 0;

	ss.f = calloc(c->nfiles + 1, sizeof(*ss.f));
	if (!done || !ss.f) {
		free(done);
		free(ss.f);
		return -ENOMEM;
	}
	for (size_t i = 0; i < c->nfiles && ret == 0; i++) {
		if (done[i])
			continue;
		ss.n = 0;
		for (size_t j = i; j < c->nfiles; j++) {
			const struct source_file *f = &c->files[j];

			if (f->h.run_id != c->files[i].h.run_id ||
			    f->h.collector_pid != c->files[i].h.collector_pid)
				continue;
			done[j] = true;
			ss.f[ss.n++] = f;
		}
		qsort(ss.f, ss.n, sizeof(*ss.f), cmp_part);
		/* the same part given twice counts once */
		for (size_t k = 1; k < ss.n; k++)
			if (ss.f[k]->h.part == ss.f[k - 1]->h.part)
				memmove(&ss.f[k], &ss.f[k + 1], (--ss.n - k) * sizeof(*ss.f)), k--;
		base_of(ss.f[0], ss.base, sizeof(ss.base));
		ret = session_gaps(s, c, &ss);
	}
	free(done);
	free(ss.f);
	return ret;
}
