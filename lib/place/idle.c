// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * idle.c - balancing around idleness: newly-idle balancing
 * (doc/scheduler.md 1.7), the periodic trigger (doc/scheduler.md 1.6.8),
 * balancing for sleeping workers (doc/scheduler.md 1.8) and the rules that
 * keep blocked-load decay off the critical path (doc/scheduler.md 6.2).
 *
 * The model.  A worker that runs out of work may pull from others before it
 * polls or sleeps, but only when someone is overloaded and its expected idle
 * time pays for the search (the gate); NI_RANDOM runs each level's search in
 * proportion to how often it recently succeeded.  A sleeping worker has no
 * tick, so busy workers decide at their tick whether to wake one sleeper,
 * which then refreshes the blocked load of all sleepers and balances for
 * them.  Blocked load is refreshed at most once per tick per worker (the
 * stamp is written first), sleepers on a 32 ms cadence and only while some
 * load remains, and newly-idle balancing touches only its own worker's load
 * (BLOCKED_LOAD_RATELIMIT; upstream's answer to Vincent Guittot's review of
 * Joel Fernandes' patch, doc/scheduler.md 6).
 *
 * Everything here is a decision or a bookkeeping step on the view: time
 * (ns and tick numbers), random draws and the clock used to measure costs
 * are arguments or hooks, so a test can drive hundreds of simulated
 * milliseconds without a thread.  The runtime provides the hooks that take
 * run-queue locks and move fibers (struct fb_balance_ops).
 *
 * Memory ordering.  Global flags are hints read relaxed; the only ordering that
 * matters is the kicked worker's: it clears has_blocked/needs_update, then a
 * full fence, then reads the sleepers, so that a sleeper entering after the
 * fence either is seen or sets the flags again (doc/scheduler.md 1.8).
 *
 * Alternative rejected: a fixed rate for blocked-load updates (Joel Fernandes'
 * 20 per second) - it bounds the work but not where it happens; upstream moved
 * the work off newly-idle balancing instead.
 */
#include "place/place.h"

#define NS_PER_MS 1000000ull
#define NEWIDLE_COST_DECAY_NS 1000000000ull /* 1 s, doc/scheduler.md 1.7 */

static bool sleeping(const struct fb_place_view *v, int i)
{
	return fb_place_is_sleeping(v->g, i);
}

uint64_t fb_place_balance_interval_ns(const struct fb_place_view *v,
				      const struct fb_domain *d, bool busy,
				      uint64_t tick_ns)
{
	uint64_t ms = fb_read_once(&d->balance_interval), ticks, max;

	if (busy)
		ms *= d->busy_factor;
	ticks = (ms * NS_PER_MS + tick_ns - 1) / tick_ns;
	if (busy && ticks)
		ticks--;
	max = 100 * NS_PER_MS * (uint64_t)v->nr_workers / tick_ns;
	ticks = FB_MAX(1, FB_MIN(ticks, FB_MAX(1, max)));
	return ticks * tick_ns;
}

/*
 * The domain's balancing fields (topo/topo.h) have two writers when the
 * balancing worker of a sleeping owner runs while the owner wakes up: every
 * access is a relaxed atomic one (base/atomic.h), and an update lost to the
 * other writer only costs a balance earlier or later.
 */
bool fb_place_update_newidle_cost(struct fb_domain *d, uint64_t cost_ns,
				  uint64_t now_ns)
{
	uint64_t max = fb_read_once(&d->max_newidle_lb_cost);

	if (cost_ns > max) {
		fb_write_once(&d->max_newidle_lb_cost, cost_ns);
		fb_write_once(&d->last_decay_max_lb_cost, now_ns);
		return false;
	}
	if (now_ns >
	    fb_read_once(&d->last_decay_max_lb_cost) + NEWIDLE_COST_DECAY_NS) {
		fb_write_once(&d->max_newidle_lb_cost, max * 253 / 256);
		fb_write_once(&d->last_decay_max_lb_cost, now_ns);
		return true;
	}
	return false;
}

void fb_place_newidle_stats(struct fb_domain *d, unsigned success)
{
	unsigned call = fb_read_once(&d->newidle_call) + 1;
	unsigned ok = fb_read_once(&d->newidle_success) + success;

	if (call >= FB_NEWIDLE_WINDOW) {
		fb_write_once(&d->newidle_ratio, ok);
		call /= 2;
		ok /= 2;
	}
	fb_write_once(&d->newidle_call, call);
	fb_write_once(&d->newidle_success, ok);
}

bool fb_place_ni_random_run(struct fb_domain *d, uint32_t draw,
			    unsigned *weight)
{
	unsigned w = 1 + fb_read_once(&d->newidle_ratio);

	*weight = 1;
	if (!fb_feat(NI_RANDOM))
		return true;
	/* doc/scheduler.md 6.2.6, NI_RANDOM: run iff draw <= 1 + ratio. */
	if (draw % 1024 > w) {
		fb_place_newidle_stats(d, 0);
		return false;
	}
	*weight = (1024 + w / 2) / w;
	return true;
}

uint32_t fb_place_rng(struct fb_pworker *w)
{
	uint64_t x = w->rng;

	if (!x)
		x = 0x9e3779b97f4a7c15ull ^ (uint64_t)(w->id + 1);
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	w->rng = x;
	return (uint32_t)((x * 0x2545f4914f6cdd1dull) >> 32);
}

bool fb_place_decay_blocked(struct fb_pworker *w, uint64_t now_ns,
			    uint64_t now_tick)
{
	bool left;

	/* doc/scheduler.md 6.2.1, rule 1: stamp first, so that a concurrent
	 * refresher of @w skips it (BLOCKED_LOAD_RATELIMIT). */
	if (fb_feat(BLOCKED_LOAD_RATELIMIT)) {
		fb_place_blocked_stamp(w, now_tick);
		return fb_place_blocked_decay(w, now_ns);
	}
	left = fb_place_blocked_decay(w, now_ns);
	fb_place_blocked_stamp(w, now_tick);
	return left;
}

bool fb_place_refresh_sleeping(const struct fb_place_view *v, int i,
			       uint64_t now_ns, uint64_t now_tick)
{
	struct fb_pworker *w = v->w[i];

	if (!fb_load_relaxed(&w->has_blocked_load))
		return false;
	if (!sleeping(v, i))
		return false;
	if (!fb_place_blocked_due(v, i, now_tick))
		return true; /* still blocked, refreshed too recently */
	return fb_place_decay_blocked(w, now_ns, now_tick);
}

bool fb_place_blocked_due(const struct fb_place_view *v, int i,
			  uint64_t now_tick)
{
	return now_tick >=
	       fb_load_relaxed(&v->w[i]->last_blocked_load_update_tick) +
		       FB_MAX(1u, v->g ? v->g->blocked_min_ticks : 1u);
}

static void decay_own(const struct fb_place_view *v, int w, uint64_t now_ns,
		      uint64_t now_tick, const struct fb_balance_ops *ops)
{
	if (ops && ops->decay)
		ops->decay(ops->arg, w);
	else
		fb_place_decay_blocked(v->w[w], now_ns, now_tick);
}

static uint64_t clock_of(const struct fb_balance_ops *ops)
{
	return ops->clock ? ops->clock(ops->arg) : 0;
}

/* newidle_walk - the domain loop of doc/scheduler.md 1.7 after the gate. */
static void newidle_walk(const struct fb_place_view *v, int w, uint64_t now_ns,
			 uint64_t *next, const struct fb_balance_ops *ops,
			 struct fb_newidle_result *res, uint64_t t0)
{
	struct fb_pworker *pw = v->w[w];
	uint64_t cost = 0;
	struct fb_domain *d;

	fb_for_each_domain (v->topo, w, d) {
		uint64_t due =
			fb_read_once(&d->last_balance) +
			fb_place_balance_interval_ns(v, d, false, NS_PER_MS);
		bool stop = false;
		unsigned weight;

		*next = FB_MIN(*next, due);
		if (pw->avg_idle < cost + fb_read_once(&d->max_newidle_lb_cost))
			break;
		if (d->flags & FB_SD_BALANCE_NEWIDLE) {
			uint64_t t1;

			if (!fb_place_ni_random_run(d, fb_place_rng(pw),
						    &weight)) {
				res->nr_skipped++;
				res->skipped_levels |= 1u
						       << FB_MIN(d->level, 31);
				continue;
			}
			res->pulled = ops->balance(ops->arg, w, d,
						   FB_LB_NEWLY_IDLE, &stop);
			res->nr_balances++;
			t1 = clock_of(ops);
			cost += t1 - t0;
			fb_place_update_newidle_cost(d, t1 - t0, now_ns);
			fb_place_newidle_stats(d, res->pulled ? weight : 0);
			t0 = t1;
		}
		if (res->pulled || stop)
			break;
	}
	if (cost > fb_read_once(&pw->max_idle_balance_cost))
		fb_write_once(&pw->max_idle_balance_cost, cost);
}

void fb_place_newidle(const struct fb_place_view *v, int w, uint64_t now_ns,
		      uint64_t now_tick, const struct fb_balance_ops *ops,
		      struct fb_newidle_result *res)
{
	struct fb_pworker *pw = v->w[w];
	const struct fb_domain *d0 = v->topo ? v->topo->sd[w] : NULL;
	uint64_t next = now_ns + 1000 * NS_PER_MS;

	*res = (struct fb_newidle_result){ 0 };
	if (fb_load_relaxed(&pw->ttwu_pending))
		return;
	fb_store_relaxed(&pw->idle_stamp, now_ns);
	/* Before the gate only without BLOCKED_LOAD_RATELIMIT
	 * (doc/scheduler.md 6.2.7). */
	if (!fb_feat(BLOCKED_LOAD_RATELIMIT)) {
		decay_own(v, w, now_ns, now_tick, ops);
		res->own_decayed = true;
	}
	if (!d0 || !v->g || !fb_load_relaxed(&v->g->overloaded) ||
	    pw->avg_idle < fb_read_once(&d0->max_newidle_lb_cost)) {
		res->gated = true;
		if (d0)
			next = FB_MIN(next,
				      fb_read_once(&d0->last_balance) +
					      fb_place_balance_interval_ns(
						      v, d0, false, NS_PER_MS));
		goto out;
	}
	{
		/* Rule 3 (doc/scheduler.md 6.2.3): the decay is charged to
		 * the first domain's cost. */
		uint64_t t0 = clock_of(ops);

		if (fb_feat(BLOCKED_LOAD_RATELIMIT)) {
			decay_own(v, w, now_ns, now_tick, ops);
			res->own_decayed = true;
		}
		newidle_walk(v, w, now_ns, &next, ops, res, t0);
	}
out:
	if (fb_read_once(&pw->next_balance) > next)
		fb_write_once(&pw->next_balance, next);
	if (res->pulled)
		fb_store_relaxed(&pw->idle_stamp, 0);
	else
		res->idle_entry = fb_place_idle_entry_stats(v, w, now_ns);
}

unsigned fb_place_idle_entry_stats(const struct fb_place_view *v, int w,
				   uint64_t now_ns)
{
	struct fb_pworker *pw = v->w[w];

	if (pw->avg_idle < FB_MIGRATION_COST_NS || !v->g)
		return FB_IDLE_ENTRY_NONE;
	if (!fb_load_relaxed(&v->g->has_blocked) ||
	    now_ns < fb_load_relaxed(&v->g->next_blocked))
		return FB_IDLE_ENTRY_NONE;
	if (!fb_feat(BLOCKED_LOAD_RATELIMIT))
		return FB_IDLE_ENTRY_KICK;
	atomic_fetch_or_explicit(&pw->kick_flags, FB_KICK_NEWILB,
				 memory_order_relaxed);
	return FB_IDLE_ENTRY_LOCAL;
}

bool fb_place_sleep_stats_due(const struct fb_place_view *v, int w,
			      bool has_work)
{
	unsigned old = atomic_fetch_and_explicit(&v->w[w]->kick_flags,
						 ~(unsigned)FB_KICK_NEWILB,
						 memory_order_relaxed);

	return old == FB_KICK_NEWILB && !has_work;
}

static void mask_update(struct fb_wmask *m, int w, bool set)
{
	uint64_t bit = UINT64_C(1) << ((unsigned)w % 64);
	uint64_t *word = &m->bits[(unsigned)w / 64];

	if (set && (unsigned)w / 64 >= (unsigned)fb_wmask_words())
		fb_wmask_reserve(w + 1);
	if (set)
		__atomic_fetch_or(word, bit, __ATOMIC_SEQ_CST);
	else
		__atomic_fetch_and(word, ~bit, __ATOMIC_SEQ_CST);
}

static atomic_int *nr_busy_of(const struct fb_place_view *v, int w)
{
	if (!v->topo || w >= v->topo->nr_workers || !v->topo->llc_shared[w])
		return NULL;
	return &v->topo->llc_shared[w]->nr_busy_workers;
}

void fb_place_sleep_enter(const struct fb_place_view *v, int w)
{
	struct fb_place_global *g = v->g;
	atomic_int *busy = nr_busy_of(v, w);

	fb_store_relaxed(&v->w[w]->has_blocked_load, true);
	if (!fb_place_is_sleeping(g, w)) {
		mask_update(&g->sleeping, w, true);
		atomic_fetch_add(&g->nr_sleeping, 1);
		if (busy)
			atomic_fetch_sub(busy, 1);
		fb_store_relaxed(&g->needs_update, true);
	}
	fb_store_seqcst(&g->has_blocked, true);
}

void fb_place_sleep_exit(const struct fb_place_view *v, int w)
{
	struct fb_place_global *g = v->g;
	atomic_int *busy = nr_busy_of(v, w);

	if (!fb_place_is_sleeping(g, w))
		return;
	mask_update(&g->sleeping, w, false);
	atomic_fetch_sub(&g->nr_sleeping, 1);
	if (busy)
		atomic_fetch_add(busy, 1);
}

/* asym_kick - doc/scheduler.md 4.2.4 item 6: a sleeper of w's asym domain
 * has priority over w. */
static bool asym_kick(const struct fb_place_view *v, int w)
{
	const struct fb_domain *d;
	int i;

	if (!v->topo || !fb_feat(ASYM_PACKING) || !(d = v->topo->sd_asym[w]))
		return false;
	fb_wmask_for_each (i, &d->span) {
		if (i < v->nr_workers && sleeping(v, i) &&
		    fb_place_asym(v, d, i, w))
			return true;
	}
	return false;
}

unsigned fb_place_kick_flags(const struct fb_place_view *v, int w,
			     uint64_t now_ns)
{
	const struct fb_place_global *g = v->g;
	const unsigned both = FB_KICK_STATS | FB_KICK_BALANCE;
	atomic_int *busy = nr_busy_of(v, w);
	unsigned flags = 0;

	if (!g || !fb_load_relaxed(&g->nr_sleeping))
		return 0;
	if (fb_load_relaxed(&g->has_blocked) &&
	    now_ns > fb_load_relaxed(&g->next_blocked))
		flags = FB_KICK_STATS;
	if (now_ns >= fb_load_relaxed(&g->next_balance)) {
		if (fb_load_relaxed(&v->w[w]->nr_running) >= 2)
			flags = both;
		else if (asym_kick(v, w))
			flags = both;
		else if (busy && fb_load_relaxed(busy) > 1)
			flags = both;
	}
	if (fb_load_relaxed(&g->needs_update))
		flags |= FB_KICK_NEXT;
	return flags;
}

int fb_place_kick(const struct fb_place_view *v, int w, unsigned flags,
		  uint64_t now_ns, uint64_t tick_ns)
{
	struct fb_place_global *g = v->g;
	struct fb_pworker *pw;
	unsigned old;
	int i;

	if (flags & FB_KICK_BALANCE)
		fb_store_relaxed(&g->next_balance, now_ns + tick_ns);
	for (i = 0; i < v->nr_workers; i++) {
		if (i != w && fb_place_is_sleeping(g, i) &&
		    fb_worker_is_idle(v->w[i]))
			break;
	}
	if (i >= v->nr_workers)
		return -1;
	pw = v->w[i];
	if ((fb_load_relaxed(&pw->kick_flags) & flags) == flags)
		return -1;
	old = atomic_fetch_or_explicit(&pw->kick_flags, flags,
				       memory_order_acq_rel);
	return (old & FB_KICK_MASK) ? -1 : i;
}

static bool refresh_one(const struct fb_place_view *v, int i, uint64_t now_ns,
			uint64_t now_tick, const struct fb_balance_ops *ops)
{
	if (ops && ops->refresh)
		return ops->refresh(ops->arg, i);
	return fb_place_refresh_sleeping(v, i, now_ns, now_tick);
}

void fb_place_nohz_pass(const struct fb_place_view *v, int self, unsigned flags,
			uint64_t now_ns, uint64_t now_tick, uint64_t tick_ns,
			const struct fb_balance_ops *ops,
			struct fb_nohz_result *res)
{
	struct fb_place_global *g = v->g;
	uint64_t next = UINT64_MAX;
	bool blocked = false;
	int n = v->nr_workers;

	*res = (struct fb_nohz_result){ 0 };
	if (flags & FB_KICK_STATS)
		fb_store_relaxed(&g->has_blocked, false);
	if (flags & FB_KICK_NEXT)
		fb_store_relaxed(&g->needs_update, false);
	atomic_thread_fence(memory_order_seq_cst);
	for (int k = 1; k <= n; k++) {
		int i = (self + k) % n;
		struct fb_pworker *pw = v->w[i];

		if (!sleeping(v, i) || !fb_worker_is_idle(pw))
			continue;
		if (ops && ops->has_work && ops->has_work(ops->arg, self)) {
			/* Work of its own: leave the rest to the next kick. */
			blocked = flags & FB_KICK_STATS;
			if (flags & FB_KICK_NEXT)
				fb_store_relaxed(&g->needs_update, true);
			res->aborted = true;
			goto out;
		}
		if (flags & FB_KICK_STATS) {
			uint64_t before = fb_read_once(&pw->nr_blocked_decays);

			blocked |= refresh_one(v, i, now_ns, now_tick, ops);
			res->nr_refreshed +=
				fb_read_once(&pw->nr_blocked_decays) != before;
		}
		if (now_ns >= fb_read_once(&pw->next_balance) &&
		    (flags & FB_KICK_BALANCE) && ops && ops->balance) {
			fb_place_rebalance(v, i, now_ns, tick_ns, FB_LB_IDLE,
					   ops);
			res->nr_balanced++;
		}
		next = FB_MIN(next, fb_read_once(&pw->next_balance));
	}
	if (next != UINT64_MAX)
		fb_store_relaxed(&g->next_balance, next);
	if (flags & FB_KICK_STATS)
		fb_store_relaxed(&g->next_blocked,
				 now_ns + FB_BLOCKED_PERIOD_NS);
out:
	if (blocked)
		fb_store_relaxed(&g->has_blocked, true);
}

int fb_place_rebalance(const struct fb_place_view *v, int w, uint64_t now_ns,
		       uint64_t tick_ns, enum fb_idle_kind kind,
		       const struct fb_balance_ops *ops)
{
	struct fb_pworker *pw = v->w[w];
	uint64_t next = now_ns + 60000 * NS_PER_MS, cost = 0;
	bool busy = kind == FB_LB_BUSY, more = true, decayed = false;
	bool moved_next = false;
	struct fb_domain *d;
	int pulled = 0;

	fb_for_each_domain (v->topo, w, d) {
		bool ser = d->flags & FB_SD_SERIALIZE, mine = true;
		uint64_t interval, last;

		decayed |= fb_place_update_newidle_cost(d, 0, now_ns);
		cost += fb_read_once(&d->max_newidle_lb_cost);
		if (!more) {
			if (decayed)
				continue;
			break;
		}
		interval = fb_place_balance_interval_ns(v, d, busy, tick_ns);
		if (ser && v->g) {
			bool f = false;

			mine = atomic_compare_exchange_strong_explicit(
				&v->g->balance_running, &f, true,
				memory_order_acquire, memory_order_relaxed);
		}
		if (mine &&
		    now_ns >= fb_read_once(&d->last_balance) + interval) {
			bool stop = false;
			int n = ops->balance(ops->arg, w, d, kind, &stop);

			if (n) {
				pulled += n;
				kind = fb_worker_is_idle(pw) ? FB_LB_IDLE :
							       FB_LB_BUSY;
				busy = kind == FB_LB_BUSY;
			}
			more = !stop;
			fb_write_once(&d->last_balance, now_ns);
			interval = fb_place_balance_interval_ns(v, d, busy,
								tick_ns);
		}
		if (ser && v->g && mine)
			fb_store_release(&v->g->balance_running, false);
		last = fb_read_once(&d->last_balance);
		if (next > last + interval) {
			next = last + interval;
			moved_next = true;
		}
	}
	if (decayed)
		fb_write_once(&pw->max_idle_balance_cost,
			      FB_MAX(FB_MIGRATION_COST_NS, cost));
	if (moved_next)
		fb_write_once(&pw->next_balance, next);
	return pulled;
}

int fb_place_tick(const struct fb_place_view *v, int w, uint64_t now_ns,
		  uint64_t now_tick, uint64_t tick_ns,
		  const struct fb_balance_ops *ops)
{
	unsigned flags;

	if (v->topo && now_ns >= fb_read_once(&v->w[w]->next_balance)) {
		/* doc/scheduler.md 6.2.5, rule 5: once per balance trigger. */
		decay_own(v, w, now_ns, now_tick, ops);
		fb_place_rebalance(v, w, now_ns, tick_ns,
				   fb_worker_is_idle(v->w[w]) ? FB_LB_IDLE :
								FB_LB_BUSY,
				   ops);
	}
	if (fb_place_is_sleeping(v->g, w))
		fb_place_sleep_exit(v, w);
	flags = fb_place_kick_flags(v, w, now_ns);
	if (!flags)
		return -1;
	return fb_place_kick(v, w, flags, now_ns, tick_ns);
}
