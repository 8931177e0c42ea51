/* SPDX-License-Identifier: MIT */
/*
 * capture_dec_records.c - decodes the records of RECORDS frames (version 1,
 * 40-byte little-endian records) and PACKED frames (version 2, varints),
 * both into struct shmt_record with the kind in commit.
 */
#include <errno.h>
#include <stdbool.h>

#include "capture_dec.h"
#include "shmtrace.h"

static uint32_t ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t ld64(const uint8_t *p)
{
	return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

/*
 * The fields both encodings share, [first_seq, count, bin], checked: so
 * many records fit the bin (40 bytes each, or when packed at least
 * SHMT_CAP_PACKED_MIN each) before they are allocated. Returns the records
 * to fill, or NULL with *rc the -errno.
 */
static struct shmt_record *records_head(const msgpack_object *v, size_t n, bool packed,
					uint64_t *first, uint64_t *cnt, msgpack_zone *z,
					const struct shmt_cap_ctx *c, int *rc)
{
	struct shmt_record *r;

	if (n < SHMT_CAP_RECORDS_FIELDS) {
		*rc = shmt_cap_fail(c, -EBADMSG, "%s frame has %zu fields, needs %d",
				    packed ? "packed" : "records", n, SHMT_CAP_RECORDS_FIELDS);
		return NULL;
	}
	if ((*rc = shmt_cap_get_uint(&v[0], UINT64_MAX, first, "first_seq", c)) ||
	    (*rc = shmt_cap_get_uint(&v[1], SHMT_CAP_MAX_RECORDS, cnt, "record count", c)))
		return NULL;
	if (*first + *cnt < *first)
		*rc = shmt_cap_fail(c, -EBADMSG, "sequence %llu + %llu wraps",
				    (unsigned long long)*first, (unsigned long long)*cnt);
	else if (v[2].type != MSGPACK_OBJECT_BIN)
		*rc = shmt_cap_fail(c, -EBADMSG, "records are not a bin");
	else if (!packed && v[2].via.bin.size != *cnt * SHMT_RECORD_SIZE)
		*rc = shmt_cap_fail(c, -EBADMSG, "%llu records in %u bytes, not %u each",
				    (unsigned long long)*cnt, v[2].via.bin.size, SHMT_RECORD_SIZE);
	else if (packed && *cnt > v[2].via.bin.size / SHMT_CAP_PACKED_MIN)
		*rc = shmt_cap_fail(c, -EBADMSG, "%llu records cannot fit in %u bytes",
				    (unsigned long long)*cnt, v[2].via.bin.size);
	else if (!(r = msgpack_zone_malloc(z, *cnt * sizeof(*r) + 1)))
		*rc = shmt_cap_fail(c, -ENOMEM, "out of memory");
	else
		return r;
	return NULL;
}

int shmt_cap_dec_records(const msgpack_object *v, size_t n, struct shmt_cap_frame *f,
			 msgpack_zone *z, const struct shmt_cap_ctx *c)
{
	struct shmt_record *r;
	const uint8_t *p;
	uint64_t first = 0, cnt = 0;
	int rc = 0;

	r = records_head(v, n, false, &first, &cnt, z, c, &rc);
	if (!r)
		return rc;
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
			return shmt_cap_fail(c, -EBADMSG, "record %llu (seq %llu) has kind %u",
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
int shmt_cap_dec_packed(const msgpack_object *v, size_t n, struct shmt_cap_frame *f,
			msgpack_zone *z, const struct shmt_cap_ctx *c)
{
	const uint8_t *p, *end;
	struct shmt_record *r;
	uint64_t first = 0, cnt = 0, ts = 0;
	uint32_t pid = 0, tid = 0;
	int rc = 0;

	r = records_head(v, n, true, &first, &cnt, z, c, &rc);
	if (!r)
		return rc;
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
			return shmt_cap_fail(c, -EBADMSG, "record %llu (seq %llu) has kind %llu",
					     (unsigned long long)i, (unsigned long long)(first + i),
					     (unsigned long long)kind);
		if (tag & 1) {
			uint64_t a, b;

			if (get_varint(&p, end, &a) || get_varint(&p, end, &b))
				goto bad;
			if (a > UINT32_MAX || b > UINT32_MAX)
				return shmt_cap_fail(c, -EBADMSG,
						     "record %llu: pid %llu or tid %llu out of range",
						     (unsigned long long)i, (unsigned long long)a,
						     (unsigned long long)b);
			pid = (uint32_t)a;
			tid = (uint32_t)b;
		} else if (i == 0) {
			return shmt_cap_fail(c, -EBADMSG, "first record does not name its thread");
		}
		if (get_varint(&p, end, &x))
			goto bad;
		ts += (x >> 1) ^ (0 - (x & 1));	/* zigzag delta, modulo 2^64 */
		r[i].ts = ts;
		if (get_varint(&p, end, &r[i].dur) || get_varint(&p, end, &name) ||
		    get_varint(&p, end, &cat))
			goto bad;
		if (name > UINT16_MAX || cat > UINT16_MAX)
			return shmt_cap_fail(c, -EBADMSG, "record %llu: string id %llu out of range",
					     (unsigned long long)i,
					     (unsigned long long)(name > cat ? name : cat));
		if (tag & 2) {
			if (get_varint(&p, end, &flow))
				goto bad;
			if (!flow)
				return shmt_cap_fail(c, -EBADMSG, "record %llu: flow flag with flow 0",
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
		return shmt_cap_fail(c, -EBADMSG, "record %llu (seq %llu): varint cut or over 64 bits",
				     (unsigned long long)i, (unsigned long long)(first + i));
	}
	if (p != end)
		return shmt_cap_fail(c, -EBADMSG, "%zu bytes after %llu records", (size_t)(end - p),
				     (unsigned long long)cnt);
	f->records.first_seq = first;
	f->records.v = r;
	f->records.n = cnt;
	f->records.packed = 1;
	return 0;
}
