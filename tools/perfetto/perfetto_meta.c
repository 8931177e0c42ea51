/* SPDX-License-Identifier: MIT */
/*
 * perfetto_meta.c - what a Perfetto export says about itself, where the
 * Perfetto UI shows it: the losses as instants at the start of the trace
 * on the export's own track "shmtrace" (the lines the Chrome export's
 * loss instants carry), and the figures of the Chrome export's metadata
 * object as the arguments of one instant there, "shmtrace export"; the
 * warnings on stderr are every export's.
 */
#include <stdio.h>

#include "fmt.h"
#include "perfetto_int.h"

static void put_loss(void *ctx, const char *line)
{
	packet_self(ctx, line, NULL);
}

/* A snapshot among the inputs in words, where it was triggered. */
static void put_snapshot(void *ctx, uint64_t ts, const char *line)
{
	packet_self_at(ctx, ts, line, NULL);
}

#define NUM(k, v)	((struct pf_kv){ (k), NULL, (int64_t)(v) })
#define STR(k, v)	((struct pf_kv){ (k), (v), 0 })
#define MAX_KV		(SHMT_LOSS_NKINDS + 40)

/* The loss counters as loss.h names them, and their sum in records, or
 * that they are corrupt (no counts then). */
static size_t put_counts(const struct source_loss *l, struct pf_kv *kv, size_t n)
{
	if (l->corrupt) {
		kv[n++] = NUM("counters_corrupt", 1);
		kv[n++] = STR("counters_corrupt_why", l->corrupt_why);
		return n;
	}
	for (size_t i = 0; i < SHMT_LOSS_NKINDS; i++)
		kv[n++] = NUM(shmt_loss_kinds[i].name, shmt_loss_get(&l->counters, &shmt_loss_kinds[i]));
	kv[n++] = NUM("records_lost", shmt_loss_records(&l->counters));
	kv[n++] = NUM("unaccounted", l->unaccounted);
	return n;
}

/* The export's figures: those of the Chrome export's metadata object. */
static void put_figures(struct pf *pf)
{
	const struct source *s = pf->src;
	struct pf_kv kv[MAX_KV];
	/* realtime0 + (first_ts - mono0) in wrapping unsigned arithmetic, as
	 * the Chrome export computes it */
	uint64_t wall = s->realtime0 + (pf->first_ts - s->mono0);
	const char *in;
	char iso[64];
	size_t n = 0;

	fmt_iso_ns(iso, sizeof(iso), wall);
	kv[n++] = STR("version", SHMTRACE_VERSION);
	kv[n++] = STR("source", source_kind(s));
	for (size_t i = 0; (in = source_input(s, i)) && n < MAX_KV - 26 - SHMT_LOSS_NKINDS; i++)
		kv[n++] = STR("input", in);
	kv[n++] = STR("clock", s->clock_tsc ? "tsc" : "monotonic");
	kv[n++] = NUM("records", pf->records);
	kv[n++] = NUM("flows", pf->flows);
	n = put_counts(&s->loss, kv, n);
	kv[n++] = NUM("names_lost", pf->names_lost);
	kv[n++] = NUM("threads_unnamed", pf->threads_unnamed);
	kv[n++] = NUM("args", pf->pend.args);
	kv[n++] = NUM("args_lost", pf->pend.lost);
	kv[n++] = NUM("unfinished", pf->unfinished);
	kv[n++] = NUM("triggers", pf->triggers);
	kv[n++] = NUM("overlapping", pf->overlapping);
	/* records of parts not among the inputs, and of the snapshots'
	 * windows left out for a size bound: not lost, not here either */
	kv[n++] = NUM("missing_records", s->loss.missing);
	kv[n++] = NUM("snapshot_cut", source_snapshots_cut(s));
	kv[n++] = NUM("complete", source_complete(s));
	/* the first record's time: none without a record (not the clock's 0,
	 * the machine's boot), as the Chrome export's null */
	if (pf->records) {
		kv[n++] = NUM("trace_start_ns", pf->first_ts);
		kv[n++] = NUM("trace_start_wall_ns", wall);
		kv[n++] = STR("trace_start", iso);
	}
	kv[n] = (struct pf_kv){ NULL, NULL, 0 };
	packet_self(pf, "shmtrace export", kv);
}

/* The threads of the records written that have no name slot ("tid N"),
 * counted as the Chrome export counts them. */
static void count_unnamed(struct pf *pf)
{
	uint64_t key, *v;

	for (size_t pos = 0; u64map_next(&pf->seen, &pos, &key, &v);)
		pf->threads_unnamed += !hosts_thread_name(&pf->hosts, (uint32_t)(key >> 32),
							  (uint32_t)key);
}

void meta_write(struct pf *pf)
{
	const struct source_loss *l = &pf->src->loss;

	count_unnamed(pf);

	source_loss_lines(l, pf->names_lost, put_loss, pf);
	source_snapshot_lines(pf->src, put_snapshot, pf);
	put_figures(pf);
	source_warn_lost(l);
	source_warn_names(pf->src, pf->names_lost, "event", pf->threads_unnamed);
	if (pf->forced || pf->plan.untracked)
		source_warnx("%llu events were written before all slices that begin at their time "
			     "were known (records not in the order of their ends, or too many such "
			     "times): Perfetto may nest them otherwise",
			     (unsigned long long)(pf->forced + pf->plan.untracked));
	if (pf->overlapping)
		source_warnx("%llu spans begin inside another span of their thread and end after it: "
			     "Perfetto stacks a thread's slices, so it shows them with wrong ends",
			     (unsigned long long)pf->overlapping);
	if (pf->pids_capped)
		source_warnx("%llu processes have pids past 2^31 - 1 (a pid reused by hundreds of "
			     "processes): Perfetto's pids are int32, so they are written as "
			     "2147483647 and shown as one process",
			     (unsigned long long)pf->pids_capped);
	if (pf->hops_unmatched)
		source_warnx("%llu flow records changed between the two reads of the input (a ring "
			     "still written to?): they are exported without their flow",
			     (unsigned long long)pf->hops_unmatched);
}
