/* SPDX-License-Identifier: MIT */
/*
 * main.c - shmtrace-collector: the command line around drain.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drain.h"
#include "ring_reader.h"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	/* the second signal means now: the file stays a valid prefix */
	if (g_stop)
		_exit(130);
	g_stop = 1;
}

/*
 * ThreadSanitizer runs a handler only at its next intercepted call, and a
 * SIGTERM sent just after --ready-fd was seen lost that way (g_stop never
 * set, the collector napping forever). Under it the stop signals stay
 * blocked and are polled between passes instead: a stop takes at most one
 * nap (<= 1 s by default), and a second signal cannot cut the finish short.
 */
static void block_stop_signals(void)
{
#if SHMT_TSAN
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGTERM);
	sigprocmask(SIG_BLOCK, &s, NULL);
#endif
}

static bool stop_requested(void)
{
#if SHMT_TSAN
	sigset_t s;

	if (!g_stop && sigpending(&s) == 0 &&
	    (sigismember(&s, SIGINT) == 1 || sigismember(&s, SIGTERM) == 1))
		g_stop = 1;
#endif
	return g_stop;
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: shmtrace-collector --ring NAME --output FILE [OPTION]...\n"
"Drain a shmtrace ring into a capture file until SIGINT or SIGTERM.\n"
"\n"
"  -r, --ring NAME          ring in /dev/shm to drain\n"
"  -o, --output FILE        capture file to write (truncated if it exists)\n"
"  -c, --create             create the ring first (and remove it on exit)\n"
"      --capacity N         records in a created ring, a power of two (default 262144)\n"
"      --mode MODE          discard (default) or overwrite, for a created ring\n"
"      --group              make a created ring readable and writable by the group\n"
"      --strings N          distinct names and categories a created ring can intern,\n"
"                           all processes together (default 4096, at most 65535)\n"
"      --string-bytes BYTES text space for them (default 64 per string, at least\n"
"                           256k; suffixes k, M)\n"
"      --threads N          thread name slots of a created ring: one per thread that\n"
"                           ever writes, plus one per rename (default 1024)\n"
"  -p, --poll-interval MS   wake at least every MS milliseconds while producers\n"
"                           write (default 100); idle, back off to 10 x MS\n"
"      --max-size BYTES     rotate to FILE.1, FILE.2, ... when a part reaches BYTES\n"
"                           (suffixes k, M, G; a part may pass it by one batch, 330 kB)\n"
"      --keep-ring          with --create, leave the ring in /dev/shm on exit\n"
"      --ready-fd FD        write \"ready\\n\" to FD and close it once draining\n"
"  -q, --quiet              no summary line on exit\n"
"  -h, --help               show this help and exit\n"
"  -V, --version            show the version and exit\n"
"\n"
"Exit status: 0 after a clean stop, 1 on a runtime error (the capture written\n"
"so far stays readable), 2 on a usage error.\n");
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

/* The numeric options: their bounds, and the usage error outside them. */
static const struct num_opt {
	uint64_t lo, hi;
	const char *err;
	int c;
	bool pow2;
} num_opts[] = {
	{ 1, SHMT_MAX_CAPACITY, "--capacity '%s': need a power of two up to 2^24", 'C', true },
	{ 1, SHMT_MAX_STRINGS, "--strings '%s': need 1 to 65535", 's', false },
	{ 64, 1u << 28, "--string-bytes '%s': need 64 to 256M", 'B', false },
	{ 1, SHMT_MAX_THREADS, "--threads '%s': need 1 to 1048576", 'T', false },
	{ 1, 60000, "--poll-interval '%s': need 1 to 60000 ms", 'p', false },
	{ 1u << 20, UINT64_MAX, "--max-size '%s': need at least 1M", 'S', false },
	{ 0, 1000000, "--ready-fd '%s': not a file descriptor", 'R', false },
};

/* Parses option c's argument into *v if c is a numeric option. Returns NULL,
 * or the message of the usage error for an argument out of its bounds. */
static const char *parse_num_opt(int c, const char *arg, uint64_t *v)
{
	for (size_t i = 0; i < sizeof(num_opts) / sizeof(num_opts[0]); i++) {
		const struct num_opt *n = &num_opts[i];

		if (n->c != c)
			continue;
		if (parse_size(arg, v) || *v < n->lo || *v > n->hi || (n->pow2 && (*v & (*v - 1))))
			return n->err;
		return NULL;
	}
	return NULL;
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "shmtrace-collector: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'shmtrace-collector --help'.\n");
	return 2;
}

struct pass_arg {
	struct drain *d;
	long ret;
	bool final;
};

static int guarded_pass(void *p)
{
	struct pass_arg *a = p;

	a->ret = a->final ? drain_finish(a->d) : drain_pass(a->d, false);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ring", required_argument, NULL, 'r' },
		{ "output", required_argument, NULL, 'o' },
		{ "create", no_argument, NULL, 'c' },
		{ "capacity", required_argument, NULL, 'C' },
		{ "mode", required_argument, NULL, 'M' },
		{ "group", no_argument, NULL, 'G' },
		{ "strings", required_argument, NULL, 's' },
		{ "string-bytes", required_argument, NULL, 'B' },
		{ "threads", required_argument, NULL, 'T' },
		{ "poll-interval", required_argument, NULL, 'p' },
		{ "max-size", required_argument, NULL, 'S' },
		{ "keep-ring", no_argument, NULL, 'K' },
		{ "ready-fd", required_argument, NULL, 'R' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	struct shmtrace_ring_config cfg = { 0 };
	struct drain_opts o = { .poll_ns = 100ull * 1000 * 1000 };
	bool create = false, keep = false, quiet = false;
	int ready_fd = -1, c, ret, status = 0;
	const char *ready_arg = NULL;
	struct sigaction sa;
	struct drain_stats st;
	struct drain *d;
	uint64_t v = 0, t0;

	while ((c = getopt_long(argc, argv, "r:o:cp:qhV", opts, NULL)) != -1) {
		const char *bad = parse_num_opt(c, optarg, &v);

		if (bad)
			return usage_error(bad, optarg);
		switch (c) {
		case 'r': o.ring = optarg; break;
		case 'o': o.output = optarg; break;
		case 'c': create = true; break;
		case 'C': cfg.capacity = (uint32_t)v; break;
		case 'M':
			if (!strcmp(optarg, "discard"))
				cfg.mode = SHMTRACE_MODE_DISCARD;
			else if (!strcmp(optarg, "overwrite"))
				cfg.mode = SHMTRACE_MODE_OVERWRITE;
			else
				return usage_error("--mode '%s': need discard or overwrite", optarg);
			break;
		case 'G': cfg.perm = 0660; break;
		case 's': cfg.max_strings = (uint32_t)v; break;
		case 'B': cfg.string_bytes = (uint32_t)v; break;
		case 'T': cfg.max_threads = (uint32_t)v; break;
		case 'p': o.poll_ns = v * 1000000ull; break;
		case 'S': o.max_size = v; break;
		case 'K': keep = true; break;
		case 'R':
			ready_fd = (int)v;
			ready_arg = optarg;
			break;
		case 'q': quiet = true; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("shmtrace-collector %s\n", SHMTRACE_VERSION); return 0;
		default:
			fprintf(stderr, "Try 'shmtrace-collector --help'.\n");
			return 2;
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!o.ring)
		return usage_error("%s", "--ring NAME is required");
	if (!o.output)
		return usage_error("%s", "--output FILE is required");
	if (!create && (cfg.capacity || cfg.mode || cfg.perm || cfg.max_strings ||
			cfg.string_bytes || cfg.max_threads))
		return usage_error("%s", "--capacity, --mode, --group, --strings, --string-bytes "
				   "and --threads need --create");
	/* text space grows with the table: 64 bytes a string, as the defaults */
	if (cfg.max_strings && !cfg.string_bytes && cfg.max_strings > 4096)
		cfg.string_bytes = cfg.max_strings * 64;
	/* checked now, not found out once the ring is made and draining */
	if (ready_fd >= 0 && fcntl(ready_fd, F_GETFL) < 0)
		return usage_error("--ready-fd %s: not an open file descriptor", ready_arg);
	if (ready_fd >= 0 && (fcntl(ready_fd, F_GETFL) & O_ACCMODE) == O_RDONLY)
		return usage_error("--ready-fd %s: the descriptor is not open for writing", ready_arg);
	if (keep && !create)
		fprintf(stderr, "shmtrace-collector: warning: --keep-ring has no effect without "
			"--create (a ring the collector did not create is never removed)\n");

	/* a file-size limit must be an EFBIG error, not a silent death */
	signal(SIGXFSZ, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	block_stop_signals();

	if (create) {
		ret = shmtrace_ring_create(o.ring, &cfg);
		if (ret < 0) {
			fprintf(stderr, "shmtrace-collector: cannot create ring '%s': %s\n", o.ring,
				ret == -EEXIST ? "it already exists (drop --create to drain it)" :
				shmtrace_strerror(ret));
			return 1;
		}
	}
	d = drain_new();
	ret = d ? drain_open(d, &o) : -ENOMEM;
	if (ret < 0) {
		fprintf(stderr, "shmtrace-collector: %s\n",
			d && drain_error(d)[0] ? drain_error(d) : shmtrace_strerror(ret));
		drain_free(d);
		if (create)
			shmtrace_ring_unlink(o.ring);
		return 1;
	}
	if (ready_fd >= 0) {
		if (write(ready_fd, "ready\n", 6) != 6)
			fprintf(stderr, "shmtrace-collector: warning: --ready-fd %d: %s\n",
				ready_fd, strerror(errno));
		close(ready_fd);
	}
	t0 = shmt_mono_ns();
	while (!stop_requested()) {
		struct pass_arg a = { d, 0, false };

		ret = shmt_guarded(guarded_pass, &a);
		if (ret < 0 || a.ret < 0) {
			ret = ret < 0 ? ret : (int)a.ret;
			break;
		}
		ret = 0;
		if (a.ret == 0 && !stop_requested())
			drain_sleep(d);
	}
	if (ret == 0) {
		struct pass_arg a = { d, 0, true };

		ret = shmt_guarded(guarded_pass, &a);
		if (ret == 0)
			ret = (int)a.ret;
	}
	if (ret < 0) {
		if (ret == -EFAULT)
			fprintf(stderr, "shmtrace-collector: ring '%s' was truncated under us; "
				"what was drained is in the capture\n", o.ring);
		else if (drain_fsync_failed(d))
			fprintf(stderr, "shmtrace-collector: fsync of '%s': %s; the capture was "
				"written but may not be on disk\n", drain_error_path(d), strerror(-ret));
		else
			fprintf(stderr, "shmtrace-collector: writing '%s': %s; what was written "
				"stays readable\n", drain_error_path(d), strerror(-ret));
		status = 1;
	}
	if (!quiet) {
		double secs = (double)(shmt_mono_ns() - t0) / 1e9;

		/* after an error, count only what the kernel confirmed written */
		drain_get_stats(d, ret < 0, &st);
		fprintf(stderr, "shmtrace-collector: %llu records, %llu bytes in %u file%s, "
			"%llu dropped, %llu overwritten, %llu torn, %.2f s, %.0f records/s, "
			"longest lock hold %.1f us\n",
			(unsigned long long)st.records, (unsigned long long)st.bytes,
			st.parts, st.parts == 1 ? "" : "s",
			(unsigned long long)st.ring.dropped, (unsigned long long)st.ring.overwritten,
			(unsigned long long)st.torn, secs, secs > 0 ? (double)st.records / secs : 0.0,
			(double)st.lock_hold_max_ns / 1000.0);
	}
	if (ret == 0)	/* after an error the segment may be gone */
		drain_warn_names(d);
	drain_free(d);
	/* after an error the ring keeps what was not drained, for a later
	 * collector or `shmtrace export --ring` */
	if (create && !keep && status == 0)
		shmtrace_ring_unlink(o.ring);
	else if (create && status)
		fprintf(stderr, "shmtrace-collector: ring '%s' kept in /dev/shm with what was not "
			"drained\n", o.ring);
	return status;
}
