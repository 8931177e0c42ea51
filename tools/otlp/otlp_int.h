/* SPDX-License-Identifier: MIT */
/*
 * otlp_int.h - what the parts of the OTLP export share: the exporter's
 * state, a span as the model hands it to the encoder, and the functions
 * one part calls in another (ids, JSON encoding, batches and sending).
 */
#ifndef SHMTRACE_OTLP_INT_H
#define SHMTRACE_OTLP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "args.h"
#include "array.h"
#include "extsort.h"
#include "flows.h"
#include "hash.h"
#include "hosts.h"
#include "http.h"
#include "nest.h"
#include "obuf.h"
#include "outfile.h"
#include "exporters.h"

/* Most instants one span takes as its events (the OpenTelemetry SDKs'
 * default limit); the others inside it are zero-length spans, its
 * children, so that no span's text grows without bound. */
#define OTLP_EVENTS_MAX	128u

/* The deepest nesting of one thread followed (nest.h): a span deeper than
 * this is the child of the span at this depth, and what it encloses
 * too. Under 1 MiB of stack. */
#define OTLP_DEPTH_MAX	16384u

/* Open spans are numbered apart from the other records, down from this
 * (the k-th to arrive is OTLP_OPEN_SEQ - k), so that a span's number,
 * which makes its id, is its place among the records alone: the same in
 * the file export and in the stream, which cannot wait for the end of
 * the pass to number them. */
#define OTLP_OPEN_SEQ	(1ull << 62)

/* The memory of the sorts (util/extsort.h) of the export's model: the
 * spans (struct node; with 4 MiB, an export of 10 M spans ran no slower
 * than with 16 and its peak RSS was 14 MB less), their flows' part (struct hop), the instants that are
 * events (struct event) and the trees that join a flow (struct join). */
#define NODES_MEM	(4u << 20)
#define HOPS_MEM	(8u << 20)
#define EVENTS_MEM	(4u << 20)
#define JOINS_MEM	(1u << 20)

/* A process's span buffer bigger than this and than twice what it held in
 * the batch just sent is freed: memory follows the batch, not the past. */
#define OTLP_KEEP_BYTES	(256u << 10)

/* (thread, category) attribute lists kept ready, direct-mapped by hash. */
#define OTLP_FRAGS	256u

/* A time's digits above the last 8, kept made: they change every 0.1 s. */
struct time_text {
	uint64_t hi;
	char text[16];			/* 11 digits today, 12 at most */
	uint8_t len;			/* 0: none yet */
};

/*
 * A span, instant or open span of the pass (k.kind), in a thread's tree
 * (k.pid, as written, k.tid): k.user is its name, args its arguments in
 * o->args (0: none). Sorted with nest_cmp(), they walk each tree in
 * preorder (otlp_tree.c).
 */
struct node {
	struct nest_key k;
	uint32_t cat, args;
};

/* The category of a trigger (shmtrace_trigger()), which goes through the
 * walk as an instant: no string id is so large. Written as category
 * "shmtrace", and its name as "trigger: NAME", as the other exports do. */
#define OTLP_CAT_TRIGGER	0x10000u

/*
 * What its flow gives a record of a flow (a hop), made when the flows are
 * assembled (otlp_hops.c) and sorted as the nodes are, so that the walk
 * meets it together with its node.
 */
struct hop {
	struct nest_key k;		/* its node's */
	uint64_t flow;
	uint64_t thi, tlo;		/* the flow's trace */
	uint64_t owner;			/* the flow's: the seq of its first record */
	uint64_t prev;			/* the span id of the hop before it in the flow, or of
					 * the remote parent its traceparent names; 0: none */
	uint64_t step;			/* its place among the hops, rising along each flow */
	uint32_t skip;			/* a traceparent's instant: no span of its own */
	uint32_t pad;
};

/* An instant, an event of the span numbered span (in walk order). */
struct event {
	uint64_t span, ts, seq;
	uint32_t name, cat, args, pad;
};

/* The thread tree rooted at the span numbered seq holds a hop: its first
 * hop's trace, which the tree joins, the parent its root gets, and that
 * hop's step. */
struct join {
	uint64_t seq, thi, tlo, owner, prev, step;
};

/* An event as written. */
struct inst {
	uint64_t ts;
	uint32_t name, cat, args;
};

/* The spans of one process in the batch being built. */
struct pbatch {
	uint32_t outpid;
	uint32_t nspans;
	struct obuf spans;
	size_t pre_off, pre_len;	/* its resource and scope in otlp.req */
};

/* An array of elements found by a 64-bit key, each made zeroed when its
 * key is first asked for; the last key asked for is found at once. */
struct keyed {
	struct u64map map;		/* key -> index + 1 */
	char *v;
	size_t n, cap, size;
	uint64_t last_key;
	size_t last;			/* its index + 1, 0: none yet */
};

/* A string of the trace as a quoted JSON string, made once per id. */
struct estr {
	char *p;
	uint32_t len;
	bool made;
};

/* The attributes every span of one thread and category starts with:
 * thread.id, thread.name (if known) and shmtrace.category. */
struct frag {
	uint32_t outpid, tid, cat;
	bool used;
	struct obuf text;
};

/* Where a request's pieces go: gathered in body (for a POST), or listed
 * in iov[0..n) pointing at the batch's buffers (for writev()). */
struct sink {
	struct obuf *body;
	struct iovec *iov;
	size_t n, cap;
	bool oom;
};

struct otlp_writer;
struct otlp_stream;
struct otlp_carry;

struct otlp {
	struct source *s;
	const struct otlp_opts *o;
	struct hosts hosts;
	struct flows fl;
	struct args_pend held;		/* the last span or instant, and its arguments */
	struct args_store args;		/* arguments of the nodes (node.args) */
	/* where the held event's text arguments are kept as they come: args,
	 * or the stream's store that it empties after each event */
	struct args_store *arrive;
	struct open_spans open;		/* open spans, exported after the pass */
	struct u64map last;		/* (outpid << 32 | tid) -> its last moment */
	struct extsort *nodes;		/* struct node, by nest_cmp() */
	struct extsort *hops;		/* struct hop, by nest_cmp() */
	struct keyed batch;		/* outpid -> struct pbatch */
	size_t batch_len;		/* span bytes in the batch */
	uint32_t batch_procs;		/* processes with spans in the batch */
	uint64_t batch_spans;
	struct obuf req;		/* a POST's resources and scopes */
	struct obuf body;		/* a whole request, for a POST */
	struct estr *esc;		/* each string id's JSON text, [nstr] */
	struct obuf scratch;		/* an id's JSON text being made */
	struct frag *frags;		/* [OTLP_FRAGS] */
	uint64_t seq, salt, wall_off;
	uint64_t nopen;			/* open spans numbered (the stream's) */
	/* the live stream this model feeds (stream_*.c), NULL for the file
	 * export; and the flows it continues from one release to the next */
	struct otlp_stream *st;
	struct otlp_carry *carry;
	struct time_text time;		/* the upper digits of the last time */
	struct pick_pass pass;		/* pick_record()'s for the pass */
	int fd;				/* the output file, or -1 */
	struct outfile of;		/* fd's temporary, renamed to -o's path once written */
	struct otlp_writer *w;		/* its writer, without an endpoint */
	bool to_http;
	struct http_url url;
	int timeout_ms;			/* each step's (http_timeout_from_env()) */
	/* the flow being assembled: its trace, owner and last hop; the hops
	 * assembled (struct hop's step) */
	uint64_t thi, tlo, owner, prev, steps;
	/* the flow before it, and how many flows its id made before (an id
	 * reused after a step that terminated its flow) */
	uint64_t last_flow;
	uint32_t last_scope, reuse;
	bool flows_seen;
	/* what happened */
	uint64_t spans, events, counters, flows, names_lost;
	uint64_t requests, spans_sent, requests_sent, retries_used, rejected;
	/* a request to the endpoint failed (-errno, o->err says why): nothing
	 * more is sent, the pass goes on counting the spans not sent */
	int send_failed;
	bool counted;			/* the pass ended: spans is every span */
	char err[768];
};

/* Why a span links to another (Span.links): the hop before it in its flow
 * (its parent is the span enclosing it), or the span enclosing it, in
 * another trace (its parent is the hop before it). */
enum { LINK_NONE, LINK_PREV_HOP, LINK_ENCLOSING };

/* kind: SHMTRACE_KIND_SPAN, _INSTANT (zero-length) or _OPEN (unfinished) */
struct span {
	uint32_t outpid, tid, name, cat, kind;
	uint64_t ts, dur, flow;
	uint64_t thi, tlo, id, parent;
	uint32_t args;			/* in o->args, 0: none */
	bool in_flow;			/* its trace is a flow's */
	uint32_t link;			/* LINK_*: to span lid of trace (lhi, llo) */
	uint64_t lhi, llo, lid;
	const struct inst *ev;
	size_t nev;
};

/* otlp.c: the model of src made (NULL: out of memory), and freed. */
struct otlp *otlp_new(struct source *src, const struct otlp_opts *opts);
void otlp_free(struct otlp *o);
/* The ids' salt and the wall clock of the source's run (ring 0). */
void otlp_set_run(struct otlp *o);

/* otlp.c: struct keyed. keyed_get() returns key's element (added says
 * whether it is new), NULL when out of memory; a pointer to an element
 * lasts until the next keyed_get(). keyed_at() is the i-th element made. */
void keyed_init(struct keyed *k, size_t size);
void *keyed_get(struct keyed *k, uint64_t key, bool *added);
void *keyed_at(const struct keyed *k, size_t i);
void keyed_free(struct keyed *k);

/* otlp_ids.c: ids that differ between captures and are the same on every
 * export of one (o->salt), and the W3C traceparent a flow may carry. */
void otlp_trace_id(uint64_t key, uint64_t *hi, uint64_t *lo);
uint64_t otlp_span_id(const struct otlp *o, uint64_t seq);
void otlp_flow_trace_id(struct otlp *o, const struct flow_ev *fe, uint64_t *hi, uint64_t *lo);
bool otlp_is_traceparent(struct otlp *o, const struct flow_ev *fe, uint64_t *hi, uint64_t *lo,
			 uint64_t *parent);

/* otlp_attrs.c: what both encodings say, decided once. */
/* Why a span links (Span.links' shmtrace.link), by LINK_*. */
extern const char *const otlp_link_why[];
/* A process's resource: service.name, host.name, process.pid and
 * process.executable.name (NULL: not known); or, process false, the
 * export's own, of service.name and host.name alone. */
struct otlp_resource {
	char service[128];
	const char *host, *pname;
	uint32_t pid;
	bool process;
};
void otlp_resource_of(struct otlp *o, uint32_t outpid, struct otlp_resource *r);
/* The resource of a request of no span that carries the losses (a trace
 * that lost records but has no span to carry them): service.name
 * "shmtrace" (or --service) and the first host's name. */
void otlp_loss_resource(struct otlp *o, struct otlp_resource *r);
/* The scope's counters that are not zero (loss.h's kinds when they can
 * be true, missing_records, names_lost, args_lost, the snapshots'), into
 * c: how many. */
struct otlp_counter {
	char key[48];
	uint64_t v;
};
#define OTLP_COUNTERS_MAX	(SHMT_LOSS_NKINDS + 8)
size_t otlp_scope_counters(struct otlp *o, struct otlp_counter *c);
/* Whether the scope says of any loss: a counter not 0, counters corrupt,
 * or the capture incomplete. */
bool otlp_scope_lossy(struct otlp *o);
/* What the scope says of the losses now, as a number: 0 when it says of
 * none, else a hash (never 0) of its counters' keys and values and of
 * the two flags, which differs once any of them does. The stream keeps
 * the one its last request carried, to tell what the endpoint was not
 * told yet. */
uint64_t otlp_scope_said(struct otlp *o);
/* Whether argument i of a is left out: a later one has its key (the last
 * is kept, as a reader of the Chrome export's "args" object keeps it). */
bool otlp_arg_repeated(struct otlp *o, const struct ev_args *a, uint32_t i);
/* The text of an event's name: string id name, or for a trigger (category
 * OTLP_CAT_TRIGGER) "trigger: NAME", made in buf[SOURCE_TRIGGER_LABEL_MAX]. */
const char *otlp_event_name(struct otlp *o, uint32_t name, uint32_t cat, char *buf, size_t *len);
/* The text of category cat: its string, or "shmtrace" for a trigger's. */
const char *otlp_event_cat(struct otlp *o, uint32_t cat, size_t *len);
/* Span sp's start and end on the wall clock (Unix ns): the end saturates,
 * so a forged duration never puts it before the start. */
void otlp_span_times(const struct otlp *o, const struct span *sp, uint64_t *start,
		     uint64_t *end);
/* Whether an event's name and category are strings of the trace. */
bool otlp_names_known(struct otlp *o, uint32_t name, uint32_t cat);
/* The attributes every span of thread (outpid, tid) in category cat
 * starts with, made by make (in its encoding) once and kept in a small
 * direct-mapped table. NULL: out of memory. */
typedef void (*otlp_frag_fn)(struct otlp *o, struct obuf *b, const char *tname, uint32_t tid,
			     uint32_t cat);
const struct obuf *otlp_frag(struct otlp *o, uint32_t outpid, uint32_t tid, uint32_t cat,
			     otlp_frag_fn make);

/* otlp_text.c: ids and times as text. */
/* Formatters writing at p, returning the end; the caller has made room
 * (16 bytes for otlp_time()'s upper digits, whatever their length). */
/* v as 16 lowercase hex digits. */
char *otlp_hex(char *p, uint64_t v);
/* Nanoseconds since the epoch in decimal, the upper digits from t. */
char *otlp_time(struct time_text *t, char *p, uint64_t ns);

/* otlp_json.c: the OTLP/JSON text. */
/* Appends span sp to its process's part of the batch. */
int otlp_put_span(struct otlp *o, struct pbatch *pb, const struct span *sp);
/* A process's resource, and its scope up to the spans ("...,\"spans\":["). */
void otlp_put_resource(struct otlp *o, struct obuf *b, uint32_t outpid);
/* A request of no span whose scope carries the losses (a trace that lost
 * records but has no span to carry them), its resource
 * otlp_loss_resource(); a line, as the file has it. */
void otlp_put_loss_request(struct otlp *o, struct obuf *b);
void otlp_json_free(struct otlp *o);

/* otlp_pb.c: the protobuf encoding. */
/* Appends span sp to its process's part of the batch, as a Span. */
int otlp_pb_span(struct otlp *o, struct pbatch *pb, const struct span *sp);
/* The batch as one ExportTraceServiceRequest in body (pre: room for a
 * process's resource and scope). Returns 0 or -ENOMEM. */
int otlp_pb_request(struct otlp *o, struct obuf *pre, struct obuf *body);
/* otlp_put_loss_request()'s request as protobuf, in body (pre: room for
 * its resource and scope). Returns 0 or -ENOMEM. */
int otlp_pb_loss_request(struct otlp *o, struct obuf *pre, struct obuf *body);

/* otlp_send.c: batches, written to the file and/or POSTed. */
/* Adds span sp to the batch, delivering the batch when it is full (the
 * stream's: stream_span()). */
int otlp_span(struct otlp *o, const struct span *sp);
/* Adds span sp to the batch in the request's encoding (JSON or protobuf). */
int otlp_encode_span(struct otlp *o, const struct span *sp);
/* Whether the batch is as large as a request of bytes should be. */
bool otlp_batch_full(const struct otlp *o, size_t bytes);
/* Empties the batch; frees the buffers it no longer needs. */
void otlp_batch_reset(struct otlp *o);
/* The spans an answer of 2xx says the endpoint rejected (OTLP partial
 * success, JSON or protobuf as its Content-Type says), its message in msg
 * (escaped for a terminal). */
uint64_t otlp_partial_success(const struct http_answer *a, char *msg, size_t msglen);
/* The first line of an answer's body, escaped for a terminal, into buf. */
const char *otlp_answer_line(const struct http_answer *a, char *buf, size_t len);
/* Whether a request that failed so (ret < 0: its -errno; else the HTTP
 * status) is tried again, as the OTLP specification says: 429, 502, 503,
 * 504, and connections refused, reset or timed out. */
bool otlp_retryable(int ret, int status);
/* A Retry-After is followed up to this many seconds. */
#define OTLP_RETRY_AFTER_MAX_S	300u
/* The wait in ms before a request is tried again: the Retry-After the
 * endpoint asked for (retry_after_s, 0 for none), up to
 * OTLP_RETRY_AFTER_MAX_S, else half of *delay and a random part of the
 * other half (jitter: senders that failed together do not come back
 * together); *delay then doubles, up to max_ms. */
unsigned otlp_retry_wait(unsigned *delay, unsigned max_ms, unsigned retry_after_s);
/* Writes the batch as one request to the file and/or the endpoint. */
int otlp_deliver(struct otlp *o);
/* To the endpoint (and the file beside), with no request sent yet: one of
 * no span carrying the losses (otlp_put_loss_request()), as
 * otlp_write_losses() writes it to a file. Returns what otlp_deliver()
 * does. */
int otlp_deliver_losses(struct otlp *o);
/* The batch as a request: each process's resource and scope made in pre,
 * then all the pieces to k (k->oom: out of memory). */
void otlp_put_request(struct otlp *o, struct obuf *pre, struct sink *k);
/* writev()s all of v[0..n) (changing v). Returns 0 or an errno. */
int otlp_write_all(int fd, struct iovec *v, size_t n);
void otlp_batches_free(struct otlp *o);

/* otlp_write.c: requests to the file, written by a thread of their own
 * while the next batch is made. */
/* Starts the writer of o->fd. Returns 0 or -ENOMEM. */
int otlp_writer_start(struct otlp *o);
/* Hands the batch to the writer; its span buffers go with it. Returns 0,
 * -ENOMEM, or -EIO (an earlier request failed) with o->err set. */
int otlp_write_batch(struct otlp *o);
/* With no request written yet, one of no span carrying the losses
 * (otlp_put_loss_request()), so that a trace of no span still says what
 * it lost. Returns 0, -ENOMEM or -EIO with o->err set. */
int otlp_write_losses(struct otlp *o);
/* Gives b (empty, without a buffer) a buffer of a written request. */
void otlp_writer_spare(struct otlp *o, struct obuf *b);
/* Waits for every request to be written and ends the writer. Returns 0
 * or -EIO with o->err set. */
int otlp_writer_finish(struct otlp *o);

/* otlp_hops.c: the flows assembled into o->hops, read back in the
 * nodes' order; the flows' memory freed. Returns 0 or -errno. */
int otlp_hops(struct otlp *o);

/*
 * A flow as the stream's releases continue it (o->carry): a release
 * assembles the flows of its own records, and a step that comes in a
 * later release (its flow's other steps sent already) joins that flow's
 * trace after its last hop, or begins the id's next flow after a
 * terminating step.
 */
struct carry_ent {
	uint64_t key;			/* the flow id and its scope */
	uint64_t thi, tlo, owner;	/* its trace, and the owner of its spans */
	uint64_t last;			/* the span id of its last hop */
	uint64_t at;			/* where that hop is placed (flow_ev_at()) */
	uint64_t used;			/* when it was last met, for forgetting */
	uint32_t reuse;			/* flows of the id before it */
	uint32_t terminated;		/* its last hop terminates it */
};
struct otlp_carry *otlp_carry_new(void);
void otlp_carry_free(struct otlp_carry *c);
/* What the last otlp_hops() learnt: kept (once its release is sent
 * whole; now: the latest time the records reach, to forget old flows),
 * or forgotten. Returns 0 or -ENOMEM. */
int otlp_carry_commit(struct otlp_carry *c, uint64_t now);
void otlp_carry_drop(struct otlp_carry *c);
/* The flows carried, for the stream's checkpoint, and one put back. */
size_t otlp_carry_count(const struct otlp_carry *c);
const struct carry_ent *otlp_carry_at(const struct otlp_carry *c, size_t i);
int otlp_carry_put(struct otlp_carry *c, const struct carry_ent *e);

/* otlp_tree.c: the walks of the threads' trees, which write every span.
 * Returns 0 or -errno. */
int otlp_tree(struct otlp *o);

/* otlp_spans.c: records to nodes and hops; the whole pass. */
int otlp_run(struct otlp *o);
/* A record of the pass (a source_record_fn, ctx o). */
int otlp_on_record(void *ctx, const struct shmt_record *r, uint64_t start_time);
/* The event held back for its arguments, taken now. Returns 0 or -errno. */
int otlp_take_held(struct otlp *o);
/* Span, instant, trigger or open span r (its dur set) of thread (outpid, r->tid),
 * numbered seq, with its arguments a (or NULL, texts in o->args), as a
 * node of the walk; a record of a flow a hop as well. ring is the
 * source's index of its ring. Returns 0 or -errno. */
int otlp_node(struct otlp *o, const struct shmt_record *r, uint32_t outpid, uint32_t ring,
	      uint64_t seq, const struct ev_args *a);

/* stream_model.c: the stream's events, held until their trees and flows
 * are whole. An event with its arguments (texts in o->arrive), and an
 * open span with those it had. Return 0 or -errno. */
int stream_hold_event(struct otlp *o, const struct shmt_record *r, uint32_t outpid, uint64_t seq,
		      const struct ev_args *a);
int stream_hold_open(struct otlp *o, const struct shmt_record *r, uint32_t outpid, uint64_t seq,
		     const struct open_args *a);
/* A span the walk made, for the stream's batch (sampled, encoded). */
int stream_span(struct otlp *o, const struct span *sp);

#endif
