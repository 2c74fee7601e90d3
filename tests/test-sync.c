/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-sync.c - the blocking synchronisation objects through the public
 * API: mutex, condition variable, semaphore, reader-writer lock, barrier
 * and once, used by fibers on 1 to 4 workers and by foreign threads.
 *
 * A failed cmocka assertion longjmps to the test function, which must not
 * happen from a fiber's stack; fibers therefore count what they saw
 * (errors, overlaps, wakeups) and the test thread asserts on the counts.
 * Where the test thread needs fibers to be blocked before it acts, it
 * waits for a count they publish under the object's own lock, never for
 * a time.
 */
#include <fiber.h>

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

/* Start @n fibers running @fn((void *)i) for i in 0..n-1. */
static fiber_t *spawn(unsigned int n, size_t stack, void *(*fn)(void *))
{
	fiber_t *f = calloc(n, sizeof(*f));
	fiber_attr_t attr;

	assert_non_null(f);
	assert_int_equal(fiber_attr_init(&attr), 0);
	assert_int_equal(fiber_attr_setstacksize(&attr, stack), 0);
	for (unsigned int i = 0; i < n; i++)
		assert_int_equal(fiber_create(&f[i], &attr, fn,
					      (void *)(uintptr_t)i),
				 0);
	fiber_attr_destroy(&attr);
	return f;
}

static void join_all(fiber_t *f, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	free(f);
}

/* Test thread: wait until *@v reaches @target (checked under @m). */
static void wait_count(fiber_mutex_t *m, const int *v, int target)
{
	int seen;

	for (;;) {
		assert_int_equal(fiber_mutex_lock(m), 0);
		seen = *v;
		assert_int_equal(fiber_mutex_unlock(m), 0);
		if (seen >= target)
			return;
		usleep(1000);
	}
}

/* ---- mutex ---- */

#define COUNTER_FIBERS 1000
#define COUNTER_ITERS 1000

static fiber_mutex_t counter_lock = FIBER_MUTEX_INITIALIZER;
static long counter;		  /* counter_lock */
static atomic_int counter_inside; /* fibers between lock and unlock */
static atomic_int counter_errors;

static void *counter_fiber(void *arg)
{
	unsigned int id = (unsigned int)(uintptr_t)arg;

	for (unsigned int i = 0; i < COUNTER_ITERS; i++) {
		if (fiber_mutex_lock(&counter_lock) != 0) {
			atomic_fetch_add(&counter_errors, 1);
			continue;
		}
		if (atomic_fetch_add(&counter_inside, 1) != 0)
			atomic_fetch_add(&counter_errors, 1);
		counter++;
		/* Force contention: let others run into the held lock. */
		if ((i + id) % 97 == 0)
			fiber_yield();
		atomic_fetch_sub(&counter_inside, 1);
		if (fiber_mutex_unlock(&counter_lock) != 0)
			atomic_fetch_add(&counter_errors, 1);
	}
	return NULL;
}

static void test_mutex_counter_exact_on_1_to_4_workers(void **state)
{
	fiber_t *f;

	(void)state;
	for (unsigned int workers = 1; workers <= 4; workers++) {
		counter = 0;
		runtime_start(workers);
		f = spawn(COUNTER_FIBERS, TEST_STACK, counter_fiber);
		join_all(f, COUNTER_FIBERS);
		runtime_stop();
		assert_int_equal(atomic_load(&counter_errors), 0);
		assert_int_equal(counter, (long)COUNTER_FIBERS * COUNTER_ITERS);
	}
	assert_int_equal(fiber_mutex_destroy(&counter_lock), 0);
}

static fiber_mutex_t err_lock;
static atomic_int err_result;

static void *unlock_foreign_held(void *arg)
{
	(void)arg;
	atomic_store(&err_result, fiber_mutex_unlock(&err_lock));
	return NULL;
}

static void test_mutex_errors_trylock_eperm_edeadlk_ebusy(void **state)
{
	fiber_t *f;

	(void)state;
	runtime_start(2);
	assert_int_equal(fiber_mutex_init(&err_lock), 0);
	assert_int_equal(fiber_mutex_unlock(&err_lock), EPERM);
	assert_int_equal(fiber_mutex_trylock(&err_lock), 0);
	assert_int_equal(fiber_mutex_trylock(&err_lock), EBUSY);
	assert_int_equal(fiber_mutex_lock(&err_lock), EDEADLK);
	assert_int_equal(fiber_mutex_destroy(&err_lock), EBUSY);

	/* A fiber is not the owner of what the test thread holds. */
	atomic_store(&err_result, -1);
	f = spawn(1, TEST_STACK, unlock_foreign_held);
	join_all(f, 1);
	assert_int_equal(atomic_load(&err_result), EPERM);

	assert_int_equal(fiber_mutex_unlock(&err_lock), 0);
	assert_int_equal(fiber_mutex_unlock(&err_lock), EPERM);
	assert_int_equal(fiber_mutex_destroy(&err_lock), 0);
	assert_int_equal(fiber_mutex_lock(NULL), EINVAL);
	runtime_stop();
}

/* A fiber that exits holding a lock, then fibers created after it, which
 * may get its recycled descriptor: none of them owns the lock. */
static fiber_mutex_t dead_lock = FIBER_MUTEX_INITIALIZER;
static fiber_rwlock_t dead_rw = FIBER_RWLOCK_INITIALIZER;
static atomic_int dead_errors;

static void *take_and_die(void *arg)
{
	(void)arg;
	if (fiber_mutex_lock(&dead_lock) || fiber_rwlock_wrlock(&dead_rw))
		atomic_fetch_add(&dead_errors, 1);
	return NULL; /* exits holding both: a misuse */
}

static void *not_the_owner(void *arg)
{
	(void)arg;
	if (fiber_mutex_unlock(&dead_lock) != EPERM ||
	    fiber_mutex_trylock(&dead_lock) != EBUSY ||
	    fiber_rwlock_unlock(&dead_rw) != EPERM ||
	    fiber_rwlock_trywrlock(&dead_rw) != EBUSY)
		atomic_fetch_add(&dead_errors, 1);
	return NULL;
}

/* Creates and joins from a fiber, so that a joined descriptor goes to the
 * worker's cache and the next create takes it back. */
static void *recycle_driver(void *arg)
{
	fiber_t f;

	(void)arg;
	if (fiber_create(&f, NULL, take_and_die, NULL) || fiber_join(f, NULL))
		atomic_fetch_add(&dead_errors, 1);
	for (int i = 0; i < 8; i++)
		if (fiber_create(&f, NULL, not_the_owner, NULL) ||
		    fiber_join(f, NULL))
			atomic_fetch_add(&dead_errors, 1);
	return NULL;
}

static void test_mutex_owner_is_not_inherited_by_a_new_fiber(void **state)
{
	fiber_t *f;

	(void)state;
	atomic_store(&dead_errors, 0);
	runtime_start(1);
	f = spawn(1, TEST_STACK, recycle_driver);
	join_all(f, 1);
	runtime_stop();
	assert_int_equal(atomic_load(&dead_errors), 0);
}

/* ---- condition variable ---- */

/* The 10,000; under TSan each fiber carries a heavy shadow
 * context and 10,000 of them exhaust vm.max_map_count, so TSan runs
 * 2,000 (the behaviour under test is the same). */
#if defined(__SANITIZE_THREAD__)
#define COND_FIBERS 2000
#else
#define COND_FIBERS 10000
#endif

static fiber_mutex_t cv_lock = FIBER_MUTEX_INITIALIZER;
static fiber_cond_t cv = FIBER_COND_INITIALIZER;
static int cv_waiting; /* cv_lock: fibers that reached the wait */
static int cv_go;      /* cv_lock */
static int cv_woken;   /* cv_lock */
static int cv_tokens;  /* cv_lock */
static atomic_int cv_errors;

static void *broadcast_waiter(void *arg)
{
	(void)arg;
	fiber_mutex_lock(&cv_lock);
	cv_waiting++;
	while (!cv_go)
		if (fiber_cond_wait(&cv, &cv_lock) != 0)
			atomic_fetch_add(&cv_errors, 1);
	cv_woken++;
	fiber_mutex_unlock(&cv_lock);
	return NULL;
}

static void test_cond_broadcast_wakes_10000_fibers(void **state)
{
	fiber_t *f;

	(void)state;
	runtime_start(2);
	cv_waiting = cv_go = cv_woken = 0;
	f = spawn(COND_FIBERS, 64 * 1024, broadcast_waiter);
	/* Each waiter queues before it releases the mutex. */
	wait_count(&cv_lock, &cv_waiting, COND_FIBERS);
	assert_int_equal(fiber_cond_destroy(&cv), EBUSY);

	assert_int_equal(fiber_mutex_lock(&cv_lock), 0);
	assert_int_equal(cv_woken, 0);
	cv_go = 1;
	assert_int_equal(fiber_cond_broadcast(&cv), 0);
	assert_int_equal(fiber_mutex_unlock(&cv_lock), 0);
	join_all(f, COND_FIBERS);

	assert_int_equal(cv_woken, COND_FIBERS);
	assert_int_equal(atomic_load(&cv_errors), 0);
	assert_int_equal(fiber_cond_destroy(&cv), 0);
	runtime_stop();
}

static void *token_waiter(void *arg)
{
	(void)arg;
	fiber_mutex_lock(&cv_lock);
	cv_waiting++;
	while (cv_tokens == 0)
		fiber_cond_wait(&cv, &cv_lock);
	cv_tokens--;
	cv_woken++;
	fiber_mutex_unlock(&cv_lock);
	return NULL;
}

static void test_cond_signal_wakes_a_waiter_per_token(void **state)
{
	enum { N = 200 };
	fiber_t *f;

	(void)state;
	runtime_start(3);
	cv_waiting = cv_woken = cv_tokens = 0;
	f = spawn(N, TEST_STACK, token_waiter);
	wait_count(&cv_lock, &cv_waiting, N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(fiber_mutex_lock(&cv_lock), 0);
		cv_tokens++;
		assert_int_equal(fiber_cond_signal(&cv), 0);
		assert_int_equal(fiber_mutex_unlock(&cv_lock), 0);
	}
	join_all(f, N);
	assert_int_equal(cv_woken, N);
	assert_int_equal(cv_tokens, 0);
	assert_int_equal(fiber_cond_destroy(&cv), 0);
	runtime_stop();
}

static void test_cond_wait_without_mutex_is_eperm(void **state)
{
	fiber_mutex_t m = FIBER_MUTEX_INITIALIZER;
	fiber_cond_t c = FIBER_COND_INITIALIZER;

	(void)state;
	assert_int_equal(fiber_cond_init(&c), 0);
	assert_int_equal(fiber_cond_wait(&c, &m), EPERM);
	assert_int_equal(fiber_cond_signal(&c), 0);
	assert_int_equal(fiber_cond_broadcast(&c), 0);
	assert_int_equal(fiber_cond_wait(NULL, &m), EINVAL);
	assert_int_equal(fiber_cond_destroy(&c), 0);
}

/* ---- semaphore ---- */

static void test_sem_errors_and_counts(void **state)
{
	fiber_sem_t s;
	int v = -1;

	(void)state;
	assert_int_equal(fiber_sem_init(&s, FIBER_SEM_VALUE_MAX + 1u), EINVAL);
	assert_int_equal(fiber_sem_init(&s, 0), 0);
	assert_int_equal(fiber_sem_trywait(&s), EAGAIN);
	assert_int_equal(fiber_sem_post(&s), 0);
	assert_int_equal(fiber_sem_post(&s), 0);
	assert_int_equal(fiber_sem_getvalue(&s, &v), 0);
	assert_int_equal(v, 2);
	assert_int_equal(fiber_sem_trywait(&s), 0);
	assert_int_equal(fiber_sem_wait(&s), 0);
	assert_int_equal(fiber_sem_trywait(&s), EAGAIN);
	assert_int_equal(fiber_sem_destroy(&s), 0);

	assert_int_equal(fiber_sem_init(&s, FIBER_SEM_VALUE_MAX), 0);
	assert_int_equal(fiber_sem_post(&s), EOVERFLOW);
	assert_int_equal(fiber_sem_getvalue(&s, &v), 0);
	assert_int_equal(v, FIBER_SEM_VALUE_MAX);
	assert_int_equal(fiber_sem_destroy(&s), 0);
}

#define SEM_PERMITS 3
#define SEM_FIBERS 50
#define SEM_ITERS 200

static fiber_sem_t sem;
static atomic_int sem_inside, sem_max, sem_errors;

static void *sem_user(void *arg)
{
	int in, max;

	(void)arg;
	for (int i = 0; i < SEM_ITERS; i++) {
		if (fiber_sem_wait(&sem) != 0)
			atomic_fetch_add(&sem_errors, 1);
		in = atomic_fetch_add(&sem_inside, 1) + 1;
		max = atomic_load(&sem_max);
		while (in > max &&
		       !atomic_compare_exchange_weak(&sem_max, &max, in))
			;
		fiber_yield();
		atomic_fetch_sub(&sem_inside, 1);
		if (fiber_sem_post(&sem) != 0)
			atomic_fetch_add(&sem_errors, 1);
	}
	return NULL;
}

static void test_sem_admits_at_most_its_count(void **state)
{
	fiber_t *f;
	int v;

	(void)state;
	runtime_start(4);
	assert_int_equal(fiber_sem_init(&sem, SEM_PERMITS), 0);
	f = spawn(SEM_FIBERS, TEST_STACK, sem_user);
	join_all(f, SEM_FIBERS);
	assert_int_equal(atomic_load(&sem_errors), 0);
	assert_true(atomic_load(&sem_max) <= SEM_PERMITS);
	assert_true(atomic_load(&sem_max) >= 1);
	assert_int_equal(fiber_sem_getvalue(&sem, &v), 0);
	assert_int_equal(v, SEM_PERMITS);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
	runtime_stop();
}

static atomic_int sem_taken;

static void *sem_taker(void *arg)
{
	(void)arg;
	if (fiber_sem_wait(&sem) == 0)
		atomic_fetch_add(&sem_taken, 1);
	return NULL;
}

static void test_sem_wait_blocks_until_post(void **state)
{
	enum { N = 64 };
	fiber_t *f;
	int v;

	(void)state;
	runtime_start(2);
	assert_int_equal(fiber_sem_init(&sem, 0), 0);
	f = spawn(N, TEST_STACK, sem_taker);
	for (int i = 0; i < N; i++)
		assert_int_equal(fiber_sem_post(&sem), 0);
	join_all(f, N);
	assert_int_equal(atomic_load(&sem_taken), N);
	assert_int_equal(fiber_sem_getvalue(&sem, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(fiber_sem_destroy(&sem), 0);
	runtime_stop();
}

/* ---- wait group ---- */

static fiber_wg_t wg;
static atomic_int wg_finished, wg_seen, wg_errors;

static void test_wg_errors_and_counts(void **state)
{
	(void)state;
	assert_int_equal(fiber_wg_init(NULL), EINVAL);
	assert_int_equal(fiber_wg_add(NULL, 1), EINVAL);
	assert_int_equal(fiber_wg_done(NULL), EINVAL);
	assert_int_equal(fiber_wg_wait(NULL), EINVAL);
	assert_int_equal(fiber_wg_wait_until(NULL, 0), EINVAL);
	assert_int_equal(fiber_wg_destroy(NULL), EINVAL);
	assert_int_equal(fiber_wg_init(&wg), 0);
	assert_int_equal(fiber_wg_done(&wg), EINVAL); /* below 0 */
	assert_int_equal(fiber_wg_wait(&wg), 0);      /* still 0 */
	assert_int_equal(fiber_wg_add(&wg, 3), 0);
	assert_int_equal(fiber_wg_add(&wg, -4), EINVAL); /* unchanged: 3 */
	assert_int_equal(fiber_wg_add(&wg, INT_MAX), EOVERFLOW);
	assert_int_equal(fiber_wg_wait_until(&wg, 0), ETIMEDOUT);
	assert_int_equal(fiber_wg_add(&wg, -2), 0);
	assert_int_equal(fiber_wg_wait_until(&wg, fiber_now()), ETIMEDOUT);
	assert_int_equal(fiber_wg_destroy(&wg), 0); /* 1 left, nobody waits */
	assert_int_equal(fiber_wg_done(&wg), 0);
	assert_int_equal(fiber_wg_wait_until(&wg, 0), 0); /* 0: at once */
	assert_int_equal(fiber_wg_done(&wg), EINVAL);
	assert_int_equal(fiber_wg_destroy(&wg), 0);
}

static void *wg_worker(void *arg)
{
	(void)arg;
	fiber_yield();
	atomic_fetch_add(&wg_finished, 1);
	if (fiber_wg_done(&wg))
		atomic_fetch_add(&wg_errors, 1);
	return NULL;
}

static void *wg_waiter(void *arg)
{
	(void)arg;
	if (fiber_wg_wait(&wg))
		atomic_fetch_add(&wg_errors, 1);
	/* every done() came before this wait returned */
	if (atomic_load(&wg_finished) == 64)
		atomic_fetch_add(&wg_seen, 1);
	return NULL;
}

/* 64 fibers finish, 8 fibers and the test thread wait: every waiter
 * returns, and only after the 64th done(); the group is reused for a
 * second round. */
static void test_wg_waiters_return_after_the_last_done(void **state)
{
	fiber_t *w, *f;

	(void)state;
	runtime_start(2);
	for (int round = 0; round < 2; round++) {
		atomic_store(&wg_finished, 0);
		atomic_store(&wg_seen, 0);
		assert_int_equal(fiber_wg_add(&wg, 64), 0);
		w = spawn(8, TEST_STACK, wg_waiter);
		/* destroy only checks: EBUSY once a waiter is queued */
		while (fiber_wg_destroy(&wg) != EBUSY)
			sched_yield();
		f = spawn(64, TEST_STACK, wg_worker);
		assert_int_equal(fiber_wg_wait(&wg), 0);
		assert_int_equal(atomic_load(&wg_finished), 64);
		join_all(f, 64);
		join_all(w, 8);
		assert_int_equal(atomic_load(&wg_seen), 8);
	}
	assert_int_equal(atomic_load(&wg_errors), 0);
	assert_int_equal(fiber_wg_destroy(&wg), 0);
	runtime_stop();
}

/* ---- reader-writer lock ---- */

static fiber_rwlock_t rw = FIBER_RWLOCK_INITIALIZER;
static atomic_int rw_readers, rw_writers, rw_errors;
static long rw_value; /* written under the write lock */

#define RW_READERS 8

static void *reader_meets_all(void *arg)
{
	long spins = 0;

	(void)arg;
	if (fiber_rwlock_rdlock(&rw) != 0) {
		atomic_fetch_add(&rw_errors, 1);
		return NULL;
	}
	atomic_fetch_add(&rw_readers, 1);
	/* Only possible if every reader is inside at once. */
	while (atomic_load(&rw_readers) < RW_READERS) {
		if (++spins > 100000000) {
			atomic_fetch_add(&rw_errors, 1);
			break;
		}
		fiber_yield();
	}
	if (fiber_rwlock_unlock(&rw) != 0)
		atomic_fetch_add(&rw_errors, 1);
	return NULL;
}

static void test_rwlock_readers_are_inside_together(void **state)
{
	fiber_t *f;

	(void)state;
	runtime_start(2);
	atomic_store(&rw_readers, 0);
	f = spawn(RW_READERS, TEST_STACK, reader_meets_all);
	join_all(f, RW_READERS);
	assert_int_equal(atomic_load(&rw_errors), 0);
	assert_int_equal(fiber_rwlock_destroy(&rw), 0);
	runtime_stop();
}

#define RW_ITERS 500

static void *rw_mixed(void *arg)
{
	unsigned int id = (unsigned int)(uintptr_t)arg;
	bool writer = id % 4 == 0;

	for (int i = 0; i < RW_ITERS; i++) {
		if (writer) {
			fiber_rwlock_wrlock(&rw);
			if (atomic_fetch_add(&rw_writers, 1) != 0 ||
			    atomic_load(&rw_readers) != 0)
				atomic_fetch_add(&rw_errors, 1);
			rw_value++;
			if (i % 3 == 0)
				fiber_yield();
			atomic_fetch_sub(&rw_writers, 1);
		} else {
			fiber_rwlock_rdlock(&rw);
			atomic_fetch_add(&rw_readers, 1);
			if (atomic_load(&rw_writers) != 0)
				atomic_fetch_add(&rw_errors, 1);
			if (i % 3 == 0)
				fiber_yield();
			atomic_fetch_sub(&rw_readers, 1);
		}
		if (fiber_rwlock_unlock(&rw) != 0)
			atomic_fetch_add(&rw_errors, 1);
	}
	return NULL;
}

static void test_rwlock_writer_is_exclusive(void **state)
{
	enum { N = 24 };
	fiber_t *f;

	(void)state;
	runtime_start(4);
	atomic_store(&rw_readers, 0);
	atomic_store(&rw_writers, 0);
	rw_value = 0;
	f = spawn(N, TEST_STACK, rw_mixed);
	join_all(f, N);
	assert_int_equal(atomic_load(&rw_errors), 0);
	assert_int_equal(rw_value, (long)(N / 4) * RW_ITERS);
	assert_int_equal(fiber_rwlock_destroy(&rw), 0);
	runtime_stop();
}

static atomic_int rw_result = -1, rw_wrote;

static void *rw_unlock_not_mine(void *arg)
{
	(void)arg;
	atomic_store(&rw_result, fiber_rwlock_unlock(&rw));
	return NULL;
}

static void *rw_writer_once(void *arg)
{
	(void)arg;
	if (fiber_rwlock_wrlock(&rw) != 0)
		atomic_fetch_add(&rw_errors, 1);
	atomic_store(&rw_wrote, 1);
	if (fiber_rwlock_unlock(&rw) != 0)
		atomic_fetch_add(&rw_errors, 1);
	return NULL;
}

static void test_rwlock_errors_and_writer_preference(void **state)
{
	fiber_t *f;
	int err;

	(void)state;
	runtime_start(2);
	assert_int_equal(fiber_rwlock_init(&rw), 0);
	assert_int_equal(fiber_rwlock_unlock(&rw), EPERM);

	assert_int_equal(fiber_rwlock_wrlock(&rw), 0);
	assert_int_equal(fiber_rwlock_tryrdlock(&rw), EBUSY);
	assert_int_equal(fiber_rwlock_trywrlock(&rw), EBUSY);
	assert_int_equal(fiber_rwlock_wrlock(&rw), EDEADLK);
	assert_int_equal(fiber_rwlock_destroy(&rw), EBUSY);
	f = spawn(1, TEST_STACK, rw_unlock_not_mine);
	join_all(f, 1);
	assert_int_equal(atomic_load(&rw_result), EPERM);
	assert_int_equal(fiber_rwlock_unlock(&rw), 0);

	/* Readers share, a writer waits for them. */
	assert_int_equal(fiber_rwlock_rdlock(&rw), 0);
	assert_int_equal(fiber_rwlock_tryrdlock(&rw), 0);
	assert_int_equal(fiber_rwlock_trywrlock(&rw), EBUSY);
	assert_int_equal(fiber_rwlock_unlock(&rw), 0);

	/* Once a writer queues, new readers are refused. */
	f = spawn(1, TEST_STACK, rw_writer_once);
	for (;;) {
		err = fiber_rwlock_tryrdlock(&rw);
		if (err == EBUSY)
			break;
		assert_int_equal(err, 0);
		assert_int_equal(fiber_rwlock_unlock(&rw), 0);
		usleep(1000);
	}
	assert_int_equal(atomic_load(&rw_wrote), 0);
	assert_int_equal(fiber_rwlock_unlock(&rw), 0);
	join_all(f, 1);
	assert_int_equal(atomic_load(&rw_wrote), 1);
	assert_int_equal(atomic_load(&rw_errors), 0);
	assert_int_equal(fiber_rwlock_destroy(&rw), 0);
	runtime_stop();
}

/* ---- barrier ---- */

#define BARRIER_FIBERS 16
#define BARRIER_GENERATIONS 50

static fiber_barrier_t barrier;
static atomic_int bar_arrived[BARRIER_GENERATIONS];
static atomic_int bar_serial[BARRIER_GENERATIONS];
static atomic_int bar_errors;

static void *barrier_fiber(void *arg)
{
	int r;

	(void)arg;
	for (int g = 0; g < BARRIER_GENERATIONS; g++) {
		atomic_fetch_add(&bar_arrived[g], 1);
		r = fiber_barrier_wait(&barrier);
		if (r == FIBER_BARRIER_SERIAL_FIBER)
			atomic_fetch_add(&bar_serial[g], 1);
		else if (r != 0)
			atomic_fetch_add(&bar_errors, 1);
		/* Nobody leaves before everyone of its generation came. */
		if (atomic_load(&bar_arrived[g]) != BARRIER_FIBERS)
			atomic_fetch_add(&bar_errors, 1);
		if ((g + (int)(uintptr_t)arg) % 5 == 0)
			fiber_yield();
	}
	return NULL;
}

static void test_barrier_one_serial_per_generation(void **state)
{
	fiber_barrier_t zero = { { 0 } };
	fiber_t *f;

	(void)state;
	assert_int_equal(fiber_barrier_init(&barrier, 0), EINVAL);
	assert_int_equal(fiber_barrier_wait(&zero), EINVAL);
	runtime_start(3);
	assert_int_equal(fiber_barrier_init(&barrier, BARRIER_FIBERS), 0);
	f = spawn(BARRIER_FIBERS, TEST_STACK, barrier_fiber);
	join_all(f, BARRIER_FIBERS);
	assert_int_equal(atomic_load(&bar_errors), 0);
	for (int g = 0; g < BARRIER_GENERATIONS; g++)
		assert_int_equal(atomic_load(&bar_serial[g]), 1);
	assert_int_equal(fiber_barrier_destroy(&barrier), 0);
	runtime_stop();
}

/* ---- once ---- */

#define ONCE_FIBERS 100

static fiber_once_t once = FIBER_ONCE_INITIALIZER;
static atomic_int once_calls, once_done, once_errors;

static void once_fn(void)
{
	atomic_fetch_add(&once_calls, 1);
	/* Let the other callers arrive while it runs. */
	for (int i = 0; i < 20; i++)
		fiber_yield();
	atomic_store(&once_done, 1);
}

static void *once_caller(void *arg)
{
	(void)arg;
	if (fiber_once(&once, once_fn) != 0)
		atomic_fetch_add(&once_errors, 1);
	if (!atomic_load(&once_done))
		atomic_fetch_add(&once_errors, 1);
	return NULL;
}

static void test_once_runs_once_for_100_fibers(void **state)
{
	fiber_t *f;

	(void)state;
	runtime_start(2);
	f = spawn(ONCE_FIBERS, TEST_STACK, once_caller);
	join_all(f, ONCE_FIBERS);
	assert_int_equal(atomic_load(&once_errors), 0);
	assert_int_equal(atomic_load(&once_calls), 1);
	assert_int_equal(fiber_once(&once, once_fn), 0);
	assert_int_equal(atomic_load(&once_calls), 1);
	assert_int_equal(fiber_once(NULL, once_fn), EINVAL);
	runtime_stop();
}

/* ---- foreign threads ---- */

#define SHARED_FIBERS 8
#define SHARED_ITERS 20000
#define PINGPONG_ROUNDS 10000

static fiber_mutex_t shared_lock = FIBER_MUTEX_INITIALIZER;
static long shared_counter; /* shared_lock */
static fiber_sem_t ping, pong;
static atomic_int foreign_errors;

static void add_shared(void)
{
	for (int i = 0; i < SHARED_ITERS; i++) {
		if (fiber_mutex_lock(&shared_lock) != 0)
			atomic_fetch_add(&foreign_errors, 1);
		shared_counter++;
		if (fiber_mutex_unlock(&shared_lock) != 0)
			atomic_fetch_add(&foreign_errors, 1);
	}
}

static void *shared_fiber(void *arg)
{
	(void)arg;
	add_shared();
	return NULL;
}

static void *shared_thread(void *arg)
{
	(void)arg;
	add_shared();
	return NULL;
}

static void *pong_fiber(void *arg)
{
	(void)arg;
	for (int i = 0; i < PINGPONG_ROUNDS; i++) {
		if (fiber_sem_wait(&ping) != 0 || fiber_sem_post(&pong) != 0)
			atomic_fetch_add(&foreign_errors, 1);
	}
	return NULL;
}

static void *ping_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < PINGPONG_ROUNDS; i++) {
		if (fiber_sem_post(&ping) != 0 || fiber_sem_wait(&pong) != 0)
			atomic_fetch_add(&foreign_errors, 1);
	}
	return NULL;
}

static void test_foreign_thread_shares_mutex_and_sem(void **state)
{
	pthread_t t[2];
	fiber_t *f;
	int v;

	(void)state;
	runtime_start(2);
	assert_int_equal(fiber_sem_init(&ping, 0), 0);
	assert_int_equal(fiber_sem_init(&pong, 0), 0);

	assert_int_equal(pthread_create(&t[0], NULL, shared_thread, NULL), 0);
	assert_int_equal(pthread_create(&t[1], NULL, ping_thread, NULL), 0);
	f = spawn(SHARED_FIBERS, TEST_STACK, shared_fiber);
	join_all(f, SHARED_FIBERS);
	f = spawn(1, TEST_STACK, pong_fiber);
	/* The test thread itself is a third, foreign, user of the mutex. */
	add_shared();
	join_all(f, 1);
	assert_int_equal(pthread_join(t[0], NULL), 0);
	assert_int_equal(pthread_join(t[1], NULL), 0);

	assert_int_equal(atomic_load(&foreign_errors), 0);
	assert_int_equal(shared_counter,
			 (long)(SHARED_FIBERS + 2) * SHARED_ITERS);
	assert_int_equal(fiber_sem_getvalue(&ping, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(fiber_sem_destroy(&ping), 0);
	assert_int_equal(fiber_sem_destroy(&pong), 0);
	assert_int_equal(fiber_mutex_destroy(&shared_lock), 0);
	runtime_stop();
}

/* A thread that never ran a fiber waits on a cond a fiber signals. */
static fiber_mutex_t fc_lock = FIBER_MUTEX_INITIALIZER;
static fiber_cond_t fc_cond = FIBER_COND_INITIALIZER;
static int fc_ready; /* fc_lock */

static void *fc_signaller(void *arg)
{
	(void)arg;
	fiber_mutex_lock(&fc_lock);
	fc_ready = 1;
	fiber_cond_signal(&fc_cond);
	fiber_mutex_unlock(&fc_lock);
	return NULL;
}

static void test_foreign_thread_waits_on_cond(void **state)
{
	fiber_t *f;

	(void)state;
	runtime_start(1);
	assert_int_equal(fiber_mutex_lock(&fc_lock), 0);
	f = spawn(1, TEST_STACK, fc_signaller);
	while (!fc_ready)
		assert_int_equal(fiber_cond_wait(&fc_cond, &fc_lock), 0);
	assert_int_equal(fiber_mutex_unlock(&fc_lock), 0);
	join_all(f, 1);
	assert_int_equal(fiber_cond_destroy(&fc_cond), 0);
	runtime_stop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_mutex_counter_exact_on_1_to_4_workers),
		TEST(test_mutex_errors_trylock_eperm_edeadlk_ebusy),
		TEST(test_mutex_owner_is_not_inherited_by_a_new_fiber),
		TEST(test_cond_broadcast_wakes_10000_fibers),
		TEST(test_cond_signal_wakes_a_waiter_per_token),
		TEST(test_cond_wait_without_mutex_is_eperm),
		TEST(test_sem_errors_and_counts),
		TEST(test_sem_admits_at_most_its_count),
		TEST(test_sem_wait_blocks_until_post),
		TEST(test_wg_errors_and_counts),
		TEST(test_wg_waiters_return_after_the_last_done),
		TEST(test_rwlock_readers_are_inside_together),
		TEST(test_rwlock_writer_is_exclusive),
		TEST(test_rwlock_errors_and_writer_preference),
		TEST(test_barrier_one_serial_per_generation),
		TEST(test_once_runs_once_for_100_fibers),
		TEST(test_foreign_thread_shares_mutex_and_sem),
		TEST(test_foreign_thread_waits_on_cond),
	};

	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
