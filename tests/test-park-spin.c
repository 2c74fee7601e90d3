/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-park-spin.c - the park spin (PARK_SPIN, doc/scheduler.md 1.11): a
 * fiber that blocks on a worker with nothing else to run polls for its own
 * wake before it parks.
 *
 * What must hold:
 *   - a wake that finds the fiber spinning hands it its outcome and the
 *     data (nothing lost, nothing misdelivered), and the fiber goes on
 *     without parking;
 *   - the spin ends at once for work that comes for its worker, at the
 *     worker's next timer (a timed wait times out) and at a
 *     cancellation: none of them waits for the window;
 *   - a fiber that spun, parked and was never woken is abandoned by
 *     fiber_shutdown() like any other;
 *   - a worker whose spins run out of time spins at one park in
 *     FB_POLL_SAMPLE only (an exact count);
 *   - a wake that a spin saw is a scheduling point: a ping-pong of spins
 *     that never switches still runs the busy worker's tick (epoll);
 *   - no spin where none can pay: one worker, another fiber queued, the
 *     feature off, a sleep, an fd wait.
 * White box: where a test must catch a fiber spinning, the window is
 * stretched to 30 s (fb_park_spin_test_ns), so that a spin that did not
 * end as it must fails the test's bounded wait.  The stall detector is
 * off: from 1 ms on it would fire a stalled worker's timers itself, and
 * hide a spin that ignored them.  Assertions read the fiber's state word
 * and the counters; time only bounds the waits.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "sched/sched.h"

/* A window longer than the tests' bounded waits (10 s): a spin that
 * must end early and does not fails the wait, and the teardown's
 * shutdown still ends. */
#define FOREVER_NS (30ull * 1000000000ull)

static _Atomic(struct fb_fiber *) waiter_fiber;
static atomic_int outcome, finished;
static fiber_sem_t sem;

/* start - runtime of @workers workers, not pinned (so that no CPU
 * crowding switches the spin off under a loaded test machine), with
 * @features, and the park spin's window @window_ns (0: the rule). */
static void start(unsigned int workers, const char *features,
		  uint64_t window_ns)
{
	struct fiber_config c = { 0 };

	c.workers = workers;
	c.bind = 0;
	c.bind_set = 1;
	c.sched_features = features;
	assert_int_equal(fiber_init(&c), 0);
	fb_park_spin_test_ns = window_ns;
}

static int teardown(void **state)
{
	(void)state;
	fiber_shutdown();
	fb_park_spin_test_ns = 0;
	return 0;
}

/* on - start @fn(@arg) on worker @worker only. */
static fiber_t on(int worker, void *(*fn)(void *), void *arg)
{
	fiber_attr_t a;
	cpu_set_t s;
	fiber_t f;

	fiber_attr_init(&a);
	CPU_ZERO(&s);
	CPU_SET(worker, &s);
	assert_int_equal(fiber_attr_setaffinity(&a, sizeof(s), &s), 0);
	assert_int_equal(fiber_create(&f, &a, fn, arg), 0);
	fiber_attr_destroy(&a);
	return f;
}

/* wait_for - poll @cond for at most 10 s; returns whether it came. */
#define wait_for(cond)                                                         \
	({                                                                     \
		for (int i_ = 0; i_ < 10000 && !(cond); i_++)                  \
			usleep(1000);                                          \
		(bool)(cond);                                                  \
	})

static int waiter_state(void)
{
	struct fb_fiber *f = atomic_load(&waiter_fiber);

	return f ? fb_load_acquire(&f->state) : -1;
}

/* The fiber under test: one wait (a struct call), its outcome
 * published. */
struct call {
	int (*wait)(void);
};

static void *waiter(void *arg)
{
	const struct call *c = arg;

	atomic_store(&waiter_fiber, fb_current());
	atomic_store(&outcome, c->wait());
	atomic_store(&finished, 1);
	return NULL;
}

static int sem_wait(void)
{
	return fiber_sem_wait(&sem);
}

static const struct call sem_waiter = { sem_wait };

static void reset(void)
{
	atomic_store(&waiter_fiber, NULL);
	atomic_store(&outcome, -1);
	atomic_store(&finished, 0);
	assert_int_equal(fiber_sem_init(&sem, 0), 0);
}

/* spinning - a runtime of 2 workers with the window stretched, and @c's
 * waiter on worker 1, caught spinning. */
static fiber_t spinning(const struct call *c)
{
	fiber_t f;

	start(2, NULL, FOREVER_NS);
	f = on(1, waiter, (void *)c);
	assert_true(wait_for(fiber_stats_counter("park_spins") == 1 &&
			     waiter_state() == FB_FIBER_PARKING));
	return f;
}

/* ---- a wake that finds the fiber spinning ---- */

static void test_spin_takes_the_wake_without_parking(void **state)
{
	fiber_t f;

	(void)state;
	reset();
	f = spinning(&sem_waiter);
	assert_int_equal(fiber_stats_counter("parks"), 0);
	/* A foreign thread's post: wake() turns PARKING into RUNNING. */
	assert_int_equal(fiber_sem_post(&sem), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(atomic_load(&outcome), 0);
	assert_int_equal(fiber_stats_counter("park_spin_wakes"), 1);
	assert_int_equal(fiber_stats_counter("wake_early"), 1);
	/* It never left its stack for the wait. */
	assert_int_equal(fiber_stats_counter("parks"), 0);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
}

/* ---- the spin ends for work, a timer, a cancel, a shutdown ---- */

static atomic_int other_ran;

static void *mark(void *arg)
{
	(void)arg;
	atomic_store(&other_ran, 1);
	return NULL;
}

static void test_spin_yields_to_work_for_its_worker(void **state)
{
	struct fb_worker *w1;
	fiber_t f, g;

	(void)state;
	reset();
	atomic_store(&other_ran, 0);
	f = spinning(&sem_waiter);
	/* A fiber for the spinner's worker: the spin gives way, the fiber
	 * parks and the newcomer runs. */
	g = on(1, mark, NULL);
	assert_true(wait_for(atomic_load(&other_ran)));
	assert_int_equal(fiber_join(g, NULL), 0);
	assert_true(wait_for(waiter_state() == FB_FIBER_PARKED));
	w1 = fb_rt->workers[1];
	/* Ended by work: not a spin that ran out of time. */
	assert_int_equal(w1->spin_miss_avg, 0);
	assert_int_equal(fiber_stats_counter("park_spin_wakes"), 0);
	assert_int_equal(fiber_sem_post(&sem), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(atomic_load(&outcome), 0);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
}

static int sem_wait_20ms(void)
{
	return fiber_sem_wait_until(&sem, fiber_now() + 20000000);
}

static const struct call timed_waiter = { sem_wait_20ms };

static void test_spin_ends_at_the_workers_next_timer(void **state)
{
	fiber_t f;

	(void)state;
	reset();
	start(2, NULL, FOREVER_NS);
	f = on(1, waiter, (void *)&timed_waiter);
	/* The deadline's timer is the worker's next: the spin stops there
	 * and the wait times out, not 30 s later. */
	assert_true(wait_for(atomic_load(&finished)));
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(atomic_load(&outcome), ETIMEDOUT);
	assert_int_equal(fiber_stats_counter("park_spins"), 1);
	assert_int_equal(fiber_stats_counter("park_spin_wakes"), 0);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
}

static fiber_pipe_t *pipe_;

static atomic_size_t pipe_got;

static int pipe_read_some(void)
{
	char buf[8];
	size_t n = 99;
	int rc = fiber_pipe_read(pipe_, buf, sizeof(buf), &n);

	atomic_store(&pipe_got, n);
	return rc;
}

static const struct call pipe_reader = { pipe_read_some };

static void test_spin_ends_at_a_cancellation(void **state)
{
	fiber_t f;

	(void)state;
	reset();
	assert_int_equal(fiber_pipe_create(&pipe_, 0), 0);
	f = spinning(&pipe_reader);
	assert_int_equal(fiber_cancel(f), 0);
	assert_true(wait_for(atomic_load(&finished)));
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(atomic_load(&outcome), ECANCELED);
	assert_int_equal(atomic_load(&pipe_got), 0); /* no byte */
	/* The reader took itself off: the pipe is free to go. */
	assert_int_equal(fiber_pipe_destroy(pipe_), 0);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
}

static void test_shutdown_abandons_a_fiber_that_spun(void **state)
{
	int v;

	(void)state;
	reset();
	start(2, NULL, 0); /* the default window: shutdown's quiet wait
			      counts a spinning fiber as running */
	on(1, waiter, (void *)&sem_waiter);
	assert_true(wait_for(fiber_stats_counter("park_spins") == 1 &&
			     waiter_state() == FB_FIBER_PARKED));
	/* Nobody posts: the fiber that spun and parked is abandoned. */
	assert_int_equal(fiber_shutdown(), EBUSY);
	/* The abandoned waiter takes no unit. */
	assert_int_equal(fiber_sem_post(&sem), 0);
	assert_int_equal(fiber_sem_getvalue(&sem, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
}

/* ---- back-off: spins that run out of time ---- */

static atomic_int round_no, rounds_done;

static void *sem_waiter_rounds(void *arg)
{
	int n = (int)(intptr_t)arg;

	atomic_store(&waiter_fiber, fb_current());
	for (int i = 0; i < n; i++) {
		atomic_store(&round_no, i + 1);
		assert_int_equal(fiber_sem_wait(&sem), 0);
		atomic_store(&rounds_done, i + 1);
	}
	return NULL;
}

/* parked_rounds - @n rounds of a sem wait by a fiber on worker @worker,
 * each posted only once the fiber has parked. */
static void parked_rounds(int worker, int n)
{
	fiber_t f;

	atomic_store(&round_no, 0);
	atomic_store(&rounds_done, 0);
	f = on(worker, sem_waiter_rounds, (void *)(intptr_t)n);
	for (int i = 1; i <= n; i++) {
		assert_true(wait_for(atomic_load(&round_no) == i &&
				     waiter_state() == FB_FIBER_PARKED));
		assert_int_equal(fiber_sem_post(&sem), 0);
		assert_true(wait_for(atomic_load(&rounds_done) == i));
	}
	assert_int_equal(fiber_join(f, NULL), 0);
}

static void test_spins_that_miss_back_off(void **state)
{
	int n = 40;

	(void)state;
	reset();
	start(2, NULL, 0); /* the default window */
	/* Posted only once the fiber has parked: every spin ran out. */
	parked_rounds(1, n);
	/*
	 * The miss average a' = a - a/8 + 32 (of 256) from 0 reaches 192
	 * (FB_PARK_SPIN_MISS_MAX) at the 10th miss; then one park in
	 * FB_POLL_SAMPLE (8) spins: the 18th, 26th and 34th of 40.
	 */
	assert_int_equal(fiber_stats_counter("park_spins"), 13);
	assert_int_equal(fiber_stats_counter("park_spin_wakes"), 0);
	assert_int_equal(fiber_stats_counter("parks"), n);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
}

/* ---- a ping-pong across workers: data and outcomes ---- */

static fiber_pipe_t *to_pong, *to_ping;
static atomic_int pong_errors, stop;

static void *pong(void *arg)
{
	uint32_t token;
	size_t n;

	(void)arg;
	for (;;) {
		if (fiber_pipe_read(to_pong, &token, sizeof(token), &n) ||
		    n == 0)
			break;
		if (n != sizeof(token)) {
			atomic_fetch_add(&pong_errors, 1);
			break;
		}
		token++;
		if (fiber_pipe_write(to_ping, &token, sizeof(token), &n))
			break;
	}
	fiber_pipe_close_write(to_ping);
	return NULL;
}

/* ping - @arg round trips, or fewer once @stop is set; returns the
 * number of bad answers. */
static void *ping(void *arg)
{
	uintptr_t loops = (uintptr_t)arg, bad = 0;
	uint32_t token, reply;
	size_t n;

	for (uintptr_t i = 0; i < loops && !atomic_load(&stop); i++) {
		token = (uint32_t)i * 2654435761u;
		if (fiber_pipe_write(to_pong, &token, sizeof(token), &n) ||
		    fiber_pipe_read(to_ping, &reply, sizeof(reply), &n) ||
		    n != sizeof(reply) || reply != token + 1)
			bad++;
	}
	return (void *)bad;
}

/* pingpong - one pair, ping on worker 0 and pong on worker 1, @loops
 * round trips, checked; then the pipes are destroyed. */
static void pingpong(int pong_worker, uintptr_t loops)
{
	void *bad;
	fiber_t a, b;

	assert_int_equal(fiber_pipe_create(&to_pong, 64), 0);
	assert_int_equal(fiber_pipe_create(&to_ping, 64), 0);
	b = on(pong_worker, pong, NULL);
	a = on(0, ping, (void *)loops);
	assert_int_equal(fiber_join(a, &bad), 0);
	assert_null(bad);
	fiber_pipe_close_write(to_pong);
	assert_int_equal(fiber_join(b, NULL), 0);
	assert_int_equal(atomic_load(&pong_errors), 0);
	assert_int_equal(fiber_pipe_destroy(to_pong), 0);
	assert_int_equal(fiber_pipe_destroy(to_ping), 0);
}

static void test_spin_pingpong_delivers_every_token(void **state)
{
	int batches = 0;

	(void)state;
	atomic_store(&pong_errors, 0);
	atomic_store(&stop, 0);
	start(2, NULL, 0);
	/* Batches until a spin has caught a wake (the first does, unless
	 * the machine is too loaded for a partner to answer within 5 us):
	 * every batch checks every answer. */
	do
		pingpong(1, 2000);
	while (fiber_stats_counter("park_spin_wakes") == 0 && ++batches < 50);
	assert_true(fiber_stats_counter("park_spin_wakes") > 0);
	assert_true(fiber_stats_counter("park_spins") >=
		    fiber_stats_counter("park_spin_wakes"));
}

/* ---- a ping-pong of spins is a run of scheduling points ---- */

static int sock[2];
static atomic_int polled;

static void *read_one(void *arg)
{
	char c;

	(void)arg;
	atomic_store(&waiter_fiber, fb_current());
	atomic_store(&outcome, (int)fiber_read(sock[0], &c, 1));
	atomic_store(&polled, 1);
	return NULL;
}

static void *pingpong_thread(void *arg)
{
	pingpong(1, (uintptr_t)arg);
	return NULL;
}

/*
 * Both workers busy with a ping-pong whose every wake a spin catches (the
 * window stretched, so no spin ever runs out): no switch at all.  A wake
 * seen by a spin is a scheduling point, so every 64th runs the busy
 * worker's tick, which polls epoll: the fd waiter's byte is found while
 * the ping-pong goes on (without that, it waited for the ping-pong's end).
 */
static void test_spin_pingpong_still_polls_io(void **state)
{
	pthread_t t;
	fiber_t f;

	(void)state;
	reset();
	atomic_store(&polled, 0);
	atomic_store(&stop, 0);
	atomic_store(&pong_errors, 0);
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sock), 0);
	start(2, NULL, FOREVER_NS);
	f = on(0, read_one, NULL);
	assert_true(wait_for(waiter_state() == FB_FIBER_PARKED));
	assert_int_equal(pthread_create(&t, NULL, pingpong_thread,
					(void *)(uintptr_t)100000000),
			 0);
	assert_true(wait_for(fiber_stats_counter("park_spin_wakes") > 1000));
	assert_int_equal(write(sock[1], "x", 1), 1);
	assert_true(wait_for(atomic_load(&polled)));
	/* Found while the ping-pong ran, not after it. */
	assert_int_equal(atomic_load(&stop), 0);
	atomic_store(&stop, 1);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(atomic_load(&outcome), 1);
	close(sock[0]);
	close(sock[1]);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
}

/* ---- where it never spins ---- */

/* On the runtime's only worker the fibers that could end a wait run
 * there too: it parks at once, whoever wakes it later. */
static void test_no_spin_on_one_worker(void **state)
{
	int n = 3;

	(void)state;
	reset();
	start(1, NULL, FOREVER_NS);
	parked_rounds(0, n);
	atomic_store(&pong_errors, 0);
	pingpong(0, 2000);
	assert_true(fiber_stats_counter("parks") > n);
	assert_int_equal(fiber_stats_counter("park_spins"), 0);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
}

static atomic_int go;

static void *wait_when_told(void *arg)
{
	(void)arg;
	atomic_store(&waiter_fiber, fb_current());
	while (!atomic_load(&go)) /* no scheduling point: it keeps the worker */
		;
	atomic_store(&outcome, fiber_sem_wait(&sem));
	atomic_store(&finished, 1);
	return NULL;
}

/* A fiber queued behind the one that blocks: no spin at all, not even
 * one that gives way at once (it is not counted). */
static void test_no_spin_with_work_queued(void **state)
{
	fiber_t f, g;

	(void)state;
	reset();
	atomic_store(&go, 0);
	atomic_store(&other_ran, 0);
	start(2, NULL, FOREVER_NS);
	f = on(1, wait_when_told, NULL);
	assert_true(wait_for(atomic_load(&waiter_fiber) != NULL));
	g = on(1, mark, NULL); /* queued: the worker is busy */
	atomic_store(&go, 1);
	assert_true(wait_for(atomic_load(&other_ran)));
	assert_int_equal(fiber_join(g, NULL), 0);
	assert_int_equal(fiber_stats_counter("park_spins"), 0);
	assert_int_equal(fiber_sem_post(&sem), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(atomic_load(&outcome), 0);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
}

static void test_no_spin_when_switched_off(void **state)
{
	(void)state;
	atomic_store(&pong_errors, 0);
	start(2, "NO_PARK_SPIN", 0);
	pingpong(1, 2000);
	/* Not "parks > 0": two partners on two CPUs can catch each other
	 * before every park (wake_early), a run of 2000 in a row now and
	 * then. */
	assert_int_equal(fiber_stats_counter("park_spins"), 0);
	assert_int_equal(fiber_stats_counter("park_spin_wakes"), 0);
}

static void *sleeper_then_reader(void *arg)
{
	char c;

	(void)arg;
	atomic_store(&waiter_fiber, fb_current());
	for (int i = 0; i < 5; i++)
		fiber_usleep(200);
	atomic_store(&round_no, 1);
	atomic_store(&outcome, (int)fiber_read(sock[0], &c, 1));
	return NULL;
}

static void test_no_spin_for_sleeps_and_fd_waits(void **state)
{
	fiber_t f;

	(void)state;
	reset();
	atomic_store(&round_no, 0);
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sock), 0);
	start(2, NULL, FOREVER_NS);
	f = on(1, sleeper_then_reader, NULL);
	/* A spin here would last 30 s: the fiber must park at once. */
	assert_true(wait_for(atomic_load(&round_no) == 1 &&
			     waiter_state() == FB_FIBER_PARKED));
	assert_int_equal(write(sock[1], "x", 1), 1);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(atomic_load(&outcome), 1);
	assert_int_equal(fiber_stats_counter("park_spins"), 0);
	close(sock[0]);
	close(sock[1]);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(
			test_spin_takes_the_wake_without_parking, teardown),
		cmocka_unit_test_teardown(
			test_spin_yields_to_work_for_its_worker, teardown),
		cmocka_unit_test_teardown(
			test_spin_ends_at_the_workers_next_timer, teardown),
		cmocka_unit_test_teardown(test_spin_ends_at_a_cancellation,
					  teardown),
		cmocka_unit_test_teardown(
			test_shutdown_abandons_a_fiber_that_spun, teardown),
		cmocka_unit_test_teardown(test_spins_that_miss_back_off,
					  teardown),
		cmocka_unit_test_teardown(
			test_spin_pingpong_delivers_every_token, teardown),
		cmocka_unit_test_teardown(test_spin_pingpong_still_polls_io,
					  teardown),
		cmocka_unit_test_teardown(test_no_spin_on_one_worker, teardown),
		cmocka_unit_test_teardown(test_no_spin_with_work_queued,
					  teardown),
		cmocka_unit_test_teardown(test_no_spin_when_switched_off,
					  teardown),
		cmocka_unit_test_teardown(test_no_spin_for_sleeps_and_fd_waits,
					  teardown),
	};

	setenv("LIBFIBER_STALL_MS", "0", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
