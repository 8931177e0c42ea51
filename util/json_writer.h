/* SPDX-License-Identifier: MIT */
/*
 * json_writer.h - a buffered JSON text writer: escaping with UTF-8
 * repair, integers, and the one timestamp format every event uses.
 */
#ifndef SHMTRACE_JSON_WRITER_H
#define SHMTRACE_JSON_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define JW_BUF_SIZE	(64u * 1024)

struct jw {
	FILE *f;
	int err;		/* first write error, as -errno; 0 while fine */
	size_t len;
	char buf[JW_BUF_SIZE];
};

/* Longest output of jw_fmt_us(): 20 digits, '.', 3 digits, NUL. */
#define JW_US_MAX	25

void jw_init(struct jw *w, FILE *f);
void jw_raw_slow(struct jw *w, const char *s, size_t n);

/* Appends n bytes. Inline: most pieces of an event are short literals,
 * and the call plus a generic memcpy was a fifth of an export's time. */
static inline void jw_raw(struct jw *w, const char *s, size_t n)
{
	if (__builtin_expect(n <= sizeof(w->buf) - w->len, 1)) {
		memcpy(w->buf + w->len, s, n);
		w->len += n;
		return;
	}
	jw_raw_slow(w, s, n);
}

static inline void jw_puts(struct jw *w, const char *s)
{
	jw_raw(w, s, strlen(s));
}
/* Writes s[0..n) as a quoted JSON string: '"', '\\' and control characters
 * escaped, invalid UTF-8 replaced by U+FFFD. */
void jw_str(struct jw *w, const char *s, size_t n);
void jw_cstr(struct jw *w, const char *s);
void jw_u64(struct jw *w, uint64_t v);
void jw_i64(struct jw *w, int64_t v);
/* Formats ns as microseconds with three decimals ("%llu.%03llu"): the only
 * way a timestamp or duration is ever written, so one instant referred to
 * by two events is byte-identical. Returns the length. */
size_t jw_fmt_us(char *buf, uint64_t ns);
void jw_us(struct jw *w, uint64_t ns);
/* Flushes the buffer to the FILE. Returns 0 or the first error (-errno). */
int jw_flush(struct jw *w);

/* Escapes s[0..n) into out (no quotes); returns the bytes needed, which
 * may exceed outlen (then out holds a cut prefix, NUL-terminated). */
size_t json_escape(const char *s, size_t n, char *out, size_t outlen);

#endif
