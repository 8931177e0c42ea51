/* SPDX-License-Identifier: MIT */
/*
 * streamer.c - the collector's side of the live stream (streamer.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "clock.h"
#include "streamer.h"

/* how long the stream may take to say it is ready: it may wait for the
 * stream of a collector stopped just before to finish its request */
#define READY_WAIT_MS		60000
/* a stream that does not stop on SIGTERM this soon is killed */
#define STOP_WAIT_NS		(30ull * 1000000000ull)
#define BACKOFF_MIN_NS		(1000000000ull)
#define BACKOFF_MAX_NS		(60ull * 1000000000ull)
/* the stream's nice value: a busy host's CPU goes to the producers and
 * the drain first */
#define STREAM_NICE		19

void streamer_init(struct streamer *s)
{
	memset(s, 0, sizeof(*s));
	s->status_fd = -1;
	s->pace_fd = -1;
	s->backoff_ns = BACKOFF_MIN_NS;
}

int streamer_option(struct streamer *s, int c, const char *arg)
{
	/* passed on under the names the collector took them by */
	static const struct option opts[] = { STREAMER_LONGOPTS };
	static char names[sizeof(opts) / sizeof(opts[0])][32];
	size_t i = 0;

	while (i < sizeof(opts) / sizeof(opts[0]) && opts[i].val != c)
		i++;
	if (i == sizeof(opts) / sizeof(opts[0]))
		return 0;
	/* room for the ones the collector adds */
	if (s->argc + 2 > STREAMER_MAX_ARGS - 16) {
		fprintf(stderr, "shmtrace-collector: too many --otlp options\n");
		return -1;
	}
	if (c == STREAMER_OPT_ENDPOINT)
		s->endpoint = arg;
	snprintf(names[i], sizeof(names[i]), "--%s", opts[i].name);
	s->argv[s->argc++] = names[i];
	s->argv[s->argc++] = arg;
	return 1;
}

/* shmtrace, beside this program (as `make install` puts them). */
static int find_tool(struct streamer *s)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return -errno;
	self[n] = 0;
	slash = strrchr(self, '/');
	*slash = 0;
	snprintf(s->tool, sizeof(s->tool), "%.4000s/shmtrace", self);
	return access(s->tool, X_OK) == 0 ? 0 : -errno;
}

/* In the child: the stream, in a process group of its own (a terminal's
 * Ctrl-C stops the collector, which lets the stream finish), told to stop
 * when the collector dies. */
static void exec_stream(struct streamer *s, pid_t parent, int ready, int status, int pace_rd)
{
	char pid[16], rfd[16], sfd[16], pfd[16];
	const char *argv[STREAMER_MAX_ARGS + 16];
	int n = 0;
	sigset_t none;

	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(0);
	setpgid(0, 0);
	/* the CPU the producers and the drain leave: the stream catches up
	 * from the capture (a failure leaves it at the collector's) */
	setpriority(PRIO_PROCESS, 0, STREAM_NICE);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	snprintf(pid, sizeof(pid), "%d", (int)parent);
	snprintf(rfd, sizeof(rfd), "%d", ready);
	snprintf(sfd, sizeof(sfd), "%d", status);
	snprintf(pfd, sizeof(pfd), "%d", pace_rd);
	argv[n++] = "shmtrace";
	argv[n++] = "stream";
	argv[n++] = s->output;
	argv[n++] = "--follow";
	argv[n++] = "--collector-pid";
	argv[n++] = pid;
	argv[n++] = "--status-fd";
	argv[n++] = sfd;
	argv[n++] = "--pace-fd";
	argv[n++] = pfd;
	if (ready >= 0) {
		argv[n++] = "--ready-fd";
		argv[n++] = rfd;
	}
	for (int i = 0; i < s->argc; i++)
		argv[n++] = s->argv[i];
	argv[n] = NULL;
	execv(s->tool, (char *const *)argv);
	fprintf(stderr, "shmtrace-collector: cannot run %s: %s\n", s->tool, strerror(errno));
	_exit(127);
}

/* Forks the stream; with ready, a pipe it says "ready" on. */
static int spawn(struct streamer *s, int *ready_rd)
{
	int rp[2] = { -1, -1 }, sp[2] = { -1, -1 }, pp[2] = { -1, -1 }, ret;
	pid_t parent = getpid();

	if (pipe2(sp, O_CLOEXEC) < 0 || pipe2(pp, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    (ready_rd && pipe2(rp, O_CLOEXEC) < 0) || (s->pid = fork()) < 0) {
		ret = -errno;
		s->pid = 0;
		for (int i = 0; i < 2; i++) {
			if (rp[i] >= 0)
				close(rp[i]);
			if (sp[i] >= 0)
				close(sp[i]);
			if (pp[i] >= 0)
				close(pp[i]);
		}
		return ret;
	}
	if (s->pid == 0) {
		/* the child's ends stay open across exec */
		fcntl(sp[1], F_SETFD, 0);
		fcntl(pp[0], F_SETFD, 0);
		if (rp[1] >= 0)
			fcntl(rp[1], F_SETFD, 0);
		exec_stream(s, parent, rp[1], sp[1], pp[0]);
	}
	close(sp[1]);
	close(pp[0]);
	s->pace_fd = pp[1];
	s->paused = false;
	if (rp[1] >= 0)
		close(rp[1]);
	s->status_fd = sp[0];
	if (ready_rd)
		*ready_rd = rp[0];
	return 0;
}

/* The stream's exit, said; its status in *st. */
static void reaped(struct streamer *s, int st)
{
	char buf[sizeof(s->line)];
	ssize_t n = s->status_fd >= 0 ? read(s->status_fd, buf, sizeof(buf) - 1) : 0;

	s->pid = 0;
	if (s->status_fd >= 0)
		close(s->status_fd);
	s->status_fd = -1;
	if (s->pace_fd >= 0)
		close(s->pace_fd);
	s->pace_fd = -1;
	if (n > 0) {
		buf[n] = 0;
		buf[strcspn(buf, "\n")] = 0;
		snprintf(s->line, sizeof(s->line), "%s", buf);
	} else if (WIFSIGNALED(st)) {
		snprintf(s->line, sizeof(s->line), "the stream to %s was killed by signal %d",
			 s->endpoint, WTERMSIG(st));
	} else {
		snprintf(s->line, sizeof(s->line), "the stream to %s exited with status %d",
			 s->endpoint, WEXITSTATUS(st));
	}
	s->failed = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}

int streamer_start(struct streamer *s, const char *output)
{
	char buf[8];
	struct pollfd p;
	int rd = -1, st, ret;

	s->output = output;
	if (find_tool(s) < 0) {
		fprintf(stderr, "shmtrace-collector: --otlp-endpoint needs shmtrace beside the "
			"collector (%s): %s\n", s->tool[0] ? s->tool : "not found",
			strerror(errno));
		return 1;
	}
	if ((ret = spawn(s, &rd)) < 0) {
		fprintf(stderr, "shmtrace-collector: cannot start the stream: %s\n", strerror(-ret));
		return 1;
	}
	p = (struct pollfd){ .fd = rd, .events = POLLIN };
	ret = poll(&p, 1, READY_WAIT_MS) == 1 && read(rd, buf, sizeof(buf)) == 6 &&
	      !memcmp(buf, "ready\n", 6);
	close(rd);
	if (ret)
		return 0;
	/* it said why (usage: 2), or did not answer in time */
	kill(s->pid, SIGTERM);
	waitpid(s->pid, &st, 0);
	reaped(s, st);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
		return 2;
	fprintf(stderr, "shmtrace-collector: the stream to %s did not start: %s\n", s->endpoint,
		s->line);
	return 1;
}

/* 'p' on the pace pipe when the drain falls behind, 'g' when it caught
 * up: the stream reads one at a time, and waits while the last is 'p'. A
 * full pipe (a stream not reading) keeps the word for the next pass. */
static void pace(struct streamer *s, bool behind)
{
	if (s->pace_fd < 0 || behind == s->paused)
		return;
	if (write(s->pace_fd, behind ? "p" : "g", 1) == 1)
		s->paused = behind;
}

void streamer_poll(struct streamer *s, bool drain_behind)
{
	int st;

	if (!s->endpoint)
		return;
	pace(s, drain_behind);
	if (s->pid && waitpid(s->pid, &st, WNOHANG) == s->pid) {
		reaped(s, st);
		fprintf(stderr, "shmtrace-collector: %s; starting it again\n", s->line);
		s->restart_at = clock_ns(CLOCK_MONOTONIC) + s->backoff_ns;
		s->backoff_ns = s->backoff_ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS
								   : s->backoff_ns * 2;
	}
	if (!s->pid && clock_ns(CLOCK_MONOTONIC) >= s->restart_at && spawn(s, NULL) < 0)
		s->restart_at = clock_ns(CLOCK_MONOTONIC) + s->backoff_ns;
}

/* Waits at most ns for the stream to exit: true when it did. */
static bool wait_exit(struct streamer *s, uint64_t ns)
{
	int pfd = (int)syscall(SYS_pidfd_open, s->pid, 0), st;
	uint64_t until = clock_ns(CLOCK_MONOTONIC) + ns;

	for (;;) {
		uint64_t now = clock_ns(CLOCK_MONOTONIC);
		struct pollfd p = { .fd = pfd, .events = POLLIN };

		if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
			reaped(s, st);
			break;
		}
		if (now >= until)
			break;
		/* the process's end is the signal; without pidfd, a short nap */
		if (pfd >= 0)
			poll(&p, 1, (int)((until - now) / 1000000ull) + 1);
		else
			poll(NULL, 0, 10);
	}
	if (pfd >= 0)
		close(pfd);
	return !s->pid;
}

void streamer_finish(struct streamer *s, bool ended, uint64_t linger_ns)
{
	if (!s->endpoint)
		return;
	if (!s->pid && ended)
		/* it died, and was not started again yet: once more, to send
		 * what the capture holds */
		spawn(s, NULL);
	if (!s->pid)
		return;
	pace(s, false);
	if (ended && wait_exit(s, linger_ns))
		return;
	kill(s->pid, SIGTERM);
	if (wait_exit(s, STOP_WAIT_NS))
		return;
	kill(s->pid, SIGKILL);
	wait_exit(s, STOP_WAIT_NS);
}
