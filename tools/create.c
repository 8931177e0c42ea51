/* SPDX-License-Identifier: MIT */
/*
 * create.c - `shmtrace create`: make a ring without running a collector,
 * with the options, bounds and defaults of `shmtrace-collector --create`
 * (ring_config.h), through the same shmtrace_ring_create().
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ring_config.h"
#include "ring_format.h"
#include "ring_view.h"
#include "shmtrace.h"

static const char create_usage[] =
	"Usage: shmtrace create NAME [options]\n"
	"Creates the ring /dev/shm/NAME for producers to write into, without a\n"
	"collector: the ring stays until 'shmtrace rm NAME'. A collector started\n"
	"later drains it ('shmtrace-collector --ring NAME', or with --create and the\n"
	"same options, which adopts it); 'shmtrace export --ring NAME' reads it.\n"
	"\n"
	SHMT_RING_CFG_HELP
	"  -h, --help               show this help\n"
	"  -V, --version            show the version\n"
	"\n"
	"Exit status: 0 when created, 1 when it could not be (a ring of that name\n"
	"exists already), 2 on a usage error.\n";

static const struct option create_longopts[] = {
	SHMT_RING_CFG_LONGOPTS,
	{ NULL, 0, NULL, 0 },
};

static const struct cli_opts create_opts = {
	.cmd = "create", .usage = create_usage, .shortopts = ":", .longopts = create_longopts,
};

/* Whether the file at a ring's name is one: a regular file that starts
 * with the ring's magic (whatever its version or state). */
static bool is_a_ring(const char *name)
{
	uint64_t magic = 0;
	struct stat st;
	char err[256];
	int fd = shmt_ring_open_fd(name, SHMT_OPEN_ANY_OWNER, &st, err, sizeof(err));
	bool ring;

	/* one we may not open is someone's ring as far as we can tell */
	if (fd < 0)
		return fd != -ENODEV;
	ring = pread(fd, &magic, sizeof(magic), offsetof(struct shmt_header, magic)) ==
	       (ssize_t)sizeof(magic) && magic == SHMT_RING_MAGIC;
	close(fd);
	return ring;
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
		char bad[256];
		int taken = shmt_ring_cfg_option(&cfg, c, optarg, bad, sizeof(bad));

		if (taken < 0)
			return cli_usage_error("create", "%s", bad);
		if (!taken)
			return cli_usage_error("create", "unknown option");
	}
	if (c == CLI_OPT_EXIT)
		return rc;
	if (optind == argc)
		return cli_usage_error("create", "no ring name given");
	if (optind + 1 < argc)
		return cli_usage_error("create", "one ring at a time ('%s' is one too many)",
				       argv[optind + 1]);
	name = argv[optind];
	if ((ret = cli_check_ring_name("create", name)) != 0)
		return ret;
	shmt_ring_path(name, path, sizeof(path));
	shmt_ring_cfg_finish(&cfg);
	ret = shmtrace_ring_create(name, &cfg);
	/* shmtrace rm removes rings only: no advice it would refuse */
	if (ret == -EEXIST && !is_a_ring(name))
		return cli_runtime_error("create", "'%s' exists and is not a shmtrace ring; choose "
					 "another name", path);
	if (ret == -EEXIST)
		return cli_runtime_error("create", "ring '%s' already exists (%s); remove it first "
					 "with 'shmtrace rm %s'", name, path, name);
	if (ret < 0)
		return cli_runtime_error("create", "cannot create ring '%s': %s", name,
					 shmtrace_strerror(ret));
	return EXIT_OK;
}
