/* SPDX-License-Identifier: MIT */
/*
 * stream_ckpt.c - the live stream's checkpoint, a file beside the capture
 * (.NAME.otlp-checkpoint): where the pass is (the ring sequence to read
 * on from, and the numbers the records' spans had then), which events the
 * model holds (the oldest one's place, to read the capture again from
 * there, and each one's ring sequence: the others since were sent), the
 * flows it continues, each thread's last moment, what the requests told
 * of the losses, and what the stream did. One is made as each request is
 * cut, and written, replacing the last, once the endpoint took the
 * request: a stream started again reads it and goes on exactly from
 * there, so that no span is sent twice and none is missed. Written to a
 * temporary, synced and renamed over the last one, then the folder
 * synced: a crash leaves the old one or the new one, whole. It holds no event itself, so it stays small: the capture
 * (and the backlog, stream_files.c) keeps them.
 *
 * The bytes are this machine's structs, behind a header that names the
 * layout (version, sizes) and a checksum: the file never leaves the host
 * whose capture it goes with.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "outfile.h"
#include "pb.h"
#include "stream_int.h"

#define CKPT_MAGIC	"SHMTSTRM"
#define CKPT_VERSION	2u

struct ckpt_head {
	char magic[8];
	uint32_t version;
	uint32_t sum;			/* FNV-1a of the bytes after the header */
	uint32_t sizes[2];		/* of the structs, as a check of the layout */
	uint64_t size;			/* of the whole file */
	uint64_t run_id, ring_id;
	uint64_t next_seq, pseq, nopen;	/* where the pass is */
	uint64_t from_seq, from_pseq, from_nopen;	/* the oldest event held */
	uint64_t last_end, frontier, win_skip;
	struct stream_counts c;
	uint64_t nlast, ncarry, nheld, nruns, nopens;
	/* version 2: the losses told (st->loss_said) */
	uint64_t loss_said;
};

/* Version 1's header is version 2's without its last field: a stream of
 * an earlier shmtrace goes on from its checkpoint, as if no loss had been
 * told (at worst, losses a span request carried are told once more: the
 * counters are totals, the same value said again). */
#define CKPT_HEAD_V1	offsetof(struct ckpt_head, loss_said)
_Static_assert(CKPT_HEAD_V1 == sizeof(struct ckpt_head) - sizeof(uint64_t),
	       "version 1's header is a prefix of version 2's");

static const uint32_t sizes[2] = { sizeof(struct carry_ent), sizeof(struct stream_counts) };

/*
 * The events held, by their numbers (which a pass from the oldest one
 * gives them again): the spans' and instants', in runs of consecutive
 * numbers (a release holds long runs), each its distance from the last
 * run's end and its length << 1 | in the release being sent; then the
 * open spans' k (OTLP_OPEN_SEQ - k), each after the one before, << 1 |
 * in the release.
 */
struct held_put {
	struct obuf *b;
	uint64_t prev, start, len, n;	/* the run being made */
	bool inwin;
};

static void flush_run(struct held_put *h)
{
	if (!h->len)
		return;
	pb_varint(h->b, h->start - h->prev);
	pb_varint(h->b, h->len << 1 | h->inwin);
	h->prev = h->start + h->len;
	h->len = 0;
	h->n++;
}

static void put_span(struct held_put *h, uint64_t seq, bool inwin)
{
	if (h->len && seq == h->start + h->len && inwin == h->inwin) {
		h->len++;
		return;
	}
	flush_run(h);
	h->start = seq;
	h->len = 1;
	h->inwin = inwin;
}

/* The held events into b: *runs runs of spans, then *opens open spans
 * (few: those of threads found dead), gathered in the one walk. */
static int put_all_held(struct otlp_stream *st, struct obuf *b, uint64_t *runs, uint64_t *opens)
{
	struct held_put h = { .b = b };
	uint64_t *ov = NULL, prev = 0;
	size_t no = 0, ocap = 0, k = 0;
	const struct sev *e;

	while ((e = model_next(&st->m, &k))) {
		bool inwin = st->in_win && e->inwin;

		if (e->seq <= OTLP_OPEN_SEQ / 2) {
			put_span(&h, e->seq, inwin);
			continue;
		}
		if (array_reserve(&ov, &ocap, no + 1, sizeof(*ov), 16) < 0) {
			free(ov);
			return -ENOMEM;
		}
		ov[no++] = (OTLP_OPEN_SEQ - e->seq) << 1 | inwin;
	}
	flush_run(&h);
	for (size_t i = 0; i < no; i++) {
		pb_varint(b, ((ov[i] >> 1) - prev) << 1 | (ov[i] & 1));
		prev = ov[i] >> 1;
	}
	free(ov);
	*runs = h.n;
	*opens = no;
	return 0;
}

int ckpt_make(struct otlp_stream *st, struct obuf *b)
{
	const struct sev *old = model_oldest(&st->m);
	struct ckpt_head h = {
		.magic = CKPT_MAGIC, .version = CKPT_VERSION, .run_id = st->run_id,
		.ring_id = st->ring_id, .next_seq = st->next_seq, .pseq = st->pseq,
		.nopen = st->nopen, .from_seq = old ? old->pos.rseq : st->next_seq,
		.from_pseq = old ? old->pos.pseq : st->pseq,
		.from_nopen = old ? old->pos.nopen : st->nopen,
		.last_end = st->o->open.last_end, .frontier = st->m.frontier,
		.win_skip = st->in_win ? st->win_made : 0,
		.nlast = u64map_count(&st->o->last), .ncarry = otlp_carry_count(st->o->carry),
		.nheld = st->m.live, .loss_said = st->loss_said,
	};
	struct ckpt_head *hp;
	size_t pos = 0;
	uint64_t key, *val;

	memcpy(h.sizes, sizes, sizeof(sizes));
	b->len = 0;
	ob_raw(b, (const char *)&h, sizeof(h));
	while (u64map_next(&st->o->last, &pos, &key, &val)) {
		ob_raw(b, (const char *)&key, sizeof(key));
		ob_raw(b, (const char *)val, sizeof(*val));
	}
	for (size_t i = 0; i < h.ncarry; i++)
		ob_raw(b, (const char *)otlp_carry_at(st->o->carry, i), sizeof(struct carry_ent));
	if (put_all_held(st, b, &h.nruns, &h.nopens) < 0 || b->oom)
		return -ENOMEM;
	hp = (struct ckpt_head *)b->p;
	hp->size = b->len;
	hp->nruns = h.nruns;
	hp->nopens = h.nopens;
	return 0;
}
static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int ckpt_write(const char *path, struct obuf *b, const struct stream_counts *c)
{
	struct ckpt_head *h = (struct ckpt_head *)b->p;
	struct outfile of;
	char err[512];
	int ret;

	h->c = *c;
	h->sum = fnv1a32(b->p + sizeof(*h), b->len - sizeof(*h));
	ret = outfile_open(&of, path, OUTFILE_WHOLE, 0600, err, sizeof(err));
	if (ret < 0)
		return ret;
	ret = write_all(of.fd, b->p, b->len);
	if (ret == 0 && fsync(of.fd) < 0)
		ret = -errno;
	if (ret < 0) {
		outfile_abort(&of);
		return ret;
	}
	ret = outfile_commit(&of, err, sizeof(err));
	return ret < 0 ? ret : outfile_sync_dir(path);
}

/* ---------------------------------------------------------------- load */

struct rd {
	const char *p;
	size_t len, pos;
};

static const void *take(struct rd *r, size_t n)
{
	const void *p = r->p + r->pos;

	if (n > r->len - r->pos)
		return NULL;
	r->pos += n;
	return p;
}

static int load_tables(struct otlp_stream *st, struct rd *r, const struct ckpt_head *h)
{
	for (uint64_t i = 0; i < h->nlast; i++) {
		const uint64_t *kv = take(r, 2 * sizeof(*kv));
		uint64_t *v;

		if (!kv)
			return -EBADMSG;
		if (!(v = u64map_get(&st->o->last, kv[0], 0, NULL)))
			return -ENOMEM;
		*v = kv[1];
	}
	for (uint64_t i = 0; i < h->ncarry; i++) {
		const struct carry_ent *e = take(r, sizeof(*e));
		int ret;

		if (!e)
			return -EBADMSG;
		if ((ret = otlp_carry_put(st->o->carry, e)) < 0)
			return ret;
	}
	return 0;
}

/* The numbers of the events held, for the replay: n of them in nruns
 * runs, then nopens open spans. */
static int load_held(struct otlp_stream *st, struct rd *r, const struct ckpt_head *h)
{
	const char *p = r->p + r->pos;
	size_t left = r->len - r->pos, k = 0;
	uint64_t at = 0, gap, len;

	/* a run or an open span takes two bytes or one at least */
	if (h->nruns > left || h->nopens > left || h->nruns + h->nopens > h->nheld ||
	    !(st->rheld = calloc(h->nheld + 1, sizeof(*st->rheld))) ||
	    !(st->ropen = calloc(h->nopens + 1, sizeof(*st->ropen))))
		return h->nruns > left || h->nopens > left ? -EBADMSG : -ENOMEM;
	for (uint64_t i = 0; i < h->nruns; i++) {
		if (pb_get_varint(&p, &left, &gap) != 1 || pb_get_varint(&p, &left, &len) != 1 ||
		    !(len >> 1) || (len >> 1) > h->nheld - k)
			return -EBADMSG;
		at += gap;
		for (uint64_t j = 0; j < len >> 1; j++)
			st->rheld[k++] = (at + j) << 1 | (len & 1);
		at += len >> 1;
	}
	at = 0;
	for (uint64_t i = 0; i < h->nopens; i++) {
		if (pb_get_varint(&p, &left, &gap) != 1)
			return -EBADMSG;
		at += gap >> 1;
		st->ropen[i] = at << 1 | (gap & 1);
	}
	if (k + h->nopens != h->nheld)
		return -EBADMSG;
	st->nrheld = k;
	st->nropen = h->nopens;
	r->pos = r->len - left;
	return 0;
}

/* The header at r (of version 1 or 2) into h. Returns 0 or -EBADMSG. */
static int load_head(struct rd *r, struct ckpt_head *h)
{
	const void *v1 = take(r, CKPT_HEAD_V1), *rest;

	memset(h, 0, sizeof(*h));
	if (!v1)
		return -EBADMSG;
	memcpy(h, v1, CKPT_HEAD_V1);
	if (h->version == 1)
		return 0;
	if (h->version != CKPT_VERSION || !(rest = take(r, sizeof(*h) - CKPT_HEAD_V1)))
		return -EBADMSG;
	memcpy((char *)h + CKPT_HEAD_V1, rest, sizeof(*h) - CKPT_HEAD_V1);
	return 0;
}

static int load(struct otlp_stream *st, const char *p, size_t len)
{
	struct rd r = { .p = p, .len = len };
	struct ckpt_head head;
	const struct ckpt_head *h = &head;
	int ret;

	if (load_head(&r, &head) < 0 || memcmp(h->magic, CKPT_MAGIC, 8) ||
	    memcmp(h->sizes, sizes, sizeof(sizes)) || h->size != len ||
	    h->sum != fnv1a32(p + r.pos, len - r.pos) || h->from_seq > h->next_seq)
		return -EBADMSG;
	st->run_id = h->run_id;
	st->ring_id = h->ring_id;
	st->next_seq = st->replay_to = h->next_seq;
	st->pseq = h->pseq;
	st->nopen = h->nopen;
	st->from_seq = h->from_seq;
	st->from_pseq = h->from_pseq;
	st->from_nopen = h->from_nopen;
	st->o->open.last_end = h->last_end;
	st->m.frontier = h->frontier;
	st->win_skip = h->win_skip;
	st->loss_said = h->loss_said;
	st->c = h->c;
	st->have_run = true;
	ret = load_tables(st, &r, h);
	if (ret == 0)
		ret = load_held(st, &r, h);
	if (ret == 0 && r.pos != len)
		ret = -EBADMSG;
	st->replaying = ret == 0 && st->from_seq < st->replay_to;
	return ret;
}

int ckpt_load(struct otlp_stream *st, char *err, size_t errlen)
{
	/* O_NONBLOCK: a FIFO planted at the name must not hang the open */
	int fd = open(st->ckpt_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct obuf b = { 0 };
	char chunk[65536];
	struct stat sb;
	ssize_t n;
	int ret;

	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", st->ckpt_path, strerror(errno));
		return ret;
	}
	if (fstat(fd, &sb) < 0 || stream_side_file_ours(st->ckpt_path, &sb, err, errlen) < 0) {
		close(fd);
		return -EPERM;
	}
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		ob_raw(&b, chunk, (size_t)n);
	ret = n < 0 ? -errno : b.oom ? -ENOMEM : load(st, b.p, b.len);
	close(fd);
	ob_free(&b);
	if (ret == -EBADMSG)
		snprintf(err, errlen, "%s is not a checkpoint of this shmtrace, or is damaged",
			 st->ckpt_path);
	else if (ret < 0)
		snprintf(err, errlen, "%s: %s", st->ckpt_path, strerror(-ret));
	return ret < 0 ? ret : 1;
}
