/* SPDX-License-Identifier: MIT */
/*
 * stream_run.h - what the tests of the live stream share: the loopback
 * OTLP/HTTP receiver (tests/otlp/receiver.py, which decodes protobuf with
 * protoc, not with our code) started and stopped, its signals (FIFOs: the
 * test waits on them, never on a clock), a collector streaming to it, a
 * run of requests between two processes, and the check that what arrived
 * is the file export of the same capture, each span once
 * (tests/otlp/check-stream.py).
 */
#ifndef SHMTRACE_TEST_STREAM_RUN_H
#define SHMTRACE_TEST_STREAM_RUN_H

#include "cli_run.h"

struct receiver {
	pid_t pid;
	int port;
	int notify;		/* the FIFO it says "taken" on */
	char dir[512];
};

/* dir/name, in one of a few buffers (as tmp()). */
static inline const char *tmp2(const char *dir, const char *name)
{
	static char buf[8][700];
	static int k;
	char *b = buf[k++ % 8];

	snprintf(b, sizeof(buf[0]), "%s/%s", dir, name);
	return b;
}

static inline const char *python(void)
{
	const char *p = getenv("PYTHON");

	return p && *p ? p : "python3";
}

/* Whether protoc and the receiver's Python are there (else the test is
 * skipped: make deps installs them). */
static inline bool have_receiver(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "protoc --version >/dev/null 2>&1 && %s -c 'import http.server' "
		 ">/dev/null 2>&1", python());
	return system(cmd) == 0;
}

/* Starts the receiver in tmp(name) with answers script (or NULL) and
 * --notify-after notify ("N,M,...": a line once the N-th request was
 * answered 200, then the M-th, ...; "0": none), on port (0: any); its
 * FIFOs notify and release made first. Waits on a pipe until it says its
 * port. */
static inline void receiver_start_at(struct receiver *r, const char *name, const char *script,
				     const char *notify, int port)
{
	char buf[32] = "", p[16];
	int fd[2];

	snprintf(r->dir, sizeof(r->dir), "%s", tmp(name));
	mkdir(r->dir, 0755);
	mkfifo(tmp2(r->dir, "notify"), 0600);
	mkfifo(tmp2(r->dir, "release"), 0600);
	snprintf(p, sizeof(p), "%d", port);
	assert_int_equal(pipe(fd), 0);
	r->pid = fork();
	assert_true(r->pid >= 0);
	if (r->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fd[1], 1);
		close(fd[0]);
		execlp(python(), python(), "tests/otlp/receiver.py", r->dir, "--port", p, "--script",
		       script ? script : "", "--notify-after", notify, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	memset(buf, 0, sizeof(buf));
	for (size_t got = 0; !strchr(buf, '\n') && got < sizeof(buf) - 1;) {
		ssize_t k = read(fd[0], buf + got, sizeof(buf) - 1 - got);

		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(fd[0]);
	r->port = atoi(buf);
	assert_true(r->port > 0);
	/* it holds the FIFO open: this never waits, and reads see its end if
	 * it dies */
	r->notify = open(tmp2(r->dir, "notify"), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	assert_true(r->notify >= 0);
	fcntl(r->notify, F_SETFL, 0);
}

/* The receiver, a line in its FIFO once the notify-th request was
 * answered 200 (0: never). */
static inline void receiver_start(struct receiver *r, const char *name, const char *script,
				  int notify, int port)
{
	char n[16];

	snprintf(n, sizeof(n), "%d", notify);
	receiver_start_at(r, name, script, n, port);
}

/* Stops it: its port refuses connections from then on. */
static inline void receiver_stop(struct receiver *r)
{
	int st;

	kill(r->pid, SIGTERM);
	assert_int_equal(waitpid(r->pid, &st, 0), r->pid);
	close(r->notify);
}

/* Waits until the receiver has answered its --notify-after'th request 200. */
static inline void receiver_wait(const struct receiver *r)
{
	char buf[32];

	/* a hang guard, not a clock: a stream that never sends would make
	 * this wait for ever (SIGALRM ends the test, which then fails) */
	alarm(300);
	assert_true(read(r->notify, buf, sizeof(buf)) > 0);
	alarm(0);
}

/* Lets a stalled request ("stall" in its script) be answered, now or
 * when it comes. */
static inline void receiver_release(const struct receiver *r)
{
	int fd = open(tmp2(r->dir, "release"), O_WRONLY | O_NONBLOCK);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "go\n", 3), 3);
	close(fd);
}

static inline void endpoint_of(const struct receiver *r, char *buf, size_t len)
{
	snprintf(buf, len, "http://127.0.0.1:%d", r->port);
}

/* A collector on ring (made here, --create) writing out and streaming to
 * r with more arguments (NULL-terminated), its stderr appended to err, or,
 * err NULL, to a pipe read from *errfd; waits, on a pipe, until it
 * drains. */
static inline pid_t stream_collector_to(const char *ring, const char *out,
					const struct receiver *r, const char *err, int *errfd,
					const char *const *more)
{
	char url[64], fd[16];
	const char *argv[40] = { collector_bin, "--ring", ring, "--output", out, "--create",
				 "--ready-fd", fd, "--poll-interval", "5", "--linger", "120",
				 "--otlp-endpoint", url };
	int p[2], n = 14;
	char buf[8];
	pid_t pid;

	int ep[2] = { -1, -1 };

	endpoint_of(r, url, sizeof(url));
	for (; more && *more && n < 38; more++)
		argv[n++] = *more;
	assert_int_equal(pipe(p), 0);
	if (!err)
		assert_int_equal(pipe2(ep, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int e = err ? open(err, O_WRONLY | O_CREAT | O_APPEND, 0644) : ep[1];

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		dup2(e, 2);
		execv(collector_bin, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	if (!err) {
		close(ep[1]);
		*errfd = ep[0];
	}
	assert_int_equal(read(p[0], buf, sizeof(buf)), 6);
	close(p[0]);
	return pid;
}

static inline pid_t stream_collector(const char *ring, const char *out, const struct receiver *r,
				     const char *err, const char *const *more)
{
	return stream_collector_to(ring, out, r, err, NULL, more);
}

/* Reads fd into the file path until what was said (true), or to its end
 * (false): a line on stderr as the signal to wait on. */
static inline bool read_until(int fd, const char *path, const char *what)
{
	static char seen[1 << 16];
	static size_t n;
	FILE *f = fopen(path, "a");
	bool found = false;
	ssize_t r;

	assert_non_null(f);
	while (!found && (r = read(fd, seen + n, sizeof(seen) - 1 - n)) > 0) {
		fwrite(seen + n, 1, (size_t)r, f);
		n += (size_t)r;
		seen[n] = 0;
		found = what && strstr(seen, what);
		if (n > sizeof(seen) / 2 && !found) {
			n = 0;
		}
	}
	fclose(f);
	return found;
}

/* ----------------------------------------------------------- a flow run */

/*
 * n requests between a client and a server process: the client's
 * "request" span holds "send", the flow's first step, and "wait reply",
 * which receives and ends the flow; the server's "handle", the flow's
 * step, holds "work" and the instant "parsed". Arguments on "request"
 * (an integer and a text) and "work". The spans, as the OTLP export
 * counts them: 5 a request.
 */
#define FLOW_RUN_SPANS	5

/* Waits while the ring holds more than half its capacity: producers that
 * never outrun a drain that runs (a drain that stops makes this wait
 * forever, and the test's guard ends it). */
static inline void pace(shmtrace_t *t)
{
	struct shmtrace_stats st;

	while (shmtrace_stats(t, &st) == 0 && st.head - st.tail > st.capacity / 2)
		sched_yield();
}

static inline void flow_client(shmtrace_t *t, int to, int from, int n, bool paced)
{
	uint32_t cat = shmtrace_intern(t, "rpc"), req = shmtrace_intern(t, "request");
	uint32_t send = shmtrace_intern(t, "send"), wait = shmtrace_intern(t, "wait reply");
	uint32_t kid = shmtrace_intern(t, "id"), kurl = shmtrace_intern(t, "url");
	char url[64], c;

	prctl(PR_SET_NAME, "client", 0, 0, 0);
	shmtrace_set_process_name(t, "client");
	for (int i = 0; i < n; i++) {
		struct shmtrace_open_span r, w;
		uint64_t f = shmtrace_flow_new(t), t0;

		snprintf(url, sizeof(url), "/item/%d?x=%d", i, i * 7);
		if (paced)
			pace(t);
		shmtrace_begin(t, &r, cat, req, 0);
		shmtrace_span_arg(&r, shmtrace_arg_int(kid, i));
		shmtrace_span_arg(&r, shmtrace_arg_text(kurl, url));
		t0 = shmtrace_now();
		while (shmtrace_now() == t0)
			;
		shmtrace_span(t, cat, send, t0, shmtrace_now(), f);
		if (write(to, &f, sizeof(f)) != sizeof(f))
			_exit(3);
		shmtrace_begin(t, &w, cat, wait, shmtrace_flow_reply(f));
		if (read(from, &c, 1) != 1)
			_exit(3);
		shmtrace_end(&w);
		shmtrace_end(&r);
	}
}

static inline void flow_server(shmtrace_t *t, int from, int to, int n)
{
	uint32_t cat = shmtrace_intern(t, "rpc"), handle = shmtrace_intern(t, "handle");
	uint32_t work = shmtrace_intern(t, "work"), parsed = shmtrace_intern(t, "parsed");
	uint32_t kn = shmtrace_intern(t, "n");

	prctl(PR_SET_NAME, "server", 0, 0, 0);
	shmtrace_set_process_name(t, "server");
	for (int i = 0; i < n; i++) {
		struct shmtrace_open_span h;
		struct shmtrace_arg a = shmtrace_arg_int(kn, i);
		uint64_t f, t0;

		if (read(from, &f, sizeof(f)) != sizeof(f))
			_exit(3);
		shmtrace_begin(t, &h, cat, handle, f);
		shmtrace_instant(t, cat, parsed, 0);
		t0 = shmtrace_now();
		/* at least a nanosecond long, and inside handle (which ends
		 * after it) */
		while (shmtrace_now() == t0)
			;
		shmtrace_span_args(t, cat, work, t0, shmtrace_now(), 0, &a, 1);
		shmtrace_end(&h);
		if (write(to, "r", 1) != 1)
			_exit(3);
	}
}

/* Runs n requests in two processes on ring, and waits for them; paced:
 * the client never lets the ring fill past half. */
static inline void flow_run_paced(const char *ring, int n, bool paced)
{
	int cs[2], sc[2], st;
	pid_t p[2];

	assert_int_equal(pipe(cs), 0);
	assert_int_equal(pipe(sc), 0);
	for (int k = 0; k < 2; k++) {
		p[k] = fork();
		assert_true(p[k] >= 0);
		if (p[k] == 0) {
			shmtrace_t *t;

			if (shmtrace_open(ring, &t) < 0)
				_exit(2);
			if (k == 0)
				flow_client(t, cs[1], sc[0], n, paced);
			else
				flow_server(t, cs[0], sc[1], n);
			shmtrace_close(t);
			_exit(0);
		}
	}
	for (int k = 0; k < 2; k++) {
		assert_int_equal(waitpid(p[k], &st, 0), p[k]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	close(cs[0]);
	close(cs[1]);
	close(sc[0]);
	close(sc[1]);
}

static inline void flow_run(const char *ring, int n)
{
	flow_run_paced(ring, n, false);
}

/* ------------------------------------------------------------- checking */

/* What the receiver took (spans.jsonl) against the OTLP export of the
 * captures caps (NULL-terminated), with check-stream.py's options more
 * (NULL-terminated, or NULL). */
static inline void expect_as_export(const struct receiver *r, const char *const *caps,
				    const char *const *more)
{
	const char *argv[32] = { bin, "export" };
	int n = 2, rc;

	for (; *caps; caps++)
		argv[n++] = *caps;
	argv[n++] = "--format";
	argv[n++] = "otlp";
	argv[n++] = "-o";
	argv[n++] = tmp("ref.jsonl");
	argv[n] = NULL;
	assert_int_equal(run(NULL, tmp("ref.err"), (char *const *)argv), 0);
	n = 0;
	argv[n++] = python();
	argv[n++] = "tests/otlp/check-stream.py";
	argv[n++] = tmp2(r->dir, "spans.jsonl");
	argv[n++] = tmp("ref.jsonl");
	for (; more && *more && n < 30; more++)
		argv[n++] = *more;
	argv[n] = NULL;
	{
		pid_t p = fork();
		int st;

		assert_true(p >= 0);
		if (p == 0) {
			execvp(argv[0], (char *const *)argv);
			_exit(127);
		}
		assert_int_equal(waitpid(p, &st, 0), p);
		rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
	}
	assert_int_equal(rc, 0);
}

/* The connections the receiver's requests answered 200 came on (the
 * client ports in its log), and how many requests those were. */
static inline size_t receiver_connections(const struct receiver *r, size_t *requests)
{
	char *log = slurp(tmp2(r->dir, "log")), *p = log;
	int ports[4096];
	size_t n = 0;

	*requests = 0;
	while ((p = strstr(p, " port="))) {
		int port = atoi(p + 6);
		size_t i;

		p += 6;
		(*requests)++;
		for (i = 0; i < n && ports[i] != port; i++)
			;
		if (i == n && n < 4096)
			ports[n++] = port;
	}
	free(log);
	return n;
}

/* A number the status file beside capture cap says (shmtrace stat). */
static inline uint64_t stream_stat(const char *cap, const char *key)
{
	char *argv[] = { bin, "stat", (char *)cap, NULL }, want[64], *s, *p;
	uint64_t v = UINT64_MAX;

	assert_int_equal(run(tmp("stat.out"), tmp("stat.err"), argv), 0);
	s = slurp(tmp("stat.out"));
	snprintf(want, sizeof(want), "\nstream_%s:", key);
	p = strstr(s, want);
	if (p)
		v = strtoull(p + strlen(want), NULL, 10);
	else
		fprintf(stderr, "no stream_%s in:\n%s\n", key, s);
	free(s);
	assert_true(p != NULL);
	return v;
}

#endif
