/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-cache.c - what a fiber costs once the caches are warm: a burst of
 * fibers created and then joined takes its descriptors and stacks from the
 * per-worker caches and the pools behind them (sched/handle.c,
 * sched/stack.c), never from the allocator or the kernel; and a fiber
 * joined at once leaves its stack with its descriptor, so the next create
 * takes both from one cache.  White box: the allocator, the stack mapper
 * and the stack cache are counted through link-time wrappers
 * (tests/meson.build).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "fiber.h"
#include "harness.h"
#include "sched/stack.h"

/* Counted while @counting: calls of the allocator behind descriptors, of
 * the stack mapper and of the stack cache. */
static atomic_bool counting;
static atomic_long nr_allocs, nr_maps, nr_cache_gets;

void *__real_fb_aligned_alloc(size_t align, size_t size);
void *__wrap_fb_aligned_alloc(size_t align, size_t size);
int __real_fb_stack_map(struct fb_stack *s, size_t size, int node);
int __wrap_fb_stack_map(struct fb_stack *s, size_t size, int node);
bool __real_fb_stack_cache_get(struct fb_stack_cache *c, size_t size,
			       struct fb_stack *s);
bool __wrap_fb_stack_cache_get(struct fb_stack_cache *c, size_t size,
			       struct fb_stack *s);

bool __wrap_fb_stack_cache_get(struct fb_stack_cache *c, size_t size,
			       struct fb_stack *s)
{
	if (atomic_load(&counting))
		atomic_fetch_add(&nr_cache_gets, 1);
	return __real_fb_stack_cache_get(c, size, s);
}

void *__wrap_fb_aligned_alloc(size_t align, size_t size)
{
	if (atomic_load(&counting))
		atomic_fetch_add(&nr_allocs, 1);
	return __real_fb_aligned_alloc(align, size);
}

int __wrap_fb_stack_map(struct fb_stack *s, size_t size, int node)
{
	if (atomic_load(&counting))
		atomic_fetch_add(&nr_maps, 1);
	return __real_fb_stack_map(s, size, node);
}

/* A burst: more fibers than a worker's caches hold (64), fewer than the
 * pools behind them (1024). */
#define BURST 1000

static void *ret_arg(void *arg)
{
	return arg;
}

/* Create BURST fibers, then join them; the number that failed. */
static long burst(void)
{
	static fiber_t f[BURST];
	long bad = 0;
	void *r;

	for (long i = 0; i < BURST; i++)
		if (fiber_create(&f[i], NULL, ret_arg, (void *)i))
			bad++;
	for (long i = 0; i < BURST; i++)
		if (fiber_join(f[i], &r) || r != (void *)i)
			bad++;
	return bad;
}

static void *bursts(void *arg)
{
	long bad = burst(); /* warm */

	(void)arg;
	atomic_store(&counting, true);
	bad += burst();
	atomic_store(&counting, false);
	return (void *)bad;
}

static void test_cache_warm_burst_allocates_nothing(void **state)
{
	fiber_t f;
	void *r;

	(void)state;
	runtime_start(1);
	assert_int_equal(fiber_create(&f, NULL, bursts, NULL), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_int_equal((long)r, 0);
	runtime_stop();
	if (atomic_load(&nr_allocs) || atomic_load(&nr_maps))
		fail_msg("a warm burst of %d fibers: %ld allocations, %ld "
			 "stacks mapped",
			 BURST, atomic_load(&nr_allocs), atomic_load(&nr_maps));
}

/* One at a time, each joined at once: the descriptor the join releases
 * brings the stack to the next create. */
static void *one_at_a_time(void *arg)
{
	long bad = 0;
	fiber_t f;
	void *r;

	(void)arg;
	for (long i = 0; i < 100; i++) {
		if (i == 2) /* warm */
			atomic_store(&counting, true);
		if (fiber_create(&f, NULL, ret_arg, (void *)i) ||
		    fiber_join(f, &r) || r != (void *)i)
			bad++;
	}
	atomic_store(&counting, false);
	return (void *)bad;
}

static void test_cache_joined_fiber_leaves_its_stack(void **state)
{
	fiber_t f;
	void *r;

	(void)state;
	atomic_store(&nr_cache_gets, 0);
	atomic_store(&nr_maps, 0);
	runtime_start(1);
	assert_int_equal(fiber_create(&f, NULL, one_at_a_time, NULL), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_int_equal((long)r, 0);
	runtime_stop();
	assert_int_equal(atomic_load(&nr_maps), 0);
	assert_int_equal(atomic_load(&nr_cache_gets), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_cache_warm_burst_allocates_nothing),
		TEST(test_cache_joined_fiber_leaves_its_stack),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
