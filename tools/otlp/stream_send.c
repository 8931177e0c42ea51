/* SPDX-License-Identifier: MIT */
/*
 * stream_send.c - the live stream's sender: a thread that takes the
 * requests the stream cuts, STREAM_QUEUE at most waiting (a slower
 * endpoint makes the stream wait, and the capture keeps what it has not
 * read), and POSTs each over one kept-alive connection, as the OTLP
 * specification says: 429, 502, 503, 504 and broken connections tried
 * again, after an exponential back-off with jitter or the Retry-After the
 * endpoint asked for; any other status not tried again (its spans counted
 * rejected, a 400 above all); a partial success's rejected spans counted.
 * Once a request is answered its checkpoint is written: what was sent is
 * then never sent again, whatever stops the stream after.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stream_int.h"

#define BACKOFF_MIN_MS		100u
#define BACKOFF_MAX_MS		30000u
/* how often a wait looks at whether the stream stops */
#define WAKE_MS			100u
/* a failure said once, then at most this often while it lasts */
#define SAY_EVERY_NS		(60ull * 1000000000ull)

/* Waits ms, or less when the stream stops: false then. */
static bool nap(struct sender *s, unsigned ms)
{
	uint64_t until = clock_ns(CLOCK_MONOTONIC) + (uint64_t)ms * 1000000ull;

	while (!stream_stopping()) {
		uint64_t now = clock_ns(CLOCK_MONOTONIC), step = WAKE_MS * 1000000ull;
		struct timespec ts;

		if (now >= until)
			return true;
		if (until - now < step)
			step = until - now;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)((uint64_t)ts.tv_nsec + step) / 1000000000;
		ts.tv_nsec = (long)(((uint64_t)ts.tv_nsec + step) % 1000000000ull);
		pthread_mutex_lock(&s->mu);
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		pthread_mutex_unlock(&s->mu);
	}
	return false;
}

/* What request r holds, in words: its spans, or the losses alone. */
static const char *what_of(const struct qreq *r, char *buf, size_t len)
{
	if (!r->spans)
		return "the request of the losses (no span)";
	snprintf(buf, len, "%llu spans", (unsigned long long)r->spans);
	return buf;
}

/* An answer the endpoint gave: counted. */
static void answered(struct otlp_stream *st, const struct qreq *r, const struct http_answer *a,
		     uint64_t said[2])
{
	char msg[256], what[32];
	uint64_t rej;

	if (a->status >= 200 && a->status < 300) {
		rej = otlp_partial_success(a, msg, sizeof(msg));
		if (rej > r->spans)
			rej = r->spans;
		pthread_mutex_lock(&st->cmu);
		st->c.requests++;
		st->c.sent += r->spans - rej;
		st->c.rejected += rej;
		pthread_mutex_unlock(&st->cmu);
		if (rej && clock_ns(CLOCK_MONOTONIC) - said[0] >= SAY_EVERY_NS) {
			said[0] = clock_ns(CLOCK_MONOTONIC);
			fprintf(stderr, "shmtrace stream: the endpoint rejected %llu of %llu spans "
				"(partial success)%s%s\n", (unsigned long long)rej,
				(unsigned long long)r->spans, msg[0] ? ": " : "", msg);
		}
		return;
	}
	stream_count(st, &st->c.rejected, r->spans);
	if (clock_ns(CLOCK_MONOTONIC) - said[1] >= SAY_EVERY_NS) {
		said[1] = clock_ns(CLOCK_MONOTONIC);
		otlp_answer_line(a, msg, sizeof(msg));
		fprintf(stderr, "shmtrace stream: http://%s%s answered HTTP %d%s%s%s%s: %s "
			"rejected, not sent again\n", st->so->url.hostport, st->so->url.path,
			a->status, a->reason[0] ? " " : "", a->reason, msg[0] ? ": " : "", msg,
			what_of(r, what, sizeof(what)));
	}
}

/* Sends r until the endpoint answers it for good. Returns 0, or
 * -ECANCELED when the stream stops first. */
static int send_one(struct otlp_stream *st, const struct qreq *r)
{
	const struct stream_opts *so = st->so;
	struct http_req req = { .ctype = so->oo.protobuf ? "application/x-protobuf"
							  : "application/json",
				.cenc = so->gzip ? "gzip" : NULL, .body = r->body.p,
				.len = r->body.len };
	static uint64_t said_fail, said_answer[2];
	unsigned delay = BACKOFF_MIN_MS;
	struct http_answer *a = malloc(sizeof(*a));
	char why[512], what[32];
	int ret;

	if (!a)
		return -ENOMEM;
	for (bool failing = false;; failing = true) {
		if (stream_stopping()) {
			free(a);
			return -ECANCELED;
		}
		ret = http_conn_post(&st->s.conn, &req, a, why, sizeof(why));
		/* any failure to reach it is tried again (a name that did not
		 * resolve, a network down, a signal); an answer that is not
		 * HTTP, or a request that cannot be made, is not */
		if (ret < 0 ? ret == -EPROTO || ret == -ENOMEM
			    : !otlp_retryable(0, a->status))
			break;
		stream_count(st, &st->c.retried, 1);
		if (!failing || clock_ns(CLOCK_MONOTONIC) - said_fail >= SAY_EVERY_NS) {
			said_fail = clock_ns(CLOCK_MONOTONIC);
			if (ret < 0)
				fprintf(stderr, "shmtrace stream: %s; trying again\n", why);
			else
				fprintf(stderr, "shmtrace stream: http://%s%s answered HTTP %d%s%s; "
					"trying again\n", so->url.hostport, so->url.path, a->status,
					a->reason[0] ? " " : "", a->reason);
		}
		if (!nap(&st->s, otlp_retry_wait(&delay, BACKOFF_MAX_MS, ret == 0 ? a->retry_after : 0))) {
			free(a);
			return -ECANCELED;
		}
	}
	if (ret < 0) {
		/* not HTTP, or a local error: the request cannot go as it is */
		fprintf(stderr, "shmtrace stream: %s; %s not sent\n", why,
			what_of(r, what, sizeof(what)));
		stream_count(st, &st->c.rejected, r->spans);
	} else {
		answered(st, r, a, said_answer);
	}
	free(a);
	return 0;
}

/* r was answered: its checkpoint kept, the backlog it read removed. */
static int keep(struct otlp_stream *st, struct qreq *r)
{
	struct stream_counts c;
	int ret;

	pthread_mutex_lock(&st->cmu);
	c = st->c;
	pthread_mutex_unlock(&st->cmu);
	/* what the model counted as it cut r, not since */
	c.skipped = r->at_cut.skipped;
	c.sampled_out = r->at_cut.sampled_out;
	ret = ckpt_write(st->ckpt_path, &r->ckpt, &c);
	if (ret < 0)
		return ret;
	for (; st->backlog_removed < r->backlog_done; st->backlog_removed++)
		unlink(st->backlog[st->backlog_removed]);
	/* what the endpoint took, shown as soon as it is kept */
	stream_status(st, true);
	return 0;
}

static void req_free(struct qreq *r)
{
	ob_free(&r->body);
	ob_free(&r->ckpt);
}

static void *sender_main(void *arg)
{
	struct otlp_stream *st = arg;
	struct sender *s = &st->s;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct qreq *r;
		int ret = 0;

		while (!s->n && !s->quit && !stream_stopping())
			pthread_cond_wait(&s->cv, &s->mu);
		if (!s->n || stream_stopping())
			break;
		r = &s->q[s->head];
		pthread_mutex_unlock(&s->mu);
		/* a checkpoint alone has no body */
		if (r->body.len)
			ret = send_one(st, r);
		if (ret == 0 && (ret = keep(st, r)) < 0)
			snprintf(s->err, sizeof(s->err), "writing %.400s: %s", st->ckpt_path,
				 strerror(-ret));
		pthread_mutex_lock(&s->mu);
		if (ret < 0) {
			if (ret != -ECANCELED)
				s->failed = ret;
			break;
		}
		req_free(r);
		s->head = (s->head + 1) % STREAM_QUEUE;
		s->n--;
		pthread_cond_broadcast(&s->cv);
	}
	/* what was not answered is cut again from the checkpoint next time */
	while (s->n) {
		req_free(&s->q[s->head]);
		s->head = (s->head + 1) % STREAM_QUEUE;
		s->n--;
	}
	s->quit = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int sender_start(struct otlp_stream *st)
{
	struct sender *s = &st->s;

	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	http_conn_init(&s->conn, &st->so->url, st->so->timeout_ms, true, st->so->headers);
	if (pthread_create(&s->th, NULL, sender_main, st) != 0)
		return -EAGAIN;
	s->started = true;
	return 0;
}

/* Waits on the queue for a moment (the stream may stop meanwhile). */
static void wait_queue(struct sender *s)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += WAKE_MS * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&s->cv, &s->mu, &ts);
}

int sender_push(struct otlp_stream *st, struct qreq *r)
{
	struct sender *s = &st->s;
	int ret = 0;

	pthread_mutex_lock(&s->mu);
	while (s->n == STREAM_QUEUE && !s->quit && !stream_stopping())
		wait_queue(s);
	if (s->quit || stream_stopping()) {
		ret = s->failed ? s->failed : -ECANCELED;
		req_free(r);
	} else {
		s->q[(s->head + s->n) % STREAM_QUEUE] = *r;
		s->n++;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	memset(r, 0, sizeof(*r));
	return ret;
}

void sender_finish(struct otlp_stream *st)
{
	struct sender *s = &st->s;

	if (!s->started)
		return;
	pthread_mutex_lock(&s->mu);
	while (s->n && !s->quit && !stream_stopping())
		wait_queue(s);
	s->quit = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->th, NULL);
	http_conn_close(&s->conn);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	s->started = false;
}
