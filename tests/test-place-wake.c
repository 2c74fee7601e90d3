/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-place-wake.c - the wake path of the placement layer, white box:
 * wake_affine and wake_wide, the order of select_idle_sibling (doc/scheduler.md
 * 1.4), the bounded idle scan and its hint (scenarios H1-1..H1-6 of
 * doc/scheduler.md 2.5), the wakelist decision (H2-1..H2-6 of doc/scheduler.md
 * 3.5), affinity, and the scan cost on a 48-worker LLC.
 *
 * Every test is pure: a synthetic topology, a hand-filled snapshot of the
 * workers, one call, the exact answer.  No thread runs.  Snapshot
 * conventions (doc/scheduler.md 0.3): a busy worker has util 1024 and load and
 * runnable 1024 x nr_running, an idle one all zero; a fiber weighs 1024 and
 * its own load is 0 unless a test says otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/common.h"
#include "place/place.h"
#include "topo/view.h"

#define S1 "pack:1 l3:1 core:4 pu:2"
#define S2 "pack:1 l3:1 core:8 pu:1"
#define T2 "pack:1 l3:2 core:4 pu:1"
#define N1 "pack:2 numa:1 l3:4 core:2 pu:1"
#define N2 "pack:2 numa:1 l3:1 core:16 pu:2"
#define C1 "pack:1 l3:1 l2:2 core:2 pu:1" /* clusters {0,1} {2,3} */
#define L48 "pack:1 l3:1 core:24 pu:2"	  /* one 48-worker LLC */

#define SYNC FB_PLACE_WF_SYNC
#define POLLER FB_PLACE_WF_POLLER

/* Outcomes of doc/scheduler.md 3.5. */
enum deliver { LOCAL, DIRECT, WAKELIST };

struct snap {
	struct fb_topo *t;
	struct fb_sched_view *sv;
	struct fb_pworker *pw;
	struct fb_pworker **pws;
	struct fb_place_global g;
	struct fb_place_view v;
};

/* features - the defaults changed by @spec ("NO_SIS_UTIL SIS_CORE_FULL"). */
static void features(const char *spec)
{
	uint64_t m;
	char err[256];

	assert_int_equal(fb_features_parse("test", spec, fb_features_default(),
					   &m, err, sizeof(err)),
			 0);
	fb_store_relaxed(&fb_features_mask, m);
}

static void set_idle(struct snap *s, int w, unsigned state)
{
	struct fb_pworker *p = &s->pw[w];

	fb_store_relaxed(&p->state, state);
	fb_store_relaxed(&p->nr_running, 0);
	fb_store_relaxed(&p->ttwu_pending, 0);
	p->avg.util_avg = p->avg.load_avg = p->avg.runnable_avg = 0;
	p->idle_stamp = 1;
}

static void set_busy(struct snap *s, int w, int nr_running)
{
	struct fb_pworker *p = &s->pw[w];

	fb_store_relaxed(&p->state, FB_WS_RUNNING);
	fb_store_relaxed(&p->nr_running, nr_running);
	fb_store_relaxed(&p->ttwu_pending, 0);
	p->avg.util_avg = 1024;
	p->avg.load_avg = p->avg.runnable_avg = 1024ul * (unsigned)nr_running;
	p->idle_stamp = 0;
}

/* busy - the workers listed up to -1 get one running fiber. */
static void busy(struct snap *s, ...)
{
	va_list ap;
	int w;

	va_start(ap, s);
	while ((w = va_arg(ap, int)) >= 0)
		set_busy(s, w, 1);
	va_end(ap);
}

/* snap_open - @spec's view (or none when @spec is NULL: @n workers, no
 * domains), every worker idle and SLEEPING, default features. */
static void snap_open(struct snap *s, const char *spec, int n)
{
	char err[1024] = "";

	memset(s, 0, sizeof(*s));
	features("");
	if (spec) {
		int rc = fb_topo_open(&s->t, spec, err, sizeof(err));

		if (rc)
			fail_msg("fb_topo_open(%s): %d %s", spec, rc, err);
		assert_int_equal(fb_topo_view_build(s->t, 0, 0, &s->sv), 0);
		n = s->sv->nr_workers;
	}
	s->pw = aligned_alloc(FB_CACHELINE, sizeof(*s->pw) * (size_t)n);
	s->pws = calloc((size_t)n, sizeof(*s->pws));
	assert_non_null(s->pw);
	assert_non_null(s->pws);
	memset(s->pw, 0, sizeof(*s->pw) * (size_t)n);
	for (int i = 0; i < n; i++) {
		s->pw[i].id = i;
		s->pws[i] = &s->pw[i];
		set_idle(s, i, FB_WS_SLEEPING);
	}
	s->v = (struct fb_place_view){ n, s->pws, s->sv, &s->g };
}

static void snap_close(struct snap *s)
{
	free(s->pws);
	free(s->pw);
	fb_topo_view_free(s->sv);
	fb_topo_close(s->t);
	features("");
}

static struct fb_llc_shared *llc(struct snap *s, int w)
{
	return s->sv->llc_shared[w];
}

static void set_hint(struct snap *s, int w, int has_idle_cores,
		     int nr_idle_scan)
{
	fb_store_relaxed(&llc(s, w)->has_idle_cores, has_idle_cores);
	fb_store_relaxed(&llc(s, w)->nr_idle_scan, nr_idle_scan);
}

static int hint(struct snap *s, int w)
{
	return fb_load_relaxed(&llc(s, w)->has_idle_cores);
}

static struct fb_pfiber fiber(int prev)
{
	return (struct fb_pfiber){ .prev = prev,
				   .recent_used = -1,
				   .weight = 1024 };
}

/* wake - wake @f from worker @this (-1: foreign) with no waker fiber. */
static int wake(struct snap *s, struct fb_pfiber *f, int this, unsigned flags,
		struct fb_wake_result *r)
{
	return fb_place_select_wake(&s->v, f, NULL, this, flags, 0, r);
}

/* wake_from - wake @f from a fiber @waker running on worker @this. */
static int wake_from(struct snap *s, struct fb_pfiber *f,
		     struct fb_pfiber *waker, int this, unsigned flags,
		     struct fb_wake_result *r)
{
	return fb_place_select_wake(&s->v, f, waker, this, flags, 0, r);
}

/* deliver - the outcome of doc/scheduler.md 3.5 for @f onto @t; a wakelist
 * push marks the target's ttwu_pending, as the scheduler's push does. */
static enum deliver deliver(struct snap *s, const struct fb_pfiber *f, int t,
			    int this)
{
	if (fb_place_use_wakelist(&s->v, f, t, this)) {
		fb_store_relaxed(&s->pw[t].ttwu_pending, 1);
		return WAKELIST;
	}
	return t == this ? LOCAL : DIRECT;
}

/* ---- doc/scheduler.md 1.4.2: ordering of select_idle_sibling ------------- */

/*
 * S1, hint 0, nr_idle_scan 8, prev 2.  A sync wake from a fiber alone on
 * worker 0 makes worker 0 the target (wake_affine), so the steps below run
 * with target 0 and prev 2.
 */
static void order_setup(struct snap *s, struct fb_pfiber *f)
{
	snap_open(s, S1, 0);
	busy(s, 0, 1, 2, 4, 5, 6, -1);
	set_hint(s, 0, 0, 8);
	*f = fiber(2);
}

static void test_place_wake_order_idle_sibling_of_prev_first(void **state)
{
	struct snap s;
	struct fb_pfiber f;
	struct fb_wake_result r;

	(void)state;
	order_setup(&s, &f);
	assert_int_equal(wake(&s, &f, 0, SYNC, &r), 3);
	assert_int_equal(r.pick, FB_PICK_SIBLING);
	assert_true(r.affine);
	assert_int_equal(r.probes, 0);
	assert_int_equal(f.recent_used, 2);
	snap_close(&s);
}

static void test_place_wake_order_idle_target_first(void **state)
{
	struct snap s;
	struct fb_pfiber f;
	struct fb_wake_result r;

	(void)state;
	order_setup(&s, &f);
	set_idle(&s, 0, FB_WS_POLLING);
	assert_int_equal(wake(&s, &f, 0, SYNC, &r), 0);
	assert_int_equal(r.pick, FB_PICK_TARGET);
	assert_int_equal(f.recent_used, -1); /* step 3 not reached */
	snap_close(&s);
}

static void test_place_wake_order_idle_prev_second(void **state)
{
	struct snap s;
	struct fb_pfiber f;
	struct fb_wake_result r;

	(void)state;
	order_setup(&s, &f);
	set_idle(&s, 2, FB_WS_POLLING);
	assert_int_equal(wake(&s, &f, 0, SYNC, &r), 2);
	assert_int_equal(r.pick, FB_PICK_PREV);
	snap_close(&s);
}

static void test_place_wake_order_recent_before_sibling(void **state)
{
	struct snap s;
	struct fb_pfiber f;
	struct fb_wake_result r;

	(void)state;
	order_setup(&s, &f);
	set_idle(&s, 5, FB_WS_POLLING);
	f.recent_used = 5;
	assert_int_equal(wake(&s, &f, 0, SYNC, &r), 5);
	assert_int_equal(r.pick, FB_PICK_RECENT);
	assert_int_equal(f.recent_used, 2);
	snap_close(&s);
}

/* With the hint set, step 5 is skipped and the core scan finds core {6,7}
 * when it is idle. */
static void test_place_wake_order_hint_skips_sibling(void **state)
{
	struct snap s;
	struct fb_pfiber f;
	struct fb_wake_result r;

	(void)state;
	order_setup(&s, &f);
	set_idle(&s, 6, FB_WS_SLEEPING);
	set_hint(&s, 0, 1, 8);
	assert_int_equal(wake(&s, &f, 0, SYNC, &r), 6);
	assert_int_equal(r.pick, FB_PICK_IDLE_CORE);
	snap_close(&s);
}

/* With a CLS level, an idle prev in another cluster is only a fallback: the
 * target's cluster is scanned first. */
static void test_place_wake_cluster_scanned_first(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(2);
	struct fb_wake_result r;

	(void)state;
	snap_open(&s, C1, 0);
	assert_false(fb_share_resources(s.sv, 0, 2));
	busy(&s, 0, 3, -1);
	assert_int_equal(wake(&s, &f, 0, SYNC, &r), 1);
	assert_int_equal(r.pick, FB_PICK_SCAN_HIT);
	/* Nothing idle in cluster {0,1}: the LLC scan reaches 2. */
	busy(&s, 1, -1);
	f = fiber(2);
	assert_int_equal(wake(&s, &f, 0, SYNC, &r), 2);
	/* No scan budget: prev is the fallback. */
	set_hint(&s, 0, 0, 0);
	f = fiber(2);
	assert_int_equal(wake(&s, &f, 0, SYNC, &r), 2);
	assert_int_equal(r.pick, FB_PICK_SCAN_MISS);
	assert_true(r.cut_util);
	/* The cluster first even where the LLC's order meets an idle worker
	 * outside it sooner: target 1 (its waker alone there), prev 3 in the
	 * other cluster, 0, 2 and 3 idle: the LLC order from 2 would take 2,
	 * the cluster takes 0. */
	set_hint(&s, 0, 0, 4);
	set_idle(&s, 0, FB_WS_SLEEPING);
	set_busy(&s, 1, 1);
	set_idle(&s, 2, FB_WS_SLEEPING);
	set_idle(&s, 3, FB_WS_SLEEPING);
	f = fiber(3);
	assert_int_equal(wake(&s, &f, 1, SYNC, &r), 0);
	assert_int_equal(r.pick, FB_PICK_SCAN_HIT);
	snap_close(&s);
}

/* ---- wake_affine and wake_wide (doc/scheduler.md 1.4.1) ----------------- */

static void test_place_wake_affine_idle_waker_worker(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(5);
	struct fb_wake_result r;

	(void)state;
	snap_open(&s, S2, 0);
	busy(&s, 1, 2, 3, 4, 5, 6, 7, -1);
	/* WA_IDLE: the waker's worker is idle, prev busy: the waker's. */
	assert_int_equal(wake(&s, &f, 0, 0, &r), 0);
	assert_true(r.affine);
	/* Both idle: prev (cache affinity wins). */
	set_idle(&s, 5, FB_WS_POLLING);
	f = fiber(5);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 5);
	assert_false(r.affine);
	snap_close(&s);
}

static void test_place_wake_affine_sync_pulls_to_waker(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(5), w = fiber(0);
	struct fb_wake_result r;

	(void)state;
	snap_open(&s, S2, 0);
	busy(&s, 0, 1, 2, 3, 4, 5, 6, 7, -1);
	f.avg.load_avg = 1024;
	/* Sync, waker alone on 0: 0 (the waker is about to block). */
	assert_int_equal(wake_from(&s, &f, &w, 0, SYNC, &r), 0);
	assert_true(r.affine);
	assert_int_equal(r.pick, FB_PICK_SCAN_MISS);
	/* Not sync, the wakee's load counted on prev: prev. */
	f.prev = 5;
	assert_int_equal(wake_from(&s, &f, &w, 0, 0, &r), 5);
	assert_false(r.affine);
	/* NO_WA_IDLE NO_WA_WEIGHT: always prev. */
	features("NO_WA_IDLE NO_WA_WEIGHT");
	f.prev = 5;
	assert_int_equal(wake_from(&s, &f, &w, 0, SYNC, &r), 5);
	snap_close(&s);
}

/*
 * WA_WEIGHT with WA_BIAS: this_eff = (1024 + 1024) x 100 against
 * prev_eff = (load(prev) - 1024) x 108.  Prev load 3000 moves the fiber
 * with the bias (204800 < 213408) and keeps it without (2048 >= 1976).
 */
static void test_place_wake_affine_weight_and_bias(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(5);
	struct fb_wake_result r;

	(void)state;
	snap_open(&s, S2, 0);
	busy(&s, 0, 1, 2, 3, 4, 6, 7, -1);
	set_busy(&s, 5, 3);
	s.pw[5].avg.load_avg = 3000;
	f.avg.load_avg = 1024;
	assert_int_equal(wake(&s, &f, 0, 0, &r), 0);
	assert_true(r.affine);
	features("NO_WA_BIAS");
	f.prev = 5;
	assert_int_equal(wake(&s, &f, 0, 0, &r), 5);
	assert_false(r.affine);
	/* Prev lighter than the waker's worker: prev, bias or not. */
	features("");
	s.pw[5].avg.load_avg = 2048;
	assert_int_equal(wake(&s, &f, 0, 0, &r), 5);
	features("NO_WA_WEIGHT");
	s.pw[5].avg.load_avg = 8192;
	assert_int_equal(wake(&s, &f, 0, 0, &r), 5);
	snap_close(&s);
}

/* T2: prev in the other LLC; wake_affine runs at the PKG level. */
static void test_place_wake_affine_across_llcs(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(5);
	struct fb_wake_result r;

	(void)state;
	snap_open(&s, T2, 0);
	busy(&s, 1, 2, 3, 4, 6, 7, -1);
	set_busy(&s, 5, 3);
	/* Worker 0 idle but in another LLC than prev: WA_IDLE undecided;
	 * the loads pick 0 (0 x 100 < 3072 x 108). */
	assert_int_equal(wake(&s, &f, 0, 0, &r), 0);
	assert_true(r.affine);
	assert_int_equal(r.pick, FB_PICK_TARGET);
	/* Prev idle: prev. */
	set_idle(&s, 5, FB_WS_SLEEPING);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 5);
	snap_close(&s);
}

/*
 * WA_POLLER: an idle worker hands out the events it polled; the woken
 * fiber runs there, not on its idle (perhaps sleeping) previous worker,
 * in the poller's LLC or another.  A busy poller decides nothing new.
 */
static void test_place_wake_poller_keeps_its_event(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(5);
	struct fb_wake_result r;

	(void)state;
	snap_open(&s, S2, 0);
	busy(&s, 1, 2, 3, 4, 6, 7, -1);
	set_idle(&s, 5, FB_WS_SLEEPING);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 5); /* not the poller */
	f = fiber(5);
	assert_int_equal(wake(&s, &f, 0, POLLER, &r), 0);
	assert_true(r.affine);
	assert_int_equal(r.pick, FB_PICK_TARGET);
	features("NO_WA_POLLER");
	f = fiber(5);
	assert_int_equal(wake(&s, &f, 0, POLLER, &r), 5);
	features("");
	/* The poller has work already: prev, idle, as before. */
	set_busy(&s, 0, 1);
	f = fiber(5);
	assert_int_equal(wake(&s, &f, 0, POLLER, &r), 5);
	snap_close(&s);
	/* Across LLCs: T2, poller 0, prev 5 idle in the other LLC. */
	snap_open(&s, T2, 0);
	busy(&s, 1, 2, 3, 4, 6, 7, -1);
	set_idle(&s, 5, FB_WS_SLEEPING);
	f = fiber(5);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 5);
	f = fiber(5);
	assert_int_equal(wake(&s, &f, 0, POLLER, &r), 0);
	snap_close(&s);
}

static void test_place_wake_record_wakee_counts_and_decays(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(5), g = fiber(6), w = fiber(0);

	(void)state;
	snap_open(&s, S2, 0);
	w.wakee_flips = 10;
	fb_place_select_wake(&s.v, &f, &w, 0, 0, 2000000000ull, NULL);
	assert_int_equal(w.wakee_flips, 6); /* halved, then one flip */
	assert_ptr_equal(w.last_wakee, &f);
	assert_int_equal(w.wakee_flip_decay_ns, 2000000000ull);
	f.prev = 5;
	fb_place_select_wake(&s.v, &f, &w, 0, 0, 2500000000ull, NULL);
	assert_int_equal(w.wakee_flips, 6); /* same wakee, within 1 s */
	fb_place_select_wake(&s.v, &g, &w, 0, 0, 2600000000ull, NULL);
	assert_int_equal(w.wakee_flips, 7);
	assert_ptr_equal(w.last_wakee, &g);
	snap_close(&s);
}

/*
 * wake_wide on S2 (k = 8): the wakee has 8 flips; a waker reaching 64
 * flips (63 + this wake) makes the relation wide: no pull to the waker.
 */
static void test_place_wake_wide_keeps_prev(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(5), w = fiber(0);
	struct fb_wake_result r;

	(void)state;
	snap_open(&s, S2, 0);
	busy(&s, 0, 1, 2, 3, 4, 5, 6, 7, -1);
	f.wakee_flips = 8;
	w.wakee_flips = 62;
	assert_int_equal(wake_from(&s, &f, &w, 0, SYNC, &r), 0);
	assert_true(r.affine); /* 63 < 8 x 8 */
	f.prev = 5;
	w.last_wakee = NULL;
	assert_int_equal(wake_from(&s, &f, &w, 0, SYNC, &r), 5);
	assert_false(r.affine); /* 64 >= 8 x 8 */
	/* Wakee with fewer flips than the LLC: never wide. */
	f.wakee_flips = 7;
	w.wakee_flips = 1000;
	assert_int_equal(wake_from(&s, &f, &w, 0, SYNC, &r), 0);
	snap_close(&s);
}

/* Foreign wakers and wakers the fiber may not use get no wake-affine. */
static void test_place_wake_foreign_waker_stays_prev(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(5);
	struct fb_wake_result r;
	cpu_set_t set;

	(void)state;
	snap_open(&s, S2, 0);
	busy(&s, 1, 2, 3, 4, 5, 6, 7, -1);
	set_hint(&s, 0, 0, 0);
	assert_int_equal(wake(&s, &f, -1, SYNC, &r), 5);
	assert_false(r.affine);
	CPU_ZERO(&set);
	for (int i = 1; i < 8; i++)
		CPU_SET(i, &set);
	f.allowed = &set;
	f.nr_allowed = 7;
	assert_int_equal(wake(&s, &f, 0, 0, &r), 5); /* 0 idle, not allowed */
	assert_false(r.affine);
	snap_close(&s);
}

/* ---- H1 (doc/scheduler.md 2.5) ------------------------------------------- */

/* H1-1: the depth formula. */
static void test_place_wake_h1_1_scan_depth_formula(void **state)
{
	static const struct {
		int w;
		unsigned long util;
		int n;
	} c[] = {
		{ 8, 0, 8 },	    { 8, 4096, 5 },	  { 8, 5600, 2 },
		{ 8, 6144, 1 },	    { 8, 6800, 0 },	  { 16, 8192, 10 },
		{ 48, 38400, 7 },   { 48, 48 * 875, 0 },  { 8, 8 * 1024, 0 },
		{ 8, 8 * 5000, 0 }, { 48, 1UL << 40, 0 },
	};

	(void)state;
	for (size_t i = 0; i < FB_ARRAY_SIZE(c); i++)
		assert_int_equal(fb_place_idle_scan_depth(c[i].w, c[i].util,
							  117),
				 c[i].n);
}

/* H1-2: only a periodic balance of the LLC-level domain writes, once. */
static void test_place_wake_h1_2_who_writes_scan_depth(void **state)
{
	struct snap s;
	const struct fb_domain *smt, *lvl;
	int stores = 0;

	(void)state;
	snap_open(&s, S1, 0);
	smt = s.sv->sd[0];
	lvl = s.sv->sd_llc[0];
	assert_string_equal(smt->name, "SMT");
	assert_string_equal(lvl->name, "LLC");
	assert_int_equal(fb_load_relaxed(&llc(&s, 0)->nr_idle_scan), 8);
	stores += fb_place_update_idle_scan(&s.v, 0, smt, 4096, false);
	stores += fb_place_update_idle_scan(&s.v, 0, lvl, 4096, true);
	assert_int_equal(stores, 0);
	assert_int_equal(fb_load_relaxed(&llc(&s, 0)->nr_idle_scan), 8);
	stores += fb_place_update_idle_scan(&s.v, 0, lvl, 4096, false);
	stores += fb_place_update_idle_scan(&s.v, 3, lvl, 4096, false);
	assert_int_equal(stores, 1);
	assert_int_equal(fb_load_relaxed(&llc(&s, 7)->nr_idle_scan), 5);
	features("NO_SIS_UTIL");
	assert_false(fb_place_update_idle_scan(&s.v, 0, lvl, 0, false));
	features("");
	/* The snapshot's own utilisation: 4 busy workers of 8. */
	busy(&s, 0, 1, 2, 3, -1);
	assert_int_equal(fb_place_llc_util(&s.v, 5), 4096);
	snap_close(&s);
}

static void h1_3_setup(struct snap *s, int nr_idle_scan)
{
	snap_open(s, S2, 0);
	busy(s, 0, 1, 2, 3, 4, 5, 6, -1);
	set_hint(s, 0, 1, nr_idle_scan); /* no SMT: the hint is not read */
}

/* H1-3: the worker scan stops after nr_idle_scan probes. */
static void test_place_wake_h1_3_bounded_worker_scan(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(0);
	struct fb_wake_result r;

	(void)state;
	h1_3_setup(&s, 2);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 0);
	assert_int_equal(r.probes, 2);
	assert_true(r.cut_util);
	assert_int_equal(r.pick, FB_PICK_SCAN_MISS);
	/* The two probes are workers 1 and 2, in that order. */
	set_idle(&s, 2, FB_WS_SLEEPING);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 2);
	assert_int_equal(r.probes, 2);
	set_idle(&s, 1, FB_WS_SLEEPING);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 1);
	assert_int_equal(r.probes, 1);
	snap_close(&s);
}

static void test_place_wake_h1_3_full_scan_finds_last(void **state)
{
	static const struct {
		const char *feat;
		int n;
	} c[] = { { "", 8 }, { "NO_SIS_UTIL", 2 }, { "NO_SIS_UTIL", 0 } };
	struct snap s;
	struct fb_pfiber f;
	struct fb_wake_result r;

	(void)state;
	for (size_t i = 0; i < FB_ARRAY_SIZE(c); i++) {
		h1_3_setup(&s, c[i].n);
		features(c[i].feat);
		f = fiber(0);
		assert_int_equal(wake(&s, &f, 0, 0, &r), 7);
		assert_int_equal(r.probes, 7);
		assert_int_equal(r.pick, FB_PICK_SCAN_HIT);
		assert_false(r.cut_util);
		snap_close(&s);
	}
}

/* 4096 workers, all busy but the last: the scan of the last LLC (workers
 * 3968..4095) from its first worker walks the LLC's mask into its last
 * word and finds worker 4095. */
static void test_place_wake_scan_finds_worker_4095(void **state)
{
	struct snap s;
	struct fb_pfiber f;
	struct fb_wake_result r;

	(void)state;
	snap_open(&s, "pack:2 numa:2 l3:8 core:32 pu:4", 0);
	assert_int_equal(s.v.nr_workers, 4096);
	for (int w = 0; w < 4095; w++)
		set_busy(&s, w, 1);
	set_hint(&s, 3968, 0, 128);
	f = fiber(3968);
	assert_int_equal(wake(&s, &f, 3968, 0, &r), 4095);
	assert_int_equal(r.pick, FB_PICK_SCAN_HIT);
	assert_int_equal(r.probes, 127); /* 3969..4095, once each */
	snap_close(&s);
}

static void test_place_wake_h1_3_overloaded_no_scan(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(0);
	struct fb_wake_result r;

	(void)state;
	h1_3_setup(&s, 0);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 0);
	assert_int_equal(r.probes, 0);
	assert_true(r.cut_util);
	snap_close(&s);
}

/* H1-4 and H1-5: S1, busy {0, 2, 3, 4}, idle {1, 5, 6, 7}, hint set. */
static void h1_4_setup(struct snap *s, int nr_idle_scan)
{
	snap_open(s, S1, 0);
	busy(s, 0, 2, 3, 4, -1);
	set_hint(s, 0, 1, nr_idle_scan);
}

/* H1-4: not overloaded, every flag combination: core {6,7}, hint kept. */
static void test_place_wake_h1_4_idle_core_not_overloaded(void **state)
{
	static const char *const flags[] = { "SIS_UTIL", "SIS_CORE_LIMIT",
					     "SIS_CORE_FULL" };
	struct snap s;
	struct fb_pfiber f;
	struct fb_wake_result r;
	char spec[128];

	(void)state;
	for (unsigned m = 0; m < 8; m++) {
		spec[0] = 0;
		for (unsigned b = 0; b < 3; b++) {
			strcat(spec, m & (1u << b) ? "" : "NO_");
			strcat(spec, flags[b]);
			strcat(spec, " ");
		}
		h1_4_setup(&s, 3);
		features(spec);
		f = fiber(0);
		assert_int_equal(wake(&s, &f, 0, 0, &r), 6);
		assert_int_equal(r.pick, FB_PICK_IDLE_CORE);
		assert_int_equal(hint(&s, 0), 1);
		snap_close(&s);
	}
}

/* H1-5, mainline: overloaded, no core scan at all; hint kept. */
static void test_place_wake_h1_5_overloaded_mainline(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(0);
	struct fb_wake_result r;

	(void)state;
	h1_4_setup(&s, 0);
	features("NO_SIS_CORE_LIMIT NO_SIS_CORE_FULL");
	assert_int_equal(wake(&s, &f, 0, 0, &r), 0);
	assert_int_equal(r.probes, 0);
	assert_true(r.cut_util);
	assert_int_equal(hint(&s, 0), 1);
	snap_close(&s);
}

/* H1-5, SIS_CORE_LIMIT: cores {0,1} and {2,3} only; the idle sibling seen
 * on the way, and the hint is cleared. */
static void test_place_wake_h1_5_overloaded_core_limit(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(0);
	struct fb_wake_result r;

	(void)state;
	h1_4_setup(&s, 0);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 1);
	assert_int_equal(r.pick, FB_PICK_SCAN_HIT);
	assert_true(r.cut_core_limit);
	assert_int_equal(r.probes, 3); /* 0, 1, then 2 busy: stop */
	assert_int_equal(hint(&s, 0), 0);
	snap_close(&s);
}

/* H1-5, SIS_CORE_LIMIT: a third core is never looked at, even when it is
 * idle ({4,5} here); the mail's baseline (SIS_CORE_FULL) finds it. */
static void test_place_wake_h1_5_core_limit_stops_after_two(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(0);
	struct fb_wake_result r;

	(void)state;
	h1_4_setup(&s, 0);
	set_idle(&s, 4, FB_WS_SLEEPING);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 1);
	assert_true(r.cut_core_limit);
	assert_int_equal(hint(&s, 0), 0);
	set_hint(&s, 0, 1, 0);
	features("SIS_CORE_FULL NO_SIS_CORE_LIMIT");
	f = fiber(0);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 4);
	assert_int_equal(r.pick, FB_PICK_IDLE_CORE);
	snap_close(&s);
}

/* H1-5, SIS_CORE_LIMIT with workers 2 and 3 idle: core {2,3}, hint kept. */
static void test_place_wake_h1_5_core_limit_finds_second_core(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(0);
	struct fb_wake_result r;

	(void)state;
	h1_4_setup(&s, 0);
	set_idle(&s, 2, FB_WS_SLEEPING);
	set_idle(&s, 3, FB_WS_SLEEPING);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 2);
	assert_int_equal(r.pick, FB_PICK_IDLE_CORE);
	assert_false(r.cut_core_limit);
	assert_int_equal(hint(&s, 0), 1);
	snap_close(&s);
}

/* H1-5, the mail's baseline: the full core scan finds {6,7}. */
static void test_place_wake_h1_5_overloaded_core_full(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(0);
	struct fb_wake_result r;

	(void)state;
	h1_4_setup(&s, 0);
	features("SIS_CORE_FULL NO_SIS_CORE_LIMIT");
	assert_int_equal(wake(&s, &f, 0, 0, &r), 6);
	assert_int_equal(r.pick, FB_PICK_IDLE_CORE);
	assert_int_equal(hint(&s, 0), 1);
	snap_close(&s);
}

/* H1-6: who sets the hint. */
static void test_place_wake_h1_6_hint_set_by_idle_core(void **state)
{
	struct snap s;

	(void)state;
	snap_open(&s, S1, 0);
	busy(&s, 0, 1, 2, 3, 4, 5, 6, 7, -1);
	set_idle(&s, 5, FB_WS_POLLING);
	assert_false(fb_place_update_idle_core(&s.v, 5)); /* 4 busy */
	assert_int_equal(hint(&s, 0), 0);
	set_idle(&s, 4, FB_WS_POLLING);
	assert_true(fb_place_update_idle_core(&s.v, 5));
	assert_int_equal(hint(&s, 0), 1);
	assert_false(fb_place_update_idle_core(&s.v, 4)); /* already set */
	snap_close(&s);

	snap_open(&s, S2, 0);
	for (int w = 0; w < 8; w++)
		assert_false(fb_place_update_idle_core(&s.v, w));
	assert_int_equal(hint(&s, 0), 0);
	snap_close(&s);
}

/* H1-6: a core scan that finds no idle core clears the hint. */
static void test_place_wake_h1_6_failed_core_scan_clears_hint(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(0);
	struct fb_wake_result r;

	(void)state;
	h1_4_setup(&s, 3);
	busy(&s, 6, 7, -1);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 1);
	assert_int_equal(r.pick, FB_PICK_SCAN_HIT);
	/* Each core once, a busy one up to its first busy worker: 0 and 1,
	 * then 2, 4 and 6 (not 3, 5, 7 nor core 0-1 again). */
	assert_int_equal(r.probes, 5);
	assert_int_equal(hint(&s, 0), 0);
	/* With the hint clear, the next wake takes prev's idle sibling. */
	f = fiber(0);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 1);
	assert_int_equal(r.pick, FB_PICK_SIBLING);
	snap_close(&s);
}

/*
 * The scan's cost on a 48-worker LLC (24 cores x 2) under overload: every
 * worker busy but one that keeps going idle and setting the hint, depth 0
 * from SIS_UTIL.  SIS_CORE_LIMIT inspects at most 2 cores (4 workers) per
 * wakeup; the mail's baseline inspects the whole LLC; mainline none.
 */
static double probes_per_wake(const char *feat)
{
	struct snap s;
	struct fb_wake_result r;
	long probes = 0;
	const int n = 4800;
	int t;

	snap_open(&s, L48, 0);
	features(feat);
	for (int w = 0; w < 48; w++)
		set_busy(&s, w, 2);
	assert_true(fb_place_update_idle_scan(
		&s.v, 0, s.sv->sd_llc[0], fb_place_llc_util(&s.v, 0), false));
	assert_int_equal(fb_load_relaxed(&llc(&s, 0)->nr_idle_scan), 0);
	for (int i = 0; i < n; i++) {
		struct fb_pfiber f = fiber(i % 48);
		int idle = (i * 7 + 3) % 48;

		set_idle(&s, idle, FB_WS_POLLING);
		fb_store_relaxed(&llc(&s, 0)->has_idle_cores, 1);
		t = wake(&s, &f, -1, 0, &r);
		assert_true(t == idle || t == f.prev);
		probes += r.probes;
		set_busy(&s, idle, 2);
	}
	snap_close(&s);
	return (double)probes / n;
}

static void test_place_wake_probes_per_wakeup_bounded(void **state)
{
	double lim, full, mainline;

	(void)state;
	lim = probes_per_wake("SIS_CORE_LIMIT NO_SIS_CORE_FULL");
	full = probes_per_wake("NO_SIS_CORE_LIMIT SIS_CORE_FULL");
	mainline = probes_per_wake("NO_SIS_CORE_LIMIT NO_SIS_CORE_FULL");
	print_message("# probes per wakeup: limit %.2f full %.2f mainline "
		      "%.2f\n",
		      lim, full, mainline);
	assert_true(lim <= 4.0); /* 2 cores of 2 (doc/scheduler.md 2.3) */
	assert_true(full > lim);
	assert_true(full >= 24.0);
	assert_true(mainline == 0.0);
}

/* ---- H2 (doc/scheduler.md 3.5) ------------------------------------------- */

static void h2_setup(struct snap *s)
{
	snap_open(s, T2, 0);
	busy(s, 0, -1);
}

/* H2-1: cross LLC, busy or sleeping target: the wakelist. */
static void test_place_wake_h2_1_cross_llc_wakelist(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(5);

	(void)state;
	h2_setup(&s);
	set_busy(&s, 5, 2);
	assert_int_equal(deliver(&s, &f, 5, 0), WAKELIST);
	assert_int_equal(fb_load_relaxed(&s.pw[5].ttwu_pending), 1);
	set_idle(&s, 5, FB_WS_SLEEPING);
	assert_int_equal(deliver(&s, &f, 5, 0), WAKELIST);
	features("NO_TTWU_QUEUE_IDLE");
	assert_int_equal(deliver(&s, &f, 5, 0), WAKELIST);
	features("NO_TTWU_QUEUE");
	assert_int_equal(deliver(&s, &f, 5, 0), DIRECT);
	snap_close(&s);
}

/* H2-2 and H2-3: same LLC, idle target (sleeping or polling). */
static void test_place_wake_h2_2_same_llc_idle_target(void **state)
{
	static const unsigned st[] = { FB_WS_SLEEPING, FB_WS_POLLING };
	struct snap s;
	struct fb_pfiber f = fiber(2);

	(void)state;
	for (size_t i = 0; i < FB_ARRAY_SIZE(st); i++) {
		h2_setup(&s);
		set_idle(&s, 2, st[i]);
		assert_int_equal(deliver(&s, &f, 2, 0), WAKELIST);
		/* A second push before the drain: still the wakelist
		 * (nr_running, not idleness, decides). */
		assert_int_equal(deliver(&s, &f, 2, 0), WAKELIST);
		set_idle(&s, 2, st[i]);
		features("NO_TTWU_QUEUE_IDLE");
		assert_int_equal(deliver(&s, &f, 2, 0), DIRECT);
		features("NO_TTWU_QUEUE");
		assert_int_equal(deliver(&s, &f, 2, 0), DIRECT);
		snap_close(&s);
	}
}

/* H2-4: same LLC, busy target: direct; the waker's own worker: local. */
static void test_place_wake_h2_4_busy_and_local(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(2);

	(void)state;
	h2_setup(&s);
	set_busy(&s, 2, 1);
	assert_int_equal(deliver(&s, &f, 2, 0), DIRECT);
	assert_int_equal(fb_load_relaxed(&s.pw[2].ttwu_pending), 0);
	assert_int_equal(deliver(&s, &f, 0, 0), LOCAL);
	set_idle(&s, 0, FB_WS_POLLING);
	assert_int_equal(deliver(&s, &f, 0, 0), LOCAL);
	snap_close(&s);
}

/* Foreign wakers: the wakelist whenever TTWU_QUEUE is on; never a worker
 * the fiber may not use. */
static void test_place_wake_h2_foreign_and_affinity(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(2);
	cpu_set_t set;

	(void)state;
	h2_setup(&s);
	set_busy(&s, 2, 3);
	assert_true(fb_place_use_wakelist(&s.v, &f, 2, -1));
	assert_true(fb_place_use_wakelist(&s.v, &f, 0, -1));
	features("NO_TTWU_QUEUE");
	assert_false(fb_place_use_wakelist(&s.v, &f, 2, -1));
	features("");
	CPU_ZERO(&set);
	CPU_SET(3, &set);
	f.allowed = &set;
	f.nr_allowed = 1;
	assert_false(fb_place_use_wakelist(&s.v, &f, 2, -1));
	assert_false(fb_place_use_wakelist(&s.v, &f, 5, 0));
	assert_true(fb_place_use_wakelist(&s.v, &f, 3, 0));
	snap_close(&s);
}

/* H2-5: a pending handoff makes the target busy for the next wakeup. */
static void test_place_wake_h2_5_pending_handoff_not_idle(void **state)
{
	struct snap s;
	struct fb_pfiber f1 = fiber(2), f2 = fiber(2);
	struct fb_wake_result r;
	int t;

	(void)state;
	h2_setup(&s);
	set_hint(&s, 0, 0, 4);
	t = wake(&s, &f1, 0, 0, &r);
	assert_int_equal(t, 2);
	assert_int_equal(deliver(&s, &f1, t, 0), WAKELIST);
	assert_false(fb_worker_is_idle(&s.pw[2]));
	t = wake(&s, &f2, 0, 0, &r);
	assert_int_equal(t, 3);
	assert_int_equal(r.pick, FB_PICK_SCAN_HIT);
	assert_int_equal(deliver(&s, &f2, t, 0), WAKELIST);
	snap_close(&s);
}

/* H2-6: the wakee is still switching out of worker 2. */
static void test_place_wake_h2_6_wakee_still_switching(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(2);
	int t;

	(void)state;
	h2_setup(&s);
	busy(&s, 3, -1);
	/* Worker 2 has nothing else: push at once onto its wakelist. */
	assert_true(fb_place_use_wakelist(&s.v, &f, f.prev, 0));
	/* Worker 2 has another runnable fiber: wait, then place normally; an
	 * idle worker of the LLC is preferred. */
	set_busy(&s, 2, 1);
	assert_false(fb_place_use_wakelist(&s.v, &f, f.prev, 0));
	t = wake(&s, &f, 0, 0, NULL);
	assert_int_equal(t, 1);
	assert_int_equal(deliver(&s, &f, t, 0), WAKELIST);
	snap_close(&s);
}

/* ---- affinity and degenerate views -------------------------------------- */

/* An answer that the mask excludes (it changed while the fiber slept). */
static void test_place_wake_affinity_moves_off_prev(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(0);
	struct fb_wake_result r;
	cpu_set_t set;

	(void)state;
	snap_open(&s, S1, 0);
	CPU_ZERO(&set);
	CPU_SET(4, &set);
	CPU_SET(5, &set);
	f.allowed = &set;
	f.nr_allowed = 2;
	assert_int_equal(wake(&s, &f, -1, 0, &r), 4); /* scan of allowed */
	busy(&s, 0, 1, 2, 3, 4, 5, 6, 7, -1);
	CPU_ZERO(&set);
	CPU_SET(6, &set);
	set_hint(&s, 0, 0, 0);
	assert_int_equal(wake(&s, &f, 1, SYNC, &r), 6);
	assert_int_equal(r.pick, FB_PICK_AFFINITY);
	snap_close(&s);

	/* Another LLC: an idle allowed worker there first. */
	snap_open(&s, T2, 0);
	busy(&s, 0, 1, 2, 3, 4, -1);
	CPU_ZERO(&set);
	CPU_SET(4, &set);
	CPU_SET(6, &set);
	f = fiber(1);
	f.allowed = &set;
	assert_int_equal(wake(&s, &f, 0, 0, &r), 6);
	assert_int_equal(r.pick, FB_PICK_AFFINITY);
	snap_close(&s);
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Random snapshots, masks, flags and features: always an allowed worker,
 * and never a wakelist push to a worker the fiber may not use. */
/*
 * A fiber pinned to one worker wakes there with nothing looked at: no
 * probe, no wake_affine, no wakee flip on the waker, recent_used kept;
 * even from a waker alone on an idle worker of the LLC.  A mask of one
 * whose pin is stale (not the allowed worker) takes the full path.
 */
static void test_place_wake_pinned_looks_at_nothing(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(0), waker = fiber(1);
	struct fb_wake_result r;
	cpu_set_t set;

	(void)state;
	snap_open(&s, S1, 0);
	busy(&s, 0, 1, 2, 3, 4, 5, 6, -1);
	CPU_ZERO(&set);
	CPU_SET(5, &set);
	f.allowed = &set;
	f.nr_allowed = 1;
	f.pin = 5;
	f.recent_used = 3;
	assert_int_equal(wake_from(&s, &f, &waker, 1, SYNC, &r), 5);
	assert_int_equal(r.pick, FB_PICK_PINNED);
	assert_int_equal(r.probes, 0);
	assert_false(r.affine);
	assert_int_equal(waker.wakee_flips, 0);
	assert_null(waker.last_wakee);
	assert_int_equal(f.recent_used, 3);
	/* A foreign waker: the same. */
	assert_int_equal(wake(&s, &f, -1, 0, &r), 5);
	assert_int_equal(r.pick, FB_PICK_PINNED);

	/* A stale pin: the mask decides, through the usual steps. */
	f.pin = 2;
	assert_int_equal(wake_from(&s, &f, &waker, 1, SYNC, &r), 5);
	assert_int_not_equal(r.pick, FB_PICK_PINNED);
	assert_int_equal(waker.wakee_flips, 1);
	/* No mask: pin says nothing. */
	f = fiber(0);
	f.pin = 5;
	assert_int_not_equal(wake(&s, &f, 1, 0, &r), -1);
	assert_int_not_equal(r.pick, FB_PICK_PINNED);
	snap_close(&s);
}

static void test_place_wake_affinity_always_honoured(void **state)
{
	static const char *const specs[] = { S1, S2, T2, N1, N2, C1 };
	static const char *const feats[] = {
		"SIS_UTIL",   "SIS_CORE_LIMIT", "SIS_CORE_FULL",
		"WA_IDLE",    "WA_WEIGHT",	"WA_BIAS",
		"TTWU_QUEUE", "TTWU_QUEUE_IDLE"
	};
	uint64_t x = 0x9e3779b97f4a7c15ull;
	struct snap s;

	(void)state;
	for (size_t k = 0; k < FB_ARRAY_SIZE(specs); k++) {
		snap_open(&s, specs[k], 0);
		for (int it = 0; it < 3000; it++) {
			int n = s.v.nr_workers, t, this;
			struct fb_pfiber f = fiber((int)(rnd(&x) % n));
			struct fb_pfiber w = fiber(0);
			cpu_set_t set;
			char spec[256] = "";

			for (size_t b = 0; b < FB_ARRAY_SIZE(feats); b++) {
				strcat(spec, rnd(&x) & 1 ? "" : "NO_");
				strcat(spec, feats[b]);
				strcat(spec, " ");
			}
			features(spec);
			for (int i = 0; i < n; i++) {
				if (rnd(&x) % 3)
					set_busy(&s, i, 1 + (int)(rnd(&x) % 3));
				else
					set_idle(&s, i, FB_WS_SLEEPING);
				if (rnd(&x) % 8 == 0)
					fb_store_relaxed(&s.pw[i].ttwu_pending,
							 1);
			}
			for (int i = 0; i < n; i++)
				set_hint(&s, i, (int)(rnd(&x) & 1),
					 (int)(rnd(&x) % (n + 1)));
			CPU_ZERO(&set);
			CPU_SET((int)(rnd(&x) % n), &set);
			for (int i = 0; i < n; i++)
				if (rnd(&x) % 4 == 0)
					CPU_SET(i, &set);
			f.allowed = &set;
			f.recent_used = (int)(rnd(&x) % (n + 1)) - 1;
			f.wakee_flips = (unsigned)(rnd(&x) % 32);
			w.wakee_flips = (unsigned)(rnd(&x) % 512);
			f.avg.load_avg = rnd(&x) % 2048;
			this = (int)(rnd(&x) % (n + 1)) - 1;
			t = fb_place_select_wake(&s.v, &f,
						 this >= 0 ? &w : NULL, this,
						 rnd(&x) & 1 ? SYNC : 0,
						 rnd(&x), NULL);
			assert_true(t >= 0 && t < n);
			assert_true(CPU_ISSET(t, &set));
			for (int i = 0; i < n; i++)
				if (!CPU_ISSET(i, &set))
					assert_false(fb_place_use_wakelist(
						&s.v, &f, i, this));
		}
		snap_close(&s);
	}
}

/* No domain view yet: one LLC of every worker, no SMT, a full scan. */
static void test_place_wake_without_view_is_one_llc(void **state)
{
	struct snap s;
	struct fb_pfiber f = fiber(1);
	struct fb_wake_result r;

	(void)state;
	snap_open(&s, NULL, 6);
	busy(&s, 0, 1, 2, 3, 5, -1);
	assert_int_equal(wake(&s, &f, 0, 0, &r), 4);
	assert_int_equal(r.pick, FB_PICK_SCAN_HIT);
	assert_int_equal(r.probes, 4); /* 1, 2, 3, 4 */
	assert_false(fb_place_update_idle_core(&s.v, 4));
	assert_false(fb_place_update_idle_scan(&s.v, 0, NULL, 0, false));
	assert_int_equal(fb_place_llc_util(&s.v, 0), 5 * 1024);
	assert_true(fb_place_use_wakelist(&s.v, &f, 4, 0));
	assert_false(fb_place_use_wakelist(&s.v, &f, 5, 0));
	assert_false(fb_place_use_wakelist(&s.v, &f, 0, 0));
	/* A fiber that never ran (prev -1) starts from the waker's worker. */
	f = fiber(-1);
	assert_int_equal(wake(&s, &f, 3, 0, &r), 4);
	snap_close(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_place_wake_order_idle_sibling_of_prev_first),
		cmocka_unit_test(test_place_wake_order_idle_target_first),
		cmocka_unit_test(test_place_wake_order_idle_prev_second),
		cmocka_unit_test(test_place_wake_order_recent_before_sibling),
		cmocka_unit_test(test_place_wake_order_hint_skips_sibling),
		cmocka_unit_test(test_place_wake_cluster_scanned_first),
		cmocka_unit_test(test_place_wake_affine_idle_waker_worker),
		cmocka_unit_test(test_place_wake_affine_sync_pulls_to_waker),
		cmocka_unit_test(test_place_wake_affine_weight_and_bias),
		cmocka_unit_test(test_place_wake_affine_across_llcs),
		cmocka_unit_test(test_place_wake_poller_keeps_its_event),
		cmocka_unit_test(
			test_place_wake_record_wakee_counts_and_decays),
		cmocka_unit_test(test_place_wake_wide_keeps_prev),
		cmocka_unit_test(test_place_wake_foreign_waker_stays_prev),
		cmocka_unit_test(test_place_wake_h1_1_scan_depth_formula),
		cmocka_unit_test(test_place_wake_h1_2_who_writes_scan_depth),
		cmocka_unit_test(test_place_wake_h1_3_bounded_worker_scan),
		cmocka_unit_test(test_place_wake_h1_3_full_scan_finds_last),
		cmocka_unit_test(test_place_wake_scan_finds_worker_4095),
		cmocka_unit_test(test_place_wake_h1_3_overloaded_no_scan),
		cmocka_unit_test(test_place_wake_h1_4_idle_core_not_overloaded),
		cmocka_unit_test(test_place_wake_h1_5_overloaded_mainline),
		cmocka_unit_test(test_place_wake_h1_5_overloaded_core_limit),
		cmocka_unit_test(
			test_place_wake_h1_5_core_limit_finds_second_core),
		cmocka_unit_test(
			test_place_wake_h1_5_core_limit_stops_after_two),
		cmocka_unit_test(test_place_wake_h1_5_overloaded_core_full),
		cmocka_unit_test(test_place_wake_h1_6_hint_set_by_idle_core),
		cmocka_unit_test(
			test_place_wake_h1_6_failed_core_scan_clears_hint),
		cmocka_unit_test(test_place_wake_probes_per_wakeup_bounded),
		cmocka_unit_test(test_place_wake_h2_1_cross_llc_wakelist),
		cmocka_unit_test(test_place_wake_h2_2_same_llc_idle_target),
		cmocka_unit_test(test_place_wake_h2_4_busy_and_local),
		cmocka_unit_test(test_place_wake_h2_foreign_and_affinity),
		cmocka_unit_test(test_place_wake_h2_5_pending_handoff_not_idle),
		cmocka_unit_test(test_place_wake_h2_6_wakee_still_switching),
		cmocka_unit_test(test_place_wake_affinity_moves_off_prev),
		cmocka_unit_test(test_place_wake_affinity_always_honoured),
		cmocka_unit_test(test_place_wake_pinned_looks_at_nothing),
		cmocka_unit_test(test_place_wake_without_view_is_one_llc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
