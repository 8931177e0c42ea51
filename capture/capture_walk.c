/* SPDX-License-Identifier: MIT */
/*
 * capture_walk.c - the decoder's pre-walker: finds where a frame ends by
 * walking its msgpack bytes without allocating, so that a cut is told from
 * garbage and every length and count is bounded before msgpack-c, whose
 * allocations follow the counts it reads, sees the frame.
 */
#include <errno.h>

#include "capture_dec.h"
#include "mp_head.h"

uint64_t shmt_mp_be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

int shmt_mp_head(const uint8_t *p, size_t len, struct shmt_mp_head *h)
{
	uint8_t t = p[0];

	h->hdr = 1;
	h->body = 0;
	h->kids = 0;
	if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) {
		/* fixint, nil, bool */
	} else if (t <= 0x8f) {
		h->kids = 2ull * (t & 0x0f);
	} else if (t <= 0x9f) {
		h->kids = t & 0x0f;
	} else if (t <= 0xbf) {
		h->body = t & 0x1f;
	} else {
		static const uint8_t fixed[] = {	/* 0xca .. 0xd8 */
			5, 9, 2, 3, 5, 9, 2, 3, 5, 9, 3, 4, 6, 10, 18,
		};
		int lb = 0;	/* bytes of a length or count */
		uint64_t v;

		switch (t) {
		case 0xc4: case 0xd9: case 0xc7: lb = 1; break;
		case 0xc5: case 0xda: case 0xdc: case 0xde: case 0xc8: lb = 2; break;
		case 0xc6: case 0xdb: case 0xdd: case 0xdf: case 0xc9: lb = 4; break;
		case 0xc1: return -EBADMSG;
		default: h->hdr = fixed[t - 0xca]; return 1;
		}
		h->hdr = 1 + lb + (t >= 0xc7 && t <= 0xc9);	/* ext: +type */
		if (1 + (size_t)lb > len)
			return 0;
		v = shmt_mp_be(p + 1, lb);
		if (t == 0xdc || t == 0xdd)
			h->kids = v;
		else if (t == 0xde || t == 0xdf)
			h->kids = 2 * v;
		else
			h->body = v;
	}
	return 1;
}

int shmt_cap_walk(const uint8_t *p, size_t len, size_t *flen, const struct shmt_cap_ctx *c)
{
	uint64_t left[SHMT_CAP_MAX_DEPTH];
	uint64_t objects = 0;
	size_t pos = 0;
	int d = 0;

	left[0] = 1;
	while (d >= 0) {
		struct shmt_mp_head h;
		uint64_t need;
		int rc;

		if (!left[d]) {
			d--;
			continue;
		}
		left[d]--;
		if (++objects > SHMT_CAP_MAX_OBJECTS)
			return shmt_cap_fail(c, -EBADMSG, "more than %u msgpack objects",
					     SHMT_CAP_MAX_OBJECTS);
		if (pos >= len)
			return 0;
		rc = shmt_mp_head(p + pos, len - pos, &h);
		if (rc < 0)
			return shmt_cap_fail(c, rc, "invalid msgpack byte 0xc1 at +%zu", pos);
		if (!rc)
			return 0;
		need = pos + h.hdr + h.body;
		if (need > SHMT_CAP_MAX_FRAME)
			return shmt_cap_fail(c, -EBADMSG, "longer than %u bytes", SHMT_CAP_MAX_FRAME);
		if (need > len)
			return 0;
		pos = need;
		if (h.kids) {
			/* every element takes at least a byte */
			if (h.kids > 2ull * SHMT_CAP_MAX_ITEMS || pos + h.kids > SHMT_CAP_MAX_FRAME)
				return shmt_cap_fail(c, -EBADMSG, "array or map of %llu elements",
						     (unsigned long long)h.kids);
			if (d + 1 >= (int)SHMT_CAP_MAX_DEPTH)
				return shmt_cap_fail(c, -EBADMSG, "nested deeper than %d",
						     SHMT_CAP_MAX_DEPTH);
			left[++d] = h.kids;
		}
	}
	*flen = pos;
	return 1;
}
