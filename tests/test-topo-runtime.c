/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-topo-runtime.c - the runtime on a synthetic topology bigger than
 * the machine ("pack:2 numa:1 l3:2 core:4 pu:2": 2 x 2 x 4 x 2 = 32 workers
 * on 2 cores), and the domain view rebuilt while fibers wake and block.
 * Public API only.
 */
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

#include "fiber.h"

#define TOPO "pack:2 numa:1 l3:2 core:4 pu:2"

static int start_synthetic(void)
{
	struct fiber_config c = { 0 };

	c.topology = TOPO;
	return fiber_init(&c);
}

static void *one(void *arg)
{
	(void)arg;
	return (void *)1;
}

static void *spawner(void *arg)
{
	long n = (long)arg, sum = 0;

	for (long i = 0; i < n; i += 50) {
		fiber_t f[50];
		void *r;

		for (int j = 0; j < 50; j++)
			if (fiber_create(&f[j], NULL, one, NULL))
				return (void *)-1L;
		for (int j = 0; j < 50; j++) {
			fiber_join(f[j], &r);
			sum += (long)r;
		}
	}
	return (void *)sum;
}

struct pp {
	fiber_pipe_t *ab, *ba;
	long loops;
};

static void *ping(void *arg)
{
	struct pp *p = arg;
	long bad = 0;

	for (long i = 0; i < p->loops; i++) {
		long v = i, back = -1;
		size_t d;

		fiber_pipe_write(p->ab, &v, sizeof(v), &d);
		fiber_pipe_read(p->ba, &back, sizeof(back), &d);
		bad += d != sizeof(back) || back != i + 1;
	}
	return (void *)bad;
}

static void *pong(void *arg)
{
	struct pp *p = arg;

	for (long i = 0; i < p->loops; i++) {
		long v;
		size_t d;

		fiber_pipe_read(p->ab, &v, sizeof(v), &d);
		v++;
		fiber_pipe_write(p->ba, &v, sizeof(v), &d);
	}
	return NULL;
}

/* 32 workers on a 2-core machine: 100,000 fibers and cross-package
 * ping-pong run correctly, and shutdown is clean (ASan in CI). */
static void test_topo_runtime_thirty_two_workers_on_two_cores(void **state)
{
	fiber_t s[4], a, b;
	fiber_attr_t aa, ab;
	cpu_set_t set;
	struct pp p;
	void *r;
	long total = 0;

	(void)state;
	assert_int_equal(start_synthetic(), 0);
	assert_int_equal(fiber_nr_workers(), 32);
	for (int i = 0; i < 4; i++)
		assert_int_equal(
			fiber_create(&s[i], NULL, spawner, (void *)25000L), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(fiber_join(s[i], &r), 0);
		total += (long)r;
	}
	assert_int_equal(total, 100000);

	/* Ping on worker 1 (package 0), pong on worker 30 (package 1). */
	assert_int_equal(fiber_pipe_create(&p.ab, 0), 0);
	assert_int_equal(fiber_pipe_create(&p.ba, 0), 0);
	p.loops = 20000;
	fiber_attr_init(&aa);
	fiber_attr_init(&ab);
	CPU_ZERO(&set);
	CPU_SET(1, &set);
	fiber_attr_setaffinity(&aa, sizeof(set), &set);
	CPU_ZERO(&set);
	CPU_SET(30, &set);
	fiber_attr_setaffinity(&ab, sizeof(set), &set);
	assert_int_equal(fiber_create(&a, &aa, ping, &p), 0);
	assert_int_equal(fiber_create(&b, &ab, pong, &p), 0);
	assert_int_equal(fiber_join(a, &r), 0);
	assert_null(r);
	assert_int_equal(fiber_join(b, NULL), 0);
	fiber_pipe_destroy(p.ab);
	fiber_pipe_destroy(p.ba);
	assert_int_equal(fiber_shutdown(), 0);
}

/* A ring of fibers that keep blocking and waking while the domain view
 * is rebuilt (ASYM_PACKING toggled) from the main thread. */
#define RING 1000
#define ROUNDS 20
static fiber_sem_t sems[RING];
static atomic_long passes;

static void *ring(void *arg)
{
	long i = (long)arg;

	for (int k = 0; k < ROUNDS; k++) {
		fiber_sem_post(&sems[(i + 1) % RING]);
		fiber_sem_wait(&sems[i]);
		atomic_fetch_add(&passes, 1);
	}
	return NULL;
}

static void test_topo_runtime_rebuild_while_fibers_block(void **state)
{
	fiber_t f[RING];

	(void)state;
	atomic_store(&passes, 0);
	assert_int_equal(start_synthetic(), 0);
	for (int i = 0; i < RING; i++)
		fiber_sem_init(&sems[i], 0);
	for (long i = 0; i < RING; i++)
		assert_int_equal(fiber_create(&f[i], NULL, ring, (void *)i), 0);
	for (int k = 0; k < 100; k++) {
		assert_int_equal(
			fiber_sched_features_set(k & 1 ? "NO_ASYM_PACKING" :
							 "ASYM_PACKING"),
			0);
		assert_int_equal(fiber_sched_feature_get("ASYM_PACKING"),
				 !(k & 1));
	}
	for (int i = 0; i < RING; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	assert_int_equal(atomic_load(&passes), (long)RING * ROUNDS);
	for (int i = 0; i < RING; i++)
		assert_int_equal(fiber_sem_destroy(&sems[i]), 0);
	assert_int_equal(fiber_shutdown(), 0);
}

static void test_topo_runtime_bad_topology_refused(void **state)
{
	struct fiber_config c = { 0 };

	(void)state;
	c.topology = "pack:2 bogus:7";
	assert_int_equal(fiber_init(&c), EINVAL);
	c.topology = "/nonexistent/file.xml";
	assert_int_equal(fiber_init(&c), EINVAL);
	assert_int_equal(fiber_nr_workers(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(
			test_topo_runtime_thirty_two_workers_on_two_cores,
			stop_if_running),
		cmocka_unit_test_teardown(
			test_topo_runtime_rebuild_while_fibers_block,
			stop_if_running),
		cmocka_unit_test_teardown(test_topo_runtime_bad_topology_refused,
					  stop_if_running),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
