/* SPDX-License-Identifier: MIT */
/*
 * ring_create.c - making a ring segment: the configuration's defaults, a
 * segment built whole under a temporary name and only then linked to its
 * name, and removing one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ring_writer.h"

static int fill_config(const struct shmtrace_ring_config *in, struct shmtrace_ring_config *c)
{
	static const struct shmtrace_ring_config def = {
		.capacity = 262144, .mode = SHMTRACE_MODE_DISCARD, .perm = 0600,
		.max_strings = 4096, .string_bytes = 256 * 1024, .max_threads = 1024,
		.blocks = SHMT_DEFAULT_BLOCKS, .flags = 0,
	};

	*c = in ? *in : def;
	if (!c->capacity)
		c->capacity = def.capacity;
	if (!c->perm)
		c->perm = def.perm;
	if (!c->max_strings)
		c->max_strings = def.max_strings;
	if (!c->string_bytes)
		c->string_bytes = def.string_bytes;
	if (!c->max_threads)
		c->max_threads = def.max_threads;
	if (!c->blocks)
		c->blocks = def.blocks;
	if (c->mode > SHMTRACE_MODE_OVERWRITE)
		return -EINVAL;
	/* others may never write; a group may, on request */
	if (c->perm & ~0660u)
		return -EINVAL;
	return 0;
}

/* Touches every page so that tmpfs allocates now: a full /dev/shm is
 * reported here as -ENOSPC instead of a SIGBUS in some producer later. */
static int preallocate(int fd, uint64_t size)
{
	int ret = posix_fallocate(fd, 0, (off_t)size);

	if (ret == EOPNOTSUPP || ret == EINVAL) {
		/* not every tmpfs honours fallocate: size it and let mmap touch */
		return ftruncate(fd, (off_t)size) < 0 ? -errno : 0;
	}
	return -ret;
}

/*
 * Removes the creation temporaries of creators that died half-way: ours
 * (same owner), from our pid namespace (a pid from another one means
 * nothing here), whose process is gone or is another one now (start time).
 * A creator we cannot judge keeps its temporary; the sweep is best effort.
 */
static void sweep_temporaries(int dir)
{
	uint64_t my_ns = shmt_self_pidns();
	struct dirent *de;
	DIR *d;
	int fd = dup(dir);

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d))) {
		uint64_t ns, start;
		unsigned int pid;
		struct stat st;
		int end = 0;

		if (strncmp(de->d_name, SHMT_TMP_PREFIX, sizeof(SHMT_TMP_PREFIX) - 1))
			continue;
		if (sscanf(de->d_name + sizeof(SHMT_TMP_PREFIX) - 1, "%" SCNu64 ".%u.%" SCNu64 ".%*x%n",
			   &ns, &pid, &start, &end) != 3 || !end)
			continue;
		if (!my_ns || ns != my_ns || !pid || shmt_proc_start_time(pid) == start)
			continue;
		if (fstatat(dir, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
		    st.st_uid != geteuid())
			continue;
		unlinkat(dir, de->d_name, 0);
	}
	closedir(d);
}

/* Fills a fresh header for layout l and configuration c: one assignment
 * per field, in docs/FORMAT.md's order, so the two read side by side. */
static void header_init(struct shmt_header *h, const struct shmtrace_ring_config *c,
			const struct shmt_layout *l)
{
	memset(h, 0, sizeof(*h));
	h->major = SHMT_RING_MAJOR;
	h->minor = SHMT_RING_MINOR - SHMT_LEVEL_MAJOR2;
	h->compat = SHMT_RING_COMPAT;
	h->header_size = SHMT_HEADER_SIZE;
	h->record_size = SHMT_RECORD_SIZE;
	h->flags = c->flags & SHMTRACE_CREATE_NO_TSC;	/* the others are requests */
	h->segment_size = l->size;
	h->capacity = c->capacity;
	h->mode = c->mode;
	h->max_strings = c->max_strings;
	h->string_bytes = c->string_bytes;
	h->hash_slots = l->hash_slots;
	h->max_threads = c->max_threads;
	h->nblocks = c->blocks;
	h->block_records = l->block_records;
	h->strings_off = l->strings_off;
	h->hash_off = l->hash_off;
	h->heap_off = l->heap_off;
	h->threads_off = l->threads_off;
	h->blocks_off = l->blocks_off;
	h->block_size = l->block_size;
	h->records_off = l->records_off;
	h->creator_uid = geteuid();
	h->created_pidns = shmt_self_pidns();
	/* an identity no other ring shares: flow ids count from 1 in every
	 * ring, so a merge of captures of two rings scopes them by it */
	if (getrandom(&h->ring_id, sizeof(h->ring_id), 0) != sizeof(h->ring_id) || !h->ring_id)
		h->ring_id = shmt_realtime_ns() ^ ((uint64_t)getpid() << 32) ^ 1;
	shmt_clock_calibrate(&h->clock, !(c->flags & SHMTRACE_CREATE_NO_TSC));
	/* string id 0 is the empty string, so that any id < strings is valid */
	h->strings = 1;
	h->heap_used = 1;
}

/* Sizes, maps and initialises the segment open on fd. */
static int ring_build(int fd, const struct shmtrace_ring_config *c, const struct shmt_layout *l)
{
	struct shmt_header *h;
	void *base;
	int ret;

	/* the umask may have cut a group mode we were asked for */
	if (fchmod(fd, c->perm) < 0)
		return -errno;
	ret = preallocate(fd, l->size);
	if (ret < 0)
		return ret;
	SHMT_HOOK("create-sized");
	base = mmap(NULL, l->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (base == MAP_FAILED)
		return -errno;
	h = base;
	header_init(h, c, l);
	ret = shmt_mutex_init(&h->mutex);
	/* the magic goes last: a reader of a ring kept by some other means
	 * (a copy, an old-style creator) still refuses a half-made one */
	if (ret == 0)
		store_release(&h->magic, SHMT_RING_MAGIC);
	munmap(base, l->size);
	return ret;
}

/* Whether ring v, its file of mode perm, is what c makes. */
static bool same_config(const struct shmt_view *v, mode_t perm, const struct shmtrace_ring_config *c)
{
	return v->capacity == c->capacity && v->mode == c->mode &&
	       v->max_strings == c->max_strings && v->string_bytes == c->string_bytes &&
	       v->max_threads == c->max_threads && v->nblocks == c->blocks &&
	       (perm & 0777) == c->perm;
}

/*
 * The ring behind name already, for ADOPT and REPLACE: true if it is ours
 * and what c makes (the one to adopt). *old is left mapped writable when
 * it is a ring of ours (so that a replacement can retire it), else zeroed.
 */
static bool look_existing(const char *name, const struct shmtrace_ring_config *c,
			  struct shmt_view *old)
{
	char err[256], path[SHMT_PATH_MAX];
	struct stat st;

	if (shmt_view_open(name, SHMT_OPEN_WRITE, old, err, sizeof(err)) < 0) {
		memset(old, 0, sizeof(*old));
		return false;
	}
	return shmt_ring_path(name, path, sizeof(path)) == 0 && lstat(path, &st) == 0 &&
	       (uint64_t)st.st_dev == old->dev && (uint64_t)st.st_ino == old->ino &&
	       same_config(old, st.st_mode, c);
}

/* Marks a mapped ring retired: its producers look for the ring behind its
 * name on every call from now on (emit.c). Set once, never cleared. */
static void retire(struct shmt_view *v)
{
	if (v->base && v->writable)
		store_release(&v->h->retired, 1u);
}

/*
 * The ring is built under a private temporary name in /dev/shm and linked
 * to its name only when whole, so that an opener finds either nothing
 * (ENOENT) or a complete ring, never one being sized. link() fails with
 * EEXIST on a taken name (a symlink included, which it does not follow),
 * as O_EXCL would. The temporary name carries the creator's pid namespace,
 * pid and start time so that a later create can remove what a creator
 * killed half-way left behind.
 */
SHMT_API int shmtrace_ring_create(const char *name, const struct shmtrace_ring_config *cfg)
{
	struct shmtrace_ring_config c;
	struct shmt_view old = { 0 };
	struct shmt_layout l;
	char tmp[128];
	uint64_t rnd;
	int dir, fd, ret;

	if (shmt_name_check(name) < 0)
		return -EINVAL;
	ret = fill_config(cfg, &c);
	if (ret < 0)
		return ret;
	ret = shmt_layout_compute(c.capacity, c.max_strings, c.string_bytes,
				  c.max_threads, c.blocks, SHMT_RING_MINOR, &l);
	if (ret < 0)
		return ret;
	if ((c.flags & (SHMTRACE_CREATE_ADOPT | SHMTRACE_CREATE_REPLACE)) &&
	    look_existing(name, &c, &old) && (c.flags & SHMTRACE_CREATE_ADOPT)) {
		shmt_view_close(&old);
		return SHMTRACE_ADOPTED;
	}

	dir = open(SHMT_SHM_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0) {
		ret = -errno;
		shmt_view_close(&old);
		return ret;
	}
	sweep_temporaries(dir);
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = shmt_mono_ns();
	snprintf(tmp, sizeof(tmp), SHMT_TMP_PREFIX "%" PRIu64 ".%u.%" PRIu64 ".%" PRIx64,
		 shmt_self_pidns(), (unsigned int)getpid(), shmt_proc_start_time((uint32_t)getpid()),
		 rnd);
	fd = openat(dir, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, c.perm);
	if (fd < 0) {
		ret = -errno;
		close(dir);
		shmt_view_close(&old);
		return ret;
	}
	ret = ring_build(fd, &c, &l);
	close(fd);
	if (ret == 0 && linkat(dir, tmp, dir, name, 0) < 0) {
		ret = -errno;
		/* rename() swaps the name over in one step: an opener finds
		 * the old ring or the new one, never none */
		if (ret == -EEXIST && (c.flags & SHMTRACE_CREATE_REPLACE))
			ret = renameat(dir, tmp, dir, name) < 0 ? -errno : SHMTRACE_REPLACED;
	}
	if (ret >= 0)
		SHMT_HOOK("create-linked");
	if (ret == SHMTRACE_REPLACED)
		retire(&old);
	unlinkat(dir, tmp, 0);
	close(dir);
	shmt_view_close(&old);
	return ret;
}

int shmt_ring_unlink_view(const char *name, struct shmt_view *v)
{
	char path[256];
	uint64_t dev, ino;
	int ret = shmt_ring_identity(name, &dev, &ino);

	if (ret < 0)
		return ret;
	if (dev != v->dev || ino != v->ino)
		return -ESTALE;
	retire(v);
	shmt_shm_name(path, sizeof(path), name);
	return shm_unlink(path) < 0 ? -errno : 0;
}

int shmt_ring_unlink_seen(const char *name, const struct shmt_view *seen)
{
	struct shmt_view v;
	char path[256], err[256];
	uint64_t dev, ino;
	int ret;

	if (shmt_name_check(name) < 0)
		return -EINVAL;
	SHMT_HOOK("unlink_seen");	/* a test makes the ring anew here */
	if (shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)) == 0) {
		ret = v.dev == seen->dev && v.ino == seen->ino ? shmt_ring_unlink_view(name, &v)
							       : -ESTALE;
		shmt_view_close(&v);
		return ret;
	}
	/* not a ring we may write (another owner's): no mark, and still
	 * nothing but the file seen, unlike shmtrace_ring_unlink() */
	if ((ret = shmt_ring_identity(name, &dev, &ino)) < 0)
		return ret;
	if (dev != seen->dev || ino != seen->ino)
		return -ESTALE;
	shmt_shm_name(path, sizeof(path), name);
	return shm_unlink(path) < 0 ? -errno : 0;
}

SHMT_API int shmtrace_ring_unlink(const char *name)
{
	struct shmt_view v;
	char path[256], err[256];
	int ret;

	if (shmt_name_check(name) < 0)
		return -EINVAL;
	if (shmt_view_open(name, SHMT_OPEN_WRITE, &v, err, sizeof(err)) == 0) {
		ret = shmt_ring_unlink_view(name, &v);
		shmt_view_close(&v);
		if (ret != -ESTALE)
			return ret;
	}
	/* not a ring we may write (another owner's, a broken one): no mark */
	shmt_shm_name(path, sizeof(path), name);
	return shm_unlink(path) < 0 ? -errno : 0;
}
