/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * io-fd.c - fiber-aware fd calls: fiber_read, fiber_write, fiber_readv,
 * fiber_writev, fiber_recv, fiber_send, fiber_accept, fiber_connect and
 * fiber_poll.
 *
 * Each call tries the system call on the (non-blocking) fd; on EAGAIN it
 * waits for readiness and tries again.  A fiber parks on the poller
 * (fb_poll_wait_fd, sched-poll.c), so its worker runs other fibers; a
 * foreign thread blocks in poll(2).  EINTR is retried.  Reads return what
 * is there (a short count, 0 at end of file); writes return only when every
 * byte is written, as a blocking write to a socket does, or with the count
 * written before an error (the error shows on the next call).
 *
 * Timeouts: fiber_connect and fiber_poll take one; the transfer calls
 * honour the socket's SO_RCVTIMEO / SO_SNDTIMEO (read with getsockopt only
 * when the call has to wait) and fail with ETIMEDOUT when it runs out.
 *
 * These calls follow POSIX, not the rest of the API: they return -1 and set
 * errno (fiber.h says so), because their users port code written for read()
 * and accept().
 */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sched.h"

/* Iovecs copied per writev call while finishing a partial write: picked. */
#define FB_IOV_BATCH 64

/* The deadline of the SO_RCVTIMEO/SO_SNDTIMEO option @opt of @fd, or
 * FB_NO_DEADLINE when it is unset or @fd is not a socket. */
static uint64_t sock_deadline(int fd, int opt)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	if (getsockopt(fd, SOL_SOCKET, opt, &tv, &len) ||
	    (tv.tv_sec == 0 && tv.tv_usec == 0))
		return FB_NO_DEADLINE;
	return fb_now_ns() + (uint64_t)tv.tv_sec * 1000000000u +
	       (uint64_t)tv.tv_usec * 1000u;
}

/*
 * wait_fd - wait until @fd reports one of @events, or @deadline.
 * Return: 0 (ready, or interrupted: retry), ETIMEDOUT, or an errno.
 */
static int wait_fd(int fd, short events, uint64_t deadline, short *revents)
{
	struct pollfd p = { .fd = fd, .events = events };
	uint32_t rev = 0;
	uint64_t now;
	int ms = -1, err;

	if (fb_current()) {
		err = fb_poll_wait_fd(fd, (uint32_t)events, deadline, &rev);
		if (revents)
			*revents = (short)rev;
		return err;
	}
	if (deadline != FB_NO_DEADLINE) {
		now = fb_now_ns();
		if (now >= deadline)
			return ETIMEDOUT;
		ms = (int)FB_MIN((deadline - now + 999999) / 1000000,
				 (uint64_t)INT32_MAX);
	}
	err = poll(&p, 1, ms);
	if (err < 0)
		return errno == EINTR ? 0 : errno;
	if (err == 0)
		return ETIMEDOUT;
	if (revents)
		*revents = p.revents;
	return 0;
}

/* One transfer: the system call, given @ctx. */
typedef ssize_t (*io_op)(int fd, void *ctx);

/*
 * io_once - run @op until it does not say EAGAIN, waiting for @events in
 * between, under the socket timeout @opt.  Return: @op's result, or -1
 * with errno.
 */
static ssize_t io_once(int fd, short events, int opt, io_op op, void *ctx)
{
	uint64_t deadline = FB_NO_DEADLINE;
	bool timed = false;
	ssize_t n;
	int err;

	for (;;) {
		n = op(fd, ctx);
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (!timed) {
			deadline = sock_deadline(fd, opt);
			timed = true;
		}
		err = wait_fd(fd, events, deadline, NULL);
		if (err) {
			errno = err;
			return -1;
		}
	}
}

struct buf_ctx {
	void *buf;
	size_t len;
	int flags;
};

static ssize_t op_read(int fd, void *ctx)
{
	struct buf_ctx *c = ctx;

	return read(fd, c->buf, c->len);
}

static ssize_t op_write(int fd, void *ctx)
{
	struct buf_ctx *c = ctx;

	return write(fd, c->buf, c->len);
}

static ssize_t op_recv(int fd, void *ctx)
{
	struct buf_ctx *c = ctx;

	return recv(fd, c->buf, c->len, c->flags);
}

static ssize_t op_send(int fd, void *ctx)
{
	struct buf_ctx *c = ctx;

	return send(fd, c->buf, c->len, c->flags);
}

/* write_all - repeat @op over the rest of the buffer until it is written. */
static ssize_t write_all(int fd, struct buf_ctx *c, io_op op)
{
	size_t done = 0, len = c->len;
	ssize_t n;

	do {
		n = io_once(fd, POLLOUT, SO_SNDTIMEO, op, c);
		if (n < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)n;
		c->buf = (char *)c->buf + n;
		c->len -= (size_t)n;
	} while (done < len);
	return (ssize_t)done;
}

/*
 * fiber_read - read(2) that parks the fiber until @fd is readable.
 * Context: any thread.  Return: bytes read, 0 at end of file, or -1 with
 * errno (read(2)'s, or ETIMEDOUT under SO_RCVTIMEO).
 */
ssize_t fiber_read(int fd, void *buf, size_t len)
{
	struct buf_ctx c = { buf, len, 0 };

	return io_once(fd, POLLIN, SO_RCVTIMEO, op_read, &c);
}

/*
 * fiber_write - write(2) of all @len bytes, parking while @fd is full.
 * Context: any thread.  Return: @len, the bytes written before an error,
 * or -1 with errno (write(2)'s, or ETIMEDOUT under SO_SNDTIMEO).
 */
ssize_t fiber_write(int fd, const void *buf, size_t len)
{
	struct buf_ctx c = { (void *)buf, len, 0 };

	return write_all(fd, &c, op_write);
}

/*
 * fiber_recv - recv(2) that parks until data is there (not with
 * MSG_DONTWAIT).  Context: any thread.  Return: as fiber_read().
 */
ssize_t fiber_recv(int fd, void *buf, size_t len, int flags)
{
	struct buf_ctx c = { buf, len, flags };

	if (flags & MSG_DONTWAIT)
		return recv(fd, buf, len, flags);
	return io_once(fd, POLLIN, SO_RCVTIMEO, op_recv, &c);
}

/*
 * fiber_send - send(2) of all @len bytes (one try with MSG_DONTWAIT).
 * Context: any thread.  Return: as fiber_write().
 */
ssize_t fiber_send(int fd, const void *buf, size_t len, int flags)
{
	struct buf_ctx c = { (void *)buf, len, flags };

	if (flags & MSG_DONTWAIT)
		return send(fd, buf, len, flags);
	return write_all(fd, &c, op_send);
}

struct iov_ctx {
	const struct iovec *iov;
	int cnt;
};

static ssize_t op_readv(int fd, void *ctx)
{
	struct iov_ctx *c = ctx;

	return readv(fd, c->iov, c->cnt);
}

static ssize_t op_writev(int fd, void *ctx)
{
	struct iov_ctx *c = ctx;

	return writev(fd, c->iov, c->cnt);
}

/*
 * fiber_readv - readv(2) that parks until @fd is readable.
 * Context: any thread.  Return: as fiber_read().
 */
ssize_t fiber_readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct iov_ctx c = { iov, iovcnt };

	return io_once(fd, POLLIN, SO_RCVTIMEO, op_readv, &c);
}

/* Skip @n written bytes of @iov[*i..], the first of which starts @off in. */
static void iov_advance(const struct iovec *iov, int cnt, int *i, size_t *off,
			size_t n)
{
	while (*i < cnt && n >= iov[*i].iov_len - *off) {
		n -= iov[*i].iov_len - *off;
		*off = 0;
		(*i)++;
	}
	*off += n;
}

/*
 * fiber_writev - writev(2) of every byte of @iov, parking while @fd is
 * full.  Context: any thread.  Return: as fiber_write().
 */
ssize_t fiber_writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct iovec batch[FB_IOV_BATCH];
	struct iov_ctx c = { iov, iovcnt };
	size_t done = 0, off = 0;
	ssize_t n;
	int i = 0, k;

	n = io_once(fd, POLLOUT, SO_SNDTIMEO, op_writev, &c);
	if (n < 0)
		return -1;
	for (;;) {
		done += (size_t)n;
		iov_advance(iov, iovcnt, &i, &off, (size_t)n);
		while (i < iovcnt && iov[i].iov_len == off) {
			i++;
			off = 0;
		}
		if (i >= iovcnt)
			return (ssize_t)done;
		/* A partial write: go on from iov[i] + off, a batch at a
		 * time, with the first element trimmed. */
		for (k = 0; k < FB_IOV_BATCH && i + k < iovcnt; k++)
			batch[k] = iov[i + k];
		batch[0].iov_base = (char *)batch[0].iov_base + off;
		batch[0].iov_len -= off;
		c.iov = batch;
		c.cnt = k;
		n = io_once(fd, POLLOUT, SO_SNDTIMEO, op_writev, &c);
		if (n < 0)
			return (ssize_t)done;
	}
}

struct accept_ctx {
	struct sockaddr *addr;
	socklen_t *len;
	int flags;
};

static ssize_t op_accept(int fd, void *ctx)
{
	struct accept_ctx *c = ctx;

	return accept4(fd, c->addr, c->len, c->flags);
}

/*
 * fiber_accept - accept4(2) that parks until a connection is pending.  The
 * new socket is always non-blocking (SOCK_NONBLOCK is added to @flags), as
 * the fiber calls need.  Context: any thread.
 * Return: the new fd, or -1 with accept4(2)'s errno (EMFILE included: the
 * call does not wait for a free descriptor).
 */
int fiber_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
	struct accept_ctx c = { addr, addrlen, flags | SOCK_NONBLOCK };

	return (int)io_once(fd, POLLIN, SO_RCVTIMEO, op_accept, &c);
}

static uint64_t ms_deadline(int timeout_ms)
{
	if (timeout_ms < 0)
		return FB_NO_DEADLINE;
	return fb_now_ns() + (uint64_t)timeout_ms * 1000000u;
}

/*
 * fiber_connect - connect(2) on a non-blocking socket, parking until the
 * connection is made, fails, or @timeout_ms (-1: none) runs out.
 * Context: any thread.
 * Return: 0, or -1 with connect(2)'s errno (the connection's error, e.g.
 * ECONNREFUSED), or ETIMEDOUT.
 */
int fiber_connect(int fd, const struct sockaddr *addr, socklen_t addrlen,
		  int timeout_ms)
{
	uint64_t deadline = ms_deadline(timeout_ms);
	socklen_t len = sizeof(int);
	int err;

	if (connect(fd, addr, addrlen) == 0)
		return 0;
	if (errno != EINPROGRESS && errno != EINTR && errno != EAGAIN)
		return -1;
	do {
		err = wait_fd(fd, POLLOUT, deadline, NULL);
		if (err) {
			errno = err;
			return -1;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
			return -1;
	} while (err == EINPROGRESS || err == EALREADY);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/*
 * fiber_poll - wait until @fd reports one of @events (POLLIN, POLLOUT,
 * POLLPRI, POLLRDHUP) or @timeout_ms runs out (-1: never; 0: just look).
 * Context: any thread.
 * Return: the reported events (> 0, POLLERR and POLLHUP included when
 * they happen), 0 on timeout, or -1 with errno.
 */
int fiber_poll(int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	uint64_t deadline = ms_deadline(timeout_ms);
	short rev = 0;
	int err;

	for (;;) {
		err = poll(&p, 1, 0);
		if (err > 0)
			return p.revents;
		if (err < 0 && errno != EINTR)
			return -1;
		if (timeout_ms == 0)
			return 0;
		err = wait_fd(fd, events, deadline, &rev);
		if (err == ETIMEDOUT)
			return 0;
		if (err) {
			errno = err;
			return -1;
		}
		rev &= (short)(events | POLLERR | POLLHUP);
		if (rev)
			return rev;
	}
}
