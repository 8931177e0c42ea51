/* SPDX-License-Identifier: MIT */
/*
 * process.c - the producing process: its identity (pid, start time, pid
 * namespace, name; the variables are core.c's), kept right across fork();
 * the registry of its live
 * handles, so that a thread's exit never touches a closed ring; and the
 * names of its threads.
 */
#include <fcntl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "producer.h"

/* a name set with shmtrace_set_thread_name(), kept for the rings this
 * thread first writes to later */
static __thread char tls_tname[SHMT_NAME_LEN] SHMT_TLS;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static shmtrace_t *g_handles[SHMT_MAX_HANDLES];
static uint64_t g_removed;	/* handles closed so far: shmt_slot_of_closed() */
static pthread_key_t g_exit_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void read_comm(char *buf, const char *path)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	buf[0] = 0;
	if (fd < 0)
		return;
	n = read(fd, buf, SHMT_NAME_LEN - 1);
	close(fd);
	if (n < 0)
		n = 0;
	buf[n] = 0;
	if (n && buf[n - 1] == '\n')
		buf[n - 1] = 0;
}

static void refresh_identity(void)
{
	shmt_pid = (uint32_t)getpid();
	shmt_start = shmt_proc_start_time(shmt_pid);
	shmt_pidns = shmt_self_pidns();
	read_comm(shmt_pname, "/proc/self/comm");
}

/* A fork waits for the registry and for every live handle's own lock:
 * a thread of the parent that held one (an intern waits up to 100 ms
 * for the ring lock holding its handle's) does not exist in the child,
 * which would wait for it forever at its first new string. Lock order:
 * the registry, then handles (nothing takes the registry holding a
 * handle's lock). */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&g_lock);
	for (int i = 0; i < SHMT_MAX_HANDLES; i++)
		if (g_handles[i])
			pthread_mutex_lock(&g_handles[i]->local);
}

static void atfork_parent(void)
{
	for (int i = 0; i < SHMT_MAX_HANDLES; i++)
		if (g_handles[i])
			pthread_mutex_unlock(&g_handles[i]->local);
	pthread_mutex_unlock(&g_lock);
}

static void atfork_child(void)
{
	refresh_identity();
	__atomic_fetch_add(&shmt_fork_gen, 1, __ATOMIC_RELAXED);
	/* taken by atfork_prepare(), in this thread */
	atfork_parent();
	/* the parent's blocks are the parent's: a handle of the child frees
	 * only what the child claims through it */
	for (int i = 0; i < SHMT_MAX_HANDLES; i++)
		for (struct shmt_att *a = g_handles[i] ? g_handles[i]->cur : NULL; a; a = a->prev)
			memset(a->claimed, 0, (a->v.nblocks + 63) / 64 * sizeof(uint64_t));
}

/* Frees this thread's blocks in every live ring when it exits. */
static void thread_exit(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g_lock);
	for (int i = 0; i < SHMT_TLS_SLOTS; i++) {
		struct shmt_tls_slot *s = &shmt_tls[i];

		if (!s->id || s->gen != shmt_fork_gen)
			continue;
		for (int j = 0; j < SHMT_MAX_HANDLES; j++) {
			shmtrace_t *t = g_handles[j];

			for (struct shmt_att *a = t ? t->cur : NULL; a; a = a->prev) {
				if (a->id != s->id)
					continue;
				shmt_name_at_release(t, a, s);
				shmt_slot_release(t, a, s);
			}
		}
		s->id = 0;
	}
	pthread_mutex_unlock(&g_lock);
}

static void global_init(void)
{
	refresh_identity();
	pthread_key_create(&g_exit_key, thread_exit);
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

void shmt_process_init(void)
{
	pthread_once(&g_once, global_init);
}

void shmt_thread_watch(void)
{
	pthread_setspecific(g_exit_key, (void *)1);
}

int shmt_registry_add(shmtrace_t *t)
{
	int ret = -EMFILE;

	pthread_mutex_lock(&g_lock);
	for (int i = 0; i < SHMT_MAX_HANDLES; i++) {
		if (!g_handles[i]) {
			g_handles[i] = t;
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&g_lock);
	return ret;
}

void shmt_registry_remove(shmtrace_t *t)
{
	pthread_mutex_lock(&g_lock);
	for (int i = 0; i < SHMT_MAX_HANDLES; i++)
		if (g_handles[i] == t)
			g_handles[i] = NULL;
	g_removed++;
	pthread_mutex_unlock(&g_lock);
}

/* Whether attachment id is one of a live handle's. Under g_lock. */
static bool att_live(uint64_t id)
{
	for (int j = 0; j < SHMT_MAX_HANDLES; j++)
		for (struct shmt_att *a = g_handles[j] ? g_handles[j]->cur : NULL; a; a = a->prev)
			if (a->id == id)
				return true;
	return false;
}

struct shmt_tls_slot *shmt_slot_of_closed(void)
{
	static __thread uint64_t seen;
	struct shmt_tls_slot *s = NULL;

	pthread_mutex_lock(&g_lock);
	if (seen != g_removed) {
		for (int i = 0; i < SHMT_TLS_SLOTS && !s; i++)
			if (!att_live(shmt_tls[i].id))
				s = &shmt_tls[i];
		/* all looked at, and all live: none until the next close */
		if (!s)
			seen = g_removed;
	}
	pthread_mutex_unlock(&g_lock);
	return s;
}

void shmt_thread_name(char *buf)
{
	if (tls_tname[0]) {
		memcpy(buf, tls_tname, SHMT_NAME_LEN);
		return;
	}
	buf[0] = 0;
	prctl(PR_GET_NAME, buf, 0, 0, 0);
	buf[15] = 0;
}

/* Appends the calling thread's name slot to attachment a's ring, the
 * lock waited for as a producer waits. */
static int append_name_to(shmtrace_t *t, struct shmt_att *a, const char *tname)
{
	int ret = shmt_producer_lock(a, t->lock_timeout_ns);

	/* -EBUSY from a wedged lock's try is a timeout too */
	if (ret < 0)
		return ret == -EBUSY ? -ETIMEDOUT : ret;
	ret = shmt_name_append_locked(&a->v, shmt_pid, shmt_my_tid(), shmt_start, shmt_pidns, a->slot_flags,
				      tname, shmt_pname);
	shmt_unlock(&a->v);
	return ret;
}

void shmt_name_at_release(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s)
{
	char tname[SHMT_NAME_LEN];
	int ret;

	if (!s->unnamed)
		return;
	shmt_thread_name(tname);
	ret = append_name_to(t, a, tname);
	/* kept, or counted as the table's */
	if (ret == 0 || ret == -ENOSPC)
		s->unnamed = false;
}

/* append_name_to() for a naming call: a name the lock was not had for
 * in time is not recorded, and counted as one the table had no room for
 * is (a thread's own naming at release counts its own, core.c). */
static int name_call(shmtrace_t *t, struct shmt_att *a, const char *tname)
{
	int ret = append_name_to(t, a, tname);

	if (ret == -ETIMEDOUT)
		fetch_add(&a->v.h->names_dropped.v, 1);
	return ret;
}

static int append_name(shmtrace_t *t, const char *tname)
{
	struct shmt_att *a;

	if (!t)
		return -EINVAL;
	a = shmt_attach_current(t);
	if (!a)
		return -ENOENT;	/* kept: used when the ring appears */
	return name_call(t, a, tname);
}

/* The attachment this thread last named itself in, with tls_tname, and
 * the process then (a fork's child is another pid, named anew): the same
 * name again there takes no slot of the ring's name table, which a thread
 * that names itself for every task would fill up. */
static __thread uint64_t tls_named_in SHMT_TLS;
static __thread uint32_t tls_named_gen SHMT_TLS;

SHMT_API int shmtrace_set_thread_name(shmtrace_t *t, const char *name)
{
	struct shmt_att *a;
	bool same;
	int ret;

	if (!name)
		return -EINVAL;
	same = !strncmp(tls_tname, name, SHMT_NAME_LEN - 1);
	if (!same)
		tls_named_in = 0;	/* no ring has the new name yet */
	strncpy(tls_tname, name, SHMT_NAME_LEN - 1);
	tls_tname[SHMT_NAME_LEN - 1] = 0;
	if (!t)
		return -EINVAL;
	a = shmt_attach_current(t);
	if (!a)
		return -ENOENT;	/* kept: used when the ring appears */
	if (same && tls_named_in == a->id && tls_named_gen == shmt_fork_gen)
		return 0;
	ret = name_call(t, a, tls_tname);
	/* kept, or counted once as the full table's (it never empties) */
	tls_named_in = ret == 0 || ret == -ENOSPC ? a->id : 0;
	tls_named_gen = shmt_fork_gen;
	return ret;
}

SHMT_API int shmtrace_set_process_name(shmtrace_t *t, const char *name)
{
	char tname[SHMT_NAME_LEN];

	if (!name || !t)
		return -EINVAL;
	pthread_mutex_lock(&g_lock);
	strncpy(shmt_pname, name, SHMT_NAME_LEN - 1);
	shmt_pname[SHMT_NAME_LEN - 1] = 0;
	pthread_mutex_unlock(&g_lock);
	shmt_thread_name(tname);
	return append_name(t, tname);
}
