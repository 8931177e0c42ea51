/* SPDX-License-Identifier: MIT */
/*
 * clock_now.h - the ring clock's reading, inline: shmtrace_now() (clock.c)
 * and the library's own calls that take a timestamp (a span's begin and
 * end, instants, counters) read it here, with no call in between. The TSC
 * converted by the process's calibration (clock.c sets it from the first
 * ring it attaches), or CLOCK_MONOTONIC where there is none.
 */
#ifndef SHMTRACE_RING_CLOCK_NOW_H
#define SHMTRACE_RING_CLOCK_NOW_H

#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t shmt_read_tsc(void)
{
	return __rdtsc();
}
#define SHMT_HAVE_TSC 1
#else
static inline uint64_t shmt_read_tsc(void)
{
	return 0;
}
#define SHMT_HAVE_TSC 0
#endif

/*
 * The one shift the creator writes: ns = ticks * mult >> 24 keeps mult
 * within 32 bits for any TSC above 4 MHz and the product within 128 bits
 * always. A constant shift is one instruction in shmt_now(), a shift
 * read from the header four; a ring stating another one (only a peer
 * writes that) is used with CLOCK_MONOTONIC instead.
 */
#define SHMT_TSC_SHIFT 24u

/* The conversion this process uses; set once, tsc_ok last (release). */
struct shmt_tsc_conv {
	uint64_t mono0, tsc0;
	uint32_t mult;
	int tsc_ok;
};
/* hidden: read where it is, not through the shared library's GOT */
extern __attribute__((visibility("hidden"))) struct shmt_tsc_conv shmt_tsc_conv;

uint64_t shmt_mono_ns(void);

/* The TSC value tsc in ns, by the conversion (mono0, tsc0, mult). */
static inline uint64_t shmt_tsc_ns(uint64_t tsc, uint64_t mono0, uint64_t tsc0, uint32_t mult)
{
	int64_t d = (int64_t)(tsc - tsc0);

	/* a read before tsc0 (another core, a little behind) stays monotonic */
	if (__builtin_expect(d < 0, 0))
		return mono0 - (uint64_t)(((unsigned __int128)(uint64_t)-d * mult) >> SHMT_TSC_SHIFT);
	return mono0 + (uint64_t)(((unsigned __int128)(uint64_t)d * mult) >> SHMT_TSC_SHIFT);
}

/* Now, in ns, on the process's ring clock: what shmtrace_now() returns. */
static inline uint64_t shmt_now(void)
{
	/* pairs with the release store of tsc_ok in shmt_clock_adopt() */
	if (__builtin_expect(__atomic_load_n(&shmt_tsc_conv.tsc_ok, __ATOMIC_ACQUIRE), 1))
		return shmt_tsc_ns(shmt_read_tsc(), shmt_tsc_conv.mono0, shmt_tsc_conv.tsc0,
				   shmt_tsc_conv.mult);
	return shmt_mono_ns();
}

#endif /* SHMTRACE_RING_CLOCK_NOW_H */
