/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * blocked.c - the two halves of a sleeping worker's blocked-load decay
 * (doc/scheduler.md 6.2.1): the stamp that rate-limits it and the decay
 * itself.  fb_place_decay_blocked() in idle.c runs them in the order the
 * BLOCKED_LOAD_RATELIMIT feature asks for (stamp first with it, so that
 * another refresher reading the stamp without the sleeper's lock skips
 * the sleeper instead of waiting for that lock; stamp last without it).
 * They live in a file of their own so that calls to them from idle.c are
 * calls to external symbols: a test interposes on the decay at link time
 * and sees which stamp the worker holds when the decay starts, which no
 * other observer can see deterministically.
 */
#include "place/place.h"

void fb_place_blocked_stamp(struct fb_pworker *w, uint64_t now_tick)
{
	fb_store_relaxed(&w->last_blocked_load_update_tick, now_tick);
}

bool fb_place_blocked_decay(struct fb_pworker *w, uint64_t now_ns)
{
	int nr = fb_load_relaxed(&w->nr_running);

	fb_pelt_fold_removed(&w->avg, &w->removed);
	fb_pelt_update_worker(&w->avg, now_ns, w->runnable_weight, (unsigned)nr,
			      nr > 0);
	/* Under the rq lock, read lock-free by fb_place_nohz_pass(). */
	fb_write_once(&w->nr_blocked_decays, w->nr_blocked_decays + 1);
	/* Averages, not sums: the kernel's cfs_rq_has_blocked(). */
	if (!w->avg.load_avg && !w->avg.util_avg && !w->avg.runnable_avg) {
		fb_store_relaxed(&w->has_blocked_load, false);
		return false;
	}
	return true;
}
