/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sync.h - what the synchronisation objects (sync/) share: the caller
 * identity that records lock owners, the internal mutex that the condition
 * variable releases and retakes, and the wait-list helpers.
 *
 * Every object of this layer is built on the waiter protocol of sched/sched.h.
 * A spinlock guards the object's state and its wait lists.  A caller that
 * must wait prepares a struct fb_waiter on its own stack, queues it and
 * calls fb_waiter_wait(), which drops the spinlock.  Whoever removes a
 * waiter from a list stores the outcome in w->result (and, for the objects
 * that hand data over, the data) and then wakes it, exactly once.  A woken
 * waiter therefore knows what happened without retaking the lock, except
 * where a file's opening comment says that it retries.
 *
 * All-zero memory is a valid, empty object everywhere: wait lists start as
 * zeroed heads (base/list.h treats them as empty and initialises them lazily)
 * and every state enum has its idle state at 0.
 */
#ifndef FB_SYNC_H
#define FB_SYNC_H

#include <fiber.h>

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>

#include "base/atomic.h"
#include "base/common.h"
#include "base/list.h"
#include "sched/sched.h"

/*
 * FB_SYNC_OBJ - view the public opaque object @pub as struct @type, after
 * checking at compile time that the struct fits and is not more strictly
 * aligned than the public type.
 */
#define FB_SYNC_CHECK(type, pubtype)                                           \
	_Static_assert(sizeof(struct type) <= sizeof(pubtype),                 \
		       #type " does not fit in " #pubtype);                    \
	_Static_assert(alignof(struct type) <= alignof(pubtype),               \
		       #type " is more aligned than " #pubtype)
#define FB_SYNC_OBJ(type, pub) ((struct type *)(void *)(pub))

/*
 * fb_sync_self - who is calling, for lock ownership: the fiber's id, or, on
 * a thread that runs no fiber, an id of the thread's own (fb_thread_id).
 * Both are unique for the life of the process and never reused, so a fiber
 * or thread that starts where a dead one was cannot inherit its locks.
 * Never 0.  Context: any thread.
 */
static inline uint64_t fb_sync_self(void)
{
	struct fb_fiber *f = fb_current();

	return f ? f->id : fb_thread_id();
}

/*
 * fb_waitq_waiting - does @q hold a waiter that a waker could still take
 * (one that is not leaving by itself)?  Context: @q's lock held.
 */
static inline bool fb_waitq_waiting(const struct fb_list *q)
{
	const struct fb_list *n;

	fb_list_for_each (n, q) {
		const struct fb_waiter *w =
			fb_container_of(n, struct fb_waiter, node);

		/* As fb_waiter_claim() sees it: a fiber of an earlier
		 * runtime is no waiter a waker could take. */
		if (fb_load_relaxed(w->claimp) == FB_CLAIM_NONE &&
		    !fb_waiter_stale(w))
			return true;
	}
	return false;
}

/*
 * fb_waitq_busy - will some waiter of @q still touch the object: one that
 * waits, or one that is leaving (timed out) and will take the lock to
 * unlink itself?  Waiters of a runtime that shut down (ABANDONED) never
 * run again and do not count.  For destroy.  Context: @q's lock held.
 */
static inline bool fb_waitq_busy(const struct fb_list *q)
{
	const struct fb_list *n;

	fb_list_for_each (n, q) {
		const struct fb_waiter *w =
			fb_container_of(n, struct fb_waiter, node);

		/* A fiber of an earlier runtime (a fork child's copy of its
		 * parent's) never comes back: abandoned too. */
		if (fb_load_relaxed(w->claimp) != FB_CLAIM_ABANDONED &&
		    !fb_waiter_stale(w))
			return true;
	}
	return false;
}

/*
 * fb_waitq_take_all - claim every waiter of @q it can (sched/sched.h) and move
 * them to the head @out (which need not be initialised), so that they can
 * be woken with fb_waitq_wake_taken() after the object lock is released.
 * Waiters that are leaving by themselves stay on @q.
 * Context: the lock that protects @q held.
 */
static inline void fb_waitq_take_all(struct fb_list *q, struct fb_list *out)
{
	struct fb_waiter *w;

	fb_list_init(out);
	while ((w = fb_waitq_pop(q)))
		fb_list_add_tail(&w->node, out);
}

/*
 * fb_waitq_wake_one - claim the first waiter of @q that is still waiting,
 * unlink it, give it @result and wake it.  Returns false if there was
 * none.  Context: the lock that protects @q held; never switches.
 */
static inline bool fb_waitq_wake_one(struct fb_list *q, int result,
				     unsigned int flags)
{
	struct fb_waiter *w = fb_waitq_pop(q);

	if (!w)
		return false;
	w->result = result;
	fb_waiter_wake(w, flags);
	return true;
}

/* fb_waitq_wake_all - fb_waitq_wake_one until no waiter is left to take. */
static inline void fb_waitq_wake_all(struct fb_list *q, int result,
				     unsigned int flags)
{
	while (fb_waitq_wake_one(q, result, flags))
		;
}

/*
 * fb_waitq_wake_taken - wake every waiter of the private list @q, which
 * fb_waitq_take_all() filled (they are claimed already), with @result.
 * Context: any; no lock needed, @q is the caller's.
 */
static inline void fb_waitq_wake_taken(struct fb_list *q, int result,
				       unsigned int flags)
{
	struct fb_list *n;

	while ((n = fb_list_pop(q))) {
		struct fb_waiter *w = fb_list_entry(n, struct fb_waiter, node);

		w->result = result;
		fb_waiter_wake(w, flags);
	}
}

/*
 * The mutex.  sync/mutex.c argues the protocol; the fast paths are inline
 * here so that fiber_mutex_lock() and the condition variable share them.
 * The state word holds the lock state in its low two bits and, above them,
 * the number of lockers that an unlock woke and that have not yet come
 * back for the mutex (FB_MUTEX_WOKEN each): while it is not 0 the mutex
 * is still in use even when unlocked, and destroy says EBUSY.
 */
enum {
	FB_MUTEX_UNLOCKED = 0,	/* free */
	FB_MUTEX_LOCKED = 1,	/* held; nobody queued since it was taken */
	FB_MUTEX_CONTENDED = 2, /* held; the wait list may be non-empty */
};
#define FB_MUTEX_HELD 3u  /* the lock state bits */
#define FB_MUTEX_WOKEN 4u /* one woken locker on its way back */

struct fb_mutex {
	/* FB_MUTEX_* | woken count; acquire to take, release to free; only
	 * the two fast paths change it without @lock. */
	atomic_uint state;
	struct fb_spinlock lock; /* orders the slow paths; guards waiters */
	struct fb_list waiters;	 /* struct fb_waiter.node; @lock */
	/* fb_sync_self() of the holder, 0 when free; written by the holder
	 * only, relaxed. */
	_Atomic uint64_t owner;
};

FB_SYNC_CHECK(fb_mutex, fiber_mutex_t);
_Static_assert(FB_MUTEX_UNLOCKED == 0, "an all-zero mutex must be free");

/* fb_mutex_lock_slow - queue until the mutex is free and take it.
 * Return: 0; EDEADLK if @self holds it.  Context: any thread; may park. */
int fb_mutex_lock_slow(struct fb_mutex *m, uint64_t self);
/* fb_mutex_unlock_slow - free a CONTENDED mutex and wake one waiter.  Context: any thread, the caller held @m; never
 * switches. */
void fb_mutex_unlock_slow(struct fb_mutex *m);

/*
 * fb_mutex_lock - take @m: one CAS when it is free.
 * Return: 0; EDEADLK if the caller holds it already.
 * Context: any thread; parks a fiber (blocks a thread) while it is held.
 */
static inline int fb_mutex_lock(struct fb_mutex *m)
{
	uint64_t self = fb_sync_self();
	unsigned int s = fb_load_relaxed(&m->state);

	/* Free, whatever the woken count says (sync/mutex.c). */
	if (fb_likely(!(s & FB_MUTEX_HELD)) &&
	    atomic_compare_exchange_strong_explicit(
		    &m->state, &s, s | FB_MUTEX_LOCKED, memory_order_acquire,
		    memory_order_relaxed)) {
		fb_store_relaxed(&m->owner, self);
		return 0;
	}
	return fb_mutex_lock_slow(m, self);
}

/*
 * fb_mutex_unlock - release @m: one CAS when nobody queued since it was
 * taken.
 * Return: 0; EPERM if the caller does not hold it.
 * Context: any thread; never switches.
 */
static inline int fb_mutex_unlock(struct fb_mutex *m)
{
	unsigned int s;

	if (fb_load_relaxed(&m->owner) != fb_sync_self())
		return EPERM;
	fb_store_relaxed(&m->owner, 0);
	s = fb_load_relaxed(&m->state);
	if (fb_likely((s & FB_MUTEX_HELD) == FB_MUTEX_LOCKED) &&
	    atomic_compare_exchange_strong_explicit(
		    &m->state, &s, s & ~FB_MUTEX_HELD, memory_order_release,
		    memory_order_relaxed))
		return 0;
	fb_mutex_unlock_slow(m);
	return 0;
}

#endif /* FB_SYNC_H */
