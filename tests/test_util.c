/* SPDX-License-Identifier: MIT */
/*
 * test_util.c - the util layer and the ring-name rule: the duration and
 * ISO time formatters (both styles at every unit boundary), the histogram's
 * buckets and quantiles, u64map, and shmt_ring_path().
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "fmt.h"
#include "hist.h"
#include "ring_reader.h"
#include "ring_writer.h"
#include "u64map.h"

static void expect_dur(uint64_t ns, enum fmt_dur_style st, const char *want)
{
	char buf[32];

	fmt_dur(buf, sizeof(buf), ns, st);
	assert_string_equal(buf, want);
}

/* the outputs summary and svg printed before they shared one formatter */
static void test_fmt_dur(void **state)
{
	(void)state;
	expect_dur(0, FMT_DUR_TABLE, "0ns");
	expect_dur(9999, FMT_DUR_TABLE, "9999ns");
	expect_dur(10000, FMT_DUR_TABLE, "10.000us");
	expect_dur(9999999, FMT_DUR_TABLE, "9999.999us");
	expect_dur(10000000, FMT_DUR_TABLE, "10.000ms");
	expect_dur(9999999999ull, FMT_DUR_TABLE, "10000.000ms");
	expect_dur(10000000000ull, FMT_DUR_TABLE, "10.000s");
	expect_dur(999, FMT_DUR_LABEL, "999 ns");
	expect_dur(1000, FMT_DUR_LABEL, "1.000 us");
	expect_dur(1234567, FMT_DUR_LABEL, "1.235 ms");
	expect_dur(20000000000ull, FMT_DUR_LABEL, "20000.000 ms");
}

static void test_fmt_iso(void **state)
{
	char buf[64];

	(void)state;
	fmt_iso_ns(buf, sizeof(buf), 1700000000123456789ull);
	assert_string_equal(buf, "2023-11-14T22:13:20.123456789Z");
	fmt_iso_ns(buf, sizeof(buf), 5);
	assert_string_equal(buf, "1970-01-01T00:00:00.000000005Z");
}

static void test_hist(void **state)
{
	struct hist h;
	uint64_t lo, hi;

	(void)state;
	hist_init(&h);
	assert_int_equal(hist_quantile(&h, 0.5), 0);
	for (uint64_t v = 1; v <= 100; v++)
		hist_add(&h, v);
	/* exact below 128 */
	assert_int_equal(hist_quantile(&h, 0.5), 50);
	assert_int_equal(hist_quantile(&h, 1.0), 100);
	assert_int_equal(h.min, 1);
	assert_int_equal(h.max, 100);
	assert_int_equal(h.total, 5050);
	/* every value lies in its bucket, whose width is within 1/64 */
	for (uint64_t v = 1; v < (1ull << 40); v = v * 3 + 1) {
		hist_bounds(hist_bucket(v), &lo, &hi);
		assert_true(lo <= v && v <= hi);
		assert_true(hi - lo <= lo / 64 + 1);
	}
}

static void test_u64map(void **state)
{
	struct u64map m;
	bool added;
	uint64_t *p;

	(void)state;
	u64map_init(&m);
	assert_null(u64map_find(&m, 7));
	for (uint64_t k = 0; k < 5000; k++) {
		p = u64map_get(&m, k * 0x9e3779b97f4a7c15ull, k, &added);
		assert_non_null(p);
		assert_true(added);
	}
	p = u64map_get(&m, 3 * 0x9e3779b97f4a7c15ull, 99, &added);
	assert_false(added);
	assert_int_equal(*p, 3);
	for (uint64_t k = 0; k < 5000; k++)
		assert_int_equal(*u64map_find(&m, k * 0x9e3779b97f4a7c15ull), k);
	assert_null(u64map_find(&m, 1));
	u64map_free(&m);
}

static void test_ring_path(void **state)
{
	char buf[SHMT_PATH_MAX], longname[SHMT_NAME_MAX + 2];

	(void)state;
	assert_int_equal(shmt_ring_path("abc", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/dev/shm/abc");
	memset(longname, 'x', SHMT_NAME_MAX);
	longname[SHMT_NAME_MAX] = 0;
	assert_int_equal(shmt_ring_path(longname, buf, sizeof(buf)), 0);
	longname[SHMT_NAME_MAX] = 'x';
	longname[SHMT_NAME_MAX + 1] = 0;
	assert_int_equal(shmt_ring_path(longname, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(shmt_ring_path("a/b", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(shmt_ring_path("..", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(shmt_ring_path("", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(shmt_ring_path("abc", buf, 8), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fmt_dur),
		cmocka_unit_test(test_fmt_iso),
		cmocka_unit_test(test_hist),
		cmocka_unit_test(test_u64map),
		cmocka_unit_test(test_ring_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
