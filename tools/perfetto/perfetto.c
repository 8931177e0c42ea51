/* SPDX-License-Identifier: MIT */
/*
 * perfetto.c - `shmtrace export --format perfetto`: the export's life, from
 * output file to exit code, and its two passes over the records. The
 * first plans (the flows, which the Chrome export assembles at its end,
 * and the times at which several slices of a thread begin); the second
 * writes every event where it comes, so that only the flow records are
 * kept, as in the Chrome export. Both passes hand the same thread events
 * over in the same order, numbered alike: that is how the second finds
 * what the first learnt of each.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfetto_int.h"

/* a progress line on a terminal every so many records */
#define PF_PROGRESS_EVERY 1000000ull

/* One pass: what it does with a thread event and with a counter. */
struct pass {
	struct pf *pf;
	int (*event)(struct pf *pf, const struct shmt_record *r, uint32_t pid, uint32_t ring,
		     const struct ev_args *a);
	int (*counter)(struct pf *pf, const struct shmt_record *r, uint32_t pid);
	const char *verb;	/* of the progress line */
};

/* What --pid and --from/--to select, with their flows whole (pick.h). */
static bool wanted(struct pf *pf, const struct shmt_record *r)
{
	return pick_record(pf->pick, r, pf->src->ring, &pf->pass);
}

/* A span, instant or open span to the pass: a receiving span as itself
 * and the instant at its end that is its step (flows.h), as the Chrome
 * export writes it. */
static int thread_event(struct pass *ps, const struct shmt_record *r, uint32_t pid,
			uint32_t ring, const struct ev_args *a)
{
	struct shmt_record span, mark;
	int ret;

	if (!flow_split_receiving(r, &span, &mark))
		return ps->event(ps->pf, r, pid, ring, a);
	if ((ret = ps->event(ps->pf, &span, pid, ring, a)) != 0)
		return ret;
	return ps->event(ps->pf, &mark, pid, ring, NULL);
}

/* The held-back span or instant, now that no more of its arguments can come. */
static int take_pending(struct pass *ps)
{
	struct args_pend *p = &ps->pf->pend;

	if (!args_take(p))
		return 0;
	return thread_event(ps, &p->r, p->pid, p->ring, &p->a);
}

static int on_record(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct pass *ps = ctx;
	struct pf *pf = ps->pf;
	uint32_t kind = shmt_record_kind(r), pid;
	int ret;

	if (!wanted(pf, r))
		/* its arguments are not wanted either */
		return shmt_record_attached(r) ? 0 : take_pending(ps);
	if (shmt_record_attached(r))
		return args_on_arg(&pf->pend, &pf->texts, r, pf->src->follows);
	if ((ret = take_pending(ps)) != 0)
		return ret;
	pid = hosts_outpid(&pf->hosts, r->pid, start_time, r->ts);
	/* the thread's last moment and the trace's, for open spans' ends (args.h) */
	if ((ret = open_note(&pf->open, &pf->seen, (uint64_t)pid << 32 | r->tid, r)) < 0)
		return ret;
	if (!pf->records || r->ts < pf->first_ts)
		pf->first_ts = r->ts;
	if (!pf->records || r->ts > pf->last_ts)
		pf->last_ts = r->ts;
	if (++pf->records % PF_PROGRESS_EVERY == 0 && pf->progress)
		fprintf(stderr, "\rshmtrace: %llu records %s", (unsigned long long)pf->records,
			ps->verb);
	switch (kind) {
	case SHMTRACE_KIND_OPEN:
		return open_add(&pf->open, &pf->texts, r, pid, pf->src->ring,
				source_open_args(pf->src));
	case SHMTRACE_KIND_SPAN:
	case SHMTRACE_KIND_INSTANT:
		args_hold(&pf->pend, r, pid, pf->src->ring, 0);
		return 0;
	case SHMTRACE_KIND_TRIGGER:
		/* an instant of its thread, named for what it is */
		return thread_event(ps, r, pid, pf->src->ring, NULL);
	default:
		return ps->counter(pf, r, pid);
	}
}

/* One pass over the records, then the event held for its arguments and
 * the open spans with theirs, each ended where args.h says. */
static int run_pass(struct pass *ps, char *err, size_t errlen)
{
	struct pf *pf = ps->pf;
	struct open_ev oe;
	struct shmt_record r;
	int ret;

	memset(&pf->pend, 0, sizeof(pf->pend));
	memset(&pf->pass, 0, sizeof(pf->pass));
	args_store_free(&pf->texts);
	open_free(&pf->open);
	pf->open.last_end = 0;
	u64map_free(&pf->seen);
	pf->records = 0;
	ret = source_records(pf->src, on_record, ps, err, errlen);
	if (pf->progress && pf->records >= PF_PROGRESS_EVERY)
		fputs("\r\033[K", stderr);
	if (ret == 0)
		ret = take_pending(ps);
	if (ret == 0)
		ret = open_spans_rewind(&pf->open);
	while (ret == 0 && (ret = open_spans_next(&pf->open, &pf->seen, &oe, &r)) == 1) {
		const struct ev_args *a = open_args(&oe);

		pf->pend.args += a ? a->n : 0;
		ret = thread_event(ps, &r, oe.pid, oe.ring, a);
	}
	return ret;
}

/* A thread event of either pass, numbered n. */
static void make_ev(struct pf_ev *ev, const struct shmt_record *r, const struct ev_args *a,
		    uint64_t n)
{
	uint32_t kind = shmt_record_kind(r);

	memset(ev, 0, sizeof(*ev));
	ev->ts = r->ts;
	ev->kind = kind;
	ev->dur = kind == SHMTRACE_KIND_INSTANT ? 0 : r->dur;
	ev->point = ev->dur == 0;
	ev->n = n;
	ev->cat = r->cat;
	ev->name = r->name;
	ev->receives = shmt_record_in_flow(r) && (shmt_flow_role(r->flow) & SHMT_ROLE_RECEIVES);
	if (a)
		ev->args = *a;
}

static int plan_on_event(struct pf *pf, const struct shmt_record *r, uint32_t pid, uint32_t ring,
			 const struct ev_args *a)
{
	struct pf_ev ev;

	(void)a;
	make_ev(&ev, r, NULL, pf->plan.n++);
	return plan_event(pf, &ev, r, pid, ring);
}

static int plan_on_counter(struct pf *pf, const struct shmt_record *r, uint32_t pid)
{
	(void)pf;
	(void)r;
	(void)pid;
	return 0;
}

/* An event whose name or category is not a known string is written as
 * "?": its string did not fit the ring's table (or never was interned). */
static void count_names(struct pf *pf, uint32_t name, uint32_t cat)
{
	if (!source_has_string(pf->src, name) || !source_has_string(pf->src, cat))
		pf->names_lost++;
}

static int write_event(struct pf *pf, const struct shmt_record *r, uint32_t pid, uint32_t ring,
		       const struct ev_args *a)
{
	struct pf_thread *th;
	struct pf_ev ev;
	int ret;

	(void)ring;
	make_ev(&ev, r, a, pf->n++);
	if (shmt_record_in_flow(r))
		plan_hop(pf, pf->kflow++, &ev, pid, r->tid, shmtrace_flow_id(r->flow));
	/* a trigger has no category: "shmtrace" is written */
	count_names(pf, r->name, ev.kind == SHMTRACE_KIND_TRIGGER ? r->name : r->cat);
	pf->unfinished += ev.kind == SHMTRACE_KIND_OPEN;
	pf->triggers += ev.kind == SHMTRACE_KIND_TRIGGER;
	th = packet_thread(pf, pid, r->tid);
	if (!th)
		return -ENOMEM;
	if ((ret = order_put(pf, th, &ev)) < 0)
		return ret;
	return packet_flush(pf, false);
}

static int write_counter(struct pf *pf, const struct shmt_record *r, uint32_t pid)
{
	int ret;

	count_names(pf, r->name, r->cat);
	ret = packet_counter(pf, pid, r->cat, r->name, r->ts, (int64_t)r->dur);
	return ret < 0 ? ret : packet_flush(pf, false);
}

static int run_export(struct pf *pf, FILE *out, char *err, size_t errlen)
{
	struct pass plan = { pf, plan_on_event, plan_on_counter, "read" };
	struct pass write = { pf, write_event, write_counter, "exported" };
	int ret = hosts_build(&pf->hosts, pf->src);

	if (ret == -E2BIG)
		snprintf(err, errlen, "the inputs come from %u hosts; at most %u can be merged",
			 pf->src->nhosts, HOSTS_MAX);
	if (ret == 0)
		ret = run_pass(&plan, err, errlen);
	if (ret == 0)
		ret = plan_done(&pf->plan, &pf->flows);
	if (ret == 0)
		ret = packet_init(pf, out);
	if (ret < 0)
		return ret;
	packet_start(pf);
	ret = run_pass(&write, err, errlen);
	if (ret == 0)
		ret = order_flush(pf);
	if (ret == 0)
		meta_write(pf);
	if (ret == 0 || pf->werr)
		ret = packet_flush(pf, true);
	if (pf->werr)
		/* a write error, not the input's: say so */
		err[0] = 0;
	return ret;
}

static void pf_free(struct pf *pf)
{
	plan_free(&pf->plan);
	args_store_free(&pf->texts);
	order_free(pf);
	packet_free(pf);
	open_free(&pf->open);
	u64map_free(&pf->seen);
	hosts_free(&pf->hosts);
	free(pf);
}

int perfetto_export(struct source *src, const struct pick *pk, struct cmd *c)
{
	struct pf *pf = calloc(1, sizeof(*pf));
	char err[768] = "";
	int ret, rc;

	if (!pf || plan_init(&pf->plan) < 0) {
		if (pf)
			pf_free(pf);
		return cli_runtime_error("export", "out of memory");
	}
	pf->src = src;
	pf->pick = pk;
	args_store_init(&pf->texts);
	if ((rc = cmd_create(c)) != 0) {
		pf_free(pf);
		return rc;
	}
	pf->progress = isatty(STDERR_FILENO);
	ret = run_export(pf, c->f, err, sizeof(err));
	if (ret < 0 && !err[0] && !pf->werr)
		cmd_run_error(err, sizeof(err), ret);
	rc = cmd_finish(c, ret, err);
	if (rc == EXIT_OK && !source_complete(src))
		fprintf(stderr, "shmtrace export: %s written from an incomplete capture (see above)\n",
			c->out);
	pf_free(pf);
	return rc;
}
