/* SPDX-License-Identifier: MIT */
/*
 * test_cli_agree.c - what a new user's review of the commands found to
 * disagree: a mistake is told in one message with one exit status by
 * every command that meets it, and what a message counts or says of a
 * trace is true of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "cli_run.h"

/* argv (NULL-ended after bin and cmd) as a vector for run(). */
#define ARGV(...) ((char *[]){ bin, __VA_ARGS__, NULL })

/* A capture at path from host: two spans of pid 100 ("main" of
 * "alpha"), in category "cat", named "span". */
static void small_capture(const char *path, const char *host)
{
	static const struct shmt_cap_string str[2] = { { 1, 3, "cat" }, { 2, 4, "span" } };
	struct shmt_thread th = { .pid = 100, .tid = 100, .start_time = 5 };
	const struct shmt_record r[2] = {
		{ .ts = 10000, .dur = 50, .pid = 100, .tid = 100, .name = 2, .cat = 1,
		  .commit = SHMTRACE_KIND_SPAN },
		{ .ts = 20000, .dur = 50, .pid = 100, .tid = 100, .name = 2, .cat = 1,
		  .commit = SHMTRACE_KIND_SPAN },
	};
	struct cap_spec c = {
		.h = { .version = SHMT_CAP_VERSION, .run_id = 3, .ring_id = 3, .ring_capacity = 1024,
		       .realtime0 = 1700000000000000000ull, .mono0 = 1000, .started_ns = 1000 },
		.str = str, .nstr = 2, .th = &th, .nth = 1, .r = r, .nr = 2,
	};

	strcpy(th.name, "main");
	strcpy(th.pname, "alpha");
	snprintf(c.h.host, sizeof(c.h.host), "%s", host);
	snprintf(c.h.ring, sizeof(c.h.ring), "ring3");
	put_capture(path, &c);
}

/* --string-bytes: its help, its check and the man page's range agree (64
 * to 256M), in shmtrace create and in the collector. */
static void test_string_bytes_range(void **state)
{
	const char *ring = test_ring_name("strbytes");
	char *col_help[] = { collector_bin, "--help", NULL };

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(run(tmp("help.out"), NULL, ARGV("create", "--help")), 0);
	expect_in(tmp("help.out"), "--string-bytes BYTES text space for them, 64 to 256M");
	expect_not_in(tmp("help.out"), "at least\n                           256k");
	assert_int_equal(run(tmp("help.out"), NULL, col_help), 0);
	expect_in(tmp("help.out"), "64 to 256M");
	run_says(2, ARGV("create", (char *)ring, "--string-bytes", "1"),
		 "--string-bytes '1': need 64 to 256M", NULL);
	run_says(0, ARGV("create", (char *)ring, "--string-bytes", "64"), NULL, NULL);
	shmtrace_ring_unlink(ring);
}

/* An endpoint that is no URL is said to be none (with the form
 * expected), a usage error before any input is read; https:// is pointed
 * at a local collector. */
static void test_endpoint_not_a_url(void **state)
{
	(void)state;
	run_says(2, ARGV("export", (char *)tmp("none.cap"), "--format", "otlp", "--otlp-endpoint",
			 "foo"),
		 "shmtrace export: --otlp-endpoint 'foo': not a URL (expected http://HOST:PORT[/PATH])\n"
		 "Try 'shmtrace export --help'.", "https");
	run_says(2, ARGV("export", (char *)tmp("none.cap"), "--format", "otlp", "--otlp-endpoint",
			 "https://h:4318"),
		 "only http:// endpoints are supported (put a local OpenTelemetry Collector in "
		 "front of an https one)", NULL);
}

/* A name no ring can have: the same usage error (exit 2, the whole rule,
 * where help is) from every command that takes one, the collector's too;
 * rm removes none of the names it was given. */
static void test_bad_ring_name(void **state)
{
	const char *ring = test_ring_name("badname");
	char out[300];
	const struct {
		const char *who, *name;	/* who says it, of which name */
		char *const *argv;
	} cases[] = {
		{ "shmtrace create", "a/b", ARGV("create", "a/b") },
		{ "shmtrace snapshot", "../x", ARGV("snapshot", "../x", "-o", out) },
		{ "shmtrace export", "../x", ARGV("export", "--ring", "../x", "-o", out) },
		{ "shmtrace export", "", ARGV("export", "--ring", "", "-o", out) },
		{ "shmtrace summary", "..", ARGV("summary", "--ring", "..") },
		{ "shmtrace svg", "a/b", ARGV("svg", "--ring", "a/b", "-o", out) },
		{ "shmtrace rm", ".", ARGV("rm", ".") },
		{ "shmtrace rm", "..", ARGV("rm", (char *)ring, "..") },
		{ "shmtrace-collector", "a/b",
		  (char *[]){ collector_bin, "--ring", "a/b", "--create", "-o", out, NULL } },
		{ "shmtrace-collector", "",
		  (char *[]){ collector_bin, "--ring", "", "--create", "-o", out, NULL } },
	};
	char path[300];

	(void)state;
	/* a copy: tmp() reuses its buffers */
	snprintf(out, sizeof(out), "%s", tmp("x.out"));
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[300];

		snprintf(want, sizeof(want), "%s: invalid ring name '%s' (1 to 200 bytes, no '/', "
			 "not '.' or '..')\nTry '%s --help'.\n", cases[i].who, cases[i].name,
			 cases[i].who);
		run_says(2, cases[i].argv, want, "Invalid argument");
	}
	/* the good name beside the bad one is not removed */
	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(access(out, F_OK), -1);
	shmtrace_ring_unlink(ring);
}

/* -V and --version wherever --help is taken, in every command: the
 * version on stdout, exit 0, and nothing else done. */
static void test_version_anywhere(void **state)
{
	const char *ring = test_ring_name("version");
	char *const *cases[] = {
		ARGV("export", "-V"),
		ARGV("export", "run.cap", "--version"),
		ARGV("export", "--pid", "1", "run.cap", "-o", "x.json", "-V"),
		ARGV("ls", "--json", "--version"),
		ARGV("ls", "-V"),
		ARGV("rm", "-f", (char *)ring, "--version"),
		ARGV("stat", (char *)ring, "-V"),
		ARGV("summary", "--ring", (char *)ring, "--version"),
		ARGV("svg", "x.cap", "-V"),
		ARGV("snapshot", (char *)ring, "-o", "x.cap", "--version"),
		ARGV("stream", "x.cap", "-V"),
		ARGV("create", (char *)ring, "--capacity", "64", "--version"),
		ARGV("create", "--version"),
		ARGV("--version"),
		ARGV("-V"),
	};
	char path[300];

	(void)state;
	shmtrace_ring_unlink(ring);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct stat st;

		assert_int_equal(run(tmp("v.out"), tmp("v.err"), cases[i]), 0);
		expect_in(tmp("v.out"), "shmtrace " SHMTRACE_VERSION "\n");
		assert_int_equal(stat(tmp("v.err"), &st), 0);
		assert_int_equal(st.st_size, 0);
	}
	/* create --version made no ring */
	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	assert_int_equal(access(path, F_OK), -1);
	/* after a bad option, the bad option is what is said */
	run_says(2, ARGV("export", "--bogus", "-V"), "unknown option '--bogus'", NULL);
}

/* --clock-offset of a host no input comes from: a usage error as every
 * other bad --clock-offset is (exit 2, where help is), naming the hosts
 * the inputs come from; nothing written. */
static void test_clock_offset_unknown_host(void **state)
{
	char cap[300], json[300];

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("h.cap"));
	snprintf(json, sizeof(json), "%s", tmp("h.json"));
	small_capture(cap, "hosta");
	run_says(2, ARGV("export", cap, "--clock-offset", "nohost=5", "-o", json),
		 "shmtrace export: --clock-offset 'nohost=5': no input comes from host 'nohost' "
		 "(the inputs' hosts: 'hosta')\nTry 'shmtrace export --help'.\n", NULL);
	assert_int_equal(access(json, F_OK), -1);
	run_says(2, ARGV("export", cap, "--clock-offset", "hosta=abc", "-o", json),
		 "Try 'shmtrace export --help'.", NULL);
	run_says(0, ARGV("export", cap, "--clock-offset", "hosta=5", "-o", json), NULL, NULL);
}

/* --pid of processes not in the trace: export and svg fail alike (exit
 * 1, one message naming the pids and the input), and write nothing; a
 * pid that is there is exported. */
static void test_pid_not_in_trace(void **state)
{
	char cap[300], out[300];
	const char *const fmts[] = { "chrome", "perfetto", "otlp" };

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("p.cap"));
	snprintf(out, sizeof(out), "%s", tmp("p.out"));
	small_capture(cap, "hosta");
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		run_says(1, ARGV("export", cap, "--pid", "1", "-f", (char *)fmts[i], "-o", out),
			 "shmtrace export: no records of pid 1 in '", "Try");
		expect_in(tmp("run.err"), "p.cap'\n");
		assert_int_equal(access(out, F_OK), -1);
	}
	run_says(1, ARGV("export", cap, "--pid", "1", "--pid", "7", "--split", "1s", "-o", out),
		 "shmtrace export: no records of pids 1, 7 in '", NULL);
	run_says(1, ARGV("svg", cap, "--pid", "1", "-o", out), "shmtrace svg: no records of pid 1 in '",
		 NULL);
	assert_int_equal(access(out, F_OK), -1);
	/* one of them there: that one is exported */
	run_says(0, ARGV("export", cap, "--pid", "1", "--pid", "100", "-o", out), NULL, "no records");
	expect_in(out, "\"records\":2,");
}

/* A ring whose string table (2 strings) is full, written with spans,
 * counters and instants named by strings that did not fit: the export
 * counts the events that lost their names and says "events", summary
 * counts the spans and says "spans"; each number is what it names. */
static void test_names_lost_counts_what_it_says(void **state)
{
	const char *ring = test_ring_name("names");
	struct shmtrace_ring_config c;
	uint32_t cat, lost;
	shmtrace_t *t;
	uint64_t t0;

	(void)state;
	shmtrace_ring_unlink(ring);
	small_cfg(&c, 1024, 0);
	c.max_strings = 2;
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	cat = shmtrace_intern(t, "cat");
	assert_true(shmtrace_intern(t, "kept") != 0);
	lost = shmtrace_intern(t, "one too many");
	assert_int_equal(lost, 0);
	t0 = shmtrace_now();
	for (uint64_t i = 0; i < 5; i++)
		assert_int_equal(shmtrace_span(t, cat, lost, t0 + i * 100, t0 + i * 100 + 50, 0), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(shmtrace_counter(t, cat, lost, i), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(shmtrace_instant(t, cat, lost, 0), 0);
	shmtrace_close(t);

	run_says(0, ARGV("export", "--ring", (char *)ring, "-o", (char *)tmp("n.json")),
		 "shmtrace: warning: 10 events lost their names: the ring's string table (2) is full",
		 "spans lost");
	expect_in(tmp("n.json"), "\"names_lost\":10,");
	expect_in(tmp("n.json"), "shmtrace: 10 events exported as \\\"?\\\"");
	run_says(0, ARGV("export", "--ring", (char *)ring, "-f", "perfetto", "-o",
			 (char *)tmp("n.pftrace")),
		 "shmtrace: warning: 10 events lost their names", NULL);
	assert_int_equal(run(tmp("n.txt"), tmp("run.err"), ARGV("summary", "--ring", (char *)ring)),
			 0);
	expect_in(tmp("run.err"), "shmtrace: warning: 5 spans lost their names");
	shmtrace_ring_unlink(ring);
}

/* The value after key in the file at path, up to the first of end (to
 * free), or NULL. */
static char *value_in(const char *path, const char *key, const char *end)
{
	char *s = slurp(path), *v = strstr(s, key), *r = NULL;

	if (v) {
		v += strlen(key);
		r = strndup(v, strcspn(v, end));
	}
	free(s);
	return r;
}

/* A snapshot that holds no record (the ring empty, or every record left
 * out for --max-size) says "0 records" and no window, stat shows none
 * (null in JSON), the export gives no start (null) rather than the
 * clock's 0, the machine's boot; one that keeps some starts with the
 * records kept, where the export of it starts. */
static void test_snapshot_without_records_has_no_window(void **state)
{
	const char *ring = test_ring_name("nowin");
	char cap[300], json[300];
	char *from, *start;
	shmtrace_t *t;
	uint32_t cat, name;
	uint64_t t0;

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("w.cap"));
	snprintf(json, sizeof(json), "%s", tmp("w.json"));
	shmtrace_ring_unlink(ring);
	run_says(0, ARGV("create", (char *)ring, "--capacity", "8192"), NULL, NULL);
	for (int pass = 0; pass < 2; pass++) {
		char *const empty[] = { bin, "snapshot", (char *)ring, "-o", cap, NULL };
		char *const cut[] = { bin, "snapshot", (char *)ring, "-o", cap, "--max-size", "4k",
				      NULL };
		char want[400];

		/* pass 0: nothing in the ring; pass 1: all cut */
		snprintf(want, sizeof(want), "shmtrace snapshot: 0 records of ring '%s' in '%s', ",
			 ring, cap);
		run_says(0, pass ? cut : empty, want, " s,");
		assert_int_equal(run(tmp("s.txt"), NULL, ARGV("stat", cap)), 0);
		expect_in(tmp("s.txt"), "window_from:        none (no record)\n");
		assert_int_equal(run(tmp("s.json"), NULL, ARGV("stat", "--json", cap)), 0);
		expect_in(tmp("s.json"), "\"window_from\":null,");
		run_says(0, ARGV("export", cap, "-o", json), NULL, NULL);
		expect_in(json, "\"trace_start_ns\":null,\"trace_start_wall_ns\":null,"
			  "\"trace_start\":null}");
		expect_in(json, "\"from_ns\":null,");
		expect_in(json, " staged, no record; ");
		if (pass)
			break;
		assert_int_equal(shmtrace_open(ring, &t), 0);
		cat = shmtrace_intern(t, "cat");
		name = shmtrace_intern(t, "span");
		t0 = shmtrace_now();
		for (uint64_t i = 0; i < 5000; i++)
			assert_int_equal(shmtrace_span(t, cat, name, t0 + i * 1000, t0 + i * 1000 + 10,
						       0), 0);
		shmtrace_close(t);
	}
	/* some kept: the window starts with them, as the export does */
	run_says(0, ARGV("snapshot", (char *)ring, "-o", cap, "--max-size", "20k"), "oldest left out",
		 NULL);
	assert_int_equal(run(tmp("s.txt"), NULL, ARGV("stat", cap)), 0);
	expect_not_in(tmp("s.txt"), "window_cut:         0\n");
	run_says(0, ARGV("export", cap, "-o", json), NULL, NULL);
	from = value_in(tmp("s.txt"), "window_from:        ", "\n");
	start = value_in(json, "\"trace_start\":\"", "\"");
	assert_non_null(from);
	assert_non_null(start);
	assert_string_equal(from, start);
	free(from);
	free(start);
	shmtrace_ring_unlink(ring);
}

/* The man page's flight recorder: create, write, export --ring, rm. The
 * records were just exported: rm's line must not call them lost, nor
 * tell to export them first; it says they are gone unless exported, true
 * either way (an export leaves no mark in the ring). rm refuses nothing
 * more: exit 0, the ring removed. */
static void test_rm_after_export_is_not_told_lost(void **state)
{
	const char *ring = test_ring_name("flightrm");
	char path[300], want[400];
	int st;
	pid_t p;

	(void)state;
	shmtrace_ring_unlink(ring);
	run_says(0, ARGV("create", (char *)ring, "--capacity", "1024", "--mode", "overwrite"), NULL,
		 NULL);
	/* the program, run and gone (a live one would be refused) */
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		shmtrace_t *t;
		uint32_t cat;

		if (shmtrace_open(ring, &t) < 0)
			_exit(3);
		cat = shmtrace_intern(t, "cat");
		for (uint64_t i = 0; i < 3; i++)
			if (shmtrace_span(t, cat, cat, 1000 + i, 1001 + i, 0) < 0)
				_exit(4);
		shmtrace_close(t);
		_exit(0);
	}
	assert_int_equal(waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	run_says(0, ARGV("export", "--ring", (char *)ring, "-o", (char *)tmp("last.json")), NULL, NULL);
	expect_in(tmp("last.json"), "\"records\":3,");
	snprintf(want, sizeof(want), "shmtrace rm: removed ring '%s' with 3 records no collector "
		 "drained; unless exported (shmtrace export --ring %s), they are gone\n", ring, ring);
	run_says(0, ARGV("rm", (char *)ring), want, "(lost)");
	expect_not_in(tmp("run.err"), "export them first");
	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	assert_int_equal(access(path, F_OK), -1);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("agree", true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_string_bytes_range),
		cmocka_unit_test(test_endpoint_not_a_url),
		cmocka_unit_test(test_bad_ring_name),
		cmocka_unit_test(test_version_anywhere),
		cmocka_unit_test(test_clock_offset_unknown_host),
		cmocka_unit_test(test_pid_not_in_trace),
		cmocka_unit_test(test_names_lost_counts_what_it_says),
		cmocka_unit_test(test_snapshot_without_records_has_no_window),
		cmocka_unit_test(test_rm_after_export_is_not_told_lost),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
