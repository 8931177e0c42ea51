/* SPDX-License-Identifier: MIT */
/*
 * stream_files.c - the live stream's files beside the capture FILE, all
 * named .FILE.otlp-* so that `shmtrace export FILE*` never takes them for
 * parts: the checkpoint (stream_ckpt.c), the status that `shmtrace stat
 * FILE` shows, the lock that keeps a second stream of FILE waiting, and
 * the backlog: parts an earlier collector wrote that its stream had not
 * sent, moved aside before a collector started again with the same
 * --output truncates them, read first and removed once sent.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "kv.h"
#include "outfile.h"
#include "procs.h"
#include "source_follow.h"
#include "stream_int.h"

/* DIR/.BASE.what for capture DIR/BASE. */
static void beside(const char *capture, const char *what, char *buf, size_t len)
{
	const char *slash = strrchr(capture, '/');
	int dirlen = slash ? (int)(slash - capture) + 1 : 0;

	snprintf(buf, len, "%.*s.%s.%s", dirlen, capture, capture + dirlen, what);
}

int stream_side_file_ours(const char *path, const struct stat *st, char *err, size_t errlen)
{
	if (S_ISREG(st->st_mode) && st->st_uid == geteuid() && st->st_nlink == 1)
		return 0;
	snprintf(err, errlen, "%s: not a regular file of this user with no other name: refusing "
		 "it (planted by another user? keep a streamed capture in a folder of its own)",
		 path);
	return -EPERM;
}

void stream_paths(const char *capture, char *ckpt, char *status, char *lock, size_t len)
{
	beside(capture, "otlp-checkpoint", ckpt, len);
	beside(capture, "otlp-status", status, len);
	beside(capture, "otlp-lock", lock, len);
}

/* Opens the lock file, made if it is not there (st->lock_new: by this
 * run). 0 or -errno. */
static int open_lock(struct otlp_stream *st)
{
	/* O_NONBLOCK: a FIFO planted at the name must not hang the open */
	const int fl = O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;

	st->lock_fd = open(st->lock_path, fl | O_EXCL, 0600);
	st->lock_new = st->lock_fd >= 0;
	if (st->lock_fd < 0 && errno == EEXIST)
		st->lock_fd = open(st->lock_path, fl, 0600);
	return st->lock_fd >= 0 ? 0 : -errno;
}

/* Whether the lock held (fd, its file sb) is still the file at its name:
 * a stream that failed before it streamed anything removes the lock it
 * made (stream_unmake()), and one that waited for it then holds a file
 * no other stream finds. */
static bool lock_named(const struct otlp_stream *st, const struct stat *sb)
{
	struct stat at;

	return stat(st->lock_path, &at) == 0 && at.st_dev == sb->st_dev && at.st_ino == sb->st_ino;
}

int stream_lock(struct otlp_stream *st, char *err, size_t errlen)
{
	struct stat sb;
	bool said = false;
	int ret;

	for (;;) {
		if ((ret = open_lock(st)) < 0) {
			snprintf(err, errlen, "%s: %s", st->lock_path, strerror(-ret));
			return ret;
		}
		/* another user's file there could be held locked by them for good */
		if (fstat(st->lock_fd, &sb) < 0 ||
		    stream_side_file_ours(st->lock_path, &sb, err, errlen) < 0) {
			close(st->lock_fd);
			st->lock_fd = -1;
			return -EPERM;
		}
		if (flock(st->lock_fd, LOCK_EX | LOCK_NB) < 0) {
			/* the stream of a collector that was stopped may still be
			 * finishing its request: its checkpoint is the one to go
			 * on from */
			if (!said)
				fprintf(stderr, "shmtrace stream: another stream of %s is running; "
					"waiting for it to stop\n", st->so->capture);
			said = true;
			while (flock(st->lock_fd, LOCK_EX) < 0)
				if (errno != EINTR || stream_stopping()) {
					snprintf(err, errlen, "%s: %s", st->lock_path,
						 stream_stopping() ? "stopped while waiting" :
						 strerror(errno));
					/* not held: the file is the holder's now,
					 * even if this run made it (lock_fd < 0:
					 * stream_unmake() leaves it) */
					close(st->lock_fd);
					st->lock_fd = -1;
					return -EINTR;
				}
		}
		if (lock_named(st, &sb))
			break;
		close(st->lock_fd);
		st->lock_fd = -1;
	}
	/* the status is this run's to remove, too, if it fails before it
	 * streamed anything and none was there before it (under the lock:
	 * no other stream writes one meanwhile) */
	st->status_new = access(st->status_path, F_OK) < 0 && errno == ENOENT;
	return 0;
}

void stream_unmake(struct otlp_stream *st)
{
	if (st->status_new)
		unlink(st->status_path);
	/* while it is held (past stream_lock(), lock_fd is open only while
	 * held): a stream waiting for it finds it gone from its name
	 * (lock_named()) and makes another */
	if (st->lock_new && st->lock_fd >= 0)
		unlink(st->lock_path);
}

/* ------------------------------------------------------------- backlog */

static int cmp_num(const void *a, const void *b)
{
	unsigned long x = strtoul(strrchr(*(char *const *)a, '.') + 1, NULL, 10);
	unsigned long y = strtoul(strrchr(*(char *const *)b, '.') + 1, NULL, 10);

	return x < y ? -1 : x > y;
}

/* The backlog files there, in order; the next number in *next. */
static int list_backlog(struct otlp_stream *st, unsigned long *next)
{
	char prefix[4200], why[4400], *dir, *base;
	const char *slash;
	struct dirent *e;
	struct stat sb;
	DIR *d;

	beside(st->so->capture, "otlp-backlog.", prefix, sizeof(prefix));
	slash = strrchr(prefix, '/');
	dir = strndup(prefix, slash ? (size_t)(slash - prefix) + 1 : 0);
	base = slash ? (char *)slash + 1 : prefix;
	d = opendir(dir && *dir ? dir : ".");
	*next = 0;
	while (d && (e = readdir(d))) {
		char *end, *path;
		unsigned long k;

		if (strncmp(e->d_name, base, strlen(base)))
			continue;
		k = strtoul(e->d_name + strlen(base), &end, 10);
		if (*end || end == e->d_name + strlen(base))
			continue;
		if (k >= *next)
			*next = k + 1;
		if (asprintf(&path, "%s%s", dir, e->d_name) < 0)
			break;
		/* read, sent with our credentials and removed: only ours (in a
		 * sticky folder nobody else can put another file at its name) */
		if (lstat(path, &sb) < 0 || stream_side_file_ours(path, &sb, why, sizeof(why)) < 0) {
			fprintf(stderr, "shmtrace stream: warning: backlog %s; left as it is\n", why);
			free(path);
			continue;
		}
		if (array_reserve(&st->backlog, &st->backlog_cap, st->nbacklog + 1,
				  sizeof(*st->backlog), 8) < 0) {
			free(path);
			break;
		}
		st->backlog[st->nbacklog++] = path;
	}
	if (d)
		closedir(d);
	free(dir);
	if (st->nbacklog)
		qsort(st->backlog, st->nbacklog, sizeof(*st->backlog), cmp_num);
	return 0;
}

int stream_backlog(struct otlp_stream *st)
{
	char path[4200], to[4300];
	unsigned long next;
	uint32_t last, first;
	int moved = 0;

	list_backlog(st, &next);
	/* only a collector's stream, going on from a checkpoint, keeps the
	 * parts of the collector before it from the truncation */
	if (!st->so->collector_pid || !st->have_run)
		return 0;
	last = source_part_scan(st->so->capture, 0, true);
	/* from the newest down to the first one sent whole; then in order */
	first = last + 1;
	for (uint32_t p = last + 1; p-- > 0;) {
		source_part_path(st->so->capture, p, path, sizeof(path));
		if (source_part_unsent(path, st->run_id, st->so->collector_pid, st->from_seq) <= 0)
			break;
		first = p;
	}
	for (uint32_t p = first; p <= last; p++) {
		char *keep;

		source_part_path(st->so->capture, p, path, sizeof(path));
		beside(st->so->capture, "otlp-backlog", to, sizeof(to));
		snprintf(to + strlen(to), sizeof(to) - strlen(to), ".%lu", next++);
		if (rename(path, to) < 0)
			return -errno;
		if (array_reserve(&st->backlog, &st->backlog_cap, st->nbacklog + 1,
				  sizeof(*st->backlog), 8) < 0 || !(keep = strdup(to)))
			return -ENOMEM;
		st->backlog[st->nbacklog++] = keep;
		moved++;
	}
	if (moved)
		fprintf(stderr, "shmtrace stream: %d part%s of %s not sent yet kept aside (%s...) "
			"until sent\n", moved, moved == 1 ? "" : "s", st->so->capture,
			st->backlog[st->nbacklog - (size_t)moved]);
	return 0;
}

/* -------------------------------------------------------------- status */

uint64_t stream_lag(const struct stream_live *l)
{
	uint64_t now = clock_ns(CLOCK_REALTIME);

	return l->caught_up || !l->last_wall || now < l->last_wall ? 0 : now - l->last_wall;
}

void stream_publish(struct otlp_stream *st, const char *state)
{
	pthread_mutex_lock(&st->cmu);
	st->live.last_wall = st->last_wall;
	st->live.caught_up = st->caught_up;
	st->live.held = st->m.live;
	if (state)
		st->live.state = state;
	pthread_mutex_unlock(&st->cmu);
}

void stream_status(struct otlp_stream *st, bool force)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	struct stream_counts c;
	struct stream_live l;

	pthread_mutex_lock(&st->cmu);
	if (!force && now - st->live.status_at < 1000000000ull) {
		pthread_mutex_unlock(&st->cmu);
		return;
	}
	st->live.status_at = now;
	c = st->c;
	l = st->live;
	pthread_mutex_unlock(&st->cmu);
	stream_status_write(st, &c, &l);
}

void stream_summary(const struct otlp_stream *st, const struct stream_counts *c,
		    const struct stream_live *l, char *buf, size_t len)
{
	snprintf(buf, len, "%llu spans sent to %s in %llu requests, %llu retried, %llu rejected, "
		 "%llu records skipped, %llu spans sampled out, lag %.1f s",
		 (unsigned long long)c->sent, st->so->endpoint, (unsigned long long)c->requests,
		 (unsigned long long)c->retried, (unsigned long long)c->rejected,
		 (unsigned long long)c->skipped, (unsigned long long)c->sampled_out,
		 (double)stream_lag(l) / 1e9);
}

int stream_status_write(const struct otlp_stream *st, const struct stream_counts *c,
			const struct stream_live *l)
{
	char buf[2048], err[512];
	struct outfile of;
	struct stat cs;
	time_t now = time(NULL);
	struct tm tm;
	unsigned mode;
	int n, ret;

	gmtime_r(&now, &tm);
	n = snprintf(buf, sizeof(buf),
		     "endpoint %s\nstate %s\npid %d\nsent %llu\nrequests %llu\nretried %llu\n"
		     "rejected %llu\nskipped %llu\nsampled_out %llu\nheld %llu\nlag_s %.3f\n"
		     "updated %04d-%02d-%02dT%02d:%02d:%02dZ\n", st->so->endpoint,
		     l->state ? l->state : "running", (int)getpid(), (unsigned long long)c->sent,
		     (unsigned long long)c->requests, (unsigned long long)c->retried,
		     (unsigned long long)c->rejected, (unsigned long long)c->skipped,
		     (unsigned long long)c->sampled_out, (unsigned long long)l->held,
		     (double)stream_lag(l) / 1e9, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		     tm.tm_hour, tm.tm_min, tm.tm_sec);
	/* it describes the capture: readable by no one the capture does not
	 * let read it (by its owner only while there is no capture yet) */
	mode = stat(st->so->capture, &cs) == 0 ? outfile_mode_within(0644, cs.st_mode) : 0600;
	ret = outfile_open(&of, st->status_path, OUTFILE_WHOLE, mode, err, sizeof(err));
	if (ret < 0)
		return ret;
	if (write(of.fd, buf, (size_t)n) != n) {
		outfile_abort(&of);
		return -EIO;
	}
	return outfile_commit(&of, err, sizeof(err));
}

void otlp_stream_stat(const char *capture, struct kv *o)
{
	static const char *const nums[] = { "sent", "requests", "retried", "rejected", "skipped",
					    "sampled_out", "held" };
	char ckpt[4200], status[4200], lock[4200], line[512], key[64], val[448];
	char state[96] = "", *eq;
	unsigned long pid = 0;
	FILE *f;

	stream_paths(capture, ckpt, status, lock, sizeof(ckpt));
	f = fopen(status, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		eq = strchr(line, ' ');
		if (!eq || (size_t)(eq - line) >= sizeof(key))
			continue;
		snprintf(key, sizeof(key), "stream_%.*s", (int)(eq - line), line);
		snprintf(val, sizeof(val), "%s", eq + 1);
		if (!strcmp(key, "stream_pid")) {
			pid = strtoul(val, NULL, 10);
			continue;
		}
		if (!strcmp(key, "stream_state")) {
			snprintf(state, sizeof(state), "%.80s", val);
			/* a stream killed outright left "running" behind */
			if (!strcmp(val, "running") && !procs_running_as((uint32_t)pid, "shmtrace"))
				snprintf(state, sizeof(state), "stopped (its process is gone)");
			kv_str(o, key, state);
			continue;
		}
		for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
			if (!strcmp(key + 7, nums[i])) {
				kv_u64(o, key, strtoull(val, NULL, 10));
				key[0] = 0;
			}
		if (key[0])
			kv_str(o, key, val);
	}
	fclose(f);
}
