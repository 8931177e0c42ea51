/* SPDX-License-Identifier: MIT */
/*
 * flight.c - shmtrace-collector --flight-recorder (flight.h): holds the
 * ring (its blocks moved, dead threads' adopted, as a draining collector
 * does) and writes nothing until something asks for a snapshot: the
 * header's trigger count moving (it sleeps on it, so a trigger wakes it at
 * once), SIGUSR1, or a producer found dead inside spans. A request waits
 * --after, then the ring is copied (capture/snapshot.h) into a new file
 * of --snapshot-dir; requests that come meanwhile join it, and those past
 * --max-per-hour are counted, not answered.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "flight.h"
#include "hold.h"
#include "ring_reader.h"
#include "snapshot.h"

#define HOUR_NS		(3600ull * 1000000000ull)

static volatile sig_atomic_t g_usr1;

static void on_usr1(int sig)
{
	(void)sig;
	g_usr1 = 1;
}

struct flight {
	const struct flight_opts *o;
	const char *ring;
	uint64_t poll_ns;
	struct shmt_view v;
	struct hold hold;
	uint64_t seen;		/* the header's trigger count, answered or counted */
	/* the snapshot asked for and not yet taken */
	struct {
		bool on;
		struct shmt_cap_snapshot info;	/* cause, who, triggers */
		uint64_t due_ns;		/* monotonic */
	} p;
	uint64_t suppressed;	/* requests not answered since the last snapshot */
	/* ring time from which a trigger's record may be a snapshot's: when
	 * the recorder started (the triggers before were not its own), the
	 * last snapshot's copy began (they were counted in it), or a request
	 * was last not answered for --max-per-hour (they were counted so) */
	uint64_t last_start_ns;
	uint64_t *times;	/* the last max_per_hour snapshots' (monotonic) */
	uint32_t max, ntimes;
	/* the run's figures, for the summary line */
	uint64_t snaps, answered, suppressed_total, overwritten, records, failures;
	uint64_t failed_triggers;	/* the triggers of snapshots not written */
};

/* Whether one more snapshot keeps within --max-per-hour. */
static bool rate_allows(const struct flight *f, uint64_t now)
{
	return f->ntimes < f->max || now - f->times[f->ntimes % f->max] >= HOUR_NS;
}

/* A request for a snapshot: joins the one waiting, starts one, or is
 * counted when the hour's snapshots are taken. */
static void request(struct flight *f, uint32_t cause, uint64_t triggers, const char *what,
		    uint32_t pid, uint32_t tid)
{
	uint64_t now = shmt_mono_ns();
	struct shmt_cap_snapshot *in = &f->p.info;

	if (f->p.on) {
		in->triggers += triggers;
		return;
	}
	if (!rate_allows(f, now)) {
		/* a storm of triggers: each counted, in the next snapshot,
		 * whose own trigger is one after them */
		f->suppressed += cause == SHMT_SNAP_TRIGGER ? triggers : 1;
		f->suppressed_total += cause == SHMT_SNAP_TRIGGER ? triggers : 1;
		f->last_start_ns = shmt_clock_now(&f->v.clock);
		return;
	}
	memset(in, 0, sizeof(*in));
	in->cause = cause;
	in->triggers = triggers;
	in->trigger_ns = shmt_clock_now(&f->v.clock);
	in->trigger_pid = pid;
	in->trigger_tid = tid;
	snprintf(in->trigger, sizeof(in->trigger), "%s", what);
	f->p.on = true;
	f->p.due_ns = now + f->o->after_ns;
}

/* "pid P (NAME)": the process a dead owner was, by its name slot. */
static void dead_name(const struct flight *f, const struct shmt_owner *o, char *buf, size_t len)
{
	uint32_t n = shmt_ring_nthreads(&f->v);
	struct shmt_thread t;

	snprintf(buf, len, "pid %u tid %u", o->pid, o->tid);
	for (uint32_t i = 0; i < n; i++)
		if (shmt_ring_thread(&f->v, i, &t) == 0 && t.pid == o->pid &&
		    t.start_time == o->start_time && t.pname[0]) {
			snprintf(buf, len, "pid %u tid %u (%s)", o->pid, o->tid, t.pname);
			return;
		}
}

/* One look at the ring, under its SIGBUS guard: blocks moved and adopted,
 * deaths inside spans and triggers turned into requests. */
static int look(void *arg)
{
	struct flight *f = arg;
	uint64_t n;

	hold_adopt(&f->hold, false);
	while (hold_pending(&f->hold))
		hold_next(&f->hold);
	if (f->hold.died_open) {
		char what[96];

		dead_name(f, &f->hold.died, what, sizeof(what));
		request(f, SHMT_SNAP_DEATH, 0, what, f->hold.died.pid, f->hold.died.tid);
	}
	/* Any change is a trigger: producers only add to the count, and a
	 * peer that forged it lower (or to the top, for the next add to
	 * wrap) must neither deafen the recorder to the triggers after it
	 * nor keep its wait from sleeping (it sleeps while the count is
	 * seen); a count that went down is one trigger, not 2^64 of them. */
	n = shmt_ring_triggers(&f->v);
	if (n != f->seen)
		request(f, SHMT_SNAP_TRIGGER, n > f->seen ? n - f->seen : 1, "", 0, 0);
	f->seen = n;
	return 0;
}

/* DIR/RING.YYYYmmddTHHMMSS.uuuuuuZ.CAUSE[.K].cap: the trigger's wall-clock
 * time, K counting up from 1 when the name is taken. */
static void snapshot_path(const struct flight *f, unsigned k, char *buf, size_t len)
{
	uint64_t wall = f->v.clock.realtime0 + (f->p.info.trigger_ns - f->v.clock.mono0);
	time_t sec = (time_t)(wall / 1000000000ull);
	struct tm tm;
	char when[32] = "";
	char nth[16] = "";

	if (gmtime_r(&sec, &tm))
		strftime(when, sizeof(when), "%Y%m%dT%H%M%S", &tm);
	if (k)
		snprintf(nth, sizeof(nth), ".%u", k);
	snprintf(buf, len, "%s/%s.%s.%06lluZ.%s%s.cap", f->o->dir, f->ring, when,
		 (unsigned long long)(wall % 1000000000ull / 1000),
		 shmt_snap_cause_name(f->p.info.cause), nth);
}

/* The snapshot asked for, taken now. */
static void take(struct flight *f)
{
	struct shmt_snap_opts so = {
		.ring = f->ring, .max_bytes = f->o->max_bytes, .exclusive = true, .sync = true,
		.trigger_from_ns = f->last_start_ns, .info = f->p.info,
	};
	struct shmt_snap_result res;
	char path[4096 + 256], err[768];
	int ret = -EEXIST;

	so.info.suppressed = f->suppressed;
	/* before the trigger's own record, when the copy finds it */
	so.keep_ns = f->o->keep_ns;
	f->last_start_ns = shmt_clock_now(&f->v.clock);
	/* a name taken is passed over before the ring is copied: the copy
	 * is the cost (a whole ring); a name taken between the look and the
	 * write is refused by the write (never replaced), and the next tried */
	for (unsigned k = 0; ret == -EEXIST && k < 100; k++) {
		struct stat st;

		snapshot_path(f, k, path, sizeof(path));
		if (lstat(path, &st) == 0)
			continue;
		ret = shmt_snapshot_write(&f->v, path, &so, &res, err, sizeof(err));
	}
	f->p.on = false;
	/* an attempt counts against --max-per-hour whether or not it was
	 * written: each copies the whole ring, and a directory that refuses
	 * every file must not make each trigger cost one */
	f->times[f->ntimes++ % f->max] = shmt_mono_ns();
	if (ret < 0) {
		/* the recorder goes on: the next trigger may find room */
		if (ret == -EEXIST)
			snprintf(err, sizeof(err), "100 names taken in '%.400s'", f->o->dir);
		fprintf(stderr, "shmtrace-collector: snapshot of ring '%s' not written: %s\n",
			f->ring, err);
		f->failures++;
		f->failed_triggers += so.info.triggers;
		return;
	}
	f->snaps++;
	f->answered += res.info.triggers;
	f->overwritten += res.info.overwritten;
	f->records += res.records;
	f->suppressed = 0;
}

/* Sleeps until a trigger, a signal, the poll interval or the snapshot
 * waiting is due. */
static void nap(struct flight *f)
{
	uint64_t ns = f->poll_ns, now = shmt_mono_ns();

	if (f->p.on)
		ns = f->p.due_ns > now ? (f->p.due_ns - now < ns ? f->p.due_ns - now : ns) : 0;
	if (ns && !g_usr1)
		shmt_trigger_wait(&f->v, f->seen, ns);
}

static void say_summary(const struct flight *f)
{
	fprintf(stderr, "shmtrace-collector: flight recorder of ring '%s': %llu snapshot%s in '%s' "
		"(%llu records, %llu triggers answered, %llu requests not answered for "
		"--max-per-hour %u, %llu of them after the last snapshot), %llu records "
		"overwritten during copies, %llu snapshots not written (%llu triggers they "
		"asked for), longest lock hold %.1f us (%llu of %llu over %llu us)\n",
		f->ring, (unsigned long long)f->snaps, f->snaps == 1 ? "" : "s", f->o->dir,
		(unsigned long long)f->records, (unsigned long long)f->answered,
		(unsigned long long)f->suppressed_total, f->max,
		(unsigned long long)f->suppressed, (unsigned long long)f->overwritten,
		(unsigned long long)f->failures, (unsigned long long)f->failed_triggers,
		(double)f->hold.lock_hold_max_ns / 1000.0,
		(unsigned long long)f->hold.lock_holds_long, (unsigned long long)f->hold.lock_holds, HOLD_LONG_NS / 1000);
}

/* Maps and claims the ring, refusing one that is no flight recorder's. */
static int open_ring(struct flight *f)
{
	char err[256];
	int ret = shmt_view_open(f->ring, SHMT_OPEN_WRITE, &f->v, err, sizeof(err));

	if (ret < 0) {
		fprintf(stderr, "shmtrace-collector: %s\n", err);
		return ret;
	}
	if (f->v.mode != SHMTRACE_MODE_OVERWRITE) {
		fprintf(stderr, "shmtrace-collector: ring '%s' is in discard mode: a flight "
			"recorder keeps its window in the ring, which only an overwrite ring does "
			"(shmtrace create %s --mode overwrite)\n", f->ring, f->ring);
		shmt_view_close(&f->v);
		return -EINVAL;
	}
	ret = hold_init(&f->hold, &f->v, f->ring, f->poll_ns);
	if (ret < 0) {
		fprintf(stderr, ret == -EBUSY ? "shmtrace-collector: another collector holds ring "
			"'%s'\n" : "shmtrace-collector: cannot lock ring '%s'\n", f->ring);
		hold_free(&f->hold);
		shmt_view_close(&f->v);
		return ret;
	}
	if (f->v.minor < SHMT_MINOR_TRIGGER)
		fprintf(stderr, "shmtrace-collector: warning: ring '%s' is of format 1.%u, before "
			"triggers: shmtrace_trigger() cannot reach it; SIGUSR1 and deaths still make "
			"snapshots\n", f->ring, f->v.minor);
	return 0;
}

/* The header's trigger count as the recorder starts, and where its marks
 * begin (hold_mark()), for shmt_guarded(). */
static int start_seen(void *arg)
{
	struct flight *f = arg;

	hold_mark(&f->hold);
	f->seen = shmt_ring_triggers(&f->v);
	f->last_start_ns = shmt_clock_now(&f->v.clock);
	return 0;
}

/* nap(), for shmt_guarded(): it waits on the header's trigger count. */
static int guarded_nap(void *f)
{
	nap(f);
	return 0;
}

/* "ready\n" to fd (-1: none) and closed, as --ready-fd says. */
static void say_ready(int fd)
{
	if (fd < 0)
		return;
	if (write(fd, "ready\n", 6) != 6)
		fprintf(stderr, "shmtrace-collector: warning: --ready-fd %d: %s\n", fd,
			strerror(errno));
	close(fd);
}

int flight_run(const char *ring, uint64_t poll_ns, const struct flight_opts *o, bool quiet,
	       int ready_fd, bool (*stop)(void))
{
	struct flight *f = calloc(1, sizeof(*f));
	struct sigaction sa;
	bool gone = false;
	int status;

	if (!f)
		return 1;
	f->o = o;
	f->ring = ring;
	f->poll_ns = poll_ns;
	f->max = o->max_per_hour ? o->max_per_hour : FLIGHT_MAX_PER_HOUR;
	/* first: SIGUSR1's default action ends the process, and a request
	 * that comes while the ring is opened is one to answer */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	f->times = calloc(f->max, sizeof(*f->times));
	if (!f->times || open_ring(f) < 0) {
		free(f->times);
		free(f);
		return 1;
	}
	/* those before us are not ours; read under the guard, as every look
	 * at the segment, which a writer of it may have cut short */
	gone = shmt_guarded(start_seen, f) < 0;
	if (!gone)
		say_ready(ready_fd);
	while (!gone && !stop()) {
		if (shmt_guarded(look, f) < 0) {
			gone = true;
			break;
		}
		if (g_usr1) {
			g_usr1 = 0;
			request(f, SHMT_SNAP_SIGNAL, 0, "SIGUSR1", 0, 0);
		}
		if (f->p.on && shmt_mono_ns() >= f->p.due_ns) {
			take(f);
		} else if (shmt_guarded(guarded_nap, f) < 0) {
			gone = true;
			break;
		}
	}
	/* the triggers and deaths up to the stop are counted, and a request
	 * just before it is not lost for its --after */
	if (!gone && shmt_guarded(look, f) < 0)
		gone = true;
	else if (!gone && f->p.on)
		take(f);
	if (gone) {
		fprintf(stderr, "shmtrace-collector: ring '%s' was truncated under us\n", ring);
		f->failures++;
	}
	if (!quiet)
		say_summary(f);
	status = f->failures ? 1 : 0;
	hold_free(&f->hold);
	shmt_view_close(&f->v);
	free(f->times);
	free(f);
	return status;
}
