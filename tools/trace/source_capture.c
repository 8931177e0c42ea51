/* SPDX-License-Identifier: MIT */
/*
 * source_capture.c - the capture back-end of a source: capture files, all
 * parts of one or more runs in any order; the first read loads names and
 * loss counters, every pass delivers the records once each.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procs.h"
#include "source_capture.h"

static struct source_capture *cap_of(const struct source *s)
{
	return s->be;
}

static int cmp_file(const void *pa, const void *pb)
{
	const struct source_file *a = pa, *b = pb;

	if (a->h.started_ns != b->h.started_ns)
		return a->h.started_ns < b->h.started_ns ? -1 : 1;
	if (a->h.run_id != b->h.run_id)
		return a->h.run_id < b->h.run_id ? -1 : 1;
	return a->h.part < b->h.part ? -1 : a->h.part > b->h.part;
}

struct source_run *source_run_of(struct source_capture *c, uint64_t run_id)
{
	for (size_t i = 0; i < c->nruns; i++)
		if (c->runs[i].run_id == run_id)
			return &c->runs[i];
	return NULL;
}

/* True when the collector that the header names still runs here: same
 * host, and that pid is a shmtrace-collector. A capture without its END
 * frame is then one being written, not one cut short. */
static bool collector_writing(const struct shmt_cap_header *h)
{
	char host[sizeof(h->host)] = "";

	if (!h->collector_pid || gethostname(host, sizeof(host) - 1) < 0 ||
	    strncmp(host, h->host, sizeof(host)))
		return false;
	/* the kernel cuts comm to 15 bytes: "shmtrace-collec" */
	return procs_running_as(h->collector_pid, "shmtrace-collec");
}

/* The first read of a file: its strings, name slots and loss counters. */
static int load_frame(struct source *s, struct source_run *run, const struct shmt_cap_frame *f)
{
	int ret = 0;

	switch (f->type) {
	case SHMT_CAP_STRINGS:
		/* ids are the ring's own: each ring has its table */
		for (size_t i = 0; i < f->strings.n && !ret; i++)
			ret = source_table_set(run->str, run->slen, CAP_MAX_STRINGS,
					       f->strings.v[i].id, f->strings.v[i].s,
					       f->strings.v[i].len);
		return ret;
	case SHMT_CAP_THREADS:
		for (size_t i = 0; i < f->threads.n && !ret; i++)
			ret = source_add_thread(s, &f->threads.v[i],
						(uint32_t)(run - cap_of(s)->runs));
		return ret;
	case SHMT_CAP_RECORDS:
		/* the span of its times: an offset must not wrap them */
		for (size_t i = 0; i < f->records.n; i++) {
			uint64_t ts = f->records.v[i].ts;

			if (!shmt_kind_valid(shmt_record_kind(&f->records.v[i])))
				continue;
			if (!run->any_ts || ts < run->ts_min)
				run->ts_min = ts;
			if (!run->any_ts || ts > run->ts_max)
				run->ts_max = ts;
			run->any_ts = true;
		}
		return 0;
	case SHMT_CAP_LOSS:
		/* ring counters are cumulative over the ring's life; two
		 * rings' are added up at the end */
		shmt_loss_merge(&run->loss, &f->loss.counters, SHMT_LOSS_MAX);
		if (f->loss.published > run->published)
			run->published = f->loss.published;
		/* geometry: the same in every frame of a ring */
		if (f->loss.max_strings)
			s->tables.max_strings = f->loss.max_strings;
		if (f->loss.string_bytes)
			s->tables.string_bytes = f->loss.string_bytes;
		if (f->loss.max_threads)
			s->tables.max_threads = f->loss.max_threads;
		return 0;
	default:
		return 0;
	}
}

/* The string ids of record r, ring's own, as map (of several rings'
 * strings) numbers them: name and cat, and an interned string argument's
 * value; a text record's fields are its bytes, not ids. */
static void remap(const uint16_t *map, struct shmt_record *r)
{
	if (shmt_record_kind(r) == SHMTRACE_KIND_TEXT)
		return;
	r->name = map[r->name];
	r->cat = map[r->cat];
	if (shmt_record_kind(r) == SHMTRACE_KIND_ARG && SHMT_ARG_TYPE(r->flow) == SHMTRACE_ARG_STR)
		r->dur = r->dur < CAP_MAX_STRINGS ? map[r->dur] : 0;
}

/* A pass: the records of a RECORDS frame not delivered yet. */
static int deliver(struct source *s, struct source_run *run, const struct shmt_cap_frame *f,
		   struct source_pass *p)
{
	struct source_capture *c = cap_of(s);
	uint64_t first = f->records.first_seq;
	size_t i;
	int ret = 0;

	if (f->type != SHMT_CAP_RECORDS)
		return 0;
	s->ring = (uint32_t)(run - c->runs);
	for (i = source_new_from(run->next_seq, first, f->records.n); i < f->records.n && !ret; i++) {
		struct shmt_record rec = f->records.v[i];

		if (!source_take(&rec, p)) {
			run->bad++;
			continue;
		}
		if (run->map)
			remap(run->map, &rec);
		rec.ts += run->shift;
		s->records++;
		run->records++;
		s->follows = c->prev_run == run && c->prev_seq + 1 == first + i;
		c->prev_run = run;
		c->prev_seq = first + i;
		ret = p->fn(p->ctx, &rec, 0);
	}
	if (first + f->records.n > run->next_seq)
		run->next_seq = first + f->records.n;
	return ret;
}

/* The first read: what file sf says about its place among the parts. */
static void note_part(struct source_file *sf, const struct shmt_cap_frame *f)
{
	if (f->type == SHMT_CAP_RECORDS) {
		sf->nrec += f->records.n;
		if (f->records.first_seq + f->records.n > sf->end_seq)
			sf->end_seq = f->records.first_seq + f->records.n;
	}
	else if (f->type == SHMT_CAP_END) {
		sf->ended = true;
		sf->end = f->end;
	}
}

/* The first read found file sf ending in error ret (-errno, why). */
static void warn_end(struct source *s, const struct source_file *sf, int ret, const char *why)
{
	if (ret == -EPIPE) {
		s->cut = true;
		if (collector_writing(&sf->h))
			source_warnx("%s is still being written by shmtrace-collector (pid %u); "
			       "reading what it holds so far", sf->path, sf->h.collector_pid);
		else
			source_warnx("%s is cut short (%s); exporting everything before it", sf->path, why);
		if (!collector_writing(&sf->h) && !cap_of(s)->tail_ring)
			source_tail_hint(sf);
	} else if (ret == -EBADMSG) {
		s->damaged = true;
		source_warnx("%s has a damaged frame (%s); keeping what was read before it", sf->path, why);
	} else {
		s->damaged = true;
		source_warnx("%s: %s; keeping what was read", sf->path, why);
	}
}

/* Reads one file's frames: p NULL loads tables (and warns about the
 * file's end), else delivers records to the pass. */
static int read_file(struct source *s, struct source_file *sf, struct source_pass *p,
		     char *err, size_t errlen)
{
	struct source_run *run = source_run_of(cap_of(s), sf->h.run_id);
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	char why[512];
	int ret;

	ret = shmt_cap_open(sf->path, &r, why, sizeof(why));
	if (ret < 0) {
		/* the reader's message names the file already */
		snprintf(err, errlen, "%s", why);
		return ret;
	}
	s->perm &= shmt_cap_mode(r);
	while ((ret = shmt_cap_next(r, &f, why, sizeof(why))) == 1) {
		if (!p)
			note_part(sf, &f);
		ret = p ? deliver(s, run, &f, p) : load_frame(s, run, &f);
		if (ret) {
			shmt_cap_close(r);
			if (ret < 0 && !p)
				snprintf(err, errlen, "%s: %s", sf->path, strerror(-ret));
			return ret;
		}
	}
	shmt_cap_close(r);
	if (!p)
		run->clean_last = ret == 0;
	if (ret < 0 && !p)
		warn_end(s, sf, ret, why);
	return 0;
}

/* Puts file f in its ring's run, refusing one run_id for two ring_ids. */
static int add_to_run(struct source_capture *c, const struct source_file *f, char *err,
		      size_t errlen)
{
	struct source_run *run = source_run_of(c, f->h.run_id);

	if (!run) {
		run = &c->runs[c->nruns++];
		run->run_id = f->h.run_id;
		snprintf(run->ring, sizeof(run->ring), "%s", f->h.ring);
		run->realtime0 = f->h.realtime0;
		run->mono0 = f->h.mono0;
		run->mode = f->h.ring_mode;
		if (source_table_alloc(&run->str, &run->slen, CAP_MAX_STRINGS) < 0) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	if (f->h.ring_id && run->ring_id && f->h.ring_id != run->ring_id) {
		/* a run_id is made from a ring's name and creation: the files
		 * cannot both be right, and merging them would mix two rings */
		snprintf(err, errlen,
			 "%s: run id %016llx comes with ring id %016llx here and %016llx in "
			 "another input; export them separately",
			 f->path, (unsigned long long)f->h.run_id,
			 (unsigned long long)f->h.ring_id, (unsigned long long)run->ring_id);
		return -EINVAL;
	}
	if (f->h.ring_id)
		run->ring_id = f->h.ring_id;
	if (f->h.snapshot.cause) {
		const struct shmt_cap_snapshot *in = &f->h.snapshot;

		run->snapshot = true;
		run->snap_records = (in->end_seq > in->first_seq ? in->end_seq - in->first_seq : 0) +
				    in->staged;
	}
	return 0;
}

/* The snapshots among the inputs, for the exports to tell (source.h),
 * their times on the trace's clock as their records'. */
static int note_snapshots(struct source *s, struct source_capture *c)
{
	for (size_t i = 0; i < c->nfiles; i++) {
		const struct shmt_cap_snapshot *in = &c->files[i].h.snapshot;
		const struct source_run *run = source_run_of(c, c->files[i].h.run_id);
		struct source_snapshot *sn;

		if (!in->cause)
			continue;
		sn = realloc(s->snaps, (s->nsnaps + 1) * sizeof(*sn));
		if (!sn)
			return -ENOMEM;
		s->snaps = sn;
		sn = &s->snaps[s->nsnaps++];
		sn->ring_index = (uint32_t)(run - c->runs);
		snprintf(sn->ring, sizeof(sn->ring), "%s", c->files[i].h.ring);
		sn->cause = shmt_snap_cause_name(in->cause);
		snprintf(sn->trigger, sizeof(sn->trigger), "%s", in->trigger);
		sn->trigger_ns = in->trigger_ns + run->shift;
		sn->trigger_pid = in->trigger_pid;
		sn->trigger_tid = in->trigger_tid;
		sn->first_seq = in->first_seq;
		sn->end_seq = in->end_seq;
		/* 0: no start (capture.h), not a time to move */
		sn->from_ns = in->from_ns ? in->from_ns + run->shift : 0;
		sn->to_ns = in->to_ns + run->shift;
		sn->overwritten = in->overwritten;
		sn->staged = in->staged;
		sn->triggers = in->triggers;
		sn->suppressed = in->suppressed;
		sn->cut = in->cut;
	}
	return 0;
}

/* Reads every file's header into c->files and forms the runs. */
static int read_headers(struct source_capture *c, char *const *paths, size_t n, char *err,
			size_t errlen)
{
	int ret;

	for (size_t i = 0; i < n; i++) {
		struct shmt_cap_reader *r;
		char why[512];

		ret = shmt_cap_open(paths[i], &r, why, sizeof(why));
		if (ret < 0) {
			snprintf(err, errlen, "%s", why);	/* it names the file */
			return ret;
		}
		c->files[i].path = paths[i];
		c->files[i].h = *shmt_cap_header_of(r);
		shmt_cap_close(r);
		c->nfiles++;
		if ((ret = add_to_run(c, &c->files[i], err, errlen)) < 0)
			return ret;
	}
	qsort(c->files, c->nfiles, sizeof(*c->files), cmp_file);
	return 0;
}

/* With the ring read after them: everything after the captures is in it
 * when its tail is not past their end; then nothing is cut or missing
 * after the last part. */
static void tail_covers(struct source *s, struct source_capture *c)
{
	struct source_run *run = &c->runs[0];
	uint64_t end = 0;

	for (size_t i = 0; i < c->nfiles; i++)
		if (c->files[i].end_seq > end)
			end = c->files[i].end_seq;
	if (!source_tail_covers(c, end))
		return;
	run->tail_covers = true;
	run->clean_last = true;
	if (s->cut)
		fprintf(stderr, "shmtrace: ring '%s' holds the rest, from sequence %llu on\n",
			c->tail_ring, (unsigned long long)end);
	s->cut = false;
}

int source_open_files(struct source *s, char *const *paths, size_t n, char *err, size_t errlen)
{
	return source_open_files_ring(s, NULL, paths, n, err, errlen);
}

int source_open_files_ring(struct source *s, const char *ring, char *const *paths, size_t n,
			   char *err, size_t errlen)
{
	struct source_capture *c;
	const struct shmt_cap_header *h;
	int ret;

	memset(s, 0, sizeof(*s));
	s->ops = &source_capture_ops;
	if (n == 0) {
		snprintf(err, errlen, "no capture file given");
		return -EINVAL;
	}
	s->name = paths[0];
	s->inputs = paths;
	s->ninputs = n;
	s->perm = 07777;	/* narrowed by each file as it is read */
	s->be = c = calloc(1, sizeof(*c));
	if (c) {
		c->files = calloc(n, sizeof(*c->files));
		c->runs = calloc(n, sizeof(*c->runs));
	}
	if (!c || !c->files || !c->runs) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->tail_ring = ring;
	if ((ret = read_headers(c, paths, n, err, errlen)) < 0)
		return ret;
	s->nrings = (uint32_t)c->nruns;
	h = &c->files[0].h;
	s->realtime0 = h->realtime0;
	s->mono0 = h->mono0;
	s->clock_tsc = h->clock_tsc;
	s->capacity = h->ring_capacity;
	s->mode = h->ring_mode;
	if ((ret = source_group_hosts(s, c, err, errlen)) < 0)
		return ret;
	if (note_snapshots(s, c) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < c->nfiles; i++)
		if ((ret = read_file(s, &c->files[i], NULL, err, errlen)) < 0)
			return ret;
	if (ring) {
		if ((ret = source_tail_open(s, c, ring, err, errlen)) < 0)
			return ret;
		tail_covers(s, c);
	}
	if ((ret = source_find_missing(s, c)) < 0) {
		snprintf(err, errlen, "out of memory");
		return ret;
	}
	for (size_t i = 0; i < c->nruns; i++) {
		shmt_loss_merge(&s->loss.counters, &c->runs[i].loss, SHMT_LOSS_ADD);
		s->loss.missing += c->runs[i].missing;
	}
	return source_merge_strings(s, c, err, errlen);
}

static int cap_pass(struct source *s, struct source_pass *p, char *err, size_t errlen)
{
	struct source_capture *c = cap_of(s);
	int ret = 0;

	c->prev_run = NULL;
	for (size_t i = 0; i < c->nruns; i++) {
		c->runs[i].next_seq = 0;
		c->runs[i].records = 0;
		c->runs[i].bad = 0;
	}
	for (size_t i = 0; i < c->nfiles && !ret; i++)
		ret = read_file(s, &c->files[i], p, err, errlen);
	if (!ret)
		ret = source_tail_pass(s, c, p, err, errlen);
	return ret;
}

/*
 * After the first pass over a run whose last collector stopped cleanly:
 * every record the ring ever published is either in the capture, torn,
 * or was lapped (overwrite mode), so the lapped count is what remains.
 * A collector killed after writing records but before moving the ring's
 * tail leaves them to its successor, which may find them lapped and count
 * them again: the remainder bounds that. A remainder above the counts is
 * a loss nothing counted, reported as such, never hidden.
 */
static void reconcile(struct source *s)
{
	struct source_capture *c = cap_of(s);

	for (size_t i = 0; i < c->nruns; i++) {
		struct source_run *run = &c->runs[i];
		uint64_t seen = run->records + run->bad + run->loss.torn, rest;
		/* a snapshot vouches for its window and what it staged only */
		uint64_t published = run->snapshot ? run->snap_records : run->published;

		/* parts not among the inputs: their records, when known, are
		 * neither lost nor a bug (source_parts.c) */
		if (!published || !run->clean_last || run->missing_unknown ||
		    seen + run->missing > published)
			continue;
		rest = published - seen - run->missing;
		/* never below zero: a counter past what was published is
		 * corrupt (cap_plausible()), not a count to take from */
		if (run->loss.overwritten > rest)
			s->loss.overwritten -= run->loss.overwritten - rest < s->loss.overwritten
					       ? run->loss.overwritten - rest : s->loss.overwritten;
		else if (rest > run->loss.overwritten) {
			s->loss.unaccounted += rest - run->loss.overwritten;
			/* a ring loses nothing its counters miss: a capture is
			 * missing, or a forger shifted head and tail together by
			 * a multiple of 2^24, which keeps the slots matching (the
			 * commit word holds 24 bits of sequence), and a restarted
			 * collector captured them again past the jump */
			source_warnx("ring '%s': its sequences jump past %llu records that no capture "
				     "given holds and no counter counts: a capture of this run is "
				     "missing, or its head and tail were forged (and then records "
				     "may repeat)", run->ring,
				     (unsigned long long)(rest - run->loss.overwritten));
		}
	}
}

/* Each ring's counters against its age and what it published, then
 * their sum (loss.h, shmt_loss_plausible()). */
static bool cap_plausible(struct source *s, bool passed, char *why, size_t len)
{
	struct source_capture *c = cap_of(s);
	const struct shmt_loss_scope none = { 0 };
	char one[160];

	(void)passed;
	for (size_t i = 0; i < c->nruns; i++) {
		const struct source_run *run = &c->runs[i];
		struct shmt_loss_scope sc = {
			.published = run->published,
			.has_published = run->published != 0,
			.age_ns = shmt_loss_age_ns(run->realtime0),
			.discard = run->mode == SHMTRACE_MODE_DISCARD,
		};

		if (shmt_loss_plausible(&run->loss, &sc, one, sizeof(one)))
			continue;
		if (c->nruns > 1)
			snprintf(why, len, "ring '%s': %s", run->ring, one);
		else
			snprintf(why, len, "%s", one);
		return false;
	}
	return shmt_loss_plausible(&s->loss.counters, &none, why, len);
}

/* Whether ts moved by the signed shift sh stays within 0..2^63 - 1 (the
 * exports add a wall-clock anchor to it: that must not wrap either). */
static bool shift_fits(uint64_t ts, int64_t sh)
{
	if (ts > INT64_MAX)
		return false;
	return sh >= 0 ? ts <= (uint64_t)(INT64_MAX - sh) : ts >= (uint64_t)0 - (uint64_t)sh;
}

static int cap_clock_offset(struct source *s, const char *host, int64_t ns)
{
	struct source_capture *c = cap_of(s);
	bool found = false;

	/* all of host's runs checked before any is moved */
	for (size_t r = 0; r < c->nruns; r++) {
		const struct source_run *run = &c->runs[r];
		int64_t sh;

		if (strcmp(s->hosts[s->host_of[r]], host))
			continue;
		found = true;
		if (__builtin_add_overflow((int64_t)run->shift, ns, &sh) ||
		    (run->any_ts && (!shift_fits(run->ts_min, sh) || !shift_fits(run->ts_max, sh))))
			return -ERANGE;
	}
	for (size_t r = 0; r < c->nruns; r++)
		if (!strcmp(s->hosts[s->host_of[r]], host))
			c->runs[r].shift += (uint64_t)ns;
	for (size_t i = 0; i < s->nsnaps; i++) {
		struct source_snapshot *sn = &s->snaps[i];

		if (strcmp(s->hosts[s->host_of[sn->ring_index]], host))
			continue;
		sn->trigger_ns += (uint64_t)ns;
		if (sn->from_ns)
			sn->from_ns += (uint64_t)ns;
		sn->to_ns += (uint64_t)ns;
	}
	return found ? 0 : -ENOENT;
}

static void cap_ring_info(const struct source *s, uint32_t i, const char **name,
			  uint64_t *ring_id, uint64_t *run_id)
{
	const struct source_run *run = &cap_of(s)->runs[i];

	*name = run->ring;
	*ring_id = run->ring_id;
	*run_id = run->run_id;
}

static void cap_close(struct source *s)
{
	struct source_capture *c = cap_of(s);

	if (!c)
		return;
	source_tail_close(c);
	free(c->files);
	for (size_t i = 0; c->runs && i < c->nruns; i++) {
		source_table_free(c->runs[i].str, c->runs[i].slen, CAP_MAX_STRINGS);
		free(c->runs[i].map);
	}
	free(c->runs);
	free(c);
}

/* the slots of struct source_ops (source_int.h), as the other back-end
 * fills them: the same shape on purpose */
const struct source_ops source_capture_ops = {
	.kind = "capture",
	.pass = cap_pass,
	.first_pass_done = reconcile,
	.clock_offset = cap_clock_offset,
	.ring_info = cap_ring_info,
	.close = cap_close,
	.plausible = cap_plausible,
};
