/* SPDX-License-Identifier: MIT */
/*
 * capture_enc.h - what the encoder's files share (capture_enc.c,
 * capture_enc_packed.c).
 */
#ifndef SHMTRACE_CAPTURE_ENC_H
#define SHMTRACE_CAPTURE_ENC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>

#include "capture.h"

/*
 * One PACKED frame of r[0..n), n at most SHMT_CAP_SPLIT_RECORDS, appended
 * to b. With ring set, r are ring slots read as shmt_cap_put_ring_records()
 * says. Returns the records in it (0: none, b unchanged) or -ENOMEM.
 */
long shmt_cap_put_packed(msgpack_sbuffer *b, uint64_t first_seq, const struct shmt_record *r,
			 size_t n, bool ring);

#endif /* SHMTRACE_CAPTURE_ENC_H */
