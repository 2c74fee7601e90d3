/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-topo-rcu.c - publishing the domain view while plain pthreads read
 * it.  Readers walk every domain of every worker of the current view in a
 * loop while the main thread rebuilds and republishes it (switching
 * ASYM_PACKING as the API does); a reader touching a freed view is caught
 * by ASan, a torn view by the consistency checks.  The per-LLC counters must
 * survive rebuilds.
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

#include "common.h"
#include "topo.h"

#define NR_READERS 4
#define NR_REBUILDS 200
#define SPEC "pack:2 numa:1 l3:2 core:4 pu:2"

static atomic_int stop;
static atomic_long reads;
static atomic_int bad;

/* One pass over the view; returns false if it is inconsistent. */
static bool walk(const struct fb_sched_view *v)
{
	const struct fb_domain *d;
	bool asym = v->build_flags & FB_VIEW_ASYM_PACKING;

	if (v->nr_workers != 32)
		return false;
	for (int w = 0; w < v->nr_workers; w++) {
		int weight = 1;

		fb_for_each_domain(v, w, d)
		{
			if (d->span_weight <= weight ||
			    !fb_wmask_test(&d->span, w) || d->nr_groups < 2)
				return false;
			weight = d->span_weight;
		}
		if (weight != 32 || (v->sd_asym[w] != NULL) != asym ||
		    !fb_share_llc(v, w, v->llc_id[w]))
			return false;
	}
	return true;
}

static void *reader(void *arg)
{
	(void)arg;
	while (!fb_load_relaxed(&stop)) {
		struct fb_sched_view *v;

		fb_topo_read_lock();
		v = fb_topo_view_get();
		if (v) {
			struct fb_llc_shared *sh = v->llc_shared[5];

			fb_add_relaxed(&sh->nr_busy_workers, 1);
			if (!walk(v))
				fb_add_relaxed(&bad, 1);
			fb_add_relaxed(&sh->nr_busy_workers, -1);
		}
		fb_topo_read_unlock();
		fb_add_relaxed(&reads, 1);
	}
	return NULL;
}

static struct fb_topo *open_topo(void)
{
	struct fb_topo *t = NULL;
	char err[1024];

	assert_int_equal(fb_topo_open(&t, SPEC, err, sizeof(err)), 0);
	return t;
}

static void test_topo_rcu_rebuild_while_readers_run(void **state)
{
	struct fb_topo *t = open_topo();
	pthread_t th[NR_READERS];
	struct fb_llc_shared *sh;
	long before;

	(void)state;
	fb_store_relaxed(&stop, 0);
	assert_int_equal(fb_topo_view_rebuild(t, 0, 0), 0);
	sh = fb_topo_view_current->llc_shared[5];
	for (int i = 0; i < NR_READERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, reader, NULL), 0);
	for (int i = 0; i < NR_REBUILDS; i++) {
		before = fb_load_relaxed(&reads);
		assert_int_equal(
			fb_topo_view_rebuild(t, 0,
					     i % 2 ? FB_VIEW_ASYM_PACKING : 0),
			0);
		while (i % 20 == 0 && fb_load_relaxed(&reads) < before + 8)
			sched_yield();
	}
	fb_store_relaxed(&stop, 1);
	for (int i = 0; i < NR_READERS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(fb_load_relaxed(&bad), 0);
	assert_true(fb_load_relaxed(&reads) > 0);
	/* The LLC objects were taken over by every rebuild, never reset. */
	assert_ptr_equal(fb_topo_view_current->llc_shared[5], sh);
	assert_int_equal(fb_load_relaxed(&sh->nr_busy_workers), 8);
	fb_topo_view_publish(NULL);
	assert_null(fb_topo_view_current);
	fb_topo_close(t);
}

/* Readers that exited dropped their registration: grace periods do not
 * wait for them, and a thread that reads again registers again. */
static void test_topo_rcu_exited_readers_do_not_block(void **state)
{
	struct fb_topo *t = open_topo();
	pthread_t th;

	(void)state;
	assert_int_equal(fb_topo_view_rebuild(t, 0, 0), 0);
	for (int round = 0; round < 3; round++) {
		fb_store_relaxed(&stop, 0);
		assert_int_equal(pthread_create(&th, NULL, reader, NULL), 0);
		while (fb_load_relaxed(&reads) == 0)
			sched_yield();
		fb_store_relaxed(&stop, 1);
		pthread_join(th, NULL);
		assert_int_equal(fb_topo_view_rebuild(t, 0, 0), 0);
	}
	/* The main thread reads too, then lets go of its registration. */
	fb_topo_read_lock();
	fb_topo_read_lock();
	assert_true(walk(fb_topo_view_get()));
	fb_topo_read_unlock();
	fb_topo_read_unlock();
	fb_topo_rcu_unregister_thread();
	fb_topo_view_publish(NULL);
	fb_topo_close(t);
}

/* A view with other LLCs (fewer workers) gets its own LLC objects. */
static void test_topo_rcu_new_llcs_are_not_adopted(void **state)
{
	struct fb_topo *t = open_topo();
	struct fb_llc_shared *sh;

	(void)state;
	assert_int_equal(fb_topo_view_rebuild(t, 0, 0), 0);
	sh = fb_topo_view_current->llc_shared[0];
	fb_add_relaxed(&sh->nr_busy_workers, -3);
	assert_int_equal(fb_topo_view_rebuild(t, 0, FB_VIEW_ASYM_PACKING), 0);
	assert_ptr_equal(fb_topo_view_current->llc_shared[0], sh);
	assert_int_equal(fb_load_relaxed(&sh->nr_busy_workers), 5);
	assert_int_equal(fb_topo_view_rebuild(t, 6, 0), 0);
	assert_int_equal(
		fb_load_relaxed(
			&fb_topo_view_current->llc_shared[0]->nr_busy_workers),
		6);
	assert_int_equal(fb_topo_view_rebuild(t, 0, 0), 0);
	fb_topo_view_publish(NULL);
	fb_topo_close(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_topo_rcu_rebuild_while_readers_run),
		cmocka_unit_test(test_topo_rcu_exited_readers_do_not_block),
		cmocka_unit_test(test_topo_rcu_new_llcs_are_not_adopted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
