/* SPDX-License-Identifier: MIT */
/*
 * inflight.c - the spans a thread had open, read from its staging block
 * (bounds-checked, the block is untrusted) as SHMTRACE_KIND_OPEN records:
 * by a post-mortem reader, and by adopt.c, which records them into the
 * ring when the thread is dead, before the block is reused.
 */
#include <string.h>

#include "ring_reader.h"

uint32_t shmt_block_open_spans(const struct shmt_view *v, uint32_t i, struct shmt_record *out)
{
	struct shmt_block *b;
	uint64_t closing, written;
	uint32_t depth, n;

	b = shmt_block_at(v, i);
	if (!b || v->minor < 2)
		return 0;	/* before minor 2 these bytes were padding */
	if (load_acquire(&b->state) != SHMT_BLOCK_OWNED)
		return 0;
	/* pairs with the owner's release store of open_depth */
	depth = load_acquire(&b->open_depth);
	n = depth < SHMT_OPEN_MAX ? depth : SHMT_OPEN_MAX;
	/* the top span's record is published already: not open any more */
	closing = load_relaxed(&b->open_closing);
	written = load_acquire(&b->written);
	if (n && n == depth && (closing & 0xff) == depth && closing >> 8 == (written & (~0ull >> 8)))
		n--;
	for (uint32_t k = 0; k < n; k++) {
		const struct shmt_open *e = shmt_block_open(b, k);
		uint64_t role = v->minor >= 7 ? load_relaxed(&b->open_roles[k]) : 0;

		memset(&out[k], 0, sizeof(out[k]));
		out[k].ts = load_relaxed(&e->ts);
		/* a peer rewriting ring_id only misplaces flows it could forge */
		out[k].flow = shmt_open_flow_unpack(load_relaxed(&e->flow),
						    load_relaxed(&v->h->ring_id));
		if (out[k].flow)
			out[k].flow |= (role & (SHMT_ROLE_RECEIVES | SHMT_ROLE_TERMINATES))
				       << SHMT_ROLE_SHIFT;
		out[k].name = load_relaxed(&e->name);
		out[k].cat = load_relaxed(&e->cat);
		out[k].pid = load_relaxed(&b->pid);
		out[k].tid = load_relaxed(&b->tid);
		out[k].commit = SHMTRACE_KIND_OPEN;
	}
	return n;
}

/*
 * The open spans of a thread that is alive (by /proc, as the collector
 * tells a dead one) last until now, as far as anyone knows: their end is
 * the moment it was seen alive in them. A dead thread's are left without
 * an end (SHMT_OPEN_END_UNKNOWN): when it died is not known, and the
 * export ends them with the trace.
 */
uint32_t shmt_block_open_spans_seen(const struct shmt_view *v, uint32_t i,
				    const struct shmt_block_info *info, struct shmt_record *out)
{
	uint32_t n = shmt_block_open_spans(v, i, out);
	uint64_t now;

	if (!n || !shmt_owner_alive(info->pid, info->tid, info->start_time))
		return n;
	now = shmt_clock_now(&v->clock);
	for (uint32_t k = 0; k < n; k++)
		out[k].dur = now > out[k].ts ? now - out[k].ts : SHMT_OPEN_END_UNKNOWN;
	return n;
}
