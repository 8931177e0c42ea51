/* SPDX-License-Identifier: MIT */
/*
 * strings.c - the interned-string table shared by all processes of a ring.
 *
 * Layout: entries[id] = {off, len} into a byte heap, and an open-addressing
 * hash of ids for lookup under the lock. An append writes the bytes, the
 * entry and the hash slot, then release-stores the new count; a taker that
 * inherits the lock from a dead appender rolls back anything past the count
 * (shmt_repair), so a half-appended string is never seen.
 */
#include <errno.h>
#include <string.h>

#include "hash.h"
#include "ring_writer.h"

/* util/'s FNV-1a: the table's layout depends on it, never to change. */
uint32_t shmt_hash(const char *s, size_t len)
{
	return fnv1a32(s, len);
}

/*
 * Returns the id of s (len bytes), appending it if new, or -ENOSPC when
 * the table or its heap is full, counted in strings_dropped so that the
 * records exported as "?" are explained. The lock is held.
 */
int shmt_intern_locked(struct shmt_view *v, const char *s, size_t len)
{
	struct shmt_header *h = v->h;
	uint32_t n = load_relaxed(&h->strings);
	/* ids are looked up below n, a count any peer can write: bound it by
	 * the validated table, never by the header */
	uint32_t valid = n < v->max_strings + 1 ? n : v->max_strings + 1;
	uint32_t mask = v->hash_slots - 1;
	uint32_t i = shmt_hash(s, len) & mask;
	uint32_t used = h->heap_used;
	struct shmt_string e;

	/* "" too gets an id of its own: 0 is what a failed intern returns,
	 * exported as "?" and counted as a name lost */
	for (uint32_t probes = 0; probes < v->hash_slots; probes++, i = (i + 1) & mask) {
		uint32_t id = *shmt_hash_at(v, i);	/* i is masked: in the table */
		const struct shmt_string *t = shmt_string_at(v, id);

		if (id == 0)
			break;
		if (id >= valid || !t)	/* a slot a peer scribbled on: not ours */
			continue;
		e = *t;
		if (e.len == len && (uint64_t)e.off + len < v->string_bytes &&
		    !memcmp(v->heap + e.off, s, len))
			return (int)id;
	}
	if (n > v->max_strings || *shmt_hash_at(v, i) != 0 ||
	    used >= v->string_bytes || len + 1 > v->string_bytes - used) {
		if (v->minor >= 1)	/* reserved space in a minor-0 ring */
			fetch_add(&h->strings_dropped.v, 1);
		return -ENOSPC;
	}

	h->journal.intern_active = 1;
	memcpy(v->heap + used, s, len);
	v->heap[used + len] = 0;
	shmt_string_at(v, n)->off = used;	/* n <= max_strings: checked above */
	shmt_string_at(v, n)->len = (uint32_t)len;
	*shmt_hash_at(v, i) = (uint16_t)n;
	SHMT_HOOK("intern");
	h->heap_used = used + (uint32_t)len + 1;
	/* pairs with readers' acquire load of strings: entry and bytes are set */
	store_release(&h->strings, n + 1);
	h->journal.intern_active = 0;
	return (int)n;
}
