/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-place-blocked.c - the order of rule 1 (doc/scheduler.md 6.2.1) as
 * the composed functions run it: with BLOCKED_LOAD_RATELIMIT the stamp is
 * written before the decay starts, so that a refresher reading it without
 * the sleeper's lock (fb_place_blocked_due) skips a sleeper being
 * decayed; without the feature the stamp comes after the decay.  The test
 * is linked with --wrap=fb_place_blocked_decay: the calls from
 * place/idle.c to the decay (in place/blocked.c) come here first, and the
 * wrapper records the stamp the worker holds at that moment.  Pure: the
 * place layer alone, no threads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "place/place.h"

bool __real_fb_place_blocked_decay(struct fb_pworker *w, uint64_t now_ns);
bool __wrap_fb_place_blocked_decay(struct fb_pworker *w, uint64_t now_ns);

static uint64_t stamp_at_decay;
static int decays;

bool __wrap_fb_place_blocked_decay(struct fb_pworker *w, uint64_t now_ns)
{
	stamp_at_decay = fb_load_relaxed(&w->last_blocked_load_update_tick);
	decays++;
	return __real_fb_place_blocked_decay(w, now_ns);
}

#define MS 1000000ull

static void features(uint64_t on, uint64_t off)
{
	fb_store_relaxed(&fb_features_mask,
			 (fb_features_default() | on) & ~off);
}

static void pworker(struct fb_pworker *w)
{
	memset(w, 0, sizeof(*w));
	fb_store_relaxed(&w->last_blocked_load_update_tick, 7);
	fb_store_relaxed(&w->has_blocked_load, true);
}

static void test_place_blocked_stamp_before_decay_with_ratelimit(void **state)
{
	struct fb_pworker w;

	(void)state;
	features(FB_FEAT_BIT(BLOCKED_LOAD_RATELIMIT), 0);
	pworker(&w);
	decays = 0;
	fb_place_decay_blocked(&w, 40 * MS, 40);
	assert_int_equal(decays, 1);
	assert_int_equal(stamp_at_decay, 40);
	assert_int_equal(fb_load_relaxed(&w.last_blocked_load_update_tick), 40);
}

static void test_place_blocked_stamp_after_decay_without(void **state)
{
	struct fb_pworker w;

	(void)state;
	features(0, FB_FEAT_BIT(BLOCKED_LOAD_RATELIMIT));
	pworker(&w);
	decays = 0;
	fb_place_decay_blocked(&w, 40 * MS, 40);
	assert_int_equal(decays, 1);
	assert_int_equal(stamp_at_decay, 7);
	assert_int_equal(fb_load_relaxed(&w.last_blocked_load_update_tick), 40);
	features(FB_FEAT_BIT(BLOCKED_LOAD_RATELIMIT), 0);
}

/* What the stamp-first order buys: the lock-free check of a second
 * refresher, made while the first one's decay runs, says "not due". */
static void test_place_blocked_due_reads_the_new_stamp(void **state)
{
	struct fb_pworker w, *ws[1] = { &w };
	struct fb_place_view v = { 0 };

	(void)state;
	features(FB_FEAT_BIT(BLOCKED_LOAD_RATELIMIT), 0);
	pworker(&w);
	v.w = ws;
	v.nr_workers = 1;
	assert_true(fb_place_blocked_due(&v, 0, 40));
	fb_place_decay_blocked(&w, 40 * MS, 40);
	assert_false(fb_place_blocked_due(&v, 0, 40));
	assert_true(fb_place_blocked_due(&v, 0, 41));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_place_blocked_stamp_before_decay_with_ratelimit),
		cmocka_unit_test(test_place_blocked_stamp_after_decay_without),
		cmocka_unit_test(test_place_blocked_due_reads_the_new_stamp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
