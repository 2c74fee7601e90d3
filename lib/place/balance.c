// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * balance.c - load balancing between workers (doc/scheduler.md 1.5,
 * 1.6 and 4), as pure decisions over a struct fb_place_view.
 *
 * The model.  A worker that balances (periodically at its tick, when it
 * runs out of work, or on behalf of sleeping workers) looks at one domain at
 * a time.  It sums the averages of each group of the domain, classifies the
 * groups from "has spare" to "overloaded", picks the busiest group that is
 * not its own, decides whether the difference is worth a migration and how
 * much to move (load, utilisation or a number of fibers), and picks the
 * busiest worker in that group.  The caller then offers that worker's
 * fibers to fb_place_lb_detach(), which marks the ones to move, and reports
 * the outcome to fb_place_lb_finish(), which keeps the domain's failure
 * count, its interval and the `imbalanced` bits, and may ask the source to
 * push its running fiber (active balance).
 *
 * Invariants.  A decision never moves a fiber to a worker it is not allowed on;
 * the destination is never the source.  Everything read from the snapshot may
 * be stale: a wrong choice costs a migration, never correctness, because the
 * caller re-checks under the run-queue locks.  The domain's balancing fields
 * are written only here, by the worker that owns the domain or by the balancing
 * worker of a sleeping owner (doc/scheduler.md 1.8); the two may overlap when
 * the owner wakes, so every access to them is a relaxed atomic one
 * (fb_read_once, fb_write_once) and a racing update may be lost: a failure
 * counted or an interval doubled once too few.
 *
 * Alternatives rejected.  Plain work stealing (take from the longest queue,
 * place-simple's rule) ignores caches and NUMA; it stays only as the
 * fallback when no domain view exists.  Pre-emption-based active balance
 * cannot exist in a cooperative runtime: the request is a flag that the
 * source honours at its next scheduling point (doc/scheduler.md 1.6.7).
 *
 * ASYM_PACKING follows Srikar Dronamraju's mail with upstream's later form
 * (doc/scheduler.md 4.2): a busy destination never sees an asym group, and
 * among asym groups the one with the lowest-priority preferred worker is
 * emptied first.
 */
#include <string.h>

#include "place/place.h"

static int nr_of(const struct fb_place_view *v, int i)
{
	return fb_load_relaxed(&v->w[i]->nr_running);
}

static bool idle_of(const struct fb_place_view *v, int i)
{
	return fb_worker_is_idle(v->w[i]);
}

/* core_idle - every SMT sibling of @w (but @w) is idle. */
static bool core_idle(const struct fb_place_view *v, int w)
{
	const struct fb_wmask *m = v->topo->core_span[w];
	int i;

	fb_wmask_for_each (i, m) {
		if (i != w && i < v->nr_workers && !idle_of(v, i))
			return false;
	}
	return true;
}

/* doc/scheduler.md 4.2.3: use_asym_prio(d, w). */
bool fb_place_use_asym_prio(const struct fb_place_view *v,
			    const struct fb_domain *d, int w)
{
	if (!fb_feat(ASYM_PACKING) || !(d->flags & FB_SD_ASYM_PACKING))
		return false;
	if (!v->topo->has_smt || (d->flags & FB_SD_SHARE_CAPACITY))
		return true;
	return core_idle(v, w);
}

/* doc/scheduler.md 4.2.3: asym(d, dst, src). */
bool fb_place_asym(const struct fb_place_view *v, const struct fb_domain *d,
		   int dst, int src)
{
	return fb_place_use_asym_prio(v, d, dst) &&
	       fb_asym_prefer(v->topo, dst, src);
}

/* doc/scheduler.md 4.2.3: group_asym(d, dst, g). */
static bool group_asym(const struct fb_lb_env *env,
		       const struct fb_sched_group *g,
		       const struct fb_group_stats *s)
{
	if ((g->flags & FB_SD_SHARE_CAPACITY) && s->weight - s->idle != 1)
		return false;
	return fb_place_asym(env->v, env->d, env->dst, g->asym_prefer);
}

void fb_place_lb_init(struct fb_lb_env *env, const struct fb_place_view *v,
		      struct fb_domain *d, int dst, enum fb_idle_kind idle,
		      uint64_t now_ns, uint64_t now_tick)
{
	memset(env, 0, sizeof(*env));
	env->v = v;
	env->d = d;
	env->dst = dst;
	env->idle = idle;
	env->now_ns = now_ns;
	env->now_tick = now_tick;
	env->busiest_group = -1;
	env->src = -1;
	env->new_dst = -1;
}

/*
 * should_balance - doc/scheduler.md 1.6.1: newly idle, unless work arrived;
 * otherwise only the first idle worker of the local group whose core is idle
 * (else the first idle one, else the group's first worker) balances.
 */
static bool should_balance(const struct fb_lb_env *env)
{
	const struct fb_place_view *v = env->v;
	const struct fb_sched_group *g = &env->d->groups[env->d->local_group];
	struct fb_wmask m;
	int i, idle_smt = -1;

	if (env->idle == FB_LB_NEWLY_IDLE)
		return fb_worker_is_idle(v->w[env->dst]);
	fb_wmask_copy(&m, &g->span);
	for (i = fb_wmask_first(&m); i >= 0 && i < v->nr_workers;
	     i = fb_wmask_next(&m, i + 1)) {
		if (!idle_of(v, i))
			continue;
		if (v->topo->has_smt &&
		    !(env->d->flags & FB_SD_SHARE_CAPACITY) &&
		    !core_idle(v, i)) {
			const struct fb_wmask *c = v->topo->core_span[i];

			if (idle_smt < 0)
				idle_smt = i;
			fb_wmask_andnot(&m, c);
			continue;
		}
		return i == env->dst;
	}
	if (idle_smt >= 0)
		return idle_smt == env->dst;
	return fb_wmask_first(&g->span) == env->dst;
}

static bool sleeping(const struct fb_place_view *v, int i)
{
	return fb_place_is_sleeping(v->g, i);
}

/* group_stats - doc/scheduler.md 1.5 for load balancing, over the active
 * workers of @g. */
static void group_stats(struct fb_lb_env *env, const struct fb_sched_group *g,
			bool local, struct fb_group_stats *s)
{
	const struct fb_place_view *v = env->v;
	bool refresh = env->refresh && env->idle == FB_LB_NEWLY_IDLE &&
		       !fb_feat(BLOCKED_LOAD_RATELIMIT) && v->g &&
		       fb_load_relaxed(&v->g->has_blocked);
	bool asym = false, smt = false, imb;
	int i;

	memset(s, 0, sizeof(*s));
	fb_wmask_for_each (i, &g->span) {
		const struct fb_pworker *w;
		int nr;

		if (i >= v->nr_workers)
			break;
		/* doc/scheduler.md 6.2.7: NO_BLOCKED_LOAD_RATELIMIT
		 * refreshes the sleepers it looks at. */
		if (refresh && sleeping(v, i))
			env->refresh(env, i);
		w = v->w[i];
		nr = nr_of(v, i);
		fb_group_add(s, w, nr);
		if (nr > 1)
			env->overloaded = true;
	}
	fb_group_close(s, g);
	if (!local && env->idle != FB_LB_BUSY && s->nr_running) {
		asym = group_asym(env, g, s);
		smt = (g->flags & FB_SD_SHARE_CAPACITY) && s->nr_running > 1;
	}
	imb = g->state && fb_load_relaxed(&g->state->imbalanced);
	s->type = fb_group_classify(s, env->d->imbalance_pct, imb, asym, smt);
	if (s->type == FB_GROUP_OVERLOADED)
		s->avg_load = s->load * FB_PELT_CAPACITY / s->capacity;
}

/*
 * pick_busiest - doc/scheduler.md 1.6.2: should @s (group @g) replace the
 * busiest so far?
 */
static bool pick_busiest(const struct fb_lb_env *env,
			 const struct fb_sched_group *g,
			 const struct fb_group_stats *s,
			 const struct fb_sched_group *bg)
{
	const struct fb_group_stats *b = &env->busiest;

	if (!s->nr_running)
		return false;
	if (!bg || s->type > b->type)
		return true;
	if (s->type < b->type)
		return false;
	switch (s->type) {
	case FB_GROUP_OVERLOADED:
		return s->avg_load > b->avg_load;
	case FB_GROUP_IMBALANCED:
		return false;
	case FB_GROUP_ASYM_PACKING:
		/* The second fix of Srikar Dronamraju's mail: empty the
		 * lowest-priority group first (doc/scheduler.md 4.2.4). */
		return fb_asym_prefer(env->v->topo, bg->asym_prefer,
				      g->asym_prefer);
	case FB_GROUP_SMT_BALANCE:
		if (s->idle || b->idle)
			goto has_spare;
		__attribute__((fallthrough));
	case FB_GROUP_FULLY_BUSY:
		if (s->avg_load != b->avg_load)
			return s->avg_load > b->avg_load;
		/* Equal: an SMT core needs the help more. */
		if (bg->flags & FB_SD_SHARE_CAPACITY)
			return false;
		return g->flags & FB_SD_SHARE_CAPACITY;
	case FB_GROUP_MISFIT:
		return false;
	case FB_GROUP_HAS_SPARE:
has_spare:
		if (s->idle != b->idle)
			return s->idle < b->idle;
		if (s->nr_running <= b->nr_running)
			return false;
		/* Hybrid machines: not a lone fiber on an SMT core. */
		if ((env->d->flags & FB_SD_ASYM_PACKING) &&
		    (g->flags & FB_SD_SHARE_CAPACITY) && s->nr_running <= 1)
			return false;
		return true;
	}
	return false;
}

/* sibling_imbalance - doc/scheduler.md 1.6.4, in fibers. */
static long sibling_imbalance(const struct fb_lb_env *env,
			      const struct fb_group_stats *l,
			      const struct fb_group_stats *b)
{
	long m, lc = l->nr_cores, bc = b->nr_cores;

	if (env->idle == FB_LB_BUSY || !b->nr_running)
		return 0;
	if (lc == bc)
		return FB_MAX(0, b->nr_running - l->nr_running);
	m = FB_MAX(0, lc * b->nr_running - bc * l->nr_running);
	m = (2 * m + lc + bc) / (lc + bc);
	if (m <= 1 && l->nr_running == 0 && b->nr_running > 1)
		m = 2;
	return m;
}

static unsigned long domain_avg(const struct fb_lb_env *env)
{
	return env->total_load * FB_PELT_CAPACITY / env->total_capacity;
}

/* calc_imbalance - doc/scheduler.md 1.6.4 (kernel calculate_imbalance). */
static void calc_imbalance(struct fb_lb_env *env)
{
	struct fb_group_stats *l = &env->local, *b = &env->busiest;
	const struct fb_domain *d = env->d;
	unsigned long avg;

	env->type = FB_MIGRATE_TASK;
	if (b->type == FB_GROUP_ASYM_PACKING) {
		env->imbalance = b->nr_running;
		return;
	}
	if (b->type == FB_GROUP_SMT_BALANCE || b->type == FB_GROUP_IMBALANCED) {
		env->imbalance = 1;
		return;
	}
	if (l->type == FB_GROUP_HAS_SPARE) {
		if (b->type > FB_GROUP_FULLY_BUSY &&
		    !(d->flags & FB_SD_SHARE_LLC)) {
			env->type = FB_MIGRATE_UTIL;
			env->imbalance =
				(long)(FB_MAX(l->capacity, l->util) - l->util);
			if (env->imbalance == 0 && env->idle != FB_LB_BUSY) {
				env->type = FB_MIGRATE_TASK;
				env->imbalance = 1;
			}
			return;
		}
		if (b->weight == 1 || env->prefer_sibling)
			env->imbalance = sibling_imbalance(env, l, b);
		else
			env->imbalance = FB_MAX(0, l->idle - b->idle);
		/* doc/scheduler.md 5.2.4: the NUMA allowance (no affinity
		 * cap). */
		if (d->flags & FB_SD_NUMA)
			env->imbalance = fb_place_numa_adjust(env->imbalance,
							      l->nr_running + 1,
							      d->imb_numa_nr);
		env->imbalance >>= 1;
		return;
	}
	if (l->type < FB_GROUP_OVERLOADED) {
		l->avg_load = l->load * FB_PELT_CAPACITY / l->capacity;
		if (l->avg_load >= b->avg_load ||
		    l->avg_load >= domain_avg(env)) {
			env->imbalance = 0;
			return;
		}
	}
	avg = domain_avg(env);
	env->type = FB_MIGRATE_LOAD;
	if (b->avg_load <= avg || l->avg_load >= avg) {
		env->imbalance = 0;
		return;
	}
	env->imbalance = (long)(FB_MIN((b->avg_load - avg) * b->capacity,
				       (avg - l->avg_load) * l->capacity) /
				FB_PELT_CAPACITY);
}

/* find_imbalance - doc/scheduler.md 1.6.3 (kernel find_busiest_group). */
static bool find_imbalance(struct fb_lb_env *env,
			   const struct fb_sched_group *lg,
			   const struct fb_sched_group *bg)
{
	struct fb_group_stats *l = &env->local, *b = &env->busiest;

	if (!bg)
		return false;
	if (b->type == FB_GROUP_ASYM_PACKING || b->type == FB_GROUP_IMBALANCED)
		goto force;
	if (l->type > b->type)
		return false;
	if (l->type == FB_GROUP_OVERLOADED) {
		if (l->avg_load >= b->avg_load ||
		    l->avg_load >= domain_avg(env) ||
		    100 * b->avg_load <=
			    (unsigned long)env->d->imbalance_pct * l->avg_load)
			return false;
	}
	if (env->prefer_sibling && l->type == FB_GROUP_HAS_SPARE &&
	    sibling_imbalance(env, l, b) > 1)
		goto force;
	if (b->type != FB_GROUP_OVERLOADED) {
		if (env->idle == FB_LB_BUSY)
			return false;
		if (b->type == FB_GROUP_SMT_BALANCE &&
		    (lg->flags & FB_SD_SHARE_CAPACITY) !=
			    (bg->flags & FB_SD_SHARE_CAPACITY))
			goto force;
		if (b->weight > 1 && l->idle <= b->idle + 1)
			return false;
		if (b->nr_running == 1)
			return false;
	}
force:
	calc_imbalance(env);
	return env->imbalance > 0;
}

/* busiest_worker - doc/scheduler.md 1.6.5 (kernel find_busiest_queue). */
static int busiest_worker(const struct fb_lb_env *env,
			  const struct fb_sched_group *g)
{
	const struct fb_place_view *v = env->v;
	unsigned long most = 0;
	int i, best = -1, most_nr = 0;

	fb_wmask_for_each (i, &g->span) {
		const struct fb_pworker *w;
		unsigned long x;
		int nr;

		if (i >= v->nr_workers)
			break;
		nr = nr_of(v, i);
		w = v->w[i];
		if (!nr || i == env->dst)
			continue;
		/* doc/scheduler.md 4.2.4 item 4: never pull a lone fiber
		 * off a better worker. */
		if (nr == 1 && fb_place_asym(v, env->d, i, env->dst))
			continue;
		switch (env->type) {
		case FB_MIGRATE_LOAD:
			x = fb_pelt_load(&w->avg);
			if (nr == 1 && (long)x > env->imbalance)
				break;
			if (best < 0 || x > most) {
				most = x;
				best = i;
			}
			break;
		case FB_MIGRATE_UTIL:
			x = fb_pelt_util(&w->avg);
			if (nr > 1 && (best < 0 || x > most)) {
				most = x;
				best = i;
			}
			break;
		case FB_MIGRATE_TASK:
			if (nr > most_nr) {
				most_nr = nr;
				best = i;
			}
			break;
		}
	}
	return best;
}

enum fb_lb_verdict fb_place_lb_find(struct fb_lb_env *env)
{
	const struct fb_domain *d = env->d;
	const struct fb_sched_group *g, *lg = NULL, *bg = NULL;
	struct fb_group_stats s;
	int k;

	if (!should_balance(env))
		return FB_LB_SKIP;
	fb_domain_for_each_group (d, g, k) {
		bool local = k == 0;

		group_stats(env, g, local, &s);
		env->total_load += s.load;
		env->total_capacity += s.capacity;
		env->sum_util += s.util;
		if (local) {
			lg = g;
			env->local = s;
		} else if (pick_busiest(env, g, &s, bg)) {
			bg = g;
			env->busiest = s;
			env->busiest_group =
				(d->local_group + k) % d->nr_groups;
		}
	}
	if (!d->parent && env->v->g)
		fb_store_relaxed(&env->v->g->overloaded, env->overloaded);
	/* doc/scheduler.md 2.2.1: SIS_UTIL's depth follows the LLC level's
	 * periodic balance, the one writer that runs while every worker of
	 * an overloaded LLC stays busy (idle entry never comes). */
	fb_place_update_idle_scan(env->v, env->dst, d, env->sum_util,
				  env->idle == FB_LB_NEWLY_IDLE);
	env->prefer_sibling = bg && (bg->flags & FB_SD_PREFER_SIBLING);
	if (!find_imbalance(env, lg, bg))
		return FB_LB_BALANCED;
	env->src = busiest_worker(env, bg);
	return env->src >= 0 ? FB_LB_PULL : FB_LB_BALANCED;
}

/* leaves_home - would moving @pf from src to dst take it away from its
 * wake group's home (doc/scheduler.md 1.10)?  The kernel's
 * migrate_degrades_locality, for groups of fibers. */
static bool leaves_home(const struct fb_lb_env *env, const struct fb_pfiber *pf)
{
	return pf->group && fb_feat(WAKE_GROUPS) &&
	       fb_load_relaxed(&pf->group->home) == env->src &&
	       env->dst != env->src;
}

/* can_migrate - doc/scheduler.md 1.6.6: may @c move from src to dst now? */
static bool can_migrate(struct fb_lb_env *env, const struct fb_lb_candidate *c)
{
	const struct fb_domain *d = env->d;
	const struct fb_sched_group *lg = &d->groups[d->local_group];
	int i;

	if (!fb_pfiber_allows(c->pf, env->dst)) {
		env->flags |= FB_LBF_SOME_PINNED;
		if (env->idle == FB_LB_NEWLY_IDLE ||
		    (env->flags & FB_LBF_DST_PINNED))
			return false;
		fb_wmask_for_each (i, &lg->span) {
			if (i < env->v->nr_workers &&
			    fb_pfiber_allows(c->pf, i)) {
				env->flags |= FB_LBF_DST_PINNED;
				env->new_dst = i;
				break;
			}
		}
		return false;
	}
	env->flags &= ~FB_LBF_ALL_PINNED;
	if (c->running)
		return false;
	/* Cache hot: ran on the source less than 500 us ago (not SMT), or
	 * at the home of its wake group (1.10), which it would leave. */
	if ((!(d->flags & FB_SD_SHARE_CAPACITY) &&
	     env->now_ns - c->pf->last_ran_ns < FB_MIGRATION_COST_NS) ||
	    leaves_home(env, c->pf))
		return fb_read_once(&d->nr_balance_failed) >
		       (unsigned)d->cache_nice_tries;
	return true;
}

static unsigned long shifted(unsigned long x, unsigned n)
{
	return n >= 63 ? 0 : x >> n;
}

int fb_place_lb_detach(struct fb_lb_env *env, struct fb_lb_candidate *c, int nr)
{
	int src_nr = nr_of(env->v, env->src);
	int max = FB_MIN(FB_LB_NR_MIGRATE, src_nr), moved = 0;
	unsigned failed = fb_read_once(&env->d->nr_balance_failed);

	if (src_nr <= 1)
		return 0;
	env->flags |= FB_LBF_ALL_PINNED;
	for (int k = 0; k < nr && k < max; k++) {
		unsigned long x;

		if (env->idle != FB_LB_BUSY && src_nr - moved <= 1)
			break;
		if (!can_migrate(env, &c[k]))
			continue;
		switch (env->type) {
		case FB_MIGRATE_LOAD:
			x = FB_MAX(1ul, c[k].pf->avg.load_avg);
			if ((long)shifted(x, failed) > env->imbalance)
				continue;
			env->imbalance -= (long)x;
			break;
		case FB_MIGRATE_UTIL:
			x = c[k].pf->avg.util_avg;
			if ((long)shifted(x, failed) > env->imbalance)
				continue;
			env->imbalance -= (long)x;
			break;
		case FB_MIGRATE_TASK:
			env->imbalance--;
			break;
		}
		c[k].move = true;
		moved++;
		if (env->idle == FB_LB_NEWLY_IDLE || env->imbalance <= 0)
			break;
	}
	env->nr_moved = moved;
	return moved;
}

/* need_active - doc/scheduler.md 1.6.7 and 4.2.4 item 5. */
static bool need_active(const struct fb_lb_env *env)
{
	const struct fb_domain *d = env->d;

	if (env->idle != FB_LB_BUSY &&
	    fb_place_use_asym_prio(env->v, d, env->dst) &&
	    (fb_asym_prefer(env->v->topo, env->dst, env->src) ||
	     !fb_place_use_asym_prio(env->v, d, env->src)))
		return true;
	return env->type == FB_MIGRATE_TASK &&
	       fb_read_once(&d->nr_balance_failed) >
		       (unsigned)d->cache_nice_tries + 2;
}

static atomic_int *parent_imbalanced(const struct fb_domain *d)
{
	const struct fb_domain *p = d->parent;

	if (!p || !p->groups[p->local_group].state)
		return NULL;
	return &p->groups[p->local_group].state->imbalanced;
}

void fb_place_lb_finish(struct fb_lb_env *env, enum fb_lb_verdict verdict,
			const struct fb_pfiber *running)
{
	struct fb_domain *d = env->d;
	atomic_int *pimb = parent_imbalanced(d);
	unsigned interval;

	if (verdict != FB_LB_PULL) {
		if (pimb && !(env->flags & FB_LBF_ALL_PINNED))
			fb_store_relaxed(pimb, 0);
		goto all_pinned;
	}
	/* Affinity left part of the imbalance: tell the parent level. */
	if (pimb && (env->flags & FB_LBF_SOME_PINNED) && env->imbalance > 0)
		fb_store_relaxed(pimb, 1);
	if (!env->nr_moved && (env->flags & FB_LBF_ALL_PINNED))
		goto all_pinned;
	if (!env->nr_moved) {
		if (env->idle != FB_LB_NEWLY_IDLE)
			fb_write_once(&d->nr_balance_failed,
				      fb_read_once(&d->nr_balance_failed) + 1);
		if (need_active(env)) {
			if (!running || !fb_pfiber_allows(running, env->dst)) {
				env->flags |= FB_LBF_ALL_PINNED;
				goto one_pinned;
			}
			env->active = true;
			fb_write_once(&d->nr_balance_failed,
				      (unsigned)d->cache_nice_tries + 1);
		}
	} else {
		fb_write_once(&d->nr_balance_failed, 0u);
	}
	fb_write_once(&d->balance_interval, d->min_interval);
	return;
all_pinned:
	fb_write_once(&d->nr_balance_failed, 0u);
one_pinned:
	env->nr_moved = 0;
	if (env->idle == FB_LB_NEWLY_IDLE)
		return;
	interval = fb_read_once(&d->balance_interval);
	if (((env->flags & FB_LBF_ALL_PINNED) &&
	     interval < FB_LB_MAX_PINNED_INTERVAL_MS) ||
	    interval < d->max_interval)
		fb_write_once(&d->balance_interval, interval * 2);
}

void fb_place_request_push(const struct fb_place_view *v, int src, int dst)
{
	struct fb_pworker *w = v->w[src];

	/* Release: what the caller wrote before (the runtime's push_fiber)
	 * is seen by @src's acquire exchange of push_target. */
	fb_store_release(&w->push_target, dst);
	atomic_fetch_or_explicit(&w->state, FB_WS_NEED_RESCHED,
				 memory_order_release);
}

/* pick_simple - place-simple's rule: the most queued fibers, at least 2. */
static int pick_simple(const struct fb_place_view *v, int this)
{
	int best = -1, most = 1;

	for (int k = 1; k < v->nr_workers; k++) {
		int i = (this + k) % v->nr_workers;
		int nr = nr_of(v, i);

		if (nr > most) {
			most = nr;
			best = i;
		}
	}
	return best;
}

int fb_place_pick_victim(const struct fb_place_view *v, int this)
{
	struct fb_domain *d;
	struct fb_lb_env env;

	if (!v->topo || this < 0 || this >= v->topo->nr_workers)
		return pick_simple(v, this < 0 ? 0 : this);
	fb_for_each_domain (v->topo, this, d) {
		enum fb_lb_verdict r;

		if (!(d->flags & FB_SD_BALANCE_NEWIDLE))
			continue;
		fb_place_lb_init(&env, v, d, this, FB_LB_NEWLY_IDLE, 0, 0);
		r = fb_place_lb_find(&env);
		if (r == FB_LB_SKIP)
			break;
		if (r == FB_LB_PULL && nr_of(v, env.src) > 1)
			return env.src;
	}
	return -1;
}

/* retry_add - worker @i, if another than @this and @vid with a fiber
 * queued, as the next of the *@k in @out. */
static void retry_add(const struct fb_place_view *v, int this, int vid, int i,
		      int *out, int *k)
{
	if (i != this && i != vid && nr_of(v, i) > 1)
		out[(*k)++] = i;
}

int fb_place_steal_retry(const struct fb_place_view *v, int this, int vid,
			 int *out, int max)
{
	const struct fb_domain *d, *below = NULL;
	int k = 0, n = v->nr_workers;

	if (this < 0 || this >= n || max <= 0)
		return 0;
	if (!v->topo || this >= v->topo->nr_workers) {
		for (int j = 1; j < n && k < max; j++)
			retry_add(v, this, vid, (this + j) % n, out, &k);
		return k;
	}
	fb_for_each_domain (v->topo, this, d) {
		for (int j = 1;
		     (d->flags & FB_SD_BALANCE_NEWIDLE) && j < n && k < max;
		     j++) {
			int i = (this + j) % n;

			if (fb_wmask_test(&d->span, i) &&
			    !(below && fb_wmask_test(&below->span, i)))
				retry_add(v, this, vid, i, out, &k);
		}
		if (vid >= 0 && vid < n && fb_wmask_test(&d->span, vid))
			break;
		below = d;
	}
	return k;
}

bool fb_place_steal_hint(const struct fb_place_view *v, int this)
{
	for (int i = 0; i < v->nr_workers; i++) {
		if (i != this && nr_of(v, i) > 1)
			return true;
	}
	return false;
}

bool fb_place_peer_stuck(const struct fb_place_view *v, int this, int peer,
			 uint64_t ran_ns)
{
	if (!fb_feat(PEER_RESCUE) || this < 0 || this >= v->nr_workers ||
	    peer < 0 || peer >= v->nr_workers || peer == this)
		return false;
	if (v->topo && v->topo->node[this] != v->topo->node[peer])
		return false;
	return ran_ns >= FB_PEER_STUCK_NS;
}

int fb_place_rescue_take(const struct fb_place_view *v, int peer)
{
	int queued = nr_of(v, peer) - 1; /* its running fiber stays */

	if (queued <= 0)
		return 0;
	return FB_MIN((queued + 1) / 2, FB_PEER_RESCUE_MAX);
}

int fb_place_idle_steal(const struct fb_place_view *v, int this, int lb_src,
			bool force, uint64_t now_ns, uint64_t *next_ns,
			bool *searched)
{
	*searched = false;
	if (lb_src >= 0 && lb_src < v->nr_workers && lb_src != this &&
	    nr_of(v, lb_src) > 1)
		return lb_src;
	if (!force && now_ns < *next_ns)
		return -1;
	*next_ns = now_ns + FB_STEAL_PERIOD_NS;
	if (!fb_place_steal_hint(v, this))
		return -1;
	*searched = true;
	return fb_place_pick_victim(v, this);
}
