/* SPDX-License-Identifier: MIT */
/*
 * client.c - the client process: a few threads, each with its own
 * connection to the broker, send requests one at a time and check every
 * reply against a locally computed answer.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "demo.h"

#define PRIME_TABLE	(DEMO_PRIME_MIN + DEMO_PRIME_SPAN + 1)

struct client {
	const struct demo_config *cfg;
	uint32_t next;			/* next request number, atomic */
	uint32_t ok, retries, errors;	/* atomic */
	uint32_t per_worker[DEMO_MAX_WORKERS + 1];	/* atomic */
	uint32_t *primes;		/* primes[n]: count of primes <= n */
};

struct client_thread {
	struct client *c;
	uint32_t index;
	pthread_t th;
};

/* The reference answers, by a sieve: a different method from the
 * worker's trial division, so a match means something. */
static uint32_t *prime_table(void)
{
	uint32_t *t = calloc(PRIME_TABLE, sizeof(*t));
	uint8_t *composite = calloc(PRIME_TABLE, 1);

	if (!t || !composite) {
		free(t);
		free(composite);
		return NULL;
	}
	for (uint32_t i = 2; i < PRIME_TABLE; i++) {
		t[i] = t[i - 1] + !composite[i];
		if (!composite[i])
			for (uint64_t j = (uint64_t)i * i; j < PRIME_TABLE; j += i)
				composite[j] = 1;
	}
	free(composite);
	return t;
}

/* Checks a reply to req. Returns 0, or -EBADMSG if it is wrong. */
static int check_reply(struct client *c, const struct demo_msg *req, const struct demo_msg *rep)
{
	if (rep->type != DEMO_REPLY || rep->id != req->id || rep->flow != req->flow)
		return -EBADMSG;
	if (rep->status != DEMO_OK)
		return 0;
	if (rep->limit != req->limit || rep->primes != c->primes[req->limit] ||
	    rep->crc != demo_crc32(req->data, req->len) || rep->worker < 1 ||
	    rep->worker > c->cfg->workers)
		return -EBADMSG;
	return 0;
}

/* One request, retried while a worker turns it down. The hops of the
 * request on this thread are "send" (out) and "handle reply" (back):
 * those two carry the flow id; "request" around them does not, so that
 * each arrow of the flow ends on the span of the hop it belongs to. */
static int one_request(struct client *c, int fd, uint32_t n, char *why, size_t whylen)
{
	const struct demo_ids *id = &demo_ids;
	uint64_t t_req = shmtrace_now(), t0;
	struct demo_msg req, rep;
	int ret = -EAGAIN;

	demo_fill_request(&req, n);
	req.flow = shmtrace_flow_new(demo_t);
	for (uint32_t a = 0; a < DEMO_MAX_ATTEMPTS && ret == -EAGAIN; a++) {
		req.attempt = a;
		t0 = shmtrace_now();
		ret = demo_send_msg(fd, &req);
		shmtrace_span(demo_t, id->cat, id->send, t0, shmtrace_now(), req.flow);
		if (ret < 0) {
			snprintf(why, whylen, "send: %s", strerror(-ret));
			break;
		}
		t0 = shmtrace_now();
		ret = demo_recv_msg(fd, &rep, DEMO_REPLY_TIMEOUT_MS);
		shmtrace_span(demo_t, id->cat, id->wait_reply, t0, shmtrace_now(), 0);
		if (ret < 0) {
			snprintf(why, whylen, "%s", ret == -ETIMEDOUT ? "no reply in time" :
				 ret == -ECONNRESET ? "broker closed the connection" : strerror(-ret));
			break;
		}
		t0 = shmtrace_now();
		ret = check_reply(c, &req, &rep);
		shmtrace_span(demo_t, id->cat, id->handle_reply, t0, shmtrace_now(), req.flow);
		if (ret < 0) {
			snprintf(why, whylen, "wrong reply from worker-%u", rep.worker);
			break;
		}
		if (rep.status == DEMO_BUSY) {
			shmtrace_instant(demo_t, id->cat, id->retry, req.flow);
			__atomic_add_fetch(&c->retries, 1, __ATOMIC_RELAXED);
			ret = -EAGAIN;
		} else if (rep.status != DEMO_OK) {
			snprintf(why, whylen, "the broker could not serve it");
			ret = -EIO;
		} else {
			__atomic_add_fetch(&c->per_worker[rep.worker], 1, __ATOMIC_RELAXED);
		}
	}
	if (ret == -EAGAIN)
		snprintf(why, whylen, "still busy after %d attempts", DEMO_MAX_ATTEMPTS);
	if (ret < 0)
		shmtrace_instant(demo_t, id->cat, id->error, req.flow);
	shmtrace_span(demo_t, id->cat, id->request, t_req, shmtrace_now(), 0);
	return ret;
}

static void *client_thread(void *arg)
{
	struct client_thread *ct = arg;
	struct client *c = ct->c;
	char name[32], why[96];
	uint32_t n;
	int fd;

	snprintf(name, sizeof(name), "client-%u", ct->index);
	demo_name_thread(name);
	fd = demo_socket(c->cfg->sock_path, 0);
	if (fd < 0) {
		fprintf(stderr, "%s: %s: connect to the broker: %s\n", DEMO_NAME, name, strerror(-fd));
		__atomic_add_fetch(&c->errors, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	while ((n = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED)) < c->cfg->requests) {
		int ret = one_request(c, fd, n, why, sizeof(why));

		if (ret == 0) {
			__atomic_add_fetch(&c->ok, 1, __ATOMIC_RELAXED);
			continue;
		}
		__atomic_add_fetch(&c->errors, 1, __ATOMIC_RELAXED);
		fprintf(stderr, "%s: %s: request %u failed: %s\n", DEMO_NAME, name, n, why);
		/* after a timeout or a broken reply the connection is out of
		 * step; this thread stops, the others carry on */
		if (ret != -EIO)
			break;
	}
	close(fd);
	shmtrace_flush(demo_t);
	return NULL;
}

/* Waits for the broker's ready byte: EOF means it failed to start. */
static int wait_ready(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char byte;
	int n;

	do
		n = poll(&p, 1, DEMO_READY_TIMEOUT_MS);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return -ETIMEDOUT;
	if (n < 0)
		return -errno;
	return read(fd, &byte, 1) == 1 ? 0 : -ECONNRESET;
}

static void print_summary(const struct client *c, uint64_t ns)
{
	double s = (double)ns / 1e9;

	printf("%s: %u/%u requests ok in %.2f s (%.0f/s), %u retried, %u failed; served by",
	       DEMO_NAME, c->ok, c->cfg->requests, s, s > 0 ? c->ok / s : 0.0, c->retries, c->errors);
	for (uint32_t w = 1; w <= c->cfg->workers; w++)
		printf("%s worker-%u: %u", w > 1 ? "," : "", w, c->per_worker[w]);
	printf("\n");
	fflush(stdout);
}

int demo_client_run(const struct demo_config *cfg, pid_t broker, int ready_fd)
{
	static struct client_thread threads[DEMO_MAX_CLIENTS];
	struct client c = { .cfg = cfg };
	uint32_t started = 0;
	uint64_t t0;
	int ret, st = 0, control = -1, rc = 0;

	demo_name_process("client", "main");
	c.primes = prime_table();
	ret = c.primes ? wait_ready(ready_fd) : -ENOMEM;
	close(ready_fd);
	if (ret < 0) {
		fprintf(stderr, "%s: the broker did not start: %s\n", DEMO_NAME,
			ret == -ECONNRESET ? "it exited" : strerror(-ret));
		rc = 1;
		goto out;
	}
	/* held open for the whole run: the broker exits when it closes */
	control = demo_socket(cfg->sock_path, 0);
	if (control < 0) {
		fprintf(stderr, "%s: connect to the broker: %s\n", DEMO_NAME, strerror(-control));
		rc = 1;
		goto out;
	}
	t0 = shmtrace_now();
	for (; started < cfg->clients; started++) {
		threads[started].c = &c;
		threads[started].index = started + 1;
		ret = pthread_create(&threads[started].th, NULL, client_thread, &threads[started]);
		if (ret) {
			fprintf(stderr, "%s: client thread: %s\n", DEMO_NAME, strerror(ret));
			rc = 1;
			break;
		}
	}
	for (uint32_t i = 0; i < started; i++)
		pthread_join(threads[i].th, NULL);
	shmtrace_span(demo_t, demo_ids.cat, demo_ids.run, t0, shmtrace_now(), 0);
	print_summary(&c, shmtrace_now() - t0);
	if (c.ok != cfg->requests)
		rc = 1;
out:
	if (control >= 0)
		close(control);
	else
		kill(broker, SIGTERM);	/* it would wait for a client that never comes */
	/* the broker stops its workers and exits once we are gone */
	if (demo_wait_child(broker, 2 * DEMO_EXIT_TIMEOUT_MS + 1000, &st) < 0) {
		fprintf(stderr, "%s: the broker did not exit, killed\n", DEMO_NAME);
		rc = 1;
	} else if (WIFSIGNALED(st)) {
		fprintf(stderr, "%s: the broker was killed by signal %d\n", DEMO_NAME, WTERMSIG(st));
		rc = 1;
	} else if (WEXITSTATUS(st)) {
		fprintf(stderr, "%s: the broker reported a failure\n", DEMO_NAME);
		rc = 1;
	}
	free(c.primes);
	return rc;
}
