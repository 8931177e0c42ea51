/* SPDX-License-Identifier: MIT */
/*
 * capture_dec.c - decodes one capture frame (docs/CAPTURE-FORMAT.md) from
 * memory, trusting none of its bytes: the frame is walked first
 * (capture_walk.c), its CRC checked, and only then handed to msgpack-c and
 * its fields decoded here (records in capture_dec_records.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "capture_dec.h"
#include "crc32c.h"
#include "mp_head.h"
#include "shmtrace.h"

int shmt_cap_fail(const struct shmt_cap_ctx *c, int rc, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!c->err || !c->errlen)
		return rc;
	n = snprintf(c->err, c->errlen, "frame at offset %llu: ",
		     (unsigned long long)c->off);
	if (n >= 0 && (size_t)n < c->errlen) {
		va_start(ap, fmt);
		vsnprintf(c->err + n, c->errlen - n, fmt, ap);
		va_end(ap);
	}
	return rc;
}

int shmt_cap_get_uint(const msgpack_object *o, uint64_t max, uint64_t *v,
		      const char *what, const struct shmt_cap_ctx *c)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return shmt_cap_fail(c, -EBADMSG, "%s is not an unsigned integer", what);
	if (o->via.u64 > max)
		return shmt_cap_fail(c, -EBADMSG, "%s %llu out of range", what,
				     (unsigned long long)o->via.u64);
	*v = o->via.u64;
	return 0;
}

/* Copies a str field into dst[cap] with its NUL; longer ones are damage. */
static int get_name(const msgpack_object *o, char *dst, size_t cap,
		    const char *what, const struct shmt_cap_ctx *c)
{
	if (o->type != MSGPACK_OBJECT_STR)
		return shmt_cap_fail(c, -EBADMSG, "%s is not a string", what);
	if (o->via.str.size >= cap)
		return shmt_cap_fail(c, -EBADMSG, "%s of %u bytes is longer than %zu", what,
				     o->via.str.size, cap - 1);
	/* msgpack-c gives a NULL pointer for an empty string */
	if (o->via.str.size)
		memcpy(dst, o->via.str.ptr, o->via.str.size);
	dst[o->via.str.size] = '\0';
	return 0;
}

/* The header's fields 15 to 19 (minor revision 2.1), as many as present. */
static int dec_deleted(const msgpack_object *v, size_t n, struct shmt_cap_deleted *d,
		       const struct shmt_cap_ctx *c)
{
	const size_t at = SHMT_CAP_HEADER_MAX_FILES;

	SHMT_CAP_GET(&v[at], UINT32_MAX, d->max_files, "max_files");
	if (n > at + 1)
		SHMT_CAP_GET(&v[at + 1], UINT32_MAX, d->parts, "deleted_parts");
	if (n > at + 2)
		SHMT_CAP_GET(&v[at + 2], UINT64_MAX, d->records, "deleted_records");
	if (n > at + 3)
		SHMT_CAP_GET(&v[at + 3], UINT64_MAX, d->from_ns, "deleted_from_ns");
	if (n > at + 4)
		SHMT_CAP_GET(&v[at + 4], UINT64_MAX, d->to_ns, "deleted_to_ns");
	return 0;
}

const char *shmt_snap_cause_name(uint32_t cause)
{
	static const char *const names[SHMT_SNAP_CAUSES] = {
		"none", "trigger", "command", "signal", "death",
	};

	return cause < SHMT_SNAP_CAUSES ? names[cause] : "unknown";
}

/* A snapshot's fields 20 to 33 (minor revision 2.2), as many as present:
 * a newer writer may append more, and causes. */
static int dec_snapshot(const msgpack_object *v, size_t n, struct shmt_cap_snapshot *sn,
			const struct shmt_cap_ctx *c)
{
	static const char *const what[SHMT_CAP_SNAPSHOT_FIELDS] = {
		NULL, NULL, "trigger_ns", "trigger_pid", "trigger_tid", "first_seq",
		"end_seq", "from_ns", "to_ns", "snapshot overwritten", "staged", "triggers",
		"suppressed", "cut",
	};
	uint64_t *u64[SHMT_CAP_SNAPSHOT_FIELDS] = {
		NULL, NULL, &sn->trigger_ns, NULL, NULL, &sn->first_seq, &sn->end_seq,
		&sn->from_ns, &sn->to_ns, &sn->overwritten, &sn->staged, &sn->triggers,
		&sn->suppressed, &sn->cut,
	};
	const size_t at = SHMT_CAP_HEADER_SNAPSHOT;
	int rc;

	SHMT_CAP_GET(&v[at], UINT32_MAX, sn->cause, "snapshot cause");
	if (n > at + 1 && (rc = get_name(&v[at + 1], sn->trigger, sizeof(sn->trigger),
					 "snapshot trigger", c)))
		return rc;
	if (n > at + 3)
		SHMT_CAP_GET(&v[at + 3], UINT32_MAX, sn->trigger_pid, "trigger_pid");
	if (n > at + 4)
		SHMT_CAP_GET(&v[at + 4], UINT32_MAX, sn->trigger_tid, "trigger_tid");
	for (size_t i = 2; i < SHMT_CAP_SNAPSHOT_FIELDS && n > at + i; i++)
		if (u64[i])
			SHMT_CAP_GET(&v[at + i], UINT64_MAX, *u64[i], what[i]);
	return 0;
}

static int dec_header(const msgpack_object *v, size_t n, struct shmt_cap_header *h,
		      const struct shmt_cap_ctx *c)
{
	const size_t magic_len = strlen(SHMT_CAP_MAGIC);
	uint64_t version;
	int rc;

	if (n < 2 || v[0].type != MSGPACK_OBJECT_STR ||
	    v[0].via.str.size != magic_len ||
	    memcmp(v[0].via.str.ptr, SHMT_CAP_MAGIC, magic_len))
		return shmt_cap_fail(c, -EPROTO, "not a shmtrace capture header");
	SHMT_CAP_GET(&v[1], UINT32_MAX, version, "version");
	/* the magic and version never move: the rest may in a newer major */
	if (version > SHMT_CAP_VERSION)
		return shmt_cap_fail(c, -EPROTO, "capture format version %llu needs a newer shmtrace",
				     (unsigned long long)version);
	if (version < 1)
		return shmt_cap_fail(c, -EPROTO, "capture format version 0 is not valid");
	if (n < SHMT_CAP_HEADER_MIN_FIELDS)
		return shmt_cap_fail(c, -EBADMSG, "header has %zu fields, needs %d", n,
				     SHMT_CAP_HEADER_MIN_FIELDS);
	memset(h, 0, sizeof(*h));
	h->version = version;
	SHMT_CAP_GET(&v[2], UINT32_MAX, h->part, "part");
	SHMT_CAP_GET(&v[3], UINT64_MAX, h->run_id, "run_id");
	if ((rc = get_name(&v[4], h->host, sizeof(h->host), "host", c)) ||
	    (rc = get_name(&v[5], h->ring, sizeof(h->ring), "ring", c)))
		return rc;
	SHMT_CAP_GET(&v[6], UINT32_MAX, h->ring_capacity, "ring_capacity");
	SHMT_CAP_GET(&v[7], UINT32_MAX, h->ring_mode, "ring_mode");
	SHMT_CAP_GET(&v[8], UINT32_MAX, h->clock_tsc, "clock_tsc");
	SHMT_CAP_GET(&v[9], UINT32_MAX, h->collector_pid, "collector_pid");
	SHMT_CAP_GET(&v[10], UINT64_MAX, h->realtime0, "realtime0");
	SHMT_CAP_GET(&v[11], UINT64_MAX, h->mono0, "mono0");
	SHMT_CAP_GET(&v[12], UINT64_MAX, h->started_ns, "started_ns");
	/* appended later: files of older collectors end before them */
	if (n > SHMT_CAP_HEADER_RING_ID)
		SHMT_CAP_GET(&v[SHMT_CAP_HEADER_RING_ID], UINT64_MAX, h->ring_id, "ring_id");
	if (n > SHMT_CAP_HEADER_MAX_FILES && (rc = dec_deleted(v, n, &h->deleted, c)))
		return rc;
	return n > SHMT_CAP_HEADER_SNAPSHOT ? dec_snapshot(v, n, &h->snapshot, c) : 0;
}

static int dec_string(const msgpack_object *e, void *items, uint32_t i, msgpack_zone *z,
		      const struct shmt_cap_ctx *c)
{
	struct shmt_cap_string *s = (struct shmt_cap_string *)items + i;
	char *text;

	SHMT_CAP_GET(&e[0], SHMT_MAX_STRINGS, s->id, "string id");
	if (!s->id)
		return shmt_cap_fail(c, -EBADMSG, "string id 0");
	if (e[1].type != MSGPACK_OBJECT_BIN)
		return shmt_cap_fail(c, -EBADMSG, "string %u is not a bin", s->id);
	if (e[1].via.bin.size > SHMT_STRING_MAX)
		return shmt_cap_fail(c, -EBADMSG, "string %u of %u bytes, at most %u",
				     s->id, e[1].via.bin.size, SHMT_STRING_MAX);
	text = msgpack_zone_malloc(z, e[1].via.bin.size + 1);
	if (!text)
		return shmt_cap_fail(c, -ENOMEM, "out of memory");
	if (e[1].via.bin.size)
		memcpy(text, e[1].via.bin.ptr, e[1].via.bin.size);
	text[e[1].via.bin.size] = '\0';
	s->len = e[1].via.bin.size;
	s->s = text;
	return 0;
}

static int dec_thread(const msgpack_object *e, void *items, uint32_t i, msgpack_zone *z,
		      const struct shmt_cap_ctx *c)
{
	struct shmt_thread *t = (struct shmt_thread *)items + i;
	int rc;

	(void)z;
	SHMT_CAP_GET(&e[0], UINT32_MAX, t->pid, "thread pid");
	SHMT_CAP_GET(&e[1], UINT32_MAX, t->tid, "thread tid");
	SHMT_CAP_GET(&e[2], UINT64_MAX, t->start_time, "thread start_time");
	SHMT_CAP_GET(&e[3], UINT64_MAX, t->pidns, "thread pidns");
	SHMT_CAP_GET(&e[4], UINT32_MAX, t->flags, "thread flags");
	if ((rc = get_name(&e[5], t->name, SHMT_NAME_LEN, "thread name", c)) ||
	    (rc = get_name(&e[6], t->pname, SHMT_NAME_LEN, "process name", c)))
		return rc;
	return 0;
}

/* The items of a STRINGS or THREADS frame: their fields, their size, what
 * to call them, and the decoder of one. */
struct list_kind {
	uint32_t fields;
	size_t size;
	const char *what;
	int (*item)(const msgpack_object *e, void *items, uint32_t i, msgpack_zone *z,
		    const struct shmt_cap_ctx *c);
};

static const struct list_kind strings_list = {
	SHMT_CAP_STRING_ITEM_FIELDS, sizeof(struct shmt_cap_string), "strings", dec_string,
};
static const struct list_kind threads_list = {
	SHMT_CAP_THREAD_ITEM_FIELDS, sizeof(struct shmt_thread), "threads", dec_thread,
};

/*
 * The one field of a STRINGS or THREADS frame: an array of at most
 * SHMT_CAP_MAX_ITEMS arrays of at least k->fields elements each, decoded
 * into *cnt zeroed items allocated in z. Returns 0 or -errno.
 */
static int dec_list(const msgpack_object *v, size_t n, const struct list_kind *k,
		    msgpack_zone *z, const struct shmt_cap_ctx *c, void **items, size_t *cnt)
{
	const msgpack_object *o = &v[0];
	uint32_t len;
	int rc;

	if (n < SHMT_CAP_LIST_FIELDS)
		return shmt_cap_fail(c, -EBADMSG, "%s frame without its list", k->what);
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return shmt_cap_fail(c, -EBADMSG, "%s list is not an array", k->what);
	len = o->via.array.size;
	if (len > SHMT_CAP_MAX_ITEMS)
		return shmt_cap_fail(c, -EBADMSG, "%u %s, at most %u per frame",
				     len, k->what, SHMT_CAP_MAX_ITEMS);
	for (uint32_t i = 0; i < len; i++) {
		const msgpack_object *e = &o->via.array.ptr[i];

		if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size < k->fields)
			return shmt_cap_fail(c, -EBADMSG, "%s entry %u is not an array of %u",
					     k->what, i, k->fields);
	}
	*items = msgpack_zone_malloc(z, (size_t)len * k->size + 1);
	if (!*items)
		return shmt_cap_fail(c, -ENOMEM, "out of memory");
	memset(*items, 0, (size_t)len * k->size);
	for (uint32_t i = 0; i < len; i++)
		if ((rc = k->item(o->via.array.ptr[i].via.array.ptr, *items, i, z, c)))
			return rc;
	*cnt = len;
	return 0;
}

static int dec_loss(const msgpack_object *v, size_t n, struct shmt_cap_loss *l,
		    const struct shmt_cap_ctx *c)
{
	if (n < SHMT_CAP_LOSS_MIN_FIELDS)
		return shmt_cap_fail(c, -EBADMSG, "loss frame has %zu fields, needs %d", n,
				     SHMT_CAP_LOSS_MIN_FIELDS);
	/* the fields after the first six came later: absent reads as 0.
	 * One line a field, as in dec_header(): each names its field and
	 * its bound (the counters' fields are those of loss.h's table). */
	memset(l, 0, sizeof(*l));
	SHMT_CAP_GET(&v[0], UINT64_MAX, l->at_ns, "at_ns");
#define FIELD(name, unit, since, frame, words)				\
	if (n > (frame))						\
		SHMT_CAP_GET(&v[frame], UINT64_MAX, l->name, #name);
	SHMT_LOSS_KINDS(FIELD)
#undef FIELD
	if (n > SHMT_CAP_LOSS_MAX_STRINGS)
		SHMT_CAP_GET(&v[SHMT_CAP_LOSS_MAX_STRINGS], UINT32_MAX, l->max_strings, "max_strings");
	if (n > SHMT_CAP_LOSS_STRING_BYTES)
		SHMT_CAP_GET(&v[SHMT_CAP_LOSS_STRING_BYTES], UINT32_MAX, l->string_bytes, "string_bytes");
	if (n > SHMT_CAP_LOSS_MAX_THREADS)
		SHMT_CAP_GET(&v[SHMT_CAP_LOSS_MAX_THREADS], UINT32_MAX, l->max_threads, "max_threads");
	if (n > SHMT_CAP_LOSS_PUBLISHED)
		SHMT_CAP_GET(&v[SHMT_CAP_LOSS_PUBLISHED], UINT64_MAX, l->published, "published");
	return 0;
}

static int dec_end(const msgpack_object *v, size_t n, struct shmt_cap_end *e,
		   const struct shmt_cap_ctx *c)
{
	if (n < SHMT_CAP_END_FIELDS)
		return shmt_cap_fail(c, -EBADMSG, "end frame has %zu fields, needs %d", n,
				     SHMT_CAP_END_FIELDS);
	SHMT_CAP_GET(&v[0], UINT64_MAX, e->records, "records");
	SHMT_CAP_GET(&v[1], UINT64_MAX, e->end_ns, "end_ns");
	SHMT_CAP_GET(&v[2], UINT32_MAX, e->next_part, "next_part");
	return 0;
}

/* The one decoder behind shmt_cap_decode() and shmt_cap_next(). */
long shmt_cap_decode_at(const uint8_t *buf, size_t len, uint64_t off,
		   struct shmt_cap_frame *f, msgpack_zone *z, char *err, size_t errlen)
{
	const struct shmt_cap_ctx c = { .off = off, .err = err, .errlen = errlen };
	msgpack_unpacked u;
	const msgpack_object *v;
	void *items = NULL;
	size_t flen = 0, used = 0;
	uint32_t stored, crc;
	uint64_t type;
	size_t n;
	int rc;

	if (!len)
		return 0;
	if (!((buf[0] >= 0x90 && buf[0] <= 0x9f) || buf[0] == 0xdc || buf[0] == 0xdd))
		return shmt_cap_fail(&c, -EBADMSG, "starts with byte 0x%02x, not an array", buf[0]);
	rc = shmt_cap_walk(buf, len, &flen, &c);
	if (rc <= 0)
		return rc;
	if (flen < 1 + 1 + SHMT_CAP_CRC_BYTES || buf[flen - SHMT_CAP_CRC_BYTES] != SHMT_CAP_CRC_TAG)
		return shmt_cap_fail(&c, -EBADMSG, "does not end in a %d-byte CRC",
				     SHMT_CAP_CRC_BYTES);
	stored = (uint32_t)shmt_mp_be(buf + flen - (SHMT_CAP_CRC_BYTES - 1), SHMT_CAP_CRC_BYTES - 1);
	crc = shmt_crc32c(0, buf, flen - SHMT_CAP_CRC_BYTES);
	if (stored != crc)
		return shmt_cap_fail(&c, -EBADMSG, "CRC mismatch (stored 0x%08x, computed 0x%08x)",
				     stored, crc);

	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, (const char *)buf, flen, &used) != MSGPACK_UNPACK_SUCCESS ||
	    used != flen || u.data.type != MSGPACK_OBJECT_ARRAY || u.data.via.array.size < 2) {
		rc = shmt_cap_fail(&c, -EBADMSG, "not a msgpack array of %zu bytes", flen);
		goto out;
	}
	v = u.data.via.array.ptr;
	n = u.data.via.array.size - 2;	/* fields between type and crc */
	if (v[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
		rc = shmt_cap_fail(&c, -EBADMSG, "frame type is not an unsigned integer");
		goto out;
	}
	type = v[0].via.u64;
	memset(f, 0, sizeof(*f));
	f->offset = off;
	f->type = (enum shmt_cap_type)type;
	switch (type) {
	case SHMT_CAP_HEADER:
		rc = dec_header(v + 1, n, &f->header, &c);
		break;
	case SHMT_CAP_STRINGS:
		rc = dec_list(v + 1, n, &strings_list, z, &c, &items, &f->strings.n);
		f->strings.v = items;
		break;
	case SHMT_CAP_THREADS:
		rc = dec_list(v + 1, n, &threads_list, z, &c, &items, &f->threads.n);
		f->threads.v = items;
		break;
	case SHMT_CAP_RECORDS:
		rc = shmt_cap_dec_records(v + 1, n, f, z, &c);
		break;
	case SHMT_CAP_PACKED:
		/* callers see one kind of records frame, whatever its encoding */
		f->type = SHMT_CAP_RECORDS;
		rc = shmt_cap_dec_packed(v + 1, n, f, z, &c);
		break;
	case SHMT_CAP_LOSS:
		rc = dec_loss(v + 1, n, &f->loss, &c);
		break;
	case SHMT_CAP_END:
		rc = dec_end(v + 1, n, &f->end, &c);
		break;
	default:
		rc = shmt_cap_fail(&c, -EBADMSG, "unknown frame type %llu", (unsigned long long)type);
	}
out:
	msgpack_unpacked_destroy(&u);
	return rc ? rc : (long)flen;
}

long shmt_cap_decode(const uint8_t *buf, size_t len, struct shmt_cap_frame *f,
		     msgpack_zone *z, char *err, size_t errlen)
{
	return shmt_cap_decode_at(buf, len, 0, f, z, err, errlen);
}
