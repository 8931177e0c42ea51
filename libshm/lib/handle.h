/* SPDX-License-Identifier: MIT */
/*
 * handle.h - the producer library's own state: a handle (shmtrace_t), its
 * attachments to successive segments behind one ring name, and what the
 * parts of libshm/lib/ share about them.
 */
#ifndef SHMTRACE_HANDLE_H
#define SHMTRACE_HANDLE_H

#include "ring_writer.h"

#define SHMT_LOOK_NS	(100ull * 1000 * 1000)	/* how often a handle looks at its ring's name */
/* ... and how often once its ring is retired (removed or replaced): at
 * once, then every millisecond or SHMT_LOOK_RETIRED_CALLS calls, whichever
 * comes first: the bound on what goes on to a segment being left */
#define SHMT_LOOK_RETIRED_NS	(1000ull * 1000)
#define SHMT_LOOK_RETIRED_CALLS	64u

/*
 * One mapping of a ring by a handle. A handle writes into its current
 * attachment; when the ring's name comes to refer to another segment (the
 * ring was removed and made again) it moves to a new attachment and keeps
 * the old ones mapped until close, since its threads may still be storing
 * into their old blocks (whose records stay, and are found, there).
 */
struct shmt_att {
	struct shmt_view v;
	uint64_t id;			/* never reused; keys the thread caches */
	uint64_t wedged_until;		/* after a lock timeout: trylock only */
	uint32_t slot_flags;		/* SHMT_THREAD_* for the name slots */
	/* blocks claimed through this attachment, one bit each (changed
	 * under the ring lock): close frees these and no others, so closing
	 * one handle never touches what another handle's threads write */
	uint64_t *claimed;
	/* the handle's string ids -> this ring's, or NULL where they are the
	 * same (the first attachment): ids a caller holds stay valid */
	uint16_t *remap;
	struct shmt_att *prev;		/* the attachment before, or NULL */
};

#define SHMT_HANDLE_IDS 65536u		/* string ids are 16 bits */

/* The producer handle. */
struct shmtrace {
	struct shmt_att *cur;		/* acquire-loaded; NULL: ring not there yet */
	char name[SHMT_NAME_MAX + 1];	/* the ring's name, to look again */
	pthread_mutex_t local;		/* guards the intern cache and attaching */
	struct intern_cache *cache;	/* string -> handle id */
	uint64_t lock_timeout_ns;
	uint64_t last_look_ns;		/* when it last looked at the name */
	uint64_t retired_calls;		/* calls since then, its ring retired */
	uint64_t retired_seen;		/* id of the attachment last seen retired */
	/* the current ring is retired, no ring is behind its name and no
	 * collector drains it: calls refuse their records (-ENOENT) and count
	 * them in orphaned, which goes to the next ring's counter */
	bool orphan;
	uint64_t orphaned;
	uint64_t attach_attempts, reattaches;
	/* after a re-attach: handle ids in use (a new string gets its ring's
	 * id as handle id when that is free, else the lowest free one) */
	uint64_t *ids_used;
};

/* Whether the segment of attachment a was retired: removed, or replaced
 * by a ring of the same name (ring_create.c). Read on every call. */
static inline bool shmt_att_retired(const struct shmt_att *a)
{
	return unlikely(load_relaxed(&a->v.h->retired) != 0);
}

/* handle.c: the attachment behind t now, attaching or moving to the ring
 * behind t's name first if it is time to look (see SHMT_LOOK_NS). */
struct shmt_att *shmt_attach_current(shmtrace_t *t);
/* stage.c: takes the ring lock for a producer, bounded (see there) */
int shmt_producer_lock(shmtrace_t *t, struct shmt_att *a);
/* intern.c: handle id for a ring id just interned (t->local held) */
uint32_t shmt_handle_id(shmtrace_t *t, struct shmt_att *a, uint32_t ring_id);
int shmt_intern_remap(shmtrace_t *t, struct shmt_att *a);
/* intern.c: frees t's intern cache (at close) */
void shmt_intern_cache_free(shmtrace_t *t);

#endif /* SHMTRACE_HANDLE_H */
