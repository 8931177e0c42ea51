/* SPDX-License-Identifier: MIT */
/*
 * collector_run.h - what the tests of shmtrace-collector share: starting it
 * on a ring (waiting until it says it drains) and stopping it, producer
 * processes writing records whose fields follow from their index, and a
 * tally of the captures that checks every record is there exactly once or
 * counted as dropped.
 */
#ifndef SHMTRACE_TEST_COLLECTOR_RUN_H
#define SHMTRACE_TEST_COLLECTOR_RUN_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "capture.h"
#include "helpers.h"

static char g_bin[4096];

static inline void fill(uint64_t i, uint64_t *ts, uint64_t *dur, uint64_t *flow)
{
	*ts = i + 1000;
	*dur = i ^ 0x3333;
	*flow = i * 7 + 1;
}

/* Starts the collector with up to four more arguments (NULL-terminated),
 * its stderr to errpath if not NULL, and waits, on a pipe, until it says
 * it drains. */
static inline pid_t start_collector_args(const char *ring, const char *out, rlim_t fsize,
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
static inline pid_t start_collector(const char *ring, const char *out, const char *extra, rlim_t fsize)
{
	const char *const more[] = { extra, NULL };

	return start_collector_args(ring, out, fsize, NULL, more);
}

static inline int stop(pid_t pid, int sig)
{
	int status;

	kill(pid, sig);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

/* A producer process writing n spans on ring (fill()'s), then exiting;
 * with each, every span flushed at once: copied into its slot, where with
 * no collector a full block would be sequenced in place. Exits 3 if the
 * open fails, 4 if a call is refused, saying which on stderr. */
static inline void produce_flushed(const char *ring, uint64_t n, bool each)
{
	shmtrace_t *t;
	uint64_t ts, dur, flow;
	int err;

	err = shmtrace_open(ring, &t);
	if (err < 0) {
		fprintf(stderr, "producer %d: shmtrace_open(%s): %s\n", (int)getpid(), ring,
			strerror(-err));
		_exit(3);
	}
	for (uint64_t i = 0; i < n; i++) {
		fill(i, &ts, &dur, &flow);
		err = shmtrace_span(t, 2, 1, ts, ts + dur, flow);
		/* a lock wait timed out or the ring was full: the record is
		 * dropped and counted, which the caller's tally checks; any
		 * other refusal of the first span means nothing was written */
		if (err < 0 && (each || (i == 0 && err != -ETIMEDOUT && err != -ENOSPC))) {
			fprintf(stderr, "producer %d: span %llu: %s\n", (int)getpid(),
				(unsigned long long)i, strerror(-err));
			_exit(4);
		}
		err = each ? shmtrace_flush(t) : 0;
		if (err < 0) {
			fprintf(stderr, "producer %d: flush after span %llu: %s\n", (int)getpid(),
				(unsigned long long)i, strerror(-err));
			_exit(4);
		}
	}
	shmtrace_close(t);
	_exit(0);
}

static inline void produce(const char *ring, uint64_t n)
{
	produce_flushed(ring, n, false);
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
	uint64_t lock_dropped;	/* of them, lost to the lock's bound */
	uint64_t torn;		/* the latest loss frame */
	int clean_ends, cut_ends;
};

/* Reads a capture; records a sequence already seen are dropped, as
 * the exporter does after a collector restart. */
static inline void read_capture(const char *path, struct tally *t)
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
		if (f.type == SHMT_CAP_LOSS && f.loss.lock_dropped > t->lock_dropped)
			t->lock_dropped = f.loss.lock_dropped;
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

static inline void tally_free(struct tally *t)
{
	free(t->seen);
	free(t->seq_seen);
}

static inline void check_exactly_once(struct tally *t)
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
static inline void tally_init(struct tally *t, int n, uint64_t per)
{
	t->npids = n;
	t->per = per;
	t->seen = calloc((size_t)n * per, 1);
	t->max_seq = (uint64_t)n * per;
	t->seq_seen = calloc(t->max_seq, 1);
	assert_true(t->seen && t->seq_seen);
}

static inline void run_producers(const char *ring, struct tally *t, int n, uint64_t per)
{
	tally_init(t, n, per);
	for (int p = 0; p < n; p++) {
		pid_t pid = fork();

		if (pid == 0)
			produce(ring, per);
		t->pids[p] = (uint32_t)pid;
	}
}

static inline void wait_producers(struct tally *t)
{
	for (int p = 0; p < t->npids; p++) {
		int status;

		assert_int_equal(waitpid((pid_t)t->pids[p], &status, 0), (pid_t)t->pids[p]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
}

/* Waits (at most 20 s) until the ring's tail reaches n: the collector
 * has drained every record written. Returns the tail. */
static inline uint64_t wait_tail(shmtrace_t *t, uint64_t n)
{
	struct shmtrace_stats st = { 0 };

	for (int i = 0; i < 20000; i++) {
		assert_int_equal(shmtrace_stats(t, &st), 0);
		if (st.tail >= n)
			break;
		usleep(1000);
	}
	return st.tail;
}

static inline void assert_clean_exit(int status)
{
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* Finds the collector built beside the tests (SHMTRACE_BIN, else build);
 * 0, or -1 when it is not there. */
static inline int collector_bin_init(void)
{
	const char *bin = getenv("SHMTRACE_BIN");

	snprintf(g_bin, sizeof(g_bin), "%s/shmtrace-collector", bin ? bin : "build");
	if (access(g_bin, X_OK) != 0) {
		fprintf(stderr, "%s not built\n", g_bin);
		return -1;
	}
	return 0;
}

/* Creates ring with config c (NULL: the defaults) and stamps it with
 * major and compat version 99: a ring of a format no collector reads. */
static inline void ring_of_another_version(const char *ring, const struct shmtrace_ring_config *c)
{
	const uint16_t major = 99;
	char path[256];
	int fd;

	assert_int_equal(shmtrace_ring_create(ring, c), 0);
	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &major, 2, offsetof(struct shmt_header, major)), 2);
	assert_int_equal(pwrite(fd, &major, 2, offsetof(struct shmt_header, compat)), 2);
	close(fd);
}

#endif
