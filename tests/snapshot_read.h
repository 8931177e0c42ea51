/* SPDX-License-Identifier: MIT */
/*
 * snapshot_read.h - what the snapshot tests share: a snapshot file read
 * back whole through the capture reader (its header, records with their
 * sequences, strings, name slots, loss frame), the records of one producer
 * checked against the indexes the test wrote into them, and a producer
 * that writes them into a ring until it is stopped.
 */
#ifndef SHMTRACE_TEST_SNAPSHOT_READ_H
#define SHMTRACE_TEST_SNAPSHOT_READ_H

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "capture.h"
#include "helpers.h"

struct snap_file {
	struct shmt_cap_header h;
	struct shmt_record *r;
	uint64_t *seq;
	size_t n, cap;
	char *str[65536];
	struct shmt_thread thr[256];
	size_t nthr;
	struct shmt_cap_loss loss;
	bool ended;
};

/* Reads the snapshot at path into s (snap_free() it). */
static inline void snap_read(const char *path, struct snap_file *s)
{
	struct shmt_cap_reader *rd;
	struct shmt_cap_frame f;
	char e[512];
	int ret;

	memset(s, 0, sizeof(*s));
	ret = shmt_cap_open(path, &rd, e, sizeof(e));
	if (ret < 0)
		fprintf(stderr, "%s\n", e);
	assert_int_equal(ret, 0);
	s->h = *shmt_cap_header_of(rd);
	while ((ret = shmt_cap_next(rd, &f, e, sizeof(e))) == 1) {
		if (f.type == SHMT_CAP_STRINGS) {
			for (size_t i = 0; i < f.strings.n; i++)
				s->str[f.strings.v[i].id] = strdup(f.strings.v[i].s);
		} else if (f.type == SHMT_CAP_THREADS) {
			for (size_t i = 0; i < f.threads.n && s->nthr < 256; i++)
				s->thr[s->nthr++] = f.threads.v[i];
		} else if (f.type == SHMT_CAP_LOSS) {
			s->loss = f.loss;
		} else if (f.type == SHMT_CAP_END) {
			s->ended = true;
		} else if (f.type == SHMT_CAP_RECORDS) {
			if (s->n + f.records.n > s->cap) {
				s->cap = (s->n + f.records.n) * 2;
				s->r = realloc(s->r, s->cap * sizeof(*s->r));
				s->seq = realloc(s->seq, s->cap * sizeof(*s->seq));
				assert_true(s->r && s->seq);
			}
			for (size_t i = 0; i < f.records.n; i++) {
				s->r[s->n] = f.records.v[i];
				s->seq[s->n++] = f.records.first_seq + i;
			}
		}
	}
	if (ret < 0)
		fprintf(stderr, "%s\n", e);
	assert_int_equal(ret, 0);
	shmt_cap_close(rd);
}

static inline void snap_free(struct snap_file *s)
{
	for (size_t i = 0; i < 65536; i++)
		free(s->str[i]);
	free(s->r);
	free(s->seq);
}

/* The id of string text in s, or 0. */
static inline uint32_t snap_string(const struct snap_file *s, const char *text)
{
	for (uint32_t i = 1; i < 65536; i++)
		if (s->str[i] && !strcmp(s->str[i], text))
			return i;
	return 0;
}

/* Whether s has a name slot of pid naming the process pname. */
static inline bool snap_has_process(const struct snap_file *s, uint32_t pid, const char *pname)
{
	for (size_t i = 0; i < s->nthr; i++)
		if (s->thr[i].pid == pid && !strcmp(s->thr[i].pname, pname))
			return true;
	return false;
}

/* Whether s has a name slot of thread tid of pid named tname. */
static inline bool snap_has_thread(const struct snap_file *s, uint32_t pid, uint32_t tid,
				   const char *tname)
{
	for (size_t i = 0; i < s->nthr; i++)
		if (s->thr[i].pid == pid && s->thr[i].tid == tid && !strcmp(s->thr[i].name, tname))
			return true;
	return false;
}

/* The thread of pid whose first span in s is named name (0: none). */
static inline uint32_t snap_tid_of(const struct snap_file *s, uint32_t pid, uint32_t name)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->r[i].pid == pid && s->r[i].name == name && s->r[i].commit == SHMTRACE_KIND_SPAN)
			return s->r[i].tid;
	return 0;
}

/* What the records of one producer thread (pid, tid; spans named name
 * whose dur is the index the test wrote, flow index * 7 + 1 when flows)
 * say: the indexes found, once each, none torn, and how many are missing
 * between the lowest and the highest. */
struct snap_tally {
	uint64_t lo, hi, found, missing, dup, torn;
};

static int snap_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static inline void snap_tally(const struct snap_file *s, uint32_t pid, uint32_t tid, uint32_t name,
			      bool flows, struct snap_tally *t)
{
	uint64_t *ix = calloc(s->n + 1, sizeof(*ix)), prev_ts = 0, prev_i = 0;
	size_t k = 0;

	memset(t, 0, sizeof(*t));
	assert_non_null(ix);
	for (size_t i = 0; i < s->n; i++) {
		const struct shmt_record *r = &s->r[i];

		if (r->pid != pid || r->tid != tid || r->commit != SHMTRACE_KIND_SPAN ||
		    r->name != name)
			continue;
		/* a torn record mixes two: its flow is not its index's, or
		 * its start not in its index's order among the others */
		if ((flows && r->flow != r->dur * 7 + 1) ||
		    (k && r->dur > prev_i && r->ts < prev_ts)) {
			t->torn++;
			continue;
		}
		prev_ts = r->ts;
		prev_i = r->dur;
		ix[k++] = r->dur;
	}
	qsort(ix, k, sizeof(*ix), snap_cmp_u64);
	for (size_t i = 0; i < k; i++) {
		if (i && ix[i] == ix[i - 1]) {
			t->dup++;
			continue;
		}
		if (i)
			t->missing += ix[i] - ix[i - 1] - 1;
		t->found++;
	}
	t->lo = k ? ix[0] : 0;
	t->hi = k ? ix[k - 1] : 0;
	free(ix);
}

/* One thread of churn(): spans "tick" whose dur is their index. */
struct churn_thread {
	shmtrace_t *t;
	int k, ready;
	uint64_t wrap;
	bool flows;
};

/* Set by churn_pause(): churn's threads stop between two span calls (no
 * call under way, none holding the lock) until churn_resume() clears it;
 * shared with the forked producer. */
static int *churn_paused;

/* A churn thread at its pause point: says so on the ready pipe, then
 * waits for the flag to clear. */
static void churn_pause_point(const struct churn_thread *c)
{
	if (!__atomic_load_n(churn_paused, __ATOMIC_ACQUIRE))
		return;
	if (write(c->ready, "p", 1) != 1)
		_exit(5);
	while (__atomic_load_n(churn_paused, __ATOMIC_ACQUIRE))
		usleep(1000);
}

static void *churn_run(void *arg)
{
	struct churn_thread *c = arg;
	uint32_t cat = shmtrace_intern(c->t, "test"), name = shmtrace_intern(c->t, "tick");
	char tn[32];

	snprintf(tn, sizeof(tn), "churner-%d", c->k);
	shmtrace_set_thread_name(c->t, tn);
	for (uint64_t i = 0;; i++) {
		uint64_t t0 = shmtrace_now();

		shmtrace_span(c->t, cat, name, t0, t0 + i, c->flows ? i * 7 + 1 : 0);
		if (i == c->wrap && write(c->ready, "w", 1) != 1)
			_exit(5);
		churn_pause_point(c);
	}
	return NULL;
}

/*
 * A producer process "churn" of n threads ("churner-K") writing spans
 * "tick" (category "test") at full speed, each dur its index in its
 * thread, and flow index * 7 + 1 with flows, until killed; once each
 * thread has written wrap records it writes a byte to *ready (a pipe,
 * read end returned there). Its calls wait for the lock, up to a minute.
 */
static inline pid_t churn_start(const char *ring, int n, uint64_t wrap, bool flows, int *ready)
{
	int p[2];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	if (!churn_paused) {
		churn_paused = mmap(NULL, sizeof(*churn_paused), PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		assert_true(churn_paused != MAP_FAILED);
	}
	*churn_paused = 0;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct churn_thread c[8];
		pthread_t th[8];
		shmtrace_t *t;

		/* a failed assertion must not leave a producer behind */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		/* every record in the ring, or the copy's to count: a thread
		 * waits for the lock however long a sanitizer-slowed peer's
		 * flush holds it, never drops at the span call's 2 ms */
		setenv("SHMTRACE_LOCK_TIMEOUT_MS", "60000", 1);
		if (shmtrace_open(ring, &t) < 0)
			_exit(3);
		shmtrace_set_process_name(t, "churn");
		for (int k = 0; k < n && k < 8; k++) {
			c[k] = (struct churn_thread){ t, k, p[1], wrap, flows };
			if (pthread_create(&th[k], NULL, churn_run, &c[k]))
				_exit(4);
		}
		pthread_join(th[0], NULL);
		_exit(0);
	}
	close(p[1]);
	for (int k = 0; k < n; k++) {
		char c;

		assert_int_equal(read(p[0], &c, 1), 1);
	}
	*ready = p[0];
	return pid;
}

/* Stops churn's n threads between span calls and returns once all of
 * them have: what they wrote no longer moves. */
static inline void churn_pause(int ready, int n)
{
	__atomic_store_n(churn_paused, 1, __ATOMIC_RELEASE);
	for (int k = 0; k < n; k++) {
		char c;

		assert_int_equal(read(ready, &c, 1), 1);
		assert_int_equal(c, 'p');
	}
}

static inline void churn_resume(void)
{
	__atomic_store_n(churn_paused, 0, __ATOMIC_RELEASE);
}

static inline void churn_stop(pid_t pid, int ready)
{
	int status;

	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	close(ready);
}

#endif
