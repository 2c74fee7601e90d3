// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * create.c - where a new fiber starts (doc/scheduler.md 1.4.4, 1.5
 * and 5), as a pure decision over a struct fb_place_view.
 *
 * The model.  Creation walks the creator's domains top down, from the highest
 * level that carries BALANCE_CREATE (far NUMA levels do not, doc/scheduler.md
 * 1.1.1).  At each level it compares the groups by the statistics of the
 * workers the fiber may use, moves towards the idlest group when the creator's
 * own (local) group is clearly busier, and descends inside the chosen group
 * until the lowest level.  Between NUMA nodes a small imbalance is tolerated
 * (NUMA_IMB), so that fibers stay near the memory their creator touches; K
 * Prateek Nayak's change (NUMA_IMB_AFFINITY, doc/scheduler.md 5.2.3) caps that
 * allowance by the number of local workers the fiber may use, so that a fiber
 * pinned to a few workers per node does not pile onto them while the other
 * node's allowed workers idle.
 *
 * Invariants.  The answer is always a worker the fiber may run on.  Only
 * allowed workers are counted in a group's sums, but its weight and capacity
 * stay those of the whole group (doc/scheduler.md 1.5), so a node whose allowed
 * workers are all busy can still "have spare".  The decision reads the snapshot
 * without locks; a stale value costs balance later, never correctness.
 *
 * Alternatives rejected.  Spreading to the first idle worker (place-simple)
 * separates fibers from their creator's caches and nodes, and round robin
 * ignores load entirely.  A new fiber has no averages yet, so unlike the
 * kernel nothing is taken out of its worker's sums.
 */
#include <string.h>

#include "place/place.h"

static bool group_allows(const struct fb_place_view *v,
			 const struct fb_sched_group *g,
			 const struct fb_pfiber *pf)
{
	int i;

	fb_wmask_for_each (i, &g->span) {
		if (i < v->nr_workers && fb_pfiber_allows(pf, i))
			return true;
	}
	return false;
}

/* create_stats - doc/scheduler.md 1.5 for creation: allowed workers of @g
 * only. */
static void create_stats(const struct fb_place_view *v,
			 const struct fb_domain *d,
			 const struct fb_sched_group *g,
			 const struct fb_pfiber *pf, struct fb_group_stats *s)
{
	bool imb;
	int i;

	memset(s, 0, sizeof(*s));
	fb_wmask_for_each (i, &g->span) {
		const struct fb_pworker *w;
		int nr;

		if (i >= v->nr_workers)
			break;
		if (!fb_pfiber_allows(pf, i))
			continue;
		w = v->w[i];
		nr = fb_load_relaxed(&w->nr_running);
		fb_group_add(s, w, nr);
	}
	fb_group_close(s, g);
	imb = g->state && fb_load_relaxed(&g->state->imbalanced);
	s->type = fb_group_classify(s, d->imbalance_pct, imb, false, false);
	if (s->type == FB_GROUP_FULLY_BUSY || s->type == FB_GROUP_OVERLOADED)
		s->avg_load = s->load * FB_PELT_CAPACITY / s->capacity;
}

/* idlest_better - should @s replace @best among non-local groups
 * (doc/scheduler.md 1.4.4)? */
static bool idlest_better(const struct fb_group_stats *s,
			  const struct fb_group_stats *best)
{
	if (s->type != best->type)
		return s->type < best->type;
	switch (s->type) {
	case FB_GROUP_OVERLOADED:
	case FB_GROUP_FULLY_BUSY:
		return s->avg_load < best->avg_load;
	case FB_GROUP_HAS_SPARE:
		if (s->idle != best->idle)
			return s->idle > best->idle;
		return s->util < best->util;
	default:
		return false;
	}
}

/* local_count - workers of the local group @g that @pf may use. */
static int local_count(const struct fb_place_view *v,
		       const struct fb_sched_group *g,
		       const struct fb_pfiber *pf)
{
	int i, n = 0;

	fb_wmask_for_each (i, &g->span) {
		if (i < v->nr_workers && fb_pfiber_allows(pf, i))
			n++;
	}
	return n;
}

/*
 * numa_stay - doc/scheduler.md 5.2.3, creation path: both groups have spare
 * capacity on a NUMA level.  True: keep the fiber local.
 */
static bool numa_stay(const struct fb_place_view *v, const struct fb_domain *d,
		      const struct fb_sched_group *lg,
		      const struct fb_pfiber *pf,
		      const struct fb_group_stats *l,
		      const struct fb_group_stats *i)
{
	int imb_nr = d->imb_numa_nr;
	long imb = l->idle > i->idle ? l->idle - i->idle : i->idle - l->idle;

	/* K Prateek Nayak's mail: cap the allowance by the local workers f
	 * may use. */
	if (fb_feat(NUMA_IMB_AFFINITY) && pf->allowed &&
	    pf->nr_allowed < v->nr_workers)
		imb_nr = FB_MIN(local_count(v, lg, pf), imb_nr);
	return fb_place_numa_adjust(imb, l->nr_running + 1, imb_nr) == 0;
}

int fb_place_find_idlest_group(const struct fb_place_view *v,
			       const struct fb_domain *d,
			       const struct fb_pfiber *pf, int this,
			       struct fb_create_info *info)
{
	struct fb_group_stats s, l = { 0 }, best = { 0 };
	const struct fb_sched_group *g, *lg = NULL;
	int k, idlest = -1;
	unsigned long imb;

	(void)this;
	if (info)
		info->nr_levels++;
	fb_domain_for_each_group (d, g, k) {
		if (!group_allows(v, g, pf))
			continue;
		create_stats(v, d, g, pf, &s);
		if (k == 0) {
			lg = g;
			l = s;
		} else if (idlest < 0 || idlest_better(&s, &best)) {
			idlest = (d->local_group + k) % d->nr_groups;
			best = s;
		}
	}
	if (idlest < 0 || !lg)
		return idlest;
	if (l.type < best.type)
		return -1;
	if (l.type > best.type)
		return idlest;
	switch (l.type) {
	case FB_GROUP_OVERLOADED:
	case FB_GROUP_FULLY_BUSY:
		imb = FB_PELT_CAPACITY *
		      (unsigned long)(d->imbalance_pct - 100) / 100;
		if ((d->flags & FB_SD_NUMA) &&
		    best.avg_load + imb >= l.avg_load)
			return -1;
		if (best.avg_load >= l.avg_load + imb)
			return -1;
		if (100 * l.avg_load <=
		    (unsigned long)d->imbalance_pct * best.avg_load)
			return -1;
		return idlest;
	case FB_GROUP_HAS_SPARE:
		if ((d->flags & FB_SD_NUMA) &&
		    numa_stay(v, d, lg, pf, &l, &best)) {
			if (info && l.idle < best.idle)
				info->nr_numa_imb_kept++;
			return -1;
		}
		return l.idle >= best.idle ? -1 : idlest;
	default:
		return -1;
	}
}

/* exit_depth - how deep an idle worker sleeps: polling is free to wake. */
static int exit_depth(const struct fb_pworker *w)
{
	/* SLEEPING or EPOLL (the poller): both cost a system call. */
	return (fb_load_relaxed(&w->state) & FB_WS_MASK) >= FB_WS_SLEEPING;
}

int fb_place_find_idlest_worker_in(const struct fb_place_view *v,
				   const struct fb_sched_group *g,
				   const struct fb_pfiber *pf)
{
	unsigned long min_load = ~0ul;
	uint64_t stamp = 0;
	int i, idle = -1, least = -1, depth = 3;

	if (g->weight == 1)
		return fb_wmask_first(&g->span);
	fb_wmask_for_each (i, &g->span) {
		const struct fb_pworker *w;

		if (i >= v->nr_workers)
			break;
		if (!fb_pfiber_allows(pf, i))
			continue;
		w = v->w[i];
		if (fb_worker_is_idle(w)) {
			int e = exit_depth(w);
			uint64_t st = fb_load_relaxed(&w->idle_stamp);

			if (e < depth || (e == depth && st > stamp)) {
				depth = e;
				stamp = st;
				idle = i;
			}
		} else if (idle < 0) {
			unsigned long load = fb_pelt_load(&w->avg);

			if (load < min_load) {
				min_load = load;
				least = i;
			}
		}
	}
	return idle >= 0 ? idle : least;
}

/* has_flag_below - highest domain of @w smaller than @weight with @flag. */
static const struct fb_domain *level_below(const struct fb_sched_view *t, int w,
					   int weight)
{
	const struct fb_domain *d, *found = NULL;

	fb_for_each_domain (t, w, d) {
		if (d->span_weight >= weight)
			break;
		if (d->flags & FB_SD_BALANCE_CREATE)
			found = d;
	}
	return found;
}

int fb_place_find_idlest_worker(const struct fb_place_view *v,
				const struct fb_domain *d,
				const struct fb_pfiber *pf, int this,
				struct fb_create_info *info)
{
	int w = this, k;

	if (!group_allows(v, &(struct fb_sched_group){ .span = d->span }, pf))
		return pf->prev;
	while (d) {
		const struct fb_domain *top = d;

		if (!(d->flags & FB_SD_BALANCE_CREATE)) {
			d = d->child;
			continue;
		}
		k = fb_place_find_idlest_group(v, d, pf, this, info);
		if (k < 0) {
			d = d->child;
			continue;
		}
		w = fb_place_find_idlest_worker_in(v, &d->groups[k], pf);
		if (w < 0 || w == this) {
			w = this;
			d = d->child;
			continue;
		}
		this = w;
		d = level_below(v->topo, w, top->span_weight);
	}
	return w;
}

/* first_allowed - first allowed worker from @from, cyclically (idle ones
 * only if @idle), or -1. */
static int first_allowed(const struct fb_place_view *v,
			 const struct fb_pfiber *pf, int from, bool idle)
{
	int n = v->nr_workers;

	for (int k = 0; k < n; k++) {
		int i = (from + k) % n;

		if (!fb_pfiber_allows(pf, i))
			continue;
		if (!idle || fb_worker_is_idle(v->w[i]))
			return i;
	}
	return -1;
}

/* create_domain - doc/scheduler.md 1.4.4: the highest level of @this, bottom up
 * without a gap, that carries BALANCE_CREATE. */
static const struct fb_domain *create_domain(const struct fb_sched_view *t,
					     int this)
{
	const struct fb_domain *d, *found = NULL;

	fb_for_each_domain (t, this, d) {
		if (!(d->flags & FB_SD_BALANCE_CREATE))
			break;
		found = d;
	}
	return found;
}

bool fb_place_create_affine(const struct fb_place_view *v,
			    const struct fb_pfiber *pf, int this)
{
	const struct fb_pworker *w;

	if (!fb_feat(CREATE_AFFINE) || this < 0 || this >= v->nr_workers ||
	    !fb_pfiber_allows(pf, this))
		return false;
	w = v->w[this];
	return fb_load_relaxed(&w->nr_running) <= 1 &&
	       !fb_load_relaxed(&w->ttwu_pending);
}

int fb_place_select_create(const struct fb_place_view *v,
			   const struct fb_pfiber *pf, int this,
			   struct fb_create_info *info)
{
	const struct fb_domain *d;
	int w;

	if (this < 0)
		this = v->g ? (int)(atomic_fetch_add_explicit(
					    &v->g->create_rr, 1,
					    memory_order_relaxed) %
				    (unsigned int)v->nr_workers) :
			      0;
	if (!v->topo || v->topo->nr_workers != v->nr_workers) {
		w = first_allowed(v, pf, this, true);
		if (w >= 0)
			return w;
		return fb_pfiber_allows(pf, this) ?
			       this :
			       first_allowed(v, pf, this, false);
	}
	d = create_domain(v->topo, this);
	w = d ? fb_place_find_idlest_worker(v, d, pf, this, info) : this;
	if (w < 0 || w >= v->nr_workers || !fb_pfiber_allows(pf, w))
		w = first_allowed(v, pf, this, true);
	if (w < 0)
		w = first_allowed(v, pf, this, false);
	return w;
}
