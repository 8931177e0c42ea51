// SPDX-License-Identifier: MIT
/*
 * source_warn.c - the warning every export of a source gives about the
 * records it lost, in one wording whatever the output format.
 */
#include "source.h"

void source_warn_lost(const struct source_loss *l)
{
	if (l->dropped || l->overwritten || l->lock_timeouts || l->torn)
		warnx_("records were lost: %llu dropped, %llu overwritten, %llu lock timeouts, "
		       "%llu torn", (unsigned long long)l->dropped,
		       (unsigned long long)l->overwritten, (unsigned long long)l->lock_timeouts,
		       (unsigned long long)l->torn);
	if (l->unaccounted)
		warnx_("%llu records are missing that no counter accounts for",
		       (unsigned long long)l->unaccounted);
}
