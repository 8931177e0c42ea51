/* SPDX-License-Identifier: MIT */
/*
 * perfetto_packet.c - the TracePackets of a Perfetto export, written from
 * Perfetto's published field numbers (docs/PERFETTO.md names the .proto
 * files): the tracks (a process, a thread, a counter of a process, the
 * export's own), described the first time an event needs them, and the
 * events on them. Names, categories and argument keys are interned on the
 * export's one packet sequence: a string's text goes into the first packet
 * that uses it, by the id it has in the trace (util/pb.c writes the wire
 * format).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "pb.h"
#include "perfetto_int.h"

/* Trace */
#define TRACE_PACKET		1
/* TracePacket */
#define PKT_CLOCK_SNAPSHOT	6
#define PKT_TIMESTAMP		8
#define PKT_SEQUENCE_ID		10	/* trusted_packet_sequence_id */
#define PKT_TRACK_EVENT		11
#define PKT_INTERNED_DATA	12
#define PKT_SEQUENCE_FLAGS	13
#define PKT_TIMESTAMP_CLOCK_ID	58
#define PKT_DEFAULTS		59	/* trace_packet_defaults */
#define PKT_TRACK_DESCRIPTOR	60
#define SEQ_INCREMENTAL_STATE_CLEARED	1
#define SEQ_NEEDS_INCREMENTAL_STATE	2
/* TracePacketDefaults */
#define TPD_TIMESTAMP_CLOCK_ID	58
/* ClockSnapshot, ClockSnapshot.Clock */
#define CS_CLOCKS		1
#define CLK_ID			1
#define CLK_TIMESTAMP		2
#define CLK_INCREMENTAL		3
/* clock ids: the trace's time, and the sequence's own (64-127): the
 * default and the PF_CLOCKS incremental ones (put_ts()) */
#define PF_CLOCK_BOOTTIME	6
#define PF_CLOCK_DELTA		64
/* TrackDescriptor, ProcessDescriptor, ThreadDescriptor, CounterDescriptor */
#define TD_UUID			1
#define TD_NAME			2
#define TD_PROCESS		3
#define TD_THREAD		4
#define TD_PARENT_UUID		5
#define TD_COUNTER		8
#define PD_PID			1
#define PD_PROCESS_NAME		6
#define THD_PID			1
#define THD_TID			2
#define THD_THREAD_NAME		5
#define CD_CATEGORIES		2
/* TrackEvent */
#define TE_CATEGORY_IIDS	3
#define TE_DEBUG_ANNOTATIONS	4
#define TE_TYPE			9
#define TE_NAME_IID		10
#define TE_TRACK_UUID		11
#define TE_CATEGORIES		22
#define TE_NAME			23
#define TE_COUNTER_VALUE	30
#define TE_FLOW_IDS		47
#define TE_TERMINATING_FLOW_IDS	48
/* DebugAnnotation */
#define DA_NAME_IID		1
#define DA_BOOL_VALUE		2
#define DA_INT_VALUE		4
#define DA_STRING_VALUE		6
#define DA_NAME			10
/* InternedData (field numbers per pf_ns); EventName, EventCategory and
 * DebugAnnotationName are each { iid = 1, name = 2 } */
static const uint32_t interned_field[3] = { 2, 1, 3 };	/* names, categories, keys */
#define IN_IID			1
#define IN_NAME			2

/* the buffer goes to the file once it holds this much */
#define FLUSH_AT		(1u << 16)

int packet_init(struct pf *pf, FILE *f)
{
	size_t words;

	pf->f = f;
	pf->next_uuid = PF_UUID_SELF + 1;
	pf->unknown_iid = pf->src->nstr ? pf->src->nstr : 1;
	words = (pf->unknown_iid + 1 + 63) / 64;
	for (int i = 0; i < 3; i++)
		if (!(pf->interned[i] = calloc(words, sizeof(uint64_t))))
			return -ENOMEM;
	return 0;
}

void packet_free(struct pf *pf)
{
	for (int i = 0; i < 3; i++) {
		free(pf->interned[i]);
		pf->interned[i] = NULL;
	}
	free(pf->track_clock);
	pf->track_clock = NULL;
	ob_free(&pf->out);
	u64map_free(&pf->threads);
	u64map_free(&pf->procs);
	u64map_free(&pf->counters);
}

/* The iid of string id: the id itself, or the one of "?". */
static uint64_t iid_of(const struct pf *pf, uint32_t id)
{
	return source_has_string(pf->src, id) ? id : pf->unknown_iid;
}

/* Whether iid's text is still to be written in name space ns (and from
 * now on, it is not). */
static bool fresh(struct pf *pf, enum pf_ns ns, uint64_t iid)
{
	uint64_t *w = &pf->interned[ns][iid / 64], bit = 1ull << (iid % 64);

	if (*w & bit)
		return false;
	*w |= bit;
	return true;
}

/* A string id's text as a string field. */
static void put_text(struct pf *pf, uint32_t field, uint32_t id)
{
	size_t len;
	const char *s = source_string(pf->src, id, &len);

	pb_string(&pf->out, field, s, len);
}

/* One clock of a ClockSnapshot at time 0. */
static void put_clock(struct obuf *b, uint32_t id, bool incremental)
{
	size_t c = pb_begin(b, CS_CLOCKS);

	pb_uint(b, CLK_ID, id);
	pb_uint(b, CLK_TIMESTAMP, 0);
	if (incremental)
		pb_uint(b, CLK_INCREMENTAL, 1);
	pb_end(b, c);
}

/*
 * The sequence's start: its incremental state cleared, the export's own
 * track, the default clock of its packets' timestamps (the first of
 * put_ts()'s), and a snapshot of its clocks: PF_CLOCKS of the sequence's
 * own, incremental, each equal to BOOTTIME (the trace's time) at 0, so
 * that they count in the ring's nanoseconds.
 */
void packet_start(struct pf *pf)
{
	struct obuf *b = &pf->out;
	size_t pk = pb_begin(b, TRACE_PACKET), td, in;

	pb_uint(b, PKT_SEQUENCE_ID, PF_SEQ);
	td = pb_begin(b, PKT_TRACK_DESCRIPTOR);
	pb_uint(b, TD_UUID, PF_UUID_SELF);
	pb_string(b, TD_NAME, "shmtrace", 8);
	pb_end(b, td);
	in = pb_begin(b, PKT_DEFAULTS);
	pb_uint(b, TPD_TIMESTAMP_CLOCK_ID, PF_CLOCK_DELTA);
	pb_end(b, in);
	pb_uint(b, PKT_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	pb_end(b, pk);

	pk = pb_begin(b, TRACE_PACKET);
	pb_uint(b, PKT_SEQUENCE_ID, PF_SEQ);
	in = pb_begin(b, PKT_CLOCK_SNAPSHOT);
	for (uint32_t c = 0; c < PF_CLOCKS; c++)
		put_clock(b, PF_CLOCK_DELTA + c, true);
	put_clock(b, PF_CLOCK_BOOTTIME, false);
	pb_end_long(b, in);
	pb_end(b, pk);
	memset(pf->clock_ts, 0, sizeof(pf->clock_ts));
}

/* The incremental clock of track uuid's events: the tracks take the
 * clocks in the order of their first event, the default one first;
 * PF_CLOCKS when there is no memory to say. */
static uint32_t clock_of(struct pf *pf, uint64_t uuid)
{
	if (uuid >= pf->ntrack_clock) {
		size_t n = pf->ntrack_clock;

		/* uuids are the export's own count of tracks */
		if (array_reserve(&pf->track_clock, &pf->ntrack_clock, (size_t)uuid + 1, 1, 64) < 0)
			return PF_CLOCKS;
		memset(pf->track_clock + n, 0, pf->ntrack_clock - n);
	}
	if (!pf->track_clock[uuid])
		pf->track_clock[uuid] = (uint8_t)(pf->next_clock++ % PF_CLOCKS + 1);
	return pf->track_clock[uuid] - 1u;
}

/*
 * A packet's timestamp. On its track's incremental clock, the time since
 * the clock's last packet, where ts is not before it: a thread's events
 * in a row mostly, two or three bytes instead of eight (and the clock's
 * id, three more, but for the default clock's track). Else absolute, on
 * BOOTTIME, named: a span is written after those it encloses, its begin
 * before their ends; a track that shares its clock (over PF_CLOCKS
 * tracks) may be behind another.
 */
static void put_ts(struct pf *pf, uint64_t track, uint64_t ts)
{
	uint32_t c = clock_of(pf, track);

	if (c < PF_CLOCKS && ts >= pf->clock_ts[c]) {
		pb_uint(&pf->out, PKT_TIMESTAMP, ts - pf->clock_ts[c]);
		if (c)
			pb_uint(&pf->out, PKT_TIMESTAMP_CLOCK_ID, PF_CLOCK_DELTA + c);
		pf->clock_ts[c] = ts;
		return;
	}
	pb_uint(&pf->out, PKT_TIMESTAMP, ts);
	pb_uint(&pf->out, PKT_TIMESTAMP_CLOCK_ID, PF_CLOCK_BOOTTIME);
}

/* Opens a descriptor packet of track uuid (under parent, if not 0);
 * returns the marks to close (pk, td). */
static void describe_begin(struct pf *pf, uint64_t uuid, uint64_t parent, size_t *pk, size_t *td)
{
	*pk = pb_begin(&pf->out, TRACE_PACKET);
	pb_uint(&pf->out, PKT_SEQUENCE_ID, PF_SEQ);
	*td = pb_begin(&pf->out, PKT_TRACK_DESCRIPTOR);
	pb_uint(&pf->out, TD_UUID, uuid);
	if (parent)
		pb_uint(&pf->out, TD_PARENT_UUID, parent);
}

/* Closes a packet and the one field opened in it. */
static void end_both(struct pf *pf, size_t pk, size_t inner)
{
	pb_end(&pf->out, inner);
	pb_end(&pf->out, pk);
}

/* Output pid as Perfetto's int32 pid: itself below 2^31 (every host's
 * pids are, hosts.h), else 2^31 - 1, counted (only the synthetic pids of
 * hundreds of processes of one pid pass it). */
static uint32_t int32_pid(struct pf *pf, uint32_t pid, bool count)
{
	if (pid <= INT32_MAX)
		return pid;
	pf->pids_capped += count;
	return INT32_MAX;
}

/* The track of process pid: found, or made and described (0: no memory). */
static uint64_t process_track(struct pf *pf, uint32_t pid)
{
	bool added;
	uint64_t *u = u64map_get(&pf->procs, pid, 0, &added);
	size_t pk, td, pd;
	char name[128];

	if (!u || !added)
		return u ? *u : 0;
	*u = pf->next_uuid++;
	hosts_proc_name(&pf->hosts, pid, name, sizeof(name));
	describe_begin(pf, *u, 0, &pk, &td);
	pd = pb_begin(&pf->out, TD_PROCESS);
	pb_uint(&pf->out, PD_PID, int32_pid(pf, pid, true));
	pb_string(&pf->out, PD_PROCESS_NAME, name, strlen(name));
	pb_end(&pf->out, pd);
	end_both(pf, pk, td);
	return *u;
}

struct pf_thread *packet_thread(struct pf *pf, uint32_t pid, uint32_t tid)
{
	bool added;
	uint64_t *i = u64map_get(&pf->threads, (uint64_t)pid << 32 | tid, 0, &added), proc;
	struct pf_thread *th;
	const char *tn;
	char buf[32];
	size_t pk, td, thd;

	if (!i || !added)
		return i ? &pf->thr[*i - 1] : NULL;
	if (!(proc = process_track(pf, pid)) ||
	    array_reserve(&pf->thr, &pf->capthr, pf->nthr + 1, sizeof(*pf->thr), 64) < 0)
		return NULL;
	th = &pf->thr[pf->nthr++];
	memset(th, 0, sizeof(*th));
	th->uuid = pf->next_uuid++;
	th->pid = pid;
	th->tid = tid;
	*i = pf->nthr;
	if (!(tn = hosts_thread_name(&pf->hosts, pid, tid))) {
		snprintf(buf, sizeof(buf), "tid %u", tid);
		tn = buf;
	}
	describe_begin(pf, th->uuid, proc, &pk, &td);
	thd = pb_begin(&pf->out, TD_THREAD);
	pb_uint(&pf->out, THD_PID, int32_pid(pf, pid, false));
	pb_uint(&pf->out, THD_TID, tid);
	pb_string(&pf->out, THD_THREAD_NAME, tn, strlen(tn));
	pb_end(&pf->out, thd);
	end_both(pf, pk, td);
	return th;
}

/* A counter's track: one per (process, category, name). */
static uint64_t counter_track(struct pf *pf, uint32_t pid, uint32_t cat, uint32_t name)
{
	bool added;
	uint64_t key = (uint64_t)pid << 32 | (uint64_t)(cat & 0xffff) << 16 | (name & 0xffff);
	uint64_t *u = u64map_get(&pf->counters, key, 0, &added), proc;
	size_t pk, td, cd;

	if (!u || !added)
		return u ? *u : 0;
	if (!(proc = process_track(pf, pid)))
		return 0;
	*u = pf->next_uuid++;
	describe_begin(pf, *u, proc, &pk, &td);
	put_text(pf, TD_NAME, name);
	cd = pb_begin(&pf->out, TD_COUNTER);
	put_text(pf, CD_CATEGORIES, cat);
	pb_end(&pf->out, cd);
	end_both(pf, pk, td);
	return *u;
}

/* Argument i of a as a debug annotation, its key interned. */
static void put_arg(struct pf *pf, uint64_t key_iid, const struct ev_args *a, uint32_t i)
{
	size_t da = pb_begin(&pf->out, TE_DEBUG_ANNOTATIONS);
	uint64_t value = a->a[i].value;

	pb_uint(&pf->out, DA_NAME_IID, key_iid);
	if (a->a[i].type == SHMTRACE_ARG_STR) {
		put_text(pf, DA_STRING_VALUE, value <= UINT16_MAX ? (uint32_t)value : 0);
	} else if (a->a[i].type == SHMTRACE_ARG_TEXT) {
		size_t len;
		const char *t = args_text(&pf->texts, a, i, &len);

		pb_string(&pf->out, DA_STRING_VALUE, t ? t : "?", t ? len : 1);
	} else {
		pb_uint(&pf->out, DA_INT_VALUE, value);	/* the int64's bits */
	}
	pb_end(&pf->out, da);
}

/* The texts of the iids an event uses first, in its packet. */
static void put_interned(struct pf *pf, const uint64_t *iid, const bool *isnew, const enum pf_ns *ns,
			 size_t n)
{
	size_t id = 0;

	for (size_t i = 0; i < n; i++) {
		size_t e;

		if (!isnew[i])
			continue;
		if (!id)
			id = pb_begin(&pf->out, PKT_INTERNED_DATA);
		e = pb_begin(&pf->out, interned_field[ns[i]]);
		pb_uint(&pf->out, IN_IID, iid[i]);
		put_text(pf, IN_NAME, (uint32_t)iid[i]);
		pb_end(&pf->out, e);
	}
	if (id)
		pb_end(&pf->out, id);
}

/* A debug annotation name: true. */
static void put_flag(struct obuf *b, const char *name)
{
	size_t da = pb_begin(b, TE_DEBUG_ANNOTATIONS);

	pb_string(b, DA_NAME, name, strlen(name));
	pb_uint(b, DA_BOOL_VALUE, 1);
	pb_end(b, da);
}

/* A packet of one TrackEvent without interned strings; returns the marks
 * to close (pk, te). */
static void plain_begin(struct pf *pf, uint64_t track, uint64_t ts, size_t *pk, size_t *te)
{
	*pk = pb_begin(&pf->out, TRACE_PACKET);
	put_ts(pf, track, ts);
	pb_uint(&pf->out, PKT_SEQUENCE_ID, PF_SEQ);
	*te = pb_begin(&pf->out, PKT_TRACK_EVENT);
}

/* A trigger: an instant of its thread's track, named "trigger: NAME"
 * (not interned: the name is made), category "shmtrace", as the Chrome
 * export writes it. */
static void packet_trigger(struct pf *pf, uint64_t track, const struct pf_ev *ev)
{
	struct shmt_record r = { .name = (uint16_t)ev->name };
	char label[SOURCE_TRIGGER_LABEL_MAX];
	size_t len, pk, te;

	source_trigger_label(pf->src, &r, label, sizeof(label), &len);
	plain_begin(pf, track, ev->ts, &pk, &te);
	pb_string(&pf->out, TE_CATEGORIES, "shmtrace", 8);
	pb_uint(&pf->out, TE_TYPE, PF_INSTANT);
	pb_uint(&pf->out, TE_TRACK_UUID, track);
	pb_string(&pf->out, TE_NAME, label, len);
	end_both(pf, pk, te);
}

void packet_event(struct pf *pf, uint64_t track, const struct pf_ev *ev)
{
	struct obuf *b = &pf->out;
	/* the iids it uses: name, category, argument keys */
	uint64_t iid[2 + SHMTRACE_MAX_ARGS];
	enum pf_ns ns[2 + SHMTRACE_MAX_ARGS] = { PF_NS_NAME, PF_NS_CAT };
	bool isnew[2 + SHMTRACE_MAX_ARGS];
	size_t n = 2, pk, te;

	if (ev->kind == SHMTRACE_KIND_TRIGGER) {
		packet_trigger(pf, track, ev);
		return;
	}
	iid[0] = iid_of(pf, ev->name);
	iid[1] = iid_of(pf, ev->cat);
	for (uint32_t i = 0; i < ev->args.n && i < SHMTRACE_MAX_ARGS; i++) {
		ns[n] = PF_NS_ARG;
		iid[n++] = iid_of(pf, ev->args.a[i].key);
	}
	for (size_t i = 0; i < n; i++)
		isnew[i] = fresh(pf, ns[i], iid[i]);
	pk = pb_begin(b, TRACE_PACKET);
	put_ts(pf, track, ev->ts);
	pb_uint(b, PKT_SEQUENCE_ID, PF_SEQ);
	te = pb_begin(b, PKT_TRACK_EVENT);
	pb_uint(b, TE_CATEGORY_IIDS, iid[1]);
	for (size_t i = 2; i < n; i++)
		put_arg(pf, iid[i], &ev->args, (uint32_t)(i - 2));
	/* as the Chrome export marks them: a span its thread never ended, a
	 * step of a flow that receives */
	if (ev->kind == SHMTRACE_KIND_OPEN)
		put_flag(b, "unfinished");
	if (ev->receives)
		put_flag(b, "receives");
	pb_uint(b, TE_TYPE, ev->point ? PF_INSTANT : PF_SLICE_BEGIN);
	pb_uint(b, TE_NAME_IID, iid[0]);
	pb_uint(b, TE_TRACK_UUID, track);
	if (ev->flow_id)
		pb_fixed64(b, ev->ph == 'f' ? TE_TERMINATING_FLOW_IDS : TE_FLOW_IDS, ev->flow_id);
	pb_end(b, te);
	put_interned(pf, iid, isnew, ns, n);
	pb_uint(b, PKT_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
	pb_end(b, pk);
}

void packet_end(struct pf *pf, uint64_t track, uint64_t ts)
{
	size_t pk, te;

	plain_begin(pf, track, ts, &pk, &te);
	pb_uint(&pf->out, TE_TYPE, PF_SLICE_END);
	pb_uint(&pf->out, TE_TRACK_UUID, track);
	end_both(pf, pk, te);
}

int packet_counter(struct pf *pf, uint32_t pid, uint32_t cat, uint32_t name, uint64_t ts,
		   int64_t v)
{
	uint64_t track = counter_track(pf, pid, cat, name);
	size_t pk, te;

	if (!track)
		return -ENOMEM;
	plain_begin(pf, track, ts, &pk, &te);
	pb_uint(&pf->out, TE_TYPE, PF_COUNTER);
	pb_uint(&pf->out, TE_TRACK_UUID, track);
	pb_uint(&pf->out, TE_COUNTER_VALUE, (uint64_t)v);
	end_both(pf, pk, te);
	return 0;
}

void packet_self(struct pf *pf, const char *name, const struct pf_kv *kv)
{
	packet_self_at(pf, pf->first_ts, name, kv);
}

void packet_self_at(struct pf *pf, uint64_t ts, const char *name, const struct pf_kv *kv)
{
	struct obuf *b = &pf->out;
	size_t pk, te;

	plain_begin(pf, PF_UUID_SELF, ts, &pk, &te);
	pb_string(b, TE_CATEGORIES, "shmtrace", 8);
	for (; kv && kv->key; kv++) {
		size_t da = pb_begin(b, TE_DEBUG_ANNOTATIONS);

		pb_string(b, DA_NAME, kv->key, strlen(kv->key));
		if (kv->str)
			pb_string(b, DA_STRING_VALUE, kv->str, strlen(kv->str));
		else
			pb_uint(b, DA_INT_VALUE, (uint64_t)kv->num);
		pb_end(b, da);
	}
	pb_uint(b, TE_TYPE, PF_INSTANT);
	pb_uint(b, TE_TRACK_UUID, PF_UUID_SELF);
	pb_string(b, TE_NAME, name, strlen(name));
	end_both(pf, pk, te);
}

int packet_flush(struct pf *pf, bool all)
{
	struct obuf *b = &pf->out;

	if (b->oom)
		return -ENOMEM;
	if (pf->werr || (!all && b->len < FLUSH_AT))
		return pf->werr;
	if (b->len && fwrite(b->p, 1, b->len, pf->f) != b->len)
		pf->werr = ferror(pf->f) && errno ? -errno : -EIO;
	b->len = 0;
	return pf->werr;
}
