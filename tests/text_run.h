/* SPDX-License-Identifier: MIT */
/*
 * text_run.h - what the tests of text arguments (test_text_args.c,
 * test_text_cut.c) share: an argument's value found in an exported event
 * and read back from its JSON escapes, to compare byte for byte with what
 * the producer gave; and a whole trace's events of one name walked.
 */
#ifndef SHMTRACE_TEST_TEXT_RUN_H
#define SHMTRACE_TEST_TEXT_RUN_H

#include "export_read.h"

/* Appends code point cp to out as UTF-8. */
static inline size_t put_utf8(char *out, uint32_t cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	out[0] = (char)(0xe0 | cp >> 12);
	out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
	out[2] = (char)(0x80 | (cp & 0x3f));
	return 3;
}

/*
 * The JSON string starting at p (just after its opening quote), unescaped
 * into out[cap] (NUL-terminated): its length, or -1 when it is not one the
 * export's writer makes (util/json_writer.c: raw UTF-8, \" \\ and \u00XX).
 */
static inline long json_unescape(const char *p, char *out, size_t cap)
{
	size_t n = 0;

	for (; *p && *p != '"'; p++) {
		char c = *p;

		if (n + 4 >= cap)
			return -1;
		if (c != '\\') {
			out[n++] = c;
			continue;
		}
		c = *++p;
		if (c == '"' || c == '\\' || c == '/') {
			out[n++] = c;
		} else if (c == 'u') {
			unsigned cp;

			if (sscanf(p + 1, "%4x", &cp) != 1)
				return -1;
			n += put_utf8(out + n, cp);
			p += 4;
		} else {
			return -1;
		}
	}
	if (*p != '"')
		return -1;
	out[n] = 0;
	return (long)n;
}

/* Where the value of key ("KEY": then after) starts in the event text at
 * ev, within its line; NULL if it has no such key. */
static inline const char *arg_at(const char *ev, const char *key, const char *after)
{
	const char *end = strchr(ev, '\n'), *p;
	char pat[128];

	snprintf(pat, sizeof(pat), "\"%s\":%s", key, after);
	p = strstr(ev, pat);
	return p && (!end || p < end) ? p + strlen(pat) : NULL;
}

/* The value of argument key in the event text at ev (up to its line's
 * end) as text, unescaped into out[cap]: its length, or -1 if there is
 * no such text argument. OTLP spans: key is then the attribute's key. */
static inline long arg_text(const char *ev, const char *key, char *out, size_t cap)
{
	const char *p = arg_at(ev, key, "\"");

	return p ? json_unescape(p, out, cap) : -1;
}

/* The integer argument key of the event at ev, or -1 when it has none. */
static inline long long arg_int(const char *ev, const char *key)
{
	const char *p = arg_at(ev, key, "");

	return p ? strtoll(p, NULL, 10) : -1;
}

/* The next event (a line of a Chrome export) named name at or after *pos;
 * NULL when there is none. *pos moves past it. */
static inline const char *next_event(const char *json, const char *name, size_t *pos)
{
	char pat[128];
	const char *p;

	snprintf(pat, sizeof(pat), "\"name\":\"%s\"", name);
	p = strstr(json + *pos, pat);
	if (!p)
		return NULL;
	while (p > json && p[-1] != '\n')
		p--;
	*pos = (size_t)(strchr(p, '\n') ? strchr(p, '\n') - json + 1 : (long)strlen(json));
	return p;
}

/* Exports ring post-mortem to out and returns the JSON (to free). */
static inline char *export_ring_text(const char *ring, const char *out)
{
	int rc = export_ring(ring, out, tmp("export.err"));

	if (rc != 0)
		print_file(tmp("export.err"));
	assert_int_equal(rc, 0);
	return slurp(out);
}

/* Makes ring (capacity records, blocks staging blocks) anew and opens a
 * handle on it. */
static inline shmtrace_t *text_ring(const char *ring, uint32_t capacity, uint32_t blocks)
{
	struct shmtrace_ring_config c = { .capacity = capacity, .blocks = blocks };
	shmtrace_t *t;

	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &c), 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	return t;
}

/* Stops a collector started by cli_collector(): SIGTERM, waited for. */
static inline void collector_stop(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

#endif
