/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cancel.c - fiber cancellation: fiber_cancel() makes the target's current
 * or next cancellation point return ECANCELED.
 *
 * Model.  A cancellation is a pending flag in the fiber (fb_fiber.cancel)
 * and, when the fiber is parked in a cancellable wait, a claim of that
 * wait.  There is no unwinding: the call that reports ECANCELED consumes
 * the flag and returns like a call that timed out.  Which calls are
 * cancellation points is their choice: they prepare their waiter with
 * FB_WAIT_CANCELLABLE and call fb_cancel_point() on entry; the others
 * (mutex, rwlock, once) never look.
 *
 * Reaching the waiter.  fiber_cancel() cannot touch a waiter: it lives on
 * the target's stack and may be gone by the time the canceller looks.  So
 * a fiber's cancellable waits use a claim word in the fiber's descriptor,
 * fb_fiber.wclaim, which the handle slot's lock keeps alive: the waiter's
 * claimp points there (sched/sched.h).  The fiber stores NONE into it
 * (release) after announcing PARKING, when it prepares the wait; between
 * waits it holds the last outcome.  The canceller, holding the slot lock,
 * sets the flag and CASes wclaim NONE -> CANCELED; if that wins, the wait
 * was not served (wakers skip a claimed waiter, as a timed-out one), and
 * the canceller wakes the fiber, which takes its waiter off the list under
 * the object lock like a timed-out waiter, so no post, element or byte is
 * lost to it.  If the fiber is not in a cancellable wait, the CAS fails
 * and the flag waits for the next cancellation point.
 *
 * Lost cancellations.  A cancellation that comes between a call's entry
 * check and its wait must still end the wait.  Dekker again (doc/design.md
 * 4.4): the fiber stores NONE into wclaim, and then, in fb_fiber_park()
 * after its CAS PARKING -> PARKED, loads fb_nr_cancels_pending and its flag
 * (seq_cst); the canceller sets the flag and the count (seq_cst RMWs) and
 * then CASes wclaim (seq_cst).  Either the fiber sees the flag, and claims
 * its own wait CANCELED (no switch: it stays RUNNING), or the canceller
 * sees NONE and claims it.  On the fiber's side the park CAS is the full
 * barrier between the store and the loads (a locked instruction on
 * x86-64; on AArch64 the store-release of the exclusive pair orders the
 * store before it and the load-acquire after it), which costs the hot
 * path nothing; C11 alone would want a seq_cst fence there.
 *
 * Consuming.  A request sets the flag and then claims, and a call that
 * consumed the flag in between (at its entry) would leave the claim to
 * land on the fiber's next wait, a cancellation reported twice.  So the
 * fiber clears its flag under its slot lock, which the request holds
 * from the flag to the claim: a claimed wait always finds the flag set,
 * and the call that ends in it is the one that reports it.
 *
 * Cost.  fb_nr_cancels_pending counts the fibers whose flag is set; while
 * it is 0 (no cancellation pending anywhere), a cancellation point costs
 * one load of a line nobody writes, and so does the park.
 *
 * A wait that ends in the canceller's claim is woken by the canceller
 * only, so every path that gives up a cancellable wait without sleeping
 * (a deadline already past, a failed epoll_ctl) claims it first and, when
 * that fails, parks to take the canceller's wake (sched/timer.c).  A
 * foreign thread is never cancelled: fiber_cancel() names fibers only.
 */
#include <errno.h>

#include "sched/sched.h"

atomic_uint fb_nr_cancels_pending;

/* pend - set @f's flag, counting it if it was clear. */
static void pend(struct fb_fiber *f)
{
	if (!atomic_exchange(&f->cancel, true))
		atomic_fetch_add(&fb_nr_cancels_pending, 1);
}

/* clear_locked - clear @f's flag, uncounting it if it was set.
 * Context: @f->slot->lock held.  The flag is set only under that lock
 * (fb_cancel_request) or by @f itself (fb_cancel_restore), which is
 * either the caller or gone (fb_cancel_drop at its exit and reap); so
 * the load alone can say that it is clear, and the exit of every fiber
 * costs no locked exchange. */
static bool clear_locked(struct fb_fiber *f)
{
	if (!fb_load_relaxed(&f->cancel) || !atomic_exchange(&f->cancel, false))
		return false;
	atomic_fetch_sub(&fb_nr_cancels_pending, 1);
	return true;
}

/* clear - clear_locked() for the calling fiber @f (see "Consuming"). */
static bool clear(struct fb_fiber *f)
{
	bool was;

	fb_spin_lock(&f->slot->lock);
	was = clear_locked(f);
	fb_spin_unlock(&f->slot->lock);
	return was;
}

bool fb_cancel_request(struct fb_fiber *f)
{
	int none = FB_CLAIM_NONE;

	pend(f);
	return fb_cas_seqcst(&f->wclaim, &none, FB_CLAIM_CANCELED);
}

int fb_cancel_point_slow(void)
{
	struct fb_fiber *f = fb_current();

	if (!f || !fb_load_relaxed(&f->cancel))
		return 0;
	return clear(f) ? ECANCELED : 0;
}

void fb_cancel_consume(void)
{
	clear(fb_current());
}

void fb_cancel_restore(void)
{
	pend(fb_current());
}

void fb_cancel_drop(struct fb_fiber *f)
{
	clear_locked(f);
}

bool fb_cancel_park(struct fb_fiber *f)
{
	int none = FB_CLAIM_NONE;

	if (!fb_load_seqcst(&f->cancel) ||
	    !fb_cas_seqcst(&f->wclaim, &none, FB_CLAIM_CANCELED))
		return false;
	/* Nobody else claimed the wait, so nobody will wake it: take the
	 * fiber back from PARKED without leaving the worker. */
	fb_store_relaxed(&f->state, FB_FIBER_RUNNING);
	return true;
}
