/* SPDX-License-Identifier: MIT */
/*
 * test_faults.c - the fault-injection suite: producers SIGKILLed inside the
 * lock at random points, records cut after k of their 40 bytes, garbage in
 * the mutex, a ring truncated under its readers, header fields out of range,
 * a ring of another owner. Each case prints a FIGURE line that the runner
 * gathers into the table at the end of `make test`.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "helpers.h"

static char g_bin[4096];

/* Every record's fields follow from (i) so a torn one cannot pass. */
static void fill(uint64_t i, uint64_t *ts, uint64_t *dur, uint64_t *flow)
{
	*ts = i;
	*dur = i * 2654435761ull;
	*flow = ~i;
}

static bool whole(const struct shmt_record *r)
{
	uint64_t ts, dur, flow;

	fill(r->ts, &ts, &dur, &flow);
	return r->dur == dur && r->flow == flow && r->name == 1 && r->cat == 2;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static const char *g_point;
static int g_countdown;

static void kill_hook(const char *where)
{
	if (!strcmp(where, g_point) && --g_countdown <= 0)
		raise(SIGKILL);
}

enum { KILLS = 1000 };	/* producers killed by test_kills_inside_lock */

/* Forks producer k, which records n spans on ring name, counting in
 * returned[k] the calls that returned, until kill_hook kills it at point
 * (the countdown-th time it passes there). */
static pid_t fork_victim(const char *name, int k, const char *point, int countdown, int n,
			 uint64_t *returned)
{
	pid_t pid = fork();

	if (pid == 0) {
		shmtrace_t *t;
		uint64_t ts, dur, flow;

		if (shmtrace_open(name, &t) < 0)
			_exit(3);
		g_point = point;
		g_countdown = countdown;
		shmt_test_hook = kill_hook;
		for (int i = 0; i < n; i++) {
			fill((uint64_t)k << 20 | (uint64_t)i, &ts, &dur, &flow);
			shmtrace_span(t, 2, 1, ts, ts + dur, flow);
			returned[k] = (uint64_t)i + 1;
		}
		shmtrace_flush(t);
		_exit(0);	/* may not fire when n is small: fine */
	}
	return pid;
}

/* Checks the records of d: each whole, from the producer pids[k] that
 * wrote it, found once; counts them in *found. Returns how many of the
 * calls that returned (returned[k] of producer k) left no record. */
static uint64_t count_lost(const struct ring_dump *d, const uint32_t *pids,
			   const uint64_t *returned, uint64_t *found)
{
	/* each child's records: exactly 0 .. returned-1, once each */
	uint8_t *seen = calloc((size_t)KILLS << 9, 1);
	uint64_t lost = 0;

	for (size_t i = 0; i < d->n; i++) {
		uint64_t k = d->recs[i].ts >> 20, j = d->recs[i].ts & 0xfffff;

		assert_true(whole(&d->recs[i]));
		assert_true(k < KILLS && j < 512);
		assert_int_equal(d->recs[i].pid, pids[k]);
		assert_int_equal(seen[k << 9 | j]++, 0);
		(*found)++;
	}
	for (uint64_t k = 0; k < KILLS; k++)
		for (uint64_t j = 0; j < returned[k]; j++)
			lost += !seen[k << 9 | j];
	free(seen);
	return lost;
}

/*
 * 1000 producers, each SIGKILLed inside the lock at a random hook point
 * after a random number of records; after each, the parent takes the lock
 * (timing the recovery) and at the end every record whose call returned
 * must be in the ring or a staging block exactly once, and none torn.
 */
static void test_kills_inside_lock(void **state)
{
	static const char *points[] = { "flush-begin", "flush-middle", "flush-head" };
	const char *name = test_ring_name("kills");
	struct shmtrace_ring_config c = { .capacity = 1 << 20, .blocks = 64 };
	uint64_t *returned, *recovery, written = 0, found = 0, torn, lost;
	uint32_t *pids;
	struct shmt_view v;
	struct ring_dump d;
	char err[256], note[128];
	unsigned seed = 12345;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	/* how many calls of each child returned, in memory it shares with us */
	returned = mmap(NULL, KILLS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(returned != MAP_FAILED);
	recovery = calloc(KILLS, sizeof(*recovery));
	pids = calloc(KILLS, sizeof(*pids));
	for (int k = 0; k < KILLS; k++) {
		const char *point = points[rand_r(&seed) % 3];
		int countdown = 1 + (int)(rand_r(&seed) % 3);
		int n = 64 + (int)(rand_r(&seed) % 200), status;
		uint64_t t0;
		pid_t pid = fork_victim(name, k, point, countdown, n, returned);

		pids[k] = (uint32_t)pid;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		t0 = shmt_mono_ns();
		assert_int_equal(shmt_lock(&v, 1000000000ull), 0);
		recovery[k] = shmt_mono_ns() - t0;
		shmt_unlock(&v);
		written += returned[k];
	}
	shmt_view_close(&v);

	ring_dump(name, &d);
	torn = d.torn;
	lost = count_lost(&d, pids, returned, &found);
	qsort(recovery, KILLS, sizeof(*recovery), cmp_u64);
	snprintf(note, sizeof(note), "lock recovery p50 %.0f us, p99 %.0f us, max %.0f us",
		 recovery[KILLS / 2] / 1e3, recovery[KILLS * 99 / 100] / 1e3, recovery[KILLS - 1] / 1e3);
	figure_acct("SIGKILL inside the lock", KILLS, written, found, 0, torn, lost, note);
	assert_int_equal(torn, 0);
	assert_int_equal(lost, 0);
	assert_int_equal(found, written);
	free(d.recs);
	free(recovery);
	free(pids);
	munmap(returned, KILLS * sizeof(uint64_t));
	shmtrace_ring_unlink(name);
}

/*
 * A writer killed after k of a record's 40 bytes, for every k, following
 * the publication order of ring_write.c (commit zeroed, fields, commit
 * last), in both modes: the reader accepts none of them.
 */
static void partial_writes(uint32_t mode)
{
	const char *name = test_ring_name(mode ? "part-ow" : "part");
	struct shmtrace_ring_config c = { .capacity = 64, .mode = mode };
	uint64_t accepted_torn = 0, accepted = 0, injected = 0;
	struct shmt_view v;
	char err[256];

	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	{
		/* a full ring of good records first, so overwrite has victims */
		shmtrace_t *t;
		uint64_t ts, dur, flow;

		assert_int_equal(shmtrace_open(name, &t), 0);
		for (uint64_t i = 0; i < 64; i++) {
			fill(i, &ts, &dur, &flow);
			shmtrace_span(t, 2, 1, ts, ts + dur, flow);
		}
		shmtrace_close(t);
	}
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	for (int k = 0; k <= 40; k++) {
		uint64_t head = shmt_ring_head(&v), seq = head;
		struct shmt_record r;
		int status;
		pid_t pid;

		injected++;
		pid = fork();
		if (pid == 0) {
			struct shmt_record *slot = &v.records[seq & v.mask];
			struct shmt_record nr = { .pid = 1, .tid = 1, .name = 1, .cat = 2 };
			volatile uint8_t *dst = (volatile uint8_t *)slot;
			const uint8_t *src = (const uint8_t *)&nr;

			fill(1000000 + (uint64_t)k, &nr.ts, &nr.dur, &nr.flow);
			nr.dur ^= 1;	/* this record is torn by construction */
			nr.commit = SHMT_COMMIT(seq, SHMTRACE_KIND_SPAN);
			if (shmt_lock(&v, 0) < 0)
				_exit(3);
			store_relaxed(&slot->commit, 0);
			__atomic_thread_fence(__ATOMIC_RELEASE);
			/* the fields byte by byte; the commit word is one aligned
			 * 4-byte store in the writer, so it is all or nothing */
			for (int b = 0; b < k && b < 36; b++)
				dst[b] = src[b];
			if (k == 40)
				store_release(&slot->commit, nr.commit);
			raise(SIGKILL);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		/* the next taker repairs; head never moved, so nothing is published */
		assert_int_equal(shmt_lock(&v, 1000000000ull), 0);
		shmt_unlock(&v);
		assert_int_equal(shmt_ring_head(&v), head);
		for (uint64_t s = head > 64 ? head - 64 : 0; s < head; s++) {
			if (shmt_ring_read(&v, s, &r) == 0) {
				accepted++;
				accepted_torn += !whole(&r);
			}
		}
	}
	shmt_view_close(&v);
	figure(mode ? "cut after k of 40 bytes (overwrite)" : "cut after k of 40 bytes (discard)",
	       injected, 64, accepted / injected, 0, accepted_torn, 0, "every k from 0 to 40");
	assert_int_equal(accepted_torn, 0);
	shmtrace_ring_unlink(name);
}

static void test_partial_writes_discard(void **s) { (void)s; partial_writes(SHMTRACE_MODE_DISCARD); }
static void test_partial_writes_overwrite(void **s) { (void)s; partial_writes(SHMTRACE_MODE_OVERWRITE); }

/* Runs argv with stdout to /dev/null and stderr into err; returns the exit
 * status (or 128 + signal). */
static int run(char *const argv[], char *errbuf, size_t len)
{
	int p[2], status;
	pid_t pid;
	size_t got = 0;
	ssize_t n;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(p[1], 2);
		close(p[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	while ((n = read(p[0], errbuf + got, len - 1 - got)) > 0)
		got += (size_t)n;
	errbuf[got] = 0;
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void write_records(const char *name, uint64_t n)
{
	shmtrace_t *t;
	uint64_t ts, dur, flow;

	assert_int_equal(shmtrace_open(name, &t), 0);
	for (uint64_t i = 0; i < n; i++) {
		fill(i, &ts, &dur, &flow);
		shmtrace_span(t, 2, 1, ts, ts + dur, flow);
	}
	shmtrace_close(t);
}

/* Random bytes in the mutex: the exporter (never locks) and the
 * collector (checks first) neither die nor hang. */
static void test_garbage_in_mutex(void **state)
{
	const char *name = test_ring_name("mutex");
	char tool[4200], col[4200], out[256], errbuf[4096];
	unsigned seed = 99;
	int trials = 50, survived = 0;
	struct shmt_view v;
	char err[256];

	(void)state;
	snprintf(tool, sizeof(tool), "%s/shmtrace", g_bin);
	snprintf(col, sizeof(col), "%s/shmtrace-collector", g_bin);
	snprintf(out, sizeof(out), "/tmp/%s.json", name);
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	write_records(name, 1000);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	for (int k = 0; k < trials; k++) {
		char *ex[] = { tool, "export", "--ring", (char *)name, "-o", out, NULL };
		uint8_t *m = (uint8_t *)&v.h->mutex;

		for (size_t b = 0; b < sizeof(pthread_mutex_t); b++)
			m[b] = (uint8_t)rand_r(&seed);
		if (run(ex, errbuf, sizeof(errbuf)) == 0)
			survived++;
	}
	{
		/* the collector: drains what is published and stops cleanly on
		 * SIGTERM, even though it cannot take the lock */
		char cap[256];
		char *ex[] = { tool, "export", cap, "-o", out, NULL };
		int status, p[2];
		pid_t pid;
		char buf[8];

		snprintf(cap, sizeof(cap), "/tmp/%s.cap", name);
		memset(&v.h->mutex, 0x5a, sizeof(pthread_mutex_t));
		assert_int_equal(pipe(p), 0);
		pid = fork();
		if (pid == 0) {
			char fd[16];
			char *cv2[] = { col, "--ring", (char *)name, "-o", cap, "--ready-fd", fd, "-q", NULL };

			close(p[0]);
			snprintf(fd, sizeof(fd), "%d", p[1]);
			execv(col, cv2);
			_exit(127);
		}
		close(p[1]);
		assert_int_equal(read(p[0], buf, sizeof(buf)), 6);
		close(p[0]);
		kill(pid, SIGTERM);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		assert_int_equal(run(ex, errbuf, sizeof(errbuf)), 0);
		unlink(cap);
	}
	shmt_view_close(&v);
	figure_acct("garbage in the mutex bytes", (uint64_t)trials + 1, 1000, 1000, 0, 0, 0,
	       "exporter and collector: no abort, no hang");
	assert_int_equal(survived, trials);
	unlink(out);
	shmtrace_ring_unlink(name);
}

/* Header fields out of range: the exporter and collector reject or clamp,
 * never read out of bounds or loop. */
static void test_header_fields_out_of_range(void **state)
{
	const char *name = test_ring_name("hdr");
	struct { size_t off; uint64_t val; int width; const char *what; } cases[] = {
		{ offsetof(struct shmt_header, capacity), 0, 4, "capacity 0" },
		{ offsetof(struct shmt_header, capacity), 1u << 27, 4, "capacity past the segment" },
		{ offsetof(struct shmt_header, head), UINT64_MAX - 5, 8, "head near 2^64" },
		{ offsetof(struct shmt_header, tail), UINT64_MAX, 8, "tail past head" },
		{ offsetof(struct shmt_header, head), 1ull << 40, 8, "head far past tail" },
		{ offsetof(struct shmt_header, strings), 0xffffffff, 4, "string count past the table" },
		{ offsetof(struct shmt_header, threads), 0xffffffff, 4, "name count past the table" },
		{ offsetof(struct shmt_header, records_off), 1ull << 50, 8, "records offset out of range" },
		{ offsetof(struct shmt_header, journal) + 8, UINT64_MAX, 8, "journal garbage" },
	};
	char tool[4200], out[256], errbuf[4096], path[256];
	int ok = 0, n = (int)(sizeof(cases) / sizeof(cases[0]));

	(void)state;
	snprintf(tool, sizeof(tool), "%s/shmtrace", g_bin);
	snprintf(out, sizeof(out), "/tmp/%s.json", name);
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	for (int i = 0; i < n; i++) {
		char *ex[] = { tool, "export", "--ring", (char *)name, "-o", out, NULL };
		char *st[] = { tool, "stat", (char *)name, NULL };
		int fd, rc1, rc2;

		assert_int_equal(shmtrace_ring_create(name, NULL), 0);
		write_records(name, 100);
		fd = open(path, O_RDWR);
		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, &cases[i].val, (size_t)cases[i].width, (off_t)cases[i].off),
				 cases[i].width);
		close(fd);
		rc1 = run(ex, errbuf, sizeof(errbuf));
		rc2 = run(st, errbuf, sizeof(errbuf));
		/* a clean refusal (1) or an export with warnings (0); never a signal */
		if (rc1 <= 1 && rc2 <= 1)
			ok++;
		else
			print_message("%s: export %d, stat %d: %s\n", cases[i].what, rc1, rc2, errbuf);
		shmtrace_ring_unlink(name);
	}
	figure("header fields out of range", (uint64_t)n, 100u * n, 0, 0, 0, 0,
	       "rejected or clamped; no crash");
	assert_int_equal(ok, n);
	unlink(out);
}

/* A peer truncates the ring to size while a collector drains it, which is
 * then stopped; returns its exit status, asserting it was not killed by a
 * signal (SIGBUS) on its way out. */
static int truncated_under_collector(off_t size)
{
	const char *name = test_ring_name("trunc");
	char col[4200], cap[256], path[256], buf[8], fd[16];
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	int p[2], status;
	pid_t pid;

	snprintf(col, sizeof(col), "%s/shmtrace-collector", g_bin);
	snprintf(cap, sizeof(cap), "/tmp/%s.cap", name);
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	write_records(name, 5000);
	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		execl(col, col, "--ring", name, "-o", cap, "--ready-fd", fd, "--poll-interval", "5",
		      "-q", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 6);
	close(p[0]);
	assert_int_equal(truncate(path, size), 0);
	/* producers keep writing into what is left: a peer's problem, but the
	 * collector's next pass touches the lost pages */
	kill(pid, SIGTERM);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	unlink(cap);
	shmtrace_ring_unlink(name);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* A peer truncates the ring while the collector maps it: to one page
 * (the header kept), then to nothing (the header gone too, which its
 * exit touches). Exit 0 if it had drained everything before, 1 if it
 * hit the hole; never killed by SIGBUS. */
static void test_ring_truncated_under_readers(void **state)
{
	int rc;

	(void)state;
	rc = truncated_under_collector(4096);
	assert_true(rc <= 1);
	figure("ring truncated while mapped", 1, 5000, 0, 0, 0, 0,
	       rc ? "collector: clear error, no SIGBUS" : "collector: no SIGBUS");
	assert_true(truncated_under_collector(0) <= 1);
}

/* A ring owned by another user is refused by producers and the collector. */
static void test_ring_of_another_owner(void **state)
{
	const char *name = test_ring_name("owner");
	char col[4200], errbuf[4096], path[256];
	shmtrace_t *t;

	(void)state;
	if (geteuid() != 0) {
		print_message("not root: cannot give a ring away; skipped\n");
		skip();
	}
	snprintf(col, sizeof(col), "%s/shmtrace-collector", g_bin);
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(chown(path, 65534, 65534), 0);
	assert_int_equal(shmtrace_open(name, &t), -EPERM);
	{
		char *cv[] = { col, "--ring", (char *)name, "-o", "/tmp/unused.cap", NULL };

		assert_int_equal(run(cv, errbuf, sizeof(errbuf)), 1);
		assert_non_null(strstr(errbuf, "owned by uid 65534"));
	}
	figure("ring of another owner", 1, 0, 0, 0, 0, 0, "producer -EPERM, collector refuses");
	shmtrace_ring_unlink(name);
	unlink("/tmp/unused.cap");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kills_inside_lock),
		cmocka_unit_test(test_partial_writes_discard),
		cmocka_unit_test(test_partial_writes_overwrite),
		cmocka_unit_test(test_garbage_in_mutex),
		cmocka_unit_test(test_header_fields_out_of_range),
		cmocka_unit_test(test_ring_truncated_under_readers),
		cmocka_unit_test(test_ring_of_another_owner),
	};
	const char *bin = getenv("SHMTRACE_BIN");

	snprintf(g_bin, sizeof(g_bin), "%s", bin ? bin : "build");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
