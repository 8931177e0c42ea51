/* SPDX-License-Identifier: MIT */
/*
 * split.c - `shmtrace export --split`: the export run once per piece,
 * each piece a file of its own named after -o's, written whole through
 * a temporary (cmd_create()) as every export is.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporters.h"
#include "fmt.h"
#include "split.h"

int split_name(const char *out, uint64_t i, uint64_t n, char *buf, size_t len)
{
	const char *base = strrchr(out, '/'), *dot;
	int width = 3, w;

	base = base ? base + 1 : out;
	/* ".hidden" is a name, not an extension */
	dot = strrchr(base, '.');
	if (!dot || dot == base)
		dot = out + strlen(out);
	for (uint64_t m = n ? n - 1 : 0; m >= 1000; m /= 10)
		width++;
	w = snprintf(buf, len, "%.*s.%0*" PRIu64 "%s", (int)(dot - out), out, width, i, dot);
	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

int split_export(struct source *src, struct pick *pk, struct cmd *c)
{
	const char *out = c->out;
	char name[PATH_MAX], first[PATH_MAX];
	int rc = EXIT_OK;

	if (pk->npieces > SPLIT_MAX_PIECES) {
		fmt_dur(name, sizeof(name), pk->split_ns, FMT_DUR_TABLE);
		return cli_usage_error("export", "--split %s makes %" PRIu64 " pieces of the trace "
				       "(at most %u): give a longer one", name, pk->npieces,
				       SPLIT_MAX_PIECES);
	}
	if (split_name(out, pk->npieces - 1, pk->npieces, name, sizeof(name)) < 0)
		return cli_usage_error("export", "-o %s: too long to number the pieces", out);
	/* a piece is renamed over whatever has its name: none may be an
	 * input (-o t.cap with t.000.cap given), checked before any is written */
	for (uint64_t i = 0; i < pk->npieces; i++) {
		split_name(out, i, pk->npieces, name, sizeof(name));
		if ((rc = cli_check_output("export", name, c->files, (int)c->nfiles)))
			return rc;
	}
	for (uint64_t i = 0; i < pk->npieces && rc == EXIT_OK; i++) {
		split_name(out, i, pk->npieces, name, sizeof(name));
		if (i == 0)
			memcpy(first, name, sizeof(first));
		pick_piece(pk, i);
		c->out = name;
		rc = chrome_export(src, pk, c);
		if (rc != EXIT_OK && i)
			fprintf(stderr, "shmtrace export: %s: piece %" PRIu64 " of %" PRIu64 " not "
				"written; the %" PRIu64 " before it were\n", name, i, pk->npieces, i);
	}
	c->out = out;
	if (rc != EXIT_OK)
		return rc;
	fprintf(stderr, "shmtrace export: %" PRIu64 " %s written: %s%s%s\n", pk->npieces,
		pk->npieces == 1 ? "piece" : "pieces", first, pk->npieces > 1 ? " to " : "",
		pk->npieces > 1 ? name : "");
	if (!source_complete(src))
		fprintf(stderr, "shmtrace export: written from an incomplete capture (see above)\n");
	return EXIT_OK;
}
