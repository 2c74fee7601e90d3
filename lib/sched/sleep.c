/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sleep.c - how a worker waits and what it does between fibers: the
 * periodic tick of a busy worker (due timers, a look at the netpoller
 * when no worker holds it), the idle loop's look at the netpoller, and
 * the idle sleep itself, on the futex or, for the worker that holds the
 * poller flag, in epoll (netpoll.c).  Every sleep ends at the worker's
 * next timer deadline, at a wake (rule 4 of core.c's opening comment) or
 * at I/O readiness.
 */
#include <errno.h>
#include <time.h>

#include "sched/netpoll.h"
#include "sched/sched.h"

static const struct timespec no_wait;

void fb_sched_tick(struct fb_worker *w)
{
	uint64_t next = fb_timer_next(w), now;

	if (next) {
		now = fb_now_ns();
		if (next <= now)
			fb_timer_run(w, now);
	}
	if (!fb_netpoll_take())
		return;
	FB_COUNT(w, epoll_ticks);
	fb_netpoll_wait(w, &no_wait);
	fb_netpoll_release();
}

bool fb_sched_idle_poll(struct fb_worker *w)
{
	int n;

	if (!fb_netpoll_take())
		return false;
	n = fb_netpoll_wait(w, &no_wait);
	fb_netpoll_release();
	return n > 0;
}

/* The relative timeout of a sleep that must end at @next (0: none). */
static struct timespec *until(uint64_t next, struct timespec *ts)
{
	uint64_t now, d;

	if (!next)
		return NULL;
	now = fb_now_ns();
	d = next > now ? next - now : 0;
	ts->tv_sec = (time_t)(d / 1000000000u);
	ts->tv_nsec = (long)(d % 1000000000u);
	return ts;
}

static void epoll_sleep(struct fb_worker *w, uint64_t next)
{
	struct timespec ts, *rel = until(next, &ts);

	FB_COUNT(w, epoll_sleeps);
	fb_netpoll_wait(w, rel); /* a deadline already due: just look */
}

static void futex_sleep(struct fb_worker *w, uint64_t next)
{
	struct timespec ts;

	FB_COUNT(w, sleeps);
	do {
		if (fb_futex_wait(&w->pw.state, FB_WS_SLEEPING,
				  until(next, &ts)) == ETIMEDOUT)
			break;
	} while (fb_load_acquire(&w->pw.state) == FB_WS_SLEEPING);
}

/* pools_trim_at - the earlier of the pools' next trims, 0 for none. */
static uint64_t pools_trim_at(void)
{
	uint64_t a = fb_stack_pool_trim_at(), b = fb_fiber_pool_trim_at();

	if (!a || (b && b < a))
		return b;
	return a;
}

/*
 * fb_sched_idle_sleep - the sleep half of the idle loop (idle.c): the
 * worker is POLLING and its poll window is over.  Become the poller and
 * sleep in epoll, or sleep on the futex, until the next timer deadline, a
 * wake or I/O readiness.  Then fire the timers that are due.  Returns with
 * the state still idle; the caller stores RUNNING.
 */
void fb_sched_idle_sleep(struct fb_worker *w)
{
	unsigned int s = FB_WS_POLLING;
	uint64_t next = fb_timer_next(w);
	bool as_poller = fb_netpoll_take();
	uint64_t trim = pools_trim_at();

	/* The pools' next trim (sched/stack.h) is a deadline too, while they
	 * hold more than they keep for good; the wake lands in idle.c,
	 * which trims before it sleeps again. */
	if (trim && (!next || trim < next))
		next = trim;

	if (next && next <= fb_now_ns())
		goto out;
	if (!fb_cas_seqcst(&w->pw.state, &s,
			   as_poller ? FB_WS_EPOLL : FB_WS_SLEEPING))
		goto out; /* NEED_RESCHED: a waker saw us polling */
	if (fb_worker_has_work(w) || fb_load_seqcst(&fb_rt->stopping) ||
	    (fb_load_seqcst(&fb_rt->pausing) & 1))
		goto out;
	if (as_poller)
		epoll_sleep(w, next);
	else
		futex_sleep(w, next);
out:
	if (as_poller)
		fb_netpoll_release();
	next = fb_timer_next(w);
	if (next)
		fb_timer_run(w, fb_now_ns());
}
