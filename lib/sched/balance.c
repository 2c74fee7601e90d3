// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * balance.c - load balancing in the running runtime: the glue between
 * the pure decisions of place/balance.c, place/idle.c and place/create.c
 * (doc/scheduler.md 1.6 to 1.8) and the workers, run queues and sleep
 * protocol of sched/core.c and sched/idle.c.
 *
 * The model.  The runtime is cooperative: there is no timer interrupt, so a
 * "tick" is a scheduling point.  fb_sched_tick_maybe() (sched/sched.h) already counts
 * scheduling points for timers and I/O; every FB_TICK_SWITCHES of them a busy
 * worker reads the clock here, updates its load averages, and once FB_TICK_NS
 * (1 ms, the kernel's HZ=1000 tick) has passed runs fb_place_tick(): its own
 * periodic balance, the decay of its own blocked load once per balance trigger,
 * and the decision to kick a sleeping worker, which it then futex-wakes.  A
 * worker whose run queue empties runs a pending kick's sleeper pass
 * (fb_place_nohz_pass) and newly-idle balancing (fb_place_newidle) before the
 * idle loop's steal, which takes from the source that balance chose but
 * could not detach from (bal.steal_src) or runs its rate-limited search
 * (sched/idle.c); just before it sleeps it runs the idle-entry STATS pass
 * of rule 4 (doc/scheduler.md 6.2.4) and enters the sleeping mask.  A kicked
 * worker wakes, runs the pass from its idle loop and sleeps again; it stays in
 * the sleeping mask throughout (it leaves only when its idle loop finds work,
 * or at its first tick with work), so sleep_enter is not repeated and the
 * global has_blocked is not set again behind the pass's back.
 *
 * Moving fibers.  A pull detaches under the source's rq lock and attaches
 * under the destination's, never holding both; in between the fibers are
 * RUNNABLE on no queue and owned by the balancer (nobody else moves a
 * RUNNABLE fiber that is on no queue).  A queued fiber with on_worker == 1
 * is offered as "running", so it never moves (sched/core.c rule 3).  The
 * source's nr_running drops with an atomic decrement (or the owner's plain
 * store when the balancer is the source), the destination's rises with a
 * seq_cst increment and a wake (rule 4) when it is not the balancer.
 * Active balance cannot pre-empt: fb_place_request_push() leaves
 * push_target on the source; the source hands its running fiber over at
 * that fiber's next yield (SCHED_MIGRATE to the requested worker); if the
 * fiber parks instead, the request lapses (push_fiber no longer matches).
 *
 * Clock and PELT.  The clock is fb_sched_clock() (base/clock.h: the TSC scaled
 * to ns where the kernel trusts it, else the vDSO's CLOCK_MONOTONIC; no
 * system call either way).  Averages are updated at the events the kernel
 * updates them at, with one clock read per switch (sched/sched.h):
 * - a switch: the worker's interval (nr_running runnable, one running),
 *   the leaving fiber's (running) and the arriving one's (queued after a
 *   yield or a balancing pull, blocked otherwise); at a runnext hand-off
 *   that leaves nr_running as it was, the worker's update waits for the
 *   next switch or tick (sched/sched.h, fb_sched_pelt_catch_up);
 * - a fiber's exit: its share leaves the worker's sums;
 * - ticks (a fiber that yields with nothing else to run never switches)
 *   and idle entry and exit.
 * A wakeup does not stamp the wakee: its wait for its first switch counts
 * in its own averages as blocked time (the worker's sums count it as
 * runnable through nr_running).  Stamping it would cost the same-worker
 * ping-pong a second clock read per switch, and a remote waker the two
 * cache lines of the wakee's averages, which its worker just wrote.
 * A busy worker owns its averages (pw.avg_busy): it updates them without a
 * lock, and nobody else writes them.  An idle one's are written under its
 * rq lock, by itself or by a balancer refreshing a sleeper's blocked load;
 * the flag flips under that lock at idle exit and entry.
 *
 * Migrations.  A fiber's share sits in the sums of one worker
 * (pf.attached).  When it first runs somewhere else, fb_sched_pelt_attach
 * queues its averages, brought to the old worker's last update, for
 * removal from that worker (pw.removed, folded by that worker's writer at
 * its next update: the kernel's cfs_rq->removed, lock-free), then brings
 * them to now and adds them to the new one.
 * This covers every way of moving: wakeups placed elsewhere, pushes,
 * active balance, creation (attached == -1).  A balancing pull removes
 * the pulled fibers from the source at once, since the balancer's next
 * decision reads the source's load, and leaves them unattached.
 *
 * runnable_weight is nr_running x 1024 at each update (every fiber has
 * weight 1024).  last_ran_ns (the cache-hot test) is the clock at the
 * fiber's last switch-out.
 *
 * Alternatives rejected: sampling PELT at ticks only (what this file did
 * first: cheaper, but a fiber's average then depended on who happened to
 * run at the sample); stamping wakees at the wakeup (see above);
 * locking both run queues in id order (longer hold times for the same
 * result, since nothing else moves a detached fiber).
 */
#include <string.h>

#include "base/trace.h"
#include "sched/sched.h"

/* Everything one balancing operation needs; the hooks' @arg. */
struct bctx {
	struct fb_place_view v;
	struct fb_worker *self;
	uint64_t now, tick;
	struct fb_balance_ops ops;
};

static uint64_t clock_now(void)
{
	return fb_sched_clock();
}

static int level_of(const struct fb_domain *d)
{
	return FB_MIN(d->level, FB_BAL_LEVELS - 1);
}

static void nr_running_add(struct fb_worker *t, struct fb_worker *self, int d)
{
	if (t == self)
		fb_nr_running_add_local(t, d);
	else
		atomic_fetch_add(&t->pw.nr_running, d);
}

/*
 * sample - bring @w's averages up to @now; @busy: a fiber ran meanwhile.
 * Context: @w's averages' writer (the owner while busy, else rq_lock).
 */
static void sample(struct fb_worker *w, uint64_t now, bool busy)
{
	int nr = fb_load_relaxed(&w->pw.nr_running);

	fb_sched_pelt_worker(w, now, busy);
	w->pw.runnable_weight = (unsigned long)FB_MAX(nr, 0) * FB_PELT_CAPACITY;
}

/*
 * remove_share - queue @f's share for removal from worker @old's sums as
 * those sums hold it: @f's averages brought to @old's last update (the
 * kernel's sync_entity_load_avg()), not to the mover's clock.  @old folds
 * the removal before its next update, i.e. at that same time; removed as
 * of later, the share would have decayed more than @old's copy of it and
 * the difference would stay behind.  Context: @f owned by the caller,
 * before its averages move past @old's.
 */
static void remove_share(struct fb_worker *self, struct fb_fiber *f, int old)
{
	struct fb_pworker *o = &fb_rt->workers[old]->pw;
	struct fb_pelt share = f->pf.avg;
	uint64_t t = fb_pelt_last_update(&o->avg);

	if (t > share.last_update)
		fb_pelt_update(&share, t, f->pf.weight, f->pf.avg_queued,
			       false);
	fb_pelt_remove(&o->removed, &share);
	FB_COUNT(self, pelt_migrations);
}

void fb_sched_pelt_catch_up(struct fb_worker *w, int nr)
{
	uint64_t split = fb_load_relaxed(&w->run_start);
	unsigned n = (unsigned)FB_MAX(w->pelt_nr, 1);

	w->pelt_skipped = false;
	/* Hand-offs came only after an update by a switch (last_update at
	 * or before the first of them); the test keeps a clock that went
	 * back from moving last_update back. */
	if (nr != w->pelt_nr && split > fb_pelt_last_update(&w->pw.avg))
		fb_pelt_update_worker(&w->pw.avg, split, n * FB_PELT_CAPACITY,
				      n, true);
}

void fb_sched_pelt_attach(struct fb_worker *w, struct fb_fiber *f, uint64_t now)
{
	struct fb_pelt *a = &f->pf.avg;
	int old = f->pf.attached;

	if (!a->last_update) {
		/* New: its history starts now and adds nothing to the
		 * worker's sums, so of fb_pelt_attach() only the worker's
		 * period position is left to take. */
		*a = (struct fb_pelt){
			.last_update = w->pw.avg.last_update,
			.period_contrib = w->pw.avg.period_contrib,
		};
		f->pf.attached = w->id;
		return;
	}
	if (old >= 0 && old < fb_rt->nr_workers)
		remove_share(w, f, old);
	fb_pelt_update(a, now, f->pf.weight, f->pf.avg_queued, false);
	fb_pelt_attach(&w->pw.avg, a, f->pf.weight);
	f->pf.attached = w->id;
}

/* ---- the hooks of struct fb_balance_ops ---------------------------------- */

static uint64_t op_clock(void *arg)
{
	(void)arg;
	return clock_now();
}

static void op_decay(void *arg, int i)
{
	struct bctx *c = arg;
	struct fb_worker *w = fb_rt->workers[i];

	if (w->solo) {
		/* No averages on one worker (sched/sched.h): none to decay. */
		fb_place_blocked_stamp(&w->pw, c->tick);
		fb_store_relaxed(&w->pw.has_blocked_load, false);
		return;
	}
	fb_spin_lock(&w->rq_lock);
	fb_place_decay_blocked(&w->pw, c->now, c->tick);
	fb_spin_unlock(&w->rq_lock);
	if (w == c->self)
		FB_COUNT(c->self, blocked_decays);
	else
		FB_COUNT(c->self, sleeper_decays);
}

static bool refresh(struct bctx *c, int i)
{
	struct fb_worker *w = fb_rt->workers[i];
	uint64_t before;
	bool left;

	/* doc/scheduler.md 6.2.1: the rate limit is read without the lock,
	 * so a sleeper that another refresher stamped (and may be decaying
	 * under its lock right now) is skipped, not waited for. */
	if (fb_load_relaxed(&w->pw.has_blocked_load) &&
	    !fb_place_blocked_due(&c->v, i, c->tick))
		return true;
	fb_spin_lock(&w->rq_lock);
	if (fb_load_relaxed(&w->pw.avg_busy)) { /* it woke: not ours */
		fb_spin_unlock(&w->rq_lock);
		return false;
	}
	before = w->pw.nr_blocked_decays;
	left = fb_place_refresh_sleeping(&c->v, i, c->now, c->tick);
	before = w->pw.nr_blocked_decays - before;
	fb_spin_unlock(&w->rq_lock);
	if (before)
		FB_COUNT(c->self, sleeper_decays);
	return left;
}

static bool op_refresh(void *arg, int i)
{
	return refresh(arg, i);
}

static void lb_refresh(struct fb_lb_env *env, int i)
{
	refresh(env->arg, i);
}

static bool op_has_work(void *arg, int i)
{
	(void)arg;
	return fb_worker_has_work(fb_rt->workers[i]);
}

/*
 * detach - doc/scheduler.md 1.6.6 on the source: offer its queued fibers (least
 * recently run first: the FIFO's head) and its running one, take the
 * marked ones off its queue and out of its sums.  Return: how many, in
 * @out.  Context: no lock held; takes src->rq_lock.
 */
static int detach(struct bctx *c, struct fb_lb_env *env, struct fb_fiber **out,
		  struct fb_pfiber *running, fb_cpuset_t *mask)
{
	struct fb_worker *src = fb_rt->workers[env->src];
	struct fb_lb_candidate cand[FB_LB_NR_MIGRATE + 1];
	struct fb_fiber *fl[FB_LB_NR_MIGRATE + 1];
	struct fb_list *n;
	int k = 0, moved = 0;

	fb_spin_lock(&src->rq_lock);
	fb_list_for_each (n, &src->rq) {
		struct fb_fiber *f = fb_list_entry(n, struct fb_fiber, rq_node);

		if (k == FB_LB_NR_MIGRATE)
			break;
		cand[k] = (struct fb_lb_candidate){
			.pf = &f->pf,
			.running = fb_load_acquire(&f->on_worker) != 0,
		};
		fl[k++] = f;
	}
	if (__atomic_load_n(&src->curr, __ATOMIC_RELAXED)) {
		/* Its affinity as @src published it, not its fb_pfiber: @src
		 * may free or replace that meanwhile. */
		fb_place_running_as(running, mask,
				    __atomic_load_n(&src->curr_pin,
						    __ATOMIC_RELAXED));
		cand[k] = (struct fb_lb_candidate){ .pf = running,
						    .running = true };
		fl[k++] = NULL;
	}
	if (!fb_place_lb_detach(env, cand, k))
		goto out;
	for (int i = 0; i < k; i++) {
		struct fb_fiber *f = fl[i];
		int old;

		if (!cand[i].move || !f)
			continue;
		fb_list_del(&f->rq_node);
		nr_running_add(src, c->self, -1);
		/* Ours now: out of @src's sums (folded by its writer, see the
		 * file comment), into @dst's when it first runs there. */
		old = f->pf.attached;
		if (old >= 0 && old < fb_rt->nr_workers)
			remove_share(c->self, f, old);
		fb_pelt_update(&f->pf.avg, c->now, f->pf.weight,
			       f->pf.avg_queued, false);
		f->pf.avg_queued = true;
		f->pf.attached = -1;
		out[moved++] = f;
	}
	/* runnable_weight is the writer's of avg, like avg: @src's owner
	 * sets it from nr_running at its next update. */
out:
	fb_spin_unlock(&src->rq_lock);
	return moved;
}

/* attach - queue @n detached fibers on @dst and wake it if needed. */
static void attach(struct bctx *c, int dst, struct fb_fiber **f, int n)
{
	struct fb_worker *t = fb_rt->workers[dst];

	fb_spin_lock(&t->rq_lock);
	for (int i = 0; i < n; i++) { /* attached when they run (sched.h) */
		fb_list_add_tail(&f[i]->rq_node, &t->rq);
		FB_PROBE(balance_pull, f[i]->id, f[i]->pf.prev, dst);
	}
	nr_running_add(t, c->self, n);
	fb_spin_unlock(&t->rq_lock);
	if (t != c->self)
		fb_sched_wake_worker(t, c->self);
}

/* push_request - active balance (doc/scheduler.md 1.6.7): ask env->src for
 * its running fiber. */
static void push_request(struct bctx *c, const struct fb_lb_env *env)
{
	struct fb_worker *src = fb_rt->workers[env->src];
	struct fb_fiber *cur = __atomic_load_n(&src->curr, __ATOMIC_RELAXED);

	if (!cur)
		return;
	fb_store_relaxed(&src->bal.push_fiber, cur);
	fb_place_request_push(&c->v, env->src, env->dst); /* a release */
}

/*
 * op_balance - balance(dst, d, kind) of doc/scheduler.md 1.6: find,
 * detach, attach, finish.
 * Context: no lock held, inside the view's read section.
 */
static int op_balance(void *arg, int dst, struct fb_domain *d,
		      enum fb_idle_kind kind, bool *stop)
{
	struct bctx *c = arg;
	struct fb_fiber *moved[FB_LB_NR_MIGRATE + 1];
	struct fb_lb_env env;
	struct fb_pfiber running;
	fb_cpuset_t mask;
	enum fb_lb_verdict r;
	bool asym;
	int n = 0;

	fb_place_running_as(&running, &mask, -1);
	fb_place_lb_init(&env, &c->v, d, dst, kind, c->now, c->tick);
	env.refresh = lb_refresh;
	env.arg = c;
	r = fb_place_lb_find(&env);
	FB_COUNT(c->self, lb_balances);
	fb_write_once(&c->self->bal.nr_lb[level_of(d)],
		      c->self->bal.nr_lb[level_of(d)] + 1);
	if (r == FB_LB_SKIP)
		*stop = true;
	asym = r == FB_LB_PULL && env.busiest.type == FB_GROUP_ASYM_PACKING;
	if (r == FB_LB_PULL) {
		n = detach(c, &env, moved, &running, &mask);
		env.nr_moved = n;
		if (n)
			attach(c, dst, moved, n);
		else if (kind == FB_LB_NEWLY_IDLE && dst == c->self->id)
			c->self->bal.steal_src = env.src; /* steal() may */
	}
	fb_place_lb_finish(&env, r, r == FB_LB_PULL ? &running : NULL);
	if (env.active)
		push_request(c, &env);
	for (int i = 0; i < n; i++)
		FB_COUNT(c->self, lb_pulled);
	fb_write_once(&c->self->bal.nr_pulled[level_of(d)],
		      c->self->bal.nr_pulled[level_of(d)] + (uint32_t)n);
	if (asym) {
		unsigned k = (unsigned)n + (env.active ? 1 : 0);

		for (unsigned i = 0; i < k; i++)
			FB_COUNT(c->self, lb_asym_pulls);
		fb_write_once(&c->self->bal.nr_asym[level_of(d)],
			      c->self->bal.nr_asym[level_of(d)] + k);
	}
	return n;
}

static void ctx_enter(struct bctx *c, struct fb_worker *w, uint64_t now)
{
	fb_sched_view_enter(&c->v);
	c->self = w;
	c->now = now;
	c->tick = now / FB_TICK_NS;
	c->ops = (struct fb_balance_ops){
		.balance = op_balance,
		.clock = op_clock,
		.decay = op_decay,
		.refresh = op_refresh,
		.has_work = op_has_work,
		.arg = c,
	};
}

static void ctx_exit(void)
{
	fb_sched_view_exit();
}

/* ---- the runtime's entry points ------------------------------------------ */

void fb_sched_balance_worker_init(struct fb_worker *w)
{
	w->pw.avg_idle = FB_AVG_IDLE_INIT_NS;
	w->pw.max_idle_balance_cost = FB_MAX_IDLE_BALANCE_COST_INIT_NS;
	fb_store_relaxed(&w->pw.push_target, -1);
	w->bal.migrate_to = -1;
	w->bal.steal_src = -1;
}

/*
 * rescue - take up to @want queued fibers of stuck @p onto busy @w's
 * queue, as the idle loop's steal takes one (fb_sched_take_queued).
 * Return: how many it took.
 */
static int rescue(struct fb_worker *w, struct fb_worker *p, int want)
{
	struct fb_fiber *got[FB_PEER_RESCUE_MAX];
	int k = fb_sched_take_queued(p, w->id, got,
				     FB_MIN(want, FB_PEER_RESCUE_MAX));

	if (!k)
		return 0;
	fb_spin_lock(&w->rq_lock);
	for (int i = 0; i < k; i++)
		fb_list_add_tail(&got[i]->rq_node, &w->rq);
	fb_nr_running_add_local(w, k);
	fb_spin_unlock(&w->rq_lock);
	for (int i = 0; i < k; i++)
		FB_PROBE(migrate, got[i]->id, p->id, w->id);
	return k;
}

/*
 * rescue_tick - PEER_RESCUE (doc/scheduler.md 1.9): busy @w looks at the
 * next FB_PEER_RESCUE_LOOKS other workers, round robin.  One of its node
 * that has run its current fiber for FB_PEER_STUCK_NS without a switch
 * (fb_place_peer_stuck) hands over its wakelist to its queue, as the
 * monitor's rescue does (it is then woken: rule 4 of sched/core.c), and
 * half of that queue to @w.  A look costs the reads of the peer's curr,
 * run_start and nr_running.
 */
static void rescue_tick(struct fb_worker *w, uint64_t now)
{
	int nr = fb_rt->nr_workers,
	    looks = FB_MIN(FB_PEER_RESCUE_LOOKS, nr - 1);
	struct fb_place_view v;

	if (looks <= 0 || !fb_feat(PEER_RESCUE))
		return;
	fb_sched_view_enter(&v);
	while (looks-- > 0) {
		int i = w->bal.rescue_next, took;
		struct fb_worker *p;
		uint64_t since;

		if (i == w->id)
			i = (i + 1) % nr;
		w->bal.rescue_next = (i + 1) % nr;
		p = fb_rt->workers[i];
		since = fb_load_relaxed(&p->run_start);
		if (!__atomic_load_n(&p->curr, __ATOMIC_RELAXED) ||
		    !fb_place_peer_stuck(&v, w->id, i,
					 now > since ? now - since : 0))
			continue;
		if (fb_load_relaxed(&p->pw.wakelist) &&
		    fb_sched_wakelist_move(p, true))
			fb_sched_wake_worker(p, w);
		took = rescue(w, p, fb_place_rescue_take(&v, i));
		if (took)
			fb_store_relaxed(&w->cnt.peer_rescues,
					 fb_load_relaxed(&w->cnt.peer_rescues) +
						 (uint64_t)took);
	}
	fb_sched_view_exit();
}

void fb_sched_balance_tick(struct fb_worker *w)
{
	struct fb_fiber *cur = w->curr;
	struct bctx c;
	uint64_t now;
	int t;

	if (!w->bal.busy)
		return; /* the idle loop: a sleeping worker has no tick */
	now = clock_now();
	w->bal.clock_ns = now;
	/* Ours while busy: no lock.  A tick in the idle loop (cur NULL)
	 * closes an interval that began when the last fiber left. */
	sample(w, now, cur != NULL);
	if (cur) {
		if (!w->solo) /* no averages on one worker (sched/sched.h) */
			fb_pelt_update(&cur->pf.avg, now, cur->pf.weight, true,
				       true);
		cur->pf.last_ran_ns = now;
	}
	rescue_tick(w, now);
	if (now < w->bal.next_tick_ns)
		return;
	w->bal.next_tick_ns = now + FB_TICK_NS;
	ctx_enter(&c, w, now);
	t = fb_place_tick(&c.v, w->id, now, c.tick, FB_TICK_NS, &c.ops);
	ctx_exit();
	if (t >= 0) {
		FB_COUNT(w, nohz_kicks);
		fb_sched_wake_worker(fb_rt->workers[t], w);
	}
}

/* kicked - run the sleeper pass a kick asked for (doc/scheduler.md 1.8). */
static void kicked(struct bctx *c, unsigned flags)
{
	struct fb_nohz_result res;

	FB_COUNT(c->self, nohz_passes);
	fb_place_nohz_pass(&c->v, c->self->id, flags, c->now, c->tick,
			   FB_TICK_NS, &c->ops, &res);
}

bool fb_sched_balance_idle(struct fb_worker *w)
{
	struct fb_newidle_result res;
	struct bctx c;
	unsigned flags;
	uint64_t now = clock_now();
	int t = -1;

	w->bal.clock_ns = now;
	w->bal.steal_src = -1;
	fb_store_relaxed(&w->pw.push_target, -1);
	if (w->bal.busy) {
		/* From here on others may refresh our blocked load. */
		/* Since the last switch (fb_sched_pelt_leave) the worker ran
		 * its idle loop, however long it was kept off the CPU. */
		fb_spin_lock(&w->rq_lock);
		sample(w, now, false);
		fb_store_relaxed(&w->pw.avg_busy, false);
		fb_spin_unlock(&w->rq_lock);
		w->bal.busy = false;
	}
	ctx_enter(&c, w, now);
	/* A load first: every idle entry passes here, kicks are rare, and
	 * the fetch-and is a locked instruction. */
	flags = fb_load_relaxed(&w->pw.kick_flags) & FB_KICK_MASK;
	if (flags)
		flags = atomic_fetch_and_explicit(&w->pw.kick_flags,
						  ~(unsigned)FB_KICK_MASK,
						  memory_order_acq_rel) &
			FB_KICK_MASK;
	if (flags)
		kicked(&c, flags);
	if (!fb_worker_has_work(w)) {
		fb_place_newidle(&c.v, w->id, now, c.tick, &c.ops, &res);
		if (res.gated)
			FB_COUNT(w, newidle_gated);
		else if (res.nr_balances)
			FB_COUNT(w, newidle_balances);
		for (unsigned i = 0; i < res.nr_skipped; i++)
			FB_COUNT(w, newidle_ni_skips);
		fb_level_counts_add(w->bal.nr_ni_skips, res.skipped_levels);
		if (res.idle_entry == FB_IDLE_ENTRY_KICK)
			t = fb_place_kick(&c.v, w->id, FB_KICK_STATS, now,
					  FB_TICK_NS);
	}
	ctx_exit();
	if (t >= 0) {
		FB_COUNT(w, nohz_kicks);
		fb_sched_wake_worker(fb_rt->workers[t], w);
	}
	return fb_worker_has_work(w);
}

void fb_sched_balance_idle_exit(struct fb_worker *w)
{
	struct fb_place_view v;
	uint64_t now, stamp;

	now = clock_now();
	w->bal.clock_ns = now; /* fb_sched_switch_to's clock */
	if (w->bal.busy) {
		/* back from the idle loop without having slept */
		sample(w, now, false);
		return;
	}
	stamp = fb_load_relaxed(&w->pw.idle_stamp);
	if (stamp && now > stamp)
		w->pw.avg_idle = fb_pelt_avg_idle_update(
			w->pw.avg_idle, now - stamp,
			fb_read_once(&w->pw.max_idle_balance_cost));
	fb_store_relaxed(&w->pw.idle_stamp, 0);
	fb_spin_lock(&w->rq_lock);
	sample(w, now, false);
	fb_store_relaxed(&w->pw.avg_busy, true); /* ours again, lock-free */
	fb_spin_unlock(&w->rq_lock);
	w->bal.busy = true;
	if (fb_place_is_sleeping(&fb_rt->g, w->id)) {
		fb_sched_view_enter(&v);
		fb_place_sleep_exit(&v, w->id);
		fb_sched_view_exit();
	}
}

void fb_sched_balance_sleep(struct fb_worker *w)
{
	struct bctx c;

	ctx_enter(&c, w, clock_now());
	if (fb_place_sleep_stats_due(&c.v, w->id, fb_worker_has_work(w)))
		kicked(&c, FB_KICK_STATS);
	if (!fb_place_is_sleeping(&fb_rt->g, w->id))
		fb_place_sleep_enter(&c.v, w->id);
	ctx_exit();
}

bool fb_sched_balance_push(struct fb_worker *w)
{
	int t = atomic_exchange_explicit(&w->pw.push_target, -1,
					 memory_order_acquire);
	struct fb_fiber *f = w->curr;

	if (t < 0 || t == w->id || t >= fb_rt->nr_workers ||
	    fb_load_relaxed(&w->bal.push_fiber) != f ||
	    !fb_pfiber_allows(&f->pf, t))
		return false;
	w->bal.migrate_to = t;
	FB_COUNT(w, lb_pushes);
	return true;
}

int fb_sched_balance_migrate_target(struct fb_worker *w, struct fb_fiber *f)
{
	int t = w->bal.migrate_to;

	w->bal.migrate_to = -1;
	if (t >= 0 && !fb_pfiber_allows(&f->pf, t))
		return -1;
	return t;
}
