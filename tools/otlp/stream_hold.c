/* SPDX-License-Identifier: MIT */
/*
 * stream_hold.c - the events the pass gives the live stream, into its
 * model (stream_model.c), with where each is in the capture; and, going
 * on from a checkpoint, the pass read again from its oldest event, which
 * holds again only the events the checkpoint held (the others were sent)
 * and then sends the release it was taken inside.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "source_follow.h"
#include "stream_int.h"

/* Takes the event held back for its arguments into the model: none more
 * can come. */
int stream_take_held(struct otlp_stream *st)
{
	int ret = otlp_take_held(st->o);

	if (ret == 0 && st->last_rseq + 1 > st->next_seq) {
		st->next_seq = st->last_rseq + 1;
		st->pseq = st->o->seq;
	}
	return ret;
}

/* Going on from a checkpoint: whether the event numbered seq was held then
 * (*inwin: in the release being sent); the others were sent. The events
 * come again in the order of their numbers. */
static bool replay_keep(struct otlp_stream *st, uint64_t seq, bool *inwin)
{
	bool open = seq > OTLP_OPEN_SEQ / 2;
	uint64_t *v = open ? st->ropen : st->rheld, n = open ? OTLP_OPEN_SEQ - seq : seq;
	size_t *at = open ? &st->ropen_pos : &st->rheld_pos, len = open ? st->nropen : st->nrheld;

	*inwin = false;
	if (!st->replaying)
		return true;
	while (*at < len && v[*at] >> 1 < n) {
		/* not read again: lost with a part deleted since */
		stream_count(st, &st->c.skipped, 1);
		(*at)++;
	}
	if (*at == len || v[*at] >> 1 != n)
		return false;
	*inwin = v[(*at)++] & 1;
	return true;
}

static int hold(struct otlp_stream *st, const struct shmt_record *r, uint32_t outpid,
		uint64_t seq, const struct sev_pos *pos, const struct open_args *a)
{
	uint32_t at;
	bool inwin;
	int ret;

	if (!replay_keep(st, seq, &inwin))
		return 0;
	ret = model_add(st, r, outpid, seq, pos, a, &at);
	if (ret == 0)
		st->m.v[at].inwin = inwin;
	return ret;
}

int stream_hold_event(struct otlp *o, const struct shmt_record *r, uint32_t outpid, uint64_t seq,
		      const struct ev_args *a)
{
	struct otlp_stream *st = o->st;
	struct sev_pos pos = { .rseq = st->pend_seq, .pseq = st->pend_pseq, .nopen = o->nopen };
	char text[SHMTRACE_TEXT_MAX];
	struct open_args oa;
	int ret = a && a->n ? args_texts_out(o->arrive, a, &oa, text) : 0;

	/* its texts are copied: the store is for the next event */
	args_store_clear(o->arrive);
	if (ret < 0)
		return ret;
	return hold(st, r, outpid, seq, &pos, a && a->n ? &oa : NULL);
}

int stream_hold_open(struct otlp *o, const struct shmt_record *r, uint32_t outpid, uint64_t seq,
		     const struct open_args *a)
{
	struct otlp_stream *st = o->st;
	struct sev_pos pos = { .rseq = source_follow_seq(&st->src), .pseq = o->seq,
			       .nopen = OTLP_OPEN_SEQ - seq };

	return hold(st, r, outpid, seq, &pos, a);
}

/* The replay is over (the capture reached where the checkpoint was, or
 * has nothing more): the release it was taken inside goes first. */
int stream_replay_end(struct otlp_stream *st)
{
	bool resume = false;
	int ret;

	if (!st->replaying)
		return 0;
	/* an event read again and held back for its arguments: they all came
	 * before the checkpoint's place, as it was not held back then */
	if ((ret = stream_take_held(st)) < 0)
		return ret;
	st->replaying = false;
	for (; st->rheld_pos < st->nrheld; st->rheld_pos++)
		stream_count(st, &st->c.skipped, 1);
	for (; st->ropen_pos < st->nropen; st->ropen_pos++)
		stream_count(st, &st->c.skipped, 1);
	free(st->rheld);
	free(st->ropen);
	st->rheld = st->ropen = NULL;
	st->nrheld = st->rheld_pos = st->nropen = st->ropen_pos = 0;
	for (size_t i = 0; i < st->m.n; i++)
		resume |= st->m.v[i].live && st->m.v[i].inwin;
	return resume ? model_resume_release(st) : 0;
}
