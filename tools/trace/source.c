/* SPDX-License-Identifier: MIT */
/*
 * source.c - reading a trace from capture files or from a ring, so that
 * export, summary and stat share one notion of "the records of a run":
 * the part both back-ends share (string and name-slot tables, the loss
 * counters, passes); each back-end is behind struct source_ops.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "source_int.h"

int source_table_set(char **str, uint32_t *slen, uint32_t n, uint32_t id, const char *text,
		     size_t len)
{
	char *c;

	if (!str || id == 0 || id >= n)
		return 0;
	c = malloc(len + 1);
	if (!c)
		return -ENOMEM;
	memcpy(c, text, len);
	c[len] = 0;
	free(str[id]);
	str[id] = c;
	slen[id] = (uint32_t)len;
	return 0;
}

int source_table_alloc(char ***str, uint32_t **slen, uint32_t n)
{
	*str = calloc(n, sizeof(**str));
	*slen = calloc(n, sizeof(**slen));
	return *str && *slen ? 0 : -ENOMEM;
}

void source_table_free(char **str, uint32_t *slen, uint32_t n)
{
	for (uint32_t i = 0; str && i < n; i++)
		free(str[i]);
	free(str);
	free(slen);
}

int source_alloc_strings(struct source *s, uint32_t n)
{
	if (source_table_alloc(&s->str, &s->slen, n) < 0)
		return -ENOMEM;
	s->nstr = n;
	return 0;
}

int source_add_thread(struct source *s, const struct shmt_thread *t, uint32_t ring)
{
	size_t cap = s->thrcap, rcap = s->thrcap;

	/* two arrays of one capacity: it grows when both have */
	if (array_reserve(&s->thr, &cap, s->nthr + 1, sizeof(*s->thr), 64) < 0 ||
	    array_reserve(&s->thr_ring, &rcap, s->nthr + 1, sizeof(*s->thr_ring), 64) < 0)
		return -ENOMEM;
	s->thrcap = cap;
	s->thr_ring[s->nthr] = ring;
	s->thr[s->nthr] = *t;
	s->thr[s->nthr].name[SHMT_NAME_LEN - 1] = 0;
	s->thr[s->nthr].pname[SHMT_NAME_LEN - 1] = 0;
	s->nthr++;
	return 0;
}

bool source_has_string(const struct source *s, uint32_t id)
{
	return id != 0 && id < s->nstr && s->str[id];
}

void source_strings_used(const struct source *s, uint32_t *n, uint64_t *bytes)
{
	*n = 0;
	*bytes = 0;
	for (uint32_t id = 1; id < s->nstr; id++) {
		if (s->str[id]) {
			(*n)++;
			*bytes += s->slen[id] + 1ull;
		}
	}
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

const char *source_trigger_label(struct source *s, const struct shmt_record *r, char *buf,
				 size_t buflen, size_t *len)
{
	size_t n;
	const char *name = source_string(s, r->name, &n);
	int k = snprintf(buf, buflen, "trigger: %.*s", (int)n, name);

	*len = k < 0 ? 0 : (size_t)k < buflen ? (size_t)k : buflen - 1;
	return buf;
}

const char *source_kind(const struct source *s)
{
	return s->ops->kind;
}

const char *source_input(const struct source *s, size_t i)
{
	if (!s->ninputs)
		return i == 0 ? s->name : NULL;
	return i < s->ninputs ? s->inputs[i] : NULL;
}

/*
 * Counters that cannot be true of the input (loss.h, shmt_loss_plausible():
 * one at 2^63 or more went below zero, one beyond what the ring could
 * take in its life, relations between them and the head that cannot
 * hold) are forged or a writer's bug: said once in words, marked corrupt
 * so that no tool shows them as counts, and the trace is incomplete.
 */
static void check_losses(struct source *s, bool passed)
{
	char why[sizeof(s->loss.corrupt_why)];

	if (s->loss.corrupt || !s->ops->plausible || s->ops->plausible(s, passed, why, sizeof(why)))
		return;
	s->loss.corrupt = true;
	snprintf(s->loss.corrupt_why, sizeof(s->loss.corrupt_why), "%s", why);
	s->damaged = true;
	source_warnx("%s: loss counters corrupt (%s): not reported", s->name, why);
}

int source_records(struct source *s, source_record_fn fn, void *ctx, char *err, size_t errlen)
{
	struct source_pass p = { .s = s, .fn = fn, .ctx = ctx };
	int ret;

	s->records = 0;
	s->follows = false;
	if ((ret = source_open_pass(s, &p.fn, &p.ctx)) < 0) {
		snprintf(err, errlen, "out of memory");
		return ret;
	}
	ret = s->ops->pass(s, &p, err, errlen);
	/* every pass sees the same torn records: count them once */
	if (!s->passes++) {
		s->loss.torn += p.skips.torn;
		s->loss.overwritten += p.skips.lapped;
		if (ret == 0 && s->ops->first_pass_done)
			s->ops->first_pass_done(s);
		if (ret == 0)
			check_losses(s, true);
	}
	return ret;
}

int source_clock_offset(struct source *s, const char *host, int64_t ns)
{
	return s->ops->clock_offset(s, host, ns);
}

int source_ring_info(const struct source *s, uint32_t i, const char **name, uint64_t *ring_id,
		     uint64_t *run_id)
{
	if (i >= s->nrings)
		return -ENOENT;
	s->ops->ring_info(s, i, name, ring_id, run_id);
	return 0;
}

void source_close(struct source *s)
{
	/* a source that failed to open may have no back-end yet */
	if (s->ops)
		s->ops->close(s);
	source_open_free(s);
	source_table_free(s->str, s->slen, s->nstr);
	free(s->thr);
	free(s->thr_ring);
	free(s->snaps);
	free(s->host_of);
	free(s->hosts);
	for (size_t i = 0; i < s->nmissing_parts; i++)
		free(s->missing_parts[i]);
	free(s->missing_parts);
	for (size_t i = 0; i < s->nmissing_why; i++)
		free(s->missing_why[i]);
	free(s->missing_why);
	memset(s, 0, sizeof(*s));
}

bool source_complete(const struct source *s)
{
	/* every part missing is named, and said in words */
	return !s->cut && !s->damaged && !s->nmissing_parts && !s->nmissing_why;
}

int source_open(struct source *s, const char *ring, char *const *paths, size_t n,
		char *err, size_t errlen)
{
	int ret = ring && !n ? source_open_ring(s, ring, err, errlen)
			    : source_open_files_ring(s, ring, paths, n, err, errlen);

	if (ret == 0)
		check_losses(s, false);
	return ret;
}
