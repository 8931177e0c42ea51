/* SPDX-License-Identifier: MIT */
/*
 * broker.c - the broker process: accepts client connections, queues their
 * requests, hands them to a pool of worker processes it forks, routes the
 * replies back, and re-routes the requests of a worker that dies.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "demo.h"

struct conn {
	int fd;			/* -1: free */
	uint32_t gen;		/* bumped on close: late replies are dropped */
};

struct wrk {
	int fd;			/* broker's end of the socketpair, -1 once dead */
	pid_t pid;
	uint32_t inflight;
};

struct slot {
	int used;
	int worker;		/* index into workers, -1 while queued */
	int conn;
	uint32_t conn_gen;
	struct demo_msg m;
};

struct broker {
	const struct demo_config *cfg;
	int lfd;
	struct conn conns[DEMO_MAX_CONNS];
	uint32_t nconns;
	int had_client;
	struct wrk workers[DEMO_MAX_WORKERS];
	uint32_t nworkers, alive, rr;
	struct slot slots[DEMO_MAX_SLOTS];
	uint32_t queue[DEMO_MAX_SLOTS];	/* FIFO of slot numbers */
	uint32_t qhead, qlen;
	uint32_t inflight;
	int unexpected;			/* a worker died that was not asked to */
};

static void counters(struct broker *b)
{
	const struct demo_ids *id = &demo_ids;

	shmtrace_counter(demo_t, id->cat, id->queue_depth, b->qlen);
	shmtrace_counter(demo_t, id->cat, id->in_flight, b->inflight);
}

static void enqueue(struct broker *b, uint32_t s, int front)
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

static void fail_request(struct broker *b, int c, uint32_t gen, struct demo_msg *m)
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
		fail_request(b, c, b->conns[c].gen, m);
	} else {
		b->slots[s].used = 1;
		b->slots[s].conn = c;
		b->slots[s].conn_gen = b->conns[c].gen;
		b->slots[s].m = *m;
		b->slots[s].m.tag = (uint32_t)s;
		enqueue(b, (uint32_t)s, 0);
		counters(b);
		shmtrace_span(demo_t, id->cat, id->queue, t1, shmtrace_now(), 0);
	}
	shmtrace_span(demo_t, id->cat, id->route, t0, shmtrace_now(), m->flow);
}

static void worker_died(struct broker *b, uint32_t w);

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
			enqueue(b, s, 1);
			worker_died(b, (uint32_t)w);
			continue;
		}
		b->slots[s].worker = w;
		b->workers[w].inflight++;
		b->inflight++;
		counters(b);
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
	counters(b);
	to_client(b, s->conn, s->conn_gen, m);
	shmtrace_span(demo_t, id->cat, id->forward, t0, shmtrace_now(), m->flow);
}

static void describe_exit(int st, char *buf, size_t len)
{
	if (WIFSIGNALED(st))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
}

/* Worker w is gone (EOF on its socket): reap it, record an error on each
 * request it held, and hand those to the others, or fail them. */
static void worker_died(struct broker *b, uint32_t w)
{
	const struct demo_ids *id = &demo_ids;
	struct wrk *k = &b->workers[w];
	uint32_t moved = 0, failed = 0;
	char how[64];
	int st = 0;

	close(k->fd);
	k->fd = -1;
	b->alive--;
	demo_wait_child(k->pid, DEMO_EXIT_TIMEOUT_MS, &st);
	describe_exit(st, how, sizeof(how));
	if (w + 1 != b->cfg->crash_worker)
		b->unexpected = 1;
	for (uint32_t s = 0; s < DEMO_MAX_SLOTS; s++) {
		struct slot *sl = &b->slots[s];

		if (!sl->used || sl->worker != (int)w)
			continue;
		b->inflight--;
		if (b->alive) {
			shmtrace_instant(demo_t, id->cat, id->error, sl->m.flow);
			shmtrace_instant(demo_t, id->cat, id->requeue, sl->m.flow);
			enqueue(b, s, 1);
			moved++;
		} else {
			fail_request(b, sl->conn, sl->conn_gen, &sl->m);
			sl->used = 0;
			failed++;
		}
	}
	k->inflight = 0;
	shmtrace_instant(demo_t, id->cat, id->worker_died, 0);
	counters(b);
	fprintf(stderr, "%s: broker: worker-%u (pid %d) %s; %u request(s) re-routed, %u failed\n",
		DEMO_NAME, w + 1, (int)k->pid, how, moved, failed);
	if (!b->alive) {
		/* nobody left to serve the queue */
		while (b->qlen) {
			struct slot *sl = &b->slots[b->queue[b->qhead]];

			b->qhead = (b->qhead + 1) % DEMO_MAX_SLOTS;
			b->qlen--;
			fail_request(b, sl->conn, sl->conn_gen, &sl->m);
			sl->used = 0;
		}
		counters(b);
	}
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

/* Becomes the Python worker (tools/demo/worker.py): the same protocol on
 * the inherited socket, recording into the same ring. Never returns. */
static void exec_py_worker(const struct demo_config *cfg, uint32_t index, int fd)
{
	char fdbuf[16], idxbuf[16];
	const char *argv[] = { cfg->python, cfg->py_worker, "--ring", cfg->ring, "--fd", fdbuf,
			       "--index", idxbuf, index == cfg->crash_worker ? "--crash" : NULL,
			       NULL };

	/* the socket was made close-on-exec: this one end must survive */
	if (fcntl(fd, F_SETFD, 0) < 0) {
		fprintf(stderr, "%s: worker-%u: fcntl: %s\n", DEMO_NAME, index, strerror(errno));
		_exit(1);
	}
	snprintf(fdbuf, sizeof(fdbuf), "%d", fd);
	snprintf(idxbuf, sizeof(idxbuf), "%u", index);
	execvp(cfg->python, (char *const *)argv);
	fprintf(stderr, "%s: worker-%u: exec %s: %s\n", DEMO_NAME, index, cfg->python, strerror(errno));
	_exit(127);
}

static int start_workers(struct broker *b)
{
	pid_t self = getpid();

	for (uint32_t i = 0; i < b->nworkers; i++) {
		int sv[2];
		pid_t pid;

		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
			fprintf(stderr, "%s: broker: socketpair: %s\n", DEMO_NAME, strerror(errno));
			return -1;
		}
		shmtrace_flush(demo_t);
		pid = fork();
		if (pid < 0) {
			fprintf(stderr, "%s: broker: fork: %s\n", DEMO_NAME, strerror(errno));
			close(sv[0]);
			close(sv[1]);
			return -1;
		}
		if (pid == 0) {
			/* a worker must not outlive the broker */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != self)
				_exit(1);
			close(sv[0]);
			close(b->lfd);
			for (uint32_t j = 0; j < i; j++)
				close(b->workers[j].fd);
			if (b->cfg->py_worker && i + 1 == b->nworkers)
				exec_py_worker(b->cfg, i + 1, sv[1]);
			_exit(demo_worker_main(b->cfg, i + 1, sv[1]));
		}
		close(sv[1]);
		b->workers[i].fd = sv[0];
		b->workers[i].pid = pid;
		b->alive++;
	}
	return 0;
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
				worker_died(b, w);
		}
	}
	dispatch(b);
	return 1;
}

/* Asks every live worker to finish (EOF on its socket) and reaps it. */
static void stop_workers(struct broker *b)
{
	for (uint32_t w = 0; w < b->nworkers; w++)
		if (b->workers[w].fd >= 0)
			shutdown(b->workers[w].fd, SHUT_WR);
	for (uint32_t w = 0; w < b->nworkers; w++) {
		int st = 0;

		if (b->workers[w].fd < 0)
			continue;
		if (demo_wait_child(b->workers[w].pid, DEMO_EXIT_TIMEOUT_MS, &st) < 0) {
			fprintf(stderr, "%s: broker: worker-%u did not exit, killed\n", DEMO_NAME, w + 1);
			b->unexpected = 1;
		} else if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			char how[64];

			describe_exit(st, how, sizeof(how));
			fprintf(stderr, "%s: broker: worker-%u %s\n", DEMO_NAME, w + 1, how);
			b->unexpected = 1;
		}
		close(b->workers[w].fd);
		b->workers[w].fd = -1;
	}
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
	if (start_workers(&b) < 0) {
		stop_workers(&b);
		return 1;
	}
	counters(&b);
	/* the client connects only after this byte: no sleeping, no retries */
	if (write(ready_fd, "r", 1) != 1) {
		stop_workers(&b);
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
	stop_workers(&b);
	close(b.lfd);
	shmtrace_close(demo_t);
	return ret || b.unexpected;
}
