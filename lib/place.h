/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * place.h - the placement layer's view of workers and fibers.
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

#include "common.h"
#include "place-pelt.h"
#include "topo.h"

/*
 * Worker state word (also the futex the worker sleeps on).  The owner
 * stores RUNNING, POLLING or SLEEPING; wakers only OR in NEED_RESCHED.
 *   RUNNING   the worker runs fibers or scheduler code; it will look at its
 *             wakelist and run queue at its next scheduling point.
 *   POLLING   idle, spinning on its wakelist/run queue: noticed for free.
 *   SLEEPING  idle in futex_wait: costs one futex wake.
 */
enum {
	FB_WS_RUNNING = 0,
	FB_WS_POLLING = 1,
	FB_WS_SLEEPING = 2,
	FB_WS_MASK = 3,
	FB_WS_NEED_RESCHED = 4,
};

/* Per-worker fields others read or write; each group on its own line. */
struct fb_pworker {
	atomic_uint state fb_cacheline_aligned; /* FB_WS_*; see above */
	atomic_uint ttwu_pending fb_cacheline_aligned; /* wakelist handoff in
				flight; set by wakers, cleared by owner */
	atomic_int nr_running fb_cacheline_aligned; /* runnable fibers on the
				worker, the running one included; rq lock
				for writes, relaxed reads for placement */
	int id;
	uint64_t idle_stamp;	/* ns when it went idle, 0 when busy; owner */

	/* Load tracking (heuristics.md 1.3): sums of the fibers attached to
	 * the worker, blocked ones included.  Written under the rq lock (or by
	 * a balancer holding it); read without locks by placement. */
	struct fb_pelt avg;
	unsigned long runnable_weight; /* sum of runnable fibers' weights */
	uint64_t avg_idle;	/* ns; 1.3, initial 1 ms */
	uint64_t max_idle_balance_cost; /* ns; initial 500 us */
	uint64_t next_balance;	/* ns; 1.6 */
	/* Blocked load (section 6, 1.8). */
	atomic_bool has_blocked_load;
	_Atomic uint64_t last_blocked_load_update_tick;
	atomic_uint kick_flags;	/* FB_KICK_*; 1.8 */
	atomic_int push_target;	/* active balance request, -1 none; 1.6 */
	uint64_t rng;		/* per-worker PRNG (NI_RANDOM); owner */
};

/* Kick flags of 1.8. */
enum { FB_KICK_STATS = 1, FB_KICK_BALANCE = 2, FB_KICK_NEXT = 4 };

/* fb_worker_is_idle - no fiber running or queued, no handoff in flight. */
static inline bool fb_worker_is_idle(const struct fb_pworker *w)
{
	return fb_load_relaxed(&w->nr_running) == 0 &&
	       fb_load_relaxed(&w->ttwu_pending) == 0;
}

/* Per-fiber placement record (heuristics.md 1.2).  Written by whoever owns
 * the fiber at the time (its worker, or the waker that made it runnable). */
struct fb_pfiber {
	cpu_set_t *allowed;	/* NULL: every worker */
	int nr_allowed;		/* 0 when allowed == NULL */
	bool custom_affinity;
	int prev;		/* worker it last ran on, -1 before */
	int recent_used;	/* 1.4 select_idle_sibling step 3, -1 none */
	unsigned long weight;	/* 1024 */
	struct fb_pelt avg;	/* its own averages */
	unsigned int wakee_flips; /* 1.4 record_wakee */
	const struct fb_pfiber *last_wakee;
	uint64_t wakee_flip_decay_ns;
	uint64_t last_ran_ns;	/* cache-hot test (1.6) */
};

/* Runtime-wide placement state (1.2 "Global"). */
struct fb_place_global {
	atomic_bool overloaded;	/* some worker has > 1 runnable fiber */
	struct fb_wmask sleeping; /* sleeping workers; bits set/cleared by
				     their owner with atomic ops on words */
	atomic_int nr_sleeping;
	atomic_bool has_blocked;
	_Atomic uint64_t next_blocked;	/* ns */
	_Atomic uint64_t next_balance;	/* ns */
	atomic_bool needs_update;
};

static inline bool fb_pfiber_allows(const struct fb_pfiber *pf, int w)
{
	return pf->allowed == NULL || CPU_ISSET_S((size_t)w, CPU_ALLOC_SIZE(1024),
						  pf->allowed);
}

/*
 * The view a decision reads: the worker snapshot (@w[i] points at worker
 * i's fields), the domain view (topo.h; NULL before the runtime publishes
 * one: decisions then treat all workers as one LLC) and the global state.
 * Tests build one by hand for a synthetic topology, with no threads.
 */
struct fb_place_view {
	int nr_workers;
	struct fb_pworker *const *w;
	const struct fb_sched_view *topo;
	struct fb_place_global *g;
};

#define FB_MAX_WORKERS 1024

/*
 * fb_place_select_wake - the worker a woken fiber should run on.
 * @this is the waker's worker or -1 for a foreign thread.  Always an allowed
 * worker.  Context: any; reads the view without locks.
 */
int fb_place_select_wake(const struct fb_place_view *v,
			 const struct fb_pfiber *pf, int this, unsigned flags);
/* fb_place_select_create - the worker a new fiber starts on. */
int fb_place_select_create(const struct fb_place_view *v,
			   const struct fb_pfiber *pf, int this);
/*
 * fb_place_use_wakelist - deliver a wakeup of @pf onto worker @t through
 * @t's wakelist (true) or by locking its run queue (false); @this is the
 * waker's worker or -1 (heuristics.md section 3, TTWU_QUEUE).
 */
bool fb_place_use_wakelist(const struct fb_place_view *v,
			   const struct fb_pfiber *pf, int t, int this);
/* fb_place_pick_victim - an idle @this chooses a worker to steal from, or -1. */
int fb_place_pick_victim(const struct fb_place_view *v, int this);

/* ---- wake path (place-wake.c; issue #5) ---- */

/* ---- creation and balancing (place-create.c, place-balance.c; issue #4) ---- */

#endif /* FB_PLACE_H */
