/* SPDX-License-Identifier: MIT */
/*
 * worker.c - a worker process: its main thread receives requests from the
 * broker, a compute thread does the work and replies.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"

#define QUEUE_LEN	8	/* more than DEMO_WORKER_DEPTH: never full in practice */

struct worker {
	const struct demo_config *cfg;
	uint32_t index;
	int fd;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct demo_msg queue[QUEUE_LEN];
	uint32_t head, tail;	/* tail == head: empty */
	int stop;		/* receiver saw EOF: drain and exit */
	int failed;		/* compute thread could not reply */
};

static void push(struct worker *w, const struct demo_msg *m)
{
	pthread_mutex_lock(&w->lock);
	while (w->tail - w->head == QUEUE_LEN && !w->failed)
		pthread_cond_wait(&w->cond, &w->lock);
	if (!w->failed) {
		w->queue[w->tail % QUEUE_LEN] = *m;
		w->tail++;
	}
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Returns 1 with the next request in m, 0 once stopped and drained. */
static int pop(struct worker *w, struct demo_msg *m)
{
	int ret = 0;

	pthread_mutex_lock(&w->lock);
	while (w->tail == w->head && !w->stop)
		pthread_cond_wait(&w->cond, &w->lock);
	if (w->tail != w->head) {
		*m = w->queue[w->head % QUEUE_LEN];
		w->head++;
		ret = 1;
	}
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return ret;
}

/* One request on the compute thread. "work" is the hop's outer span and
 * carries the flow id; the spans inside it do not. "work" and "compute"
 * are open spans (shmtrace_begin): a worker killed inside them shows them
 * unfinished in a post-mortem trace. "work" carries the request's id, its
 * bytes and its status as arguments. */
static int serve(struct worker *w, struct demo_msg *m, uint32_t *done)
{
	const struct demo_ids *id = &demo_ids;
	struct shmtrace_open_span work, compute;
	uint64_t t1, t2;
	int ret;

	shmtrace_begin(demo_t, &work, id->cat, id->work, m->flow);
	shmtrace_span_arg(&work, shmtrace_arg_int(id->k_request, m->id));
	shmtrace_span_arg(&work, shmtrace_arg_int(id->k_bytes, m->len));
	m->type = DEMO_REPLY;
	m->worker = w->index;
	if (demo_is_busy(m)) {
		struct shmtrace_arg a = shmtrace_arg_int(id->k_request, m->id);

		shmtrace_instant_args(demo_t, id->cat, id->busy, m->flow, &a, 1);
		m->status = DEMO_BUSY;
	} else {
		shmtrace_begin(demo_t, &compute, id->cat, id->compute, 0);
		shmtrace_span_arg(&compute, shmtrace_arg_int(id->k_limit, m->limit));
		t2 = shmtrace_now();
		m->primes = demo_count_primes(m->limit);
		shmtrace_span(demo_t, id->cat, id->primes, t2, shmtrace_now(), 0);
		if (w->index == w->cfg->crash_worker && ++*done == DEMO_CRASH_AT) {
			/* the "primes" span above is already in the ring: it
			 * survives this; "compute" and "work" are open, and
			 * show as unfinished */
			fprintf(stderr, "%s: worker-%u: crashing on request %u as asked (--crash-worker)\n",
				DEMO_NAME, w->index, m->id);
			raise(SIGKILL);
		}
		t2 = shmtrace_now();
		m->crc = demo_crc32(m->data, m->len);
		shmtrace_span(demo_t, id->cat, id->checksum, t2, shmtrace_now(), 0);
		shmtrace_end(&compute);
		m->status = DEMO_OK;
	}
	shmtrace_span_arg(&work, shmtrace_arg_str(id->k_status,
						  m->status == DEMO_OK ? id->v_ok : id->v_busy));
	t1 = shmtrace_now();
	ret = demo_send_msg(w->fd, m);
	shmtrace_span(demo_t, id->cat, id->reply, t1, shmtrace_now(), 0);
	shmtrace_end(&work);
	return ret;
}

static void *compute_thread(void *arg)
{
	struct worker *w = arg;
	struct demo_msg m;
	uint32_t done = 0;

	demo_name_thread("compute");
	while (pop(w, &m)) {
		int ret = serve(w, &m, &done);

		if (ret < 0) {
			/* the broker is gone: the receiver sees EOF too */
			if (ret != -ECONNRESET)
				fprintf(stderr, "%s: worker-%u: reply: %s\n", DEMO_NAME, w->index,
					strerror(-ret));
			pthread_mutex_lock(&w->lock);
			w->failed = 1;
			pthread_cond_broadcast(&w->cond);
			pthread_mutex_unlock(&w->lock);
			break;
		}
	}
	shmtrace_flush(demo_t);
	return NULL;
}

/* Reads requests until the broker closes its end. The receive span is
 * the hop's outer span; the blocking wait before it is not traced. */
static int receive_loop(struct worker *w)
{
	const struct demo_ids *id = &demo_ids;
	struct demo_msg m;

	for (;;) {
		uint64_t t0, t1;
		int ret = demo_recv_msg(w->fd, &m, DEMO_IDLE_TIMEOUT_MS);

		if (ret == -ECONNRESET)
			return 0;
		if (ret < 0) {
			fprintf(stderr, "%s: worker-%u: receive: %s\n", DEMO_NAME, w->index,
				strerror(-ret));
			return 1;
		}
		/* each span starts at its own reading of the clock: the flow
		 * event binds to the slice that starts at its exact ts */
		t0 = shmtrace_now();
		t1 = shmtrace_now();
		if (m.type != DEMO_REQ || m.limit > DEMO_PRIME_MIN + DEMO_PRIME_SPAN) {
			fprintf(stderr, "%s: worker-%u: bad request %u\n", DEMO_NAME, w->index, m.id);
			return 1;
		}
		shmtrace_span(demo_t, id->cat, id->decode, t1, shmtrace_now(), 0);
		push(w, &m);
		shmtrace_span(demo_t, id->cat, id->receive, t0, shmtrace_now(), m.flow);
		if (__atomic_load_n(&w->failed, __ATOMIC_RELAXED))
			return 1;
	}
}

int demo_worker_main(const struct demo_config *cfg, uint32_t index, int fd)
{
	struct worker w = { .cfg = cfg, .index = index, .fd = fd };
	char name[32];
	pthread_t th;
	int ret;

	snprintf(name, sizeof(name), "worker-%u", index);
	demo_name_process(name, "receiver");
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	ret = pthread_create(&th, NULL, compute_thread, &w);
	if (ret) {
		fprintf(stderr, "%s: %s: thread: %s\n", DEMO_NAME, name, strerror(ret));
		return 1;
	}
	ret = receive_loop(&w);
	pthread_mutex_lock(&w.lock);
	w.stop = 1;
	pthread_cond_broadcast(&w.cond);
	pthread_mutex_unlock(&w.lock);
	pthread_join(th, NULL);
	close(fd);
	shmtrace_close(demo_t);
	return ret || w.failed;
}
