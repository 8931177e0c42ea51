/* SPDX-License-Identifier: MIT */
/*
 * outfile.c - creating output files without following what another user
 * planted at their path (outfile.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "outfile.h"

/* Whether a file of mode m is refused: all but a regular file and a
 * character device (/dev/null), which no user can plant. */
static bool refused_kind(mode_t m)
{
	return !S_ISREG(m) && !S_ISCHR(m);
}

const char *file_kind_name(mode_t m)
{
	if (S_ISREG(m))
		return "a regular file";
	if (S_ISLNK(m))
		return "a symbolic link";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISCHR(m))
		return "a character device";
	return "not a regular file";
}

/* The error for a refused file of mode m at path: -ELOOP or -EINVAL. */
static int refuse(const char *path, mode_t m, char *err, size_t errlen)
{
	if (S_ISLNK(m)) {
		snprintf(err, errlen, "'%.400s' is a symbolic link: refusing to write through it",
			 path);
		return -ELOOP;
	}
	snprintf(err, errlen, "'%.400s' is %s, not a regular file: refusing to write to it", path,
		 file_kind_name(m));
	return S_ISDIR(m) ? -EISDIR : -EINVAL;
}

/* An open() of path failed with e: says why, in the words of refuse()
 * when what is there now is a link or a FIFO without a reader. */
static int open_failed(const char *path, int e, char *err, size_t errlen)
{
	struct stat st;

	if ((e == ELOOP || e == ENXIO || e == EISDIR) && lstat(path, &st) == 0 &&
	    refused_kind(st.st_mode))
		return refuse(path, st.st_mode, err, errlen);
	snprintf(err, errlen, "cannot write '%.400s': %s", path, strerror(e));
	return -e;
}

/* Whether the directory of path is one anyone may write into (/tmp). */
static bool dir_open_to_all(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	struct stat st;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else if ((size_t)(slash - path) < sizeof(dir))
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	else
		return true;	/* not known: taken as open */
	return stat(dir, &st) != 0 || (S_ISDIR(st.st_mode) && (st.st_mode & S_IWOTH));
}

/*
 * Whether the regular file st at path was planted there for us to fill:
 * it has other names (a hard link: writing would change the file it
 * links to as well), or another user owns it in a directory anyone may
 * write (what fs.protected_regular refuses, when it is on). Returns 0, or
 * -EPERM with the reason in err.
 */
static int planted(const char *path, const struct stat *st, char *err, size_t errlen)
{
	if (st->st_nlink > 1) {
		snprintf(err, errlen, "'%.400s' has %ju other name%s (hard links): refusing to write "
			 "into it", path, (uintmax_t)st->st_nlink - 1, st->st_nlink > 2 ? "s" : "");
		return -EPERM;
	}
	if (st->st_uid != geteuid() && dir_open_to_all(path)) {
		snprintf(err, errlen, "'%.400s' belongs to another user (uid %u) in a directory "
			 "anyone may write: refusing to write into it", path, (unsigned)st->st_uid);
		return -EPERM;
	}
	return 0;
}

/* A file from before (st) that lets more read it than mode does: narrowed
 * to mode's read bits before anything is written into it, its other bits
 * as they were. 0, or -1 with errno. */
static int narrow(int fd, const struct stat *st, unsigned mode)
{
	return st->st_mode & 044 & ~mode ? fchmod(fd, st->st_mode & 07777 & ~(044 & ~mode)) : 0;
}

static int open_in_place(struct outfile *o, unsigned mode, char *err, size_t errlen)
{
	struct stat st;
	bool known;
	int fl, ret;

	/* O_NONBLOCK: a FIFO planted at the path must not hang us until a
	 * reader comes (without one the open fails with ENXIO) */
	o->fd = open(o->path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC,
		     (mode_t)mode);
	if (o->fd < 0)
		return open_failed(o->path, errno, err, errlen);
	known = fstat(o->fd, &st) == 0;
	if (known && refused_kind(st.st_mode))
		ret = refuse(o->path, st.st_mode, err, errlen);
	else if (known && S_ISREG(st.st_mode) && planted(o->path, &st, err, errlen) < 0)
		ret = -EPERM;
	/* narrowed and truncated only once it is known to be a regular
	 * file of ours */
	else if (known && (!S_ISREG(st.st_mode) ||
			   (narrow(o->fd, &st, mode) == 0 && ftruncate(o->fd, 0) == 0)) &&
		 (fl = fcntl(o->fd, F_GETFL)) >= 0 && fcntl(o->fd, F_SETFL, fl & ~O_NONBLOCK) == 0)
		return 0;
	else
		ret = open_failed(o->path, errno, err, errlen);
	close(o->fd);
	o->fd = -1;
	return ret;
}

/*
 * Makes a name "DIR/.NAME.XXXXXX.tmp" beside o->path that nothing has, in
 * o->tmp, and calls make(o) until it creates it: 0, or -errno.
 */
static int at_tmp_name(struct outfile *o, int (*make)(struct outfile *o))
{
	const char *slash = strrchr(o->path, '/');
	size_t dirlen = slash ? (size_t)(slash - o->path) + 1 : 0;
	size_t len = strlen(o->path) + 32;
	struct timespec ts;
	unsigned long long r;
	int ret = -EEXIST;

	o->tmp = malloc(len);
	if (!o->tmp)
		return -ENOMEM;
	clock_gettime(CLOCK_REALTIME, &ts);
	r = (unsigned long long)ts.tv_nsec ^ ((unsigned long long)getpid() << 32);
	for (int tries = 0; tries < 100 && ret == -EEXIST; tries++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		snprintf(o->tmp, len, "%.*s.%s.%06llx.tmp", (int)dirlen, o->path,
			 o->path + dirlen, (r >> 40) & 0xffffff);
		ret = make(o);
	}
	if (ret < 0) {
		free(o->tmp);
		o->tmp = NULL;
	}
	return ret;
}

/* O_EXCL: never a file or a link that is already there */
static int create_tmp(struct outfile *o)
{
	o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
		     (mode_t)o->mode);
	return o->fd >= 0 ? 0 : -errno;
}

/* The anonymous file given the name o->tmp (linkat() never replaces). */
static int link_anon(struct outfile *o)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", o->anon);
	return linkat(AT_FDCWD, proc, AT_FDCWD, o->tmp, AT_SYMLINK_FOLLOW) == 0 ? 0 : -errno;
}

/*
 * An unnamed file in o->path's directory (O_TMPFILE), named only once it
 * is whole (outfile_commit()): a run killed before that leaves nothing
 * behind. o->anon keeps it open for the naming, whatever the caller does
 * with o->fd. Where the file system has no O_TMPFILE, or /proc is not
 * there to name it through, a named temporary beside the path instead.
 */
static int open_tmp(struct outfile *o, char *err, size_t errlen)
{
	const char *slash = strrchr(o->path, '/');
	char dir[4096];
	int ret;

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - o->path) + 1 : 1,
		 slash ? o->path : ".");
	if (access("/proc/self/fd", X_OK) == 0 &&
	    (o->fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, (mode_t)o->mode)) >= 0) {
		o->anon = dup(o->fd);
		if (o->anon >= 0)
			return 0;
		close(o->fd);
	}
	ret = at_tmp_name(o, create_tmp);
	if (ret < 0)
		snprintf(err, errlen, "cannot create a file beside '%.400s': %s", o->path,
			 strerror(-ret));
	return ret;
}

unsigned outfile_mode_within(unsigned mode, unsigned src)
{
	if (!(src & S_IRGRP))
		mode &= ~070u;
	if (!(src & S_IROTH))
		mode &= ~07u;
	return mode;
}

int outfile_open(struct outfile *o, const char *path, enum outfile_how how, unsigned mode,
		 char *err, size_t errlen)
{
	struct stat st;

	o->fd = -1;
	o->anon = -1;
	o->path = path;
	o->tmp = NULL;
	o->excl = how == OUTFILE_NEW;
	o->mode = mode & 0777;
	if (lstat(path, &st) == 0) {
		/* a new file's path is taken by anything there, a link or a
		 * FIFO a peer planted too: a caller that picks another name
		 * on EEXIST (a flight recorder's next snapshot) goes on */
		if (o->excl) {
			snprintf(err, errlen, "'%.400s' exists", path);
			return -EEXIST;
		}
		if (refused_kind(st.st_mode))
			return refuse(path, st.st_mode, err, errlen);
		/* a device is written as it is, never replaced */
		if (S_ISCHR(st.st_mode))
			how = OUTFILE_IN_PLACE;
	}
	return how == OUTFILE_IN_PLACE ? open_in_place(o, mode, err, errlen) : open_tmp(o, err, errlen);
}

/* OUTFILE_NEW: the file named at the path only if it is free: a link,
 * which never replaces (then the temporary's name goes). 0 or -errno. */
static int name_new(struct outfile *o)
{
	char proc[64];
	int ret = 0;

	if (o->anon >= 0) {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", o->anon);
		if (linkat(AT_FDCWD, proc, AT_FDCWD, o->path, AT_SYMLINK_FOLLOW) < 0)
			ret = -errno;
	} else if (o->tmp && link(o->tmp, o->path) < 0) {
		ret = -errno;
	}
	if (o->tmp)
		unlink(o->tmp);
	return ret;
}

int outfile_commit(struct outfile *o, char *err, size_t errlen)
{
	int ret = 0;

	if (o->fd >= 0 && close(o->fd) < 0) {
		ret = -errno;
		snprintf(err, errlen, "writing '%.400s': %s", o->path, strerror(-ret));
	}
	o->fd = -1;
	if (ret == 0 && o->excl) {
		if ((ret = name_new(o)) == -EEXIST)
			snprintf(err, errlen, "'%.400s' exists", o->path);
		else if (ret < 0)
			snprintf(err, errlen, "cannot name the output '%.400s': %s", o->path,
				 strerror(-ret));
		if (o->anon >= 0)
			close(o->anon);
		o->anon = -1;
		free(o->tmp);
		o->tmp = NULL;
		return ret;
	}
	if (ret == 0 && o->anon >= 0 && (ret = at_tmp_name(o, link_anon)) < 0)
		snprintf(err, errlen, "cannot name the output beside '%.400s': %s", o->path,
			 strerror(-ret));
	if (o->anon >= 0)
		close(o->anon);
	o->anon = -1;
	if (ret == 0 && o->tmp && rename(o->tmp, o->path) < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot rename the output into '%.400s': %s", o->path,
			 strerror(-ret));
	}
	if (ret < 0 && o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	o->tmp = NULL;
	return ret;
}

void outfile_abort(struct outfile *o)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (o->anon >= 0)
		close(o->anon);
	o->anon = -1;
	if (o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	o->tmp = NULL;
}

int outfile_sync_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	int fd, ret = 0;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}
