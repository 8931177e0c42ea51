/* SPDX-License-Identifier: MIT */
/*
 * test_flight.c - shmtrace-collector --flight-recorder: a producer writing
 * at full speed into an overwrite ring that wraps hundreds of times calls
 * shmtrace_trigger() at a random moment, and the one snapshot it gets
 * holds every record of the --keep before the trigger (checked against the
 * ring itself), none missing, none torn, its trigger marker and the names
 * of its process and thread, the copy's accounting exact; a storm of a
 * thousand triggers writes at most --max-per-hour snapshots and counts
 * every other trigger (in the snapshots and the summary line); a producer
 * killed inside spans gets a snapshot that shows them unfinished, with its
 * flows; SIGUSR1 asks for one; producers hand their full blocks over to
 * the recorder rather than copy them under the lock; a trigger count a
 * peer forged to its top leaves it hearing the next trigger; what is not
 * a flight recorder's ring or command line is refused in one line.
 */
#include <dirent.h>
#include <grp.h>
#include <poll.h>
#include <sys/inotify.h>

#include "cli_run.h"
#include "snapshot_read.h"

#define CAP	(1u << 18)	/* the ring's records */
#define KEEP_NS	1000000ull	/* --keep 1ms */

/* Starts the flight recorder on ring (made with --create, overwrite,
 * CAP) into dir with the options extra (NULL-terminated), its stderr to
 * errpath, and waits until it says it holds the ring. */
static pid_t start_flight(const char *ring, const char *dir, const char *errpath,
			  const char *const *extra)
{
	const char *argv[24] = { "shmtrace-collector", "--ring", ring, "--create", "--mode",
				 "overwrite", "--capacity", "262144", "--flight-recorder",
				 "--snapshot-dir", dir, "--ready-fd", NULL, "--poll-interval", "5" };
	int p[2], n = 15;
	char buf[16], fd[16];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		argv[12] = fd;
		for (int i = 0; extra && extra[i] && n < 23; i++)
			argv[n++] = extra[i];
		if (e < 0 || dup2(e, 2) < 0)
			_exit(126);
		execv(collector_bin, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	if (read(p[0], buf, sizeof(buf)) != 6)
		print_file(errpath);
	close(p[0]);
	return pid;
}

/* Stops the recorder with sig; its wait status. */
static int stop_flight(pid_t pid, int sig)
{
	int status;

	kill(pid, sig);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void exited_0(int status)
{
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* The snapshots in dir, their paths in paths[] (at most max). */
static int snapshots_in(const char *dir, char paths[][512], int max)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (strstr(e->d_name, ".cap") && e->d_name[0] != '.' && n < max)
			snprintf(paths[n++], 512, "%s/%s", dir, e->d_name);
	closedir(d);
	return n;
}

/* Waits, through inotify (a minute at most: a hang guard), until dir
 * holds n snapshots. */
static void wait_snapshots(const char *dir, int in, int n)
{
	char paths[8][512], ev[4096];

	while (snapshots_in(dir, paths, 8) < n) {
		struct pollfd p = { .fd = in, .events = POLLIN };

		assert_int_equal(poll(&p, 1, 60000), 1);
		assert_true(read(in, ev, sizeof(ev)) > 0);
	}
}

static int watch(const char *dir)
{
	int in = inotify_init1(IN_CLOEXEC);

	assert_true(in >= 0);
	assert_true(inotify_add_watch(in, dir, IN_CREATE | IN_MOVED_TO) >= 0);
	return in;
}

/* The directory tmp(dir) made and watched (inotify, in *w), and the
 * recorder started on ring into it, its stderr to tmp(dir.err). */
static pid_t flight_into(const char *ring, const char *dir, int *w, const char *const *extra)
{
	char err[64];

	snprintf(err, sizeof(err), "%s.err", dir);
	mkdir(tmp(dir), 0700);
	*w = watch(tmp(dir));
	shmtrace_ring_unlink(ring);
	return start_flight(ring, tmp(dir), tmp(err), extra);
}

/*
 * The producer of the trigger test: spans "tick" of thread "trigger-thread"
 * with an argument "i", their index, at full speed; after `after` of them,
 * a trigger "boom", then `more` spans, then it says its trigger index on
 * out and waits on in before it closes.
 */
static void trigger_producer(const char *ring, uint64_t after, uint64_t more, int out, int in)
{
	shmtrace_t *t;
	uint32_t cat, name, key;
	char c;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (shmtrace_open(ring, &t) < 0)
		_exit(3);
	shmtrace_set_process_name(t, "churn");
	shmtrace_set_thread_name(t, "trigger-thread");
	cat = shmtrace_intern(t, "test");
	name = shmtrace_intern(t, "tick");
	key = shmtrace_intern(t, "i");
	for (uint64_t i = 0; i < after + more; i++) {
		uint64_t t0 = shmtrace_now();
		struct shmtrace_arg a = shmtrace_arg_int(key, (int64_t)i);

		shmtrace_span_args(t, cat, name, t0, shmtrace_now(), 0, &a, 1);
		if (i == after && (shmtrace_trigger(t, "boom", 0) < 0 ||
				   write(out, &i, sizeof(i)) != sizeof(i)))
			_exit(4);
	}
	if (read(in, &c, 1) != 1)
		_exit(5);
	shmtrace_close(t);
	_exit(0);
}

/* The index argument of span r[i] (the record after it), or -1. */
static int64_t index_of(const struct shmt_record *r, const uint64_t *seq, size_t n, size_t i,
			uint32_t key)
{
	if (i + 1 >= n || seq[i + 1] != seq[i] + 1 || r[i + 1].commit != SHMTRACE_KIND_ARG ||
	    r[i + 1].name != key || r[i + 1].pid != r[i].pid || r[i + 1].ts != r[i].ts)
		return -1;
	return (int64_t)r[i + 1].dur;
}

/* Every span of pid the ring holds now (the producer waits) that ends at
 * or after since and starts by the trigger is in the snapshot s, once;
 * returns how many. */
static uint64_t check_against_ring(const char *ring, const struct snap_file *s, uint32_t pid,
				   uint64_t since, uint64_t trigger_ts, uint32_t key)
{
	struct ring_dump d;
	uint8_t *seen = calloc(CAP * 8, 1);
	uint64_t checked = 0;

	assert_non_null(seen);
	for (size_t i = 0; i < s->n; i++) {
		int64_t ix = index_of(s->r, s->seq, s->n, i, key);

		if (s->r[i].pid == pid && s->r[i].commit == SHMTRACE_KIND_SPAN && ix >= 0) {
			assert_int_equal(seen[ix % (CAP * 8)], 0);
			seen[ix % (CAP * 8)] = 1;
		}
	}
	ring_dump(ring, &d);
	for (size_t i = 0; i + 1 < d.n; i++) {
		const struct shmt_record *r = &d.recs[i];

		if (r->pid != pid || SHMT_COMMIT_KIND(r->commit) != SHMTRACE_KIND_SPAN ||
		    r->ts + r->dur < since || r->ts > trigger_ts ||
		    SHMT_COMMIT_KIND(d.recs[i + 1].commit) != SHMTRACE_KIND_ARG)
			continue;
		assert_int_equal(seen[d.recs[i + 1].dur % (CAP * 8)], 1);
		checked++;
	}
	free(d.recs);
	free(seen);
	return checked;
}

static void test_trigger_snapshot_holds_the_keep_before_it(void **state)
{
	const char *ring = test_ring_name("flt");
	const char *const extra[] = { "--keep", "1ms", NULL };
	uint64_t after = 150ull * CAP / 2 + (uint64_t)(getpid() % 50) * CAP, ti, trig_ts = 0;
	int out[2], in[2], w, status;
	struct snap_file *s = calloc(1, sizeof(*s));
	const struct shmt_cap_snapshot *sn = &s->h.snapshot;
	char paths[8][512];
	pid_t col, prod;
	uint32_t key;

	(void)state;
	col = flight_into(ring, "t1", &w, extra);
	assert_int_equal(pipe(out), 0);
	assert_int_equal(pipe(in), 0);
	prod = fork();
	assert_true(prod >= 0);
	if (prod == 0)
		trigger_producer(ring, after, CAP / 8, out[1], in[0]);
	/* a producer that fails is an end of file here, not a hang */
	close(out[1]);
	close(in[0]);
	assert_int_equal(read(out[0], &ti, sizeof(ti)), sizeof(ti));
	wait_snapshots(tmp("t1"), w, 1);
	assert_int_equal(snapshots_in(tmp("t1"), paths, 8), 1);
	snap_read(paths[0], s);
	assert_int_equal(sn->cause, SHMT_SNAP_TRIGGER);
	assert_string_equal(sn->trigger, "boom");
	assert_int_equal(sn->trigger_pid, (uint32_t)prod);
	assert_int_equal(sn->triggers, 1);
	assert_non_null(strstr(paths[0], ".trigger.cap"));
	/* the ring wrapped hundreds of times; nothing of the window was lost
	 * (the producer wrote an eighth of the ring since the trigger) */
	assert_true(sn->end_seq > 100ull * CAP);
	assert_int_equal(sn->overwritten, 0);
	assert_int_equal(s->loss.torn, 0);
	assert_int_equal((uint64_t)s->n, sn->end_seq - sn->first_seq + sn->staged);
	for (size_t i = 0; i < s->n; i++)
		if (s->r[i].commit == SHMTRACE_KIND_TRIGGER)
			trig_ts = s->r[i].ts;
	assert_int_equal(trig_ts, sn->trigger_ns);
	/* the window begins --keep before the trigger (or with the first
	 * record after that moment) */
	assert_true(sn->from_ns >= trig_ts - KEEP_NS && sn->from_ns <= trig_ts);
	assert_true(snap_has_process(s, (uint32_t)prod, "churn"));
	assert_true(snap_has_thread(s, (uint32_t)prod, sn->trigger_tid, "trigger-thread"));
	key = snap_string(s, "i");
	assert_true(key > 0);
	/* every span of the millisecond before the trigger, as the ring
	 * still holds them, is in the snapshot, once (none, when the
	 * producer was descheduled for that millisecond) */
	print_message("%llu spans of the window checked against the ring\n",
		      (unsigned long long)check_against_ring(ring, s, (uint32_t)prod,
							     trig_ts - KEEP_NS, trig_ts, key));
	assert_int_equal(write(in[1], "g", 1), 1);
	close(in[1]);
	close(out[0]);
	assert_int_equal(waitpid(prod, &status, 0), prod);
	exited_0(status);
	exited_0(stop_flight(col, SIGTERM));
	expect_in(tmp("t1.err"), "1 snapshot in");
	snap_free(s);
	free(s);
	close(w);
	shmtrace_ring_unlink(ring);
}

/* The number in text after what ("..., 12 of them after"), or -1. */
static long number_before(const char *text, const char *what)
{
	const char *p = strstr(text, what);

	if (!p)
		return -1;
	while (p > text && p[-1] == ' ')
		p--;
	while (p > text && p[-1] >= '0' && p[-1] <= '9')
		p--;
	return strtol(p, NULL, 10);
}

/*
 * A thousand triggers at once, --max-per-hour 3: at most 3 snapshots,
 * and every trigger either answered by one or counted as not answered, in
 * the next snapshot or, after the last, in the summary line.
 */
static void test_storm_writes_at_most_the_limit_and_counts_the_rest(void **state)
{
	const char *ring = test_ring_name("storm");
	const char *const extra[] = { "--max-per-hour", "3", NULL };
	char paths[8][512], *err;
	uint64_t total = 0;
	int status, n, w;
	pid_t col, prod;

	(void)state;
	col = flight_into(ring, "t2", &w, extra);
	prod = fork();
	assert_true(prod >= 0);
	if (prod == 0) {
		shmtrace_t *t;

		if (shmtrace_open(ring, &t) < 0)
			_exit(3);
		for (int i = 0; i < 1000; i++)
			if (shmtrace_trigger(t, "storm", 0) < 0)
				_exit(4);
		shmtrace_close(t);
		_exit(0);
	}
	assert_int_equal(waitpid(prod, &status, 0), prod);
	exited_0(status);
	exited_0(stop_flight(col, SIGTERM));
	n = snapshots_in(tmp("t2"), paths, 8);
	assert_true(n >= 1 && n <= 3);
	for (int i = 0; i < n; i++) {
		struct snap_file *s = calloc(1, sizeof(*s));

		snap_read(paths[i], s);
		total += s->h.snapshot.triggers + s->h.snapshot.suppressed;
		snap_free(s);
		free(s);
	}
	err = slurp(tmp("t2.err"));
	assert_true(number_before(err, "of them after the last snapshot") >= 0);
	total += (uint64_t)number_before(err, "of them after the last snapshot");
	assert_int_equal(total, 1000);
	free(err);
	close(w);
	shmtrace_ring_unlink(ring);
}

/*
 * A recorder started again on a ring that holds the trigger an earlier
 * one answered: its snapshot's trigger is the one that asked for it, not
 * the earlier one, which the ring still holds (the recorder took its
 * trigger records from 0 on).
 */
static void test_recorder_started_again_answers_its_own_trigger(void **state)
{
	const char *ring = test_ring_name("again");
	char paths[8][512], first[512] = "";
	struct snap_file *s = calloc(1, sizeof(*s));
	int w, n;
	pid_t col;
	shmtrace_t *t;

	(void)state;
	col = flight_into(ring, "t10", &w, NULL);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	assert_int_equal(shmtrace_trigger(t, "first", 0), 0);
	wait_snapshots(tmp("t10"), w, 1);
	exited_0(stop_flight(col, SIGTERM));
	assert_int_equal(snapshots_in(tmp("t10"), paths, 8), 1);
	snprintf(first, sizeof(first), "%s", paths[0]);
	/* the same ring, adopted */
	col = start_flight(ring, tmp("t10"), tmp("t10.err"), NULL);
	assert_int_equal(shmtrace_trigger(t, "second", 0), 0);
	wait_snapshots(tmp("t10"), w, 2);
	exited_0(stop_flight(col, SIGTERM));
	n = snapshots_in(tmp("t10"), paths, 8);
	assert_int_equal(n, 2);
	snap_read(strcmp(paths[0], first) ? paths[0] : paths[1], s);
	assert_string_equal(s->h.snapshot.trigger, "second");
	snap_free(s);
	free(s);
	shmtrace_close(t);
	close(w);
	shmtrace_ring_unlink(ring);
}

/*
 * A snapshot directory that refuses every file (removed after the
 * recorder started), a thousand triggers, --after 0 and --max-per-hour 3:
 * at most 3 attempts, each a copy of the whole ring, whether written or
 * not; every trigger counted, in the attempts that failed or as not
 * answered for --max-per-hour, in the summary line.
 */
static void test_snapshots_not_written_count_against_the_limit_and_their_triggers(void **state)
{
	const char *ring = test_ring_name("nodir");
	const char *const extra[] = { "--max-per-hour", "3", "--after", "0", NULL };
	uint64_t total;
	char *err;
	int status, w;
	pid_t col, prod;

	(void)state;
	col = flight_into(ring, "t9", &w, extra);
	close(w);
	assert_int_equal(rmdir(tmp("t9")), 0);
	prod = fork();
	assert_true(prod >= 0);
	if (prod == 0) {
		shmtrace_t *t;

		if (shmtrace_open(ring, &t) < 0)
			_exit(3);
		for (int i = 0; i < 1000; i++)
			if (shmtrace_trigger(t, "nodir", 0) < 0)
				_exit(4);
		shmtrace_close(t);
		_exit(0);
	}
	assert_int_equal(waitpid(prod, &status, 0), prod);
	exited_0(status);
	/* snapshots not written: exit status 1 */
	status = stop_flight(col, SIGTERM);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	err = slurp(tmp("t9.err"));
	assert_true(number_before(err, "snapshots not written") >= 1);
	assert_true(number_before(err, "snapshots not written") <= 3);
	total = (uint64_t)number_before(err, "requests not answered for") +
		(uint64_t)number_before(err, "triggers they asked for)");
	if (total != 1000)
		fail_msg("%llu of 1000 triggers counted: %s", (unsigned long long)total, err);
	free(err);
	shmtrace_ring_unlink(ring);
}

/*
 * A producer killed inside two spans, after two steps of a flow: the
 * recorder finds it dead, records its open spans and takes a snapshot
 * ("death"), whose export shows them unfinished, and the flow.
 */
static void test_death_inside_spans_snapshots_them_unfinished(void **state)
{
	const char *ring = test_ring_name("death");
	char *argv[] = { bin, "export", NULL, "-o", (char *)tmp("death.json"), NULL };
	char paths[8][512], c;
	struct snap_file *s = calloc(1, sizeof(*s));
	int p[2], w, status, open_named = 0;
	pid_t col, prod;

	(void)state;
	col = flight_into(ring, "t3", &w, NULL);
	assert_int_equal(pipe(p), 0);
	prod = fork();
	assert_true(prod >= 0);
	if (prod == 0) {
		struct shmtrace_open_span outer, inner;
		shmtrace_t *t;
		uint64_t f, t0;
		uint32_t cat;

		if (shmtrace_open(ring, &t) < 0)
			_exit(3);
		shmtrace_set_process_name(t, "doomed");
		cat = shmtrace_intern(t, "rpc");
		f = shmtrace_flow_new(t);
		t0 = shmtrace_now();
		shmtrace_span(t, cat, shmtrace_intern(t, "send"), t0, t0 + 1000, f);
		shmtrace_span(t, cat, shmtrace_intern(t, "handle"), t0 + 2000, t0 + 3000, f);
		shmtrace_begin(t, &outer, cat, shmtrace_intern(t, "outer"), 0);
		shmtrace_begin(t, &inner, cat, shmtrace_intern(t, "inner"), 0);
		if (write(p[1], "r", 1) != 1)
			_exit(4);
		pause();
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	assert_int_equal(kill(prod, SIGKILL), 0);
	assert_int_equal(waitpid(prod, &status, 0), prod);
	wait_snapshots(tmp("t3"), w, 1);
	assert_int_equal(snapshots_in(tmp("t3"), paths, 8), 1);
	snap_read(paths[0], s);
	assert_int_equal(s->h.snapshot.cause, SHMT_SNAP_DEATH);
	assert_int_equal(s->h.snapshot.trigger_pid, (uint32_t)prod);
	assert_non_null(strstr(s->h.snapshot.trigger, "(doomed)"));
	for (size_t i = 0; i < s->n; i++)
		if (s->r[i].commit == SHMTRACE_KIND_OPEN && s->r[i].pid == (uint32_t)prod)
			open_named |= s->r[i].name == snap_string(s, "outer") ? 1 :
				      s->r[i].name == snap_string(s, "inner") ? 2 : 0;
	assert_int_equal(open_named, 3);
	argv[2] = paths[0];
	assert_int_equal(run(NULL, tmp("death.err"), argv), 0);
	expect_in(tmp("death.json"), "\"name\":\"outer\",\"args\":{\"unfinished\":true}");
	expect_in(tmp("death.json"), "\"name\":\"inner\",\"args\":{\"unfinished\":true}");
	expect_in(tmp("death.json"), "\"ph\":\"s\"");
	expect_in(tmp("death.json"), "\"ph\":\"f\"");
	expect_in(tmp("death.json"), "\"cause\":\"death\"");
	exited_0(stop_flight(col, SIGTERM));
	snap_free(s);
	free(s);
	close(w);
	close(p[0]);
	shmtrace_ring_unlink(ring);
}

/* SIGUSR1: a snapshot now, cause "signal". */
static void test_sigusr1_takes_a_snapshot(void **state)
{
	const char *ring = test_ring_name("usr1");
	struct snap_file *s = calloc(1, sizeof(*s));
	char paths[8][512];
	shmtrace_t *t;
	pid_t col;
	int w;

	(void)state;
	col = flight_into(ring, "t4", &w, NULL);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	assert_int_equal(shmtrace_instant(t, shmtrace_intern(t, "test"), shmtrace_intern(t, "mark"),
					  0), 0);
	assert_int_equal(kill(col, SIGUSR1), 0);
	wait_snapshots(tmp("t4"), w, 1);
	assert_int_equal(snapshots_in(tmp("t4"), paths, 8), 1);
	snap_read(paths[0], s);
	assert_int_equal(s->h.snapshot.cause, SHMT_SNAP_SIGNAL);
	assert_int_equal(s->n, 1);
	assert_int_equal(s->r[0].name, snap_string(s, "mark"));
	exited_0(stop_flight(col, SIGTERM));
	expect_in(tmp("t4.err"), "1 snapshot in");
	shmtrace_close(t);
	snap_free(s);
	free(s);
	close(w);
	shmtrace_ring_unlink(ring);
}

/*
 * The header's trigger count forged to its top by a peer: the recorder
 * takes that for triggers (it cannot tell), and the next
 * shmtrace_trigger(), which wraps the count to 0, still gets its own
 * snapshot, named by its cause: a count below the one seen is news too.
 */
static void test_trigger_count_forged_to_the_top_leaves_triggers_heard(void **state)
{
	const char *ring = test_ring_name("fltforge");
	struct snap_file *s = calloc(1, sizeof(*s));
	char paths[8][512];
	struct shmt_view v;
	shmtrace_t *t;
	pid_t col;
	int w, n, ones = 0, forged = 0;

	(void)state;
	col = flight_into(ring, "t7", &w, NULL);
	ring_view_rw(ring, &v);
	store_relaxed(&v.h->triggers.v, UINT64_MAX);
	wait_snapshots(tmp("t7"), w, 1);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	assert_int_equal(shmtrace_trigger(t, "after-forgery", 0), 0);
	assert_int_equal(load_relaxed(&v.h->triggers.v), 0);
	wait_snapshots(tmp("t7"), w, 2);
	n = snapshots_in(tmp("t7"), paths, 8);
	assert_int_equal(n, 2);
	for (int i = 0; i < n; i++) {
		snap_read(paths[i], s);
		assert_int_equal(s->h.snapshot.cause, SHMT_SNAP_TRIGGER);
		/* the forged jump counts what the ring says; the wrap, one */
		ones += s->h.snapshot.triggers == 1;
		forged += s->h.snapshot.triggers == UINT64_MAX;
		snap_free(s);
	}
	assert_int_equal(ones, 1);
	assert_int_equal(forged, 1);
	exited_0(stop_flight(col, SIGTERM));
	expect_in(tmp("t7.err"), "2 snapshots in");
	shmtrace_close(t);
	shmt_view_close(&v);
	free(s);
	close(w);
	shmtrace_ring_unlink(ring);
}

/* A peer truncates the ring to nothing while the recorder waits on it:
 * it says so and exits 1, never killed by SIGBUS. */
static void test_ring_truncated_under_the_recorder(void **state)
{
	const char *ring = test_ring_name("flttrunc");
	char path[256];
	int w, status;
	pid_t col;

	(void)state;
	col = flight_into(ring, "t8", &w, NULL);
	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	assert_int_equal(truncate(path, 0), 0);
	status = stop_flight(col, SIGTERM);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	expect_in(tmp("t8.err"), "truncated under us");
	close(w);
	shmtrace_ring_unlink(ring);
}

/* Spans "blk" from one thread of a handle on ring: n of them. */
static void write_spans(const char *ring, unsigned n)
{
	shmtrace_t *t;
	uint32_t c, nm;

	assert_int_equal(shmtrace_open(ring, &t), 0);
	c = shmtrace_intern(t, "test");
	nm = shmtrace_intern(t, "blk");
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(shmtrace_span(t, c, nm, 1000 + i, 1001 + i, 0), 0);
	shmtrace_close(t);
}

/* The blocks claimed in ring so far (its header's claim_seq). */
static uint64_t claims_in(const char *ring)
{
	struct shmt_view v;
	uint64_t n;

	ring_view_rw(ring, &v);
	n = load_relaxed(&v.h->claim_seq.v);
	shmt_view_close(&v);
	return n;
}

/*
 * A recorder holding an overwrite ring takes its producers' full blocks:
 * a thread that writes four blocks' worth hands three over and goes on
 * in free ones (four claims at least; more if the recorder asks for a
 * moving block), and the snapshot holds every record once. In the same
 * ring with nobody holding it, the thread copies into the ring under the
 * lock instead and keeps its one block.
 */
static void test_producers_hand_full_blocks_to_the_recorder(void **state)
{
	const char *ring = test_ring_name("flthand"), *alone = test_ring_name("fltalone");
	struct snap_file *s = calloc(1, sizeof(*s));
	struct shmtrace_ring_config cfg;
	char paths[8][512];
	unsigned per_block = 262144 / 256, n = 4 * per_block;
	pid_t col;
	int w;

	(void)state;
	col = flight_into(ring, "t6", &w, NULL);
	write_spans(ring, n);
	assert_true(claims_in(ring) >= 4);
	assert_int_equal(kill(col, SIGUSR1), 0);
	wait_snapshots(tmp("t6"), w, 1);
	assert_int_equal(snapshots_in(tmp("t6"), paths, 8), 1);
	snap_read(paths[0], s);
	assert_int_equal(s->n, n);
	assert_int_equal(s->h.snapshot.overwritten, 0);
	exited_0(stop_flight(col, SIGTERM));

	small_cfg(&cfg, 262144, SHMTRACE_MODE_OVERWRITE);
	shmtrace_ring_unlink(alone);
	assert_true(shmtrace_ring_create(alone, &cfg) >= 0);
	write_spans(alone, n);
	assert_int_equal(claims_in(alone), 1);
	snap_free(s);
	free(s);
	close(w);
	shmtrace_ring_unlink(ring);
	shmtrace_ring_unlink(alone);
}

/* What is no flight recorder's: said in one line, and the exit status. */
static void test_refuses_what_is_no_flight_recorders(void **state)
{
	const char *ring = test_ring_name("fltbad");
	char *discard[] = { collector_bin, "--ring", (char *)ring, "--flight-recorder",
			    "--snapshot-dir", (char *)tmpdir, NULL };
	char *with_output[] = { collector_bin, "--ring", (char *)ring, "--flight-recorder",
				"--snapshot-dir", (char *)tmpdir, "--output", (char *)tmp("x.cap"),
				NULL };
	char *no_dir[] = { collector_bin, "--ring", (char *)ring, "--flight-recorder", NULL };
	char *bad_dir[] = { collector_bin, "--ring", (char *)ring, "--flight-recorder",
			    "--snapshot-dir", (char *)tmp("nowhere"), NULL };
	char *create_discard[] = { collector_bin, "--ring", (char *)ring, "--create",
				   "--flight-recorder", "--snapshot-dir", (char *)tmpdir, NULL };
	char *keep_alone[] = { collector_bin, "--ring", (char *)ring, "--output",
			       (char *)tmp("x.cap"), "--keep", "1s", NULL };
	char *bad_keep[] = { collector_bin, "--ring", (char *)ring, "--flight-recorder",
			     "--snapshot-dir", (char *)tmpdir, "--keep", "0", NULL };
	char *bad_rate[] = { collector_bin, "--ring", (char *)ring, "--flight-recorder",
			     "--snapshot-dir", (char *)tmpdir, "--max-per-hour", "0", NULL };
	char *engine[] = { collector_bin, "--ring", (char *)ring, "--flight-recorder",
			   "--snapshot-dir", (char *)tmpdir, "--write-engine=pwrite", NULL };
	struct shmtrace_ring_config cfg;

	(void)state;
	small_cfg(&cfg, 4096, SHMTRACE_MODE_DISCARD);
	shmtrace_ring_unlink(ring);
	assert_true(shmtrace_ring_create(ring, &cfg) >= 0);
	run_says(1, discard, "is in discard mode", NULL);
	run_says(2, with_output, "give no --output", NULL);
	run_says(2, no_dir, "needs --snapshot-dir", NULL);
	run_says(2, bad_dir, "No such file or directory", NULL);
	run_says(2, create_discard, "--mode overwrite", NULL);
	run_says(2, keep_alone, "need --flight-recorder", NULL);
	run_says(2, bad_keep, "invalid duration '0' for --keep", NULL);
	run_says(2, bad_rate, "--max-per-hour", NULL);
	run_says(2, engine, "--flight-recorder writes none", NULL);
	shmtrace_ring_unlink(ring);
}

/*
 * A --snapshot-dir the collector may not write into (mode 0555; as root,
 * which may write anywhere, the collector runs as nobody) is refused as it
 * starts, in one line and exit status 2, not found out at the first
 * trigger, when the snapshot it was there to keep is lost: it says it
 * holds no ring (the ready pipe ends unwritten), makes none, and the
 * folder stays empty.
 */
static void test_snapshot_dir_it_may_not_write_into_is_refused_at_start(void **state)
{
	const char *ring = test_ring_name("fltro");
	const uid_t nobody = 65534;
	char dir[] = "/tmp/shmt-fltro-XXXXXX", errp[600], want[700], fd[16], buf[16], paths[8][512],
	     err[256];
	struct shmt_view v;
	int p[2], status;
	ssize_t n;
	pid_t col;
	char *said;

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0555), 0);
	snprintf(errp, sizeof(errp), "%s", tmp("fltro.err"));
	assert_int_equal(pipe(p), 0);
	col = fork();
	assert_true(col >= 0);
	if (col == 0) {
		int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		close(p[0]);
		if (fe < 0 || dup2(fe, 2) < 0)
			_exit(126);
		if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setgid(nobody) < 0 ||
				       setuid(nobody) < 0))
			_exit(126);
		/* after setuid(), which clears it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		execl(collector_bin, "shmtrace-collector", "--ring", ring, "--create", "--mode",
		      "overwrite", "--flight-recorder", "--snapshot-dir", dir, "--ready-fd", fd,
		      (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	/* the collector's end closes when it exits; "ready" if it started */
	n = read(p[0], buf, sizeof(buf));
	close(p[0]);
	if (n > 0)
		kill(col, SIGTERM);
	assert_int_equal(waitpid(col, &status, 0), col);
	said = slurp(errp);
	snprintf(want, sizeof(want), "shmtrace-collector: --snapshot-dir '%s': %s\n"
		 "Try 'shmtrace-collector --help'.\n", dir, strerror(EACCES));
	assert_string_equal(said, want);
	free(said);
	assert_int_equal(n, 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 2);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), -ENOENT);
	assert_int_equal(snapshots_in(dir, paths, 8), 0);
	assert_int_equal(rmdir(dir), 0);
	shmtrace_ring_unlink(ring);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("flight", true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trigger_snapshot_holds_the_keep_before_it),
		cmocka_unit_test(test_storm_writes_at_most_the_limit_and_counts_the_rest),
		cmocka_unit_test(test_snapshots_not_written_count_against_the_limit_and_their_triggers),
		cmocka_unit_test(test_recorder_started_again_answers_its_own_trigger),
		cmocka_unit_test(test_death_inside_spans_snapshots_them_unfinished),
		cmocka_unit_test(test_sigusr1_takes_a_snapshot),
		cmocka_unit_test(test_producers_hand_full_blocks_to_the_recorder),
		cmocka_unit_test(test_trigger_count_forged_to_the_top_leaves_triggers_heard),
		cmocka_unit_test(test_refuses_what_is_no_flight_recorders),
		cmocka_unit_test(test_snapshot_dir_it_may_not_write_into_is_refused_at_start),
		cmocka_unit_test(test_ring_truncated_under_the_recorder),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
