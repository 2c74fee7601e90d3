/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * harness.h - what the runtime tests share: starting and stopping the
 * runtime inside a test, and a teardown that stops a runtime a failed
 * assertion left running, so the next test can start its own.
 * Include after <cmocka.h>.
 */
#ifndef FB_TEST_HARNESS_H
#define FB_TEST_HARNESS_H

#include "fiber.h"

/* Stack for the fibers of these tests: room for sanitizer frames. */
#define TEST_STACK (128 * 1024)

static inline void runtime_start(unsigned int workers)
{
	struct fiber_config c = { 0 };

	c.workers = workers;
	assert_int_equal(fiber_init(&c), 0);
}

static inline void runtime_stop(void)
{
	assert_int_equal(fiber_shutdown(), 0);
}

/* Teardown: ESRCH from fiber_shutdown when the runtime is already down
 * is fine. */
static inline int stop_if_running(void **state)
{
	(void)state;
	fiber_shutdown();
	return 0;
}

#define TEST(fn) cmocka_unit_test_teardown(fn, stop_if_running)

/*
 * CHILD_MAY_START_THREADS: whether the child of a fork() taken while the
 * runtime's threads run may allocate and start a runtime of its own.
 * Not under ThreadSanitizer, which refuses threads in such a child; nor
 * under AddressSanitizer as GCC 12 ships it, whose allocator holds no
 * lock across fork(): a worker refilling its cache at that instant
 * leaves the size class locked in the child, and the child's first
 * malloc of that size waits forever.  The plain and valgrind builds run
 * these children in full.
 */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define CHILD_MAY_START_THREADS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define CHILD_MAY_START_THREADS 0
#endif
#endif
#ifndef CHILD_MAY_START_THREADS
#define CHILD_MAY_START_THREADS 1
#endif

#endif /* FB_TEST_HARNESS_H */
