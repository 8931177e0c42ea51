/* SPDX-License-Identifier: MIT */
/*
 * http.c - a small HTTP/1.1 client over a socket, for OTLP/HTTP: the
 * exporter POSTs a few MB at a time to a collector on the same machine or
 * network; the live stream keeps its connection open between requests.
 * No TLS (docs/DESIGN.md says why this is not libcurl).
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "http.h"
#include "term.h"

int http_parse_url(const char *url, const char *suffix, struct http_url *u, char *err,
		   size_t errlen)
{
	const char *p, *hend, *path;
	size_t hl, pl, sl;

	memset(u, 0, sizeof(*u));
	/* a space or a control character would end the request line, or
	 * start a header, early */
	for (const char *c = url; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f) {
			snprintf(err, errlen, "an endpoint URL has no space or control character "
				 "(byte %#x at %zu)", (unsigned char)*c, (size_t)(c - url));
			return -EINVAL;
		}
	if (strncmp(url, "http://", 7)) {
		/* a scheme ("ftp://") is a URL this does not speak; anything
		 * else ("localhost:4318") is no URL at all */
		size_t scheme = strspn(url, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					    "0123456789+-.");

		if (!scheme || strncmp(url + scheme, "://", 3))
			snprintf(err, errlen, "'%s': not a URL (expected http://HOST:PORT[/PATH])",
				 url);
		else if (!strncasecmp(url, "https://", 8))
			snprintf(err, errlen, "'%s': only http:// endpoints are supported (put a local "
				 "OpenTelemetry Collector in front of an https one)", url);
		else
			snprintf(err, errlen, "'%s': only http:// endpoints are supported", url);
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

int http_timeout_from_env(char *err, size_t errlen)
{
	static const char *const names[] = { "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
					     "OTEL_EXPORTER_OTLP_TIMEOUT" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *v = getenv(names[i]);
		unsigned long ms;
		char *end;

		if (!v || !*v)
			continue;
		errno = 0;
		ms = strtoul(v, &end, 10);
		if (*v < '0' || *v > '9' || *end || errno || ms < 1 || ms > 3600000) {
			snprintf(err, errlen, "%s='%s': give whole milliseconds from 1 to 3600000",
				 names[i], v);
			return -EINVAL;
		}
		return (int)ms;
	}
	return HTTP_TIMEOUT_MS;
}

/* A socket's bound on each send() and recv() (and on Linux connect()). */
static void set_timeouts(int fd, uint64_t ns)
{
	struct timeval tv = { .tv_sec = (time_t)(ns / 1000000000ull),
			      .tv_usec = (suseconds_t)(ns % 1000000000ull / 1000) };

	if (!tv.tv_sec && !tv.tv_usec)
		tv.tv_usec = 1;	/* 0 would be no bound */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* Connects to u within timeout_ms in all once its name is looked up
 * (the lookup is bounded by the resolver alone), whatever addresses it
 * has: each tried gets a share of what is left, so that one that never
 * answers (a black-holed IPv6 address) leaves time for the next. */
static int connect_to(const struct http_url *u, int timeout_ms, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	uint64_t timeout = (uint64_t)timeout_ms * 1000000ull, deadline;
	int rc, fd = -1, e = ECONNREFUSED;
	unsigned left = 0;

	rc = getaddrinfo(u->host, u->port, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "%s: %s", u->host, gai_strerror(rc));
		return rc == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	}
	deadline = clock_ns(CLOCK_MONOTONIC) + timeout;
	for (ai = res; ai; ai = ai->ai_next)
		left++;
	for (ai = res; ai; ai = ai->ai_next, left--) {
		uint64_t now = clock_ns(CLOCK_MONOTONIC);

		if (now >= deadline) {
			e = ETIMEDOUT;
			break;
		}
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			e = errno;
			continue;
		}
		set_timeouts(fd, (deadline - now) / left);
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			/* each send() and recv() of a request: the whole timeout */
			set_timeouts(fd, timeout);
			break;
		}
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


/* Sends p[0..n) by the deadline (each send() is bounded by SO_SNDTIMEO,
 * the deadline bounds an endpoint that takes a byte at a time). */
static int send_all(int fd, const char *p, size_t n, uint64_t deadline)
{
	while (n) {
		ssize_t w;

		if (clock_ns(CLOCK_MONOTONIC) >= deadline)
			return -ETIMEDOUT;
		w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* An answer being read: bytes buf[pos..len) not yet parsed, by the
 * exchange's deadline (CLOCK_MONOTONIC ns). */
struct rd {
	int fd;
	char buf[16384];
	size_t pos, len;
	size_t got;		/* bytes received in all */
	bool eof;
	bool late;		/* read once past the deadline */
	uint64_t deadline;
};

/* More bytes into r->buf (moving what is unread to the front). */
static int rd_fill(struct rd *r)
{
	ssize_t n;

	if (r->pos) {
		memmove(r->buf, r->buf + r->pos, r->len - r->pos);
		r->len -= r->pos;
		r->pos = 0;
	}
	if (r->len == sizeof(r->buf))
		return -EPROTO;
	/* each recv() is bounded by SO_RCVTIMEO; the deadline bounds the
	 * whole answer (a byte a second, headers or 1xx answers without end).
	 * Past it, what has come is still read once, without waiting: an
	 * endpoint that answers (413, 400) without taking the request makes
	 * the send take the whole timeout, and its answer is there */
	do {
		int flags = 0;

		if (clock_ns(CLOCK_MONOTONIC) >= r->deadline) {
			if (r->late)
				return -ETIMEDOUT;
			r->late = true;
			flags = MSG_DONTWAIT;
		}
		n = recv(r->fd, r->buf + r->len, sizeof(r->buf) - r->len, flags);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	if (n == 0)
		r->eof = true;
	r->len += (size_t)n;
	r->got += (size_t)n;
	return 0;
}

/* The next line (without its CRLF) at *line, NUL-terminated in place. */
static int rd_line(struct rd *r, char **line)
{
	for (;;) {
		char *nl = memmem(r->buf + r->pos, r->len - r->pos, "\r\n", 2);
		int ret;

		if (nl) {
			*nl = 0;
			*line = r->buf + r->pos;
			r->pos = (size_t)(nl + 2 - r->buf);
			return 0;
		}
		if (r->eof)
			return -ECONNRESET;
		if ((ret = rd_fill(r)) < 0)
			return ret;
	}
}

/* What the headers say of the body that follows. */
struct head {
	long long clen;		/* -1: none */
	bool chunked, close;
	bool bad;		/* a length no body can be read by */
};

#define SPACE	" \t\v\f\r\n"

/* The decimal number s starts with, at most max (saturated there),
 * followed by white space and then the end or one of the characters of
 * then; -1 if s does not start so. */
static long long decimal(const char *s, const char *then, unsigned long long max)
{
	unsigned long long v = 0;
	const char *p = s;

	for (; *p >= '0' && *p <= '9'; p++)
		v = v > (max - (unsigned)(*p - '0')) / 10 ? max : v * 10 + (unsigned)(*p - '0');
	p += strspn(p, SPACE);
	if (p == s || (*p && !strchr(then, *p)))
		return -1;
	return (long long)v;
}

/* Seconds from now to the HTTP-date s (IMF-fixdate, "Sun, 06 Nov 1994
 * 08:49:37 GMT"), 0 when it has passed; -1 if s is not one. */
static long long seconds_to_date(const char *s)
{
	struct tm tm;
	const char *end;
	time_t t;

	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (!end || end[strspn(end, SPACE)])
		return -1;
	t = timegm(&tm);
	return t > time(NULL) ? (long long)(t - time(NULL)) : 0;
}

static void parse_header(const char *h, struct http_answer *a, struct head *hd)
{
	const char *v = strchr(h, ':');

	if (!v)
		return;
	v++;
	v += strspn(v, " \t");
	if (!strncasecmp(h, "Retry-After:", 12)) {
		/* seconds, or a date; anything else is no Retry-After */
		long long sec = decimal(v, "", UINT_MAX);

		if (sec < 0)
			sec = seconds_to_date(v);
		a->retry_after = sec > 0 ? (unsigned)(sec < UINT_MAX ? sec : UINT_MAX) : 0;
	} else if (!strncasecmp(h, "Content-Length:", 15)) {
		/* not a number, or two that differ (in one header, a list, or
		 * in two): the body cannot be told from what follows it */
		for (const char *c = v; *c; c += strcspn(c, ","), c += strspn(c, ", \t")) {
			long long n = decimal(c, ",", LLONG_MAX);

			if (n < 0 || (hd->clen >= 0 && n != hd->clen))
				hd->bad = true;
			hd->clen = n;
		}
	} else if (!strncasecmp(h, "Transfer-Encoding:", 18)) {
		hd->chunked = strcasestr(v, "chunked") != NULL;
	} else if (!strncasecmp(h, "Connection:", 11)) {
		/* a close said in any header stands */
		hd->close |= strcasestr(v, "close") != NULL;
	} else if (!strncasecmp(h, "Content-Type:", 13)) {
		snprintf(a->ctype, sizeof(a->ctype), "%s", v);
	}
}

/* "HTTP/1.1 400 Bad Request", the separators any white space: the
 * version and the status (three digits), and the reason into a (escaped
 * for a terminal); -EPROTO if line is not a status line. */
static int status_line(const char *line, struct http_answer *a, int *minor)
{
	const char *p = line;

	if (strncmp(p, "HTTP/1.", 7) || p[7] < '0' || p[7] > '9' || !strchr(SPACE, p[8]) || !p[8])
		return -EPROTO;
	*minor = p[7] - '0';
	p += 8;
	p += strspn(p, SPACE);
	if (p[0] < '1' || p[0] > '5' || p[1] < '0' || p[1] > '9' || p[2] < '0' || p[2] > '9' ||
	    (p[3] && !strchr(SPACE, p[3])))
		return -EPROTO;
	a->status = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
	p += 3;
	p += strspn(p, SPACE);
	term_str(p, a->reason, sizeof(a->reason));
	return 0;
}

/* The status line and headers (a 1xx answer skipped). */
static int read_head(struct rd *r, struct http_answer *a, struct head *hd)
{
	char *line;
	int minor, ret;

	do {
		*hd = (struct head){ .clen = -1 };
		if ((ret = rd_line(r, &line)) < 0)
			return ret;
		if ((ret = status_line(line, a, &minor)) < 0)
			return ret;
		while ((ret = rd_line(r, &line)) == 0 && *line)
			parse_header(line, a, hd);
		if (ret < 0)
			return ret;
		/* HTTP/1.0 closes unless told otherwise */
		if (minor == 0)
			hd->close = true;
	} while (a->status < 200);
	return 0;
}

/* n body bytes, kept while a->body has room. */
static int read_bytes(struct rd *r, struct http_answer *a, unsigned long long n)
{
	int ret;

	while (n) {
		size_t k = r->len - r->pos;

		if (!k) {
			if (r->eof)
				return -ECONNRESET;
			if ((ret = rd_fill(r)) < 0)
				return ret;
			continue;
		}
		if (k > n)
			k = (size_t)n;
		if (a->body_len < HTTP_BODY_KEEP) {
			size_t keep = HTTP_BODY_KEEP - a->body_len < k ? HTTP_BODY_KEEP - a->body_len : k;

			memcpy(a->body + a->body_len, r->buf + r->pos, keep);
			a->body_len += keep;
		}
		r->pos += k;
		n -= k;
	}
	return 0;
}

/* A chunked body: "SIZE\r\nDATA\r\n"..., "0\r\n", trailers, "\r\n".
 * A size that is not hex (extensions after ';' aside), or data not
 * followed by its CRLF, is -EPROTO: the body's end cannot be told. */
static int read_chunked(struct rd *r, struct http_answer *a)
{
	char *line, *end;
	int ret;

	for (;;) {
		unsigned long long n;

		if ((ret = rd_line(r, &line)) < 0)
			return ret;
		if (!isxdigit((unsigned char)line[0]))
			return -EPROTO;
		n = strtoull(line, &end, 16);
		end += strspn(end, " \t");
		if (*end && *end != ';')
			return -EPROTO;
		if (n == 0)
			break;
		if ((ret = read_bytes(r, a, n)) < 0 || (ret = rd_line(r, &line)) < 0)
			return ret;
		if (*line)
			return -EPROTO;
	}
	while ((ret = rd_line(r, &line)) == 0 && *line)
		;
	return ret;
}

/* The body as the headers delimit it: 1 when the connection can be used
 * again, 0 when the body ends with it, or -errno. */
static int read_body(struct rd *r, struct http_answer *a, const struct head *hd)
{
	int ret;

	/* what the status says stands; nothing more is read (a chunked
	 * body's own framing wins over a Content-Length) */
	if (hd->bad && !hd->chunked)
		return 0;
	if (a->status == 204 || a->status == 304)
		ret = 0;
	else if (hd->chunked)
		ret = read_chunked(r, a);
	else if (hd->clen >= 0)
		ret = read_bytes(r, a, (unsigned long long)hd->clen);
	else {
		/* to the end of the connection */
		for (;;) {
			read_bytes(r, a, r->len - r->pos);
			if (r->eof)
				return 0;
			if ((ret = rd_fill(r)) < 0)
				return ret;
		}
	}
	/* bytes past the body are no answer to anything we sent: the
	 * connection is not used again */
	return ret < 0 ? ret : !hd->close && r->pos == r->len;
}

void http_conn_init(struct http_conn *c, const struct http_url *u, int timeout_ms, bool keep,
		    const char *headers)
{
	memset(c, 0, sizeof(*c));
	c->u = *u;
	c->fd = -1;
	c->timeout_ms = timeout_ms;
	c->keep = keep;
	c->headers = headers;
}

void http_conn_close(struct http_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* One attempt on c->fd: sends r and reads the answer. *answered says
 * whether any byte of it came. */
static int exchange(struct http_conn *c, const struct http_req *r, struct http_answer *a,
		    bool *answered)
{
	struct rd *rd = calloc(1, sizeof(*rd));
	/* the whole exchange, sent and answered, within the timeout (each
	 * step's own bound may add one more timeout at the end) */
	uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + (uint64_t)c->timeout_ms * 1000000ull;
	struct head hd;
	char *head = NULL;
	int n, ret, sret;

	*answered = false;
	/* the headers as long as --otlp-header's make them (a token for
	 * authentication may take kilobytes) */
	n = asprintf(&head,
		     "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: shmtrace/" SHMTRACE_VERSION
		     "\r\nContent-Type: %s\r\n%s%s%sContent-Length: %zu\r\n%s%s\r\n", c->u.path,
		     c->u.hostport, r->ctype, r->cenc ? "Content-Encoding: " : "",
		     r->cenc ? r->cenc : "", r->cenc ? "\r\n" : "", r->len,
		     c->keep ? "" : "Connection: close\r\n", c->headers ? c->headers : "");
	if (!rd || n < 0) {
		free(rd);
		if (n >= 0)
			free(head);
		return -ENOMEM;
	}
	sret = send_all(c->fd, head, (size_t)n, deadline);
	free(head);
	if (sret == 0)
		sret = send_all(c->fd, r->body, r->len, deadline);
	/* an endpoint may answer (413, 400) and close before taking all:
	 * read what it said even when sending failed */
	rd->fd = c->fd;
	rd->deadline = deadline;
	ret = read_head(rd, a, &hd);
	*answered = ret == 0 || rd->got > 0;
	/* a body cut short still says what the status says; the
	 * connection is not used again */
	if (ret == 0 && (ret = read_body(rd, a, &hd)) < 0)
		ret = 0;
	free(rd);
	if (ret < 0 && !*answered && sret < 0)
		ret = sret;
	a->body[a->body_len] = 0;
	return ret;
}

/* Whether a kept connection has nothing to read: no byte, no end. */
static bool idle_and_open(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 0;
}

int http_conn_post(struct http_conn *c, const struct http_req *r, struct http_answer *a, char *err,
		   size_t errlen)
{
	bool reused, answered;
	int ret;

	for (;;) {
		memset(a, 0, offsetof(struct http_answer, body));
		a->body[0] = 0;
		/* a kept connection the endpoint wrote to, or closed, while
		 * idle (a 408, say) holds no answer to what we send now */
		if (c->fd >= 0 && !idle_and_open(c->fd))
			http_conn_close(c);
		reused = c->fd >= 0;
		if (!reused) {
			ret = connect_to(&c->u, c->timeout_ms, err, errlen);
			if (ret < 0)
				return ret;
			c->fd = ret;
			c->connects++;
		}
		ret = exchange(c, r, a, &answered);
		if (ret >= 0)
			break;
		http_conn_close(c);
		/* an idle connection the endpoint had closed: once more, anew */
		if (!reused || answered || (ret != -ECONNRESET && ret != -EPIPE))
			break;
	}
	if (ret == 1 && c->keep)
		return 0;
	http_conn_close(c);
	if (ret >= 0)
		return 0;
	if (ret == -EPROTO || answered)
		snprintf(err, errlen, "%s did not answer in HTTP", c->u.hostport);
	else
		snprintf(err, errlen, "%s: %s before an answer", c->u.hostport,
			 ret == -ETIMEDOUT ? "timed out" : strerror(-ret));
	return answered ? -EPROTO : ret;
}

int http_post(const struct http_url *u, const char *body, size_t len, int timeout_ms,
	      struct http_answer *a, char *err, size_t errlen)
{
	struct http_conn c;
	struct http_req r = { .ctype = "application/json", .body = body, .len = len };
	int ret;

	http_conn_init(&c, u, timeout_ms, false, NULL);
	ret = http_conn_post(&c, &r, a, err, errlen);
	http_conn_close(&c);
	return ret;
}
