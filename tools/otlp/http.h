/* SPDX-License-Identifier: MIT */
/*
 * http.h - the least HTTP/1.1 client that OTLP/HTTP needs: one POST per
 * connection to a plain http:// URL, the status and a piece of the answer.
 */
#ifndef SHMTRACE_HTTP_H
#define SHMTRACE_HTTP_H

#include <stddef.h>

struct http_url {
	char host[256];		/* name or address (IPv6 without brackets) */
	char port[8];
	char hostport[272];	/* for the Host header, as given */
	char path[1024];	/* the prefix's path + the suffix, or the path as given */
};

/* Parses "http://host[:port][/prefix]" and appends suffix to the path
 * ("/v1/traces") unless the path ends in it already (trailing slashes
 * aside). Returns 0, or -EINVAL with the reason in err. */
int http_parse_url(const char *url, const char *suffix, struct http_url *u, char *err,
		   size_t errlen);

struct http_answer {
	int status;		/* 100..599 */
	char reason[64];	/* the status line's reason phrase ("Bad Request"), or "" */
	unsigned retry_after;	/* seconds from Retry-After, 0 if none */
	char body[512];		/* the start of the answer's body, NUL-terminated */
};

/*
 * POSTs body[0..len) with Content-Type: application/json, waiting at most
 * timeout_ms for each step (connect, send, receive). Returns 0 with the
 * answer, or -errno (-ECONNREFUSED, -ETIMEDOUT, -ECONNRESET, -EPROTO for an
 * answer that is not HTTP, ...) with the reason in err.
 */
int http_post(const struct http_url *u, const char *body, size_t len, int timeout_ms,
	      struct http_answer *a, char *err, size_t errlen);

#endif
