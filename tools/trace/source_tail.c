/* SPDX-License-Identifier: MIT */
/*
 * source_tail.c - capture files and the ring they were drained from, read
 * as one source (`shmtrace export FILE... --ring NAME`): the captures'
 * records, then what the ring still holds beyond them, told apart by ring
 * sequence. A collector that stopped on an error (a full disk) leaves
 * the rest in the ring; this is how one export adds it all up.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source_capture.h"

/* The ring's id, 0 when it has none (format 1.0); -errno when it cannot
 * be opened. */
static int ring_id_of(const char *ring, uint64_t *id)
{
	struct shmt_view v;
	char err[256];
	int ret = shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err));

	if (ret < 0)
		return ret;
	*id = shmt_ring_id(&v);
	shmt_view_close(&v);
	return 0;
}

void source_tail_hint(const struct source_file *sf)
{
	uint64_t id;

	if (sf->h.ring_id && ring_id_of(sf->h.ring, &id) == 0 && id == sf->h.ring_id)
		source_warnx("the ring '%s' still exists and may hold the rest: "
			     "shmtrace export %s --ring %s", sf->h.ring, sf->path, sf->h.ring);
}

/* Every file must come from the ring: the same ring_id, not 0. */
static int check_ring(struct source_capture *c, const char *ring, uint64_t id, char *err,
		      size_t errlen)
{
	for (size_t i = 0; i < c->nfiles; i++) {
		const struct source_file *f = &c->files[i];

		if (!id || f->h.ring_id != id) {
			snprintf(err, errlen, "%s was not drained from ring '%s' (ring id %016llx "
				 "there, %016llx in the file%s); export them separately",
				 f->path, ring, (unsigned long long)id,
				 (unsigned long long)f->h.ring_id,
				 !id || !f->h.ring_id ? ": without an id they cannot be matched" : "");
			return -EINVAL;
		}
	}
	return 0;
}

/* The ring's names and counters join its run's (the ring's tables hold
 * the captures' and what came after). */
static int add_ring_tables(struct source *s, struct source_run *run, struct source *t)
{
	uint64_t tail, head;
	int ret;

	for (uint32_t id = 1; id < t->nstr && id < CAP_MAX_STRINGS; id++)
		if (t->str[id] && (ret = source_table_set(run->str, run->slen, CAP_MAX_STRINGS, id,
							   t->str[id], t->slen[id])) < 0)
			return ret;
	for (size_t i = 0; i < t->nthr; i++)
		if ((ret = source_add_thread(s, &t->thr[i], 0)) < 0)
			return ret;
	shmt_loss_merge(&run->loss, &t->loss.counters, SHMT_LOSS_MAX);
	s->tables = t->tables;
	source_ring_seqs(t, &tail, &head);
	if (head > run->published)
		run->published = head;
	return 0;
}

int source_tail_open(struct source *s, struct source_capture *c, const char *ring, char *err,
		     size_t errlen)
{
	struct source *t = calloc(1, sizeof(*t));
	const char *name;
	uint64_t id, run_id;
	int ret;

	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->tail = t;
	ret = source_open_ring(t, ring, err, errlen);
	if (ret < 0)
		return ret;
	s->perm &= t->perm;
	source_ring_info(t, 0, &name, &id, &run_id);
	if ((ret = check_ring(c, ring, id, err, errlen)) < 0)
		return ret;
	if (c->nruns != 1) {
		/* one ring_id, two run_ids: the files contradict each other */
		snprintf(err, errlen, "the captures come from %zu runs of ring '%s'; give those "
			 "of one run with --ring", c->nruns, name);
		return -EINVAL;
	}
	ret = add_ring_tables(s, &c->runs[0], t);
	if (ret < 0)
		snprintf(err, errlen, "out of memory");
	return ret;
}

/*
 * After the captures' first read: whether the ring holds everything from
 * where they end (its tail is not past their last record), so that a
 * capture cut short, or a part after the last that was never written,
 * lacks nothing the ring does not give. A collector moves the tail only
 * over what its capture holds, and producers the head only forward, so
 * tail <= end_seq <= head: a ring against that is said to be, since what
 * tells its records from the captures' is their sequence. A forger who
 * shifts head and tail by a multiple of 2^24 leaves the slots matching
 * (the commit word holds 24 bits of sequence): this is where it shows.
 */
bool source_tail_covers(const struct source_capture *c, uint64_t end_seq)
{
	uint64_t tail, head;

	if (!c->tail)
		return false;
	source_ring_seqs(c->tail, &tail, &head);
	if (head < end_seq)
		source_warnx("ring '%s': its head (%llu) is behind the end of the captures (%llu), "
			     "which no producer leaves it: its header is forged or damaged, and what "
			     "it holds past the captures is not read", c->tail->name,
			     (unsigned long long)head, (unsigned long long)end_seq);
	else if (tail > end_seq)
		source_warnx("ring '%s': its tail (%llu) is past the end of the captures (%llu): "
			     "the records between are in none of the files given (a later part "
			     "missing?), or its header is forged and what it holds may repeat "
			     "records of the captures", c->tail->name, (unsigned long long)tail,
			     (unsigned long long)end_seq);
	return tail <= end_seq;
}

struct tail_ctx {
	struct source *s;
	struct source_run *run;
	struct source *t;
	source_record_fn fn;
	void *ctx;
};

static int tail_one(void *arg, const struct shmt_record *r, uint64_t start_time)
{
	struct tail_ctx *x = arg;

	x->s->ring = 0;
	x->s->follows = x->t->follows;
	x->s->records++;
	x->run->records++;
	return x->fn(x->ctx, r, start_time);
}

int source_tail_pass(struct source *s, struct source_capture *c, struct source_pass *p,
		     char *err, size_t errlen)
{
	struct tail_ctx x = { s, &c->runs[0], c->tail, p->fn, p->ctx };
	struct source_pass tp = { .s = c->tail, .fn = tail_one, .ctx = &x };
	int ret;

	if (!c->tail)
		return 0;
	/* the sequences the captures had are theirs */
	source_ring_from(c->tail, c->runs[0].next_seq);
	s->follows = false;
	ret = c->tail->ops->pass(c->tail, &tp, err, errlen);
	p->skips.torn += tp.skips.torn;
	p->skips.lapped += tp.skips.lapped;
	return ret;
}

void source_tail_close(struct source_capture *c)
{
	if (c->tail) {
		source_close(c->tail);
		free(c->tail);
	}
	c->tail = NULL;
}
