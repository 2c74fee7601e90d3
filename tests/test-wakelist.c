/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-wakelist.c - the worker's side of the wakelist handoff
 * (doc/scheduler.md 3.2.2 and 3.2.4), white box on one worker: a foreign
 * thread wakes four fibers while the worker is stopped inside the switch
 * away from the last of them (fb_test_switch_hook), so that
 *  - the last one is still leaving its worker and goes through the
 *    wakelist of that worker (the on_worker push, not a wait);
 *  - ttwu_pending is set while the handoffs are in flight;
 *  - ttwu_pending stays set until the drained fibers are queued (the test
 *    holds the run-queue lock across the drain and watches it);
 *  - the fibers run in wake order (the creations from this thread go
 *    through the wakelist too: a drain in the wrong order shows first
 *    there, as the last fiber running first).
 * Assertions use counters and the order the fibers ran in; the waits are
 * bounded and only pace the two sides.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "sched/sched.h"

#define NR 4 /* fibers; the last one is the one stopped while leaving */

struct slot {
	struct fb_spinlock lock;
	bool signalled;
	struct fb_waiter *waiter;
};

static struct slot slots[NR];
static atomic_int order[NR], nr_ran;
static struct fb_fiber *_Atomic leaving; /* fiber the hook stops */
static atomic_int in_hook, woken, pending_in_hook;

static void slot_signal(struct slot *s)
{
	struct fb_waiter *w;

	fb_spin_lock(&s->lock);
	w = s->waiter;
	s->waiter = NULL;
	s->signalled = true;
	if (w)
		fb_waiter_wake(w, 0);
	fb_spin_unlock(&s->lock);
}

static void slot_wait(struct slot *s)
{
	struct fb_waiter w;

	fb_spin_lock(&s->lock);
	if (s->signalled) {
		fb_spin_unlock(&s->lock);
		return;
	}
	fb_waiter_prepare(&w, FB_WAIT_NONE, s);
	s->waiter = &w;
	fb_waiter_wait(&w, &s->lock);
}

static bool parked(struct slot *s)
{
	bool r;

	fb_spin_lock(&s->lock);
	r = s->waiter != NULL;
	fb_spin_unlock(&s->lock);
	return r;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* wait_for - spin until *@v is nonzero, at most @s seconds; Return: *@v. */
static int wait_for(atomic_int *v, unsigned s)
{
	uint64_t end = now_ns() + s * 1000000000ull;

	while (!atomic_load(v) && now_ns() < end)
		sched_yield();
	return atomic_load(v);
}

/* The switch away from @leaving: hold it until the foreign thread has
 * woken everyone (at most 20 s, for a loaded CI machine: a waker that
 * waits for on_worker instead of pushing would wait for us), and note
 * ttwu_pending meanwhile. */
static void hold_switch(void)
{
	struct fb_worker *w = fb_worker_self();

	if (!w || fb_current() != atomic_load(&leaving))
		return;
	atomic_store(&leaving, NULL);
	atomic_store(&in_hook, 1);
	wait_for(&woken, 20);
	atomic_store(&pending_in_hook,
		     (int)fb_load_relaxed(&w->pw.ttwu_pending));
}

static void *member(void *arg)
{
	int i = (int)(long)arg;

	if (i == NR - 1)
		atomic_store(&leaving, fb_current());
	slot_wait(&slots[i]);
	order[atomic_fetch_add(&nr_ran, 1)] = i;
	return NULL;
}

static void test_wakelist_handoff_on_one_worker(void **state)
{
	struct fiber_config c = { 0 };
	struct fb_worker *w;
	fiber_t f[NR];
	int held_pending = 1;
	uint64_t end;

	(void)state;
	memset(slots, 0, sizeof(slots));
	atomic_store(&nr_ran, 0);
	atomic_store(&in_hook, 0);
	atomic_store(&woken, 0);
	atomic_store(&pending_in_hook, -1);
	c.workers = 1;
	c.sched_features = "TTWU_QUEUE";
	c.stats = "0";
	fb_test_switch_hook = hold_switch;
	assert_int_equal(fiber_init(&c), 0);
	w = fb_rt->workers[0];
	for (long i = 0; i < NR; i++)
		assert_int_equal(fiber_create(&f[i], NULL, member, (void *)i),
				 0);
	/* 0 .. NR-2 have parked; NR-1 is stopped inside its switch. */
	assert_true(wait_for(&in_hook, 10));
	for (int i = 0; i < NR - 1; i++)
		assert_true(parked(&slots[i]));
	for (int i = 0; i < NR; i++)
		slot_signal(&slots[i]);
	/* Every fiber is on the wakelist; hold the run-queue lock so that
	 * the drain stops between taking the list and queueing it. */
	fb_spin_lock(&w->rq_lock);
	atomic_store(&woken, 1);
	end = now_ns() + 2000000000ull;
	while (fb_load_relaxed(&w->pw.wakelist) && now_ns() < end)
		sched_yield();
	assert_null(fb_load_relaxed(&w->pw.wakelist)); /* taken */
	end = now_ns() + 50000000ull; /* the drain spins on our lock */
	while (now_ns() < end && held_pending)
		held_pending = (int)fb_load_acquire(&w->pw.ttwu_pending);
	fb_spin_unlock(&w->rq_lock);
	for (int i = 0; i < NR; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	fb_test_switch_hook = NULL;
	assert_int_equal(atomic_load(&pending_in_hook), 1);
	assert_int_equal(held_pending, 1);
	assert_int_equal(fiber_stats_counter("wake_on_worker"), 1);
	assert_true(fiber_stats_counter("wakelist_pushes") >= NR);
	for (int i = 0; i < NR; i++)
		assert_int_equal(order[i], i);
	assert_int_equal(fb_load_relaxed(&w->pw.ttwu_pending), 0);
	assert_int_equal(fiber_shutdown(), 0);
}

/*
 * ttwu_pending is cleared only after the drained fibers are counted in
 * nr_running: a lock-free waker that reads ttwu_pending == 0 must not
 * find nr_running == 0 for a worker that is queueing a wakelist, or it
 * takes that worker for idle and stacks wakeups on it (the Linux 6.2
 * regression).  A worker and fibers of our own, no runtime: an observer
 * thread spins on ttwu_pending, and the first time it reads 0 it reads
 * nr_running, which must then hold all of them.  Clearing the flag
 * before the fibers are queued opens a window of MOVE_NR insertions,
 * which the observer falls into in most rounds.
 */
#define MOVE_NR 2000
#define MOVE_ROUNDS 200

static struct fb_worker *mw;
static atomic_int mw_watching, mw_seen;

static void *watch_pending(void *arg)
{
	(void)arg;
	atomic_store(&mw_watching, 1);
	while (fb_load_acquire(&mw->pw.ttwu_pending))
		fb_cpu_relax();
	atomic_store(&mw_seen, fb_load_relaxed(&mw->pw.nr_running));
	return NULL;
}

static void test_wakelist_pending_cleared_after_counting(void **state)
{
	struct fb_fiber **f = calloc(MOVE_NR, sizeof(*f));
	int early = 0;

	(void)state;
	assert_non_null(f);
	mw = aligned_alloc(64, (sizeof(*mw) + 63) / 64 * 64);
	assert_non_null(mw);
	memset(mw, 0, sizeof(*mw));
	for (int i = 0; i < MOVE_NR; i++) {
		f[i] = aligned_alloc(64, (sizeof(*f[i]) + 63) / 64 * 64);
		assert_non_null(f[i]);
		memset(f[i], 0, sizeof(*f[i]));
	}
	for (int r = 0; r < MOVE_ROUNDS; r++) {
		struct fb_fiber *head = NULL;
		pthread_t t;

		fb_list_init(&mw->rq);
		fb_store_relaxed(&mw->pw.nr_running, 0);
		for (int i = 0; i < MOVE_NR; i++) { /* as push() leaves them */
			fb_store_relaxed(&f[i]->wl_next, head);
			head = f[i];
		}
		fb_store_relaxed(&mw->pw.wakelist, head);
		fb_store_seqcst(&mw->pw.ttwu_pending, 1);
		atomic_store(&mw_watching, 0);
		atomic_store(&mw_seen, -1);
		assert_int_equal(pthread_create(&t, NULL, watch_pending, NULL),
				 0);
		while (!atomic_load(&mw_watching))
			sched_yield();
		assert_int_equal(fb_sched_wakelist_move(mw, true), MOVE_NR);
		assert_int_equal(pthread_join(t, NULL), 0);
		if (atomic_load(&mw_seen) != MOVE_NR)
			early++;
		assert_null(fb_load_relaxed(&mw->pw.wakelist));
		assert_int_equal(fb_load_relaxed(&mw->pw.nr_running), MOVE_NR);
	}
	assert_int_equal(early, 0);
	for (int i = 0; i < MOVE_NR; i++)
		free(f[i]);
	free(f);
	free(mw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wakelist_handoff_on_one_worker),
		cmocka_unit_test(test_wakelist_pending_cleared_after_counting),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
