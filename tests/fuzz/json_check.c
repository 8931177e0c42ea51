/* SPDX-License-Identifier: MIT */
/*
 * json_check.c - a small strict RFC 8259 JSON validator for the fuzz
 * harnesses (not a harness itself). json_check(buf, len) returns NULL if
 * buf holds exactly one JSON value (with optional whitespace around it),
 * else a static string saying what is wrong; *at gets the byte offset.
 * Strict: strings must be valid UTF-8 (no overlongs, no surrogates, nothing
 * past U+10FFFF), control characters must be escaped, \u escapes need four
 * hex digits and surrogate escapes must pair; numbers follow the grammar
 * exactly; nesting is bounded.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "json_check.h"

#define MAX_DEPTH 512

struct jc {
	const unsigned char *p;
	size_t n, i;
	const char *why;
};

static int fail(struct jc *c, const char *why)
{
	if (!c->why)
		c->why = why;
	return -1;
}

static void ws(struct jc *c)
{
	while (c->i < c->n && (c->p[c->i] == ' ' || c->p[c->i] == '\t' ||
			       c->p[c->i] == '\n' || c->p[c->i] == '\r'))
		c->i++;
}

static int hex4(struct jc *c, unsigned *v)
{
	*v = 0;
	if (c->n - c->i < 4)
		return fail(c, "short \\u escape");
	for (int k = 0; k < 4; k++) {
		unsigned char h = c->p[c->i++];

		*v <<= 4;
		if (h >= '0' && h <= '9')
			*v |= h - '0';
		else if (h >= 'a' && h <= 'f')
			*v |= h - 'a' + 10;
		else if (h >= 'A' && h <= 'F')
			*v |= h - 'A' + 10;
		else
			return fail(c, "bad hex digit in \\u escape");
	}
	return 0;
}

/* One UTF-8 sequence at c->i (first byte >= 0x80). */
static int utf8(struct jc *c)
{
	unsigned char b = c->p[c->i];
	unsigned char lo = 0x80, hi = 0xbf;
	int need;

	if (b >= 0xc2 && b <= 0xdf) {
		need = 1;
	} else if (b >= 0xe0 && b <= 0xef) {
		need = 2;
		if (b == 0xe0)
			lo = 0xa0;
		if (b == 0xed)
			hi = 0x9f;
	} else if (b >= 0xf0 && b <= 0xf4) {
		need = 3;
		if (b == 0xf0)
			lo = 0x90;
		if (b == 0xf4)
			hi = 0x8f;
	} else {
		return fail(c, "invalid UTF-8 lead byte");
	}
	c->i++;
	for (int k = 0; k < need; k++, c->i++) {
		if (c->i >= c->n || c->p[c->i] < lo || c->p[c->i] > hi)
			return fail(c, "invalid UTF-8 continuation");
		lo = 0x80;
		hi = 0xbf;
	}
	return 0;
}

static int string(struct jc *c)
{
	c->i++;		/* '"' */
	for (;;) {
		unsigned char b;

		if (c->i >= c->n)
			return fail(c, "unterminated string");
		b = c->p[c->i];
		if (b == '"') {
			c->i++;
			return 0;
		}
		if (b < 0x20)
			return fail(c, "unescaped control character in string");
		if (b == '\\') {
			unsigned v, w;

			if (++c->i >= c->n)
				return fail(c, "string ends in a backslash");
			b = c->p[c->i++];
			if (strchr("\"\\/bfnrt", b) && b)
				continue;
			if (b != 'u')
				return fail(c, "invalid escape");
			if (hex4(c, &v) < 0)
				return -1;
			if (v >= 0xdc00 && v <= 0xdfff)
				return fail(c, "lone low surrogate escape");
			if (v >= 0xd800 && v <= 0xdbff) {
				if (c->n - c->i < 2 || c->p[c->i] != '\\' || c->p[c->i + 1] != 'u')
					return fail(c, "lone high surrogate escape");
				c->i += 2;
				if (hex4(c, &w) < 0)
					return -1;
				if (w < 0xdc00 || w > 0xdfff)
					return fail(c, "high surrogate not followed by a low one");
			}
			continue;
		}
		if (b >= 0x80) {
			if (utf8(c) < 0)
				return -1;
			continue;
		}
		c->i++;
	}
}

static int digits(struct jc *c)
{
	size_t s = c->i;

	while (c->i < c->n && c->p[c->i] >= '0' && c->p[c->i] <= '9')
		c->i++;
	return c->i > s ? 0 : fail(c, "digit expected in number");
}

static int number(struct jc *c)
{
	if (c->p[c->i] == '-')
		c->i++;
	if (c->i >= c->n)
		return fail(c, "number ends after '-'");
	if (c->p[c->i] == '0') {
		c->i++;
	} else if (c->p[c->i] >= '1' && c->p[c->i] <= '9') {
		digits(c);
	} else {
		return fail(c, "bad number");
	}
	if (c->i < c->n && c->p[c->i] == '.') {
		c->i++;
		if (digits(c) < 0)
			return -1;
	}
	if (c->i < c->n && (c->p[c->i] == 'e' || c->p[c->i] == 'E')) {
		c->i++;
		if (c->i < c->n && (c->p[c->i] == '+' || c->p[c->i] == '-'))
			c->i++;
		if (digits(c) < 0)
			return -1;
	}
	return 0;
}

static int literal(struct jc *c, const char *w)
{
	size_t l = strlen(w);

	if (c->n - c->i < l || memcmp(c->p + c->i, w, l))
		return fail(c, "invalid literal");
	c->i += l;
	return 0;
}

static int value(struct jc *c, int depth)
{
	unsigned char b;

	if (depth > MAX_DEPTH)
		return fail(c, "nested too deeply");
	ws(c);
	if (c->i >= c->n)
		return fail(c, "value expected");
	b = c->p[c->i];
	switch (b) {
	case '"':
		return string(c);
	case 't':
		return literal(c, "true");
	case 'f':
		return literal(c, "false");
	case 'n':
		return literal(c, "null");
	case '[':
		c->i++;
		ws(c);
		if (c->i < c->n && c->p[c->i] == ']') {
			c->i++;
			return 0;
		}
		for (;;) {
			if (value(c, depth + 1) < 0)
				return -1;
			ws(c);
			if (c->i >= c->n)
				return fail(c, "unterminated array");
			if (c->p[c->i] == ']') {
				c->i++;
				return 0;
			}
			if (c->p[c->i++] != ',')
				return fail(c, "',' or ']' expected");
		}
	case '{':
		c->i++;
		ws(c);
		if (c->i < c->n && c->p[c->i] == '}') {
			c->i++;
			return 0;
		}
		for (;;) {
			ws(c);
			if (c->i >= c->n || c->p[c->i] != '"')
				return fail(c, "member name expected");
			if (string(c) < 0)
				return -1;
			ws(c);
			if (c->i >= c->n || c->p[c->i++] != ':')
				return fail(c, "':' expected");
			if (value(c, depth + 1) < 0)
				return -1;
			ws(c);
			if (c->i >= c->n)
				return fail(c, "unterminated object");
			if (c->p[c->i] == '}') {
				c->i++;
				return 0;
			}
			if (c->p[c->i++] != ',')
				return fail(c, "',' or '}' expected");
		}
	default:
		if (b == '-' || (b >= '0' && b <= '9'))
			return number(c);
		return fail(c, "unexpected character");
	}
}

const char *json_check(const char *buf, size_t len, size_t *at)
{
	struct jc c = { .p = (const unsigned char *)buf, .n = len };

	if (value(&c, 0) == 0) {
		ws(&c);
		if (c.i != c.n)
			fail(&c, "trailing bytes after the value");
	}
	if (at)
		*at = c.i;
	return c.why;
}

/* Self-test of the validator on fixed cases; returns 0 or aborts-worthy -1. */
int json_check_selftest(void)
{
	static const char *good[] = {
		"{}", "[]", "0", "-0.5e+10", "\"a\\u00e9\\ud83d\\ude00\"", "\"\xc3\xa9\xf0\x9f\x98\x80\"",
		"{\"a\":[1,2,{\"b\":null}],\"c\":true}", " [ false ] ",
	};
	static const char *bad[] = {
		"", "{", "[1,]", "01", "1.", "-", "+1", "\"\x01\"", "\"\\x\"", "\"\\ud800\"",
		"\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xff\"", "{\"a\" 1}",
		"[1] [2]", "\"\\u12\"", "NaN", "{\"a\":1,}",
	};

	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		if (json_check(good[i], strlen(good[i]), NULL))
			return -1;
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		if (!json_check(bad[i], strlen(bad[i]), NULL))
			return -1;
	return 0;
}
