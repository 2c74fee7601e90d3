/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sync-cond.c - fiber_cond_t, condition variables over fiber_mutex_t.
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
 * Signal wakes the first waiter; broadcast takes the whole list under the
 * spinlock and wakes it after dropping it, so that ten thousand wakes do
 * not hold up other callers (and, once the list is taken, the object is
 * no longer touched, so it may be destroyed as soon as broadcast returns).
 * Every woken waiter retakes the mutex before it returns.  A wait never
 * ends without a signal or broadcast, but callers should still loop on
 * their predicate, as with pthreads.
 */
#include "sync.h"

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
	if (!fb_list_empty(&c->waiters))
		err = EBUSY;
	fb_spin_unlock(&c->lock);
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
	struct fb_cond *c = FB_SYNC_OBJ(fb_cond, cond);
	struct fb_mutex *m = FB_SYNC_OBJ(fb_mutex, mutex);
	struct fb_waiter w;

	if (!cond || !mutex)
		return EINVAL;
	if (fb_load_relaxed(&m->owner) != fb_sync_self())
		return EPERM;

	fb_spin_lock(&c->lock);
	fb_waiter_prepare(&w);
	fb_list_add_tail(&w.node, &c->waiters);
	fb_mutex_unlock(m);
	fb_waiter_wait(&w, &c->lock);

	/* Cannot fail: the caller no longer holds @mutex. */
	fb_mutex_lock(m);
	return 0;
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
	struct fb_list woken;

	if (!cond)
		return EINVAL;
	fb_spin_lock(&c->lock);
	fb_waitq_take_all(&c->waiters, &woken);
	fb_spin_unlock(&c->lock);
	fb_waitq_wake_all(&woken, 0, 0);
	return 0;
}
