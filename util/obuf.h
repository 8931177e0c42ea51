/* SPDX-License-Identifier: MIT */
/*
 * obuf.h - a growing output buffer in memory, with JSON strings (escaped
 * as json_writer.h escapes them) and decimal integers (dec.h): what a
 * writer that must hold its text before sending it builds it in (the OTLP
 * export's spans and requests). Out of memory is sticky (oom), so that a
 * writer checks once, at the end.
 */
#ifndef SHMTRACE_OBUF_H
#define SHMTRACE_OBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct obuf {
	char *p;
	size_t len, cap;
	bool oom;
};

/* Makes room for n more bytes; false when out of memory (b->oom set). */
bool ob_reserve(struct obuf *b, size_t n);
/* Frees the buffer; b is then empty, as zeroed. */
void ob_free(struct obuf *b);

static inline void ob_raw(struct obuf *b, const char *s, size_t n)
{
	if (!ob_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static inline void ob_puts(struct obuf *b, const char *s)
{
	ob_raw(b, s, strlen(s));
}

/* "pre" then s[0..n) as one quoted JSON string (json_writer's escaping,
 * invalid UTF-8 replaced; pre needs none). */
void ob_str_pre(struct obuf *b, const char *pre, const char *s, size_t n);
/* s[0..n) as a quoted JSON string. */
void ob_str(struct obuf *b, const char *s, size_t n);
/* v in decimal, with a '-' in front if neg (v is then the int64's bits). */
void ob_int(struct obuf *b, uint64_t v, bool neg);

#endif
