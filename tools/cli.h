/* SPDX-License-Identifier: MIT */
/*
 * cli.h - what the subcommands of `shmtrace` share: exit codes, usage
 * errors, option parsing, time arguments (parse.h's parse_duration()),
 * and telling a ring name from a file.
 */
#ifndef SHMTRACE_CLI_H
#define SHMTRACE_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "parse.h"

#define EXIT_OK		0
#define EXIT_RUNTIME	1
#define EXIT_USAGE	2

/* Prints "shmtrace CMD: message" and "Try 'shmtrace CMD --help'." on
 * stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "shmtrace CMD: message" on stderr; returns EXIT_RUNTIME. */
int cli_runtime_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "shmtrace CMD: message" on stderr, and goes on. */
void cli_note(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What to add to the error of capture files that could not be opened: a
 * hint when one of them does not exist but a ring of its name does, else
 * "". */
const char *cli_ring_hint(char *const *files, size_t n);

/* A subcommand's options, as cli_getopt() parses them: its own, without
 * -h, --help and -V, --version, which cli_getopt() adds. */
struct cli_opts {
	const char *cmd;		/* "ls": names it in messages */
	const char *usage;		/* printed for -h, --help */
	const char *shortopts;		/* getopt's, starting with ':' */
	const struct option *longopts;	/* ended by a zero entry */
};

/* The long options of a subcommand whose only own option is --json. */
extern const struct option cli_json_longopts[];

/* Prints "shmtrace VERSION" on stdout: -V, --version of the command and
 * of every subcommand. */
void cli_version(void);

/* What cli_getopt() returns when the subcommand is to return *rc now. */
#define CLI_OPT_EXIT	(-2)

/* Resets getopt before a subcommand's first cli_getopt(). */
void cli_getopt_start(void);

/* After getopt_long() returned c, ':' (an option without its argument) or
 * '?' (an unknown one): says so naming the option as given ("--colour",
 * or "-x" of "-jx"), as shmtrace-collector does (cmdline.h). Returns
 * EXIT_USAGE. */
int cli_option_error(const char *cmd, int c, char **argv);

/* The next option of a subcommand's argv as getopt_long() returns it, with
 * what every subcommand does alike done here: -h and --help print the usage
 * on stdout, -V and --version the version (*rc = EXIT_OK), wherever they
 * are among the options; an unknown option or one without its argument
 * is a usage error (*rc = EXIT_USAGE). Returns the option's character, -1
 * after the last option, or CLI_OPT_EXIT. */
int cli_getopt(const struct cli_opts *o, int argc, char **argv, int *rc);

/* All the options of a subcommand whose one option is a flag (ls --json,
 * rm --force): from cli_getopt_start() on, *set when the option flag is
 * given. Returns 0, or CLI_OPT_EXIT (return *rc). */
int cli_getopt_flag(const struct cli_opts *o, int argc, char **argv, int flag, bool *set, int *rc);

/* Parses a pid (1..2^32-1). Returns 0 or -EINVAL. */
int parse_pid(const char *s, uint32_t *pid);

/* What the reading subcommands select by: --pid (repeatable), --from, --to
 * (relative to the earliest record). */
#define FILTER_MAX_PIDS 64
struct filter {
	uint32_t pids[FILTER_MAX_PIDS];
	size_t npids;
	uint64_t from, to;
	bool has_from, has_to;
};

/* Handles getopt's c if it is one of the filter options ('p' for --pid,
 * 'F' for --from, 'T' for --to). Returns -1 when it is not one of them,
 * 0 when handled, or EXIT_USAGE after printing what is wrong. */
int filter_option(struct filter *f, const char *cmd, int c, const char *arg);

/* Whether name is a ring name (ring_view.h's shmt_name_check()): returns
 * 0, or EXIT_USAGE after saying "invalid ring name 'NAME' (the rule)",
 * the one message of every command for a name no ring can have. */
int cli_check_ring_name(const char *cmd, const char *name);

/* Checks what a reading subcommand was given: an output (when out_hint is
 * not NULL, it says how to give one) that is none of its inputs, either
 * --ring (a valid name) or capture files, and --from before --to.
 * Returns 0, or EXIT_USAGE after saying what is wrong. */
int cli_check_inputs(const char *cmd, const char *out, const char *out_hint, const char *ring,
		     char *const *files, int nfiles, const struct filter *f);

/* Whether writing out (a whole file renamed over its name; "-" is
 * stdout) would replace one of the input files: returns 0, or EXIT_USAGE
 * after saying so. cli_check_inputs() checks -o with it; --split, each
 * piece. */
int cli_check_output(const char *cmd, const char *out, char *const *files, int nfiles);

/* True when no --pid was given or pid is one of them. */
bool filter_pid(const struct filter *f, uint32_t pid);

/* True when arg names an existing ring: not a path, and /dev/shm/arg exists. */
bool is_ring_name(const char *arg);

/* Sub-commands: create (create.c), export (export.c), ls and rm (ls.c),
 * snapshot, stat, summary, svg (tools/svg/) and stream (tools/otlp/). */
int cmd_create_ring(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_summary(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_svg(int argc, char **argv);
int cmd_stream(int argc, char **argv);

#endif
