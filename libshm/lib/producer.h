/* SPDX-License-Identifier: MIT */
/*
 * producer.h - what the files of libshm/lib/ share, over core.h (the
 * bottom: the handle, the thread's slots, the process's identity). The
 * files, each calling only files below it (docs/DESIGN.md, "Layers"):
 *   traceparent.c  default.c  handle.c  emit.c  stage.c  process.c
 *   intern.c  attach.c  intern_cache.c  core.c
 * Declared here by file, from the bottom up.
 */
#ifndef SHMTRACE_PRODUCER_H
#define SHMTRACE_PRODUCER_H

#include <string.h>

#include "core.h"
#include "loss.h"

/* intern_cache.c: a handle's strings -> handle ids (t->cache). */
struct intern_entry {
	struct intern_entry *next;
	uint32_t hash;
	uint32_t id;
	size_t len;
	char s[];
};

struct intern_cache {
	uint32_t nbuckets;
	uint32_t count;
	uint32_t failed;	/* entries with id 0: the table had no room */
	struct intern_entry *bucket[];
};

static inline struct intern_entry *shmt_intern_cache_find(struct intern_cache *c, const char *s, size_t len, uint32_t h)
{
	if (!c)
		return NULL;
	for (struct intern_entry *e = c->bucket[h & (c->nbuckets - 1)]; e; e = e->next)
		if (e->hash == h && e->len == len && !memcmp(e->s, s, len))
			return e;
	return NULL;
}

/* Adds s (id 0: it did not fit in the ring) to t's cache; grows the table
 * when it is fuller than one entry per bucket. t->local held. */
int shmt_intern_cache_put(shmtrace_t *t, const char *s, size_t len, uint32_t h, uint32_t id);
/* Frees t's intern cache (at close). */
void shmt_intern_cache_free(shmtrace_t *t);
/* Handle id for a ring id just interned (t->local held). */
uint32_t shmt_handle_id(shmtrace_t *t, struct shmt_att *a, uint32_t ring_id);
/* The handle's strings interned in the new ring a, the callers' ids
 * mapped to theirs there (t->local held). Returns 0 or -errno. */
int shmt_intern_remap(shmtrace_t *t, struct shmt_att *a);

/* attach.c: maps the ring behind t's name as a new attachment (0 or
 * -errno); unmaps and frees one. */
int shmt_att_open(shmtrace_t *t, struct shmt_att **out);
void shmt_att_free(struct shmt_att *a);
/* The attachment behind t now, attaching or moving to the ring behind t's
 * name first if it is time to look (see SHMT_LOOK_NS). */
struct shmt_att *shmt_attach_current(shmtrace_t *t);
/* Whether a collector drains a's ring: the pid it wrote there lives.
 * Untrusted, and a reused pid reads as alive: records then go on into a
 * retired ring as before, never refused for nothing. */
bool shmt_att_drained(const struct shmt_att *a);
/* ... and drains it now: it lives and is neither stopped (SIGSTOP, a
 * debugger) nor a zombie, as a look within the last SHMT_DRAINING_LOOK_NS
 * saw it (a look reads /proc). A reused pid reads as draining. errno is
 * kept. */
bool shmt_att_draining(struct shmt_att *a);

/* process.c: once per process: identity, the fork and thread-exit hooks. */
void shmt_process_init(void);
/* Registers a live handle (-EMFILE past SHMT_MAX_HANDLES), or forgets one. */
int shmt_registry_add(shmtrace_t *t);
void shmt_registry_remove(shmtrace_t *t);
/* A slot of the calling thread's whose handle is closed, or NULL. A close
 * gives up its own thread's slots; another thread's keep the id of an
 * attachment that is gone, and would hold the slot for good. Looks only
 * when a handle was closed since this thread last looked. */
struct shmt_tls_slot *shmt_slot_of_closed(void);
/* Arms the calling thread's exit handler (frees its blocks). */
void shmt_thread_watch(void);
/* The calling thread's name: the one it set, else its comm. */
void shmt_thread_name(char *buf);
/* Before slot s of attachment a is given up: a thread that never found
 * the lock free to name itself (stage.c) waits for it now, once, as a
 * producer waits; what still fails is counted (shmt_slot_name_lost()). */
void shmt_name_at_release(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s);

/* stage.c: finds or makes the calling thread's slot for a (NULL: no block,
 * and r[0..n) were written under the lock instead, *ret saying how); makes
 * room for n more records; flushes the slot's block, waiting for the lock
 * at most wait_ns (0: only trying it). */
struct shmt_tls_slot *shmt_slot_slow(shmtrace_t *t, struct shmt_att *a,
				     const struct shmt_record *r, unsigned n, int *ret);
int shmt_make_room(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s, unsigned n);
int shmt_flush_slot(shmtrace_t *t, struct shmt_att *a, struct shmt_tls_slot *s, uint64_t wait_ns);

#endif /* SHMTRACE_PRODUCER_H */
