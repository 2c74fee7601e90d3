/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * rwlock.c - fiber_rwlock_t, reader-writer locks that prefer writers.
 *
 * One spinlock guards the whole state: the number of readers inside, the
 * writer inside (its fb_sync_self() identity, 0 if none) and two FIFO wait
 * lists.  Ownership is handed over by the unlocker: a woken waiter has
 * already been counted in, so it returns without retaking the spinlock.
 *
 * Writers are preferred so that a stream of readers cannot starve them: a
 * reader queues as soon as a writer is inside or waiting.  So that writers
 * cannot starve readers either, a writer that leaves lets in every reader
 * that queued (one batch) before the next writer; when no reader waits it
 * hands over to the next writer.  The last reader out hands over to the
 * first waiting writer.  The price of the preference: a reader that
 * relocks while holding the lock deadlocks once a writer queues between
 * its two calls (as with glibc's writer-preferring kind).
 *
 * Readers are counted, not recorded, so an unlock by a fiber that holds no
 * read lock is detected only when nobody holds one.
 */
#include "sync/sync.h"

struct fb_rwlock {
	struct fb_spinlock lock; /* guards everything below */
	unsigned int readers;	 /* readers inside; @lock */
	/* fb_sync_self() of the writer inside, or 0; @lock */
	uint64_t writer;
	/* Queued readers; queued writers, w.data = identity; @lock */
	struct fb_list rd_waiters;
	struct fb_list wr_waiters;
};

FB_SYNC_CHECK(fb_rwlock, fiber_rwlock_t);

/*
 * fiber_rwlock_init - make @rwlock a free lock (the same as zeroing it).
 * Context: any thread; nothing may use @rwlock concurrently.
 * Return: 0; EINVAL for NULL.
 */
int fiber_rwlock_init(fiber_rwlock_t *rwlock)
{
	if (!rwlock)
		return EINVAL;
	*rwlock = (fiber_rwlock_t)FIBER_RWLOCK_INITIALIZER;
	return 0;
}

/*
 * fiber_rwlock_destroy - end the life of @rwlock; it needs no cleanup.
 * Context: any thread.
 * Return: 0; EINVAL for NULL; EBUSY if it is held or waited for.
 */
int fiber_rwlock_destroy(fiber_rwlock_t *rwlock)
{
	struct fb_rwlock *rw = FB_SYNC_OBJ(fb_rwlock, rwlock);
	int err = 0;

	if (!rwlock)
		return EINVAL;
	fb_spin_lock(&rw->lock);
	if (rw->readers || rw->writer || fb_waitq_busy(&rw->rd_waiters) ||
	    fb_waitq_busy(&rw->wr_waiters))
		err = EBUSY;
	fb_spin_unlock(&rw->lock);
	return err;
}

/* Readers may enter: no writer inside or queued.  @rw->lock held. */
static bool read_may_enter(const struct fb_rwlock *rw)
{
	return !rw->writer && !fb_waitq_waiting(&rw->wr_waiters);
}

/*
 * fiber_rwlock_rdlock - take @rwlock shared, waiting while a writer is
 * inside or queued.  Context: fiber (parks) or any other thread (blocks).
 * Return: 0; EINVAL for NULL; EDEADLK if the caller holds it for writing.
 */
int fiber_rwlock_rdlock(fiber_rwlock_t *rwlock)
{
	struct fb_rwlock *rw = FB_SYNC_OBJ(fb_rwlock, rwlock);
	struct fb_waiter w;

	if (!rwlock)
		return EINVAL;
	fb_spin_lock(&rw->lock);
	if (read_may_enter(rw)) {
		rw->readers++;
		fb_spin_unlock(&rw->lock);
		return 0;
	}
	if (rw->writer == fb_sync_self()) {
		fb_spin_unlock(&rw->lock);
		return EDEADLK;
	}
	fb_waiter_prepare(&w, FB_WAIT_RWLOCK_RD, rw);
	fb_list_add_tail(&w.node, &rw->rd_waiters);
	fb_waiter_wait(&w, &rw->lock);
	/* The unlocker counted us in. */
	return 0;
}

/*
 * fiber_rwlock_tryrdlock - take @rwlock shared if no writer is inside or
 * queued.  Context: any thread; never switches.
 * Return: 0; EINVAL for NULL; EBUSY otherwise.
 */
int fiber_rwlock_tryrdlock(fiber_rwlock_t *rwlock)
{
	struct fb_rwlock *rw = FB_SYNC_OBJ(fb_rwlock, rwlock);
	int err = 0;

	if (!rwlock)
		return EINVAL;
	fb_spin_lock(&rw->lock);
	if (read_may_enter(rw))
		rw->readers++;
	else
		err = EBUSY;
	fb_spin_unlock(&rw->lock);
	return err;
}

/*
 * fiber_rwlock_wrlock - take @rwlock exclusive, waiting while anyone is
 * inside.  Context: fiber (parks) or any other thread (blocks).
 * Return: 0; EINVAL for NULL; EDEADLK if the caller holds it for writing.
 */
int fiber_rwlock_wrlock(fiber_rwlock_t *rwlock)
{
	struct fb_rwlock *rw = FB_SYNC_OBJ(fb_rwlock, rwlock);
	uint64_t self = fb_sync_self();
	struct fb_waiter w;

	if (!rwlock)
		return EINVAL;
	fb_spin_lock(&rw->lock);
	if (!rw->writer && !rw->readers) {
		rw->writer = self;
		fb_spin_unlock(&rw->lock);
		return 0;
	}
	if (rw->writer == self) {
		fb_spin_unlock(&rw->lock);
		return EDEADLK;
	}
	fb_waiter_prepare(&w, FB_WAIT_RWLOCK_WR, rw);
	w.data = self;
	fb_list_add_tail(&w.node, &rw->wr_waiters);
	fb_waiter_wait(&w, &rw->lock);
	/* The unlocker made us the writer. */
	return 0;
}

/*
 * fiber_rwlock_trywrlock - take @rwlock exclusive if nobody is inside.
 * Context: any thread; never switches.
 * Return: 0; EINVAL for NULL; EBUSY otherwise.
 */
int fiber_rwlock_trywrlock(fiber_rwlock_t *rwlock)
{
	struct fb_rwlock *rw = FB_SYNC_OBJ(fb_rwlock, rwlock);
	int err = 0;

	if (!rwlock)
		return EINVAL;
	fb_spin_lock(&rw->lock);
	if (!rw->writer && !rw->readers)
		rw->writer = fb_sync_self();
	else
		err = EBUSY;
	fb_spin_unlock(&rw->lock);
	return err;
}

/* Let the first queued writer in.  @rw->lock held, nobody inside. */
static bool wake_writer(struct fb_rwlock *rw)
{
	struct fb_waiter *w = fb_waitq_pop(&rw->wr_waiters);

	if (!w)
		return false;
	rw->writer = w->data;
	w->result = 0;
	fb_waiter_wake(w, 0);
	return true;
}

/* Let every queued reader in, counted now.  @rw->lock held, no writer. */
static void wake_readers(struct fb_rwlock *rw, struct fb_list *woken)
{
	struct fb_list *n;

	fb_waitq_take_all(&rw->rd_waiters, woken);
	fb_list_for_each (n, woken)
		rw->readers++;
}

/*
 * fiber_rwlock_unlock - leave @rwlock, held shared or exclusive, and let
 * the next waiters in (see the opening comment for who goes first).
 * Context: a holder; any thread; never switches.
 * Return: 0; EINVAL for NULL; EPERM if a writer other than the caller is
 * inside, or nobody is.
 */
int fiber_rwlock_unlock(fiber_rwlock_t *rwlock)
{
	struct fb_rwlock *rw = FB_SYNC_OBJ(fb_rwlock, rwlock);
	struct fb_list woken;

	if (!rwlock)
		return EINVAL;
	fb_list_init(&woken);
	fb_spin_lock(&rw->lock);
	if (rw->writer) {
		if (rw->writer != fb_sync_self()) {
			fb_spin_unlock(&rw->lock);
			return EPERM;
		}
		rw->writer = 0;
		if (!fb_waitq_waiting(&rw->rd_waiters))
			wake_writer(rw);
		else
			wake_readers(rw, &woken);
	} else if (rw->readers) {
		if (--rw->readers == 0)
			wake_writer(rw);
	} else {
		fb_spin_unlock(&rw->lock);
		return EPERM;
	}
	fb_spin_unlock(&rw->lock);
	fb_waitq_wake_taken(&woken, 0, 0);
	return 0;
}
