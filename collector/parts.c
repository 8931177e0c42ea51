/* SPDX-License-Identifier: MIT */
/*
 * parts.c - a rotated capture's part names, the capture of a collector
 * before this one kept aside, and its oldest parts deleted to keep within
 * --max-files (parts.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

/* The name's tail after FILE's base when it is one of the capture's files:
 * "" (FILE), ".N" (part N), ".replaced" (a replaced ring's), or NULL. */
static const char *capture_suffix(const char *name, const char *base)
{
	size_t bl = strlen(base);
	const char *t = name + bl, *d;

	if (strncmp(name, base, bl))
		return NULL;
	if (!*t)
		return t;
	if (*t != '.')
		return NULL;
	d = t + 1;
	if (!strcmp(d, "replaced"))
		return t;
	if (*d < '0' || *d > '9')
		return NULL;
	while (*d >= '0' && *d <= '9')
		d++;
	return *d ? NULL : t;
}

/* Whether dir holds a name that starts with prefix followed by nothing or
 * a dot: FILE.prevN taken by itself or by one of its parts. */
static bool prefix_taken(DIR *dir, const char *prefix)
{
	size_t pl = strlen(prefix);
	struct dirent *e;

	rewinddir(dir);
	while ((e = readdir(dir)))
		if (!strncmp(e->d_name, prefix, pl) && (!e->d_name[pl] || e->d_name[pl] == '.'))
			return true;
	return false;
}

/* rename() that never replaces a file: a name taken meanwhile fails with
 * EEXIST (a file system without RENAME_NOREPLACE checks first) */
static int rename_new(int dfd, const char *from, const char *to)
{
	if (renameat2(dfd, from, dfd, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL)
		return -errno;
	if (faccessat(dfd, to, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return -EEXIST;
	return renameat(dfd, from, dfd, to) < 0 ? -errno : 0;
}

/* The capture's file at e in dir, or NULL: a capture of ours, the file's
 * only name. Anything else is left where it is, for the open to refuse
 * (a symbolic link, a hard link planted to have us write into another
 * file) or to write over as before (an empty file, or one that is no
 * capture); another user's file in a shared folder is no capture of ours,
 * and one we could not rename would stop us. */
static bool our_capture(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	uint8_t head[16];
	struct stat st;
	ssize_t n;

	if (fd < 0)
		return false;
	n = fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    st.st_uid != geteuid() ? 0 : read(fd, head, sizeof(head));
	close(fd);
	return n > 0 && shmt_cap_looks_like(head, (size_t)n);
}

static const char *kept_suffix(DIR *dir, const struct dirent *e, const char *base)
{
	const char *suffix = capture_suffix(e->d_name, base);

	return suffix && our_capture(dirfd(dir), e->d_name) ? suffix : NULL;
}

int parts_keep_previous(const char *output, char *kept, size_t len, char *err, size_t errlen)
{
	const char *slash = strrchr(output, '/'), *base = slash ? slash + 1 : output, *suffix;
	char *dname = strndup(output, slash ? (size_t)(slash - output) + 1 : 0);
	char prefix[NAME_MAX + 32] = "", to[NAME_MAX + 32];
	size_t longest = 0;
	bool any = false;
	struct dirent *e;
	DIR *dir = NULL;
	int ret = 0, moved = 0;

	kept[0] = 0;
	if (!dname)
		return -ENOMEM;
	if (!*base || strlen(base) > NAME_MAX)
		goto out;	/* opening it says what is wrong with the name */
	dir = opendir(*dname ? dname : ".");
	if (!dir) {
		int e = errno;

		/* a folder we may write but not list: FILE alone is looked at,
		 * and a capture there is not written over unseen */
		if (e != ENOENT && our_capture(AT_FDCWD, output)) {
			ret = -e;
			snprintf(err, errlen, "cannot list the folder of '%.400s' to keep the capture "
				 "there aside: %s; nothing was overwritten", output, strerror(e));
		}
		goto out;
	}
	while ((e = readdir(dir)))
		if ((suffix = kept_suffix(dir, e, base))) {
			any = true;
			if (strlen(suffix) > longest)
				longest = strlen(suffix);
		}
	if (!any)
		goto out;	/* nothing there to keep: the usual start */
	for (unsigned n = 1; !*prefix || prefix_taken(dir, prefix); n++)
		snprintf(prefix, sizeof(prefix), "%s.prev%u", base, n);
	/* a name that leaves no room for ".prevK" and its suffix is said,
	 * not written over */
	if (strlen(prefix) + longest > NAME_MAX) {
		ret = -ENAMETOOLONG;
		snprintf(err, errlen, "cannot keep the capture already at '%.400s' aside: its name "
			 "leaves no room for .prevK; nothing was overwritten (give a shorter -o)",
			 output);
		goto out;
	}
	rewinddir(dir);
	while ((e = readdir(dir))) {
		if (!(suffix = kept_suffix(dir, e, base)))
			continue;
		snprintf(to, sizeof(to), "%s%s", prefix, suffix);
		ret = rename_new(dirfd(dir), e->d_name, to);
		if (ret < 0) {
			snprintf(err, errlen, "cannot keep '%s%.200s' as '%s%.200s': %s; nothing "
				 "was overwritten", dname, e->d_name, dname, to, strerror(-ret));
			goto out;
		}
		moved++;
		/* renamed within the folder being read: readdir() may show
		 * it again, under its new name, which matches no base */
	}
	snprintf(kept, len, "%s%s", dname, prefix);
	ret = moved;
out:
	if (dir)
		closedir(dir);
	free(dname);
	return ret;
}
