/* SPDX-License-Identifier: MIT */
/*
 * capture_sample.h - what the capture-format tests share: a sample file
 * with every frame type once (version 2, or version 1 with g_v1 set), a
 * check that a decoded frame is the sample's, hand-made frames closed with
 * their CRC, and reading a whole file back through the reader.
 */
#ifndef SHMTRACE_TEST_CAPTURE_SAMPLE_H
#define SHMTRACE_TEST_CAPTURE_SAMPLE_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "capture.h"
#include "crc32c.h"
#include "shmtrace.h"

/* the last error a decoder or reader call wrote */
static char err[256];
static int g_v1;	/* sample_file() writes a version-1 file */

/* ---- fixtures ---- */

static inline struct shmt_cap_header sample_header(void)
{
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .part = 2, .run_id = 0x1122334455667788ull,
		.ring_capacity = 4096, .ring_mode = 1, .clock_tsc = 1,
		.collector_pid = 4242, .realtime0 = 1700000000000000000ull,
		.mono0 = 123456789, .started_ns = 987654321, .ring_id = 0xabcdef0123456789ull,
		.deleted = { .max_files = 2, .parts = 1, .records = 5000,
			     .from_ns = 123456789, .to_ns = 987654320 },
	};

	strcpy(h.host, "builder-7");
	strcpy(h.ring, "myapp");
	return h;
}

static const struct shmt_cap_string sample_strings[] = {
	{ 1, 3, "rpc" }, { 2, 6, "handle" }, { 65535, 0, "" }, { 7, 4, "a\0b\xff" },
};

static inline struct shmt_thread sample_thread(uint32_t i)
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

static inline struct shmt_record sample_record(uint64_t i)
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

static inline int write_tmp(const void *p, size_t n, char path[64])
{
	int fd;

	strcpy(path, "/tmp/test_capture.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, n), (ssize_t)n);
	return fd;
}

/* Appends the CRC to a hand-made frame whose array header counted it. */
static inline void finish(msgpack_sbuffer *b, size_t start)
{
	msgpack_packer pk;

	msgpack_packer_init(&pk, b, msgpack_sbuffer_write);
	assert_int_equal(msgpack_pack_fix_uint32(&pk,
			 shmt_crc32c(0, b->data + start, b->size - start)), 0);
}

static inline long decode_buf(const msgpack_sbuffer *b, struct shmt_cap_frame *f, msgpack_zone *z)
{
	err[0] = '\0';
	return shmt_cap_decode((const uint8_t *)b->data, b->size, f, z, err, sizeof(err));
}

/* A header frame of the given version, by hand: its first `fields` fields
 * (13: those of the first collectors; 14: with ring_id; 19: with the
 * parts deleted for --max-files; 33: with a snapshot's, all 0), then extra
 * unknown fields. */
static inline void put_header_fields(msgpack_sbuffer *b, uint64_t version, int fields, int extra)
{
	struct shmt_cap_header h = sample_header();
	const uint64_t deleted[] = { h.deleted.max_files, h.deleted.parts, h.deleted.records,
				     h.deleted.from_ns, h.deleted.to_ns };
	size_t start = b->size;
	msgpack_packer pk;

	msgpack_packer_init(&pk, b, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, (size_t)(2 + fields + extra));
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
	if (fields > SHMT_CAP_HEADER_RING_ID)
		msgpack_pack_uint64(&pk, h.ring_id);
	for (int i = SHMT_CAP_HEADER_MAX_FILES; i < fields && i < SHMT_CAP_HEADER_SNAPSHOT; i++)
		msgpack_pack_uint64(&pk, deleted[i - SHMT_CAP_HEADER_MAX_FILES]);
	/* a snapshot's fields (minor revision 2.2), as the sample's (none) */
	for (int i = SHMT_CAP_HEADER_SNAPSHOT; i < fields; i++) {
		if (i == SHMT_CAP_HEADER_SNAPSHOT + 1)
			msgpack_pack_str_with_body(&pk, h.snapshot.trigger, strlen(h.snapshot.trigger));
		else
			msgpack_pack_uint64(&pk, 0);
	}
	for (int i = 0; i < extra; i++)	/* a newer minor's fields */
		msgpack_pack_map(&pk, 0);
	finish(b, start);
}

static inline void put_header_version(msgpack_sbuffer *b, uint64_t version, int extra)
{
	put_header_fields(b, version, SHMT_CAP_HEADER_SNAPSHOT + SHMT_CAP_SNAPSHOT_FIELDS, extra);
}

/* Every frame type once: HEADER STRINGS THREADS RECORDS LOSS END; with
 * g_v1 as a version-1 collector wrote it (40-byte RECORDS frames). */
static inline void sample_file(msgpack_sbuffer *b, size_t ends[6])
{
	struct shmt_cap_header h = sample_header();
	struct shmt_thread t[NTHR] = { sample_thread(0), sample_thread(1) };
	struct shmt_record r[NREC];

	for (int i = 0; i < NREC; i++)
		r[i] = sample_record(i);
	msgpack_sbuffer_init(b);
	if (g_v1)
		put_header_fields(b, 1, SHMT_CAP_HEADER_FIELDS, 0);
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
static inline int frame_is(const struct shmt_cap_frame *f, int i)
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

/*
 * Reads a whole file: returns the final rc of open or next (0 clean) and
 * stores in *nok how many frames (header included) matched sample_file().
 */
static inline int read_all(const char *path, int *nok)
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
/* cmocka setup and teardown: the test reads a version-1 sample file */
static inline int v1_on(void **state)
{
	(void)state;
	g_v1 = 1;
	return 0;
}

static inline int v1_off(void **state)
{
	(void)state;
	g_v1 = 0;
	return 0;
}

#endif
