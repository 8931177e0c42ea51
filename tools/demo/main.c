/* SPDX-License-Identifier: MIT */
/*
 * main.c - shmtrace-demo: options, the ring, the socket directory, and the
 * fork of the broker; this process then becomes the client.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "demo.h"

shmtrace_t *demo_t;
struct demo_ids demo_ids;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s --ring NAME [--requests N] [--workers N] [--clients N]\n"
		"                     [--crash-worker K] [--create [--capacity N]]\n"
		"                     [--py-worker SCRIPT [--python PATH]]\n"
		"\n"
		"A client, a broker and a pool of worker processes that serve requests\n"
		"(count primes, checksum a buffer) over UNIX sockets, traced into the\n"
		"shmtrace ring NAME (default: $SHMTRACE_RING) with one flow per request.\n"
		"\n"
		"  -r, --ring NAME         ring to record into (made by shmtrace-collector)\n"
		"  -n, --requests N        requests to send (default 3000)\n"
		"  -w, --workers N         worker processes, 1..%d (default 3)\n"
		"  -c, --clients N         client threads, 1..%d (default 6)\n"
		"  -k, --crash-worker K    worker K kills itself (SIGKILL) in its %dth request;\n"
		"                          the broker re-routes its requests to the others\n"
		"      --create            create the ring first (no collector: post-mortem);\n"
		"                          it is left behind for `shmtrace export --ring`\n"
		"      --capacity N        records in a ring made by --create (power of two)\n"
		"      --py-worker SCRIPT  the last worker is a Python process running SCRIPT\n"
		"                          (tools/demo/worker.py), the shmtrace module on its path\n"
		"      --python PATH       the interpreter for it (default python3)\n"
		"  -h, --help              show this help\n"
		"  -V, --version           show the version\n"
		"\n"
		"Exit status: 0 all requests served, 1 a failure, 2 a usage error.\n",
		DEMO_NAME, DEMO_MAX_WORKERS, DEMO_MAX_CLIENTS, DEMO_CRASH_AT);
}

static int parse_u32(const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < min || v > max) {
		fprintf(stderr, "%s: %s: expected a number from %u to %u, not '%s'\n",
			DEMO_NAME, opt, min, max, s);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

static void intern_all(void)
{
	struct demo_ids *id = &demo_ids;
	shmtrace_t *t = demo_t;

	id->cat = shmtrace_intern(t, "client");
	id->cat = shmtrace_intern(t, "broker");
	id->cat = shmtrace_intern(t, "worker");
	id->run = shmtrace_intern(t, "run");
	id->request = shmtrace_intern(t, "request");
	id->send = shmtrace_intern(t, "send");
	id->wait_reply = shmtrace_intern(t, "wait reply");
	id->handle_reply = shmtrace_intern(t, "handle reply");
	id->retry = shmtrace_intern(t, "retry");
	id->error = shmtrace_intern(t, "error");
	id->route = shmtrace_intern(t, "route");
	id->parse = shmtrace_intern(t, "parse");
	id->queue = shmtrace_intern(t, "queue");
	id->dispatch = shmtrace_intern(t, "dispatch");
	id->forward = shmtrace_intern(t, "forward reply");
	id->queue_depth = shmtrace_intern(t, "queue depth");
	id->in_flight = shmtrace_intern(t, "in flight");
	id->worker_died = shmtrace_intern(t, "worker died");
	id->requeue = shmtrace_intern(t, "requeue");
	id->receive = shmtrace_intern(t, "receive");
	id->decode = shmtrace_intern(t, "decode");
	id->work = shmtrace_intern(t, "work");
	id->compute = shmtrace_intern(t, "compute");
	id->primes = shmtrace_intern(t, "primes");
	id->checksum = shmtrace_intern(t, "checksum");
	id->reply = shmtrace_intern(t, "reply");
	id->busy = shmtrace_intern(t, "busy");
	id->k_request = shmtrace_intern(t, "request");
	id->k_bytes = shmtrace_intern(t, "bytes");
	id->k_status = shmtrace_intern(t, "status");
	id->k_limit = shmtrace_intern(t, "limit");
	id->v_ok = shmtrace_intern(t, "ok");
	id->v_busy = shmtrace_intern(t, "busy");
}

/* A private directory for the broker's socket: nobody else can connect. */
static int make_sock_dir(struct demo_config *cfg, char *dir, size_t len)
{
	const char *tmp = getenv("TMPDIR");

	if (!tmp || !*tmp)
		tmp = "/tmp";
	if ((size_t)snprintf(dir, len, "%s/shmtrace-demo.XXXXXX", tmp) >= len ||
	    strlen(dir) + sizeof("/broker.sock") > sizeof(cfg->sock_path)) {
		fprintf(stderr, "%s: TMPDIR is too long for a socket path\n", DEMO_NAME);
		return -1;
	}
	if (!mkdtemp(dir)) {
		fprintf(stderr, "%s: mkdtemp %s: %s\n", DEMO_NAME, dir, strerror(errno));
		return -1;
	}
	if ((size_t)snprintf(cfg->sock_path, sizeof(cfg->sock_path), "%s/broker.sock", dir) >=
	    sizeof(cfg->sock_path)) {
		rmdir(dir);
		return -1;	/* checked above: cannot happen */
	}
	return 0;
}

enum { OPT_CREATE = 256, OPT_CAPACITY, OPT_PY_WORKER, OPT_PYTHON };

/* The numeric option o (1..its maximum) into its place in cfg or rc.
 * Returns 0, or -1 after saying what is wrong. */
static int parse_number(int o, const char *arg, struct demo_config *cfg,
			struct shmtrace_ring_config *rc)
{
	const struct {
		const char *name;
		uint32_t *to;
		int o;
		uint32_t max;
	} nums[] = {
		{ "--requests", &cfg->requests, 'n', 10000000 },
		{ "--workers", &cfg->workers, 'w', DEMO_MAX_WORKERS },
		{ "--clients", &cfg->clients, 'c', DEMO_MAX_CLIENTS },
		{ "--crash-worker", &cfg->crash_worker, 'k', DEMO_MAX_WORKERS },
		{ "--capacity", &rc->capacity, OPT_CAPACITY, 1u << 30 },
	};

	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		if (nums[i].o == o)
			return parse_u32(nums[i].name, arg, 1, nums[i].max, nums[i].to);
	return -1;
}

/* What the command line asks for beyond cfg: a ring to create, with rc. */
struct demo_args {
	struct demo_config cfg;
	struct shmtrace_ring_config rc;
	int create;
};

/* Parses the options into a. Returns -1 to go on, or the exit code. */
static int parse_args(int argc, char **argv, struct demo_args *a)
{
	static const struct option opts[] = {
		{ "ring", required_argument, NULL, 'r' },
		{ "requests", required_argument, NULL, 'n' },
		{ "workers", required_argument, NULL, 'w' },
		{ "clients", required_argument, NULL, 'c' },
		{ "crash-worker", required_argument, NULL, 'k' },
		{ "create", no_argument, NULL, OPT_CREATE },
		{ "capacity", required_argument, NULL, OPT_CAPACITY },
		{ "py-worker", required_argument, NULL, OPT_PY_WORKER },
		{ "python", required_argument, NULL, OPT_PYTHON },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	int o;

	while ((o = getopt_long(argc, argv, "r:n:w:c:k:hV", opts, NULL)) != -1) {
		switch (o) {
		case 'r':
			a->cfg.ring = optarg;
			break;
		case 'n':
		case 'w':
		case 'c':
		case 'k':
		case OPT_CAPACITY:
			if (parse_number(o, optarg, &a->cfg, &a->rc))
				return 2;
			break;
		case OPT_CREATE:
			a->create = 1;
			break;
		case OPT_PY_WORKER:
			a->cfg.py_worker = optarg;
			break;
		case OPT_PYTHON:
			a->cfg.python = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("%s %s\n", DEMO_NAME, SHMTRACE_VERSION_STRING);
			return 0;
		default:
			fprintf(stderr, "Try '%s --help'.\n", DEMO_NAME);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'; try '%s --help'\n",
			DEMO_NAME, argv[optind], DEMO_NAME);
		return 2;
	}
	return -1;
}

/* Checks what the options left together. Returns -1 to go on, or 2. */
static int check_args(struct demo_args *a)
{
	if (!a->cfg.ring)
		a->cfg.ring = getenv("SHMTRACE_RING");
	if (!a->cfg.ring || !*a->cfg.ring) {
		fprintf(stderr, "%s: no ring: pass --ring NAME or set SHMTRACE_RING\n", DEMO_NAME);
		return 2;
	}
	if (a->cfg.crash_worker > a->cfg.workers) {
		fprintf(stderr, "%s: --crash-worker %u: there are only %u workers\n",
			DEMO_NAME, a->cfg.crash_worker, a->cfg.workers);
		return 2;
	}
	if (a->rc.capacity && !a->create) {
		fprintf(stderr, "%s: --capacity needs --create\n", DEMO_NAME);
		return 2;
	}
	return -1;
}

/* Creates the ring if asked, and opens it as demo_t. Returns 0 or 1. */
static int open_ring(const struct demo_args *a)
{
	int ret;

	if (a->create) {
		ret = shmtrace_ring_create(a->cfg.ring, &a->rc);
		if (ret < 0) {
			fprintf(stderr, "%s: create ring '%s': %s\n", DEMO_NAME, a->cfg.ring,
				ret == -EEXIST ? "it exists already" : shmtrace_strerror(ret));
			return 1;
		}
	}
	ret = shmtrace_open(a->cfg.ring, &demo_t);
	if (ret < 0) {
		fprintf(stderr, "%s: open ring '%s': %s%s\n", DEMO_NAME, a->cfg.ring,
			shmtrace_strerror(ret),
			ret == -ENOENT ? " (start shmtrace-collector --create first, or pass --create)" : "");
		return 1;
	}
	return 0;
}

/* The broker forked (and through it the workers), this process the
 * client; ready is the pipe the broker says it listens on. */
static int run(struct demo_config *cfg, int ready[2])
{
	pid_t broker;

	shmtrace_flush(demo_t);
	broker = fork();
	if (broker < 0) {
		fprintf(stderr, "%s: fork: %s\n", DEMO_NAME, strerror(errno));
		return 1;
	}
	if (broker == 0) {
		/* the broker, and through it the workers, die with the client */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		close(ready[0]);
		_exit(demo_broker_main(cfg, ready[1]));
	}
	close(ready[1]);
	return demo_client_run(cfg, broker, ready[0]);
}

int main(int argc, char **argv)
{
	struct demo_args a = { .cfg = { .requests = 3000, .workers = 3, .clients = 6,
					.python = "python3" } };
	char dir[sizeof(a.cfg.sock_path)] = "";
	int ready[2], ret;

	if ((ret = parse_args(argc, argv, &a)) >= 0 || (ret = check_args(&a)) >= 0)
		return ret;
	if ((ret = open_ring(&a)) != 0)
		return ret;
	intern_all();
	/* a dead peer is seen as EPIPE/EOF on its socket, never as a signal */
	signal(SIGPIPE, SIG_IGN);
	if (make_sock_dir(&a.cfg, dir, sizeof(dir)) < 0) {
		shmtrace_close(demo_t);
		return 1;
	}
	if (pipe2(ready, O_CLOEXEC) < 0) {
		fprintf(stderr, "%s: pipe: %s\n", DEMO_NAME, strerror(errno));
		rmdir(dir);
		shmtrace_close(demo_t);
		return 1;
	}
	ret = run(&a.cfg, ready);
	unlink(a.cfg.sock_path);
	rmdir(dir);
	shmtrace_close(demo_t);
	return ret;
}
