/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-idle-runtime.c - what a worker does when it runs out of work
 * (sched/idle.c), white box: the idle-entry refresh of the LLC's SIS_UTIL
 * scan depth (doc/scheduler.md 2.2.1), the one writer while every worker
 * of an LLC is idle.  Assertions read the shared word; time only paces
 * the test thread, with bounded waits.
 */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sched/sched.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *nothing(void *arg)
{
	return arg;
}

static int read_depth(int w)
{
	struct fb_place_view v;
	int n;

	fb_sched_view_enter(&v);
	n = fb_load_relaxed(&v.topo->llc_shared[w]->nr_idle_scan);
	fb_sched_view_exit();
	return n;
}

static void write_depth(int w, int n)
{
	struct fb_place_view v;

	fb_sched_view_enter(&v);
	fb_store_relaxed(&v.topo->llc_shared[w]->nr_idle_scan, n);
	fb_sched_view_exit();
}

/* A depth of 0 left from a busy period (the periodic balance wrote it)
 * while the LLC has gone idle: no balance runs any more, so only a worker
 * entering its idle loop can raise it again, to the whole LLC (4). */
static void test_idle_entry_refreshes_sis_util_depth(void **state)
{
	struct fiber_config c = { 0 };
	fiber_attr_t a;
	cpu_set_t s;
	fiber_t f;
	uint64_t end;
	int n;

	(void)state;
	c.workers = 4;
	c.topology = "pack:1 l3:1 core:4 pu:1";
	c.sched_features = "SIS_UTIL";
	c.stats = "0";
	assert_int_equal(fiber_init(&c), 0);
	usleep(20000); /* past every worker's refresh cadence (4 ms) */
	write_depth(0, 0);
	fiber_attr_init(&a);
	CPU_ZERO(&s);
	CPU_SET(0, &s);
	fiber_attr_setaffinity(&a, sizeof(s), &s);
	assert_int_equal(fiber_create(&f, &a, nothing, NULL), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	fiber_attr_destroy(&a);
	end = now_ns() + 2000000000ull;
	while (!(n = read_depth(0)) && now_ns() < end)
		usleep(1000);
	assert_int_equal(n, 4);
	assert_int_equal(fiber_shutdown(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_entry_refreshes_sis_util_depth),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
