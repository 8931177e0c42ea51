// SPDX-License-Identifier: MIT
/*
 * source.c - reading a trace from capture files or from a ring, so that
 * export, summary and stat share one notion of "the records of a run".
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "ring_reader.h"
#include "source.h"

#define CAP_MAX_STRINGS 65536u	/* record string ids are 16 bits */

struct source_file {
	char *path;
	struct shmt_cap_header h;
};

/* One ring's life: the files that share a run_id (and a ring_id). */
struct source_run {
	uint64_t run_id;
	uint64_t ring_id;	/* 0: its files carry none (older collector) */
	char ring[256];		/* the ring's name */
	uint64_t realtime0, mono0;	/* its wall-clock anchor */
	uint64_t shift;		/* added to its records' ts (wrapping: signed) */
	uint64_t next_seq;	/* records below it were delivered already */
	/* the ring's counters, the largest seen; torn is the collectors' */
	struct shmt_loss loss;
	uint64_t published;	/* the ring's head in the last loss frame */
	bool clean_last;	/* its newest file ended with an END frame */
	/* of the current pass */
	uint64_t records;	/* distinct records delivered */
	uint64_t bad;		/* records with an invalid kind */
	char **str;		/* its own string table, while loading */
	uint32_t *slen;
	uint16_t *map;		/* its string ids -> the source's, or NULL */
};

void warnx_(const char *fmt, ...)
{
	va_list ap;

	fputs("shmtrace: warning: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* str[id] = text[0..len), in a table of n ids. */
static int set_text(char **str, uint32_t *slen, uint32_t n, uint32_t id, const char *text,
		    size_t len)
{
	char *c;

	if (!str || id == 0 || id >= n)
		return 0;
	c = malloc(len + 1);
	if (!c)
		return -ENOMEM;
	memcpy(c, text, len);
	c[len] = 0;
	free(str[id]);
	str[id] = c;
	slen[id] = (uint32_t)len;
	return 0;
}

static int set_string(struct source *s, uint32_t id, const char *text, size_t len)
{
	return set_text(s->str, s->slen, s->nstr, id, text, len);
}

static int alloc_table(char ***str, uint32_t **slen, uint32_t n)
{
	*str = calloc(n, sizeof(**str));
	*slen = calloc(n, sizeof(**slen));
	return *str && *slen ? 0 : -ENOMEM;
}

static void free_table(char **str, uint32_t *slen, uint32_t n)
{
	for (uint32_t i = 0; str && i < n; i++)
		free(str[i]);
	free(str);
	free(slen);
}

static int alloc_strings(struct source *s, uint32_t n)
{
	if (alloc_table(&s->str, &s->slen, n) < 0)
		return -ENOMEM;
	s->nstr = n;
	return 0;
}

static int add_thread(struct source *s, const struct shmt_thread *t, uint32_t ring)
{
	if (s->nthr == s->thrcap) {
		size_t cap = s->thrcap ? s->thrcap * 2 : 64;
		struct shmt_thread *v = reallocarray(s->thr, cap, sizeof(*v));
		uint32_t *r;

		if (!v)
			return -ENOMEM;
		s->thr = v;
		r = reallocarray(s->thr_ring, cap, sizeof(*r));
		if (!r)
			return -ENOMEM;
		s->thr_ring = r;
		s->thrcap = cap;
	}
	s->thr_ring[s->nthr] = ring;
	s->thr[s->nthr] = *t;
	s->thr[s->nthr].name[SHMT_NAME_LEN - 1] = 0;
	s->thr[s->nthr].pname[SHMT_NAME_LEN - 1] = 0;
	s->nthr++;
	return 0;
}

bool source_has_string(const struct source *s, uint32_t id)
{
	return id != 0 && id < s->nstr && s->str[id];
}

void source_strings_used(const struct source *s, uint32_t *n, uint64_t *bytes)
{
	*n = 0;
	*bytes = 0;
	for (uint32_t id = 1; id < s->nstr; id++) {
		if (s->str[id]) {
			(*n)++;
			*bytes += s->slen[id] + 1ull;
		}
	}
}

const char *source_string(struct source *s, uint32_t id, size_t *len)
{
	if (id == 0 || id >= s->nstr || !s->str[id]) {
		*len = 1;
		return "?";
	}
	*len = s->slen[id];
	return s->str[id];
}

/* ------------------------------------------------------------------ ring */

/* Loads the strings not loaded yet (a live ring interns more meanwhile). */
static int ring_load_strings(struct source *s)
{
	uint32_t n = shmt_ring_nstrings(&s->v);
	char buf[SHMT_STRING_MAX + 1];

	if (n > s->nstr)
		n = s->nstr;
	for (uint32_t id = 1; id < n; id++) {
		int len;

		if (s->str[id])
			continue;
		len = shmt_ring_string(&s->v, id, buf, sizeof(buf));
		/* a bad entry stays unknown and exports as "?" */
		if (len >= 0 && set_string(s, id, buf, (size_t)len) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int ring_load(void *arg)
{
	struct source *s = arg;
	uint32_t n = shmt_ring_nthreads(&s->v);
	int ret = ring_load_strings(s);

	if (ret < 0)
		return ret;
	for (uint32_t i = 0; i < n; i++) {
		struct shmt_thread t;

		if (shmt_ring_thread(&s->v, i, &t) == 0 && (ret = add_thread(s, &t, 0)) < 0)
			return ret;
	}
	/* untrusted numbers: reported, never used as sizes */
	shmt_loss_read(&s->v, &s->loss.counters);
	return 0;
}

int source_open_ring(struct source *s, const char *ring, char *err, size_t errlen)
{
	int ret;

	memset(s, 0, sizeof(*s));
	s->is_ring = true;
	s->name = ring;
	s->nrings = 1;
	/* read-only, whoever owns it: a post-mortem reader never writes */
	ret = shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &s->v, err, errlen);
	if (ret < 0)
		return ret;
	s->realtime0 = s->v.clock.realtime0;
	s->mono0 = s->v.clock.mono0;
	s->clock_tsc = s->v.clock.tsc_ok;
	s->capacity = s->v.capacity;
	s->mode = s->v.mode;
	s->tables.max_strings = s->v.max_strings;
	s->tables.string_bytes = s->v.string_bytes;
	s->tables.max_threads = s->v.max_threads;
	s->blockbuf = calloc(s->v.block_records, sizeof(*s->blockbuf));
	s->host_of = calloc(1, sizeof(*s->host_of));
	s->hosts = calloc(1, sizeof(*s->hosts));
	if (s->hosts) {
		/* a ring is read where it lives */
		s->nhosts = 1;
		if (gethostname(s->hosts[0], sizeof(s->hosts[0]) - 1) < 0)
			snprintf(s->hosts[0], sizeof(s->hosts[0]), "localhost");
	}
	if (!s->blockbuf || !s->host_of || !s->hosts || alloc_strings(s, s->v.max_strings + 1) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = shmt_guarded(ring_load, s);
	if (ret < 0)
		snprintf(err, errlen, "ring '%s': %s", ring,
			 ret == -EFAULT ? "segment shrank while being read" : strerror(-ret));
	return ret;
}

struct pass {
	struct source *s;
	source_record_fn fn;
	void *ctx;
	struct shmt_ring_skips skips;	/* torn and lapped, of this pass */
};

static int ring_one(void *arg, uint64_t seq, const struct shmt_record *r)
{
	struct pass *p = arg;
	struct source *s = p->s;
	int ret;

	(void)seq;
	if (!r) {
		s->follows = false;
		return 0;
	}
	s->records++;
	ret = p->fn(p->ctx, r, 0);
	/* the next one follows this one unless a slot is skipped */
	s->follows = true;
	return ret;
}

static int ring_pass(void *arg)
{
	struct pass *p = arg;
	struct source *s = p->s;
	const struct shmt_view *v = &s->v;
	uint64_t head = shmt_ring_head(v);
	uint64_t seq = head > v->capacity ? head - v->capacity : 0;
	/* untrusted, and only used to attribute losses */
	uint64_t tail = load_acquire(&v->h->tail.v);
	int ret;

	if ((ret = ring_load_strings(s)) < 0)
		return ret;
	/* what the head lapped before anyone read it (no collector, or one
	 * that fell behind): counted once, like the torn ones below */
	p->skips.lapped += shmt_ring_unread_below(v, seq);
	s->follows = false;
	ret = shmt_ring_read_range(v, seq, head, tail, &p->skips, ring_one, p);
	if (ret != 0)
		return ret;
	/* records staged by threads (dead or alive) not yet in the ring */
	for (uint32_t b = 0; b < v->nblocks; b++) {
		struct shmt_block_info info;
		struct shmt_record open[SHMT_OPEN_MAX];
		int n = shmt_ring_block_pending(v, b, s->blockbuf, &info);
		uint32_t nopen;

		p->skips.torn += info.skipped;
		for (int i = 0; i < n; i++) {
			s->records++;
			/* a block with skipped slots: which ones is not known */
			s->follows = i > 0 && !info.skipped;
			if ((ret = p->fn(p->ctx, &s->blockbuf[i], info.start_time)) != 0)
				return ret;
		}
		/* the spans its thread is in (or died in), outermost first */
		nopen = shmt_block_open_spans(v, b, open);
		s->follows = false;
		for (uint32_t i = 0; i < nopen; i++)
			if ((ret = p->fn(p->ctx, &open[i], info.start_time)) != 0)
				return ret;
	}
	s->follows = false;
	/* strings interned during the pass */
	return ring_load_strings(s);
}

/* --------------------------------------------------------------- capture */

static int cmp_file(const void *pa, const void *pb)
{
	const struct source_file *a = pa, *b = pb;

	if (a->h.started_ns != b->h.started_ns)
		return a->h.started_ns < b->h.started_ns ? -1 : 1;
	if (a->h.run_id != b->h.run_id)
		return a->h.run_id < b->h.run_id ? -1 : 1;
	return a->h.part < b->h.part ? -1 : a->h.part > b->h.part;
}

static struct source_run *run_of(struct source *s, uint64_t run_id)
{
	for (size_t i = 0; i < s->nruns; i++)
		if (s->runs[i].run_id == run_id)
			return &s->runs[i];
	return NULL;
}

/* True when the collector that the header names still runs here: same
 * host, and that pid is a shmtrace-collector. A capture without its END
 * frame is then one being written, not one cut short. */
static bool collector_writing(const struct shmt_cap_header *h)
{
	char host[sizeof(h->host)] = "", path[64], comm[32] = "";
	FILE *f;

	if (!h->collector_pid || gethostname(host, sizeof(host) - 1) < 0 ||
	    strncmp(host, h->host, sizeof(host)))
		return false;
	snprintf(path, sizeof(path), "/proc/%u/comm", h->collector_pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = 0;
	fclose(f);
	/* the kernel cuts comm to 15 bytes: "shmtrace-collec" */
	return !strncmp(comm, "shmtrace-collec", 15);
}

/* Reads one file's frames; pass 1 loads tables, pass 2 delivers records.
 * Warnings about its end are printed on pass 1 only. */
static int read_file(struct source *s, struct source_file *sf, struct pass *p,
		     char *err, size_t errlen)
{
	struct source_run *run = run_of(s, sf->h.run_id);
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
	while ((ret = shmt_cap_next(r, &f, why, sizeof(why))) == 1) {
		ret = 0;
		switch (f.type) {
		case SHMT_CAP_STRINGS:
			if (p)
				break;
			/* ids are the ring's own: each ring has its table */
			for (size_t i = 0; i < f.strings.n && !ret; i++)
				ret = set_text(run->str, run->slen, CAP_MAX_STRINGS,
					       f.strings.v[i].id, f.strings.v[i].s,
					       f.strings.v[i].len);
			break;
		case SHMT_CAP_THREADS:
			if (p)
				break;
			for (size_t i = 0; i < f.threads.n && !ret; i++)
				ret = add_thread(s, &f.threads.v[i], (uint32_t)(run - s->runs));
			break;
		case SHMT_CAP_LOSS:
			if (p)
				break;
			/* ring counters are cumulative over the ring's life;
			 * two rings' are added up at the end */
			shmt_loss_merge(&run->loss, &f.loss.counters, SHMT_LOSS_MAX);
			if (f.loss.published > run->published)
				run->published = f.loss.published;
			/* geometry: the same in every frame of a ring */
			if (f.loss.max_strings)
				s->tables.max_strings = f.loss.max_strings;
			if (f.loss.string_bytes)
				s->tables.string_bytes = f.loss.string_bytes;
			if (f.loss.max_threads)
				s->tables.max_threads = f.loss.max_threads;
			break;
		case SHMT_CAP_RECORDS: {
			uint64_t first = f.records.first_seq;
			size_t i = 0;

			if (!p)
				break;
			s->ring = (uint32_t)(run - s->runs);
			/* a restarted collector may write a batch again */
			if (run->next_seq > first)
				i = run->next_seq - first < f.records.n ? run->next_seq - first
									: f.records.n;
			for (; i < f.records.n && !ret; i++) {
				struct shmt_record rec = f.records.v[i];

				rec.commit = SHMT_COMMIT_KIND(rec.commit);
				if (!shmt_kind_valid(rec.commit)) {
					p->skips.torn++;
					run->bad++;
					continue;
				}
				if (run->map) {
					rec.name = run->map[rec.name];
					rec.cat = run->map[rec.cat];
				}
				rec.ts += run->shift;
				s->records++;
				run->records++;
				s->follows = s->prev_run == run && s->prev_seq + 1 == first + i;
				s->prev_run = run;
				s->prev_seq = first + i;
				ret = p->fn(p->ctx, &rec, 0);
			}
			if (first + f.records.n > run->next_seq)
				run->next_seq = first + f.records.n;
			break;
		}
		default:
			break;
		}
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
	if (ret < 0 && !p) {
		if (ret == -EPIPE) {
			s->cut = true;
			if (collector_writing(&sf->h))
				warnx_("%s is still being written by shmtrace-collector (pid %u); "
				       "reading what it holds so far", sf->path, sf->h.collector_pid);
			else
				warnx_("%s is cut short (%s); exporting everything before it",
				       sf->path, why);
		} else if (ret == -EBADMSG) {
			s->damaged = true;
			warnx_("%s has a damaged frame (%s); keeping what was read before it",
			       sf->path, why);
		} else {
			s->damaged = true;
			warnx_("%s: %s; keeping what was read", sf->path, why);
		}
	}
	return 0;
}

/* Text hash for merge_strings(). */
static uint32_t text_hash(const char *t, uint32_t len)
{
	uint32_t h = 2166136261u;

	for (uint32_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)t[i]) * 16777619u;
	return h;
}

/*
 * Gives the source one string table. One ring: its own. Several: every
 * distinct text gets one id of a new table (first ring first, then by id),
 * and each ring a map from its ids to those; an id a ring never defined
 * maps to 0 and shows as "?", as it would alone.
 */
static int merge_strings(struct source *s, char *err, size_t errlen)
{
	const uint32_t nslots = 2 * CAP_MAX_STRINGS;	/* power of two */
	uint32_t *slot, next = 0;

	if (s->nruns == 1) {
		s->str = s->runs[0].str;
		s->slen = s->runs[0].slen;
		s->nstr = CAP_MAX_STRINGS;
		s->runs[0].str = NULL;
		s->runs[0].slen = NULL;
		return 0;
	}
	slot = calloc(nslots, sizeof(*slot));
	if (!slot || alloc_strings(s, CAP_MAX_STRINGS) < 0) {
		free(slot);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t r = 0; r < s->nruns; r++) {
		struct source_run *run = &s->runs[r];

		run->map = calloc(CAP_MAX_STRINGS, sizeof(*run->map));
		if (!run->map) {
			free(slot);
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		for (uint32_t id = 1; run->str && id < CAP_MAX_STRINGS; id++) {
			const char *t = run->str[id];
			uint32_t len = run->slen[id], h;

			if (!t)
				continue;
			h = text_hash(t, len) & (nslots - 1);
			while (slot[h] && (s->slen[slot[h]] != len ||
					   memcmp(s->str[slot[h]], t, len)))
				h = (h + 1) & (nslots - 1);
			if (!slot[h]) {
				if (++next >= CAP_MAX_STRINGS) {
					free(slot);
					snprintf(err, errlen,
						 "the inputs' %zu rings hold more than %u distinct "
						 "names together; export them separately",
						 s->nruns, CAP_MAX_STRINGS - 1);
					return -E2BIG;
				}
				/* the text moves to the source's table */
				s->str[next] = run->str[id];
				s->slen[next] = len;
				run->str[id] = NULL;
				slot[h] = next;
			}
			run->map[id] = (uint16_t)slot[h];
		}
		free_table(run->str, run->slen, CAP_MAX_STRINGS);
		run->str = NULL;
		run->slen = NULL;
	}
	free(slot);
	return 0;
}

/*
 * Groups the runs by host and, when there are several hosts, moves each
 * run of another host than the first file's onto that file's clock: a
 * record at ring time ts happened at wall time realtime0 + ts - mono0 of
 * its own ring, which is ring time of the first file's ring ts + (its
 * realtime0 - mono0) - (the first's realtime0 - mono0). Rings of one host
 * share CLOCK_MONOTONIC and are left alone (their anchors are read a few
 * microseconds apart, which would only add error).
 */
static int group_hosts(struct source *s, char *err, size_t errlen)
{
	const struct source_run *ref = run_of(s, s->files[0].h.run_id);
	uint32_t refhost = 0;

	s->host_of = calloc(s->nruns, sizeof(*s->host_of));
	s->hosts = calloc(s->nruns, sizeof(*s->hosts));
	if (!s->host_of || !s->hosts) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t r = 0; r < s->nruns; r++) {
		const char *host = "";
		uint32_t h;

		/* every run has a file: its first one names the host */
		for (size_t i = 0; i < s->nfiles; i++) {
			if (s->files[i].h.run_id == s->runs[r].run_id) {
				host = s->files[i].h.host;
				break;
			}
		}
		for (h = 0; h < s->nhosts && strcmp(s->hosts[h], host); h++)
			;
		if (h == s->nhosts)
			snprintf(s->hosts[s->nhosts++], sizeof(s->hosts[0]), "%s", host);
		s->host_of[r] = h;
		if (&s->runs[r] == ref)
			refhost = h;
	}
	for (size_t r = 0; s->nhosts > 1 && r < s->nruns; r++) {
		struct source_run *run = &s->runs[r];

		if (s->host_of[r] != refhost)
			run->shift = (run->realtime0 - run->mono0) - (ref->realtime0 - ref->mono0);
	}
	return 0;
}

int source_clock_offset(struct source *s, const char *host, int64_t ns)
{
	bool found = false;

	if (s->is_ring)
		/* one host: an offset would move everything alike */
		return s->nhosts && !strcmp(s->hosts[0], host) ? 0 : -ENOENT;
	for (size_t r = 0; r < s->nruns; r++) {
		if (strcmp(s->hosts[s->host_of[r]], host))
			continue;
		s->runs[r].shift += (uint64_t)ns;
		found = true;
	}
	return found ? 0 : -ENOENT;
}

/* Puts file i in its ring's run, refusing one run_id for two ring_ids. */
static int add_to_run(struct source *s, const struct source_file *f, char *err, size_t errlen)
{
	struct source_run *run = run_of(s, f->h.run_id);

	if (!run) {
		run = &s->runs[s->nruns++];
		run->run_id = f->h.run_id;
		snprintf(run->ring, sizeof(run->ring), "%s", f->h.ring);
		run->realtime0 = f->h.realtime0;
		run->mono0 = f->h.mono0;
		if (alloc_table(&run->str, &run->slen, CAP_MAX_STRINGS) < 0) {
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
	return 0;
}

int source_open_files(struct source *s, char *const *paths, size_t n, char *err, size_t errlen)
{
	int ret;

	memset(s, 0, sizeof(*s));
	if (n == 0) {
		snprintf(err, errlen, "no capture file given");
		return -EINVAL;
	}
	s->name = paths[0];
	s->inputs = paths;
	s->ninputs = n;
	s->files = calloc(n, sizeof(*s->files));
	s->runs = calloc(n, sizeof(*s->runs));
	if (!s->files || !s->runs) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct shmt_cap_reader *r;
		char why[512];

		ret = shmt_cap_open(paths[i], &r, why, sizeof(why));
		if (ret < 0) {
			snprintf(err, errlen, "%s", why);	/* it names the file */
			return ret;
		}
		s->files[i].path = paths[i];
		s->files[i].h = *shmt_cap_header_of(r);
		shmt_cap_close(r);
		s->nfiles++;
		if ((ret = add_to_run(s, &s->files[i], err, errlen)) < 0)
			return ret;
	}
	s->nrings = (uint32_t)s->nruns;
	qsort(s->files, s->nfiles, sizeof(*s->files), cmp_file);
	if (n) {
		const struct shmt_cap_header *h = &s->files[0].h;

		s->realtime0 = h->realtime0;
		s->mono0 = h->mono0;
		s->clock_tsc = h->clock_tsc;
		s->capacity = h->ring_capacity;
		s->mode = h->ring_mode;
	}
	if ((ret = group_hosts(s, err, errlen)) < 0)
		return ret;
	for (size_t i = 0; i < s->nfiles; i++)
		if ((ret = read_file(s, &s->files[i], NULL, err, errlen)) < 0)
			return ret;
	for (size_t i = 0; i < s->nruns; i++) {
		const struct source_run *run = &s->runs[i];

		shmt_loss_merge(&s->loss.counters, &run->loss, SHMT_LOSS_ADD);
	}
	return merge_strings(s, err, errlen);
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
	for (size_t i = 0; i < s->nruns; i++) {
		struct source_run *run = &s->runs[i];
		uint64_t seen = run->records + run->bad + run->loss.torn, rest;

		if (!run->published || !run->clean_last || seen > run->published)
			continue;
		rest = run->published - seen;
		if (run->loss.overwritten > rest)
			s->loss.overwritten -= run->loss.overwritten - rest;
		else if (rest > run->loss.overwritten)
			s->loss.unaccounted += rest - run->loss.overwritten;
	}
}

/* ---------------------------------------------------------------- common */

int source_records(struct source *s, source_record_fn fn, void *ctx, char *err, size_t errlen)
{
	struct pass p = { .s = s, .fn = fn, .ctx = ctx };
	int ret = 0;

	s->records = 0;
	s->follows = false;
	s->prev_run = NULL;
	if (s->is_ring) {
		ret = shmt_guarded(ring_pass, &p);
		if (ret == -EFAULT)
			snprintf(err, errlen, "ring '%s': segment shrank while being read", s->name);
		else if (ret < 0)
			snprintf(err, errlen, "ring '%s': %s", s->name, strerror(-ret));
	} else {
		for (size_t i = 0; i < s->nruns; i++) {
			s->runs[i].next_seq = 0;
			s->runs[i].records = 0;
			s->runs[i].bad = 0;
		}
		for (size_t i = 0; i < s->nfiles && !ret; i++)
			ret = read_file(s, &s->files[i], &p, err, errlen);
	}
	/* every pass sees the same torn records: count them once */
	if (!s->passes++) {
		s->loss.torn += p.skips.torn;
		s->loss.overwritten += p.skips.lapped;
		if (!s->is_ring && ret == 0)
			reconcile(s);
	}
	return ret;
}

void source_close(struct source *s)
{
	if (s->is_ring)
		shmt_view_close(&s->v);
	for (uint32_t i = 0; i < s->nstr; i++)
		free(s->str[i]);
	free(s->str);
	free(s->slen);
	free(s->thr);
	free(s->thr_ring);
	free(s->host_of);
	free(s->hosts);
	free(s->files);
	for (size_t i = 0; i < s->nruns; i++) {
		free_table(s->runs[i].str, s->runs[i].slen, CAP_MAX_STRINGS);
		free(s->runs[i].map);
	}
	free(s->runs);
	free(s->blockbuf);
	memset(s, 0, sizeof(*s));
}

/*
 * Counters are only ever added to, so one at 2^63 or more went below zero
 * (the bug of a writer, or a forged value): it is refused, never printed
 * as a count, and the trace is marked incomplete.
 */
static void refuse_impossible(struct source *s)
{
	struct {
		uint64_t *v;
		const char *name;
	} c[] = {
		{ &s->loss.dropped, "dropped" },
		{ &s->loss.overwritten, "overwritten" },
		{ &s->loss.lock_timeouts, "lock_timeouts" },
		{ &s->loss.torn, "torn" },
		{ &s->loss.names_dropped, "thread_names_dropped" },
		{ &s->loss.strings_dropped, "strings_dropped" },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		if (*c[i].v < (1ull << 63))
			continue;
		warnx_("%s: the '%s' counter reads %llu, an impossible (negative) count: "
		       "not reported", s->name, c[i].name, (unsigned long long)*c[i].v);
		*c[i].v = 0;
		s->damaged = true;
	}
}

int source_ring_info(const struct source *s, uint32_t i, const char **name, uint64_t *ring_id,
		     uint64_t *run_id)
{
	if (i >= s->nrings)
		return -ENOENT;
	if (s->is_ring) {
		*name = s->name;
		/* set once at creation (minor 1); 0 before that */
		*ring_id = s->v.minor >= 1 ? s->v.h->ring_id : 0;
		*run_id = 0;
		return 0;
	}
	*name = s->runs[i].ring;
	*ring_id = s->runs[i].ring_id;
	*run_id = s->runs[i].run_id;
	return 0;
}

int source_open(struct source *s, const char *ring, char *const *paths, size_t n,
		char *err, size_t errlen)
{
	int ret = ring ? source_open_ring(s, ring, err, errlen)
		       : source_open_files(s, paths, n, err, errlen);

	if (ret == 0)
		refuse_impossible(s);
	return ret;
}
