/* SPDX-License-Identifier: MIT */
/*
 * ring_config.h - the options that configure a ring's creation, as the
 * commands take them (`shmtrace-collector --create`, `shmtrace create`):
 * their names, help, bounds and messages, once, so that the two commands
 * make the same ring of the same words.
 *
 * Header-only: the commands link util/'s parser; libshmtrace, which does
 * not, never includes this.
 */
#ifndef SHMTRACE_RING_CONFIG_H
#define SHMTRACE_RING_CONFIG_H

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"
#include "ring_format.h"
#include "shmtrace.h"

/* the limits include/shmtrace.h tells users are the ring's */
_Static_assert(SHMTRACE_CAPACITY_MAX == SHMT_MAX_CAPACITY, "shmtrace.h's SHMTRACE_CAPACITY_MAX");
_Static_assert(SHMTRACE_STRINGS_MAX == SHMT_MAX_STRINGS, "shmtrace.h's SHMTRACE_STRINGS_MAX");
_Static_assert(SHMTRACE_THREADS_MAX == SHMT_MAX_THREADS, "shmtrace.h's SHMTRACE_THREADS_MAX");

/* getopt_long entries of the options (a command puts them in its table) */
#define SHMT_RING_CFG_LONGOPTS						\
	{ "capacity", required_argument, NULL, 'C' },			\
	{ "mode", required_argument, NULL, 'M' },			\
	{ "group", no_argument, NULL, 'G' },				\
	{ "strings", required_argument, NULL, 's' },			\
	{ "string-bytes", required_argument, NULL, 'B' },		\
	{ "threads", required_argument, NULL, 'T' }

/* their lines of --help */
#define SHMT_RING_CFG_HELP						\
"      --capacity N         records in the ring, a power of two from 2 to 16M\n" \
"                           (default 262144)\n"			\
"      --mode MODE          discard (default) or overwrite\n"		\
"      --group              make the ring readable and writable by our group,\n" \
"                           whose members may then produce into it\n"	\
"      --strings N          distinct names and categories the ring can intern,\n" \
"                           all processes together (default 4096, at most 65535)\n" \
"      --string-bytes BYTES text space for them, 64 to 256M (suffixes k, M);\n" \
"                           default 64 per string, and at least 256k\n"	\
"      --threads N          thread name slots: one per thread that ever writes,\n" \
"                           plus one per rename (default 1024)\n"

/*
 * Takes option c (getopt's value) with its argument arg into cfg. Returns
 * 1 when c is one of these options, 0 when it is not, or -EINVAL with a
 * one-line usage error in err that names the option and what it accepts.
 */
static inline int shmt_ring_cfg_option(struct shmtrace_ring_config *cfg, int c, const char *arg,
				       char *err, size_t errlen)
{
	/* what each accepts: what shmt_layout_compute() does */
	static const struct { int c; struct num_spec spec; } nums[] = {
		{ 'C', { "--capacity", SHMTRACE_CAPACITY_MIN, SHMTRACE_CAPACITY_MAX,
			 PARSE_SUFFIX | PARSE_POW2, NULL } },
		{ 's', { "--strings", 1, SHMTRACE_STRINGS_MAX, PARSE_SUFFIX, NULL } },
		{ 'B', { "--string-bytes", SHMT_MIN_STRING_BYTES, SHMT_MAX_STRING_BYTES,
			 PARSE_SUFFIX, NULL } },
		{ 'T', { "--threads", 1, SHMTRACE_THREADS_MAX, PARSE_SUFFIX, NULL } },
	};
	uint64_t v;

	if (c == 'G') {
		cfg->perm = 0660;
		return 1;
	}
	if (c == 'M') {
		if (!strcmp(arg, "discard") || !strcmp(arg, "overwrite")) {
			cfg->mode = arg[0] == 'd' ? SHMTRACE_MODE_DISCARD : SHMTRACE_MODE_OVERWRITE;
			return 1;
		}
		snprintf(err, errlen, "--mode '%s': need discard or overwrite", arg);
		return -EINVAL;
	}
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (nums[i].c != c)
			continue;
		if (parse_num(arg, &nums[i].spec, &v, err, errlen) < 0)
			return -EINVAL;
		*(c == 'C' ? &cfg->capacity : c == 's' ? &cfg->max_strings :
		  c == 'B' ? &cfg->string_bytes : &cfg->max_threads) = (uint32_t)v;
		return 1;
	}
	return 0;
}

/* After the options: text space grows with the table, 64 bytes a string
 * as the defaults, unless given. */
static inline void shmt_ring_cfg_finish(struct shmtrace_ring_config *cfg)
{
	if (cfg->max_strings && !cfg->string_bytes && cfg->max_strings > 4096)
		cfg->string_bytes = cfg->max_strings * 64;
}

/* Whether any of the options was given. */
static inline bool shmt_ring_cfg_given(const struct shmtrace_ring_config *cfg)
{
	return cfg->capacity || cfg->mode || cfg->perm || cfg->max_strings || cfg->string_bytes ||
	       cfg->max_threads;
}

#endif
