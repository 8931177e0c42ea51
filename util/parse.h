/* SPDX-License-Identifier: MIT */
/*
 * parse.h - numbers given on a command line.
 */
#ifndef SHMTRACE_PARSE_H
#define SHMTRACE_PARSE_H

#include <stdint.h>

/*
 * Parses a size: a decimal integer with an optional binary suffix, k or K
 * (2^10), m or M (2^20), g or G (2^30), and nothing after it: "4096", "64k",
 * "4M", "1G" (leading blanks and a '+' are let through, as strtoull()
 * does; a '-' is not). Returns 0, or -EINVAL (not such a number, or one
 * beyond 2^64 - 1). Each option checks its own bounds.
 */
int parse_size(const char *s, uint64_t *v);

#endif
