/* SPDX-License-Identifier: MIT */
/*
 * test_collector_signals.c - stopping shmtrace-collector with signals while
 * producers write: what was published before SIGTERM is captured, SIGHUP
 * is a clean stop too, what an
 * app records on its way out after the same Ctrl-C is captured, a repeated
 * stop signal is one stop, a late second one exits at once and says
 * what stays in the ring, a stop ends while a producer writes on, and
 * the signals a write error would raise are ignored.
 */
#include <sys/prctl.h>

#include "collector_run.h"

/* SIGTERM while producers write: every record published before the signal
 * (given a ring sequence: the ring's head, not shmtrace_stats()'s, which
 * counts a block's worth for each block handed over, partly filled ones
 * too) is in the capture; then SIGINT + SIGTERM together: the second
 * signal exits at once and the file still reads up to its last whole
 * frame. */
static void test_sigterm_under_load_captures_all_published(void **state)
{
	const char *ring = test_ring_name("term");
	struct shmtrace_ring_config c = { .capacity = 1 << 18 };
	char out[256], out2[256];
	struct tally t = { 0 };
	struct shmtrace_stats st;
	struct shmt_view v;
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
	ring_view_rw(ring, &v);
	before = shmt_ring_head(&v);
	shmt_view_close(&v);
	status = stop(col, SIGTERM);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	read_capture(out, &t);
	for (uint64_t s = 0; s < before; s++)
		if (!t.seq_seen[s])
			fail_msg("sequence %llu of the %llu published before SIGTERM is not in the "
				 "capture (%llu records, %llu counted dropped, %llu duplicates)",
				 (unsigned long long)s, (unsigned long long)before,
				 (unsigned long long)t.records, (unsigned long long)t.dropped,
				 (unsigned long long)t.dup_seq);
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

static uint64_t ignored_by(pid_t pid);

/* SIGHUP (a terminal that closes) is a clean stop: exit 0, every record
 * in the capture, its END frame written. Its default action ended the
 * collector at once, the capture cut short and nothing said. */
static void test_sighup_stops_cleanly(void **state)
{
	const char *ring = test_ring_name("hup");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	struct tally t = { 0 };
	char out[256];
	int status;
	pid_t col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, out, NULL, 0);
	run_producers(ring, &t, 1, 10000);
	wait_producers(&t);
	status = stop(col, SIGHUP);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	read_capture(out, &t);
	assert_int_equal(t.clean_ends, 1);
	assert_int_equal(t.records, 10000);
	tally_free(&t);
	unlink(out);

	/* started under nohup(1), which ignores SIGHUP: it stays ignored,
	 * and SIGTERM stops it */
	signal(SIGHUP, SIG_IGN);
	col = start_collector(ring, out, NULL, 0);
	signal(SIGHUP, SIG_DFL);
	assert_true(ignored_by(col) >> (SIGHUP - 1) & 1);
	status = stop(col, SIGTERM);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	unlink(out);
	shmtrace_ring_unlink(ring);
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
	/* it drains on until the app leaves, however slowly that runs */
	const char *const create[] = { "--create", "--linger", "120", NULL };
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
 * A stop while a producer writes on, past --linger (here 0): the last
 * passes end, the capture ends whole (its END frame), and the ring,
 * which the producer still writes, is kept and said. A stop that does
 * not end is a failure (the guard).
 */
static void test_stop_ends_while_a_producer_writes_on(void **state)
{
	const char *ring = test_ring_name("writeson");
	const char *const extra[] = { "--create", "--linger", "0", NULL };
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	char out[256], errp[256], err[256], c, *said;
	int ready[2], status, ret;
	pid_t col, prod;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	snprintf(errp, sizeof(errp), "/tmp/%s.err", ring);
	col = start_collector_args(ring, out, 0, errp, extra);
	assert_int_equal(pipe(ready), 0);
	prod = fork();
	assert_true(prod >= 0);
	if (prod == 0) {
		shmtrace_t *h;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (shmtrace_open(ring, &h) < 0)
			_exit(3);
		/* a span every 100 ns: passes find some; a ring full while
		 * a loaded machine holds the collector back drops them,
		 * counted, and the producer writes on */
		for (uint64_t i = 0, t = shmtrace_now();; i++) {
			int r = shmtrace_span(h, 2, 1, 1000 + i, 1001 + i, 0);

			if (r < 0 && r != -ENOSPC)
				_exit(4);
			if (i == 1000 && write(ready[1], "r", 1) != 1)
				_exit(5);
			while (shmtrace_now() < t + 100)
				;
			t += 100;
		}
	}
	close(ready[1]);
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	alarm(60);
	status = stop(col, SIGTERM);
	alarm(0);
	/* before any assertion: a failed one must not leave it spinning */
	kill(prod, SIGKILL);
	assert_int_equal(waitpid(prod, NULL, 0), prod);
	assert_clean_exit(status);
	said = slurp(errp);
	assert_non_null(strstr(said, "left in /dev/shm"));
	free(said);
	unlink(errp);
	assert_int_equal(shmt_cap_open(out, &r, err, sizeof(err)), 0);
	while ((ret = shmt_cap_next(r, &f, err, sizeof(err))) == 1)
		;
	assert_int_equal(ret, 0);
	shmt_cap_close(r);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/* The signals a running collector ignores (/proc/PID/status, SigIgn). */
static uint64_t ignored_by(pid_t pid)
{
	char path[64], line[256];
	unsigned long long mask = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigIgn: %llx", &mask) == 1)
			break;
	fclose(f);
	return mask;
}

/* A write into the pipe of a stream that died (it is started again) or
 * past a file-size limit is an error the collector handles, never a
 * signal that kills it without a word. */
static void test_collector_ignores_sigpipe_and_sigxfsz(void **state)
{
	const char *ring = test_ring_name("sigign");
	char out[256];
	uint64_t ign;
	pid_t col;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	/* ignored here, they would stay ignored across the exec */
	signal(SIGPIPE, SIG_DFL);
	signal(SIGXFSZ, SIG_DFL);
	col = start_collector(ring, out, NULL, 0);
	ign = ignored_by(col);
	assert_true(ign & (1ull << (SIGPIPE - 1)));
	assert_true(ign & (1ull << (SIGXFSZ - 1)));
	assert_clean_exit(stop(col, SIGTERM));
	unlink(out);
	shmtrace_ring_unlink(ring);
}

#if !SHMT_TSAN
/* Until the kernel has delivered sig sent to pid (neither the process
 * nor a thread has it pending): its handler has run or is running. */
static void wait_delivered(pid_t pid, int sig)
{
	const unsigned long long bit = 1ull << (sig - 1);
	char path[64], line[256];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	for (int k = 0; k < 20000; k++) {
		FILE *f = fopen(path, "r");
		bool pending = false;

		assert_non_null(f);
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "SigPnd:", 7) || !strncmp(line, "ShdPnd:", 7))
				pending |= (strtoull(line + 7, NULL, 16) & bit) != 0;
		fclose(f);
		if (!pending)
			return;
		usleep(1000);
	}
	fail_msg("signal %d to %d not delivered", sig, (int)pid);
}
#endif

/*
 * The same stop signal twice at once (GNU timeout signals the collector,
 * then its process group) is one stop, not an exit: the collector drains
 * on and ends the capture cleanly. A second signal after the repeat
 * window (one second) stops it at once, and stderr says what stays in
 * the ring and how to export it; the ring stays.
 */
static void test_repeated_stop_signal_is_one_stop_a_late_one_exits(void **state)
{
	const char *ring = test_ring_name("sig2");
	const char *const create[] = { "--create", "--linger", "120", NULL };
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
		/* the window counts from the handler: from the delivery */
		wait_delivered(col, SIGTERM);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sigterm_under_load_captures_all_published),
		cmocka_unit_test(test_sighup_stops_cleanly),
		cmocka_unit_test(test_stop_while_app_runs),
		cmocka_unit_test(test_stop_ends_while_a_producer_writes_on),
		cmocka_unit_test(test_collector_ignores_sigpipe_and_sigxfsz),
		cmocka_unit_test(test_repeated_stop_signal_is_one_stop_a_late_one_exits),
	};

	if (collector_bin_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
