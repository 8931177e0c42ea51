/* SPDX-License-Identifier: MIT */
/*
 * bench_stream.c - case 11 of `make bench` (tests/bench/run.sh): the live
 * stream to OpenTelemetry (`shmtrace stream`, what `shmtrace-collector
 * --otlp-endpoint` runs), against a loopback OTLP/HTTP sink of this
 * program that takes every request and answers 200 at once.
 *
 *   bench_stream stream   a capture of BENCH_N spans (10 % in flows, made by
 *                         the collector) streamed whole, protobuf, gzip and
 *                         none: spans/s and CPU ms per M spans of the
 *                         stream; then the collector's drain rate of a full
 *                         ring of 8 M records with --otlp-endpoint and
 *                         without (the stream reading beside it), from the
 *                         collector's --ready-fd to tail = head
 *
 * Environment: BENCH_N, BENCH_RUNS, BENCH_PREFIX, BENCH_TMP, BENCH_COLLECTOR
 * and BENCH_TOOL as bench_shmtrace.c takes them. Prints one "RESULT stream
 * k=v ..." line on stdout; notes on stderr.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "bench/bench_common.h"
#include "ring_reader.h"
#include "shmtrace.h"

static uint64_t g_n, g_runs;
static const char *g_prefix, *g_tmp, *g_collector, *g_tool;

/* ----------------------------------------------------------------- sink */

/* One connection: requests read to their Content-Length, each answered
 * 200 with an empty body (an empty ExportTraceServiceResponse). */
static void sink_conn(int fd)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
				 "Content-Length: 0\r\n\r\n";
	static char buf[1 << 16];
	size_t have = 0;

	for (;;) {
		char *end = memmem(buf, have, "\r\n\r\n", 4), *cl;
		size_t need;
		ssize_t r;

		if (!end) {
			if (have == sizeof(buf) ||
			    (r = read(fd, buf + have, sizeof(buf) - have)) <= 0)
				return;
			have += (size_t)r;
			continue;
		}
		*end = 0;
		cl = strcasestr(buf, "Content-Length:");
		need = (size_t)(end + 4 - buf) + (cl ? strtoull(cl + 15, NULL, 10) : 0);
		/* the body, read and thrown away */
		while (have < need) {
			need -= have;
			if ((r = read(fd, buf, sizeof(buf))) <= 0)
				return;
			have = (size_t)r;
		}
		memmove(buf, buf + need, have - need);
		have -= need;
		if (write(fd, ok, sizeof(ok) - 1) != (ssize_t)sizeof(ok) - 1)
			return;
	}
}

/* A sink process on 127.0.0.1; its port in *port. */
static pid_t sink_start(int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	pid_t pid;

	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) || listen(s, 16) ||
	    getsockname(s, (struct sockaddr *)&sa, &sl))
		bench_die("sink socket");
	*port = ntohs(sa.sin_port);
	pid = fork();
	if (pid < 0)
		bench_die("fork");
	if (pid == 0) {
		for (;;) {
			int c = accept(s, NULL, NULL);

			if (c < 0)
				continue;
			if (fork() == 0) {
				sink_conn(c);
				_exit(0);
			}
			close(c);
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
		}
	}
	close(s);
	return pid;
}

/* ------------------------------------------------------------- captures */

/* Runs argv to its end; wall ns, its CPU ns in *cpu. */
static uint64_t run_cpu(char *const argv[], uint64_t *cpu, const char *log)
{
	uint64_t a = bench_mono_ns();
	struct rusage ru;
	int st;
	pid_t pid = fork();

	if (pid < 0)
		bench_die("fork");
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd >= 0)
			dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	if (wait4(pid, &st, 0, &ru) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		fprintf(stderr, "note: %s %s failed (status 0x%x), see %s\n", argv[0], argv[1], st, log);
	*cpu = (uint64_t)ru.ru_utime.tv_sec * 1000000000ull + (uint64_t)ru.ru_utime.tv_usec * 1000ull +
	       (uint64_t)ru.ru_stime.tv_sec * 1000000000ull + (uint64_t)ru.ru_stime.tv_usec * 1000ull;
	return bench_mono_ns() - a;
}

/* A collector on ring writing cap, streaming to url (or not: NULL);
 * waits until it drains. */
static pid_t collector(const char *ring, const char *cap, const char *url, const char *log)
{
	int p[2];
	char buf[8], fd[16];
	pid_t pid;

	if (pipe(p))
		bench_die("pipe");
	pid = fork();
	if (pid < 0)
		bench_die("fork");
	if (pid == 0) {
		int l = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		close(p[0]);
		if (l >= 0)
			dup2(l, 2);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		if (url)
			execl(g_collector, g_collector, "--ring", ring, "--output", cap, "--ready-fd",
			      fd, "--otlp-endpoint", url, (char *)NULL);
		else
			execl(g_collector, g_collector, "--ring", ring, "--output", cap, "--ready-fd",
			      fd, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	if (read(p[0], buf, sizeof(buf)) != 6)
		bench_die("collector did not start");
	close(p[0]);
	return pid;
}

static void ring_make(const char *ring, uint32_t capacity)
{
	struct shmtrace_ring_config c = { .capacity = capacity };

	shmtrace_ring_unlink(ring);
	if (shmtrace_ring_create(ring, &c) < 0)
		bench_die("ring create");
}

/* n spans of synthetic times, every 20th starting a flow the next one
 * continues (10 % in flows), as case 6's capture; paced to the ring. */
static void produce(const char *ring, uint64_t n, const struct shmt_view *v)
{
	shmtrace_t *t;
	uint32_t cat, nm[4];
	uint64_t fid = 0, ts;

	if (shmtrace_open(ring, &t) < 0)
		bench_die("open");
	cat = shmtrace_intern(t, "bench");
	for (int i = 0; i < 4; i++)
		nm[i] = shmtrace_intern(t, i == 0 ? "a" : i == 1 ? "b" : i == 2 ? "c" : "d");
	ts = shmtrace_now();
	for (uint64_t i = 0; i < n; i++) {
		if (i % 20 == 0)
			fid = shmtrace_flow_new(t);
		shmtrace_span(t, cat, nm[i & 3], ts, ts + 500, i % 20 < 2 ? fid : 0);
		ts += 1000;
		if (v && (i & 4095) == 0)
			while (__atomic_load_n(&v->h->head.v, __ATOMIC_ACQUIRE) -
			       __atomic_load_n(&v->h->tail.v, __ATOMIC_ACQUIRE) > v->capacity / 2)
				usleep(100);
	}
	shmtrace_close(t);
}

static void stop(pid_t pid)
{
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

/* --------------------------------------------------------------- stream */

/* The capture of n spans, streamed whole to url, runs times: spans/s and
 * CPU ms per M spans (medians), gzip or not. */
static void stream_rate(const char *cap, const char *url, bool gzip, double *rate, double *cpu)
{
	double r[BENCH_MAX_RUNS], c[BENCH_MAX_RUNS];
	char copy[600], log[600], cmd[1400];
	int runs = (int)g_runs;

	snprintf(copy, sizeof(copy), "%s/stream-copy.cap", g_tmp);
	snprintf(log, sizeof(log), "%s/stream.log", g_tmp);
	for (int k = -1; k < runs; k++) {
		char *argv[] = { (char *)g_tool, "stream", copy, "--otlp-endpoint", (char *)url,
				 "--otlp-compression", gzip ? "gzip" : "none", NULL };
		uint64_t ns, cpu_ns;

		/* a fresh copy: no checkpoint beside it */
		snprintf(cmd, sizeof(cmd), "rm -f '%s' '%s'/.stream-copy.cap.otlp-*; cp '%s' '%s'",
			 copy, g_tmp, cap, copy);
		if (system(cmd))
			bench_die("copy");
		ns = run_cpu(argv, &cpu_ns, log);
		if (k < 0)
			continue;
		r[k] = (double)g_n / ((double)ns / 1e9);
		c[k] = (double)cpu_ns / 1e6 / ((double)g_n / 1e6);
	}
	*rate = bench_median(r, runs);
	*cpu = bench_median(c, runs);
	snprintf(cmd, sizeof(cmd), "rm -f '%s' '%s'/.stream-copy.cap.otlp-*", copy, g_tmp);
	if (system(cmd))
		fprintf(stderr, "note: %s not removed\n", copy);
}

/* The drain's ring: long enough a drain (~0.2 s) that the stream reads
 * beside it all along, not only at its start. */
#define DRAIN_CAPACITY	(1u << 23)
#define DRAIN_N		8000000ull

/* One drain by a collector of a ring holding DRAIN_N records, with its
 * stream to url or without (NULL): records/s from its --ready-fd (the
 * stream's start is not the drain's) to tail = head. */
static double drain_once(const char *ring, const char *url)
{
	char cap[600], log[600], cmd[1400];
	struct shmt_view v;
	char err[256];
	uint64_t t0, head;
	double rate;
	pid_t col;

	snprintf(cap, sizeof(cap), "%s/drain-stream.cap", g_tmp);
	snprintf(log, sizeof(log), "%s/drain-stream.log", g_tmp);
	ring_make(ring, DRAIN_CAPACITY);
	produce(ring, DRAIN_N, NULL);
	if (shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)) < 0)
		bench_die(err);
	head = __atomic_load_n(&v.h->head.v, __ATOMIC_ACQUIRE);
	col = collector(ring, cap, url, log);
	t0 = bench_mono_ns();
	while (__atomic_load_n(&v.h->tail.v, __ATOMIC_ACQUIRE) < head)
		usleep(50);
	rate = (double)head / ((double)(bench_mono_ns() - t0) / 1e9);
	stop(col);
	shmt_view_close(&v);
	shmtrace_ring_unlink(ring);
	snprintf(cmd, sizeof(cmd), "rm -f '%s' '%s'/.drain-stream.cap.otlp-*", cap, g_tmp);
	if (system(cmd))
		fprintf(stderr, "note: %s not removed\n", cap);
	return rate;
}

/* The drain without the stream and with it (medians), in pairs, the
 * first of each pair taking turns, so that a drift of the machine over
 * the runs weighs on both alike: its rate varies by a fifth from run to
 * run on this machine. Returns the pairs measured. */
static int drain_rates(const char *ring, const char *url, double *off, double *on)
{
	double r_off[BENCH_MAX_RUNS], r_on[BENCH_MAX_RUNS];
	int runs = (int)g_runs * 2 > BENCH_MAX_RUNS ? BENCH_MAX_RUNS : (int)g_runs * 2;

	for (int k = -1; k < runs; k++) {
		bool on_first = k & 1;
		double a = drain_once(ring, on_first ? url : NULL);
		double b = drain_once(ring, on_first ? NULL : url);

		if (k < 0)
			continue;
		r_on[k] = on_first ? a : b;
		r_off[k] = on_first ? b : a;
		fprintf(stderr, "note: drain without the stream %.2f, with %.2f M records/s\n",
			r_off[k] / 1e6, r_on[k] / 1e6);
	}
	*off = bench_median(r_off, runs);
	*on = bench_median(r_on, runs);
	return runs;
}

static int case_stream(void)
{
	char ring[128], cap[600], log[600], url[64];
	double rate_gz, cpu_gz, rate_raw, cpu_raw, drain_on, drain_off;
	int drain_runs;
	struct shmt_view v;
	char err[256];
	pid_t sink, col;
	int port;

	if (!g_collector || !g_tool) {
		printf("RESULT stream skipped=\"collector or shmtrace tool not built\"\n");
		return 0;
	}
	snprintf(ring, sizeof(ring), "%sstream", g_prefix);
	snprintf(cap, sizeof(cap), "%s/stream.cap", g_tmp);
	snprintf(log, sizeof(log), "%s/stream-cap.log", g_tmp);
	sink = sink_start(&port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	/* the capture, made without a stream */
	ring_make(ring, 1u << 20);
	if (shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)) < 0)
		bench_die(err);
	col = collector(ring, cap, NULL, log);
	produce(ring, g_n, &v);
	stop(col);
	shmt_view_close(&v);
	shmtrace_ring_unlink(ring);
	stream_rate(cap, url, true, &rate_gz, &cpu_gz);
	stream_rate(cap, url, false, &rate_raw, &cpu_raw);
	unlink(cap);
	drain_runs = drain_rates(ring, url, &drain_off, &drain_on);
	stop(sink);
	printf("RESULT stream rate_gzip=%.0f cpu_ms_per_m_gzip=%.1f rate_none=%.0f "
	       "cpu_ms_per_m_none=%.1f drain_off=%.0f drain_on=%.0f n=%llu runs=%d drain_n=%llu "
	       "drain_runs=%d\n", rate_gz, cpu_gz, rate_raw, cpu_raw, drain_off, drain_on,
	       (unsigned long long)g_n, (int)g_runs, DRAIN_N, drain_runs);
	return 0;
}

int main(int argc, char **argv)
{
	static char tmpdef[] = "/tmp";
	const char *c = getenv("BENCH_COLLECTOR"), *t = getenv("BENCH_TOOL");

	if (argc < 2 || strcmp(argv[1], "stream")) {
		fprintf(stderr, "usage: %s stream\n", argv[0]);
		return 2;
	}
	g_n = bench_env_u64("BENCH_N", 1000000);
	g_runs = bench_env_u64("BENCH_RUNS", 3);
	if (g_runs < 1 || g_runs > BENCH_MAX_RUNS || g_n < 1 || g_n > (1u << 20))
		return 2;
	g_prefix = getenv("BENCH_PREFIX") ? getenv("BENCH_PREFIX") : "shmtbench-";
	g_tmp = getenv("BENCH_TMP") ? getenv("BENCH_TMP") : tmpdef;
	g_collector = c && *c && access(c, X_OK) == 0 ? c : NULL;
	g_tool = t && *t && access(t, X_OK) == 0 ? t : NULL;
	signal(SIGPIPE, SIG_IGN);
	return case_stream();
}
