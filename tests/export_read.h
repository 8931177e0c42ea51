/* SPDX-License-Identifier: MIT */
/*
 * export_read.h - exporting and reading back what an export wrote, for
 * the tests that check it: a small capture made by hand, an export's text,
 * an event of the Chrome JSON by name (its ts and dur in ns, its text), and
 * the Perfetto export of an input compared with its Chrome export by
 * tests/perfetto/check-perfetto.py.
 */
#ifndef SHMTRACE_TEST_EXPORT_READ_H
#define SHMTRACE_TEST_EXPORT_READ_H

#include <limits.h>

#include "cli_run.h"

/* Exports the inputs (NULL-terminated argv words: capture files, or
 * --ring NAME) to out, --format fmt (NULL: Chrome JSON), and returns what
 * it wrote (to free). */
static inline char *export_caps(const char *const *caps, const char *fmt, const char *out)
{
	char *argv[16] = { bin, "export" };
	int n = 2;

	for (; *caps && n < 10; caps++)
		argv[n++] = (char *)*caps;
	if (fmt) {
		argv[n++] = "--format";
		argv[n++] = (char *)fmt;
	}
	argv[n++] = "-o";
	argv[n++] = (char *)out;
	argv[n] = NULL;
	n = run(NULL, tmp("export.err"), argv);
	if (n != 0)
		print_file(tmp("export.err"));
	assert_int_equal(n, 0);
	return slurp(out);
}

/* A capture at path: part part of run 7 of ring "lossring", strings 1
 * "cat" and 2 "depth", one thread (pid and tid 100, "alpha"), records
 * r[0..n) from sequence first, a LOSS frame of dropped records when
 * dropped is not 0, and an END frame; a snapshot's header, its window cut
 * by cut, when cut is not 0. */
static inline void put_small_capture(const char *path, uint32_t part, uint64_t first,
				     const struct shmt_record *r, size_t n, uint64_t dropped,
				     uint64_t cut)
{
	struct shmt_cap_header h = {
		.version = SHMT_CAP_VERSION, .part = part, .run_id = 7, .ring_id = 7,
		.ring_capacity = 1024, .realtime0 = 1700000000000000000ull, .mono0 = 1000,
		.started_ns = 1000,
	};
	static const struct shmt_cap_string strs[] = { { 1, 3, "cat" }, { 2, 5, "depth" } };
	struct shmt_thread th = { .pid = 100, .tid = 100, .start_time = 5 };
	struct shmt_cap_loss loss = { .at_ns = 2000, .dropped = dropped };
	struct shmt_cap_end e = { .records = first + n, .end_ns = 90000 };
	msgpack_sbuffer b;

	snprintf(h.ring, sizeof(h.ring), "lossring");
	strcpy(th.pname, "alpha");
	if (cut)
		h.snapshot = (struct shmt_cap_snapshot){
			.cause = SHMT_SNAP_COMMAND, .first_seq = first, .end_seq = first + n,
			.from_ns = 1000, .to_ns = 90000, .cut = cut,
		};
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, strs, 2), 0);
	assert_int_equal(shmt_cap_put_threads(&b, &th, 1), 0);
	if (n)
		assert_int_equal(shmt_cap_put_records(&b, first, r, n), 0);
	if (dropped)
		assert_int_equal(shmt_cap_put_loss(&b, &loss), 0);
	assert_int_equal(shmt_cap_put_end(&b, &e), 0);
	put_file(path, b.data, b.size);
	msgpack_sbuffer_destroy(&b);
}

/* A Chrome event with a "dur": a span, or an open span. */
struct ev {
	uint64_t ts, dur;	/* ns, from the exported microseconds */
	const char *at;		/* the event's text, up to its closing brace */
	size_t len;
};

/* ns of the Chrome microseconds (three decimals) at p. */
static inline uint64_t parse_us(const char *p)
{
	unsigned long long us = 0, frac = 0;

	assert_int_equal(sscanf(p, "%llu.%3llu", &us, &frac), 2);
	return us * 1000 + frac;
}

/* The k-th event (0-based) with a "dur" whose "name" is name; false if
 * there is none. */
static inline bool find_event(const char *json, const char *name, int k, struct ev *out)
{
	char key[160];
	const char *p = json;

	snprintf(key, sizeof(key), "\"name\":\"%s\"", name);
	while ((p = strstr(p, key))) {
		const char *start = p, *end = strchr(p, '\n'), *q;

		while (start > json && *start != '{')
			start--;
		/* a flow event or metadata has no "dur" */
		q = strstr(start, "\"dur\":");
		if (q && (!end || q < end) && k-- == 0) {
			out->dur = parse_us(q + 6);
			q = strstr(start, "\"ts\":");
			out->ts = parse_us(q + 5);
			out->at = start;
			out->len = end ? (size_t)(end - start) : strlen(start);
			return true;
		}
		p += strlen(key);
	}
	return false;
}

/* Whether event e's text holds s. */
static inline bool ev_has(const struct ev *e, const char *s)
{
	char *t = strndup(e->at, e->len);
	bool ok = strstr(t, s) != NULL;

	free(t);
	return ok;
}

/* protoc and python3, which the Perfetto comparison needs, are here. */
static inline bool have_protoc(void)
{
	return system("protoc --version >/dev/null 2>&1") == 0 &&
	       system("python3 --version >/dev/null 2>&1") == 0;
}

/*
 * Exports in (shell words; "$d" is the temporary directory) to Chrome
 * JSON and to Perfetto with the options opts (the same for both), decodes
 * the Perfetto trace and compares them with check-perfetto.py, which is
 * also given expect; its word ends up in tmp("check.out").
 */
static inline void perfetto_compare(const char *in, const char *opts, const char *expect)
{
	char cmd[2048], tool[PATH_MAX];

	assert_non_null(realpath(bin, tool));
	setenv("PF_TOOL", tool, 1);
	setenv("PF_DIR", tmpdir, 1);
	snprintf(cmd, sizeof(cmd),
		 "d=\"$PF_DIR\" && \"$PF_TOOL\" export %s %s -o \"$d/t.json\" 2>/dev/null && "
		 "\"$PF_TOOL\" export %s %s --format perfetto -o \"$d/t.pftrace\" 2>\"$d/t.err\" && "
		 "protoc --decode=perfetto.Trace -I tests/perfetto tests/perfetto/perfetto_trace.proto "
		 "<\"$d/t.pftrace\" >\"$d/t.txt\" && python3 tests/perfetto/check-perfetto.py "
		 "\"$d/t.txt\" \"$d/t.json\" %s >\"$d/check.out\" 2>&1", in, opts, in, opts, expect);
	if (system(cmd) != 0) {
		if (access(tmp("check.out"), F_OK) == 0)
			print_file(tmp("check.out"));
		fail_msg("the Perfetto export of %s with '%s' differs from the Chrome one", in, opts);
	}
}

#endif
