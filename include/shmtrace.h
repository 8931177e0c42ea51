/* SPDX-License-Identifier: MIT */
/*
 * shmtrace.h - the producer API of libshmtrace, a cross-process span tracer.
 *
 * A ring is a POSIX shared-memory segment (/dev/shm/<name>) that any number of
 * processes attach to. Each call below appends one fixed 40-byte record; a
 * separate collector (shmtrace-collector) drains the ring into a capture
 * file, and `shmtrace export` turns that (or a ring left behind by crashed
 * processes) into Chrome Trace Event JSON with flow arrows across processes.
 *
 * Conventions, as in liburing: functions return 0 (or a value) on success and
 * -errno on failure. Nothing here allocates on the hot path. All functions
 * are thread-safe; a handle may be shared by all threads of a process and is
 * inherited across fork() (the child records under its own pid).
 *
 *   shmtrace_t *t;
 *   if (shmtrace_open("myapp", &t) < 0) ...;     // ring made by the collector
 *   uint32_t cat = shmtrace_intern(t, "rpc");     // once, then cached
 *   uint32_t name = shmtrace_intern(t, "handle");
 *   uint64_t t0 = shmtrace_now();
 *   handle_request();
 *   shmtrace_span(t, cat, name, t0, shmtrace_now(), req->flow_id);
 *   shmtrace_close(t);
 *
 * Records are first written to a per-thread staging block that lives in the
 * shared segment itself, and moved into the ring under the ring's robust
 * mutex in batches. A record is durable (it survives the death of its
 * process) as soon as the call that wrote it returns.
 */
#ifndef SHMTRACE_H
#define SHMTRACE_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHMTRACE_VERSION_STRING "0.1.0"

typedef struct shmtrace shmtrace_t;

/* What a full ring does with a new record. */
enum shmtrace_mode {
	SHMTRACE_MODE_DISCARD = 0,	/* drop new records and count them */
	SHMTRACE_MODE_OVERWRITE = 1,	/* flight recorder: overwrite the oldest, count them */
};

/* Record kinds, as stored in the ring. */
enum shmtrace_kind {
	SHMTRACE_KIND_NONE = 0,		/* never a valid record */
	SHMTRACE_KIND_SPAN = 1,		/* complete span: ts, dur */
	SHMTRACE_KIND_INSTANT = 2,	/* point in time */
	SHMTRACE_KIND_COUNTER = 3,	/* dur holds an int64 value */
	SHMTRACE_KIND_ARG = 4,		/* an argument of the record before it */
	SHMTRACE_KIND_OPEN = 5,		/* a span still open when its thread died */
	SHMTRACE_KIND_TEXT = 6,		/* bytes of the text argument before it */
	SHMTRACE_KIND_TRIGGER = 7,	/* shmtrace_trigger(): save the flight recorder's window */
	SHMTRACE_KIND_MAX = 7,
};

/* What a ring may be made with (shmtrace_ring_create() refuses the rest
 * with -EINVAL): its capacity, a power of two, and its tables. */
#define SHMTRACE_CAPACITY_MIN 2u
#define SHMTRACE_CAPACITY_MAX (1u << 24)
#define SHMTRACE_STRINGS_MAX 65535u
#define SHMTRACE_THREADS_MAX (1u << 20)

struct shmtrace_ring_config {
	uint32_t capacity;	/* records in the ring, power of two; 0: 262144 */
	uint32_t mode;		/* enum shmtrace_mode */
	uint32_t perm;		/* file mode; 0: 0600. 0640/0660 share with a group */
	uint32_t max_strings;	/* interned strings; 0: 4096, at most 65535 */
	uint32_t string_bytes;	/* bytes for their text; 0: 256 KiB */
	uint32_t max_threads;	/* process/thread name slots; 0: 1024 */
	uint32_t blocks;	/* per-thread staging blocks; 0: 1024 */
	uint32_t flags;		/* SHMTRACE_CREATE_* */
};

/* Use CLOCK_MONOTONIC for every timestamp even when the TSC is usable. */
#define SHMTRACE_CREATE_NO_TSC 0x1u
/* A ring of this name and the same configuration (capacity, mode, tables,
 * blocks, file mode) that is ours is kept as it is, records and all: the
 * restart of a collector. */
#define SHMTRACE_CREATE_ADOPT 0x2u
/* A ring of this name that is not adopted is replaced: the new one takes
 * the name in one rename, and the old one is marked retired, so that its
 * producers move to the new one on their next call. */
#define SHMTRACE_CREATE_REPLACE 0x4u

/* What shmtrace_ring_create() did, when it succeeded. */
enum shmtrace_created {
	SHMTRACE_CREATED = 0,	/* a new ring; the name was free */
	SHMTRACE_ADOPTED = 1,	/* SHMTRACE_CREATE_ADOPT: the existing ring kept */
	SHMTRACE_REPLACED = 2,	/* SHMTRACE_CREATE_REPLACE: a new ring, the old retired */
};

/*
 * Creates the ring /dev/shm/<name> (O_CREAT|O_EXCL, never following a
 * symlink), sized and touched up front so that a full /dev/shm fails here
 * and not later with SIGBUS. The ring is made under a temporary name and
 * linked to <name> only when whole: shmtrace_open() finds either no ring
 * (-ENOENT) or a complete one. cfg may be NULL for the defaults; its flags
 * SHMTRACE_CREATE_ADOPT and _REPLACE say what to do with a ring that is
 * there already. Returns an enum shmtrace_created, -EEXIST if a ring exists
 * and is neither adopted nor replaced, -EINVAL for a bad name or config,
 * -ENOSPC when /dev/shm is full, or another -errno.
 */
int shmtrace_ring_create(const char *name, const struct shmtrace_ring_config *cfg);

/* Removes the ring's name and marks the segment retired (when it is a ring
 * we may write), so that producers still attached to it look for a ring of
 * that name on every call and move to it as soon as one is made. */
int shmtrace_ring_unlink(const char *name);

/*
 * Attaches to an existing ring as a producer. Refuses (-EPROTO) a segment of
 * another magic or a newer major version, -EBADMSG one whose header is
 * inconsistent or whose size is impossible, -ENODEV a name that is not a
 * regular file (a FIFO, directory or socket: never opened so as to block),
 * -ELOOP a symbolic link, -EPERM one owned by another user and not
 * shared with a group of ours (mode 0660, one of our groups), or writable
 * by others, -EXDEV one created in another pid namespace (its
 * pids would collide with ours; SHMTRACE_ALLOW_PIDNS=1 attaches anyway).
 * On success *out is a handle for shmtrace_close().
 *
 * It reads a byte of every page of the ring before it returns, so that the
 * first touch of a page is paid here and not in a span call: on some
 * virtual machines that is several microseconds a page (about 65 ms for
 * the default ring of 50 MiB, against 2 ms without, on this project's).
 * SHMTRACE_PREFAULT=0 leaves the pages to the calls. A handle that
 * attaches later (shmtrace_open_wait(), a ring made again) attaches
 * inside a call and reads nothing ahead; a child of fork() starts with
 * no page touched and pays the first touches in its calls.
 */
int shmtrace_open(const char *name, shmtrace_t **out);

/*
 * Like shmtrace_open(), but the ring need not exist yet: the handle is
 * returned at once and attaches when a ring of that name appears. Until
 * then every call on it returns -ENOENT and records nothing (nothing is
 * counted: there is no ring to count in). The look costs one clock read
 * per call while waiting, and happens at most every 100 ms.
 *
 * Every handle (from either open) also notices, at most every 100 ms and
 * only when a staging block is flushed or handed over (once per block of
 * 64 to 1024 records, 1/256 of the ring's capacity, or per half block
 * where it is copied), when its
 * ring's name comes to refer to another segment (the ring was removed and
 * made again, say by a restarted `shmtrace-collector --create`): it moves
 * to the new ring. Records staged in the old one stay there (a post-mortem
 * export of it, if someone kept it, finds them); string ids obtained from
 * shmtrace_intern() stay valid.
 */
int shmtrace_open_wait(const char *name, shmtrace_t **out);

/* How a handle found its ring. */
struct shmtrace_attach_stats {
	uint64_t attempts;	/* rings mapped, or tried, by this handle */
	uint64_t reattaches;	/* moves to a ring made again under the name */
	uint32_t attached;	/* 1 when the handle has a ring */
	uint32_t late;		/* 1 when it waited for the ring to appear */
};
int shmtrace_attach_stats(shmtrace_t *t, struct shmtrace_attach_stats *st);

/* Flushes the staged records of the threads that wrote through this
 * handle into the ring and detaches. Other handles are not touched. */
void shmtrace_close(shmtrace_t *t);

/*
 * Moves the calling thread's staged records into the ring now. Records are
 * flushed anyway when a block fills, when the thread exits, at close, and by
 * the collector at each of its polls (100 ms, up to 1 s when idle).
 * Returns 0, -ENOSPC if the ring was full and some were dropped (counted),
 * or -ETIMEDOUT (nothing moved; they stay staged).
 */
int shmtrace_flush(shmtrace_t *t);

/*
 * Returns a stable id (1..65535) for s, the same in every process of the
 * ring; the first call per string takes the lock, later ones hit a
 * per-process cache ("" is a string like any other). Returns 0 when s is
 * NULL, when the lock could not be taken, or when the ring's string table
 * (max_strings strings, string_bytes of text; shmtrace-collector --strings,
 * --string-bytes) has no room: that failure is counted in the ring's
 * strings_dropped, once per handle and string (later calls for the same
 * string return 0 from the cache). A record with id 0 exports as "?", and
 * `shmtrace export` counts and reports such records. Strings are stored
 * byte for byte (at most SHMTRACE_STRING_MAX bytes; longer ones are cut).
 */
uint32_t shmtrace_intern(shmtrace_t *t, const char *s);

/* The longest string shmtrace_intern() keeps, in bytes. */
#define SHMTRACE_STRING_MAX 1024

/* Nanoseconds on the ring's clock (CLOCK_MONOTONIC, or a TSC calibrated to it). */
uint64_t shmtrace_now(void);

/*
 * Records a complete span [start_ns, end_ns). flow_id != 0 links spans of
 * one request across threads and processes into one flow (an id below
 * 2^53, maybe with the step's role: shmtrace_flow_recv() and _end()).
 *
 * These three calls return 0 when the record is staged (it survives the
 * process from then on). Records reach the ring a block at a time (1/256
 * of the ring's capacity, 64 to 1024 records; half a block where they
 * are copied), so
 * a full ring in discard mode is noticed when a block is flushed: the call
 * that triggered the flush stages its own record and returns -ENOSPC, and
 * the drops it reports (counted in shmtrace_stats().dropped) may be of
 * earlier records of the same thread. When the ring and its blocks are
 * full (a collector behind: no block free to go on in), the call drops
 * its own record, counted there too, and returns -ENOSPC. -ETIMEDOUT: the lock was held too
 * long and this record was dropped (and counted). -ENOENT: no ring yet, or
 * the ring was removed with no new one behind its name and no collector
 * draining it: the record is refused, and counted into the next ring's
 * `orphaned` when the handle moves there. Drops flushed by others
 * (the collector's poll, thread exit, close) are counted but returned by
 * no call: read them with shmtrace_stats().
 */
int shmtrace_span(shmtrace_t *t, uint32_t cat, uint32_t name,
		  uint64_t start_ns, uint64_t end_ns, uint64_t flow_id);

/* Records an instant event now. */
int shmtrace_instant(shmtrace_t *t, uint32_t cat, uint32_t name, uint64_t flow_id);

/*
 * Arguments: key/value pairs on a span or an instant, shown in the details
 * panel of Perfetto and DevTools (the export's "args", OTLP attributes). A
 * key is an interned string id; a value is an int64, an interned string
 * id, or text. Each argument is one more 40-byte record, stored right after
 * its event in the thread's staging block and published with it by one
 * store, so a crash leaves the event with all its arguments or with none of
 * them. At most SHMTRACE_MAX_ARGS per event.
 *
 * An interned string (SHMTRACE_ARG_STR) costs one record per use and stays
 * in the ring's string table for the ring's life: for values that repeat
 * (a status, a method). Text (SHMTRACE_ARG_TEXT) is copied into records of
 * the event itself (20 bytes of text per 40-byte record) and takes nothing
 * from the string table: for values of one request (a URL, a query, an
 * error message). An event carries at most SHMTRACE_TEXT_MAX bytes of text,
 * in one text argument or shared by several (in order, each getting what
 * the ones before left); longer text is cut, before a UTF-8 character
 * that would not fit, and the export shows the value ending in
 * "…[cut N bytes]", N the bytes left out.
 */
#define SHMTRACE_MAX_ARGS 4
#define SHMTRACE_TEXT_MAX 1024

enum shmtrace_arg_type {
	SHMTRACE_ARG_INT = 1,		/* value is an int64 */
	SHMTRACE_ARG_STR = 2,		/* value is an interned string id */
	SHMTRACE_ARG_TEXT = 3,		/* value is a const char *, NUL-terminated text */
};

struct shmtrace_arg {
	uint32_t key;			/* interned string id */
	uint32_t type;			/* enum shmtrace_arg_type */
	uint64_t value;
};

static inline struct shmtrace_arg shmtrace_arg_int(uint32_t key, int64_t value)
{
	struct shmtrace_arg a = { key, SHMTRACE_ARG_INT, (uint64_t)value };
	return a;
}

static inline struct shmtrace_arg shmtrace_arg_str(uint32_t key, uint32_t str_id)
{
	struct shmtrace_arg a = { key, SHMTRACE_ARG_STR, str_id };
	return a;
}

/* Text, read when the event is recorded: by shmtrace_span_args() and
 * shmtrace_instant_args() during the call; for an argument given to
 * shmtrace_span_arg(), by it (for a crash inside the span) and again by
 * shmtrace_end(), so it must stay valid and unchanged until the span
 * ends. text NULL is refused (-EINVAL). */
static inline struct shmtrace_arg shmtrace_arg_text(uint32_t key, const char *text)
{
	struct shmtrace_arg a = { key, SHMTRACE_ARG_TEXT, (uint64_t)(uintptr_t)text };
	return a;
}

/*
 * shmtrace_span() and shmtrace_instant() with n arguments (n may be 0).
 * Return what those return, or -EINVAL (nothing recorded) when n exceeds
 * SHMTRACE_MAX_ARGS, an argument's type is unknown or its text is NULL.
 */
int shmtrace_span_args(shmtrace_t *t, uint32_t cat, uint32_t name, uint64_t start_ns,
		       uint64_t end_ns, uint64_t flow_id, const struct shmtrace_arg *args,
		       unsigned n);
int shmtrace_instant_args(shmtrace_t *t, uint32_t cat, uint32_t name, uint64_t flow_id,
			  const struct shmtrace_arg *args, unsigned n);

/*
 * A span that is open: begun by shmtrace_begin(), recorded by shmtrace_end().
 * While it is open the thread's staging block (in the shared segment) says
 * so, with a few plain stores and no lock: if the process dies inside it,
 * `shmtrace export --ring` shows it as a slice marked "unfinished": true,
 * nested as it was, and a running collector records it for the capture,
 * ending when it found the process dead (with no collector, the export
 * ends it with the trace). Spans nest; a thread's SHMTRACE_OPEN_MAX
 * outermost open spans are tracked, deeper ones are recorded at their end
 * as usual but not shown if the thread dies in them. Arguments added while
 * it is open are recorded with it at its end, and each is also staged when
 * added (one record more), so an unfinished span has them. The struct
 * lives in the caller's memory; its fields are the library's.
 */
#define SHMTRACE_OPEN_MAX 4

struct shmtrace_open_span {
	shmtrace_t *t;
	void *block_;			/* staging block it was pushed on, or NULL */
	uint64_t start, flow;
	uint32_t cat, name;
	uint32_t depth_, gen_;
	uint32_t nargs;
	uint32_t tid_;			/* the thread that pushed it (was padding) */
	struct shmtrace_arg args[SHMTRACE_MAX_ARGS];
};

/* Opens a span now on the calling thread. sp is always initialised, so
 * shmtrace_end() may be called whatever this returns: 0, -EINVAL (t NULL),
 * -ENOENT (no ring yet: nothing is recorded). */
int shmtrace_begin(shmtrace_t *t, struct shmtrace_open_span *sp, uint32_t cat, uint32_t name,
		   uint64_t flow_id);

/* Adds an argument to an open span, kept for its end and staged now in the
 * thread's block (so that it survives a crash inside the span). -ENOSPC
 * when it has SHMTRACE_MAX_ARGS already (this one is not kept), -EINVAL
 * for a bad type or NULL text. A text argument's text is read now and
 * again at shmtrace_end(): it must live until then. */
int shmtrace_span_arg(struct shmtrace_open_span *sp, struct shmtrace_arg arg);

/* Records the span (with its arguments) ending now and closes it. Call it
 * on the thread that began it, innermost span first. Returns what
 * shmtrace_span() returns. */
int shmtrace_end(struct shmtrace_open_span *sp);

/* Records a counter's value now. */
int shmtrace_counter(shmtrace_t *t, uint32_t cat, uint32_t name, int64_t value);

/*
 * Asks for the ring's recent past to be saved: records a trigger named
 * name (interned as shmtrace_intern() does, cached after the first call)
 * on the calling thread, now, and wakes whoever keeps the ring as a
 * flight recorder (shmtrace-collector --flight-recorder), which then
 * writes a snapshot file of what the ring holds from --keep before the
 * trigger to --after it, and records on. The trigger shows in every
 * export as an instant "trigger: NAME" of the calling thread. Costs an
 * instant plus the cached name lookup and, when a recorder sleeps, one
 * futex wake: cheap enough for the path that detects the rare event (a
 * timeout, a bad reply). A recorder writes at most its --max-per-hour
 * snapshots and counts the triggers beyond. flags: 0 (others are
 * reserved). Returns what shmtrace_instant() returns, -EINVAL (t or name
 * NULL, flags not 0), or -EOPNOTSUPP (nothing recorded) for a ring made
 * by a shmtrace older than triggers (ring format 1.9).
 */
int shmtrace_trigger(shmtrace_t *t, const char *name, unsigned flags);

/* Names the calling thread (and, from the main thread, the process) in the
 * trace. Without it the kernel's comm names are used. At most
 * SHMTRACE_NAME_MAX bytes; longer ones are cut. Each new name takes a slot
 * of the ring's name table; a thread's name set again as it is takes
 * none. Returns 0, -EINVAL (t or name NULL), -ENOENT (no ring yet: kept
 * for when it appears), -ENOSPC (the table is full) or -ETIMEDOUT (the
 * ring lock not had in time); either of the last two is counted in the
 * ring's names_dropped. */
int shmtrace_set_thread_name(shmtrace_t *t, const char *name);
int shmtrace_set_process_name(shmtrace_t *t, const char *name);

/* The longest thread or process name kept, in bytes. */
#define SHMTRACE_NAME_MAX 31

/* Counters of the ring, as the collector and exporter see them. */
struct shmtrace_stats {
	uint64_t capacity;
	uint64_t head;		/* records ever published into the ring, and those
				 * of blocks handed to the collector (a block's
				 * worth each) that it has not moved there yet */
	uint64_t tail;		/* records the collector has consumed */
	uint64_t dropped;	/* staged but never in the ring: ring full, lock
				 * timeouts, refused while the ring was removed
				 * (shmtrace stat tells them apart) */
	uint64_t overwritten;	/* overwritten unread (overwrite mode) */
	uint64_t lock_timeouts;	/* flushes given up on a lock held too long */
	uint32_t mode;
	uint32_t strings;
};
int shmtrace_stats(shmtrace_t *t, struct shmtrace_stats *st);

/* Returns a new flow id, unique among all processes of the ring (never 0,
 * below 2^53 so that JavaScript viewers keep it exact), or 0 if t is NULL.
 * In a ring of format 1.1 the id is global: bit 52 set, a 20-bit prefix
 * random per ring, then a 32-bit counter, so ids of two hosts' rings do
 * not collide and an id carried from one host to another (a 64-bit
 * integer: send it in a request header) joins the flow across them. */
uint64_t shmtrace_flow_new(shmtrace_t *t);

/*
 * Returns the flow id of the trace named by a W3C Trace Context
 * `traceparent` header ("00-<32 hex trace id>-<16 hex parent id>-<2 hex
 * flags>"), or 0 if w3c is not a valid one. The id is global and the
 * same on every host given that header (the trace id's low 52 bits, bit
 * 52 set), so spans of one request recorded in several rings join into
 * one flow. With a handle (t, or shmtrace_default when t is NULL) it
 * also records an instant "traceparent <header>" (category "shmtrace")
 * in the flow, which interns one string per trace: `shmtrace export
 * --format otlp` then exports the flow with the header's 128-bit trace
 * id and its first span as a child of the header's parent span.
 */
uint64_t shmtrace_flow_from_traceparent(shmtrace_t *t, const char *w3c);

/*
 * The role of a step in its flow. A flow is the records of one id in the
 * order of their starts; a flow id given to any call that takes one
 * (shmtrace_span(), _instant(), _begin(), their _args forms, the macros)
 * may carry the role of the record it is given to, which changes where
 * the record goes in its flow:
 *
 *   shmtrace_flow_recv(id)   the step receives: it is placed in its flow by
 *                            its end, and the arrow arrives at its end. A
 *                            client's "wait reply" span begins before the
 *                            server handles the request and ends after: so
 *                            marked, it comes after the server's step, and
 *                            the arrows go client -> server -> client.
 *   shmtrace_flow_end(id)    the step ends its flow: no later step joins it.
 *                            A later record of the same id begins a new
 *                            flow, so an id may be used again once ended.
 *   shmtrace_flow_reply(id)  both: the step that gets the reply ends the
 *                            request's flow.
 *
 * A step without a role is placed by its start, and its arrow arrives at
 * its start and leaves from it: the step that sends. Roles are bits 53
 * and 54 of the 64-bit flow argument, above every flow id (ids are below
 * 2^53); shmtrace_flow_id() takes them off. Each returns 0 for 0 (no
 * flow), so they can wrap any id. On an instant the receiving role changes
 * nothing (its start is its end). Exporters older than the roles take an
 * id with a role for another id: such a step forms a flow of its own.
 *
 *   // client                                    // server
 *   uint64_t id = shmtrace_flow_new(t);           recv(fd, &req, ...);
 *   shmtrace_span(t, c, n_send, t0, t1, id);      t0 = shmtrace_now();
 *   send(fd, &req, ...);                          handle(&req);
 *   shmtrace_begin(t, &sp, c, n_wait,             shmtrace_span(t, c, n_handle, t0,
 *                  shmtrace_flow_reply(id));                    shmtrace_now(), req.flow);
 *   recv(fd, &rep, ...);
 *   shmtrace_end(&sp);
 */
#define SHMTRACE_FLOW_RECEIVES   (1ull << 53)
#define SHMTRACE_FLOW_TERMINATES (1ull << 54)
#define SHMTRACE_FLOW_ID_MASK    ((1ull << 53) - 1)

/* The flow id of a flow argument, its role taken off. */
static inline uint64_t shmtrace_flow_id(uint64_t flow)
{
	return flow & SHMTRACE_FLOW_ID_MASK;
}

static inline uint64_t shmtrace_flow_recv(uint64_t flow)
{
	return shmtrace_flow_id(flow) ? flow | SHMTRACE_FLOW_RECEIVES : 0;
}

static inline uint64_t shmtrace_flow_end(uint64_t flow)
{
	return shmtrace_flow_id(flow) ? flow | SHMTRACE_FLOW_TERMINATES : 0;
}

static inline uint64_t shmtrace_flow_reply(uint64_t flow)
{
	return shmtrace_flow_end(shmtrace_flow_recv(flow));
}

/* Returns a static string describing a -errno returned by this library. */
const char *shmtrace_strerror(int err);

/* ---------------------------------------------------------------------- */
/* Process-wide default handle and scoped spans.                          */
/*                                                                        */
/* When the environment variable SHMTRACE_RING names a ring at start-up,  */
/* shmtrace_default is attached to it; otherwise it is NULL and every     */
/* macro below costs one predictable branch. If that ring does not exist  */
/* yet, a thread of the library looks for it every 100 ms and attaches    */
/* shmtrace_default once it appears (the thread then ends; "shmtrace      */
/* stat" shows such producers as attached late). Define SHMTRACE_DISABLE  */
/* to compile the macros away entirely.                                   */
/* ---------------------------------------------------------------------- */
extern shmtrace_t *shmtrace_default;

/* Attaches shmtrace_default to a ring (or NULL to detach). */
int shmtrace_default_open(const char *name);

struct shmtrace_site {
	const char *cat;
	const char *name;
	shmtrace_t *owner;	/* handle the ids below belong to */
	uint32_t cat_id;
	uint32_t name_id;
};

struct shmtrace_scope {
	struct shmtrace_open_span sp;	/* sp.t NULL: not tracing */
};

/* Resolves a call site's ids for t (cached in the site). */
void shmtrace_site_resolve(shmtrace_t *t, struct shmtrace_site *site);

/* Fills *s in place: a scope is ~130 bytes, and returning it by value
 * made tracing off cost a copy and a store-forwarding stall per scope,
 * where one store and one branch cost nothing measurable (make bench,
 * case 4). */
static inline void shmtrace_scope_begin_(struct shmtrace_scope *s, struct shmtrace_site *site,
					 uint64_t flow)
{
	/* pairs with the release store that attaches it (maybe late) */
	shmtrace_t *t = __atomic_load_n(&shmtrace_default, __ATOMIC_ACQUIRE);

	s->sp.t = NULL;
	if (__builtin_expect(t == NULL, 1))
		return;
	if (__atomic_load_n(&site->owner, __ATOMIC_ACQUIRE) != t)
		shmtrace_site_resolve(t, site);
	shmtrace_begin(t, &s->sp, __atomic_load_n(&site->cat_id, __ATOMIC_RELAXED),
		       __atomic_load_n(&site->name_id, __ATOMIC_RELAXED), flow);
}

static inline void shmtrace_scope_end_(struct shmtrace_scope *s)
{
	if (__builtin_expect(s->sp.t == NULL, 1))
		return;
	shmtrace_end(&s->sp);
}

/* A key (or string value) cached per call site, as for names. */
struct shmtrace_key_site {
	const char *s;
	shmtrace_t *owner;
	uint32_t id;
};

/* Interns site->s for t unless cached. Returns its id (0 on failure). */
uint32_t shmtrace_key_resolve(shmtrace_t *t, struct shmtrace_key_site *site);

static inline uint32_t shmtrace_key_(shmtrace_t *t, struct shmtrace_key_site *site)
{
	if (__atomic_load_n(&site->owner, __ATOMIC_ACQUIRE) == t)
		return __atomic_load_n(&site->id, __ATOMIC_RELAXED);
	return shmtrace_key_resolve(t, site);
}

#define SHMTRACE_CAT2_(a, b) a##b
#define SHMTRACE_CAT_(a, b) SHMTRACE_CAT2_(a, b)

#ifndef SHMTRACE_DISABLE
/* Records a span from here to the end of the enclosing scope. */
#define SHMTRACE_SCOPE_FLOW(cat, name, flow)					\
	static struct shmtrace_site SHMTRACE_CAT_(shmtrace_site_, __LINE__) =	\
		{ (cat), (name), 0, 0, 0 };					\
	struct shmtrace_scope SHMTRACE_CAT_(shmtrace_scope_, __LINE__)		\
		__attribute__((cleanup(shmtrace_scope_end_), unused));		\
	shmtrace_scope_begin_(&SHMTRACE_CAT_(shmtrace_scope_, __LINE__),	\
			      &SHMTRACE_CAT_(shmtrace_site_, __LINE__), (flow))
#define SHMTRACE_SCOPE(cat, name) SHMTRACE_SCOPE_FLOW(cat, name, 0)

/*
 * A scope with a name, var, so that arguments can be added to it:
 *
 *   SHMTRACE_SCOPE_VAR(req, "rpc", "handle", flow);
 *   SHMTRACE_ARG_INT(req, "bytes", n);
 *   SHMTRACE_ARG_STR(req, "status", ok ? "ok" : "busy");
 *   SHMTRACE_ARG_TEXT(req, "url", r->url);
 *
 * Keys (and string values, through the library's per-process cache) are
 * interned once; a key must be a string literal or otherwise outlive the
 * program. A text value (SHMTRACE_ARG_TEXT: copied into the span's own
 * records, nothing interned) is read when it is added and when the scope
 * ends, so it must live until then: a string of the request, not a buffer
 * of an inner block.
 * At most SHMTRACE_MAX_ARGS arguments per scope.
 */
#define SHMTRACE_SCOPE_VAR(var, cat, name, flow)				\
	static struct shmtrace_site SHMTRACE_CAT_(shmtrace_site_, var) =	\
		{ (cat), (name), 0, 0, 0 };					\
	struct shmtrace_scope var						\
		__attribute__((cleanup(shmtrace_scope_end_)));			\
	shmtrace_scope_begin_(&var, &SHMTRACE_CAT_(shmtrace_site_, var), (flow))
#define SHMTRACE_ARG_INT(var, key, value) do {					\
	static struct shmtrace_key_site shmtrace_k_ = { (key), 0, 0 };		\
	if (__builtin_expect((var).sp.t != NULL, 0))				\
		shmtrace_span_arg(&(var).sp, shmtrace_arg_int(			\
			shmtrace_key_((var).sp.t, &shmtrace_k_), (int64_t)(value))); \
} while (0)
#define SHMTRACE_ARG_STR(var, key, str) do {					\
	static struct shmtrace_key_site shmtrace_k_ = { (key), 0, 0 };		\
	if (__builtin_expect((var).sp.t != NULL, 0))				\
		shmtrace_span_arg(&(var).sp, shmtrace_arg_str(			\
			shmtrace_key_((var).sp.t, &shmtrace_k_),		\
			shmtrace_intern((var).sp.t, (str))));			\
} while (0)
#define SHMTRACE_ARG_TEXT(var, key, text) do {					\
	static struct shmtrace_key_site shmtrace_k_ = { (key), 0, 0 };		\
	if (__builtin_expect((var).sp.t != NULL, 0))				\
		shmtrace_span_arg(&(var).sp, shmtrace_arg_text(		\
			shmtrace_key_((var).sp.t, &shmtrace_k_), (text)));	\
} while (0)

/* An instant or a counter on the default handle. */
#define SHMTRACE_INSTANT(cat, name, flow) do {					\
	static struct shmtrace_site shmtrace_site_i_ = { (cat), (name), 0, 0, 0 }; \
	shmtrace_t *shmtrace_t_ = __atomic_load_n(&shmtrace_default, __ATOMIC_ACQUIRE);				\
	if (__builtin_expect(shmtrace_t_ != NULL, 0)) {				\
		if (__atomic_load_n(&shmtrace_site_i_.owner, __ATOMIC_ACQUIRE) != shmtrace_t_) \
			shmtrace_site_resolve(shmtrace_t_, &shmtrace_site_i_);	\
		shmtrace_instant(shmtrace_t_, __atomic_load_n(&shmtrace_site_i_.cat_id, __ATOMIC_RELAXED), \
				 __atomic_load_n(&shmtrace_site_i_.name_id, __ATOMIC_RELAXED), (flow));		\
	}									\
} while (0)
#define SHMTRACE_COUNTER(cat, name, value) do {					\
	static struct shmtrace_site shmtrace_site_c_ = { (cat), (name), 0, 0, 0 }; \
	shmtrace_t *shmtrace_t_ = __atomic_load_n(&shmtrace_default, __ATOMIC_ACQUIRE);				\
	if (__builtin_expect(shmtrace_t_ != NULL, 0)) {				\
		if (__atomic_load_n(&shmtrace_site_c_.owner, __ATOMIC_ACQUIRE) != shmtrace_t_) \
			shmtrace_site_resolve(shmtrace_t_, &shmtrace_site_c_);	\
		shmtrace_counter(shmtrace_t_, __atomic_load_n(&shmtrace_site_c_.cat_id, __ATOMIC_RELAXED), \
				 __atomic_load_n(&shmtrace_site_c_.name_id, __ATOMIC_RELAXED), (value));		\
	}									\
} while (0)
#else
#define SHMTRACE_SCOPE_FLOW(cat, name, flow) do { } while (0)
#define SHMTRACE_SCOPE(cat, name) do { } while (0)
#define SHMTRACE_SCOPE_VAR(var, cat, name, flow) do { } while (0)
#define SHMTRACE_ARG_INT(var, key, value) do { } while (0)
#define SHMTRACE_ARG_STR(var, key, str) do { } while (0)
#define SHMTRACE_ARG_TEXT(var, key, text) do { } while (0)
#define SHMTRACE_INSTANT(cat, name, flow) do { } while (0)
#define SHMTRACE_COUNTER(cat, name, value) do { } while (0)
#endif

#ifdef __cplusplus
}
#endif
#endif /* SHMTRACE_H */
