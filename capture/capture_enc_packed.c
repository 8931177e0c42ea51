/* SPDX-License-Identifier: MIT */
/*
 * capture_enc_packed.c - encodes PACKED frames (capture format version 2,
 * varint records), from records or straight from ring slots for the
 * collector.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "capture_enc.h"
#include "crc32c.h"
#include "shmtrace.h"

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
 * Encodes r[0..n) into p. With check PACK_RING, r are ring slots whose
 * commit words hold (sequence & 0xffffff) << 8 | kind, read once each
 * (another process may be writing them), and encoding stops before the
 * first one that is not a finished record of first_seq + i; with
 * PACK_KIND, records of a staging block (commit: the kind), read once
 * each, and it stops before the first of no kind this format defines.
 * Returns the records encoded; *end is where they end.
 */
static size_t pack_body(uint8_t *p, const struct shmt_record *r, size_t n,
			uint64_t first_seq, enum shmt_pack_check check, uint8_t **end)
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
		if (check == SHMT_PACK_RING && !shmt_commit_is(x.commit, first_seq + i))
			break;
		if (check == SHMT_PACK_KIND && !shmt_kind_valid(kind))
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
long shmt_cap_put_packed(msgpack_sbuffer *b, uint64_t first_seq, const struct shmt_record *r,
			 size_t n, enum shmt_pack_check check)
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
	k = pack_body(body, r, n, first_seq, check, &end);
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

long shmt_cap_put_ring_records(msgpack_sbuffer *b, uint64_t first_seq,
			       const struct shmt_record *slots, size_t n)
{
	if (n > SHMT_CAP_SPLIT_RECORDS)
		n = SHMT_CAP_SPLIT_RECORDS;
	if (n && first_seq + n < first_seq)
		n = UINT64_MAX - first_seq;	/* the sequences of a frame never wrap */
	return n ? shmt_cap_put_packed(b, first_seq, slots, n, SHMT_PACK_RING) : 0;
}

long shmt_cap_put_block_records(msgpack_sbuffer *b, uint64_t first_seq,
				const struct shmt_record *recs, size_t n)
{
	if (n > SHMT_CAP_SPLIT_RECORDS)
		n = SHMT_CAP_SPLIT_RECORDS;
	if (n && first_seq + n < first_seq)
		n = UINT64_MAX - first_seq;
	return n ? shmt_cap_put_packed(b, first_seq, recs, n, SHMT_PACK_KIND) : 0;
}
