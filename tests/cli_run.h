/* SPDX-License-Identifier: MIT */
/*
 * cli_run.h - what the cmocka tests of the `shmtrace` command share: running
 * it with its output in files under a temporary directory and checking what
 * it said, checking a trace with the DevTools engine, and writing capture
 * files with the encoder.
 */
#ifndef SHMTRACE_TEST_CLI_RUN_H
#define SHMTRACE_TEST_CLI_RUN_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "capture.h"
#include "ring_reader.h"
#include "ring_writer.h"
#include "helpers.h"

static char bin[512], collector_bin[512];
static long fsize_limit;	/* > 0: the child may write files of at most this */
static char tmpdir[256];

/* Runs argv with stdout and stderr to files; returns the exit status, or
 * 128 + signal. With guard_s, a child still running after that many
 * seconds is killed by SIGALRM (128 + 14): a hang becomes a failure. */
static inline int run_for(const char *out, const char *err, char *const argv[], unsigned guard_s)
{
	pid_t p = fork();
	int st;

	assert_true(p >= 0);
	if (p == 0) {
		int fo = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int fe = open(err ? err : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fo, 1);
		dup2(fe, 2);
		if (guard_s)
			alarm(guard_s);	/* survives exec */
		if (fsize_limit > 0) {
			struct rlimit rl = { (rlim_t)fsize_limit, (rlim_t)fsize_limit };

			/* a write past the limit fails with EFBIG instead of killing */
			signal(SIGXFSZ, SIG_IGN);
			setrlimit(RLIMIT_FSIZE, &rl);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	assert_int_equal(waitpid(p, &st, 0), p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline int run(const char *out, const char *err, char *const argv[])
{
	return run_for(out, err, argv, 0);
}

static inline const char *tmp(const char *name)
{
	static char buf[8][512];
	static int k;
	char *b = buf[k++ % 8];

	snprintf(b, 512, "%s/%s", tmpdir, name);
	return b;
}

/* The file at path says what (printed when it does not). */
static inline void expect_in(const char *path, const char *what)
{
	char *s = slurp(path);

	if (!strstr(s, what))
		fprintf(stderr, "%s: no '%s' in:\n%s\n", path, what, s);
	assert_non_null(strstr(s, what));
	free(s);
}

/* The file at path does not say what (printed when it does). */
static inline void expect_not_in(const char *path, const char *what)
{
	char *s = slurp(path);

	if (strstr(s, what))
		fprintf(stderr, "%s: unexpected '%s' in:\n%s\n", path, what, s);
	assert_null(strstr(s, what));
	free(s);
}

/* Runs argv, which must exit with status rc, with its stderr to tmp(err);
 * returns what it wrote there (to free). */
static inline char *run_stderr(const char *err, int rc, char *const argv[])
{
	assert_int_equal(run(NULL, tmp(err), argv), rc);
	return slurp(tmp(err));
}

/* Runs argv, which must exit with status rc and say said on stderr, and
 * not unsaid (either may be NULL). */
static inline void run_says(int rc, char *const argv[], const char *said, const char *unsaid)
{
	const char *err = tmp("run.err");

	assert_int_equal(run(NULL, err, argv), rc);
	if (said)
		expect_in(err, said);
	if (unsaid)
		expect_not_in(err, unsaid);
}

/* Starts the collector on ring (made already), writing out, and waits, on
 * a pipe, until it drains. */
static inline pid_t cli_collector(const char *ring, const char *out)
{
	char buf[16], fd[16];
	int p[2];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* a failed assertion must not leave a collector behind */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		execl(collector_bin, "shmtrace-collector", "--ring", ring, "--output", out,
		      "--ready-fd", fd, "--poll-interval", "5", "-q", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 6);
	close(p[0]);
	return pid;
}

/* Removes ring, starts the collector with --create (capacity 4096) writing
 * out, and waits, on a pipe, until it drains; skips the test when the
 * collector is not built. */
static inline pid_t cli_collector_create(const char *ring, const char *out)
{
	char col[600], fdarg[16], ready[8] = "";
	int rfd[2];
	pid_t cpid;

	snprintf(col, sizeof(col), "%s-collector", bin);
	if (access(col, X_OK) < 0)
		skip();
	shmtrace_ring_unlink(ring);
	assert_int_equal(pipe(rfd), 0);
	cpid = fork();
	assert_true(cpid >= 0);
	if (cpid == 0) {
		char *argv[] = { col, "--ring", (char *)ring, "--output", (char *)out,
				 "--create", "--capacity", "4096", "--ready-fd", fdarg, NULL };

		close(rfd[0]);
		snprintf(fdarg, sizeof(fdarg), "%d", rfd[1]);
		execv(col, argv);
		_exit(127);
	}
	close(rfd[1]);
	/* the collector says when it drains; no sleeping */
	assert_int_equal(read(rfd[0], ready, sizeof(ready) - 1), 6);
	close(rfd[0]);
	return cpid;
}

static inline int export_ring(const char *ring, const char *out, const char *err)
{
	char *argv[] = { bin, "export", "--ring", (char *)ring, "-o", (char *)out, NULL };

	return run(NULL, err, argv);
}

/* A flow id sent over a pipe to a process of the test. */
static inline void send_flow(int fd, uint64_t f)
{
	assert_int_equal(write(fd, &f, sizeof(f)), (ssize_t)sizeof(f));
}

/* One received, in a child: it exits (3) when none comes. */
static inline uint64_t recv_flow(int fd)
{
	uint64_t f = 0;

	if (read(fd, &f, sizeof(f)) != (ssize_t)sizeof(f))
		_exit(3);
	return f;
}

/* One span of a flow in category "rpc", from now to at least a
 * nanosecond later: recorded after the previous hop's span ended. */
static inline void hop(shmtrace_t *t, const char *name, uint64_t flow)
{
	uint32_t cat = shmtrace_intern(t, "rpc");
	uint32_t n = shmtrace_intern(t, name);
	uint64_t t0 = shmtrace_now();

	while (shmtrace_now() == t0)
		;
	shmtrace_span(t, cat, n, t0, shmtrace_now(), flow);
}

/* The DevTools engine is there, or installed from the lock file. */
static inline bool have_devtools(void)
{
	static int ok = -1;

	if (ok < 0) {
		struct stat st;

		if (stat("tests/devtools/node_modules/@paulirish/trace_engine", &st) == 0)
			ok = 1;
		else
			ok = system("npm ci --prefix tests/devtools >/dev/null 2>&1") == 0;
	}
	return ok;
}

static inline int check_trace(const char *json, const char *const *expect)
{
	char *argv[32] = { "/usr/bin/env", "node", "tests/devtools/check-trace.mjs", (char *)json };
	int n = 4;

	for (; *expect && n < 30; expect++)
		argv[n++] = (char *)*expect;
	argv[n] = NULL;
	return run(tmp("check.out"), tmp("check.err"), argv);
}

static inline void print_file(const char *path)
{
	char *s = slurp(path);

	fprintf(stderr, "%s: %s\n", path, s);
	free(s);
}

/* When the DevTools engine is here, it loads json and finds what expect
 * (check-trace.mjs's options, ended by NULL) says; what it saw is printed
 * when not. */
static inline void expect_trace(const char *json, const char *const *expect)
{
	int rc;

	if (!have_devtools())
		return;
	rc = check_trace(json, expect);
	if (rc) {
		print_file(tmp("check.err"));
		print_file(tmp("check.out"));
	}
	assert_int_equal(rc, 0);
}

/* Runs `shmtrace export IN -o OUT` with the options opts (ended by NULL),
 * its stderr to err; returns the exit status. */
static inline int export_with_opts(const char *in, const char *out, const char *err,
				   const char *const *opts)
{
	char *argv[24] = { bin, "export", (char *)in, "-o", (char *)out };
	int n = 5;

	for (; *opts && n < 23; opts++)
		argv[n++] = (char *)*opts;
	argv[n] = NULL;
	return run(NULL, err, argv);
}


static inline void put_file(const char *path, const void *buf, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, n), (ssize_t)n);
	close(fd);
}

/* A capture part with records [first, first + n) of run 7, spans named
 * "s<seq>", on pid 100 or 200 alternately. */
static inline void make_part(msgpack_sbuffer *b, uint32_t part, uint64_t first, size_t n, bool end,
		      size_t *frame_at)
{
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .part = part, .run_id = 7, .ring_capacity = 1024,
		.realtime0 = 1700000000000000000ull, .mono0 = 1000, .started_ns = 1000,
	};
	struct shmt_cap_string s[2] = { { 1, 3, "cat" }, { 2, 4, "span" } };
	struct shmt_thread th[2] = { { .pid = 100, .tid = 100, .start_time = 5 },
				     { .pid = 200, .tid = 201, .start_time = 6 } };
	struct shmt_record r[64];
	struct shmt_cap_loss loss = { .at_ns = 2000, .dropped = 3 };
	struct shmt_cap_end e = { .records = n, .end_ns = 9000, .next_part = 0 };

	snprintf(h.ring, sizeof(h.ring), "testring");
	strcpy(th[0].name, "main");
	strcpy(th[0].pname, "alpha");
	strcpy(th[1].name, "io");
	strcpy(th[1].pname, "beta");
	assert_true(n <= 64);
	for (size_t i = 0; i < n; i++)
		r[i] = (struct shmt_record){ .ts = 10000 + (first + i) * 100, .dur = 50,
					     .pid = (first + i) % 2 ? 200 : 100,
					     .tid = (first + i) % 2 ? 201 : 100, .name = 2, .cat = 1,
					     .flow = (first + i) < 4 ? 99 : 0,
					     .commit = SHMTRACE_KIND_SPAN };
	msgpack_sbuffer_init(b);
	assert_int_equal(shmt_cap_put_header(b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(b, s, 2), 0);
	assert_int_equal(shmt_cap_put_threads(b, th, 2), 0);
	if (frame_at)
		*frame_at = b->size;
	assert_int_equal(shmt_cap_put_records(b, first, r, n), 0);
	assert_int_equal(shmt_cap_put_loss(b, &loss), 0);
	if (end)
		assert_int_equal(shmt_cap_put_end(b, &e), 0);
}

/* A capture file of one ring, as put_capture() writes it. */
struct cap_spec {
	struct shmt_cap_header h;
	const struct shmt_cap_string *str;
	size_t nstr;
	const struct shmt_thread *th;
	size_t nth;
	const struct shmt_record *r;
	size_t nr;
};

/* Writes c at path: header, strings, name slots, records (from sequence
 * 0) and an END frame that counts them. */
static inline void put_capture(const char *path, const struct cap_spec *c)
{
	struct shmt_cap_end e = { .records = c->nr, .end_ns = c->h.started_ns + 1000000000ull };
	msgpack_sbuffer b;

	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &c->h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, c->str, c->nstr), 0);
	assert_int_equal(shmt_cap_put_threads(&b, c->th, c->nth), 0);
	assert_int_equal(shmt_cap_put_records(&b, 0, c->r, c->nr), 0);
	assert_int_equal(shmt_cap_put_end(&b, &e), 0);
	put_file(path, b.data, b.size);
	msgpack_sbuffer_destroy(&b);
}

/* A capture file at path of run run_id (its ring_id too, the ring named
 * "ring<run_id>"): strings s, name slots th, records r, an END frame. */
static inline void write_capture(const char *path, uint64_t run_id, const struct shmt_cap_string *s,
				 size_t ns, const struct shmt_thread *th, size_t nth,
				 const struct shmt_record *r, size_t n)
{
	struct cap_spec c = {
		.h = { .version = SHMT_CAP_VERSION, .run_id = run_id, .ring_id = run_id,
		       .ring_capacity = 4096, .realtime0 = 1700000000000000000ull, .mono0 = 1000,
		       .started_ns = 1000 },
		.str = s, .nstr = ns, .th = th, .nth = nth, .r = r, .nr = n,
	};

	snprintf(c.h.ring, sizeof(c.h.ring), "ring%llu", (unsigned long long)run_id);
	put_capture(path, &c);
}

static inline int export_files(const char *out, const char *err, const char *f1, const char *f2)
{
	char *argv[] = { bin, "export", (char *)f1, (char *)f2, "-o", (char *)out, NULL };

	if (!f2) {
		argv[3] = "-o";
		argv[4] = (char *)out;
		argv[5] = NULL;
	}
	return run(NULL, err, argv);
}


/* Makes the temporary directory /tmp/shmt-WHAT-XXXXXX. Returns 0 or -1. */
static inline int cli_mkdtemp(const char *what)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/shmt-%s-XXXXXX", what);
	return mkdtemp(tmpdir) ? 0 : -1;
}

/* Finds shmtrace and shmtrace-collector in $SHMTRACE_BIN (else build/) and
 * makes the temporary directory. Returns 0, or -1 when that fails or a
 * binary the test needs is missing. */
static inline int cli_setup_for(const char *what, bool need_collector)
{
	const char *b = getenv("SHMTRACE_BIN");

	snprintf(bin, sizeof(bin), "%s/shmtrace", b ? b : "build");
	snprintf(collector_bin, sizeof(collector_bin), "%s/shmtrace-collector", b ? b : "build");
	if (cli_mkdtemp(what) < 0)
		return -1;
	return access(bin, X_OK) || (need_collector && access(collector_bin, X_OK)) ? -1 : 0;
}

/* The group setup of the export tests. */
static inline int cli_setup(void **state)
{
	(void)state;
	return cli_setup_for("export", false);
}

static inline int cli_teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

#endif /* SHMTRACE_TEST_CLI_RUN_H */
