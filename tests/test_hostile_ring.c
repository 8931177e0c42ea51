/* SPDX-License-Identifier: MIT */
/*
 * test_hostile_ring.c - another local user against the ring: a FIFO planted
 * where a ring is looked for, bytes of the mutex forged by any writer of
 * the ring, the mutex's robust-list links pointed elsewhere while a
 * producer holds it (its kind too), the journal a dead owner's repair
 * reads, a group member against a ring shared with its
 * group, more threads than staging blocks.
 * Each case prints a FIGURE row for the fault table of `make test`.
 */
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <sys/mman.h>

#include "hostile_run.h"

/*
 * A FIFO where a ring is looked for (any user may make one in /dev/shm):
 * every command that opens a ring by name says it is not a ring and exits
 * 1 at once, and a producer's open fails with a clear error; nothing
 * blocks in open(). A directory under the name likewise.
 */
static void planted_not_a_ring(const char *ring, const char *path, int *refused)
{
	const char *cmds[][6] = {	/* "OUT": an output file */
		{ "stat", ring, NULL },
		{ "export", "--ring", ring, "-o", "OUT", NULL },
		{ "summary", "--ring", ring, NULL },
		{ "svg", "--ring", ring, "-o", "OUT", NULL },
		{ "rm", ring, NULL },
		{ "COL", "--ring", ring, "-o", "OUT", NULL },
	};
	struct stat st;
	shmtrace_t *t;
	int status;
	pid_t kid;

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char *argv[8] = { strcmp(cmds[i][0], "COL") ? bin : collector_bin };
		int n = 1;

		for (int k = strcmp(cmds[i][0], "COL") ? 0 : 1; k < 6 && cmds[i][k]; k++)
			argv[n++] = (char *)(strcmp(cmds[i][k], "OUT") ? cmds[i][k] : tmp("out"));
		argv[n] = NULL;
		assert_int_equal(run_guarded(NULL, tmp("fifo.err"), argv), 1);
		expect_in(tmp("fifo.err"), "not a regular file");
		(*refused)++;
	}
	/* rm refused it: the name is still there */
	assert_int_equal(lstat(path, &st), 0);
	/* a producer: in a child, so that a hang is caught by the guard */
	kid = fork();
	if (kid == 0) {
		int ret;

		alarm(GUARD_S);
		ret = shmtrace_open(ring, &t);
		_exit(ret == -ENODEV && strstr(shmtrace_strerror(ret), "not a shmtrace ring") &&
		      shmtrace_open_wait(ring, &t) == -ENODEV ? 0 : 1);
	}
	assert_int_equal(waitpid(kid, &status, 0), kid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	(*refused)++;
}

static void test_fifo_in_place_of_a_ring(void **state)
{
	const char *ring = test_ring_name("fifo");
	char path[256];
	int refused = 0;

	(void)state;
	snprintf(path, sizeof(path), "/dev/shm/%s", ring);
	unlink(path);
	assert_int_equal(mkfifo(path, 0666), 0);
	/* another user's, as it would be (root's tools open it anyway) */
	if (geteuid() == 0)
		assert_int_equal(chown(path, 65534, 65534), 0);
	planted_not_a_ring(ring, path, &refused);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkdir(path, 0777), 0);
	planted_not_a_ring(ring, path, &refused);
	assert_int_equal(rmdir(path), 0);
	figure("a FIFO (or a directory) planted where a ring is looked for", (uint64_t)refused, 0,
	       0, 0, 0, 0, "stat, export, summary, svg, rm, collector: 'not a regular file', "
	       "exit 1; producer -ENODEV");
}

/* The exit status of child kid, or 128 + the signal that killed it. */
static int exit_of(pid_t kid)
{
	int status;

	assert_int_equal(waitpid(kid, &status, 0), kid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Ring name made anew, 4096 records, and a read-write view of it. */
static void fresh_ring(const char *ring, struct shmt_view *v)
{
	struct shmtrace_ring_config c = { .capacity = 4096 };
	char err[256];

	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_WRITE, v, err, sizeof(err)), 0);
}

/*
 * Garbage in the mutex bytes, as any writer of the ring can leave them
 * (the kind field says robust-less, the lock word held): a producer
 * neither aborts in glibc nor hangs; its records are dropped and counted.
 */
static void test_producer_survives_forged_mutex(void **state)
{
	const char *ring = test_ring_name("mutex");
	struct shmt_view v;
	struct shmt_loss l;
	struct ring_dump d;
	pid_t kid;
	int rc;

	(void)state;
	fresh_ring(ring, &v);
	/* glibc's __lock at +0 and __kind at +16 of the mutex */
	*(volatile uint32_t *)((char *)&v.h->mutex + 0) = 0x40000001u;
	*(volatile uint32_t *)((char *)&v.h->mutex + 16) = 0x20u;
	kid = fork();
	if (kid == 0) {
		shmtrace_t *t;

		alarm(GUARD_S);
		setenv("SHMTRACE_LOCK_TIMEOUT_MS", "20", 1);
		if (shmtrace_open(ring, &t) < 0)
			_exit(3);
		for (int i = 0; i < 1000; i++)
			shmtrace_span(t, 1, 1, 1, 2, 0);
		shmtrace_close(t);
		_exit(0);
	}
	rc = exit_of(kid);
	if (rc > 128)
		fprintf(stderr, "producer killed by signal %d\n", rc - 128);
	assert_int_equal(rc, 0);
	ring_dump_view(&v, &d);
	shmt_loss_read(&v, &l, true);
	assert_int_equal(d.n + shmt_loss_records(&l), 1000);
	figure_acct("garbage in the mutex, seen by a producer", 1, 1000, d.n, shmt_loss_records(&l),
		    0, 1000 - d.n - shmt_loss_records(&l), "no abort, no hang: dropped and counted");
	free(d.recs);
	shmt_view_close(&v);
	shmtrace_ring_unlink(ring);
}

/* The ring's mutex as another process maps it, for forge_links(). */
static pthread_mutex_t *g_forged_mutex;

/* At a holder's unlock, once: its robust-list links pointed at pages no
 * process maps, as a writer of the ring may while another holds it. */
static void forge_links(const char *where)
{
	static bool done;

	if (done || strcmp(where, "unlock") != 0)
		return;
	done = true;
	g_forged_mutex->__data.__list.__next = (void *)0x1000;
	g_forged_mutex->__data.__list.__prev = (void *)0x2000;
}

/*
 * The mutex's robust-list links (glibc unlinks a robust mutex from its
 * holder's list by writing through them) pointed at other memory by a
 * writer of the ring while a producer holds the lock: the producer puts
 * them back before it unlocks, so it writes nowhere else, lives, and
 * every record is in the ring; the lock is free for the next.
 */
static void test_producer_holding_the_lock_survives_forged_list_links(void **state)
{
	const char *ring = test_ring_name("mutexlinks");
	struct shmt_view v;
	struct ring_dump d;
	pid_t kid;
	int rc;

	(void)state;
	fresh_ring(ring, &v);
	kid = fork();
	if (kid == 0) {
		shmtrace_t *t;

		alarm(GUARD_S);
		/* a fault kills the producer, not cmocka's handler in a copy */
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		g_forged_mutex = &v.h->mutex;
		shmt_test_hook = forge_links;
		if (shmtrace_open(ring, &t) < 0)
			_exit(3);
		for (int i = 0; i < 200; i++)
			if (shmtrace_span(t, 1, 1, 1000 + (uint64_t)i, 1001 + (uint64_t)i, 0) < 0)
				_exit(4);
		if (shmtrace_flush(t) < 0)
			_exit(5);
		shmtrace_close(t);
		_exit(0);
	}
	rc = exit_of(kid);
	if (rc > 128)
		fprintf(stderr, "producer killed by signal %d\n", rc - 128);
	assert_int_equal(rc, 0);
	ring_dump_view(&v, &d);
	assert_int_equal(d.n, 200);
	assert_int_equal(shmt_lock(&v, 1000000000ull), 0);
	shmt_unlock(&v);
	free(d.recs);
	shmt_view_close(&v);
	shmtrace_ring_unlink(ring);
}

/* A robust mutex's shape in memory the test shares with its child, for
 * forge_kind_and_links(); and its mutex in the ring. */
static pthread_mutex_t *g_decoy;

/* At a holder's unlock, once: the mutex's kind made one glibc is not given
 * (the holder leaves the lock held) and its robust-list link pointed at
 * the decoy, whose lock word holds the holder's tid. */
static void forge_kind_and_links(const char *where)
{
	static bool done;

	if (done || strcmp(where, "unlock") != 0)
		return;
	done = true;
	*(volatile uint32_t *)((char *)g_forged_mutex + 16) = 0x20u;	/* __kind */
	/* a link is the address of the next mutex's __next (glibc's list) */
	g_forged_mutex->__data.__list.__next = (void *)&g_decoy->__data.__list.__next;
}

/*
 * A writer of the ring forges the mutex's kind and its robust-list links
 * while a producer holds it: the producer leaves the lock held (glibc is
 * not given bytes it could abort on), so the mutex stays on the thread's
 * robust list, which the kernel walks when the thread exits, marking as
 * its owner dead each lock word that holds the thread's tid along the
 * links. Put back as glibc set them, they lead to the ring's mutex alone:
 * the decoy a forged link pointed at, a word of the producer's holding
 * its tid, is left as it was.
 */
static void test_producer_left_holding_a_forged_lock_exits_through_its_own_links(void **state)
{
	const char *ring = test_ring_name("mutexkind");
	struct shmt_view v;
	uint32_t decoy_lock;
	pid_t kid;
	int rc;

	(void)state;
	fresh_ring(ring, &v);
	g_decoy = mmap(NULL, sizeof(*g_decoy), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	assert_true(g_decoy != MAP_FAILED);
	memset(g_decoy, 0, sizeof(*g_decoy));
	kid = fork();
	if (kid == 0) {
		shmtrace_t *t;

		alarm(GUARD_S);
		setenv("SHMTRACE_LOCK_TIMEOUT_MS", "20", 1);
		/* the decoy: the kernel's walk marks a word holding our tid,
		 * then stops at a link it cannot read */
		g_decoy->__data.__lock = getpid();
		g_decoy->__data.__list.__next = (void *)0x1000;
		if (shmtrace_open(ring, &t) < 0)
			_exit(3);
		/* the first unlock from here on: the thread's name's */
		g_forged_mutex = &v.h->mutex;
		shmt_test_hook = forge_kind_and_links;
		for (int i = 0; i < 200; i++)
			shmtrace_span(t, 1, 1, 1000 + (uint64_t)i, 1001 + (uint64_t)i, 0);
		/* exits with the ring mapped, the lock held: a close unmaps
		 * it, and the kernel's walk reads nothing unmapped */
		_exit(0);
	}
	rc = exit_of(kid);
	if (rc > 128)
		fprintf(stderr, "producer killed by signal %d\n", rc - 128);
	assert_int_equal(rc, 0);
	decoy_lock = (uint32_t)g_decoy->__data.__lock;
	/* the lock was left held and its owner died: the kernel said so in
	 * the ring's mutex, through the links glibc set */
	assert_true(v.h->mutex.__data.__lock & 0x40000000);
	assert_int_equal(decoy_lock, (uint32_t)kid);
	figure("mutex kind and links forged under a holder, which exits", 1, 0, 0, 0, 0, 0,
	       "lock left held; the kernel's walk at exit followed glibc's links");
	munmap(g_decoy, sizeof(*g_decoy));
	shmt_view_close(&v);
	shmtrace_ring_unlink(ring);
}

/* What shmt_repair() makes of the journal j, left active by an owner the
 * lock says died (the owner-died bit, no owner: one store any writer of
 * the ring can make), once the next holder takes the lock. */
static void repair_forged(struct shmt_view *v, const struct shmt_journal *j)
{
	struct shmt_journal *hj = &v->h->journal;

	hj->stage = j->stage;
	hj->block = j->block;
	hj->head_before = j->head_before;
	hj->taken_before = j->taken_before;
	hj->count = j->count;
	hj->consumed = j->consumed;
	hj->ndrop = 0;
	hj->in_place = j->in_place;
	hj->active = 1;
	v->h->mutex.__data.__lock = 0x40000000;
	assert_int_equal(shmt_lock(v, 1000000000ull), 0);
	assert_int_equal(hj->active, 0);
	shmt_unlock(v);
}

/*
 * A journal forged by a writer of the ring, then the lock's owner made to
 * look dead, so that the next holder repairs from it: it moves no word
 * past what the step it names could have. An undone flush never moves
 * head on; a finished one moves its block's taken on, never past written
 * (the owner's next records would fall behind taken, where nothing moves
 * them); a block sequenced in place takes one off full_blocks, never
 * below 0.
 */
static void test_forged_journal_moves_no_word_past_what_its_step_could(void **state)
{
	const char *ring = test_ring_name("journal");
	struct shmt_view v;
	struct shmt_block *b;
	uint64_t head;

	(void)state;
	fresh_ring(ring, &v);
	b = shmt_block_at(&v, 0);
	head = v.h->head.v;
	/* an undo (nothing of the flush published) to a head ahead */
	repair_forged(&v, &(struct shmt_journal){ .stage = 1, .head_before = head + 1000000,
						   .count = 5, .in_place = SHMT_JOURNAL_FLUSH });
	assert_int_equal(v.h->head.v, head);
	/* a finished flush of block 0 that would move taken far past written */
	repair_forged(&v, &(struct shmt_journal){ .stage = 2, .block = 0, .head_before = head,
						   .taken_before = 1ull << 40,
						   .in_place = SHMT_JOURNAL_FLUSH });
	assert_int_equal(b->taken, b->written);
	/* a block sequenced in place, with no block counted full */
	v.h->full_blocks.v = 0;
	repair_forged(&v, &(struct shmt_journal){ .stage = 2, .head_before = head,
						   .in_place = SHMT_JOURNAL_IN_PLACE });
	assert_int_equal(v.h->full_blocks.v, 0);
	figure("forged journal, repaired by the next holder", 3, 0, 0, 0, 0, 0,
	       "head, taken and full_blocks left where a flush could");
	shmt_view_close(&v);
	shmtrace_ring_unlink(ring);
}

/*
 * A ring shared with a group (mode 0660, the group the creator's, as
 * `shmtrace-collector --create --group` makes it): a member of the group,
 * another user, produces into root's ring and its records are there; a
 * user outside the group is refused. Users and group made here, removed
 * after; root only.
 */
#define GROUP_SPANS 100

/* In a child: becomes user name (its groups from /etc/group), opens ring
 * and writes GROUP_SPANS spans. Exits 0 if it wrote them all, 10 + the
 * open's -errno if refused, 2 if it could not become the user. */
static pid_t produce_as(const char *user, const char *ring)
{
	pid_t kid = fork();

	assert_true(kid >= 0);
	if (kid == 0) {
		struct passwd *pw = getpwnam(user);
		shmtrace_t *t;
		int ret;

		alarm(GUARD_S);
		if (!pw || initgroups(user, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 ||
		    setuid(pw->pw_uid) < 0 || geteuid() == 0)
			_exit(2);
		ret = shmtrace_open(ring, &t);
		if (ret < 0)
			_exit(10 + -ret < 255 ? 10 + -ret : 255);
		for (int i = 0; i < GROUP_SPANS; i++)
			if (shmtrace_span(t, 1, 1, 1000 + (uint64_t)i, 1001 + (uint64_t)i, 0) < 0)
				_exit(3);
		shmtrace_close(t);
		_exit(0);
	}
	return kid;
}

static void test_group_member_produces(void **state)
{
	const char *ring = test_ring_name("group");
	struct shmtrace_ring_config c = { .capacity = 4096, .perm = 0660 };
	char grp[32], member[32], other[32], cmd[256];
	int member_rc = -1, other_rc = -1, made;
	uint64_t mine = 0;
	struct shmt_view v;
	struct ring_dump d;
	struct group *gr;
	struct stat st;
	char err[256], path[256];
	pid_t kid = 0;

	(void)state;
	if (geteuid() != 0) {
		print_message("not root: cannot make a second user and group; skipped\n");
		skip();
	}
	snprintf(grp, sizeof(grp), "shtg%d", (int)getpid());
	snprintf(member, sizeof(member), "shtm%d", (int)getpid());
	snprintf(other, sizeof(other), "shto%d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "groupadd %s && useradd -M -N -s /usr/sbin/nologin -G %s %s && "
		 "useradd -M -N -s /usr/sbin/nologin %s", grp, grp, member, other);
	made = system(cmd);
	gr = made == 0 ? getgrnam(grp) : NULL;
	if (gr) {
		gid_t gid = gr->gr_gid;

		/* the ring's group is its creator's effective group */
		shmtrace_ring_unlink(ring);
		assert_int_equal(setegid(gid), 0);
		made = shmtrace_ring_create(ring, &c);
		assert_int_equal(setegid(0), 0);
		snprintf(path, sizeof(path), "/dev/shm/%s", ring);
		if (made == 0 && stat(path, &st) == 0 && st.st_gid == gid &&
		    (st.st_mode & 0777) == 0660) {
			kid = produce_as(member, ring);
			member_rc = exit_of(kid);
			other_rc = exit_of(produce_as(other, ring));
		}
	}
	/* the users and the group go before any assertion can stop the test */
	snprintf(cmd, sizeof(cmd), "userdel %s; userdel %s; groupdel %s", member, other, grp);
	if (system(cmd) != 0)
		print_message("could not remove users %s, %s and group %s\n", member, other, grp);
	if (!gr) {
		shmtrace_ring_unlink(ring);
		print_message("groupadd/useradd failed; skipped\n");
		skip();
	}
	print_message("member: exit %d, outsider: exit %d\n", member_rc, other_rc);
	assert_int_equal(member_rc, 0);
	/* open(O_RDWR) of a 0660 file not of its group: -EACCES */
	assert_int_equal(other_rc, 10 + EACCES);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	ring_dump_view(&v, &d);
	for (size_t i = 0; i < d.n; i++)
		mine += d.recs[i].pid == (uint32_t)kid;
	assert_int_equal(mine, GROUP_SPANS);
	figure_acct("a group member produces into root's --group ring", 2, GROUP_SPANS, mine, 0, 0,
		    GROUP_SPANS - mine, "member's records in the ring; outsider refused");
	free(d.recs);
	shmt_view_close(&v);
	shmtrace_ring_unlink(ring);
}

/* More threads than staging blocks, all at once and all alive until every
 * one has written (a thread that exits gives its block back): every call
 * returns (bounded by the lock timeout), and every thread's records and
 * name are in the ring or counted. */
#define NTHREADS 2000
static pthread_barrier_t g_start, g_written;
static shmtrace_t *g_t;
static int g_rets[NTHREADS];
static int g_returned;

static void *one_span(void *arg)
{
	int i = (int)(intptr_t)arg;

	pthread_barrier_wait(&g_start);
	g_rets[i] = shmtrace_span(g_t, 1, 1, 1000 + (uint64_t)i, 1001 + (uint64_t)i, 0);
	__atomic_fetch_add(&g_returned, 1, __ATOMIC_RELAXED);
	pthread_barrier_wait(&g_written);
	return NULL;
}

static void more_threads_than_blocks(uint32_t blocks)
{
	const char *ring = test_ring_name("threads");
	struct shmtrace_ring_config c = { .capacity = 65536, .blocks = blocks };
	static pthread_t th[NTHREADS];
	uint8_t *named = calloc(1u << 22, 1);
	uint32_t nnamed = 0;
	pthread_attr_t attr;
	struct shmt_view v;
	struct shmt_loss l;
	struct ring_dump d;
	uint64_t mine = 0, lost;
	char err[256], what[96];

	assert_non_null(named);
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmtrace_open(ring, &g_t), 0);
	g_returned = 0;
	pthread_barrier_init(&g_start, NULL, NTHREADS);
	pthread_barrier_init(&g_written, NULL, NTHREADS);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&th[i], &attr, one_span, (void *)(intptr_t)i), 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_attr_destroy(&attr);
	pthread_barrier_destroy(&g_start);
	pthread_barrier_destroy(&g_written);
	/* every call returned, with 0 or a loss it counted */
	assert_int_equal(g_returned, NTHREADS);
	for (int i = 0; i < NTHREADS; i++)
		assert_true(g_rets[i] == 0 || g_rets[i] == -ETIMEDOUT || g_rets[i] == -ENOSPC);
	shmtrace_close(g_t);
	assert_int_equal(shmt_view_open(ring, SHMT_OPEN_ANY_OWNER, &v, err, sizeof(err)), 0);
	ring_dump_view(&v, &d);
	for (size_t i = 0; i < d.n; i++)
		mine += d.recs[i].pid == (uint32_t)getpid();
	shmt_loss_read(&v, &l, true);
	lost = shmt_loss_records(&l);
	for (uint32_t i = 0; i < shmt_ring_nthreads(&v); i++) {
		struct shmt_thread t;

		if (shmt_ring_thread(&v, i, &t) == 0 && t.pid == (uint32_t)getpid() &&
		    t.tid < (1u << 22) && !named[t.tid]++)
			nnamed++;
	}
	print_message("%d threads, %u blocks: %llu records, %llu lost; %u names, %llu names dropped\n",
		      NTHREADS, v.nblocks, (unsigned long long)mine, (unsigned long long)lost, nnamed,
		      (unsigned long long)l.names_dropped);
	assert_int_equal(mine + lost, NTHREADS);
	assert_int_equal(nnamed + l.names_dropped, NTHREADS);
	snprintf(what, sizeof(what), "2000 threads alive at once, %u staging blocks", blocks);
	figure_acct(what, NTHREADS, NTHREADS, mine, lost, 0, NTHREADS - mine - lost,
		    "every call returned; every name kept or counted");
	free(d.recs);
	free(named);
	shmt_view_close(&v);
	shmtrace_ring_unlink(ring);
}

static void test_more_threads_than_blocks(void **state)
{
	(void)state;
	more_threads_than_blocks(256);	/* the default */
	more_threads_than_blocks(64);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fifo_in_place_of_a_ring),
		cmocka_unit_test(test_producer_survives_forged_mutex),
		cmocka_unit_test(test_producer_holding_the_lock_survives_forged_list_links),
		cmocka_unit_test(test_producer_left_holding_a_forged_lock_exits_through_its_own_links),
		cmocka_unit_test(test_forged_journal_moves_no_word_past_what_its_step_could),
		cmocka_unit_test(test_group_member_produces),
		cmocka_unit_test(test_more_threads_than_blocks),
	};

	if (cli_setup_for("hostile", true) < 0) {
		fprintf(stderr, "shmtrace or shmtrace-collector not built, or no temporary directory\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, cli_teardown);
}
