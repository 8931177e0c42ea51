/* SPDX-License-Identifier: MIT */
/*
 * ring.c - a ring segment's geometry and name, and validating and mapping
 * one (ring_create.c makes them).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ring_view.h"

#define ALIGN_UP(x, a) (((x) + (a) - 1) & ~((uint64_t)(a) - 1))

static bool is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

/* Returns 0 and fills l, or -EINVAL if a parameter is out of range. */
int shmt_layout_compute(uint32_t capacity, uint32_t max_strings, uint32_t string_bytes,
			uint32_t max_threads, uint32_t nblocks, uint32_t minor, struct shmt_layout *l)
{
	uint64_t off = SHMT_HEADER_SIZE;
	uint32_t slots = 16;

	if (!is_pow2(capacity) || capacity < 2 || capacity > SHMT_MAX_CAPACITY)
		return -EINVAL;
	if (max_strings < 1 || max_strings > SHMT_MAX_STRINGS)
		return -EINVAL;
	if (string_bytes < SHMT_MIN_STRING_BYTES || string_bytes > SHMT_MAX_STRING_BYTES)
		return -EINVAL;
	if (max_threads < 1 || max_threads > SHMT_MAX_THREADS)
		return -EINVAL;
	if (nblocks > SHMT_MAX_BLOCKS)
		return -EINVAL;
	/* id 0 is reserved, so the table holds max_strings + 1 entries */
	while (slots < 2u * (max_strings + 1))
		slots <<= 1;

	l->hash_slots = slots;
	l->strings_off = off;
	off = ALIGN_UP(off + 8ull * (max_strings + 1), 64);
	l->hash_off = off;
	off = ALIGN_UP(off + 2ull * slots, 64);
	l->heap_off = off;
	off = ALIGN_UP(off + string_bytes, 64);
	l->threads_off = off;
	off = ALIGN_UP(off + sizeof(struct shmt_thread) * (uint64_t)max_threads, 64);
	l->block_records = shmt_block_records_for(capacity, minor);
	l->block_size = sizeof(struct shmt_block) + (uint64_t)l->block_records * SHMT_RECORD_SIZE;
	l->blocks_off = off;
	off = ALIGN_UP(off + l->block_size * nblocks, 4096);
	l->records_off = off;
	off += (uint64_t)capacity * SHMT_RECORD_SIZE;
	l->size = ALIGN_UP(off, 4096);
	return 0;
}

/* Returns 0 if name is a valid ring name: 1..200 bytes, no '/', not . or .. */
int shmt_name_check(const char *name)
{
	size_t n;

	if (!name)
		return -EINVAL;
	n = strlen(name);
	if (n == 0 || n > SHMT_NAME_MAX || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	return 0;
}

int shmt_ring_path(const char *name, char *buf, size_t len)
{
	if (shmt_name_check(name) < 0 || len < SHMT_PATH_MAX)
		return -EINVAL;
	snprintf(buf, len, SHMT_SHM_DIR "/%s", name);
	return 0;
}

/* The name shm_open() takes for ring name. */
void shmt_shm_name(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "/%s", name);
}

int shmt_ring_identity(const char *name, uint64_t *dev, uint64_t *ino)
{
	char path[SHMT_PATH_MAX];
	struct stat st;

	if (shmt_ring_path(name, path, sizeof(path)) < 0)
		return -EINVAL;
	if (lstat(path, &st) < 0)
		return -errno;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

#define ERR(code, ...) do { snprintf(err, errlen, __VA_ARGS__); return (code); } while (0)

/*
 * Checks a private copy of a header against the file size and, if it is
 * sound, fills v's geometry. Returns 0, -EPROTO (not a ring, or a version
 * we cannot read) or -EBADMSG (inconsistent), with a reason in err.
 */
int shmt_view_validate(struct shmt_view *v, const struct shmt_header *c, uint64_t file_size,
		       char *err, size_t errlen)
{
	struct shmt_layout l;
	uint32_t level;

	if (file_size < SHMT_HEADER_SIZE)
		ERR(-EBADMSG, "segment is %llu bytes, smaller than a ring header",
		    (unsigned long long)file_size);
	if (c->magic != SHMT_RING_MAGIC)
		ERR(-EPROTO, "not a shmtrace ring (bad magic)");
	if (c->major != SHMT_RING_MAJOR && c->compat > SHMT_RING_MAJOR)
		ERR(-EPROTO, "ring format version %u needs a newer shmtrace (this one reads version %u)",
		    c->major, SHMT_RING_MAJOR);
	if (c->major < SHMT_RING_OLDEST)
		ERR(-EPROTO, "ring format version %u is too old (oldest readable: %u)",
		    c->major, SHMT_RING_OLDEST);
	/* the level (ring_format.h): a newer major that says we can read
	 * it is read as ours */
	level = c->major == 1 ? (c->minor < SHMT_LEVEL_MAJOR2 ? c->minor : SHMT_LEVEL_MAJOR2 - 1) :
		c->major == 2 ? SHMT_LEVEL_MAJOR2 + c->minor : SHMT_RING_MINOR;
	if (level > SHMT_RING_MINOR)
		level = SHMT_RING_MINOR;
	if (c->header_size != SHMT_HEADER_SIZE || c->record_size != SHMT_RECORD_SIZE)
		ERR(-EBADMSG, "header size %u or record size %u is not 4096/40",
		    c->header_size, c->record_size);
	if (c->segment_size != file_size)
		ERR(-EBADMSG, "header says %llu bytes but the segment has %llu",
		    (unsigned long long)c->segment_size, (unsigned long long)file_size);
	if (c->mode > SHMTRACE_MODE_OVERWRITE)
		ERR(-EBADMSG, "unknown ring mode %u", c->mode);
	if (shmt_layout_compute(c->capacity, c->max_strings, c->string_bytes, c->max_threads,
				c->nblocks, level, &l) < 0)
		ERR(-EBADMSG, "impossible geometry (capacity %u, strings %u, threads %u, blocks %u)",
		    c->capacity, c->max_strings, c->max_threads, c->nblocks);
	if (c->block_records != l.block_records)
		ERR(-EBADMSG, "block size %u is not %u records, as a ring of %u records has (a ring "
		    "of another libshmtrace version: make it again)", c->block_records,
		    l.block_records, c->capacity);
	if (l.size != file_size || l.strings_off != c->strings_off || l.hash_off != c->hash_off ||
	    l.heap_off != c->heap_off || l.threads_off != c->threads_off ||
	    l.blocks_off != c->blocks_off || l.block_size != c->block_size ||
	    l.records_off != c->records_off || l.hash_slots != c->hash_slots)
		ERR(-EBADMSG, "region offsets do not match the ring's geometry");

	v->major = c->major;
	v->minor = level;
	v->header_minor = c->minor;
	v->capacity = c->capacity;
	v->mask = c->capacity - 1;
	v->mode = c->mode;
	v->max_strings = c->max_strings;
	v->string_bytes = c->string_bytes;
	v->hash_slots = l.hash_slots;
	v->max_threads = c->max_threads;
	v->nblocks = c->nblocks;
	v->block_records = l.block_records;
	v->block_size = l.block_size;
	v->clock = c->clock;
	if (v->base) {
		uint8_t *b = v->base;

		v->strings = (struct shmt_string *)(b + l.strings_off);
		v->hash = (uint16_t *)(b + l.hash_off);
		v->heap = (char *)(b + l.heap_off);
		v->threads = (struct shmt_thread *)(b + l.threads_off);
		v->blocks = b + l.blocks_off;
		v->records = (struct shmt_record *)(b + l.records_off);
	}
	return 0;
}

/* Whether the caller may share a ring of owner uid and group gid: it is
 * the owner, or the file is readable and writable by its group (mode
 * 0660, as `shmtrace-collector --group` makes it) and the group is one of
 * the caller's (docs/DESIGN.md, "Security"). */
static bool may_share(const struct stat *st)
{
	gid_t *groups;
	bool ours = false;
	int n;

	if (st->st_uid == geteuid())
		return true;
	if ((st->st_mode & 0060) != 0060)
		return false;
	if (st->st_gid == getegid())
		return true;
	n = getgroups(0, NULL);
	if (n <= 0 || !(groups = calloc((size_t)n, sizeof(*groups))))
		return false;
	n = getgroups(n, groups);
	for (int i = 0; i < n && !ours; i++)
		ours = groups[i] == st->st_gid;
	free(groups);
	return ours;
}

/*
 * The one place a ring's file is opened (producers, the collector, the
 * tools): never through a link and never blocking (O_NOFOLLOW |
 * O_NONBLOCK: a FIFO planted under the name by any user would block
 * open() for read until a writer came), then fstat: what is not a regular
 * file is refused with -ENODEV, which is what mmap() says of such files;
 * and, unless SHMT_OPEN_ANY_OWNER, a file the caller may not share
 * (another owner's, not shared with a group of the caller's) or that
 * others may write, -EPERM. Returns the descriptor (close-on-exec), its
 * stat in *st, or -errno with the reason in err.
 */
int shmt_ring_open_fd(const char *name, int flags, struct stat *st, char *err, size_t errlen)
{
	char path[SHMT_PATH_MAX];
	int fd, ret;
	bool wr = flags & SHMT_OPEN_WRITE;

	memset(st, 0, sizeof(*st));
	if (shmt_ring_path(name, path, sizeof(path)) < 0)
		ERR(-EINVAL, "invalid ring name '%s' (" SHMT_NAME_RULE ")", name ? name : "");
	fd = open(path, (wr ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		if (ret == -ENOENT)
			ERR(ret, "no ring named '%s' in /dev/shm", name);
		if (ret == -ELOOP)
			ERR(ret, "ring '%s' is a symbolic link; refusing to follow it", name);
		/* a directory opened for writing, a socket */
		if (ret == -EISDIR || ret == -ENXIO)
			ERR(-ENODEV, "'%s' is not a regular file", name);
		ERR(ret, "cannot open ring '%s': %s", name, strerror(-ret));
	}
	if (fstat(fd, st) < 0) {
		ret = -errno;
		close(fd);
		ERR(ret, "fstat of ring '%s': %s", name, strerror(-ret));
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		ERR(-ENODEV, "'%s' is not a regular file", name);
	}
	if (!(flags & SHMT_OPEN_ANY_OWNER)) {
		if (!may_share(st)) {
			close(fd);
			ERR(-EPERM, "ring '%s' is owned by uid %u, not by us (uid %u), and not shared "
			    "with a group of ours (gid %u, mode %04o)", name, (unsigned)st->st_uid,
			    (unsigned)geteuid(), (unsigned)st->st_gid, (unsigned)(st->st_mode & 07777));
		}
		if (st->st_mode & 0002) {
			close(fd);
			ERR(-EPERM, "ring '%s' is writable by other users (mode %04o)",
			    name, (unsigned)(st->st_mode & 07777));
		}
	}
	return fd;
}

/*
 * Opens (shmt_ring_open_fd()) and maps a ring. The header is validated
 * from a private copy taken after mmap, so a peer cannot change the size
 * between our check and our use.
 */
int shmt_view_open(const char *name, int flags, struct shmt_view *v, char *err, size_t errlen)
{
	struct shmt_header copy;
	struct stat st;
	void *base;
	int fd, ret;
	bool wr = flags & SHMT_OPEN_WRITE;

	memset(v, 0, sizeof(*v));
	fd = shmt_ring_open_fd(name, flags, &st, err, errlen);
	if (fd < 0)
		return fd;
	v->dev = st.st_dev;
	v->ino = st.st_ino;
	v->perm = st.st_mode & 07777;
	if ((uint64_t)st.st_size < SHMT_HEADER_SIZE) {
		close(fd);
		ERR(-EBADMSG, "ring '%s' is truncated (%lld bytes)", name, (long long)st.st_size);
	}
	/* populate now: page faults are costly on a VM, and a producer must
	 * not pay them inside the lock on its first flushes */
	base = mmap(NULL, (size_t)st.st_size, PROT_READ | (wr ? PROT_WRITE : 0),
		    MAP_SHARED | MAP_POPULATE, fd, 0);
	ret = -errno;
	close(fd);
	if (base == MAP_FAILED)
		ERR(ret, "mmap of ring '%s': %s", name, strerror(-ret));
	/* validate a private copy: the shared header may change under us */
	memcpy(&copy, base, sizeof(copy));
	copy.magic = load_acquire(&((struct shmt_header *)base)->magic);
	v->base = base;
	v->size = (size_t)st.st_size;
	v->writable = wr;
	v->h = base;
	ret = shmt_view_validate(v, &copy, (uint64_t)st.st_size, err, errlen);
	if (ret < 0) {
		char why[200];

		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen, "ring '%s': %s", name, why);
		munmap(base, v->size);
		memset(v, 0, sizeof(*v));
		return ret;
	}
	return 0;
}

int shmt_ring_examine(const char *name, struct stat *st, struct shmt_ring_exam *x, char *err,
		      size_t errlen)
{
	struct shmt_header copy;
	struct shmt_view v;
	ssize_t n;
	int fd = shmt_ring_open_fd(name, SHMT_OPEN_ANY_OWNER, st, err, errlen);

	memset(x, 0, sizeof(*x));
	if (fd < 0)
		return fd;
	/* read, not mapped: a damaged ring's size need not be its header's,
	 * and a private copy is all that is looked at */
	memset(&copy, 0, sizeof(copy));
	n = pread(fd, &copy, sizeof(copy), 0);
	if (n < (ssize_t)sizeof(copy.magic) || copy.magic != SHMT_RING_MAGIC) {
		close(fd);
		ERR(-EPROTO, "ring '%s': not a shmtrace ring (bad magic)", name);
	}
	x->major = copy.major;
	x->minor = copy.minor;
	memset(&v, 0, sizeof(v));
	x->verdict = shmt_view_validate(&v, &copy, (uint64_t)st->st_size, x->why, sizeof(x->why));
	return fd;
}

uint64_t shmt_view_prefault(const struct shmt_view *v)
{
	const volatile unsigned char *p = v->base;
	uint64_t pages = 0;

	if (!p)
		return 0;
	for (size_t off = 0; off < v->size; off += 4096, pages++)
		(void)__atomic_load_n(&p[off], __ATOMIC_RELAXED);
	return pages;
}

void shmt_view_close(struct shmt_view *v)
{
	if (v->base)
		munmap(v->base, v->size);
	memset(v, 0, sizeof(*v));
}
