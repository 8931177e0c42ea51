/* SPDX-License-Identifier: MIT */
/*
 * test_json.c - the exporter's JSON writer: escaping, UTF-8 repair, the
 * timestamp format, and write errors.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <unistd.h>
#include <cmocka.h>

#include "json_writer.h"

/* Writes s[0..n) with jw_str into memory and returns the text (static). */
static const char *quoted(const char *s, size_t n)
{
	static char out[4096];
	static struct jw w;
	char *mem = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&mem, &len);

	assert_non_null(f);
	jw_init(&w, f);
	jw_str(&w, s, n);
	assert_int_equal(jw_flush(&w), 0);
	fclose(f);
	assert_true(len < sizeof(out));
	memcpy(out, mem, len);
	out[len] = 0;
	free(mem);
	return out;
}

#define Q(lit) quoted(lit, sizeof(lit) - 1)
#define FFFD "\xef\xbf\xbd"

static void test_plain_and_escapes(void **state)
{
	(void)state;
	assert_string_equal(Q(""), "\"\"");
	assert_string_equal(Q("rpc.handle"), "\"rpc.handle\"");
	assert_string_equal(Q("a\"b"), "\"a\\\"b\"");
	assert_string_equal(Q("a\\b"), "\"a\\\\b\"");
	assert_string_equal(Q("\n\t\r"), "\"\\u000a\\u0009\\u000d\"");
	assert_string_equal(Q("\x01\x1f"), "\"\\u0001\\u001f\"");
	/* an embedded NUL is data, not an end */
	assert_string_equal(Q("a\0b"), "\"a\\u0000b\"");
	assert_string_equal(Q("/\x7f"), "\"/\x7f\"");
}

static void test_valid_utf8_passes(void **state)
{
	(void)state;
	assert_string_equal(Q("\xc3\xa9"), "\"\xc3\xa9\"");			/* é */
	assert_string_equal(Q("\xe2\x82\xac"), "\"\xe2\x82\xac\"");		/* € */
	assert_string_equal(Q("\xf0\x9f\x98\x80"), "\"\xf0\x9f\x98\x80\"");	/* emoji */
	assert_string_equal(Q("\xed\x9f\xbf"), "\"\xed\x9f\xbf\"");		/* U+D7FF */
	assert_string_equal(Q("\xf4\x8f\xbf\xbf"), "\"\xf4\x8f\xbf\xbf\"");	/* U+10FFFF */
}

static void test_invalid_utf8_replaced(void **state)
{
	(void)state;
	/* overlong encodings */
	assert_string_equal(Q("\xc0\xaf"), "\"" FFFD FFFD "\"");
	assert_string_equal(Q("\xc1\xbf"), "\"" FFFD FFFD "\"");
	assert_string_equal(Q("\xe0\x80\xaf"), "\"" FFFD FFFD FFFD "\"");
	assert_string_equal(Q("\xf0\x80\x80\xaf"), "\"" FFFD FFFD FFFD FFFD "\"");
	/* surrogates U+D800, U+DFFF */
	assert_string_equal(Q("\xed\xa0\x80"), "\"" FFFD FFFD FFFD "\"");
	assert_string_equal(Q("\xed\xbf\xbf"), "\"" FFFD FFFD FFFD "\"");
	/* past U+10FFFF, and bytes that never occur */
	assert_string_equal(Q("\xf4\x90\x80\x80"), "\"" FFFD FFFD FFFD FFFD "\"");
	assert_string_equal(Q("\xf5\xff"), "\"" FFFD FFFD "\"");
	/* truncated sequences: one U+FFFD for the maximal prefix */
	assert_string_equal(Q("a\xe2\x82"), "\"a" FFFD "\"");
	assert_string_equal(Q("\xf0\x9f\x98"), "\"" FFFD "\"");
	assert_string_equal(Q("\xe2\x82" "b"), "\"" FFFD "b\"");
	assert_string_equal(Q("\xc3"), "\"" FFFD "\"");
	/* a lone continuation byte, then a quote that still gets escaped */
	assert_string_equal(Q("\x80\""), "\"" FFFD "\\\"\"");
	/* a truncated sequence must not swallow the escape after it */
	assert_string_equal(Q("\xe2\"x"), "\"" FFFD "\\\"x\"");
}

static void test_escape_bounded(void **state)
{
	char small[8];

	(void)state;
	/* reports the full length and never writes past the buffer */
	assert_int_equal(json_escape("\"\"\"\"", 4, small, sizeof(small)), 8);
	assert_string_equal(small, "\\\"\\\"\\\"\\");
	assert_int_equal(json_escape("ok", 2, small, sizeof(small)), 2);
	assert_string_equal(small, "ok");
}

static const char *us(uint64_t ns)
{
	static char b[JW_US_MAX];
	size_t n = jw_fmt_us(b, ns);

	assert_int_equal(n, strlen(b));
	return b;
}

static void test_time_format(void **state)
{
	(void)state;
	assert_string_equal(us(0), "0.000");
	assert_string_equal(us(1), "0.001");
	assert_string_equal(us(999), "0.999");
	assert_string_equal(us(1000), "1.000");
	assert_string_equal(us(1001), "1.001");
	assert_string_equal(us(1234567), "1234.567");
	assert_string_equal(us(UINT64_MAX), "18446744073709551.615");
	assert_true(strlen(us(UINT64_MAX)) < JW_US_MAX);
}

static void test_numbers_and_buffering(void **state)
{
	char *mem = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&mem, &len);
	struct jw *w = malloc(sizeof(*w));
	size_t n = 0;

	(void)state;
	assert_non_null(w);
	jw_init(w, f);
	jw_u64(w, UINT64_MAX);
	jw_puts(w, ",");
	jw_i64(w, INT64_MIN);
	/* far more than one buffer: the drain must keep every byte in order */
	for (int i = 0; i < 100000; i++) {
		jw_puts(w, ",");
		jw_us(w, (uint64_t)i);
	}
	assert_int_equal(jw_flush(w), 0);
	fclose(f);
	assert_memory_equal(mem, "18446744073709551615,-9223372036854775808,0.000,0.001", 53);
	for (size_t i = 0; i < len; i++)
		n += mem[i] == ',';
	assert_int_equal(n, 100001);
	assert_non_null(strstr(mem, ",9.999,10.000,"));
	assert_string_equal(mem + len - 7, ",99.999");
	free(mem);
	free(w);
}

static void test_write_error_reported(void **state)
{
	struct jw *w = malloc(sizeof(*w));
	int fds[2];
	FILE *f;

	(void)state;
	/* a reader that went away: every write fails with EPIPE */
	signal(SIGPIPE, SIG_IGN);
	assert_int_equal(pipe(fds), 0);
	close(fds[0]);
	f = fdopen(fds[1], "w");
	assert_non_null(f);
	jw_init(w, f);
	for (int i = 0; i < 100000; i++)
		jw_puts(w, "0123456789");
	assert_int_equal(jw_flush(w), -EPIPE);
	/* the first error sticks */
	jw_puts(w, "more");
	assert_int_equal(jw_flush(w), -EPIPE);
	fclose(f);
	free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_and_escapes),
		cmocka_unit_test(test_valid_utf8_passes),
		cmocka_unit_test(test_invalid_utf8_replaced),
		cmocka_unit_test(test_escape_bounded),
		cmocka_unit_test(test_time_format),
		cmocka_unit_test(test_numbers_and_buffering),
		cmocka_unit_test(test_write_error_reported),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
