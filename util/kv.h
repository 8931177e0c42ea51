/* SPDX-License-Identifier: MIT */
/*
 * kv.h - key/value output over a jw writer: one JSON object, or text
 * lines "key:" with the values in a column (20 wide, one space at least
 * after a longer key). Text values are escaped for a terminal (term.h:
 * untrusted bytes are never written raw).
 */
#ifndef SHMTRACE_KV_H
#define SHMTRACE_KV_H

#include <stdbool.h>
#include <stdint.h>

#include "json_writer.h"

struct kv {
	bool json, first;
	struct jw *w;
};

/* Starts an object (JSON) or a block of lines (text) on w. */
void kv_begin(struct kv *o, struct jw *w, bool json);
/* The key: '{' or ',' and "key": (JSON), or the padded "key:" (text). */
void kv_key(struct kv *o, const char *k);
/* key and v; a text line ends after the value. */
void kv_u64(struct kv *o, const char *k, uint64_t v);
void kv_str(struct kv *o, const char *k, const char *v);
/* JSON only: key and true or false. */
void kv_bool(struct kv *o, const char *k, bool v);
/* Ends the object ("{}" when it had no key); nothing in text. */
void kv_close(struct kv *o);
/* kv_close(), a newline after a JSON object, and flushes w: 0 or -errno. */
int kv_end(struct kv *o);

#endif
