/* SPDX-License-Identifier: MIT */
/*
 * compute.c - the work a request asks for: count primes and checksum a
 * buffer. Deterministic, so the client can check every reply.
 */
#include <pthread.h>
#include <string.h>

#include "demo.h"

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

/* CRC-32 (IEEE, as zlib) of buf. */
uint32_t demo_crc32(const uint8_t *buf, size_t len)
{
	uint32_t c = 0xffffffffu;

	pthread_once(&crc_once, crc_init);
	for (size_t i = 0; i < len; i++)
		c = crc_table[(c ^ buf[i]) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

/* Counts the primes <= limit by trial division: deliberately the slow,
 * CPU-bound way, so that "compute" spans have some width. */
uint32_t demo_count_primes(uint32_t limit)
{
	uint32_t n = limit >= 2 ? 1 : 0;	/* 2 */

	for (uint32_t c = 3; c <= limit; c += 2) {
		int prime = 1;

		for (uint32_t d = 3; d * d <= c; d += 2) {
			if (c % d == 0) {
				prime = 0;
				break;
			}
		}
		n += prime;
	}
	return n;
}

static uint64_t mix(uint64_t x)
{
	/* splitmix64: a well-spread function of the request number */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Fills request id's work: its prime limit and a pseudo-random payload. */
void demo_fill_request(struct demo_msg *m, uint32_t id)
{
	uint64_t s = mix(id);

	memset(m, 0, sizeof(*m));
	m->magic = DEMO_MAGIC;
	m->type = DEMO_REQ;
	m->id = id;
	m->limit = DEMO_PRIME_MIN + (uint32_t)(s % DEMO_PRIME_SPAN);
	m->len = DEMO_PAYLOAD / 2 + (uint32_t)((s >> 32) % (DEMO_PAYLOAD / 2 + 1));
	for (uint32_t i = 0; i < m->len; i += 8) {
		s = mix(s);
		memcpy(m->data + i, &s, m->len - i < 8 ? m->len - i : 8);
	}
}

/* The deterministic 1%: request numbers ending in 42 are turned down by
 * the worker on their first attempt, and the client retries them. */
int demo_is_busy(const struct demo_msg *m)
{
	return m->id % 100 == 42 && m->attempt == 0;
}
