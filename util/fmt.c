/* SPDX-License-Identifier: MIT */
/*
 * fmt.c - numbers for people: the one duration formatter and the one ISO
 * time formatter of the CLI.
 */
#include <stdio.h>
#include <time.h>

#include "fmt.h"

void fmt_dur(char *buf, size_t len, uint64_t ns, enum fmt_dur_style style)
{
	static const struct {
		const char *unit;
		uint64_t ns;
	} u[] = { { "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 } };
	/* TABLE switches to a unit at 10 of it and goes up to s; LABEL at 1,
	 * up to ms */
	const char *sep = style == FMT_DUR_LABEL ? " " : "";
	uint64_t at = style == FMT_DUR_LABEL ? 1 : 10;
	size_t top = style == FMT_DUR_LABEL ? 2 : 3, i = 0;

	while (i < top && ns >= at * u[i + 1].ns)
		i++;
	if (i == 0)
		snprintf(buf, len, "%llu%sns", (unsigned long long)ns, sep);
	else
		snprintf(buf, len, "%.3f%s%s", (double)ns / (double)u[i].ns, sep, u[i].unit);
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
