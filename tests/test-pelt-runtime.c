/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-pelt-runtime.c - load tracking in the running runtime (doc/scheduler.md
 * 1.3.4): the scheduler clock, averages updated at every switch, and a fiber's
 * share following it when it moves or leaving with it when it exits.
 *
 * Averages are read only by fibers running on the worker they describe,
 * so that the reads do not race with the owner's lock-free updates.  A
 * runtime of one worker keeps none (sched/sched.h), so the tests of one
 * worker's averages run two and pin their fibers to worker 0.  Time
 * paces the load (a fiber spins for so many ms); the assertions compare
 * averages with each other, with margins far wider than any scheduling
 * noise of a loaded 2-vCPU machine.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "harness.h"
#include "place/pelt.h"
#include "sched/sched.h"

static void start(const char *topo, int workers)
{
	struct fiber_config c = { 0 };

	c.topology = topo;
	c.workers = workers;
	c.stats = "0";
	assert_int_equal(fiber_init(&c), 0);
}

static void stop(void)
{
	assert_int_equal(fiber_shutdown(), 0);
}

/*
 * spin_ms - keep the worker busy for @ms of scheduler-clock time, yielding
 * every 200 us, then run a tick.  A yield with nothing else to run is not
 * a switch, and only every 64th is a tick that updates the averages; on a
 * loaded machine that can be tens of ms, so the last tick makes what the
 * caller reads next current.
 */
static void spin_ms(unsigned ms)
{
	uint64_t end = fb_sched_clock() + (uint64_t)ms * 1000000u;

	while (fb_sched_clock() < end) {
		uint64_t slice = fb_sched_clock() + 200000u;

		while (fb_sched_clock() < slice)
			;
		fiber_yield();
	}
	fb_sched_balance_tick(fb_worker_self());
}

static unsigned long my_util(void)
{
	return fb_current()->pf.avg.util_avg;
}

static unsigned long my_worker_util(void)
{
	return fb_worker_self()->pw.avg.util_avg;
}

static fiber_t spawn_on(void *(*fn)(void *), void *arg, int worker)
{
	fiber_attr_t a;
	cpu_set_t s;
	fiber_t f;

	CPU_ZERO(&s);
	CPU_SET(worker, &s);
	fiber_attr_init(&a);
	fiber_attr_setaffinity(&a, sizeof(s), &s);
	assert_int_equal(fiber_create(&f, &a, fn, arg), 0);
	fiber_attr_destroy(&a);
	return f;
}

/* ---- the clock ----------------------------------------------------------- */

static void test_clock_choice_and_order(void **state)
{
	uint64_t prev, mono;

	(void)state;
	assert_int_equal(fb_clock_setup(FB_CLOCK_MONOTONIC), 0);
	assert_string_equal(fb_clock_name(), "monotonic");
	assert_int_equal(fb_clock_setup(FB_CLOCK_AUTO), 0);
	assert_string_equal(fb_clock_name(), fb_tsc_usable()	? "tsc" :
					     fb_tsc_invariant() ? "anchored" :
								  "monotonic");
	assert_int_equal(fb_clock_setup(FB_CLOCK_TSC),
			 fb_tsc_usable() ? 0 : ENOTSUP);
	assert_int_equal(fb_clock_setup(FB_CLOCK_ANCHORED),
			 fb_tsc_invariant() ? 0 : ENOTSUP);

	/* Never backwards, and on CLOCK_MONOTONIC's timeline: the TSC is
	 * scaled from a calibration point, so the two agree to within the
	 * calibration error (parts in 10^5 of the time since; a second's
	 * slack covers a machine that stalls us for a long while).  The
	 * anchored clock is checked the same way, across sleeps that make
	 * it take new anchors. */
	for (int kind = 0; kind < 2; kind++) {
		if (kind == 1 && !fb_tsc_invariant())
			break;
		fb_clock_setup(kind ? FB_CLOCK_ANCHORED : FB_CLOCK_AUTO);
		prev = fb_sched_clock();
		for (int i = 0; i < 1000000; i++) {
			uint64_t now = fb_sched_clock();

			assert_true(now >= prev);
			prev = now;
			if (i % 100000 == 0)
				usleep(1500); /* past an anchor's window */
		}
		mono = fb_now_ns();
		prev = fb_sched_clock();
		assert_true(prev + 1000000000ull > mono &&
			    mono + 1000000000ull > prev);
	}
	fb_clock_setup(FB_CLOCK_AUTO);
}

/*
 * The anchored clock's arithmetic, on made-up TSC values: one tick per ns
 * (a factor of 1 in 32.32), a window of 1000 ticks.  Inside the window it
 * extrapolates; before the anchor or past the window it asks for a new
 * one; and it never gives a thread less than it gave it before, neither
 * inside a window (a TSC that went back a little, on another CPU) nor at
 * a new anchor (CLOCK_MONOTONIC behind the extrapolation).
 */
static void test_clock_anchor_arithmetic(void **state)
{
	struct fb_clock c = { .mult = 1ull << 32, .window = 1000 };
	struct fb_clock_anchor a = { 0 };
	uint64_t ns = 0;

	(void)state;
	/* No anchor yet: everything is outside. */
	assert_false(fb_clock_extrapolate(&c, &a, 123456, &ns));
	assert_int_equal(fb_clock_anchor_at(&a, 10000, 5000000), 5000000);
	assert_true(fb_clock_extrapolate(&c, &a, 10500, &ns));
	assert_int_equal(ns, 5000500);
	a.last = ns;
	assert_true(fb_clock_extrapolate(&c, &a, 11000, &ns));
	assert_int_equal(ns, 5001000);
	a.last = ns;
	assert_false(fb_clock_extrapolate(&c, &a, 11001, &ns));
	assert_false(fb_clock_extrapolate(&c, &a, 9999, &ns));
	/* Back a little inside the window: held at the last value. */
	assert_true(fb_clock_extrapolate(&c, &a, 10200, &ns));
	assert_int_equal(ns, 5001000);
	/* A new anchor behind what was given: held too. */
	assert_int_equal(fb_clock_anchor_at(&a, 12000, 5000900), 5001000);
	assert_int_equal(a.ns, 5001000);
	assert_true(fb_clock_extrapolate(&c, &a, 12010, &ns));
	assert_int_equal(ns, 5001010);
	/* A factor of 2.5 ns per tick. */
	c.mult = 5ull << 31;
	assert_true(fb_clock_extrapolate(&c, &a, 12100, &ns));
	assert_int_equal(ns, 5001250);
}

/* ---- averages at every switch -------------------------------------------- */

static atomic_int light_stop;
static unsigned long heavy_util, light_util, worker_util;
/* What the kernel did to worker 0's thread while heavy() ran: the
 * involuntary switches and the ns it waited runnable (-1: unknown). */
static long heavy_preempts;
static int64_t heavy_waited;

static void *heavy(void *arg)
{
	long p0 = fb_bind_preempts();
	int64_t w0 = fb_bind_wait(), w1;

	(void)arg;
	spin_ms(150);
	heavy_util = my_util();
	worker_util = my_worker_util();
	w1 = fb_bind_wait();
	heavy_preempts = p0 < 0 ? -1 : fb_bind_preempts() - p0;
	heavy_waited = w0 < 0 || w1 < 0 ? -1 : w1 - w0;
	atomic_store(&light_stop, 1);
	return NULL;
}

static void *light(void *arg)
{
	(void)arg;
	while (!atomic_load(&light_stop))
		fiber_yield();
	light_util = my_util();
	return NULL;
}

/*
 * One worker (of two, the other idle), a fiber that spins 200 us between
 * yields and one that only yields: the time goes to the spinner.  Averages sampled at ticks
 * charged each tick's interval to whoever ran at the tick, so the
 * yielder got a large share of the worker's utilisation; updated at
 * every switch, it gets the few hundred ns it actually runs.
 *
 * The scheduler clock runs while the kernel has the worker's thread off
 * its CPU, and that time is charged to the fiber that was running, as
 * it must be: the runtime cannot tell.  On a loaded machine (CI, the
 * sanitizers' slow switches) the thread now and then loses its CPU for
 * milliseconds while the yielder is the one running, and the yielder's
 * share is then real but not the one this test is about.  So a round
 * that fails after the kernel kept the thread waiting runs again, up to
 * ROUNDS times; a round that fails undisturbed fails the test.
 */
#define ROUNDS 20
#define DISTURBED_NS (2 * 1000000ll) /* waited runnable, per 150 ms */

static bool charge_round(void)
{
	fiber_t h, l;

	start(NULL, 2);
	atomic_store(&light_stop, 0);
	l = spawn_on(light, NULL, 0);
	h = spawn_on(heavy, NULL, 0);
	assert_int_equal(fiber_join(h, NULL), 0);
	assert_int_equal(fiber_join(l, NULL), 0);
	stop();
	print_message("# heavy %lu light %lu worker %lu; preempted %ld, "
		      "waited %lld us\n",
		      heavy_util, light_util, worker_util, heavy_preempts,
		      (long long)(heavy_waited < 0 ? -1 : heavy_waited / 1000));
	/* 150 ms of running: 1 - 2^-(150/32) of 1024 is ~985. */
	return heavy_util >= 700 && worker_util >= 700 &&
	       light_util * 8 <= heavy_util;
}

/* charge_disturbed - did the kernel take worker 0's CPU from it long
 * enough in the last round to explain a failure?  Unknown wait: judged
 * by the preemptions alone. */
static bool charge_disturbed(void)
{
	if (heavy_waited >= 0)
		return heavy_waited >= DISTURBED_NS;
	return heavy_preempts != 0;
}

static void test_switch_updates_charge_the_runner(void **state)
{
	int round;

	(void)state;
	for (round = 1; !charge_round(); round++) {
		/* An undisturbed failure, or too many disturbed ones. */
		assert_true(charge_disturbed());
		assert_true(round < ROUNDS);
	}
}

/* ---- runnext hand-offs ----------------------------------------------------- */

/*
 * A park that hands the worker to runnext lets the worker's own update
 * wait while nr_running stays as it was (sched/sched.h).  Drive
 * fb_sched_pelt_leave() the way schedule() does, on a worker of our own
 * whose two fibers hand it to each other, every 61st switch through the
 * queue, with nr_running moved between two switches (3 runnable
 * fibers, a fiber queued from elsewhere, for one switch in 7) and ticks
 * that sample the worker in between, after a move now and then; beside it, a copy of the worker's averages updated
 * at every switch and tick, as before.  Time is the loop's: 0.7 to 3.7 us
 * between switches, so that units and periods are crossed at every
 * offset.  The two must agree but for the rounding of the decay, which
 * more updates apply in more steps.
 */
static struct fb_worker hw;
static struct fb_fiber hf[2];

static void test_handoffs_account_like_every_switch(void **state)
{
	uint64_t t = 1000000000ull, seed = 12345;
	struct fb_pelt ref;
	long skipped = 0;
	int nr = 1;

	(void)state;
	memset(&hw, 0, sizeof(hw));
	hw.pelt_nr = -1;
	fb_pelt_reset(&hw.pw.avg, t);
	ref = hw.pw.avg;
	for (int i = 0; i < 2; i++) {
		memset(&hf[i], 0, sizeof(hf[i]));
		hf[i].pf.weight = 1024;
		fb_pelt_reset(&hf[i].pf.avg, t);
	}
	for (long k = 0; k < 300000; k++) {
		struct fb_fiber *prev = &hf[k & 1], *next = &hf[!(k & 1)];
		unsigned n;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		t += 700 + (seed >> 33) % 3000;
		nr = k % 7 ? 1 : 3; /* 3 runnable one switch in 7 */
		fb_store_relaxed(&hw.pw.nr_running, nr);
		n = (unsigned)nr;
		fb_pelt_update_worker(&ref, t, n * FB_PELT_CAPACITY, n, true);
		fb_sched_pelt_leave(&hw, prev, t, false, k % 61 ? next : NULL);
		skipped += hw.pelt_skipped;
		fb_store_relaxed(&hw.run_start, t); /* as switch_to does */
		if (k % 331 == 0) { /* a tick, after a move now and then */
			t += 300;
			if (k % 662 == 0)
				nr = 2;
			fb_store_relaxed(&hw.pw.nr_running, nr);
			n = (unsigned)nr;
			fb_pelt_update_worker(&ref, t, n * FB_PELT_CAPACITY, n,
					      true);
			fb_sched_pelt_worker(&hw, t, true);
		}
	}
	t += 1000;
	fb_pelt_update_worker(&ref, t, (unsigned)nr * FB_PELT_CAPACITY,
			      (unsigned)nr, true);
	fb_sched_pelt_worker(&hw, t, true);
	print_message("# skipped %ld of 300000; load %lu/%lu runnable %lu/%lu "
		      "util %lu/%lu\n",
		      skipped, hw.pw.avg.load_avg, ref.load_avg,
		      hw.pw.avg.runnable_avg, ref.runnable_avg,
		      hw.pw.avg.util_avg, ref.util_avg);
	assert_true(skipped > 200000);
	assert_int_equal(hw.pw.avg.last_update, ref.last_update);
	assert_int_equal(hw.pw.avg.period_contrib, ref.period_contrib);
	assert_true(labs((long)hw.pw.avg.load_avg - (long)ref.load_avg) <= 2);
	assert_true(labs((long)hw.pw.avg.runnable_avg -
			 (long)ref.runnable_avg) <= 2);
	assert_true(labs((long)hw.pw.avg.util_avg - (long)ref.util_avg) <= 2);
	assert_true(ref.load_avg > 1024); /* the moves were seen */
}

/*
 * The same in the running runtime, where a park that hands the worker to
 * runnext takes fb_fiber_park()'s short way whenever no period boundary
 * is crossed: two fibers on one worker bounce a byte through two pipes,
 * each spinning 20 us of scheduler-clock time before it passes it on.
 * Each runs about half the time, so together they have about all of the
 * worker's utilisation.
 */
static fiber_pipe_t *bounce_pipe[2];
static unsigned long bounce_util[2], bounce_worker_util;
/* The host's gaps: clock reads of either bouncer more than 1 ms apart. */
static uint64_t bounce_last, bounce_gaps;

static uint64_t bounce_clock(void)
{
	uint64_t now = fb_sched_clock();

	if (bounce_last && now - bounce_last > 1000000u)
		bounce_gaps += now - bounce_last;
	bounce_last = now;
	return now;
}

static void *bouncer(void *arg)
{
	int side = (int)(uintptr_t)arg;
	uint64_t end = fb_sched_clock() + 200000000u;
	unsigned char b = 0;
	size_t done;

	if (side)
		assert_int_equal(fiber_pipe_read(bounce_pipe[1], &b, 1, &done),
				 0);
	while (b != 255) {
		uint64_t slice = bounce_clock() + 20000u;

		while (bounce_clock() < slice)
			;
		if (bounce_clock() >= end) {
			/* Both still here: the other's exit would take its
			 * share out of the worker's. */
			bounce_worker_util = my_worker_util();
			b = 255;
		}
		bounce_util[side] = my_util();
		assert_int_equal(
			fiber_pipe_write(bounce_pipe[!side], &b, 1, &done), 0);
		if (b == 255)
			break;
		assert_int_equal(
			fiber_pipe_read(bounce_pipe[side], &b, 1, &done), 0);
	}
	bounce_util[side] = my_util();
	return NULL;
}

/* One 200 ms ping-pong on one worker: 1 if the shares came out as they
 * should, 0 if not, -1 if the host took the worker away for more than
 * 150 ms of it (then the shares say little). */
static int bounce_round(int round)
{
	fiber_t f[2];

	bounce_last = bounce_gaps = 0;
	start(NULL, 2);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_pipe_create(&bounce_pipe[i], 0), 0);
	for (int i = 0; i < 2; i++)
		f[i] = spawn_on(bouncer, (void *)(uintptr_t)i, 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_pipe_destroy(bounce_pipe[i]), 0);
	stop();
	fprintf(stderr,
		"# round %d: bouncers %lu %lu, worker %lu, host gaps "
		"%llu us\n",
		round, bounce_util[0], bounce_util[1], bounce_worker_util,
		(unsigned long long)bounce_gaps / 1000);
	if (bounce_gaps > 150000000u)
		return -1;
	return bounce_util[0] + bounce_util[1] >= 400 &&
	       bounce_worker_util >= 700;
}

static void test_pingpong_shares_the_worker(void **state)
{
	int judged = 0, ok = 0;

	(void)state;
	/*
	 * A host that takes the worker's CPU away for milliseconds charges
	 * whoever runs then, and a fiber's average is as old as its last
	 * period boundary (the worker's too, between hand-offs), so after
	 * such a gap the halves, and even their sum, can be far off: CI's
	 * sanitizer builds beside the rest of the suite saw 1022 + 0 and a
	 * worker at 104 three rounds running.  Beside three busy loops the
	 * gaps are ~100 ms of the 200 and the shares still right; a round
	 * where the worker had less than a quarter of its CPU (over 150 ms
	 * of gaps) is not judged.  Up to ten rounds run for three judged
	 * ones, and each judged one must pass.  A fiber whose running went
	 * unaccounted on the short way (nearly every hand-off here) leaves
	 * next to nothing in every round.
	 */
	for (int round = 0; round < 10 && judged < 3; round++) {
		int r = bounce_round(round);

		if (r < 0)
			continue;
		judged++;
		ok += r;
	}
	print_message("# %d rounds judged, %d passed\n", judged, ok);
	assert_int_equal(ok, judged);
	if (!judged)
		print_message(
			"# the host left no round ungapped: not judged\n");
}

/* ---- a fiber's share moves with it ---------------------------------------- */

/*
 * At least what util @u is @ns later with nothing running: decayed by y
 * per period boundary crossed (at most one more than the whole periods in
 * @ns), less 1/32 for the divider, which depends on where in its period
 * the average was last derived (at most FB_PELT_PERIOD in FB_LOAD_AVG_MAX).
 */
static unsigned long decayed(unsigned long u, uint64_t ns)
{
	unsigned long d =
		(unsigned long)fb_pelt_decay(u, ns / FB_PELT_PERIOD_NS + 1);

	return d - d / 32;
}

static unsigned long mover_before, mover_after, dst_after, src_after;
static uint64_t mover_left, mover_arrived, probe_at;
static int mover_attached;
static atomic_int blocker_go;

/* Worker 1, busy from the moment the mover is about to come until 40 ms
 * later, without a switch: the mover waits at least that long. */
static void *blocker(void *arg)
{
	uint64_t end;

	(void)arg;
	while (!atomic_load(&blocker_go))
		;
	end = fb_sched_clock() + 40 * 1000000ull;
	while (fb_sched_clock() < end)
		;
	return NULL;
}

/* Worker 0 once the mover has left: its thread off the CPU for 80 ms (a
 * blocking system call, as a host that does not run it), so that its sums
 * are not updated until the mover has long arrived. */
static void *stall(void *arg)
{
	struct timespec ts = { 0, 80 * 1000000L };

	(void)arg;
	while (nanosleep(&ts, &ts))
		;
	return NULL;
}

static void *mover(void *arg)
{
	cpu_set_t s;
	fiber_t st;

	(void)arg;
	spin_ms(120);
	mover_before = my_util();
	mover_left = fb_sched_clock();
	st = spawn_on(stall, NULL, 0);
	atomic_store(&blocker_go, 1);
	CPU_ZERO(&s);
	CPU_SET(1, &s);
	assert_int_equal(fiber_setaffinity(sizeof(s), &s), 0);
	assert_int_equal(fiber_current_worker(), 1);
	/* First thing on worker 1: its sums already hold our share. */
	mover_arrived = fb_sched_clock();
	dst_after = my_worker_util();
	mover_after = my_util();
	mover_attached = fb_current()->pf.attached;
	assert_int_equal(fiber_join(st, NULL), 0);
	return NULL;
}

static void *probe_src(void *arg)
{
	(void)arg;
	probe_at = fb_sched_clock();
	src_after = my_worker_util();
	return NULL;
}

/*
 * A fiber that ran alone on worker 0 moves to worker 1, where it waits
 * (worker 1 is busy) while worker 0's thread is off the CPU: its share
 * goes with it, and worker 0 keeps nothing of it.  Every bound holds
 * however long the host stretches the waits, since decay scales the
 * mover's share and worker 0's sums alike: the mover arrives with what it
 * left with, decayed by the time it took; worker 1 holds at least that;
 * worker 0, which without the removal would still hold the mover's share
 * decayed to the probe, holds less than a quarter of that.  (The share
 * used to be removed as decayed to the arrival, from sums last updated
 * at the departure: worker 0 kept what the wait had decayed.)
 */
static void test_share_follows_a_migrating_fiber(void **state)
{
	unsigned long carried, kept;
	fiber_t m, p, b;

	(void)state;
	start("pack:1 l3:1 core:2 pu:1", 2);
	fiber_stats_reset();
	atomic_store(&blocker_go, 0);
	b = spawn_on(blocker, NULL, 1);
	m = spawn_on(mover, NULL, 0);
	assert_int_equal(fiber_join(m, NULL), 0);
	assert_int_equal(fiber_join(b, NULL), 0);
	/* Worker 0 folds what left it at its next update (it wakes for the
	 * probe). */
	p = spawn_on(probe_src, NULL, 0);
	assert_int_equal(fiber_join(p, NULL), 0);
	carried = decayed(mover_before, mover_arrived - mover_left);
	kept = decayed(mover_before, probe_at - mover_left);
	print_message("# mover %lu -> %lu (decay alone: >= %lu, wait %llu "
		      "ms), dst %lu, src %lu (without the removal: ~%lu), "
		      "migrations %lld\n",
		      mover_before, mover_after, carried,
		      (unsigned long long)(mover_arrived - mover_left) /
			      1000000,
		      dst_after, src_after, kept,
		      fiber_stats_counter("pelt_migrations"));
	assert_true(mover_before >= 700);
	assert_int_equal(mover_attached, 1);
	assert_true(mover_after <= mover_before);
	assert_true(mover_after + 1 >= carried);
	assert_true(dst_after + 64 >= mover_after);
	assert_true(src_after * 4 <= kept + 8);
	assert_true(fiber_stats_counter("pelt_migrations") >= 1);
	stop();
}

/* ---- and leaves with it ----------------------------------------------------- */

static unsigned long exiting_util, after_exit;

static void *exiting(void *arg)
{
	(void)arg;
	spin_ms(120);
	exiting_util = my_util();
	return NULL;
}

static void *probe_after_exit(void *arg)
{
	(void)arg;
	after_exit = my_worker_util();
	return NULL;
}

static void test_share_leaves_with_an_exiting_fiber(void **state)
{
	fiber_t f, p;

	(void)state;
	start(NULL, 2);
	f = spawn_on(exiting, NULL, 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	p = spawn_on(probe_after_exit, NULL, 0);
	assert_int_equal(fiber_join(p, NULL), 0);
	stop();
	print_message("# exiting %lu, worker after %lu\n", exiting_util,
		      after_exit);
	assert_true(exiting_util >= 700);
	assert_true(after_exit * 4 <= exiting_util);
}

/* ---- one worker keeps none ------------------------------------------------- */

static unsigned long solo_util[2], solo_worker_util;
static uint64_t solo_ran[2], solo_before;

/* A bouncer of one worker's ping-pong: 200 hand-offs, after 40 ms of
 * running (spin_ms) on side 0; then what its averages say. */
static void *solo_bouncer(void *arg)
{
	int side = (int)(uintptr_t)arg;
	unsigned char b = 0;
	size_t done;

	if (side == 0)
		spin_ms(40);
	else
		assert_int_equal(fiber_pipe_read(bounce_pipe[1], &b, 1, &done),
				 0);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(
			fiber_pipe_write(bounce_pipe[!side], &b, 1, &done), 0);
		if (side == 1 && i == 99)
			break;
		assert_int_equal(
			fiber_pipe_read(bounce_pipe[side], &b, 1, &done), 0);
	}
	solo_util[side] = my_util() + fb_current()->pf.avg.load_avg +
			  fb_current()->pf.avg.runnable_avg;
	solo_ran[side] = fb_current()->pf.last_ran_ns;
	if (side == 0)
		solo_worker_util =
			my_worker_util() + fb_worker_self()->pw.avg.load_avg;
	return NULL;
}

/*
 * With one worker no wake or creation has a choice and nothing is
 * balanced, so the runtime keeps no load averages (sched/sched.h): a
 * fiber that ran 40 ms and two that handed the worker to each other 200
 * times all still read zero, and the worker too.  What fiber_dump reads,
 * the time each last ran, is still stamped at every switch.
 */
static void test_one_worker_keeps_no_averages(void **state)
{
	fiber_t f[2];

	(void)state;
	start(NULL, 1);
	solo_before = fb_sched_clock();
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_pipe_create(&bounce_pipe[i], 0), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_create(&f[i], NULL, solo_bouncer,
					      (void *)(uintptr_t)i),
				 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_pipe_destroy(bounce_pipe[i]), 0);
	stop();
	print_message("# bouncers %lu %lu, worker %lu\n", solo_util[0],
		      solo_util[1], solo_worker_util);
	assert_int_equal(solo_util[0], 0);
	assert_int_equal(solo_util[1], 0);
	assert_int_equal(solo_worker_util, 0);
	/* Both parked after the 40 ms: stamped then, by hand-offs. */
	assert_true(solo_ran[0] >= solo_before + 40 * 1000000ull);
	assert_true(solo_ran[1] >= solo_before + 40 * 1000000ull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_clock_choice_and_order),
		TEST(test_clock_anchor_arithmetic),
		TEST(test_switch_updates_charge_the_runner),
		TEST(test_handoffs_account_like_every_switch),
		TEST(test_pingpong_shares_the_worker),
		TEST(test_share_follows_a_migrating_fiber),
		TEST(test_share_leaves_with_an_exiting_fiber),
		TEST(test_one_worker_keeps_no_averages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
