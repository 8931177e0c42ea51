/* SPDX-License-Identifier: MIT */
/*
 * test_collector.c - shmtrace-collector's data path, end to end: producers
 * and the collector at once, every record in the capture exactly once or
 * counted; torn slots skipped and counted; a lock held by an owner nobody
 * sees die; rotation; threads opening and closing handles; exact overwrite
 * accounting; two drain sessions in one process; when the drain says it
 * is behind, and when it yields the CPU though records wait; the lock held
 * for a few blocks at a time.
 */
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <pthread.h>

#include "collector_run.h"
#include "drain.h"
#include "hold.h"
#include "priority.h"
#include "source.h"

static void test_every_record_exactly_once(void **state)
{
	const char *ring = test_ring_name("col");
	struct shmtrace_ring_config c = { .capacity = 1 << 18 };
	char out[256];
	struct tally t = { 0 };
	int status;
	pid_t col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, out, NULL, 0);
	run_producers(ring, &t, 3, 200000);
	wait_producers(&t);
	status = stop(col, SIGTERM);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	read_capture(out, &t);
	print_message("captured %llu, dropped %llu\n", (unsigned long long)t.records,
		      (unsigned long long)t.dropped);
	assert_int_equal(t.clean_ends, 1);
	assert_int_equal(t.dup_seq, 0);
	check_exactly_once(&t);
	unlink(out);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/* A slot in the published range that is not a finished record (forged,
 * or torn): skipped and counted, the records around it kept. */
static void test_torn_slots_skipped_and_counted(void **state)
{
	const char *ring = test_ring_name("torn");
	struct shmtrace_ring_config c = { .capacity = 1 << 12 };
	struct tally t = { 0 };
	struct shmt_extent e;
	struct shmt_view v;
	char out[256], err[256];
	int status;
	pid_t pid, col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	tally_init(&t, 1, 1000);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		produce_flushed(ring, 1000, true);
	t.pids[0] = (uint32_t)pid;
	wait_producers(&t);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	assert_int_equal(shmt_ring_head(&v), 1000);
	/* every record in its slot, none held in a block */
	assert_int_equal(shmt_ring_extents(&v, 0, 1000, &e, 1), 0);
	v.records[500].commit = 0;			/* half-written */
	v.records[700].commit = SHMT_COMMIT(700 + 4096, 1);	/* another lap */
	shmt_view_close(&v);
	col = start_collector(ring, out, NULL, 0);
	status = stop(col, SIGTERM);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	read_capture(out, &t);
	assert_int_equal(t.records, 998);
	assert_int_equal(t.torn, 2);
	assert_int_equal(t.seq_seen[499] + t.seq_seen[501] + t.seq_seen[699] + t.seq_seen[701], 4);
	assert_int_equal(t.seq_seen[500] + t.seq_seen[700], 0);
	unlink(out);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/* The lock held by an owner the kernel never reports dead (it unmapped the
 * ring first): the collector warns, drains what is published, and stops
 * on SIGTERM; it does not hang. */
static void test_lock_held_by_unseen_dead_owner_does_not_hang(void **state)
{
	const char *ring = test_ring_name("wedged");
	struct tally t = { 0 };
	char out[256];
	int status;
	pid_t col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	run_producers(ring, &t, 1, 1000);
	wait_producers(&t);
	ring_lock_by_unseen_dead_owner(ring);
	col = start_collector(ring, out, NULL, 0);
	status = stop(col, SIGTERM);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	read_capture(out, &t);
	assert_int_equal(t.records, 1000);
	assert_int_equal(t.clean_ends, 1);
	figure_acct("collector with a lock held by an unseen dead owner", 1, 1000, t.records, 0, 0,
	       1000 - t.records, "warned, drained, stopped");
	unlink(out);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/* --max-size: the capture rotates into FILE.1, FILE.2 ...; each part is a
 * whole capture, and together they hold every record once. */
static void test_max_size_rotates_into_whole_parts(void **state)
{
	const char *ring = test_ring_name("rot");
	struct shmtrace_ring_config c = { .capacity = 1 << 18 };
	char out[256], part[300];
	struct tally t = { 0 };
	struct stat st;
	int status, parts = 0;
	pid_t col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, out, "--max-size=1M", 0);
	/* about 10 bytes a record packed: over 3 MiB */
	run_producers(ring, &t, 1, 400000);
	wait_producers(&t);
	status = stop(col, SIGTERM);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int i = 0; i < 64; i++) {
		if (i == 0)
			snprintf(part, sizeof(part), "%s", out);
		else
			snprintf(part, sizeof(part), "%s.%d", out, i);
		if (stat(part, &st) < 0)
			break;
		/* a part passes the bound by at most one batch of records */
		assert_true(st.st_size <= (1 << 20) + DRAIN_BATCH * 40 + 65536);
		read_capture(part, &t);
		unlink(part);
		parts++;
	}
	print_message("%d parts, %llu records, %llu dropped\n", parts,
		      (unsigned long long)t.records, (unsigned long long)t.dropped);
	assert_true(parts >= 3);
	assert_int_equal(t.clean_ends, parts);	/* every part ends with END */
	assert_int_equal(t.dup_seq, 0);
	check_exactly_once(&t);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/*
 * Threads of one process that each open their own handle and close it at
 * random moments while the others still write: closing a handle releases
 * only its own thread's block, so every record is captured once or counted
 * as dropped, none twice, and `dropped` never goes below zero.
 */
struct handle_thread {
	const char *ring;
	uint64_t first, n;	/* this thread's record indices */
	unsigned seed;
	int failed;
};

static void *handle_thread(void *arg)
{
	struct handle_thread *ht = arg;
	uint64_t i = ht->first, end = ht->first + ht->n, ts, dur, flow;

	while (i < end) {
		/* a handle for a random stretch of records, then closed */
		uint64_t chunk = 1 + (uint64_t)rand_r(&ht->seed) % 3000;
		shmtrace_t *t;

		int ret = shmtrace_open(ht->ring, &t);

		if (ret < 0) {
			fprintf(stderr, "open: %s\n", shmtrace_strerror(ret));
			ht->failed = 1;
			return NULL;
		}
		for (; chunk-- && i < end; i++) {
			int ret;

			fill(i, &ts, &dur, &flow);
			ret = shmtrace_span(t, 2, 1, ts, ts + dur, flow);
			/* -ENOSPC: staged, earlier ones dropped; -ETIMEDOUT
			 * (slow sanitizer runs): dropped; both counted */
			if (ret < 0 && ret != -ENOSPC && ret != -ETIMEDOUT) {
				fprintf(stderr, "span: %s\n", shmtrace_strerror(ret));
				ht->failed = 1;
			}
		}
		shmtrace_close(t);
	}
	return NULL;
}

static void produce_threads(const char *ring, int nthreads, uint64_t per)
{
	struct handle_thread ht[16];
	pthread_t th[16];
	int failed = 0;

	for (int k = 0; k < nthreads; k++) {
		ht[k] = (struct handle_thread){ ring, per / (uint64_t)nthreads * (uint64_t)k,
						per / (uint64_t)nthreads, (unsigned)(getpid() * 31 + k), 0 };
		assert_int_equal(pthread_create(&th[k], NULL, handle_thread, &ht[k]), 0);
	}
	for (int k = 0; k < nthreads; k++) {
		pthread_join(th[k], NULL);
		failed |= ht[k].failed;
	}
	_exit(failed ? 5 : 0);
}

static void test_threads_closing_their_handles_lose_no_record(void **state)
{
	const char *ring = test_ring_name("handles");
	struct shmtrace_ring_config c = { .capacity = 1 << 18 };
	const int nproc = 2, nthreads = 8;
	const uint64_t per = 8 * 40000;
	struct shmtrace_stats st;
	struct tally t = { 0 };
	char out[256];
	shmtrace_t *h;
	int status;
	pid_t col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, out, NULL, 0);
	tally_init(&t, nproc, per);
	for (int p = 0; p < nproc; p++) {
		pid_t pid = fork();

		if (pid == 0)
			produce_threads(ring, nthreads, per);
		t.pids[p] = (uint32_t)pid;
	}
	wait_producers(&t);
	status = stop(col, SIGTERM);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	read_capture(out, &t);
	assert_int_equal(shmtrace_open(ring, &h), 0);
	assert_int_equal(shmtrace_stats(h, &st), 0);
	shmtrace_close(h);
	print_message("%d x %d threads: captured %llu of %llu, dropped %llu, %llu duplicates\n",
		      nproc, nthreads, (unsigned long long)t.records,
		      (unsigned long long)(nproc * per), (unsigned long long)t.dropped,
		      (unsigned long long)t.dup_seq);
	assert_true(st.dropped < (1ull << 63));	/* never below zero */
	assert_int_equal(st.dropped, t.dropped);
	assert_int_equal(t.dup_seq, 0);
	check_exactly_once(&t);
	assert_int_equal(t.records + t.dropped, nproc * per);
	unlink(out);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

struct count_ctx {
	uint64_t n;
};

static int count_record(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	(void)r;
	(void)start_time;
	((struct count_ctx *)ctx)->n++;
	return 0;
}

/*
 * In overwrite mode, exported + dropped + overwritten + torn equals what
 * was written, exactly, with several producers, the collector racing the
 * head, and a collector SIGKILLed and restarted in the middle: a slot the
 * head passes over counts as overwritten only when no reader took it, so
 * the losses never outnumber the records.
 */
static void test_overwrite_mode_accounts_every_record_under_load(void **state)
{
	const char *ring = test_ring_name("owacct");
	struct shmtrace_ring_config c = { .capacity = 1024, .mode = SHMTRACE_MODE_OVERWRITE };
	const int nproc = 3;
	const uint64_t per = 200000;
	struct count_ctx cc = { 0 };
	struct source src;
	char out[2][256], err[512];
	char *paths[2] = { out[0], out[1] };
	struct tally t = { 0 };
	uint64_t sum;
	int status;
	pid_t col;

	(void)state;
	for (int i = 0; i < 2; i++)
		snprintf(out[i], sizeof(out[i]), "/tmp/%s.%d.cap", ring, i);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, out[0], NULL, 0);
	run_producers(ring, &t, nproc, per);
	{
		/* restart the collector once it has taken something */
		struct shmtrace_stats st;
		shmtrace_t *h;

		assert_int_equal(shmtrace_open(ring, &h), 0);
		for (int spins = 0; spins < 1000000; spins++) {
			shmtrace_stats(h, &st);
			if (st.tail > 20000)
				break;
			sched_yield();
		}
		shmtrace_close(h);
	}
	status = stop(col, SIGKILL);
	assert_true(WIFSIGNALED(status));
	col = start_collector(ring, out[1], NULL, 0);
	wait_producers(&t);
	status = stop(col, SIGTERM);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	assert_int_equal(source_open(&src, NULL, paths, 2, err, sizeof(err)), 0);
	assert_int_equal(source_records(&src, count_record, &cc, err, sizeof(err)), 0);
	/* a producer whose blocks are full while the lock is busy drops after
	 * its bounded wait: lost to the lock, counted */
	sum = cc.n + src.loss.dropped + src.loss.overwritten + src.loss.lock_dropped + src.loss.torn;
	print_message("overwrite: exported %llu + dropped %llu + overwritten %llu + lost to lock timeouts %llu + "
		      "torn %llu = %llu of %llu written\n", (unsigned long long)cc.n,
		      (unsigned long long)src.loss.dropped, (unsigned long long)src.loss.overwritten,
		      (unsigned long long)src.loss.lock_dropped, (unsigned long long)src.loss.torn,
		      (unsigned long long)sum, (unsigned long long)(nproc * per));
	assert_true(src.loss.overwritten > 0);
	assert_int_equal(src.loss.unaccounted, 0);
	assert_int_equal(sum, nproc * per);
	figure_acct("overwrite mode, collector racing the head, SIGKILLed once", 1, nproc * per, cc.n,
	       src.loss.dropped + src.loss.overwritten + src.loss.lock_dropped + src.loss.torn, 0,
	       nproc * per - sum, "exported + dropped + overwritten + lock + torn = written");
	source_close(&src);
	for (int i = 0; i < 2; i++)
		unlink(out[i]);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/* One collector session on its own thread, drained in one go. */
struct session {
	const char *ring;
	char out[256];
	int ret;
};

static void *run_session(void *arg)
{
	struct session *s = arg;
	struct drain_opts o = { .ring = s->ring, .output = s->out, .poll_ns = 1000000 };
	struct drain *d = drain_new();

	s->ret = d ? drain_open(d, &o) : -ENOMEM;
	if (!s->ret)
		s->ret = drain_finish(d);
	drain_free(d);
	return NULL;
}

/* Strings of the capture at path: all must begin with prefix; returns how
 * many there are. */
static uint32_t capture_strings(const char *path, char prefix)
{
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	char err[256];
	uint32_t n = 0;
	int rc;

	assert_int_equal(shmt_cap_open(path, &r, err, sizeof(err)), 0);
	while ((rc = shmt_cap_next(r, &f, err, sizeof(err))) == 1) {
		if (f.type != SHMT_CAP_STRINGS)
			continue;
		for (size_t i = 0; i < f.strings.n; i++) {
			if (f.strings.v[i].s[0] != prefix)
				fail_msg("%s: string %u is '%s', not of its ring", path,
					 f.strings.v[i].id, f.strings.v[i].s);
			n++;
		}
	}
	assert_int_equal(rc, 0);
	shmt_cap_close(r);
	return n;
}

/*
 * Two sessions at once in one process (drain.h is a library), on two rings
 * each with several batches of strings: every capture holds its own ring's
 * strings. A string batch shared by the sessions (function-static arrays)
 * mixes them, and ThreadSanitizer reports the race.
 */
static void test_two_sessions_in_one_process_keep_their_strings(void **state)
{
	enum { NSTR = 1500 };
	struct session s[2];
	pthread_t th[2];

	(void)state;
	for (int k = 0; k < 2; k++) {
		struct shmtrace_ring_config c = { .capacity = 1 << 12 };
		shmtrace_t *t;
		char name[32];

		s[k].ring = test_ring_name(k ? "sessb" : "sessa");
		snprintf(s[k].out, sizeof(s[k].out), "/tmp/%s.cap", s[k].ring);
		assert_int_equal(shmtrace_ring_create(s[k].ring, &c), 0);
		assert_int_equal(shmtrace_open(s[k].ring, &t), 0);
		for (int i = 0; i < NSTR; i++) {
			snprintf(name, sizeof(name), "%c-%d", 'A' + k, i);
			assert_true(shmtrace_intern(t, name) != 0);
		}
		shmtrace_close(t);
	}
	for (int k = 0; k < 2; k++)
		assert_int_equal(pthread_create(&th[k], NULL, run_session, &s[k]), 0);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(pthread_join(th[k], NULL), 0);
		assert_int_equal(s[k].ret, 0);
		assert_int_equal(capture_strings(s[k].out, 'A' + k), NSTR);
		unlink(s[k].out);
		shmtrace_ring_unlink(s[k].ring);
	}
}

/*
 * A pass copies at most 4 x DRAIN_BATCH records: with more published, the
 * drain says it is behind (the live stream is paused then), and says so no
 * more once a pass copied all there was.
 */
/* A ring of 1 << 18 records holding n spans written with no collector,
 * and a drain session opened on it, polling every millisecond. */
static struct drain *drain_on_filled_ring(const char *ring, char out[256], uint32_t n)
{
	struct shmtrace_ring_config c = { .capacity = 1 << 18 };
	struct drain_opts o = { .ring = ring, .output = out, .poll_ns = 1000000 };
	struct drain *d;
	shmtrace_t *t;
	uint32_t cat;

	snprintf(out, 256, "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	cat = shmtrace_intern(t, "filled");
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(shmtrace_span(t, cat, cat, i, i + 1, 0), 0);
	shmtrace_close(t);
	d = drain_new();
	assert_non_null(d);
	assert_int_equal(drain_open(d, &o), 0);
	return d;
}

static void test_drain_behind_until_a_pass_copies_all_there_is(void **state)
{
	const char *ring = test_ring_name("behind");
	const uint32_t n = 8 * DRAIN_BATCH;
	char out[256];
	struct drain *d;
	long got, total = 0;
	int passes = 0;

	(void)state;
	d = drain_on_filled_ring(ring, out, n);
	assert_false(drain_behind(d));
	got = drain_pass(d, false);
	assert_int_equal(got, 4 * DRAIN_BATCH);
	assert_true(drain_behind(d));
	for (total = got; (got = drain_pass(d, false)) > 0; total += got, passes++)
		assert_int_equal(drain_behind(d), total + got < n);
	assert_int_equal(got, 0);
	assert_false(drain_behind(d));
	assert_true(passes >= 1);
	assert_int_equal(total, n);
	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/* A writer of the ring forging its head while a stop drains it, at the
 * start of each pass: the head a first pass follows, set far ahead before
 * the stop, then put back below it, and on a record each pass, so that
 * every pass finds one. */
static struct shmt_view g_forged_head_view;
static uint64_t g_forged_passes;

static void forge_head_each_pass(const char *where)
{
	const uint64_t ahead = 1ull << 62;

	if (strcmp(where, "collector-pass") != 0)
		return;
	if (++g_forged_passes >= 2)
		store_release(&g_forged_head_view.h->head.v, ahead - (1ull << 17) + g_forged_passes);
}

/*
 * A writer of the ring forges its head during a stop: far ahead of what
 * was copied when the stop begins, then back below that, and on a record
 * each pass. A head only grows: the one that went back ends the stop, at
 * the pass that saw it, what it did not copy left in the ring. A stop
 * that waited to reach the head at its start went on a record a pass for
 * as many passes as the ring has slots (2^17 here).
 */
static void test_stop_ends_when_a_writer_puts_head_back(void **state)
{
	const char *ring = test_ring_name("forgedhead");
	char out[256], err[256];
	struct drain *d;

	(void)state;
	d = drain_on_filled_ring(ring, out, 1000);
	assert_int_equal(drain_pass(d, false), 1000);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, &g_forged_head_view, err, sizeof(err)), 0);
	store_release(&g_forged_head_view.h->head.v, 1ull << 62);
	g_forged_passes = 0;
	shmt_test_hook = forge_head_each_pass;
	assert_int_equal(drain_finish(d), 0);
	shmt_test_hook = NULL;
	assert_int_equal(g_forged_passes, 2);
	figure("ring head put back under a stopping collector", 1, 1000, 0, 0, 0, 0,
	       "the stop ends at the pass that read it, and says so");
	drain_free(d);
	shmt_view_close(&g_forged_head_view);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/* The ring's segment cut to nothing, as its owner may do at any moment */
static const char *g_truncate_ring;

static void truncate_ring(const char *ring)
{
	char path[300];
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 0), 0);
	close(fd);
}

static void truncate_at_open(const char *where)
{
	if (!strcmp(where, "collector-open"))
		truncate_ring(g_truncate_ring);
}

/*
 * A ring truncated under the collector while it opens it (before it
 * touches every page of the records), or after its last pass (when it
 * reads the ring's counters to warn of names lost): the open fails and
 * says why, the warning is left out; neither raises SIGBUS, which killed
 * the collector before its exit.
 */
static void test_ring_truncated_at_open_or_exit_is_no_sigbus(void **state)
{
	const char *ring = test_ring_name("trunc");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	struct drain_opts o = { .ring = ring, .poll_ns = 1000000 };
	char out[256];
	struct drain *d;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	o.output = out;
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	d = drain_new();
	assert_non_null(d);
	g_truncate_ring = ring;
	shmt_test_hook = truncate_at_open;
	assert_int_equal(drain_open(d, &o), -EFAULT);
	shmt_test_hook = NULL;
	assert_non_null(strstr(drain_error(d), "was truncated while it was being opened"));
	drain_free(d);
	shmtrace_ring_unlink(ring);

	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	d = drain_new();
	assert_non_null(d);
	assert_int_equal(drain_open(d, &o), 0);
	assert_int_equal(drain_pass(d, false), 0);
	truncate_ring(ring);
	drain_warn_names(d);
	drain_free(d);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/*
 * Tables larger than --max-size: 2,000 strings of 1,000 bytes (about 2 MB,
 * written at the head of every part) and a bound of 1 MB. A part counts
 * its records, not the tables it starts with: passes that copy nothing
 * make no new part. One that counted them began a new part on every pass.
 */
static void test_tables_past_max_size_make_no_part_of_their_own(void **state)
{
	const char *ring = test_ring_name("bigtables");
	struct shmtrace_ring_config c = { .capacity = 1 << 16, .max_strings = 4096,
					  .string_bytes = 4u << 20 };
	struct drain_opts o = { .ring = ring, .poll_ns = 1000000, .max_size = 1u << 20 };
	char out[256], name[1001];
	struct drain_stats st;
	struct drain *d;
	shmtrace_t *t;
	uint32_t id = 0;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	o.output = out;
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	for (int i = 0; i < 2000; i++) {
		snprintf(name, 12, "%010d", i);
		name[10] = 'n';
		id = shmtrace_intern(t, name);
		assert_true(id > 0);
	}
	assert_int_equal(shmtrace_span(t, id, id, 1, 2, 0), 0);
	shmtrace_close(t);
	d = drain_new();
	assert_non_null(d);
	assert_int_equal(drain_open(d, &o), 0);
	assert_int_equal(drain_pass(d, false), 1);
	for (int i = 0; i < 10; i++)
		assert_int_equal(drain_pass(d, false), 0);
	drain_get_stats(d, false, &st);
	assert_int_equal(st.parts, 1);
	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	for (uint32_t k = 0; k <= 12; k++) {
		char part[300];

		snprintf(part, sizeof(part), k ? "%s.%u" : "%s", out, k);
		unlink(part);
	}
	shmtrace_ring_unlink(ring);
}

/*
 * A drain awake a millisecond since its last nap yields, though records
 * wait, only while they are under a sixteenth of the ring: with more it
 * runs on, however long it has been awake; a nap starts the millisecond
 * again.
 */
static void test_drain_yields_a_millisecond_after_its_nap_under_a_sixteenth(void **state)
{
	const char *ring = test_ring_name("yield");
	const uint64_t ms = 1000000;
	char out[256];
	struct drain *d;
	uint64_t before, after;
	int passes = 0;

	(void)state;
	/* a pass copies 4 x DRAIN_BATCH: a sixteenth of the ring is left */
	d = drain_on_filled_ring(ring, out, 6 * DRAIN_BATCH);
	assert_int_equal(drain_pass(d, false), 4 * DRAIN_BATCH);
	assert_true(drain_backlog(d) >= PRIO_BACKLOG_FULL / 16);
	assert_false(drain_awake_long(d, shmt_mono_ns() + 10000 * ms));
	/* all copied and written: nothing waits */
	while (drain_backlog(d) > 0 && passes++ < 1000)
		if (drain_pass(d, false) == 0)
			drain_sleep(d);
	assert_int_equal(drain_backlog(d), 0);
	assert_true(drain_awake_long(d, shmt_mono_ns() + ms));
	before = shmt_mono_ns();
	drain_yield(d);
	after = shmt_mono_ns();
	assert_false(drain_awake_long(d, before + ms - 1));
	assert_true(drain_awake_long(d, after + ms));
	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/* What the test hook saw at each end of a hold of the lock: the ring's
 * head then, and the most one hold moved it. */
static struct {
	struct shmt_view v;
	uint64_t head, step_max;
	unsigned holds;
} seen_holds;

/* a block note_hold() claims again (as a claim would: its number moved
 * on, its ask word cleared) just before the collector asks for it */
static struct shmt_block *reclaim_before_ask;

static void note_hold(const char *where)
{
	uint64_t head;

	if (reclaim_before_ask && strcmp(where, "collector-asking") == 0) {
		store_relaxed(&reclaim_before_ask->claim_no, load_relaxed(&reclaim_before_ask->claim_no) + 1);
		store_relaxed(&reclaim_before_ask->ask, 0);
		return;
	}

	if (strcmp(where, "collector-hold") != 0)
		return;
	head = shmt_ring_head(&seen_holds.v);
	if (head - seen_holds.head > seen_holds.step_max)
		seen_holds.step_max = head - seen_holds.head;
	seen_holds.head = head;
	seen_holds.holds++;
}

/* A ring of 1 << 18 records (blocks of 1024) and a drain session on it,
 * which makes producers hand their full blocks over. Its poll interval,
 * a minute, is also how long a thread's block that keeps moving keeps its
 * records while full blocks come: longer than any of these tests. */
static struct drain *drain_polled_on_new_ring(const char *ring, char out[256], uint64_t poll_ns)
{
	const struct shmtrace_ring_config c = { .capacity = 1 << 18 };
	struct drain_opts o = { .ring = ring, .output = out, .poll_ns = poll_ns };
	struct drain *d;

	snprintf(out, 256, "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	d = drain_new();
	assert_non_null(d);
	assert_int_equal(drain_open(d, &o), 0);
	return d;
}

static struct drain *drain_on_new_ring(const char *ring, char out[256])
{
	return drain_polled_on_new_ring(ring, out, 60000000000ull);
}

/* One pass of d over ring, each hold of the lock seen by note_hold():
 * returns what the pass copied. */
static long pass_seeing_holds(struct drain *d, const char *ring)
{
	char err[256];
	long got;

	memset(&seen_holds, 0, sizeof(seen_holds));
	assert_int_equal(shmt_view_open(ring, 0, &seen_holds.v, err, sizeof(err)), 0);
	seen_holds.head = shmt_ring_head(&seen_holds.v);
	shmt_test_hook = note_hold;
	got = drain_pass(d, false);
	shmt_test_hook = NULL;
	shmt_view_close(&seen_holds.v);
	print_message("%u holds, at most %llu records each\n", seen_holds.holds,
		      (unsigned long long)seen_holds.step_max);
	return got;
}

static void drain_end(struct drain *d, const char *ring, const char *out)
{
	assert_int_equal(drain_finish(d), 0);
	drain_free(d);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/*
 * The blocks producers hand over are moved into the ring a few at a
 * time: no hold of the lock moves more than HOLD_MOST records, and still
 * one pass moves all of them; the thread's partly filled block, first
 * seen while full blocks came, is copied by the next look at it, once it
 * has not moved (IDLE_EVERY_NS later: a rule of time, so time is let
 * pass); with nothing left to move, a pass takes no lock.
 */
static void test_each_hold_of_the_lock_moves_a_few_blocks(void **state)
{
	const char *ring = test_ring_name("holds");
	const uint64_t block = shmt_block_records_for(1 << 18, SHMT_RING_MINOR);
	const uint64_t n = 24 * block + 100;
	struct shmtrace_stats st;
	char out[256];
	struct drain *d = drain_on_new_ring(ring, out);
	shmtrace_t *t;

	(void)state;
	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(shmtrace_span(t, 1, 1, i, i + 1, 0), 0);
	/* nothing in the ring yet: the handed-over blocks count in head */
	assert_int_equal(shmtrace_stats(t, &st), 0);
	assert_int_equal(st.head, 24 * block);
	assert_int_equal(pass_seeing_holds(d, ring), 24 * block);
	assert_true(seen_holds.step_max <= HOLD_MOST);
	assert_true(seen_holds.holds >= 24 * block / HOLD_MOST);
	usleep(IDLE_EVERY_NS / 1000 + 1000);
	assert_int_equal(pass_seeing_holds(d, ring), 100);
	/* nothing staged, no block full: a pass takes no lock, whether a
	 * look is due or not */
	assert_int_equal(pass_seeing_holds(d, ring), 0);
	assert_int_equal(seen_holds.holds, 0);
	shmtrace_close(t);
	drain_end(d, ring, out);
}

struct idle_writer {
	const char *ring;
	uint64_t n;
	pthread_barrier_t *staged, *done;
};

/* Stages n records in its own block and keeps it until told. */
static void *stage_and_wait(void *arg)
{
	struct idle_writer *w = arg;
	shmtrace_t *t;

	assert_int_equal(shmtrace_open(w->ring, &t), 0);
	for (uint64_t i = 0; i < w->n; i++)
		assert_int_equal(shmtrace_span(t, 1, 1, i, i + 1, 0), 0);
	pthread_barrier_wait(w->staged);
	pthread_barrier_wait(w->done);
	shmtrace_close(t);
	return NULL;
}

/*
 * Records idle threads left in their blocks are moved a few blocks at a
 * time too: a hold moves at most HOLD_MOST records and the block that
 * crosses it, and one pass moves them all.
 */
static void test_idle_threads_blocks_are_moved_a_few_at_a_time(void **state)
{
	enum { THREADS = 8 };
	const char *ring = test_ring_name("idleholds");
	const uint64_t block = shmt_block_records_for(1 << 18, SHMT_RING_MINOR);
	struct idle_writer w[THREADS];
	pthread_barrier_t staged, done;
	pthread_t th[THREADS];
	char out[256];
	struct drain *d = drain_on_new_ring(ring, out);

	(void)state;
	pthread_barrier_init(&staged, NULL, THREADS + 1);
	pthread_barrier_init(&done, NULL, THREADS + 1);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct idle_writer){ ring, block - block / 8, &staged, &done };
		assert_int_equal(pthread_create(&th[i], NULL, stage_and_wait, &w[i]), 0);
	}
	pthread_barrier_wait(&staged);
	assert_int_equal(pass_seeing_holds(d, ring), THREADS * w[0].n);
	assert_true(seen_holds.step_max <= HOLD_MOST + block);
	assert_true(seen_holds.holds >= 2);
	pthread_barrier_wait(&done);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&staged);
	pthread_barrier_destroy(&done);
	drain_end(d, ring, out);
}

/* A thread of its own writing `block` spans each time it is told to go,
 * block + 1 the first time: a block handed over each time, and one record
 * in a block claimed then, until told to stop. */
struct block_feeder {
	const char *ring;
	uint64_t block;
	pthread_barrier_t go, fed;
	bool stop;
};

static void *feed_blocks(void *arg)
{
	struct block_feeder *f = arg;
	shmtrace_t *t;
	uint64_t n = f->block + 1;

	assert_int_equal(shmtrace_open(f->ring, &t), 0);
	for (;;) {
		pthread_barrier_wait(&f->go);
		if (f->stop)
			break;
		for (uint64_t i = 0; i < n; i++)
			assert_int_equal(shmtrace_span(t, 2, 2, i, i + 1, 0), 0);
		n = f->block;
		pthread_barrier_wait(&f->fed);
	}
	shmtrace_close(t);
	return NULL;
}

static void feeder_start(struct block_feeder *f, pthread_t *th)
{
	pthread_barrier_init(&f->go, NULL, 2);
	pthread_barrier_init(&f->fed, NULL, 2);
	assert_int_equal(pthread_create(th, NULL, feed_blocks, f), 0);
}

static void feeder_stop(struct block_feeder *f, pthread_t th)
{
	f->stop = true;
	pthread_barrier_wait(&f->go);
	pthread_join(th, NULL);
	pthread_barrier_destroy(&f->go);
	pthread_barrier_destroy(&f->fed);
}

/* A full block from the feeder, once the collector's next pass is due to
 * look at the owned blocks: while full blocks come, it looks once in
 * IDLE_EVERY_NS (a rule of time, so time is let pass). */
static void feed(struct block_feeder *f)
{
	usleep(IDLE_EVERY_NS / 1000 + 1000);
	pthread_barrier_wait(&f->go);
	pthread_barrier_wait(&f->fed);
}

static void spans(shmtrace_t *t, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(shmtrace_span(t, 1, 1, i, i + 1, 0), 0);
}

/* A thread of the caller's hands a block over and stages 10 records,
 * the feeder a block: the first pass moves both full blocks and leaves
 * the partly filled ones, first seen. Returns the caller's handle. */
static shmtrace_t *first_look(struct drain *d, struct block_feeder *f)
{
	shmtrace_t *t;

	assert_int_equal(shmtrace_open(f->ring, &t), 0);
	spans(t, f->block + 10);
	feed(f);
	assert_int_equal(pass_seeing_holds(d, f->ring), 2 * f->block);
	return t;
}

/*
 * While full blocks come (another thread hands one over before each
 * pass, and each pass looks at the owned blocks), a thread's partly
 * filled block is not copied under the lock while it keeps moving: it
 * will be handed over and read in place. It is first seen, then seen to
 * have moved, and copied by the first pass that finds it as it was.
 * Full blocks still come at a pass that finds none, while one came within
 * a poll interval: a block first seen at the last look is left then too,
 * though it would not be on a quiet ring (a producer flat out hands it
 * over a moment later).
 */
static void test_moving_block_copied_once_it_stops_while_full_blocks_come(void **state)
{
	const char *ring = test_ring_name("settle");
	const uint64_t block = shmt_block_records_for(1 << 18, SHMT_RING_MINOR);
	struct block_feeder f = { .ring = ring, .block = block };
	char out[256];
	struct drain *d = drain_on_new_ring(ring, out);
	pthread_t th;
	shmtrace_t *t;

	(void)state;
	feeder_start(&f, &th);
	t = first_look(d, &f);
	spans(t, 5);
	feed(&f);
	/* the feeder's full block (its next one first seen); ours moved */
	assert_int_equal(pass_seeing_holds(d, ring), block);
	feed(&f);
	/* ours as it was: copied */
	assert_int_equal(pass_seeing_holds(d, ring), block + 15);
	/* no full block at this look: ours, written to since its copy,
	 * first seen again, is left; the feeder's record, first seen at the
	 * last look and not moved since, copied */
	spans(t, 5);
	usleep(IDLE_EVERY_NS / 1000 + 1000);
	assert_int_equal(pass_seeing_holds(d, ring), 1);
	feeder_stop(&f, th);
	shmtrace_close(t);
	drain_end(d, ring, out);
}

/*
 * A ring where no block came full for a poll interval is quiet: a pass
 * copies every staged record, a moving block's too, where one within the
 * interval would have left it (first seen, or asked to be handed over).
 */
static void test_quiet_ring_pass_copies_every_staged_record(void **state)
{
	const char *ring = test_ring_name("quiet");
	const uint64_t block = shmt_block_records_for(1 << 18, SHMT_RING_MINOR);
	const uint64_t poll_ns = 20ull * 1000 * 1000;
	char out[256];
	struct drain *d = drain_polled_on_new_ring(ring, out, poll_ns);
	shmtrace_t *t;

	(void)state;
	assert_int_equal(shmtrace_open(ring, &t), 0);
	spans(t, block + 10);
	/* the full block moved; ours first seen, left */
	assert_int_equal(pass_seeing_holds(d, ring), block);
	spans(t, 5);
	usleep(poll_ns / 1000 + 1000);
	/* no block full for a poll interval: ours copied, moved or not */
	assert_int_equal(pass_seeing_holds(d, ring), 15);
	shmtrace_close(t);
	drain_end(d, ring, out);
}

/* A drain polled every poll_ns on a new ring, its feeder, and a handle
 * whose thread's partly filled block the first look saw (asking_begin()),
 * with a view of the ring. */
struct asking {
	struct block_feeder f;
	uint64_t poll_ns;
	char out[256];
	struct drain *d;
	struct shmt_view v;
	pthread_t th;
	shmtrace_t *t;
};

static void asking_begin(struct asking *a, const char *ring, uint64_t poll_ns)
{
	a->f = (struct block_feeder){ .ring = ring,
				      .block = shmt_block_records_for(1 << 18, SHMT_RING_MINOR) };
	a->poll_ns = poll_ns;
	a->d = drain_polled_on_new_ring(ring, a->out, poll_ns);
	feeder_start(&a->f, &a->th);
	a->t = first_look(a->d, &a->f);
	ring_view_rw(ring, &a->v);
}

static void asking_end(struct asking *a)
{
	shmt_view_close(&a->v);
	feeder_stop(&a->f, a->th);
	shmtrace_close(a->t);
	drain_end(a->d, a->f.ring, a->out);
}

/* A poll interval passes, the handle's thread writes 5 more into its
 * block, the feeder a full block: the pass moves the feeder's, and asks
 * for ours (still moving past its settle time) without copying it, for
 * the life it listed it in; with reclaimed, the block is claimed again
 * (as far as its claim number and ask word say) just before the ask.
 * Returns ours. */
static struct shmt_block *moved_past_settling(struct asking *a, bool reclaimed)
{
	struct shmt_block *b;
	uint64_t no;

	usleep(a->poll_ns / 1000 + 1000);	/* a rule of time */
	spans(a->t, 5);
	feed(&a->f);
	b = block_of_this_thread(&a->v);
	no = load_relaxed(&b->claim_no);
	reclaim_before_ask = reclaimed ? b : NULL;
	assert_int_equal(pass_seeing_holds(a->d, a->f.ring), a->f.block);
	reclaim_before_ask = NULL;
	assert_int_equal(load_relaxed(&b->claim_no), reclaimed ? no + 1 : no);
	assert_int_equal(load_relaxed(&b->ask), shmt_ask_tag(no));
	return b;
}

/*
 * The collector asks for the life it listed a block in: a block claimed
 * again between the look that listed it and the ask (its claim number
 * moved on) is asked with the tag of the life before, which its owner
 * clears at its next call without handing the block over.
 */
static void test_ask_names_the_life_listed(void **state)
{
	struct asking a;
	struct shmt_block *b;
	uint64_t no;

	(void)state;
	asking_begin(&a, test_ring_name("asklife"), 20 * 1000 * 1000);
	b = moved_past_settling(&a, true);
	no = load_relaxed(&b->claim_no) - 1;
	spans(a.t, 1);
	assert_int_equal(load_relaxed(&b->state), SHMT_BLOCK_OWNED);
	assert_int_equal(load_relaxed(&b->ask), 0);
	assert_int_equal(load_relaxed(&b->written) - load_relaxed(&b->taken), 16);
	store_relaxed(&b->claim_no, no);
	asking_end(&a);
}

/*
 * While full blocks come, a thread's partly filled block that keeps
 * moving a poll interval after the first look that left it is not
 * copied: its owner is asked to hand it over (ring format 2.1), and its
 * next call does, so that the pass after reads it in place with the full
 * ones. An owner that does not answer (a library before 2.1) and keeps
 * writing into it has it copied by that next pass: its records wait no
 * longer than that.
 */
static void test_moving_block_asked_a_poll_interval_after_first_left(void **state)
{
	struct asking a;
	struct shmt_block *b;

	(void)state;
	asking_begin(&a, test_ring_name("settleby"), 20 * 1000 * 1000);
	/* the feeder's full block; ours asked for, not copied */
	b = moved_past_settling(&a, false);
	/* our next call hands its 15 records over, and goes on in another */
	spans(a.t, 1);
	assert_int_equal(SHMT_BLOCK_KIND(load_relaxed(&b->state)), SHMT_BLOCK_FULL);
	feed(&a.f);
	assert_int_equal(pass_seeing_holds(a.d, a.f.ring), a.f.block + 15);
	/* the next block asked in its turn, its owner deaf: copied */
	b = moved_past_settling(&a, false);
	store_relaxed(&b->ask, 0);
	spans(a.t, 5);
	feed(&a.f);
	assert_int_equal(pass_seeing_holds(a.d, a.f.ring), a.f.block + 11);
	asking_end(&a);
}

/*
 * While full blocks come, a dead thread's partly filled block is not
 * left for its owner to hand over: the first look that finds the owner
 * dead copies it.
 */
static void test_dead_threads_block_copied_at_once_while_full_blocks_come(void **state)
{
	const char *ring = test_ring_name("settledead");
	const uint64_t block = shmt_block_records_for(1 << 18, SHMT_RING_MINOR);
	struct block_feeder f = { .ring = ring, .block = block };
	char out[256];
	struct drain *d = drain_on_new_ring(ring, out);
	pthread_t th;
	int status;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		shmtrace_t *t;

		/* a full block handed over, 10 records left in the next */
		if (shmtrace_open(ring, &t) < 0)
			_exit(1);
		for (uint64_t i = 0; i < block + 10; i++)
			if (shmtrace_span(t, 1, 1, i, i + 1, 0) < 0)
				_exit(2);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	feeder_start(&f, &th);
	feed(&f);
	/* both full blocks, and the dead thread's 10 (the feeder's one
	 * record first seen, left) */
	assert_int_equal(pass_seeing_holds(d, ring), 2 * block + 10);
	feeder_stop(&f, th);
	drain_end(d, ring, out);
}

/*
 * A collector whose pass found a block's worth of records or more comes
 * back after a millisecond, not after its poll interval (a minute here):
 * producers wake it once a quarter of the blocks are handed over; a few
 * blocks more after that, too few to wake it, are drained all the same, in
 * well under the minute.
 */
static void test_busy_collector_comes_back_before_its_poll_interval(void **state)
{
	const char *ring = test_ring_name("busynap");
	const struct shmtrace_ring_config c = { .capacity = 16384, .blocks = 64 };
	const uint64_t block = shmt_block_records_for(c.capacity, SHMT_RING_MINOR);
	const char *const minute[] = { "--poll-interval", "60000", NULL };
	/* the wake-up at a quarter of the blocks and a part; then a few */
	const uint64_t n = (c.blocks / 4 + 1) * block + block / 2, more = 4 * block;
	const char *out = "/tmp/shmt-busynap.cap";
	uint64_t tail;
	shmtrace_t *t;
	pid_t pid;

	(void)state;
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	pid = start_collector_args(ring, out, 0, NULL, minute);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(shmtrace_span(t, 1, 1, i, i + 1, 0), 0);
	tail = wait_tail(t, n);
	if (tail == n) {
		for (uint64_t i = n; i < n + more; i++)
			assert_int_equal(shmtrace_span(t, 1, 1, i, i + 1, 0), 0);
		tail = wait_tail(t, n + more) - more;
	}
	/* closed and stopped before the verdict, so that a failure leaves
	 * no collector behind (with no writer left it does not linger) */
	shmtrace_close(t);
	assert_clean_exit(stop(pid, SIGTERM));
	assert_int_equal(tail, n);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

#if !SHMT_TSAN	/* under TSan the collector's nap is a timer, not the futex */
/*
 * The ring's words that say work waits for the collector (full_blocks,
 * tail) are any producer's to write. Forged to say a quarter of the blocks
 * wait and the tail is past the head, they made every nap return at once:
 * the collector spun, at nice -10, for as long as it ran. It now believes
 * them only after a pass that found work: woken, it finds none, and waits
 * in its nap again (a wake-up of the futex finds it there).
 */
static void test_forged_words_saying_work_waits_do_not_keep_the_collector_awake(void **state)
{
	const char *ring = test_ring_name("forgedwake");
	const char *const minute[] = { "--poll-interval", "60000", NULL };
	const char *out = "/tmp/shmt-forgedwake.cap";
	struct shmt_view v;
	long woken = 0;
	char err[256];
	pid_t pid;

	(void)state;
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	pid = start_collector_args(ring, out, 0, NULL, minute);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	store_relaxed(&v.h->full_blocks.v, v.nblocks);
	store_relaxed(&v.h->tail.v, 1ull << 63);
	/* the first wake-up makes it look at the words; each later one that
	 * finds it waiting says it napped after a pass that found nothing */
	for (int i = 0; i < 10000 && woken < 2; i++) {
		woken += syscall(SYS_futex, (uint32_t *)&v.h->wake_seq.v, FUTEX_WAKE, 1, NULL, NULL, 0);
		usleep(1000);	/* a poll: the nap it waits in signals nothing */
	}
	store_relaxed(&v.h->full_blocks.v, 0);
	store_relaxed(&v.h->tail.v, 0);
	shmt_view_close(&v);
	assert_clean_exit(stop(pid, SIGTERM));
	assert_int_equal(woken, 2);
	unlink(out);
	shmtrace_ring_unlink(ring);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_record_exactly_once),
		cmocka_unit_test(test_torn_slots_skipped_and_counted),
		cmocka_unit_test(test_lock_held_by_unseen_dead_owner_does_not_hang),
		cmocka_unit_test(test_max_size_rotates_into_whole_parts),
		cmocka_unit_test(test_threads_closing_their_handles_lose_no_record),
		cmocka_unit_test(test_overwrite_mode_accounts_every_record_under_load),
		cmocka_unit_test(test_two_sessions_in_one_process_keep_their_strings),
		cmocka_unit_test(test_drain_behind_until_a_pass_copies_all_there_is),
		cmocka_unit_test(test_stop_ends_when_a_writer_puts_head_back),
		cmocka_unit_test(test_tables_past_max_size_make_no_part_of_their_own),
		cmocka_unit_test(test_ring_truncated_at_open_or_exit_is_no_sigbus),
		cmocka_unit_test(test_drain_yields_a_millisecond_after_its_nap_under_a_sixteenth),
		cmocka_unit_test(test_busy_collector_comes_back_before_its_poll_interval),
		cmocka_unit_test(test_each_hold_of_the_lock_moves_a_few_blocks),
		cmocka_unit_test(test_idle_threads_blocks_are_moved_a_few_at_a_time),
		cmocka_unit_test(test_moving_block_copied_once_it_stops_while_full_blocks_come),
		cmocka_unit_test(test_quiet_ring_pass_copies_every_staged_record),
		cmocka_unit_test(test_moving_block_asked_a_poll_interval_after_first_left),
		cmocka_unit_test(test_ask_names_the_life_listed),
		cmocka_unit_test(test_dead_threads_block_copied_at_once_while_full_blocks_come),
#if !SHMT_TSAN
		cmocka_unit_test(test_forged_words_saying_work_waits_do_not_keep_the_collector_awake),
#endif
	};

	if (collector_bin_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
