/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c - `shmtrace snapshot`: what a ring holds now, copied into a
 * capture file while its producers write on (capture/snapshot.h), read
 * only: no lock taken, the tail not moved, nothing reset.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ring_reader.h"
#include "snapshot.h"
#include "term.h"

static const char snapshot_usage[] =
	"Usage: shmtrace snapshot RING -o FILE [--last DURATION] [--max-size SIZE]\n"
	"Copies what the ring /dev/shm/RING holds now into the capture file FILE,\n"
	"while its producers write on: read only, without the ring's lock, its\n"
	"tail and counters left as they are, so a collector draining it goes on\n"
	"undisturbed. Records the producers overwrite during the copy are counted\n"
	"(in the file), never copied torn; those the threads have staged are\n"
	"copied too. Read the file with 'shmtrace export FILE' like any capture.\n"
	"A ring in overwrite mode (--mode overwrite) keeps the newest records: a\n"
	"flight recorder, of which this saves the recent past.\n"
	"\n"
	"  -o, --output FILE      the capture file to write (written whole, then\n"
	"                         named: never through a symbolic link)\n"
	"      --last DURATION    only the records that end in the last DURATION\n"
	"                         (1.5s, 200ms, 300us; default: all the ring holds)\n"
	"      --max-size SIZE    leave the oldest records out until FILE is at most\n"
	"                         SIZE bytes (suffixes k, M, G; the names and the\n"
	"                         threads' staged records are always whole)\n"
	"  -q, --quiet            no summary line\n"
	"  -h, --help             show this help\n"
	"  -V, --version          show the version\n"
	"\n"
	"Exit status: 0 when written, 1 when the ring cannot be read or the file\n"
	"written, 2 on a usage error.\n";

static const struct option snapshot_longopts[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "last", required_argument, NULL, 'l' },
	{ "max-size", required_argument, NULL, 'S' },
	{ "quiet", no_argument, NULL, 'q' },
	{ NULL, 0, NULL, 0 },
};

static const struct cli_opts snapshot_opts = {
	.cmd = "snapshot", .usage = snapshot_usage, .shortopts = ":o:q",
	.longopts = snapshot_longopts,
};

struct snapshot_args {
	const char *ring, *out;
	uint64_t last_ns, max_bytes;
	bool quiet;
};

/* The command line into a; -1 to go on, else the exit status. */
static int parse(int argc, char **argv, struct snapshot_args *a)
{
	static const struct num_spec max_size = { "--max-size", 4096, UINT64_MAX, PARSE_SUFFIX,
						  NULL };
	char bad[256];
	int c, rc = EXIT_OK;

	memset(a, 0, sizeof(*a));
	cli_getopt_start();
	while ((c = cli_getopt(&snapshot_opts, argc, argv, &rc)) > 0) {
		switch (c) {
		case 'o': a->out = optarg; break;
		case 'q': a->quiet = true; break;
		case 'l':
			if (parse_duration(optarg, &a->last_ns) < 0 || !a->last_ns)
				return cli_usage_error("snapshot", "invalid duration '%s' for --last "
						       "(try 10s, 200ms, 300us)", optarg);
			break;
		case 'S':
			if (parse_num(optarg, &max_size, &a->max_bytes, bad, sizeof(bad)) < 0)
				return cli_usage_error("snapshot", "%s", bad);
			break;
		default:
			return cli_usage_error("snapshot", "unknown option");
		}
	}
	if (c == CLI_OPT_EXIT)
		return rc;
	if (optind == argc)
		return cli_usage_error("snapshot", "no ring name given");
	if (optind + 1 < argc)
		return cli_usage_error("snapshot", "one ring at a time ('%s' is one too many)",
				       argv[optind + 1]);
	a->ring = argv[optind];
	if ((rc = cli_check_ring_name("snapshot", a->ring)) != 0)
		return rc;
	if (!a->out)
		return cli_usage_error("snapshot", "no output given (-o FILE.cap)");
	if ((rc = cli_check_output("snapshot", a->out, NULL, 0)))
		return rc;
	return -1;
}

/* One line on stderr: what was written, and what the copy lost (the
 * names given are escaped, as every line of the tools that quotes one). A
 * snapshot that holds no record has no start (capture.h): no sequences,
 * no duration are said of it. */
static void say(const struct snapshot_args *a, const struct shmt_snap_result *r)
{
	const struct shmt_cap_snapshot *in = &r->info;
	char msg[1024], esc[TERM_ESC_MAX(1024)], window[160] = "";
	int n;

	if (in->from_ns)
		snprintf(window, sizeof(window), " (sequences %llu to %llu, %.3f s, and %llu staged)",
			 (unsigned long long)in->first_seq, (unsigned long long)in->end_seq,
			 (double)(in->to_ns - in->from_ns) / 1e9, (unsigned long long)in->staged);
	n = snprintf(msg, sizeof(msg), "%llu records of ring '%s'%s in '%s', %llu bytes; %llu "
		     "overwritten during the copy", (unsigned long long)r->records, a->ring, window,
		     a->out, (unsigned long long)r->bytes, (unsigned long long)in->overwritten);
	if (in->cut && n > 0 && (size_t)n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - (size_t)n, ", the %llu oldest left out for "
			 "--max-size", (unsigned long long)in->cut);
	fprintf(stderr, "shmtrace snapshot: %s\n", term_str(msg, esc, sizeof(esc)));
}

int cmd_snapshot(int argc, char **argv)
{
	struct snapshot_args a;
	struct shmt_snap_opts o;
	struct shmt_snap_result res;
	struct shmt_view v;
	char err[512];
	uint64_t now;
	int rc = parse(argc, argv, &a), ret;

	if (rc >= 0)
		return rc;
	/* read-only, whoever owns it, as every reader of a ring */
	ret = shmt_view_open(a.ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err));
	if (ret < 0)
		return cli_runtime_error("snapshot", "%s", err);
	now = shmt_clock_now(&v.clock);
	memset(&o, 0, sizeof(o));
	o.ring = a.ring;
	o.since_ns = a.last_ns && a.last_ns < now ? now - a.last_ns : 0;
	o.max_bytes = a.max_bytes;
	o.info.cause = SHMT_SNAP_COMMAND;
	o.info.trigger_ns = now;
	o.info.trigger_pid = (uint32_t)getpid();
	ret = shmt_snapshot_write(&v, a.out, &o, &res, err, sizeof(err));
	shmt_view_close(&v);
	if (ret < 0)
		return cli_runtime_error("snapshot", "%s", err);
	if (!a.quiet)
		say(&a, &res);
	return EXIT_OK;
}
