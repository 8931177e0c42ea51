/* SPDX-License-Identifier: MIT */
/*
 * test_cli_agree.c - what a new user's review of the commands found to
 * disagree: a mistake is told in one message with one exit status by
 * every command that meets it, and what a message counts or says of a
 * trace is true of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "cli_run.h"

/* argv (NULL-ended after bin and cmd) as a vector for run(). */
#define ARGV(...) ((char *[]){ bin, __VA_ARGS__, NULL })

/* --string-bytes: its help, its check and the man page's range agree (64
 * to 256M), in shmtrace create and in the collector. */
static void test_string_bytes_range(void **state)
{
	const char *ring = test_ring_name("strbytes");
	char *col_help[] = { collector_bin, "--help", NULL };

	(void)state;
	shmtrace_ring_unlink(ring);
	assert_int_equal(run(tmp("help.out"), NULL, ARGV("create", "--help")), 0);
	expect_in(tmp("help.out"), "--string-bytes BYTES text space for them, 64 to 256M");
	expect_not_in(tmp("help.out"), "at least\n                           256k");
	assert_int_equal(run(tmp("help.out"), NULL, col_help), 0);
	expect_in(tmp("help.out"), "64 to 256M");
	run_says(2, ARGV("create", (char *)ring, "--string-bytes", "1"),
		 "--string-bytes '1': need 64 to 256M", NULL);
	run_says(0, ARGV("create", (char *)ring, "--string-bytes", "64"), NULL, NULL);
	shmtrace_ring_unlink(ring);
}

/* An endpoint that is no URL is said to be none (with the form
 * expected), a usage error before any input is read; https:// is pointed
 * at a local collector. */
static void test_endpoint_not_a_url(void **state)
{
	(void)state;
	run_says(2, ARGV("export", (char *)tmp("none.cap"), "--format", "otlp", "--otlp-endpoint",
			 "foo"),
		 "shmtrace export: --otlp-endpoint 'foo': not a URL (expected http://HOST:PORT[/PATH])\n"
		 "Try 'shmtrace export --help'.", "https");
	run_says(2, ARGV("export", (char *)tmp("none.cap"), "--format", "otlp", "--otlp-endpoint",
			 "https://h:4318"),
		 "only http:// endpoints are supported (put a local OpenTelemetry Collector in "
		 "front of an https one)", NULL);
}

static int setup(void **state)
{
	(void)state;
	return cli_setup_for("agree", true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_string_bytes_range),
		cmocka_unit_test(test_endpoint_not_a_url),
	};

	return cmocka_run_group_tests(tests, setup, cli_teardown);
}
