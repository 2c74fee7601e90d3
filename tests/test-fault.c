/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-fault.c - allocation failures (white-box: fb_fault_fail_nth) over
 * init, create, sync objects, channels, pipes and poller registration.
 * Each test runs one operation with its n-th allocation or stack mapping
 * failing, for n = 1, 2, ... until the operation succeeds, and checks that
 * every failure is ENOMEM or EAGAIN, that the runtime still works after
 * it, and (under ASan's leak checker, ./dev asan) that nothing leaked.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/common.h"
#include "fiber.h"

/* An operation under test: returns 0 (and has undone itself) or an errno. */
typedef int (*op_fn)(void);

static void *ret_arg(void *arg)
{
	return arg;
}

/* The runtime still creates, runs and joins a fiber. */
static void check_alive(void)
{
	void *r = NULL;
	fiber_t f;

	assert_int_equal(fiber_create(&f, NULL, ret_arg, (void *)7L), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_ptr_equal(r, (void *)7L);
}

/*
 * fail_each - run @op with its n-th allocation failing, n = 1, 2, ...,
 * until it succeeds.  Returns how many failure points it had.
 */
static int fail_each(op_fn op, bool alive)
{
	for (long n = 1; n < 10000; n++) {
		int rc;

		fb_fault_fail_nth(n);
		rc = op();
		fb_fault_fail_nth(0);
		if (rc == 0)
			return (int)n - 1;
		if (rc != ENOMEM && rc != EAGAIN)
			fail_msg("allocation %ld failed: errno %d", n, rc);
		if (alive)
			check_alive();
	}
	fail_msg("never succeeded");
	return -1;
}

static int start(void)
{
	struct fiber_config c = { 0 };

	c.workers = 2;
	c.topology = "pack:1 core:2 pu:1";
	return fiber_init(&c);
}

static int op_init(void)
{
	int rc = start();

	if (rc == 0)
		assert_int_equal(fiber_shutdown(), 0);
	return rc;
}

static void test_fault_init_fails_cleanly(void **state)
{
	(void)state;
	assert_true(fail_each(op_init, false) >= 1);
	assert_int_equal(start(), 0);
	check_alive();
	assert_int_equal(fiber_shutdown(), 0);
}

static int op_create(void)
{
	fiber_t f;
	int rc = fiber_create(&f, NULL, ret_arg, NULL);

	if (rc == 0)
		assert_int_equal(fiber_join(f, NULL), 0);
	return rc;
}

static int op_create_affinity(void)
{
	fiber_attr_t a;
	cpu_set_t set;
	fiber_t f;
	int rc;

	CPU_ZERO(&set);
	CPU_SET(1, &set);
	fiber_attr_init(&a);
	fiber_attr_setaffinity(&a, sizeof(set), &set);
	fiber_attr_setstacksize(&a, 96 * 1024); /* not cached: a fresh mmap */
	rc = fiber_create(&f, &a, ret_arg, NULL);
	if (rc == 0)
		assert_int_equal(fiber_join(f, NULL), 0);
	return rc;
}

static void *create_in_fiber(void *arg)
{
	(void)arg;
	return (void *)(long)(fail_each(op_create, true) +
			      fail_each(op_create_affinity, true));
}

static void test_fault_create_fails_cleanly(void **state)
{
	void *r = NULL;
	fiber_t f;

	(void)state;
	assert_int_equal(start(), 0);
	assert_true(fail_each(op_create, true) >= 1);
	assert_true(fail_each(op_create_affinity, true) >= 2);
	/* From a fiber, where the descriptor and stack caches serve. */
	assert_int_equal(fiber_create(&f, NULL, create_in_fiber, NULL), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_true((long)r >= 2);
	check_alive();
	assert_int_equal(fiber_shutdown(), 0);
}

static int op_chan(void)
{
	fiber_chan_t *ch;
	int v = 5, got = 0;
	int rc = fiber_chan_create(&ch, sizeof(int), 4);

	if (rc)
		return rc;
	assert_int_equal(fiber_chan_send(ch, &v), 0);
	assert_int_equal(fiber_chan_recv(ch, &got), 0);
	assert_int_equal(got, 5);
	assert_int_equal(fiber_chan_destroy(ch), 0);
	return 0;
}

static int op_pipe(void)
{
	fiber_pipe_t *p;
	char buf[4];
	size_t done = 0;
	int rc = fiber_pipe_create(&p, 0);

	if (rc)
		return rc;
	assert_int_equal(fiber_pipe_write(p, "abc", 3, &done), 0);
	assert_int_equal(fiber_pipe_read(p, buf, sizeof(buf), &done), 0);
	assert_int_equal(done, 3);
	assert_int_equal(fiber_pipe_destroy(p), 0);
	return 0;
}

static fiber_key_t key;

static void *setspecific_in_fiber(void *arg)
{
	int rc;

	(void)arg;
	fb_fault_fail_nth(1);
	rc = fiber_setspecific(key, &key);
	fb_fault_fail_nth(0);
	if (rc != ENOMEM)
		return (void *)1L;
	if (fiber_setspecific(key, &key) || fiber_getspecific(key) != &key)
		return (void *)2L;
	return NULL;
}

static void *setaffinity_in_fiber(void *arg)
{
	cpu_set_t set;
	int rc;

	(void)arg;
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	fb_fault_fail_nth(1);
	rc = fiber_setaffinity(sizeof(set), &set);
	fb_fault_fail_nth(0);
	if (rc != ENOMEM)
		return (void *)1L;
	if (fiber_setaffinity(sizeof(set), &set) || fiber_current_worker() != 0)
		return (void *)2L;
	return NULL;
}

static void run_in_fiber(void *(*fn)(void *))
{
	void *r = (void *)-1L;
	fiber_t f;

	assert_int_equal(fiber_create(&f, NULL, fn, NULL), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_null(r);
}

static void test_fault_sync_objects_fail_cleanly(void **state)
{
	(void)state;
	assert_int_equal(start(), 0);
	assert_int_equal(fail_each(op_chan, true), 1);
	assert_int_equal(fail_each(op_pipe, true), 1);
	assert_int_equal(fiber_key_create(&key, NULL), 0);
	run_in_fiber(setspecific_in_fiber);
	run_in_fiber(setaffinity_in_fiber);
	assert_int_equal(fiber_key_delete(key), 0);
	check_alive();
	assert_int_equal(fiber_shutdown(), 0);
}

/*
 * Poller registration: the first wait on an fd allocates its part of the
 * fd table (sched/netpoll.c).  A wait whose allocation fails says ENOMEM and
 * leaves nothing armed; the next one registers the fd and works.
 */
static int poll_fd = -1;

static int op_poll(void)
{
	int r = fiber_poll(poll_fd, POLLIN, 1); /* empty: times out */

	return r < 0 ? errno : 0;
}

static void *poll_in_fiber(void *arg)
{
	(void)arg;
	return (void *)(long)fiber_poll(poll_fd, POLLIN, 1000);
}

/* Fibers wait through the poller (threads use poll(2)): run the failing
 * waits in one fiber, so that nothing else allocates meanwhile. */
static void *poll_faults_in_fiber(void *arg)
{
	(void)arg;
	return (void *)(long)fail_each(op_poll, false);
}

static void test_fault_poller_registration_fails_cleanly(void **state)
{
	void *points = NULL;
	char b = 'x';
	fiber_t f;
	int p[2];

	(void)state;
	assert_int_equal(start(), 0);
	assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	poll_fd = p[0];
	assert_int_equal(fiber_create(&f, NULL, poll_faults_in_fiber, NULL), 0);
	assert_int_equal(fiber_join(f, &points), 0);
	print_message("# poller registration: %ld failure points\n",
		      (long)points);
	assert_true((long)points >= 1); /* the fd table's chunk at least */
	check_alive();
	/* registered now: a fiber's wait sees the readiness */
	assert_int_equal(write(p[1], &b, 1), 1);
	assert_int_equal(fiber_create(&f, NULL, poll_in_fiber, NULL), 0);
	assert_int_equal(fiber_join(f, &points), 0);
	assert_int_equal((long)points, POLLIN);
	close(p[0]);
	close(p[1]);
	assert_int_equal(fiber_shutdown(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fault_init_fails_cleanly),
		cmocka_unit_test(test_fault_create_fails_cleanly),
		cmocka_unit_test(test_fault_sync_objects_fail_cleanly),
		cmocka_unit_test(test_fault_poller_registration_fails_cleanly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
