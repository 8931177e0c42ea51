/* SPDX-License-Identifier: MIT */
/*
 * test_collector_maxfiles.c - shmtrace-collector --max-files: after many
 * rotations exactly the newest N parts remain, each header names the
 * parts deleted before it, and an export of what remains (the collector
 * stopped or still writing) names them in words, marks itself incomplete
 * and counts exported + deleted + lost = written. The collector deletes
 * only the files it wrote (a link or another file at a part's name is
 * left alone), a failed deletion is said and never fatal, a capture
 * already at the output is kept aside, and bad values are usage errors.
 */
#include <grp.h>
#include <sys/mount.h>

#include "lifecycle_run.h"

#define MAX_PARTS 64		/* part numbers looked for on disk */
#define BATCH 200000ull		/* records a producer writes at once: fit the ring */

/* The path of part k of out. */
static void part_path(const char *out, uint32_t k, char *buf, size_t len)
{
	if (k)
		snprintf(buf, len, "%s.%u", out, k);
	else
		snprintf(buf, len, "%s", out);
}

/* The parts of out on disk (a regular file at the name), by number into
 * have[], at most max; how many. */
static int parts_on_disk(const char *out, uint32_t *have, int max)
{
	char path[600];
	struct stat st;
	int n = 0;

	for (uint32_t k = 0; k < MAX_PARTS && n < max; k++) {
		part_path(out, k, path, sizeof(path));
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
			have[n++] = k;
	}
	return n;
}

static struct shmt_cap_header header_of(const char *path)
{
	struct shmt_cap_reader *r;
	struct shmt_cap_header h;
	char err[256];

	assert_int_equal(shmt_cap_open(path, &r, err, sizeof(err)), 0);
	h = *shmt_cap_header_of(r);
	shmt_cap_close(r);
	return h;
}

/* n records in batches the ring holds, each drained before the next: none
 * dropped, and many rotations. */
static void produce_drained(const char *ring, uint64_t n)
{
	for (uint64_t done = 0; done < n; done += BATCH) {
		produce(ring, n - done < BATCH ? n - done : BATCH);
		wait_drained(ring);
	}
}

/* Starts the collector on a new ring with --max-size=1M --max-files=N. */
static pid_t start_bounded(const char *ring, const struct files *fs, const char *max_files)
{
	struct shmtrace_ring_config c = { .capacity = 1 << 18 };
	const char *const opts[] = { "--max-size=1M", max_files, NULL };

	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	return start_collector_with(ring, fs->out, opts, fs->errp, 0);
}

/*
 * The export of parts[0..n): exit 0, the deleted parts first..last (of
 * ring, by --max-files N) named in words on stderr and in the metadata,
 * incomplete, and exported + deleted + lost = written, nothing
 * unaccounted. Returns the records exported.
 */
static uint64_t expect_deleted_export(const struct files *fs, char (*parts)[600], int n,
				      const char *ring, uint32_t first, uint32_t last,
				      unsigned max_files, uint64_t written)
{
	uint64_t exported, deleted, lost;
	char words[256];

	assert_int_equal(export_all(fs->json, fs->xerr, parts, n), 0);
	snprintf(words, sizeof(words), "parts %u-%u of the capture of ring '%s'", first, last, ring);
	expect_in(fs->xerr, words);
	expect_in(fs->json, words);
	snprintf(words, sizeof(words), "were deleted by shmtrace-collector --max-files %u as newer "
		 "parts began: they held", max_files);
	expect_in(fs->xerr, words);
	expect_in(fs->json, words);
	expect_in(fs->xerr, "incomplete capture");
	expect_not_in(fs->xerr, "missing from the inputs");
	expect_in(fs->json, "\"complete\":false");
	exported = meta_u64(fs->json, "records");
	deleted = meta_u64(fs->json, "deleted_records");
	lost = meta_u64(fs->json, "records_lost");
	assert_int_equal(meta_u64(fs->json, "deleted_parts"), last - first + 1);
	assert_int_equal(meta_u64(fs->json, "missing_records"), deleted);
	assert_int_equal(meta_u64(fs->json, "unaccounted"), 0);
	assert_int_equal(exported + deleted + lost, written);
	return exported;
}

/* Each part read alone names every string its records use before them:
 * a reader given only the parts --max-files left, in order, never meets a
 * record whose name it has not read yet. */
static void expect_strings_before_records(const char *path)
{
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	bool known[65536] = { [0] = true };	/* id 0: the empty string */
	char err[256];
	int ret;

	assert_int_equal(shmt_cap_open(path, &r, err, sizeof(err)), 0);
	while ((ret = shmt_cap_next(r, &f, err, sizeof(err))) == 1) {
		if (f.type == SHMT_CAP_STRINGS)
			for (size_t i = 0; i < f.strings.n; i++)
				known[f.strings.v[i].id & 0xffff] = true;
		if (f.type != SHMT_CAP_RECORDS)
			continue;
		for (size_t i = 0; i < f.records.n; i++) {
			if (!known[f.records.v[i].name] || !known[f.records.v[i].cat])
				fprintf(stderr, "%s: a record at offset %llu before its strings\n", path,
					(unsigned long long)f.offset);
			assert_true(known[f.records.v[i].name] && known[f.records.v[i].cat]);
		}
	}
	assert_int_equal(ret, 0);
	shmt_cap_close(r);
}

/* After many rotations with --max-files 3 exactly the newest 3 parts
 * remain, each header names the parts deleted before it began, the
 * summary counts them, and the export of the three adds up. */
static void test_newest_parts_remain_and_the_export_counts_the_deleted(void **state)
{
	const char *ring = test_ring_name("maxf");
	struct files fs;
	char parts[3][600], said[160];
	uint32_t have[4], last;
	uint64_t n = 6 * BATCH, exported;
	pid_t col;

	(void)state;
	files_for(&fs, "mf");
	col = start_bounded(ring, &fs, "--max-files=3");
	produce_drained(ring, n);
	kill(col, SIGTERM);
	assert_int_equal(wait_exit(col), 0);

	assert_int_equal(parts_on_disk(fs.out, have, 4), 3);
	last = have[2];
	assert_true(last >= 6);
	for (int i = 0; i < 3; i++) {
		struct shmt_cap_header h;

		assert_int_equal(have[i], last - 2 + (uint32_t)i);
		part_path(fs.out, have[i], parts[i], sizeof(parts[i]));
		h = header_of(parts[i]);
		assert_int_equal(h.part, have[i]);
		assert_int_equal(h.deleted.max_files, 3);
		/* part p began once part p - 3 was deleted */
		assert_int_equal(h.deleted.parts, have[i] - 2);
		assert_true(h.deleted.records > 0 && h.deleted.records < n);
		assert_true(h.deleted.from_ns > 0 && h.deleted.from_ns <= h.deleted.to_ns);
		expect_strings_before_records(parts[i]);
	}
	snprintf(said, sizeof(said), "in %u files (%u deleted by --max-files, with %llu records)",
		 last + 1, last - 2, (unsigned long long)header_of(parts[2]).deleted.records);
	expect_in(fs.errp, said);
	assert_int_equal(summary_records(fs.errp), n);

	exported = expect_deleted_export(&fs, parts, 3, ring, 0, last - 3, 3, n);
	figure_acct("parts deleted by --max-files", last - 2, n,
		    exported + meta_u64(fs.json, "deleted_records"),
		    meta_u64(fs.json, "records_lost"), meta_u64(fs.json, "torn"),
		    meta_u64(fs.json, "unaccounted"),
		    "the parts left name the deleted, their records counted");
	for (int i = 0; i < 3; i++)
		unlink(parts[i]);
	shmtrace_ring_unlink(ring);
}

/* While the collector still writes the newest part (no END frame yet),
 * the parts left already tell how many records the deleted ones held. */
static void test_export_while_writing_counts_the_deleted(void **state)
{
	const char *ring = test_ring_name("maxfw");
	struct files fs;
	char parts[2][600];
	uint32_t have[3];
	/* 3.7 MB: the last rotation (at 3 MB) lies well before the end, so
	 * none is under way once the ring is drained */
	uint64_t n = 350000;
	pid_t col;

	(void)state;
	files_for(&fs, "mfw");
	col = start_bounded(ring, &fs, "--max-files=2");
	produce_drained(ring, n);
	assert_int_equal(parts_on_disk(fs.out, have, 3), 2);
	assert_int_equal(have[0] + 1, have[1]);
	for (int i = 0; i < 2; i++)
		part_path(fs.out, have[i], parts[i], sizeof(parts[i]));
	expect_deleted_export(&fs, parts, 2, ring, 0, have[0] - 1, 2, n);
	expect_in(fs.xerr, "is still being written by shmtrace-collector");
	kill(col, SIGTERM);
	assert_int_equal(wait_exit(col), 0);
	for (int i = 0; i < 2; i++)
		unlink(parts[i]);
	shmtrace_ring_unlink(ring);
}

/* Part 1 of out is being written and part 2 not begun yet: 1.5 MB in. */
static void fill_part_0(const char *ring, const char *out)
{
	char path[600];

	produce(ring, 150000);
	wait_drained(ring);
	part_path(out, 1, path, sizeof(path));
	assert_int_equal(access(path, F_OK), 0);
	part_path(out, 2, path, sizeof(path));
	assert_int_equal(access(path, F_OK), -1);
}

/*
 * Part 0 moved away (kept by hand) and a link to another file put at its
 * name: the collector deletes neither the link nor what it points to nor
 * the moved part, says so, and deletes the parts after it. The moved part
 * exported with those left is no longer counted as deleted.
 */
static void test_a_part_replaced_by_a_link_is_left_alone(void **state)
{
	const char *ring = test_ring_name("maxfl");
	struct files fs;
	char kept[600], victim[600], parts[3][600], said[700], *s;
	uint32_t have[3];
	uint64_t n = 150000 + 2 * BATCH;
	struct stat st;
	pid_t col;

	(void)state;
	files_for(&fs, "mfl");
	snprintf(kept, sizeof(kept), "%s", tmp("kept.cap"));
	snprintf(victim, sizeof(victim), "%s", tmp("victim"));
	col = start_bounded(ring, &fs, "--max-files=2");
	fill_part_0(ring, fs.out);
	assert_int_equal(rename(fs.out, kept), 0);
	put_file(victim, "not a capture\n", 14);
	assert_int_equal(symlink(victim, fs.out), 0);
	produce_drained(ring, 2 * BATCH);
	kill(col, SIGTERM);
	assert_int_equal(wait_exit(col), 0);

	snprintf(said, sizeof(said), "'%s' is no longer the part this collector wrote (moved or "
		 "replaced since): not deleted", fs.out);
	expect_in(fs.errp, said);
	assert_int_equal(lstat(fs.out, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	s = slurp(victim);
	assert_string_equal(s, "not a capture\n");
	free(s);
	assert_int_equal(header_of(kept).part, 0);

	/* the moved part with the two left: the parts between were deleted */
	assert_int_equal(parts_on_disk(fs.out, have, 3), 2);
	snprintf(parts[0], sizeof(parts[0]), "%s", kept);
	for (int i = 0; i < 2; i++)
		part_path(fs.out, have[i], parts[i + 1], sizeof(parts[i + 1]));
	expect_deleted_export(&fs, parts, 3, ring, 1, have[0] - 1, 2, n);
	for (int i = 0; i < 3; i++)
		unlink(parts[i]);
	unlink(fs.out);
	unlink(victim);
	shmtrace_ring_unlink(ring);
}

/* A capture already at -o (a collector before this one: here only its
 * part 7 and a replaced ring's file remain, the rest deleted by
 * --max-files) is kept aside under the first free FILE.prevK, never
 * truncated nor overwritten by a later part; a link, an empty file, a
 * file that is no capture and other names are left as they are. */
static void test_a_capture_already_there_is_kept_aside(void **state)
{
	const char *ring = test_ring_name("maxkp");
	/* the first two begin as a capture does (array, type 1, "SHMTCAP") */
	const char *const names[][2] = {
		{ ".7", "\x93\x01\xa7SHMTCAP part seven" },
		{ ".replaced", "\x93\x01\xa7SHMTCAP a replaced ring's" },
		{ ".prev1", "a name taken" }, { ".x", "not a part" }, { ".5", "" },
		{ ".1", "a part that is no capture" },
	};
	char path[700], to[700], victim[600], said[1600], *s;
	struct files fs;
	struct stat st;
	pid_t col;

	(void)state;
	files_for(&fs, "mfk");
	snprintf(victim, sizeof(victim), "%s", tmp("mfk-victim"));
	put_file(victim, "not a capture\n", 14);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", fs.out, names[i][0]);
		put_file(path, names[i][1], strlen(names[i][1]));
	}
	snprintf(path, sizeof(path), "%s.3", fs.out);
	assert_int_equal(symlink(victim, path), 0);
	col = start_bounded(ring, &fs, "--max-files=2");
	produce_drained(ring, 1000);
	kill(col, SIGTERM);
	assert_int_equal(wait_exit(col), 0);

	snprintf(said, sizeof(said), "the capture already at '%s' is kept as '%s.prev2' (2 files)",
		 fs.out, fs.out);
	expect_in(fs.errp, said);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		bool kept = i < 2;

		snprintf(path, sizeof(path), "%s%s", fs.out, names[i][0]);
		snprintf(to, sizeof(to), "%s.prev2%s", fs.out, names[i][0]);
		s = slurp(kept ? to : path);
		assert_string_equal(s, names[i][1]);
		free(s);
		if (kept)
			assert_int_equal(lstat(path, &st), -1);
		unlink(kept ? to : path);
	}
	snprintf(path, sizeof(path), "%s.3", fs.out);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	unlink(path);
	assert_int_equal(header_of(fs.out).part, 0);
	unlink(fs.out);
	unlink(victim);
	shmtrace_ring_unlink(ring);
}

/* A capture at an -o whose name leaves no room for ".prevK" is neither
 * kept aside nor written over: the collector says so and stops. */
static void test_a_capture_whose_name_is_too_long_to_keep_is_said(void **state)
{
	const char *ring = test_ring_name("maxlong");
	char name[251], out[800], errp[600], *s;
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	const char capture[] = "\x93\x01\xa7SHMTCAP the first run's";
	pid_t col;

	(void)state;
	memset(name, 'n', 250);	/* 256 with ".prev1" */
	name[250] = 0;
	snprintf(out, sizeof(out), "%s", tmp(name));
	snprintf(errp, sizeof(errp), "%s", tmp("mflong.err"));
	put_file(out, capture, strlen(capture));
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = fork();
	assert_true(col >= 0);
	if (col == 0) {
		int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fe, 2);
		execl(collector_bin, "shmtrace-collector", "--ring", ring, "--output", out,
		      (char *)NULL);
		_exit(127);
	}
	assert_int_equal(wait_exit(col), 1);
	expect_in(errp, "leaves no room for .prevK; nothing was overwritten");
	s = slurp(out);
	assert_string_equal(s, capture);
	free(s);
	unlink(out);
	shmtrace_ring_unlink(ring);
}

/* A capture at an -o in a folder the collector may write but not list
 * (mode 0333) is not written over unseen: the collector cannot look for a
 * free FILE.prevK there, says so and stops. As root, which lists any
 * folder, the collector runs as nobody, the capture nobody's. */
static void test_a_capture_in_a_folder_it_cannot_list_is_not_written_over(void **state)
{
	const char *ring = test_ring_name("maxunlist");
	const char capture[] = "\x93\x01\xa7SHMTCAP the first run's";
	const uid_t nobody = 65534;
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	char dir[] = "/tmp/shmt-unlistable-XXXXXX", out[600], errp[600], *s;
	pid_t col;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(out, sizeof(out), "%s/run.cap", dir);
	snprintf(errp, sizeof(errp), "%s", tmp("mfunlist.err"));
	put_file(out, capture, strlen(capture));
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	if (geteuid() == 0) {
		char path[300];

		snprintf(path, sizeof(path), "/dev/shm/%s", ring);
		assert_int_equal(chown(out, nobody, nobody), 0);
		assert_int_equal(chown(path, nobody, nobody), 0);
	}
	assert_int_equal(chmod(dir, 0333), 0);
	col = fork();
	assert_true(col >= 0);
	if (col == 0) {
		int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fe, 2);
		if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setgid(nobody) < 0 ||
				       setuid(nobody) < 0))
			_exit(126);
		execl(collector_bin, "shmtrace-collector", "--ring", ring, "--output", out,
		      (char *)NULL);
		_exit(127);
	}
	assert_int_equal(wait_exit(col), 1);
	expect_in(errp, "cannot list the folder of");
	expect_in(errp, "nothing was overwritten");
	s = slurp(out);
	assert_string_equal(s, capture);
	free(s);
	assert_int_equal(chmod(dir, 0700), 0);
	unlink(out);
	rmdir(dir);
	shmtrace_ring_unlink(ring);
}

/* A second collector started on a ring another drains, with the same -o
 * (the same command twice, or again while the first lingers): it stops
 * at once, and leaves the first one's capture where it is, the first
 * collector going on to a clean stop. It moved that capture aside, and
 * the first, finding its file replaced, stopped with records undrained. */
static void test_a_second_collector_leaves_the_first_ones_capture(void **state)
{
	const char *ring = test_ring_name("maxtwo");
	char second_err[600], *s;
	struct files fs;
	struct stat st;
	pid_t col, two;

	(void)state;
	files_for(&fs, "mf2");
	snprintf(second_err, sizeof(second_err), "%s", tmp("mf2-second.err"));
	col = start_bounded(ring, &fs, "--max-files=2");
	produce_drained(ring, 1000);
	two = fork();
	assert_true(two >= 0);
	if (two == 0) {
		int fe = open(second_err, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fe, 2);
		execl(collector_bin, "shmtrace-collector", "--ring", ring, "--output", fs.out,
		      (char *)NULL);
		_exit(127);
	}
	assert_int_equal(wait_exit(two), 1);
	s = slurp(second_err);
	assert_non_null(strstr(s, "another collector is already draining ring"));
	free(s);
	snprintf(second_err, sizeof(second_err), "%s.prev1", fs.out);
	assert_int_equal(lstat(second_err, &st), -1);
	produce_drained(ring, 1000);
	kill(col, SIGTERM);
	assert_int_equal(wait_exit(col), 0);
	assert_int_equal(header_of(fs.out).part, 0);
	unlink(fs.out);
	shmtrace_ring_unlink(ring);
}

/* Part 0 made a mount point (bound onto itself), so its unlink fails with
 * EBUSY: said, the collector goes on and exits 0, the part stays; with the
 * parts left it exports and adds up. */
static void test_a_failed_deletion_is_said_never_fatal(void **state)
{
	const char *ring = test_ring_name("maxfb");
	struct files fs;
	char parts[3][600], said[700];
	uint32_t have[4];
	uint64_t n = 150000 + 2 * BATCH;
	pid_t col;

	(void)state;
	files_for(&fs, "mfb");
	col = start_bounded(ring, &fs, "--max-files=2");
	fill_part_0(ring, fs.out);
	if (geteuid() != 0 || mount(fs.out, fs.out, NULL, MS_BIND, NULL) < 0) {
		kill(col, SIGTERM);
		wait_exit(col);
		shmtrace_ring_unlink(ring);
		print_message("cannot bind-mount a file here; skipped\n");
		skip();
	}
	produce_drained(ring, 2 * BATCH);
	kill(col, SIGTERM);
	assert_int_equal(wait_exit(col), 0);
	umount(fs.out);

	snprintf(said, sizeof(said), "cannot delete part '%s' (--max-files 2): %s; it stays on disk",
		 fs.out, strerror(EBUSY));
	expect_in(fs.errp, said);
	assert_int_equal(parts_on_disk(fs.out, have, 4), 3);
	assert_int_equal(have[0], 0);
	assert_int_equal(header_of(fs.out).part, 0);
	for (int i = 0; i < 3; i++)
		part_path(fs.out, have[i], parts[i], sizeof(parts[i]));
	expect_deleted_export(&fs, parts, 3, ring, 1, have[1] - 1, 2, n);
	for (int i = 0; i < 3; i++)
		unlink(parts[i]);
	shmtrace_ring_unlink(ring);
}

/* 0, 1, too many, garbage, and --max-files without --max-size: a usage
 * error (exit 2) in one line naming the option, then the hint. */
static void test_bad_max_files_are_usage_errors(void **state)
{
	const char *ring = test_ring_name("maxfu");
	const char *bad[][2] = {
		{ "0", "--max-files '0': need 2 to 1000000" },
		{ "1", "--max-files '1': need 2 to 1000000" },
		{ "1000001", "--max-files '1000001': need 2 to 1000000" },
		{ "3x", "--max-files '3x': need 2 to 1000000" },
		{ "-2", "--max-files '-2': need 2 to 1000000" },
	};
	char *err;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[] = { collector_bin, "--ring", (char *)ring, "-o", (char *)tmp("u.cap"),
				 "--max-size", "1M", "--max-files", (char *)bad[i][0], NULL };

		err = run_stderr("u.err", 2, argv);
		assert_non_null(strstr(err, bad[i][1]));
		assert_int_equal(count(err, "\n"), 2);
		assert_non_null(strstr(err, "\nTry 'shmtrace-collector --help'.\n"));
		free(err);
	}
	{
		char *argv[] = { collector_bin, "--ring", (char *)ring, "-o", (char *)tmp("u.cap"),
				 "--max-files", "3", NULL };

		err = run_stderr("u.err", 2, argv);
		assert_non_null(strstr(err, "--max-files needs --max-size"));
		assert_int_equal(count(err, "\n"), 2);
		free(err);
	}
	assert_int_equal(access(tmp("u.cap"), F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_newest_parts_remain_and_the_export_counts_the_deleted),
		cmocka_unit_test(test_export_while_writing_counts_the_deleted),
		cmocka_unit_test(test_a_part_replaced_by_a_link_is_left_alone),
		cmocka_unit_test(test_a_failed_deletion_is_said_never_fatal),
		cmocka_unit_test(test_a_capture_already_there_is_kept_aside),
		cmocka_unit_test(test_a_second_collector_leaves_the_first_ones_capture),
		cmocka_unit_test(test_a_capture_whose_name_is_too_long_to_keep_is_said),
		cmocka_unit_test(test_a_capture_in_a_folder_it_cannot_list_is_not_written_over),
		cmocka_unit_test(test_bad_max_files_are_usage_errors),
	};

	if (lifecycle_setup("maxfiles") < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, cli_teardown);
}
