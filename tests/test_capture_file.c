/* SPDX-License-Identifier: MIT */
/*
 * test_capture_file.c - the capture file reader: a whole file reads back,
 * a file cut at any byte or with any byte flipped reads a correct prefix
 * of frames and then an error, garbage and foreign files are refused, and
 * frames larger than the reader's first buffer read whole.
 */
#include "capture_sample.h"

/* A file with every frame type reads back identically and ends cleanly. */
static void test_file_with_every_frame_type_reads_back_equal(void **state)
{
	msgpack_sbuffer b;
	size_t ends[6];
	char path[64];
	int nok, fd;

	(void)state;
	sample_file(&b, ends);
	fd = write_tmp(b.data, b.size, path);
	assert_int_equal(read_all(path, &nok), 0);
	assert_int_equal(nok, 6);
	close(fd);
	unlink(path);
	msgpack_sbuffer_destroy(&b);
}

/* Cut at every byte: all whole frames, then -EPIPE (or the empty error). */
static void test_file_cut_at_any_byte_reads_whole_frames_then_epipe(void **state)
{
	msgpack_sbuffer b;
	size_t ends[6];
	char path[64];
	int fd;

	(void)state;
	sample_file(&b, ends);
	fd = write_tmp(b.data, b.size, path);
	for (size_t cut = b.size + 1; cut-- > 0; ) {
		int whole = 0, nok, rc;

		assert_int_equal(ftruncate(fd, cut), 0);
		while (whole < 6 && ends[whole] <= cut)
			whole++;
		rc = read_all(path, &nok);
		if (cut == b.size) {
			assert_int_equal(rc, 0);
		} else if (cut == 0) {
			assert_int_equal(rc, -EBADMSG);
			assert_non_null(strstr(err, "empty capture file"));
		} else {
			assert_int_equal(rc, -EPIPE);
			assert_non_null(strstr(err, "offset"));
		}
		assert_int_equal(nok, whole);
	}
	close(fd);
	unlink(path);
	msgpack_sbuffer_destroy(&b);
}

/* Flip each byte (two ways): a correct prefix of frames, then an error. */
static void test_flipped_byte_reads_a_correct_prefix_then_fails(void **state)
{
	static const uint8_t masks[] = { 0x01, 0xff };
	msgpack_sbuffer b;
	size_t ends[6];
	char path[64];
	int fd;

	(void)state;
	sample_file(&b, ends);
	fd = write_tmp(b.data, b.size, path);
	for (size_t i = 0; i < b.size; i++) {
		for (size_t m = 0; m < sizeof(masks); m++) {
			uint8_t c = (uint8_t)b.data[i] ^ masks[m];
			int whole = 0, nok, rc;

			while (whole < 6 && ends[whole] <= i)
				whole++;
			assert_int_equal(pwrite(fd, &c, 1, i), 1);
			rc = read_all(path, &nok);
			assert_true(rc < 0);
			assert_int_equal(nok, whole);
		}
		assert_int_equal(pwrite(fd, b.data + i, 1, i), 1);
	}
	close(fd);
	unlink(path);
	msgpack_sbuffer_destroy(&b);
}

static void test_empty_or_missing_file_refused(void **state)
{
	char path[64];
	int fd, nok;

	(void)state;
	fd = write_tmp("", 0, path);
	assert_int_equal(read_all(path, &nok), -EBADMSG);
	assert_non_null(strstr(err, "empty capture file"));
	close(fd);
	unlink(path);
	assert_int_equal(read_all("/nonexistent/capture", &nok), -ENOENT);
}

static void test_file_of_another_format_refused(void **state)
{
	const char *text = "{\"traceEvents\": []}\n";
	char path[64];
	int fd, nok;

	(void)state;
	fd = write_tmp(text, strlen(text), path);
	assert_int_equal(read_all(path, &nok), -EPROTO);
	assert_non_null(strstr(err, "not a shmtrace capture"));
	close(fd);
	unlink(path);
}

/* Random files, and random bytes after a valid header: errors only. */
static void test_random_bytes_give_errors_never_frames(void **state)
{
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_header h = sample_header();
	struct shmt_cap_frame f;
	msgpack_sbuffer b;
	char path[64];

	(void)state;
	srandom(12345);
	msgpack_sbuffer_init(&b);
	for (int iter = 0; iter < 400; iter++) {
		size_t n = (size_t)(random() % 600) + 1;
		uint8_t *p = malloc(n);
		int fd, nok, rc;

		assert_non_null(p);
		for (size_t i = 0; i < n; i++)
			p[i] = (uint8_t)random();
		if (iter & 1)	/* lots of arrays and lengths */
			for (size_t i = 0; i < n; i += 3)
				p[i] = (uint8_t)(0x90 + random() % 0x70);
		/* memory decoder over every suffix */
		for (size_t s = 0; s < n; s++) {
			long len;

			err[0] = '\0';	/* each refusal must say why, not the last one */
			len = shmt_cap_decode(p + s, n - s, &f, z, err, sizeof(err));
			assert_true(len <= (long)(n - s));
			assert_true(len != -EBADMSG || err[0]);
			msgpack_zone_clear(z);
		}
		/* file reader: bare garbage, then garbage after a valid header */
		fd = write_tmp(p, n, path);
		rc = read_all(path, &nok);
		assert_true(rc < 0);
		close(fd);
		unlink(path);
		msgpack_sbuffer_clear(&b);
		assert_int_equal(shmt_cap_put_header(&b, &h), 0);
		assert_int_equal(msgpack_sbuffer_write(&b, (const char *)p, n), 0);
		fd = write_tmp(b.data, b.size, path);
		rc = read_all(path, &nok);
		assert_true(rc < 0);
		assert_int_equal(nok, 1);
		close(fd);
		unlink(path);
		free(p);
	}
	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
}

static void test_newer_format_version_refused_by_name(void **state)
{
	msgpack_sbuffer b;
	char path[64];
	int fd, nok;

	(void)state;
	msgpack_sbuffer_init(&b);
	put_header_version(&b, SHMT_CAP_VERSION + 1, 0);
	fd = write_tmp(b.data, b.size, path);
	assert_int_equal(read_all(path, &nok), -EPROTO);
	assert_non_null(strstr(err, "capture format version 3 needs a newer shmtrace"));
	close(fd);
	unlink(path);
	msgpack_sbuffer_destroy(&b);
}

/* END then more bytes: the END frame, then -EBADMSG. A second header too. */
static void test_bytes_after_end_or_a_second_header_refused(void **state)
{
	struct shmt_cap_header h = sample_header();
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	msgpack_sbuffer b;
	char path[64];
	int fd;

	(void)state;
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_end(&b, &sample_end), 0);
	assert_int_equal(msgpack_sbuffer_write(&b, "\0", 1), 0);
	fd = write_tmp(b.data, b.size, path);
	assert_int_equal(shmt_cap_open(path, &r, err, sizeof(err)), 0);
	assert_int_equal(shmt_cap_next(r, &f, err, sizeof(err)), 1);
	assert_int_equal(f.type, SHMT_CAP_END);
	assert_int_equal(shmt_cap_next(r, &f, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "follow the END"));
	shmt_cap_close(r);
	close(fd);
	unlink(path);

	msgpack_sbuffer_clear(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	fd = write_tmp(b.data, b.size, path);
	assert_int_equal(shmt_cap_open(path, &r, err, sizeof(err)), 0);
	assert_int_equal(shmt_cap_next(r, &f, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "second HEADER"));
	shmt_cap_close(r);
	close(fd);
	unlink(path);
	msgpack_sbuffer_destroy(&b);
}

/* Frames larger than the reader's first buffer, read through the file. */
static void test_frames_larger_than_the_read_buffer_read_whole(void **state)
{
	size_t n = 3 * SHMT_CAP_SPLIT_RECORDS + 11, got = 0;
	struct shmt_cap_header h = sample_header();
	struct shmt_record *rec = calloc(n, sizeof(*rec));
	struct shmt_cap_end e = { n, 1, 0 };
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	msgpack_sbuffer b;
	char path[64];
	int fd, rc;

	(void)state;
	assert_non_null(rec);
	for (size_t i = 0; i < n; i++)
		rec[i] = sample_record(i);
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_records(&b, 0, rec, n), 0);
	assert_int_equal(shmt_cap_put_end(&b, &e), 0);
	fd = write_tmp(b.data, b.size, path);
	assert_int_equal(shmt_cap_open(path, &r, err, sizeof(err)), 0);
	while ((rc = shmt_cap_next(r, &f, err, sizeof(err))) == 1) {
		if (f.type != SHMT_CAP_RECORDS)
			continue;
		assert_int_equal(f.records.first_seq, got);
		assert_memory_equal(f.records.v, rec + got, f.records.n * sizeof(*rec));
		got += f.records.n;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(got, n);
	shmt_cap_close(r);
	close(fd);
	unlink(path);
	msgpack_sbuffer_destroy(&b);
	free(rec);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_with_every_frame_type_reads_back_equal),
		cmocka_unit_test(test_file_cut_at_any_byte_reads_whole_frames_then_epipe),
		cmocka_unit_test(test_flipped_byte_reads_a_correct_prefix_then_fails),
		cmocka_unit_test(test_empty_or_missing_file_refused),
		cmocka_unit_test(test_file_of_another_format_refused),
		cmocka_unit_test(test_random_bytes_give_errors_never_frames),
		cmocka_unit_test(test_newer_format_version_refused_by_name),
		cmocka_unit_test(test_bytes_after_end_or_a_second_header_refused),
		cmocka_unit_test(test_frames_larger_than_the_read_buffer_read_whole),
		/* a version-1 file (40-byte RECORDS) still reads, cut or not */
		cmocka_unit_test_setup_teardown(test_file_with_every_frame_type_reads_back_equal,
						 v1_on, v1_off),
		cmocka_unit_test_setup_teardown(test_file_cut_at_any_byte_reads_whole_frames_then_epipe,
						 v1_on, v1_off),
		cmocka_unit_test_setup_teardown(test_flipped_byte_reads_a_correct_prefix_then_fails,
						 v1_on, v1_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
