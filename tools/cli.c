/* SPDX-License-Identifier: MIT */
/*
 * cli.c - what the subcommands share: messages, option parsing and
 * argument parsing.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cmdline.h"
#include "ring_view.h"

/* "shmtrace CMD", the program a subcommand's messages name, in buf */
static const char *prog_of(const char *cmd, char *buf, size_t len)
{
	snprintf(buf, len, "shmtrace %s", cmd);
	return buf;
}

/* "shmtrace CMD: message", without the end of the line (cmdline.h: the
 * message escaped) */
static void __attribute__((format(printf, 2, 0))) vsay(const char *cmd, const char *fmt, va_list ap)
{
	char prog[64];

	cmdline_vsay(prog_of(cmd, prog, sizeof(prog)), fmt, ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	char prog[64];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = cmdline_vusage(prog_of(cmd, prog, sizeof(prog)), fmt, ap);
	va_end(ap);
	return rc;
}

int cli_runtime_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(cmd, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_RUNTIME;
}

void cli_note(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(cmd, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const char *cli_ring_hint(char *const *files, size_t n)
{
	struct stat st;

	for (size_t i = 0; i < n; i++)
		if (stat(files[i], &st) < 0 && errno == ENOENT && is_ring_name(files[i]))
			return " (a ring of that name is in /dev/shm: --ring NAME reads it)";
	return "";
}

const struct option cli_json_longopts[] = {
	{ "json", no_argument, NULL, 'j' },
	{ NULL, 0, NULL, 0 },
};

void cli_version(void)
{
	cmdline_put("shmtrace " SHMTRACE_VERSION "\n");
}

void cli_getopt_start(void)
{
	opterr = 0;
	optind = 0;
}

int cli_option_error(const char *cmd, int c, char **argv)
{
	char prog[64];

	return cmdline_option_error(prog_of(cmd, prog, sizeof(prog)), c, argv);
}

/* The most long options a subcommand has, its own and these two. */
#define CLI_MAX_OPTS	48

int cli_getopt(const struct cli_opts *o, int argc, char **argv, int *rc)
{
	/* what every subcommand takes, wherever --help is taken */
	static const struct option every[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
	};
	struct option lo[CLI_MAX_OPTS];
	char so[128];
	size_t n = 0;
	int c;

	for (const struct option *l = o->longopts; l && l->name && n < CLI_MAX_OPTS - 3; l++)
		lo[n++] = *l;
	lo[n++] = every[0];
	lo[n++] = every[1];
	memset(&lo[n], 0, sizeof(lo[n]));
	snprintf(so, sizeof(so), "%shV", o->shortopts);
	c = getopt_long(argc, argv, so, lo, NULL);
	switch (c) {
	case 'h':
		cmdline_put(o->usage);
		*rc = EXIT_OK;
		return CLI_OPT_EXIT;
	case 'V':
		cli_version();
		*rc = EXIT_OK;
		return CLI_OPT_EXIT;
	case ':':
	case '?':
		*rc = cli_option_error(o->cmd, c, argv);
		return CLI_OPT_EXIT;
	default:
		return c;
	}
}

int cli_getopt_flag(const struct cli_opts *o, int argc, char **argv, int flag, bool *set, int *rc)
{
	int c;

	cli_getopt_start();
	while ((c = cli_getopt(o, argc, argv, rc)) > 0)
		if (c == flag)
			*set = true;
	return c == CLI_OPT_EXIT ? CLI_OPT_EXIT : 0;
}

int parse_pid(const char *s, uint32_t *pid)
{
	char *end;
	unsigned long long v;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v == 0 || v > UINT32_MAX)
		return -EINVAL;
	*pid = (uint32_t)v;
	return 0;
}

bool is_ring_name(const char *arg)
{
	char path[SHMT_PATH_MAX];
	struct stat st;

	return shmt_ring_path(arg, path, sizeof(path)) == 0 && lstat(path, &st) == 0;
}

int filter_option(struct filter *f, const char *cmd, int c, const char *arg)
{
	switch (c) {
	case 'p':
		if (f->npids == FILTER_MAX_PIDS)
			return cli_usage_error(cmd, "at most %d --pid options", FILTER_MAX_PIDS);
		if (parse_pid(arg, &f->pids[f->npids]) < 0)
			return cli_usage_error(cmd, "invalid pid '%s'", arg);
		f->npids++;
		return 0;
	case 'F':
	case 'T':
		if (parse_duration(arg, c == 'F' ? &f->from : &f->to) < 0)
			return cli_usage_error(cmd, "invalid time '%s' for --%s (try 1.5s, 200ms, 300us)",
					       arg, c == 'F' ? "from" : "to");
		*(c == 'F' ? &f->has_from : &f->has_to) = true;
		return 0;
	default:
		return -1;
	}
}

bool filter_pid(const struct filter *f, uint32_t pid)
{
	if (!f->npids)
		return true;
	for (size_t i = 0; i < f->npids; i++)
		if (f->pids[i] == pid)
			return true;
	return false;
}

/* path's directory, resolved, and its last name: "/abs/dir/name", or ""
 * when the directory cannot be resolved. */
static void entry_of(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	char dir[4096], *real;

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
	real = realpath(dir, NULL);
	if (real)
		snprintf(buf, len, "%s/%s", real, slash ? slash + 1 : path);
	else
		snprintf(buf, len, "%s", "");
	free(real);
}

/* Whether writing a whole output at out (a file renamed over its name)
 * replaces the input at in: the same file under the same name, however
 * spelled. A hard link's other name keeps the file. */
static bool replaces(const char *out, const struct stat *so, const char *in)
{
	char a[4352], b[4352];
	struct stat si;

	if (stat(in, &si) < 0 || si.st_dev != so->st_dev || si.st_ino != so->st_ino)
		return false;
	if (so->st_nlink == 1)
		return true;
	entry_of(out, a, sizeof(a));
	entry_of(in, b, sizeof(b));
	return !a[0] || !strcmp(a, b);
}

int cli_check_output(const char *cmd, const char *out, char *const *files, int nfiles)
{
	struct stat so;

	/* said now, not after the whole input is read */
	if (!*out)
		return cli_usage_error(cmd, "the output's name is empty (-o '')");
	/* the output replaces what is at its path once written: never an
	 * input (a slip of the keyboard would lose the capture) */
	if (strcmp(out, "-") && stat(out, &so) == 0 && S_ISREG(so.st_mode))
		for (int i = 0; i < nfiles; i++)
			if (replaces(out, &so, files[i]))
				return cli_usage_error(cmd, "the output '%s' is the input '%s': it "
						       "would be replaced", out, files[i]);
	return 0;
}

int cli_check_ring_name(const char *cmd, const char *name)
{
	if (shmt_name_check(name) < 0)
		return cli_usage_error(cmd, "invalid ring name '%s' (" SHMT_NAME_RULE ")", name);
	return 0;
}

int cli_check_inputs(const char *cmd, const char *out, const char *out_hint, const char *ring,
		     char *const *files, int nfiles, const struct filter *f)
{
	int ret;

	if (out_hint && !out)
		return cli_usage_error(cmd, "no output given (%s)", out_hint);
	if (!ring && !nfiles)
		return cli_usage_error(cmd, "no input given (capture files or --ring NAME)");
	if (ring && (ret = cli_check_ring_name(cmd, ring)))
		return ret;
	if (out && (ret = cli_check_output(cmd, out, files, nfiles)))
		return ret;
	if (f && f->has_from && f->has_to && f->from >= f->to)
		return cli_usage_error(cmd, "--from must be before --to");
	return 0;
}
