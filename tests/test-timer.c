/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-timer.c - timers through the public API: sleeps wake in deadline
 * order; the timed variants of cond, sem, chan and pipe time out with
 * ETIMEDOUT and succeed when served in time, from fibers and from a
 * foreign thread; a timeout racing with a wake is won by exactly one side
 * (no semaphore unit lost or given twice).  The _until calls take a
 * deadline in fiber_now() nanoseconds: a past one times out at once and
 * leaves the object as it was; a timed join racing with the exit ends in
 * one outcome.
 *
 * Assertions are on order and outcomes, never on durations.  Fibers never
 * call cmocka assertions; they record results and the test thread checks.
 */
#include <fiber.h>

#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define MS 1000000ull

static struct timespec in_ms(long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

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
	cpu_set_t set;
	fiber_t f;

	assert_int_equal(fiber_attr_init(&attr), 0);
	if (worker >= 0) {
		CPU_ZERO(&set);
		CPU_SET(worker, &set);
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

/* ---- sleeps in deadline order ------------------------------------------ */

#define NR_SLEEPERS 8
static atomic_int start_seq, wake_seq;
static struct sleeper {
	uint64_t before; /* the clock just before fiber_sleep */
	uint64_t ns;	 /* what it asked for */
	uint64_t after;	 /* the clock once it ran again */
	int started;	 /* its place in the order sleepers started */
	int woke;	 /* its place in the order sleepers woke */
} sl[NR_SLEEPERS + 1];	 /* the last one only starts: see marker() */

static uint64_t sleep_base;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleeper @i sleeps until sleep_base + i * 4 ms, or 1 ns if that has
 * passed already (a late start): the deadlines do not depend on when each
 * fiber first runs, unless it runs late. */
static void *sleeper(void *arg)
{
	struct sleeper *me = &sl[(long)arg];
	uint64_t until = sleep_base + (uint64_t)(long)arg * 4 * MS;

	me->started = atomic_fetch_add(&start_seq, 1);
	me->before = now_ns();
	me->ns = me->before < until ? until - me->before : 1;
	fiber_sleep(me->ns);
	me->woke = atomic_fetch_add(&wake_seq, 1);
	me->after = now_ns();
	return NULL;
}

/* Started after the sleepers: its start bounds the last one's deadline. */
static void *marker(void *arg)
{
	struct sleeper *me = &sl[NR_SLEEPERS];

	(void)arg;
	me->started = atomic_fetch_add(&start_seq, 1);
	me->before = now_ns();
	return NULL;
}

/*
 * The deadline fiber_sleep computed for @s is its own clock read plus
 * @s->ns.  That read came after @s->before and, all sleepers being on one
 * worker that runs each until it parks, before the next sleeper started;
 * and the deadline had passed when @s ran again (a bound that, alone, says
 * nothing about the order: marker() gives the last sleeper a next one).
 */
static void deadline_bounds(const struct sleeper *s, uint64_t *lo, uint64_t *hi)
{
	*lo = s->before + s->ns;
	*hi = s->after;
	for (int j = 0; j <= NR_SLEEPERS; j++)
		if (sl[j].started == s->started + 1 &&
		    sl[j].before + s->ns < *hi)
			*hi = sl[j].before + s->ns;
}

/* Worker 0's thread off the CPU for 150 ms (a blocking system call, as a
 * host that does not run it): every sleeper queued behind starts late. */
static void *stall(void *arg)
{
	struct timespec ts = { 0, 150 * 1000000L };

	(void)arg;
	while (nanosleep(&ts, &ts))
		;
	return NULL;
}

/*
 * Run the sleepers on worker 0 (behind a stall() if @late) and check that
 * they woke in deadline order: for every pair whose deadlines are known
 * apart; the others, which only a late start makes uncertain, are left
 * out.  Return: the number of pairs checked.
 */
static int sleepers_in_order(bool late)
{
	fiber_t f[NR_SLEEPERS], s = NULL;
	uint64_t lo[NR_SLEEPERS], hi[NR_SLEEPERS];
	int pairs = 0;

	atomic_store(&start_seq, 0);
	atomic_store(&wake_seq, 0);
	sleep_base = now_ns() + 100 * MS;
	if (late)
		s = spawn_on(0, stall, NULL);
	/* Created longest first, all on one worker: one heap orders them. */
	for (long i = NR_SLEEPERS - 1; i >= 0; i--)
		f[i] = spawn_on(0, sleeper, (void *)i);
	assert_int_equal(join(spawn_on(0, marker, NULL)), 0);
	for (int i = 0; i < NR_SLEEPERS; i++)
		assert_int_equal(join(f[i]), 0);
	if (s)
		assert_int_equal(join(s), 0);
	for (int i = 0; i < NR_SLEEPERS; i++)
		deadline_bounds(&sl[i], &lo[i], &hi[i]);
	for (int i = 0; i < NR_SLEEPERS; i++)
		for (int j = 0; j < NR_SLEEPERS; j++) {
			if (hi[i] >= lo[j])
				continue; /* not known to be due before j */
			/* j started after its target (a worker held off its
			 * CPU) and slept 1 ns: its deadline had passed when it
			 * waited, so it returned at once, never through the
			 * heap that orders i's wake-up. */
			if (sl[j].ns == 1 && sl[i].ns > 1)
				continue;
			pairs++;
			if (sl[i].woke > sl[j].woke)
				fail_msg("sleeper %d (due by %llu) woke after "
					 "%d (due from %llu)",
					 i, (unsigned long long)hi[i], j,
					 (unsigned long long)lo[j]);
		}
	print_message("# %d ordered pairs checked of %d\n", pairs,
		      NR_SLEEPERS * (NR_SLEEPERS - 1) / 2);
	return pairs;
}

/* Sleepers wake in deadline order. */
static void test_timer_sleeps_wake_in_deadline_order(void **state)
{
	(void)state;
	sleepers_in_order(false);
}

/* Sleepers that start after their deadline (the worker was not run) are
 * not a failure; what can still be ordered is. */
static void test_timer_late_sleepers_are_not_a_failure(void **state)
{
	(void)state;
	sleepers_in_order(true);
}

static void *sleep_zero(void *arg)
{
	(void)arg;
	fiber_sleep(0);
	fiber_usleep(100);
	return (void *)1L;
}

static void test_timer_sleep_zero_and_foreign_thread(void **state)
{
	(void)state;
	assert_int_equal(join(spawn_on(-1, sleep_zero, NULL)), 1);
	fiber_usleep(100); /* main thread: a plain sleep */
	fiber_sleep(1000);
}

/* ---- cond ---------------------------------------------------------------- */

static fiber_mutex_t mtx = FIBER_MUTEX_INITIALIZER;
static fiber_cond_t cond = FIBER_COND_INITIALIZER;
static int flag;

static void *cond_timeout(void *arg)
{
	struct timespec ts = in_ms(10);
	int err;

	(void)arg;
	fiber_mutex_lock(&mtx);
	err = fiber_cond_timedwait(&cond, &mtx, &ts);
	/* The mutex is held again: unlock must succeed. */
	if (fiber_mutex_unlock(&mtx))
		return (void *)-1L;
	return (void *)(long)err;
}

static void *cond_waiter(void *arg)
{
	struct timespec ts = in_ms(30000);
	int err = 0;

	(void)arg;
	fiber_mutex_lock(&mtx);
	while (!flag && !err)
		err = fiber_cond_timedwait(&cond, &mtx, &ts);
	fiber_mutex_unlock(&mtx);
	return (void *)(long)err;
}

static void *cond_signaller(void *arg)
{
	(void)arg;
	fiber_sleep(2 * MS);
	fiber_mutex_lock(&mtx);
	flag = 1;
	fiber_cond_broadcast(&cond);
	fiber_mutex_unlock(&mtx);
	return NULL;
}

static void test_timer_cond_timedwait(void **state)
{
	struct timespec bad = { .tv_sec = 0, .tv_nsec = 2000000000 };
	fiber_t w, s;

	(void)state;
	assert_int_equal(join(spawn_on(-1, cond_timeout, NULL)), ETIMEDOUT);
	assert_int_equal(fiber_mutex_lock(&mtx), 0);
	assert_int_equal(fiber_cond_timedwait(&cond, &mtx, &bad), EINVAL);
	bad = in_ms(5); /* from the main thread */
	assert_int_equal(fiber_cond_timedwait(&cond, &mtx, &bad), ETIMEDOUT);
	assert_int_equal(fiber_mutex_unlock(&mtx), 0);
	flag = 0;
	w = spawn_on(-1, cond_waiter, NULL);
	s = spawn_on(-1, cond_signaller, NULL);
	assert_int_equal(join(w), 0);
	join(s);
}

/* ---- sem ----------------------------------------------------------------- */

static fiber_sem_t sem;

static void *sem_timed(void *arg)
{
	struct timespec ts = in_ms((long)arg);

	return (void *)(long)fiber_sem_timedwait(&sem, &ts);
}

static void *sem_poster(void *arg)
{
	(void)arg;
	fiber_sleep(2 * MS);
	fiber_sem_post(&sem);
	return NULL;
}

static void test_timer_sem_timedwait(void **state)
{
	struct timespec ts;
	fiber_t w, p;
	int v;

	(void)state;
	assert_int_equal(fiber_sem_init(&sem, 0), 0);
	assert_int_equal(join(spawn_on(-1, sem_timed, (void *)5L)), ETIMEDOUT);
	ts = in_ms(5);
	assert_int_equal(fiber_sem_timedwait(&sem, &ts), ETIMEDOUT);
	w = spawn_on(-1, sem_timed, (void *)30000L);
	p = spawn_on(-1, sem_poster, NULL);
	assert_int_equal(join(w), 0);
	join(p);
	assert_int_equal(fiber_sem_getvalue(&sem, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
}

/* Timeouts racing with posts: every unit posted is either taken by a
 * waiter that reports success or left in the semaphore. */
#define RACE_WAITERS 200
#define RACE_POSTS 100
static atomic_int race_ok;

static void *race_waiter(void *arg)
{
	struct timespec ts = in_ms(1 + (long)arg % 4);

	if (fiber_sem_timedwait(&sem, &ts) == 0)
		atomic_fetch_add(&race_ok, 1);
	return NULL;
}

static void *race_poster(void *arg)
{
	(void)arg;
	for (int i = 0; i < RACE_POSTS; i++) {
		fiber_sem_post(&sem);
		if (i % 8 == 0)
			fiber_usleep(100);
	}
	return NULL;
}

static void test_timer_timeout_races_with_post(void **state)
{
	fiber_t f[RACE_WAITERS + 1];
	int v;

	(void)state;
	atomic_store(&race_ok, 0);
	assert_int_equal(fiber_sem_init(&sem, 0), 0);
	for (long i = 0; i < RACE_WAITERS; i++)
		f[i] = spawn_on(-1, race_waiter, (void *)i);
	f[RACE_WAITERS] = spawn_on(-1, race_poster, NULL);
	for (int i = 0; i <= RACE_WAITERS; i++)
		join(f[i]);
	assert_int_equal(fiber_sem_getvalue(&sem, &v), 0);
	assert_int_equal(atomic_load(&race_ok) + v, RACE_POSTS);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
}

/* ---- chan ---------------------------------------------------------------- */

static fiber_chan_t *chan;

static void *chan_timed_send(void *arg)
{
	struct timespec ts = in_ms((long)arg);
	int v = 42;

	return (void *)(long)fiber_chan_timedsend(chan, &v, &ts);
}

static void *chan_timed_recv(void *arg)
{
	struct timespec ts = in_ms((long)arg);
	int v = 0, err = fiber_chan_timedrecv(chan, &v, &ts);

	return (void *)(long)(err ? -err : v);
}

static void *chan_late_recv(void *arg)
{
	int v = 0;

	(void)arg;
	fiber_sleep(2 * MS);
	fiber_chan_recv(chan, &v);
	return (void *)(long)v;
}

static void *chan_late_send(void *arg)
{
	int v = 7;

	(void)arg;
	fiber_sleep(2 * MS);
	return (void *)(long)fiber_chan_send(chan, &v);
}

static void test_timer_chan_timed(void **state)
{
	fiber_t a, b;

	(void)state;
	assert_int_equal(fiber_chan_create(&chan, sizeof(int), 0), 0);
	assert_int_equal(join(spawn_on(-1, chan_timed_send, (void *)5L)),
			 ETIMEDOUT);
	assert_int_equal(join(spawn_on(-1, chan_timed_recv, (void *)5L)),
			 -ETIMEDOUT);
	a = spawn_on(-1, chan_timed_send, (void *)30000L);
	b = spawn_on(-1, chan_late_recv, NULL);
	assert_int_equal(join(a), 0);
	assert_int_equal(join(b), 42);
	a = spawn_on(-1, chan_timed_recv, (void *)30000L);
	b = spawn_on(-1, chan_late_send, NULL);
	assert_int_equal(join(a), 7);
	assert_int_equal(join(b), 0);
	assert_int_equal(fiber_chan_destroy(chan), 0);
}

/* ---- pipe ---------------------------------------------------------------- */

static fiber_pipe_t *pipe_;

static void *pipe_timed_read(void *arg)
{
	struct timespec ts = in_ms((long)arg);
	char buf[8];
	size_t done = 99;
	int err = fiber_pipe_timedread(pipe_, buf, sizeof(buf), &done, &ts);

	return (void *)(long)(err ? -err : (long)done);
}

static void *pipe_timed_write(void *arg)
{
	struct timespec ts = in_ms((long)arg);
	char buf[32] = { 0 };
	size_t done = 0;
	int err = fiber_pipe_timedwrite(pipe_, buf, sizeof(buf), &done, &ts);

	return (void *)(long)(err ? -err : (long)done);
}

static void *pipe_late_write(void *arg)
{
	size_t done;

	(void)arg;
	fiber_sleep(2 * MS);
	fiber_pipe_write(pipe_, "abc", 3, &done);
	return NULL;
}

static void *pipe_late_drain(void *arg)
{
	char buf[64];
	size_t done, total = 0;

	(void)arg;
	fiber_sleep(2 * MS);
	while (total < 16 + 32 &&
	       fiber_pipe_read(pipe_, buf, sizeof(buf), &done) == 0 && done)
		total += done;
	return (void *)(long)total;
}

static void test_timer_pipe_timed(void **state)
{
	fiber_t a, b;
	size_t done;

	(void)state;
	assert_int_equal(fiber_pipe_create(&pipe_, 16), 0);
	assert_int_equal(join(spawn_on(-1, pipe_timed_read, (void *)5L)),
			 -ETIMEDOUT);
	a = spawn_on(-1, pipe_timed_read, (void *)30000L);
	b = spawn_on(-1, pipe_late_write, NULL);
	assert_int_equal(join(a), 3);
	join(b);
	/* 32 bytes into 16: times out with the first 16 in. */
	assert_int_equal(join(spawn_on(-1, pipe_timed_write, (void *)5L)),
			 -ETIMEDOUT);
	a = spawn_on(-1, pipe_timed_write, (void *)30000L);
	b = spawn_on(-1, pipe_late_drain, NULL);
	assert_int_equal(join(a), 32);
	assert_int_equal(join(b), 48);
	assert_int_equal(fiber_pipe_write(pipe_, "x", 1, &done), 0);
	assert_int_equal(fiber_pipe_destroy(pipe_), 0);
}

/* ---- deadlines in fiber_now() nanoseconds ------------------------------- */

static void test_timer_deadline_now_is_clock_monotonic(void **state)
{
	struct timespec a, b;
	uint64_t t0, t1, n;

	(void)state;
	clock_gettime(CLOCK_MONOTONIC, &a);
	n = fiber_now();
	clock_gettime(CLOCK_MONOTONIC, &b);
	t0 = (uint64_t)a.tv_sec * 1000000000u + (uint64_t)a.tv_nsec;
	t1 = (uint64_t)b.tv_sec * 1000000000u + (uint64_t)b.tv_nsec;
	assert_true(t0 <= n && n <= t1);
	assert_true(fiber_now() >= n);
}

static void *block_on_sem(void *arg)
{
	return (void *)(long)fiber_sem_wait(arg);
}

static void *post_later(void *arg)
{
	fiber_sleep(2 * MS);
	fiber_sem_post(arg);
	return NULL;
}

/*
 * past_deadlines - every _until call given a deadline that has passed
 * (0, and one just behind fiber_now()): the calls that would wait return
 * ETIMEDOUT at once and leave their object as it was; those that can
 * complete do.  Returns 0, or the number of the first check that failed.
 * Context: a fiber or the main thread.
 */
static long past_deadlines(void)
{
	const uint64_t past[2] = { 0, fiber_now() - 1 };
	fiber_mutex_t m = FIBER_MUTEX_INITIALIZER;
	fiber_cond_t c = FIBER_COND_INITIALIZER;
	fiber_sem_t s, gate;
	fiber_chan_t *ch;
	fiber_pipe_t *p;
	char buf[8] = "";
	size_t done = 1;
	void *r = NULL;
	fiber_t f;
	int v = -1, x;

	if (fiber_sem_init(&s, 0) || fiber_sem_init(&gate, 0) ||
	    fiber_chan_create(&ch, sizeof(int), 1) || fiber_pipe_create(&p, 4))
		return 1;
	for (int i = 0; i < 2; i++) {
		if (fiber_sem_wait_until(&s, past[i]) != ETIMEDOUT ||
		    fiber_sem_getvalue(&s, &v) || v != 0)
			return 2;
		if (fiber_mutex_lock(&m) ||
		    fiber_cond_wait_until(&c, &m, past[i]) != ETIMEDOUT ||
		    fiber_mutex_unlock(&m)) /* held again */
			return 3;
		if (fiber_chan_recv_until(ch, &x, past[i]) != ETIMEDOUT)
			return 4;
		if (fiber_pipe_read_until(p, buf, 4, &done, past[i]) !=
			    ETIMEDOUT ||
		    done != 0)
			return 5;
		if (fiber_sleep_until(past[i]) != 0)
			return 6;
	}
	/* What can complete at once does, whatever the deadline. */
	if (fiber_sem_post(&s) || fiber_sem_wait_until(&s, 0) ||
	    fiber_sem_getvalue(&s, &v) || v != 0)
		return 7;
	x = 42;
	if (fiber_chan_send_until(ch, &x, 0))
		return 8;
	x = 43; /* the ring is full now */
	if (fiber_chan_send_until(ch, &x, 0) != ETIMEDOUT)
		return 9;
	if (fiber_chan_recv_until(ch, &x, 0) || x != 42 ||
	    fiber_chan_tryrecv(ch, &x) != EAGAIN)
		return 10;
	if (fiber_pipe_write_until(p, "abcd", 4, &done, 0) || done != 4 ||
	    fiber_pipe_write_until(p, "efgh", 4, &done, 0) != ETIMEDOUT ||
	    done != 0)
		return 11;
	if (fiber_pipe_read_until(p, buf, sizeof(buf), &done, 0) || done != 4 ||
	    memcmp(buf, "abcd", 4))
		return 12;
	/* A join that times out leaves the fiber running and joinable. */
	if (fiber_create(&f, NULL, block_on_sem, &gate))
		return 13;
	if (fiber_join_until(f, &r, 0) != ETIMEDOUT ||
	    fiber_join_until(f, &r, fiber_now() - 1) != ETIMEDOUT ||
	    fiber_sem_post(&gate) || fiber_join(f, &r) || r != NULL)
		return 14;
	/* Nothing was left queued on any object. */
	if (fiber_cond_destroy(&c) || fiber_sem_destroy(&s) ||
	    fiber_sem_destroy(&gate) || fiber_chan_destroy(ch) ||
	    fiber_pipe_destroy(p))
		return 15;
	return 0;
}

static void *past_deadlines_fiber(void *arg)
{
	(void)arg;
	return (void *)past_deadlines();
}

static void test_timer_deadline_in_the_past_times_out_at_once(void **state)
{
	(void)state;
	assert_int_equal(join(spawn_on(-1, past_deadlines_fiber, NULL)), 0);
	assert_int_equal(past_deadlines(), 0); /* a foreign thread */
}

/* future_deadlines - the _until calls wait until their deadline, and
 * with FIBER_NO_DEADLINE until they are served.  Returns 0 or the number
 * of the failed check.  Context: a fiber or the main thread. */
static long future_deadlines(void)
{
	fiber_mutex_t m = FIBER_MUTEX_INITIALIZER;
	fiber_cond_t c = FIBER_COND_INITIALIZER;
	uint64_t deadline;
	fiber_sem_t s, gate;
	fiber_chan_t *ch;
	void *r = (void *)1;
	fiber_t f, g;
	int x = 1;

	if (fiber_sem_init(&s, 0) || fiber_sem_init(&gate, 0) ||
	    fiber_chan_create(&ch, sizeof(int), 0))
		return 1;
	if (fiber_sem_wait_until(&s, fiber_now() + 2 * MS) != ETIMEDOUT)
		return 2;
	if (fiber_mutex_lock(&m) ||
	    fiber_cond_wait_until(&c, &m, fiber_now() + 2 * MS) != ETIMEDOUT ||
	    fiber_mutex_unlock(&m))
		return 3;
	if (fiber_chan_send_until(ch, &x, fiber_now() + 2 * MS) != ETIMEDOUT ||
	    fiber_chan_recv_until(ch, &x, fiber_now() + 2 * MS) != ETIMEDOUT)
		return 4;
	deadline = fiber_now() + MS;
	if (fiber_sleep_until(deadline) || fiber_now() < deadline)
		return 5;
	if (fiber_create(&f, NULL, block_on_sem, &gate) ||
	    fiber_join_until(f, &r, fiber_now() + 2 * MS) != ETIMEDOUT)
		return 6;
	if (fiber_create(&g, NULL, post_later, &s) ||
	    fiber_sem_wait_until(&s, FIBER_NO_DEADLINE) || fiber_join(g, NULL))
		return 7;
	if (fiber_sem_post(&gate) ||
	    fiber_join_until(f, &r, FIBER_NO_DEADLINE) || r != NULL)
		return 8;
	if (fiber_cond_destroy(&c) || fiber_sem_destroy(&s) ||
	    fiber_sem_destroy(&gate) || fiber_chan_destroy(ch))
		return 9;
	return 0;
}

static void *future_deadlines_fiber(void *arg)
{
	(void)arg;
	return (void *)future_deadlines();
}

static void test_timer_deadline_in_the_future_waits(void **state)
{
	(void)state;
	assert_int_equal(join(spawn_on(-1, future_deadlines_fiber, NULL)), 0);
	assert_int_equal(future_deadlines(), 0);
}

/*
 * A timed join races with the fiber's exit: the reaper takes the joiner
 * under the handle slot's lock, a joiner that times out leaves under it,
 * so each round ends in exactly one of "timed out, still joinable" and
 * "joined", and the fiber is joined once (no leak, no use of a joiner's
 * frame after it left: ASan).
 */
#define JOIN_RACE_ROUNDS 2000

static void *exit_soon(void *arg)
{
	for (long i = 0; i < (long)arg % 3; i++)
		fiber_yield();
	return arg;
}

static void *join_race(void *arg)
{
	long timeouts = 0;

	(void)arg;
	for (long i = 1; i <= JOIN_RACE_ROUNDS; i++) {
		void *r = NULL;
		fiber_t f;
		int err;

		if (fiber_create(&f, NULL, exit_soon, (void *)i))
			return (void *)-1L;
		while ((err = fiber_join_until(f, &r,
					       fiber_now() + (uint64_t)(i % 7) *
								     1000)) ==
		       ETIMEDOUT)
			timeouts++;
		if (err || r != (void *)i)
			return (void *)-2L;
	}
	return (void *)timeouts;
}

static void test_timer_deadline_join_races_with_exit(void **state)
{
	(void)state;
	assert_true(join(spawn_on(0, join_race, NULL)) >= 0);
	assert_true(join(spawn_on(1, join_race, NULL)) >= 0);
	assert_true((long)join_race(NULL) >= 0); /* a foreign joiner */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timer_sleeps_wake_in_deadline_order),
		cmocka_unit_test(test_timer_late_sleepers_are_not_a_failure),
		cmocka_unit_test(test_timer_sleep_zero_and_foreign_thread),
		cmocka_unit_test(test_timer_cond_timedwait),
		cmocka_unit_test(test_timer_sem_timedwait),
		cmocka_unit_test(test_timer_timeout_races_with_post),
		cmocka_unit_test(test_timer_chan_timed),
		cmocka_unit_test(test_timer_pipe_timed),
		cmocka_unit_test(test_timer_deadline_now_is_clock_monotonic),
		cmocka_unit_test(
			test_timer_deadline_in_the_past_times_out_at_once),
		cmocka_unit_test(test_timer_deadline_in_the_future_waits),
		cmocka_unit_test(test_timer_deadline_join_races_with_exit),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
