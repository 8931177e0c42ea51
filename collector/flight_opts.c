/* SPDX-License-Identifier: MIT */
/*
 * flight_opts.c - the command line of shmtrace-collector --flight-recorder
 * (flight.h): its options, checked against the others, and the ring it
 * makes with --create.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flight.h"
#include "parse.h"

int flight_option(struct flight_opts *f, int c, const char *arg, char *err, size_t errlen)
{
	static const struct num_spec per_hour = { "--max-per-hour", 1, 100000, 0, NULL };
	static const struct num_spec size = { "--max-snapshot-size", 4096, UINT64_MAX,
					      PARSE_SUFFIX, NULL };
	uint64_t v;

	switch (c) {
	case 0x1f00:
		f->on = true;
		return 1;
	case 0x1f01:
		f->dir = arg;
		return 1;
	case 0x1f02:
	case 0x1f03:
		if (parse_duration(arg, c == 0x1f02 ? &f->keep_ns : &f->after_ns) == 0 &&
		    (c == 0x1f03 || f->keep_ns))
			return 1;
		snprintf(err, errlen, "invalid duration '%s' for --%s (try 10s, 500ms, 300us)", arg,
			 c == 0x1f02 ? "keep" : "after");
		return -1;
	case 0x1f04:
		if (parse_num(arg, &per_hour, &v, err, errlen) < 0)
			return -1;
		f->max_per_hour = (uint32_t)v;
		return 1;
	case 0x1f05:
		return parse_num(arg, &size, &f->max_bytes, err, errlen) < 0 ? -1 : 1;
	default:
		return 0;
	}
}

const char *flight_check(const struct flight_opts *f, bool output, bool create, uint32_t mode)
{
	static char bad[4200];
	struct stat st = { 0 };

	if (!f->on)
		return f->dir || f->keep_ns || f->after_ns || f->max_per_hour || f->max_bytes ?
		       "--snapshot-dir, --keep, --after, --max-per-hour and --max-snapshot-size "
		       "need --flight-recorder" : NULL;
	if (output)
		return "--flight-recorder writes snapshots into --snapshot-dir, not a capture: "
		       "give no --output";
	if (!f->dir)
		return "--flight-recorder needs --snapshot-dir DIR";
	if (stat(f->dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		int e = errno;

		snprintf(bad, sizeof(bad), "--snapshot-dir '%.4000s': %s", f->dir,
			 st.st_mode && !S_ISDIR(st.st_mode) ? "not a directory" : strerror(e));
		return bad;
	}
	/* a directory no snapshot can be written into is said now, not at
	 * the first trigger */
	if (faccessat(AT_FDCWD, f->dir, W_OK | X_OK, AT_EACCESS) < 0) {
		snprintf(bad, sizeof(bad), "--snapshot-dir '%.4000s': %s", f->dir, strerror(errno));
		return bad;
	}
	/* the window is the ring: only an overwrite ring keeps the newest */
	if (create && mode != SHMTRACE_MODE_OVERWRITE)
		return "--flight-recorder keeps its window in the ring: create it with --mode "
		       "overwrite";
	return NULL;
}

int flight_make_ring(const char *ring, struct shmtrace_ring_config *cfg, bool recreate)
{
	int ret;

	/* a restart adopts the ring and its window; another configuration is
	 * replaced only when asked: its window would be lost */
	cfg->flags |= recreate ? SHMTRACE_CREATE_REPLACE : SHMTRACE_CREATE_ADOPT;
	ret = shmtrace_ring_create(ring, cfg);
	if (ret == -EEXIST) {
		fprintf(stderr, "shmtrace-collector: ring '%s' exists with another configuration; "
			"--recreate replaces it (its window is lost), or run without --create to "
			"keep it as it is\n", ring);
		return -1;
	}
	if (ret < 0) {
		fprintf(stderr, "shmtrace-collector: cannot create ring '%s': %s\n", ring,
			shmtrace_strerror(ret));
		return -1;
	}
	if (ret == SHMTRACE_ADOPTED)
		fprintf(stderr, "shmtrace-collector: adopted ring '%s' as it was\n", ring);
	return 0;
}
