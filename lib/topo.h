/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * topo.h - the machine's shape and the scheduling-domain view built on it.
 *
 * Two objects live here.  struct fb_topo is the loaded hwloc topology (the
 * real machine restricted to the PUs the process may use, an hwloc synthetic
 * description or an hwloc XML file), with workers in hwloc logical PU order,
 * thread binding and NUMA nodes.  struct fb_sched_view is the domain
 * hierarchy of doc/scheduler.md 1.1 built from it: for every worker its
 * domains bottom up (SMT, CLS, LLC, PKG, NODE, NUMA levels), their groups,
 * flags and balancing parameters, plus O(1) per-worker shortcuts (LLC id,
 * share id, node, priority) and one struct fb_llc_shared per LLC.
 *
 * The view is immutable once built, except for the balancing fields of the
 * domains (see struct fb_domain) and the atomics of struct fb_llc_shared.
 * It is published with RCU (topo-rcu.c): readers bracket their use with
 * fb_topo_read_lock() / fb_topo_read_unlock() and get it with
 * fb_topo_view_get(); a rebuild (a feature such as ASYM_PACKING switched at
 * run time) publishes a new view and frees the old one after a grace period.
 */
#ifndef FB_TOPO_H
#define FB_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "atomic.h"
#include "common.h"

struct fb_topo;

/*
 * fb_topo_open - load the topology.  @spec is NULL/"" for the real machine
 * (restricted to the PUs the process may use), an hwloc synthetic string, or
 * the path of an hwloc XML file.  On failure writes a message into @err
 * naming LIBFIBER_TOPOLOGY, the value and hwloc's complaint, which it gets
 * by loading @spec again in a child process (topo.c); with @errlen 0 it
 * writes nothing and starts no child.
 * Context: any thread, before the runtime starts; starts no thread.
 * Return: 0 and *@tp; EINVAL for a bad @spec; ENOMEM.
 */
int fb_topo_open(struct fb_topo **tp, const char *spec, char *err,
		 size_t errlen);
/* fb_topo_open_named - fb_topo_open(), with @name in place of
 * LIBFIBER_TOPOLOGY in the message (e.g. "fiber_config.topology"). */
int fb_topo_open_named(struct fb_topo **tp, const char *spec, const char *name,
		       char *err, size_t errlen);
/* fb_topo_close - free @t (NULL is fine).  No view built from it may be
 * in use by then. */
void fb_topo_close(struct fb_topo *t);
/* Number of PUs, i.e. the default number of workers. */
int fb_topo_nr_pus(const struct fb_topo *t);
/* True when the topology is the machine the process runs on. */
bool fb_topo_is_real(const struct fb_topo *t);
/*
 * fb_topo_bind_self - pin the calling thread for worker @worker: to that PU
 * on a real topology, round-robin over the process's real PUs on a synthetic
 * one.  Worker w sits on PU (w mod nr_pus) when there are more workers than
 * PUs.  Return: 0 or an errno (binding is advice: callers log and go on).
 */
int fb_topo_bind_self(const struct fb_topo *t, int worker);
/* NUMA node (OS index) of worker @worker, or -1 when unknown.  On a real
 * machine this is also libnuma's numa_node_of_cpu() of the worker's PU. */
int fb_topo_worker_node(const struct fb_topo *t, int worker);

/*
 * What the domain builder reads about one PU (PU logical index).  Objects
 * are named by the logical index of their first PU; -1 when hwloc shows no
 * such object above the PU.
 */
struct fb_topo_pu {
	int core; /* Core */
	int cls;  /* cluster: a cache, Die or Group inside the LLC that
			   holds more than one core but not the whole LLC */
	int llc;  /* last-level cache: the outermost data cache */
	int pkg;  /* Package */
	int node; /* NUMA node, index 0..nr_nodes-1 (never -1) */
	int kind; /* CPU kind rank, higher is more efficient; 0 */
};

/* fb_topo_pu - the facts about PU @pu (0 <= @pu < nr_pus). */
const struct fb_topo_pu *fb_topo_pu(const struct fb_topo *t, int pu);
/* Number of NUMA nodes (at least 1). */
int fb_topo_nr_nodes(const struct fb_topo *t);
/* OS index of node @node (0..nr_nodes-1), as libnuma numbers it. */
int fb_topo_node_os(const struct fb_topo *t, int node);
/*
 * fb_topo_distance - relative distance from node @a to node @b (indices):
 * hwloc's latency matrix if the topology has one, else libnuma's
 * numa_distance() on a real machine, else 10 local and 20 remote.
 */
int fb_topo_distance(const struct fb_topo *t, int a, int b);
/* fb_topo_describe - one line such as "synthetic \"pack:2 ...\": 2 Package,
 * 2 NUMANode, ..., 16 PU" into @buf. */
void fb_topo_describe(const struct fb_topo *t, char *buf, size_t len);

/* ---- worker masks -------------------------------------------------------- */

#ifndef FB_MAX_WORKERS
#define FB_MAX_WORKERS 1024
#endif
#define FB_WMASK_WORDS (FB_MAX_WORKERS / 64)

/* A set of workers, fixed size (128 bytes for 1024 workers). */
struct fb_wmask {
	uint64_t bits[FB_WMASK_WORDS];
};

static inline bool fb_wmask_test(const struct fb_wmask *m, int w)
{
	return (m->bits[(unsigned)w / 64] >> ((unsigned)w % 64)) & 1;
}

static inline void fb_wmask_set(struct fb_wmask *m, int w)
{
	m->bits[(unsigned)w / 64] |= UINT64_C(1) << ((unsigned)w % 64);
}

static inline void fb_wmask_clear(struct fb_wmask *m, int w)
{
	m->bits[(unsigned)w / 64] &= ~(UINT64_C(1) << ((unsigned)w % 64));
}

static inline int fb_wmask_weight(const struct fb_wmask *m)
{
	int n = 0;

	for (int i = 0; i < FB_WMASK_WORDS; i++)
		n += __builtin_popcountll(m->bits[i]);
	return n;
}

/* fb_wmask_next - the first worker >= @w in @m, or -1. */
static inline int fb_wmask_next(const struct fb_wmask *m, int w)
{
	for (int i = w / 64; w >= 0 && i < FB_WMASK_WORDS; i++) {
		uint64_t b = m->bits[i];

		if (i == w / 64)
			b &= ~UINT64_C(0) << (w % 64);
		if (b)
			return i * 64 + __builtin_ctzll(b);
	}
	return -1;
}

static inline int fb_wmask_first(const struct fb_wmask *m)
{
	return fb_wmask_next(m, 0);
}

static inline bool fb_wmask_equal(const struct fb_wmask *a,
				  const struct fb_wmask *b)
{
	for (int i = 0; i < FB_WMASK_WORDS; i++)
		if (a->bits[i] != b->bits[i])
			return false;
	return true;
}

/* Iterate over the workers of @m in increasing order. */
#define fb_wmask_for_each(w, m)                                                \
	for ((w) = fb_wmask_first(m); (w) >= 0;                                \
	     (w) = fb_wmask_next((m), (w) + 1))

/* ---- the domain view ------------------------------------------------------ */

/*
 * Domain flags (kernel SD_*; doc/scheduler.md 1.1.1).  BALANCE_CREATE
 * stands for the kernel's BALANCE_FORK and BALANCE_EXEC; BALANCE_WAKE does
 * not exist (wakeups take the fast path).
 */
#define FB_SD_BALANCE_NEWIDLE 0x0001u
#define FB_SD_BALANCE_CREATE 0x0002u
#define FB_SD_WAKE_AFFINE 0x0004u
#define FB_SD_SHARE_CAPACITY 0x0008u /* SMT siblings */
#define FB_SD_CLUSTER 0x0010u
#define FB_SD_SHARE_LLC 0x0020u
#define FB_SD_SERIALIZE 0x0040u
#define FB_SD_ASYM_PACKING 0x0080u
#define FB_SD_PREFER_SIBLING 0x0100u
#define FB_SD_NUMA 0x0200u
#define FB_SD_NR_FLAGS 10

/* fb_sd_flag_name - "SHARE_LLC" for FB_SD_SHARE_LLC (bit @bit). */
const char *fb_sd_flag_name(int bit);

/* Levels, bottom up.  NODE is the kernel's NODE level: the workers of one
 * NUMA node, without the NUMA flag; NUMA levels follow node distances. */
enum fb_level {
	FB_LEVEL_SMT,
	FB_LEVEL_CLS,
	FB_LEVEL_LLC,
	FB_LEVEL_PKG,
	FB_LEVEL_NODE,
	FB_LEVEL_NUMA,
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
 * access after the build is fb_read_once/fb_write_once (atomic.h): plain moves,
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

/* Build flags. */
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

	/* private to topo-domains.c and topo-rcu.c */
	struct fb_llc_block *llc_block;
	void *arena;
};

/*
 * fb_topo_view_build - build the domain view of @t for @nr_workers workers
 * (0: one per PU).  Pure: reads @t only, starts no thread, takes no lock.
 * Context: any thread.
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
 * @v not yet published; private to topo-rcu.c. */
bool fb_topo_llc_block_adopt(struct fb_sched_view *v,
			     const struct fb_sched_view *old);

/* ---- RCU publication (topo-rcu.c) --------------------------------------- */

/* The published view; NULL before the first publication.  Written only by
 * fb_topo_view_publish() (release); read with fb_topo_view_get(). */
extern struct fb_sched_view *_Atomic fb_topo_view_current;

/*
 * Worker readers (QSBR, see topo-rcu.c).  A worker thread that went online
 * reads with free sections and reports quiescent states instead: its
 * counter in fb_topo_qs[its id] is odd while it is online and awake, even
 * while it is offline or asleep, and grows by 2 at every scheduling point.
 * Only the owner worker writes it.
 */
struct fb_topo_qs {
	_Atomic unsigned long ctr fb_cacheline_aligned; /* owner worker;
				   release where it ends read sections */
};
extern struct fb_topo_qs fb_topo_qs[FB_MAX_WORKERS];
/* This thread is an online, awake worker: its read sections are free. */
extern __thread bool fb_topo_qsbr_reader
	__attribute__((tls_model("initial-exec")));

void fb_topo_read_lock_slow(void);
void fb_topo_read_unlock_slow(void);

/*
 * fb_topo_read_lock - enter a read-side section of the view.  On a worker
 * thread (fb_topo_worker_online) a compiler barrier; elsewhere a liburcu
 * read lock, which registers the calling thread on its first call (one
 * mutex round trip, then a thread-local test); the registration is dropped
 * when the thread exits.  Sections nest and are short: nothing inside may
 * park, switch fibers, pass a scheduling point (fb_topo_quiescent) or call
 * fb_topo_view_publish().  Lock and unlock must run on the same kernel
 * thread, so a fiber must not switch between them.
 * Context: any thread (worker, fiber, foreign pthread); never blocks except
 * for the first-call registration of a foreign thread.
 */
static inline void fb_topo_read_lock(void)
{
	if (fb_likely(fb_topo_qsbr_reader)) {
		__asm__ __volatile__("" ::: "memory");
		return;
	}
	fb_topo_read_lock_slow();
}

/* fb_topo_read_unlock - leave the section fb_topo_read_lock() opened. */
static inline void fb_topo_read_unlock(void)
{
	if (fb_likely(fb_topo_qsbr_reader)) {
		__asm__ __volatile__("" ::: "memory");
		return;
	}
	fb_topo_read_unlock_slow();
}

/* fb_topo_quiescent - worker @id holds no read section (a scheduling
 * point).  A load and a release store of its own counter.
 * Context: worker @id only, outside read sections. */
static inline void fb_topo_quiescent(int id)
{
	_Atomic unsigned long *c = &fb_topo_qs[id].ctr;

	fb_store_release(c, fb_load_relaxed(c) + 2);
}

/*
 * fb_topo_worker_online - make the calling thread worker @id's reader: its
 * read sections become free and publishers wait for its quiescent states.
 * Without membarrier(2) it stays a liburcu reader.  fb_topo_worker_offline
 * undoes it; a worker goes offline before its thread exits.
 * Context: the worker's thread, outside read sections, once per start.
 */
void fb_topo_worker_online(int id);
void fb_topo_worker_offline(int id);

/*
 * fb_topo_worker_sleep - worker @id is about to block for a long time (the
 * idle sleep): publishers stop waiting for it.  Until
 * fb_topo_worker_wake(), its read sections (timers and I/O events handled
 * around the sleep) go through liburcu like a foreign thread's.
 * Context: worker @id, outside read sections; no-op if not online.
 */
void fb_topo_worker_sleep(int id);
void fb_topo_worker_wake(int id);

/* fb_topo_view_get - the current view.  Context: inside a read-side
 * section; the view stays valid until the matching unlock. */
static inline struct fb_sched_view *fb_topo_view_get(void)
{
	return fb_load_acquire(&fb_topo_view_current);
}

/*
 * fb_topo_view_publish - make @v (or NULL) the current view, wait for a
 * grace period and free the view it replaced.  A new view with the same
 * LLCs as the old one takes over the old fb_llc_shared objects, so their
 * counters survive the rebuild.  Publishers are serialised by a mutex.
 * Context: any thread outside a read-side section; blocks for one grace
 * period: until every foreign reader left its section and every other
 * online worker passed a scheduling point or slept (the caller's worker
 * runs no fiber meanwhile; a fiber that never yields delays it).
 */
void fb_topo_view_publish(struct fb_sched_view *v);

/*
 * fb_topo_view_rebuild - build a view of @t for @nr_workers with @flags and
 * publish it (for a feature switch such as ASYM_PACKING).  On error the
 * current view stays.  Context: as fb_topo_view_publish().
 * Return: 0; EINVAL, ENOMEM as fb_topo_view_build().
 */
int fb_topo_view_rebuild(const struct fb_topo *t, int nr_workers,
			 unsigned flags);

/* fb_topo_rcu_unregister_thread - drop the calling thread's liburcu
 * registration now (it is otherwise dropped at thread exit).  Context: a
 * thread outside any read-side section; harmless if never registered. */
void fb_topo_rcu_unregister_thread(void);
/* fb_topo_atfork_child - the forked child's RCU state (topo-rcu.c): no
 * reader of the parent is waited for, no view is freed.  Context: the
 * child's only thread, in the atfork handler. */
void fb_topo_atfork_child(void);

#endif /* FB_TOPO_H */
