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
#include <sys/mount.h>
#include <sys/uio.h>

#include "collector_run.h"

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
 * was not written is still in the ring; engine is --write-engine's. */
static void file_size_limit_exits_1_rest_stays_in_ring(const char *engine)
{
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

static void test_file_size_limit_exits_1_rest_stays_in_ring_pwrite(void **state)
{
	(void)state;
	file_size_limit_exits_1_rest_stays_in_ring("--write-engine=pwrite");
}

static void test_file_size_limit_exits_1_rest_stays_in_ring_io_uring(void **state)
{
	(void)state;
	file_size_limit_exits_1_rest_stays_in_ring("--write-engine=io_uring");
}

/* A full disk (a 128 KiB tmpfs: 60000 records take over 300 KB packed): a
 * clear error, exit 1, the capture readable up to its last whole frame,
 * the rest still in the ring; engine is --write-engine's. */
static void full_disk_exits_1_rest_stays_in_ring(const char *engine)
{
	const char *ring = test_ring_name("enospc");
	struct shmtrace_ring_config c = { .capacity = 1 << 16 };
	char dir[] = "/tmp/shmt-enospc-XXXXXX", out[300];
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
	figure("ENOSPC (128 KiB tmpfs)", 1, 60000, t.records, 0, 0, 0,
	       "exit 1, file readable, the rest kept in the ring");
	umount(dir);
	rmdir(dir);
	tally_free(&t);
	shmtrace_ring_unlink(ring);
}

static void test_full_disk_exits_1_rest_stays_in_ring_pwrite(void **state)
{
	(void)state;
	full_disk_exits_1_rest_stays_in_ring("--write-engine=pwrite");
}

static void test_full_disk_exits_1_rest_stays_in_ring_io_uring(void **state)
{
	(void)state;
	full_disk_exits_1_rest_stays_in_ring("--write-engine=io_uring");
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
	handed_over = pwritev2(fd, &iov, 1, 0, RWF_NOWAIT) < 0 && errno == EOPNOTSUPP;
	close(fd);
	unlink(path);
	if (handed_over)
		assert_true(io_workers_writing_in_memory("--write-engine=io_uring") > 0);
	else
		print_message("this kernel writes tmpfs without blocking: io_uring needs no worker\n");
}

/* A failing fsync is final: the collector reports it and exits 1 (fsync
 * of /dev/null fails with EINVAL after every write succeeded). */
static void test_failed_fsync_reported_and_final(void **state)
{
	const char *ring = test_ring_name("fsync");
	char line[1024];

	(void)state;
	assert_int_equal(shmtrace_ring_create(ring, NULL), 0);
	{
		int p[2], status;
		char fd[16], buf[8];
		pid_t pid;
		size_t got = 0;
		ssize_t n;
		int e[2];

		assert_int_equal(pipe(p), 0);
		assert_int_equal(pipe(e), 0);
		pid = fork();
		if (pid == 0) {
			close(p[0]);
			close(e[0]);
			dup2(e[1], 2);
			snprintf(fd, sizeof(fd), "%d", p[1]);
			execl(g_bin, "shmtrace-collector", "--ring", ring, "--output", "/dev/null",
			      "--ready-fd", fd, (char *)NULL);
			_exit(127);
		}
		close(p[1]);
		close(e[1]);
		assert_int_equal(read(p[0], buf, sizeof(buf)), 6);
		close(p[0]);
		kill(pid, SIGTERM);
		while ((n = read(e[0], line + got, sizeof(line) - 1 - got)) > 0)
			got += (size_t)n;
		line[got] = 0;
		close(e[0]);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 1);
		assert_non_null(strstr(line, "fsync of '/dev/null'"));
	}
	figure("fsync fails (EINVAL on /dev/null)", 1, 0, 0, 0, 0, 0, "reported, exit 1, never retried");
	shmtrace_ring_unlink(ring);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capture_in_memory_written_without_io_worker),
		cmocka_unit_test(test_file_size_limit_exits_1_rest_stays_in_ring_pwrite),
		cmocka_unit_test(test_file_size_limit_exits_1_rest_stays_in_ring_io_uring),
		cmocka_unit_test(test_full_disk_exits_1_rest_stays_in_ring_pwrite),
		cmocka_unit_test(test_full_disk_exits_1_rest_stays_in_ring_io_uring),
		cmocka_unit_test(test_failed_fsync_reported_and_final),
	};

	if (collector_bin_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
