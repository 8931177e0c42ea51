/* SPDX-License-Identifier: MIT */
/*
 * fmt.h - numbers for people: durations and wall-clock times as text.
 */
#ifndef SHMTRACE_FMT_H
#define SHMTRACE_FMT_H

#include <stddef.h>
#include <stdint.h>

enum fmt_dur_style {
	FMT_DUR_TABLE,	/* "9999ns", "12.345us", "1.234ms", "12.345s": ns up to 10 us */
	FMT_DUR_LABEL,	/* "999 ns", "1.234 us", "1234.567 ms": ns up to 1 us, no s */
};

/* A duration with 3 decimals in the largest unit that fits the style. */
void fmt_dur(char *buf, size_t len, uint64_t ns, enum fmt_dur_style style);

/* The units of a column of durations (FMT_DUR_TABLE's): a column's values
 * are all shown in one, so that they compare at a glance. */
enum fmt_unit { FMT_NS, FMT_US, FMT_MS, FMT_S };

/* The unit FMT_DUR_TABLE shows ns in: from 10 of a unit up. */
enum fmt_unit fmt_dur_unit(uint64_t ns);
/* ns in unit: "1234ns" (whole), else 3 decimals ("0.005ms", "1302.527ms"). */
void fmt_dur_in(char *buf, size_t len, uint64_t ns, enum fmt_unit unit);

/* ISO 8601 UTC with nanoseconds, "2024-01-02T03:04:05.123456789Z", of ns
 * since the epoch; only the ".nnnnnnnnnZ" part when the date is beyond
 * gmtime_r(). */
void fmt_iso_ns(char *buf, size_t len, uint64_t ns);

#endif /* SHMTRACE_FMT_H */
