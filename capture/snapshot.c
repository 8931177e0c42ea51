/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c - a snapshot file (snapshot.h): the copy of the ring
 * (snapshot_copy.c) with its names and counters, the oldest records left
 * out to keep within a size, its header written last but put first, the
 * whole file named once it is written.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hash.h"
#include "loss.h"
#include "outfile.h"
#include "snapshot_int.h"

/* What is read from the segment, under its SIGBUS guard. */
struct snap_read {
	struct snap *s;
	msgpack_sbuffer tables;
	struct shmt_cap_loss loss;
	int ret;
};

static int guarded_read(void *arg)
{
	struct snap_read *g = arg;
	struct snap *s = g->s;
	const struct shmt_view *v = s->v;
	uint32_t strings = 1, threads = 0;	/* id 0 is "" in every ring */

	g->ret = snap_copy(s);
	/* after the records, so that every id they use is in them */
	if (!g->ret)
		g->ret = shmt_cap_put_ring_tables(&g->tables, v, &strings, &threads);
	shmt_loss_read(v, &g->loss.counters, false);
	s->ring_id = shmt_ring_id(v);
	g->loss.published = s->info.end_seq;
	return 0;
}

/* The losses the snapshot carries: the ring's own counters of what its
 * producers lost (cumulative, as every capture's), and what the copy
 * lost of the window in place of the ring's `overwritten` and `torn`
 * (which count what collectors found). */
static void loss_of(struct snap *s, struct shmt_cap_loss *l, uint64_t at_ns)
{
	l->at_ns = at_ns;
	l->counters.overwritten = s->info.overwritten;
	l->counters.torn = s->torn;
	l->max_strings = s->v->max_strings;
	l->string_bytes = s->v->string_bytes;
	l->max_threads = s->v->max_threads;
}

/* The earliest of t and the starts of the records of f's frames from k
 * on (t 0: none yet); 0 when there are none. */
static uint64_t start_of(const struct snap_frames *f, size_t k, uint64_t t)
{
	for (; k < f->n; k++)
		if (!t || f->v[k].min_ts < t)
			t = f->v[k].min_ts;
	return t;
}

/* Leaves the window's oldest frames out until the file is at most max
 * bytes (fixed: what is not the window's frames), with the losses the
 * copy counted before the first one kept; *kept is the first frame kept
 * (f->n: none). Returns the offset in the window's buffer of the first
 * frame kept. */
static size_t cut_to_fit(struct snap *s, uint64_t max, uint64_t fixed, size_t *kept)
{
	struct snap_frames *f = &s->win;
	size_t k = 0;

	*kept = 0;
	if (!max)
		return 0;
	while (k < f->n && fixed + f->buf.size - f->v[k].off > max) {
		s->info.cut += f->v[k].n;
		s->records -= f->v[k].n;
		k++;
	}
	*kept = k;
	if (!k)
		return 0;
	if (k == f->n) {
		/* the window's losses go with it; the blocks', counted after
		 * it, stay */
		s->info.first_seq = s->info.end_seq;
		s->info.overwritten -= s->win_overwritten;
		s->torn -= s->win_torn;
		return f->buf.size;
	}
	/* the window now begins with its first frame kept */
	s->info.first_seq = f->v[k].first_seq;
	s->info.overwritten -= f->v[k].overwritten;
	s->torn -= f->v[k].torn;
	return f->v[k].off;
}

/* A run id of its own: the snapshot's records are numbered from the
 * ring's sequences, and its staged ones after them, which a collector's
 * capture of the ring must never take for duplicates of its own. */
static uint64_t run_id_of(const struct shmt_view *v, const struct shmt_cap_snapshot *in)
{
	uint64_t h = hash_splitmix64(v->clock.realtime0 ^ hash_splitmix64(v->clock.mono0));

	h = hash_splitmix64(h ^ in->end_seq);
	h = hash_splitmix64(h ^ ((uint64_t)getpid() << 32 ^ in->to_ns));
	return h & ((1ull << 53) - 1);
}

static void header_of(const struct snap *s, uint64_t started_ns, struct shmt_cap_header *h)
{
	const struct shmt_view *v = s->v;

	memset(h, 0, sizeof(*h));
	h->run_id = run_id_of(v, &s->info);
	gethostname(h->host, sizeof(h->host) - 1);
	snprintf(h->ring, sizeof(h->ring), "%s", s->o->ring);
	h->ring_capacity = v->capacity;
	h->ring_mode = v->mode;
	h->clock_tsc = v->clock.tsc_ok;
	h->collector_pid = (uint32_t)getpid();
	h->realtime0 = v->clock.realtime0;
	h->mono0 = v->clock.mono0;
	h->started_ns = started_ns;
	h->ring_id = s->ring_id;
	h->snapshot = s->info;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t k = write(fd, c, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

/* The file: header, tables, the window's frames from off, the staged
 * ones, then tail (loss and end). */
static int write_file(const char *path, const struct shmt_snap_opts *o, uint32_t perm,
		      const msgpack_sbuffer *parts[], const size_t from[], size_t nparts, char *err,
		      size_t errlen)
{
	struct outfile out;
	/* readable by no one the ring does not let read it */
	int ret = outfile_open(&out, path, o->exclusive ? OUTFILE_NEW : OUTFILE_WHOLE,
			       outfile_mode_within(0666, perm), err, errlen);

	if (ret < 0)
		return ret;
	for (size_t i = 0; i < nparts && !ret; i++)
		ret = write_all(out.fd, parts[i]->data + from[i], parts[i]->size - from[i]);
	if (!ret && o->sync && fsync(out.fd) < 0)
		ret = -errno;
	if (ret < 0) {
		snprintf(err, errlen, "writing '%.400s': %s", path, strerror(-ret));
		outfile_abort(&out);
		return ret;
	}
	ret = outfile_commit(&out, err, errlen);
	/* the name too, as the file's bytes: a snapshot taken is there
	 * after a power loss. A directory that cannot be opened to read
	 * (write and search are what a snapshot needs) or synced (a file
	 * system without it) leaves the snapshot written; an I/O error
	 * does not */
	if (!ret && o->sync && outfile_sync_dir(path) == -EIO) {
		ret = -EIO;
		snprintf(err, errlen, "syncing the directory of '%.400s': %s", path, strerror(EIO));
	}
	return ret;
}

/* Everything after the copy: counters, header, the file. */
static int finish(struct snap *s, struct snap_read *g, uint64_t started_ns, const char *path,
		  struct shmt_snap_result *res, char *err, size_t errlen)
{
	const struct shmt_snap_opts *o = s->o;
	msgpack_sbuffer head = { 0 }, tail = { 0 };
	struct shmt_cap_header h;
	struct shmt_cap_end e = { 0 };
	uint64_t first_ts;
	size_t off, kept;
	int ret;

	s->info.to_ns = shmt_clock_now(&s->v->clock);
	/* a guess of the header and the tail, for the bound: they are small */
	off = cut_to_fit(s, o->max_bytes, g->tables.size + s->staged.buf.size + 2048 +
			 sizeof(s->info.trigger), &kept);
	/* where the snapshot's records start: at since, unless those kept
	 * (the window's the bound left, and the staged ones) begin after it;
	 * nowhere (0) when it holds none, none copied or all left out for
	 * the bound: no start is made up */
	first_ts = start_of(&s->staged, 0, start_of(&s->win, kept, 0));
	s->info.from_ns = !first_ts ? 0 : first_ts > s->since ? first_ts : s->since;
	loss_of(s, &g->loss, s->info.to_ns);
	e.records = s->records;
	e.end_ns = s->info.to_ns;
	header_of(s, started_ns, &h);
	ret = shmt_cap_put_header(&head, &h);
	if (!ret)
		ret = shmt_cap_put_loss(&tail, &g->loss);
	if (!ret)
		ret = shmt_cap_put_end(&tail, &e);
	if (ret < 0) {
		snprintf(err, errlen, "out of memory");
	} else {
		const msgpack_sbuffer *parts[] = { &head, &g->tables, &s->win.buf, &s->staged.buf,
						   &tail };
		const size_t from[] = { 0, 0, off, 0, 0 };

		ret = write_file(path, o, s->v->perm, parts, from, 5, err, errlen);
		res->info = s->info;
		res->records = s->records;
		res->bytes = 0;
		for (size_t i = 0; i < 5; i++)
			res->bytes += parts[i]->size - from[i];
	}
	msgpack_sbuffer_destroy(&head);
	msgpack_sbuffer_destroy(&tail);
	return ret;
}

int shmt_snapshot_write(const struct shmt_view *v, const char *path,
			const struct shmt_snap_opts *o, struct shmt_snap_result *res,
			char *err, size_t errlen)
{
	uint64_t started_ns = shmt_clock_now(&v->clock);
	struct snap_read g = { 0 };
	int ret;

	memset(res, 0, sizeof(*res));
	g.s = calloc(1, sizeof(*g.s));
	if (!g.s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	g.s->v = v;
	g.s->o = o;
	ret = shmt_guarded(guarded_read, &g);
	if (!ret)
		ret = g.ret;
	if (ret == -EFAULT)
		snprintf(err, errlen, "ring '%s' shrank while being copied", o->ring);
	else if (ret < 0)
		snprintf(err, errlen, "out of memory");
	else
		ret = finish(g.s, &g, started_ns, path, res, err, errlen);
	msgpack_sbuffer_destroy(&g.tables);
	snap_free(g.s);
	free(g.s);
	return ret;
}
