/* SPDX-License-Identifier: MIT */
/*
 * test_capture_codec.c - the capture frames in memory: every frame type
 * encodes and decodes to the same values, long record lists split into
 * frames, the encoder refuses or sanitizes what no reader accepts, and the
 * decoder refuses hand-made frames with a valid CRC but wrong content.
 */
#include "capture_sample.h"

/* Each frame type encodes and decodes to the same values, alone. */
static void test_each_frame_type_round_trips_alone(void **state)
{
	msgpack_sbuffer b;
	size_t ends[6];
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_frame f;

	(void)state;
	sample_file(&b, ends);
	for (int i = 0; i < 6; i++) {
		size_t s = i ? ends[i - 1] : 0;
		long n = shmt_cap_decode((const uint8_t *)b.data + s, ends[i] - s,
					 &f, z, err, sizeof(err));

		assert_int_equal(n, (long)(ends[i] - s));
		assert_true(frame_is(&f, i));
		/* with bytes of the next frame after it: the same length */
		n = shmt_cap_decode((const uint8_t *)b.data + s, b.size - s, &f, z, err, sizeof(err));
		assert_int_equal(n, (long)(ends[i] - s));
		/* every proper prefix is "need more", never an error */
		for (size_t k = 0; k < ends[i] - s; k++)
			assert_int_equal(shmt_cap_decode((const uint8_t *)b.data + s, k,
							 &f, z, err, sizeof(err)), 0);
		msgpack_zone_clear(z);
	}
	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
}

/* Long lists become several frames that together hold the same data. */
static void test_records_split_at_the_frame_limit_decode_whole(void **state)
{
	size_t n = SHMT_CAP_SPLIT_RECORDS + 3, got = 0;
	struct shmt_record *r = calloc(n, sizeof(*r));
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_frame f;
	msgpack_sbuffer b;
	size_t off = 0;

	(void)state;
	assert_non_null(r);
	for (size_t i = 0; i < n; i++)
		r[i] = sample_record(i);
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_records(&b, 7, r, n), 0);
	while (off < b.size) {
		long len = shmt_cap_decode((const uint8_t *)b.data + off, b.size - off,
					   &f, z, err, sizeof(err));

		assert_true(len > 0);
		assert_int_equal(f.type, SHMT_CAP_RECORDS);
		assert_int_equal(f.records.first_seq, 7 + got);
		assert_memory_equal(f.records.v, r + got, f.records.n * sizeof(*r));
		got += f.records.n;
		off += len;
		msgpack_zone_clear(z);
	}
	assert_int_equal(got, n);
	/* n == 0 writes nothing */
	off = b.size;
	assert_int_equal(shmt_cap_put_records(&b, 7, r, 0), 0);
	assert_int_equal(b.size, off);
	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
	free(r);
}

/* Encoders refuse what no reader accepts, and leave the buffer alone. */
static void test_encoder_refuses_what_no_reader_accepts(void **state)
{
	struct shmt_record r[2] = { sample_record(0), sample_record(1) };
	struct shmt_cap_string s = { 0, 1, "x" };
	msgpack_sbuffer b;

	(void)state;
	msgpack_sbuffer_init(&b);
	r[1].commit = SHMTRACE_KIND_MAX + 1;
	assert_int_equal(shmt_cap_put_records(&b, 0, r, 2), -EINVAL);
	r[1].commit = 0;
	assert_int_equal(shmt_cap_put_records(&b, 0, r, 2), -EINVAL);
	assert_int_equal(shmt_cap_put_strings(&b, &s, 1), -EINVAL);
	s.id = 1;
	s.len = SHMT_STRING_MAX + 1;
	assert_int_equal(shmt_cap_put_strings(&b, &s, 1), -EINVAL);
	assert_int_equal(b.size, 0);
	msgpack_sbuffer_destroy(&b);
}

/* Unterminated names from shared memory are cut to fit with their NUL;
 * a commit word with a sequence above the kind is written as the kind. */
static void test_encoder_cuts_long_names_and_writes_commit_as_kind(void **state)
{
	struct shmt_thread t = sample_thread(0);
	struct shmt_record rec = sample_record(0);
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_frame f;
	msgpack_sbuffer b;

	(void)state;
	memset(t.name, 'n', sizeof(t.name));
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_threads(&b, &t, 1), 0);
	assert_int_equal(decode_buf(&b, &f, z), (long)b.size);
	assert_int_equal(strlen(f.threads.v[0].name), SHMT_NAME_LEN - 1);
	msgpack_sbuffer_clear(&b);
	rec.commit = SHMT_COMMIT(12345, SHMTRACE_KIND_INSTANT);
	assert_int_equal(shmt_cap_put_records(&b, 0, &rec, 1), 0);
	assert_int_equal(decode_buf(&b, &f, z), (long)b.size);
	assert_int_equal(f.records.v[0].commit, SHMTRACE_KIND_INSTANT);
	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
}

/* A header without ring_id (an older collector) reads with ring_id 0, and
 * one without the parts deleted for --max-files (minor revision 2.1) with
 * none deleted. */
static void test_header_without_trailing_fields_reads_them_0(void **state)
{
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_header h = sample_header();
	struct shmt_cap_frame f;
	msgpack_sbuffer b;

	(void)state;
	msgpack_sbuffer_init(&b);
	put_header_fields(&b, SHMT_CAP_VERSION, SHMT_CAP_HEADER_RING_ID + 1, 0);
	assert_int_equal(decode_buf(&b, &f, z), (long)b.size);
	assert_int_equal(f.type, SHMT_CAP_HEADER);
	memset(&h.deleted, 0, sizeof(h.deleted));
	assert_memory_equal(&f.header, &h, sizeof(h));
	msgpack_sbuffer_clear(&b);
	put_header_fields(&b, SHMT_CAP_VERSION, SHMT_CAP_HEADER_MIN_FIELDS, 0);
	assert_int_equal(decode_buf(&b, &f, z), (long)b.size);
	h.ring_id = 0;
	assert_memory_equal(&f.header, &h, sizeof(h));
	/* and the encoder writes them, as fields 14 to 19 */
	msgpack_sbuffer_clear(&b);
	h = sample_header();
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(decode_buf(&b, &f, z), (long)b.size);
	assert_memory_equal(&f.header, &h, sizeof(h));
	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
}

/* A snapshot's header (minor revision 2.2) carries its fields 20 to 33
 * and reads back as written; a collector's capture writes none of them,
 * so its header keeps the bytes it had (21 elements: dc 00 15). */
static void test_snapshot_header_round_trips(void **state)
{
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_header h = sample_header();
	struct shmt_cap_frame f;
	msgpack_sbuffer b;

	(void)state;
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_memory_equal(b.data, "\xdc\x00\x15\x01", 4);
	msgpack_sbuffer_clear(&b);
	h.snapshot = (struct shmt_cap_snapshot){
		.cause = SHMT_SNAP_TRIGGER, .trigger_ns = 5, .trigger_pid = 6, .trigger_tid = 7,
		.first_seq = 8, .end_seq = 9, .from_ns = 10, .to_ns = 11, .overwritten = 12,
		.staged = 13, .triggers = 14, .suppressed = 15, .cut = 16,
	};
	strcpy(h.snapshot.trigger, "timeout \xe2\x9c\x93");
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_memory_equal(b.data, "\xdc\x00\x23\x01", 4);
	assert_int_equal(decode_buf(&b, &f, z), (long)b.size);
	assert_int_equal(f.type, SHMT_CAP_HEADER);
	assert_memory_equal(&f.header, &h, sizeof(h));
	assert_string_equal(shmt_snap_cause_name(f.header.snapshot.cause), "trigger");
	assert_string_equal(shmt_snap_cause_name(99), "unknown");
	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
}

/* Unknown trailing fields of a newer minor version are skipped. */
static void test_unknown_trailing_fields_are_skipped(void **state)
{
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_frame f;
	msgpack_sbuffer b;
	msgpack_packer pk;

	(void)state;
	msgpack_sbuffer_init(&b);
	put_header_version(&b, SHMT_CAP_VERSION, 3);
	assert_int_equal(decode_buf(&b, &f, z), (long)b.size);
	assert_true(frame_is(&f, 0));
	msgpack_sbuffer_clear(&b);
	msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 6);
	msgpack_pack_uint64(&pk, SHMT_CAP_END);
	msgpack_pack_uint64(&pk, sample_end.records);
	msgpack_pack_uint64(&pk, sample_end.end_ns);
	msgpack_pack_uint64(&pk, sample_end.next_part);
	msgpack_pack_str_with_body(&pk, "new", 3);
	finish(&b, 0);
	assert_int_equal(decode_buf(&b, &f, z), (long)b.size);
	assert_true(frame_is(&f, 5));
	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
}

/* A records frame by hand: count, bin length and kind as given. */
static long records_frame(uint64_t count, size_t binlen, uint32_t kind)
{
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	uint8_t *bin = calloc(1, binlen + 1);
	struct shmt_cap_frame f;
	msgpack_sbuffer b;
	msgpack_packer pk;
	long rc;

	for (size_t i = 36; i + 4 <= binlen; i += SHMT_RECORD_SIZE)
		bin[i] = (uint8_t)kind;
	msgpack_sbuffer_init(&b);
	msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 5);
	msgpack_pack_uint64(&pk, SHMT_CAP_RECORDS);
	msgpack_pack_uint64(&pk, 0);
	msgpack_pack_uint64(&pk, count);
	msgpack_pack_bin_with_body(&pk, bin, binlen);
	finish(&b, 0);
	rc = decode_buf(&b, &f, z);
	if (rc > 0)
		assert_int_equal(f.records.n, count);
	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
	free(bin);
	return rc;
}

static void test_records_frame_of_wrong_size_or_kind_refused(void **state)
{
	(void)state;
	assert_int_equal(records_frame(2, 80, 1), 4 + 2 + 80 + 5);	/* control: valid */
	assert_int_equal(records_frame(1, 41, 1), -EBADMSG);
	assert_non_null(strstr(err, "not 40 each"));
	assert_int_equal(records_frame(2, 81, 1), -EBADMSG);
	assert_int_equal(records_frame(3, 80, 1), -EBADMSG);
	assert_int_equal(records_frame(1, 40, 0), -EBADMSG);
	assert_non_null(strstr(err, "kind 0"));
	assert_int_equal(records_frame(1, 40, SHMTRACE_KIND_MAX + 1), -EBADMSG);
	assert_int_equal(records_frame(SHMT_CAP_MAX_RECORDS + 1, 40, 1), -EBADMSG);
	assert_non_null(strstr(err, "out of range"));
}

/* Hand-made frames with a valid CRC but wrong content. */
static void test_frames_with_valid_crc_but_wrong_content_refused(void **state)
{
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_frame f;
	msgpack_sbuffer b;
	msgpack_packer pk;

	(void)state;
	msgpack_sbuffer_init(&b);
	msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);

	/* a string where a counter belongs */
	msgpack_pack_array(&pk, 8);
	msgpack_pack_uint64(&pk, SHMT_CAP_LOSS);
	for (int i = 0; i < 5; i++)
		msgpack_pack_uint64(&pk, i);
	msgpack_pack_str_with_body(&pk, "5", 1);
	finish(&b, 0);
	assert_int_equal(decode_buf(&b, &f, z), -EBADMSG);
	assert_non_null(strstr(err, "names_dropped"));

	/* too few fields */
	msgpack_sbuffer_clear(&b);
	msgpack_pack_array(&pk, 3);
	msgpack_pack_uint64(&pk, SHMT_CAP_END);
	msgpack_pack_uint64(&pk, 1);
	finish(&b, 0);
	assert_int_equal(decode_buf(&b, &f, z), -EBADMSG);

	/* unknown type */
	msgpack_sbuffer_clear(&b);
	msgpack_pack_array(&pk, 2);
	msgpack_pack_uint64(&pk, 77);
	finish(&b, 0);
	assert_int_equal(decode_buf(&b, &f, z), -EBADMSG);
	assert_non_null(strstr(err, "unknown frame type 77"));

	/* a negative type */
	msgpack_sbuffer_clear(&b);
	msgpack_pack_array(&pk, 2);
	msgpack_pack_int64(&pk, -1);
	finish(&b, 0);
	assert_int_equal(decode_buf(&b, &f, z), -EBADMSG);

	/* string id 0, and a name too long for its field */
	msgpack_sbuffer_clear(&b);
	msgpack_pack_array(&pk, 3);
	msgpack_pack_uint64(&pk, SHMT_CAP_STRINGS);
	msgpack_pack_array(&pk, 1);
	msgpack_pack_array(&pk, 2);
	msgpack_pack_uint64(&pk, 0);
	msgpack_pack_bin_with_body(&pk, "x", 1);
	finish(&b, 0);
	assert_int_equal(decode_buf(&b, &f, z), -EBADMSG);
	msgpack_sbuffer_clear(&b);
	msgpack_pack_array(&pk, 3);
	msgpack_pack_uint64(&pk, SHMT_CAP_THREADS);
	msgpack_pack_array(&pk, 1);
	msgpack_pack_array(&pk, 7);
	for (int i = 0; i < 5; i++)
		msgpack_pack_uint64(&pk, 1);
	msgpack_pack_str_with_body(&pk, "0123456789012345678901234567890123", 34);
	msgpack_pack_str_with_body(&pk, "p", 1);
	finish(&b, 0);
	assert_int_equal(decode_buf(&b, &f, z), -EBADMSG);
	assert_non_null(strstr(err, "thread name"));

	/* CRC encoded short (positive fixint): refused */
	msgpack_sbuffer_clear(&b);
	msgpack_pack_array(&pk, 2);
	msgpack_pack_uint64(&pk, SHMT_CAP_END);
	msgpack_pack_uint64(&pk, 5);
	assert_int_equal(decode_buf(&b, &f, z), -EBADMSG);

	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_frame_type_round_trips_alone),
		cmocka_unit_test(test_records_split_at_the_frame_limit_decode_whole),
		cmocka_unit_test(test_encoder_refuses_what_no_reader_accepts),
		cmocka_unit_test(test_encoder_cuts_long_names_and_writes_commit_as_kind),
		cmocka_unit_test(test_unknown_trailing_fields_are_skipped),
		cmocka_unit_test(test_records_frame_of_wrong_size_or_kind_refused),
		cmocka_unit_test(test_frames_with_valid_crc_but_wrong_content_refused),
		cmocka_unit_test(test_header_without_trailing_fields_reads_them_0),
		cmocka_unit_test(test_snapshot_header_round_trips),
		/* version-1 frames (40-byte RECORDS) still decode */
		cmocka_unit_test_setup_teardown(test_each_frame_type_round_trips_alone,
						 v1_on, v1_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
