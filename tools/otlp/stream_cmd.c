/* SPDX-License-Identifier: MIT */
/*
 * stream_cmd.c - `shmtrace stream`, its command line: the options of the
 * live stream, which shmtrace-collector --otlp-endpoint passes on as they
 * were given (the one place they are checked), and those the collector
 * adds (--follow, --collector-pid, --ready-fd, --status-fd, --pace-fd).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "stream_int.h"

static const char stream_usage[] =
	"Usage: shmtrace stream CAPTURE --otlp-endpoint URL [options]\n"
	"Sends the spans of a capture (and of its parts CAPTURE.1, ...) to an\n"
	"OpenTelemetry endpoint over OTLP/HTTP, as 'shmtrace export --format otlp'\n"
	"models them, and goes on from where it stopped when run again: a\n"
	"checkpoint beside the capture (.CAPTURE.otlp-checkpoint) says what the\n"
	"endpoint took. With --follow, follows the capture as shmtrace-collector\n"
	"writes it, to the end of its last part; 'shmtrace-collector\n"
	"--otlp-endpoint URL' runs it so.\n"
	"\n"
	"      --otlp-endpoint URL  send to URL/v1/traces, or to URL when it ends in\n"
	"                     /v1/traces (http:// only)\n"
	"      --service NAME service.name of every process (default: its name)\n"
	"      --otlp-header 'NAME=VALUE'  a header sent with every request, for\n"
	"                     authentication (repeatable)\n"
	"      --otlp-protocol P  protobuf (default; application/x-protobuf) or json\n"
	"      --otlp-compression C  gzip (default) or none\n"
	"      --otlp-sample S  all (default); flows: only the spans of flows' traces;\n"
	"                     ratio=R: the traces whose id falls in the fraction R\n"
	"                     (0 to 1), the same traces on every host\n"
	"      --otlp-max-lag SECONDS  skip ahead, counting what is passed over, when\n"
	"                     this far behind the capture (default 600; 0: never)\n"
	"      --otlp-hold SECONDS  how long, on the trace's clock, a span waits for\n"
	"                     the span around it and a flow for its steps (default 5)\n"
	"      --otlp-max-held N  events held for their trees and flows at most, what\n"
	"                     the stream's memory grows with (default 262144;\n"
	"                     1024..16777216): past it, the oldest go as they are\n"
	"      --otlp-batch N spans per request at most (default 8192; 1..65536)\n"
	"      --follow       wait for the capture to grow, until its last part ends\n"
	"      --collector-pid PID  follow the parts this collector writes\n"
	"      --ready-fd FD  write \"ready\\n\" to FD once the capture may be written\n"
	"      --status-fd FD write the closing summary to FD instead of stderr\n"
	"      --pace-fd FD   read on when FD last said 'g' (or ended), wait while it\n"
	"                     last said 'p' (the collector's drain is behind)\n"
	"  -h, --help         show this help\n"
	"  -V, --version      show the version\n"
	"\n"
	"Exit status: 0 when the capture was sent (or the stream stopped by SIGINT or\n"
	"SIGTERM: run again, it goes on), 1 on a runtime error, 2 on a usage error.\n";

enum { O_ENDPOINT = 256, O_SERVICE, O_HEADER, O_PROTOCOL, O_COMPRESSION, O_SAMPLE, O_MAX_LAG,
       O_HOLD, O_MAX_HELD, O_BATCH, O_FOLLOW, O_COLLECTOR, O_READY, O_STATUS, O_PACE };

static const struct num_spec lag_spec = { "--otlp-max-lag", 0, 86400 * 365, 0, "seconds" };
static const struct num_spec hold_spec = { "--otlp-hold", 0, 3600, 0, "seconds" };
static const struct num_spec held_spec = { "--otlp-max-held", 1024, 1u << 24, 0, "events" };
static const struct num_spec batch_spec = { "--otlp-batch", 1, 65536, 0, "spans" };
static const struct num_spec pid_spec = { "--collector-pid", 1, UINT32_MAX, 0, NULL };
static const struct num_spec fd_spec = { "--ready-fd, --status-fd or --pace-fd", 0, 1000000, 0, NULL };

/* Headers a request sets itself. */
static bool own_header(const char *name, size_t n)
{
	static const char *const own[] = { "host", "content-type", "content-length",
					   "content-encoding", "connection", "transfer-encoding" };

	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (strlen(own[i]) == n && !strncasecmp(name, own[i], n))
			return true;
	return false;
}

/* 'NAME=VALUE' as "NAME: VALUE\r\n" appended to b. */
static int add_header(struct obuf *b, const char *arg)
{
	const char *eq = strchr(arg, '=');
	size_t n = eq ? (size_t)(eq - arg) : 0;

	if (!n || strspn(arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != n)
		return cli_usage_error("stream", "--otlp-header '%s': need NAME=VALUE, NAME of "
				       "letters, digits, '-' and '_'", arg);
	if (strpbrk(eq + 1, "\r\n"))
		return cli_usage_error("stream", "--otlp-header '%.*s': a value is one line",
				       (int)n, arg);
	if (own_header(arg, n))
		return cli_usage_error("stream", "--otlp-header '%.*s': the stream sets that header",
				       (int)n, arg);
	ob_raw(b, arg, n);
	ob_puts(b, ": ");
	ob_puts(b, eq + 1);
	ob_puts(b, "\r\n");
	return b->oom ? cli_runtime_error("stream", "out of memory") : 0;
}

/* ratio=R, R from 0 to 1: the trace ids below R * 2^64 kept. */
static int parse_sample(struct stream_opts *so, const char *arg)
{
	char *end;
	double r;

	if (!strcmp(arg, "all") || !strcmp(arg, "flows")) {
		so->sample = arg[0] == 'a' ? SAMPLE_ALL : SAMPLE_FLOWS;
		return 0;
	}
	if (strncmp(arg, "ratio=", 6) || !arg[6] ||
	    (r = strtod(arg + 6, &end), *end) || !(r >= 0 && r <= 1))
		return cli_usage_error("stream", "--otlp-sample '%s': need all, flows or ratio=R "
				       "with R from 0 to 1", arg);
	so->sample = r >= 1 ? SAMPLE_ALL : SAMPLE_RATIO;
	so->ratio_bound = (uint64_t)(r * 18446744073709551616.0);
	return 0;
}

static int num(const struct num_spec *spec, const char *arg, uint64_t *v)
{
	char err[256];

	return parse_num(arg, spec, v, err, sizeof(err)) < 0 ? cli_usage_error("stream", "%s", err)
							      : 0;
}

/* A descriptor given to read from (write: to write to). */
static int fd_arg(const char *arg, bool write, int *fd)
{
	uint64_t v;
	int rc = num(&fd_spec, arg, &v), fl;

	if (rc)
		return rc;
	fl = fcntl((int)v, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) == (write ? O_RDONLY : O_WRONLY))
		return cli_usage_error("stream", "descriptor %s is not open for %s", arg,
				       write ? "writing" : "reading");
	*fd = (int)v;
	return 0;
}

static int option(struct stream_opts *so, struct obuf *hdr, int c, const char *arg)
{
	uint64_t v = 0;
	int rc = 0;

	switch (c) {
	case O_ENDPOINT: so->endpoint = arg; return 0;
	case O_SERVICE: so->oo.service = arg; return 0;
	case O_HEADER: return add_header(hdr, arg);
	case O_FOLLOW: so->follow = true; return 0;
	case O_SAMPLE: return parse_sample(so, arg);
	case O_READY: return fd_arg(arg, true, &so->ready_fd);
	case O_STATUS: return fd_arg(arg, true, &so->status_fd);
	case O_PACE: return fd_arg(arg, false, &so->pace_fd);
	case O_PROTOCOL:
		if (strcmp(arg, "protobuf") && strcmp(arg, "json"))
			return cli_usage_error("stream", "--otlp-protocol '%s': protobuf or json", arg);
		so->oo.protobuf = arg[0] == 'p';
		return 0;
	case O_COMPRESSION:
		if (strcmp(arg, "gzip") && strcmp(arg, "none"))
			return cli_usage_error("stream", "--otlp-compression '%s': gzip or none", arg);
		so->gzip = arg[0] == 'g';
		return 0;
	case O_MAX_LAG: rc = num(&lag_spec, arg, &v); so->max_lag_ns = v * 1000000000ull; break;
	case O_HOLD: rc = num(&hold_spec, arg, &v); so->hold_ns = v * 1000000000ull; break;
	case O_MAX_HELD: rc = num(&held_spec, arg, &v); so->held_max = (uint32_t)v; break;
	case O_BATCH: rc = num(&batch_spec, arg, &v); so->batch_spans = (uint32_t)v; break;
	case O_COLLECTOR: rc = num(&pid_spec, arg, &v); so->collector_pid = (uint32_t)v; break;
	default: return cli_usage_error("stream", "unknown option");
	}
	return rc;
}

/* The command line into so (hdr holds its headers). Returns -1 to go on,
 * or the exit code. */
static int parse(int argc, char **argv, struct stream_opts *so, struct obuf *hdr)
{
	static const struct option opts[] = {
		{ "otlp-endpoint", required_argument, NULL, O_ENDPOINT },
		{ "service", required_argument, NULL, O_SERVICE },
		{ "otlp-header", required_argument, NULL, O_HEADER },
		{ "otlp-protocol", required_argument, NULL, O_PROTOCOL },
		{ "otlp-compression", required_argument, NULL, O_COMPRESSION },
		{ "otlp-sample", required_argument, NULL, O_SAMPLE },
		{ "otlp-max-lag", required_argument, NULL, O_MAX_LAG },
		{ "otlp-hold", required_argument, NULL, O_HOLD },
		{ "otlp-max-held", required_argument, NULL, O_MAX_HELD },
		{ "otlp-batch", required_argument, NULL, O_BATCH },
		{ "follow", no_argument, NULL, O_FOLLOW },
		{ "collector-pid", required_argument, NULL, O_COLLECTOR },
		{ "ready-fd", required_argument, NULL, O_READY },
		{ "status-fd", required_argument, NULL, O_STATUS },
		{ "pace-fd", required_argument, NULL, O_PACE },
		{ NULL, 0, NULL, 0 },
	};
	static const struct cli_opts co = { "stream", stream_usage, ":", opts };
	char err[512];
	int c, rc = EXIT_OK;

	cli_getopt_start();
	while ((c = cli_getopt(&co, argc, argv, &rc)) > 0)
		if ((rc = option(so, hdr, c, optarg)) != 0)
			return rc;
	if (c == CLI_OPT_EXIT)
		return rc;
	if (optind + 1 != argc)
		return cli_usage_error("stream", optind == argc ? "no capture given"
							      : "give one capture (its parts follow it)");
	so->capture = argv[optind];
	if (!so->endpoint)
		return cli_usage_error("stream", "--otlp-endpoint URL is required");
	if (http_parse_url(so->endpoint, "/v1/traces", &so->url, err, sizeof(err)) < 0)
		return cli_usage_error("stream", "--otlp-endpoint %s", err);
	so->timeout_ms = http_timeout_from_env(err, sizeof(err));
	if (so->timeout_ms < 0)
		return cli_usage_error("stream", "%s", err);
	if (so->collector_pid && !so->follow)
		return cli_usage_error("stream", "--collector-pid needs --follow");
	return -1;
}

int cmd_stream(int argc, char **argv)
{
	struct stream_opts so = {
		.gzip = true, .sample = SAMPLE_ALL, .max_lag_ns = STREAM_MAX_LAG_NS,
		.hold_ns = STREAM_HOLD_NS, .held_max = STREAM_HELD_MAX, .batch_spans = STREAM_BATCH_SPANS,
		.batch_bytes = STREAM_BATCH_BYTES, .ready_fd = -1, .status_fd = -1, .pace_fd = -1,
		.oo = { .protobuf = true },
	};
	struct obuf hdr = { 0 };
	int rc = parse(argc, argv, &so, &hdr);

	if (rc < 0) {
		ob_raw(&hdr, "", 1);
		so.headers = hdr.len > 1 ? hdr.p : NULL;
		rc = hdr.oom ? cli_runtime_error("stream", "out of memory") : stream_main(&so);
	}
	ob_free(&hdr);
	return rc;
}
