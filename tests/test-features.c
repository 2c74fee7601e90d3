/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-features.c - the scheduler feature list and the
 * LIBFIBER_SCHED_FEATURES parser.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/common.h"
#include "sched/sched.h"
#include "topo/rcu.h"
#include "fiber.h"

static void test_features_defaults_match_spec(void **state)
{
	uint64_t m = fb_features_default();

	(void)state;
	/* doc/scheduler.md 0.2: everything on except SIS_CORE_FULL and
	 * ASYM_PACKING. */
	assert_true(m & FB_FEAT_BIT(SIS_UTIL));
	assert_true(m & FB_FEAT_BIT(SIS_CORE_LIMIT));
	assert_false(m & FB_FEAT_BIT(SIS_CORE_FULL));
	assert_true(m & FB_FEAT_BIT(TTWU_QUEUE));
	assert_true(m & FB_FEAT_BIT(TTWU_QUEUE_IDLE));
	assert_false(m & FB_FEAT_BIT(ASYM_PACKING));
	assert_true(m & FB_FEAT_BIT(NUMA_IMB));
	assert_true(m & FB_FEAT_BIT(NUMA_IMB_AFFINITY));
	assert_true(m & FB_FEAT_BIT(BLOCKED_LOAD_RATELIMIT));
	assert_true(m & FB_FEAT_BIT(NI_RANDOM));
	assert_true(m & FB_FEAT_BIT(WA_IDLE));
	assert_true(m & FB_FEAT_BIT(WA_WEIGHT));
	assert_true(m & FB_FEAT_BIT(WA_BIAS));
	assert_true(m & FB_FEAT_BIT(WA_POLLER));
	assert_true(m & FB_FEAT_BIT(CREATE_AFFINE));
	assert_int_equal(fb_load_relaxed(&fb_features_mask), m);
}

static void test_features_name_and_no_name(void **state)
{
	char err[512];
	uint64_t m = 0;

	(void)state;
	assert_int_equal(fb_features_parse("V", "ASYM_PACKING NO_TTWU_QUEUE",
					   fb_features_default(), &m, err,
					   sizeof(err)),
			 0);
	assert_true(m & FB_FEAT_BIT(ASYM_PACKING));
	assert_false(m & FB_FEAT_BIT(TTWU_QUEUE));
	assert_true(m & FB_FEAT_BIT(SIS_UTIL));
	/* Commas, repeated separators, last word wins. */
	assert_int_equal(fb_features_parse("V", ",SIS_UTIL,,NO_SIS_UTIL ,", 0,
					   &m, err, sizeof(err)),
			 0);
	assert_int_equal(m, 0);
}

static void test_features_empty_keeps_base(void **state)
{
	char err[64];
	uint64_t m = 0;

	(void)state;
	assert_int_equal(fb_features_parse("V", "", 0x5, &m, err, sizeof(err)),
			 0);
	assert_int_equal(m, 0x5);
	assert_int_equal(
		fb_features_parse("V", "  ", 0x6, &m, err, sizeof(err)), 0);
	assert_int_equal(m, 0x6);
}

static void test_features_unknown_name_refused(void **state)
{
	const char *bad[] = { "SIS_UTILX",	"NO_",
			      "no_sis_util",	"NO_NO_SIS_UTIL",
			      "SIS_UTIL BOGUS", "sis_util" };
	char err[1024];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t m = 42;

		err[0] = 0;
		assert_int_equal(fb_features_parse("LIBFIBER_SCHED_FEATURES",
						   bad[i], 0, &m, err,
						   sizeof(err)),
				 EINVAL);
		assert_int_equal(m, 42);
		assert_non_null(strstr(err, "LIBFIBER_SCHED_FEATURES"));
		assert_non_null(strstr(err, bad[i]));
		assert_non_null(strstr(err, "SIS_CORE_LIMIT")); /* accepted */
	}
}

static void test_features_every_name_round_trips(void **state)
{
	char err[256];

	(void)state;
	for (int i = 0; i < FB_FEAT_NR; i++) {
		char on[64], off[64];
		uint64_t m;

		snprintf(on, sizeof(on), "%s", fb_feature_name(i));
		snprintf(off, sizeof(off), "NO_%s", fb_feature_name(i));
		assert_int_equal(
			fb_features_parse("V", on, 0, &m, err, sizeof(err)), 0);
		assert_int_equal(m, UINT64_C(1) << i);
		assert_int_equal(fb_features_parse("V", off, ~UINT64_C(0), &m,
						   err, sizeof(err)),
				 0);
		assert_int_equal(m, ~(UINT64_C(1) << i));
	}
	assert_null(fb_feature_name(FB_FEAT_NR));
	assert_null(fb_feature_name(-1));
}

static void test_features_api_set_get_string(void **state)
{
	char buf[1024];
	int n;

	(void)state;
	assert_int_equal(fiber_sched_features_set("NO_SIS_UTIL ASYM_PACKING"),
			 0);
	assert_int_equal(fiber_sched_feature_get("SIS_UTIL"), 0);
	assert_int_equal(fiber_sched_feature_get("ASYM_PACKING"), 1);
	assert_int_equal(fiber_sched_feature_get("NOPE"), -1);
	assert_int_equal(fiber_sched_features_set("NOPE"), EINVAL);
	assert_int_equal(fiber_sched_feature_get("ASYM_PACKING"), 1);
	n = fiber_sched_features_string(buf, sizeof(buf));
	assert_int_equal(n, (int)strlen(buf));
	assert_non_null(strstr(buf, "NO_SIS_UTIL"));
	assert_non_null(strstr(buf, " ASYM_PACKING"));
	assert_int_equal(fiber_sched_features_string(NULL, 0), n);
	fb_store_relaxed(&fb_features_mask, fb_features_default());
}

/* Two threads switch one feature each, 100,000 times: each must read
 * back its own switch, whatever the other one did meanwhile (no runtime
 * needed: the mask is the process's). */
static void *toggler(void *arg)
{
	const char *name = arg;
	char off[32];
	long lost = 0;

	snprintf(off, sizeof(off), "NO_%s", name);
	for (int i = 0; i < 100000; i++) {
		if (fiber_sched_features_set(off) ||
		    fiber_sched_feature_get(name) != 0)
			lost++;
		if (fiber_sched_features_set(name) ||
		    fiber_sched_feature_get(name) != 1)
			lost++;
	}
	return (void *)lost;
}

static void test_features_concurrent_sets_lose_nothing(void **state)
{
	pthread_t a, b;
	void *la, *lb;

	(void)state;
	assert_int_equal(pthread_create(&a, NULL, toggler, "SIS_UTIL"), 0);
	assert_int_equal(pthread_create(&b, NULL, toggler, "WA_IDLE"), 0);
	assert_int_equal(pthread_join(a, &la), 0);
	assert_int_equal(pthread_join(b, &lb), 0);
	assert_int_equal((long)la, 0);
	assert_int_equal((long)lb, 0);
	fb_store_relaxed(&fb_features_mask, fb_features_default());
}

/* ---- ASYM_PACKING switches and the domain view ------------------------- */

/* After a failure too: the next test starts its own runtime. */
static int stop_runtime(void **state)
{
	(void)state;
	fiber_shutdown();
	unsetenv("LIBFIBER_STALL_MS");
	fb_store_relaxed(&fb_features_mask, fb_features_default());
	return 0;
}

static bool view_asym(void)
{
	return fb_load_acquire(&fb_topo_view_current)->build_flags &
	       FB_VIEW_ASYM_PACKING;
}

static void *switch_asym_on(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)fiber_sched_features_set("ASYM_PACKING");
}

/* A switch that finds the runtime's mutex taken (a start, a stop, another
 * switch) still reaches the view: the holder brings it in step when it
 * lets go. */
static void test_features_switch_behind_the_lock_reaches_the_view(void **state)
{
	struct fiber_config c = { .workers = 2 };
	pthread_t t;
	void *rc;

	(void)state;
	assert_int_equal(fiber_init(&c), 0);
	assert_false(view_asym());
	fb_runtime_lock();
	assert_int_equal(pthread_create(&t, NULL, switch_asym_on, NULL), 0);
	assert_int_equal(pthread_join(t, &rc), 0);
	assert_int_equal((intptr_t)rc, 0);
	assert_int_equal(fiber_sched_feature_get("ASYM_PACKING"), 1);
	fb_runtime_unlock();
	assert_true(view_asym());
	assert_int_equal(fiber_sched_features_set("NO_ASYM_PACKING"), 0);
	assert_false(view_asym());
	assert_int_equal(fiber_shutdown(), 0);
	fb_store_relaxed(&fb_features_mask, fb_features_default());
}

/*
 * A fiber switches ASYM_PACKING while a fiber of the other worker spins,
 * with no scheduling point, until the switch is done: the switch must not
 * wait for that worker.  The spinner gives up after 20 s (then the test
 * fails), so a regression costs 20 s, not a hang.
 */
static atomic_int spin_state; /* 1: spinning, 2: switched, 3: gave up */

static void *spinner(void *arg)
{
	uint64_t end = fiber_now() + 20000000000ull;

	(void)arg;
	atomic_store(&spin_state, 1);
	while (atomic_load(&spin_state) == 1)
		if (fiber_now() > end)
			atomic_store(&spin_state, 3);
	return NULL;
}

static void *switcher(void *arg)
{
	int rc;

	(void)arg;
	while (atomic_load(&spin_state) == 0)
		fiber_yield();
	rc = fiber_sched_features_set("ASYM_PACKING");
	atomic_compare_exchange_strong(&spin_state, &(int){ 1 }, 2);
	return (void *)(intptr_t)rc;
}

static fiber_t start_on(int worker, void *(*fn)(void *))
{
	fiber_workerset_t set;
	fiber_attr_t a;
	fiber_t f;

	fiber_attr_init(&a);
	fiber_workerset_zero(&set);
	fiber_workerset_add(&set, worker);
	assert_int_equal(fiber_attr_setaffinity(&a, sizeof(set), &set), 0);
	assert_int_equal(fiber_create(&f, &a, fn, NULL), 0);
	fiber_attr_destroy(&a);
	return f;
}

static void test_features_asym_switch_never_waits(void **state)
{
	struct fiber_config c = { .workers = 2 };
	fiber_t s, w;
	void *rc;

	(void)state;
	setenv("LIBFIBER_STALL_MS", "0", 1); /* the spin is on purpose */
	assert_int_equal(fiber_init(&c), 0);
	atomic_store(&spin_state, 0);
	s = start_on(0, spinner);
	w = start_on(1, switcher);
	assert_int_equal(fiber_join(w, &rc), 0);
	assert_int_equal(fiber_join(s, NULL), 0);
	assert_int_equal((intptr_t)rc, 0);
	assert_int_equal(atomic_load(&spin_state), 2);
	assert_int_equal(fiber_shutdown(), 0);
	assert_int_equal(fiber_init(&c), 0); /* the deferred view is gone */
	assert_int_equal(fiber_shutdown(), 0);
	unsetenv("LIBFIBER_STALL_MS");
	fb_store_relaxed(&fb_features_mask, fb_features_default());
}

/* Every feature is documented in README.md (doc/design.md 7). */
static void test_features_documented_in_readme(void **state)
{
	FILE *f = fopen(FB_SOURCE_ROOT "/README.md", "r");
	static char text[1 << 20];
	size_t n;

	(void)state;
	assert_non_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	for (int i = 0; i < FB_FEAT_NR; i++) {
		char needle[80];

		snprintf(needle, sizeof(needle), "`%s`", fb_feature_name(i));
		if (!strstr(text, needle))
			fail_msg("README.md does not document %s", needle);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_features_defaults_match_spec),
		cmocka_unit_test(test_features_name_and_no_name),
		cmocka_unit_test(test_features_empty_keeps_base),
		cmocka_unit_test(test_features_unknown_name_refused),
		cmocka_unit_test(test_features_every_name_round_trips),
		cmocka_unit_test(test_features_api_set_get_string),
		cmocka_unit_test(test_features_concurrent_sets_lose_nothing),
		cmocka_unit_test_teardown(
			test_features_switch_behind_the_lock_reaches_the_view,
			stop_runtime),
		cmocka_unit_test_teardown(test_features_asym_switch_never_waits,
					  stop_runtime),
		cmocka_unit_test(test_features_documented_in_readme),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
