/* SPDX-License-Identifier: MIT */
/*
 * intern.c - shmtrace_intern(): a per-process cache (intern_cache.c) in
 * front of the shared string table, so that interning a known string costs
 * no ring lock.
 */
#include <errno.h>
#include <string.h>

#include "producer.h"

/* Failures cached per handle at most: strings that did not fit are not
 * bounded by the table's size, as ids are. */
#define INTERN_MAX_FAILED 65536u

SHMT_API uint32_t shmtrace_intern(shmtrace_t *t, const char *s)
{
	struct intern_entry *e;
	struct shmt_att *a;
	size_t len;
	uint32_t h, hid = 0;
	int id;

	if (!t || !s)
		return 0;
	len = strnlen(s, SHMT_STRING_MAX);
	h = shmt_hash(s, len);
	shmt_attach_current(t);
	pthread_mutex_lock(&t->local);
	e = shmt_intern_cache_find(t->cache, s, len, h);
	if (e) {
		hid = e->id;
		pthread_mutex_unlock(&t->local);
		return hid;
	}
	/* stable under local: attaching holds it */
	a = t->cur;
	if (!a) {
		pthread_mutex_unlock(&t->local);
		return 0;	/* no ring yet */
	}
	/* the ring lock is taken with the local one held: lock order is
	 * always local, then ring */
	id = shmt_producer_lock(a, t->lock_timeout_ns);
	if (id == 0) {
		id = shmt_intern_locked(&a->v, s, len);
		shmt_unlock(&a->v);
	}
	/* A string that did not fit never will (the table and its heap only
	 * fill up): remember the failure too, so that it is counted once per
	 * handle in strings_dropped and does not take the ring lock again. */
	if (id > 0)
		hid = shmt_handle_id(t, a, (uint32_t)id);
	if (hid)
		shmt_intern_cache_put(t, s, len, h, hid);
	else if (id == -ENOSPC && (!t->cache || t->cache->failed < INTERN_MAX_FAILED))
		shmt_intern_cache_put(t, s, len, h, 0);
	pthread_mutex_unlock(&t->local);
	return hid;
}
