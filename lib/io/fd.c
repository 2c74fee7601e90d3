/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fd.c - fiber-aware fd calls: fiber_read, fiber_write, fiber_readv,
 * fiber_writev, fiber_recv, fiber_send, fiber_recvfrom, fiber_sendto,
 * fiber_recvmsg, fiber_sendmsg, fiber_accept, fiber_connect, fiber_poll,
 * fiber_close, fiber_fd_set_deadline and fiber_errno.
 *
 * Each call tries the system call on the (non-blocking) fd; on EAGAIN it
 * waits for readiness and tries again.  A fiber parks on the poller
 * (fb_poll_wait_fd, sched/netpoll.c), so its worker runs other fibers; a
 * foreign thread blocks in poll(2).  EINTR is retried.  Reads return what
 * is there (a short count, 0 at end of file); writes return only when every
 * byte is written, as a blocking write to a socket does, or with the count
 * written before an error (the error shows on the next call).
 *
 * Timeouts: fiber_connect and fiber_poll take one; the transfer calls
 * honour the socket's SO_RCVTIMEO / SO_SNDTIMEO and fail with ETIMEDOUT
 * when it runs out.  The option is read with getsockopt once per fd and
 * direction, at the first wait that needs it, and kept in the poller's
 * entry until fiber_close(): a wait costs no system call for it, and a
 * setsockopt() after that first wait is not seen (fiber.h says so).
 *
 * Deadlines: fiber_fd_set_deadline() stores a read and a write deadline
 * in the entry (as Go's SetDeadline).  Every wait of the transfer calls,
 * fiber_accept (read) and fiber_connect (write) is bounded by it, read
 * afresh before each wait; setting it wakes the waiters, which retry their
 * system call and wait again under the new deadline.  As everywhere in the
 * API, a deadline bounds waiting only: a call that can complete at once
 * does, one that would wait past a deadline already gone fails with
 * ETIMEDOUT at once.  fiber_poll has its own timeout and ignores it.
 *
 * Closing.  Each call runs inside the fd's entry of the poller
 * (fb_poll_enter .. fb_poll_leave), which counts it in progress;
 * fiber_close() wakes the waiters with EBADF, waits for the count to drain
 * and only then calls close(2), so no call of the old file reaches the
 * file that reuses the number.  A call that sees the close returns EBADF
 * and never retries its system call.  sched/netpoll.c has the protocol.
 *
 * errno.  A fiber may resume on another worker thread after any wait, and
 * glibc declares __errno_location() const, so the compiler may compute the
 * errno address once and keep it across the switch: the error would land
 * in the old thread's errno (and EAGAIN would be read from there).  So the
 * internal functions return -errno (or an errno), errno is read only
 * through sys_errno() and written only by fail(), both through errno_at, a
 * volatile pointer to __errno_location that the compiler must call afresh.
 * fail() also keeps the error in the fiber (fiber_errno), which no
 * migration can lose.  SIGPIPE: sends pass MSG_NOSIGNAL; workers block
 * SIGPIPE (sched/idle.c), so a write from a fiber gets EPIPE; a foreign
 * thread's write tries send(MSG_NOSIGNAL) first, so only a write to a pipe
 * or a FIFO raises SIGPIPE there, as write(2) does.
 *
 * These calls follow POSIX, not the rest of the API: they return -1 and set
 * errno (fiber.h says so), because their users port code written for read()
 * and accept().
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sched/netpoll.h"
#include "sched/sched.h"

/* Iovecs copied per writev call while finishing a partial write: picked. */
#define FB_IOV_BATCH 64
/* The timeout option of a call that tries once (MSG_DONTWAIT). */
#define ONE_TRY (-1)

/* ---- errno (see the opening comment) ----------------------------------- */

static int *(*volatile errno_at)(void) = __errno_location;

/* The calling thread's errno, looked up afresh. */
static int sys_errno(void)
{
	return *errno_at();
}

/* A system call's result as a count, or -errno. */
static ssize_t sys_ret(ssize_t n)
{
	return n < 0 ? -(ssize_t)sys_errno() : n;
}

/* fail - end a call with error @err: errno and fiber_errno.  Return: -1. */
static int fail(int err)
{
	struct fb_fiber *f = fb_current();

	if (f)
		f->fd_errno = err;
	*errno_at() = err;
	return -1;
}

/* The end of a call that returns a count or -errno, the POSIX way. */
static ssize_t posix_ret(ssize_t n)
{
	return n < 0 ? fail((int)-n) : n;
}

/*
 * fiber_errno - the errno of the calling fiber's last failed fd call; on
 * a thread that is not a worker, errno.  Context: any thread.
 * Return: that errno (0 if no fd call of this fiber failed yet).
 */
int fiber_errno(void)
{
	struct fb_fiber *f = fb_current();

	return f ? f->fd_errno : sys_errno();
}

/* ---- waiting ------------------------------------------------------------- */

/* One call in progress on @fd: its entry (NULL once left) and generation. */
struct call {
	int fd;
	struct fb_iofd *d;
	uint32_t gen;
};

/* call_enter - the start of every fd call but fiber_close: a
 * cancellation point (sched/cancel.c), then the entry of @fd. */
static int call_enter(struct call *k, int fd)
{
	int err = fb_cancel_point();

	if (err)
		return err;
	k->fd = fd;
	return fb_poll_enter(fd, &k->d, &k->gen);
}

/* partial - a write that wrote @done bytes before it failed with -@n
 * returns the count; a cancellation it met is left for the next call. */
static ssize_t partial(size_t done, ssize_t n)
{
	if (n == -ECANCELED)
		fb_cancel_restore();
	return (ssize_t)done;
}

static void call_leave(struct call *k)
{
	if (k->d)
		fb_poll_leave(k->d);
}

/* The direction (FB_IOFD_R, FB_IOFD_W) of a wait for @events. */
static int dir_of(short events)
{
	return (events & POLLOUT) ? FB_IOFD_W : FB_IOFD_R;
}

/* The deadline of the SO_RCVTIMEO/SO_SNDTIMEO option @opt of @k's fd, for
 * direction @dir, from now: FB_NO_DEADLINE when it is unset or the fd is
 * not a socket.  The option is read once, then kept in the entry for the
 * fiber that owns the direction's registration (sched/netpoll.h); another
 * fiber, or a thread, reads it afresh. */
static uint64_t sock_deadline(struct call *k, int dir, int opt)
{
	struct fb_fiber *f = fb_current();
	uint64_t t = fb_load_relaxed(&k->d->timeo[dir]);
	struct timeval tv;
	socklen_t len = sizeof(tv);

	uint64_t d;

	if (fb_unlikely(!t || !f ||
			fb_load_relaxed(&k->d->owner[dir]) != f->id)) {
		t = 1;
		/* Linux takes up to LONG_MAX / HZ seconds, more than 64-bit
		 * nanoseconds hold: a timeout that does not fit is none. */
		if (!getsockopt(k->fd, SOL_SOCKET, opt, &tv, &len) &&
		    tv.tv_sec >= 0 && (tv.tv_sec || tv.tv_usec > 0) &&
		    (uint64_t)tv.tv_sec < UINT64_MAX / 1000000000u - 1)
			t += (uint64_t)tv.tv_sec * 1000000000u +
			     (uint64_t)tv.tv_usec * 1000u;
		fb_store_relaxed(&k->d->timeo[dir], t);
	}
	if (t == 1 || __builtin_add_overflow(fb_now_ns(), t - 1, &d) ||
	    d == FB_NO_DEADLINE)
		return FB_NO_DEADLINE;
	return d;
}

/* The earlier of @deadline and @k's fd deadline for direction @dir (-1:
 * none). */
static uint64_t fd_deadline(struct call *k, int dir, uint64_t deadline)
{
	return dir < 0 ? deadline :
			 FB_MIN(deadline, fb_poll_deadline(k->d, dir));
}

/* poll_thread - a foreign thread's wait: poll(2) outside the entry, which
 * it re-enters only if @k's fd was not closed meanwhile. */
static int poll_thread(struct call *k, short events, uint64_t deadline,
		       short *revents)
{
	struct pollfd p = { .fd = k->fd, .events = events };
	uint64_t now;
	int ms = -1, n, err;

	if (deadline != FB_NO_DEADLINE) {
		now = fb_now_ns();
		if (now >= deadline)
			return ETIMEDOUT;
		ms = (int)FB_MIN((deadline - now + 999999) / 1000000,
				 (uint64_t)INT32_MAX);
	}
	fb_poll_leave(k->d);
	n = poll(&p, 1, ms);
	err = n < 0 ? sys_errno() : 0;
	if (fb_poll_reenter(k->d, k->gen)) {
		k->d = NULL;
		return EBADF;
	}
	if (n < 0)
		return err == EINTR ? 0 : err;
	if (n == 0)
		return ETIMEDOUT;
	if (revents)
		*revents = p.revents;
	return 0;
}

/*
 * wait_fd - wait until @k's fd reports one of @events, or @deadline, or
 * the fd deadline of direction @dldir (FB_IOFD_R, FB_IOFD_W; -1: none).
 * A fiber's wait reads the fd deadline again once it is about to queue,
 * so a fiber_fd_set_deadline() that came meanwhile is not missed.
 * Return: 0 (ready, or interrupted: retry), ETIMEDOUT, EBADF (closed), or
 * an errno.
 */
static int wait_fd(struct call *k, short events, uint64_t deadline, int dldir,
		   short *revents)
{
	uint32_t rev = 0;
	int err;

	deadline = fd_deadline(k, dldir, deadline);
	if (deadline != FB_NO_DEADLINE && fb_now_ns() >= deadline)
		return ETIMEDOUT;
	if (!fb_current())
		return poll_thread(k, events, deadline, revents);
	err = fb_poll_wait_fd(k->fd, (uint32_t)events, deadline, dldir, &rev);
	if (revents)
		*revents = (short)rev;
	return err;
}

/* One transfer: the system call, given @ctx.  Return: a count or -errno. */
typedef ssize_t (*io_op)(int fd, void *ctx);

/*
 * io_once - run @op until it does not say EAGAIN, waiting for @events in
 * between, under the socket timeout @opt (ONE_TRY: no waiting).  @want:
 * for a read of a fiber, the bytes asked for (0: not such a read): a
 * shorter count marks the fd drained, and a read of a drained fd waits
 * before its system call ("Drained reads" in sched/netpoll.c).
 * Context: inside call @k.  Return: @op's count, or -errno.
 */
static ssize_t io_once(struct call *k, short events, int opt, io_op op,
		       void *ctx, size_t want)
{
	uint64_t deadline = FB_NO_DEADLINE;
	int dir = dir_of(events);
	bool timed = false, skip = false, late = false;
	uint32_t before = 0;
	ssize_t n;
	int err;

	if (want && opt != ONE_TRY && fb_poll_take_drained(k->d)) {
		skip = true;
		FB_COUNT(fb_worker_self(), io_drained_reads);
	}
	for (;;) {
		if (!skip) {
			if (want)
				before = fb_poll_read_begin(k->d);
			n = op(k->fd, ctx);
			if (n == -EINTR)
				continue;
			if (n >= 0 || (n != -EAGAIN && n != -EWOULDBLOCK) ||
			    opt == ONE_TRY)
				break;
			if (late)
				return -ETIMEDOUT;
		}
		if (!timed) {
			deadline = sock_deadline(k, dir, opt);
			timed = true;
		}
		err = wait_fd(k, events, deadline, dir, NULL);
		if (err == ETIMEDOUT && skip) {
			late = true; /* the read is still tried once */
		} else if (err) {
			return -err;
		}
		skip = false;
	}
	if (want && n > 0 && (size_t)n < want)
		fb_poll_note_short_read(k->d, before);
	return n;
}

/* io_call - a whole call of io_once() on @fd, the POSIX way. */
static ssize_t io_call(int fd, short events, int opt, io_op op, void *ctx)
{
	struct call k;
	ssize_t n = -call_enter(&k, fd);

	if (!n) {
		n = io_once(&k, events, opt, op, ctx, 0);
		call_leave(&k);
	}
	return posix_ret(n);
}

/* read_call - io_call() of a read of @want bytes from a stream: a fiber's
 * read may take a short count as the next one's EAGAIN (io_once). */
static ssize_t read_call(int fd, int opt, io_op op, void *ctx, size_t want)
{
	struct call k;
	ssize_t n = -call_enter(&k, fd);

	if (!n) {
		n = io_once(&k, POLLIN, opt, op, ctx, fb_current() ? want : 0);
		call_leave(&k);
	}
	return posix_ret(n);
}

/* ---- transfers ----------------------------------------------------------- */

struct buf_ctx {
	void *buf;
	size_t len;
	int flags;
};

static ssize_t op_read(int fd, void *ctx)
{
	struct buf_ctx *c = ctx;

	return sys_ret(read(fd, c->buf, c->len));
}

/* A worker blocks SIGPIPE; a foreign thread may not, so it sends to a
 * socket with MSG_NOSIGNAL and writes only what is not one. */
static ssize_t op_write(int fd, void *ctx)
{
	struct buf_ctx *c = ctx;
	ssize_t n;

	if (!fb_worker_self()) {
		n = sys_ret(send(fd, c->buf, c->len, MSG_NOSIGNAL));
		if (n != -ENOTSOCK)
			return n;
	}
	return sys_ret(write(fd, c->buf, c->len));
}

static ssize_t op_recv(int fd, void *ctx)
{
	struct buf_ctx *c = ctx;

	return sys_ret(recv(fd, c->buf, c->len, c->flags));
}

static ssize_t op_send(int fd, void *ctx)
{
	struct buf_ctx *c = ctx;

	return sys_ret(send(fd, c->buf, c->len, c->flags | MSG_NOSIGNAL));
}

/* write_call - repeat @op over the rest of the buffer until it is all
 * written, in one call on @fd.  Return: as fiber_write(). */
static ssize_t write_call(int fd, struct buf_ctx *c, io_op op)
{
	size_t done = 0, len = c->len;
	struct call k;
	ssize_t n = -call_enter(&k, fd);

	if (n)
		return posix_ret(n);
	do {
		n = io_once(&k, POLLOUT, SO_SNDTIMEO, op, c, 0);
		if (n < 0)
			break;
		done += (size_t)n;
		c->buf = (char *)c->buf + n;
		c->len -= (size_t)n;
	} while (done < len);
	call_leave(&k);
	return done ? partial(done, n) : posix_ret(n);
}

/*
 * fiber_read - read(2) that parks the fiber until @fd is readable.
 * Context: any thread.  Return: bytes read, 0 at end of file, or -1 with
 * errno (read(2)'s, ETIMEDOUT under SO_RCVTIMEO, EBADF once fiber_close()
 * or a reuse of the number ended the wait).
 */
ssize_t fiber_read(int fd, void *buf, size_t len)
{
	struct buf_ctx c = { buf, len, 0 };

	return read_call(fd, SO_RCVTIMEO, op_read, &c, len);
}

/*
 * fiber_write - write(2) of all @len bytes, parking while @fd is full.
 * Context: any thread.  Return: @len, the bytes written before an error,
 * or -1 with errno (write(2)'s, EPIPE without SIGPIPE (see fiber.h),
 * ETIMEDOUT under SO_SNDTIMEO, EBADF as fiber_read()).
 */
ssize_t fiber_write(int fd, const void *buf, size_t len)
{
	struct buf_ctx c = { (void *)buf, len, 0 };

	return write_call(fd, &c, op_write);
}

/*
 * fiber_recv - recv(2) that parks until data is there (not with
 * MSG_DONTWAIT).  Context: any thread.  Return: as fiber_read().
 */
ssize_t fiber_recv(int fd, void *buf, size_t len, int flags)
{
	struct buf_ctx c = { buf, len, flags };

	/* A peek leaves the bytes, and the other flags (MSG_WAITALL,
	 * MSG_OOB, MSG_TRUNC, ...) change what a count means. */
	return read_call(fd, (flags & MSG_DONTWAIT) ? ONE_TRY : SO_RCVTIMEO,
			 op_recv, &c,
			 (flags & ~(MSG_DONTWAIT | MSG_NOSIGNAL)) ? 0 : len);
}

/*
 * fiber_send - send(2) of all @len bytes (one try with MSG_DONTWAIT),
 * always with MSG_NOSIGNAL.  Context: any thread.  Return: as
 * fiber_write().
 */
ssize_t fiber_send(int fd, const void *buf, size_t len, int flags)
{
	struct buf_ctx c = { (void *)buf, len, flags };

	if (flags & MSG_DONTWAIT)
		return io_call(fd, POLLOUT, ONE_TRY, op_send, &c);
	return write_call(fd, &c, op_send);
}

struct iov_ctx {
	const struct iovec *iov;
	int cnt;
};

static ssize_t op_readv(int fd, void *ctx)
{
	struct iov_ctx *c = ctx;

	return sys_ret(readv(fd, c->iov, c->cnt));
}

/* As op_write(), with sendmsg(2) for a foreign thread's socket. */
static ssize_t op_writev(int fd, void *ctx)
{
	struct iov_ctx *c = ctx;
	ssize_t n;

	if (!fb_worker_self()) {
		struct msghdr m = { .msg_iov = (struct iovec *)c->iov,
				    .msg_iovlen = (size_t)c->cnt };

		n = sys_ret(sendmsg(fd, &m, MSG_NOSIGNAL));
		if (n != -ENOTSOCK)
			return n;
	}
	return sys_ret(writev(fd, c->iov, c->cnt));
}

/*
 * fiber_readv - readv(2) that parks until @fd is readable.
 * Context: any thread.  Return: as fiber_read().
 */
ssize_t fiber_readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct iov_ctx c = { iov, iovcnt };
	size_t want = 0;

	for (int i = 0; iov && i < iovcnt; i++) {
		if (iov[i].iov_len > SIZE_MAX - want)
			break;
		want += iov[i].iov_len;
	}
	return read_call(fd, SO_RCVTIMEO, op_readv, &c, want);
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

/* writev_all - fiber_writev() inside call @k.  Return: the bytes written,
 * or -errno if none was. */
static ssize_t writev_all(struct call *k, const struct iovec *iov, int iovcnt)
{
	struct iovec batch[FB_IOV_BATCH];
	struct iov_ctx c = { iov, iovcnt };
	size_t done = 0, off = 0;
	ssize_t n;
	int i = 0, j;

	n = io_once(k, POLLOUT, SO_SNDTIMEO, op_writev, &c, 0);
	if (n < 0)
		return n;
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
		for (j = 0; j < FB_IOV_BATCH && i + j < iovcnt; j++)
			batch[j] = iov[i + j];
		batch[0].iov_base = (char *)batch[0].iov_base + off;
		batch[0].iov_len -= off;
		c.iov = batch;
		c.cnt = j;
		n = io_once(k, POLLOUT, SO_SNDTIMEO, op_writev, &c, 0);
		if (n < 0)
			return partial(done, n);
	}
}

/*
 * fiber_writev - writev(2) of every byte of @iov, parking while @fd is
 * full.  Context: any thread.  Return: as fiber_write(); EINVAL for an
 * @iovcnt below 0 or above IOV_MAX, from every thread (a foreign
 * thread's socket write is a sendmsg(2), which says EMSGSIZE).
 */
ssize_t fiber_writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct call k;
	ssize_t n = -call_enter(&k, fd);

	if (!n) {
		n = iovcnt < 0 || iovcnt > IOV_MAX ?
			    -EINVAL :
			    writev_all(&k, iov, iovcnt);
		call_leave(&k);
	}
	return posix_ret(n);
}

/* ---- datagrams and messages ---------------------------------------------- */

struct addr_ctx {
	void *buf;
	size_t len;
	int flags;
	struct sockaddr *addr;
	socklen_t *addrlen; /* recvfrom */
	socklen_t tolen;    /* sendto */
	struct msghdr *msg; /* recvmsg, sendmsg */
};

static ssize_t op_recvfrom(int fd, void *ctx)
{
	struct addr_ctx *c = ctx;

	return sys_ret(
		recvfrom(fd, c->buf, c->len, c->flags, c->addr, c->addrlen));
}

static ssize_t op_sendto(int fd, void *ctx)
{
	struct addr_ctx *c = ctx;

	return sys_ret(sendto(fd, c->buf, c->len, c->flags | MSG_NOSIGNAL,
			      c->addr, c->tolen));
}

static ssize_t op_recvmsg(int fd, void *ctx)
{
	struct addr_ctx *c = ctx;

	return sys_ret(recvmsg(fd, c->msg, c->flags));
}

static ssize_t op_sendmsg(int fd, void *ctx)
{
	struct addr_ctx *c = ctx;

	return sys_ret(sendmsg(fd, c->msg, c->flags | MSG_NOSIGNAL));
}

/*
 * fiber_recvfrom - recvfrom(2) that parks until a datagram (or data) is
 * there; with MSG_DONTWAIT it tries once.  Context: any thread.
 * Return: as fiber_read().
 */
ssize_t fiber_recvfrom(int fd, void *buf, size_t len, int flags,
		       struct sockaddr *addr, socklen_t *addrlen)
{
	struct addr_ctx c = { .buf = buf,
			      .len = len,
			      .flags = flags,
			      .addr = addr,
			      .addrlen = addrlen };

	return io_call(fd, POLLIN,
		       (flags & MSG_DONTWAIT) ? ONE_TRY : SO_RCVTIMEO,
		       op_recvfrom, &c);
}

/*
 * fiber_sendto - sendto(2) of all @len bytes (a datagram goes whole or
 * not at all), parking while @fd is full; one try with MSG_DONTWAIT;
 * always with MSG_NOSIGNAL.  Context: any thread.
 * Return: as fiber_write().
 */
ssize_t fiber_sendto(int fd, const void *buf, size_t len, int flags,
		     const struct sockaddr *addr, socklen_t addrlen)
{
	struct addr_ctx c = { .buf = (void *)buf,
			      .len = len,
			      .flags = flags,
			      .addr = (struct sockaddr *)addr,
			      .tolen = addrlen };
	size_t done = 0;
	struct call k;
	ssize_t n;

	if (flags & MSG_DONTWAIT)
		return io_call(fd, POLLOUT, ONE_TRY, op_sendto, &c);
	n = -call_enter(&k, fd);
	if (n)
		return posix_ret(n);
	do {
		n = io_once(&k, POLLOUT, SO_SNDTIMEO, op_sendto, &c, 0);
		if (n < 0)
			break;
		done += (size_t)n;
		c.buf = (char *)c.buf + n;
		c.len -= (size_t)n;
	} while (done < len);
	call_leave(&k);
	return done ? partial(done, n) : posix_ret(n);
}

/*
 * fiber_recvmsg - recvmsg(2) that parks until data is there; with
 * MSG_DONTWAIT it tries once.  Ancillary data (SCM_RIGHTS...) comes as
 * recvmsg(2) gives it.  Context: any thread.  Return: as fiber_read().
 */
ssize_t fiber_recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct addr_ctx c = { .flags = flags, .msg = msg };

	return io_call(fd, POLLIN,
		       (flags & MSG_DONTWAIT) ? ONE_TRY : SO_RCVTIMEO,
		       op_recvmsg, &c);
}

/*
 * fiber_sendmsg - sendmsg(2) that parks while @fd is full, always with
 * MSG_NOSIGNAL; with MSG_DONTWAIT it tries once.  It returns the count of
 * the first sendmsg(2) that sends anything, which may be short on a
 * stream socket: resending the rest would send the ancillary data twice.
 * Context: any thread.  Return: the bytes sent, or -1 with errno as
 * fiber_write().
 */
ssize_t fiber_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct addr_ctx c = { .flags = flags, .msg = (struct msghdr *)msg };

	return io_call(fd, POLLOUT,
		       (flags & MSG_DONTWAIT) ? ONE_TRY : SO_SNDTIMEO,
		       op_sendmsg, &c);
}

/* ---- connections --------------------------------------------------------- */

struct accept_ctx {
	struct sockaddr *addr;
	socklen_t *len;
	int flags;
};

static ssize_t op_accept(int fd, void *ctx)
{
	struct accept_ctx *c = ctx;
	ssize_t n = sys_ret(accept4(fd, c->addr, c->len, c->flags));

	if (n >= 0)
		fb_poll_new_file((int)n);
	return n;
}

/*
 * fiber_accept - accept4(2) that parks until a connection is pending.  The
 * new socket is always non-blocking (SOCK_NONBLOCK is added to @flags), as
 * the fiber calls need.  Context: any thread.
 * Return: the new fd, or -1 with accept4(2)'s errno (EMFILE included: the
 * call does not wait for a free descriptor), or EBADF as fiber_read().
 */
int fiber_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
	struct accept_ctx c = { addr, addrlen, flags | SOCK_NONBLOCK };

	return (int)io_call(fd, POLLIN, SO_RCVTIMEO, op_accept, &c);
}

static uint64_t ms_deadline(int timeout_ms)
{
	if (timeout_ms < 0)
		return FB_NO_DEADLINE;
	return fb_now_ns() + (uint64_t)timeout_ms * 1000000u;
}

/* connect_wait - fiber_connect() inside call @k.  Return: 0 or an errno. */
static int connect_wait(struct call *k, const struct sockaddr *addr,
			socklen_t addrlen, uint64_t deadline)
{
	struct pollfd p = { .fd = k->fd, .events = POLLOUT };
	socklen_t len = sizeof(int);
	int err;

	if (connect(k->fd, addr, addrlen) == 0)
		return 0;
	err = sys_errno();
	/* EAGAIN is no connection in progress (a full AF_UNIX backlog, no
	 * local port left): the socket would poll writable at once, with
	 * SO_ERROR 0, unconnected.  connect(2)'s error, as Go returns it. */
	if (err != EINPROGRESS && err != EINTR)
		return err;
	do {
		err = wait_fd(k, POLLOUT, deadline, FB_IOFD_W, NULL);
		if (err)
			return err;
		/* A wake says "look again": a ready bit may be older than
		 * the connection, and SO_ERROR is 0 while it is pending. */
		if (poll(&p, 1, 0) == 0) {
			err = EINPROGRESS;
			continue;
		}
		if (getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &len))
			return sys_errno();
	} while (err == EINPROGRESS || err == EALREADY);
	return err;
}

/*
 * fiber_connect - connect(2) on a non-blocking socket, parking until the
 * connection is made, fails, or @timeout_ms (-1: none) runs out.
 * Context: any thread.
 * Return: 0, or -1 with connect(2)'s errno (the connection's error, e.g.
 * ECONNREFUSED), ETIMEDOUT, or EBADF as fiber_read().
 */
int fiber_connect(int fd, const struct sockaddr *addr, socklen_t addrlen,
		  int timeout_ms)
{
	uint64_t deadline = ms_deadline(timeout_ms);
	struct call k;
	int err = call_enter(&k, fd);

	if (!err) {
		err = connect_wait(&k, addr, addrlen, deadline);
		call_leave(&k);
	}
	return err ? fail(err) : 0;
}

/* poll_wait - fiber_poll() inside call @k.  Return: as fiber_poll(), with
 * -errno for an error. */
static int poll_wait(struct call *k, short events, int timeout_ms)
{
	struct pollfd p = { .fd = k->fd, .events = events };
	uint64_t deadline = ms_deadline(timeout_ms);
	short rev = 0;
	int n, err;

	for (;;) {
		n = poll(&p, 1, 0);
		if (n > 0)
			return p.revents;
		if (n < 0 && (err = sys_errno()) != EINTR)
			return -err;
		if (timeout_ms == 0)
			return 0;
		err = wait_fd(k, events, deadline, -1, &rev);
		if (err == ETIMEDOUT)
			return 0;
		if (err)
			return -err;
		rev &= (short)(events | POLLERR | POLLHUP);
		if (rev)
			return rev;
	}
}

/*
 * fiber_poll - wait until @fd reports one of @events (POLLIN, POLLOUT,
 * POLLPRI, POLLRDHUP) or @timeout_ms runs out (-1: never; 0: just look).
 * Context: any thread.
 * Return: the reported events (> 0, POLLERR and POLLHUP included when
 * they happen), 0 on timeout, or -1 with errno (EBADF as fiber_read()).
 */
int fiber_poll(int fd, short events, int timeout_ms)
{
	struct call k;
	int n = -call_enter(&k, fd);

	if (!n) {
		n = poll_wait(&k, events, timeout_ms);
		call_leave(&k);
	}
	return (int)posix_ret(n);
}

/*
 * fiber_fd_set_deadline - the read and write deadlines of @fd (absolute
 * fiber_now() nanoseconds, FIBER_NO_DEADLINE: none), which bound every
 * later wait of the fd calls on it in that direction until changed or
 * fiber_close(); fibers waiting on @fd now wake and wait again under them.
 * Context: any thread; never switches.  A thread blocked in poll(2) on @fd
 * keeps the deadline it started with.
 * Return: 0, or -1 with errno EBADF (@fd not open, negative, or being
 * closed by fiber_close()) or ENOMEM (as fiber_read()).
 */
int fiber_fd_set_deadline(int fd, uint64_t read_deadline,
			  uint64_t write_deadline)
{
	struct fb_iofd *d;
	uint32_t gen;
	int err = fb_poll_enter(fd, &d, &gen);

	if (err)
		return fail(err);
	if (fcntl(fd, F_GETFD) < 0)
		err = sys_errno();
	else
		fb_poll_set_deadline(fd, d, read_deadline, write_deadline);
	fb_poll_leave(d);
	return err ? fail(err) : 0;
}

/*
 * fiber_close - close(2) for an fd that fiber calls may be using: wake
 * every call waiting on @fd with EBADF, forget its poller state, wait
 * until no call is in progress on it, then close it.
 * Context: any thread, not inside a call on @fd; a fiber yields and sleeps
 * while calls drain, a thread sched_yields and sleeps.
 * Return: 0, or -1 with errno: close(2)'s (EBADF, EINTR, EIO...), or EBADF
 * when another fiber_close() of @fd is running.
 */
int fiber_close(int fd)
{
	int err = fb_poll_close(fd);

	if (!err && close(fd))
		err = sys_errno();
	return err ? fail(err) : 0;
}
