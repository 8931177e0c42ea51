/* SPDX-License-Identifier: MIT */
/*
 * source_merge.c - joining the captures of several rings (and hosts) into
 * one source: one string table for all of them, and one time line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "source_capture.h"

static int no_memory(uint32_t *slot, char *err, size_t errlen)
{
	free(slot);
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

/*
 * One ring: its own table. Several: every distinct text gets one id of a
 * new table (first ring first, then by id), and each ring a map from its
 * ids to those; an id a ring never defined maps to 0 and shows as "?", as
 * it would alone.
 */
int source_merge_strings(struct source *s, struct source_capture *c, char *err, size_t errlen)
{
	const uint32_t nslots = 2 * CAP_MAX_STRINGS;	/* power of two */
	uint32_t *slot, next = 0;

	if (c->nruns == 1) {
		s->str = c->runs[0].str;
		s->slen = c->runs[0].slen;
		s->nstr = CAP_MAX_STRINGS;
		c->runs[0].str = NULL;
		c->runs[0].slen = NULL;
		return 0;
	}
	slot = calloc(nslots, sizeof(*slot));
	if (!slot || source_alloc_strings(s, CAP_MAX_STRINGS) < 0)
		return no_memory(slot, err, errlen);
	for (size_t r = 0; r < c->nruns; r++) {
		struct source_run *run = &c->runs[r];

		run->map = calloc(CAP_MAX_STRINGS, sizeof(*run->map));
		if (!run->map)
			return no_memory(slot, err, errlen);
		for (uint32_t id = 1; run->str && id < CAP_MAX_STRINGS; id++) {
			const char *t = run->str[id];
			uint32_t len = run->slen[id], h;

			if (!t)
				continue;
			h = fnv1a32(t, len) & (nslots - 1);
			while (slot[h] && (s->slen[slot[h]] != len ||
					   memcmp(s->str[slot[h]], t, len)))
				h = (h + 1) & (nslots - 1);
			if (!slot[h]) {
				if (++next >= CAP_MAX_STRINGS) {
					free(slot);
					snprintf(err, errlen,
						 "the inputs' %zu rings hold more than %u distinct "
						 "names together; export them separately",
						 c->nruns, CAP_MAX_STRINGS - 1);
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
		source_table_free(run->str, run->slen, CAP_MAX_STRINGS);
		run->str = NULL;
		run->slen = NULL;
	}
	free(slot);
	return 0;
}

/* The host of run r: its first file's header names it. */
static const char *host_of_run(const struct source_capture *c, size_t r)
{
	for (size_t i = 0; i < c->nfiles; i++)
		if (c->files[i].h.run_id == c->runs[r].run_id)
			return c->files[i].h.host;
	return "";
}

/*
 * Moves each run of another host than the first file's onto that file's
 * clock: a record at ring time ts happened at wall time realtime0 + ts -
 * mono0 of its own ring, which is ring time of the first file's ring ts +
 * (its realtime0 - mono0) - (the first's realtime0 - mono0). Rings of one
 * host share CLOCK_MONOTONIC and are left alone (their anchors are read a
 * few microseconds apart, which would only add error).
 */
int source_group_hosts(struct source *s, struct source_capture *c, char *err, size_t errlen)
{
	const struct source_run *ref = source_run_of(c, c->files[0].h.run_id);
	uint32_t refhost = 0;

	s->host_of = calloc(c->nruns, sizeof(*s->host_of));
	s->hosts = calloc(c->nruns, sizeof(*s->hosts));
	if (!s->host_of || !s->hosts) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t r = 0; r < c->nruns; r++) {
		const char *host = host_of_run(c, r);
		uint32_t h;

		for (h = 0; h < s->nhosts && strcmp(s->hosts[h], host); h++)
			;
		if (h == s->nhosts)
			snprintf(s->hosts[s->nhosts++], sizeof(s->hosts[0]), "%s", host);
		s->host_of[r] = h;
		if (&c->runs[r] == ref)
			refhost = h;
	}
	for (size_t r = 0; s->nhosts > 1 && r < c->nruns; r++) {
		struct source_run *run = &c->runs[r];

		if (s->host_of[r] != refhost)
			run->shift = (run->realtime0 - run->mono0) - (ref->realtime0 - ref->mono0);
	}
	return 0;
}
