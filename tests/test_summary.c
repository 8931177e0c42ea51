/* SPDX-License-Identifier: MIT */
/*
 * test_summary.c - `shmtrace summary`: every duration column in one unit,
 * the one its smallest value reads best in, so that no two cells of a
 * column differ in unit; and --by-process-name, which sums the rows of
 * processes of one name (a pool of workers) into one that says how many
 * it sums, in the table and in the JSON, and leaves processes without a
 * name apart.
 */
#include "cli_run.h"

/* main (pid 100) loops once for 1.3 s; workers 200, 201 and 202 handle
 * requests of 5983 ns to 2 ms; 300 and 301, never named, handle one each. */
static void make_workers_capture(const char *path)
{
	static const struct shmt_cap_string s[] = { { 1, 1, "c" }, { 2, 6, "handle" },
						    { 3, 4, "loop" } };
	struct shmt_thread th[4] = { { .pid = 100, .tid = 100, .start_time = 5 },
				     { .pid = 200, .tid = 200, .start_time = 6 },
				     { .pid = 201, .tid = 201, .start_time = 7 },
				     { .pid = 202, .tid = 202, .start_time = 8 } };
	static const struct { uint32_t pid; uint16_t name; uint64_t dur; } sp[] = {
		{ 100, 3, 1302527000 }, { 200, 2, 5983 }, { 200, 2, 5983 }, { 201, 2, 16924 },
		{ 202, 2, 2000000 }, { 300, 2, 15000 }, { 301, 2, 15000 },
	};
	struct shmt_record r[sizeof(sp) / sizeof(sp[0])];

	strcpy(th[0].pname, "main");
	for (int i = 1; i < 4; i++)
		strcpy(th[i].pname, "worker");
	for (size_t i = 0; i < sizeof(sp) / sizeof(sp[0]); i++)
		r[i] = (struct shmt_record){ .ts = 1000 + i * 10, .dur = sp[i].dur, .pid = sp[i].pid,
					     .tid = sp[i].pid, .name = sp[i].name, .cat = 1,
					     .commit = SHMTRACE_KIND_SPAN };
	write_capture(path, 7, s, 3, th, 4, r, sizeof(sp) / sizeof(sp[0]));
}

/* Runs `shmtrace summary CAPTURE [opt] [--json]` and returns its output. */
static char *summary(const char *cap, const char *opt, bool json)
{
	char *argv[6] = { bin, "summary", (char *)cap };
	int n = 3;

	if (opt)
		argv[n++] = (char *)opt;
	if (json)
		argv[n++] = "--json";
	argv[n] = NULL;
	assert_int_equal(run(tmp("sum.out"), tmp("sum.err"), argv), 0);
	return slurp(tmp("sum.out"));
}

/* Cell col (0-based, columns apart by two spaces or more) of line, into
 * cell; false when the line has fewer. */
static bool cell(const char *line, int col, char *out, size_t len)
{
	const char *p = line;

	for (int c = 0; ; c++) {
		const char *end = strstr(p, "  "), *nl = strchr(p, '\n');
		size_t n;

		if (!nl)
			nl = p + strlen(p);
		if (!end || end > nl)
			end = nl;
		n = (size_t)(end - p);
		if (c == col) {
			snprintf(out, len, "%.*s", (int)n, p);
			return n > 0;
		}
		if (end == nl)
			return false;
		while (*end == ' ')
			end++;
		p = end;
	}
}

/* The unit a cell ends in ("ns", "us", "ms", "s"). */
static const char *unit(const char *c)
{
	size_t n = strlen(c);

	return n >= 2 && (c[n - 2] == 'n' || c[n - 2] == 'u' || c[n - 2] == 'm') ? c + n - 2 : c + n - 1;
}

/* Every row's cell of each duration column (TOTAL..MAX) is in want[c]. */
static void expect_units(const char *table, const char *const want[5], size_t rows)
{
	const char *line = strchr(table, '\n');
	size_t seen = 0;

	for (; line && line[1]; line = strchr(line + 1, '\n'), seen++) {
		for (int c = 0; c < 5; c++) {
			char v[64];

			assert_true(cell(line + 1, 3 + c, v, sizeof(v)));
			if (strcmp(unit(v), want[c]))
				fprintf(stderr, "column %d: '%s' not in %s:\n%s", 3 + c, v, want[c], table);
			assert_string_equal(unit(v), want[c]);
		}
	}
	assert_int_equal(seen, rows);
}

static void test_one_unit_per_column(void **state)
{
	/* TOTAL's smallest is 11966 ns (us), MEAN's and the others' 5983 ns */
	static const char *const want[5] = { "us", "ns", "ns", "ns", "ns" };
	char *out;

	(void)state;
	make_workers_capture(tmp("w.cap"));
	out = summary(tmp("w.cap"), NULL, false);
	expect_units(out, want, 6);
	/* 1.3 s in microseconds: the column's unit, not its own */
	assert_non_null(strstr(out, "  1302527.000us  1302527000ns  "));
	assert_non_null(strstr(out, "     11.966us  "));
	free(out);
}

static void test_by_process_name(void **state)
{
	/* P50 of the workers summed is 5983 ns: that column stays in ns */
	static const char *const want[5] = { "us", "us", "ns", "us", "us" };
	char *out, v[64];
	const char *row;

	(void)state;
	make_workers_capture(tmp("w.cap"));
	out = summary(tmp("w.cap"), "--by-process-name", false);
	/* main, the workers summed, and the two unnamed processes apart */
	expect_units(out, want, 4);
	row = strstr(out, "worker (3 processes)  handle");
	assert_non_null(row);
	assert_true(cell(row, 2, v, sizeof(v)));
	assert_string_equal(v, "4");
	assert_true(cell(row, 3, v, sizeof(v)));
	assert_string_equal(v, "2028.890us");
	assert_true(cell(row, 7, v, sizeof(v)));
	assert_string_equal(v, "2000.000us");
	assert_non_null(strstr(out, "\npid 300  "));
	assert_non_null(strstr(out, "\npid 301  "));
	assert_null(strstr(out, "worker  "));
	free(out);

	out = summary(tmp("w.cap"), "--by-process-name", true);
	assert_non_null(strstr(out, "{\"pid\":200,\"process\":\"worker\",\"processes\":3,"
				    "\"name\":\"handle\",\"count\":4,\"total_ns\":2028890,"));
	assert_non_null(strstr(out, "\"max_ns\":2000000,"));
	assert_non_null(strstr(out, "{\"pid\":300,\"process\":\"pid 300\",\"processes\":1,"));
	free(out);
	/* without it, one row per process */
	out = summary(tmp("w.cap"), NULL, true);
	assert_int_equal(count(out, "\"process\":\"worker\",\"processes\":1,"), 3);
	free(out);
}

/*
 * A discard ring of 1024 records with 100000 spans written: summary said
 * nothing of the records dropped and exited 0 as if it had them all. It
 * warns as export does, and its JSON counts them; a capture whose part 0
 * is missing is not complete.
 */
static void test_losses_said(void **state)
{
	const char *ring = test_ring_name("sumloss");
	struct shmtrace_ring_config c = { .capacity = 1024, .mode = SHMTRACE_MODE_DISCARD };
	char *text[] = { bin, "summary", "--ring", (char *)ring, NULL };
	char *json[] = { bin, "summary", "--ring", (char *)ring, "--json", NULL };
	char want[96];
	struct shmt_loss l;
	msgpack_sbuffer b;
	shmtrace_t *t;
	uint32_t n;
	char *out;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	n = shmtrace_intern(t, "s");
	for (uint64_t i = 0; i < 100000; i++)
		shmtrace_span(t, n, n, 1000 + i, 1001 + i, 0);
	shmtrace_close(t);
	ring_loss(ring, &l);
	assert_true(l.dropped > 90000);

	assert_int_equal(run(tmp("loss.out"), tmp("loss.err"), text), 0);
	snprintf(want, sizeof(want), "%llu records were lost: %llu ",
		 (unsigned long long)l.dropped, (unsigned long long)l.dropped);
	expect_in(tmp("loss.err"), want);
	assert_int_equal(run(tmp("loss.out"), tmp("loss.err"), json), 0);
	snprintf(want, sizeof(want), "\"dropped\":%llu,", (unsigned long long)l.dropped);
	expect_in(tmp("loss.out"), want);
	snprintf(want, sizeof(want), "\"records_lost\":%llu,", (unsigned long long)l.dropped);
	expect_in(tmp("loss.out"), want);
	expect_in(tmp("loss.out"), "\"complete\":true}");
	shmtrace_ring_unlink(ring);

	/* part 1 alone: part 0 is missing */
	make_part(&b, 1, 0, 10, true, NULL);
	put_file(tmp("part.cap.1"), b.data, b.size);
	msgpack_sbuffer_destroy(&b);
	out = summary(tmp("part.cap.1"), NULL, true);
	assert_non_null(strstr(out, "\"complete\":false}"));
	free(out);
	expect_in(tmp("sum.err"), "missing from the inputs");
}

/*
 * Each (process, span name) row holds a histogram of ~30 KB: spans from
 * 65536 pids took 2 GB. Past 4096 rows the rest are summed into one row,
 * "(other)", last, and a warning says how many it sums.
 */
static void test_rows_bounded(void **state)
{
	size_t n = 5000;
	struct shmt_record *r = calloc(n, sizeof(*r));
	struct shmt_cap_string str[1] = { { 1, 1, "s" } };
	char *out;

	(void)state;
	assert_non_null(r);
	for (size_t i = 0; i < n; i++)
		r[i] = (struct shmt_record){ .ts = 1000 + i, .dur = 10, .pid = 100000 + (uint32_t)i,
					     .tid = 1, .name = 1, .cat = 1,
					     .commit = SHMTRACE_KIND_SPAN };
	write_capture(tmp("rows.cap"), 3, str, 1, NULL, 0, r, n);
	free(r);
	out = summary(tmp("rows.cap"), NULL, true);
	assert_int_equal(count(out, "{\"pid\":"), 4096 + 1);
	assert_non_null(strstr(out, "{\"pid\":0,\"process\":\"(other)\",\"processes\":1,"
				"\"name\":\"(other)\",\"count\":904,"));
	assert_non_null(strstr(out, "\"rows_folded\":904,"));
	free(out);
	expect_in(tmp("sum.err"), "more than 4096 (process, span name) rows: the spans of the "
		  "other 904 are summed");
	out = summary(tmp("rows.cap"), NULL, false);
	assert_int_equal(count(out, "\n"), 1 + 4096 + 1);
	assert_non_null(strstr(out, "(other: 904 rows)  (other)"));
	free(out);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("summary", false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_unit_per_column),
		cmocka_unit_test(test_by_process_name),
		cmocka_unit_test(test_losses_said),
		cmocka_unit_test(test_rows_bounded),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
