/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-signal.c - fiber_signal_wait(): a fiber gets a process-directed
 * signal that every thread blocks, while its worker runs another fiber (one
 * worker); a signal already pending is returned at once; a deadline gone
 * with nothing pending gives ETIMEDOUT; a cancellation ECANCELED; a set
 * with a signal the thread does not block, an empty set and NULL give
 * EINVAL.  SIGUSR1 is blocked in main() before the runtime starts, so the
 * workers inherit the mask.
 */
#include <fiber.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

static atomic_int waiting, ticks;

static int setup(void **state)
{
	struct fiber_config c = { .workers = 1 };

	(void)state;
	return fiber_init(&c);
}

static int teardown(void **state)
{
	(void)state;
	return fiber_shutdown();
}

struct wait {
	sigset_t set;
	uint64_t deadline;
	int rc, sig;
};

static void *waiter(void *p)
{
	struct wait *w = p;

	atomic_store(&waiting, 1);
	w->rc = fiber_signal_wait(&w->set, &w->sig, w->deadline);
	return NULL;
}

static void *ticker(void *arg)
{
	(void)arg;
	while (atomic_load(&waiting) != 2) {
		atomic_fetch_add(&ticks, 1);
		fiber_yield();
	}
	return NULL;
}

static void test_signal_wait_gets_a_signal_worker_runs_on(void **state)
{
	struct wait w = { .deadline = FIBER_NO_DEADLINE, .rc = -1 };
	fiber_t f, t;

	(void)state;
	sigemptyset(&w.set);
	sigaddset(&w.set, SIGUSR1);
	atomic_store(&waiting, 0);
	assert_int_equal(fiber_create(&f, NULL, waiter, &w), 0);
	assert_int_equal(fiber_create(&t, NULL, ticker, NULL), 0);
	while (atomic_load(&waiting) == 0 || atomic_load(&ticks) < 100)
		usleep(1000); /* the one worker runs the ticker meanwhile */
	assert_int_equal(kill(getpid(), SIGUSR1), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	atomic_store(&waiting, 2);
	assert_int_equal(fiber_join(t, NULL), 0);
	assert_int_equal(w.rc, 0);
	assert_int_equal(w.sig, SIGUSR1);
}

static void test_signal_wait_pending_deadline_and_cancel(void **state)
{
	struct wait w = { .deadline = 0, .rc = -1 };
	fiber_t f;

	(void)state;
	sigemptyset(&w.set);
	sigaddset(&w.set, SIGUSR1);
	assert_int_equal(kill(getpid(), SIGUSR1), 0); /* pending */
	assert_int_equal(fiber_create(&f, NULL, waiter, &w), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(w.rc, 0);
	assert_int_equal(w.sig, SIGUSR1);
	w.rc = -1; /* nothing pending, deadline gone */
	assert_int_equal(fiber_create(&f, NULL, waiter, &w), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(w.rc, ETIMEDOUT);
	w.rc = -1;
	w.deadline = FIBER_NO_DEADLINE;
	atomic_store(&waiting, 0);
	assert_int_equal(fiber_create(&f, NULL, waiter, &w), 0);
	while (!atomic_load(&waiting))
		usleep(1000);
	assert_int_equal(fiber_cancel(f), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(w.rc, ECANCELED);
}

/*
 * One fiber waits three times in a row.  Each wait opens a signalfd that
 * gets the number the last one had: the poller must not take it for the
 * fd it already watches (fiber_signal_wait closes it with fiber_close),
 * or the second wait never sees its signal.  The deadline only bounds
 * that failure, which then shows as ETIMEDOUT.
 */
struct waits {
	sigset_t set;
	atomic_int round;
	int rc[3], sig[3];
};

static void *waiter3(void *p)
{
	struct waits *w = p;

	for (int i = 0; i < 3; i++) {
		atomic_store(&w->round, i + 1);
		w->rc[i] = fiber_signal_wait(&w->set, &w->sig[i],
					     fiber_now() + 30000000000ull);
	}
	return NULL;
}

static void test_signal_wait_again_and_again(void **state)
{
	struct waits w = { .rc = { -1, -1, -1 } };
	fiber_t f;

	(void)state;
	sigemptyset(&w.set);
	sigaddset(&w.set, SIGUSR1);
	assert_int_equal(fiber_create(&f, NULL, waiter3, &w), 0);
	for (int i = 0; i < 3; i++) {
		while (atomic_load(&w.round) != i + 1)
			usleep(1000);
		usleep(20000); /* most likely parked by now; either way */
		assert_int_equal(kill(getpid(), SIGUSR1), 0);
	}
	assert_int_equal(fiber_join(f, NULL), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(w.rc[i], 0);
		assert_int_equal(w.sig[i], SIGUSR1);
	}
}

static void test_signal_wait_refuses_unblocked_signals(void **state)
{
	sigset_t set;
	int sig = 0;

	(void)state;
	sigemptyset(&set);
	assert_int_equal(fiber_signal_wait(&set, &sig, 0), EINVAL);
	sigaddset(&set, SIGUSR2); /* not blocked */
	assert_int_equal(fiber_signal_wait(&set, &sig, 0), EINVAL);
	assert_int_equal(fiber_signal_wait(NULL, &sig, 0), EINVAL);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	assert_int_equal(fiber_signal_wait(&set, NULL, 0), EINVAL);
	/* From a thread that is not a worker it works as well. */
	assert_int_equal(fiber_signal_wait(&set, &sig, 0), ETIMEDOUT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_signal_wait_gets_a_signal_worker_runs_on),
		cmocka_unit_test(test_signal_wait_pending_deadline_and_cancel),
		cmocka_unit_test(test_signal_wait_again_and_again),
		cmocka_unit_test(test_signal_wait_refuses_unblocked_signals),
	};
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	return cmocka_run_group_tests(tests, setup, teardown);
}
