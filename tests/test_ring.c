/* SPDX-License-Identifier: MIT */
/*
 * test_ring.c - the ring's creation, validation, records and strings, in
 * one process.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <pthread.h>

#include <signal.h>
#include <sys/wait.h>

#include "helpers.h"

static void small_cfg(struct shmtrace_ring_config *c, uint32_t cap, uint32_t mode)
{
	memset(c, 0, sizeof(*c));
	c->capacity = cap;
	c->mode = mode;
}

static void test_create_open_close(void **state)
{
	const char *name = test_ring_name("create");
	shmtrace_t *t;
	struct stat st;
	char path[256];

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_ring_create(name, NULL), -EEXIST);
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(shmtrace_open(name, &t), 0);
	shmtrace_close(t);
	assert_int_equal(shmtrace_ring_unlink(name), 0);
	assert_int_equal(shmtrace_open(name, &t), -ENOENT);
	assert_null(t);
}

static void test_bad_names_and_config(void **state)
{
	struct shmtrace_ring_config c;
	shmtrace_t *t;

	(void)state;
	assert_int_equal(shmtrace_ring_create("", NULL), -EINVAL);
	assert_int_equal(shmtrace_ring_create("a/b", NULL), -EINVAL);
	assert_int_equal(shmtrace_ring_create("..", NULL), -EINVAL);
	assert_int_equal(shmtrace_open(NULL, &t), -EINVAL);
	small_cfg(&c, 1000, 0);	/* not a power of two */
	assert_int_equal(shmtrace_ring_create(test_ring_name("cfg"), &c), -EINVAL);
	small_cfg(&c, 1024, 7);
	assert_int_equal(shmtrace_ring_create(test_ring_name("cfg"), &c), -EINVAL);
	small_cfg(&c, 1024, 0);
	c.perm = 0666;	/* others may never write */
	assert_int_equal(shmtrace_ring_create(test_ring_name("cfg"), &c), -EINVAL);
}

static void test_group_mode_under_umask(void **state)
{
	const char *name = test_ring_name("group");
	struct shmtrace_ring_config c;
	char path[256];
	struct stat st;
	mode_t old = umask(077);

	(void)state;
	small_cfg(&c, 1024, 0);
	c.perm = 0660;
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	umask(old);
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0660);
	shmtrace_ring_unlink(name);
}

/* Rewrites bytes of a ring's segment as any local process could. */
static void poke(const char *name, off_t off, const void *buf, size_t len)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

static void test_refuses_foreign_segments(void **state)
{
	const char *name = test_ring_name("foreign");
	struct shmtrace_ring_config c;
	uint16_t major = SHMT_RING_MAJOR + 1, compat = SHMT_RING_MAJOR + 1;
	uint64_t magic = 0x1122334455667788ull, size;
	char path[256], err[256];
	struct shmt_view v;
	shmtrace_t *t;

	(void)state;
	small_cfg(&c, 1024, 0);
	snprintf(path, sizeof(path), "/dev/shm/%s", name);

	/* a newer major version that declares itself incompatible */
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	poke(name, offsetof(struct shmt_header, major), &major, 2);
	poke(name, offsetof(struct shmt_header, compat), &compat, 2);
	assert_int_equal(shmtrace_open(name, &t), -EPROTO);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "version"));
	shmtrace_ring_unlink(name);

	/* not a ring at all */
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	poke(name, 0, &magic, 8);
	assert_int_equal(shmtrace_open(name, &t), -EPROTO);
	shmtrace_ring_unlink(name);

	/* truncated: the header's size no longer matches the file */
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(truncate(path, 8192), 0);
	assert_int_equal(shmtrace_open(name, &t), -EBADMSG);
	assert_int_equal(truncate(path, 100), 0);
	assert_int_equal(shmtrace_open(name, &t), -EBADMSG);
	shmtrace_ring_unlink(name);

	/* a capacity that does not fit the segment */
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	size = 1u << 20;
	poke(name, offsetof(struct shmt_header, capacity), &size, 4);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), -EBADMSG);
	shmtrace_ring_unlink(name);

	/* a ring whose blocks do not have the size its capacity gives (format
	 * 1.3's 256 records in a ring of 1024, whose blocks hold 64 since
	 * 1.4): refused by name, not misread */
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	{
		uint32_t old = 256;

		poke(name, offsetof(struct shmt_header, block_records), &old, 4);
	}
	assert_int_equal(shmtrace_open(name, &t), -EBADMSG);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), -EBADMSG);
	assert_int_equal(shmt_block_records_for(1024), 64);
	assert_non_null(strstr(err, "block size 256 is not 64 records, as a ring of 1024 records has"));
	shmtrace_ring_unlink(name);

	/* writable by others */
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(chmod(path, 0666), 0);
	assert_int_equal(shmtrace_open(name, &t), -EPERM);
	shmtrace_ring_unlink(name);

	/* a symlink planted under the name is never followed */
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(shmtrace_open(name, &t), -ELOOP);
	assert_int_equal(shmtrace_ring_create(name, &c), -EEXIST);
	unlink(path);
}

static void test_records_round_trip(void **state)
{
	const char *name = test_ring_name("rt");
	struct ring_dump d;
	shmtrace_t *t;
	uint32_t cat, nm;
	char buf[64];
	struct shmt_view v;
	char err[256];

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	cat = shmtrace_intern(t, "cat");
	nm = shmtrace_intern(t, "work");
	assert_true(cat > 0 && nm > 0 && cat != nm);
	assert_int_equal(shmtrace_intern(t, "cat"), cat);
	assert_int_equal(shmtrace_span(t, cat, nm, 1000, 1500, 42), 0);
	assert_int_equal(shmtrace_instant(t, cat, nm, 7), 0);
	assert_int_equal(shmtrace_counter(t, cat, nm, -5), 0);
	/* staged, not yet in the ring, but already readable post-mortem */
	ring_dump(name, &d);
	assert_int_equal(d.n, 3);
	free(d.recs);
	assert_int_equal(shmtrace_flush(t), 0);
	ring_dump(name, &d);
	assert_int_equal(d.n, 3);
	assert_int_equal(d.torn, 0);
	assert_int_equal(SHMT_COMMIT_KIND(d.recs[0].commit), SHMTRACE_KIND_SPAN);
	assert_int_equal(d.recs[0].ts, 1000);
	assert_int_equal(d.recs[0].dur, 500);
	assert_int_equal(d.recs[0].flow, 42);
	assert_int_equal(d.recs[0].pid, getpid());
	assert_int_equal(d.recs[0].tid, gettid());
	assert_int_equal(d.recs[0].name, nm);
	assert_int_equal(d.recs[0].cat, cat);
	assert_int_equal(SHMT_COMMIT_KIND(d.recs[1].commit), SHMTRACE_KIND_INSTANT);
	assert_int_equal(d.recs[1].flow, 7);
	assert_int_equal(SHMT_COMMIT_KIND(d.recs[2].commit), SHMTRACE_KIND_COUNTER);
	assert_int_equal((int64_t)d.recs[2].dur, -5);
	free(d.recs);

	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
	assert_int_equal(shmt_ring_string(&v, nm, buf, sizeof(buf)), 4);
	assert_string_equal(buf, "work");
	assert_int_equal(shmt_ring_string(&v, 60000, buf, sizeof(buf)), -ENOENT);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

static void test_strings_stored_intact(void **state)
{
	static const char *odd[] = {
		"quote\"back\\slash", "ctl\x01\x1f\ttab\nnl", "bad\xff\xfe utf8", "\xc3\x28",
		"caf\xc3\xa9", "\xed\xa0\x80 surrogate",
	};
	const char *name = test_ring_name("str");
	struct shmt_view v;
	char err[256], buf[128];
	uint32_t id[6];
	shmtrace_t *t;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	for (int i = 0; i < 6; i++)
		id[i] = shmtrace_intern(t, odd[i]);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(shmt_ring_string(&v, id[i], buf, sizeof(buf)), (int)strlen(odd[i]));
		assert_memory_equal(buf, odd[i], strlen(odd[i]));
	}
	shmt_view_close(&v);
	assert_int_equal(shmtrace_intern(t, NULL), 0);
	assert_int_equal(shmtrace_intern(t, ""), 0);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

static void test_string_table_full(void **state)
{
	const char *name = test_ring_name("full");
	struct shmtrace_ring_config c;
	shmtrace_t *t;
	char s[32];
	uint32_t last = 0;

	(void)state;
	small_cfg(&c, 1024, 0);
	c.max_strings = 8;
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	for (int i = 0; i < 8; i++) {
		snprintf(s, sizeof(s), "s%d", i);
		last = shmtrace_intern(t, s);
		assert_true(last > 0);
	}
	assert_int_equal(shmtrace_intern(t, "one too many"), 0);
	assert_int_equal(shmtrace_intern(t, "s7"), last);	/* old ones still resolve */
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

/* With no reader, a discard ring keeps the first records and counts the
 * rest; an overwrite ring keeps the last and counts what it overwrote. */
static void fill_unread(uint32_t mode, uint64_t *dropped, uint64_t *overwritten, struct ring_dump *d)
{
	const char *name = test_ring_name(mode ? "ow" : "disc");
	struct shmtrace_ring_config c;
	struct shmtrace_stats st;
	shmtrace_t *t;

	small_cfg(&c, 1024, mode);
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	for (uint64_t i = 0; i < 5000; i++)
		assert_true(shmtrace_span(t, 1, 1, i, i + 1, 0) == 0 || mode == 0);
	shmtrace_flush(t);
	assert_int_equal(shmtrace_stats(t, &st), 0);
	*dropped = st.dropped;
	*overwritten = st.overwritten;
	shmtrace_close(t);
	ring_dump(name, d);
	shmtrace_ring_unlink(name);
}

static void test_discard_accounting(void **state)
{
	uint64_t dropped, overwritten;
	struct ring_dump d;

	(void)state;
	fill_unread(SHMTRACE_MODE_DISCARD, &dropped, &overwritten, &d);
	assert_int_equal(d.n, 1024);
	assert_int_equal(dropped, 5000 - 1024);
	assert_int_equal(overwritten, 0);
	assert_int_equal(d.torn, 0);
	for (size_t i = 0; i < d.n; i++)
		assert_int_equal(d.recs[i].ts, i);	/* the first ones are kept */
	free(d.recs);
}

static void test_overwrite_accounting(void **state)
{
	uint64_t dropped, overwritten;
	struct ring_dump d;

	(void)state;
	fill_unread(SHMTRACE_MODE_OVERWRITE, &dropped, &overwritten, &d);
	assert_int_equal(d.n, 1024);
	assert_int_equal(dropped, 0);
	assert_int_equal(overwritten, 5000 - 1024);
	assert_int_equal(d.torn, 0);
	for (size_t i = 0; i < d.n; i++)
		assert_int_equal(d.recs[i].ts, 5000 - 1024 + i);	/* the last ones */
	free(d.recs);
}

static void test_reader_rejects_unfinished(void **state)
{
	const char *name = test_ring_name("torn");
	struct shmt_record r;
	struct shmt_view v;
	char err[256];
	shmtrace_t *t;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	for (int i = 0; i < 100; i++)
		shmtrace_span(t, 1, 1, i, i + 1, 0);
	shmtrace_flush(t);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	assert_int_equal(shmt_ring_read(&v, 5, &r), 0);
	v.records[5].commit = 0;				/* half-written */
	assert_int_equal(shmt_ring_read(&v, 5, &r), -EAGAIN);
	v.records[6].commit = SHMT_COMMIT(6 + 1, 1);		/* another sequence */
	assert_int_equal(shmt_ring_read(&v, 6, &r), -EAGAIN);
	v.records[7].commit = SHMT_COMMIT(7, 200);		/* unknown kind */
	assert_int_equal(shmt_ring_read(&v, 7, &r), -EAGAIN);
	assert_int_equal(shmt_ring_read(&v, 100, &r), -EAGAIN);	/* never written */
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

static void *thread_body(void *arg)
{
	shmtrace_t *t = arg;

	shmtrace_set_thread_name(t, "worker-thread");
	for (int i = 0; i < 10; i++)
		shmtrace_span(t, 1, 1, i, i + 1, 0);
	return NULL;	/* exit flushes the block and frees it */
}

static void test_thread_exit_flushes(void **state)
{
	const char *name = test_ring_name("thr");
	struct shmt_view v;
	struct shmt_thread th;
	char err[256];
	pthread_t p;
	shmtrace_t *t;
	char last[SHMT_NAME_LEN] = "";

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	assert_int_equal(pthread_create(&p, NULL, thread_body, t), 0);
	pthread_join(p, NULL);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
	assert_int_equal(shmt_ring_head(&v), 10);
	for (uint32_t i = 0; i < v.nblocks; i++)
		assert_int_equal(load_relaxed(&shmt_block_at(&v, i)->state), SHMT_BLOCK_FREE);
	for (uint32_t i = 0; i < shmt_ring_nthreads(&v); i++) {
		assert_int_equal(shmt_ring_thread(&v, i, &th), 0);
		if (th.pid == (uint32_t)getpid() && th.tid != (uint32_t)gettid())
			memcpy(last, th.name, sizeof(last));
	}
	/* the last slot wins: a name set before the first record survives
	 * the slot the first record adds */
	assert_string_equal(last, "worker-thread");
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

static void test_scope_macro_and_default(void **state)
{
	const char *name = test_ring_name("scope");
	struct ring_dump d;
	struct shmt_view v;
	char err[256], buf[64];

	(void)state;
	assert_null(shmtrace_default);
	{
		SHMTRACE_SCOPE("cat", "off");	/* no default handle: records nothing */
	}
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_default_open(name), 0);
	assert_non_null(shmtrace_default);
	{
		SHMTRACE_SCOPE_FLOW("cat", "scoped", 99);
		SHMTRACE_INSTANT("cat", "mark", 0);
		SHMTRACE_COUNTER("cat", "depth", 3);
	}
	ring_dump(name, &d);
	assert_int_equal(d.n, 3);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
	/* the span is recorded at scope exit, after the instant and counter */
	assert_int_equal(SHMT_COMMIT_KIND(d.recs[2].commit), SHMTRACE_KIND_SPAN);
	assert_int_equal(d.recs[2].flow, 99);
	shmt_ring_string(&v, d.recs[2].name, buf, sizeof(buf));
	assert_string_equal(buf, "scoped");
	shmt_ring_string(&v, d.recs[1].name, buf, sizeof(buf));
	assert_string_equal(buf, "depth");
	assert_int_equal((int64_t)d.recs[1].dur, 3);
	shmt_view_close(&v);
	free(d.recs);
	assert_int_equal(shmtrace_default_open(NULL), 0);
	assert_null(shmtrace_default);
	shmtrace_ring_unlink(name);
}

static void test_clock_monotonic_and_flow_ids(void **state)
{
	const char *name = test_ring_name("clk");
	uint64_t a, b, f1, f2;
	shmtrace_t *t;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	a = shmtrace_now();
	b = shmtrace_now();
	assert_true(b >= a);
	/* the ring clock tracks CLOCK_MONOTONIC (calibration error is ppm) */
	a = shmtrace_now();
	b = shmt_mono_ns();
	assert_true(a > b - 5000000 && a < b + 5000000);
	f1 = shmtrace_flow_new(t);
	f2 = shmtrace_flow_new(t);
	assert_true(f1 && f2 && f1 != f2 && f2 < (1ull << 53));
	assert_int_equal(shmtrace_flow_new(NULL), 0);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

/*
 * A peer scribbles the published string count and every hash slot: the
 * lookup must stay inside the validated table (it used to bound ids by
 * the header's count and read past the segment).
 */
static void test_intern_scribbled_table(void **state)
{
	const char *name = test_ring_name("scrib");
	struct shmtrace_ring_config c;
	struct shmt_view v;
	char err[256];
	int status;
	pid_t kid;

	(void)state;
	small_cfg(&c, 64, 0);
	c.max_strings = 8;
	c.string_bytes = 4096;
	c.max_threads = 4;
	c.blocks = 2;
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	/* strings[60000] lies far past this small segment */
	assert_true(v.h->strings_off + 60000ull * sizeof(struct shmt_string) > v.size);
	v.h->strings = 65535;
	for (uint32_t i = 0; i < v.hash_slots; i++)
		v.hash[i] = 60000;
	kid = fork();
	if (kid == 0) {
		shmtrace_t *t;

		/* a fault kills the child, not cmocka's handler in it */
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		if (shmtrace_open(name, &t) < 0)
			_exit(3);
		/* the table is "full" by its count: refused, never read past */
		_exit(shmtrace_intern(t, "new") == 0 ? 0 : 4);
	}
	assert_int_equal(waitpid(kid, &status, 0), kid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	/* the lock-free reader, every index a peer can choose: bounded by the
	 * validated tables, whatever the header's counts say */
	v.h->threads = 65535;
	assert_true(v.h->threads_off + 60000ull * sizeof(struct shmt_thread) > v.size);
	kid = fork();
	if (kid == 0) {
		struct shmt_view r;
		struct shmt_thread th;
		struct shmt_block_info info;
		struct shmt_record recs[64];
		char buf[64];

		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		if (shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &r, buf, sizeof(buf)) < 0)
			_exit(3);
		if (shmt_ring_nstrings(&r) != r.max_strings + 1 ||
		    shmt_ring_nthreads(&r) != r.max_threads)
			_exit(4);
		for (uint32_t id = 0; id < 65536; id++)
			if (shmt_ring_string(&r, id, buf, sizeof(buf)) >= 0 && id > r.max_strings)
				_exit(5);
		for (uint32_t i = 0; i < 65536; i++)
			if (shmt_ring_thread(&r, i, &th) == 0 && i >= r.max_threads)
				_exit(6);
		for (uint32_t i = 0; i < 65536; i++)
			if (shmt_ring_block_pending(&r, i, recs, &info) != 0 && i >= r.nblocks)
				_exit(7);
		/* and the accessors themselves */
		if (shmt_string_at(&r, 60000) || shmt_thread_at(&r, 60000) ||
		    shmt_hash_at(&r, r.hash_slots) || shmt_block_at(&r, r.nblocks))
			_exit(8);
		_exit(0);
	}
	assert_int_equal(waitpid(kid, &status, 0), kid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	shmt_view_close(&v);
	shmtrace_ring_unlink(name);
}

/* An open span keeps its flow id, ring-local or this ring's global one. */
static void test_open_span_keeps_flow(void **state)
{
	const char *name = test_ring_name("openflow");
	struct shmtrace_ring_config c;
	struct shmtrace_open_span sp[3];
	struct shmt_record r[SHMT_OPEN_MAX];
	uint64_t global, foreign;
	struct shmt_view v;
	char err[256];
	shmtrace_t *t;
	uint32_t n = 0, cat;

	(void)state;
	small_cfg(&c, 1024, 0);
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	cat = shmtrace_intern(t, "c");
	global = shmtrace_flow_new(t);
	assert_true(global > UINT32_MAX);	/* this ring's global series */
	foreign = global ^ (1ull << 40);	/* another ring's prefix */
	assert_int_equal(shmtrace_begin(t, &sp[0], cat, cat, global), 0);
	assert_int_equal(shmtrace_begin(t, &sp[1], cat, cat, 77), 0);
	assert_int_equal(shmtrace_begin(t, &sp[2], cat, cat, foreign), 0);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	for (uint32_t i = 0; i < v.nblocks && !n; i++)
		n = shmt_block_open_spans(&v, i, r);
	assert_int_equal(n, 3);
	assert_true(r[0].flow == global);
	assert_int_equal(r[1].flow, 77);
	assert_int_equal(r[2].flow, 0);	/* not kept: 32 bits cannot hold it */
	for (int i = 2; i >= 0; i--)
		assert_int_equal(shmtrace_end(&sp[i]), 0);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

/*
 * Ring format 1.4: a staging block holds 1/64 of the ring (64 to 4096
 * records), as the header says, and a thread moves nothing into the ring
 * until half its block is staged: in the default ring (256K records) and
 * larger ones the flush comes once per 2048 calls, rarer than the p99.9
 * call (docs/DESIGN.md).
 */
static void test_block_grows_with_ring(void **state)
{
	static const uint32_t caps[] = { 1024, 16384, 1u << 18 };
	const char *name = test_ring_name("blocksize");

	(void)state;
	assert_int_equal(shmt_block_records_for(2), 64);
	assert_int_equal(shmt_block_records_for(1u << 14), 256);
	assert_int_equal(shmt_block_records_for(1u << 18), 4096);
	assert_int_equal(shmt_block_records_for(SHMT_MAX_CAPACITY), 4096);
	for (size_t k = 0; k < sizeof(caps) / sizeof(caps[0]); k++) {
		struct shmtrace_ring_config c = { .capacity = caps[k] };
		uint64_t block = shmt_block_records_for(caps[k]);
		struct shmtrace_stats st;
		struct shmt_view v;
		char err[256];
		shmtrace_t *t;

		assert_int_equal(shmtrace_ring_create(name, &c), 0);
		assert_int_equal(shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
		assert_int_equal(v.block_records, block);
		assert_int_equal(v.h->block_records, block);
		shmt_view_close(&v);
		assert_int_equal(shmtrace_open(name, &t), 0);
		for (uint64_t i = 0; i < block / 2; i++)
			assert_int_equal(shmtrace_span(t, 1, 1, i, i + 1, 0), 0);
		assert_int_equal(shmtrace_stats(t, &st), 0);
		assert_int_equal(st.head, 0);	/* all staged */
		assert_int_equal(shmtrace_span(t, 1, 1, 0, 1, 0), 0);
		assert_int_equal(shmtrace_stats(t, &st), 0);
		assert_int_equal(st.head, block / 2);	/* the next call moved them */
		shmtrace_close(t);
		shmtrace_ring_unlink(name);
	}
}

/*
 * A fresh process opening the ring: 0 if shmtrace_now() agrees with
 * CLOCK_MONOTONIC within a millisecond, 1 if not, 2 if it cannot open it.
 * Run as `test_ring clock-child NAME`, so that no ring of this process
 * has set the clock before (the first ring a process attaches does).
 */
static int clock_child(const char *name)
{
	struct timespec ts;
	shmtrace_t *t;
	uint64_t now, mono;

	if (shmtrace_open(name, &t) < 0)
		return 2;
	now = shmtrace_now();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	mono = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	shmtrace_close(t);
	return (now > mono ? now - mono : mono - now) < 1000000 ? 0 : 1;
}

static int run_clock_child(const char *name)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		execl("/proc/self/exe", "test_ring", "clock-child", name, (char *)NULL);
		_exit(3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/*
 * The creator's TSC conversion uses shift 24, and producers convert with
 * that constant: a ring whose header states another shift (a peer wrote
 * it), here 28 with a mult that goes with 28, is read with
 * CLOCK_MONOTONIC. Converted with the constant 24 instead, that mult would
 * make a clock 16 times too fast, off by more than a millisecond by the
 * time the child has been exec'd.
 */
static void test_foreign_clock_shift_not_used(void **state)
{
	const char *name = test_ring_name("shift");
	struct shmtrace_ring_config c;
	struct shmt_view v;
	char err[256];
	uint32_t shift = 28, mult, tsc_ok;

	(void)state;
	small_cfg(&c, 1024, 0);
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	tsc_ok = v.clock.tsc_ok;
	mult = v.clock.mult << 4;
	assert_true(!tsc_ok || (v.clock.shift == 24 && mult >> 4 == v.clock.mult));
	shmt_view_close(&v);
	if (!tsc_ok) {
		shmtrace_ring_unlink(name);
		skip();	/* no invariant TSC here: the ring clock is CLOCK_MONOTONIC anyway */
	}
	assert_int_equal(run_clock_child(name), 0);	/* the TSC, converted right */
	poke(name, offsetof(struct shmt_header, clock.shift), &shift, 4);
	poke(name, offsetof(struct shmt_header, clock.mult), &mult, 4);
	assert_int_equal(run_clock_child(name), 0);	/* not used: CLOCK_MONOTONIC */
	shmtrace_ring_unlink(name);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "clock-child"))
		return clock_child(argv[2]);

	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_intern_scribbled_table),
		cmocka_unit_test(test_open_span_keeps_flow),
		cmocka_unit_test(test_create_open_close),
		cmocka_unit_test(test_bad_names_and_config),
		cmocka_unit_test(test_group_mode_under_umask),
		cmocka_unit_test(test_refuses_foreign_segments),
		cmocka_unit_test(test_block_grows_with_ring),
		cmocka_unit_test(test_foreign_clock_shift_not_used),
		cmocka_unit_test(test_records_round_trip),
		cmocka_unit_test(test_strings_stored_intact),
		cmocka_unit_test(test_string_table_full),
		cmocka_unit_test(test_discard_accounting),
		cmocka_unit_test(test_overwrite_accounting),
		cmocka_unit_test(test_reader_rejects_unfinished),
		cmocka_unit_test(test_thread_exit_flushes),
		cmocka_unit_test(test_scope_macro_and_default),
		cmocka_unit_test(test_clock_monotonic_and_flow_ids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
