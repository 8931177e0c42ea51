/* SPDX-License-Identifier: MIT */
/*
 * source_ring.c - the ring back-end of a source: a post-mortem (or live)
 * read of a ring in /dev/shm, read-only, guarded against the segment
 * shrinking: its published records, then what each thread had staged.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "source_int.h"

struct source_ringbe {
	struct shmt_view v;
	struct shmt_record *blockbuf;	/* one staging block's records */
	uint64_t from;			/* sequences below it are read elsewhere */
};

static struct shmt_view *view_of(const struct source *s)
{
	return &((struct source_ringbe *)s->be)->v;
}

/* Loads the strings not loaded yet (a live ring interns more meanwhile). */
static int load_strings(struct source *s)
{
	const struct shmt_view *v = view_of(s);
	uint32_t n = shmt_ring_nstrings(v);
	char buf[SHMT_STRING_MAX + 1];

	if (n > s->nstr)
		n = s->nstr;
	for (uint32_t id = 1; id < n; id++) {
		int len;

		if (s->str[id])
			continue;
		len = shmt_ring_string(v, id, buf, sizeof(buf));
		/* a bad entry stays unknown and exports as "?" */
		if (len >= 0 && source_table_set(s->str, s->slen, s->nstr, id, buf, (size_t)len) < 0)
			return -ENOMEM;
	}
	return 0;
}

/*
 * The head and tail against each other and against what the slots hold:
 * a forged header makes a pass read nothing (a head of 0), or read slots
 * under sequences they do not hold. Said, never silent.
 */
static void check_seqs(const struct source *s, const struct shmt_view *v)
{
	uint64_t head = shmt_ring_head(v), tail = shmt_ring_tail(v);
	uint64_t lo = head > v->capacity ? head - v->capacity : 0, used = 0, match = 0;

	if (tail > head)
		source_warnx("ring '%s': its tail (%llu) is past its head (%llu): its header is "
			     "forged or damaged, and records may be missing", s->name,
			     (unsigned long long)tail, (unsigned long long)head);
	else if (v->mode == SHMTRACE_MODE_DISCARD && head - tail > v->capacity)
		source_warnx("ring '%s': its head (%llu) is more than its %u slots past its tail "
			     "(%llu), which a discard ring never allows: its header is forged or "
			     "damaged, and records may be missing or doubled", s->name,
			     (unsigned long long)head, v->capacity, (unsigned long long)tail);
	for (uint64_t i = 0; i < v->capacity; i++) {
		uint32_t c = load_relaxed(&v->records[i].commit);
		/* the one sequence of [lo, lo + capacity) that slot i is for */
		uint64_t seq = lo + ((i - lo) & v->mask);

		if (!shmt_kind_valid(SHMT_COMMIT_KIND(c)))
			continue;
		used++;
		match += seq < head && shmt_commit_is(c, seq);
	}
	/* (in a 2.0 ring, sequences below head may all be in blocks) */
	if (used && !match && !shmt_ring_extents(v, lo, head, &(struct shmt_extent){ 0 }, 1))
		source_warnx("ring '%s': none of the %llu records in its slots is of a sequence "
			     "below its head (%llu): its head is forged or damaged, and they are "
			     "not exported", s->name, (unsigned long long)used,
			     (unsigned long long)head);
}

static int load(void *arg)
{
	struct source *s = arg;
	const struct shmt_view *v = view_of(s);
	uint32_t n = shmt_ring_nthreads(v);
	int ret = load_strings(s);

	if (ret < 0)
		return ret;
	for (uint32_t i = 0; i < n; i++) {
		struct shmt_thread t;

		if (shmt_ring_thread(v, i, &t) == 0 && (ret = source_add_thread(s, &t, 0)) < 0)
			return ret;
	}
	/* untrusted numbers: reported, never used as sizes */
	shmt_loss_read(v, &s->loss.counters, false);
	check_seqs(s, v);
	return 0;
}

/* "ring 'NAME': why", for an error of a guarded read. */
static void say_error(const struct source *s, int ret, char *err, size_t errlen)
{
	snprintf(err, errlen, "ring '%s': %s", s->name,
		 ret == -EFAULT ? "segment shrank while being read" : strerror(-ret));
}

int source_open_ring(struct source *s, const char *ring, char *err, size_t errlen)
{
	struct source_ringbe *be;
	struct shmt_view *v;
	int ret;

	memset(s, 0, sizeof(*s));
	s->ops = &source_ring_ops;
	s->name = ring;
	s->nrings = 1;
	s->be = be = calloc(1, sizeof(*be));
	if (!be) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	v = &be->v;
	/* read-only, whoever owns it: a post-mortem reader never writes */
	ret = shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, v, err, errlen);
	if (ret < 0)
		return ret;
	s->perm = v->perm;
	s->realtime0 = v->clock.realtime0;
	s->mono0 = v->clock.mono0;
	s->clock_tsc = v->clock.tsc_ok;
	s->capacity = v->capacity;
	s->mode = v->mode;
	s->tables.max_strings = v->max_strings;
	s->tables.string_bytes = v->string_bytes;
	s->tables.max_threads = v->max_threads;
	be->blockbuf = calloc(v->block_records, sizeof(*be->blockbuf));
	s->host_of = calloc(1, sizeof(*s->host_of));
	s->hosts = calloc(1, sizeof(*s->hosts));
	if (s->hosts) {
		/* a ring is read where it lives */
		s->nhosts = 1;
		if (gethostname(s->hosts[0], sizeof(s->hosts[0]) - 1) < 0)
			snprintf(s->hosts[0], sizeof(s->hosts[0]), "localhost");
	}
	if (!be->blockbuf || !s->host_of || !s->hosts ||
	    source_alloc_strings(s, v->max_strings + 1) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = shmt_guarded(load, s);
	if (ret < 0)
		say_error(s, ret, err, errlen);
	return ret;
}

static int one(void *arg, uint64_t seq, const struct shmt_record *r)
{
	struct source_pass *p = arg;
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

/* Records staged by threads (dead or alive) not yet in the ring. */
static int staged(struct source_pass *p)
{
	struct source *s = p->s;
	struct source_ringbe *be = s->be;
	const struct shmt_view *v = &be->v;
	int ret;

	for (uint32_t b = 0; b < v->nblocks; b++) {
		struct shmt_block_info info;
		struct shmt_record open[SHMT_OPEN_MAX];
		int n = shmt_ring_block_pending(v, b, be->blockbuf, &info);
		uint32_t nopen;

		p->skips.torn += info.skipped;
		for (int i = 0; i < n; i++) {
			s->records++;
			/* a block with skipped slots: which ones is not known */
			s->follows = i > 0 && !info.skipped;
			if ((ret = p->fn(p->ctx, &be->blockbuf[i], info.start_time)) != 0)
				return ret;
		}
		/* the spans its thread is in (or died in), outermost first */
		nopen = shmt_block_open_spans_seen(v, b, &info, open);
		s->follows = false;
		for (uint32_t i = 0; i < nopen; i++)
			if ((ret = p->fn(p->ctx, &open[i], info.start_time)) != 0)
				return ret;
	}
	return 0;
}

static int guarded_pass(void *arg)
{
	struct source_pass *p = arg;
	struct source *s = p->s;
	const struct shmt_view *v = view_of(s);
	uint64_t head = shmt_ring_head(v);
	uint64_t seq = head > v->capacity ? head - v->capacity : 0;
	/* untrusted, and only used to attribute losses */
	uint64_t tail = shmt_ring_tail(v);
	uint64_t from = ((struct source_ringbe *)s->be)->from;
	int ret;

	if ((ret = load_strings(s)) < 0)
		return ret;
	/* what the head lapped before anyone read it (no collector, or one
	 * that fell behind, and not in the captures read with it): counted
	 * once, like the torn ones below */
	if (from > tail)
		tail = from;
	p->skips.lapped += seq > tail ? seq - tail : 0;
	if (from > seq)
		seq = from;
	s->follows = false;
	ret = shmt_ring_read_range(v, seq, head, tail, &p->skips, one, p);
	if (ret == 0)
		ret = staged(p);
	if (ret != 0)
		return ret;
	s->follows = false;
	/* strings interned during the pass */
	return load_strings(s);
}

void source_ring_from(struct source *s, uint64_t seq)
{
	((struct source_ringbe *)s->be)->from = seq;
}

void source_ring_seqs(const struct source *s, uint64_t *tail, uint64_t *head)
{
	const struct shmt_view *v = view_of(s);

	*tail = shmt_ring_tail(v);
	*head = shmt_ring_head(v);
}

static int ring_pass(struct source *s, struct source_pass *p, char *err, size_t errlen)
{
	int ret = shmt_guarded(guarded_pass, p);

	if (ret < 0)
		say_error(s, ret, err, errlen);
	return ret;
}

struct seqs {
	const struct shmt_view *v;
	uint64_t head, tail;
};

static int read_seqs(void *arg)
{
	struct seqs *q = arg;

	q->head = shmt_ring_head(q->v);
	q->tail = shmt_ring_tail(q->v);
	return 0;
}

/* The counters against the ring's age, mode, head and tail and, after a
 * whole pass over the ring alone, what it read (loss.h). */
static bool ring_plausible(struct source *s, bool passed, char *why, size_t len)
{
	struct source_ringbe *be = s->be;
	const struct shmt_view *v = &be->v;
	struct seqs q = { .v = v };
	struct shmt_loss_scope sc = {
		.age_ns = shmt_loss_age_ns(v->clock.realtime0),
		.discard = v->mode == SHMTRACE_MODE_DISCARD,
		/* the blocks' records, and the open spans read from them */
		.staged = (uint64_t)v->nblocks * (v->block_records + SHMT_OPEN_MAX),
	};

	if (shmt_guarded(read_seqs, &q) == 0) {
		sc.heads = true;
		sc.published = q.head;
		sc.consumed = q.tail;
		/* a pass from a sequence on reads what the captures did not */
		sc.has_read = passed && !be->from;
		sc.read = s->records;
	}
	return shmt_loss_plausible(&s->loss.counters, &sc, why, len);
}

static int ring_clock_offset(struct source *s, const char *host, int64_t ns)
{
	(void)ns;
	/* one host: an offset would move everything alike */
	return s->nhosts && !strcmp(s->hosts[0], host) ? 0 : -ENOENT;
}

static void ring_info(const struct source *s, uint32_t i, const char **name, uint64_t *ring_id,
		      uint64_t *run_id)
{
	const struct shmt_view *v = view_of(s);

	(void)i;
	*name = s->name;
	/* set once at creation (minor 1); 0 before that */
	*ring_id = shmt_ring_id(v);
	*run_id = 0;
}

static void ring_close(struct source *s)
{
	struct source_ringbe *be = s->be;

	if (!be)
		return;
	shmt_view_close(&be->v);
	free(be->blockbuf);
	free(be);
}

/* the slots of struct source_ops (source_int.h), as the other back-end
 * fills them: the same shape on purpose */
const struct source_ops source_ring_ops = {
	.kind = "ring",
	.pass = ring_pass,
	.clock_offset = ring_clock_offset,
	.ring_info = ring_info,
	.close = ring_close,
	.plausible = ring_plausible,
};
