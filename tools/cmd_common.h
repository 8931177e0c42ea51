/* SPDX-License-Identifier: MIT */
/*
 * cmd_common.h - the skeleton shared by the subcommands that read a trace
 * and write one file (export, svg): the shared options, opening the
 * source, creating the output, and the error exits.
 */
#ifndef SHMTRACE_CMD_COMMON_H
#define SHMTRACE_CMD_COMMON_H

#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "outfile.h"
#include "source.h"

/* What cmd_parse() returns when the command goes on (not an exit code). */
#define CMD_CONTINUE	(-1)

struct cmd {
	/* given by the command */
	const char *name;		/* "export" */
	const char *usage;		/* the --help text */
	const char *shortopts;		/* of its own options, e.g. "w:" */
	const struct option *longopts;	/* of its own, ended by a zero entry */
	/* one of its own options: returns 0, or an exit code after saying why */
	int (*option)(void *ctx, int c, const char *arg);
	void *ctx;
	struct filter *flt;		/* filled by --pid, --from, --to */
	struct source *src;		/* opened by cmd_open() */
	/* filled by cmd_parse() */
	const char *out, *ring;
	char **files;
	size_t nfiles;
	FILE *f;			/* created by cmd_create() */
	struct outfile of;		/* what f writes: the temporary renamed to out */
};

/* Parses -o, -r, -p, --from, --to, -h and the command's own options.
 * Returns CMD_CONTINUE, or the exit code after --help or a usage error. */
int cmd_parse(struct cmd *c, int argc, char **argv);

/* Checks the inputs (out_hint as for cli_check_inputs()) and opens the source.
 * Returns 0, or an exit code after saying what is wrong (the source is then
 * closed). */
int cmd_open(struct cmd *c, const char *out_hint);

/* Creates the output (stdout for "-"): a temporary beside out, renamed
 * over it by cmd_finish() once all is written (outfile.h: a symbolic link
 * or a FIFO at out is refused). Returns 0 or EXIT_RUNTIME. */
int cmd_create(struct cmd *c);

/* Flushes and closes the output after the command's run returned ret (0 or
 * -errno, err saying why when not empty), and moves it into place; on
 * failure says so and removes the temporary, so that out is left as it
 * was. Returns EXIT_OK or EXIT_RUNTIME. */
int cmd_finish(struct cmd *c, int ret, const char *err);

/* Says in err why an export's run failed with ret (-errno) when neither
 * its input (which says so itself) nor its output did: out of memory, or
 * else its temporary files, the only other files an export writes
 * ("temporary file in $TMPDIR (DIR): ..."). */
void cmd_run_error(char *err, size_t errlen, int ret);

#endif /* SHMTRACE_CMD_COMMON_H */
