/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * select.c - fiber_chan_select(): wait until one of several channel
 * operations can complete, and complete exactly that one.
 *
 * The caller takes the locks of every channel it names, in address order
 * (so two selects over the same channels cannot deadlock, and a channel
 * named twice is locked once), then visits the cases in a random order and
 * performs the first that needs no wait; among ready cases each is chosen
 * with the same probability, as in Go.  If none is ready it queues one
 * waiter per case, each on its channel's list as a plain send or recv
 * would, and parks once.
 *
 * The waiters share one claim word (sched/sched.h): for a fiber, the
 * fiber's wclaim, which fiber_cancel() reaches too; for a foreign thread,
 * the claim word and futex of the first waiter.  The first party that
 * moves it out of NONE wins: a sender or receiver of one of the channels
 * (it pops that case's waiter, moves the element as for any waiter and
 * stores the case's result, 0 or EPIPE on close), the deadline's timer, or
 * a canceller.  Every other case's waiter is then unclaimable: the code of
 * chan.c skips it exactly as it skips a waiter that timed out, so no
 * element is moved for it, and the selector unlinks it itself under its
 * channel's lock before returning (its frame holds the waiters).  Which
 * case won is told by its result, the only one that is no longer
 * SELECT_PENDING.  The winner's waker unlinked the winner, so its channel
 * may be closed, destroyed and freed as soon as the select is woken: the
 * selector takes the lock of a channel only while one of its waiters is
 * still linked there, which keeps that channel's destroy at EBUSY.
 */
#include "sync/chan.h"

#include <stdlib.h>
#include <string.h>

/* A waiter's result while nobody has served it (never an errno). */
#define SELECT_PENDING (-1)
/* Cases served from the caller's stack; more are allocated. */
#define SELECT_STACK 8

struct select_state {
	struct fb_waiter w[SELECT_STACK];
	struct fb_chan *locks[SELECT_STACK]; /* distinct, ascending */
	size_t order[SELECT_STACK];	     /* visit order of the cases */
};

/* rng - xorshift64* of the calling thread, seeded on first use. */
static uint32_t rng(void)
{
	static __thread uint64_t s;
	uint64_t x = s;

	if (fb_unlikely(!x))
		x = fb_now_ns() ^ (uintptr_t)&s ^ 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	s = x;
	return (uint32_t)((x * 0x2545f4914f6cdd1dull) >> 32);
}

static int cmp_chan(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (struct fb_chan *const *)a;
	uintptr_t y = (uintptr_t) * (struct fb_chan *const *)b;

	return x < y ? -1 : x > y;
}

static void lock_all(struct fb_chan **locks, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fb_spin_lock(&locks[i]->lock);
}

static void unlock_all(struct fb_chan **locks, size_t n)
{
	for (size_t i = n; i-- > 0;)
		fb_spin_unlock(&locks[i]->lock);
}

/* try_case - perform case @c if it need not wait.  Context: its channel's
 * lock held.  Return: 0 or EPIPE (done); EAGAIN. */
static int try_case(const struct fiber_select_case *c)
{
	if (c->op == FIBER_SELECT_SEND)
		return fb_chan_send_locked(c->chan, c->elem);
	return fb_chan_recv_locked(c->chan, c->elem);
}

/* check - validate the arguments.  Return: 0; EINVAL. */
static int check(const struct fiber_select_case *cases, size_t n,
		 const size_t *chosen)
{
	if (!cases || !chosen || n == 0 || n > FIBER_SELECT_MAX)
		return EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!cases[i].chan || !cases[i].elem ||
		    (cases[i].op != FIBER_SELECT_SEND &&
		     cases[i].op != FIBER_SELECT_RECV))
			return EINVAL;
	return 0;
}

/* keep_held - keep in @locks (distinct, ascending; @n of them) the
 * channels named by a case other than @win, in order; return how many.
 * Every other channel may be gone. */
static size_t keep_held(const struct fiber_select_case *cases, size_t n,
			size_t win, struct fb_chan **locks, size_t nlocks)
{
	size_t k = 0;

	for (size_t l = 0; l < nlocks; l++) {
		for (size_t i = 0; i < n; i++) {
			if (i != win && cases[i].chan == locks[l]) {
				locks[k++] = locks[l];
				break;
			}
		}
	}
	return k;
}

/*
 * wait_cases - queue a waiter per case and park until one is served, the
 * deadline passes or the caller is cancelled.  Context: every lock of
 * @locks held; returns with none held and every waiter unlinked.
 * Return: 0 or EPIPE with *@chosen set; ETIMEDOUT; ECANCELED (consumed).
 */
static int wait_cases(struct fiber_select_case *cases, size_t n,
		      struct fb_waiter *w, struct fb_chan **locks,
		      size_t nlocks, uint64_t deadline, size_t *chosen)
{
	struct fb_waiter *rep = &w[0];
	size_t win;
	int err, claim;

	/* Only the first is prepared: preparing again would reset the
	 * shared claim word, which a canceller may already have moved. */
	for (size_t i = 0; i < n; i++) {
		struct fb_chan *ch = cases[i].chan;
		bool send = cases[i].op == FIBER_SELECT_SEND;
		int kind = send ? FB_WAIT_CHAN_SEND : FB_WAIT_CHAN_RECV;

		if (i == 0)
			fb_waiter_prepare(rep, kind | FB_WAIT_CANCELLABLE, ch);
		else
			w[i] = *rep; /* its claim word and futex */
		w[i].kind = kind;
		w[i].obj = ch;
		w[i].result = SELECT_PENDING;
		w[i].data = (uintptr_t)cases[i].elem;
		fb_list_add_tail(&w[i].node,
				 send ? &ch->senders : &ch->receivers);
	}
	/* Parking with one lock held is parking with all of them held: a
	 * waker needs a channel lock to claim, and the claim is shared. */
	unlock_all(locks + 1, nlocks - 1);
	err = fb_waiter_wait_keep(rep, &locks[0]->lock, deadline);
	if (err == ETIMEDOUT || err == ECANCELED)
		fb_spin_unlock(&locks[0]->lock);
	/* The claim word, not @err, says who ended the wait: a waker of
	 * another channel may claim it after the deadline passed but before
	 * fb_waiter_wait_keep() gave up (it then reports ECANCELED). */
	claim = fb_load_acquire(rep->claimp);
	win = n;
	if (claim == FB_CLAIM_WOKEN) {
		/* The waker stored the result before its wake. */
		for (win = 0; win < n; win++)
			if (w[win].result != SELECT_PENDING)
				break;
		FB_ASSERT(win < n && "a select woke with no case served");
	}
	/* Unlink every waiter but the winner's, which its waker took off.
	 * Only under the locks of channels that still hold one: the
	 * winner's channel holds none unless another case names it, so it
	 * may be destroyed and freed already (the lifetime rule). */
	nlocks = keep_held(cases, n, win, locks, nlocks);
	lock_all(locks, nlocks);
	for (size_t i = 0; i < n; i++)
		if (i != win)
			fb_list_del(&w[i].node);
	unlock_all(locks, nlocks);
	if (claim == FB_CLAIM_CANCELED) {
		fb_cancel_consume();
		return ECANCELED;
	}
	if (claim == FB_CLAIM_TIMEDOUT)
		return ETIMEDOUT;
	if (win == n)
		return EIO;
	*chosen = win;
	return w[win].result;
}

/*
 * fiber_chan_select - complete one of the @n operations of @cases (a send
 * of *elem, or a recv into *elem, on each case's channel), waiting until
 * one can complete or fiber_now() reaches @deadline (FIBER_NO_DEADLINE:
 * never; a deadline already past, such as 0, polls once).  Among cases
 * that can complete at once, one is chosen uniformly at random.  A case on
 * a closed channel can always complete: a send with EPIPE (nothing sent), a
 * recv with EPIPE once the channel is drained, as fiber_chan_send() and
 * fiber_chan_recv() do.  A channel may appear in several cases.
 * Context: fiber (parks) or any other thread (blocks).  A cancellation
 * point.
 * Return: 0 (the element of case *@chosen was sent or received) or EPIPE
 * (case *@chosen met a closed channel); ETIMEDOUT (nothing moved);
 * ECANCELED (nothing moved); EINVAL for NULL @cases or @chosen, @n of 0 or
 * above FIBER_SELECT_MAX, a NULL channel or element, or an unknown op;
 * ENOMEM (more than a few cases need memory).  *@chosen is written only
 * with 0 or EPIPE.
 */
int fiber_chan_select(struct fiber_select_case *cases, size_t n,
		      uint64_t deadline, size_t *chosen)
{
	struct select_state st, *big = NULL;
	struct fb_waiter *w = st.w;
	struct fb_chan **locks = st.locks;
	size_t *order = st.order;
	size_t nlocks = 0;
	int err;

	err = check(cases, n, chosen);
	if (err)
		return err;
	err = fb_cancel_point();
	if (err)
		return err;
	if (n > SELECT_STACK) {
		big = fb_malloc(n *
				(sizeof(*w) + sizeof(*locks) + sizeof(*order)));
		if (!big)
			return ENOMEM;
		w = (struct fb_waiter *)big;
		locks = (struct fb_chan **)(w + n);
		order = (size_t *)(locks + n);
	}
	for (size_t i = 0; i < n; i++)
		locks[i] = cases[i].chan;
	qsort(locks, n, sizeof(*locks), cmp_chan);
	for (size_t i = 0; i < n; i++)
		if (i == 0 || locks[i] != locks[nlocks - 1])
			locks[nlocks++] = locks[i];
	/* A uniform random permutation (Fisher-Yates). */
	for (size_t i = 0; i < n; i++) {
		size_t j = rng() % (i + 1);

		order[i] = order[j];
		order[j] = i;
	}

	lock_all(locks, nlocks);
	for (size_t k = 0; k < n; k++) {
		size_t i = order[k];

		err = try_case(&cases[i]);
		if (err != EAGAIN) {
			unlock_all(locks, nlocks);
			*chosen = i;
			goto out;
		}
	}
	if (fb_now_ns() >= deadline) {
		unlock_all(locks, nlocks);
		err = ETIMEDOUT;
		goto out;
	}
	err = wait_cases(cases, n, w, locks, nlocks, deadline, chosen);
out:
	fb_free(big);
	return err;
}
