/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-stack.c - what fiber stacks cost in kernel mappings, the limit
 * vm.max_map_count puts on guarded stacks, and LIBFIBER_STACK_GUARD=0's
 * slabs, which lift it.  Each case runs in a forked child (the variable is
 * read when the runtime starts); the child's exit status says which check
 * failed, and the parent collects its stderr.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fiber.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1 /* a sanitizer maps memory of its own as it goes */
#elif __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define SANITIZED (RUNNING_ON_VALGRIND != 0) /* so does valgrind */
#else
#define SANITIZED 0
#endif

/* The process's mappings: the lines of /proc/self/maps. */
static long count_maps(void)
{
	char buf[4096];
	long n = 0;
	size_t r;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -1;
	while ((r = fread(buf, 1, sizeof(buf), f)) > 0)
		for (size_t i = 0; i < r; i++)
			n += buf[i] == '\n';
	fclose(f);
	return n;
}

static fiber_sem_t gate;
static atomic_int parked;

static void *park(void *arg)
{
	(void)arg;
	atomic_fetch_add(&parked, 1);
	fiber_sem_wait(&gate);
	return NULL;
}

/*
 * Park @n fibers of 64 KiB stacks, let them go, join them; in
 * *@added the mappings the parked fibers added.  Return: 0, or the number
 * of the step that failed.
 */
static int park_many(fiber_t *f, int n, long *added)
{
	fiber_attr_t a;
	long before;

	if (fiber_attr_init(&a) || fiber_attr_setstacksize(&a, 64 * 1024))
		return 10;
	atomic_store(&parked, 0);
	before = count_maps();
	for (int i = 0; i < n; i++)
		if (fiber_create(&f[i], &a, park, NULL))
			return 11;
	while (atomic_load(&parked) < n)
		usleep(1000);
	*added = count_maps() - before;
	for (int i = 0; i < n; i++)
		fiber_sem_post(&gate);
	for (int i = 0; i < n; i++)
		if (fiber_join(f[i], NULL))
			return 12;
	return 0;
}

/* The child: @n parked fibers, twice; exits 0 when the first round added
 * fewer than @below mappings (or, @below < 0, at least -@below) and the
 * second, on the stacks the first freed, at most a few. */
static void mappings_child(const char *guard, int n, long below)
{
	struct fiber_config c = { 0 };
	fiber_t *f = calloc((size_t)n, sizeof(*f));
	long first, second;
	int rc;

	setenv("LIBFIBER_STACK_GUARD", guard, 1);
	c.workers = 1;
	if (!f || fiber_init(&c) || fiber_sem_init(&gate, 0))
		_exit(2);
	rc = park_many(f, n, &first);
	if (rc)
		_exit(rc);
	fprintf(stderr, "# %d parked fibers added %ld mappings\n", n, first);
	if (below >= 0 ? first >= below : first < -below)
		_exit(3);
	rc = park_many(f, n, &second);
	if (rc)
		_exit(rc);
	fprintf(stderr, "# again: %ld mappings\n", second);
	if (below >= 0 && second > 8) /* the freed stacks are reused */
		_exit(4);
	fiber_shutdown();
	free(f);
	_exit(0);
}

/* Fork @fn(@arg...) and return its wait status; its stderr in @err. */
static int run(void (*fn)(const char *, int, long), const char *guard, int n,
	       long below, char *err, size_t len)
{
	int fds[2], status;
	size_t got = 0;
	ssize_t r;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], STDERR_FILENO);
		fn(guard, n, below);
	}
	close(fds[1]);
	while (got < len - 1 &&
	       (r = read(fds[0], err + got, len - 1 - got)) > 0)
		got += (size_t)r;
	err[got] = '\0';
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	fprintf(stderr, "# child status %#x, stderr:\n%s", status, err);
	return status;
}

/* LIBFIBER_STACK_GUARD=0: 10,000 parked fibers add fewer than 100
 * mappings (guarded stacks would add 20,000), and a second round reuses
 * the stacks the first one freed. */
static void test_stack_unguarded_stacks_share_mappings(void **state)
{
	char err[4096];
	int st;

	(void)state;
#ifdef __SANITIZE_THREAD__
	/* ThreadSanitizer keeps a thread context and mappings of its own per
	 * fiber, and stops at 8,128 of them: nothing here to count. */
	fprintf(stderr, "# not under ThreadSanitizer\n");
	return;
#endif
	st = run(mappings_child, "0", 10000, 100, err, sizeof(err));
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* The default, for contrast: each guarded stack is two mappings (the
 * measure above would see them). */
static void test_stack_guarded_stacks_take_two_mappings(void **state)
{
	char err[4096];
	int st;

	(void)state;
	st = run(mappings_child, "1", 1000, -1900, err, sizeof(err));
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void *nothing(void *arg)
{
	return arg;
}

/* Make mappings until the kernel refuses one (vm.max_map_count reached,
 * for real: alternate protections keep neighbours from merging); exit
 * with @status if it never does. */
static void fill_maps(int status)
{
	long page = sysconf(_SC_PAGESIZE);

	for (long i = 0;; i++) {
		int prot = i % 2 ? PROT_READ : PROT_READ | PROT_WRITE;

		if (mmap(NULL, (size_t)page, prot, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0) == MAP_FAILED)
			return;
		if (i > 10 * 1000 * 1000)
			_exit(status); /* no limit? */
	}
}

/*
 * The child: a running runtime, then mappings made until the kernel
 * refuses one (fill_maps), then two creates.  Exits 0 when both
 * fail with EAGAIN.
 */
static void limit_child(const char *guard, int n, long below)
{
	struct fiber_config c = { 0 };
	fiber_t f;

	(void)n;
	(void)below;
	setenv("LIBFIBER_STACK_GUARD", guard, 1);
	c.workers = 1;
	if (fiber_init(&c) || fiber_create(&f, NULL, nothing, NULL) ||
	    fiber_join(f, NULL))
		_exit(2);
	fill_maps(3);
	if (fiber_create(&f, NULL, nothing, NULL) != EAGAIN)
		_exit(4);
	if (fiber_create(&f, NULL, nothing, NULL) != EAGAIN)
		_exit(5);
	_exit(0);
}

/* At vm.max_map_count, a create fails with EAGAIN and one message (not
 * one per create) names the limit, its value and the two ways out. */
static void test_stack_map_count_limit_is_explained(void **state)
{
	char err[4096], want[64], buf[32];
	FILE *f;
	long max;
	int st;

	(void)state;
	/* Not under a sanitizer or valgrind, which map memory as they go
	 * and may fail first; nor where the limit cannot be read.  (cmocka's
	 * skip() reads as a failure to meson's TAP parser.) */
	if (SANITIZED) {
		fprintf(stderr, "# not under a sanitizer or valgrind\n");
		return;
	}
	f = fopen("/proc/sys/vm/max_map_count", "r");
	if (!f)
		return;
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	max = atol(buf);
	st = run(limit_child, "1", 0, 0, err, sizeof(err));
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	snprintf(want, sizeof(want), "vm.max_map_count is %ld", max);
	assert_non_null(strstr(err, want));
	assert_non_null(strstr(err, "sysctl -w vm.max_map_count="));
	assert_non_null(strstr(err, "LIBFIBER_STACK_GUARD=0"));
	/* Once per process. */
	assert_null(strstr(strstr(err, "libfiber: ") + 1, "libfiber: "));
}

/*
 * The child: a burst of @n fibers created, then joined, leaves about @n
 * stacks in the pools (two mappings each); then mappings made until the
 * kernel refuses one; then a fiber with a stack of another size, which
 * the pools cannot serve.  Exits 0 when it is created and runs: the map
 * gave the pooled stacks back and tried again.
 */
static void pooled_child(const char *guard, int n, long below)
{
	struct fiber_config c = { 0 };
	long page = sysconf(_SC_PAGESIZE);
	static fiber_t fs[3000];
	fiber_attr_t a;
	fiber_t f;
	void *r;
	int i;

	(void)below;
	setenv("LIBFIBER_STACK_GUARD", guard, 1);
	c.workers = 1;
	if (n > 3000 || fiber_init(&c))
		_exit(2);
	for (i = 0; i < n; i++)
		if (fiber_create(&fs[i], NULL, nothing, NULL))
			_exit(3);
	for (i = 0; i < n; i++)
		if (fiber_join(fs[i], NULL))
			_exit(3);
	fill_maps(4);
	if (fiber_attr_init(&a) ||
	    fiber_attr_setstacksize(&a, 3 * 64 * 1024 + (size_t)page))
		_exit(5);
	if (fiber_create(&f, &a, nothing, (void *)7) != 0)
		_exit(6);
	if (fiber_join(f, &r) || r != (void *)7)
		_exit(7);
	_exit(0);
}

/* At vm.max_map_count with a burst's stacks pooled, a create of another
 * stack size still succeeds, without the limit's message: the pools give
 * their stacks back before the kernel's refusal counts. */
static void test_stack_pooled_stacks_yield_to_a_new_size(void **state)
{
	char err[4096];
	int st;

	(void)state;
	if (SANITIZED) { /* see test_stack_map_count_limit_is_explained */
		fprintf(stderr, "# not under a sanitizer or valgrind\n");
		return;
	}
	if (access("/proc/sys/vm/max_map_count", R_OK))
		return;
	st = run(pooled_child, "1", 3000, 0, err, sizeof(err));
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_null(strstr(err, "vm.max_map_count"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stack_unguarded_stacks_share_mappings),
		cmocka_unit_test(test_stack_guarded_stacks_take_two_mappings),
		cmocka_unit_test(test_stack_map_count_limit_is_explained),
		cmocka_unit_test(test_stack_pooled_stacks_yield_to_a_new_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
