/* SPDX-License-Identifier: MIT */
/*
 * c_hop.c - the C process of the Python tests (tests/python): records one
 * "c hop" span per flow id read from stdin, so that flows cross a C pid.
 *
 *   py-c-hop RING < flow ids, one per line
 *
 * Prints its pid, then "done N" after N flows at EOF. Exit 0, 1 on an
 * error, 2 on a usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "shmtrace.h"

int main(int argc, char **argv)
{
	uint32_t cat, name;
	unsigned long n = 0;
	char line[64];
	shmtrace_t *t;
	int ret;

	if (argc != 2) {
		fprintf(stderr, "usage: py-c-hop RING < flow ids\n");
		return 2;
	}
	ret = shmtrace_open(argv[1], &t);
	if (ret < 0) {
		fprintf(stderr, "py-c-hop: open %s: %s\n", argv[1], shmtrace_strerror(ret));
		return 1;
	}
	shmtrace_set_process_name(t, "c-hop");
	shmtrace_set_thread_name(t, "c-main");
	cat = shmtrace_intern(t, "rpc");
	name = shmtrace_intern(t, "c hop");
	printf("%d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		char *end;
		uint64_t flow, t0;

		errno = 0;
		flow = strtoull(line, &end, 10);
		if (errno || end == line || (*end && *end != '\n')) {
			fprintf(stderr, "py-c-hop: bad flow id '%s'\n", line);
			shmtrace_close(t);
			return 1;
		}
		t0 = shmtrace_now();
		shmtrace_span(t, cat, name, t0, shmtrace_now(), flow);
		n++;
	}
	shmtrace_close(t);
	printf("done %lu\n", n);
	return 0;
}
