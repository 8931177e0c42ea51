/* SPDX-License-Identifier: MIT */
/*
 * prefork.c - the producer of tests/e2e/otlp_tree.sh: a prefork server
 * and its client, every process writing into one ring.
 *
 *   otlp-prefork RING WORKERS THREADS REQUESTS TRACEPARENT
 *
 * The parent ("master") records "spawn" while it forks WORKERS worker
 * processes of THREADS threads each, and the client; it then waits for
 * them in "wait". The client sends REQUESTS requests, one at a time, to
 * the worker threads in turn: each inside a "request" span, a "send" span
 * of a new flow (the flow id goes along), then a "recv" span of that flow
 * once the reply is back. A worker thread handles a request in a "handle"
 * span of its flow, with "decode" and "compute" inside it. Last, the
 * client passes TRACEPARENT on, as a caller that shmtrace does not trace
 * would: the worker thread takes it inside a "GET /x" span
 * (shmtrace_flow_from_traceparent() records it there) and handles the
 * request inside that span. Exit 0, 1 on an error, 2 on a usage error.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shmtrace.h"

#define MAX_CHANNELS 64

static shmtrace_t *t;
static uint32_t cat;
/* a worker thread's requests come on req[i]; every reply goes on reply */
static int req[MAX_CHANNELS][2], reply[2];

/* name, begun now, around a busy wait of some microseconds */
static void leaf(const char *name)
{
	struct shmtrace_open_span sp;
	uint64_t until;

	shmtrace_begin(t, &sp, cat, shmtrace_intern(t, name), 0);
	until = shmtrace_now() + 20000;
	while (shmtrace_now() < until)
		;
	shmtrace_end(&sp);
}

/* One request of flow: handle > decode, compute; then the reply. */
static int handle(uint64_t flow)
{
	struct shmtrace_open_span sp;

	shmtrace_begin(t, &sp, cat, shmtrace_intern(t, "handle"), flow);
	leaf("decode");
	leaf("compute");
	shmtrace_end(&sp);
	return write(reply[1], "k", 1) == 1 ? 0 : -1;
}

/* A worker thread: the requests of channel (intptr_t)arg until EOF. */
static void *serve(void *arg)
{
	FILE *in = fdopen(req[(intptr_t)arg][0], "r");
	char line[128], name[16];

	snprintf(name, sizeof(name), "worker-%d", (int)(intptr_t)arg);
	shmtrace_set_thread_name(t, name);
	while (in && fgets(line, sizeof(line), in)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "00-", 3)) {
			struct shmtrace_open_span sp;
			uint64_t flow;

			shmtrace_begin(t, &sp, cat, shmtrace_intern(t, "GET /x"), 0);
			flow = shmtrace_flow_from_traceparent(t, line);
			if (!flow || handle(flow) < 0)
				exit(1);
			shmtrace_end(&sp);
		} else if (handle(strtoull(line, NULL, 10)) < 0) {
			exit(1);
		}
	}
	return NULL;
}

static int worker(int first, int threads)
{
	pthread_t th[MAX_CHANNELS];

	shmtrace_set_process_name(t, "worker");
	for (int i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, serve, (void *)(intptr_t)(first + i)))
			return 1;
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	shmtrace_close(t);
	return 0;
}

/* One request on channel ch: a new flow's id, or the traceparent tp. */
static int request(int ch, const char *tp)
{
	struct shmtrace_open_span rq, sp;
	uint64_t flow = tp ? 0 : shmtrace_flow_new(t);
	char line[128], k;
	int n;

	n = tp ? snprintf(line, sizeof(line), "%s\n", tp)
	       : snprintf(line, sizeof(line), "%" PRIu64 "\n", flow);
	if (tp)
		/* a caller shmtrace does not trace: nothing recorded */
		return write(req[ch][1], line, (size_t)n) == n && read(reply[0], &k, 1) == 1 ? 0 : 1;
	shmtrace_begin(t, &rq, cat, shmtrace_intern(t, "request"), 0);
	shmtrace_begin(t, &sp, cat, shmtrace_intern(t, "send"), flow);
	if (write(req[ch][1], line, (size_t)n) != n)
		return 1;
	shmtrace_end(&sp);
	if (read(reply[0], &k, 1) != 1)
		return 1;
	shmtrace_begin(t, &sp, cat, shmtrace_intern(t, "recv"), flow);
	shmtrace_end(&sp);
	shmtrace_end(&rq);
	return 0;
}

static int client(int channels, int requests, const char *tp)
{
	shmtrace_set_process_name(t, "client");
	for (int i = 0; i < requests; i++)
		if (request(i % channels, NULL))
			return 1;
	if (request(requests % channels, tp))
		return 1;
	shmtrace_close(t);
	return 0;
}

/* The master: forks the workers and the client, waits for them. */
static int master(int workers, int threads, int requests, const char *tp)
{
	struct shmtrace_open_span sp;
	int channels = workers * threads, st, bad = 0;
	pid_t kid;

	shmtrace_set_process_name(t, "master");
	shmtrace_begin(t, &sp, cat, shmtrace_intern(t, "spawn"), 0);
	for (int w = 0; w <= workers; w++) {
		kid = fork();
		if (kid < 0)
			return 1;
		if (kid == 0) {
			/* each child keeps the ends it uses; EOF reaches the
			 * workers when the client is done */
			for (int i = 0; i < channels; i++) {
				close(w < workers ? req[i][1] : req[i][0]);
				if (w < workers && (i < w * threads || i >= (w + 1) * threads))
					close(req[i][0]);
			}
			close(w < workers ? reply[0] : reply[1]);
			exit(w < workers ? worker(w * threads, threads) : client(channels, requests, tp));
		}
	}
	shmtrace_end(&sp);
	for (int i = 0; i < channels; i++) {
		close(req[i][0]);
		close(req[i][1]);
	}
	close(reply[0]);
	close(reply[1]);
	shmtrace_begin(t, &sp, cat, shmtrace_intern(t, "wait"), 0);
	while ((kid = wait(&st)) > 0)
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	shmtrace_end(&sp);
	return bad;
}

int main(int argc, char **argv)
{
	int workers, threads, requests, ret;

	if (argc != 6 || (workers = atoi(argv[2])) < 1 || (threads = atoi(argv[3])) < 1 ||
	    (requests = atoi(argv[4])) < 1 || workers * threads > MAX_CHANNELS) {
		fprintf(stderr, "usage: otlp-prefork RING WORKERS THREADS REQUESTS TRACEPARENT\n");
		return 2;
	}
	ret = shmtrace_open(argv[1], &t);
	if (ret < 0) {
		fprintf(stderr, "otlp-prefork: open %s: %s\n", argv[1], shmtrace_strerror(ret));
		return 1;
	}
	cat = shmtrace_intern(t, "rpc");
	for (int i = 0; i < workers * threads; i++)
		if (pipe(req[i]) < 0)
			return 1;
	if (pipe(reply) < 0)
		return 1;
	ret = master(workers, threads, requests, argv[5]);
	shmtrace_close(t);
	return ret;
}
