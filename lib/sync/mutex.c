/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * mutex.c - fiber_mutex_t, a sleeping mutex for fibers and threads.
 *
 * The state word carries the uncontended case alone: lock is one CAS that
 * sets LOCKED in a free word, unlock one CAS that clears it again (the
 * inline halves in sync/sync.h).  A caller that finds the mutex held takes the
 * spinlock, marks the word CONTENDED (taking the mutex instead, should it
 * have become free meanwhile) and queues a waiter in the same critical
 * section.  An unlock that finds CONTENDED takes the spinlock, frees the
 * word and wakes the first waiter, which then retries from the start.
 * Every change of the word but the two fast paths is a CAS under the
 * spinlock.

 * No wakeup is lost.  A waiter marks the word and queues itself under the
 * spinlock, so an unlocker either ran its CAS before the mark (and the
 * waiter's CAS then sees UNLOCKED and owns the mutex) or fails its CAS and
 * must take the spinlock, after which the waiter is on the list.
 *
 * An unlock wakes nobody while an earlier wakee has not come back yet:
 * that one will take the mutex, or find it held and mark it CONTENDED
 * again, so the holder's unlock wakes the next; waking more would only
 * fill the run queues with lockers that queue again.
 *
 * There is no hand-off: the woken waiter competes with callers that arrive
 * meanwhile, and one of those may take the mutex first (the woken waiter
 * then marks CONTENDED again and queues at the tail).  This trades
 * fairness for throughput, as most futex mutexes do: a running fiber keeps
 * its cache-hot critical section instead of waiting for the wakee to be
 * scheduled.  A waiter may mark CONTENDED with nobody left behind it; the
 * next unlock then takes the slow path for nothing, which is harmless.
 *
 * Lifetime.  A woken waiter comes back to the mutex after it was woken, so
 * until it has, the mutex is in use though it may look free.  The unlock
 * that wakes it adds FB_MUTEX_WOKEN to the word, and the waiter takes it
 * off again under the spinlock when it is back; destroy says EBUSY while
 * the word is not 0.  So "unlock, destroy, free" by the last user is
 * safe: either destroy fails, or nobody will touch the memory again (the
 * unlocker's own last touch, its spinlock release, comes before anyone
 * else can take the spinlock).  The fast paths leave the count alone and
 * look only at the lock bits, so a holder that relocks while its wakee is
 * on the way back stays on them.
 *
 * The owner field exists for the errors pthreads calls "error checking":
 * EPERM on an unlock by a non-owner and EDEADLK on a relock by the owner.
 * It holds an id that is never reused (sync/sync.h), not an address.
 */
#include "sync/sync.h"

int fb_mutex_lock_slow(struct fb_mutex *m, uint64_t self)
{
	unsigned int back = 0, s, n;
	struct fb_waiter w;

	if (fb_load_relaxed(&m->owner) == self)
		return EDEADLK;
	for (;;) {
		fb_spin_lock(&m->lock);
		s = fb_load_relaxed(&m->state);
		for (;;) {
			n = (s - back) & ~FB_MUTEX_HELD;
			if (atomic_compare_exchange_weak_explicit(
				    &m->state, &s, n | FB_MUTEX_CONTENDED,
				    memory_order_acquire, memory_order_relaxed))
				break;
		}
		back = 0;
		if ((s & FB_MUTEX_HELD) == FB_MUTEX_UNLOCKED)
			break; /* taken (marked CONTENDED: harmless) */
		fb_waiter_prepare(&w, FB_WAIT_MUTEX, m);
		fb_list_add_tail(&w.node, &m->waiters);
		fb_waiter_wait(&w, &m->lock);
		back = FB_MUTEX_WOKEN; /* the unlock that woke us counted us */
	}
	fb_spin_unlock(&m->lock);
	fb_store_relaxed(&m->owner, self);
	return 0;
}

void fb_mutex_unlock_slow(struct fb_mutex *m)
{
	struct fb_waiter *w;
	unsigned int s, n;

	fb_spin_lock(&m->lock);
	s = fb_load_relaxed(&m->state);
	/* A woken locker is on its way back: it takes the mutex or marks it
	 * CONTENDED again, so waking another now would only add a switch
	 * (the count bits change only under the spinlock). */
	w = s >= FB_MUTEX_WOKEN ? NULL : fb_waitq_pop(&m->waiters);
	do {
		n = (s & ~FB_MUTEX_HELD) + (w ? FB_MUTEX_WOKEN : 0);
	} while (!atomic_compare_exchange_weak_explicit(
		&m->state, &s, n, memory_order_release, memory_order_relaxed));
	if (w) {
		w->result = 0;
		fb_waiter_wake(w, 0);
	}
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
 * Return: 0; EINVAL for NULL; EBUSY if it is held, waited for, or a
 * locker that an unlock woke has not come back for it yet.
 */
int fiber_mutex_destroy(fiber_mutex_t *mutex)
{
	struct fb_mutex *m = FB_SYNC_OBJ(fb_mutex, mutex);
	int err = 0;

	if (!mutex)
		return EINVAL;
	fb_spin_lock(&m->lock);
	if (fb_load_relaxed(&m->state) != FB_MUTEX_UNLOCKED ||
	    fb_waitq_busy(&m->waiters))
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
	unsigned int s;

	if (!mutex)
		return EINVAL;
	/* Free is enough, even while a woken locker is on its way back
	 * (the count bits): it will find the mutex held and queue again. */
	s = fb_load_relaxed(&m->state);
	do {
		if (s & FB_MUTEX_HELD)
			return EBUSY;
	} while (!atomic_compare_exchange_weak_explicit(
		&m->state, &s, s | FB_MUTEX_LOCKED, memory_order_acquire,
		memory_order_relaxed));
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
