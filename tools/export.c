/* SPDX-License-Identifier: MIT */
/*
 * export.c - `shmtrace export`, its command line: capture files or a ring
 * to Chrome Trace Event JSON (tools/chrome/), to OTLP (tools/otlp/), or to
 * Perfetto's protobuf trace (tools/perfetto/). Only flow records are kept
 * in memory; spans go straight to the output.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exporters.h"
#include "parse.h"
#include "split.h"

static const char export_usage[] =
	"Usage: shmtrace export CAPTURE... -o OUT [options]\n"
	"       shmtrace export --ring NAME -o OUT [options]\n"
	"       shmtrace export CAPTURE... --ring NAME -o OUT [options]\n"
	"       shmtrace export CAPTURE... --format otlp --otlp-endpoint URL [options]\n"
	"Converts capture files (all parts of one run, any order; captures of several\n"
	"rings or hosts are merged onto one time line) or a ring left in /dev/shm to\n"
	"Chrome Trace Event JSON (chrome://tracing, Perfetto, DevTools), to\n"
	"OpenTelemetry (OTLP/JSON) spans, or to Perfetto's protobuf trace format.\n"
	"\n"
	"  -o, --output FILE  write the trace to FILE ('-' for stdout), through a\n"
	"                     temporary renamed into place; never through a symlink\n"
	"  -f, --format F     chrome (default), otlp: OTLP/JSON ExportTraceServiceRequest\n"
	"                     objects, one per line, each at most --batch-size bytes;\n"
	"                     spans and instants only (counters are not exported), a\n"
	"                     span the child of the span around it on its thread, each\n"
	"                     flow one trace holding what ran in and around its spans;\n"
	"                     or perfetto: Perfetto's protobuf trace (.pftrace) for\n"
	"                     traces too large for JSON, for ui.perfetto.dev or\n"
	"                     trace_processor; it reads the input twice\n"
	"      --otlp-endpoint URL  send the OTLP requests to URL/v1/traces, or to URL\n"
	"                     when it ends in /v1/traces (http:// only), instead of,\n"
	"                     or as well as, writing them to -o\n"
	"      --service NAME service.name of every process (default: its name)\n"
	"      --flows-only   OTLP: only the spans of flows, each the child of the one\n"
	"                     before it\n"
	"      --batch-size N OTLP: bytes per request (default 4M; 64k..64M)\n"
	"      --retries N    OTLP/HTTP: attempts per request on 429/502/503/504 or a\n"
	"                     refused connection, with back-off (default 6)\n"
	"      --clock-offset HOST=NS  add NS (signed, ns) to the times of HOST's\n"
	"                     captures after aligning hosts by wall clock (repeatable;\n"
	"                     one that would move a time before 0 is refused)\n"
	"  -r, --ring NAME    read the ring /dev/shm/NAME directly, read-only; with\n"
	"                     captures, what it holds beyond them (the ring they came from)\n"
	"  -p, --pid PID      only records of PID (repeatable), and every record of the\n"
	"                     flows they are in: the other processes' steps of those\n"
	"                     flows, so that their arrows stay whole\n"
	"      --from T       only records starting at or after T\n"
	"      --to T         only records starting at or before T\n"
	"                     (T is relative to the earliest record, of the --pid ones\n"
	"                     if given: 1.5s, 200ms, 300us), and every record of their\n"
	"                     flows, before or after the window\n"
	"      --split D      Chrome: write OUT as one file per D of time (10s, 500ms):\n"
	"                     trace.json as trace.000.json, trace.001.json, ...; a flow\n"
	"                     goes whole into the file its first selected record is in\n"
	"  -h, --help         show this help\n"
	"  -V, --version      show the version\n";

/* HOST=NS, NS a signed 64-bit integer of nanoseconds. */
static int parse_offset(const char *arg, char *host, size_t hostlen, int64_t *ns)
{
	const char *eq = strrchr(arg, '=');

	if (!eq || eq == arg || (size_t)(eq - arg) >= hostlen ||
	    parse_i64(eq + 1, INT64_MIN, INT64_MAX, ns) < 0)
		return -EINVAL;
	memcpy(host, arg, (size_t)(eq - arg));
	host[eq - arg] = 0;
	return 0;
}

static const struct num_spec batch_spec = { "--batch-size", 64u << 10, 64u << 20, PARSE_SUFFIX, "bytes" };
static const struct num_spec retries_spec = { "--retries", 1, 100, 0, NULL };

#define MAX_OFFSETS 16

/* What export's own options set, and what it reads. */
struct export_opts {
	struct source src;
	struct filter flt;		/* window relative to t0 = earliest record */
	struct pick pick;		/* what flt and split_ns select */
	uint64_t split_ns;		/* --split, 0 when not given */
	struct otlp_opts oo;
	bool otlp, perfetto;
	bool otlp_sizing;		/* --batch-size or --retries given */
	char offhost[MAX_OFFSETS][64];
	int64_t offns[MAX_OFFSETS];
	const char *offarg[MAX_OFFSETS];
	size_t noff;
};

static int export_option(void *ctx, int c, const char *arg)
{
	struct export_opts *x = ctx;

	switch (c) {
	case 'f':
		x->otlp = !strcmp(arg, "otlp");
		x->perfetto = !strcmp(arg, "perfetto");
		if (!x->otlp && !x->perfetto && strcmp(arg, "chrome"))
			return cli_usage_error("export", "unknown format '%s' (chrome, otlp or perfetto)",
					       arg);
		return 0;
	case 'E':
		x->oo.endpoint = arg;
		return 0;
	case 'S':
		x->oo.service = arg;
		return 0;
	case 'L':
		x->oo.flows_only = true;
		return 0;
	case 'B':
	case 'R': {
		char err[256];
		uint64_t v;

		if (parse_num(arg, c == 'B' ? &batch_spec : &retries_spec, &v, err, sizeof(err)) < 0)
			return cli_usage_error("export", "%s", err);
		if (c == 'B')
			x->oo.batch_bytes = (size_t)v;
		else
			x->oo.retries = (unsigned)v;
		x->otlp_sizing = true;
		return 0;
	}
	case 'D':
		if (parse_duration(arg, &x->split_ns) < 0 || !x->split_ns)
			return cli_usage_error("export", "invalid length '%s' for --split (try 10s, "
					       "500ms; more than 0)", arg);
		return 0;
	case 'C':
		if (x->noff == MAX_OFFSETS ||
		    parse_offset(arg, x->offhost[x->noff], sizeof(x->offhost[0]), &x->offns[x->noff]) < 0)
			return cli_usage_error("export", "--clock-offset '%s': need HOST=NS, NS from "
					       "-9223372036854775808 to 9223372036854775807 (at most "
					       "%d of them)", arg, MAX_OFFSETS);
		x->offarg[x->noff] = arg;
		x->noff++;
		return 0;
	default:
		return cli_usage_error("export", "unknown option");
	}
}

/* The hosts of the inputs, "a, b", into buf. */
static void hosts_of(const struct source *src, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (uint32_t h = 0; h < src->nhosts && n < len; h++)
		n += (size_t)snprintf(buf + n, len - n, "%s'%s'", h ? ", " : "", src->hosts[h]);
}

/* Says how the inputs' clocks are joined; returns 0, or EXIT_USAGE after
 * saying what is wrong with a --clock-offset: a host no input comes from
 * (a usage error found once the inputs' headers are read, as an output
 * that is an input is), or an offset that would wrap a time. */
static int export_clocks(struct source *src, const struct export_opts *x)
{
	char hosts[512];

	for (size_t i = 0; i < x->noff; i++) {
		int ret = source_clock_offset(src, x->offhost[i], x->offns[i]);

		if (ret == -ERANGE)
			return cli_usage_error("export", "--clock-offset '%s': would move records of "
					       "host '%s' before time 0 or past 2^63 ns (the times "
					       "are unsigned ns of its clock, wall-clock aligned)",
					       x->offarg[i], x->offhost[i]);
		if (ret < 0) {
			hosts_of(src, hosts, sizeof(hosts));
			return cli_usage_error("export", "--clock-offset '%s': no input comes from host "
					       "'%s' (the inputs' hosts: %s)", x->offarg[i],
					       x->offhost[i], hosts);
		}
	}
	if (src->nhosts > 1)
		fprintf(stderr, "shmtrace export: the inputs come from %u hosts; their times are "
			"aligned by each capture's wall clock\n", src->nhosts);
	else if (src->nrings > 1)
		/* not an error (two runs side by side is a fair thing to
		 * look at), but flows and names are kept apart per ring */
		fprintf(stderr, "shmtrace export: the inputs come from %u different rings; "
			"flows are joined only within a ring, or by a global flow id\n",
			src->nrings);
	return 0;
}

/* Reads what --pid, --from/--to and --split select (pick.h). Returns 0,
 * or EXIT_RUNTIME after saying why not: the input could not be read, or
 * none of the --pid processes is in it. */
static int export_pick(struct export_opts *x)
{
	char err[768] = "";
	int ret = pick_prepare(&x->pick, &x->src, &x->flt, x->split_ns, err, sizeof(err));

	if (ret < 0)
		return cli_runtime_error("export", "%s", err[0] ? err : strerror(-ret));
	if (pick_pids_missing(&x->flt, x->pick.any, &x->src, err, sizeof(err)))
		return cli_runtime_error("export", "%s", err);
	return 0;
}

int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "otlp-endpoint", required_argument, NULL, 'E' },
		{ "service", required_argument, NULL, 'S' },
		{ "flows-only", no_argument, NULL, 'L' },
		{ "batch-size", required_argument, NULL, 'B' },
		{ "retries", required_argument, NULL, 'R' },
		{ "clock-offset", required_argument, NULL, 'C' },
		{ "split", required_argument, NULL, 'D' },
		{ NULL, 0, NULL, 0 },
	};
	struct export_opts *x = calloc(1, sizeof(*x));
	struct cmd c = {
		.name = "export", .usage = export_usage, .shortopts = "f:", .longopts = opts,
		.option = export_option, .ctx = x,
	};
	int rc;

	if (!x)
		return cli_runtime_error("export", "out of memory");
	x->oo.batch_bytes = OTLP_BATCH_DEFAULT;
	x->oo.retries = OTLP_RETRIES_DEFAULT;
	c.flt = &x->flt;
	c.src = &x->src;
	rc = cmd_parse(&c, argc, argv);
	if (rc != CMD_CONTINUE)
		goto done;
	if (!x->otlp && (x->oo.endpoint || x->oo.service || x->oo.flows_only || x->otlp_sizing)) {
		rc = cli_usage_error("export", "--otlp-endpoint, --service, --flows-only, --batch-size "
				     "and --retries need --format otlp");
		goto done;
	}
	if (x->split_ns && (x->otlp || x->perfetto)) {
		rc = cli_usage_error("export", "--split writes Chrome JSON files; not with --format %s",
				     x->otlp ? "otlp" : "perfetto");
		goto done;
	}
	if (x->split_ns && c.out && !strcmp(c.out, "-")) {
		rc = cli_usage_error("export", "--split writes several files: not to stdout ('-o -')");
		goto done;
	}
	rc = x->otlp ? otlp_check(&x->oo) : 0;
	if (rc)
		goto done;
	rc = cmd_open(&c, x->otlp && x->oo.endpoint ? NULL : "use -o FILE, or -o - for stdout");
	if (rc)
		goto done;
	rc = export_clocks(&x->src, x);
	if (rc == 0)
		rc = export_pick(x);
	if (rc == 0 && x->otlp) {
		x->oo.pick = &x->pick;
		x->oo.progress = isatty(STDERR_FILENO);
		rc = otlp_export(&x->src, &x->oo, c.out);
	} else if (rc == 0 && x->split_ns) {
		rc = split_export(&x->src, &x->pick, &c);
	} else if (rc == 0 && x->perfetto) {
		rc = perfetto_export(&x->src, &x->pick, &c);
	} else if (rc == 0) {
		rc = chrome_export(&x->src, &x->pick, &c);
	}
	pick_free(&x->pick);
	source_close(&x->src);
done:
	free(x);
	return rc;
}

