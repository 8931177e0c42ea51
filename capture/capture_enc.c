/* SPDX-License-Identifier: MIT */
/*
 * capture_enc.c - writes capture frames (docs/CAPTURE-FORMAT.md) into a
 * msgpack_sbuffer for the collector to hand to io_uring: every frame type
 * but PACKED (capture_enc_packed.c), and the splitting of long lists into
 * several frames.
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

	const struct shmt_cap_snapshot *sn = &h->snapshot;

	/* a snapshot's fields only in a snapshot's header: the collector's
	 * captures keep the bytes they had */
	frame_begin(&fr, b, b->size, SHMT_CAP_HEADER, SHMT_CAP_HEADER_FIELDS +
		    (sn->cause ? SHMT_CAP_SNAPSHOT_FIELDS : 0));
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
	/* trailing: older readers skip them */
	put_u64(&fr, h->ring_id);
	put_u64(&fr, h->deleted.max_files);
	put_u64(&fr, h->deleted.parts);
	put_u64(&fr, h->deleted.records);
	put_u64(&fr, h->deleted.from_ns);
	put_u64(&fr, h->deleted.to_ns);
	if (sn->cause) {
		put_u64(&fr, sn->cause);
		put_str(&fr, sn->trigger, strnlen(sn->trigger, sizeof(sn->trigger) - 1));
		put_u64(&fr, sn->trigger_ns);
		put_u64(&fr, sn->trigger_pid);
		put_u64(&fr, sn->trigger_tid);
		put_u64(&fr, sn->first_seq);
		put_u64(&fr, sn->end_seq);
		put_u64(&fr, sn->from_ns);
		put_u64(&fr, sn->to_ns);
		put_u64(&fr, sn->overwritten);
		put_u64(&fr, sn->staged);
		put_u64(&fr, sn->triggers);
		put_u64(&fr, sn->suppressed);
		put_u64(&fr, sn->cut);
	}
	return frame_end(&fr);
}

/*
 * Appends n items as consecutive frames of at most per items each, put()
 * encoding items [i, i + k) as one frame. On an error b goes back to
 * where it was: the call appends all the frames or none.
 */
typedef long (*put_frame_fn)(msgpack_sbuffer *b, size_t i, size_t k, const void *arg);

static int put_split(msgpack_sbuffer *b, size_t n, size_t per, put_frame_fn put, const void *arg)
{
	size_t start = b->size;

	for (size_t i = 0; i < n; ) {
		size_t k = n - i < per ? n - i : per;

		if (put(b, i, k, arg) < 0) {
			b->size = start;
			return -ENOMEM;
		}
		i += k;
	}
	return 0;
}

/* A STRINGS or THREADS frame: one array of items, each one array. */
typedef void (*put_item_fn)(struct frame *fr, size_t j, const void *arg);

static long put_list(msgpack_sbuffer *b, enum shmt_cap_type type, size_t i, size_t k,
		     put_item_fn item, const void *arg)
{
	struct frame fr;

	frame_begin(&fr, b, b->size, type, SHMT_CAP_LIST_FIELDS);
	put_array(&fr, k);
	for (size_t j = i; j < i + k; j++)
		item(&fr, j, arg);
	return frame_end(&fr);
}

static void put_string_item(struct frame *fr, size_t j, const void *arg)
{
	const struct shmt_cap_string *s = (const struct shmt_cap_string *)arg + j;

	put_array(fr, SHMT_CAP_STRING_ITEM_FIELDS);
	put_u64(fr, s->id);
	put_bin(fr, s->s, s->len);
}

static long put_strings_frame(msgpack_sbuffer *b, size_t i, size_t k, const void *arg)
{
	return put_list(b, SHMT_CAP_STRINGS, i, k, put_string_item, arg);
}

int shmt_cap_put_strings(msgpack_sbuffer *b, const struct shmt_cap_string *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!s[i].id || s[i].id > SHMT_MAX_STRINGS ||
		    s[i].len > SHMT_STRING_MAX || (s[i].len && !s[i].s))
			return -EINVAL;
	return put_split(b, n, SHMT_CAP_SPLIT_ITEMS, put_strings_frame, s);
}

static void put_thread_item(struct frame *fr, size_t j, const void *arg)
{
	const struct shmt_thread *t = (const struct shmt_thread *)arg + j;

	/* names come from shared memory: maybe unterminated */
	put_array(fr, SHMT_CAP_THREAD_ITEM_FIELDS);
	put_u64(fr, t->pid);
	put_u64(fr, t->tid);
	put_u64(fr, t->start_time);
	put_u64(fr, t->pidns);
	put_u64(fr, t->flags);
	put_str(fr, t->name, strnlen(t->name, SHMT_NAME_LEN - 1));
	put_str(fr, t->pname, strnlen(t->pname, SHMT_NAME_LEN - 1));
}

static long put_threads_frame(msgpack_sbuffer *b, size_t i, size_t k, const void *arg)
{
	return put_list(b, SHMT_CAP_THREADS, i, k, put_thread_item, arg);
}

int shmt_cap_put_threads(msgpack_sbuffer *b, const struct shmt_thread *t, size_t n)
{
	return put_split(b, n, SHMT_CAP_SPLIT_ITEMS, put_threads_frame, t);
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

/* What put_split() hands the records' frame encoders. */
struct records_arg {
	uint64_t first_seq;
	const struct shmt_record *r;
};

static long put_v1_frame(msgpack_sbuffer *b, size_t i, size_t k, const void *arg)
{
	const struct records_arg *a = arg;
	struct frame fr;

	frame_begin(&fr, b, b->size, SHMT_CAP_RECORDS, SHMT_CAP_RECORDS_FIELDS);
	put_u64(&fr, a->first_seq + i);
	put_u64(&fr, k);
	if (!fr.rc)
		fr.rc = msgpack_pack_bin(&fr.pk, k * SHMT_RECORD_SIZE);
	for (size_t j = i; j < i + k && !fr.rc; j++) {
		uint8_t le[SHMT_RECORD_SIZE];

		record_to_le(le, &a->r[j]);
		fr.rc = msgpack_pack_bin_body(&fr.pk, le, sizeof(le));
	}
	return frame_end(&fr);
}

static long put_packed_frame(msgpack_sbuffer *b, size_t i, size_t k, const void *arg)
{
	const struct records_arg *a = arg;

	return shmt_cap_put_packed(b, a->first_seq + i, a->r + i, k, SHMT_PACK_NONE);
}

/* Records r[0..n) checked, then as frames of the kind put encodes. */
static int put_records(msgpack_sbuffer *b, uint64_t first_seq, const struct shmt_record *r,
		       size_t n, put_frame_fn put)
{
	const struct records_arg a = { first_seq, r };
	int ret = check_records(first_seq, r, n);

	if (ret < 0)
		return ret;
	return put_split(b, n, SHMT_CAP_SPLIT_RECORDS, put, &a);
}

int shmt_cap_put_records_v1(msgpack_sbuffer *b, uint64_t first_seq, const struct shmt_record *r, size_t n)
{
	return put_records(b, first_seq, r, n, put_v1_frame);
}

int shmt_cap_put_records(msgpack_sbuffer *b, uint64_t first_seq, const struct shmt_record *r, size_t n)
{
	return put_records(b, first_seq, r, n, put_packed_frame);
}

int shmt_cap_put_loss(msgpack_sbuffer *b, const struct shmt_cap_loss *l)
{
	uint64_t v[SHMT_CAP_LOSS_FIELDS] = {
		[0] = l->at_ns,
		[SHMT_CAP_LOSS_MAX_STRINGS] = l->max_strings,
		[SHMT_CAP_LOSS_STRING_BYTES] = l->string_bytes,
		[SHMT_CAP_LOSS_MAX_THREADS] = l->max_threads,
		[SHMT_CAP_LOSS_PUBLISHED] = l->published,
	};
	struct frame fr;

#define FIELD(name, unit, since, frame, words) v[frame] = l->name;
	SHMT_LOSS_KINDS(FIELD)
#undef FIELD
	frame_begin(&fr, b, b->size, SHMT_CAP_LOSS, SHMT_CAP_LOSS_FIELDS);
	for (size_t i = 0; i < SHMT_CAP_LOSS_FIELDS; i++)
		put_u64(&fr, v[i]);
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
