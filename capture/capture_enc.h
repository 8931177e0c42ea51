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
 * to b. r are records whose commit words are their kinds (SHMT_PACK_NONE:
 * written as they are), a staging block's read in place (SHMT_PACK_KIND:
 * shmt_cap_put_block_records()), or ring slots (SHMT_PACK_RING:
 * shmt_cap_put_ring_records()). Returns the records in it (0: none, b
 * unchanged) or -ENOMEM.
 */
enum shmt_pack_check { SHMT_PACK_NONE, SHMT_PACK_KIND, SHMT_PACK_RING };
long shmt_cap_put_packed(msgpack_sbuffer *b, uint64_t first_seq, const struct shmt_record *r,
			 size_t n, enum shmt_pack_check check);

#endif /* SHMTRACE_CAPTURE_ENC_H */
