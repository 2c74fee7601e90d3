/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * features.h - the scheduler features, declared once.
 *
 * No include guard: expand it on purpose with FB_FEAT(NAME, default)
 * defined.  Names and defaults are heuristics.md section 0.2's table; the
 * switch is LIBFIBER_SCHED_FEATURES ("NAME" on, "NO_NAME" off).  Every feature
 * changes speed, never correctness.
 */
#ifndef FB_FEAT
#error "define FB_FEAT(name, default) before including features.h"
#endif

/* H1 (seed 000): scan depth of the LLC idle scan from LLC utilisation. */
FB_FEAT(SIS_UTIL, true)
/* H1 (seed 000): bounded idle-core scan when the LLC looks overloaded. */
FB_FEAT(SIS_CORE_LIMIT, true)
/* H1 baseline of seed 000: the idle-core scan ignores SIS_UTIL. */
FB_FEAT(SIS_CORE_FULL, false)
/* H2: remote (cross-LLC and foreign) wakeups go through the target's wakelist. */
FB_FEAT(TTWU_QUEUE, true)
/* H2 (seed 002): also hand off to an idle worker of the same LLC. */
FB_FEAT(TTWU_QUEUE_IDLE, true)
/* H3 (seed 001): pack work onto the lowest-numbered workers. */
FB_FEAT(ASYM_PACKING, false)
/* H4: allow a small NUMA imbalance when placing a new fiber (imb_numa_nr). */
FB_FEAT(NUMA_IMB, true)
/* H4 (seed 003): cap that imbalance by the workers the fiber may use. */
FB_FEAT(NUMA_IMB_AFFINITY, true)
/* H5 (seed 004): upstream's rate limiting of blocked-load updates. */
FB_FEAT(BLOCKED_LOAD_RATELIMIT, true)
/* H5: newly-idle balance in proportion to its recent success. */
FB_FEAT(NI_RANDOM, true)
/* Wake-affine: prefer an idle waker or previous worker. */
FB_FEAT(WA_IDLE, true)
/* Wake-affine: compare the loads of waker and previous worker. */
FB_FEAT(WA_WEIGHT, true)
/* Wake-affine: bias the load comparison towards the previous worker. */
FB_FEAT(WA_BIAS, true)
