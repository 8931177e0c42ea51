/* SPDX-License-Identifier: MIT */
/*
 * capture_ring.c - a ring's name tables as capture frames, read from the
 * ring itself: what the collector sends as they grow and a snapshot
 * carries whole.
 */
#include <errno.h>
#include <stdlib.h>

#include "capture.h"
#include "ring_reader.h"

#define TABLES_BATCH	256u	/* strings or name slots read per frame */

int shmt_cap_put_ring_tables(msgpack_sbuffer *b, const struct shmt_view *v, uint32_t *strings,
			     uint32_t *threads)
{
	uint32_t n = shmt_ring_nstrings(v), nt = shmt_ring_nthreads(v);
	struct shmt_cap_string *s = NULL;
	char (*text)[SHMT_STRING_MAX + 1] = NULL;
	struct shmt_thread *t = NULL;
	int ret = 0;

	if (*strings < n && (!(s = calloc(TABLES_BATCH, sizeof(*s))) ||
			     !(text = calloc(TABLES_BATCH, sizeof(*text)))))
		ret = -ENOMEM;
	for (uint32_t id = *strings; id < n && !ret; ) {
		uint32_t k;

		for (k = 0; k < TABLES_BATCH && id < n; k++, id++) {
			int len = shmt_ring_string(v, id, text[k], sizeof(text[k]));

			s[k].id = id;
			s[k].len = len < 0 ? 0 : (uint32_t)len;	/* damaged: "" */
			s[k].s = text[k];
		}
		ret = shmt_cap_put_strings(b, s, k);
	}
	if (!ret && n > *strings)
		*strings = n;
	if (!ret && *threads < nt && !(t = calloc(TABLES_BATCH, sizeof(*t))))
		ret = -ENOMEM;
	for (uint32_t i = *threads; i < nt && !ret; ) {
		uint32_t k;

		for (k = 0; k < TABLES_BATCH && i < nt; k++, i++)
			shmt_ring_thread(v, i, &t[k]);
		ret = shmt_cap_put_threads(b, t, k);
	}
	if (!ret && nt > *threads)
		*threads = nt;
	free(s);
	free(text);
	free(t);
	return ret;
}
