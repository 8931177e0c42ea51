/* SPDX-License-Identifier: MIT */
/*
 * flows.h - collecting the records that carry a flow id and turning each
 * flow into the s/t/f events that Chrome DevTools and Perfetto draw as
 * arrows between the slices they bind to.
 */
#ifndef SHMTRACE_FLOWS_H
#define SHMTRACE_FLOWS_H

#include <stddef.h>
#include <stdint.h>

#include "extsort.h"
#include "record.h"

/* One record of a flow: exactly what its flow event must repeat to bind. */
struct flow_ev {
	uint64_t flow;		/* the producer's flow id, without its role ... */
	uint32_t ring;		/* ... which means something only in its ring */
	uint32_t role;		/* SHMT_ROLE_* of the record (flow_ev_of()) */
	uint64_t ts;		/* ns, as the slice's ts was written */
	uint64_t dur;		/* the slice's duration (written at assembly) */
	uint32_t pid;		/* pid as written in the trace (after reuse remapping) */
	uint32_t tid;
	uint32_t cat;		/* string ids of the slice */
	uint32_t name;
	uint32_t kind;
	uint32_t args;		/* the caller's: its arguments, 0 = none */
	/* arrival order, set by flows_add(): 64 bits, as many as records
	 * can be, so that flow ids (flows_assemble()) never repeat */
	uint64_t order;
	uint64_t seq;		/* the caller's own number for it (OTLP span ids) */
};

/*
 * The flow records of an export, in bounded memory: FLOWS_MEM bytes of
 * them in memory, the rest in sorted runs in a temporary file
 * (util/extsort.h), merged when they are read.
 */
#define FLOWS_MEM (16u << 20)

struct flows {
	struct extsort *s;	/* NULL until the first record */
	extsort_cmp_fn cmp;	/* the order they are read back in */
	uint64_t n;
};

/*
 * The flow record of r (a span, instant or open span with a flow id) of
 * the source's ring ring, pid as written: its flow id and its role apart.
 * The caller's fields (order, args, seq) are 0.
 */
struct flow_ev flow_ev_of(const struct shmt_record *r, uint32_t ring, uint32_t pid);

/* Where e is placed in its flow: its start, or its end when it receives
 * (SHMT_ROLE_RECEIVES on a span). */
uint64_t flow_ev_at(const struct flow_ev *e);

/* Whether r is a receiving span: SHMT_ROLE_RECEIVES on a span or an open
 * span in a flow, of any length. */
bool flow_receiving_span(const struct shmt_record *r);

/*
 * What a viewer is given for a receiving span (flow_receiving_span()):
 * the span without its flow (*span), and an
 * instant at its end (*mark: same thread, name, category and flow field)
 * that is its step. DevTools orders a flow's slices as it binds them and
 * Perfetto points each arrow from the slice that begins first, so the
 * step of a span that began before the steps it follows must be a slice
 * that begins after them. Returns false (nothing written) for any other
 * record.
 */
bool flow_split_receiving(const struct shmt_record *r, struct shmt_record *span,
			  struct shmt_record *mark);

/* Flows read back by flow (flows_assemble()'s order). */
void flows_init(struct flows *f);
/* Flows read back in the order of cmp (bind_resolve()'s, say, so that it
 * sorts them once). */
void flows_init_by(struct flows *f, extsort_cmp_fn cmp);
void flows_free(struct flows *f);
/* Remembers e (flow != 0), its order its arrival. Returns 0 or -errno
 * (-ENOMEM, or the temporary file's error). */
int flows_add(struct flows *f, const struct flow_ev *e);
/* Remembers e as it is, order included (a record read back and changed). */
int flows_put(struct flows *f, const struct flow_ev *e);
/* Reads the records back in the flows' order: starts,
 * then each in turn: 1, 0 at the end, or -errno. No flows_add() after. */
int flows_rewind(struct flows *f);
int flows_next(struct flows *f, struct flow_ev *e);

/*
 * A flow is the records of one ring with one ring-local flow id (records
 * of other rings with the same id are other flows: such ids count from 1
 * in every ring), or the records of any ring with one global id (bit 52,
 * SHMT_FLOW_GLOBAL: random per ring, or carried on purpose from one ring
 * to another), in the order of (flow_ev_at(), pid, tid, then as nest_cmp()
 * breaks ties of one thread: the longer span, spans before instants,
 * arrival), up to and including a record that terminates
 * (SHMT_ROLE_TERMINATES): the records after it with that id are the next
 * flow. Calls emit for every record of each flow: for a flow of two or
 * more records ph is 's' on the first, 't' on
 * the middle ones, 'f' on the last; a one-record flow draws nothing (ph 0,
 * id 0), its record is still handed over. group[0..n) is the whole flow
 * the record belongs to (DevTools groups flow events by category, so the
 * caller may want one category for the flow). A flow's id is one more
 * than the arrival number of its first record, so ids are unique, grow
 * in the order flows began to arrive, and stay far below 2^53 whatever
 * the producers used; flows are handed over in the order of their keys.
 * Memory: the records of one flow at a time, besides the sort's. Stops at the first non-zero return of emit
 * and returns it; returns 0 or -ENOMEM otherwise. *nflows (if not NULL)
 * gets the number of flows drawn.
 */
typedef int (*flows_emit_fn)(void *ctx, char ph, uint64_t id, const struct flow_ev *e,
			     const struct flow_ev *group, size_t n);
int flows_assemble(struct flows *f, flows_emit_fn emit, void *ctx, uint64_t *nflows);

/*
 * The scope of flow id flow on a record of ring (the source's ring
 * index), as flows_assemble() joins them: ring itself for a ring-local
 * id, FLOW_SCOPE_ALL for a global one. A flow is one (scope, id):
 * whatever is keyed by flow is keyed so (flowmap.h).
 */
#define FLOW_SCOPE_ALL	UINT32_MAX
uint32_t flow_scope(uint64_t flow, uint32_t ring);

#endif
