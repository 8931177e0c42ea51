/* SPDX-License-Identifier: MIT */
/*
 * test_export_input.c - what `shmtrace export` reads: capture files made
 * with the encoder, split into parts, cut and damaged, runs of two rings
 * together, and bad files and rings of every kind.
 */
#include "cli_run.h"
#include "flows.h"
#include "hostile_run.h"

static void test_capture_parts_dedup_cut(void **state)
{
	msgpack_sbuffer p0, p1;
	size_t at;
	char *json, *err;

	(void)state;
	/* part 1 repeats records 20..29 of part 0, as a restarted write would */
	make_part(&p0, 0, 0, 30, true, NULL);
	make_part(&p1, 1, 20, 40, true, &at);
	put_file(tmp("cap.0"), p0.data, p0.size);
	put_file(tmp("cap.1"), p1.data, p1.size);
	/* given in the wrong order */
	assert_int_equal(export_files(tmp("cap.json"), tmp("cap.err"), tmp("cap.1"), tmp("cap.0")), 0);
	json = slurp(tmp("cap.json"));
	assert_int_equal(count(json, "\"ph\":\"X\""), 60);
	assert_int_equal(count(json, "\"ts\":10.000,"), 2);	/* the span and its flow start */
	assert_int_equal(count(json, "\"ts\":15.900,"), 1);	/* record 59, once */
	assert_int_equal(count(json, "\"ph\":\"s\""), 1);
	assert_int_equal(count(json, "\"ph\":\"t\""), 2);
	assert_int_equal(count(json, "\"ph\":\"f\""), 1);
	assert_non_null(strstr(json, "\"args\":{\"name\":\"alpha\"}"));
	assert_non_null(strstr(json, "\"args\":{\"name\":\"io\"}"));
	assert_non_null(strstr(json, "\"dropped\":3"));
	assert_non_null(strstr(json, "records dropped (ring full)"));
	assert_non_null(strstr(json, "\"trace_start\":\"2023-11-14T22:13:20.000009000Z\""));
	free(json);
	err = slurp(tmp("cap.err"));
	assert_non_null(strstr(err, "3 records were lost: 3 records dropped (ring full)\n"));
	free(err);

	/* a window relative to the first record, and one process */
	{
		char *w[] = { bin, "export", (char *)tmp("cap.0"), (char *)tmp("cap.1"), "--from", "1us",
			      "--to", "0.002ms", "-o", (char *)tmp("win.json"), NULL };
		char *p[] = { bin, "export", (char *)tmp("cap.0"), (char *)tmp("cap.1"), "--pid", "200",
			      "-o", (char *)tmp("pid.json"), NULL };

		assert_int_equal(run(NULL, NULL, w), 0);
		json = slurp(tmp("win.json"));
		assert_int_equal(count(json, "\"ph\":\"X\""), 11);	/* records 10..20 */
		assert_non_null(strstr(json, "\"ts\":11.000,"));
		assert_non_null(strstr(json, "\"ts\":12.000,"));
		free(json);
		assert_int_equal(run(NULL, NULL, p), 0);
		json = slurp(tmp("pid.json"));
		/* pid 200's 30, and the two steps of pid 100 in its flow */
		assert_int_equal(count(json, "\"ph\":\"X\""), 32);
		assert_int_equal(count(json, "{\"ph\":\"X\",\"pid\":100,"), 2);
		assert_int_equal(count(json, "\"ph\":\"t\""), 2);
		free(json);
	}

	/* cut inside the records frame of part 1: part 0 and a warning */
	put_file(tmp("cut.1"), p1.data, at + 10);
	assert_int_equal(export_files(tmp("cut.json"), tmp("cut.err"), tmp("cap.0"), tmp("cut.1")), 0);
	json = slurp(tmp("cut.json"));
	err = slurp(tmp("cut.err"));
	assert_int_equal(count(json, "\"ph\":\"X\""), 30);
	assert_non_null(strstr(json, "\"complete\":false"));
	assert_non_null(strstr(err, "cut.1"));
	free(json);
	free(err);

	/* a flipped byte in the records frame: warning, what came before kept */
	p1.data[at + 20] ^= 0x55;
	put_file(tmp("bad.1"), p1.data, p1.size);
	assert_int_equal(export_files(tmp("bad.json"), tmp("bad.err"), tmp("bad.1"), NULL), 0);
	json = slurp(tmp("bad.json"));
	err = slurp(tmp("bad.err"));
	assert_int_equal(count(json, "\"ph\":\"X\""), 0);
	assert_non_null(strstr(err, "bad.1"));
	free(json);
	free(err);
	msgpack_sbuffer_destroy(&p0);
	msgpack_sbuffer_destroy(&p1);
}


/* A run of a ring of its own: flows 1..5 from process pa to process pb
 * (ids count from 1 in every ring), names interned in its own order. */
static void make_run(const char *path, const char *ring, uint64_t run_id, uint64_t ring_id,
		     uint32_t pa, uint32_t pb, const struct shmt_cap_string *s, uint64_t ts0)
{
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .run_id = run_id, .ring_id = ring_id,
		.ring_capacity = 1024, .realtime0 = 1700000000000000000ull, .mono0 = 1000,
		.started_ns = ts0,
	};
	struct shmt_thread th[2] = { { .pid = pa, .tid = pa, .start_time = 5 },
				     { .pid = pb, .tid = pb, .start_time = 6 } };
	struct shmt_record r[10];

	snprintf(h.ring, sizeof(h.ring), "%s", ring);
	snprintf(th[0].pname, sizeof(th[0].pname), "%s-client", ring);
	snprintf(th[1].pname, sizeof(th[1].pname), "%s-server", ring);
	for (uint32_t i = 0; i < 5; i++) {
		/* send: name 2, cat 1; recv: name 3, cat 1 */
		r[2 * i] = (struct shmt_record){ .ts = ts0 + i * 1000, .dur = 100, .flow = i + 1,
						 .pid = pa, .tid = pa, .name = 2, .cat = 1,
						 .commit = SHMTRACE_KIND_SPAN };
		r[2 * i + 1] = (struct shmt_record){ .ts = ts0 + i * 1000 + 200, .dur = 100,
						     .flow = i + 1, .pid = pb, .tid = pb, .name = 3,
						     .cat = 1, .commit = SHMTRACE_KIND_SPAN };
	}
	put_capture(path, &(struct cap_spec){ .h = h, .str = s, .nstr = 3, .th = th, .nth = 2,
					       .r = r, .nr = 10 });
}

/* The export of the two rings: ten flows of two records, each ring's
 * names from its own table, one warning, both rings in the metadata. */
static void two_rings_check_json(void)
{
	char *json, *err, want[1200];

	json = slurp(tmp("two.json"));
	err = slurp(tmp("two.err"));
	/* ten flows of two records each, not five of four */
	assert_int_equal(count(json, "\"ph\":\"s\""), 10);
	assert_int_equal(count(json, "\"ph\":\"t\""), 0);
	assert_int_equal(count(json, "\"ph\":\"f\""), 10);
	assert_non_null(strstr(json, "\"flows\":10,"));
	/* names from each ring's own table */
	assert_int_equal(count(json, "\"name\":\"send-A\""), 5);
	assert_int_equal(count(json, "\"name\":\"recv-A\""), 5);
	assert_int_equal(count(json, "\"name\":\"send-B\""), 5);
	assert_int_equal(count(json, "\"name\":\"rpc\""), 5);
	assert_int_equal(count(json, "\"cat\":\"rpc\""), 20);
	assert_int_equal(count(json, "\"cat\":\"net\""), 20);	/* spans and flow events */
	assert_int_equal(count(json, "\"name\":\"?\""), 0);
	assert_non_null(strstr(err, "the inputs come from 2 different rings"));
	assert_int_equal(count(err, "\n"), 1);
	snprintf(want, sizeof(want), "\"input\":\"%s\",\"inputs\":[\"%s\",\"%s\"],"
		 "\"rings\":[{\"name\":\"ringA\",\"ring_id\":\"1234567890abcdef\","
		 "\"run_id\":\"000000000000000b\"},{\"name\":\"ringB\",\"ring_id\":null,"
		 "\"run_id\":\"0000000000000016\"}]", tmp("ra.cap"), tmp("ra.cap"), tmp("rb.cap"));
	if (!strstr(json, want))
		fprintf(stderr, "no %s in %s\n", want, json);
	assert_non_null(strstr(json, want));
	free(json);
	free(err);
}

/* DevTools (when here) finds the ten flows, each between one ring's processes. */
static void two_rings_check_devtools(void)
{
	if (have_devtools()) {
		const char *expect[] = { "--expect-flows", "10", "--expect-flow-pids", "100,200",
					 "--expect-flow-pids", "300,400", NULL };
		int rc = check_trace(tmp("two.json"), expect);

		if (rc) {
			print_file(tmp("check.err"));
			print_file(tmp("check.out"));
		}
		assert_int_equal(rc, 0);
	}
}

/* svg draws the same ten arrows, not fifteen between four processes */
static void two_rings_check_svg(char *ra, char *rb)
{
	char svg[512];
	/* the whole run in the window, however slowly it ran */
	char *sargv[] = { bin, "svg", ra, rb, "--to", "60s", "-o", svg, NULL };
	char *svg_text;

	snprintf(svg, sizeof(svg), "%s", tmp("two.svg"));
	assert_int_equal(run(NULL, NULL, sargv), 0);
	svg_text = slurp(svg);
	assert_int_equal(count(svg_text, "<path class=\"a\""), 10);
	free(svg_text);
}

/* one ring alone (ra, exported to one): no word about rings */
static void one_ring_check(char *ra, char *one)
{
	char *argv[] = { bin, "export", ra, "-o", one, NULL };
	char *json, *err;

	assert_int_equal(run(NULL, tmp("one.err"), argv), 0);
	err = slurp(tmp("one.err"));
	assert_null(strstr(err, "rings"));
	free(err);
	json = slurp(tmp("one.json"));
	assert_int_equal(count(json, "\"ph\":\"s\""), 5);
	assert_int_equal(count(json, "\"name\":\"send-A\""), 5);
	free(json);
}

/* one run id with two ring ids (ra and rc, made here with the strings s):
 * the files contradict each other */
static void contradicting_ring_ids_check(char *ra, char *rc, char *bad,
					 const struct shmt_cap_string *s)
{
	char *argv[] = { bin, "export", ra, rc, "-o", bad, NULL };
	char *err;

	make_run(tmp("rc.cap"), "ringC", 11, 0x42, 500, 600, s, 10000);
	assert_int_equal(run(NULL, tmp("bad.err"), argv), 1);
	err = slurp(tmp("bad.err"));
	assert_non_null(strstr(err, "export them separately"));
	assert_int_equal(count(err, "\n"), 1);
	free(err);
}

/* Two runs of two rings exported together: each ring's flow ids and string
 * ids are its own, so no arrow joins the rings and every name is right; the
 * second capture has no ring_id (an older collector): its run_id tells it. */
static void test_two_rings(void **state)
{
	/* the same ids for other texts, and "rpc" under two ids */
	const struct shmt_cap_string sa[3] = { { 1, 3, "rpc" }, { 2, 6, "send-A" }, { 3, 6, "recv-A" } };
	const struct shmt_cap_string sb[3] = { { 1, 3, "net" }, { 2, 6, "send-B" }, { 3, 3, "rpc" } };
	char ra[512], rb[512], rc[512], out[512], one[512], bad[512];
	char *argv[] = { bin, "export", ra, rb, "-o", out, NULL };

	(void)state;
	/* tmp() reuses its buffers: argv needs its own */
	snprintf(ra, sizeof(ra), "%s", tmp("ra.cap"));
	snprintf(rb, sizeof(rb), "%s", tmp("rb.cap"));
	snprintf(rc, sizeof(rc), "%s", tmp("rc.cap"));
	snprintf(out, sizeof(out), "%s", tmp("two.json"));
	snprintf(one, sizeof(one), "%s", tmp("one.json"));
	snprintf(bad, sizeof(bad), "%s", tmp("bad.json"));
	/* interleaved in time: flow n of A and flow n of B overlap */
	make_run(tmp("ra.cap"), "ringA", 11, 0x1234567890abcdefull, 100, 200, sa, 10000);
	make_run(tmp("rb.cap"), "ringB", 22, 0, 300, 400, sb, 10500);
	assert_int_equal(run(NULL, tmp("two.err"), argv), 0);
	two_rings_check_json();
	two_rings_check_devtools();
	two_rings_check_svg(ra, rb);
	one_ring_check(ra, one);
	contradicting_ring_ids_check(ra, rc, bad, sb);
}

/* ---------------------------------------------------------------- bad input */

static void test_bad_files(void **state)
{
	unsigned char junk[4096];
	char *err;

	(void)state;
	put_file(tmp("empty"), "", 0);
	srand(1);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)rand();
	put_file(tmp("junk"), junk, sizeof(junk));
	assert_int_equal(export_files(tmp("x.json"), tmp("x.err"), tmp("empty"), NULL), 1);
	err = slurp(tmp("x.err"));
	assert_non_null(strstr(err, "empty"));
	assert_int_equal(count(err, "\n"), 1);
	free(err);
	assert_int_equal(export_files(tmp("x.json"), tmp("x.err"), tmp("junk"), NULL), 1);
	assert_int_equal(export_files(tmp("x.json"), tmp("x.err"), tmp("missing"), NULL), 1);
	{
		char *a1[] = { bin, "stat", (char *)tmp("junk"), NULL };
		char *a2[] = { bin, "summary", (char *)tmp("empty"), NULL };
		char *a3[] = { bin, "export", "--bogus", NULL };
		char *a4[] = { bin, "export", "--ring", NULL };
		char *a5[] = { bin, "export", "--from", "soon", "x", "-o", "-", NULL };
		char *a6[] = { bin, "export", "x", NULL };
		char *a7[] = { bin, "--version", NULL };

		assert_int_equal(run(NULL, NULL, a1), 1);
		assert_int_equal(run(NULL, NULL, a2), 1);
		assert_int_equal(run(NULL, tmp("u.err"), a3), 2);
		err = slurp(tmp("u.err"));
		assert_non_null(strstr(err, "Try 'shmtrace export --help'"));
		free(err);
		assert_int_equal(run(NULL, NULL, a4), 2);
		assert_int_equal(run(NULL, NULL, a5), 2);
		assert_int_equal(run(NULL, NULL, a6), 2);
		assert_int_equal(run(tmp("v.out"), NULL, a7), 0);
		err = slurp(tmp("v.out"));
		assert_string_equal(err, "shmtrace " SHMTRACE_VERSION "\n");
		free(err);
	}
	/* a write error (here: file too large) is an error exit, not a
	 * silent truncation, and the partial output is removed */
	if (access(tmp("cap.0"), R_OK) == 0) {
		char *a[] = { bin, "export", (char *)tmp("cap.0"), "-o", (char *)tmp("big.json"), NULL };

		fsize_limit = 1000;
		assert_int_equal(run(NULL, tmp("big.err"), a), 1);
		fsize_limit = 0;
		err = slurp(tmp("big.err"));
		assert_non_null(strstr(err, "big.json"));
		free(err);
		assert_int_equal(access(tmp("big.json"), F_OK), -1);
	}
}

static void scribble(const char *ring, uint64_t off, const void *buf, size_t n)
{
	char path[300];
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, n, (off_t)off), (ssize_t)n);
	close(fd);
}

static void test_bad_rings(void **state)
{
	const char *ring = test_ring_name("expbad");
	struct shmtrace_ring_config cfg = { .capacity = 256 };
	struct shmt_header h;
	shmtrace_t *t;
	unsigned char junk[512];
	uint64_t huge = 1ull << 62;
	char *json;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &cfg), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (int i = 0; i < 100; i++) {
		uint32_t n = shmtrace_intern(t, i % 2 ? "odd" : "even");

		shmtrace_span(t, n, n, 100 + (uint64_t)i, 200 + (uint64_t)i, (uint64_t)i % 3);
	}
	shmtrace_flush(t);
	{
		char path[300];
		int fd;

		snprintf(path, sizeof(path), "/dev/shm/%s", ring);
		fd = open(path, O_RDONLY);
		assert_int_equal(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
		close(fd);
	}
	/* garbage in the string table and heap, a head far ahead */
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 37 + 11);
	scribble(ring, h.strings_off, junk, 64);
	scribble(ring, h.heap_off, junk, sizeof(junk));
	scribble(ring, offsetof(struct shmt_header, head), &huge, sizeof(huge));
	scribble(ring, offsetof(struct shmt_header, threads), &huge, 4);
	assert_int_equal(export_ring(ring, tmp("bad.json"), tmp("badring.err")), 0);
	json = slurp(tmp("bad.json"));
	/* everything in the window is torn now, and 2^62 lapped in a discard
	 * ring: the counters cannot be true and are no counts; the head is
	 * warned about; the output still parses */
	assert_non_null(strstr(json, "\"counters_corrupt\":true"));
	assert_non_null(strstr(json, "\"torn\":null"));
	free(json);
	expect_in(tmp("badring.err"), "loss counters corrupt");
	expect_in(tmp("badring.err"), "its header is forged or damaged");
	if (have_devtools()) {
		const char *none[] = { NULL };

		assert_int_equal(check_trace(tmp("bad.json"), none), 0);
	}
	{
		char *a[] = { bin, "stat", (char *)ring, NULL };

		assert_int_equal(run(NULL, NULL, a), 0);
	}
	/* a broken header: refused with a reason */
	scribble(ring, 0, junk, 64);
	assert_int_equal(export_ring(ring, tmp("bad.json"), tmp("badring.err")), 1);
	json = slurp(tmp("badring.err"));
	assert_non_null(strstr(json, ring));
	free(json);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}


/* Exports cap in each format to /dev/null with $TMPDIR dir: each fails (1),
 * and says that its temporary file in dir failed so, not its output. */
static void temporary_fails(const char *cap, const char *dir, int err)
{
	static const char *const formats[] = { "chrome", "perfetto", "otlp" };
	const char *old = getenv("TMPDIR");
	char *saved = old ? strdup(old) : NULL, want[600];

	snprintf(want, sizeof(want), "shmtrace export: temporary file in $TMPDIR (%s): %s\n", dir,
		 strerror(err));
	assert_int_equal(setenv("TMPDIR", dir, 1), 0);
	for (size_t i = 0; i < 3; i++) {
		char *argv[] = { bin, "export", (char *)cap, "--format", (char *)formats[i], "-o",
				 "/dev/null", NULL };
		char *said;

		assert_int_equal(run(NULL, tmp("tmpdir.err"), argv), 1);
		said = slurp(tmp("tmpdir.err"));
		if (!strstr(said, want))
			fail_msg("%s: no '%s' in: %s", formats[i], want, said);
		assert_null(strstr(said, "writing"));
		free(said);
	}
	if (saved)
		setenv("TMPDIR", saved, 1);
	else
		unsetenv("TMPDIR");
	free(saved);
}

/*
 * More flow records than every format keeps in memory (FLOWS_MEM; the
 * OTLP export's sort of all records spills sooner), so each needs its
 * temporary files: a $TMPDIR that does not exist, and one whose files
 * cannot grow (EFBIG), are said to be the temporary files' failure.
 */
static void test_temporary_files_fail(void **state)
{
	static const struct shmt_cap_string str[] = { { 1, 3, "cat" }, { 2, 4, "span" } };
	const struct shmt_thread th[2] = { { .pid = 100, .tid = 100, .start_time = 5 },
					   { .pid = 200, .tid = 201, .start_time = 6 } };
	size_t n = FLOWS_MEM / sizeof(struct flow_ev) / 4 * 5;
	struct shmt_record *r = calloc(n, sizeof(*r));

	(void)state;
	assert_non_null(r);
	/* two-record flows between the two processes */
	for (size_t i = 0; i < n; i++)
		r[i] = (struct shmt_record){ .ts = 1000 + i * 100, .dur = 50, .flow = i / 2 + 1,
					     .pid = th[i % 2].pid, .tid = th[i % 2].tid, .name = 2,
					     .cat = 1, .commit = SHMTRACE_KIND_SPAN };
	write_capture(tmp("many.cap"), 11, str, 2, th, 2, r, n);
	free(r);
	temporary_fails(tmp("many.cap"), "/nonexistent-shmtrace-tmp", ENOENT);
	/* the sort files hit the size limit; /dev/null has none */
	fsize_limit = 1 << 20;
	temporary_fails(tmp("many.cap"), tmpdir, EFBIG);
	fsize_limit = 0;
}

/* A capture of one span, part part, whose END frame names next_part. */
static void part_capture(const char *path, uint32_t part, uint32_t next_part)
{
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .part = part, .run_id = 5, .ring_capacity = 1024,
		.realtime0 = 1700000000000000000ull, .mono0 = 1000, .started_ns = 1000,
	};
	struct shmt_cap_string str[1] = { { 1, 1, "s" } };
	struct shmt_record r = { .ts = 2000, .dur = 10, .pid = 100, .tid = 100, .name = 1,
				 .cat = 1, .commit = SHMTRACE_KIND_SPAN };
	struct shmt_cap_end e = { .records = 1, .end_ns = 9000, .next_part = next_part };
	msgpack_sbuffer b;

	snprintf(h.ring, sizeof(h.ring), "partring");
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, str, 1), 0);
	assert_int_equal(shmt_cap_put_records(&b, 0, &r, 1), 0);
	assert_int_equal(shmt_cap_put_end(&b, &e), 0);
	put_file(path, b.data, b.size);
	msgpack_sbuffer_destroy(&b);
}

/*
 * Part numbers near 2^32, valid frames: an END frame whose next part is
 * 0xffffffff made the loop over the missing parts wrap (it never ended),
 * and a header saying part 0xfffffff0 made it look for 4e9 files. Both
 * finish (the guard kills a loop without end), name a few parts and
 * count the rest.
 */
static void test_part_numbers_near_2_32(void **state)
{
	char last[512], far[512];
	char *sum_last[] = { bin, "summary", last, NULL };
	char *exp_last[] = { bin, "export", last, "-o", (char *)tmp("np.json"), NULL };
	char *sum_far[] = { bin, "summary", far, NULL };
	char *exp_far[] = { bin, "export", far, "-o", (char *)tmp("np.json"), NULL };

	(void)state;
	snprintf(last, sizeof(last), "%s", tmp("last.cap"));
	snprintf(far, sizeof(far), "%s", tmp("far.cap.4294967280"));
	part_capture(last, 0, UINT32_MAX);
	part_capture(far, 0xfffffff0u, 0);
	assert_int_equal(run_guarded(NULL, tmp("np.err"), sum_last), 0);
	expect_in(tmp("np.err"), "last.cap.4294967295 and any part after it");
	assert_int_equal(run_guarded(NULL, tmp("np.err"), exp_last), 0);
	expect_in(tmp("np.err"), "last.cap.4294967295 and any part after it");
	assert_int_equal(run_guarded(NULL, tmp("np.err"), sum_far), 0);
	expect_in(tmp("np.err"), "and 4294967274 more");
	assert_int_equal(run_guarded(NULL, tmp("np.err"), exp_far), 0);
	expect_in(tmp("np.err"), "and 4294967274 more (not found)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capture_parts_dedup_cut),
		cmocka_unit_test(test_two_rings),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_bad_rings),
		cmocka_unit_test(test_temporary_files_fail),
		cmocka_unit_test(test_part_numbers_near_2_32),
	};

	return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
