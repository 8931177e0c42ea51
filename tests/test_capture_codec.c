/* SPDX-License-Identifier: MIT */
/*
 * test_capture.c - the capture file format: round trips, cuts at every
 * byte, flipped bytes, garbage, and hand-made frames a reader must refuse.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "capture.h"
#include "crc32c.h"
#include "mp_head.h"
#include "shmtrace.h"

static char err[256];
static int g_v1;	/* sample_file() writes a version-1 file */

/* ---- fixtures ---- */

static struct shmt_cap_header sample_header(void)
{
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .part = 2, .run_id = 0x1122334455667788ull,
		.ring_capacity = 4096, .ring_mode = 1, .clock_tsc = 1,
		.collector_pid = 4242, .realtime0 = 1700000000000000000ull,
		.mono0 = 123456789, .started_ns = 987654321, .ring_id = 0xabcdef0123456789ull,
	};

	strcpy(h.host, "builder-7");
	strcpy(h.ring, "myapp");
	return h;
}

static const struct shmt_cap_string sample_strings[] = {
	{ 1, 3, "rpc" }, { 2, 6, "handle" }, { 65535, 0, "" }, { 7, 4, "a\0b\xff" },
};

static struct shmt_thread sample_thread(uint32_t i)
{
	struct shmt_thread t = {
		.pid = 100 + i, .tid = 200 + i, .start_time = 3000 + i,
		.pidns = 4026531836ull, .flags = i,
	};

	/* slot 1 has empty names: msgpack-c decodes those with a NULL pointer */
	if (i == 1)
		return t;
	snprintf(t.name, sizeof(t.name), "worker-%u", i);
	snprintf(t.pname, sizeof(t.pname), "server");
	return t;
}

static struct shmt_record sample_record(uint64_t i)
{
	struct shmt_record r = {
		.ts = 1000 * i + 1, .dur = i * 7, .flow = i & 3 ? 0 : i,
		.pid = 100, .tid = 200 + (uint32_t)(i % 3), .name = 2, .cat = 1,
		.commit = 1 + i % 3,
	};

	return r;
}

static const struct shmt_cap_loss sample_loss = {
	.at_ns = 55, .dropped = 1, .overwritten = 2, .lock_dropped = 8, .torn = 4, .lock_timeouts = 3,
	.strings_dropped = 6, .names_dropped = 5,
	.max_strings = 4096, .string_bytes = 262144, .max_threads = 1024, .published = 77,
};
static const struct shmt_cap_end sample_end = { 10, 99999, 3 };

#define NREC 5
#define NTHR 2

static void put_header_fields(msgpack_sbuffer *b, uint64_t version, bool old, int extra);

/* Every frame type once: HEADER STRINGS THREADS RECORDS LOSS END; with
 * g_v1 as a version-1 collector wrote it (40-byte RECORDS frames). */
static void sample_file(msgpack_sbuffer *b, size_t ends[6])
{
	struct shmt_cap_header h = sample_header();
	struct shmt_thread t[NTHR] = { sample_thread(0), sample_thread(1) };
	struct shmt_record r[NREC];

	for (int i = 0; i < NREC; i++)
		r[i] = sample_record(i);
	msgpack_sbuffer_init(b);
	if (g_v1)
		put_header_fields(b, 1, false, 0);
	else
		assert_int_equal(shmt_cap_put_header(b, &h), 0);
	ends[0] = b->size;
	assert_int_equal(shmt_cap_put_strings(b, sample_strings, 4), 0);
	ends[1] = b->size;
	assert_int_equal(shmt_cap_put_threads(b, t, NTHR), 0);
	ends[2] = b->size;
	if (g_v1)
		assert_int_equal(shmt_cap_put_records_v1(b, 40, r, NREC), 0);
	else
		assert_int_equal(shmt_cap_put_records(b, 40, r, NREC), 0);
	ends[3] = b->size;
	assert_int_equal(shmt_cap_put_loss(b, &sample_loss), 0);
	ends[4] = b->size;
	assert_int_equal(shmt_cap_put_end(b, &sample_end), 0);
	ends[5] = b->size;
}

/* Checks that f is frame i (0 = header) of sample_file(). */
static int frame_is(const struct shmt_cap_frame *f, int i)
{
	struct shmt_cap_header h = sample_header();

	if (g_v1)
		h.version = 1;
	switch (i) {
	case 0:
		return f->type == SHMT_CAP_HEADER && !memcmp(&f->header, &h, sizeof(h));
	case 1:
		if (f->type != SHMT_CAP_STRINGS || f->strings.n != 4)
			return 0;
		for (int k = 0; k < 4; k++)
			if (f->strings.v[k].id != sample_strings[k].id ||
			    f->strings.v[k].len != sample_strings[k].len ||
			    memcmp(f->strings.v[k].s, sample_strings[k].s, sample_strings[k].len) ||
			    f->strings.v[k].s[f->strings.v[k].len] != '\0')
				return 0;
		return 1;
	case 2:
		if (f->type != SHMT_CAP_THREADS || f->threads.n != NTHR)
			return 0;
		for (uint32_t k = 0; k < NTHR; k++) {
			struct shmt_thread t = sample_thread(k);

			if (memcmp(&f->threads.v[k], &t, sizeof(t)))
				return 0;
		}
		return 1;
	case 3:
		if (f->type != SHMT_CAP_RECORDS || f->records.n != NREC ||
		    f->records.first_seq != 40 || f->records.packed != !g_v1)
			return 0;
		for (int k = 0; k < NREC; k++) {
			struct shmt_record r = sample_record(k);

			if (memcmp(&f->records.v[k], &r, sizeof(r)))
				return 0;
		}
		return 1;
	case 4:
		return f->type == SHMT_CAP_LOSS &&
		       !memcmp(&f->loss, &sample_loss, sizeof(sample_loss));
	case 5:
		return f->type == SHMT_CAP_END &&
		       !memcmp(&f->end, &sample_end, sizeof(sample_end));
	}
	return 0;
}

static int write_tmp(const void *p, size_t n, char path[64])
{
	int fd;

	strcpy(path, "/tmp/test_capture.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, n), (ssize_t)n);
	return fd;
}

/*
 * Reads a whole file: returns the final rc of open or next (0 clean) and
 * stores in *nok how many frames (header included) matched sample_file().
 */
static int read_all(const char *path, int *nok)
{
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	int rc, i = 1;

	*nok = 0;
	err[0] = '\0';
	rc = shmt_cap_open(path, &r, err, sizeof(err));
	if (rc < 0) {
		assert_non_null(err[0] ? err : NULL);
		return rc;
	}
	*nok = frame_is(&(struct shmt_cap_frame){ .type = SHMT_CAP_HEADER,
			.header = *shmt_cap_header_of(r) }, 0);
	assert_true(*nok == 1);
	while ((rc = shmt_cap_next(r, &f, err, sizeof(err))) == 1) {
		/* frames are either right or refused: never wrong */
		assert_true(frame_is(&f, i));
		i++;
		(*nok)++;
	}
	if (rc < 0)
		assert_true(err[0]);
	/* sticky */
	assert_int_equal(shmt_cap_next(r, &f, err, sizeof(err)), rc);
	shmt_cap_close(r);
	return rc;
}

/* Appends the CRC to a hand-made frame whose array header counted it. */
static void finish(msgpack_sbuffer *b, size_t start)
{
	msgpack_packer pk;

	msgpack_packer_init(&pk, b, msgpack_sbuffer_write);
	assert_int_equal(msgpack_pack_fix_uint32(&pk,
			 shmt_crc32c(0, b->data + start, b->size - start)), 0);
}

static long decode_buf(const msgpack_sbuffer *b, struct shmt_cap_frame *f, msgpack_zone *z)
{
	err[0] = '\0';
	return shmt_cap_decode((const uint8_t *)b->data, b->size, f, z, err, sizeof(err));
}

/* ---- tests ---- */

static void test_crc32c(void **state)
{
	(void)state;
	assert_int_equal(shmt_crc32c(0, "123456789", 9), 0xe3069283);
	assert_int_equal(shmt_crc32c(shmt_crc32c(0, "1234", 4), "56789", 5), 0xe3069283);
	assert_int_equal(shmt_crc32c(0, "", 0), 0);
}

/* Each frame type encodes and decodes to the same values, alone. */
static void test_roundtrip_each(void **state)
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
static void test_split(void **state)
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
static void test_encoder_refuses(void **state)
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
static void test_encoder_sanitizes(void **state)
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

/* A file with every frame type reads back identically and ends cleanly. */
static void test_file_roundtrip(void **state)
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
static void test_cut_everywhere(void **state)
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
static void test_flip_everywhere(void **state)
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

static void test_empty_and_missing(void **state)
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

static void test_not_a_capture(void **state)
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
static void test_random_bytes(void **state)
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
			long len = shmt_cap_decode(p + s, n - s, &f, z, err, sizeof(err));

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

/* A header frame of the given version, by hand: the 13 fields of the
 * first collectors, then ring_id unless old, then extra unknown fields. */
static void put_header_fields(msgpack_sbuffer *b, uint64_t version, bool old, int extra)
{
	struct shmt_cap_header h = sample_header();
	size_t start = b->size;
	msgpack_packer pk;

	msgpack_packer_init(&pk, b, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 15 + !old + extra);
	msgpack_pack_uint64(&pk, SHMT_CAP_HEADER);
	msgpack_pack_str_with_body(&pk, "SHMTCAP", 7);
	msgpack_pack_uint64(&pk, version);
	msgpack_pack_uint64(&pk, h.part);
	msgpack_pack_uint64(&pk, h.run_id);
	msgpack_pack_str_with_body(&pk, h.host, strlen(h.host));
	msgpack_pack_str_with_body(&pk, h.ring, strlen(h.ring));
	msgpack_pack_uint64(&pk, h.ring_capacity);
	msgpack_pack_uint64(&pk, h.ring_mode);
	msgpack_pack_uint64(&pk, h.clock_tsc);
	msgpack_pack_uint64(&pk, h.collector_pid);
	msgpack_pack_uint64(&pk, h.realtime0);
	msgpack_pack_uint64(&pk, h.mono0);
	msgpack_pack_uint64(&pk, h.started_ns);
	if (!old)
		msgpack_pack_uint64(&pk, h.ring_id);
	for (int i = 0; i < extra; i++)	/* a newer minor's fields */
		msgpack_pack_map(&pk, 0);
	finish(b, start);
}

static void put_header_version(msgpack_sbuffer *b, uint64_t version, int extra)
{
	put_header_fields(b, version, false, extra);
}

/* A header without ring_id (an older collector) reads with ring_id 0. */
static void test_header_without_ring_id(void **state)
{
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_header h = sample_header();
	struct shmt_cap_frame f;
	msgpack_sbuffer b;

	(void)state;
	msgpack_sbuffer_init(&b);
	put_header_fields(&b, SHMT_CAP_VERSION, true, 0);
	assert_int_equal(decode_buf(&b, &f, z), (long)b.size);
	assert_int_equal(f.type, SHMT_CAP_HEADER);
	h.ring_id = 0;
	assert_memory_equal(&f.header, &h, sizeof(h));
	/* and the encoder writes it, as field 14 */
	msgpack_sbuffer_clear(&b);
	h.ring_id = 77;
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(decode_buf(&b, &f, z), (long)b.size);
	assert_int_equal(f.header.ring_id, 77);
	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
}

static void test_newer_version(void **state)
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

/* Unknown trailing fields of a newer minor version are skipped. */
static void test_trailing_fields(void **state)
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

static void test_bad_records(void **state)
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
static void test_bad_frames(void **state)
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

	/* lengths that could never fit a frame: refused now, not "need more" */
	msgpack_sbuffer_clear(&b);
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

	/* nesting deeper than any frame needs */
	msgpack_sbuffer_clear(&b);
	for (int i = 0; i < 40; i++)
		msgpack_pack_array(&pk, 1);
	assert_int_equal(decode_buf(&b, &f, z), -EBADMSG);
	assert_non_null(strstr(err, "nested"));

	msgpack_zone_free(z);
	msgpack_sbuffer_destroy(&b);
}

/* END then more bytes: the END frame, then -EBADMSG. A second header too. */
static void test_after_end_and_second_header(void **state)
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
static void test_big_file(void **state)
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


/* ---- version 2: PACKED frames ---- */

static int v1_on(void **state)
{
	(void)state;
	g_v1 = 1;
	return 0;
}

static int v1_off(void **state)
{
	(void)state;
	g_v1 = 0;
	return 0;
}

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

static void test_packed_extremes(void **state)
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
static void test_ring_records(void **state)
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

/* Bench case 6's records (ts every 1000 ns, 500 ns long, 4 names, 10 % in
 * flows): at most 12 bytes a span on disk, frame included. */
static void test_packed_size(void **state)
{
	const size_t n = 20000;
	struct shmt_record *r = calloc(n, sizeof(*r));
	msgpack_sbuffer b;
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
	print_message("%.2f bytes per span\n", (double)b.size / (double)n);
	assert_true(b.size <= 12 * n);
	/* the version-1 frames it replaces: 40 bytes and more */
	msgpack_sbuffer_clear(&b);
	assert_int_equal(shmt_cap_put_records_v1(&b, 0, r, n), 0);
	assert_true(b.size >= 40 * n);
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

static void test_bad_packed(void **state)
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
static void test_packed_doc_example(void **state)
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

/*
 * The head of each kind of msgpack object, as the decoder's walker and the
 * fuzzer's frame finder read it: a wrong length here makes the walker
 * take a frame's end in the wrong place.
 */
static void test_mp_head(void **state)
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c),
		cmocka_unit_test(test_mp_head),
		cmocka_unit_test(test_roundtrip_each),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_encoder_refuses),
		cmocka_unit_test(test_encoder_sanitizes),
		cmocka_unit_test(test_file_roundtrip),
		cmocka_unit_test(test_cut_everywhere),
		cmocka_unit_test(test_flip_everywhere),
		cmocka_unit_test(test_empty_and_missing),
		cmocka_unit_test(test_not_a_capture),
		cmocka_unit_test(test_random_bytes),
		cmocka_unit_test(test_newer_version),
		cmocka_unit_test(test_trailing_fields),
		cmocka_unit_test(test_bad_records),
		cmocka_unit_test(test_bad_frames),
		cmocka_unit_test(test_after_end_and_second_header),
		cmocka_unit_test(test_header_without_ring_id),
		cmocka_unit_test(test_big_file),
		cmocka_unit_test(test_packed_extremes),
		cmocka_unit_test(test_ring_records),
		cmocka_unit_test(test_packed_size),
		cmocka_unit_test(test_bad_packed),
		cmocka_unit_test(test_packed_doc_example),
		/* a version-1 file (40-byte RECORDS) still reads, cut or not */
		cmocka_unit_test_setup_teardown(test_roundtrip_each, v1_on, v1_off),
		cmocka_unit_test_setup_teardown(test_file_roundtrip, v1_on, v1_off),
		cmocka_unit_test_setup_teardown(test_cut_everywhere, v1_on, v1_off),
		cmocka_unit_test_setup_teardown(test_flip_everywhere, v1_on, v1_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
