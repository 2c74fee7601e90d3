/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd - a tiny HTTP/1.1 server: one fiber per connection, keep-alive,
 * pipelined requests, requests that arrive in pieces; every request gets
 * the same fixed body with a correct Content-Length.
 *
 *   httpd [--port N] [--workers N] [--addr A.B.C.D]
 *
 * Listens on 127.0.0.1:8080 unless told otherwise; SIGINT or SIGTERM stops
 * it cleanly (see echo-server.c, which has the same skeleton).
 */
#include <fiber.h>

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_FD 65536
#define BODY "Hello from libfiber!\n"

static fiber_mutex_t conns_lock = FIBER_MUTEX_INITIALIZER;
static bool conns[MAX_FD]; /* open connections, by fd; conns_lock */
static atomic_bool stopping;

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
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
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
	fiber_mutex_lock(&conns_lock);
	conns[fd] = false;
	close(fd);
	fiber_mutex_unlock(&conns_lock);
	return NULL;
}

static void *acceptor(void *arg)
{
	int lfd = (int)(long)arg, fd;
	fiber_attr_t attr;
	fiber_t f;

	fiber_attr_init(&attr);
	fiber_attr_setdetachstate(&attr, FIBER_CREATE_DETACHED);
	while (!atomic_load(&stopping)) {
		fd = fiber_accept(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS)
				fiber_sleep(10 * 1000 * 1000); /* back off */
			continue;
		}
		fiber_mutex_lock(&conns_lock);
		if (fd >= MAX_FD || atomic_load(&stopping) ||
		    fiber_create(&f, &attr, serve, (void *)(long)fd))
			close(fd);
		else
			conns[fd] = true;
		fiber_mutex_unlock(&conns_lock);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "port", 1, NULL, 'p' },
		{ "workers", 1, NULL, 'w' }, { "addr", 1, NULL, 'a' }, { 0 } };
	struct fiber_config cfg = { 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	const char *addr = "127.0.0.1";
	int port = 8080, c, sig, one = 1, lfd;
	sigset_t set;
	fiber_t acc;

	while ((c = getopt_long(argc, argv, "p:w:a:", opts, NULL)) != -1) {
		if (c == 'p')
			port = atoi(optarg);
		else if (c == 'w')
			cfg.workers = (unsigned int)atoi(optarg);
		else if (c == 'a')
			addr = optarg;
		else
			return 2;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* workers inherit it */
	signal(SIGPIPE, SIG_IGN);
	sa.sin_port = htons((uint16_t)port);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (lfd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1024) ||
	    fiber_init(&cfg) ||
	    fiber_create(&acc, NULL, acceptor, (void *)(long)lfd)) {
		perror("httpd: start");
		return 1;
	}
	printf("httpd: listening on %s:%d\n", addr, port);
	fflush(stdout);
	sigwait(&set, &sig);

	atomic_store(&stopping, true);
	shutdown(lfd, SHUT_RDWR); /* wakes the acceptor */
	fiber_join(acc, NULL);
	fiber_mutex_lock(&conns_lock);
	for (int fd = 0; fd < MAX_FD; fd++)
		if (conns[fd])
			shutdown(fd, SHUT_RDWR);
	fiber_mutex_unlock(&conns_lock);
	fiber_shutdown();
	close(lfd);
	return 0;
}
