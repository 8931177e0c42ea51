/* SPDX-License-Identifier: MIT */
/*
 * ring_reader.h - reading a ring without its lock: the collector's drain
 * and the post-mortem exporter. Nothing here ever takes or touches the
 * mutex, so a corrupt or dead-held lock cannot hang or abort a reader, and
 * every index read from the segment is checked before use.
 *
 * Call order (like perf's mmap reader): shmt_view_open(), then per pass
 * shmt_ring_head(), shmt_ring_read() for each sequence from your position,
 * the staging blocks with shmt_ring_block_pending(), strings and names with
 * shmt_ring_string() and shmt_ring_thread(). Wrap passes in shmt_guarded()
 * so that a peer shrinking the segment is an error, not a SIGBUS.
 *
 * What the tools (tools/) and the collector read a ring with; only loads,
 * over ring_view.h. Writing is ring_writer.h's.
 */
#ifndef SHMTRACE_RING_READER_H
#define SHMTRACE_RING_READER_H

#include "ring_view.h"

/* Returns the published head (acquire: records below it are complete). */
uint64_t shmt_ring_head(const struct shmt_view *v);

/* Returns the collector's tail (acquire: slots below it were released). */
uint64_t shmt_ring_tail(const struct shmt_view *v);

/* The ring's random id (0 in a ring older than minor 1, which has none). */
uint64_t shmt_ring_id(const struct shmt_view *v);

/* What `shmtrace stat` tells of a ring beyond its geometry: the header's
 * counters, read in this order (untrusted numbers, clamped where said). */
struct shmt_ring_status {
	uint64_t head, tail;		/* shmt_ring_head(), then shmt_ring_tail() */
	uint32_t heap_used;		/* string text bytes used, clamped to string_bytes */
	uint64_t lock_recoveries;	/* lock holders found dead and repaired */
};
void shmt_ring_status(const struct shmt_view *v, struct shmt_ring_status *st);

/* The pid the last collector wrote into the header (0: none); it may have
 * died since (tools/ring_census.c tells). */
uint64_t shmt_ring_collector_pid(const struct shmt_view *v);

/* Reads record seq into out. Returns 0, or -EAGAIN if the slot does not
 * hold a finished record of that sequence (never written, half-written
 * by a producer that died, or overwritten in the meantime). In a 2.0
 * ring a record of an extent (below) is read in its block, whatever its
 * slot holds: a look at every block's header, for a reader of a few
 * records; a reader of a range reads it with shmt_ring_read_range(). */
int shmt_ring_read(const struct shmt_view *v, uint64_t seq, struct shmt_record *out);

/*
 * Ring format 2.0: a full block the collector gave sequences where it is
 * (ring_format.h, SHMT_BLOCK_SEQUENCED): sequences [seq, seq + n) are
 * block `block`'s records from `taken` on (modulo its size), not the
 * ring's slots. shmt_ring_extents() lists those of sequences in [from,
 * to) that are published (below head), as their blocks say now, sorted,
 * at most max (one that overlaps one before it is forged: left out), and
 * returns how many (none in a ring before 2.0, nor in an overwrite ring,
 * whose blocks are copied); shmt_extent_read() reads
 * extent e's record of sequence seq as shmt_ring_read() reads a slot (0,
 * or -EAGAIN: the block is no longer that extent, freed once the
 * collector's tail passed it, or the record is of no known kind).
 */
struct shmt_extent {
	uint64_t seq, taken, claim_no;
	uint32_t block, n;
};
uint32_t shmt_ring_extents(const struct shmt_view *v, uint64_t from, uint64_t to,
			   struct shmt_extent *out, uint32_t max);
int shmt_extent_read(const struct shmt_view *v, const struct shmt_extent *e, uint64_t seq,
		     struct shmt_record *out);
/* Whether block b is still the extent whose records start at block record
 * taken and sequence seq0: SEQUENCED with those words (the collector sets
 * taken, then the state, when it frees it). */
static inline bool shmt_block_is_extent(const struct shmt_block *b, uint64_t seq0, uint64_t taken)
{
	return load_relaxed(&b->state) == SHMT_BLOCK_SEQUENCED && load_relaxed(&b->seq0) == seq0 &&
	       load_relaxed(&b->taken) == taken;
}

/* Whether a block, SEQUENCED with written w, taken k and seq0 s (each
 * read once by the caller, who goes on using them), is published: its
 * records are the ring's below head (else its sequencer died before it
 * stored head, and its records are pending as a full block's). */
bool shmt_block_sequenced(const struct shmt_view *v, uint64_t w, uint64_t k, uint64_t s);

/* After shmt_ring_read() failed on seq (below head): true if the slot was
 * lapped (overwrite mode: the head passed seq + capacity, or the slot holds
 * a later lap's record), false if it held no finished record (torn or
 * forged). A slot a flush under way is rewriting for a later lap (its
 * journal covers it) is lapped; one no flush covers is torn: never waited
 * for, and the sum of the two is exact either way. */
bool shmt_ring_lapped(const struct shmt_view *v, uint64_t seq);

/* The same test for any slot, read or not, in either mode: true if the
 * slot was given to a later lap (a discard ring reuses the slots below
 * its tail), which is what a copy of all the slots a ring holds (a
 * snapshot) meets when producers write on during it. */
bool shmt_ring_reused(const struct shmt_view *v, uint64_t seq);

/* After a copy of the slot of seq whose commit word named seq twice (read
 * behind an acquire fence that orders the copy before it): whether the
 * copy may be of a later lap's record all the same. A commit word keeps 24
 * bits of the sequence, so a record a multiple of 2^24 sequences later
 * (one lap of a ring of 2^24 records) names seq too: the head past seq +
 * capacity, or a flush under way that rewrites the slot for a later lap
 * (its journal covers it), says that the slot was given to another. */
bool shmt_ring_overtaken(const struct shmt_view *v, uint64_t seq);

/* Slots a reader found without a finished record of their sequence. */
struct shmt_ring_skips {
	uint64_t lapped;	/* overwrite mode: lapped before read */
	uint64_t torn;		/* half-written (a producer died) or forged */
};

/* Called per slot: r is the record (commit reduced to its kind), or NULL
 * for a slot skipped. A nonzero return stops the pass. */
typedef int (*shmt_ring_record_fn)(void *arg, uint64_t seq, const struct shmt_record *r);

/* The ring read loop of the collector and the post-mortem reader: reads
 * slots [from, to) in order into fn, and counts the slots without a
 * finished record into skips as lapped or torn, except those below
 * counted (a collector has read or counted them already). Returns 0, or
 * fn's first nonzero return. */
int shmt_ring_read_range(const struct shmt_view *v, uint64_t from, uint64_t to, uint64_t counted,
			 struct shmt_ring_skips *skips, shmt_ring_record_fn fn, void *arg);

/* Records below the start of a ring that nobody read: the head lapped
 * them (overwrite mode) before the collector's tail reached them. A
 * reader starting at from (>= tail) adds these to `overwritten`
 * (shmt_loss_read() does, for a reader of the ring as it is). */
uint64_t shmt_ring_unread_below(const struct shmt_view *v, uint64_t from);

/* Threads attached now: those owning a staging block that are alive (the
 * thread, in a process of the start time it claimed the block with). */
uint32_t shmt_ring_live_writers(const struct shmt_view *v);

/* Records the ring holds that no collector has taken yet: published past
 * the tail, plus staged in owned blocks. Only loads, so a signal handler
 * may call it; untrusted numbers, clamped to the geometry. */
uint64_t shmt_ring_undrained(const struct shmt_view *v);

/* trigger.c: shmtrace_trigger() calls the ring has seen (0 in a ring
 * before minor 9); acquire: their records are staged. */
uint64_t shmt_ring_triggers(const struct shmt_view *v);

/* Number of published strings, clamped to the table. */
uint32_t shmt_ring_nstrings(const struct shmt_view *v);

/* Copies string id (NUL-terminated, cut to buflen) to buf. Returns its
 * length, or -ENOENT for an id past the table, -EBADMSG for an entry that
 * points outside the heap. */
int shmt_ring_string(const struct shmt_view *v, uint32_t id, char *buf, size_t buflen);

/* Number of published name slots, clamped to the table. */
uint32_t shmt_ring_nthreads(const struct shmt_view *v);

/* Copies name slot i, its names NUL-terminated. Returns 0 or -ENOENT. */
int shmt_ring_thread(const struct shmt_view *v, uint32_t i, struct shmt_thread *out);

struct shmt_block_info {
	uint32_t state, pid, tid;
	uint64_t start_time;
	uint64_t written, taken;	/* taken as a recovery would leave it */
	uint32_t skipped;		/* pending records with an invalid kind */
};

/* Copies block i's pending records (at most block_records) into out and
 * describes the block. Applies a dead flusher's journal the way the next
 * lock holder would, so a record is never counted in both the ring and
 * its block. Returns the number of records copied. */
int shmt_ring_block_pending(const struct shmt_view *v, uint32_t i, struct shmt_record *out,
			    struct shmt_block_info *info);

/* The same, every record [info->taken, info->written) as it is: out[s -
 * taken] is block record s, its commit reduced to the kind word (not
 * checked: the caller does). Returns written - taken. For a reader that
 * must know which block record each is (shmt_ring_block_settled()). */
int shmt_ring_block_copy(const struct shmt_view *v, uint32_t i, struct shmt_record *out,
			 struct shmt_block_info *info);

/*
 * For a reader of a live ring, after it copied block i: the block's
 * records below *below are in the ring below *head (or were dropped by a
 * full discard ring, and counted), those from *below on are not, and
 * were not reused since the copy (a slot is reused only once taken passes
 * it). Read as one view of taken, head and a flush under way (the
 * journal), retried while a flush of the block ends in between. Returns
 * 0, -EAGAIN when flushes kept ending (the caller counts the block's
 * records as lost), -ENOENT past the blocks.
 */
int shmt_ring_block_settled(const struct shmt_view *v, uint32_t i, uint64_t *below,
			    uint64_t *head);

/* inflight.c: a thread's open spans (ring_format.h, struct shmt_block).
 * Copies block i's open spans, outermost first, as SHMTRACE_KIND_OPEN
 * records (dur SHMT_OPEN_END_UNKNOWN) into out[SHMT_OPEN_MAX]; none
 * unless it is owned. */
uint32_t shmt_block_open_spans(const struct shmt_view *v, uint32_t i, struct shmt_record *out);
/* The same as a reader that read the block (info, from
 * shmt_ring_block_pending() or _copy()) tells them: a live owner's last
 * until now, as far as anyone knows; a dead one's are left without an
 * end, since nobody saw when it died. */
uint32_t shmt_block_open_spans_seen(const struct shmt_view *v, uint32_t i,
				    const struct shmt_block_info *info, struct shmt_record *out);

/* Runs fn(arg) with SIGBUS turned into a return of -EFAULT: a peer that
 * truncates the segment makes the reader fail cleanly. Not reentrant. */
int shmt_guarded(int (*fn)(void *), void *arg);

#endif
