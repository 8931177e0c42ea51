/* SPDX-License-Identifier: MIT */
/*
 * test_capture_packed.c - PACKED record frames (format version 2): every
 * field at its extremes round trips, the collector's ring records encode up
 * to the first slot that is not a finished record, packed frames are
 * smaller than version-1 frames, malformed bodies are refused, and the
 * documented example is what the encoder writes.
 */
#include "capture_sample.h"

/* Decodes the one frame in b and checks it holds r[0..n) from first. */
static void expect_records(const msgpack_sbuffer *b, uint64_t first,
			   const struct shmt_record *r, size_t n)
{
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_frame f;

	assert_int_equal(decode_buf(b, &f, z), (long)b->size);
	assert_int_equal(f.type, SHMT_CAP_RECORDS);
	assert_int_equal(f.records.packed, 1);
	assert_int_equal(f.records.first_seq, first);
	assert_int_equal(f.records.n, n);
	for (size_t i = 0; i < n; i++) {
		struct shmt_record want = r[i];

		want.commit = SHMT_COMMIT_KIND(want.commit);
		assert_memory_equal(&f.records.v[i], &want, sizeof(want));
	}
	msgpack_zone_free(z);
}

/* Records that stress every field: times going backwards and wrapping,
 * 64-bit maxima, 0, flows on and off, every kind, threads switching. */
#define NEXT 24
static void extreme_records(struct shmt_record r[NEXT])
{
	static const uint64_t ts[NEXT] = {
		0, UINT64_MAX, 0, 1, UINT64_MAX - 1, 1ull << 63, (1ull << 63) - 1, 5,
		1000, 999, 1000000, 3, 1ull << 62, 0, 7, 7,
		UINT64_MAX, UINT64_MAX, 1ull << 35, 12345678901234ull, 2, 1, 0, 64,
	};

	for (int i = 0; i < NEXT; i++) {
		r[i] = (struct shmt_record){
			.ts = ts[i],
			.dur = i % 5 == 0 ? UINT64_MAX : (uint64_t)i * 0x0123456789ull,
			.flow = i % 3 == 0 ? 0 : i % 3 == 1 ? UINT64_MAX : (uint64_t)i,
			/* runs of one thread, and threads coming back */
			.pid = i < 4 ? 1u : i < 8 ? UINT32_MAX : i < 12 ? 0u : 1u + (uint32_t)i % 2,
			.tid = i < 4 ? 1u : i < 8 ? UINT32_MAX : i < 12 ? 7u : 1u + (uint32_t)i % 2,
			.name = i % 4 == 0 ? 0 : i % 4 == 1 ? UINT16_MAX : (uint16_t)i,
			.cat = i % 4 == 1 ? 0 : i % 4 == 2 ? UINT16_MAX : (uint16_t)(i * 3),
			.commit = SHMTRACE_KIND_SPAN + (uint32_t)i % SHMTRACE_KIND_MAX,
		};
	}
}

static void test_packed_records_round_trip_every_field_extreme(void **state)
{
	struct shmt_record r[NEXT];
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_frame f;
	msgpack_sbuffer b;

	(void)state;
	extreme_records(r);
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_records(&b, UINT64_MAX - NEXT, r, NEXT), 0);
	expect_records(&b, UINT64_MAX - NEXT, r, NEXT);
	/* every record alone, and every proper prefix is "need more" */
	for (int i = 0; i < NEXT; i++) {
		msgpack_sbuffer_clear(&b);
		assert_int_equal(shmt_cap_put_records(&b, (uint64_t)i, &r[i], 1), 0);
		expect_records(&b, (uint64_t)i, &r[i], 1);
		assert_true(b.size <= 21 + SHMT_CAP_PACKED_MAX + 5);
	}
	msgpack_sbuffer_clear(&b);
	assert_int_equal(shmt_cap_put_records(&b, 0, r, NEXT), 0);
	for (size_t k = 0; k < b.size; k++)
		assert_int_equal(shmt_cap_decode((const uint8_t *)b.data, k, &f, z, err,
						 sizeof(err)), 0);
	/* a sequence range that would wrap is refused */
	assert_int_equal(shmt_cap_put_records(&b, UINT64_MAX - 1, r, 2), -EINVAL);
	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
}

/* The collector's path: slots whose commit words carry their sequence;
 * encoding stops before the first that is not a finished record. */
static void test_ring_records_encoded_up_to_the_first_unfinished_slot(void **state)
{
	struct shmt_record r[NEXT];
	const uint64_t first = 0xfffff0;	/* the 24 sequence bits wrap inside */
	msgpack_sbuffer b;

	(void)state;
	extreme_records(r);
	for (int i = 0; i < NEXT; i++)
		r[i].commit = SHMT_COMMIT(first + (uint64_t)i, SHMT_COMMIT_KIND(r[i].commit));
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_ring_records(&b, first, r, NEXT), NEXT);
	expect_records(&b, first, r, NEXT);
	/* a torn slot (commit 0), one of another lap, a kind beyond the
	 * last: the frame ends before it */
	r[9].commit = 0;
	msgpack_sbuffer_clear(&b);
	assert_int_equal(shmt_cap_put_ring_records(&b, first, r, NEXT), 9);
	expect_records(&b, first, r, 9);
	r[9].commit = SHMT_COMMIT(first + 9 + 4096, SHMTRACE_KIND_SPAN);
	msgpack_sbuffer_clear(&b);
	assert_int_equal(shmt_cap_put_ring_records(&b, first, r, NEXT), 9);
	r[9].commit = SHMT_COMMIT(first + 9, SHMTRACE_KIND_MAX + 1);
	msgpack_sbuffer_clear(&b);
	assert_int_equal(shmt_cap_put_ring_records(&b, first, r, NEXT), 9);
	/* the first slot bad: nothing at all */
	msgpack_sbuffer_clear(&b);
	assert_int_equal(shmt_cap_put_ring_records(&b, first + 9, r + 9, 3), 0);
	assert_int_equal(b.size, 0);
	msgpack_sbuffer_destroy(&b);
}

/* Regular spans (one thread, steady times, a few names, some in flows):
 * their packed frames are smaller than the 40-byte records of version-1
 * frames, and decode back to the same records in order. */
static void test_packed_records_smaller_than_v1_and_decode_equal(void **state)
{
	const size_t n = 20000;
	struct shmt_record *r = calloc(n, sizeof(*r));
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_frame f;
	msgpack_sbuffer b;
	size_t packed, off = 0, got = 0;
	uint64_t fid = 0;

	(void)state;
	assert_non_null(r);
	for (size_t i = 0; i < n; i++) {
		if (i % 20 == 0)
			fid++;
		r[i] = (struct shmt_record){
			.ts = 1700000000000ull + i * 1000, .dur = 500,
			.flow = i % 20 < 2 ? fid : 0, .pid = 4321, .tid = 4321,
			.name = (uint16_t)(2 + (i & 3)), .cat = 1, .commit = SHMTRACE_KIND_SPAN,
		};
	}
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_records(&b, 0, r, n), 0);
	while (off < b.size) {
		long len = shmt_cap_decode((const uint8_t *)b.data + off, b.size - off,
					   &f, z, err, sizeof(err));

		assert_true(len > 0);
		assert_int_equal(f.type, SHMT_CAP_RECORDS);
		assert_int_equal(f.records.packed, 1);
		assert_int_equal(f.records.first_seq, got);
		assert_true(got + f.records.n <= n);
		assert_memory_equal(f.records.v, r + got, f.records.n * sizeof(*r));
		got += f.records.n;
		off += (size_t)len;
		msgpack_zone_clear(z);
	}
	assert_int_equal(got, n);
	packed = b.size;
	msgpack_sbuffer_clear(&b);
	assert_int_equal(shmt_cap_put_records_v1(&b, 0, r, n), 0);
	assert_true(b.size >= SHMT_RECORD_SIZE * n);
	assert_true(packed < b.size);
	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
	free(r);
}

/* A PACKED frame by hand around body[0..len): count as given. */
static long packed_frame(uint64_t count, const uint8_t *body, size_t len)
{
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_frame f;
	msgpack_sbuffer b;
	msgpack_packer pk;
	long rc;

	msgpack_sbuffer_init(&b);
	msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 5);
	msgpack_pack_uint64(&pk, SHMT_CAP_PACKED);
	msgpack_pack_uint64(&pk, 100);
	msgpack_pack_uint64(&pk, count);
	msgpack_pack_bin_with_body(&pk, body, len);
	finish(&b, 0);
	rc = decode_buf(&b, &f, z);
	if (rc > 0) {
		assert_int_equal(f.type, SHMT_CAP_RECORDS);
		assert_int_equal(f.records.n, count);
	}
	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
	return rc;
}

#define PACKED(count, ...) packed_frame(count, (const uint8_t[]){ __VA_ARGS__ }, \
					sizeof((const uint8_t[]){ __VA_ARGS__ }))

static void test_malformed_packed_bodies_refused(void **state)
{
	(void)state;
	/* control: tag (span, new thread), pid 5, tid 6, ts 2, dur 3, name 1, cat 1;
	 * then one with a flow (tag 1 << 2 | 2) of 9 on the same thread */
	assert_true(PACKED(1, 0x05, 5, 6, 4, 3, 1, 1) > 0);
	assert_true(PACKED(2, 0x05, 5, 6, 4, 3, 1, 1, 0x06, 2, 3, 1, 1, 9) > 0);
	assert_int_equal(PACKED(2, 0x05, 5, 6, 4, 3, 1, 1, 0x06, 2, 3, 1, 1, 9, 0), -EBADMSG);
	assert_non_null(strstr(err, "bytes after"));
	assert_int_equal(PACKED(1, 0x01, 5, 6, 4, 3, 1, 1), -EBADMSG);		/* kind 0 */
	assert_non_null(strstr(err, "kind 0"));
	assert_int_equal(PACKED(1, (SHMTRACE_KIND_MAX + 1) << 2 | 1, 5, 6, 4, 3, 1, 1), -EBADMSG);
	assert_int_equal(PACKED(1, 0x04, 4, 3, 1, 1, 0), -EBADMSG);		/* no thread */
	assert_non_null(strstr(err, "does not name its thread"));
	assert_int_equal(PACKED(1, 0x05, 0x80, 0x80, 0x80, 0x80, 0x10, 6, 4, 3, 1, 1), -EBADMSG);
	assert_non_null(strstr(err, "pid"));					/* 2^32 */
	assert_int_equal(PACKED(1, 0x05, 5, 6, 4, 3, 0x80, 0x80, 0x04, 1), -EBADMSG);
	assert_non_null(strstr(err, "string id 65536"));
	assert_int_equal(PACKED(1, 0x07, 5, 6, 4, 3, 1, 1, 0), -EBADMSG);
	assert_non_null(strstr(err, "flow 0"));
	/* a varint of 11 bytes, one over 64 bits, one cut by the bin's end */
	assert_int_equal(PACKED(1, 0x05, 5, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
				0xff, 0x81, 0x00, 3, 1, 1), -EBADMSG);
	assert_non_null(strstr(err, "varint"));
	assert_int_equal(PACKED(1, 0x05, 5, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
				0xff, 0x02, 3, 1, 1), -EBADMSG);
	assert_true(PACKED(1, 0x05, 5, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
			   0xff, 0x01, 3, 1, 1) > 0);				/* 2^64 - 1 */
	assert_int_equal(PACKED(1, 0x05, 5, 6, 4, 3, 1, 0x81), -EBADMSG);
	/* more records than the bytes can hold: refused before allocating */
	assert_int_equal(PACKED(2, 0x05, 5, 6, 4, 3, 1, 1), -EBADMSG);
	assert_non_null(strstr(err, "cannot fit"));
	assert_int_equal(PACKED(2, 0x05, 5, 6, 4, 3, 1, 1, 0x04, 2, 3), -EBADMSG);
	assert_int_equal(packed_frame(SHMT_CAP_MAX_RECORDS + 1, (const uint8_t *)"", 0), -EBADMSG);
	assert_non_null(strstr(err, "out of range"));
}

/* The example of docs/CAPTURE-FORMAT.md, "PACKED (7)", byte for byte. */
static void test_packed_frame_matches_the_documented_bytes(void **state)
{
	static const uint8_t want[] = {
		0x95, 0x07, 0x07, 0xce, 0x00, 0x00, 0x00, 0x02, 0xc6, 0x00, 0x00, 0x00, 0x10,
		0x05, 0x64, 0x65, 0xd0, 0x0f, 0xf4, 0x03, 0x02, 0x01,
		0x0a, 0xd8, 0x04, 0x00, 0x03, 0x01, 0x09,
	};
	const struct shmt_record r[2] = {
		{ .ts = 1000, .dur = 500, .pid = 100, .tid = 101, .name = 2, .cat = 1,
		  .commit = SHMTRACE_KIND_SPAN },
		{ .ts = 1300, .flow = 9, .pid = 100, .tid = 101, .name = 3, .cat = 1,
		  .commit = SHMTRACE_KIND_INSTANT },
	};
	msgpack_sbuffer b;

	(void)state;
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_records(&b, 7, r, 2), 0);
	assert_int_equal(b.size, sizeof(want) + 5);
	assert_memory_equal(b.data, want, sizeof(want));
	assert_int_equal((uint8_t)b.data[sizeof(want)], 0xce);
	expect_records(&b, 7, r, 2);
	msgpack_sbuffer_destroy(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_packed_records_round_trip_every_field_extreme),
		cmocka_unit_test(test_ring_records_encoded_up_to_the_first_unfinished_slot),
		cmocka_unit_test(test_packed_records_smaller_than_v1_and_decode_equal),
		cmocka_unit_test(test_malformed_packed_bodies_refused),
		cmocka_unit_test(test_packed_frame_matches_the_documented_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
