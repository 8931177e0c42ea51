/* SPDX-License-Identifier: MIT */
/*
 * export_flows.c - the flows of a Chrome Trace JSON export: each flow's
 * slices moved off starts other events of their thread take (bind.c),
 * then written with the flow events that join them into arrows.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "export_int.h"

/* A string of the trace: bytes, NULs included (the table keeps lengths). */
struct bytes {
	const char *p;
	size_t len;
};

/* Byte order; of two where one begins the other, the shorter first. */
static int cmp_bytes(const void *pa, const void *pb)
{
	const struct bytes *a = pa, *b = pb;
	int c = memcmp(a->p, b->p, a->len < b->len ? a->len : b->len);

	return c ? c : (a->len > b->len) - (a->len < b->len);
}

/*
 * The category of a flow's slices and flow events. DevTools binds a flow
 * event only to a slice of identical (ts, pid, tid, cat) and groups a
 * flow's events by (cat, name, id): both hold only if every slice of the
 * flow has one category. When they differ, the slices get the list of
 * them, "a,b", which is how the format writes an event of several
 * categories, so no slice loses its own. The list is bytes, as the
 * strings are (the writer escapes them): a category is whole past a NUL.
 */
static int flow_cat(struct exporter *e, const struct flow_ev *g, size_t n)
{
	struct bytes *v;
	size_t len = 0;
	bool same = true;
	char *out;

	free(e->fcat);
	e->fcat = NULL;
	for (size_t i = 1; i < n && same; i++)
		same = g[i].cat == g[0].cat;
	if (same)
		return 0;
	v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		v[i].p = source_string(e->src, g[i].cat, &v[i].len);
		len += v[i].len + 1;
	}
	qsort(v, n, sizeof(*v), cmp_bytes);
	out = malloc(len);
	if (!out) {
		free(v);
		return -ENOMEM;
	}
	len = 0;
	for (size_t i = 0; i < n; i++) {
		if (i && !cmp_bytes(&v[i], &v[i - 1]))
			continue;
		if (len)
			out[len++] = ',';
		memcpy(out + len, v[i].p, v[i].len);
		len += v[i].len;
	}
	free(v);
	e->fcat = out;
	e->fcatlen = len;
	return 0;
}

static int on_flow(void *ctx, char ph, uint64_t id, const struct flow_ev *fe,
		   const struct flow_ev *group, size_t n)
{
	struct exporter *e = ctx;
	struct jw *w = e->w;
	char p[2] = { ph, 0 };
	const char *cat;
	size_t len;
	int ret;

	if (fe == group && (ret = flow_cat(e, group, n)) < 0)
		return ret;
	export_count_names(e, fe->name, fe->cat);
	if (e->fcat) {
		cat = e->fcat;
		len = e->fcatlen;
	} else {
		cat = source_string(e->src, fe->cat, &len);
	}
	export_event(e, fe->kind, fe->pid, fe->tid, fe->ts, fe->dur, cat, len, fe->name,
		     args_get(&e->fargs, fe->args), fe->role & SHMT_ROLE_RECEIVES);
	if (!ph)
		return w->err;
	export_sep(e);
	jw_puts(w, "{\"ph\":\"");
	jw_puts(w, p);
	jw_puts(w, "\",\"id\":");
	jw_u64(w, id);
	jw_puts(w, ",\"name\":\"flow\",\"cat\":");
	/* byte for byte the slice's: DevTools binds on identical strings */
	jw_str(w, cat, len);
	jw_puts(w, ",");
	export_where(w, fe->pid, fe->tid, fe->ts);
	if (ph == 'f')
		jw_puts(w, ",\"bp\":\"e\"");
	jw_puts(w, "}");
	return w->err;
}

/* The verification pass of bind_resolve(): the events export_on_record() wrote
 * as they came, again. */
struct export_rescan {
	struct exporter *e;
	char *err;
	size_t errlen;
};

static int on_rescan(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct exporter *e = ctx;

	if (!export_wanted(e, r) || !export_streams(r))
		return 0;
	return bind_seen(&e->bind, hosts_outpid(&e->hosts, r->pid, start_time, r->ts), r->tid, r->ts);
}

static int rescan(void *ctx)
{
	struct export_rescan *rs = ctx;
	int ret = source_records(rs->e->src, on_rescan, rs->e, rs->err, rs->errlen);

	return ret < 0 ? ret : 0;
}

int export_flows(struct exporter *e, char *err, size_t errlen)
{
	struct export_rescan rs = { .e = e, .err = err, .errlen = errlen };
	int ret;

	/* each flow's slice the only event of its thread at its start */
	ret = bind_resolve(&e->bind, &e->fl, rescan, &rs);
	if (ret < 0)
		return ret;
	return flows_assemble(&e->fl, on_flow, e, &e->flows);
}
