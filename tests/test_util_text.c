/* SPDX-License-Identifier: MIT */
/*
 * test_util_text.c - the util pieces the writers and the command lines
 * share: growing arrays, the hashes, parse_size(), the decimal formatter,
 * the growing output buffer and the key/value printer.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "array.h"
#include "dec.h"
#include "hash.h"
#include "kv.h"
#include "obuf.h"
#include "parse.h"
#include "term.h"

static void test_array_reserve(void **state)
{
	uint32_t *v = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(array_reserve(&v, &cap, 1, sizeof(*v), 16), 0);
	assert_int_equal(cap, 16);
	v[15] = 7;
	/* room already: nothing moves */
	assert_int_equal(array_reserve(&v, &cap, 16, sizeof(*v), 16), 0);
	assert_int_equal(cap, 16);
	/* doubled until it fits */
	assert_int_equal(array_reserve(&v, &cap, 100, sizeof(*v), 16), 0);
	assert_int_equal(cap, 128);
	assert_int_equal(v[15], 7);
	/* too many to count: refused, the array as it was */
	assert_int_equal(array_reserve(&v, &cap, SIZE_MAX, sizeof(*v), 16), -ENOMEM);
	assert_int_equal(cap, 128);
	free(v);

	/* bounded: the last step stops at the bound, beyond it is refused */
	v = NULL;
	cap = 0;
	assert_int_equal(array_reserve_max(&v, &cap, 1, sizeof(*v), 4, 10), 0);
	assert_int_equal(cap, 4);
	assert_int_equal(array_reserve_max(&v, &cap, 5, sizeof(*v), 4, 10), 0);
	assert_int_equal(cap, 8);
	assert_int_equal(array_reserve_max(&v, &cap, 9, sizeof(*v), 4, 10), 0);
	assert_int_equal(cap, 10);
	assert_int_equal(array_reserve_max(&v, &cap, 11, sizeof(*v), 4, 10), -ENOMEM);
	assert_int_equal(cap, 10);
	free(v);
}

static void test_hash(void **state)
{
	(void)state;
	/* FNV-1a 32's published values: the ring's string table depends on them */
	assert_int_equal(fnv1a32("", 0), 0x811c9dc5u);
	assert_int_equal(fnv1a32("a", 1), 0xe40c292cu);
	assert_int_equal(fnv1a32("foobar", 6), 0xbf9cf968u);
	/* bytes, not chars: a high byte is not sign-extended */
	assert_int_equal(fnv1a32("\xff", 1), (0x811c9dc5u ^ 0xffu) * 16777619u);
	assert_true(hash_fmix64(0) == 0);
	assert_true(hash_fmix64(1) == 0xb456bcfc34c2cb2cull);
	/* splitmix64 seeded with 0: its first output */
	assert_true(hash_splitmix64(0) == 0xe220a8397b1dcdafull);
}

static void expect_size(const char *s, int ret, uint64_t want)
{
	uint64_t v = 12345;

	assert_int_equal(parse_size(s, &v), ret);
	assert_true(v == (ret ? 12345 : want));
}

static void expect_duration(const char *s, int ret, uint64_t want)
{
	uint64_t v = 12345;

	assert_int_equal(parse_duration(s, &v), ret);
	assert_true(v == (ret ? 12345 : want));
}

/* Durations in each unit, fractions, and a bound of ten years: a clock's
 * reading plus any duration taken never wraps. */
static void test_parse_duration(void **state)
{
	(void)state;
	expect_duration("0", 0, 0);
	expect_duration("1.5s", 0, 1500000000ull);
	expect_duration("2", 0, 2000000000ull);
	expect_duration("200ms", 0, 200000000ull);
	expect_duration("300us", 0, 300000ull);
	expect_duration("7ns", 0, 7);
	expect_duration("315360000s", 0, PARSE_DURATION_MAX_NS);
	expect_duration("315360000.000000001s", -EINVAL, 0);
	expect_duration("315360001", -EINVAL, 0);
	expect_duration("18446744073s", -EINVAL, 0);
	expect_duration("99999999999999999999ns", -EINVAL, 0);
	expect_duration("", -EINVAL, 0);
	expect_duration("s", -EINVAL, 0);
	expect_duration("-1s", -EINVAL, 0);
	expect_duration("1.s", -EINVAL, 0);
	expect_duration("1h", -EINVAL, 0);
}

static void test_parse_size(void **state)
{
	(void)state;
	expect_size("0", 0, 0);
	expect_size("4096", 0, 4096);
	expect_size("64k", 0, 64 << 10);
	expect_size("64K", 0, 64 << 10);
	expect_size("4m", 0, 4u << 20);
	expect_size("4M", 0, 4u << 20);
	expect_size("2g", 0, 2ull << 30);
	expect_size("2G", 0, 2ull << 30);
	expect_size("18446744073709551615", 0, UINT64_MAX);
	expect_size("17179869183G", 0, 17179869183ull << 30);
	/* a number, too large: told apart from no number */
	expect_size("17179869184G", -ERANGE, 0);
	expect_size("18446744073709551616", -ERANGE, 0);
	expect_size("99999999999999999999k", -ERANGE, 0);
	expect_size("99999999999999999999x", -EINVAL, 0);
	expect_size("", -EINVAL, 0);
	expect_size("k", -EINVAL, 0);
	expect_size("-1", -EINVAL, 0);
	expect_size("4T", -EINVAL, 0);
	expect_size("4kB", -EINVAL, 0);
	expect_size("4 k", -EINVAL, 0);
	expect_size(" 4", -EINVAL, 0);
	expect_size("+4", -EINVAL, 0);
}

/* parse_num(): the range, powers of two, suffixes only where allowed, and
 * an error naming the option and what it accepts. */
static void test_parse_num(void **state)
{
	static const struct num_spec cap = { "--capacity", 2, 1u << 24, PARSE_SUFFIX | PARSE_POW2, NULL };
	static const struct num_spec ms = { "--poll-interval", 1, 60000, 0, "ms" };
	static const struct num_spec big = { "--max-size", 1u << 20, UINT64_MAX, PARSE_SUFFIX, NULL };
	char err[256];
	uint64_t v = 7;

	(void)state;
	assert_int_equal(parse_num("64k", &cap, &v, err, sizeof(err)), 0);
	assert_true(v == 65536);
	assert_int_equal(parse_num("2", &cap, &v, err, sizeof(err)), 0);
	assert_int_equal(parse_num("1", &cap, &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--capacity '1': need a power of two from 2 to 16M");
	assert_int_equal(parse_num("3", &cap, &v, err, sizeof(err)), -EINVAL);
	assert_int_equal(parse_num("32M", &cap, &v, err, sizeof(err)), -EINVAL);
	/* 2^64 + 4096 would be 4096 if the high bits were lost */
	assert_int_equal(parse_num("18014398509481988k", &cap, &v, err, sizeof(err)), -EINVAL);
	assert_int_equal(parse_num("-4096", &cap, &v, err, sizeof(err)), -EINVAL);
	assert_true(v == 2);
	assert_int_equal(parse_num("100", &ms, &v, err, sizeof(err)), 0);
	assert_int_equal(parse_num("1k", &ms, &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--poll-interval '1k': need 1 to 60000 ms");
	/* without an upper bound, what is wrong: too small, too large, or
	 * no number (never "need at least" of a number above it) */
	assert_int_equal(parse_num("64k", &big, &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--max-size '64k': need at least 1M");
	assert_int_equal(parse_num("17179869185G", &big, &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--max-size '17179869185G': too large (at most 2^64 - 1)");
	assert_int_equal(parse_num("99999999999999999999", &big, &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--max-size '99999999999999999999': too large (at most 2^64 - 1)");
	assert_int_equal(parse_num("1e99", &big, &v, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--max-size '1e99': not a whole number (digits, then k, M or G); "
			    "need at least 1M");
	assert_int_equal(parse_num("-1", &big, &v, err, sizeof(err)), -EINVAL);
	assert_int_equal(parse_num("1G", &big, &v, err, sizeof(err)), 0);
	assert_true(v == 1ull << 30);
}

static void test_parse_i64(void **state)
{
	int64_t v = 7;

	(void)state;
	assert_int_equal(parse_i64("-3000", INT64_MIN, INT64_MAX, &v), 0);
	assert_true(v == -3000);
	assert_int_equal(parse_i64("+5", INT64_MIN, INT64_MAX, &v), 0);
	assert_true(v == 5);
	assert_int_equal(parse_i64("9223372036854775807", INT64_MIN, INT64_MAX, &v), 0);
	assert_true(v == INT64_MAX);
	assert_int_equal(parse_i64("9223372036854775808", INT64_MIN, INT64_MAX, &v), -ERANGE);
	assert_int_equal(parse_i64("-9223372036854775809", INT64_MIN, INT64_MAX, &v), -ERANGE);
	assert_int_equal(parse_i64("11", 0, 10, &v), -ERANGE);
	assert_int_equal(parse_i64("", INT64_MIN, INT64_MAX, &v), -EINVAL);
	assert_int_equal(parse_i64("-", INT64_MIN, INT64_MAX, &v), -EINVAL);
	assert_int_equal(parse_i64(" 1", INT64_MIN, INT64_MAX, &v), -EINVAL);
	assert_int_equal(parse_i64("1k", INT64_MIN, INT64_MAX, &v), -EINVAL);
	assert_true(v == INT64_MAX);
}

static void expect_dec(uint64_t v, const char *want)
{
	char b[DEC_U64_MAX + 1];

	*dec_u64(b, v) = 0;
	assert_string_equal(b, want);
}

static void test_dec(void **state)
{
	(void)state;
	expect_dec(0, "0");
	expect_dec(9, "9");
	expect_dec(10, "10");
	expect_dec(99, "99");
	expect_dec(100, "100");
	expect_dec(1000000007, "1000000007");
	expect_dec(UINT64_MAX, "18446744073709551615");
	assert_int_equal(strlen(dec_pairs), 200);
	assert_memory_equal(dec_pairs + 2 * 42, "42", 2);
}

static void test_obuf(void **state)
{
	struct obuf b = { 0 };

	(void)state;
	ob_puts(&b, "[");
	ob_int(&b, 0, false);
	ob_puts(&b, ",");
	ob_int(&b, (uint64_t)INT64_MIN, true);
	ob_puts(&b, ",");
	ob_str(&b, "a\"\n\xff", 4);
	ob_puts(&b, ",");
	ob_str_pre(&b, "k.", "v", 1);
	ob_puts(&b, "]");
	assert_false(b.oom);
	assert_int_equal(b.len, strlen("[0,-9223372036854775808,\"a\\\"\\u000a\xef\xbf\xbd\",\"k.v\"]"));
	assert_memory_equal(b.p, "[0,-9223372036854775808,\"a\\\"\\u000a\xef\xbf\xbd\",\"k.v\"]", b.len);
	/* past the first 4096 bytes: grown, nothing lost */
	for (int i = 0; i < 3000; i++)
		ob_puts(&b, "xy");
	assert_false(b.oom);
	assert_true(b.cap >= b.len && b.cap == 8192);
	assert_memory_equal(b.p + b.len - 2, "xy", 2);
	ob_free(&b);
	assert_null(b.p);
	assert_int_equal(b.len, 0);
}

/* Runs fill on a kv over a memory FILE; returns what it printed. */
static char *kv_print(bool json, void (*fill)(struct kv *o))
{
	struct jw *w = malloc(sizeof(*w));
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct kv o;

	assert_non_null(w);
	assert_non_null(f);
	jw_init(w, f);
	kv_begin(&o, w, json);
	fill(&o);
	assert_int_equal(kv_end(&o), 0);
	fclose(f);
	free(w);
	return text;
}

static void fill_some(struct kv *o)
{
	kv_str(o, "ring", "a\"b");
	kv_u64(o, "capacity", 1024);
	kv_u64(o, "a_key_longer_than_twenty", 1);
}

static void fill_bool(struct kv *o)
{
	kv_bool(o, "collector", true);
	kv_bool(o, "alive", false);
}

static void fill_none(struct kv *o)
{
	(void)o;
}

static void test_kv(void **state)
{
	char *s;

	(void)state;
	s = kv_print(false, fill_some);
	/* text is escaped for a terminal (term.h), where a quote is harmless */
	assert_string_equal(s, "ring:               a\"b\n"
			       "capacity:           1024\n"
			       "a_key_longer_than_twenty: 1\n");
	free(s);
	s = kv_print(true, fill_some);
	assert_string_equal(s, "{\"ring\":\"a\\\"b\",\"capacity\":1024,\"a_key_longer_than_twenty\":1}\n");
	free(s);
	s = kv_print(true, fill_bool);
	assert_string_equal(s, "{\"collector\":true,\"alive\":false}\n");
	free(s);
	s = kv_print(true, fill_none);
	assert_string_equal(s, "{}\n");
	free(s);
	s = kv_print(false, fill_none);
	assert_string_equal(s, "");
	free(s);
}

/* Control characters, C1, invalid UTF-8 and backslashes as escapes;
 * printable UTF-8 kept; a cut never splits an escape. */
static void test_term_escape(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(term_escape("p\x1b]0;x\x07\x7f", 8, out, sizeof(out)), 17);
	assert_string_equal(out, "p\\x1b]0;x\\x07\\x7f");
	term_escape("a\\b \xc2\x9b \xff \xc3\xa9\"", 12, out, sizeof(out));
	assert_string_equal(out, "a\\\\b \\xc2\\x9b \\xff \xc3\xa9\"");
	assert_int_equal(term_escape("ab\x1b", 3, out, 5), 6);
	assert_string_equal(out, "ab");
	assert_string_equal(term_str("tab\there", out, sizeof(out)), "tab\\x09here");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_array_reserve),
		cmocka_unit_test(test_hash),
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_parse_duration),
		cmocka_unit_test(test_parse_num),
		cmocka_unit_test(test_parse_i64),
		cmocka_unit_test(test_dec),
		cmocka_unit_test(test_obuf),
		cmocka_unit_test(test_kv),
		cmocka_unit_test(test_term_escape),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
