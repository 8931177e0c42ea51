/* SPDX-License-Identifier: MIT */
/*
 * nest.h - the spans of one thread as a tree. Spans of a thread nest by
 * [ts, ts + dur]; their records are written at their end, children before
 * their parent, so no one pass in arrival order knows a span's parent
 * when it sees the span. Sorted by thread, then start (the longer span
 * first), the records come in the tree's preorder, and a stack of the
 * spans still open at each record gives its parent: the innermost span
 * that encloses it.
 */
#ifndef SHMTRACE_NEST_H
#define SHMTRACE_NEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A span, instant or open span's place in its thread's tree: the first
 * member of the items the caller sorts with nest_cmp(). */
struct nest_key {
	uint64_t ts, dur;	/* dur 0 for an instant */
	uint64_t seq;		/* the caller's number for the record, rising with arrival */
	uint32_t pid, tid;	/* its thread (pid as written) */
	uint32_t kind;		/* SHMTRACE_KIND_* */
	uint32_t user;		/* the caller's, never read here */
};

/*
 * The walk's order: by thread, then start; at one start the longer span
 * first (it encloses the shorter), spans before instants (a zero-length
 * span encloses an instant at its time), then arrival (of identical
 * spans, the first to arrive encloses the others). Items begin with a
 * struct nest_key. The flows' order (flows.c) breaks ties the same way,
 * so that a hop that encloses another of its flow also comes first there.
 */
int nest_cmp(const void *a, const void *b);

/* What every stack entry begins with. */
struct nest_ent {
	uint64_t end;		/* ts + dur, at most UINT64_MAX */
};

/*
 * The stack of one walk: entries of size bytes (beginning with a struct
 * nest_ent), at most max deep. A span found deeper than max is not
 * pushed: what it encloses nests under the deepest entry, so memory stays
 * bounded whatever a capture holds.
 */
struct nest {
	char *v;
	size_t size, n, cap, max;
	uint32_t pid, tid;	/* the thread of the entries */
};

void nest_init(struct nest *n, size_t size, size_t max);
void nest_free(struct nest *n);

/* Whether span or instant k ends by end. */
bool nest_inside(const struct nest_key *k, uint64_t end);

/*
 * For k, the next item of the walk: pops the entries that do not enclose
 * it (all of them when it is of another thread) and returns the innermost
 * one that does, NULL when none does (k is a root of its thread).
 */
void *nest_find(struct nest *n, const struct nest_key *k);

/* Pushes span k (after nest_find(k)): *ent is its entry, zeroed but for
 * its end, or NULL when the stack is max deep. Returns 0 or -ENOMEM. */
int nest_push(struct nest *n, const struct nest_key *k, void **ent);

/* Entries on the stack. */
static inline size_t nest_depth(const struct nest *n)
{
	return n->n;
}

/* Empties the stack, for another walk. */
static inline void nest_reset(struct nest *n)
{
	n->n = 0;
}

#endif
