/* SPDX-License-Identifier: MIT */
/*
 * procinfo.c - what /proc tells about a process: its start time (which,
 * paired with the pid, names a process even after the pid is reused), its
 * pid namespace, whether it is still alive, and which processes map a
 * segment.
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ring_view.h"

/* Reads /proc/<id>/stat into buf (len bytes): the text after the comm,
 * " S ppid ..." from field 3 on, or NULL (gone, unreadable). */
static const char *stat_fields(uint32_t id, char *buf, size_t len)
{
	char path[48];
	ssize_t n;
	char *p;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/stat", id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	/* comm may hold spaces and parentheses: fields start after the last ')' */
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p + 1 : NULL;
}

/* Returns field 22 of /proc/<pid>/stat (clock ticks after boot), or 0. */
uint64_t shmt_proc_start_time(uint32_t pid)
{
	char buf[1024];
	const char *p = stat_fields(pid, buf, sizeof(buf));

	for (int field = 3; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

char shmt_tid_state(uint32_t tid)
{
	char buf[512];
	const char *p = tid ? stat_fields(tid, buf, sizeof(buf)) : NULL;

	return p ? p[1] : 0;
}

uint64_t shmt_self_pidns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* A thread is alive if its process has the start time we recorded and the
 * thread is still listed under it. Tids and pids are reused, so a bare
 * kill(pid, 0) would be wrong. */
bool shmt_owner_alive(uint32_t pid, uint32_t tid, uint64_t start_time)
{
	char path[96];
	struct stat st;

	if (pid == 0 || shmt_proc_start_time(pid) != start_time)
		return false;
	snprintf(path, sizeof(path), "/proc/%u/task/%u", pid, tid);
	return stat(path, &st) == 0;
}

bool shmt_tid_alive(uint32_t tid)
{
	char path[32];
	struct stat st;

	/* /proc/<tid> names any thread, though only processes are listed */
	snprintf(path, sizeof(path), "/proc/%u", tid);
	return tid && stat(path, &st) == 0;
}

/* Whether /proc/<pid>/maps lists a mapping of the file dev:ino. */
static bool maps_file(const char *pid, uint64_t dev, uint64_t ino)
{
	char path[64], line[512];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return false;	/* gone, or not ours to read */
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned int maj, min;
		unsigned long long i;

		found = sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &i) == 3 &&
			i == ino && makedev(maj, min) == dev;
		/* the rest of a line longer than the buffer */
		while (!strchr(line, '\n') && fgets(line, sizeof(line), f))
			;
	}
	fclose(f);
	return found;
}

uint32_t shmt_segment_mappers(uint64_t dev, uint64_t ino)
{
	char self[16];
	struct dirent *de;
	uint32_t n = 0;
	DIR *d = opendir("/proc");

	if (!d)
		return 0;
	snprintf(self, sizeof(self), "%d", (int)getpid());
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]) || !strcmp(de->d_name, self))
			continue;
		n += maps_file(de->d_name, dev, ino);
	}
	closedir(d);
	return n;
}
