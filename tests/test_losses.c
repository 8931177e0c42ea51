/* SPDX-License-Identifier: MIT */
/*
 * test_losses.c - each record lost is counted once, under its cause: a
 * producer stopped (SIGSTOP) inside the ring lock while two others write
 * with a short lock timeout. What they cannot flush is counted in
 * `lock_dropped` only, never in `dropped` (the ring is never full), and the
 * export says so once, in the same words in its metadata, its instants,
 * its warnings and its SVG, with lock timeouts shown as attempts, never as
 * records: exported + dropped + overwritten + lock_dropped + torn = written.
 */
#include "cli_run.h"

#define PRODUCERS	2
#define PER		1000u	/* records each producer writes */

/*
 * Writes its first span (claiming its staging block while the lock is
 * free), says so on ready, writes the other PER - 1 once start says the
 * lock is held, says so on done, and closes its handle (flushing what it
 * staged) only once go says the lock is free again.
 */
static void produce(const char *name, const int p[4])
{
	shmtrace_t *t;
	char c;

	if (shmtrace_open(name, &t) < 0)
		_exit(3);
	for (uint64_t i = 0; i < PER; i++) {
		int ret;

		if (i == 1 && (write(p[0], "r", 1) != 1 || read(p[1], &c, 1) != 1))
			_exit(4);
		ret = shmtrace_span(t, 1, 2, i + 1, i + 2, 0);
		if (ret != 0 && ret != -ETIMEDOUT && ret != -EBUSY)
			_exit(5);
	}
	if (write(p[2], "d", 1) != 1 || read(p[3], &c, 1) != 1)
		_exit(6);
	shmtrace_close(t);
	_exit(0);
}

/* The number after key in the JSON text s. */
static uint64_t json_u64(const char *s, const char *key)
{
	const char *p = strstr(s, key);

	assert_non_null(p);
	return strtoull(p + strlen(key), NULL, 10);
}

/* The pipes between the test, the lock owner and the producers. */
struct loss_pipes {
	int ready[2], start[2], done[2], go[2];
};

/* Creates ring name with the strings "losses" (1) and "span" (2). */
static void create_ring(const char *name)
{
	const struct shmtrace_ring_config cfg = { .capacity = 16384 };
	shmtrace_t *t;

	assert_int_equal(shmtrace_ring_create(name, &cfg), 0);
	assert_int_equal(shmtrace_open(name, &t), 0);
	assert_int_equal(shmtrace_intern(t, "losses"), 1);
	assert_int_equal(shmtrace_intern(t, "span"), 2);
	shmtrace_close(t);
}

static void open_pipes(struct loss_pipes *pp)
{
	assert_int_equal(pipe(pp->ready), 0);
	assert_int_equal(pipe(pp->start), 0);
	assert_int_equal(pipe(pp->done), 0);
	assert_int_equal(pipe(pp->go), 0);
}

static void close_pipes(struct loss_pipes *pp)
{
	for (int i = 0; i < 2; i++) {
		close(pp->ready[i]);
		close(pp->start[i]);
		close(pp->done[i]);
		close(pp->go[i]);
	}
}

/* Forks the producers (with a short lock timeout); returns once each has
 * written its first span. */
static void start_producers(const char *name, const struct loss_pipes *pp, pid_t *prod)
{
	char c;

	setenv("SHMTRACE_LOCK_TIMEOUT_MS", "20", 1);
	for (int i = 0; i < PRODUCERS; i++) {
		prod[i] = fork();
		assert_true(prod[i] >= 0);
		if (prod[i] == 0)
			produce(name, (int[4]){ pp->ready[1], pp->start[0], pp->done[1], pp->go[0] });
	}
	unsetenv("SHMTRACE_LOCK_TIMEOUT_MS");
	for (int i = 0; i < PRODUCERS; i++)
		assert_int_equal(read(pp->ready[0], &c, 1), 1);
}

/* The producers write while the owner is stopped; then the owner goes on
 * and lets go, and the producers flush, close and exit. */
static void write_past_stopped_owner(const struct loss_pipes *pp, pid_t owner, const pid_t *prod)
{
	int status;
	char c;

	/* the others write, and wait for the lock in vain */
	for (int i = 0; i < PRODUCERS; i++)
		assert_int_equal(write(pp->start[1], "s", 1), 1);
	for (int i = 0; i < PRODUCERS; i++)
		assert_int_equal(read(pp->done[0], &c, 1), 1);

	/* the owner goes on and lets go; the producers flush and close */
	assert_int_equal(kill(owner, SIGCONT), 0);
	assert_int_equal(waitpid(owner, &status, 0), owner);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int i = 0; i < PRODUCERS; i++)
		assert_int_equal(write(pp->go[1], "g", 1), 1);
	for (int i = 0; i < PRODUCERS; i++) {
		assert_int_equal(waitpid(prod[i], &status, 0), prod[i]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
}

/* the ring: lost to the lock, counted once, and not as ring full */
static void check_ring_loss(const char *name, uint64_t written, struct shmt_loss *l)
{
	ring_loss(name, l);
	print_message("written %llu, lock_dropped %llu, dropped %llu, lock_timeouts %llu\n",
		      (unsigned long long)written, (unsigned long long)l->lock_dropped,
		      (unsigned long long)l->dropped, (unsigned long long)l->lock_timeouts);
	assert_true(l->lock_dropped > 0);
	assert_int_equal(l->dropped, 0);
	assert_int_equal(l->overwritten, 0);
	assert_int_equal(l->torn, 0);
	assert_true(l->lock_timeouts > 0);
	assert_int_equal(shmt_loss_records(l), l->lock_dropped);
}

/* the export: its metadata, its instants and its warnings; returns the
 * number of records exported */
static uint64_t check_export(const char *name, uint64_t written, const struct shmt_loss *l)
{
	char *json, *err, what[128];
	uint64_t exported;

	assert_int_equal(export_ring(name, tmp("t.json"), tmp("t.err")), 0);
	json = slurp(tmp("t.json"));
	err = slurp(tmp("t.err"));
	exported = json_u64(json, "\"records\":");
	assert_int_equal(json_u64(json, "\"lock_dropped\":"), l->lock_dropped);
	assert_int_equal(json_u64(json, "\"dropped\":"), 0);
	assert_int_equal(json_u64(json, "\"records_lost\":"), l->lock_dropped);
	assert_int_equal(json_u64(json, "\"lock_timeouts\":"), l->lock_timeouts);
	assert_int_equal(exported + l->dropped + l->overwritten + l->lock_dropped + l->torn, written);
	snprintf(what, sizeof(what), "shmtrace: %llu records lost to lock timeouts",
		 (unsigned long long)l->lock_dropped);
	assert_int_equal(count(json, what), 1);
	assert_int_equal(count(json, "records dropped (ring full)"), 0);
	snprintf(what, sizeof(what), "%llu records were lost: %llu records lost to lock timeouts\n",
		 (unsigned long long)l->lock_dropped, (unsigned long long)l->lock_dropped);
	if (count(err, what) != 1)
		fprintf(stderr, "%s", err);
	assert_int_equal(count(err, what), 1);
	assert_int_equal(count(err, "lost to lock timeouts"), 1);
	snprintf(what, sizeof(what), "%llu lock timeouts (attempts, not records)\n",
		 (unsigned long long)l->lock_timeouts);
	assert_int_equal(count(err, what), 1);
	free(json);
	free(err);
	return exported;
}

/* the picture: the records lost, not the lock timeouts added to them */
static void check_svg(const char *name, const struct shmt_loss *l)
{
	char *argv[] = { bin, "svg", "--ring", (char *)name, "-o", (char *)tmp("t.svg"), NULL };
	char *svg, what[128];

	assert_int_equal(run(NULL, tmp("s.err"), argv), 0);
	svg = slurp(tmp("t.svg"));
	snprintf(what, sizeof(what), ", %llu records lost<", (unsigned long long)l->lock_dropped);
	assert_int_equal(count(svg, what), 1);
	free(svg);
}

static void test_stopped_lock_owner(void **state)
{
	const char *name = test_ring_name("stopped");
	const uint64_t written = (uint64_t)PRODUCERS * PER;
	struct loss_pipes pp;
	pid_t owner, prod[PRODUCERS];
	struct shmt_loss l;
	uint64_t exported;

	(void)state;
	create_ring(name);
	open_pipes(&pp);
	start_producers(name, &pp, prod);
	owner = ring_lock_by_stopped_owner(name);
	write_past_stopped_owner(&pp, owner, prod);
	close_pipes(&pp);

	check_ring_loss(name, written, &l);
	exported = check_export(name, written, &l);
	check_svg(name, &l);

	figure_acct("records dropped after lock timeouts, counted once", 1, written, exported,
		    l.dropped + l.overwritten + l.lock_dropped, l.torn,
		    written - exported - l.dropped - l.overwritten - l.lock_dropped - l.torn,
		    "owner SIGSTOPped in the lock; lock_dropped only");
	shmtrace_ring_unlink(name);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("losses", false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stopped_lock_owner),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
