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

struct source_run {
	uint64_t run_id;
	uint64_t next_seq;	/* records below it were delivered already */
	uint64_t torn;		/* the collector's torn count, cumulative */
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

static int set_string(struct source *s, uint32_t id, const char *text, size_t len)
{
	char *c;

	if (id == 0 || id >= s->nstr)
		return 0;
	c = malloc(len + 1);
	if (!c)
		return -ENOMEM;
	memcpy(c, text, len);
	c[len] = 0;
	free(s->str[id]);
	s->str[id] = c;
	s->slen[id] = (uint32_t)len;
	return 0;
}

static int alloc_strings(struct source *s, uint32_t n)
{
	s->str = calloc(n, sizeof(*s->str));
	s->slen = calloc(n, sizeof(*s->slen));
	if (!s->str || !s->slen)
		return -ENOMEM;
	s->nstr = n;
	return 0;
}

static int add_thread(struct source *s, const struct shmt_thread *t)
{
	if (s->nthr == s->thrcap) {
		size_t cap = s->thrcap ? s->thrcap * 2 : 64;
		struct shmt_thread *v = reallocarray(s->thr, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->thr = v;
		s->thrcap = cap;
	}
	s->thr[s->nthr] = *t;
	s->thr[s->nthr].name[SHMT_NAME_LEN - 1] = 0;
	s->thr[s->nthr].pname[SHMT_NAME_LEN - 1] = 0;
	s->nthr++;
	return 0;
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
	const struct shmt_header *h = s->v.h;
	uint32_t n = shmt_ring_nthreads(&s->v);
	int ret = ring_load_strings(s);

	if (ret < 0)
		return ret;
	for (uint32_t i = 0; i < n; i++) {
		struct shmt_thread t;

		if (shmt_ring_thread(&s->v, i, &t) == 0 && (ret = add_thread(s, &t)) < 0)
			return ret;
	}
	/* untrusted numbers: reported, never used as sizes */
	s->loss.dropped = load_relaxed(&h->dropped.v);
	s->loss.overwritten = load_relaxed(&h->overwritten.v);
	s->loss.lock_timeouts = load_relaxed(&h->lock_timeouts.v);
	s->loss.names_dropped = load_relaxed(&h->names_dropped.v);
	return 0;
}

int source_open_ring(struct source *s, const char *ring, char *err, size_t errlen)
{
	int ret;

	memset(s, 0, sizeof(*s));
	s->is_ring = true;
	s->name = ring;
	/* read-only, whoever owns it: a post-mortem reader never writes */
	ret = shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &s->v, err, errlen);
	if (ret < 0)
		return ret;
	s->realtime0 = s->v.clock.realtime0;
	s->mono0 = s->v.clock.mono0;
	s->clock_tsc = s->v.clock.tsc_ok;
	s->capacity = s->v.capacity;
	s->mode = s->v.mode;
	s->blockbuf = calloc(s->v.block_records, sizeof(*s->blockbuf));
	if (!s->blockbuf || alloc_strings(s, s->v.max_strings + 1) < 0) {
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
	uint64_t torn;
};

static int ring_pass(void *arg)
{
	struct pass *p = arg;
	struct source *s = p->s;
	const struct shmt_view *v = &s->v;
	uint64_t head = shmt_ring_head(v);
	uint64_t seq = head > v->capacity ? head - v->capacity : 0;
	struct shmt_record r;
	int ret;

	if ((ret = ring_load_strings(s)) < 0)
		return ret;
	for (; seq < head; seq++) {
		if (shmt_ring_read(v, seq, &r) < 0) {
			p->torn++;
			continue;
		}
		r.commit = SHMT_COMMIT_KIND(r.commit);
		s->records++;
		if ((ret = p->fn(p->ctx, &r, 0)) != 0)
			return ret;
	}
	/* records staged by threads (dead or alive) not yet in the ring */
	for (uint32_t b = 0; b < v->nblocks; b++) {
		struct shmt_block_info info;
		int n = shmt_ring_block_pending(v, b, s->blockbuf, &info);

		p->torn += info.skipped;
		for (int i = 0; i < n; i++) {
			s->records++;
			if ((ret = p->fn(p->ctx, &s->blockbuf[i], info.start_time)) != 0)
				return ret;
		}
	}
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
			for (size_t i = 0; i < f.strings.n && !ret; i++)
				ret = set_string(s, f.strings.v[i].id, f.strings.v[i].s,
						 f.strings.v[i].len);
			break;
		case SHMT_CAP_THREADS:
			if (p)
				break;
			for (size_t i = 0; i < f.threads.n && !ret; i++)
				ret = add_thread(s, &f.threads.v[i]);
			break;
		case SHMT_CAP_LOSS:
			if (p)
				break;
#define MAX_(a, b) do { if ((b) > (a)) (a) = (b); } while (0)
			/* ring counters are cumulative over the ring's life */
			MAX_(s->loss.dropped, f.loss.dropped);
			MAX_(s->loss.overwritten, f.loss.overwritten);
			MAX_(s->loss.lock_timeouts, f.loss.lock_timeouts);
			MAX_(s->loss.names_dropped, f.loss.names_dropped);
			MAX_(run->torn, f.loss.torn);
			break;
		case SHMT_CAP_RECORDS: {
			uint64_t first = f.records.first_seq;
			size_t i = 0;

			if (!p)
				break;
			/* a restarted collector may write a batch again */
			if (run->next_seq > first)
				i = run->next_seq - first < f.records.n ? run->next_seq - first
									: f.records.n;
			for (; i < f.records.n && !ret; i++) {
				struct shmt_record rec = f.records.v[i];

				rec.commit = SHMT_COMMIT_KIND(rec.commit);
				if (rec.commit == SHMTRACE_KIND_NONE || rec.commit > SHMTRACE_KIND_MAX) {
					p->torn++;
					continue;
				}
				s->records++;
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

int source_open_files(struct source *s, char *const *paths, size_t n, char *err, size_t errlen)
{
	int ret;

	memset(s, 0, sizeof(*s));
	if (n == 0) {
		snprintf(err, errlen, "no capture file given");
		return -EINVAL;
	}
	s->name = paths[0];
	s->files = calloc(n, sizeof(*s->files));
	s->runs = calloc(n, sizeof(*s->runs));
	if (!s->files || !s->runs || alloc_strings(s, CAP_MAX_STRINGS) < 0) {
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
		if (!run_of(s, s->files[i].h.run_id))
			s->runs[s->nruns++].run_id = s->files[i].h.run_id;
	}
	qsort(s->files, s->nfiles, sizeof(*s->files), cmp_file);
	if (n) {
		const struct shmt_cap_header *h = &s->files[0].h;

		s->realtime0 = h->realtime0;
		s->mono0 = h->mono0;
		s->clock_tsc = h->clock_tsc;
		s->capacity = h->ring_capacity;
		s->mode = h->ring_mode;
	}
	for (size_t i = 0; i < s->nfiles; i++)
		if ((ret = read_file(s, &s->files[i], NULL, err, errlen)) < 0)
			return ret;
	for (size_t i = 0; i < s->nruns; i++)
		s->loss.torn += s->runs[i].torn;
	return 0;
}

/* ---------------------------------------------------------------- common */

int source_records(struct source *s, source_record_fn fn, void *ctx, char *err, size_t errlen)
{
	struct pass p = { .s = s, .fn = fn, .ctx = ctx };
	int ret = 0;

	s->records = 0;
	if (s->is_ring) {
		ret = shmt_guarded(ring_pass, &p);
		if (ret == -EFAULT)
			snprintf(err, errlen, "ring '%s': segment shrank while being read", s->name);
		else if (ret < 0)
			snprintf(err, errlen, "ring '%s': %s", s->name, strerror(-ret));
	} else {
		for (size_t i = 0; i < s->nruns; i++)
			s->runs[i].next_seq = 0;
		for (size_t i = 0; i < s->nfiles && !ret; i++)
			ret = read_file(s, &s->files[i], &p, err, errlen);
	}
	/* every pass sees the same torn records: count them once */
	if (!s->passes++)
		s->loss.torn += p.torn;
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
	free(s->files);
	free(s->runs);
	free(s->blockbuf);
	memset(s, 0, sizeof(*s));
}

int source_open(struct source *s, const char *ring, char *const *paths, size_t n,
		char *err, size_t errlen)
{
	return ring ? source_open_ring(s, ring, err, errlen)
		    : source_open_files(s, paths, n, err, errlen);
}
