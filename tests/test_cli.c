/* SPDX-License-Identifier: MIT */
/*
 * test_cli.c - the housekeeping commands and what a new user meets, run as
 * binaries: `shmtrace ls` and `rm` on rings in use and not, `stat` of a
 * name that is neither ring nor capture, the collector's option checks,
 * a capture exported while its collector writes it, --from past the end
 * (export and svg), outputs and options an export refuses, a ring's name
 * given for a file, the option errors of the subcommands (cli_getopt()),
 * and a --help that cannot be written.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cli_run.h"
#include "cli.h"

static void stop(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	assert_int_equal(waitpid(pid, &st, 0), pid);
}

static void spans(const char *ring, int n)
{
	shmtrace_t *t;

	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (int i = 0; i < n; i++) {
		uint64_t t0 = shmtrace_now();

		assert_int_equal(shmtrace_span(t, shmtrace_intern(t, "c"), shmtrace_intern(t, "s"),
					       t0, t0 + 1000, 0), 0);
	}
	assert_int_equal(shmtrace_flush(t), 0);
	shmtrace_close(t);
}

/* A producer that records on ring, then stays alive until its pipe is
 * closed (fd returned), or exits at once (fd -1). */
static pid_t producer(const char *ring, bool stay, int *fd)
{
	int p[2], go[2];
	char b;
	pid_t pid;

	/* close-on-exec: a collector started later must not hold it open */
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		shmtrace_t *t;

		close(p[1]);
		close(go[0]);
		if (shmtrace_open(ring, &t) < 0 || shmtrace_span(t, 1, 1, 1, 2, 0) < 0 ||
		    shmtrace_flush(t) < 0)
			_exit(3);
		if (write(go[1], "r", 1) != 1)
			_exit(3);
		if (stay)
			(void)read(p[0], &b, 1);
		_exit(0);
	}
	close(p[0]);
	close(go[1]);
	assert_int_equal(read(go[0], &b, 1), 1);
	close(go[0]);
	if (!stay) {
		int st;

		close(p[1]);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		p[1] = -1;
	}
	*fd = p[1];
	return pid;
}

/* The JSON object that ls printed for ring name (a copy), or NULL. */
static char *ls_entry(const char *json, const char *name)
{
	char key[256];
	const char *p, *e;

	snprintf(key, sizeof(key), "{\"name\":\"%s\",", name);
	p = strstr(json, key);
	if (!p)
		return NULL;
	e = strchr(p, '}');
	assert_non_null(e);
	return strndup(p, (size_t)(e - p + 1));
}

static bool ring_exists(const char *name)
{
	char path[300];
	struct stat st;

	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	return lstat(path, &st) == 0;
}

/* The rings of test_ls_and_rm, one per state ls reports. */
struct ls_rings {
	const char *idle, *live, *dead, *drained, *junk;
};

/* Creates the rings (idle, live, dead, drained) and junk, a file in
 * /dev/shm that is not a ring; its path goes in path. */
static void ls_create_rings(const struct ls_rings *r, char *path, size_t size)
{
	char junkbuf[8192];
	int fd;

	assert_int_equal(shmtrace_ring_create(r->idle, NULL), 0);
	assert_int_equal(shmtrace_ring_create(r->live, NULL), 0);
	assert_int_equal(shmtrace_ring_create(r->dead, NULL), 0);
	assert_int_equal(shmtrace_ring_create(r->drained, NULL), 0);
	snprintf(path, size, "/dev/shm/%s", r->junk);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	memset(junkbuf, 'x', sizeof(junkbuf));
	assert_int_equal(write(fd, junkbuf, sizeof(junkbuf)), (ssize_t)sizeof(junkbuf));
	close(fd);
}

/* ls --json: each ring's entry says its state; junk is not listed. */
static void ls_check_json(const struct ls_rings *r, pid_t col)
{
	char *ls_argv[] = { bin, "ls", "--json", NULL };
	char want[256], *out, *e;

	assert_int_equal(run(tmp("ls.json"), NULL, ls_argv), 0);
	out = slurp(tmp("ls.json"));
	assert_true(out[0] == '[');
	assert_null(ls_entry(out, r->junk));
	e = ls_entry(out, r->idle);
	assert_non_null(e);
	assert_non_null(strstr(e, "\"perm\":\"0600\""));
	assert_non_null(strstr(e, "\"mode\":\"discard\""));
	assert_non_null(strstr(e, "\"capacity\":262144,"));
	assert_non_null(strstr(e, "\"producers_alive\":0,\"producers_dead\":0,"));
	assert_non_null(strstr(e, "\"collector\":false"));
	free(e);
	e = ls_entry(out, r->live);
	assert_non_null(e);
	assert_non_null(strstr(e, "\"fill\":1,"));
	assert_non_null(strstr(e, "\"producers_alive\":1,\"producers_dead\":0,"));
	free(e);
	e = ls_entry(out, r->dead);
	assert_non_null(e);
	assert_non_null(strstr(e, "\"producers_alive\":0,\"producers_dead\":1,"));
	free(e);
	e = ls_entry(out, r->drained);
	assert_non_null(e);
	snprintf(want, sizeof(want), "\"collector\":true,\"collector_pid\":%d,", (int)col);
	assert_non_null(strstr(e, want));
	free(e);
	free(out);
}

/* ls as text: a header, the live ring, not junk. */
static void ls_check_text(const struct ls_rings *r)
{
	char *text_argv[] = { bin, "ls", NULL };
	char *out;

	assert_int_equal(run(tmp("ls.txt"), NULL, text_argv), 0);
	out = slurp(tmp("ls.txt"));
	assert_true(!strncmp(out, "NAME ", 5));
	assert_non_null(strstr(out, r->live));
	assert_null(strstr(out, r->junk));
	free(out);
}

/* rm: refuses rings in use (lp is the live ring's producer) and junk,
 * removes the unused ones saying what was lost, then --force. */
static void rm_check(const struct ls_rings *r, pid_t lp)
{
	char *rm_live[] = { bin, "rm", (char *)r->live, NULL };
	char *rm_drained[] = { bin, "rm", (char *)r->drained, NULL };
	char *rm_junk[] = { bin, "rm", (char *)r->junk, NULL };
	char *rm_two[] = { bin, "rm", (char *)r->idle, (char *)r->dead, NULL };
	char *rm_force[] = { bin, "rm", "--force", (char *)r->live, (char *)r->drained, NULL };
	char *rm_gone[] = { bin, "rm", (char *)r->idle, NULL };
	char want[256], lost[600];

	/* in use: refused, and said why */
	snprintf(want, sizeof(want), "1 live producer (pid %d)", (int)lp);
	run_says(1, rm_live, want, NULL);
	assert_true(ring_exists(r->live));
	run_says(1, rm_drained, "being drained by a collector", NULL);
	assert_true(ring_exists(r->drained));
	/* not a ring: never removed */
	run_says(1, rm_junk, "not a shmtrace ring", NULL);
	assert_true(ring_exists(r->junk));
	/* unused, whatever was left in them: what was, said gone unless exported */
	snprintf(lost, sizeof(lost), "shmtrace rm: removed ring '%s' with 1 record no collector "
		 "drained; unless exported (shmtrace export --ring %s), it is gone\n", r->dead,
		 r->dead);
	snprintf(want, sizeof(want), "'%s'", r->idle);
	run_says(0, rm_two, lost, want);
	assert_false(ring_exists(r->idle));
	assert_false(ring_exists(r->dead));
	run_says(1, rm_gone, "no ring named", NULL);
	/* live: its producer's record said lost; drained: its collector took all */
	snprintf(lost, sizeof(lost), "shmtrace rm: removed ring '%s' with 1 record", r->live);
	snprintf(want, sizeof(want), "'%s'", r->drained);
	run_says(0, rm_force, lost, want);
	assert_false(ring_exists(r->live));
	assert_false(ring_exists(r->drained));
}

static void test_ls_and_rm(void **state)
{
	struct ls_rings r;
	char path[300];
	pid_t lp, col;
	int fd, lfd;

	(void)state;
	r.idle = test_ring_name("idle");
	r.live = test_ring_name("live");
	r.dead = test_ring_name("dead");
	r.drained = test_ring_name("drained");
	r.junk = test_ring_name("junk");
	ls_create_rings(&r, path, sizeof(path));
	lp = producer(r.live, true, &lfd);
	producer(r.dead, false, &fd);
	col = cli_collector(r.drained, tmp("drained.cap"));

	ls_check_json(&r, col);
	ls_check_text(&r);
	rm_check(&r, lp);

	close(lfd);
	assert_int_equal(waitpid(lp, NULL, 0), lp);
	stop(col);
	unlink(path);
}

/* rm --force of a ring whose records no collector drained, published and
 * staged in a live thread's block: removed, and the records said lost. */
static void test_rm_says_lost(void **state)
{
	const char *ring = test_ring_name("lost");
	char *rm_force[] = { bin, "rm", "--force", (char *)ring, NULL };
	char want[600];
	shmtrace_t *t;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	spans(ring, 5);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(shmtrace_span(t, 1, 1, 1, 2, 0), 0);
	snprintf(want, sizeof(want), "shmtrace rm: removed ring '%s' with 8 records no collector "
		 "drained; unless exported (shmtrace export --ring %s), they are gone\n", ring,
		 ring);
	run_says(0, rm_force, want, NULL);
	assert_false(ring_exists(ring));
	shmtrace_close(t);
}

/*
 * Any user who can open a ring, read-only, can take an flock on it, an
 * exclusive one too. Such a lock made ls name its holder as the ring's
 * collector, and rm refuse the ring, and rm --force say nothing of the
 * records lost. A lock counts only where its holder is the collector the
 * header records: a reader's, shared or exclusive, is none (the real
 * collector is still told, test_ls_and_rm).
 */
static void test_a_readers_lock_is_no_collector(void **state)
{
	static const int ops[] = { LOCK_SH, LOCK_EX };
	const char *ring = test_ring_name("flocked");
	char *ls_argv[] = { bin, "ls", "--json", NULL };
	char *rm_plain[] = { bin, "rm", (char *)ring, NULL };
	char *rm_force[] = { bin, "rm", "--force", (char *)ring, NULL };
	char path[300], want[600], *out, *e;

	(void)state;
	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	snprintf(want, sizeof(want), "shmtrace rm: removed ring '%s' with 1 record no collector "
		 "drained; unless exported", ring);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		int fd;

		shmtrace_ring_unlink(ring);
		assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
		producer(ring, false, &fd);	/* one record, its producer gone */
		fd = open(path, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(flock(fd, ops[i] | LOCK_NB), 0);

		assert_int_equal(run(tmp("flocked.json"), NULL, ls_argv), 0);
		out = slurp(tmp("flocked.json"));
		e = ls_entry(out, ring);
		assert_non_null(e);
		assert_non_null(strstr(e, "\"collector\":false,\"collector_pid\":0,"));
		free(e);
		free(out);
		/* shared: plain rm removes it; exclusive: --force says the loss */
		run_says(0, ops[i] == LOCK_SH ? rm_plain : rm_force, want, NULL);
		assert_false(ring_exists(ring));
		close(fd);
	}
}

/* Writes n bytes of what at offset off of ring's file, as a writer of the
 * ring (or a newer shmtrace) could. */
static void poke(const char *ring, size_t off, const void *what, size_t n)
{
	char path[300];
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, what, n, (off_t)off), (ssize_t)n);
	close(fd);
}

/*
 * A ring of a format this shmtrace does not read (3.1, which says readers
 * of 3 at the oldest) and one that fails validation (its header's size
 * not its file's) were left out of ls, and rm refused them even with
 * --force: only rm(1) removed them. ls lists each with what is wrong with
 * it; rm says why it refuses and that --force removes it; rm --force
 * removes it, saying so, but never through a symbolic link.
 */
static void test_unreadable_rings_listed_and_removed(void **state)
{
	const char *newer = test_ring_name("newer"), *damaged = test_ring_name("damaged");
	const char *link_name = test_ring_name("damlink");
	const uint16_t v31[3] = { 3, 1, 3 };	/* major, minor, compat */
	const uint64_t size = 12345;
	char *ls_json[] = { bin, "ls", "--json", NULL };
	char *ls_text[] = { bin, "ls", NULL };
	char *rm_plain[] = { bin, "rm", (char *)newer, (char *)damaged, NULL };
	char *rm_link[] = { bin, "rm", "--force", (char *)link_name, NULL };
	char *rm_force[] = { bin, "rm", "--force", (char *)newer, (char *)damaged, NULL };
	char want[400], lpath[300], target[300], *out, *e;

	(void)state;
	shmtrace_ring_unlink(newer);
	shmtrace_ring_unlink(damaged);
	assert_int_equal(shmtrace_ring_create(newer, NULL), 0);
	assert_int_equal(shmtrace_ring_create(damaged, NULL), 0);
	poke(newer, offsetof(struct shmt_header, major), v31, sizeof(v31));
	poke(damaged, offsetof(struct shmt_header, segment_size), &size, sizeof(size));

	assert_int_equal(run(tmp("unread.json"), NULL, ls_json), 0);
	out = slurp(tmp("unread.json"));
	e = ls_entry(out, newer);
	assert_non_null(e);
	assert_non_null(strstr(e, "\"unreadable\":\"newer_format\","
				  "\"why\":\"format 3.1, newer than this shmtrace reads\"}"));
	free(e);
	e = ls_entry(out, damaged);
	assert_non_null(e);
	assert_non_null(strstr(e, "\"unreadable\":\"damaged\",\"why\":\"damaged: header says "
				  "12345 bytes"));
	free(e);
	free(out);
	assert_int_equal(run(tmp("unread.txt"), NULL, ls_text), 0);
	out = slurp(tmp("unread.txt"));
	e = strstr(out, newer);
	assert_non_null(e);
	assert_non_null(strstr(e, "format 3.1, newer than this shmtrace reads\n"));
	e = strstr(out, damaged);
	assert_non_null(e);
	assert_non_null(strstr(e, "damaged: header says 12345 bytes"));
	free(out);

	/* plain rm: refused, and said why and how */
	assert_int_equal(run(NULL, tmp("unread.err"), rm_plain), 1);
	snprintf(want, sizeof(want), "shmtrace rm: ring '%s': format 3.1, newer than this shmtrace "
		 "reads; not removed (--force removes it)", newer);
	expect_in(tmp("unread.err"), want);
	snprintf(want, sizeof(want), "shmtrace rm: ring '%s': damaged: header says 12345 bytes",
		 damaged);
	expect_in(tmp("unread.err"), want);
	expect_in(tmp("unread.err"), "; not removed (--force removes it)");
	assert_true(ring_exists(newer));
	assert_true(ring_exists(damaged));

	/* a symbolic link to the damaged ring: not followed, nothing removed */
	snprintf(lpath, sizeof(lpath), "/dev/shm/%s", link_name);
	snprintf(target, sizeof(target), "/dev/shm/%s", damaged);
	unlink(lpath);
	assert_int_equal(symlink(target, lpath), 0);
	run_says(1, rm_link, "is a symbolic link", NULL);
	assert_true(ring_exists(link_name));
	assert_true(ring_exists(damaged));
	unlink(lpath);

	/* --force: both removed, each said with what was wrong */
	assert_int_equal(run(NULL, tmp("unread.err"), rm_force), 0);
	snprintf(want, sizeof(want), "shmtrace rm: removed ring '%s' (format 3.1, newer than this "
		 "shmtrace reads)", newer);
	expect_in(tmp("unread.err"), want);
	snprintf(want, sizeof(want), "shmtrace rm: removed ring '%s' (damaged: header says 12345 "
		 "bytes", damaged);
	expect_in(tmp("unread.err"), want);
	assert_false(ring_exists(newer));
	assert_false(ring_exists(damaged));
}

static void test_stat_names_missing_once(void **state)
{
	const char *name = test_ring_name("nope");
	char *argv[] = { bin, "stat", (char *)name, NULL };
	char *pargv[] = { bin, "stat", (char *)tmp("nope.cap"), NULL };
	char *out;

	(void)state;
	out = run_stderr("stat.err", 1, argv);
	assert_int_equal(count(out, name), 1);
	assert_non_null(strstr(out, "no ring of that name in /dev/shm, nor a capture file"));
	free(out);
	/* a path is only ever a capture */
	out = run_stderr("stat.err", 1, pargv);
	assert_int_equal(count(out, "nope.cap"), 1);
	assert_non_null(strstr(out, "no such capture file"));
	free(out);
}

/* stat of a name run in dir: its exit status, stderr into err. */
static int stat_in(const char *dir, const char *name, const char *err)
{
	char exe[4096];
	int st;
	pid_t pid;

	assert_non_null(realpath(bin, exe));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int fo = open("/dev/null", O_WRONLY);

		if (fe < 0 || fo < 0 || dup2(fe, 2) < 0 || dup2(fo, 1) < 0 || chdir(dir) < 0)
			_exit(126);
		execl(exe, exe, "stat", name, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * A ring's name given where a capture file is read (summary, export) and
 * no such file: the error says --ring reads the ring. A name that is a
 * ring and a file in the working directory: stat shows the ring and says
 * how to reach the file.
 */
static void test_a_ring_name_for_a_file_is_pointed_at_the_ring(void **state)
{
	const char *name = test_ring_name("both");
	char *summary[] = { bin, "summary", (char *)name, NULL };
	char *exp[] = { bin, "export", (char *)name, "-o", (char *)tmp("both.json"), NULL };
	char file[512];
	FILE *f;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	run_says(1, summary, "--ring NAME reads it", NULL);
	run_says(1, exp, "--ring NAME reads it", NULL);
	assert_int_equal(stat_in(tmpdir, name, tmp("both.err")), 0);
	expect_not_in(tmp("both.err"), "a file here");
	snprintf(file, sizeof(file), "%s/%s", tmpdir, name);
	f = fopen(file, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(stat_in(tmpdir, name, tmp("both.err")), 0);
	expect_in(tmp("both.err"), "names a ring in /dev/shm and a file here");
	unlink(file);
	shmtrace_ring_unlink(name);
}

static void test_collector_option_checks(void **state)
{
	const char *name = test_ring_name("opts");
	char *bad_fd[] = { collector_bin, "--ring", (char *)name, "--output", (char *)tmp("o.cap"),
			   "--ready-fd", "57", NULL };
	char *keep[] = { collector_bin, "--ring", (char *)name, "--output", (char *)tmp("o.cap"),
			 "--keep-ring", NULL };

	char *flight[] = { collector_bin, "--ring", (char *)name, "--flight-recorder",
			   "--snapshot-dir", (char *)tmpdir, NULL, NULL, NULL };
	const char *capture_only[][2] = {
		{ "--max-size", "1M" }, { "--linger", "3" },
		{ "--otlp-endpoint", "http://127.0.0.1:9" }, { "--write-engine", "pwrite" },
	};

	(void)state;
	/* no ring either: a bad descriptor must be found first, as a usage error */
	run_says(2, bad_fd, "--ready-fd 57: not an open file descriptor", NULL);
	run_says(1, keep, "warning: --keep-ring has no effect without --create", NULL);
	/* a flight recorder writes no capture: a capture's options are refused,
	 * never ignored */
	for (size_t i = 0; i < sizeof(capture_only) / sizeof(capture_only[0]); i++) {
		flight[6] = (char *)capture_only[i][0];
		flight[7] = (char *)capture_only[i][1];
		run_says(2, flight, "--flight-recorder writes none", NULL);
	}
}

/*
 * A collector asked to make its ring and stream it, with a stream option
 * out of range: a usage error before the ring is touched. The ring the
 * producers use (another configuration, which --create would replace)
 * stays as it was, and no capture is begun.
 */
static void test_collector_stream_usage_error_leaves_the_ring(void **state)
{
	const char *name = test_ring_name("keepring");
	struct shmtrace_ring_config c = { .capacity = 4096 };
	char *argv[] = { collector_bin, "--ring", (char *)name, "--create", "--capacity", "8192",
			 "--output", (char *)tmp("keep.cap"), "--otlp-endpoint", "http://127.0.0.1:9",
			 "--otlp-hold", "5000", NULL };
	struct shmt_view v;
	char err[256];
	uint64_t id;

	(void)state;
	shmtrace_ring_unlink(name);
	unlink(tmp("keep.cap"));
	assert_int_equal(shmtrace_ring_create(name, &c), 0);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
	id = shmt_ring_id(&v);
	shmt_view_close(&v);
	run_says(2, argv, "--otlp-hold", NULL);
	assert_int_equal(shmt_view_open(name, 0, &v, err, sizeof(err)), 0);
	assert_int_equal(shmt_ring_id(&v), id);
	assert_int_equal(v.capacity, 4096);
	assert_int_equal(load_relaxed(&v.h->retired), 0);
	shmt_view_close(&v);
	assert_int_equal(access(tmp("keep.cap"), F_OK), -1);
	assert_int_equal(access(tmp("keep.cap.replaced"), F_OK), -1);
	shmtrace_ring_unlink(name);
}

/*
 * An output that is one of the inputs, under its name however spelled, is
 * refused before anything is read: written, it would have replaced the
 * capture, and so is it while the file has a second name (a hard link).
 * That other name is not: the output replaces that name only, and the
 * input keeps its file. A format the option does not apply
 * to is refused too, never ignored, and so is an output with an empty
 * name, before the input is read rather than when the output is renamed
 * into place at the end.
 */
static void test_export_refuses_what_it_would_do_wrong(void **state)
{
	char cap[512], alias[512], own[512], pf[512], js[512], missing[512], *same, *before;
	char *exp[] = { bin, "export", cap, "-o", alias, NULL };
	char *self[] = { bin, "export", cap, "-o", own, NULL };
	char *svg[] = { bin, "svg", cap, "-o", cap, NULL };
	char *split[] = { bin, "export", cap, "-o", pf, "--format", "perfetto", "--split", "1s",
			  NULL };
	char *batch[] = { bin, "export", cap, "-o", js, "--batch-size", "1M", NULL };
	char *retries[] = { bin, "export", cap, "-o", js, "--format", "perfetto", "--retries", "3",
			    NULL };
	char *ftp[] = { bin, "export", missing, "--format", "otlp", "--otlp-endpoint", "ftp://x",
			NULL };
	FILE *f;

	(void)state;
	/* tmp() has a few buffers only: a path kept past other calls is copied */
	snprintf(cap, sizeof(cap), "%s", tmp("in.cap"));
	snprintf(pf, sizeof(pf), "%s", tmp("s.pftrace"));
	snprintf(js, sizeof(js), "%s", tmp("b.json"));
	snprintf(missing, sizeof(missing), "%s", tmp("missing.cap"));
	f = fopen(cap, "w");
	assert_non_null(f);
	fputs("not replaced", f);
	fclose(f);
	before = slurp(cap);
	/* the same name by another path */
	snprintf(alias, sizeof(alias), "%s/./in.cap", tmpdir);
	snprintf(own, sizeof(own), "%s", alias);
	run_says(2, exp, "is the input", NULL);
	run_says(2, svg, "would be replaced", NULL);
	free(before);
	/* a hard link's other name: the export replaces that name with the
	 * JSON, and the capture keeps its file under its own */
	{
		static const struct shmt_cap_string str[] = { { 1, 1, "c" }, { 2, 4, "work" } };
		const struct shmt_thread th = { .pid = 100, .tid = 100, .start_time = 5 };
		const struct shmt_record r = { .ts = 1000, .dur = 10, .pid = 100, .tid = 100,
					       .name = 2, .cat = 1, .commit = SHMTRACE_KIND_SPAN };
		struct shmt_cap_reader *rd;
		char err[256];

		write_capture(cap, 7, str, 2, &th, 1, &r, 1);
		snprintf(alias, sizeof(alias), "%s", tmp("in-link.cap"));
		unlink(alias);
		assert_int_equal(link(cap, alias), 0);
		/* the file has two names now: its own, however spelled, is
		 * still refused */
		run_says(2, self, "is the input", NULL);
		run_says(0, exp, NULL, "is the input");
		same = slurp(alias);
		assert_non_null(strstr(same, "traceEvents"));
		free(same);
		assert_int_equal(shmt_cap_open(cap, &rd, err, sizeof(err)), 0);
		shmt_cap_close(rd);
		unlink(alias);
	}
	/* a bad endpoint is a usage error before any input is read (this
	 * one is missing: read first, it would have been exit 1) */
	run_says(2, ftp, "only http:// endpoints", "No such file");
	run_says(2, split, "not with --format perfetto", NULL);
	run_says(2, batch, "need --format otlp", NULL);
	run_says(2, retries, "need --format otlp", NULL);
	{
		char *empty[] = { bin, "export", missing, "-o", "", NULL };
		char *empty_otlp[] = { bin, "export", missing, "--format", "otlp", "-o", "", NULL };
		char *empty_svg[] = { bin, "svg", missing, "-o", "", NULL };
		char *empty_snap[] = { bin, "snapshot", "shmt-no-such-ring", "-o", "", NULL };

		run_says(2, empty, "name is empty", "No such file");
		run_says(2, empty_otlp, "name is empty", "No such file");
		run_says(2, empty_svg, "name is empty", "No such file");
		run_says(2, empty_snap, "name is empty", "no ring");
	}
}

/* A capture whose collector is still running ends without its END frame:
 * the exporter says a collector is writing it, not that it was cut. */
static void test_export_capture_being_written(void **state)
{
	const char *name = test_ring_name("writing");
	const char *cap = tmp("writing.cap");
	char *argv[] = { bin, "export", (char *)cap, "-o", (char *)tmp("w.json"), NULL };
	char want[96], ev[sizeof(struct inotify_event) + 256];
	struct stat st;
	pid_t col;
	int in;

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	col = cli_collector(name, cap);
	in = inotify_init1(IN_CLOEXEC);
	assert_true(in >= 0);
	assert_true(inotify_add_watch(in, cap, IN_MODIFY) >= 0);
	spans(name, 100);
	/* the collector writes what it drained within its 5 ms poll */
	assert_true(read(in, ev, sizeof(ev)) > 0);
	close(in);
	assert_int_equal(stat(cap, &st), 0);
	assert_true(st.st_size > 0);
	snprintf(want, sizeof(want), "still being written by shmtrace-collector (pid %d)", (int)col);
	run_says(0, argv, want, "cut short");
	stop(col);
	/* stopped, it is whole: nothing to say */
	run_says(0, argv, NULL, "being written");
	shmtrace_ring_unlink(name);
}

static void test_export_from_past_end(void **state)
{
	const char *name = test_ring_name("from");
	char *past[] = { bin, "export", "--ring", (char *)name, "-o", (char *)tmp("f.json"),
			 "--from", "100s", NULL };
	char *inside[] = { bin, "export", "--ring", (char *)name, "-o", (char *)tmp("f.json"),
			   "--from", "0s", NULL };
	char *svg_past[] = { bin, "svg", "--ring", (char *)name, "-o", (char *)tmp("f.svg"),
			     "--from", "100s", NULL };
	char *svg_inside[] = { bin, "svg", "--ring", (char *)name, "-o", (char *)tmp("f.svg"),
			       "--from", "0s", NULL };

	(void)state;
	assert_int_equal(shmtrace_ring_create(name, NULL), 0);
	spans(name, 10);
	run_says(0, past, "--from 100.000000 s is past the end of the trace", NULL);
	run_says(0, inside, NULL, "past the end");
	/* the SVG of such a window is empty: said as the export says it */
	run_says(0, svg_past, "--from 100.000000 s is past the end of the trace", NULL);
	run_says(0, svg_inside, NULL, "past the end");
	shmtrace_ring_unlink(name);
}

/* The option errors and --help of ls, rm, stat and summary, word for word;
 * help COMMAND and COMMAND --version. */
static void test_option_messages(void **state)
{
	char *ls_bad[] = { bin, "ls", "--bogus", NULL };
	char *ls_arg[] = { bin, "ls", "--json=1", NULL };
	char *rm_bad[] = { bin, "rm", "-q", "x", NULL };
	char *stat_bad[] = { bin, "stat", "-x", NULL };
	char *sum_noarg[] = { bin, "summary", "--ring", NULL };
	char *sum_short[] = { bin, "summary", "-r", NULL };
	char *stat_help[] = { bin, "stat", "--json", "-h", NULL };
	char *rm_first[] = { bin, "rm", "-qf", "x", NULL };
	char *rm_last[] = { bin, "rm", "-fq", "x", NULL };
	char *rm_after[] = { bin, "rm", "--force", "-qf", "x", NULL };
	char *help_stat[] = { bin, "help", "stat", NULL };
	char *ls_version[] = { bin, "ls", "--version", NULL };
	struct stat st;

	(void)state;
	run_says(2, ls_bad, "shmtrace ls: unknown option '--bogus'\nTry 'shmtrace ls --help'.\n",
		 NULL);
	run_says(2, ls_arg, "shmtrace ls: unknown option '--json=1'\n", NULL);
	run_says(2, rm_bad, "shmtrace rm: unknown option '-q'\nTry 'shmtrace rm --help'.\n", NULL);
	run_says(2, stat_bad, "shmtrace stat: unknown option '-x'\n", NULL);
	run_says(2, sum_noarg, "shmtrace summary: option '--ring' needs an argument\n"
		 "Try 'shmtrace summary --help'.\n", NULL);
	run_says(2, sum_short, "shmtrace summary: option '-r' needs an argument\n", NULL);
	assert_int_equal(run(tmp("help.out"), tmp("help.err"), stat_help), 0);
	expect_in(tmp("help.out"), "Usage: shmtrace stat NAME|CAPTURE [--json]\n");
	assert_int_equal(stat(tmp("help.err"), &st), 0);
	assert_int_equal(st.st_size, 0);
	/* a bad letter inside a group is named, not the word before it */
	run_says(2, rm_first, "shmtrace rm: unknown option '-q'\n", NULL);
	run_says(2, rm_last, "shmtrace rm: unknown option '-q'\n", NULL);
	run_says(2, rm_after, "shmtrace rm: unknown option '-q'\n", NULL);
	/* help COMMAND is COMMAND --help; every command has --version */
	assert_int_equal(run(tmp("help.out"), NULL, help_stat), 0);
	expect_in(tmp("help.out"), "Usage: shmtrace stat NAME|CAPTURE [--json]\n");
	assert_int_equal(run(tmp("version.out"), NULL, ls_version), 0);
	expect_in(tmp("version.out"), "shmtrace " SHMTRACE_VERSION "\n");
}

/*
 * --help and --version of both programs, and a subcommand's --help, into
 * a stdout that cannot be written (a full disk): status 1 and the reason,
 * as a command that writes data says it; they exited 0, the text lost.
 */
static void test_help_into_a_full_disk_fails(void **state)
{
	static const struct {
		const char *args[3];
		const char *said;
	} cases[] = {
		{ { "--help" }, "shmtrace: writing output: No space left on device\n" },
		{ { "--version" }, "shmtrace: writing output: No space left on device\n" },
		{ { "export", "--help" }, "shmtrace export: writing output: No space left on device\n" },
		{ { "help", "stat" }, "shmtrace stat: writing output: No space left on device\n" },
		{ { "ls", "--version" }, "shmtrace ls: writing output: No space left on device\n" },
		{ { "export", "-V" }, "shmtrace export: writing output: No space left on device\n" },
	};
	char *col_help[] = { collector_bin, "--help", NULL };
	char *col_version[] = { collector_bin, "-V", NULL };
	const char *err = tmp("full.err");
	char *s;

	(void)state;
	if (access("/dev/full", W_OK) < 0)
		skip();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[] = { bin, (char *)cases[i].args[0], (char *)cases[i].args[1], NULL };

		assert_int_equal(run("/dev/full", err, argv), 1);
		s = slurp(err);
		assert_string_equal(s, cases[i].said);
		free(s);
	}
	assert_int_equal(run("/dev/full", err, col_help), 1);
	s = slurp(err);
	assert_string_equal(s, "shmtrace-collector: writing output: No space left on device\n");
	free(s);
	assert_int_equal(run("/dev/full", err, col_version), 1);
	s = slurp(err);
	assert_string_equal(s, "shmtrace-collector: writing output: No space left on device\n");
	free(s);
}

/* cli_getopt(): the options in order, then -1 with optind at the operands;
 * --help and bad options end the parse with the exit code to return. */
static void test_cli_getopt(void **state)
{
	static const struct option lo[] = {
		{ "ring", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct cli_opts o = { "t", "usage\n", ":r:h", lo };
	char *ok[] = { "t", "--json", "-r", "R", "file", NULL };
	char *help[] = { "t", "--help", NULL };
	char *bad[] = { "t", "--nope", NULL };
	char *noarg[] = { "t", "--ring", NULL };
	int rc = 99;

	(void)state;
	cli_getopt_start();
	assert_int_equal(cli_getopt(&o, 5, ok, &rc), 'j');
	assert_int_equal(cli_getopt(&o, 5, ok, &rc), 'r');
	assert_string_equal(optarg, "R");
	assert_int_equal(cli_getopt(&o, 5, ok, &rc), -1);
	assert_int_equal(optind, 4);
	assert_int_equal(rc, 99);
	cli_getopt_start();
	assert_int_equal(cli_getopt(&o, 2, help, &rc), CLI_OPT_EXIT);
	assert_int_equal(rc, EXIT_OK);
	cli_getopt_start();
	assert_int_equal(cli_getopt(&o, 2, bad, &rc), CLI_OPT_EXIT);
	assert_int_equal(rc, EXIT_USAGE);
	rc = 99;
	cli_getopt_start();
	assert_int_equal(cli_getopt(&o, 2, noarg, &rc), CLI_OPT_EXIT);
	assert_int_equal(rc, EXIT_USAGE);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("cli", true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ls_and_rm),
		cmocka_unit_test(test_rm_says_lost),
		cmocka_unit_test(test_a_readers_lock_is_no_collector),
		cmocka_unit_test(test_unreadable_rings_listed_and_removed),
		cmocka_unit_test(test_stat_names_missing_once),
		cmocka_unit_test(test_a_ring_name_for_a_file_is_pointed_at_the_ring),
		cmocka_unit_test(test_collector_option_checks),
		cmocka_unit_test(test_collector_stream_usage_error_leaves_the_ring),
		cmocka_unit_test(test_export_refuses_what_it_would_do_wrong),
		cmocka_unit_test(test_export_capture_being_written),
		cmocka_unit_test(test_export_from_past_end),
		cmocka_unit_test(test_option_messages),
		cmocka_unit_test(test_help_into_a_full_disk_fails),
		cmocka_unit_test(test_cli_getopt),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
