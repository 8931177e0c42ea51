/* SPDX-License-Identifier: MIT */
/*
 * default.c - the process-wide default handle (SHMTRACE_RING) and the
 * call-site descriptors of the SHMTRACE_* macros.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>

#include "producer.h"

SHMT_API shmtrace_t *shmtrace_default;

static shmtrace_t *g_waiting;
static pthread_mutex_t g_wait_lock = PTHREAD_MUTEX_INITIALIZER;

SHMT_API int shmtrace_default_open(const char *name)
{
	shmtrace_t *old = __atomic_exchange_n(&shmtrace_default, NULL, __ATOMIC_ACQ_REL);
	shmtrace_t *t = NULL, *waiting;
	int ret = 0;

	if (old)
		shmtrace_close(old);
	/* the caller decides now: stop waiting for SHMTRACE_RING's ring */
	pthread_mutex_lock(&g_wait_lock);
	waiting = g_waiting;
	g_waiting = NULL;
	pthread_mutex_unlock(&g_wait_lock);
	if (waiting)
		shmtrace_close(waiting);
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

SHMT_API uint32_t shmtrace_key_resolve(shmtrace_t *t, struct shmtrace_key_site *site)
{
	uint32_t id = shmtrace_intern(t, site->s);

	/* as for sites: racing threads store the same id */
	__atomic_store_n(&site->id, id, __ATOMIC_RELAXED);
	__atomic_store_n(&site->owner, t, __ATOMIC_RELEASE);
	return id;
}

/*
 * A default handle whose ring did not exist at start-up: a thread of ours
 * looks for it every 100 ms and publishes the handle once attached, so
 * that the macros cost one predictable branch until then, as when tracing
 * is off. The thread ends once attached; a forked child starts its own.
 */
static void *watch_ring(void *arg)
{
	shmtrace_t *t = arg;
	struct timespec nap = { 0, (long)SHMT_LOOK_NS };

	for (;;) {
		nanosleep(&nap, NULL);
		pthread_mutex_lock(&g_wait_lock);
		if (g_waiting != t) {		/* closed at exit meanwhile */
			pthread_mutex_unlock(&g_wait_lock);
			return NULL;
		}
		if (shmt_attach_current(t)) {
			g_waiting = NULL;
			__atomic_store_n(&shmtrace_default, t, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&g_wait_lock);
			return NULL;
		}
		pthread_mutex_unlock(&g_wait_lock);
	}
}

static void start_watcher(void)
{
	pthread_attr_t at;
	pthread_t th;
	sigset_t all, old;

	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 64 * 1024);
	/* the program's signals are not ours to take */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&th, &at, watch_ring, g_waiting) != 0)
		fprintf(stderr, "shmtrace: cannot start the thread that waits for ring '%s'; "
			"tracing is off\n", g_waiting->name);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
}

static void watcher_atfork_child(void)
{
	pthread_mutex_init(&g_wait_lock, NULL);
	if (g_waiting)
		start_watcher();
}

/* Attaches the default handle at load time when SHMTRACE_RING is set, so
 * tracing is turned on without a code change; when the ring is not there
 * yet, attaches once it appears. A failure is reported once and leaves
 * tracing off; it never stops the program. */
__attribute__((constructor)) static void default_from_env(void)
{
	const char *name = getenv("SHMTRACE_RING");
	shmtrace_t *t;
	int ret;

	if (!name || !*name)
		return;
	ret = shmtrace_open_wait(name, &t);
	if (ret < 0) {
		fprintf(stderr, "shmtrace: SHMTRACE_RING=%s: %s; tracing is off\n",
			name, shmtrace_strerror(ret));
		return;
	}
	if (t->cur) {
		__atomic_store_n(&shmtrace_default, t, __ATOMIC_RELEASE);
		return;
	}
	g_waiting = t;
	pthread_atfork(NULL, NULL, watcher_atfork_child);
	start_watcher();
}

/* Closes it at exit so staged records reach the ring. */
__attribute__((destructor)) static void default_at_exit(void)
{
	shmtrace_t *t = __atomic_exchange_n(&shmtrace_default, NULL, __ATOMIC_ACQ_REL);

	if (t)
		shmtrace_close(t);
	pthread_mutex_lock(&g_wait_lock);
	t = g_waiting;
	g_waiting = NULL;
	pthread_mutex_unlock(&g_wait_lock);
	if (t)
		shmtrace_close(t);
}
