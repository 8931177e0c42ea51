/* SPDX-License-Identifier: MIT */
/*
 * otlp_send.c - the OTLP export's batches: spans gathered per process
 * until a batch is nearly o->batch_bytes, then one ExportTraceServiceRequest,
 * written to the file (one line; otlp_write.c) or POSTed (and written
 * to the file if there is one), retried with back-off on 429/502/503/504
 * and on refused or broken connections.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "otlp_int.h"
#include "pb.h"
#include "term.h"

#define BACKOFF_MIN_MS	100u
#define BACKOFF_MAX_MS	5000u
/* pieces of a request handed to one writev() */
#define IOV_CHUNK	64

static struct pbatch *batch_of(struct otlp *o, uint32_t outpid)
{
	bool added;
	struct pbatch *pb = keyed_get(&o->batch, outpid, &added);

	if (pb && added)
		pb->outpid = outpid;
	return pb;
}

int otlp_encode_span(struct otlp *o, const struct span *sp)
{
	struct pbatch *pb = batch_of(o, sp->outpid);
	size_t before;
	int ret;

	if (!pb)
		return -ENOMEM;
	if (!pb->spans.cap)
		otlp_writer_spare(o, &pb->spans);
	before = pb->spans.len;
	ret = o->o->protobuf ? otlp_pb_span(o, pb, sp) : otlp_put_span(o, pb, sp);
	if (ret < 0)
		return ret;
	o->spans++;
	o->events += sp->nev;
	o->batch_spans++;
	o->batch_len += pb->spans.len - before;
	return 0;
}

bool otlp_batch_full(const struct otlp *o, size_t bytes)
{
	/* room for each process's resource and scope, a few hundred bytes */
	return o->batch_len + 1024ull * o->batch_procs >= bytes - bytes / 16;
}

int otlp_span(struct otlp *o, const struct span *sp)
{
	int ret;

	if (o->st)
		return stream_span(o, sp);
	if (o->send_failed) {
		/* not sent: counted, so that the error says how many */
		o->spans++;
		return 0;
	}
	ret = otlp_encode_span(o, sp);
	if (ret == 0 && otlp_batch_full(o, o->o->batch_bytes))
		return otlp_deliver(o);
	return ret;
}

/* ---------------------------------------------------------------- http */

/* The partial success of a JSON answer:
 * {"partialSuccess":{"rejectedSpans":"N","errorMessage":"..."}}. */
static uint64_t partial_json(const char *body, char *msg, size_t msglen)
{
	const char *p = strstr(body, "\"rejectedSpans\""), *m = strstr(body, "\"errorMessage\"");

	if (m) {
		m += strlen("\"errorMessage\"");
		m += strspn(m, " \t:");
		if (*m == '"')
			term_escape(m + 1, strcspn(m + 1, "\""), msg, msglen);
	}
	if (!p)
		return 0;
	p += strlen("\"rejectedSpans\"");
	p += strspn(p, " \t:\"");
	return strtoull(p, NULL, 10);
}

/* The partial success of a protobuf answer: ExportTraceServiceResponse
 * {partial_success 1: {rejected_spans 1, error_message 2}}. Of an answer
 * longer than what was kept (cut: an error_message of kilobytes), the
 * partial success is read as far as it was kept: rejected_spans comes
 * first, and a message cut short is left out. */
static uint64_t partial_pb(const char *body, size_t len, bool cut, char *msg, size_t msglen)
{
	const char *data, *p = body, *q;
	size_t n = len, dlen, qn;
	uint64_t v, rejected = 0;
	uint32_t field;
	unsigned wire;
	int ret;

	for (;;) {
		const char *at = p;
		size_t left = n;
		uint64_t key;

		ret = pb_next(&p, &n, &field, &wire, &v, &data, &dlen);
		if (!ret)
			break;
		if (ret < 0) {
			/* partial_success's length past the end of what was kept:
			 * read as far as it goes */
			p = at;
			n = left;
			if (!cut || pb_get_varint(&p, &n, &key) < 0 || key != (1u << 3 | PB_LEN) ||
			    pb_get_varint(&p, &n, &v) < 0 || v <= n)
				break;
			field = 1;
			wire = PB_LEN;
			data = p;
			dlen = n;
			n = 0;
		}
		if (field != 1 || wire != PB_LEN)
			continue;
		q = data;
		qn = dlen;
		while (pb_next(&q, &qn, &field, &wire, &v, &data, &dlen) == 1) {
			if (field == 1 && wire == PB_VARINT)
				rejected = v;
			else if (field == 2 && wire == PB_LEN)
				term_escape(data, dlen, msg, msglen);
		}
	}
	return rejected;
}

uint64_t otlp_partial_success(const struct http_answer *a, char *msg, size_t msglen)
{
	msg[0] = 0;
	if (strstr(a->ctype, "protobuf"))
		return partial_pb(a->body, a->body_len, a->body_len == HTTP_BODY_KEEP, msg, msglen);
	return partial_json(a->body, msg, msglen);
}

const char *otlp_answer_line(const struct http_answer *a, char *buf, size_t len)
{
	term_escape(a->body, strcspn(a->body, "\r\n"), buf, len);
	return buf;
}

bool otlp_retryable(int ret, int status)
{
	if (ret < 0)
		return ret == -ECONNREFUSED || ret == -ECONNRESET || ret == -ETIMEDOUT ||
		       ret == -EPIPE;
	return status == 429 || status == 502 || status == 503 || status == 504;
}

/* A random number for the jitter (xorshift64*, seeded per thread). */
static uint64_t jitter_rand(void)
{
	static __thread uint64_t x;

	if (!x)
		x = (clock_ns(CLOCK_MONOTONIC) ^ (uint64_t)getpid() << 32) | 1;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	return x * 0x2545f4914f6cdd1dull;
}

unsigned otlp_retry_wait(unsigned *delay, unsigned max_ms, unsigned retry_after_s)
{
	unsigned wait = *delay / 2 + (unsigned)(jitter_rand() % (*delay / 2 + 1));

	if (retry_after_s)
		wait = retry_after_s > OTLP_RETRY_AFTER_MAX_S ? OTLP_RETRY_AFTER_MAX_S * 1000u
							       : retry_after_s * 1000u;
	*delay = *delay * 2 > max_ms ? max_ms : *delay * 2;
	return wait;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* POSTs body[0..len), retrying with back-off within the budget. */
static int post(struct otlp *o, const char *body, size_t len)
{
	unsigned delay = BACKOFF_MIN_MS;
	struct http_answer a;
	char why[512], gave_up[48], line[201];	/* escaped: at most 200 bytes, no escape cut */
	unsigned attempt;
	int ret = 0;

	for (attempt = 1;; attempt++) {
		ret = http_post(&o->url, body, len, o->timeout_ms, &a, why, sizeof(why));
		if (ret == 0 && a.status >= 200 && a.status < 300) {
			/* the endpoint's count, at most what the request held */
			uint64_t rej = otlp_partial_success(&a, why, sizeof(why));

			o->rejected += rej > o->batch_spans ? o->batch_spans : rej;
			return 0;
		}
		if (!otlp_retryable(ret, a.status) || attempt >= o->o->retries)
			break;
		o->retries_used++;
		sleep_ms(otlp_retry_wait(&delay, BACKOFF_MAX_MS, ret == 0 ? a.retry_after : 0));
	}
	snprintf(gave_up, sizeof(gave_up), " (gave up after %u attempt%s)", attempt,
		 attempt == 1 ? "" : "s");
	/* the endpoint and why; report() adds what was sent and what was not */
	if (ret < 0) {
		snprintf(o->err, sizeof(o->err), "OTLP endpoint http://%.200s%.200s: %.280s%s",
			 o->url.hostport, o->url.path, why, otlp_retryable(ret, 0) ? gave_up : "");
		return ret;
	}
	/* the first line of the body says why, for most collectors */
	otlp_answer_line(&a, line, sizeof(line));
	snprintf(o->err, sizeof(o->err), "OTLP endpoint http://%.200s%.200s: HTTP %d%s%s%s%s%s",
		 o->url.hostport, o->url.path, a.status, a.reason[0] ? " " : "", a.reason,
		 line[0] ? ": " : "", line, otlp_retryable(0, a.status) ? gave_up : "");
	return -EPROTO;
}

/* ------------------------------------------------------------- requests */

static void sink_put(struct sink *k, const char *p, size_t len)
{
	if (k->body) {
		if (ob_reserve(k->body, len)) {
			memcpy(k->body->p + k->body->len, p, len);
			k->body->len += len;
		}
		return;
	}
	if (array_reserve(&k->iov, &k->cap, k->n + 1, sizeof(*k->iov), 16) < 0) {
		k->oom = true;
		return;
	}
	k->iov[k->n++] = (struct iovec){ .iov_base = (void *)p, .iov_len = len };
}

void otlp_put_request(struct otlp *o, struct obuf *pre, struct sink *k)
{
	bool first = true;

	pre->len = 0;
	for (size_t i = 0; i < o->batch.n; i++) {
		struct pbatch *pb = keyed_at(&o->batch, i);

		if (!pb->nspans)
			continue;
		pb->pre_off = pre->len;
		otlp_put_resource(o, pre, pb->outpid);
		pb->pre_len = pre->len - pb->pre_off;
	}
	if (pre->oom) {
		k->oom = true;
		return;
	}
	sink_put(k, "{\"resourceSpans\":[", 18);
	for (size_t i = 0; i < o->batch.n; i++) {
		struct pbatch *pb = keyed_at(&o->batch, i);

		if (!pb->nspans)
			continue;
		if (!first)
			sink_put(k, ",", 1);
		first = false;
		sink_put(k, pre->p + pb->pre_off, pb->pre_len);
		sink_put(k, pb->spans.p, pb->spans.len);
		sink_put(k, "]}]}", 4);
	}
	sink_put(k, "]}\n", 3);
	if (k->body && k->body->oom)
		k->oom = true;
}

int otlp_write_all(int fd, struct iovec *v, size_t n)
{
	while (n) {
		ssize_t w = writev(fd, v, n < IOV_CHUNK ? (int)n : IOV_CHUNK);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		/* a short write: on from where it stopped */
		while (n && (size_t)w >= v->iov_len) {
			w -= (ssize_t)v->iov_len;
			v++;
			n--;
		}
		if (n) {
			v->iov_base = (char *)v->iov_base + w;
			v->iov_len -= (size_t)w;
		}
	}
	return 0;
}

void otlp_batch_reset(struct otlp *o)
{
	for (size_t i = 0; i < o->batch.n; i++) {
		struct pbatch *pb = keyed_at(&o->batch, i);
		size_t used = pb->spans.len;

		pb->spans.len = 0;
		pb->nspans = 0;
		if (pb->spans.cap > OTLP_KEEP_BYTES && pb->spans.cap > 2 * used)
			ob_free(&pb->spans);
	}
	o->batch_spans = 0;
	o->batch_len = 0;
	o->batch_procs = 0;
}

/* The batch as one request in o->body, to the file if any and POSTed. */
/* The request in o->body (a line) to the file beside (-o) and the
 * endpoint; spans: how many it holds. */
static int send_body(struct otlp *o, uint64_t spans)
{
	struct iovec v;
	int ret;

	v = (struct iovec){ .iov_base = o->body.p, .iov_len = o->body.len };
	ret = o->fd >= 0 ? otlp_write_all(o->fd, &v, 1) : 0;
	if (ret) {
		snprintf(o->err, sizeof(o->err), "writing the output: %s", strerror(ret));
		return -EIO;
	}
	/* without the line's end */
	ret = post(o, o->body.p, o->body.len - 1);
	if (ret < 0)
		return ret;
	o->requests_sent++;
	o->spans_sent += spans;
	return 0;
}

static int deliver_http(struct otlp *o)
{
	struct sink k = { .body = &o->body };

	o->body.len = 0;
	otlp_put_request(o, &o->req, &k);
	if (k.oom)
		return -ENOMEM;
	return send_body(o, o->batch_spans);
}

/* A request that failed to reach the endpoint: the rest is counted, not
 * sent (otlp_span()); otlp_run() fails */
static int sent(struct otlp *o, int ret)
{
	if (ret < 0 && o->to_http) {
		o->send_failed = ret;
		ret = 0;
	}
	return ret;
}

int otlp_deliver(struct otlp *o)
{
	int ret;

	if (!o->batch_spans)
		return 0;
	o->requests++;
	ret = sent(o, o->to_http ? deliver_http(o) : otlp_write_batch(o));
	if (ret < 0)
		return ret;
	otlp_batch_reset(o);
	return 0;
}

int otlp_deliver_losses(struct otlp *o)
{
	o->body.len = 0;
	otlp_put_loss_request(o, &o->body);
	if (o->body.oom)
		return -ENOMEM;
	o->requests++;
	return sent(o, send_body(o, 0));
}

void otlp_batches_free(struct otlp *o)
{
	for (size_t i = 0; i < o->batch.n; i++)
		ob_free(&((struct pbatch *)keyed_at(&o->batch, i))->spans);
	keyed_free(&o->batch);
	ob_free(&o->req);
	ob_free(&o->body);
}
