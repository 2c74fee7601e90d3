/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * server.h - the skeleton echo-server.c, httpd.c and kv.c share: the
 * options (--port N, default 8080, 0 for one the kernel picks, printed in
 * the "listening on" line; --workers N; --addr A.B.C.D, default 127.0.0.1;
 * --idle-ms N, default 60000: a connection whose client sends nothing for
 * that long is closed, so silent or trickling clients cannot hold the
 * descriptors and buffers for ever (0: never); --help; an unknown option,
 * a missing value or a value out of range is
 * named on stderr with the usage, exit status 2), the listening socket, an
 * acceptor fiber that starts one detached fiber per connection and backs
 * off when out of descriptors (EMFILE: the listening socket stays readable,
 * so retrying at once would spin a worker), and a clean stop on
 * SIGINT/SIGTERM: stop accepting, shut every connection down (its fiber
 * reads end of file and exits), then shut the runtime down.
 *
 * --threads runs the same connection function on one kernel thread per
 * connection, over blocking sockets and without the runtime (fiber_read
 * and fiber_write called from a thread that is not a worker do plain
 * read(2) and send(2) there): the baseline a fiber server is measured
 * against, in the same program.
 */
#include <fiber.h>

#include "args.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FD 65536

static fiber_mutex_t conns_lock = FIBER_MUTEX_INITIALIZER;
static pthread_mutex_t conns_tlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t conns_gone = PTHREAD_COND_INITIALIZER;
static bool conns[MAX_FD];  /* open connections, by fd; conns_lock */
static int nr_conn_threads; /* --threads: live ones; conns_tlock */
static bool threads_mode;   /* --threads: set before any connection */
static atomic_bool stopping;
static void *(*serve_fn)(void *);
static long idle_ms = 60000; /* --idle-ms */

/* The idle timeout of new connection @fd: SO_RCVTIMEO and SO_SNDTIMEO,
 * which blocking calls (--threads) and the fiber calls (ETIMEDOUT) both
 * honour, so each read, and each write to a client that reads nothing,
 * waits at most that long. */
static void set_idle(int fd)
{
	struct timeval tv = { idle_ms / 1000, (idle_ms % 1000) * 1000 };

	if (idle_ms <= 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* conns_lock, or conns_tlock in --threads mode. */
static void conns_enter(void)
{
	if (threads_mode)
		pthread_mutex_lock(&conns_tlock);
	else
		fiber_mutex_lock(&conns_lock);
}

static void conns_exit(void)
{
	if (threads_mode)
		pthread_mutex_unlock(&conns_tlock);
	else
		fiber_mutex_unlock(&conns_lock);
}

/* A connection fiber calls this last: forget @fd and close it. */
static void conn_close(int fd)
{
	conns_enter();
	conns[fd] = false;
	close(fd);
	conns_exit();
}

/* --threads: a connection's thread. */
static void *conn_thread(void *arg)
{
	serve_fn(arg);
	pthread_mutex_lock(&conns_tlock);
	if (--nr_conn_threads == 0)
		pthread_cond_signal(&conns_gone);
	pthread_mutex_unlock(&conns_tlock);
	return NULL;
}

/* --threads: the acceptor, a thread of its own starting a detached thread
 * per connection. */
static void *thread_acceptor(void *arg)
{
	int lfd = (int)(long)arg, fd;
	pthread_attr_t attr;
	pthread_t t;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	while (!atomic_load(&stopping)) {
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS)
				usleep(10000); /* back off */
			continue;
		}
		set_idle(fd);
		pthread_mutex_lock(&conns_tlock);
		if (fd >= MAX_FD || atomic_load(&stopping) ||
		    pthread_create(&t, &attr, conn_thread, (void *)(long)fd)) {
			close(fd);
		} else {
			conns[fd] = true;
			nr_conn_threads++;
		}
		pthread_mutex_unlock(&conns_tlock);
	}
	pthread_attr_destroy(&attr);
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
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS)
				fiber_sleep(10 * 1000 * 1000); /* back off */
			continue;
		}
		set_idle(fd);
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

static void server_usage(FILE *f, const char *name)
{
	fprintf(f,
		"usage: %s [--port N] [--addr A.B.C.D] [--workers N] "
		"[--idle-ms N] [--threads]\n"
		"  (also -p N, -a A, -w N, -i N, -t; --opt=VALUE; -h, "
		"--help)\n"
		"  --port N      TCP port, 0-65535 (default 8080; 0: the "
		"kernel picks one)\n"
		"  --addr A      IPv4 address to listen on (default "
		"127.0.0.1)\n"
		"  --workers N   worker threads, 1-1024 (default or 0: the "
		"runtime's, see fiber_init(3))\n"
		"  --idle-ms N   close a connection silent for N ms, "
		"0-86400000 (default 60000; 0: never)\n"
		"  --threads     a kernel thread per connection instead of "
		"fibers\n",
		name);
}

static int server_main(int argc, char **argv, const char *name,
		       void *(*serve)(void *))
{
	struct fiber_config cfg = { 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t salen = sizeof(sa);
	const char *addr = "127.0.0.1";
	static const struct option opts[] = { { "help", 0, NULL, 'h' },
					      { "port", 1, NULL, 'p' },
					      { "workers", 1, NULL, 'w' },
					      { "addr", 1, NULL, 'a' },
					      { "threads", 0, NULL, 't' },
					      { "idle-ms", 1, NULL, 'i' },
					      { 0 } };
	int port = 8080, sig, one = 1, lfd, c;
	sigset_t set;
	pthread_t tacc;
	fiber_t acc;

	while ((c = getopt_long(argc, argv, "+hp:w:a:ti:", opts, NULL)) != -1) {
		long n;

		if (c == 'h') {
			server_usage(stdout, name);
			return 0;
		} else if (c == 't') {
			threads_mode = true;
		} else if (c == 'a') {
			addr = optarg;
		} else if (c == 'p') {
			if (arg_number(name, "--port", optarg, 0, 65535, &n))
				return 2;
			port = (int)n;
		} else if (c == 'i') {
			if (arg_number(name, "--idle-ms", optarg, 0, 86400000,
				       &n))
				return 2;
			idle_ms = n;
		} else if (c == 'w') {
			if (arg_number(name, "--workers", optarg, 0, 1024, &n))
				return 2;
			cfg.workers = (unsigned int)n;
		} else { /* getopt_long said what is wrong */
			server_usage(stderr, name);
			return 2;
		}
	}
	if (arg_none_left(name, argc, argv)) {
		server_usage(stderr, name);
		return 2;
	}
	if (arg_ipv4(name, addr, &sa.sin_addr))
		return 2;
	serve_fn = serve;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* workers inherit it */
	signal(SIGPIPE, SIG_IGN);
	sa.sin_port = htons((uint16_t)port);
	lfd = socket(AF_INET,
		     SOCK_STREAM | SOCK_CLOEXEC |
			     (threads_mode ? 0 : SOCK_NONBLOCK),
		     0);
	if (lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &salen) ||
	    listen(lfd, 1024) ||
	    (threads_mode ?
		     (errno = pthread_create(&tacc, NULL, thread_acceptor,
					     (void *)(long)lfd)) != 0 :
		     fiber_init(&cfg) || fiber_create(&acc, NULL, acceptor,
						      (void *)(long)lfd))) {
		fprintf(stderr, "%s: cannot start: %s\n", name,
			strerror(errno));
		return 1;
	}
	printf("%s: listening on %s:%d%s\n", name, addr, ntohs(sa.sin_port),
	       threads_mode ? " (a thread per connection)" : "");
	fflush(stdout);
	sigwait(&set, &sig);

	atomic_store(&stopping, true);
	shutdown(lfd, SHUT_RDWR); /* wakes the acceptor */
	if (threads_mode)
		pthread_join(tacc, NULL);
	else
		fiber_join(acc, NULL);
	conns_enter();
	for (int fd = 0; fd < MAX_FD; fd++)
		if (conns[fd])
			shutdown(fd, SHUT_RDWR);
	conns_exit();
	if (threads_mode) { /* the connection threads read end of file */
		pthread_mutex_lock(&conns_tlock);
		while (nr_conn_threads)
			pthread_cond_wait(&conns_gone, &conns_tlock);
		pthread_mutex_unlock(&conns_tlock);
	} else {
		fiber_shutdown(); /* waits for the connection fibers */
	}
	close(lfd);
	return 0;
}
