/* SPDX-License-Identifier: MIT */
/*
 * ring_view.h - a mapped ring as everyone sees it: the view (struct
 * shmt_view) with its geometry validated once, the bounds-checked
 * references into the segment, the helpers on shared words, the one rule
 * for a ring's name and file, the clock a ring's timestamps are read with,
 * and what /proc says of a ring's processes. Nothing here takes the lock or
 * writes a record: readers (ring_reader.h) and writers (ring_writer.h)
 * build on it. Never seen by users (include/shmtrace.h is theirs).
 */
#ifndef SHMTRACE_RING_VIEW_H
#define SHMTRACE_RING_VIEW_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#include "shmtrace.h"
#include "clock_now.h"
#include "ring_format.h"

#define SHMT_API __attribute__((visibility("default")))

#define SHMT_NAME_MAX	200	/* longest ring name (bytes, no '/') */

/* C11-style helpers on shared words; the comment at each use says what pairs. */
#define load_acquire(p)		__atomic_load_n((p), __ATOMIC_ACQUIRE)
#define load_relaxed(p)		__atomic_load_n((p), __ATOMIC_RELAXED)
#define store_release(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define store_relaxed(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define fetch_add(p, v)		__atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax()	__builtin_ia32_pause()
#else
#define cpu_relax()	__asm__ __volatile__("" ::: "memory")
#endif

/* Built with ThreadSanitizer: a few waits take another form under it (the
 * comment at each use says why). */
#if defined(__SANITIZE_THREAD__)
#define SHMT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHMT_TSAN 1
#endif
#endif
#ifndef SHMT_TSAN
#define SHMT_TSAN 0
#endif

#define likely(x)	__builtin_expect(!!(x), 1)
#define unlikely(x)	__builtin_expect(!!(x), 0)

/*
 * A mapped ring with its geometry validated once and copied to private
 * memory, so that a peer rewriting the header later cannot move our bounds.
 */
struct shmt_view {
	void *base;
	size_t size;
	bool writable;
	struct shmt_header *h;
	uint32_t capacity, mask, mode;
	uint32_t max_strings, string_bytes, hash_slots, max_threads;
	uint32_t nblocks, block_records;
	uint64_t block_size;
	struct shmt_record *records;
	struct shmt_string *strings;
	uint16_t *hash;
	char *heap;
	struct shmt_thread *threads;
	uint8_t *blocks;
	struct shmt_clock clock;
	uint16_t major, minor;	/* minor: the format level (ring_format.h) */
	uint16_t header_minor;	/* the header's own minor, for display */
	uint64_t dev, ino;	/* the segment's identity (fstat at open) */
	uint32_t perm;		/* its permission bits then (st_mode & 07777) */
};

/* Ring geometry computed from the creation parameters. */
struct shmt_layout {
	uint64_t strings_off, hash_off, heap_off, threads_off, blocks_off;
	uint64_t block_size, records_off, size;
	uint32_t hash_slots;
	uint32_t block_records;	/* shmt_block_records_for(capacity, minor) */
};

/* ring.c */
int shmt_layout_compute(uint32_t capacity, uint32_t max_strings, uint32_t string_bytes,
			uint32_t max_threads, uint32_t nblocks, uint32_t minor, struct shmt_layout *l);
#define SHMT_OPEN_WRITE		0x1	/* map read-write (producers, collector) */
#define SHMT_OPEN_ANY_OWNER	0x2	/* skip the owner check (read-only tools) */
struct stat;
/* The one place a ring's file is opened: never through a symbolic link
 * (-ELOOP) nor blocking on a FIFO; what is not a regular file is -ENODEV
 * ("'NAME' is not a regular file"); unless SHMT_OPEN_ANY_OWNER, one the
 * caller may not write into is -EPERM. Returns the descriptor, its stat in
 * *st, or -errno with the reason in err. */
int shmt_ring_open_fd(const char *name, int flags, struct stat *st, char *err, size_t errlen);
/* shmt_ring_open_fd(), then the segment mapped and its header validated:
 * 0, -EPROTO (not a ring, or a version we cannot read), -EBADMSG
 * (inconsistent or truncated), or the open's -errno; the reason in err. */
int shmt_view_open(const char *name, int flags, struct shmt_view *v, char *err, size_t errlen);
int shmt_view_validate(struct shmt_view *v, const struct shmt_header *copy, uint64_t file_size,
		       char *err, size_t errlen);
void shmt_view_close(struct shmt_view *v);
/* What a file that shmt_view_open() refuses says of itself, for ls and rm
 * to tell a ring they cannot read from a file that is no ring. */
struct shmt_ring_exam {
	uint16_t major, minor;	/* the header's version */
	int verdict;		/* shmt_view_validate()'s: 0, -EPROTO (a version not
				 * read here) or -EBADMSG (damaged) */
	char why[200];		/* its reason */
};
/* Opens name as shmt_ring_open_fd() does (any owner), reads its header
 * into private memory (never maps it) and validates that copy. Returns
 * the descriptor, left open for the caller to close, so that the inode st
 * names cannot be reused before an unlink of it (shmt_ring_unlink_seen()),
 * when the file carries the ring's magic, with *x filled; -EPROTO when it
 * does not (not a ring); or the open's -errno; the reason in err. */
int shmt_ring_examine(const char *name, struct stat *st, struct shmt_ring_exam *x, char *err,
		      size_t errlen);
/* Reads a byte of every page of v's mapping, for a producer that is about
 * to write into it: MAP_POPULATE maps the pages, but on some virtual
 * machines the first access of each page from this process still costs
 * microseconds in the hypervisor (4.7 us on this project's, with no fault
 * the guest sees), and would land in span calls. Reads only: what peers
 * wrote is left as it is. */
uint64_t shmt_view_prefault(const struct shmt_view *v);	/* pages read */
/* The one rule for a ring name: 0, or -EINVAL for an empty or too long
 * name, one with a '/', "." or "..". */
int shmt_name_check(const char *name);
/* ... in words, as every message of a name it refuses gives it:
 * "invalid ring name 'NAME' (" SHMT_NAME_RULE ")" */
#define SHMT_NAME_STR_(n)	#n
#define SHMT_NAME_STR(n)	SHMT_NAME_STR_(n)
#define SHMT_NAME_RULE	"1 to " SHMT_NAME_STR(SHMT_NAME_MAX) " bytes, no '/', not '.' or '..'"
/* The one place a ring's file is named: SHMT_SHM_DIR "/<name>" into buf.
 * Returns 0, or -EINVAL for a bad name (shmt_name_check) or a short buf. */
#define SHMT_SHM_DIR		"/dev/shm"
#define SHMT_PATH_MAX		(sizeof(SHMT_SHM_DIR) + SHMT_NAME_MAX + 1)
int shmt_ring_path(const char *name, char *buf, size_t len);
/* The name shm_open() and shm_unlink() take for ring name: "/name". */
void shmt_shm_name(char *buf, size_t len, const char *name);
/* The identity of the segment now behind a ring's name: 0 or -errno. */
int shmt_ring_identity(const char *name, uint64_t *dev, uint64_t *ino);
/* ring_create.c: removes name only if it still is the segment seen maps
 * (kept mapped, or open, meanwhile, so that its inode cannot be reused;
 * only seen's dev and ino are read), marking it retired when we may write
 * it. Returns 0, -ESTALE when the name is now
 * another file (made anew since: left alone), or another -errno. */
int shmt_ring_unlink_seen(const char *name, const struct shmt_view *seen);
/* A ring is made under "/dev/shm/" SHMT_TMP_PREFIX "<pidns>.<pid>.<start>.<rand>"
 * and linked to its name when whole; tools skip such names. */
#define SHMT_TMP_PREFIX		".shmtrace-tmp."

/*
 * Bounds-checked references into the segment (like lttng-ust's shmp() and
 * shmp_index()): every table entry is reached through one of these, which
 * bound the index by the geometry validated at open (struct shmt_view),
 * never by a header field a peer can write, and return NULL outside.
 */
static inline struct shmt_string *shmt_string_at(const struct shmt_view *v, uint32_t id)
{
	/* id 0 is reserved: the table holds max_strings + 1 entries */
	return id <= v->max_strings ? &v->strings[id] : NULL;
}

static inline uint16_t *shmt_hash_at(const struct shmt_view *v, uint32_t i)
{
	return i < v->hash_slots ? &v->hash[i] : NULL;
}

static inline struct shmt_thread *shmt_thread_at(const struct shmt_view *v, uint32_t i)
{
	return i < v->max_threads ? &v->threads[i] : NULL;
}

static inline struct shmt_block *shmt_block_at(const struct shmt_view *v, uint32_t i)
{
	return i < v->nblocks ? (struct shmt_block *)(v->blocks + (uint64_t)i * v->block_size)
			      : NULL;
}

static inline struct shmt_record *shmt_block_recs(struct shmt_block *b)
{
	return (struct shmt_record *)(b + 1);
}

/* Copies record s's fields, all but its commit word, into d, each loaded
 * as a reader of a live segment loads them (relaxed: the commit word,
 * read around them, says whether they are a record). */
static inline void shmt_record_fields(struct shmt_record *d, const struct shmt_record *s)
{
	d->ts = load_relaxed(&s->ts);
	d->dur = load_relaxed(&s->dur);
	d->flow = load_relaxed(&s->flow);
	d->pid = load_relaxed(&s->pid);
	d->tid = load_relaxed(&s->tid);
	d->name = load_relaxed(&s->name);
	d->cat = load_relaxed(&s->cat);
}

/* A flush's journal, its flusher dead: true if the flush's records are in
 * the ring already (head stored), so that its block's taken must move past
 * them; false if the flush is to be undone. The one test of the repair
 * (lock.c) and of a lock-free reader (ring_reader.c) alike. */
static inline bool shmt_journal_published(const struct shmt_journal *j, uint64_t head)
{
	uint32_t stage = load_relaxed(&j->stage);
	uint64_t count = load_relaxed(&j->count);

	return stage >= 2 ||
	       (stage == 1 && count && head == load_relaxed(&j->head_before) + count);
}

/* The step the journal covers (SHMT_JOURNAL_*), as the ring's level reads
 * its last word: a flush in rings before 2.0, whose word was a count (1.0)
 * or unused; a copy only from 2.2 on. A value no level defines is
 * returned as it is, and moves no block. */
static inline uint32_t shmt_journal_step(const struct shmt_view *v)
{
	uint32_t step = (uint32_t)load_relaxed(&v->h->journal.in_place);

	if (v->minor < SHMT_MINOR_IN_PLACE || (step == SHMT_JOURNAL_COPY && v->minor < SHMT_MINOR_COPY))
		return SHMT_JOURNAL_FLUSH;
	return step;
}

/* The block whose staged records the journal's step moves into the ring,
 * and in *taken where that step leaves its taken (once published):
 * a flush's block, or the block a copy was made of (SHMT_JOURNAL_COPY);
 * UINT32_MAX for a sequencing in place, which moves no block's taken.
 * The one reading of the journal's kinds, for the repair and readers. */
static inline uint32_t shmt_journal_moves(const struct shmt_view *v, uint64_t *taken)
{
	const struct shmt_journal *j = &v->h->journal;
	uint32_t step = shmt_journal_step(v);

	if (step == SHMT_JOURNAL_FLUSH) {
		*taken = load_relaxed(&j->taken_before) + load_relaxed(&j->consumed);
		return load_relaxed(&j->block);
	}
	if (step == SHMT_JOURNAL_COPY) {
		*taken = load_relaxed(&j->taken_before) + load_relaxed(&j->count);
		return (uint32_t)(load_relaxed(&j->in_place) >> 32);
	}
	return UINT32_MAX;
}

/* clock.c: the process's clock (shmtrace_now(); shmt_now() in
 * clock_now.h) set from a ring's parameters, and a reading with a given
 * ring's own (shmt_clock_now()) */
void shmt_clock_adopt(const struct shmt_clock *c);
uint64_t shmt_clock_now(const struct shmt_clock *c);
uint64_t shmt_realtime_ns(void);

/* procinfo.c */
uint64_t shmt_proc_start_time(uint32_t pid);	/* 0 if gone */
uint64_t shmt_self_pidns(void);
bool shmt_owner_alive(uint32_t pid, uint32_t tid, uint64_t start_time);
/* Whether a thread of id tid exists (in our pid namespace). */
bool shmt_tid_alive(uint32_t tid);
/* Thread tid's state, field 3 of /proc/TID/stat: 'R', 'S', 'D', 'T'
 * (stopped: SIGSTOP), 't' (stopped by a debugger), 'Z' (a zombie), ...;
 * 0 for a thread not found, or not ours to read. */
char shmt_tid_state(uint32_t tid);
/* Other processes that map the file dev:ino (a producer's open handle maps
 * its ring whether or not it has written yet), as far as /proc lets us
 * read their maps: our own user's processes, or all of them as root. */
uint32_t shmt_segment_mappers(uint64_t dev, uint64_t ino);

#endif /* SHMTRACE_RING_VIEW_H */
