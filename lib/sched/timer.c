/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * timer.c - per-worker timers, timed waits and fiber_sleep().
 *
 * Each worker owns a min-heap of armed timers (struct fb_timer_heap in
 * struct fb_worker), ordered by deadline on CLOCK_MONOTONIC.  A fiber arms
 * its timer on the heap of the worker it runs on; that worker fires the
 * heap (and, while it is stalled, the monitor: see run() below): at its
 * scheduling points (fb_sched_tick(), every
 * FB_TICK_SWITCHES switches) and in its idle loop, whose sleep (futex or
 * epoll) is bounded by the heap's next deadline.  No worker can miss its
 * own deadline while idle, and no other worker needs to be told when a
 * timer is armed: the arming fiber runs on the owner, so the owner is
 * RUNNING and will look at its heap before it sleeps.
 *
 * The heap is a pairing heap: intrusive (a timer lives in the waiter's
 * stack frame, so arming never allocates and cannot fail), O(1) insert,
 * O(log n) amortised removal of the minimum or of any node.  A binary heap
 * would need an array that grows; a timer wheel would need a tick.
 *
 * Cancel against fire.  The heap lock is held only to link or unlink a
 * timer, never while its callback runs, so a callback may take any lock
 * (lock order: object lock -> heap lock; the callback takes the object
 * lock with no heap lock held).  A timer is IDLE, ARMED (in the heap),
 * FIRING (taken out by the owner, callback running) or DONE.  The owner
 * moves ARMED -> FIRING under the heap lock and stores DONE (release) when
 * the callback returned; fb_timer_cancel() unlinks an ARMED timer under the
 * lock, or else waits for DONE.  After cancel the timer's memory is free.
 *
 * Timed waits (fb_waiter_wait_timed).  The waiter is on the object's wait
 * list Q under the object lock L, as in sched/sched.h.  Its deadline and its
 * wakers race for the waiter's claim word (sched/sched.h): a waker claims it
 * under L, unlinks it and wakes it; the timer callback claims it
 * (TIMEDOUT) and only wakes the fiber, without touching the object, so
 * a timer that fires as the object is destroyed cannot touch freed
 * memory.  A timed-out waiter is still on Q, which keeps the object
 * alive (destroy says EBUSY while a waiter is linked, and wakers skip a
 * waiter they cannot claim); it takes L, unlinks itself and returns
 * ETIMEDOUT.  The waiter cancels its timer before it returns, which waits
 * for a running callback, so the frame outlives every use.  Objects whose
 * state a leaving waiter must put right (a join, a barrier) use
 * fb_waiter_wait_keep(), which hands the lock back instead of unlinking.
 *
 * fiber_now(), fiber_sleep_until() and the _until calls of the API take
 * deadlines in CLOCK_MONOTONIC nanoseconds, what the timers keep.
 */
#include <errno.h>
#include <time.h>

#include "sched/sched.h"

/* ---- the pairing heap (heap lock held) ------------------------------- */

/* meld - join two heap roots; the later deadline becomes the first child. */
static struct fb_timer *meld(struct fb_timer *a, struct fb_timer *b)
{
	struct fb_timer *t;

	if (!a)
		return b;
	if (!b)
		return a;
	if (b->deadline < a->deadline) {
		t = a;
		a = b;
		b = t;
	}
	b->prev = a;
	b->next = a->child;
	if (a->child)
		a->child->prev = b;
	a->child = b;
	a->next = NULL;
	a->prev = NULL;
	return a;
}

/* merge_pairs - meld a sibling list: pairs left to right, then the pairs
 * right to left (the two-pass rule that gives the log bound). */
static struct fb_timer *merge_pairs(struct fb_timer *t)
{
	struct fb_timer *stack = NULL, *a, *b, *rest;

	while (t) {
		a = t;
		b = t->next;
		rest = b ? b->next : NULL;
		a->next = a->prev = NULL;
		if (b)
			b->next = b->prev = NULL;
		a = meld(a, b);
		a->next = stack;
		stack = a;
		t = rest;
	}
	while (stack) {
		rest = stack->next;
		stack->next = NULL;
		t = meld(t, stack);
		stack = rest;
	}
	return t;
}

static void heap_remove(struct fb_timer_heap *h, struct fb_timer *t)
{
	struct fb_timer *sub;

	if (t == h->root) {
		h->root = merge_pairs(t->child);
	} else {
		if (t->prev->child == t)
			t->prev->child = t->next;
		else
			t->prev->next = t->next;
		if (t->next)
			t->next->prev = t->prev;
		sub = merge_pairs(t->child);
		h->root = meld(h->root, sub);
	}
	t->child = t->next = t->prev = NULL;
}

static void heap_publish(struct fb_timer_heap *h)
{
	fb_store_relaxed(&h->next, h->root ? h->root->deadline : 0);
}

/* ---- arm, cancel, fire ------------------------------------------------- */

void fb_timer_arm(struct fb_timer *t, struct fb_worker *w)
{
	struct fb_timer_heap *h = &w->timers;

	t->child = t->next = t->prev = NULL;
	t->heap = h;
	fb_spin_lock(&h->lock);
	fb_store_relaxed(&t->state, FB_TIMER_ARMED);
	h->root = meld(h->root, t);
	heap_publish(h);
	fb_spin_unlock(&h->lock);
}

bool fb_timer_cancel(struct fb_timer *t)
{
	struct fb_timer_heap *h = t->heap;
	unsigned int spins = 0;

	fb_spin_lock(&h->lock);
	if (fb_load_relaxed(&t->state) == FB_TIMER_ARMED) {
		heap_remove(h, t);
		heap_publish(h);
		fb_store_relaxed(&t->state, FB_TIMER_DONE);
		fb_spin_unlock(&h->lock);
		return true;
	}
	fb_spin_unlock(&h->lock);
	while (fb_load_acquire(&t->state) != FB_TIMER_DONE)
		if (++spins < 1024)
			fb_cpu_relax();
		else
			sched_yield();
	return false;
}

/*
 * run - fire @h's timers due at @now, counting them on @self.
 *
 * The owner is not the only firer: while a worker is stalled (a fiber
 * runs without a scheduling point), the monitor fires its due timers
 * (sched/monitor.c), possibly at the moment the owner comes back and
 * fires them too.  Nothing here depends on who fires: a timer moves
 * ARMED -> FIRING under the heap lock, so exactly one firer takes it,
 * and the other finds it gone from the heap; cancel either unlinks it
 * while ARMED (under the same lock, so no firer has it) or waits for
 * DONE, which the firer that took it stores after the callback
 * returned, whichever thread that is.  The callbacks only claim a waiter
 * and wake a fiber (expire), which any thread may do.  What a non-owner
 * must not touch is the owner's counters: they are plain owner-written
 * words, so the firer counts on its own row.
 */
static int run(struct fb_timer_heap *h, struct fb_worker *self, uint64_t now)
{
	struct fb_timer *t;
	int n = 0;

	for (;;) {
		fb_spin_lock(&h->lock);
		t = h->root;
		if (!t || t->deadline > now) {
			fb_spin_unlock(&h->lock);
			return n;
		}
		heap_remove(h, t);
		heap_publish(h);
		fb_store_relaxed(&t->state, FB_TIMER_FIRING);
		fb_spin_unlock(&h->lock);
		t->fn(t);
		fb_store_release(&t->state, FB_TIMER_DONE);
		FB_COUNT(self, timers_fired);
		n++;
	}
}

void fb_timer_run(struct fb_worker *w, uint64_t now)
{
	run(&w->timers, w, now);
}

int fb_timer_run_for(struct fb_worker *w, struct fb_worker *self, uint64_t now)
{
	return run(&w->timers, self, now);
}

uint64_t fb_timer_next(struct fb_worker *w)
{
	return fb_load_relaxed(&w->timers.next);
}

/* ---- timed waits -------------------------------------------------------- */

struct timed_wait {
	struct fb_timer timer;
	struct fb_waiter *w;
};

static bool queued(const struct fb_waiter *w)
{
	return w->node.next != &w->node;
}

/* expire - the timer side of the race described above. */
static void expire(struct fb_timer *t)
{
	struct timed_wait *tw = fb_container_of(t, struct timed_wait, timer);

	if (fb_waiter_claim(tw->w, FB_CLAIM_TIMEDOUT))
		fb_waiter_wake(tw->w, 0);
}

/* unlink - take a waiter that left by itself (timed out) off its wait
 * list; it is still linked, so the object is alive.  @lock held. */
static void unlink_locked(struct fb_waiter *w)
{
	if (queued(w))
		fb_list_del(&w->node);
}

/* The foreign-thread side: futex waits bounded by the deadline.  Returns
 * as fb_waiter_wait_keep(). */
static int wait_thread(struct fb_waiter *w, struct fb_spinlock *lock,
		       uint64_t deadline)
{
	struct fb_foreign_wait fw;
	struct timespec rel;
	uint64_t now, d;

	fb_spin_unlock(lock);
	/* Seen by the dump, and by the deadlock check as a wait that ends
	 * by itself, as an armed timer does (sched/monitor.c). */
	fb_foreign_wait_begin(&fw, w);
	while (!fb_load_acquire(w->futexp)) {
		now = fb_now_ns();
		if (now >= deadline) {
			if (fb_waiter_claim(w, FB_CLAIM_TIMEDOUT)) {
				fb_foreign_wait_end(&fw);
				fb_spin_lock(lock);
				return ETIMEDOUT;
			}
			/* A waker took it: its wake is on the way. */
			while (!fb_load_acquire(w->futexp))
				fb_futex_wait(w->futexp, 0, NULL);
			break;
		}
		d = deadline - now;
		rel.tv_sec = (time_t)(d / 1000000000u);
		rel.tv_nsec = (long)(d % 1000000000u);
		fb_futex_wait(w->futexp, 0, &rel);
	}
	fb_foreign_wait_end(&fw);
	return w->result;
}

/* canceled - did fiber_cancel() end @w's wait?  Only while some
 * cancellation is pending can it have (sched/cancel.c). */
static inline bool canceled(struct fb_waiter *w)
{
	return fb_unlikely(fb_load_relaxed(&fb_nr_cancels_pending)) &&
	       fb_load_acquire(w->claimp) == FB_CLAIM_CANCELED;
}

/*
 * give_up - end @w, still queued under @lock, without sleeping: its
 * deadline has passed.  No timer is armed, so whoever claimed it first
 * is fiber_cancel() (a fiber's wait), or, for a select, whose waiters
 * share one claim word across channels while only @lock is held, a
 * waker of another channel (a fiber or a foreign thread).  Their wake
 * must then be taken before the caller waits again.  Return (with @lock
 * held): ETIMEDOUT, or ECANCELED (the claim word says which party won).
 */
static int give_up(struct fb_waiter *w, struct fb_spinlock *lock)
{
	if (fb_waiter_claim(w, FB_CLAIM_TIMEDOUT)) {
		if (w->fiber)
			fb_store_relaxed(&w->fiber->state, FB_FIBER_RUNNING);
		return ETIMEDOUT;
	}
	fb_spin_unlock(lock);
	if (w->fiber)
		fb_fiber_park(); /* the wake: PARKING, or RUNNING */
	else
		while (!fb_load_acquire(w->futexp))
			fb_futex_wait(w->futexp, 0, NULL);
	fb_spin_lock(lock);
	return ECANCELED;
}

int fb_waiter_wait_keep(struct fb_waiter *w, struct fb_spinlock *lock,
			uint64_t deadline)
{
	struct timed_wait tw;
	struct fb_worker *self;
	int c;

	w->deadline = deadline;
	if (deadline == FB_NO_DEADLINE) {
		fb_waiter_wait(w, lock);
		if (canceled(w)) {
			fb_spin_lock(lock);
			return ECANCELED;
		}
		return w->result;
	}
	if (fb_now_ns() >= deadline)
		return give_up(w, lock);
	if (!w->fiber)
		return wait_thread(w, lock, deadline);
	self = fb_worker_self();
	tw.timer.deadline = deadline;
	tw.timer.fn = expire;
	tw.w = w;
	fb_timer_arm(&tw.timer, self);
	fb_waiter_wait(w, lock);
	fb_timer_cancel(&tw.timer);
	c = fb_load_acquire(w->claimp);
	if (c == FB_CLAIM_TIMEDOUT || c == FB_CLAIM_CANCELED) {
		fb_spin_lock(lock);
		return c == FB_CLAIM_TIMEDOUT ? ETIMEDOUT : ECANCELED;
	}
	return w->result;
}

int fb_waiter_wait_ended(struct fb_waiter *w, struct fb_spinlock *lock)
{
	if (!canceled(w))
		return w->result;
	fb_spin_lock(lock);
	unlink_locked(w);
	fb_spin_unlock(lock);
	fb_cancel_consume();
	return ECANCELED;
}

/* fb_waiter_wait_timed_slow - fb_waiter_wait_timed() (sched/sched.h) for
 * a foreign thread or with a deadline. */
int fb_waiter_wait_timed_slow(struct fb_waiter *w, struct fb_spinlock *lock,
			      uint64_t deadline)
{
	int err;

	if (deadline == FB_NO_DEADLINE) {
		fb_waiter_wait(w, lock);
		if (!canceled(w))
			return w->result;
		fb_spin_lock(lock);
		err = ECANCELED;
	} else {
		err = fb_waiter_wait_keep(w, lock, deadline);
		if (err != ETIMEDOUT && err != ECANCELED)
			return err;
	}
	unlink_locked(w);
	fb_spin_unlock(lock);
	if (err == ECANCELED)
		fb_cancel_consume();
	return err;
}

uint64_t fb_deadline_from_timespec(const struct timespec *abstime)
{
	if (abstime->tv_sec < 0)
		return 1;
	if ((uint64_t)abstime->tv_sec >= UINT64_MAX / 1000000000u - 1)
		return FB_NO_DEADLINE;
	return (uint64_t)abstime->tv_sec * 1000000000u +
	       (uint64_t)abstime->tv_nsec;
}

bool fb_timespec_valid(const struct timespec *ts)
{
	return ts && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000;
}

/* ---- time and sleeping -------------------------------------------------- */

/*
 * fiber_now - the time on CLOCK_MONOTONIC in nanoseconds, the clock of
 * every deadline of the API.  Context: any thread; never fails.
 */
uint64_t fiber_now(void)
{
	return fb_now_ns();
}

/* sleep_until - park the calling fiber, or sleep the calling thread, until
 * @deadline (FB_NO_DEADLINE: for ever); @kind is FB_WAIT_SLEEP, with
 * FB_WAIT_CANCELLABLE for fiber_sleep_until().  Return: 0; ECANCELED. */
static int sleep_until(uint64_t deadline, int kind)
{
	struct fb_spinlock lock = { 0 };
	struct fb_list q;
	struct fb_waiter w;
	struct timespec ts;

	if (!fb_current()) {
		ts.tv_sec = (time_t)(deadline / 1000000000u);
		ts.tv_nsec = (long)(deadline % 1000000000u);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
				       NULL) == EINTR)
			;
		return 0;
	}
	fb_list_init(&q);
	fb_spin_lock(&lock);
	fb_waiter_prepare(&w, kind, NULL);
	fb_list_add_tail(&w.node, &q);
	return fb_waiter_wait_timed(&w, &lock, deadline) == ECANCELED ?
		       ECANCELED :
		       0;
}

/*
 * fiber_sleep - park the calling fiber for at least @ns nanoseconds (0:
 * just yield).  A foreign thread sleeps with clock_nanosleep.
 * Context: any thread.
 */
void fiber_sleep(uint64_t ns)
{
	uint64_t deadline = fb_now_ns() + ns;

	if (ns > UINT64_MAX / 2)
		deadline = FB_NO_DEADLINE - 1;
	if (ns == 0 && fb_current()) {
		fb_sched_yield();
		return;
	}
	/* No cancellation point: a call that returns nothing cannot say
	 * that it was cancelled. */
	sleep_until(deadline, FB_WAIT_SLEEP);
}

/* fiber_usleep - fiber_sleep() for @us microseconds.  Context: any thread. */
void fiber_usleep(unsigned int us)
{
	fiber_sleep((uint64_t)us * 1000u);
}

/*
 * fiber_sleep_until - park the calling fiber (sleep the calling thread)
 * until fiber_now() reaches @deadline; a deadline that has passed
 * returns at once, FIBER_NO_DEADLINE never.  A cancellation point.
 * Context: any thread.
 * Return: 0; ECANCELED (fiber_cancel).
 */
int fiber_sleep_until(uint64_t deadline)
{
	int err = fb_cancel_point();

	if (err)
		return err;
	return sleep_until(deadline, FB_WAIT_SLEEP | FB_WAIT_CANCELLABLE);
}
