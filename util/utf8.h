/* SPDX-License-Identifier: MIT */
/*
 * utf8.h - the one UTF-8 decoder: what the JSON writer and the SVG escaper
 * take from untrusted strings, with one rule for invalid bytes.
 */
#ifndef SHMTRACE_UTF8_H
#define SHMTRACE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * Decodes the character at s[0..n), n >= 1. Returns its length (1..4) and
 * sets *cp to its code point; for invalid, overlong, surrogate or cut-short
 * input sets *cp to -1 and returns the length of the maximal invalid
 * subpart, which the caller replaces by one U+FFFD (the Unicode "best
 * practice" for substitution).
 */
size_t utf8_next(const unsigned char *s, size_t n, int32_t *cp);

#define UTF8_REPLACEMENT	"\xef\xbf\xbd"	/* U+FFFD */

#endif /* SHMTRACE_UTF8_H */
