/* SPDX-License-Identifier: MIT */
/*
 * test_collector_output.c - how shmtrace-collector writes its capture, and
 * what it does when that fails: a file in memory written by the
 * collector's own thread (no io_uring worker); a file-size limit, a full
 * disk, a failing fsync, with each write engine. Each failure is a clear
 * error and exit 1, the capture reads up to its last whole frame, and what
 * did not reach the file is still in the ring.
 */
#include <dirent.h>
#include <stddef.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "collector_run.h"
#include "writer.h"

/* A producer of 60000 records against collector col, whose output fails:
 * exit 1, the capture at out read (into t) up to its last whole frame, cut,
 * and the ring's tail never past what reached the file. Returns the ring's
 * stats. */
static struct shmtrace_stats expect_output_failure(const char *ring, const char *out, pid_t col,
						   struct tally *t)
{
	struct shmtrace_stats st;
	shmtrace_t *h;
	int status;

	run_producers(ring, t, 1, 60000);
	wait_producers(t);
	assert_int_equal(waitpid(col, &status, 0), col);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	read_capture(out, t);
	assert_true(t->records > 0);
	assert_int_equal(t->cut_ends, 1);
	assert_int_equal(shmtrace_open(ring, &h), 0);
	shmtrace_stats(h, &st);
	assert_true(st.tail <= t->records);
	shmtrace_close(h);
	return st;
}

/* A file-size limit: a clear error, exit 1, the file readable, and what
 * was not written is still in the ring; *state is its --write-engine=E. */
static void test_file_size_limit_exits_1_rest_stays_in_ring(void **state)
{
	const char *engine = *state;
	const char *ring = test_ring_name("fsz");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	char out[256];
	struct tally t = { 0 };
	struct shmtrace_stats st;
	pid_t col;

	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	/* 60000 records take over 300 KB even packed (5 bytes at least) */
	col = start_collector(ring, out, engine, 256 * 1024);
	st = expect_output_failure(ring, out, col, &t);
	assert_true(st.head - st.tail + t.records >= 60000 - st.dropped);
	unlink(out);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/* A full disk (a 128 KiB tmpfs: 60000 records take over 300 KB packed): a
 * clear error, exit 1, the capture readable up to its last whole frame,
 * the rest still in the ring; *state is its --write-engine=E. */
static void test_full_disk_exits_1_rest_stays_in_ring(void **state)
{
	const char *engine = *state;
	const char *ring = test_ring_name("enospc");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	char dir[] = "/tmp/shmt-enospc-XXXXXX", out[300], kind[64];
	struct tally t = { 0 };
	pid_t col;

	assert_non_null(mkdtemp(dir));
	if (geteuid() != 0 || mount("tmpfs", dir, "tmpfs", 0, "size=128k") < 0) {
		rmdir(dir);
		print_message("cannot mount a small tmpfs here; skipped\n");
		skip();
	}
	snprintf(out, sizeof(out), "%s/full.cap", dir);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	col = start_collector(ring, out, engine, 0);
	expect_output_failure(ring, out, col, &t);
	snprintf(kind, sizeof(kind), "ENOSPC (128 KiB tmpfs), %s", strchr(engine, '=') + 1);
	figure(kind, 1, 60000, t.records, 0, 0, 0,
	       "exit 1, file readable, the rest kept in the ring");
	umount(dir);
	rmdir(dir);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

/* The io_uring workers (threads named iou-wrk-*) of process pid. */
static int io_workers(pid_t pid)
{
	char path[64], comm[32];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	assert_non_null(d);
	while ((e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/comm", (int)pid, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;	/* the thread has exited */
		if (fgets(comm, sizeof(comm), f) && strncmp(comm, "iou-wrk", 7) == 0)
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* The io_uring workers of a collector writing a capture in /dev/shm with
 * engine (--write-engine=...), once it has written 60000 records. */
static int io_workers_writing_in_memory(const char *engine)
{
	const char *ring = test_ring_name("engine");
	char out[256];
	struct tally t = { 0 };
	shmtrace_t *h;
	int n, status;
	pid_t col;

	snprintf(out, sizeof(out), "/dev/shm/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	col = start_collector(ring, out, engine, 0);
	run_producers(ring, &t, 1, 60000);
	wait_producers(&t);
	assert_int_equal(shmtrace_open(ring, &h), 0);
	/* the tail passes a record once the capture holds it */
	assert_int_equal(wait_tail(h, 60000), 60000);
	shmtrace_close(h);
	/* a worker idles 5 s before it exits: one that wrote is still here */
	n = io_workers(col);
	status = stop(col, SIGTERM);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	read_capture(out, &t);
	check_exactly_once(&t);
	unlink(out);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
	return n;
}

/* The engine cw_open() chose for a new file at path, given engine e. */
static enum cw_engine engine_for(const char *path, enum cw_engine e)
{
	struct cwriter *w = cw_new();
	enum cw_engine got;
	char err[512];

	assert_non_null(w);
	assert_int_equal(cw_open(w, path, e, 0600, err, sizeof(err)), 0);
	got = cw_engine(w);
	cw_free(w);
	unlink(path);
	return got;
}

/* A path for a capture named after what, in a directory on a disk (not
 * tmpfs nor ramfs) where one is at hand: /var/tmp, or the working
 * directory; false when none is. */
static bool disk_path(char *path, size_t len, const char *what)
{
	static const char *const disks[] = { "/var/tmp", "." };
	struct statfs sf;

	for (unsigned i = 0; i < sizeof(disks) / sizeof(disks[0]); i++) {
		if (statfs(disks[i], &sf) < 0 || sf.f_type == TMPFS_MAGIC ||
		    sf.f_type == RAMFS_MAGIC || access(disks[i], W_OK) < 0)
			continue;
		snprintf(path, len, "%s/%s.cap", disks[i], test_ring_name(what));
		return true;
	}
	return false;
}

/* auto: pwrite for a file on tmpfs, io_uring for one on a disk; an engine
 * named is the engine used. */
static void test_auto_engine_pwrite_in_memory_io_uring_on_disk(void **state)
{
	char path[300];

	(void)state;
	snprintf(path, sizeof(path), "/dev/shm/%s.cap", test_ring_name("eng"));
	assert_int_equal(engine_for(path, CW_ENGINE_AUTO), CW_ENGINE_PWRITE);
	assert_int_equal(engine_for(path, CW_ENGINE_IO_URING), CW_ENGINE_IO_URING);
	assert_int_equal(engine_for(path, CW_ENGINE_PWRITE), CW_ENGINE_PWRITE);
	if (disk_path(path, sizeof(path), "eng")) {
		assert_int_equal(engine_for(path, CW_ENGINE_AUTO), CW_ENGINE_IO_URING);
		assert_int_equal(engine_for(path, CW_ENGINE_PWRITE), CW_ENGINE_PWRITE);
	} else {
		print_message("no directory on a disk here: only the tmpfs half ran\n");
	}
}

/*
 * A capture in memory (tmpfs) is written by the collector's own thread:
 * io_uring would hand each write to a worker thread there, which is what
 * preempted producers. Forcing io_uring on the same file shows the
 * worker this test would see, where the file takes no non-blocking
 * writes (the reason io_uring hands them over).
 */
static void test_capture_in_memory_written_without_io_worker(void **state)
{
	char path[] = "/dev/shm/shmt-nowait-XXXXXX";
	struct iovec iov = { path, 1 };
	bool handed_over;
	int fd;

	(void)state;
	assert_int_equal(io_workers_writing_in_memory("--write-engine=auto"), 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	/* a file that takes no RWF_NOWAIT write takes no non-blocking
	 * buffered write from io_uring either (it may refuse one a file
	 * that takes RWF_NOWAIT takes: then only the first half runs) */
	handed_over = pwritev2(fd, &iov, 1, 0, RWF_NOWAIT) < 0 && errno == EOPNOTSUPP;
	close(fd);
	unlink(path);
	if (handed_over)
		assert_true(io_workers_writing_in_memory("--write-engine=io_uring") > 0);
	else
		print_message("this kernel writes tmpfs without blocking: io_uring needs no worker\n");
}

/* Makes io_uring_setup() fail with EPERM in this process and the ones it
 * starts, as Docker's default seccomp profile does. */
static int deny_io_uring(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* Runs the collector on ring writing out with engine (--write-engine=E),
 * io_uring denied to it if deny; once it drains, one producer process
 * writes n records into ring (tallied in t), then SIGTERM. Returns its
 * exit status, what it said on stderr in said. */
static int collect(const char *ring, const char *out, const char *engine, bool deny, uint64_t n,
		   struct tally *t, char *said, size_t len)
{
	int ready[2], err[2], status;
	char fd[16], buf[8];
	size_t got = 0;
	ssize_t r;
	pid_t pid;

	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(err), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(ready[0]);
		close(err[0]);
		dup2(err[1], 2);
		snprintf(fd, sizeof(fd), "%d", ready[1]);
		if (deny && deny_io_uring() < 0)
			_exit(126);
		execl(g_bin, "shmtrace-collector", "--ring", ring, "--output", out, "--ready-fd", fd,
		      engine, (char *)NULL);
		_exit(127);
	}
	close(ready[1]);
	close(err[1]);
	if (read(ready[0], buf, sizeof(buf)) == 6) {
		if (n) {
			run_producers(ring, t, 1, n);
			wait_producers(t);
		}
		kill(pid, SIGTERM);
	}
	close(ready[0]);
	while (got + 1 < len && (r = read(err[0], said + got, len - 1 - got)) > 0)
		got += (size_t)r;
	said[got] = 0;
	close(err[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

/* Where io_uring is denied (a container's seccomp profile), the pwrite
 * engine captures every record, the io_uring engine says at start that it
 * cannot, and what does without it, and the default (auto), which would
 * use io_uring for a file on a disk, says so and writes with pwrite. */
static void test_pwrite_engine_needs_no_io_uring(void **state)
{
	const char *ring = test_ring_name("nouring");
	char out[256], said[2048];
	struct tally t = { 0 };
	int status;

	(void)state;
	snprintf(out, sizeof(out), "/tmp/%s.cap", ring);
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	status = collect(ring, out, "--write-engine=io_uring", true, 20000, &t, said, sizeof(said));
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	assert_non_null(strstr(said, "io_uring: Operation not permitted"));
	assert_non_null(strstr(said, "--write-engine=pwrite"));
	status = collect(ring, out, "--write-engine=pwrite", true, 20000, &t, said, sizeof(said));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fprintf(stderr, "collector said:\n%s\n", said);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	read_capture(out, &t);
	check_exactly_once(&t);
	tally_free(&t);
	unlink(out);
	shmtrace_ring_unlink(ring);
	if (disk_path(out, sizeof(out), "nouring")) {
		memset(&t, 0, sizeof(t));
		assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
		status = collect(ring, out, "--write-engine=auto", true, 20000, &t, said,
				 sizeof(said));
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		assert_non_null(strstr(said, "io_uring: Operation not permitted; writing with pwrite"));
		read_capture(out, &t);
		check_exactly_once(&t);
		tally_free(&t);
		unlink(out);
		shmtrace_ring_unlink(ring);
	} else {
		print_message("no directory on a disk here: the default engine's half did not run\n");
	}
}

/* A failing fsync is final: the collector reports it and exits 1 (fsync
 * of /dev/null fails with EINVAL after every write succeeded); *state is
 * its --write-engine=E. */
static void test_failed_fsync_reported_and_final(void **state)
{
	const char *engine = *state;
	const char *ring = test_ring_name("fsync");
	char line[1024], kind[64];
	struct tally t = { 0 };
	int status;

	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	status = collect(ring, "/dev/null", engine, false, 0, &t, line, sizeof(line));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	assert_non_null(strstr(line, "fsync of '/dev/null'"));
	snprintf(kind, sizeof(kind), "fsync fails (EINVAL on /dev/null), %s", strchr(engine, '=') + 1);
	figure(kind, 1, 0, 0, 0, 0, 0, "reported, exit 1, never retried");
	shmtrace_ring_unlink(ring);
}

/* Test t run with --write-engine=e, named after both. */
#define WITH_ENGINE(t, e) { #t "_" e, t, NULL, NULL, (void *)("--write-engine=" e) }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_engine_pwrite_in_memory_io_uring_on_disk),
		cmocka_unit_test(test_capture_in_memory_written_without_io_worker),
		cmocka_unit_test(test_pwrite_engine_needs_no_io_uring),
		WITH_ENGINE(test_file_size_limit_exits_1_rest_stays_in_ring, "pwrite"),
		WITH_ENGINE(test_file_size_limit_exits_1_rest_stays_in_ring, "io_uring"),
		WITH_ENGINE(test_full_disk_exits_1_rest_stays_in_ring, "pwrite"),
		WITH_ENGINE(test_full_disk_exits_1_rest_stays_in_ring, "io_uring"),
		WITH_ENGINE(test_failed_fsync_reported_and_final, "pwrite"),
		WITH_ENGINE(test_failed_fsync_reported_and_final, "io_uring"),
	};

	if (collector_bin_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
