/* SPDX-License-Identifier: MIT */
/*
 * svg.h - the pieces of `shmtrace svg` that tests check on their own: XML
 * text escaping and nesting depth of the spans on one thread.
 */
#ifndef SHMTRACE_SVG_H
#define SHMTRACE_SVG_H

#include <stddef.h>
#include <stdint.h>

/* At most this many records are drawn; more in the window are counted,
 * skipped and reported with a warning, so memory stays bounded. */
#define SVG_MAX_ITEMS 200000u

/* One record kept for drawing. */
struct svg_item {
	uint64_t ts, dur;	/* dur is a counter's value for counters */
	uint64_t flow;		/* its id (shmtrace_flow_id()), 0 = none */
	uint32_t pid, tid;	/* pid as shown (after reuse remapping) */
	uint32_t lane;		/* index of the row group it is drawn in */
	uint16_t name, cat;
	uint16_t depth;		/* nesting depth on its thread, 0 = outermost */
	uint8_t kind;
	uint8_t role;		/* its step's role in the flow (SHMT_ROLE_*) */
	uint32_t ring;		/* the source's ring: flow ids are per ring */
};

/*
 * Writes s[0..len) into out (NUL-terminated, at most outlen bytes) as XML
 * character data: & < > " ' escaped, invalid UTF-8 and control characters
 * replaced by U+FFFD. At most maxchars characters are kept; when the text
 * is longer it is cut to maxchars - 1 and ends with an ellipsis. Returns
 * the number of characters kept (0 when even one does not fit).
 */
size_t svg_escape(char *out, size_t outlen, const char *s, size_t len, size_t maxchars);

/*
 * Sets depth for spans v[0..n) of one thread, sorted by ts and longest
 * first: a span inside an earlier one that has not ended yet is one deeper.
 * Returns the greatest depth. Non-span kinds get depth 0.
 */
unsigned svg_nest(struct svg_item *v, size_t n);

#endif
