/* SPDX-License-Identifier: MIT */
/*
 * core.h - the bottom of libshm/lib/ (core.c): the producer's state, a
 * handle (shmtrace_t) and its attachments to successive segments behind one
 * ring name, the calling thread's slots, the process's identity, and the
 * few operations every part of the library shares: taking the ring lock
 * for a producer and giving a thread's block back. core.c calls no other
 * file of libshm/lib/; producer.h declares the files above it.
 */
#ifndef SHMTRACE_CORE_H
#define SHMTRACE_CORE_H

#include <pthread.h>
#include <unistd.h>

#include "ring_writer.h"

#define SHMT_LOOK_NS	(100ull * 1000 * 1000)	/* how often a handle looks at its ring's name */
/* ... and how often once its ring is retired (removed or replaced): at
 * once, then every millisecond or SHMT_LOOK_RETIRED_CALLS calls, whichever
 * comes first: the bound on what goes on to a segment being left */
#define SHMT_LOOK_RETIRED_NS	(1000ull * 1000)
#define SHMT_LOOK_RETIRED_CALLS	64u

#define SHMT_TLS_SLOTS		4	/* rings a thread writes to without a lookup */
#define SHMT_SELF_PENDING	1	/* full blocks of its own a thread may leave waiting */
#define SHMT_MAX_HANDLES	64	/* live handles per process */
#define SHMT_LOCK_TIMEOUT_NS	(100ull * 1000 * 1000)	/* interning, naming, closing wait at most this */
/* a span call whose block and spare block are both full waits at most
 * this for a busy lock, then drops and counts (stage.c) */
#define SHMT_FULL_WAIT_NS	(2ull * 1000 * 1000)
/* how long what a look saw of the ring's collector stands (attach.c) */
#define SHMT_DRAINING_LOOK_NS	(10ull * 1000 * 1000)
/* a thread whose call dropped for want of a free block drops this many
 * calls' records more before it looks again, unless the collector's tail
 * moved meanwhile (stage.c) */
#define SHMT_NO_FREE_SKIP	64u

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
	uint64_t wedged_wait;		/* ... for waits no longer than the one that timed out */
	uint64_t dead_scan_ns;		/* when a thread last read /proc for dead owners' blocks */
	/* when a thread last looked whether a collector drains the ring, and
	 * what it saw (shmt_att_draining(), stage.c) */
	uint64_t draining_ns;
	bool draining;
	uint32_t slot_flags;		/* SHMT_THREAD_* for the name slots */
	uint64_t prefaulted;		/* pages read ahead at open (shmt_view_prefault) */
	/* blocks claimed through this attachment, one bit each (atomic):
	 * close frees these and no others, so closing one handle never
	 * touches what another handle's threads write */
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
	uint64_t full_wait_ns;		/* a span call's wait (SHMT_FULL_WAIT_NS) */
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

/* One thread's view of its block in one ring. */
struct shmt_tls_slot {
	uint64_t id;			/* attachment id; 0 = unused */
	uint32_t gen;			/* shmt_fork_gen when claimed */
	uint32_t idx;			/* block index */
	struct shmt_block *b;
	struct shmt_record *recs;
	uint64_t written;		/* our copy of b->written */
	uint64_t limit;			/* taken + block_records: full, must flush */
	uint64_t soft;			/* <= limit: time to try a flush */
	uint32_t mask;			/* the ring's block_records - 1 */
	bool unnamed;			/* its name slot not appended yet (stage.c) */
	bool spare;			/* a block of its own handed over, not yet flushed (stage.c) */
	/* with no collector, the full blocks it handed over to itself and
	 * that wait for the lock to be sequenced in place, oldest first
	 * (stage.c, sequence_own()) */
	uint32_t npend;
	struct shmt_full pend[SHMT_SELF_PENDING];
	/* pend holds every full block of its own not yet sequenced: false
	 * once it handed one to a collector or kept a spare (stage.c) */
	bool listed;
	/* no block was free to hand over to: the collector's tail then, and
	 * the calls left to drop before the next look (stage.c) */
	uint64_t nofree_tail;
	uint32_t nofree_skip;
};

/*
 * The TLS model of the library's per-thread state. Initial-exec, a fixed
 * offset from the thread pointer, where the library is part of a program
 * from its start: the hot path reads its slot with one load. A module
 * loaded later (the Python extension, which compiles the library in with
 * SHMT_TLS_DYNAMIC) takes its state dynamically instead: the static TLS
 * left for modules loaded after the start is a few hundred bytes that
 * other modules may have taken, and `import shmtrace` then failed
 * ("cannot allocate memory in static TLS block").
 */
#ifdef SHMT_TLS_DYNAMIC
#define SHMT_TLS __attribute__((tls_model("global-dynamic")))
#else
#define SHMT_TLS __attribute__((tls_model("initial-exec")))
#endif

/* the calling thread's slots, slot 0 the one the hot path (emit.c) checks */
extern __thread struct shmt_tls_slot shmt_tls[SHMT_TLS_SLOTS] SHMT_TLS;
extern __thread uint32_t shmt_tls_tid SHMT_TLS;
extern __thread uint32_t shmt_tls_tid_gen SHMT_TLS;

/* the process's identity, set by process.c and refreshed there in the
 * child after fork() */
extern uint32_t shmt_pid;
extern uint64_t shmt_start;		/* its start time (/proc), with pid an owner */
extern uint64_t shmt_pidns;
extern uint32_t shmt_fork_gen;		/* bumped in each fork child */
extern char shmt_pname[SHMT_NAME_LEN];

/* True if slot s is this thread's, in this process, for attachment a: a
 * slot claimed before a fork is the parent's block, not ours. */
static inline bool shmt_slot_is(const struct shmt_tls_slot *s, const struct shmt_att *a)
{
	return s->id == a->id && s->gen == shmt_fork_gen;
}

static inline uint32_t shmt_my_tid(void)
{
	if (unlikely(shmt_tls_tid_gen != shmt_fork_gen)) {
		shmt_tls_tid = (uint32_t)gettid();
		shmt_tls_tid_gen = shmt_fork_gen;
	}
	return shmt_tls_tid;
}

/* The blocks claimed through a, one bit each (changed by threads of the
 * process with or without the lock: atomically). */
static inline void shmt_claimed_set(struct shmt_att *a, uint32_t idx, bool on)
{
	uint64_t bit = 1ull << (idx % 64);

	if (on)
		__atomic_fetch_or(&a->claimed[idx / 64], bit, __ATOMIC_RELAXED);
	else
		__atomic_fetch_and(&a->claimed[idx / 64], ~bit, __ATOMIC_RELAXED);
}

static inline bool shmt_claimed_get(const struct shmt_att *a, uint32_t idx)
{
	return load_relaxed(&a->claimed[idx / 64]) >> (idx % 64) & 1;
}

/* Slot s is given up with its thread still unnamed (the lock was never
 * had for it): counted in names_dropped, once. */
static inline void shmt_slot_name_lost(struct shmt_att *a, struct shmt_tls_slot *s)
{
	if (s->unnamed)
		fetch_add(&a->v.h->names_dropped.v, 1);
	s->unnamed = false;
}

/* A new attachment id, never reused. */
uint64_t shmt_next_att_id(void);
/* Takes the ring lock for a producer, waiting at most wait_ns (see
 * core.c): t->lock_timeout_ns, or a span call's t->full_wait_ns. */
int shmt_producer_lock(struct shmt_att *a, uint64_t wait_ns);
/* The full blocks (handed over, not flushed yet) of the calling thread,
 * of any thread of this process, or of anyone, oldest claim first, in a
 * new array *order that the caller frees (NULL: none); how many. Read
 * without the lock: a thread lists its own before taking it, to flush
 * them under it before the block it holds. */
enum shmt_whose { SHMT_FULL_MINE, SHMT_FULL_PROCESS, SHMT_FULL_ANY };
uint32_t shmt_full_list(const struct shmt_view *v, enum shmt_whose whose, struct shmt_full **order);
/* Gives slot s's block back (its records into the ring, the block freed)
 * and forgets the slot. */
void shmt_slot_release(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s);

#endif /* SHMTRACE_CORE_H */
