/* SPDX-License-Identifier: MIT */
/*
 * cmd_common.c - the skeleton of `shmtrace export` and `shmtrace svg`:
 * their shared options, opening the source and the output, error exits.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd_common.h"
#include "cmdline.h"
#include "extsort.h"

#define MAX_OPTS	24	/* shared and own long options, with the end */

static const struct option shared_opts[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "ring", required_argument, NULL, 'r' },
	{ "pid", required_argument, NULL, 'p' },
	{ "from", required_argument, NULL, 'F' },
	{ "to", required_argument, NULL, 'T' },
};

#define NSHARED	(sizeof(shared_opts) / sizeof(shared_opts[0]))

int cmd_parse(struct cmd *c, int argc, char **argv)
{
	struct option opts[MAX_OPTS] = { { 0 } };
	char shortopts[64];
	const struct cli_opts co = { c->name, c->usage, shortopts, opts };
	size_t n = NSHARED;
	int o, rc = EXIT_OK;

	memcpy(opts, shared_opts, sizeof(shared_opts));
	for (const struct option *l = c->longopts; l && l->name && n < MAX_OPTS - 1; l++)
		opts[n++] = *l;
	snprintf(shortopts, sizeof(shortopts), ":o:r:p:%s", c->shortopts ? c->shortopts : "");
	cli_getopt_start();
	/* -h, -V and bad options: cli_getopt()'s */
	while ((o = cli_getopt(&co, argc, argv, &rc)) > 0) {
		switch (o) {
		case 'o':
			c->out = optarg;
			break;
		case 'r':
			c->ring = optarg;
			break;
		case 'p':
		case 'F':
		case 'T':
			if ((rc = filter_option(c->flt, c->name, o, optarg)) != 0)
				return rc;
			break;
		default:
			if ((rc = c->option(c->ctx, o, optarg)) != 0)
				return rc;
			break;
		}
	}
	if (o == CLI_OPT_EXIT)
		return rc;
	c->files = argv + optind;
	c->nfiles = (size_t)(argc - optind);
	return CMD_CONTINUE;
}

int cmd_open(struct cmd *c, const char *out_hint)
{
	char err[768];
	int rc;

	rc = cli_check_inputs(c->name, c->out, out_hint, c->ring, c->files, (int)c->nfiles, c->flt);
	if (rc)
		return rc;
	if (source_open(c->src, c->ring, c->files, c->nfiles, err, sizeof(err)) < 0) {
		source_close(c->src);
		return cli_runtime_error(c->name, "%s%s", err, cli_ring_hint(c->files, c->nfiles));
	}
	return 0;
}

int cmd_create(struct cmd *c)
{
	char err[512];

	c->of.fd = -1;
	c->of.tmp = NULL;
	/* cli_check_inputs() made sure there is an out */
	if (!c->out || !strcmp(c->out, "-")) {
		c->f = stdout;
		return 0;
	}
	/* readable by no one the inputs do not let read them */
	if (outfile_open(&c->of, c->out, OUTFILE_WHOLE, outfile_mode_within(0666, c->src->perm), err,
			 sizeof(err)) < 0)
		return cli_runtime_error(c->name, "%s", err);
	c->f = fdopen(c->of.fd, "w");
	if (!c->f) {
		int e = errno;

		outfile_abort(&c->of);
		return cli_runtime_error(c->name, "cannot create %s: %s", c->out, strerror(e));
	}
	return 0;
}

void cmd_run_error(char *err, size_t errlen, int ret)
{
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	else
		snprintf(err, errlen, "temporary file in $TMPDIR (%s): %s", extsort_tempdir(),
			 strerror(-ret));
}

int cmd_finish(struct cmd *c, int ret, const char *err)
{
	FILE *f = c->f;
	char why[512];

	if (ret == 0 && fflush(f) != 0)
		ret = -errno;
	if (ret == 0 && ferror(f))
		ret = -EIO;
	if (f != stdout) {
		if (fclose(f) != 0 && ret == 0)
			ret = -errno;
		c->of.fd = -1;	/* fclose() closed it */
	}
	c->f = NULL;
	if (ret >= 0 && f != stdout && outfile_commit(&c->of, why, sizeof(why)) < 0)
		return cli_runtime_error(c->name, "%s", why);
	if (ret >= 0)
		return EXIT_OK;
	if (err[0])
		cli_runtime_error(c->name, "%s", err);
	else
		cli_runtime_error(c->name, "writing %s: %s", c->out, strerror(-ret));
	/* the output's path stays as it was */
	if (f != stdout)
		outfile_abort(&c->of);
	return EXIT_RUNTIME;
}
