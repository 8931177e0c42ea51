/* SPDX-License-Identifier: MIT */
/*
 * nest.c - a thread's spans as a tree (nest.h): the order that walks the
 * tree in preorder, and the stack that gives each record its parent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "nest.h"
#include "record.h"

#define CMP(a, b) ((a) < (b) ? -1 : (a) > (b))

int nest_cmp(const void *pa, const void *pb)
{
	const struct nest_key *a = pa, *b = pb;
	int c;

	if ((c = CMP(a->pid, b->pid)) || (c = CMP(a->tid, b->tid)) || (c = CMP(a->ts, b->ts)) ||
	    (c = CMP(b->dur, a->dur)) ||
	    (c = CMP(a->kind == SHMTRACE_KIND_INSTANT, b->kind == SHMTRACE_KIND_INSTANT)))
		return c;
	return CMP(a->seq, b->seq);
}

void nest_init(struct nest *n, size_t size, size_t max)
{
	memset(n, 0, sizeof(*n));
	n->size = size;
	n->max = max;
}

void nest_free(struct nest *n)
{
	free(n->v);
	nest_init(n, n->size, n->max);
}

bool nest_inside(const struct nest_key *k, uint64_t end)
{
	return shmt_time_end(k->ts, k->dur) <= end;
}

void *nest_find(struct nest *n, const struct nest_key *k)
{
	if (n->n && (k->pid != n->pid || k->tid != n->tid))
		n->n = 0;
	n->pid = k->pid;
	n->tid = k->tid;
	/* the sort put every entry's start at or before k's: an entry
	 * encloses k when it ends no earlier */
	while (n->n && !nest_inside(k, ((struct nest_ent *)(n->v + (n->n - 1) * n->size))->end))
		n->n--;
	return n->n ? n->v + (n->n - 1) * n->size : NULL;
}

int nest_push(struct nest *n, const struct nest_key *k, void **ent)
{
	char *e;

	*ent = NULL;
	if (n->n >= n->max)
		return 0;
	if (array_reserve_max(&n->v, &n->cap, n->n + 1, n->size, 16, n->max) < 0)
		return -ENOMEM;
	e = n->v + n->n++ * n->size;
	memset(e, 0, n->size);
	((struct nest_ent *)e)->end = shmt_time_end(k->ts, k->dur);
	*ent = e;
	return 0;
}
