/* SPDX-License-Identifier: MIT */
/*
 * fuzz_ring.c - libFuzzer harness for the post-mortem ring reader
 * (libshm/ring/ring_reader.c, shmt_view_validate() in libshm/ring/ring.c) and the
 * exporter's ring source (tools/trace/source.c). Built and run by run.sh.
 *
 * At start-up the harness makes a real ring with a small geometry (16
 * records, 8 strings, 4 name slots, 2 staging blocks: a 16 KiB segment)
 * in /dev/shm, writes spans, instants, counters, arguments (text among
 * them), strings and names into it with the producer library, leaves records staged in a block, copies the
 * segment as a template and removes the ring. The first input byte picks
 * how the rest becomes a segment image:
 *   0: the rest is the whole segment (its size is the file size);
 *   1: the rest overlays the template from offset 256 (geometry kept);
 *   2: the rest is patches [u16 offset][u8 len][bytes] onto the template;
 *   3: like 2, but the first 256 bytes (identity, geometry) are restored.
 * A copy of the image's header goes through shmt_view_validate(); when it
 * validates, every reader runs over the image, and the image is written
 * to /dev/shm and read back through source_open_ring()/source_records(),
 * and exported (`shmtrace export --ring`) to JSON that must be strict.
 * FUZZ_RING_SEEDS=DIR makes the harness write seed inputs there and exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <getopt.h>
#include <unistd.h>

#include "cli.h"
#include "json_check.h"
#include "ring_reader.h"
#include "source.h"

#define MAX_READS 100000

static uint8_t *tpl;
static size_t tpl_size;
static char shm_name[64];
static int shm_fd = -1, outfd = -1;
static char outpath[64];
static FILE *devnull;
static int verbose;	/* FUZZ_VERBOSE=1: say what each input became */



static void die(const char *what)
{
	fprintf(stderr, "fuzz_ring: %s: %s\n", what, strerror(errno));
	abort();
}

/* spans left open in the template (their stack entries are in its block) */
static struct shmtrace_open_span open1, open2;

static void make_template(void)
{
	struct shmtrace_ring_config cfg = {
		.capacity = 16, .mode = SHMTRACE_MODE_OVERWRITE, .max_strings = 8,
		.string_bytes = 256, .max_threads = 4, .blocks = 2, .flags = SHMTRACE_CREATE_NO_TSC,
	};
	char name[64], path[96];
	shmtrace_t *t;
	uint32_t cat, nm, odd;
	int fd, ret;
	struct stat st;

	snprintf(name, sizeof(name), "shmt-fuzz-tpl-%d", (int)getpid());
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	ret = shmtrace_ring_create(name, &cfg);
	if (ret < 0) {
		errno = -ret;
		die("shmtrace_ring_create");
	}
	if ((ret = shmtrace_open(name, &t)) < 0) {
		errno = -ret;
		die("shmtrace_open");
	}
	cat = shmtrace_intern(t, "rpc");
	nm = shmtrace_intern(t, "handle \"req\"\\");
	odd = shmtrace_intern(t, "bad utf8 \xff\xc3 ctl \x01\x1f");
	shmtrace_set_process_name(t, "fuzz-proc");
	shmtrace_set_thread_name(t, "fuzz-main");
	for (int i = 0; i < 20; i++) {
		uint64_t t0 = shmtrace_now();

		shmtrace_span(t, cat, i & 1 ? nm : odd, t0, t0 + 1000, i % 3 ? shmtrace_flow_new(t) : 0);
		if (i % 5 == 0)
			shmtrace_instant(t, cat, nm, 0);
		if (i % 7 == 0)
			shmtrace_counter(t, cat, odd, -i);
		if (i % 4 == 0) {
			struct shmtrace_arg a[2] = { shmtrace_arg_int(nm, -i), shmtrace_arg_str(odd, nm) };

			shmtrace_span_args(t, cat, nm, t0, t0 + 7, 0, a, 2);
		}
		if (i % 6 == 1) {
			/* text over three records, then one that is cut */
			struct shmtrace_arg a[2] = {
				shmtrace_arg_text(nm, "a \"text\" \x01 over \xe2\x82\xac three records"),
				shmtrace_arg_int(odd, i),
			};

			shmtrace_span_args(t, cat, odd, t0, t0 + 9, 0, a, 2);
		}
	}
	shmtrace_flush(t);
	/* these stay in the staging block, with two spans left open */
	for (int i = 0; i < 5; i++)
		shmtrace_span(t, cat, nm, 1000 + i, 2000 + i, 0);
	{
		struct shmtrace_arg a[2] = { shmtrace_arg_int(odd, 42),
					     shmtrace_arg_text(nm, "staged text \xff\xc3 bytes") };

		shmtrace_instant_args(t, cat, odd, 9, a, 2);
	}
	shmtrace_begin(t, &open1, cat, nm, 5);
	shmtrace_begin(t, &open2, cat, odd, 0);
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0)
		die("open template");
	tpl_size = (size_t)st.st_size;
	tpl = malloc(tpl_size);
	if (!tpl || pread(fd, tpl, tpl_size, 0) != (ssize_t)tpl_size)
		die("read template");
	close(fd);
	shmtrace_close(t);
	shmtrace_ring_unlink(name);
}

static void cleanup(void)
{
	if (shm_name[0])
		shm_unlink(shm_name);
}

static void write_seeds(const char *dir)
{
	static const uint8_t patches[][16] = {
		/* head far ahead: 0x200 = head */
		{ 2, 0x00, 0x02, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f },
		/* threads (name slots) count huge: offset 392 */
		{ 3, 0x88, 0x01, 4, 0xff, 0xff, 0xff, 0xff },
		/* journal active, block 0, stage 2 */
		{ 3, 0x40, 0x01, 12, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0 },
		/* capacity changed: fails validation */
		{ 2, 0x20, 0x00, 4, 0x20, 0, 0, 0 },
	};
	char path[512];
	FILE *f;

	for (int mode = 0; mode < 2; mode++) {
		snprintf(path, sizeof(path), "%s/template-mode%d", dir, mode);
		if (!(f = fopen(path, "w")))
			die(path);
		fputc(mode, f);
		fwrite(tpl + (mode ? 256 : 0), 1, tpl_size - (mode ? 256 : 0), f);
		fclose(f);
	}
	for (size_t i = 0; i < sizeof(patches) / sizeof(*patches); i++) {
		snprintf(path, sizeof(path), "%s/patch-%zu", dir, i);
		if (!(f = fopen(path, "w")))
			die(path);
		fwrite(patches[i], 1, 4 + patches[i][3], f);
		fclose(f);
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("FUZZ_RING_SEEDS");

	(void)argc;
	(void)argv;
	make_template();
	if (seeds) {
		write_seeds(seeds);
		exit(0);
	}
	verbose = getenv("FUZZ_VERBOSE") != NULL;
	devnull = fopen("/dev/null", "w");
	snprintf(shm_name, sizeof(shm_name), "shmt-fuzz-ring-%d", (int)getpid());
	shm_fd = shm_open(shm_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (shm_fd < 0 || !devnull)
		die("shm_open");
	atexit(cleanup);
	outfd = memfd_create("fuzz_ring_out", MFD_CLOEXEC);
	if (outfd < 0)
		die("memfd_create");
	snprintf(outpath, sizeof(outpath), "/proc/self/fd/%d", outfd);
	return 0;
}

static uint8_t *build_image(const uint8_t *data, size_t size, size_t *len)
{
	uint8_t mode = data[0] & 3;
	uint8_t *img;
	size_t n;

	data++;
	size--;
	if (mode == 0) {
		n = size;
		img = aligned_alloc(4096, (n + 4095) & ~(size_t)4095 ? (n + 4095) & ~(size_t)4095 : 4096);
		if (!img)
			abort();
		memcpy(img, data, n);
		*len = n;
		return img;
	}
	img = aligned_alloc(4096, tpl_size);
	if (!img)
		abort();
	memcpy(img, tpl, tpl_size);
	*len = tpl_size;
	if (mode == 1) {
		n = size < tpl_size - 256 ? size : tpl_size - 256;
		memcpy(img + 256, data, n);
		return img;
	}
	for (size_t i = 0; i + 3 <= size;) {
		size_t off = (data[i] | (size_t)data[i + 1] << 8) % tpl_size;
		size_t l = data[i + 2];

		i += 3;
		if (l > size - i)
			l = size - i;
		if (l > tpl_size - off)
			l = tpl_size - off;
		memcpy(img + off, data + i, l);
		i += l;
	}
	if (mode == 3)
		memcpy(img, tpl, 256);
	return img;
}

static void read_all(const struct shmt_view *v)
{
	static struct shmt_record blk[SHMT_BLOCK_RECORDS_MAX];
	volatile uint64_t sink = 0;
	struct shmt_record r;
	struct shmt_thread t;
	char buf[SHMT_STRING_MAX + 1];
	uint64_t head = shmt_ring_head(v);
	uint64_t seq = head > v->capacity ? head - v->capacity : 0;
	uint32_t n;

	for (unsigned k = 0; seq < head && k < MAX_READS; seq++, k++)
		if (shmt_ring_read(v, seq, &r) == 0) {
			sink += r.ts + r.name + r.commit;
		}
	if (verbose)
		fprintf(stderr, "fuzz_ring: head %llu, %u strings, %u threads\n",
			(unsigned long long)head, shmt_ring_nstrings(v), shmt_ring_nthreads(v));
	n = shmt_ring_nstrings(v);
	if (n > v->max_strings + 1)
		abort();
	for (uint32_t id = 0; id <= n; id++) {
		int l = shmt_ring_string(v, id, buf, sizeof(buf));

		if (l >= 0 && ((size_t)l >= sizeof(buf) || buf[l] != 0))
			abort();
		/* a short buffer cuts */
		l = shmt_ring_string(v, id, buf, 4);
		if (l > 3)
			abort();
	}
	n = shmt_ring_nthreads(v);
	if (n > v->max_threads)
		abort();
	for (uint32_t i = 0; i <= n; i++)
		if (shmt_ring_thread(v, i, &t) == 0)
			sink += strlen(t.name) + strlen(t.pname);
	for (uint32_t i = 0; i <= v->nblocks; i++) {
		struct shmt_block_info info;
		int k = shmt_ring_block_pending(v, i, blk, &info);

		if (verbose && k > 0)
			fprintf(stderr, "fuzz_ring: block %u: %d pending\n", i, k);
		if (k < 0 || (uint32_t)k > v->block_records || info.taken > info.written)
			abort();
		for (int j = 0; j < k; j++) {
			if (blk[j].commit < SHMTRACE_KIND_SPAN || blk[j].commit > SHMTRACE_KIND_MAX)
				abort();
		}
		/* the open-span stack: bounded whatever the depth says */
		if (shmt_block_open_spans(v, i, blk) > SHMT_OPEN_MAX)
			abort();
	}
	/* what waits: the ring and a block's worth a block at most, whatever
	 * the journal, the states and the counts say */
	if (shmt_ring_undrained(v) > v->capacity + (uint64_t)v->nblocks * v->block_records)
		abort();
	(void)sink;
}

static int on_record(void *ctx, const struct shmt_record *r, uint64_t start_time)
{
	struct source *s = ctx;
	size_t len;
	const char *a = source_string(s, r->name, &len);

	(void)start_time;
	if (strlen(a) > len)
		abort();
	return 0;
}

static void read_source(const uint8_t *img, size_t len)
{
	struct source s;
	char err[512];
	FILE *saved = stderr;

	if (ftruncate(shm_fd, 0) < 0 || ftruncate(shm_fd, (off_t)len) < 0 ||
	    pwrite(shm_fd, img, len, 0) != (ssize_t)len)
		die("write ring image");
	stderr = devnull;
	if (source_open_ring(&s, shm_name, err, sizeof(err)) == 0)
		source_records(&s, on_record, &s, err, sizeof(err));
	source_close(&s);
	stderr = saved;
}

/* `shmtrace export --ring NAME -o OUT`; what it writes must be valid JSON. */
static void export_json(void)
{
	char *argv[] = { "export", "--ring", shm_name, "-o", outpath, NULL };
	FILE *saved = stderr;
	const char *why;
	char *out;
	size_t at;
	off_t n;
	int rc;

	if (ftruncate(outfd, 0) < 0)
		abort();
	stderr = devnull;
	optind = 0;	/* glibc: reinitialise getopt */
	rc = cmd_export(5, argv);
	stderr = saved;
	if (verbose)
		fprintf(stderr, "fuzz_ring: export: exit %d\n", rc);
	if (rc != EXIT_OK)
		return;
	n = lseek(outfd, 0, SEEK_END);
	out = malloc(n > 0 ? (size_t)n : 1);
	if (n < 0 || !out || pread(outfd, out, (size_t)n, 0) != n)
		abort();
	why = json_check(out, (size_t)n, &at);
	if (why) {
		fprintf(stderr, "fuzz_ring: export wrote invalid JSON: %s at byte %zu of %lld\n",
			why, at, (long long)n);
		abort();
	}
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct shmt_header copy;
	struct shmt_view v;
	char err[256];
	uint8_t *img;
	size_t len;
	int ret;

	if (size < 1)
		return 0;
	img = build_image(data, size, &len);
	memset(&copy, 0, sizeof(copy));
	memcpy(&copy, img, len < sizeof(copy) ? len : sizeof(copy));
	memset(&v, 0, sizeof(v));
	v.base = img;
	v.size = len;
	v.h = (struct shmt_header *)img;
	ret = shmt_view_validate(&v, &copy, len, err, sizeof(err));
	if (verbose)
		fprintf(stderr, "fuzz_ring: mode %d, %zu bytes: %s\n", data[0] & 3, len,
			ret ? err : "valid");
	if (ret == 0) {
		/* every region must lie inside the image */
		if ((uint8_t *)(v.records + v.capacity) > img + len ||
		    (uint8_t *)(v.strings + v.max_strings + 1) > img + len ||
		    v.blocks + v.nblocks * v.block_size > img + len)
			abort();
		read_all(&v);
		read_source(img, len);	/* also writes the image to /dev/shm */
		export_json();
	}
	free(img);
	return 0;
}
