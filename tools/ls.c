/* SPDX-License-Identifier: MIT */
/*
 * ls.c - `shmtrace ls` and `shmtrace rm`: the rings in /dev/shm (size,
 * permissions, fill, producers alive and dead, collector, age), and
 * removing those nobody uses any more.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "array.h"
#include "cli.h"
#include "json_writer.h"
#include "kv.h"
#include "ring_census.h"
#include "ring_reader.h"
#include "term.h"

#define MAX_LIVE	8	/* live producer pids named by rm's refusal */

/* What ls shows and rm decides on; everything read from the segment. */
struct census {
	struct shmt_view v;
	uint64_t fill;
	uint64_t undrained;	/* published past the tail, and staged in blocks */
	uint64_t recorded;	/* the collector pid the header names (ring_collector()) */
	bool count_procs;	/* count the producers too (rm --force needs not) */
	struct ring_proc *procs;	/* the pass's copy, freed by census_take() */
	size_t nprocs;
	uint32_t alive, dead;
	uint32_t live_pids[MAX_LIVE];
};

/* Reads the fill and copies the producers out (one per pid and start
 * time, as stat lists them). Runs under shmt_guarded(). */
static int census_pass(void *arg)
{
	struct census *c = arg;
	const struct shmt_view *v = &c->v;
	uint64_t head = shmt_ring_head(v), tail = shmt_ring_tail(v);

	c->fill = head > tail ? head - tail : 0;
	if (c->fill > v->capacity)
		c->fill = v->capacity;
	c->undrained = shmt_ring_undrained(v);
	c->recorded = shmt_ring_collector_pid(v);
	return c->count_procs ? ring_processes(v, &c->procs, &c->nprocs) : 0;
}

/* Opens name read-only and counts (with procs, the producers alive and
 * dead); returns 0, or -errno with err set. */
static int census_take(const char *name, struct census *c, struct stat *st, bool procs,
		       char *err, size_t errlen)
{
	char path[SHMT_PATH_MAX];
	int ret;

	memset(c, 0, sizeof(*c));
	c->count_procs = procs;
	ret = shmt_view_open(name, SHMT_OPEN_ANY_OWNER, &c->v, err, errlen);
	if (ret < 0)
		return ret;
	if ((ret = shmt_ring_path(name, path, sizeof(path))) < 0 || lstat(path, st) < 0) {
		ret = ret < 0 ? ret : -errno;
		snprintf(err, errlen, "ring '%s': %s", name, strerror(-ret));
		shmt_view_close(&c->v);
		return ret;
	}
	ret = shmt_guarded(census_pass, c);
	/* whether each lives: /proc, not the segment, outside the guard */
	for (size_t i = 0; ret == 0 && i < c->nprocs; i++) {
		if (ring_process_alive(&c->procs[i])) {
			if (c->alive < MAX_LIVE)
				c->live_pids[c->alive] = c->procs[i].pid;
			c->alive++;
		} else {
			c->dead++;
		}
	}
	free(c->procs);
	c->procs = NULL;
	if (ret < 0) {
		if (ret == -ENOMEM)
			snprintf(err, errlen, "ring '%s': out of memory", name);
		else
			snprintf(err, errlen, "ring '%s': segment shrank while being read", name);
		shmt_view_close(&c->v);
		return ret == -ENOMEM ? ret : -EFAULT;
	}
	return 0;
}

/*
 * A file under a ring's name that census_take() refused (-EPROTO,
 * -EBADMSG): when it carries the ring's magic, what is wrong with it in
 * words, "damaged: WHY" or "format M.m, newer than this shmtrace reads",
 * into what, and its kind into *kind (for --json). Returns the examine's
 * descriptor (shmt_ring_examine(): to close), or -errno when it is no
 * ring, or no longer one we cannot read (made anew meanwhile), with err
 * set.
 */
static int unreadable_ring(const char *name, struct stat *st, char *what, size_t len,
			   const char **kind, char *err, size_t errlen)
{
	struct shmt_ring_exam x;
	int fd = shmt_ring_examine(name, st, &x, err, errlen);

	if (fd < 0)
		return fd;
	if (x.verdict == 0) {
		close(fd);
		snprintf(err, errlen, "ring '%s' changed while being looked at (made anew)", name);
		return -ESTALE;
	}
	if (x.verdict == -EPROTO) {
		bool newer = x.major >= SHMT_RING_OLDEST;

		*kind = newer ? "newer_format" : "older_format";
		snprintf(what, len, "format %u.%u, %s than this shmtrace reads", x.major, x.minor,
			 newer ? "newer" : "older");
	} else {
		*kind = "damaged";
		snprintf(what, len, "damaged: %s", x.why);
	}
	return fd;
}

static void fmt_size(char *buf, size_t len, uint64_t b)
{
	static const char units[] = "KMGT";
	double x = (double)b;
	int u = -1;

	while (x >= 1024 && u < 3) {
		x /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%" PRIu64, b);
	else
		snprintf(buf, len, "%.1f%c", x, units[u]);
}

static void fmt_age(char *buf, size_t len, uint64_t created_ns, uint64_t now_ns)
{
	uint64_t s;

	if (!created_ns || created_ns > now_ns) {
		snprintf(buf, len, "?");
		return;
	}
	s = (now_ns - created_ns) / 1000000000ull;
	if (s < 60)
		snprintf(buf, len, "%" PRIu64 "s", s);
	else if (s < 3600)
		snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
	else
		snprintf(buf, len, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, s / 3600 % 24);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in /dev/shm that could be rings, sorted: regular files, not
 * the temporaries of a creation in progress. */
static int list_names(char ***out, size_t *n)
{
	DIR *d = opendir(SHMT_SHM_DIR);
	struct dirent *de;
	char **v = NULL;
	size_t cap = 0;

	*n = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || shmt_name_check(de->d_name) < 0)
			continue;
		if (de->d_type != DT_REG && de->d_type != DT_UNKNOWN)
			continue;
		if (array_reserve(&v, &cap, *n + 1, sizeof(*v), 32) < 0)
			break;
		if (!(v[*n] = strdup(de->d_name)))
			break;
		(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(v, *n, sizeof(*v), cmp_names);
	*out = v;
	return 0;
}

/* a command's help is its own text, whole: lines it shares with other
 * commands' help (the options) stay in it, so each reads in one piece */
static const char ls_usage[] =
	"Usage: shmtrace ls [--json]\n"
	"Lists the shmtrace rings in /dev/shm that can be read: size, permissions,\n"
	"mode, capacity, fill, producers alive and dead, the collector draining it\n"
	"(its pid, or '-'), and age (since creation). A ring that is damaged, or of\n"
	"a format this shmtrace does not read, is listed with what is wrong with it.\n"
	"Other files are skipped.\n"
	"\n"
	"      --json     print one JSON array of objects\n"
	"  -h, --help     show this help\n"
	"  -V, --version  show the version\n";

static const struct cli_opts ls_opts = { "ls", ls_usage, ":", cli_json_longopts };

static const char *mode_name(const struct census *cs)
{
	return cs->v.mode == SHMTRACE_MODE_OVERWRITE ? "overwrite" : "discard";
}

/* Begins a ring's JSON object with what ls knows of its file, whether
 * the ring can be read or not. */
static void ls_json_file(struct kv *o, struct jw *w, const char *name, const struct stat *st)
{
	char perm[8];

	kv_begin(o, w, true);
	kv_str(o, "name", name);
	kv_u64(o, "size", (uint64_t)st->st_size);
	snprintf(perm, sizeof(perm), "%04o", (unsigned)(st->st_mode & 07777));
	kv_str(o, "perm", perm);
	kv_u64(o, "uid", (uint64_t)st->st_uid);
}

/* One ring as a JSON object. */
static void ls_json(struct jw *w, const char *name, const struct census *cs,
		    const struct stat *st, int64_t col, uint64_t now)
{
	uint64_t created = cs->v.clock.realtime0;
	struct kv o;

	ls_json_file(&o, w, name, st);
	kv_str(&o, "mode", mode_name(cs));
	kv_u64(&o, "capacity", cs->v.capacity);
	kv_u64(&o, "fill", cs->fill);
	kv_u64(&o, "producers_alive", cs->alive);
	kv_u64(&o, "producers_dead", cs->dead);
	kv_bool(&o, "collector", col >= 0);
	kv_u64(&o, "collector_pid", col > 0 ? (uint64_t)col : 0);
	kv_u64(&o, "created_ns", created);
	kv_u64(&o, "age_s", created && created <= now ? (now - created) / 1000000000ull : 0);
	kv_close(&o);
}

/* A ring that cannot be read, as a JSON object: what ls knows of its
 * file, and what is wrong with it. */
static void ls_json_unreadable(struct jw *w, const char *name, const struct stat *st,
			       const char *kind, const char *what)
{
	struct kv o;

	ls_json_file(&o, w, name, st);
	kv_str(&o, "unreadable", kind);
	kv_str(&o, "why", what);
	kv_close(&o);
}

/* Begins a ring's line of the table: its name, size and permissions,
 * whether it can be read or not. */
static void ls_text_file(struct jw *w, const char *name, const struct stat *st)
{
	char size[32], line[64], esc[TERM_ESC_MAX(256)];

	/* a file name is untrusted bytes: escaped, never raw */
	term_escape(name, strlen(name), esc, sizeof(esc));
	fmt_size(size, sizeof(size), (uint64_t)st->st_size);
	snprintf(line, sizeof(line), " %7s  %04o  ", size, (unsigned)(st->st_mode & 07777));
	jw_puts(w, esc);
	for (size_t k = strlen(esc); k < 20; k++)
		jw_puts(w, " ");
	jw_puts(w, line);
}

/* A ring that cannot be read, as a line of the table: its size and
 * permissions, then what is wrong with it in place of the other columns. */
static void ls_text_unreadable(struct jw *w, const char *name, const struct stat *st,
			       const char *what)
{
	ls_text_file(w, name, st);
	jw_puts(w, what);
	jw_puts(w, "\n");
}

/* One ring as a line of the table. */
static void ls_text(struct jw *w, const char *name, const struct census *cs,
		    const struct stat *st, int64_t col, uint64_t now)
{
	char age[32], colbuf[24], line[512];

	fmt_age(age, sizeof(age), cs->v.clock.realtime0, now);
	if (col > 0)
		snprintf(colbuf, sizeof(colbuf), "%lld", (long long)col);
	else
		snprintf(colbuf, sizeof(colbuf), "-");
	snprintf(line, sizeof(line), "%-9s  %8u  %4.0f%%  %5u  %4u  %9s  %s\n", mode_name(cs),
		 cs->v.capacity, 100.0 * (double)cs->fill / cs->v.capacity, cs->alive, cs->dead,
		 colbuf, age);
	ls_text_file(w, name, st);
	jw_puts(w, line);
}

/* The rings of names[0..n) that can be read, on w. */
static void ls_rings(struct jw *w, char **names, size_t n, bool json)
{
	uint64_t now = shmt_realtime_ns();
	bool any = false;

	if (json)
		jw_puts(w, "[");
	for (size_t i = 0; i < n; i++) {
		struct census cs;
		struct stat st;
		char err[512], what[300];
		const char *kind = NULL;
		int ret = census_take(names[i], &cs, &st, true, err, sizeof(err)), fd = -1;

		/* a ring of a newer format, or damaged, is listed with what
		 * is wrong with it: hidden, it was left for ever; one not
		 * readable by us, or not a ring, is not ours to list */
		if ((ret == -EPROTO || ret == -EBADMSG) &&
		    (fd = unreadable_ring(names[i], &st, what, sizeof(what), &kind, err,
					  sizeof(err))) >= 0)
			close(fd);
		if (ret < 0 && fd < 0)
			continue;
		if (json && any)
			jw_puts(w, ",");
		else if (!json && !any)
			jw_puts(w, "NAME                    SIZE  PERM  MODE       CAPACITY   FILL"
				   "  ALIVE  DEAD  COLLECTOR  AGE\n");
		any = true;
		if (kind) {
			if (json)
				ls_json_unreadable(w, names[i], &st, kind, what);
			else
				ls_text_unreadable(w, names[i], &st, what);
			continue;
		}
		(json ? ls_json : ls_text)(w, names[i], &cs, &st, ring_collector(&cs.v, cs.recorded), now);
		shmt_view_close(&cs.v);
	}
	if (json)
		jw_puts(w, "]\n");
}

int cmd_ls(int argc, char **argv)
{
	struct jw *w = NULL;
	bool json = false;
	char **names = NULL;
	size_t n = 0;
	int ret, rc = EXIT_OK;

	if (cli_getopt_flag(&ls_opts, argc, argv, 'j', &json, &rc) == CLI_OPT_EXIT)
		return rc;
	if (optind != argc)
		return cli_usage_error("ls", "unexpected argument '%s'", argv[optind]);
	ret = list_names(&names, &n);
	if (ret < 0)
		return cli_runtime_error("ls", "cannot read " SHMT_SHM_DIR ": %s", strerror(-ret));
	if (!(w = malloc(sizeof(*w)))) {
		rc = cli_runtime_error("ls", "out of memory");
	} else {
		jw_init(w, stdout);
		ls_rings(w, names, n, json);
		if ((ret = jw_flush(w)) < 0)
			rc = cli_runtime_error("ls", "writing output: %s", strerror(-ret));
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(w);
	return rc;
}

static const char rm_usage[] =
	"Usage: shmtrace rm [--force] NAME...\n"
	"Removes rings from /dev/shm. A ring that live producers are attached to,\n"
	"or that a collector is draining, or that is damaged or of a format this\n"
	"shmtrace does not read, is refused unless --force; a file that is not a\n"
	"shmtrace ring (a FIFO or a directory too) is always refused.\n"
	"Processes attached to a removed ring keep their mapping; the memory is\n"
	"freed when the last one detaches.\n"
	"Removing a ring that holds records no collector drained says how many:\n"
	"gone with it, unless exported first (shmtrace export --ring NAME).\n"
	"\n"
	"  -f, --force    remove even rings in use\n"
	"  -h, --help     show this help\n"
	"  -V, --version  show the version\n";

/* rm of a ring census_take() refused (-EPROTO, -EBADMSG; first_err its
 * reason): refused unless force, as what is in it cannot be counted; with
 * force, the file looked at is removed, and what was wrong with it said.
 * A file that is no ring is refused as before. */
static int rm_unreadable(const char *name, bool force, const char *first_err)
{
	char err[512], what[300];
	const char *kind;
	struct stat st;
	int fd = unreadable_ring(name, &st, what, sizeof(what), &kind, err, sizeof(err)), ret;

	if (fd == -EPROTO)
		return cli_runtime_error("rm", "%s", first_err);
	if (fd < 0)
		return cli_runtime_error("rm", "%s; not removed", err);
	if (!force) {
		close(fd);
		return cli_runtime_error("rm", "ring '%s': %s; not removed (--force removes it)", name,
					 what);
	}
	/* fd held open until the unlink: the inode looked at cannot be
	 * reused, so the identity check removes only that file */
	ret = shmt_ring_unlink_seen(name, &(const struct shmt_view){ .dev = st.st_dev,
								     .ino = st.st_ino });
	close(fd);
	if (ret == -ESTALE)
		return cli_runtime_error("rm", "ring '%s' changed while being looked at (made anew); "
					 "not removed", name);
	if (ret < 0)
		return cli_runtime_error("rm", "cannot remove ring '%s': %s", name, strerror(-ret));
	cli_note("rm", "removed ring '%s' (%s); its records, if any, were not counted", name, what);
	return EXIT_OK;
}

/* Removes one ring (a valid name); returns EXIT_OK or EXIT_RUNTIME after
 * saying why not. */
static int rm_one(const char *name, bool force)
{
	struct census cs;
	struct stat st;
	char err[512];
	int64_t col;
	int ret;

	ret = census_take(name, &cs, &st, !force, err, sizeof(err));
	/* a FIFO, directory or socket under the name is no ring: never ours
	 * to remove (rm(1) removes it) */
	if (ret == -ENODEV)
		return cli_runtime_error("rm", "%s; not a ring, not removed", err);
	if (ret == -EPROTO || ret == -EBADMSG)
		return rm_unreadable(name, force, err);
	if (ret < 0)
		return cli_runtime_error("rm", "%s", err);
	col = ring_collector(&cs.v, cs.recorded);
	/* cs.v stays open until the unlink: what is removed is the ring
	 * looked at, never one made anew under its name meanwhile */
	if (!force && cs.alive) {
		char pids[MAX_LIVE * 12 + 8] = "";
		size_t len = 0;

		for (uint32_t i = 0; i < cs.alive && i < MAX_LIVE; i++)
			len += (size_t)snprintf(pids + len, sizeof(pids) - len, "%s%u", i ? ", " : "",
						cs.live_pids[i]);
		if (cs.alive > MAX_LIVE)
			snprintf(pids + len, sizeof(pids) - len, ", ...");
		shmt_view_close(&cs.v);
		return cli_runtime_error("rm", "ring '%s' has %u live producer%s (pid %s); not removed "
					 "(--force removes it anyway)", name, cs.alive,
					 cs.alive == 1 ? "" : "s", pids);
	}
	if (!force && col >= 0) {
		shmt_view_close(&cs.v);
		return cli_runtime_error("rm", "ring '%s' is being drained by a collector (pid %lld); "
					 "not removed (--force removes it anyway)", name, (long long)col);
	}
	ret = shmt_ring_unlink_seen(name, &cs.v);
	shmt_view_close(&cs.v);
	if (ret == -ESTALE)
		return cli_runtime_error("rm", "ring '%s' changed while being looked at (made anew); "
					 "not removed", name);
	if (ret < 0)
		return cli_runtime_error("rm", "cannot remove ring '%s': %s", name, strerror(-ret));
	/* a collector draining it keeps its mapping and drains on; else what
	 * the ring held is gone with it, unless the user exported it (which
	 * leaves no mark in the ring: said either way) */
	if (cs.undrained && col < 0)
		cli_note("rm", "removed ring '%s' with %llu record%s no collector drained; unless "
			 "exported (shmtrace export --ring %s), %s gone", name,
			 (unsigned long long)cs.undrained, cs.undrained == 1 ? "" : "s", name,
			 cs.undrained == 1 ? "it is" : "they are");
	return EXIT_OK;
}

static const struct option rm_longopts[] = {
	{ "force", no_argument, NULL, 'f' },
	{ NULL, 0, NULL, 0 },
};

static const struct cli_opts rm_opts = { "rm", rm_usage, ":f", rm_longopts };

int cmd_rm(int argc, char **argv)
{
	bool force = false;
	int rc = EXIT_OK;

	if (cli_getopt_flag(&rm_opts, argc, argv, 'f', &force, &rc) == CLI_OPT_EXIT)
		return rc;
	if (optind == argc)
		return cli_usage_error("rm", "no ring given");
	/* a name no ring can have is a usage error: before any is removed */
	for (int i = optind; i < argc; i++)
		if (cli_check_ring_name("rm", argv[i]))
			return EXIT_USAGE;
	for (int i = optind; i < argc; i++)
		if (rm_one(argv[i], force) != EXIT_OK)
			rc = EXIT_RUNTIME;
	return rc;
}
