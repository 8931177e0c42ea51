/* SPDX-License-Identifier: MIT */
/*
 * emit.c - the producer's hot path: the calls that record (spans,
 * instants, counters, with arguments, open spans, triggers) into the calling
 * thread's staging block (stage.c claims and flushes it).
 *
 * Each thread owns a staging block in the shared segment and appends
 * records to it without any lock: a record is stored, then the block's
 * `written` counter is release-stored, and from that moment the record
 * survives the death of its process (the collector or the post-mortem
 * reader adopts the block). Once half its block is staged the thread tries
 * the ring's robust mutex (once per half block: 2048 records in rings of
 * 256K and more) to move them into the
 * ring, and waits for it only when the block is full.
 * docs/DESIGN.md says why, and what this was measured against.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "producer.h"

static inline uint32_t remap_id(const struct shmt_att *a, uint32_t id)
{
	return unlikely(a->remap != NULL) ? a->remap[id & (SHMT_HANDLE_IDS - 1)] : id;
}

/*
 * An event's arguments as the records that carry them: one record each,
 * and after a text argument's record the records of its bytes (plan()).
 */
struct group {
	const struct shmtrace_arg *args;
	unsigned nargs;
	unsigned nrec;				/* records after the event's own */
	uint32_t len[SHMTRACE_MAX_ARGS];	/* a text argument's bytes kept */
	uint64_t cut[SHMTRACE_MAX_ARGS];	/* ... and cut off (saturated) */
	/* the event's own text, when the event is the argument record of an
	 * open span's text argument (open_arg_stage()): its records first */
	const char *text;
	uint32_t tlen;
};

/* Bytes of s[0..len) that fit in room: all, or room cut back to the start
 * of a UTF-8 character that would not fit whole, so that the text and
 * the export's cut marker after it stay valid UTF-8. */
static uint32_t text_fit(const char *s, size_t len, uint32_t room)
{
	uint32_t k = room;

	if (len <= room)
		return (uint32_t)len;
	for (int i = 0; i < 3 && k && ((unsigned char)s[k] & 0xc0) == 0x80; i++)
		k--;
	/* still inside a character: not UTF-8 here, cut where it falls */
	return ((unsigned char)s[k] & 0xc0) == 0x80 ? room : k;
}

/* Checks n arguments and plans their records into g: each text argument
 * keeps what the event's SHMTRACE_TEXT_MAX bytes have left for it. False
 * for a bad argument (count, type, NULL text). */
static bool plan(const struct shmtrace_arg *args, unsigned n, struct group *g)
{
	uint32_t room = SHMTRACE_TEXT_MAX;

	if (n > SHMTRACE_MAX_ARGS || (n && !args))
		return false;
	g->args = args;
	g->nargs = n;
	g->nrec = n;
	g->text = NULL;
	g->tlen = 0;
	for (unsigned i = 0; i < n; i++) {
		const char *text = (const char *)(uintptr_t)args[i].value;
		size_t len;

		if (args[i].type == SHMTRACE_ARG_INT || args[i].type == SHMTRACE_ARG_STR)
			continue;
		if (args[i].type != SHMTRACE_ARG_TEXT || !text)
			return false;
		len = strlen(text);
		g->len[i] = text_fit(text, len, room);
		g->cut[i] = len - g->len[i] < SHMT_TEXT_CUT_MAX ? len - g->len[i] : SHMT_TEXT_CUT_MAX;
		room -= g->len[i];
		g->nrec += SHMT_TEXT_RECORDS(g->len[i]);
	}
	return true;
}

/* The fields an argument or text record shares with its event ev. */
static inline void attach_to(struct shmt_record *d, const struct shmt_record *ev, uint32_t kind)
{
	d->ts = ev->ts;
	d->pid = ev->pid;
	d->tid = ev->tid;
	d->commit = kind;
}

/* Writes text[0..len) into the records from k on; returns the next k. */
static uint64_t fill_text(struct shmt_record *recs, uint64_t mask, uint64_t k,
			 const struct shmt_record *ev, const char *text, uint32_t len)
{
	for (uint32_t off = 0; off < len; off += SHMT_TEXT_CHUNK) {
		struct shmt_record *d = &recs[k++ & mask];

		attach_to(d, ev, SHMTRACE_KIND_TEXT);
		shmt_text_put(d, text + off, len - off < SHMT_TEXT_CHUNK ? len - off : SHMT_TEXT_CHUNK);
		/* a producer killed here leaves the group unpublished */
		SHMT_HOOK("text");
	}
	return k;
}

/* Fills the records after the event in slot w of recs (mask: their
 * number - 1) with g's arguments, each text argument's bytes after it. */
static void fill_group(const struct shmt_att *a, struct shmt_record *recs, uint64_t mask,
		       uint64_t w, const struct group *g)
{
	const struct shmt_record *ev = &recs[w & mask];
	uint64_t k = w + 1;

	if (g->text)
		k = fill_text(recs, mask, k, ev, g->text, g->tlen);
	for (unsigned i = 0; i < g->nargs; i++) {
		const struct shmtrace_arg *x = &g->args[i];
		struct shmt_record *d = &recs[k++ & mask];

		attach_to(d, ev, SHMTRACE_KIND_ARG);
		d->dur = x->type == SHMTRACE_ARG_STR ? remap_id(a, (uint32_t)x->value) :
			 x->type == SHMTRACE_ARG_TEXT ? SHMT_TEXT_VALUE(g->len[i], g->cut[i]) :
			 x->value;
		d->flow = SHMT_ARG_FLOW(x->type, i + 1, g->nargs);
		d->name = (uint16_t)remap_id(a, x->key);
		d->cat = ev->name;
		if (x->type == SHMTRACE_ARG_TEXT)
			k = fill_text(recs, mask, k, ev, (const char *)(uintptr_t)x->value, g->len[i]);
	}
}

/* tid_ took padding: the struct's size and layout are the same */
_Static_assert(sizeof(struct shmtrace_open_span) == 120 &&
	       offsetof(struct shmtrace_open_span, args) == 56, "shmtrace.h's open span ABI");

/*
 * Whether open span sp's stack entry is in slot s's block (of attachment
 * a): the block it was pushed on, or, pushed by this thread on a block of
 * the same ring, the one the thread's full blocks handed its stack on to
 * (handoff.c). A span ended by another thread than its own is popped on
 * the block it was pushed on, while that thread still owns it.
 */
static inline bool stack_in(const struct shmtrace_open_span *sp, const struct shmt_att *a,
			    const struct shmt_tls_slot *s)
{
	uintptr_t p = (uintptr_t)sp->block_, lo = (uintptr_t)a->v.blocks;

	if (sp->block_ == (void *)s->b)
		return true;
	return sp->tid_ == shmt_tls_tid && p >= lo &&
	       p < lo + (uint64_t)a->v.nblocks * a->v.block_size;
}

/*
 * Stores one event and its group g (NULL: none) in the slot's block: they
 * are published by one release store of written, so whoever flushes the
 * block, and a reader of a dead thread's block, sees all of them or none.
 * sp, when not NULL, is the open span this record ends. When its stack
 * entry is in this block (stack_in()), the entry, if tracked (depth below
 * SHMT_OPEN_MAX), is marked as closing before that store (see struct
 * shmt_block), and the span is popped after it and sp->block_ cleared, so
 * shmtrace_end() looks for it no further: a pop here costs no second look
 * at the thread's slots. The caller made room for 1 + g->nrec records.
 */
static inline void stage(struct shmt_tls_slot *s, const struct shmt_att *a, uint32_t kind,
			 uint32_t cat, uint32_t name, uint64_t ts, uint64_t dur, uint64_t flow,
			 const struct group *g, struct shmtrace_open_span *sp)
{
	uint64_t w = s->written, n = 1 + (g ? g->nrec : 0);
	struct shmt_record *r = &s->recs[w & s->mask];
	bool here;

	r->ts = ts;
	r->dur = dur;
	r->flow = flow;
	r->pid = shmt_pid;
	r->tid = shmt_tls_tid;
	r->name = (uint16_t)name;
	r->cat = (uint16_t)cat;
	r->commit = kind;
	if (g)
		fill_group(a, s->recs, s->mask, w, g);
	here = sp && sp->block_ && sp->gen_ == shmt_fork_gen && stack_in(sp, a, s);
	if (here && sp->depth_ < SHMT_OPEN_MAX)
		store_relaxed(&s->b->open_closing, (w + n) << 8 | (sp->depth_ + 1));
	/* pairs with the acquire load of written by whoever flushes the block;
	 * orders open_closing before it too */
	store_release(&s->b->written, w + n);
	s->written = w + n;
	if (here) {
		/* after the record: a thread killed in between is seen
		 * closing, and its span is not shown twice. Pairs with the
		 * acquire load of open_depth by readers */
		store_release(&s->b->open_depth, sp->depth_);
		sp->block_ = NULL;
	}
}

/*
 * emit() when its fast path does not apply: no handle, a handle not yet
 * attached, moved to another ring or whose ring was retired, the thread's first record (or its
 * first after a fork), or a block at its flush mark. Out of line, so that
 * the fast path saves no registers and keeps no stack frame.
 */
static __attribute__((noinline)) int emit_slow(shmtrace_t *t, uint32_t kind, uint32_t cat,
					       uint32_t name, uint64_t ts, uint64_t dur,
					       uint64_t flow, const struct group *g,
					       struct shmtrace_open_span *sp)
{
	struct shmt_tls_slot *s = &shmt_tls[0];
	struct shmt_att *a;
	unsigned nrec = g ? g->nrec : 0;
	int ret = 0;

	if (unlikely(t == NULL))
		return -EINVAL;
	/* pairs with the release store of cur in attach_locked() */
	a = load_acquire(&t->cur);
	if (unlikely(a == NULL || shmt_att_retired(a))) {
		/* opened before its ring existed, or its ring was removed or
		 * replaced: look (rate-limited) and maybe move */
		a = shmt_attach_current(t);
		if (!a)
			return -ENOENT;
		if (unlikely(shmt_att_retired(a) && load_relaxed(&t->orphan))) {
			/* nobody drains the removed ring: refused, said, counted */
			fetch_add(&t->orphaned, 1 + nrec);
			return -ENOENT;
		}
	}
	if (unlikely(a->remap != NULL)) {
		/* moved to another ring: the caller's ids are the handle's */
		cat = a->remap[cat & (SHMT_HANDLE_IDS - 1)];
		name = a->remap[name & (SHMT_HANDLE_IDS - 1)];
	}
	if (unlikely(!shmt_slot_is(s, a))) {
		/* no block yet: claimed now, or the record written under the
		 * lock instead (one bounded wait either way) */
		struct shmt_record d[SHMT_BLOCK_RECORDS_MIN];	/* >= SHMT_GROUP_MAX */

		d[0] = (struct shmt_record){
			.ts = ts, .dur = dur, .flow = flow, .pid = shmt_pid, .tid = shmt_my_tid(),
			.name = (uint16_t)name, .cat = (uint16_t)cat, .commit = kind,
		};
		if (g)
			fill_group(a, d, SHMT_BLOCK_RECORDS_MIN - 1, 0, g);
		s = shmt_slot_slow(t, a, d, 1 + nrec, &ret);
		if (!s)
			return ret;
	}
	/* soft <= limit: one compare guards both marks; or the collector
	 * asks for the block */
	if (unlikely(s->written + nrec >= s->soft || load_relaxed(&s->b->ask))) {
		ret = shmt_make_room(t, a, s, nrec);
		if (ret == -ETIMEDOUT) {
			shmt_loss_lock_dropped(&a->v, 1 + nrec);
			return ret;
		}
		if (ret == -ENOBUFS) {
			/* the ring and the blocks handed over are full */
			fetch_add(&a->v.h->dropped.v, 1 + nrec);
			return -ENOSPC;
		}
	}
	stage(s, a, kind, cat, name, ts, dur, flow, g, sp);
	/* this record is staged; -ENOSPC says the flush that made room for
	 * it dropped earlier records of this thread */
	return ret;
}

/*
 * Stages one event and its group g (see stage()). The fast path, a
 * handle attached and not remapped, the thread's slot 0 its slot for that
 * attachment, the block below its flush mark and the ring not retired (a
 * word on a header line nobody writes while the ring lives), is a handful of loads and
 * compares and the stores of the record; everything else is emit_slow().
 * A constant NULL g folds away for the plain calls.
 */
static inline __attribute__((always_inline)) int emit(shmtrace_t *t, uint32_t kind, uint32_t cat,
							uint32_t name, uint64_t ts, uint64_t dur,
							uint64_t flow, const struct group *g,
							struct shmtrace_open_span *sp)
{
	struct shmt_tls_slot *s = &shmt_tls[0];
	const struct shmt_att *a;
	unsigned nrec = g ? g->nrec : 0;

	if (likely(t != NULL)) {
		/* pairs with the release store of cur in attach_locked() */
		a = load_acquire(&t->cur);
		/* shmt_slot_is() written out: through the helper gcc 12 lays
		 * this path out behind a taken branch (objdump of emit.o) */
		if (likely(a != NULL && a->remap == NULL && s->id == a->id &&
			   s->gen == shmt_fork_gen && s->written + nrec < s->soft &&
			   !shmt_att_retired(a) && !load_relaxed(&s->b->ask))) {
			stage(s, a, kind, cat, name, ts, dur, flow, g, sp);
			return 0;
		}
	}
	return emit_slow(t, kind, cat, name, ts, dur, flow, g, sp);
}

SHMT_API int shmtrace_span(shmtrace_t *t, uint32_t cat, uint32_t name,
			   uint64_t start_ns, uint64_t end_ns, uint64_t flow_id)
{
	return emit(t, SHMTRACE_KIND_SPAN, cat, name, start_ns,
		    end_ns > start_ns ? end_ns - start_ns : 0, flow_id, NULL, NULL);
}

SHMT_API int shmtrace_instant(shmtrace_t *t, uint32_t cat, uint32_t name, uint64_t flow_id)
{
	return emit(t, SHMTRACE_KIND_INSTANT, cat, name, shmt_now(), 0, flow_id, NULL, NULL);
}

SHMT_API int shmtrace_counter(shmtrace_t *t, uint32_t cat, uint32_t name, int64_t value)
{
	return emit(t, SHMTRACE_KIND_COUNTER, cat, name, shmt_now(), (uint64_t)value, 0,
		    NULL, NULL);
}

SHMT_API int shmtrace_span_args(shmtrace_t *t, uint32_t cat, uint32_t name, uint64_t start_ns,
				uint64_t end_ns, uint64_t flow_id, const struct shmtrace_arg *args,
				unsigned n)
{
	struct group g;

	if (!plan(args, n, &g))
		return -EINVAL;
	return emit(t, SHMTRACE_KIND_SPAN, cat, name, start_ns,
		    end_ns > start_ns ? end_ns - start_ns : 0, flow_id, &g, NULL);
}

SHMT_API int shmtrace_instant_args(shmtrace_t *t, uint32_t cat, uint32_t name, uint64_t flow_id,
				   const struct shmtrace_arg *args, unsigned n)
{
	struct group g;

	if (!plan(args, n, &g))
		return -EINVAL;
	return emit(t, SHMTRACE_KIND_INSTANT, cat, name, shmt_now(), 0, flow_id, &g, NULL);
}

/*
 * Pushes open span sp, its fields set, on the calling thread's stack of
 * open spans in its staging block b (of attachment a), with eflow its
 * flow packed for the entry: the entry, then the depth (release), so a
 * reader that sees the depth sees the entry. No lock.
 */
static inline __attribute__((always_inline)) void push_entry(struct shmtrace_open_span *sp,
							      const struct shmt_att *a,
							      struct shmt_block *b, uint32_t eflow)
{
	/* our own word; a peer may scribble on it, which only hides spans */
	uint32_t d = load_relaxed(&b->open_depth);

	if (likely(d < SHMT_OPEN_MAX)) {
		struct shmt_open *e = shmt_block_open(b, d);
		/* read before the stores, which the compiler cannot tell
		 * apart from them */
		uint16_t ename = (uint16_t)remap_id(a, sp->name), ecat = (uint16_t)remap_id(a, sp->cat);
		uint32_t minor = a->v.minor;

		store_relaxed(&b->open_closing, 0);
		store_relaxed(&e->ts, sp->start);
		store_relaxed(&e->ids, shmt_open_ids(ename, ecat, eflow));
		/* before minor 7 this byte is padding, which readers ignore */
		if (minor >= 7)
			store_relaxed(&b->open_roles[d], (uint8_t)shmt_flow_role(sp->flow));
	}
	/* pairs with the acquire load of open_depth by readers */
	store_release(&b->open_depth, d + 1);
	sp->block_ = b;
	sp->tid_ = shmt_tls_tid;
	sp->depth_ = d;
	sp->gen_ = shmt_fork_gen;
}

/* push_entry() of a span with a flow, whose packing reads the ring's id:
 * out of line, so that a begin without a flow keeps no registers for it. */
static __attribute__((noinline)) void push_flow(struct shmtrace_open_span *sp,
						const struct shmt_att *a, struct shmt_block *b)
{
	push_entry(sp, a, b, shmt_open_flow_pack(sp->flow, a->v.minor >= 1 ?
						 load_relaxed(&a->v.h->ring_id) : 0));
}

/* Pushes open span sp (push_entry()). Inline in the begin's fast path: a
 * call there saved four registers on every begin. */
static inline __attribute__((always_inline)) void push(struct shmtrace_open_span *sp,
							const struct shmt_att *a,
							struct shmt_block *b)
{
	if (unlikely(sp->flow != 0))
		push_flow(sp, a, b);
	else
		push_entry(sp, a, b, 0);
}

/* What an open span that is on no stack holds (push_entry() sets it
 * otherwise): shmtrace_end() records it and pops nothing. */
static void not_pushed(struct shmtrace_open_span *sp)
{
	sp->block_ = NULL;
	sp->depth_ = 0;
	sp->gen_ = 0;
	sp->tid_ = 0;
}

/* shmtrace_begin() on a thread with no block yet in a's ring: one is
 * claimed (shmt_slot_slow()), out of line so that the fast path keeps
 * no registers across a call. */
static __attribute__((noinline)) int begin_slow(shmtrace_t *t, struct shmtrace_open_span *sp,
						struct shmt_att *a)
{
	struct shmt_tls_slot *s;
	int ret;

	s = shmt_slot_slow(t, a, NULL, 0, &ret);
	if (s)
		push(sp, a, s->b);
	else
		not_pushed(sp);	/* without a block: recorded at the end, not tracked */
	return 0;
}

SHMT_API int shmtrace_begin(shmtrace_t *t, struct shmtrace_open_span *sp, uint32_t cat,
			    uint32_t name, uint64_t flow_id)
{
	struct shmt_tls_slot *s = &shmt_tls[0];
	struct shmt_att *a;

	/* the stack's fields are set by push_entry(), or not_pushed() */
	sp->t = t;
	sp->flow = flow_id;
	sp->cat = cat;
	sp->name = name;
	sp->nargs = 0;
	sp->start = shmt_now();
	if (unlikely(t == NULL)) {
		not_pushed(sp);
		return -EINVAL;
	}
	/* pairs with the release store of cur in attach_locked() */
	a = load_acquire(&t->cur);
	if (unlikely(a == NULL)) {
		not_pushed(sp);
		return -ENOENT;	/* the end looks for the ring, as emit() does */
	}
	if (unlikely(!shmt_slot_is(s, a)))
		return begin_slow(t, sp, a);
	push(sp, a, s->b);
	return 0;
}

/*
 * Stages argument i (1-based) of the open span sp in the thread's block,
 * as an argument record of its own (count 0, ring_format.h) and, for a
 * text, its bytes after it (what the span's end will keep of them, after
 * the texts before it), so that a crash before the span's end leaves it
 * with the span's entry on the stack. Only while sp is on this thread's
 * stack, in the block of its slot 0, in a ring that knows such records;
 * otherwise the argument waits for the end, as it always does. Records
 * staged as any: what the ring does with them is counted as for any.
 */
static void open_arg_stage(const struct shmtrace_open_span *sp, unsigned i)
{
	const struct shmtrace_arg *arg = &sp->args[i - 1];
	struct shmt_tls_slot *s = &shmt_tls[0];
	const struct shmt_att *a;
	uint64_t value = arg->value;
	struct group g = { 0 };	/* plan() sets what it reads; the analyzer cannot tell */

	if (!sp->block_ || sp->gen_ != shmt_fork_gen || sp->depth_ >= SHMT_OPEN_MAX)
		return;
	/* pairs with the release store of cur in attach_locked() */
	a = load_acquire(&sp->t->cur);
	if (!a || a->v.minor < SHMT_MINOR_OPEN_ARGS || !shmt_slot_is(s, a) || !stack_in(sp, a, s) ||
	    !plan(sp->args, i, &g))
		return;
	/* the key and the span's name are remapped by emit() as an event's
	 * name and category are; a string value here, as fill_group() does */
	if (arg->type == SHMTRACE_ARG_STR)
		value = remap_id(a, (uint32_t)value);
	if (arg->type == SHMTRACE_ARG_TEXT) {
		value = SHMT_TEXT_VALUE(g.len[i - 1], g.cut[i - 1]);
		g.text = (const char *)(uintptr_t)arg->value;
		g.tlen = g.len[i - 1];
	}
	g.nargs = 0;
	g.nrec = SHMT_TEXT_RECORDS(g.tlen);
	emit(sp->t, SHMTRACE_KIND_ARG, sp->name, arg->key, sp->start, value,
	     SHMT_OPEN_ARG_FLOW(arg->type, i, sp->depth_), g.nrec ? &g : NULL, NULL);
}

SHMT_API int shmtrace_span_arg(struct shmtrace_open_span *sp, struct shmtrace_arg arg)
{
	if (!sp)
		return -EINVAL;
	if (arg.type != SHMTRACE_ARG_INT && arg.type != SHMTRACE_ARG_STR &&
	    (arg.type != SHMTRACE_ARG_TEXT || !arg.value))
		return -EINVAL;
	if (sp->nargs >= SHMTRACE_MAX_ARGS)
		return -ENOSPC;
	sp->args[sp->nargs++] = arg;
	/* and again with the span's record at its end, as any argument */
	open_arg_stage(sp, sp->nargs);
	return 0;
}

/*
 * Pops open span sp off its thread's stack: in the block of this
 * thread's slot that holds it (stack_in()), or, ended on another thread,
 * in the block it was pushed on while its thread still owns that one (a
 * block its thread handed over or left is another's to write).
 */
static void pop(const struct shmtrace_open_span *sp)
{
	struct shmt_block *b = sp->block_;

	for (struct shmt_att *a = load_acquire(&sp->t->cur); a; a = a->prev)
		for (int i = 0; i < SHMT_TLS_SLOTS; i++)
			if (shmt_slot_is(&shmt_tls[i], a) && stack_in(sp, a, &shmt_tls[i])) {
				store_release(&shmt_tls[i].b->open_depth, sp->depth_);
				return;
			}
	if (load_relaxed(&b->state) == SHMT_BLOCK_OWNED && load_relaxed(&b->tid) == sp->tid_)
		store_release(&b->open_depth, sp->depth_);
}

/*
 * An open span's end with its n arguments, out of line, so that the plain
 * end keeps its own copy of emit()'s fast path, the group folded away.
 * Arguments were checked as they were added; a caller that rewrote them
 * loses them.
 */
static __attribute__((noinline)) int end_args(struct shmtrace_open_span *sp, uint64_t dur,
					      unsigned n)
{
	struct group g;

	return emit(sp->t, SHMTRACE_KIND_SPAN, sp->cat, sp->name, sp->start, dur, sp->flow,
		    plan(sp->args, n, &g) ? &g : NULL, sp);
}

SHMT_API int shmtrace_end(struct shmtrace_open_span *sp)
{
	uint64_t end = shmt_now();
	unsigned n = sp->nargs <= SHMTRACE_MAX_ARGS ? sp->nargs : SHMTRACE_MAX_ARGS;
	uint64_t dur;
	int ret;

	if (!sp->t)
		return -EINVAL;
	dur = end > sp->start ? end - sp->start : 0;
	if (likely(n == 0))
		ret = emit(sp->t, SHMTRACE_KIND_SPAN, sp->cat, sp->name, sp->start, dur,
			   sp->flow, NULL, sp);
	else
		ret = end_args(sp, dur, n);
	/* not popped with the record (stage()): the entry is in another of
	 * the thread's blocks, the span is ended on another thread than its
	 * own, or the record was not staged. Popped after the record is
	 * published, as there. Not in a forked child: the block is its
	 * parent's. */
	if (sp->block_ && sp->gen_ == shmt_fork_gen)
		pop(sp);
	sp->block_ = NULL;
	return ret;
}

/*
 * A trigger: an event of its own kind, staged as any (so it is in the
 * thread's block, published, the moment this returns), then counted in
 * the ring's header, which wakes a flight recorder sleeping on it. Its
 * name is interned through the handle's cache, a lookup once it is known.
 */
SHMT_API int shmtrace_trigger(shmtrace_t *t, const char *name, unsigned flags)
{
	struct shmt_att *a;
	uint32_t id;
	int ret;

	if (!t || !name || flags)
		return -EINVAL;
	a = shmt_attach_current(t);
	if (!a)
		return -ENOENT;
	/* an older ring's readers take the kind for a torn record */
	if (a->v.minor < SHMT_MINOR_TRIGGER)
		return -EOPNOTSUPP;
	id = shmtrace_intern(t, name);
	ret = emit(t, SHMTRACE_KIND_TRIGGER, 0, id, shmt_now(), 0, 0, NULL, NULL);
	/* staged (-ENOSPC: earlier records were dropped to make room) */
	if (ret == 0 || ret == -ENOSPC) {
		/* pairs with the release store of cur in attach_locked() */
		a = load_acquire(&t->cur);
		if (a)
			shmt_trigger_note(&a->v);
	}
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
	for (int i = 0; i < SHMT_TLS_SLOTS; i++)
		if (shmt_slot_is(&shmt_tls[i], a)) {
			int ret = shmt_flush_slot(t, a, &shmt_tls[i], t->lock_timeout_ns);

			return ret == -ENOBUFS ? -ENOSPC : ret;
		}
	return 0;
}
