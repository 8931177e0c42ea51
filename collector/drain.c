/* SPDX-License-Identifier: MIT */
/*
 * drain.c - copying a ring into capture frames without losing or
 * duplicating a record, whenever the collector or a producer dies.
 *
 * The collector reads the ring without its lock (commit words and head,
 * ring_reader.c). It takes the lock only to move live threads' staging
 * blocks into the ring, briefly, and only after checking that the mutex
 * bytes are sane. The ring's tail advances only over records whose frame
 * io_uring reported written; a collector killed at any point leaves every
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
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "drain.h"
#include "ring_reader.h"

#define LOCK_WAIT_NS (50ull * 1000 * 1000)
#define REAP_EVERY_NS (1000ull * 1000 * 1000)

static uint64_t hash64(const void *p, size_t n, uint64_t h)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

/* Opens a second descriptor on the ring only to hold an advisory lock:
 * two collectors on one ring would both advance its tail. */
static int claim_ring(struct drain *d)
{
	char path[SHMT_PATH_MAX];
	int fd;

	if (shmt_ring_path(d->o.ring, path, sizeof(path)) < 0)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;

		close(fd);
		return e == EWOULDBLOCK ? -EBUSY : -e;
	}
	return fd;	/* kept open (and locked) until we exit */
}

static int put_header(struct drain *d)
{
	struct shmt_cap_header h;

	memset(&h, 0, sizeof(h));
	h.version = SHMT_CAP_VERSION;
	h.part = d->part;
	h.run_id = d->run_id;
	gethostname(h.host, sizeof(h.host) - 1);
	snprintf(h.ring, sizeof(h.ring), "%s", d->o.ring);
	h.ring_capacity = d->v.capacity;
	h.ring_mode = d->v.mode;
	h.clock_tsc = d->v.clock.tsc_ok;
	h.collector_pid = (uint32_t)getpid();
	h.realtime0 = d->v.clock.realtime0;
	h.mono0 = d->v.clock.mono0;
	h.started_ns = shmtrace_now();
	h.ring_id = d->v.minor >= 1 ? d->v.h->ring_id : 0;	/* format 1.0: none */
	return shmt_cap_put_header(cw_buffer(&d->w), &h);
}

static int open_part(struct drain *d)
{
	char path[4200];
	int ret;

	if (d->part == 0)
		snprintf(path, sizeof(path), "%s", d->o.output);
	else
		snprintf(path, sizeof(path), "%s.%u", d->o.output, d->part);
	ret = cw_open(&d->w, path);
	if (ret < 0) {
		snprintf(d->err, sizeof(d->err), "cannot write '%.400s': %s", path, strerror(-ret));
		return ret;
	}
	d->strings_sent = 1;	/* id 0 is the empty string in every ring */
	d->threads_sent = 0;
	d->st.parts++;
	return put_header(d);
}

int drain_open(struct drain *d, const struct drain_opts *o)
{
	char err[256];
	int ret;

	memset(d, 0, sizeof(*d));
	d->o = *o;
	ret = shmt_view_open(o->ring, SHMT_OPEN_WRITE, &d->v, err, sizeof(err));
	if (ret < 0) {
		snprintf(d->err, sizeof(d->err), "%s", err);
		return ret;
	}
	ret = claim_ring(d);
	if (ret < 0) {
		snprintf(d->err, sizeof(d->err), ret == -EBUSY ?
			 "another collector is already draining ring '%s'" :
			 "cannot lock ring '%s': %s", o->ring, strerror(-ret));
		shmt_view_close(&d->v);
		return ret;
	}
	shmt_clock_adopt(&d->v.clock);
	/* the run id names the ring, not this process: every collector that
	 * ever drains this ring writes the same id, so a reader dedupes
	 * records across restarts by (run id, sequence) */
	d->run_id = hash64(o->ring, strlen(o->ring), 14695981039346656037ull);
	d->run_id = hash64(&d->v.clock.realtime0, 8, d->run_id);
	d->run_id = hash64(&d->v.clock.mono0, 8, d->run_id) & ((1ull << 53) - 1);
	d->scratch = calloc(DRAIN_BATCH, sizeof(*d->scratch));
	d->dead = calloc(d->v.nblocks + 1, sizeof(*d->dead));
	if (!d->scratch || !d->dead) {
		free(d->scratch);
		free(d->dead);
		shmt_view_close(&d->v);
		return -ENOMEM;
	}
	ret = open_part(d);
	if (ret < 0) {
		free(d->scratch);
		free(d->dead);
		shmt_view_close(&d->v);
		return ret;
	}
	/* touch one word per page of the records: on this kind of VM the
	 * first access to a page costs 5-11 us even after MAP_POPULATE, and
	 * it belongs here, not in the first drain (docs/BENCHMARKS.md) */
	for (uint64_t off = 0; off < (uint64_t)d->v.capacity * SHMT_RECORD_SIZE; off += 4096)
		(void)*(volatile const uint8_t *)((const uint8_t *)d->v.records + off);
	d->pos = load_acquire(&d->v.h->tail.v);
	d->start_seq = d->pos;
	store_relaxed(&d->v.h->collector_pid.v, (uint64_t)getpid());
	return 0;
}

static uint64_t now_ns(void)
{
	return shmt_mono_ns();
}

/* Moves live threads' staged records into the ring, under the lock, and
 * frees dead threads' blocks. Never blocks for long: a lock that is
 * insane or held too long is reported and skipped. */
static void adopt_blocks(struct drain *d, bool final)
{
	uint64_t t0, held;
	bool reap = final || now_ns() - d->last_reap_ns > REAP_EVERY_NS;

	if (!shmt_mutex_sane(&d->v)) {
		if (!d->lock_warned)
			fprintf(stderr, "shmtrace-collector: warning: ring lock bytes are corrupt; "
				"staged records of live threads cannot be collected\n");
		d->lock_warned = true;
		return;
	}
	/* who died is read from /proc before the lock, not under it */
	if (reap) {
		shmt_find_dead_blocks(&d->v, d->dead);
		d->last_reap_ns = now_ns();
	}
	if (shmt_lock(&d->v, LOCK_WAIT_NS) < 0) {
		if (!d->lock_warned)
			fprintf(stderr, "shmtrace-collector: warning: ring lock held for over %llu ms "
				"(owner stuck or gone); staged records of live threads wait\n",
				LOCK_WAIT_NS / 1000000);
		d->lock_warned = true;
		return;
	}
	t0 = now_ns();
	if (shmt_adopt_blocks_locked(&d->v, true, reap ? d->dead : NULL))
		d->idle_ns = d->o.poll_ns;	/* producers are active */
	held = now_ns() - t0;
	shmt_unlock(&d->v);
	if (held > d->st.lock_hold_max_ns)
		d->st.lock_hold_max_ns = held;
}

/* Appends frames for strings and name slots the capture does not have yet. */
static int put_tables(struct drain *d)
{
	msgpack_sbuffer *b = cw_buffer(&d->w);
	uint32_t n = shmt_ring_nstrings(&d->v);
	uint32_t nt = shmt_ring_nthreads(&d->v);
	int ret = 0;

	if (n > d->strings_sent) {
		static struct shmt_cap_string s[256];
		static char text[256][SHMT_STRING_MAX + 1];
		uint32_t k = 0;

		for (uint32_t id = d->strings_sent; id < n; id++) {
			int len = shmt_ring_string(&d->v, id, text[k], sizeof(text[k]));

			if (len < 0)
				len = 0;	/* a damaged entry exports as "" */
			s[k].id = id;
			s[k].len = (uint32_t)len;
			s[k].s = text[k];
			if (++k == 256 || id + 1 == n) {
				ret = shmt_cap_put_strings(b, s, k);
				if (ret < 0)
					return ret;
				k = 0;
			}
		}
		d->strings_sent = n;
	}
	if (nt > d->threads_sent) {
		struct shmt_thread t[64];
		uint32_t k = 0;

		for (uint32_t i = d->threads_sent; i < nt; i++) {
			shmt_ring_thread(&d->v, i, &t[k]);
			if (++k == 64 || i + 1 == nt) {
				ret = shmt_cap_put_threads(b, t, k);
				if (ret < 0)
					return ret;
				k = 0;
			}
		}
		d->threads_sent = nt;
	}
	return 0;
}

static int put_loss(struct drain *d, bool force)
{
	struct shmt_cap_loss l = {
		.at_ns = shmtrace_now(),
		/* the validated geometry, not the header a peer may rewrite */
		.max_strings = d->v.max_strings,
		.string_bytes = d->v.string_bytes,
		.max_threads = d->v.max_threads,
		.published = shmt_ring_head(&d->v),
	};

	shmt_loss_read(&d->v, &l.counters);
	/* published alone moving is no news: the final frame carries it */
	if (!force && !memcmp(&l.counters, &d->loss_sent, sizeof(l.counters)))
		return 0;
	d->loss_sent = l.counters;
	d->st.ring = l.counters;
	return shmt_cap_put_loss(cw_buffer(&d->w), &l);
}

/*
 * Discard mode's fast path: slots in [tail, head) are never written again
 * until the tail passes them (head's acquire load orders their contents
 * before us), so they are encoded straight from the ring into the frame,
 * each slot read once and checked. Returns records copied, or 0 to take
 * the slow path (the first slot is not a finished record of its sequence:
 * forged or torn); a bad slot later on ends the frame before it.
 */
static long copy_records_fast(struct drain *d, uint64_t head)
{
	uint64_t n = head - d->pos, slot = d->pos & d->v.mask;
	long k;

	if (n > DRAIN_BATCH)
		n = DRAIN_BATCH;
	if (slot + n > d->v.capacity)
		n = d->v.capacity - slot;	/* up to the wrap; the rest next time */
	k = shmt_cap_put_ring_records(cw_buffer(&d->w), d->pos, &d->v.records[slot], n);
	if (k <= 0)
		return k;
	d->pos += (uint64_t)k;
	d->st.records += (uint64_t)k;
	return k;
}

/* The slow path's run of consecutive records, framed as one. */
struct copy_run {
	struct drain *d;
	uint64_t first;		/* sequence of scratch[0] */
	uint32_t k;		/* records in scratch */
	long total;		/* records framed */
};

static int put_run(struct copy_run *c)
{
	int ret = 0;

	if (c->k) {
		ret = shmt_cap_put_records(cw_buffer(&c->d->w), c->first, c->d->scratch, c->k);
		c->total += c->k;
	}
	c->k = 0;
	return ret < 0 ? ret : 0;
}

static int copy_one(void *arg, uint64_t seq, const struct shmt_record *r)
{
	struct copy_run *c = arg;

	/* not a finished record: flush the run before it, skip it */
	if (!r)
		return put_run(c);
	if (!c->k)
		c->first = seq;
	c->d->scratch[c->k++] = *r;
	return 0;
}

/* Copies records [pos, head) out in contiguous runs, one frame per run. */
static long copy_records(struct drain *d, uint64_t head)
{
	struct copy_run c = { .d = d };
	uint64_t n = head - d->pos;
	int ret;

	if (d->v.mode == SHMTRACE_MODE_DISCARD) {
		long fast = copy_records_fast(d, head);

		if (fast != 0)
			return fast;
	}
	if (n > DRAIN_BATCH)
		n = DRAIN_BATCH;
	ret = shmt_ring_read_range(&d->v, d->pos, d->pos + n, 0, &d->skipped, copy_one, &c);
	if (!ret)
		ret = put_run(&c);
	if (ret < 0)
		return ret;
	d->pos += n;
	d->st.records += (uint64_t)c.total;
	return (long)n;
}

/* Submits what is buffered, covering the ring up to d->pos, and notes what
 * was skipped below it for release_tail(). */
static int submit(struct drain *d)
{
	struct drain_checkpoint *last = d->nckpt ? &d->ckpt[d->nckpt - 1] : NULL;

	if (!last || last->seq != d->pos) {
		/* full: fold into the newest (its counts wait a little longer) */
		if (d->nckpt == DRAIN_CHECKPOINTS)
			last = &d->ckpt[d->nckpt - 1];
		else
			last = &d->ckpt[d->nckpt++];
	}
	last->seq = d->pos;
	last->skipped = d->skipped;
	return cw_submit(&d->w, d->pos);
}

static void release_tail(struct drain *d)
{
	struct shmt_header *h = d->v.h;
	uint64_t done = d->w.done_seq;
	uint32_t n = 0;

	/* the skips below what is written now count, once */
	while (n < d->nckpt && d->ckpt[n].seq <= done)
		n++;
	if (n) {
		const struct shmt_ring_skips *s = &d->ckpt[n - 1].skipped;

		fetch_add(&h->overwritten.v, s->lapped - d->skipped_published.lapped);
		fetch_add(&h->torn.v, s->torn - d->skipped_published.torn);
		d->st.lapped += s->lapped - d->skipped_published.lapped;
		d->st.torn += s->torn - d->skipped_published.torn;
		d->skipped_published = *s;
		memmove(d->ckpt, d->ckpt + n, (d->nckpt - n) * sizeof(d->ckpt[0]));
		d->nckpt -= n;
	}
	/* pairs with producers' acquire load of tail in plan(): the slots
	 * below it may be reused */
	if (done > load_relaxed(&h->tail.v))
		store_release(&h->tail.v, done);
}

static int rotate(struct drain *d)
{
	struct shmt_cap_end e = { .records = d->st.records, .end_ns = shmtrace_now(),
				  .next_part = d->part + 1 };
	int ret;

	ret = shmt_cap_put_end(cw_buffer(&d->w), &e);
	if (!ret)
		ret = submit(d);
	if (!ret)
		ret = cw_fsync(&d->w);
	if (ret < 0)
		return ret;
	release_tail(d);
	d->st.bytes += d->w.bytes;
	cw_close(&d->w);
	d->part++;
	return open_part(d);
}

long drain_pass(struct drain *d, bool final)
{
	long copied = 0, r;
	uint64_t head;
	int ret;

	adopt_blocks(d, final);
	ret = put_tables(d);
	if (ret < 0)
		return ret;
	head = shmt_ring_head(&d->v);
	if (head < d->pos) {
		/* a head that went backwards was forged or reset: follow it */
		d->pos = head;
	}
	if (head - d->pos > d->v.capacity) {
		/* lapped before we got to them (a peer moving tail past head
		 * in discard mode is the only other way) */
		d->skipped.lapped += head - d->v.capacity - d->pos;
		d->pos = head - d->v.capacity;
	}
	if (d->pos < head)
		d->idle_ns = d->o.poll_ns;
	while (d->pos < head && copied < 4 * (long)DRAIN_BATCH) {
		r = copy_records(d, head);
		if (r < 0)
			return r;
		copied += r;
		if (d->o.max_size && d->w.off + cw_buffer(&d->w)->size >= d->o.max_size) {
			/* rotate before the part grows past the bound by more
			 * than the batch just copied */
			ret = rotate(d);
			if (ret < 0)
				return ret;
		} else if (cw_buffer(&d->w)->size >= CW_BUF_LIMIT) {
			ret = submit(d);
			if (ret < 0)
				return ret;
		}
	}
	ret = put_loss(d, false);
	if (ret < 0)
		return ret;
	ret = submit(d);
	if (!ret)
		ret = cw_reap(&d->w, false);
	if (ret < 0)
		return ret;
	release_tail(d);
	if (d->o.max_size && d->w.off >= d->o.max_size) {
		ret = rotate(d);
		if (ret < 0)
			return ret;
	}
	return copied;
}

void drain_sleep(struct drain *d)
{
	struct shmt_header *h = d->v.h;
	uint32_t *word = (uint32_t *)&h->wake_seq.v;
	uint32_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
	uint64_t nap = d->idle_ns ? d->idle_ns : d->o.poll_ns;
	struct timespec ts = { (time_t)(nap / 1000000000ull), (long)(nap % 1000000000ull) };
	uint64_t most = d->o.poll_ns * 10 > 2000000000ull ? d->o.poll_ns : d->o.poll_ns * 10;

	/* idle: each quiet wake-up doubles the next nap, up to 10 x the poll
	 * interval (at most 2 s); a producer's wake-up or any work resets it */
	d->idle_ns = nap * 2 < most ? nap * 2 : most;

	store_relaxed(&h->collector_sleeping.v, 1);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* writes still in flight: wake for them rather than the timer */
	if (shmt_ring_head(&d->v) - d->pos < d->v.capacity / 4 && d->w.count == 0) {
#if SHMT_TSAN
		/* ThreadSanitizer runs a signal's handler only inside a call
		 * it intercepts, which a raw futex is not: SIGTERM would wait
		 * forever. Under it, nap without the producers' wake-up. */
		(void)seen;
		nanosleep(&ts, NULL);
#else
		syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
#endif
	}
	else if (d->w.count)
		cw_reap(&d->w, true);
	store_relaxed(&h->collector_sleeping.v, 0);
}

int drain_finish(struct drain *d)
{
	struct shmt_cap_end e;
	long r;
	int ret;

	/* until a pass finds nothing: producers may still be flushing */
	do {
		r = drain_pass(d, true);
		if (r < 0)
			return (int)r;
	} while (r > 0);
	ret = cw_drain(&d->w);
	if (ret < 0)
		return ret;
	release_tail(d);
	ret = put_loss(d, true);
	if (ret < 0)
		return ret;
	memset(&e, 0, sizeof(e));
	e.records = d->st.records;
	e.end_ns = shmtrace_now();
	ret = shmt_cap_put_end(cw_buffer(&d->w), &e);
	if (!ret)
		ret = submit(d);
	if (!ret)
		ret = cw_fsync(&d->w);
	if (ret < 0)
		return ret;
	release_tail(d);
	d->st.bytes += d->w.bytes;
	return 0;
}

void drain_close(struct drain *d)
{
	if (d->v.h && load_relaxed(&d->v.h->collector_pid.v) == (uint64_t)getpid())
		store_relaxed(&d->v.h->collector_pid.v, 0);
	cw_close(&d->w);
	free(d->scratch);
	free(d->dead);
	shmt_view_close(&d->v);
}
