/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * harness.h - what the runtime tests share: starting and stopping the
 * runtime inside a test, and a teardown that stops a runtime a failed
 * assertion left running, so the next test can start its own.
 * Include after <cmocka.h>.
 */
#ifndef FB_TEST_HARNESS_H
#define FB_TEST_HARNESS_H

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

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
 * A hung test is killed by meson's timeout with SIGTERM, which by default
 * leaves nothing in the log but the last "ok" line.  This handler writes
 * the stack of the thread that took the signal (the main thread, which
 * the kernel prefers for a signal sent to the process) and the runtime's
 * fibers, then dies of the signal as before.  fiber_dump is not
 * async-signal-safe: if the signal interrupted a thread holding what the
 * dump needs, it waits there, and meson's SIGKILL ends the test anyway.
 * The frames of static functions print as offsets into the executable
 * ("test-x(+0x1234)"): addr2line -e test-x 0x1234 names the line.
 */
static void harness_on_term(int sig)
{
	static const char msg[] = "# killed by SIGTERM (a timeout?): the "
				  "signalled thread's stack, then the fibers\n";
	void *pc[48];
	int n;

	(void)!write(2, msg, sizeof(msg) - 1);
	n = backtrace(pc, 48);
	backtrace_symbols_fd(pc, n, 2);
	fiber_dump(2);
	signal(sig, SIG_DFL);
	raise(sig);
}

__attribute__((constructor)) static void harness_install(void)
{
	struct sigaction sa;
	void *pc[1];

	/* backtrace() loads libgcc at its first call: not in the handler. */
	(void)backtrace(pc, 1);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = harness_on_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
}

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
