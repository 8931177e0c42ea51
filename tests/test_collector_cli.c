/* SPDX-License-Identifier: MIT */
/*
 * test_collector_cli.c - shmtrace-collector's command line: bad options
 * (said as the shmtrace command says them), a missing ring, a ring of
 * another version and an output it cannot write each exit with a code and
 * a message that says what is wrong; the nice
 * value it runs at, how it follows the drain's backlog, and what it says
 * when the system refuses one.
 */
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "collector_run.h"
#include "priority.h"

/* run_cli()'s child is refused a lower nice value: RLIMIT_NICE 0, and no
 * CAP_SYS_NICE after the exec, even as root (the bounding set). */
static bool g_refuse_nice;

static int refuse_nice(void)
{
	const struct rlimit none = { 0, 0 };

	if (setrlimit(RLIMIT_NICE, &none) < 0)
		return -1;
	/* not root: the capability was never had (nor may the set change) */
	return prctl(PR_CAPBSET_DROP, CAP_SYS_NICE, 0, 0, 0) == 0 || geteuid() != 0 ? 0 : -1;
}

/* Whether refuse_nice() can work here (a container may forbid the drop). */
static bool can_refuse_nice(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(refuse_nice() == 0 ? 0 : 1);
	return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Runs the collector with args; returns its exit code and stderr's first line. */
static int run_cli(char *line, size_t len, const char *a1, const char *a2, const char *a3,
		   const char *a4, const char *a5)
{
	int p[2], status;
	pid_t pid;
	ssize_t n;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 2);
		close(p[0]);
		if (g_refuse_nice && refuse_nice() < 0)
			_exit(126);
		execl(g_bin, "shmtrace-collector", a1, a2, a3, a4, a5, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	/* until EOF: stderr is unbuffered, a message may come in pieces */
	for (size_t got = 0;; got += (size_t)n) {
		n = read(p[0], line + got, len - 1 - got);
		if (n <= 0) {
			line[got] = 0;
			break;
		}
	}
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void test_bad_command_lines_exit_with_a_reason(void **state)
{
	const char *ring = test_ring_name("cli");
	char line[1024];

	(void)state;
	assert_int_equal(run_cli(line, sizeof(line), "--bogus", NULL, NULL, NULL, NULL), 2);
	assert_non_null(strstr(line, "--help"));
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, NULL, NULL, NULL), 2);
	assert_non_null(strstr(line, "--output"));
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "--output", "/tmp/x.cap",
				 "--capacity"), 2);
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/tmp/x.cap", NULL), 1);
	assert_non_null(strstr(line, "no ring named"));
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/tmp/x.cap", "--nice"), 2);
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/tmp/x.cap", "--nice=20"), 2);
	assert_non_null(strstr(line, "-20 to 19"));
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/tmp/x.cap", "--nice=-3x"), 2);
	assert_non_null(strstr(line, "auto, or a whole number"));
	/* auto is the default said aloud: on to the missing ring */
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/tmp/x.cap", "--nice=auto"), 1);
	assert_non_null(strstr(line, "no ring named"));
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/tmp/x.cap",
				 "--write-engine=aio"), 2);
	assert_non_null(strstr(line, "auto, pwrite or io_uring"));
	/* a ring of another version */
	ring_of_another_version(ring, NULL);
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/tmp/x.cap", NULL), 1);
	assert_non_null(strstr(line, "version"));
	shmtrace_ring_unlink(ring);
	/* an output that cannot be written */
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/nonexistent/dir/x.cap",
				 NULL), 1);
	assert_non_null(strstr(line, "cannot write"));
	shmtrace_ring_unlink(ring);
}

/*
 * An unknown option, or one without its argument, is said as the shmtrace
 * command says it: the program's name (not getopt's message, which names
 * the path it was run by), the option as given, and the line that points
 * at --help; status 2.
 */
static void test_option_errors_said_as_shmtrace_says_them(void **state)
{
	char line[1024];

	(void)state;
	assert_int_equal(run_cli(line, sizeof(line), "--bogus", NULL, NULL, NULL, NULL), 2);
	assert_string_equal(line, "shmtrace-collector: unknown option '--bogus'\n"
			    "Try 'shmtrace-collector --help'.\n");
	assert_int_equal(run_cli(line, sizeof(line), "-qx", NULL, NULL, NULL, NULL), 2);
	assert_string_equal(line, "shmtrace-collector: unknown option '-x'\n"
			    "Try 'shmtrace-collector --help'.\n");
	assert_int_equal(run_cli(line, sizeof(line), "-o", "x.cap", "--ring", NULL, NULL), 2);
	assert_string_equal(line, "shmtrace-collector: option '--ring' needs an argument\n"
			    "Try 'shmtrace-collector --help'.\n");
	assert_int_equal(run_cli(line, sizeof(line), "--ring", "r", "-o", NULL, NULL), 2);
	assert_string_equal(line, "shmtrace-collector: option '-o' needs an argument\n"
			    "Try 'shmtrace-collector --help'.\n");
}

/* The nice value of process pid (/proc/PID/stat, field 19). */
static int nice_of(pid_t pid)
{
	char path[64], buf[1024], *p;
	int nice = 99;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	/* after the command's ")": state is field 3, nice field 19 */
	p = strrchr(buf, ')');
	assert_non_null(p);
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %d",
				&nice), 1);
	return nice;
}

/*
 * The collector starts at nice -10 where it may lower its nice value (this
 * test as root: CAP_SYS_NICE), else as started; --nice N sets N, which
 * anyone may when N is above the nice value it was started at.
 */
static void test_collector_runs_at_its_nice_value(void **state)
{
	const char *ring = test_ring_name("nice");
	const char *out = "/tmp/shmt-nice.cap";
	const char *const five[] = { "--nice", "5", NULL };
	int mine = getpriority(PRIO_PROCESS, 0);
	pid_t pid;

	(void)state;
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	pid = start_collector_args(ring, out, 0, NULL, NULL);
	/* started at another nice value than 0, it keeps that one */
	assert_int_equal(nice_of(pid), mine != 0 ? mine : geteuid() == 0 ? -10 : 0);
	assert_clean_exit(stop(pid, SIGTERM));
	unlink(out);	/* else kept aside as out.prev1 by the next start */
	pid = start_collector_args(ring, out, 0, NULL, five);
	assert_int_equal(nice_of(pid), 5);
	assert_clean_exit(stop(pid, SIGTERM));
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/* The collector a test runs, its ring and its files, which
 * kill_collector() kills and removes, passed or failed. */
static pid_t g_collector;
static const char *g_ring;
#define BACKLOG_OUT "/tmp/shmt-nice-backlog.cap"
#define BACKLOG_ERR "/tmp/shmt-nice-backlog.err"

static int kill_collector(void **state)
{
	(void)state;
	if (g_collector > 0) {
		kill(g_collector, SIGKILL);
		waitpid(g_collector, NULL, 0);
	}
	g_collector = 0;
	if (g_ring)
		shmtrace_ring_unlink(g_ring);
	g_ring = NULL;
	unlink(BACKLOG_OUT);
	unlink(BACKLOG_ERR);
	return 0;
}

/* Waits (at most 30 s) until process pid runs at nice value want: a
 * collector let down and raised again within its calm waits twice as
 * long the next time, and on a loaded machine that can happen more than
 * once before it has caught up. */
static int wait_nice(pid_t pid, int want)
{
	int now = nice_of(pid);

	for (int i = 0; i < 30000 && now != want; i++) {
		usleep(1000);
		now = nice_of(pid);
	}
	return now;
}

/* Stops the collector pid, writes n spans through t meanwhile (full
 * blocks handed over pile up: the backlog it finds), and lets it go on. */
static void backlog_behind(pid_t pid, shmtrace_t *t, uint64_t n)
{
	int status, ret = 0;

	assert_int_equal(kill(pid, SIGSTOP), 0);
	assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
	assert_true(WIFSTOPPED(status));
	for (uint64_t i = 0; i < n && ret == 0; i++)
		ret = shmtrace_span(t, 1, 1, i, i + 1, 0);
	/* let go first: a failed test leaves no collector stopped */
	assert_int_equal(kill(pid, SIGCONT), 0);
	assert_int_equal(ret, 0);
}

/* Stops the collector pid with SIGTERM, and reads all it wrote to
 * stderr (the file err) into out. */
static void stop_for_summary(pid_t pid, const char *err, char *out, size_t len)
{
	size_t n;
	FILE *f;

	g_collector = 0;
	assert_clean_exit(stop(pid, SIGTERM));
	f = fopen(err, "r");
	assert_non_null(f);
	n = fread(out, 1, len - 1, f);
	out[n] = 0;
	fclose(f);
	assert_non_null(strstr(out, "shmtrace-collector: "));
}

/*
 * By default (as root, started at nice 0) the collector starts at nice
 * -10, goes down to its own 0 once nothing has waited for it for a
 * second, and back up to -10 when over half of the staging blocks are
 * still handed over and waiting after a pass (it was stopped while a
 * producer wrote), until it has caught up; its summary says how long it
 * was up. With --nice N it stays at N through the same backlog, and the
 * summary says nothing of it.
 */
static void test_collector_priority_follows_its_backlog(void **state)
{
	const char *ring = test_ring_name("nice-backlog");
	const char *const three[] = { "--nice", "3", NULL };
	/* 600 of the default ring's 1024 blocks of 1024 records: over half
	 * after a pass moved its most (64K records), under three quarters */
	const uint64_t n = 600ull * 1024;
	char said[4096];
	shmtrace_t *t;
	pid_t pid;

	(void)state;
	if (geteuid() != 0 || getpriority(PRIO_PROCESS, 0) != 0)
		skip();	/* -10 needs CAP_SYS_NICE; started elsewhere, it stays */
	g_ring = ring;
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	pid = g_collector = start_collector_args(ring, BACKLOG_OUT, 0, BACKLOG_ERR, NULL);
	assert_int_equal(nice_of(pid), -10);
	assert_int_equal(wait_nice(pid, 0), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	backlog_behind(pid, t, n);
	assert_int_equal(wait_nice(pid, -10), -10);
	/* the last block too: the collector takes an idle thread's */
	assert_true(wait_tail(t, n) >= n);
	assert_int_equal(wait_nice(pid, 0), 0);
	shmtrace_close(t);
	stop_for_summary(pid, BACKLOG_ERR, said, sizeof(said));
	assert_non_null(strstr(said, ", at nice -10 for "));
	shmtrace_ring_unlink(ring);
	unlink(BACKLOG_OUT);	/* else kept aside by the next start */

	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	pid = g_collector = start_collector_args(ring, BACKLOG_OUT, 0, BACKLOG_ERR, three);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	backlog_behind(pid, t, n);
	assert_true(wait_tail(t, n) >= n);
	assert_int_equal(nice_of(pid), 3);
	shmtrace_close(t);
	stop_for_summary(pid, BACKLOG_ERR, said, sizeof(said));
	assert_null(strstr(said, "at nice"));
}

/* The governor's calm, step by step on a clock of its own (in a child:
 * it moves the calling thread's nice value): down only after a calm
 * second, up at half; let down and up again within the calm it waited
 * for, it waits twice as long the next time; down four times that long,
 * half as long again. */
static void test_priority_calm_doubles_after_an_early_letting_down(void **state)
{
	const uint64_t s = 1000000000ull;
	int status;
	pid_t pid;

	(void)state;
	if (geteuid() != 0 || getpriority(PRIO_PROCESS, 0) != 0)
		skip();
	pid = fork();
	if (pid == 0) {
		struct prio p;
		int bad = 0, now;
#define AT(want) do {								\
		if ((now = getpriority(PRIO_PROCESS, 0)) != (want)) {		\
			fprintf(stderr, "line %d: nice %d, not %d\n", __LINE__, now, (want)); \
			bad = 1;						\
		}								\
	} while (0)

		prio_init(&p, true, 0, -10);
		prio_count_from(&p, 10 * s);
		AT(-10);
		prio_update(&p, PRIO_CALM_BELOW - 1, 10 * s);	/* calm from here */
		prio_update(&p, PRIO_CALM_BELOW - 1, 10 * s + s - 1);
		AT(-10);
		prio_update(&p, PRIO_CALM_BELOW - 1, 11 * s);	/* a calm second */
		AT(0);
		prio_update(&p, PRIO_RAISE_AT - 1, 11 * s + 1);
		AT(0);
		prio_update(&p, PRIO_RAISE_AT, 11 * s + 2);	/* within the calm: doubled */
		AT(-10);
		prio_update(&p, 0, 12 * s);
		prio_update(&p, 0, 13 * s + s / 2);
		AT(-10);
		prio_update(&p, 0, 14 * s);	/* two calm seconds */
		AT(0);
		prio_update(&p, PRIO_RAISE_AT, 14 * s + 8 * s);	/* down 4 x 2 s: halved */
		AT(-10);
		prio_update(&p, 0, 30 * s);
		prio_update(&p, 0, 31 * s);	/* one calm second again */
		AT(0);
		if (prio_raised_ns(&p, 31 * s) != (11 - 10 + 14 - 11 + 31 - 22) * s - 2)
			bad = 1;
		_exit(bad);
#undef AT
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/*
 * Refused the nice value: --nice N says so in one warning line and goes on
 * at the value it was started at; the default (-10) is a wish, and its
 * refusal says nothing. Both then stop at the missing ring, as without.
 */
static void test_refused_nice_value_warns_only_when_asked_for(void **state)
{
	const char *ring = test_ring_name("nice-refused");
	int mine = getpriority(PRIO_PROCESS, 0);
	char line[1024], want[128];

	(void)state;
	if (!can_refuse_nice())
		skip();
	g_refuse_nice = true;
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/tmp/x.cap", "--nice=-5"), 1);
	snprintf(want, sizeof(want), "shmtrace-collector: warning: --nice -5: Permission denied; "
		 "running at nice %d\n", mine);
	assert_memory_equal(line, want, strlen(want));
	assert_non_null(strstr(line + strlen(want), "no ring named"));
	assert_int_equal(run_cli(line, sizeof(line), "--ring", ring, "-o", "/tmp/x.cap", NULL), 1);
	assert_null(strstr(line, "warning"));
	assert_non_null(strstr(line, "no ring named"));
	g_refuse_nice = false;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_command_lines_exit_with_a_reason),
		cmocka_unit_test(test_option_errors_said_as_shmtrace_says_them),
		cmocka_unit_test(test_collector_runs_at_its_nice_value),
		cmocka_unit_test_teardown(test_collector_priority_follows_its_backlog, kill_collector),
		cmocka_unit_test(test_priority_calm_doubles_after_an_early_letting_down),
		cmocka_unit_test(test_refused_nice_value_warns_only_when_asked_for),
	};

	if (collector_bin_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
