/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cond.c - fiber_cond_t, condition variables over fiber_mutex_t.
 *
 * A condition variable is a spinlock and a wait list.  fiber_cond_wait()
 * queues its waiter under the spinlock and releases the mutex before the
 * spinlock is dropped (by fb_waiter_wait()), so a signaller that took the
 * mutex after the waiter released it also takes the spinlock after the
 * waiter is queued: the release of the mutex and the start of the wait are
 * atomic with respect to signal and broadcast, as POSIX requires.  The lock
 * order is therefore cond spinlock -> mutex spinlock, and nothing takes
 * them the other way round.
 *
 * Signal wakes the first waiter; broadcast wakes them all under the
 * spinlock.  Waking after dropping it (from a private list) would hold up
 * other callers less, but a timed waiter's timer must find out under the
 * spinlock whether a waker has taken it (sched/timer.c), and a waiter on a
 * private list is taken but still linked.  The object is not touched after
 * broadcast drops the spinlock, so it may be destroyed when it returns.
 * Every woken waiter retakes the mutex before it returns.  A wait never
 * ends without a signal or broadcast, but callers should still loop on
 * their predicate, as with pthreads.
 */
#include "sync/sync.h"

struct fb_cond {
	struct fb_spinlock lock; /* guards waiters */
	struct fb_list waiters;	 /* struct fb_waiter.node, FIFO; @lock */
};

FB_SYNC_CHECK(fb_cond, fiber_cond_t);

/*
 * fiber_cond_init - make @cond an empty condition variable (the same as
 * zeroing it).  Context: any thread; nothing may use @cond concurrently.
 * Return: 0; EINVAL for NULL.
 */
int fiber_cond_init(fiber_cond_t *cond)
{
	if (!cond)
		return EINVAL;
	*cond = (fiber_cond_t)FIBER_COND_INITIALIZER;
	return 0;
}

/*
 * fiber_cond_destroy - end the life of @cond; it needs no cleanup.
 * Context: any thread.
 * Return: 0; EINVAL for NULL; EBUSY if something waits on it.
 */
int fiber_cond_destroy(fiber_cond_t *cond)
{
	struct fb_cond *c = FB_SYNC_OBJ(fb_cond, cond);
	int err = 0;

	if (!cond)
		return EINVAL;
	fb_spin_lock(&c->lock);
	if (fb_waitq_busy(&c->waiters))
		err = EBUSY;
	fb_spin_unlock(&c->lock);
	return err;
}

static int cond_wait_until(fiber_cond_t *cond, fiber_mutex_t *mutex,
			   uint64_t deadline)
{
	struct fb_cond *c = FB_SYNC_OBJ(fb_cond, cond);
	struct fb_mutex *m = FB_SYNC_OBJ(fb_mutex, mutex);
	struct fb_waiter w;
	int err;

	if (!cond || !mutex)
		return EINVAL;
	if (fb_load_relaxed(&m->owner) != fb_sync_self())
		return EPERM;
	err = fb_cancel_point(); /* with @mutex still held */
	if (err)
		return err;

	fb_spin_lock(&c->lock);
	fb_waiter_prepare(&w, FB_WAIT_COND | FB_WAIT_CANCELLABLE, c);
	fb_list_add_tail(&w.node, &c->waiters);
	fb_mutex_unlock(m);
	err = fb_waiter_wait_timed(&w, &c->lock, deadline);

	/* Cannot fail: the caller no longer holds @mutex. */
	fb_mutex_lock(m);
	return err;
}

/*
 * fiber_cond_wait - release @mutex, wait for a signal or broadcast on
 * @cond, and take @mutex again.
 * Context: fiber (parks) or any other thread (blocks), holding @mutex.
 * Return: 0; EINVAL for NULL; EPERM if the caller does not hold @mutex.
 */
int fiber_cond_wait(fiber_cond_t *cond, fiber_mutex_t *mutex)
{
	return cond_wait_until(cond, mutex, FB_NO_DEADLINE);
}

/*
 * fiber_cond_timedwait - fiber_cond_wait() that gives up at @abstime
 * (CLOCK_MONOTONIC).  @mutex is held again on every return but EINVAL and
 * EPERM.  Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ETIMEDOUT; EINVAL for NULL or a bad @abstime; EPERM if the
 * caller does not hold @mutex.
 */
int fiber_cond_timedwait(fiber_cond_t *cond, fiber_mutex_t *mutex,
			 const struct timespec *abstime)
{
	if (!fb_timespec_valid(abstime))
		return EINVAL;
	return cond_wait_until(cond, mutex, fb_deadline_from_timespec(abstime));
}

/*
 * fiber_cond_wait_until - fiber_cond_wait() that gives up when
 * fiber_now() reaches @deadline (CLOCK_MONOTONIC ns; FIBER_NO_DEADLINE:
 * never).  @mutex is held again on every return but EINVAL and EPERM.
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ETIMEDOUT; EINVAL for NULL; EPERM if the caller does not
 * hold @mutex.
 */
int fiber_cond_wait_until(fiber_cond_t *cond, fiber_mutex_t *mutex,
			  uint64_t deadline)
{
	return cond_wait_until(cond, mutex, deadline);
}

/*
 * fiber_cond_signal - wake the longest waiter of @cond, if any.
 * Context: any thread; never switches.
 * Return: 0; EINVAL for NULL.
 */
int fiber_cond_signal(fiber_cond_t *cond)
{
	struct fb_cond *c = FB_SYNC_OBJ(fb_cond, cond);

	if (!cond)
		return EINVAL;
	fb_spin_lock(&c->lock);
	fb_waitq_wake_one(&c->waiters, 0, 0);
	fb_spin_unlock(&c->lock);
	return 0;
}

/*
 * fiber_cond_broadcast - wake every waiter of @cond.
 * Context: any thread; never switches.
 * Return: 0; EINVAL for NULL.
 */
int fiber_cond_broadcast(fiber_cond_t *cond)
{
	struct fb_cond *c = FB_SYNC_OBJ(fb_cond, cond);

	if (!cond)
		return EINVAL;
	fb_spin_lock(&c->lock);
	fb_waitq_wake_all(&c->waiters, 0, 0);
	fb_spin_unlock(&c->lock);
	return 0;
}
