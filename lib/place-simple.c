/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * place-simple.c - the core's placement decisions, before the topology-aware
 * heuristics of heuristics.md replace them (issues #4 and #5):
 *   wake:   the previous worker, if the fiber may still run there;
 *   create: the creator's worker if it is idle, else the first idle allowed
 *           worker after it, else the creator's worker (spreading new work
 *           over idle workers);
 *   pull:   an idle worker steals from the worker with the most queued
 *           fibers;
 *   deliver: the wakelist for foreign wakers and for idle targets
 *           (TTWU_QUEUE / TTWU_QUEUE_IDLE), every worker counted as one LLC.
 * Every decision honours the fiber's affinity and reads the snapshot
 * without locks: a stale value costs speed, never correctness.
 */
#include "place.h"

static _Atomic unsigned int rr;

/* first_allowed_from - first allowed worker at or after @from, cyclically. */
static int first_allowed_from(const struct fb_place_view *v,
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

int fb_place_select_wake(const struct fb_place_view *v,
			 const struct fb_pfiber *pf, int this, unsigned flags)
{
	int prev = pf->prev;

	(void)flags;
	if (prev >= 0 && prev < v->nr_workers && fb_pfiber_allows(pf, prev))
		return prev;
	if (this >= 0 && fb_pfiber_allows(pf, this))
		return this;
	return first_allowed_from(v, pf, 0, false);
}

int fb_place_select_create(const struct fb_place_view *v,
			   const struct fb_pfiber *pf, int this)
{
	int start = this >= 0 ? this
			      : (int)(atomic_fetch_add_explicit(
					      &rr, 1, memory_order_relaxed) %
				      (unsigned int)v->nr_workers);
	int i = first_allowed_from(v, pf, start, true);

	if (i >= 0)
		return i;
	if (this >= 0 && fb_pfiber_allows(pf, this))
		return this;
	return first_allowed_from(v, pf, start, false);
}

bool fb_place_use_wakelist(const struct fb_place_view *v,
			   const struct fb_pfiber *pf, int t, int this)
{
	(void)v;
	if (!fb_feat(TTWU_QUEUE))
		return false;
	if (!fb_pfiber_allows(pf, t))
		return false;
	if (this < 0)
		return true;
	if (t == this)
		return false;
	return fb_feat(TTWU_QUEUE_IDLE) &&
	       fb_load_relaxed(&v->w[t]->nr_running) == 0;
}

int fb_place_pick_victim(const struct fb_place_view *v, int this)
{
	int best = -1, most = 1;

	for (int k = 1; k < v->nr_workers; k++) {
		int i = (this + k) % v->nr_workers;
		int nr = fb_load_relaxed(&v->w[i]->nr_running);

		if (nr > most) {
			most = nr;
			best = i;
		}
	}
	return best;
}
