/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-invariants.c - the design's invariants under wake/block storms
 * across workers, white-box on the fb_waiter protocol:
 *  - a fiber runs on at most one worker at a time (a per-fiber canary and
 *    a stack canary catch a second worker on the same fiber or stack);
 *  - no wakeup is lost (every signal is consumed; a lost one hangs the
 *    ring, which meson's timeout turns into a failure, and the counts must
 *    match exactly at the end);
 *  - both under the default features and with every feature off, so that
 *    the direct-enqueue path with its on_worker wait is exercised too.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sched/sched.h"

/* A counting slot: signal never blocks, wait blocks while the count is 0. */
struct slot {
	struct fb_spinlock lock;
	long count;
	struct fb_waiter *waiter;
	atomic_int running; /* canary: 1 while the owner fiber runs */
	long waits, signals;
} __attribute__((aligned(64)));

static void slot_signal(struct slot *s)
{
	struct fb_waiter *w;

	fb_spin_lock(&s->lock);
	s->signals++;
	w = s->waiter;
	if (w)
		s->waiter = NULL;
	else
		s->count++;
	if (w)
		fb_waiter_wake(w, 0);
	fb_spin_unlock(&s->lock);
}

static void slot_wait(struct slot *s)
{
	struct fb_waiter w;

	fb_spin_lock(&s->lock);
	s->waits++;
	if (s->count > 0) {
		s->count--;
		fb_spin_unlock(&s->lock);
		return;
	}
	fb_waiter_prepare(&w, FB_WAIT_NONE, s);
	s->waiter = &w;
	fb_waiter_wait(&w, &s->lock);
}

#define NR_FIBERS 64
static struct slot slots[NR_FIBERS];
static long iterations;
static int nr_fibers = NR_FIBERS;
static int yield_every = 16;
static atomic_long violations;

static void *ring_member(void *arg)
{
	long i = (long)arg;
	struct slot *me = &slots[i], *next = &slots[(i + 1) % nr_fibers];
	volatile uint64_t canary = 0xfeedface00000000ull | (uint64_t)i;
	int expect = 0;

	if (!atomic_compare_exchange_strong(&me->running, &expect, 1))
		atomic_fetch_add(&violations, 1);
	for (long k = 0; k < iterations; k++) {
		slot_signal(next);
		atomic_store(&me->running, 0);
		slot_wait(me);
		expect = 0;
		if (!atomic_compare_exchange_strong(&me->running, &expect, 1))
			atomic_fetch_add(&violations, 1);
		if (canary != (0xfeedface00000000ull | (uint64_t)i))
			atomic_fetch_add(&violations, 1);
		if (k % yield_every == 0)
			fiber_yield();
	}
	atomic_store(&me->running, 0);
	return NULL;
}

/* Stretch the switch-out window now and then so that wakers and thieves
 * really meet fibers whose registers are not saved yet. */
static unsigned int widen_one_in = 64;

static void widen_window(void)
{
	static _Thread_local unsigned int x = 12345;

	x = x * 1103515245 + 12345;
	if ((x >> 16) % widen_one_in == 0)
		for (volatile int i = 0; i < 2000; i++)
			;
}

static void run_ring(unsigned int workers, const char *features, long iters)
{
	struct fiber_config c = { 0 };
	fiber_t f[NR_FIBERS];
	long sig = 0, waits = 0;

	memset(slots, 0, sizeof(slots));
	atomic_store(&violations, 0);
	iterations = iters;
	c.workers = workers;
	c.sched_features = features;
	fb_test_switch_hook = widen_window;
	assert_int_equal(fiber_init(&c), 0);
	for (long i = 0; i < nr_fibers; i++)
		assert_int_equal(
			fiber_create(&f[i], NULL, ring_member, (void *)i), 0);
	for (int i = 0; i < nr_fibers; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	for (int i = 0; i < nr_fibers; i++) {
		sig += slots[i].signals;
		waits += slots[i].waits;
		assert_int_equal(slots[i].count, 0);
		assert_null(slots[i].waiter);
	}
	fb_test_switch_hook = NULL;
	assert_int_equal(atomic_load(&violations), 0);
	assert_int_equal(sig, nr_fibers * iters);
	assert_int_equal(waits, nr_fibers * iters);
	/* Every blocking wait was woken exactly once. */
	assert_int_equal(fiber_stats_counter("parks"),
			 fiber_stats_counter("wakeups"));
	assert_int_equal(fiber_shutdown(), 0);
}

static const char *all_off =
	"NO_SIS_UTIL NO_SIS_CORE_LIMIT NO_SIS_CORE_FULL NO_TTWU_QUEUE "
	"NO_TTWU_QUEUE_IDLE NO_ASYM_PACKING NO_NUMA_IMB NO_NUMA_IMB_AFFINITY "
	"NO_BLOCKED_LOAD_RATELIMIT NO_NI_RANDOM NO_WA_IDLE NO_WA_WEIGHT "
	"NO_WA_BIAS NO_WA_POLLER NO_CREATE_AFFINE NO_PEER_RESCUE "
	"NO_WAKE_GROUPS";

static void test_invariant_no_fiber_on_two_workers_defaults(void **state)
{
	(void)state;
	run_ring(4, NULL, 20000);
}

static void test_invariant_no_lost_wakeup_all_features_off(void **state)
{
	(void)state;
	run_ring(4, all_off, 20000);
	/* run_ring shut the runtime down; the counter check is inside. */
}

static void test_invariant_no_lost_wakeup_many_workers(void **state)
{
	(void)state;
	run_ring(16, NULL, 5000);
}

/* Few fibers, many idle workers, yields everywhere: thieves and wakers
 * keep meeting fibers that are still leaving their worker. */
static void test_invariant_thieves_wait_for_switch_out(void **state)
{
	(void)state;
	nr_fibers = 6;
	yield_every = 1;
	widen_one_in = 1;
	run_ring(4, NULL, 5000);
	run_ring(4, all_off, 5000);
	widen_one_in = 64;
	nr_fibers = NR_FIBERS;
	yield_every = 16;
}

/* Foreign threads wake fibers: the wakelist path from outside. */
#define FOREIGN_ROUNDS 20000
static struct slot fslots[8];

static void *foreign_waiter(void *arg)
{
	struct slot *s = arg;

	for (long k = 0; k < FOREIGN_ROUNDS; k++)
		slot_wait(s);
	return NULL;
}

static void *foreign_signaller(void *arg)
{
	(void)arg;
	for (long k = 0; k < FOREIGN_ROUNDS; k++)
		for (int i = 0; i < 8; i++)
			slot_signal(&fslots[i]);
	return NULL;
}

static void test_invariant_foreign_wakers_lose_nothing(void **state)
{
	struct fiber_config c = { 0 };
	fiber_t f[8];
	pthread_t t;

	(void)state;
	memset(fslots, 0, sizeof(fslots));
	c.workers = 3;
	assert_int_equal(fiber_init(&c), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(fiber_create(&f[i], NULL, foreign_waiter,
					      &fslots[i]),
				 0);
	assert_int_equal(pthread_create(&t, NULL, foreign_signaller, NULL), 0);
	pthread_join(t, NULL);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(fiber_join(f[i], NULL), 0);
		assert_int_equal(fslots[i].count, 0);
		assert_int_equal(fslots[i].waits, FOREIGN_ROUNDS);
	}
	assert_int_equal(fiber_shutdown(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_invariant_no_fiber_on_two_workers_defaults),
		cmocka_unit_test(
			test_invariant_no_lost_wakeup_all_features_off),
		cmocka_unit_test(test_invariant_no_lost_wakeup_many_workers),
		cmocka_unit_test(test_invariant_thieves_wait_for_switch_out),
		cmocka_unit_test(test_invariant_foreign_wakers_lose_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
