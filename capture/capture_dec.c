/* SPDX-License-Identifier: MIT */
/*
 * capture_dec.c - reads capture frames (docs/CAPTURE-FORMAT.md) from memory
 * or from a file through a bounded buffer, trusting none of their bytes.
 *
 * A frame is first walked byte by byte without allocating (to find its end,
 * tell a cut from garbage and bound every count), then its CRC is checked,
 * and only then is it handed to msgpack-c, whose allocations are therefore
 * bounded by the frame's size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "crc32c.h"
#include "shmtrace.h"

#define READ_MIN	(256u << 10)	/* first size of the reader's buffer */

struct ctx {
	uint64_t off;		/* file offset of the frame */
	char *err;
	size_t errlen;
};

static int fail(const struct ctx *c, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(const struct ctx *c, int rc, const char *fmt, ...)
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

static uint64_t be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/*
 * Finds the end of the msgpack object at p. Returns 1 with *flen set,
 * 0 if more bytes are needed (and the frame could still fit in
 * SHMT_CAP_MAX_FRAME), or -EBADMSG.
 */
static int walk(const uint8_t *p, size_t len, size_t *flen, const struct ctx *c)
{
	uint64_t left[SHMT_CAP_MAX_DEPTH];
	uint64_t objects = 0;
	size_t pos = 0;
	int d = 0;

	left[0] = 1;
	while (d >= 0) {
		uint64_t hdr = 1, body = 0, kids = 0, need;
		uint8_t t;

		if (!left[d]) {
			d--;
			continue;
		}
		left[d]--;
		if (++objects > SHMT_CAP_MAX_OBJECTS)
			return fail(c, -EBADMSG, "more than %u msgpack objects",
				    SHMT_CAP_MAX_OBJECTS);
		if (pos >= len)
			return 0;
		t = p[pos];
		if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) {
			/* fixint, nil, bool */
		} else if (t <= 0x8f) {
			kids = 2ull * (t & 0x0f);
		} else if (t <= 0x9f) {
			kids = t & 0x0f;
		} else if (t <= 0xbf) {
			body = t & 0x1f;
		} else {
			static const uint8_t fixed[] = {	/* 0xca .. 0xd8 */
				5, 9, 2, 3, 5, 9, 2, 3, 5, 9, 3, 4, 6, 10, 18,
			};
			int lb = 0;	/* bytes of a length or count */

			switch (t) {
			case 0xc4: case 0xd9: lb = 1; break;
			case 0xc5: case 0xda: case 0xdc: case 0xde: lb = 2; break;
			case 0xc6: case 0xdb: case 0xdd: case 0xdf: lb = 4; break;
			case 0xc7: lb = 1; hdr = 1; break;
			case 0xc8: lb = 2; break;
			case 0xc9: lb = 4; break;
			case 0xc1:
				return fail(c, -EBADMSG, "invalid msgpack byte 0xc1 at +%zu", pos);
			default:
				hdr = fixed[t - 0xca];
			}
			if (lb) {
				uint64_t v;

				hdr = 1 + lb + (t >= 0xc7 && t <= 0xc9);	/* ext: +type */
				if (pos + 1 + lb > len)
					return 0;
				v = be(p + pos + 1, lb);
				if (t == 0xdc || t == 0xdd)
					kids = v;
				else if (t == 0xde || t == 0xdf)
					kids = 2 * v;
				else
					body = v;
			}
		}
		need = pos + hdr + body;
		if (need > SHMT_CAP_MAX_FRAME)
			return fail(c, -EBADMSG, "longer than %u bytes", SHMT_CAP_MAX_FRAME);
		if (need > len)
			return 0;
		pos = need;
		if (kids) {
			/* every element takes at least a byte */
			if (kids > 2ull * SHMT_CAP_MAX_ITEMS || pos + kids > SHMT_CAP_MAX_FRAME)
				return fail(c, -EBADMSG, "array or map of %llu elements",
					    (unsigned long long)kids);
			if (d + 1 >= (int)SHMT_CAP_MAX_DEPTH)
				return fail(c, -EBADMSG, "nested deeper than %d",
					    SHMT_CAP_MAX_DEPTH);
			left[++d] = kids;
		}
	}
	*flen = pos;
	return 1;
}

static int get_uint(const msgpack_object *o, uint64_t max, uint64_t *v,
		    const char *what, const struct ctx *c)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return fail(c, -EBADMSG, "%s is not an unsigned integer", what);
	if (o->via.u64 > max)
		return fail(c, -EBADMSG, "%s %llu out of range", what,
			    (unsigned long long)o->via.u64);
	*v = o->via.u64;
	return 0;
}

#define GET(o, max, dst, what) do {					\
	uint64_t v_ = 0;						\
	int rc_ = get_uint(o, max, &v_, what, c);			\
	if (rc_)							\
		return rc_;						\
	(dst) = v_;							\
} while (0)

/* Copies a str field into dst[cap] with its NUL; longer ones are damage. */
static int get_name(const msgpack_object *o, char *dst, size_t cap,
		    const char *what, const struct ctx *c)
{
	if (o->type != MSGPACK_OBJECT_STR)
		return fail(c, -EBADMSG, "%s is not a string", what);
	if (o->via.str.size >= cap)
		return fail(c, -EBADMSG, "%s of %u bytes is longer than %zu", what,
			    o->via.str.size, cap - 1);
	/* msgpack-c gives a NULL pointer for an empty string */
	if (o->via.str.size)
		memcpy(dst, o->via.str.ptr, o->via.str.size);
	dst[o->via.str.size] = '\0';
	return 0;
}

static int dec_header(const msgpack_object *v, size_t n, struct shmt_cap_header *h,
		      const struct ctx *c)
{
	const size_t magic_len = strlen(SHMT_CAP_MAGIC);
	uint64_t version;
	int rc;

	if (n < 2 || v[0].type != MSGPACK_OBJECT_STR ||
	    v[0].via.str.size != magic_len ||
	    memcmp(v[0].via.str.ptr, SHMT_CAP_MAGIC, magic_len))
		return fail(c, -EPROTO, "not a shmtrace capture header");
	GET(&v[1], UINT32_MAX, version, "version");
	/* the magic and version never move: the rest may in a newer major */
	if (version > SHMT_CAP_VERSION)
		return fail(c, -EPROTO, "capture format version %llu needs a newer shmtrace",
			    (unsigned long long)version);
	if (version < 1)
		return fail(c, -EPROTO, "capture format version 0 is not valid");
	if (n < SHMT_CAP_HEADER_MIN_FIELDS)
		return fail(c, -EBADMSG, "header has %zu fields, needs %d", n, SHMT_CAP_HEADER_MIN_FIELDS);
	memset(h, 0, sizeof(*h));
	h->version = version;
	GET(&v[2], UINT32_MAX, h->part, "part");
	GET(&v[3], UINT64_MAX, h->run_id, "run_id");
	if ((rc = get_name(&v[4], h->host, sizeof(h->host), "host", c)) ||
	    (rc = get_name(&v[5], h->ring, sizeof(h->ring), "ring", c)))
		return rc;
	GET(&v[6], UINT32_MAX, h->ring_capacity, "ring_capacity");
	GET(&v[7], UINT32_MAX, h->ring_mode, "ring_mode");
	GET(&v[8], UINT32_MAX, h->clock_tsc, "clock_tsc");
	GET(&v[9], UINT32_MAX, h->collector_pid, "collector_pid");
	GET(&v[10], UINT64_MAX, h->realtime0, "realtime0");
	GET(&v[11], UINT64_MAX, h->mono0, "mono0");
	GET(&v[12], UINT64_MAX, h->started_ns, "started_ns");
	/* appended later: files of older collectors end before it */
	if (n >= 14)
		GET(&v[13], UINT64_MAX, h->ring_id, "ring_id");
	return 0;
}

/* A list field: an array of arrays of at least min elements each. */
static int get_list(const msgpack_object *o, uint32_t min, const char *what,
		    const struct ctx *c)
{
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return fail(c, -EBADMSG, "%s list is not an array", what);
	if (o->via.array.size > SHMT_CAP_MAX_ITEMS)
		return fail(c, -EBADMSG, "%u %s, at most %u per frame",
			    o->via.array.size, what, SHMT_CAP_MAX_ITEMS);
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		const msgpack_object *e = &o->via.array.ptr[i];

		if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size < min)
			return fail(c, -EBADMSG, "%s entry %u is not an array of %u",
				    what, i, min);
	}
	return 0;
}

static int dec_strings(const msgpack_object *v, size_t n, struct shmt_cap_frame *f,
		       msgpack_zone *z, const struct ctx *c)
{
	struct shmt_cap_string *s;
	uint32_t cnt;
	int rc;

	if (n < SHMT_CAP_LIST_FIELDS)
		return fail(c, -EBADMSG, "strings frame without its list");
	if ((rc = get_list(&v[0], SHMT_CAP_STRING_ITEM_FIELDS, "strings", c)))
		return rc;
	cnt = v[0].via.array.size;
	s = msgpack_zone_malloc(z, (size_t)cnt * sizeof(*s) + 1);
	if (!s)
		return fail(c, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < cnt; i++) {
		const msgpack_object *e = v[0].via.array.ptr[i].via.array.ptr;
		char *text;

		GET(&e[0], SHMT_MAX_STRINGS, s[i].id, "string id");
		if (!s[i].id)
			return fail(c, -EBADMSG, "string id 0");
		if (e[1].type != MSGPACK_OBJECT_BIN)
			return fail(c, -EBADMSG, "string %u is not a bin", s[i].id);
		if (e[1].via.bin.size > SHMT_STRING_MAX)
			return fail(c, -EBADMSG, "string %u of %u bytes, at most %u",
				    s[i].id, e[1].via.bin.size, SHMT_STRING_MAX);
		text = msgpack_zone_malloc(z, e[1].via.bin.size + 1);
		if (!text)
			return fail(c, -ENOMEM, "out of memory");
		if (e[1].via.bin.size)
			memcpy(text, e[1].via.bin.ptr, e[1].via.bin.size);
		text[e[1].via.bin.size] = '\0';
		s[i].len = e[1].via.bin.size;
		s[i].s = text;
	}
	f->strings.v = s;
	f->strings.n = cnt;
	return 0;
}

static int dec_threads(const msgpack_object *v, size_t n, struct shmt_cap_frame *f,
		       msgpack_zone *z, const struct ctx *c)
{
	struct shmt_thread *t;
	uint32_t cnt;
	int rc;

	if (n < SHMT_CAP_LIST_FIELDS)
		return fail(c, -EBADMSG, "threads frame without its list");
	if ((rc = get_list(&v[0], SHMT_CAP_THREAD_ITEM_FIELDS, "threads", c)))
		return rc;
	cnt = v[0].via.array.size;
	t = msgpack_zone_malloc(z, (size_t)cnt * sizeof(*t) + 1);
	if (!t)
		return fail(c, -ENOMEM, "out of memory");
	memset(t, 0, (size_t)cnt * sizeof(*t));
	for (uint32_t i = 0; i < cnt; i++) {
		const msgpack_object *e = v[0].via.array.ptr[i].via.array.ptr;

		GET(&e[0], UINT32_MAX, t[i].pid, "thread pid");
		GET(&e[1], UINT32_MAX, t[i].tid, "thread tid");
		GET(&e[2], UINT64_MAX, t[i].start_time, "thread start_time");
		GET(&e[3], UINT64_MAX, t[i].pidns, "thread pidns");
		GET(&e[4], UINT32_MAX, t[i].flags, "thread flags");
		if ((rc = get_name(&e[5], t[i].name, SHMT_NAME_LEN, "thread name", c)) ||
		    (rc = get_name(&e[6], t[i].pname, SHMT_NAME_LEN, "process name", c)))
			return rc;
	}
	f->threads.v = t;
	f->threads.n = cnt;
	return 0;
}

static uint32_t ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t ld64(const uint8_t *p)
{
	return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

static int dec_records(const msgpack_object *v, size_t n, struct shmt_cap_frame *f,
		       msgpack_zone *z, const struct ctx *c)
{
	struct shmt_record *r;
	const uint8_t *p;
	uint64_t first, cnt;

	if (n < SHMT_CAP_RECORDS_FIELDS)
		return fail(c, -EBADMSG, "records frame has %zu fields, needs 3", n);
	GET(&v[0], UINT64_MAX, first, "first_seq");
	GET(&v[1], SHMT_CAP_MAX_RECORDS, cnt, "record count");
	if (first + cnt < first)
		return fail(c, -EBADMSG, "sequence %llu + %llu wraps",
			    (unsigned long long)first, (unsigned long long)cnt);
	if (v[2].type != MSGPACK_OBJECT_BIN)
		return fail(c, -EBADMSG, "records are not a bin");
	if (v[2].via.bin.size != cnt * SHMT_RECORD_SIZE)
		return fail(c, -EBADMSG, "%llu records in %u bytes, not %u each",
			    (unsigned long long)cnt, v[2].via.bin.size, SHMT_RECORD_SIZE);
	r = msgpack_zone_malloc(z, cnt * sizeof(*r) + 1);
	if (!r)
		return fail(c, -ENOMEM, "out of memory");
	p = (const uint8_t *)v[2].via.bin.ptr;
	for (uint64_t i = 0; i < cnt; i++, p += SHMT_RECORD_SIZE) {
		r[i].ts = ld64(p);
		r[i].dur = ld64(p + 8);
		r[i].flow = ld64(p + 16);
		r[i].pid = ld32(p + 24);
		r[i].tid = ld32(p + 28);
		r[i].name = (uint16_t)(p[32] | p[33] << 8);
		r[i].cat = (uint16_t)(p[34] | p[35] << 8);
		r[i].commit = ld32(p + 36);
		/* a whole batch is written by one collector from one ring:
		 * a bad kind means damage, so the frame goes, not the record */
		if (!shmt_kind_valid(r[i].commit))
			return fail(c, -EBADMSG, "record %llu (seq %llu) has kind %u",
				    (unsigned long long)i,
				    (unsigned long long)(first + i), r[i].commit);
	}
	f->records.first_seq = first;
	f->records.v = r;
	f->records.n = cnt;
	return 0;
}

/* A LEB128 varint of at most 10 bytes and 64 bits; -1 if cut or larger. */
static inline int get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
	const uint8_t *p = *pp;
	uint64_t x = 0;

	for (unsigned s = 0; s < 64; s += 7) {
		uint8_t b;

		if (p == end)
			return -1;
		b = *p++;
		if (s == 63 && b > 1)
			return -1;
		x |= (uint64_t)(b & 0x7f) << s;
		if (!(b & 0x80)) {
			*pp = p;
			*v = x;
			return 0;
		}
	}
	return -1;
}

/* Version 2: records as varints, pid and tid once per run of one thread's
 * records (docs/CAPTURE-FORMAT.md, "PACKED (7)"). */
static int dec_packed(const msgpack_object *v, size_t n, struct shmt_cap_frame *f,
		      msgpack_zone *z, const struct ctx *c)
{
	const uint8_t *p, *end;
	struct shmt_record *r;
	uint64_t first, cnt, ts = 0;
	uint32_t pid = 0, tid = 0;

	if (n < SHMT_CAP_RECORDS_FIELDS)
		return fail(c, -EBADMSG, "packed frame has %zu fields, needs 3", n);
	GET(&v[0], UINT64_MAX, first, "first_seq");
	GET(&v[1], SHMT_CAP_MAX_RECORDS, cnt, "record count");
	if (first + cnt < first)
		return fail(c, -EBADMSG, "sequence %llu + %llu wraps",
			    (unsigned long long)first, (unsigned long long)cnt);
	if (v[2].type != MSGPACK_OBJECT_BIN)
		return fail(c, -EBADMSG, "records are not a bin");
	/* before allocating: every record takes at least 5 bytes */
	if (cnt > v[2].via.bin.size / SHMT_CAP_PACKED_MIN)
		return fail(c, -EBADMSG, "%llu records cannot fit in %u bytes",
			    (unsigned long long)cnt, v[2].via.bin.size);
	r = msgpack_zone_malloc(z, cnt * sizeof(*r) + 1);
	if (!r)
		return fail(c, -ENOMEM, "out of memory");
	p = (const uint8_t *)v[2].via.bin.ptr;
	end = p + v[2].via.bin.size;
	for (uint64_t i = 0; i < cnt; i++) {
		uint64_t tag, kind, x, name, cat, flow = 0;

		if (get_varint(&p, end, &tag))
			goto bad;
		kind = tag >> 2;
		/* one collector wrote the frame from one ring: a bad kind
		 * means damage, so the frame goes, not the record */
		if (!shmt_kind_valid(kind))
			return fail(c, -EBADMSG, "record %llu (seq %llu) has kind %llu",
				    (unsigned long long)i, (unsigned long long)(first + i),
				    (unsigned long long)kind);
		if (tag & 1) {
			uint64_t a, b;

			if (get_varint(&p, end, &a) || get_varint(&p, end, &b))
				goto bad;
			if (a > UINT32_MAX || b > UINT32_MAX)
				return fail(c, -EBADMSG, "record %llu: pid %llu or tid %llu out of range",
					    (unsigned long long)i, (unsigned long long)a,
					    (unsigned long long)b);
			pid = (uint32_t)a;
			tid = (uint32_t)b;
		} else if (i == 0) {
			return fail(c, -EBADMSG, "first record does not name its thread");
		}
		if (get_varint(&p, end, &x))
			goto bad;
		ts += (x >> 1) ^ (0 - (x & 1));	/* zigzag delta, modulo 2^64 */
		r[i].ts = ts;
		if (get_varint(&p, end, &r[i].dur) || get_varint(&p, end, &name) ||
		    get_varint(&p, end, &cat))
			goto bad;
		if (name > UINT16_MAX || cat > UINT16_MAX)
			return fail(c, -EBADMSG, "record %llu: string id %llu out of range",
				    (unsigned long long)i,
				    (unsigned long long)(name > cat ? name : cat));
		if (tag & 2) {
			if (get_varint(&p, end, &flow))
				goto bad;
			if (!flow)
				return fail(c, -EBADMSG, "record %llu: flow flag with flow 0",
					    (unsigned long long)i);
		}
		r[i].flow = flow;
		r[i].pid = pid;
		r[i].tid = tid;
		r[i].name = (uint16_t)name;
		r[i].cat = (uint16_t)cat;
		r[i].commit = (uint32_t)kind;
		continue;
bad:
		return fail(c, -EBADMSG, "record %llu (seq %llu): varint cut or over 64 bits",
			    (unsigned long long)i, (unsigned long long)(first + i));
	}
	if (p != end)
		return fail(c, -EBADMSG, "%zu bytes after %llu records", (size_t)(end - p),
			    (unsigned long long)cnt);
	f->records.first_seq = first;
	f->records.v = r;
	f->records.n = cnt;
	f->records.packed = 1;
	return 0;
}

static int dec_loss(const msgpack_object *v, size_t n, struct shmt_cap_loss *l,
		    const struct ctx *c)
{
	if (n < SHMT_CAP_LOSS_MIN_FIELDS)
		return fail(c, -EBADMSG, "loss frame has %zu fields, needs 6", n);
	/* the fields after the first six came later: absent reads as 0 */
	memset(l, 0, sizeof(*l));
	GET(&v[0], UINT64_MAX, l->at_ns, "at_ns");
	GET(&v[1], UINT64_MAX, l->dropped, "dropped");
	GET(&v[2], UINT64_MAX, l->overwritten, "overwritten");
	GET(&v[3], UINT64_MAX, l->lock_timeouts, "lock_timeouts");
	GET(&v[4], UINT64_MAX, l->torn, "torn");
	GET(&v[5], UINT64_MAX, l->names_dropped, "names_dropped");
	if (n > 6)
		GET(&v[6], UINT64_MAX, l->strings_dropped, "strings_dropped");
	if (n > 7)
		GET(&v[7], UINT32_MAX, l->max_strings, "max_strings");
	if (n > 8)
		GET(&v[8], UINT32_MAX, l->string_bytes, "string_bytes");
	if (n > 9)
		GET(&v[9], UINT32_MAX, l->max_threads, "max_threads");
	if (n > 10)
		GET(&v[10], UINT64_MAX, l->published, "published");
	return 0;
}

static int dec_end(const msgpack_object *v, size_t n, struct shmt_cap_end *e,
		   const struct ctx *c)
{
	if (n < SHMT_CAP_END_FIELDS)
		return fail(c, -EBADMSG, "end frame has %zu fields, needs 3", n);
	GET(&v[0], UINT64_MAX, e->records, "records");
	GET(&v[1], UINT64_MAX, e->end_ns, "end_ns");
	GET(&v[2], UINT32_MAX, e->next_part, "next_part");
	return 0;
}

/*
 * The one decoder behind shmt_cap_decode() and shmt_cap_next(): returns
 * the frame's length, 0 if buf holds only its beginning, or -errno.
 */
static long decode(const uint8_t *buf, size_t len, uint64_t off,
		   struct shmt_cap_frame *f, msgpack_zone *z, char *err, size_t errlen)
{
	const struct ctx c = { .off = off, .err = err, .errlen = errlen };
	msgpack_unpacked u;
	const msgpack_object *v;
	size_t flen = 0, used = 0;
	uint32_t stored, crc;
	uint64_t type;
	size_t n;
	int rc;

	if (!len)
		return 0;
	if (!((buf[0] >= 0x90 && buf[0] <= 0x9f) || buf[0] == 0xdc || buf[0] == 0xdd))
		return fail(&c, -EBADMSG, "starts with byte 0x%02x, not an array", buf[0]);
	rc = walk(buf, len, &flen, &c);
	if (rc <= 0)
		return rc;
	if (flen < 1 + 1 + SHMT_CAP_CRC_BYTES || buf[flen - SHMT_CAP_CRC_BYTES] != SHMT_CAP_CRC_TAG)
		return fail(&c, -EBADMSG, "does not end in a 5-byte CRC");
	stored = (uint32_t)be(buf + flen - 4, 4);
	crc = shmt_crc32c(0, buf, flen - SHMT_CAP_CRC_BYTES);
	if (stored != crc)
		return fail(&c, -EBADMSG, "CRC mismatch (stored 0x%08x, computed 0x%08x)",
			    stored, crc);

	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, (const char *)buf, flen, &used) != MSGPACK_UNPACK_SUCCESS ||
	    used != flen || u.data.type != MSGPACK_OBJECT_ARRAY || u.data.via.array.size < 2) {
		rc = fail(&c, -EBADMSG, "not a msgpack array of %zu bytes", flen);
		goto out;
	}
	v = u.data.via.array.ptr;
	n = u.data.via.array.size - 2;	/* fields between type and crc */
	if (v[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
		rc = fail(&c, -EBADMSG, "frame type is not an unsigned integer");
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
		rc = dec_strings(v + 1, n, f, z, &c);
		break;
	case SHMT_CAP_THREADS:
		rc = dec_threads(v + 1, n, f, z, &c);
		break;
	case SHMT_CAP_RECORDS:
		rc = dec_records(v + 1, n, f, z, &c);
		break;
	case SHMT_CAP_PACKED:
		/* callers see one kind of records frame, whatever its encoding */
		f->type = SHMT_CAP_RECORDS;
		rc = dec_packed(v + 1, n, f, z, &c);
		break;
	case SHMT_CAP_LOSS:
		rc = dec_loss(v + 1, n, &f->loss, &c);
		break;
	case SHMT_CAP_END:
		rc = dec_end(v + 1, n, &f->end, &c);
		break;
	default:
		rc = fail(&c, -EBADMSG, "unknown frame type %llu", (unsigned long long)type);
	}
out:
	msgpack_unpacked_destroy(&u);
	return rc ? rc : (long)flen;
}

long shmt_cap_decode(const uint8_t *buf, size_t len, struct shmt_cap_frame *f,
		     msgpack_zone *z, char *err, size_t errlen)
{
	return decode(buf, len, 0, f, z, err, errlen);
}

struct shmt_cap_reader {
	int fd;
	int eof;
	int state;		/* 0 reading, 1 END seen, 2 done (rc 0), <0 failed */
	uint8_t *buf;
	size_t cap;
	size_t start, end;	/* unconsumed bytes buf[start..end) */
	uint64_t base;		/* file offset of buf[0] */
	msgpack_zone *z;
	struct shmt_cap_header header;
	char msg[256];		/* the sticky error */
};

static int seterr(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int seterr(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Reads more bytes, moving the unconsumed ones to the front and growing the
 * buffer (never past SHMT_CAP_MAX_FRAME) when it is full. */
static int fill(struct shmt_cap_reader *r, char *err, size_t errlen)
{
	ssize_t got;

	if (r->start) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->base += r->start;
		r->end -= r->start;
		r->start = 0;
	}
	if (r->end == r->cap) {
		size_t cap = r->cap * 2 > SHMT_CAP_MAX_FRAME ? SHMT_CAP_MAX_FRAME : r->cap * 2;
		uint8_t *nb;

		if (cap == r->cap)	/* walk() refuses longer frames first */
			return seterr(err, errlen, -EBADMSG, "frame at offset %llu is too long",
				      (unsigned long long)r->base);
		nb = realloc(r->buf, cap);
		if (!nb)
			return seterr(err, errlen, -ENOMEM, "out of memory for a %zu-byte frame", cap);
		r->buf = nb;
		r->cap = cap;
	}
	do {
		got = read(r->fd, r->buf + r->end, r->cap - r->end);
	} while (got < 0 && errno == EINTR);
	if (got < 0)
		return seterr(err, errlen, -errno, "reading capture at offset %llu: %s",
			      (unsigned long long)(r->base + r->end), strerror(errno));
	if (!got)
		r->eof = 1;
	r->end += got;
	return 0;
}

/* Frames are at most SHMT_CAP_MAX_FRAME, so this loop ends: each fill()
 * either adds bytes, hits EOF, or fails on a full maximum-size buffer. */
static int next_frame(struct shmt_cap_reader *r, struct shmt_cap_frame *f,
		      char *err, size_t errlen)
{
	for (;;) {
		uint64_t off = r->base + r->start;
		long n;
		int rc;

		if (r->start < r->end) {
			msgpack_zone_clear(r->z);
			n = decode(r->buf + r->start, r->end - r->start, off, f, r->z,
				   err, errlen);
			if (n < 0)
				return (int)n;
			if (n > 0) {
				r->start += n;
				return 1;
			}
		}
		if (r->eof) {
			if (r->start == r->end)
				return seterr(err, errlen, -EPIPE,
					      "capture ends at offset %llu without an END frame (cut)",
					      (unsigned long long)off);
			return seterr(err, errlen, -EPIPE,
				      "capture cut at offset %llu inside the frame at offset %llu",
				      (unsigned long long)(r->base + r->end),
				      (unsigned long long)off);
		}
		if ((rc = fill(r, err, errlen)))
			return rc;
	}
}

/* The bytes a capture begins with: array header, type 1, "SHMTCAP".
 * Returns 1 if buf[0..len) could begin a capture, 0 if it cannot. */
static int looks_like_capture(const uint8_t *b, size_t len)
{
	static const uint8_t magic[] = { 0x01, 0xa7, 'S', 'H', 'M', 'T', 'C', 'A', 'P' };
	size_t h;

	if (b[0] >= 0x90 && b[0] <= 0x9f)
		h = 1;
	else if (b[0] == 0xdc)
		h = 3;
	else if (b[0] == 0xdd)
		h = 5;
	else
		return 0;
	for (size_t i = 0; i < sizeof(magic) && h + i < len; i++)
		if (b[h + i] != magic[i])
			return 0;
	return 1;
}

int shmt_cap_open(const char *path, struct shmt_cap_reader **out, char *err, size_t errlen)
{
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f = { .type = 0 };
	int rc;

	*out = NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return seterr(err, errlen, -ENOMEM, "out of memory");
	r->fd = -1;
	r->cap = READ_MIN;
	r->buf = malloc(r->cap);
	r->z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	if (!r->buf || !r->z) {
		rc = seterr(err, errlen, -ENOMEM, "out of memory");
		goto fail;
	}
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0) {
		rc = seterr(err, errlen, -errno, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if ((rc = fill(r, err, errlen)))
		goto fail;
	if (r->end == 0) {
		rc = seterr(err, errlen, -EBADMSG, "%s: empty capture file", path);
		goto fail;
	}
	if (!looks_like_capture(r->buf, r->end)) {
		rc = seterr(err, errlen, -EPROTO, "%s: not a shmtrace capture", path);
		goto fail;
	}
	rc = next_frame(r, &f, err, errlen);
	if (rc == 1 && f.type != SHMT_CAP_HEADER)	/* cannot pass the magic check */
		rc = seterr(err, errlen, -EBADMSG, "no header frame");
	if (rc < 0) {
		char why[200] = "";

		if (err && errlen)
			snprintf(why, sizeof(why), "%s", err);
		seterr(err, errlen, rc, "%s: %s%s", path,
		       rc == -EBADMSG ? "damaged capture header: " : "", why);
		goto fail;
	}
	r->header = f.header;
	*out = r;
	return 0;
fail:
	shmt_cap_close(r);
	return rc;
}

int shmt_cap_next(struct shmt_cap_reader *r, struct shmt_cap_frame *f, char *err, size_t errlen)
{
	int rc;

	if (r->state < 0)
		return seterr(err, errlen, r->state, "%s", r->msg);
	if (r->state == 2)
		return 0;
	if (r->state == 1) {
		/* after END: only EOF is clean */
		if (r->start == r->end && !r->eof && (rc = fill(r, err, errlen)))
			goto failed;
		if (r->start < r->end) {
			rc = seterr(err, errlen, -EBADMSG,
				    "bytes follow the END frame, at offset %llu",
				    (unsigned long long)(r->base + r->start));
			goto failed;
		}
		r->state = 2;
		return 0;
	}
	rc = next_frame(r, f, err, errlen);
	if (rc == 1 && f->type == SHMT_CAP_HEADER)
		rc = seterr(err, errlen, -EBADMSG, "second HEADER frame at offset %llu",
			    (unsigned long long)f->offset);
	if (rc == 1) {
		if (f->type == SHMT_CAP_END)
			r->state = 1;
		return 1;
	}
failed:
	r->state = rc;
	snprintf(r->msg, sizeof(r->msg), "%s", err && errlen ? err : "capture read failed");
	return rc;
}

const struct shmt_cap_header *shmt_cap_header_of(const struct shmt_cap_reader *r)
{
	return &r->header;
}

void shmt_cap_close(struct shmt_cap_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	if (r->z)
		msgpack_zone_free(r->z);
	free(r->buf);
	free(r);
}
