/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-pelt.c - the PELT-like averages of place/pelt.c against the vectors
 * of doc/scheduler.md 1.3.6.
 *
 * Pure white-box tests: synthetic time, no workers, no threads.  Each history
 * is driven several ways (one update per period, every 1 ms, every 100 us,
 * and one single update for the whole span); every way must land within the
 * tolerance of +-2 of the expected value, and of each other.  A
 * "period" is 1024 x 1024 ns.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <cmocka.h>

#include "place/pelt.h"

#define P FB_PELT_PERIOD_NS
#define W0 1024ul /* default fiber weight */
#define TOL 2	  /* doc/scheduler.md 1.3.6: alignment within a period */

enum state { BLOCKED, WAITING, RUNNING };

/* Step sizes in ns; 0 means one update for the whole span. */
static const uint64_t steps[] = { P, 1000000, 100000, 0 };
#define NR_STEPS FB_ARRAY_SIZE(steps)

/* Update @p from *@now to *@now + @ns in updates of @step ns at most. */
static void drive(struct fb_pelt *p, uint64_t *now, uint64_t ns, uint64_t step,
		  enum state s)
{
	uint64_t end = *now + ns;

	if (step == 0)
		step = ns;
	while (*now < end) {
		*now = FB_MIN(*now + step, end);
		fb_pelt_update(p, *now, W0, s != BLOCKED, s == RUNNING);
	}
}

static void assert_near(unsigned long v, unsigned long expect,
			unsigned long tol, uint64_t step, const char *what)
{
	if (v + tol < expect || v > expect + tol) {
		print_error("%s: %lu, expected %lu +- %lu (step %llu ns)\n",
			    what, v, expect, tol, (unsigned long long)step);
		fail();
	}
}

static void test_pelt_decay_table_is_floor_of_y_powers(void **state)
{
	unsigned int i;

	(void)state;
	assert_int_equal(fb_pelt_decay_factor(0), 0xffffffffu);
	assert_int_equal(fb_pelt_decay_factor(1), 0xfa83b2dau);
	assert_int_equal(fb_pelt_decay_factor(16), 0xb504f333u);
	for (i = 0; i < FB_LOAD_AVG_PERIOD; i++) {
		/* Every entry lies >= 0.0025 from an integer: double is
		 * precise enough for an independent check. */
		double x = 4294967295.0 * exp2(-(double)i / 32.0);

		assert_int_equal(fb_pelt_decay_factor(i), (uint32_t)floor(x));
		if (i > 0)
			assert_true(fb_pelt_decay_factor(i) <
				    fb_pelt_decay_factor(i - 1));
	}
}

static void test_pelt_load_avg_max_is_47742(void **state)
{
	(void)state;
	fb_pelt_init(); /* again: must be harmless */
	assert_int_equal(fb_pelt_load_avg_max(), 47742);
	assert_int_equal(fb_pelt_load_avg_max(), FB_LOAD_AVG_MAX);
}

static void test_pelt_decay_vectors(void **state)
{
	(void)state;
	assert_int_equal(fb_pelt_decay(1024, 32), 511);
	assert_int_equal(fb_pelt_decay(47742, 1), 46718);
	/* y^32 = 1/2, so 64 periods quarter a value (less rounding). */
	assert_int_equal(fb_pelt_decay(1u << 20, 64), (1u << 18) - 1);
	/* No overflow on 64-bit values. */
	assert_true(fb_pelt_decay(UINT64_MAX, 1) > UINT64_MAX / 100 * 97);
	assert_true(fb_pelt_decay(UINT64_MAX, 32 * 62) > 0);
}

static void test_pelt_decay_is_zero_past_32_x_63_periods(void **state)
{
	(void)state;
	assert_int_equal(fb_pelt_decay(UINT64_MAX, 32 * 63 + 1), 0);
	assert_int_equal(fb_pelt_decay(UINT64_MAX, 100000), 0);
	assert_int_equal(fb_pelt_decay(47742, UINT64_MAX), 0);
}

static void test_pelt_running_from_zero_converges_to_1024(void **state)
{
	static const struct {
		unsigned int periods;
		unsigned long lo, hi;
	} v[] = {
		{ 32, 512 - TOL, 512 + TOL },
		{ 64, 768 - TOL, 768 + TOL },
		{ 100, 907 - TOL, 907 + TOL },
		{ 345, 1023, 1024 },
	};
	unsigned long ref[FB_ARRAY_SIZE(v)];
	size_t s, i;

	(void)state;
	for (s = 0; s < NR_STEPS; s++) {
		struct fb_pelt p;
		uint64_t now = 0;
		unsigned int done = 0;

		fb_pelt_reset(&p, 0);
		for (i = 0; i < FB_ARRAY_SIZE(v); i++) {
			drive(&p, &now, (v[i].periods - done) * P, steps[s],
			      RUNNING);
			done = v[i].periods;
			assert_in_range(p.util_avg, v[i].lo, v[i].hi);
			/* Always runnable: load and runnable follow util
			 * (load rounds on the unshifted sum). */
			assert_near(p.load_avg, p.util_avg, 1, steps[s],
				    "load_avg");
			assert_near(p.runnable_avg, p.util_avg, 0, steps[s],
				    "runnable_avg");
			if (s == 0)
				ref[i] = p.util_avg;
			else
				assert_near(p.util_avg, ref[i], TOL, steps[s],
					    "util_avg vs per-period steps");
		}
	}
}

static void test_pelt_blocked_saturated_halves_every_32_periods(void **state)
{
	static const struct {
		unsigned int periods;
		unsigned long util;
	} v[] = { { 32, 512 }, { 64, 256 }, { 128, 64 } };
	size_t s, i;

	(void)state;
	for (s = 0; s < NR_STEPS; s++) {
		struct fb_pelt p;
		uint64_t now = 0;
		unsigned int done = 0;

		fb_pelt_reset(&p, 0);
		drive(&p, &now, 1000 * P, P, RUNNING);
		assert_in_range(p.util_avg, 1023, 1024);
		for (i = 0; i < FB_ARRAY_SIZE(v); i++) {
			drive(&p, &now, (v[i].periods - done) * P, steps[s],
			      BLOCKED);
			done = v[i].periods;
			assert_near(p.util_avg, v[i].util, TOL, steps[s],
				    "blocked util_avg");
			assert_near(p.load_avg, v[i].util, TOL, steps[s],
				    "blocked load_avg");
		}
	}
}

/*
 * One period on, one off.  At the period boundary that closes an on period
 * the average peaks at 1024 y / (1 + y) = 518 and at the one that closes an
 * off period it is lowest, y times that, 506.  Averages are refreshed only
 * at boundaries, so what a reader sees while an on period runs, up to its
 * end, is the 506 of the boundary that opened it (doc/scheduler.md
 * 1.3.6).
 */
static void test_pelt_one_on_one_off_settles_near_506(void **state)
{
	size_t s;
	int k;

	(void)state;
	for (s = 0; s + 1 < NR_STEPS; s++) {
		struct fb_pelt p;
		uint64_t now = 0;

		fb_pelt_reset(&p, 0);
		for (k = 0; k < 400; k++) {
			drive(&p, &now, P - steps[s], steps[s], RUNNING);
			if (k > 390)
				assert_near(p.util_avg, 506, TOL, steps[s],
					    "seen at end of on period");
			drive(&p, &now, steps[s], steps[s], RUNNING);
			if (k > 390)
				assert_near(p.util_avg, 518, TOL, steps[s],
					    "after closing an on period");
			drive(&p, &now, P, steps[s], BLOCKED);
			if (k > 390)
				assert_near(p.util_avg, 506, TOL, steps[s],
					    "after closing an off period");
		}
	}
}

static void test_pelt_blocked_after_30_periods_reaches_0_near_286(void **state)
{
	size_t s;

	(void)state;
	for (s = 0; s + 1 < NR_STEPS; s++) {
		struct fb_pelt p;
		uint64_t now = 0;
		unsigned int n = 0;

		fb_pelt_reset(&p, 0);
		drive(&p, &now, 30 * P, steps[s], RUNNING);
		assert_near(p.util_avg, 489, TOL, steps[s], "30 periods");
		drive(&p, &now, 280 * P, steps[s], BLOCKED);
		assert_true(p.util_avg > 0);
		n = 280;
		while (p.util_avg > 0 && n < 400) {
			drive(&p, &now, P, steps[s], BLOCKED);
			n++;
		}
		assert_in_range(n, 283, 289);
	}
	/* The same in one step: 283 periods leave something, 289 nothing. */
	for (unsigned int n = 283; n <= 289; n += 6) {
		struct fb_pelt p;
		uint64_t now = 0;

		fb_pelt_reset(&p, 0);
		drive(&p, &now, 30 * P, 0, RUNNING);
		drive(&p, &now, n * P, 0, BLOCKED);
		if (n == 283)
			assert_true(p.util_avg > 0);
		else
			assert_int_equal(p.util_avg, 0);
	}
}

static void test_pelt_sub_period_updates_accumulate(void **state)
{
	struct fb_pelt p, q;
	uint64_t now = 0;
	int i;

	(void)state;
	fb_pelt_reset(&p, 0);
	/* Less than one unit: nothing, and the nanoseconds are not lost. */
	assert_false(fb_pelt_update(&p, 1000, W0, true, true));
	assert_int_equal(p.last_update, 0);
	assert_int_equal(p.util_sum, 0);
	for (i = 1; i <= 5; i++) {
		now = (uint64_t)i * 100 * 1024;
		assert_false(fb_pelt_update(&p, now, W0, true, true));
		assert_int_equal(p.period_contrib, 100 * i);
		assert_int_equal(p.load_sum, 100 * i);
		assert_int_equal(p.runnable_sum, (100 * i) << 10);
		assert_int_equal(p.util_sum, (100 * i) << 10);
		assert_int_equal(p.util_avg, 0); /* no boundary yet */
	}
	/* 500 units waiting but not running: util does not grow. */
	assert_false(fb_pelt_update(&p, 1000 * 1024, W0, true, false));
	assert_int_equal(p.load_sum, 1000);
	assert_int_equal(p.util_sum, 500 << 10);
	/* Crossing the boundary refreshes the averages. */
	assert_true(fb_pelt_update(&p, 1100 * 1024, W0, true, true));
	assert_int_equal(p.period_contrib, 76);
	assert_true(p.util_avg > 0);

	/* The same span in one update gives the same load; util counts
	 * only the 600 units of 1100 that were spent running. */
	fb_pelt_reset(&q, 0);
	assert_true(fb_pelt_update(&q, 1100 * 1024, W0, true, true));
	assert_near(q.load_avg, p.load_avg, TOL, 0, "one step vs many");
	assert_near(p.util_avg, q.util_avg * 600 / 1100, TOL, 0, "util");
}

static void test_pelt_update_reports_period_crossing(void **state)
{
	struct fb_pelt p;

	(void)state;
	fb_pelt_reset(&p, 0);
	assert_false(fb_pelt_update(&p, P - 1024, W0, true, true));
	assert_true(fb_pelt_update(&p, P, W0, true, true));
	assert_int_equal(p.period_contrib, 0);
	assert_false(fb_pelt_update(&p, P, W0, true, true));
	assert_true(fb_pelt_update(&p, 10 * P + 5, W0, false, false));
	assert_int_equal(p.last_update, 10 * P);
}

static void test_pelt_load_avg_scales_with_weight(void **state)
{
	struct fb_pelt a, b;
	uint64_t t;

	(void)state;
	fb_pelt_reset(&a, 0);
	fb_pelt_reset(&b, 0);
	for (t = 100000; t <= 200 * P; t += 100000) {
		bool run = (t / P) % 3 != 0;

		fb_pelt_update(&a, t, 1024, true, run);
		fb_pelt_update(&b, t, 3072, true, run);
	}
	assert_true(a.load_avg > 1000); /* always runnable */
	assert_near(b.load_avg, 3 * a.load_avg, 3, 0, "3x weight");
	assert_int_equal(b.util_avg, a.util_avg);
	assert_int_equal(b.runnable_avg, a.runnable_avg);
	assert_int_equal(b.load_sum, a.load_sum); /* sum not weighted */
	/* Running 2 periods of 3: oscillates around 1024 x 2 / 3. */
	assert_in_range(a.util_avg, 640, 700);
}

static void test_pelt_clock_going_back_accounts_nothing(void **state)
{
	struct fb_pelt p;

	(void)state;
	fb_pelt_reset(&p, 10 * P);
	assert_false(fb_pelt_update(&p, 5 * P, W0, true, true));
	assert_int_equal(p.last_update, 5 * P);
	assert_true(fb_pelt_is_decayed(&p));
	assert_true(fb_pelt_update(&p, 6 * P, W0, true, true));
	/* A period that just closed counts y times. */
	assert_int_equal(p.load_sum, fb_pelt_decay(FB_PELT_PERIOD, 1));
}

/* A fiber that ran @periods periods, then stayed blocked @idle periods. */
static void make_fiber(struct fb_pelt *f, uint64_t *now, unsigned int periods,
		       unsigned int idle)
{
	fb_pelt_reset(f, *now);
	drive(f, now, periods * P, 100000, RUNNING);
	drive(f, now, idle * P, 100000, BLOCKED);
}

/* Fibers @a (weight W0, 40 periods run) and @b (2048, 10 periods) attached
 * to a worker @w that was idle; returns the time of the attach. */
static uint64_t two_fibers_on_worker(struct fb_pelt *w, struct fb_pelt *a,
				     struct fb_pelt *b)
{
	uint64_t now, ta = 0, tb = 0;

	make_fiber(a, &ta, 40, 3);
	make_fiber(b, &tb, 10, 0);
	now = FB_MAX(ta, tb) + 300 * 1024;
	fb_pelt_sync_blocked(a, now, W0);
	fb_pelt_sync_blocked(b, now, 2048);
	fb_pelt_reset(w, now - 3 * P - 300 * 1024);
	fb_pelt_update_worker(w, now, 0, 0, false);
	fb_pelt_attach(w, a, W0);
	fb_pelt_attach(w, b, 2048);
	return now;
}

static void test_pelt_worker_sums_are_fiber_sums(void **state)
{
	struct fb_pelt w, a, b;

	(void)state;
	two_fibers_on_worker(&w, &a, &b);
	assert_int_equal(a.last_update, w.last_update);
	assert_int_equal(b.period_contrib, w.period_contrib);
	assert_int_equal(w.load_sum, W0 * a.load_sum + 2048 * b.load_sum);
	assert_int_equal(w.runnable_sum, a.runnable_sum + b.runnable_sum);
	assert_int_equal(w.util_sum, a.util_sum + b.util_sum);
	assert_int_equal(w.load_avg, a.load_avg + b.load_avg);
	assert_int_equal(w.util_avg, a.util_avg + b.util_avg);
	assert_int_equal(w.runnable_avg, a.runnable_avg + b.runnable_avg);

	fb_pelt_detach(&w, &a, W0);
	assert_int_equal(w.load_sum, 2048 * b.load_sum);
	assert_int_equal(w.runnable_sum, b.runnable_sum);
	assert_int_equal(w.util_sum, b.util_sum);
	assert_int_equal(w.load_avg, b.load_avg);
	assert_int_equal(w.runnable_avg, b.runnable_avg);
	assert_int_equal(w.util_avg, b.util_avg);

	fb_pelt_detach(&w, &b, 2048);
	assert_true(fb_pelt_is_decayed(&w));
	assert_int_equal(w.util_avg, 0);
	assert_int_equal(w.load_avg, 0);
}

/*
 * Removal without the worker's lock (the kernel's cfs_rq->removed): what
 * others queue is folded by the worker's writer at its next update, and
 * lowers the averages exactly as a detach under the lock would.
 */
static void test_pelt_removed_shares_fold_like_detach(void **state)
{
	struct fb_pelt w, w2, a, b;
	struct fb_pelt_removed r = { 0 };
	uint64_t now;

	(void)state;
	now = two_fibers_on_worker(&w, &a, &b);
	w2 = w;

	assert_false(fb_pelt_fold_removed(&w2, &r)); /* nothing queued */
	fb_pelt_detach(&w, &a, W0);
	fb_pelt_remove(&r, &a);
	assert_int_equal(atomic_load(&r.nr), 1);
	assert_true(fb_pelt_fold_removed(&w2, &r));
	assert_int_equal(atomic_load(&r.nr), 0);
	assert_int_equal(w2.load_avg, w.load_avg);
	assert_int_equal(w2.runnable_avg, w.runnable_avg);
	assert_int_equal(w2.util_avg, w.util_avg);
	assert_int_equal(w2.util_avg, b.util_avg);
	assert_true(w2.util_sum >= (uint64_t)w2.util_avg * FB_PELT_MIN_DIVIDER);
	assert_true(w2.load_sum >= (uint64_t)w2.load_avg * FB_PELT_MIN_DIVIDER);
	assert_false(fb_pelt_fold_removed(&w2, &r)); /* emptied */

	/* Two removals before one fold: both go, and the rest decays. */
	fb_pelt_attach(&w2, &a, W0);
	fb_pelt_remove(&r, &a);
	fb_pelt_remove(&r, &b);
	assert_int_equal(atomic_load(&r.nr), 2);
	assert_true(fb_pelt_fold_removed(&w2, &r));
	assert_int_equal(w2.util_avg, 0);
	assert_int_equal(w2.load_avg, 0);
	assert_int_equal(w2.runnable_avg, 0);
	fb_pelt_update_worker(&w2, now + 400 * P, 0, 0, false);
	assert_true(fb_pelt_is_decayed(&w2));
}

/*
 * Two fibers on one worker, alternating, one of them blocking for a while:
 * the worker's own update, fed with the runnable weight and count, tracks
 * the sum of the fibers' averages; when one leaves, the other's remains.
 */
static void test_pelt_worker_tracks_attached_fibers(void **state)
{
	struct fb_pelt w, a, b;
	uint64_t t = 0;
	int i;

	(void)state;
	fb_pelt_reset(&w, 0);
	fb_pelt_reset(&a, 0);
	fb_pelt_reset(&b, 0);
	fb_pelt_attach(&w, &a, W0);
	fb_pelt_attach(&w, &b, 2048);
	for (i = 1; i <= 3000; i++) {
		/* 100 us slices: a and b take turns; b sleeps 60% of time. */
		bool b_awake = (i / 500) % 5 >= 3;
		bool a_runs = !b_awake || i % 2;

		t += 100000;
		fb_pelt_update(&a, t, W0, true, a_runs);
		fb_pelt_update(&b, t, 2048, b_awake, !a_runs);
		fb_pelt_update_worker(&w, t, W0 + (b_awake ? 2048 : 0),
				      1 + b_awake, true);
	}
	/* Bring everyone to the same period boundary. */
	t = (t / P + 1) * P;
	fb_pelt_update(&a, t, W0, true, true);
	fb_pelt_sync_blocked(&b, t, 2048);
	fb_pelt_update_worker(&w, t, W0, 1, true);
	assert_near(w.util_avg, a.util_avg + b.util_avg, 2 * TOL, 0, "util");
	assert_near(w.load_avg, a.load_avg + b.load_avg, 2 * TOL, 0, "load");
	assert_near(w.runnable_avg, a.runnable_avg + b.runnable_avg, 2 * TOL, 0,
		    "runnable");
	assert_true(b.util_avg > 100);

	fb_pelt_detach(&w, &b, 2048);
	assert_near(w.util_avg, a.util_avg, 2 * TOL, 0, "util after detach");
	assert_near(w.load_avg, a.load_avg, 2 * TOL, 0, "load after detach");
	assert_true(w.util_sum >= (uint64_t)w.util_avg * FB_PELT_MIN_DIVIDER);
	assert_true(w.load_sum >= (uint64_t)w.load_avg * FB_PELT_MIN_DIVIDER);
}

static void test_pelt_detach_stops_at_zero(void **state)
{
	struct fb_pelt w, f;
	uint64_t now = 0;

	(void)state;
	make_fiber(&f, &now, 50, 0);
	fb_pelt_reset(&w, now);
	w.util_sum = 1000; /* less than the fiber's share */
	w.util_avg = 1;
	fb_pelt_detach(&w, &f, W0);
	assert_int_equal(w.util_avg, 0);
	assert_int_equal(w.util_sum, 0);
	assert_int_equal(w.load_sum, 0);
	assert_true(fb_pelt_is_decayed(&w));
}

static void test_pelt_detach_keeps_sum_consistent_with_avg(void **state)
{
	struct fb_pelt w, f;

	(void)state;
	fb_pelt_reset(&w, 0);
	fb_pelt_reset(&f, 0);
	w.util_avg = 600;
	w.util_sum = 601ull * FB_PELT_MIN_DIVIDER;
	f.util_avg = 100;
	f.util_sum = 200ull * FB_PELT_MIN_DIVIDER; /* rounding drift */
	fb_pelt_detach(&w, &f, W0);
	assert_int_equal(w.util_avg, 500);
	assert_int_equal(w.util_sum, 500ull * FB_PELT_MIN_DIVIDER);
}

static void test_pelt_util_is_capped_at_capacity(void **state)
{
	struct fb_pelt w;

	(void)state;
	fb_pelt_reset(&w, 0);
	w.util_avg = 700;
	assert_int_equal(fb_pelt_util(&w), 700);
	w.util_avg = 2048; /* two saturated fibers just attached */
	assert_int_equal(fb_pelt_util(&w), 1024);
}

static void test_pelt_blocked_load_decays_to_all_sums_zero(void **state)
{
	struct fb_pelt w;
	uint64_t now = 0;

	(void)state;
	fb_pelt_reset(&w, 0);
	assert_true(fb_pelt_is_decayed(&w));
	fb_pelt_update_worker(&w, 5 * P, 2 * W0, 2, true);
	assert_false(fb_pelt_is_decayed(&w));
	now = 5 * P;
	fb_pelt_update_worker(&w, now + 300 * P, 0, 0, false);
	assert_false(fb_pelt_is_decayed(&w));
	assert_int_equal(w.util_avg, 0); /* avg 0 before the sums */
	fb_pelt_update_worker(&w, now + 3000 * P, 0, 0, false);
	assert_true(fb_pelt_is_decayed(&w));
	assert_int_equal(w.load_avg, 0);
	assert_int_equal(w.runnable_avg, 0);
}

static void test_pelt_sync_blocked_is_a_blocked_update(void **state)
{
	struct fb_pelt a, b;
	uint64_t now = 0;
	unsigned long before;

	(void)state;
	make_fiber(&a, &now, 20, 0);
	before = a.util_avg;
	b = a;
	fb_pelt_sync_blocked(&a, now + 7 * P + 3000, W0);
	fb_pelt_update(&b, now + 7 * P + 3000, W0, false, false);
	assert_memory_equal(&a, &b, sizeof(a));
	/* 7 periods blocked: y^7 = 0.86. */
	assert_near(a.util_avg, before * 86 / 100, TOL, 0, "synced util");
}

static void test_pelt_avg_idle_moves_an_eighth_and_is_capped(void **state)
{
	const uint64_t cost = FB_MAX_IDLE_BALANCE_COST_INIT_NS;
	uint64_t a = FB_AVG_IDLE_INIT_NS;

	(void)state;
	a = fb_pelt_avg_idle_update(a, 0, cost);
	assert_int_equal(a, 875000);
	a = fb_pelt_avg_idle_update(a, 75000, cost);
	assert_int_equal(a, 775000);
	/* Negative differences round towards zero, as signed division. */
	assert_int_equal(fb_pelt_avg_idle_update(1000, 993, cost), 1000);
	assert_int_equal(fb_pelt_avg_idle_update(1000, 992, cost), 999);
	assert_int_equal(fb_pelt_avg_idle_update(1000, 1015, cost), 1001);
	/* Long idle periods are capped at 2 x max_idle_balance_cost. */
	assert_int_equal(fb_pelt_avg_idle_update(900000, 2000000, cost),
			 2 * cost);
	assert_int_equal(fb_pelt_avg_idle_update(a, UINT64_MAX, cost),
			 2 * cost);
	assert_int_equal(fb_pelt_avg_idle_update(a, UINT64_MAX, 10), 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pelt_decay_table_is_floor_of_y_powers),
		cmocka_unit_test(test_pelt_load_avg_max_is_47742),
		cmocka_unit_test(test_pelt_decay_vectors),
		cmocka_unit_test(test_pelt_decay_is_zero_past_32_x_63_periods),
		cmocka_unit_test(test_pelt_running_from_zero_converges_to_1024),
		cmocka_unit_test(
			test_pelt_blocked_saturated_halves_every_32_periods),
		cmocka_unit_test(test_pelt_one_on_one_off_settles_near_506),
		cmocka_unit_test(
			test_pelt_blocked_after_30_periods_reaches_0_near_286),
		cmocka_unit_test(test_pelt_sub_period_updates_accumulate),
		cmocka_unit_test(test_pelt_update_reports_period_crossing),
		cmocka_unit_test(test_pelt_load_avg_scales_with_weight),
		cmocka_unit_test(test_pelt_clock_going_back_accounts_nothing),
		cmocka_unit_test(test_pelt_worker_sums_are_fiber_sums),
		cmocka_unit_test(test_pelt_worker_tracks_attached_fibers),
		cmocka_unit_test(test_pelt_removed_shares_fold_like_detach),
		cmocka_unit_test(test_pelt_detach_stops_at_zero),
		cmocka_unit_test(
			test_pelt_detach_keeps_sum_consistent_with_avg),
		cmocka_unit_test(test_pelt_util_is_capped_at_capacity),
		cmocka_unit_test(
			test_pelt_blocked_load_decays_to_all_sums_zero),
		cmocka_unit_test(test_pelt_sync_blocked_is_a_blocked_update),
		cmocka_unit_test(
			test_pelt_avg_idle_moves_an_eighth_and_is_capped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
