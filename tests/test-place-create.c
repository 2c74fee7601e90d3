// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * test-place-create.c - creation placement (doc/scheduler.md 1.4.4), the group
 * classification (doc/scheduler.md 1.5) and NUMA_IMB / NUMA_IMB_AFFINITY
 * (doc/scheduler.md 5.5), white box and pure: synthetic topologies, a filled
 * snapshot, one decision per assertion, no threads.
 */
#include "place-sim.h"

/* ---- classification (doc/scheduler.md 1.5) ----------------------------- */

static struct fb_group_stats stats(int weight, int nr, unsigned long util,
				   unsigned long runnable)
{
	struct fb_group_stats s = { 0 };

	s.weight = weight;
	s.capacity = 1024ul * (unsigned long)weight;
	s.nr_running = nr;
	s.util = util;
	s.runnable = runnable;
	return s;
}

static void test_group_classify_spare_busy_overloaded(void **state)
{
	struct fb_group_stats s;

	(void)state;
	s = stats(2, 1, 1024, 1024); /* fewer fibers than workers */
	assert_true(fb_group_has_capacity(&s, FB_LEVEL_PCT_LLC));
	assert_int_equal(fb_group_classify(&s, FB_LEVEL_PCT_LLC, false, false,
					   false),
			 FB_GROUP_HAS_SPARE);
	s = stats(1, 1, 1024, 1024); /* one busy worker: util over 1024/1.17 */
	assert_false(fb_group_has_capacity(&s, FB_LEVEL_PCT_LLC));
	assert_int_equal(fb_group_classify(&s, FB_LEVEL_PCT_LLC, false, false,
					   false),
			 FB_GROUP_FULLY_BUSY);
	s = stats(1, 1, 800, 800); /* util 800 x 117 < 1024 x 100 */
	assert_int_equal(fb_group_classify(&s, FB_LEVEL_PCT_LLC, false, false,
					   false),
			 FB_GROUP_HAS_SPARE);
	s = stats(1, 3, 1024, 3072);
	assert_true(fb_group_is_overloaded(&s, FB_LEVEL_PCT_LLC));
	assert_int_equal(fb_group_classify(&s, FB_LEVEL_PCT_LLC, true, true,
					   true),
			 FB_GROUP_OVERLOADED);
	s = stats(1, 3, 10, 10); /* many fibers, little load: not overloaded */
	assert_false(fb_group_is_overloaded(&s, FB_LEVEL_PCT_LLC));
	assert_int_equal(fb_group_classify(&s, FB_LEVEL_PCT_LLC, false, false,
					   false),
			 FB_GROUP_HAS_SPARE);
}

static void test_group_classify_order_after_overloaded(void **state)
{
	struct fb_group_stats s = stats(2, 1, 1024, 1024);

	(void)state;
	assert_int_equal(fb_group_classify(&s, FB_LEVEL_PCT_LLC, true, true,
					   true),
			 FB_GROUP_IMBALANCED);
	assert_int_equal(fb_group_classify(&s, FB_LEVEL_PCT_LLC, false, true,
					   true),
			 FB_GROUP_ASYM_PACKING);
	assert_int_equal(fb_group_classify(&s, FB_LEVEL_PCT_LLC, false, false,
					   true),
			 FB_GROUP_SMT_BALANCE);
	assert_true(FB_GROUP_HAS_SPARE < FB_GROUP_FULLY_BUSY &&
		    FB_GROUP_FULLY_BUSY < FB_GROUP_MISFIT &&
		    FB_GROUP_MISFIT < FB_GROUP_SMT_BALANCE &&
		    FB_GROUP_SMT_BALANCE < FB_GROUP_ASYM_PACKING &&
		    FB_GROUP_ASYM_PACKING < FB_GROUP_IMBALANCED &&
		    FB_GROUP_IMBALANCED < FB_GROUP_OVERLOADED);
}

/* ---- numa_adjust (doc/scheduler.md 5.2.2) ------------------------------ */

static void test_place_numa_adjust_tolerates_small_imbalance(void **state)
{
	(void)state;
	sim_features(0, 0);
	assert_int_equal(fb_place_numa_adjust(2, 4, 4), 0);
	assert_int_equal(fb_place_numa_adjust(3, 4, 4), 3);
	assert_int_equal(fb_place_numa_adjust(1, 5, 4), 1);
	sim_features(0, FB_FEAT_BIT(NUMA_IMB));
	assert_int_equal(fb_place_numa_adjust(2, 1, 4), 2);
	sim_features(0, 0);
}

/* ---- H4-2 (doc/scheduler.md 5.5) --------------------------------------- */

/* numa_choice - N1, creator on 0, @lnr busy in node 0, @rnr in node 1:
 * does find_idlest_group at the NUMA level leave node 0? */
static bool numa_choice(int lnr, int rnr, uint64_t off)
{
	struct sim s;
	struct fb_pfiber f;
	const struct fb_domain *d;
	int k;

	sim_open(&s, "pack:2 numa:1 l3:4 core:2 pu:1", false, 0);
	sim_features(0, off);
	for (int i = 0; i < lnr; i++)
		sim_set(&s, i, 1);
	for (int i = 0; i < rnr; i++)
		sim_set(&s, 8 + i, 1);
	sim_fiber(&f, NULL);
	d = sim_level(&s, 0, "NUMA", 0);
	assert_int_equal(d->imb_numa_nr, 4);
	k = fb_place_find_idlest_group(&s.v, d, &f, 0, NULL);
	if (k >= 0)
		assert_true(fb_wmask_test(&d->groups[k].span, 8));
	sim_close(&s);
	return k >= 0;
}

static void test_place_create_h4_2_numa_level_decision(void **state)
{
	(void)state;
	assert_false(numa_choice(1, 0, 0)); /* idle 7 vs 8: stay */
	assert_false(numa_choice(2, 0, 0)); /* 6 vs 8: stay */
	assert_true(numa_choice(3, 0, 0));  /* 5 vs 8: 3 > 2, remote */
	assert_true(numa_choice(4, 2, 0));  /* 5 running > 4: remote */
	assert_true(numa_choice(1, 0, FB_FEAT_BIT(NUMA_IMB)));
}

/* ---- H4-3, H4-4: end to end on the snapshot ----------------------------- */

/* place_four - N1, parent on 1; four CPU-bound fibers created in turn,
 * each seeing the earlier ones running. */
static void place_four(cpu_set_t *allowed, uint64_t off, int out[4],
		       unsigned *kept)
{
	struct sim s;
	struct fb_create_info info = { 0 };

	sim_open(&s, "pack:2 numa:1 l3:4 core:2 pu:1", false, 0);
	sim_features(0, off);
	sim_set(&s, 1, 1);
	for (int k = 0; k < 4; k++) {
		struct fb_pfiber f;
		int w;

		sim_fiber(&f, allowed);
		w = fb_place_select_create(&s.v, &f, 1, &info);
		out[k] = w;
		sim_set(&s, w, s.pw[w].nr_running + 1);
	}
	if (kept)
		*kept = info.nr_numa_imb_kept;
	sim_close(&s);
}

static void test_place_create_h4_3_affinity_spreads_over_nodes(void **state)
{
	cpu_set_t *m = sim_mask(0, 2, 8, 10, -1);
	int out[4];

	(void)state;
	place_four(m, 0, out, NULL);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 2);
	assert_int_equal(out[2], 8);
	assert_int_equal(out[3], 10);
	CPU_FREE(m);
}

static void test_place_create_h4_3_without_affinity_piles_on_node0(void **state)
{
	cpu_set_t *m = sim_mask(0, 2, 8, 10, -1);
	unsigned kept = 0;
	int out[4];

	(void)state;
	place_four(m, FB_FEAT_BIT(NUMA_IMB_AFFINITY), out, &kept);
	for (int k = 0; k < 4; k++)
		assert_true(out[k] == 0 || out[k] == 2);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 2);
	assert_true(kept > 0);
	CPU_FREE(m);
}

static void test_place_create_h4_4_unrestricted_is_unchanged(void **state)
{
	int a[4], b[4];

	(void)state;
	place_four(NULL, 0, a, NULL);
	place_four(NULL, FB_FEAT_BIT(NUMA_IMB_AFFINITY), b, NULL);
	assert_memory_equal(a, b, sizeof(a));
	/* Node 0 keeps two (idle 7 and 6 against 8), the third leaves. */
	assert_true(a[0] < 8 && a[1] < 8 && a[2] >= 8);
}

static void test_place_create_h4_4_node0_fiber_never_leaves(void **state)
{
	cpu_set_t *m = sim_mask(0, 1, 2, 3, 4, 5, 6, 7, -1);
	struct sim s;
	struct fb_pfiber f;

	(void)state;
	sim_open(&s, "pack:2 numa:1 l3:4 core:2 pu:1", false, 0);
	for (int i = 0; i < 8; i++)
		sim_set(&s, i, 2);
	sim_fiber(&f, m);
	assert_int_equal(fb_place_find_idlest_group(&s.v,
						    sim_level(&s, 1, "NUMA", 0),
						    &f, 1, NULL),
			 -1);
	assert_true(fb_place_select_create(&s.v, &f, 1, NULL) < 8);
	sim_close(&s);
	CPU_FREE(m);
}

/* ---- H4-6 far nodes ----------------------------------------------------- */

static int create_n4(const char *xml)
{
	struct sim s;
	struct fb_pfiber f;
	int w;

	sim_open(&s, xml, true, 0);
	for (int i = 0; i < 16; i++)
		sim_set(&s, i, 1);
	sim_fiber(&f, NULL);
	w = fb_place_select_create(&s.v, &f, 0, NULL);
	sim_close(&s);
	return w;
}

static void test_place_create_h4_6_far_level_is_not_crossed(void **state)
{
	(void)state;
	assert_true(create_n4("n4-far.xml") < 16);
	assert_true(create_n4("n4.xml") >= 16);
}

/* ---- find_idlest_worker_in (doc/scheduler.md 1.4.4) -------------------- */

static void test_place_idlest_worker_in_prefers_shallow_then_warm(void **state)
{
	struct sim s;
	struct fb_pfiber f;
	const struct fb_domain *d;

	(void)state;
	sim_open(&s, "pack:1 l3:1 core:8 pu:1", false, 0);
	d = sim_level(&s, 0, "LLC", 0);
	(void)d;
	for (int i = 0; i < 8; i++)
		sim_set(&s, i, 1);
	s.pw[3].avg.load_avg = 100;
	sim_fiber(&f, NULL);
	{
		struct fb_sched_group all = { .weight = 8 };

		all.span = sim_level(&s, 0, "LLC", 0)->span;
		/* none idle: the least loaded */
		assert_int_equal(fb_place_find_idlest_worker_in(&s.v, &all, &f),
				 3);
		sim_set(&s, 5, 0);
		s.pw[5].state = FB_WS_SLEEPING;
		s.pw[5].idle_stamp = 900;
		sim_set(&s, 6, 0);
		s.pw[6].state = FB_WS_SLEEPING;
		s.pw[6].idle_stamp = 1000;
		/* both sleeping: the most recent idle_stamp */
		assert_int_equal(fb_place_find_idlest_worker_in(&s.v, &all, &f),
				 6);
		sim_set(&s, 7, 0);
		s.pw[7].idle_stamp = 10;
		/* polling beats sleeping */
		assert_int_equal(fb_place_find_idlest_worker_in(&s.v, &all, &f),
				 7);
	}
	sim_close(&s);
}

static void test_place_create_stays_allowed_without_view(void **state)
{
	cpu_set_t *m = sim_mask(5, -1);
	struct sim s;
	struct fb_pfiber f;

	(void)state;
	sim_open(&s, "pack:1 l3:1 core:8 pu:1", false, 0);
	sim_fiber(&f, m);
	assert_int_equal(fb_place_select_create(&s.v, &f, 0, NULL), 5);
	assert_int_equal(fb_place_select_create(&s.v, &f, -1, NULL), 5);
	s.v.topo = NULL;
	sim_set(&s, 5, 3);
	assert_int_equal(fb_place_select_create(&s.v, &f, 0, NULL), 5);
	sim_fiber(&f, NULL);
	sim_set(&s, 0, 1);
	assert_int_equal(fb_place_select_create(&s.v, &f, 0, NULL), 1);
	sim_close(&s);
	CPU_FREE(m);
}

/*
 * A foreign creator's fiber starts from a round-robin worker whose counter
 * belongs to the view's global state (doc/scheduler.md 1.4.4): two views
 * count independently, and setting the counter sets the next start (no
 * domain view, all idle: the answer is the start itself).
 */
static void test_place_create_foreign_round_robin_is_per_view(void **state)
{
	struct sim a, b;
	struct fb_pfiber f;

	(void)state;
	sim_open(&a, "pack:1 l3:1 core:8 pu:1", false, 0);
	sim_open(&b, "pack:1 l3:1 core:8 pu:1", false, 0);
	a.v.topo = NULL;
	b.v.topo = NULL;
	sim_fiber(&f, NULL);
	assert_int_equal(fb_place_select_create(&a.v, &f, -1, NULL), 0);
	assert_int_equal(fb_place_select_create(&a.v, &f, -1, NULL), 1);
	assert_int_equal(fb_place_select_create(&b.v, &f, -1, NULL), 0);
	assert_int_equal(fb_place_select_create(&a.v, &f, -1, NULL), 2);
	b.g.create_rr = 13;
	assert_int_equal(fb_place_select_create(&b.v, &f, -1, NULL), 5);
	a.v.g = NULL; /* no global state: worker 0 */
	assert_int_equal(fb_place_select_create(&a.v, &f, -1, NULL), 0);
	a.v.g = &a.g;
	sim_close(&a);
	sim_close(&b);
}

static void test_place_create_goes_to_idle_llc(void **state)
{
	struct sim s;
	struct fb_pfiber f;

	(void)state;
	sim_open(&s, "pack:1 l3:2 core:4 pu:1", false, 0); /* T2 */
	for (int i = 0; i < 4; i++)
		sim_set(&s, i, 1);
	sim_fiber(&f, NULL);
	assert_true(fb_place_select_create(&s.v, &f, 0, NULL) >= 4);
	sim_set(&s, 4, 1);
	sim_set(&s, 0, 0);
	/* the creator's LLC has an idle worker and fewer idle than LLC1:
	 * LLC1 has 3 idle, LLC0 1: move */
	assert_true(fb_place_select_create(&s.v, &f, 1, NULL) >= 4);
	sim_close(&s);
}

/*
 * CREATE_AFFINE (doc/scheduler.md 1.4.6) on S2: the creator on worker 0 is
 * alone there (nr_running 1) while 1..7 idle: keep the new fiber on 0,
 * where select_create would have spread it.  Not with a second runnable
 * fiber on 0, a handoff in flight, a foreign creator, a fiber that may
 * not run on 0, or the flag off.
 */
static void test_place_create_affine_for_a_lone_creator(void **state)
{
	cpu_set_t *m = sim_mask(3, 4, -1);
	struct sim s;
	struct fb_pfiber f, g;

	(void)state;
	sim_open(&s, "pack:1 l3:1 core:8 pu:1", false, 0);
	sim_fiber(&f, NULL);
	sim_fiber(&g, m);
	sim_set(&s, 0, 1);
	assert_true(fb_place_create_affine(&s.v, &f, 0));
	assert_int_not_equal(fb_place_select_create(&s.v, &f, 0, NULL), 0);
	assert_false(fb_place_create_affine(&s.v, &f, -1));
	assert_false(fb_place_create_affine(&s.v, &g, 0));
	assert_true(fb_place_create_affine(&s.v, &g, 3));
	/* a creator's worker that had nothing at the last snapshot */
	sim_set(&s, 0, 0);
	assert_true(fb_place_create_affine(&s.v, &f, 0));
	sim_set(&s, 0, 2);
	assert_false(fb_place_create_affine(&s.v, &f, 0));
	sim_set(&s, 0, 1);
	s.pw[0].ttwu_pending = 1;
	assert_false(fb_place_create_affine(&s.v, &f, 0));
	s.pw[0].ttwu_pending = 0;
	sim_features(0, FB_FEAT_BIT(CREATE_AFFINE));
	assert_false(fb_place_create_affine(&s.v, &f, 0));
	sim_close(&s);
	CPU_FREE(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_group_classify_spare_busy_overloaded),
		cmocka_unit_test(test_group_classify_order_after_overloaded),
		cmocka_unit_test(
			test_place_numa_adjust_tolerates_small_imbalance),
		cmocka_unit_test(test_place_create_h4_2_numa_level_decision),
		cmocka_unit_test(
			test_place_create_h4_3_affinity_spreads_over_nodes),
		cmocka_unit_test(
			test_place_create_h4_3_without_affinity_piles_on_node0),
		cmocka_unit_test(
			test_place_create_h4_4_unrestricted_is_unchanged),
		cmocka_unit_test(
			test_place_create_h4_4_node0_fiber_never_leaves),
		cmocka_unit_test(
			test_place_create_h4_6_far_level_is_not_crossed),
		cmocka_unit_test(
			test_place_idlest_worker_in_prefers_shallow_then_warm),
		cmocka_unit_test(test_place_create_stays_allowed_without_view),
		cmocka_unit_test(test_place_create_goes_to_idle_llc),
		cmocka_unit_test(
			test_place_create_foreign_round_robin_is_per_view),
		cmocka_unit_test(test_place_create_affine_for_a_lone_creator),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
