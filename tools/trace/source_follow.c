/* SPDX-License-Identifier: MIT */
/*
 * source_follow.c - the back-end of a source that follows a capture as it
 * is written (source_follow.h). The collector appends whole frames, and
 * ends a part with an END frame that names the next one before it opens
 * it; so the files are read in that order, each frame once it is whole
 * (shmt_cap_follow()), waiting on inotify for more. A part that is not
 * this run's yet (a file left at its name by an earlier collector, which
 * the collector truncates when it begins the part) is waited for; one
 * that --max-files deleted before it was read is skipped, its records
 * counted.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/inotify.h>

#include "hash.h"
#include "capture.h"
#include "source_capture.h"
#include "source_follow.h"

struct follow {
	struct follow_opts o;
	size_t nfile;			/* files opened: the backlog's, then parts */
	uint32_t part;			/* the output's part to read next or being read */
	struct shmt_cap_reader *r;	/* the file being read, or NULL */
	bool in_output;			/* r is a part of the output */
	uint64_t prev_end_ns;		/* the part before ended then (0: none) */
	struct shmt_cap_header h;	/* the run's first header */
	bool have_run;
	uint64_t next_seq;		/* records below it were handed over */
	uint64_t seq;			/* the record handed over */
	uint64_t prev_seq;
	bool have_prev, gap, ended;
	uint64_t skipped;
	size_t backlog_done;
	struct u64map thr_seen;		/* name slots kept: a hash of each */
	int ino;			/* inotify on the output's folder, -1: none */
	char dir[PATH_MAX];
	bool warned;
};

static struct follow *fol(const struct source *s)
{
	return s->be;
}

uint64_t source_follow_seq(const struct source *s)
{
	return fol(s)->seq;
}

uint64_t source_follow_run(const struct source *s)
{
	return fol(s)->h.run_id;
}

uint64_t source_follow_skipped(const struct source *s)
{
	return fol(s)->skipped;
}

size_t source_follow_backlog_done(const struct source *s)
{
	return fol(s)->backlog_done;
}

bool source_follow_ended(const struct source *s)
{
	return fol(s)->ended;
}

void source_part_path(const char *output, uint32_t part, char *buf, size_t len)
{
	if (part)
		snprintf(buf, len, "%s.%u", output, part);
	else
		snprintf(buf, len, "%s", output);
}

int source_part_unsent(const char *path, uint64_t run_id, uint32_t collector_pid,
		       uint64_t next_seq)
{
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	char why[512];
	int ret = shmt_cap_open(path, &r, why, sizeof(why)), unsent = 0;

	if (ret < 0)
		return 0;
	if (shmt_cap_header_of(r)->run_id != run_id ||
	    shmt_cap_header_of(r)->collector_pid == collector_pid) {
		shmt_cap_close(r);
		return 0;
	}
	/* a file cut short (its collector killed) ends where it is */
	while (!unsent && shmt_cap_next(r, &f, why, sizeof(why)) == 1)
		unsent = f.type == SHMT_CAP_RECORDS &&
			 f.records.first_seq + f.records.n > next_seq;
	shmt_cap_close(r);
	return unsent;
}

static void part_path(const struct follow *f, uint32_t part, char *buf, size_t len)
{
	source_part_path(f->o.output, part, buf, len);
}

uint32_t source_part_scan(const char *output, uint32_t above, bool newest)
{
	const char *slash = strrchr(output, '/');
	const char *base = slash ? slash + 1 : output;
	size_t blen = strlen(base);
	char dir[PATH_MAX];
	uint32_t best = 0;
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - output + 1) : 1,
		 slash ? output : ".");
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		char *end;
		unsigned long k;

		if (strncmp(e->d_name, base, blen) || e->d_name[blen] != '.' ||
		    !e->d_name[blen + 1] || e->d_name[blen + 1] == '0')
			continue;
		k = strtoul(e->d_name + blen + 1, &end, 10);
		if (*end || k <= above || k > UINT32_MAX)
			continue;
		if (!best || (newest ? k > best : k < best))
			best = (uint32_t)k;
	}
	if (d)
		closedir(d);
	return best;
}

/* ----------------------------------------------------------- the runs */

/* A name slot, kept once: every part repeats them all. */
static int add_thread(struct source *s, struct follow *f, const struct shmt_thread *t)
{
	uint64_t key = hash_splitmix64(((uint64_t)t->pid << 32 | t->tid) ^ t->start_time) ^
		       fnv1a32(t->name, strnlen(t->name, sizeof(t->name))) ^
		       (uint64_t)fnv1a32(t->pname, strnlen(t->pname, sizeof(t->pname))) << 32;
	bool added;

	if (!u64map_get(&f->thr_seen, key, 0, &added))
		return -ENOMEM;
	return added ? source_add_thread(s, t, 0) : 0;
}

/* The source's tables emptied for another run. */
static void reset_tables(struct source *s, struct follow *f)
{
	for (uint32_t i = 0; i < s->nstr; i++) {
		free(s->str[i]);
		s->str[i] = NULL;
		s->slen[i] = 0;
	}
	s->nthr = 0;
	u64map_free(&f->thr_seen);
	u64map_init(&f->thr_seen);
	memset(&s->loss, 0, sizeof(s->loss));
}

/* A file of run h begins: the source takes the run's identity; another
 * run than the one before is announced first. */
static int begin_run(struct source *s, struct follow *f, const struct shmt_cap_header *h)
{
	int ret;

	if (f->have_run && h->run_id == f->h.run_id)
		return 0;
	if (f->o.run_begin && (ret = f->o.run_begin(f->o.ctx, h->run_id)) < 0)
		return ret;
	if (f->have_run)
		reset_tables(s, f);
	f->h = *h;
	f->have_run = true;
	f->have_prev = false;
	f->next_seq = h->run_id == f->o.run_id ? f->o.from_seq : 0;
	snprintf(s->hosts[0], sizeof(s->hosts[0]), "%s", h->host);
	s->realtime0 = h->realtime0;
	s->mono0 = h->mono0;
	s->clock_tsc = h->clock_tsc;
	s->capacity = h->ring_capacity;
	s->mode = h->ring_mode;
	return 0;
}

/* ------------------------------------------------------------- frames */

static int deliver(struct source *s, struct follow *f, const struct shmt_cap_frame *fr,
		   struct source_pass *p)
{
	uint64_t first = fr->records.first_seq;
	size_t i;
	int ret = 0;

	if (f->gap) {
		/* the parts --max-files deleted before they were read */
		if (first > f->next_seq)
			f->skipped += first - f->next_seq;
		f->gap = false;
	}
	for (i = source_new_from(f->next_seq, first, fr->records.n); i < fr->records.n && !ret; i++) {
		struct shmt_record rec = fr->records.v[i];

		if (!source_take(&rec, p))
			continue;
		s->records++;
		s->follows = f->have_prev && f->prev_seq + 1 == first + i;
		f->have_prev = true;
		f->prev_seq = f->seq = first + i;
		f->next_seq = first + i + 1;
		ret = p->fn(p->ctx, &rec, 0);
	}
	if (first + fr->records.n > f->next_seq)
		f->next_seq = first + fr->records.n;
	return ret;
}

/* One frame of the file being read. Returns 0, or fn's non-zero return. */
static int on_frame(struct source *s, struct follow *f, const struct shmt_cap_frame *fr,
		    struct source_pass *p)
{
	int ret = 0;

	switch (fr->type) {
	case SHMT_CAP_STRINGS:
		for (size_t i = 0; i < fr->strings.n && !ret; i++)
			ret = source_table_set(s->str, s->slen, s->nstr, fr->strings.v[i].id,
					       fr->strings.v[i].s, fr->strings.v[i].len);
		return ret;
	case SHMT_CAP_THREADS:
		for (size_t i = 0; i < fr->threads.n && !ret; i++)
			ret = add_thread(s, f, &fr->threads.v[i]);
		return ret;
	case SHMT_CAP_LOSS:
		shmt_loss_merge(&s->loss.counters, &fr->loss.counters, SHMT_LOSS_MAX);
		return 0;
	case SHMT_CAP_RECORDS:
		return deliver(s, f, fr, p);
	case SHMT_CAP_END:
		if (f->in_output && fr->end.next_part) {
			f->part = fr->end.next_part;
			f->prev_end_ns = fr->end.end_ns;
		} else if (f->in_output) {
			f->ended = true;
		}
		return 0;
	default:
		return 0;
	}
}

/* ------------------------------------------------------------ opening */

/* Whether h is the header of the part the output is at: the collector's,
 * of the run, begun after the part before it ended. */
static bool current_part(const struct follow *f, const struct shmt_cap_header *h, uint32_t part)
{
	if (f->o.collector_pid && h->collector_pid != f->o.collector_pid)
		return false;
	if (h->part != part)
		return false;
	return !part || !f->have_run || (h->run_id == f->h.run_id && h->started_ns >= f->prev_end_ns);
}

/* Opens the next file. Returns 1 when one is open, 0 when there is none
 * yet, 2 when there is none to come (not following), or -errno. */
static int open_next(struct source *s, struct follow *f, char *err, size_t errlen)
{
	char path[PATH_MAX + 16], why[512];
	struct shmt_cap_reader *r;
	const struct shmt_cap_header *h;
	bool backlog = f->nfile < f->o.nbacklog;
	int ret;

	if (backlog)
		snprintf(path, sizeof(path), "%s", f->o.backlog[f->nfile]);
	else
		part_path(f, f->part, path, sizeof(path));
	ret = shmt_cap_open(path, &r, why, sizeof(why));
	if (ret < 0 && backlog) {
		/* what it held is not readable: said, and skipped */
		source_warnx("%s", why);
		f->nfile++;
		f->backlog_done++;
		return open_next(s, f, err, errlen);
	}
	if (ret == -ENOENT && f->part && f->h.deleted.max_files) {
		uint32_t k = source_part_scan(f->o.output, f->part, false);

		if (k) {
			f->part = k;
			f->gap = true;
			return open_next(s, f, err, errlen);
		}
	}
	/* not there yet, or its header not whole yet; without following,
	 * a capture that is not there at all is an error */
	if ((ret == -ENOENT || ret == -EBADMSG || ret == -EPIPE) && (f->o.follow || f->have_run))
		return f->o.follow ? 0 : 2;
	if (ret < 0) {
		snprintf(err, errlen, "%s", why);
		return ret;
	}
	h = shmt_cap_header_of(r);
	if (!backlog && !current_part(f, h, f->part)) {
		shmt_cap_close(r);
		return f->o.follow ? 0 : 2;
	}
	if ((ret = begin_run(s, f, h)) < 0) {
		shmt_cap_close(r);
		return ret;
	}
	if (!backlog)
		f->h.deleted = h->deleted;
	f->r = r;
	f->in_output = !backlog;
	f->nfile++;
	return 1;
}

/* The file being read has ended (or, a backlog file, was cut where its
 * collector stopped). */
static void close_file(struct follow *f)
{
	shmt_cap_close(f->r);
	f->r = NULL;
	if (!f->in_output)
		f->backlog_done++;
}

/* Waits at most poll_ms for the output's folder to change. */
static void wait_more(struct follow *f)
{
	struct pollfd pfd = { .fd = f->ino, .events = POLLIN };
	char buf[4096];

	if (f->ino < 0) {
		poll(NULL, 0, (int)f->o.poll_ms);
		return;
	}
	if (poll(&pfd, 1, (int)f->o.poll_ms) <= 0)
		return;
	while (read(f->ino, buf, sizeof(buf)) > 0)
		;
}

/* ---------------------------------------------------------------- pass */

/* Reads the file open until it has nothing more (*done: it ended).
 * Returns 0, or fn's non-zero return, or -errno. */
static int read_file(struct source *s, struct follow *f, struct source_pass *p, bool *done,
		     char *err, size_t errlen)
{
	struct shmt_cap_frame fr;
	char why[512];
	int ret;

	*done = false;
	while ((ret = shmt_cap_follow(f->r, &fr, why, sizeof(why))) == 1)
		if ((ret = on_frame(s, f, &fr, p)) != 0)
			return ret;
	/* a part not followed ends where it is written, as a cut file */
	if (ret == -EAGAIN && f->in_output && !f->o.follow)
		f->ended = true;
	*done = ret == 0 || (ret == -EAGAIN && (!f->in_output || !f->o.follow));
	if (ret == 0 || ret == -EAGAIN)
		return 0;
	/* damaged: what came before it was handed over */
	snprintf(err, errlen, "%s", why);
	return ret;
}

static int follow_pass(struct source *s, struct source_pass *p, char *err, size_t errlen)
{
	struct follow *f = fol(s);
	int ret;

	for (;;) {
		bool done = false;

		if (!f->r && !f->ended) {
			ret = open_next(s, f, err, errlen);
			if (ret < 0)
				return ret;
			if (ret == 2)
				return 0;
		}
		ret = f->r ? read_file(s, f, p, &done, err, errlen) : 0;
		if (ret != 0)
			return ret;
		if (done) {
			close_file(f);
			if (f->ended)
				return 0;
			continue;
		}
		if (!f->o.follow)
			return 0;
		wait_more(f);
		if (f->o.idle && (ret = f->o.idle(f->o.ctx)) != 0)
			return ret > 0 ? 0 : ret;
	}
}

void source_follow_from(struct source *s, char *const *backlog, size_t nbacklog, uint64_t run_id,
			uint64_t from_seq)
{
	struct follow *f = fol(s);

	f->o.backlog = backlog;
	f->o.nbacklog = nbacklog;
	f->o.run_id = run_id;
	f->o.from_seq = from_seq;
}

static void follow_ring_info(const struct source *s, uint32_t i, const char **name,
			     uint64_t *ring_id, uint64_t *run_id)
{
	const struct follow *f = fol(s);

	(void)i;
	*name = f->h.ring;
	*ring_id = f->h.ring_id;
	*run_id = f->h.run_id;
}

static int follow_clock_offset(struct source *s, const char *host, int64_t ns)
{
	(void)s;
	(void)host;
	(void)ns;
	return -ENOENT;
}

static void follow_close(struct source *s)
{
	struct follow *f = fol(s);

	if (!f)
		return;
	shmt_cap_close(f->r);
	if (f->ino >= 0)
		close(f->ino);
	u64map_free(&f->thr_seen);
	free(f);
}

static const struct source_ops source_follow_ops = {
	.kind = "capture",
	.pass = follow_pass,
	.clock_offset = follow_clock_offset,
	.ring_info = follow_ring_info,
	.close = follow_close,
};

int source_open_follow(struct source *s, const struct follow_opts *o, char *err, size_t errlen)
{
	struct follow *f;
	const char *slash;

	memset(s, 0, sizeof(*s));
	/* not followed, the capture is read as it is now: one that is not
	 * there or is no capture (a directory, an empty file, other bytes)
	 * never becomes one, and is said now, before the caller begins */
	if (!o->follow) {
		struct shmt_cap_reader *r;
		int ret = shmt_cap_open(o->output, &r, err, errlen);

		if (ret < 0)
			return ret;
		shmt_cap_close(r);
	}
	s->ops = &source_follow_ops;
	s->name = o->output;
	s->be = f = calloc(1, sizeof(*f));
	s->hosts = calloc(1, sizeof(*s->hosts));
	s->host_of = calloc(1, sizeof(*s->host_of));
	if (!f || !s->hosts || !s->host_of || source_alloc_strings(s, CAP_MAX_STRINGS) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->o = *o;
	if (!f->o.poll_ms)
		f->o.poll_ms = 200;
	u64map_init(&f->thr_seen);
	s->nrings = 1;
	s->nhosts = 1;
	slash = strrchr(o->output, '/');
	if (slash)
		snprintf(f->dir, sizeof(f->dir), "%.*s", (int)(slash - o->output + 1), o->output);
	else
		snprintf(f->dir, sizeof(f->dir), ".");
	/* without inotify, a nap of poll_ms */
	f->ino = o->follow ? inotify_init1(IN_NONBLOCK | IN_CLOEXEC) : -1;
	if (f->ino >= 0 && inotify_add_watch(f->ino, f->dir, IN_MODIFY | IN_CREATE | IN_MOVED_TO |
					     IN_CLOSE_WRITE) < 0) {
		close(f->ino);
		f->ino = -1;
	}
	return 0;
}
