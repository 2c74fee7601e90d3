/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-wake-runtime.c - the wake path in the running runtime, asserted
 * through counters: which delivery a cross-worker wakeup takes
 * (doc/scheduler.md 3.5), what a wakeup of an idle worker costs, and
 * that every wakeup was placed and counted.  Public API only.
 */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#include "fiber.h"

#define LOOPS 5000

struct pair {
	fiber_pipe_t *ab, *ba;
};

static void *ping(void *arg)
{
	struct pair *p = arg;
	long bad = 0;

	for (int i = 0; i < LOOPS; i++) {
		int v = i, back = -1;
		size_t d;

		fiber_pipe_write(p->ab, &v, sizeof(v), &d);
		fiber_pipe_read(p->ba, &back, sizeof(back), &d);
		bad += back != i;
	}
	return (void *)bad;
}

static void *pong(void *arg)
{
	struct pair *p = arg;

	for (int i = 0; i < LOOPS; i++) {
		int v;
		size_t d;

		fiber_pipe_read(p->ab, &v, sizeof(v), &d);
		fiber_pipe_write(p->ba, &v, sizeof(v), &d);
	}
	return NULL;
}

/* Ping on worker 0, pong on worker 1 (one LLC here: the real machine or
 * a synthetic one), LOOPS round trips.  Returns the counters' deltas. */
struct deltas {
	long long pushes, direct, futex, poll_wakes, wakeups, placements;
	long long on_worker;
	/* the other senders of a worker wake (sched/core.c, balance.c) */
	long long kicks, nohz_kicks, pulled;
};

static void run_split_pingpong(const char *features, long idle_poll_us,
			       struct deltas *d)
{
	struct fiber_config c = { 0 };
	char feat[128];
	fiber_attr_t a0, a1;
	cpu_set_t s;
	struct pair p;
	fiber_t f0, f1;
	void *r;

	c.workers = 2;
	c.topology = "pack:1 l3:1 core:2 pu:1";
	/* The wake path of a partner that parked: without the park spin,
	 * which would catch most wakes before the park (test-park-spin.c). */
	snprintf(feat, sizeof(feat), "%s NO_PARK_SPIN",
		 features ? features : "");
	c.sched_features = feat;
	c.idle_poll_us = idle_poll_us;
	c.idle_poll_set = 1;
	/* Pinned for good: adaptive pinning's verdicts would cut the poll
	 * window on a loaded host (a crowded CPU polls not at all), and the
	 * counts below are the wake path's alone. */
	c.bind = 1;
	c.bind_set = 1;
	assert_int_equal(fiber_init(&c), 0);
	assert_int_equal(fiber_pipe_create(&p.ab, 0), 0);
	assert_int_equal(fiber_pipe_create(&p.ba, 0), 0);
	fiber_attr_init(&a0);
	fiber_attr_init(&a1);
	CPU_ZERO(&s);
	CPU_SET(0, &s);
	fiber_attr_setaffinity(&a0, sizeof(s), &s);
	CPU_ZERO(&s);
	CPU_SET(1, &s);
	fiber_attr_setaffinity(&a1, sizeof(s), &s);
	fiber_stats_reset();
	assert_int_equal(fiber_create(&f1, &a1, pong, &p), 0);
	assert_int_equal(fiber_create(&f0, &a0, ping, &p), 0);
	assert_int_equal(fiber_join(f0, &r), 0);
	assert_null(r);
	assert_int_equal(fiber_join(f1, NULL), 0);
	d->pushes = fiber_stats_counter("wakelist_pushes");
	d->direct = fiber_stats_counter("direct_enqueues");
	d->futex = fiber_stats_counter("futex_wakes");
	d->poll_wakes = fiber_stats_counter("poll_wakes");
	d->wakeups = fiber_stats_counter("wakeups");
	d->placements = fiber_stats_counter("wake_placements");
	d->on_worker = fiber_stats_counter("wake_on_worker");
	d->kicks = fiber_stats_counter("kicks");
	d->nohz_kicks = fiber_stats_counter("nohz_kicks");
	d->pulled = fiber_stats_counter("lb_pulled");
	fiber_pipe_destroy(p.ab);
	fiber_pipe_destroy(p.ba);
	assert_int_equal(fiber_shutdown(), 0);
}

/* H2 (Tianchen Ding's mail): a wakeup onto the idle partner in the same LLC
 * goes through its wakelist with TTWU_QUEUE_IDLE... */
static void test_wake_runtime_same_llc_idle_uses_wakelist(void **state)
{
	struct deltas d;

	(void)state;
	run_split_pingpong("TTWU_QUEUE TTWU_QUEUE_IDLE", 50, &d);
	/* Each round trip wakes each side at least once, except the few
	 * wakeups that caught a fiber before it parked. */
	assert_true(d.pushes >= LOOPS);
	assert_true(d.direct < d.pushes / 10);
	/* Every wakeup is placed, except those handed back to the worker
	 * that was still leaving the fiber (the on_worker shortcut): how
	 * many depends on timing (many more under TSan), the sum does not. */
	assert_int_equal(d.placements + d.on_worker, d.wakeups);
	assert_true(d.placements > 0);
}

/* ... and under the target's run-queue lock without it. */
static void test_wake_runtime_no_ttwu_queue_idle_enqueues_directly(void **state)
{
	struct deltas d;

	(void)state;
	run_split_pingpong("NO_TTWU_QUEUE_IDLE", 50, &d);
	/* Only the two creations from this (foreign) thread may use the
	 * wakelist. */
	assert_true(d.pushes <= 2);
	assert_true(d.direct >= LOOPS);
}

/* A polling partner is noticed for free; a sleeping one costs exactly
 * one futex wake per wakeup at most. */
static void test_wake_runtime_futex_only_for_sleepers(void **state)
{
	struct deltas polling, sleeping;

	(void)state;
	run_split_pingpong(NULL, 1000000, &polling);
	run_split_pingpong(NULL, 0, &sleeping);
	assert_true(polling.poll_wakes > polling.futex);
	assert_true(polling.futex <= 4); /* the workers' first sleeps */
	/* A futex wake is sent for a wakeup, a backlog kick, a nohz kick
	 * or a balancer's delivery to another worker, never for nothing. */
	fprintf(stderr,
		"# sleeping: %lld futex wakes, %lld wakeups, %lld kicks, "
		"%lld nohz kicks, %lld pulled\n",
		sleeping.futex, sleeping.wakeups, sleeping.kicks,
		sleeping.nohz_kicks, sleeping.pulled);
	assert_true(sleeping.futex <= sleeping.wakeups + sleeping.kicks +
					      sleeping.nohz_kicks +
					      sleeping.pulled + 2);
	assert_true(sleeping.futex > 0);
}

/* ---- H1 (doc/scheduler.md 2.5): the idle-core scan of an overloaded LLC - */

/*
 * The arrangement.  One 48-worker LLC (24 cores x 2 PUs).  A hog fiber is
 * pinned to each worker of cores 0-21 (workers 0-43) and never blocks: it
 * holds its worker in usleep() slices with a yield between them, so the
 * scheduler sees a fiber running all the time (utilisation 1024) at almost
 * no cost to a 2-CPU host.  The LLC's mean utilisation is then at least
 * 44 x 1024 / 48 = 938 > 875 and SIS_UTIL's depth is 0: overloaded.
 * Cores 22 and 23 (workers 44-47) have no hog.
 *
 * SIS_PAIRS ping-pong pairs over fiber pipes make the wakeups.  Side b of
 * pair i is pinned to worker 44 + 2i: each time it blocks, its worker goes
 * idle next to an idle sibling and sets has_idle_cores (the seed's rapidly
 * idling core).  Side a may run on workers 0-43 only, which are all busy,
 * as every worker of a truly overloaded LLC is: its wakeups find the
 * target, previous and recent workers busy and reach select_idle_cpu with
 * the hint set but no idle core where it may run (a stale hint, from its
 * point of view).  Each such scan therefore inspects
 *	SIS_CORE_LIMIT:                  2 cores (4 workers), then clears it;
 *	SIS_CORE_FULL,NO_SIS_CORE_LIMIT: all 22 cores (44 workers), clears it;
 *	neither (mainline):              nothing, and the hint stays set;
 * and side b's next block sets the hint again.  Side a cannot follow a
 * scan onto cores 22-23, which keeps the arrangement stationary.
 *
 * Warm-up: the hogs' PELT is sampled at ticks, every FB_TICK_SWITCHES (64)
 * scheduling points of a busy worker, so the test waits SIS_WARM_MS and
 * then two tick periods of every hog, then lets SIS_UTIL's depth be
 * refreshed (idle entry of workers 44 and 46 every 48 ms, and the LLC
 * level's periodic balance).  Nothing is timed: the counters say what the
 * scans did.
 */
#define SIS_TOPOLOGY "pack:1 l3:1 core:24 pu:2"
#define SIS_WORKERS 48
#define SIS_HOGS 44		/* workers 0-43: cores 0-21 */
#define SIS_HOG_SLICE_US 500	/* a hog's usleep() between two yields */
#define SIS_PAIRS 2		/* side b on workers 44 and 46 */
#define SIS_WARM_MS 400		/* hog util 1024 x (1 - 2^(-400/32)) */
#define SIS_TICK_SLICES 130	/* > 2 x FB_TICK_SWITCHES */
#define SIS_SETTLE_MS 150	/* > 2 x 48 ms depth refreshes */
#define SIS_ROUNDS 250		/* measured round trips per pair */
#define SIS_STUCK_MS 60000	/* the hogs cannot get going: fail */
#define SIS_CORE_LIMIT_PROBES 4 /* SIS_CORE_LIMIT_NR (2) cores x 2 PUs */

struct sis_pair {
	struct pair p;
	long rounds; /* round trips; 0: until sis.stop_warm */
};

/* Static, so that the teardown of a failed run can stop the fibers. */
static struct {
	long slices[SIS_HOGS]; /* atomic; hog w's own count */
	fiber_t hog[SIS_HOGS];
	struct sis_pair pair[SIS_PAIRS];
	int stop_hogs, stop_warm; /* atomic */
} sis;

struct sis_counts {
	long long probes, placements, core_scans, cut_limit, cut_util;
	bool sis_util; /* SIS_UTIL was on */
};

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void *sis_hog(void *arg)
{
	long *slices = arg;

	while (!__atomic_load_n(&sis.stop_hogs, __ATOMIC_RELAXED)) {
		usleep(SIS_HOG_SLICE_US);
		fiber_yield();
		__atomic_fetch_add(slices, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static bool sis_more(const struct sis_pair *sp, int i)
{
	if (sp->rounds)
		return i < sp->rounds;
	return !__atomic_load_n(&sis.stop_warm, __ATOMIC_RELAXED);
}

static void *sis_side_a(void *arg)
{
	struct sis_pair *sp = arg;
	long bad = 0;
	int end = -1;
	size_t d;

	for (int i = 0; sis_more(sp, i); i++) {
		int back = -1;

		fiber_pipe_write(sp->p.ab, &i, sizeof(i), &d);
		fiber_pipe_read(sp->p.ba, &back, sizeof(back), &d);
		bad += back != i;
	}
	fiber_pipe_write(sp->p.ab, &end, sizeof(end), &d);
	return (void *)bad;
}

static void *sis_side_b(void *arg)
{
	struct sis_pair *sp = arg;
	size_t d;

	for (;;) {
		int v = -1;

		fiber_pipe_read(sp->p.ab, &v, sizeof(v), &d);
		if (v < 0)
			return NULL;
		fiber_pipe_write(sp->p.ba, &v, sizeof(v), &d);
	}
}

static void attr_on(fiber_attr_t *a, int first, int last)
{
	cpu_set_t s;

	fiber_attr_init(a);
	fiber_attr_setstacksize(a, TEST_STACK);
	CPU_ZERO(&s);
	for (int w = first; w <= last; w++)
		CPU_SET(w, &s);
	fiber_attr_setaffinity(a, sizeof(s), &s);
}

/* sis_pairs_start - SIS_PAIRS pairs: side a on the hogs' workers, side b
 * of pair i on worker 44 + 2i. */
static void sis_pairs_start(fiber_t (*f)[2], long rounds)
{
	struct sis_pair *sp = sis.pair;
	fiber_attr_t a, b;

	attr_on(&a, 0, SIS_HOGS - 1);
	for (int i = 0; i < SIS_PAIRS; i++) {
		sp[i].rounds = rounds;
		attr_on(&b, SIS_HOGS + 2 * i, SIS_HOGS + 2 * i);
		assert_int_equal(fiber_create(&f[i][1], &b, sis_side_b, &sp[i]),
				 0);
		assert_int_equal(fiber_create(&f[i][0], &a, sis_side_a, &sp[i]),
				 0);
	}
}

static void sis_pairs_join(fiber_t (*f)[2])
{
	void *r;

	for (int i = 0; i < SIS_PAIRS; i++) {
		assert_int_equal(fiber_join(f[i][0], &r), 0);
		assert_null(r);
		assert_int_equal(fiber_join(f[i][1], NULL), 0);
	}
}

/* sis_warm - until every hog has been sampled busy for SIS_WARM_MS and the
 * depth refreshed since; warm-up pairs keep workers 44 and 46 idling. */
static void sis_warm(void)
{
	long mark[SIS_HOGS], n;
	fiber_t f[SIS_PAIRS][2];
	int waited = 0;

	sis_pairs_start(f, 0);
	sleep_ms(SIS_WARM_MS);
	for (int w = 0; w < SIS_HOGS; w++)
		mark[w] = __atomic_load_n(&sis.slices[w], __ATOMIC_RELAXED);
	for (int w = 0; w < SIS_HOGS; w++) {
		while ((n = __atomic_load_n(&sis.slices[w], __ATOMIC_RELAXED)) <
		       mark[w] + SIS_TICK_SLICES) {
			if (waited > SIS_STUCK_MS)
				fail_msg("hog %d: %ld slices", w, n);
			sleep_ms(10);
			waited += 10;
		}
	}
	sleep_ms(SIS_SETTLE_MS);
	__atomic_store_n(&sis.stop_warm, 1, __ATOMIC_RELAXED);
	sis_pairs_join(f);
}

/* sis_teardown - stop what a failed run left going, then the runtime. */
static int sis_teardown(void **state)
{
	__atomic_store_n(&sis.stop_warm, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&sis.stop_hogs, 1, __ATOMIC_RELAXED);
	return stop_if_running(state);
}

/*
 * sis_run - the arrangement above with the features of the environment
 * (LIBFIBER_SCHED_FEATURES) changed by @core_features; the counters of
 * SIS_ROUNDS round trips per pair after the warm-up.
 */
static void sis_run(const char *core_features, struct sis_counts *c)
{
	struct fiber_config cfg = { 0 };
	struct sis_pair *sp = sis.pair;
	fiber_t f[SIS_PAIRS][2];
	fiber_attr_t a;

	cfg.workers = SIS_WORKERS;
	cfg.topology = SIS_TOPOLOGY;
	assert_int_equal(fiber_init(&cfg), 0);
	assert_int_equal(fiber_nr_workers(), SIS_WORKERS);
	assert_int_equal(fiber_sched_features_set(core_features), 0);
	memset(&sis, 0, sizeof(sis));
	for (int i = 0; i < SIS_PAIRS; i++) {
		assert_int_equal(fiber_pipe_create(&sp[i].p.ab, 0), 0);
		assert_int_equal(fiber_pipe_create(&sp[i].p.ba, 0), 0);
	}
	for (int w = 0; w < SIS_HOGS; w++) {
		attr_on(&a, w, w);
		assert_int_equal(fiber_create(&sis.hog[w], &a, sis_hog,
					      &sis.slices[w]),
				 0);
	}
	sis_warm();
	fiber_stats_reset();
	sis_pairs_start(f, SIS_ROUNDS);
	sis_pairs_join(f);
	c->probes = fiber_stats_counter("wake_probes");
	c->placements = fiber_stats_counter("wake_placements");
	c->core_scans = fiber_stats_counter("scan_idle_cores");
	c->cut_limit = fiber_stats_counter("scan_cut_core_limit");
	c->cut_util = fiber_stats_counter("scan_cut_sis_util");
	c->sis_util = fiber_sched_feature_get("SIS_UTIL") == 1;
	__atomic_store_n(&sis.stop_hogs, 1, __ATOMIC_RELAXED);
	for (int w = 0; w < SIS_HOGS; w++)
		assert_int_equal(fiber_join(sis.hog[w], NULL), 0);
	for (int i = 0; i < SIS_PAIRS; i++) {
		fiber_pipe_destroy(sp[i].p.ab);
		fiber_pipe_destroy(sp[i].p.ba);
	}
	assert_int_equal(fiber_shutdown(), 0);
	print_message(
		"# %-34s probes/wakeup %6.2f probes/core scan %6.2f "
		"(%lld probes, %lld wakeups, %lld core scans, "
		"%lld cut by limit, %lld cut by util)\n",
		core_features, (double)c->probes / (double)c->placements,
		c->core_scans ? (double)c->probes / (double)c->core_scans : 0.0,
		c->probes, c->placements, c->core_scans, c->cut_limit,
		c->cut_util);
}

/*
 * H1 (doc/scheduler.md 2.5) in the runtime: under overload with a set hint, a
 * wakeup probes at most SIS_CORE_LIMIT_NR cores with SIS_CORE_LIMIT, more
 * without the limit (SIS_CORE_FULL), none in mainline.  Without SIS_UTIL (all
 * features off) neither flag applies and every configuration scans the whole
 * span: that is asserted instead.
 */
static void test_wake_runtime_overloaded_llc_bounds_idle_core_scan(void **state)
{
	struct sis_counts lim, full, mline;
	double lim_avg, full_avg;

	(void)state;
	sis_run("SIS_CORE_LIMIT NO_SIS_CORE_FULL", &lim);
	sis_run("SIS_CORE_FULL NO_SIS_CORE_LIMIT", &full);
	sis_run("NO_SIS_CORE_LIMIT NO_SIS_CORE_FULL", &mline);
	/* Not vacuous: the hint was set at wakeups that needed a scan. */
	assert_true(lim.core_scans >= SIS_ROUNDS / 10);
	assert_true(full.core_scans >= SIS_ROUNDS / 10);
	assert_true(mline.core_scans >= SIS_ROUNDS / 10);
	lim_avg = (double)lim.probes / (double)lim.placements;
	full_avg = (double)full.probes / (double)full.placements;
	if (!lim.sis_util) {
		/* Mainline without SIS_UTIL: unbounded scans everywhere. */
		assert_int_equal(lim.cut_limit, 0);
		assert_true(lim.probes >
			    SIS_CORE_LIMIT_PROBES * lim.core_scans);
		assert_true(full.probes >
			    SIS_CORE_LIMIT_PROBES * full.core_scans);
		assert_true(mline.probes >
			    SIS_CORE_LIMIT_PROBES * mline.core_scans);
		return;
	}
	/* SIS_CORE_LIMIT: at most 2 cores per scan, and the limit acted. */
	assert_true(lim.cut_limit > 0);
	assert_true(lim.probes <= SIS_CORE_LIMIT_PROBES * lim.core_scans);
	assert_true(lim_avg <= SIS_CORE_LIMIT_PROBES);
	/* SIS_CORE_FULL: the whole span per scan, larger per wakeup. */
	assert_int_equal(full.cut_limit, 0);
	assert_true(full.probes > SIS_CORE_LIMIT_PROBES * full.core_scans);
	assert_true(full_avg > lim_avg);
	/* Mainline: an overloaded LLC is not scanned, hint or not. */
	assert_int_equal(mline.probes, 0);
	assert_true(mline.cut_util >= mline.core_scans);
}

/* A fiber that only exists. */
static void *nothing(void *arg)
{
	return arg;
}

/* Creates four children pinned to worker 0, its own worker. */
static void *spawner(void *arg)
{
	fiber_attr_t a;
	cpu_set_t s;
	fiber_t f[4];

	(void)arg;
	fiber_attr_init(&a);
	CPU_ZERO(&s);
	CPU_SET(0, &s);
	fiber_attr_setaffinity(&a, sizeof(s), &s);
	for (int i = 0; i < 4; i++)
		assert_int_equal(fiber_create(&f[i], &a, nothing, NULL), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	fiber_attr_destroy(&a);
	return NULL;
}

/* doc/scheduler.md 3.2.4: a worker whose queue grows to a backlog (three
 * runnable fibers) while another one sleeps wakes it to steal.  The
 * children are pinned, so the kicked worker finds nothing to take: the
 * kick is what is asserted, not where the fibers ran.  On a loaded host
 * the other worker may still be awake when the backlog forms (woken for
 * a tick and not yet run again), and then rightly gets no kick; so the
 * scenario runs up to KICK_TRIES times, and one kick must come. */
#define KICK_TRIES 10
static void test_wake_runtime_backlog_kicks_a_sleeper(void **state)
{
	struct fiber_config c = { 0 };
	fiber_attr_t a;
	cpu_set_t s;
	fiber_t f;

	(void)state;
	c.workers = 2;
	c.topology = "pack:1 l3:1 core:2 pu:1";
	c.idle_poll_us = 0; /* idle workers sleep at once */
	c.idle_poll_set = 1;
	assert_int_equal(fiber_init(&c), 0);
	fiber_stats_reset();
	fiber_attr_init(&a);
	CPU_ZERO(&s);
	CPU_SET(0, &s);
	fiber_attr_setaffinity(&a, sizeof(s), &s);
	for (int i = 0; i < KICK_TRIES && !fiber_stats_counter("kicks"); i++) {
		usleep(20000); /* both asleep */
		assert_int_equal(fiber_create(&f, &a, spawner, NULL), 0);
		assert_int_equal(fiber_join(f, NULL), 0);
	}
	fiber_attr_destroy(&a);
	assert_true(fiber_stats_counter("kicks") >= 1);
	assert_int_equal(fiber_shutdown(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(
			test_wake_runtime_same_llc_idle_uses_wakelist,
			stop_if_running),
		cmocka_unit_test_teardown(
			test_wake_runtime_no_ttwu_queue_idle_enqueues_directly,
			stop_if_running),
		cmocka_unit_test_teardown(
			test_wake_runtime_futex_only_for_sleepers,
			stop_if_running),
		cmocka_unit_test_teardown(
			test_wake_runtime_overloaded_llc_bounds_idle_core_scan,
			sis_teardown),
		cmocka_unit_test_teardown(
			test_wake_runtime_backlog_kicks_a_sleeper,
			stop_if_running),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
