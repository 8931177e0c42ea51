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

	frame_begin(&fr, b, b->size, SHMT_CAP_HEADER, 14);
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

		frame_begin(&fr, b, b->size, SHMT_CAP_STRINGS, 1);
		put_array(&fr, k);
		for (size_t j = i; j < i + k; j++) {
			put_array(&fr, 2);
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

		frame_begin(&fr, b, b->size, SHMT_CAP_THREADS, 1);
		put_array(&fr, k);
		for (size_t j = i; j < i + k; j++) {
			/* names come from shared memory: maybe unterminated */
			put_array(&fr, 7);
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

int shmt_cap_put_records(msgpack_sbuffer *b, uint64_t first_seq, const struct shmt_record *r, size_t n)
{
	size_t start = b->size;
	bool raw = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

	for (size_t i = 0; i < n; i++) {
		uint32_t kind = SHMT_COMMIT_KIND(r[i].commit);

		if (kind < SHMTRACE_KIND_SPAN || kind > SHMTRACE_KIND_MAX)
			return -EINVAL;
		raw &= r[i].commit == kind;
	}
	if (n && first_seq + n < first_seq)
		return -EINVAL;
	for (size_t i = 0; i < n; ) {
		size_t k = n - i < SHMT_CAP_SPLIT_RECORDS ? n - i : SHMT_CAP_SPLIT_RECORDS;
		struct frame fr;

		frame_begin(&fr, b, b->size, SHMT_CAP_RECORDS, 3);
		put_u64(&fr, first_seq + i);
		put_u64(&fr, k);
		if (!fr.rc)
			fr.rc = msgpack_pack_bin(&fr.pk, k * SHMT_RECORD_SIZE);
		/* the collector's hot path: records already in file layout
		 * go in with one copy */
		if (raw && !fr.rc)
			fr.rc = msgpack_pack_bin_body(&fr.pk, &r[i], k * SHMT_RECORD_SIZE);
		for (size_t j = i; j < i + k && !fr.rc && !raw; j++) {
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

int shmt_cap_put_loss(msgpack_sbuffer *b, const struct shmt_cap_loss *l)
{
	struct frame fr;

	frame_begin(&fr, b, b->size, SHMT_CAP_LOSS, 11);
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

	frame_begin(&fr, b, b->size, SHMT_CAP_END, 3);
	put_u64(&fr, e->records);
	put_u64(&fr, e->end_ns);
	put_u64(&fr, e->next_part);
	return frame_end(&fr);
}

/*
 * The collector's path: room for n records is reserved inside the frame, so
 * that they are copied once, straight from the ring into the buffer that
 * io_uring writes. Returns where the n x 40 bytes go (b->size already
 * covers them), or NULL with b unchanged. *mark is for finish or cancel.
 */
void *shmt_cap_records_reserve(msgpack_sbuffer *b, uint64_t first_seq, size_t n, size_t *mark)
{
	size_t bytes = n * SHMT_RECORD_SIZE;
	struct frame fr;
	void *dst;

	if (n == 0 || n > SHMT_CAP_SPLIT_RECORDS)
		return NULL;
	*mark = b->size;
	frame_begin(&fr, b, b->size, SHMT_CAP_RECORDS, 3);
	put_u64(&fr, first_seq);
	put_u64(&fr, n);
	if (!fr.rc)
		fr.rc = msgpack_pack_bin(&fr.pk, bytes);
	/* room for the records and the CRC, without the sbuffer's copy */
	if (!fr.rc && b->alloc - b->size < bytes + 5) {
		size_t alloc = b->alloc * 2 > b->size + bytes + 5 ? b->alloc * 2 : b->size + bytes + 5;
		char *p = realloc(b->data, alloc);

		if (!p)
			fr.rc = -1;
		else {
			b->data = p;
			b->alloc = alloc;
		}
	}
	if (fr.rc) {
		b->size = *mark;
		return NULL;
	}
	dst = b->data + b->size;
	b->size += bytes;
	return dst;
}

/* Seals a reserved frame with its CRC. Returns 0 or -ENOMEM (b rolled back). */
int shmt_cap_records_finish(msgpack_sbuffer *b, size_t mark)
{
	struct frame fr = { .b = b, .start = mark, .rc = 0 };

	msgpack_packer_init(&fr.pk, b, msgpack_sbuffer_write);
	return frame_end(&fr);
}

/* Drops a reserved frame. */
void shmt_cap_records_cancel(msgpack_sbuffer *b, size_t mark)
{
	b->size = mark;
}
