/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-cancel.c - fiber_cancel() through the public API: every cancellation
 * point returns ECANCELED to a fiber parked in it, and the object it
 * waited on is intact (the unit, element or bytes that come next go to the
 * next caller); a cancellation made before the call is reported by the
 * next call, once; a mutex wait is not ended, the cancellation waits for
 * the next cancellation point; a finished fiber cannot be cancelled
 * (ESRCH); a cancellation racing with a wake ends in exactly one of the
 * two outcomes, 10,000 times, with nothing lost; and one racing with the
 * start of a wait is never lost.
 *
 * A test cancels a fiber once the fiber said it is about to call; whether
 * the cancellation then ends the wait or is found at the call's entry,
 * the outcome asserted is the same.  Fibers never call cmocka assertions;
 * they return results and the test thread checks.
 */
#include <fiber.h>

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#define MS 1000000ull

static int setup(void **state)
{
	struct fiber_config c = { 0 };

	(void)state;
	c.workers = 2;
	return fiber_init(&c);
}

static int teardown(void **state)
{
	(void)state;
	return fiber_shutdown();
}

static fiber_t spawn_on(int worker, void *(*fn)(void *), void *arg)
{
	fiber_attr_t attr;
	fiber_workerset_t set;
	fiber_t f;

	assert_int_equal(fiber_attr_init(&attr), 0);
	if (worker >= 0) {
		fiber_workerset_zero(&set);
		fiber_workerset_add(&set, (unsigned int)worker);
		assert_int_equal(
			fiber_attr_setaffinity(&attr, sizeof(set), &set), 0);
	}
	assert_int_equal(fiber_create(&f, &attr, fn, arg), 0);
	fiber_attr_destroy(&attr);
	return f;
}

static long join(fiber_t f)
{
	void *r = NULL;

	assert_int_equal(fiber_join(f, &r), 0);
	return (long)r;
}

/*
 * A blocking call run by a fiber: the fiber raises @started, makes the
 * call and returns its result.  cancel_call() starts it, gives it time to
 * park, cancels it and returns what the call returned.
 */
struct call {
	long (*fn)(struct call *c);
	void *obj;	     /* what it waits on */
	atomic_int started;  /* the fiber is about to call */
	atomic_int finished; /* the call returned */
	size_t done;	     /* for the pipe calls */
	int value;	     /* for the chan calls */
};

static void *call_fiber(void *arg)
{
	struct call *c = arg;
	long r;

	atomic_store(&c->started, 1);
	r = c->fn(c);
	atomic_store(&c->finished, 1);
	return (void *)r;
}

static long cancel_call(struct call *c)
{
	fiber_t f = spawn_on(0, call_fiber, c);

	while (!atomic_load(&c->started))
		sched_yield();
	fiber_sleep(2 * MS); /* mostly parked by now; either way it counts */
	assert_int_equal(atomic_load(&c->finished), 0);
	assert_int_equal(fiber_cancel(f), 0);
	return join(f);
}

/* ---- one test per cancellation point ------------------------------------ */

static long do_sleep_until(struct call *c)
{
	(void)c;
	return fiber_sleep_until(FIBER_NO_DEADLINE);
}

static void test_cancel_sleep_until(void **state)
{
	struct call c = { .fn = do_sleep_until };

	(void)state;
	assert_int_equal(cancel_call(&c), ECANCELED);
}

static long do_sem_wait(struct call *c)
{
	return fiber_sem_wait(c->obj);
}

static long do_sem_wait_until(struct call *c)
{
	return fiber_sem_wait_until(c->obj, fiber_now() + 60000 * MS);
}

static void test_cancel_sem_wait_keeps_the_next_post(void **state)
{
	struct call c = { .fn = do_sem_wait };
	struct call t = { .fn = do_sem_wait_until };
	fiber_sem_t s;
	int v = -1;

	(void)state;
	assert_int_equal(fiber_sem_init(&s, 0), 0);
	c.obj = t.obj = &s;
	assert_int_equal(cancel_call(&c), ECANCELED);
	assert_int_equal(cancel_call(&t), ECANCELED); /* a timed wait */
	/* The post after the cancelled waits is not lost to them. */
	assert_int_equal(fiber_sem_post(&s), 0);
	assert_int_equal(fiber_sem_getvalue(&s, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(fiber_sem_wait(&s), 0);
	assert_int_equal(fiber_sem_destroy(&s), 0);
}

static long do_wg_wait(struct call *c)
{
	return fiber_wg_wait(c->obj);
}

static long do_wg_wait_until(struct call *c)
{
	return fiber_wg_wait_until(c->obj, fiber_now() + 60000 * MS);
}

static void test_cancel_wg_wait_leaves_the_count(void **state)
{
	struct call c = { .fn = do_wg_wait };
	struct call t = { .fn = do_wg_wait_until };
	fiber_wg_t wg;

	(void)state;
	assert_int_equal(fiber_wg_init(&wg), 0);
	assert_int_equal(fiber_wg_add(&wg, 1), 0);
	c.obj = t.obj = &wg;
	assert_int_equal(cancel_call(&c), ECANCELED);
	assert_int_equal(cancel_call(&t), ECANCELED); /* a timed wait */
	assert_int_equal(fiber_wg_destroy(&wg), 0);   /* they left it */
	assert_int_equal(fiber_wg_done(&wg), 0);      /* the count was 1 */
	assert_int_equal(fiber_wg_done(&wg), EINVAL);
}

static fiber_mutex_t cond_mutex = FIBER_MUTEX_INITIALIZER;

static long do_cond_wait(struct call *c)
{
	long r;

	fiber_mutex_lock(&cond_mutex);
	r = fiber_cond_wait(c->obj, &cond_mutex);
	/* ECANCELED with the mutex held again: unlock succeeds. */
	if (fiber_mutex_unlock(&cond_mutex))
		return -1;
	return r;
}

static void test_cancel_cond_wait_retakes_the_mutex(void **state)
{
	fiber_cond_t cv = FIBER_COND_INITIALIZER;
	struct call c = { .fn = do_cond_wait, .obj = &cv };

	(void)state;
	assert_int_equal(cancel_call(&c), ECANCELED);
	assert_int_equal(fiber_cond_destroy(&cv), 0); /* nobody left on it */
}

static long do_barrier_wait(struct call *c)
{
	return fiber_barrier_wait(c->obj);
}

static void *barrier_fiber(void *arg)
{
	return (void *)(long)fiber_barrier_wait(arg);
}

static void test_cancel_barrier_wait_takes_its_arrival_back(void **state)
{
	fiber_barrier_t b;
	struct call c = { .fn = do_barrier_wait, .obj = &b };
	fiber_t f, g;
	long r1, r2;

	(void)state;
	assert_int_equal(fiber_barrier_init(&b, 2), 0);
	assert_int_equal(cancel_call(&c), ECANCELED);
	/* Had the arrival stayed, the first of f and g would pass alone and
	 * the other wait for ever (the test's timeout fails it): no sleep
	 * decides who is parked when. */
	f = spawn_on(1, barrier_fiber, &b);
	g = spawn_on(1, barrier_fiber, &b);
	r1 = join(f);
	r2 = join(g);
	assert_true((r1 == FIBER_BARRIER_SERIAL_FIBER && r2 == 0) ||
		    (r2 == FIBER_BARRIER_SERIAL_FIBER && r1 == 0));
	assert_int_equal(fiber_barrier_destroy(&b), 0);
}

static long do_chan_recv(struct call *c)
{
	return fiber_chan_recv(c->obj, &c->value);
}

static void *recv_fiber(void *arg)
{
	int v = -1;

	if (fiber_chan_recv(arg, &v))
		return (void *)-1L;
	return (void *)(long)v;
}

static void test_cancel_chan_recv_leaves_the_element_to_the_next(void **state)
{
	fiber_chan_t *ch;
	int v;

	(void)state;
	for (size_t cap = 0; cap < 2; cap++) {
		struct call c = { .fn = do_chan_recv, .value = -1 };
		fiber_t r;

		assert_int_equal(fiber_chan_create(&ch, sizeof(int), cap), 0);
		c.obj = ch;
		assert_int_equal(cancel_call(&c), ECANCELED);
		assert_int_equal(c.value, -1); /* nothing received */
		/* The next element goes to the next receiver. */
		r = spawn_on(1, recv_fiber, ch);
		v = 7;
		assert_int_equal(fiber_chan_send(ch, &v), 0);
		assert_int_equal(join(r), 7);
		assert_int_equal(fiber_chan_destroy(ch), 0);
	}
}

static long do_chan_send(struct call *c)
{
	c->value = 9;
	return fiber_chan_send(c->obj, &c->value);
}

static void test_cancel_chan_send_delivers_nothing(void **state)
{
	struct call c = { .fn = do_chan_send };
	fiber_chan_t *ch;
	int v;

	(void)state;
	assert_int_equal(fiber_chan_create(&ch, sizeof(int), 0), 0);
	c.obj = ch;
	assert_int_equal(cancel_call(&c), ECANCELED);
	assert_int_equal(fiber_chan_tryrecv(ch, &v), EAGAIN);
	assert_int_equal(fiber_chan_destroy(ch), 0);
}

static long do_pipe_read(struct call *c)
{
	char buf[8];

	return fiber_pipe_read(c->obj, buf, sizeof(buf), &c->done);
}

static long do_pipe_write(struct call *c)
{
	return fiber_pipe_write(c->obj, "abcdefgh", 8, &c->done);
}

static void test_cancel_pipe_read_and_write_lose_no_byte(void **state)
{
	struct call r = { .fn = do_pipe_read, .done = 99 };
	struct call w = { .fn = do_pipe_write };
	fiber_pipe_t *p;
	char buf[8];
	size_t n;

	(void)state;
	assert_int_equal(fiber_pipe_create(&p, 4), 0);
	r.obj = w.obj = p;
	assert_int_equal(cancel_call(&r), ECANCELED);
	assert_int_equal(r.done, 0);
	assert_int_equal(fiber_pipe_write(p, "xy", 2, &n), 0);
	assert_int_equal(fiber_pipe_read(p, buf, sizeof(buf), &n), 0);
	assert_int_equal(n, 2);
	assert_memory_equal(buf, "xy", 2);
	/* 8 bytes into 4: cancelled with the first 4 in, which it says. */
	assert_int_equal(cancel_call(&w), ECANCELED);
	assert_int_equal(w.done, 4);
	assert_int_equal(fiber_pipe_read(p, buf, sizeof(buf), &n), 0);
	assert_int_equal(n, 4);
	assert_memory_equal(buf, "abcd", 4);
	assert_int_equal(fiber_pipe_destroy(p), 0);
}

static void *wait_on_sem(void *arg)
{
	return (void *)(long)fiber_sem_wait(arg);
}

static long do_join(struct call *c)
{
	return fiber_join(*(fiber_t *)c->obj, NULL);
}

static void test_cancel_join_leaves_the_fiber_joinable(void **state)
{
	struct call c = { .fn = do_join };
	fiber_sem_t s;
	fiber_t t;

	(void)state;
	assert_int_equal(fiber_sem_init(&s, 0), 0);
	t = spawn_on(1, wait_on_sem, &s);
	c.obj = &t;
	assert_int_equal(cancel_call(&c), ECANCELED);
	assert_int_equal(fiber_sem_post(&s), 0);
	assert_int_equal(join(t), 0);
	assert_int_equal(fiber_sem_destroy(&s), 0);
}

static int sp[2];

static long do_fd_read(struct call *c)
{
	char b;
	ssize_t n = fiber_read(sp[0], &b, 1);

	(void)c;
	return n < 0 ? fiber_errno() : -1;
}

static long do_fd_poll(struct call *c)
{
	int n = fiber_poll(sp[0], POLLIN, -1);

	(void)c;
	return n < 0 ? fiber_errno() : -1;
}

static long do_fd_accept(struct call *c)
{
	int n = fiber_accept(*(int *)c->obj, NULL, NULL, 0);

	return n < 0 ? fiber_errno() : -1;
}

/* A write that cannot start: the socket's buffer is full. */
static long do_fd_write(struct call *c)
{
	ssize_t n = fiber_write(sp[0], "z", 1);

	(void)c;
	return n < 0 ? fiber_errno() : -1;
}

static void test_cancel_fd_calls_lose_no_byte(void **state)
{
	struct call r = { .fn = do_fd_read }, p = { .fn = do_fd_poll };
	struct call a = { .fn = do_fd_accept }, w = { .fn = do_fd_write };
	char buf[4096];
	ssize_t n = 0, k;
	int lfd;

	(void)state;
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
	assert_int_equal(cancel_call(&r), ECANCELED);
	assert_int_equal(cancel_call(&p), ECANCELED);
	/* The byte after the cancelled read goes to the next reader. */
	assert_int_equal(fiber_write(sp[1], "q", 1), 1);
	assert_int_equal(fiber_read(sp[0], buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], 'q');
	/* Fill sp[0]'s send buffer, then a write waits for room. */
	memset(buf, 'f', sizeof(buf));
	while (send(sp[0], buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
	assert_int_equal(cancel_call(&w), ECANCELED);
	while ((k = recv(sp[1], buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		n = k;
	assert_true(n > 0);
	assert_null(memchr(buf, 'z', (size_t)n)); /* the write got nothing in */
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(lfd >= 0);
	assert_int_equal(listen(lfd, 1), 0);
	a.obj = &lfd;
	assert_int_equal(cancel_call(&a), ECANCELED);
	assert_int_equal(fiber_close(lfd), 0);
	assert_int_equal(fiber_close(sp[0]), 0);
	assert_int_equal(fiber_close(sp[1]), 0);
}

/* ---- a cancellation before the call ------------------------------------- */

/*
 * Every cancellation point, called with a cancellation pending, returns
 * ECANCELED at once, also when it would not have had to wait; the call
 * after it works.  Returns 0 or the number of the check that failed.
 */
static void *before_each_call(void *arg)
{
	fiber_mutex_t m = FIBER_MUTEX_INITIALIZER;
	fiber_cond_t cv = FIBER_COND_INITIALIZER;
	fiber_barrier_t b;
	fiber_sem_t s;
	fiber_chan_t *ch;
	fiber_pipe_t *p;
	fiber_t self = fiber_self(), t;
	char buf[4];
	size_t n;
	int v = 5, fds[2];

	(void)arg;
	if (fiber_sem_init(&s, 1) || fiber_barrier_init(&b, 1) ||
	    fiber_chan_create(&ch, sizeof(int), 1) || fiber_pipe_create(&p, 8))
		return (void *)1L;
	if (fiber_cancel(self) || fiber_sem_wait(&s) != ECANCELED ||
	    fiber_sem_getvalue(&s, &v) || v != 1 || fiber_sem_wait(&s))
		return (void *)2L;
	/* Two cancellations before the call count as one. */
	if (fiber_cancel(self) || fiber_cancel(self) ||
	    fiber_sleep_until(0) != ECANCELED || fiber_sleep_until(0))
		return (void *)3L;
	v = 5;
	if (fiber_cancel(self) || fiber_chan_send(ch, &v) != ECANCELED ||
	    fiber_chan_send(ch, &v) || fiber_cancel(self) ||
	    fiber_chan_recv(ch, &v) != ECANCELED || fiber_chan_recv(ch, &v) ||
	    v != 5)
		return (void *)4L;
	if (fiber_cancel(self) ||
	    fiber_pipe_write(p, "ab", 2, &n) != ECANCELED || n != 0 ||
	    fiber_pipe_write(p, "ab", 2, &n) || fiber_cancel(self) ||
	    fiber_pipe_read(p, buf, 4, &n) != ECANCELED || n != 0 ||
	    fiber_pipe_read(p, buf, 4, &n) || n != 2)
		return (void *)5L;
	if (fiber_mutex_lock(&m) || fiber_cancel(self) ||
	    fiber_cond_wait(&cv, &m) != ECANCELED || fiber_mutex_unlock(&m))
		return (void *)6L;
	if (fiber_cancel(self) || fiber_barrier_wait(&b) != ECANCELED ||
	    fiber_barrier_wait(&b) != FIBER_BARRIER_SERIAL_FIBER)
		return (void *)7L;
	if (fiber_create(&t, NULL, wait_on_sem, &s) || fiber_cancel(self) ||
	    fiber_join(t, NULL) != ECANCELED || fiber_sem_post(&s) ||
	    fiber_join(t, NULL))
		return (void *)8L;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) ||
	    fiber_write(fds[1], "x", 1) != 1)
		return (void *)9L;
	/* The byte is there: without the cancellation nothing would wait. */
	if (fiber_cancel(self) || fiber_read(fds[0], buf, 1) != -1 ||
	    fiber_errno() != ECANCELED || fiber_cancel(self) ||
	    fiber_poll(fds[0], POLLIN, 0) != -1 || fiber_errno() != ECANCELED ||
	    fiber_cancel(self) || fiber_write(fds[1], "y", 1) != -1 ||
	    fiber_errno() != ECANCELED || fiber_cancel(self) ||
	    fiber_recv(fds[0], buf, 1, 0) != -1 || fiber_errno() != ECANCELED ||
	    fiber_read(fds[0], buf, 4) != 1 || buf[0] != 'x')
		return (void *)10L;
	if (fiber_close(fds[0]) || fiber_close(fds[1]))
		return (void *)11L;
	if (fiber_sem_destroy(&s) || fiber_barrier_destroy(&b) ||
	    fiber_chan_destroy(ch) || fiber_pipe_destroy(p) ||
	    fiber_cond_destroy(&cv))
		return (void *)12L;
	return NULL;
}

static void test_cancel_before_the_call_is_reported_once(void **state)
{
	(void)state;
	assert_int_equal(join(spawn_on(-1, before_each_call, NULL)), 0);
}

/* ---- calls that are not cancellation points ----------------------------- */

static fiber_mutex_t held = FIBER_MUTEX_INITIALIZER;
static atomic_int locked;

static void *lock_then_wait(void *arg)
{
	fiber_sem_t *s = arg;
	long r;

	atomic_store(&locked, 1);
	if (fiber_mutex_lock(&held)) /* cancelled meanwhile: no effect */
		return (void *)-1L;
	atomic_store(&locked, 2);
	fiber_mutex_unlock(&held);
	fiber_yield(); /* neither is fiber_yield */
	fiber_sleep(1000);
	r = fiber_sem_wait(s); /* the next cancellation point */
	if (r != ECANCELED)
		return (void *)-2L;
	return (void *)(long)fiber_sem_wait(s);
}

static void test_cancel_waits_for_the_next_cancellation_point(void **state)
{
	fiber_sem_t s;
	fiber_t f;
	int v = -1;

	(void)state;
	assert_int_equal(fiber_sem_init(&s, 1), 0);
	assert_int_equal(fiber_mutex_lock(&held), 0);
	f = spawn_on(0, lock_then_wait, &s);
	while (!atomic_load(&locked))
		sched_yield();
	fiber_sleep(2 * MS);
	assert_int_equal(fiber_cancel(f), 0);
	fiber_sleep(2 * MS);
	assert_int_equal(atomic_load(&locked), 1); /* still waits to lock */
	assert_int_equal(fiber_mutex_unlock(&held), 0);
	assert_int_equal(join(f), 0); /* ECANCELED once, then the unit */
	assert_int_equal(fiber_sem_getvalue(&s, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(fiber_sem_destroy(&s), 0);
}

/* ---- handles ------------------------------------------------------------ */

static void *quick(void *arg)
{
	return arg;
}

static void test_cancel_of_a_finished_fiber_is_esrch(void **state)
{
	fiber_t f = spawn_on(-1, quick, (void *)3L);
	int err;

	(void)state;
	assert_int_equal(fiber_cancel(NULL), ESRCH);
	/* 0 while it runs or is dying, ESRCH once it has exited. */
	while ((err = fiber_cancel(f)) == 0)
		fiber_sleep(100000);
	assert_int_equal(err, ESRCH);
	assert_int_equal(join(f), 3);		  /* still joinable */
	assert_int_equal(fiber_cancel(f), ESRCH); /* stale */
}

/* ---- a cancellation racing with a wake ---------------------------------- */

#define RACE_ROUNDS 10000

static fiber_sem_t race_sem, race_ack;
static atomic_int race_go;
static long race_taken, race_cancels;

/*
 * Each round the driver posts one unit and cancels the waiter, which is
 * waiting for it or about to.  The waiter's sem_wait takes the unit or
 * says ECANCELED, and once the driver is done, fiber_sleep_until(0)
 * reports the cancellation if the wait did not: exactly one of the two
 * does.
 */
static void *race_waiter(void *arg)
{
	(void)arg;
	for (int i = 0; i < RACE_ROUNDS; i++) {
		int r = fiber_sem_wait(&race_sem), z;

		while (!atomic_load(&race_go))
			fiber_yield();
		atomic_store(&race_go, 0);
		z = fiber_sleep_until(0);
		if (r == 0)
			race_taken++;
		else if (r != ECANCELED)
			return (void *)-1L;
		race_cancels += (r == ECANCELED) + (z == ECANCELED);
		fiber_sem_post(&race_ack);
	}
	return NULL;
}

static void test_cancel_races_with_a_post_10000_times(void **state)
{
	fiber_t f;
	int v = -1;

	(void)state;
	assert_int_equal(fiber_sem_init(&race_sem, 0), 0);
	assert_int_equal(fiber_sem_init(&race_ack, 0), 0);
	race_taken = race_cancels = 0;
	f = spawn_on(0, race_waiter, NULL);
	for (int i = 0; i < RACE_ROUNDS; i++) {
		assert_int_equal(fiber_sem_post(&race_sem), 0);
		assert_int_equal(fiber_cancel(f), 0);
		atomic_store(&race_go, 1);
		assert_int_equal(fiber_sem_wait(&race_ack), 0);
	}
	assert_int_equal(join(f), 0);
	assert_int_equal(race_cancels, RACE_ROUNDS);
	assert_int_equal(fiber_sem_getvalue(&race_sem, &v), 0);
	assert_int_equal(race_taken + v, RACE_ROUNDS); /* no unit lost */
	assert_int_equal(fiber_sem_destroy(&race_sem), 0);
	assert_int_equal(fiber_sem_destroy(&race_ack), 0);
}

/* The same with a channel's elements and a canceller on another worker. */
static fiber_chan_t *race_chan;
static long race_sum;

static void *race_receiver(void *arg)
{
	(void)arg;
	for (int i = 0; i < RACE_ROUNDS; i++) {
		int v = 0, r = fiber_chan_recv(race_chan, &v), z;

		while (!atomic_load(&race_go))
			fiber_yield();
		atomic_store(&race_go, 0);
		z = fiber_sleep_until(0);
		if (r == 0)
			race_sum += v;
		else if (r != ECANCELED)
			return (void *)-1L;
		race_cancels += (r == ECANCELED) + (z == ECANCELED);
		fiber_sem_post(&race_ack);
	}
	return NULL;
}

static void *race_driver(void *arg)
{
	fiber_t f = arg;

	for (int i = 1; i <= RACE_ROUNDS; i++) {
		if (fiber_chan_send(race_chan, &i) || fiber_cancel(f))
			return (void *)-1L;
		atomic_store(&race_go, 1);
		if (fiber_sem_wait(&race_ack))
			return (void *)-2L;
	}
	return NULL;
}

static void test_cancel_races_with_a_send_10000_times(void **state)
{
	long left = 0, sent = 0;
	fiber_t f, d;
	int v;

	(void)state;
	assert_int_equal(fiber_chan_create(&race_chan, sizeof(int), 8), 0);
	assert_int_equal(fiber_sem_init(&race_ack, 0), 0);
	race_sum = race_cancels = 0;
	f = spawn_on(0, race_receiver, NULL);
	d = spawn_on(1, race_driver, f);
	assert_int_equal(join(d), 0);
	assert_int_equal(join(f), 0);
	assert_int_equal(race_cancels, RACE_ROUNDS);
	while (fiber_chan_tryrecv(race_chan, &v) == 0)
		left += v;
	for (long i = 1; i <= RACE_ROUNDS; i++)
		sent += i;
	assert_int_equal(race_sum + left, sent); /* every element once */
	assert_int_equal(fiber_chan_destroy(race_chan), 0);
	assert_int_equal(fiber_sem_destroy(&race_ack), 0);
}

/*
 * A cancellation that comes while the fiber starts a wait nothing else
 * ends, between the call's entry check and its park: fb_fiber_park() or
 * fiber_cancel() must see the other, or the fiber sleeps for ever.
 */
static void *sleep_forever_rounds(void *arg)
{
	(void)arg;
	for (int i = 0; i < RACE_ROUNDS; i++) {
		if (fiber_sleep_until(FIBER_NO_DEADLINE) != ECANCELED)
			return (void *)-1L;
		fiber_sem_post(&race_ack);
	}
	return NULL;
}

static void test_cancel_races_with_the_start_of_a_wait(void **state)
{
	fiber_t f;

	(void)state;
	assert_int_equal(fiber_sem_init(&race_ack, 0), 0);
	f = spawn_on(0, sleep_forever_rounds, NULL);
	for (int i = 0; i < RACE_ROUNDS; i++) {
		assert_int_equal(fiber_cancel(f), 0);
		assert_int_equal(fiber_sem_wait(&race_ack), 0);
	}
	assert_int_equal(join(f), 0);
	assert_int_equal(fiber_sem_destroy(&race_ack), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cancel_sleep_until),
		cmocka_unit_test(test_cancel_sem_wait_keeps_the_next_post),
		cmocka_unit_test(test_cancel_wg_wait_leaves_the_count),
		cmocka_unit_test(test_cancel_cond_wait_retakes_the_mutex),
		cmocka_unit_test(
			test_cancel_barrier_wait_takes_its_arrival_back),
		cmocka_unit_test(
			test_cancel_chan_recv_leaves_the_element_to_the_next),
		cmocka_unit_test(test_cancel_chan_send_delivers_nothing),
		cmocka_unit_test(test_cancel_pipe_read_and_write_lose_no_byte),
		cmocka_unit_test(test_cancel_join_leaves_the_fiber_joinable),
		cmocka_unit_test(test_cancel_fd_calls_lose_no_byte),
		cmocka_unit_test(test_cancel_before_the_call_is_reported_once),
		cmocka_unit_test(
			test_cancel_waits_for_the_next_cancellation_point),
		cmocka_unit_test(test_cancel_of_a_finished_fiber_is_esrch),
		cmocka_unit_test(test_cancel_races_with_a_post_10000_times),
		cmocka_unit_test(test_cancel_races_with_a_send_10000_times),
		cmocka_unit_test(test_cancel_races_with_the_start_of_a_wait),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
