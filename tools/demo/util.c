/* SPDX-License-Identifier: MIT */
/*
 * util.c - the broker's socket, bounded message I/O, bounded child
 * reaping and naming, shared by every role of the demo.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "demo.h"

/* The broker's SOCK_SEQPACKET socket at path: bound and listening (for
 * the broker), or else connected to it. Returns the descriptor or -errno. */
int demo_socket(const char *path, int listening)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int ret;

	if (fd < 0)
		return -errno;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	if (listening)
		ret = bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, 64) < 0;
	else
		ret = connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0;
	if (ret) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* Receives one whole message, waiting at most timeout_ms (-1: forever).
 * Returns 0, -ETIMEDOUT, -ECONNRESET when the peer is gone, -EBADMSG for
 * a datagram that is not one of ours, or another -errno. */
int demo_recv_msg(int fd, struct demo_msg *m, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;
	int ret;

	if (timeout_ms >= 0) {
		do
			ret = poll(&p, 1, timeout_ms);
		while (ret < 0 && errno == EINTR);
		if (ret < 0)
			return -errno;
		if (ret == 0)
			return -ETIMEDOUT;
	}
	do
		n = recv(fd, m, sizeof(*m), MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == ECONNRESET ? -ECONNRESET : -errno;
	if (n == 0)
		return -ECONNRESET;
	if ((size_t)n != sizeof(*m) || m->magic != DEMO_MAGIC || m->len > DEMO_PAYLOAD)
		return -EBADMSG;
	return 0;
}

/* Sends one message; a dead peer is an error, never a SIGPIPE. */
int demo_send_msg(int fd, const struct demo_msg *m)
{
	ssize_t n;

	do
		n = send(fd, m, sizeof(*m), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EPIPE ? -ECONNRESET : -errno;
	return (size_t)n == sizeof(*m) ? 0 : -EIO;
}

/* Reaps pid, waiting at most timeout_ms for it to exit on its own; then
 * it is killed. A pidfd gives a real readiness signal to poll() on.
 * Returns 0, or -ETIMEDOUT if it had to be killed. */
int demo_wait_child(pid_t pid, int timeout_ms, int *status)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	int ret = 0, st = 0;

	if (pfd >= 0) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };
		int n;

		do
			n = poll(&p, 1, timeout_ms);
		while (n < 0 && errno == EINTR);
		close(pfd);
		if (n == 0) {
			kill(pid, SIGKILL);
			ret = -ETIMEDOUT;
		}
	}
	/* without pidfds (before Linux 5.3) this one blocks */
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR) {
			st = 0;
			break;
		}
	}
	if (status)
		*status = st;
	return ret;
}

uint64_t demo_ms_since(uint64_t start_ns)
{
	return (shmtrace_now() - start_ns) / 1000000;
}

/* The kernel's name of the calling thread is set to the trace name too:
 * the library records the kernel name again when a thread first writes,
 * and the last name recorded for a thread wins. */
static void set_comm(const char *tname)
{
	char comm[16];

	/* comm is limited to 15 bytes; the trace keeps the full name */
	snprintf(comm, sizeof(comm), "%s", tname);
	prctl(PR_SET_NAME, comm, 0, 0, 0);
}

/* Names the process (from its main thread) and that thread in the trace.
 * The process name goes first: each name slot records both names. */
void demo_name_process(const char *pname, const char *tname)
{
	set_comm(tname);
	shmtrace_set_process_name(demo_t, pname);
	shmtrace_set_thread_name(demo_t, tname);
}

void demo_name_thread(const char *tname)
{
	set_comm(tname);
	shmtrace_set_thread_name(demo_t, tname);
}
