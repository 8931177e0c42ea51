/* SPDX-License-Identifier: MIT */
/*
 * cli.h - what the subcommands of `shmtrace` share: exit codes, usage
 * errors, time arguments, and telling a ring name from a file.
 */
#ifndef SHMT_CLI_H
#define SHMT_CLI_H

#include <stdbool.h>
#include <stdint.h>

#define EXIT_OK		0
#define EXIT_RUNTIME	1
#define EXIT_USAGE	2

/* Prints "shmtrace CMD: message" and "Try 'shmtrace CMD --help'." on
 * stderr; returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "shmtrace CMD: message" on stderr; returns EXIT_RUNTIME. */
int runtime_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parses a duration: a decimal number with a unit s, ms, us or ns (no unit:
 * seconds), e.g. "1.5s", "200ms", "300us". Returns 0 or -EINVAL. */
int parse_duration(const char *s, uint64_t *ns);

/* Parses a pid (1..2^32-1). Returns 0 or -EINVAL. */
int parse_pid(const char *s, uint32_t *pid);

/* True when arg names an existing ring: not a path, and /dev/shm/arg exists. */
bool is_ring_name(const char *arg);

/* Sub-commands. */
int cmd_export(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_summary(int argc, char **argv);

#endif
