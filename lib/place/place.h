/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * place/place.h - the placement layer's view of workers and fibers.
 *
 * Placement decides where a fiber runs (on wake, on create) and who pulls
 * work from whom.  It reads a per-worker snapshot and a per-fiber record that
 * this header defines and the scheduler embeds, so that a test or a simulator
 * can fill an array of them with no scheduler behind it.  Placement never
 * calls up into the scheduler; time enters as an argument.
 */
#ifndef FB_PLACE_H
#define FB_PLACE_H

#define _GNU_SOURCE 1
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"
#include "place/pelt.h"
#include "topo/view.h"

/*
 * Worker state word (also the futex the worker sleeps on).  The owner
 * stores RUNNING, POLLING or SLEEPING; wakers only OR in NEED_RESCHED.
 *   RUNNING   the worker runs fibers or scheduler code; it will look at its
 *             wakelist and run queue at its next scheduling point.
 *   POLLING   idle, spinning on its wakelist/run queue: noticed for free.
 *   SLEEPING  idle in futex_wait: costs one futex wake.
 *   EPOLL     idle in epoll_wait as the runtime's one poller (sched/netpoll.c):
 *             costs one eventfd write.  At most one worker is EPOLL.
 */
enum {
	FB_WS_RUNNING = 0,
	FB_WS_POLLING = 1,
	FB_WS_SLEEPING = 2,
	FB_WS_EPOLL = 3,
	FB_WS_MASK = 3,
	FB_WS_NEED_RESCHED = 4,
};

struct fb_fiber; /* sched/sched.h */

/*
 * Per-worker fields others read or write.  The first line is the worker's
 * doorbell: what a waker reads and writes to hand it a fiber (state,
 * ttwu_pending, the wakelist head, nr_running) and what placement reads
 * to call it idle.  A remote wakeup and the idle worker's reaction then
 * move this one line between the two caches instead of four.
 */
struct fb_pworker {
	atomic_uint state fb_cacheline_aligned; /* FB_WS_*; see above */
	atomic_uint ttwu_pending; /* wakelist handoff in flight; set by
				     wakers, cleared by owner */
	atomic_int nr_running;	  /* runnable fibers on the worker, the
				     running one included; rq lock for
				     writes, relaxed reads for placement */
	int id;
	struct fb_fiber *_Atomic wakelist; /* MPSC stack of the scheduler
				   (sched/core.c); wakers push (CAS), the
				   owner takes all (xchg) */
	_Atomic uint64_t idle_stamp;	   /* ns when it went idle, 0 when busy;
				   owner writes, placement reads others' */

	/* Load tracking (doc/scheduler.md 1.3): sums of the fibers attached
	 * to the worker, blocked ones included.  Written by the owner while it
	 * is busy, else under the rq lock; the averages are read without
	 * locks by placement (fb_pelt_load() and friends, place/pelt.h). */
	struct fb_pelt avg fb_cacheline_aligned;
	unsigned long runnable_weight; /* sum of runnable fibers' weights;
					   avg's writer, like avg */
	uint64_t avg_idle;	       /* ns; initial 1 ms (doc/scheduler.md
					  1.3.5) */
	/* Written by the owner, and by the balancing worker while the owner
	 * sleeps (doc/scheduler.md 1.8), which may overlap its waking: every
	 * access is fb_read_once/fb_write_once (base/atomic.h); a lost update is
	 * a hint lost.  next_balance: doc/scheduler.md 1.6.8. */
	uint64_t max_idle_balance_cost; /* ns; initial 500 us */
	uint64_t next_balance;		/* ns */
	/* Blocked load (doc/scheduler.md 6.2), kicks (doc/scheduler.md 1.8)
	 * and the active balance request (push_target, -1 none;
	 * doc/scheduler.md 1.6.7). */
	atomic_bool has_blocked_load;
	_Atomic uint64_t last_blocked_load_update_tick;
	atomic_uint kick_flags; /* FB_KICK_* */
	atomic_int push_target;
	uint64_t rng;		    /* per-worker PRNG (NI_RANDOM); owner */
	uint64_t nr_blocked_decays; /* decay_blocked runs (doc/scheduler.md
				       6.2.1); rq lock, fb_write_once; read
				       lock-free */
	/* avg is the owner's while this is true (it runs fibers and updates
	 * avg at every switch without a lock); while false (idle) avg is
	 * written under the rq lock, also by others refreshing a sleeper's
	 * blocked load.  Changed by the owner under the rq lock. */
	atomic_bool avg_busy;
	/* Shares of fibers that moved away, folded into avg by its writer
	 * (place/pelt.h); written by others, so on a line of its own. */
	struct fb_pelt_removed removed fb_cacheline_aligned;
};

/* Kick flags (doc/scheduler.md 1.8). */
enum { FB_KICK_STATS = 1, FB_KICK_BALANCE = 2, FB_KICK_NEXT = 4 };

/* fb_worker_is_idle - no fiber running or queued, no handoff in flight. */
static inline bool fb_worker_is_idle(const struct fb_pworker *w)
{
	return fb_load_relaxed(&w->nr_running) == 0 &&
	       fb_load_relaxed(&w->ttwu_pending) == 0;
}

/*
 * A wake group (doc/scheduler.md 1.10): fibers that wake each other
 * through pipes, and the worker they share.  The runtime's registry
 * (sched/wgroup.c) writes both fields under its lock; placement reads
 * them relaxed, as hints.  A member's group lives as long as the member
 * (it leaves when it exits), so a fiber's @group pointer is good for
 * whoever owns the fiber.
 */
struct fb_wgroup {
	atomic_int home;   /* the members' worker */
	atomic_int nr;	   /* members, at most FB_WGROUP_MAX */
	atomic_bool moved; /* its home followed another group's, once */
};

/* Per-fiber placement record (doc/scheduler.md 1.2).  Written by whoever
 * owns the fiber at the time (its worker, or the waker that made it
 * runnable).  recent_used: step 3 of select_idle_sibling, doc/scheduler.md
 * 1.4.2; wakee_flips: record_wakee, doc/scheduler.md 1.4.1; last_ran_ns:
 * the cache-hot test, doc/scheduler.md 1.6.6; group: 1.10. */
struct fb_pfiber {
	cpu_set_t *allowed; /* NULL: every worker */
	int nr_allowed;	    /* 0 when allowed == NULL */
	bool custom_affinity;
	int pin;	      /* the one worker allowed; -1: several or all */
	int prev;	      /* worker it last ran on, -1 before */
	int recent_used;      /* -1 none */
	unsigned long weight; /* 1024 */
	struct fb_pelt avg;   /* its own averages */
	int attached;	      /* worker whose sums hold its share, -1 */
	bool avg_queued;      /* runnable since avg.last_update */
	unsigned int wakee_flips;
	const struct fb_pfiber *last_wakee;
	uint64_t wakee_flip_decay_ns;
	uint64_t last_ran_ns;
	struct fb_wgroup *group; /* NULL: none */
};

/* Runtime-wide placement state (doc/scheduler.md 1.2, "Global"). */
struct fb_place_global {
	atomic_bool overloaded;	  /* some worker has > 1 runnable fiber */
	struct fb_wmask sleeping; /* sleeping workers; bits set/cleared by
				     their owner with atomic ops on words */
	atomic_int nr_sleeping;
	atomic_bool has_blocked;
	_Atomic uint64_t next_blocked; /* ns */
	_Atomic uint64_t next_balance; /* ns */
	atomic_bool needs_update;
	atomic_bool balance_running; /* SERIALIZE levels (doc/scheduler.md
					1.6.8): one at a time; acquire on
					take, release */
	/* LIBFIBER_BLOCKED_LOAD_INTERVAL_MS: a sleeper's blocked load is
	 * refreshed at most once per this many ticks (doc/scheduler.md
	 * 6.2.8: Joel Fernandes' 50 ms proposal as an experiment knob); 0 or
	 * 1 = once per tick. */
	unsigned int blocked_min_ticks;
	/* Next worker whose domains a foreign creator's fiber is placed
	 * from (doc/scheduler.md 1.4.4); relaxed fetch-add.  Here, not in a
	 * static, so that each runtime or simulation has its own sequence. */
	atomic_uint create_rr;
};

/*
 * An affinity mask (fb_pfiber.allowed) has the layout of a cpu_set_t over
 * worker ids, and at least CPU_ALLOC_SIZE(nr_workers) bytes: placement
 * asks only about workers of its view, so a runtime's masks are as small
 * as its worker count allows.  FB_CPUSET_SIZE, CPU_ALLOC_SIZE(FB_MAX_WORKERS),
 * has room for any view; fb_cpuset_t is one on the stack.
 */
#define FB_CPUSET_SIZE CPU_ALLOC_SIZE(FB_MAX_WORKERS)
typedef union fb_cpuset {
	cpu_set_t set;
	unsigned long bits[FB_CPUSET_SIZE / sizeof(unsigned long)];
} fb_cpuset_t;

/* fb_pfiber_allows - may @pf run on worker @w?  A @w past the mask (never
 * a worker) is not allowed: CPU_ISSET_S tests the bound. */
static inline bool fb_pfiber_allows(const struct fb_pfiber *pf, int w)
{
	return pf->allowed == NULL ||
	       CPU_ISSET_S((size_t)w, FB_CPUSET_SIZE, pf->allowed);
}

/*
 * fb_place_running_as - the candidate a balancer offers for another
 * worker's running fiber (doc/scheduler.md 1.6.6), whose own affinity it
 * must not read (the owner may free or replace it meanwhile): built in
 * @f and @mask from @pin, the fiber's fb_pfiber.pin as its worker
 * published it at the switch.  Pinned to one worker, it is allowed there
 * only; otherwise everywhere, and the source checks the real affinity when
 * it honours a push.  Context: any; pure.
 */
static inline void fb_place_running_as(struct fb_pfiber *f, fb_cpuset_t *mask,
				       int pin)
{
	*f = (struct fb_pfiber){ .pin = pin,
				 .prev = pin,
				 .recent_used = -1,
				 .attached = -1,
				 .weight = 1024 };
	if (pin < 0 || pin >= FB_MAX_WORKERS)
		return;
	CPU_ZERO_S(FB_CPUSET_SIZE, &mask->set);
	CPU_SET_S((size_t)pin, FB_CPUSET_SIZE, &mask->set);
	f->allowed = &mask->set;
	f->nr_allowed = 1;
	f->custom_affinity = true;
}

/*
 * The view a decision reads: the worker snapshot (@w[i] points at worker
 * i's fields), the domain view (topo/topo.h; NULL before the runtime publishes
 * one: decisions then treat all workers as one LLC) and the global state.
 * Tests build one by hand for a synthetic topology, with no threads.
 */
struct fb_place_view {
	int nr_workers;
	struct fb_pworker *const *w;
	const struct fb_sched_view *topo;
	struct fb_place_global *g;
};

/*
 * fb_place_is_sleeping - is worker @i in the sleeping mask?  Other workers
 * set and clear bits with atomic RMWs, so the read is atomic (relaxed):
 * the answer is a hint, as everywhere in placement.
 */
static inline bool fb_place_is_sleeping(const struct fb_place_global *g, int i)
{
	return g && (__atomic_load_n(&g->sleeping.bits[(unsigned)i / 64],
				     __ATOMIC_RELAXED) >>
		     ((unsigned)i % 64)) &
			    1;
}

/* ---- wake path (place/wake.c; doc/scheduler.md 1.4, 2, 3) ---- */

/*
 * Wake flags placement understands.  Same values as the scheduler's FB_WF_*
 * (sched/sched.h), which placement may not include; sched/core.c checks that
 * they agree.
 */
#define FB_PLACE_WF_SYNC 0x1u /* the waker is about to block (hand-off) */
/* The waker is a worker handing out the I/O events it polled: awake, where
 * an idle @prev may be asleep (WA_POLLER). */
#define FB_PLACE_WF_POLLER 0x2u

/*
 * Cores the idle-core scan inspects when the LLC looks overloaded and
 * SIS_CORE_LIMIT is on: 2 (doc/scheduler.md 2.3; Abel Wu's mail sets the
 * kernel's pre-decremented loop counter to 3).
 */
#define FB_SIS_CORE_LIMIT_NR 2
/* record_wakee halves a waker's wakee_flips at most once per 1 s
 * (doc/scheduler.md 1.4.1; the kernel's HZ jiffies). */
#define FB_WAKEE_FLIP_DECAY_NS 1000000000ull
/* imbalance_pct of the LLC level (doc/scheduler.md 1.1.1), used when the
 * view has no domains. */
#define FB_LLC_IMBALANCE_PCT FB_LEVEL_PCT_LLC

/* Which step of select_idle_sibling (doc/scheduler.md 1.4.2) gave the
 * answer. */
enum fb_wake_pick {
	FB_PICK_TARGET,	   /* step 1: the target (waker's or previous
			      worker) is idle */
	FB_PICK_PREV,	   /* step 2: the previous worker is idle */
	FB_PICK_RECENT,	   /* step 3: the recently used worker is idle */
	FB_PICK_SIBLING,   /* step 5: an idle SMT sibling of the previous
			      worker */
	FB_PICK_IDLE_CORE, /* step 6: a core whose workers are all idle */
	FB_PICK_SCAN_HIT,  /* step 6: an idle worker found by the scan */
	FB_PICK_SCAN_MISS, /* steps 4 and 7: nothing idle found (or no scan);
			      the target or a cluster fallback */
	FB_PICK_AFFINITY,  /* the answer was not allowed: first allowed worker,
			      idle ones and prev's LLC first */
	FB_PICK_PINNED,	   /* the fiber may run on one worker only: that one,
			      with nothing looked at */
};

/* Statistics of one fb_place_select_wake() call. */
struct fb_wake_result {
	enum fb_wake_pick pick;
	bool affine;	     /* wake_affine moved the target to the waker's
				worker */
	int probes;	     /* workers whose idle state the LLC scan read
				(step 6 only) */
	bool core_scan;	     /* the scan looked for idle cores (the LLC's
				has_idle_cores hint was set), run or not */
	bool cut_util;	     /* SIS_UTIL skipped or stopped the scan */
	bool cut_core_limit; /* SIS_CORE_LIMIT stopped the idle-core scan */
};

/*
 * fb_place_select_wake - the worker a woken fiber @pf should run on
 * (doc/scheduler.md 1.4.1 to 1.4.3, the scan of 2.2.2).
 * @waker: the waking fiber's record, NULL for a foreign thread or a
 *	worker outside any fiber; record_wakee updates it.
 * @this: the waker's worker, -1 for a foreign thread (no wake-affine).
 * @flags: FB_PLACE_WF_*.  @now_ns: the clock, read only to decay the
 *	waker's wakee_flips (0 is fine when @waker is NULL).
 * @res: statistics, or NULL.
 * Writes @pf->recent_used, @waker's flip fields and, after a failed
 * idle-core scan, the LLC's has_idle_cores hint.
 * Return: a worker @pf allows (its previous worker if the mask allows no
 * worker of the view, which set_affinity prevents).
 * Context: any thread; the caller owns @pf (it won the wake) and @waker (it
 * is running); reads the view without locks (inside a topology read-side
 * section when @v->topo is the published view); never blocks.
 */
int fb_place_select_wake(const struct fb_place_view *v, struct fb_pfiber *pf,
			 struct fb_pfiber *waker, int this, unsigned flags,
			 uint64_t now_ns, struct fb_wake_result *res);

/*
 * fb_place_use_wakelist - deliver a wakeup of @pf onto worker @t through
 * @t's wakelist (true) or by locking its run queue (false); @this is the
 * waker's worker or -1 for a foreign thread (doc/scheduler.md 3.2.1,
 * TTWU_QUEUE and TTWU_QUEUE_IDLE).  Whether @t is going offline is the
 * caller's test.  Context: any thread; reads the view without locks.
 */
bool fb_place_use_wakelist(const struct fb_place_view *v,
			   const struct fb_pfiber *pf, int t, int this);

/* ---- wake groups (wgroup.c, doc/scheduler.md 1.10) ---- */

/* The most members of one wake group.  Picked: a hackbench group of 20
 * senders and 20 receivers fits three times over, and a fiber that many
 * others wake (a logger, a dispatcher) gathers no more than this many
 * on its worker. */
#define FB_WGROUP_MAX 128

/* A home with more than FB_WGROUP_LOAD_PCT percent of the usual answer's
 * runnable fibers, plus FB_WGROUP_SLACK, gets no more wakeups.  Picked:
 * groups whose homes balance each other (hackbench's) keep going home
 * through the run queues' ups and downs, while a home that a popular
 * fiber filled with its group is not filled further. */
#define FB_WGROUP_LOAD_PCT 150
#define FB_WGROUP_SLACK 2

/* What a wake between two fibers does to their groups. */
enum fb_wgroup_join {
	FB_WGROUP_KEEP,		 /* nothing */
	FB_WGROUP_NEW,		 /* both form a new group */
	FB_WGROUP_WAKER_JOINS,	 /* the waker joins the wakee's group */
	FB_WGROUP_WAKEE_JOINS,	 /* the wakee joins the waker's group */
	FB_WGROUP_WAKER_FOLLOWS, /* the waker's group moves to the wakee's
				    group's home */
	FB_WGROUP_WAKEE_FOLLOWS, /* the wakee's group moves to the waker's
				    group's home */
};

/*
 * fb_place_wgroup_join - fiber @waker woke fiber @wakee through a pipe or
 * a channel:
 * should either join the other's group, or both form one?  Only fibers
 * that may run on every worker take part, and a full group takes nobody.
 * A fiber in a group stays in it: groups never merge.  But two groups
 * with different homes whose members meet, and that have at most
 * FB_WGROUP_MAX members together, come to share a home: the smaller one
 * (the wakee's on a tie) moves to the other's, once in its life, so that
 * no group's home goes back and forth.  WAKE_GROUPS off: KEEP.
 * Context: reads the groups relaxed; the caller repeats the question
 * under the registry lock before it acts.  Pure.
 */
enum fb_wgroup_join fb_place_wgroup_join(const struct fb_pfiber *waker,
					 const struct fb_pfiber *wakee);
/*
 * fb_place_wgroup_settled - a wake between @waker and @wakee that no
 * group rule can act on, known from their records and at most one
 * group's count: one of them has an affinity mask, both are in the same
 * group (a stream's steady state), or one is alone and the other's group
 * is full (a popular fiber's partners past the FB_WGROUP_MAX-th).  Inline,
 * so that the wake path pays no call for it; fb_place_wgroup_join()
 * says KEEP to all of these.
 */
static inline bool fb_place_wgroup_settled(const struct fb_pfiber *waker,
					   const struct fb_pfiber *wakee)
{
	const struct fb_wgroup *g = waker->group ? waker->group : wakee->group;

	if (waker->allowed || wakee->allowed)
		return true;
	if (waker->group && wakee->group)
		return waker->group == wakee->group;
	return g && fb_load_relaxed(&g->nr) >= FB_WGROUP_MAX;
}
/*
 * fb_place_wgroup_home - the home of a new group: the worker of @v with
 * the fewest members homed on it (@homed, one count per worker), the
 * lowest-numbered on a tie.  Pure.
 */
int fb_place_wgroup_home(const struct fb_place_view *v,
			 const unsigned int *homed);
/*
 * fb_place_wgroup_target - where woken @pf runs, given @t, the worker
 * fb_place_select_wake() chose: its group's home, unless @t is idle and
 * the home is not (an idle worker is worth more than a shared cache),
 * or the home runs more than FB_WGROUP_LOAD_PCT percent of (@t's runnable
 * fibers + FB_WGROUP_SLACK), or @pf has no group, or the home is not a
 * worker of @v that @pf allows, or WAKE_GROUPS is off.  Context: reads the view and the group relaxed;
 * the caller owns @pf.  Pure.
 */
int fb_place_wgroup_target(const struct fb_place_view *v,
			   const struct fb_pfiber *pf, int t);

/*
 * fb_place_idle_scan_depth - SIS_UTIL's scan depth for an LLC of
 * @llc_size workers whose utilisations sum to @sum_util, at the LLC level's
 * @imbalance_pct (doc/scheduler.md 2.2.1):
 *	x = sum_util / llc_size, t = min(x^2 pct^2 / (10000 x 1024), 1024),
 *	n = (1024 - t) x llc_size / 1024.
 * Context: any; pure.
 */
int fb_place_idle_scan_depth(int llc_size, unsigned long sum_util,
			     int imbalance_pct);

/*
 * fb_place_llc_util - sum of fb_pelt_util() over the workers of @this's LLC
 * (all workers when the view has no domains).  Context: any; no lock.
 */
unsigned long fb_place_llc_util(const struct fb_place_view *v, int this);

/*
 * fb_place_update_idle_scan - store the scan depth of @this's LLC after a
 * balance of domain @d whose groups' utilisation summed to @sum_util.
 * Only a periodic balance (@newly_idle false) of the domain whose span is
 * exactly the LLC writes, only with SIS_UTIL, and only when the value
 * changes (the line is shared by the whole LLC).
 * Return: whether it stored.
 * Context: the balancing worker, inside the view's read-side section.
 */
bool fb_place_update_idle_scan(const struct fb_place_view *v, int this,
			       const struct fb_domain *d,
			       unsigned long sum_util, bool newly_idle);

/*
 * fb_place_update_idle_core - worker @w has just gone idle: if the topology
 * has SMT, the hint is clear and every other worker of @w's core is idle,
 * set its LLC's has_idle_cores (doc/scheduler.md 2.2.3).  Only a failed
 * idle-core scan clears it.
 * Return: whether it set the hint.
 * Context: worker @w, on entering its idle loop; no lock.
 */
bool fb_place_update_idle_core(const struct fb_place_view *v, int w);

/* ---- creation and balancing (place/create.c, place/balance.c) ---- */

/* Kernel sysctl_sched_migration_cost: 500 us (doc/scheduler.md 0.1). */
#define FB_MIGRATION_COST_NS 500000ull
/* Kernel NUMA_IMBALANCE_MIN: imbalances up to 2 fibers are tolerated. */
#define FB_NUMA_IMBALANCE_MIN 2
/* Kernel sysctl_sched_nr_migrate: most fibers one balance looks at. */
#define FB_LB_NR_MIGRATE 32
/* Kernel MAX_PINNED_INTERVAL: interval cap when everything was pinned, ms. */
#define FB_LB_MAX_PINNED_INTERVAL_MS 512u
/* Cadence of STATS passes for sleepers: LOAD_AVG_PERIOD ms
 * (doc/scheduler.md 6.2.2). */
#define FB_BLOCKED_PERIOD_NS (32ull * 1000000ull)
/* Newly-idle success statistics window (NI_RANDOM, doc/scheduler.md
 * 6.2.6). */
#define FB_NEWIDLE_WINDOW 1024u
/* Kick flag of doc/scheduler.md 6.2.4: run the STATS pass locally before
 * sleeping. */
enum { FB_KICK_NEWILB = 8 };
#define FB_KICK_MASK (FB_KICK_STATS | FB_KICK_BALANCE | FB_KICK_NEXT)

/*
 * Group types of doc/scheduler.md 1.5, least busy first; comparisons use
 * the order.  MISFIT exists only to keep the kernel's order: never produced.
 */
enum fb_group_type {
	FB_GROUP_HAS_SPARE,
	FB_GROUP_FULLY_BUSY,
	FB_GROUP_MISFIT,
	FB_GROUP_SMT_BALANCE,
	FB_GROUP_ASYM_PACKING,
	FB_GROUP_IMBALANCED,
	FB_GROUP_OVERLOADED,
};

/* Statistics of one group (doc/scheduler.md 1.5).  Sums over the counted
 * workers; weight, capacity and nr_cores are those of the whole group. */
struct fb_group_stats {
	unsigned long load;	/* sum of load_avg */
	unsigned long util;	/* sum of min(util_avg, 1024) */
	unsigned long runnable; /* sum of runnable_avg */
	unsigned long avg_load; /* load x 1024 / capacity, when computed */
	unsigned long capacity; /* 1024 x weight */
	int nr_running;
	int idle; /* idle workers with nr_running == 0 */
	int weight;
	int nr_cores;
	enum fb_group_type type;
};

/*
 * fb_group_add - add worker @w, with @nr fibers running, to the sums of
 * @s (doc/scheduler.md 1.5); fb_group_close - the group's own figures
 * once its workers are in.  The balancer and creation both sum groups,
 * each choosing which workers count (group.c's callers).
 */
static inline void fb_group_add(struct fb_group_stats *s,
				const struct fb_pworker *w, int nr)
{
	s->load += fb_pelt_load(&w->avg);
	s->util += fb_pelt_util(&w->avg);
	s->runnable += fb_pelt_runnable(&w->avg);
	s->nr_running += nr;
	if (nr == 0 && fb_worker_is_idle(w))
		s->idle++;
}

static inline void fb_group_close(struct fb_group_stats *s,
				  const struct fb_sched_group *g)
{
	s->capacity = g->capacity;
	s->weight = g->weight;
	s->nr_cores = g->nr_cores;
}

/* fb_group_has_capacity - has_capacity (doc/scheduler.md 1.5) with
 * imbalance_pct @pct. */
bool fb_group_has_capacity(const struct fb_group_stats *s, int pct);
/* fb_group_is_overloaded - is_overloaded (doc/scheduler.md 1.5) with
 * imbalance_pct @pct. */
bool fb_group_is_overloaded(const struct fb_group_stats *s, int pct);
/*
 * fb_group_classify - the type of a group, tests in the order of
 * doc/scheduler.md 1.5: overloaded, the group's @imbalanced bit, @asym
 * (4.2.4 item 1, load balancing only), @smt_balance (load balancing only),
 * fully busy, spare.
 */
enum fb_group_type fb_group_classify(const struct fb_group_stats *s, int pct,
				     bool imbalanced, bool asym,
				     bool smt_balance);

/*
 * fb_place_numa_adjust - numa_adjust() of doc/scheduler.md 5.2.2: the NUMA
 * imbalance left after the allowance; 0 means "tolerate".  Reads NUMA_IMB.
 * Context: any.
 */
long fb_place_numa_adjust(long imbalance, int dst_running, int imb_nr);

/* What creation placement noticed, for statistics (may be NULL). */
struct fb_create_info {
	unsigned nr_numa_imb_kept; /* levels where doc/scheduler.md 5.2.3
				      kept the fiber local under an allowed
				      NUMA imbalance */
	unsigned nr_levels;	   /* find_idlest_group calls */
};

/*
 * fb_place_select_create - the worker a new fiber @pf starts on
 * (doc/scheduler.md 1.4.4 and 5.2.3).  @this is the creator's worker
 * or -1 for a foreign thread (a round-robin worker's domains are walked;
 * the counter is @v->g's create_rr, worker 0 without a global state).
 * Without a domain view, the first idle allowed worker from @this.
 * Always returns an allowed worker.  @info may be NULL.
 * Context: any; reads the view without locks.
 */
int fb_place_select_create(const struct fb_place_view *v,
			   const struct fb_pfiber *pf, int this,
			   struct fb_create_info *info);
/*
 * fb_place_create_affine - doc/scheduler.md 1.4.6: should new fiber @pf,
 * created by a fiber on worker @this (-1: a foreign thread, never), be
 * queued on @this for its creator to block instead of being placed?  Yes
 * when CREATE_AFFINE is on, @pf may run on @this and @this has nothing
 * else to run: its creator is its only runnable fiber (nr_running <= 1)
 * and no handoff is in flight.  Context: any; reads the snapshot once.
 */
bool fb_place_create_affine(const struct fb_place_view *v,
			    const struct fb_pfiber *pf, int this);
/*
 * fb_place_find_idlest_group - find_idlest_group(@d, @pf, @this) of
 * doc/scheduler.md 1.4.4: the index of the group of @d to move towards, or
 * -1 to stay.
 */
int fb_place_find_idlest_group(const struct fb_place_view *v,
			       const struct fb_domain *d,
			       const struct fb_pfiber *pf, int this,
			       struct fb_create_info *info);
/* fb_place_find_idlest_worker_in - the allowed worker of @g to use
 * (doc/scheduler.md 1.4.4). */
int fb_place_find_idlest_worker_in(const struct fb_place_view *v,
				   const struct fb_sched_group *g,
				   const struct fb_pfiber *pf);
/* fb_place_find_idlest_worker - the slow path of doc/scheduler.md 1.4.4
 * from domain @d of @this. */
int fb_place_find_idlest_worker(const struct fb_place_view *v,
				const struct fb_domain *d,
				const struct fb_pfiber *pf, int this,
				struct fb_create_info *info);

/* ---- load balancing (place/balance.c; doc/scheduler.md 1.5, 1.6, 4) ---- */

enum fb_idle_kind { FB_LB_BUSY, FB_LB_IDLE, FB_LB_NEWLY_IDLE };
enum fb_migration { FB_MIGRATE_LOAD, FB_MIGRATE_UTIL, FB_MIGRATE_TASK };
/* Verdict of fb_place_lb_find(). */
enum fb_lb_verdict {
	FB_LB_BALANCED, /* nothing to do at this level */
	FB_LB_SKIP,	/* not this worker's job: skip higher levels too */
	FB_LB_PULL,	/* env->src holds env->imbalance to move */
};
/* env->flags, set by fb_place_lb_detach() (kernel LBF_*). */
#define FB_LBF_ALL_PINNED 0x1u
#define FB_LBF_SOME_PINNED 0x2u
#define FB_LBF_DST_PINNED 0x4u

struct fb_lb_env;
/* Refresh sleeping worker @i's blocked load (doc/scheduler.md 6.2.7,
 * NO_BLOCKED_LOAD_RATELIMIT only): the runtime locks i's run queue and
 * calls fb_place_refresh_sleeping(). */
typedef void (*fb_lb_refresh_fn)(struct fb_lb_env *env, int i);

/*
 * One balance(dst, d, kind) of doc/scheduler.md 1.6.  Fill it with
 * fb_place_lb_init(); the other fields are results.  Owned by the caller;
 * the domain's balancing fields are written by fb_place_lb_finish() (owner
 * worker, or the balancing worker for a sleeping owner, doc/scheduler.md
 * 1.8).
 */
struct fb_lb_env {
	const struct fb_place_view *v;
	struct fb_domain *d;
	int dst;
	enum fb_idle_kind idle;
	uint64_t now_ns;
	uint64_t now_tick;
	fb_lb_refresh_fn refresh; /* NULL: never refresh others */
	void *arg;		  /* for @refresh */

	/* fb_place_lb_find() */
	int busiest_group; /* index in d->groups, -1 */
	int src;	   /* busiest worker, -1 */
	enum fb_migration type;
	long imbalance;
	bool prefer_sibling;
	bool overloaded;	/* some worker had > 1 runnable fiber */
	unsigned long sum_util; /* of all groups, for SIS_UTIL */
	unsigned long total_load, total_capacity;
	struct fb_group_stats local, busiest;

	/* fb_place_lb_detach() and fb_place_lb_finish() */
	unsigned flags; /* FB_LBF_* */
	int new_dst;	/* another allowed local worker (DST_PINNED), -1 */
	int nr_moved;
	bool active; /* ask src to push its running fiber to dst */
};

/* One fiber of the busiest worker, offered to fb_place_lb_detach(). */
struct fb_lb_candidate {
	const struct fb_pfiber *pf;
	bool running; /* it is the fiber the worker runs now */
	bool move;    /* out: detach it and attach it to env->dst */
};

/* fb_place_lb_init - start a balance of @d for @dst of kind @idle. */
void fb_place_lb_init(struct fb_lb_env *env, const struct fb_place_view *v,
		      struct fb_domain *d, int dst, enum fb_idle_kind idle,
		      uint64_t now_ns, uint64_t now_tick);
/*
 * fb_place_lb_find - doc/scheduler.md 1.6.1 to 1.6.5: should @dst balance,
 * group statistics, busiest group, imbalance and busiest worker.  At the top
 * level it also stores the global overloaded flag.  Context: reads the view
 * without locks; calls env->refresh only for NO_BLOCKED_LOAD_RATELIMIT
 * newly-idle balancing.
 */
enum fb_lb_verdict fb_place_lb_find(struct fb_lb_env *env);
/*
 * fb_place_lb_detach - doc/scheduler.md 1.6.6: mark which of the busiest
 * worker's fibers move to dst.  @c lists them least recently run first (the
 * running one included, flagged); at most min(32, nr_running) are looked at.
 * Return: how many were marked.  Context: the caller holds src's rq lock, so
 * that the list and the fibers' fields are stable.
 */
int fb_place_lb_detach(struct fb_lb_env *env, struct fb_lb_candidate *c,
		       int nr);
/*
 * fb_place_lb_finish - doc/scheduler.md 1.6.7 after @verdict (and the detach,
 * if any): nr_balance_failed, balance_interval, the parent's `imbalanced` bit
 * and the active-balance request (env->active).  @running is src's running
 * fiber or NULL.  Context: as the domain's balancing fields.
 */
void fb_place_lb_finish(struct fb_lb_env *env, enum fb_lb_verdict verdict,
			const struct fb_pfiber *running);
/* fb_place_request_push - active balance (doc/scheduler.md 1.6.7): ask @src
 * to hand its running fiber to @dst at its next scheduling point; a
 * release store, so that what the caller wrote before it is seen by the
 * acquire that takes the request.  Context: any. */
void fb_place_request_push(const struct fb_place_view *v, int src, int dst);
/* fb_place_use_asym_prio, fb_place_asym - doc/scheduler.md 4.2.3. */
bool fb_place_use_asym_prio(const struct fb_place_view *v,
			    const struct fb_domain *d, int w);
bool fb_place_asym(const struct fb_place_view *v, const struct fb_domain *d,
		   int dst, int src);
/*
 * fb_place_pick_victim - an idle @this chooses a worker to steal one fiber
 * from, or -1: the newly-idle balance decision (doc/scheduler.md 1.9) bottom up
 * when a domain view exists, else the worker with the most queued fibers.  Only
 * a worker with a queued (not running) fiber is returned.
 */
int fb_place_pick_victim(const struct fb_place_view *v, int this);
/*
 * fb_place_steal_retry - the workers an idle @this asks in turn, nearest
 * first, when the victim @vid it chose (fb_place_idle_steal) had no fiber
 * it may run: the count that named @vid includes fibers that cannot move
 * (pinned there, or still being left by their worker).  As the kernel's
 * balancer retries the domain it balanced without the CPU whose tasks were
 * all pinned, these are the workers of @this's BALANCE_NEWIDLE domains up
 * to the lowest that holds @vid, by level and from @this + 1 within one,
 * with a fiber queued (nr_running >= 2), neither @this nor @vid; without
 * a domain view (or @vid < 0, with one: every level), any such worker from
 * @this + 1.  Writes at most @max ids to @out.  Return: how many.  Pure.
 */
int fb_place_steal_retry(const struct fb_place_view *v, int this, int vid,
			 int *out, int max);
/*
 * fb_place_steal_hint - whether a worker other than @this has a fiber queued
 * besides one running (nr_running >= 2), the one case in which
 * fb_place_pick_victim() can name a victim: a read of each worker's
 * nr_running, no group statistics (doc/scheduler.md 1.9).
 * Context: any; the answer is a hint.
 */
bool fb_place_steal_hint(const struct fb_place_view *v, int this);
/*
 * Rescue by a busy peer (doc/scheduler.md 1.9).  A worker whose current
 * fiber has run FB_PEER_STUCK_NS without a scheduling point was preempted
 * by the kernel, or runs a fiber that computes: either way the fibers
 * queued behind it wait.  A busy worker of its node, at its tick, takes
 * half of them (fb_place_rescue_take), at most FB_PEER_RESCUE_MAX, and
 * looks at FB_PEER_RESCUE_LOOKS peers per tick, round robin.  Picked: a
 * fiber of a server runs for about 10 us between two waits and the 99th
 * percentile was 140 us (examples/httpd under wrk), while the kernel
 * preempts a worker for a slice of milliseconds; 200 us is past the one
 * and far below the other, and below FB_RESCUE_NS, the monitor's.
 */
#define FB_PEER_STUCK_NS (200 * 1000ull)
#define FB_PEER_RESCUE_MAX 16
#define FB_PEER_RESCUE_LOOKS 2
/*
 * fb_place_peer_stuck - whether busy worker @this should rescue fibers
 * from @peer, whose current fiber has run @ran_ns since the last switch
 * there: PEER_RESCUE is on, @peer is another worker of @this's NUMA node
 * (with no view, any other worker) and @ran_ns >= FB_PEER_STUCK_NS.
 * Not only its LLC: a fiber that waits milliseconds for its worker loses
 * more than one that refills another LLC's cache.  Pure.
 */
bool fb_place_peer_stuck(const struct fb_place_view *v, int this, int peer,
			 uint64_t ran_ns);
/*
 * fb_place_rescue_take - how many queued fibers to take from stuck @peer:
 * half of those besides its running one, rounded up, at most
 * FB_PEER_RESCUE_MAX; 0 with none queued.  Pure.
 */
int fb_place_rescue_take(const struct fb_place_view *v, int peer);
/* The idle loop's ungated victim search runs at most once per this long
 * per worker unless forced (fb_place_idle_steal): one tick. */
#define FB_STEAL_PERIOD_NS 1000000ull
/* A thief looks at most this many of a victim's queued fibers, under the
 * victim's queue lock (sched/idle.c): a worker with thousands of pinned
 * fibers queued must not have each steal walk them all while it waits
 * for its lock.  A fiber deeper in the queue is left to its worker. */
#define FB_STEAL_SCAN_MAX 64
/* ...and asks at most this many other workers after its victim
 * (fb_place_steal_retry). */
#define FB_STEAL_RETRY_MAX 8
/*
 * fb_place_idle_steal - whom an idle @this steals one fiber from after
 * newly-idle balancing pulled nothing (doc/scheduler.md 1.9), or -1.
 * @lb_src is the worker a newly-idle balance of this idle entry chose but
 * detached nothing from (-1: none, or the gate was closed): it is taken
 * without a search while it still has a queued fiber.  Otherwise, when
 * @force is set (the worker is about to sleep, or it left a sleep or a
 * kick) or @now_ns has reached *@next_ns, *@next_ns moves to @now_ns +
 * FB_STEAL_PERIOD_NS and, if fb_place_steal_hint() holds, the ungated
 * search (fb_place_pick_victim()) runs.  *@searched tells whether it ran.
 * Context: the idle worker @this, inside the view's read section.
 */
int fb_place_idle_steal(const struct fb_place_view *v, int this, int lb_src,
			bool force, uint64_t now_ns, uint64_t *next_ns,
			bool *searched);

/* ---- newly-idle, periodic and sleeper balancing (place/idle.c) ---- */

/*
 * fb_place_balance_interval_ns - the interval actually used of @d for a
 * busy or idle worker (doc/scheduler.md 1.6.8); @tick_ns the tick length.
 * Context: any.
 */
uint64_t fb_place_balance_interval_ns(const struct fb_place_view *v,
				      const struct fb_domain *d, bool busy,
				      uint64_t tick_ns);
/*
 * fb_place_update_newidle_cost - note one newly-idle balance of @d that
 * took @cost_ns (0: only decay), doc/scheduler.md 1.7: a new maximum is
 * kept; else after 1 s the maximum decays by 253/256.  Return: true iff it
 * decayed.
 */
bool fb_place_update_newidle_cost(struct fb_domain *d, uint64_t cost_ns,
				  uint64_t now_ns);
/*
 * fb_place_ni_random_run - NI_RANDOM (doc/scheduler.md 6.2.6): run @d's
 * newly-idle balance for the 1024-sided @draw?  A skipped call is counted
 * in @d's statistics.  *@weight gets the success weight
 * round(1024 / (1 + ratio)) (1 with NO_NI_RANDOM).
 * Context: as the domain's balancing fields.
 */
bool fb_place_ni_random_run(struct fb_domain *d, uint32_t draw,
			    unsigned *weight);
/* fb_place_newidle_stats - count one newly-idle call of @d that added
 * @success to the successes (window of 1024 calls, doc/scheduler.md
 * 6.2.6). */
void fb_place_newidle_stats(struct fb_domain *d, unsigned success);
/* fb_place_rng - the per-worker PRNG of @w (xorshift64*): next 32 bits. */
uint32_t fb_place_rng(struct fb_pworker *w);

/* Hooks the newly-idle and periodic drivers call; @arg is ops->arg. */
struct fb_balance_ops {
	/* balance(dst, d, kind), including detach and attach; returns the
	 * number of fibers pulled; sets *stop for FB_LB_SKIP.  Required. */
	int (*balance)(void *arg, int dst, struct fb_domain *d,
		       enum fb_idle_kind kind, bool *stop);
	/* the clock, ns, for cost measurements; NULL: costs are 0 */
	uint64_t (*clock)(void *arg);
	/* decay worker @w's own blocked load under its rq lock
	 * (fb_place_decay_blocked()); NULL: call it without a lock */
	void (*decay)(void *arg, int w);
	/* refresh sleeping worker @i under its rq lock
	 * (fb_place_refresh_sleeping()); NULL: call it without a lock */
	bool (*refresh)(void *arg, int i);
	/* is there work for worker @w (for the sleeper pass)? NULL: no */
	bool (*has_work)(void *arg, int w);
	void *arg;
};

/* What one newly-idle balance did (doc/scheduler.md 1.7). */
struct fb_newidle_result {
	int pulled;		 /* fibers pulled */
	unsigned nr_balances;	 /* domains balanced */
	unsigned nr_skipped;	 /* domains skipped by NI_RANDOM */
	unsigned skipped_levels; /* bit d->level (up to 31) of each */
	bool own_decayed;	 /* own blocked load decayed */
	bool gated;		 /* stopped by the gate */
	unsigned idle_entry;	 /* FB_IDLE_ENTRY_* decided by rule 4 */
};

/* Rule 4 outcomes (doc/scheduler.md 6.2.4): nothing, run the STATS pass
 * before sleeping (FB_KICK_NEWILB set on the worker), or kick a sleeper for
 * STATS. */
enum { FB_IDLE_ENTRY_NONE, FB_IDLE_ENTRY_LOCAL, FB_IDLE_ENTRY_KICK };

/*
 * fb_place_newidle - newly-idle balancing of worker @w (doc/scheduler.md 1.7,
 * rules 3 and 4 of 6.2.3 and 6.2.4) at @now_ns: the gate, the decay of its own
 * blocked load, the walk over its domains with NI_RANDOM draws from w's PRNG,
 * cost accounting, idle_stamp and next_balance.  Context: the owner worker,
 * rq lock not held (ops->balance takes the locks it needs).
 */
void fb_place_newidle(const struct fb_place_view *v, int w, uint64_t now_ns,
		      uint64_t now_tick, const struct fb_balance_ops *ops,
		      struct fb_newidle_result *res);
/*
 * fb_place_idle_entry_stats - rule 4 (doc/scheduler.md 6.2.4) after a
 * newly-idle balance that pulled nothing: FB_IDLE_ENTRY_LOCAL (and
 * FB_KICK_NEWILB set on @w), or with NO_BLOCKED_LOAD_RATELIMIT
 * FB_IDLE_ENTRY_KICK, or NONE.
 */
unsigned fb_place_idle_entry_stats(const struct fb_place_view *v, int w,
				   uint64_t now_ns);
/*
 * fb_place_sleep_stats_due - just before @w sleeps: clear FB_KICK_NEWILB
 * and say whether w should run the STATS pass itself (it was the only flag
 * and @has_work is false).  Context: the owner worker.
 */
bool fb_place_sleep_stats_due(const struct fb_place_view *v, int w,
			      bool has_work);

/*
 * fb_place_decay_blocked - decay_blocked(@w) of doc/scheduler.md 6.2.1: stamp
 * @now_tick (first with BLOCKED_LOAD_RATELIMIT, last without), bring w's
 * averages to @now_ns and clear has_blocked_load once its averages are 0.
 * Counts in w->nr_blocked_decays.  Return: w still has blocked load.
 * Context: w's rq lock.
 */
bool fb_place_decay_blocked(struct fb_pworker *w, uint64_t now_ns,
			    uint64_t now_tick);
/* The two halves of fb_place_decay_blocked() (place/blocked.c), for tests
 * of the order of rule 1 (doc/scheduler.md 6.2.1). */
void fb_place_blocked_stamp(struct fb_pworker *w, uint64_t now_tick);
bool fb_place_blocked_decay(struct fb_pworker *w, uint64_t now_ns);
/*
 * fb_place_refresh_sleeping - rule 1 (doc/scheduler.md 6.2.1) for sleeping
 * worker @i: decay at most once per tick (per blocked_min_ticks).
 * Return: i still has blocked load.
 * Context: i's rq lock (its decay may run).
 */
bool fb_place_refresh_sleeping(const struct fb_place_view *v, int i,
			       uint64_t now_ns, uint64_t now_tick);
/*
 * fb_place_blocked_due - rule 1's rate limit for worker @i at @now_tick:
 * its stamp is at least blocked_min_ticks (at least 1) old.  Reads the
 * stamp relaxed, so a refresher may ask before it takes i's rq lock and
 * skip a sleeper that another refresher has just stamped (and is
 * decaying).  Context: any; a hint without the lock, exact with it.
 */
bool fb_place_blocked_due(const struct fb_place_view *v, int i,
			  uint64_t now_tick);

/* Sleep entry and exit of worker @w (owner; doc/scheduler.md 1.8). */
void fb_place_sleep_enter(const struct fb_place_view *v, int w);
void fb_place_sleep_exit(const struct fb_place_view *v, int w);
/*
 * fb_place_kick_flags - the FB_KICK_* flags the tick of awake worker @w asks
 * for at @now_ns (0: none; doc/scheduler.md 1.8).  Pure.
 */
unsigned fb_place_kick_flags(const struct fb_place_view *v, int w,
			     uint64_t now_ns);
/*
 * fb_place_kick - kick(@flags) from @w (doc/scheduler.md 1.8): returns the
 * sleeping worker the caller must wake, or -1 (no sleeper, or it had a kick
 * pending).
 * Moves the global next_balance by @tick_ns for BALANCE.
 */
int fb_place_kick(const struct fb_place_view *v, int w, unsigned flags,
		  uint64_t now_ns, uint64_t tick_ns);

/* What one sleeper pass did (doc/scheduler.md 1.8). */
struct fb_nohz_result {
	unsigned nr_refreshed; /* sleepers whose blocked load was decayed */
	unsigned nr_balanced;  /* sleepers balanced */
	bool aborted;	       /* the pass stopped: the worker got work */
};

/*
 * fb_place_nohz_pass - doc/scheduler.md 1.8: worker @self, kicked with
 * @flags (or running rule 4 of doc/scheduler.md 6.2.4 with FB_KICK_STATS),
 * refreshes and balances every sleeping worker.
 * Context: @self, no rq lock held.
 */
void fb_place_nohz_pass(const struct fb_place_view *v, int self, unsigned flags,
			uint64_t now_ns, uint64_t now_tick, uint64_t tick_ns,
			const struct fb_balance_ops *ops,
			struct fb_nohz_result *res);
/*
 * fb_place_rebalance - periodic balance (doc/scheduler.md 1.6.8) of worker @w's
 * domains at @now_ns (kernel sched_balance_domains): each level whose interval
 * has elapsed is balanced through ops->balance, bottom up; SERIALIZE levels
 * only while the global flag can be taken; max_newidle_lb_cost decays and
 * w.max_idle_balance_cost and w.next_balance are updated.  It does not decay
 * w's blocked load (fb_place_tick() does, rule 5 of doc/scheduler.md 6.2.5).
 * Return: fibers pulled.  Context: @w, or the balancing worker for a sleeping
 * @w (doc/scheduler.md 1.8); no rq lock held.
 */
int fb_place_rebalance(const struct fb_place_view *v, int w, uint64_t now_ns,
		       uint64_t tick_ns, enum fb_idle_kind kind,
		       const struct fb_balance_ops *ops);
/*
 * fb_place_tick - what awake worker @w does at every tick (doc/scheduler.md
 * 1.6.8, 1.8, 6.2.5): when now >= w.next_balance, decay its own blocked load
 * once and run fb_place_rebalance(); then decide and record a kick for the
 * sleepers.  Return: the sleeping worker the caller must wake, or -1.
 * Context: @w, no rq lock held.
 */
int fb_place_tick(const struct fb_place_view *v, int w, uint64_t now_ns,
		  uint64_t now_tick, uint64_t tick_ns,
		  const struct fb_balance_ops *ops);

#endif /* FB_PLACE_H */
