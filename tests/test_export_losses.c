/* SPDX-License-Identifier: MIT */
/*
 * test_export_losses.c - the losses reach every format, whatever the trace
 * holds: a capture of counters only, or of nothing but a LOSS frame, still
 * gives an OTLP file whose one request carries them as scope attributes;
 * the records of parts missing from the inputs and those a snapshot left
 * out for a size bound are OTLP scope attributes and figures of the
 * Perfetto export, as they are in the Chrome export's metadata.
 */
#include "export_read.h"

/* The integer value of the OTLP/JSON attribute key in json (the first),
 * or -1 when there is none. */
static long long otlp_attr(const char *json, const char *key)
{
	char k[128];
	const char *p;

	snprintf(k, sizeof(k), "{\"key\":\"%s\",\"value\":{\"intValue\":", key);
	p = strstr(json, k);
	if (!p)
		return -1;
	p += strlen(k);
	return strtoll(p + (*p == '"'), NULL, 10);
}

/* The Perfetto export of in, decoded by protoc: the integer of the debug
 * annotation name (an annotation of the instant "shmtrace export" only),
 * or -1. */
static long long perfetto_figure(const char *in, const char *name)
{
	char cmd[4096], key[96], pf[512], txtp[512];
	const char *p;
	char *txt;
	long long v = -1;

	snprintf(pf, sizeof(pf), "%s", tmp("l.pftrace"));
	snprintf(txtp, sizeof(txtp), "%s", tmp("l.txt"));
	snprintf(cmd, sizeof(cmd),
		 "'%s' export '%s' --format perfetto -o '%s' 2>/dev/null && protoc "
		 "--decode=perfetto.Trace -I tests/perfetto tests/perfetto/perfetto_trace.proto "
		 "<'%s' >'%s'", bin, in, pf, pf, txtp);
	assert_int_equal(system(cmd), 0);
	txt = slurp(txtp);
	snprintf(key, sizeof(key), "name: \"%s\"", name);
	/* protoc writes an annotation's value before its name */
	p = strstr(txt, key);
	while (p && p > txt && strncmp(p, "int_value: ", 11))
		p--;
	if (p && p > txt)
		v = strtoll(p + 11, NULL, 10);
	free(txt);
	return v;
}

/* Counters only, a LOSS frame of 3 records dropped: one OTLP request, no
 * span, its scope saying so; nothing lost and no span: an empty file. */
static void test_otlp_losses_without_spans(void **state)
{
	const struct shmt_record r[] = {
		{ .ts = 3000, .dur = 7, .pid = 100, .tid = 100, .name = 2, .cat = 1,
		  .commit = SHMTRACE_KIND_COUNTER },
	};
	char cap[512];
	const char *caps[] = { cap, NULL };
	char *out;

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("c.cap"));
	put_small_capture(cap, 0, 0, r, 1, 3, 0);
	out = export_caps(caps, "otlp", tmp("c.jsonl"));
	assert_int_equal(count(out, "\n"), 1);
	assert_int_equal(otlp_attr(out, "shmtrace.dropped"), 3);
	assert_int_equal(otlp_attr(out, "shmtrace.records_lost"), 3);
	assert_non_null(strstr(out, "\"spans\":[]}]}]}\n"));
	assert_non_null(strstr(out, "\"service.name\",\"value\":{\"stringValue\":\"shmtrace\"}"));
	free(out);

	/* nothing but the LOSS frame */
	put_small_capture(cap, 0, 0, NULL, 0, 5, 0);
	out = export_caps(caps, "otlp", tmp("c.jsonl"));
	assert_int_equal(count(out, "\n"), 1);
	assert_int_equal(otlp_attr(out, "shmtrace.dropped"), 5);
	free(out);

	/* nothing lost: nothing to say */
	put_small_capture(cap, 0, 0, r, 1, 0, 0);
	out = export_caps(caps, "otlp", tmp("c.jsonl"));
	assert_string_equal(out, "");
	free(out);
}

/* Part 1 of a rotated capture without part 0 (its 10 records missing),
 * and a snapshot whose window lost its 6 oldest records to a size bound:
 * both in OTLP's scope and among the Perfetto export's figures. */
static void test_missing_and_cut_in_every_format(void **state)
{
	const struct shmt_record r[] = {
		{ .ts = 3000, .dur = 50, .pid = 100, .tid = 100, .name = 2, .cat = 1,
		  .commit = SHMTRACE_KIND_SPAN },
	};
	char cap[512];
	const char *caps[] = { cap, NULL };
	char *out;

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("p.cap.1"));
	put_small_capture(cap, 1, 10, r, 1, 0, 0);
	out = export_caps(caps, NULL, tmp("p.json"));
	assert_non_null(strstr(out, "\"missing_records\":10"));
	free(out);
	out = export_caps(caps, "otlp", tmp("p.jsonl"));
	assert_int_equal(otlp_attr(out, "shmtrace.missing_records"), 10);
	free(out);
	if (have_protoc()) {
		assert_int_equal(perfetto_figure(cap, "missing_records"), 10);
		assert_int_equal(perfetto_figure(cap, "snapshot_cut"), 0);
	}

	snprintf(cap, sizeof(cap), "%s", tmp("s.cap"));
	put_small_capture(cap, 0, 0, r, 1, 0, 6);
	out = export_caps(caps, NULL, tmp("s.json"));
	assert_non_null(strstr(out, "\"cut\":6"));
	free(out);
	out = export_caps(caps, "otlp", tmp("s.jsonl"));
	assert_int_equal(otlp_attr(out, "shmtrace.snapshot.cut"), 6);
	assert_int_equal(otlp_attr(out, "shmtrace.missing_records"), -1);
	free(out);
	if (have_protoc()) {
		assert_int_equal(perfetto_figure(cap, "snapshot_cut"), 6);
		assert_int_equal(perfetto_figure(cap, "missing_records"), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_otlp_losses_without_spans),
		cmocka_unit_test(test_missing_and_cut_in_every_format),
	};

	return cmocka_run_group_tests(tests, cli_setup, cli_teardown);
}
