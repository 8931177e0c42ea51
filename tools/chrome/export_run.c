/* SPDX-License-Identifier: MIT */
/*
 * export_run.c - the passes of a Chrome Trace JSON export: the window's
 * start when --from/--to need it, the events, then flows, names, losses
 * and metadata; and the export's life from output file to exit code.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "export_int.h"

static int on_min_ts(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct exporter *e = ctx;

	(void)start_time;
	if (e->flt.npids && !export_wanted(e, r))
		return 0;
	if (!e->any || r->ts < e->t0)
		e->t0 = r->ts;
	if (!e->any || r->ts > e->t_end)
		e->t_end = r->ts;
	e->any = true;
	return 0;
}

static int run_export(struct exporter *e, FILE *out, char *err, size_t errlen)
{
	int ret;

	ret = hosts_build(&e->hosts, e->src);
	if (ret == -E2BIG)
		snprintf(err, errlen, "the inputs come from %u hosts; at most %u can be merged",
			 e->src->nhosts, HOSTS_MAX);
	if (ret < 0)
		return ret;
	if (e->flt.has_from || e->flt.has_to) {
		bool f = e->flt.has_from, t = e->flt.has_to;

		/* the window is relative to the earliest record: find it first */
		e->flt.has_from = e->flt.has_to = false;
		ret = source_records(e->src, on_min_ts, e, err, errlen);
		if (ret < 0)
			return ret;
		e->flt.has_from = f;
		e->flt.has_to = t;
		/* an empty trace must not look like an idle one */
		if (f && e->any && e->flt.from > e->t_end - e->t0)
			source_warnx("--from %.6f s is past the end of the trace (its last record "
			       "starts at %.6f s); the output has no events",
			       (double)e->flt.from / 1e9, (double)(e->t_end - e->t0) / 1e9);
		e->any = false;
	}
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
int chrome_export(struct source *src, const struct filter *flt, struct cmd *c)
{
	struct exporter *e = calloc(1, sizeof(*e));
	char err[768];
	int ret, rc;

	if (!e || !(e->w = malloc(sizeof(*e->w)))) {
		free(e);
		return cli_runtime_error("export", "out of memory");
	}
	e->src = src;
	e->flt = *flt;
	flows_init(&e->fl);
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
	rc = cmd_finish(c, ret, err);
	if (rc == EXIT_OK && !source_complete(src))
		fprintf(stderr, "shmtrace export: %s written from an incomplete capture (see above)\n",
			c->out);
	exporter_free(e);
	return rc;
}
