/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-topo-rcu.c - publishing the domain view while plain pthreads read
 * it.  Readers walk every domain of every worker of the current view in a
 * loop while the main thread rebuilds and republishes it (switching
 * ASYM_PACKING as the API does); a reader touching a freed view is caught
 * by ASan, a torn view by the consistency checks.  The per-LLC counters must
 * survive rebuilds.  The same with simulated workers: pthreads that go
 * online as workers, read with free sections and report quiescent states
 * (and sometimes sleep), while the publisher checks that no reader still
 * holds the view it has just freed.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/common.h"
#include "topo/rcu.h"

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

		fb_for_each_domain (v, w, d) {
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

/* ---- simulated workers (QSBR) ------------------------------------------- */

#define NR_WORKERS 4

/* The view each worker holds inside its section, NULL outside. */
static struct fb_sched_view *_Atomic holding[NR_WORKERS];

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	unsigned long n = 0;

	fb_topo_worker_online(id);
	while (!fb_load_relaxed(&stop)) {
		struct fb_sched_view *v;

		fb_topo_read_lock();
		v = fb_topo_view_get();
		fb_store_seqcst(&holding[id], v);
		if (v && !walk(v))
			fb_add_relaxed(&bad, 1);
		fb_store_seqcst(&holding[id], NULL);
		fb_topo_read_unlock();
		fb_add_relaxed(&reads, 1);
		fb_topo_quiescent(id);
		if (++n % 64 == 0) {
			/* The idle sleep: publishers stop waiting, and a
			 * section in there goes through liburcu. */
			fb_topo_worker_sleep(id);
			fb_topo_read_lock();
			v = fb_topo_view_get();
			if (v && !walk(v))
				fb_add_relaxed(&bad, 1);
			fb_topo_read_unlock();
			usleep(50);
			fb_topo_worker_wake(id);
		}
	}
	fb_topo_worker_offline(id);
	return NULL;
}

static void test_topo_rcu_workers_never_hold_a_freed_view(void **state)
{
	struct fb_topo *t = open_topo();
	pthread_t th[NR_WORKERS], fth;
	struct fb_sched_view *old;
	long before;

	(void)state;
	fb_store_relaxed(&stop, 0);
	fb_store_relaxed(&bad, 0);
	assert_int_equal(fb_topo_view_rebuild(t, 0, 0), 0);
	for (int i = 0; i < NR_WORKERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, worker,
						(void *)(intptr_t)i),
				 0);
	assert_int_equal(pthread_create(&fth, NULL, reader, NULL), 0);
	for (int i = 0; i < NR_REBUILDS; i++) {
		before = fb_load_relaxed(&reads);
		old = fb_load_relaxed(&fb_topo_view_current);
		assert_int_equal(
			fb_topo_view_rebuild(t, 0,
					     i % 2 ? FB_VIEW_ASYM_PACKING : 0),
			0);
		/* Freed: no worker may still be inside a section on it. */
		for (int w = 0; w < NR_WORKERS; w++)
			assert_ptr_not_equal(fb_load_seqcst(&holding[w]), old);
		while (i % 20 == 0 && fb_load_relaxed(&reads) < before + 8)
			sched_yield();
	}
	fb_store_relaxed(&stop, 1);
	for (int i = 0; i < NR_WORKERS; i++)
		pthread_join(th[i], NULL);
	pthread_join(fth, NULL);
	assert_int_equal(fb_load_relaxed(&bad), 0);
	fb_topo_view_publish(NULL);
	fb_topo_close(t);
}

/* A worker that is inside a section (it has not reported since the
 * publication) holds the publisher up; its report releases it. */
static atomic_int step;
static atomic_int published;

static void *worker_in_section(void *arg)
{
	(void)arg;
	fb_topo_worker_online(0);
	fb_topo_read_lock();
	assert_non_null(fb_topo_view_get());
	fb_store_seqcst(&step, 1);
	while (fb_load_seqcst(&step) != 2)
		sched_yield();
	fb_topo_read_unlock();
	/* Keep passing scheduling points, as a real worker does: a
	 * publisher that took its snapshot after one report waits for the
	 * next (under load the publisher may get there only now). */
	while (fb_load_seqcst(&step) != 3) {
		fb_topo_quiescent(0);
		sched_yield();
	}
	fb_topo_worker_offline(0);
	return NULL;
}

static void *publisher(void *arg)
{
	assert_int_equal(fb_topo_view_rebuild(arg, 0, 0), 0);
	fb_store_seqcst(&published, 1);
	return NULL;
}

static void test_topo_rcu_publish_waits_for_worker_report(void **state)
{
	struct fb_topo *t = open_topo();
	pthread_t wt, pt;

	(void)state;
	fb_store_seqcst(&step, 0);
	fb_store_seqcst(&published, 0);
	assert_int_equal(fb_topo_view_rebuild(t, 0, 0), 0);
	assert_int_equal(pthread_create(&wt, NULL, worker_in_section, NULL), 0);
	while (fb_load_seqcst(&step) != 1)
		sched_yield();
	assert_int_equal(pthread_create(&pt, NULL, publisher, t), 0);
	for (int i = 0; i < 2000; i++)
		sched_yield();
	assert_int_equal(fb_load_seqcst(&published), 0);
	fb_store_seqcst(&step, 2);
	pthread_join(pt, NULL);
	assert_int_equal(fb_load_seqcst(&published), 1);
	fb_store_seqcst(&step, 3);
	pthread_join(wt, NULL);
	fb_topo_view_publish(NULL);
	fb_topo_close(t);
}

/*
 * A switch (the API's feature path) does not wait for a worker inside a
 * section: it returns at once, and the view it replaced stays allocated
 * until the worker has reported; a later publish frees it then.
 */
static void test_topo_rcu_switch_never_waits_and_frees_later(void **state)
{
	struct fb_topo *t = open_topo();
	pthread_t wt;
	long freed;
	int tries = 0;

	(void)state;
	if (!fb_topo_rcu_qsbr()) { /* workers read through liburcu */
		fb_topo_close(t);
		skip();
	}
	fb_store_seqcst(&step, 0);
	assert_int_equal(fb_topo_view_rebuild(t, 0, 0), 0);
	assert_int_equal(pthread_create(&wt, NULL, worker_in_section, NULL), 0);
	while (fb_load_seqcst(&step) != 1)
		sched_yield();
	freed = fb_load_seqcst(&fb_topo_views_freed);
	/* The worker holds the view in its section and does not report:
	 * a publish would wait here for ever. */
	assert_int_equal(
		fb_topo_view_rebuild_nowait(t, 0, FB_VIEW_ASYM_PACKING), 0);
	assert_int_equal(
		fb_topo_view_rebuild_nowait(t, 0, FB_VIEW_ASYM_PACKING), 0);
	assert_int_equal(fb_load_seqcst(&fb_topo_views_freed), freed);
	fb_store_seqcst(&step, 2); /* it leaves and reports from now on */
	while (fb_load_seqcst(&fb_topo_views_freed) < freed + 2 &&
	       tries++ < 100000) {
		assert_int_equal(fb_topo_view_rebuild_nowait(t, 0, 0), 0);
		sched_yield();
	}
	assert_true(fb_load_seqcst(&fb_topo_views_freed) >= freed + 2);
	fb_store_seqcst(&step, 3);
	pthread_join(wt, NULL);
	fb_topo_view_publish(NULL); /* waits, and frees every deferred one */
	fb_topo_close(t);
}

/* A sleeping worker does not hold publishers up, nor does a publisher
 * that is a worker wait for itself. */
static void *worker_publishes(void *arg)
{
	fb_topo_worker_online(1);
	fb_topo_read_lock();
	assert_non_null(fb_topo_view_get());
	fb_topo_read_unlock();
	fb_topo_quiescent(1);
	assert_int_equal(fb_topo_view_rebuild(arg, 0, FB_VIEW_ASYM_PACKING), 0);
	fb_topo_read_lock();
	assert_non_null(fb_topo_view_get()->sd_asym[0]);
	fb_topo_read_unlock();
	fb_topo_worker_offline(1);
	return NULL;
}

static void
test_topo_rcu_sleeping_and_publishing_workers_do_not_block(void **state)
{
	struct fb_topo *t = open_topo();
	pthread_t pt;

	(void)state;
	assert_int_equal(fb_topo_view_rebuild(t, 0, 0), 0);
	/* The main thread plays worker 0 and goes to sleep. */
	fb_topo_worker_online(0);
	fb_topo_quiescent(0);
	fb_topo_worker_sleep(0);
	assert_int_equal(pthread_create(&pt, NULL, worker_publishes, t), 0);
	pthread_join(pt, NULL);
	fb_topo_worker_wake(0);
	fb_topo_read_lock();
	assert_non_null(fb_topo_view_get()->sd_asym[0]);
	fb_topo_read_unlock();
	fb_topo_worker_offline(0);
	fb_topo_rcu_unregister_thread();
	fb_topo_view_publish(NULL);
	fb_topo_close(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_topo_rcu_rebuild_while_readers_run),
		cmocka_unit_test(test_topo_rcu_exited_readers_do_not_block),
		cmocka_unit_test(test_topo_rcu_new_llcs_are_not_adopted),
		cmocka_unit_test(test_topo_rcu_workers_never_hold_a_freed_view),
		cmocka_unit_test(test_topo_rcu_publish_waits_for_worker_report),
		cmocka_unit_test(
			test_topo_rcu_switch_never_waits_and_frees_later),
		cmocka_unit_test(
			test_topo_rcu_sleeping_and_publishing_workers_do_not_block),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
