/* SPDX-License-Identifier: MIT */
/*
 * fmt.c - numbers for people: the one duration formatter and the one ISO
 * time formatter of the CLI.
 */
#include <stdio.h>
#include <time.h>

#include "fmt.h"

static const struct {
	const char *unit;
	uint64_t ns;
} units[] = { { "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 } };

/* The largest unit up to top of which ns is at least at times one. */
static size_t unit_of(uint64_t ns, uint64_t at, size_t top)
{
	size_t i = 0;

	while (i < top && ns >= at * units[i + 1].ns)
		i++;
	return i;
}

static void put_in(char *buf, size_t len, uint64_t ns, size_t i, const char *sep)
{
	if (i == 0)
		snprintf(buf, len, "%llu%sns", (unsigned long long)ns, sep);
	else
		snprintf(buf, len, "%.3f%s%s", (double)ns / (double)units[i].ns, sep, units[i].unit);
}

void fmt_dur(char *buf, size_t len, uint64_t ns, enum fmt_dur_style style)
{
	/* TABLE switches to a unit at 10 of it and goes up to s; LABEL at 1,
	 * up to ms */
	if (style == FMT_DUR_LABEL)
		put_in(buf, len, ns, unit_of(ns, 1, 2), " ");
	else
		put_in(buf, len, ns, unit_of(ns, 10, 3), "");
}

enum fmt_unit fmt_dur_unit(uint64_t ns)
{
	return (enum fmt_unit)unit_of(ns, 10, 3);
}

void fmt_dur_in(char *buf, size_t len, uint64_t ns, enum fmt_unit unit)
{
	put_in(buf, len, ns, unit <= FMT_S ? (size_t)unit : FMT_S, "");
}

void fmt_iso_ns(char *buf, size_t len, uint64_t ns)
{
	time_t secs = (time_t)(ns / 1000000000ull);
	struct tm tm;
	size_t n = 0;

	if (!len)
		return;
	buf[0] = 0;
	if (gmtime_r(&secs, &tm))
		n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%09lluZ", (unsigned long long)(ns % 1000000000ull));
}
