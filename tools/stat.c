/* SPDX-License-Identifier: MIT */
/*
 * stat.c - `shmtrace stat`: the state of a ring (fill, counters, who
 * produced into it and whether they live) or of a capture file (header,
 * frames, records, loss, how it ended), as text or JSON.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "capture.h"
#include "cli.h"
#include "exporters.h"
#include "fmt.h"
#include "json_writer.h"
#include "kv.h"
#include "loss.h"
#include "ring_census.h"
#include "ring_reader.h"
#include "term.h"

static const char *mode_name(uint32_t mode)
{
	return mode == SHMTRACE_MODE_DISCARD ? "discard" : mode == SHMTRACE_MODE_OVERWRITE ? "overwrite"
											   : "unknown";
}

/* key: null (JSON) or text, for a value there is none of */
static void kv_none(struct kv *o, const char *k, const char *text)
{
	kv_key(o, k);
	jw_puts(o->w, o->json ? "null" : text);
	if (!o->json)
		jw_puts(o->w, "\n");
}

/* key: null (JSON) or "corrupt" (text), for a counter that is no count */
static void kv_corrupt(struct kv *o, const char *k)
{
	kv_none(o, k, "corrupt");
}

/* The loss counters, one key each as loss.h's table names them, and the
 * records lost: the sum of those counted in records. Counters that
 * cannot be true of the ring (shmt_loss_plausible(), against sc) are
 * shown as corrupt, with why, never as counts. */
static void kv_losses(struct kv *o, const struct shmt_loss *l, const struct shmt_loss_scope *sc)
{
	char why[192];
	bool ok = shmt_loss_plausible(l, sc, why, sizeof(why));

	for (size_t i = 0; i < SHMT_LOSS_NKINDS; i++) {
		if (ok)
			kv_u64(o, shmt_loss_kinds[i].name, shmt_loss_get(l, &shmt_loss_kinds[i]));
		else
			kv_corrupt(o, shmt_loss_kinds[i].name);
	}
	if (ok) {
		kv_u64(o, "records_lost", shmt_loss_records(l));
		return;
	}
	kv_corrupt(o, "records_lost");
	if (o->json)
		kv_bool(o, "counters_corrupt", true);
	kv_str(o, o->json ? "counters_corrupt_why" : "counters",
	       o->json ? why : "corrupt (see below): not reported");
	if (!o->json)
		kv_str(o, "counters_why", why);
}

/* Whether a collector drains the ring now (col, from ring_collector()),
 * and the pid the header records: a collector killed leaves its own. */
static void kv_collector(struct kv *o, int64_t col, uint64_t recorded)
{
	char buf[96];

	if (o->json) {
		kv_bool(o, "collector", col >= 0);
		kv_u64(o, "collector_pid", col > 0 ? (uint64_t)col : 0);
		kv_u64(o, "collector_pid_recorded", recorded);
		return;
	}
	if (col > 0)
		snprintf(buf, sizeof(buf), "%lld", (long long)col);
	else if (recorded)
		snprintf(buf, sizeof(buf), "none (pid %llu recorded, not running)",
			 (unsigned long long)recorded);
	else
		snprintf(buf, sizeof(buf), "none");
	kv_str(o, "collector", buf);
}

struct ring_stat {
	struct shmt_view v;
	struct kv *o;
	const char *name;
	struct ring_proc *procs;	/* the pass's copy of the producers (to free) */
	size_t nprocs;
};

/* The ring's header: geometry, fill, counters, tables, clock, collector. */
static void stat_ring_header(struct kv *o, const char *name, const struct shmt_view *v)
{
	struct shmt_ring_status st;
	uint64_t fill;
	uint32_t nthr, nstr;
	struct shmt_loss loss;
	uint64_t recorded;
	char buf[96];

	shmt_ring_status(v, &st);
	fill = st.head > st.tail ? st.head - st.tail : 0;
	nthr = shmt_ring_nthreads(v);
	nstr = shmt_ring_nstrings(v);
	kv_str(o, "ring", name);
	snprintf(buf, sizeof(buf), "%u.%u", v->major, v->header_minor);
	kv_str(o, "format", buf);
	kv_u64(o, "capacity", v->capacity);
	kv_str(o, "mode", mode_name(v->mode));
	kv_u64(o, "fill", fill > v->capacity ? v->capacity : fill);
	kv_u64(o, "published", st.head);
	kv_u64(o, "consumed", st.tail);
	shmt_loss_read(v, &loss, true);
	kv_losses(o, &loss, &(const struct shmt_loss_scope){
		.published = st.head, .consumed = st.tail, .heads = true,
		.staged = (uint64_t)v->nblocks * v->block_records,
		.age_ns = shmt_loss_age_ns(v->clock.realtime0),
		.discard = v->mode == SHMTRACE_MODE_DISCARD,
	});
	kv_u64(o, "lock_recoveries", st.lock_recoveries);
	kv_u64(o, "triggers", shmt_ring_triggers(v));
	kv_u64(o, "strings", nstr ? nstr - 1 : 0);
	kv_u64(o, "max_strings", v->max_strings);
	kv_u64(o, "string_bytes_used", st.heap_used);
	kv_u64(o, "string_bytes", v->string_bytes);
	kv_u64(o, "thread_names", nthr);
	kv_u64(o, "max_threads", v->max_threads);
	kv_str(o, "clock", v->clock.tsc_ok ? "tsc" : "monotonic");
	fmt_iso_ns(buf, sizeof(buf), v->clock.realtime0);
	kv_str(o, "wall_clock_anchor", buf);
	kv_u64(o, "anchor_mono_ns", v->clock.mono0);
	recorded = shmt_ring_collector_pid(v);	/* read once: both uses agree */
	kv_collector(o, ring_collector(v, recorded), recorded);
}

/* One producer process: a JSON object, or a line "  PID  NAME  alive". */
static void stat_producer(struct kv *o, const struct shmt_thread *t, const struct ring_proc *p,
			  bool first)
{
	bool alive = ring_process_alive(p);
	const char *attached = t->flags & SHMT_THREAD_REATTACHED ? "again (ring made anew)" :
			       t->flags & SHMT_THREAD_LATE ? "late (waited for the ring)" : NULL;
	char esc[TERM_ESC_MAX(SHMT_NAME_LEN)], buf[32];

	if (o->json) {
		jw_puts(o->w, first ? "{\"pid\":" : ",{\"pid\":");
		jw_u64(o->w, t->pid);
		jw_puts(o->w, ",\"name\":");
		jw_cstr(o->w, t->pname);
		jw_puts(o->w, ",\"start_time\":");
		jw_u64(o->w, t->start_time);
		jw_puts(o->w, ",\"attached\":");
		jw_cstr(o->w, t->flags & SHMT_THREAD_REATTACHED ? "reattached" :
			      t->flags & SHMT_THREAD_LATE ? "late" : "start");
		jw_puts(o->w, alive ? ",\"alive\":true}" : ",\"alive\":false}");
		return;
	}
	term_escape(t->pname, strlen(t->pname), esc, sizeof(esc));
	snprintf(buf, sizeof(buf), "  %8u  ", t->pid);
	jw_puts(o->w, buf);
	jw_puts(o->w, esc);
	jw_puts(o->w, alive ? "  alive" : "  dead");
	if (attached) {
		jw_puts(o->w, "  attached ");
		jw_puts(o->w, attached);
	}
	jw_puts(o->w, "\n");
}

static int stat_ring_pass(void *arg)
{
	struct ring_stat *rs = arg;
	const struct shmt_view *v = &rs->v;
	struct kv *o = rs->o;
	bool any = false;
	int ret;

	stat_ring_header(o, rs->name, v);
	if ((ret = ring_processes(v, &rs->procs, &rs->nprocs)) < 0)
		return ret;
	/* one line per process: the first slot of each (pid, start time) */
	kv_key(o, "producers");
	jw_puts(o->w, o->json ? "[" : "\n");
	for (size_t i = 0; i < rs->nprocs; i++) {
		const struct ring_proc *p = &rs->procs[i];
		struct shmt_thread t;

		/* its names from its first slot; what identifies it, from the copy */
		if (shmt_ring_thread(v, p->slot, &t) < 0)
			memset(&t, 0, sizeof(t));
		t.pid = p->pid;
		t.start_time = p->start_time;
		t.flags = p->flags;
		stat_producer(o, &t, p, !any);
		any = true;
	}
	if (o->json)
		jw_puts(o->w, "]");
	else if (!any)
		jw_puts(o->w, "  (none)\n");
	return 0;
}

static int stat_ring(const char *name, struct kv *o)
{
	struct ring_stat rs = { .o = o, .name = name };
	char err[512];
	int ret = shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &rs.v, err, sizeof(err));

	if (ret < 0)
		return cli_runtime_error("stat", "%s", err);
	ret = shmt_guarded(stat_ring_pass, &rs);
	shmt_view_close(&rs.v);
	free(rs.procs);
	if (ret == -ENOMEM)
		return cli_runtime_error("stat", "ring '%s': out of memory", name);
	if (ret < 0)
		return cli_runtime_error("stat", "ring '%s': segment shrank while being read", name);
	if ((ret = kv_end(o)) < 0)
		return cli_runtime_error("stat", "writing output: %s", strerror(-ret));
	return EXIT_OK;
}

/* What a walk over a capture's frames counts. */
struct cap_census {
	uint64_t frames[SHMT_CAP_END + 1], records, first, last;
	struct shmt_cap_loss loss;	/* the last LOSS frame's */
	struct shmt_cap_end end;
	int ret;			/* shmt_cap_next()'s last: 0 at a clean end */
	char err[512];			/* why not, when ret < 0 */
};

static void cap_count(struct shmt_cap_reader *r, struct cap_census *c)
{
	struct shmt_cap_frame f;

	c->first = UINT64_MAX;
	c->frames[SHMT_CAP_HEADER] = 1;
	while ((c->ret = shmt_cap_next(r, &f, c->err, sizeof(c->err))) == 1) {
		/* PACKED frames come as RECORDS */
		if (f.type >= SHMT_CAP_HEADER && f.type <= SHMT_CAP_END)
			c->frames[f.type]++;
		if (f.type == SHMT_CAP_RECORDS && f.records.n) {
			c->records += f.records.n;
			if (f.records.first_seq < c->first)
				c->first = f.records.first_seq;
			if (f.records.first_seq + f.records.n > c->last)
				c->last = f.records.first_seq + f.records.n;
		} else if (f.type == SHMT_CAP_LOSS) {
			c->loss = f.loss;
		} else if (f.type == SHMT_CAP_END) {
			c->end = f.end;
		}
	}
}

/* The parts its collector had deleted for --max-files when this part
 * began (0 in a file of an older collector), and when they were written. */
static void put_deleted(struct kv *o, const struct shmt_cap_header *h)
{
	const struct shmt_cap_deleted *d = &h->deleted;
	char buf[64];

	kv_u64(o, "max_files", d->max_files);
	kv_u64(o, "deleted_parts", d->parts);
	kv_u64(o, "deleted_records", d->records);
	if (!d->parts)
		return;
	/* ring times on the wall clock, wrapping as the exports do */
	fmt_iso_ns(buf, sizeof(buf), h->realtime0 + (d->from_ns - h->mono0));
	kv_str(o, "deleted_from", buf);
	fmt_iso_ns(buf, sizeof(buf), h->realtime0 + (d->to_ns - h->mono0));
	kv_str(o, "deleted_to", buf);
}

/* A snapshot's header fields (capture/snapshot.h): why, the window, what
 * the copy lost; nothing for a collector's capture. */
static void put_snapshot(struct kv *o, const struct shmt_cap_header *h)
{
	const struct shmt_cap_snapshot *sn = &h->snapshot;
	char buf[64];

	if (!sn->cause)
		return;
	kv_str(o, "snapshot", shmt_snap_cause_name(sn->cause));
	kv_str(o, "trigger", sn->trigger);
	kv_u64(o, "trigger_pid", sn->trigger_pid);
	kv_u64(o, "trigger_tid", sn->trigger_tid);
	/* ring times on the wall clock, wrapping as the exports do */
	fmt_iso_ns(buf, sizeof(buf), h->realtime0 + (sn->trigger_ns - h->mono0));
	kv_str(o, "triggered", buf);
	kv_u64(o, "window_first_seq", sn->first_seq);
	kv_u64(o, "window_end_seq", sn->end_seq);
	/* a snapshot that holds no record has no start (capture.h) */
	if (sn->from_ns) {
		fmt_iso_ns(buf, sizeof(buf), h->realtime0 + (sn->from_ns - h->mono0));
		kv_str(o, "window_from", buf);
	} else {
		kv_none(o, "window_from", "none (no record)");
	}
	fmt_iso_ns(buf, sizeof(buf), h->realtime0 + (sn->to_ns - h->mono0));
	kv_str(o, "window_to", buf);
	kv_u64(o, "copy_overwritten", sn->overwritten);
	kv_u64(o, "staged", sn->staged);
	kv_u64(o, "triggers_answered", sn->triggers);
	kv_u64(o, "triggers_suppressed", sn->suppressed);
	kv_u64(o, "window_cut", sn->cut);
}

static void stat_capture_print(struct kv *o, const char *path, const struct shmt_cap_header *h,
			       const struct cap_census *c)
{
	static const char *names[SHMT_CAP_END + 1] = {
		[SHMT_CAP_HEADER] = "header", [SHMT_CAP_STRINGS] = "strings",
		[SHMT_CAP_THREADS] = "threads", [SHMT_CAP_RECORDS] = "records",
		[SHMT_CAP_LOSS] = "loss", [SHMT_CAP_END] = "end",
	};
	char buf[96];

	kv_str(o, "capture", path);
	kv_u64(o, "version", h->version);
	kv_u64(o, "part", h->part);
	snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)h->run_id);
	kv_str(o, "run_id", buf);
	kv_str(o, "host", h->host);
	kv_str(o, "ring", h->ring);
	kv_u64(o, "ring_capacity", h->ring_capacity);
	kv_str(o, "ring_mode", mode_name(h->ring_mode));
	kv_str(o, "clock", h->clock_tsc ? "tsc" : "monotonic");
	fmt_iso_ns(buf, sizeof(buf), h->realtime0);
	kv_str(o, "wall_clock_anchor", buf);
	kv_u64(o, "collector_pid", h->collector_pid);
	put_deleted(o, h);
	put_snapshot(o, h);
	for (int t = SHMT_CAP_HEADER; t <= SHMT_CAP_END; t++) {
		snprintf(buf, sizeof(buf), "%s_frames", names[t]);
		kv_u64(o, buf, c->frames[t]);
	}
	kv_u64(o, "records", c->records);
	kv_u64(o, "first_seq", c->first == UINT64_MAX ? 0 : c->first);
	kv_u64(o, "end_seq", c->last);
	kv_losses(o, &c->loss.counters, &(const struct shmt_loss_scope){
		.published = c->loss.published, .has_published = c->loss.published != 0,
		.age_ns = shmt_loss_age_ns(h->realtime0),
		.discard = h->ring_mode == SHMTRACE_MODE_DISCARD,
	});
	/* 0: a capture whose LOSS frames predate the table sizes */
	kv_u64(o, "max_strings", c->loss.max_strings);
	kv_u64(o, "string_bytes", c->loss.string_bytes);
	kv_u64(o, "max_threads", c->loss.max_threads);
	if (c->ret == 0) {
		kv_str(o, "end", c->end.next_part ? "clean (rotated)" : "clean");
		kv_u64(o, "next_part", c->end.next_part);
	} else {
		kv_str(o, "end", c->ret == -EPIPE ? "cut" : "damaged");
		kv_str(o, "end_detail", c->err);
	}
}

static int stat_capture(const char *path, struct kv *o)
{
	struct cap_census *c = calloc(1, sizeof(*c));
	struct shmt_cap_reader *r;
	char err[512];
	int ret;

	if (!c)
		return cli_runtime_error("stat", "out of memory");
	ret = shmt_cap_open(path, &r, err, sizeof(err));
	if (ret < 0) {
		free(c);
		/* name the argument once, and say what was looked for */
		if (ret == -ENOENT && shmt_name_check(path) == 0)
			return cli_runtime_error("stat", "%s: no ring of that name in /dev/shm, "
						 "nor a capture file", path);
		if (ret == -ENOENT)
			return cli_runtime_error("stat", "%s: no such capture file", path);
		if (strncmp(err, path, strlen(path)))
			return cli_runtime_error("stat", "%s: %s", path, err);
		return cli_runtime_error("stat", "%s", err);
	}
	cap_count(r, c);
	stat_capture_print(o, path, shmt_cap_header_of(r), c);
	otlp_stream_stat(path, o);
	shmt_cap_close(r);
	free(c);
	if ((ret = kv_end(o)) < 0)
		return cli_runtime_error("stat", "writing output: %s", strerror(-ret));
	return EXIT_OK;
}

/* a command's help is its own text, whole: lines it shares with other
 * commands' help (the options) stay in it, so each reads in one piece */
static const char stat_usage[] =
	"Usage: shmtrace stat NAME|CAPTURE [--json]\n"
	"Shows a ring (when /dev/shm/NAME exists and NAME is not a path) or a\n"
	"capture file: geometry, fill, counters, loss, producers (alive or dead),\n"
	"clock, wall-clock anchor and the collector draining it (or none, and the\n"
	"pid of one that died), triggers; for a capture: header (a snapshot's:\n"
	"why, its window, what its copy lost), frames, records, loss and whether\n"
	"it ended cleanly or was cut.\n"
	"\n"
	"      --json     print one JSON object\n"
	"  -h, --help     show this help\n"
	"  -V, --version  show the version\n";

static const struct cli_opts stat_opts = { "stat", stat_usage, ":", cli_json_longopts };

int cmd_stat(int argc, char **argv)
{
	struct kv o;
	struct jw *w;
	bool json = false;
	int rc;

	if (cli_getopt_flag(&stat_opts, argc, argv, 'j', &json, &rc) == CLI_OPT_EXIT)
		return rc;
	if (optind + 1 != argc)
		return cli_usage_error("stat", optind == argc ? "no ring or capture given"
							      : "give one ring or capture file");
	w = malloc(sizeof(*w));
	if (!w)
		return cli_runtime_error("stat", "out of memory");
	jw_init(w, stdout);
	kv_begin(&o, w, json);
	if (is_ring_name(argv[optind]) && access(argv[optind], F_OK) == 0)
		cli_note("stat", "note: '%s' names a ring in /dev/shm and a file here: the ring "
			 "is shown (./%s for the file)", argv[optind], argv[optind]);
	rc = is_ring_name(argv[optind]) ? stat_ring(argv[optind], &o)
					: stat_capture(argv[optind], &o);
	free(w);
	return rc;
}
