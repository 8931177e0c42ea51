/* SPDX-License-Identifier: MIT */
/*
 * term.c - untrusted bytes made safe for a terminal (term.h).
 */
#include <string.h>

#include "term.h"
#include "utf8.h"

/* Appends s[0..n) to out whole or not at all (a cut escape could still
 * read as something), counting what was needed in *used. */
static void put(char *out, size_t outlen, size_t *used, size_t *kept, const char *s, size_t n)
{
	if (*kept == *used && *used + n < outlen) {
		memcpy(out + *used, s, n);
		*kept += n;
	}
	*used += n;
}

static void put_hex(char *out, size_t outlen, size_t *used, size_t *kept, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";
	char e[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };

	put(out, outlen, used, kept, e, sizeof(e));
}

size_t term_escape(const char *str, size_t n, char *out, size_t outlen)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, used = 0, kept = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t len;
		int32_t cp;

		if (c == '\\') {
			put(out, outlen, &used, &kept, "\\\\", 2);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			put_hex(out, outlen, &used, &kept, c);
			i++;
		} else if (c < 0x80) {
			put(out, outlen, &used, &kept, (const char *)&s[i], 1);
			i++;
		} else {
			len = utf8_next(s + i, n - i, &cp);
			if (cp >= 0x80 && cp <= 0x9f)
				cp = -1;	/* C1: escaped byte by byte */
			if (cp >= 0)
				put(out, outlen, &used, &kept, (const char *)&s[i], len);
			else
				for (size_t k = 0; k < len; k++)
					put_hex(out, outlen, &used, &kept, s[i + k]);
			i += len;
		}
	}
	if (outlen)
		out[kept] = 0;
	return used;
}

const char *term_str(const char *s, char *buf, size_t len)
{
	term_escape(s, strlen(s), buf, len);
	return buf;
}
