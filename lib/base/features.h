/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * base/features.h - the scheduler features, declared once.
 *
 * No include guard: expand it on purpose with FB_FEAT(NAME, default)
 * defined.  Names, defaults and rules are doc/scheduler.md 0.2 and the
 * section named with each; the switch is LIBFIBER_SCHED_FEATURES ("NAME"
 * on, "NO_NAME" off).  Every feature changes speed, never correctness.
 */
#ifndef FB_FEAT
#error "define FB_FEAT(name, default) before including base/features.h"
#endif

/* H1, doc/scheduler.md 2.2.1: LLC idle-scan depth from LLC utilisation. */
FB_FEAT(SIS_UTIL, true)
/* H1, doc/scheduler.md 2.2.2: bounded idle-core scan when the LLC looks
 * overloaded (Abel Wu's mail). */
FB_FEAT(SIS_CORE_LIMIT, true)
/* H1, doc/scheduler.md 2.4: the baseline of Abel Wu's mail, the idle-core
 * scan ignores SIS_UTIL. */
FB_FEAT(SIS_CORE_FULL, false)
/* H2, doc/scheduler.md 3.2.1: remote (cross-LLC and foreign) wakeups go
 * through the target's wakelist. */
FB_FEAT(TTWU_QUEUE, true)
/* H2, doc/scheduler.md 3.2.1: also hand off to an idle worker of the same
 * LLC (Tianchen Ding's mail). */
FB_FEAT(TTWU_QUEUE_IDLE, true)
/* H3, doc/scheduler.md 4.2: pack work onto the lowest-numbered workers
 * (Srikar Dronamraju's mail). */
FB_FEAT(ASYM_PACKING, false)
/* H4, doc/scheduler.md 5.2.2: allow a small NUMA imbalance when placing a
 * new fiber (imb_numa_nr). */
FB_FEAT(NUMA_IMB, true)
/* H4, doc/scheduler.md 5.2.3: cap that imbalance by the workers the fiber
 * may use (K Prateek Nayak's mail). */
FB_FEAT(NUMA_IMB_AFFINITY, true)
/* H5, doc/scheduler.md 6.2: upstream's rate limiting of blocked-load
 * updates (Vincent Guittot's review of Joel Fernandes' patch). */
FB_FEAT(BLOCKED_LOAD_RATELIMIT, true)
/* H5, doc/scheduler.md 6.2.6: newly-idle balance in proportion to its
 * recent success. */
FB_FEAT(NI_RANDOM, true)
/* Wake-affine, doc/scheduler.md 1.4.1: prefer an idle waker or previous
 * worker. */
FB_FEAT(WA_IDLE, true)
/* Wake-affine, doc/scheduler.md 1.4.1: compare the loads of waker and
 * previous worker. */
FB_FEAT(WA_WEIGHT, true)
/* Wake-affine, doc/scheduler.md 1.4.1: bias the load comparison towards
 * the previous worker. */
FB_FEAT(WA_BIAS, true)
/* Wake-affine, libfiber's own: a fiber whose I/O event an idle worker
 * polled runs on that worker, which is awake, rather than on an idle
 * previous worker, which may be asleep. */
FB_FEAT(WA_POLLER, true)
/* Creation, doc/scheduler.md 1.4.6: a fiber created by a fiber alone on
 * its worker is queued there, for its creator to block, instead of being
 * placed on an idle worker. */
FB_FEAT(CREATE_AFFINE, true)
/* Rescue, doc/scheduler.md 1.9, libfiber's own: a busy worker takes half
 * the queue of a worker of its node that has run one fiber for
 * FB_PEER_STUCK_NS (the kernel preempted it, or the fiber computes). */
FB_FEAT(PEER_RESCUE, true)
/* Wake groups, doc/scheduler.md 1.10, libfiber's own (after the kernel's
 * numa_group): fibers that wake each other through a pipe or a channel
 * share a home worker, where their wakeups go. */
FB_FEAT(WAKE_GROUPS, true)
/* Park spin, doc/scheduler.md 1.11, libfiber's own: a fiber that blocks
 * on a worker with nothing else to run polls for its own wake for a few
 * microseconds before it leaves its stack. */
FB_FEAT(PARK_SPIN, true)
