/* SPDX-License-Identifier: MIT */
/*
 * parse.c - numbers given on a command line (parse.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int parse_size(const char *s, uint64_t *v)
{
	unsigned shift = 0;
	unsigned long long n;
	char *end;

	/* strtoull would take "-1" as 2^64 - 1 */
	if (strchr(s, '-'))
		return -EINVAL;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end || (shift && n > UINT64_MAX >> shift))
		return -EINVAL;
	*v = (uint64_t)n << shift;
	return 0;
}
