/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-place-wgroup.c - wake groups (doc/scheduler.md 1.10), the pure
 * half: who joins whom, where a new group lives, where a grouped fiber's
 * wakeup goes, and the balancer's reluctance to take a fiber from its
 * home.  Synthetic topologies and hand-filled groups; no thread runs.
 */
#include "place-sim.h"

#define T4 "pack:1 l3:1 core:4 pu:1"

static struct fb_wgroup group(int home, int nr)
{
	struct fb_wgroup g;

	fb_store_relaxed(&g.home, home);
	fb_store_relaxed(&g.nr, nr);
	fb_store_relaxed(&g.moved, false);
	return g;
}

static void test_place_wgroup_join_rules(void **state)
{
	cpu_set_t *two = sim_mask(0, 1, -1);
	struct fb_pfiber a, b, pinned;
	struct fb_wgroup g = group(1, 2), full = group(0, FB_WGROUP_MAX);

	(void)state;
	sim_features(0, 0);
	sim_fiber(&a, NULL);
	sim_fiber(&b, NULL);
	sim_fiber(&pinned, two);
	/* two loners form a group; a fiber never groups with itself */
	assert_int_equal(fb_place_wgroup_join(&a, &b), FB_WGROUP_NEW);
	assert_int_equal(fb_place_wgroup_join(&a, &a), FB_WGROUP_KEEP);
	/* an affinity mask, even of several workers, keeps a fiber out */
	assert_int_equal(fb_place_wgroup_join(&pinned, &b), FB_WGROUP_KEEP);
	assert_int_equal(fb_place_wgroup_join(&a, &pinned), FB_WGROUP_KEEP);
	/* a loner joins the other's group, whichever side it is on */
	b.group = &g;
	assert_int_equal(fb_place_wgroup_join(&a, &b), FB_WGROUP_WAKER_JOINS);
	assert_int_equal(fb_place_wgroup_join(&b, &a), FB_WGROUP_WAKEE_JOINS);
	/* ... up to FB_WGROUP_MAX members */
	fb_store_relaxed(&g.nr, FB_WGROUP_MAX - 1);
	assert_int_equal(fb_place_wgroup_join(&a, &b), FB_WGROUP_WAKER_JOINS);
	b.group = &full;
	assert_int_equal(fb_place_wgroup_join(&a, &b), FB_WGROUP_KEEP);
	assert_int_equal(fb_place_wgroup_join(&b, &a), FB_WGROUP_KEEP);
	/* the same group: nothing, known without a look at the group */
	a.group = b.group = &g;
	assert_int_equal(fb_place_wgroup_join(&a, &b), FB_WGROUP_KEEP);
	assert_true(fb_place_wgroup_settled(&a, &b));
	assert_true(fb_place_wgroup_settled(&pinned, &b));
	assert_true(fb_place_wgroup_settled(&b, &pinned));
	b.group = &full;
	assert_false(fb_place_wgroup_settled(&a, &b));
	/* a loner and a full group: settled, whichever side it is on */
	a.group = NULL;
	assert_true(fb_place_wgroup_settled(&a, &b));
	assert_true(fb_place_wgroup_settled(&b, &a));
	/* ... but not while the group has room */
	b.group = &g;
	assert_false(fb_place_wgroup_settled(&a, &b));
	assert_false(fb_place_wgroup_settled(&b, &a));
	b.group = NULL;
	a.group = &g;
	assert_false(fb_place_wgroup_settled(&a, &b));
	a.group = NULL;
	assert_false(fb_place_wgroup_settled(&a, &b));
	a.group = b.group = &g;
	/* off: nothing ever */
	a.group = b.group = NULL;
	sim_features(0, FB_FEAT_BIT(WAKE_GROUPS));
	assert_int_equal(fb_place_wgroup_join(&a, &b), FB_WGROUP_KEEP);
	sim_features(0, 0);
	CPU_FREE(two);
}

static void test_place_wgroup_groups_meet(void **state)
{
	struct fb_pfiber a, b;
	struct fb_wgroup big = group(0, 40), small = group(1, 3),
			 same_home = group(0, 3), other = group(1, 40);

	(void)state;
	sim_features(0, 0);
	sim_fiber(&a, NULL);
	sim_fiber(&b, NULL);
	/* the smaller group moves to the other's home, either way round */
	a.group = &big;
	b.group = &small;
	assert_int_equal(fb_place_wgroup_join(&a, &b), FB_WGROUP_WAKEE_FOLLOWS);
	assert_int_equal(fb_place_wgroup_join(&b, &a), FB_WGROUP_WAKER_FOLLOWS);
	/* a tie: the wakee's group moves */
	b.group = &other;
	assert_int_equal(fb_place_wgroup_join(&a, &b), FB_WGROUP_WAKEE_FOLLOWS);
	assert_int_equal(fb_place_wgroup_join(&b, &a), FB_WGROUP_WAKEE_FOLLOWS);
	/* one home already: nothing */
	b.group = &same_home;
	assert_int_equal(fb_place_wgroup_join(&a, &b), FB_WGROUP_KEEP);
	/* a group that moved once never moves again */
	b.group = &small;
	fb_store_relaxed(&small.moved, true);
	assert_int_equal(fb_place_wgroup_join(&a, &b), FB_WGROUP_KEEP);
	/* ... but the other may still come to it, if it is the smaller */
	fb_store_relaxed(&big.nr, 2);
	assert_int_equal(fb_place_wgroup_join(&a, &b), FB_WGROUP_WAKER_FOLLOWS);
	/* together past FB_WGROUP_MAX: nothing */
	fb_store_relaxed(&small.moved, false);
	fb_store_relaxed(&big.nr, FB_WGROUP_MAX - 2);
	assert_int_equal(fb_place_wgroup_join(&a, &b), FB_WGROUP_KEEP);
	fb_store_relaxed(&big.nr, FB_WGROUP_MAX - 3);
	assert_int_equal(fb_place_wgroup_join(&a, &b), FB_WGROUP_WAKEE_FOLLOWS);
}

static void test_place_wgroup_home_least_homed(void **state)
{
	struct sim s;
	unsigned int homed[4] = { 0, 0, 0, 0 };

	(void)state;
	sim_open(&s, T4, false, 0);
	assert_int_equal(fb_place_wgroup_home(&s.v, homed), 0);
	homed[0] = 40;
	assert_int_equal(fb_place_wgroup_home(&s.v, homed), 1);
	homed[1] = 40;
	homed[2] = 2;
	homed[3] = 1;
	assert_int_equal(fb_place_wgroup_home(&s.v, homed), 3);
	homed[3] = 2; /* a tie: the lowest-numbered */
	assert_int_equal(fb_place_wgroup_home(&s.v, homed), 2);
	sim_close(&s);
}

static void test_place_wgroup_target(void **state)
{
	cpu_set_t *not2 = sim_mask(0, 1, 3, -1);
	struct sim s;
	struct fb_pfiber f;
	struct fb_wgroup g = group(2, 10);

	(void)state;
	sim_open(&s, T4, false, 0);
	sim_fiber(&f, NULL);
	sim_set(&s, 0, 3);
	sim_set(&s, 1, 3);
	sim_set(&s, 2, 7);
	/* no group: the usual answer */
	assert_int_equal(fb_place_wgroup_target(&s.v, &f, 1), 1);
	/* a busy answer gives way to a home up to 150% of (its 3 + 2) */
	f.group = &g;
	assert_int_equal(fb_place_wgroup_target(&s.v, &f, 1), 2);
	assert_int_equal(fb_place_wgroup_target(&s.v, &f, 2), 2);
	sim_set(&s, 2, 8);
	assert_int_equal(fb_place_wgroup_target(&s.v, &f, 1), 1);
	sim_set(&s, 1, 4); /* (4 + 2) x 150% = 9 */
	assert_int_equal(fb_place_wgroup_target(&s.v, &f, 1), 2);
	sim_set(&s, 2, 9);
	assert_int_equal(fb_place_wgroup_target(&s.v, &f, 1), 2);
	sim_set(&s, 2, 10);
	assert_int_equal(fb_place_wgroup_target(&s.v, &f, 1), 1);
	sim_set(&s, 2, 5);
	/* an idle answer wins over a busy home ... */
	assert_int_equal(fb_place_wgroup_target(&s.v, &f, 3), 3);
	/* ... but not over an idle one */
	sim_set(&s, 2, 0);
	assert_int_equal(fb_place_wgroup_target(&s.v, &f, 3), 2);
	/* a home the fiber does not allow, or past the view: the answer */
	sim_set(&s, 2, 5);
	f.allowed = not2;
	f.nr_allowed = 3;
	assert_int_equal(fb_place_wgroup_target(&s.v, &f, 1), 1);
	f.allowed = NULL;
	f.nr_allowed = 0;
	fb_store_relaxed(&g.home, 4);
	assert_int_equal(fb_place_wgroup_target(&s.v, &f, 1), 1);
	fb_store_relaxed(&g.home, -1);
	assert_int_equal(fb_place_wgroup_target(&s.v, &f, 1), 1);
	/* off: the answer */
	fb_store_relaxed(&g.home, 2);
	sim_features(0, FB_FEAT_BIT(WAKE_GROUPS));
	assert_int_equal(fb_place_wgroup_target(&s.v, &f, 1), 1);
	sim_close(&s);
	CPU_FREE(not2);
}

/*
 * The balancer, on two LLCs of four workers: of three queued fibers of
 * worker 4, the one at its group's home (4) is held back like a
 * cache-hot one until balancing has failed more than cache_nice_tries
 * times; a fiber whose home is elsewhere, or with no group, goes.
 */
static void test_place_wgroup_balance_keeps_home(void **state)
{
	struct sim s;
	struct fb_lb_env e;
	struct fb_pfiber f[3];
	struct fb_lb_candidate c[3];
	struct fb_wgroup home4 = group(4, 2), home0 = group(0, 2);
	struct fb_domain *d;

	(void)state;
	sim_open(&s, "pack:1 l3:2 core:4 pu:1", false, 0);
	d = sim_level(&s, 0, "PKG", 0);
	sim_set(&s, 4, 4);
	for (int k = 0; k < 3; k++) {
		sim_fiber(&f[k], NULL);
		f[k].last_ran_ns = 0; /* cold */
		c[k] = (struct fb_lb_candidate){ &f[k], false, false };
	}
	f[0].group = &home4;
	f[1].group = &home0;
	fb_place_lb_init(&e, &s.v, d, 0, FB_LB_IDLE, 100 * MS, 100);
	assert_int_equal(fb_place_lb_find(&e), FB_LB_PULL);
	assert_int_equal(e.src, 4);
	e.imbalance = 3;
	e.type = FB_MIGRATE_TASK;
	assert_int_equal(fb_place_lb_detach(&e, c, 3), 2);
	assert_false(c[0].move); /* at home */
	assert_true(c[1].move);	 /* its home is 0, where it goes */
	assert_true(c[2].move);	 /* no group */
	/* after enough failures it goes too */
	for (int k = 0; k < 3; k++)
		c[k].move = false;
	d->nr_balance_failed = (unsigned)d->cache_nice_tries + 1;
	e.imbalance = 3;
	assert_int_equal(fb_place_lb_detach(&e, c, 3), 3);
	assert_true(c[0].move);
	/* and with WAKE_GROUPS off the home counts for nothing */
	for (int k = 0; k < 3; k++)
		c[k].move = false;
	d->nr_balance_failed = 0;
	sim_features(0, FB_FEAT_BIT(WAKE_GROUPS));
	e.imbalance = 3;
	assert_int_equal(fb_place_lb_detach(&e, c, 3), 3);
	sim_close(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_place_wgroup_join_rules),
		cmocka_unit_test(test_place_wgroup_groups_meet),
		cmocka_unit_test(test_place_wgroup_home_least_homed),
		cmocka_unit_test(test_place_wgroup_target),
		cmocka_unit_test(test_place_wgroup_balance_keeps_home),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
