/* SPDX-License-Identifier: MIT */
/*
 * test_hostile_io.c - paths and numbers another user can plant or pass:
 * an output path that is a symlink, numbers that would wrap; and what
 * another user may read of the outputs.
 * Each case prints a FIGURE row for the fault table of `make test`.
 */
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "hostile_run.h"

/*
 * An output path that is a symbolic link (planted in a shared directory
 * by another user, where fs.protected_symlinks is off): the collector and
 * the exporter refuse it and the file it points to is untouched.
 */
static void test_output_symlink_refused(void **state)
{
	const char *ring = test_ring_name("outlink");
	char *col[] = { collector_bin, "--ring", (char *)ring, "--create", "-o", NULL, "-q", NULL };
	char *exp[] = { bin, "export", "--ring", (char *)ring, "-o", NULL, NULL };
	char *s;

	(void)state;
	put_file(tmp("secret"), "keep\n", 5);
	unlink(tmp("run.cap"));
	assert_int_equal(symlink(tmp("secret"), tmp("run.cap")), 0);
	col[5] = (char *)tmp("run.cap");
	assert_int_equal(run_guarded(NULL, tmp("col.err"), col), 1);
	expect_in(tmp("col.err"), "symbolic link");
	small_ring(ring, 4096, 10);
	exp[5] = (char *)tmp("run.cap");
	assert_int_equal(run_guarded(NULL, tmp("exp.err"), exp), 1);
	expect_in(tmp("exp.err"), "symbolic link");
	s = slurp(tmp("secret"));
	assert_string_equal(s, "keep\n");
	free(s);
	/* the other outputs of the shmtrace command: svg, and export to OTLP */
	{
		char *svg[] = { bin, "svg", "--ring", (char *)ring, "-o", (char *)tmp("run.cap"), NULL };
		char *otlp[] = { bin, "export", "--ring", (char *)ring, "--format", "otlp", "-o",
				 (char *)tmp("run.cap"), NULL };

		assert_int_equal(run_guarded(NULL, tmp("exp.err"), svg), 1);
		expect_in(tmp("exp.err"), "symbolic link");
		assert_int_equal(run_guarded(NULL, tmp("exp.err"), otlp), 1);
		expect_in(tmp("exp.err"), "symbolic link");
	}
	s = slurp(tmp("secret"));
	assert_string_equal(s, "keep\n");
	free(s);
	figure("output path a symlink to another file", 4, 0, 0, 0, 0, 0,
	       "collector, export (both formats) and svg refuse it; the target untouched");
	shmtrace_ring_unlink(ring);
	unlink(tmp("run.cap"));
}

/*
 * A FIFO at the output path: writing to it would block until a reader
 * comes (or hand the trace to whoever reads it). Refused at once, by the
 * collector and by export, without blocking (run_guarded() would fail a
 * hang), and nothing left beside it.
 */
static void test_output_fifo_refused(void **state)
{
	const char *ring = test_ring_name("outfifo");
	char *col[] = { collector_bin, "--ring", (char *)ring, "--create", "-o", NULL, "-q", NULL };
	char *exp[] = { bin, "export", "--ring", (char *)ring, "-o", NULL, NULL };
	struct stat st;

	(void)state;
	unlink(tmp("fifo.cap"));
	assert_int_equal(mkfifo(tmp("fifo.cap"), 0666), 0);
	col[5] = (char *)tmp("fifo.cap");
	assert_int_equal(run_guarded(NULL, tmp("col.err"), col), 1);
	expect_in(tmp("col.err"), "'");
	expect_in(tmp("col.err"), "is a FIFO");
	small_ring(ring, 4096, 10);
	exp[5] = (char *)tmp("fifo.cap");
	assert_int_equal(run_guarded(NULL, tmp("exp.err"), exp), 1);
	expect_in(tmp("exp.err"), "is a FIFO");
	assert_int_equal(lstat(tmp("fifo.cap"), &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	/* a good export goes through a temporary renamed into place: none left */
	exp[5] = (char *)tmp("good.json");
	assert_int_equal(run_guarded(NULL, tmp("exp.err"), exp), 0);
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "ls -A '%s' | grep -q '\\.tmp$'", tmpdir);
		assert_int_not_equal(system(cmd), 0);
	}
	figure("output path a FIFO", 2, 0, 0, 0, 0, 0, "collector and export refuse it at once");
	shmtrace_ring_unlink(ring);
	unlink(tmp("fifo.cap"));
	unlink(tmp("good.json"));
}

/*
 * An input that is not a file: a FIFO no one writes (its open() would
 * wait for a writer for good), a pipe whose writer stays open (a read
 * would wait as long, and an export reads its inputs twice, which a
 * pipe's bytes cannot be) and a directory. Every command that reads a
 * capture refuses each at once (run_guarded() fails a hang), naming the
 * path and what it is, and writes no output.
 */
static void test_input_not_a_file_refused(void **state)
{
	char fifo[512], dir[512], piped[64], out_json[512], out_svg[512];
	int p[2];

	(void)state;
	snprintf(fifo, sizeof(fifo), "%s", tmp("in.fifo"));
	snprintf(dir, sizeof(dir), "%s", tmp("in.dir"));
	snprintf(out_json, sizeof(out_json), "%s", tmp("in.json"));
	snprintf(out_svg, sizeof(out_svg), "%s", tmp("in.svg"));
	unlink(fifo);
	rmdir(dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(pipe(p), 0);
	snprintf(piped, sizeof(piped), "/dev/fd/%d", p[0]);
	{
		const char *in[][2] = { { fifo, "is a FIFO" }, { piped, "is a FIFO" },
					{ dir, "is a directory" } };

		for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
			char *cmds[][6] = {
				{ bin, "export", (char *)in[i][0], "-o", out_json, NULL },
				{ bin, "stat", (char *)in[i][0], NULL },
				{ bin, "summary", (char *)in[i][0], NULL },
				{ bin, "svg", (char *)in[i][0], "-o", out_svg, NULL },
			};

			for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
				assert_int_equal(run_guarded(NULL, tmp("in.err"), cmds[k]), 1);
				expect_in(tmp("in.err"), in[i][0]);
				expect_in(tmp("in.err"), in[i][1]);
			}
		}
	}
	assert_int_equal(access(out_json, F_OK), -1);
	assert_int_equal(access(out_svg, F_OK), -1);
	figure("input a FIFO, a pipe or a directory", 12, 0, 0, 0, 0, 0,
	       "export, stat, summary and svg refuse each at once");
	close(p[0]);
	close(p[1]);
	unlink(fifo);
	rmdir(dir);
}

/*
 * A file planted at the collector's output path for it to fill: a hard
 * link to another file (writing would change that one too), and, root
 * only, a file of another user in a directory anyone may write (what
 * fs.protected_regular refuses when it is on). Each refused at once
 * (exit 1, the reason named), the file left as it was.
 */
static void test_output_planted_file_refused(void **state)
{
	const char *ring = test_ring_name("outplant");
	char *col[] = { collector_bin, "--ring", (char *)ring, "--create", "-o", NULL, "-q", NULL };
	char victim[512], link_[512], open_dir[512], theirs[600];
	char *s;

	(void)state;
	snprintf(victim, sizeof(victim), "%s", tmp("victim"));
	snprintf(link_, sizeof(link_), "%s", tmp("linked.cap"));
	put_file(victim, "keep", 4);
	unlink(link_);
	assert_int_equal(link(victim, link_), 0);
	col[5] = link_;
	assert_int_equal(run_guarded(NULL, tmp("col.err"), col), 1);
	expect_in(tmp("col.err"), "has 1 other name (hard links): refusing to write into it");
	s = slurp(victim);
	assert_string_equal(s, "keep");
	free(s);
	unlink(link_);
	if (geteuid() == 0) {
		snprintf(open_dir, sizeof(open_dir), "%s", tmp("open"));
		snprintf(theirs, sizeof(theirs), "%s/theirs.cap", open_dir);
		assert_int_equal(mkdir(open_dir, 0700), 0);
		assert_int_equal(chmod(open_dir, 01777), 0);
		put_file(theirs, "keep", 4);
		assert_int_equal(chown(theirs, 65534, 65534), 0);
		col[5] = theirs;
		assert_int_equal(run_guarded(NULL, tmp("col.err"), col), 1);
		expect_in(tmp("col.err"), "belongs to another user (uid 65534) in a directory anyone "
			  "may write: refusing to write into it");
		s = slurp(theirs);
		assert_string_equal(s, "keep");
		free(s);
		unlink(theirs);
		rmdir(open_dir);
	}
	figure("output path a planted file (hard link; another's in /tmp)", geteuid() == 0 ? 2 : 1,
	       0, 0, 0, 0, 0, "collector refuses it, the file left as it was");
	shmtrace_ring_unlink(ring);
	unlink(victim);
}

/*
 * The collector's later parts: run.cap.1 planted as a symlink before the
 * capture rotates to it. The rotation refuses it (exit 1, the link named),
 * the target is untouched and the first part stays a whole capture.
 */
static void test_rotated_part_symlink_refused(void **state)
{
	const char *ring = test_ring_name("outpart");
	char cap[512], json[512];	/* tmp()'s buffers are reused */
	char *col[] = { collector_bin, "--ring", (char *)ring, "-o", cap, "--max-size", "1M", "-q",
			NULL };
	char *exp[] = { bin, "export", cap, "-o", json, NULL };
	struct shmtrace_ring_config c = { .capacity = 1u << 20 };
	shmtrace_t *t;
	uint32_t name;
	char *s;

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("part.cap"));
	snprintf(json, sizeof(json), "%s", tmp("part.json"));
	put_file(tmp("secret"), "keep\n", 5);
	unlink(tmp("part.cap"));
	unlink(tmp("part.cap.1"));
	assert_int_equal(symlink(tmp("secret"), tmp("part.cap.1")), 0);
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	name = shmtrace_intern(t, "s");
	/* well over 1M of capture: times and flows that do not pack small */
	for (uint64_t i = 0; i < 900000; i++)
		assert_int_equal(shmtrace_span(t, name, name, i * 7919 % 1000003 * 1000,
					       i * 7919 % 1000003 * 1000 + (i * 31 % 977), i * 2654435761u),
				 0);
	shmtrace_close(t);
	assert_int_equal(run_guarded(NULL, tmp("col.err"), col), 1);
	expect_in(tmp("col.err"), "part.cap.1' is a symbolic link");
	s = slurp(tmp("secret"));
	assert_string_equal(s, "keep\n");
	free(s);
	/* the first part is whole: it ended before the rotation failed */
	assert_int_equal(run_guarded(NULL, tmp("exp.err"), exp), 0);
	figure("rotated part path a symlink", 1, 0, 0, 0, 0, 0,
	       "the rotation refuses it; part 0 whole, the target untouched");
	shmtrace_ring_unlink(ring);
	unlink(tmp("part.cap"));
	unlink(tmp("part.cap.1"));
	unlink(tmp("part.json"));
}

/* A capture of host "vm" holding spans at 10000, 10100 ... ns. */
static void vm_capture(const char *path)
{
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .run_id = 11, .ring_capacity = 1024,
		.realtime0 = 1700000000000000000ull, .mono0 = 1000, .started_ns = 1000,
	};
	struct shmt_cap_string str[1] = { { 1, 4, "span" } };
	struct shmt_cap_end e = { .records = 8, .end_ns = 90000 };
	struct shmt_record r[8];
	msgpack_sbuffer b;

	snprintf(h.host, sizeof(h.host), "vm");
	snprintf(h.ring, sizeof(h.ring), "vmring");
	for (size_t i = 0; i < 8; i++)
		r[i] = (struct shmt_record){ .ts = 10000 + i * 100, .dur = 50, .pid = 100, .tid = 100,
					     .name = 1, .cat = 1, .commit = SHMTRACE_KIND_SPAN };
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, str, 1), 0);
	assert_int_equal(shmt_cap_put_records(&b, 0, r, 8), 0);
	assert_int_equal(shmt_cap_put_end(&b, &e), 0);
	put_file(path, b.data, b.size);
	msgpack_sbuffer_destroy(&b);
}

/*
 * --clock-offset moving a host's records before time 0 wrapped them to
 * ~1.8e16 us without a word. An offset that would wrap any record's time
 * is a usage error naming it, and writes nothing; the largest one that
 * does not (the earliest record to 0) is taken.
 */
static void clock_offset_that_would_wrap(void)
{
	const char *bad[] = { "vm=-3000000000000", "vm=-10001", "vm=9223372036854775807",
			      "vm=-9223372036854775809", "vm=1k" };
	char cap[512], json[512];	/* tmp()'s buffers are reused */
	char *ok[] = { bin, "export", cap, "--clock-offset", "vm=-10000", "-o", json, NULL };
	char *s;

	snprintf(cap, sizeof(cap), "%s", tmp("vm.cap"));
	snprintf(json, sizeof(json), "%s", tmp("vm.json"));
	vm_capture(cap);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[] = { bin, "export", cap, "--clock-offset", (char *)bad[i], "-o", json, NULL };
		char *otlp[] = { bin, "export", cap, "--format", "otlp", "--clock-offset", (char *)bad[i],
				 "-o", json, NULL };

		unlink(json);
		assert_int_equal(run_guarded(NULL, tmp("wrap.err"), argv), 2);
		expect_in(tmp("wrap.err"), "--clock-offset");
		expect_in(tmp("wrap.err"), bad[i]);
		assert_int_equal(run_guarded(NULL, tmp("wrap.err"), otlp), 2);
		expect_in(tmp("wrap.err"), "--clock-offset");
		assert_int_equal(access(json, F_OK), -1);
	}
	assert_int_equal(run_guarded(NULL, tmp("wrap.err"), ok), 0);
	s = slurp(json);
	assert_non_null(strstr(s, "\"ts\":0.000"));
	assert_null(strstr(s, "\"ts\":18"));
	free(s);
	figure("--clock-offset that would wrap a time", 5, 0, 0, 0, 0, 0,
	       "usage error naming it; nothing written; the edge taken");
	unlink(tmp("vm.cap"));
	unlink(tmp("vm.json"));
}

/* The permission bits of path. */
static unsigned perm_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_mode & 0777;
}

/*
 * Outputs are never readable by anyone who could not read what they were
 * made of, whatever the umask lets: the capture of a private ring (0600)
 * is 0600, even written over a capture of ours that was 0644, and so are
 * its export and a snapshot of the ring; a ring its group may read makes
 * a capture its group may read; a capture others may read, an export
 * others may read (0666 less the umask).
 */
static void test_outputs_no_more_readable_than_their_inputs(void **state)
{
	const char *ring = test_ring_name("private");
	char cap[512], json[512], snap[512];
	char *exp[] = { bin, "export", cap, "-o", json, NULL };
	char *snapshot[] = { bin, "snapshot", (char *)ring, "-o", snap, NULL };
	struct shmtrace_ring_config c = { .capacity = 4096, .perm = 0640 };
	mode_t old = umask(022);
	pid_t col;
	int st;

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("private.cap"));
	snprintf(json, sizeof(json), "%s", tmp("private.json"));
	snprintf(snap, sizeof(snap), "%s", tmp("private-snap.cap"));
	put_file(cap, "old", 3);
	assert_int_equal(chmod(cap, 0644), 0);
	small_ring(ring, 4096, 10);
	assert_int_equal(perm_of(cap), 0644);
	col = cli_collector(ring, cap);
	kill(col, SIGTERM);
	assert_int_equal(waitpid(col, &st, 0), col);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(perm_of(cap), 0600);
	assert_int_equal(run_guarded(NULL, tmp("private.err"), exp), 0);
	assert_int_equal(perm_of(json), 0600);
	assert_int_equal(run_guarded(NULL, tmp("private.err"), snapshot), 0);
	assert_int_equal(perm_of(snap), 0600);
	/* the export follows its input: a capture others may read */
	assert_int_equal(chmod(cap, 0644), 0);
	assert_int_equal(run_guarded(NULL, tmp("private.err"), exp), 0);
	assert_int_equal(perm_of(json), 0644);
	/* a ring its group may read: so may its group the capture */
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	unlink(cap);
	col = cli_collector(ring, cap);
	kill(col, SIGTERM);
	assert_int_equal(waitpid(col, &st, 0), col);
	assert_int_equal(perm_of(cap), 0640);
	figure("outputs of a private ring, the umask letting all read", 3, 0, 0, 0, 0, 0,
	       "capture, export and snapshot 0600: no more readable than the ring");
	umask(old);
	unlink(cap);
	unlink(json);
	unlink(snap);
	shmtrace_ring_unlink(ring);
}

/* Numbers that would wrap or make no sense are usage errors (exit 2) that
 * name the option, never silently something else. */
static void test_numbers_that_would_wrap(void **state)
{
	const char *ring = test_ring_name("wrap");
	const char *bad[][2] = {
		{ "--strings", "18014398509482008k" },
		{ "--threads", "18014398509481985k" },
		{ "--max-size", "17179869185G" },
		{ "--max-size", "-1" },
		{ "--capacity", "1" },
		{ "--capacity", "-4096" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[] = { collector_bin, "--ring", (char *)ring, "--create", "-o", (char *)tmp("w.cap"),
				 (char *)bad[i][0], (char *)bad[i][1], NULL };

		assert_int_equal(run_guarded(NULL, tmp("wrap.err"), argv), 2);
		expect_in(tmp("wrap.err"), bad[i][0]);
	}
	assert_int_equal(access("/dev/shm/", F_OK), 0);
	{
		uint64_t dev, ino;

		assert_int_equal(shmt_ring_identity(ring, &dev, &ino), -ENOENT);
	}
	figure("numbers that would wrap, on the command line", 6, 0, 0, 0, 0, 0,
	       "usage error naming the option; nothing created");
	clock_offset_that_would_wrap();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_output_symlink_refused),
		cmocka_unit_test(test_output_fifo_refused),
		cmocka_unit_test(test_input_not_a_file_refused),
		cmocka_unit_test(test_output_planted_file_refused),
		cmocka_unit_test(test_rotated_part_symlink_refused),
		cmocka_unit_test(test_outputs_no_more_readable_than_their_inputs),
		cmocka_unit_test(test_numbers_that_would_wrap),
	};

	if (cli_setup_for("hostile", true) < 0) {
		fprintf(stderr, "shmtrace or shmtrace-collector not built, or no temporary directory\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, cli_teardown);
}
