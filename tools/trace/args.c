/* SPDX-License-Identifier: MIT */
/*
 * args.c - argument records attached to their event, and open spans with
 * their arguments and their end, the same way for every export.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "array.h"
#include "extsort.h"
#include "flows.h"

void args_hold(struct args_pend *p, const struct shmt_record *r, uint32_t pid, uint32_t ring,
	       uint64_t seq)
{
	p->r = *r;
	p->pid = pid;
	p->ring = ring;
	p->seq = seq;
	p->a.n = 0;
	p->a.count = 0;
	p->has = true;
	p->twant = 0;
	p->tlen = 0;
}

/* Keeps text t[0..len) in s, for the export's life: *off says where. */
static int text_keep(struct args_store *s, const char *t, uint32_t len, uint64_t *off)
{
	if (s->tlen + len <= ARGS_TEXT_MEM) {
		if (array_reserve_max(&s->text, &s->tcap, s->tlen + len, 1, 4096, ARGS_TEXT_MEM) < 0)
			return -ENOMEM;
		memcpy(s->text + s->tlen, t, len);
		*off = s->tlen;
		s->tlen += len;
		return 0;
	}
	if (s->tfd < 0 && (s->tfd = extsort_tempfile()) < 0) {
		int ret = s->tfd;

		s->tfd = -1;
		return ret;
	}
	if (pwrite(s->tfd, t, len, (off_t)s->tfile) != (ssize_t)len)
		return errno ? -errno : -ENOSPC;
	*off = ARGS_TEXT_MEM + s->tfile;
	s->tfile += len;
	return 0;
}

/*
 * An argument record belongs to the event right before it in the ring's
 * sequence, which must be its owner (pid, tid, ts and name), and comes in
 * order 1..count. Anything else (its event lost to a torn slot, a lapped
 * one, a forgery) is counted and dropped: never attached to another event.
 * A text argument waits for its text records (on_text()).
 */
static void on_arg(struct args_pend *p, const struct shmt_record *r, bool follows)
{
	const struct shmt_record *e = &p->r;
	struct ev_args *a = &p->a;
	uint32_t type = SHMT_ARG_TYPE(r->flow), i = SHMT_ARG_INDEX(r->flow);
	uint32_t n = SHMT_ARG_COUNT(r->flow);

	if (p->twant) {
		/* the text before it is not whole: lost, and so is this one
		 * (a->n did not count it, so the order check fails) */
		p->lost++;
		p->twant = 0;
	}
	if (!p->has || !follows || r->pid != e->pid || r->tid != e->tid || r->ts != e->ts ||
	    r->cat != e->name || i != a->n + 1 || n > SHMTRACE_MAX_ARGS || i > n ||
	    (a->n && n != a->count) ||
	    (type != SHMTRACE_ARG_INT && type != SHMTRACE_ARG_STR && type != SHMTRACE_ARG_TEXT) ||
	    (type == SHMTRACE_ARG_TEXT && SHMT_TEXT_LEN(r->dur) > SHMTRACE_TEXT_MAX - p->tlen)) {
		p->lost++;
		return;
	}
	a->count = n;
	a->a[a->n].key = r->name;
	a->a[a->n].type = type;
	a->a[a->n].value = r->dur;
	a->a[a->n].off = 0;
	if (type == SHMTRACE_ARG_TEXT && SHMT_TEXT_LEN(r->dur)) {
		p->twant = SHMT_TEXT_RECORDS(SHMT_TEXT_LEN(r->dur));
		p->tstart = p->tlen;
		return;
	}
	a->n++;
}

/* A text record: the next bytes of the text argument waiting for them,
 * which is attached once they all came (kept in s). A text record with
 * no argument waiting is of one already counted lost (or never
 * attached), and is dropped. */
static int on_text(struct args_pend *p, struct args_store *s, const struct shmt_record *r,
		   bool follows)
{
	const struct shmt_record *e = &p->r;
	struct ev_args *a = &p->a;
	uint32_t len, have, k;
	char chunk[SHMT_TEXT_CHUNK];

	if (!p->twant)
		return 0;
	len = SHMT_TEXT_LEN(a->a[a->n].value);
	have = p->tlen - p->tstart;
	if (!p->has || !follows || r->pid != e->pid || r->tid != e->tid || r->ts != e->ts ||
	    have >= len) {
		p->lost++;
		p->twant = 0;
		return 0;
	}
	k = len - have < SHMT_TEXT_CHUNK ? len - have : SHMT_TEXT_CHUNK;
	shmt_text_get(r, chunk);
	memcpy(p->text + p->tlen, chunk, k);
	p->tlen += k;
	if (--p->twant)
		return 0;
	a->n++;
	return text_keep(s, p->text + p->tstart, len, &a->a[a->n - 1].off);
}

int args_on_arg(struct args_pend *p, struct args_store *s, const struct shmt_record *r,
		bool follows)
{
	if (shmt_record_kind(r) == SHMTRACE_KIND_TEXT)
		return on_text(p, s, r, follows);
	on_arg(p, r, follows);
	return 0;
}

bool args_take(struct args_pend *p)
{
	if (!p->has)
		return false;
	if (p->twant) {
		/* its text did not all come: never shown in part */
		p->lost++;
		p->twant = 0;
	}
	p->has = false;
	p->args += p->a.n;
	return true;
}

void args_store_init(struct args_store *s)
{
	s->v = NULL;
	s->n = s->cap = 0;
	s->fd = -1;
	s->nfile = 0;
	s->text = NULL;
	s->tlen = s->tcap = 0;
	s->tfd = -1;
	s->tfile = 0;
}

int args_keep(struct args_store *s, const struct ev_args *a, uint32_t *idx)
{
	*idx = 0;
	if (!a || !a->n)
		return 0;
	if (s->n == s->cap && s->cap < ARGS_MEM / sizeof(*a) &&
	    array_reserve_max(&s->v, &s->cap, s->n + 1, sizeof(*s->v), 64, ARGS_MEM / sizeof(*a)) < 0)
		return -ENOMEM;
	if (s->n < s->cap) {
		s->v[s->n] = *a;
	} else {
		/* beyond memory: at its place in the file */
		off_t off = (off_t)((s->n - s->cap) * sizeof(*a));

		if (s->fd < 0 && (s->fd = extsort_tempfile()) < 0) {
			int ret = s->fd;

			s->fd = -1;
			return ret;
		}
		if (pwrite(s->fd, a, sizeof(*a), off) != (ssize_t)sizeof(*a))
			return errno ? -errno : -ENOSPC;
		s->nfile++;
	}
	*idx = (uint32_t)++s->n;
	return 0;
}

const struct ev_args *args_get(struct args_store *s, uint32_t i)
{
	if (!i || i > s->n)
		return NULL;
	if (i <= s->cap)
		return &s->v[i - 1];
	if (pread(s->fd, &s->got, sizeof(s->got), (off_t)((i - 1 - s->cap) * sizeof(s->got))) !=
	    (ssize_t)sizeof(s->got))
		return NULL;
	return &s->got;
}

void args_store_free(struct args_store *s)
{
	free(s->v);
	free(s->text);
	if (s->fd >= 0)
		close(s->fd);
	if (s->tfd >= 0)
		close(s->tfd);
	args_store_init(s);
}

void args_store_clear(struct args_store *s)
{
	s->n = 0;
	s->nfile = 0;
	s->tlen = 0;
	s->tfile = 0;
	/* the files' bytes are written over from the start */
}

const char *args_text(struct args_store *s, const struct ev_args *a, uint32_t i, size_t *len)
{
	uint64_t off = a->a[i].off, cut = SHMT_TEXT_CUT(a->a[i].value);
	uint32_t n = SHMT_TEXT_LEN(a->a[i].value);

	if (n > SHMTRACE_TEXT_MAX)
		return NULL;
	if (off < ARGS_TEXT_MEM) {
		if (off > s->tlen || n > s->tlen - off)
			return NULL;
		if (n)	/* none kept yet: s->text may be NULL */
			memcpy(s->tgot, s->text + off, n);
	} else if (n && (s->tfd < 0 ||
			 pread(s->tfd, s->tgot, n, (off_t)(off - ARGS_TEXT_MEM)) != (ssize_t)n)) {
		return NULL;
	}
	*len = n;
	/* "…" (U+2026) in UTF-8: the producer cut before a whole character */
	if (cut)
		*len += (size_t)snprintf(s->tgot + n, sizeof(s->tgot) - n,
					 "\xe2\x80\xa6" "[cut %llu bytes]", (unsigned long long)cut);
	return s->tgot;
}

int open_note(struct open_spans *o, struct u64map *last, uint64_t key,
	      const struct shmt_record *r)
{
	uint64_t *l = u64map_get(last, key, 0, NULL);
	uint64_t end = r->ts + (shmt_record_kind(r) == SHMTRACE_KIND_SPAN ? r->dur : 0);

	if (!l)
		return -ENOMEM;
	if (end > *l)
		*l = end;
	if (end > o->last_end)
		o->last_end = end;
	return 0;
}

int args_keep_texts(struct args_store *s, const struct open_args *a, struct ev_args *out)
{
	*out = a->a;
	for (uint32_t i = 0; i < out->n; i++) {
		uint32_t len = SHMT_TEXT_LEN(out->a[i].value);
		int ret;

		/* kept whole, within SHMTRACE_TEXT_MAX */
		if (out->a[i].type == SHMTRACE_ARG_TEXT &&
		    (ret = text_keep(s, a->text + out->a[i].off, len, &out->a[i].off)) < 0)
			return ret;
	}
	return 0;
}

int args_texts_out(struct args_store *s, const struct ev_args *a, struct open_args *out,
		   char *text)
{
	uint32_t used = 0;

	out->a = *a;
	out->text = text;
	for (uint32_t i = 0; i < a->n; i++) {
		size_t n;
		const char *t;

		if (a->a[i].type != SHMTRACE_ARG_TEXT)
			continue;
		/* its bytes, without the cut marker args_text() adds */
		t = args_text(s, a, i, &n);
		n = SHMT_TEXT_LEN(a->a[i].value);
		if (!t || n > SHMTRACE_TEXT_MAX - used)
			return -EIO;
		memcpy(text + used, t, n);
		out->a.a[i].off = used;
		used += (uint32_t)n;
	}
	return 0;
}

/* The newest first: by arrival, down. */
static int cmp_newest(const void *pa, const void *pb)
{
	const struct open_ev *a = pa, *b = pb;

	return a->i < b->i ? 1 : a->i > b->i ? -1 : 0;
}

int open_add(struct open_spans *o, struct args_store *s, const struct shmt_record *r,
	     uint32_t pid, uint32_t ring, const struct open_args *a)
{
	struct open_ev e = { .r = *r, .pid = pid, .ring = ring, .i = o->n };
	int ret;

	if (!o->s && !(o->s = extsort_new(sizeof(e), o->newest_first ? cmp_newest : NULL,
					  OPEN_MEM)))
		return -ENOMEM;
	if (a && (ret = args_keep_texts(s, a, &e.a)) < 0)
		return ret;
	if ((ret = extsort_add(o->s, &e)) < 0)
		return ret;
	o->n++;
	return 0;
}

struct shmt_record open_end(const struct shmt_record *open, uint32_t pid,
			    const struct u64map *last, uint64_t last_end)
{
	struct shmt_record r = *open;
	const uint64_t *l = u64map_find(last, (uint64_t)pid << 32 | r.tid);
	/* a forged dur saturates rather than wraps */
	uint64_t end = r.dur == SHMT_OPEN_END_UNKNOWN ? last_end : shmt_time_end(r.ts, r.dur);

	if (l && *l > end)
		end = *l;
	r.dur = end > r.ts ? end - r.ts : 0;
	return r;
}

int open_spans_rewind(struct open_spans *o)
{
	return o->s ? extsort_rewind(o->s) : 0;
}

int open_spans_next(struct open_spans *o, const struct u64map *last, struct open_ev *e,
	      struct shmt_record *r)
{
	int ret = o->s ? extsort_next(o->s, e) : 0;

	if (ret == 1)
		*r = open_end(&e->r, e->pid, last, o->last_end);
	return ret;
}

const struct ev_args *open_args(const struct open_ev *e)
{
	return e->a.n ? &e->a : NULL;
}

void open_free(struct open_spans *o)
{
	extsort_free(o->s);
	o->s = NULL;
	o->n = 0;
}
