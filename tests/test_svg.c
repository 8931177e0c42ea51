/* SPDX-License-Identifier: MIT */
/*
 * test_svg.c - `shmtrace svg`: XML escaping of untrusted names, nesting
 * depth, the window, flow arrows, well-formed output for a small capture
 * made with the encoder, and usage errors.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "hostile_run.h"
#include "cli.h"
#include "svg.h"

/* ------------------------------------------------------------ escaping */

static void test_escape(void **state)
{
	char out[256];

	(void)state;
	assert_int_equal(svg_escape(out, sizeof(out), "a&b<c>\"d'", 9, 100), 9);
	assert_string_equal(out, "a&amp;b&lt;c&gt;&quot;d&apos;");
	/*
	 * invalid, overlong, surrogate, cut-short UTF-8 and control bytes:
	 * each maximal invalid subpart becomes one U+FFFD, as in the JSON
	 * export (util/utf8.c)
	 */
	svg_escape(out, sizeof(out), "x\xffy", 3, 100);
	assert_string_equal(out, "x\xef\xbf\xbdy");
	svg_escape(out, sizeof(out), "\xc0\xaf", 2, 100);
	assert_string_equal(out, "\xef\xbf\xbd\xef\xbf\xbd");
	svg_escape(out, sizeof(out), "\xed\xa0\x80", 3, 100);
	assert_string_equal(out, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	svg_escape(out, sizeof(out), "ab\xe2\x82", 4, 100);
	assert_string_equal(out, "ab\xef\xbf\xbd");
	svg_escape(out, sizeof(out), "\xe2\x82z", 3, 100);
	assert_string_equal(out, "\xef\xbf\xbdz");
	svg_escape(out, sizeof(out), "a\x01\x1b" "b", 4, 100);
	assert_string_equal(out, "a\xef\xbf\xbd\xef\xbf\xbd" "b");
	/* valid multi-byte text passes through untouched */
	svg_escape(out, sizeof(out), "h\xc3\xa9llo \xf0\x9f\x98\x80", 11, 100);
	assert_string_equal(out, "h\xc3\xa9llo \xf0\x9f\x98\x80");
	/* cut by characters, never inside one, ending with an ellipsis */
	assert_int_equal(svg_escape(out, sizeof(out), "abcdef", 6, 4), 4);
	assert_string_equal(out, "abc\xe2\x80\xa6");
	assert_int_equal(svg_escape(out, sizeof(out), "\xc3\xa9\xc3\xa9\xc3\xa9", 6, 2), 2);
	assert_string_equal(out, "\xc3\xa9\xe2\x80\xa6");
	assert_int_equal(svg_escape(out, sizeof(out), "abc", 3, 3), 3);
	assert_string_equal(out, "abc");
	assert_int_equal(svg_escape(out, sizeof(out), "abc", 3, 0), 0);
	assert_string_equal(out, "");
	/* an entity is never cut in half by a small buffer */
	svg_escape(out, 9, "&&&&", 4, 100);
	assert_int_equal(count(out, "&amp;") * 5 + (strstr(out, "\xe2\x80\xa6") ? 3 : 0),
			 strlen(out));
}

/* ------------------------------------------------------------- nesting */

static void test_nest(void **state)
{
	/* sorted by ts, longest first, as the renderer sorts a thread */
	struct svg_item v[] = {
		{ .ts = 0, .dur = 100, .kind = SHMTRACE_KIND_SPAN },	/* A */
		{ .ts = 10, .dur = 50, .kind = SHMTRACE_KIND_SPAN },	/* B in A */
		{ .ts = 15, .kind = SHMTRACE_KIND_INSTANT },
		{ .ts = 20, .dur = 10, .kind = SHMTRACE_KIND_SPAN },	/* C in B */
		{ .ts = 30, .dur = 5, .kind = SHMTRACE_KIND_SPAN },	/* starts as C ends */
		{ .ts = 60, .dur = 30, .kind = SHMTRACE_KIND_SPAN },	/* D in A, after B */
		{ .ts = 100, .dur = 10, .kind = SHMTRACE_KIND_SPAN },	/* E: after A */
		{ .ts = 105, .dur = 20, .kind = SHMTRACE_KIND_SPAN },	/* outlives E */
	};
	const unsigned want[] = { 0, 1, 0, 2, 2, 1, 0, 1 };

	(void)state;
	assert_int_equal(svg_nest(v, sizeof(v) / sizeof(v[0])), 2);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		assert_int_equal(v[i].depth, want[i]);
	assert_int_equal(svg_nest(v, 0), 0);
}

/* -------------------------------------------------- a synthetic capture */

enum { S_CAT = 1, S_EVIL, S_INNER, S_HOP, S_LATE, S_CTR, S_BAD };

/*
 * pid 100 "alpha&co": "a<b&c" [1000, 2000) holding "inner", a flow hop at
 * 1500 and a counter; pid 200: the flow's next hop at 1600 and an instant;
 * one span far later, at 100 us, to be left out of a narrow window.
 */
static void make_capture(const char *path)
{
	struct shmt_cap_header h = {
		.part = 0, .run_id = 3, .ring_capacity = 1024,
		.realtime0 = 1700000000000000000ull, .mono0 = 1000, .started_ns = 1000,
	};
	struct shmt_cap_string s[] = {
		{ S_CAT, 3, "cat" }, { S_EVIL, 5, "a<b&c" }, { S_INNER, 5, "inner" },
		{ S_HOP, 3, "hop" }, { S_LATE, 4, "late" }, { S_CTR, 5, "depth" },
		{ S_BAD, 4, "bad\xff" },
	};
	struct shmt_thread th[2] = { { .pid = 100, .tid = 100, .start_time = 5 },
				     { .pid = 200, .tid = 201, .start_time = 6 } };
	struct shmt_record r[] = {
		{ .ts = 1000, .dur = 1000, .pid = 100, .tid = 100, .name = S_EVIL },
		{ .ts = 1100, .dur = 200, .pid = 100, .tid = 100, .name = S_INNER },
		{ .ts = 1200, .dur = 5, .pid = 100, .tid = 100, .name = S_CTR,
		  .commit = SHMTRACE_KIND_COUNTER },
		{ .ts = 1500, .dur = 100, .pid = 100, .tid = 100, .name = S_HOP, .flow = 77 },
		{ .ts = 1600, .dur = 100, .pid = 200, .tid = 201, .name = S_HOP, .flow = 77 },
		{ .ts = 1700, .pid = 200, .tid = 201, .name = S_BAD,
		  .commit = SHMTRACE_KIND_INSTANT },
		{ .ts = 1800, .dur = 9, .pid = 100, .tid = 100, .name = S_CTR,
		  .commit = SHMTRACE_KIND_COUNTER },
		{ .ts = 100000, .dur = 10, .pid = 200, .tid = 201, .name = S_LATE },
	};
	struct shmt_cap_end e = { .records = 8, .end_ns = 200000 };
	msgpack_sbuffer b;

	snprintf(h.ring, sizeof(h.ring), "svgring");
	strcpy(th[0].name, "main");
	strcpy(th[0].pname, "alpha&co");
	strcpy(th[1].name, "io<1>");
	strcpy(th[1].pname, "beta");
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		r[i].cat = S_CAT;
		if (!r[i].commit)
			r[i].commit = SHMTRACE_KIND_SPAN;
	}
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, s, sizeof(s) / sizeof(s[0])), 0);
	assert_int_equal(shmt_cap_put_threads(&b, th, 2), 0);
	assert_int_equal(shmt_cap_put_records(&b, 0, r, sizeof(r) / sizeof(r[0])), 0);
	assert_int_equal(shmt_cap_put_end(&b, &e), 0);
	put_file(path, b.data, b.size);
	msgpack_sbuffer_destroy(&b);
}

/* Runs `shmtrace svg ARGS... NULL` in this process; returns its exit code. */
static int svg_run(const char *a0, ...)
{
	char *argv[16] = { "svg", (char *)a0 };
	int argc = a0 ? 2 : 1;
	va_list ap;

	va_start(ap, a0);
	while (a0 && argc < 15 && (argv[argc] = va_arg(ap, char *)))
		argc++;
	va_end(ap);
	argv[argc] = NULL;
	return cmd_svg(argc, argv);
}

/* ------------------------------------------------- XML well-formedness */

static bool utf8_ok(const unsigned char *s)
{
	while (*s) {
		size_t n = *s < 0x80 ? 1 : (*s & 0xe0) == 0xc0 ? 2 : (*s & 0xf0) == 0xe0 ? 3
				   : (*s & 0xf8) == 0xf0 ? 4 : 0;

		if (!n || (n == 2 && *s < 0xc2))
			return false;
		for (size_t i = 1; i < n; i++)
			if ((s[i] & 0xc0) != 0x80)
				return false;
		s += n;
	}
	return true;
}

/* An '&' starts one of the five entities or a character reference. */
static bool entity_ok(const char *p)
{
	static const char *const ent[] = { "&amp;", "&lt;", "&gt;", "&quot;", "&apos;" };

	for (size_t i = 0; i < 5; i++)
		if (!strncmp(p, ent[i], strlen(ent[i])))
			return true;
	return p[1] == '#' && strchr(p, ';');
}

/* Skips the attributes (name="value") of a tag from *pp, up to its '>' or
 * '/'. Returns NULL or what is wrong. */
static const char *xml_attrs(const char **pp)
{
	const char *p = *pp;

	while (*p && *p != '>' && *p != '/') {
		if (*p == ' ' || *p == '\n' || *p == '\t') {
			p++;
			continue;
		}
		while (*p && *p != '=' && *p != '>')
			p++;
		if (*p != '=' || p[1] != '"')
			return "attribute without a quoted value";
		for (p += 2; *p && *p != '"'; p++) {
			if (*p == '<')
				return "< in an attribute";
			if (*p == '&' && !entity_ok(p))
				return "bare & in an attribute";
		}
		if (!*p)
			return "unterminated attribute";
		p++;
	}
	*pp = p;
	return NULL;
}

/*
 * A small checker, enough for what the renderer writes: one root element,
 * tags balanced and properly nested, attribute values quoted and free of
 * '<' and bare '&', text free of '<', '>' and bare '&', no control
 * characters, valid UTF-8. Returns NULL or what is wrong.
 */
static const char *xml_check(const char *doc)
{
	char stack[64][32];
	int sp = 0, roots = 0;
	const char *p = doc;

	if (!utf8_ok((const unsigned char *)doc))
		return "invalid UTF-8";
	if (!strncmp(p, "<?xml", 5)) {
		p = strstr(p, "?>");
		if (!p)
			return "unterminated declaration";
		p += 2;
	}
	while (*p) {
		if ((unsigned char)*p < 0x20 && *p != '\n' && *p != '\t' && *p != '\r')
			return "control character";
		if (*p == '&') {
			if (!entity_ok(p))
				return "bare & in text";
			p++;
		} else if (*p == '>') {
			return "bare > in text";
		} else if (*p == '<') {
			bool close = p[1] == '/';
			const char *why;
			char name[32];
			size_t n = 0;

			p += close ? 2 : 1;
			while (*p && !strchr(" \t\n/>", *p) && n < sizeof(name) - 1)
				name[n++] = *p++;
			name[n] = 0;
			if (!n)
				return "empty tag name";
			why = xml_attrs(&p);
			if (why)
				return why;
			if (*p == '/') {
				if (close || p[1] != '>')
					return "bad self-closing tag";
				if (!sp)
					roots++;
				p += 2;
				continue;
			}
			if (*p != '>')
				return "unterminated tag";
			p++;
			if (close) {
				if (!sp || strcmp(stack[sp - 1], name))
					return "mismatched end tag";
				sp--;
			} else {
				if (sp == 64)
					return "too deep";
				if (!sp)
					roots++;
				snprintf(stack[sp++], sizeof(stack[0]), "%s", name);
			}
		} else {
			p++;
		}
	}
	if (sp)
		return "unclosed element";
	return roots == 1 ? NULL : "not exactly one root element";
}

/* The picture in tmp(name), which must be well-formed (printed if not). */
static char *read_svg(const char *name)
{
	char *doc = slurp(tmp(name));
	const char *why = xml_check(doc);

	if (why)
		fprintf(stderr, "%s: %s\n%s\n", name, why, doc);
	assert_null(why);
	return doc;
}

static void test_xml_checker(void **state)
{
	(void)state;
	/* the checker catches what it is there for */
	assert_null(xml_check("<?xml version=\"1.0\"?>\n<a x=\"1\"><b/>t &amp; u</a>\n"));
	assert_non_null(xml_check("<a><b></a></b>"));
	assert_non_null(xml_check("<a>x & y</a>"));
	assert_non_null(xml_check("<a>x < y</a>"));
	assert_non_null(xml_check("<a x=\"<\"/>"));
	assert_non_null(xml_check("<a>\xff</a>"));
	assert_non_null(xml_check("<a/><b/>"));
	assert_non_null(xml_check("<a>"));
}

static void test_render(void **state)
{
	char *doc;

	(void)state;
	make_capture(tmp("t.capture"));
	/* a short trace: the whole of it by default */
	assert_int_equal(svg_run(tmp("t.capture"), "-o", tmp("all.svg"), NULL), 0);
	doc = read_svg("all.svg");
	assert_non_null(strstr(doc, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
	/* untrusted names, escaped wherever they appear */
	assert_non_null(strstr(doc, ">a&lt;b&amp;c"));
	assert_null(strstr(doc, "a<b"));
	assert_non_null(strstr(doc, "alpha&amp;co (pid 100)"));
	assert_non_null(strstr(doc, ">io&lt;1&gt;</text>"));
	assert_non_null(strstr(doc, "bad\xef\xbf\xbd"));
	/* one flow of two slices: one arrow, across the processes */
	assert_int_equal(count(doc, "marker-end=\"url(#ah"), 1);
	assert_int_equal(count(doc, "<marker id=\"ah"), 8);
	assert_int_equal(count(doc, "<path class=\"a\""), 1);
	/* counter as a step line, instant as a diamond */
	assert_non_null(strstr(doc, "max 9"));
	assert_non_null(strstr(doc, "l5,5l-5,5l-5,-5z"));
	assert_non_null(strstr(doc, ">late"));
	assert_int_equal(count(doc, "</title></rect>"), 5);
	free(doc);

	/* the window: [0, 5us] of t0 = 1000 keeps all but "late" */
	assert_int_equal(svg_run(tmp("t.capture"), "-o", tmp("win.svg"), "--to", "5us", NULL), 0);
	doc = read_svg("win.svg");
	assert_null(strstr(doc, ">late"));
	assert_int_equal(count(doc, "</title></rect>"), 4);
	assert_int_equal(count(doc, "<path class=\"a\""), 1);
	free(doc);

	/* [610ns, 650ns]: the first hop ended before it, the second and the
	 * outer span overlap it and are kept, cut; no arrow without both ends */
	assert_int_equal(svg_run(tmp("t.capture"), "-o", tmp("mid.svg"), "--from", "610ns", "--to",
				 "650ns", NULL),
			 0);
	doc = read_svg("mid.svg");
	assert_int_equal(count(doc, "<path class=\"a\""), 0);
	assert_non_null(strstr(doc, ">hop"));
	assert_non_null(strstr(doc, "a&lt;b&amp;c"));
	assert_null(strstr(doc, ">inner"));
	free(doc);

	/* --pid: the other process is gone, so is the arrow */
	assert_int_equal(svg_run(tmp("t.capture"), "-o", tmp("pid.svg"), "--pid", "200", NULL), 0);
	doc = read_svg("pid.svg");
	assert_null(strstr(doc, "alpha"));
	assert_non_null(strstr(doc, "beta (pid 200)"));
	assert_int_equal(count(doc, "<path class=\"a\""), 0);
	free(doc);

	/* nested spans go one row down: "inner" sits ROW_H below its parent */
	assert_int_equal(svg_run(tmp("t.capture"), "-o", tmp("n.svg"), "--to", "1us", NULL), 0);
	doc = slurp(tmp("n.svg"));
	{
		const char *outer = strstr(doc, "<title>a&lt;b&amp;c");
		const char *inner = strstr(doc, "<title>inner");
		const char *yo, *yi;

		assert_non_null(outer);
		assert_non_null(inner);
		/* the y attribute of each rect, found backwards from its title */
		for (yo = outer; yo > doc && strncmp(yo, " y=\"", 4); yo--)
			;
		for (yi = inner; yi > doc && strncmp(yi, " y=\"", 4); yi--)
			;
		assert_float_equal(strtod(yi + 4, NULL) - strtod(yo + 4, NULL), 18.0, 0.01);
	}
	free(doc);
}

/* More records in the window than SVG_MAX_ITEMS: the rest are counted
 * and left out, and said so; many flows: no arrows, and said so. */
static void test_caps(void **state)
{
	size_t n = SVG_MAX_ITEMS + 7;
	struct shmt_cap_header h = { .run_id = 4, .ring_capacity = 1024, .mono0 = 1000 };
	struct shmt_cap_string str[] = { { 1, 1, "c" }, { 2, 1, "x" } };
	struct shmt_thread th = { .pid = 100, .tid = 100, .start_time = 5 };
	struct shmt_record *r = calloc(n, sizeof(*r));
	msgpack_sbuffer b;
	char *doc;

	(void)state;
	assert_non_null(r);
	snprintf(h.host, sizeof(h.host), "h");
	snprintf(h.ring, sizeof(h.ring), "big");
	snprintf(th.name, sizeof(th.name), "t");
	snprintf(th.pname, sizeof(th.pname), "p");
	for (size_t i = 0; i < n; i++)
		/* pairs of hops: one arrow per pair, 100003 of them */
		r[i] = (struct shmt_record){ .ts = 1000 + i * 10, .dur = 5, .pid = 100, .tid = 100,
					     .name = 2, .cat = 1, .flow = i / 2 + 1,
					     .commit = SHMTRACE_KIND_SPAN };
	msgpack_sbuffer_init(&b);
	assert_int_equal(shmt_cap_put_header(&b, &h), 0);
	assert_int_equal(shmt_cap_put_strings(&b, str, 2), 0);
	assert_int_equal(shmt_cap_put_threads(&b, &th, 1), 0);
	assert_int_equal(shmt_cap_put_records(&b, 0, r, n), 0);
	assert_int_equal(shmt_cap_put_end(&b, &(struct shmt_cap_end){ .records = n }), 0);
	put_file(tmp("big.capture"), b.data, b.size);
	msgpack_sbuffer_destroy(&b);
	free(r);

	assert_int_equal(svg_run(tmp("big.capture"), "-o", tmp("big.svg"), "--to", "10s", NULL), 0);
	doc = slurp(tmp("big.svg"));
	assert_non_null(strstr(doc, "200000 records in it, 7 more left out"));
	assert_non_null(strstr(doc, "100000 flow arrows not drawn"));
	assert_int_equal(count(doc, "<path class=\"a\""), 0);
	free(doc);
}

/*
 * A window that ends near 2^64 ns (a producer's span from UINT64_MAX-1001
 * to UINT64_MAX-1, or the same in a capture) wrapped the axis's tick loop:
 * it wrote ticks without end. svg finishes, with the file size bounded
 * (a loop without end would fill it and be killed by the guard), and
 * draws the span and about ten ticks.
 */
static void test_window_near_2_64(void **state)
{
	const char *ring = test_ring_name("svgwrap");
	struct shmt_record r = { .ts = UINT64_MAX - 1001, .dur = 1000, .pid = 100, .tid = 100,
				 .name = 1, .cat = 1, .commit = SHMTRACE_KIND_SPAN };
	struct shmt_cap_string str[1] = { { 1, 1, "s" } };
	struct shmt_thread th = { .pid = 100, .tid = 100, .start_time = 5 };
	char cap[512], out[512];
	char *from_ring[] = { bin, "svg", "--ring", (char *)ring, "-o", out, NULL };
	char *from_cap[] = { bin, "svg", cap, "-o", out, NULL };
	char *const *runs[] = { from_ring, from_cap };
	shmtrace_t *t;
	uint32_t n;

	(void)state;
	snprintf(cap, sizeof(cap), "%s", tmp("wrap.capture"));
	snprintf(out, sizeof(out), "%s", tmp("wrap.svg"));
	write_capture(cap, 9, str, 1, &th, 1, &r, 1);
	small_ring(ring, 1024, 0);
	assert_int_equal(shmtrace_open(ring, &t), 0);
	n = shmtrace_intern(t, "s");
	assert_int_equal(shmtrace_span(t, n, n, UINT64_MAX - 1001, UINT64_MAX - 1, 0), 0);
	shmtrace_close(t);
	fsize_limit = 1 << 20;
	for (size_t i = 0; i < 2; i++) {
		char *doc;

		assert_int_equal(run_guarded(NULL, tmp("wrap.err"), runs[i]), 0);
		doc = slurp(out);
		assert_non_null(strstr(doc, "</svg>"));
		assert_int_equal(count(doc, "<rect x="), 1 + 1);	/* track band + the span */
		assert_in_range(count(doc, "<line class=\"g\""), 5, 13);
		free(doc);
	}
	fsize_limit = 0;
	shmtrace_ring_unlink(ring);
}

static void test_usage(void **state)
{
	char cap[512];

	(void)state;
	/* a copy: tmp() reuses its buffers */
	snprintf(cap, sizeof(cap), "%s", tmp("t.capture"));
	make_capture(cap);
	assert_int_equal(svg_run(cap, NULL), EXIT_USAGE);
	assert_int_equal(svg_run("-o", tmp("x.svg"), NULL), EXIT_USAGE);
	assert_int_equal(svg_run(cap, "-o", tmp("x.svg"), "--width", "10", NULL), EXIT_USAGE);
	assert_int_equal(svg_run(cap, "-o", tmp("x.svg"), "--width", "12ab", NULL), EXIT_USAGE);
	assert_int_equal(svg_run(cap, "-o", tmp("x.svg"), "--from", "soon", NULL), EXIT_USAGE);
	assert_int_equal(svg_run(cap, "-o", tmp("x.svg"), "--from", "2ms", "--to", "1ms", NULL),
			 EXIT_USAGE);
	assert_int_equal(svg_run(cap, "-o", tmp("x.svg"), "--pid", "0", NULL), EXIT_USAGE);
	assert_int_equal(svg_run(cap, "-o", tmp("x.svg"), "--bogus", NULL), EXIT_USAGE);
	assert_int_equal(svg_run(cap, "-o", tmp("x.svg"), "--from", NULL), EXIT_USAGE);
	/* runtime errors: 1, and no half-written picture left behind */
	/* captures with --ring add what the ring holds: here there is none */
	assert_int_equal(svg_run(cap, "-o", tmp("x.svg"), "--ring", "r", NULL), EXIT_RUNTIME);
	assert_int_equal(access(tmp("x.svg"), F_OK), -1);
	assert_int_equal(svg_run(tmp("missing"), "-o", tmp("x.svg"), NULL), EXIT_RUNTIME);
	assert_int_equal(access(tmp("x.svg"), F_OK), -1);
	assert_int_equal(svg_run(cap, "-o", tmp("x.svg"), "--pid", "4242", NULL), EXIT_RUNTIME);
	assert_int_equal(access(tmp("x.svg"), F_OK), -1);
	assert_int_equal(svg_run(cap, "-o", "/nonexistent-dir/x.svg", NULL), EXIT_RUNTIME);
	assert_int_equal(svg_run("--help", NULL), EXIT_OK);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("svg", false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_nest),
		cmocka_unit_test(test_xml_checker),
		cmocka_unit_test(test_render),
		cmocka_unit_test(test_caps),
		cmocka_unit_test(test_window_near_2_64),
		cmocka_unit_test(test_usage),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
