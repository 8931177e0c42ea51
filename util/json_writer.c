/* SPDX-License-Identifier: MIT */
/*
 * json_writer.c - buffered JSON output for the exporter: every string goes
 * through one escaper and every time through one formatter.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "dec.h"
#include "json_writer.h"
#include "utf8.h"

void jw_init(struct jw *w, FILE *f)
{
	w->f = f;
	w->err = 0;
	w->len = 0;
}

static void jw_drain(struct jw *w)
{
	if (w->len && !w->err) {
		errno = 0;
		if (fwrite(w->buf, 1, w->len, w->f) != w->len || ferror(w->f))
			w->err = errno ? -errno : -EIO;
	}
	w->len = 0;
}

void jw_raw_slow(struct jw *w, const char *s, size_t n)
{
	while (n) {
		size_t room = sizeof(w->buf) - w->len;
		size_t k = n < room ? n : room;

		memcpy(w->buf + w->len, s, k);
		w->len += k;
		s += k;
		n -= k;
		if (w->len == sizeof(w->buf))
			jw_drain(w);
	}
}

static inline void jw_ch(struct jw *w, char c)
{
	if (w->len == sizeof(w->buf))
		jw_drain(w);
	w->buf[w->len++] = c;
}

/* Escapes into a sink: either the writer or a bounded buffer. */
struct esc_sink {
	struct jw *w;
	char *out;
	size_t outlen, used;
};

static void sink_put(struct esc_sink *k, const char *s, size_t n)
{
	if (k->w) {
		if (n == 1)
			jw_ch(k->w, *s);
		else
			jw_raw(k->w, s, n);
	} else {
		for (size_t i = 0; i < n; i++, k->used++)
			if (k->used + 1 < k->outlen)
				k->out[k->used] = s[i];
		return;
	}
	k->used += n;
}

static void escape_to(struct esc_sink *k, const char *str, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t len;
		int32_t cp;

		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };

			sink_put(k, e, 2);
			i++;
		} else if (c < 0x20) {
			char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

			sink_put(k, e, 6);
			i++;
		} else if (c < 0x80) {
			sink_put(k, (const char *)&s[i], 1);
			i++;
		} else {
			len = utf8_next(s + i, n - i, &cp);
			if (cp >= 0)
				sink_put(k, (const char *)&s[i], len);
			else
				sink_put(k, UTF8_REPLACEMENT, 3);
			i += len;
		}
	}
}

size_t json_escape(const char *s, size_t n, char *out, size_t outlen)
{
	struct esc_sink k = { .out = out, .outlen = outlen };

	escape_to(&k, s, n);
	if (outlen)
		out[k.used < outlen ? k.used : outlen - 1] = 0;
	return k.used;
}

void jw_str(struct jw *w, const char *s, size_t n)
{
	struct esc_sink k = { .w = w };

	jw_ch(w, '"');
	escape_to(&k, s, n);
	jw_ch(w, '"');
}

void jw_cstr(struct jw *w, const char *s)
{
	jw_str(w, s, strlen(s));
}

void jw_u64(struct jw *w, uint64_t v)
{
	char b[DEC_U64_MAX];

	jw_raw(w, b, (size_t)(dec_u64(b, v) - b));
}

void jw_i64(struct jw *w, int64_t v)
{
	char b[DEC_U64_MAX + 1], *p = b;

	if (v < 0)
		*p++ = '-';
	p = dec_u64(p, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
	jw_raw(w, b, (size_t)(p - b));
}

size_t jw_fmt_us(char *buf, uint64_t ns)
{
	size_t n = (size_t)(dec_u64(buf, ns / 1000) - buf);
	uint64_t frac = ns % 1000;

	/* "%llu.%03llu": microseconds with the nanoseconds as 3 decimals */
	buf[n++] = '.';
	buf[n++] = (char)('0' + frac / 100);
	memcpy(buf + n, dec_pairs + 2 * (frac % 100), 2);
	n += 2;
	buf[n] = 0;
	return n;
}

void jw_us(struct jw *w, uint64_t ns)
{
	char b[JW_US_MAX];

	jw_raw(w, b, jw_fmt_us(b, ns));
}

int jw_flush(struct jw *w)
{
	jw_drain(w);
	if (!w->err && fflush(w->f) != 0)
		w->err = errno ? -errno : -EIO;
	return w->err;
}
