/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-sim-engine.c - fiber-sim's engine (bench/sim) with workloads of
 * its own: a run whose fibers wait for each other for good is reported
 * as a deadlock, and a run that ends, or still has work, is not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sim.h"

static struct sim_sem sem;

/* Waits on a semaphore nobody posts. */
static enum sim_act waiter(struct sim *s, struct sim_fiber *f)
{
	return sim_sem_wait(s, f, &sem) ? SIM_EXIT : SIM_BLOCK;
}

/* Posts once after 1 us of work, then finishes the workload. */
static enum sim_act poster(struct sim *s, struct sim_fiber *f)
{
	if (f->pc++ == 0) {
		f->work = 1000;
		return SIM_COMPUTE;
	}
	sim_sem_post(s, f, &sem);
	sim_finish(s);
	return SIM_EXIT;
}

/* Computes for ever, in steps of 1 us. */
static enum sim_act spinner(struct sim *s, struct sim_fiber *f)
{
	(void)s;
	f->work = 1000;
	return SIM_COMPUTE;
}

static int stuck_setup(struct sim *s, const char *spec, char *err,
		       size_t errlen)
{
	(void)spec, (void)err, (void)errlen;
	sim_sem_init(&sem, 0);
	for (int i = 0; i < 2; i++)
		sim_create(s, NULL, waiter, 0, NULL)->detached = true;
	return 0;
}

static int posted_setup(struct sim *s, const char *spec, char *err,
			size_t errlen)
{
	(void)spec, (void)err, (void)errlen;
	sim_sem_init(&sem, 0);
	sim_create(s, NULL, waiter, 0, NULL)->detached = true;
	sim_create(s, NULL, poster, 0, NULL)->detached = true;
	return 0;
}

/* A waiter that nobody posts, beside a fiber that still computes. */
static int busy_setup(struct sim *s, const char *spec, char *err, size_t errlen)
{
	(void)spec, (void)err, (void)errlen;
	sim_sem_init(&sem, 0);
	sim_create(s, NULL, waiter, 0, NULL)->detached = true;
	sim_create(s, NULL, spinner, 0, NULL)->detached = true;
	return 0;
}

static void result(struct sim *s, struct sim_result *r)
{
	(void)s;
	r->metric = "none";
	r->unit = "";
	r->value = 0;
}

static int run(int (*setup)(struct sim *, const char *, char *, size_t),
	       uint64_t duration_ns)
{
	const struct sim_workload wl = { "test", "", setup, result, NULL };
	struct sim_opts o = { .topology = "pu:2",
			      .workload = "test",
			      .seed = 1,
			      .blocked_interval = 1,
			      .duration_ns = duration_ns,
			      .quiet = true };
	struct sim s;
	char err[256];
	int n;

	assert_int_equal(sim_open(&s, &o, err, sizeof(err)), 0);
	s.wl = &wl;
	sim_run(&s);
	n = s.nr_deadlocked;
	sim_close(&s);
	return n;
}

/* Both fibers block with no event left: the heap empties. */
static void test_deadlock_without_duration(void **state)
{
	(void)state;
	assert_int_equal(run(stuck_setup, 0), 2);
}

/* The same with --duration-ms: the run reaches its end idle. */
static void test_deadlock_with_duration(void **state)
{
	(void)state;
	assert_int_equal(run(stuck_setup, 5 * SIM_MS), 2);
}

static void test_finished_run(void **state)
{
	(void)state;
	assert_int_equal(run(posted_setup, 0), 0);
}

static void test_blocked_beside_work(void **state)
{
	(void)state;
	assert_int_equal(run(busy_setup, 5 * SIM_MS), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deadlock_without_duration),
		cmocka_unit_test(test_deadlock_with_duration),
		cmocka_unit_test(test_finished_run),
		cmocka_unit_test(test_blocked_beside_work),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
