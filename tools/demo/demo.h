/* SPDX-License-Identifier: MIT */
/*
 * demo.h - shared types of shmtrace-demo: a client, a broker and a pool of
 * worker processes that talk over UNIX sockets and trace into one ring.
 */
#ifndef SHMTRACE_DEMO_H
#define SHMTRACE_DEMO_H

#include <stdint.h>
#include <sys/types.h>

#include "shmtrace.h"

#define DEMO_NAME		"shmtrace-demo"
#define DEMO_MAGIC		0x646d6f31u	/* "dmo1" */
#define DEMO_PAYLOAD		512		/* bytes each request carries */
#define DEMO_MAX_WORKERS	16
#define DEMO_MAX_CLIENTS	32
#define DEMO_MAX_CONNS		64		/* broker: client connections */
#define DEMO_MAX_SLOTS		256		/* broker: requests it holds at once */
#define DEMO_WORKER_DEPTH	2		/* requests in flight per worker */
#define DEMO_MAX_ATTEMPTS	3		/* client: tries per request */
#define DEMO_PRIME_MIN		2000		/* each request counts primes up to */
#define DEMO_PRIME_SPAN		10000		/* MIN + (id-derived value % SPAN) */
#define DEMO_CRASH_AT		10		/* --crash-worker dies in this compute */

/* Timeouts: every wait in the demo is bounded by one of these. */
#define DEMO_REPLY_TIMEOUT_MS	15000		/* client waits for one reply */
#define DEMO_READY_TIMEOUT_MS	10000		/* client waits for the broker */
#define DEMO_IDLE_TIMEOUT_MS	30000		/* broker: no traffic at all */
#define DEMO_EXIT_TIMEOUT_MS	5000		/* a child asked to exit */

enum demo_type {
	DEMO_REQ = 1,		/* client -> broker -> worker */
	DEMO_REPLY = 2,		/* worker -> broker -> client */
};

enum demo_status {
	DEMO_OK = 0,
	DEMO_BUSY = 1,		/* worker turned it down: the client retries */
	DEMO_FAILED = 2,	/* broker could not serve it */
};

/* One message, sent whole as one SOCK_SEQPACKET datagram. The flow id
 * travels with the request so that every hop records it. */
struct demo_msg {
	uint32_t magic;
	uint16_t type;		/* enum demo_type */
	uint16_t status;	/* enum demo_status */
	uint64_t flow;		/* shmtrace_flow_new() of the client */
	uint32_t id;		/* request number, 0..requests-1 */
	uint32_t attempt;	/* 0 first, then one more per retry */
	uint32_t tag;		/* broker's slot, echoed by the worker */
	uint32_t worker;	/* 1-based worker that answered */
	uint32_t limit;		/* count the primes <= limit */
	uint32_t primes;	/* reply: that count */
	uint32_t crc;		/* reply: CRC-32 of data */
	uint32_t len;		/* bytes used in data */
	uint8_t data[DEMO_PAYLOAD];
};

/* Interned names: looked up once in main() before any fork, then shared
 * by every process (the ids are the same in the whole ring). One category
 * for all: Chrome DevTools only joins the flow events of one flow, and
 * binds them to slices, when they all share a category. */
struct demo_ids {
	uint32_t cat;
	/* client */
	uint32_t run, request, send, wait_reply, handle_reply, retry, error;
	/* broker */
	uint32_t route, parse, queue, dispatch, forward, queue_depth, in_flight;
	uint32_t worker_died, requeue;
	/* worker */
	uint32_t receive, decode, work, compute, primes, checksum, reply, busy;
	/* argument keys and values */
	uint32_t k_request, k_bytes, k_status, k_limit, v_ok, v_busy;
};

struct demo_config {
	const char *ring;
	uint32_t requests;
	uint32_t workers;
	uint32_t clients;	/* client threads, one connection each */
	uint32_t crash_worker;	/* 1-based; 0: nobody crashes */
	const char *py_worker;	/* worker.py: the last worker runs it; NULL: none */
	const char *python;	/* the interpreter that runs it */
	char sock_path[108];	/* the broker's listening socket */
};

extern shmtrace_t *demo_t;
extern struct demo_ids demo_ids;

/* compute.c: the real work, shared by the worker and the client's check */
uint32_t demo_crc32(const uint8_t *buf, size_t len);
uint32_t demo_count_primes(uint32_t limit);
void demo_fill_request(struct demo_msg *m, uint32_t id);
int demo_is_busy(const struct demo_msg *m);

/* util.c */
int demo_socket(const char *path, int listening);
int demo_recv_msg(int fd, struct demo_msg *m, int timeout_ms);
int demo_send_msg(int fd, const struct demo_msg *m);
int demo_wait_child(pid_t pid, int timeout_ms, int *status);
uint64_t demo_ms_since(uint64_t start_ns);
void demo_name_process(const char *pname, const char *tname);
void demo_name_thread(const char *tname);

/* roles; each returns a process exit code */
int demo_client_run(const struct demo_config *cfg, pid_t broker, int ready_fd);
int demo_broker_main(const struct demo_config *cfg, int ready_fd);
int demo_worker_main(const struct demo_config *cfg, uint32_t index, int fd);

#endif
