/* SPDX-License-Identifier: MIT */
/*
 * broker_pool.c - the broker's worker pool: forks the workers (the last
 * one the Python worker when configured), reaps one that dies and re-routes
 * the requests it held, and stops them all at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker.h"

static void describe_exit(int st, char *buf, size_t len)
{
	if (WIFSIGNALED(st))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
}

/* Worker w is gone (EOF on its socket): reap it, record an error on each
 * request it held, and hand those to the others, or fail them. */
void broker_worker_died(struct broker *b, uint32_t w)
{
	const struct demo_ids *id = &demo_ids;
	struct wrk *k = &b->workers[w];
	uint32_t moved = 0, failed = 0;
	char how[64];
	int st = 0;

	close(k->fd);
	k->fd = -1;
	b->alive--;
	demo_wait_child(k->pid, DEMO_EXIT_TIMEOUT_MS, &st);
	describe_exit(st, how, sizeof(how));
	if (w + 1 != b->cfg->crash_worker)
		b->unexpected = 1;
	for (uint32_t s = 0; s < DEMO_MAX_SLOTS; s++) {
		struct slot *sl = &b->slots[s];

		if (!sl->used || sl->worker != (int)w)
			continue;
		b->inflight--;
		if (b->alive) {
			shmtrace_instant(demo_t, id->cat, id->error, sl->m.flow);
			shmtrace_instant(demo_t, id->cat, id->requeue, sl->m.flow);
			broker_enqueue(b, s, 1);
			moved++;
		} else {
			broker_fail_request(b, sl->conn, sl->conn_gen, &sl->m);
			sl->used = 0;
			failed++;
		}
	}
	k->inflight = 0;
	shmtrace_instant(demo_t, id->cat, id->worker_died, 0);
	broker_counters(b);
	fprintf(stderr, "%s: broker: worker-%u (pid %d) %s; %u request(s) re-routed, %u failed\n",
		DEMO_NAME, w + 1, (int)k->pid, how, moved, failed);
	if (!b->alive) {
		/* nobody left to serve the queue */
		while (b->qlen) {
			struct slot *sl = &b->slots[b->queue[b->qhead]];

			b->qhead = (b->qhead + 1) % DEMO_MAX_SLOTS;
			b->qlen--;
			broker_fail_request(b, sl->conn, sl->conn_gen, &sl->m);
			sl->used = 0;
		}
		broker_counters(b);
	}
}

/* Becomes the Python worker (tools/demo/worker.py): the same protocol on
 * the inherited socket, recording into the same ring. Never returns. */
static void exec_py_worker(const struct demo_config *cfg, uint32_t index, int fd)
{
	char fdbuf[16], idxbuf[16];
	const char *argv[] = { cfg->python, cfg->py_worker, "--ring", cfg->ring, "--fd", fdbuf,
			       "--index", idxbuf, index == cfg->crash_worker ? "--crash" : NULL,
			       NULL };

	/* the socket was made close-on-exec: this one end must survive */
	if (fcntl(fd, F_SETFD, 0) < 0) {
		fprintf(stderr, "%s: worker-%u: fcntl: %s\n", DEMO_NAME, index, strerror(errno));
		_exit(1);
	}
	snprintf(fdbuf, sizeof(fdbuf), "%d", fd);
	snprintf(idxbuf, sizeof(idxbuf), "%u", index);
	execvp(cfg->python, (char *const *)argv);
	fprintf(stderr, "%s: worker-%u: exec %s: %s\n", DEMO_NAME, index, cfg->python, strerror(errno));
	_exit(127);
}

int broker_start_workers(struct broker *b)
{
	pid_t self = getpid();

	for (uint32_t i = 0; i < b->nworkers; i++) {
		int sv[2];
		pid_t pid;

		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
			fprintf(stderr, "%s: broker: socketpair: %s\n", DEMO_NAME, strerror(errno));
			return -1;
		}
		shmtrace_flush(demo_t);
		pid = fork();
		if (pid < 0) {
			fprintf(stderr, "%s: broker: fork: %s\n", DEMO_NAME, strerror(errno));
			close(sv[0]);
			close(sv[1]);
			return -1;
		}
		if (pid == 0) {
			/* a worker must not outlive the broker */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != self)
				_exit(1);
			close(sv[0]);
			close(b->lfd);
			for (uint32_t j = 0; j < i; j++)
				close(b->workers[j].fd);
			if (b->cfg->py_worker && i + 1 == b->nworkers)
				exec_py_worker(b->cfg, i + 1, sv[1]);
			_exit(demo_worker_main(b->cfg, i + 1, sv[1]));
		}
		close(sv[1]);
		b->workers[i].fd = sv[0];
		b->workers[i].pid = pid;
		b->alive++;
	}
	return 0;
}

/* Asks every live worker to finish (EOF on its socket) and reaps it. */
void broker_stop_workers(struct broker *b)
{
	for (uint32_t w = 0; w < b->nworkers; w++)
		if (b->workers[w].fd >= 0)
			shutdown(b->workers[w].fd, SHUT_WR);
	for (uint32_t w = 0; w < b->nworkers; w++) {
		int st = 0;

		if (b->workers[w].fd < 0)
			continue;
		if (demo_wait_child(b->workers[w].pid, DEMO_EXIT_TIMEOUT_MS, &st) < 0) {
			fprintf(stderr, "%s: broker: worker-%u did not exit, killed\n", DEMO_NAME, w + 1);
			b->unexpected = 1;
		} else if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			char how[64];

			describe_exit(st, how, sizeof(how));
			fprintf(stderr, "%s: broker: worker-%u %s\n", DEMO_NAME, w + 1, how);
			b->unexpected = 1;
		}
		close(b->workers[w].fd);
		b->workers[w].fd = -1;
	}
}
