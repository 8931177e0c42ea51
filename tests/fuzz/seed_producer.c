/* SPDX-License-Identifier: MIT */
/*
 * seed_producer.c - writes a little of everything into a ring, for the
 * fuzz seeds that tests/fuzz/run.sh makes (not a harness). Built with the
 * normal build's build/libshmtrace.a.
 *
 *   seed_producer RING N           attach to RING (made by the collector)
 *   seed_producer --create RING N  make RING with a small geometry first
 *
 * Writes N spans (with flows, some with text arguments), instants and
 * counters under names with quotes, backslashes, control characters and
 * invalid UTF-8; a forked
 * child writes too and dies without closing, leaving staged records.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shmtrace.h"

static void work(shmtrace_t *t, int n, const char *tname)
{
	static const char *names[] = {
		"handle", "quote \"x\"", "back\\slash", "ctl \x01\x02\x1f tab\t nl\n",
		"bad utf8 \xff\xfe \xc3 \xed\xa0\x80", "\xe2\x82\xac euro", "long-name-0123456789abcdefghijklmnopqrstuvwxyz",
	};
	uint32_t cat = shmtrace_intern(t, "rpc"), cat2 = shmtrace_intern(t, "io \"disk\"");
	uint32_t ids[sizeof(names) / sizeof(*names)];

	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		ids[i] = shmtrace_intern(t, names[i]);
	shmtrace_set_thread_name(t, tname);
	for (int i = 0; i < n; i++) {
		uint64_t t0 = shmtrace_now(), flow = i % 3 ? shmtrace_flow_new(t) : 0;

		shmtrace_span(t, i & 1 ? cat : cat2, ids[i % 7], t0, t0 + 500 + i, flow);
		if (i % 4 == 0)
			shmtrace_instant(t, cat, ids[(i + 1) % 7], flow);
		if (i % 5 == 0)
			shmtrace_counter(t, cat2, ids[(i + 2) % 7], (int64_t)i * -1000);
		if (i % 6 == 0) {
			/* text arguments: their bytes in records of the event */
			struct shmtrace_arg a[2] = { shmtrace_arg_text(ids[i % 7], names[(i + 3) % 7]),
						     shmtrace_arg_int(ids[(i + 1) % 7], i) };

			shmtrace_span_args(t, cat, ids[(i + 4) % 7], t0, t0 + 100, flow, a, 2);
		}
	}
}

int main(int argc, char **argv)
{
	struct shmtrace_ring_config cfg = {
		.capacity = 64, .max_strings = 16, .string_bytes = 512, .max_threads = 8, .blocks = 4,
		.flags = SHMTRACE_CREATE_NO_TSC,
	};
	shmtrace_t *t;
	int create = argc > 1 && !strcmp(argv[1], "--create");
	const char *ring;
	int n, ret;
	pid_t pid;

	if (argc != 3 + create) {
		fprintf(stderr, "usage: seed_producer [--create] RING N\n");
		return 2;
	}
	ring = argv[1 + create];
	n = atoi(argv[2 + create]);
	if (create && (ret = shmtrace_ring_create(ring, &cfg)) < 0) {
		fprintf(stderr, "seed_producer: create %s: %s\n", ring, shmtrace_strerror(ret));
		return 1;
	}
	if ((ret = shmtrace_open(ring, &t)) < 0) {
		fprintf(stderr, "seed_producer: open %s: %s\n", ring, shmtrace_strerror(ret));
		return 1;
	}
	shmtrace_set_process_name(t, "seed \"producer\"");
	work(t, n, "main");
	shmtrace_flush(t);
	pid = fork();
	if (pid == 0) {
		work(t, 10, "child-dies");
		_exit(0);	/* no close: its records stay staged */
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	work(t, 5, "main-again");
	shmtrace_close(t);
	return 0;
}
