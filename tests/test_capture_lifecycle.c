/* SPDX-License-Identifier: MIT */
/*
 * test_capture_lifecycle.c - what happens to a capture file around the
 * collector, and nothing lost silently through it: the capture deleted
 * while being written, a rotation that cannot open its next part, an
 * export given only some parts, a full file whose rest stays in the
 * ring, exported together with it, and the collector's count of what it
 * wrote before a write failed.
 */
#include "lifecycle_run.h"

/*
 * A: the capture deleted while the collector writes it. The collector
 * stops on its own with exit 1 and a clear error, and the records written
 * after the deletion stay in the ring. Before: it went on writing into the
 * deleted file, exited 0 at SIGTERM and counted them as captured.
 */
static void test_capture_deleted(void **state)
{
	const char *ring = test_ring_name("del");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	struct files fs;
	char *said;
	uint64_t tail, head, n1 = 20000, n2 = 30000;
	int rc;
	pid_t col;

	(void)state;
	files_for(&fs, "del");
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, fs.out, "--quiet", fs.errp, 0);
	produce(ring, n1);
	wait_drained(ring);
	assert_int_equal(unlink(fs.out), 0);
	produce(ring, n2);
	rc = wait_exit(col);
	said = slurp(fs.errp);
	if (rc != 1)
		fprintf(stderr, "collector: exit %d, said:\n%s\n", rc, said);
	assert_int_equal(rc, 1);
	/* "deleted or replaced" once main.c prints drain_error() for -ESTALE */
	assert_non_null(strstr(said, "deleted or replaced"));
	assert_non_null(strstr(said, "del.cap"));
	free(said);
	/* the collector stops at its next pass: the records written after
	 * the deletion stay in the ring (at most those of a pass under way
	 * as the file went could have gone into it) */
	ring_seqs(ring, &tail, &head);
	/* in the ring, or in the blocks handed over that it had not flushed */
	assert_int_equal(head + ring_staged(ring), n1 + n2);
	assert_true(tail >= n1 && tail <= n1 + 4 * 8192);
	assert_int_equal(export_ring(ring, fs.json, fs.xerr), 0);
	assert_true(meta_u64(fs.json, "records") >= n1 + n2 - tail);
	figure("capture deleted while collecting", 1, n2, n1 + n2 - tail, 0, 0, 0,
	       "written after the deletion / kept in the ring; exit 1 at the next pass");
	shmtrace_ring_unlink(ring);
}

/*
 * B: --max-size rotation whose next part cannot be opened (a directory is
 * in its way). The summary counts the records of part 0 (it said 0), the
 * export of part 0 says part 1 is missing (it said complete), and part 0
 * with the ring adds up to every record written.
 */
static void test_rotation_fails(void **state)
{
	const char *ring = test_ring_name("rotfail");
	struct shmtrace_ring_config c = { .capacity = 1 << 18 };
	struct files fs;
	char part1[520];
	uint64_t n = 200000, in0, exported, dropped;
	pid_t col;

	(void)state;
	files_for(&fs, "r");
	snprintf(part1, sizeof(part1), "%s.1", fs.out);
	assert_int_equal(mkdir(part1, 0755), 0);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, fs.out, "--max-size=1M", fs.errp, 0);
	produce(ring, n);
	assert_int_equal(wait_exit(col), 1);
	in0 = records_in(fs.out);
	assert_true(in0 > 0 && in0 < n);
	assert_int_equal(summary_records(fs.errp), in0);

	assert_int_equal(export_of(fs.json, fs.xerr, NULL, fs.out, NULL, NULL), 0);
	expect_in(fs.xerr, "r.cap.1");
	expect_in(fs.xerr, "missing");
	expect_not_in(fs.xerr, "please report");
	expect_in(fs.json, "\"complete\":false");
	expect_in(fs.json, "\"missing_parts\":[");
	assert_int_equal(meta_u64(fs.json, "records"), in0);

	/* with the ring: everything, and nothing missing */
	assert_int_equal(export_of(fs.json, fs.xerr, ring, fs.out, NULL, NULL), 0);
	exported = meta_u64(fs.json, "records");
	dropped = meta_u64(fs.json, "dropped");
	expect_in(fs.json, "\"complete\":true");
	assert_int_equal(meta_u64(fs.json, "unaccounted"), 0);
	assert_int_equal(exported + dropped, n);
	figure_acct("rotation fails mid-run", 1, n, exported, dropped, meta_u64(fs.json, "torn"), 0,
		    "exit 1, summary counts part 0; export FILE --ring R adds the rest");
	rmdir(part1);
	shmtrace_ring_unlink(ring);
}

/*
 * C: a capture in several parts exported in part. Each export names the
 * parts it lacks, with their records where the parts given tell, and says
 * it is incomplete; only the whole set is complete, and "a bug" is never
 * said. Before: part 0 alone was "complete", the last part alone blamed
 * its predecessors' records on a bug.
 */
static void test_parts_missing(void **state)
{
	const char *ring = test_ring_name("parts");
	struct shmtrace_ring_config c = { .capacity = 1 << 18 };
	struct files fs;
	char part[16][600], *said;
	uint64_t n = 400000, in[16], total = 0;
	int nparts = 0;
	pid_t col;
	struct stat st;

	(void)state;
	files_for(&fs, "p");
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, fs.out, "--max-size=1M", fs.errp, 0);
	produce(ring, n);
	kill(col, SIGTERM);
	assert_int_equal(wait_exit(col), 0);
	for (int i = 0; i < 16; i++) {
		if (i == 0)
			snprintf(part[i], sizeof(part[i]), "%s", fs.out);
		else
			snprintf(part[i], sizeof(part[i]), "%s.%d", fs.out, i);
		if (stat(part[i], &st) < 0)
			break;
		in[i] = records_in(part[i]);
		total += in[i];
		nparts++;
	}
	assert_true(nparts >= 3);

	/* part 0 alone: part 1 and after are missing, how many not known */
	assert_int_equal(export_of(fs.json, fs.xerr, NULL, part[0], NULL, NULL), 0);
	expect_in(fs.xerr, "p.cap.1 and any part after it");
	expect_in(fs.json, "\"complete\":false");
	assert_int_equal(meta_u64(fs.json, "unaccounted"), 0);

	/* the last part alone: the parts before it, and their records */
	assert_int_equal(export_of(fs.json, fs.xerr, NULL, part[nparts - 1], NULL, NULL), 0);
	said = slurp(fs.xerr);
	if (!strstr(said, part[0]) || !strstr(said, part[1]))
		fprintf(stderr, "said: %s\n", said);
	assert_non_null(strstr(said, part[0]));
	assert_non_null(strstr(said, part[1]));
	assert_null(strstr(said, "no counter accounts"));
	free(said);
	expect_in(fs.json, "\"complete\":false");
	assert_int_equal(meta_u64(fs.json, "missing_records"), total - in[nparts - 1]);
	assert_int_equal(meta_u64(fs.json, "unaccounted"), 0);
	assert_int_equal(meta_u64(fs.json, "records") + meta_u64(fs.json, "missing_records"), total);

	/* the first and the last: the ones between */
	assert_int_equal(export_of(fs.json, fs.xerr, NULL, part[0], part[nparts - 1],
				   NULL), 0);
	expect_in(fs.xerr, part[1]);
	expect_not_in(fs.xerr, "please report");
	expect_in(fs.json, "\"complete\":false");
	assert_int_equal(meta_u64(fs.json, "missing_records"), total - in[0] - in[nparts - 1]);
	figure_acct("parts missing from an export", (uint64_t)nparts - 2, total,
		    meta_u64(fs.json, "records") + meta_u64(fs.json, "missing_records"), 0, 0, 0,
		    "first and last part given: the parts between named, their records counted");

	/* all of them: complete, nothing said */
	assert_int_equal(export_all(fs.json, fs.xerr, part, nparts), 0);
	expect_not_in(fs.xerr, "missing");
	expect_in(fs.json, "\"complete\":true");
	assert_int_equal(meta_u64(fs.json, "records"), total);
	for (int i = 0; i < nparts; i++)
		unlink(part[i]);
	shmtrace_ring_unlink(ring);
}

/*
 * D: the capture file stops growing (a file-size limit: the full disk's
 * EFBIG twin, no mount needed); the collector exits 1 and the ring keeps
 * the rest. The capture alone says the ring still exists; the capture
 * with --ring adds up exactly; a ring of another id is refused. Before:
 * `export FILE --ring R` was a usage error.
 */
static void test_full_file_with_ring(void **state)
{
	const char *ring = test_ring_name("full");
	const char *other = test_ring_name("other");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	struct files fs;
	char hint[1200];
	uint64_t n = 60000, exported, dropped, torn;
	pid_t col;

	(void)state;
	files_for(&fs, "full");
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, fs.out, "--quiet", fs.errp, 128 * 1024);
	produce(ring, n);
	assert_int_equal(wait_exit(col), 1);

	/* alone: cut short, and where the rest is */
	assert_int_equal(export_of(fs.json, fs.xerr, NULL, fs.out, NULL, NULL), 0);
	snprintf(hint, sizeof(hint), "the ring '%s' still exists and may hold the rest: "
		 "shmtrace export %s --ring %s", ring, fs.out, ring);
	expect_in(fs.xerr, hint);
	expect_in(fs.json, "\"complete\":false");
	assert_true(meta_u64(fs.json, "records") < n);

	/* with the ring: one export adds up */
	assert_int_equal(export_of(fs.json, fs.xerr, ring, fs.out, NULL, NULL), 0);
	exported = meta_u64(fs.json, "records");
	dropped = meta_u64(fs.json, "dropped");
	torn = meta_u64(fs.json, "torn");
	expect_in(fs.json, "\"complete\":true");
	assert_int_equal(meta_u64(fs.json, "unaccounted"), 0);
	assert_int_equal(exported + dropped + torn, n);
	figure_acct("full disk, capture + ring in one export", 1, n, exported, dropped, torn, 0,
		    "EFBIG (file-size limit): export FILE --ring R");

	/* another ring: refused */
	assert_int_equal(shmtrace_ring_create(other, NULL), 0);
	assert_int_equal(export_of(fs.json, fs.xerr, other, fs.out, NULL, NULL), 1);
	expect_in(fs.xerr, "was not drained from ring");
	shmtrace_ring_unlink(other);
	shmtrace_ring_unlink(ring);
}

/* Makes the record of sequence seq no finished record (half-written, as a
 * producer killed inside it leaves it): in its block, when one holds it,
 * or in its slot. */
static void unfinish(struct shmt_view *v, uint64_t seq)
{
	struct shmt_extent e;

	if (shmt_ring_extents(v, seq, seq + 1, &e, 1) == 1) {
		uint64_t at = (e.taken + seq - e.seq) & (v->block_records - 1);

		shmt_block_recs(shmt_block_at(v, e.block))[at].commit = 0;
	} else {
		v->records[seq & v->mask].commit = 0;
	}
}

/* Records in the RECORDS and PACKED frames within the first bytes of a
 * capture file. */
static uint64_t records_within(const char *path, uint64_t bytes)
{
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	char err[256];
	uint64_t n = 0;

	assert_int_equal(shmt_cap_open(path, &r, err, sizeof(err)), 0);
	while (shmt_cap_next(r, &f, err, sizeof(err)) == 1 && shmt_cap_offset(r) <= bytes)
		if (f.type == SHMT_CAP_RECORDS)
			n += f.records.n;
	shmt_cap_close(r);
	return n;
}

/*
 * E: the collector's summary line after a failed write counts the records
 * it wrote: not the slots it skipped (half-written records, counted as
 * torn) below what reached the file. Before: it counted every sequence up
 * to there.
 */
static void test_summary_after_a_failed_write_counts_records(void **state)
{
	const char *ring = test_ring_name("sumfail");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	const char *const pwrite_engine[] = { "--write-engine=pwrite", NULL };
	struct files fs;
	struct shmt_view v;
	uint64_t records, bytes;
	char err[256], *said;
	pid_t col;

	(void)state;
	files_for(&fs, "sumfail");
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	produce(ring, 60000);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	unfinish(&v, 500);
	unfinish(&v, 700);
	shmt_view_close(&v);
	/* the writes in order, the first whole and the next cut: the summary's
	 * bytes are the first write's, its records those of the frames in it */
	col = start_collector_with(ring, fs.out, pwrite_engine, fs.errp, 512 * 1024);
	assert_int_equal(wait_exit(col), 1);
	records = summary_records(fs.errp);
	said = slurp(fs.errp);
	assert_non_null(strstr(said, " records, "));
	bytes = strtoull(strstr(said, " records, ") + strlen(" records, "), NULL, 10);
	free(said);
	assert_true(bytes > 0);
	assert_int_equal(records, records_within(fs.out, bytes));
	assert_true(records > 700);
	shmtrace_ring_unlink(ring);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capture_deleted),
		cmocka_unit_test(test_rotation_fails),
		cmocka_unit_test(test_parts_missing),
		cmocka_unit_test(test_full_file_with_ring),
		cmocka_unit_test(test_summary_after_a_failed_write_counts_records),
	};

	if (lifecycle_setup("lifecycle") < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, cli_teardown);
}
