/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * once.c - fiber_once(), one-time initialisation.
 *
 * The state word goes NEW -> RUNNING -> DONE.  The caller that moves it to
 * RUNNING (under the spinlock) runs the function with no lock held; the
 * others queue a waiter and are woken, all together, when it publishes
 * DONE.  Once DONE, every call is one acquire load: the release store of
 * DONE makes the function's effects visible to the callers that see it.
 *
 * The function must return: fiber_once() is not a cancellation point
 * (fiber_cancel), so a function that never returns leaves the others
 * waiting forever, and one that calls fiber_once() on the same object
 * deadlocks, as with pthread_once().
 */
#include "sync/sync.h"

enum {
	FB_ONCE_NEW = 0,     /* nobody called yet */
	FB_ONCE_RUNNING = 1, /* a caller runs the function; others queue */
	FB_ONCE_DONE = 2,    /* it returned; nothing queues any more */
};

struct fb_once {
	/* FB_ONCE_*; changed under @lock; DONE is stored with release and
	 * read with acquire. */
	atomic_uint state;
	struct fb_spinlock lock; /* guards the state changes and waiters */
	struct fb_list waiters;	 /* callers waiting for DONE; @lock */
};

FB_SYNC_CHECK(fb_once, fiber_once_t);
_Static_assert(FB_ONCE_NEW == 0, "an all-zero fiber_once_t must be new");

/*
 * fiber_once - run @fn once for @once, whoever calls first; every call
 * returns after @fn has returned.
 * Context: fiber (parks) or any other thread (blocks) while another caller
 * runs @fn.
 * Return: 0; EINVAL for NULL (and @fn is not called).
 */
int fiber_once(fiber_once_t *once, void (*fn)(void))
{
	struct fb_once *o = FB_SYNC_OBJ(fb_once, once);
	struct fb_waiter w;
	struct fb_list woken;

	if (!once || !fn)
		return EINVAL;
	if (fb_likely(fb_load_acquire(&o->state) == FB_ONCE_DONE))
		return 0;

	fb_spin_lock(&o->lock);
	switch (fb_load_relaxed(&o->state)) {
	case FB_ONCE_DONE:
		fb_spin_unlock(&o->lock);
		return 0;
	case FB_ONCE_RUNNING:
		fb_waiter_prepare(&w, FB_WAIT_ONCE, o);
		fb_list_add_tail(&w.node, &o->waiters);
		fb_waiter_wait(&w, &o->lock);
		return 0;
	default:
		fb_store_relaxed(&o->state, FB_ONCE_RUNNING);
		fb_spin_unlock(&o->lock);
		break;
	}

	fn();

	fb_spin_lock(&o->lock);
	fb_store_release(&o->state, FB_ONCE_DONE);
	fb_waitq_take_all(&o->waiters, &woken);
	fb_spin_unlock(&o->lock);
	fb_waitq_wake_taken(&woken, 0, 0);
	return 0;
}
