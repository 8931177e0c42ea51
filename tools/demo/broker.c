/* SPDX-License-Identifier: MIT */
/*
 * broker.c - the broker process's event loop: accepts client connections,
 * queues their requests, hands them to its workers (broker_pool.c starts and
 * reaps those) and routes the replies back.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker.h"

void broker_counters(struct broker *b)
{
	const struct demo_ids *id = &demo_ids;

	shmtrace_counter(demo_t, id->cat, id->queue_depth, b->qlen);
	shmtrace_counter(demo_t, id->cat, id->in_flight, b->inflight);
}

void broker_enqueue(struct broker *b, uint32_t s, int front)
{
	if (front) {
		b->qhead = (b->qhead + DEMO_MAX_SLOTS - 1) % DEMO_MAX_SLOTS;
		b->queue[b->qhead] = s;
	} else {
		b->queue[(b->qhead + b->qlen) % DEMO_MAX_SLOTS] = s;
	}
	b->qlen++;
	b->slots[s].worker = -1;
}

static int alloc_slot(struct broker *b)
{
	for (int s = 0; s < DEMO_MAX_SLOTS; s++)
		if (!b->slots[s].used)
			return s;
	return -1;
}

/* Sends m back to the client connection it came from, if still there. */
static void close_conn(struct broker *b, int c)
{
	close(b->conns[c].fd);
	b->conns[c].fd = -1;
	b->conns[c].gen++;
	b->nconns--;
}

static void to_client(struct broker *b, int c, uint32_t gen, const struct demo_msg *m)
{
	if (c < 0 || b->conns[c].fd < 0 || b->conns[c].gen != gen)
		return;	/* the client left: nobody to tell */
	if (demo_send_msg(b->conns[c].fd, m) < 0)
		close_conn(b, c);
}

void broker_fail_request(struct broker *b, int c, uint32_t gen, struct demo_msg *m)
{
	shmtrace_instant(demo_t, demo_ids.cat, demo_ids.error, m->flow);
	m->type = DEMO_REPLY;
	m->status = DEMO_FAILED;
	to_client(b, c, gen, m);
}

/* A request from a client: the broker's first hop, "route". */
static void route(struct broker *b, int c, struct demo_msg *m)
{
	const struct demo_ids *id = &demo_ids;
	uint64_t t0 = shmtrace_now(), t1 = shmtrace_now();
	int s;

	/* "parse" starts at its own clock reading, after "route": a flow
	 * event binds to the slice that starts at its exact ts */
	if (m->type != DEMO_REQ) {
		fprintf(stderr, "%s: broker: unexpected message type %u from a client\n",
			DEMO_NAME, m->type);
		return;
	}
	s = alloc_slot(b);
	shmtrace_span(demo_t, id->cat, id->parse, t1, shmtrace_now(), 0);
	t1 = shmtrace_now();
	if (s < 0 || !b->alive) {
		broker_fail_request(b, c, b->conns[c].gen, m);
	} else {
		b->slots[s].used = 1;
		b->slots[s].conn = c;
		b->slots[s].conn_gen = b->conns[c].gen;
		b->slots[s].m = *m;
		b->slots[s].m.tag = (uint32_t)s;
		broker_enqueue(b, (uint32_t)s, 0);
		broker_counters(b);
		shmtrace_span(demo_t, id->cat, id->queue, t1, shmtrace_now(), 0);
	}
	shmtrace_span(demo_t, id->cat, id->route, t0, shmtrace_now(), m->flow);
}

/* The least loaded live worker with room, round-robin among equals. */
static int pick_worker(struct broker *b)
{
	int best = -1;

	for (uint32_t k = 0; k < b->nworkers; k++) {
		uint32_t w = (b->rr + k) % b->nworkers;

		if (b->workers[w].fd < 0 || b->workers[w].inflight >= DEMO_WORKER_DEPTH)
			continue;
		if (best < 0 || b->workers[w].inflight < b->workers[best].inflight)
			best = (int)w;
	}
	if (best >= 0)
		b->rr = (uint32_t)best + 1;
	return best;
}

/* Hands queued requests to workers with room: each is its own hop. */
static void dispatch(struct broker *b)
{
	const struct demo_ids *id = &demo_ids;

	while (b->qlen) {
		uint64_t t0 = shmtrace_now();
		int w = pick_worker(b);
		uint32_t s;

		if (w < 0)
			return;
		s = b->queue[b->qhead];
		b->qhead = (b->qhead + 1) % DEMO_MAX_SLOTS;
		b->qlen--;
		if (demo_send_msg(b->workers[w].fd, &b->slots[s].m) < 0) {
			/* it died before we noticed: back in front, re-route */
			broker_enqueue(b, s, 1);
			broker_worker_died(b, (uint32_t)w);
			continue;
		}
		b->slots[s].worker = w;
		b->workers[w].inflight++;
		b->inflight++;
		broker_counters(b);
		shmtrace_span(demo_t, id->cat, id->dispatch, t0, shmtrace_now(),
			      b->slots[s].m.flow);
	}
}

/* A reply from worker w: the broker's hop back, "forward". */
static void forward(struct broker *b, uint32_t w, struct demo_msg *m)
{
	const struct demo_ids *id = &demo_ids;
	uint64_t t0 = shmtrace_now();
	struct slot *s;

	if (m->type != DEMO_REPLY || m->tag >= DEMO_MAX_SLOTS || !b->slots[m->tag].used ||
	    b->slots[m->tag].worker != (int)w || b->slots[m->tag].m.flow != m->flow) {
		fprintf(stderr, "%s: broker: stray reply from worker-%u ignored\n", DEMO_NAME, w + 1);
		return;
	}
	s = &b->slots[m->tag];
	s->used = 0;
	b->workers[w].inflight--;
	b->inflight--;
	broker_counters(b);
	to_client(b, s->conn, s->conn_gen, m);
	shmtrace_span(demo_t, id->cat, id->forward, t0, shmtrace_now(), m->flow);
}

static void accept_conn(struct broker *b)
{
	int fd = accept4(b->lfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;	/* the client gave up in between: nothing to do */
	for (int c = 0; c < DEMO_MAX_CONNS; c++) {
		if (b->conns[c].fd < 0) {
			b->conns[c].fd = fd;
			b->nconns++;
			b->had_client = 1;
			return;
		}
	}
	fprintf(stderr, "%s: broker: more than %d clients, connection refused\n",
		DEMO_NAME, DEMO_MAX_CONNS);
	close(fd);
}

/* One pass: wait for events (bounded), then handle each ready socket.
 * Returns the number of events, or -1 on a poll error. */
static int poll_once(struct broker *b)
{
	struct pollfd p[1 + DEMO_MAX_CONNS + DEMO_MAX_WORKERS];
	int who[1 + DEMO_MAX_CONNS + DEMO_MAX_WORKERS];	/* >=0 conn, <0 -(worker+1) */
	struct demo_msg m;
	nfds_t n = 0;
	int ret;

	p[n] = (struct pollfd){ .fd = b->lfd, .events = POLLIN };
	who[n++] = 0;
	for (int c = 0; c < DEMO_MAX_CONNS; c++) {
		if (b->conns[c].fd >= 0) {
			p[n] = (struct pollfd){ .fd = b->conns[c].fd, .events = POLLIN };
			who[n++] = c;
		}
	}
	for (uint32_t w = 0; w < b->nworkers; w++) {
		if (b->workers[w].fd >= 0) {
			p[n] = (struct pollfd){ .fd = b->workers[w].fd, .events = POLLIN };
			who[n++] = -(int)w - 1;
		}
	}
	ret = poll(p, n, 1000);
	if (ret <= 0)
		return ret < 0 && errno != EINTR ? -1 : 0;
	if (p[0].revents & POLLIN)
		accept_conn(b);
	for (nfds_t i = 1; i < n; i++) {
		if (!p[i].revents)
			continue;
		if (who[i] >= 0) {
			int c = who[i];

			if (b->conns[c].fd < 0)
				continue;	/* closed earlier in this pass */
			ret = demo_recv_msg(b->conns[c].fd, &m, 0);
			if (ret == 0)
				route(b, c, &m);
			else if (ret != -ETIMEDOUT)
				close_conn(b, c);	/* gone, or not speaking our protocol */
		} else {
			uint32_t w = (uint32_t)(-who[i] - 1);

			if (b->workers[w].fd < 0)
				continue;
			ret = demo_recv_msg(b->workers[w].fd, &m, 0);
			if (ret == 0)
				forward(b, w, &m);
			else if (ret != -ETIMEDOUT)
				broker_worker_died(b, w);
		}
	}
	dispatch(b);
	return 1;
}

int demo_broker_main(const struct demo_config *cfg, int ready_fd)
{
	static struct broker b;		/* large: not on the stack */
	uint64_t last = shmtrace_now();
	int ret = 0;

	b.cfg = cfg;
	b.nworkers = cfg->workers;
	for (int c = 0; c < DEMO_MAX_CONNS; c++)
		b.conns[c].fd = -1;
	demo_name_process("broker", "event-loop");
	b.lfd = demo_socket(cfg->sock_path, 1);
	if (b.lfd < 0) {
		fprintf(stderr, "%s: broker: listen on %s: %s\n", DEMO_NAME, cfg->sock_path,
			strerror(-b.lfd));
		return 1;
	}
	if (broker_start_workers(&b) < 0) {
		broker_stop_workers(&b);
		return 1;
	}
	broker_counters(&b);
	/* the client connects only after this byte: no sleeping, no retries */
	if (write(ready_fd, "r", 1) != 1) {
		broker_stop_workers(&b);
		return 1;
	}
	close(ready_fd);

	/* until every client connection has come and gone */
	while (!b.had_client || b.nconns) {
		int n = poll_once(&b);

		if (n < 0) {
			fprintf(stderr, "%s: broker: poll: %s\n", DEMO_NAME, strerror(errno));
			ret = 1;
			break;
		}
		if (n > 0) {
			last = shmtrace_now();
		} else if (demo_ms_since(last) >= DEMO_IDLE_TIMEOUT_MS) {
			fprintf(stderr, "%s: broker: no traffic for %d s, giving up\n", DEMO_NAME,
				DEMO_IDLE_TIMEOUT_MS / 1000);
			ret = 1;
			break;
		}
	}
	broker_stop_workers(&b);
	close(b.lfd);
	shmtrace_close(demo_t);
	return ret || b.unexpected;
}
