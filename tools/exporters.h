/* SPDX-License-Identifier: MIT */
/*
 * exporters.h - the formats `shmtrace export` writes, as its command line
 * (export.c) runs them: Chrome Trace Event JSON (tools/chrome/) and
 * OpenTelemetry (tools/otlp/: OTLP/JSON ExportTraceServiceRequest,
 * written to a file or sent to an OTLP/HTTP endpoint, in batches so that
 * memory stays bounded). Each takes a source the command line opened.
 */
#ifndef SHMTRACE_EXPORTERS_H
#define SHMTRACE_EXPORTERS_H

#include <stdbool.h>
#include <stddef.h>

#include "cli.h"
#include "cmd_common.h"
#include "pick.h"
#include "source.h"

/* Writes the records of src that pk picks (pick.h; with --split, those of
 * its current piece) to c->out as Chrome Trace JSON (creating and
 * finishing the output through c). Prints its errors; returns the exit
 * code. */
int chrome_export(struct source *src, const struct pick *pk, struct cmd *c);

/* Writes the records of src that pk picks (pick.h) to c->out as a
 * Perfetto protobuf trace (docs/PERFETTO.md), creating and finishing the
 * output through c. Prints its errors; returns the exit code. */
int perfetto_export(struct source *src, const struct pick *pk, struct cmd *c);

#define OTLP_BATCH_DEFAULT	(4u << 20)
#define OTLP_RETRIES_DEFAULT	6u

struct otlp_opts {
	const char *endpoint;		/* http://host[:port][/prefix], or NULL */
	const char *service;		/* service.name of every process, or NULL */
	bool flows_only;		/* leave out spans that are in no flow */
	size_t batch_bytes;		/* most bytes in one request */
	unsigned retries;		/* attempts per request (HTTP) */
	const struct pick *pick;	/* which records (pick.h); NULL: all */
	bool progress;
	bool protobuf;			/* requests as protobuf, not OTLP/JSON */
};

struct kv;
/* The live stream of capture (`shmtrace stream`), as its status file
 * beside the capture says: keys stream_*, nothing when it has none. */
void otlp_stream_stat(const char *capture, struct kv *o);

/* Checks what o names beyond the command line's syntax before any input
 * is read: the endpoint's URL and OTEL_EXPORTER_OTLP_TIMEOUT. Returns 0,
 * or EXIT_USAGE after saying what is wrong. */
int otlp_check(const struct otlp_opts *o);

/* Exports src as OTLP to out (a file, "-" for stdout, or NULL with an
 * endpoint) and/or to o->endpoint. Prints its errors and what was sent;
 * returns the exit code (EXIT_OK or EXIT_RUNTIME). */
int otlp_export(struct source *src, const struct otlp_opts *o, const char *out);

#endif
