/* SPDX-License-Identifier: MIT */
/*
 * test_hostile_report.c - what the tools report from a ring another user
 * may have written: counters forged beyond what was written, names with
 * terminal escapes.
 * Each case prints a FIGURE row for the fault table of `make test`.
 */
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <sys/mman.h>

#include "hostile_run.h"
#include "lifecycle_run.h"

/*
 * Counters forged to values no run can have: reported as corrupt in
 * words, never printed as counts, by stat, the export's metadata and the
 * collector's summary.
 */
static void test_impossible_counters_not_counts(void **state)
{
	const char *ring = test_ring_name("forged");
	char *stat_[] = { bin, "stat", (char *)ring, NULL };
	char *exp[] = { bin, "export", "--ring", (char *)ring, "-o", NULL, NULL };
	char *stat_json[] = { bin, "stat", (char *)ring, "--json", NULL };
	char otlp_out[512], svg_out[512];
	char *otlp[] = { bin, "export", "--ring", (char *)ring, "--format", "otlp", "-o",
			 otlp_out, NULL };
	char *svg[] = { bin, "svg", "--ring", (char *)ring, "-o", svg_out, NULL };
	char *summary[] = { bin, "summary", "--ring", (char *)ring, NULL };
	struct shmt_view v;
	char err[256];

	(void)state;
	/* tmp() has a few buffers only: paths kept past other calls are copied */
	snprintf(otlp_out, sizeof(otlp_out), "%s", tmp("forged.otlp"));
	snprintf(svg_out, sizeof(svg_out), "%s", tmp("forged.svg"));
	small_ring(ring, 4096, 1000);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	store_relaxed(&v.h->overwritten.v, 1ull << 63);	/* a discard ring overwrites nothing */
	store_relaxed(&v.h->dropped.v, 4000000000000000000ull);
	exp[5] = (char *)tmp("forged.json");
	assert_int_equal(run_guarded(NULL, tmp("forged.err"), exp), 0);
	expect_not_in(tmp("forged.json"), "9223372036854775808");
	expect_not_in(tmp("forged.json"), "4000000000000000000");
	expect_in(tmp("forged.err"), "corrupt");
	assert_int_equal(run_guarded(tmp("stat.out"), tmp("stat.err"), stat_), 0);
	expect_not_in(tmp("stat.out"), "4000000000000000000");
	expect_not_in(tmp("stat.out"), "9223372036854775808");
	expect_in(tmp("stat.out"), "corrupt");
	/* the metadata says it in its own key; no count stands for them */
	expect_in(tmp("forged.json"), "\"counters_corrupt\":true");
	expect_in(tmp("forged.json"), "\"dropped\":null");
	expect_in(tmp("forged.json"), "\"records_lost\":null");
	expect_not_in(tmp("forged.err"), "4000000000000000000");
	expect_not_in(tmp("forged.err"), "9223372036854775808");
	assert_int_equal(run_guarded(tmp("stat.json"), NULL, stat_json), 0);
	expect_in(tmp("stat.json"), "\"counters_corrupt\":true");
	expect_in(tmp("stat.json"), "\"dropped\":null");
	expect_not_in(tmp("stat.json"), "4000000000000000000");
	/* OTLP scope attributes and the SVG's heading, the same */
	assert_int_equal(run_guarded(NULL, tmp("otlp.err"), otlp), 0);
	expect_in(tmp("forged.otlp"), "shmtrace.counters_corrupt");
	expect_not_in(tmp("forged.otlp"), "4000000000000000000");
	expect_not_in(tmp("forged.otlp"), "9223372036854775808");
	assert_int_equal(run_guarded(NULL, tmp("svg.err"), svg), 0);
	expect_in(tmp("forged.svg"), "loss counters corrupt");
	expect_not_in(tmp("forged.svg"), "4000000000000000000");
	/* summary says it on stderr, and never as a count */
	assert_int_equal(run_guarded(NULL, tmp("sum.err"), summary), 0);
	expect_in(tmp("sum.err"), "corrupt");
	expect_not_in(tmp("sum.err"), "4000000000000000000");
	figure("loss counters forged beyond what was written", 2, 1000, 1000, 0, 0, 0,
	       "flagged corrupt in words; never shown as counts");
	shmt_view_close(&v);
	shmtrace_ring_unlink(ring);
}

/* Forged counters drained by a collector: its summary line, the capture's
 * export (where reconcile() once wrapped UINT64_MAX into a phantom record)
 * and `stat` of the capture say corrupt, never the counts. */
static void test_impossible_counters_through_collector(void **state)
{
	const char *ring = test_ring_name("forgedcol");
	char cap[512];
	char *exp[] = { bin, "export", cap, "-o", NULL, NULL };
	char *stat_[] = { bin, "stat", cap, NULL };
	const char *numbers[] = { "4000000000000000000", "18446744073709551615",
				  "18446744073709551614" };
	char fd[16], ready[8] = "";
	struct shmt_view v;
	char err[256];
	int p[2], st;
	pid_t pid;

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("forgedcol.cap"));
	small_ring(ring, 4096, 1000);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	store_relaxed(&v.h->overwritten.v, UINT64_MAX);
	store_relaxed(&v.h->dropped.v, 4000000000000000000ull);
	shmt_view_close(&v);
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int e = open(tmp("col.err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		dup2(e, 2);
		alarm(GUARD_S);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		execl(collector_bin, "shmtrace-collector", "--ring", ring, "--output", cap,
		      "--ready-fd", fd, "--poll-interval", "5", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	assert_int_equal(read(p[0], ready, sizeof(ready) - 1), 6);
	close(p[0]);
	kill(pid, SIGTERM);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	expect_in(tmp("col.err"), "loss counters corrupt");
	exp[4] = (char *)tmp("forgedcol.json");
	assert_int_equal(run_guarded(NULL, tmp("forgedcol.err"), exp), 0);
	expect_in(tmp("forgedcol.err"), "corrupt");
	expect_in(tmp("forgedcol.json"), "\"counters_corrupt\":true");
	assert_int_equal(run_guarded(tmp("capstat.out"), NULL, stat_), 0);
	expect_in(tmp("capstat.out"), "corrupt");
	for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
		expect_not_in(tmp("col.err"), numbers[i]);
		expect_not_in(tmp("forgedcol.json"), numbers[i]);
		expect_not_in(tmp("forgedcol.err"), numbers[i]);
		expect_not_in(tmp("capstat.out"), numbers[i]);
	}
	/* no phantom record either: nothing unaccounted is made up */
	expect_not_in(tmp("forgedcol.json"), "no counter accounts for");
	figure("loss counters forged, drained by a collector", 2, 1000, 1000, 0, 0, 0,
	       "collector summary, capture export, stat: corrupt, no counts");
	shmtrace_ring_unlink(ring);
}

/* No control character in a file at path (newlines and tabs aside). */
static void expect_no_control(const char *path)
{
	char *out = slurp(path);

	for (const char *p = out; *p; p++)
		assert_false((unsigned char)*p < 0x20 && *p != '\n' && *p != '\t');
	free(out);
}

/*
 * Like small_ring(), but each record flushed as soon as written, which
 * copies it into its slot: left to fill their blocks with no collector
 * draining, the records would be sequenced in place, in the blocks, and
 * the slots stay empty.
 */
static void slotted_ring(const char *ring, uint32_t capacity, int n)
{
	shmtrace_t *t;
	uint32_t name;

	small_ring(ring, capacity, 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	name = shmtrace_intern(t, "s");
	for (int i = 0; i < n; i++) {
		assert_int_equal(shmtrace_span(t, name, name, 1000 + (uint64_t)i, 1001 + (uint64_t)i, 0), 0);
		assert_int_equal(shmtrace_flush(t), 0);
	}
	shmtrace_close(t);
}

/* A ring whose head is forged: 0 with records in the slots (once an
 * export of nothing, said nowhere), or past its tail by more than a
 * discard ring holds, or below its tail: each said in a warning, which
 * quotes the ring's name escaped. */
static void test_forged_head_said(void **state)
{
	const char *ring = test_ring_name("head\x1b]0;pwned\x07\x1b[2J");
	char *exp[] = { bin, "export", "--ring", (char *)ring, "-o", NULL, NULL };
	char *rm[] = { bin, "rm", (char *)ring, (char *)ring, NULL };
	struct {
		uint64_t head, tail;
		const char *said;
	} cases[] = {
		{ 0, 0, "none of the 1000 records in its slots" },
		{ 1000 + (1ull << 24), 1000, "more than its 4096 slots past its tail" },
		{ 1000, 2000, "is past its head" },
	};
	struct shmt_extent e;
	struct shmt_view v;
	char err[256];

	(void)state;
	slotted_ring(ring, 4096, 1000);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	/* every record in its slot, none held in a block */
	assert_int_equal(shmt_ring_extents(&v, 0, shmt_ring_head(&v), &e, 1), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		store_relaxed(&v.h->head.v, cases[i].head);
		store_relaxed(&v.h->tail.v, cases[i].tail);
		exp[5] = (char *)tmp("head.json");
		assert_int_equal(run_guarded(NULL, tmp("head.err"), exp), 0);
		expect_in(tmp("head.err"), cases[i].said);
		expect_in(tmp("head.err"), "forged or damaged");
		expect_no_control(tmp("head.err"));
	}
	/* an error quoting the name is escaped too */
	store_relaxed(&v.h->head.v, 1000);
	store_relaxed(&v.h->tail.v, 0);
	shmt_view_close(&v);
	assert_int_equal(run_guarded(NULL, tmp("rm.err"), rm), 1);
	expect_in(tmp("rm.err"), "\\x1b");
	expect_no_control(tmp("rm.err"));
	figure("ring head forged (0, too far, below the tail)", 3, 1000, 0, 0, 0, 0,
	       "each said in a warning; names in it escaped");
	shmtrace_ring_unlink(ring);
}

/*
 * An overwrite ring whose head a peer moved a ring's worth on over slots
 * that hold nothing (commit words 0, as a peer can zero them): no flush
 * writes them (the journal is clear), so each is torn at once. The
 * readers once waited on each such slot for a producer to finish it: a
 * thousand pauses a slot, about a minute for these 4M slots, which the
 * guard turns into a failure.
 */
static void test_slots_zeroed_by_a_peer_counted_torn_without_a_wait(void **state)
{
	const char *ring = test_ring_name("zeroed");
	char *exp[] = { bin, "export", "--ring", (char *)ring, "-o", NULL, NULL };
	char *snap[] = { bin, "snapshot", (char *)ring, "-o", NULL, NULL };
	struct shmtrace_ring_config c = { .capacity = 1u << 22, .mode = SHMTRACE_MODE_OVERWRITE };
	struct shmt_view v;
	char err[256], torn[64];

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	store_relaxed(&v.h->head.v, (uint64_t)c.capacity);
	assert_int_equal(load_relaxed(&v.h->journal.active), 0);
	shmt_view_close(&v);
	exp[5] = (char *)tmp("zeroed.json");
	assert_int_equal(run_for(NULL, tmp("zeroed.err"), exp, 15), 0);
	/* slot 0 is a lap behind the head: overwritten; the rest torn */
	snprintf(torn, sizeof(torn), "\"torn\":%u", c.capacity - 1);
	expect_in(tmp("zeroed.json"), torn);
	snap[4] = (char *)tmp("zeroed.cap");
	assert_int_equal(run_for(NULL, tmp("zeroed-snap.err"), snap, 15), 0);
	shmtrace_ring_unlink(ring);
}

/* A process name with terminal escapes: what the commands print to a
 * terminal carries no control character. */
static void test_terminal_escapes_stripped(void **state)
{
	const char *ring = test_ring_name("esc");
	const char *evil = "p\x1b]0;pwned\x07\x1b[2J\x1b[31mRED";
	char *summary[] = { bin, "summary", "--ring", (char *)ring, NULL };
	char *stat_[] = { bin, "stat", (char *)ring, NULL };
	char *ls[] = { bin, "ls", NULL };
	char *const *cmds[] = { summary, stat_, ls };
	shmtrace_t *t;
	uint32_t name;

	(void)state;
	small_ring(ring, 4096, 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	assert_int_equal(shmtrace_set_process_name(t, evil), 0);
	name = shmtrace_intern(t, "s\x1b[2Jx");
	assert_int_equal(shmtrace_span(t, name, name, 1, 2, 0), 0);
	shmtrace_close(t);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char *out;

		assert_int_equal(run_guarded(tmp("esc.out"), tmp("esc.err"), cmds[i]), 0);
		out = slurp(tmp("esc.out"));
		for (const char *p = out; *p; p++)
			assert_false((unsigned char)*p < 0x20 && *p != '\n' && *p != '\t');
		free(out);
		expect_no_control(tmp("esc.err"));
	}
	figure("terminal escapes in process and span names", 3, 0, 0, 0, 0, 0,
	       "summary, stat, ls print no control character");
	shmtrace_ring_unlink(ring);
}

/* Stops a collector with SIGTERM, on which it drains what is left: it
 * exits 0. */
static void stop_collector(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/*
 * A capture and its ring beyond it, with the ring's head and tail forged
 * by the same multiple of 2^24: every slot still matches a sequence (the
 * commit word holds 24 bits of one), now above the capture's, so its
 * records pass for new ones. The export says the ring contradicts the
 * captures, both ways: a tail past their end, a head behind it; and a
 * collector's capture of it says its sequences jump past the first's.
 */
static void test_head_and_tail_shifted_together_said(void **state)
{
	const char *ring = test_ring_name("shift");
	char cap[512], cerr[512];
	char *exp[] = { bin, "export", cap, "--ring", (char *)ring, "-o", NULL, NULL };
	char cap2[512];
	char *exp2[] = { bin, "export", cap, cap2, "-o", NULL, NULL };
	struct shmt_view v;
	uint64_t tail, head;
	char err[256];

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("shift.cap"));
	snprintf(cerr, sizeof(cerr), "%s", tmp("shift-col.err"));
	exp[6] = (char *)tmp("shift.json");
	small_ring(ring, 4096, 1000);
	stop_collector(start_collector(ring, cap, NULL, cerr, 0));
	produce(ring, 500);
	ring_seqs(ring, &tail, &head);
	assert_int_equal(tail, 1000);
	assert_int_equal(head, 1500);
	/* as it is: the ring holds the 500 past the capture, nothing said */
	assert_int_equal(run_guarded(NULL, tmp("shift.err"), exp), 0);
	expect_not_in(tmp("shift.err"), "forged");
	assert_int_equal(meta_u64(tmp("shift.json"), "records"), 1500);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
	store_relaxed(&v.h->head.v, 500);
	store_relaxed(&v.h->tail.v, 0);
	assert_int_equal(run_guarded(NULL, tmp("shift.err"), exp), 0);
	expect_in(tmp("shift.err"), "its head (500) is behind the end of the captures (1000)");
	store_relaxed(&v.h->head.v, head + (1ull << 24));
	store_relaxed(&v.h->tail.v, tail + (1ull << 24));
	shmt_view_close(&v);
	assert_int_equal(run_guarded(NULL, tmp("shift.err"), exp), 0);
	expect_in(tmp("shift.err"), "is past the end of the captures (1000)");
	expect_in(tmp("shift.err"), "may repeat records of the captures");
	/* a collector started on it captures the 500 past the jump: the two
	 * captures together say the sequences jump, which no discard ring
	 * does */
	snprintf(cap2, sizeof(cap2), "%s", tmp("shift2.cap"));
	stop_collector(start_collector(ring, cap2, NULL, cerr, 0));
	exp2[5] = (char *)tmp("shift2.json");
	assert_int_equal(run_guarded(NULL, tmp("shift2.err"), exp2), 0);
	expect_in(tmp("shift2.err"), "its sequences jump past 16777216 records");
	expect_in(tmp("shift2.err"), "head and tail were forged");
	figure("ring head and tail shifted by 2^24 past a capture", 3, 1500, 0, 0, 0, 0,
	       "the export says the ring, or two captures, contradict the capture");
	shmtrace_ring_unlink(ring);
}

/*
 * A head forged while a collector drains: sent back below what it read
 * (the producers' next records then repeat captured sequences), or, in a
 * discard ring, more than the ring's slots ahead (the slots then match
 * sequences they are not of): the collector says so, once.
 */
static void test_forged_head_said_by_collector(void **state)
{
	const char *ring = test_ring_name("colhead");
	struct {
		uint64_t head;
		const char *said;
	} cases[] = {
		{ 10, "its head went back from 1000 to 10" },
		{ 1000 + (1ull << 24), "its head jumped from 1000 to 16778216" },
	};
	char cap[512], cerr[512];
	struct shmt_view v;
	char err[256];

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("colhead.cap"));
	snprintf(cerr, sizeof(cerr), "%s", tmp("colhead.err"));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pid_t pid;

		small_ring(ring, 4096, 1000);
		pid = start_collector(ring, cap, NULL, cerr, 0);
		wait_drained(ring);
		assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, &v, err, sizeof(err)), 0);
		store_relaxed(&v.h->head.v, cases[i].head);
		shmt_view_close(&v);
		/* its last pass, on SIGTERM, reads the head */
		stop_collector(pid);
		expect_in(cerr, cases[i].said);
		expect_in(cerr, "forged or damaged");
	}
	figure("ring head forged under a collector (back, too far)", 2, 1000, 0, 0, 0, 0,
	       "the collector says so");
	shmtrace_ring_unlink(ring);
}

/*
 * A ring with 2^20 thread slots, filled through a mapping of our own as
 * a peer could: 2^19 processes, two slots each (the second attached
 * late). ls, stat and rm compared every slot with every slot before it
 * (~5e11 reads: half an hour); they copy the slots once and sort, and
 * finish within the guard, counting each process once with the flags of
 * both its slots.
 */
static void test_million_thread_slots(void **state)
{
	/* under the sanitizers (make test-san) every read is checked, and
	 * 2^20 slots outlast the suite's guard: 2^16 there, still ~2e9
	 * reads by every slot against every earlier one */
	const uint32_t slots = getenv("SHMTRACE_SAN") ? 1u << 16 : 1u << 20;
	const char *ring = test_ring_name("slots");
	struct shmtrace_ring_config c = { .capacity = 1024, .max_threads = slots };
	char *ls[] = { bin, "ls", "--json", NULL };
	char *stat_[] = { bin, "stat", (char *)ring, "--json", NULL };
	char *rm[] = { bin, "rm", (char *)ring, NULL };
	char want[64], dead[64];
	struct shmt_view v;
	char *out;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	ring_view_rw(ring, &v);
	assert_int_equal(v.max_threads, slots);
	for (uint32_t i = 0; i < v.max_threads; i++) {
		struct shmt_thread *t = shmt_thread_at(&v, i);

		/* pids past any pid_max: none alive */
		*t = (struct shmt_thread){ .pid = 5000000 + i / 2, .tid = i + 1, .start_time = 7,
					   .flags = i % 2 ? SHMT_THREAD_LATE : 0 };
		snprintf(t->pname, sizeof(t->pname), "p%u", i / 2);
	}
	store_release(&v.h->threads, v.max_threads);
	shmt_view_close(&v);

	assert_int_equal(run_guarded(tmp("slots.out"), tmp("slots.err"), ls), 0);
	out = slurp(tmp("slots.out"));
	snprintf(want, sizeof(want), "\"name\":\"%s\"", ring);
	assert_non_null(strstr(out, want));
	snprintf(dead, sizeof(dead), "\"producers_alive\":0,\"producers_dead\":%u", slots / 2);
	assert_non_null(strstr(strstr(out, want), dead));
	free(out);
	assert_int_equal(run_guarded(tmp("slots.out"), tmp("slots.err"), stat_), 0);
	out = slurp(tmp("slots.out"));
	assert_int_equal(count(out, "{\"pid\":"), slots / 2);
	assert_int_equal(count(out, "\"attached\":\"late\""), slots / 2);
	assert_non_null(strstr(out, "{\"pid\":5000000,\"name\":\"p0\""));
	free(out);
	assert_int_equal(run_guarded(NULL, tmp("slots.err"), rm), 0);
	{
		uint64_t dev, ino;

		assert_int_equal(shmt_ring_identity(ring, &dev, &ino), -ENOENT);
	}
	figure("2^20 thread slots, 2^19 processes", 1, 0, 0, 0, 0, 0,
	       "ls, stat and rm finish, each process counted once");
	shmtrace_ring_unlink(ring);
}

/* rm's word on the records it lost with a ring quoted the ring's name raw:
 * a name with terminal escapes reached the terminal. */
static void test_rm_lost_names_escaped(void **state)
{
	char ring[160];
	char *rm[] = { bin, "rm", "--force", ring, NULL };	/* we are its producer */

	(void)state;
	snprintf(ring, sizeof(ring), "%s\x1b]0;pwned\x07\x1b[2J", test_ring_name("rmesc"));
	small_ring(ring, 4096, 3);
	assert_int_equal(run_guarded(NULL, tmp("rmesc.err"), rm), 0);
	expect_in(tmp("rmesc.err"), "with 3 records no collector drained; unless exported");
	expect_in(tmp("rmesc.err"), "\\x1b[2J");
	expect_no_control(tmp("rmesc.err"));
	shmtrace_ring_unlink(ring);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_impossible_counters_not_counts),
		cmocka_unit_test(test_impossible_counters_through_collector),
		cmocka_unit_test(test_terminal_escapes_stripped),
		cmocka_unit_test(test_forged_head_said),
		cmocka_unit_test(test_slots_zeroed_by_a_peer_counted_torn_without_a_wait),
		cmocka_unit_test(test_head_and_tail_shifted_together_said),
		cmocka_unit_test(test_forged_head_said_by_collector),
		cmocka_unit_test(test_million_thread_slots),
		cmocka_unit_test(test_rm_lost_names_escaped),
	};

	if (cli_setup_for("hostile", true) < 0) {
		fprintf(stderr, "shmtrace or shmtrace-collector not built, or no temporary directory\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, cli_teardown);
}
