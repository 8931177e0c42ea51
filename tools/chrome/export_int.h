/* SPDX-License-Identifier: MIT */
/*
 * export_int.h - the state of one Chrome Trace JSON export and the parts
 * that write it: events (export_events.c), flows and their binding
 * (export_flows.c), losses and metadata (export_meta.c), the passes
 * (export_run.c); tools/export.c is the command line.
 */
#ifndef SHMTRACE_EXPORT_INT_H
#define SHMTRACE_EXPORT_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "args.h"
#include "bind.h"
#include "cli.h"
#include "cmd_common.h"
#include "exporters.h"
#include "flows.h"
#include "hosts.h"
#include "json_writer.h"
#include "pick.h"
#include "source.h"

/* a progress line on a terminal every so many records */
#define PROGRESS_EVERY 1000000ull

struct exporter {
	struct source *src;		/* the command line's */
	struct hosts hosts;
	struct flows fl;
	struct bind bind;		/* where events without a flow start */
	/* (outpid << 32 | tid) of every record written: its last moment */
	struct u64map seen;
	struct jw *w;
	const struct pick *pick;	/* which records are written */
	struct pick_pass pass;		/* pick_record()'s for the pass */
	bool progress;
	uint64_t first_ts, last_ts, events, flows;
	uint64_t names_lost;		/* events exported with a name or category "?" */
	uint64_t threads_unnamed;	/* threads exported without a name slot */
	struct args_pend pend;		/* the last span or instant, and its arguments */
	struct args_store fargs;	/* arguments of flow records (flow_ev.args) */
	struct open_spans open;		/* open spans (SHMTRACE_KIND_OPEN) */
	uint64_t unfinished;		/* open spans exported */
	uint64_t triggers;		/* triggers exported (shmtrace_trigger()) */
	char *fcat;			/* the current flow's category list, or NULL */
	size_t fcatlen;
	bool any, sep;
};

/* ",\n" before every event but the first. */
void export_sep(struct exporter *e);
/* String id as a JSON string ("?" when unknown). */
void export_str_id(struct exporter *e, uint32_t id);
/* "pid":P,"tid":T,"ts":TS */
void export_where(struct jw *w, uint32_t pid, uint32_t tid, uint64_t ts);
/* Whether r is written (pick.h: --pid, --from/--to, --split). */
bool export_wanted(struct exporter *e, const struct shmt_record *r);
/* Writes one record as an event, under category cat[0..catlen); receives:
 * the step of a flow that receives (its args say so). */
void export_event(struct exporter *e, uint32_t kind, uint32_t pid, uint32_t tid, uint64_t ts,
		  uint64_t dur, const char *cat, size_t catlen, uint32_t name,
		  const struct ev_args *a, bool receives);
/* Whether r is written as it comes (its start taken there), not kept for
 * its flow: a record in no flow, or a receiving span (its step is an
 * instant at its end). Not an argument record. */
bool export_streams(const struct shmt_record *r);
/* Counts an event whose name or category is not a known string. */
void export_count_names(struct exporter *e, uint32_t name, uint32_t cat);
/* A metadata event: args {"name":name}, or {"sort_index":sort_index}
 * when name is NULL; tid NULL for a process's. */
void export_meta_event(struct exporter *e, uint32_t pid, const uint32_t *tid, const char *what,
		       const char *name, uint64_t sort_index);

/* The source_record_fn of the writing pass. */
int export_on_record(void *ctx, const struct shmt_record *r, uint64_t start_time);
/* After it: the event still held for its arguments, then the open spans. */
int export_pending(struct exporter *e);
int export_open_spans(struct exporter *e);
/* The flows: their slices moved off taken starts, then written with
 * their flow events. Returns 0 or -errno (err set for an input error). */
int export_flows(struct exporter *e, char *err, size_t errlen);
/* process_name/thread_name and sort indices for every thread seen. */
int export_names(struct exporter *e);
/* The losses: instants at the start of the trace, and warnings. */
void export_loss(struct exporter *e);
/* The end of the trace: its metadata object. */
void export_metadata(struct exporter *e);

#endif
