/* SPDX-License-Identifier: MIT */
/*
 * clock.c - the ring clock: CLOCK_MONOTONIC, or the TSC calibrated against it.
 *
 * Two clock_gettime calls cost more than the whole span budget (make bench,
 * case 1's "2 x clock_gettime" row),
 * so where the TSC is invariant (constant_tsc + nonstop_tsc) the creator of a
 * ring calibrates it once against CLOCK_MONOTONIC and stores mult/shift in
 * the header. Every process of the ring converts with the same parameters,
 * so their timestamps are comparable, and they stay within the calibration's
 * error (a few ppm) of CLOCK_MONOTONIC. Like Tracy and Perfetto's fast path.
 */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "clock_now.h"
#include "ring_writer.h"

/* The conversion this process uses; set from the first ring it attaches. */
struct shmt_tsc_conv shmt_tsc_conv;

uint64_t shmt_mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

uint64_t shmt_realtime_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

/* Returns true if /proc/cpuinfo promises a TSC that ticks at a constant
 * rate through frequency changes and idle states. */
static bool tsc_invariant(void)
{
	const char *want = getenv("SHMTRACE_CLOCK");
	char line[4096];
	bool c = false, n = false;
	FILE *f;

	if (!SHMT_HAVE_TSC)
		return false;
	if (want && !strcmp(want, "monotonic"))
		return false;
	f = fopen("/proc/cpuinfo", "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5))
			continue;
		c = strstr(line, " constant_tsc") != NULL;
		n = strstr(line, " nonstop_tsc") != NULL;
		break;
	}
	fclose(f);
	return c && n;
}

/* Reads TSC and CLOCK_MONOTONIC as close together as we can: the pair from
 * the shortest of a few tries. */
static void read_pair(uint64_t *tsc, uint64_t *mono)
{
	uint64_t best = UINT64_MAX;

	*tsc = *mono = 0;	/* what no compiler can tell the loop sets */
	for (int i = 0; i < 5; i++) {
		uint64_t a = shmt_read_tsc();
		uint64_t m = shmt_mono_ns();
		uint64_t b = shmt_read_tsc();

		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*mono = m;
		}
	}
}

void shmt_clock_calibrate(struct shmt_clock *c, bool allow_tsc)
{
	uint64_t t0, m0, t1, m1;
	struct timespec nap = { 0, 20 * 1000 * 1000 };

	memset(c, 0, sizeof(*c));
	c->realtime0 = shmt_realtime_ns();
	c->mono0 = shmt_mono_ns();
	if (!allow_tsc || !tsc_invariant())
		return;
	read_pair(&t0, &m0);
	nanosleep(&nap, NULL);
	read_pair(&t1, &m1);
	if (t1 <= t0 || m1 <= m0)
		return;
	c->shift = SHMT_TSC_SHIFT;
	c->mult = (uint32_t)(((unsigned __int128)(m1 - m0) << c->shift) / (t1 - t0));
	if (!c->mult)
		return;
	c->tsc0 = t1;
	c->mono0 = m1;
	c->tsc_ok = 1;
}

void shmt_clock_adopt(const struct shmt_clock *c)
{
	static int claimed;

	/* first TSC ring wins; rings made on one host agree within calibration error */
	if (!c->tsc_ok || !c->mult || c->shift != SHMT_TSC_SHIFT)
		return;
	if (__atomic_exchange_n(&claimed, 1, __ATOMIC_ACQ_REL))
		return;
	shmt_tsc_conv.mono0 = c->mono0;
	shmt_tsc_conv.tsc0 = c->tsc0;
	shmt_tsc_conv.mult = c->mult;
	__atomic_store_n(&shmt_tsc_conv.tsc_ok, 1, __ATOMIC_RELEASE);
}

SHMT_API uint64_t shmtrace_now(void)
{
	return shmt_now();
}

/* Now on the clock of the ring whose anchor is c: its own conversion, not
 * the process's (which is the first TSC ring's), so that a time a reader
 * or the collector notes is on the same clock as the ring's records. */
uint64_t shmt_clock_now(const struct shmt_clock *c)
{
	if (c->tsc_ok && c->mult && c->shift == SHMT_TSC_SHIFT)
		return shmt_tsc_ns(shmt_read_tsc(), c->mono0, c->tsc0, c->mult);
	return shmt_mono_ns();
}
