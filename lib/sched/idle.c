/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * idle.c - a worker's thread: the idle loop that runs fibers, steals
 * from busy workers, polls for LIBFIBER_IDLE_POLL_US and then sleeps on its
 * state word (the worker side of the sleep protocol in sched/core.c).
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "base/sanitizer.h"
#include "base/trace.h"
#include "sched/sched.h"
#include "topo/rcu.h"

/* ---- the idle loop ------------------------------------------------------- */

/* stealable - queued fiber @f may move to worker @to: it is not still
 * being left by its worker, and its mask allows @to. */
static bool stealable(const struct fb_fiber *f, int to)
{
	return !fb_load_acquire(&f->on_worker) && fb_pfiber_allows(&f->pf, to);
}

int fb_sched_take_queued(struct fb_worker *v, int to, struct fb_fiber **got,
			 int max)
{
	struct fb_list *n, *tmp;
	int k = 0, looked = 0;

	if (max <= 0 || !fb_spin_trylock(&v->rq_lock))
		return 0;
	fb_list_for_each_safe (n, tmp, &v->rq) {
		struct fb_fiber *f = fb_list_entry(n, struct fb_fiber, rq_node);

		if (k == max || looked++ == FB_STEAL_SCAN_MAX)
			break;
		if (!stealable(f, to))
			continue;
		fb_list_del(n);
		atomic_fetch_sub(&v->pw.nr_running, 1);
		got[k++] = f;
	}
	fb_spin_unlock(&v->rq_lock);
	return k;
}

/*
 * take_one - take a fiber that @w may run off worker @vid's queue or, when
 * @vid has none to give, off the queue of a worker fb_place_steal_retry()
 * names, for @w to run (counted in its nr_running); a queue whose lock is
 * taken is passed by.  Return: the fiber, or NULL.
 */
static struct fb_fiber *take_one(struct fb_worker *w, int vid)
{
	int ids[FB_STEAL_RETRY_MAX], n, from = vid;
	struct fb_fiber *got = NULL;
	struct fb_place_view pv;

	if (!fb_sched_take_queued(fb_rt->workers[vid], w->id, &got, 1)) {
		fb_sched_view_enter(&pv);
		n = fb_place_steal_retry(&pv, w->id, vid, ids,
					 FB_STEAL_RETRY_MAX);
		fb_sched_view_exit();
		for (int i = 0; !got && i < n; i++) {
			from = ids[i];
			fb_sched_take_queued(fb_rt->workers[from], w->id, &got,
					     1);
		}
		if (!got)
			return NULL;
	}
	fb_spin_lock(&w->rq_lock);
	fb_nr_running_add_local(w, 1);
	fb_spin_unlock(&w->rq_lock);
	FB_COUNT(w, steals);
	FB_PROBE(steal, got->id, from, w->id);
	return got;
}

/*
 * steal - take one queued fiber from another worker after newly-idle
 * balancing pulled nothing (doc/scheduler.md 1.9): from the worker that
 * balance chose, else, rate-limited or forced, from the one an ungated
 * search finds (fb_place_idle_steal), else from any other (take_one).
 */
static struct fb_fiber *steal(struct fb_worker *w)
{
	struct fb_place_view pv;
	bool searched;
	int vid;

	fb_sched_view_enter(&pv);
	/* bal.clock_ns: fb_sched_balance_idle() just read the clock. */
	vid = fb_place_idle_steal(&pv, w->id, w->bal.steal_src,
				  w->bal.steal_force, w->bal.clock_ns,
				  &w->bal.next_steal_ns, &searched);
	fb_sched_view_exit();
	w->bal.steal_src = -1;
	w->bal.steal_force = false;
	if (searched)
		FB_COUNT(w, steal_searches);
	return vid < 0 ? NULL : take_one(w, vid);
}

static struct fb_fiber *pick_idle(struct fb_worker *w)
{
	struct fb_fiber *f;
	struct fb_list *n;

	if (fb_load_relaxed(&w->pw.wakelist) && (f = fb_sched_drain_pick(w)))
		return f;
	if (!fb_load_relaxed(&w->pw.nr_running))
		return NULL;
	fb_spin_lock(&w->rq_lock);
	n = fb_list_pop(&w->rq);
	fb_spin_unlock(&w->rq_lock);
	return n ? fb_list_entry(n, struct fb_fiber, rq_node) : NULL;
}

static bool quit(struct fb_worker *w)
{
	return fb_load_acquire(&fb_rt->stopping) && !fb_worker_has_work(w);
}

/*
 * pause_here - fiber_shutdown() asks the workers to hold still, running
 * nothing, while it makes the fibers still blocked unwakeable
 * (sched/runtime.c): a worker out of work counts itself paused and waits
 * for the request's release.  One with work runs it first, so that every
 * pause follows a pass of the loop that could run what was queued.
 */
static fb_noinline void pause_here(struct fb_worker *w, unsigned int req)
{
	atomic_fetch_add(&fb_rt->nr_paused, 1);
	while (fb_load_seqcst(&fb_rt->pausing) == req)
		fb_futex_wait(&fb_rt->pausing, req, NULL);
	atomic_fetch_sub(&fb_rt->nr_paused, 1);
	(void)w;
}

/*
 * steal_due - while polling, every 64 spins: once the rate limit allows
 * (fb_place_idle_steal), read the hint; if a fiber is queued somewhere,
 * have steal() search.  The hint's nr_running reads are as rate-limited
 * as the search itself.
 */
static bool steal_due(struct fb_worker *w)
{
	struct fb_place_view pv;
	uint64_t now = fb_sched_clock();
	bool yes;

	if (now < w->bal.next_steal_ns)
		return false;
	w->bal.next_steal_ns = now + FB_STEAL_PERIOD_NS;
	fb_sched_view_enter(&pv);
	yes = fb_place_steal_hint(&pv, w->id);
	fb_sched_view_exit();
	w->bal.steal_force = yes;
	return yes;
}

/* movable - whether @v has a stealable fiber queued among the first
 * FB_STEAL_SCAN_MAX; waits for the lock. */
static bool movable(struct fb_worker *v, int to)
{
	struct fb_list *n;
	bool yes = false;
	int looked = 0;

	fb_spin_lock(&v->rq_lock);
	fb_list_for_each (n, &v->rq) {
		struct fb_fiber *f = fb_list_entry(n, struct fb_fiber, rq_node);

		if (looked++ == FB_STEAL_SCAN_MAX)
			break;
		if (stealable(f, to)) {
			yes = true;
			break;
		}
	}
	fb_spin_unlock(&v->rq_lock);
	return yes;
}

/*
 * victim_exists - the poll window is over: the one ungated search before
 * the worker sleeps, so that it never sleeps while another worker has a
 * queued fiber it may run.  The search names its victim by a count that
 * includes fibers that cannot come here (pinned there, or still being
 * left), so the victim's queue is looked at, and those of the workers
 * fb_place_steal_retry() names: a search that trusted the count had the
 * worker poll, search, fail to steal and poll again for as long as the
 * fibers stayed queued, and pinned ones stay, so a worker beside two
 * pinned fibers that yield to each other spent its whole CPU on it.
 */
static bool victim_exists(struct fb_worker *w)
{
	int ids[FB_STEAL_RETRY_MAX], n = 0, vid = -1;
	struct fb_place_view pv;

	fb_sched_view_enter(&pv);
	if (fb_place_steal_hint(&pv, w->id)) {
		vid = fb_place_pick_victim(&pv, w->id);
		FB_COUNT(w, steal_searches);
		if (vid >= 0)
			n = fb_place_steal_retry(&pv, w->id, vid, ids,
						 FB_STEAL_RETRY_MAX);
	}
	fb_sched_view_exit();
	if (vid < 0)
		return false;
	if (movable(fb_rt->workers[vid], w->id))
		return true;
	for (int i = 0; i < n; i++) {
		if (movable(fb_rt->workers[ids[i]], w->id))
			return true;
	}
	return false;
}

/* poll_share - the configured poll window, a fifth of it while @w's CPU
 * is shared. */
static uint64_t poll_share(const struct fb_worker *w)
{
	uint64_t window = fb_rt->poll_ns;

	if (fb_unlikely(w->bind.shared))
		window /= FB_POLL_SHARED_DIV;
	return window;
}

/*
 * poll_window - how long @w polls in this idle wait, in ns: the
 * configured window, a fifth of it while the CPU is shared, nothing while
 * it is crowded unless fibers' wakeups ended most polls lately (see
 * FB_POLL_CROWDED_WAIT_NS and FB_POLL_FIBER_ONE), and the whole shared
 * window one wait in FB_POLL_SAMPLE so that the average stays current.
 */
static uint64_t poll_window(struct fb_worker *w)
{
	uint64_t window = poll_share(w);

	if (fb_likely(!w->bind.crowded) ||
	    w->poll_fiber_avg >= FB_POLL_FIBER_ONE / 2 ||
	    w->poll_skipped + 1 >= FB_POLL_SAMPLE) {
		w->poll_skipped = 0;
		return window;
	}
	w->poll_skipped++;
	FB_COUNT(w, poll_skips);
	return 0;
}

/* poll_ended - a poll of @w for @window ns found work, @by_fiber when a
 * fiber's wakeup (not socket readiness).  A wait that did not poll says
 * nothing of polling, and one whose window ran out nothing of what
 * polling finds.  Nor does one cut short by the steal hint: the hint
 * counts queued fibers, which may be unable to move (pinned, or woken on
 * a worker the kernel preempted before it switched out, which counts two
 * for as long as it is off the CPU).  Sampled as other work, each such
 * hint, once a millisecond through a partner's long wait, weighed against
 * polling, and a crowded worker stopped polling for its ping-pong. */
static void poll_ended(struct fb_worker *w, uint64_t window, bool by_fiber)
{
	if (!window)
		return;
	w->poll_fiber_avg =
		w->poll_fiber_avg - (w->poll_fiber_avg >> FB_POLL_AVG_SHIFT) +
		((by_fiber ? FB_POLL_FIBER_ONE : 0) >> FB_POLL_AVG_SHIFT);
}

/* spin_other_work - what ends a park spin of worker @w at once: a fiber
 * to run, a wakelist to drain, a pause or a stop.  @w's running fiber
 * counts itself in nr_running. */
static bool spin_other_work(struct fb_worker *w)
{
	return w->runnext || fb_load_relaxed(&w->pw.wakelist) ||
	       fb_load_relaxed(&w->pw.nr_running) > 1 ||
	       fb_load_relaxed(&fb_rt->stopping) ||
	       (fb_load_relaxed(&fb_rt->pausing) & 1);
}

/* spin_ended - a spin of @w ran out of time (@missed) or saw the wake. */
static void spin_ended(struct fb_worker *w, bool missed)
{
	w->spin_miss_avg =
		w->spin_miss_avg - (w->spin_miss_avg >> FB_POLL_AVG_SHIFT) +
		((missed ? FB_POLL_FIBER_ONE : 0) >> FB_POLL_AVG_SHIFT);
}

uint64_t fb_park_spin_test_ns;

bool fb_sched_park_spin(struct fb_worker *w, struct fb_fiber *f)
{
	int kind = fb_load_relaxed(&f->waiter)->kind;
	uint64_t deadline, next, window;
	unsigned int spins = 0;

	if (!fb_feat(PARK_SPIN) || kind == FB_WAIT_FD ||
	    kind == FB_WAIT_SLEEP || w->bind.crowded || spin_other_work(w))
		return false;
	window = FB_MIN(poll_share(w), (uint64_t)FB_PARK_SPIN_NS);
	if (fb_unlikely(fb_park_spin_test_ns))
		window = fb_park_spin_test_ns;
	if (!window)
		return false;
	if (w->spin_miss_avg >= FB_PARK_SPIN_MISS_MAX &&
	    ++w->spin_skipped < FB_POLL_SAMPLE)
		return false;
	w->spin_skipped = 0;
	FB_COUNT(w, park_spins);
	/* Only fibers running here arm timers here, and none runs now. */
	deadline = fb_now_ns() + window;
	next = fb_timer_next(w);
	if (next && next < deadline)
		deadline = next;
	/* Acquire: what the waker stored before its CAS (the outcome, the
	 * data it handed over) is then visible, as after a park. */
	while (fb_load_acquire(&f->state) == FB_FIBER_PARKING) {
		if (spin_other_work(w))
			return false;
		if ((++spins & 63) == 0 && fb_now_ns() >= deadline) {
			spin_ended(w, true);
			return false;
		}
		fb_cpu_relax();
	}
	spin_ended(w, false);
	FB_COUNT(w, park_spin_wakes);
	return true;
}

/* pools_trim - an idle worker about to sleep gives back the descriptors
 * and stacks that the pools' trimming says are due (sched/stack.h), a
 * batch at a time, until none is due or work comes. */
static void pools_trim(struct fb_worker *w)
{
	uint64_t now = fb_now_ns();

	while (fb_stack_pool_trim(now, FB_POOL_TRIM_BATCH) +
		       fb_fiber_pool_trim(now, FB_POOL_TRIM_BATCH) &&
	       !fb_worker_has_work(w))
		;
}

/*
 * idle_wait - nothing to run: poll, then sleep, until work may be there.
 * Returns with the state RUNNING.
 */
static void idle_wait(struct fb_worker *w)
{
	uint64_t deadline, next, window;
	unsigned int spins = 0;

	/* The PELT clock (base/clock.h) that fb_sched_balance_idle() read
	 * on the way here, in this pass of the loop; relaxed: placement
	 * reads it as a hint. */
	fb_store_relaxed(&w->pw.idle_stamp, w->bal.clock_ns);
	fb_store_seqcst(&w->pw.state, FB_WS_POLLING);
	/* On a shared CPU the spin takes time from the other thread there,
	 * which may be the one that makes our work, and on a crowded one
	 * from threads that have work for certain (sched/bind.c). */
	window = poll_window(w);
	deadline = fb_now_ns() + window;
	/* Only fibers running here arm timers here: the next deadline cannot
	 * move earlier while we are idle. */
	next = fb_timer_next(w);
	if (next && next < deadline)
		deadline = next;
	while (!fb_worker_has_work(w) &&
	       !(fb_load_relaxed(&w->pw.state) & FB_WS_NEED_RESCHED) &&
	       !fb_load_relaxed(&fb_rt->stopping) &&
	       !(fb_load_relaxed(&fb_rt->pausing) & 1)) {
		if ((spins++ & 63) == 0) {
			/* Ready fds are work too (sched/netpoll.c). */
			if (fb_sched_idle_poll(w))
				goto found_other;
			if (steal_due(w)) /* no sample: poll_ended */
				goto found_steal;
			if (fb_now_ns() >= deadline) {
				if (!victim_exists(w))
					goto sleep;
				w->bal.steal_force = true;
				goto out_found;
			}
		}
		fb_topo_quiescent(w->id);
		fb_cpu_relax();
	}
	poll_ended(w, window, true);
	goto found;
found_other:
	poll_ended(w, window, false);
	goto found;
found_steal:
found:
	/* A kick (sched/core.c kick_idle) is meant to make it steal. */
	if (fb_load_relaxed(&w->pw.state) & FB_WS_NEED_RESCHED)
		w->bal.steal_force = true;
out_found:
	FB_COUNT(w, idle_polls_found);
	goto out;
sleep:
	/* What a burst of fibers left in the pools goes back while idle
	 * (sched/stack.h); unless work came meanwhile. */
	pools_trim(w);
	/* futex, or epoll as the poller, until the next timer (sched/netpoll.c);
	 * publishers of the view stop waiting for us meanwhile (topo/rcu.c) */
	fb_sched_balance_sleep(w); /* sleeper balancing (sched/balance.c) */
	fb_topo_worker_sleep(w->id);
	fb_add(&fb_rt->nr_sleepers, 1);
	fb_sched_idle_sleep(w);
	fb_sub(&fb_rt->nr_sleepers, 1);
	fb_monitor_worker_awake(); /* seq_cst after the sub: monitor.c */
	fb_topo_worker_wake(w->id);
	w->bal.steal_force = true; /* woken: look once (steal()) */
out:
	fb_store_seqcst(&w->pw.state, FB_WS_RUNNING);
}

/* The idle loop runs on the thread's own stack; the sanitizers need its
 * bounds. */
/*
 * idle_entry - the wake path's per-LLC state when worker @w runs out of work:
 * set has_idle_cores when its whole core is idle (doc/scheduler.md 2.2.3), and
 * refresh the LLC's SIS_UTIL scan depth about once per llc_size ms per worker
 * (doc/scheduler.md 2.2.1).  The kernel's writer is the LLC level's periodic balance
 * (fb_place_lb_find), which also runs when no worker goes idle; this one
 * follows a falling utilisation sooner, when idle workers are what a wakeup's
 * scan may find.
 */
static void idle_entry(struct fb_worker *w)
{
	struct fb_place_view v;
	const struct fb_sched_view *t;
	uint64_t now;

	fb_sched_view_enter(&v);
	t = v.topo;
	if (t) {
		fb_place_update_idle_core(&v, w->id);
		/* The clock fb_sched_balance_idle() read in this pass; the
		 * cadence is a millisecond's. */
		now = w->bal.clock_ns;
		if (t->sd_llc[w->id] && now >= w->next_sis_refresh_ns) {
			w->next_sis_refresh_ns =
				now + (uint64_t)t->llc_size[w->id] * 1000000u;
			fb_place_update_idle_scan(&v, w->id, t->sd_llc[w->id],
						  fb_place_llc_util(&v, w->id),
						  false);
		}
	}
	fb_sched_view_exit();
}

static void thread_stack(struct fb_worker *w)
{
	pthread_attr_t a;

	if (pthread_getattr_np(pthread_self(), &a))
		return;
	pthread_attr_getstack(&a, &w->idle_stack, &w->idle_stack_size);
	pthread_attr_destroy(&a);
}

void *fb_worker_main(void *arg)
{
	struct fb_worker *w = arg;
	struct fb_fiber *next;
	sigset_t pipe_set;
	unsigned int req;

	/* A fiber's write to a peer that went away gets EPIPE, never
	 * SIGPIPE (io/fd.c). */
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
	fb_this_worker_tls = w;
	/* Read by the monitor thread: relaxed, it only names the thread. */
	fb_write_once(&w->tid, (int)gettid());
	fb_topo_worker_online(w->id);
	thread_stack(w);
	w->idle_tsan = fb_san_thread_context();
	fb_guard_worker_start(w);
	if (fb_rt->params.bind != FB_BIND_OFF)
		fb_topo_bind_self(fb_rt->topo, w->id);
	fb_sched_bind_start(w);
	for (;;) {
		fb_topo_quiescent(w->id);
		fb_sched_finish_switch(w);
		req = fb_load_seqcst(&fb_rt->pausing);
		if (fb_unlikely(req & 1) && !fb_worker_has_work(w)) {
			pause_here(w, req);
			continue;
		}
		next = pick_idle(w);
		if (!next && fb_sched_balance_idle(w)) /* sched/balance.c */
			next = pick_idle(w);
		if (!next)
			next = steal(w);
		if (next) {
			w->bal.steal_force = false;
			fb_sched_balance_idle_exit(w);
			fb_sched_switch_to(w, NULL, next, w->bal.clock_ns);
			continue;
		}
		if (quit(w))
			break;
		fb_sched_bind_check(w);
		idle_entry(w);
		idle_wait(w);
	}
	fb_guard_worker_stop(w);
	fb_topo_worker_offline(w->id);
	fb_this_worker_tls = NULL;
	return NULL;
}
