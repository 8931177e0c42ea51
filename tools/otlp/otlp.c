/* SPDX-License-Identifier: MIT */
/*
 * otlp.c - `shmtrace export --format otlp`: the entry, which sets the
 * export up, runs it (otlp_spans.c: the pass over the records; otlp_hops.c:
 * flows to traces; otlp_tree.c: the threads' trees, which give every span
 * its trace and parent; otlp_json.c: their OTLP/JSON text; otlp_send.c:
 * batches, POSTed to the endpoint; otlp_write.c: or written to the file;
 * otlp_text.c: ids and times as text; otlp_ids.c: trace and span ids),
 * says what happened and cleans up; and struct keyed, the tables of those
 * parts.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "otlp_int.h"

/* ------------------------------------------------------------- keyed */

void keyed_init(struct keyed *k, size_t size)
{
	memset(k, 0, sizeof(*k));
	u64map_init(&k->map);
	k->size = size;
}

void *keyed_get(struct keyed *k, uint64_t key, bool *added)
{
	uint64_t *v;

	*added = false;
	if (k->last && k->last_key == key)
		return k->v + (k->last - 1) * k->size;
	v = u64map_get(&k->map, key, 0, added);
	if (!v)
		return NULL;
	if (*added) {
		if (array_reserve(&k->v, &k->cap, k->n + 1, k->size, 16) < 0) {
			/* the key stays, with no element: forget it */
			*v = 0;
			return NULL;
		}
		memset(k->v + k->n * k->size, 0, k->size);
		*v = ++k->n;
	}
	if (!*v)
		return NULL;
	k->last_key = key;
	k->last = *v;
	return k->v + (*v - 1) * k->size;
}

void *keyed_at(const struct keyed *k, size_t i)
{
	return k->v + i * k->size;
}

void keyed_free(struct keyed *k)
{
	u64map_free(&k->map);
	free(k->v);
	memset(k, 0, sizeof(*k));
}

/* ---------------------------------------------------------------- entry */
static void warn_losses(struct otlp *o)
{
	source_warn_lost(&o->s->loss);
	if (o->names_lost)
		source_warnx("%llu spans or events lost their names (exported as \"?\"); see "
		       "'shmtrace export' to Chrome for why", (unsigned long long)o->names_lost);
}

/* Opens out ("-": stdout) into o->fd: a temporary beside it (outfile.h).
 * Returns 0 or -errno with o->err set. */
static int open_out(struct otlp *o, const char *out)
{
	int ret;

	if (!strcmp(out, "-")) {
		/* written with write(2) from here on */
		fflush(stdout);
		o->fd = STDOUT_FILENO;
		return 0;
	}
	/* readable by no one the inputs do not let read them */
	ret = outfile_open(&o->of, out, OUTFILE_WHOLE, outfile_mode_within(0666, o->s->perm), o->err,
			   sizeof(o->err));
	o->fd = o->of.fd;
	return ret;
}

/* Closes the output file and moves it into place, or, after a failure
 * (ret < 0) and unless the spans went to an endpoint as well, removes it:
 * -o's path is left as it was. Returns ret, or the error of the close. */
static int close_out(struct otlp *o, int ret, const char *out)
{
	char why[512];

	if (o->fd <= STDOUT_FILENO)
		return ret;
	o->fd = -1;
	if (ret < 0 && !o->to_http) {
		outfile_abort(&o->of);
		return ret;
	}
	if (outfile_commit(&o->of, why, sizeof(why)) < 0 && ret == 0) {
		snprintf(o->err, sizeof(o->err), "%s (%s)", why, out);
		ret = -EIO;
	}
	return ret;
}

struct otlp *otlp_new(struct source *src, const struct otlp_opts *opts)
{
	struct otlp *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->s = src;
	o->o = opts;
	o->fd = -1;
	o->of.fd = -1;
	flows_init(&o->fl);
	args_store_init(&o->args);
	o->arrive = &o->args;
	/* numbered down from OTLP_OPEN_SEQ by arrival, added as before */
	o->open.newest_first = true;
	keyed_init(&o->batch, sizeof(struct pbatch));
	u64map_init(&o->last);
	o->esc = calloc(src->nstr ? src->nstr : 1, sizeof(*o->esc));
	o->frags = calloc(OTLP_FRAGS, sizeof(*o->frags));
	o->nodes = extsort_new(sizeof(struct node), nest_cmp, NODES_MEM);
	if (!o->esc || !o->frags || !o->nodes) {
		otlp_free(o);
		return NULL;
	}
	return o;
}

void otlp_set_run(struct otlp *o)
{
	const char *rname;
	uint64_t ring_id = 0, run_id = 0;

	/* ids differ between captures, and are the same on every export of one */
	source_ring_info(o->s, 0, &rname, &ring_id, &run_id);
	o->salt = hash_splitmix64(ring_id ^ hash_splitmix64(run_id ^ o->s->realtime0));
	o->wall_off = o->s->realtime0 - o->s->mono0;
}

void otlp_free(struct otlp *o)
{
	if (!o)
		return;
	otlp_writer_finish(o);
	outfile_abort(&o->of);
	otlp_json_free(o);
	otlp_batches_free(o);
	extsort_free(o->nodes);
	extsort_free(o->hops);
	u64map_free(&o->last);
	args_store_free(&o->args);
	open_free(&o->open);
	flows_free(&o->fl);
	hosts_free(&o->hosts);
	otlp_carry_free(o->carry);
	free(o);
}

/* The endpoint's URL into *url and the request timeout into *timeout_ms:
 * 0, or -EINVAL with the reason in err. */
static int endpoint_of(const struct otlp_opts *opts, struct http_url *url, int *timeout_ms,
		       char *err, size_t errlen)
{
	char why[512];

	if (http_parse_url(opts->endpoint, "/v1/traces", url, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "--otlp-endpoint %s", why);
		return -EINVAL;
	}
	*timeout_ms = http_timeout_from_env(err, errlen);
	return *timeout_ms < 0 ? -EINVAL : 0;
}

int otlp_check(const struct otlp_opts *opts)
{
	struct http_url url;
	char err[600];
	int ms;

	if (opts->endpoint && endpoint_of(opts, &url, &ms, err, sizeof(err)) < 0)
		return cli_usage_error("export", "%s", err);
	return 0;
}

/* Sets o up for its source (its options passed otlp_check()). Returns 0,
 * or an exit code after saying why not. */
static int setup(struct otlp *o)
{
	const struct otlp_opts *opts = o->o;
	int ret;

	if (opts->endpoint) {
		if (endpoint_of(opts, &o->url, &o->timeout_ms, o->err, sizeof(o->err)) < 0)
			return cli_usage_error("export", "%s", o->err);
		o->to_http = true;
	}
	ret = hosts_build(&o->hosts, o->s);
	if (ret == -E2BIG)
		return cli_runtime_error("export", "the inputs come from %u hosts; at most %u can be "
					 "merged", o->s->nhosts, HOSTS_MAX);
	if (ret < 0)
		return cli_runtime_error("export", "out of memory");
	otlp_set_run(o);
	return 0;
}

/* What was sent (or not), and what was left out. Returns the exit code. */
static int report(struct otlp *o, int ret)
{
	const char *why = o->err;
	unsigned long long sent = o->spans_sent;

	/* the output and the endpoint say what failed in o->err */
	if (ret < 0 && !o->err[0])
		cmd_run_error(o->err, sizeof(o->err), ret);
	warn_losses(o);
	/* a failed request ends the sending, not the pass: the spans not sent
	 * are counted (otlp_span()), unless the pass itself stopped */
	if (ret < 0 && o->to_http && o->counted)
		cli_runtime_error("export", "%s; %llu of %llu spans sent, %llu not sent", why, sent,
				  (unsigned long long)o->spans, (unsigned long long)o->spans - sent);
	else if (ret < 0 && o->to_http)
		cli_runtime_error("export", "%s; %llu spans sent before that, the rest not sent", why,
				  sent);
	else if (ret < 0)
		cli_runtime_error("export", "%s", why);
	if (ret == 0 && o->to_http)
		fprintf(stderr, "shmtrace export: %llu spans (%llu flows) in %llu requests sent to "
			"%s%s%s\n", sent, (unsigned long long)o->flows,
			(unsigned long long)o->requests_sent, o->url.hostport, o->url.path,
			o->retries_used ? " (after retries)" : "");
	if (o->rejected)
		source_warnx("the endpoint rejected %llu of those spans (OTLP partial success)",
		       (unsigned long long)o->rejected);
	if (ret < 0)
		return EXIT_RUNTIME;
	if (o->counters)
		fprintf(stderr, "shmtrace export: %llu counter records are not exported to OTLP\n",
			(unsigned long long)o->counters);
	if (!source_complete(o->s))
		fprintf(stderr, "shmtrace export: exported from an incomplete capture (see above)\n");
	return EXIT_OK;
}

int otlp_export(struct source *src, const struct otlp_opts *opts, const char *out)
{
	struct otlp *o = otlp_new(src, opts);
	int ret, rc;

	if (!o)
		return cli_runtime_error("export", "out of memory");
	rc = setup(o);
	if (rc)
		goto done;
	ret = out ? open_out(o, out) : 0;
	if (ret < 0) {
		rc = cli_runtime_error("export", "%s", o->err);
		goto done;
	}
	if (o->fd >= 0 && !o->to_http && otlp_writer_start(o) < 0) {
		rc = cli_runtime_error("export", "out of memory");
		goto done;
	}
	ret = otlp_run(o);
	/* all written (or failed) before the file is closed */
	rc = otlp_writer_finish(o);
	if (ret == 0)
		ret = rc;
	ret = close_out(o, ret, out);
	rc = report(o, ret);
done:
	otlp_free(o);
	return rc;
}
