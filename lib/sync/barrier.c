/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * barrier.c - fiber_barrier_t, reusable barriers.
 *
 * Arrivals are counted under a spinlock; every arrival but the last queues
 * a waiter.  The last one resets the count for the next generation, takes
 * the whole wait list, drops the spinlock, wakes the list and returns
 * FIBER_BARRIER_SERIAL_FIBER.  Because a waiter is woken only by the last
 * arrival of its own generation, and the list is emptied before anyone of
 * the next generation can queue, generations never mix and no generation
 * number is needed to keep them apart.
 *
 * A cancelled waiter (fiber_cancel) takes itself off under the spinlock
 * and, if its generation is still gathering, takes its arrival back, so
 * the barrier waits for one more caller.  If the last arrival completed
 * the generation first (counting it, but skipping its claimed waiter),
 * it passed the barrier: it returns 0 and its cancellation stays pending.
 * Telling the two apart takes the generation count @gen.
 *
 * All-zero memory is a barrier for 0 callers, which is not valid: wait
 * refuses it with EINVAL until fiber_barrier_init() sets a count.
 */
#include "sync/sync.h"

struct fb_barrier {
	struct fb_spinlock lock; /* guards everything below */
	unsigned int count;	 /* callers per generation; set by init */
	unsigned int arrived;	 /* callers of this generation so far */
	struct fb_list waiters;	 /* this generation, but the last; @lock */
	unsigned int gen;	 /* generations completed; @lock */
};

FB_SYNC_CHECK(fb_barrier, fiber_barrier_t);

/*
 * fiber_barrier_init - make @barrier release its callers in groups of
 * @count.  Context: any thread; nothing may use @barrier concurrently.
 * Return: 0; EINVAL for NULL or a @count of 0.
 */
int fiber_barrier_init(fiber_barrier_t *barrier, unsigned int count)
{
	struct fb_barrier *b = FB_SYNC_OBJ(fb_barrier, barrier);

	if (!barrier || count == 0)
		return EINVAL;
	*barrier = (fiber_barrier_t){ { 0 } };
	b->count = count;
	return 0;
}

/*
 * fiber_barrier_destroy - end the life of @barrier; it needs no cleanup.
 * Context: any thread.
 * Return: 0; EINVAL for NULL; EBUSY if callers wait on it.
 */
int fiber_barrier_destroy(fiber_barrier_t *barrier)
{
	struct fb_barrier *b = FB_SYNC_OBJ(fb_barrier, barrier);
	int err = 0;

	if (!barrier)
		return EINVAL;
	fb_spin_lock(&b->lock);
	if (b->arrived || fb_waitq_busy(&b->waiters))
		err = EBUSY;
	fb_spin_unlock(&b->lock);
	return err;
}

/*
 * fiber_barrier_wait - wait until count callers have arrived at @barrier.
 * Context: fiber (parks) or any other thread (blocks).
 * Return: FIBER_BARRIER_SERIAL_FIBER in exactly one caller of each
 * generation (the last to arrive), 0 in the others; EINVAL for NULL or a
 * barrier that was never initialised; ECANCELED (fiber_cancel) before the
 * generation completed, which then waits for another caller.
 */
int fiber_barrier_wait(fiber_barrier_t *barrier)
{
	struct fb_barrier *b = FB_SYNC_OBJ(fb_barrier, barrier);
	struct fb_waiter w;
	struct fb_list woken;
	unsigned int gen;
	int err;

	if (!barrier)
		return EINVAL;
	err = fb_cancel_point();
	if (err)
		return err;
	fb_spin_lock(&b->lock);
	if (b->count == 0) {
		fb_spin_unlock(&b->lock);
		return EINVAL;
	}
	if (++b->arrived < b->count) {
		gen = b->gen;
		fb_waiter_prepare(&w, FB_WAIT_BARRIER | FB_WAIT_CANCELLABLE, b);
		fb_list_add_tail(&w.node, &b->waiters);
		if (fb_waiter_wait_keep(&w, &b->lock, FB_NO_DEADLINE) == 0)
			return 0;
		/* Cancelled: b->lock held, w still linked. */
		fb_list_del(&w.node);
		err = b->gen == gen ? ECANCELED : 0;
		if (err)
			b->arrived--;
		fb_spin_unlock(&b->lock);
		if (err)
			fb_cancel_consume();
		return err;
	}
	b->arrived = 0;
	b->gen++;
	fb_waitq_take_all(&b->waiters, &woken);
	fb_spin_unlock(&b->lock);
	fb_waitq_wake_taken(&woken, 0, 0);
	return FIBER_BARRIER_SERIAL_FIBER;
}
