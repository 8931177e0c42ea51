/* SPDX-License-Identifier: MIT */
/*
 * perfetto_int.h - the state of one export to Perfetto's protobuf trace
 * format and the parts that make it: the two passes over the records and
 * the events both number alike (perfetto.c), the plan the first pass makes
 * of flows and of slices that begin together (perfetto_plan.c), the order
 * in which a thread's events are written so that its slices nest
 * (perfetto_order.c), the packets (perfetto_packet.c), and the losses and
 * the export's own figures (perfetto_meta.c). docs/PERFETTO.md says what
 * the file holds.
 */
#ifndef SHMTRACE_PERFETTO_INT_H
#define SHMTRACE_PERFETTO_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "args.h"
#include "bloom.h"
#include "exporters.h"
#include "flows.h"
#include "hosts.h"
#include "obuf.h"
#include "pick.h"
#include "source.h"
#include "u64map.h"

/* the export's one packet sequence, and the track of its own events */
#define PF_SEQ		1u
#define PF_UUID_SELF	1u
/* the sequence's incremental clocks of timestamps, ids 64 on */
#define PF_CLOCKS	64u

/* TrackEvent.Type */
#define PF_SLICE_BEGIN	1u
#define PF_SLICE_END	2u
#define PF_INSTANT	3u
#define PF_COUNTER	4u

/* a thread holds at most so many events back; past it, all are written */
#define PF_HOLD_MAX	256u
/* all threads together hold at most so many (10 MB): past it, all are
 * written, so that a trace of many threads that each hold an instant
 * (nothing of theirs ends after it) does not keep one per thread */
#define PF_HOLD_ALL_MAX	65536u

/* One event of a thread (a span, an instant, an open span ended where its
 * thread's last moment is), as both passes number it. */
struct pf_ev {
	uint64_t ts, dur;
	uint64_t n;		/* its number among the thread events of a pass */
	uint32_t cat, name;
	uint32_t kind;		/* SHMTRACE_KIND_SPAN, _INSTANT, _OPEN or _TRIGGER */
	uint32_t flow_id;	/* the flow it is a hop of (the Chrome export's id), or 0 */
	char ph;		/* 's', 't' or 'f' (the last hop), as flows.h says */
	bool point;		/* no duration: written as one instant */
	bool receives;		/* a step that receives (flows.h): said in its annotations */
	/* hops of one flow at one time, written in the flow's order
	 * (perfetto_order.c): its arrival among the flow records + 1
	 * (0: no hop), the hop before it when that is at its time (0:
	 * none) and the thread of each neighbour at its time */
	bool awaited;		/* the hop after it is at its time */
	uint64_t hop, after;
	uint64_t after_thread, next_thread;	/* pid << 32 | tid */
	struct ev_args args;
};

/* An event held back until what must come before it at its time is
 * written (perfetto_order.c). */
struct pf_held {
	struct pf_ev ev;
	bool grouped;		/* slices that begin at its time are still to come */
	bool waits;		/* the hop before it, at its time, is not written yet */
};

/* The slices of a thread that begin at one time, when several do. */
struct pf_group {
	uint64_t ts;
	uint32_t expected, arrived;
};

/* A thread's track and what it holds back. */
struct pf_thread {
	uint64_t uuid;
	uint32_t pid, tid;
	uint64_t max_end;	/* the latest end of the events put so far */
	uint64_t max_start;	/* the start of the event that ended then */
	struct pf_held *held;
	size_t nheld, caph;
	struct pf_group *grp;
	size_t ngrp, capg;
	size_t holder;		/* its place in pf->holders + 1, 0: holds nothing */
};

/* What the first pass learns (perfetto_plan.c). */
/* What the second pass needs of a flow record, found by its arrival. */
struct pf_hop {
	uint64_t order;		/* arrival among the first pass's flow records */
	uint64_t id;		/* flow id (0: a flow of one record) */
	uint64_t flow, ts;	/* to check it is the same record */
	uint32_t pid, tid;
	char ph;		/* 's', 't', 'f' or 0 */
	uint8_t awaited;	/* the next hop of its flow is at its time */
	uint8_t pad[6];
	uint64_t after;		/* the previous hop's order + 1 when at its time, or 0 */
	uint64_t after_thread, next_thread;	/* those hops' pid << 32 | tid */
};

struct pf_plan {
	struct flows fl;	/* the flow records, as the Chrome export keeps them */
	/* once assembled: the hops by arrival (util/extsort.h), read in step
	 * with the second pass, so that neither keeps one byte per record */
	struct extsort *hops;
	struct pf_hop cur;	/* the next hop not yet matched ... */
	int have;		/* ... when 1 */
	struct bloom bloom;	/* (thread, time) of the thread events seen */
	struct u64map ties;	/* times that begin several: key -> first counted << 24 | begins */
	uint64_t *tiebits;	/* a bit per key's top bits: most keys are no tie */
	uint64_t untracked;	/* ties past the map's bound, not ordered */
	uint64_t n;		/* thread events seen */
};

struct pf {
	struct source *src;	/* the command line's */
	struct hosts hosts;
	const struct pick *pick;	/* what is written (tools/pick.h) */
	struct pick_pass pass;	/* its state in the current pass */
	bool progress;
	struct pf_plan plan;
	/* what a pass keeps, as the Chrome export does */
	struct args_pend pend;
	struct args_store texts;	/* the pass's text arguments (args.h) */
	struct open_spans open;
	struct u64map seen;	/* (pid << 32 | tid) -> the thread's last moment */
	/* the second pass: tracks, interning, output */
	struct u64map threads;	/* (pid << 32 | tid) -> index + 1 in thr */
	struct pf_thread *thr;
	size_t nthr, capthr;
	struct u64map procs;	/* pid -> its track's uuid */
	struct u64map counters;	/* pid << 32 | cat << 16 | name -> its track's uuid */
	uint64_t next_uuid;
	/* the timestamps' incremental clocks (put_ts()): each one's time,
	 * and which each track's events are on (track uuid -> clock + 1) */
	uint64_t clock_ts[PF_CLOCKS];
	uint8_t *track_clock;
	size_t ntrack_clock;
	uint32_t next_clock;
	uint64_t *interned[3];	/* per name space (pf_ns): the iids written */
	uint32_t unknown_iid;	/* of "?", for ids that name no string */
	struct obuf out;
	FILE *f;
	int werr;		/* the first write error (-errno) */
	uint64_t n, kflow;	/* thread events, flow records put so far */
	uint64_t first_ts, last_ts, records;
	uint64_t names_lost, threads_unnamed, unfinished, flows, triggers;
	uint64_t forced;	/* events written before their time was settled */
	uint64_t pids_capped;	/* processes whose pid did not fit in int32 */
	size_t held_all;	/* the events all threads hold back */
	uint32_t *holders;	/* the threads that hold some (index in thr) */
	size_t nholders, capholders;
	uint64_t overlapping;	/* spans that begin inside another and end after it */
	uint64_t hops_unmatched; /* flow records the second pass did not find */
	uint32_t *woken;	/* threads a hop they wait for was written for */
	size_t nwoken, capwoken;
};

/* Interning name spaces: InternedData's event_names, event_categories and
 * debug_annotation_names. */
enum pf_ns { PF_NS_NAME, PF_NS_CAT, PF_NS_ARG };

/* ---- perfetto_plan.c: the first pass's plan ---- */
int plan_init(struct pf_plan *p);
void plan_free(struct pf_plan *p);
/* A thread event of the first pass (ev, of record r): a flow record kept,
 * its time noted. */
int plan_event(struct pf *pf, const struct pf_ev *ev, const struct shmt_record *r, uint32_t pid,
	       uint32_t ring);
/* After the first pass: the flows assembled, the ties made searchable. */
int plan_done(struct pf_plan *p, uint64_t *nflows);
/* The key of (pid, tid, ts): what ties are counted by. */
uint64_t plan_key(uint32_t pid, uint32_t tid, uint64_t ts);
/* Whether several thread events have key; *expected, for the event of
 * number n seen first with it in the second pass (begin: it begins a
 * slice), the slices that begin with it. */
bool plan_tie(const struct pf_plan *p, uint64_t key, uint64_t n, bool begin, uint32_t *expected);
/* The flow id and hop of flow record k of the second pass, of flow id
 * flow (its role taken off) (ph 0 and id 0 when it is a flow of one
 * record, or not the first pass's record k), and its neighbours in the
 * flow that are at its time. */
void plan_hop(struct pf *pf, uint64_t k, struct pf_ev *ev, uint32_t pid, uint32_t tid,
	      uint64_t flow);

/* ---- perfetto_order.c: writing a thread's events in order ---- */
/* Puts ev of thread th: written now, or held until what comes before it
 * at its time is written. Returns 0 or -ENOMEM. */
int order_put(struct pf *pf, struct pf_thread *th, const struct pf_ev *ev);
/* Writes all that threads hold, after the last event. */
int order_flush(struct pf *pf);
void order_free(struct pf *pf);

/* ---- perfetto_packet.c: the packets ---- */
int packet_init(struct pf *pf, FILE *f);
void packet_free(struct pf *pf);
/* The first packet: the sequence's state cleared, the export's own track. */
void packet_start(struct pf *pf);
/* The track of thread (pid, tid), its process's first: found, or made and
 * described. NULL when out of memory. */
struct pf_thread *packet_thread(struct pf *pf, uint32_t pid, uint32_t tid);
/* A span's begin or an instant (ev->point), with its name, category,
 * arguments and flow. */
void packet_event(struct pf *pf, uint64_t track, const struct pf_ev *ev);
void packet_end(struct pf *pf, uint64_t track, uint64_t ts);
/* A counter's value, on its process's track of that counter. */
int packet_counter(struct pf *pf, uint32_t pid, uint32_t cat, uint32_t name, uint64_t ts,
		   int64_t v);
/* An instant on the export's own track, named name, with an annotation
 * per kv pair (NULL-terminated keys; see perfetto_meta.c). */
struct pf_kv {
	const char *key;
	const char *str;	/* a string value, or NULL for num */
	int64_t num;
};
void packet_self(struct pf *pf, const char *name, const struct pf_kv *kv);
/* The same at ts. */
void packet_self_at(struct pf *pf, uint64_t ts, const char *name, const struct pf_kv *kv);
/* Writes what the buffer holds once it holds enough (all: everything).
 * Returns 0 or -errno (the first write error, or -ENOMEM). */
int packet_flush(struct pf *pf, bool all);

/* ---- perfetto_meta.c ---- */
/* The losses as instants, the export's figures as one instant, and the
 * warnings (stderr). */
void meta_write(struct pf *pf);

#endif
