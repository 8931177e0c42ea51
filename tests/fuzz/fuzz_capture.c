/* SPDX-License-Identifier: MIT */
/*
 * fuzz_capture.c - libFuzzer harness for the capture-file reader
 * (capture/capture_dec.c, capture_file.c) and the exporter's capture source
 * (tools/trace/source.c). Built and run by tests/fuzz/run.sh.
 *
 * Each input is a capture file (version 2, or a version-1 one: both are
 * read). It is read three ways:
 *   1. frame after frame from memory with shmt_cap_decode(); every records
 *      frame decoded is encoded again (PACKED) and must decode to the same
 *      records;
 *   2. as a file (a memfd, opened by path) with shmt_cap_open()/next();
 *   3. through `shmtrace export -o OUT FILE` (cmd_export(): source_open_files(),
 *      source_records(), the flow and event writers), whose output must
 *      then be strict JSON (json_check.c), and through `--format perfetto`,
 *      whose output must be a Trace: packets (field 1, length-delimited)
 *      that end where the file ends.
 * Frames carry a CRC-32C, which random mutations almost never get right, so
 * every input whose frames' CRCs are wrong is also read a second time with
 * the CRCs recomputed (the harness finds frame ends with its own msgpack
 * skipper), letting the fuzzer reach the field decoders behind the CRC.
 * Any crash, leak, out-of-bounds access or undefined behaviour is a bug.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <getopt.h>
#include <unistd.h>

#include "capture.h"
#include "crc32c.h"
#include "cli.h"
#include "json_check.h"
#include "mp_head.h"
#include "source.h"

static int memfd = -1, outfd = -1;
static char mempath[64], outpath[64];
static FILE *devnull;
static int verbose;	/* FUZZ_VERBOSE=1: say how far each input got */
static int no_export;	/* FUZZ_CAPTURE_NO_EXPORT=1: the readers only, ~10x faster */



/* Length of the msgpack object at p, or 0 if it is cut or invalid. Unlike
 * the decoder's walker it bounds nothing but len. */
static size_t mp_skip(const uint8_t *p, size_t len)
{
	uint64_t left = 1;
	size_t pos = 0;

	while (left) {
		struct shmt_mp_head h;

		left--;
		if (pos >= len || shmt_mp_head(p + pos, len - pos, &h) <= 0)
			return 0;
		if (h.hdr + h.body > len - pos)
			return 0;
		pos += h.hdr + h.body;
		left += h.kids;
		if (left > len - pos)	/* each element takes at least a byte */
			return 0;
	}
	return pos;
}

/* Rewrites the CRC of every whole frame; returns how many changed. */
static int fix_crcs(uint8_t *buf, size_t len)
{
	size_t off = 0;
	int changed = 0;

	while (off < len) {
		size_t n = mp_skip(buf + off, len - off);
		uint8_t *f = buf + off;

		if (n < 7)
			break;
		if (f[n - 5] == 0xce) {
			uint32_t crc = shmt_crc32c(0, f, n - 5);
			uint8_t be[4] = { crc >> 24, crc >> 16, crc >> 8, crc };

			if (memcmp(f + n - 4, be, 4)) {
				memcpy(f + n - 4, be, 4);
				changed++;
			}
		}
		off += n;
	}
	return changed;
}

/* Touches every byte a decoded frame points to, so ASan sees bad pointers. */
static unsigned touch_frame(const struct shmt_cap_frame *f)
{
	unsigned sum = 0;

	switch (f->type) {
	case SHMT_CAP_HEADER:
		sum += (unsigned)strnlen(f->header.host, sizeof(f->header.host));
		sum += (unsigned)strnlen(f->header.ring, sizeof(f->header.ring));
		if (f->header.host[sizeof(f->header.host) - 1] || f->header.ring[sizeof(f->header.ring) - 1])
			abort();	/* names must be NUL-terminated */
		break;
	case SHMT_CAP_STRINGS:
		for (size_t i = 0; i < f->strings.n; i++) {
			const struct shmt_cap_string *s = &f->strings.v[i];

			for (uint32_t k = 0; k < s->len; k++)
				sum += (unsigned char)s->s[k];
			if (s->s[s->len] != 0)	/* documented: followed by a NUL */
				abort();
		}
		break;
	case SHMT_CAP_THREADS:
		for (size_t i = 0; i < f->threads.n; i++) {
			const struct shmt_thread *t = &f->threads.v[i];

			if (!memchr(t->name, 0, sizeof(t->name)) || !memchr(t->pname, 0, sizeof(t->pname)))
				abort();	/* documented: NUL-terminated */
			sum += t->pid + t->tid;
		}
		break;
	case SHMT_CAP_RECORDS:
		for (size_t i = 0; i < f->records.n; i++) {
			const struct shmt_record *r = &f->records.v[i];

			sum += (unsigned)(r->ts + r->dur + r->flow) + r->pid + r->name + r->commit;
		}
		sum += (unsigned)f->records.packed;
		break;
	default:
		break;
	}
	return sum;
}

/* Records a decoder accepted go through the encoder and back unchanged. */
static void reencode(const struct shmt_cap_frame *f)
{
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_frame g;
	msgpack_sbuffer b;
	char err[256];
	long n;

	if (!z)
		return;
	msgpack_sbuffer_init(&b);
	if (shmt_cap_put_records(&b, f->records.first_seq, f->records.v, f->records.n) < 0)
		abort();	/* it decoded, so it is valid */
	n = shmt_cap_decode((const uint8_t *)b.data, b.size, &g, z, err, sizeof(err));
	if (f->records.n == 0) {
		if (b.size != 0)
			abort();	/* n == 0 writes nothing */
	} else if (n != (long)b.size || g.type != SHMT_CAP_RECORDS || !g.records.packed ||
		   g.records.first_seq != f->records.first_seq || g.records.n != f->records.n ||
		   memcmp(g.records.v, f->records.v, f->records.n * sizeof(*f->records.v))) {
		fprintf(stderr, "fuzz_capture: records re-encoded differ: %ld %s\n", n, err);
		abort();
	}
	msgpack_sbuffer_destroy(&b);
	msgpack_zone_free(z);
}

static void decode_all(const uint8_t *buf, size_t len)
{
	msgpack_zone *z = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
	struct shmt_cap_frame f;
	char err[256];
	size_t off = 0;
	volatile unsigned sink = 0;

	if (!z)
		return;
	while (off < len) {
		long n = shmt_cap_decode(buf + off, len - off, &f, z, err, sizeof(err));

		if (n <= 0)
			break;
		if ((size_t)n > len - off)
			abort();	/* a frame longer than the buffer */
		sink += touch_frame(&f);
		if (f.type == SHMT_CAP_RECORDS && f.records.n <= SHMT_CAP_SPLIT_RECORDS)
			reencode(&f);
		msgpack_zone_clear(z);
		off += (size_t)n;
	}
	(void)sink;
	msgpack_zone_free(z);
}

static int write_memfd(const uint8_t *buf, size_t len)
{
	if (ftruncate(memfd, 0) < 0)
		return -1;
	for (size_t off = 0; off < len;) {
		ssize_t w = pwrite(memfd, buf + off, len - off, (off_t)off);

		if (w <= 0)
			return -1;
		off += (size_t)w;
	}
	return 0;
}

static void read_file(void)
{
	const struct shmt_cap_header *h;
	struct shmt_cap_reader *r;
	struct shmt_cap_frame f;
	char err[256];
	volatile unsigned sink = 0;
	int ret, n = 0;

	if ((ret = shmt_cap_open(mempath, &r, err, sizeof(err))) < 0) {
		if (verbose)
			fprintf(stderr, "fuzz_capture: open: %d %s\n", ret, err);
		return;
	}
	h = shmt_cap_header_of(r);
	sink += (unsigned)strnlen(h->host, 64);
	while ((ret = shmt_cap_next(r, &f, err, sizeof(err))) > 0) {
		sink += touch_frame(&f);
		if (++n > 1000000)
			abort();	/* a reader that never ends */
	}
	if (verbose)
		fprintf(stderr, "fuzz_capture: %d frames, then %d %s\n", n, ret, ret ? err : "");
	/* errors are sticky: the next call returns the same */
	if (ret < 0 && shmt_cap_next(r, &f, err, sizeof(err)) != ret)
		abort();
	(void)sink;
	shmt_cap_close(r);
}

/* `shmtrace export -o OUT CAPTURE`; what it writes must be valid JSON. */
static void export_json(void)
{
	char *argv[] = { "export", "-o", outpath, mempath, NULL };
	FILE *saved = stderr;
	char *out;
	off_t n;
	int rc;

	if (ftruncate(outfd, 0) < 0)
		abort();
	stderr = devnull;
	optind = 0;	/* glibc: reinitialise getopt */
	rc = cmd_export(4, argv);
	stderr = saved;
	if (verbose)
		fprintf(stderr, "fuzz_capture: export: exit %d\n", rc);
	if (rc != EXIT_OK)
		return;
	n = lseek(outfd, 0, SEEK_END);
	if (n < 0)
		abort();
	out = malloc((size_t)n + 1);
	if (!out || pread(outfd, out, (size_t)n, 0) != n)
		abort();
	{
		size_t at;
		const char *why = json_check(out, (size_t)n, &at);

		if (why) {
			fprintf(stderr, "fuzz_capture: export wrote invalid JSON: %s at byte %zu of %lld\n",
				why, at, (long long)n);
			fprintf(stderr, "near: %.*s\n", (int)((size_t)n - at < 80 ? (size_t)n - at : 80),
				out + at);
			abort();
		}
	}
	free(out);
}

/* The varint at p[*at..n), *at moved past it; -1 when cut short. */
static int64_t varint_at(const unsigned char *p, size_t n, size_t *at)
{
	uint64_t v = 0;

	for (int shift = 0; *at < n && shift < 64; shift += 7) {
		unsigned char c = p[(*at)++];

		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v > INT64_MAX ? -1 : (int64_t)v;
	}
	return -1;
}

/* `shmtrace export --format perfetto -o OUT CAPTURE`: a Trace, packet after
 * packet, each ending inside the file. */
static void export_perfetto(void)
{
	char *argv[] = { "export", "--format", "perfetto", "-o", outpath, mempath, NULL };
	FILE *saved = stderr;
	unsigned char *out;
	size_t at = 0;
	off_t n;
	int rc;

	if (ftruncate(outfd, 0) < 0)
		abort();
	stderr = devnull;
	optind = 0;
	rc = cmd_export(6, argv);
	stderr = saved;
	if (rc != EXIT_OK)
		return;
	n = lseek(outfd, 0, SEEK_END);
	out = n < 0 ? NULL : malloc((size_t)n + 1);
	if (!out || pread(outfd, out, (size_t)n, 0) != n)
		abort();
	while (at < (size_t)n) {
		int64_t key = varint_at(out, (size_t)n, &at), len = varint_at(out, (size_t)n, &at);

		if (key != (1 << 3 | 2) || len < 0 || (uint64_t)len > (size_t)n - at) {
			fprintf(stderr, "fuzz_capture: --format perfetto wrote no Trace at byte %zu\n", at);
			abort();
		}
		at += (size_t)len;
	}
	free(out);
}

static void run_all(const uint8_t *buf, size_t len)
{
	decode_all(buf, len);
	if (write_memfd(buf, len) == 0) {
		read_file();
		if (!no_export) {
			export_json();	/* source_open_files() + source_records(), twice */
			export_perfetto();
		}
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	memfd = memfd_create("fuzz_capture", MFD_CLOEXEC);
	if (memfd < 0) {
		perror("memfd_create");
		abort();
	}
	snprintf(mempath, sizeof(mempath), "/proc/self/fd/%d", memfd);
	outfd = memfd_create("fuzz_capture_out", MFD_CLOEXEC);
	if (outfd < 0)
		abort();
	snprintf(outpath, sizeof(outpath), "/proc/self/fd/%d", outfd);
	if (json_check_selftest() < 0) {
		fprintf(stderr, "fuzz_capture: json_check self-test failed\n");
		abort();
	}
	verbose = getenv("FUZZ_VERBOSE") != NULL;
	no_export = getenv("FUZZ_CAPTURE_NO_EXPORT") != NULL;
	devnull = fopen("/dev/null", "w");
	if (!devnull)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;

	run_all(data, size);
	/* again with every whole frame's CRC made right */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (fix_crcs(copy, size) > 0)
		run_all(copy, size);
	free(copy);
	return 0;
}
