/* SPDX-License-Identifier: MIT */
/*
 * names.c - process and thread name slots, appended once per thread.
 */
#include <errno.h>
#include <string.h>

#include "ring_writer.h"

/* Appends a name slot; the last slot for a (pid, start, tid) wins.
 * Returns 0, or -ENOSPC (counted) when the table is full. Lock held. */
int shmt_name_append_locked(struct shmt_view *v, uint32_t pid, uint32_t tid, uint64_t start,
			    uint64_t pidns, uint32_t flags, const char *tname, const char *pname)
{
	struct shmt_header *h = v->h;
	uint32_t n = load_relaxed(&h->threads);
	struct shmt_thread *s = shmt_thread_at(v, n);

	if (!s) {
		fetch_add(&h->names_dropped.v, 1);
		return -ENOSPC;
	}
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	s->tid = tid;
	s->start_time = start;
	s->pidns = pidns;
	s->flags = flags;
	strncpy(s->name, tname ? tname : "", SHMT_NAME_LEN - 1);
	strncpy(s->pname, pname ? pname : "", SHMT_NAME_LEN - 1);
	SHMT_HOOK("name-slot");
	/* pairs with readers' acquire load of threads: the slot is complete */
	store_release(&h->threads, n + 1);
	return 0;
}
