/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * echo-server - one fiber per connection, each echoing what it reads.
 *
 *   echo-server [--port N] [--workers N] [--addr A.B.C.D]
 *
 * Listens on 127.0.0.1:8080 unless told otherwise.  SIGINT or SIGTERM stops
 * it cleanly: the acceptor stops, every connection is shut down (its fiber
 * reads end of file and exits) and the runtime is shut down.  When the
 * process runs out of descriptors (EMFILE), the acceptor sleeps a little
 * instead of spinning on the still-readable listening socket.
 */
#include <fiber.h>

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_FD 65536

static fiber_mutex_t conns_lock = FIBER_MUTEX_INITIALIZER;
static bool conns[MAX_FD]; /* open connections, by fd; conns_lock */
static atomic_bool stopping;

static void *serve(void *arg)
{
	int fd = (int)(long)arg;
	char buf[4096];
	ssize_t n;

	while ((n = fiber_read(fd, buf, sizeof(buf))) > 0)
		if (fiber_write(fd, buf, (size_t)n) != n)
			break;
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
		    fiber_create(&f, &attr, serve, (void *)(long)fd)) {
			close(fd);
		} else {
			conns[fd] = true;
		}
		fiber_mutex_unlock(&conns_lock);
	}
	return NULL;
}

static int listen_on(const char *addr, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (fd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 1024)) {
		perror("echo-server: listen");
		exit(1);
	}
	return fd;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "port", 1, NULL, 'p' },
					      { "workers", 1, NULL, 'w' },
					      { "addr", 1, NULL, 'a' },
					      { NULL, 0, NULL, 0 } };
	struct fiber_config cfg = { 0 };
	const char *addr = "127.0.0.1";
	int port = 8080, c, sig, lfd;
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
	/* Workers inherit this mask: only main takes the signals. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	lfd = listen_on(addr, port);
	if (fiber_init(&cfg) || fiber_create(&acc, NULL, acceptor,
					     (void *)(long)lfd)) {
		fprintf(stderr, "echo-server: cannot start the runtime\n");
		return 1;
	}
	printf("echo-server: listening on %s:%d\n", addr, port);
	fflush(stdout);
	sigwait(&set, &sig);

	atomic_store(&stopping, true);
	shutdown(lfd, SHUT_RDWR); /* wakes the acceptor */
	fiber_join(acc, NULL);
	fiber_mutex_lock(&conns_lock);
	for (int fd = 0; fd < MAX_FD; fd++)
		if (conns[fd])
			shutdown(fd, SHUT_RDWR); /* its fiber reads EOF */
	fiber_mutex_unlock(&conns_lock);
	fiber_shutdown(); /* waits for the connection fibers */
	close(lfd);
	return 0;
}
