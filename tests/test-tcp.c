/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-tcp.c - fiber_tcp_listen() and fiber_tcp_dial(): a listener on a
 * port the kernel picks, IPv4 and IPv6, non-blocking, close-on-exec and
 * SO_REUSEADDR; a dial from a fiber connects and carries a byte; a dial to
 * a port nobody listens on gives ECONNREFUSED, one whose deadline passed
 * ETIMEDOUT; bad ports and a NULL host give EINVAL; a port in use gives
 * EADDRINUSE.
 */
#include <fiber.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

static int setup(void **state)
{
	struct fiber_config c = { .workers = 2 };

	(void)state;
	return fiber_init(&c);
}

static int teardown(void **state)
{
	(void)state;
	return fiber_shutdown();
}

static int port_of(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void assert_fd_flags(int fd)
{
	int one = 0;
	socklen_t len = sizeof(one);

	assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, &len),
			 0);
	assert_int_not_equal(one, 0);
}

struct dial {
	const char *host;
	int port, fd, err;
	uint64_t deadline;
};

static void *dialer(void *p)
{
	struct dial *d = p;

	d->fd = fiber_tcp_dial(d->host, d->port, d->deadline);
	d->err = d->fd < 0 ? fiber_errno() : 0;
	if (d->fd >= 0 && fiber_write(d->fd, "x", 1) != 1)
		d->err = -1;
	return NULL;
}

static void dial_in_fiber(struct dial *d)
{
	fiber_t f;

	assert_int_equal(fiber_create(&f, NULL, dialer, d), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
}

static void listen_and_dial(const char *host, int family)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct dial d = { host, 0, -1, 0, FIBER_NO_DEADLINE };
	int lfd, cfd;
	char c = 0;

	lfd = fiber_tcp_listen(host, 0, 16);
	assert_true(lfd >= 0);
	assert_fd_flags(lfd);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&ss, &len), 0);
	assert_int_equal(ss.ss_family, family);
	d.port = port_of(lfd);
	assert_int_not_equal(d.port, 0);
	dial_in_fiber(&d);
	assert_int_equal(d.err, 0);
	assert_true(d.fd >= 0);
	assert_true(fcntl(d.fd, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(d.fd, F_GETFD) & FD_CLOEXEC);
	cfd = fiber_accept(lfd, NULL, NULL, 0);
	assert_true(cfd >= 0);
	assert_int_equal(fiber_read(cfd, &c, 1), 1);
	assert_int_equal(c, 'x');
	close(cfd);
	close(d.fd);
	close(lfd);
}

static void test_tcp_listen_and_dial_ipv4(void **state)
{
	(void)state;
	listen_and_dial("127.0.0.1", AF_INET);
}

static void test_tcp_listen_and_dial_ipv6(void **state)
{
	int fd = socket(AF_INET6, SOCK_STREAM, 0);

	(void)state;
	if (fd < 0)
		skip();
	close(fd);
	listen_and_dial("::1", AF_INET6);
}

static void test_tcp_dial_errors(void **state)
{
	struct dial refused = { "127.0.0.1", 0, -1, 0, FIBER_NO_DEADLINE };
	struct dial late = { "127.0.0.1", 0, -1, 0, 0 };
	int lfd, lfd2;

	(void)state;
	lfd = fiber_tcp_listen("127.0.0.1", 0, 1);
	assert_true(lfd >= 0);
	refused.port = late.port = port_of(lfd);
	lfd2 = fiber_tcp_listen("127.0.0.1", refused.port, 1);
	assert_int_equal(lfd2, -1);
	assert_int_equal(errno, EADDRINUSE);
	close(lfd); /* nobody listens there now */
	dial_in_fiber(&refused);
	assert_int_equal(refused.fd, -1);
	assert_int_equal(refused.err, ECONNREFUSED);
	dial_in_fiber(&late);
	assert_int_equal(late.fd, -1);
	assert_int_equal(late.err, ETIMEDOUT);
	assert_int_equal(fiber_tcp_dial(NULL, 80, FIBER_NO_DEADLINE), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(fiber_tcp_dial("127.0.0.1", 65536, 0), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(fiber_tcp_listen(NULL, -1, 1), -1);
	assert_int_equal(errno, EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tcp_listen_and_dial_ipv4),
		cmocka_unit_test(test_tcp_listen_and_dial_ipv6),
		cmocka_unit_test(test_tcp_dial_errors),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
