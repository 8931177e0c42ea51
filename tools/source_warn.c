/* SPDX-License-Identifier: MIT */
/*
 * source_warn.c - the tools' warnings on stderr, and the one every export
 * of a source gives about the records it lost, in one wording whatever the
 * output format.
 */
#include <stdarg.h>
#include <stdio.h>

#include "source.h"

void source_warnx(const char *fmt, ...)
{
	va_list ap;

	fputs("shmtrace: warning: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void source_warn_lost(const struct source_loss *l)
{
	if (l->dropped || l->overwritten || l->lock_timeouts || l->torn)
		source_warnx("records were lost: %llu dropped, %llu overwritten, %llu lock timeouts, "
		       "%llu torn", (unsigned long long)l->dropped,
		       (unsigned long long)l->overwritten, (unsigned long long)l->lock_timeouts,
		       (unsigned long long)l->torn);
	if (l->unaccounted)
		source_warnx("%llu records are missing that no counter accounts for",
		       (unsigned long long)l->unaccounted);
}
