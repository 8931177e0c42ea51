/* SPDX-License-Identifier: MIT */
/*
 * bench_lttng.c - the LTTng-UST side of `make bench`, built and driven by
 * tests/bench/run.sh (cc ... -llttng-ust -ldl), which creates the session
 * (8 x 4 MiB sub-buffers) around it. Same loops and counts as
 * tests/bench/bench_shmtrace.c; the event carries the payload of a shmtrace
 * record (ts, dur, flow, name, cat, kind) and a span takes two
 * clock_gettime(CLOCK_MONOTONIC), as an LTTng user would for start and end.
 *
 *   bench_lttng span1     ns per span (2 x clock_gettime + tracepoint), 1 process
 *   bench_lttng mp2       events/s in total, 2 processes
 *   (span1 and mp2 with BENCH_LT_BARE=1: the tracepoint without our two clock reads)
 *   bench_lttng lat       per-call latency of the tracepoint, 2nd process running
 *   bench_lttng disabled  tracepoint with no session vs empty loop
 *   bench_lttng gen       BENCH_N events (10 % with a flow id), for sizes and babeltrace2
 *   bench_lttng oversub|frozen|threads  the producers' tail under stress (bench_lttng_tail.c)
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "../bench_common.h"
#include "bench_lttng.h"
#include "bench_tp.h"

static uint64_t g_n;
uint64_t g_runs;

/* warm-ups cover at least as many events as a shmtrace ring lap */
#define WARM_MIN 1048576ull
#define WARM_N (g_n > WARM_MIN ? g_n : WARM_MIN)
char *g_self;

/* BENCH_LT_BARE: the tracepoint alone, timestamped by its own clock read
 * (no clock_gettime of ours): LTTng at its best, as in the earlier
 * measurement of 13 M events/s that run.sh compares with */
static int g_bare;

static inline void span_event(uint64_t i)
{
	if (g_bare) {
		tracepoint(shmtbench, span, i, 0, i & 7 ? 0 : i, 2, 1, 1);
		return;
	}
	uint64_t t0 = bench_mono_ns();
	uint64_t t1 = bench_mono_ns();

	tracepoint(shmtbench, span, t0, t1 - t0, i & 7 ? 0 : i, 2, 1, 1);
}

static double g_loop_cpu;	/* CPU ns per span of the last span_loop() */

static BENCH_NOINLINE double span_loop(uint64_t n)
{
	uint64_t c = bench_cpu_ns(), a = bench_mono_ns();

	for (uint64_t i = 0; i < n; i++)
		span_event(i);
	a = bench_mono_ns() - a;
	g_loop_cpu = (double)(bench_cpu_ns() - c) / (double)n;
	return (double)a / (double)n;
}

static int case_span1(void)
{
	double ns[BENCH_MAX_RUNS], cpu[BENCH_MAX_RUNS];
	int runs = (int)g_runs;

	span_loop(WARM_N);
	for (int r = 0; r < runs; r++) {
		ns[r] = span_loop(g_n);
		cpu[r] = g_loop_cpu;
	}
	double med = bench_median(ns, runs), cmed = bench_median(cpu, runs);

	printf("RESULT lttng_span1 cpu_ns=%.2f cpu_min=%.2f ns=%.2f min=%.2f max=%.2f runs=%d n=%llu events=%llu\n",
	       cmed, cpu[0], med, ns[0],
	       ns[runs - 1], runs, (unsigned long long)g_n, (unsigned long long)(g_n * g_runs + WARM_N));
	return 0;
}

static int mp_child(int ready, int go, int res)
{
	struct bench_barrier b = { { -1, ready }, { go, -1 } };
	struct bench_mp_result m = { 0, 0, 0 };
	char c = 'r';

	/* warm-up in this process, as on the shmtrace side */
	for (uint64_t i = 0; i < WARM_N; i++)
		span_event(i);
	if (write(b.ready[1], &c, 1) != 1)
		return 1;
	while (read(b.go[0], &c, 1) < 0 && errno == EINTR)
		;
	m.start = bench_mono_ns();
	for (uint64_t i = 0; i < g_n; i++)
		span_event(i);
	m.end = bench_mono_ns();
	return write(res, &m, sizeof(m)) == sizeof(m) ? 0 : 1;
}

/* children are exec'd, not forked, so that each registers with the session daemon */
pid_t spawn_argv(char *argv[])
{
	pid_t pid = fork();

	if (pid < 0)
		bench_die("fork");
	if (pid == 0) {
		argv[0] = g_self;
		execv(g_self, argv);
		_exit(127);
	}
	return pid;
}

static pid_t spawn(const char *mode, int a, int b, int c)
{
	char sa[16], sb[16], sc[16];
	char *argv[] = { NULL, (char *)mode, sa, sb, sc, NULL };

	snprintf(sa, sizeof(sa), "%d", a);
	snprintf(sb, sizeof(sb), "%d", b);
	snprintf(sc, sizeof(sc), "%d", c);
	return spawn_argv(argv);
}

/*
 * Waits until the consumer daemon has written out the warm-up: 2 x 2 M
 * events are ~180 MB, which it writes for a few hundred ms while the
 * measured producers would already run, halving their rate on 2 cores
 * (measured: 7 M/s against 13 M/s). `lttng stop` returns once the data
 * is out; `lttng start` resumes. BENCH_LT_SESSION names the session
 * (run.sh sets it); without it, a fixed pause as before. Returns the
 * events the session's channels discarded so far (`lttng list` while
 * stopped), or -1 without a session.
 */
int64_t lt_checkpoint(void)
{
	const char *s = getenv("BENCH_LT_SESSION");
	char cmd[512], line[512];
	int64_t discarded = 0;
	FILE *f;

	if (!s || !*s) {
		usleep(200 * 1000);
		return -1;
	}
	snprintf(cmd, sizeof(cmd), "lttng stop '%s' >/dev/null 2>&1", s);
	if (system(cmd) != 0)
		bench_die("lttng stop between warm-up and measurement failed");
	/* one "Discarded events: N" line per channel. N sometimes carries
	 * bit 63 (lttng-tools 2.13.9 here, per-uid buffers: 2^63 + the
	 * count after one stop/start, the count alone after the next, the
	 * count growing underneath): the bit is no count, so it is cleared */
	snprintf(cmd, sizeof(cmd), "lttng list '%s' 2>/dev/null", s);
	f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "Discarded events:");

		if (p)
			discarded += (int64_t)(strtoull(p + strlen("Discarded events:"), NULL, 10) &
					       INT64_MAX);
	}
	if (!f || pclose(f) != 0)
		bench_die("lttng list failed");
	snprintf(cmd, sizeof(cmd), "lttng start '%s' >/dev/null 2>&1", s);
	if (system(cmd) != 0)
		bench_die("lttng start between warm-up and measurement failed");
	return discarded;
}

static double mp_run(int nproc)
{
	struct bench_barrier b;
	int res[2];
	pid_t pids[8];

	bench_barrier_init(&b);
	if (pipe(res))
		bench_die("pipe");
	/* the children must not hold the parent's ends, or go never closes */
	fcntl(b.go[1], F_SETFD, FD_CLOEXEC);
	fcntl(b.ready[0], F_SETFD, FD_CLOEXEC);
	fcntl(res[0], F_SETFD, FD_CLOEXEC);
	for (int i = 0; i < nproc; i++)
		pids[i] = spawn("mp2child", b.ready[1], b.go[0], res[1]);
	close(res[1]);
	bench_barrier_wait(&b, nproc);
	lt_checkpoint();
	bench_barrier_go(&b);
	return bench_mp_collect(res[0], pids, nproc, g_n, NULL);
}

/* CPU clock ticks (user + system) of every lttng-consumerd: what LTTng's
 * consumer spends moving sub-buffers out, on the same two cores. */
static uint64_t consumerd_ticks(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	uint64_t sum = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[300], buf[1024], *p;
		unsigned long ut, st;
		ssize_t n;
		int fd;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		/* "pid (comm) state ppid ..." utime and stime are fields 14, 15 */
		if (!strstr(buf, "(lttng-consumerd)") || !(p = strrchr(buf, ')')))
			continue;
		if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
			sum += ut + st;
	}
	closedir(d);
	return sum;
}

static int case_mp2(void)
{
	double rate[BENCH_MAX_RUNS], secs = 0;
	int runs = (int)g_runs;
	uint64_t t0 = consumerd_ticks();

	for (int r = 0; r < runs; r++) {
		rate[r] = mp_run(2);
		secs += (double)g_n * 2 / rate[r];
	}
	double med = bench_median(rate, runs);
	/* the consumer's share of the two cores while the producers ran (it
	 * also drains each run's warm-up, so this is an upper bound) */
	double cons = (double)(consumerd_ticks() - t0) / (double)sysconf(_SC_CLK_TCK);

	printf("RESULT lttng_mp2 rate=%.0f min=%.0f max=%.0f runs=%d n_per_proc=%llu events=%llu "
	       "consumerd_cpu_s=%.2f measured_s=%.2f\n", med,
	       rate[0], rate[runs - 1], runs, (unsigned long long)g_n,
	       (unsigned long long)(2 * (g_n + WARM_N) * g_runs), cons, secs);
	return 0;
}

static volatile sig_atomic_t g_stop;
static void on_term(int sig) { (void)sig; g_stop = 1; }

static int spin_child(void)
{
	uint64_t i = 0;

	signal(SIGTERM, on_term);
	while (!g_stop)
		span_event(i++);
	return 0;
}

static int case_lat(void)
{
	uint64_t *lat = malloc(g_n * sizeof(*lat));
	struct bench_lat l;
	double ovh;
	int runs = (int)g_runs;
	uint64_t ticks0, start_ns;
	pid_t bg;

	if (!lat)
		bench_die("malloc");
	bg = spawn("spin", 0, 0, 0);
	usleep(200 * 1000);	/* let it register and start */
	ticks0 = consumerd_ticks();
	start_ns = bench_mono_ns();
	bench_lat_init(&l);
	ovh = bench_lat_overhead(&l, lat, g_n);
	for (int r = -1; r < runs; r++) {
		for (uint64_t i = 0; i < g_n; i++) {
			uint64_t t0 = bench_mono_ns(), t1 = bench_mono_ns();
			uint64_t a = bench_tsc_begin();

			tracepoint(shmtbench, span, t0, t1 - t0, 0, 2, 1, 1);
			lat[i] = bench_tsc_end() - a;
		}
		if (r >= 0)	/* r < 0: warm-up */
			bench_lat_run(&l, r, lat, g_n);
	}
	kill(bg, SIGTERM);
	waitpid(bg, NULL, 0);
	printf("RESULT lttng_lat");
	bench_lat_print(&l, runs);
	/* the consumer's CPU per second of the case, as a share of one core
	 * (bench_shmtrace's drainer_core) */
	printf(" timing_overhead=%.1f runs=%d n=%llu consumerd_core=%.2f\n", ovh, runs,
	       (unsigned long long)g_n,
	       (double)(consumerd_ticks() - ticks0) / (double)sysconf(_SC_CLK_TCK) /
	       ((double)(bench_mono_ns() - start_ns) / 1e9));
	free(lat);
	return 0;
}

static BENCH_NOINLINE double loop_tp(uint64_t n)
{
	uint64_t a = bench_mono_ns();

	for (uint64_t i = 0; i < n; i++) {
		tracepoint(shmtbench, span, i, 0, 0, 2, 1, 1);
		BENCH_BARRIER();
	}
	return (double)(bench_mono_ns() - a) / (double)n;
}

static int case_disabled(void)
{
	double empty, tp, diff;
	int runs = (int)g_runs;

	bench_alternate(loop_tp, g_n, runs, &empty, &tp, &diff);
	/* what an LTTng user pays when the span's two clock reads stay in */
	double clk = span_loop(g_n / 10 ? g_n / 10 : 1);

	printf("RESULT lttng_disabled tp=%.3f empty=%.3f diff=%.3f span_with_clocks=%.2f runs=%d n=%llu\n",
	       tp, empty, diff, clk, runs, (unsigned long long)g_n);
	return 0;
}

static int case_gen(void)
{
	uint64_t ts = bench_mono_ns(), fid = 0;
	uint64_t a = bench_mono_ns();

	for (uint64_t i = 0; i < g_n; i++) {
		uint64_t f = 0;

		if (i % 20 == 0)
			fid++;
		if (i % 20 < 2)
			f = fid;
		tracepoint(shmtbench, span, ts, 500, f, (uint32_t)(i & 3) + 2, 1, 1);
		ts += 1000;
	}
	printf("RESULT lttng_gen events=%llu secs=%.2f\n", (unsigned long long)g_n,
	       (double)(bench_mono_ns() - a) / 1e9);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s span1|mp2|lat|disabled|gen|oversub|frozen|threads\n", argv[0]);
		return 2;
	}
	g_self = argv[0];
	g_n = bench_env_u64("BENCH_N", 1000000);
	g_runs = bench_env_u64("BENCH_RUNS", 5);
	g_bare = getenv("BENCH_LT_BARE") != NULL;
	if (g_runs < 1 || g_runs > BENCH_MAX_RUNS || g_n < 1)
		return 2;
	if (!strcmp(argv[1], "mp2child") && argc == 5)
		return mp_child(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	if (!strcmp(argv[1], "spin"))
		return spin_child();
	if (!strcmp(argv[1], "tailchild"))
		return lt_tail_child(argc, argv);
	if (!strcmp(argv[1], "span1"))
		return case_span1();
	if (!strcmp(argv[1], "mp2"))
		return case_mp2();
	if (!strcmp(argv[1], "lat"))
		return case_lat();
	if (!strcmp(argv[1], "disabled"))
		return case_disabled();
	if (!strcmp(argv[1], "gen"))
		return case_gen();
	if (!strcmp(argv[1], "oversub") || !strcmp(argv[1], "frozen") || !strcmp(argv[1], "threads"))
		return lt_tail_case(argv[1]);
	fprintf(stderr, "unknown case %s\n", argv[1]);
	return 2;
}
