/* SPDX-License-Identifier: MIT */
/*
 * test_capture_lifecycle.c - what happens to a capture file around the
 * collector, and nothing lost silently through it: the capture deleted
 * while being written, a rotation that cannot open its next part, an
 * export given only some parts, and a full file whose rest stays in the
 * ring, exported together with it.
 */
#include <signal.h>
#include <time.h>

#include "cli_run.h"

#define WAIT_SECONDS 20

static void fill(uint64_t i, uint64_t *ts, uint64_t *dur, uint64_t *flow)
{
	*ts = i + 1000;
	*dur = i ^ 0x3333;
	*flow = i * 7 + 1;
}

/* A producer process writing n spans; waited for. */
static void produce(const char *ring, uint64_t n)
{
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0) {
		shmtrace_t *t;
		uint64_t ts, dur, flow;

		uint32_t cat, name;

		if (shmtrace_open(ring, &t) < 0)
			_exit(3);
		cat = shmtrace_intern(t, "test");
		name = shmtrace_intern(t, "span");
		for (uint64_t i = 0; i < n; i++) {
			fill(i, &ts, &dur, &flow);
			shmtrace_span(t, cat, name, ts, ts + dur, flow);
		}
		shmtrace_close(t);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Starts the collector with its stderr to errpath and waits, on a pipe,
 * until it says it drains. */
static pid_t start_collector(const char *ring, const char *out, const char *extra,
			     const char *errpath, rlim_t fsize)
{
	int p[2];
	char buf[16], fd[16];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		int fe = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fe, 2);
		close(p[0]);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		if (fsize) {
			struct rlimit rl = { fsize, fsize };

			signal(SIGXFSZ, SIG_IGN);
			setrlimit(RLIMIT_FSIZE, &rl);
		}
		execl(collector_bin, "shmtrace-collector", "--ring", ring, "--output", out,
		      "--ready-fd", fd, "--poll-interval", "5", extra, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 6);
	close(p[0]);
	return pid;
}

/* Waits for pid to exit by itself (SIGCHLD, blocked in main), at most
 * WAIT_SECONDS; then stops it with SIGTERM. Returns its exit status, or
 * -1 when it had to be stopped. */
static int wait_exit(pid_t pid)
{
	struct timespec end, now, left;
	sigset_t set;
	int st;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += WAIT_SECONDS;
	for (;;) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
			break;
		left.tv_sec = end.tv_sec - now.tv_sec;
		left.tv_nsec = end.tv_nsec - now.tv_nsec;
		if (left.tv_nsec < 0) {
			left.tv_sec--;
			left.tv_nsec += 1000000000L;
		}
		sigtimedwait(&set, NULL, &left);
	}
	fprintf(stderr, "the collector did not stop by itself in %d s\n", WAIT_SECONDS);
	kill(pid, SIGTERM);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return -1;
}

/* A test's files in the temporary directory: WHAT.cap, the collector's
 * stderr WHAT.err, the export WHAT.json and its stderr WHAT-export.err. */
struct files {
	char out[512], errp[512], json[512], xerr[512];
};

static void files_for(struct files *f, const char *what)
{
	char name[64];

	snprintf(name, sizeof(name), "%s.cap", what);
	snprintf(f->out, sizeof(f->out), "%s", tmp(name));
	snprintf(name, sizeof(name), "%s.err", what);
	snprintf(f->errp, sizeof(f->errp), "%s", tmp(name));
	snprintf(name, sizeof(name), "%s.json", what);
	snprintf(f->json, sizeof(f->json), "%s", tmp(name));
	snprintf(name, sizeof(name), "%s-export.err", what);
	snprintf(f->xerr, sizeof(f->xerr), "%s", tmp(name));
}

/* Records in a capture file's RECORDS and PACKED frames. */
static uint64_t records_in(const char *path)
{
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	char err[256];
	uint64_t n = 0;

	assert_int_equal(shmt_cap_open(path, &r, err, sizeof(err)), 0);
	while (shmt_cap_next(r, &f, err, sizeof(err)) == 1)
		if (f.type == SHMT_CAP_RECORDS)
			n += f.records.n;
	shmt_cap_close(r);
	return n;
}

/* The number after "key": in the export's metadata (the last one). */
static uint64_t meta_u64(const char *json, const char *key)
{
	char *s = slurp(json), pat[64], *p, *last = NULL;
	uint64_t v;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	for (p = s; (p = strstr(p, pat)); p++)
		last = p;
	if (!last)
		fprintf(stderr, "%s: no %s\n", json, pat);
	assert_non_null(last);
	v = strtoull(last + strlen(pat), NULL, 10);
	free(s);
	return v;
}

/* The records the collector's summary line counts. */
static uint64_t summary_records(const char *errpath)
{
	char *s = slurp(errpath), *p = s;
	uint64_t v = UINT64_MAX;

	while ((p = strstr(p, "shmtrace-collector: "))) {
		char *end;
		unsigned long long n;

		p += strlen("shmtrace-collector: ");
		n = strtoull(p, &end, 10);
		if (end > p && !strncmp(end, " records,", 9))
			v = n;
	}
	if (v == UINT64_MAX)
		fprintf(stderr, "%s: no summary line in:\n%s\n", errpath, s);
	free(s);
	assert_true(v != UINT64_MAX);
	return v;
}

/* `shmtrace export` of up to 3 files and maybe --ring; the exit code. */
static int export_of(const char *json, const char *err, const char *ring, const char *f1,
		     const char *f2, const char *f3)
{
	char *argv[12] = { bin, "export", "-o", (char *)json };
	int n = 4;

	if (ring) {
		argv[n++] = "--ring";
		argv[n++] = (char *)ring;
	}
	argv[n++] = (char *)f1;
	if (f2)
		argv[n++] = (char *)f2;
	if (f3)
		argv[n++] = (char *)f3;
	argv[n] = NULL;
	return run(NULL, err, argv);
}

/* `shmtrace export` of files[0..n), n at most 16; the exit code. */
static int export_all(const char *json, const char *err, char (*files)[600], int n)
{
	char *argv[24] = { bin, "export", "-o", (char *)json };

	for (int i = 0; i < n && i < 16; i++)
		argv[4 + i] = files[i];
	argv[4 + (n < 16 ? n : 16)] = NULL;
	return run(NULL, err, argv);
}

static void ring_seqs(const char *ring, uint64_t *tail, uint64_t *head)
{
	struct shmt_view v;
	char err[256];

	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	*tail = load_acquire(&v.h->tail.v);
	*head = shmt_ring_head(&v);
	shmt_view_close(&v);
}

/* Until the collector has drained the ring up to its head (nothing
 * signals that: the tail is polled), at most WAIT_SECONDS. */
static void wait_drained(const char *ring)
{
	struct timespec ms = { 0, 1000000 };
	uint64_t tail, head;

	for (int i = 0; i < WAIT_SECONDS * 1000; i++) {
		ring_seqs(ring, &tail, &head);
		if (tail == head)
			return;
		nanosleep(&ms, NULL);
	}
	fail_msg("the collector did not drain the ring (tail %llu, head %llu)",
		 (unsigned long long)tail, (unsigned long long)head);
}

/*
 * A: the capture deleted while the collector writes it. The collector
 * stops on its own with exit 1 and a clear error, and the records written
 * after the deletion stay in the ring. Before: it went on writing into the
 * deleted file, exited 0 at SIGTERM and counted them as captured.
 */
static void test_capture_deleted(void **state)
{
	const char *ring = test_ring_name("del");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	struct files fs;
	char *said;
	uint64_t tail, head, n1 = 20000, n2 = 30000;
	int rc;
	pid_t col;

	(void)state;
	files_for(&fs, "del");
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, fs.out, "--quiet", fs.errp, 0);
	produce(ring, n1);
	wait_drained(ring);
	assert_int_equal(unlink(fs.out), 0);
	produce(ring, n2);
	rc = wait_exit(col);
	said = slurp(fs.errp);
	if (rc != 1)
		fprintf(stderr, "collector: exit %d, said:\n%s\n", rc, said);
	assert_int_equal(rc, 1);
	/* "deleted or replaced" once main.c prints drain_error() for -ESTALE */
	assert_non_null(strstr(said, "deleted or replaced"));
	assert_non_null(strstr(said, "del.cap"));
	free(said);
	/* the collector stops at its next pass: the records written after
	 * the deletion stay in the ring (at most those of a pass under way
	 * as the file went could have gone into it) */
	ring_seqs(ring, &tail, &head);
	assert_int_equal(head, n1 + n2);
	assert_true(tail >= n1 && tail <= n1 + 4 * 8192);
	assert_int_equal(export_ring(ring, fs.json, fs.xerr), 0);
	assert_true(meta_u64(fs.json, "records") >= head - tail);
	figure("capture deleted while collecting", 1, n2, head - tail, 0, 0, 0,
	       "written after the deletion / kept in the ring; exit 1 at the next pass");
	shmtrace_ring_unlink(ring);
}

/*
 * B: --max-size rotation whose next part cannot be opened (a directory is
 * in its way). The summary counts the records of part 0 (it said 0), the
 * export of part 0 says part 1 is missing (it said complete), and part 0
 * with the ring adds up to every record written.
 */
static void test_rotation_fails(void **state)
{
	const char *ring = test_ring_name("rotfail");
	struct shmtrace_ring_config c = { .capacity = 1 << 18 };
	struct files fs;
	char part1[520];
	uint64_t n = 200000, in0, exported, dropped;
	pid_t col;

	(void)state;
	files_for(&fs, "r");
	snprintf(part1, sizeof(part1), "%s.1", fs.out);
	assert_int_equal(mkdir(part1, 0755), 0);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, fs.out, "--max-size=1M", fs.errp, 0);
	produce(ring, n);
	assert_int_equal(wait_exit(col), 1);
	in0 = records_in(fs.out);
	assert_true(in0 > 0 && in0 < n);
	assert_int_equal(summary_records(fs.errp), in0);

	assert_int_equal(export_of(fs.json, fs.xerr, NULL, fs.out, NULL, NULL), 0);
	expect_in(fs.xerr, "r.cap.1");
	expect_in(fs.xerr, "missing");
	expect_not_in(fs.xerr, "please report");
	expect_in(fs.json, "\"complete\":false");
	expect_in(fs.json, "\"missing_parts\":[");
	assert_int_equal(meta_u64(fs.json, "records"), in0);

	/* with the ring: everything, and nothing missing */
	assert_int_equal(export_of(fs.json, fs.xerr, ring, fs.out, NULL, NULL), 0);
	exported = meta_u64(fs.json, "records");
	dropped = meta_u64(fs.json, "dropped");
	expect_in(fs.json, "\"complete\":true");
	assert_int_equal(meta_u64(fs.json, "unaccounted"), 0);
	assert_int_equal(exported + dropped, n);
	figure_acct("rotation fails mid-run", 1, n, exported, dropped, meta_u64(fs.json, "torn"), 0,
		    "exit 1, summary counts part 0; export FILE --ring R adds the rest");
	rmdir(part1);
	shmtrace_ring_unlink(ring);
}

/*
 * C: a capture in several parts exported in part. Each export names the
 * parts it lacks, with their records where the parts given tell, and says
 * it is incomplete; only the whole set is complete, and "a bug" is never
 * said. Before: part 0 alone was "complete", the last part alone blamed
 * its predecessors' records on a bug.
 */
static void test_parts_missing(void **state)
{
	const char *ring = test_ring_name("parts");
	struct shmtrace_ring_config c = { .capacity = 1 << 18 };
	struct files fs;
	char part[16][600], *said;
	uint64_t n = 400000, in[16], total = 0;
	int nparts = 0;
	pid_t col;
	struct stat st;

	(void)state;
	files_for(&fs, "p");
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, fs.out, "--max-size=1M", fs.errp, 0);
	produce(ring, n);
	kill(col, SIGTERM);
	assert_int_equal(wait_exit(col), 0);
	for (int i = 0; i < 16; i++) {
		if (i == 0)
			snprintf(part[i], sizeof(part[i]), "%s", fs.out);
		else
			snprintf(part[i], sizeof(part[i]), "%s.%d", fs.out, i);
		if (stat(part[i], &st) < 0)
			break;
		in[i] = records_in(part[i]);
		total += in[i];
		nparts++;
	}
	assert_true(nparts >= 3);

	/* part 0 alone: part 1 and after are missing, how many not known */
	assert_int_equal(export_of(fs.json, fs.xerr, NULL, part[0], NULL, NULL), 0);
	expect_in(fs.xerr, "p.cap.1 and any part after it");
	expect_in(fs.json, "\"complete\":false");
	assert_int_equal(meta_u64(fs.json, "unaccounted"), 0);

	/* the last part alone: the parts before it, and their records */
	assert_int_equal(export_of(fs.json, fs.xerr, NULL, part[nparts - 1], NULL, NULL), 0);
	said = slurp(fs.xerr);
	if (!strstr(said, part[0]) || !strstr(said, part[1]))
		fprintf(stderr, "said: %s\n", said);
	assert_non_null(strstr(said, part[0]));
	assert_non_null(strstr(said, part[1]));
	assert_null(strstr(said, "no counter accounts"));
	free(said);
	expect_in(fs.json, "\"complete\":false");
	assert_int_equal(meta_u64(fs.json, "missing_records"), total - in[nparts - 1]);
	assert_int_equal(meta_u64(fs.json, "unaccounted"), 0);
	assert_int_equal(meta_u64(fs.json, "records") + meta_u64(fs.json, "missing_records"), total);

	/* the first and the last: the ones between */
	assert_int_equal(export_of(fs.json, fs.xerr, NULL, part[0], part[nparts - 1],
				   NULL), 0);
	expect_in(fs.xerr, part[1]);
	expect_not_in(fs.xerr, "please report");
	expect_in(fs.json, "\"complete\":false");
	assert_int_equal(meta_u64(fs.json, "missing_records"), total - in[0] - in[nparts - 1]);
	figure_acct("parts missing from an export", (uint64_t)nparts - 2, total,
		    meta_u64(fs.json, "records") + meta_u64(fs.json, "missing_records"), 0, 0, 0,
		    "first and last part given: the parts between named, their records counted");

	/* all of them: complete, nothing said */
	assert_int_equal(export_all(fs.json, fs.xerr, part, nparts), 0);
	expect_not_in(fs.xerr, "missing");
	expect_in(fs.json, "\"complete\":true");
	assert_int_equal(meta_u64(fs.json, "records"), total);
	for (int i = 0; i < nparts; i++)
		unlink(part[i]);
	shmtrace_ring_unlink(ring);
}

/*
 * D: the capture file stops growing (a file-size limit: the full disk's
 * EFBIG twin, no mount needed); the collector exits 1 and the ring keeps
 * the rest. The capture alone says the ring still exists; the capture
 * with --ring adds up exactly; a ring of another id is refused. Before:
 * `export FILE --ring R` was a usage error.
 */
static void test_full_file_with_ring(void **state)
{
	const char *ring = test_ring_name("full");
	const char *other = test_ring_name("other");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	struct files fs;
	char hint[1200];
	uint64_t n = 60000, exported, dropped, torn;
	pid_t col;

	(void)state;
	files_for(&fs, "full");
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, fs.out, "--quiet", fs.errp, 128 * 1024);
	produce(ring, n);
	assert_int_equal(wait_exit(col), 1);

	/* alone: cut short, and where the rest is */
	assert_int_equal(export_of(fs.json, fs.xerr, NULL, fs.out, NULL, NULL), 0);
	snprintf(hint, sizeof(hint), "the ring '%s' still exists and may hold the rest: "
		 "shmtrace export %s --ring %s", ring, fs.out, ring);
	expect_in(fs.xerr, hint);
	expect_in(fs.json, "\"complete\":false");
	assert_true(meta_u64(fs.json, "records") < n);

	/* with the ring: one export adds up */
	assert_int_equal(export_of(fs.json, fs.xerr, ring, fs.out, NULL, NULL), 0);
	exported = meta_u64(fs.json, "records");
	dropped = meta_u64(fs.json, "dropped");
	torn = meta_u64(fs.json, "torn");
	expect_in(fs.json, "\"complete\":true");
	assert_int_equal(meta_u64(fs.json, "unaccounted"), 0);
	assert_int_equal(exported + dropped + torn, n);
	figure_acct("full disk, capture + ring in one export", 1, n, exported, dropped, torn, 0,
		    "EFBIG (file-size limit): export FILE --ring R");

	/* another ring: refused */
	assert_int_equal(shmtrace_ring_create(other, NULL), 0);
	assert_int_equal(export_of(fs.json, fs.xerr, other, fs.out, NULL, NULL), 1);
	expect_in(fs.xerr, "was not drained from ring");
	shmtrace_ring_unlink(other);
	shmtrace_ring_unlink(ring);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capture_deleted),
		cmocka_unit_test(test_rotation_fails),
		cmocka_unit_test(test_parts_missing),
		cmocka_unit_test(test_full_file_with_ring),
	};
	sigset_t set;

	/* the collector's exit is waited for as a signal (wait_exit) */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (cli_setup_for("lifecycle", true) < 0) {
		fprintf(stderr, "%s or %s not built\n", bin, collector_bin);
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, cli_teardown);
}
