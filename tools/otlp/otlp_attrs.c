/* SPDX-License-Identifier: MIT */
/*
 * otlp_attrs.c - what the two encodings of the OTLP export (OTLP/JSON,
 * otlp_json.c; protobuf, otlp_pb.c) say of a process, a scope and a
 * span's arguments, decided once so that both always say the same: a
 * process's resource, the scope's loss counters, which of an event's
 * arguments is written, and the attributes a thread and category start
 * every span with, made once in the encoding's own bytes.
 */
#include <stdio.h>

#include "otlp_int.h"

const char *const otlp_link_why[] = {
	[LINK_NONE] = "", [LINK_PREV_HOP] = "previous_hop", [LINK_ENCLOSING] = "enclosing_span",
};

void otlp_resource_of(struct otlp *o, uint32_t outpid, struct otlp_resource *r)
{
	const struct proc *p = hosts_proc(&o->hosts, outpid);

	r->process = true;
	r->pid = p ? p->pid : hosts_local(outpid) % PROCS_PID_STRIDE;
	r->host = hosts_name(&o->hosts, hosts_host_of(&o->hosts, outpid));
	r->pname = p && p->pname[0] ? p->pname : NULL;
	if (o->o->service)
		snprintf(r->service, sizeof(r->service), "%s", o->o->service);
	else if (r->pname && p->nk <= 1)
		snprintf(r->service, sizeof(r->service), "%s", r->pname);
	else if (r->pname)
		snprintf(r->service, sizeof(r->service), "%s (#%u)", r->pname, p->k);
	else
		snprintf(r->service, sizeof(r->service), "pid %u", r->pid);
}

void otlp_loss_resource(struct otlp *o, struct otlp_resource *r)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->service, sizeof(r->service), "%s", o->o->service ? o->o->service : "shmtrace");
	r->host = hosts_name(&o->hosts, 0);
}

size_t otlp_scope_counters(struct otlp *o, struct otlp_counter *c)
{
	const struct source_loss *l = &o->s->loss;
	uint64_t over = 0, suppressed = 0;
	size_t n = 0;

	/* counters that cannot be true are no counts: left out, and
	 * shmtrace.counters_corrupt says so */
	for (size_t i = 0; i < SHMT_LOSS_NKINDS && !l->corrupt; i++) {
		snprintf(c[n].key, sizeof(c[n].key), "shmtrace.%s", shmt_loss_kinds[i].name);
		c[n].v = shmt_loss_get(&l->counters, &shmt_loss_kinds[i]);
		n += c[n].v != 0;
	}
	if (!l->corrupt) {
		snprintf(c[n].key, sizeof(c[n].key), "shmtrace.records_lost");
		c[n].v = shmt_loss_records(&l->counters);
		n += c[n].v != 0;
		snprintf(c[n].key, sizeof(c[n].key), "shmtrace.records_unaccounted");
		c[n].v = l->unaccounted;
		n += c[n].v != 0;
	}
	/* records of parts of a rotated capture not among the inputs, or
	 * deleted by their collector: written, not lost by the ring */
	snprintf(c[n].key, sizeof(c[n].key), "shmtrace.missing_records");
	c[n].v = l->missing;
	n += c[n].v != 0;
	snprintf(c[n].key, sizeof(c[n].key), "shmtrace.names_lost");
	c[n].v = o->names_lost;
	n += c[n].v != 0;
	snprintf(c[n].key, sizeof(c[n].key), "shmtrace.args_lost");
	c[n].v = o->held.lost;
	n += c[n].v != 0;
	/* snapshots among the inputs: what their copies lost, the triggers
	 * their recorder did not answer, the oldest records a size bound
	 * left out (below) */
	for (size_t i = 0; i < o->s->nsnaps; i++) {
		over += o->s->snaps[i].overwritten;
		suppressed += o->s->snaps[i].suppressed;
	}
	snprintf(c[n].key, sizeof(c[n].key), "shmtrace.snapshot.overwritten_during_copy");
	c[n].v = over;
	n += c[n].v != 0;
	snprintf(c[n].key, sizeof(c[n].key), "shmtrace.snapshot.triggers_suppressed");
	c[n].v = suppressed;
	n += c[n].v != 0;
	snprintf(c[n].key, sizeof(c[n].key), "shmtrace.snapshot.cut");
	c[n].v = source_snapshots_cut(o->s);
	n += c[n].v != 0;
	return n;
}

uint64_t otlp_scope_said(struct otlp *o)
{
	struct otlp_counter c[OTLP_COUNTERS_MAX];
	size_t n = otlp_scope_counters(o, c);
	bool corrupt = o->s->loss.corrupt, complete = source_complete(o->s);
	uint64_t h = hash_splitmix64((uint64_t)corrupt << 1 | complete);

	if (!n && !corrupt && complete)
		return 0;
	for (size_t i = 0; i < n; i++) {
		h = hash_splitmix64(h ^ fnv1a32(c[i].key, strlen(c[i].key)));
		h = hash_splitmix64(h ^ c[i].v);
	}
	return h ? h : 1;
}

bool otlp_scope_lossy(struct otlp *o)
{
	return otlp_scope_said(o) != 0;
}

const char *otlp_event_name(struct otlp *o, uint32_t name, uint32_t cat, char *buf, size_t *len)
{
	struct shmt_record r = { .name = (uint16_t)name };

	if (cat != OTLP_CAT_TRIGGER)
		return source_string(o->s, name, len);
	return source_trigger_label(o->s, &r, buf, SOURCE_TRIGGER_LABEL_MAX, len);
}

const char *otlp_event_cat(struct otlp *o, uint32_t cat, size_t *len)
{
	if (cat != OTLP_CAT_TRIGGER)
		return source_string(o->s, cat, len);
	*len = strlen("shmtrace");
	return "shmtrace";
}

bool otlp_names_known(struct otlp *o, uint32_t name, uint32_t cat)
{
	return source_has_string(o->s, name) &&
	       (cat == OTLP_CAT_TRIGGER || source_has_string(o->s, cat));
}

bool otlp_arg_repeated(struct otlp *o, const struct ev_args *a, uint32_t i)
{
	size_t klen, olen;
	const char *key = source_string(o->s, a->a[i].key, &klen);

	for (uint32_t j = i + 1; j < a->n; j++) {
		const char *other = source_string(o->s, a->a[j].key, &olen);

		if (olen == klen && !memcmp(other, key, klen))
			return true;
	}
	return false;
}

const struct obuf *otlp_frag(struct otlp *o, uint32_t outpid, uint32_t tid, uint32_t cat,
			     otlp_frag_fn make)
{
	uint32_t h = (tid * 0x9e3779b1u + cat * 0x85ebca6bu + outpid) >> 24;
	struct frag *f = &o->frags[h % OTLP_FRAGS];

	if (f->used && f->outpid == outpid && f->tid == tid && f->cat == cat)
		return &f->text;
	f->used = false;
	f->text.len = 0;
	make(o, &f->text, hosts_thread_name(&o->hosts, outpid, tid), tid, cat);
	if (f->text.oom)
		return NULL;
	f->outpid = outpid;
	f->tid = tid;
	f->cat = cat;
	f->used = true;
	return &f->text;
}

void otlp_span_times(const struct otlp *o, const struct span *sp, uint64_t *start, uint64_t *end)
{
	*start = sp->ts + o->wall_off;
	*end = shmt_time_end(*start, sp->dur);
}
