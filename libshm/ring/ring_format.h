/* SPDX-License-Identifier: MIT */
/*
 * ring_format.h - the layout of a shmtrace ring in shared memory (version 2,
 * and what readers keep of version 1).
 *
 * Specified in docs/FORMAT.md; this file and that page change together.
 * Everything here lives in a segment that any local process able to open it
 * can scribble on, so readers treat every field as untrusted: see
 * ring_reader.c for the checks. Offsets, never pointers. Fields are only
 * ever added at the end of a struct, into its reserved space.
 */
#ifndef SHMTRACE_RING_FORMAT_H
#define SHMTRACE_RING_FORMAT_H

#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>

#include "shmtrace.h"

#define SHMT_RING_MAGIC		0x474e495254484d53ull	/* "SMHTRING" little-endian */
#define SHMT_RING_MAJOR		2u
/*
 * The format level: major 1's minors are levels 0 to 10, and major 2's
 * minor m is level SHMT_LEVEL_MAJOR2 + m. A view's `minor` holds the
 * level (shmt_view_validate()), so that every test of a feature is one
 * compare whatever the major; the header holds the minor of its major.
 */
#define SHMT_LEVEL_MAJOR2	11u
#define SHMT_RING_MINOR		13u	/* the level this code writes: 2.2. Levels:
					   1: ring_id, torn, strings_dropped; 2: open spans, args;
					   3: staging blocks of 256 records;
					   4: block size from the capacity;
					   5: retired, lock_dropped, orphaned;
					   6: text arguments (record kind 6);
					   7: flow roles, open spans' roles;
					   8: arguments of open spans;
					   9: triggers (record kind 7);
					   10: full blocks handed to the collector;
					   11 (2.0): full blocks read in place;
					   12 (2.1): a block's ask word;
					   13 (2.2): an idle block's records
					   copied without the lock, sequenced
					   in the copy */
#define SHMT_RING_COMPAT	2u	/* oldest major a reader must understand
					   to read what this code writes */
#define SHMT_RING_OLDEST	1u	/* oldest major this code reads */
#define SHMT_MINOR_IN_PLACE	11u
#define SHMT_MINOR_ASK		12u
#define SHMT_MINOR_COPY		13u

#define SHMT_HEADER_SIZE	4096u
#define SHMT_RECORD_SIZE	40u
/* records per staging block: capacity / 64 within these bounds (minor 4;
 * 256 for every ring in minor 3, 64 before) */
#define SHMT_BLOCK_RECORDS_MIN	64u
#define SHMT_BLOCK_RECORDS_MAX	4096u
#define SHMT_NAME_LEN		32u	/* process/thread name bytes, NUL included */
#define SHMT_STRING_MAX		1024u	/* longest interned string */
/* the limits include/shmtrace.h tells users are these */
_Static_assert(SHMT_STRING_MAX == SHMTRACE_STRING_MAX, "shmtrace.h's SHMTRACE_STRING_MAX");
_Static_assert(SHMT_NAME_LEN - 1 == SHMTRACE_NAME_MAX, "shmtrace.h's SHMTRACE_NAME_MAX");
#define SHMT_MAX_STRINGS	65535u	/* ids are 16 bits; 0 means none */
/* a string table's text space, bytes (--string-bytes) */
#define SHMT_MIN_STRING_BYTES	64u
#define SHMT_MAX_STRING_BYTES	(1u << 28)
#define SHMT_MAX_CAPACITY	(1u << 24)	/* the commit word holds 24 bits of sequence */
/* sequences a commit word tells apart: 24 bits of them */
#define SHMT_COMMIT_SEQ_SPAN	(1ull << 24)
#define SHMT_MAX_BLOCKS		65536u
#define SHMT_MAX_THREADS	(1u << 20)

/*
 * One trace record. The commit word is written last with release ordering
 * and read first with acquire ordering: it holds the record's kind in its
 * low 8 bits and the low 24 bits of the record's ring sequence number above
 * them, so a reader can tell a finished record of the sequence it expects
 * from an empty, half-written or older slot. In staging blocks the block's
 * `written` counter plays that role and the commit word holds only the kind.
 */
struct shmt_record {
	uint64_t ts;		/* start, ns on the ring clock */
	uint64_t dur;		/* duration in ns, or a counter's int64 value */
	uint64_t flow;		/* flow id, 0 = none */
	uint32_t pid;
	uint32_t tid;
	uint16_t name;		/* interned string id */
	uint16_t cat;		/* interned string id */
	uint32_t commit;	/* (seq & 0xffffff) << 8 | kind; 0 = empty */
};
_Static_assert(sizeof(struct shmt_record) == SHMT_RECORD_SIZE, "records are 40 bytes");

#define SHMT_COMMIT(seq, kind)	((uint32_t)(((seq) & 0xffffffu) << 8) | ((kind) & 0xffu))
#define SHMT_COMMIT_KIND(c)	((c) & 0xffu)
#define SHMT_COMMIT_SEQ(c)	((c) >> 8)

/* The one test of a record kind: one this format defines. Everything that
 * reads records (ring reader, capture codec, sources) asks it. */
static inline bool shmt_kind_valid(uint64_t kind)
{
	return kind >= SHMTRACE_KIND_SPAN && kind <= SHMTRACE_KIND_MAX;
}

/* Whether a record of this kind belongs to the event before it (an
 * argument, or a text argument's bytes) rather than being an event. */
static inline bool shmt_kind_attached(uint64_t kind)
{
	return kind == SHMTRACE_KIND_ARG || kind == SHMTRACE_KIND_TEXT;
}

/* Whether commit word c holds a finished record of ring sequence seq. */
static inline bool shmt_commit_is(uint32_t c, uint64_t seq)
{
	return shmt_kind_valid(SHMT_COMMIT_KIND(c)) && SHMT_COMMIT_SEQ(c) == (seq & 0xffffffu);
}

/*
 * Records per staging block for a ring of capacity records (a power of
 * two) of format minor: 1/64 of the ring within [64, 4096] before minor
 * 10, 1/256 within [64, 1024] since. Before minor 10 a thread tries to flush once half its
 * block is staged, so one call in block/2 pays for a flush: in a ring of
 * 256K records and more, one in 2048, rarer than the p99.9 call
 * (docs/DESIGN.md, "The span call's tail"). Since minor 10 a full block is
 * handed to the collector instead of copied (SHMT_BLOCK_FULL), a step of a
 * few hundred nanoseconds, so blocks are smaller and four times as many
 * (SHMT_DEFAULT_BLOCKS): a thread each among a thousand in the default
 * ring, in the same memory.
 */
#define SHMT_MINOR_HANDOFF	10u
#define SHMT_BLOCK_RECORDS_HANDOFF_MAX	1024u
static inline uint32_t shmt_block_records_for(uint32_t capacity, uint32_t minor)
{
	bool handoff = minor >= SHMT_MINOR_HANDOFF;
	uint32_t n = capacity / (handoff ? 256 : 64);
	uint32_t max = handoff ? SHMT_BLOCK_RECORDS_HANDOFF_MAX : SHMT_BLOCK_RECORDS_MAX;

	return n < SHMT_BLOCK_RECORDS_MIN ? SHMT_BLOCK_RECORDS_MIN : n > max ? max : n;
}
#define SHMT_DEFAULT_BLOCKS	1024u	/* 256 before minor 10 */

/* Ring-global counters that change under load: one cache line each, so
 * producers bumping `head` do not bounce the collector's `tail`. */
struct shmt_line {
	uint64_t v;
	uint8_t pad[56];
};
_Static_assert(sizeof(struct shmt_line) == 64, "a counter is one cache line");

/*
 * Flow ids (record offset 16) below 2^53. Bit 52 set: a global id, the
 * same flow in whichever ring it is recorded (carried from host to host,
 * or derived from a W3C trace id), joined across rings by the exporter.
 * shmtrace_flow_new() in a ring of minor 1 makes global ids: bits 32..51
 * a prefix taken from the ring's random ring_id, bits 0..31 a counter.
 * Bit 52 clear: an id that means something only in its ring (the small
 * counters of older libraries).
 */
#define SHMT_FLOW_GLOBAL	(1ull << 52)
#define SHMT_FLOW_MASK		SHMTRACE_FLOW_ID_MASK

/*
 * Minor 6: above the id, the role of the record in its flow (shmtrace.h's
 * SHMTRACE_FLOW_RECEIVES, bit 53, and _TERMINATES, bit 54); bits 55..63
 * are reserved, written 0 and ignored. The id is the field's low 53 bits
 * (shmtrace_flow_id()), whatever the bits above hold; the role, as the
 * tools read it, is SHMT_ROLE_* below.
 */
#define SHMT_ROLE_SHIFT		53
#define SHMT_ROLE_RECEIVES	1u	/* placed by its end: the arrow arrives there */
#define SHMT_ROLE_TERMINATES	2u	/* ends its flow: nothing after it joins */
_Static_assert(SHMTRACE_FLOW_RECEIVES == (uint64_t)SHMT_ROLE_RECEIVES << SHMT_ROLE_SHIFT &&
	       SHMTRACE_FLOW_TERMINATES == (uint64_t)SHMT_ROLE_TERMINATES << SHMT_ROLE_SHIFT &&
	       SHMTRACE_FLOW_ID_MASK == (1ull << SHMT_ROLE_SHIFT) - 1, "shmtrace.h's roles");

static inline uint32_t shmt_flow_role(uint64_t flow)
{
	return (uint32_t)(flow >> SHMT_ROLE_SHIFT) & (SHMT_ROLE_RECEIVES | SHMT_ROLE_TERMINATES);
}

/* The 20-bit prefix of a ring's global flow ids: its ring_id folded. */
static inline uint64_t shmt_flow_prefix(uint64_t ring_id)
{
	return (ring_id ^ ring_id >> 20 ^ ring_id >> 40 ^ ring_id >> 60) & 0xfffffull;
}

/* The clock: ns = mono0 + ((tsc - tsc0) * mult >> shift) when tsc_ok. */
struct shmt_clock {
	uint64_t realtime0;	/* CLOCK_REALTIME at creation, ns */
	uint64_t mono0;		/* CLOCK_MONOTONIC read together with it, ns */
	uint64_t tsc0;		/* TSC read together with mono0 */
	uint32_t mult;
	uint32_t shift;
	uint32_t tsc_ok;	/* 1: timestamps come from the calibrated TSC */
	uint32_t pad;
};
_Static_assert(sizeof(struct shmt_clock) == 40, "clock block is 40 bytes");

/*
 * A flush of a staging block into the ring, journalled so that whoever
 * recovers the lock after its owner died can finish or undo it exactly:
 * stage 1 = writing records, 2 = head stored, 3 = drops counted. Since
 * 2.0 the collector's sequencing of a full block in place is journalled
 * the same way; since 2.2 its publication of a copy of an owned block's
 * records. in_place's low 32 bits say which step (SHMT_JOURNAL_*).
 */
struct shmt_journal {
	uint32_t active;	/* 1 while a flush is in progress */
	uint32_t stage;
	uint32_t block;		/* block index, or UINT32_MAX for a direct write;
				 * SHMT_JOURNAL_COPY: the copy */
	uint32_t intern_active;	/* 1 while a string is being appended */
	uint64_t head_before;	/* ring head when the flush began */
	uint64_t taken_before;	/* the taken of the block whose records
				 * the step moves, when it began */
	uint64_t count;		/* records written into the ring */
	uint64_t consumed;	/* block records consumed (written + dropped) */
	uint64_t ndrop;		/* records dropped, ring full */
	uint64_t in_place;	/* the step (SHMT_JOURNAL_*), and for a copy
				 * the block copied from in the high 32 bits
				 * (2.0; written 0, and unused, from 1.1 to
				 * 1.10) */
};
/*
 * The steps. FLUSH: block's records [taken_before, + consumed) copied
 * into the ring's slots, count of them published, ndrop dropped; the
 * repair of a published one moves block's taken past them. IN_PLACE
 * (2.0): full block `block` sequenced where it is, count records (the
 * repair of an unpublished one makes it full again). COPY (2.2): the
 * collector copied count records of owned block `in_place >> 32`, from
 * its taken_before on, into block `block`, without the lock, and
 * publishes the copy as a sequenced block: the copy's state, head, then
 * the source's taken. The repair of an unpublished one frees the copy
 * (its taken set to its written); of a published one, moves the
 * source's taken past what was copied (shmt_journal_moves()).
 */
#define SHMT_JOURNAL_FLUSH	0u
#define SHMT_JOURNAL_IN_PLACE	1u
#define SHMT_JOURNAL_COPY	2u
_Static_assert(sizeof(struct shmt_journal) == 64, "journal is 64 bytes");

struct shmt_header {
	/* identity: never moves, in any version */
	uint64_t magic;
	uint16_t major;
	uint16_t minor;
	uint16_t compat;	/* oldest major whose readers can read this */
	uint16_t header_size;
	uint32_t record_size;
	uint32_t flags;
	uint64_t segment_size;	/* bytes; must equal the file size */

	/* geometry: set at creation, read-only afterwards */
	uint32_t capacity;	/* records in the ring, power of two */
	uint32_t mode;		/* enum shmtrace_mode */
	uint32_t max_strings;
	uint32_t string_bytes;
	uint32_t hash_slots;	/* power of two, >= 2 * max_strings */
	uint32_t max_threads;
	uint32_t nblocks;
	uint32_t block_records;
	uint64_t strings_off;	/* struct shmt_string[max_strings] */
	uint64_t hash_off;	/* uint16_t[hash_slots] */
	uint64_t heap_off;	/* char[string_bytes] */
	uint64_t threads_off;	/* struct shmt_thread[max_threads] */
	uint64_t blocks_off;	/* struct shmt_block[nblocks] */
	uint64_t block_size;	/* bytes per block */
	uint64_t records_off;	/* struct shmt_record[capacity] */
	uint64_t creator_uid;
	uint64_t created_pidns;	/* inode of the creator's pid namespace */
	struct shmt_clock clock;
	uint64_t ring_id;	/* random at creation (minor 1): scopes flow ids */
	/* minor 5: nonzero once the ring was removed or replaced (set once, at
	 * the end of its life, so this line stays read-mostly): producers read
	 * it on every call and move to the segment behind the name */
	uint32_t retired;
	uint8_t reserved0[256 - 188];

	/* the lock, on its own lines */
	union {
		pthread_mutex_t mutex;
		uint8_t mutex_space[64];
	};
	struct shmt_journal journal;	/* written only under the lock */
	uint32_t strings;	/* published interned strings (release) */
	uint32_t heap_used;	/* bytes of heap in use */
	uint32_t threads;	/* published name slots (release) */
	uint32_t lock_recoveries; /* times EOWNERDEAD was repaired */
	uint8_t reserved1[512 - 400];

	/* hot counters */
	struct shmt_line head;		/* next sequence to publish (release) */
	struct shmt_line tail;		/* next sequence the collector wants */
	struct shmt_line dropped;	/* records discarded, ring full */
	struct shmt_line overwritten;	/* reader: records lapped before read */
	struct shmt_line lock_timeouts;	/* flushes given up on the lock */
	struct shmt_line names_dropped;	/* name slots that did not fit */
	/* collector wake-up: a futex word bumped by producers past the mark */
	struct shmt_line wake_seq;
	struct shmt_line collector_sleeping;
	struct shmt_line collector_pid;	/* informational: who drains */
	struct shmt_line flow_seq;	/* last flow id handed out */
	/* minor 1 */
	struct shmt_line torn;		/* collector: slots skipped, not a record */
	struct shmt_line strings_dropped; /* strings that did not fit the table */
	/* minor 5 */
	struct shmt_line lock_dropped;	/* records dropped after a lock timeout */
	struct shmt_line orphaned;	/* records refused while the ring was removed */
	/* minor 9: shmtrace_trigger() calls, bumped after the trigger's
	 * record is staged; its low 32 bits are a futex word a flight
	 * recorder sleeps on, woken when trigger_waiting says one does */
	struct shmt_line triggers;
	struct shmt_line trigger_waiting;
	/* minor 10: blocks claimed so far (a claim's number orders a
	 * thread's blocks), and blocks handed over and not yet freed */
	struct shmt_line claim_seq;
	struct shmt_line full_blocks;
	uint8_t reserved2[SHMT_HEADER_SIZE - 512 - 18 * 64];
};
_Static_assert(sizeof(struct shmt_header) == SHMT_HEADER_SIZE, "header is one page");
_Static_assert(sizeof(pthread_mutex_t) <= 64, "mutex fits its space");
_Static_assert(__builtin_offsetof(struct shmt_header, mutex_space) == 256, "lock at 256");
_Static_assert(__builtin_offsetof(struct shmt_header, head) == 512, "counters at 512");

/* An interned string: its text is heap[off .. off+len), NUL at off+len. */
struct shmt_string {
	uint32_t off;
	uint32_t len;
};
_Static_assert(sizeof(struct shmt_string) == 8, "string entry is 8 bytes");

/*
 * A process/thread name slot, appended once per thread (and again when a
 * name changes; the last one wins). start_time (clock ticks since boot,
 * /proc/<pid>/stat field 22) tells a reused pid from the process it had.
 */
struct shmt_thread {
	uint32_t pid;
	uint32_t tid;
	uint64_t start_time;
	uint64_t pidns;		/* inode of the pid namespace */
	uint32_t flags;		/* SHMT_THREAD_* (minor 1; 0 before) */
	uint32_t pad;
	char name[SHMT_NAME_LEN];	/* thread name, NUL-terminated */
	char pname[SHMT_NAME_LEN];	/* process name, NUL-terminated */
};
_Static_assert(sizeof(struct shmt_thread) == 96, "name slot is 96 bytes");

#define SHMT_THREAD_LATE	0x1u	/* attached after waiting for the ring */
#define SHMT_THREAD_REATTACHED	0x2u	/* moved here from a removed ring */

/*
 * An open span on a thread's stack (minor 2): pushed by shmtrace_begin(),
 * popped by shmtrace_end(). flow holds the span's flow id packed into 32
 * bits (shmt_open_flow_pack()): a ring-local id below 2^31 as it is, an id
 * of this ring's own global series (SHMT_FLOW_GLOBAL | prefix << 32 |
 * counter, counter below 2^31) as SHMT_OPEN_FLOW_OWN | counter; any other
 * id (from another ring or a traceparent) is not kept: 0. Its role
 * (minor 7) is in the block's open_roles[], by depth.
 */
struct shmt_open {
	uint64_t ts;		/* the span's start */
	union {
		struct {
			uint16_t name;	/* interned string ids */
			uint16_t cat;
			uint32_t flow;
		};
		uint64_t ids;	/* the three as one word: a push stores them at once */
	};
};
_Static_assert(sizeof(struct shmt_open) == 16, "an open span is 16 bytes");

/* name, cat and flow as struct shmt_open's ids word holds them */
static inline uint64_t shmt_open_ids(uint16_t name, uint16_t cat, uint32_t flow)
{
	const struct shmt_open e = { .name = name, .cat = cat, .flow = flow };

	return e.ids;
}

#define SHMT_OPEN_MAX		4u	/* open spans tracked per thread */
#define SHMT_OPEN_FLOW_OWN	0x80000000u

static inline uint32_t shmt_open_flow_pack(uint64_t flow, uint64_t ring_id)
{
	uint64_t own = SHMT_FLOW_GLOBAL | shmt_flow_prefix(ring_id) << 32;

	flow = shmtrace_flow_id(flow);	/* the role is kept apart */

	if (flow < SHMT_OPEN_FLOW_OWN)
		return (uint32_t)flow;
	if (ring_id && (flow & ~0xffffffffull) == own && (flow & 0xffffffffull) < SHMT_OPEN_FLOW_OWN)
		return SHMT_OPEN_FLOW_OWN | (uint32_t)flow;
	return 0;
}

static inline uint64_t shmt_open_flow_unpack(uint32_t f, uint64_t ring_id)
{
	if (!(f & SHMT_OPEN_FLOW_OWN))
		return f;
	return ring_id ? SHMT_FLOW_GLOBAL | shmt_flow_prefix(ring_id) << 32 | (f & ~SHMT_OPEN_FLOW_OWN) : 0;
}

/*
 * An open span as a record (SHMTRACE_KIND_OPEN), written into the ring by
 * whoever adopts a dead thread's block: ts its start, dur the time from
 * then to the moment the adopter found the thread dead (ring clock), or
 * SHMT_OPEN_END_UNKNOWN (writers before minor 8, a death seen before the
 * span's start, which only a wrong clock gives, or a post-mortem reader's
 * record of a thread that died unseen), flow, name, cat, pid and tid as a
 * span's.
 */
#define SHMT_OPEN_END_UNKNOWN	0u

/*
 * A per-thread staging block. Its owner appends records without the lock:
 * it writes recs[written % n] and then release-stores written + 1. Whoever
 * holds the ring lock may move recs[taken % n .. written % n) into the ring
 * and then release-store taken. The owner never lets written - taken exceed
 * n. Both counters only grow.
 *
 * Since minor 2 the block also holds its owner's stack of open spans, in
 * what was padding: open_depth spans are open, the first SHMT_OPEN_MAX of
 * them (outermost first) in open0 and open1[] (deeper ones are counted, not
 * kept). open_closing is (written after the span's record << 8 | depth of
 * the span) while the owner is between publishing a span's record and
 * popping it: a reader whose block shows that written and that depth skips
 * the top entry, which is then in the records already. Since minor 7,
 * open_roles[d] is the flow role (SHMT_ROLE_*) of entry d, in what was
 * padding too.
 */
struct shmt_block {
	uint32_t state;		/* SHMT_BLOCK_FREE / _OWNED; changed under lock */
	uint32_t pid;
	uint32_t tid;
	uint32_t open_depth;	/* minor 2: spans open (release); was padding */
	uint64_t start_time;	/* owner's process start time */
	uint64_t written;	/* owner: records appended (release) */
	union {
		uint64_t open_closing;	/* minor 2: see above */
		uint64_t seq0;		/* 2.0, SEQUENCED: its records' first sequence */
	};
	struct shmt_open open0;	/* minor 2: the outermost open span */
	uint8_t open_roles[SHMT_OPEN_MAX];	/* minor 7: their flow roles */
	/* 2.1: set by the collector to ask the owner to hand this partly
	 * filled block over at its next call (padding before; an owner
	 * that ignores it leaves the collector to copy the block): the
	 * life's tag, shmt_ask_tag(claim_no), or SHMT_ASK_ANY */
	uint32_t ask;
	uint64_t taken;		/* lock holder: records moved to the ring */
	struct shmt_open open1[SHMT_OPEN_MAX - 1];	/* minor 2: the next ones */
	uint64_t claim_no;	/* minor 10: claim_seq when claimed; was padding */
	/* struct shmt_record recs[block_records] follows */
};
_Static_assert(sizeof(struct shmt_block) == 128, "block header is two lines");
_Static_assert(__builtin_offsetof(struct shmt_block, taken) == 64, "taken on its own line");
_Static_assert(__builtin_offsetof(struct shmt_block, open_roles) == 56, "roles after open0");

/*
 * The ask word's values (2.1): 0, not asked; SHMT_ASK_ANY, asked by a
 * collector that names no life (the first 2.1 collectors stored 1);
 * otherwise the tag of the life asked for, the block's claim number then.
 * An owner answers SHMT_ASK_ANY or its own life's tag, and clears any
 * other value unanswered: an ask a collector stored just after the block
 * was claimed again is for the life before.
 */
#define SHMT_ASK_ANY	1u

static inline uint32_t shmt_ask_tag(uint64_t claim_no)
{
	return (uint32_t)(claim_no % 0xfffffffeu) + 2u;	/* never 0 or SHMT_ASK_ANY */
}

static inline struct shmt_open *shmt_block_open(struct shmt_block *b, uint32_t i)
{
	return i == 0 ? &b->open0 : &b->open1[i - 1];
}

/*
 * An argument record (kind SHMTRACE_KIND_ARG, minor 2) follows the span or
 * instant it belongs to in the same staging block, published by the same
 * store of written: ts, pid and tid are its owner's, cat holds the owner's
 * name id, name the key's id, dur the value (an int64, or a string id) and
 * flow SHMT_ARG_FLOW(type, index, count).
 */
#define SHMT_ARG_FLOW(type, i, n)	((uint64_t)(type) | (uint64_t)(i) << 8 | (uint64_t)(n) << 16)
#define SHMT_ARG_TYPE(f)	((uint32_t)((f) & 0xffu))
#define SHMT_ARG_INDEX(f)	((uint32_t)((f) >> 8 & 0xffu))
#define SHMT_ARG_COUNT(f)	((uint32_t)((f) >> 16 & 0xffu))

/*
 * A text argument (type SHMTRACE_ARG_TEXT, minor 6) carries its text in
 * the records right after its argument record, in the same group: dur
 * says how many bytes follow (SHMT_TEXT_LEN, at most SHMTRACE_TEXT_MAX
 * for all the event's text arguments together) and how many of the
 * caller's were cut off (SHMT_TEXT_CUT, saturated), and the next
 * SHMT_TEXT_RECORDS(len) records, of kind SHMTRACE_KIND_TEXT, hold the
 * bytes: ts, pid and tid are the event's (so every filter and clock shift
 * treats them as it treats the event), and dur, flow, name and cat hold
 * SHMT_TEXT_CHUNK bytes in that order, each field little-endian, the last
 * record's unused bytes zero. A reader attaches the text only when all its
 * records follow with no slot skipped; else the argument is lost, never
 * shown in part.
 */
#define SHMT_TEXT_CHUNK		20u
#define SHMT_TEXT_RECORDS(len)	(((len) + SHMT_TEXT_CHUNK - 1) / SHMT_TEXT_CHUNK)
#define SHMT_TEXT_CUT_MAX	((1ull << 48) - 1)
#define SHMT_TEXT_VALUE(len, cut) ((uint64_t)(len) | (uint64_t)(cut) << 16)
#define SHMT_TEXT_LEN(v)	((uint32_t)((v) & 0xffffu))
#define SHMT_TEXT_CUT(v)	((uint64_t)(v) >> 16)

/* The records of one event at most: itself, its arguments, and the text
 * records of up to SHMTRACE_TEXT_MAX bytes over SHMTRACE_MAX_ARGS texts
 * (each rounded up to whole records). It must fit the smallest staging
 * block, since a group is staged whole. */
#define SHMT_GROUP_MAX	(1u + SHMTRACE_MAX_ARGS + SHMTRACE_TEXT_MAX / SHMT_TEXT_CHUNK + \
			 SHMTRACE_MAX_ARGS)
_Static_assert(SHMT_GROUP_MAX <= SHMT_BLOCK_RECORDS_MIN, "an event's records fit a block");
_Static_assert(SHMTRACE_TEXT_MAX <= 0xffffu, "a text's length fits SHMT_TEXT_LEN");

/* Stores text[0..n) (n <= SHMT_TEXT_CHUNK) into text record r's payload. */
static inline void shmt_text_put(struct shmt_record *r, const char *text, uint32_t n)
{
	uint8_t b[SHMT_TEXT_CHUNK] = { 0 };
	uint64_t d = 0, f = 0;

	for (uint32_t i = 0; i < n && i < SHMT_TEXT_CHUNK; i++)
		b[i] = (uint8_t)text[i];
	for (int i = 7; i >= 0; i--) {
		d = d << 8 | b[i];
		f = f << 8 | b[8 + i];
	}
	r->dur = d;
	r->flow = f;
	r->name = (uint16_t)(b[16] | b[17] << 8);
	r->cat = (uint16_t)(b[18] | b[19] << 8);
}

/* The SHMT_TEXT_CHUNK payload bytes of text record r, into out. */
static inline void shmt_text_get(const struct shmt_record *r, char *out)
{
	for (int i = 0; i < 8; i++) {
		out[i] = (char)(r->dur >> (8 * i));
		out[8 + i] = (char)(r->flow >> (8 * i));
	}
	out[16] = (char)r->name;
	out[17] = (char)(r->name >> 8);
	out[18] = (char)r->cat;
	out[19] = (char)(r->cat >> 8);
}

/*
 * An argument of an open span (minor 8): shmtrace_span_arg() stages it in
 * the thread's block when it is added, as a group of its own, so that it
 * survives a crash inside the span (the span's record at its end carries
 * its arguments again, as any span's). An argument record whose count is
 * 0: ts is the span's start, cat its name id, name the key's id, dur the
 * value (a text's SHMT_TEXT_VALUE(), its text records right after it, in
 * the same group), and flow SHMT_OPEN_ARG_FLOW(type, index, depth): index
 * 1..4 as added, depth the span's entry on its thread's stack
 * (0..SHMT_OPEN_MAX - 1). It belongs to no event: a reader keeps the last
 * ones of each (thread, depth) and gives them to that thread's open span
 * (kind 5) of the same start and name, if one comes. Rings before this
 * minor never hold one (their readers would count it as an argument whose
 * event was lost), so producers write them only into rings of
 * SHMT_MINOR_OPEN_ARGS or later.
 */
#define SHMT_MINOR_OPEN_ARGS	8u
#define SHMT_OPEN_ARG_FLOW(type, i, depth) \
	((uint64_t)(type) | (uint64_t)(i) << 8 | (uint64_t)(depth) << 24)
#define SHMT_OPEN_ARG_DEPTH(f)	((uint32_t)((f) >> 24 & 0xffu))

/* Whether an argument record's flow word says it is an open span's. */
static inline bool shmt_arg_of_open(uint64_t flow)
{
	return SHMT_ARG_COUNT(flow) == 0;
}

/*
 * A trigger (kind SHMTRACE_KIND_TRIGGER, minor 9): shmtrace_trigger()
 * asks whoever keeps the ring as a flight recorder to save what it holds.
 * ts is when, name the trigger's name (an interned string id), pid and
 * tid the caller's; dur, flow and cat are 0 (reserved). Staged and
 * flushed as any record, then counted in the header's `triggers`.
 * Producers write one only into rings of this minor or later, whose
 * readers know the kind.
 */
#define SHMT_MINOR_TRIGGER	9u

/*
 * A block's state. FREE: nobody's, fully flushed (written == taken).
 * OWNED: its owner (pid, tid, start_time) appends to it. FULL (minor 10):
 * its owner handed it over when it filled, while a collector drains the
 * ring: no one appends to it any more, the collector (under the lock)
 * flushes what it holds and frees it; its stack of open spans moved to
 * the owner's next block and is not read. CLAIMING (minor 10): a
 * producer took it from FREE without the lock and is setting it up; the
 * claimer's tid is in the bits above, so that the collector can free it
 * again when that thread died in between. Changed from FREE by a
 * compare-and-swap, from OWNED only by its owner or, once the owner is
 * dead, under the lock; readers of a ring before minor 10 see FULL and
 * CLAIMING as not owned, which is what they are.
 *
 * SEQUENCED (2.0): a FULL block whose records [taken, written) the
 * collector (or, with none draining, the block's own thread: stage.c)
 * gave the ring sequences [seq0, seq0 + written - taken)
 * without copying them: the ring's slots of those sequences hold
 * nothing of them, a reader reads them in the block (an extent:
 * shmt_ring_extents()). Made from FULL under the lock (the journal's
 * in_place), published by the head as any flush; freed by the
 * collector alone, without the lock (taken set to written first), once
 * its tail passed them and the ring need not keep them: its head a
 * ring's worth past them, where a slot would be reused, or more than a
 * quarter of the blocks sequenced, or half of them sequenced and full.
 * Its stack of open spans was moved, as a FULL block's, and seq0 takes
 * its open_closing word. Since 2.2 a SEQUENCED block is also made by the
 * collector from a block it claimed (CLAIMING, its own tid) and filled,
 * without the lock, with a copy of a live thread's staged records
 * (SHMT_JOURNAL_COPY): its owner words are that thread's, its claim
 * number a new one, its stack empty; it is read and freed as any.
 */
#define SHMT_BLOCK_FREE		0u
#define SHMT_BLOCK_OWNED	1u
#define SHMT_BLOCK_FULL		2u
#define SHMT_BLOCK_CLAIMING	3u
#define SHMT_BLOCK_SEQUENCED	4u
#define SHMT_BLOCK_KIND(state)	((state) & 0xffu)
#define SHMT_BLOCK_CLAIMER(state) ((state) >> 8)

#endif /* SHMTRACE_RING_FORMAT_H */
