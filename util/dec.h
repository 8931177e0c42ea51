/* SPDX-License-Identifier: MIT */
/*
 * dec.h - the one decimal formatter of the writers (json_writer.c's jw,
 * obuf.c's buffers, the OTLP times): by hand, two digits a step, since
 * snprintf was 45 % of an export's time.
 */
#ifndef SHMTRACE_DEC_H
#define SHMTRACE_DEC_H

#include <stdint.h>

/* Longest output of dec_u64(): 2^64 - 1 has 20 digits. */
#define DEC_U64_MAX	20

/* "00" "01" ... "99": the two digits of n at dec_pairs + 2 * n. */
extern const char dec_pairs[201];

/* Writes v in decimal at p (no NUL); returns the end. */
char *dec_u64(char *p, uint64_t v);

#endif
