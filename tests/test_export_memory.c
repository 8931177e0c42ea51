/* SPDX-License-Identifier: MIT */
/*
 * test_export_memory.c - exports of large traces: the memory does not grow
 * with the trace (the peak RSS of `shmtrace export`, Chrome JSON, OTLP and
 * Perfetto, of a capture of 10 M spans, 10 % of them in two-process flows
 * and some flow slices on starts other events of their thread take, is
 * within a fixed margin of the same export of 1 M spans: wait4()'s rusage
 * of the child, never timed), the flows of the smaller one are all there,
 * and an export killed while it writes leaves no file behind. So do
 * hostile traces: a million threads that each hold an instant (Perfetto),
 * millions of open spans (every format).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <dirent.h>

#include "cli_run.h"

/* what 10 M spans may cost beyond 1 M: the sorts' and filters' memory
 * filling up to their bounds, not one byte per span */
#define RSS_MARGIN_KB	(48L << 10)
#define FLOW_EVERY	20	/* a flow starts at every 20th span: 10 % in flows */
#define TAKEN_EVERY	1000	/* ... and every 1000th flow slice starts with an instant */
/* what 900 k more threads may cost: their tracks and maps, ~300 bytes
 * each, not what they hold */
#define THREAD_MARGIN_KB	(300L << 10)

/* Appends b to the file f and empties b. */
static void drain_to(msgpack_sbuffer *b, FILE *f)
{
	assert_int_equal(fwrite(b->data, 1, b->size, f), b->size);
	msgpack_sbuffer_clear(b);
}

/*
 * A capture of n spans, 1 us apart, on two processes: span i on pid 100
 * when i is even, on pid 200 when odd; every FLOW_EVERY-th span starts a
 * flow that the next one (the other process) continues. The first span
 * of every TAKEN_EVERY-th flow shares its start with an instant of its
 * thread, so its slice must move (a verification pass reads the input
 * again). Returns the number of flows.
 */
static uint64_t make_capture(const char *path, uint64_t n)
{
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .run_id = 11, .ring_capacity = 1 << 20,
		.realtime0 = 1700000000000000000ull, .mono0 = 1000, .started_ns = 1000,
	};
	struct shmt_cap_string s[3] = { { 1, 3, "cat" }, { 2, 4, "span" }, { 3, 4, "mark" } };
	struct shmt_thread th[2] = { { .pid = 100, .tid = 100, .start_time = 5 },
				     { .pid = 200, .tid = 201, .start_time = 6 } };
	struct shmt_cap_end e = { .records = 0, .end_ns = 0 };
	static struct shmt_record r[4096];
	uint64_t flows = 0, seq = 0;
	msgpack_sbuffer b;
	FILE *f = fopen(path, "w");
	size_t k = 0;

	assert_non_null(f);
	snprintf(h.ring, sizeof(h.ring), "memring");
	strcpy(th[0].pname, "client");
	strcpy(th[1].pname, "server");
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, s, 3), 0);
	assert_int_equal(shmt_cap_put_threads(&b, th, 2), 0);
	for (uint64_t i = 0; i < n; i++) {
		bool odd = i & 1;
		uint64_t ts = 1000000 + i * 1000, flow = 0;

		if (i % FLOW_EVERY == 0)
			flows++;
		if (i % FLOW_EVERY < 2)
			flow = flows;
		if (i % FLOW_EVERY == 0 && flows % TAKEN_EVERY == 0)
			r[k++] = (struct shmt_record){ .ts = ts, .pid = 100, .tid = 100, .name = 3,
						       .cat = 1, .commit = SHMTRACE_KIND_INSTANT };
		r[k++] = (struct shmt_record){ .ts = ts, .dur = 500, .flow = flow,
					       .pid = odd ? 200 : 100, .tid = odd ? 201 : 100,
					       .name = 2, .cat = 1, .commit = SHMTRACE_KIND_SPAN };
		if (k >= 4094 || i + 1 == n) {
			assert_int_equal(shmt_cap_put_records(&b, seq, r, k), 0);
			seq += k;
			k = 0;
			drain_to(&b, f);
		}
	}
	e.records = seq;
	e.end_ns = 1000000 + n * 1000;
	assert_int_equal(shmt_cap_put_end(&b, &e), 0);
	drain_to(&b, f);
	msgpack_sbuffer_destroy(&b);
	assert_int_equal(fclose(f), 0);
	return flows;
}

/*
 * A hostile capture of n records on ntids threads (pid 100, tid 1000 + i
 * % ntids), 1 us apart, of the kind kind: instants, which a thread holds
 * until something of it ends later, or open spans, which wait for the end
 * of the pass.
 */
static void make_threads_capture(const char *path, uint64_t n, uint64_t ntids, uint32_t kind)
{
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .run_id = 12, .ring_capacity = 1 << 20,
		.realtime0 = 1700000000000000000ull, .mono0 = 1000, .started_ns = 1000,
	};
	struct shmt_cap_string s[2] = { { 1, 3, "cat" }, { 2, 4, "mark" } };
	struct shmt_thread th = { .pid = 100, .tid = 100, .start_time = 5 };
	struct shmt_cap_end e = { .records = n, .end_ns = 1000000 + n * 1000 };
	static struct shmt_record r[4096];
	msgpack_sbuffer b;
	FILE *f = fopen(path, "w");
	size_t k = 0;

	assert_non_null(f);
	snprintf(h.ring, sizeof(h.ring), "threadring");
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, s, 2), 0);
	assert_int_equal(shmt_cap_put_threads(&b, &th, 1), 0);
	for (uint64_t i = 0; i < n; i++) {
		r[k++] = (struct shmt_record){ .ts = 1000000 + i * 1000, .pid = 100,
					       .tid = (uint32_t)(1000 + i % ntids), .name = 2, .cat = 1,
					       .commit = kind };
		if (k == 4096 || i + 1 == n) {
			assert_int_equal(shmt_cap_put_records(&b, i + 1 - k, r, k), 0);
			k = 0;
			drain_to(&b, f);
		}
	}
	assert_int_equal(shmt_cap_put_end(&b, &e), 0);
	drain_to(&b, f);
	msgpack_sbuffer_destroy(&b);
	assert_int_equal(fclose(f), 0);
}

/* Runs `shmtrace export CAP -o OUT --format FMT`: its peak RSS in KiB;
 * the export must succeed. */
/*
 * Under ASan (make test-san) freed memory waits in a quarantine of up to
 * 256 MiB, so a process's peak grows with what it freed, not with what it
 * holds; and the peak of the export's child (ru_maxrss) counts this
 * process's pages it forked with. Bounded in both, the peak is the
 * export's again. Nothing without ASan reads either.
 */
#define ASAN_QUARANTINE "quarantine_size_mb=16"
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return ASAN_QUARANTINE;
}

static long export_rss(const char *cap, const char *out, const char *format)
{
	char *argv[] = { bin, "export", (char *)cap, "-o", (char *)out, "--format",
			 (char *)format, NULL };
	struct rusage ru;
	int st;
	pid_t p = fork();

	assert_true(p >= 0);
	if (p == 0) {
		int fe = open(tmp("export.err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
		const char *asan = getenv("ASAN_OPTIONS");
		char opts[512];

		/* the export's quarantine bounded too (see below) */
		snprintf(opts, sizeof(opts), "%s%s" ASAN_QUARANTINE, asan ? asan : "",
			 asan && *asan ? ":" : "");
		setenv("ASAN_OPTIONS", opts, 1);
		dup2(fe, 2);
		alarm(300);
		execv(argv[0], argv);
		_exit(127);
	}
	assert_int_equal(wait4(p, &st, 0, &ru), p);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		print_file(tmp("export.err"));
		fail_msg("shmtrace export --format %s of %s: status 0x%x", format, cap, st);
	}
	unlink(tmp("export.err"));
	return ru.ru_maxrss;
}

static void expect_flat(const char *format)
{
	uint64_t f1, f10;
	long small, big;
	char want[64];

	/* under ASan (make test-san) freed memory waits in a quarantine of
	 * hundreds of MB: the peak RSS measures the sanitizer, not the export */
	if (getenv("SHMTRACE_SAN"))
		skip();

	f1 = make_capture(tmp("1m.cap"), 1000000);
	small = export_rss(tmp("1m.cap"), tmp("1m.out"), format);
	if (!strcmp(format, "chrome")) {
		/* all there: every flow drawn, and the taken starts moved */
		snprintf(want, sizeof(want), "\"flows\":%llu", (unsigned long long)f1);
		expect_in(tmp("1m.out"), want);
		snprintf(want, sizeof(want), "\"flow_starts_moved\":%llu",
			 (unsigned long long)(f1 / TAKEN_EVERY));
		expect_in(tmp("1m.out"), want);
	}
	unlink(tmp("1m.out"));
	unlink(tmp("1m.cap"));
	f10 = make_capture(tmp("10m.cap"), 10000000);
	assert_int_equal(f10, 10 * f1);
	big = export_rss(tmp("10m.cap"), "/dev/null", format);
	unlink(tmp("10m.cap"));
	printf("%s export peak RSS: 1 M spans %ld KiB, 10 M spans %ld KiB\n", format, small, big);
	assert_true(big - small < RSS_MARGIN_KB);
}

static void test_chrome_export_memory_flat(void **state)
{
	(void)state;
	expect_flat("chrome");
}

static void test_otlp_export_memory_flat(void **state)
{
	(void)state;
	expect_flat("otlp");
}

static void test_perfetto_export_memory_flat(void **state)
{
	(void)state;
	expect_flat("perfetto");
}

/* The peak RSS of the export to format of n records of kind on ntids
 * threads. */
static long threads_rss(uint64_t n, uint64_t ntids, uint32_t kind, const char *format)
{
	long kb;

	make_threads_capture(tmp("th.cap"), n, ntids, kind);
	kb = export_rss(tmp("th.cap"), "/dev/null", format);
	unlink(tmp("th.cap"));
	return kb;
}

/*
 * Instants each on a thread of its own: each thread holds its instant
 * until the end of the pass (nothing of it ends later). What the threads
 * hold is bounded across them: 1 M such threads cost what a thread's
 * track costs (its descriptor, its entry in the maps: about 200 bytes
 * each, the Chrome export's order of magnitude), not a held array each.
 */
static void test_perfetto_instant_threads_bounded(void **state)
{
	long small, big;

	(void)state;
	if (getenv("SHMTRACE_SAN"))
		skip();
	small = threads_rss(100000, 100000, SHMTRACE_KIND_INSTANT, "perfetto");
	big = threads_rss(1000000, 1000000, SHMTRACE_KIND_INSTANT, "perfetto");
	printf("perfetto export peak RSS: 100 k instant threads %ld KiB, 1 M %ld KiB\n", small,
	       big);
	assert_true(big - small < THREAD_MARGIN_KB);
}

/* Open spans, 2 M of them on 16 threads (about 160 bytes each if kept in
 * memory: 300 MB), cost every export what 200 k cost: they wait for the
 * end of the pass in the temporary file. */
static void test_open_spans_bounded(void **state)
{
	static const char *const formats[] = { "chrome", "otlp", "perfetto" };

	(void)state;
	if (getenv("SHMTRACE_SAN"))
		skip();
	for (size_t i = 0; i < 3; i++) {
		long small = threads_rss(200000, 16, SHMTRACE_KIND_OPEN, formats[i]);
		long big = threads_rss(2000000, 16, SHMTRACE_KIND_OPEN, formats[i]);

		printf("%s export peak RSS: 200 k open spans %ld KiB, 2 M %ld KiB\n", formats[i],
		       small, big);
		assert_true(big - small < RSS_MARGIN_KB);
	}
}

/* Killed while writing its output: no output, and no temporary either. */
static void test_killed_export_leaves_nothing(void **state)
{
	char *argv[] = { bin, "export", (char *)tmp("k.cap"), "-o", (char *)tmp("k.json"), NULL };
	struct dirent *d;
	int st, polls = 0;
	pid_t p;
	DIR *dp;

	(void)state;
	make_capture(tmp("k.cap"), 1000000);
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	/* the real signal: the output open in the directory, named or not
	 * ("DIR/#INODE (deleted)", O_TMPFILE) */
	while (!fds_to(p, tmpdir, tmp("k.cap"), false)) {
		assert_int_equal(waitpid(p, &st, WNOHANG), 0);	/* still running */
		assert_true(++polls < 60000);
		usleep(500);
	}
	kill(p, SIGKILL);
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFSIGNALED(st));
	dp = opendir(tmpdir);
	assert_non_null(dp);
	while ((d = readdir(dp)))
		if (strcmp(d->d_name, ".") && strcmp(d->d_name, "..") && strcmp(d->d_name, "k.cap"))
			fail_msg("a killed export left %s behind", d->d_name);
	closedir(dp);
	unlink(tmp("k.cap"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chrome_export_memory_flat),
		cmocka_unit_test(test_otlp_export_memory_flat),
		cmocka_unit_test(test_perfetto_export_memory_flat),
		cmocka_unit_test(test_perfetto_instant_threads_bounded),
		cmocka_unit_test(test_open_spans_bounded),
		cmocka_unit_test(test_killed_export_leaves_nothing),
	};
	int ret;

	if (cli_setup_for("memory", false) < 0) {
		fprintf(stderr, "shmtrace not built\n");
		return 77;
	}
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(tmpdir);
	return ret;
}
