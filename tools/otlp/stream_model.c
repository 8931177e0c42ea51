/* SPDX-License-Identifier: MIT */
/*
 * stream_model.c - the live stream's model: the capture's events held
 * until what gives each its trace and parent has come, then sent through
 * the file export's own model (otlp_hops.c, otlp_tree.c).
 *
 * Records come in the order threads wrote them: a span after everything
 * inside it, so a span's parent, the span around it, comes later, and the
 * steps of a flow come from several threads in any order. The events that
 * may end up in one trace are kept together, a component (union-find):
 * an event joins the events its thread holds that it encloses (and the
 * one that encloses it), and the held steps of its flow (a step placed
 * before the end of a flow that a terminating step ended joins that
 * flow; another, the flow going on). A component is released, sent whole
 * as the file export would send those records, once the records that
 * came reach the hold past its latest end (trace time): a span that
 * encloses it and ends later than that, or a step of its flow later than
 * that, comes too late and starts a component of its own (the span is
 * then a root without those children; the step joins its flow's trace
 * after the last step sent, otlp_hops.c's carry). Past --otlp-max-held
 * events, the oldest components go as they are. Memory: the events held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stream_int.h"

void model_init(struct stream_model *m)
{
	memset(m, 0, sizeof(*m));
	keyed_init(&m->threads, sizeof(struct sthread));
	keyed_init(&m->flows, sizeof(struct sflow));
}

void model_free(struct stream_model *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].args);
	for (size_t i = 0; i < m->threads.n; i++)
		free(((struct sthread *)keyed_at(&m->threads, i))->roots);
	free(m->v);
	free(m->free);
	free(m->fifo);
	free(m->heap);
	free(m->win);
	keyed_free(&m->threads);
	keyed_free(&m->flows);
	model_init(m);
}

/* ------------------------------------------------------------ components */

static bool ref_ok(const struct stream_model *m, struct sref r)
{
	return r.arr && r.i < m->n && m->v[r.i].live && m->v[r.i].arr == r.arr;
}

static struct sref ref_of(const struct stream_model *m, uint32_t i)
{
	return (struct sref){ .i = i, .arr = m->v[i].arr };
}

static uint32_t find(struct stream_model *m, uint32_t i)
{
	while (m->v[i].up != i) {
		m->v[i].up = m->v[m->v[i].up].up;
		i = m->v[i].up;
	}
	return i;
}

/* The latest end of component c, for the release (a min-heap). */
static int heap_push(struct stream_model *m, uint32_t c)
{
	size_t k;

	if (array_reserve(&m->heap, &m->heapcap, m->nheap + 1, sizeof(*m->heap), 64) < 0)
		return -ENOMEM;
	k = m->nheap++;
	m->heap[k] = (struct heap_ent){ .cend = m->v[c].cend, .c = ref_of(m, c) };
	while (k && m->heap[(k - 1) / 2].cend > m->heap[k].cend) {
		struct heap_ent t = m->heap[k];

		m->heap[k] = m->heap[(k - 1) / 2];
		m->heap[(k - 1) / 2] = t;
		k = (k - 1) / 2;
	}
	return 0;
}

static void sift_down(struct stream_model *m, size_t k)
{
	for (;;) {
		size_t l = 2 * k + 1, s = k;

		if (l < m->nheap && m->heap[l].cend < m->heap[s].cend)
			s = l;
		if (l + 1 < m->nheap && m->heap[l + 1].cend < m->heap[s].cend)
			s = l + 1;
		if (s == k)
			break;
		struct heap_ent t = m->heap[k];

		m->heap[k] = m->heap[s];
		m->heap[s] = t;
		k = s;
	}
}

static void heap_pop(struct stream_model *m)
{
	m->heap[0] = m->heap[--m->nheap];
	sift_down(m, 0);
}

/* Whether heap entry h is its component's: a root still held, not in the
 * release, whose latest end did not grow since (else a later entry is). */
static bool heap_current(const struct stream_model *m, const struct heap_ent *h)
{
	return ref_ok(m, h->c) && m->v[h->c.i].up == h->c.i && !m->v[h->c.i].inwin &&
	       m->v[h->c.i].cend == h->cend;
}

/* Drops the stale entries, when they are most of the heap: components
 * released past the bound or joined into others leave theirs until
 * the hold passes them, which a capture faster than its trace time (a
 * stream catching up) may not do for long. */
static void heap_tidy(struct stream_model *m)
{
	size_t k = 0;

	if (m->nheap < 2 * m->live + 1024)
		return;
	for (size_t j = 0; j < m->nheap; j++)
		if (heap_current(m, &m->heap[j]))
			m->heap[k++] = m->heap[j];
	m->nheap = k;
	for (size_t j = k / 2; j-- > 0;)
		sift_down(m, j);
}

/* Joins the components of a and b. */
static int unite(struct stream_model *m, uint32_t a, uint32_t b)
{
	uint32_t t;

	a = find(m, a);
	b = find(m, b);
	if (a == b)
		return 0;
	if (m->v[a].size < m->v[b].size) {
		t = a;
		a = b;
		b = t;
	}
	m->v[b].up = a;
	m->v[m->v[a].tail - 1].next = b + 1;
	m->v[a].tail = m->v[b].tail;
	m->v[a].size += m->v[b].size;
	if (m->v[b].cend <= m->v[a].cend)
		return 0;
	m->v[a].cend = m->v[b].cend;
	/* the entry it had is stale now: found and dropped at the top */
	return heap_push(m, a);
}

/* ------------------------------------------------------ threads, flows */

/* Whether held event a encloses b on their thread (nest.h's rule, ties
 * either way: both end up in one component, the walk decides). */
static bool encloses(const struct sev *a, const struct sev *b)
{
	return shmt_record_kind(&a->r) != SHMTRACE_KIND_INSTANT && a->r.ts <= b->r.ts &&
	       b->end <= a->end;
}

/* Event i among its thread's: with the roots it encloses, or under the
 * one that encloses it; else a root itself. */
static int nest(struct stream_model *m, uint32_t i)
{
	const struct sev *e = &m->v[i];
	bool added;
	struct sthread *t = keyed_get(&m->threads, (uint64_t)e->outpid << 32 | e->r.tid, &added);
	int ret;

	if (!t)
		return -ENOMEM;
	while (t->n) {
		struct sref r = t->roots[t->n - 1];

		if (ref_ok(m, r) && !encloses(&m->v[i], &m->v[r.i]))
			break;
		t->n--;
		if (ref_ok(m, r) && (ret = unite(m, i, r.i)) < 0)
			return ret;
	}
	if (t->n && encloses(&m->v[t->roots[t->n - 1].i], &m->v[i]))
		return unite(m, t->roots[t->n - 1].i, i);
	if (t->n == t->cap) {
		/* the roots released since: dropped before it grows */
		size_t k = 0;

		for (size_t j = 0; j < t->n; j++)
			if (ref_ok(m, t->roots[j]))
				t->roots[k++] = t->roots[j];
		t->n = k;
		if ((k == t->cap || k * 2 > t->cap) &&
		    array_reserve(&t->roots, &t->cap, 2 * k + 1, sizeof(*t->roots), 16) < 0)
			return -ENOMEM;
	}
	t->roots[t->n++] = ref_of(m, i);
	return 0;
}

/* Step i of a flow, with the flow's other held steps. */
static int join_flow(struct stream_model *m, uint32_t i)
{
	const struct sev *e = &m->v[i];
	struct flow_ev fe = flow_ev_of(&e->r, 0, e->outpid);
	uint64_t at = flow_ev_at(&fe);
	uint64_t key = fe.flow | (uint64_t)(flow_scope(fe.flow, 0) & 0x7ff) << 53;
	bool added;
	struct sflow *f = keyed_get(&m->flows, key, &added);
	int ret = 0;

	if (!f)
		return -ENOMEM;
	f->key = key;
	/* a late step of the flow that ended */
	if (ref_ok(m, f->ended) && at <= f->end_at)
		return unite(m, f->ended.i, i);
	if (ref_ok(m, f->cur) && (ret = unite(m, f->cur.i, i)) < 0)
		return ret;
	if (fe.role & SHMT_ROLE_TERMINATES) {
		f->ended = ref_of(m, i);
		f->end_at = at;
		f->cur = (struct sref){ 0 };
	} else {
		f->cur = ref_of(m, i);
	}
	return 0;
}

/* Keeps the flows that still hold a step, when most hold none. */
static int flows_tidy(struct stream_model *m)
{
	struct keyed old = m->flows;
	bool added;

	if (old.n < 1024 || old.n < 2 * m->live)
		return 0;
	keyed_init(&m->flows, sizeof(struct sflow));
	for (size_t i = 0; i < old.n; i++) {
		const struct sflow *f = keyed_at(&old, i);
		struct sflow *g;

		if (!ref_ok(m, f->cur) && !ref_ok(m, f->ended))
			continue;
		if (!(g = keyed_get(&m->flows, f->key, &added))) {
			keyed_free(&old);
			return -ENOMEM;
		}
		*g = *f;
	}
	keyed_free(&old);
	return 0;
}

/* ------------------------------------------------------------------ add */

/* Room in the free list for every slot, so that freeing never fails. */
static int free_room(struct stream_model *m)
{
	return array_reserve(&m->free, &m->freecap, m->n + 1, sizeof(*m->free), 256);
}

static int slot_new(struct stream_model *m, uint32_t *i)
{
	if (m->nfree) {
		*i = m->free[--m->nfree];
		return 0;
	}
	if (m->n >= UINT32_MAX - 1 ||
	    array_reserve(&m->v, &m->cap, m->n + 1, sizeof(*m->v), 256) < 0)
		return -ENOMEM;
	*i = (uint32_t)m->n++;
	return 0;
}

/* Drops the events released from the arrival ring, when they are most
 * of it (releases go mostly, not only, in arrival order). */
static void fifo_tidy(struct stream_model *m)
{
	size_t k;

	while (m->fhead < m->ftail && !ref_ok(m, m->fifo[m->fhead % m->fcap]))
		m->fhead++;
	if (m->ftail - m->fhead < 4 * m->live + 1024)
		return;
	k = m->fhead;
	for (size_t j = m->fhead; j < m->ftail; j++)
		if (ref_ok(m, m->fifo[j % m->fcap]))
			m->fifo[k++ % m->fcap] = m->fifo[j % m->fcap];
	m->ftail = k;
}

static int fifo_push(struct stream_model *m, struct sref r)
{
	if (m->ftail - m->fhead == m->fcap) {
		size_t cap = m->fcap ? 2 * m->fcap : 1024;
		struct sref *nf = malloc(cap * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		/* empty at the first growth (fcap 0): nothing to move */
		for (size_t k = m->fhead; m->fcap && k < m->ftail; k++)
			nf[k - m->fhead] = m->fifo[k % m->fcap];
		free(m->fifo);
		m->fifo = nf;
		m->ftail -= m->fhead;
		m->fhead = 0;
		m->fcap = cap;
	}
	m->fifo[m->ftail++ % m->fcap] = r;
	return 0;
}

/* A copy of arguments a, their texts after them. */
static struct sargs *args_copy(const struct open_args *a)
{
	uint32_t tlen = 0;
	struct sargs *s;

	for (uint32_t i = 0; i < a->a.n; i++)
		if (a->a.a[i].type == SHMTRACE_ARG_TEXT) {
			uint32_t end = (uint32_t)a->a.a[i].off + SHMT_TEXT_LEN(a->a.a[i].value);

			if (end > tlen)
				tlen = end;
		}
	s = malloc(sizeof(*s) + tlen);
	if (!s)
		return NULL;
	s->a = a->a;
	s->tlen = tlen;
	if (tlen)
		memcpy(s->text, a->text, tlen);
	return s;
}

int model_add(struct otlp_stream *st, const struct shmt_record *r, uint32_t outpid, uint64_t seq,
	      const struct sev_pos *pos, const struct open_args *a, uint32_t *at)
{
	struct stream_model *m = &st->m;
	uint64_t dur = shmt_record_kind(r) == SHMTRACE_KIND_INSTANT ? 0 : r->dur;
	uint32_t i = 0;
	int ret = free_room(m);
	struct sev *e;

	if (ret == 0)
		ret = slot_new(m, &i);
	if (ret < 0)
		return ret;
	e = &m->v[i];
	*e = (struct sev){ .r = *r, .pos = *pos, .seq = seq, .arr = ++m->arr, .outpid = outpid,
			   .up = i, .tail = i + 1, .size = 1, .live = true };
	e->end = e->cend = shmt_time_end(r->ts, dur);
	if (a && a->a.n && !(e->args = args_copy(a))) {
		e->live = false;
		m->free[m->nfree++] = i;
		return -ENOMEM;
	}
	m->live++;
	if (at)
		*at = i;
	if (e->end > m->frontier)
		m->frontier = e->end;
	if ((ret = fifo_push(m, ref_of(m, i))) < 0 || (ret = heap_push(m, i)) < 0 ||
	    (ret = nest(m, i)) < 0)
		return ret;
	return shmt_record_in_flow(r) ? join_flow(m, i) : 0;
}

/* -------------------------------------------------------------- release */

/* Component c into the release. */
static int take(struct stream_model *m, uint32_t c)
{
	for (uint32_t k = c + 1; k; k = m->v[k - 1].next) {
		if (m->v[k - 1].inwin)
			continue;
		if (array_reserve(&m->win, &m->wincap, m->nwin + 1, sizeof(*m->win), 256) < 0)
			return -ENOMEM;
		m->v[k - 1].inwin = true;
		m->win[m->nwin++] = k - 1;
	}
	return 0;
}

/* The components to release: ended before cut, or every one (all), and,
 * when more than max are held still, the oldest until an eighth fewer are. */
static int choose(struct stream_model *m, uint64_t cut, bool all, size_t max)
{
	size_t most;
	int ret;

	while (m->nheap && (all || m->heap[0].cend <= cut)) {
		struct sref c = m->heap[0].c;

		heap_pop(m);
		/* stale: joined into another since, or grown later */
		if (!ref_ok(m, c) || m->v[c.i].up != c.i || m->v[c.i].inwin)
			continue;
		if (!all && m->v[c.i].cend > cut)
			continue;
		if ((ret = take(m, c.i)) < 0)
			return ret;
	}
	/* those the hold lets go first: what they bring under the bound
	 * keeps its wait for the spans around it */
	most = m->live - m->nwin > max ? max - max / 8 : max;
	while (m->live - m->nwin > most && m->fhead < m->ftail) {
		struct sref r = m->fifo[m->fhead % m->fcap];

		if (!ref_ok(m, r) || m->v[r.i].inwin) {
			m->fhead++;
			continue;
		}
		if ((ret = take(m, find(m, r.i))) < 0)
			return ret;
	}
	return 0;
}

static int by_arrival(const void *pa, const void *pb, void *ctx)
{
	const struct stream_model *m = ctx;
	uint64_t a = m->v[*(const uint32_t *)pa].arr, b = m->v[*(const uint32_t *)pb].arr;

	return a < b ? -1 : a > b;
}

/* The release's events through the file export's model, in the order
 * they came. */
static int walk_release(struct otlp_stream *st)
{
	struct stream_model *m = &st->m;
	struct otlp *o = st->o;
	int ret = 0;

	/* the model made one for a pass; a release makes its own each time */
	extsort_free(o->nodes);
	o->nodes = extsort_new(sizeof(struct node), nest_cmp, NODES_MEM);
	if (!o->nodes)
		return -ENOMEM;
	flows_init(&o->fl);
	args_store_clear(&o->args);
	for (size_t k = 0; k < m->nwin && ret == 0; k++) {
		const struct sev *e = &m->v[m->win[k]];
		struct shmt_record r = e->r;
		struct ev_args a;

		if (shmt_record_kind(&r) == SHMTRACE_KIND_OPEN)
			r = open_end(&e->r, e->outpid, &o->last, o->open.last_end);
		if (e->args)
			ret = args_keep_texts(&o->args, &(struct open_args){ e->args->a, e->args->text },
					      &a);
		if (ret == 0)
			ret = otlp_node(o, &r, e->outpid, 0, e->seq, e->args ? &a : NULL);
	}
	if (ret == 0)
		ret = otlp_hops(o);
	if (ret == 0)
		ret = otlp_tree(o);
	flows_free(&o->fl);
	extsort_free(o->nodes);
	extsort_free(o->hops);
	o->nodes = o->hops = NULL;
	return ret;
}

const struct sev *model_oldest(struct stream_model *m)
{
	while (m->fhead < m->ftail && !ref_ok(m, m->fifo[m->fhead % m->fcap]))
		m->fhead++;
	return m->fhead < m->ftail ? &m->v[m->fifo[m->fhead % m->fcap].i] : NULL;
}

const struct sev *model_next(const struct stream_model *m, size_t *k)
{
	if (*k < m->fhead)
		*k = m->fhead;
	for (; *k < m->ftail; (*k)++)
		if (ref_ok(m, m->fifo[*k % m->fcap]))
			return &m->v[m->fifo[(*k)++ % m->fcap].i];
	return NULL;
}

/* Sends the release chosen, then forgets its events. */
static int send_release(struct otlp_stream *st)
{
	struct stream_model *m = &st->m;
	int ret;

	if (!m->nwin)
		return 0;
	qsort_r(m->win, m->nwin, sizeof(*m->win), by_arrival, m);
	st->in_win = true;
	st->win_made = 0;
	ret = walk_release(st);
	st->in_win = false;
	st->win_skip = 0;
	if (ret < 0)
		return ret;
	ret = otlp_carry_commit(st->o->carry, m->frontier);
	for (size_t k = 0; k < m->nwin; k++) {
		struct sev *e = &m->v[m->win[k]];

		free(e->args);
		e->args = NULL;
		e->live = e->inwin = false;
		m->free[m->nfree++] = m->win[k];
		m->live--;
	}
	m->nwin = 0;
	fifo_tidy(m);
	heap_tidy(m);
	return ret < 0 ? ret : flows_tidy(m);
}

int model_release(struct otlp_stream *st, bool all)
{
	struct stream_model *m = &st->m;
	uint64_t hold = st->so->hold_ns;
	uint64_t cut = m->frontier > hold ? m->frontier - hold : 0;
	int ret = free_room(m);

	if (ret == 0)
		ret = choose(m, cut, all, st->so->held_max);
	return ret < 0 ? ret : send_release(st);
}

int model_resume_release(struct otlp_stream *st)
{
	struct stream_model *m = &st->m;
	int ret = free_room(m);

	m->nwin = 0;
	for (size_t i = 0; i < m->n && ret == 0; i++)
		if (m->v[i].live && m->v[i].inwin) {
			ret = array_reserve(&m->win, &m->wincap, m->nwin + 1, sizeof(*m->win), 256);
			if (ret == 0)
				m->win[m->nwin++] = (uint32_t)i;
		}
	return ret < 0 ? ret : send_release(st);
}
