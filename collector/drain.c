/* SPDX-License-Identifier: MIT */
/*
 * drain.c - one collector session: copying a ring into capture frames
 * without losing or duplicating a record, whenever the collector or a
 * producer dies (records in drain_copy.c, the other frames in
 * drain_frames.c).
 *
 * The collector reads the ring without its lock (commit words and head,
 * ring_reader.c). It takes the lock only to move live threads' staging
 * blocks into the ring, briefly, and only after checking that the mutex
 * bytes are sane (hold.c). The ring's tail advances only over records whose frame
 * the kernel reported written (writer.c); a collector killed at any point leaves every
 * unreleased record in the ring, and a reader drops the duplicates the
 * next collector writes by their sequence numbers.
 */
#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "drain_int.h"
#include "priority.h"

static uint64_t hash64(const void *p, size_t n, uint64_t h)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

struct drain *drain_new(void)
{
	struct drain *d = calloc(1, sizeof(struct drain));

	if (d)
		d->hold.claim_fd = -1;	/* none yet: hold_free() closes none */
	return d;
}

/* What drain_open() allocates, freed (and NULL) again. */
static void free_buffers(struct drain *d)
{
	cw_free(d->w);
	parts_free(d->parts);
	free(d->scratch);
	hold_free(&d->hold);
	d->w = NULL;
	d->parts = NULL;
	d->scratch = NULL;
}

/* Maps the ring, checks it and takes its claim: all that can refuse a
 * ring, nothing more. */
static int attach_ring(struct drain *d, const struct drain_opts *o)
{
	char err[256];
	int ret;

	memset(d, 0, sizeof(*d));
	d->hold.claim_fd = -1;
	d->o = *o;
	ret = shmt_view_open(o->ring, SHMT_OPEN_WRITE, &d->v, err, sizeof(err));
	if (ret < 0) {
		snprintf(d->err, sizeof(d->err), "%s", err);
		return ret;
	}
	ret = hold_init(&d->hold, &d->v, o->ring, o->poll_ns);
	if (ret < 0) {
		snprintf(d->err, sizeof(d->err), ret == -EBUSY ?
			 "another collector is already draining ring '%s'" :
			 "cannot lock ring '%s': %s", o->ring, strerror(-ret));
		shmt_view_close(&d->v);
		return ret;
	}
	d->attached = true;
	return 0;
}

static int open_ring(struct drain *d, const struct drain_opts *o)
{
	int ret;

	if (!d->attached && (ret = attach_ring(d, o)) < 0)
		return ret;
	shmt_clock_adopt(&d->v.clock);
	/* the run id names the ring, not this process: every collector that
	 * ever drains this ring writes the same id, so a reader dedupes
	 * records across restarts by (run id, sequence) */
	d->run_id = hash64(o->ring, strlen(o->ring), 14695981039346656037ull);
	d->run_id = hash64(&d->v.clock.realtime0, 8, d->run_id);
	d->run_id = hash64(&d->v.clock.mono0, 8, d->run_id) & ((1ull << 53) - 1);
	d->scratch = calloc(DRAIN_BATCH, sizeof(*d->scratch));
	d->w = cw_new();
	d->parts = parts_new(o->output, o->max_files);
	ret = !d->scratch || !d->w || !d->parts ? -ENOMEM :
	      drain_open_part(d);
	if (ret < 0) {
		free_buffers(d);
		shmt_view_close(&d->v);
		d->attached = false;
		return ret;
	}
	SHMT_HOOK("collector-open");
	/* touch one word per page of the records: on a VM the first access
	 * to a page can cost microseconds even after MAP_POPULATE, and it
	 * belongs here, not in the first drain */
	for (uint64_t off = 0; off < (uint64_t)d->v.capacity * SHMT_RECORD_SIZE; off += 4096)
		(void)*(volatile const uint8_t *)((const uint8_t *)d->v.records + off);
	d->pos = load_acquire(&d->v.h->tail.v);
	/* producers hand full blocks over from here on, and sequence none
	 * of their own any more: whatever they sequenced before is found
	 * by hold_in_place()'s look, which takes the lock after this */
	hold_mark(&d->hold);
	hold_in_place(&d->hold, d->pos);
	d->opened = true;
	d->awake_since = shmt_mono_ns();
	return 0;
}

struct open_arg {
	struct drain *d;
	const struct drain_opts *o;
	int (*fn)(struct drain *d, const struct drain_opts *o);
	int ret;
};

static int guarded_open(void *p)
{
	struct open_arg *a = p;

	a->ret = a->fn(a->d, a->o);
	return 0;
}

/* fn (attach_ring() or open_ring()), guarded as a pass is: they read the
 * ring's header, and open_ring() touches every page of its records, and
 * a ring truncated meanwhile fails the open instead of killing the
 * collector with SIGBUS. What was set up then is left to drain_free()
 * (its mapping to the exit). */
static int open_guarded(struct drain *d, const struct drain_opts *o,
			int (*fn)(struct drain *d, const struct drain_opts *o))
{
	struct open_arg a = { d, o, fn, 0 };
	int ret = shmt_guarded(guarded_open, &a);

	if (ret == -EFAULT)
		snprintf(d->err, sizeof(d->err), "ring '%s' was truncated while it was being opened",
			 o->ring);
	return ret < 0 ? ret : a.ret;
}

int drain_attach(struct drain *d, const struct drain_opts *o)
{
	return open_guarded(d, o, attach_ring);
}

int drain_open(struct drain *d, const struct drain_opts *o)
{
	return open_guarded(d, o, open_ring);
}

const char *drain_error(const struct drain *d)
{
	return d->err;
}


bool drain_part_failed(const struct drain *d)
{
	return d->part_failed;
}

/* Ends the part with e: the END frame written and fsynced, the ring's tail
 * released over all of it. Returns 0 or -errno. */
static int end_part(struct drain *d, const struct shmt_cap_end *e)
{
	int ret;

	ret = shmt_cap_put_end(cw_buffer(d->w), e);
	if (!ret)
		ret = drain_submit(d);
	if (!ret)
		ret = cw_fsync(d->w);
	if (ret < 0)
		return ret;
	drain_release_tail(d);
	d->st.bytes += cw_written(d->w);
	d->done_parts = cw_done_seq(d->w);
	return 0;
}

/* The part's bytes past its header and tables, on disk and buffered */
static uint64_t part_size(const struct drain *d)
{
	return cw_offset(d->w) + cw_buffer(d->w)->size - d->part_base;
}

/* A part is full once what it holds past its header and the tables it
 * began with reaches --max-size: those tables (every string and thread
 * name the ring has, written again at the head of each part) can alone
 * pass a small bound, and a rotation on them ended each part as soon as
 * it began, a new part on every pass, though no record came. */
static bool part_full(const struct drain *d)
{
	return d->o.max_size && part_size(d) >= d->o.max_size;
}

static int rotate(struct drain *d)
{
	struct shmt_cap_end e = { .records = d->st.records, .end_ns = shmtrace_now(),
				  .next_part = d->part + 1 };
	struct part_ended pe = { .part = d->part, .records = e.records,
				 .started_ns = d->part_started_ns, .end_ns = e.end_ns };
	int ret;

	ret = end_part(d, &e);
	if (ret < 0)
		return ret;
	/* unknown (0) if fstat fails: then never deleted, and said so */
	if (cw_identity(d->w, &pe.dev, &pe.ino) < 0)
		pe.dev = pe.ino = 0;
	parts_ended(d->parts, &pe);
	cw_close(d->w);
	d->part++;
	return drain_open_part(d);
}

/* -ESTALE, with d->err saying why, when the part being written was
 * deleted or replaced: whatever is written to it from then on is lost,
 * so the ring's tail must not move over it again. */
static int check_output(struct drain *d)
{
	int ret = cw_check_file(d->w);

	if (ret < 0)
		snprintf(d->err, sizeof(d->err), "capture '%.400s' was deleted or replaced while "
			 "writing; stopping, the ring keeps what was not drained", cw_path(d->w));
	return ret;
}

/*
 * A head no producer could have stored, said once a session: a forger
 * who shifts head (and tail) by a multiple of 2^24 makes the slots match
 * other sequences (the commit word holds 24 bits of one), which nothing
 * in the ring tells from records; the jump itself is what is seen: from
 * a head read before to one below it, or from what was read to more than
 * the slots past it.
 */
static void forged_head(struct drain *d, uint64_t from, uint64_t head)
{
	if (d->head_forged_said)
		return;
	d->head_forged_said = true;
	if (head < from)
		fprintf(stderr, "shmtrace-collector: warning: ring '%s': its head went back from "
			"%llu to %llu, which no producer does: its header is forged or damaged, and "
			"records written from there on repeat sequences this capture holds (an "
			"export drops them as doubles)\n", d->o.ring, (unsigned long long)from,
			(unsigned long long)head);
	else
		fprintf(stderr, "shmtrace-collector: warning: ring '%s': its head jumped from %llu "
			"to %llu, more than its %u slots past what was read, which a discard ring "
			"never allows: its header is forged or damaged, and records may be missing, "
			"or captured twice under other sequences\n", d->o.ring,
			(unsigned long long)from, (unsigned long long)head, d->v.capacity);
}

/*
 * The next nap, once a pass is done. After a pass that found a block's
 * worth of records or more: 1 ms (or the poll interval, if shorter), so
 * that under load the collector comes on its own timer, a little at a
 * time, rather than when a producer's call finds blocks piling up and
 * wakes it. A woken collector (at nice -10 while behind, priority.h)
 * preempts the task on the CPU it lands on, and when that is the waker,
 * the waker's span call lasts the whole drain pass (case 3 of `make
 * bench`: the p99.99 call, in docs/BENCHMARKS.md). After a pass that
 * found less, twice the last nap, up to the poll interval: a trickle of
 * records, tracing left on, costs a few wake-ups a second. A pass that
 * found nothing leaves the nap to drain_sleep(), which doubles it.
 */
#define DRAIN_BUSY_NAP_NS (1000ull * 1000)
static void set_nap(struct drain *d, bool active, long copied)
{
	uint64_t poll = d->o.poll_ns;

	if (copied >= (long)d->v.block_records)
		d->idle_ns = poll < DRAIN_BUSY_NAP_NS ? poll : DRAIN_BUSY_NAP_NS;
	else if (active)
		d->idle_ns = d->idle_ns && d->idle_ns < poll / 2 ? d->idle_ns * 2 : poll;
}

/* Copies what is published, up to the pass's budget: *copied so far. */
static int copy_published(struct drain *d, long *copied)
{
	uint64_t head = shmt_ring_head(&d->v);
	int ret;

	/* a head only grows, whatever producers do: one below the head read
	 * before was forged, whether or not it is below what was copied */
	if (head < d->head_last) {
		forged_head(d, d->head_last, head);
		d->head_back = true;
	}
	d->head_last = head;
	if (head < d->pos) {
		/* followed, since producers write from there; said, since the
		 * capture then holds their records under sequences it has
		 * already given to others, which a reader drops as doubles */
		forged_head(d, d->pos, head);
		d->pos = head;
	}
	if (head - d->pos > d->v.capacity) {
		/* lapped before we got to them (a peer moving tail past head
		 * in discard mode is the only other way) */
		if (d->v.mode == SHMTRACE_MODE_DISCARD)
			forged_head(d, d->pos, head);
		d->skipped.lapped += head - d->v.capacity - d->pos;
		d->pos = head - d->v.capacity;
	}
	while (d->pos < head && *copied < 4 * (long)DRAIN_BATCH) {
		long r = drain_copy_records(d, head);

		if (r < 0)
			return (int)r;
		*copied += r;
		if (part_full(d)) {
			/* rotate before the part grows past the bound by more
			 * than the batch just copied */
			ret = rotate(d);
			if (ret < 0)
				return ret;
		} else if (cw_buffer(d->w)->size >= CW_BUF_LIMIT) {
			ret = drain_submit(d);
			if (ret < 0)
				return ret;
		}
	}
	d->behind = d->pos < head;
	return 0;
}

/* A share of whole, in PRIO_BACKLOG_FULL ths, saturated. */
static uint32_t share(uint64_t part, uint64_t whole)
{
	return !whole || part >= whole ? PRIO_BACKLOG_FULL : (uint32_t)(part * PRIO_BACKLOG_FULL / whole);
}

/* drain_backlog() now. full_blocks, head and tail are words any producer
 * can write: a forged one only moves the collector's priority
 * (priority.h), between its two values; and full_blocks no higher than
 * this pass's look found full, nor tail below what the collector wrote,
 * so that a forged word cannot keep it raised on an empty ring. */
static uint32_t backlog_now(const struct drain *d)
{
	uint64_t full = load_relaxed(&d->v.h->full_blocks.v);
	uint64_t head = shmt_ring_head(&d->v), tail = load_relaxed(&d->v.h->tail.v);
	uint64_t wrote = cw_done_seq(d->w);
	uint32_t b, r;

	if (full > d->hold.nfull)
		full = d->hold.nfull;
	if (tail < wrote)
		tail = wrote;
	b = d->v.nblocks ? share(full, d->v.nblocks) : 0;
	r = head > tail ? share(head - tail, d->v.capacity) : 0;
	return b > r ? b : r;
}

long drain_pass(struct drain *d, bool final)
{
	long copied = 0;
	bool active;
	int ret;

	SHMT_HOOK("collector-pass");
	/* once a pass: before anything more is copied or released */
	ret = check_output(d);
	if (ret < 0)
		return ret;
	/* producers' blocks moved a few at a time, and what they moved
	 * encoded before the next hold of the lock, so that a producer
	 * waiting for it gets it in between */
	active = hold_adopt(&d->hold, final);
	for (;;) {
		ret = drain_put_tables(d);
		if (ret < 0)
			return ret;
		active |= d->pos < shmt_ring_head(&d->v);
		ret = copy_published(d, &copied);
		if (ret < 0)
			return ret;
		/* a pass that copied its fill moves no more: the next one
		 * comes at once (drain_sleep() sees blocks waiting) */
		if (!hold_pending(&d->hold) || copied >= 4 * (long)DRAIN_BATCH)
			break;
		active |= hold_next(&d->hold);
	}
	set_nap(d, active, copied);
	ret = drain_put_loss(d, false);
	if (ret < 0)
		return ret;
	ret = drain_submit(d);
	if (!ret)
		ret = cw_reap(d->w, false);
	if (ret < 0)
		return ret;
	drain_release_tail(d);
	d->backlog = backlog_now(d);
	d->worked = copied > 0 || d->hold.nfull > 0;
	d->seen_full = load_relaxed(&d->v.h->full_blocks.v);
	d->seen_tail = load_relaxed(&d->v.h->tail.v);
	if (part_full(d)) {
		ret = rotate(d);
		if (ret < 0)
			return ret;
	}
	return copied;
}

/*
 * A collector that has been awake DRAIN_AWAKE_MOST_NS takes a short nap,
 * though records wait, while what waits is under a sixteenth of what
 * producers can stage. Running on, at nice -10 while behind (priority.h),
 * it keeps the CPU from the producer it shares it with for as long as the
 * scheduler lets a task of 9 times its weight run: 27 ms in one stretch,
 * the timed producer of case 3 of `make bench` runnable all along (perf
 * sched timehist), while the other producer kept the collector from ever
 * finding the ring empty. Any nap hands that producer the CPU, and its
 * call ends; the producer then keeps the CPU for the rest of its slice,
 * so the bound is low: it is the drain's share of the CPU given up, and
 * past it the collector runs on (docs/DESIGN.md, "The drain naps").
 */
#define DRAIN_AWAKE_MOST_NS (1000ull * 1000)
#define DRAIN_NAP_BELOW (PRIO_BACKLOG_FULL / 16)
#define DRAIN_YIELD_NS (50ull * 1000)
bool drain_awake_long(const struct drain *d, uint64_t now_ns)
{
	return d->backlog < DRAIN_NAP_BELOW && now_ns >= d->awake_since + DRAIN_AWAKE_MOST_NS;
}

/* Waits for a producer's wake-up, at most ns, unless what producers would
 * wake us for is already there, or a part is left to adopt; with
 * reap_first, writes in flight are waited for instead of the timer. */
static void nap(struct drain *d, uint64_t ns, bool reap_first)
{
	struct shmt_header *h = d->v.h;
	uint32_t *word = (uint32_t *)&h->wake_seq.v;
	uint32_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
	bool reap = reap_first && cw_in_flight(d->w);

	store_relaxed(&h->collector_sleeping.v, 1);
	/* pairs with the producers' look at collector_sleeping after their
	 * stores: either they see it set and wake us, or we see here what
	 * they would have woken us for */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* what the ring's words say waits is not waited for, unless the last
	 * pass found work or they moved since: tail and full_blocks are any
	 * producer's to write, and forged they would keep every nap from
	 * waiting; a burst after the pass's look moves them */
	if (!((d->worked || load_relaxed(&h->full_blocks.v) != d->seen_full ||
	       load_relaxed(&h->tail.v) != d->seen_tail) && shmt_wake_due(&d->v)) &&
	    shmt_ring_head(&d->v) - d->pos < d->v.capacity / 4 && !reap && !d->hold.full_left) {
#if SHMT_TSAN
		/* ThreadSanitizer runs a signal's handler only inside a call
		 * it intercepts, which a raw futex is not: SIGTERM would wait
		 * forever. Under it, nap without the producers' wake-up, at
		 * most 50 ms, which stands in for it */
		struct timespec most_50ms = { 0, 50000000 };

		(void)seen;
		nanosleep(ns > 50000000ull ? &most_50ms : &ts, NULL);
#else
		syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
#endif
	} else if (reap)
		cw_reap(d->w, true);
	store_relaxed(&h->collector_sleeping.v, 0);
	d->awake_since = shmt_mono_ns();
}

void drain_sleep(struct drain *d)
{
	uint64_t ns = d->idle_ns ? d->idle_ns : d->o.poll_ns;
	uint64_t most = d->o.poll_ns * 10 > 2000000000ull ? d->o.poll_ns : d->o.poll_ns * 10;

	/* idle: each quiet wake-up doubles the next nap, up to 10 x the poll
	 * interval (at most 2 s); a producer's wake-up or any work resets it.
	 * Records read but not yet written are waited for rather than the
	 * timer */
	d->idle_ns = ns * 2 < most ? ns * 2 : most;
	nap(d, ns, true);
}

void drain_yield(struct drain *d)
{
	nap(d, DRAIN_YIELD_NS, false);
}

/* How long the last passes of a stop may go on once what was published
 * before them is drained: producers still writing make every pass find
 * records, and a stop must end. What they write after it stays in the
 * ring, said at the exit. */
#define DRAIN_FINISH_MOST_NS (2000ull * 1000 * 1000)

int drain_finish(struct drain *d)
{
	uint64_t until = shmt_mono_ns() + DRAIN_FINISH_MOST_NS, head = shmt_ring_head(&d->v);
	struct shmt_cap_end e;
	uint32_t left = UINT32_MAX;
	long r;
	int ret;

	/* until a pass finds nothing: producers may still be flushing, and
	 * handed-over blocks wait for room the capture's writes free; past
	 * the head at the start (a backlog is never cut short), at most
	 * DRAIN_FINISH_MOST_NS. A head that goes back was forged (it only
	 * grows) and ends the stop, what it did not copy left in the ring:
	 * a writer of the ring who set it far ahead, then back and on a
	 * record a pass, kept a stop going for as many passes as the ring
	 * has slots */
	d->head_back = false;
	do {
		r = drain_pass(d, true);
		if (r < 0)
			return (int)r;
		if (!r && d->hold.full_left && d->hold.full_left < left) {
			left = d->hold.full_left;
			ret = cw_drain(d->w);
			if (ret < 0)
				return ret;
			drain_release_tail(d);
			r = 1;
		}
	} while (r > 0 && !d->head_back && (d->pos < head || shmt_mono_ns() < until));
	ret = cw_drain(d->w);
	if (ret < 0)
		return ret;
	drain_release_tail(d);
	ret = drain_put_loss(d, true);
	if (ret < 0)
		return ret;
	memset(&e, 0, sizeof(e));
	e.records = d->st.records;
	e.end_ns = shmtrace_now();
	return end_part(d, &e);
}

const char *drain_error_path(const struct drain *d)
{
	return cw_path(d->w);
}

bool drain_fsync_failed(const struct drain *d)
{
	return cw_fsync_failed(d->w);
}

void drain_get_stats(const struct drain *d, bool failed, struct drain_stats *st)
{
	uint64_t done = cw_done_seq(d->w);

	/* a part that failed to open has a writer that wrote nothing yet */
	if (d->done_parts > done)
		done = d->done_parts;
	*st = d->st;
	st->lock_hold_max_ns = d->hold.lock_hold_max_ns;
	st->lock_holds = d->hold.lock_holds;
	st->lock_holds_long = d->hold.lock_holds_long;
	if (d->parts) {
		st->parts_deleted = parts_deleted(d->parts)->parts;
		st->records_deleted = parts_deleted(d->parts)->records;
	}
	/* what was copied is below the head: a bound the ring's word cannot
	 * forge; the view's geometry and clock are copies, safe after an error */
	st->ring_corrupt = !shmt_loss_plausible(&st->ring, &(const struct shmt_loss_scope){
			.published = d->pos, .has_published = true,
			.age_ns = shmt_loss_age_ns(d->v.clock.realtime0),
			.discard = d->v.mode == SHMTRACE_MODE_DISCARD,
		}, st->ring_corrupt_why, sizeof(st->ring_corrupt_why));
	if (failed) {
		st->records = drain_records_written(d, done);
		st->bytes += cw_written(d->w);
	}
}

/* Names that did not fit are not lost records: said apart, in words. */
struct loss_arg {
	const struct drain *d;
	struct shmt_loss l;
};

static int loss_read(void *p)
{
	struct loss_arg *a = p;

	shmt_loss_read(&a->d->v, &a->l, false);
	return 0;
}

void drain_warn_names(const struct drain *d)
{
	struct loss_arg a = { .d = d };
	struct shmt_loss l;
	uint64_t s, n;
	char why[192];

	/* read as a pass reads: a ring truncated after the last pass has no
	 * counts to give, and must not kill the collector before its exit */
	if (shmt_guarded(loss_read, &a) < 0)
		return;
	l = a.l;
	s = l.strings_dropped;
	n = l.names_dropped;
	/* counters that cannot be true are no counts (the summary says so) */
	if (!shmt_loss_plausible(&l, &(const struct shmt_loss_scope){
			.age_ns = shmt_loss_age_ns(d->v.clock.realtime0) }, why, sizeof(why)))
		return;

	if (s)
		fprintf(stderr, "shmtrace-collector: warning: %llu string%s not interned: the ring's "
			"string table (%u strings, %u bytes of text) is full; create the ring with a "
			"larger --strings (or --string-bytes)\n", (unsigned long long)s,
			s == 1 ? " was" : "s were", d->v.max_strings, d->v.string_bytes);
	if (n)
		fprintf(stderr, "shmtrace-collector: warning: %llu thread name%s not recorded: the "
			"ring's thread-name table (%u) is full; create the ring with a larger "
			"--threads\n", (unsigned long long)n, n == 1 ? " was" : "s were",
			d->v.max_threads);
}

void drain_free(struct drain *d)
{
	if (!d)
		return;
	if (d->opened)
		cw_close(d->w);
	free_buffers(d);
	if (d->opened || d->attached)
		shmt_view_close(&d->v);
	free(d);
}

/* A count read from the segment, guarded: a ring truncated under us (the
 * collector's error path asks too) counts 0 instead of raising SIGBUS. */
struct life_count {
	const struct drain *d;
	uint64_t n;
	bool writers;
};

static int life_count(void *p)
{
	struct life_count *c = p;

	c->n = c->writers ? shmt_ring_live_writers(&c->d->v) : shmt_ring_undrained(&c->d->v);
	return 0;
}

static uint64_t guarded_count(const struct drain *d, bool writers)
{
	struct life_count c = { d, 0, writers };

	return d->opened && shmt_guarded(life_count, &c) == 0 ? c.n : 0;
}

uint32_t drain_live_writers(const struct drain *d)
{
	return (uint32_t)guarded_count(d, true);
}

uint32_t drain_mappers(const struct drain *d)
{
	return d->opened ? shmt_segment_mappers(d->v.dev, d->v.ino) : 0;
}

bool drain_behind(const struct drain *d)
{
	return d->behind;
}

uint32_t drain_backlog(const struct drain *d)
{
	return d->backlog;
}

uint64_t drain_undrained(const struct drain *d)
{
	return guarded_count(d, false);
}

int drain_unlink_ring(struct drain *d)
{
	return d->opened ? shmt_ring_unlink_view(d->o.ring, &d->v) : -ENOENT;
}
