/* SPDX-License-Identifier: MIT */
/*
 * test_capture_walk.c - what the decoder checks before msgpack-c sees a
 * frame: the CRC-32C of its bytes, the head of every kind of msgpack
 * object as the pre-walker reads it, and lengths and nesting no frame can
 * have, refused at once rather than waited for.
 */
#include "capture_sample.h"
#include "mp_head.h"

static void test_crc32c_gives_the_castagnoli_check_value(void **state)
{
	(void)state;
	assert_int_equal(shmt_crc32c(0, "123456789", 9), 0xe3069283);
	assert_int_equal(shmt_crc32c(shmt_crc32c(0, "1234", 4), "56789", 5), 0xe3069283);
	assert_int_equal(shmt_crc32c(0, "", 0), 0);
}

/*
 * The head of each kind of msgpack object, as the decoder's walker and the
 * fuzzer's frame finder read it: a wrong length here makes the walker
 * take a frame's end in the wrong place.
 */
static void test_mp_head_sizes_every_msgpack_object_kind(void **state)
{
	static const struct {
		uint8_t b[6];
		size_t len;
		int rc;
		uint64_t hdr, body, kids;
	} cases[] = {
		{ { 0x05 }, 1, 1, 1, 0, 0 },			/* positive fixint */
		{ { 0xff }, 1, 1, 1, 0, 0 },			/* negative fixint */
		{ { 0xc0 }, 1, 1, 1, 0, 0 },			/* nil */
		{ { 0xc3 }, 1, 1, 1, 0, 0 },			/* true */
		{ { 0x83 }, 1, 1, 1, 0, 6 },			/* fixmap of 3 pairs */
		{ { 0x9f }, 1, 1, 1, 0, 15 },			/* fixarray of 15 */
		{ { 0xa7 }, 1, 1, 1, 7, 0 },			/* fixstr of 7 */
		{ { 0xc4, 0x10 }, 2, 1, 2, 16, 0 },		/* bin8 */
		{ { 0xc5, 0x01, 0x00 }, 3, 1, 3, 256, 0 },	/* bin16 */
		{ { 0xc6, 0, 1, 0, 0 }, 5, 1, 5, 65536, 0 },	/* bin32 */
		{ { 0xc7, 0x03, 0x01 }, 3, 1, 3, 3, 0 },	/* ext8: + its type */
		{ { 0xc9, 0, 0, 0, 2 }, 5, 1, 6, 2, 0 },	/* ext32 */
		{ { 0xca }, 1, 1, 5, 0, 0 },			/* float32 */
		{ { 0xcf }, 1, 1, 9, 0, 0 },			/* uint64 */
		{ { 0xd4 }, 1, 1, 3, 0, 0 },			/* fixext1 */
		{ { 0xd8 }, 1, 1, 18, 0, 0 },			/* fixext16 */
		{ { 0xd9, 0x20 }, 2, 1, 2, 32, 0 },		/* str8 */
		{ { 0xdc, 0x01, 0x02 }, 3, 1, 3, 0, 258 },	/* array16 */
		{ { 0xdd, 0, 0, 0, 4 }, 5, 1, 5, 0, 4 },	/* array32 */
		{ { 0xde, 0x00, 0x02 }, 3, 1, 3, 0, 4 },	/* map16 of 2 pairs */
		{ { 0xdf, 0, 0, 0, 1 }, 5, 1, 5, 0, 2 },	/* map32 */
		{ { 0xdd, 0, 0, 0 }, 4, 0, 0, 0, 0 },		/* cut in its count */
		{ { 0xc4 }, 1, 0, 0, 0, 0 },			/* cut in its length */
		{ { 0xc1 }, 1, -EBADMSG, 0, 0, 0 },		/* never used */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct shmt_mp_head h;
		int rc = shmt_mp_head(cases[i].b, cases[i].len, &h);

		if (rc != cases[i].rc)
			fail_msg("byte 0x%02x: rc %d, not %d", cases[i].b[0], rc, cases[i].rc);
		if (rc == 1 && (h.hdr != cases[i].hdr || h.body != cases[i].body ||
				h.kids != cases[i].kids))
			fail_msg("byte 0x%02x: head %llu body %llu kids %llu", cases[i].b[0],
				 (unsigned long long)h.hdr, (unsigned long long)h.body,
				 (unsigned long long)h.kids);
	}
}

/* A length or count that no frame can hold, and nesting deeper than any
 * frame needs: refused from the first bytes, never "need more". */
static void test_walker_refuses_impossible_lengths_and_deep_nesting(void **state)
{
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_frame f;
	msgpack_sbuffer b;
	msgpack_packer pk;

	(void)state;
	msgpack_sbuffer_init(&b);
	msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);

	msgpack_pack_array(&pk, 5);
	msgpack_pack_uint64(&pk, SHMT_CAP_RECORDS);
	msgpack_pack_uint64(&pk, 0);
	msgpack_pack_uint64(&pk, 1);
	msgpack_pack_bin(&pk, 0xffffffffu);
	assert_int_equal(decode_buf(&b, &f, z), -EBADMSG);
	assert_non_null(strstr(err, "longer than"));
	msgpack_sbuffer_clear(&b);
	msgpack_pack_array(&pk, 0xffffffffu);
	assert_int_equal(decode_buf(&b, &f, z), -EBADMSG);
	assert_true(err[0]);

	msgpack_sbuffer_clear(&b);
	for (int i = 0; i < 40; i++)
		msgpack_pack_array(&pk, 1);
	assert_int_equal(decode_buf(&b, &f, z), -EBADMSG);
	assert_non_null(strstr(err, "nested"));

	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c_gives_the_castagnoli_check_value),
		cmocka_unit_test(test_mp_head_sizes_every_msgpack_object_kind),
		cmocka_unit_test(test_walker_refuses_impossible_lengths_and_deep_nesting),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
