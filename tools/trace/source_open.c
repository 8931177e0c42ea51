/* SPDX-License-Identifier: MIT */
/*
 * source_open.c - the arguments of open spans, as every pass of a source
 * hands them over. A producer stages each argument of an open span as a
 * record of its own when it is added (an argument record of count 0,
 * docs/FORMAT.md), so that it survives a crash inside the span. Those
 * records belong to no event: a pass keeps the last ones of each thread
 * and stack depth here, never hands them over, and gives them with the
 * thread's open span (kind 5) of the same start and name when that comes
 * (source_open_args()), a text argument with its bytes (the text records
 * right after it). A span's own record at its end drops what was kept
 * for it, so the memory follows the spans open at one time, not the
 * length of the trace. Done in the source, under every reader, so that
 * no selection (--pid, a window) separates the two.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "array.h"
#include "source_int.h"
#include "u64map.h"

/* What one thread staged for the spans on its stack, by depth: their
 * arguments, a text's off its place in text. */
struct open_thread {
	uint64_t ts[SHMT_OPEN_MAX];	/* the span's start */
	uint32_t name[SHMT_OPEN_MAX];	/* and name */
	uint32_t used;			/* bit d: depth d holds a span's */
	uint32_t next;			/* while free: 1 + the next free one */
	struct ev_args a[SHMT_OPEN_MAX];
	uint32_t tlen[SHMT_OPEN_MAX];	/* bytes of text kept */
	char text[SHMT_OPEN_MAX][SHMTRACE_TEXT_MAX];
};

struct source_open {
	struct source *s;
	source_record_fn fn;		/* the pass's own, and its context */
	void *ctx;
	struct u64map map;		/* thread -> 1 + its entry in v, 0: none */
	struct open_thread *v;
	size_t n, cap;
	uint32_t free;			/* 1 + the first free entry, 0: none */
	size_t live;			/* entries in use */
	bool hid;			/* the record before was kept, not handed */
	/* a text argument kept whose text records are coming: how many, and
	 * where it is (its entry, by index, and depth) */
	uint32_t twant, tentry, tdepth;
	uint64_t tkey;
	bool has;			/* got belongs to the record handed over */
	struct open_args got;
	char gottext[SHMTRACE_TEXT_MAX];
};

/* A thread of the record's ring: pids and tids are below 2^22 (Linux's
 * pid_max), so the ring index in the bits above keeps two rings' threads
 * apart; a start and a name must match as well before anything is given. */
static uint64_t thread_key(const struct source *s, const struct shmt_record *r)
{
	return ((uint64_t)r->pid << 32 | r->tid) ^ (uint64_t)s->ring << 54;
}

/* key's entry, made when add and there is none; NULL when there is none
 * or no memory. */
static struct open_thread *entry(struct source_open *o, uint64_t key, bool add)
{
	uint64_t *slot = add ? u64map_get(&o->map, key, 0, NULL) : u64map_find(&o->map, key);
	size_t i;

	if (!slot)
		return NULL;
	if (*slot)
		return &o->v[*slot - 1];
	if (!add)
		return NULL;
	if (o->free) {
		i = o->free - 1;
		o->free = o->v[i].next;
	} else {
		if (array_reserve(&o->v, &o->cap, o->n + 1, sizeof(*o->v), 16) < 0)
			return NULL;
		i = o->n++;
	}
	memset(&o->v[i], 0, sizeof(o->v[i]));
	*slot = i + 1;
	o->live++;
	return &o->v[i];
}

/*
 * Keeps the open span's argument r; a text one once its text records
 * came (text()). Not one a producer writes (a depth, an index or a text
 * length out of range, an unknown type): dropped. Returns 0 or -ENOMEM.
 */
static int keep(struct source_open *o, const struct shmt_record *r)
{
	uint32_t d = SHMT_OPEN_ARG_DEPTH(r->flow), i = SHMT_ARG_INDEX(r->flow);
	uint32_t type = SHMT_ARG_TYPE(r->flow), len = SHMT_TEXT_LEN(r->dur);
	struct open_thread *t;
	struct ev_args *a;

	if (d >= SHMT_OPEN_MAX || i < 1 || i > SHMTRACE_MAX_ARGS ||
	    (type != SHMTRACE_ARG_INT && type != SHMTRACE_ARG_STR && type != SHMTRACE_ARG_TEXT))
		return 0;
	t = entry(o, thread_key(o->s, r), true);
	if (!t)
		return -ENOMEM;
	a = &t->a[d];
	if (!(t->used >> d & 1) || t->ts[d] != r->ts || t->name[d] != r->cat) {
		/* another span at this depth: the one kept ended */
		t->used |= 1u << d;
		t->ts[d] = r->ts;
		t->name[d] = r->cat;
		a->n = a->count = 0;
		t->tlen[d] = 0;
	}
	/* in the order they were added; after a gap (a record the ring
	 * dropped) the rest would be out of place */
	if (i != a->n + 1 || (type == SHMTRACE_ARG_TEXT && len > SHMTRACE_TEXT_MAX - t->tlen[d]))
		return 0;
	a->a[a->n].key = r->name;
	a->a[a->n].type = type;
	a->a[a->n].value = r->dur;
	a->a[a->n].off = t->tlen[d];
	if (type == SHMTRACE_ARG_TEXT && len) {
		/* counted once its bytes are all here */
		o->twant = SHMT_TEXT_RECORDS(len);
		o->tentry = (uint32_t)(t - o->v);
		o->tdepth = d;
		o->tkey = thread_key(o->s, r);
		return 0;
	}
	a->count = ++a->n;
	return 0;
}

/* The text record r, of the text argument kept last if it follows it (the
 * same thread and start, no slot skipped); else that argument is dropped
 * and r is not one of an open span's. Returns whether r was kept. */
static bool text(struct source_open *o, const struct shmt_record *r)
{
	struct open_thread *t = &o->v[o->tentry];
	uint32_t d = o->tdepth;
	struct ev_args *a = &t->a[d];
	uint32_t len = SHMT_TEXT_LEN(a->a[a->n].value), k;
	char chunk[SHMT_TEXT_CHUNK];

	if (!o->s->follows || shmt_record_kind(r) != SHMTRACE_KIND_TEXT ||
	    thread_key(o->s, r) != o->tkey || r->ts != t->ts[d]) {
		/* never shown in part: its bytes so far go */
		t->tlen[d] = (uint32_t)a->a[a->n].off;
		o->twant = 0;
		return false;
	}
	k = len - (t->tlen[d] - (uint32_t)a->a[a->n].off);
	if (k > SHMT_TEXT_CHUNK)
		k = SHMT_TEXT_CHUNK;
	shmt_text_get(r, chunk);
	memcpy(t->text[d] + t->tlen[d], chunk, k);
	t->tlen[d] += k;
	if (--o->twant == 0)
		a->count = ++a->n;
	return true;
}

/* The span r (its record at its end, or an open span) takes what its
 * thread kept for it: into got when it is an open span. */
static void take(struct source_open *o, const struct shmt_record *r, bool open)
{
	uint64_t *slot = u64map_find(&o->map, thread_key(o->s, r));
	struct open_thread *t;
	uint32_t d;

	if (!slot || !*slot)
		return;
	t = &o->v[*slot - 1];
	for (d = 0; d < SHMT_OPEN_MAX; d++)
		if ((t->used >> d & 1) && t->ts[d] == r->ts && t->name[d] == r->name)
			break;
	if (d == SHMT_OPEN_MAX)
		return;
	if (open) {
		o->got.a = t->a[d];
		memcpy(o->gottext, t->text[d], t->tlen[d]);
		o->got.text = o->gottext;
		o->has = true;
	}
	t->used &= ~(1u << d);
	if (!t->used) {
		t->next = o->free;
		o->free = (uint32_t)*slot;
		*slot = 0;
		o->live--;
	}
}

/* Every record of the pass comes here first. */
static int filter(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct source_open *o = ctx;
	uint32_t kind = shmt_record_kind(r);

	if (o->twant && text(o, r)) {
		o->hid = true;
		return 0;
	}
	if (kind == SHMTRACE_KIND_ARG && shmt_arg_of_open(r->flow)) {
		o->hid = true;
		return keep(o, r);
	}
	if (o->hid) {
		/* an argument after it would not be of the event before it */
		o->hid = false;
		o->s->follows = false;
	}
	o->has = false;
	if (o->live && (kind == SHMTRACE_KIND_SPAN || kind == SHMTRACE_KIND_OPEN))
		take(o, r, kind == SHMTRACE_KIND_OPEN);
	return o->fn(o->ctx, r, start_time);
}

int source_open_pass(struct source *s, source_record_fn *fn, void **ctx)
{
	struct source_open *o = s->open;

	if (!o) {
		o = s->open = calloc(1, sizeof(*o));
		if (!o)
			return -ENOMEM;
		o->s = s;
		u64map_init(&o->map);
	}
	/* nothing of a pass before: each pass reads the same records again */
	u64map_free(&o->map);
	u64map_init(&o->map);
	o->n = 0;
	o->free = 0;
	o->live = 0;
	o->hid = o->has = false;
	o->twant = 0;
	o->fn = *fn;
	o->ctx = *ctx;
	*fn = filter;
	*ctx = o;
	return 0;
}

const struct open_args *source_open_args(const struct source *s)
{
	return s->open && s->open->has ? &s->open->got : NULL;
}

void source_open_free(struct source *s)
{
	if (!s->open)
		return;
	u64map_free(&s->open->map);
	free(s->open->v);
	free(s->open);
	s->open = NULL;
}
