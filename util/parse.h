/* SPDX-License-Identifier: MIT */
/*
 * parse.h - numbers given on a command line: the one checked parser of
 * every numeric option (the collector's, the shmtrace command's), so that
 * no number wraps, loses its high bits or turns negative on the way in.
 */
#ifndef SHMTRACE_PARSE_H
#define SHMTRACE_PARSE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Parses a size: a decimal integer with an optional binary suffix, k or K
 * (2^10), m or M (2^20), g or G (2^30), and nothing after it: "4096", "64k",
 * "4M", "1G". It starts with a digit (no blank, no sign). Returns 0,
 * -EINVAL (not such a number) or -ERANGE (one beyond 2^64 - 1, suffix
 * included).
 */
int parse_size(const char *s, uint64_t *v);

/* What parse_num() accepts. */
#define PARSE_SUFFIX	0x1u	/* the suffixes of parse_size() */
#define PARSE_POW2	0x2u	/* powers of two only */

struct num_spec {
	const char *opt;	/* the option, named in the error: "--capacity" */
	uint64_t lo, hi;	/* the range, both included */
	unsigned flags;		/* PARSE_* */
	const char *unit;	/* said after the range ("ms"), or NULL */
};

/*
 * Parses s, an argument of option spec->opt, into *v. Returns 0, or
 * -EINVAL with a one-line usage error in err that names the option, the
 * argument and what is accepted: "--capacity '1': need a power of two
 * from 2 to 16M"; without an upper bound (hi 2^64 - 1), what is wrong:
 * "need at least 1M", "too large (at most 2^64 - 1)" or "not a whole
 * number".
 */
int parse_num(const char *s, const struct num_spec *spec, uint64_t *v, char *err,
	      size_t errlen);

/*
 * Parses a signed decimal integer ("-3000", "+5", "42"; no blank, nothing
 * after it) within [lo, hi] into *v. Returns 0, -EINVAL (not such a
 * number) or -ERANGE (outside [lo, hi], or beyond 64 bits).
 */
int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *v);

/* The longest duration parse_duration() takes: ten years (365-day), far
 * beyond any window, wait or trace, and so far below 2^64 ns that a
 * clock's reading plus it never wraps. */
#define PARSE_DURATION_MAX_NS (10ull * 365 * 86400 * 1000000000)

/* Parses a duration: a decimal number with a unit s, ms, us or ns (no unit:
 * seconds), e.g. "1.5s", "200ms", "300us", into ns. Returns 0 or -EINVAL
 * (not such a duration, or one over PARSE_DURATION_MAX_NS). */
int parse_duration(const char *s, uint64_t *ns);

#endif
