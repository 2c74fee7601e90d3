// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * mirror.c - the scheduler's constants that fiber-sim mirrors, checked at
 * compile time.  This file includes sched/sched.h for its macros only: it
 * references no function of the sched layer, which the simulator does not
 * link.
 */
#include "sched/sched.h"

#include "sim.h"

_Static_assert(SIM_TICK_SWITCHES == FB_TICK_SWITCHES, "tick cadence");
_Static_assert(SIM_TICK_NS == FB_TICK_NS, "tick length");
_Static_assert(SIM_RUNNEXT_STREAK == FB_RUNNEXT_STREAK, "runnext streak");
_Static_assert(SIM_BAL_LEVELS == FB_BAL_LEVELS, "balance levels");
_Static_assert(SIM_WF_SYNC == FB_WF_SYNC, "wake flags");
_Static_assert(sizeof(struct sim_counters) == sizeof(struct fb_counters),
	       "one counter list");
