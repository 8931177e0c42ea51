/* SPDX-License-Identifier: MIT */
/*
 * main.c - the `shmtrace` command: dispatch to its subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmdline.h"

static const char usage[] =
	"Usage: shmtrace COMMAND [options]\n"
	"Reads traces written by libshmtrace, from capture files made by\n"
	"shmtrace-collector or straight from a ring in /dev/shm; creates, lists and\n"
	"removes rings.\n"
	"\n"
	"Commands:\n"
	"  create   create a ring in /dev/shm without running a collector\n"
	"  export   convert to Chrome Trace Event JSON (Perfetto, DevTools)\n"
	"  ls       list the rings in /dev/shm: fill, producers, collector, age\n"
	"  rm       remove rings that no process uses any more\n"
	"  snapshot copy what a ring holds now into a capture file, producers writing on\n"
	"  stat     show the state of a ring or a capture file\n"
	"  stream   send a capture's spans to an OpenTelemetry endpoint, as it grows\n"
	"  summary  span statistics per process and name\n"
	"  svg      draw a window of a trace as an SVG timeline\n"
	"\n"
	"Options:\n"
	"  -h, --help     show this help ('shmtrace COMMAND --help' or 'shmtrace help\n"
	"                 COMMAND' for a command)\n"
	"  -V, --version  show the version (also 'shmtrace COMMAND --version')\n"
	"\n"
	"Exit status: 0 success, 1 runtime error, 2 usage error.\n";

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
};

static const struct command *find(const struct command *cmds, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(name, cmds[i].name))
			return &cmds[i];
	return NULL;
}

/* who says that standard output could not be written: "shmtrace", or
 * the subcommand that ran ("shmtrace export") */
static char prog[64] = "shmtrace";

/* argv[0] names the subcommand, which runs with argv as its own */
static int run(const struct command *cmds, size_t n, int argc, char **argv)
{
	const struct command *c = find(cmds, n, argv[0]);

	if (c) {
		snprintf(prog, sizeof(prog), "shmtrace %s", c->name);
		return c->fn(argc, argv);
	}
	fprintf(stderr, "shmtrace: unknown command '%s'\nTry 'shmtrace --help'.\n", argv[0]);
	return EXIT_USAGE;
}

static int dispatch(int argc, char **argv)
{
	static const struct command cmds[] = { { "create", cmd_create_ring }, { "export", cmd_export }, { "ls", cmd_ls }, { "rm", cmd_rm },
		    { "snapshot", cmd_snapshot }, { "stat", cmd_stat }, { "stream", cmd_stream },
		    { "summary", cmd_summary },
		    { "svg", cmd_svg } };

	if (argc < 2) {
		fputs("shmtrace: no command given\nTry 'shmtrace --help'.\n", stderr);
		return EXIT_USAGE;
	}
	/* "shmtrace help COMMAND" is "shmtrace COMMAND --help" */
	if (!strcmp(argv[1], "help") && argc > 2) {
		char *help[] = { argv[2], "--help", NULL };

		return run(cmds, sizeof(cmds) / sizeof(cmds[0]), 2, help);
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		cmdline_put(usage);
		return EXIT_OK;
	}
	/* the version of the command; a subcommand's is its own option
	 * (cli_getopt()) */
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		cli_version();
		return EXIT_OK;
	}
	return run(cmds, sizeof(cmds) / sizeof(cmds[0]), argc - 1, argv + 1);
}

/* What was printed (a help, the version, a command's output) reached
 * stdout, or the exit status says it did not (1): a --help into a full
 * disk is no success. */
int main(int argc, char **argv)
{
	int rc = dispatch(argc, argv);

	return cmdline_close_stdout(prog, rc);
}
