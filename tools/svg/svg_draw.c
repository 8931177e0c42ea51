/* SPDX-License-Identifier: MIT */
/*
 * svg_draw.c - the drawing of `shmtrace svg`: header and styles, time axis,
 * track labels, spans, instants, counters and flow arrows, as SVG text.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "hash.h"
#include "svg_int.h"

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

	return fnv1a32(s, len) % (sizeof(palette) / sizeof(palette[0]));
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
		/* records only: lock timeouts are attempts (loss.h) */
		uint64_t lost = shmt_loss_records(&l->counters);

		if (l->corrupt)
			fputs(", loss counters corrupt (not reported)", g->f);
		else if (lost)
			fprintf(g->f, ", %llu records lost", (unsigned long long)lost);
	}
	fputs("</text>\n", g->f);
}

/* Round tick spacing: 1, 2 or 5 times a power of ten, about 10 ticks. */
static void put_axis(struct svg *g)
{
	uint64_t span = g->wto - g->wfrom, step = 0, first, from, last, ticks;
	int dec = 0;

	for (uint64_t p = 1; !step; p *= 10)
		for (unsigned m = 1; m <= 5 && !step; m += m == 1 ? 1 : 3)
			if (span / (m * p) <= 12)
				step = m * p;
	for (uint64_t s = step; s < 1000000 && dec < 6; s *= 10)
		dec++;
	/* ticks relative to t0, at multiples of step in [from, last]: counted
	 * so that nothing wraps when the window ends near 2^64 (a forged time) */
	from = g->wfrom > g->t0 ? g->wfrom - g->t0 : 0;
	last = g->wto > g->t0 ? g->wto - g->t0 : 0;
	first = from / step * step;
	if (first < from && UINT64_MAX - first >= step)
		first += step;
	ticks = first < from || first > last ? 0 : (last - first) / step + 1;
	fprintf(g->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n",
		g->x0, AXIS_Y, g->x1, AXIS_Y);
	for (uint64_t k = 0; k < ticks; k++) {
		uint64_t t = first + k * step;
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
	double x = xof(g, it->ts), x2 = xof(g, shmt_time_end(it->ts, it->dur)), y = row_y(g, it);
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

/* Where a slice is in its flow, and where its arrows meet it: its start,
 * or its end when its step receives (flows.h). */
static uint64_t flow_at(const struct svg_item *it)
{
	if (!(it->role & SHMT_ROLE_RECEIVES) || it->kind != SHMTRACE_KIND_SPAN)
		return it->ts;
	return shmt_time_end(it->ts, it->dur);
}

/* Whether b, after a in the sorted slices, is a's next step. */
static bool next_step(const struct svg_item *a, const struct svg_item *b)
{
	return a->flow == b->flow && a->ring == b->ring && !(a->role & SHMT_ROLE_TERMINATES);
}

static int cmp_flow_idx(const void *pa, const void *pb, void *ctx)
{
	const struct svg_item *v = ctx, *a = &v[*(const size_t *)pa], *b = &v[*(const size_t *)pb];

	if (a->ring != b->ring)
		return a->ring < b->ring ? -1 : 1;
	if (a->flow != b->flow)
		return a->flow < b->flow ? -1 : 1;
	if (flow_at(a) != flow_at(b))
		return flow_at(a) < flow_at(b) ? -1 : 1;
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
		g->narrows += next_step(&g->v[g->fidx[i - 1]], &g->v[g->fidx[i]]);
	return 0;
}

/* An arrow from the start of each slice of a flow to the start of the
 * next, as Perfetto binds them (the end of a slice whose step receives,
 * where the exports put its step); none after a step that ends its flow;
 * slices outside the window are not drawn,
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

		if (!next_step(a, b))
			continue;
		xa = xof(g, flow_at(a));
		xb = xof(g, flow_at(b));
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

int svg_draw(struct svg *g)
{
	struct proc_order *po = NULL;
	double painted[64];	/* right edge of the paint on each row of a lane */
	size_t np = 0;
	int ret;

	g->x0 = LABEL_W;
	g->x1 = g->width - RIGHT_PAD;
	ret = svg_layout(g, &po, &np);
	if (ret == 0)
		ret = sort_flows(g);
	if (ret < 0) {
		free(po);
		return ret;
	}
	if (g->narrows > MAX_ARROWS)
		source_warnx("%llu flow arrows in the window, more than %u: none drawn; "
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
			double x = xof(g, it->ts), x2 = xof(g, shmt_time_end(it->ts, it->dur));

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
