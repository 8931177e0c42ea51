/* SPDX-License-Identifier: MIT */
/*
 * http.h - the least HTTP/1.1 client that OTLP/HTTP needs: POSTs to a
 * plain http:// URL over a connection kept open between requests
 * (keep-alive) and opened again when the endpoint closed it, with the
 * status, Retry-After and the start of each answer's body.
 */
#ifndef SHMTRACE_HTTP_H
#define SHMTRACE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The bound of connecting and of each request unless the environment
 * sets one: the OpenTelemetry exporters' default. */
#define HTTP_TIMEOUT_MS		10000

/*
 * The bound of connecting and of each request (http_conn_post()), in
 * milliseconds, from the OpenTelemetry
 * exporters' variables: OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, else
 * OTEL_EXPORTER_OTLP_TIMEOUT, else HTTP_TIMEOUT_MS. Returns it (1 to
 * 3600000), or -EINVAL with the reason in err.
 */
int http_timeout_from_env(char *err, size_t errlen);

/* What a body of an answer is kept of: enough for an OTLP partial
 * success, or the first line of an error. */
#define HTTP_BODY_KEEP	4096u

struct http_answer {
	int status;		/* 100..599 */
	char reason[64];	/* the status line's reason phrase ("Bad Request"), or "" */
	unsigned retry_after;	/* seconds from Retry-After, 0 if none */
	char ctype[64];		/* its Content-Type, or "" */
	size_t body_len;	/* bytes kept in body (a longer body is read, not kept) */
	char body[HTTP_BODY_KEEP + 1];	/* the start of the body, NUL after body_len */
};

/* One request: its body and how it is encoded. */
struct http_req {
	const char *ctype;	/* Content-Type */
	const char *cenc;	/* Content-Encoding, or NULL */
	const void *body;
	size_t len;
};

/*
 * A connection to one endpoint. headers, if not NULL, are extra header
 * lines sent with every request, each "Name: value\r\n" (authentication,
 * say); they must outlive the connection.
 */
struct http_conn {
	struct http_url u;
	int fd;			/* -1: none open */
	int timeout_ms;		/* for connecting, and for each request in all */
	bool keep;		/* keep the connection open between requests */
	const char *headers;
	uint64_t connects;	/* connections opened */
};

void http_conn_init(struct http_conn *c, const struct http_url *u, int timeout_ms, bool keep,
		    const char *headers);
void http_conn_close(struct http_conn *c);

/*
 * POSTs r, waiting at most c->timeout_ms to connect, and as long for the
 * request to be sent and answered (an endpoint that sends its answer a
 * byte at a time, or never ends it, gets at most one timeout more: each
 * send() and recv() is bounded by it too). A kept connection
 * that the endpoint closed while idle is opened again and the request
 * sent on the new one, once. Returns 0 with the answer (the connection
 * kept open when the endpoint allows it), or -errno (-ECONNREFUSED,
 * -ETIMEDOUT, -ECONNRESET, -EPROTO for an answer that is not HTTP, ...)
 * with the reason in err; the connection is then closed.
 */
int http_conn_post(struct http_conn *c, const struct http_req *r, struct http_answer *a, char *err,
		   size_t errlen);

/* One POST of a JSON body on a connection of its own, closed after it. */
int http_post(const struct http_url *u, const char *body, size_t len, int timeout_ms,
	      struct http_answer *a, char *err, size_t errlen);

#endif
