/* SPDX-License-Identifier: MIT */
/*
 * hosts.c - process tables per host, so that pid 1234 of one machine and
 * pid 1234 of another stay two processes in a merged trace.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hosts.h"

int hosts_build(struct hosts *h, const struct source *src)
{
	int ret;

	memset(h, 0, sizeof(*h));
	h->src = src;
	h->n = src->nhosts ? src->nhosts : 1;
	if (h->n > HOSTS_MAX)
		return -E2BIG;
	for (uint32_t k = 0; k < h->n; k++) {
		size_t m = 0;

		h->slots[k] = calloc(src->nthr ? src->nthr : 1, sizeof(*h->slots[k]));
		if (!h->slots[k])
			return -ENOMEM;
		for (size_t i = 0; i < src->nthr; i++) {
			uint32_t ring = src->thr_ring ? src->thr_ring[i] : 0;
			uint32_t host = src->host_of && h->n > 1 ? src->host_of[ring] : 0;

			if (host == k)
				h->slots[k][m++] = src->thr[i];
		}
		if ((ret = procs_build(&h->ps[k], h->slots[k], m)) < 0)
			return ret;
	}
	return 0;
}

void hosts_free(struct hosts *h)
{
	for (uint32_t k = 0; k < HOSTS_MAX; k++) {
		procs_free(&h->ps[k]);
		free(h->slots[k]);
	}
	memset(h, 0, sizeof(*h));
}

uint32_t hosts_outpid(const struct hosts *h, uint32_t pid, uint64_t start_time, uint64_t ts)
{
	uint32_t k = h->n > 1 ? h->src->host_of[h->src->ring] : 0;

	return procs_outpid(&h->ps[k], pid, start_time, ts) + k * HOSTS_PID_STRIDE;
}

uint32_t hosts_host_of(const struct hosts *h, uint32_t outpid)
{
	uint32_t k = outpid / HOSTS_PID_STRIDE;

	return k < h->n ? k : 0;
}

uint32_t hosts_local(uint32_t outpid)
{
	return outpid % HOSTS_PID_STRIDE;
}

const char *hosts_name(const struct hosts *h, uint32_t host)
{
	return h->src->hosts && host < h->src->nhosts ? h->src->hosts[host] : "";
}

void hosts_proc_name(const struct hosts *h, uint32_t outpid, char *buf, size_t len)
{
	uint32_t k = hosts_host_of(h, outpid);
	char name[128];

	procs_name(&h->ps[k], hosts_local(outpid), name, sizeof(name));
	if (h->n > 1)
		snprintf(buf, len, "%s: %s", hosts_name(h, k), name);
	else
		snprintf(buf, len, "%s", name);
}

const struct proc *hosts_proc(const struct hosts *h, uint32_t outpid)
{
	return procs_find(&h->ps[hosts_host_of(h, outpid)], hosts_local(outpid));
}

const char *hosts_thread_name(const struct hosts *h, uint32_t outpid, uint32_t tid)
{
	return procs_thread_name(&h->ps[hosts_host_of(h, outpid)], hosts_local(outpid), tid);
}
