/* SPDX-License-Identifier: MIT */
/*
 * test_collector.c - shmtrace-collector end to end: producers and the
 * collector at once, the collector SIGKILLed and restarted under load, a
 * file-size limit, bad command lines, two sessions in one process.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <pthread.h>

#include "capture.h"
#include "drain.h"
#include "helpers.h"
#include "source.h"

static char g_bin[4096];

static void fill(uint64_t i, uint64_t *ts, uint64_t *dur, uint64_t *flow)
{
	*ts = i + 1000;
	*dur = i ^ 0x3333;
	*flow = i * 7 + 1;
}

/* Starts the collector with up to four more arguments (NULL-terminated),
 * its stderr to errpath if not NULL, and waits, on a pipe, until it says
 * it drains. */
static pid_t start_collector_args(const char *ring, const char *out, rlim_t fsize,
				  const char *errpath, const char *const *extra)
{
	const char *argv[16] = { "shmtrace-collector", "--ring", ring, "--output", out,
				 "--ready-fd", NULL, "--poll-interval", "5" };
	int p[2], n = 9;
	char buf[16], fd[16];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		argv[6] = fd;
		for (int i = 0; extra && extra[i] && n < 15; i++)
			argv[n++] = extra[i];
		if (fsize) {
			struct rlimit rl = { fsize, fsize };

			setrlimit(RLIMIT_FSIZE, &rl);
		}
		if (errpath) {
			int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);

			if (e < 0 || dup2(e, 2) < 0)
				_exit(126);
		}
		execv(g_bin, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 6);
	close(p[0]);
	return pid;
}

/* Starts the collector and waits, on a pipe, until it says it drains. */
static pid_t start_collector(const char *ring, const char *out, const char *extra, rlim_t fsize)
{
	const char *const more[] = { extra, NULL };

	return start_collector_args(ring, out, fsize, NULL, more);
}

static int stop(pid_t pid, int sig)
{
	int status;

	kill(pid, sig);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void produce(const char *ring, uint64_t n)
{
	shmtrace_t *t;
	uint64_t ts, dur, flow;

	if (shmtrace_open(ring, &t) < 0)
		_exit(3);
	for (uint64_t i = 0; i < n; i++) {
		fill(i, &ts, &dur, &flow);
		if (shmtrace_span(t, 2, 1, ts, ts + dur, flow) < 0 && i == 0)
			_exit(4);
	}
	shmtrace_close(t);
	_exit(0);
}

struct tally {
	uint32_t pids[8];
	int npids;
	uint64_t per;
	uint8_t *seen;		/* [producer][i] */
	uint8_t *seq_seen;	/* by ring sequence */
	uint64_t max_seq;
	uint64_t records, dup_seq, bad;
	uint64_t dropped;	/* dropped, lock_dropped, orphaned: the latest loss frame */
	uint64_t torn;		/* the latest loss frame */
	int clean_ends, cut_ends;
};

/* Reads a capture; records a sequence already seen are dropped, as
 * the exporter does after a collector restart. */
static void read_capture(const char *path, struct tally *t)
{
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	char err[256];
	int ret;

	ret = shmt_cap_open(path, &r, err, sizeof(err));
	if (ret == -EBADMSG) {
		/* killed before the header reached the file: nothing in it */
		t->cut_ends++;
		return;
	}
	assert_int_equal(ret, 0);
	while ((ret = shmt_cap_next(r, &f, err, sizeof(err))) == 1) {
		/* records the producers did not get into the ring, each
		 * counted once under its cause (a slow lock under TSan) */
		if (f.type == SHMT_CAP_LOSS &&
		    f.loss.dropped + f.loss.lock_dropped + f.loss.orphaned > t->dropped)
			t->dropped = f.loss.dropped + f.loss.lock_dropped + f.loss.orphaned;
		if (f.type == SHMT_CAP_LOSS && f.loss.torn > t->torn)
			t->torn = f.loss.torn;
		if (f.type != SHMT_CAP_RECORDS)
			continue;
		for (size_t i = 0; i < f.records.n; i++) {
			const struct shmt_record *rec = &f.records.v[i];
			uint64_t seq = f.records.first_seq + i, ts, dur, flow;
			int p;

			assert_true(seq < t->max_seq);
			if (t->seq_seen[seq]++) {
				t->dup_seq++;
				continue;
			}
			fill(rec->ts - 1000, &ts, &dur, &flow);
			if (rec->dur != dur || rec->flow != flow || rec->ts - 1000 >= t->per) {
				t->bad++;
				continue;
			}
			for (p = 0; p < t->npids && t->pids[p] != rec->pid; p++)
				;
			assert_true(p < t->npids);
			t->seen[(uint64_t)p * t->per + rec->ts - 1000]++;
			t->records++;
		}
	}
	if (ret == 0)
		t->clean_ends++;
	else
		t->cut_ends++;
	assert_true(ret == 0 || ret == -EPIPE);
	shmt_cap_close(r);
}

static void tally_free(struct tally *t)
{
	free(t->seen);
	free(t->seq_seen);
}

static void check_exactly_once(struct tally *t)
{
	uint64_t missing = 0;

	for (uint64_t i = 0; i < (uint64_t)t->npids * t->per; i++) {
		assert_true(t->seen[i] <= 1);
		missing += t->seen[i] == 0;
	}
	assert_int_equal(t->bad, 0);
	assert_int_equal(missing, t->dropped);
}

/* Room to tally n producers of per records each. */
static void tally_init(struct tally *t, int n, uint64_t per)
{
	t->npids = n;
	t->per = per;
	t->seen = calloc((size_t)n * per, 1);
	t->max_seq = (uint64_t)n * per;
	t->seq_seen = calloc(t->max_seq, 1);
	assert_true(t->seen && t->seq_seen);
}

static void run_producers(const char *ring, struct tally *t, int n, uint64_t per)
{
	tally_init(t, n, per);
	for (int p = 0; p < n; p++) {
		pid_t pid = fork();

		if (pid == 0)
			produce(ring, per);
		t->pids[p] = (uint32_t)pid;
	}
}

static void wait_producers(struct tally *t)
{
	for (int p = 0; p < t->npids; p++) {
		int status;

		assert_int_equal(waitpid((pid_t)t->pids[p], &status, 0), (pid_t)t->pids[p]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
}

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

/* kill -9 the collector under load, restart it, again and again: the
 * union of the captures holds every record once (duplicates only by
 * sequence, which readers drop). */
static void test_collector_killed_and_restarted(void **state)
{
	const char *ring = test_ring_name("kill");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	char out[16][256];
	struct tally t = { 0 };
	int status, k;
	pid_t col;

	(void)state;
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	snprintf(out[0], sizeof(out[0]), "/tmp/%s.0.cap", ring);
	col = start_collector(ring, out[0], NULL, 0);
	run_producers(ring, &t, 2, 400000);
	for (k = 1; k < 8; k++) {
		struct shmtrace_stats st;
		shmtrace_t *h;
		uint64_t tail0;

		/* let it drain something, then kill it mid-flight; bounded by
		 * a count, not a clock, in case the producers are done */
		assert_int_equal(shmtrace_open(ring, &h), 0);
		shmtrace_stats(h, &st);
		tail0 = st.tail;
		for (int spins = 0; spins < 1000000; spins++) {
			shmtrace_stats(h, &st);
			if (st.tail > tail0 + 1000)
				break;
			sched_yield();
		}
		shmtrace_close(h);
		status = stop(col, SIGKILL);
		assert_true(WIFSIGNALED(status));
		snprintf(out[k], sizeof(out[k]), "/tmp/%s.%d.cap", ring, k);
		col = start_collector(ring, out[k], NULL, 0);
	}
	wait_producers(&t);
	status = stop(col, SIGTERM);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int i = 0; i < k; i++) {
		read_capture(out[i], &t);
		unlink(out[i]);
	}
	print_message("captured %llu over %d collectors, %llu duplicates dropped, %llu dropped\n",
		      (unsigned long long)t.records, k, (unsigned long long)t.dup_seq,
		      (unsigned long long)t.dropped);
	assert_int_equal(t.clean_ends, 1);
	check_exactly_once(&t);
	figure_acct("collector SIGKILLed mid-frame, restarted", (uint64_t)k - 1, 800000, t.records,
	       t.dropped, 0, 800000 - t.records - t.dropped, "duplicates dropped by sequence");
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/* A file-size limit: a clear error, exit 1, the file readable, and what
 * was not written is still in the ring. */
static void test_file_size_limit(void **state)
{
	const char *ring = test_ring_name("fsz");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	char out[256];
	struct tally t = { 0 };
	struct shmtrace_stats st;
	shmtrace_t *h;
	int status;
	pid_t col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	/* 60000 records take over 300 KB even packed (5 bytes at least) */
	col = start_collector(ring, out, NULL, 256 * 1024);
	run_producers(ring, &t, 1, 60000);
	wait_producers(&t);
	assert_int_equal(waitpid(col, &status, 0), col);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	read_capture(out, &t);
	assert_true(t.records > 0);
	assert_int_equal(t.cut_ends, 1);
	/* the tail never passed what reached the file */
	assert_int_equal(shmtrace_open(ring, &h), 0);
	shmtrace_stats(h, &st);
	assert_true(st.tail <= t.records);
	assert_true(st.head - st.tail + t.records >= 60000 - st.dropped);
	shmtrace_close(h);
	unlink(out);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/* A slot in the published range that is not a finished record (forged,
 * or torn): skipped and counted, the records around it kept. */
static void test_torn_slot_skipped(void **state)
{
	const char *ring = test_ring_name("torn");
	struct shmtrace_ring_config c = { .capacity = 1 << 12 };
	struct tally t = { 0 };
	struct shmt_view v;
	char out[256], err[256];
	int status;
	pid_t col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	run_producers(ring, &t, 1, 1000);
	wait_producers(&t);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	assert_int_equal(shmt_ring_head(&v), 1000);
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
static void test_lock_held_by_unseen_dead_owner(void **state)
{
	const char *ring = test_ring_name("wedged");
	struct tally t = { 0 };
	char out[256];
	int status;
	pid_t col, pid;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	run_producers(ring, &t, 1, 1000);
	wait_producers(&t);
	pid = fork();
	if (pid == 0) {
		struct shmt_view v;
		char err[256];

		if (shmt_view_open(ring, SHMT_OPEN_WRITE, &v, err, sizeof(err)) < 0 ||
		    shmt_lock(&v, 0) < 0)
			_exit(3);
		munmap(v.base, v.size);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
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
static void test_rotation(void **state)
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

/* A full disk (a 128 KiB tmpfs: 60000 records take over 300 KB packed): a clear error, exit 1, the capture
 * readable up to its last whole frame, the rest still in the ring. */
static void test_full_disk(void **state)
{
	const char *ring = test_ring_name("enospc");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	char dir[] = "/tmp/shmt-enospc-XXXXXX", out[300];
	struct tally t = { 0 };
	struct shmtrace_stats st;
	shmtrace_t *h;
	int status;
	pid_t col;

	(void)state;
	assert_non_null(mkdtemp(dir));
	if (geteuid() != 0 || mount("tmpfs", dir, "tmpfs", 0, "size=128k") < 0) {
		rmdir(dir);
		print_message("cannot mount a small tmpfs here; skipped\n");
		skip();
	}
	snprintf(out, sizeof(out), "%s/full.cap", dir);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, out, NULL, 0);
	run_producers(ring, &t, 1, 60000);
	wait_producers(&t);
	assert_int_equal(waitpid(col, &status, 0), col);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	read_capture(out, &t);
	assert_true(t.records > 0);
	assert_int_equal(t.cut_ends, 1);
	assert_int_equal(shmtrace_open(ring, &h), 0);
	shmtrace_stats(h, &st);
	assert_true(st.tail <= t.records);
	shmtrace_close(h);
	figure("ENOSPC (128 KiB tmpfs)", 1, 60000, t.records, 0, 0, 0,
	       "exit 1, file readable, the rest kept in the ring");
	umount(dir);
	rmdir(dir);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/* SIGTERM while producers write: every record published before the signal
 * is in the capture; then SIGINT + SIGTERM together: the second signal
 * exits at once and the file still reads up to its last whole frame. */
static void test_sigterm_under_load(void **state)
{
	const char *ring = test_ring_name("term");
	struct shmtrace_ring_config c = { .capacity = 1 << 18 };
	char out[256], out2[256];
	struct tally t = { 0 };
	struct shmtrace_stats st;
	shmtrace_t *h;
	uint64_t before;
	int status;
	pid_t col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	snprintf(out2, sizeof(out2), "/tmp/%s.2.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, out, NULL, 0);
	run_producers(ring, &t, 2, 1000000);
	assert_int_equal(shmtrace_open(ring, &h), 0);
	for (int spins = 0; spins < 1000000; spins++) {
		shmtrace_stats(h, &st);
		if (st.head > 100000)
			break;
		sched_yield();
	}
	shmtrace_stats(h, &st);
	before = st.head;
	status = stop(col, SIGTERM);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	read_capture(out, &t);
	for (uint64_t s = 0; s < before; s++)
		assert_true(t.seq_seen[s]);
	figure_acct("SIGTERM under load", 1, before, before, 0, 0, 0,
	       "all published before the signal captured; 2nd signal exits at once");
	print_message("published before SIGTERM: %llu, all in the capture\n",
		      (unsigned long long)before);

	col = start_collector(ring, out2, NULL, 0);
	kill(col, SIGINT);
	kill(col, SIGTERM);
	assert_int_equal(waitpid(col, &status, 0), col);
	assert_true(WIFEXITED(status));
	assert_true(WEXITSTATUS(status) == 130 || WEXITSTATUS(status) == 0);
	read_capture(out2, &t);	/* asserts: clean, or cut at a frame boundary */
	wait_producers(&t);
	shmtrace_close(h);
	unlink(out);
	unlink(out2);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/* Runs the collector with args; returns its exit code and stderr's first line. */
static int run_cli(char *line, size_t len, const char *a1, const char *a2, const char *a3,
		   const char *a4, const char *a5)
{
	int p[2], status;
	pid_t pid;
	ssize_t n;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 2);
		close(p[0]);
		execl(g_bin, "shmtrace-collector", a1, a2, a3, a4, a5, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	/* until EOF: stderr is unbuffered, a message may come in pieces */
	for (size_t got = 0;; got += (size_t)n) {
		n = read(p[0], line + got, len - 1 - got);
		if (n <= 0) {
			line[got] = 0;
			break;
		}
	}
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* A failing fsync is final: the collector reports it and exits 1 (fsync
 * of /dev/null fails with EINVAL after every write succeeded). */
static void test_fsync_fails(void **state)
{
	const char *ring = test_ring_name("fsync");
	char line[1024];

	(void)state;
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	{
		int p[2], status;
		char fd[16], buf[8];
		pid_t pid;
		size_t got = 0;
		ssize_t n;
		int e[2];

		assert_int_equal(pipe(p), 0);
		assert_int_equal(pipe(e), 0);
		pid = fork();
		if (pid == 0) {
			close(p[0]);
			close(e[0]);
			dup2(e[1], 2);
			snprintf(fd, sizeof(fd), "%d", p[1]);
			execl(g_bin, "shmtrace-collector", "--ring", ring, "--output", "/dev/null",
			      "--ready-fd", fd, (char *)NULL);
			_exit(127);
		}
		close(p[1]);
		close(e[1]);
		assert_int_equal(read(p[0], buf, sizeof(buf)), 6);
		close(p[0]);
		kill(pid, SIGTERM);
		while ((n = read(e[0], line + got, sizeof(line) - 1 - got)) > 0)
			got += (size_t)n;
		line[got] = 0;
		close(e[0]);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 1);
		assert_non_null(strstr(line, "fsync of '/dev/null'"));
	}
	figure("fsync fails (EINVAL on /dev/null)", 1, 0, 0, 0, 0, 0, "reported, exit 1, never retried");
	shmtrace_ring_unlink(ring);
}

/*
 * Issue 10.1: threads of one process that each open their own handle and
 * close it at random moments while the others still write. Before the fix
 * shmtrace_close() freed every block of the process: records were lost,
 * duplicated, and `dropped` went below zero.
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

static void test_thread_handles_open_and_close(void **state)
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
 * Issue 10.2: in overwrite mode, exported + dropped + overwritten + torn
 * equals what was written, exactly, with several producers, the collector
 * racing the head, and a collector SIGKILLed and restarted in the middle.
 * Before the fix producers counted every slot the head passed over, read
 * or not: more losses than records.
 */
static void test_overwrite_accounting_under_load(void **state)
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
	sum = cc.n + src.loss.dropped + src.loss.overwritten + src.loss.torn;
	print_message("overwrite: exported %llu + dropped %llu + overwritten %llu + torn %llu = "
		      "%llu of %llu written\n", (unsigned long long)cc.n,
		      (unsigned long long)src.loss.dropped, (unsigned long long)src.loss.overwritten,
		      (unsigned long long)src.loss.torn, (unsigned long long)sum,
		      (unsigned long long)(nproc * per));
	assert_true(src.loss.overwritten > 0);
	assert_int_equal(src.loss.unaccounted, 0);
	assert_int_equal(sum, nproc * per);
	figure_acct("overwrite mode, collector racing the head, SIGKILLed once", 1, nproc * per, cc.n,
	       src.loss.dropped + src.loss.overwritten + src.loss.torn, 0,
	       nproc * per - sum, "exported + dropped + overwritten + torn = written");
	source_close(&src);
	for (int i = 0; i < 2; i++)
		unlink(out[i]);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/* Issue 10.5: a call whose flush found the ring full says so. */
static void test_span_returns_enospc(void **state)
{
	const char *ring = test_ring_name("nospc");
	struct shmtrace_ring_config c = { .capacity = 1024 };
	struct shmtrace_stats st;
	uint64_t enospc = 0, ok = 0;
	shmtrace_t *t;

	(void)state;
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (uint64_t i = 0; i < 100000; i++) {
		int ret = shmtrace_span(t, 1, 1, i, i + 1, 0);

		if (ret == -ENOSPC)
			enospc++;
		else if (ret == 0)
			ok++;
	}
	assert_int_equal(enospc + ok, 100000);
	assert_int_equal(shmtrace_flush(t), -ENOSPC);	/* its last 32 do not fit */
	assert_int_equal(shmtrace_stats(t, &st), 0);
	/* one -ENOSPC per flush that dropped: a thread flushes once half its
	 * block (32 of 64 in a ring of 1024) is staged; the last 32 were
	 * dropped by shmtrace_flush() above, not by a span call */
	assert_int_equal(st.dropped, 100000 - 1024);
	assert_int_equal(enospc, (100000 - 1024 - 32) / (shmt_block_records_for(1024) / 2));
	shmtrace_close(t);
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
static void test_two_sessions_in_one_process(void **state)
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

static void test_bad_command_lines(void **state)
{
	const char *ring = test_ring_name("cli");
	char line[1024];
	uint16_t major = 99;
	char path[256];
	int fd;

	(void)state;
	assert_int_equal(run_cli(line, sizeof(line), "--bogus", NULL, NULL, NULL, NULL), 2);
	assert_non_null(strstr(line, "--help"));
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, NULL, NULL, NULL), 2);
	assert_non_null(strstr(line, "--output"));
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "--output", "/tmp/x.cap",
				 "--capacity"), 2);
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/tmp/x.cap", NULL), 1);
	assert_non_null(strstr(line, "no ring named"));
	/* a ring of another version */
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &major, 2, offsetof(struct shmt_header, major)), 2);
	assert_int_equal(pwrite(fd, &major, 2, offsetof(struct shmt_header, compat)), 2);
	close(fd);
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/tmp/x.cap", NULL), 1);
	assert_non_null(strstr(line, "version"));
	shmtrace_ring_unlink(ring);
	/* an output that cannot be written */
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/nonexistent/dir/x.cap",
				 NULL), 1);
	assert_non_null(strstr(line, "cannot write"));
	shmtrace_ring_unlink(ring);
}

/*
 * The ring's lifecycle. Producers that write in phases the test steps
 * through: in phase k each writes records [k*per/n, (k+1)*per/n) and says
 * so in done[]; t is an inherited handle, or NULL to open one.
 */
struct phases {
	uint32_t phase;		/* phases begun */
	uint32_t done[8];	/* phases each producer has finished */
};

static void produce_phases(shmtrace_t *t, const char *ring, struct phases *ph, int me,
			   uint64_t per, uint32_t n)
{
	uint64_t ts, dur, flow;

	if (!t && shmtrace_open(ring, &t) < 0)
		_exit(3);
	for (uint32_t k = 0; k < n; k++) {
		while (__atomic_load_n(&ph->phase, __ATOMIC_ACQUIRE) <= k)
			sched_yield();
		for (uint64_t i = k * per / n; i < (k + 1) * per / n; i++) {
			int ret;

			fill(i, &ts, &dur, &flow);
			ret = shmtrace_span(t, 2, 1, ts, ts + dur, flow);
			/* -ETIMEDOUT, -ENOSPC: dropped and counted (a lock held
			 * long under ThreadSanitizer) */
			if (ret < 0 && ret != -ETIMEDOUT && ret != -ENOSPC)
				_exit(4);
		}
		__atomic_store_n(&ph->done[me], k + 1, __ATOMIC_RELEASE);
	}
	shmtrace_close(t);
	_exit(0);
}

/* Waits until every producer of t finished phase k; one that died first
 * fails the test rather than hang it. */
static void wait_phase(const struct phases *ph, const struct tally *t, uint32_t k)
{
	for (int p = 0; p < t->npids; p++)
		while (__atomic_load_n(&ph->done[p], __ATOMIC_ACQUIRE) <= k) {
			int status;

			assert_int_equal(waitpid((pid_t)t->pids[p], &status, WNOHANG), 0);
			sched_yield();
		}
}

static void assert_clean_exit(int status)
{
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/*
 * A collector stopped and started again with the same command while
 * producers write, four times: the new one adopts the ring the old one
 * left, so every record is in one of the captures exactly once, none
 * dropped, from the producers that opened the ring and from one writing
 * through a handle it inherited across fork() and never opened itself.
 */
static void test_restart_adopts_ring(void **state)
{
	enum { NPROD = 4, PHASES = 4 };
	const uint64_t per = 400000;	/* all of them fit the ring: no drop is right */
	const char *ring = test_ring_name("restart");
	const char *const create[] = { "--create", "--capacity", "2097152", "--linger", "0", NULL };
	struct phases *ph = mmap(NULL, sizeof(*ph), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char out[PHASES + 1][256];
	struct tally t = { 0 };
	shmtrace_t *inherited;
	uint64_t dev, ino;
	pid_t col;

	(void)state;
	assert_true(ph != MAP_FAILED);
	for (int k = 0; k <= PHASES; k++)
		snprintf(out[k], sizeof(out[k]), "/tmp/%s.%d.cap", ring, k);
	col = start_collector_args(ring, out[0], 0, NULL, create);
	tally_init(&t, NPROD, per);
	assert_int_equal(shmtrace_open(ring, &inherited), 0);
	for (int p = 0; p < NPROD; p++) {
		pid_t pid = fork();

		if (pid == 0)
			produce_phases(p == NPROD - 1 ? inherited : NULL, ring, ph, p, per, PHASES);
		t.pids[p] = (uint32_t)pid;
	}
	shmtrace_close(inherited);
	for (uint32_t k = 0; k < PHASES; k++) {
		__atomic_store_n(&ph->phase, k + 1, __ATOMIC_RELEASE);
		/* while they write */
		assert_clean_exit(stop(col, SIGTERM));
		col = start_collector_args(ring, out[k + 1], 0, NULL, create);
		wait_phase(ph, &t, k);
	}
	wait_producers(&t);
	assert_clean_exit(stop(col, SIGTERM));
	/* nobody attached at the last stop: the ring went with its collector */
	assert_int_equal(shmt_ring_identity(ring, &dev, &ino), -ENOENT);
	for (int k = 0; k <= PHASES; k++) {
		read_capture(out[k], &t);
		unlink(out[k]);
	}
	check_exactly_once(&t);
	assert_int_equal(t.records + t.dropped, NPROD * per);
#if !SHMT_TSAN	/* where a lock can be held long enough to time out */
	assert_int_equal(t.dropped, 0);
#endif
	figure_acct("collector restarted under load (4 times; a forked handle)", PHASES,
		    NPROD * per, t.records, t.dropped, 0, NPROD * per - t.records - t.dropped,
		    "--create adopts the ring the last collector left");
	tally_free(&t);
	munmap(ph, sizeof(*ph));
}

/* A producer that writes first records, says so on ready, then waits for
 * SIGTERM (or for go to close, go >= 0) and writes the rest on its way
 * out; its records are those of a tally of one producer of n. */
static void app_with_shutdown(const char *ring, int ready, int go, uint64_t first, uint64_t n)
{
	uint64_t ts, dur, flow;
	shmtrace_t *h;
	sigset_t ss;
	char c;
	int sig;

	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	if (shmtrace_open(ring, &h) < 0)
		_exit(3);
	for (uint64_t i = 0; i < n; i++) {
		if (i == first) {
			if (write(ready, "r", 1) != 1)
				_exit(5);
			if (go >= 0 ? read(go, &c, 1) < 0 : sigwait(&ss, &sig) != 0)
				_exit(6);
		}
		fill(i, &ts, &dur, &flow);
		if (shmtrace_span(h, 2, 1, ts, ts + dur, flow) < 0)
			_exit(4);
	}
	shmtrace_close(h);
	_exit(0);
}

/* Starts app_with_shutdown() and waits until it has written its first
 * records; *go (if not NULL) is the pipe end whose closing releases it. */
static pid_t start_app(const char *ring, uint64_t first, uint64_t n, int *go)
{
	int ready[2], g[2] = { -1, -1 };
	char c;
	pid_t pid;

	assert_int_equal(pipe(ready), 0);
	if (go)
		assert_int_equal(pipe(g), 0);
	pid = fork();
	if (pid == 0) {
		close(ready[0]);
		if (go)
			close(g[1]);
		app_with_shutdown(ring, ready[1], g[0], first, n);
	}
	close(ready[1]);
	if (go) {
		close(g[0]);
		*go = g[1];
	}
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	return pid;
}

/* SIGTERM to the collector and the app at once, as a terminal's Ctrl-C to
 * their process group: what the app records on its way out after the
 * signal is in the capture, all of it. */
static void test_stop_while_app_runs(void **state)
{
	const char *ring = test_ring_name("stopapp");
	const char *const create[] = { "--create", NULL };
	struct tally t = { 0 };
	char out[256];
	pid_t col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	col = start_collector_args(ring, out, 0, NULL, create);
	tally_init(&t, 1, 300);
	t.pids[0] = (uint32_t)start_app(ring, 100, 300, NULL);
	kill(col, SIGTERM);
	kill((pid_t)t.pids[0], SIGTERM);
	assert_clean_exit(stop(col, 0));
	wait_producers(&t);
	read_capture(out, &t);
	check_exactly_once(&t);
	assert_int_equal(t.records, 300);
	figure_acct("collector stopped while the app records its shutdown", 1, 300, t.records,
		    t.dropped, 0, 300 - t.records - t.dropped,
		    "it drains on while producers are attached (--linger)");
	unlink(out);
	tally_free(&t);
}

/*
 * The same stop signal twice at once (GNU timeout signals the collector,
 * then its process group) is one stop, not an exit: the collector drains
 * on and ends the capture cleanly. A second signal after the repeat
 * window (one second) stops it at once, and stderr says what stays in
 * the ring and how to export it; the ring stays.
 */
static void test_second_signal(void **state)
{
	const char *ring = test_ring_name("sig2");
	const char *const create[] = { "--create", NULL };
	struct tally t = { 0 };
	char out[256], err[256], *said;
	uint64_t dev, ino;
	int go, status;
	pid_t col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	snprintf(err, sizeof(err), "/tmp/%s.err", ring);
	col = start_collector_args(ring, out, 0, err, create);
	tally_init(&t, 1, 20);
	t.pids[0] = (uint32_t)start_app(ring, 10, 20, &go);
	kill(col, SIGTERM);
	kill(col, SIGTERM);
	close(go);	/* the app writes its last ten and leaves */
	wait_producers(&t);
	assert_clean_exit(stop(col, 0));
	read_capture(out, &t);
	assert_int_equal(t.clean_ends, 1);
	check_exactly_once(&t);
	assert_int_equal(t.records, 20);
	figure_acct("the same stop signal twice (GNU timeout)", 2, 20, t.records, t.dropped, 0,
		    20 - t.records - t.dropped, "one stop: drained on, capture ended cleanly");
	tally_free(&t);
	unlink(out);
#if !SHMT_TSAN	/* under TSan the collector polls its stop signals: no forced exit */
	{
		const char *const keep[] = { "--create", "--linger", "60", NULL };
		struct timespec window = { 1, 200 * 1000 * 1000 };
		char want[640];
		pid_t app;

		col = start_collector_args(ring, out, 0, err, keep);
		app = start_app(ring, 10, 20, &go);
		kill(col, SIGTERM);
		nanosleep(&window, NULL);	/* the repeat window is what is tested */
		kill(col, SIGTERM);
		assert_int_equal(waitpid(col, &status, 0), col);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 130);
		said = slurp(err);
		snprintf(want, sizeof(want), "records are still in ring '%s'", ring);
		assert_non_null(strstr(said, want));
		snprintf(want, sizeof(want), "shmtrace export %s --ring %s", out, ring);
		assert_non_null(strstr(said, want));
		free(said);
		assert_int_equal(shmt_ring_identity(ring, &dev, &ino), 0);
		close(go);
		assert_int_equal(waitpid(app, &status, 0), app);
		figure("a second stop signal after the repeat window", 1, 0, 0, 0, 0, 0,
		       "exit 130, stderr names the ring and the export command; ring kept");
	}
#endif
	(void)dev;
	(void)ino;
	(void)status;
	(void)said;
	shmtrace_ring_unlink(ring);
	unlink(out);
	unlink(err);
}

/* A collector whose ring was removed and made again by another collector
 * (rm --force, then --create) leaves that ring alone when it exits. */
static void test_exit_spares_a_ring_made_again(void **state)
{
	const char *ring = test_ring_name("mine");
	const char *const create[] = { "--create", "--linger", "0", NULL };
	char a[256], b[256];
	uint64_t dev, ino, dev2, ino2;
	pid_t ca, cb;

	(void)state;
	snprintf(a, sizeof(a), "/tmp/%s.a.cap", ring);
	snprintf(b, sizeof(b), "/tmp/%s.b.cap", ring);
	ca = start_collector_args(ring, a, 0, NULL, create);
	assert_int_equal(shmtrace_ring_unlink(ring), 0);
	cb = start_collector_args(ring, b, 0, NULL, create);
	assert_int_equal(shmt_ring_identity(ring, &dev, &ino), 0);
	assert_clean_exit(stop(ca, SIGTERM));
	assert_int_equal(shmt_ring_identity(ring, &dev2, &ino2), 0);
	assert_true(dev2 == dev && ino2 == ino);
	assert_clean_exit(stop(cb, SIGTERM));
	assert_int_equal(shmt_ring_identity(ring, &dev2, &ino2), -ENOENT);
	figure("collector exit after its ring was made again", 1, 0, 0, 0, 0, 0,
	       "only its own segment is removed (inode checked)");
	unlink(a);
	unlink(b);
}

/*
 * A collector started with another configuration replaces the ring: what
 * the old one holds (written while no collector ran) is drained into
 * FILE.replaced, the producer moves to the new ring at its next call, and
 * the two captures with the one before hold every record once.
 */
static void test_replaced_ring_drained_aside(void **state)
{
	const char *ring = test_ring_name("replace");
	const char *const small[] = { "--create", "--capacity", "65536", "--linger", "0", NULL };
	const char *const big[] = { "--create", "--capacity", "131072", NULL };
	struct phases *ph = mmap(NULL, sizeof(*ph), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	const uint64_t per = 30000;
	char a[256], b[256], old[300], err[256], *said;
	struct tally t = { 0 };
	pid_t col;

	(void)state;
	assert_true(ph != MAP_FAILED);
	snprintf(a, sizeof(a), "/tmp/%s.a.cap", ring);
	snprintf(b, sizeof(b), "/tmp/%s.b.cap", ring);
	snprintf(old, sizeof(old), "%s.replaced", b);
	snprintf(err, sizeof(err), "/tmp/%s.err", ring);
	col = start_collector_args(ring, a, 0, NULL, small);
	tally_init(&t, 1, per);
	t.pids[0] = (uint32_t)fork();
	if (t.pids[0] == 0)
		produce_phases(NULL, ring, ph, 0, per, 3);
	for (uint32_t k = 0; k < 3; k++) {
		__atomic_store_n(&ph->phase, k + 1, __ATOMIC_RELEASE);
		wait_phase(ph, &t, k);
		if (k == 0)	/* the producer attached: the ring stays */
			assert_clean_exit(stop(col, SIGTERM));
		if (k == 1)	/* written with no collector running */
			col = start_collector_args(ring, b, 0, err, big);
	}
	wait_producers(&t);
	assert_clean_exit(stop(col, SIGTERM));
	said = slurp(err);
	assert_non_null(strstr(said, "replaced ring"));
	assert_non_null(strstr(said, old));
	free(said);
	read_capture(a, &t);
	read_capture(old, &t);
	memset(t.seq_seen, 0, t.max_seq);	/* sequences count from 0 in each ring */
	read_capture(b, &t);
	check_exactly_once(&t);
	assert_int_equal(t.records + t.dropped, per);
	figure_acct("ring replaced (another --capacity) with records in it", 1, per, t.records,
		    t.dropped, 0, per - t.records - t.dropped,
		    "the old ring drained into FILE.replaced; the producer moved");
	unlink(a);
	unlink(b);
	unlink(old);
	unlink(err);
	tally_free(&t);
	munmap(ph, sizeof(*ph));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_record_exactly_once),
		cmocka_unit_test(test_collector_killed_and_restarted),
		cmocka_unit_test(test_file_size_limit),
		cmocka_unit_test(test_torn_slot_skipped),
		cmocka_unit_test(test_lock_held_by_unseen_dead_owner),
		cmocka_unit_test(test_rotation),
		cmocka_unit_test(test_full_disk),
		cmocka_unit_test(test_sigterm_under_load),
		cmocka_unit_test(test_fsync_fails),
		cmocka_unit_test(test_bad_command_lines),
		cmocka_unit_test(test_thread_handles_open_and_close),
		cmocka_unit_test(test_overwrite_accounting_under_load),
		cmocka_unit_test(test_span_returns_enospc),
		cmocka_unit_test(test_two_sessions_in_one_process),
		cmocka_unit_test(test_restart_adopts_ring),
		cmocka_unit_test(test_stop_while_app_runs),
		cmocka_unit_test(test_second_signal),
		cmocka_unit_test(test_exit_spares_a_ring_made_again),
		cmocka_unit_test(test_replaced_ring_drained_aside),
	};
	const char *bin = getenv("SHMTRACE_BIN");

	snprintf(g_bin, sizeof(g_bin), "%s/shmtrace-collector", bin ? bin : "build");
	if (access(g_bin, X_OK) != 0) {
		fprintf(stderr, "%s not built\n", g_bin);
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
