/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * view.h - the scheduling-domain view built on a topology (domains.c):
 * struct fb_sched_view is the domain hierarchy of doc/scheduler.md 1.1,
 * for every worker its domains bottom up (SMT, CLS, LLC, PKG, NODE, NUMA
 * levels), their groups, flags and balancing parameters, plus O(1)
 * per-worker shortcuts (LLC id, share id, node, priority) and one struct
 * fb_llc_shared per LLC.
 *
 * The view is immutable once built, except for the balancing fields of the
 * domains (see struct fb_domain) and the atomics of struct fb_llc_shared.
 * It is published with RCU (rcu.h).
 */
#ifndef FB_TOPO_VIEW_H
#define FB_TOPO_VIEW_H

#include "topo/topo.h"

/* ---- the domain view ------------------------------------------------------ */

/*
 * Domain flags (kernel SD_*; doc/scheduler.md 1.1.1), one line each: the
 * bits and their names come from this list.  BALANCE_CREATE stands for
 * the kernel's BALANCE_FORK and BALANCE_EXEC; BALANCE_WAKE does not exist
 * (wakeups take the fast path).
 */
#define FB_SD_FLAGS(X)                                                         \
	X(BALANCE_NEWIDLE)                                                     \
	X(BALANCE_CREATE)                                                      \
	X(WAKE_AFFINE)                                                         \
	X(SHARE_CAPACITY) /* SMT siblings */                                   \
	X(CLUSTER)                                                             \
	X(SHARE_LLC)                                                           \
	X(SERIALIZE)                                                           \
	X(ASYM_PACKING)                                                        \
	X(PREFER_SIBLING)                                                      \
	X(NUMA)
enum {
#define FB_SD_BIT(name) FB_SD_BIT_##name,
	FB_SD_FLAGS(FB_SD_BIT)
#undef FB_SD_BIT
		FB_SD_NR_FLAGS
};
#define FB_SD_FLAG(name) (1u << FB_SD_BIT_##name)
#define FB_SD_BALANCE_NEWIDLE FB_SD_FLAG(BALANCE_NEWIDLE)
#define FB_SD_BALANCE_CREATE FB_SD_FLAG(BALANCE_CREATE)
#define FB_SD_WAKE_AFFINE FB_SD_FLAG(WAKE_AFFINE)
#define FB_SD_SHARE_CAPACITY FB_SD_FLAG(SHARE_CAPACITY)
#define FB_SD_CLUSTER FB_SD_FLAG(CLUSTER)
#define FB_SD_SHARE_LLC FB_SD_FLAG(SHARE_LLC)
#define FB_SD_SERIALIZE FB_SD_FLAG(SERIALIZE)
#define FB_SD_ASYM_PACKING FB_SD_FLAG(ASYM_PACKING)
#define FB_SD_PREFER_SIBLING FB_SD_FLAG(PREFER_SIBLING)
#define FB_SD_NUMA FB_SD_FLAG(NUMA)

/* fb_sd_flag_name - "SHARE_LLC" for FB_SD_SHARE_LLC (bit @bit). */
const char *fb_sd_flag_name(int bit);

/*
 * Levels, bottom up, one line each (doc/scheduler.md 1.1): the name, the
 * flags a level of that kind has besides the common ones (domains.c),
 * its imbalance_pct (a group must be this many percent busier than
 * another before load moves) and cache_nice_tries (failed balances
 * tolerated before a cache-hot fiber moves), as the kernel's sd_init()
 * gives them.  NODE is the kernel's NODE level: the workers of one NUMA
 * node, without the NUMA flag; NUMA levels follow node distances.
 */
#define FB_LEVELS(X)                                                           \
	X(SMT, FB_SD_SHARE_CAPACITY | FB_SD_SHARE_LLC, 110, 0)                 \
	X(CLS, FB_SD_CLUSTER | FB_SD_SHARE_LLC, 117, 1)                        \
	X(LLC, FB_SD_SHARE_LLC, 117, 1)                                        \
	X(PKG, 0, 117, 1)                                                      \
	X(NODE, 0, 117, 1)                                                     \
	X(NUMA, FB_SD_NUMA | FB_SD_SERIALIZE, 117, 2)
enum fb_level {
#define FB_LEVEL_ENUM(name, flags, pct, tries) FB_LEVEL_##name,
	FB_LEVELS(FB_LEVEL_ENUM)
#undef FB_LEVEL_ENUM
};
/* The imbalance_pct of each level as a constant: FB_LEVEL_PCT_LLC... */
enum {
#define FB_LEVEL_PCT(name, flags, pct, tries) FB_LEVEL_PCT_##name = pct,
	FB_LEVELS(FB_LEVEL_PCT)
#undef FB_LEVEL_PCT
};

#define FB_RECLAIM_DISTANCE                                                    \
	30		     /* kernel RECLAIM_DISTANCE: creation and
				   wake-affine do not cross a farther level */
#define FB_SD_BUSY_FACTOR 16 /* kernel sd_init busy_factor */
/* Starting newly-idle statistics of a domain (NI_RANDOM, doc/scheduler.md
 * 6.2.6). */
#define FB_NEWIDLE_CALLS_INIT 512
#define FB_NEWIDLE_SUCCESS_INIT 256
#define FB_NEWIDLE_RATIO_INIT 512

/* Shared, per-group state: written by any worker that balances. */
struct fb_group_state {
	atomic_int imbalanced; /* affinity stopped a lower level from
				   balancing (doc/scheduler.md 1.6.7);
				   relaxed loads and stores */
};

/*
 * A group: the span of a child domain inside a domain.  Immutable; groups
 * are shared by every worker whose domain has the same span.
 */
struct fb_sched_group {
	struct fb_wmask span;
	int weight;		/* workers in span */
	int nr_cores;		/* distinct cores in span */
	unsigned long capacity; /* 1024 x weight */
	unsigned flags;		/* flags of the child domain; 0 for a single
				   worker whose lower levels were removed */
	int asym_prefer;	/* highest-priority worker of span */
	struct fb_group_state *state;
};

/*
 * One domain of one worker.  Everything above "balancing state" is immutable.
 * The balancing fields are written only by the owner worker, or by the
 * balancing worker for a SLEEPING owner (doc/scheduler.md 1.8), always inside a
 * read-side section of this view; they start afresh in a rebuilt view.  The two
 * writers can overlap (the owner wakes while its balancer runs), so every
 * access after the build is fb_read_once/fb_write_once (base/atomic.h): plain moves,
 * no data race, an update may be lost.
 */
struct fb_domain {
	struct fb_domain *parent; /* NULL at the top */
	struct fb_domain *child;  /* NULL at the bottom */
	const char *name;	  /* "SMT", "CLS", "LLC", "PKG", "NODE",
					   "NUMA" */
	enum fb_level kind;
	int level;	/* 0 at the bottom, after removal */
	int numa_level; /* 1.. for NUMA levels, else 0 */
	int distance;	/* NUMA: the level's distance; else 0 */
	unsigned flags; /* FB_SD_* */
	struct fb_wmask span;
	int span_weight;
	const struct fb_sched_group *groups;
	int nr_groups;
	int local_group; /* index of the owner's group in @groups */
	int imbalance_pct;
	int cache_nice_tries;
	unsigned min_interval; /* ms, = span_weight */
	unsigned max_interval; /* ms, = 2 x span_weight */
	unsigned busy_factor;
	int imb_numa_nr; /* doc/scheduler.md 5.2.1 */

	/* balancing state (see above) */
	unsigned balance_interval; /* ms, starts at min_interval */
	unsigned nr_balance_failed;
	uint64_t last_balance;		 /* ns */
	uint64_t max_newidle_lb_cost;	 /* ns */
	uint64_t last_decay_max_lb_cost; /* ns */
	unsigned newidle_call;
	unsigned newidle_success;
	unsigned newidle_ratio;
};

/* Iterate over the groups of @d starting with the owner's (local) one. */
#define fb_domain_for_each_group(d, g, k)                                      \
	for ((k) = 0;                                                          \
	     (k) < (d)->nr_groups &&                                           \
	     ((g) = &(d)->groups[((d)->local_group + (k)) % (d)->nr_groups],   \
	     1);                                                               \
	     (k)++)

/* Iterate over the domains of worker @w of view @v, bottom up. */
#define fb_for_each_domain(v, w, d)                                            \
	for ((d) = (v)->sd[(w)]; (d); (d) = (d)->parent)

/*
 * One per LLC, on its own cache line (kernel sd_llc_shared).  Atomics,
 * relaxed: every field is a hint.
 */
struct fb_llc_shared {
	atomic_int nr_busy_workers; /* starts at the LLC size; -1 when a
					   worker starts to sleep, +1 when it
					   wakes (doc/scheduler.md 1.8) */
	atomic_int has_idle_cores;  /* doc/scheduler.md 2.2.3; starts at
					   0 */
	atomic_int nr_idle_scan;    /* SIS_UTIL, doc/scheduler.md 2.2.1;
					   starts at the LLC size: a full
					   scan until the first estimate */
} fb_cacheline_aligned;

/* Build flags.  FB_VIEW_ASYM_PACKING implies FB_VIEW_ASYM_SMT when two SMT
 * siblings have different CPU kinds (doc/scheduler.md 4.2.2). */
#define FB_VIEW_ASYM_PACKING                                                   \
	0x1u		      /* ASYM_PACKING on non-NUMA levels above
				     SMT (doc/scheduler.md 4.2.2, the x86
				     choice) */
#define FB_VIEW_ASYM_SMT 0x2u /* ... and on the SMT level (POWER) */

struct fb_llc_block;

/*
 * The view.  Per-worker arrays are indexed by worker id (0..nr_workers-1).
 */
struct fb_sched_view {
	int nr_workers;
	int nr_pus;	      /* of the topology; worker w sits on PU
				   w mod nr_pus */
	unsigned build_flags; /* FB_VIEW_* it was built with */
	bool has_smt;	      /* some core holds more than one worker */
	int nr_llcs;
	int nr_nodes;
	const int *node_os;  /* [nr_nodes] OS index of each node */
	const int *distance; /* [nr_nodes x nr_nodes] node distances */

	const int *llc_id;   /* first worker of the worker's LLC */
	const int *llc_size; /* workers in that LLC */
	const int *share_id; /* first worker of its cluster if it has a
				   CLS domain, else llc_id */
	const int *core_id;  /* first worker of its core */
	const int *node;     /* NUMA node, OS index */
	const int *prio;     /* asym priority: higher is preferred */
	const struct fb_wmask *const *core_span; /* SMT siblings, self included */
	const struct fb_wmask *const *llc_span; /* workers of its LLC */
	struct fb_domain *const *sd;	  /* bottom domain; NULL if none */
	struct fb_domain *const *sd_llc;  /* highest SHARE_LLC domain, NULL */
	struct fb_domain *const *sd_numa; /* lowest NUMA domain, NULL */
	struct fb_domain *const *sd_asym; /* highest ASYM_PACKING domain, NULL */
	struct fb_llc_shared *const *llc_shared;

	/* private to topo/domains.c and topo/rcu.c */
	struct fb_llc_block *llc_block;
	void *arena;
};

/*
 * fb_topo_view_build - build the domain view of @t for @nr_workers workers
 * (0: one per PU).  Pure but for raising the mask bound (fb_wmask_reserve):
 * reads @t only, starts no thread, takes no lock.  Context: any thread.
 * Return: 0 and *@out; EINVAL if @nr_workers is negative or above
 * FB_MAX_WORKERS; ENOMEM.
 */
int fb_topo_view_build(const struct fb_topo *t, int nr_workers, unsigned flags,
		       struct fb_sched_view **out);
/* fb_topo_view_free - free @v (NULL is fine) now.  Only for a view that was
 * never published, or one that fb_topo_view_publish() replaced and whose
 * grace period has passed (it frees those itself). */
void fb_topo_view_free(struct fb_sched_view *v);

/* fb_share_llc - do workers @a and @b share an LLC?  O(1), no lock. */
static inline bool fb_share_llc(const struct fb_sched_view *v, int a, int b)
{
	return v->llc_id[a] == v->llc_id[b];
}

/* fb_share_resources - do @a and @b share a cluster (else an LLC)? */
static inline bool fb_share_resources(const struct fb_sched_view *v, int a,
				      int b)
{
	return v->share_id[a] == v->share_id[b];
}

/* fb_asym_prefer - is @a's priority higher than @b's (doc/scheduler.md
 * 4.2.1)? */
static inline bool fb_asym_prefer(const struct fb_sched_view *v, int a, int b)
{
	return v->prio[a] > v->prio[b];
}

/* fb_topo_llc_block_adopt - let @v use @old's fb_llc_shared objects if both
 * views have the same workers and LLCs; returns whether it did.  Context:
 * @v not yet published; private to topo/rcu.c. */
bool fb_topo_llc_block_adopt(struct fb_sched_view *v,
			     const struct fb_sched_view *old);

#endif /* FB_TOPO_VIEW_H */
