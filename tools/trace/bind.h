/* SPDX-License-Identifier: MIT */
/*
 * bind.h - moving flow-carrying slices off timestamps that other events of
 * their thread also start at, so that viewers bind each flow to its own
 * slice (the rule is in docs/FORMAT.md, "Flow binding in the export").
 */
#ifndef SHMTRACE_BIND_H
#define SHMTRACE_BIND_H

#include <stddef.h>
#include <stdint.h>

#include "flows.h"
#include "u64map.h"

/*
 * What is known of the events written as they came (without a flow): a
 * fixed-size Bloom filter of their (pid, tid, ts), which says for sure that
 * a timestamp is free, and the exact answers of verification passes for
 * the timestamps it could not clear. Memory: the filter (8 MiB), 128 KiB
 * once a verification pass runs, and one entry per timestamp asked about,
 * never one per event.
 */
struct bind {
	uint64_t *bloom;
	struct u64map known;	/* key -> 1 taken, 2 free (verified) */
	struct u64map ask;	/* keys the next verification pass answers */
	uint64_t *askbits;	/* a bit per key of ask: most events are not asked */
	unsigned passes;	/* verification passes made */
	uint64_t moved;		/* flow records whose start moved */
};

int bind_init(struct bind *b);
void bind_free(struct bind *b);

/* An event written at ts on thread (pid, tid) that carries no flow. */
void bind_note(struct bind *b, uint32_t pid, uint32_t tid, uint64_t ts);

/* In a verification pass: the same, for every such event again. */
void bind_seen(struct bind *b, uint32_t pid, uint32_t tid, uint64_t ts);

/*
 * Gives every record of v[0..n) (all flow records, spans and instants) a
 * start that no other event of its thread has, as a viewer reads it (the
 * microsecond value parsed into a double): unchanged when it is free,
 * else moved later by the fewest nanoseconds that make it free. A span's
 * end stays where it was (dur shrinks, down to 0), so it stays nested in
 * its parent. Where flow records tie, the longer span keeps the earlier
 * start. rescan(ctx) must call bind_seen() for every event bind_note()
 * was given; it runs only when the filter cannot rule a collision out.
 * Returns 0, rescan's error, or -ENOMEM. Reorders v.
 */
typedef int (*bind_rescan_fn)(void *ctx);
int bind_resolve(struct bind *b, struct flow_ev *v, size_t n, bind_rescan_fn rescan, void *ctx);

#endif
