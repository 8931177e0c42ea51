/* SPDX-License-Identifier: MIT */
/*
 * fuzz_json.c - libFuzzer harness for the exporter's JSON writer
 * (util/json_writer.c). Built and run by tests/fuzz/run.sh.
 *
 * The input is split into three strings (the first two bytes choose the
 * cut points) and eight bytes of numbers. The strings go through
 * json_escape() with buffers of several sizes and through a jw writer that
 * builds complete trace events (name, cat, args) on an open_memstream,
 * 1-4 of them, after (byte 2 >= 0x80) enough whitespace that the writer's
 * 64 KiB buffer drains somewhere inside the first event. Everything written
 * must be strict RFC 8259 JSON (json_check.c); json_escape()'s return value,
 * its cut prefixes and its NUL must agree with the full escape; and an ASCII
 * string must come back byte for byte when its escape is decoded.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_check.h"
#include "json_writer.h"

static void die(const char *what, const char *buf, size_t len)
{
	size_t at = 0;
	const char *why = json_check(buf, len, &at);

	fprintf(stderr, "fuzz_json: %s: %s at byte %zu of %zu\n", what, why ? why : "-", at, len);
	abort();
}

static void check_json(const char *what, const char *buf, size_t len)
{
	if (json_check(buf, len, NULL))
		die(what, buf, len);
}

static int hexv(char h)
{
	return h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 :
	       h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
}

/* Decodes an escaped ASCII-only string; returns its length or -1. */
static long unescape_ascii(const char *e, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (e[i] != '\\') {
			out[o++] = e[i];
			continue;
		}
		if (++i >= n)
			return -1;
		switch (e[i]) {
		case '"': case '\\': case '/': out[o++] = e[i]; break;
		case 'b': out[o++] = '\b'; break;
		case 'f': out[o++] = '\f'; break;
		case 'n': out[o++] = '\n'; break;
		case 'r': out[o++] = '\r'; break;
		case 't': out[o++] = '\t'; break;
		case 'u': {
			int v = 0;

			if (n - i < 5)
				return -1;
			for (int k = 1; k <= 4; k++) {
				int h = hexv(e[i + k]);

				if (h < 0)
					return -1;
				v = v << 4 | h;
			}
			if (v > 0x7f)
				return -1;
			out[o++] = (char)v;
			i += 4;
			break;
		}
		default:
			return -1;
		}
	}
	return (long)o;
}

static void check_escape(const char *s, size_t n)
{
	size_t need = json_escape(s, n, NULL, 0);
	char *full = malloc(need + 3), *dec;
	char small[16];
	bool ascii = true;

	if (!full)
		abort();
	/* the exact size, plus the quotes around it */
	full[0] = '"';
	if (json_escape(s, n, full + 1, need + 1) != need || full[need + 1] != 0)
		abort();
	if (strlen(full + 1) != need)	/* no NUL may come out of the escaper */
		abort();
	full[need + 1] = '"';
	check_json("json_escape output", full, need + 2);
	/* cut outputs are NUL-terminated prefixes of the full one */
	for (size_t len = 1; len <= sizeof(small); len += 5) {
		size_t got = json_escape(s, n, small, len);
		size_t cut = need < len - 1 ? need : len - 1;

		if (got != need || small[cut] != 0 || memcmp(small, full + 1, cut))
			abort();
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] >= 0x80)
			ascii = false;
	if (ascii) {
		long m;

		dec = malloc(need + 1);
		if (!dec)
			abort();
		m = unescape_ascii(full + 1, need, dec);
		if (m != (long)n || memcmp(dec, s, n))
			abort();	/* the escape does not round-trip */
		free(dec);
	} else if (need < n) {
		abort();	/* escaping never shortens: U+FFFD replaces at most 3 bytes by 3 */
	}
	free(full);
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static void write_events(const char *a, size_t na, const char *b, size_t nb, const char *c,
			 size_t nc, uint64_t num, unsigned count, size_t pad)
{
	char *mem = NULL;
	size_t memlen = 0;
	FILE *f = open_memstream(&mem, &memlen);
	struct jw *w = malloc(sizeof(*w));
	char us[JW_US_MAX];

	if (!f || !w)
		abort();
	if (jw_fmt_us(us, num) >= JW_US_MAX)
		abort();
	jw_init(w, f);
	jw_puts(w, "{\"traceEvents\":[");
	/* whitespace, so that the writer's buffer fills inside the events */
	while (pad) {
		static const char sp[256] = { [0 ... 255] = ' ' };
		size_t k = pad < sizeof(sp) ? pad : sizeof(sp);

		jw_raw(w, sp, k);
		pad -= k;
	}
	for (unsigned i = 0; i < count; i++) {
		if (i)
			jw_raw(w, ",\n", 2);
		jw_raw(w, "{\"name\":", 8);
		jw_str(w, a, na);
		jw_puts(w, ",\"cat\":");
		jw_str(w, b, nb);
		jw_puts(w, ",\"ph\":\"X\",\"ts\":");
		jw_us(w, num + i);
		jw_puts(w, ",\"dur\":");
		jw_us(w, ~num);
		jw_puts(w, ",\"pid\":");
		jw_u64(w, (uint32_t)num);
		jw_puts(w, ",\"tid\":");
		jw_u64(w, num >> 32);
		jw_puts(w, ",\"args\":{");
		jw_str(w, c, nc);		/* a key */
		jw_raw(w, ":", 1);
		jw_str(w, c, nc);
		jw_puts(w, ",\"value\":");
		jw_i64(w, (int64_t)num);
		jw_puts(w, ",\"min\":");
		jw_i64(w, INT64_MIN);
		jw_puts(w, ",\"max\":");
		jw_u64(w, UINT64_MAX);
		jw_puts(w, ",\"thread\":");
		jw_cstr(w, "main \"thread\"\\\x01");
		jw_raw(w, "}}", 2);
	}
	jw_puts(w, "],\"displayTimeUnit\":\"ns\"}\n");
	if (jw_flush(w) != 0)
		abort();
	if (fclose(f) != 0)
		abort();
	check_json("jw event output", mem, memlen);
	free(mem);
	free(w);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (json_check_selftest() < 0) {
		fprintf(stderr, "fuzz_json: json_check self-test failed\n");
		abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t num = 0;
	size_t na, nb, rest;
	const char *s;
	unsigned count;

	if (size < 3)
		return 0;
	count = 1 + data[2] % 4;
	if (size >= 11) {
		num = rd64(data + 3);
		s = (const char *)data + 11;
		rest = size - 11;
	} else {
		s = (const char *)data + 3;
		rest = size - 3;
	}
	na = rest ? data[0] % (rest + 1) : 0;
	nb = rest - na ? data[1] % (rest - na + 1) : 0;
	check_escape(s, rest);
	check_escape(s, na);
	check_escape(s + na, nb);
	check_escape(s + na + nb, rest - na - nb);
	/* byte 2's top bit: pad so that the 64 KiB buffer drains 0..508 bytes
	 * into the first event, inside an escape or a UTF-8 sequence maybe */
	write_events(s, na, s + na, nb, s + na + nb, rest - na - nb, num, count,
		     data[2] & 0x80 ? JW_BUF_SIZE - 16 - 4u * (data[2] & 0x7f) % 512 : 0);
	return 0;
}
