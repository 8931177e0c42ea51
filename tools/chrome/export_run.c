/* SPDX-License-Identifier: MIT */
/*
 * export_run.c - the passes of a Chrome Trace JSON export (after those of
 * pick.c, which say which records): the events, then flows, names,
 * losses and metadata; and the export's life from output file to exit
 * code.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "export_int.h"

static int run_export(struct exporter *e, FILE *out, char *err, size_t errlen)
{
	int ret;

	ret = hosts_build(&e->hosts, e->src);
	if (ret == -E2BIG)
		snprintf(err, errlen, "the inputs come from %u hosts; at most %u can be merged",
			 e->src->nhosts, HOSTS_MAX);
	if (ret < 0)
		return ret;
	jw_init(e->w, out);
	jw_puts(e->w, "{\"traceEvents\":[");
	ret = source_records(e->src, export_on_record, e, err, errlen);
	if (ret == 0)
		ret = export_pending(e);
	if (ret == 0)
		ret = export_open_spans(e);
	if (e->progress && e->events >= PROGRESS_EVERY)
		fputs("\r\033[K", stderr);
	if (e->w->err) {
		/* a write error, not the input's: say so */
		err[0] = 0;
		return e->w->err;
	}
	if (ret < 0)
		return ret;
	ret = export_flows(e, err, errlen);
	if (e->w->err) {
		err[0] = 0;
		return e->w->err;
	}
	if (ret < 0)
		return ret;
	ret = export_names(e);
	if (ret < 0)
		return ret;
	export_loss(e);
	export_metadata(e);
	return jw_flush(e->w);
}

/* Frees what the export holds beyond its source. */
static void exporter_free(struct exporter *e)
{
	flows_free(&e->fl);
	bind_free(&e->bind);
	free(e->fcat);
	args_store_free(&e->fargs);
	open_free(&e->open);
	u64map_free(&e->seen);
	hosts_free(&e->hosts);
	free(e->w);
	free(e);
}

/* The Chrome JSON export proper, once the source is open. */
int chrome_export(struct source *src, const struct pick *pk, struct cmd *c)
{
	struct exporter *e = calloc(1, sizeof(*e));
	char err[768];
	int ret, rc;

	if (!e || !(e->w = malloc(sizeof(*e->w)))) {
		free(e);
		return cli_runtime_error("export", "out of memory");
	}
	e->src = src;
	e->pick = pk;
	flows_init_by(&e->fl, bind_order);
	args_store_init(&e->fargs);
	u64map_init(&e->seen);
	if ((rc = cmd_create(c)) != 0) {
		exporter_free(e);
		return rc;
	}
	e->progress = isatty(STDERR_FILENO);
	err[0] = 0;
	ret = bind_init(&e->bind);
	if (ret == 0)
		ret = run_export(e, c->f, err, sizeof(err));
	if (ret < 0 && !err[0] && !e->w->err)
		cmd_run_error(err, sizeof(err), ret);
	rc = cmd_finish(c, ret, err);
	/* split.c says it once for all the pieces */
	if (rc == EXIT_OK && !source_complete(src) && !pk->split_ns)
		fprintf(stderr, "shmtrace export: %s written from an incomplete capture (see above)\n",
			c->out);
	exporter_free(e);
	return rc;
}
