/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * chan.c - fiber_chan_t, bounded multi-producer multi-consumer
 * channels of fixed-size elements.
 *
 * A ring of @capacity slots, two FIFO wait lists and a closed flag, all
 * under one spinlock.  Elements are copied with memcpy; blocked callers
 * are served by copying, so a woken caller never retakes the lock:
 *   - a queued receiver's waiter points (w.data) at its buffer, and a
 *     sender that finds one copies the element straight into it;
 *   - a queued sender's waiter points at its element, and a receiver that
 *     takes a slot refills it from the first queued sender (or, with no
 *     ring, copies from that sender directly).
 * Hence receivers queue only while the ring is empty and no sender is
 * queued, and senders only while the ring is full (always, at capacity
 * 0: a send then completes only when a receiver has taken its element,
 * the rendezvous of a synchronous channel).  Order is FIFO: ring elements
 * are older than those of queued senders, which are served in order.
 *
 * Close wakes everyone with EPIPE: queued senders (their elements are not
 * delivered) and queued receivers (which only queue on an empty ring).
 * Elements already in the ring stay receivable; then recv gives EPIPE.
 *
 * A sender that wakes a receiver passes FB_WF_SYNC: the element is handed
 * over, and the receiver is best run where it is hot, on the sender's
 * worker.  Both wakes carry FB_WF_GROUP: sender and receiver share the
 * channel's lines, and may form a wake group (doc/scheduler.md 1.10).
 */
#include "sync/chan.h"

#include <string.h>

/* Where slot @i of the ring starts. */
static unsigned char *slot(struct fb_chan *ch, size_t i)
{
	return ch->ring + i * ch->elem_size;
}

/*
 * fiber_chan_create - make a channel of elements of @elem_size bytes that
 * buffers up to @capacity of them (0: synchronous) and store it in *@chan.
 * Context: any thread.
 * Return: 0; EINVAL for a NULL @chan, an @elem_size of 0, or a ring too
 * large to address; ENOMEM.
 */
int fiber_chan_create(fiber_chan_t **chan, size_t elem_size, size_t capacity)
{
	struct fb_chan *ch;
	size_t bytes;

	if (!chan || elem_size == 0)
		return EINVAL;
	if (__builtin_mul_overflow(elem_size, capacity, &bytes) ||
	    __builtin_add_overflow(bytes, sizeof(*ch), &bytes))
		return EINVAL;
	ch = fb_malloc(bytes);
	if (!ch)
		return ENOMEM;
	memset(ch, 0, sizeof(*ch));
	ch->elem_size = elem_size;
	ch->capacity = capacity;
	fb_list_init(&ch->senders);
	fb_list_init(&ch->receivers);
	*chan = ch;
	return 0;
}

/*
 * fiber_chan_destroy - free @chan and the elements left in it.
 * Context: any thread; nobody may use @chan afterwards.
 * Return: 0; EINVAL for NULL; EBUSY if callers wait on it (nothing freed).
 */
int fiber_chan_destroy(fiber_chan_t *chan)
{
	struct fb_chan *ch = chan;
	bool busy;

	if (!ch)
		return EINVAL;
	fb_spin_lock(&ch->lock);
	busy = fb_waitq_busy(&ch->senders) || fb_waitq_busy(&ch->receivers);
	fb_spin_unlock(&ch->lock);
	if (busy)
		return EBUSY;
	fb_free(ch);
	return 0;
}

int fb_chan_send_locked(struct fb_chan *ch, const void *elem)
{
	struct fb_waiter *r;

	if (ch->closed)
		return EPIPE;
	r = fb_waitq_pop(&ch->receivers);
	if (r) {
		memcpy((void *)r->data, elem, ch->elem_size);
		r->result = 0;
		fb_waiter_wake(r, FB_WF_SYNC | FB_WF_GROUP);
		return 0;
	}
	if (ch->count < ch->capacity) {
		memcpy(slot(ch, (ch->head + ch->count) % ch->capacity), elem,
		       ch->elem_size);
		ch->count++;
		return 0;
	}
	return EAGAIN;
}

int fb_chan_recv_locked(struct fb_chan *ch, void *elem)
{
	struct fb_waiter *s;

	s = fb_waitq_pop(&ch->senders);
	FB_ASSERT(!s || ch->count == ch->capacity);
	if (ch->count) {
		/* With a sender queued the ring is full, so the slot freed
		 * at the head is also the tail: refill it in place. */
		memcpy(elem, slot(ch, ch->head), ch->elem_size);
		if (s)
			memcpy(slot(ch, ch->head), (const void *)s->data,
			       ch->elem_size);
		else
			ch->count--;
		ch->head = (ch->head + 1) % ch->capacity;
	} else if (s) {
		memcpy(elem, (const void *)s->data, ch->elem_size);
	} else {
		return ch->closed ? EPIPE : EAGAIN;
	}
	if (s) {
		s->result = 0;
		fb_waiter_wake(s, FB_WF_GROUP);
	}
	return 0;
}

/* op_until - a send (@send) or a receive of @elem on @ch that waits until
 * @deadline: the common body of send_until and recv_until. */
static inline int op_until(struct fb_chan *ch, void *elem, uint64_t deadline,
			   bool send)
{
	struct fb_waiter w;
	int err;

	if (!ch || !elem)
		return EINVAL;
	err = fb_cancel_point();
	if (err)
		return err;
	fb_spin_lock(&ch->lock);
	err = send ? fb_chan_send_locked(ch, elem) :
		     fb_chan_recv_locked(ch, elem);
	if (err != EAGAIN) {
		fb_spin_unlock(&ch->lock);
		return err;
	}
	fb_waiter_prepare(&w,
			  (send ? FB_WAIT_CHAN_SEND : FB_WAIT_CHAN_RECV) |
				  FB_WAIT_CANCELLABLE,
			  ch);
	w.data = (uintptr_t)elem;
	fb_list_add_tail(&w.node, send ? &ch->senders : &ch->receivers);
	return fb_waiter_wait_timed(&w, &ch->lock, deadline);
}

/*
 * fiber_chan_send - copy the element at @elem into @chan, waiting while
 * the ring is full (at capacity 0, until a receiver takes it).
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; EINVAL for NULL; EPIPE if @chan is closed, before or while
 * the caller waits (the element is then not delivered).
 */
static int send_until(fiber_chan_t *chan, const void *elem, uint64_t deadline)
{
	/* The element is only read: the waiter keeps its address. */
	return op_until(chan, (void *)elem, deadline, true);
}

int fiber_chan_send(fiber_chan_t *chan, const void *elem)
{
	return send_until(chan, elem, FB_NO_DEADLINE);
}

/*
 * fiber_chan_timedsend - fiber_chan_send() that gives up at @abstime
 * (CLOCK_MONOTONIC).  Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ETIMEDOUT (the element was not delivered); EINVAL for NULL or
 * a bad @abstime; EPIPE if @chan is closed.
 */
int fiber_chan_timedsend(fiber_chan_t *chan, const void *elem,
			 const struct timespec *abstime)
{
	if (!fb_timespec_valid(abstime))
		return EINVAL;
	return send_until(chan, elem, fb_deadline_from_timespec(abstime));
}

/*
 * fiber_chan_send_until - fiber_chan_send() that gives up when
 * fiber_now() reaches @deadline (CLOCK_MONOTONIC ns; FIBER_NO_DEADLINE:
 * never); an element that can go at once goes whatever the deadline.
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ETIMEDOUT (the element was not delivered); EINVAL for NULL;
 * EPIPE if @chan is closed.
 */
int fiber_chan_send_until(fiber_chan_t *chan, const void *elem,
			  uint64_t deadline)
{
	return send_until(chan, elem, deadline);
}

/*
 * fiber_chan_trysend - fiber_chan_send() if it need not wait.
 * Context: any thread; never switches.
 * Return: 0; EINVAL for NULL; EPIPE if @chan is closed; EAGAIN if the
 * ring is full (at capacity 0: if no receiver waits).
 */
int fiber_chan_trysend(fiber_chan_t *chan, const void *elem)
{
	struct fb_chan *ch = chan;
	int err;

	if (!ch || !elem)
		return EINVAL;
	fb_spin_lock(&ch->lock);
	err = fb_chan_send_locked(ch, elem);
	fb_spin_unlock(&ch->lock);
	return err;
}

/*
 * fiber_chan_recv - take the oldest element of @chan into @elem, waiting
 * while there is none.
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; EINVAL for NULL; EPIPE once @chan is closed and drained
 * (@elem untouched).
 */
static int recv_until(fiber_chan_t *chan, void *elem, uint64_t deadline)
{
	return op_until(chan, elem, deadline, false);
}

int fiber_chan_recv(fiber_chan_t *chan, void *elem)
{
	return recv_until(chan, elem, FB_NO_DEADLINE);
}

/*
 * fiber_chan_timedrecv - fiber_chan_recv() that gives up at @abstime
 * (CLOCK_MONOTONIC).  Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ETIMEDOUT (@elem untouched); EINVAL for NULL or a bad
 * @abstime; EPIPE once @chan is closed and drained.
 */
int fiber_chan_timedrecv(fiber_chan_t *chan, void *elem,
			 const struct timespec *abstime)
{
	if (!fb_timespec_valid(abstime))
		return EINVAL;
	return recv_until(chan, elem, fb_deadline_from_timespec(abstime));
}

/*
 * fiber_chan_recv_until - fiber_chan_recv() that gives up when
 * fiber_now() reaches @deadline (CLOCK_MONOTONIC ns; FIBER_NO_DEADLINE:
 * never); an element that is there is taken whatever the deadline.
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ETIMEDOUT (@elem untouched); EINVAL for NULL; EPIPE once
 * @chan is closed and drained.
 */
int fiber_chan_recv_until(fiber_chan_t *chan, void *elem, uint64_t deadline)
{
	return recv_until(chan, elem, deadline);
}

/*
 * fiber_chan_tryrecv - fiber_chan_recv() if it need not wait.
 * Context: any thread; never switches.
 * Return: 0; EINVAL for NULL; EPIPE once closed and drained; EAGAIN if no
 * element is there (at capacity 0: if no sender waits).
 */
int fiber_chan_tryrecv(fiber_chan_t *chan, void *elem)
{
	struct fb_chan *ch = chan;
	int err;

	if (!ch || !elem)
		return EINVAL;
	fb_spin_lock(&ch->lock);
	err = fb_chan_recv_locked(ch, elem);
	fb_spin_unlock(&ch->lock);
	return err;
}

/*
 * fiber_chan_close - close @chan: later sends fail, receivers drain what
 * is buffered, and every waiting caller wakes with EPIPE.
 * Context: any thread; never switches.
 * Return: 0; EINVAL for NULL; EPIPE if it was closed already.
 */
int fiber_chan_close(fiber_chan_t *chan)
{
	struct fb_chan *ch = chan;

	if (!ch)
		return EINVAL;
	fb_spin_lock(&ch->lock);
	if (ch->closed) {
		fb_spin_unlock(&ch->lock);
		return EPIPE;
	}
	ch->closed = true;
	/* Under the lock: timed waiters (sched/timer.c). */
	fb_waitq_wake_all(&ch->senders, EPIPE, 0);
	fb_waitq_wake_all(&ch->receivers, EPIPE, 0);
	fb_spin_unlock(&ch->lock);
	return 0;
}
