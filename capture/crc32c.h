/* SPDX-License-Identifier: MIT */
/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of every capture frame.
 */
#ifndef SHMTRACE_CRC32C_H
#define SHMTRACE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * Continues a CRC-32C over n bytes at p. Start with crc = 0; the
 * pre- and post-inversion are done inside, so calls chain:
 * shmt_crc32c(shmt_crc32c(0, a, na), b, nb) == shmt_crc32c(0, ab, na + nb).
 * shmt_crc32c(0, "123456789", 9) == 0xe3069283.
 */
uint32_t shmt_crc32c(uint32_t crc, const void *p, size_t n);

#endif /* SHMTRACE_CRC32C_H */
