/* SPDX-License-Identifier: MIT */
/*
 * stream_int.h - what the parts of the live stream share (`shmtrace
 * stream`, docs/DESIGN.md "The live stream"): the model that holds the
 * records until their trees and flows are whole (stream_model.c), the
 * checkpoint it is resumed from (stream_ckpt.c), the queue and the sender
 * (stream_send.c), and the command that runs them (stream.c).
 */
#ifndef SHMTRACE_STREAM_INT_H
#define SHMTRACE_STREAM_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "clock.h"
#include "gz.h"
#include "otlp_int.h"

/* --otlp-sample */
enum { SAMPLE_ALL, SAMPLE_FLOWS, SAMPLE_RATIO };

/* Defaults: a request holds at most this many spans (and bytes, well
 * under the 20 MiB an OpenTelemetry Collector takes); a span waits at
 * most this long (trace time) for the span around it; a stream this far
 * behind the capture skips ahead. */
#define STREAM_BATCH_SPANS	8192u
#define STREAM_BATCH_BYTES	(4u << 20)
#define STREAM_HOLD_NS		(5ull * 1000000000ull)
#define STREAM_MAX_LAG_NS	(600ull * 1000000000ull)
/* Events held at most (--otlp-max-held): past it, the oldest components
 * go out as they are, down to an eighth below it, so that one walk of
 * the file export's model sends thousands of events rather than one at
 * each record that comes. */
#define STREAM_HELD_MAX		262144u
/* Requests made and not yet answered, at most (the send queue). */
#define STREAM_QUEUE		4u
/* A partial batch goes out once its first span is this old and the
 * capture has nothing more for now. */
#define STREAM_FLUSH_NS		(1000ull * 1000000ull)

struct stream_opts {
	const char *capture;		/* FILE: its parts FILE.1, ... follow */
	struct http_url url;
	int timeout_ms;			/* each step's (http_timeout_from_env()) */
	const char *endpoint;
	const char *headers;		/* "Name: value\r\n" each, or NULL */
	bool gzip, follow;
	int sample;			/* SAMPLE_* */
	uint64_t ratio_bound;		/* SAMPLE_RATIO: trace ids below it kept */
	uint64_t max_lag_ns;		/* 0: never skip */
	uint64_t hold_ns;
	uint32_t held_max;		/* --otlp-max-held */
	uint32_t batch_spans;
	size_t batch_bytes;
	uint32_t collector_pid;		/* its collector, 0: none */
	int ready_fd, status_fd, pace_fd;	/* -1: none */
	struct otlp_opts oo;		/* the model's: service, protobuf */
};

/* What the stream did, over all its runs (kept in the checkpoint). */
struct stream_counts {
	uint64_t sent;			/* spans the endpoint took */
	uint64_t requests;		/* requests answered 2xx */
	uint64_t retried;		/* attempts made again */
	uint64_t rejected;		/* spans refused: 400, another 4xx or 5xx not
					 * retried, or a partial success */
	uint64_t skipped;		/* records passed over: --otlp-max-lag, parts
					 * deleted before they were read, a checkpoint
					 * of another ring */
	uint64_t sampled_out;		/* spans --otlp-sample left out */
};

/* ---------------------------------------------------------------- model */

/* The arguments of a held event, its texts after it. */
struct sargs {
	struct ev_args a;
	uint32_t tlen;
	char text[];
};

/* A held event: a span, instant or open span waiting for its tree and
 * its flow to be whole. */
/* Where in the capture an event is, and the pass's numbers before it:
 * what a checkpoint needs to read it again. */
struct sev_pos {
	uint64_t rseq;			/* its ring sequence */
	uint64_t pseq, nopen;		/* o->seq and o->nopen before it */
};

struct sev {
	struct shmt_record r;		/* as it came (an open span's dur as recorded) */
	struct sev_pos pos;
	uint64_t seq;			/* its number, its span id */
	uint64_t arr;			/* its arrival: 1, 2, ... */
	uint64_t end;			/* ts + dur, saturated */
	uint64_t cend;			/* a component's root: its latest end */
	struct sargs *args;		/* NULL: none */
	uint32_t outpid;
	uint32_t up;			/* union-find: its parent, itself at a root */
	uint32_t next;			/* 1 + the next member of its component, 0: none */
	uint32_t tail;			/* a root: 1 + its last member */
	uint32_t size;			/* a root: its members */
	bool live, inwin;
};

/* Index i of an array that lives on (an entry is checked by arrival). */
struct sref {
	uint32_t i;
	uint64_t arr;
};

struct sthread {
	struct sref *roots;		/* held events no span encloses yet, by arrival */
	size_t n, cap;
};

/* A flow's held steps: the flow going on, and the one a terminating
 * step ended (late steps placed before its end join it). */
struct sflow {
	uint64_t key;
	struct sref cur, ended;
	uint64_t end_at;
};

struct heap_ent {
	uint64_t cend;
	struct sref c;
};

struct stream_model {
	struct sev *v;
	size_t n, cap;			/* slots used, allocated */
	uint32_t *free;			/* slots to use again */
	size_t nfree, freecap;
	size_t live;
	uint64_t arr;			/* arrivals so far */
	uint64_t frontier;		/* the latest end of a record that came */
	struct sref *fifo;		/* events by arrival, for the oldest */
	size_t fhead, ftail, fcap;	/* a ring of fcap entries */
	struct heap_ent *heap;		/* components by their latest end */
	size_t nheap, heapcap;
	struct keyed threads;		/* (outpid << 32 | tid) -> struct sthread */
	struct keyed flows;		/* flow id and scope -> struct sflow */
	uint32_t *win;			/* the release being sent, by arrival */
	size_t nwin, wincap;
};

struct otlp_stream;

void model_init(struct stream_model *m);
void model_free(struct stream_model *m);
/* Holds event r (of outpid, at pos), numbered seq, with its arguments (or
 * NULL); its slot in *at (if not NULL). Returns 0 or -ENOMEM. */
int model_add(struct otlp_stream *st, const struct shmt_record *r, uint32_t outpid, uint64_t seq,
	      const struct sev_pos *pos, const struct open_args *a, uint32_t *at);
/* The oldest event held (arrival is ring order), or NULL. */
const struct sev *model_oldest(struct stream_model *m);
/* The events held, oldest first: from *k = 0, each call the next one
 * (moving *k past it), NULL after the last. */
const struct sev *model_next(const struct stream_model *m, size_t *k);
/* Sends what is whole: the components no record can join any more within
 * the hold (all: everything held), and the oldest past held_max. */
int model_release(struct otlp_stream *st, bool all);
/* Sends the release that a checkpoint was taken inside (the events marked
 * inwin, skipping the st->win_skip spans it says were sent), before
 * anything else. */
int model_resume_release(struct otlp_stream *st);

/* ---------------------------------------------------------------- queue */

/* A request: its body (compressed if so), its spans, and the checkpoint
 * to keep once the endpoint took it. */
struct qreq {
	struct obuf body, ckpt;
	uint64_t spans;
	size_t backlog_done;		/* backlog files read to their end before it */
	struct stream_counts at_cut;	/* the model's counts (skipped, sampled out) then */
};

struct sender {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool started, quit;
	struct qreq q[STREAM_QUEUE];
	unsigned head, n;
	struct http_conn conn;
	int failed;			/* a checkpoint could not be written: -errno */
	char err[512];
};

/* --------------------------------------------------------------- stream */

struct otlp_stream {
	const struct stream_opts *so;
	struct otlp *o;
	struct source src;
	struct args_store arrive;	/* the held event's texts as they come */
	struct stream_model m;
	struct gz gz;
	struct obuf req, pre;		/* a request made, a process's resource */
	struct sender s;
	char ckpt_path[4200], status_path[4200], lock_path[4200];
	char **backlog;			/* files of an earlier collector, read first */
	size_t nbacklog, backlog_cap, backlog_removed;
	int lock_fd;
	/* the lock and the status were not there before this run: it made
	 * them (stream_unmake() removes them) */
	bool lock_new, status_new;
	/* where the pass is: the ring sequence to read from again (records
	 * below it are in the model or sent), and the numbers then */
	uint64_t run_id, ring_id, next_seq, pseq, nopen;
	uint64_t pend_seq, pend_pseq;	/* the event held back for its arguments */
	/* going on from a checkpoint: the records from the oldest event it
	 * held up to next_seq (replay_to) are read again, and of them only the
	 * events it held are held again (by their numbers, in order, << 1 |
	 * in the release being sent: rheld the spans' and instants', ropen the
	 * k of the open spans'); the others were sent */
	bool replaying;
	uint64_t from_seq, from_pseq, from_nopen, replay_to;
	uint64_t *rheld, *ropen;
	size_t nrheld, rheld_pos, nropen, ropen_pos;
	uint64_t last_rseq;		/* the record handed over last */
	uint64_t cut_seq, cut_at;	/* next_seq at the last cut, and when (mono) */
	size_t nthr_seen;		/* name slots the hosts were built from */
	/* a run known (from the checkpoint, or begun), begun in this pass,
	 * not yet given a record; a checkpoint there, taken inside a release */
	bool have_run, run_started, run_fresh, ckpt_exists;
	/* the release being sent: spans made, and made before a checkpoint
	 * (sent already) to leave out */
	uint64_t win_made, win_skip;
	bool in_win;
	uint64_t batch_t0;		/* when the batch's first span was made (mono) */
	/* what the scope said of the losses (otlp_scope_said()) in the last
	 * request made: the checkpoint keeps it, so that a stream run again
	 * does not tell the same losses twice */
	uint64_t loss_said;
	uint64_t idle_since;		/* mono ns the capture last gave a record */
	bool fresh;			/* records came since nothing more did */
	uint64_t status_at;		/* mono ns of the last status written */
	unsigned clock_left;		/* records before the clocks are read again */
	int pace_fd;			/* --pace-fd, -1 once it ended */
	bool paused;			/* it last said 'p' */
	bool skipping;			/* --otlp-max-lag: passing records over */
	uint64_t lag_ns;		/* behind the record handed over last */
	uint64_t last_wall;		/* its end, ns since the epoch */
	bool caught_up;			/* nothing more in the capture for now */
	pthread_mutex_t cmu;		/* what follows, shared with the sender */
	struct stream_counts c;		/* what the checkpoints say, plus the live run */
	struct stream_live {
		uint64_t last_wall, held, status_at;
		bool caught_up;
		const char *state;
	} live;				/* the reader's, as the status shows it */
};

/* Adds n to count *c of st->c (the reader and the sender both count). */
static inline void stream_count(struct otlp_stream *st, uint64_t *c, uint64_t n)
{
	pthread_mutex_lock(&st->cmu);
	*c += n;
	pthread_mutex_unlock(&st->cmu);
}

/* stream_hold.c */
/* The event held back for its arguments taken into the model, none more
 * coming; the pass's place moves past it. Returns 0 or -errno. */
int stream_take_held(struct otlp_stream *st);
/* The pass read again reached where the checkpoint was (or the capture
 * has nothing more): the release it was taken inside goes first. */
int stream_replay_end(struct otlp_stream *st);

/* stream.c, stream_batch.c, stream_files.c */
/* Cuts the batch: a request with its checkpoint, queued; with no span,
 * only when force says so: then the checkpoint alone, or, when the
 * endpoint was not told the losses the scope says now, a request of no
 * span that carries them. */
int stream_cut(struct otlp_stream *st, bool force);
/* Whether the scope says of losses that no request made carried. */
bool stream_losses_untold(struct otlp_stream *st);
/* The reader's state (state: "running", "skipping", ...; NULL: as it
 * was) for the status and the summary. */
void stream_publish(struct otlp_stream *st, const char *state);
/* Writes the status file now (force) or when a second has passed. */
void stream_status(struct otlp_stream *st, bool force);
/* How far behind the capture the stream is (ns), from live (under cmu). */
uint64_t stream_lag(const struct stream_live *l);
bool stream_stopping(void);
/* Runs the stream so says. Prints its errors; returns the exit code. */
int stream_main(const struct stream_opts *so);

/* stream_files.c: the files beside the capture. */
/* Whether the side file at path (its stat st) is one a stream of ours
 * made: a regular file of this user with no other name. In a folder
 * anyone may write, another user may plant one at the name (a checkpoint
 * that skips records, a backlog of forged spans to send with our
 * credentials, a lock they hold). Returns 0, or -EPERM with err set. */
struct stat;
int stream_side_file_ours(const char *path, const struct stat *st, char *err, size_t errlen);
/* Its checkpoint's, status's and lock's paths (each len bytes). */
void stream_paths(const char *capture, char *ckpt, char *status, char *lock, size_t len);
/* Takes the lock: waits for another stream of the capture to stop.
 * Returns 0 or -errno with err set. */
int stream_lock(struct otlp_stream *st, char *err, size_t errlen);
/* A run that failed before it streamed anything: the files it made beside
 * the capture (the lock, which it still holds, and the status) removed;
 * what runs before it made stays. */
void stream_unmake(struct otlp_stream *st);
/* The backlog there, and, going on from a checkpoint with a collector,
 * the parts of the collector before it not sent yet moved into it.
 * Returns 0 or -errno. */
int stream_backlog(struct otlp_stream *st);
/* What was done, in one line. */
void stream_summary(const struct otlp_stream *st, const struct stream_counts *c,
		    const struct stream_live *l, char *buf, size_t len);
/* The status file (`shmtrace stat CAPTURE`): 0 or -errno. */
int stream_status_write(const struct otlp_stream *st, const struct stream_counts *c,
			const struct stream_live *l);

/* stream_ckpt.c: the checkpoint, a file beside the capture. */
/* The model and the position as bytes, into b. Returns 0 or -ENOMEM. */
int ckpt_make(struct otlp_stream *st, struct obuf *b);
/* Puts the counts in b's header and writes it durably: temporary file,
 * fsync, rename, fsync of the folder. Returns 0 or -errno. */
int ckpt_write(const char *path, struct obuf *b, const struct stream_counts *c);
/* Reads the checkpoint into st (the model, position and counts). Returns
 * 1 when there is one, 0 when there is none, or -errno (err says why:
 * not a checkpoint, damaged). */
int ckpt_load(struct otlp_stream *st, char *err, size_t errlen);

/* stream_send.c */
int sender_start(struct otlp_stream *st);
/* Queues r (taking its buffers), waiting while the queue is full. Returns
 * 0, or -ECANCELED when the stream stops. */
int sender_push(struct otlp_stream *st, struct qreq *r);
/* Waits until everything queued was sent (or the stream stops), then
 * ends the sender. */
void sender_finish(struct otlp_stream *st);

#endif
