/* SPDX-License-Identifier: MIT */
/*
 * parse.c - numbers given on a command line (parse.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int parse_size(const char *s, uint64_t *v)
{
	unsigned shift = 0;
	unsigned long long n;
	bool big = false;
	char *end;

	/* strtoull would take "-1" as 2^64 - 1, and skip blanks and a '+' */
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno == ERANGE)
		big = true;
	else if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end)
		return -EINVAL;
	if (big || (shift && n > UINT64_MAX >> shift))
		return -ERANGE;
	*v = (uint64_t)n << shift;
	return 0;
}

/* n as the shortest of "1024", "64k", "16M", "1G" that is exact. */
static void put_size(char *buf, size_t len, uint64_t n, unsigned flags)
{
	static const char suffix[] = "kMG";
	int i = -1;

	while ((flags & PARSE_SUFFIX) && i < 2 && n >= 1024 && n % 1024 == 0) {
		n /= 1024;
		i++;
	}
	if (i < 0)
		snprintf(buf, len, "%llu", (unsigned long long)n);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)n, suffix[i]);
}

/* err: "OPT 'ARG': need [a power of two ]from LO to HI[ UNIT]"; without
 * an upper bound (HI 2^64 - 1), what is wrong with ARG: below LO ("need
 * at least LO"), above 2^64 - 1 (ret -ERANGE: "too large"), or no
 * number at all. */
static int num_error(const char *s, const struct num_spec *sp, int ret, char *err,
		     size_t errlen)
{
	char lo[32], hi[32];
	const char *unit = sp->unit ? sp->unit : "";
	const char *sep = sp->unit ? " " : "";
	const char *pow2 = sp->flags & PARSE_POW2 ? "a power of two, " : "";

	put_size(lo, sizeof(lo), sp->lo, sp->flags);
	put_size(hi, sizeof(hi), sp->hi, sp->flags);
	if (sp->hi != UINT64_MAX)
		snprintf(err, errlen, "%s '%.64s': need %s%s to %s%s%s", sp->opt, s,
			 sp->flags & PARSE_POW2 ? "a power of two from " : "", lo, hi, sep, unit);
	else if (ret == -ERANGE)
		snprintf(err, errlen, "%s '%.64s': too large (at most 2^64 - 1%s%s)", sp->opt, s,
			 sep, unit);
	else if (ret < 0)
		snprintf(err, errlen, "%s '%.64s': not a whole number (digits%s); need %sat least "
			 "%s%s%s", sp->opt, s, sp->flags & PARSE_SUFFIX ? ", then k, M or G" : "",
			 pow2, lo, sep, unit);
	else
		snprintf(err, errlen, "%s '%.64s': need %sat least %s%s%s", sp->opt, s, pow2, lo,
			 sep, unit);
	return -EINVAL;
}

int parse_num(const char *s, const struct num_spec *sp, uint64_t *v, char *err, size_t errlen)
{
	uint64_t n;
	int ret = parse_size(s, &n);

	if (!ret && !(sp->flags & PARSE_SUFFIX) && strpbrk(s, "kKmMgG"))
		ret = -EINVAL;
	if (ret < 0)
		return num_error(s, sp, ret, err, errlen);
	if (n < sp->lo || n > sp->hi || ((sp->flags & PARSE_POW2) && (n & (n - 1))))
		return num_error(s, sp, 0, err, errlen);
	*v = n;
	return 0;
}

int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *v)
{
	const char *d = s + (*s == '-' || *s == '+');
	long long n;
	char *end;

	if (*d < '0' || *d > '9')
		return -EINVAL;
	errno = 0;
	n = strtoll(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || n < lo || n > hi)
		return -ERANGE;
	if (errno)
		return -EINVAL;
	*v = n;
	return 0;
}

int parse_duration(const char *s, uint64_t *ns)
{
	static const struct {
		const char *unit;
		uint64_t mult;
	} units[] = { { "", 1000000000ull }, { "s", 1000000000ull }, { "ms", 1000000ull },
		      { "us", 1000ull }, { "ns", 1ull } };
	uint64_t ip = 0, frac = 0, fdiv = 1;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (ip > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		ip = ip * 10 + (uint64_t)(*p - '0');
	}
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (fdiv < 1000000000ull) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				fdiv *= 10;
			}
		}
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(p, units[i].unit))
			continue;
		uint64_t part;

		if (ip > PARSE_DURATION_MAX_NS / units[i].mult)
			return -EINVAL;
		/* the fraction too must not carry it past the bound */
		part = frac * units[i].mult / fdiv;
		if (ip * units[i].mult > PARSE_DURATION_MAX_NS - part)
			return -EINVAL;
		*ns = ip * units[i].mult + part;
		return 0;
	}
	return -EINVAL;
}
