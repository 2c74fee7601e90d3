/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tcp.c - fiber_tcp_listen() and fiber_tcp_dial(): the few lines every
 * server and client repeats, over fiber_getaddrinfo() (so a name lookup
 * parks the fiber, not the worker) and fiber_connect().  Both return
 * non-blocking, close-on-exec sockets, -1 with errno on failure, as the
 * fd calls do: the error is kept in the fiber too (fiber_errno), and errno
 * is read and written through a pointer looked up afresh, since a fiber
 * may resume on another thread (include/fiber.h, the fd calls).
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fiber.h>

#include "sched/sched.h"

static int *(*volatile errno_at)(void) = __errno_location;

/* fail - end a call with error @err: errno and fiber_errno.  Return: -1. */
static int fail(int err)
{
	struct fb_fiber *f = fb_current();

	if (f)
		f->fd_errno = err;
	*errno_at() = err;
	return -1;
}

/* lookup - the addresses of @host:@port for a stream socket.
 * Return: 0; EINVAL, EADDRNOTAVAIL for a name without addresses, EAGAIN,
 * ENOMEM, or the offload's or the system's errno. */
static int lookup(const char *host, int port, int flags, struct addrinfo **res)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = flags | AI_NUMERICSERV };
	char serv[8];
	int rc;

	if (port < 0 || port > 65535)
		return EINVAL;
	snprintf(serv, sizeof(serv), "%d", port);
	rc = fiber_getaddrinfo(host, serv, &hints, res);
	if (!rc)
		return 0;
	if (rc == EAI_SYSTEM)
		return *errno_at();
	return rc == EAI_AGAIN	  ? EAGAIN :
	       rc == EAI_MEMORY	  ? ENOMEM :
	       rc == EAI_BADFLAGS ? EINVAL :
				    EADDRNOTAVAIL;
}

static int stream_socket(const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family,
			ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			ai->ai_protocol);

	if (fd >= 0)
		fb_poll_new_file(fd);
	return fd;
}

/* listen_on - Return: a listening socket on @ai; -errno. */
static int listen_on(const struct addrinfo *ai, int backlog)
{
	int one = 1, fd, err;

	fd = stream_socket(ai);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, backlog)) {
		err = errno;
		close(fd);
		return -err;
	}
	return fd;
}

int fiber_tcp_listen(const char *host, int port, int backlog)
{
	struct addrinfo *res, *ai;
	int fd = -EADDRNOTAVAIL, err;

	err = lookup(host, port, AI_PASSIVE, &res);
	if (err)
		return fail(err);
	for (ai = res; ai && fd < 0; ai = ai->ai_next)
		fd = listen_on(ai, backlog);
	freeaddrinfo(res);
	return fd < 0 ? fail(-fd) : fd;
}

/* dial_one - connect a new socket to @ai before @deadline.
 * Return: the socket; -errno. */
static int dial_one(const struct addrinfo *ai, uint64_t deadline)
{
	uint64_t now = fiber_now(), ms;
	int fd, err, timeout;

	if (deadline != FIBER_NO_DEADLINE && now >= deadline)
		return -ETIMEDOUT;
	ms = (deadline - now + 999999) / 1000000;
	timeout = deadline == FIBER_NO_DEADLINE ? -1 :
		  ms > 0x7fffffff		? 0x7fffffff :
						  (int)ms;
	fd = stream_socket(ai);
	if (fd < 0)
		return -errno;
	if (fiber_connect(fd, ai->ai_addr, ai->ai_addrlen, timeout)) {
		err = fiber_errno();
		close(fd);
		return -err;
	}
	return fd;
}

int fiber_tcp_dial(const char *host, int port, uint64_t deadline)
{
	struct addrinfo *res, *ai;
	int fd = -EADDRNOTAVAIL, err;

	if (!host)
		return fail(EINVAL);
	err = lookup(host, port, 0, &res);
	if (err)
		return fail(err);
	for (ai = res; ai && fd < 0; ai = ai->ai_next) {
		fd = dial_one(ai, deadline);
		if (fd == -ETIMEDOUT || fd == -ECANCELED)
			break;
	}
	freeaddrinfo(res);
	return fd < 0 ? fail(-fd) : fd;
}
