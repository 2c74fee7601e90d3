/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-wake-runtime.c - the wake path in the running runtime, asserted
 * through counters: which delivery a cross-worker wakeup takes
 * (heuristics.md section 3), what a wakeup of an idle worker costs, and
 * that every wakeup was placed and counted.  Public API only.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

#include "fiber.h"

#define LOOPS 5000

struct pair {
	fiber_pipe_t *ab, *ba;
};

static void *ping(void *arg)
{
	struct pair *p = arg;
	long bad = 0;

	for (int i = 0; i < LOOPS; i++) {
		int v = i, back = -1;
		size_t d;

		fiber_pipe_write(p->ab, &v, sizeof(v), &d);
		fiber_pipe_read(p->ba, &back, sizeof(back), &d);
		bad += back != i;
	}
	return (void *)bad;
}

static void *pong(void *arg)
{
	struct pair *p = arg;

	for (int i = 0; i < LOOPS; i++) {
		int v;
		size_t d;

		fiber_pipe_read(p->ab, &v, sizeof(v), &d);
		fiber_pipe_write(p->ba, &v, sizeof(v), &d);
	}
	return NULL;
}

/* Ping on worker 0, pong on worker 1 (one LLC here: the real machine or
 * a synthetic one), LOOPS round trips.  Returns the counters' deltas. */
struct deltas {
	long long pushes, direct, futex, poll_wakes, wakeups, placements;
};

static void run_split_pingpong(const char *features, long idle_poll_us,
			       struct deltas *d)
{
	struct fiber_config c = { 0 };
	fiber_attr_t a0, a1;
	cpu_set_t s;
	struct pair p;
	fiber_t f0, f1;
	void *r;

	c.workers = 2;
	c.topology = "pack:1 l3:1 core:2 pu:1";
	c.sched_features = features;
	c.idle_poll_us = idle_poll_us;
	c.idle_poll_set = 1;
	assert_int_equal(fiber_init(&c), 0);
	assert_int_equal(fiber_pipe_create(&p.ab, 0), 0);
	assert_int_equal(fiber_pipe_create(&p.ba, 0), 0);
	fiber_attr_init(&a0);
	fiber_attr_init(&a1);
	CPU_ZERO(&s);
	CPU_SET(0, &s);
	fiber_attr_setaffinity(&a0, sizeof(s), &s);
	CPU_ZERO(&s);
	CPU_SET(1, &s);
	fiber_attr_setaffinity(&a1, sizeof(s), &s);
	fiber_stats_reset();
	assert_int_equal(fiber_create(&f1, &a1, pong, &p), 0);
	assert_int_equal(fiber_create(&f0, &a0, ping, &p), 0);
	assert_int_equal(fiber_join(f0, &r), 0);
	assert_null(r);
	assert_int_equal(fiber_join(f1, NULL), 0);
	d->pushes = fiber_stats_counter("wakelist_pushes");
	d->direct = fiber_stats_counter("direct_enqueues");
	d->futex = fiber_stats_counter("futex_wakes");
	d->poll_wakes = fiber_stats_counter("poll_wakes");
	d->wakeups = fiber_stats_counter("wakeups");
	d->placements = fiber_stats_counter("wake_placements");
	fiber_pipe_destroy(p.ab);
	fiber_pipe_destroy(p.ba);
	assert_int_equal(fiber_shutdown(), 0);
}

/* H2 (seed 002): a wakeup onto the idle partner in the same LLC goes
 * through its wakelist with TTWU_QUEUE_IDLE... */
static void test_wake_runtime_same_llc_idle_uses_wakelist(void **state)
{
	struct deltas d;

	(void)state;
	run_split_pingpong("TTWU_QUEUE TTWU_QUEUE_IDLE", 50, &d);
	/* Each round trip wakes each side at least once, except the few
	 * wakeups that caught a fiber before it parked. */
	assert_true(d.pushes >= LOOPS);
	assert_true(d.direct < d.pushes / 10);
	/* Every wakeup is placed, except those handed back to the worker
	 * that was still leaving the fiber (the on_worker shortcut). */
	assert_true(d.placements <= d.wakeups);
	assert_true(d.placements >= d.wakeups - d.wakeups / 10);
}

/* ... and under the target's run-queue lock without it. */
static void test_wake_runtime_no_ttwu_queue_idle_enqueues_directly(void **state)
{
	struct deltas d;

	(void)state;
	run_split_pingpong("NO_TTWU_QUEUE_IDLE", 50, &d);
	/* Only the two creations from this (foreign) thread may use the
	 * wakelist. */
	assert_true(d.pushes <= 2);
	assert_true(d.direct >= LOOPS);
}

/* A polling partner is noticed for free; a sleeping one costs exactly
 * one futex wake per wakeup at most. */
static void test_wake_runtime_futex_only_for_sleepers(void **state)
{
	struct deltas polling, sleeping;

	(void)state;
	run_split_pingpong(NULL, 1000000, &polling);
	run_split_pingpong(NULL, 0, &sleeping);
	assert_true(polling.poll_wakes > polling.futex);
	assert_true(polling.futex <= 4); /* the workers' first sleeps */
	assert_true(sleeping.futex <= sleeping.wakeups + 2);
	assert_true(sleeping.futex > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(
			test_wake_runtime_same_llc_idle_uses_wakelist,
			stop_if_running),
		cmocka_unit_test_teardown(
			test_wake_runtime_no_ttwu_queue_idle_enqueues_directly,
			stop_if_running),
		cmocka_unit_test_teardown(
			test_wake_runtime_futex_only_for_sleepers,
			stop_if_running),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
