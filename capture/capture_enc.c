/* SPDX-License-Identifier: MIT */
/*
 * capture_enc.c - writes capture frames (docs/CAPTURE-FORMAT.md) into a
 * msgpack_sbuffer for the collector to hand to io_uring.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "crc32c.h"
#include "shmtrace.h"

/*
 * Every frame is encoded as: array header (fields + 2), type, fields,
 * then the CRC-32C of all those bytes as a fixed 5-byte uint32 (0xce + 4
 * bytes big-endian), so a reader finds it at the frame's last 5 bytes.
 */
struct frame {
	msgpack_sbuffer *b;
	msgpack_packer pk;
	size_t start;		/* b->size when the frame began */
	int rc;			/* first packing error, sticky */
};

static void frame_begin(struct frame *fr, msgpack_sbuffer *b, size_t start,
			enum shmt_cap_type type, size_t nfields)
{
	fr->b = b;
	fr->start = start;
	msgpack_packer_init(&fr->pk, b, msgpack_sbuffer_write);
	fr->rc = msgpack_pack_array(&fr->pk, nfields + 2);
	if (!fr->rc)
		fr->rc = msgpack_pack_unsigned_int(&fr->pk, type);
}

static void put_u64(struct frame *fr, uint64_t v)
{
	if (!fr->rc)
		fr->rc = msgpack_pack_uint64(&fr->pk, v);
}

static void put_str(struct frame *fr, const char *s, size_t len)
{
	if (!fr->rc)
		fr->rc = msgpack_pack_str_with_body(&fr->pk, s, len);
}

static void put_bin(struct frame *fr, const void *p, size_t len)
{
	if (!fr->rc)
		fr->rc = msgpack_pack_bin_with_body(&fr->pk, p, len);
}

static void put_array(struct frame *fr, size_t n)
{
	if (!fr->rc)
		fr->rc = msgpack_pack_array(&fr->pk, n);
}

/* Appends the CRC; on any failure rolls b back to where the frame began. */
static int frame_end(struct frame *fr)
{
	if (!fr->rc) {
		uint32_t crc = shmt_crc32c(0, fr->b->data + fr->start,
					   fr->b->size - fr->start);
		fr->rc = msgpack_pack_fix_uint32(&fr->pk, crc);
	}
	if (fr->rc) {
		fr->b->size = fr->start;
		return -ENOMEM;
	}
	return 0;
}

int shmt_cap_put_header(msgpack_sbuffer *b, const struct shmt_cap_header *h)
{
	struct frame fr;

	frame_begin(&fr, b, b->size, SHMT_CAP_HEADER, SHMT_CAP_HEADER_FIELDS);
	put_str(&fr, SHMT_CAP_MAGIC, strlen(SHMT_CAP_MAGIC));
	put_u64(&fr, SHMT_CAP_VERSION);
	put_u64(&fr, h->part);
	put_u64(&fr, h->run_id);
	put_str(&fr, h->host, strnlen(h->host, sizeof(h->host) - 1));
	put_str(&fr, h->ring, strnlen(h->ring, sizeof(h->ring) - 1));
	put_u64(&fr, h->ring_capacity);
	put_u64(&fr, h->ring_mode);
	put_u64(&fr, h->clock_tsc);
	put_u64(&fr, h->collector_pid);
	put_u64(&fr, h->realtime0);
	put_u64(&fr, h->mono0);
	put_u64(&fr, h->started_ns);
	put_u64(&fr, h->ring_id);	/* trailing: older readers skip it */
	return frame_end(&fr);
}

int shmt_cap_put_strings(msgpack_sbuffer *b, const struct shmt_cap_string *s, size_t n)
{
	size_t start = b->size;

	for (size_t i = 0; i < n; i++)
		if (!s[i].id || s[i].id > SHMT_MAX_STRINGS ||
		    s[i].len > SHMT_STRING_MAX || (s[i].len && !s[i].s))
			return -EINVAL;
	for (size_t i = 0; i < n; ) {
		size_t k = n - i < SHMT_CAP_SPLIT_ITEMS ? n - i : SHMT_CAP_SPLIT_ITEMS;
		struct frame fr;

		frame_begin(&fr, b, b->size, SHMT_CAP_STRINGS, SHMT_CAP_LIST_FIELDS);
		put_array(&fr, k);
		for (size_t j = i; j < i + k; j++) {
			put_array(&fr, SHMT_CAP_STRING_ITEM_FIELDS);
			put_u64(&fr, s[j].id);
			put_bin(&fr, s[j].s, s[j].len);
		}
		if (frame_end(&fr)) {
			b->size = start;
			return -ENOMEM;
		}
		i += k;
	}
	return 0;
}

int shmt_cap_put_threads(msgpack_sbuffer *b, const struct shmt_thread *t, size_t n)
{
	size_t start = b->size;

	for (size_t i = 0; i < n; ) {
		size_t k = n - i < SHMT_CAP_SPLIT_ITEMS ? n - i : SHMT_CAP_SPLIT_ITEMS;
		struct frame fr;

		frame_begin(&fr, b, b->size, SHMT_CAP_THREADS, SHMT_CAP_LIST_FIELDS);
		put_array(&fr, k);
		for (size_t j = i; j < i + k; j++) {
			/* names come from shared memory: maybe unterminated */
			put_array(&fr, SHMT_CAP_THREAD_ITEM_FIELDS);
			put_u64(&fr, t[j].pid);
			put_u64(&fr, t[j].tid);
			put_u64(&fr, t[j].start_time);
			put_u64(&fr, t[j].pidns);
			put_u64(&fr, t[j].flags);
			put_str(&fr, t[j].name, strnlen(t[j].name, SHMT_NAME_LEN - 1));
			put_str(&fr, t[j].pname, strnlen(t[j].pname, SHMT_NAME_LEN - 1));
		}
		if (frame_end(&fr)) {
			b->size = start;
			return -ENOMEM;
		}
		i += k;
	}
	return 0;
}

static void le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* The file layout is little-endian whatever the host; on x86 this is a copy. */
static void record_to_le(uint8_t out[SHMT_RECORD_SIZE], const struct shmt_record *r)
{
	le64(out + 0, r->ts);
	le64(out + 8, r->dur);
	le64(out + 16, r->flow);
	le32(out + 24, r->pid);
	le32(out + 28, r->tid);
	out[32] = (uint8_t)r->name;
	out[33] = (uint8_t)(r->name >> 8);
	out[34] = (uint8_t)r->cat;
	out[35] = (uint8_t)(r->cat >> 8);
	le32(out + 36, SHMT_COMMIT_KIND(r->commit));
}

/* Kinds outside what a reader accepts, or sequences that wrap: -EINVAL. */
static int check_records(uint64_t first_seq, const struct shmt_record *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t kind = SHMT_COMMIT_KIND(r[i].commit);

		if (!shmt_kind_valid(kind))
			return -EINVAL;
	}
	if (n && first_seq + n < first_seq)
		return -EINVAL;
	return 0;
}

int shmt_cap_put_records_v1(msgpack_sbuffer *b, uint64_t first_seq, const struct shmt_record *r, size_t n)
{
	size_t start = b->size;
	int ret = check_records(first_seq, r, n);

	if (ret < 0)
		return ret;
	for (size_t i = 0; i < n; ) {
		size_t k = n - i < SHMT_CAP_SPLIT_RECORDS ? n - i : SHMT_CAP_SPLIT_RECORDS;
		struct frame fr;

		frame_begin(&fr, b, b->size, SHMT_CAP_RECORDS, SHMT_CAP_RECORDS_FIELDS);
		put_u64(&fr, first_seq + i);
		put_u64(&fr, k);
		if (!fr.rc)
			fr.rc = msgpack_pack_bin(&fr.pk, k * SHMT_RECORD_SIZE);
		for (size_t j = i; j < i + k && !fr.rc; j++) {
			uint8_t le[SHMT_RECORD_SIZE];

			record_to_le(le, &r[j]);
			fr.rc = msgpack_pack_bin_body(&fr.pk, le, sizeof(le));
		}
		if (frame_end(&fr)) {
			b->size = start;
			return -ENOMEM;
		}
		i += k;
	}
	return 0;
}

/*
 * Version 2: PACKED frames (docs/CAPTURE-FORMAT.md, "PACKED (7)").
 *
 * The frame is [0x95, 7, first_seq, count, body, crc] where count is
 * always written as a uint32 (0xce) and body as a bin32 (0xc6), so that
 * both can be filled in once the records are encoded: the collector
 * encodes straight from the ring into the buffer io_uring writes, and
 * stops at the first slot that is not a finished record.
 */
#define PACKED_HEAD	(1 + 1 + 9 + 5 + 5)	/* array, type, first_seq, count, bin32 */

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/*
 * Encodes r[0..n) into p. With ring set, r are ring slots whose commit
 * words hold (sequence & 0xffffff) << 8 | kind, read once each (another
 * process may be writing them), and encoding stops before the first one
 * that is not a finished record of first_seq + i. Returns the records
 * encoded; *end is where they end.
 */
static size_t pack_body(uint8_t *p, const struct shmt_record *r, size_t n,
			uint64_t first_seq, bool ring, uint8_t **end)
{
	uint64_t prev_ts = 0;
	uint32_t pid = 0, tid = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		struct shmt_record x;
		uint32_t kind;
		uint64_t d, tag;
		bool thread;

		memcpy(&x, &r[i], sizeof(x));
		kind = SHMT_COMMIT_KIND(x.commit);
		if (ring && !shmt_commit_is(x.commit, first_seq + i))
			break;
		thread = i == 0 || x.pid != pid || x.tid != tid;
		tag = (uint64_t)kind << 2 | (uint64_t)(x.flow != 0) << 1 | thread;
		p = put_varint(p, tag);
		if (thread) {
			p = put_varint(p, x.pid);
			p = put_varint(p, x.tid);
			pid = x.pid;
			tid = x.tid;
		}
		/* zigzag: a parent span ends (and is written) after its
		 * children but starts before them */
		d = x.ts - prev_ts;
		p = put_varint(p, (d << 1) ^ (0 - (d >> 63)));
		prev_ts = x.ts;
		p = put_varint(p, x.dur);
		p = put_varint(p, x.name);
		p = put_varint(p, x.cat);
		if (x.flow)
			p = put_varint(p, x.flow);
	}
	*end = p;
	return i;
}

static void be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Makes room for PACKED_HEAD + n records + CRC at the end of b. */
static int packed_room(msgpack_sbuffer *b, size_t n)
{
	size_t need = PACKED_HEAD + n * SHMT_CAP_PACKED_MAX + SHMT_CAP_CRC_BYTES;
	size_t alloc;
	char *p;

	if (b->alloc - b->size >= need)
		return 0;
	alloc = b->alloc * 2 > b->size + need ? b->alloc * 2 : b->size + need;
	p = realloc(b->data, alloc);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->alloc = alloc;
	return 0;
}

/* One PACKED frame of at most SHMT_CAP_SPLIT_RECORDS records, appended to
 * b. Returns the records in it (0: none, b unchanged) or -ENOMEM. */
static long put_packed(msgpack_sbuffer *b, uint64_t first_seq, const struct shmt_record *r,
		       size_t n, bool ring)
{
	uint8_t *start, *p, *body, *end;
	size_t k, len;
	uint32_t crc;

	if (packed_room(b, n) < 0)
		return -ENOMEM;
	start = p = (uint8_t *)b->data + b->size;
	*p++ = 0x90 | (SHMT_CAP_RECORDS_FIELDS + 2);	/* fixarray: type, fields, crc */
	*p++ = SHMT_CAP_PACKED;
	if (first_seq < 0x80) {
		*p++ = (uint8_t)first_seq;
	} else {
		*p++ = 0xcf;
		be32(p, (uint32_t)(first_seq >> 32));
		be32(p + 4, (uint32_t)first_seq);
		p += 8;
	}
	body = p + 10;
	k = pack_body(body, r, n, first_seq, ring, &end);
	if (!k)
		return 0;
	len = (size_t)(end - body);
	*p++ = 0xce;
	be32(p, (uint32_t)k);
	p += 4;
	*p++ = 0xc6;
	be32(p, (uint32_t)len);
	crc = shmt_crc32c(0, start, (size_t)(end - start));
	end[0] = SHMT_CAP_CRC_TAG;
	be32(end + 1, crc);
	b->size += (size_t)(end + SHMT_CAP_CRC_BYTES - start);
	return (long)k;
}

int shmt_cap_put_records(msgpack_sbuffer *b, uint64_t first_seq, const struct shmt_record *r, size_t n)
{
	size_t start = b->size;
	int ret = check_records(first_seq, r, n);

	if (ret < 0)
		return ret;
	for (size_t i = 0; i < n; ) {
		size_t k = n - i < SHMT_CAP_SPLIT_RECORDS ? n - i : SHMT_CAP_SPLIT_RECORDS;

		if (put_packed(b, first_seq + i, r + i, k, false) < 0) {
			b->size = start;
			return -ENOMEM;
		}
		i += k;
	}
	return 0;
}

long shmt_cap_put_ring_records(msgpack_sbuffer *b, uint64_t first_seq,
			       const struct shmt_record *slots, size_t n)
{
	if (n > SHMT_CAP_SPLIT_RECORDS)
		n = SHMT_CAP_SPLIT_RECORDS;
	if (n && first_seq + n < first_seq)
		n = UINT64_MAX - first_seq;	/* the sequences of a frame never wrap */
	return n ? put_packed(b, first_seq, slots, n, true) : 0;
}

int shmt_cap_put_loss(msgpack_sbuffer *b, const struct shmt_cap_loss *l)
{
	struct frame fr;

	frame_begin(&fr, b, b->size, SHMT_CAP_LOSS, SHMT_CAP_LOSS_FIELDS);
	put_u64(&fr, l->at_ns);
	put_u64(&fr, l->dropped);
	put_u64(&fr, l->overwritten);
	put_u64(&fr, l->lock_timeouts);
	put_u64(&fr, l->torn);
	put_u64(&fr, l->names_dropped);
	put_u64(&fr, l->strings_dropped);
	put_u64(&fr, l->max_strings);
	put_u64(&fr, l->string_bytes);
	put_u64(&fr, l->max_threads);
	put_u64(&fr, l->published);
	return frame_end(&fr);
}

int shmt_cap_put_end(msgpack_sbuffer *b, const struct shmt_cap_end *e)
{
	struct frame fr;

	frame_begin(&fr, b, b->size, SHMT_CAP_END, SHMT_CAP_END_FIELDS);
	put_u64(&fr, e->records);
	put_u64(&fr, e->end_ns);
	put_u64(&fr, e->next_part);
	return frame_end(&fr);
}
