/* SPDX-License-Identifier: MIT */
/*
 * otlp_write.c - the OTLP export's requests to a file, written by a thread
 * of their own: the kernel's copy of the text into the page cache takes as
 * long as making it, so the two overlap. Two requests at most are on their
 * way (one being written, one waiting) while the next batch is made; the
 * span buffers travel with their request and come back as spares. Without
 * a thread (pthread_create failed) the same requests are written inline.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_int.h"

/* spare span buffers kept for the processes of the next batches */
#define SPARES	16u

/* A request: the resources and scopes made for it, the pieces to write,
 * and the span buffers they point into. */
struct wreq {
	struct obuf pre;
	struct sink k;
	struct obuf *bufs;
	size_t nbufs, bufcap;
	bool busy;			/* handed over, not written yet */
};

struct otlp_writer {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* a request handed over or written */
	bool threaded, stop;
	struct wreq req[2];
	unsigned next;			/* the one the next batch goes in */
	struct wreq *todo;		/* handed over, not taken yet */
	int fd;
	int err;			/* the first write's errno, 0 while fine */
	struct obuf spare[SPARES];
	unsigned nspare;
};

static void *writer_main(void *arg)
{
	struct otlp_writer *w = arg;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		struct wreq *r;
		int err;

		while (!w->todo && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->todo)
			break;
		r = w->todo;
		w->todo = NULL;
		err = w->err;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		/* after a failure nothing more: the output is removed anyway */
		if (!err)
			err = otlp_write_all(w->fd, r->k.iov, r->k.n);
		pthread_mutex_lock(&w->mu);
		if (err && !w->err)
			w->err = err;
		r->busy = false;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int otlp_writer_start(struct otlp *o)
{
	struct otlp_writer *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->fd = o->fd;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->threaded = pthread_create(&w->th, NULL, writer_main, w) == 0;
	o->w = w;
	return 0;
}

/* The span buffers of a written request, back as spares (or freed). */
static void recycle(struct otlp_writer *w, struct wreq *r)
{
	for (size_t i = 0; i < r->nbufs; i++) {
		struct obuf *b = &r->bufs[i];

		if (w->nspare == SPARES || (b->cap > OTLP_KEEP_BYTES && b->cap > 2 * b->len)) {
			ob_free(b);
			continue;
		}
		b->len = 0;
		w->spare[w->nspare++] = *b;
	}
	r->nbufs = 0;
}

void otlp_writer_spare(struct otlp *o, struct obuf *b)
{
	struct otlp_writer *w = o->w;

	if (w && w->nspare)
		*b = w->spare[--w->nspare];
}

static int failed(struct otlp *o, int err)
{
	if (err == ENOMEM)
		return -ENOMEM;
	snprintf(o->err, sizeof(o->err), "writing the output: %s", strerror(err));
	return -EIO;
}

/* The batch's span buffers into r, the processes left without one. */
static int take_buffers(struct otlp *o, struct wreq *r)
{
	for (size_t i = 0; i < o->batch.n; i++) {
		struct pbatch *pb = keyed_at(&o->batch, i);

		if (!pb->nspans)
			continue;
		if (array_reserve(&r->bufs, &r->bufcap, r->nbufs + 1, sizeof(*r->bufs), 16) < 0)
			return -ENOMEM;
		r->bufs[r->nbufs++] = pb->spans;
		memset(&pb->spans, 0, sizeof(pb->spans));
	}
	return 0;
}

int otlp_write_batch(struct otlp *o)
{
	struct otlp_writer *w = o->w;
	struct wreq *r = &w->req[w->next];
	int err;

	pthread_mutex_lock(&w->mu);
	while (r->busy)
		pthread_cond_wait(&w->cv, &w->mu);
	err = w->err;
	pthread_mutex_unlock(&w->mu);
	if (err)
		return failed(o, err);
	recycle(w, r);
	r->k.n = 0;
	otlp_put_request(o, &r->pre, &r->k);
	if (r->k.oom || take_buffers(o, r) < 0)
		return -ENOMEM;
	if (!w->threaded) {
		err = otlp_write_all(w->fd, r->k.iov, r->k.n);
		return err ? failed(o, err) : 0;
	}
	pthread_mutex_lock(&w->mu);
	while (w->todo)
		pthread_cond_wait(&w->cv, &w->mu);
	w->todo = r;
	r->busy = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	w->next ^= 1;
	return 0;
}

int otlp_write_losses(struct otlp *o)
{
	struct otlp_writer *w = o->w;
	struct wreq *r = &w->req[w->next];
	struct iovec v;
	int err;

	/* called before any batch: no request is on its way */
	r->pre.len = 0;
	otlp_put_loss_request(o, &r->pre);
	if (r->pre.oom)
		return -ENOMEM;
	v = (struct iovec){ .iov_base = r->pre.p, .iov_len = r->pre.len };
	err = otlp_write_all(w->fd, &v, 1);
	if (err)
		return failed(o, err);
	o->requests++;
	return 0;
}

int otlp_writer_finish(struct otlp *o)
{
	struct otlp_writer *w = o->w;
	int err;

	if (!w)
		return 0;
	if (w->threaded) {
		pthread_mutex_lock(&w->mu);
		w->stop = true;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		/* it writes what it was handed before it stops */
		pthread_join(w->th, NULL);
	}
	err = w->err;
	for (unsigned i = 0; i < 2; i++) {
		recycle(w, &w->req[i]);
		free(w->req[i].bufs);
		free(w->req[i].k.iov);
		ob_free(&w->req[i].pre);
	}
	for (unsigned i = 0; i < w->nspare; i++)
		ob_free(&w->spare[i]);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
	o->w = NULL;
	return err ? failed(o, err) : 0;
}
