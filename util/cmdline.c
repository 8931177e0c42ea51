/* SPDX-License-Identifier: MIT */
/*
 * cmdline.c - usage errors and the end of standard output, alike in both
 * programs (cmdline.h).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cmdline.h"
#include "term.h"

void cmdline_vsay(const char *prog, const char *fmt, va_list ap)
{
	char msg[2048], esc[TERM_ESC_MAX(2048)];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	term_escape(msg, strlen(msg), esc, sizeof(esc));
	fprintf(stderr, "%s: %s", prog, esc);
}

int cmdline_vusage(const char *prog, const char *fmt, va_list ap)
{
	cmdline_vsay(prog, fmt, ap);
	fprintf(stderr, "\nTry '%s --help'.\n", prog);
	return CMDLINE_EXIT_USAGE;
}

int cmdline_usage(const char *prog, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = cmdline_vusage(prog, fmt, ap);
	va_end(ap);
	return rc;
}

int cmdline_option_error(const char *prog, int c, char **argv)
{
	/* a long option is the word getopt just passed (optopt is 0, or its
	 * value); a short one is named by its letter: it may sit inside a
	 * group getopt has not passed yet ("-qf": the word before it is
	 * another), or end one it has ("-fq") */
	const char *word = optind > 0 ? argv[optind - 1] : "";
	const char *cur = optind > 0 && argv[optind] ? argv[optind] : "";
	char letter[3] = { '-', (char)optopt, 0 };
	bool short_opt = optopt > 0 && optopt < 128 &&
			 (strncmp(word, "--", 2) ||
			  (cur[0] == '-' && cur[1] != '-' && strchr(cur + 1, optopt)));
	const char *name = short_opt ? letter : word;

	if (c == ':')
		return cmdline_usage(prog, "option '%s' needs an argument", name);
	return cmdline_usage(prog, "unknown option '%s'", name);
}

/* why cmdline_put() could not write, 0 when it could */
static int put_errno;

void cmdline_put(const char *text)
{
	/* flushed now: once the stream's buffer gave up the bytes it could
	 * not write, nothing said why any more */
	if ((fputs(text, stdout) == EOF || fflush(stdout) != 0) && !put_errno)
		put_errno = errno ? errno : EIO;
}

int cmdline_close_stdout(const char *prog, int rc)
{
	int e = put_errno;

	/* what waits in the buffer, written now: its errno said; an error
	 * met before, whose errno is gone, said as EIO */
	if (fflush(stdout) != 0 && !e)
		e = errno;
	else if (ferror(stdout) && !e)
		e = EIO;
	/* EBADF: a stdout closed before, nothing waiting (the flush above
	 * would have failed), is none (as gnulib's close_stdout()) */
	if (fclose(stdout) != 0 && !e && errno != EBADF)
		e = errno;
	if (!e || rc != 0)
		return rc;
	fprintf(stderr, "%s: writing output: %s\n", prog, strerror(e));
	return 1;
}
