// SPDX-License-Identifier: MIT
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
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_common.h"
#include "fmt.h"
#include "procs.h"
#include "source.h"
#include "svg.h"
#include "utf8.h"

#define DEFAULT_SPAN	2000000ull	/* ns: a few demo requests, legibly */
#define DEFAULT_WIDTH	1400u
#define MAX_ARROWS	3000u	/* more only hide the spans */

/* Layout, in px. */
#define LABEL_W		210.0	/* the label column on the left */
#define RIGHT_PAD	16.0
#define AXIS_Y		52.0
#define TRACKS_Y	60.0
#define PROC_H		22.0	/* a process's header row */
#define ROW_H		18.0	/* one depth of a thread lane */
#define LANE_PAD	3.0
#define COUNTER_H	30.0
#define PROC_GAP	8.0
#define CHAR_W		6.1	/* average advance of an 11px sans glyph */
#define SPAN_CHAR_W	5.6	/* of a 10px one */

struct lane {
	uint32_t pid, key;	/* key: tid, or the counter's name id */
	bool counter;
	unsigned depth;		/* greatest span depth */
	size_t first, n;	/* its items */
	double y, h;
	int64_t vmin, vmax;	/* counters */
};

struct svg {
	struct source src;
	struct procs ps;
	struct filter flt;		/* as given, relative to t0 */
	bool any, any_flow;
	uint64_t t0, tend, first_flow;	/* absolute, ring clock */
	uint64_t wfrom, wto;		/* the window, absolute */
	unsigned width;
	struct svg_item *v;
	size_t n, cap;
	uint64_t skipped;		/* in the window but over SVG_MAX_ITEMS */
	struct lane *lanes;
	size_t nlanes;
	size_t *fidx, nf;		/* flow slices, sorted by flow and time */
	uint64_t narrows;
	double x0, x1, height;
	FILE *f;
};

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
	"\n"
	"Default window: 2 ms from just before the first flow (or from the start\n"
	"of the trace when it has no flows); --from alone shows 2 ms from T, --to\n"
	"alone shows from the start of the trace to T. At most 200000 records are\n"
	"drawn.\n";

/* ------------------------------------------------------------- text */

size_t svg_escape(char *out, size_t outlen, const char *s, size_t len, size_t maxchars)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t total = 0, keep, o = 0, k = 0;

	if (!outlen)
		return 0;
	out[0] = 0;
	/* count first: a cut text ends with an ellipsis in place of its last char */
	for (size_t i = 0; i < len && total <= maxchars;) {
		int32_t cp;

		i += utf8_next(u + i, len - i, &cp);
		total++;
	}
	if (!maxchars)
		return 0;
	keep = total > maxchars ? maxchars - 1 : total;
	for (size_t i = 0; i < len && k < keep; k++) {
		char tmp[8];
		const char *rep = tmp;
		size_t start = i, rl;
		int32_t cp;

		i += utf8_next(u + i, len - i, &cp);
		if (cp == '&')
			rep = "&amp;";
		else if (cp == '<')
			rep = "&lt;";
		else if (cp == '>')
			rep = "&gt;";
		else if (cp == '"')
			rep = "&quot;";
		else if (cp == '\'')
			rep = "&apos;";
		else if (cp < 0x20 || cp == 0x7f || cp == 0xfffe || cp == 0xffff)
			/* not allowed in XML 1.0, or not text */
			rep = UTF8_REPLACEMENT;
		else {
			memcpy(tmp, s + start, i - start);
			tmp[i - start] = 0;
		}
		rl = strlen(rep);
		if (o + rl + 4 > outlen)	/* room for an ellipsis and the NUL */
			break;
		memcpy(out + o, rep, rl);
		o += rl;
	}
	if (k < total) {
		memcpy(out + o, "\xe2\x80\xa6", 3);
		o += 3;
		k++;
	}
	out[o] = 0;
	return k;
}

/* ----------------------------------------------------------- nesting */

unsigned svg_nest(struct svg_item *v, size_t n)
{
	/* ends of the open spans; deeper than this is drawn at the last depth */
	uint64_t stack[256];
	unsigned sp = 0, max = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t end = v[i].ts + v[i].dur;

		if (v[i].kind != SHMTRACE_KIND_SPAN) {
			v[i].depth = 0;
			continue;
		}
		while (sp && stack[sp - 1] <= v[i].ts)
			sp--;
		/* a span that outlives its parent still goes inside it: a
		 * partial overlap is drawn one deeper rather than on top */
		v[i].depth = (uint16_t)sp;
		if (sp > max)
			max = sp;
		if (sp < sizeof(stack) / sizeof(stack[0]))
			stack[sp++] = end;
	}
	return max;
}

/* ------------------------------------------------------------ passes */

static int on_scan(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct svg *g = ctx;
	uint64_t end = r->ts + (SHMT_COMMIT_KIND(r->commit) == SHMTRACE_KIND_SPAN ? r->dur : 0);

	(void)start_time;
	if (!filter_pid(&g->flt, r->pid))
		return 0;
	if (!g->any || r->ts < g->t0)
		g->t0 = r->ts;
	if (!g->any || end > g->tend)
		g->tend = end;
	g->any = true;
	if (r->flow && SHMT_COMMIT_KIND(r->commit) != SHMTRACE_KIND_COUNTER &&
	    (!g->any_flow || r->ts < g->first_flow)) {
		g->first_flow = r->ts;
		g->any_flow = true;
	}
	return 0;
}

static int on_keep(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct svg *g = ctx;
	uint32_t kind = SHMT_COMMIT_KIND(r->commit);
	uint64_t end = r->ts + (kind == SHMTRACE_KIND_SPAN ? r->dur : 0);
	struct svg_item *it;

	if (!filter_pid(&g->flt, r->pid))
		return 0;
	/* spans that overlap the window are kept, cut at its edges */
	if (r->ts > g->wto || end < g->wfrom)
		return 0;
	if (kind != SHMTRACE_KIND_SPAN && kind != SHMTRACE_KIND_INSTANT &&
	    kind != SHMTRACE_KIND_COUNTER)
		return 0;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 4096;
		struct svg_item *nv;

		if (g->cap >= SVG_MAX_ITEMS) {
			g->skipped++;
			return 0;
		}
		if (cap > SVG_MAX_ITEMS)
			cap = SVG_MAX_ITEMS;
		nv = realloc(g->v, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		g->v = nv;
		g->cap = cap;
	}
	it = &g->v[g->n++];
	*it = (struct svg_item){
		.ts = r->ts, .dur = r->dur, .flow = r->flow, .tid = r->tid, .name = r->name,
		.cat = r->cat, .kind = (uint8_t)kind, .ring = g->src.ring,
		.pid = procs_outpid(&g->ps, r->pid, start_time, r->ts),
	};
	return 0;
}

/* Threads before counters in a process; then by thread or counter name. */
static uint32_t item_key(const struct svg_item *it)
{
	return it->kind == SHMTRACE_KIND_COUNTER ? it->name : it->tid;
}

static int cmp_item(const void *pa, const void *pb)
{
	const struct svg_item *a = pa, *b = pb;
	int ca = a->kind == SHMTRACE_KIND_COUNTER, cb = b->kind == SHMTRACE_KIND_COUNTER;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (ca != cb)
		return ca - cb;
	if (item_key(a) != item_key(b))
		return item_key(a) < item_key(b) ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	/* the outer of two spans starting together comes first */
	if (a->kind == SHMTRACE_KIND_SPAN && b->kind == SHMTRACE_KIND_SPAN && a->dur != b->dur)
		return a->dur > b->dur ? -1 : 1;
	return (a->kind == SHMTRACE_KIND_SPAN) ? -1 : (b->kind == SHMTRACE_KIND_SPAN);
}

struct proc_order {
	uint32_t pid;
	uint64_t first;
	size_t lane;
	size_t nlanes;
};

static int cmp_porder(const void *pa, const void *pb)
{
	const struct proc_order *a = pa, *b = pb;

	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	return a->pid < b->pid ? -1 : a->pid > b->pid;
}

/* Groups the sorted items into lanes, nests them and lays the lanes out;
 * processes are ordered by their first record in the window, so a
 * request reads from top to bottom. */
static int layout(struct svg *g, struct proc_order **porder, size_t *nproc)
{
	struct proc_order *po;
	struct lane *sorted;
	size_t np = 0, k = 0;
	double y = TRACKS_Y;

	qsort(g->v, g->n, sizeof(*g->v), cmp_item);
	g->lanes = calloc(g->n ? g->n : 1, sizeof(*g->lanes));
	po = calloc(g->n ? g->n : 1, sizeof(*po));
	if (!g->lanes || !po) {
		free(po);
		return -ENOMEM;
	}
	for (size_t i = 0; i < g->n;) {
		struct lane *l = &g->lanes[g->nlanes++];
		size_t j = i;

		l->pid = g->v[i].pid;
		l->counter = g->v[i].kind == SHMTRACE_KIND_COUNTER;
		l->key = item_key(&g->v[i]);
		while (j < g->n && g->v[j].pid == l->pid && item_key(&g->v[j]) == l->key &&
		       (g->v[j].kind == SHMTRACE_KIND_COUNTER) == l->counter)
			j++;
		l->first = i;
		l->n = j - i;
		if (l->counter) {
			l->vmin = l->vmax = (int64_t)g->v[i].dur;
			for (size_t m = i; m < j; m++) {
				int64_t val = (int64_t)g->v[m].dur;

				l->vmin = val < l->vmin ? val : l->vmin;
				l->vmax = val > l->vmax ? val : l->vmax;
			}
		} else {
			l->depth = svg_nest(&g->v[i], j - i);
		}
		if (!np || po[np - 1].pid != l->pid)
			po[np++] = (struct proc_order){ .pid = l->pid, .first = UINT64_MAX,
							.lane = g->nlanes - 1 };
		po[np - 1].nlanes++;
		for (size_t m = i; m < j; m++)
			if (g->v[m].ts < po[np - 1].first)
				po[np - 1].first = g->v[m].ts;
		i = j;
	}
	qsort(po, np, sizeof(*po), cmp_porder);
	/* lanes reordered by process; items keep pointing at them by index */
	sorted = calloc(g->nlanes ? g->nlanes : 1, sizeof(*sorted));
	if (!sorted) {
		free(po);
		return -ENOMEM;
	}
	for (size_t p = 0; p < np; p++) {
		y += p ? PROC_GAP : 0;
		y += PROC_H;
		for (size_t m = 0; m < po[p].nlanes; m++) {
			struct lane *l = &sorted[k];

			*l = g->lanes[po[p].lane + m];
			l->y = y;
			l->h = l->counter ? COUNTER_H : (l->depth + 1) * ROW_H + 2 * LANE_PAD;
			y += l->h;
			for (size_t q = l->first; q < l->first + l->n; q++)
				g->v[q].lane = (uint32_t)k;
			k++;
		}
		po[p].lane = k - po[p].nlanes;
	}
	free(g->lanes);
	g->lanes = sorted;
	g->height = y + 24;
	*porder = po;
	*nproc = np;
	return 0;
}

/* ------------------------------------------------------------ drawing */

static double xof(const struct svg *g, uint64_t t)
{
	double span = (double)(g->wto - g->wfrom);

	if (t <= g->wfrom)
		return g->x0;
	if (t >= g->wto)
		return g->x1;
	return g->x0 + (double)(t - g->wfrom) * (g->x1 - g->x0) / span;
}

/* Tableau 10: distinct, calm, and readable with either text colour. */
static const char *const palette[] = {
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
};
/* 1 where the colour is light enough for dark text */
static const unsigned char light[] = { 0, 1, 0, 1, 0, 1, 0, 1, 0, 1 };

/* The same name gets the same colour in every picture: hash the text,
 * not the string id, which depends on interning order. */
static unsigned colour_of(struct svg *g, uint16_t name)
{
	size_t len;
	const char *s = source_string(&g->src, name, &len);
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h % (sizeof(palette) / sizeof(palette[0]));
}

/* Dark enough to read over any span: one per flow, so each request can
 * be followed through a busy window. */
static const char *const arrow_col[] = {
	"#08519c", "#a63603", "#6a1b9a", "#1b7837", "#c51b7d", "#01665e", "#7f2704", "#252525",
};

static void put_text(struct svg *g, const char *s, size_t len, size_t maxchars)
{
	char buf[1024];

	if (maxchars > 150)
		maxchars = 150;
	svg_escape(buf, sizeof(buf), s, len, maxchars);
	fputs(buf, g->f);
}

static void put_cstr(struct svg *g, const char *s, double width)
{
	put_text(g, s, strlen(s), width > 0 ? (size_t)(width / CHAR_W) : 0);
}

static void put_header(struct svg *g)
{
	char a[32], b[32], c[32];

	fprintf(g->f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" height=\"%.0f\" "
		"viewBox=\"0 0 %u %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
		"font-size=\"11\">\n"
		"<style>.s{stroke:#fff;stroke-width:0.5}.l{fill:#fff;font-size:10px}"
		".d{fill:#222;font-size:10px}.g{stroke:#e4e4e4;stroke-width:1}"
		".a{fill:none;stroke-width:1.3;stroke-opacity:0.85}"
		".t{fill:#555;font-size:10px}.p{font-weight:bold;fill:#222}.n{fill:#333}</style>\n"
		"<defs>"
		"<clipPath id=\"plot\"><rect x=\"%.1f\" y=\"0\" width=\"%.1f\" height=\"%.0f\"/>"
		"</clipPath></defs>\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
		g->width, g->height, g->width, g->height, g->x0 - 1, g->x1 - g->x0 + 2, g->height);
	/* one arrowhead per arrow colour: markers cannot take the path's */
	fputs("<defs>", g->f);
	for (size_t i = 0; i < sizeof(arrow_col) / sizeof(arrow_col[0]); i++)
		fprintf(g->f, "<marker id=\"ah%zu\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" "
			"markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\">"
			"<path d=\"M0,0L10,5L0,10z\" fill=\"%s\"/></marker>", i, arrow_col[i]);
	fputs("</defs>\n", g->f);
	fmt_dur(a, sizeof(a), g->wfrom - g->t0, FMT_DUR_LABEL);
	fmt_dur(b, sizeof(b), g->wto - g->t0, FMT_DUR_LABEL);
	fmt_dur(c, sizeof(c), g->tend - g->t0, FMT_DUR_LABEL);
	fputs("<text x=\"8\" y=\"18\" font-size=\"13\" class=\"p\">shmtrace: ", g->f);
	put_cstr(g, g->src.name, 60 * CHAR_W);
	fprintf(g->f, "</text>\n<text x=\"8\" y=\"34\" class=\"t\">window %s to %s of %s, "
		"%zu records in it", a, b, c, g->n);
	if (g->skipped)
		fprintf(g->f, ", %llu more left out", (unsigned long long)g->skipped);
	if (g->narrows > MAX_ARROWS)
		fprintf(g->f, ", %llu flow arrows not drawn (zoom in)",
			(unsigned long long)g->narrows);
	{
		const struct source_loss *l = &g->src.loss;
		uint64_t lost = l->dropped + l->overwritten + l->lock_timeouts + l->torn;

		if (lost)
			fprintf(g->f, ", %llu records lost", (unsigned long long)lost);
	}
	fputs("</text>\n", g->f);
}

/* Round tick spacing: 1, 2 or 5 times a power of ten, about 10 ticks. */
static void put_axis(struct svg *g)
{
	uint64_t span = g->wto - g->wfrom, step = 0, first;
	int dec = 0;

	for (uint64_t p = 1; !step; p *= 10)
		for (unsigned m = 1; m <= 5 && !step; m += m == 1 ? 1 : 3)
			if (span / (m * p) <= 12)
				step = m * p;
	for (uint64_t s = step; s < 1000000 && dec < 6; s *= 10)
		dec++;
	first = (g->wfrom - g->t0 + step - 1) / step * step;
	fprintf(g->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n",
		g->x0, AXIS_Y, g->x1, AXIS_Y);
	for (uint64_t t = first; g->t0 + t <= g->wto; t += step) {
		double x = xof(g, g->t0 + t);

		/* labels at the edges stay inside the plot */
		const char *anchor = x - g->x0 < 30 ? "start" : g->x1 - x < 30 ? "end" : "middle";

		fprintf(g->f, "<line class=\"g\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.0f\"/>"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" class=\"t\">%.*f ms</text>\n",
			x, AXIS_Y - 4, x, g->height - 20, x, AXIS_Y - 7, anchor, dec, (double)t / 1e6);
	}
}

static void put_tracks(struct svg *g, const struct proc_order *po, size_t np)
{
	for (size_t p = 0; p < np; p++) {
		const struct lane *l0 = &g->lanes[po[p].lane];
		const struct proc *pr = procs_find(&g->ps, po[p].pid);
		char name[160];

		procs_name(&g->ps, po[p].pid, name, sizeof(name));
		if (pr && pr->nk == 1 && pr->pname[0])
			snprintf(name, sizeof(name), "%s (pid %u)", pr->pname, pr->pid);
		fprintf(g->f, "<rect x=\"0\" y=\"%.1f\" width=\"%u\" height=\"%.1f\" fill=\"#eef1f5\"/>"
			"<text x=\"8\" y=\"%.1f\" class=\"p\">",
			l0->y - PROC_H, g->width, PROC_H, l0->y - 7);
		put_cstr(g, name, LABEL_W + 200);
		fputs("</text>\n", g->f);
		for (size_t m = 0; m < po[p].nlanes; m++) {
			const struct lane *l = &l0[m];

			if (m % 2)
				fprintf(g->f, "<rect x=\"0\" y=\"%.1f\" width=\"%u\" height=\"%.1f\" "
					"fill=\"#f8f9fb\"/>\n", l->y, g->width, l->h);
			fprintf(g->f, "<text x=\"20\" y=\"%.1f\" class=\"n\">", l->y + LANE_PAD + 13);
			if (l->counter) {
				size_t len;
				const char *s = source_string(&g->src, (uint16_t)l->key, &len);

				put_text(g, s, len, (size_t)((LABEL_W - 28) / CHAR_W));
			} else {
				const char *tn = procs_thread_name(&g->ps, l->pid, l->key);
				char buf[64];

				if (!tn) {
					snprintf(buf, sizeof(buf), "tid %u", l->key);
					tn = buf;
				}
				put_cstr(g, tn, LABEL_W - 28);
			}
			fputs("</text>\n", g->f);
		}
	}
	fprintf(g->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ccc\"/>\n",
		g->x0 - 1, AXIS_Y, g->x0 - 1, g->height - 20);
}

static double row_y(const struct svg *g, const struct svg_item *it)
{
	return g->lanes[it->lane].y + LANE_PAD + it->depth * ROW_H;
}

static void put_span(struct svg *g, const struct svg_item *it)
{
	double x = xof(g, it->ts), x2 = xof(g, it->ts + it->dur), y = row_y(g, it);
	double w = x2 - x;
	unsigned c = colour_of(g, it->name);
	size_t len;
	const char *s = source_string(&g->src, it->name, &len);
	char d[32];

	if (w < 0.6)
		w = 0.6;	/* a span too short to see still shows it happened */
	fmt_dur(d, sizeof(d), it->dur, FMT_DUR_LABEL);
	/* the white edge that parts neighbours would wash out a thin span */
	fprintf(g->f, "<rect%s x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
		"fill=\"%s\"><title>", w >= 3 ? " class=\"s\"" : "", x, y, w, ROW_H - 1, palette[c]);
	put_text(g, s, len, 100);
	fprintf(g->f, " (%s)</title></rect>\n", d);
	if (w >= 4 * SPAN_CHAR_W) {
		fprintf(g->f, "<text x=\"%.2f\" y=\"%.1f\" class=\"%s\">", x + 3, y + 12.5,
			light[c] ? "d" : "l");
		put_text(g, s, len, (size_t)((w - 6) / SPAN_CHAR_W));
		fputs("</text>\n", g->f);
	}
}

static void put_instant(struct svg *g, const struct svg_item *it)
{
	double x = xof(g, it->ts), y = row_y(g, it) + ROW_H / 2 - 0.5;
	size_t len;
	const char *s = source_string(&g->src, it->name, &len);

	fprintf(g->f, "<path d=\"M%.2f,%.1fl5,5l-5,5l-5,-5z\" fill=\"%s\" stroke=\"#222\" "
		"stroke-width=\"0.6\"><title>", x, y - 5, palette[colour_of(g, it->name)]);
	put_text(g, s, len, 100);
	fputs("</title></path>\n", g->f);
}

static void put_counter(struct svg *g, const struct lane *l)
{
	double span = (double)(l->vmax - l->vmin), top = l->y + 4, bottom = l->y + l->h - 3;
	fputs("<path fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"1.3\" d=\"", g->f);
	for (size_t i = l->first; i < l->first + l->n; i++) {
		const struct svg_item *it = &g->v[i];
		double x = xof(g, it->ts);
		double y = span > 0 ? bottom - ((double)((int64_t)it->dur - l->vmin)) / span * (bottom - top)
			     : (top + bottom) / 2;
		if (i == l->first)
			fprintf(g->f, "M%.2f,%.1f", x, y);
		else
			fprintf(g->f, "H%.2fV%.1f", x, y);
	}
	fprintf(g->f, "H%.2f\"/>\n<text x=\"%.1f\" y=\"%.1f\" class=\"t\" text-anchor=\"end\">"
		"max %lld</text>\n", g->x1, g->x1 - 2, top + 8, (long long)l->vmax);
}

static int cmp_flow_idx(const void *pa, const void *pb, void *ctx)
{
	const struct svg_item *v = ctx, *a = &v[*(const size_t *)pa], *b = &v[*(const size_t *)pb];

	if (a->ring != b->ring)
		return a->ring < b->ring ? -1 : 1;
	if (a->flow != b->flow)
		return a->flow < b->flow ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return a->tid < b->tid ? -1 : a->tid > b->tid;
}

/* The slices of flows in the window, sorted by flow and time; counts the
 * arrows between them. */
static int sort_flows(struct svg *g)
{
	g->fidx = malloc((g->n ? g->n : 1) * sizeof(*g->fidx));
	if (!g->fidx)
		return -ENOMEM;
	g->nf = 0;
	for (size_t i = 0; i < g->n; i++)
		if (g->v[i].flow && g->v[i].kind != SHMTRACE_KIND_COUNTER)
			g->fidx[g->nf++] = i;
	qsort_r(g->fidx, g->nf, sizeof(*g->fidx), cmp_flow_idx, g->v);
	g->narrows = 0;
	for (size_t i = 1; i < g->nf; i++)
		g->narrows += g->v[g->fidx[i - 1]].flow == g->v[g->fidx[i]].flow &&
			      g->v[g->fidx[i - 1]].ring == g->v[g->fidx[i]].ring;
	return 0;
}

/* An arrow from the start of each slice of a flow to the start of the
 * next, as Perfetto binds them; slices outside the window are not drawn,
 * so neither are their arrows. Past MAX_ARROWS they would hide everything
 * else (a zoomed-out window), so none are drawn and the title says so. */
static void put_flows(struct svg *g)
{
	if (g->narrows > MAX_ARROWS)
		return;
	for (size_t i = 1; i < g->nf; i++) {
		const struct svg_item *a = &g->v[g->fidx[i - 1]], *b = &g->v[g->fidx[i]];
		double xa, ya, xb, yb, dx;
		unsigned c;

		if (a->flow != b->flow || a->ring != b->ring)
			continue;
		xa = xof(g, a->ts);
		xb = xof(g, b->ts);
		ya = row_y(g, a) + ROW_H / 2;
		yb = row_y(g, b) + ROW_H / 2;
		/* leave the slice rightwards and enter the next from its left */
		dx = (xb - xa) / 2;
		if (dx < 12)
			dx = 12;
		c = (unsigned)((a->flow * 0x9e3779b97f4a7c15ull) >> 61);
		fprintf(g->f, "<path class=\"a\" stroke=\"%s\" marker-end=\"url(#ah%u)\" "
			"d=\"M%.2f,%.1fC%.2f,%.1f %.2f,%.1f %.2f,%.1f\"/>\n",
			arrow_col[c], c, xa, ya, xa + dx, ya, xb - dx, yb, xb, yb);
	}
}

static int draw(struct svg *g)
{
	struct proc_order *po = NULL;
	double painted[64];	/* right edge of the paint on each row of a lane */
	size_t np = 0;
	int ret;

	g->x0 = LABEL_W;
	g->x1 = g->width - RIGHT_PAD;
	ret = layout(g, &po, &np);
	if (ret == 0)
		ret = sort_flows(g);
	if (ret < 0) {
		free(po);
		return ret;
	}
	if (g->narrows > MAX_ARROWS)
		warnx_("%llu flow arrows in the window, more than %u: none drawn; "
		       "narrow it with --from/--to", (unsigned long long)g->narrows, MAX_ARROWS);
	put_header(g);
	put_axis(g);
	put_tracks(g, po, np);
	if (!g->n)
		fprintf(g->f, "<text x=\"%.1f\" y=\"%.1f\" class=\"t\">no records in this window"
			"</text>\n", g->x0 + 8, TRACKS_Y + 14);
	fputs("<g clip-path=\"url(#plot)\">\n", g->f);
	for (size_t i = 0; i < g->n; i++) {
		const struct svg_item *it = &g->v[i];

		if (!i || it->lane != g->v[i - 1].lane)
			for (size_t d = 0; d < sizeof(painted) / sizeof(painted[0]); d++)
				painted[d] = 0;
		if (it->kind == SHMTRACE_KIND_SPAN) {
			double x = xof(g, it->ts), x2 = xof(g, it->ts + it->dur);

			/* a sliver inside pixels already painted on its row adds
			 * nothing to see, only bytes: a long window stays small
			 * (an arrow's end is always drawn) */
			if (it->depth < 64 && !it->flow && x2 - x < 1 && x2 <= painted[it->depth])
				continue;
			put_span(g, it);
			if (it->depth < 64 && (x2 > x + 0.6 ? x2 : x + 0.6) > painted[it->depth])
				painted[it->depth] = x2 > x + 0.6 ? x2 : x + 0.6;
		} else if (it->kind == SHMTRACE_KIND_INSTANT) {
			put_instant(g, it);
		}
	}
	for (size_t l = 0; l < g->nlanes; l++)
		if (g->lanes[l].counter)
			put_counter(g, &g->lanes[l]);
	put_flows(g);
	fputs("</g>\n</svg>\n", g->f);
	free(po);
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
	if (!g->any) {
		snprintf(err, errlen, "%s: no records%s", g->src.name,
			 g->flt.npids ? " of the given pids" : "");
		return -ENODATA;
	}
	len = g->tend - g->t0;
	if (g->flt.has_from && g->flt.has_to) {
		g->wfrom = g->t0 + g->flt.from;
		g->wto = g->t0 + g->flt.to;
	} else if (g->flt.has_from) {
		g->wfrom = g->t0 + g->flt.from;
		g->wto = g->wfrom + DEFAULT_SPAN;
	} else if (g->flt.has_to) {
		g->wfrom = g->t0;
		g->wto = g->t0 + g->flt.to;
	} else if (len <= DEFAULT_SPAN) {
		g->wfrom = g->t0;
		g->wto = g->tend;
	} else {
		/* a little before the first flow, so its first slice is not on the edge */
		uint64_t start = g->any_flow ? g->first_flow : g->t0;

		start = start - g->t0 > DEFAULT_SPAN / 50 ? start - DEFAULT_SPAN / 50 : g->t0;
		g->wfrom = start;
		g->wto = start + DEFAULT_SPAN;
	}
	/* past the last record there is nothing to draw: do not squash it */
	if (g->wto > g->tend && g->tend > g->wfrom)
		g->wto = g->tend;
	if (g->wto <= g->wfrom)
		g->wto = g->wfrom + 1;
	ret = source_records(&g->src, on_keep, g, err, errlen);
	if (ret < 0)
		return ret;
	if (g->skipped)
		warnx_("%llu records in the window were not drawn (at most %u are); "
		       "narrow it with --from/--to or --pid", (unsigned long long)g->skipped,
		       SVG_MAX_ITEMS);
	err[0] = 0;
	return draw(g);
}

static int svg_option(void *ctx, int c, const char *arg)
{
	struct svg *g = ctx;
	unsigned long w;
	char *end;

	if (c != 'w')
		return cli_usage_error("svg", "unknown option");
	errno = 0;
	w = strtoul(arg, &end, 10);
	if (errno || *end || arg[0] < '0' || arg[0] > '9' || w < 400 || w > 20000)
		return cli_usage_error("svg", "invalid width '%s' (400 to 20000 px)", arg);
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
