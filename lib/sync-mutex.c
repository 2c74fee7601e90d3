/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sync-mutex.c - fiber_mutex_t, a sleeping mutex for fibers and threads.
 *
 * The state word carries the uncontended case alone: lock is one CAS from
 * UNLOCKED to LOCKED, unlock one CAS back (the inline halves in sync.h).  A
 * caller that finds the mutex held takes the spinlock, exchanges the word
 * to CONTENDED (which also takes the mutex, should it have become free
 * meanwhile) and queues a waiter in the same critical section.  An unlock
 * that finds CONTENDED fails its CAS, takes the spinlock, frees the word
 * and wakes the first waiter, which then retries from the start.
 *
 * No wakeup is lost.  A waiter marks the word and queues itself under the
 * spinlock, so an unlocker either ran its CAS before the exchange (which
 * then reads UNLOCKED and owns the mutex) or fails its CAS and must take
 * the spinlock, after which the waiter is on the list.
 *
 * There is no hand-off: the woken waiter competes with callers that arrive
 * meanwhile, and one of those may take the mutex first (the woken waiter
 * then marks CONTENDED again and queues at the tail).  This trades
 * fairness for throughput, as most futex mutexes do: a running fiber keeps
 * its cache-hot critical section instead of waiting for the wakee to be
 * scheduled.  A waiter may mark CONTENDED with nobody left behind it; the
 * next unlock then takes the slow path for nothing, which is harmless.
 *
 * The owner field exists for the errors pthreads calls "error checking":
 * EPERM on an unlock by a non-owner and EDEADLK on a relock by the owner.
 */
#include "sync.h"

int fb_mutex_lock_slow(struct fb_mutex *m, uintptr_t self)
{
	struct fb_waiter w;

	if (fb_load_relaxed(&m->owner) == self)
		return EDEADLK;
	for (;;) {
		fb_spin_lock(&m->lock);
		if (atomic_exchange_explicit(&m->state, FB_MUTEX_CONTENDED,
					     memory_order_acquire) ==
		    FB_MUTEX_UNLOCKED)
			break;
		fb_waiter_prepare(&w);
		fb_list_add_tail(&w.node, &m->waiters);
		fb_waiter_wait(&w, &m->lock);
	}
	fb_spin_unlock(&m->lock);
	fb_store_relaxed(&m->owner, self);
	return 0;
}

void fb_mutex_unlock_slow(struct fb_mutex *m)
{
	fb_spin_lock(&m->lock);
	fb_store_release(&m->state, FB_MUTEX_UNLOCKED);
	fb_waitq_wake_one(&m->waiters, 0, 0);
	fb_spin_unlock(&m->lock);
}

/*
 * fiber_mutex_init - make @mutex a free mutex (the same as zeroing it).
 * Context: any thread; nothing may use @mutex concurrently.
 * Return: 0; EINVAL for NULL.
 */
int fiber_mutex_init(fiber_mutex_t *mutex)
{
	if (!mutex)
		return EINVAL;
	*mutex = (fiber_mutex_t)FIBER_MUTEX_INITIALIZER;
	return 0;
}

/*
 * fiber_mutex_destroy - end the life of @mutex; it needs no cleanup.
 * Context: any thread.
 * Return: 0; EINVAL for NULL; EBUSY if it is held or waited for.
 */
int fiber_mutex_destroy(fiber_mutex_t *mutex)
{
	struct fb_mutex *m = FB_SYNC_OBJ(fb_mutex, mutex);
	int err = 0;

	if (!mutex)
		return EINVAL;
	fb_spin_lock(&m->lock);
	if (fb_load_relaxed(&m->state) != FB_MUTEX_UNLOCKED ||
	    !fb_list_empty(&m->waiters))
		err = EBUSY;
	fb_spin_unlock(&m->lock);
	return err;
}

/*
 * fiber_mutex_lock - take @mutex, waiting while another caller holds it.
 * Context: fiber (parks it) or any other thread (blocks it).
 * Return: 0; EINVAL for NULL; EDEADLK if the caller holds it already.
 */
int fiber_mutex_lock(fiber_mutex_t *mutex)
{
	if (!mutex)
		return EINVAL;
	return fb_mutex_lock(FB_SYNC_OBJ(fb_mutex, mutex));
}

/*
 * fiber_mutex_trylock - take @mutex if it is free.
 * Context: any thread; never switches.
 * Return: 0; EINVAL for NULL; EBUSY if it is held (by anyone, the caller
 * included).
 */
int fiber_mutex_trylock(fiber_mutex_t *mutex)
{
	struct fb_mutex *m = FB_SYNC_OBJ(fb_mutex, mutex);
	unsigned int old = FB_MUTEX_UNLOCKED;

	if (!mutex)
		return EINVAL;
	if (!atomic_compare_exchange_strong_explicit(
		    &m->state, &old, FB_MUTEX_LOCKED, memory_order_acquire,
		    memory_order_relaxed))
		return EBUSY;
	fb_store_relaxed(&m->owner, fb_sync_self());
	return 0;
}

/*
 * fiber_mutex_unlock - release @mutex and wake one waiter, if any.
 * Context: the fiber or thread that took it; never switches.
 * Return: 0; EINVAL for NULL; EPERM if the caller does not hold it.
 */
int fiber_mutex_unlock(fiber_mutex_t *mutex)
{
	if (!mutex)
		return EINVAL;
	return fb_mutex_unlock(FB_SYNC_OBJ(fb_mutex, mutex));
}
