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
#include <time.h>

#include "capture.h"
#include "cli.h"
#include "fmt.h"
#include "json_writer.h"
#include "loss.h"
#include "ring_census.h"
#include "ring_reader.h"

/* Key/value output: "key:  value" lines, or one JSON object. */
struct kv {
	bool json, first;
	struct jw *w;
};

static void kv_key(struct kv *o, const char *k)
{
	if (o->json) {
		jw_puts(o->w, o->first ? "{" : ",");
		jw_cstr(o->w, k);
		jw_puts(o->w, ":");
	} else {
		char label[40];

		snprintf(label, sizeof(label), "%s:", k);
		jw_puts(o->w, label);
		/* a column of values, and a space after a longer key */
		for (size_t i = strlen(label); i < 20 || i == strlen(label); i++)
			jw_puts(o->w, " ");
	}
	o->first = false;
}

static void kv_u64(struct kv *o, const char *k, uint64_t v)
{
	kv_key(o, k);
	jw_u64(o->w, v);
	if (!o->json)
		jw_puts(o->w, "\n");
}

static void kv_str(struct kv *o, const char *k, const char *v)
{
	kv_key(o, k);
	if (o->json) {
		jw_cstr(o->w, v);
	} else {
		char esc[600];

		/* untrusted bytes from the segment or file: escaped, never raw */
		json_escape(v, strlen(v), esc, sizeof(esc));
		jw_puts(o->w, esc);
		jw_puts(o->w, "\n");
	}
}

static int kv_end(struct kv *o)
{
	if (o->json)
		jw_puts(o->w, o->first ? "{}\n" : "}\n");
	return jw_flush(o->w);
}

static const char *mode_name(uint32_t mode)
{
	return mode == SHMTRACE_MODE_DISCARD ? "discard" : mode == SHMTRACE_MODE_OVERWRITE ? "overwrite"
											   : "unknown";
}

/* The loss counters, one key each as loss.h's table names them, and the
 * records lost: the sum of those counted in records. */
static void kv_losses(struct kv *o, const struct shmt_loss *l)
{
	for (size_t i = 0; i < SHMT_LOSS_NKINDS; i++)
		kv_u64(o, shmt_loss_kinds[i].name, shmt_loss_get(l, &shmt_loss_kinds[i]));
	kv_u64(o, "records_lost", shmt_loss_records(l));
}

/* Whether a collector drains the ring now (col, from ring_collector()),
 * and the pid the header records: a collector killed leaves its own. */
static void kv_collector(struct kv *o, int64_t col, uint64_t recorded)
{
	char buf[96];

	if (o->json) {
		kv_key(o, "collector");
		jw_puts(o->w, col >= 0 ? "true" : "false");
		kv_u64(o, "collector_pid", col > 0 ? (uint64_t)col : 0);
		kv_u64(o, "collector_pid_recorded", recorded);
		return;
	}
	if (col > 0)
		snprintf(buf, sizeof(buf), "%lld", (long long)col);
	else if (col == 0)
		snprintf(buf, sizeof(buf), "running (in another pid namespace)");
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
};

static int stat_ring_pass(void *arg)
{
	struct ring_stat *rs = arg;
	const struct shmt_view *v = &rs->v;
	struct kv *o = rs->o;
	struct shmt_ring_status st;
	uint64_t fill;
	uint32_t nthr, nstr;
	struct shmt_loss loss;
	char buf[96];
	bool any = false;

	shmt_ring_status(v, &st);
	fill = st.head > st.tail ? st.head - st.tail : 0;
	nthr = shmt_ring_nthreads(v);
	nstr = shmt_ring_nstrings(v);
	kv_str(o, "ring", rs->name);
	snprintf(buf, sizeof(buf), "%u.%u", v->major, v->minor);
	kv_str(o, "format", buf);
	kv_u64(o, "capacity", v->capacity);
	kv_str(o, "mode", mode_name(v->mode));
	kv_u64(o, "fill", fill > v->capacity ? v->capacity : fill);
	kv_u64(o, "published", st.head);
	kv_u64(o, "consumed", st.tail);
	shmt_loss_read(v, &loss, true);
	kv_losses(o, &loss);
	kv_u64(o, "lock_recoveries", st.lock_recoveries);
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
	kv_collector(o, ring_collector(v), shmt_ring_collector_pid(v));

	/* one line per process: the first slot of each (pid, start time) */
	kv_key(o, "producers");
	jw_puts(o->w, o->json ? "[" : "\n");
	for (uint32_t i = 0; i < nthr; i++) {
		struct shmt_thread t, u;
		bool dup = false;
		bool alive;
		const char *attached;
		char esc[SHMT_NAME_LEN * 6 + 1];

		if (shmt_ring_thread(v, i, &t) < 0)
			continue;
		for (uint32_t j = 0; j < i && !dup; j++)
			dup = shmt_ring_thread(v, j, &u) == 0 && u.pid == t.pid &&
			      u.start_time == t.start_time;
		if (dup)
			continue;
		alive = t.pid && shmt_proc_start_time(t.pid) == t.start_time;
		/* how the process came to this ring (any of its slots says) */
		for (uint32_t j = i; j < nthr; j++)
			if (shmt_ring_thread(v, j, &u) == 0 && u.pid == t.pid &&
			    u.start_time == t.start_time)
				t.flags |= u.flags;
		attached = t.flags & SHMT_THREAD_REATTACHED ? "again (ring made anew)" :
			   t.flags & SHMT_THREAD_LATE ? "late (waited for the ring)" : "at start";
		if (o->json) {
			jw_puts(o->w, any ? ",{\"pid\":" : "{\"pid\":");
			jw_u64(o->w, t.pid);
			jw_puts(o->w, ",\"name\":");
			jw_cstr(o->w, t.pname);
			jw_puts(o->w, ",\"start_time\":");
			jw_u64(o->w, t.start_time);
			jw_puts(o->w, ",\"attached\":");
			jw_cstr(o->w, t.flags & SHMT_THREAD_REATTACHED ? "reattached" :
				      t.flags & SHMT_THREAD_LATE ? "late" : "start");
			jw_puts(o->w, alive ? ",\"alive\":true}" : ",\"alive\":false}");
		} else {
			json_escape(t.pname, strlen(t.pname), esc, sizeof(esc));
			snprintf(buf, sizeof(buf), "  %8u  ", t.pid);
			jw_puts(o->w, buf);
			jw_puts(o->w, esc);
			jw_puts(o->w, alive ? "  alive" : "  dead");
			if (strcmp(attached, "at start")) {
				jw_puts(o->w, "  attached ");
				jw_puts(o->w, attached);
			}
			jw_puts(o->w, "\n");
		}
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
	if (ret < 0)
		return cli_runtime_error("stat", "ring '%s': segment shrank while being read", name);
	if ((ret = kv_end(o)) < 0)
		return cli_runtime_error("stat", "writing output: %s", strerror(-ret));
	return EXIT_OK;
}

static int stat_capture(const char *path, struct kv *o)
{
	static const char *names[SHMT_CAP_END + 1] = {
		[SHMT_CAP_HEADER] = "header", [SHMT_CAP_STRINGS] = "strings",
		[SHMT_CAP_THREADS] = "threads", [SHMT_CAP_RECORDS] = "records",
		[SHMT_CAP_LOSS] = "loss", [SHMT_CAP_END] = "end",
	};
	uint64_t frames[SHMT_CAP_END + 1] = { 0 }, records = 0, first = UINT64_MAX, last = 0;
	struct shmt_cap_loss loss = { 0 };
	struct shmt_cap_end end = { 0 };
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	const struct shmt_cap_header *h;
	char err[512], buf[96];
	int ret;

	ret = shmt_cap_open(path, &r, err, sizeof(err));
	/* name the argument once, and say what was looked for */
	if (ret == -ENOENT && shmt_name_check(path) == 0)
		return cli_runtime_error("stat", "%s: no ring of that name in /dev/shm, nor a capture file",
					 path);
	if (ret == -ENOENT)
		return cli_runtime_error("stat", "%s: no such capture file", path);
	if (ret < 0 && strncmp(err, path, strlen(path)))
		return cli_runtime_error("stat", "%s: %s", path, err);
	if (ret < 0)
		return cli_runtime_error("stat", "%s", err);
	frames[SHMT_CAP_HEADER] = 1;
	while ((ret = shmt_cap_next(r, &f, err, sizeof(err))) == 1) {
		/* PACKED frames come as RECORDS */
		if (f.type >= SHMT_CAP_HEADER && f.type <= SHMT_CAP_END)
			frames[f.type]++;
		if (f.type == SHMT_CAP_RECORDS && f.records.n) {
			records += f.records.n;
			if (f.records.first_seq < first)
				first = f.records.first_seq;
			if (f.records.first_seq + f.records.n > last)
				last = f.records.first_seq + f.records.n;
		} else if (f.type == SHMT_CAP_LOSS) {
			loss = f.loss;
		} else if (f.type == SHMT_CAP_END) {
			end = f.end;
		}
	}
	h = shmt_cap_header_of(r);
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
	for (int t = SHMT_CAP_HEADER; t <= SHMT_CAP_END; t++) {
		snprintf(buf, sizeof(buf), "%s_frames", names[t]);
		kv_u64(o, buf, frames[t]);
	}
	kv_u64(o, "records", records);
	kv_u64(o, "first_seq", first == UINT64_MAX ? 0 : first);
	kv_u64(o, "end_seq", last);
	kv_losses(o, &loss.counters);
	/* 0: a capture whose LOSS frames predate the table sizes */
	kv_u64(o, "max_strings", loss.max_strings);
	kv_u64(o, "string_bytes", loss.string_bytes);
	kv_u64(o, "max_threads", loss.max_threads);
	if (ret == 0) {
		kv_str(o, "end", end.next_part ? "clean (rotated)" : "clean");
		kv_u64(o, "next_part", end.next_part);
	} else {
		kv_str(o, "end", ret == -EPIPE ? "cut" : "damaged");
		kv_str(o, "end_detail", err);
	}
	shmt_cap_close(r);
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
	"pid of one that died); for a capture: header, frames, records, loss\n"
	"and whether it ended cleanly or was cut.\n"
	"\n"
	"      --json  print one JSON object\n"
	"  -h, --help  show this help\n";

static const struct cli_opts stat_opts = { "stat", stat_usage, ":h", cli_json_longopts };

int cmd_stat(int argc, char **argv)
{
	struct kv o = { .first = true };
	int c, rc;

	cli_getopt_start();
	while ((c = cli_getopt(&stat_opts, argc, argv, &rc)) > 0)
		if (c == 'j')
			o.json = true;
	if (c == CLI_OPT_EXIT)
		return rc;
	if (optind + 1 != argc)
		return cli_usage_error("stat", optind == argc ? "no ring or capture given"
							      : "give one ring or capture file");
	o.w = malloc(sizeof(*o.w));
	if (!o.w)
		return cli_runtime_error("stat", "out of memory");
	jw_init(o.w, stdout);
	rc = is_ring_name(argv[optind]) ? stat_ring(argv[optind], &o)
					: stat_capture(argv[optind], &o);
	free(o.w);
	return rc;
}
