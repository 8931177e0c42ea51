/* SPDX-License-Identifier: MIT */
/*
 * cmdline.h - what both programs, shmtrace and shmtrace-collector, say
 * alike about their command line and their standard output: a usage
 * error is "PROG: message" and "Try 'PROG --help'." on stderr, status 2,
 * an unknown option or one without its argument named as it was given; a
 * standard output that could not be written (--help or --version into a
 * full disk) is "PROG: writing output: why", status 1, as the commands
 * that write data say it. PROG is the program ("shmtrace-collector") or
 * the command ("shmtrace export").
 */
#ifndef SHMTRACE_CMDLINE_H
#define SHMTRACE_CMDLINE_H

#include <stdarg.h>

#define CMDLINE_EXIT_USAGE	2

/* "PROG: message" on stderr, without the end of the line; the message
 * may quote names given or read (term.h): escaped, never raw. */
void cmdline_vsay(const char *prog, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* "PROG: message" and "Try 'PROG --help'." on stderr; returns
 * CMDLINE_EXIT_USAGE. */
int cmdline_vusage(const char *prog, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
int cmdline_usage(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * After getopt_long() returned c, ':' (an option without its argument;
 * the option string starts with ':') or '?' (an unknown option), with
 * opterr 0: the usage error "unknown option 'NAME'" or "option 'NAME'
 * needs an argument", NAME as given ("--colour", or "-x" of "-jx").
 * Returns CMDLINE_EXIT_USAGE.
 */
int cmdline_option_error(const char *prog, int c, char **argv);

/* Writes text (a help, a version line) to stdout, flushed at once: why
 * it could not be, if so, is kept for cmdline_close_stdout() to say. */
void cmdline_put(const char *text);

/*
 * At the end of the program, which exits with rc: closes stdout. When
 * what was written to it could not all be written (a full disk, a closed
 * pipe's EPIPE) and rc is 0, says "PROG: writing output: why" and returns
 * 1; else rc (a command that failed said why already). A stdout closed
 * before, with nothing waiting to be written to it, is no error.
 */
int cmdline_close_stdout(const char *prog, int rc);

#endif
