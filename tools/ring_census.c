/* SPDX-License-Identifier: MIT */
/*
 * ring_census.c - a ring's producer processes and whether a collector
 * drains it now, for `shmtrace ls`, `rm` and `stat` alike.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "ring_reader.h"
#include "ring_census.h"
#include "ring_reader.h"

bool ring_process_at(const struct shmt_view *v, uint32_t i, struct shmt_thread *t, bool all)
{
	uint32_t nthr = shmt_ring_nthreads(v);
	struct shmt_thread u;

	if (shmt_ring_thread(v, i, t) < 0)
		return false;
	for (uint32_t j = 0; j < i; j++)
		if (shmt_ring_thread(v, j, &u) == 0 && u.pid == t->pid &&
		    u.start_time == t->start_time)
			return false;
	for (uint32_t j = i + 1; all && j < nthr; j++)
		if (shmt_ring_thread(v, j, &u) == 0 && u.pid == t->pid &&
		    u.start_time == t->start_time)
			t->flags |= u.flags;
	return true;
}

bool ring_process_alive(const struct shmt_thread *t)
{
	return t->pid && shmt_proc_start_time(t->pid) == t->start_time;
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
