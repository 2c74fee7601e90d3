/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-idle-runtime.c - what a worker does when it runs out of work
 * (sched/idle.c), white box: the idle-entry refresh of the LLC's SIS_UTIL
 * scan depth (doc/scheduler.md 2.2.1), the one writer while every worker
 * of an LLC is idle; the steal's gate and its fallback, and the rescue
 * of a stuck worker's queue by a busy one (doc/scheduler.md 1.9).  Assertions read shared words and counters; time only paces the
 * test thread, with bounded waits.
 */
#include <sched.h>
#include <stdatomic.h>
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
#include "sched/sched.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *nothing(void *arg)
{
	return arg;
}

static int read_depth(int w)
{
	struct fb_place_view v;
	int n;

	fb_sched_view_enter(&v);
	n = fb_load_relaxed(&v.topo->llc_shared[w]->nr_idle_scan);
	fb_sched_view_exit();
	return n;
}

static void write_depth(int w, int n)
{
	struct fb_place_view v;

	fb_sched_view_enter(&v);
	fb_store_relaxed(&v.topo->llc_shared[w]->nr_idle_scan, n);
	fb_sched_view_exit();
}

/* A depth of 0 left from a busy period (the periodic balance wrote it)
 * while the LLC has gone idle: no balance runs any more, so only a worker
 * entering its idle loop can raise it again, to the whole LLC (4). */
static void test_idle_entry_refreshes_sis_util_depth(void **state)
{
	struct fiber_config c = { 0 };
	fiber_attr_t a;
	cpu_set_t s;
	fiber_t f;
	int n;

	(void)state;
	c.workers = 4;
	c.topology = "pack:1 l3:1 core:4 pu:1";
	c.sched_features = "SIS_UTIL";
	c.stats = "0";
	assert_int_equal(fiber_init(&c), 0);
	write_depth(0, 0);
	fiber_attr_init(&a);
	CPU_ZERO(&s);
	CPU_SET(0, &s);
	fiber_attr_setaffinity(&a, sizeof(s), &s);
	/* Worker 0 goes idle after each fiber, and one of the first few
	 * idle entries comes past its refresh cadence (4 ms).  A single
	 * one did not always: on a slow start worker 0's first idle entry,
	 * which set the cadence, came within 4 ms of the fiber.  Few: after
	 * about 20 ms of this a balance pass writes the depth too (the
	 * mutant without the idle-entry refresh passed a loop of seconds). */
	for (int tries = 0; tries < 8 && !(n = read_depth(0)); tries++) {
		assert_int_equal(fiber_create(&f, &a, nothing, NULL), 0);
		assert_int_equal(fiber_join(f, NULL), 0);
		usleep(1000);
	}
	n = read_depth(0);
	fiber_attr_destroy(&a);
	assert_int_equal(n, 4);
	assert_int_equal(fiber_shutdown(), 0);
}

/* ---- the steal's gate and fallback (doc/scheduler.md 1.9) ---- */

#define ROUNDS 2000

static fiber_sem_t ping, pong;

static void *pinger(void *arg)
{
	for (int i = 0; i < ROUNDS; i++) {
		fiber_sem_post(&ping);
		fiber_sem_wait(&pong);
	}
	return arg;
}

static void *ponger(void *arg)
{
	for (int i = 0; i < ROUNDS; i++) {
		fiber_sem_wait(&ping);
		fiber_sem_post(&pong);
	}
	return arg;
}

static fiber_t create_on(int w, void *(*fn)(void *), void *arg)
{
	fiber_attr_t a;
	cpu_set_t s;
	fiber_t f;

	fiber_attr_init(&a);
	CPU_ZERO(&s);
	CPU_SET(w, &s);
	fiber_attr_setaffinity(&a, sizeof(s), &s);
	assert_int_equal(fiber_create(&f, &a, fn, arg), 0);
	fiber_attr_destroy(&a);
	return f;
}

/* Two fibers on two workers pass a token back and forth: each worker goes
 * idle at every round, with nothing queued anywhere (no backlog, so the
 * newly-idle gate stays closed).  The idle path must not search for a
 * victim at each idle entry or every 64 spins of its poll: the searches
 * stay a small fraction of the idle entries (the idle loop before the gate
 * searched at least once per idle entry: 2 x ROUNDS). */
static void test_idle_no_search_without_backlog(void **state)
{
	struct fiber_config c = { 0 };
	fiber_t p, q;
	long long searches, switches;

	(void)state;
	c.workers = 2;
	c.topology = "pack:1 l3:1 core:2 pu:1";
	c.stats = "0";
	assert_int_equal(fiber_init(&c), 0);
	fiber_sem_init(&ping, 0);
	fiber_sem_init(&pong, 0);
	fiber_stats_reset();
	q = create_on(1, ponger, NULL);
	p = create_on(0, pinger, NULL);
	assert_int_equal(fiber_join(p, NULL), 0);
	assert_int_equal(fiber_join(q, NULL), 0);
	searches = fiber_stats_counter("steal_searches");
	switches = fiber_stats_counter("switches");
	/* Figures for a reader of the log; stderr keeps the TAP stream clean. */
	fprintf(stderr, "# switches %lld, steal_searches %lld\n", switches,
		searches);
	fiber_sem_destroy(&ping);
	fiber_sem_destroy(&pong);
	assert_int_equal(fiber_shutdown(), 0);
	/* Each round parks both sides on a quiet host (2 x ROUNDS switches);
	 * on a loaded one a wait often finds its post already there and
	 * parks not at all, so only "the workers took turns" is asked. */
	assert_true(switches > 0);
	assert_true(searches >= 0);
	assert_true(searches * 20 < ROUNDS);
}

static atomic_int unpinned, ran_on = -1;
/* How long the hog computes at most. */
static uint64_t hog_ns = 10000000000ull;

/* hog - pinned to worker 0: let the thief unpin itself and queue up here,
 * then compute without a scheduling point until it ran elsewhere (bounded:
 * hog_ns). */
static void *hog(void *arg)
{
	uint64_t end;

	while (!atomic_load(&unpinned))
		fiber_yield();
	end = now_ns() + hog_ns;
	while (atomic_load(&ran_on) < 0 && now_ns() < end)
		;
	return arg;
}

/* stranded - created on worker 0, then allowed everywhere and queued
 * behind the hog; notes where it runs next. */
static void *stranded(void *arg)
{
	atomic_int *flag = arg;

	cpu_set_t all;

	CPU_ZERO(&all);
	CPU_SET(0, &all);
	CPU_SET(1, &all);
	if (fiber_setaffinity(sizeof(all), &all))
		return NULL; /* ran_on stays -1: the test fails */
	atomic_store(flag, 1);
	fiber_yield();
	atomic_store(&ran_on, fb_worker_self()->id);
	return NULL;
}

/*
 * stranding_start - a runtime of @workers workers on as many cores of one
 * LLC for a stranded fiber (features @features, NULL: the defaults): the
 * monitor's rescue off (LIBFIBER_STALL_MS=0), worker 1 polling for a
 * second at a time, even on a loaded host: pinned for good, so that no
 * verdict of adaptive pinning cuts its window (a crowded CPU polls not
 * at all).  The caller unsets LIBFIBER_STALL_MS after its shutdown.
 */
static void stranding_start(struct fiber_config *c, int workers,
			    const char *features)
{
	static char topo[64];

	setenv("LIBFIBER_STALL_MS", "0", 1);
	snprintf(topo, sizeof(topo), "pack:1 l3:1 core:%d pu:1", workers);
	c->workers = workers;
	c->topology = topo;
	c->stats = "0";
	c->sched_features = features;
	c->idle_poll_set = 1;
	c->idle_poll_us = 1000000;
	c->bind = 1;
	c->bind_set = 1;
	assert_int_equal(fiber_init(c), 0);
	atomic_store(&unpinned, 0);
	atomic_store(&ran_on, -1);
}

/* strand - with the counters reset, worker 1 just gone idle (it polls
 * for the next second), the hog and the stranded fiber on worker 0;
 * returns once both ended. */
static void strand(void)
{
	fiber_t h, t;

	fiber_stats_reset();
	assert_int_equal(fiber_join(create_on(1, nothing, NULL), NULL), 0);
	h = create_on(0, hog, NULL);
	t = create_on(0, stranded, &unpinned);
	assert_int_equal(fiber_join(t, NULL), 0);
	assert_int_equal(fiber_join(h, NULL), 0);
}

/* A fiber queued on a worker that never schedules again (its fiber
 * computes) while the other worker polls, the monitor's rescue off
 * (LIBFIBER_STALL_MS=0) and no balance due (no tick on the hog's worker):
 * with the newly-idle gate closed, only the idle loop's ungated fallback
 * can take it.  Without the fallback the fiber stays stranded until the
 * hog gives up. */
static void test_idle_fallback_takes_stranded_fiber(void **state)
{
	struct fiber_config c = { 0 };
	long long steals, pulls, pushes, moves;
	(void)state;
	stranding_start(&c, 2, NULL);
	strand();
	steals = fiber_stats_counter("steals");
	pulls = fiber_stats_counter("lb_pulled");
	pushes = fiber_stats_counter("lb_pushes");
	moves = fiber_stats_counter("stall_moves");
	assert_int_equal(fiber_shutdown(), 0);
	unsetenv("LIBFIBER_STALL_MS");
	fprintf(stderr, "# ran on %d: steals %lld, pulls %lld, pushes %lld\n",
		atomic_load(&ran_on), steals, pulls, pushes);
	/* Without the fallback the fiber runs on worker 0, after the hog. */
	assert_int_equal(atomic_load(&ran_on), 1);
	/* Usually the fallback's steal moved it.  A slow host (ThreadSanitizer
	 * on a loaded CI machine) may open the newly-idle gate, whose pull
	 * takes it first, or let an active balance ask for it while it runs
	 * between its two yields: each is the idle side's doing too. */
	assert_true(steals + pulls + pushes >= 1);
	assert_int_equal(moves, 0);
}

static atomic_int yielding, hog_done;

/* yielder - pinned to worker 1: keeps it busy at scheduling points (a
 * yield with nothing else queued is one, and every FB_TICK_SWITCHES of
 * them are a tick) until the stranded fiber ran or the hog gave up. */
static void *yielder(void *arg)
{
	atomic_store(&yielding, 1);
	while (atomic_load(&ran_on) < 0 && !atomic_load(&hog_done))
		fiber_yield();
	return arg;
}

static void *hog_then_done(void *arg)
{
	hog(arg);
	atomic_store(&hog_done, 1);
	return arg;
}

/*
 * rescue_run - worker 1 busy yielding, worker 0 stuck in the hog with a
 * fiber queued behind it, the monitor's rescue off (LIBFIBER_STALL_MS=0)
 * and no idle worker to steal: where the queued fiber ran, and the
 * counters.  @features: the runtime's scheduler features.
 */
static void rescue_run(const char *features, long long *rescues,
		       long long *moves)
{
	struct fiber_config c = { 0 };
	fiber_t y, h, t;

	setenv("LIBFIBER_STALL_MS", "0", 1);
	c.workers = 2;
	c.topology = "pack:1 l3:1 core:2 pu:1";
	c.stats = "0";
	c.sched_features = features;
	c.bind = 1;
	c.bind_set = 1;
	assert_int_equal(fiber_init(&c), 0);
	atomic_store(&unpinned, 0);
	atomic_store(&ran_on, -1);
	atomic_store(&yielding, 0);
	atomic_store(&hog_done, 0);
	fiber_stats_reset();
	y = create_on(1, yielder, NULL);
	for (uint64_t end = now_ns() + 60000000000ull;
	     !atomic_load(&yielding) && now_ns() < end;)
		usleep(100);
	h = create_on(0, hog_then_done, NULL);
	t = create_on(0, stranded, &unpinned);
	assert_int_equal(fiber_join(t, NULL), 0);
	assert_int_equal(fiber_join(h, NULL), 0);
	assert_int_equal(fiber_join(y, NULL), 0);
	*rescues = fiber_stats_counter("peer_rescues");
	*moves = fiber_stats_counter("stall_moves");
	assert_int_equal(fiber_shutdown(), 0);
	unsetenv("LIBFIBER_STALL_MS");
	fprintf(stderr, "# %s: ran on %d, peer_rescues %lld\n", features,
		atomic_load(&ran_on), *rescues);
}

/* PEER_RESCUE (doc/scheduler.md 1.9): a fiber queued behind one that
 * computes (or behind a worker the kernel preempted: the same to the
 * scheduler) is taken by a busy worker at its tick.  Idle stealing cannot
 * act (worker 1 never idles) and the monitor's rescue is off, so without
 * the rescue the fiber waits for the hog (10 s at most). */
static void test_idle_busy_peer_rescues_stranded_fiber(void **state)
{
	long long rescues, moves;

	(void)state;
	hog_ns = 10000000000ull;
	rescue_run("PEER_RESCUE", &rescues, &moves);
	assert_int_equal(atomic_load(&ran_on), 1);
	assert_true(rescues >= 1);
	assert_int_equal(moves, 0);
}

/* The same with the feature off: nothing counts a rescue, whoever (a
 * periodic balance) moves the fiber, if anything does before the hog,
 * bounded at 50 ms here, gives up. */
static void test_idle_no_peer_rescue_when_switched_off(void **state)
{
	long long rescues, moves;

	(void)state;
	hog_ns = 50000000ull;
	rescue_run("NO_PEER_RESCUE", &rescues, &moves);
	hog_ns = 10000000000ull;
	assert_true(atomic_load(&ran_on) >= 0);
	assert_int_equal(rescues, 0);
	assert_int_equal(moves, 0);
}

static atomic_int stop_spin;
static atomic_long spins;

/* spin_yield - pinned where it is created: yields until told to stop,
 * counting its yields (the test's clock). */
static void *spin_yield(void *arg)
{
	while (!atomic_load(&stop_spin)) {
		atomic_fetch_add(&spins, 1);
		fiber_yield();
	}
	return arg;
}

/* spinners_start - @n spin_yield fibers pinned to worker @w into @y,
 * returned once they have yielded a thousand times. */
static void spinners_start(fiber_t *y, int n, int w)
{
	atomic_store(&stop_spin, 0);
	atomic_store(&spins, 0);
	for (int i = 0; i < n; i++)
		y[i] = create_on(w, spin_yield, NULL);
	for (uint64_t end = now_ns() + 60000000000ull;
	     atomic_load(&spins) < 1000 && now_ns() < end;)
		usleep(1000);
}

/* Two fibers pinned to worker 1 yield to each other, so its nr_running
 * stays 2 while worker 0 has nothing.  Worker 0's search names worker 1
 * each time, and nothing there may move: it must sleep, not poll and
 * search again.  The search that only set a flag for the steal had it
 * poll, search, fail and poll again without end (no sleep at all,
 * hundreds of thousands of searches a second: a whole CPU).  Kicks and
 * balance passes may wake it; each wake costs a few searches, so the
 * searches stay within a few per sleep. */
static void test_idle_sleeps_beside_pinned_queue(void **state)
{
	struct fiber_config c = { 0 };
	long long searches, sleeps, steals;
	fiber_t y[2];

	(void)state;
	c.workers = 2;
	c.topology = "pack:1 l3:1 core:2 pu:1";
	c.stats = "0";
	assert_int_equal(fiber_init(&c), 0);
	spinners_start(y, 2, 1);
	fiber_stats_reset();
	/* A few sleeps, and many yields to let the searches pile up. */
	for (uint64_t end = now_ns() + 60000000000ull;
	     (fiber_stats_counter("sleeps") < 3 ||
	      atomic_load(&spins) < 200000) &&
	     now_ns() < end;)
		usleep(1000);
	searches = fiber_stats_counter("steal_searches");
	sleeps = fiber_stats_counter("sleeps") +
		 fiber_stats_counter("epoll_sleeps");
	steals = fiber_stats_counter("steals");
	atomic_store(&stop_spin, 1);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_join(y[i], NULL), 0);
	assert_int_equal(fiber_shutdown(), 0);
	fprintf(stderr, "# sleeps %lld, steal_searches %lld, steals %lld\n",
		sleeps, searches, steals);
	assert_true(sleeps >= 3);
	assert_true(searches <= 8 * sleeps + 16);
	assert_int_equal(steals, 0);
}

/*
 * Worker 2 has the longest queue, four fibers pinned there; worker 0 is
 * stuck in the hog with a fiber queued behind it that may run on worker
 * 1; worker 1 polls.  Its search names worker 2, which has nothing it
 * may take: the steal must go on to worker 0 rather than give up, or the
 * stranded fiber waits for the hog (10 s).  The monitor's rescue and the
 * busy workers' PEER_RESCUE are off, so that only the idle worker can
 * move it.
 */
static void test_idle_steal_passes_over_pinned_victim(void **state)
{
	struct fiber_config c = { 0 };
	long long steals, pulls;
	fiber_t y[4];

	(void)state;
	stranding_start(&c, 3, "NO_PEER_RESCUE");
	spinners_start(y, 4, 2);
	strand();
	steals = fiber_stats_counter("steals");
	pulls = fiber_stats_counter("lb_pulled");
	atomic_store(&stop_spin, 1);
	for (int i = 0; i < 4; i++)
		assert_int_equal(fiber_join(y[i], NULL), 0);
	assert_int_equal(fiber_shutdown(), 0);
	unsetenv("LIBFIBER_STALL_MS");
	fprintf(stderr, "# ran on %d: steals %lld, pulls %lld\n",
		atomic_load(&ran_on), steals, pulls);
	assert_int_equal(atomic_load(&ran_on), 1);
}

/* down - harness.h's teardown (a test that failed half-way left the
 * runtime up, and every later fiber_init() said EBUSY), after telling
 * the fibers that would run on to stop: shutdown waits for them. */
static int down(void **state)
{
	atomic_store(&stop_spin, 1);
	atomic_store(&hog_done, 1);
	unsetenv("LIBFIBER_STALL_MS");
	return stop_if_running(state);
}

/* The per-level counts of newly-idle skips: one per set bit, the high
 * levels folded into the last count, nothing for an empty mask. */
static void test_level_counts_add_counts_set_bits(void **state)
{
	uint32_t nr[FB_BAL_LEVELS] = { 0 };

	(void)state;
	fb_level_counts_add(nr, 0);
	for (int l = 0; l < FB_BAL_LEVELS; l++)
		assert_int_equal(nr[l], 0);
	fb_level_counts_add(nr, 1u << 0 | 1u << 2);
	fb_level_counts_add(nr, 1u << 2);
	fb_level_counts_add(nr,
			    1u << (FB_BAL_LEVELS - 1) | 1u << 12 | 1u << 31);
	assert_int_equal(nr[0], 1);
	assert_int_equal(nr[1], 0);
	assert_int_equal(nr[2], 2);
	for (int l = 3; l < FB_BAL_LEVELS - 1; l++)
		assert_int_equal(nr[l], 0);
	assert_int_equal(nr[FB_BAL_LEVELS - 1], 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_level_counts_add_counts_set_bits),
		cmocka_unit_test_teardown(
			test_idle_entry_refreshes_sis_util_depth, down),
		cmocka_unit_test_teardown(test_idle_no_search_without_backlog,
					  down),
		cmocka_unit_test_teardown(
			test_idle_fallback_takes_stranded_fiber, down),
		cmocka_unit_test_teardown(
			test_idle_busy_peer_rescues_stranded_fiber, down),
		cmocka_unit_test_teardown(
			test_idle_no_peer_rescue_when_switched_off, down),
		cmocka_unit_test_teardown(test_idle_sleeps_beside_pinned_queue,
					  down),
		cmocka_unit_test_teardown(
			test_idle_steal_passes_over_pinned_victim, down),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
