/* SPDX-License-Identifier: MIT */
/*
 * procs.c - telling processes apart by (pid, start time) and naming them.
 *
 * Ring records carry a pid but not the start time, so when one pid belongs
 * to several processes a record goes to the latest one that had started
 * by its timestamp. The start time (ticks since boot, on CLOCK_BOOTTIME)
 * is moved onto the ring's CLOCK_MONOTONIC with the offset between the two
 * clocks now: exact unless the machine was suspended in between, and only
 * ever consulted for a reused pid.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "procs.h"
#include "source.h"

static int cmp_proc(const void *pa, const void *pb)
{
	const struct proc *a = pa, *b = pb;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return a->start_time < b->start_time ? -1 : a->start_time > b->start_time;
}

static const struct proc *find_inst(const struct procs *ps, uint32_t pid, uint64_t start)
{
	size_t lo = 0, hi = ps->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct proc *p = &ps->p[mid];

		if (p->pid < pid || (p->pid == pid && p->start_time < start))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ps->n && ps->p[lo].pid == pid && ps->p[lo].start_time == start ? &ps->p[lo]
										    : NULL;
}

int procs_build(struct procs *ps, const struct shmt_thread *slots, size_t n)
{
	long tck = sysconf(_SC_CLK_TCK);
	/* monotonic first: with no suspend the two clocks are equal, and
	 * reading boottime second keeps the difference from going negative */
	uint64_t mono = clock_ns(CLOCK_MONOTONIC), boot = clock_ns(CLOCK_BOOTTIME);
	uint64_t boot_off = boot > mono ? boot - mono : 0;
	size_t m = 0;

	memset(ps, 0, sizeof(*ps));
	u64map_init(&ps->tname);
	ps->slots = slots;
	if (tck <= 0)
		tck = 100;
	ps->p = calloc(n ? n : 1, sizeof(*ps->p));
	if (!ps->p)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		ps->p[i].pid = slots[i].pid;
		ps->p[i].start_time = slots[i].start_time;
	}
	qsort(ps->p, n, sizeof(*ps->p), cmp_proc);
	for (size_t i = 0; i < n; i++)
		if (!m || cmp_proc(&ps->p[m - 1], &ps->p[i]))
			ps->p[m++] = ps->p[i];
	ps->n = m;
	for (size_t i = 0; i < m;) {
		size_t j = i;

		while (j < m && ps->p[j].pid == ps->p[i].pid)
			j++;
		/* the instances whose synthetic pid fits in 32 bits (1024 for a
		 * real pid); any later ones (forged slots) are shown as the last
		 * that fits, rather than wrapping onto another process's pid */
		uint64_t fit = ((uint64_t)UINT32_MAX - ps->p[i].pid) / PROCS_PID_STRIDE + 1;

		if (j - i > fit) {
			ps->capped += j - i - fit;
			if (!ps->said++)
				source_warnx("pid %u: %zu processes in the name slots, more than the %llu "
					     "that can have a pid of their own; the later ones are "
					     "shown as #%llu", ps->p[i].pid, j - i,
					     (unsigned long long)fit, (unsigned long long)fit);
		}
		for (size_t k = i; k < j; k++) {
			struct proc *p = &ps->p[k];
			uint64_t st = p->start_time / (uint64_t)tck * 1000000000ull +
				      p->start_time % (uint64_t)tck * (1000000000ull / (uint64_t)tck);
			uint64_t kk = k - i < fit ? k - i : fit - 1;

			p->k = (uint32_t)(kk + 1);
			p->nk = (uint32_t)(j - i);
			p->outpid = p->pid + (uint32_t)kk * PROCS_PID_STRIDE;
			p->start_ns = st > boot_off ? st - boot_off : 0;
		}
		i = j;
	}
	/* the last slot of a process names it; of a thread, names it */
	for (size_t i = 0; i < n; i++) {
		struct proc *p = (struct proc *)find_inst(ps, slots[i].pid, slots[i].start_time);
		uint64_t *v;

		if (slots[i].pname[0])
			snprintf(p->pname, sizeof(p->pname), "%s", slots[i].pname);
		v = u64map_get(&ps->tname, (uint64_t)p->outpid << 32 | slots[i].tid, 0, NULL);
		if (!v)
			return -ENOMEM;
		*v = i + 1;
	}
	return 0;
}

/* The index of the first process with pid (ps->p is sorted by pid), or of
 * where it would be. */
static size_t first_of(const struct procs *ps, uint32_t pid)
{
	size_t lo = 0, hi = ps->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ps->p[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void procs_free(struct procs *ps)
{
	free(ps->p);
	u64map_free(&ps->tname);
	memset(ps, 0, sizeof(*ps));
}

uint32_t procs_outpid(const struct procs *ps, uint32_t pid, uint64_t start_time, uint64_t ts)
{
	size_t lo = first_of(ps, pid);
	const struct proc *p, *best;

	if (lo == ps->n || ps->p[lo].pid != pid)
		return pid;
	p = &ps->p[lo];
	if (p->nk == 1)
		return p->outpid;
	if (start_time && (best = find_inst(ps, pid, start_time)))
		return best->outpid;
	/* the latest instance started by ts, with a tick (10 ms) of slack
	 * (saturated): the instances are sorted by start time, so a binary
	 * search, not a walk over all of them for every record */
	{
		uint64_t by = ts + 10000000ull < ts ? UINT64_MAX : ts + 10000000ull;
		uint32_t lo2 = 1, hi = p->nk;	/* the first instance is the default */

		while (lo2 < hi) {
			uint32_t mid = lo2 + (hi - lo2) / 2;

			if (p[mid].start_ns <= by)
				lo2 = mid + 1;
			else
				hi = mid;
		}
		best = &p[lo2 - 1];
	}
	return best->outpid;
}

const struct proc *procs_find(const struct procs *ps, uint32_t outpid)
{
	uint32_t pid = outpid % PROCS_PID_STRIDE;
	uint32_t k = outpid / PROCS_PID_STRIDE;
	size_t lo = first_of(ps, pid);

	if (lo + k >= ps->n || ps->p[lo].pid != pid || ps->p[lo + k].pid != pid ||
	    ps->p[lo + k].outpid != outpid)
		return NULL;
	return &ps->p[lo + k];
}

void procs_name(const struct procs *ps, uint32_t outpid, char *buf, size_t len)
{
	const struct proc *p = procs_find(ps, outpid);

	if (!p)
		snprintf(buf, len, "pid %u", outpid);
	else if (p->nk > 1)
		snprintf(buf, len, "%s (pid %u, #%u)", p->pname[0] ? p->pname : "?", p->pid, p->k);
	else if (p->pname[0])
		snprintf(buf, len, "%s", p->pname);
	else
		snprintf(buf, len, "pid %u", p->pid);
}

const char *procs_thread_name(const struct procs *ps, uint32_t outpid, uint32_t tid)
{
	uint64_t *v = u64map_find(&ps->tname, (uint64_t)outpid << 32 | tid);

	return v && ps->slots[*v - 1].name[0] ? ps->slots[*v - 1].name : NULL;
}

bool procs_running_as(uint32_t pid, const char *comm)
{
	char path[64], have[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(have, sizeof(have), f))
		have[0] = 0;
	fclose(f);
	return !strncmp(have, comm, strlen(comm));
}
