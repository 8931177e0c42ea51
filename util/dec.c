/* SPDX-License-Identifier: MIT */
/*
 * dec.c - the one decimal formatter (dec.h).
 */
#include <string.h>

#include "dec.h"

const char dec_pairs[201] =
	"0001020304050607080910111213141516171819"
	"2021222324252627282930313233343536373839"
	"4041424344454647484950515253545556575859"
	"6061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

char *dec_u64(char *p, uint64_t v)
{
	char d[DEC_U64_MAX], *q = d + sizeof(d);
	size_t n;

	while (v >= 100) {
		q -= 2;
		memcpy(q, dec_pairs + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10) {
		q -= 2;
		memcpy(q, dec_pairs + 2 * v, 2);
	} else {
		*--q = (char)('0' + v);
	}
	n = (size_t)(d + sizeof(d) - q);
	memcpy(p, q, n);
	return p + n;
}
