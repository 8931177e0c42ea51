/* SPDX-License-Identifier: MIT */
/*
 * producer.h - what the producer's parts share: the calling process's
 * identity and its registry of live handles (process.c), and the
 * per-thread slots of the hot path (emit.c) and their blocks (stage.c).
 */
#ifndef SHMTRACE_PRODUCER_H
#define SHMTRACE_PRODUCER_H

#include <pthread.h>
#include <unistd.h>

#include "handle.h"
#include "loss.h"

#define SHMT_TLS_SLOTS		4	/* rings a thread writes to without a lookup */
#define SHMT_MAX_HANDLES	64	/* live handles per process */
#define SHMT_LOCK_TIMEOUT_NS	(100ull * 1000 * 1000)	/* a flush waits at most this */

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
};

/* emit.c: the calling thread's slots, slot 0 the one the hot path checks */
extern __thread struct shmt_tls_slot shmt_tls[SHMT_TLS_SLOTS]
	__attribute__((tls_model("initial-exec")));
extern __thread uint32_t shmt_tls_tid __attribute__((tls_model("initial-exec")));
extern __thread uint32_t shmt_tls_tid_gen __attribute__((tls_model("initial-exec")));

/* process.c: the process's identity, refreshed in the child after fork() */
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

/* Once per process: identity, the fork and thread-exit hooks. */
void shmt_process_init(void);
/* A new attachment id, never reused. */
uint64_t shmt_next_att_id(void);
/* Registers a live handle (-EMFILE past SHMT_MAX_HANDLES), or forgets one. */
int shmt_registry_add(shmtrace_t *t);
void shmt_registry_remove(shmtrace_t *t);
/* Arms the calling thread's exit handler (frees its blocks). */
void shmt_thread_watch(void);
/* The calling thread's name: the one it set, else its comm. */
void shmt_thread_name(char *buf);

/* stage.c: finds or makes the calling thread's slot for a (NULL: no block,
 * write under the lock with shmt_emit_direct()); makes room for n more
 * records; flushes the slot's block, waiting for the lock or (try) only
 * trying it. */
struct shmt_tls_slot *shmt_slot_slow(shmtrace_t *t, struct shmt_att *a);
/* Gives slot s's block back (its records into the ring, the block freed)
 * and forgets the slot. */
void shmt_slot_release(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s);
int shmt_make_room(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s, unsigned n);
int shmt_flush_slot(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s, bool try);
int shmt_emit_direct(shmtrace_t *t, struct shmt_att *a, const struct shmt_record *r, unsigned n);

static inline uint32_t shmt_my_tid(void)
{
	if (unlikely(shmt_tls_tid_gen != shmt_fork_gen)) {
		shmt_tls_tid = (uint32_t)gettid();
		shmt_tls_tid_gen = shmt_fork_gen;
	}
	return shmt_tls_tid;
}

/* The blocks claimed through a, one bit each (changed under the lock). */
static inline void shmt_claimed_set(struct shmt_att *a, uint32_t idx, bool on)
{
	uint64_t bit = 1ull << (idx % 64);

	if (on)
		a->claimed[idx / 64] |= bit;
	else
		a->claimed[idx / 64] &= ~bit;
}

static inline bool shmt_claimed_get(const struct shmt_att *a, uint32_t idx)
{
	return a->claimed[idx / 64] >> (idx % 64) & 1;
}

#endif /* SHMTRACE_PRODUCER_H */
