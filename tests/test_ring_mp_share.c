/* SPDX-License-Identifier: MIT */
/*
 * test_ring_mp_share.c - many processes sharing one ring: exact accounting
 * against a draining reader, fork, readers racing overwrites, and another
 * pid namespace. Producers killed inside the lock, and the lock itself:
 * test_ring_mp.c.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>

#include "mp_records.h"

static void produce(const char *name, uint64_t from, uint64_t n)
{
	shmtrace_t *t;
	uint64_t ts, dur, flow;

	if (shmtrace_open(name, &t) < 0)
		_exit(3);
	for (uint64_t i = from; i < from + n; i++) {
		fill(i, &ts, &dur, &flow);
		shmtrace_span(t, 2, 1, ts, ts + dur, flow);
	}
	shmtrace_close(t);
}

struct drainer {
	const char *name;
	volatile int stop;
	uint64_t got, bad;
	uint8_t *seen;		/* per producer, per i */
	uint32_t *pids;
	int nproc;
	uint64_t per;
};

static void note(struct drainer *d, const struct shmt_record *r)
{
	if (!whole(r) || r->ts >= d->per) {
		d->bad++;
		return;
	}
	for (int p = 0; p < d->nproc; p++) {
		if (d->pids[p] != r->pid)
			continue;
		d->seen[(uint64_t)p * d->per + r->ts]++;
		d->got++;
		return;
	}
	d->bad++;
}

/* A minimal collector: reads up to head, then releases the tail. */
static void *drain_thread(void *arg)
{
	struct drainer *d = arg;
	struct shmt_view v;
	struct shmt_record r;
	char err[256];
	uint64_t pos = 0;
	bool last = false;

	assert_int_equal(shmt_view_open(d->name, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	for (;;) {
		uint64_t head = shmt_ring_head(&v);

		for (; pos < head; pos++) {
			if (shmt_ring_read(&v, pos, &r) == 0)
				note(d, &r);
			else
				d->bad++;
		}
		store_release(&v.h->tail.v, pos);
		if (last)
			break;
		if (__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE))
			last = true;	/* one more pass after the producers are gone */
		else
			sched_yield();
	}
	shmt_view_close(&v);
	return NULL;
}

static void test_many_processes_exact_accounting(void **state)
{
	const char *name = test_ring_name("mp");
	enum { NPROC = 4, PER = 200000 };
	struct shmtrace_ring_config c = { .capacity = 1 << 14 };
	uint32_t pids[NPROC];
	struct drainer d = { .name = name, .nproc = NPROC, .per = PER, .pids = pids };
	struct shmtrace_stats st;
	pthread_t th;
	shmtrace_t *t;
	uint64_t dups = 0, missing = 0;
	int go[2];

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	d.seen = calloc((size_t)NPROC * PER, 1);
	assert_non_null(d.seen);
	/* the children wait on a pipe until the drainer knows their pids */
	assert_int_equal(pipe(go), 0);
	for (int p = 0; p < NPROC; p++) {
		pid_t pid = fork();

		if (pid == 0) {
			char c;

			close(go[1]);
			if (read(go[0], &c, 1) != 0)
				_exit(5);
			produce(name, 0, PER);
			_exit(0);
		}
		pids[p] = (uint32_t)pid;
	}
	close(go[0]);
	assert_int_equal(pthread_create(&th, NULL, drain_thread, &d), 0);
	close(go[1]);	/* EOF: go */
	for (int p = 0; p < NPROC; p++) {
		int status;

		assert_int_equal(waitpid((pid_t)pids[p], &status, 0), (pid_t)pids[p]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	__atomic_store_n(&d.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);

	assert_int_equal(shmtrace_open(name, &t), 0);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	shmtrace_close(t);
	for (uint64_t i = 0; i < (uint64_t)NPROC * PER; i++) {
		dups += d.seen[i] > 1;
		missing += d.seen[i] == 0;
	}
	print_message("written %d, drained %llu, dropped %llu\n", NPROC * PER,
		      (unsigned long long)d.got, (unsigned long long)st.dropped);
	assert_int_equal(d.bad, 0);
	assert_int_equal(dups, 0);
	/* published + dropped = written, and what is missing is what was dropped */
	assert_int_equal(d.got + st.dropped, (uint64_t)NPROC * PER);
	assert_int_equal(missing, st.dropped);
	free(d.seen);
	shmtrace_ring_unlink(name);
}

static void test_fork_child_records_own_pid(void **state)
{
	const char *name = test_ring_name("fork");
	struct ring_dump d;
	shmtrace_t *t;
	int status;
	pid_t pid;
	size_t mine = 0, child = 0;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	assert_int_equal(shmtrace_span(t, 1, 1, 1, 2, 0), 0);
	pid = fork();
	if (pid == 0) {
		for (int i = 0; i < 100; i++)
			shmtrace_span(t, 1, 1, 10, 20, 0);
		shmtrace_close(t);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(shmtrace_span(t, 1, 1, 3, 4, 0), 0);
	ring_dump(name, &d);
	for (size_t i = 0; i < d.n; i++) {
		mine += d.recs[i].pid == (uint32_t)getpid();
		child += d.recs[i].pid == (uint32_t)pid && d.recs[i].tid == (uint32_t)pid;
	}
	assert_int_equal(mine, 2);
	assert_int_equal(child, 100);
	free(d.recs);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

/* Reads the last 256 sequences below the head: each record accepted is
 * whole (counted in *accepted), or rejected (counted). */
static void read_last_lap(const struct shmt_view *v, uint64_t *accepted, uint64_t *rejected)
{
	uint64_t head = shmt_ring_head(v);
	struct shmt_record r;

	for (uint64_t s = head > 256 ? head - 256 : 0; s < head; s++) {
		if (shmt_ring_read(v, s, &r) == 0) {
			assert_true(whole(&r));
			(*accepted)++;
		} else {
			(*rejected)++;
		}
	}
}

/* Two producers overwrite a small ring while a reader reads it without the
 * lock: every record the reader accepts is whole. */
static void test_overwrite_readers_never_see_torn(void **state)
{
	const char *name = test_ring_name("owr");
	struct shmtrace_ring_config c = { .capacity = 256, .mode = SHMTRACE_MODE_OVERWRITE };
	struct shmt_view v;
	char err[256];
	uint64_t accepted = 0, rejected = 0;
	pid_t pids[2];

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	for (int p = 0; p < 2; p++) {
		pids[p] = fork();
		if (pids[p] == 0) {
			produce(name, 0, 300000);
			_exit(0);
		}
	}
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
	while (pids[0] || pids[1]) {
		int status;

		read_last_lap(&v, &accepted, &rejected);
		for (int p = 0; p < 2; p++)
			if (pids[p] && waitpid(pids[p], &status, WNOHANG) == pids[p])
				pids[p] = 0;
	}
	print_message("accepted %llu, rejected %llu while overwriting\n",
		      (unsigned long long)accepted, (unsigned long long)rejected);
	/* the reader accepts at all: the ring, still, read once more */
	accepted = 0;
	read_last_lap(&v, &accepted, &rejected);
	assert_int_equal(accepted, 256);
	shmt_view_close(&v);
	shmtrace_ring_unlink(name);
}

/* A producer in another pid namespace is refused: its pids would collide
 * with the ring's (root only: unshare needs CAP_SYS_ADMIN). */
static void test_other_pid_namespace_refused(void **state)
{
	const char *name = test_ring_name("pidns");
	int status;
	pid_t pid;

	(void)state;
	if (geteuid() != 0) {
		print_message("not root; skipped\n");
		skip();
	}
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	pid = fork();
	if (pid == 0) {
		pid_t inner;

		if (unshare(CLONE_NEWPID) < 0)
			_exit(77);
		inner = fork();
		if (inner == 0) {
			shmtrace_t *t;

			if (shmtrace_open(name, &t) != -EXDEV)
				_exit(1);
			setenv("SHMTRACE_ALLOW_PIDNS", "1", 1);
			if (shmtrace_open(name, &t) != 0)
				_exit(2);
			shmtrace_close(t);
			_exit(0);
		}
		if (waitpid(inner, &status, 0) != inner)
			_exit(3);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 4);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77) {
		print_message("unshare(CLONE_NEWPID) not permitted here; skipped\n");
		shmtrace_ring_unlink(name);
		skip();
	}
	assert_int_equal(WEXITSTATUS(status), 0);
	shmtrace_ring_unlink(name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_processes_exact_accounting),
		cmocka_unit_test(test_fork_child_records_own_pid),
		cmocka_unit_test(test_overwrite_readers_never_see_torn),
		cmocka_unit_test(test_other_pid_namespace_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
