/* SPDX-License-Identifier: MIT */
/*
 * kv.c - key/value output (kv.h), what `shmtrace stat` prints and
 * `shmtrace ls --json` prints per ring.
 */
#include <stdio.h>
#include <string.h>

#include "kv.h"
#include "term.h"

void kv_begin(struct kv *o, struct jw *w, bool json)
{
	o->json = json;
	o->first = true;
	o->w = w;
}

void kv_key(struct kv *o, const char *k)
{
	if (o->json) {
		jw_puts(o->w, o->first ? "{" : ",");
		jw_cstr(o->w, k);
		jw_puts(o->w, ":");
	} else {
		char label[40];

		snprintf(label, sizeof(label), "%s:", k);
		jw_puts(o->w, label);
		/* a column of values, and a space after a longer key */
		for (size_t i = strlen(label); i < 20 || i == strlen(label); i++)
			jw_puts(o->w, " ");
	}
	o->first = false;
}

void kv_u64(struct kv *o, const char *k, uint64_t v)
{
	kv_key(o, k);
	jw_u64(o->w, v);
	if (!o->json)
		jw_puts(o->w, "\n");
}

void kv_str(struct kv *o, const char *k, const char *v)
{
	kv_key(o, k);
	if (o->json) {
		jw_cstr(o->w, v);
	} else {
		char esc[TERM_ESC_MAX(300)];

		/* untrusted bytes from the segment or file: escaped, never raw */
		term_escape(v, strlen(v), esc, sizeof(esc));
		jw_puts(o->w, esc);
		jw_puts(o->w, "\n");
	}
}

void kv_bool(struct kv *o, const char *k, bool v)
{
	kv_key(o, k);
	jw_puts(o->w, v ? "true" : "false");
}

void kv_close(struct kv *o)
{
	if (o->json)
		jw_puts(o->w, o->first ? "{}" : "}");
}

int kv_end(struct kv *o)
{
	kv_close(o);
	if (o->json)
		jw_puts(o->w, "\n");
	return jw_flush(o->w);
}
