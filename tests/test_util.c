/* SPDX-License-Identifier: MIT */
/*
 * test_util.c - the util layer and the ring-name rule: the duration and
 * ISO time formatters (both styles at every unit boundary, a column's
 * values in one unit), the histogram's buckets, quantiles and merging,
 * u64map, the external sort (runs merged in order,
 * read again, a spill file in the order given, a temporary directory that
 * cannot be written), outputs that must be new, and shmt_ring_path().
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "extsort.h"
#include "fmt.h"
#include "hist.h"
#include "outfile.h"
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

/* A column's unit is the one FMT_DUR_TABLE picks for a value, and every
 * value of the column is written in it, however large or small. */
static void test_fmt_dur_in(void **state)
{
	char buf[32];

	(void)state;
	assert_int_equal(fmt_dur_unit(0), FMT_NS);
	assert_int_equal(fmt_dur_unit(9999), FMT_NS);
	assert_int_equal(fmt_dur_unit(10000), FMT_US);
	assert_int_equal(fmt_dur_unit(10000000), FMT_MS);
	assert_int_equal(fmt_dur_unit(10000000000ull), FMT_S);
	fmt_dur_in(buf, sizeof(buf), 1302527000, FMT_US);
	assert_string_equal(buf, "1302527.000us");
	fmt_dur_in(buf, sizeof(buf), 5983, FMT_MS);
	assert_string_equal(buf, "0.006ms");
	fmt_dur_in(buf, sizeof(buf), 16924000, FMT_NS);
	assert_string_equal(buf, "16924000ns");
	fmt_dur_in(buf, sizeof(buf), 0, FMT_S);
	assert_string_equal(buf, "0.000s");
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

/* Two histograms merged are the one that had all their values. */
static void test_hist_merge(void **state)
{
	struct hist a, b, all;

	(void)state;
	hist_init(&a);
	hist_init(&b);
	hist_init(&all);
	hist_merge(&a, &b);
	assert_int_equal(a.count, 0);
	for (uint64_t v = 1; v < 100000; v = v * 2 + 3) {
		hist_add(v % 3 ? &a : &b, v);
		hist_add(&all, v);
	}
	hist_merge(&a, &b);
	assert_memory_equal(&a, &all, sizeof(all));
	hist_merge(&b, &a);	/* into one with a larger min */
	assert_int_equal(b.min, all.min);
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

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The i-th of n items: a permutation of 0..n-1 (n a power of two). */
static uint64_t shuffled(uint64_t i, uint64_t n)
{
	return (i * 0x9e3779b97f4a7c15ull) & (n - 1);
}

/* Reads s from the start: the items must be 0..n-1 in order (sorted) or
 * shuffled(0..n-1) (the order they were added). */
static void expect_items(struct extsort *s, uint64_t n, bool sorted)
{
	uint64_t v, i = 0;

	assert_int_equal(extsort_rewind(s), 0);
	while (extsort_next(s, &v) == 1) {
		assert_true(i < n);
		assert_int_equal(v, sorted ? i : shuffled(i, n));
		i++;
	}
	assert_int_equal(i, n);
	assert_int_equal(extsort_next(s, &v), 0);
}

/* Many more items than memory holds: sorted runs in a file, merged in
 * order, read again from the start; and the same in the order added. */
static void test_extsort_runs(void **state)
{
	const uint64_t n = 1u << 16;

	(void)state;
	for (int sorted = 0; sorted < 2; sorted++) {
		/* 8 KiB: 1024 items, the least it keeps: 64 runs */
		struct extsort *s = extsort_new(sizeof(uint64_t), sorted ? cmp_u64 : NULL, 8192);

		assert_non_null(s);
		for (uint64_t i = 0; i < n; i++) {
			uint64_t v = shuffled(i, n);

			assert_int_equal(extsort_add(s, &v), 0);
		}
		assert_int_equal(extsort_count(s), n);
		assert_int_equal(extsort_runs(s), n / 1024 - 1);
		expect_items(s, n, sorted);
		expect_items(s, n, sorted);
		assert_int_equal(extsort_add(s, &n), -EINVAL);
		extsort_free(s);
	}
}

/* A sort that fits its memory writes no file; an empty one reads empty. */
static void test_extsort_in_memory(void **state)
{
	struct extsort *s = extsort_new(sizeof(uint64_t), cmp_u64, 1 << 20);
	uint64_t v;

	(void)state;
	assert_non_null(s);
	assert_int_equal(extsort_rewind(s), 0);
	assert_int_equal(extsort_next(s, &v), 0);
	extsort_free(s);
	s = extsort_new(sizeof(uint64_t), cmp_u64, 1 << 20);
	for (uint64_t i = 0; i < 4096; i++) {
		v = shuffled(i, 4096);
		assert_int_equal(extsort_add(s, &v), 0);
	}
	expect_items(s, 4096, true);
	assert_int_equal(extsort_runs(s), 0);
	extsort_free(s);
}

/* A sort takes memory as its items come, not its whole bound at once:
 * sorts of a few items with a 1 GiB bound each, in an address space of
 * 256 MiB (a child's: the limit stays there). The sanitizers' runtimes
 * map more than that before main, so their runs skip it. */
static void test_extsort_memory_grows_with_items(void **state)
{
	struct rlimit lim = { 256u << 20, 256u << 20 };
	int status;
	pid_t pid;

	(void)state;
	if (getenv("SHMTRACE_SAN")) {
		print_message("a sanitizer's address space exceeds the limit; skipped\n");
		skip();
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setrlimit(RLIMIT_AS, &lim) < 0)
			_exit(2);
		for (int k = 0; k < 4; k++) {
			struct extsort *s = extsort_new(sizeof(uint64_t), cmp_u64, (size_t)1 << 30);
			uint64_t v, n = 0;

			for (uint64_t i = 0; s && i < 5000; i++)
				if (extsort_add(s, &i) < 0)
					_exit(3);
			if (!s || extsort_rewind(s) < 0)
				_exit(4);
			while (extsort_next(s, &v) == 1)
				n += v == n;
			extsort_free(s);
			if (n != 5000)
				_exit(5);
		}
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* A temporary directory that is not there: the error, not a crash. */
static void test_extsort_no_tmpdir(void **state)
{
	struct extsort *s = extsort_new(sizeof(uint64_t), cmp_u64, 8192);
	const char *old = getenv("TMPDIR");
	char *saved = old ? strdup(old) : NULL;
	int ret = 0;

	(void)state;
	setenv("TMPDIR", "/nonexistent-shmtrace-dir", 1);
	for (uint64_t i = 0; i < 4096 && ret == 0; i++)
		ret = extsort_add(s, &i);
	assert_int_equal(ret, -ENOENT);
	if (saved)
		setenv("TMPDIR", saved, 1);
	else
		unsetenv("TMPDIR");
	free(saved);
	extsort_free(s);
}

/*
 * An output that must be new (a flight recorder's snapshot) finds its
 * path taken by whatever is there, a symbolic link (dangling too) or a
 * FIFO a peer planted included: -EEXIST, on which its caller picks the
 * next name, and the planted file is left as it was.
 */
static void test_outfile_new_path_taken_by_anything_planted(void **state)
{
	char dir[] = "/tmp/shmt-outfile-XXXXXX", link_[64], dangling[64], fifo[64], free_[64];
	const char *taken[] = { link_, dangling, fifo };
	struct outfile o;
	char err[512];
	struct stat st;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(link_, sizeof(link_), "%s/link", dir);
	snprintf(dangling, sizeof(dangling), "%s/dangling", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(free_, sizeof(free_), "%s/free", dir);
	assert_int_equal(symlink("/etc/passwd", link_), 0);
	assert_int_equal(symlink("/nonexistent/x", dangling), 0);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
		err[0] = 0;
		assert_int_equal(outfile_open(&o, taken[i], OUTFILE_NEW, 0666, err, sizeof(err)),
				 -EEXIST);
		assert_non_null(strstr(err, "exists"));
		assert_int_equal(lstat(taken[i], &st), 0);
		assert_true(i == 2 ? S_ISFIFO(st.st_mode) : S_ISLNK(st.st_mode));
	}
	/* a free name is written and named */
	assert_int_equal(outfile_open(&o, free_, OUTFILE_NEW, 0666, err, sizeof(err)), 0);
	assert_int_equal(write(o.fd, "x", 1), 1);
	assert_int_equal(outfile_commit(&o, err, sizeof(err)), 0);
	assert_int_equal(stat(free_, &st), 0);
	assert_int_equal(st.st_size, 1);
	for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
		unlink(taken[i]);
	unlink(free_);
	assert_int_equal(rmdir(dir), 0);
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
		cmocka_unit_test(test_fmt_dur_in),
		cmocka_unit_test(test_hist_merge),
		cmocka_unit_test(test_fmt_iso),
		cmocka_unit_test(test_hist),
		cmocka_unit_test(test_u64map),
		cmocka_unit_test(test_extsort_runs),
		cmocka_unit_test(test_extsort_in_memory),
		cmocka_unit_test(test_extsort_memory_grows_with_items),
		cmocka_unit_test(test_extsort_no_tmpdir),
		cmocka_unit_test(test_ring_path),
		cmocka_unit_test(test_outfile_new_path_taken_by_anything_planted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
