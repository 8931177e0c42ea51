/* SPDX-License-Identifier: MIT */
/*
 * test_text_cut.c - a text argument is shown whole or not at all: its
 * event's records cut by a producer killed while writing them or inside a
 * flush, by a slot torn or a block cut short, by a full ring dropping the
 * end of a flush, or forged in a capture (a length past what follows, past
 * the bound, bytes of another thread); every other argument and event
 * keeps its place. And captures of two rings merged keep each text's
 * bytes while their string ids are renumbered; texts past the exporter's
 * memory read back from its file.
 */
#include <sys/mman.h>

#include "args.h"
#include "text_run.h"

/* The text event i of producer k carries: 20 to 109 bytes, so that its
 * records end anywhere in a record's 20 bytes. */
static size_t text_of(int k, int i, char *buf)
{
	size_t n = 20 + (size_t)(i * 7 + k) % 90;
	int h = snprintf(buf, n + 1, "k%d-i%d:", k, i);

	for (size_t j = (size_t)h; j < n; j++)
		buf[j] = (char)('a' + (j + (size_t)i) % 26);
	buf[n] = 0;
	return n;
}

/*
 * Checks every event "w" of a Chrome export: its text is the one its
 * producer k wrote for its i, and producer k's events are exactly those
 * whose call returned (returned[k]), each once.
 */
static void check_whole(const char *json, int nk, const uint64_t *returned)
{
	static uint8_t seen[8][256];
	char want[128], got[256];
	size_t pos = 0;
	const char *ev;

	memset(seen, 0, sizeof(seen));
	while ((ev = next_event(json, "w", &pos))) {
		long long k = arg_int(ev, "k"), i = arg_int(ev, "i");

		assert_true(k >= 0 && k < nk && i >= 0 && i < 256);
		text_of((int)k, (int)i, want);
		assert_int_equal(arg_text(ev, "t", got, sizeof(got)), (long)strlen(want));
		assert_string_equal(got, want);
		assert_int_equal(seen[k][i]++, 0);
	}
	for (int k = 0; k < nk; k++)
		for (uint64_t i = 0; i < 256; i++)
			assert_int_equal(seen[k][i], i < returned[k]);
	assert_non_null(strstr(json, "\"args_lost\":0,"));
}

static const char *g_point;
static int g_countdown;

static void kill_hook(const char *where)
{
	if (!strcmp(where, g_point) && --g_countdown <= 0)
		raise(SIGKILL);
}

/* Producer k writes events with text into ring until it is killed at
 * point (the countdown-th time it passes there), counting in returned[k]
 * the calls that returned. */
static void victim(const char *ring, int k, const char *point, int countdown, uint64_t *returned)
{
	shmtrace_t *t;
	uint32_t c, n, kk, ki, kt;
	char text[128];

	if (shmtrace_open(ring, &t) < 0)
		_exit(3);
	c = shmtrace_intern(t, "c");
	n = shmtrace_intern(t, "w");
	kk = shmtrace_intern(t, "k");
	ki = shmtrace_intern(t, "i");
	kt = shmtrace_intern(t, "t");
	g_point = point;
	g_countdown = countdown;
	shmt_test_hook = kill_hook;
	for (int i = 0; i < 256; i++) {
		struct shmtrace_arg a[3] = { shmtrace_arg_int(kk, k), shmtrace_arg_int(ki, i),
					     shmtrace_arg_text(kt, text) };

		text_of(k, i, text);
		if (shmtrace_span_args(t, c, n, 1000 + (uint64_t)i, 2000, 0, a, 3) == 0)
			returned[k] = (uint64_t)i + 1;
	}
	_exit(4);	/* the point was never reached */
}

/*
 * Producers SIGKILLed in the middle of writing an event's text records,
 * and inside the lock in the middle of a flush of such events: the ring
 * read post-mortem, and a collector's capture of it, show every event
 * whose call returned with its whole text, once, and nothing of the one
 * being written.
 */
static void test_killed_while_writing_text(void **state)
{
	static const struct { const char *point; int countdown; } kills[] = {
		{ "text", 1 }, { "text", 7 }, { "text", 130 }, { "flush-middle", 1 },
		{ "flush-middle", 2 },
	};
	const int nk = (int)(sizeof(kills) / sizeof(kills[0]));
	const char *ring = test_ring_name("textkill"), *caps[] = { tmp("kill.cap"), NULL };
	struct shmtrace_ring_config cfg = { .capacity = 65536, .blocks = 16 };
	uint64_t *returned = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
				  -1, 0);
	char *json;
	pid_t col;

	(void)state;
	assert_true(returned != MAP_FAILED);
	shmtrace_ring_unlink(ring);
	assert_int_equal(shmtrace_ring_create(ring, &cfg), 0);
	for (int k = 0; k < nk; k++) {
		pid_t p = fork();
		int st;

		assert_true(p >= 0);
		if (p == 0)
			victim(ring, k, kills[k].point, kills[k].countdown, returned);
		assert_int_equal(waitpid(p, &st, 0), p);
		assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		assert_true(returned[k] < 256);
	}
	json = export_ring_text(ring, tmp("kill-ring.json"));
	check_whole(json, nk, returned);
	free(json);
	/* the collector repairs the lock and adopts the dead threads' blocks */
	col = cli_collector(ring, caps[0]);
	collector_stop(col);
	json = export_caps(caps, NULL, tmp("kill-cap.json"));
	check_whole(json, nk, returned);
	free(json);
	munmap(returned, 4096);
	shmtrace_ring_unlink(ring);
}

/*
 * An event whose text record was torn in the ring loses its text (its
 * integer argument, before it, stays), and the records of the text after
 * the tear attach to nothing; an event staged with its group cut short
 * in its block (written moved back into its text) likewise.
 */
static void test_cut_group_loses_only_its_text(void **state)
{
	const char *ring = test_ring_name("textcut");
	char text[] = "0123456789abcdefghij0123456789abcdefghij0123";	/* 3 records */
	struct shmtrace_arg a[2];
	struct shmt_view v;
	shmtrace_t *t;
	uint32_t c;
	size_t pos = 0;
	const char *ev;
	char got[64], *json;

	(void)state;
	t = text_ring(ring, 4096, 16);
	c = shmtrace_intern(t, "c");
	a[0] = shmtrace_arg_int(shmtrace_intern(t, "n"), 1);
	a[1] = shmtrace_arg_text(shmtrace_intern(t, "t"), text);
	/* sequences 0..4 and 5..9: a span, n, t and its 3 records... */
	shmtrace_span_args(t, c, shmtrace_intern(t, "torn"), 1000, 2000, 0, a, 2);
	shmtrace_span_args(t, c, shmtrace_intern(t, "next"), 3000, 4000, 0, a, 2);
	assert_int_equal(shmtrace_flush(t), 0);
	shmtrace_span_args(t, c, shmtrace_intern(t, "staged"), 5000, 6000, 0, a, 2);

	ring_view_rw(ring, &v);
	assert_int_equal(shmt_ring_head(&v), 12);
	store_release(&v.records[4].commit, 0);	/* the first span's 2nd text record */
	for (uint32_t i = 0; i < v.nblocks; i++) {
		struct shmt_block *b = shmt_block_at(&v, i);

		if (b->state == SHMT_BLOCK_OWNED && b->pid == (uint32_t)getpid())
			store_release(&b->written, b->written - 1);	/* its last text record */
	}
	json = export_ring_text(ring, tmp("cut.json"));
	assert_non_null(ev = next_event(json, "torn", &pos));
	assert_int_equal(arg_int(ev, "n"), 1);
	assert_int_equal(arg_text(ev, "t", got, sizeof(got)), -1);
	pos = 0;
	assert_non_null(ev = next_event(json, "next", &pos));
	assert_int_equal(arg_text(ev, "t", got, sizeof(got)), (long)strlen(text));
	assert_string_equal(got, text);
	pos = 0;
	assert_non_null(ev = next_event(json, "staged", &pos));
	assert_int_equal(arg_int(ev, "n"), 1);
	assert_int_equal(arg_text(ev, "t", got, sizeof(got)), -1);
	assert_non_null(strstr(json, "\"args\":4,\"args_lost\":2,"));
	assert_non_null(strstr(json, "\"torn\":1,"));
	free(json);
	shmt_view_close(&v);
	shmtrace_close(t);
	shmtrace_ring_unlink(ring);
}

/* A full ring in discard mode drops the end of a flush, which may end
 * inside an event's text: that event shows no text, the others theirs. */
static void test_full_ring_never_shows_part_of_a_text(void **state)
{
	const char *ring = test_ring_name("textfull");
	char text[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	size_t pos = 0, whole = 0, none = 0;
	struct shmtrace_arg a;
	shmtrace_t *t;
	uint32_t c, n;
	const char *ev;
	char got[128], *json;

	(void)state;
	t = text_ring(ring, 64, 4);
	c = shmtrace_intern(t, "c");
	n = shmtrace_intern(t, "s");
	a = shmtrace_arg_text(shmtrace_intern(t, "t"), text);	/* 1 + 1 + 4 records */
	for (int i = 0; i < 30; i++)
		shmtrace_span_args(t, c, n, 1000 + (uint64_t)i, 2000, 0, &a, 1);
	shmtrace_flush(t);
	shmtrace_close(t);
	json = export_ring_text(ring, tmp("full.json"));
	while ((ev = next_event(json, "s", &pos))) {
		long len = arg_text(ev, "t", got, sizeof(got));

		if (len < 0) {
			none++;
			continue;
		}
		assert_int_equal(len, (long)strlen(text));
		assert_string_equal(got, text);
		whole++;
	}
	/* 64 slots: 10 whole groups of 6, then an event cut inside its text */
	assert_int_equal(whole, 10);
	assert_int_equal(none, 1);
	assert_non_null(strstr(json, "\"args_lost\":1,"));
	free(json);
	shmtrace_ring_unlink(ring);
}

/* Records of a hand-made capture: event e (a span of thread tid at ts). */
static struct shmt_record rec(uint32_t kind, uint32_t tid, uint64_t ts, uint64_t dur,
			      uint64_t flow, uint16_t name, uint16_t cat)
{
	return (struct shmt_record){ .ts = ts, .dur = dur, .flow = flow, .pid = 100, .tid = tid,
				     .name = name, .cat = cat, .commit = kind };
}

/* A text record of thread tid at ts holding bytes s (20 at most). */
static struct shmt_record text_rec(uint32_t tid, uint64_t ts, const char *s)
{
	struct shmt_record r = rec(SHMTRACE_KIND_TEXT, tid, ts, 0, 0, 0, 0);

	shmt_text_put(&r, s, (uint32_t)strlen(s));
	return r;
}

/* One thread's name slot, for the captures below. */
static const struct shmt_thread thread100 = { .pid = 100, .tid = 100, .start_time = 5 };

#define TEXT(len, cut, i, n) SHMT_TEXT_VALUE(len, cut), SHMT_ARG_FLOW(SHMTRACE_ARG_TEXT, i, n)

/*
 * Forged text in a capture: a length past the records that follow, one
 * past SHMTRACE_TEXT_MAX, a record of another thread in the middle, text
 * records with no argument, two texts over an event's bound: each such
 * argument is dropped and counted, nothing read past what is there; a
 * text that is whole attaches, with its cut said.
 */
static void test_forged_texts_in_a_capture(void **state)
{
	static const struct shmt_cap_string s[] = { { 1, 1, "c" }, { 2, 1, "e" }, { 3, 1, "t" },
						    { 4, 1, "n" } };
	struct shmt_record r[128];
	const char *caps[] = { tmp("forged.cap"), NULL };
	size_t n = 0, pos = 0;
	char got[2048], *json;
	const char *ev;

	(void)state;
	r[n++] = rec(SHMTRACE_KIND_SPAN, 100, 1000, 5, 0, 2, 1);	/* claims 100, has 40 */
	r[n++] = rec(SHMTRACE_KIND_ARG, 100, 1000, TEXT(100, 0, 1, 1), 3, 2);
	r[n++] = text_rec(100, 1000, "0123456789abcdefghij");
	r[n++] = text_rec(100, 1000, "0123456789abcdefghij");
	r[n++] = rec(SHMTRACE_KIND_SPAN, 100, 2000, 5, 0, 2, 1);	/* past the bound */
	r[n++] = rec(SHMTRACE_KIND_ARG, 100, 2000, TEXT(SHMTRACE_TEXT_MAX + 1, 0, 1, 1), 3, 2);
	r[n++] = text_rec(100, 2000, "orphan");
	r[n++] = rec(SHMTRACE_KIND_SPAN, 100, 3000, 5, 0, 2, 1);	/* another thread's bytes */
	r[n++] = rec(SHMTRACE_KIND_ARG, 100, 3000, TEXT(40, 0, 1, 1), 3, 2);
	r[n++] = text_rec(100, 3000, "0123456789abcdefghij");
	r[n++] = text_rec(101, 3000, "0123456789abcdefghij");
	r[n++] = rec(SHMTRACE_KIND_SPAN, 100, 4000, 5, 0, 2, 1);	/* whole, cut said */
	r[n++] = rec(SHMTRACE_KIND_ARG, 100, 4000, 1, SHMT_ARG_FLOW(SHMTRACE_ARG_INT, 1, 2), 4, 2);
	r[n++] = rec(SHMTRACE_KIND_ARG, 100, 4000, TEXT(5, 7, 2, 2), 3, 2);
	r[n++] = text_rec(100, 4000, "hello");
	r[n++] = rec(SHMTRACE_KIND_SPAN, 100, 5000, 5, 0, 2, 1);	/* 1000 + 100 > the bound */
	r[n++] = rec(SHMTRACE_KIND_ARG, 100, 5000, TEXT(1000, 0, 1, 2), 4, 2);
	for (int i = 0; i < 50; i++)
		r[n++] = text_rec(100, 5000, "xxxxxxxxxxxxxxxxxxxx");
	r[n++] = rec(SHMTRACE_KIND_ARG, 100, 5000, TEXT(100, 0, 2, 2), 3, 2);
	for (int i = 0; i < 5; i++)
		r[n++] = text_rec(100, 5000, "yyyyyyyyyyyyyyyyyyyy");
	r[n++] = text_rec(100, 5000, "trailing");
	write_capture(caps[0], 7, s, 4, &thread100, 1, r, n);

	json = export_caps(caps, NULL, tmp("forged.json"));
	for (int i = 0; i < 3; i++) {
		assert_non_null(ev = next_event(json, "e", &pos));
		assert_true(strstr(ev, "\"args\"") > strchr(ev, '\n'));
	}
	assert_non_null(ev = next_event(json, "e", &pos));
	assert_int_equal(arg_int(ev, "n"), 1);
	assert_int_equal(arg_text(ev, "t", got, sizeof(got)), 21);
	assert_string_equal(got, "hello\xe2\x80\xa6[cut 7 bytes]");
	assert_non_null(ev = next_event(json, "e", &pos));
	assert_int_equal(arg_text(ev, "n", got, sizeof(got)), 1000);
	assert_int_equal(arg_text(ev, "t", got, sizeof(got)), -1);
	assert_non_null(strstr(json, "\"args\":3,\"args_lost\":4,"));
	free(json);
}

/*
 * Two rings' captures exported together: their string tables merge into
 * one (ids renumbered), which must renumber an interned string argument's
 * value with its key, and leave a text record's bytes, which are not ids,
 * as they are.
 */
static void test_merged_rings_keep_text_bytes(void **state)
{
	static const struct shmt_cap_string sa[] = { { 1, 1, "c" }, { 2, 1, "e" }, { 3, 1, "k" },
						     { 4, 3, "v-a" }, { 5, 1, "t" } };
	static const struct shmt_cap_string sb[] = { { 1, 5, "other" }, { 2, 1, "t" },
						     { 3, 1, "c" }, { 4, 1, "k" }, { 5, 1, "f" },
						     { 6, 3, "v-b" } };
	/* bytes 16..19 land in name and cat, ids no table holds */
	const char *text = "0123456789abcdef\xf0\x9f\x98\x80";
	const char *caps[] = { tmp("ma.cap"), tmp("mb.cap"), NULL };
	struct shmt_record r[4];
	size_t pos = 0;
	char got[64], *json;
	const char *ev;

	(void)state;
	r[0] = rec(SHMTRACE_KIND_SPAN, 100, 1000, 5, 0, 2, 1);
	r[1] = rec(SHMTRACE_KIND_ARG, 100, 1000, 4, SHMT_ARG_FLOW(SHMTRACE_ARG_STR, 1, 2), 3, 2);
	r[2] = rec(SHMTRACE_KIND_ARG, 100, 1000, TEXT(20, 0, 2, 2), 5, 2);
	r[3] = text_rec(100, 1000, text);
	write_capture(caps[0], 7, sa, 5, &thread100, 1, r, 4);
	r[0] = rec(SHMTRACE_KIND_SPAN, 100, 2000, 5, 0, 5, 3);
	r[1] = rec(SHMTRACE_KIND_ARG, 100, 2000, 6, SHMT_ARG_FLOW(SHMTRACE_ARG_STR, 1, 2), 4, 5);
	r[2] = rec(SHMTRACE_KIND_ARG, 100, 2000, TEXT(20, 0, 2, 2), 2, 5);
	r[3] = text_rec(100, 2000, text);
	write_capture(caps[1], 8, sb, 6, &thread100, 1, r, 4);

	json = export_caps(caps, NULL, tmp("merged.json"));
	assert_non_null(ev = next_event(json, "e", &pos));
	assert_int_equal(arg_text(ev, "k", got, sizeof(got)), 3);
	assert_string_equal(got, "v-a");
	assert_int_equal(arg_text(ev, "t", got, sizeof(got)), 20);
	assert_string_equal(got, text);
	pos = 0;
	assert_non_null(ev = next_event(json, "f", &pos));
	assert_int_equal(arg_text(ev, "k", got, sizeof(got)), 3);
	assert_string_equal(got, "v-b");
	assert_int_equal(arg_text(ev, "t", got, sizeof(got)), 20);
	assert_string_equal(got, text);
	assert_non_null(strstr(json, "\"args_lost\":0,"));
	free(json);
}

/*
 * The exporters keep every text for the export's life: past ARGS_TEXT_MEM
 * bytes in a temporary file. Texts fed through args.c as a source hands
 * them over read back exactly from memory and from the file alike, and
 * events copied by value keep them.
 */
static void test_texts_beyond_memory(void **state)
{
	enum { N = ARGS_TEXT_MEM / SHMTRACE_TEXT_MAX + 100 };
	static struct ev_args kept[N];
	struct args_store st;
	struct args_pend *p = calloc(1, sizeof(*p));
	char text[SHMTRACE_TEXT_MAX];

	(void)state;
	assert_non_null(p);
	args_store_init(&st);
	for (int i = 0; i < N; i++) {
		struct shmt_record ev = rec(SHMTRACE_KIND_SPAN, 100, (uint64_t)i, 5, 0, 2, 1);
		struct shmt_record a = rec(SHMTRACE_KIND_ARG, 100, (uint64_t)i,
					   TEXT(SHMTRACE_TEXT_MAX, 3, 1, 1), 3, 2);

		memset(text, 'a' + i % 26, sizeof(text));
		args_hold(p, &ev, 100, 0, (uint64_t)i);
		assert_int_equal(args_on_arg(p, &st, &a, true), 0);
		for (uint32_t off = 0; off < SHMTRACE_TEXT_MAX; off += SHMT_TEXT_CHUNK) {
			struct shmt_record t = rec(SHMTRACE_KIND_TEXT, 100, (uint64_t)i, 0, 0, 0, 0);

			shmt_text_put(&t, text + off, SHMTRACE_TEXT_MAX - off < SHMT_TEXT_CHUNK ?
						      SHMTRACE_TEXT_MAX - off : SHMT_TEXT_CHUNK);
			assert_int_equal(args_on_arg(p, &st, &t, true), 0);
		}
		assert_true(args_take(p));
		kept[i] = p->a;
	}
	assert_true(st.tfd >= 0 && st.tfile > 0);
	for (int i = 0; i < N; i += 97) {
		size_t len;
		const char *got = args_text(&st, &kept[i], 0, &len);

		assert_non_null(got);
		assert_int_equal(len, SHMTRACE_TEXT_MAX + strlen("\xe2\x80\xa6[cut 3 bytes]"));
		memset(text, 'a' + i % 26, sizeof(text));
		assert_memory_equal(got, text, SHMTRACE_TEXT_MAX);
		assert_memory_equal(got + SHMTRACE_TEXT_MAX, "\xe2\x80\xa6[cut 3 bytes]", len - SHMTRACE_TEXT_MAX);
	}
	assert_int_equal(p->lost, 0);
	args_store_free(&st);
	free(p);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("textcut", true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_killed_while_writing_text),
		cmocka_unit_test(test_cut_group_loses_only_its_text),
		cmocka_unit_test(test_full_ring_never_shows_part_of_a_text),
		cmocka_unit_test(test_forged_texts_in_a_capture),
		cmocka_unit_test(test_merged_rings_keep_text_bytes),
		cmocka_unit_test(test_texts_beyond_memory),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
