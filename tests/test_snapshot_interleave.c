/* SPDX-License-Identifier: MIT */
/*
 * test_snapshot_interleave.c - a snapshot (shmt_snapshot_write(), in this
 * process) with threads' flushes put at set points of its copy, not left
 * to chance: the test steps in at the copy's settling of the staging
 * blocks (ld --wrap of shmt_ring_block_settled(), the Makefile's
 * LDWRAP_test_snapshot_interleave). Four threads flush, highest thread id
 * first, so the slots the copy reads after the blocks are in the reverse
 * of the order by thread that it sorts them into to find each block's
 * thread's; a block whose thread is not found there loses its staged
 * records or keeps an ended span open as well, and the snapshot holds
 * each record once only when every thread is found.
 */
#include <semaphore.h>

#include "cli_run.h"
#include "snapshot.h"
#include "snapshot_read.h"

#define NW		4	/* threads, each with its staging block */
#define PUBLISHED	3	/* spans each flushes before the snapshot */
#define STAGED		5	/* then stages (a block holds 64: none flushed) */

/* A thread of the test, doing what it is told, one step at a time: its
 * spans "tick" have dur its index and flow index * 7 + 1 (snap_tally()). */
enum work { W_SPANS, W_FLUSH, W_BEGIN, W_END, W_EXIT };

struct worker {
	shmtrace_t *t;
	pthread_t th;
	uint32_t tid;
	sem_t go, done;
	enum work cmd;
	uint32_t n;
	uint64_t next;			/* its next span's index */
	struct shmtrace_open_span sp;
	int ret;			/* of its last step: 0, or what failed */
};

static void *work(void *arg)
{
	struct worker *w = arg;
	uint32_t cat = shmtrace_intern(w->t, "test"), tick = shmtrace_intern(w->t, "tick");

	w->tid = (uint32_t)gettid();
	sem_post(&w->done);
	for (;;) {
		sem_wait(&w->go);
		w->ret = 0;
		switch (w->cmd) {
		case W_SPANS:
			for (uint32_t i = 0; i < w->n && !w->ret; i++, w->next++)
				w->ret = shmtrace_span(w->t, cat, tick, 1000 + w->next,
						       1000 + w->next + w->next, w->next * 7 + 1);
			break;
		case W_FLUSH:
			w->ret = shmtrace_flush(w->t);
			break;
		case W_BEGIN:
			w->ret = shmtrace_begin(w->t, &w->sp, cat, shmtrace_intern(w->t, "open"), 0);
			break;
		case W_END:
			w->ret = shmtrace_end(&w->sp);
			if (!w->ret)
				w->ret = shmtrace_flush(w->t);
			break;
		case W_EXIT:
			sem_post(&w->done);
			return NULL;
		}
		sem_post(&w->done);
	}
}

/* Has w do cmd (n spans) and waits until it has. */
static void ask(struct worker *w, enum work cmd, uint32_t n)
{
	w->cmd = cmd;
	w->n = n;
	sem_post(&w->go);
	sem_wait(&w->done);
	assert_int_equal(w->ret, 0);
}

static struct worker workers[NW];
static struct worker *by_tid_desc[NW];	/* the order the steps flush in */

static int tid_desc(const void *a, const void *b)
{
	uint32_t x = (*(struct worker *const *)a)->tid, y = (*(struct worker *const *)b)->tid;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* NW threads writing into ring through t, each having flushed PUBLISHED
 * spans and staged STAGED more. */
static void workers_start(shmtrace_t *t)
{
	for (int k = 0; k < NW; k++) {
		struct worker *w = &workers[k];

		memset(w, 0, sizeof(*w));
		w->t = t;
		assert_int_equal(sem_init(&w->go, 0, 0), 0);
		assert_int_equal(sem_init(&w->done, 0, 0), 0);
		assert_int_equal(pthread_create(&w->th, NULL, work, w), 0);
		sem_wait(&w->done);
		by_tid_desc[k] = w;
	}
	qsort(by_tid_desc, NW, sizeof(*by_tid_desc), tid_desc);
	/* published in the order the threads were made, staged likewise */
	for (int k = 0; k < NW; k++) {
		ask(&workers[k], W_SPANS, PUBLISHED);
		ask(&workers[k], W_FLUSH, 0);
	}
	for (int k = 0; k < NW; k++)
		ask(&workers[k], W_SPANS, STAGED);
}

static void workers_stop(void)
{
	for (int k = 0; k < NW; k++) {
		struct worker *w = &workers[k];

		w->cmd = W_EXIT;
		sem_post(&w->go);
		sem_wait(&w->done);
		assert_int_equal(pthread_join(w->th, NULL), 0);
		sem_destroy(&w->go);
		sem_destroy(&w->done);
	}
}

/*
 * Where the test steps into the copy (snapshot_copy.c): once every block
 * was copied and settled, before the head that ends the window is read
 * (what a thread flushes then is in the window's slots, and in the copy's
 * `late` list); or once the window's slots were copied, before the blocks
 * are settled again (what is flushed then is past the window, in its
 * `after` list). The copy settles each block it copied once in each pass,
 * in the same order: the calls tell where it is.
 */
enum step_at { AFTER_FIRST_SETTLING, BEFORE_SECOND_SETTLING };

static struct {
	bool on;
	enum step_at at;
	enum work cmd;		/* what each thread does there */
	uint32_t blocks;	/* the blocks the copy settles */
	uint32_t calls;
	bool done;
} step;

int __real_shmt_ring_block_settled(const struct shmt_view *v, uint32_t i, uint64_t *below,
				   uint64_t *head);
int __wrap_shmt_ring_block_settled(const struct shmt_view *v, uint32_t i, uint64_t *below,
				   uint64_t *head);

/* The threads do step.cmd, highest thread id first. */
static void step_in(void)
{
	for (int k = 0; k < NW; k++)
		ask(by_tid_desc[k], step.cmd, 0);
	step.done = true;
}

int __wrap_shmt_ring_block_settled(const struct shmt_view *v, uint32_t i, uint64_t *below,
				   uint64_t *head)
{
	int ret;

	if (!step.on)
		return __real_shmt_ring_block_settled(v, i, below, head);
	step.calls++;
	if (step.at == BEFORE_SECOND_SETTLING && step.calls == step.blocks + 1)
		step_in();
	ret = __real_shmt_ring_block_settled(v, i, below, head);
	if (step.at == AFTER_FIRST_SETTLING && step.calls == step.blocks)
		step_in();
	return ret;
}

/* The blocks a thread owns in ring: those the copy settles. */
static uint32_t owned_blocks(const struct shmt_view *v)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < v->nblocks; i++)
		n += load_relaxed(&shmt_block_at(v, i)->state) == SHMT_BLOCK_OWNED;
	return n;
}

/* A snapshot of ring into path, with the threads doing cmd at the step
 * at; read back into s. */
static void snapshot_stepped(const char *ring, const char *path, enum step_at at, enum work cmd,
			     struct snap_file *s)
{
	struct shmt_snap_opts o = { .ring = ring, .info = { .cause = SHMT_SNAP_COMMAND } };
	struct shmt_snap_result res;
	struct shmt_view v;
	char err[256];

	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	memset(&step, 0, sizeof(step));
	step.at = at;
	step.cmd = cmd;
	step.blocks = owned_blocks(&v);
	assert_int_equal(step.blocks, NW);
	step.on = true;
	if (shmt_snapshot_write(&v, path, &o, &res, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	step.on = false;
	/* every block settled twice, and the threads stepped in where meant */
	assert_int_equal(step.calls, 2 * NW);
	assert_true(step.done);
	shmt_view_close(&v);
	snap_read(path, s);
	assert_true(s->ended);
	assert_int_equal(s->loss.torn, 0);
	assert_int_equal(s->h.snapshot.overwritten, 0);
	assert_int_equal(s->n, res.records);
}

/* Each thread's spans "tick" in s: every index it wrote, once (what each
 * thread's are printed first when any is not). */
static void assert_every_tick_once(const struct snap_file *s)
{
	uint32_t tick = snap_string(s, "tick");
	struct snap_tally t[NW];
	bool right = true;

	assert_int_not_equal(tick, 0);
	for (int k = 0; k < NW; k++) {
		snap_tally(s, (uint32_t)getpid(), workers[k].tid, tick, true, &t[k]);
		right = right && t[k].found == PUBLISHED + STAGED && t[k].lo == 0 &&
			t[k].hi == PUBLISHED + STAGED - 1 && !t[k].dup && !t[k].missing &&
			!t[k].torn;
	}
	for (int k = 0; k < NW && !right; k++)
		fprintf(stderr, "thread %u: %llu of its %d found (%llu..%llu), %llu twice, "
			"%llu missing, %llu torn\n", workers[k].tid,
			(unsigned long long)t[k].found, PUBLISHED + STAGED,
			(unsigned long long)t[k].lo, (unsigned long long)t[k].hi,
			(unsigned long long)t[k].dup, (unsigned long long)t[k].missing,
			(unsigned long long)t[k].torn);
	assert_true(right);
}

/* A test's ring, and the handle its threads write through. */
struct fixture {
	const char *ring;
	shmtrace_t *t;
};

/* The ring (overwrite, 4096 records) with NW threads writing into it:
 * stopped by the teardown, whatever the test did. */
static int ring_with_workers(void **state, const char *ring)
{
	static struct fixture f;
	struct shmtrace_ring_config cfg;

	f.ring = ring;
	small_cfg(&cfg, 4096, SHMTRACE_MODE_OVERWRITE);
	shmtrace_ring_unlink(ring);
	if (shmtrace_ring_create(ring, &cfg) < 0 || shmtrace_open(ring, &f.t) < 0)
		return -1;
	workers_start(f.t);
	*state = &f;
	return 0;
}

static int ring_after(void **state)
{
	return ring_with_workers(state, test_ring_name("snapafter"));
}

static int ring_late(void **state)
{
	return ring_with_workers(state, test_ring_name("snaplate"));
}

static int ring_gone(void **state)
{
	struct fixture *f = *state;

	workers_stop();
	shmtrace_close(f->t);
	shmtrace_ring_unlink(f->ring);
	return 0;
}

/*
 * The threads flush their staged records after the window's slots were
 * copied: the records are in no slot of the window, and each block's copy
 * keeps all of them, the count of them that the copy finds past the
 * window (its `after` slots of the block's thread) telling it that none
 * is in the window. A block whose thread it did not find there would
 * take them for records of the window and leave them out: lost.
 */
static void test_records_flushed_past_the_window_are_each_copied_once(void **state)
{
	const struct fixture *f = *state;
	struct snap_file *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	snapshot_stepped(f->ring, tmp("after.cap"), BEFORE_SECOND_SETTLING, W_FLUSH, s);
	assert_every_tick_once(s);
	assert_int_equal(s->n, NW * (PUBLISHED + STAGED));
	/* the window: what was published before; then the staged */
	assert_int_equal(s->h.snapshot.first_seq, 0);
	assert_int_equal(s->h.snapshot.end_seq, NW * PUBLISHED);
	assert_int_equal(s->h.snapshot.staged, NW * STAGED);
	snap_free(s);
	free(s);
}

/*
 * Each thread has a span open when its block is copied, and ends it (its
 * staged records flushed with it) before the head that ends the window is
 * read: the span is a record of the window, found among the slots the
 * copy read after the block (its `late` slots of the block's thread), and
 * is not copied open as well; the staged records are the window's, not
 * copied from the blocks again. A block whose thread the copy did not
 * find there would add the span open: twice.
 */
static void test_spans_ended_into_the_window_are_not_also_copied_open(void **state)
{
	const struct fixture *f = *state;
	struct snap_file *s = calloc(1, sizeof(*s));
	int spans[NW] = { 0 }, opened[NW] = { 0 };
	bool right = true;
	uint32_t open;

	assert_non_null(s);
	for (int k = 0; k < NW; k++)
		ask(&workers[k], W_BEGIN, 0);
	snapshot_stepped(f->ring, tmp("late.cap"), AFTER_FIRST_SETTLING, W_END, s);
	/* each thread's span "open": one record, the ended span's, and no
	 * open one */
	open = snap_string(s, "open");
	assert_int_not_equal(open, 0);
	for (int k = 0; k < NW; k++) {
		for (size_t i = 0; i < s->n; i++) {
			if (s->r[i].tid != workers[k].tid || s->r[i].name != open)
				continue;
			spans[k] += s->r[i].commit == SHMTRACE_KIND_SPAN;
			opened[k] += s->r[i].commit == SHMTRACE_KIND_OPEN;
		}
		right = right && spans[k] == 1 && !opened[k];
	}
	for (int k = 0; k < NW && !right; k++)
		fprintf(stderr, "thread %u: span \"open\" %d times ended, %d times open\n",
			workers[k].tid, spans[k], opened[k]);
	assert_true(right);
	assert_every_tick_once(s);
	assert_int_equal(s->n, NW * (PUBLISHED + STAGED + 1));
	/* all of it in the window, nothing staged */
	assert_int_equal(s->h.snapshot.first_seq, 0);
	assert_int_equal(s->h.snapshot.end_seq, NW * (PUBLISHED + STAGED + 1));
	assert_int_equal(s->h.snapshot.staged, 0);
	snap_free(s);
	free(s);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("snapinter", false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_records_flushed_past_the_window_are_each_copied_once,
						ring_after, ring_gone),
		cmocka_unit_test_setup_teardown(test_spans_ended_into_the_window_are_not_also_copied_open,
						ring_late, ring_gone),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
