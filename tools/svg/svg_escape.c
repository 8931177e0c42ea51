/* SPDX-License-Identifier: MIT */
/*
 * svg_escape.c - text for `shmtrace svg`: untrusted names as XML character
 * data, cut by characters to fit their box.
 */
#include <string.h>

#include "svg.h"
#include "utf8.h"

size_t svg_escape(char *out, size_t outlen, const char *s, size_t len, size_t maxchars)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t total = 0, keep, o = 0, k = 0;

	if (!outlen)
		return 0;
	out[0] = 0;
	/* count first: a cut text ends with an ellipsis in place of its last char */
	for (size_t i = 0; i < len && total <= maxchars;) {
		int32_t cp;

		i += utf8_next(u + i, len - i, &cp);
		total++;
	}
	if (!maxchars)
		return 0;
	keep = total > maxchars ? maxchars - 1 : total;
	for (size_t i = 0; i < len && k < keep; k++) {
		char tmp[8];
		const char *rep = tmp;
		size_t start = i, rl;
		int32_t cp;

		i += utf8_next(u + i, len - i, &cp);
		if (cp == '&')
			rep = "&amp;";
		else if (cp == '<')
			rep = "&lt;";
		else if (cp == '>')
			rep = "&gt;";
		else if (cp == '"')
			rep = "&quot;";
		else if (cp == '\'')
			rep = "&apos;";
		else if (cp < 0x20 || cp == 0x7f || cp == 0xfffe || cp == 0xffff)
			/* not allowed in XML 1.0, or not text */
			rep = UTF8_REPLACEMENT;
		else {
			memcpy(tmp, s + start, i - start);
			tmp[i - start] = 0;
		}
		rl = strlen(rep);
		if (o + rl + 4 > outlen)	/* room for an ellipsis and the NUL */
			break;
		memcpy(out + o, rep, rl);
		o += rl;
	}
	if (k < total) {
		memcpy(out + o, "\xe2\x80\xa6", 3);
		o += 3;
		k++;
	}
	out[o] = 0;
	return k;
}
