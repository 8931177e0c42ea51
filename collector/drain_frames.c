/* SPDX-License-Identifier: MIT */
/*
 * drain_frames.c - the frames of a capture part besides its records: the
 * header that opens each part, the ring's strings and thread names as they
 * appear, and the ring's loss counters when they move.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "drain_int.h"
#include "outfile.h"

static int put_header(struct drain *d)
{
	struct shmt_cap_header h;

	memset(&h, 0, sizeof(h));
	h.version = SHMT_CAP_VERSION;
	h.part = d->part;
	h.run_id = d->run_id;
	gethostname(h.host, sizeof(h.host) - 1);
	snprintf(h.ring, sizeof(h.ring), "%s", d->o.ring);
	h.ring_capacity = d->v.capacity;
	h.ring_mode = d->v.mode;
	h.clock_tsc = d->v.clock.tsc_ok;
	h.collector_pid = (uint32_t)getpid();
	h.realtime0 = d->v.clock.realtime0;
	h.mono0 = d->v.clock.mono0;
	h.started_ns = shmtrace_now();
	h.ring_id = d->v.minor >= 1 ? d->v.h->ring_id : 0;	/* format 1.0: none */
	h.deleted = *parts_deleted(d->parts);
	d->part_started_ns = h.started_ns;
	return shmt_cap_put_header(cw_buffer(d->w), &h);
}

int drain_open_part(struct drain *d)
{
	char path[PARTS_PATH_MAX];
	int ret;

	ret = parts_path(d->o.output, d->part, path, sizeof(path));
	if (ret < 0)
		snprintf(d->err, sizeof(d->err), "cannot write part %u of '%.400s': %s", d->part,
			 d->o.output, strerror(-ret));
	else
		/* readable by no one the ring does not let read it */
		ret = cw_open(d->w, path, d->o.engine, outfile_mode_within(0644, d->v.perm), d->err,
			      sizeof(d->err));
	d->part_failed = ret < 0;
	if (ret < 0)
		return ret;
	d->strings_sent = 1;	/* id 0 is the empty string in every ring */
	d->threads_sent = 0;
	/* each part carries the counters, read on its own (older parts may
	 * have been deleted): the first pass writes them if any is not 0 */
	memset(&d->loss_sent, 0, sizeof(d->loss_sent));
	d->st.parts++;
	/* only now that the new part exists: a part that cannot be opened
	 * stops the collector, and must not have cost an old one */
	if (d->part)
		parts_prune(d->parts);
	ret = put_header(d);
	/* the part names the strings and threads before the records that
	 * use them (a reader may be given it alone); what it holds past
	 * them is what --max-size bounds (part_full()) */
	if (ret == 0)
		ret = drain_put_tables(d);
	d->part_base = cw_offset(d->w) + cw_buffer(d->w)->size;
	return ret;
}

/* Appends frames for strings and name slots the capture does not have yet,
 * read from the ring. */
int drain_put_tables(struct drain *d)
{
	return shmt_cap_put_ring_tables(cw_buffer(d->w), &d->v, &d->strings_sent,
					&d->threads_sent);
}

int drain_put_loss(struct drain *d, bool force)
{
	struct shmt_cap_loss l = {
		.at_ns = shmtrace_now(),
		/* the validated geometry, not the header a peer may rewrite */
		.max_strings = d->v.max_strings,
		.string_bytes = d->v.string_bytes,
		.max_threads = d->v.max_threads,
		.published = shmt_ring_head(&d->v),
	};

	shmt_loss_read(&d->v, &l.counters, false);
	/* published alone moving is no news: the final frame carries it */
	if (!force && !memcmp(&l.counters, &d->loss_sent, sizeof(l.counters)))
		return 0;
	d->loss_sent = l.counters;
	d->st.ring = l.counters;
	return shmt_cap_put_loss(cw_buffer(d->w), &l);
}
