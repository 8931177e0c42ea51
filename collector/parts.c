/* SPDX-License-Identifier: MIT */
/*
 * parts.c - a rotated capture's part names, and its oldest parts deleted
 * to keep within --max-files (parts.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "parts.h"

struct parts {
	const char *output;
	uint32_t max_files;
	/* the parts ended and not deleted yet, oldest first: a ring of
	 * max_files entries (the new part makes one more at most) */
	struct part_ended *kept;
	uint32_t first, n;
	struct shmt_cap_deleted deleted;
};

int parts_path(const char *output, uint32_t part, char *buf, size_t len)
{
	int n = part ? snprintf(buf, len, "%s.%u", output, part) : snprintf(buf, len, "%s", output);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

struct parts *parts_new(const char *output, uint32_t max_files)
{
	struct parts *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->output = output;
	p->max_files = max_files;
	p->deleted.max_files = max_files;
	/* untouched pages cost nothing: a large bound takes memory only as
	 * parts are made */
	if (max_files && !(p->kept = calloc(max_files, sizeof(*p->kept)))) {
		free(p);
		return NULL;
	}
	return p;
}

void parts_free(struct parts *p)
{
	if (!p)
		return;
	free(p->kept);
	free(p);
}

void parts_ended(struct parts *p, const struct part_ended *e)
{
	/* no bound: nothing is ever deleted, nothing to remember */
	if (!p->max_files)
		return;
	/* never full: parts_prune() leaves max_files - 1 after each part */
	if (p->n == p->max_files)
		parts_prune(p);
	p->kept[(p->first + p->n) % p->max_files] = *e;
	p->n++;
}

/*
 * Deletes part e's file if it is still the one written. lstat() then
 * unlink() leaves a moment in which another file could take the name;
 * only a user who may write the directory can put one there, and that
 * user could delete it as well. The check is for what happens without
 * malice: a part moved away to keep it, its name reused by someone else.
 */
static void delete_part(const struct parts *p, const struct part_ended *e)
{
	char path[PARTS_PATH_MAX];
	struct stat st;

	if (parts_path(p->output, e->part, path, sizeof(path)) < 0)
		return;	/* the part could not have been opened either */
	if (lstat(path, &st) < 0) {
		/* gone already: nothing to delete */
		if (errno != ENOENT)
			fprintf(stderr, "shmtrace-collector: warning: cannot delete part '%s' "
				"(--max-files %u): %s\n", path, p->max_files, strerror(errno));
		return;
	}
	if (!S_ISREG(st.st_mode) || !e->ino || (uint64_t)st.st_dev != e->dev ||
	    (uint64_t)st.st_ino != e->ino) {
		fprintf(stderr, "shmtrace-collector: warning: '%s' is no longer the part this "
			"collector wrote (moved or replaced since): not deleted\n", path);
		return;
	}
	if (unlink(path) < 0)
		fprintf(stderr, "shmtrace-collector: warning: cannot delete part '%s' "
			"(--max-files %u): %s; it stays on disk\n", path, p->max_files,
			strerror(errno));
}

void parts_prune(struct parts *p)
{
	while (p->max_files && p->n && p->n + 1 > p->max_files) {
		const struct part_ended *e = &p->kept[p->first];

		delete_part(p, e);
		/* the parts are deleted in order: those below are all gone */
		if (!p->deleted.parts)
			p->deleted.from_ns = e->started_ns;
		p->deleted.parts = e->part + 1;
		p->deleted.records = e->records;
		p->deleted.to_ns = e->end_ns;
		p->first = (p->first + 1) % p->max_files;
		p->n--;
	}
}

const struct shmt_cap_deleted *parts_deleted(const struct parts *p)
{
	return &p->deleted;
}
