/* SPDX-License-Identifier: MIT */
/*
 * mp_head.h - the head of one msgpack object read from untrusted bytes:
 * how long its head and body are and how many elements follow it, so that
 * a frame can be walked without allocating (the decoder's pre-walker and
 * the capture fuzzer's frame finder share it).
 */
#ifndef SHMTRACE_MP_HEAD_H
#define SHMTRACE_MP_HEAD_H

#include <stddef.h>
#include <stdint.h>

struct shmt_mp_head {
	uint64_t hdr;		/* bytes of the type byte, a length, an ext type */
	uint64_t body;		/* bytes of payload after them (str, bin, ext) */
	uint64_t kids;		/* objects that follow as its elements (a map: 2 a pair) */
};

/* The first n (1..8) bytes at p as a big-endian number. */
uint64_t shmt_mp_be(const uint8_t *p, int n);

/*
 * Reads the head of the msgpack object at p[0..len), len >= 1. Returns 1
 * with *h filled, 0 if len ends inside its length field, or -EBADMSG for
 * the byte 0xc1, which msgpack never uses. Lengths are not bounded here.
 */
int shmt_mp_head(const uint8_t *p, size_t len, struct shmt_mp_head *h);

#endif /* SHMTRACE_MP_HEAD_H */
