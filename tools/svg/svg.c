/* SPDX-License-Identifier: MIT */
/*
 * svg.c - `shmtrace svg`: a static SVG timeline of a window of a trace,
 * laid out like Perfetto (axis, a track group per process, a lane per
 * thread, spans stacked by depth, flow arrows), for pictures that need no
 * browser. Two passes over the source: one finds the trace's start and
 * the default window, the other keeps only the records inside the window.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "array.h"
#include "cli.h"
#include "cmd_common.h"
#include "parse.h"
#include "pick.h"
#include "procs.h"
#include "source.h"
#include "svg_int.h"

#define DEFAULT_SPAN	2000000ull	/* ns: a few demo requests, legibly */
#define DEFAULT_WIDTH	1400u

/* a command's help is its own text, whole: lines it shares with other
 * commands' help (the options) stay in it, so each reads in one piece */
static const char svg_usage[] =
	"Usage: shmtrace svg CAPTURE... -o OUT.svg [options]\n"
	"       shmtrace svg --ring NAME -o OUT.svg [options]\n"
	"Draws a window of a trace as a static SVG timeline: a time axis, one\n"
	"track group per process, one lane per thread, spans stacked by nesting,\n"
	"instants as diamonds, counters as step lines and flows as arrows.\n"
	"\n"
	"  -o, --output FILE  write the picture to FILE ('-' for stdout)\n"
	"  -r, --ring NAME    read the ring /dev/shm/NAME directly, read-only\n"
	"  -p, --pid PID      only records of PID (repeatable)\n"
	"      --from T       start of the window\n"
	"      --to T         end of the window\n"
	"                     (T is relative to the earliest record: 1.5s, 200ms, 300us)\n"
	"  -w, --width PX     width of the picture (default 1400, 400..20000)\n"
	"  -h, --help         show this help\n"
	"  -V, --version      show the version\n"
	"\n"
	"Default window: 2 ms from just before the first flow (or from the start\n"
	"of the trace when it has no flows); --from alone shows 2 ms from T, --to\n"
	"alone shows from the start of the trace to T. At most 200000 records are\n"
	"drawn.\n";
/* ------------------------------------------------------------ passes */

static int on_scan(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct svg *g = ctx;
	uint64_t end = shmt_record_end(r);

	(void)start_time;
	/* an argument's flow field is not a flow */
	if (!filter_pid(&g->flt, r->pid) || shmt_record_attached(r))
		return 0;
	if (!g->any || r->ts < g->t0)
		g->t0 = r->ts;
	if (!g->any || end > g->tend)
		g->tend = end;
	g->any = true;
	if (shmt_record_in_flow(r) && (!g->any_flow || r->ts < g->first_flow)) {
		g->first_flow = r->ts;
		g->any_flow = true;
	}
	return 0;
}

static int on_keep(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct svg *g = ctx;
	uint32_t kind = shmt_record_kind(r);
	uint64_t end = shmt_record_end(r);
	struct svg_item *it;

	if (!filter_pid(&g->flt, r->pid))
		return 0;
	/* spans that overlap the window are kept, cut at its edges */
	if (r->ts > g->wto || end < g->wfrom)
		return 0;
	if (kind != SHMTRACE_KIND_SPAN && kind != SHMTRACE_KIND_INSTANT &&
	    kind != SHMTRACE_KIND_COUNTER)
		return 0;
	if (g->n >= SVG_MAX_ITEMS) {
		g->skipped++;
		return 0;
	}
	if (array_reserve_max(&g->v, &g->cap, g->n + 1, sizeof(*g->v), 4096, SVG_MAX_ITEMS) < 0)
		return -ENOMEM;
	it = &g->v[g->n++];
	*it = (struct svg_item){
		.ts = r->ts, .dur = r->dur, .tid = r->tid, .name = r->name,
		.cat = r->cat, .kind = (uint8_t)kind, .ring = g->src.ring,
		.pid = procs_outpid(&g->ps, r->pid, start_time, r->ts),
	};
	if (shmt_record_in_flow(r)) {
		it->flow = shmtrace_flow_id(r->flow);
		it->role = (uint8_t)shmt_flow_role(r->flow);
	}
	return 0;
}
static int run_svg(struct svg *g, char *err, size_t errlen)
{
	uint64_t len;
	int ret;

	ret = procs_build(&g->ps, g->src.thr, g->src.nthr);
	if (ret < 0)
		return ret;
	ret = source_records(&g->src, on_scan, g, err, errlen);
	if (ret < 0)
		return ret;
	if (pick_pids_missing(&g->flt, g->any, &g->src, err, errlen))
		return -ENODATA;
	if (!g->any) {
		snprintf(err, errlen, "%s: no records", g->src.name);
		return -ENODATA;
	}
	len = g->tend - g->t0;
	pick_warn_past_end(&g->flt, len, "its last span ends at");
	/* times near 2^64 (a forged record) saturate: the window never wraps */
	if (g->flt.has_from && g->flt.has_to) {
		g->wfrom = shmt_time_end(g->t0, g->flt.from);
		g->wto = shmt_time_end(g->t0, g->flt.to);
	} else if (g->flt.has_from) {
		g->wfrom = shmt_time_end(g->t0, g->flt.from);
		g->wto = shmt_time_end(g->wfrom, DEFAULT_SPAN);
	} else if (g->flt.has_to) {
		g->wfrom = g->t0;
		g->wto = shmt_time_end(g->t0, g->flt.to);
	} else if (len <= DEFAULT_SPAN) {
		g->wfrom = g->t0;
		g->wto = g->tend;
	} else {
		/* a little before the first flow, so its first slice is not on the edge */
		uint64_t start = g->any_flow ? g->first_flow : g->t0;

		start = start - g->t0 > DEFAULT_SPAN / 50 ? start - DEFAULT_SPAN / 50 : g->t0;
		g->wfrom = start;
		g->wto = shmt_time_end(start, DEFAULT_SPAN);
	}
	/* past the last record there is nothing to draw: do not squash it */
	if (g->wto > g->tend && g->tend > g->wfrom)
		g->wto = g->tend;
	if (g->wto <= g->wfrom) {
		if (g->wfrom == UINT64_MAX)
			g->wfrom--;
		g->wto = g->wfrom + 1;
	}
	ret = source_records(&g->src, on_keep, g, err, errlen);
	if (ret < 0)
		return ret;
	if (g->skipped)
		source_warnx("%llu records in the window were not drawn (at most %u are); "
		       "narrow it with --from/--to or --pid", (unsigned long long)g->skipped,
		       SVG_MAX_ITEMS);
	err[0] = 0;
	return svg_draw(g);
}

static int svg_option(void *ctx, int c, const char *arg)
{
	static const struct num_spec width = { "--width", 400, 20000, 0, "px" };
	struct svg *g = ctx;
	char err[256];
	uint64_t w;

	if (c != 'w')
		return cli_usage_error("svg", "unknown option");
	if (parse_num(arg, &width, &w, err, sizeof(err)) < 0)
		return cli_usage_error("svg", "%s", err);
	g->width = (unsigned)w;
	return 0;
}

int cmd_svg(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "width", required_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	struct svg *g = calloc(1, sizeof(*g));
	struct cmd c = {
		.name = "svg", .usage = svg_usage, .shortopts = "w:", .longopts = opts,
		.option = svg_option, .ctx = g,
	};
	char err[768];
	int rc;

	if (!g)
		return cli_runtime_error("svg", "out of memory");
	g->width = DEFAULT_WIDTH;
	c.flt = &g->flt;
	c.src = &g->src;
	rc = cmd_parse(&c, argc, argv);
	if (rc != CMD_CONTINUE)
		goto done;
	rc = cmd_open(&c, "use -o FILE.svg, or -o - for stdout");
	if (rc)
		goto done;
	rc = cmd_create(&c);
	if (rc == 0) {
		g->f = c.f;
		err[0] = 0;
		rc = cmd_finish(&c, run_svg(g, err, sizeof(err)), err);
		procs_free(&g->ps);
	}
	source_close(&g->src);
done:
	free(g->v);
	free(g->lanes);
	free(g->fidx);
	free(g);
	return rc;
}
