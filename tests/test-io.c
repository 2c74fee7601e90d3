/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-io.c - fiber-aware fd I/O over loopback and socket pairs: 1,000
 * concurrent echo clients against a fiber-per-connection echo server with
 * every byte verified; read timeouts (ETIMEDOUT) and poll timeouts; a peer
 * that closes or resets mid-request while the server keeps serving others;
 * an acceptor hitting EMFILE backs off instead of spinning; partial
 * readv/writev; a refused connect; a foreign thread blocking in poll(2);
 * errno and fiber_errno() after a wake on another worker; a waiter on a
 * closed fd whose number is reused; fiber_close() under waiters and under
 * a write; writes to a peer that went away (EPIPE, never SIGPIPE, checked
 * in a child process); and an idle runtime that does not burn CPU.
 *
 * Assertions are on bytes, errnos and counters.  The one time-based check
 * is the idle test's CPU time, which the issue asks for: CPU time, not
 * wall clock, with a wide margin.  Fibers never call cmocka assertions.
 */
#include <fiber.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define MS 1000000ull
#define NR_CLIENTS 1000
#define ROUNDS 5

static int setup(void **state)
{
	struct fiber_config c = { 0 };

	(void)state;
	signal(SIGPIPE, SIG_IGN);
	c.workers = 2;
	return fiber_init(&c);
}

static int teardown(void **state)
{
	(void)state;
	return fiber_shutdown();
}

static fiber_t spawn(void *(*fn)(void *), void *arg)
{
	fiber_t f;

	assert_int_equal(fiber_create(&f, NULL, fn, arg), 0);
	return f;
}

static long join(fiber_t f)
{
	void *r = NULL;

	assert_int_equal(fiber_join(f, &r), 0);
	return (long)r;
}

/* ---- the echo server (as examples/echo-server.c) ------------------------ */

struct server {
	int lfd;
	struct sockaddr_in addr;
	atomic_bool stop;
	atomic_long accepts;	/* accept attempts */
	atomic_long emfile;	/* of which EMFILE */
	atomic_long eof, reset; /* connection ends seen by the server */
	atomic_long live;	/* connection fibers running */
	fiber_t acceptor;
};

static struct server srv;

static void *serve(void *arg)
{
	int fd = (int)(long)arg;
	char buf[4096];
	ssize_t n;

	while ((n = fiber_read(fd, buf, sizeof(buf))) > 0)
		if (fiber_write(fd, buf, (size_t)n) != n)
			break;
	if (n == 0)
		atomic_fetch_add(&srv.eof, 1);
	else if (n < 0 && errno == ECONNRESET)
		atomic_fetch_add(&srv.reset, 1);
	close(fd);
	atomic_fetch_sub(&srv.live, 1);
	return NULL;
}

static void *accept_loop(void *arg)
{
	fiber_attr_t attr;
	fiber_t f;
	int fd;

	(void)arg;
	fiber_attr_init(&attr);
	fiber_attr_setdetachstate(&attr, FIBER_CREATE_DETACHED);
	while (!atomic_load(&srv.stop)) {
		atomic_fetch_add(&srv.accepts, 1);
		fd = fiber_accept(srv.lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				atomic_fetch_add(&srv.emfile, 1);
				fiber_sleep(10 * MS); /* back off */
			}
			continue;
		}
		atomic_fetch_add(&srv.live, 1);
		if (fiber_create(&f, &attr, serve, (void *)(long)fd)) {
			close(fd);
			atomic_fetch_sub(&srv.live, 1);
		}
	}
	return NULL;
}

static void server_start(void)
{
	socklen_t len = sizeof(srv.addr);
	int one = 1;

	memset(&srv, 0, sizeof(srv));
	srv.addr.sin_family = AF_INET;
	srv.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	srv.lfd =
		socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(srv.lfd >= 0);
	setsockopt(srv.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(srv.lfd, (struct sockaddr *)&srv.addr,
			      sizeof(srv.addr)),
			 0);
	assert_int_equal(listen(srv.lfd, 4096), 0);
	assert_int_equal(
		getsockname(srv.lfd, (struct sockaddr *)&srv.addr, &len), 0);
	srv.acceptor = spawn(accept_loop, NULL);
}

/* Stop the acceptor (shutdown wakes it) and wait for the connections. */
static void server_stop(void)
{
	atomic_store(&srv.stop, true);
	shutdown(srv.lfd, SHUT_RDWR);
	join(srv.acceptor);
	while (atomic_load(&srv.live) > 0)
		fiber_usleep(1000);
	close(srv.lfd);
}

/* The connect's timeout only bounds a hang: on a loaded host (./dev
 * loaded, beside other test programs) a thousand clients may wait their
 * turn for tens of seconds. */
#define CONNECT_MS 120000

static int client_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd >= 0 && fiber_connect(fd, (struct sockaddr *)&srv.addr,
				     sizeof(srv.addr), CONNECT_MS)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- 1,000 echo clients ------------------------------------------------ */

static atomic_long verified;

static bool read_exact(int fd, unsigned char *buf, size_t len)
{
	ssize_t n;

	for (size_t got = 0; got < len; got += (size_t)n)
		if ((n = fiber_read(fd, buf + got, len - got)) <= 0)
			return false;
	return true;
}

static void *echo_client(void *arg)
{
	long id = (long)arg;
	unsigned char out[3000], in[3000];
	size_t len;
	int fd = client_socket();

	if (fd < 0)
		return (void *)-1L;
	for (int r = 0; r < ROUNDS; r++) {
		len = 1 + (size_t)(id * 31 + r * 977) % sizeof(out);
		for (size_t i = 0; i < len; i++)
			out[i] = (unsigned char)(id + r + i * 7);
		if (fiber_write(fd, out, len) != (ssize_t)len ||
		    !read_exact(fd, in, len) || memcmp(in, out, len)) {
			close(fd);
			return (void *)-2L;
		}
		atomic_fetch_add(&verified, (long)len);
	}
	close(fd);
	return (void *)0L;
}

static long expected_bytes(long nr)
{
	long sum = 0;

	for (long id = 0; id < nr; id++)
		for (int r = 0; r < ROUNDS; r++)
			sum += 1 + (id * 31 + r * 977) % 3000;
	return sum;
}

static void test_io_echo_many_concurrent_clients(void **state)
{
	struct rlimit rl;
	fiber_t *f;
	long nr = NR_CLIENTS;

	(void)state;
	/* Each client costs two fds (its socket and the server's end). */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < 2 * NR_CLIENTS + 64) {
		nr = ((long)rl.rlim_cur - 64) / 2;
		print_message("# RLIMIT_NOFILE hard limit %ld: %ld clients\n",
			      (long)rl.rlim_cur, nr);
	}
	assert_true(nr > 0);
	atomic_store(&verified, 0);
	server_start();
	f = calloc((size_t)nr, sizeof(*f));
	assert_non_null(f);
	for (long i = 0; i < nr; i++)
		f[i] = spawn(echo_client, (void *)i);
	for (long i = 0; i < nr; i++)
		assert_int_equal(join(f[i]), 0);
	free(f);
	assert_int_equal(atomic_load(&verified), expected_bytes(nr));
	server_stop();
	assert_int_equal(atomic_load(&srv.eof), nr);
	assert_true(fiber_stats_counter("io_waits") > 0);
	assert_true(fiber_stats_counter("io_events") > 0);
}

/* ---- timeouts ------------------------------------------------------------ */

static int pair[2];

static void *timed_read(void *arg)
{
	char c;
	ssize_t n = fiber_read(pair[0], &c, 1);

	(void)arg;
	return (void *)(long)(n < 0 ? -errno : n);
}

static void *poll_timeout(void *arg)
{
	(void)arg;
	return (void *)(long)fiber_poll(pair[0], POLLIN, 5);
}

static void test_io_read_on_silent_socket_times_out(void **state)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = 10000 };
	char c;

	(void)state;
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair), 0);
	assert_int_equal(setsockopt(pair[0], SOL_SOCKET, SO_RCVTIMEO, &tv,
				    sizeof(tv)),
			 0);
	assert_int_equal(join(spawn(timed_read, NULL)), -ETIMEDOUT);
	assert_int_equal(join(spawn(poll_timeout, NULL)), 0);
	/* A foreign thread blocks in poll(2) and times out the same way. */
	assert_int_equal(fiber_read(pair[0], &c, 1), -1);
	assert_int_equal(errno, ETIMEDOUT);
	assert_int_equal(fiber_poll(pair[0], POLLIN, 5), 0);
	assert_int_equal(fiber_poll(pair[1], POLLOUT, -1) & POLLOUT, POLLOUT);
	close(pair[0]);
	close(pair[1]);
}

/*
 * errno across a wake on another worker.  The reader parks on worker 0,
 * beside a hog that keeps it busy; its SO_RCVTIMEO timer fires there and
 * the wake places it on the idle worker 1.  The call must set errno on
 * the thread it returns on, and fiber_errno() must say the same.
 *
 * The two workers share one LLC (a synthetic topology), so that the wake's
 * idle scan sees worker 1.  On the machine's own topology the two may be
 * LLCs of their own (one L3 per core, as on some VMs): the wake then keeps
 * the fiber on its busy worker and only a steal moves it, which under a
 * loaded host may never happen within the 40 rounds.
 */
#define ERRNO_ROUNDS 40

static atomic_bool hog_stop;

static void *hog(void *arg)
{
	(void)arg;
	while (!atomic_load(&hog_stop))
		fiber_yield();
	return NULL;
}

/* errno read as it must be after a call that may switch: through a
 * pointer the compiler cannot treat as const (fiber.h). */
static int *(*volatile errno_loc)(void) = __errno_location;

struct errno_run {
	int bad_errno, bad_fiber_errno, moved;
};

static void *errno_reader(void *arg)
{
	struct errno_run *r = arg;
	cpu_set_t w0, both;
	int before, e, fe;
	ssize_t n;
	char c;

	CPU_ZERO(&w0);
	CPU_SET(0, &w0);
	CPU_ZERO(&both);
	CPU_SET(0, &both);
	CPU_SET(1, &both);
	for (int i = 0; i < ERRNO_ROUNDS; i++) {
		fiber_setaffinity(sizeof(w0), &w0); /* onto worker 0 */
		fiber_setaffinity(sizeof(both), &both);
		before = fiber_current_worker();
		n = fiber_read(pair[0], &c, 1);
		e = *errno_loc();
		fe = fiber_errno();
		r->bad_errno += n != -1 || e != ETIMEDOUT;
		r->bad_fiber_errno += fe != ETIMEDOUT;
		r->moved += fiber_current_worker() != before;
	}
	return NULL;
}

static const struct fiber_config one_llc = {
	.workers = 2,
	.topology = "pack:1 l3:1 core:2 pu:1",
};

static void test_io_errno_survives_a_wake_on_another_worker(void **state)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = 1000 };
	struct errno_run r = { 0 };
	fiber_attr_t attr;
	cpu_set_t w0;
	fiber_t h;

	(void)state;
	assert_int_equal(fiber_shutdown(), 0);
	assert_int_equal(fiber_init(&one_llc), 0);
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair), 0);
	assert_int_equal(setsockopt(pair[0], SOL_SOCKET, SO_RCVTIMEO, &tv,
				    sizeof(tv)),
			 0);
	CPU_ZERO(&w0);
	CPU_SET(0, &w0);
	fiber_attr_init(&attr);
	assert_int_equal(fiber_attr_setaffinity(&attr, sizeof(w0), &w0), 0);
	atomic_store(&hog_stop, false);
	assert_int_equal(fiber_create(&h, &attr, hog, NULL), 0);
	join(spawn(errno_reader, &r));
	atomic_store(&hog_stop, true);
	join(h);
	print_message("# %d of %d timeouts returned on another worker\n",
		      r.moved, ERRNO_ROUNDS);
	assert_int_equal(r.bad_errno, 0);
	assert_int_equal(r.bad_fiber_errno, 0);
	assert_true(r.moved > 0); /* else the test proved nothing */
	close(pair[0]);
	close(pair[1]);
	assert_int_equal(fiber_shutdown(), 0);
	assert_int_equal(setup(NULL), 0);
}

static void *late_writer(void *arg)
{
	(void)arg;
	fiber_sleep(2 * MS);
	return (void *)(long)fiber_write(pair[1], "ping", 4);
}

static void test_io_foreign_thread_reads_what_a_fiber_writes(void **state)
{
	char buf[8];
	fiber_t w;

	(void)state;
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair), 0);
	w = spawn(late_writer, NULL);
	assert_int_equal(fiber_read(pair[0], buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "ping", 4);
	assert_int_equal(join(w), 4);
	close(pair[0]);
	close(pair[1]);
}

/* ---- peers that go away ------------------------------------------------- */

static void test_io_peer_close_mid_request_server_keeps_serving(void **state)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int a, b;

	(void)state;
	server_start();
	/* A half-sent request, then an orderly close: the server sees EOF. */
	a = client_socket();
	assert_true(a >= 0);
	assert_int_equal(fiber_write(a, "GET / HT", 8), 8);
	{
		/* Read the echo first: closing with unread data would send a
		 * reset instead of an orderly close. */
		char echo[8];
		size_t got = 0;

		while (got < sizeof(echo)) {
			ssize_t n =
				fiber_read(a, echo + got, sizeof(echo) - got);

			assert_true(n > 0);
			got += (size_t)n;
		}
	}
	close(a);
	/* A reset (linger 0) after the server has echoed: ECONNRESET. */
	b = client_socket();
	assert_true(b >= 0);
	assert_int_equal(fiber_write(b, "x", 1), 1);
	assert_int_equal(fiber_poll(b, POLLIN, 10000) & POLLIN, POLLIN);
	setsockopt(b, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(b);
	while (atomic_load(&srv.eof) + atomic_load(&srv.reset) < 2)
		fiber_usleep(1000);
	assert_int_equal(atomic_load(&srv.reset), 1);
	/* And others are still served. */
	atomic_store(&verified, 0);
	assert_int_equal(join(spawn(echo_client, (void *)7L)), 0);
	assert_int_equal(atomic_load(&verified),
			 expected_bytes(8) - expected_bytes(7));
	server_stop();
}

static void *reader_of_reset(void *arg)
{
	char buf[16];
	ssize_t n = fiber_read((int)(long)arg, buf, sizeof(buf));

	return (void *)(long)(n < 0 ? -errno : n);
}

static void test_io_reset_reaches_the_reading_fiber(void **state)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int l, c, s;
	fiber_t r;

	(void)state;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 4), 0);
	getsockname(l, (struct sockaddr *)&a, &len);
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_int_equal(
		fiber_connect(c, (struct sockaddr *)&a, sizeof(a), 5000), 0);
	s = fiber_accept(l, NULL, NULL, 0);
	assert_true(s >= 0);
	/* The reader parks on the poller; then the peer resets. */
	r = spawn(reader_of_reset, (void *)(long)s);
	fiber_usleep(2000);
	setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(c);
	assert_int_equal(join(r), -ECONNRESET);
	close(s);
	close(l);
}

static void test_io_connect_refused(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), c;

	(void)state;
	/* A port nobody listens on: bound, then closed. */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	getsockname(l, (struct sockaddr *)&a, &len);
	close(l);
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_int_equal(
		fiber_connect(c, (struct sockaddr *)&a, sizeof(a), 5000), -1);
	assert_int_equal(errno, ECONNREFUSED);
	close(c);
}

/* ---- closing an fd that fibers wait on ---------------------------------- */

#define REUSE_LEN 3000

static long long io_waits(void)
{
	return fiber_stats_counter("io_waits");
}

/* A non-blocking TCP socket listening on a loopback port the kernel
 * picks, whose address goes in *@a. */
static int listen_loopback(struct sockaddr_in *a, int backlog)
{
	socklen_t len = sizeof(*a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	assert_true(l >= 0);
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(l, (struct sockaddr *)a, sizeof(*a)), 0);
	assert_int_equal(listen(l, backlog), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)a, &len), 0);
	return l;
}

/* Wait until @n more fibers than @base queued on the poller. */
static void wait_parked(long long base, int n)
{
	while (io_waits() < base + n)
		fiber_usleep(500);
}

static atomic_int nr_returned;

/* One fiber_read of up to REUSE_LEN bytes: the count or -fiber_errno(). */
static void *read_once(void *arg)
{
	static char buf[REUSE_LEN];
	ssize_t n = fiber_read((int)(long)arg, buf, sizeof(buf));

	n = n < 0 ? -fiber_errno() : n;
	atomic_fetch_add(&nr_returned, 1);
	return (void *)(long)n;
}

/* Read exactly REUSE_LEN bytes, checking them: 1, or 0. */
static void *read_all_checked(void *arg)
{
	unsigned char buf[REUSE_LEN];

	if (!read_exact((int)(long)arg, buf, sizeof(buf)))
		return (void *)0L;
	for (int i = 0; i < REUSE_LEN; i++)
		if (buf[i] != (unsigned char)(i * 13))
			return (void *)0L;
	return (void *)1L;
}

/* Write REUSE_LEN checked bytes to @fd, from the calling thread. */
static void write_checked(int fd)
{
	unsigned char buf[REUSE_LEN];

	for (int i = 0; i < REUSE_LEN; i++)
		buf[i] = (unsigned char)(i * 13);
	assert_int_equal(fiber_write(fd, buf, sizeof(buf)), REUSE_LEN);
}

/*
 * New socket pairs until one end gets the number @fd; stores it in
 * *@same and its peer in *@peer, and closes the pairs that missed.
 */
static void reuse_number(int fd, int *same, int *peer)
{
	int sp[2], spare[64], nr = 0;

	*same = -1;
	while (*same < 0 && nr < 64) {
		assert_int_equal(socketpair(AF_UNIX,
					    SOCK_STREAM | SOCK_NONBLOCK, 0, sp),
				 0);
		if (sp[0] == fd || sp[1] == fd) {
			*same = fd;
			*peer = sp[0] == fd ? sp[1] : sp[0];
		} else {
			spare[nr++] = sp[0];
			spare[nr++] = sp[1];
		}
	}
	while (nr > 0)
		close(spare[--nr]);
	assert_int_equal(*same, fd);
}

/*
 * A plain close(2) under a parked reader, and the number reused by a new
 * socket that a new fiber reads: the new reader gets every byte, the
 * stale one EBADF (it used to get the new socket's bytes, and the new
 * reader stayed parked).
 */
static void
test_io_stale_waiter_never_gets_the_reused_numbers_data(void **state)
{
	long long base = io_waits();
	int sp[2], fd, peer;
	fiber_t a, b;

	(void)state;
	atomic_store(&nr_returned, 0);
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	a = spawn(read_once, (void *)(long)sp[0]);
	wait_parked(base, 1);
	close(sp[0]); /* the misuse: a reader is parked on it */
	reuse_number(sp[0], &fd, &peer);
	b = spawn(read_all_checked, (void *)(long)fd);
	/* b's registration finds the old file gone and fails a; bounded,
	 * so that the old code, which leaves a parked, goes on to fail. */
	for (int i = 0; i < 5000 && !atomic_load(&nr_returned); i++)
		fiber_usleep(200);
	write_checked(peer);
	assert_int_equal(join(a), -EBADF);
	assert_int_equal(join(b), 1);
	close(fd);
	close(peer);
	close(sp[1]);
}

static void *write_once(void *arg)
{
	static char buf[1 << 16];
	ssize_t n = fiber_write((int)(long)arg, buf, sizeof(buf));

	return (void *)(long)(n < 0 ? -fiber_errno() : n);
}

/* Fill the send buffer of non-blocking @fd. */
static void fill(int fd)
{
	char buf[4096] = { 0 };

	while (write(fd, buf, sizeof(buf)) > 0)
		;
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
}

static void test_io_close_wakes_readers_and_writer_with_ebadf(void **state)
{
	long long base = io_waits();
	fiber_t r1, r2, w;
	int sp[2];

	(void)state;
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	fill(sp[0]);
	r1 = spawn(read_once, (void *)(long)sp[0]);
	r2 = spawn(read_once, (void *)(long)sp[0]);
	w = spawn(write_once, (void *)(long)sp[0]);
	wait_parked(base, 3);
	assert_int_equal(fiber_close(sp[0]), 0);
	assert_int_equal(join(r1), -EBADF);
	assert_int_equal(join(r2), -EBADF);
	assert_int_equal(join(w), -EBADF);
	assert_int_equal(fcntl(sp[0], F_GETFD), -1); /* and it is closed */
	assert_int_equal(fiber_close(sp[1]), 0);
	/* A second close of the same number is close(2)'s EBADF. */
	assert_int_equal(fiber_close(sp[1]), -1);
	assert_int_equal(errno, EBADF);
}

#define CLOSE_ROUNDS 20
#define BIG_WRITE (4 << 20)

static void *big_write(void *arg)
{
	char *buf = calloc(1, BIG_WRITE);
	ssize_t n = fiber_write((int)(long)arg, buf, BIG_WRITE);

	n = n < 0 ? -fiber_errno() : n;
	free(buf);
	return (void *)(long)n;
}

/* Read until end of file or an error: the bytes read. */
static void *drain(void *arg)
{
	char buf[8192];
	long got = 0;
	ssize_t n;

	while ((n = fiber_read((int)(long)arg, buf, sizeof(buf))) > 0)
		got += n;
	return (void *)got;
}

/*
 * fiber_close() while a fiber is inside a big fiber_write: parked on the
 * full buffer (even rounds), or racing with a reader that drains the other
 * end (odd rounds), so that the close also meets it between two system
 * calls.  The close returns, the write returns what it wrote (EBADF if
 * nothing), and the reader gets exactly those bytes, then end of file.
 */
static void test_io_close_under_a_write_returns(void **state)
{
	long wrote, got, cut = 0;
	long long base;
	fiber_t w, r = NULL;
	int sp[2];

	(void)state;
	for (int i = 0; i < CLOSE_ROUNDS; i++) {
		assert_int_equal(socketpair(AF_UNIX,
					    SOCK_STREAM | SOCK_NONBLOCK, 0, sp),
				 0);
		base = io_waits();
		w = spawn(big_write, (void *)(long)sp[0]);
		if (i % 2 == 0) {
			wait_parked(base, 1);
		} else {
			r = spawn(drain, (void *)(long)sp[1]);
			fiber_usleep((unsigned int)(i % 5) * 200);
		}
		assert_int_equal(fiber_close(sp[0]), 0);
		wrote = join(w);
		if (i % 2 == 0)
			r = spawn(drain, (void *)(long)sp[1]);
		got = join(r);
		assert_true(wrote == -EBADF ||
			    (wrote > 0 && wrote <= BIG_WRITE));
		if (i % 2 == 0)
			assert_true(wrote > 0 && wrote < BIG_WRITE);
		assert_int_equal(got, wrote > 0 ? wrote : 0);
		cut += wrote > 0 && wrote < BIG_WRITE;
		close(sp[1]);
	}
	print_message("# the close cut %ld of %d writes short\n", cut,
		      CLOSE_ROUNDS);
}

/* After fiber_close() the number works for the next file, waits included. */
static void test_io_number_reused_after_close_works(void **state)
{
	long long base = io_waits();
	int sp[2], fd, peer;
	fiber_t a, b;

	(void)state;
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	a = spawn(read_once, (void *)(long)sp[0]);
	wait_parked(base, 1); /* registered with the poller */
	assert_int_equal(fiber_close(sp[0]), 0);
	assert_int_equal(join(a), -EBADF);
	reuse_number(sp[0], &fd, &peer);
	base = io_waits();
	b = spawn(read_all_checked, (void *)(long)fd);
	wait_parked(base, 1);
	write_checked(peer);
	assert_int_equal(join(b), 1);
	assert_int_equal(fiber_close(fd), 0);
	assert_int_equal(fiber_close(peer), 0);
	close(sp[1]);
}

/*
 * A plain close(2) under a parked reader (a misuse) and a new file at the
 * number: the reader must fail with EBADF, never read the new file.
 * Two ways it used to retry its read on the new file:
 *   - the new file's owner set a deadline on it, which wakes the number's
 *     waiters to wait again under it;
 *   - the old file lived on in a dup and got bytes (an event), after
 *     fiber_accept() made a connection at the number.
 */
static void test_io_plain_close_under_a_reader_never_misdelivers(void **state)
{
	struct sockaddr_in a;
	long long base;
	int sp[2], nw[2], l, c, keep, fd;
	char buf[16];
	fiber_t r;

	(void)state;
	/* The new owner sets a deadline. */
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	base = io_waits();
	r = spawn(read_once, (void *)(long)sp[0]);
	wait_parked(base, 1);
	assert_int_equal(close(sp[0]), 0); /* the misuse */
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, nw), 0);
	assert_int_equal(nw[0], sp[0]);
	assert_int_equal(write(nw[1], "new", 3), 3);
	assert_int_equal(fiber_fd_set_deadline(nw[0], FIBER_NO_DEADLINE,
					       FIBER_NO_DEADLINE),
			 0);
	assert_int_equal(join(r), -EBADF);
	assert_int_equal(fiber_read(nw[0], buf, sizeof(buf)), 3);
	assert_int_equal(fiber_close(nw[0]), 0);
	close(nw[1]);
	close(sp[1]);
	/* The old file lives on in a dup; an accept takes the number. */
	l = listen_loopback(&a, 1);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	base = io_waits();
	r = spawn(read_once, (void *)(long)sp[0]);
	wait_parked(base, 1);
	keep = dup(sp[0]);
	assert_int_equal(close(sp[0]), 0); /* the misuse */
	fd = fiber_accept(l, NULL, NULL, SOCK_CLOEXEC);
	assert_int_equal(fd, sp[0]);
	assert_int_equal(write(c, "new", 3), 3);
	assert_int_equal(write(sp[1], "old", 3), 3); /* an event, old file */
	assert_int_equal(join(r), -EBADF);
	assert_int_equal(fiber_read(fd, buf, sizeof(buf)), 3);
	assert_memory_equal(buf, "new", 3);
	assert_int_equal(fiber_close(fd), 0);
	close(keep);
	close(sp[1]);
	close(c);
	close(l);
}

/* ---- writes to a peer that went away: EPIPE, never SIGPIPE -------------- */

/*
 * The writes run in a fresh process (this program, re-executed with
 * "--sigpipe-child MODE") with SIGPIPE at its default action, so that a
 * signal shows as the child's death.  Exit status: 0 when every write
 * failed with EPIPE, else the number of the write that did not.
 */
static int expect_epipe(ssize_t n, int which)
{
	return n == -1 && fiber_errno() == EPIPE ? 0 : which;
}

static int gone_peer_writes(void)
{
	struct iovec iov = { .iov_base = "x", .iov_len = 1 };
	int sp[2], p[2], rc = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp) ||
	    pipe2(p, O_NONBLOCK))
		return 100;
	close(sp[1]);
	close(p[0]);
	rc = rc ? rc : expect_epipe(fiber_write(sp[0], "x", 1), 1);
	rc = rc ? rc : expect_epipe(fiber_writev(sp[0], &iov, 1), 2);
	rc = rc ? rc : expect_epipe(fiber_send(sp[0], "x", 1, 0), 3);
	rc = rc ? rc : expect_epipe(fiber_sendto(sp[0], "x", 1, 0, NULL, 0), 5);
	rc = rc ? rc :
		  expect_epipe(
			  fiber_sendmsg(sp[0],
					&(struct msghdr){ .msg_iov = &iov,
							  .msg_iovlen = 1 },
					0),
			  6);
	/* A pipe: EPIPE too from a fiber; from a thread see "pipe" below. */
	if (fiber_self())
		rc = rc ? rc : expect_epipe(fiber_write(p[1], "x", 1), 4);
	close(sp[0]);
	close(p[1]);
	return rc;
}

static void *gone_peer_fiber(void *arg)
{
	(void)arg;
	return (void *)(long)gone_peer_writes();
}

static int sigpipe_child(const char *mode)
{
	struct fiber_config c = { 0 };
	void *r = NULL;
	fiber_t f;
	int p[2], rc;

	signal(SIGPIPE, SIG_DFL);
	c.workers = 2;
	if (fiber_init(&c))
		return 101;
	if (!strcmp(mode, "fiber")) {
		if (fiber_create(&f, NULL, gone_peer_fiber, NULL) ||
		    fiber_join(f, &r))
			rc = 102;
		else
			rc = (int)(long)r;
	} else if (!strcmp(mode, "thread")) {
		rc = gone_peer_writes();
	} else {
		/* A thread's write to a pipe raises SIGPIPE, as write(2). */
		rc = pipe(p) ? 103 : 0;
		close(p[0]);
		if (!rc)
			fiber_write(p[1], "x", 1);
		rc = rc ? rc : 104; /* not reached */
	}
	fiber_shutdown();
	return rc;
}

/* Run sigpipe_child(@mode) in a new process; return its wait status.
 * The program is found by the name /proc/self/exe links to, not by the
 * link itself: under valgrind the link is valgrind's own program, while
 * readlink() gives the one it runs. */
static int run_sigpipe_child(const char *mode)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int status;
	pid_t pid;

	assert_true(n > 0);
	exe[n] = '\0';
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl(exe, "test-io", "--sigpipe-child", mode, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	print_message("# child %s: %s %d\n", mode,
		      WIFSIGNALED(status) ? "signal" : "exit",
		      WIFSIGNALED(status) ? WTERMSIG(status) :
					    WEXITSTATUS(status));
	return status;
}

static void test_io_write_to_gone_peer_from_fiber_is_epipe(void **state)
{
	int st = run_sigpipe_child("fiber");

	(void)state;
	assert_false(WIFSIGNALED(st));
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_io_write_to_gone_peer_from_thread_is_epipe(void **state)
{
	int st = run_sigpipe_child("thread");

	(void)state;
	assert_false(WIFSIGNALED(st));
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_io_thread_write_to_gone_pipe_raises_sigpipe(void **state)
{
	int st = run_sigpipe_child("pipe");

	(void)state;
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGPIPE);
}

/* ---- EMFILE --------------------------------------------------------------- */

static void test_io_accept_emfile_backs_off(void **state)
{
	struct rlimit old, low;
	int c[4], top = 0;

	(void)state;
	server_start();
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	/* Descriptors for the clients now; then no more for anyone. */
	for (int i = 0; i < 4; i++) {
		c[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		assert_true(c[i] >= 0);
		top = c[i] > top ? c[i] : top;
	}
	low = old;
	low.rlim_cur = (rlim_t)top + 1;
	for (int fd = top + 1; fd < top + 64; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			low.rlim_cur = (rlim_t)fd + 1; /* keep what is open */
	atomic_store(&srv.accepts, 0);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	for (int i = 0; i < 4; i++)
		connect(c[i], (struct sockaddr *)&srv.addr, sizeof(srv.addr));
	usleep(200000); /* a bounded run: 200 ms at EMFILE */
	/* Without the back-off this would be millions of attempts. */
	assert_true(atomic_load(&srv.emfile) > 0);
	assert_true(atomic_load(&srv.accepts) < 100);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	for (int i = 0; i < 4; i++)
		close(c[i]);
	server_stop();
}

/* ---- partial readv / writev ---------------------------------------------- */

#define VEC_LEN (1 << 20)

static void *vec_reader(void *arg)
{
	unsigned char *buf = malloc(3 * VEC_LEN);
	struct iovec iov[2];
	size_t got = 0;
	ssize_t n;
	long bad = 0;

	(void)arg;
	while (got < 3 * VEC_LEN) {
		iov[0].iov_base = buf + got;
		iov[0].iov_len = (3 * VEC_LEN - got) / 2;
		iov[1].iov_base = buf + got + iov[0].iov_len;
		iov[1].iov_len = 3 * VEC_LEN - got - iov[0].iov_len;
		n = fiber_readv(pair[0], iov, 2);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	for (size_t i = 0; i < got; i++)
		bad += buf[i] != (unsigned char)(i % 251);
	free(buf);
	return (void *)(long)(got == 3 * VEC_LEN && !bad);
}

static void *vec_writer(void *arg)
{
	unsigned char *buf = malloc(3 * VEC_LEN);
	struct iovec iov[3];
	ssize_t n;

	(void)arg;
	for (size_t i = 0; i < 3 * VEC_LEN; i++)
		buf[i] = (unsigned char)(i % 251);
	for (int i = 0; i < 3; i++) {
		iov[i].iov_base = buf + (size_t)i * VEC_LEN;
		iov[i].iov_len = VEC_LEN;
	}
	n = fiber_writev(pair[1], iov, 3);
	free(buf);
	return (void *)(long)n;
}

static void test_io_writev_finishes_partial_writes(void **state)
{
	fiber_t r, w;

	(void)state;
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair), 0);
	r = spawn(vec_reader, NULL);
	w = spawn(vec_writer, NULL);
	assert_int_equal(join(w), 3 * VEC_LEN);
	assert_int_equal(join(r), 1);
	close(pair[0]);
	close(pair[1]);
}

/* ---- register once, edge-triggered -------------------------------------- */

#define ONCE_READS 50

static long long counter(const char *name)
{
	return fiber_stats_counter(name);
}

/* ONCE_READS one-byte reads of @arg: the bytes read, or -fiber_errno(). */
static void *read_bytes(void *arg)
{
	long got = 0;
	char c;

	for (int i = 0; i < ONCE_READS; i++) {
		if (fiber_read((int)(long)arg, &c, 1) != 1)
			return (void *)(long)-fiber_errno();
		got++;
	}
	return (void *)got;
}

/*
 * ONCE_READS reads that each park (the byte comes only once the reader is
 * queued) register the fd once: one epoll_ctl, and one more for the
 * fiber_close() that forgets it.  With a re-armed one-shot registration
 * it was one per wait.
 */
static void test_io_read_waits_register_the_fd_once(void **state)
{
	long long ctls, waits = io_waits();
	int sp[2], fd;
	fiber_t r;

	(void)state;
	assert_true(counter("epoll_ctls") >= 0);
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	/* A number whose entry knows no file: fiber_close() forgets it. */
	fd = dup(sp[0]);
	assert_int_equal(fiber_close(fd), 0);
	assert_int_equal(fcntl(sp[0], F_DUPFD_CLOEXEC, fd), fd);
	close(sp[0]);
	sp[0] = fd;
	ctls = counter("epoll_ctls");
	r = spawn(read_bytes, (void *)(long)sp[0]);
	for (int i = 0; i < ONCE_READS; i++) {
		wait_parked(waits, i + 1);
		assert_int_equal(write(sp[1], "x", 1), 1);
	}
	assert_int_equal(join(r), ONCE_READS);
	assert_int_equal(io_waits() - waits, ONCE_READS);
	assert_int_equal(counter("epoll_ctls") - ctls, 1);
	assert_int_equal(fiber_close(sp[0]), 0);
	assert_int_equal(counter("epoll_ctls") - ctls, 2);
	close(sp[1]);
}

/*
 * Two fibers parked on one fd for reading both wake at its next edge: the
 * one that finds the byte returns it, the other parks again, and the next
 * byte is its.  With one edge per arrival, waking one alone could leave
 * the other parked on a readable fd.
 */
static void test_io_two_readers_of_one_fd_both_wake(void **state)
{
	long long waits = io_waits(), events;
	int sp[2];
	fiber_t a, b;

	(void)state;
	atomic_store(&nr_returned, 0);
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	a = spawn(read_once, (void *)(long)sp[0]);
	b = spawn(read_once, (void *)(long)sp[0]);
	wait_parked(waits, 2);
	events = counter("io_events");
	assert_int_equal(write(sp[1], "x", 1), 1);
	while (atomic_load(&nr_returned) < 1)
		fiber_usleep(200);
	wait_parked(waits, 3); /* the loser parked again */
	assert_true(counter("io_events") - events >= 2);
	assert_int_equal(write(sp[1], "y", 1), 1);
	assert_int_equal(join(a), 1);
	assert_int_equal(join(b), 1);
	assert_int_equal(fiber_close(sp[0]), 0);
	close(sp[1]);
}

/* ---- drained reads ------------------------------------------------------ */

#define STEPS 8

/* A reader the main thread drives one read at a time: read i starts once
 * @go passes i (a negative @go stops it); each read's count (or
 * -fiber_errno()) and bytes are kept. */
struct stepper {
	int fd;
	int peek_at; /* the read that is a MSG_PEEK recv (-1: none) */
	atomic_int go, done;
	long n[STEPS];
	char buf[STEPS][64];
};

static void *step_reads(void *arg)
{
	struct stepper *s = arg;
	ssize_t n;

	for (int i = 0; i < STEPS; i++) {
		while (atomic_load(&s->go) <= i) {
			if (atomic_load(&s->go) < 0)
				return NULL; /* stopped */
			fiber_usleep(200);
		}
		if (i == s->peek_at)
			n = fiber_recv(s->fd, s->buf[i], sizeof(s->buf[i]),
				       MSG_PEEK);
		else
			n = fiber_read(s->fd, s->buf[i], sizeof(s->buf[i]));
		s->n[i] = n < 0 ? -fiber_errno() : n;
		atomic_store(&s->done, i + 1);
		if (n <= 0)
			break;
	}
	return NULL;
}

/* Let read @i of @s start; unless @parks, wait for its result. */
static void step(struct stepper *s, int i, bool parks)
{
	atomic_store(&s->go, i + 1);
	if (!parks)
		while (atomic_load(&s->done) < i + 1)
			usleep(200);
}

static void step_done(struct stepper *s, int i)
{
	while (atomic_load(&s->done) < i + 1)
		usleep(200);
}

/* Give an idle worker time to poll the edges of what was just sent, so
 * that they are handed out before the next read (if not, the test checks
 * less, but still passes). */
static void let_poller_run(void)
{
	usleep(20000);
}

static fiber_t stepper_start(struct stepper *s, int fd, int peek_at)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->peek_at = peek_at;
	/* A read that wrongly waits for an edge that never comes fails with
	 * ETIMEDOUT instead of hanging the suite. */
	assert_int_equal(fiber_fd_set_deadline(fd, fiber_now() + 10000 * MS,
					       FIBER_NO_DEADLINE),
			 0);
	return spawn(step_reads, s);
}

/* stepper_first - start @s on @fd; its read 0 parks, which registers the
 * fd, and gets the @n bytes of @p that the peer @peer then sends. */
static fiber_t stepper_first(struct stepper *s, int fd, int peek_at, int peer,
			     const char *p, size_t n)
{
	long long waits = io_waits();
	fiber_t r = stepper_start(s, fd, peek_at);

	step(s, 0, true);
	wait_parked(waits, 1);
	assert_int_equal(send(peer, p, n, 0), (ssize_t)n);
	step_done(s, 0);
	assert_int_equal(s->n[0], (long)n);
	return r;
}

/* A connected TCP pair: fd[0] accepted, non-blocking. */
static void tcp_pair(int fd[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(l >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
	fd[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(fd[1], (struct sockaddr *)&a, sizeof(a)), 0);
	fd[0] = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	assert_true(fd[0] >= 0);
	close(l);
}

/*
 * A short read of a TCP socket marks it drained, and the next read
 * waits for an edge instead of calling read(2) for its EAGAIN (counter
 * io_drained_reads).  Nothing may be lost to it: bytes that came between
 * two reads, bytes that came with the peer's end of stream (no later edge
 * brings the 0), bytes a peek saw.
 */
static void test_io_drained_stream_reads_lose_nothing(void **state)
{
	long long drained;
	static struct stepper s;
	int sp[2];
	fiber_t r;

	(void)state;
	tcp_pair(sp);
	drained = counter("io_drained_reads");
	/* Read 0 registers the fd; its 4 bytes are short. */
	r = stepper_first(&s, sp[0], 3, sp[1], "abcd", 4);
	/* Bytes that came while nobody read: their edge ended the mark (if
	 * the poller took it already; else read 1 waits first and finds it),
	 * and read 1 reads them. */
	assert_int_equal(write(sp[1], "efgh", 4), 4);
	let_poller_run();
	step(&s, 1, false);
	assert_int_equal(s.n[1], 4);
	assert_memory_equal(s.buf[1], "efgh", 4);
	/* Read 2 waits first and parks; the bytes come later. */
	step(&s, 2, true);
	let_poller_run();
	assert_int_equal(write(sp[1], "ijk", 3), 3);
	step_done(&s, 2);
	assert_int_equal(s.n[2], 3);
	assert_memory_equal(s.buf[2], "ijk", 3);
	/* Read 2 waited first; read 1 too if the poller was late. */
	assert_in_range(counter("io_drained_reads") - drained, 1, 2);
	/* A peek (read 3) sees bytes and leaves them; read 4 reads them. */
	assert_int_equal(write(sp[1], "lm", 2), 2);
	let_poller_run();
	step(&s, 3, false);
	assert_int_equal(s.n[3], 2);
	step(&s, 4, false);
	assert_int_equal(s.n[4], 2);
	assert_memory_equal(s.buf[4], "lm", 2);
	/* Bytes and the end of stream in one go while read 5 is parked: it
	 * gets the bytes, read 6 the 0. */
	step(&s, 5, true);
	let_poller_run();
	assert_int_equal(write(sp[1], "no", 2), 2);
	assert_int_equal(shutdown(sp[1], SHUT_WR), 0);
	step_done(&s, 5);
	assert_int_equal(s.n[5], 2);
	step(&s, 6, false);
	assert_int_equal(s.n[6], 0);
	join(r);
	assert_int_equal(fiber_close(sp[0]), 0);
	close(sp[1]);

	/* The end of stream comes with bytes while nobody reads. */
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	r = stepper_first(&s, sp[0], -1, sp[1], "a", 1);
	assert_int_equal(write(sp[1], "bc", 2), 2);
	assert_int_equal(shutdown(sp[1], SHUT_WR), 0);
	let_poller_run();
	step(&s, 1, false);
	assert_int_equal(s.n[1], 2);
	step(&s, 2, false);
	assert_int_equal(s.n[2], 0);
	join(r);
	assert_int_equal(fiber_close(sp[0]), 0);
	close(sp[1]);
}

/* A loopback TCP connection: @fd[0] the accepted end (non-blocking), @fd[1]
 * the connecting end (blocking). */

/*
 * The bytes and the end of stream in one TCP segment (TCP_CORK holds the
 * bytes until the shutdown sends them with the FIN) bring one edge, which
 * wakes the parked reader: the read after the bytes must return 0, not
 * wait for an edge that will not come.
 */
static void test_io_drained_read_sees_an_end_that_came_with_bytes(void **state)
{
	long long waits = io_waits();
	static struct stepper s;
	int tp[2], on = 1;
	fiber_t r;

	(void)state;
	tcp_pair(tp);
	r = stepper_first(&s, tp[0], -1, tp[1], "a", 1);
	/* Read 1 waits first (read 0 was short) and parks. */
	step(&s, 1, true);
	wait_parked(waits, 2);
	assert_int_equal(
		setsockopt(tp[1], IPPROTO_TCP, TCP_CORK, &on, sizeof(on)), 0);
	assert_int_equal(write(tp[1], "bc", 2), 2);
	assert_int_equal(shutdown(tp[1], SHUT_WR), 0);
	step_done(&s, 1);
	assert_int_equal(s.n[1], 2);
	assert_memory_equal(s.buf[1], "bc", 2);
	/* At once: no wait (one that timed out would still read the 0). */
	step(&s, 2, false);
	assert_int_equal(s.n[2], 0);
	assert_int_equal(io_waits() - waits, 2);
	join(r);
	assert_int_equal(fiber_close(tp[0]), 0);
	close(tp[1]);
}

/* One fiber serving connections one after the other, closing each with a
 * plain close(2): the accepted number is reused, and a drained mark left
 * by the last short read of the old connection must not make the first
 * read of the new one wait for an edge that came before it registered. */
struct serial {
	int l;
	atomic_int phase; /* 1: first connection closed; 2: second sent */
	int fd1, fd2;
	long n1, n2;
	long long waits; /* io_waits added by the second connection's read */
};

static void *serve_serially(void *arg)
{
	struct serial *s = arg;
	char buf[64];
	long long w;

	s->fd1 = fiber_accept(s->l, NULL, NULL, SOCK_CLOEXEC);
	s->n1 = fiber_read(s->fd1, buf, sizeof(buf));
	close(s->fd1);
	atomic_store(&s->phase, 1);
	while (atomic_load(&s->phase) < 2)
		fiber_usleep(200);
	s->fd2 = fiber_accept(s->l, NULL, NULL, SOCK_CLOEXEC);
	fiber_fd_set_deadline(s->fd2, fiber_now() + 10000 * MS,
			      FIBER_NO_DEADLINE);
	w = io_waits();
	s->n2 = fiber_read(s->fd2, buf, sizeof(buf));
	s->waits = io_waits() - w;
	fiber_close(s->fd2);
	return NULL;
}

/* The listener of @s (address in *@a) and two client sockets, the first
 * connected; the second is made now, so it cannot take the number the
 * server's first connection frees. */
static void serial_setup(struct serial *s, struct sockaddr_in *a, int *c1,
			 int *c2)
{
	memset(s, 0, sizeof(*s));
	s->l = listen_loopback(a, 4);
	*c1 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	*c2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(*c1, (struct sockaddr *)a, sizeof(*a)), 0);
}

static void test_io_drained_mark_does_not_outlive_plain_close(void **state)
{
	struct sockaddr_in a;
	static struct serial s;
	long long waits = io_waits();
	int c1, c2;
	fiber_t f;

	(void)state;
	serial_setup(&s, &a, &c1, &c2);
	f = spawn(serve_serially, &s);
	/* The first read parks (registering the fd), gets 1 byte: short. */
	wait_parked(waits, 1);
	assert_int_equal(write(c1, "a", 1), 1);
	while (atomic_load(&s.phase) < 1)
		usleep(200);
	/* The second connection's bytes are there before it is accepted on
	 * the same number (c2 was made before the close, so it cannot take
	 * that number itself). */
	assert_int_equal(connect(c2, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(write(c2, "bc", 2), 2);
	let_poller_run();
	atomic_store(&s.phase, 2);
	join(f);
	assert_int_equal(s.n1, 1);
	assert_int_equal(s.fd2, s.fd1);
	assert_int_equal(s.n2, 2);
	assert_int_equal(s.waits, 0);
	close(c1);
	close(c2);
	close(s.l);
}

/*
 * The same server, but the second connection's bytes come after its
 * read parked.  The fiber registered the number for the first
 * connection, and a plain close(2) tells epoll, not us, that the file is
 * gone: the accept must make the read check the registration, or the
 * new file is never registered and the read waits out its deadline
 * (ETIMEDOUT) with the bytes in the socket.
 */
static void *serve_serially_waiting(void *arg)
{
	struct serial *s = arg;
	char buf[64];

	s->fd1 = fiber_accept(s->l, NULL, NULL, SOCK_CLOEXEC);
	s->n1 = fiber_read(s->fd1, buf, sizeof(buf));
	close(s->fd1);
	s->fd2 = fiber_accept(s->l, NULL, NULL, SOCK_CLOEXEC);
	fiber_fd_set_deadline(s->fd2, fiber_now() + 10000 * MS,
			      FIBER_NO_DEADLINE);
	atomic_store(&s->phase, 1);
	s->n2 = fiber_read(s->fd2, buf, sizeof(buf));
	fiber_close(s->fd2);
	return NULL;
}

static void test_io_serial_server_plain_close_waits_on_new_file(void **state)
{
	struct sockaddr_in a;
	static struct serial s;
	long long waits = io_waits();
	int c1, c2;
	fiber_t f;

	(void)state;
	serial_setup(&s, &a, &c1, &c2);
	assert_int_equal(connect(c2, (struct sockaddr *)&a, sizeof(a)), 0);
	f = spawn(serve_serially_waiting, &s);
	wait_parked(waits, 1); /* the first read registered the number */
	assert_int_equal(write(c1, "a", 1), 1);
	while (atomic_load(&s.phase) < 1)
		usleep(200);
	wait_parked(waits, 2); /* the second read parked */
	assert_int_equal(write(c2, "bc", 2), 2);
	join(f);
	assert_int_equal(s.n1, 1);
	assert_int_equal(s.fd2, s.fd1);
	assert_int_equal(s.n2, 2);
	close(c1);
	close(c2);
	close(s.l);
}

/*
 * Reads that stop short with bytes queued behind them: an AF_UNIX stream
 * read stops at a message that carries SCM_RIGHTS, a TCP read at the
 * urgent mark.  Neither may mark the socket drained, or the second read
 * waits for an edge that already came, with the bytes in the socket
 * (here until its deadline, 2 s: a wait-first that times out still
 * reads once).  The second read must not end by its deadline (no timer
 * fired); it may wait for an edge still on its way on a loaded host.
 */
struct two_reads {
	int fd;
	ssize_t n[2];
	char buf[2][64];
	long long fired;  /* timers fired during the second read */
	atomic_bool sent; /* everything is in the socket */
};

static void *read_twice(void *arg)
{
	struct two_reads *t = arg;
	long long w;

	/* Parked until the first edge, which the wake takes (no ready bit
	 * is left); the reads come once everything is in the socket. */
	fiber_poll(t->fd, POLLIN, -1);
	while (!atomic_load(&t->sent))
		fiber_yield();
	t->n[0] = fiber_read(t->fd, t->buf[0], sizeof(t->buf[0]));
	fiber_fd_set_deadline(t->fd, fiber_now() + 2000 * MS,
			      FIBER_NO_DEADLINE);
	w = fiber_stats_counter("timers_fired");
	t->n[1] = fiber_read(t->fd, t->buf[1], sizeof(t->buf[1]));
	t->fired = fiber_stats_counter("timers_fired") - w;
	if (t->n[1] < 0)
		t->n[1] = -fiber_errno();
	return NULL;
}

static void send_with_rights(int sock, const char *data, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec v = { (void *)data, strlen(data) };
	struct msghdr m = { .msg_iov = &v,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	assert_int_equal(sendmsg(sock, &m, 0), (ssize_t)strlen(data));
}

/* One round of the test below on pair @sp, made by @pair: @send puts
 * the bytes in, @first and @second are what the two reads must give. */
static void short_read_round(int sp[2], void (*send_all)(int),
			     const char *first, const char *second)
{
	static struct two_reads t;
	long long waits;
	fiber_t r;

	memset(&t, 0, sizeof(t));
	t.fd = sp[0];
	waits = io_waits();
	r = spawn(read_twice, &t);
	wait_parked(waits, 1);
	send_all(sp[1]);
	let_poller_run();
	atomic_store(&t.sent, true);
	join(r);
	assert_int_equal(t.n[0], (ssize_t)strlen(first));
	assert_memory_equal(t.buf[0], first, strlen(first));
	assert_int_equal(t.n[1], (ssize_t)strlen(second));
	assert_memory_equal(t.buf[1], second, strlen(second));
	assert_int_equal(t.fired, 0);
	assert_int_equal(fiber_close(sp[0]), 0);
	close(sp[1]);
}

static void send_rights_then_bytes(int peer)
{
	send_with_rights(peer, "A", 1);
	assert_int_equal(write(peer, "BBBB", 4), 4);
}

static void send_urgent_between(int peer)
{
	assert_int_equal(send(peer, "AAAA", 4, 0), 4);
	assert_int_equal(send(peer, "B", 1, MSG_OOB), 1);
	assert_int_equal(send(peer, "CCCC", 4, 0), 4);
}

/* Each case a few times: a fault shows only when everything came
 * before the poller took the first edge. */
static void test_io_short_read_with_bytes_behind_is_not_drained(void **state)
{
	int sp[2];

	(void)state;
	for (int i = 0; i < 8; i++) {
		assert_int_equal(socketpair(AF_UNIX,
					    SOCK_STREAM | SOCK_NONBLOCK, 0, sp),
				 0);
		short_read_round(sp, send_rights_then_bytes, "A", "BBBB");
		tcp_pair(sp);
		short_read_round(sp, send_urgent_between, "AAAA", "CCCC");
	}
}

/*
 * A short read of a datagram socket is one datagram, not an empty socket:
 * the next one, sent with it, is read at once (a drained mark would wait
 * for an edge that already came).
 */
static void test_io_short_datagram_read_is_not_drained(void **state)
{
	long long drained;
	static struct stepper s;
	int sp[2];
	fiber_t r;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sp),
			 0);
	drained = counter("io_drained_reads");
	r = stepper_first(&s, sp[0], -1, sp[1], "zero", 4);
	assert_int_equal(send(sp[1], "one", 3, 0), 3);
	assert_int_equal(send(sp[1], "two", 3, 0), 3);
	let_poller_run();
	step(&s, 1, false);
	assert_int_equal(s.n[1], 3);
	assert_memory_equal(s.buf[1], "one", 3);
	step(&s, 2, false);
	assert_int_equal(s.n[2], 3);
	assert_memory_equal(s.buf[2], "two", 3);
	assert_int_equal(counter("io_drained_reads"), drained);
	atomic_store(&s.go, -1);
	join(r);
	assert_int_equal(fiber_close(sp[0]), 0);
	close(sp[1]);
}

/*
 * A registered fd in a fork child: the child's runtime has its own epoll
 * set, where the fd registers again at its first wait.  The child reads
 * what the parent writes once it is parked.  Exit status 0: it read it.
 */
static void test_io_fd_registered_before_fork_works_in_child(void **state)
{
	long long waits = io_waits();
	int sp[2], go[2], status;
	char c = 0;
	pid_t pid;
	fiber_t r;

	(void)state;
	if (!CHILD_MAY_START_THREADS)
		return; /* the child's runtime needs threads */
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	assert_int_equal(pipe(go), 0);
	r = spawn(read_once, (void *)(long)sp[0]);
	wait_parked(waits, 1); /* registered in the parent's set */
	assert_int_equal(write(sp[1], "p", 1), 1);
	assert_int_equal(join(r), 1);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct fiber_config cfg = { 0 };
		void *res = NULL;
		fiber_t f;

		fiber_shutdown();
		cfg.workers = 1;
		if (fiber_init(&cfg) ||
		    fiber_create(&f, NULL, read_once, (void *)(long)sp[0]))
			_exit(2);
		while (fiber_stats_counter("io_waits") < 1)
			usleep(500);
		if (write(go[1], "g", 1) != 1 || fiber_join(f, &res))
			_exit(3);
		_exit((long)res == 1 ? 0 : 4);
	}
	close(go[1]); /* a child that dies says so: end of file */
	if (read(go[0], &c, 1) == 1)
		assert_int_equal(write(sp[1], "c", 1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(go[0]);
	assert_int_equal(fiber_close(sp[0]), 0);
	close(sp[1]);
}

/* ---- per-fd deadlines ---------------------------------------------------- */

/* One fiber_write of 64 KiB to a full @arg: the count or -fiber_errno(). */
static void *write_big_once(void *arg)
{
	return write_once(arg);
}

static void *accept_once(void *arg)
{
	int fd = fiber_accept((int)(long)arg, NULL, NULL, 0);

	if (fd >= 0)
		close(fd);
	return (void *)(long)(fd < 0 ? -fiber_errno() : fd);
}

/* A deadline already past: a call that would wait fails at once, from a
 * fiber and from a thread; one that can complete does. */
static void test_io_deadline_in_the_past_fails_at_once(void **state)
{
	long long waits = io_waits();
	struct sockaddr_in a = { .sin_family = AF_INET };
	int sp[2], l;
	char c;

	(void)state;
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	assert_int_equal(fiber_fd_set_deadline(sp[0], 0, FIBER_NO_DEADLINE), 0);
	assert_int_equal(join(spawn(read_once, (void *)(long)sp[0])),
			 -ETIMEDOUT);
	assert_int_equal(fiber_read(sp[0], &c, 1), -1);
	assert_int_equal(errno, ETIMEDOUT);
	assert_int_equal(io_waits(), waits); /* nobody parked */
	/* What is there is read in spite of the deadline. */
	assert_int_equal(write(sp[1], "x", 1), 1);
	assert_int_equal(join(spawn(read_once, (void *)(long)sp[0])), 1);
	/* The write deadline: the read one does not bound writes. */
	assert_int_equal(fiber_write(sp[0], "y", 1), 1);
	assert_int_equal(fiber_fd_set_deadline(sp[0], FIBER_NO_DEADLINE, 0), 0);
	fill(sp[0]);
	assert_int_equal(join(spawn(write_big_once, (void *)(long)sp[0])),
			 -ETIMEDOUT);
	/* fiber_close() forgets the deadlines of the number. */
	assert_int_equal(fiber_close(sp[0]), 0);
	assert_int_equal(fiber_fd_set_deadline(sp[0], 0, 0), -1);
	assert_int_equal(errno, EBADF);
	close(sp[1]);
	/* accept is a read. */
	l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 4), 0);
	assert_int_equal(fiber_fd_set_deadline(l, fiber_now(), 0), 0);
	assert_int_equal(join(spawn(accept_once, (void *)(long)l)), -ETIMEDOUT);
	assert_int_equal(fiber_close(l), 0);
	/* Misuse. */
	assert_int_equal(fiber_fd_set_deadline(-1, 0, 0), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(fiber_fd_set_deadline(1 << 30, 0, 0), -1);
	assert_true(errno == ENOMEM || errno == EBADF);
}

/* A deadline moved while fibers wait wakes them: into the past, they fail
 * with ETIMEDOUT; later, they wait on and get the data; cleared, too. */
static void test_io_deadline_moved_while_waiting(void **state)
{
	long long waits = io_waits();
	int sp[2];
	fiber_t r, w;

	(void)state;
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	/* Into the past: the parked reader and writer time out. */
	fill(sp[0]);
	r = spawn(read_once, (void *)(long)sp[0]);
	w = spawn(write_big_once, (void *)(long)sp[0]);
	wait_parked(waits, 2);
	assert_int_equal(fiber_fd_set_deadline(sp[0], 0, 0), 0);
	assert_int_equal(join(r), -ETIMEDOUT);
	assert_int_equal(join(w), -ETIMEDOUT);
	/* Later: the reader wakes, parks again, and gets the byte. */
	assert_int_equal(fiber_fd_set_deadline(sp[0], FIBER_NO_DEADLINE,
					       FIBER_NO_DEADLINE),
			 0); /* cleared first, or it would fail at once */
	waits = io_waits();
	r = spawn(read_once, (void *)(long)sp[0]);
	wait_parked(waits, 1);
	assert_int_equal(fiber_fd_set_deadline(sp[0],
					       fiber_now() + 3600 * 1000 * MS,
					       FIBER_NO_DEADLINE),
			 0);
	wait_parked(waits, 2); /* it woke and waits again */
	assert_int_equal(write(sp[1], "x", 1), 1);
	assert_int_equal(join(r), 1);
	/* Cleared after a past one: waits without limit again. */
	assert_int_equal(fiber_fd_set_deadline(sp[0], 0, FIBER_NO_DEADLINE), 0);
	waits = io_waits();
	assert_int_equal(fiber_fd_set_deadline(sp[0], FIBER_NO_DEADLINE,
					       FIBER_NO_DEADLINE),
			 0);
	r = spawn(read_once, (void *)(long)sp[0]);
	wait_parked(waits, 1);
	assert_int_equal(write(sp[1], "z", 1), 1);
	assert_int_equal(join(r), 1);
	assert_int_equal(fiber_close(sp[0]), 0);
	close(sp[1]);
}

/*
 * A deadline moved into the past while a reader is on its way to park
 * (it read the old deadline, none, and has not queued yet): the reader
 * must see the new one and fail with ETIMEDOUT, not park under the old
 * one with nobody left to wake it.  20,000 rounds at random offsets; a
 * lost wake hangs the test (no timing is asserted).
 */
struct dl_race {
	int fd;
	atomic_int go, started, done, bad;
};

static void *dl_reader(void *arg)
{
	struct dl_race *r = arg;
	char c;

	for (int i = 1; i <= 20000; i++) {
		while (atomic_load(&r->go) != i)
			fiber_yield();
		atomic_store(&r->started, i);
		if (fiber_read(r->fd, &c, 1) != -1 ||
		    fiber_errno() != ETIMEDOUT)
			atomic_fetch_add(&r->bad, 1);
		atomic_store(&r->done, i);
	}
	return NULL;
}

static void test_io_deadline_moved_as_a_reader_parks(void **state)
{
	static struct dl_race r;
	unsigned int seed = 7;
	int sp[2];
	fiber_t f;

	(void)state;
	memset(&r, 0, sizeof(r));
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	r.fd = sp[0];
	f = spawn(dl_reader, &r);
	for (int i = 1; i <= 20000; i++) {
		assert_int_equal(fiber_fd_set_deadline(r.fd, FIBER_NO_DEADLINE,
						       FIBER_NO_DEADLINE),
				 0);
		atomic_store(&r.go, i);
		while (atomic_load(&r.started) != i)
			;
		for (volatile unsigned int k = rand_r(&seed) % 3000; k; k--)
			;
		assert_int_equal(
			fiber_fd_set_deadline(r.fd, 1, FIBER_NO_DEADLINE), 0);
		while (atomic_load(&r.done) != i)
			sched_yield();
	}
	join(f);
	assert_int_equal(atomic_load(&r.bad), 0);
	assert_int_equal(fiber_close(sp[0]), 0);
	close(sp[1]);
}

/*
 * connect(2) saying EAGAIN (a full AF_UNIX backlog) starts no
 * connection: the socket polls writable at once with SO_ERROR 0, and
 * fiber_connect must not take that for a connection.
 */
static void *connect_full(void *arg)
{
	struct sockaddr_un *a = arg;
	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	long r;

	r = fiber_connect(c, (struct sockaddr *)a, sizeof(*a), 5000) ?
		    -fiber_errno() :
		    0;
	close(c);
	return (void *)r;
}

static void test_io_connect_to_a_full_backlog_is_eagain(void **state)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int l = socket(AF_UNIX, SOCK_STREAM, 0), c[64], n = 0;

	(void)state;
	/* An abstract name: nothing to unlink. */
	snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "test-io-%d",
		 (int)getpid());
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 0), 0);
	for (; n < 64; n++) { /* fill the backlog */
		c[n] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (connect(c[n], (struct sockaddr *)&a, sizeof(a))) {
			assert_int_equal(errno, EAGAIN);
			close(c[n]);
			break;
		}
	}
	assert_true(n < 64);
	assert_int_equal(join(spawn(connect_full, &a)), -EAGAIN);
	while (n--)
		close(c[n]);
	close(l);
}

/*
 * A socket timeout larger than 64-bit nanoseconds hold (Linux takes up
 * to LONG_MAX / HZ seconds) is no timeout: the read waits for its byte
 * rather than failing at once with ETIMEDOUT.
 */
static void test_io_huge_socket_timeout_waits(void **state)
{
	struct timeval tv = { .tv_sec = 18446744073 };
	long long waits = io_waits();
	int sp[2], base = atomic_load(&nr_returned);
	fiber_t r;

	(void)state;
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	assert_int_equal(
		setsockopt(sp[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	r = spawn(read_once, (void *)(long)sp[0]);
	while (io_waits() < waits + 1 && atomic_load(&nr_returned) == base)
		usleep(500);
	assert_int_equal(write(sp[1], "x", 1), 1);
	assert_int_equal(join(r), 1);
	assert_int_equal(fiber_close(sp[0]), 0);
	close(sp[1]);
}

/* writev(2)'s EINVAL for a bad count, from a thread too (whose socket
 * writes are sendmsg(2), which would say EMSGSIZE). */
static void test_io_writev_bad_count_is_einval(void **state)
{
	struct iovec v = { "x", 1 };
	int sp[2];

	(void)state;
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	errno = 0;
	assert_int_equal(fiber_writev(sp[0], &v, IOV_MAX + 1), -1);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(fiber_writev(sp[0], &v, -1), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(fiber_writev(sp[0], &v, 1), 1);
	assert_int_equal(fiber_close(sp[0]), 0);
	close(sp[1]);
}

/* ---- datagrams and messages ---------------------------------------------- */

struct dgram {
	int fd;
	char buf[64];
	struct sockaddr_in from;
	socklen_t fromlen;
	ssize_t n;
	int err;
};

static void *recvfrom_once(void *arg)
{
	struct dgram *d = arg;

	d->fromlen = sizeof(d->from);
	d->n = fiber_recvfrom(d->fd, d->buf, sizeof(d->buf), 0,
			      (struct sockaddr *)&d->from, &d->fromlen);
	d->err = d->n < 0 ? fiber_errno() : 0;
	return NULL;
}

static int udp_socket(struct sockaddr_in *a)
{
	socklen_t len = sizeof(*a);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);

	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)a, sizeof(*a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)a, &len), 0);
	return fd;
}

/* UDP: a fiber parked in fiber_recvfrom gets the datagram fiber_sendto
 * sent, with the sender's address; MSG_DONTWAIT says EAGAIN; a
 * cancellation ends the wait with ECANCELED. */
static void test_io_udp_recvfrom_sendto(void **state)
{
	struct sockaddr_in ra, sa;
	struct dgram d = { 0 };
	long long waits = io_waits();
	int r = udp_socket(&ra), s = udp_socket(&sa);
	char c;
	fiber_t f;

	(void)state;
	d.fd = r;
	f = spawn(recvfrom_once, &d);
	wait_parked(waits, 1);
	assert_int_equal(fiber_sendto(s, "datagram", 8, 0,
				      (struct sockaddr *)&ra, sizeof(ra)),
			 8);
	join(f);
	assert_int_equal(d.n, 8);
	assert_memory_equal(d.buf, "datagram", 8);
	assert_int_equal(d.from.sin_port, sa.sin_port);
	assert_int_equal(fiber_recvfrom(r, &c, 1, MSG_DONTWAIT, NULL, NULL),
			 -1);
	assert_int_equal(errno, EAGAIN);
	/* A thread's recvfrom waits in poll(2) and gets it too. */
	assert_int_equal(
		sendto(s, "t", 1, 0, (struct sockaddr *)&ra, sizeof(ra)), 1);
	assert_int_equal(fiber_recvfrom(r, &c, 1, 0, NULL, NULL), 1);
	assert_int_equal(c, 't');
	/* Cancelled while parked. */
	waits = io_waits();
	f = spawn(recvfrom_once, &d);
	wait_parked(waits, 1);
	assert_int_equal(fiber_cancel(f), 0);
	join(f);
	assert_int_equal(d.n, -1);
	assert_int_equal(d.err, ECANCELED);
	assert_int_equal(fiber_close(r), 0);
	assert_int_equal(fiber_close(s), 0);
}

struct rights {
	int fd;
	int got_fd;
	ssize_t n;
	char data[8];
};

static void *recv_rights(void *arg)
{
	struct rights *r = arg;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { r->data, sizeof(r->data) };
	struct msghdr m = { .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm;

	r->got_fd = -1;
	r->n = fiber_recvmsg(r->fd, &m, MSG_CMSG_CLOEXEC);
	if (r->n < 0) {
		r->n = -fiber_errno();
		return NULL;
	}
	cm = CMSG_FIRSTHDR(&m);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&r->got_fd, CMSG_DATA(cm), sizeof(int));
	return NULL;
}

static ssize_t send_rights(int sock, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { "fd", 2 };
	struct msghdr m = { .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

	memset(u.buf, 0, sizeof(u.buf));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return fiber_sendmsg(sock, &m, 0);
}

/* SCM_RIGHTS over AF_UNIX socket pairs (datagram and stream): a fiber
 * parked in fiber_recvmsg receives the pipe end fiber_sendmsg passed, and
 * it is the same pipe. */
static void test_io_unix_sendmsg_recvmsg_pass_an_fd(void **state)
{
	static const int types[] = { SOCK_DGRAM, SOCK_STREAM };
	struct rights r;
	int sp[2], p[2];
	long long waits;
	char c;
	fiber_t f;

	(void)state;
	for (unsigned int i = 0; i < 2; i++) {
		assert_int_equal(socketpair(AF_UNIX, types[i] | SOCK_NONBLOCK,
					    0, sp),
				 0);
		assert_int_equal(pipe(p), 0);
		memset(&r, 0, sizeof(r));
		r.fd = sp[0];
		waits = io_waits();
		f = spawn(recv_rights, &r);
		wait_parked(waits, 1);
		assert_int_equal(send_rights(sp[1], p[1]), 2);
		join(f);
		assert_int_equal(r.n, 2);
		assert_memory_equal(r.data, "fd", 2);
		assert_true(r.got_fd >= 0 && r.got_fd != p[1]);
		assert_int_equal(write(r.got_fd, "!", 1), 1);
		assert_int_equal(read(p[0], &c, 1), 1);
		assert_int_equal(c, '!');
		close(r.got_fd);
		close(p[0]);
		close(p[1]);
		assert_int_equal(fiber_close(sp[0]), 0);
		assert_int_equal(fiber_close(sp[1]), 0);
	}
	/* Misuse: a closed fd, a negative one. */
	assert_int_equal(fiber_recvmsg(sp[0], &(struct msghdr){ 0 }, 0), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(fiber_sendto(-1, "x", 1, 0, NULL, 0), -1);
	assert_int_equal(errno, EBADF);
}

/* ---- idle CPU ----------------------------------------------------------- */

static uint64_t cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) *
		       1000000000u +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

static void test_io_idle_runtime_burns_no_cpu(void **state)
{
	uint64_t before, used;

	(void)state;
	/* The poller exists (earlier tests did I/O); let poll windows end. */
	usleep(50000);
	before = cpu_ns();
	usleep(300000);
	used = cpu_ns() - before;
	print_message("# idle: %llu us of CPU over 300 ms, 2 workers\n",
		      (unsigned long long)(used / 1000));
	assert_true(used < 30 * MS);
	assert_true(fiber_stats_counter("epoll_sleeps") > 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_io_echo_many_concurrent_clients),
		cmocka_unit_test(test_io_read_on_silent_socket_times_out),
		cmocka_unit_test(
			test_io_errno_survives_a_wake_on_another_worker),
		cmocka_unit_test(
			test_io_foreign_thread_reads_what_a_fiber_writes),
		cmocka_unit_test(
			test_io_peer_close_mid_request_server_keeps_serving),
		cmocka_unit_test(test_io_reset_reaches_the_reading_fiber),
		cmocka_unit_test(test_io_connect_refused),
		cmocka_unit_test(
			test_io_stale_waiter_never_gets_the_reused_numbers_data),
		cmocka_unit_test(
			test_io_close_wakes_readers_and_writer_with_ebadf),
		cmocka_unit_test(test_io_close_under_a_write_returns),
		cmocka_unit_test(test_io_number_reused_after_close_works),
		cmocka_unit_test(
			test_io_plain_close_under_a_reader_never_misdelivers),
		cmocka_unit_test(
			test_io_write_to_gone_peer_from_fiber_is_epipe),
		cmocka_unit_test(
			test_io_write_to_gone_peer_from_thread_is_epipe),
		cmocka_unit_test(
			test_io_thread_write_to_gone_pipe_raises_sigpipe),
		cmocka_unit_test(test_io_accept_emfile_backs_off),
		cmocka_unit_test(test_io_writev_finishes_partial_writes),
		cmocka_unit_test(test_io_read_waits_register_the_fd_once),
		cmocka_unit_test(test_io_two_readers_of_one_fd_both_wake),
		cmocka_unit_test(test_io_drained_stream_reads_lose_nothing),
		cmocka_unit_test(
			test_io_drained_read_sees_an_end_that_came_with_bytes),
		cmocka_unit_test(test_io_short_datagram_read_is_not_drained),
		cmocka_unit_test(
			test_io_short_read_with_bytes_behind_is_not_drained),
		cmocka_unit_test(
			test_io_drained_mark_does_not_outlive_plain_close),
		cmocka_unit_test(
			test_io_serial_server_plain_close_waits_on_new_file),
		cmocka_unit_test(
			test_io_fd_registered_before_fork_works_in_child),
		cmocka_unit_test(test_io_deadline_in_the_past_fails_at_once),
		cmocka_unit_test(test_io_deadline_moved_while_waiting),
		cmocka_unit_test(test_io_deadline_moved_as_a_reader_parks),
		cmocka_unit_test(test_io_connect_to_a_full_backlog_is_eagain),
		cmocka_unit_test(test_io_huge_socket_timeout_waits),
		cmocka_unit_test(test_io_writev_bad_count_is_einval),
		cmocka_unit_test(test_io_udp_recvfrom_sendto),
		cmocka_unit_test(test_io_unix_sendmsg_recvmsg_pass_an_fd),
		cmocka_unit_test(test_io_idle_runtime_burns_no_cpu),
	};

	if (argc == 3 && !strcmp(argv[1], "--sigpipe-child"))
		return sigpipe_child(argv[2]);
	return cmocka_run_group_tests(tests, setup, teardown);
}
