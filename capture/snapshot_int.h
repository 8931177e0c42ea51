/* SPDX-License-Identifier: MIT */
/*
 * snapshot_int.h - what the snapshot's files share: the copy of a live
 * ring (snapshot_copy.c: its staging blocks, then its slots, then the
 * blocks' records that a flush moved into the slots meanwhile taken out)
 * and the file made of it (snapshot.c).
 */
#ifndef SHMTRACE_SNAPSHOT_INT_H
#define SHMTRACE_SNAPSHOT_INT_H

#include "ring_reader.h"
#include "snapshot.h"

#define SNAP_CHUNK	4096u	/* slots copied per pass of the batched seqlock */
#define SNAP_FRAME	1024u	/* records per frame: what a size bound cuts at once */

/* Encoded frames of records, oldest first, each with the counts of what
 * the copy lost before it (so that leaving the oldest out for a size
 * bound takes their losses out with them). */
struct snap_frames {
	msgpack_sbuffer buf;
	struct snap_frame {
		size_t off;		/* where it starts in buf */
		uint64_t first_seq;
		uint32_t n;
		uint64_t min_ts;	/* the earliest start of its records */
		uint64_t overwritten;	/* the window's, before this frame */
		uint64_t torn;
	} *v;
	size_t n, cap;
};

/* One staging block as copied: its records [k, k + n) in the copy's
 * brecs from off, the part of them not in the ring, its open spans. */
struct snap_block {
	uint32_t idx;
	struct shmt_block_info info;
	uint64_t k;		/* block record of brecs[off] */
	size_t off;
	uint32_t n;
	uint64_t below;		/* block records below it are in the ring ... */
	uint64_t head;		/* ... below this sequence */
	bool settled;		/* false: flushes kept ending; its records count as lost */
	/* settled again once the slots were copied: the records flushes
	 * moved since are below2 - below, into slots below head2 */
	uint64_t below2, head2;
	bool same_owner;	/* the block's owner then was the copy's */
	struct shmt_record open[SHMT_OPEN_MAX];
	uint32_t nopen;
};

/* A slot of the ring copied at or past the lowest head a block was
 * settled against: what a flush moved there may be a block's copy too. */
struct snap_late {
	uint64_t seq;
	struct shmt_record r;
};

struct snap {
	const struct shmt_view *v;
	const struct shmt_snap_opts *o;
	struct shmt_cap_snapshot info;
	struct snap_block *blk;
	size_t nblk, capblk;
	struct shmt_record *brecs;
	size_t nbrecs, capbrecs;
	uint64_t head_min;	/* the lowest head a block was settled against */
	struct snap_late *late;
	size_t nlate, caplate;
	/* the slots published after the window's end by the second settling
	 * of the blocks: the records flushes moved there */
	struct snap_late *after;
	size_t nafter, capafter;
	struct snap_frames win;	/* the window's records */
	struct snap_frames staged;	/* then the blocks' and the open spans */
	uint64_t since;		/* the window's records end at or after it */
	uint64_t torn;		/* slots of the window not a finished record,
				 * then forged records of the blocks */
	/* the window's own losses, once its slots are copied: what a cut of
	 * all its frames takes with them */
	uint64_t win_overwritten, win_torn;
	uint64_t ring_id;	/* the ring's, read with the rest */
	bool started;		/* the window has begun */
	bool trigger_found;
	uint64_t records;	/* in win and staged */
	/* the run of consecutive records being framed */
	struct shmt_record run[SNAP_FRAME];
	uint64_t run_first;
	uint32_t nrun;
};

/* snapshot_copy.c: the copy, into s (s->v, s->o set, the rest zero).
 * Returns 0 or -ENOMEM. Run under shmt_guarded(). */
int snap_copy(struct snap *s);
void snap_free(struct snap *s);

#endif
