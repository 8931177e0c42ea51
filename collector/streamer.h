/* SPDX-License-Identifier: MIT */
/*
 * streamer.h - the collector's side of the live stream to OpenTelemetry
 * (--otlp-endpoint): `shmtrace stream CAPTURE --follow`, found beside
 * the collector, run as a process of its own that reads the capture as
 * it is written, so that a slow or dead endpoint never holds the drain
 * back; started before the capture is opened, started again if it dies,
 * given --linger to finish once the capture ends, and its closing line
 * said with the collector's summary. The stream's options are its own
 * (tools/otlp/stream_cmd.c checks them); the collector passes them on.
 */
#ifndef SHMTRACE_COLLECTOR_STREAMER_H
#define SHMTRACE_COLLECTOR_STREAMER_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The collector's options passed on to the stream, by their getopt codes. */
enum {
	STREAMER_OPT_FIRST = 0x1000,
	STREAMER_OPT_ENDPOINT = STREAMER_OPT_FIRST, STREAMER_OPT_SERVICE, STREAMER_OPT_HEADER,
	STREAMER_OPT_PROTOCOL, STREAMER_OPT_COMPRESSION, STREAMER_OPT_SAMPLE,
	STREAMER_OPT_MAX_LAG, STREAMER_OPT_HOLD, STREAMER_OPT_MAX_HELD, STREAMER_OPT_BATCH, STREAMER_OPT_LAST,
};

#define STREAMER_LONGOPTS \
	{ "otlp-endpoint", required_argument, NULL, STREAMER_OPT_ENDPOINT }, \
	{ "service", required_argument, NULL, STREAMER_OPT_SERVICE }, \
	{ "otlp-header", required_argument, NULL, STREAMER_OPT_HEADER }, \
	{ "otlp-protocol", required_argument, NULL, STREAMER_OPT_PROTOCOL }, \
	{ "otlp-compression", required_argument, NULL, STREAMER_OPT_COMPRESSION }, \
	{ "otlp-sample", required_argument, NULL, STREAMER_OPT_SAMPLE }, \
	{ "otlp-max-lag", required_argument, NULL, STREAMER_OPT_MAX_LAG }, \
	{ "otlp-hold", required_argument, NULL, STREAMER_OPT_HOLD }, \
	{ "otlp-max-held", required_argument, NULL, STREAMER_OPT_MAX_HELD }, \
	{ "otlp-batch", required_argument, NULL, STREAMER_OPT_BATCH }

#define STREAMER_HELP \
"      --otlp-endpoint URL  also send the spans, as they are captured, to an\n" \
"                           OpenTelemetry endpoint over OTLP/HTTP (URL/v1/traces,\n" \
"                           http:// only), through 'shmtrace stream' found beside\n" \
"                           the collector; the capture stays whole whatever the\n" \
"                           endpoint does, and a restart goes on where it stopped\n" \
"      --service NAME       service.name of every process (default: its name)\n" \
"      --otlp-header 'NAME=VALUE'  a header sent with every request (repeatable)\n" \
"      --otlp-protocol P    protobuf (default) or json\n" \
"      --otlp-compression C gzip (default) or none\n" \
"      --otlp-sample S      all (default), flows (only flows' traces) or ratio=R\n" \
"                           (the traces whose id falls in R, 0 to 1)\n" \
"      --otlp-max-lag SECONDS  skip ahead when the stream is this far behind\n" \
"                           (default 600; 0: never)\n" \
"      --otlp-hold SECONDS  how long a span waits for the span around it (default 5)\n" \
"      --otlp-max-held N    events the stream holds for their trees at most, what\n" \
"                           its memory grows with (default 262144): past it, the\n" \
"                           oldest go as they are\n" \
"      --otlp-batch N       spans per request at most (default 8192)\n"

#define STREAMER_MAX_ARGS	96

struct streamer {
	const char *argv[STREAMER_MAX_ARGS];	/* the options passed on */
	int argc;
	const char *endpoint;			/* NULL: no stream */
	const char *output;
	char tool[4096];			/* shmtrace, beside the collector */
	pid_t pid;				/* running, or 0 */
	int status_fd;				/* its closing line comes here, or -1 */
	int pace_fd;				/* its --pace-fd's other end, or -1 */
	uint64_t restart_at, backoff_ns;	/* when it may be started again */
	char line[512];				/* its closing line */
	bool failed;
	bool paused;				/* told to wait: the drain is behind */
};

void streamer_init(struct streamer *s);

/* Takes option c (a STREAMER_OPT_*) with its argument: 1 when it was one,
 * 0 when not, -1 (said) when there are too many. */
int streamer_option(struct streamer *s, int c, const char *arg);

/* Starts the stream of output and waits until it is ready (it moved
 * aside what an earlier collector's stream had not sent: the collector
 * may truncate output then). Returns 0, or the exit status to leave with
 * after the stream said why (2: its options are wrong). */
int streamer_start(struct streamer *s, const char *output);

/* Between passes: starts the stream again, with a growing back-off, when
 * it died; tells it (its --pace-fd) to wait while the drain is behind and
 * to read on once the drain caught up, so that on a busy host the
 * capture, the truth, has the CPU first and the stream catches up from it
 * after. */
void streamer_poll(struct streamer *s, bool drain_behind);

/* The capture ended (ended: with its END frame, which the stream reads to
 * finish): waits at most linger_ns for the stream to send what it holds,
 * then stops it (SIGTERM: it keeps where it got to for the next start).
 * Its closing line is in s->line. */
void streamer_finish(struct streamer *s, bool ended, uint64_t linger_ns);

#endif
