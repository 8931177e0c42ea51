/* SPDX-License-Identifier: MIT */
/*
 * test_export_split.c - `shmtrace export --split`: the pieces' names, the
 * pieces together holding every record of the unsplit export exactly
 * once, no flow cut across two pieces, each piece a trace the DevTools
 * engine loads and says which window it is; and bad values refused.
 */
#include "cli_run.h"
#include "split.h"

#define REQS	30
#define NREC	(REQS * 5)

/*
 * REQS requests 10 us apart, each a flow A -> B -> A of 3 spans over 8 us
 * (so that many cross a 25 us boundary), and a span of A and of B in no
 * flow. Every span starts at its own time.
 */
static void make_requests(const char *path)
{
	static const struct shmt_cap_string str[] = { { 1, 3, "rpc" }, { 2, 4, "send" },
						      { 3, 6, "handle" }, { 4, 4, "idle" } };
	struct shmt_thread th[2] = { { .pid = 100, .tid = 100, .start_time = 5 },
				     { .pid = 200, .tid = 201, .start_time = 6 } };
	struct shmt_record r[NREC];
	struct cap_spec c = {
		.h = { .version = SHMT_CAP_VERSION, .run_id = 9, .ring_id = 0xfeed,
		       .ring_capacity = 1024, .realtime0 = 1700000000000000000ull, .mono0 = 1000,
		       .started_ns = 1000 },
		.str = str, .nstr = 4, .th = th, .nth = 2, .r = r, .nr = NREC,
	};

	snprintf(c.h.ring, sizeof(c.h.ring), "reqs");
	snprintf(th[0].pname, sizeof(th[0].pname), "client");
	snprintf(th[1].pname, sizeof(th[1].pname), "server");
	for (uint32_t i = 0; i < REQS; i++) {
		uint64_t t = 1000000 + i * 10000ull;
		struct shmt_record *q = r + i * 5;

#define R(off, f, p, n) (struct shmt_record){ .ts = t + (off), .dur = 900, .flow = (f), \
					      .pid = (p), .tid = (p) == 100 ? 100 : 201, \
					      .name = (n), .cat = 1, .commit = SHMTRACE_KIND_SPAN }
		q[0] = R(0, i + 1, 100, 2);
		q[1] = R(2000, 0, 100, 4);
		q[2] = R(4000, i + 1, 200, 3);
		q[3] = R(6000, 0, 200, 4);
		q[4] = R(8000, i + 1, 100, 2);
#undef R
	}
	put_capture(path, &c);
}

/* Exports the capture to out with the options (ended by NULL); returns
 * the exit status, its stderr in tmp("split.err"). */
static int split_with(const char *out, const char *const *opts)
{
	return export_with_opts(tmp("reqs.cap"), out, tmp("split.err"), opts);
}

/* The "pid":..,"tid":..,"ts":.. of each span of json, appended to v. */
static size_t span_keys(const char *json, char (*v)[64], size_t n, size_t max)
{
	for (const char *p = json; (p = strstr(p, "{\"ph\":\"X\",")); p++) {
		const char *k = p + strlen("{\"ph\":\"X\","), *e = strstr(k, ",\"dur\"");

		assert_non_null(e);
		assert_true(n < max && (size_t)(e - k) < 64);
		snprintf(v[n++], 64, "%.*s", (int)(e - k), k);
	}
	return n;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(a, b);
}

/*
 * Checks that the pieces of out (npieces of them) hold the spans of the
 * unsplit export whole exactly once, each flow whole in one piece, and
 * that each piece says which one it is; DevTools loads each one. Returns
 * the number of flows.
 */
static size_t check_pieces(const char *whole, const char *tmp_out, unsigned npieces)
{
	static char all[NREC][64], got[NREC][64];
	size_t nall, ngot = 0, flows = 0;
	char *json = slurp(whole), name[512], want[64], out[512];

	/* tmp()'s buffers are reused by check_trace() */
	snprintf(out, sizeof(out), "%s", tmp_out);

	nall = span_keys(json, all, 0, NREC);
	free(json);
	for (unsigned i = 0; i < npieces; i++) {
		size_t s;

		assert_int_equal(split_name(out, i, npieces, name, sizeof(name)), 0);
		json = slurp(name);
		ngot = span_keys(json, got, ngot, NREC);
		/* every flow here has all its three steps: none was cut */
		s = count(json, "\"ph\":\"s\"");
		assert_int_equal(count(json, "\"ph\":\"t\""), s);
		assert_int_equal(count(json, "\"ph\":\"f\""), s);
		flows += s;
		snprintf(want, sizeof(want), "\"piece\":{\"index\":%u,\"count\":%u,", i, npieces);
		assert_non_null(strstr(json, want));
		free(json);
		{
			char n[16];

			snprintf(n, sizeof(n), "%zu", s);
			expect_trace(name, (const char *[]){ "--expect-flows", n, "--quiet", NULL });
		}
	}
	/* the next name is no file: there are exactly npieces */
	assert_int_equal(split_name(out, npieces, npieces, name, sizeof(name)), 0);
	assert_int_equal(access(name, F_OK), -1);
	assert_int_equal(ngot, nall);
	qsort(all, nall, sizeof(all[0]), cmp_key);
	qsort(got, ngot, sizeof(got[0]), cmp_key);
	for (size_t i = 0; i < nall; i++) {
		assert_string_equal(got[i], all[i]);
		if (i)
			assert_string_not_equal(got[i], got[i - 1]);
	}
	return flows;
}

static void test_pieces_hold_every_span_once(void **state)
{
	const char *none[] = { NULL }, *split[] = { "--split", "25us", NULL };
	char *err;

	(void)state;
	make_requests(tmp("reqs.cap"));
	assert_int_equal(split_with(tmp("all.json"), none), 0);
	assert_int_equal(split_with(tmp("trace.json"), split), 0);
	/* 0 .. 298 us after the first record: 12 pieces of 25 us */
	assert_int_equal(check_pieces(tmp("all.json"), tmp("trace.json"), 12), REQS);
	err = slurp(tmp("split.err"));
	assert_non_null(strstr(err, "12 pieces written: "));
	assert_non_null(strstr(err, "trace.000.json to "));
	free(err);
	/* the window of piece 1: 25 us to 50 us after the first record */
	expect_in(tmp("trace.001.json"), "\"piece\":{\"index\":1,\"count\":12,\"from_ns\":25000,"
		  "\"to_ns\":50000,\"origin_ns\":1000000}");
	/* a request that starts in piece 0 and ends in piece 1 is in piece 0 */
	expect_in(tmp("trace.000.json"), "\"ts\":1028.000,");
	expect_not_in(tmp("trace.001.json"), "\"ts\":1028.000,");
}

/* With --pid and --from/--to, the pieces are the unsplit export's cut up. */
static void test_pieces_of_a_selection(void **state)
{
	const char *sel[] = { "--pid", "200", "--from", "50us", "--to", "149us", NULL };
	const char *split[] = { "--pid", "200", "--from", "50us", "--to", "149us",
				"--split", "30us", NULL };

	(void)state;
	make_requests(tmp("reqs.cap"));
	assert_int_equal(split_with(tmp("sel.json"), sel), 0);
	assert_int_equal(split_with(tmp("sel"), split), 0);
	/* B's window starts at its first record (4 us): 54 .. 153 us, B's
	 * steps of requests 5 to 14 with their flows, in 4 pieces */
	assert_int_equal(check_pieces(tmp("sel.json"), tmp("sel"), 4), 10);
	expect_in(tmp("sel.000"), "\"from_ns\":50000,\"to_ns\":80000,");
}

static void test_piece_names(void **state)
{
	static const struct {
		const char *out;
		uint64_t i, n;
		const char *name;
	} v[] = {
		{ "trace.json", 3, 12, "trace.003.json" },
		{ "out/trace", 0, 1, "out/trace.000" },
		{ "v1.2/trace", 7, 10, "v1.2/trace.007" },	/* no extension */
		{ "d/.trace", 7, 10, "d/.trace.007" },		/* a name, not an extension */
		/* wide enough for the last, so that the names sort */
		{ "t.json", 42, 1001, "t.0042.json" },
		{ "t.json", 999, 1000, "t.999.json" },
	};
	char b[64];

	(void)state;
	for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
		assert_int_equal(split_name(v[k].out, v[k].i, v[k].n, b, sizeof(b)), 0);
		assert_string_equal(b, v[k].name);
	}
	assert_int_equal(split_name("trace.json", 3, 12, b, 14), -ENAMETOOLONG);
}

/* One line that says what is wrong, exit 2, and no piece written. */
static void expect_refused(const char *const *opts, const char *said)
{
	char *err;

	assert_int_equal(split_with(tmp("bad.json"), opts), EXIT_USAGE);
	err = slurp(tmp("split.err"));
	if (!strstr(err, said))
		fprintf(stderr, "no '%s' in: %s\n", said, err);
	assert_non_null(strstr(err, said));
	assert_int_equal(count(err, "shmtrace export: "), 1);
	free(err);
	assert_int_equal(access(tmp("bad.000.json"), F_OK), -1);
}

static void test_bad_split_values(void **state)
{
	(void)state;
	make_requests(tmp("reqs.cap"));
	expect_refused((const char *[]){ "--split", "0", NULL }, "invalid length '0' for --split");
	expect_refused((const char *[]){ "--split", "10x", NULL }, "invalid length '10x'");
	expect_refused((const char *[]){ "--split", "-1s", NULL }, "invalid length '-1s'");
	expect_refused((const char *[]){ "--split", NULL }, "needs an argument");
	expect_refused((const char *[]){ "--split", "1ns", NULL }, "--split 1ns makes 298001 pieces");
	expect_refused((const char *[]){ "--split", "1s", "--format", "otlp", NULL },
		       "not with --format otlp");
	{
		char *argv[] = { bin, "export", (char *)tmp("reqs.cap"), "-o", "-", "--split", "1s",
				 NULL };

		assert_int_equal(run(NULL, tmp("split.err"), argv), EXIT_USAGE);
		expect_in(tmp("split.err"), "not to stdout");
	}
}

/* A piece named like an input (-o t.cap --split with t.001.cap given)
 * was renamed over it: the capture lost. Refused before any piece is
 * written, the input untouched. */
static void test_piece_over_an_input_refused(void **state)
{
	char in[512], out[512], first[512];
	char *argv[] = { bin, "export", in, "-o", out, "--split", "25us", NULL };
	struct stat before, after;

	(void)state;
	snprintf(in, sizeof(in), "%s", tmp("t.001.cap"));
	snprintf(out, sizeof(out), "%s", tmp("t.cap"));
	snprintf(first, sizeof(first), "%s", tmp("t.000.cap"));
	make_requests(in);
	assert_int_equal(stat(in, &before), 0);
	assert_int_equal(run(NULL, tmp("split.err"), argv), EXIT_USAGE);
	expect_in(tmp("split.err"), "is the input");
	expect_in(tmp("split.err"), "t.001.cap' is the input");
	assert_int_equal(access(first, F_OK), -1);
	/* the same file, not a piece renamed over it */
	assert_int_equal(stat(in, &after), 0);
	assert_int_equal(after.st_ino, before.st_ino);
	assert_int_equal(after.st_size, before.st_size);
	assert_int_equal(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pieces_hold_every_span_once),
		cmocka_unit_test(test_pieces_of_a_selection),
		cmocka_unit_test(test_piece_names),
		cmocka_unit_test(test_bad_split_values),
		cmocka_unit_test(test_piece_over_an_input_refused),
	};

	return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
