/* SPDX-License-Identifier: MIT */
/*
 * args.h - what the exports (Chrome, OTLP, Perfetto) read after an event:
 * its argument records, attached only to their own event, and the open
 * spans of threads that never ended them, with the arguments they had and
 * the end they are given.
 */
#ifndef SHMTRACE_ARGS_H
#define SHMTRACE_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"
#include "ring_format.h"
#include "shmtrace.h"
#include "u64map.h"

/* The arguments of one event, as its argument records gave them. */
struct ev_args {
	uint32_t n, count;		/* have, and the count the records say */
	struct {
		uint32_t key, type;
		/* the int64, the string id, or a text's SHMT_TEXT_VALUE() */
		uint64_t value;
		uint64_t off;		/* a text: where its store keeps it */
	} a[SHMTRACE_MAX_ARGS];
};

/*
 * The last span or instant, held back until the record after it shows
 * whether argument records follow it. pid and ring are the caller's (the
 * pid as written, the source's ring index), kept with it.
 */
struct args_pend {
	struct shmt_record r;
	uint32_t pid, ring;
	uint64_t seq;			/* the caller's own number for it */
	struct ev_args a;
	bool has;
	uint64_t args, lost;		/* arguments handed over; dropped: no owner */
	/* a text argument of the held event whose records are coming: how
	 * many are still to come (0: none), and the event's text bytes so far
	 * (all its text arguments carry SHMTRACE_TEXT_MAX together) */
	uint32_t twant, tlen, tstart;
	char text[SHMTRACE_TEXT_MAX];
};

/* Holds r (a span or an instant), with no arguments yet. The held one
 * must have been taken first. */
void args_hold(struct args_pend *p, const struct shmt_record *r, uint32_t pid, uint32_t ring,
	       uint64_t seq);

struct args_store;

/*
 * r is an argument record (SHMTRACE_KIND_ARG) or the text of one
 * (SHMTRACE_KIND_TEXT, shmt_record_attached()); follows is the source's
 * word that it comes right after the record before it. An argument is
 * attached to the held event if it is that event's (pid, tid, ts and
 * name) and the next in order 1..count, and a text argument once all its
 * text records followed it (its text then kept in s, for the export's
 * life); else it is counted in p->lost and dropped: never attached to
 * another event, nor in part. Returns 0, or -errno when s could not keep
 * a text (out of memory, or the temporary file).
 */
int args_on_arg(struct args_pend *p, struct args_store *s, const struct shmt_record *r,
		bool follows);

/* Takes the held event, now that no more of its arguments can come:
 * false when none is held. Counts its arguments in p->args (and a text
 * argument whose bytes did not all come in p->lost). */
bool args_take(struct args_pend *p);

/*
 * Arguments kept for events written later (those of flows), numbered
 * 1..n: the first ARGS_MEM bytes of them in memory, the rest in an
 * unlinked temporary file (util/extsort.h's), so that a trace's size
 * never decides the export's memory. And the texts of every text
 * argument, for the export's life (an event's arguments are copied and
 * kept by value, so the texts they name stay where they are): the first
 * ARGS_TEXT_MEM bytes in memory, the rest in a temporary file of their
 * own.
 */
#define ARGS_MEM (8u << 20)
#define ARGS_TEXT_MEM (8u << 20)
/* a text as exported: its bytes and the cut marker ("…[cut N bytes]") */
#define ARGS_TEXT_OUT (SHMTRACE_TEXT_MAX + 40)

struct args_store {
	struct ev_args *v;
	size_t n, cap;
	int fd;			/* the rest, from v's capacity on; -1: none yet */
	uint64_t nfile;
	struct ev_args got;	/* args_get()'s answer from the file */
	char *text;		/* texts at offsets below ARGS_TEXT_MEM */
	size_t tlen, tcap;
	int tfd;		/* texts from ARGS_TEXT_MEM on, -1: none yet */
	uint64_t tfile;		/* bytes in tfd */
	char tgot[ARGS_TEXT_OUT];	/* args_text()'s answer */
};

void args_store_init(struct args_store *s);
/* Keeps a copy of a if it has arguments, *idx its number (>= 1), else
 * *idx = 0. Returns 0 or -errno. */
int args_keep(struct args_store *s, const struct ev_args *a, uint32_t *idx);
/* The arguments numbered i, or NULL (0, out of range, or the file could
 * not be read); valid until the next call. */
const struct ev_args *args_get(struct args_store *s, uint32_t i);
void args_store_free(struct args_store *s);
/* Forgets every argument and text kept, keeping the memory for more. */
void args_store_clear(struct args_store *s);
/* Text argument i of a (type SHMTRACE_ARG_TEXT) as exported: its bytes,
 * then "…[cut N bytes]" when the producer cut N bytes off; its length in
 * *len. NULL when the text cannot be read back. Valid until the next
 * call. */
const char *args_text(struct args_store *s, const struct ev_args *a, uint32_t i, size_t *len);

/* The arguments of an open span as the source hands them over
 * (source_open_args()): a text argument's bytes are text[off .. off +
 * SHMT_TEXT_LEN(value)). */
struct open_args {
	struct ev_args a;
	const char *text;
};

/* a's arguments into *out, their texts kept in s (out's offsets then
 * s's). Returns 0, -ENOMEM, or -errno when s could not keep a text. */
int args_keep_texts(struct args_store *s, const struct open_args *a, struct ev_args *out);
/* The other way: a's texts, kept in s, copied into text (room for
 * SHMTRACE_TEXT_MAX bytes), *out pointing there. Returns 0, or -EIO when
 * one cannot be read back. */
int args_texts_out(struct args_store *s, const struct ev_args *a, struct open_args *out,
		   char *text);

/* An open span of a thread, exported after the pass. */
struct open_ev {
	struct shmt_record r;
	uint32_t pid;			/* as written */
	uint32_t ring;			/* the source's ring index */
	uint64_t i;			/* its arrival among the open spans, from 0 */
	struct ev_args a;		/* added while it was open (source_open_args()) */
};

/*
 * Open spans (SHMTRACE_KIND_OPEN records) and where each ends. Its record
 * says when its thread was last seen in it, when that is known: the
 * moment the collector (or a producer adopting the block) found the
 * thread dead, or a post-mortem reader found it alive (a dur not 0); it
 * ends there, or at its thread's last recorded moment if that is later
 * (so that the spans it holds stay inside it). Else, its thread dead at a
 * moment nobody saw, it ends with the trace: the latest moment that any
 * recorded event of the export reaches (a span's end, an instant, a
 * counter, an open span's start), as Perfetto draws a slice that did not
 * end. Either way the spans a thread died in nest as they were.
 */
/*
 * Kept in bounded memory, as a hostile trace may leave millions open: the
 * first OPEN_MEM bytes of them in memory, the rest in an unlinked
 * temporary file (util/extsort.h), read back after the pass in the order
 * they came, or the newest first.
 */
#define OPEN_MEM (4u << 20)

struct open_spans {
	struct extsort *s;		/* NULL until the first */
	uint64_t n;			/* kept */
	bool newest_first;		/* read back the newest first (set before the first) */
	uint64_t last_end;		/* the trace's last recorded moment */
};

/*
 * Notes the wanted record r (any kind but an argument) of thread key
 * (pid as written << 32 | tid) in last, the caller's map of each thread's
 * last recorded moment. Returns 0 or -ENOMEM.
 */
int open_note(struct open_spans *o, struct u64map *last, uint64_t key,
	      const struct shmt_record *r);
/* Keeps the open span r with its arguments a (may be NULL), their texts
 * in s. Returns 0, -ENOMEM, or -errno when s could not keep a text. */
int open_add(struct open_spans *o, struct args_store *s, const struct shmt_record *r,
	     uint32_t pid, uint32_t ring, const struct open_args *a);
/* Starts reading the open spans kept back (again). Returns 0 or -errno. */
int open_spans_rewind(struct open_spans *o);
/* The next open span into *e, and it as a span record ending where it
 * ends (open_end()) into *r: 1, 0 after the last, or -errno. */
int open_spans_next(struct open_spans *o, const struct u64map *last, struct open_ev *e,
	      struct shmt_record *r);
/* Open span open of thread (pid as written, open->tid) as a span record
 * ending where it ends: where it was last seen, else at last_end (the
 * trace's last moment); never before its thread's last moment in last
 * (open_note()), so the spans a thread died in nest as they were. */
struct shmt_record open_end(const struct shmt_record *open, uint32_t pid,
			    const struct u64map *last, uint64_t last_end);
/* An open span's arguments, or NULL when it has none. */
const struct ev_args *open_args(const struct open_ev *e);
/* Forgets the open spans kept (newest_first stays). */
void open_free(struct open_spans *o);

#endif
