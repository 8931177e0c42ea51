/* SPDX-License-Identifier: MIT */
/*
 * extsort.c - a bounded-memory external merge sort (extsort.h): sorted
 * runs in one unlinked temporary file, merged through a binary heap, the
 * one buffer shared out among the runs as their read buffers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "array.h"
#include "extsort.h"

#define MIN_ITEMS 1024u

struct run {
	uint64_t off, n;	/* where in the file, items */
	uint64_t next;		/* items read from the file */
	char *buf;		/* its share of the buffer while reading */
	size_t have, pos, cap;	/* items in buf, the current one, room */
};

struct extsort {
	size_t size;
	extsort_cmp_fn cmp;
	char *buf;
	size_t cap, n;		/* items the buffer may hold, and has */
	size_t alloc;		/* items it has room for: grown up to cap as
				 * items come, so a small sort costs little */
	uint64_t count, end;	/* items added; bytes of the file */
	int fd;
	struct run *runs;
	size_t nruns, runcap;
	/* reading: all in memory (pos into buf), or the runs merged */
	bool reading, in_memory;
	size_t pos;
	unsigned *heap;
	size_t nheap;
};

struct extsort *extsort_new(size_t size, extsort_cmp_fn cmp, size_t mem)
{
	struct extsort *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->size = size;
	s->cmp = cmp;
	s->cap = mem / size < MIN_ITEMS ? MIN_ITEMS : mem / size;
	s->fd = -1;
	return s;
}

void extsort_free(struct extsort *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	free(s->buf);
	free(s->runs);
	free(s->heap);
	free(s);
}

uint64_t extsort_count(const struct extsort *s)
{
	return s->count;
}

unsigned extsort_runs(const struct extsort *s)
{
	return (unsigned)s->nruns;
}

const char *extsort_tempdir(void)
{
	const char *dir = getenv("TMPDIR");

	return dir && *dir ? dir : "/tmp";
}

int extsort_tempfile(void)
{
	const char *dir = extsort_tempdir();
	char path[4096];
	int fd;

	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd >= 0 ? fd : -errno;
	/* a file system without O_TMPFILE: a named file, unlinked at once */
	if ((size_t)snprintf(path, sizeof(path), "%s/shmtrace-sort-XXXXXX", dir) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	unlink(path);
	return fd;
}

static int write_all(int fd, const char *p, size_t len, uint64_t off)
{
	while (len) {
		ssize_t w = pwrite(fd, p, len, (off_t)off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* Writes the buffer, sorted, as the next run. */
static int spill(struct extsort *s)
{
	int ret;

	if (!s->n)
		return 0;
	if (s->fd < 0 && (s->fd = extsort_tempfile()) < 0) {
		ret = s->fd;
		s->fd = -1;
		return ret;
	}
	if (array_reserve(&s->runs, &s->runcap, s->nruns + 1, sizeof(*s->runs), 16) < 0)
		return -ENOMEM;
	if (s->cmp)
		qsort(s->buf, s->n, s->size, s->cmp);
	ret = write_all(s->fd, s->buf, s->n * s->size, s->end);
	if (ret < 0)
		return ret;
	s->runs[s->nruns++] = (struct run){ .off = s->end, .n = s->n };
	s->end += s->n * s->size;
	s->n = 0;
	return 0;
}

int extsort_add(struct extsort *s, const void *item)
{
	int ret;

	if (s->reading)
		return -EINVAL;
	if (s->n == s->cap && (ret = spill(s)) < 0)
		return ret;
	if (s->n == s->alloc &&
	    array_reserve_max(&s->buf, &s->alloc, s->n + 1, s->size, MIN_ITEMS, s->cap) < 0)
		return -ENOMEM;
	memcpy(s->buf + s->n * s->size, item, s->size);
	s->n++;
	s->count++;
	return 0;
}

static inline const char *cur(const struct extsort *s, unsigned r)
{
	return s->runs[r].buf + s->runs[r].pos * s->size;
}

/* Whether run a's item goes before run b's (ties: the earlier run). */
static bool before(const struct extsort *s, unsigned a, unsigned b)
{
	int c = s->cmp(cur(s, a), cur(s, b));

	return c < 0 || (c == 0 && a < b);
}

static void sift_down(struct extsort *s, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		unsigned t;

		if (l < s->nheap && before(s, s->heap[l], s->heap[m]))
			m = l;
		if (l + 1 < s->nheap && before(s, s->heap[l + 1], s->heap[m]))
			m = l + 1;
		if (m == i)
			return;
		t = s->heap[i];
		s->heap[i] = s->heap[m];
		s->heap[m] = t;
		i = m;
	}
}

/* Refills run r's buffer: 1, 0 when the run is done, or -errno. */
static int fill(struct extsort *s, struct run *r)
{
	size_t want = r->n - r->next < r->cap ? (size_t)(r->n - r->next) : r->cap;
	size_t len = want * s->size, got = 0;

	while (got < len) {
		ssize_t n = pread(s->fd, r->buf + got, len - got,
				  (off_t)(r->off + r->next * s->size + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		got += (size_t)n;
	}
	r->next += want;
	r->have = want;
	r->pos = 0;
	return want > 0;
}

int extsort_rewind(struct extsort *s)
{
	size_t share;
	int ret;

	if (!s->reading) {
		s->reading = true;
		s->in_memory = s->nruns == 0;
		if (s->in_memory) {
			if (s->cmp && s->n)
				qsort(s->buf, s->n, s->size, s->cmp);
		} else if ((ret = spill(s)) < 0) {
			return ret;
		}
		if (!s->in_memory && !(s->heap = calloc(s->nruns, sizeof(*s->heap))))
			return -ENOMEM;
	}
	s->pos = 0;
	if (s->in_memory)
		return 0;
	/* the buffer, no longer needed for adding, shared out for reading */
	if (s->cap < s->nruns) {
		char *b = realloc(s->buf, s->nruns * s->size);

		if (!b)
			return -ENOMEM;
		s->buf = b;
		s->cap = s->alloc = s->nruns;
	}
	share = s->cap / s->nruns;
	s->nheap = 0;
	for (size_t i = 0; i < s->nruns; i++) {
		struct run *r = &s->runs[i];

		r->buf = s->buf + i * share * s->size;
		r->cap = share;
		r->next = 0;
		ret = fill(s, r);
		if (ret < 0)
			return ret;
		if (ret)
			s->heap[s->nheap++] = (unsigned)i;
	}
	if (s->cmp)
		for (size_t i = s->nheap / 2; i-- > 0;)
			sift_down(s, i);
	return 0;
}

int extsort_next(struct extsort *s, void *item)
{
	struct run *r;
	int ret;

	if (!s->reading)
		return -EINVAL;
	if (s->in_memory) {
		if (s->pos >= s->n)
			return 0;
		memcpy(item, s->buf + s->pos++ * s->size, s->size);
		return 1;
	}
	if (!s->nheap)
		return 0;
	/* unsorted: the runs one after the other, in the heap's order */
	r = &s->runs[s->heap[0]];
	memcpy(item, cur(s, s->heap[0]), s->size);
	if (++r->pos == r->have) {
		ret = fill(s, r);
		if (ret < 0)
			return ret;
		if (!ret) {
			if (s->cmp) {
				s->heap[0] = s->heap[--s->nheap];
			} else {
				memmove(s->heap, s->heap + 1, --s->nheap * sizeof(*s->heap));
				return 1;
			}
		}
	}
	if (s->cmp)
		sift_down(s, 0);
	return 1;
}
