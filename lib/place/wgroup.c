// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * wgroup.c - wake groups (doc/scheduler.md 1.10): the decisions, pure
 * functions of the fibers' records and the view.  The registry that
 * acts on them is sched/wgroup.c.
 *
 * The model.  Fibers that pass data to each other through a pipe or a
 * channel touch the same lines: its lock and ring, each other's stacks
 * and descriptors.  On one worker those stay in its caches; split over two,
 * every message moves them.  wake_affine cannot see this: it looks at
 * one waker and one wakee at a time, and a fan-out (hackbench's senders,
 * each feeding every receiver of its group) gives it no majority to
 * follow.  So, like the kernel's numa_group, which gathers the tasks that
 * fault on the same pages and gives them a preferred node, a stream's
 * wakeup gathers the two fibers into a group, and the group has a home
 * worker where its wakeups go.  Groups never merge and are capped, so a
 * fiber everyone writes to cannot gather the whole program on one
 * worker; the balancer treats a fiber at its home like a cache-hot one
 * (balance.c, can_migrate), so it moves one only when balancing keeps
 * failing; and an idle worker beats a busy home, as a lightly loaded
 * one beats a home with half as many runnable fibers again.
 */
#include "place/place.h"

/* may_group - may @pf take part: only a fiber that may run on every
 * worker, whose home can be any of them. */
static bool may_group(const struct fb_pfiber *pf)
{
	return !pf->allowed;
}

/* follow - two groups met: should one move to the other's home? */
static enum fb_wgroup_join follow(const struct fb_wgroup *wg,
				  const struct fb_wgroup *fg)
{
	int wn = fb_load_relaxed(&wg->nr), fn = fb_load_relaxed(&fg->nr);

	if (wg == fg ||
	    fb_load_relaxed(&wg->home) == fb_load_relaxed(&fg->home) ||
	    wn + fn > FB_WGROUP_MAX)
		return FB_WGROUP_KEEP;
	if (wn < fn)
		return fb_load_relaxed(&wg->moved) ? FB_WGROUP_KEEP :
						     FB_WGROUP_WAKER_FOLLOWS;
	return fb_load_relaxed(&fg->moved) ? FB_WGROUP_KEEP :
					     FB_WGROUP_WAKEE_FOLLOWS;
}

enum fb_wgroup_join fb_place_wgroup_join(const struct fb_pfiber *waker,
					 const struct fb_pfiber *wakee)
{
	const struct fb_wgroup *wg = waker->group, *fg = wakee->group;

	if (!fb_feat(WAKE_GROUPS) || waker == wakee || !may_group(waker) ||
	    !may_group(wakee))
		return FB_WGROUP_KEEP;
	if (!wg && !fg)
		return FB_WGROUP_NEW;
	if (wg && fg)
		return follow(wg, fg);
	if (!wg)
		return fb_load_relaxed(&fg->nr) < FB_WGROUP_MAX ?
			       FB_WGROUP_WAKER_JOINS :
			       FB_WGROUP_KEEP;
	return fb_load_relaxed(&wg->nr) < FB_WGROUP_MAX ?
		       FB_WGROUP_WAKEE_JOINS :
		       FB_WGROUP_KEEP;
}

int fb_place_wgroup_home(const struct fb_place_view *v,
			 const unsigned int *homed)
{
	int best = 0;

	for (int w = 1; w < v->nr_workers; w++)
		if (homed[w] < homed[best])
			best = w;
	return best;
}

/* nr_running - worker @w's runnable fibers, a hint: never below 0. */
static unsigned long nr_running(const struct fb_place_view *v, int w)
{
	int n = fb_load_relaxed(&v->w[w]->nr_running);

	return n > 0 ? (unsigned long)n : 0;
}

int fb_place_wgroup_target(const struct fb_place_view *v,
			   const struct fb_pfiber *pf, int t)
{
	const struct fb_wgroup *g = pf->group;
	int home;

	if (!g || !fb_feat(WAKE_GROUPS))
		return t;
	home = fb_load_relaxed(&g->home);
	if (home == t || home < 0 || home >= v->nr_workers ||
	    !fb_pfiber_allows(pf, home))
		return t;
	if (fb_worker_is_idle(v->w[t]) && !fb_worker_is_idle(v->w[home]))
		return t;
	if (nr_running(v, home) * 100 >
	    (nr_running(v, t) + FB_WGROUP_SLACK) * FB_WGROUP_LOAD_PCT)
		return t;
	return home;
}
