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
 * The collector holds an flock on the ring (collector/drain.c), which
 * /proc/locks lists with the ring's device and inode. Without a readable
 * /proc/locks, falls back to the pid the header names, if alive.
 */
int64_t ring_collector(const struct shmt_view *v)
{
	char line[256], want[64];
	FILE *f = fopen("/proc/locks", "re");
	int64_t pid = -1;

	if (!f) {
		uint64_t p = shmt_ring_collector_pid(v);
		char path[64];
		struct stat ps;

		snprintf(path, sizeof(path), "/proc/%" PRIu64, p);
		return p && p <= UINT32_MAX && stat(path, &ps) == 0 ? (int64_t)p : -1;
	}
	snprintf(want, sizeof(want), " %02x:%02x:%llu ", major((dev_t)v->dev), minor((dev_t)v->dev),
		 (unsigned long long)v->ino);
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, want);
		long long lp;

		if (!p || !strstr(line, "FLOCK"))
			continue;
		/* the pid is the field just before the device */
		while (p > line && p[-1] == ' ')
			p--;
		while (p > line && p[-1] >= '0' && p[-1] <= '9')
			p--;
		lp = strtoll(p, NULL, 10);
		pid = lp > 0 && lp <= UINT32_MAX ? lp : 0;
		break;
	}
	fclose(f);
	return pid;
}
