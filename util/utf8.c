/* SPDX-License-Identifier: MIT */
/*
 * utf8.c - decoding one UTF-8 character of untrusted text, with the
 * maximal-subpart rule for what is not UTF-8.
 */
#include "utf8.h"

size_t utf8_next(const unsigned char *s, size_t n, int32_t *cp)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t need, i;
	int32_t v;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	*cp = -1;
	if (c >= 0xc2 && c <= 0xdf) {
		need = 2;
		v = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		need = 3;
		v = c & 0x0f;
		if (c == 0xe0)
			lo = 0xa0;	/* overlong */
		else if (c == 0xed)
			hi = 0x9f;	/* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 4;
		v = c & 0x07;
		if (c == 0xf0)
			lo = 0x90;	/* overlong */
		else if (c == 0xf4)
			hi = 0x8f;	/* past U+10FFFF */
	} else {
		return 1;		/* 0x80..0xc1, 0xf5..0xff */
	}
	for (i = 1; i < need; i++) {
		if (i >= n || s[i] < lo || s[i] > hi)
			return i;
		v = v << 6 | (s[i] & 0x3f);
		lo = 0x80;
		hi = 0xbf;
	}
	*cp = v;
	return need;
}
