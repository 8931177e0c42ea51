/* SPDX-License-Identifier: MIT */
/*
 * outfile.h - the one way an output file is created (the collector's
 * capture and its parts, every -o of the shmtrace command): never through
 * a symbolic link, never into a FIFO, socket, directory or block device,
 * whoever planted it at the path (a shared, world-writable directory with
 * fs.protected_symlinks off lets any user plant one where root will write).
 *
 * An output written as it goes (OUTFILE_IN_PLACE: the capture, which stays
 * readable up to its last full frame) is opened at its path with
 * O_NOFOLLOW, without blocking and without taking a terminal, checked to
 * be a regular file with no other name (hard link) that, in a directory
 * anyone may write, is ours, and truncated. An output written whole (OUTFILE_WHOLE:
 * exports, SVG) is written into an unnamed file in its directory
 * (O_TMPFILE; a temporary file created exclusively beside it where the
 * file system has none), named beside it and renamed over the path by
 * outfile_commit(), so that a failed run leaves the path as it was and a
 * killed one leaves no file behind. An output that must be new
 * (OUTFILE_NEW: a flight recorder's snapshots, whose names must never
 * replace an earlier one) is written as a whole one is and named at the
 * path only if nothing is there, without a moment in which it could
 * replace what is. A character device (/dev/null)
 * is written in place either way: no user can plant one.
 */
#ifndef SHMTRACE_OUTFILE_H
#define SHMTRACE_OUTFILE_H

#include <stddef.h>
#include <sys/types.h>

enum outfile_how {
	OUTFILE_IN_PLACE,	/* opened at the path, truncated */
	OUTFILE_WHOLE,		/* a temporary beside it, renamed over it */
	OUTFILE_NEW,		/* a temporary beside it, named only if the path is free */
};

struct outfile {
	int fd;			/* -1 when none is open */
	const char *path;	/* as given (not copied) */
	char *tmp;		/* the temporary's name, or NULL */
	int anon;		/* the unnamed file, kept open to name it; -1: none */
	int excl;		/* OUTFILE_NEW: never replaces what is at the path */
	unsigned mode;		/* the permission bits asked for, before the umask */
};

/*
 * The permission bits of an output made of a source whose bits are src:
 * mode, less the group's and others' when src does not let them read. An
 * output is never readable by anyone who could not read what it was made
 * of (a capture of a private ring, an export of a private capture).
 */
unsigned outfile_mode_within(unsigned mode, unsigned src);

/* What a file of mode m is, in words, for a message that refuses it: "a
 * FIFO", "a directory", "a character device", ... */
const char *file_kind_name(mode_t m);

/*
 * Opens path for writing as how says, into o->fd (O_CLOEXEC; a new file
 * gets mode as the umask allows; an existing file written in place that
 * lets more read it than mode does is narrowed first). Returns 0,
 * or -errno with a one-line reason naming the path in err: "'PATH' is a
 * symbolic link: refusing to write through it" (-ELOOP), "'PATH' is a
 * FIFO, not a regular file: refusing to write to it" (-EINVAL), "'PATH'
 * exists" (-EEXIST, OUTFILE_NEW), ...
 */
int outfile_open(struct outfile *o, const char *path, enum outfile_how how, unsigned mode,
		 char *err, size_t errlen);

/* Closes o->fd unless already closed (the caller may have closed it, e.g.
 * through fclose(), and set it to -1) and, for a temporary, renames it
 * over the path (OUTFILE_NEW: links it there, -EEXIST when something took
 * the path meanwhile). Returns 0, or -errno with err set (the temporary
 * is then removed). */
int outfile_commit(struct outfile *o, char *err, size_t errlen);

/* fsync()s the directory path is named in, so that a name just made
 * survives a power loss with the file. 0 or -errno. */
int outfile_sync_dir(const char *path);

/* Closes o->fd if open and removes the temporary, if any: the path stays
 * as it was before outfile_open(). */
void outfile_abort(struct outfile *o);

#endif
