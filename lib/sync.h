/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sync.h - what the synchronisation objects (sync-*.c) share: the caller
 * identity that records lock owners, the internal mutex that the condition
 * variable releases and retakes, and the wait-list helpers.
 *
 * Every object of this layer is built on the waiter protocol of sched.h.
 * A spinlock guards the object's state and its wait lists.  A caller that
 * must wait prepares a struct fb_waiter on its own stack, queues it and
 * calls fb_waiter_wait(), which drops the spinlock.  Whoever removes a
 * waiter from a list stores the outcome in w->result (and, for the objects
 * that hand data over, the data) and then wakes it, exactly once.  A woken
 * waiter therefore knows what happened without retaking the lock, except
 * where a file's opening comment says that it retries.
 *
 * All-zero memory is a valid, empty object everywhere: wait lists start as
 * zeroed heads (list.h treats them as empty and initialises them lazily)
 * and every state enum has its idle state at 0.
 */
#ifndef FB_SYNC_H
#define FB_SYNC_H

#include "fiber.h"

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>

#include "atomic.h"
#include "common.h"
#include "list.h"
#include "sched.h"

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
 * fb_sync_self - who is calling, for lock ownership: the fiber, or, on a
 * thread that runs no fiber, its pthread identity with bit 0 set (fiber
 * pointers are aligned, so the two never collide).  Never 0.
 * Context: any thread.
 */
static inline uintptr_t fb_sync_self(void)
{
	struct fb_fiber *f = fb_current();

	if (f)
		return (uintptr_t)f;
	return (uintptr_t)pthread_self() | 1;
}

/*
 * fb_waitq_take_all - move every waiter of @q to the head @out (which need
 * not be initialised) and leave @q empty, so that they can be woken after
 * the object lock is released.  Context: the lock that protects @q held.
 */
static inline void fb_waitq_take_all(struct fb_list *q, struct fb_list *out)
{
	fb_list_init(out);
	if (fb_list_empty(q))
		return;
	out->next = q->next;
	out->prev = q->prev;
	out->next->prev = out;
	out->prev->next = out;
	fb_list_init(q);
}

/*
 * fb_waitq_wake_one - remove the first waiter of @q, give it @result and
 * wake it.  Returns false if @q was empty.  Context: the lock that protects
 * @q held (or @q private to the caller); never switches.
 */
static inline bool fb_waitq_wake_one(struct fb_list *q, int result,
				     unsigned int flags)
{
	struct fb_list *n = fb_list_pop(q);
	struct fb_waiter *w;

	if (!n)
		return false;
	w = fb_list_entry(n, struct fb_waiter, node);
	w->result = result;
	fb_waiter_wake(w, flags);
	return true;
}

/* fb_waitq_wake_all - fb_waitq_wake_one until @q is empty. */
static inline void fb_waitq_wake_all(struct fb_list *q, int result,
				     unsigned int flags)
{
	while (fb_waitq_wake_one(q, result, flags))
		;
}

/*
 * The mutex.  sync-mutex.c argues the protocol; the fast paths are inline
 * here so that fiber_mutex_lock() and the condition variable share them.
 */
enum {
	FB_MUTEX_UNLOCKED = 0,	/* free */
	FB_MUTEX_LOCKED = 1,	/* held; nobody queued since it was taken */
	FB_MUTEX_CONTENDED = 2, /* held; the wait list may be non-empty */
};

struct fb_mutex {
	/* FB_MUTEX_*; acquire to take, release to free. */
	atomic_uint state;
	struct fb_spinlock lock; /* orders the slow paths; guards waiters */
	struct fb_list waiters;	 /* struct fb_waiter.node; @lock */
	/* fb_sync_self() of the holder, 0 when free; written by the holder
	 * only, relaxed. */
	_Atomic uintptr_t owner;
};

FB_SYNC_CHECK(fb_mutex, fiber_mutex_t);
_Static_assert(FB_MUTEX_UNLOCKED == 0, "an all-zero mutex must be free");

/* fb_mutex_lock_slow - queue until the mutex is free and take it.
 * Return: 0; EDEADLK if @self holds it.  Context: any thread; may park. */
int fb_mutex_lock_slow(struct fb_mutex *m, uintptr_t self);
/* fb_mutex_unlock_slow - free a CONTENDED mutex and wake one waiter.
 * Context: any thread, the caller held @m; never switches. */
void fb_mutex_unlock_slow(struct fb_mutex *m);

/*
 * fb_mutex_lock - take @m: one CAS when it is free.
 * Return: 0; EDEADLK if the caller holds it already.
 * Context: any thread; parks a fiber (blocks a thread) while it is held.
 */
static inline int fb_mutex_lock(struct fb_mutex *m)
{
	uintptr_t self = fb_sync_self();
	unsigned int old = FB_MUTEX_UNLOCKED;

	if (fb_likely(atomic_compare_exchange_strong_explicit(
		    &m->state, &old, FB_MUTEX_LOCKED, memory_order_acquire,
		    memory_order_relaxed))) {
		fb_store_relaxed(&m->owner, self);
		return 0;
	}
	return fb_mutex_lock_slow(m, self);
}

/*
 * fb_mutex_unlock - release @m: one CAS when nobody waits.
 * Return: 0; EPERM if the caller does not hold it.
 * Context: any thread; never switches.
 */
static inline int fb_mutex_unlock(struct fb_mutex *m)
{
	unsigned int old = FB_MUTEX_LOCKED;

	if (fb_load_relaxed(&m->owner) != fb_sync_self())
		return EPERM;
	fb_store_relaxed(&m->owner, 0);
	if (fb_likely(atomic_compare_exchange_strong_explicit(
		    &m->state, &old, FB_MUTEX_UNLOCKED, memory_order_release,
		    memory_order_relaxed)))
		return 0;
	fb_mutex_unlock_slow(m);
	return 0;
}

#endif /* FB_SYNC_H */
