/* SPDX-License-Identifier: MIT */
/*
 * loss.c - the table of loss kinds, and reading and merging the ring's
 * loss counters (loss.h).
 */
#include <stdio.h>

#include "ring_writer.h"
#include "loss.h"
#include "ring_reader.h"

const struct shmt_loss_kind shmt_loss_kinds[SHMT_LOSS_NKINDS] = {
#define KIND(f, u, minor, frame, w) { #f, u, w, offsetof(struct shmt_loss, f) },
	SHMT_LOSS_KINDS(KIND)
#undef KIND
};

uint64_t shmt_loss_records(const struct shmt_loss *l)
{
	uint64_t n = 0;

	for (size_t i = 0; i < SHMT_LOSS_NKINDS; i++)
		if (shmt_loss_kinds[i].unit == SHMT_LOSS_RECORDS)
			n += shmt_loss_get(l, &shmt_loss_kinds[i]);
	return n;
}

void shmt_loss_merge(struct shmt_loss *dst, const struct shmt_loss *src, enum shmt_loss_op op)
{
#define MERGE(f, u, minor, frame, w)					\
	dst->f = op == SHMT_LOSS_ADD ? dst->f + src->f			\
				     : (src->f > dst->f ? src->f : dst->f);
	SHMT_LOSS_KINDS(MERGE)
#undef MERGE
}

void shmt_loss_read(const struct shmt_view *v, struct shmt_loss *l, bool lapped)
{
	const struct shmt_header *h = v->h;
	uint64_t head;

	/* a counter the ring's minor predates is reserved space: zero, or
	 * whatever a forger put there; read as 0 either way */
#define READ(f, u, since, frame, w)					\
	l->f = v->minor >= (since) ? load_relaxed(&h->f.v) : 0;
	SHMT_LOSS_KINDS(READ)
#undef READ
	if (!lapped)
		return;
	/* the one place `overwritten` is computed for a ring as it is: what
	 * collectors counted, plus what the head lapped past their tail */
	head = shmt_ring_head(v);
	if (head > v->capacity)
		l->overwritten += shmt_ring_unread_below(v, head - v->capacity);
}

void shmt_loss_lock_dropped(struct shmt_view *v, uint64_t n)
{
	struct shmt_header *h = v->h;

	fetch_add(v->minor >= 5 ? &h->lock_dropped.v : &h->dropped.v, n);
}

void shmt_loss_orphaned(struct shmt_view *v, uint64_t n)
{
	struct shmt_header *h = v->h;

	fetch_add(v->minor >= 5 ? &h->orphaned.v : &h->dropped.v, n);
}

uint64_t shmt_loss_age_ns(uint64_t realtime0)
{
	uint64_t now = shmt_realtime_ns();

	return realtime0 && realtime0 <= now ? now - realtime0 : 0;
}

/* n in words that never read as a count when it is out of all range. */
static const char *num(char *buf, size_t len, uint64_t n)
{
	snprintf(buf, len, n < 1000000000000ull ? "%llu" : "0x%llx", (unsigned long long)n);
	return buf;
}

/* "name a > b, what": false, with why set. */
static bool refuse(char *why, size_t len, const char *name, uint64_t a, uint64_t b,
		   const char *what)
{
	char x[24], y[24];

	snprintf(why, len, "%s %s > %s, %s", name, num(x, sizeof(x), a), num(y, sizeof(y), b),
		 what);
	return false;
}

/* a + b, saturated. */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

bool shmt_loss_plausible(const struct shmt_loss *l, const struct shmt_loss_scope *sc,
			 char *why, size_t len)
{
	uint64_t lost = 0, limit = UINT64_MAX;
	char age[48];

	if (sc->age_ns) {
		uint64_t ns = sat_add(sc->age_ns, SHMT_LOSS_SLACK_NS);

		limit = ns > UINT64_MAX / SHMT_LOSS_PER_NS ? UINT64_MAX : ns * SHMT_LOSS_PER_NS;
		snprintf(age, sizeof(age), "what the ring could take in its %llu s",
			 (unsigned long long)(sc->age_ns / 1000000000ull));
	}
	for (size_t i = 0; i < SHMT_LOSS_NKINDS; i++) {
		const struct shmt_loss_kind *k = &shmt_loss_kinds[i];
		uint64_t v = shmt_loss_get(l, k);

		if (v >= 1ull << 63)
			return refuse(why, len, k->name, v, (1ull << 63) - 1,
				      "a negative count (counters only grow)");
		if (v > limit)
			return refuse(why, len, k->name, v, limit, age);
		if (k->unit == SHMT_LOSS_RECORDS)
			lost = sat_add(lost, v);
	}
	if (lost > limit)
		return refuse(why, len, "records lost", lost, limit, age);
	if (sc->discard && l->overwritten)
		return refuse(why, len, "overwritten", l->overwritten, 0,
			      "in a discard ring, which overwrites nothing");
	if (sc->heads && sc->consumed > sc->published)
		return refuse(why, len, "consumed", sc->consumed, sc->published,
			      "the records published");
	if (sc->heads || sc->has_published) {
		if (l->overwritten > sc->published)
			return refuse(why, len, "overwritten", l->overwritten, sc->published,
				      "the records published");
	}
	if (sc->heads && l->torn > sat_add(sc->published, sc->staged))
		return refuse(why, len, "torn", l->torn, sat_add(sc->published, sc->staged),
			      "the records published and staged");
	if (sc->has_read) {
		uint64_t seen = sat_add(sat_add(sc->read, l->overwritten), l->torn);

		if (seen > sat_add(sc->published, sc->staged))
			return refuse(why, len, "exported + overwritten + torn", seen,
				      sat_add(sc->published, sc->staged),
				      "the records published and staged");
	}
	return true;
}
