/* SPDX-License-Identifier: MIT */
/*
 * producer.c - the producer's hot path: attach, stage, flush.
 *
 * Each thread owns a staging block in the shared segment and appends
 * records to it without any lock: a record is stored, then the block's
 * `written` counter is release-stored, and from that moment the record
 * survives the death of its process (the collector or the post-mortem
 * reader adopts the block). Once half its block is staged the thread tries
 * the ring's robust mutex (once per 128 records) to move them into the
 * ring, and waits for it only when the block is full.
 * docs/DESIGN.md says why, and what this was measured against.
 *
 * A handle writes into its current attachment (struct shmt_att). Off the
 * hot path, at most every SHMT_LOOK_NS, it looks at the ring's name: a
 * handle opened before its ring existed attaches once it appears, and one
 * whose ring was removed and made again moves to the new one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "handle.h"
#include "ring_reader.h"

#define TLS_SLOTS 4
#define MAX_HANDLES 64			/* live handles per process */
#define LOCK_TIMEOUT_NS (100ull * 1000 * 1000)	/* a flush waits at most this */
#define WEDGE_NS (1000ull * 1000 * 1000)	/* then only tries, for this long */
/*
 * A thread tries the lock (never waits on it) once FLUSH_RECORDS are
 * staged, and again every FLUSH_RETRY records while the lock stays busy; it
 * waits only when its whole block is full. One call in FLUSH_RECORDS
 * pays for a flush, so the p99 call never does, and a flush of 128 records
 * stays well under a microsecond (docs/DESIGN.md, "The span call's tail").
 */
#define FLUSH_RECORDS (SHMT_BLOCK_RECORDS / 2)
#define FLUSH_RETRY 16u

/* One thread's view of its block in one ring. */
struct tls_slot {
	uint64_t id;			/* handle id; 0 = unused */
	uint32_t gen;			/* g_fork_gen when claimed */
	uint32_t idx;			/* block index */
	struct shmt_block *b;
	struct shmt_record *recs;
	uint64_t written;		/* our copy of b->written */
	uint64_t limit;			/* taken + block_records: full, must flush */
	uint64_t soft;			/* <= limit: time to try a flush */
};

static __thread struct tls_slot tls[TLS_SLOTS] __attribute__((tls_model("initial-exec")));
static __thread uint32_t tls_tid __attribute__((tls_model("initial-exec")));
static __thread uint32_t tls_tid_gen __attribute__((tls_model("initial-exec")));
/* a name set with shmtrace_set_thread_name(), kept for the rings this
 * thread first writes to later */
static __thread char tls_tname[SHMT_NAME_LEN] __attribute__((tls_model("initial-exec")));

/* Process identity, refreshed in the child after fork(). */
static uint32_t g_pid;
static uint64_t g_start;
static uint64_t g_pidns;
static uint32_t g_fork_gen = 1;
static char g_pname[SHMT_NAME_LEN];

/* Live handles, so that a thread's exit never touches a closed ring. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static shmtrace_t *g_handles[MAX_HANDLES];
static uint64_t g_next_id = 1;
static pthread_key_t g_exit_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void read_comm(char *buf, const char *path)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	buf[0] = 0;
	if (fd < 0)
		return;
	n = read(fd, buf, SHMT_NAME_LEN - 1);
	close(fd);
	if (n < 0)
		n = 0;
	buf[n] = 0;
	if (n && buf[n - 1] == '\n')
		buf[n - 1] = 0;
}

static void refresh_identity(void)
{
	g_pid = (uint32_t)getpid();
	g_start = shmt_proc_start_time(g_pid);
	g_pidns = shmt_self_pidns();
	read_comm(g_pname, "/proc/self/comm");
}

static void claimed_set(struct shmt_att *a, uint32_t idx, bool on)
{
	uint64_t bit = 1ull << (idx % 64);

	if (on)
		a->claimed[idx / 64] |= bit;
	else
		a->claimed[idx / 64] &= ~bit;
}

static bool claimed_get(const struct shmt_att *a, uint32_t idx)
{
	return a->claimed[idx / 64] >> (idx % 64) & 1;
}

static void atfork_child(void)
{
	refresh_identity();
	__atomic_fetch_add(&g_fork_gen, 1, __ATOMIC_RELAXED);
	/* the parent's lock on the registry was copied locked if held */
	pthread_mutex_init(&g_lock, NULL);
	/* the parent's blocks are the parent's: a handle of the child frees
	 * only what the child claims through it */
	for (int i = 0; i < MAX_HANDLES; i++)
		for (struct shmt_att *a = g_handles[i] ? g_handles[i]->cur : NULL; a; a = a->prev)
			memset(a->claimed, 0, (a->v.nblocks + 63) / 64 * sizeof(uint64_t));
}

static void thread_exit(void *arg);

static void global_init(void)
{
	refresh_identity();
	pthread_key_create(&g_exit_key, thread_exit);
	pthread_atfork(NULL, NULL, atfork_child);
}

static inline uint32_t my_tid(void)
{
	if (unlikely(tls_tid_gen != g_fork_gen)) {
		tls_tid = (uint32_t)gettid();
		tls_tid_gen = g_fork_gen;
	}
	return tls_tid;
}

/* Takes the ring lock for a producer: bounded, and after a timeout only
 * tries for a while, so a wedged lock costs each call microseconds, not
 * the lock timeout. */
int shmt_producer_lock(shmtrace_t *t, struct shmt_att *a)
{
	uint64_t wedged = load_relaxed(&a->wedged_until);
	int ret;

	if (unlikely(wedged) && shmt_mono_ns() < wedged) {
		ret = shmt_lock(&a->v, 0);
		if (ret == -EBUSY)
			fetch_add(&a->v.h->lock_timeouts.v, 1);
		return ret;
	}
	ret = shmt_lock(&a->v, t->lock_timeout_ns);
	if (ret == -ETIMEDOUT)
		store_relaxed(&a->wedged_until, shmt_mono_ns() + WEDGE_NS);
	else if (ret == 0 && wedged)
		store_relaxed(&a->wedged_until, 0);
	return ret;
}

/* Claims a free block for the calling thread. Lock held. Returns the
 * index, or -ENOSPC. */
static int claim_block_locked(struct shmt_att *a, uint32_t tid, const struct shmt_owner *dead)
{
	struct shmt_view *v = &a->v;

	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < v->nblocks; i++) {
			struct shmt_block *b = shmt_block_at(v, i);

			if (load_relaxed(&b->state) != SHMT_BLOCK_FREE)
				continue;
			if (load_relaxed(&b->written) != load_relaxed(&b->taken))
				shmt_flush_block_locked(v, i);
			b->pid = g_pid;
			b->tid = tid;
			b->start_time = g_start;
			/* a dead owner's stack was recorded when it was adopted */
			store_relaxed(&b->open_depth, 0);
			store_relaxed(&b->open_closing, 0);
			store_release(&b->state, SHMT_BLOCK_OWNED);
			claimed_set(a, i, true);
			return (int)i;
		}
		/* none free: take back those of threads that died */
		if (!dead)
			break;
		shmt_adopt_blocks_locked(v, false, dead);
	}
	return -ENOSPC;
}

static void thread_name(char *buf)
{
	if (tls_tname[0]) {
		memcpy(buf, tls_tname, SHMT_NAME_LEN);
		return;
	}
	buf[0] = 0;
	prctl(PR_GET_NAME, buf, 0, 0, 0);
	buf[15] = 0;
}

/* From the block's taken (the collector may have flushed it meanwhile):
 * where the block is full, and where to try a flush. */
static void set_marks(struct tls_slot *s)
{
	uint64_t taken = load_acquire(&s->b->taken);

	s->limit = taken + SHMT_BLOCK_RECORDS;
	s->soft = taken + FLUSH_RECORDS;
}

/* Finds or makes the calling thread's slot for attachment a. NULL means
 * no block: the caller writes under the lock instead. */
static struct tls_slot *slot_slow(shmtrace_t *t, struct shmt_att *a)
{
	struct tls_slot *s = NULL;
	char tname[SHMT_NAME_LEN];
	uint32_t tid = my_tid();
	int idx;

	for (int i = 0; i < TLS_SLOTS; i++) {
		if (tls[i].id == a->id && tls[i].gen == g_fork_gen) {
			struct tls_slot tmp = tls[i];

			/* move to the front: the fast path checks slot 0 only */
			tls[i] = tls[0];
			tls[0] = tmp;
			return &tls[0];
		}
	}
	for (int i = 0; i < TLS_SLOTS; i++) {
		if (tls[i].id == 0 || tls[i].gen != g_fork_gen) {
			s = &tls[i];
			break;
		}
	}
	if (!s)
		return NULL;
	if (shmt_producer_lock(t, a) < 0)
		return NULL;
	idx = claim_block_locked(a, tid, NULL);
	if (idx < 0) {
		/* all taken: find dead owners outside the lock (it reads /proc),
		 * then claim again; a thread pays this once, on its first record */
		struct shmt_owner *dead = calloc(a->v.nblocks, sizeof(*dead));

		shmt_unlock(&a->v);
		if (!dead)
			return NULL;
		shmt_find_dead_blocks(&a->v, dead);
		if (shmt_producer_lock(t, a) < 0) {
			free(dead);
			return NULL;
		}
		idx = claim_block_locked(a, tid, dead);
		free(dead);
	}
	if (idx >= 0) {
		thread_name(tname);
		shmt_name_append_locked(&a->v, g_pid, tid, g_start, g_pidns, a->slot_flags,
					tname, g_pname);
	}
	shmt_unlock(&a->v);
	/* idx < nblocks (claim_block_locked): shmt_block_at() is never NULL */
	if (idx < 0 || !shmt_block_at(&a->v, (uint32_t)idx))
		return NULL;
	s->id = a->id;
	s->gen = g_fork_gen;
	s->idx = (uint32_t)idx;
	s->b = shmt_block_at(&a->v, (uint32_t)idx);
	s->recs = shmt_block_recs(s->b);
	s->written = load_relaxed(&s->b->written);
	set_marks(s);
	pthread_setspecific(g_exit_key, (void *)1);
	return s;
}

/* Flushes the slot's block into the ring, waiting for the lock or (try)
 * only trying it. Returns 0, -ENOSPC if the ring was full and some of the
 * block's records were dropped (and counted), or another -errno (nothing
 * moved; -EBUSY: the try failed). Then, if it is time, looks whether the
 * ring's name now refers to another segment (the next record goes there). */
static int flush_slot(shmtrace_t *t, struct shmt_att *a, struct tls_slot *s, bool try)
{
	uint64_t pending, done;
	int ret = try ? shmt_lock(&a->v, 0) : shmt_producer_lock(t, a);

	if (ret < 0)
		return ret;
	pending = s->written - load_relaxed(&s->b->taken);
	done = shmt_flush_block_locked(&a->v, s->idx);
	shmt_unlock(&a->v);
	shmt_wake_collector(&a->v);
	set_marks(s);
	shmt_attach_current(t);
	return pending <= SHMT_BLOCK_RECORDS && done < pending ? -ENOSPC : 0;
}

/*
 * Makes room for n records in the slot's block, off the hot path. Below the
 * full mark it only tries the lock: a busy lock costs this call nothing,
 * the records stay staged and the try comes again FLUSH_RETRY records on.
 * Returns 0 (room made), -ENOSPC (room made, earlier records dropped and
 * counted), or -ETIMEDOUT (no room: the caller drops and counts).
 */
static int make_room(shmtrace_t *t, struct shmt_att *a, struct tls_slot *s, unsigned n)
{
	uint64_t w = s->written;
	int ret;

	set_marks(s);
	if (w + n < s->soft)
		return 0;	/* the collector flushed us */
	if (w + n < s->limit) {
		ret = flush_slot(t, a, s, true);
		if (ret == 0 || ret == -ENOSPC)
			return ret;
		s->soft = w + n + FLUSH_RETRY < s->limit ? w + n + FLUSH_RETRY : s->limit;
		return 0;
	}
	ret = flush_slot(t, a, s, false);
	return ret == 0 || ret == -ENOSPC ? ret : -ETIMEDOUT;
}

static int emit_direct(shmtrace_t *t, struct shmt_att *a, const struct shmt_record *r,
		       unsigned n)
{
	int ret = shmt_producer_lock(t, a);

	if (ret < 0) {
		/* -EBUSY from a wedged lock's try is a timeout too */
		fetch_add(&a->v.h->dropped.v, n);
		return -ETIMEDOUT;
	}
	/* the event first, its arguments after it while it was written: an
	 * argument never reaches the ring without its event */
	for (unsigned i = 0; i < n; i++) {
		ret = shmt_write_direct_locked(&a->v, &r[i]);
		if (ret < 0) {
			if (n - i - 1)
				fetch_add(&a->v.h->dropped.v, n - i - 1);
			break;
		}
	}
	shmt_unlock(&a->v);
	shmt_wake_collector(&a->v);
	return ret;
}

static inline uint32_t remap_id(const struct shmt_att *a, uint32_t id)
{
	return unlikely(a->remap != NULL) ? a->remap[id & (SHMT_HANDLE_IDS - 1)] : id;
}

/* Fills r[1..n] with the argument records of the event r[0]. */
static void fill_args(const struct shmt_att *a, struct shmt_record *r, uint32_t *idx,
		      const struct shmtrace_arg *args, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct shmt_record *d = &r[idx ? idx[i + 1] : i + 1];
		uint64_t value = args[i].value;

		if (args[i].type == SHMTRACE_ARG_STR)
			value = remap_id(a, (uint32_t)value);
		d->ts = r[idx ? idx[0] : 0].ts;
		d->dur = value;
		d->flow = SHMT_ARG_FLOW(args[i].type, i + 1, n);
		d->pid = g_pid;
		d->tid = tls_tid;
		d->name = (uint16_t)remap_id(a, args[i].key);
		d->cat = r[idx ? idx[0] : 0].name;
		d->commit = SHMTRACE_KIND_ARG;
	}
}

/*
 * Stages one event and its n arguments as one group: they are published by
 * one release store of written, so whoever flushes the block, and a reader
 * of a dead thread's block, sees all of them or none. sp, when not NULL, is
 * the open span this record ends: its stack entry is marked as closing
 * before the store (see struct shmt_block). Constant arguments fold away
 * for the plain calls.
 */
static inline int emit(shmtrace_t *t, uint32_t kind, uint32_t cat, uint32_t name,
		       uint64_t ts, uint64_t dur, uint64_t flow,
		       const struct shmtrace_arg *args, unsigned nargs,
		       const struct shmtrace_open_span *sp)
{
	struct tls_slot *s = &tls[0];
	struct shmt_record *r;
	struct shmt_att *a;
	uint64_t w;
	int ret = 0;

	if (unlikely(t == NULL))
		return -EINVAL;
	/* pairs with the release store of cur in attach_locked() */
	a = load_acquire(&t->cur);
	if (unlikely(a == NULL)) {
		/* opened before its ring existed: look (rate-limited) */
		a = shmt_attach_current(t);
		if (!a)
			return -ENOENT;
	}
	if (unlikely(a->remap != NULL)) {
		/* moved to another ring: the caller's ids are the handle's */
		cat = a->remap[cat & (SHMT_HANDLE_IDS - 1)];
		name = a->remap[name & (SHMT_HANDLE_IDS - 1)];
	}
	if (unlikely(s->id != a->id || s->gen != g_fork_gen)) {
		s = slot_slow(t, a);
		if (!s) {
			struct shmt_record d[1 + SHMTRACE_MAX_ARGS] = { {
				.ts = ts, .dur = dur, .flow = flow, .pid = g_pid, .tid = my_tid(),
				.name = (uint16_t)name, .cat = (uint16_t)cat, .commit = kind,
			} };

			fill_args(a, d, NULL, args, nargs);
			return emit_direct(t, a, d, 1 + nargs);
		}
	}
	/* soft <= limit: one compare guards both marks */
	if (unlikely(s->written + nargs >= s->soft)) {
		ret = make_room(t, a, s, nargs);
		if (ret == -ETIMEDOUT) {
			fetch_add(&a->v.h->dropped.v, 1 + nargs);
			return ret;
		}
	}
	w = s->written;
	r = &s->recs[w & (SHMT_BLOCK_RECORDS - 1)];
	r->ts = ts;
	r->dur = dur;
	r->flow = flow;
	r->pid = g_pid;
	r->tid = tls_tid;
	r->name = (uint16_t)name;
	r->cat = (uint16_t)cat;
	r->commit = kind;
	if (nargs) {
		uint32_t idx[1 + SHMTRACE_MAX_ARGS];

		for (unsigned i = 0; i <= nargs; i++)
			idx[i] = (uint32_t)((w + i) & (SHMT_BLOCK_RECORDS - 1));
		fill_args(a, s->recs, idx, args, nargs);
	}
	if (sp && sp->block_ == (void *)s->b && sp->gen_ == g_fork_gen &&
	    sp->depth_ < SHMT_OPEN_MAX)
		store_relaxed(&s->b->open_closing, (w + 1 + nargs) << 8 | (sp->depth_ + 1));
	/* pairs with the acquire load of written by whoever flushes the block;
	 * orders open_closing before it too */
	store_release(&s->b->written, w + 1 + nargs);
	s->written = w + 1 + nargs;
	/* this record is staged; -ENOSPC says the flush that made room for
	 * it dropped earlier records of this thread */
	return ret;
}

SHMT_API int shmtrace_span(shmtrace_t *t, uint32_t cat, uint32_t name,
			   uint64_t start_ns, uint64_t end_ns, uint64_t flow_id)
{
	return emit(t, SHMTRACE_KIND_SPAN, cat, name, start_ns,
		    end_ns > start_ns ? end_ns - start_ns : 0, flow_id, NULL, 0, NULL);
}

SHMT_API int shmtrace_instant(shmtrace_t *t, uint32_t cat, uint32_t name, uint64_t flow_id)
{
	return emit(t, SHMTRACE_KIND_INSTANT, cat, name, shmtrace_now(), 0, flow_id, NULL, 0, NULL);
}

SHMT_API int shmtrace_counter(shmtrace_t *t, uint32_t cat, uint32_t name, int64_t value)
{
	return emit(t, SHMTRACE_KIND_COUNTER, cat, name, shmtrace_now(), (uint64_t)value, 0,
		    NULL, 0, NULL);
}

static bool args_ok(const struct shmtrace_arg *args, unsigned n)
{
	if (n > SHMTRACE_MAX_ARGS || (n && !args))
		return false;
	for (unsigned i = 0; i < n; i++)
		if (args[i].type != SHMTRACE_ARG_INT && args[i].type != SHMTRACE_ARG_STR)
			return false;
	return true;
}

SHMT_API int shmtrace_span_args(shmtrace_t *t, uint32_t cat, uint32_t name, uint64_t start_ns,
				uint64_t end_ns, uint64_t flow_id, const struct shmtrace_arg *args,
				unsigned n)
{
	if (!args_ok(args, n))
		return -EINVAL;
	return emit(t, SHMTRACE_KIND_SPAN, cat, name, start_ns,
		    end_ns > start_ns ? end_ns - start_ns : 0, flow_id, args, n, NULL);
}

SHMT_API int shmtrace_instant_args(shmtrace_t *t, uint32_t cat, uint32_t name, uint64_t flow_id,
				   const struct shmtrace_arg *args, unsigned n)
{
	if (!args_ok(args, n))
		return -EINVAL;
	return emit(t, SHMTRACE_KIND_INSTANT, cat, name, shmtrace_now(), 0, flow_id, args, n, NULL);
}

/*
 * Pushes a span on the calling thread's stack of open spans, in its
 * staging block: the entry, then the depth (release), so a reader that
 * sees the depth sees the entry. No lock; slot_slow() only on a thread's
 * first record, as for emit().
 */
SHMT_API int shmtrace_begin(shmtrace_t *t, struct shmtrace_open_span *sp, uint32_t cat,
			    uint32_t name, uint64_t flow_id)
{
	struct tls_slot *s = &tls[0];
	struct shmt_att *a;
	struct shmt_block *b;
	uint32_t d;

	sp->t = t;
	sp->block_ = NULL;
	sp->flow = flow_id;
	sp->cat = cat;
	sp->name = name;
	sp->depth_ = 0;
	sp->gen_ = 0;
	sp->nargs = 0;
	sp->start = shmtrace_now();
	if (unlikely(t == NULL))
		return -EINVAL;
	/* pairs with the release store of cur in attach_locked() */
	a = load_acquire(&t->cur);
	if (unlikely(a == NULL))
		return -ENOENT;	/* the end looks for the ring, as emit() does */
	if (unlikely(s->id != a->id || s->gen != g_fork_gen)) {
		s = slot_slow(t, a);
		if (!s)
			return 0;	/* recorded at the end, not tracked */
	}
	b = s->b;
	/* our own word; a peer may scribble on it, which only hides spans */
	d = load_relaxed(&b->open_depth);
	if (likely(d < SHMT_OPEN_MAX)) {
		struct shmt_open *e = shmt_block_open(b, d);

		store_relaxed(&b->open_closing, 0);
		store_relaxed(&e->ts, sp->start);
		store_relaxed(&e->name, (uint16_t)remap_id(a, name));
		store_relaxed(&e->cat, (uint16_t)remap_id(a, cat));
		store_relaxed(&e->flow, flow_id ? shmt_open_flow_pack(flow_id, a->v.minor >= 1 ?
					    load_relaxed(&a->v.h->ring_id) : 0) : 0);
	}
	/* pairs with the acquire load of open_depth by readers */
	store_release(&b->open_depth, d + 1);
	sp->block_ = b;
	sp->depth_ = d;
	sp->gen_ = g_fork_gen;
	return 0;
}

SHMT_API int shmtrace_span_arg(struct shmtrace_open_span *sp, struct shmtrace_arg arg)
{
	if (!sp)
		return -EINVAL;
	if (arg.type != SHMTRACE_ARG_INT && arg.type != SHMTRACE_ARG_STR)
		return -EINVAL;
	if (sp->nargs >= SHMTRACE_MAX_ARGS)
		return -ENOSPC;
	sp->args[sp->nargs++] = arg;
	return 0;
}

SHMT_API int shmtrace_end(struct shmtrace_open_span *sp)
{
	uint64_t end = shmtrace_now();
	unsigned n = sp->nargs <= SHMTRACE_MAX_ARGS ? sp->nargs : SHMTRACE_MAX_ARGS;
	int ret;

	if (!sp->t)
		return -EINVAL;
	if (likely(n == 0))	/* the plain span's path, folded for no arguments */
		ret = emit(sp->t, SHMTRACE_KIND_SPAN, sp->cat, sp->name, sp->start,
			   end > sp->start ? end - sp->start : 0, sp->flow, NULL, 0, sp);
	else
		ret = emit(sp->t, SHMTRACE_KIND_SPAN, sp->cat, sp->name, sp->start,
			   end > sp->start ? end - sp->start : 0, sp->flow, sp->args, n, sp);
	/* pop after the record is published: a thread killed in between is
	 * seen closing (open_closing) and its span is not shown twice. Not
	 * in a forked child: the block is its parent's. */
	if (sp->block_ && sp->gen_ == g_fork_gen)
		store_release(&((struct shmt_block *)sp->block_)->open_depth, sp->depth_);
	sp->block_ = NULL;
	return ret;
}

SHMT_API int shmtrace_flush(shmtrace_t *t)
{
	struct shmt_att *a;

	if (!t)
		return -EINVAL;
	a = shmt_attach_current(t);
	if (!a)
		return -ENOENT;
	for (int i = 0; i < TLS_SLOTS; i++)
		if (tls[i].id == a->id && tls[i].gen == g_fork_gen)
			return flush_slot(t, a, &tls[i], false);
	return 0;
}

/* Frees this thread's blocks in every live ring when it exits. */
static void thread_exit(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g_lock);
	for (int i = 0; i < TLS_SLOTS; i++) {
		struct tls_slot *s = &tls[i];

		if (!s->id || s->gen != g_fork_gen)
			continue;
		for (int j = 0; j < MAX_HANDLES; j++) {
			shmtrace_t *t = g_handles[j];

			for (struct shmt_att *a = t ? t->cur : NULL; a; a = a->prev) {
				if (a->id != s->id)
					continue;
				if (shmt_producer_lock(t, a) == 0) {
					shmt_flush_block_locked(&a->v, s->idx);
					store_release(&s->b->state, SHMT_BLOCK_FREE);
					claimed_set(a, s->idx, false);
					shmt_unlock(&a->v);
				}
				/* on a lock timeout the block stays owned: the
				 * collector adopts it once it sees us dead */
			}
		}
		s->id = 0;
	}
	pthread_mutex_unlock(&g_lock);
}

/* Maps the ring behind t's name as a new attachment. Returns 0 or -errno. */
static int att_open(shmtrace_t *t, struct shmt_att **out)
{
	char err[256];
	struct shmt_att *a = calloc(1, sizeof(*a));
	int ret;

	if (!a)
		return -ENOMEM;
	ret = shmt_view_open(t->name, SHMT_OPEN_WRITE, &a->v, err, sizeof(err));
	if (ret < 0) {
		free(a);
		return ret;
	}
	/* pids from another pid namespace would collide with the ring's own
	 * (a container's pid 1 is not the host's): refuse unless asked */
	if (a->v.h->created_pidns && g_pidns && a->v.h->created_pidns != g_pidns &&
	    !getenv("SHMTRACE_ALLOW_PIDNS")) {
		shmt_view_close(&a->v);
		free(a);
		return -EXDEV;
	}
	a->claimed = calloc((a->v.nblocks + 63) / 64, sizeof(uint64_t));
	if (!a->claimed) {
		shmt_view_close(&a->v);
		free(a);
		return -ENOMEM;
	}
	pthread_mutex_lock(&g_lock);
	a->id = g_next_id++;
	pthread_mutex_unlock(&g_lock);
	*out = a;
	return 0;
}

static void att_free(struct shmt_att *a)
{
	free(a->claimed);
	free(a->remap);
	shmt_view_close(&a->v);
	free(a);
}

/* Attaches t to the segment behind its name unless it is attached to it
 * already. t->local held. Returns the current attachment (maybe NULL). */
static struct shmt_att *attach_locked(shmtrace_t *t)
{
	struct shmt_att *old = t->cur, *a;
	uint64_t dev, ino;

	if (shmt_ring_identity(t->name, &dev, &ino) < 0)
		return old;	/* not there: keep writing where we were */
	if (old && old->v.dev == dev && old->v.ino == ino)
		return old;	/* another thread moved us meanwhile */
	t->attach_attempts++;
	if (att_open(t, &a) < 0)
		return old;
	if (old) {
		a->slot_flags = SHMT_THREAD_REATTACHED;
		if (shmt_intern_remap(t, a) < 0) {
			att_free(a);
			return old;
		}
		t->reattaches++;
	} else {
		a->slot_flags = SHMT_THREAD_LATE;	/* it waited for the ring */
	}
	a->prev = old;
	shmt_clock_adopt(&a->v.clock);
	/* pairs with the acquire load of cur in emit(): a is complete */
	store_release(&t->cur, a);
	return a;
}

struct shmt_att *shmt_attach_current(shmtrace_t *t)
{
	struct shmt_att *a = load_acquire(&t->cur);
	uint64_t now = shmt_mono_ns(), dev, ino;

	if (now < load_relaxed(&t->next_look_ns))
		return a;
	store_relaxed(&t->next_look_ns, now + SHMT_LOOK_NS);
	if (shmt_ring_identity(t->name, &dev, &ino) < 0 ||
	    (a && a->v.dev == dev && a->v.ino == ino))
		return a;
	pthread_mutex_lock(&t->local);
	a = attach_locked(t);
	pthread_mutex_unlock(&t->local);
	return a;
}

/* Opens a handle; with wait, one that need not find its ring yet. */
static int handle_open(const char *name, bool wait, shmtrace_t **out)
{
	shmtrace_t *t;
	int ret, slot = -1;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (shmt_name_check(name) < 0)
		return -EINVAL;
	pthread_once(&g_once, global_init);
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	snprintf(t->name, sizeof(t->name), "%s", name);
	pthread_mutex_init(&t->local, NULL);
	t->lock_timeout_ns = LOCK_TIMEOUT_NS;
	{
		const char *ms = getenv("SHMTRACE_LOCK_TIMEOUT_MS");

		if (ms)
			t->lock_timeout_ns = strtoull(ms, NULL, 10) * 1000000ull;
	}
	t->attach_attempts = 1;
	ret = att_open(t, &t->cur);
	if (ret < 0 && !(wait && ret == -ENOENT)) {
		pthread_mutex_destroy(&t->local);
		free(t);
		return ret;
	}
	if (t->cur)
		shmt_clock_adopt(&t->cur->v.clock);
	else
		t->next_look_ns = shmt_mono_ns() + SHMT_LOOK_NS;

	pthread_mutex_lock(&g_lock);
	for (int i = 0; i < MAX_HANDLES; i++) {
		if (!g_handles[i]) {
			slot = i;
			break;
		}
	}
	if (slot >= 0)
		g_handles[slot] = t;
	pthread_mutex_unlock(&g_lock);
	if (slot < 0) {
		pthread_mutex_destroy(&t->local);
		if (t->cur)
			att_free(t->cur);
		free(t);
		return -EMFILE;
	}
	*out = t;
	return 0;
}

SHMT_API int shmtrace_open(const char *name, shmtrace_t **out)
{
	return handle_open(name, false, out);
}

SHMT_API int shmtrace_open_wait(const char *name, shmtrace_t **out)
{
	return handle_open(name, true, out);
}

void shmt_intern_cache_free(shmtrace_t *t);

/* Flushes and frees the blocks claimed through a, then unmaps it. */
static void att_close(shmtrace_t *t, struct shmt_att *a)
{
	struct shmt_view *v = &a->v;

	/* the threads that wrote through this handle are done; blocks of
	 * other handles of this process (other threads, other libraries) are
	 * still being written */
	if (shmt_producer_lock(t, a) == 0) {
		for (uint32_t i = 0; i < v->nblocks; i++) {
			struct shmt_block *b = shmt_block_at(v, i);

			if (!claimed_get(a, i) || load_relaxed(&b->state) != SHMT_BLOCK_OWNED ||
			    load_relaxed(&b->pid) != g_pid || load_relaxed(&b->start_time) != g_start)
				continue;
			shmt_flush_block_locked(v, i);
			store_release(&b->state, SHMT_BLOCK_FREE);
			claimed_set(a, i, false);
		}
		shmt_unlock(v);
		shmt_wake_collector(v);
	}
	for (int i = 0; i < TLS_SLOTS; i++)
		if (tls[i].id == a->id)
			tls[i].id = 0;
	att_free(a);
}

SHMT_API void shmtrace_close(shmtrace_t *t)
{
	struct shmt_att *a, *prev;

	if (!t)
		return;
	pthread_mutex_lock(&g_lock);
	for (int i = 0; i < MAX_HANDLES; i++)
		if (g_handles[i] == t)
			g_handles[i] = NULL;
	pthread_mutex_unlock(&g_lock);
	for (a = t->cur; a; a = prev) {
		prev = a->prev;
		att_close(t, a);
	}
	shmt_intern_cache_free(t);
	pthread_mutex_destroy(&t->local);
	free(t->ids_used);
	free(t);
}

static int append_name(shmtrace_t *t, const char *tname)
{
	struct shmt_att *a;
	int ret;

	if (!t)
		return -EINVAL;
	a = shmt_attach_current(t);
	if (!a)
		return -ENOENT;	/* kept: used when the ring appears */
	ret = shmt_producer_lock(t, a);
	if (ret < 0)
		return ret;
	ret = shmt_name_append_locked(&a->v, g_pid, my_tid(), g_start, g_pidns, a->slot_flags,
				      tname, g_pname);
	shmt_unlock(&a->v);
	return ret;
}

SHMT_API int shmtrace_set_thread_name(shmtrace_t *t, const char *name)
{
	if (!name)
		return -EINVAL;
	strncpy(tls_tname, name, SHMT_NAME_LEN - 1);
	tls_tname[SHMT_NAME_LEN - 1] = 0;
	return append_name(t, tls_tname);
}

SHMT_API int shmtrace_set_process_name(shmtrace_t *t, const char *name)
{
	char tname[SHMT_NAME_LEN];

	if (!name || !t)
		return -EINVAL;
	pthread_mutex_lock(&g_lock);
	strncpy(g_pname, name, SHMT_NAME_LEN - 1);
	g_pname[SHMT_NAME_LEN - 1] = 0;
	pthread_mutex_unlock(&g_lock);
	thread_name(tname);
	return append_name(t, tname);
}

SHMT_API int shmtrace_stats(shmtrace_t *t, struct shmtrace_stats *st)
{
	struct shmt_header *h;
	struct shmt_att *a;

	if (!t || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	a = shmt_attach_current(t);
	if (!a)
		return -ENOENT;
	h = a->v.h;
	st->capacity = a->v.capacity;
	st->head = load_acquire(&h->head.v);
	st->tail = load_acquire(&h->tail.v);
	st->dropped = load_relaxed(&h->dropped.v);
	st->overwritten = shmt_ring_overwritten(&a->v);
	st->lock_timeouts = load_relaxed(&h->lock_timeouts.v);
	st->mode = a->v.mode;
	st->strings = load_acquire(&h->strings);
	return 0;
}

SHMT_API int shmtrace_attach_stats(shmtrace_t *t, struct shmtrace_attach_stats *st)
{
	struct shmt_att *a;

	if (!t || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	a = shmt_attach_current(t);
	pthread_mutex_lock(&t->local);
	st->attached = a != NULL;
	st->late = a && (a->slot_flags & SHMT_THREAD_LATE);
	st->attempts = t->attach_attempts;
	st->reattaches = t->reattaches;
	pthread_mutex_unlock(&t->local);
	return 0;
}

SHMT_API uint64_t shmtrace_flow_new(shmtrace_t *t)
{
	struct shmt_att *a;
	uint64_t id;

	if (!t || !(a = shmt_attach_current(t)))
		return 0;
	/* a shared counter: unique across every process of the ring */
	do
		id = __atomic_add_fetch(&a->v.h->flow_seq.v, 1, __ATOMIC_RELAXED);
	while (!(id & 0xffffffffull));
	if (a->v.minor < 1 || !a->v.h->ring_id)
		/* no ring_id to tell this ring from others: a ring-local id */
		return id & (SHMT_FLOW_MASK >> 1);
	/* unique across rings (hosts) too: the ring's random prefix above
	 * a 32-bit counter, marked global (ring_format.h) */
	return SHMT_FLOW_GLOBAL | shmt_flow_prefix(a->v.h->ring_id) << 32 | (id & 0xffffffffull);
}

SHMT_API const char *shmtrace_strerror(int err)
{
	switch (err) {
	case -EPROTO: return "not a shmtrace ring, or a ring format version this library cannot read";
	case -EBADMSG: return "ring header inconsistent or segment truncated";
	case -EPERM: return "ring owned by another user or writable by others";
	case -ETIMEDOUT: return "ring lock held too long (owner wedged); records dropped and counted";
	case -ENOSPC: return "no space (ring, string table, or /dev/shm full)";
	case -EXDEV: return "ring created in another pid namespace (set SHMTRACE_ALLOW_PIDNS=1 to attach anyway)";
	default: return strerror(err < 0 ? -err : err);
	}
}
