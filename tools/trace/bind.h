/* SPDX-License-Identifier: MIT */
/*
 * bind.h - moving flow-carrying slices off timestamps that other events of
 * their thread also start at, so that viewers bind each flow to its own
 * slice (the rule is in docs/FORMAT.md, "One start per flow slice").
 */
#ifndef SHMTRACE_BIND_H
#define SHMTRACE_BIND_H

#include <stddef.h>
#include <stdint.h>

#include "flows.h"
#include "bloom.h"
#include "extsort.h"

/*
 * What is known of the events written as they came (without a flow): a
 * fixed-size Bloom filter of their (pid, tid, ts), which says for sure that
 * a timestamp is free; the timestamps it could not clear are asked of the
 * input again (a verification pass) and their answers kept. Memory: the
 * filter (16 MiB), a second one (128 KiB to 16 MiB, by the timestamps
 * asked) while a verification pass runs, and the sorts' buffers: the asked timestamps, the answers
 * and the events a pass finds are kept in sorted temporary files
 * (util/extsort.h), never one byte in memory per event or per flow record.
 */
struct bind {
	struct bloom note;	/* the events written as they came */
	struct bloom asked;	/* the asked keys, for a verification pass */
	struct extsort *hits;	/* events a verification pass found asked */
	unsigned passes;	/* verification passes made */
	uint64_t moved;		/* flow records whose start moved */
};

int bind_init(struct bind *b);
void bind_free(struct bind *b);

/* An event written at ts on thread (pid, tid) that carries no flow. */
void bind_note(struct bind *b, uint32_t pid, uint32_t tid, uint64_t ts);

/* In a verification pass: the same, for every such event again. Returns
 * 0 or -errno (the temporary file's). */
int bind_seen(struct bind *b, uint32_t pid, uint32_t tid, uint64_t ts);

/*
 * Gives every record of f (all flow records, spans and instants) a
 * start that no other event of its thread has, as a viewer reads it (the
 * microsecond value parsed into a double): unchanged when it is free,
 * else moved later by the fewest nanoseconds that make it free. A span's
 * end stays where it was (dur shrinks, down to 0), so it stays nested in
 * its parent. Where flow records tie, the longer span keeps the earlier
 * start. rescan(ctx) must call bind_seen() for every event bind_note()
 * was given; it runs only when the filter cannot rule a collision out.
 * Returns 0, rescan's error, or -errno. Replaces f's records by the moved
 * ones (f can be read again, or assembled).
 */
typedef int (*bind_rescan_fn)(void *ctx);
/* The order bind_resolve() reads f in (by thread, then start): flows
 * collected with flows_init_by(f, bind_order) are sorted only once. */
int bind_order(const void *a, const void *b);
int bind_resolve(struct bind *b, struct flows *f, bind_rescan_fn rescan, void *ctx);

#endif
