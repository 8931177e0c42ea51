/* SPDX-License-Identifier: MIT */
/*
 * ring_writer.h - writing a ring: the robust lock and its repair journal,
 * publishing records and flushing staging blocks, adopting a dead
 * thread's block, interning strings and appending thread names under the
 * lock, the loss counters producers add to, making and removing a
 * segment. What producers (libshm/lib/) and the collector (which repairs
 * and adopts blocks) use; the tools (tools/) never include it: they read
 * through ring_reader.h.
 */
#ifndef SHMTRACE_RING_WRITER_H
#define SHMTRACE_RING_WRITER_H

#include <pthread.h>

#include "ring_view.h"

/* ring_create.c: removes name if it still refers to v's segment (mapped
 * writable), marking the segment retired. Returns 0, -ESTALE if the name
 * now refers to another segment (left alone), or another -errno. */
int shmt_ring_unlink_view(const char *name, struct shmt_view *v);

/* clock.c: the clock's parameters, measured when a ring is made */
void shmt_clock_calibrate(struct shmt_clock *c, bool allow_tsc);

/* lock.c: the ring's robust mutex. A wait whose owner is stopped (SIGSTOP,
 * a debugger) gives up after SHMT_LOCK_STOPPED_NS, whatever its timeout. */
#define SHMT_LOCK_STOPPED_NS	(2ull * 1000 * 1000)
int shmt_lock(struct shmt_view *v, uint64_t timeout_ns);
void shmt_unlock(struct shmt_view *v);
bool shmt_mutex_sane(const struct shmt_view *v);
int shmt_mutex_init(pthread_mutex_t *m);
void shmt_repair(struct shmt_view *v);
/* Test hook: called at named points inside critical sections. */
extern void (*shmt_test_hook)(const char *where);
#define SHMT_HOOK(where) do { if (unlikely(shmt_test_hook != NULL)) shmt_test_hook(where); } while (0)

/* ring_write.c: moving records into the ring; caller holds the lock. */
uint64_t shmt_flush_block_locked(struct shmt_view *v, uint32_t idx);
uint64_t shmt_sequence_block_locked(struct shmt_view *v, uint32_t idx, uint64_t *seq0,
				    uint64_t *taken);
struct shmt_full;
uint64_t shmt_sequence_copy_locked(struct shmt_view *v, struct shmt_full *e);
int shmt_write_direct_locked(struct shmt_view *v, const struct shmt_record *r);
bool shmt_wake_due(const struct shmt_view *v);
void shmt_wake_collector(struct shmt_view *v);

/*
 * adopt.c: staged records flushed, and a dead thread's block taken back
 * (by a producer that needs a block, or by the collector): the owner
 * found dead without the lock, then, under it, its records flushed, its
 * open spans recorded, the block freed. With all, live threads' staged
 * records are flushed too (the collector's idle flush).
 * shmt_adopt_blocks_locked() lists and flushes in one hold (a
 * producer's; 0 if it cannot allocate the list). The collector lists the
 * blocks that have something to flush without the lock,
 * shmt_staged_blocks() (out: room for nblocks), reading every block's
 * header there and not in a hold; then, under it,
 * shmt_adopt_listed_locked() flushes list[*from ..), stopping after the
 * block that brings what it moved to most or beyond, *from then the next
 * to flush: each hold moves a bounded amount. Each returns records
 * published. shmt_adopt_listed_warm(), called just before the lock, reads
 * what such a hold would copy and where to, so that the hold finds it in
 * cache.
 */
struct shmt_owner {
	uint32_t pid, tid;
	uint64_t start_time;
	uint64_t seen;		/* ring clock when found dead: its open spans' end */
};
struct shmt_full;
uint32_t shmt_find_dead_blocks(const struct shmt_view *v, struct shmt_owner *dead);
uint64_t shmt_adopt_blocks_locked(struct shmt_view *v, bool all, const struct shmt_owner *dead);
uint32_t shmt_staged_blocks(const struct shmt_view *v, const struct shmt_owner *dead,
			    struct shmt_full *out);
uint64_t shmt_adopt_listed_warm(const struct shmt_view *v, const struct shmt_full *list, uint32_t n,
				uint32_t from, uint64_t most);
uint64_t shmt_adopt_listed_locked(struct shmt_view *v, struct shmt_full *list, uint32_t n,
				  bool all, const struct shmt_owner *dead, uint64_t most,
				  uint32_t *from);
/*
 * adopt.c, the collector's idle flush without a copy under the lock (2.2,
 * a discard ring it drains): shmt_adopt_listed_copy(), before the lock,
 * copies the staged records of each owned block of list[from ..), its
 * thread alive or dead (up to most
 * records, at most `blocks` blocks) into a free block it claims for them
 * (claimed by tid, the caller's thread: the reaper frees it should the
 * caller die), and marks the entry copied; shmt_adopt_listed_locked()
 * then publishes each copy in a few stores (shmt_sequence_copy_locked())
 * instead of copying the block, and the entry describes the copy as an
 * extent (seq not UINT64_MAX), which the caller keeps until it has
 * written it out and then frees, as a block sequenced in place; a dead
 * thread's block is then freed, its open spans written after. A copy
 * no longer the block's next records is freed and the block flushed as
 * before. shmt_adopt_listed_copy() returns the end of what it looked at,
 * for the hold to flush no further (the rest is copied by the next one):
 * n when it looked at all, or when no block is free for a copy (then the
 * rest is copied under the lock, as before). shmt_adopt_listed_uncopy()
 * frees the copies of list[from, n) not published (a hold that did not
 * reach them).
 */
uint32_t shmt_adopt_listed_copy(struct shmt_view *v, struct shmt_full *list, uint32_t n,
				uint32_t from, uint64_t most, uint32_t blocks, uint32_t tid);
void shmt_adopt_listed_uncopy(struct shmt_view *v, struct shmt_full *list, uint32_t n, uint32_t from);

/*
 * handoff.c: blocks changing hands without the lock (ring_format.h,
 * SHMT_BLOCK_FULL). shmt_block_claim() takes a free block for owner me,
 * looking from block from on: its index, or -ENOSPC;
 * shmt_block_claim_copy() takes one for the collector's copy of block
 * of's records, left CLAIMING by tid, with of's owner words, a claim
 * number of its own and no open spans. shmt_block_handoff()
 * takes one the same way, moves block old's stack of open spans to it
 * and hands old over (FULL) for the collector to flush: the new index,
 * or -ENOSPC with old untouched. shmt_block_leave(): the owner gives its
 * block up: handed over if it holds records, else freed (no lock).
 * shmt_handoff_on(): whether a producer hands blocks over in this ring
 * (minor 10, a collector draining). shmt_self_sequence_on(): whether,
 * with no collector draining, a producer hands its full block over to
 * itself and sequences it in place under the lock instead of copying it
 * (a 2.0 discard ring holding under a quarter of its blocks' records).
 * The collector's side: shmt_full_blocks() lists the FULL blocks into
 * order[nblocks], oldest claim first (no lock): all, or those of owner
 * `of` only (tid 0: of any thread of its process; a producer about to
 * copy its own block, whose records must not pass those it handed over);
 * shmt_flush_full_locked()
 * flushes them in that order and frees them, at most about `most`
 * records, stopping at the first a discard ring has no room for yet
 * (SHMT_FLUSH_KEEP; without, a thread's last flush, what does not fit is
 * dropped and counted), or that is full again in a later life than
 * listed (SHMT_FLUSH_OWN, a list of one owner's: skipping it), and says
 * in *left how many it did not reach; with SHMT_FLUSH_IN_PLACE (the
 * collector of a 2.0 discard ring) it moves none: it sequences each
 * where it is (shmt_sequence_block_locked(), which order[k] then
 * describes) and leaves it SEQUENCED, for the collector to encode in
 * place and free once its tail passed it; shmt_reap_claims() frees the
 * blocks whose claimer died before it owned them (no lock).
 */
int shmt_block_claim(struct shmt_view *v, const struct shmt_owner *me, uint32_t from);
int shmt_block_claim_copy(struct shmt_view *v, uint32_t tid, uint32_t from,
			  const struct shmt_block *of);
int shmt_block_handoff(struct shmt_view *v, const struct shmt_owner *me, uint32_t old);
void shmt_block_leave(struct shmt_view *v, uint32_t idx);
bool shmt_handoff_on(const struct shmt_view *v);
bool shmt_self_sequence_on(const struct shmt_view *v);
struct shmt_full {
	uint64_t no;		/* its claim_no when listed */
	uint32_t i;		/* the block */
	/* SHMT_FLUSH_IN_PLACE: set by the flush to where its records now
	 * are: sequences [seq, seq + n), block records from taken on
	 * (seq UINT64_MAX: copied, or not reached) */
	uint32_t n;
	uint64_t seq, taken;
	/* the collector's idle flush (2.2): block i's records [taken,
	 * taken + n) copied into block `copy`, claimed for them without the
	 * lock (shmt_adopt_listed_copy()); published, the entry describes
	 * the copy as above, and copied is false again */
	bool copied;
	uint32_t copy;
	uint32_t copier;	/* the tid the copy is claimed by */
	uint64_t copy_taken;	/* the copy's taken: its records start there */
};
uint32_t shmt_full_blocks(const struct shmt_view *v, const struct shmt_owner *of, struct shmt_full *order);
#define SHMT_FLUSH_KEEP	1u	/* keep what a discard ring has no room for yet */
#define SHMT_FLUSH_OWN	2u	/* the list is one owner's (shmt_full_blocks(of)) */
#define SHMT_FLUSH_IN_PLACE 4u	/* 2.0, a discard ring: sequence blocks, copy none */
uint64_t shmt_flush_full_locked(struct shmt_view *v, struct shmt_full *order, uint32_t n,
				uint64_t most, unsigned flags, uint32_t *left);
uint32_t shmt_reap_claims(struct shmt_view *v);
/* Whether block b's pending records fit the ring now (always, but in a
 * discard ring): a flush that need not drop waits until they do. */
bool shmt_ring_has_room(const struct shmt_view *v, struct shmt_block *b);

/* trigger.c: a trigger's record staged, counted in the header and the
 * flight recorder sleeping on it woken (nothing in a ring before minor 9);
 * and the recorder's sleep: until the count is no longer seen, timeout_ns
 * pass or a signal comes (-EINTR), else 0. */
void shmt_trigger_note(struct shmt_view *v);
int shmt_trigger_wait(struct shmt_view *v, uint64_t seen, uint64_t timeout_ns);

/* names.c; flags: SHMT_THREAD_* (ring_format.h) */
int shmt_name_append_locked(struct shmt_view *v, uint32_t pid, uint32_t tid, uint64_t start,
			    uint64_t pidns, uint32_t flags, const char *tname, const char *pname);

/* strings.c */
int shmt_intern_locked(struct shmt_view *v, const char *s, size_t len);
uint32_t shmt_hash(const char *s, size_t len);

/*
 * loss.c: counts n records a producer dropped because it could not take
 * the ring lock in time: in `lock_dropped`, or, in a ring older than minor
 * 5 (whose readers know no such counter), in `dropped` as before.
 */
void shmt_loss_lock_dropped(struct shmt_view *v, uint64_t n);

/*
 * loss.c: counts n records a handle refused while its ring was removed and
 * no collector drained it, added to the ring it moved to: in `orphaned`,
 * or in `dropped` in a ring older than minor 5.
 */
void shmt_loss_orphaned(struct shmt_view *v, uint64_t n);

#endif /* SHMTRACE_RING_WRITER_H */
