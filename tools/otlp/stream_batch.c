/* SPDX-License-Identifier: MIT */
/*
 * stream_batch.c - the live stream's requests: each span the model makes
 * sampled (--otlp-sample) and encoded into the batch, and the batch cut,
 * when full or old, into a request (protobuf or JSON, gzipped or not)
 * with the checkpoint of where the pass then is, queued for the sender.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "source_follow.h"
#include "stream_int.h"

/* The batch as a request body: protobuf or JSON, gzipped or not; of an
 * empty batch, the request of no span that carries the losses (the file
 * export's otlp_put_loss_request()). */
static int make_body(struct otlp_stream *st, struct obuf *out)
{
	struct otlp *o = st->o;
	struct obuf *raw = st->so->gzip ? &st->req : out;
	int ret = 0;

	if (st->so->oo.protobuf && o->batch_spans) {
		ret = otlp_pb_request(o, &st->pre, raw);
	} else if (st->so->oo.protobuf) {
		ret = otlp_pb_loss_request(o, &st->pre, raw);
	} else {
		struct sink k = { .body = raw };

		raw->len = 0;
		if (o->batch_spans)
			otlp_put_request(o, &st->pre, &k);
		else
			otlp_put_loss_request(o, raw);
		if (k.oom || raw->oom)
			ret = -ENOMEM;
		else
			raw->len--;	/* the line's end, for a file only */
	}
	if (ret == 0 && st->so->gzip)
		ret = gz_compress(&st->gz, raw->p, raw->len, out);
	return ret;
}

bool stream_losses_untold(struct otlp_stream *st)
{
	uint64_t said = otlp_scope_said(st->o);

	return said && said != st->loss_said;
}

int stream_cut(struct otlp_stream *st, bool force)
{
	struct otlp *o = st->o;
	struct qreq r;
	int ret = 0;

	if (!o->batch_spans && !force)
		return 0;
	memset(&r, 0, sizeof(r));
	/* a request's scope says what was lost: with no span to carry what
	 * the endpoint was not told, a request of none carries it */
	if (o->batch_spans || stream_losses_untold(st)) {
		ret = make_body(st, &r.body);
		r.spans = o->batch_spans;
		st->loss_said = otlp_scope_said(o);
		otlp_batch_reset(o);
	}
	if (ret == 0)
		ret = ckpt_make(st, &r.ckpt);
	if (ret < 0) {
		ob_free(&r.body);
		ob_free(&r.ckpt);
		return ret;
	}
	r.backlog_done = source_follow_backlog_done(&st->src);
	pthread_mutex_lock(&st->cmu);
	r.at_cut = st->c;
	pthread_mutex_unlock(&st->cmu);
	st->cut_seq = st->next_seq;
	st->cut_at = clock_ns(CLOCK_MONOTONIC);
	/* the sender shows it while the reader waits on the queue */
	stream_publish(st, NULL);
	return sender_push(st, &r);
}

static bool sampled(const struct otlp_stream *st, const struct span *sp)
{
	switch (st->so->sample) {
	case SAMPLE_FLOWS:
		return sp->in_flow;
	case SAMPLE_RATIO:
		/* by the trace id's low half, as OpenTelemetry's ratio sampler
		 * does: every host keeps the same traces */
		return sp->tlo < st->so->ratio_bound;
	default:
		return true;
	}
}

int stream_span(struct otlp *o, const struct span *sp)
{
	struct otlp_stream *st = o->st;
	int ret;

	/* made and sent before the checkpoint this release resumes from */
	if (st->in_win && st->win_made++ < st->win_skip)
		return 0;
	if (!sampled(st, sp)) {
		stream_count(st, &st->c.sampled_out, 1);
		return 0;
	}
	if (!o->batch_spans)
		st->batch_t0 = clock_ns(CLOCK_MONOTONIC);
	ret = otlp_encode_span(o, sp);
	if (ret == 0 && (o->batch_spans >= st->so->batch_spans ||
			 otlp_batch_full(o, st->so->batch_bytes)))
		ret = stream_cut(st, false);
	return ret;
}
