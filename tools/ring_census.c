/* SPDX-License-Identifier: MIT */
/*
 * ring_census.c - a ring's producer processes and whether a collector
 * drains it now, for `shmtrace ls`, `rm` and `stat` alike.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "ring_census.h"
#include "ring_reader.h"

static int cmp_proc(const void *pa, const void *pb)
{
	const struct ring_proc *a = pa, *b = pb;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->start_time != b->start_time)
		return a->start_time < b->start_time ? -1 : 1;
	return a->slot < b->slot ? -1 : a->slot > b->slot;
}

static int cmp_slot(const void *pa, const void *pb)
{
	const struct ring_proc *a = pa, *b = pb;

	return a->slot < b->slot ? -1 : a->slot > b->slot;
}

int ring_processes(const struct shmt_view *v, struct ring_proc **out, size_t *n)
{
	/* read once: a peer may move the count while we look */
	uint32_t nthr = shmt_ring_nthreads(v);
	struct ring_proc *p = malloc((nthr ? nthr : 1) * sizeof(*p));
	size_t m = 0, k = 0;

	*out = p;
	*n = 0;
	if (!p)
		return -ENOMEM;
	/* one copy of each slot, then only private memory: comparing every
	 * slot with every other in the segment was quadratic in slots */
	for (uint32_t i = 0; i < nthr; i++) {
		struct shmt_thread t;

		if (shmt_ring_thread(v, i, &t) == 0)
			p[m++] = (struct ring_proc){ .start_time = t.start_time, .pid = t.pid,
						     .flags = t.flags, .slot = i };
	}
	qsort(p, m, sizeof(*p), cmp_proc);
	for (size_t i = 0; i < m; i++) {
		if (k && p[k - 1].pid == p[i].pid && p[k - 1].start_time == p[i].start_time) {
			p[k - 1].flags |= p[i].flags;
			continue;
		}
		p[k++] = p[i];	/* the first slot of its process: sorted by slot */
	}
	qsort(p, k, sizeof(*p), cmp_slot);
	*n = k;
	return 0;
}

bool ring_process_alive(const struct ring_proc *p)
{
	return p->pid && shmt_proc_start_time(p->pid) == p->start_time;
}

/*
 * Whether process pid (as /proc shows it) is the collector whose pid the
 * header records: the collector writes its own getpid(), which in a pid
 * namespace of its own is the last field of its NSpid line (the kernel
 * lists its pids from our namespace down to its own). A kernel without
 * NSpid (before 4.1) has one namespace to compare in.
 */
static bool pid_is_recorded(long long pid, uint64_t recorded)
{
	char path[64], line[256];
	long long last = pid;
	FILE *f;

	if (!recorded)
		return false;
	snprintf(path, sizeof(path), "/proc/%lld/status", pid);
	if (!(f = fopen(path, "re")))
		return false;	/* gone since it was listed: not draining */
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 6, *end;

		if (strncmp(line, "NSpid:", 6))
			continue;
		for (;;) {
			long long x = strtoll(p, &end, 10);

			if (end == p)
				break;
			last = x;
			p = end;
		}
		break;
	}
	fclose(f);
	return last > 0 && (uint64_t)last == recorded;
}

/*
 * The collector holds an exclusive flock on the ring (claim_ring() in
 * collector/hold.c), which /proc/locks lists with its pid and the ring's
 * device and inode. Any user who can open the ring, read-only too, can
 * take an flock on it, an exclusive one included (flock() asks for no
 * write access): so a lock counts only when it is exclusive, held (not
 * waited for: "->"), and its owner is the collector the header records,
 * a word only the ring's writers can set. Both must agree. Without a
 * readable /proc/locks, falls back to the recorded pid, if alive.
 */
int64_t ring_collector(const struct shmt_view *v, uint64_t recorded)
{
	char line[256];
	FILE *f = fopen("/proc/locks", "re");
	int64_t pid = -1;

	if (!f) {
		char path[64];
		struct stat ps;

		snprintf(path, sizeof(path), "/proc/%" PRIu64, recorded);
		return recorded && recorded <= UINT32_MAX && stat(path, &ps) == 0 ? (int64_t)recorded
										   : -1;
	}
	/* "N: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INO START END"; a waiter's
	 * line has "->" where FLOCK is, and fails the match */
	while (pid < 0 && fgets(line, sizeof(line), f)) {
		char type[16], access[16];
		unsigned int maj, min;
		unsigned long long ino;
		long long lp;

		if (sscanf(line, "%*d: %15s %*15s %15s %lld %x:%x:%llu", type, access, &lp, &maj, &min,
			   &ino) != 6)
			continue;
		if (strcmp(type, "FLOCK") || strcmp(access, "WRITE") || maj != major((dev_t)v->dev) ||
		    min != minor((dev_t)v->dev) || ino != v->ino)
			continue;
		/* pid 0, one outside our namespace (kernels that list such
		 * locks), cannot be checked against the header: not counted */
		if (lp > 0 && lp <= UINT32_MAX && pid_is_recorded(lp, recorded))
			pid = lp;
	}
	fclose(f);
	return pid;
}
