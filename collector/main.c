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
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "clock.h"
#include "cmdline.h"
#include "drain.h"
#include "flight.h"
#include "hold.h"
#include "parts.h"
#include "parse.h"
#include "priority.h"
#include "ring_config.h"
#include "ring_reader.h"
#include "streamer.h"

/* A second stop signal this soon after the first is the same one again:
 * GNU timeout, and a terminal's Ctrl-C, signal the collector and then its
 * process group, which holds it too. */
#define SIGNAL_REPEAT_NS	(1000ull * 1000 * 1000)
#define LINGER_DEFAULT_S	5
#define PROG			"shmtrace-collector"

static volatile sig_atomic_t g_stop;
static uint64_t g_stop_ns;
/* what a forced exit names: set once the session drains */
static struct drain *volatile g_drain;
static const char *g_ring, *g_output;

/* write(2) of s, then of n in decimal: all a signal handler may do */
static void say(const char *s)
{
	ssize_t r = write(STDERR_FILENO, s, strlen(s));

	(void)r;
}

static void say_u64(uint64_t n)
{
	char buf[24], *p = buf + sizeof(buf);

	*--p = '\0';
	do
		*--p = (char)('0' + n % 10);
	while ((n /= 10) && p > buf);
	say(p);
}

/*
 * The second signal means now: the capture stays a valid prefix, the ring
 * stays in /dev/shm with what was not drained, and stderr says where.
 */
static void forced_exit(void)
{
	struct drain *d = g_drain;

	say("shmtrace-collector: stopped at once by a second signal; ");
	if (d) {
		say("the capture '");
		say(g_output);
		say("' ends cut short and ");
		say_u64(drain_undrained(d));
		say(" records are still in ring '");
		say(g_ring);
		say("': shmtrace export ");
		say(g_output);
		say(" --ring ");
		say(g_ring);
		say("\n");
	} else {
		say("nothing was drained\n");
	}
	_exit(130);
}

/* What stops the collector cleanly: SIGHUP too, which a terminal or an
 * ssh session that closes sends, whose default action ended the collector
 * with no last pass and no END frame, what the ring still held unsaid */
static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP };

static void on_signal(int sig)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC);	/* async-signal-safe */

	(void)sig;
	if (!g_stop) {
		g_stop_ns = now;
		g_stop = 1;
	} else if (now - g_stop_ns >= SIGNAL_REPEAT_NS) {
		forced_exit();
	}
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
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++)
		sigaddset(&s, stop_signals[i]);
	sigprocmask(SIG_BLOCK, &s, NULL);
#endif
}

static bool stop_requested(void)
{
#if SHMT_TSAN
	sigset_t s;

	if (!g_stop && sigpending(&s) == 0)
		for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++)
			if (sigismember(&s, stop_signals[i]) == 1)
				g_stop = 1;
#endif
	return g_stop;
}

static const char usage[] =
"Usage: shmtrace-collector --ring NAME --output FILE [OPTION]...\n"
"       shmtrace-collector --ring NAME --flight-recorder --snapshot-dir DIR [OPTION]...\n"
"Drain a shmtrace ring into a capture file until SIGINT, SIGTERM or SIGHUP, or keep\n"
"it as a flight recorder, writing snapshots of it when something asks.\n"
"\n"
"  -r, --ring NAME          ring in /dev/shm to drain\n"
"  -o, --output FILE        capture file to write (one already there is kept as\n"
"                           FILE.prevK; never through a symbolic link, nor into\n"
"                           a FIFO)\n"
"  -c, --create             create the ring first, or adopt the ring of that name\n"
"                           if it has the same configuration (a restart); remove\n"
"                           it on exit once no producer is attached\n"
"      --recreate           with --create, replace an existing ring even if it\n"
"                           could be adopted (its producers move to the new one)\n"
"  -p, --poll-interval MS   wake at least every MS milliseconds while producers\n"
"                           write (default 100); idle, back off to 10 x MS\n"
"      --max-size BYTES     rotate to FILE.1, FILE.2, ... when a part reaches BYTES\n"
"                           (suffixes k, M, G; a part may pass it by one batch, 330 kB)\n"
"      --max-files N        with --max-size, keep the newest N parts (2 to 1000000):\n"
"                           the oldest is deleted as a new one begins, and the parts\n"
"                           left say which were deleted and how many records they held\n"
"      --keep-ring          with --create, leave the ring in /dev/shm on exit\n"
"      --linger SECONDS     after the stop signal, go on draining while producers\n"
"                           are attached, at most SECONDS (default 5; 0: stop now);\n"
"                           with --otlp-endpoint, as long again for the stream to\n"
"                           send what the capture holds\n"
"      --ready-fd FD        write \"ready\\n\" to FD and close it once draining\n"
"      --write-engine E     how the capture is written: pwrite (by the collector's\n"
"                           thread), io_uring (by kernel worker threads where the\n"
"                           file has no non-blocking writes), or auto (default):\n"
"                           pwrite on tmpfs and ramfs, io_uring elsewhere\n"
"      --nice N|auto        run at nice value N (-20 to 19); auto (default): -10\n"
"                           at first and while the drain falls behind, 0 while\n"
"                           it keeps up (as started, if not at 0 or where -10\n"
"                           is refused)\n"
STREAMER_HELP
"  -q, --quiet              no summary line on exit\n"
"  -h, --help               show this help and exit\n"
"  -V, --version            show the version and exit\n"
"\n"
"The flight recorder:\n"
FLIGHT_HELP
"\n"
"The ring's configuration, with --create:\n"
SHMT_RING_CFG_HELP
"\n"
"A second stop signal, a second or more after the first, stops at once\n"
"and says what stays in the ring.\n"
"\n"
"Exit status: 0 after a clean stop, 1 on a runtime error (the capture written\n"
"so far stays readable, the ring keeps the rest), 2 on a usage error,\n"
"130 when stopped at once by a second signal.\n";

/* The numeric options (getopt's value of each) and what they accept, as
 * shmt_layout_compute() does for the ring's; outside it, a usage error. */
static const struct num_opt {
	int c;
	struct num_spec spec;
} num_opts[] = {
	{ 'p', { "--poll-interval", 1, 60000, 0, "ms" } },
	{ 'S', { "--max-size", 1u << 20, UINT64_MAX, PARSE_SUFFIX, NULL } },
	/* at least 2: with 1, the one part left just after each rotation
	 * would hold almost nothing */
	{ 'F', { "--max-files", 2, 1000000, 0, NULL } },
	{ 'R', { "--ready-fd", 0, 1000000, 0, NULL } },
	{ 'L', { "--linger", 0, 3600, 0, "seconds" } },
};

/* Parses option c's argument into *v if c is a numeric option. Returns 0,
 * or -EINVAL with the usage error in err. */
static int parse_num_opt(int c, const char *arg, uint64_t *v, char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(num_opts) / sizeof(num_opts[0]); i++)
		if (num_opts[i].c == c)
			return parse_num(arg, &num_opts[i].spec, v, err, errlen);
	return 0;
}

/* A usage error, said as the shmtrace command says its own (cmdline.h):
 * status 2. */
#define usage_error(...) cmdline_usage(PROG, __VA_ARGS__)

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

/* One pass (or, with final, the last one) over d, guarded against the
 * segment shrinking under us: records copied, or -errno. */
static long pass(struct drain *d, bool final)
{
	struct pass_arg a = { d, 0, final };
	int ret = shmt_guarded(guarded_pass, &a);

	return ret < 0 ? ret : a.ret;
}

struct rest_arg {
	struct drain *d;
	bool idle;	/* the last pass moved nothing */
};

static int guarded_rest(void *p)
{
	struct rest_arg *a = p;

	if (a->idle)
		drain_sleep(a->d);
	else
		drain_yield(a->d);
	return 0;
}

/* The nap between passes, if any (a pass that moved nothing sleeps; one
 * awake long yields): it writes the header's sleeping flag and waits on
 * its futex, guarded as a pass is. A pass followed by the next at once
 * pays no guard (three system calls). 0, or -EFAULT. */
static int rest(struct drain *d, bool idle)
{
	struct rest_arg a = { d, idle };

	if (!idle && !drain_awake_long(d, shmt_mono_ns()))
		return 0;
	return shmt_guarded(guarded_rest, &a);
}

/* The command line, checked. */
struct args {
	struct drain_opts o;
	struct flight_opts fl;
	struct shmtrace_ring_config cfg;
	bool create, keep, quiet, recreate;
	uint64_t linger_ns;
	bool linger_given;
	int ready_fd;
	int nice;			/* --nice, or NICE_BEHIND */
	bool nice_given;
	struct streamer stream;		/* --otlp-endpoint and the options it takes */
};

/*
 * The collector's priority. It is the ring's one drain: with more runnable
 * producers than cores, a collector at the producers' priority got 1/33 of
 * the CPU beside 32 flat-out producers on 2 cores, and about two thirds of
 * their records were dropped; at nice -10 it keeps up with most of them
 * (`make bench`'s case 9a, docs/BENCHMARKS.md). But a collector above the
 * producers takes the CPU from one whenever it runs, often inside a span
 * call, which then lasts the drain's slice. So by default the drain
 * starts at -10 and moves between it and the nice value it was started at,
 * 0, with its backlog (priority.h); the flight recorder, which sleeps but
 * to save, stays at -10. Lowering a nice value needs CAP_SYS_NICE or
 * RLIMIT_NICE: where the system refuses, the default stays silent (a
 * warning only for --nice given), and a collector started at another nice
 * value than 0 (`nice -n 5 shmtrace-collector ...`) keeps it unless --nice
 * is given.
 */
#define NICE_BEHIND (-10)

static int parse_nice(const char *arg, int *out, bool *given)
{
	char *end;
	long v;

	*given = strcmp(arg, "auto") != 0;
	if (!*given) {
		*out = NICE_BEHIND;
		return 0;
	}
	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < -20 || v > 19)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

/* Sets the nice value of the collector's one thread so far, before any
 * other exists, or sets p to move it with the drain's backlog. Threads
 * and processes it starts take the value it has then, and keep it: the
 * io_uring engine's kernel workers do not follow the drain down. */
static void set_nice(const struct args *a, struct prio *p)
{
	int now;
	bool as_started, follow;

	errno = 0;
	now = getpriority(PRIO_PROCESS, 0);
	as_started = !a->nice_given && (errno || now != 0);
	follow = !a->nice_given && !as_started && !a->fl.on;
	prio_init(p, follow, now, a->nice);
	if (as_started || follow)
		return;
	if (setpriority(PRIO_PROCESS, 0, a->nice) < 0 && a->nice_given)
		fprintf(stderr, "shmtrace-collector: warning: --nice %d: %s; running at nice %d\n", a->nice,
			strerror(errno), now);
}

/* The options together; returns -1 to go on, or the exit status. */
static int check_args(struct args *a, const char *ready_arg)
{
	const char *fl = flight_check(&a->fl, a->o.output != NULL, a->create, a->cfg.mode);

	if (!a->o.ring)
		return usage_error("%s", "--ring NAME is required");
	if (shmt_name_check(a->o.ring) < 0)
		return usage_error("invalid ring name '%s' (" SHMT_NAME_RULE ")", a->o.ring);
	if (fl)
		return usage_error("%s", fl);
	if (!a->o.output && !a->fl.on)
		return usage_error("%s", "--output FILE is required");
	if (a->fl.on && (a->o.engine != CW_ENGINE_AUTO || a->o.max_size || a->o.max_files ||
			 a->linger_given || a->stream.argc || a->stream.endpoint))
		return usage_error("%s", "--write-engine, --max-size, --max-files, --linger and the "
				   "stream's options (--otlp-*, --service) are a capture's; "
				   "--flight-recorder writes none");
	if (!a->create && shmt_ring_cfg_given(&a->cfg))
		return usage_error("%s", "--capacity, --mode, --group, --strings, --string-bytes "
				   "and --threads need --create");
	shmt_ring_cfg_finish(&a->cfg);
	/* checked now, not found out once the ring is made and draining */
	if (a->ready_fd >= 0 && fcntl(a->ready_fd, F_GETFL) < 0)
		return usage_error("--ready-fd %s: not an open file descriptor", ready_arg);
	if (a->ready_fd >= 0 && (fcntl(a->ready_fd, F_GETFL) & O_ACCMODE) == O_RDONLY)
		return usage_error("--ready-fd %s: the descriptor is not open for writing", ready_arg);
	if (a->recreate && !a->create)
		return usage_error("%s", "--recreate needs --create");
	if (a->o.max_files && !a->o.max_size)
		return usage_error("%s", "--max-files needs --max-size (parts are made by rotation)");
	if (a->stream.argc && !a->stream.endpoint)
		return usage_error("%s", "--service and the --otlp-* options need --otlp-endpoint");
	if (a->keep && !a->create)
		fprintf(stderr, "shmtrace-collector: warning: --keep-ring has no effect without "
			"--create (a ring the collector did not create is never removed)\n");
	return -1;
}

/* Parses argv into a; returns -1 to go on, or the exit status. */
static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "ring", required_argument, NULL, 'r' },
		{ "output", required_argument, NULL, 'o' },
		{ "create", no_argument, NULL, 'c' },
		SHMT_RING_CFG_LONGOPTS,
		FLIGHT_LONGOPTS,
		{ "poll-interval", required_argument, NULL, 'p' },
		{ "max-size", required_argument, NULL, 'S' },
		{ "max-files", required_argument, NULL, 'F' },
		{ "keep-ring", no_argument, NULL, 'K' },
		{ "recreate", no_argument, NULL, 'X' },
		{ "linger", required_argument, NULL, 'L' },
		{ "ready-fd", required_argument, NULL, 'R' },
		{ "nice", required_argument, NULL, 'n' },
		{ "write-engine", required_argument, NULL, 'W' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		STREAMER_LONGOPTS,
		{ 0 }
	};
	struct shmtrace_ring_config *cfg = &a->cfg;
	const char *ready_arg = NULL;
	char bad[256];
	uint64_t v = 0;
	int c;

	memset(a, 0, sizeof(*a));
	streamer_init(&a->stream);
	a->o.poll_ns = 100ull * 1000 * 1000;
	a->linger_ns = LINGER_DEFAULT_S * 1000000000ull;
	a->ready_fd = -1;
	a->nice = NICE_BEHIND;
	/* an unknown option, or one without its argument, is named here */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":r:o:cp:qhV", opts, NULL)) != -1) {
		int taken = shmt_ring_cfg_option(cfg, c, optarg, bad, sizeof(bad));

		if (!taken)
			taken = flight_option(&a->fl, c, optarg, bad, sizeof(bad));
		if (taken < 0 || parse_num_opt(c, optarg, &v, bad, sizeof(bad)) < 0)
			return usage_error("%s", bad);
		if (taken || (taken = streamer_option(&a->stream, c, optarg)) > 0)
			continue;
		if (taken < 0)
			return 2;
		switch (c) {
		case 'r': a->o.ring = optarg; break;
		case 'o': a->o.output = optarg; break;
		case 'c': a->create = true; break;
		case 'p': a->o.poll_ns = v * 1000000ull; break;
		case 'S': a->o.max_size = v; break;
		case 'F': a->o.max_files = (uint32_t)v; break;
		case 'K': a->keep = true; break;
		case 'X': a->recreate = true; break;
		case 'L':
			a->linger_ns = v * 1000000000ull;
			a->linger_given = true;
			break;
		case 'R':
			a->ready_fd = (int)v;
			ready_arg = optarg;
			break;
		case 'n':
			if (parse_nice(optarg, &a->nice, &a->nice_given) < 0)
				return usage_error("--nice '%s': auto, or a whole number from -20 to 19", optarg);
			break;
		case 'W':
			if (cw_engine_parse(optarg, &a->o.engine) < 0)
				return usage_error("--write-engine '%s': auto, pwrite or io_uring", optarg);
			break;
		case 'q': a->quiet = true; break;
		case 'h': cmdline_put(usage); return 0;
		case 'V': cmdline_put("shmtrace-collector " SHMTRACE_VERSION "\n"); return 0;
		default:	/* ':' or '?' */
			return cmdline_option_error(PROG, c, argv);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	return check_args(a, ready_arg);
}

static void install_signals(void)
{
	struct sigaction sa;

	/* a file-size limit must be an EFBIG error, not a silent death; so
	 * must a write to the pipe of a stream that died (streamer.c), which
	 * is then started again */
	signal(SIGXFSZ, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++) {
		struct sigaction old;

		/* SIGHUP ignored by who started us stays so: nohup(1) ignores
		 * it so that the session closing does not stop us (a shell
		 * ignores SIGINT for its background jobs, which still stop
		 * on it, as they always did) */
		if (stop_signals[i] == SIGHUP && sigaction(SIGHUP, NULL, &old) == 0 &&
		    old.sa_handler == SIG_IGN)
			continue;
		sigaction(stop_signals[i], &sa, NULL);
	}
	block_stop_signals();
}

/*
 * The ring a replacement retires, drained into FILE.replaced beside the
 * new ring's capture: opened before the new ring takes the name, drained
 * on each pass while its producers move (each at its next call), finished
 * when none is left attached or at the stop. NULL when there is none to
 * drain: no ring, one we cannot read, or one another collector drains
 * (that collector keeps its records); NULL with *refused set, after saying
 * why, when FILE.replaced cannot be written (then nothing is replaced).
 */
static struct drain *open_retiring(const struct args *a, char *path, size_t len, bool *refused)
{
	struct drain_opts o = a->o;
	struct drain *d = drain_new();

	snprintf(path, len, "%s.replaced", a->o.output);
	o.output = path;
	o.max_size = 0;
	o.max_files = 0;
	if (d && drain_open(d, &o) == 0)
		return d;
	/* a ring to drain, and nowhere to put it: not replaced, not lost */
	*refused = d && drain_part_failed(d);
	if (*refused)
		fprintf(stderr, "shmtrace-collector: cannot keep the records of the ring '%s' would "
			"replace: %s\n", a->o.ring, drain_error(d));
	drain_free(d);
	return NULL;
}

/* Ends the retired ring's session, saying where its records are (once
 * the session is freed, with it the last reference to the replaced
 * segment). Returns true when its capture failed. What the replaced ring
 * still holds then, or reached it after its last pass, is lost with it
 * (it has no name): said with its count. */
static bool finish_retired(struct drain **dp, const char *path)
{
	struct drain *d = *dp;
	struct drain_stats st;
	long ret = pass(d, true);
	uint64_t left = drain_undrained(d);

	drain_get_stats(d, ret < 0, &st);
	drain_free(d);
	*dp = NULL;
	if (ret < 0)
		fprintf(stderr, "shmtrace-collector: the replaced ring's capture '%s': %s; what was "
			"written stays readable\n", path, strerror((int)-ret));
	else if (st.ring_corrupt)
		fprintf(stderr, "shmtrace-collector: the replaced ring's %llu records are in '%s' "
			"(loss counters corrupt (%s): not reported); export it with the capture\n",
			(unsigned long long)st.records, path, st.ring_corrupt_why);
	else
		fprintf(stderr, "shmtrace-collector: the replaced ring's %llu records are in '%s' "
			"(%llu dropped, %llu lost to lock timeouts); export it with the capture\n",
			(unsigned long long)st.records, path, (unsigned long long)st.ring.dropped,
			(unsigned long long)st.ring.lock_dropped);
	if (left)
		fprintf(stderr, "shmtrace-collector: %llu records of the replaced ring were not "
			"drained and are lost with the replaced ring\n", (unsigned long long)left);
	return ret < 0;
}

/*
 * A capture already at -o (a collector before this one, started again with
 * the same command) is kept aside, never truncated: it holds records the
 * ring has let go of. After the stream has taken the parts it has not
 * sent, before a ring is made or replaced: a collector that cannot keep
 * it leaves the ring as it was. Called once this collector holds the
 * ring's claim (drain_attach()): a collector that drains the ring may be
 * writing that capture, and this one then never moves it. Returns 0, or
 * -1 after saying why.
 */
static int keep_previous(const struct args *a)
{
	char kept[4200], err[1024];
	int n;

	n = parts_keep_previous(a->o.output, kept, sizeof(kept), err, sizeof(err));

	if (n < 0) {
		fprintf(stderr, "shmtrace-collector: %s\n", n == -ENOMEM ? strerror(ENOMEM) : err);
		return -1;
	}
	if (n)
		fprintf(stderr, "shmtrace-collector: the capture already at '%s' is kept as '%s' "
			"(%d file%s); export it with this run's: shmtrace export %s*\n", a->o.output,
			kept, n, n == 1 ? "" : "s", a->o.output);
	return 0;
}

/*
 * --create: a restart adopts the ring it left, records and producers and
 * all; a ring of another configuration (or any, with --recreate) is
 * replaced, what it held drained into *retired. Returns what was done, or
 * -1 after saying why not.
 */
static int make_ring(struct args *a, struct drain **retired, char *path, size_t len)
{
	int created = -EEXIST;
	bool refused = false;

	*retired = NULL;
	if (!a->recreate) {
		a->cfg.flags |= SHMTRACE_CREATE_ADOPT;
		created = shmtrace_ring_create(a->o.ring, &a->cfg);
		a->cfg.flags &= ~SHMTRACE_CREATE_ADOPT;
	}
	if (created == -EEXIST) {
		*retired = open_retiring(a, path, len, &refused);
		if (refused)
			return -1;
		a->cfg.flags |= SHMTRACE_CREATE_REPLACE;
		created = shmtrace_ring_create(a->o.ring, &a->cfg);
		if (*retired && created != SHMTRACE_REPLACED) {
			drain_free(*retired);	/* not replaced after all */
			*retired = NULL;
			unlink(path);
		}
	}
	if (created < 0) {
		fprintf(stderr, "shmtrace-collector: cannot create ring '%s': %s\n", a->o.ring,
			shmtrace_strerror(created));
		return -1;
	}
	if (created == SHMTRACE_REPLACED)
		fprintf(stderr, "shmtrace-collector: replaced ring '%s' (%s); its producers move "
			"to the new one\n", a->o.ring, a->recreate ? "--recreate" :
			"it had another configuration");
	return created;
}

/*
 * Drains d until a stop signal, then on while producers are attached (a
 * service shutting down with its collector: what it records on its way
 * out is its to keep), at most linger_ns, then the last pass. The ring a
 * replacement retired, if any, is drained alongside and finished once no
 * thread is attached to it (*retired_failed when its capture could not be
 * written: the exit status is then 1). The priority follows the drain's
 * backlog (prio). Returns 0 or -errno.
 */
static int run(struct drain *d, uint64_t linger_ns, struct drain **retired, const char *rpath,
	       struct streamer *stream, struct prio *prio, bool *retired_failed)
{
	bool stopping = false;
	uint64_t until = 0;
	long ret;

	for (;;) {
		if (!stopping && stop_requested()) {
			stopping = true;
			until = shmt_mono_ns() + linger_ns;
		}
		if (stopping && (shmt_mono_ns() >= until || !drain_live_writers(d)))
			break;
		ret = pass(d, false);
		if (ret < 0)
			return (int)ret;
		prio_update(prio, drain_backlog(d), shmt_mono_ns());
		streamer_poll(stream, drain_behind(d));
		if (*retired && (pass(*retired, false) < 0 || !drain_live_writers(*retired)))
			*retired_failed = finish_retired(retired, rpath);
		if (!stopping && stop_requested())
			continue;
		if (rest(d, ret == 0) < 0)
			return -EFAULT;
	}
	if (*retired)
		*retired_failed = finish_retired(retired, rpath);
	ret = pass(d, true);
	return ret < 0 ? (int)ret : 0;
}

/*
 * A start that failed once --create made or replaced the ring. A ring
 * made for this run goes with it, unless another collector took its
 * claim first (busy) and drains it now; one that replaced another has
 * that one's producers now, and is kept for the next collector.
 */
static void undo_make_ring(const struct args *a, int created, bool busy)
{
	if (created == SHMTRACE_CREATED && !busy)
		shmtrace_ring_unlink(a->o.ring);
	else if (created == SHMTRACE_REPLACED)
		fprintf(stderr, "shmtrace-collector: ring '%s' kept: the producers of the ring it "
			"replaced write into it; a collector with a capture it can write drains "
			"it\n", a->o.ring);
}

/* Why drain_attach() or drain_open() failed with ret. */
static void say_open_error(const struct drain *d, int ret)
{
	fprintf(stderr, "shmtrace-collector: %s\n",
		drain_error(d)[0] ? drain_error(d) : shmtrace_strerror(ret));
}

static void say_error(struct drain *d, const struct drain_opts *o, int ret)
{
	if (ret == -EFAULT)
		fprintf(stderr, "shmtrace-collector: ring '%s' was truncated under us; "
			"what was drained is in the capture\n", o->ring);
	else if (ret == -ESTALE)	/* the capture was deleted or replaced */
		fprintf(stderr, "shmtrace-collector: %s\n", drain_error(d));
	else if (drain_part_failed(d))	/* the next part of a rotation */
		fprintf(stderr, "shmtrace-collector: %s; what was written before stays readable\n",
			drain_error(d));
	else if (drain_fsync_failed(d))
		fprintf(stderr, "shmtrace-collector: fsync of '%s': %s; the capture was "
			"written but may not be on disk\n", drain_error_path(d), strerror(-ret));
	else
		fprintf(stderr, "shmtrace-collector: writing '%s': %s; what was written "
			"stays readable\n", drain_error_path(d), strerror(-ret));
}

static void say_summary(const struct drain *d, bool failed, uint64_t t0, const struct prio *p)
{
	double secs = (double)(shmt_mono_ns() - t0) / 1e9;
	struct drain_stats st;
	char files[160], raised[64] = "";
	int n;

	if (p->governed)
		snprintf(raised, sizeof(raised), ", at nice %d for %.2f s", p->high,
			 (double)prio_raised_ns(p, shmt_mono_ns()) / 1e9);

	/* after an error, count only what the kernel confirmed written */
	drain_get_stats(d, failed, &st);
	n = snprintf(files, sizeof(files), "%u file%s", st.parts, st.parts == 1 ? "" : "s");
	if (st.parts_deleted)
		snprintf(files + n, sizeof(files) - (size_t)n, " (%u deleted by --max-files, with "
			 "%llu records)", st.parts_deleted, (unsigned long long)st.records_deleted);
	/* the ring's counters, when they cannot be true, are no counts: the
	 * session's own (records, torn) still are */
	if (st.ring_corrupt) {
		fprintf(stderr, "shmtrace-collector: %llu records, %llu bytes in %s, "
			"loss counters corrupt (%s): not reported, %llu torn, "
			"%.2f s, %.0f records/s, longest lock hold %.1f us (%llu of %llu over %llu us)%s\n",
			(unsigned long long)st.records, (unsigned long long)st.bytes,
			files, st.ring_corrupt_why,
			(unsigned long long)st.torn, secs, secs > 0 ? (double)st.records / secs : 0.0,
			(double)st.lock_hold_max_ns / 1000.0, (unsigned long long)st.lock_holds_long,
			(unsigned long long)st.lock_holds, HOLD_LONG_NS / 1000, raised);
		return;
	}
	fprintf(stderr, "shmtrace-collector: %llu records, %llu bytes in %s, "
		"%llu dropped, %llu lost to lock timeouts, %llu overwritten, %llu torn, "
		"%.2f s, %.0f records/s, longest lock hold %.1f us (%llu of %llu over %llu us)%s\n",
		(unsigned long long)st.records, (unsigned long long)st.bytes,
		files,
		(unsigned long long)st.ring.dropped, (unsigned long long)st.ring.lock_dropped,
		(unsigned long long)st.ring.overwritten,
		(unsigned long long)st.torn, secs, secs > 0 ? (double)st.records / secs : 0.0,
		(double)st.lock_hold_max_ns / 1000.0, (unsigned long long)st.lock_holds_long,
		(unsigned long long)st.lock_holds, HOLD_LONG_NS / 1000, raised);
}

/* Whether the capture at path is one a reader opens (a regular file that
 * begins with a whole header, shmt_cap_open()): what the hint to export
 * it with the ring may name. A device (/dev/full) is none, nor is a file
 * whose header could not be written. */
static bool capture_readable(const char *path)
{
	struct shmt_cap_reader *r;
	char err[256];

	if (shmt_cap_open(path, &r, err, sizeof(err)) < 0)
		return false;
	shmt_cap_close(r);
	return true;
}

/*
 * The end of a ring this collector created or adopted: removed only when
 * nothing is lost by it, that is after a clean stop, with no producer
 * attached (no other process maps it, no live thread owns a block: a
 * restarted collector adopts it and drains on), nothing in it
 * past the capture's end (a producer that closed its handle after the last
 * drain flushed its block into it), and only if its name still refers to
 * the segment drained (else it is another collector's ring now). After a
 * failure, the same holds of a ring this run created (created), which no
 * producer came to and which holds nothing (the collector could not even
 * write its capture's header): nothing is lost with it. Any other stays
 * with what the capture lacks, and the export that reads it is said.
 */
static void leave_ring(struct drain *d, const struct drain_opts *o, int created, bool keep,
		       bool failed)
{
	uint64_t left;
	uint32_t live;
	int ret;

	if (keep && !failed)
		return;
	live = drain_mappers(d);
	left = drain_undrained(d);
	if (failed && (keep || created != SHMTRACE_CREATED || live || left ||
		       drain_live_writers(d))) {
		/* the capture in the command only if there is one to read */
		bool cap = capture_readable(o->output);

		fprintf(stderr, "shmtrace-collector: ring '%s' kept in /dev/shm with what was not "
			"drained (%llu records): shmtrace export %s%s--ring %s\n", o->ring,
			(unsigned long long)left, cap ? o->output : "", cap ? " " : "", o->ring);
		return;
	}
	if (live || left || drain_live_writers(d)) {
		fprintf(stderr, "shmtrace-collector: ring '%s' left in /dev/shm (%u other process%s "
			"attached, %llu records written since the last drain); the same command "
			"adopts it and drains on\n", o->ring, live, live == 1 ? "" : "es",
			(unsigned long long)left);
		return;
	}
	ret = drain_unlink_ring(d);
	if (ret == -ESTALE)
		fprintf(stderr, "shmtrace-collector: ring '%s' was removed and made again by "
			"someone else; that ring is left alone\n", o->ring);
	/* a producer that wrote in the instant between the look and the
	 * removal: rare, and said */
	else if (ret == 0 && (left = drain_undrained(d)))
		fprintf(stderr, "shmtrace-collector: warning: %llu records reached ring '%s' as it "
			"was removed; they are not in the capture\n", (unsigned long long)left,
			o->ring);
}

/* Of a ring the collector did not make: what reached it after the last
 * pass (producers still writing at the stop) stays in it, said. */
static void say_left(struct drain *d, const struct drain_opts *o)
{
	uint64_t left = drain_undrained(d);

	if (left)
		fprintf(stderr, "shmtrace-collector: %llu records reached ring '%s' after the last "
			"pass; they stay in it for the next collector (or shmtrace export %s --ring "
			"%s)\n", (unsigned long long)left, o->ring, o->output, o->ring);
}

static int collect(int argc, char **argv)
{
	struct drain *d, *retired = NULL;
	char rpath[4096 + 16];
	struct prio prio;
	int created = SHMTRACE_CREATED, ret, status;
	bool retired_failed = false;
	struct args a;
	uint64_t t0;

	ret = parse_args(argc, argv, &a);
	if (ret >= 0)
		return ret;
	install_signals();
	set_nice(&a, &prio);
	if (a.fl.on)
		return a.create && flight_make_ring(a.o.ring, &a.cfg, a.recreate) < 0 ? 1 :
		       flight_run(a.o.ring, a.o.poll_ns, &a.fl, a.quiet, a.ready_fd, stop_requested);
	if (!(d = drain_new())) {
		fprintf(stderr, "shmtrace-collector: %s\n", strerror(ENOMEM));
		return 1;
	}
	/*
	 * What can refuse the start is asked before anything on disk
	 * changes (the stream's backlog moved aside, a capture kept aside, a
	 * ring made or replaced, the capture begun), so that a collector
	 * that will not run leaves all as it was. First the ring, unless
	 * --create makes it: there, of a format this collector reads, and
	 * drained by no other collector (the claim, taken now, is kept).
	 */
	if (!a.create && (ret = drain_attach(d, &a.o)) < 0) {
		say_open_error(d, ret);
		drain_free(d);
		return 1;
	}
	/* with --create, a ring there already that another collector
	 * drains: said now, before the stream starts (the claim itself is
	 * taken once the ring is made) */
	if (a.create && hold_claimed(a.o.ring)) {
		fprintf(stderr, "shmtrace-collector: another collector is already draining ring "
			"'%s'\n", a.o.ring);
		drain_free(d);
		return 1;
	}
	/* then the stream, before the capture is opened, which truncates
	 * what it held, and before a ring is made or replaced: it checks
	 * its options (a usage error, 2) and finds its tool, and a
	 * collector that cannot stream leaves the ring its producers use as
	 * it was */
	if (a.stream.endpoint && (status = streamer_start(&a.stream, a.o.output)) != 0) {
		drain_free(d);
		return status;
	}
	if (!a.create && keep_previous(&a) < 0) {
		streamer_finish(&a.stream, false, 0);
		drain_free(d);
		return 1;
	}
	if (a.create && (created = make_ring(&a, &retired, rpath, sizeof(rpath))) < 0) {
		streamer_finish(&a.stream, false, 0);
		drain_free(d);
		return 1;
	}
	/* the ring made, its claim at once, before a capture is kept aside:
	 * a collector started beside this one may have claimed it first,
	 * and drains it now */
	if (a.create && ((ret = drain_attach(d, &a.o)) < 0 || keep_previous(&a) < 0)) {
		if (ret < 0)
			say_open_error(d, ret);
		streamer_finish(&a.stream, false, 0);
		if (retired)
			finish_retired(&retired, rpath);
		/* before the claim is let go with d */
		undo_make_ring(&a, created, ret == -EBUSY);
		drain_free(d);
		return 1;
	}
	ret = drain_open(d, &a.o);
	if (ret < 0) {
		say_open_error(d, ret);
		streamer_finish(&a.stream, false, 0);
		if (retired)
			finish_retired(&retired, rpath);
		if (a.create)
			undo_make_ring(&a, created, false);
		drain_free(d);
		return 1;
	}
	if (created == SHMTRACE_ADOPTED)
		fprintf(stderr, "shmtrace-collector: adopted ring '%s' as it was, with %llu records "
			"not drained yet\n", a.o.ring, (unsigned long long)drain_undrained(d));
	g_ring = a.o.ring;
	g_output = a.o.output;
	g_drain = d;
	if (a.ready_fd >= 0) {
		if (write(a.ready_fd, "ready\n", 6) != 6)
			fprintf(stderr, "shmtrace-collector: warning: --ready-fd %d: %s\n",
				a.ready_fd, strerror(errno));
		close(a.ready_fd);
	}
	t0 = shmt_mono_ns();
	prio_count_from(&prio, t0);
	ret = run(d, a.linger_ns, &retired, rpath, &a.stream, &prio, &retired_failed);
	status = ret < 0 || retired_failed;
	if (ret < 0)
		say_error(d, &a.o, ret);
	if (!a.quiet)
		say_summary(d, ret < 0, t0, &prio);
	/* the capture ended with its END frame only after a clean stop */
	streamer_finish(&a.stream, ret == 0, a.linger_ns);
	if (a.stream.endpoint && !a.quiet)
		fprintf(stderr, "shmtrace-collector: stream: %s\n", a.stream.line);
	if (ret == 0)	/* after an error the segment may be gone */
		drain_warn_names(d);
	g_drain = NULL;
	if (a.create)
		leave_ring(d, &a.o, created, a.keep, ret < 0);
	else if (ret == 0)
		say_left(d, &a.o);
	drain_free(d);
	return status;
}

/* --help and --version reached stdout, or the exit status says they did
 * not (1), as the shmtrace command's does */
int main(int argc, char **argv)
{
	return cmdline_close_stdout(PROG, collect(argc, argv));
}
