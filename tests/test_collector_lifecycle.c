/* SPDX-License-Identifier: MIT */
/*
 * test_collector_lifecycle.c - the ring across collectors: one SIGKILLed
 * and restarted under load, one stopped and started again that adopts the
 * ring the last one left, one that removes only its own ring on exit, and
 * one with another configuration that replaces the ring and drains the old
 * one aside; every record captured once or counted; a failed start that
 * keeps the ring it replaced, and a lost capture of the old ring said;
 * records left at the stop in a ring the collector did not make, said; a
 * start refused that moves no capture aside, and a capture that cannot be
 * written that leaves no ring the collector made.
 */
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "collector_run.h"

/* kill -9 the collector under load, restart it, again and again: the
 * union of the captures holds every record once (duplicates only by
 * sequence, which readers drop). */
static void test_collector_killed_and_restarted_loses_nothing(void **state)
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

/*
 * A collector stopped and started again with the same command while
 * producers write, four times: the new one adopts the ring the old one
 * left and keeps the old one's capture aside (the same -o), so every
 * record is in one of the captures exactly once or
 * counted, from the producers that opened the ring and from one writing
 * through a handle it inherited across fork() and never opened itself.
 * None is dropped for want of room; while no collector runs, producers
 * copy under the lock, and one whose block and spare are full while
 * another holds it past the span call's bound (2 ms) drops its record
 * and counts it (the sanitizer builds, slower, do).
 */
static void test_restart_adopts_ring(void **state)
{
	enum { NPROD = 4, PHASES = 4 };
	const uint64_t per = 400000;	/* all of them fit the ring: no drop is right */
	const char *ring = test_ring_name("restart");
	const char *const create[] = { "--create", "--capacity", "2097152", "--linger", "0", NULL };
	struct phases *ph = mmap(NULL, sizeof(*ph), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char out[256], kept[PHASES + 1][300];
	struct tally t = { 0 };
	shmtrace_t *inherited;
	uint64_t dev, ino;
	pid_t col;

	(void)state;
	assert_true(ph != MAP_FAILED);
	/* the same -o each time: each start keeps the last one's capture
	 * aside, as out.prev1, out.prev2, ... */
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	for (int k = 0; k < PHASES; k++)
		snprintf(kept[k], sizeof(kept[k]), "%s.prev%d", out, k + 1);
	snprintf(kept[PHASES], sizeof(kept[PHASES]), "%s", out);
	col = start_collector_args(ring, out, 0, NULL, create);
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
		col = start_collector_args(ring, out, 0, NULL, create);
		wait_phase(ph, &t, k);
	}
	wait_producers(&t);
	assert_clean_exit(stop(col, SIGTERM));
	/* nobody attached at the last stop: the ring went with its collector */
	assert_int_equal(shmt_ring_identity(ring, &dev, &ino), -ENOENT);
	for (int k = 0; k <= PHASES; k++) {
		read_capture(kept[k], &t);
		unlink(kept[k]);
	}
	check_exactly_once(&t);
	assert_int_equal(t.records + t.dropped, NPROD * per);
	assert_int_equal(t.dropped, t.lock_dropped);
	figure_acct("collector restarted under load (4 times; a forked handle)", PHASES,
		    NPROD * per, t.records, t.dropped, 0, NPROD * per - t.records - t.dropped,
		    "--create adopts the ring the last collector left");
	tally_free(&t);
	munmap(ph, sizeof(*ph));
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

/* Until the file at path says what (inotify: each write wakes us); a
 * minute without it kills the test (SIGALRM). */
static void wait_said(const char *path, const char *what)
{
	char ev[sizeof(struct inotify_event) + 256];
	int in = inotify_init1(IN_CLOEXEC);
	char *s;

	alarm(60);
	assert_true(in >= 0);
	assert_true(inotify_add_watch(in, path, IN_MODIFY) >= 0);
	for (;;) {
		s = slurp(path);
		if (strstr(s, what))
			break;
		free(s);
		assert_true(read(in, ev, sizeof(ev)) > 0);
	}
	alarm(0);
	free(s);
	close(in);
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
	/* its producer gone, the old ring is finished (said once its session
	 * is freed): nothing of it stays open, which kept its unlinked
	 * memory */
	wait_said(err, "records are in");
	assert_int_equal(fds_to(col, "/dev/shm/", NULL, true), 0);
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

/* Runs the collector with args (NULL-ended) to its exit, stderr to errp;
 * returns its exit status. */
static int collector_exit_of(const char *const *args, const char *errp)
{
	const char *argv[16] = { "shmtrace-collector" };
	int n = 1, st;
	pid_t pid;

	while (n < 15 && args[n - 1]) {
		argv[n] = args[n - 1];
		n++;
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fe < 0 || dup2(fe, 2) < 0)
			_exit(126);
		execv(g_bin, (char *const *)argv);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/*
 * A collector that replaced a ring (another --capacity) and then could
 * not open its capture (the path is a directory) exits 1 and leaves the
 * new ring, which the old one's producers move to: removing it left them
 * writing into rings no collector could find.
 */
static void test_failed_start_keeps_the_ring_it_replaced(void **state)
{
	const char *ring = test_ring_name("keepnew");
	struct shmtrace_ring_config c = { .capacity = 4096 };
	char dir[256], old[300], errp[256], *said;
	const char *const args[] = { "--ring", ring, "--create", "--capacity", "8192", "--output",
				     dir, NULL };
	struct shmt_view v;
	char err[256];

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/%s.dir", ring);
	snprintf(old, sizeof(old), "%s.replaced", dir);
	snprintf(errp, sizeof(errp), "/tmp/%s.err", ring);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(collector_exit_of(args, errp), 1);
	said = slurp(errp);
	assert_non_null(strstr(said, "replaced ring"));
	assert_non_null(strstr(said, "kept"));
	free(said);
	assert_int_equal(shmt_view_open(ring, 0, &v, err, sizeof(err)), 0);
	assert_int_equal(v.capacity, 8192);
	shmt_view_close(&v);
	assert_int_equal(access(old, F_OK), 0);
	shmtrace_ring_unlink(ring);
	unlink(old);
	unlink(errp);
	rmdir(dir);
}

/*
 * The capture of a replaced ring removed while the collector still drains
 * it (its producer attached, idle): said, and the collector exits 1,
 * never 0.
 */
static void test_replaced_ring_capture_lost_fails_the_run(void **state)
{
	const char *ring = test_ring_name("lostaside");
	struct shmtrace_ring_config c = { .capacity = 65536 };
	const char *const big[] = { "--create", "--capacity", "131072", NULL };
	char out[256], old[300], errp[256], *said;
	int go[2], ready[2];
	char ch;
	pid_t col, prod;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	snprintf(old, sizeof(old), "%s.replaced", out);
	snprintf(errp, sizeof(errp), "/tmp/%s.err", ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	/* the collector forked below must not hold the producer's pipe */
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	prod = fork();
	assert_true(prod >= 0);
	if (prod == 0) {
		shmtrace_t *h;

		close(go[1]);
		if (shmtrace_open(ring, &h) < 0)
			_exit(3);
		for (uint64_t i = 0; i < 100; i++)
			if (shmtrace_span(h, 2, 1, 1000 + i, 1001 + i, 0) < 0)
				_exit(4);
		/* attached and idle until told */
		if (write(ready[1], "r", 1) != 1 || read(go[0], &ch, 1) < 0)
			_exit(5);
		shmtrace_close(h);
		_exit(0);
	}
	close(go[0]);
	close(ready[1]);
	assert_int_equal(read(ready[0], &ch, 1), 1);
	col = start_collector_args(ring, out, 0, errp, big);
	assert_int_equal(access(old, F_OK), 0);
	assert_int_equal(unlink(old), 0);
	close(go[1]);
	assert_int_equal(waitpid(prod, NULL, 0), prod);
	assert_int_equal(WEXITSTATUS(stop(col, SIGTERM)), 1);
	said = slurp(errp);
	/* what the old ring held then may have been drained already, or be
	 * lost with it: said with its count only when there is some */
	assert_non_null(strstr(said, "the replaced ring's capture"));
	assert_non_null(strstr(said, "Stale file handle"));
	free(said);
	close(ready[0]);
	unlink(out);
	unlink(errp);
	shmtrace_ring_unlink(ring);
}

/*
 * A collector that did not make its ring, and cannot take the ring lock
 * at its stop (the lock's owner stopped inside it), leaves what its
 * threads staged in the ring, and says how many records and how to read
 * them: the next collector, or an export of the capture with the ring.
 */
static void test_records_left_in_a_ring_it_did_not_make_are_said(void **state)
{
	const char *ring = test_ring_name("leftsaid");
	struct shmtrace_ring_config c = { .capacity = 4096 };
	char out[256], errp[256], want[512], *said;
	const char *const none[] = { NULL };
	shmtrace_t *t;
	int status;
	pid_t holder, col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	snprintf(errp, sizeof(errp), "/tmp/%s.err", ring);
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (uint64_t i = 0; i < 37; i++)
		assert_int_equal(shmtrace_span(t, 1, 1, i, i + 1, 0), 0);
	holder = ring_lock_by_stopped_owner(ring);
	col = start_collector_args(ring, out, 0, errp, none);
	status = stop(col, SIGTERM);
	/* let go first: a failed test leaves no process stopped */
	kill(holder, SIGCONT);
	assert_int_equal(waitpid(holder, NULL, 0), holder);
	assert_clean_exit(status);
	said = slurp(errp);
	snprintf(want, sizeof(want), "37 records reached ring '%s' after the last pass; they stay in "
		 "it for the next collector (or shmtrace export %s --ring %s)", ring, out, ring);
	assert_non_null(strstr(said, want));
	free(said);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
	unlink(out);
	unlink(errp);
}

/* A capture file at path: a header frame, as a collector begins one. */
static void put_header_only(const char *path)
{
	struct shmt_cap_header h = { .version = SHMT_CAP_VERSION, .run_id = 1,
				     .ring_capacity = 4096 };
	msgpack_sbuffer b;
	int fd;

	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b.data, b.size), (ssize_t)b.size);
	close(fd);
	msgpack_sbuffer_destroy(&b);
}

/* The collector with args (NULL-ended) exits 1 saying why, and leaves the
 * capture at out where it was, none kept aside, no stream's file beside
 * it. */
static void refused_start_moves_nothing(const char *const *args, const char *out,
					const char *errp, const char *why)
{
	char prev[300], lock[300], status[300], *said;
	const char *slash = strrchr(out, '/');

	snprintf(prev, sizeof(prev), "%s.prev1", out);
	snprintf(lock, sizeof(lock), "%.*s.%s.otlp-lock", (int)(slash - out + 1), out, slash + 1);
	snprintf(status, sizeof(status), "%.*s.%s.otlp-status", (int)(slash - out + 1), out,
		 slash + 1);
	assert_int_equal(collector_exit_of(args, errp), 1);
	said = slurp(errp);
	if (!strstr(said, why) || strstr(said, "is kept as"))
		fprintf(stderr, "said: %s\n", said);
	assert_non_null(strstr(said, why));
	assert_null(strstr(said, "is kept as"));
	free(said);
	assert_int_equal(access(out, F_OK), 0);
	assert_int_equal(access(prev, F_OK), -1);
	assert_int_equal(access(lock, F_OK), -1);
	assert_int_equal(access(status, F_OK), -1);
}

/*
 * A collector that cannot start (no such ring, a ring of another format
 * version, a ring another collector drains, with a stream or without,
 * with --create or without) moves nothing aside and leaves no stream's
 * file beside the capture, nor removes the ring the other one drains: the capture already at -o stays where it is. It
 * was kept as FILE.prev1 before the ring was even looked at, the user's
 * file gone from its name by a typo in --ring.
 */
static void test_refused_start_keeps_the_capture_in_place(void **state)
{
	const char *ring = test_ring_name("refused");
	const char *typo = test_ring_name("refused-typo");
	struct shmtrace_ring_config c = { .capacity = 4096 };
	char out[256], other[256], errp[256];
	const char *const plain[] = { "--ring", typo, "-o", out, NULL };
	const char *const streamed[] = { "--ring", typo, "-o", out, "--otlp-endpoint",
					 "http://127.0.0.1:1", NULL };
	const char *const on_ring[] = { "--ring", ring, "-o", out, NULL };
	/* --create of a ring that is there: adopted, unless drained */
	const char *const created[] = { "--ring", ring, "--create", "--capacity", "4096", "-o", out,
					"--otlp-endpoint", "http://127.0.0.1:1", NULL };
	pid_t col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	snprintf(other, sizeof(other), "/tmp/%s-other.cap", ring);
	snprintf(errp, sizeof(errp), "/tmp/%s.err", ring);
	shmtrace_ring_unlink(typo);
	put_header_only(out);
	refused_start_moves_nothing(plain, out, errp, "no ring named");
	refused_start_moves_nothing(streamed, out, errp, "no ring named");
	/* a ring of another version */
	ring_of_another_version(ring, &c);
	refused_start_moves_nothing(on_ring, out, errp, "version");
	shmtrace_ring_unlink(ring);
	/* a ring another collector drains */
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, other, "-q", 0);
	refused_start_moves_nothing(on_ring, out, errp, "another collector is already draining");
	refused_start_moves_nothing(created, out, errp, "another collector is already draining");
	{
		shmtrace_t *t;

		/* still there, under its name: the other collector's */
		assert_int_equal(shmtrace_open(ring, &t), 0);
		shmtrace_close(t);
	}
	assert_clean_exit(stop(col, SIGTERM));
	shmtrace_ring_unlink(ring);
	unlink(out);
	unlink(other);
	unlink(errp);
}

/* n spans into ring, from this process, its handle closed after. */
static void spans_into(const char *ring, uint64_t n)
{
	shmtrace_t *t;

	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(shmtrace_span(t, 1, 1, 1000 + i, 1001 + i, 0), 0);
	shmtrace_close(t);
}

/*
 * A collector with --create whose capture cannot be written from its
 * first byte (/dev/full): the ring it made, which no producer came to,
 * goes with it; it stayed, 50 MB of /dev/shm, with the hint "shmtrace
 * export /dev/full --ring NAME". A ring it adopted, records in it, stays,
 * and the hint names the ring alone; the capture is named once it holds
 * a header a reader opens (a file-size limit that cuts the records).
 */
static void test_failed_start_leaves_no_ring_it_made(void **state)
{
	const char *ring = test_ring_name("fullout");
	struct shmtrace_ring_config c = { .capacity = 4096 };
	const char *const args[] = { "--ring", ring, "--create", "--capacity", "4096", "-o",
				     "/dev/full", NULL };
	const char *const more[] = { "--create", "--capacity", "4096", "-q", NULL };
	char errp[256], out[256], want[512], *said;
	int status;
	pid_t col;

	(void)state;
	if (access("/dev/full", W_OK) < 0)
		skip();
	snprintf(errp, sizeof(errp), "/tmp/%s.err", ring);
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	shmtrace_ring_unlink(ring);
	assert_int_equal(collector_exit_of(args, errp), 1);
	said = slurp(errp);
	assert_non_null(strstr(said, "No space left on device"));
	assert_null(strstr(said, "kept in /dev/shm"));
	free(said);
	assert_int_equal(shmtrace_ring_unlink(ring), -ENOENT);
	/* adopted, with records the capture never got */
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	spans_into(ring, 37);
	assert_int_equal(collector_exit_of(args, errp), 1);
	said = slurp(errp);
	assert_non_null(strstr(said, "adopted ring"));
	snprintf(want, sizeof(want), "ring '%s' kept in /dev/shm with what was not drained (37 "
		 "records): shmtrace export --ring %s\n", ring, ring);
	if (!strstr(said, want))
		fprintf(stderr, "said: %s\n", said);
	assert_non_null(strstr(said, want));
	free(said);
	/* a capture cut by the file-size limit after its header */
	col = start_collector_args(ring, out, 512, errp, more);
	spans_into(ring, 2000);
	assert_int_equal(waitpid(col, &status, 0), col);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	said = slurp(errp);
	snprintf(want, sizeof(want), "records): shmtrace export %s --ring %s\n", out, ring);
	if (!strstr(said, want))
		fprintf(stderr, "said: %s\n", said);
	assert_non_null(strstr(said, want));
	free(said);
	assert_int_equal(shmtrace_ring_unlink(ring), 0);
	unlink(out);
	unlink(errp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_collector_killed_and_restarted_loses_nothing),
		cmocka_unit_test(test_restart_adopts_ring),
		cmocka_unit_test(test_exit_spares_a_ring_made_again),
		cmocka_unit_test(test_replaced_ring_drained_aside),
		cmocka_unit_test(test_failed_start_keeps_the_ring_it_replaced),
		cmocka_unit_test(test_replaced_ring_capture_lost_fails_the_run),
		cmocka_unit_test(test_records_left_in_a_ring_it_did_not_make_are_said),
		cmocka_unit_test(test_refused_start_keeps_the_capture_in_place),
		cmocka_unit_test(test_failed_start_leaves_no_ring_it_made),
	};

	if (collector_bin_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
