/* SPDX-License-Identifier: MIT */
/*
 * stream.c - `shmtrace stream`: a capture's spans to an OTLP/HTTP
 * endpoint, following the capture as the collector writes it. The pass
 * (tools/trace/source_follow.c) hands each record to the file export's
 * reading (otlp_spans.c), whose events are held (stream_hold.c) until
 * their trees and flows are whole (stream_model.c) and sent through the
 * export's own span model; the spans are sampled, encoded and cut into
 * requests with the checkpoint of where the pass was (stream_batch.c,
 * stream_ckpt.c), which the sender (stream_send.c) writes once the
 * endpoint took the request. Here: the pass's callbacks (a record,
 * nothing more for now, another run) and the run from start to end. The
 * capture is the queue: a slow endpoint makes the stream fall behind,
 * never the collector, and the stream reads on from the capture; past
 * --otlp-max-lag it skips ahead.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "source_follow.h"
#include "stream_int.h"

static volatile sig_atomic_t g_stop;

bool stream_stopping(void)
{
	return g_stop;
}

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

/* The names of processes and threads, when more came. */
static int refresh_names(struct otlp_stream *st)
{
	struct otlp *o = st->o;

	if (st->nthr_seen == st->src.nthr && !st->run_fresh)
		return 0;
	st->nthr_seen = st->src.nthr;
	hosts_free(&o->hosts);
	for (uint32_t i = 0; i < OTLP_FRAGS; i++)
		o->frags[i].used = false;
	return hosts_build(&o->hosts, &st->src);
}

/* The first record of a run: its ids. */
static int run_ready(struct otlp_stream *st)
{
	int ret;

	if ((ret = refresh_names(st)) < 0 || !st->run_fresh)
		return ret;
	st->run_fresh = false;
	otlp_set_run(st->o);
	return 0;
}

/* r passed over: counted, and numbered all the same, so that the spans
 * after keep their ids. */
static bool lag_skip(struct otlp_stream *st, const struct shmt_record *r)
{
	if (shmt_record_kind(r) == SHMTRACE_KIND_OPEN)
		st->o->nopen++;
	else if (!shmt_record_attached(r))
		st->o->seq++;
	stream_count(st, &st->c.skipped, 1);
	return true;
}

/* --otlp-max-lag: whether r is passed over (counted); the clock is read
 * when clocks says. */
static bool lagging(struct otlp_stream *st, const struct shmt_record *r, bool clocks)
{
	uint64_t end = r->ts + (shmt_record_kind(r) == SHMTRACE_KIND_SPAN ? r->dur : 0);
	uint64_t wall = end + st->o->wall_off, now;

	st->last_wall = wall;
	st->caught_up = false;
	if (!st->so->max_lag_ns || !clocks)
		return st->skipping && lag_skip(st, r);
	now = clock_ns(CLOCK_REALTIME);
	st->lag_ns = now > wall ? now - wall : 0;
	if (!st->skipping && st->lag_ns > st->so->max_lag_ns) {
		st->skipping = true;
		fprintf(stderr, "shmtrace stream: %.1f s behind the capture (--otlp-max-lag %.0f): "
			"skipping ahead, the records passed over counted\n",
			(double)st->lag_ns / 1e9, (double)st->so->max_lag_ns / 1e9);
	} else if (st->skipping && st->lag_ns < st->so->max_lag_ns / 2) {
		st->skipping = false;
	}
	return st->skipping && lag_skip(st, r);
}

/* Where the pass is, for the next checkpoint: from the event held back
 * for its arguments, if any, else after rseq. */
static void note_position(struct otlp_stream *st, uint64_t rseq, uint64_t pseq_before,
			  bool attached)
{
	struct otlp *o = st->o;

	st->last_rseq = rseq;
	if (o->held.has) {
		if (!attached) {
			st->pend_seq = rseq;
			st->pend_pseq = pseq_before;
		}
		st->next_seq = st->pend_seq;
		st->pseq = st->pend_pseq;
	} else {
		st->next_seq = rseq + 1;
		st->pseq = o->seq;
	}
	st->nopen = o->nopen;
}

/*
 * The collector's word on --pace-fd, read once in 64 records: 'p' while
 * its drain is behind, 'g' once it caught up. While the last word is 'p'
 * the reader waits, so that a burst is captured at the drain's full rate
 * and streamed from the capture after it; a stop, or the collector's end
 * (the pipe's), ends the wait. The sender sends what is queued meanwhile;
 * the status says "paused".
 */
static void pace(struct otlp_stream *st)
{
	struct pollfd p = { .fd = st->pace_fd, .events = POLLIN };
	bool waited = false;
	char b[64];
	ssize_t n;

	while (st->pace_fd >= 0) {
		while ((n = read(st->pace_fd, b, sizeof(b))) > 0)
			st->paused = b[n - 1] == 'p';
		if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			close(st->pace_fd);
			st->pace_fd = -1;
			st->paused = false;
		}
		if (!st->paused || stream_stopping())
			break;
		if (!waited) {
			/* `shmtrace stat` says so */
			stream_publish(st, "paused");
			stream_status(st, true);
			waited = true;
		}
		/* a signal (SIGTERM) ends it with EINTR */
		poll(&p, 1, -1);
	}
	if (waited) {
		stream_publish(st, st->skipping ? "skipping" : "running");
		stream_status(st, true);
	}
}

static int on_rec(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct otlp_stream *st = ctx;
	struct otlp *o = st->o;
	uint64_t rseq = source_follow_seq(&st->src), pseq = o->seq;
	bool clocks;
	int ret;

	if (stream_stopping())
		return 1;
	/* the clocks once in 64 records: enough for seconds of lag */
	if ((clocks = !st->clock_left)) {
		pace(st);
		st->clock_left = 64;
		st->idle_since = clock_ns(CLOCK_MONOTONIC);
	}
	st->clock_left--;
	st->fresh = true;
	if ((ret = run_ready(st)) < 0 ||
	    (st->replaying && rseq >= st->replay_to && (ret = stream_replay_end(st)) < 0))
		return ret == -ECANCELED ? 1 : ret;
	if (!st->replaying && lagging(st, r, clocks)) {
		if (!o->held.has)
			note_position(st, rseq, pseq, true);
		return 0;
	}
	ret = otlp_on_record(o, r, start_time);
	if (ret < 0)
		return ret;
	note_position(st, rseq, pseq, shmt_record_attached(r));
	/* read again up to where the checkpoint was: nothing to send yet */
	if (st->replaying)
		return 0;
	ret = model_release(st, false);
	/* the reader's own clock: the sender's writes are under the lock */
	if (ret == 0 && clocks && st->idle_since - st->status_at >= 1000000000ull) {
		st->status_at = st->idle_since;
		stream_publish(st, st->skipping ? "skipping" : "running");
		stream_status(st, false);
	}
	return ret == -ECANCELED ? 1 : ret;
}

/* Losses the endpoint was not told, with no span held that will carry
 * them: a quiet capture sends them in a request of their own (counters
 * only, or losses that came after the last span). */
static bool losses_waiting(struct otlp_stream *st)
{
	return st->run_started && !st->o->held.has && !st->m.live && stream_losses_untold(st);
}

/* Nothing more in the capture for now. */
static int on_idle(void *ctx)
{
	struct otlp_stream *st = ctx;
	struct otlp *o = st->o;
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	int ret = 0;

	if (stream_stopping())
		return 1;
	/* records came since the last time: quiet from now on, and the
	 * clocks read at the next one */
	if (st->fresh) {
		st->idle_since = now;
		st->fresh = false;
		st->clock_left = 0;
	}
	st->lag_ns = 0;
	st->caught_up = true;
	/* caught up short of the checkpoint: the rest went with a part */
	if (st->replaying && !st->run_fresh && (ret = stream_replay_end(st)) < 0)
		return ret == -ECANCELED ? 1 : ret;
	if (st->replaying)
		return 0;
	/* a quiet capture: what is held has waited long enough */
	if (now - st->idle_since >= st->so->hold_ns && (o->held.has || st->m.live) &&
	    !st->run_fresh && (ret = stream_take_held(st)) == 0)
		ret = model_release(st, true);
	if (ret == 0 && o->batch_spans && now - st->batch_t0 >= STREAM_FLUSH_NS)
		ret = stream_cut(st, false);
	/* the position alone, when records were passed over or sampled out;
	 * and the losses no span carries (a run of no record yet is made
	 * ready for them: its host's name) */
	else if (ret == 0 && !o->batch_spans && now - st->cut_at >= STREAM_FLUSH_NS &&
		 (st->next_seq != st->cut_seq || losses_waiting(st)) &&
		 (ret = run_ready(st)) == 0)
		ret = stream_cut(st, true);
	stream_publish(st, st->skipping ? "skipping" : "running");
	stream_status(st, false);
	return ret == -ECANCELED ? 1 : ret;
}

/* A run begins (run_id): after another in this pass, that one is sent
 * whole; after a checkpoint of another ring, what it held is counted
 * skipped (its names are not here). */
static int on_run(void *ctx, uint64_t run_id)
{
	struct otlp_stream *st = ctx;
	struct otlp *o = st->o;
	int ret;

	if (st->run_started && run_id != st->run_id) {
		if ((ret = run_ready(st)) < 0 || (ret = stream_take_held(st)) < 0 ||
		    (ret = model_release(st, true)) < 0 || (ret = stream_cut(st, true)) < 0)
			return ret;
	} else if (st->have_run && run_id != st->run_id && st->replaying) {
		/* a checkpoint of another ring: what it held is not here */
		st->c.skipped += st->nrheld + st->nropen;
		st->nrheld = st->nropen = 0;
		st->replaying = false;
	}
	if (!st->have_run || run_id != st->run_id) {
		/* numbers and flows from the start, as an export of it */
		st->run_id = run_id;
		st->next_seq = st->pseq = st->nopen = 0;
		o->seq = o->nopen = 0;
		o->open.last_end = 0;
		u64map_free(&o->last);
		u64map_init(&o->last);
		otlp_carry_free(o->carry);
		if (!(o->carry = otlp_carry_new()))
			return -ENOMEM;
		st->m.frontier = 0;
	}
	st->have_run = st->run_started = st->run_fresh = true;
	if (st->ckpt_exists)
		return 0;
	/* one now, so that a collector started again before the first answer
	 * keeps the parts not sent */
	st->ckpt_exists = true;
	return stream_cut(st, true);
}

/* ------------------------------------------------------------------ run */

static void install_signals(void)
{
	struct sigaction sa;

	/* no SA_RESTART: a wait for the lock or the endpoint sees it */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* The lock, the model, the checkpoint and the backlog: all before the
 * collector may truncate the capture. Returns 0 or -errno with err set. */
static int prepare(struct otlp_stream *st, char *err, size_t errlen)
{
	const struct stream_opts *so = st->so;
	struct follow_opts fo = { .output = so->capture, .collector_pid = so->collector_pid,
				  .follow = so->follow, .idle = on_idle, .run_begin = on_run,
				  .ctx = st };
	int ret;

	/* the source first, which, unless it follows, finds a capture that
	 * is not there or is none (a directory, an empty file): before any
	 * file is made beside it */
	if ((ret = source_open_follow(&st->src, &fo, err, errlen)) < 0)
		return ret;
	stream_paths(so->capture, st->ckpt_path, st->status_path, st->lock_path,
		     sizeof(st->ckpt_path));
	if ((ret = stream_lock(st, err, errlen)) < 0)
		return ret;
	st->o = otlp_new(&st->src, &so->oo);
	if (!st->o || !(st->o->carry = otlp_carry_new())) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	st->o->st = st;
	st->o->arrive = &st->arrive;
	if ((ret = ckpt_load(st, err, errlen)) < 0)
		return ret;
	st->ckpt_exists = ret == 1;
	/* the pass goes on from the oldest event held, numbered as then */
	st->o->seq = st->from_pseq;
	st->o->nopen = st->from_nopen;
	if ((ret = stream_backlog(st)) < 0) {
		snprintf(err, errlen, "keeping the parts of %s not sent yet: %s", so->capture,
			 strerror(-ret));
		return ret;
	}
	source_follow_from(&st->src, st->backlog, st->nbacklog, st->run_id, st->from_seq);
	return 0;
}

/* The capture ended: everything held goes, and the last checkpoint, with
 * the losses no span carried (stream_cut()). */
static int finish(struct otlp_stream *st)
{
	int ret = 0;

	st->lag_ns = 0;
	st->caught_up = true;
	if (!st->run_started)
		return st->replaying ? 0 : stream_cut(st, true);
	if ((ret = run_ready(st)) == 0 && (ret = stream_replay_end(st)) == 0 &&
	    (ret = stream_take_held(st)) == 0 && (ret = model_release(st, true)) == 0)
		ret = stream_cut(st, true);
	return ret;
}

static void say_ready(int fd)
{
	if (fd < 0)
		return;
	if (write(fd, "ready\n", 6) != 6)
		fprintf(stderr, "shmtrace stream: warning: --ready-fd %d: %s\n", fd, strerror(errno));
	close(fd);
}

/* What happened: on stderr, and on --status-fd for the collector. */
static void say_done(struct otlp_stream *st, const char *state)
{
	struct stream_counts c;
	struct stream_live l;
	char line[512];

	stream_publish(st, state);
	stream_status(st, true);
	pthread_mutex_lock(&st->cmu);
	c = st->c;
	l = st->live;
	pthread_mutex_unlock(&st->cmu);
	stream_summary(st, &c, &l, line, sizeof(line));
	if (st->so->status_fd >= 0) {
		dprintf(st->so->status_fd, "%s (%s)\n", line, state);
		close(st->so->status_fd);
	} else {
		fprintf(stderr, "shmtrace stream: %s (%s)\n", line, state);
	}
}

static void cleanup(struct otlp_stream *st)
{
	otlp_free(st->o);
	source_close(&st->src);
	model_free(&st->m);
	args_store_free(&st->arrive);
	gz_free(&st->gz);
	ob_free(&st->req);
	ob_free(&st->pre);
	for (size_t i = 0; i < st->nbacklog; i++)
		free(st->backlog[i]);
	free(st->backlog);
	free(st->rheld);
	free(st->ropen);
	if (st->lock_fd >= 0)
		close(st->lock_fd);
	if (st->pace_fd >= 0)
		close(st->pace_fd);
	pthread_mutex_destroy(&st->cmu);
	free(st);
}

int stream_main(const struct stream_opts *so)
{
	struct otlp_stream *st = calloc(1, sizeof(*st));
	char err[768] = "";
	bool stopped;
	int ret, rc = EXIT_OK;

	if (!st)
		return cli_runtime_error("stream", "out of memory");
	install_signals();
	st->so = so;
	st->lock_fd = -1;
	st->pace_fd = so->pace_fd;
	if (st->pace_fd >= 0)
		fcntl(st->pace_fd, F_SETFL, O_NONBLOCK);
	pthread_mutex_init(&st->cmu, NULL);
	args_store_init(&st->arrive);
	model_init(&st->m);
	gz_init(&st->gz, 1);
	if ((ret = prepare(st, err, sizeof(err))) < 0 || (ret = sender_start(st)) < 0) {
		rc = cli_runtime_error("stream", "%s", err[0] ? err : strerror(-ret));
		stream_unmake(st);
		cleanup(st);
		return rc;
	}
	say_ready(so->ready_fd);
	st->idle_since = clock_ns(CLOCK_MONOTONIC);
	stream_publish(st, "running");
	stream_status(st, true);
	ret = source_records(&st->src, on_rec, st, err, sizeof(err));
	stopped = ret > 0 || stream_stopping();
	if (ret == 0 && !stopped && (ret = finish(st)) == -ECANCELED)
		stopped = true;
	sender_finish(st);
	if (ret < 0 && ret != -ECANCELED)
		rc = cli_runtime_error("stream", "%s", err[0] ? err : strerror(-ret));
	if (st->s.failed)
		rc = cli_runtime_error("stream", "%s", st->s.err);
	say_done(st, rc ? "failed" : stopped ? "stopped" : "finished");
	/* failed or stopped before a run of the capture began (a directory
	 * followed, a file that is no capture, a collector that did not
	 * start): nothing was streamed, and the files this run made beside
	 * the capture go with it */
	if ((rc || stopped) && !st->run_started)
		stream_unmake(st);
	cleanup(st);
	return rc;
}
