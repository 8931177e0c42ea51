/* SPDX-License-Identifier: MIT */
/*
 * test_pb.c - the protocol buffers wire format writer (util/pb.c) the
 * Perfetto export is made with: varints at their bounds, nested messages
 * whose length outgrows one byte, strings repaired as the JSON writer
 * repairs them; what it writes read back field by field (pb_next(), the
 * live stream's reader of an answer), cut messages refused; gzip
 * (util/gz.c) round trips; and the blocked Bloom filter (util/bloom.c)
 * the Perfetto export's plan uses.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bloom.h"
#include "gz.h"
#include "hash.h"
#include "json_writer.h"
#include "pb.h"
#include "utf8.h"

/* The varint at *p, moving *p past it. */
static uint64_t get_varint(const unsigned char **p)
{
	uint64_t v = 0;
	int shift = 0;

	do {
		v |= (uint64_t)(**p & 0x7f) << shift;
		shift += 7;
	} while (*(*p)++ & 0x80);
	return v;
}

static void test_varints(void **state)
{
	static const struct {
		uint64_t v;
		size_t len;
	} cases[] = {
		{ 0, 1 }, { 1, 1 }, { 127, 1 }, { 128, 2 }, { 300, 2 }, { 16383, 2 }, { 16384, 3 },
		{ (1ull << 49) + 5, 8 }, { INT64_MAX, 9 }, { UINT64_MAX, 10 },
	};
	struct obuf b = { 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const unsigned char *p;

		b.len = 0;
		pb_varint(&b, cases[i].v);
		assert_int_equal(b.len, cases[i].len);
		assert_int_equal(pb_varint_len(cases[i].v), cases[i].len);
		p = (const unsigned char *)b.p;
		assert_true(get_varint(&p) == cases[i].v);
	}
	/* 300: the example of the format's documentation */
	b.len = 0;
	pb_uint(&b, 1, 300);
	assert_memory_equal(b.p, "\x08\xac\x02", 3);
	/* a negative int64 is its two's complement: ten bytes */
	b.len = 0;
	pb_uint(&b, 4, (uint64_t)(int64_t)-1);
	assert_int_equal(b.len, 11);
	/* fixed64, little-endian, after its key (field 47: two bytes) */
	b.len = 0;
	pb_fixed64(&b, 47, 0x0102030405060708ull);
	assert_memory_equal(b.p, "\xf9\x02\x08\x07\x06\x05\x04\x03\x02\x01", 10);
	ob_free(&b);
}

/* A message in a message, the inner one of n bytes: both lengths right,
 * the inner bytes where they belong after a length of two bytes moved them. */
static void nested(size_t n)
{
	struct obuf b = { 0 };
	char *fill = malloc(n);
	const unsigned char *p;
	size_t outer, inner;
	uint64_t len;

	memset(fill, 'x', n);
	outer = pb_begin(&b, 1);
	pb_uint(&b, 8, 42);
	inner = pb_begin(&b, 11);
	ob_raw(&b, fill, n);
	pb_end(&b, inner);
	pb_uint(&b, 13, 2);
	pb_end(&b, outer);
	assert_false(b.oom);
	p = (const unsigned char *)b.p;
	assert_int_equal(get_varint(&p), 1 << 3 | PB_LEN);
	len = get_varint(&p);
	assert_int_equal(len, b.len - (size_t)(p - (const unsigned char *)b.p));
	assert_int_equal(get_varint(&p), 8 << 3 | PB_VARINT);
	assert_int_equal(get_varint(&p), 42);
	assert_int_equal(get_varint(&p), 11 << 3 | PB_LEN);
	assert_int_equal(get_varint(&p), n);
	assert_memory_equal(p, fill, n);
	p += n;
	assert_int_equal(get_varint(&p), 13 << 3 | PB_VARINT);
	assert_int_equal(get_varint(&p), 2);
	assert_ptr_equal(p, (const unsigned char *)b.p + b.len);
	ob_free(&b);
	free(fill);
}

static void test_nested_lengths(void **state)
{
	(void)state;
	nested(0);
	nested(127);
	nested(128);	/* the inner length takes two bytes, the outer too */
	nested(20000);	/* three */
}

/* The text pb_string() writes for s[0..n): what the JSON writer's
 * string holds once parsed (U+FFFD for each invalid subpart). */
static void same_text(const char *s, size_t n, const char *want)
{
	struct obuf b = { 0 };
	const unsigned char *p;
	char esc[64];

	pb_string(&b, 6, s, n);
	p = (const unsigned char *)b.p;
	assert_int_equal(get_varint(&p), 6 << 3 | PB_LEN);
	assert_int_equal(get_varint(&p), strlen(want));
	assert_memory_equal(p, want, strlen(want));
	/* json_escape() keeps printable UTF-8 as it is: the same bytes */
	json_escape(s, n, esc, sizeof(esc));
	assert_string_equal(esc, want);
	ob_free(&b);
}

static void test_strings_repaired(void **state)
{
	(void)state;
	same_text("plain", 5, "plain");
	same_text("caf\xc3\xa9 \xe2\x82\xac", 9, "caf\xc3\xa9 \xe2\x82\xac");
	same_text("a\xff" "b", 3, "a" UTF8_REPLACEMENT "b");
	/* a cut-short sequence is one replacement; a surrogate, three */
	same_text("x\xe2\x82", 3, "x" UTF8_REPLACEMENT);
	same_text("\xed\xa0\x80", 3, UTF8_REPLACEMENT UTF8_REPLACEMENT UTF8_REPLACEMENT);
}

/* Fields written read back as written; a message cut anywhere is no
 * field, never a read past its end. */
static void test_fields_read_back(void **state)
{
	struct obuf b = { 0 };
	const char *p, *data = NULL;
	size_t n, len = 0, m;
	uint64_t v = 0;
	uint32_t field;
	unsigned wire;

	(void)state;
	pb_uint(&b, 1, 300);
	m = pb_begin(&b, 2);
	pb_string(&b, 1, "hello", 5);
	pb_end(&b, m);
	pb_fixed64(&b, 7, 0x1122334455667788ull);
	p = b.p;
	n = b.len;
	assert_int_equal(pb_next(&p, &n, &field, &wire, &v, &data, &len), 1);
	assert_true(field == 1 && wire == PB_VARINT && v == 300);
	assert_int_equal(pb_next(&p, &n, &field, &wire, &v, &data, &len), 1);
	assert_true(field == 2 && wire == PB_LEN && len == 7);
	assert_memory_equal(data, "\x0a\x05hello", 7);
	assert_int_equal(pb_next(&p, &n, &field, &wire, &v, &data, &len), 1);
	assert_true(field == 7 && wire == PB_I64 && v == 0x1122334455667788ull);
	assert_int_equal(pb_next(&p, &n, &field, &wire, &v, &data, &len), 0);
	for (size_t cut = 1; cut < b.len; cut++) {
		int ret = 1;

		p = b.p;
		n = cut;
		while (ret == 1)
			ret = pb_next(&p, &n, &field, &wire, &v, &data, &len);
		/* a cut between two fields ends the message; inside one, damage */
		assert_true(ret == 0 || ret == -EBADMSG);
		assert_true(ret == -EBADMSG || cut == 3 || cut == 12);
	}
	ob_free(&b);
}

static void test_gzip_round_trip(void **state)
{
	struct obuf in = { 0 }, z = { 0 }, out = { 0 };
	struct gz g;

	(void)state;
	gz_init(&g, 1);
	for (int i = 0; i < 20000; i++)
		ob_puts(&in, i % 7 ? "span " : "flow ");
	/* twice through one compressor: it is set up once, reset after */
	for (int k = 0; k < 2; k++) {
		assert_int_equal(gz_compress(&g, in.p, in.len, &z), 0);
		/* a gzip member: 1f 8b, deflate */
		assert_memory_equal(z.p, "\x1f\x8b\x08", 3);
		assert_true(z.len < in.len / 10);
		out.len = 0;
		assert_int_equal(gz_decompress(z.p, z.len, &out, in.len), 0);
		assert_int_equal(out.len, in.len);
		assert_memory_equal(out.p, in.p, in.len);
	}
	out.len = 0;
	assert_int_equal(gz_decompress(z.p, z.len, &out, in.len - 1), -EFBIG);
	out.len = 0;
	assert_int_equal(gz_decompress(z.p, z.len / 2, &out, in.len), -EBADMSG);
	gz_free(&g);
	ob_free(&in);
	ob_free(&z);
	ob_free(&out);
}

static void test_bloom(void **state)
{
	struct bloom b;
	unsigned again = 0;

	(void)state;
	assert_int_equal(bloom_init(&b, 1024), 0);
	/* a key added is always "maybe" after; a fresh one mostly "no" */
	for (uint64_t i = 0; i < 2000; i++)
		again += bloom_add(&b, i / 16, hash_fmix64(i));
	for (uint64_t i = 0; i < 2000; i++)
		assert_true(bloom_add(&b, i / 16, hash_fmix64(i)));
	assert_true(again < 20);
	bloom_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_varints),
		cmocka_unit_test(test_nested_lengths),
		cmocka_unit_test(test_strings_repaired),
		cmocka_unit_test(test_fields_read_back),
		cmocka_unit_test(test_gzip_round_trip),
		cmocka_unit_test(test_bloom),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
