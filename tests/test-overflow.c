/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-overflow.c - a fiber that runs off its stack is reported by name and
 * size and the process aborts; any other segfault in a fiber is left to the
 * previous handler.  Each case runs in a forked child whose stderr the
 * parent collects.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fiber.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1 /* a sanitizer's SIGSEGV handler reports other faults */
#else
#define SANITIZED 0
#endif

/* Each frame touches its 1 KiB on the way down, so the first access past
 * the end of the stack lands in the guard page. */
__attribute__((noinline)) static int recurse(int depth)
{
	volatile char pad[1024];

	for (size_t i = 0; i < sizeof(pad); i += 64)
		pad[i] = (char)depth;
	if (depth < 0)
		return 0; /* never: keeps the compiler's recursion check quiet */
	return recurse(depth + 1) + pad[(unsigned int)depth % sizeof(pad)];
}

static void *overflow(void *arg)
{
	(void)arg;
	return (void *)(long)recurse(0);
}

/*
 * A frame far larger than a page whose first access is its lowest byte:
 * the stack pointer moves 64 KiB down at once and the write lands that far
 * below the top of the frame, past a one-page guard.  This file is built
 * with -fno-stack-clash-protection (tests/meson.build), which would
 * otherwise probe the frame's pages from the top.
 */
__attribute__((noinline)) static int big_frame(int v)
{
	char buf[64 * 1024];
	volatile char *p = buf;

	/* The array's address escapes, so the whole array is in the frame. */
	__asm__ volatile("" : : "r"(buf) : "memory");
	p[0] = (char)v;
	p[sizeof(buf) - 1] = (char)v;
	return p[0] + p[sizeof(buf) - 1];
}

static void *call_big_frame(void *arg)
{
	return (void *)(long)big_frame((int)(long)arg);
}

/*
 * Run a little past the bottom of a stack without a guard: each frame
 * writes its whole buffer, down to @stop, below the stack's lowest byte;
 * then return, and park, which switches the fiber out.  The bytes written
 * below land in the slab's first page (the fiber is the first of its
 * size in the child), so nothing but the canary is hit.
 */
__attribute__((noinline)) static int dive(uintptr_t stop)
{
	volatile char pad[256];

	for (size_t i = 0; i < sizeof(pad); i++)
		pad[i] = (char)0x5a;
	if ((uintptr_t)pad > stop)
		return dive(stop) + pad[0];
	return pad[0];
}

/* The start of the mapping that holds @addr, from /proc/self/maps; 0 if
 * not found. */
static uintptr_t mapping_start(uintptr_t addr)
{
	unsigned long lo, hi;
	char line[256];
	uintptr_t found = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && addr >= lo &&
		    addr < hi)
			found = lo;
	fclose(f);
	return found;
}

static void *overflow_past_canary(void *arg)
{
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	uintptr_t slab = mapping_start(here);

	/* The first slot of the slab starts a page into it (the stack may
	 * be a little larger than the 64 KiB asked for, sched/stack.c):
	 * go 512 bytes below that.  A slab merged with a neighbour would
	 * start further down: the child then fails instead of diving. */
	(void)arg;
	if (!slab || here - slab > 80 * 1024)
		_exit(3);
	dive(slab + (uintptr_t)sysconf(_SC_PAGESIZE) - 512);
	fiber_sleep(1000); /* a switch-out: the canary is checked */
	return NULL;
}

static void *wild_write(void *arg)
{
	*(volatile int *)arg = 1;
	return NULL;
}

/* LIBFIBER_STACK_GUARD for the child; NULL: not set. */
static const char *child_guard;

/* The child: one worker, one fiber named @name running @fn. */
static void child(void *(*fn)(void *), void *arg, const char *name,
		  size_t stack)
{
	struct fiber_config c = { 0 };
	fiber_attr_t a;
	fiber_t f;

	/* cmocka catches SIGSEGV in its tests; here it must reach us. */
	signal(SIGSEGV, SIG_DFL);
	if (child_guard)
		setenv("LIBFIBER_STACK_GUARD", child_guard, 1);
	c.workers = 1;
	if (fiber_init(&c) || fiber_attr_init(&a) ||
	    fiber_attr_setname(&a, name) ||
	    fiber_attr_setstacksize(&a, stack) || fiber_create(&f, &a, fn, arg))
		_exit(3);
	fiber_join(f, NULL);
	_exit(0);
}

/* Run child() in a fork; return its wait status and its stderr in @err. */
static int run_child(void *(*fn)(void *), void *arg, const char *name,
		     size_t stack, char *err, size_t len)
{
	int fds[2], status;
	size_t n = 0;
	ssize_t r;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], STDERR_FILENO);
		child(fn, arg, name, stack);
	}
	close(fds[1]);
	while (n < len - 1 && (r = read(fds[0], err + n, len - 1 - n)) > 0)
		n += (size_t)r;
	err[n] = '\0';
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void test_overflow_guard_page_names_fiber_and_aborts(void **state)
{
	char err[8192];
	int st;

	(void)state;
	st = run_child(overflow, NULL, "deep", 64 * 1024, err, sizeof(err));
	if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT))
		fprintf(stderr, "# child status %#x, stderr:\n%s\n", st, err);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGABRT);
	assert_non_null(strstr(err, "libfiber: fiber "));
	assert_non_null(strstr(err, "\"deep\" overflowed its 64K stack"));
	assert_non_null(strstr(err, "(fault at 0x"));
}

static void test_overflow_report_gives_size_rounded_to_pages(void **state)
{
	char err[8192];
	int st;

	(void)state;
	/* 20 KiB + 1 byte is rounded up to whole pages: 24K. */
	st = run_child(overflow, NULL, "odd", 20 * 1024 + 1, err, sizeof(err));
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGABRT);
	assert_non_null(strstr(err, "\"odd\" overflowed its 24K stack"));
}

/* A 64 KiB frame on a 16 KiB stack skips a one-page guard; the guard
 * region must still catch it and the report name the fiber. */
static void test_overflow_large_frame_is_reported(void **state)
{
	char err[8192];
	int st;

	(void)state;
	st = run_child(call_big_frame, (void *)1L, "big", 16 * 1024, err,
		       sizeof(err));
	if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT))
		fprintf(stderr, "# child status %#x, stderr:\n%s\n", st, err);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGABRT);
	assert_non_null(strstr(err, "\"big\" overflowed its 16K stack"));
}

/* Bytes of the name outside printable ASCII, the quote and the backslash
 * are escaped, so the report stays one line that names the fiber. */
static void test_overflow_report_escapes_name(void **state)
{
	char err[8192];
	int st;

	(void)state;
	st = run_child(overflow, NULL, "a\nb\"c\\d\x01", 64 * 1024, err,
		       sizeof(err));
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGABRT);
	assert_non_null(strstr(err, "fiber "));
	assert_non_null(strstr(err, " \"a\\x0ab\\\"c\\\\d\\x01\" overflowed "
				    "its 64K stack"));
}

/* LIBFIBER_STACK_GUARD=0: no guard page; the canary below the stack,
 * checked when the fiber switches out, names the fiber and aborts. */
static void test_overflow_canary_names_fiber_and_aborts(void **state)
{
	char err[8192];
	int st;

	(void)state;
	child_guard = "0";
	st = run_child(overflow_past_canary, NULL, "slab", 64 * 1024, err,
		       sizeof(err));
	child_guard = NULL;
	if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT))
		fprintf(stderr, "# child status %#x, stderr:\n%s\n", st, err);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGABRT);
	assert_non_null(strstr(err, "libfiber: fiber "));
	assert_non_null(strstr(err, "\"slab\" overflowed its 64K stack "
				    "(canary at 0x"));
	assert_non_null(strstr(err, "give it a larger stack"));
}

/* The same fiber within its stack: the canary is intact, no report. */
static void *within_stack(void *arg)
{
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);

	(void)arg;
	dive(here - 32 * 1024);
	fiber_sleep(1000);
	return NULL;
}

static void test_overflow_canary_quiet_within_stack(void **state)
{
	char err[8192];
	int st;

	(void)state;
	child_guard = "0";
	st = run_child(within_stack, NULL, "fits", 64 * 1024, err, sizeof(err));
	child_guard = NULL;
	assert_null(strstr(err, "overflowed"));
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_overflow_other_segfault_passes_through(void **state)
{
	char err[8192];
	int st;

	(void)state;
	st = run_child(wild_write, (void *)16, "wild", 64 * 1024, err,
		       sizeof(err));
	assert_null(strstr(err, "overflowed"));
	assert_false(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (!SANITIZED) {
		assert_true(WIFSIGNALED(st));
		assert_int_equal(WTERMSIG(st), SIGSEGV);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_overflow_guard_page_names_fiber_and_aborts),
		cmocka_unit_test(
			test_overflow_report_gives_size_rounded_to_pages),
		cmocka_unit_test(test_overflow_large_frame_is_reported),
		cmocka_unit_test(test_overflow_report_escapes_name),
		cmocka_unit_test(test_overflow_other_segfault_passes_through),
		cmocka_unit_test(test_overflow_canary_names_fiber_and_aborts),
		cmocka_unit_test(test_overflow_canary_quiet_within_stack),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
