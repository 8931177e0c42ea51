/* SPDX-License-Identifier: MIT */
/*
 * test_text_args.c - text arguments (SHMTRACE_ARG_TEXT) as a producer
 * writes them: carried in their event's records, so 10,000 distinct values
 * leave the ring's string table as it was and none exports as "?"; cut at
 * SHMTRACE_TEXT_MAX bytes an event with the cut said in the value; and
 * exact, byte for byte, through the ring, a capture and both exports,
 * whatever the text holds (UTF-8, quotes, control characters). What cuts
 * an event's records (a crash, a full ring, forged input) is
 * test_text_cut.c's.
 */
#include "text_run.h"

#define CUT "\xe2\x80\xa6[cut "		/* the marker's start: "…[cut " */

/* The ring's string table: strings published, and bytes of text used. */
static void table_use(const char *ring, uint32_t *n, uint32_t *bytes)
{
	struct shmt_view v;
	struct shmt_ring_status st;
	char err[256];

	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	*n = shmt_ring_nstrings(&v);
	shmt_ring_status(&v, &st);
	*bytes = st.heap_used;
	shmt_view_close(&v);
}

/* Waits while what the collector has not consumed (the ring's and the
 * blocks handed to it) exceeds half its blocks: a burst into 16 blocks
 * outruns a collector that loses the CPU for a millisecond, and one far
 * behind has the calls drop (counted), which this test is not about. */
static void pace(shmtrace_t *t)
{
	struct shmtrace_stats st;

	while (shmtrace_stats(t, &st) == 0 && st.head - st.tail > st.capacity / 256 * 8)
		sched_yield();
}

static void url_of(int i, char *buf, size_t len)
{
	snprintf(buf, len, "/items/%05d?session=%08x", i, (unsigned)i * 2654435761u);
}

/*
 * 10,000 spans, each with its own URL as text, through a collector: the
 * ring's string table holds what it held before (the names and the key),
 * and the export has every URL, exactly, and no "?".
 */
static void test_distinct_texts_leave_the_string_table(void **state)
{
	const char *ring = test_ring_name("text10k"), *caps[] = { tmp("10k.cap"), NULL };
	uint32_t n0, b0, n1, b1, cat, name, key;
	char url[64], got[128];
	const char *ev;
	size_t pos = 0;
	int seen = 0;
	shmtrace_t *t;
	char *json;
	pid_t col;

	(void)state;
	t = text_ring(ring, 65536, 16);
	cat = shmtrace_intern(t, "http");
	name = shmtrace_intern(t, "req");
	key = shmtrace_intern(t, "url");
	table_use(ring, &n0, &b0);
	col = cli_collector(ring, caps[0]);
	for (int i = 0; i < 10000; i++) {
		struct shmtrace_arg a = shmtrace_arg_text(key, url);

		url_of(i, url, sizeof(url));
		pace(t);
		assert_int_equal(shmtrace_span_args(t, cat, name, 1000 + (uint64_t)i * 10,
						    1005 + (uint64_t)i * 10, 0, &a, 1), 0);
	}
	table_use(ring, &n1, &b1);
	assert_int_equal(n1, n0);
	assert_int_equal(b1, b0);
	shmtrace_close(t);
	collector_stop(col);

	json = export_caps(caps, NULL, tmp("10k.json"));
	while ((ev = next_event(json, "req", &pos))) {
		url_of(seen++, url, sizeof(url));
		assert_int_equal(arg_text(ev, "url", got, sizeof(got)), (long)strlen(url));
		assert_string_equal(got, url);
	}
	assert_int_equal(seen, 10000);
	assert_int_equal(count(json, "\"?\""), 0);
	assert_non_null(strstr(json, "\"strings_dropped\":0,"));
	assert_non_null(strstr(json, "\"names_lost\":0,"));
	assert_non_null(strstr(json, "\"args\":10000,\"args_lost\":0,"));
	free(json);
	shmtrace_ring_unlink(ring);
}

/* The value an argument should export as: text, then the marker if cut. */
static void expect_text(const char *ev, const char *key, const char *text, size_t n,
			unsigned long long cut)
{
	char want[SHMTRACE_TEXT_MAX + 64], got[4 * SHMTRACE_TEXT_MAX];
	size_t len = n;

	memcpy(want, text, n);
	if (cut)
		len += (size_t)sprintf(want + n, CUT "%llu bytes]", cut);
	want[len] = 0;
	assert_int_equal(arg_text(ev, key, got, sizeof(got)), (long)len);
	assert_memory_equal(got, want, len);
}

/*
 * A megabyte of text keeps SHMTRACE_TEXT_MAX bytes and says how many it
 * cut; a cut never splits a UTF-8 character; an event's text arguments
 * share its SHMTRACE_TEXT_MAX bytes in order, and one that gets nothing
 * still says what it had.
 */
static void test_long_text_is_cut_with_a_marker(void **state)
{
	const char *ring = test_ring_name("textlong");
	size_t mb = 1u << 20;
	char *big = malloc(mb + 1), edge[1030], a1000[1001], q100[101], got[64];
	struct shmtrace_arg a[4];
	uint32_t c, k;
	size_t pos = 0;
	shmtrace_t *t;
	char *json;
	const char *ev;

	(void)state;
	assert_non_null(big);
	memset(big, 'x', mb);
	big[mb] = 0;
	memset(edge, 'a', 1023);
	strcpy(edge + 1023, "\xe2\x82\xac" "b");	/* "€b": the euro would end at 1026 */
	memset(a1000, 'p', 1000);
	a1000[1000] = 0;
	memset(q100, 'q', 100);
	q100[100] = 0;
	t = text_ring(ring, 4096, 16);
	c = shmtrace_intern(t, "c");
	k = shmtrace_intern(t, "t");
	a[0] = shmtrace_arg_text(k, big);
	assert_int_equal(shmtrace_span_args(t, c, shmtrace_intern(t, "big"), 10, 20, 0, a, 1), 0);
	a[0] = shmtrace_arg_text(k, edge);
	assert_int_equal(shmtrace_span_args(t, c, shmtrace_intern(t, "edge"), 30, 40, 0, a, 1), 0);
	a[0] = shmtrace_arg_text(shmtrace_intern(t, "t1"), a1000);
	a[1] = shmtrace_arg_text(shmtrace_intern(t, "t2"), q100);
	a[2] = shmtrace_arg_text(shmtrace_intern(t, "t3"), "hello");
	a[3] = shmtrace_arg_int(shmtrace_intern(t, "n"), 7);
	assert_int_equal(shmtrace_span_args(t, c, shmtrace_intern(t, "share"), 50, 60, 0, a, 4), 0);
	shmtrace_close(t);

	json = export_ring_text(ring, tmp("cut.json"));
	assert_non_null(ev = next_event(json, "big", &pos));
	expect_text(ev, "t", big, SHMTRACE_TEXT_MAX, mb - SHMTRACE_TEXT_MAX);
	pos = 0;
	assert_non_null(ev = next_event(json, "edge", &pos));
	expect_text(ev, "t", edge, 1023, 4);
	pos = 0;
	assert_non_null(ev = next_event(json, "share", &pos));
	expect_text(ev, "t1", a1000, 1000, 0);
	expect_text(ev, "t2", q100, 24, 76);
	expect_text(ev, "t3", "", 0, 5);
	assert_int_equal(arg_int(ev, "n"), 7);
	assert_non_null(strstr(json, "\"args_lost\":0,"));
	free(json);

	/* OTLP says it the same way */
	{
		char *argv[] = { bin, "export", "--ring", (char *)ring, "--format", "otlp",
				 "-o", (char *)tmp("cut.otlp"), NULL };

		assert_int_equal(run(NULL, tmp("cut.err"), argv), 0);
		json = slurp(tmp("cut.otlp"));
		ev = strstr(json, "\"key\":\"shmtrace.arg.t3\"");
		assert_non_null(ev);
		assert_int_equal(arg_text(ev, "stringValue", got, sizeof(got)),
				 (long)strlen(CUT "5 bytes]"));
		assert_string_equal(got, CUT "5 bytes]");
		free(json);
	}
	free(big);
	shmtrace_ring_unlink(ring);
}

/* Texts at the edges of a record's 20 bytes, UTF-8 of every length,
 * characters JSON escapes, and bytes that are not UTF-8 (which the export
 * shows as U+FFFD, as it shows every string). */
static const char *const texts[] = {
	"", "a", "0123456789012345678", "01234567890123456789", "012345678901234567890",
	"0123456789012345678901234567890123456789",
	("h\xc3\xa9llo w\xc3\xb6rld \xe2\x82\xac \xf0\x9f\x98\x80 \xe6\x97\xa5\xe6\x9c\xac"),
	"q\"uote\\back/slash\x01\x1f\n\t\x7f</script>",
	"\xff\xfe ok",
};
#define NTEXTS (sizeof(texts) / sizeof(texts[0]))

/* What text i exports as: itself, invalid bytes replaced. */
static const char *exported(size_t i)
{
	return i == NTEXTS - 1 ? "\xef\xbf\xbd\xef\xbf\xbd ok" : texts[i];
}

/* Records text i on event "rt" with argument "i", through each API. */
static void record_texts(const char *ring)
{
	shmtrace_t *t;
	uint32_t c, n, ki, kt;

	assert_int_equal(shmtrace_default_open(ring), 0);
	t = shmtrace_default;
	c = shmtrace_intern(t, "c");
	n = shmtrace_intern(t, "rt");
	ki = shmtrace_intern(t, "i");
	kt = shmtrace_intern(t, "t");
	for (size_t i = 0; i < NTEXTS; i++) {
		struct shmtrace_arg a[2] = { shmtrace_arg_int(ki, (int64_t)i),
					     shmtrace_arg_text(kt, texts[i]) };
		struct shmtrace_open_span sp;

		if (i % 3 == 0) {
			assert_int_equal(shmtrace_span_args(t, c, n, 100 + i, 200, 0, a, 2), 0);
		} else if (i % 3 == 1) {
			shmtrace_begin(t, &sp, c, n, 0);
			assert_int_equal(shmtrace_span_arg(&sp, a[0]), 0);
			assert_int_equal(shmtrace_span_arg(&sp, a[1]), 0);
			assert_int_equal(shmtrace_end(&sp), 0);
		} else {
			SHMTRACE_SCOPE_VAR(scope, "c", "rt", 0);
			SHMTRACE_ARG_INT(scope, "i", (int64_t)i);
			SHMTRACE_ARG_TEXT(scope, "t", texts[i]);
		}
	}
	/* NULL is no text: refused, and the span ends without it */
	{
		struct shmtrace_arg bad = shmtrace_arg_text(kt, NULL);
		struct shmtrace_open_span sp;

		assert_int_equal(shmtrace_span_args(t, c, n, 1, 2, 0, &bad, 1), -EINVAL);
		assert_int_equal(shmtrace_instant_args(t, c, n, 0, &bad, 1), -EINVAL);
		shmtrace_begin(t, &sp, c, shmtrace_intern(t, "none"), 0);
		assert_int_equal(shmtrace_span_arg(&sp, bad), -EINVAL);
		assert_int_equal(shmtrace_end(&sp), 0);
	}
	shmtrace_default_open(NULL);
}

/* Every "rt" event of a Chrome export has its text, exactly. */
static void check_chrome(const char *json)
{
	char got[256];
	size_t pos = 0, seen = 0;
	const char *ev;

	while ((ev = next_event(json, "rt", &pos))) {
		long long i = arg_int(ev, "i");

		assert_true(i >= 0 && (size_t)i < NTEXTS);
		assert_int_equal(arg_text(ev, "t", got, sizeof(got)), (long)strlen(exported((size_t)i)));
		assert_string_equal(got, exported((size_t)i));
		seen++;
	}
	assert_int_equal(seen, NTEXTS);
	assert_non_null(strstr(json, "\"args_lost\":0,"));
}

/* Every span of an OTLP export has its text, exactly. */
static void check_otlp(const char *json)
{
	const char *p = json;
	char got[256];
	size_t seen = 0;

	while ((p = strstr(p, "\"key\":\"shmtrace.arg.i\""))) {
		long long i = strtoll(strstr(p, "\"intValue\":\"") + 12, NULL, 10);
		const char *t = strstr(p, "\"key\":\"shmtrace.arg.t\"");

		assert_true(i >= 0 && (size_t)i < NTEXTS);
		assert_non_null(t);
		assert_int_equal(arg_text(t, "stringValue", got, sizeof(got)),
				 (long)strlen(exported((size_t)i)));
		assert_string_equal(got, exported((size_t)i));
		seen++;
		p = t;
	}
	assert_int_equal(seen, NTEXTS);
}

/* The same texts read post-mortem from the ring, from a capture, and as
 * OTLP attributes. */
static void test_texts_round_trip_exactly(void **state)
{
	const char *ring = test_ring_name("textrt"), *caps[] = { tmp("rt.cap"), NULL };
	shmtrace_t *t;
	char *json;
	pid_t col;

	(void)state;
	t = text_ring(ring, 4096, 16);
	shmtrace_close(t);
	record_texts(ring);
	json = export_ring_text(ring, tmp("rt-ring.json"));
	check_chrome(json);
	assert_int_equal(count(json, "\"name\":\"none\",\"args\""), 0);
	free(json);

	/* a collector started now drains what the ring holds */
	col = cli_collector(ring, caps[0]);
	collector_stop(col);
	json = export_caps(caps, NULL, tmp("rt-cap.json"));
	check_chrome(json);
	free(json);
	json = export_caps(caps, "otlp", tmp("rt.otlp"));
	check_otlp(json);
	free(json);
	shmtrace_ring_unlink(ring);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("text", true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_distinct_texts_leave_the_string_table),
		cmocka_unit_test(test_long_text_is_cut_with_a_marker),
		cmocka_unit_test(test_texts_round_trip_exactly),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
