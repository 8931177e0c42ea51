/* SPDX-License-Identifier: MIT */
/*
 * extsort.h - sorting more fixed-size items than memory should hold: the
 * items are kept in a buffer of a bounded size, each full buffer is
 * sorted and written as a run to an unlinked temporary file, and reading
 * merges the runs. Memory: the buffer, and a read buffer per run while
 * reading; never one byte per item beyond the buffer. A sort that fits its
 * buffer never touches a file.
 *
 * Also a plain spill file of items in the order they were added (a cmp
 * of NULL): the same bounded buffer, written out as it fills.
 *
 * Temporary files go to $TMPDIR, or /tmp; they are unlinked from the
 * start, so nothing is left behind whatever happens to the process.
 */
#ifndef SHMTRACE_EXTSORT_H
#define SHMTRACE_EXTSORT_H

#include <stddef.h>
#include <stdint.h>

struct extsort;

typedef int (*extsort_cmp_fn)(const void *a, const void *b);

/* An unlinked temporary file, read and written, in $TMPDIR or /tmp: its
 * descriptor, or -errno. */
int extsort_tempfile(void);
/* The directory it is made in: $TMPDIR if set and not empty, else /tmp. */
const char *extsort_tempdir(void);

/* A sorter of items of size bytes in the order of cmp (NULL: the order
 * they are added in), holding at most mem bytes of items in memory.
 * Returns NULL without memory. */
struct extsort *extsort_new(size_t size, extsort_cmp_fn cmp, size_t mem);
void extsort_free(struct extsort *s);

/* Adds one item. Returns 0, or -errno (writing a run failed: ENOSPC of
 * the temporary directory, say). Not after extsort_rewind(). */
int extsort_add(struct extsort *s, const void *item);

/* Items added. */
uint64_t extsort_count(const struct extsort *s);

/* Runs written to the temporary file so far (0: all in memory). */
unsigned extsort_runs(const struct extsort *s);

/* Ends adding and starts (or starts again) reading from the first item.
 * Returns 0 or -errno. */
int extsort_rewind(struct extsort *s);

/* The next item, in order, into item: 1, 0 at the end, or -errno. */
int extsort_next(struct extsort *s, void *item);

#endif
