/* SPDX-License-Identifier: MIT */
/*
 * source_parts.c - the parts of a rotated capture (FILE, FILE.1, ...) that
 * are not among the inputs: named on stderr by file name, with the records
 * they hold where the parts present tell (each part's END frame carries
 * the records the collector wrote up to it, all parts, and the part that
 * follows; each part's header, the parts the collector had deleted for
 * --max-files when it began, with their records and when they were
 * written), so that a partial export says what it lacks and why, instead
 * of looking complete or blaming a bug.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fmt.h"
#include "source_capture.h"

#define SHOW_NAMES 6		/* names in one warning; the rest are counted */
#define KEEP_NAMES 64		/* names kept for the metadata */
#define KEEP_WHY 16		/* warnings kept for the metadata */

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

/* Appends a copy of text to the list *v of *n strings, unless it holds
 * max already. Returns 0 or -ENOMEM. */
static int keep_text(char ***v, size_t *n, size_t max, const char *text)
{
	char **nv, *c;

	if (*n == max)
		return 0;
	nv = reallocarray(*v, *n + 1, sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	if (!(c = strdup(text)))
		return -ENOMEM;
	nv[(*n)++] = c;
	return 0;
}

static int keep_name(struct source *s, const char *name)
{
	return keep_text(&s->missing_parts, &s->nmissing_parts, KEEP_NAMES, name);
}

/* Says why parts are missing, on stderr and in the metadata. */
static int say_why(struct source *s, const char *why)
{
	source_warnx("%s", why);
	return keep_text(&s->missing_why, &s->nmissing_why, KEEP_WHY, why);
}

/*
 * Parts from..to of the session are not among the inputs (to == from
 * and trailing: part from and any after it). records: what they hold,
 * when known.
 */
static int report_gap(struct source *s, struct source_run *run, const struct session *ss,
		      uint32_t from, uint32_t to, bool trailing, const uint64_t *records)
{
	char names[1024] = "", name[4200], tail[128], why[2048], found_s[96];
	size_t o = 0;
	/* to - from + 1 is up to 2^32, and a forged header or END frame
	 * gives any: only the first KEEP_NAMES are named and looked for,
	 * the rest counted, and no counter can wrap */
	uint64_t total = (uint64_t)to - from + 1, look = total < KEEP_NAMES ? total : KEEP_NAMES;
	unsigned found = 0;
	int ret;

	for (uint64_t i = 0; i < look; i++) {
		uint32_t k = from + (uint32_t)i;

		part_name(ss, k, name, sizeof(name));
		if ((ret = keep_name(s, name)) < 0)
			return ret;
		found += ss->base[0] && access(name, F_OK) == 0;
		if (i < SHOW_NAMES && o < sizeof(names))
			o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s",
					      i ? ", " : "", name);
	}
	if (total > SHOW_NAMES)
		snprintf(names + o, sizeof(names) - (o < sizeof(names) ? o : sizeof(names)),
			 " and %llu more", (unsigned long long)(total - SHOW_NAMES));
	if (found == total)
		snprintf(found_s, sizeof(found_s), "%s", total == 1 ? "it exists: add it to the inputs" :
			 "they exist: add them to the inputs");
	else if (found == look)
		snprintf(found_s, sizeof(found_s), "the first %llu exist, the rest not looked for",
			 (unsigned long long)look);
	else
		snprintf(found_s, sizeof(found_s), "%s", found ? "some not found" : "not found");
	if (records)
		snprintf(tail, sizeof(tail), "%s %llu records, not exported",
			 total == 1 && !trailing ? "it holds" : "they hold",
			 (unsigned long long)*records);
	else
		snprintf(tail, sizeof(tail), "how many records %s is not known",
			 total == 1 && !trailing ? "it holds" : "they hold");
	snprintf(why, sizeof(why), "part%s of the capture of ring '%s' missing from the inputs: "
		 "%s%s (%s); %s", total == 1 && !trailing ? "" : "s", run->ring, names,
		 trailing ? " and any part after it" : "", found_s, tail);
	if (records)
		run->missing += *records;
	else
		run->missing_unknown = true;
	return say_why(s, why);
}

/* The parts the session's collector deleted for --max-files, as its
 * newest header says; none (parts 0) when no header says, or only one
 * that cannot be true (a part tells of parts before it only). */
static struct shmt_cap_deleted session_deleted(const struct session *ss)
{
	struct shmt_cap_deleted d = { 0 };

	for (size_t i = 0; i < ss->n; i++) {
		const struct shmt_cap_header *h = &ss->f[i]->h;

		if (h->deleted.parts > d.parts && h->deleted.parts <= h->part)
			d = h->deleted;
	}
	return d;
}

/* Appends ", 4-6" (or "4" alone) to the list of part numbers in buf;
 * after SHOW_NAMES runs, ", ..." once. */
static void put_range(char *buf, size_t len, unsigned *nranges, uint32_t from, uint32_t to)
{
	size_t o = strlen(buf);

	if (*nranges < SHOW_NAMES && from == to)
		snprintf(buf + o, len - o, "%s%u", o ? ", " : "", from);
	else if (*nranges < SHOW_NAMES)
		snprintf(buf + o, len - o, "%s%u-%u", o ? ", " : "", from, to);
	else if (*nranges == SHOW_NAMES)
		snprintf(buf + o, len - o, ", ...");
	++*nranges;
}

/* ", written from T to T": the wall-clock times of ring times d->from_ns
 * and d->to_ns of run, or "" when they are not known. */
static void put_written(char *buf, size_t len, const struct source_run *run,
			const struct shmt_cap_deleted *d)
{
	char a[64], b[64];

	buf[0] = 0;
	if (!d->from_ns || d->to_ns < d->from_ns)
		return;
	/* wrapping unsigned arithmetic, as the export's own start: forged
	 * anchors give a wrong time, never an overflow */
	fmt_iso_ns(a, sizeof(a), run->realtime0 + (d->from_ns - run->mono0));
	fmt_iso_ns(b, sizeof(b), run->realtime0 + (d->to_ns - run->mono0));
	snprintf(buf, len, ", written from %s to %s", a, b);
}

/*
 * Parts 0 .. del->parts - 1 of the session that are not among the inputs
 * (normally all of them): deleted by its collector to keep within
 * --max-files. Says so with the records they held (those of the parts
 * present among them taken off) and when they were written, and counts
 * them as missing.
 */
static int report_deleted(struct source *s, struct source_run *run, const struct session *ss,
			  const struct shmt_cap_deleted *del)
{
	char ranges[256] = "", name[4200], first[4200] = "", paren[816] = "", held[96], by[64];
	char when[160], why[2048];
	uint64_t present = 0, absent = 0;
	unsigned nranges = 0;
	size_t i = 0;
	int ret;

	for (uint32_t k = 0, end; k < del->parts; k = end + 1) {
		while (i < ss->n && ss->f[i]->h.part < k)
			i++;
		end = i < ss->n && ss->f[i]->h.part < del->parts ? ss->f[i]->h.part : del->parts;
		if (end == k) {	/* present: its records were not deleted */
			present += ss->f[i]->nrec;
			continue;
		}
		end--;
		put_range(ranges, sizeof(ranges), &nranges, k, end);
		for (uint32_t j = k; j <= end && s->nmissing_parts < KEEP_NAMES; j++) {
			part_name(ss, j, name, sizeof(name));
			if ((ret = keep_name(s, name)) < 0)
				return ret;
		}
		if (!absent)
			part_name(ss, k, first, sizeof(first));
		part_name(ss, end, name, sizeof(name));
		absent += end - k + 1;
	}
	if (!absent)
		return 0;
	if (ss->base[0])
		snprintf(paren, sizeof(paren), absent == 1 ? " (%.400s)" : " (%.400s to %.400s)",
			 first, name);
	if (del->records >= present)
		snprintf(held, sizeof(held), "%s %llu records", absent == 1 ? "it held" : "they held",
			 (unsigned long long)(del->records - present));
	else	/* the counts contradict each other: nothing to tell */
		snprintf(held, sizeof(held), "how many records %s is not known",
			 absent == 1 ? "it held" : "they held");
	if (del->max_files)
		snprintf(by, sizeof(by), "shmtrace-collector --max-files %u", del->max_files);
	else
		snprintf(by, sizeof(by), "their collector");
	put_written(when, sizeof(when), run, del);
	snprintf(why, sizeof(why), "part%s %s of the capture of ring '%s'%s %s deleted by %s as "
		 "newer parts began: %s%s; not exported", absent == 1 ? "" : "s", ranges, run->ring,
		 paren, absent == 1 ? "was" : "were", by, held, when);
	if (del->records >= present) {
		run->missing += del->records - present;
		s->loss.deleted += del->records - present;
	} else {
		run->missing_unknown = true;
	}
	s->deleted_parts += absent;
	return say_why(s, why);
}

/* The gaps in one session's parts, and the parts after its last. */
static int session_gaps(struct source *s, struct source_capture *c, const struct session *ss)
{
	struct source_run *run = source_run_of(c, ss->f[0]->h.run_id);
	const struct source_file *last = ss->f[ss->n - 1];
	struct shmt_cap_deleted del = session_deleted(ss);
	/* the session wrote nothing before part 0, and del.records before
	 * the first part its collector kept */
	uint32_t expect = del.parts;
	uint64_t base = del.records, before, in_gap;
	bool base_known = true, known;
	int ret;

	if (del.parts && (ret = report_deleted(s, run, ss, &del)) < 0)
		return ret;
	for (size_t i = 0; i < ss->n; i++) {
		const struct source_file *f = ss->f[i];

		if (f->h.part < expect)
			continue;	/* among the deleted ones: said with them */
		if (f->h.part > expect) {
			known = base_known && records_before(ss, i, &before) && before >= base;
			in_gap = known ? before - base : 0;
			ret = report_gap(s, run, ss, expect, f->h.part - 1, false,
					 known ? &in_gap : NULL);
			if (ret < 0)
				return ret;
		}
		base_known = f->ended;
		base = f->ended ? f->end.records : 0;
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
