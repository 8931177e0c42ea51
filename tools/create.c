/* SPDX-License-Identifier: MIT */
/*
 * create.c - `shmtrace create`: make a ring without running a collector,
 * with the options, bounds and defaults of `shmtrace-collector --create`,
 * through the same shmtrace_ring_create().
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "parse.h"
#include "ring_view.h"
#include "shmtrace.h"

static const char create_usage[] =
	"Usage: shmtrace create NAME [options]\n"
	"Creates the ring /dev/shm/NAME for producers to write into, without a\n"
	"collector: the ring stays until 'shmtrace rm NAME'. A collector started\n"
	"later drains it ('shmtrace-collector --ring NAME', or with --create and the\n"
	"same options, which adopts it); 'shmtrace export --ring NAME' reads it.\n"
	"\n"
	"      --capacity N         records in the ring, a power of two (default 262144)\n"
	"      --mode MODE          discard (default) or overwrite\n"
	"      --group              make the ring readable and writable by the group\n"
	"      --strings N          distinct names and categories the ring can intern,\n"
	"                           all processes together (default 4096, at most 65535)\n"
	"      --string-bytes BYTES text space for them (default 64 per string, at least\n"
	"                           256k; suffixes k, M)\n"
	"      --threads N          thread name slots: one per thread that ever writes,\n"
	"                           plus one per rename (default 1024)\n"
	"  -h, --help               show this help\n"
	"\n"
	"Exit status: 0 when created, 1 when it could not be (a ring of that name\n"
	"exists already), 2 on a usage error.\n";

/* The bounds of shmtrace-collector --create's options, and its messages. */
static const struct size_opt {
	uint64_t lo, hi;
	const char *err;
	int c;
	bool pow2;
} size_opts[] = {
	{ 1, SHMT_MAX_CAPACITY, "--capacity '%s': need a power of two up to 2^24", 'C', true },
	{ 1, SHMT_MAX_STRINGS, "--strings '%s': need 1 to 65535", 's', false },
	{ 64, 1u << 28, "--string-bytes '%s': need 64 to 256M", 'B', false },
	{ 1, SHMT_MAX_THREADS, "--threads '%s': need 1 to 1048576", 'T', false },
};

static const struct option create_longopts[] = {
	{ "capacity", required_argument, NULL, 'C' },
	{ "mode", required_argument, NULL, 'M' },
	{ "group", no_argument, NULL, 'G' },
	{ "strings", required_argument, NULL, 's' },
	{ "string-bytes", required_argument, NULL, 'B' },
	{ "threads", required_argument, NULL, 'T' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static const struct cli_opts create_opts = {
	.cmd = "create", .usage = create_usage, .shortopts = ":h", .longopts = create_longopts,
};

/* Option c's argument into its field of cfg. Returns 0 or EXIT_USAGE. */
static int size_option(struct shmtrace_ring_config *cfg, int c, const char *arg)
{
	for (size_t i = 0; i < sizeof(size_opts) / sizeof(size_opts[0]); i++) {
		const struct size_opt *o = &size_opts[i];
		uint64_t v;

		if (o->c != c)
			continue;
		if (parse_size(arg, &v) || v < o->lo || v > o->hi || (o->pow2 && (v & (v - 1)))) {
			char msg[96];

			snprintf(msg, sizeof(msg), o->err, arg);
			return cli_usage_error("create", "%s", msg);
		}
		*(c == 'C' ? &cfg->capacity : c == 's' ? &cfg->max_strings :
		  c == 'B' ? &cfg->string_bytes : &cfg->max_threads) = (uint32_t)v;
		return 0;
	}
	return cli_usage_error("create", "unknown option");
}

int cmd_create_ring(int argc, char **argv)
{
	struct shmtrace_ring_config cfg;
	char path[SHMT_PATH_MAX];
	const char *name;
	int c, rc = EXIT_OK, ret;

	memset(&cfg, 0, sizeof(cfg));
	cli_getopt_start();
	while ((c = cli_getopt(&create_opts, argc, argv, &rc)) > 0) {
		switch (c) {
		case 'M':
			if (!strcmp(optarg, "discard"))
				cfg.mode = SHMTRACE_MODE_DISCARD;
			else if (!strcmp(optarg, "overwrite"))
				cfg.mode = SHMTRACE_MODE_OVERWRITE;
			else
				return cli_usage_error("create", "--mode '%s': need discard or overwrite",
						       optarg);
			break;
		case 'G':
			cfg.perm = 0660;
			break;
		default:
			if ((rc = size_option(&cfg, c, optarg)) != 0)
				return rc;
		}
	}
	if (c == CLI_OPT_EXIT)
		return rc;
	if (optind == argc)
		return cli_usage_error("create", "no ring name given");
	if (optind + 1 < argc)
		return cli_usage_error("create", "one ring at a time ('%s' is one too many)",
				       argv[optind + 1]);
	name = argv[optind];
	if (shmt_ring_path(name, path, sizeof(path)) < 0)
		return cli_usage_error("create", "invalid ring name '%s' (1 to %d bytes, no '/', "
				       "not '.' or '..')", name, SHMT_NAME_MAX);
	/* text space grows with the table: 64 bytes a string, as the
	 * collector's --create */
	if (cfg.max_strings && !cfg.string_bytes && cfg.max_strings > 4096)
		cfg.string_bytes = cfg.max_strings * 64;
	ret = shmtrace_ring_create(name, &cfg);
	if (ret == -EEXIST)
		return cli_runtime_error("create", "ring '%s' already exists (%s); remove it first "
					 "with 'shmtrace rm %s'", name, path, name);
	if (ret < 0)
		return cli_runtime_error("create", "cannot create ring '%s': %s", name,
					 shmtrace_strerror(ret));
	return EXIT_OK;
}
