/* SPDX-License-Identifier: MIT */
/*
 * helpers.h - small shared pieces of the cmocka tests: ring names that the
 * runner can clean up, and reading a whole ring back through the reader.
 */
#ifndef SHMTRACE_TEST_HELPERS_H
#define SHMTRACE_TEST_HELPERS_H

#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "shmtrace.h"
#include "producer.h"
#include "loss.h"
#include "ring_reader.h"

/* How many of process pid's descriptors lead to a path that starts with
 * prefix, is not skip (NULL: none is) and, with removed, was removed
 * ("... (deleted)"): 0 when pid has no /proc entry. */
static inline int fds_to(pid_t pid, const char *prefix, const char *skip, bool removed)
{
	char dir[64], link[600], to[600];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	if (!(d = opendir(dir)))
		return 0;
	while ((e = readdir(d))) {
		ssize_t len;

		snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
		len = readlink(link, to, sizeof(to) - 1);
		if (len <= 0)
			continue;
		to[len] = 0;
		n += !strncmp(to, prefix, strlen(prefix)) && (!skip || strcmp(to, skip)) &&
		     (!removed || strstr(to, "(deleted)"));
	}
	closedir(d);
	return n;
}

/* A ring name unique to this test process, under the runner's prefix. */
static inline const char *test_ring_name(const char *what)
{
	static char buf[8][128];
	static int k;
	const char *prefix = getenv("SHMTRACE_TEST_PREFIX");
	char *b = buf[k++ % 8];

	snprintf(b, 128, "%sshmt-%s-%d", prefix ? prefix : "", what, (int)getpid());
	return b;
}

/* A ring configuration of capacity cap and mode, the rest defaults. */
static inline void small_cfg(struct shmtrace_ring_config *c, uint32_t cap, uint32_t mode)
{
	memset(c, 0, sizeof(*c));
	c->capacity = cap;
	c->mode = mode;
}

/* Maps ring read-write, as a peer (or a crash) could leave it. */
static inline void ring_view_rw(const char *ring, struct shmt_view *v)
{
	char err[256];

	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, v, err, sizeof(err)), 0);
}

/* A whole file as a NUL-terminated string (the caller frees it). */
/* The staging block the calling thread owns in v (fails the test if none). */
static inline struct shmt_block *block_of_this_thread(const struct shmt_view *v)
{
	for (uint32_t i = 0; i < v->nblocks; i++) {
		struct shmt_block *b = shmt_block_at(v, i);

		if (load_relaxed(&b->state) == SHMT_BLOCK_OWNED &&
		    load_relaxed(&b->tid) == (uint32_t)syscall(SYS_gettid))
			return b;
	}
	fail_msg("no block owned by this thread");
	return NULL;
}

static inline char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

/* How many times needle occurs in hay, without overlaps. */
static inline size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* One row of the fault figures that tests/run.sh prints at the end. With
 * acct, the row is about records, and it shows whether the accounting
 * equality (exported + counted losses = written) held. */
static inline void figure_row(bool acct, const char *kind, uint64_t injected, uint64_t written,
			      uint64_t exported, uint64_t dropped, uint64_t torn, uint64_t lost,
			      const char *note)
{
	printf("FIGURE|%s|%llu|%llu|%llu|%llu|%llu|%llu|%s|%s\n", kind,
	       (unsigned long long)injected, (unsigned long long)written,
	       (unsigned long long)exported, (unsigned long long)dropped,
	       (unsigned long long)torn, (unsigned long long)lost,
	       !acct ? "-" : exported + dropped == written && !lost ? "exact" : "NO", note);
	fflush(stdout);
}
#define figure(...)		figure_row(false, __VA_ARGS__)
#define figure_acct(...)	figure_row(true, __VA_ARGS__)

/* Everything a ring holds: published records plus staged ones. */
struct ring_dump {
	struct shmt_record *recs;
	size_t n;
	uint64_t torn;
};

static inline int ring_dump_one(void *arg, uint64_t seq, const struct shmt_record *r)
{
	struct ring_dump *d = arg;

	(void)seq;
	if (r)
		d->recs[d->n++] = *r;
	else
		d->torn++;
	return 0;
}

/* The records of a mapped ring, published (read as the tools read them:
 * slots and blocks sequenced in place) and staged. */
static inline void ring_dump_view(const struct shmt_view *v, struct ring_dump *d)
{
	struct shmt_ring_skips skips = { 0 };
	struct shmt_block_info bi;
	uint64_t head, from;

	memset(d, 0, sizeof(*d));
	head = shmt_ring_head(v);
	from = head > v->capacity ? head - v->capacity : 0;
	d->recs = calloc(head - from + (size_t)v->nblocks * v->block_records + 1, sizeof(*d->recs));
	assert_non_null(d->recs);
	assert_int_equal(shmt_ring_read_range(v, from, head, 0, &skips, ring_dump_one, d), 0);
	for (uint32_t i = 0; i < v->nblocks; i++)
		d->n += (size_t)shmt_ring_block_pending(v, i, &d->recs[d->n], &bi);
}

static inline void ring_dump(const char *name, struct ring_dump *d)
{
	struct shmt_view v;
	char err[256];

	assert_int_equal(shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	ring_dump_view(&v, d);
	shmt_view_close(&v);
}

/*
 * A process takes the ring's lock; then, stopped, stops inside it
 * (SIGSTOP: SIGCONT lets it unlock and exit 0), or else unmaps the ring
 * and exits holding it. Returns its pid once it has stopped or exited.
 */
static inline pid_t ring_lock_owner(const char *name, bool stopped)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		struct shmt_view v;
		char err[256];

		if (shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)) < 0 ||
		    shmt_lock(&v, 1000000000ull) < 0)
			_exit(3);
		if (stopped) {
			raise(SIGSTOP);
			shmt_unlock(&v);
		} else {
			munmap(v.base, v.size);
		}
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, stopped ? WUNTRACED : 0), pid);
	assert_true(stopped ? WIFSTOPPED(status) : WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return pid;
}

/* The kernel never reports that owner dead, and the lock stays held. */
static inline void ring_lock_by_unseen_dead_owner(const char *name)
{
	(void)ring_lock_owner(name, false);
}

/* Its pid, once it has stopped holding the lock. */
static inline pid_t ring_lock_by_stopped_owner(const char *name)
{
	return ring_lock_owner(name, true);
}

/* The pid of a child that has exited and been reaped: no process has it
 * (until the kernel hands it out again, a full cycle of pids later). */
static inline pid_t gone_pid(void)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return pid;
}

/* The loss counters of ring name, as a reader of the ring sees them. */
static inline void ring_loss(const char *name, struct shmt_loss *l)
{
	struct shmt_view v;
	char err[256];

	assert_int_equal(shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	shmt_loss_read(&v, l, true);
	shmt_view_close(&v);
}

/* How many of d's records come from pid. */
static inline uint64_t count_pid(const struct ring_dump *d, uint32_t pid)
{
	uint64_t n = 0;

	for (size_t i = 0; i < d->n; i++)
		n += d->recs[i].pid == pid;
	return n;
}

/* The flags of pid's name slots, or-ed. */
static inline uint32_t slot_flags(const char *ring, uint32_t pid)
{
	struct shmt_view v;
	struct shmt_thread t;
	uint32_t flags = 0;
	char err[256];

	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	for (uint32_t i = 0; i < shmt_ring_nthreads(&v); i++)
		if (shmt_ring_thread(&v, i, &t) == 0 && t.pid == pid)
			flags |= t.flags;
	shmt_view_close(&v);
	return flags;
}

#endif
