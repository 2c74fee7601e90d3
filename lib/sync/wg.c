/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * wg.c - fiber_wg_t, wait groups: a counter of outstanding work and the
 * callers waiting for it to reach 0.
 *
 * A count and a wait list under one spinlock.  The add that brings the
 * count to 0 claims every waiter under the lock (sync/sync.h), drops the
 * lock and only then wakes them, from its private list: a woken waiter may
 * destroy and free the group the moment it returns, and the adder touches
 * nothing of it after the unlock.  A waiter that times out or is
 * cancelled unlinks itself under the lock, so destroy (which counts such
 * leavers) never frees a group something still reaches.  Waiters exist
 * only while the count is above 0.
 */
#include <limits.h>

#include "sync/sync.h"

struct fb_wg {
	struct fb_spinlock lock; /* guards count and waiters */
	int count;		 /* outstanding work; @lock */
	struct fb_list waiters;	 /* struct fb_waiter.node; @lock */
};

FB_SYNC_CHECK(fb_wg, fiber_wg_t);

/*
 * fiber_wg_init - make @wg a wait group with a count of 0.
 * Context: any thread; nothing may use @wg concurrently.
 * Return: 0; EINVAL for NULL.
 */
int fiber_wg_init(fiber_wg_t *wg)
{
	if (!wg)
		return EINVAL;
	*wg = (fiber_wg_t){ { 0 } };
	return 0;
}

/*
 * fiber_wg_destroy - end the life of @wg; it needs no cleanup.  A count
 * above 0 with nobody waiting is no obstacle.
 * Context: any thread.
 * Return: 0; EINVAL for NULL; EBUSY if something waits on it.
 */
int fiber_wg_destroy(fiber_wg_t *wg)
{
	struct fb_wg *g = FB_SYNC_OBJ(fb_wg, wg);
	int err = 0;

	if (!wg)
		return EINVAL;
	fb_spin_lock(&g->lock);
	if (fb_waitq_busy(&g->waiters))
		err = EBUSY;
	fb_spin_unlock(&g->lock);
	return err;
}

/*
 * fiber_wg_add - add @delta (may be negative) to the count of @wg; at 0,
 * every waiter returns.
 * Context: any thread; never switches.
 * Return: 0; EINVAL for NULL or a count that would go below 0; EOVERFLOW
 * for one above INT_MAX (the count is unchanged on error).
 */
int fiber_wg_add(fiber_wg_t *wg, int delta)
{
	struct fb_wg *g = FB_SYNC_OBJ(fb_wg, wg);
	struct fb_list woken;
	long sum;

	if (!wg)
		return EINVAL;
	fb_spin_lock(&g->lock);
	sum = (long)g->count + delta;
	if (sum < 0 || sum > INT_MAX) {
		fb_spin_unlock(&g->lock);
		return sum < 0 ? EINVAL : EOVERFLOW;
	}
	g->count = (int)sum;
	if (sum > 0) {
		fb_spin_unlock(&g->lock);
		return 0;
	}
	fb_waitq_take_all(&g->waiters, &woken);
	fb_spin_unlock(&g->lock);
	/* @wg may be freed from here on. */
	fb_waitq_wake_taken(&woken, 0, 0);
	return 0;
}

/*
 * fiber_wg_done - fiber_wg_add(@wg, -1).
 * Context: any thread; never switches.
 * Return: 0; EINVAL for NULL or a count already 0.
 */
int fiber_wg_done(fiber_wg_t *wg)
{
	return fiber_wg_add(wg, -1);
}

/*
 * fiber_wg_wait_until - wait until the count of @wg is 0, or fiber_now()
 * reaches @deadline (FIBER_NO_DEADLINE: never).  A count that is 0
 * returns at once whatever the deadline.  A cancellation point.
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ETIMEDOUT; ECANCELED (fiber_cancel); EINVAL for NULL.
 */
int fiber_wg_wait_until(fiber_wg_t *wg, uint64_t deadline)
{
	struct fb_wg *g = FB_SYNC_OBJ(fb_wg, wg);
	struct fb_waiter w;
	int err;

	if (!wg)
		return EINVAL;
	err = fb_cancel_point();
	if (err)
		return err;
	fb_spin_lock(&g->lock);
	if (g->count == 0) {
		fb_spin_unlock(&g->lock);
		return 0;
	}
	fb_waiter_prepare(&w, FB_WAIT_WG | FB_WAIT_CANCELLABLE, g);
	fb_list_add_tail(&w.node, &g->waiters);
	return fb_waiter_wait_timed(&w, &g->lock, deadline);
}

/*
 * fiber_wg_wait - fiber_wg_wait_until() without a deadline.
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ECANCELED; EINVAL for NULL.
 */
int fiber_wg_wait(fiber_wg_t *wg)
{
	return fiber_wg_wait_until(wg, FB_NO_DEADLINE);
}
