/* SPDX-License-Identifier: MIT */
/*
 * lifecycle_run.h - what the tests of a capture's life around the
 * collector share (test_capture_lifecycle.c, test_collector_maxfiles.c):
 * producers of spans whose fields follow from their index, the collector
 * started with its stderr in a file and waited for, the records of a
 * capture file, the figures of an export's metadata and of the collector's
 * summary line, and the ring's tail and head.
 */
#ifndef SHMTRACE_TEST_LIFECYCLE_RUN_H
#define SHMTRACE_TEST_LIFECYCLE_RUN_H

#include <signal.h>
#include <time.h>

#include "cli_run.h"

#define WAIT_SECONDS 20

static inline void fill(uint64_t i, uint64_t *ts, uint64_t *dur, uint64_t *flow)
{
	*ts = i + 1000;
	*dur = i ^ 0x3333;
	*flow = i * 7 + 1;
}

/* A producer process writing n spans; waited for. */
static inline void produce(const char *ring, uint64_t n)
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

/* Starts the collector with the NULL-terminated extra arguments (at most
 * 8), its stderr to errpath, and waits, on a pipe, until it says it
 * drains. */
static inline pid_t start_collector_with(const char *ring, const char *out,
					 const char *const *extra, const char *errpath, rlim_t fsize)
{
	const char *argv[20] = { "shmtrace-collector", "--ring", ring, "--output", out,
				 "--ready-fd", NULL, "--poll-interval", "5" };
	int p[2], n = 9;
	char buf[16], fd[16];
	pid_t pid;

	for (int i = 0; extra && extra[i] && i < 8; i++)
		argv[n++] = extra[i];
	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		int fe = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fe, 2);
		close(p[0]);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		argv[6] = fd;
		if (fsize) {
			struct rlimit rl = { fsize, fsize };

			signal(SIGXFSZ, SIG_IGN);
			setrlimit(RLIMIT_FSIZE, &rl);
		}
		execv(collector_bin, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 6);
	close(p[0]);
	return pid;
}

/* The same with one extra argument, or none (NULL). */
static inline pid_t start_collector(const char *ring, const char *out, const char *extra,
				    const char *errpath, rlim_t fsize)
{
	const char *const more[] = { extra, NULL };

	return start_collector_with(ring, out, more, errpath, fsize);
}

/* Waits for pid to exit by itself (SIGCHLD, blocked in main), at most
 * WAIT_SECONDS; then stops it with SIGTERM. Returns its exit status, or
 * -1 when it had to be stopped. */
static inline int wait_exit(pid_t pid)
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

static inline void files_for(struct files *f, const char *what)
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
static inline uint64_t records_in(const char *path)
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
static inline uint64_t meta_u64(const char *json, const char *key)
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
static inline uint64_t summary_records(const char *errpath)
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
static inline int export_of(const char *json, const char *err, const char *ring, const char *f1,
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
static inline int export_all(const char *json, const char *err, char (*files)[600], int n)
{
	char *argv[24] = { bin, "export", "-o", (char *)json };

	for (int i = 0; i < n && i < 16; i++)
		argv[4 + i] = files[i];
	argv[4 + (n < 16 ? n : 16)] = NULL;
	return run(NULL, err, argv);
}

static inline void ring_seqs(const char *ring, uint64_t *tail, uint64_t *head)
{
	struct shmt_view v;
	char err[256];

	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	*tail = load_acquire(&v.h->tail.v);
	*head = shmt_ring_head(&v);
	shmt_view_close(&v);
}

/* Records staged in ring's blocks, not yet in the ring. */
static inline uint64_t ring_staged(const char *ring)
{
	struct shmt_view v;
	uint64_t n = 0;
	char err[256];

	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	for (uint32_t i = 0; i < v.nblocks; i++) {
		struct shmt_block *b = shmt_block_at(&v, i);
		uint64_t w = load_acquire(&b->written), k = load_relaxed(&b->taken);

		/* a block sequenced in place holds the ring's records (2.0) */
		if (load_relaxed(&b->state) != SHMT_BLOCK_SEQUENCED ||
		    !shmt_block_sequenced(&v, w, k, load_relaxed(&b->seq0)))
			n += w - k;
	}
	shmt_view_close(&v);
	return n;
}

/* Until the collector has drained the ring up to its head, and the
 * blocks handed to it (nothing signals that: the tail is polled), at
 * most WAIT_SECONDS. */
static inline void wait_drained(const char *ring)
{
	struct timespec ms = { 0, 1000000 };
	uint64_t tail, head;

	for (int i = 0; i < WAIT_SECONDS * 1000; i++) {
		/* the blocks first: a flush moves records from a block into
		 * the ring, so blocks seen empty and then a head seen drained
		 * hold everything; the other way round, a flush in between
		 * hid a block's records from both looks */
		bool empty = !ring_staged(ring);

		ring_seqs(ring, &tail, &head);
		if (empty && tail == head)
			return;
		nanosleep(&ms, NULL);
	}
	fail_msg("the collector did not drain the ring (tail %llu, head %llu)",
		 (unsigned long long)tail, (unsigned long long)head);
}

/* What main() does before the tests: the collector's exit is waited for
 * as a signal (wait_exit), so SIGCHLD is blocked; the binaries are found
 * and the temporary directory /tmp/shmt-WHAT-XXXXXX made. 0, or -1 after
 * saying what is missing. */
static inline int lifecycle_setup(const char *what)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (cli_setup_for(what, true) < 0) {
		fprintf(stderr, "%s or %s not built\n", bin, collector_bin);
		return -1;
	}
	return 0;
}

#endif /* SHMTRACE_TEST_LIFECYCLE_RUN_H */
