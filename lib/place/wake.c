/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * wake.c - where a woken fiber runs, and how the wakeup is delivered
 * (doc/scheduler.md 1.4, 2 and 3).
 *
 * The model.  A wakeup is cheap only if it stays cheap: the waker decides in
 * a few cache misses, reading a snapshot of the workers (struct fb_pworker)
 * and the domain view without locks.  The decision has two halves:
 *
 *   target    wake_affine chooses between the waker's worker (@this) and
 *             the fiber's previous worker (@prev): an idle one first, else
 *             the lighter by load.  A waker that flips between many wakees
 *             (wake_wide), a foreign thread, or a waker the fiber may not
 *             run on leaves the target at @prev.
 *   sibling   select_idle_sibling looks for an idle worker sharing the
 *             target's LLC, cheapest candidates first: the target, @prev,
 *             the recently used worker, an SMT sibling of @prev, then a scan
 *             of the LLC whose depth SIS_UTIL derives from the LLC's
 *             utilisation (doc/scheduler.md 2.2.1).  When the
 *             has_idle_cores hint is set the scan looks for whole idle cores
 *             instead; an overloaded LLC then gets either no core scan
 *             (mainline), a scan of two cores (SIS_CORE_LIMIT, Abel Wu's
 *             mail) or a full one (SIS_CORE_FULL); doc/scheduler.md 2.2.2.
 *
 * Delivery (fb_place_use_wakelist) picks the target's wakelist for every
 * cross-LLC and foreign wakeup and, with TTWU_QUEUE_IDLE (Tianchen Ding's
 * mail), for an idle target of the same LLC; the waker's own worker is
 * always enqueued directly (doc/scheduler.md 3.2.1).
 *
 * Invariants.  The answer is always a worker the fiber allows: every
 * candidate is tested, and a target the fiber may no longer use (its mask
 * changed while it slept) falls back to the first allowed worker, idle ones
 * and @prev's LLC first.  Every input is a hint: nr_running, ttwu_pending,
 * the PELT averages and the per-LLC words may change while we read them,
 * which costs a worse placement, never correctness (placement is advice,
 * doc/design.md 6).  Hence relaxed loads everywhere, and the two per-LLC
 * words are stored only when their value changes, so that a wake storm does
 * not bounce the line between the workers of an LLC.
 *
 * Without a domain view (the runtime before it publishes one) every worker
 * counts as one LLC without SMT: no idle-core hint, a full scan.
 *
 * Alternatives rejected.  A global idle-worker mask (one atomic word set
 * per idle entry) would make the scan O(1) but puts one more shared line on
 * every idle entry and exit; the kernel dropped that approach for the same
 * reason, and the bounded scan keeps the cost small on large LLCs.  Scanning
 * for an idle worker without SMT awareness would stack two fibers on one
 * core while another core is completely idle, hence the core scan.
 */
#include "place/place.h"

/* ---- helpers on the view ------------------------------------------------ */

static bool is_idle(const struct fb_place_view *v, int w)
{
	return fb_worker_is_idle(v->w[w]);
}

static bool valid(const struct fb_place_view *v, int w)
{
	return w >= 0 && w < v->nr_workers;
}

static bool same_llc(const struct fb_place_view *v, int a, int b)
{
	return !v->topo || fb_share_llc(v->topo, a, b);
}

static bool same_share(const struct fb_place_view *v, int a, int b)
{
	return !v->topo || fb_share_resources(v->topo, a, b);
}

static int llc_size(const struct fb_place_view *v, int w)
{
	return v->topo ? v->topo->llc_size[w] : v->nr_workers;
}

/* llc_span - @w's LLC: the view's mask, or all workers built in @m when
 * there is no domain view. */
static const struct fb_wmask *llc_span(const struct fb_place_view *v, int w,
				       struct fb_wmask *m)
{
	if (v->topo)
		return v->topo->llc_span[w];
	/* the bound first: every word set below is zeroed */
	if ((v->nr_workers + 63) / 64 > fb_wmask_words())
		fb_wmask_reserve(v->nr_workers);
	fb_wmask_zero(m);
	for (int i = 0; i < v->nr_workers; i++)
		fb_wmask_set(m, i);
	return m;
}

/* ---- wake_affine (doc/scheduler.md 1.4.1) ------------------------------- */

/*
 * record_wakee - @waker wakes @pf: count a flip when it wakes another fiber
 * than last time; the count halves once per FB_WAKEE_FLIP_DECAY_NS.
 */
static void record_wakee(struct fb_pfiber *waker, const struct fb_pfiber *pf,
			 uint64_t now_ns)
{
	if (now_ns > waker->wakee_flip_decay_ns + FB_WAKEE_FLIP_DECAY_NS) {
		waker->wakee_flips >>= 1;
		waker->wakee_flip_decay_ns = now_ns;
	}
	if (waker->last_wakee != pf) {
		waker->last_wakee = pf;
		waker->wakee_flips++;
	}
}

/*
 * wake_wide - a 1:N relation (one waker feeding many wakees, or the
 * reverse) larger than the LLC: spread instead of pulling to the waker.
 * With hi >= lo the two flip counts and k the LLC size, wide iff
 * lo >= k and hi >= lo x k.
 */
static bool wake_wide(const struct fb_place_view *v, const struct fb_pfiber *pf,
		      const struct fb_pfiber *waker, int this)
{
	unsigned int hi = waker ? waker->wakee_flips : 0;
	unsigned int lo = pf->wakee_flips, k = (unsigned int)llc_size(v, this);

	if (hi < lo) {
		unsigned int t = hi;

		hi = lo;
		lo = t;
	}
	return lo >= k && (uint64_t)hi >= (uint64_t)lo * k;
}

/* affine_idle - WA_IDLE: @this, @prev, or -1 when idleness decides nothing. */
static int affine_idle(const struct fb_place_view *v, int this, int prev,
		       bool sync, bool poller)
{
	if (poller && fb_feat(WA_POLLER) && is_idle(v, this))
		return this;
	if (is_idle(v, this) && same_llc(v, this, prev))
		return is_idle(v, prev) ? prev : this;
	if (sync && fb_load_relaxed(&v->w[this]->nr_running) == 1)
		return this;
	if (is_idle(v, prev))
		return prev;
	return -1;
}

/*
 * affine_weight - WA_WEIGHT: @this iff its load with the wakee added (and
 * a sync waker taken out) is below @prev's load without it; WA_BIAS weighs
 * @prev by half the domain's imbalance margin:
 *	this_eff x 100 < prev_eff x (100 + (pct - 100) / 2).
 * All workers have capacity 1024, so capacities drop out.
 */
static int affine_weight(const struct fb_place_view *v, int pct,
			 const struct fb_pfiber *pf,
			 const struct fb_pfiber *waker, int this, int prev,
			 bool sync)
{
	int64_t task = (int64_t)pf->avg.load_avg;
	int64_t this_eff = (int64_t)fb_pelt_load(&v->w[this]->avg);
	int64_t prev_eff = (int64_t)fb_pelt_load(&v->w[prev]->avg) - task;

	if (sync && waker) {
		int64_t cur = (int64_t)waker->avg.load_avg;

		if (cur > this_eff)
			return this;
		this_eff -= cur;
	}
	this_eff += task;
	if (fb_feat(WA_BIAS)) {
		this_eff *= 100;
		prev_eff *= 100 + (pct - 100) / 2;
	}
	if (sync)
		prev_eff += 1;
	return this_eff < prev_eff ? this : -1;
}

static int wake_affine(const struct fb_place_view *v, int pct,
		       const struct fb_pfiber *pf,
		       const struct fb_pfiber *waker, int this, int prev,
		       bool sync, bool poller)
{
	int t = -1;

	if (fb_feat(WA_IDLE))
		t = affine_idle(v, this, prev, sync, poller);
	if (t < 0 && fb_feat(WA_WEIGHT))
		t = affine_weight(v, pct, pf, waker, this, prev, sync);
	return t == this ? this : prev;
}

/*
 * wake_target - walk @this's domains bottom up to the first wake-affine one
 * that holds @prev and let wake_affine choose there; else @prev.
 */
static int wake_target(const struct fb_place_view *v,
		       const struct fb_pfiber *pf,
		       const struct fb_pfiber *waker, int this, int prev,
		       unsigned flags)
{
	bool sync = flags & FB_PLACE_WF_SYNC;
	bool poller = flags & FB_PLACE_WF_POLLER;
	const struct fb_domain *d;

	if (this < 0 || this == prev || !fb_pfiber_allows(pf, this) ||
	    wake_wide(v, pf, waker, this))
		return prev;
	if (!v->topo)
		return wake_affine(v, FB_LLC_IMBALANCE_PCT, pf, waker, this,
				   prev, sync, poller);
	fb_for_each_domain (v->topo, this, d) {
		if ((d->flags & FB_SD_WAKE_AFFINE) &&
		    fb_wmask_test(&d->span, prev))
			return wake_affine(v, d->imbalance_pct, pf, waker, this,
					   prev, sync, poller);
	}
	return prev;
}

/* ---- the LLC scan (doc/scheduler.md 2.2.2) ------------------------------ */

struct scan {
	const struct fb_place_view *v;
	const struct fb_pfiber *pf;
	struct fb_wmask *cpus; /* candidates left: LLC & allowed */
	bool core;	       /* looking for whole idle cores */
	bool limited;	       /* the core scan has a budget (SIS_CORE_LIMIT) */
	bool stop;	       /* the budget ran out */
	int budget;	       /* probes (cores when limited) left; -1: no
				  bound */
	int fallback;	       /* first idle allowed worker of a busy core */
	struct fb_wake_result *res;
};

/*
 * scan_core - inspect the core of candidate @w once.  Returns @w if every
 * worker of the core is idle; remembers the first idle allowed one
 * otherwise.  Siblings outside the mask count for idleness, as they share
 * the core's execution resources.
 */
static int scan_core(struct scan *s, int w)
{
	const struct fb_wmask *core = s->v->topo->core_span[w];
	bool all = true;
	int c;

	fb_wmask_for_each (c, core) {
		s->res->probes++;
		if (!is_idle(s->v, c)) {
			all = false;
			if (s->fallback >= 0)
				break;
			continue;
		}
		if (s->fallback < 0 && fb_pfiber_allows(s->pf, c))
			s->fallback = c;
	}
	fb_wmask_for_each (c, core) {
		fb_wmask_clear(s->cpus, c);
	}
	return all ? w : -1;
}

/* scan_one - look at candidate @w within the budget; -1 if not taken. */
static int scan_one(struct scan *s, int w)
{
	if (s->core) {
		if (s->limited) {
			if (s->budget == 0) {
				s->res->cut_core_limit = true;
				s->stop = true;
				return -1;
			}
			s->budget--;
		}
		return scan_core(s, w);
	}
	if (s->budget == 0) {
		s->res->cut_util = true;
		s->stop = true;
		return -1;
	}
	if (s->budget > 0)
		s->budget--;
	s->res->probes++;
	return is_idle(s->v, w) ? w : -1;
}

/*
 * scan_span - the candidates of @span, starting after @target and wrapping
 * around (so that concurrent wakers starting from different targets do not
 * all hit the same first idle worker).
 */
static int scan_span(struct scan *s, const struct fb_wmask *span, int target)
{
	int start = target + 1 < s->v->nr_workers ? target + 1 : 0;

	for (int pass = 0; pass < 2; pass++) {
		int lo = pass ? 0 : start, hi = pass ? start : s->v->nr_workers;

		for (int w = fb_wmask_next(span, lo); w >= 0 && w < hi;
		     w = fb_wmask_next(span, w + 1)) {
			int i;

			if (!fb_wmask_test(s->cpus, w))
				continue;
			i = scan_one(s, w);
			if (i >= 0 || s->stop)
				return i;
		}
	}
	return -1;
}

/* cluster_span - @target's cluster when a CLS level exists below its LLC. */
static const struct fb_wmask *cluster_span(const struct fb_place_view *v,
					   int target)
{
	const struct fb_domain *d;

	if (!v->topo)
		return NULL;
	fb_for_each_domain (v->topo, target, d) {
		if (d->flags & FB_SD_CLUSTER)
			return &d->span;
		if (!(d->flags & FB_SD_SHARE_LLC))
			break;
	}
	return NULL;
}

/*
 * scan_budget - the scan's budget from SIS_UTIL's depth n, or false when
 * there is to be no scan at all.  doc/scheduler.md 2.2.2:
 *	no hint:   n probes, none when n == 0;
 *	hint set:  unbounded when n > 0; when n == 0 two cores with
 *	           SIS_CORE_LIMIT, unbounded with SIS_CORE_FULL, else none
 *	           (mainline).
 */
static bool scan_budget(struct scan *s, int target)
{
	int n;

	s->budget = -1;
	if (!fb_feat(SIS_UTIL))
		return true;
	n = s->v->topo ?
		    fb_load_relaxed(
			    &s->v->topo->llc_shared[target]->nr_idle_scan) :
		    s->v->nr_workers;
	if (s->core && n == 0) {
		if (fb_feat(SIS_CORE_LIMIT)) {
			s->budget = FB_SIS_CORE_LIMIT_NR;
			s->limited = true;
		} else if (!fb_feat(SIS_CORE_FULL)) {
			s->res->cut_util = true;
			return false;
		}
	} else if (!s->core) {
		if (n == 0) {
			s->res->cut_util = true;
			return false;
		}
		s->budget = n;
	}
	return true;
}

/*
 * select_idle_cpu - an idle core (@core) or idle worker of @target's LLC
 * that @s->pf allows, or -1.  doc/scheduler.md 2.2.2: the bounded idle scan
 * (Abel Wu's mail).
 */
static int select_idle_cpu(struct scan *s, int target)
{
	const struct fb_place_view *v = s->v;
	const struct fb_wmask *cls = cluster_span(v, target), *llc;
	struct fb_wmask all, cpus;
	int w, i;

	/* On the stack, and only the words in use: a wakeup with a few
	 * workers copies a word, not the whole mask. */
	llc = llc_span(v, target, &all);
	fb_wmask_copy(&cpus, llc);
	s->cpus = &cpus;
	fb_wmask_for_each (w, llc) {
		if (!fb_pfiber_allows(s->pf, w))
			fb_wmask_clear(s->cpus, w);
	}
	if (!scan_budget(s, target))
		return -1;
	i = -1;
	if (cls) {
		i = scan_span(s, cls, target);
		fb_wmask_for_each (w, cls) {
			fb_wmask_clear(s->cpus, w);
		}
	}
	if (i < 0 && !s->stop)
		i = scan_span(s, llc, target);
	if (i >= 0) {
		s->res->pick = s->core ? FB_PICK_IDLE_CORE : FB_PICK_SCAN_HIT;
		return i;
	}
	/* The hint was wrong, or the bounded scan saw no idle core: clear it,
	 * so that the next wakeups scan for workers only (doc/scheduler.md
	 * 2.2.3). */
	if (s->core &&
	    fb_load_relaxed(&v->topo->llc_shared[target]->has_idle_cores))
		fb_store_relaxed(&v->topo->llc_shared[target]->has_idle_cores,
				 0);
	if (s->fallback >= 0)
		s->res->pick = FB_PICK_SCAN_HIT;
	return s->fallback;
}

/* ---- select_idle_sibling (doc/scheduler.md 1.4.2) ----------------------- */

/* idle_smt_sibling - an idle allowed sibling of @prev other than itself. */
static int idle_smt_sibling(const struct fb_place_view *v,
			    const struct fb_pfiber *pf, int prev)
{
	int c;

	fb_wmask_for_each (c, v->topo->core_span[prev]) {
		if (c != prev && is_idle(v, c) && fb_pfiber_allows(pf, c))
			return c;
	}
	return -1;
}

/* usable - @w is an idle worker of @target's LLC that @pf allows. */
static bool usable(const struct fb_place_view *v, const struct fb_pfiber *pf,
		   int w, int target)
{
	return same_llc(v, w, target) && is_idle(v, w) &&
	       fb_pfiber_allows(pf, w);
}

static int select_idle_sibling(const struct fb_place_view *v,
			       struct fb_pfiber *pf, int prev, int target,
			       struct fb_wake_result *res)
{
	struct scan s = { .v = v, .pf = pf, .fallback = -1, .res = res };
	int prev_fb = -1, recent_fb = -1, r, i;

	if (is_idle(v, target) && fb_pfiber_allows(pf, target)) {
		res->pick = FB_PICK_TARGET;
		return target;
	}
	/* In another cluster, prev and recent are only fallbacks (v6.7). */
	if (prev != target && usable(v, pf, prev, target)) {
		if (same_share(v, prev, target)) {
			res->pick = FB_PICK_PREV;
			return prev;
		}
		prev_fb = prev;
	}
	r = pf->recent_used;
	pf->recent_used = prev;
	if (valid(v, r) && r != prev && r != target &&
	    usable(v, pf, r, target)) {
		if (same_share(v, r, target)) {
			res->pick = FB_PICK_RECENT;
			return r;
		}
		recent_fb = r;
	}
	res->pick = FB_PICK_SCAN_MISS;
	if (v->topo && !v->topo->sd_llc[target])
		return target;
	if (v->topo && v->topo->has_smt) {
		s.core = fb_load_relaxed(
			&v->topo->llc_shared[target]->has_idle_cores);
		res->core_scan = s.core;
		if (!s.core && same_llc(v, prev, target)) {
			i = idle_smt_sibling(v, pf, prev);
			if (i >= 0) {
				res->pick = FB_PICK_SIBLING;
				return i;
			}
		}
	}
	i = select_idle_cpu(&s, target);
	if (i >= 0)
		return i;
	if (prev_fb >= 0)
		return prev_fb;
	if (recent_fb >= 0)
		return recent_fb;
	return target;
}

/*
 * first_allowed - the fiber's mask excludes the answer (it changed while the
 * fiber slept): an idle allowed worker of @near's LLC, else any idle allowed
 * one, else any allowed one, searching from @near; @near if none exists.
 */
static int first_allowed(const struct fb_place_view *v,
			 const struct fb_pfiber *pf, int near)
{
	int n = v->nr_workers, any = -1, idle = -1;

	for (int k = 0; k < n; k++) {
		int i = (near + k) % n;

		if (!fb_pfiber_allows(pf, i))
			continue;
		if (is_idle(v, i)) {
			if (same_llc(v, i, near))
				return i;
			if (idle < 0)
				idle = i;
		}
		if (any < 0)
			any = i;
	}
	if (idle >= 0)
		return idle;
	return any >= 0 ? any : near;
}

int fb_place_select_wake(const struct fb_place_view *v, struct fb_pfiber *pf,
			 struct fb_pfiber *waker, int this, unsigned flags,
			 uint64_t now_ns, struct fb_wake_result *res)
{
	struct fb_wake_result dummy;
	int prev = pf->prev, pin = fb_read_once(&pf->pin), target, i;

	if (!res)
		res = &dummy;
	*res = (struct fb_wake_result){ .pick = FB_PICK_TARGET };
	/* One allowed worker: nothing to choose, so nothing to read (as
	 * the kernel calls no select_task_rq_fair() for a task with one
	 * allowed CPU), and no wakee flip recorded. */
	if (pf->allowed && pf->nr_allowed == 1 && valid(v, pin) &&
	    fb_pfiber_allows(pf, pin)) {
		res->pick = FB_PICK_PINNED;
		return pin;
	}
	if (!valid(v, this))
		this = -1;
	if (!valid(v, prev))
		prev = this >= 0 ? this : 0;
	if (waker && waker != pf)
		record_wakee(waker, pf, now_ns);
	target = wake_target(v, pf, waker, this, prev, flags);
	res->affine = target != prev;
	i = select_idle_sibling(v, pf, prev, target, res);
	if (fb_pfiber_allows(pf, i))
		return i;
	res->pick = FB_PICK_AFFINITY;
	return first_allowed(v, pf, prev);
}

/* ---- delivery (doc/scheduler.md 3.2.1) ---------------------------------- */

bool fb_place_use_wakelist(const struct fb_place_view *v,
			   const struct fb_pfiber *pf, int t, int this)
{
	if (!fb_feat(TTWU_QUEUE))
		return false;
	if (!fb_pfiber_allows(pf, t))
		return false;
	/* A foreign thread never locks a worker's run queue (libfiber's
	 * choice, doc/scheduler.md 3.7). */
	if (this < 0)
		return true;
	if (!same_llc(v, this, t))
		return true;
	if (t == this)
		return false;
	/* Tianchen Ding's mail: nr_running, not idleness: the wakee has already
	 * left its old worker, which may still show ttwu_pending. */
	return fb_feat(TTWU_QUEUE_IDLE) &&
	       fb_load_relaxed(&v->w[t]->nr_running) == 0;
}

/* ---- upkeep of the per-LLC words (doc/scheduler.md 2.2.1, 2.2.3) ------- */

int fb_place_idle_scan_depth(int llc_size, unsigned long sum_util,
			     int imbalance_pct)
{
	uint64_t x, t, pct = (uint64_t)imbalance_pct;

	if (llc_size <= 0)
		return 0;
	/* Past x = 1024 (a full LLC) t saturates anyway; clamping keeps the
	 * square from overflowing. */
	x = FB_MIN(sum_util / (unsigned long)llc_size, FB_PELT_CAPACITY);
	t = FB_MIN(x * x * pct * pct / (10000 * FB_PELT_CAPACITY),
		   FB_PELT_CAPACITY);
	return (int)((FB_PELT_CAPACITY - t) * (uint64_t)llc_size /
		     FB_PELT_CAPACITY);
}

unsigned long fb_place_llc_util(const struct fb_place_view *v, int this)
{
	const struct fb_wmask *llc;
	struct fb_wmask m;
	unsigned long sum = 0;
	int w;

	llc = llc_span(v, this, &m);
	fb_wmask_for_each (w, llc) {
		sum += fb_pelt_util(&v->w[w]->avg);
	}
	return sum;
}

bool fb_place_update_idle_scan(const struct fb_place_view *v, int this,
			       const struct fb_domain *d,
			       unsigned long sum_util, bool newly_idle)
{
	struct fb_llc_shared *sh;
	int n;

	if (!fb_feat(SIS_UTIL) || newly_idle || !v->topo || !d ||
	    d->span_weight != v->topo->llc_size[this])
		return false;
	sh = v->topo->llc_shared[this];
	n = fb_place_idle_scan_depth(d->span_weight, sum_util,
				     d->imbalance_pct);
	if (fb_load_relaxed(&sh->nr_idle_scan) == n)
		return false;
	fb_store_relaxed(&sh->nr_idle_scan, n);
	return true;
}

bool fb_place_update_idle_core(const struct fb_place_view *v, int w)
{
	struct fb_llc_shared *sh;
	int c;

	if (!v->topo || !v->topo->has_smt)
		return false;
	sh = v->topo->llc_shared[w];
	if (fb_load_relaxed(&sh->has_idle_cores))
		return false;
	fb_wmask_for_each (c, v->topo->core_span[w]) {
		if (c != w && !is_idle(v, c))
			return false;
	}
	fb_store_relaxed(&sh->has_idle_cores, 1);
	return true;
}
