/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * server.h - the skeleton echo-server.c and httpd.c share: the options
 * (--port N, default 8080, 0 for one the kernel picks, printed in the
 * "listening on" line; --workers N; --addr A.B.C.D, default 127.0.0.1),
 * the listening socket, an acceptor fiber that starts one detached fiber per
 * connection and backs off when out of descriptors (EMFILE: the listening
 * socket stays readable, so retrying at once would spin a worker), and a
 * clean stop on SIGINT/SIGTERM: stop accepting, shut every connection down
 * (its fiber reads end of file and exits), then shut the runtime down.
 */
#include <fiber.h>

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FD 65536

static fiber_mutex_t conns_lock = FIBER_MUTEX_INITIALIZER;
static bool conns[MAX_FD]; /* open connections, by fd; conns_lock */
static atomic_bool stopping;
static void *(*serve_fn)(void *);

/* A connection fiber calls this last: forget @fd and close it. */
static void conn_close(int fd)
{
	fiber_mutex_lock(&conns_lock);
	conns[fd] = false;
	close(fd);
	fiber_mutex_unlock(&conns_lock);
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
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS)
				fiber_sleep(10 * 1000 * 1000); /* back off */
			continue;
		}
		fiber_mutex_lock(&conns_lock);
		if (fd >= MAX_FD || atomic_load(&stopping) ||
		    fiber_create(&f, &attr, serve_fn, (void *)(long)fd))
			close(fd);
		else
			conns[fd] = true;
		fiber_mutex_unlock(&conns_lock);
	}
	return NULL;
}

static int server_main(int argc, char **argv, const char *name,
		       void *(*serve)(void *))
{
	struct fiber_config cfg = { 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t salen = sizeof(sa);
	const char *addr = "127.0.0.1";
	int port = 8080, sig, one = 1, lfd;
	sigset_t set;
	fiber_t acc;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--port"))
			port = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--workers"))
			cfg.workers = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--addr"))
			addr = argv[i + 1];
	}
	serve_fn = serve;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* workers inherit it */
	signal(SIGPIPE, SIG_IGN);
	sa.sin_port = htons((uint16_t)port);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &salen) ||
	    listen(lfd, 1024) || fiber_init(&cfg) ||
	    fiber_create(&acc, NULL, acceptor, (void *)(long)lfd)) {
		fprintf(stderr, "%s: cannot start: %s\n", name,
			strerror(errno));
		return 1;
	}
	printf("%s: listening on %s:%d\n", name, addr, ntohs(sa.sin_port));
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
	fiber_shutdown(); /* waits for the connection fibers */
	close(lfd);
	return 0;
}
