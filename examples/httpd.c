/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd - a tiny HTTP/1.1 server: one fiber per connection, keep-alive,
 * pipelined requests, requests that arrive in pieces; every request gets
 * the same fixed body with a correct Content-Length.  A request that does
 * not fit in the 8 KiB buffer is answered 431 (headers) or 413 (body), one
 * whose end is uncertain (a NUL byte in its headers, a Content-Length that
 * is not digits alone or comes twice) 400, one with a Transfer-Encoding
 * 501, and the connection closed: a body never passes for requests.
 *
 *   httpd [--port N] [--workers N] [--addr A.B.C.D]
 *
 * Listens on 127.0.0.1:8080 unless told otherwise (--port 0: a port the
 * kernel picks, printed in the "listening on" line); SIGINT or SIGTERM
 * stops it cleanly.  The skeleton (acceptor, EMFILE back-off, stop) is
 * server.h.
 */
#include "server.h"

#include <strings.h>

#define BODY "Hello from libfiber!\n"

/* The value of header @name in the header block @h (NUL-terminated). */
static const char *header(const char *h, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = strstr(h, "\r\n"); p; p = strstr(p + 2, "\r\n"))
		if (!strncasecmp(p + 2, name, n) && p[2 + n] == ':')
			return p + 3 + n + strspn(p + 3 + n, " \t");
	return NULL;
}

/* Answer one request whose header block is @h; false: close after it. */
static bool respond(int fd, char *h)
{
	static const char ok[] =
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
		"Content-Length: %zu\r\n%s\r\n%s";
	const char *conn = header(h, "Connection");
	bool http10 = strstr(h, " HTTP/1.0\r\n") != NULL;
	bool keep = conn ? !strncasecmp(conn, "keep-alive", 10) : !http10;
	char out[256];
	int n;

	n = snprintf(out, sizeof(out), ok, strlen(BODY),
		     keep ? "" : "Connection: close\r\n",
		     strncmp(h, "HEAD ", 5) ? BODY : "");
	return fiber_write(fd, out, (size_t)n) == n && keep;
}

/* Refuse a request that cannot fit in the buffer, then close. */
static void refuse(int fd, const char *status)
{
	char out[128];
	int n = snprintf(out, sizeof(out),
			 "HTTP/1.1 %s\r\nContent-Length: 0\r\n"
			 "Connection: close\r\n\r\n",
			 status);

	fiber_write(fd, out, (size_t)n);
}

/* What request() says of a request it cannot take. */
enum {
	REQ_HEADERS_TOO_LARGE = -1, /* 431 */
	REQ_BODY_TOO_LARGE = -2,    /* 413 */
	REQ_BAD = -3,		    /* 400 */
	REQ_CODING = -4,	    /* 501: a Transfer-Encoding */
};

/* content_length - the one Content-Length of header block @h in *@body
 * (0 without one).  Return: false if it is not digits alone, or comes
 * twice: where the body ends would be a guess, and a guess lets a body
 * pass for requests of its own (request smuggling). */
static bool content_length(const char *h, unsigned long *body)
{
	const char *cl = header(h, "Content-Length"), *end;
	size_t digits;

	*body = 0;
	if (!cl)
		return true;
	digits = strspn(cl, "0123456789");
	end = cl + digits + strspn(cl + digits, " \t");
	if (!digits || strncmp(end, "\r\n", 2) || header(end, "Content-Length"))
		return false;
	*body = strtoul(cl, NULL, 10); /* too many digits: ULONG_MAX */
	return true;
}

/*
 * The length of the request at @p (@n bytes there, @room the most the
 * buffer holds): headers and body.  A complete request's header block is
 * NUL-terminated in place (over the CR of its blank line) for respond().
 * Return: the length; 0 if it is not all there yet; REQ_* if it cannot be
 * taken: its headers or its body cannot fit, its header block holds a NUL
 * byte or a bad Content-Length, or a body comes in a transfer coding.
 */
static long request(char *p, size_t n, size_t room)
{
	char *end = memmem(p, n, "\r\n\r\n", 4), save;
	unsigned long body;
	size_t len;

	if (!end)
		return n >= room ? REQ_HEADERS_TOO_LARGE : 0;
	len = (size_t)(end + 4 - p);
	if (memchr(p, '\0', len))
		return REQ_BAD; /* the header scan would stop at it */
	save = end[2];
	end[2] = '\0'; /* header block, ends with one CRLF */
	if (header(p, "Transfer-Encoding")) {
		end[2] = save;
		return REQ_CODING;
	}
	if (!content_length(p, &body)) {
		end[2] = save;
		return REQ_BAD;
	}
	if (body <= room - len && len + body <= n)
		return (long)(len + body); /* bodies are ignored */
	end[2] = save;
	return body > room - len ? REQ_BODY_TOO_LARGE : 0;
}

/* Answer each complete request as it arrives; keep only the incomplete
 * tail, at the front of the buffer. */
static void *serve(void *arg)
{
	int fd = (int)(long)arg;
	char buf[8192];
	size_t have = 0, used;
	bool keep = true;
	long len = 0;
	ssize_t n;

	while (keep) {
		for (used = 0; keep; used += (size_t)len) {
			len = request(buf + used, have - used, sizeof(buf));
			if (len <= 0)
				break;
			keep = respond(fd, buf + used);
		}
		if (len < 0) {
			refuse(fd,
			       len == REQ_HEADERS_TOO_LARGE ?
				       "431 Request Header Fields Too Large" :
			       len == REQ_BODY_TOO_LARGE ?
				       "413 Content Too Large" :
			       len == REQ_CODING ? "501 Not Implemented" :
						   "400 Bad Request");
			break;
		}
		have -= used;
		memmove(buf, buf + used, have);
		if (!keep)
			break;
		n = fiber_read(fd, buf + have, sizeof(buf) - have);
		if (n <= 0)
			break; /* EOF (a half-close too) or reset */
		have += (size_t)n;
	}
	conn_close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	return server_main(argc, argv, "httpd", serve);
}
