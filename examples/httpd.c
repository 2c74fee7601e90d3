/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd - a tiny HTTP/1.1 server: one fiber per connection, keep-alive,
 * pipelined requests, requests that arrive in pieces; every request gets
 * the same fixed body with a correct Content-Length.
 *
 *   httpd [--port N] [--workers N] [--addr A.B.C.D]
 *
 * Listens on 127.0.0.1:8080 unless told otherwise; SIGINT or SIGTERM stops
 * it cleanly.  The skeleton (acceptor, EMFILE back-off, stop) is server.h.
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

static void *serve(void *arg)
{
	int fd = (int)(long)arg;
	char buf[8192], *end;
	size_t have = 0, len, body;
	ssize_t n;
	const char *cl;
	bool keep = true;

	while (keep) {
		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (!end) { /* a request in pieces: read more */
			n = fiber_read(fd, buf + have, sizeof(buf) - 1 - have);
			if (n <= 0 || (have += (size_t)n) == sizeof(buf) - 1)
				break; /* EOF, reset, or headers too long */
			continue;
		}
		end[2] = '\0'; /* header block, ends with one CRLF */
		cl = header(buf, "Content-Length");
		body = cl ? strtoul(cl, NULL, 10) : 0;
		len = (size_t)(end + 4 - buf);
		if (body > sizeof(buf) - 1 - len)
			break; /* bodies are ignored; a large one is refused */
		while (have < len + body && keep) {
			n = fiber_read(fd, buf + have, sizeof(buf) - 1 - have);
			keep = n > 0;
			have += n > 0 ? (size_t)n : 0;
		}
		keep = keep && respond(fd, buf);
		have -= len + body; /* pipelined requests move to the front */
		memmove(buf, buf + len + body, have);
	}
	conn_close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	return server_main(argc, argv, "httpd", serve);
}
