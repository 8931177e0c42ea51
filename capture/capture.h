/* SPDX-License-Identifier: MIT */
/*
 * capture.h - the capture file: msgpack frames written by shmtrace-collector
 * and read by `shmtrace export`. Specified in docs/CAPTURE-FORMAT.md.
 *
 * A capture is a sequence of self-delimiting frames, each one msgpack array
 * whose first element is the frame type and whose last is a CRC-32C of the
 * frame's encoding before it, so that any prefix of a file cut at any byte
 * reads up to its last whole frame, and a flipped byte is detected. A file
 * begins with a HEADER frame and, when the collector stopped cleanly, ends
 * with an END frame; a reader tells the two endings apart.
 *
 * Encoders append to a msgpack_sbuffer (the collector hands its bytes to
 * io_uring). The decoder reads a whole file through a bounded buffer.
 */
#ifndef SHMTRACE_CAPTURE_H
#define SHMTRACE_CAPTURE_H

#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>

#include "loss.h"
#include "ring_format.h"

#define SHMT_CAP_MAGIC		"SHMTCAP"	/* in the header frame */
#define SHMT_CAP_VERSION	2		/* major; a newer one is refused */
#define SHMT_CAP_MAX_FRAME	(16u << 20)	/* no frame is larger than this */

/* Encoders split longer lists into several frames of at most these. */
#define SHMT_CAP_SPLIT_ITEMS	4096u		/* strings or threads per frame */
#define SHMT_CAP_SPLIT_RECORDS	65536u		/* records per frame (2.5 MiB) */
/* Decoders refuse frames beyond these (newer writers may split later). */
#define SHMT_CAP_MAX_ITEMS	65536u		/* strings or threads per frame */
#define SHMT_CAP_MAX_RECORDS	(SHMT_CAP_MAX_FRAME / SHMT_RECORD_SIZE)
/* A PACKED record takes 5 to this many bytes. */
#define SHMT_CAP_PACKED_MIN	5
#define SHMT_CAP_PACKED_MAX	48
#define SHMT_CAP_MAX_DEPTH	8		/* msgpack nesting in a frame */
#define SHMT_CAP_MAX_OBJECTS	(1u << 20)	/* msgpack objects in a frame */

enum shmt_cap_type {
	SHMT_CAP_HEADER = 1,
	SHMT_CAP_STRINGS = 2,	/* interned strings: id -> bytes */
	SHMT_CAP_THREADS = 3,	/* process/thread name slots */
	SHMT_CAP_RECORDS = 4,	/* a batch of 40-byte records (version 1) */
	SHMT_CAP_LOSS = 5,	/* the ring's loss counters at a point in time */
	SHMT_CAP_END = 6,	/* clean stop */
	SHMT_CAP_PACKED = 7,	/* a batch of varint-packed records (version 2);
				 * decoded as SHMT_CAP_RECORDS */
};

/*
 * Fields between the type and the CRC of each frame, the same numbers for
 * the encoder and the decoder (docs/CAPTURE-FORMAT.md). A decoder accepts
 * more (fields are only ever appended) and, where a minor revision appended
 * some, as few as the *_MIN count.
 */
#define SHMT_CAP_HEADER_FIELDS		19	/* the 14th (ring_id) on are optional */
#define SHMT_CAP_HEADER_MIN_FIELDS	13
#define SHMT_CAP_HEADER_RING_ID		13	/* where each optional field is */
#define SHMT_CAP_HEADER_MAX_FILES	14	/* then the four of struct shmt_cap_deleted */
#define SHMT_CAP_HEADER_SNAPSHOT	19	/* a snapshot's fields (minor revision 2.2) */
#define SHMT_CAP_SNAPSHOT_FIELDS	14	/* ... written only in a snapshot's header */
#define SHMT_CAP_LIST_FIELDS		1	/* STRINGS, THREADS: one array */
#define SHMT_CAP_STRING_ITEM_FIELDS	2	/* [id, bytes] */
#define SHMT_CAP_THREAD_ITEM_FIELDS	7	/* [pid, tid, start, pidns, flags, thread, process] */
#define SHMT_CAP_RECORDS_FIELDS		3	/* first_seq, count, records (RECORDS, PACKED) */
/* LOSS: at_ns, then each counter at its frame field (loss.h,
 * SHMT_LOSS_KINDS), the table sizes and published at these */
#define SHMT_CAP_LOSS_FIELDS		13	/* the 13th, orphaned, appended last */
#define SHMT_CAP_LOSS_MIN_FIELDS	6	/* before strings_dropped was appended */
#define SHMT_CAP_LOSS_MAX_STRINGS	7
#define SHMT_CAP_LOSS_STRING_BYTES	8
#define SHMT_CAP_LOSS_MAX_THREADS	9
#define SHMT_CAP_LOSS_PUBLISHED		10
#define SHMT_CAP_END_FIELDS		3
/* Every frame ends in its CRC-32C as a msgpack uint32: 0xce + 4 bytes. */
#define SHMT_CAP_CRC_BYTES		5
#define SHMT_CAP_CRC_TAG		0xce

/*
 * The parts of its run a collector deleted to keep within --max-files,
 * before the part whose header says so began (header fields 15 to 19,
 * minor revision 2.1); all 0 when it deleted none, and in a file of an
 * older collector. A collector deletes its oldest parts first, so they are
 * parts 0 .. parts - 1.
 */
struct shmt_cap_deleted {
	uint32_t max_files;		/* the collector's --max-files; 0: none */
	uint32_t parts;			/* parts 0 .. parts - 1 were deleted */
	uint64_t records;		/* the records they held */
	uint64_t from_ns;		/* ring time the first of them began */
	uint64_t to_ns;			/* ... and the last one ended */
};

/* Why a snapshot was taken: its header's cause (field 20). */
enum shmt_snap_cause {
	SHMT_SNAP_NONE = 0,	/* not a snapshot: a collector's capture */
	SHMT_SNAP_TRIGGER = 1,	/* shmtrace_trigger() in a program */
	SHMT_SNAP_COMMAND = 2,	/* `shmtrace snapshot` */
	SHMT_SNAP_SIGNAL = 3,	/* SIGUSR1 to shmtrace-collector --flight-recorder */
	SHMT_SNAP_DEATH = 4,	/* a producer found dead with spans open */
};
#define SHMT_SNAP_CAUSES	5

/* The cause in one word ("trigger", "command", "signal", "death"; "none",
 * and "unknown" for a cause of a newer writer). */
const char *shmt_snap_cause_name(uint32_t cause);

/*
 * What a snapshot's header says of it (fields 20 to 33, minor revision
 * 2.2): a copy of a live ring's records, made while producers wrote on,
 * into a capture file of its own (docs/CAPTURE-FORMAT.md, "Snapshots").
 * The window is ring sequences [first_seq, end_seq); the staging blocks'
 * records and the open spans read with them follow it in the file,
 * numbered from end_seq on.
 */
struct shmt_cap_snapshot {
	uint32_t cause;			/* enum shmt_snap_cause; 0: no snapshot */
	char trigger[SHMT_STRING_MAX + 1];	/* the trigger's name, or what died */
	uint64_t trigger_ns;		/* ring time of the trigger (or the request) */
	uint32_t trigger_pid, trigger_tid;	/* who triggered (0: nobody known) */
	uint64_t first_seq, end_seq;	/* the window, in ring sequences */
	/* ... and ring times: the start of the records it holds, the
	 * window's and the staged ones (0: it holds none, so has no start),
	 * and the copy's end */
	uint64_t from_ns, to_ns;
	uint64_t overwritten;		/* records of the window overwritten during the copy */
	uint64_t staged;		/* records after the window: blocks, open spans */
	uint64_t triggers;		/* triggers this snapshot answers */
	uint64_t suppressed;		/* triggers not answered (rate limit) since the last */
	uint64_t cut;			/* records of the window left out for a size bound */
};

struct shmt_cap_header {
	uint32_t version;		/* SHMT_CAP_VERSION */
	uint32_t part;			/* 0 for the first file, n for FILE.n */
	uint64_t run_id;		/* same in every part of one collector run */
	char host[64];
	char ring[256];
	uint32_t ring_capacity;
	uint32_t ring_mode;		/* enum shmtrace_mode */
	uint32_t clock_tsc;		/* 1: TSC calibrated to CLOCK_MONOTONIC */
	uint32_t collector_pid;
	uint64_t realtime0;		/* wall clock anchor, ns since the epoch ... */
	uint64_t mono0;			/* ... taken together with this ring time */
	uint64_t started_ns;		/* ring time when the collector started */
	/* trailing field 14 (optional): the ring's random identity, which
	 * scopes its flow ids and string ids; 0 when the file has none (an
	 * older collector) or the ring has none (ring format 1.0) */
	uint64_t ring_id;
	struct shmt_cap_deleted deleted;	/* trailing fields 15 to 19 */
	struct shmt_cap_snapshot snapshot;	/* trailing fields 20 to 33 */
};

struct shmt_cap_string {
	uint32_t id;
	uint32_t len;
	const char *s;			/* len bytes, not NUL-terminated in the file */
};

struct shmt_cap_loss {
	uint64_t at_ns;			/* ring time of the snapshot */
	/* the ring's counters (cumulative); those appended in a minor
	 * revision (strings_dropped, lock_dropped) are 0 when read from an
	 * older capture */
	SHMT_LOSS_MEMBER;
	/* appended in a minor revision: 0 when read from an older capture */
	uint32_t max_strings;		/* the ring's string table: strings, */
	uint32_t string_bytes;		/* ... bytes of text, */
	uint32_t max_threads;		/* ... and thread name slots */
	uint64_t published;		/* ring head: records ever published */
};

struct shmt_cap_end {
	uint64_t records;		/* records this collector wrote, all parts */
	uint64_t end_ns;		/* ring time at stop */
	uint32_t next_part;		/* 0, or the part that follows (rotation) */
};

/* Encoders: each appends one whole frame to b. Return 0 or -ENOMEM.
 * Lists longer than SHMT_CAP_SPLIT_* become several consecutive frames of
 * the same type (readers cannot tell the difference); n == 0 appends
 * nothing. -EINVAL (and nothing appended) for what no reader would accept:
 * a string id of 0 or a string longer than SHMT_STRING_MAX, a record kind
 * outside SHMTRACE_KIND_SPAN..SHMTRACE_KIND_MAX. On any error b is left as
 * it was. Names longer than their field are cut to fit with their NUL. The
 * header's version field is ignored: SHMT_CAP_VERSION is written. */
/* Whether b[0..len) could begin a capture (array header, type 1,
 * "SHMTCAP"): 1, or 0 when it cannot. len >= 1. */
int shmt_cap_looks_like(const uint8_t *b, size_t len);

int shmt_cap_put_header(msgpack_sbuffer *b, const struct shmt_cap_header *h);
int shmt_cap_put_strings(msgpack_sbuffer *b, const struct shmt_cap_string *s, size_t n);
int shmt_cap_put_threads(msgpack_sbuffer *b, const struct shmt_thread *t, size_t n);
/* Records r[0..n) have ring sequences first_seq .. first_seq + n - 1; only
 * the kind of their commit words is written. As PACKED frames (version 2). */
int shmt_cap_put_records(msgpack_sbuffer *b, uint64_t first_seq, const struct shmt_record *r, size_t n);
/* The same as version-1 RECORDS frames of 40-byte records: for tests and
 * tools that make version-1 files (a version-2 reader still reads them). */
int shmt_cap_put_records_v1(msgpack_sbuffer *b, uint64_t first_seq, const struct shmt_record *r, size_t n);
/*
 * The collector's path: one PACKED frame encoded straight from ring slots
 * (at most SHMT_CAP_SPLIT_RECORDS of them), whose commit words hold
 * (sequence & 0xffffff) << 8 | kind; each slot is read once. Stops before
 * the first slot that is not a finished record of its sequence. Returns the
 * records written (0: the first slot is not one, nothing appended) or
 * -ENOMEM (b unchanged).
 */
long shmt_cap_put_ring_records(msgpack_sbuffer *b, uint64_t first_seq,
			       const struct shmt_record *slots, size_t n);
/* The same from a staging block's records read in place (ring format 2.0:
 * the collector's full blocks), whose commit words hold the kind: stops
 * before the first of no kind this format defines. */
long shmt_cap_put_block_records(msgpack_sbuffer *b, uint64_t first_seq,
				const struct shmt_record *recs, size_t n);
/* capture_ring.c: ring v's strings from id *strings on and its name slots
 * from *threads on, read from the ring, as STRINGS and THREADS frames
 * (a damaged string entry is sent as ""), *strings and *threads moved
 * past them: the tables a capture carries. Returns 0 or -ENOMEM. */
struct shmt_view;
int shmt_cap_put_ring_tables(msgpack_sbuffer *b, const struct shmt_view *v, uint32_t *strings,
			     uint32_t *threads);
int shmt_cap_put_loss(msgpack_sbuffer *b, const struct shmt_cap_loss *l);
int shmt_cap_put_end(msgpack_sbuffer *b, const struct shmt_cap_end *e);

/* A decoded frame. Pointers stay valid until the next shmt_cap_next(). */
struct shmt_cap_frame {
	enum shmt_cap_type type;
	uint64_t offset;		/* byte offset of the frame in the file */
	union {
		struct shmt_cap_header header;
		struct {
			const struct shmt_cap_string *v;
			size_t n;
		} strings;
		struct {
			const struct shmt_thread *v;	/* names NUL-terminated */
			size_t n;
		} threads;
		struct {
			uint64_t first_seq;
			const struct shmt_record *v;	/* commit = kind */
			size_t n;
			int packed;	/* read from a PACKED frame */
		} records;
		struct shmt_cap_loss loss;
		struct shmt_cap_end end;
	};
};

struct shmt_cap_reader;

/*
 * Opens a capture file and checks its header frame. Returns 0, or -errno
 * with a one-line reason in err: -ENOENT/-EACCES..., -EPROTO for a file
 * that is not a capture or of a newer version, -EBADMSG for an empty file
 * or a damaged header.
 * Also -EPIPE for a file cut inside its header frame (its bytes so far are
 * those of a capture header), and -ENOMEM. shmt_cap_next() returns the
 * frames after the header; it is not returned again.
 */
int shmt_cap_open(const char *path, struct shmt_cap_reader **out, char *err, size_t errlen);

/*
 * Reads the next frame. Returns 1 with *f filled, 0 after a clean END
 * frame, -EPIPE when the file ends inside a frame or without an END frame
 * (cut: everything before was returned), -EBADMSG on a damaged frame
 * (bad CRC, bad type, impossible length). err says which and at what offset.
 * The END frame itself is returned (1) like any other; the call after it
 * returns 0, or -EBADMSG if any byte follows it. A second HEADER frame is
 * -EBADMSG. Errors are sticky: later calls return the same one.
 */
int shmt_cap_next(struct shmt_cap_reader *r, struct shmt_cap_frame *f, char *err, size_t errlen);

/*
 * shmt_cap_next() for a file still being written (a stream following the
 * live capture): a file that ends without its END frame, at a frame's
 * boundary or inside one, has not been written that far yet: -EAGAIN,
 * and the next call reads on from that frame. The collector has several
 * writes in flight, which may complete out of order, so bytes past what
 * is written may be a hole of zeros: a frame that does not decode is
 * -EAGAIN too, read again from its start, until the file reaches
 * SHMT_CAP_FOLLOW_SLACK bytes past it; then it is damage (-EBADMSG,
 * sticky). Every other answer is shmt_cap_next()'s.
 */
#define SHMT_CAP_FOLLOW_SLACK	(64u << 20)
int shmt_cap_follow(struct shmt_cap_reader *r, struct shmt_cap_frame *f, char *err, size_t errlen);

/* The file offset of the next frame. */
uint64_t shmt_cap_offset(const struct shmt_cap_reader *r);

/* The header frame read by shmt_cap_open(). */
const struct shmt_cap_header *shmt_cap_header_of(const struct shmt_cap_reader *r);

/* The file's permission bits when it was opened (st_mode & 07777): what an
 * output made of it may grant at most (outfile_mode_within()). */
uint32_t shmt_cap_mode(const struct shmt_cap_reader *r);

void shmt_cap_close(struct shmt_cap_reader *r);

/* Decodes one frame from memory (the fuzz harness and the tests use this).
 * Returns the frame's length in bytes, 0 if buf holds only part of a frame,
 * or -EBADMSG. Decoded pointers refer to scratch owned by the caller's
 * msgpack zone z. Also -EPROTO for a header frame of a newer version and
 * -ENOMEM. Decoded strings are followed by a NUL the file does not hold;
 * f->offset is 0. */
long shmt_cap_decode(const uint8_t *buf, size_t len, struct shmt_cap_frame *f,
		     msgpack_zone *z, char *err, size_t errlen);

#endif /* SHMTRACE_CAPTURE_H */
