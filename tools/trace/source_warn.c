/* SPDX-License-Identifier: MIT */
/*
 * source_warn.c - the tools' warnings on stderr, and the one every export
 * of a source gives about the records it lost, in one wording whatever the
 * output format.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "source.h"
#include "term.h"

void source_warnx(const char *fmt, ...)
{
	char msg[2048], esc[TERM_ESC_MAX(2048)];
	va_list ap;

	/* warnings quote names from rings and captures: escaped, never raw */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	term_escape(msg, strlen(msg), esc, sizeof(esc));
	fprintf(stderr, "shmtrace: warning: %s\n", esc);
}

void source_warn_lost(const struct source_loss *l)
{
	uint64_t lost = shmt_loss_records(&l->counters);
	char what[512];
	size_t n = 0;

	/* each record lost is counted once, under its cause; lock timeouts
	 * are attempts, said apart and never added to the records (the
	 * names and strings tables have their own warnings); counters that
	 * cannot be true were said to be corrupt, and are no counts */
	if (l->corrupt)
		return;
	what[0] = 0;
	for (size_t i = 0; i < SHMT_LOSS_NKINDS; i++) {
		const struct shmt_loss_kind *k = &shmt_loss_kinds[i];
		uint64_t v = shmt_loss_get(&l->counters, k);
		int r;

		if (!v || k->unit != SHMT_LOSS_RECORDS || n >= sizeof(what))
			continue;
		r = snprintf(what + n, sizeof(what) - n, "%s%llu %s", n ? ", " : "",
			     (unsigned long long)v, k->words);
		n += r > 0 ? (size_t)r : 0;
	}
	if (lost)
		source_warnx("%llu records were lost: %s", (unsigned long long)lost, what);
	for (size_t i = 0; i < SHMT_LOSS_NKINDS; i++) {
		const struct shmt_loss_kind *k = &shmt_loss_kinds[i];
		uint64_t v = shmt_loss_get(&l->counters, k);

		if (v && k->unit == SHMT_LOSS_ATTEMPTS)
			source_warnx("%llu %s", (unsigned long long)v, k->words);
	}
	if (l->unaccounted)
		source_warnx("%llu records are missing that no counter accounts for",
		       (unsigned long long)l->unaccounted);
}
