/* SPDX-License-Identifier: MIT */
/*
 * otlp.h - `shmtrace export --format otlp`: a trace as OpenTelemetry spans
 * (OTLP/JSON ExportTraceServiceRequest), written to a file or sent to an
 * OTLP/HTTP endpoint, in batches so that memory stays bounded.
 */
#ifndef SHMTRACE_OTLP_H
#define SHMTRACE_OTLP_H

#include <stdbool.h>
#include <stddef.h>

#include "cli.h"
#include "source.h"

#define OTLP_BATCH_DEFAULT	(4u << 20)
#define OTLP_RETRIES_DEFAULT	6u

struct otlp_opts {
	const char *endpoint;		/* http://host[:port][/prefix], or NULL */
	const char *service;		/* service.name of every process, or NULL */
	bool flows_only;		/* leave out spans that are in no flow */
	size_t batch_bytes;		/* most bytes in one request */
	unsigned retries;		/* attempts per request (HTTP) */
	const struct filter *flt;
	bool progress;
};

/* Exports src as OTLP to out (a file, "-" for stdout, or NULL with an
 * endpoint) and/or to o->endpoint. Prints its errors and what was sent;
 * returns the exit code (EXIT_OK or EXIT_RUNTIME). */
int otlp_export(struct source *src, const struct otlp_opts *o, const char *out);

#endif
