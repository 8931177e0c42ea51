/* SPDX-License-Identifier: MIT */
/* bench_tp.c - instantiates the probes of bench_tp.h. */
#define TRACEPOINT_CREATE_PROBES
#define TRACEPOINT_DEFINE
#include "bench_tp.h"
