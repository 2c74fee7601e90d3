/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-shutdown-wakes.c - wakes that race with fiber_shutdown().
 *
 * A wake that a waker takes (a mutex handed over, a value copied into the
 * receiver's buffer, a deadline's timeout) must reach a fiber that some
 * worker runs; a fiber that shutdown abandons must be one no waker can
 * take, so that the waker goes on to the next waiter.  The three ways it
 * went wrong, each checked over many rounds:
 *   - a foreign thread's wake between the closing of the gate and the
 *     abandonment: the wake failed after the hand-over, so the mutex
 *     stayed "handed" to a fiber that never ran (the thread queued behind
 *     it waited for ever) and a sent value vanished;
 *   - a fiber still running while the workers stopped woke another onto
 *     a worker that had exited: its send returned 0 and the receiver
 *     never ran;
 *   - a deadline that fired while the workers stopped did the same, and
 *     left its waiter linked, so destroy said EBUSY for good.
 * The driver triggers each race from the runtime's own shutdown phases
 * (fb_rt_accepting, fb_rt_open), so the window is hit in every round.
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
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "sched/sched.h"

/* When a foreign thread acts during the shutdown. */
enum phase {
	CREATES_REFUSED, /* fb_rt_accepting false: fibers still run */
	GATE_CLOSED,	 /* fb_rt_open false: every blocked fiber held */
};

static void wait_phase(enum phase p)
{
	atomic_bool *flag = p == CREATES_REFUSED ? &fb_rt_accepting :
						   &fb_rt_open;

	while (fb_load_seqcst(flag))
		sched_yield();
}

/* wait_until - poll @flag for at most 10 s; returns whether it came. */
static bool wait_until(atomic_int *flag)
{
	for (int i = 0; i < 10000 && !atomic_load(flag); i++)
		usleep(1000);
	return atomic_load(flag);
}

static void detached(void *(*fn)(void *), void *arg)
{
	fiber_attr_t a;
	fiber_t f;

	assert_int_equal(fiber_attr_init(&a), 0);
	assert_int_equal(fiber_attr_setstacksize(&a, TEST_STACK), 0);
	assert_int_equal(fiber_attr_setdetachstate(&a, FIBER_CREATE_DETACHED),
			 0);
	assert_int_equal(fiber_create(&f, &a, fn, arg), 0);
}

/* ---- a mutex unlocked by a foreign thread during the shutdown ---- */

static fiber_mutex_t mtx;
static atomic_int queued, t1_locked, t2_got;
static enum phase unlock_phase;

static void *lock_unlock(void *arg)
{
	(void)arg;
	atomic_fetch_add(&queued, 1);
	fiber_mutex_lock(&mtx);
	fiber_mutex_unlock(&mtx);
	return NULL;
}

static void *t1_holder(void *arg)
{
	(void)arg;
	assert_int_equal(fiber_mutex_lock(&mtx), 0);
	atomic_store(&t1_locked, 1);
	wait_phase(unlock_phase);
	assert_int_equal(fiber_mutex_unlock(&mtx), 0);
	return NULL;
}

static void *t2_behind(void *arg)
{
	(void)arg;
	atomic_fetch_add(&queued, 1);
	assert_int_equal(fiber_mutex_lock(&mtx), 0);
	atomic_store(&t2_got, 1);
	assert_int_equal(fiber_mutex_unlock(&mtx), 0);
	return NULL;
}

static void mutex_round(enum phase p)
{
	pthread_t t1, t2;
	int rc;

	unlock_phase = p;
	atomic_store(&queued, 0);
	atomic_store(&t1_locked, 0);
	atomic_store(&t2_got, 0);
	assert_int_equal(fiber_mutex_init(&mtx), 0);
	runtime_start(4);
	assert_int_equal(pthread_create(&t1, NULL, t1_holder, NULL), 0);
	while (!atomic_load(&t1_locked))
		usleep(100);
	for (int i = 0; i < 4; i++)
		detached(lock_unlock, NULL);
	while (atomic_load(&queued) < 4)
		usleep(100);
	usleep(5000); /* the fibers park, then the thread queues */
	assert_int_equal(pthread_create(&t2, NULL, t2_behind, NULL), 0);
	while (atomic_load(&queued) < 5)
		usleep(100);
	usleep(5000);
	rc = fiber_shutdown();
	assert_true(rc == 0 || rc == EBUSY);
	assert_int_equal(pthread_join(t1, NULL), 0);
	/* The thread behind the fibers gets the mutex: from the last fiber
	 * that ran, or from the unlock, past the abandoned ones. */
	assert_true(wait_until(&t2_got));
	assert_int_equal(pthread_join(t2, NULL), 0);
	assert_int_equal(fiber_mutex_destroy(&mtx), 0);
}

static void test_shutdown_foreign_unlock_reaches_the_thread_behind(void **state)
{
	(void)state;
	for (int r = 0; r < 10; r++) {
		mutex_round(CREATES_REFUSED);
		mutex_round(GATE_CLOSED);
	}
}

/* ---- a value relayed by fibers while the shutdown runs ---- */

/*
 * Fiber A waits on @c1 (capacity 1) and relays what it gets to fiber B
 * over the unbuffered @c2, after some work; a foreign thread sends to @c1
 * once creates are refused, after a delay that moves across the rounds.
 * Every send that returned 0 was received: the foreign one by A (or the
 * value is still in @c1), A's by B.
 */
static fiber_chan_t *c1, *c2;
static atomic_int a_got, a_sent, b_got, sent_at;
static atomic_int shutting;
static int relay_delay_us;

static void spin_us(unsigned int us)
{
	uint64_t end = fiber_now() + us * 1000ull;

	while (fiber_now() < end)
		;
}

static void *relay_a(void *arg)
{
	int v;

	(void)arg;
	if (fiber_chan_recv(c1, &v))
		return NULL;
	atomic_store(&a_got, v);
	spin_us(2000); /* still running while the workers would stop */
	if (fiber_chan_send(c2, &v) == 0)
		atomic_store(&a_sent, v);
	return NULL;
}

static void *relay_b(void *arg)
{
	int v;

	(void)arg;
	if (fiber_chan_recv(c2, &v) == 0)
		atomic_store(&b_got, v);
	return NULL;
}

static void *late_sender(void *arg)
{
	int v = 42;

	(void)arg;
	if (relay_delay_us >= 0) {
		wait_phase(CREATES_REFUSED);
		usleep((useconds_t)relay_delay_us);
	} else { /* from the start of the shutdown (its quiet wait) */
		while (!atomic_load(&shutting))
			sched_yield();
		usleep((useconds_t)-relay_delay_us);
	}
	if (fiber_chan_send(c1, &v) == 0)
		atomic_store(&sent_at, 1);
	return NULL;
}

static void test_shutdown_value_sent_during_it_is_never_lost(void **state)
{
	int lost = 0, relayed = 0;

	(void)state;
	for (int r = 0; r < 24; r++) {
		pthread_t t;
		int v = 0;

		/* Half the rounds from the refusal of creates, half from
		 * fiber_shutdown()'s call, 30 to 58 ms into its quiet wait. */
		relay_delay_us = r % 2 ? (r / 2) * 100 : -(30000 + r * 1000);
		atomic_store(&shutting, 0);
		atomic_store(&a_got, 0);
		atomic_store(&a_sent, 0);
		atomic_store(&b_got, 0);
		atomic_store(&sent_at, 0);
		assert_int_equal(fiber_chan_create(&c1, sizeof(int), 1), 0);
		assert_int_equal(fiber_chan_create(&c2, sizeof(int), 0), 0);
		runtime_start(4);
		detached(relay_b, NULL);
		detached(relay_a, NULL);
		usleep(5000);
		assert_int_equal(pthread_create(&t, NULL, late_sender, NULL),
				 0);
		atomic_store(&shutting, 1);
		(void)fiber_shutdown();
		assert_int_equal(pthread_join(t, NULL), 0);
		assert_true(atomic_load(&sent_at));
		if (!atomic_load(&a_got) && fiber_chan_tryrecv(c1, &v) == 0 &&
		    v == 42)
			; /* held before it came: still in c1 */
		else if (atomic_load(&a_got) != 42)
			lost++;
		else if (atomic_load(&a_sent) && atomic_load(&b_got) != 42)
			lost++;
		else if (atomic_load(&b_got) == 42)
			relayed++;
		/* Abandoned waiters do not keep a channel busy. */
		assert_int_equal(fiber_chan_destroy(c1), 0);
		assert_int_equal(fiber_chan_destroy(c2), 0);
	}
	print_message("# relayed %d of 24, lost %d\n", relayed, lost);
	assert_int_equal(lost, 0);
}

/* ---- deadlines that fall due while the shutdown runs ---- */

/*
 * Fibers wait on semaphores with deadlines spread over the shutdown's
 * own length.  Each either returns (it ran) or is abandoned with its
 * waiter claimed, which destroy ignores: destroy never says EBUSY.
 */
#define NSEM 1000
#define SEM_ROUNDS 16
static fiber_sem_t sems[NSEM];
static atomic_int returned[NSEM];
static uint64_t sem_base;

static void *timed_sem(void *arg)
{
	int i = (int)(intptr_t)arg;

	/* One deadline every 50 us, over 50 ms from the quiet wait's end. */
	fiber_sem_wait_until(&sems[i], sem_base + 50000ull * (uint64_t)i);
	atomic_store(&returned[i], 1);
	return NULL;
}

static void
test_shutdown_deadlines_due_during_it_leave_objects_free(void **state)
{
	int finished = 0, busy = 0;

	(void)state;
	for (int r = 0; r < SEM_ROUNDS; r++) {
		runtime_start(4);
		sem_base = fiber_now() + 35000000ull;
		for (int i = 0; i < NSEM; i++) {
			atomic_store(&returned[i], 0);
			assert_int_equal(fiber_sem_init(&sems[i], 0), 0);
			detached(timed_sem, (void *)(intptr_t)i);
		}
		(void)fiber_shutdown();
		for (int i = 0; i < NSEM; i++) {
			finished += atomic_load(&returned[i]);
			busy += fiber_sem_destroy(&sems[i]) == EBUSY;
		}
	}
	print_message("# %d of %d waits ended before the stop, %d busy\n",
		      finished, SEM_ROUNDS * NSEM, busy);
	assert_int_equal(busy, 0);
}

/* ---- a fiber that yields until one on a paused worker runs ---- */

/*
 * Y, pinned to worker 0, waits on a semaphore and sets a flag; X, pinned
 * to worker 1, sleeps 300 us, posts, and yields until the flag is set.
 * A shutdown that paused worker 0 with Y queued there and then waited
 * for worker 1, busy with X, to pause too, waited for ever.
 */
static fiber_sem_t sy;
static atomic_int y_flag;

static void *y_sets(void *arg)
{
	(void)arg;
	while (!fiber_sem_wait(&sy))
		atomic_store(&y_flag, 1);
	return NULL;
}

static void *x_yields(void *arg)
{
	(void)arg;
	for (;;) {
		fiber_usleep(300);
		fiber_sem_post(&sy);
		while (!atomic_load(&y_flag))
			fiber_yield();
		atomic_store(&y_flag, 0);
	}
	return NULL;
}

static fiber_t pinned(void *(*fn)(void *), int worker)
{
	fiber_workerset_t set;
	fiber_attr_t a;
	fiber_t f;

	fiber_workerset_zero(&set);
	fiber_workerset_add(&set, worker);
	assert_int_equal(fiber_attr_init(&a), 0);
	assert_int_equal(fiber_attr_setstacksize(&a, TEST_STACK), 0);
	assert_int_equal(fiber_attr_setaffinity(&a, sizeof(set), &set), 0);
	assert_int_equal(fiber_create(&f, &a, fn, NULL), 0);
	return f;
}

static void test_shutdown_ends_beside_a_yielding_fiber(void **state)
{
	(void)state;
	for (int r = 0; r < 20; r++) {
		assert_int_equal(fiber_sem_init(&sy, 0), 0);
		atomic_store(&y_flag, 0);
		runtime_start(2);
		pinned(y_sets, 0);
		pinned(x_yields, 1);
		usleep(30000);
		alarm(60); /* a hang fails the test (SIGALRM) */
		assert_int_equal(fiber_shutdown(), EBUSY);
		alarm(0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_shutdown_foreign_unlock_reaches_the_thread_behind),
		TEST(test_shutdown_value_sent_during_it_is_never_lost),
		TEST(test_shutdown_deadlines_due_during_it_leave_objects_free),
		TEST(test_shutdown_ends_beside_a_yielding_fiber),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
