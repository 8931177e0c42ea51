/* SPDX-License-Identifier: MIT */
/*
 * obuf.c - a growing output buffer (obuf.h).
 */
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "dec.h"
#include "json_writer.h"
#include "obuf.h"

bool ob_reserve(struct obuf *b, size_t n)
{
	if (b->oom)
		return false;
	if (array_reserve(&b->p, &b->cap, b->len + n, 1, 4096) < 0) {
		b->oom = true;
		return false;
	}
	return true;
}

void ob_free(struct obuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void ob_str_pre(struct obuf *b, const char *pre, const char *s, size_t n)
{
	size_t need, plen = strlen(pre);

	if (!ob_reserve(b, plen + n + 3))
		return;
	b->p[b->len++] = '"';
	memcpy(b->p + b->len, pre, plen);
	b->len += plen;
	need = json_escape(s, n, b->p + b->len, b->cap - b->len);
	if (need >= b->cap - b->len) {
		if (!ob_reserve(b, need + 2))
			return;
		json_escape(s, n, b->p + b->len, b->cap - b->len);
	}
	b->len += need;
	b->p[b->len++] = '"';
}

void ob_str(struct obuf *b, const char *s, size_t n)
{
	ob_str_pre(b, "", s, n);
}

/* in unsigned arithmetic: INT64_MIN has no positive int64 */
void ob_int(struct obuf *b, uint64_t v, bool neg)
{
	if (!ob_reserve(b, DEC_U64_MAX + 1))
		return;
	if (neg)
		b->p[b->len++] = '-';
	b->len = (size_t)(dec_u64(b->p + b->len, neg ? 0 - v : v) - b->p);
}
