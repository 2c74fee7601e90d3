// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * test-place-idle.c - newly-idle balancing (doc/scheduler.md 1.7, NI_RANDOM),
 * the periodic trigger (doc/scheduler.md 1.6.8), balancing for sleeping workers
 * (doc/scheduler.md 1.8) and the blocked-load rules of doc/scheduler.md 6.2
 * (scenarios H5-1..H5-5 of doc/scheduler.md 6.5, H3-6 of doc/scheduler.md 4.5),
 * white box and pure: time, ticks and random draws are arguments, the runtime's
 * hooks are fakes that count, and timing scenarios are simulation loops over
 * ticks.
 */
#include "place-sim.h"

#define A1 "pack:1 l3:1 core:4 pu:1"
#define P FB_PELT_PERIOD_NS

/* Fake runtime hooks: a settable clock, counters, a balance that pulls
 * nothing but runs the real decision (so its refreshes happen). */
struct fake {
	struct sim *s;
	uint64_t clock, now, tick;
	uint64_t decay_cost, balance_cost;
	int nr_balance;
};

static uint64_t fake_clock(void *arg)
{
	return ((struct fake *)arg)->clock;
}

static void fake_decay(void *arg, int w)
{
	struct fake *f = arg;

	f->clock += f->decay_cost;
	fb_place_decay_blocked(&f->s->pw[w], f->now, f->tick);
}

static void refresh_hook(struct fb_lb_env *env, int i)
{
	fb_place_refresh_sleeping(env->v, i, env->now_ns, env->now_tick);
}

static int fake_balance(void *arg, int dst, struct fb_domain *d,
			enum fb_idle_kind kind, bool *stop)
{
	struct fake *f = arg;
	struct fb_lb_env e;

	fb_place_lb_init(&e, &f->s->v, d, dst, kind, f->now, f->tick);
	e.refresh = refresh_hook;
	*stop = fb_place_lb_find(&e) == FB_LB_SKIP;
	f->clock += f->balance_cost;
	f->nr_balance++;
	return 0;
}

static struct fb_balance_ops ops_of(struct fake *f)
{
	return (struct fb_balance_ops){ .balance = fake_balance,
					.clock = fake_clock,
					.decay = fake_decay,
					.arg = f };
}

/* ran_then_blocked - worker @w's averages: a fiber ran 30 periods from 0,
 * then blocked (util about 489). */
static void ran_then_blocked(struct sim *s, int w)
{
	fb_pelt_reset(&s->pw[w].avg, 0);
	fb_pelt_update_worker(&s->pw[w].avg, 30 * P, 1024, 1, true);
	fb_pelt_update_worker(&s->pw[w].avg, 30 * P, 0, 0, false);
	assert_in_range(s->pw[w].avg.util_avg, 480, 500);
}

static void sleep_all(struct sim *s, int from, int to)
{
	for (int i = from; i <= to; i++) {
		s->pw[i].nr_running = 0;
		s->pw[i].state = FB_WS_SLEEPING;
		fb_place_sleep_enter(&s->v, i);
	}
}

/* ---- H5-1 ---------------------------------------------------------------- */

static void test_place_idle_h5_1_once_per_tick(void **state)
{
	struct sim s;
	struct fb_pworker *w2;

	(void)state;
	sim_open(&s, A1, false, 0);
	ran_then_blocked(&s, 2);
	sleep_all(&s, 1, 3);
	w2 = &s.pw[2];
	assert_true(fb_place_refresh_sleeping(&s.v, 2, 40 * MS, 40));
	assert_true(fb_place_refresh_sleeping(&s.v, 2, 40 * MS, 40));
	assert_int_equal(w2->nr_blocked_decays, 1);
	/* Two refreshers in tick 41, B starting while A decays. */
	fb_place_blocked_stamp(w2, 41);
	assert_true(fb_place_refresh_sleeping(&s.v, 2, 41 * MS, 41)); /* B */
	fb_place_blocked_decay(w2, 41 * MS);
	assert_int_equal(w2->nr_blocked_decays, 2);
	/* NO_BLOCKED_LOAD_RATELIMIT: the stamp comes last, B decays too. */
	sim_features(0, FB_FEAT_BIT(BLOCKED_LOAD_RATELIMIT));
	fb_place_blocked_decay(w2, 42 * MS);
	assert_true(fb_place_refresh_sleeping(&s.v, 2, 42 * MS, 42)); /* B */
	fb_place_blocked_stamp(w2, 42);
	assert_int_equal(w2->nr_blocked_decays, 4);
	/* not sleeping, or nothing blocked: no decay */
	assert_false(fb_place_refresh_sleeping(&s.v, 0, 50 * MS, 50));
	sim_close(&s);
}

/* LIBFIBER_BLOCKED_LOAD_INTERVAL_MS=50 (the seed's proposal): a sleeper
 * refreshed at tick 40 is not refreshed again before tick 90. */
static void test_place_idle_blocked_load_interval_knob(void **state)
{
	struct sim s;
	struct fb_pworker *w2;

	(void)state;
	sim_open(&s, A1, false, 0);
	ran_then_blocked(&s, 2);
	sleep_all(&s, 1, 3);
	w2 = &s.pw[2];
	assert_true(fb_place_refresh_sleeping(&s.v, 2, 40 * MS, 40));
	assert_int_equal(w2->nr_blocked_decays, 1);
	s.g.blocked_min_ticks = 50;
	assert_true(fb_place_refresh_sleeping(&s.v, 2, 41 * MS, 41));
	assert_true(fb_place_refresh_sleeping(&s.v, 2, 89 * MS, 89));
	assert_int_equal(w2->nr_blocked_decays, 1);
	assert_true(fb_place_refresh_sleeping(&s.v, 2, 90 * MS, 90));
	assert_int_equal(w2->nr_blocked_decays, 2);
	sim_close(&s);
}

/* ---- H5-2 ---------------------------------------------------------------- */

static void test_place_idle_h5_2_stats_cadence_and_stop(void **state)
{
	struct sim s;
	uint64_t t0 = 30 * P, last = 0;
	int kicks = 0, wakes = 0, late = 0;

	(void)state;
	sim_open(&s, A1, false, 0);
	sim_set(&s, 0, 1);
	ran_then_blocked(&s, 2);
	sleep_all(&s, 1, 3);
	for (uint64_t ms = 1; ms <= 600; ms++) {
		uint64_t now = t0 + ms * MS, tick = now / MS;
		unsigned f = fb_place_kick_flags(&s.v, 0, now), got;
		struct fb_nohz_result r;
		int t;

		if (!f || (t = fb_place_kick(&s.v, 0, f, now, MS)) < 0)
			continue;
		wakes++;
		got = atomic_exchange(&s.pw[t].kick_flags, 0);
		if (got & FB_KICK_STATS) {
			if (kicks)
				assert_true(now - last > 32 * MS);
			kicks++;
			last = now;
			late += ms > 350;
		}
		fb_place_nohz_pass(&s.v, t, got, now, tick, MS, NULL, &r);
	}
	assert_in_range(kicks, 9, 12);
	assert_int_equal(late, 0);
	assert_int_equal(wakes, kicks);
	assert_false(s.pw[2].has_blocked_load);
	assert_false(s.g.has_blocked);
	sim_close(&s);
}

/* ---- H5-3 ---------------------------------------------------------------- */

static uint64_t others_decays(struct sim *s)
{
	return s->pw[1].nr_blocked_decays + s->pw[2].nr_blocked_decays;
}

static void newidle_h5_3(uint64_t avg_idle, bool ratelimit)
{
	struct sim s;
	struct fake f = { 0 };
	struct fb_balance_ops ops;
	struct fb_newidle_result r;
	struct fb_nohz_result nr;

	sim_open(&s, A1, false, 0);
	sim_features(0,
		     FB_FEAT_BIT(NI_RANDOM) |
			     (ratelimit ? 0 :
					  FB_FEAT_BIT(BLOCKED_LOAD_RATELIMIT)));
	f.s = &s;
	f.now = 100 * MS;
	f.tick = 100;
	ops = ops_of(&f);
	sim_set(&s, 0, 2);
	ran_then_blocked(&s, 1);
	ran_then_blocked(&s, 2);
	sleep_all(&s, 1, 2);
	s.g.overloaded = true;
	s.pw[3].avg_idle = avg_idle;
	fb_place_newidle(&s.v, 3, f.now, f.tick, &ops, &r);
	assert_int_equal(r.nr_balances, 1);
	if (ratelimit) {
		assert_int_equal(others_decays(&s), 0);
		assert_int_equal(r.idle_entry,
				 avg_idle >= FB_MIGRATION_COST_NS ?
					 FB_IDLE_ENTRY_LOCAL :
					 FB_IDLE_ENTRY_NONE);
		if (fb_place_sleep_stats_due(&s.v, 3, false)) {
			/* the STATS pass, by worker 3 itself: no futex wake */
			fb_place_nohz_pass(&s.v, 3, FB_KICK_STATS, f.now,
					   f.tick, MS, &ops, &nr);
			assert_int_equal(nr.nr_refreshed, 2);
		}
	} else {
		assert_int_equal(s.pw[1].nr_blocked_decays, 1);
		assert_int_equal(s.pw[2].nr_blocked_decays, 1);
		assert_int_equal(r.idle_entry, FB_IDLE_ENTRY_KICK);
	}
	sim_close(&s);
}

static void test_place_idle_h5_3_newidle_stays_local(void **state)
{
	(void)state;
	newidle_h5_3(2 * MS, true);
	newidle_h5_3(200 * US, true);
	newidle_h5_3(2 * MS, false);
}

/* ---- H5-4 ---------------------------------------------------------------- */

static void newidle_gate(bool overloaded, uint64_t avg_idle, bool ratelimit,
			 int balances, int own)
{
	struct sim s;
	struct fake f = { 0 };
	struct fb_balance_ops ops;
	struct fb_newidle_result r;
	struct fb_domain *d0;

	sim_open(&s, A1, false, 0);
	sim_features(0,
		     FB_FEAT_BIT(NI_RANDOM) |
			     (ratelimit ? 0 :
					  FB_FEAT_BIT(BLOCKED_LOAD_RATELIMIT)));
	f.s = &s;
	f.now = 100 * MS;
	f.tick = 100;
	f.clock = 1000 * MS;
	f.decay_cost = 100 * US;
	f.balance_cost = 20 * US;
	ops = ops_of(&f);
	d0 = s.sv->sd[3];
	d0->max_newidle_lb_cost = 300 * US;
	d0->last_decay_max_lb_cost = f.now;
	s.g.overloaded = overloaded;
	s.pw[3].avg_idle = avg_idle;
	s.pw[3].has_blocked_load = true;
	fb_place_newidle(&s.v, 3, f.now, f.tick, &ops, &r);
	assert_int_equal(r.nr_balances, balances);
	assert_int_equal(s.pw[3].nr_blocked_decays, own);
	assert_int_equal(r.gated, balances == 0);
	if (balances && ratelimit) {
		/* the decay is charged to the first domain: 100 + 20 us */
		assert_int_equal(s.pw[3].max_idle_balance_cost, 500 * US);
		assert_int_equal(d0->max_newidle_lb_cost, 300 * US);
	}
	sim_close(&s);
}

static void test_place_idle_h5_4_gate(void **state)
{
	(void)state;
	newidle_gate(false, 2 * MS, true, 0, 0);
	newidle_gate(true, 200 * US, true, 0, 0);
	newidle_gate(true, 2 * MS, true, 1, 1);
	newidle_gate(false, 2 * MS, false, 0, 1);
	newidle_gate(true, 200 * US, false, 0, 1);
}

static void test_place_idle_newidle_cost_includes_decay(void **state)
{
	struct sim s;
	struct fake f = { 0 };
	struct fb_balance_ops ops;
	struct fb_newidle_result r;

	(void)state;
	sim_open(&s, A1, false, 0);
	sim_features(0, FB_FEAT_BIT(NI_RANDOM));
	f.s = &s;
	f.now = 100 * MS;
	f.decay_cost = 700 * US;
	f.balance_cost = 20 * US;
	ops = ops_of(&f);
	s.g.overloaded = true;
	s.pw[3].avg_idle = 2 * MS;
	fb_place_newidle(&s.v, 3, f.now, f.tick, &ops, &r);
	assert_int_equal(s.sv->sd[3]->max_newidle_lb_cost, 720 * US);
	assert_int_equal(s.pw[3].max_idle_balance_cost, 720 * US);
	assert_int_equal(s.pw[3].idle_stamp, f.now);
	sim_close(&s);
}

/* ---- H5-5 ---------------------------------------------------------------- */

static void ni_domain(struct fb_domain *d)
{
	memset(d, 0, sizeof(*d));
	d->newidle_call = FB_NEWIDLE_CALLS_INIT;
	d->newidle_success = FB_NEWIDLE_SUCCESS_INIT;
	d->newidle_ratio = FB_NEWIDLE_RATIO_INIT;
}

/* A newly-idle balance that NI_RANDOM skips says at which level. */
static void test_place_idle_ni_random_skip_names_the_level(void **state)
{
	struct sim s;
	struct fake f = { 0 };
	struct fb_balance_ops ops;
	struct fb_newidle_result r;
	struct fb_domain *d0;

	(void)state;
	sim_open(&s, A1, false, 0);
	sim_features(FB_FEAT_BIT(NI_RANDOM), 0);
	f.s = &s;
	f.now = 100 * MS;
	f.tick = 100;
	ops = ops_of(&f);
	d0 = s.sv->sd[3];
	d0->newidle_call = FB_NEWIDLE_CALLS_INIT;
	d0->newidle_success = 0;
	d0->newidle_ratio = 0; /* nothing pulled lately: draws > 1 skip */
	s.pw[3].rng = 12345;   /* a draw above 1 (checked below) */
	s.g.overloaded = true;
	s.pw[3].avg_idle = 2 * MS;
	fb_place_newidle(&s.v, 3, f.now, f.tick, &ops, &r);
	assert_int_equal(r.nr_balances, 0);
	assert_int_equal(r.nr_skipped, 1);
	assert_int_equal(r.skipped_levels, 1u << d0->level);
	sim_close(&s);
}

static void test_place_idle_h5_5_ni_random_bookkeeping(void **state)
{
	struct fb_domain d;
	unsigned w;

	(void)state;
	sim_features(0, 0);
	ni_domain(&d);
	assert_true(fb_place_ni_random_run(&d, 400, &w));
	assert_int_equal(w, 2);
	assert_true(fb_place_ni_random_run(&d, 513, &w));
	assert_false(fb_place_ni_random_run(&d, 600, &w));
	assert_int_equal(d.newidle_call, 513); /* the skip counted */
	fb_place_newidle_stats(&d, 2);
	assert_int_equal(d.newidle_success, 258);
	/* The window is 1024 calls: from 512 calls in, the ratio holds for
	 * 511 more and moves at the 512th, when the counts halve. */
	ni_domain(&d);
	for (int k = 0; k < 511; k++) {
		fb_place_newidle_stats(&d, 1);
		assert_int_equal(d.newidle_ratio, FB_NEWIDLE_RATIO_INIT);
	}
	assert_int_equal(d.newidle_call, 1023);
	fb_place_newidle_stats(&d, 1);
	assert_int_equal(d.newidle_ratio, 256 + 512);
	assert_int_equal(d.newidle_call, 512);
	assert_int_equal(d.newidle_success, (256 + 512) / 2);
	/* every run pulls: the ratio climbs to about 1024 */
	ni_domain(&d);
	for (int k = 0; k < 8 * 512; k++) {
		assert_true(fb_place_ni_random_run(&d, 0, &w));
		fb_place_newidle_stats(&d, w);
	}
	assert_in_range(d.newidle_ratio, 1024, 1100);
	assert_true(fb_place_ni_random_run(&d, 1023, &w));
	/* none pulls: the ratio falls to 0, only draws 0 and 1 run */
	ni_domain(&d);
	for (int k = 0; k < 12 * 512; k++) {
		assert_true(fb_place_ni_random_run(&d, 0, &w));
		fb_place_newidle_stats(&d, 0);
	}
	assert_int_equal(d.newidle_ratio, 0);
	assert_true(fb_place_ni_random_run(&d, 1, &w));
	assert_true(fb_place_ni_random_run(&d, 1024, &w));
	assert_false(fb_place_ni_random_run(&d, 2, &w));
	/* NO_NI_RANDOM: always runs, weight 1 */
	sim_features(0, FB_FEAT_BIT(NI_RANDOM));
	assert_true(fb_place_ni_random_run(&d, 1000, &w));
	assert_int_equal(w, 1);
	sim_features(0, 0);
}

/* ---- H3-6 and kicks (doc/scheduler.md 4.5, 1.8) ------------------------ */

static unsigned kick_h3_6(bool asym)
{
	struct sim s;
	unsigned f;

	sim_open(&s, A1, false, asym ? FB_VIEW_ASYM_PACKING : 0);
	sim_features(asym ? FB_FEAT_BIT(ASYM_PACKING) : 0,
		     asym ? 0 : FB_FEAT_BIT(ASYM_PACKING));
	sleep_all(&s, 0, 2);
	sim_set(&s, 3, 1);
	s.g.needs_update = false;
	s.g.next_blocked = 1000 * MS;
	f = fb_place_kick_flags(&s.v, 3, 10 * MS);
	sim_close(&s);
	return f;
}

static void test_place_idle_h3_6_asym_kick(void **state)
{
	(void)state;
	assert_int_equal(kick_h3_6(true), FB_KICK_STATS | FB_KICK_BALANCE);
	assert_int_equal(kick_h3_6(false), 0);
}

static void test_place_idle_kick_target_and_pending(void **state)
{
	struct sim s;
	unsigned f;

	(void)state;
	sim_open(&s, A1, false, 0);
	assert_int_equal(fb_place_kick_flags(&s.v, 0, 10 * MS), 0); /* none */
	sleep_all(&s, 1, 3);
	sim_set(&s, 0, 2);
	f = fb_place_kick_flags(&s.v, 0, 10 * MS);
	assert_int_equal(f, FB_KICK_STATS | FB_KICK_BALANCE | FB_KICK_NEXT);
	assert_int_equal(fb_place_kick(&s.v, 0, f, 10 * MS, MS), 1);
	assert_int_equal(s.g.next_balance, 11 * MS);
	assert_int_equal(fb_place_kick(&s.v, 0, f, 10 * MS, MS), -1);
	/* a sleeper that got work is skipped */
	s.pw[1].kick_flags = 0;
	s.pw[1].ttwu_pending = 1;
	assert_int_equal(fb_place_kick(&s.v, 0, FB_KICK_STATS, 10 * MS, MS), 2);
	/* leaving sleep undoes the mask and the LLC count */
	fb_place_sleep_exit(&s.v, 1);
	assert_int_equal(s.g.nr_sleeping, 2);
	assert_int_equal(s.sv->llc_shared[0]->nr_busy_workers, 2);
	sim_close(&s);
}

/* ---- the trigger (doc/scheduler.md 1.6.8) ------------------------------ */

static void test_place_idle_intervals_and_rebalance(void **state)
{
	struct sim s;
	struct fake f = { 0 };
	struct fb_balance_ops ops;
	struct fb_domain *llc, *pkg;

	(void)state;
	sim_open(&s, "pack:1 l3:2 core:4 pu:1", false, 0);
	f.s = &s;
	ops = ops_of(&f);
	llc = sim_level(&s, 0, "LLC", 0);
	pkg = sim_level(&s, 0, "PKG", 0);
	assert_int_equal(fb_place_balance_interval_ns(&s.v, llc, false, MS),
			 4 * MS);
	assert_int_equal(fb_place_balance_interval_ns(&s.v, llc, true, MS),
			 63 * MS);
	f.now = 100 * MS;
	fb_place_rebalance(&s.v, 0, f.now, MS, FB_LB_IDLE, &ops);
	assert_int_equal(f.nr_balance, 2);
	assert_int_equal(llc->last_balance, f.now);
	assert_int_equal(pkg->last_balance, f.now);
	assert_int_equal(s.pw[0].next_balance, f.now + 4 * MS);
	fb_place_rebalance(&s.v, 0, f.now + MS, MS, FB_LB_IDLE, &ops);
	assert_int_equal(f.nr_balance, 2);
	/* the tick decays the worker's own load once per trigger */
	s.pw[0].has_blocked_load = true;
	assert_int_equal(fb_place_tick(&s.v, 0, f.now + 4 * MS, 104, MS, &ops),
			 -1);
	assert_int_equal(s.pw[0].nr_blocked_decays, 1);
	assert_int_equal(f.nr_balance, 3);
	fb_place_tick(&s.v, 0, f.now + 5 * MS, 105, MS, &ops);
	assert_int_equal(s.pw[0].nr_blocked_decays, 1);
	sim_close(&s);
}

static void test_place_idle_newidle_cost_decays_after_a_second(void **state)
{
	struct fb_domain d;

	(void)state;
	memset(&d, 0, sizeof(d));
	assert_false(fb_place_update_newidle_cost(&d, 256 * US, 0));
	assert_int_equal(d.max_newidle_lb_cost, 256 * US);
	assert_false(fb_place_update_newidle_cost(&d, 0, 1000 * MS));
	assert_true(fb_place_update_newidle_cost(&d, 0, 1001 * MS));
	assert_int_equal(d.max_newidle_lb_cost, 253 * US);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_place_idle_h5_1_once_per_tick),
		cmocka_unit_test(test_place_idle_blocked_load_interval_knob),
		cmocka_unit_test(test_place_idle_h5_2_stats_cadence_and_stop),
		cmocka_unit_test(test_place_idle_h5_3_newidle_stays_local),
		cmocka_unit_test(test_place_idle_h5_4_gate),
		cmocka_unit_test(test_place_idle_newidle_cost_includes_decay),
		cmocka_unit_test(test_place_idle_h5_5_ni_random_bookkeeping),
		cmocka_unit_test(
			test_place_idle_ni_random_skip_names_the_level),
		cmocka_unit_test(test_place_idle_h3_6_asym_kick),
		cmocka_unit_test(test_place_idle_kick_target_and_pending),
		cmocka_unit_test(test_place_idle_intervals_and_rebalance),
		cmocka_unit_test(
			test_place_idle_newidle_cost_decays_after_a_second),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
