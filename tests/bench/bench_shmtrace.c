/* SPDX-License-Identifier: MIT */
/*
 * bench_shmtrace.c - the shmtrace side of `make bench` (tests/bench/run.sh
 * drives it and prints the table). One case per invocation:
 *
 *   bench_shmtrace span1     ns per complete span (2 x shmtrace_now + span), 1 producer
 *   bench_shmtrace beginend  the same with shmtrace_begin() + shmtrace_end() (open-span stack)
 *   bench_shmtrace args      the same with shmtrace_span_args(), 3 arguments (4 records)
 *   bench_shmtrace mp2       spans/s in total, 2 producer processes on one ring
 *   bench_shmtrace lat       per-call latency of shmtrace_span, 2nd producer running
 *   bench_shmtrace disabled  SHMTRACE_SCOPE with shmtrace_default == NULL vs empty loop
 *   bench_shmtrace drain     collector drain rate from a full ring
 *   bench_shmtrace export    capture of BENCH_N spans (10 % in flows), then `shmtrace export`
 *                            (export-otlp, export-perfetto: with --format otlp, perfetto)
 *   bench_shmtrace export-big capture of BENCH_N spans, exported once in each format to /dev/null
 *   bench_shmtrace oversub|frozen|threads  the producers' tail under stress (bench_tail.c);
 *                            oversub-bare, threads-bare: their loops with no tracer;
 *                            stopped, stopped-ow: calls beside a lock holder stopped in it
 *   bench_shmtrace snapshot  ms per M records of a snapshot of a full overwrite ring, and the
 *                            span call's p99.9 with a snapshot every 100 ms against none
 *
 * Environment: BENCH_N (events per run, per producer), BENCH_RUNS (measured
 * runs after one warm-up), BENCH_PREFIX (ring name prefix), BENCH_TMP
 * (directory for captures), BENCH_COLLECTOR (shmtrace-collector to drain
 * with; else a reader process using ring_reader.h advances the tail),
 * BENCH_TOOL (the shmtrace binary, for export).
 *
 * Prints one "RESULT case k=v ..." line on stdout; notes on stderr.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "bench/bench_common.h"
#include "bench_shmtrace.h"
#include "ring_writer.h"
#include "ring_reader.h"
#include "shmtrace.h"
#include "snapshot.h"

/* records per ring: 1M, or BENCH_RING_CAP (a power of two) to see how
 * another size behaves, e.g. the default ring's 262144 in case 3 */
#define RING_CAP g_ring_cap

static uint32_t g_ring_cap = 1u << 20;
static uint64_t g_n;
uint64_t g_runs;
static uint64_t g_rate;	/* BENCH_RATE: total spans/s to pace producers at; 0 = flat out */
static const char *g_prefix, *g_tmp;

/* ---------------------------------------------------------------- rings */

void ring_name(char *buf, size_t len, const char *what)
{
	snprintf(buf, len, "%s%s", g_prefix, what);
}

void ring_make_cfg(const char *name, const struct shmtrace_ring_config *cfg)
{
	int ret;

	shmtrace_ring_unlink(name);
	ret = shmtrace_ring_create(name, cfg);
	if (ret < 0) {
		fprintf(stderr, "bench: ring_create %s: %s\n", name, shmtrace_strerror(ret));
		exit(2);
	}
}

void ring_make(const char *name, uint32_t mode)
{
	struct shmtrace_ring_config cfg = { .capacity = RING_CAP, .mode = mode };

	ring_make_cfg(name, &cfg);
}

shmtrace_t *ring_open(const char *name)
{
	shmtrace_t *t;
	int ret = shmtrace_open(name, &t);

	if (ret < 0) {
		fprintf(stderr, "bench: open %s: %s\n", name, shmtrace_strerror(ret));
		exit(2);
	}
	return t;
}

/* A read-only look at the ring's counters, from the parent. */
struct shmt_view g_view;
static bool g_view_ok;

void view_open(const char *name)
{
	char err[256];

	if (g_view_ok)
		shmt_view_close(&g_view);
	g_view_ok = shmt_view_open(name, SHMT_OPEN_WRITE, &g_view, err, sizeof(err)) == 0;
	if (!g_view_ok) {
		fprintf(stderr, "bench: view %s: %s\n", name, err);
		exit(2);
	}
}

static uint64_t ring_head(void) { return load_acquire(&g_view.h->head.v); }
static uint64_t ring_tail(void) { return load_acquire(&g_view.h->tail.v); }
static uint64_t ring_dropped(void) { return load_relaxed(&g_view.h->dropped.v); }
/* Records the collector has still to write: published, and in blocks
 * handed over full (they take ring sequences when it reaches them). */
static uint64_t ring_backlog(void)
{
	return ring_head() - ring_tail() +
	       load_relaxed(&g_view.h->full_blocks.v) * (uint64_t)g_view.block_records;
}

/* Waits up to ms for the drainer to consume everything published. */
bool wait_drained(unsigned ms)
{
	uint64_t end = bench_mono_ns() + (uint64_t)ms * 1000000ull;

	while (bench_mono_ns() < end) {
		if (ring_tail() >= ring_head())
			return true;
		usleep(200);
	}
	return false;
}

/* ------------------------------------------------------------- drainers */

static volatile sig_atomic_t g_stop;
static void on_term(int sig) { (void)sig; g_stop = 1; }

/* The fallback drainer: reads every record lock-free and advances tail. */
static int reader_main(const char *name)
{
	struct shmt_view v;
	struct shmt_record r;
	char err[256];
	uint64_t sum = 0, n = 0, torn = 0;

	signal(SIGTERM, on_term);
	if (shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)) < 0) {
		fprintf(stderr, "reader: %s\n", err);
		return 1;
	}
	while (!g_stop) {
		uint64_t tail = load_relaxed(&v.h->tail.v), head = shmt_ring_head(&v);

		if (head == tail) {
			usleep(500);
			continue;
		}
		if (head - tail > v.capacity)
			tail = head - v.capacity;
		for (; tail < head; tail++) {
			if (shmt_ring_read(&v, tail, &r) == 0)
				sum += r.ts, n++;
			else
				torn++;
		}
		/* frees the slots for the producers' plan() */
		store_release(&v.h->tail.v, head);
	}
	fprintf(stderr, "reader: %llu records, %llu unreadable (sum %llx)\n",
		(unsigned long long)n, (unsigned long long)torn, (unsigned long long)sum);
	shmt_view_close(&v);
	return 0;
}

static const char *collector_path(void)
{
	const char *p = getenv("BENCH_COLLECTOR");

	return p && *p && access(p, X_OK) == 0 ? p : NULL;
}

/* Starts the real collector on an existing ring, draining it into a
 * capture or, recorder, as a flight recorder writing its snapshots (none
 * unless asked) into g_tmp; false if it did not report ready within
 * timeout_ms. */
static bool collector_spawn(struct drainer *d, const char *name, const char *tag, unsigned timeout_ms,
			    bool recorder)
{
	const char *path = collector_path();
	int pfd[2];
	char buf[16];
	struct pollfd p;

	if (!path)
		return false;
	snprintf(d->out, sizeof(d->out), "%s/%s.cap", g_tmp, tag);
	snprintf(d->log, sizeof(d->log), "%s/%s.collector.log", g_tmp, tag);
	unlink(d->out);
	if (pipe(pfd))
		bench_die("pipe");
	d->spawned_ns = bench_mono_ns();
	d->pid = fork();
	if (d->pid < 0)
		bench_die("fork");
	if (d->pid == 0) {
		char fdarg[16];
		int lfd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		close(pfd[0]);
		if (lfd >= 0)
			dup2(lfd, 2);
		snprintf(fdarg, sizeof(fdarg), "%d", pfd[1]);
		if (recorder)
			execl(path, path, "--ring", name, "--flight-recorder", "--snapshot-dir", g_tmp,
			      "--ready-fd", fdarg, (char *)NULL);
		else
			execl(path, path, "--ring", name, "--output", d->out, "--ready-fd", fdarg, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	p.fd = pfd[0];
	p.events = POLLIN;
	if (poll(&p, 1, (int)timeout_ms) == 1 && read(pfd[0], buf, sizeof(buf)) > 0 && !strncmp(buf, "ready", 5)) {
		d->ready_ns = bench_mono_ns();
		d->collector = true;
		close(pfd[0]);
		return true;
	}
	close(pfd[0]);
	kill(d->pid, SIGKILL);
	waitpid(d->pid, NULL, 0);
	fprintf(stderr, "note: %s did not report ready in %u ms; see below\n", path, timeout_ms);
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "tail -n 5 %s >&2", d->log);
		if (system(cmd)) {}
	}
	d->pid = 0;
	return false;
}

static bool collector_start(struct drainer *d, const char *name, const char *tag, unsigned timeout_ms)
{
	return collector_spawn(d, name, tag, timeout_ms, false);
}

void drainer_start(struct drainer *d, const char *name, const char *tag)
{
	memset(d, 0, sizeof(*d));
	if (collector_start(d, name, tag, 5000))
		return;
	d->spawned_ns = bench_mono_ns();
	d->pid = fork();
	if (d->pid < 0)
		bench_die("fork");
	if (d->pid == 0)
		_exit(reader_main(name));
	d->ready_ns = d->spawned_ns;
}

const char *drainer_kind(const struct drainer *d)
{
	return d->collector ? "collector" : "reader";
}

/* SIGTERM, then wait4 for its rusage. Returns the exit status. */
int drainer_stop(struct drainer *d)
{
	if (d->pid <= 0)
		return -1;
	kill(d->pid, SIGTERM);
	if (wait4(d->pid, &d->status, 0, &d->ru) < 0)
		bench_die("wait4");
	d->pid = 0;
	if (!WIFEXITED(d->status) || WEXITSTATUS(d->status) != 0)
		fprintf(stderr, "note: %s exited with status 0x%x\n", drainer_kind(d), d->status);
	return d->status;
}

/*
 * Removes a stopped drainer's capture, which no one reads after its case,
 * so that the cases do not leave each other a gigabyte of tmpfs: run
 * alone, the OTLP export wrote its 4.8 GB at 0.81 GB/s with 2 GB of other
 * files on /dev/shm and 1.3 to 1.5 GB/s without (docs/BENCHMARKS.md, under
 * Targets, says what this did and did not change inside `make bench`).
 */
void drainer_drop_capture(const struct drainer *d)
{
	if (d->collector)
		unlink(d->out);
}

/* The collector's one-line summary (last line of its stderr). */
void collector_summary(const struct drainer *d, char *buf, size_t len)
{
	FILE *f = fopen(d->log, "r");
	char line[1024];

	buf[0] = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (line[0] && line[0] != '\n')
			snprintf(buf, len, "%s", line);
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	for (char *p = buf; *p; p++)
		if (*p == '"')
			*p = '\'';
}

/* CPU (user + system) the stopped drainer used, in seconds */
static double drainer_cpu_s(const struct drainer *d)
{
	return (double)d->ru.ru_utime.tv_sec + d->ru.ru_utime.tv_usec / 1e6 +
	       (double)d->ru.ru_stime.tv_sec + d->ru.ru_stime.tv_usec / 1e6;
}

/* CPU (user + system) the stopped drainer used, ms per million records */
static double drainer_cpu_ms_per_m(const struct drainer *d, uint64_t records)
{
	return records ? drainer_cpu_s(d) * 1000.0 / ((double)records / 1e6) : 0.0;
}

static double drainer_sys_share(const struct drainer *d)
{
	double u = (double)d->ru.ru_utime.tv_sec + d->ru.ru_utime.tv_usec / 1e6;
	double k = (double)d->ru.ru_stime.tv_sec + d->ru.ru_stime.tv_usec / 1e6;

	return u + k > 0 ? k / (u + k) : 0.0;
}

static uint64_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* ---------------------------------------------------------------- cases */

/* Waits while the ring is over half full: keeps a producer below the
 * drainer's rate (outside any timed region), so that nothing is dropped.
 * Returns how many times it slept: each a sleep and a wake-up, which let
 * the scheduler put the producer on another task's CPU. */
static unsigned pace(shmtrace_t *t)
{
	struct shmtrace_stats st;
	unsigned slept = 0;

	for (;;) {
		if (shmtrace_stats(t, &st) < 0 || st.head - st.tail <= st.capacity / 2)
			return slept;
		usleep(200);
		slept++;
	}
}

static uint64_t g_lat_paused;	/* pace()'s sleeps in lat_timed()'s runs */

static double g_loop_cpu;	/* CPU ns per span of the last span_loop() */

static BENCH_NOINLINE double span_loop(shmtrace_t *t, uint32_t cat, uint32_t name, uint64_t n)
{
	uint64_t c = bench_cpu_ns(), a = bench_mono_ns();

	for (uint64_t i = 0; i < n; i++) {
		uint64_t t0 = shmtrace_now();
		uint64_t t1 = shmtrace_now();

		shmtrace_span(t, cat, name, t0, t1, i & 7 ? 0 : i);
	}
	a = bench_mono_ns() - a;
	g_loop_cpu = (double)(bench_cpu_ns() - c) / (double)n;
	return (double)a / (double)n;
}

/*
 * CPU ns of two reads of a clock, the loop of span_loop() without the span
 * call. A macro, not a function pointer: an indirect call would be part of
 * what is timed.
 */
#define CLOCK_PAIR_CPU(fn, read)						\
static BENCH_NOINLINE double fn(uint64_t n)					\
{										\
	uint64_t c = bench_cpu_ns();						\
	volatile uint64_t sink = 0;						\
										\
	for (uint64_t i = 0; i < n; i++) {					\
		uint64_t t0 = read;						\
		uint64_t t1 = read;						\
										\
		sink += t1 - t0 + (i & 7 ? 0 : i);				\
	}									\
	(void)sink;								\
	return (double)(bench_cpu_ns() - c) / (double)n;			\
}

/* what of case 1 is the clock */
CLOCK_PAIR_CPU(clocks_cpu, shmtrace_now())
/* yardsticks of the machine, in the same run: two bare rdtsc (what two
 * shmtrace_now() cannot go below) and two clock_gettime(CLOCK_MONOTONIC)
 * (what LTTng's case 1 loop reads around each tracepoint) */
CLOCK_PAIR_CPU(rdtsc_pair_cpu, __rdtsc())
CLOCK_PAIR_CPU(mono_pair_cpu, bench_mono_ns())

/* begin + end: the span, tracked as open while it runs */
static BENCH_NOINLINE double beginend_loop(shmtrace_t *t, uint32_t cat, uint32_t name, uint64_t n)
{
	uint64_t c = bench_cpu_ns(), a = bench_mono_ns();
	struct shmtrace_open_span sp;

	for (uint64_t i = 0; i < n; i++) {
		shmtrace_begin(t, &sp, cat, name, i & 7 ? 0 : i);
		shmtrace_end(&sp);
	}
	a = bench_mono_ns() - a;
	g_loop_cpu = (double)(bench_cpu_ns() - c) / (double)n;
	return (double)a / (double)n;
}

/* a span with 3 arguments (two integers and a string) */
static BENCH_NOINLINE double args_loop(shmtrace_t *t, uint32_t cat, uint32_t name, uint64_t n)
{
	uint64_t c = bench_cpu_ns(), a = bench_mono_ns();
	struct shmtrace_arg args[3] = {
		shmtrace_arg_int(name, 0), shmtrace_arg_int(cat, 0), shmtrace_arg_str(name, cat),
	};

	for (uint64_t i = 0; i < n; i++) {
		uint64_t t0 = shmtrace_now();
		uint64_t t1 = shmtrace_now();

		args[0].value = i;
		args[1].value = i * 3;
		shmtrace_span_args(t, cat, name, t0, t1, i & 7 ? 0 : i, args, 3);
	}
	a = bench_mono_ns() - a;
	g_loop_cpu = (double)(bench_cpu_ns() - c) / (double)n;
	return (double)a / (double)n;
}

typedef double (*loop_fn)(shmtrace_t *t, uint32_t cat, uint32_t name, uint64_t n);

static int case_loop(const char *tag, loop_fn loop)
{
	char name[128];
	struct drainer d;
	double ns[BENCH_MAX_RUNS], cpu[BENCH_MAX_RUNS], clk[BENCH_MAX_RUNS];
	double tsc2[BENCH_MAX_RUNS], mono2[BENCH_MAX_RUNS];
	shmtrace_t *t;
	uint32_t cat, nm;
	uint64_t drop0;
	int runs = (int)g_runs;

	ring_name(name, sizeof(name), tag);
	ring_make(name, SHMTRACE_MODE_DISCARD);
	view_open(name);
	drainer_start(&d, name, tag);
	t = ring_open(name);
	cat = shmtrace_intern(t, "bench");
	nm = shmtrace_intern(t, "span");
	/* warm-up: one lap of the ring, so that every block and slot was
	 * written by this process before (shmtrace_open() has read each page
	 * ahead; the lap warms the caches and the collector's path too) */
	loop(t, cat, nm, g_n > RING_CAP ? g_n : RING_CAP);
	shmtrace_flush(t);
	wait_drained(5000);
	drop0 = ring_dropped();
	for (int r = 0; r < runs; r++) {
		ns[r] = loop(t, cat, nm, g_n);
		cpu[r] = g_loop_cpu;
		shmtrace_flush(t);
		wait_drained(5000);
		/* with the ring attached: the TSC clock the spans use */
		clk[r] = clocks_cpu(g_n);
		tsc2[r] = rdtsc_pair_cpu(g_n);
		mono2[r] = mono_pair_cpu(g_n);
	}
	bool drained = wait_drained(10000);
	uint64_t dropped = ring_dropped() - drop0;
	double med = bench_median(ns, runs), cmed = bench_median(cpu, runs);

	shmtrace_close(t);
	drainer_stop(&d);
	drainer_drop_capture(&d);
	printf("RESULT %s cpu_ns=%.2f cpu_min=%.2f ns=%.2f min=%.2f max=%.2f runs=%d n=%llu drainer=%s dropped=%llu drained=%d "
	       "published=%llu clocks_cpu_ns=%.2f rdtsc2_cpu_ns=%.2f mono2_cpu_ns=%.2f\n",
	       tag, cmed, cpu[0], med, ns[0], ns[runs - 1], runs, (unsigned long long)g_n, drainer_kind(&d),
	       (unsigned long long)dropped, drained, (unsigned long long)ring_head(), bench_median(clk, runs),
	       bench_median(tsc2, runs), bench_median(mono2, runs));
	shmtrace_ring_unlink(name);
	return 0;
}

/* a producer's warm-up: at least a ring lap, as many spans as it will write
 * up to 2 M (the paced runs' 8 to 20 M would only lengthen the bench) */
#define MP_WARM (g_n < RING_CAP ? RING_CAP : g_n < 2000000 ? g_n : 2000000)

/* one run of nproc producer processes, each g_n spans; returns spans/s */
static double mp_run(const char *name, int nproc, uint64_t *errors)
{
	struct bench_barrier b;
	int res[2];
	pid_t pids[8];

	bench_barrier_init(&b);
	if (pipe(res))
		bench_die("pipe");
	for (int i = 0; i < nproc; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			bench_die("fork");
		if (pids[i] == 0) {
			struct bench_mp_result m = { 0, 0, 0 };
			shmtrace_t *t = ring_open(name);
			uint32_t cat = shmtrace_intern(t, "bench");
			uint32_t nm = shmtrace_intern(t, "mp");

			close(res[0]);
			/* warm-up in this process: a long-lived producer has the
			 * ring's pages mapped and its block claimed; the cost of a
			 * cold process is in docs/BENCHMARKS.md */
			for (uint64_t k = 0; k < MP_WARM; k++) {
				uint64_t t0 = shmtrace_now();

				shmtrace_span(t, cat, nm, t0, shmtrace_now(), 0);
				if ((k & 1023) == 0)
					pace(t);
			}
			shmtrace_flush(t);
			bench_barrier_child(&b);
			m.start = bench_mono_ns();
			for (uint64_t k = 0; k < g_n; k++) {
				uint64_t t0 = shmtrace_now();
				uint64_t t1 = shmtrace_now();

				if (shmtrace_span(t, cat, nm, t0, t1, 0) < 0)
					m.errors++;
				/* paced: hold this producer to g_rate / nproc spans/s,
				 * checked every 256 spans, spinning (as a busy
				 * application would) rather than sleeping */
				if (g_rate && (k & 255) == 255) {
					uint64_t due = m.start + (uint64_t)((double)(k + 1) * 1e9 * nproc / (double)g_rate);

					while (bench_mono_ns() < due)
						;
				}
			}
			m.end = bench_mono_ns();
			shmtrace_close(t);
			if (write(res[1], &m, sizeof(m)) != sizeof(m))
				_exit(1);
			_exit(0);
		}
	}
	close(res[1]);
	bench_barrier_wait(&b, nproc);
	wait_drained(10000);	/* start on an empty ring */
	bench_barrier_go(&b);
	return bench_mp_collect(res[0], pids, nproc, g_n, errors);
}

static int case_mp2(void)
{
	char name[128], summary[1024] = "";
	struct drainer d;
	double rate[BENCH_MAX_RUNS];
	uint64_t errors = 0, drop0;
	int runs = (int)g_runs;

	ring_name(name, sizeof(name), "mp2");
	ring_make(name, SHMTRACE_MODE_DISCARD);
	view_open(name);
	drainer_start(&d, name, "mp2");
	drop0 = ring_dropped();
	errors = 0;
	for (int r = 0; r < runs; r++) {
		rate[r] = mp_run(name, 2, &errors);
		wait_drained(5000);
	}
	bool drained = wait_drained(10000);
	uint64_t dropped = ring_dropped() - drop0, total = ring_head();

	drainer_stop(&d);
	drainer_drop_capture(&d);
	if (d.collector)
		collector_summary(&d, summary, sizeof(summary));
	double med = bench_median(rate, runs);

	printf("RESULT mp2 paced=%llu rate=%.0f min=%.0f max=%.0f runs=%d n_per_proc=%llu drainer=%s dropped=%llu "
	       "errors=%llu drained=%d published=%llu drainer_cpu_ms_per_m=%.1f drainer_sys=%.2f summary=\"%s\"\n",
	       (unsigned long long)g_rate, med, rate[0], rate[runs - 1], runs, (unsigned long long)g_n, drainer_kind(&d),
	       (unsigned long long)dropped, (unsigned long long)errors, drained,
	       (unsigned long long)total, drainer_cpu_ms_per_m(&d, total), drainer_sys_share(&d), summary);
	shmtrace_ring_unlink(name);
	return 0;
}

/* Runs (and one warm-up run) of g_n span calls, each timed alone into
 * lat, into l; paced (outside the timing) to a drainer, unless the ring
 * has none. */
static void lat_timed(shmtrace_t *t, uint32_t cat, uint32_t nm, uint64_t *lat,
		      struct bench_lat *l, int runs, bool paced)
{
	for (int r = -1; r < runs; r++) {
		for (uint64_t i = 0; i < g_n; i++) {
			uint64_t t0, t1, a;

			if ((i & 1023) == 0 && paced) {
				unsigned slept = pace(t);	/* not timed */

				if (r >= 0)
					g_lat_paused += slept;
			}
			t0 = shmtrace_now();
			t1 = shmtrace_now();
			a = bench_tsc_begin();

			shmtrace_span(t, cat, nm, t0, t1, 0);
			lat[i] = bench_tsc_end() - a;
		}
		if (r >= 0)	/* r < 0: warm-up */
			bench_lat_run(l, r, lat, g_n);
	}
}

/* A ring lap of warm-up, then lat_timed(): paced to a drainer, unless
 * the ring has none (an overwrite ring). */
static void lat_runs(shmtrace_t *t, uint32_t cat, uint32_t nm, uint64_t *lat,
		     struct bench_lat *l, int runs, bool paced)
{
	for (uint64_t i = 0; i < RING_CAP; i++) {
		uint64_t t0 = shmtrace_now();

		if ((i & 1023) == 0 && paced)
			pace(t);
		shmtrace_span(t, cat, nm, t0, shmtrace_now(), 0);
	}
	lat_timed(t, cat, nm, lat, l, runs, paced);
}

static int case_lat(void)
{
	char name[128];
	struct drainer d;
	uint64_t *lat = malloc(g_n * sizeof(*lat));
	struct bench_lat l;
	double ovh;
	uint64_t dropped, start_ns, made_ns, end_ns;
	/* shared with the second producer: when to stop, how often it paused */
	volatile struct { int stop; uint64_t paused; } *sh =
		mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int runs = (int)g_runs;
	pid_t bg;
	shmtrace_t *t;
	uint32_t cat, nm;

	if (!lat || sh == MAP_FAILED)
		bench_die("alloc");
	ring_name(name, sizeof(name), "lat");
	ring_make(name, SHMTRACE_MODE_DISCARD);
	view_open(name);
	drainer_start(&d, name, "lat");
	start_ns = bench_mono_ns();
	/* the second producer: spans as fast as it can until told to stop */
	bg = fork();
	if (bg == 0) {
		shmtrace_t *t2 = ring_open(name);
		uint32_t c2 = shmtrace_intern(t2, "bench"), n2 = shmtrace_intern(t2, "bg");

		while (!sh->stop) {
			sh->paused += pace(t2);
			for (int k = 0; k < 1024; k++) {
				uint64_t t0 = shmtrace_now();

				shmtrace_span(t2, c2, n2, t0, shmtrace_now(), 0);
			}
		}
		shmtrace_close(t2);
		_exit(0);
	}
	t = ring_open(name);
	cat = shmtrace_intern(t, "bench");
	nm = shmtrace_intern(t, "lat");
	bench_lat_init(&l);
	ovh = bench_lat_overhead(&l, lat, g_n);
	lat_runs(t, cat, nm, lat, &l, runs, true);
	sh->stop = 1;
	waitpid(bg, NULL, 0);
	made_ns = bench_mono_ns() - start_ns;
	shmtrace_close(t);
	wait_drained(10000);
	dropped = ring_dropped();
	drainer_stop(&d);
	end_ns = bench_mono_ns();
	drainer_drop_capture(&d);
	/* the load the two producers make: their records per second, and the
	 * drainer's CPU per second of the case, as a share of one core */
	printf("RESULT lat");
	bench_lat_print(&l, runs);
	/* paused: the timed producer's sleeps in pace() during its runs, and
	 * the second producer's over its whole life */
	printf(" timing_overhead=%.1f runs=%d n=%llu drainer=%s dropped=%llu paused=%llu "
	       "paused_bg=%llu rate=%.0f drainer_core=%.2f\n", ovh, runs, (unsigned long long)g_n,
	       drainer_kind(&d), (unsigned long long)dropped, (unsigned long long)g_lat_paused,
	       (unsigned long long)sh->paused, (double)ring_head() * 1e9 / (double)made_ns,
	       drainer_cpu_s(&d) * 1e9 / (double)(end_ns - start_ns));
	shmtrace_ring_unlink(name);
	free(lat);
	return 0;
}

/*
 * A ring left to itself: the span call's latency into a discard ring of
 * the default configuration (no collector, no second producer), read
 * post-mortem afterwards. The warm-up and the timed runs together stay
 * below the ring's capacity, so every record is kept and no call meets a
 * full ring: what is timed is staging and what a full block costs with
 * nobody to hand it to.
 */
static int case_alone(void)
{
	char name[128];
	uint64_t *lat = malloc(g_n * sizeof(*lat)), dropped;
	struct bench_lat l;
	int runs = (int)g_runs;
	shmtrace_t *t;
	uint32_t cat, nm;
	double ovh;

	if (!lat)
		bench_die("alloc");
	if (g_n * (uint64_t)(runs + 1) > 262144) {
		fprintf(stderr, "bench: alone: BENCH_N x (BENCH_RUNS + 1) must stay within the default ring's 262144 records\n");
		return 2;
	}
	ring_name(name, sizeof(name), "alone");
	ring_make_cfg(name, &(struct shmtrace_ring_config){ .mode = SHMTRACE_MODE_DISCARD });
	view_open(name);
	t = ring_open(name);
	cat = shmtrace_intern(t, "bench");
	nm = shmtrace_intern(t, "alone");
	bench_lat_init(&l);
	ovh = bench_lat_overhead(&l, lat, g_n);
	lat_timed(t, cat, nm, lat, &l, runs, false);
	shmtrace_close(t);
	dropped = ring_dropped();
	printf("RESULT alone");
	bench_lat_print(&l, runs);
	printf(" timing_overhead=%.1f runs=%d n=%llu dropped=%llu\n", ovh, runs, (unsigned long long)g_n,
	       (unsigned long long)dropped);
	shmtrace_ring_unlink(name);
	free(lat);
	return 0;
}

static BENCH_NOINLINE double loop_scope(uint64_t n)
{
	uint64_t a = bench_mono_ns();

	for (uint64_t i = 0; i < n; i++) {
		SHMTRACE_SCOPE("bench", "disabled");
		BENCH_BARRIER();
	}
	return (double)(bench_mono_ns() - a) / (double)n;
}

static int case_disabled(void)
{
	double empty, scope, diff;
	int runs = (int)g_runs;

	if (shmtrace_default != NULL) {
		fprintf(stderr, "bench: SHMTRACE_RING is set; unset it for this case\n");
		return 2;
	}
	bench_alternate(loop_scope, g_n, runs, &empty, &scope, &diff);
	printf("RESULT disabled scope=%.3f empty=%.3f diff=%.3f runs=%d n=%llu\n", scope, empty, diff,
	       runs, (unsigned long long)g_n);
	return 0;
}

static uint64_t proc_vmhwm_kb(pid_t pid)
{
	char path[64], line[256];
	uint64_t kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			kb = strtoull(line + 6, NULL, 10);
	fclose(f);
	return kb;
}

/* Fills a fresh ring (discard mode) with exactly its capacity. */
static void fill_ring(const char *name)
{
	shmtrace_t *t = ring_open(name);
	uint32_t cat = shmtrace_intern(t, "bench"), nm = shmtrace_intern(t, "drain");

	for (uint64_t i = 0; i < RING_CAP; i++) {
		uint64_t t0 = shmtrace_now();

		shmtrace_span(t, cat, nm, t0, t0 + 100, i % 10 ? 0 : i + 1);
	}
	shmtrace_close(t);
}

/* CPU time a process has used, in ns (/proc/<pid>/schedstat, exact). */
static uint64_t proc_cpu_ns(pid_t pid)
{
	char path[64];
	unsigned long long ns = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &ns) != 1)
		ns = 0;
	fclose(f);
	return ns;
}

/* User and system clock ticks a process has used (/proc/<pid>/stat). */
static void proc_ticks(pid_t pid, uint64_t *user, uint64_t *sys)
{
	char path[64], buf[1024], *p;
	unsigned long long u = 0, k = 0;
	size_t n;
	FILE *f;

	*user = *sys = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* after the command's ")": state is field 3, utime 14, stime 15 */
	p = strrchr(buf, ')');
	if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &u, &k) == 2) {
		*user = u;
		*sys = k;
	}
}

#define WARM_LAPS 4	/* ring laps per run: more clock ticks for the split */

/*
 * The running collector's drain rate: stop it, fill the ring (a full lap),
 * then let it go and time until the tail reaches the head. A long-lived
 * collector has the ring mapped and its buffers grown, so this is what it
 * does under load; the cold figure includes its start-up. CPU is exact
 * (schedstat); its user/system split comes from clock ticks, summed in
 * *ticks_user and *ticks_sys over every lap of every run.
 */
static void drain_warm(const char *name, struct drainer *d, double *rate, double *cpu_ms_per_m,
		       uint64_t *ticks_user, uint64_t *ticks_sys)
{
	uint64_t head, c0, t0, u0, k0, u1, k1;

	kill(d->pid, SIGSTOP);
	fill_ring(name);
	head = ring_head();
	c0 = proc_cpu_ns(d->pid);
	proc_ticks(d->pid, &u0, &k0);
	t0 = bench_mono_ns();
	kill(d->pid, SIGCONT);
	while (ring_tail() < head)
		;
	*rate = (double)RING_CAP / ((double)(bench_mono_ns() - t0) / 1e9);
	*cpu_ms_per_m = (double)(proc_cpu_ns(d->pid) - c0) / 1e6 / ((double)RING_CAP / 1e6);
	proc_ticks(d->pid, &u1, &k1);
	*ticks_user += u1 - u0;
	*ticks_sys += k1 - k0;
}

static int case_drain(void)
{
	char name[128], summary[1024] = "";
	double rate[BENCH_MAX_RUNS], rate_exit[BENCH_MAX_RUNS], cpu[BENCH_MAX_RUNS];
	double hwm[BENCH_MAX_RUNS], mbs[BENCH_MAX_RUNS], sys[BENCH_MAX_RUNS];
	double wrate[BENCH_MAX_RUNS * WARM_LAPS], wcpu[BENCH_MAX_RUNS * WARM_LAPS], wsys;
	uint64_t bytes = 0, recs = 0, tu = 0, tk = 0;
	int runs = (int)g_runs;

	if (!collector_path()) {
		printf("RESULT drain skipped=\"collector not built: nothing to measure\"\n");
		return 0;
	}
	ring_name(name, sizeof(name), "drain");
	for (int r = -1; r < runs; r++) {
		struct drainer d;
		uint64_t head, done_ns, exit_ns, warm_ns;
		double warm_ms;
		uint64_t kb;

		ring_make(name, SHMTRACE_MODE_DISCARD);
		view_open(name);
		fill_ring(name);
		head = ring_head();
		memset(&d, 0, sizeof(d));
		if (!collector_start(&d, name, "drain", 5000)) {
			printf("RESULT drain skipped=\"collector did not start\"\n");
			return 0;
		}
		while (ring_tail() < head) {
			if (bench_mono_ns() - d.spawned_ns > 60ull * 1000000000ull) {
				fprintf(stderr, "note: collector drained %llu of %llu in 60 s\n",
					(unsigned long long)ring_tail(), (unsigned long long)head);
				break;
			}
			usleep(50);
		}
		done_ns = bench_mono_ns();
		kb = proc_vmhwm_kb(d.pid);
		warm_ms = 0;
		warm_ns = bench_mono_ns();
		for (int l = 0; r >= 0 && l < WARM_LAPS; l++) {
			drain_warm(name, &d, &wrate[r * WARM_LAPS + l], &wcpu[r * WARM_LAPS + l], &tu, &tk);
			warm_ms += wcpu[r * WARM_LAPS + l] * ((double)RING_CAP / 1e6);
		}
		warm_ns = bench_mono_ns() - warm_ns;
		drainer_stop(&d);
		/* the cold figures leave out the warm laps (fills included) */
		exit_ns = bench_mono_ns() - warm_ns;
		if (r < 0)
			continue;
		recs = ring_head();	/* the cold lap and the warm ones */
		bytes = file_size(d.out);
		rate[r] = (double)head / ((double)(done_ns - d.spawned_ns) / 1e9);
		rate_exit[r] = (double)head / ((double)(exit_ns - d.spawned_ns) / 1e9);
		mbs[r] = (double)bytes * ((double)head / (double)recs) / 1e6 /
			 ((double)(exit_ns - d.spawned_ns) / 1e9);
		/* the cold lap's: the collector's whole life less the warm laps */
		cpu[r] = (drainer_cpu_ms_per_m(&d, head) - warm_ms / ((double)head / 1e6)) / 1000.0;
		sys[r] = drainer_sys_share(&d);
		hwm[r] = (double)(kb ? kb : (uint64_t)d.ru.ru_maxrss) / 1024.0;
		collector_summary(&d, summary, sizeof(summary));
		unlink(d.out);
		shmtrace_ring_unlink(name);
	}
	/* the warm CPU split between user and system by the ticks' share */
	wsys = tu + tk ? (double)tk / (double)(tu + tk) : 0.0;
	printf("RESULT drain rate=%.0f rate_to_exit=%.0f warm_rate=%.0f warm_cpu_ms_per_m=%.1f "
	       "warm_user_ms_per_m=%.1f warm_sys_ms_per_m=%.1f warm_ticks=%llu mbs=%.1f "
	       "cpu_ms_per_m=%.1f sys_share=%.2f hwm_mb=%.1f "
	       "capture_bytes=%llu records=%llu bytes_per_rec=%.2f runs=%d summary=\"%s\"\n",
	       bench_median(rate, runs), bench_median(rate_exit, runs),
	       bench_median(wrate, runs * WARM_LAPS), bench_median(wcpu, runs * WARM_LAPS),
	       bench_median(wcpu, runs * WARM_LAPS) * (1.0 - wsys),
	       bench_median(wcpu, runs * WARM_LAPS) * wsys, (unsigned long long)(tu + tk),
	       bench_median(mbs, runs),
	       bench_median(cpu, runs) * 1000.0, bench_median(sys, runs), bench_median(hwm, runs),
	       (unsigned long long)bytes,
	       (unsigned long long)recs, recs ? (double)bytes / (double)recs : 0.0, runs, summary);
	shmtrace_ring_unlink(name);
	return 0;
}

/* Runs argv to completion; returns wall ns, rusage in *ru. */
static uint64_t run_timed(char *const argv[], struct rusage *ru, int *status, const char *log)
{
	uint64_t a = bench_mono_ns();
	pid_t pid = fork();

	if (pid < 0)
		bench_die("fork");
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	if (wait4(pid, status, 0, ru) < 0)
		bench_die("wait4");
	return bench_mono_ns() - a;
}

/*
 * MB/s at which this process writes n_mb MB of new pages to a file in dir
 * (1 MB writes, then fsync), once: what an exporter writing as much there
 * waits for. tmpfs allocates and clears every page, and on this VM the
 * rate depends on how much is written and when (`dd` on 2026-12-01: 1 GB
 * at 1.7 GB/s, 4.8 GB at 0.3 GB/s), so it is measured beside the export.
 */
static double new_page_mbs(const char *dir, uint64_t n_mb)
{
	static char buf[1 << 20];
	char path[600];
	uint64_t a;
	double mbs;
	int fd;

	memset(buf, 'x', sizeof(buf));
	snprintf(path, sizeof(path), "%s/pages.tmp", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		bench_die("open pages.tmp");
	a = bench_mono_ns();
	for (uint64_t i = 0; i < n_mb; i++)
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			bench_die("write pages.tmp");
	fsync(fd);
	mbs = (double)n_mb * 1.048576 / ((double)(bench_mono_ns() - a) / 1e9);
	close(fd);
	unlink(path);
	return mbs;
}

/* The capture the export cases read: n spans through a collector, every
 * 20th starting a flow the next one continues (10 % in flows). */
struct export_cap {
	uint64_t flows, dropped, recs, cap_bytes;
	char summary[1024];
};

/* Makes it into d->out; false (and a RESULT line saying why) when the
 * collector does not start. */
static bool export_capture(const char *cname, uint64_t n, struct drainer *d, struct export_cap *ec)
{
	char name[128];
	shmtrace_t *t;
	uint32_t cat, nm[4];

	memset(ec, 0, sizeof(*ec));
	ring_name(name, sizeof(name), "export");
	ring_make(name, SHMTRACE_MODE_DISCARD);
	view_open(name);
	memset(d, 0, sizeof(*d));
	if (!collector_start(d, name, "export", 5000)) {
		printf("RESULT %s skipped=\"collector did not start\"\n", cname);
		return false;
	}
	t = ring_open(name);
	cat = shmtrace_intern(t, "bench");
	nm[0] = shmtrace_intern(t, "a");
	nm[1] = shmtrace_intern(t, "b");
	nm[2] = shmtrace_intern(t, "c");
	nm[3] = shmtrace_intern(t, "d");
	/* Paced so that the ring never fills: the capture must hold all. */
	uint64_t fid = 0, ts = shmtrace_now();

	for (uint64_t i = 0; i < n; i++) {
		uint64_t f = 0;

		if (i % 20 == 0) {
			fid = shmtrace_flow_new(t);
			ec->flows++;
		}
		if (i % 20 < 2)
			f = fid;
		/* synthetic, non-overlapping times: the exporter sees real spans */
		shmtrace_span(t, cat, nm[i & 3], ts, ts + 500, f);
		ts += 1000;
		if ((i & 4095) == 0)
			while (ring_backlog() > RING_CAP / 2)
				usleep(100);
	}
	shmtrace_close(t);
	wait_drained(30000);
	/* counted once the collector has stopped: it sequences the blocks
	 * handed over last on its way out, after tail reached head */
	drainer_stop(d);
	ec->dropped = ring_dropped();
	ec->recs = ring_head();
	collector_summary(d, ec->summary, sizeof(ec->summary));
	ec->cap_bytes = file_size(d->out);
	shmtrace_ring_unlink(name);
	return true;
}

/* fmt: "chrome", "otlp" or "perfetto"; the case is export[-otlp|-perfetto] */
static int case_export(const char *fmt)
{
	bool otlp = !strcmp(fmt, "otlp");
	const char *cname = otlp ? "export-otlp" : strcmp(fmt, "chrome") ? "export-perfetto" : "export";
	const char *tool = getenv("BENCH_TOOL");
	char json[600], log[600], summary[1024] = "";
	struct drainer d;
	struct export_cap ec;
	uint64_t flows, dropped, recs, cap_bytes;
	double evs[BENCH_MAX_RUNS], mbs[BENCH_MAX_RUNS], rss[BENCH_MAX_RUNS], secs[BENCH_MAX_RUNS];
	double evs_null[BENCH_MAX_RUNS], page_mbs = 0;
	uint64_t json_bytes = 0;
	int runs = (int)g_runs;

	if (!collector_path()) {
		printf("RESULT %s skipped=\"collector not built, no capture to export\"\n", cname);
		return 0;
	}
	if (!tool || access(tool, X_OK)) {
		printf("RESULT %s skipped=\"shmtrace tool not built (no %s)\"\n", cname, tool ? tool : "BENCH_TOOL");
		return 0;
	}
	if (!export_capture(cname, g_n, &d, &ec))
		return 0;
	flows = ec.flows;
	dropped = ec.dropped;
	recs = ec.recs;
	cap_bytes = ec.cap_bytes;
	snprintf(summary, sizeof(summary), "%s", ec.summary);
	snprintf(json, sizeof(json), "%s/export.json", g_tmp);
	snprintf(log, sizeof(log), "%s/export.log", g_tmp);
	/* runs to the file, then (OTLP) as many to /dev/null: the exporter's
	 * own rate, without the file system's */
	for (int r = -1; r < (otlp ? 2 * runs : runs); r++) {
		bool null = r >= runs;
		char *argv[] = { (char *)tool, "export", d.out, "-o", null ? "/dev/null" : json,
				 "--format", (char *)fmt, NULL };
		struct rusage ru;
		int status;
		uint64_t ns;

		if (r == runs) {
			/* as each run to the file found it: no JSON file yet */
			json_bytes = file_size(json);
			unlink(json);
			page_mbs = new_page_mbs(g_tmp, (json_bytes + (1 << 20) - 1) >> 20);
		}
		if (!null)
			unlink(json);
		ns = run_timed(argv, &ru, &status, log);
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			char cmd[700];

			printf("RESULT %s skipped=\"shmtrace export failed, status 0x%x\"\n", cname, status);
			snprintf(cmd, sizeof(cmd), "tail -n 5 %s >&2", log);
			if (system(cmd)) {}
			unlink(d.out);
			return 0;
		}
		if (r < 0)
			continue;
		if (null) {
			evs_null[r - runs] = (double)recs / ((double)ns / 1e9);
			continue;
		}
		secs[r] = (double)ns / 1e9;
		evs[r] = (double)recs / secs[r];
		mbs[r] = (double)file_size(json) / 1e6 / secs[r];
		rss[r] = (double)ru.ru_maxrss / 1024.0;
	}
	printf("RESULT %s secs=%.2f evs=%.0f ", cname,
	       bench_median(secs, runs), bench_median(evs, runs));
	if (otlp)
		printf("evs_null=%.0f page_mbs=%.1f ", bench_median(evs_null, runs), page_mbs);
	printf("mbs=%.1f rss_mb=%.1f json_bytes=%llu records=%llu flows=%llu "
	       "dropped=%llu capture_bytes=%llu bytes_per_rec=%.2f runs=%d summary=\"%s\"\n",
	       bench_median(mbs, runs),
	       bench_median(rss, runs), (unsigned long long)(otlp ? json_bytes : file_size(json)),
	       (unsigned long long)recs,
	       (unsigned long long)flows, (unsigned long long)dropped, (unsigned long long)cap_bytes,
	       recs ? (double)cap_bytes / (double)recs : 0.0, runs, summary);
	unlink(json);
	unlink(d.out);
	return 0;
}

/* A large capture (BENCH_N spans, 10 % in flows) exported once in each
 * format to /dev/null: the exporters' rate and peak memory at a size that
 * case 6's shows them flat against. */
static int case_export_big(void)
{
	static const char *const fmts[] = { "chrome", "otlp", "perfetto" };
	const char *tool = getenv("BENCH_TOOL");
	char log[600];
	struct drainer d;
	struct export_cap ec;

	if (!collector_path() || !tool || access(tool, X_OK)) {
		printf("RESULT export-big skipped=\"collector or shmtrace tool not built\"\n");
		return 0;
	}
	if (!export_capture("export-big", g_n, &d, &ec))
		return 0;
	snprintf(log, sizeof(log), "%s/export-big.log", g_tmp);
	printf("RESULT export-big records=%llu flows=%llu dropped=%llu capture_bytes=%llu",
	       (unsigned long long)ec.recs, (unsigned long long)ec.flows,
	       (unsigned long long)ec.dropped, (unsigned long long)ec.cap_bytes);
	for (size_t k = 0; k < sizeof(fmts) / sizeof(fmts[0]); k++) {
		char *argv[] = { (char *)tool, "export", d.out, "-o", "/dev/null", "--format",
				 (char *)fmts[k], NULL };
		struct rusage ru;
		int status;
		uint64_t ns = run_timed(argv, &ru, &status, log);

		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			printf(" %s_failed=0x%x", fmts[k], status);
			continue;
		}
		printf(" %s_secs=%.2f %s_evs=%.0f %s_rss_mb=%.1f", fmts[k], (double)ns / 1e9, fmts[k],
		       (double)ec.recs / ((double)ns / 1e9), fmts[k], (double)ru.ru_maxrss / 1024.0);
	}
	printf("\n");
	unlink(d.out);
	return 0;
}

/* One snapshot of ring v into path: its records, and wall and CPU ms. */
static uint64_t snapshot_once(const struct shmt_view *v, const char *ring, const char *path,
			      double *ms, double *cpu_ms)
{
	struct shmt_snap_opts o = { .ring = ring, .info = { .cause = SHMT_SNAP_COMMAND } };
	struct shmt_snap_result res;
	uint64_t a = bench_mono_ns(), c = bench_cpu_ns();
	char err[512];

	if (shmt_snapshot_write(v, path, &o, &res, err, sizeof(err)) < 0)
		bench_die(err);
	*ms = (double)(bench_mono_ns() - a) / 1e6;
	*cpu_ms = (double)(bench_cpu_ns() - c) / 1e6;
	return res.records;
}

/*
 * Snapshots of a flight recorder's ring (an overwrite ring, no collector):
 * what one of a full ring of RING_CAP records costs (ms per M records,
 * wall and CPU, written to BENCH_TMP), and the span call's latency (as in
 * case 3, no second producer) with another process taking a snapshot
 * every 100 ms, against the same without.
 */
static int case_snapshot(void)
{
	struct bench_lat off, on, rec;
	struct drainer fr = { 0 };
	double ms[BENCH_MAX_RUNS], cpu[BENCH_MAX_RUNS];
	uint64_t *lat = malloc(g_n * sizeof(*lat)), records = 0;
	volatile int *stop = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char name[128], path[512], e[256];
	struct shmt_view v;
	int runs = (int)g_runs;
	shmtrace_t *t;
	uint32_t cat, nm;
	pid_t snapper;

	if (!lat || stop == MAP_FAILED)
		bench_die("alloc");
	ring_name(name, sizeof(name), "snap");
	ring_make(name, SHMTRACE_MODE_OVERWRITE);
	snprintf(path, sizeof(path), "%s/snapshot.cap", g_tmp);
	fill_ring(name);
	if (shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &v, e, sizeof(e)) < 0)
		bench_die(e);
	for (int r = -1; r < runs; r++) {
		double w, c;

		records = snapshot_once(&v, name, path, &w, &c);
		if (r >= 0) {
			ms[r] = w * 1e6 / (double)records;
			cpu[r] = c * 1e6 / (double)records;
		}
	}
	t = ring_open(name);
	cat = shmtrace_intern(t, "bench");
	nm = shmtrace_intern(t, "lat");
	bench_lat_init(&off);
	bench_lat_init(&on);
	lat_runs(t, cat, nm, lat, &off, runs, false);
	snapper = fork();
	if (snapper == 0) {
		struct timespec nap = { 0, 100 * 1000 * 1000 };
		double w, c;

		while (!*stop) {
			snapshot_once(&v, name, path, &w, &c);
			nanosleep(&nap, NULL);
		}
		_exit(0);
	}
	lat_runs(t, cat, nm, lat, &on, runs, false);
	*stop = 1;
	waitpid(snapper, NULL, 0);
	/* the same calls with a flight recorder holding the ring: the
	 * producers hand full blocks over to it instead of copying */
	bench_lat_init(&rec);
	if (collector_spawn(&fr, name, "recorder", 5000, true)) {
		lat_runs(t, cat, nm, lat, &rec, runs, false);
		drainer_stop(&fr);
	}
	shmtrace_close(t);
	shmt_view_close(&v);
	unlink(path);
	printf("RESULT snapshot records=%llu ms_per_m=%.1f cpu_ms_per_m=%.1f p999_off=%.1f "
	       "p999_on=%.1f p9999_off=%.1f p9999_on=%.1f recorder=%d p99_rec=%.1f p999_rec=%.1f "
	       "p9999_rec=%.1f max_rec=%.1f p99_off=%.1f runs=%d n=%llu\n",
	       (unsigned long long)records, bench_median(ms, runs), bench_median(cpu, runs),
	       bench_median(off.p999, runs), bench_median(on.p999, runs),
	       bench_median(off.p9999, runs), bench_median(on.p9999, runs), fr.collector,
	       bench_median(rec.p99, runs), bench_median(rec.p999, runs),
	       bench_median(rec.p9999, runs), (double)rec.max / rec.tsc_per_ns,
	       bench_median(off.p99, runs), runs, (unsigned long long)g_n);
	shmtrace_ring_unlink(name);
	free(lat);
	return 0;
}

int main(int argc, char **argv)
{
	static char tmpdef[] = "/tmp";

	if (argc < 2) {
		fprintf(stderr, "usage: %s span1|beginend|args|mp2|lat|disabled|drain|export|export-otlp|export-perfetto|export-big"
			"|oversub|frozen|threads|oversub-bare|threads-bare|stopped|stopped-ow|snapshot|alone\n", argv[0]);
		return 2;
	}
	g_n = bench_env_u64("BENCH_N", 1000000);
	g_runs = bench_env_u64("BENCH_RUNS", 5);
	g_rate = bench_env_u64("BENCH_RATE", 0);
	uint64_t cap = bench_env_u64("BENCH_RING_CAP", 1u << 20);

	if (cap < 1024 || cap > SHMT_MAX_CAPACITY || (cap & (cap - 1))) {
		fprintf(stderr, "bench: BENCH_RING_CAP: need a power of two from 1024 to 2^24\n");
		return 2;
	}
	g_ring_cap = (uint32_t)cap;
	if (g_runs < 1 || g_runs > BENCH_MAX_RUNS || g_n < 1)
		return 2;
	g_prefix = getenv("BENCH_PREFIX") ? getenv("BENCH_PREFIX") : "shmtbench-";
	g_tmp = getenv("BENCH_TMP") ? getenv("BENCH_TMP") : tmpdef;
	if (!strcmp(argv[1], "span1"))
		return case_loop("span1", span_loop);
	if (!strcmp(argv[1], "beginend"))
		return case_loop("beginend", beginend_loop);
	if (!strcmp(argv[1], "args"))
		return case_loop("args", args_loop);
	if (!strcmp(argv[1], "mp2"))
		return case_mp2();
	if (!strcmp(argv[1], "lat"))
		return case_lat();
	if (!strcmp(argv[1], "disabled"))
		return case_disabled();
	if (!strcmp(argv[1], "drain"))
		return case_drain();
	if (!strcmp(argv[1], "export"))
		return case_export("chrome");
	if (!strcmp(argv[1], "export-otlp"))
		return case_export("otlp");
	if (!strcmp(argv[1], "export-perfetto"))
		return case_export("perfetto");
	if (!strcmp(argv[1], "export-big"))
		return case_export_big();
	if (!strcmp(argv[1], "oversub") || !strcmp(argv[1], "frozen") || !strcmp(argv[1], "threads") ||
	    !strcmp(argv[1], "oversub-bare") || !strcmp(argv[1], "threads-bare") || !strcmp(argv[1], "stopped") ||
	    !strcmp(argv[1], "stopped-ow"))
		return case_tail(argv[1]);
	if (!strcmp(argv[1], "snapshot"))
		return case_snapshot();
	if (!strcmp(argv[1], "alone"))
		return case_alone();
	fprintf(stderr, "unknown case %s\n", argv[1]);
	return 2;
}
