/* SPDX-License-Identifier: MIT */
/*
 * default.c - the process-wide default handle (SHMTRACE_RING) and the
 * call-site descriptors of the SHMTRACE_* macros.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

SHMT_API shmtrace_t *shmtrace_default;

SHMT_API int shmtrace_default_open(const char *name)
{
	shmtrace_t *old = __atomic_exchange_n(&shmtrace_default, NULL, __ATOMIC_ACQ_REL);
	shmtrace_t *t = NULL;
	int ret = 0;

	if (old)
		shmtrace_close(old);
	if (name) {
		ret = shmtrace_open(name, &t);
		if (ret == 0)
			__atomic_store_n(&shmtrace_default, t, __ATOMIC_RELEASE);
	}
	return ret;
}

SHMT_API void shmtrace_site_resolve(shmtrace_t *t, struct shmtrace_site *site)
{
	/* two threads may resolve at once: both store the same ids */
	__atomic_store_n(&site->cat_id, shmtrace_intern(t, site->cat), __ATOMIC_RELAXED);
	__atomic_store_n(&site->name_id, shmtrace_intern(t, site->name), __ATOMIC_RELAXED);
	__atomic_store_n(&site->owner, t, __ATOMIC_RELEASE);
}

/* Attaches the default handle at load time when SHMTRACE_RING is set, so
 * tracing is turned on without a code change. A failure is reported once
 * and leaves tracing off; it never stops the program. */
__attribute__((constructor)) static void default_from_env(void)
{
	const char *name = getenv("SHMTRACE_RING");
	int ret;

	if (!name || !*name)
		return;
	ret = shmtrace_default_open(name);
	if (ret < 0)
		fprintf(stderr, "shmtrace: SHMTRACE_RING=%s: %s; tracing is off\n",
			name, shmtrace_strerror(ret));
}

/* Closes it at exit so staged records reach the ring. */
__attribute__((destructor)) static void default_at_exit(void)
{
	shmtrace_t *t = __atomic_exchange_n(&shmtrace_default, NULL, __ATOMIC_ACQ_REL);

	if (t)
		shmtrace_close(t);
}
