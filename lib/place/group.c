// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * group.c - what the balancer (balance.c) and creation (create.c) both
 * ask of a group's statistics (doc/scheduler.md 1.5): has it spare
 * capacity, is it overloaded, what type is it; and the NUMA imbalance
 * both allow between nodes (doc/scheduler.md 5.2.2).  Pure functions of
 * struct fb_group_stats, kept apart so that neither user depends on the
 * other.
 */
#include "place/place.h"

bool fb_group_has_capacity(const struct fb_group_stats *s, int pct)
{
	if (s->nr_running < s->weight)
		return true;
	return s->capacity * (unsigned long)pct >= s->runnable * 100 &&
	       s->capacity * 100 > s->util * (unsigned long)pct;
}

bool fb_group_is_overloaded(const struct fb_group_stats *s, int pct)
{
	if (s->nr_running <= s->weight)
		return false;
	return s->capacity * 100 < s->util * (unsigned long)pct ||
	       s->capacity * (unsigned long)pct < s->runnable * 100;
}

enum fb_group_type fb_group_classify(const struct fb_group_stats *s, int pct,
				     bool imbalanced, bool asym,
				     bool smt_balance)
{
	if (fb_group_is_overloaded(s, pct))
		return FB_GROUP_OVERLOADED;
	if (imbalanced)
		return FB_GROUP_IMBALANCED;
	if (asym)
		return FB_GROUP_ASYM_PACKING;
	if (smt_balance)
		return FB_GROUP_SMT_BALANCE;
	if (!fb_group_has_capacity(s, pct))
		return FB_GROUP_FULLY_BUSY;
	return FB_GROUP_HAS_SPARE;
}

long fb_place_numa_adjust(long imbalance, int dst_running, int imb_nr)
{
	if (!fb_feat(NUMA_IMB))
		return imbalance;
	if (dst_running > imb_nr)
		return imbalance;
	if (imbalance <= FB_NUMA_IMBALANCE_MIN)
		return 0;
	return imbalance;
}
