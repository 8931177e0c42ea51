/* SPDX-License-Identifier: MIT */
/*
 * flight.h - shmtrace-collector --flight-recorder: the ring, in overwrite
 * mode, is the window, and nothing is written while nothing happens; a
 * trigger (shmtrace_trigger() in a program, SIGUSR1, a producer found dead
 * inside spans) makes a snapshot of it into --snapshot-dir, covering
 * --keep before the trigger and --after after it, at most --max-per-hour
 * of them (docs/DESIGN.md, "A flight recorder"). main.c only parses the
 * options through here and hands over.
 */
#ifndef SHMTRACE_COLLECTOR_FLIGHT_H
#define SHMTRACE_COLLECTOR_FLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shmtrace.h"

struct flight_opts {
	bool on;			/* --flight-recorder */
	const char *dir;		/* --snapshot-dir */
	uint64_t keep_ns;		/* --keep: 0, all the ring holds */
	uint64_t after_ns;		/* --after */
	uint32_t max_per_hour;		/* --max-per-hour */
	uint64_t max_bytes;		/* --max-snapshot-size: 0, no bound */
};

#define FLIGHT_MAX_PER_HOUR	60u	/* the default of --max-per-hour */

/* the options, for main.c's getopt_long() (values no short option has) */
#define FLIGHT_LONGOPTS							\
	{ "flight-recorder", no_argument, NULL, 0x1f00 },		\
	{ "snapshot-dir", required_argument, NULL, 0x1f01 },		\
	{ "keep", required_argument, NULL, 0x1f02 },			\
	{ "after", required_argument, NULL, 0x1f03 },			\
	{ "max-per-hour", required_argument, NULL, 0x1f04 },		\
	{ "max-snapshot-size", required_argument, NULL, 0x1f05 }

/* their lines of --help */
#define FLIGHT_HELP							\
"      --flight-recorder    keep the ring (overwrite mode) as a flight recorder:\n" \
"                           write no capture, but a snapshot of the ring into the\n" \
"                           snapshot directory when a program calls\n"	\
"                           shmtrace_trigger(), on SIGUSR1, or when a producer is\n" \
"                           found dead inside spans; no --output then\n"	\
"      --snapshot-dir DIR   where snapshots go, each a capture file named for its\n" \
"                           ring, time and cause (never replacing a file)\n" \
"      --keep DURATION      what a snapshot holds before its trigger (10s, 500ms;\n" \
"                           default: all the ring holds)\n"		\
"      --after DURATION     how long after the trigger the snapshot is taken, so\n" \
"                           that what follows is in it too (default 0)\n" \
"      --max-per-hour N     snapshots in any hour at most (default 60); the\n" \
"                           triggers beyond are counted, in the next snapshot and\n" \
"                           the summary line\n"				\
"      --max-snapshot-size SIZE  leave a snapshot's oldest records out until it\n" \
"                           is at most SIZE bytes (suffixes k, M, G)\n"

/* Takes getopt's value c (with arg) into f: 1 when it is one of these
 * options, 0 when not, -1 with a one-line usage error in err. */
int flight_option(struct flight_opts *f, int c, const char *arg, char *err, size_t errlen);

/* These options against the others: NULL, or the usage error. */
const char *flight_check(const struct flight_opts *f, bool output, bool create, uint32_t mode);

/* With --create: the ring made, or adopted as it is (or replaced, with
 * recreate). 0, or -1 after saying why not. */
int flight_make_ring(const char *ring, struct shmtrace_ring_config *cfg, bool recreate);

/* Keeps ring as a flight recorder until stop() says so, polling at least
 * every poll_ns; quiet: no summary line at the end; ready_fd (-1: none)
 * gets "ready\n" once it is held and SIGUSR1 is taken. Returns the exit
 * status: 0, or 1 when the ring could not be held or a snapshot could
 * not be written (said on stderr). */
int flight_run(const char *ring, uint64_t poll_ns, const struct flight_opts *f, bool quiet,
	       int ready_fd, bool (*stop)(void));

#endif
