/* SPDX-License-Identifier: MIT */
/*
 * split.h - `shmtrace export --split`: one output file per time window,
 * each a whole export of its piece (pick.h says which records).
 */
#ifndef SHMTRACE_SPLIT_H
#define SHMTRACE_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "cmd_common.h"
#include "pick.h"

/* More pieces than this is taken for a mistaken --split. */
#define SPLIT_MAX_PIECES	10000u

/*
 * The name of piece i of n for output out: the number before out's
 * extension ("trace.json" -> "trace.003.json"), or after its name when it
 * has none ("trace" -> "trace.003"), in at least three digits and as many
 * as n - 1 has, so that the names sort in time order. Returns 0, or
 * -ENAMETOOLONG when it does not fit len.
 */
int split_name(const char *out, uint64_t i, uint64_t n, char *buf, size_t len);

/* Exports each piece of pk (prepared with --split) through
 * chrome_export() to its split_name() of c->out. Prints its errors and
 * what it wrote; returns the exit code. */
int split_export(struct source *src, struct pick *pk, struct cmd *c);

#endif
