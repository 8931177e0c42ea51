/* SPDX-License-Identifier: MIT */
/*
 * http.c - a small HTTP/1.1 client over a socket, for OTLP/HTTP: the
 * exporter POSTs a few MB at a time to a collector on the same machine or
 * network, so one connection per request ("Connection: close") and no TLS
 * (docs/DESIGN.md says why this is not libcurl).
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "http.h"

int http_parse_url(const char *url, const char *suffix, struct http_url *u, char *err,
		   size_t errlen)
{
	const char *p, *hend, *path;
	size_t hl, pl, sl;

	memset(u, 0, sizeof(*u));
	if (strncmp(url, "http://", 7)) {
		snprintf(err, errlen, "'%s': only http:// endpoints are supported (put a local "
			 "OpenTelemetry Collector in front of an https one)", url);
		return -EINVAL;
	}
	p = url + 7;
	path = p + strcspn(p, "/?#");
	if (strpbrk(path, "?#")) {
		snprintf(err, errlen, "'%s': an endpoint has no query or fragment", url);
		return -EINVAL;
	}
	if (*p == '[') {
		/* [v6]:port */
		hend = strchr(p, ']');
		if (!hend || hend > path) {
			snprintf(err, errlen, "'%s': unclosed '[' in the host", url);
			return -EINVAL;
		}
		hl = (size_t)(hend - p - 1);
		if (hl == 0 || hl >= sizeof(u->host))
			goto bad_host;
		memcpy(u->host, p + 1, hl);
		hend++;
	} else {
		hend = p + strcspn(p, ":/");
		if (hend > path)
			hend = path;
		hl = (size_t)(hend - p);
		if (hl == 0 || hl >= sizeof(u->host))
			goto bad_host;
		memcpy(u->host, p, hl);
	}
	if (*hend == ':') {
		size_t n = (size_t)(path - hend - 1);
		char *end;
		unsigned long port;

		if (n == 0 || n >= sizeof(u->port))
			goto bad_port;
		memcpy(u->port, hend + 1, n);
		port = strtoul(u->port, &end, 10);
		if (*end || port == 0 || port > 65535)
			goto bad_port;
	} else if (hend != path) {
		goto bad_host;
	} else {
		snprintf(u->port, sizeof(u->port), "80");
	}
	if ((size_t)(path - p) >= sizeof(u->hostport))
		goto bad_host;
	memcpy(u->hostport, p, (size_t)(path - p));
	pl = strlen(path);
	while (pl && path[pl - 1] == '/')
		pl--;
	/* a URL that ends in the suffix is the whole URL already (as
	 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is), any other a base to which it
	 * is appended (as OTEL_EXPORTER_OTLP_ENDPOINT is) */
	sl = strlen(suffix);
	if (pl >= sl && !memcmp(path + pl - sl, suffix, sl))
		sl = 0;
	if (pl + sl >= sizeof(u->path)) {
		snprintf(err, errlen, "'%s': path too long", url);
		return -EINVAL;
	}
	memcpy(u->path, path, pl);
	memcpy(u->path + pl, suffix, sl);
	u->path[pl + sl] = 0;
	return 0;
bad_host:
	snprintf(err, errlen, "'%s': no valid host", url);
	return -EINVAL;
bad_port:
	snprintf(err, errlen, "'%s': bad port", url);
	return -EINVAL;
}

static int connect_to(const struct http_url *u, int timeout_ms, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = timeout_ms % 1000 * 1000 };
	int rc, fd = -1, e = ECONNREFUSED;

	rc = getaddrinfo(u->host, u->port, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "%s: %s", u->host, gai_strerror(rc));
		return rc == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			e = errno;
			continue;
		}
		/* bounds connect() as well as send() and recv() on Linux */
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		e = errno == EINPROGRESS || errno == EAGAIN ? ETIMEDOUT : errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		snprintf(err, errlen, "connecting to %s: %s", u->hostport, strerror(e));
		return -e;
	}
	return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads until the end of the headers and a piece of the body (or EOF). */
static int parse_answer(const char *buf, size_t n, struct http_answer *a)
{
	const char *hdr_end = memmem(buf, n, "\r\n\r\n", 4), *line, *body;
	int major, minor, status;
	bool chunked = false;
	size_t blen;

	if (sscanf(buf, "HTTP/%d.%d %d", &major, &minor, &status) != 3 || status < 100 ||
	    status > 599)
		return -EPROTO;
	a->status = status;
	/* "HTTP/1.1 400 Bad Request": what follows the code, to the line's end */
	line = strchr(buf, ' ');
	line = line ? line + strspn(line, " ") : buf;
	line += strspn(line, "0123456789");
	line += strspn(line, " ");
	snprintf(a->reason, sizeof(a->reason), "%.*s", (int)strcspn(line, "\r\n"), line);
	if (!hdr_end)
		return 0;
	for (line = strstr(buf, "\r\n"); line && line < hdr_end; line = strstr(line + 2, "\r\n"))
		if (!strncasecmp(line + 2, "Retry-After:", 12))
			a->retry_after = (unsigned)strtoul(line + 14, NULL, 10);
		else if (!strncasecmp(line + 2, "Transfer-Encoding:", 18) &&
			 strstr(line + 20, "chunked") && strstr(line + 20, "chunked") < hdr_end)
			chunked = true;
	body = hdr_end + 4;
	blen = n - (size_t)(body - buf);
	if (chunked) {
		/* the first chunk is enough to say why: "SIZE\r\nDATA" */
		char *end;
		unsigned long sz = strtoul(body, &end, 16);
		const char *data = strstr(body, "\r\n");

		if (data && end != body) {
			data += 2;
			blen = n - (size_t)(data - buf);
			if (sz < blen)
				blen = sz;
			body = data;
		}
	}
	snprintf(a->body, sizeof(a->body), "%.*s", (int)blen, body);
	return 0;
}

int http_post(const struct http_url *u, const char *body, size_t len, int timeout_ms,
	      struct http_answer *a, char *err, size_t errlen)
{
	char head[1600], buf[4096];
	size_t got = 0;
	int fd, n, ret;

	memset(a, 0, sizeof(*a));
	n = snprintf(head, sizeof(head),
		     "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: shmtrace/" SHMTRACE_VERSION
		     "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n", u->path, u->hostport, len);
	fd = connect_to(u, timeout_ms, err, errlen);
	if (fd < 0)
		return fd;
	ret = send_all(fd, head, (size_t)n);
	if (ret == 0)
		ret = send_all(fd, body, len);
	/* an endpoint may answer (413, 400) and close before taking all:
	 * read what it said even when sending failed */
	for (;;) {
		ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r < 0 && !got)
				ret = ret ? ret : errno == EAGAIN ? -ETIMEDOUT : -errno;
			break;
		}
		got += (size_t)r;
		buf[got] = 0;
		if (got == sizeof(buf) - 1)
			break;
	}
	close(fd);
	if (got) {
		buf[got] = 0;
		if (parse_answer(buf, got, a) == 0)
			return 0;
		snprintf(err, errlen, "%s did not answer in HTTP", u->hostport);
		return -EPROTO;
	}
	if (!ret)
		ret = -ECONNRESET;
	snprintf(err, errlen, "%s: %s before an answer", u->hostport,
		 ret == -ETIMEDOUT ? "timed out" : strerror(-ret));
	return ret;
}
