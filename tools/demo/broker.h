/* SPDX-License-Identifier: MIT */
/*
 * broker.h - the broker's state, shared by its event loop (broker.c) and
 * its worker pool (broker_pool.c).
 */
#ifndef SHMTRACE_DEMO_BROKER_H
#define SHMTRACE_DEMO_BROKER_H

#include <stdint.h>
#include <sys/types.h>

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


/* broker.c */
void broker_counters(struct broker *b);
void broker_enqueue(struct broker *b, uint32_t s, int front);
void broker_fail_request(struct broker *b, int c, uint32_t gen, struct demo_msg *m);

/* broker_pool.c */
int broker_start_workers(struct broker *b);
void broker_worker_died(struct broker *b, uint32_t w);
void broker_stop_workers(struct broker *b);

#endif /* SHMTRACE_DEMO_BROKER_H */
