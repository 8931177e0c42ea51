/* SPDX-License-Identifier: MIT */
/*
 * source_int.h - what a source's back-end (source_ring.c: a ring in
 * /dev/shm; source_capture.c: capture files) provides to source.c, and
 * the string and name-slot tables source.c keeps for both.
 */
#ifndef SHMTRACE_SOURCE_INT_H
#define SHMTRACE_SOURCE_INT_H

#include "ring_reader.h"
#include "source.h"

/* One pass over the records: where they go, and the losses it saw. */
struct source_pass {
	struct source *s;
	source_record_fn fn;
	void *ctx;
	struct shmt_ring_skips skips;	/* torn and lapped, of this pass */
};

struct source_ops {
	const char *kind;		/* "ring" or "capture" */
	/* hands every record to p->fn; 0, fn's non-zero return, or -errno
	 * with err set */
	int (*pass)(struct source *s, struct source_pass *p, char *err, size_t errlen);
	/* after the first pass, when it succeeded (NULL: nothing to do) */
	void (*first_pass_done)(struct source *s);
	int (*clock_offset)(struct source *s, const char *host, int64_t ns);
	void (*ring_info)(const struct source *s, uint32_t i, const char **name,
			  uint64_t *ring_id, uint64_t *run_id);
	void (*close)(struct source *s);
	/* whether the counters can be true of the input (shmt_loss_plausible()),
	 * after opening, and after the first whole pass (passed: then what the
	 * pass read is checked too); false with why set (NULL: no check) */
	bool (*plausible)(struct source *s, bool passed, char *why, size_t len);
};

extern const struct source_ops source_ring_ops;
extern const struct source_ops source_capture_ops;

/* A ring source (source_ring.c): its passes read sequences from seq on
 * only (those below were read from captures); its tail and head now. */
void source_ring_from(struct source *s, uint64_t seq);
void source_ring_seqs(const struct source *s, uint64_t *tail, uint64_t *head);

/* source_open.c: a pass's records go through it first, which keeps the
 * arguments of open spans out of the stream (source_open_args()): it
 * puts its filter in *fn and *ctx, keeping theirs. 0 or -ENOMEM. */
int source_open_pass(struct source *s, source_record_fn *fn, void **ctx);
void source_open_free(struct source *s);

/* A table of n string ids: str[id] text, slen[id] its length. */
int source_table_alloc(char ***str, uint32_t **slen, uint32_t n);
void source_table_free(char **str, uint32_t *slen, uint32_t n);
/* str[id] = a copy of text[0..len); ids 0 and >= n are ignored. */
int source_table_set(char **str, uint32_t *slen, uint32_t n, uint32_t id, const char *text,
		     size_t len);
/* The source's own table, of n ids. */
int source_alloc_strings(struct source *s, uint32_t n);
/* Keeps name slot t, of ring ring. */
int source_add_thread(struct source *s, const struct shmt_thread *t, uint32_t ring);

#endif
