/* SPDX-License-Identifier: MIT */
/*
 * svg_int.h - what the parts of `shmtrace svg` share: the command's state,
 * its lanes and the layout's measures, in px.
 */
#ifndef SHMTRACE_SVG_INT_H
#define SHMTRACE_SVG_INT_H

#include <stdbool.h>
#include <stdio.h>

#include "cli.h"
#include "procs.h"
#include "source.h"
#include "svg.h"

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

/* A process's place in the picture: processes are ordered by their first
 * record in the window. */
struct proc_order {
	uint32_t pid;
	uint64_t first;
	size_t lane;
	size_t nlanes;
};

/* Sorts the kept items into lanes, nests them and places the lanes;
 * *porder gets the processes in drawing order (the caller frees it). */
int svg_layout(struct svg *g, struct proc_order **porder, size_t *nproc);

/* Lays out and writes the whole picture to g->f. Returns 0 or -errno. */
int svg_draw(struct svg *g);

#endif /* SHMTRACE_SVG_INT_H */
