/* SPDX-License-Identifier: MIT */
/* json_check.h - the fuzz harnesses' strict JSON validator (json_check.c). */
#ifndef SHMTRACE_FUZZ_JSON_CHECK_H
#define SHMTRACE_FUZZ_JSON_CHECK_H

#include <stddef.h>

const char *json_check(const char *buf, size_t len, size_t *at);
int json_check_selftest(void);

#endif
