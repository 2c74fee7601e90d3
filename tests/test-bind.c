/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-bind.c - adaptive pinning (sched/bind.c).  The decision is tested
 * as the pure function it is: a pinned worker stays pinned while it is
 * rarely preempted and lets go at FB_BIND_SHARED_PREEMPTS, or at
 * FB_BIND_HURT_PREEMPTS when they kept it waiting; an unpinned one
 * pins again after the quiet intervals asked for, which double at each
 * later unpin up to a bound.  Then the runtime: a worker whose CPU a
 * spinning thread shares is unpinned; with an injected preemption count,
 * a worker unpins (its affinity widens to the process's) and, once quiet,
 * pins to its PU again; with LIBFIBER_BIND=1 it stays pinned through real
 * sharing.
 */
#include <fiber.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "sched/sched.h"

/* ---- the decision, pure ---- */

/* flush - FB_BIND_WINDOW intervals of @preempts, so that the window
 * holds nothing older; Return: the last decision. */
static int flush(struct fb_wbind *b, uint64_t preempts)
{
	int r = FB_BIND_KEEP;

	for (int i = 0; i < FB_BIND_WINDOW; i++)
		r = fb_bind_decide(b, preempts, 0);
	return r;
}

static void
test_bind_pinned_worker_keeps_its_pu_when_rarely_preempted(void **state)
{
	struct fb_wbind b = { .pinned = true };
	const uint64_t below = (FB_BIND_SHARED_PREEMPTS - 1) / FB_BIND_WINDOW;

	(void)state;
	/* Just under the window's threshold, for ever. */
	for (int i = 0; i < 1000; i++)
		assert_int_equal(
			fb_bind_decide(
				&b,
				i % FB_BIND_WINDOW ?
					below :
					below + (FB_BIND_SHARED_PREEMPTS - 1) %
							FB_BIND_WINDOW,
				0),
			FB_BIND_KEEP);
	assert_int_equal(flush(&b, 0), FB_BIND_KEEP);
	/* The threshold in one interval lets go at once. */
	assert_int_equal(fb_bind_decide(&b, FB_BIND_SHARED_PREEMPTS, 0),
			 FB_BIND_UNPIN);
	assert_int_equal(b.quiet_needed, FB_BIND_QUIET_CHECKS);
}

/* The window: the threshold spread over FB_BIND_WINDOW intervals unpins on
 * the interval that completes it, and not when an older interval has
 * left the window. */
static void test_bind_window_sums_the_last_intervals(void **state)
{
	struct fb_wbind b = { .pinned = true };
	uint64_t part = FB_BIND_SHARED_PREEMPTS / FB_BIND_WINDOW + 1;

	(void)state;
	for (int i = 1; i < FB_BIND_WINDOW; i++)
		assert_int_equal(fb_bind_decide(&b, part, 0), FB_BIND_KEEP);
	assert_int_equal(fb_bind_decide(&b, part, 0), FB_BIND_UNPIN);
	b = (struct fb_wbind){ .pinned = true };
	assert_int_equal(fb_bind_decide(&b, FB_BIND_SHARED_PREEMPTS - 1, 0),
			 FB_BIND_KEEP);
	for (int i = 1; i < FB_BIND_WINDOW; i++)
		assert_int_equal(fb_bind_decide(&b, 0, 0), FB_BIND_KEEP);
	/* The 9 left the window as this 1 came in. */
	assert_int_equal(fb_bind_decide(&b, 1, 0), FB_BIND_KEEP);
}

/* Few preemptions that kept the worker waiting long (a neighbour that
 * sleeps and wakes) unpin it; the wait alone (wakeup latency) does not,
 * nor do the preemptions with little wait or an unknown one. */
static void test_bind_few_long_preemptions_unpin(void **state)
{
	const int64_t hurt = FB_BIND_HURT_WAIT_NS;
	struct fb_wbind b = { .pinned = true };

	(void)state;
	assert_int_equal(fb_bind_decide(&b, FB_BIND_HURT_PREEMPTS - 1,
					50 * hurt),
			 FB_BIND_KEEP);
	assert_int_equal(flush(&b, 0), FB_BIND_KEEP);
	assert_int_equal(fb_bind_decide(&b, 0, 100 * hurt), FB_BIND_KEEP);
	assert_int_equal(flush(&b, 0), FB_BIND_KEEP);
	assert_int_equal(fb_bind_decide(&b, FB_BIND_HURT_PREEMPTS, hurt - 1),
			 FB_BIND_KEEP);
	assert_int_equal(flush(&b, 0), FB_BIND_KEEP);
	assert_int_equal(fb_bind_decide(&b, FB_BIND_SHARED_PREEMPTS - 1, -1),
			 FB_BIND_KEEP);
	assert_int_equal(flush(&b, 0), FB_BIND_KEEP);
	/* Spread over the window, preemptions and wait together. */
	assert_int_equal(fb_bind_decide(&b, 1, hurt / 2), FB_BIND_KEEP);
	assert_int_equal(fb_bind_decide(&b, 1, 0), FB_BIND_KEEP);
	assert_int_equal(fb_bind_decide(&b, FB_BIND_HURT_PREEMPTS - 2,
					hurt - hurt / 2),
			 FB_BIND_UNPIN);
	assert_int_equal(b.quiet_needed, FB_BIND_QUIET_CHECKS);
	/* Unpinned, the same window is not quiet. */
	b.pinned = false;
	assert_int_equal(fb_bind_decide(&b, 0, 0), FB_BIND_KEEP);
	assert_int_equal(b.quiet, 0);
}

static void test_bind_unpinned_worker_repins_after_quiet_intervals(void **state)
{
	struct fb_wbind b = { .pinned = true };

	(void)state;
	assert_int_equal(fb_bind_decide(&b, 100, 0), FB_BIND_UNPIN);
	b.pinned = false;
	/* Still preempted: stays unpinned whatever the count. */
	for (int i = 0; i < 100; i++)
		assert_int_equal(fb_bind_decide(&b, FB_BIND_QUIET_PREEMPTS + 1,
						0),
				 FB_BIND_KEEP);
	/* The window empties of them before the quiet count starts. */
	for (int i = 1; i < FB_BIND_WINDOW; i++) {
		assert_int_equal(fb_bind_decide(&b, 0, 0), FB_BIND_KEEP);
		assert_int_equal(b.quiet, 0);
	}
	for (int i = 0; i < FB_BIND_QUIET_CHECKS - 1; i++)
		assert_int_equal(
			fb_bind_decide(&b, i == 0 ? FB_BIND_QUIET_PREEMPTS : 0,
				       0),
			FB_BIND_KEEP);
	assert_int_equal(b.quiet, FB_BIND_QUIET_CHECKS - 1);
	/* One noisy interval starts the count again. */
	assert_int_equal(fb_bind_decide(&b, 50, 0), FB_BIND_KEEP);
	assert_int_equal(b.quiet, 0);
	for (int i = 1; i < FB_BIND_WINDOW + FB_BIND_QUIET_CHECKS - 1; i++)
		assert_int_equal(fb_bind_decide(&b, 0, 0), FB_BIND_KEEP);
	assert_int_equal(fb_bind_decide(&b, 0, 0), FB_BIND_REPIN);
}

/* The shared verdict, which cuts the idle poll window (FB_POLL_SHARED_DIV),
 * is the window's, pinned or not: set with the unpin, cleared once the
 * window is quiet although the worker stays unpinned for the quiet asked,
 * set again by a few long preemptions. */
static void test_bind_shared_verdict_follows_the_window(void **state)
{
	struct fb_wbind b = { .pinned = true };

	(void)state;
	assert_int_equal(flush(&b, 0), FB_BIND_KEEP);
	assert_false(b.shared);
	assert_int_equal(fb_bind_decide(&b, FB_BIND_SHARED_PREEMPTS, 0),
			 FB_BIND_UNPIN);
	assert_true(b.shared);
	b.pinned = false;
	for (int i = 1; i < FB_BIND_WINDOW; i++) {
		assert_int_equal(fb_bind_decide(&b, 0, 0), FB_BIND_KEEP);
		assert_true(b.shared);
	}
	assert_int_equal(fb_bind_decide(&b, 0, 0), FB_BIND_KEEP);
	assert_false(b.shared);
	assert_false(b.pinned);
	assert_int_equal(fb_bind_decide(&b, FB_BIND_HURT_PREEMPTS,
					FB_BIND_HURT_WAIT_NS),
			 FB_BIND_KEEP);
	assert_true(b.shared);
}

/* The crowded verdict, which stops the idle poll (FB_POLL_CROWDED_WAIT_NS),
 * is the window's wait alone: set when the window's sum reaches the
 * threshold, whatever the preemption count and pinned or not, and
 * cleared once the intervals that made it have left the window. */
static void test_bind_crowded_verdict_is_the_window_wait(void **state)
{
	struct fb_wbind b = { .pinned = true };
	const int64_t part = FB_POLL_CROWDED_WAIT_NS / FB_BIND_WINDOW;

	(void)state;
	assert_int_equal(flush(&b, 0), FB_BIND_KEEP);
	assert_false(b.crowded);
	/* Just under the threshold over the whole window. */
	for (int i = 0; i < FB_BIND_WINDOW - 1; i++) {
		assert_int_equal(fb_bind_decide(&b, 0, part), FB_BIND_KEEP);
		assert_false(b.crowded);
	}
	assert_int_equal(fb_bind_decide(&b, 0, part - 1), FB_BIND_KEEP);
	assert_false(b.crowded);
	/* The interval that completes it: crowded, and with no preemption
	 * counted not shared, so still pinned. */
	assert_int_equal(fb_bind_decide(&b, 0, part + 1), FB_BIND_KEEP);
	assert_true(b.crowded);
	assert_false(b.shared);
	assert_true(b.pinned);
	/* It stays while the window holds enough of the wait... */
	assert_int_equal(fb_bind_decide(&b, 0, part), FB_BIND_KEEP);
	assert_true(b.crowded);
	/* ...and goes with the intervals that made it. */
	for (int i = 0; i < FB_BIND_WINDOW - 1; i++)
		fb_bind_decide(&b, 0, 0);
	assert_false(b.crowded);
	/* An unknown wait (-1: no schedstat) counts as none. */
	for (int i = 0; i < FB_BIND_WINDOW; i++)
		fb_bind_decide(&b, FB_BIND_SHARED_PREEMPTS, -1);
	assert_false(b.crowded);
	assert_true(b.shared);
}

static void test_bind_quiet_asked_doubles_up_to_the_bound(void **state)
{
	struct fb_wbind b = { .pinned = true };
	unsigned int expect = FB_BIND_QUIET_CHECKS, checks;

	(void)state;
	for (int round = 0; round < 12; round++) {
		b.pinned = true;
		assert_int_equal(fb_bind_decide(&b, 1000, 0), FB_BIND_UNPIN);
		assert_int_equal(b.quiet_needed, expect);
		b.pinned = false;
		checks = 0;
		while (fb_bind_decide(&b, 0, 0) == FB_BIND_KEEP)
			checks++;
		/* the 1000 stays in the window for FB_BIND_WINDOW - 1 */
		assert_int_equal(checks + 1, expect + FB_BIND_WINDOW - 1);
		if (expect < FB_BIND_QUIET_MAX)
			expect *= 2;
	}
	assert_int_equal(b.quiet_needed, FB_BIND_QUIET_MAX);
}

/* ---- the runtime ---- */

static atomic_int stop_hog, stop_spin, spin_cpu = -1, spin_cpus;
static atomic_int want_probe;

static int affinity_count(void)
{
	cpu_set_t s;

	if (sched_getaffinity(0, sizeof(s), &s))
		return -1;
	return CPU_COUNT(&s);
}

/* Runs on worker 0, yielding (so the worker ticks) until told to stop;
 * on request it reports its thread's CPU count. */
static void *spinner(void *arg)
{
	(void)arg;
	atomic_store(&spin_cpu, sched_getcpu());
	atomic_store(&spin_cpus, affinity_count());
	while (!atomic_load(&stop_spin)) {
		if (atomic_exchange(&want_probe, 0))
			atomic_store(&spin_cpus, affinity_count());
		fiber_yield();
	}
	return NULL;
}

static void *hog(void *arg)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET((int)(intptr_t)arg, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
	while (!atomic_load(&stop_hog))
		;
	return NULL;
}

/* Wait until @name reaches @n; false after @secs seconds. */
static bool wait_counter(const char *name, long long n, int secs)
{
	for (int i = 0; i < secs * 100; i++) {
		if (fiber_stats_counter(name) >= n)
			return true;
		usleep(10000);
	}
	return false;
}

/*
 * WAIT_FOR - sleep until @cond holds; after @secs seconds fail the test,
 * saying what it waited for.  A bounded wait: the teardown then stops
 * the spinner and the runtime, where an endless one would leave meson's
 * timeout with nothing to report.
 */
#define WAIT_FOR(cond, secs, what)                                             \
	do {                                                                   \
		for (long i_ = 0; !(cond); i_++) {                             \
			if (i_ == (secs)*1000L)                                \
				fail_msg("%s: still not after %d s (unpins "   \
					 "%lld, repins %lld)",                 \
					 what, secs,                           \
					 fiber_stats_counter("unpins"),        \
					 fiber_stats_counter("repins"));       \
			usleep(1000);                                          \
		}                                                              \
	} while (0)

static int probe(void)
{
	atomic_store(&spin_cpus, 0);
	atomic_store(&want_probe, 1);
	WAIT_FOR(atomic_load(&spin_cpus) != 0, 60, "the spinner's answer");
	return atomic_load(&spin_cpus);
}

/* Wait until the spinner's thread may use @n CPUs; false after @secs. */
static bool wait_probe(int n, int secs)
{
	for (int i = 0; i < secs * 100; i++) {
		if (probe() == n)
			return true;
		usleep(10000);
	}
	return false;
}

static fiber_t start_spinner(void)
{
	fiber_attr_t attr;
	cpu_set_t w0;
	fiber_t f;

	CPU_ZERO(&w0);
	CPU_SET(0, &w0);
	assert_int_equal(fiber_attr_init(&attr), 0);
	assert_int_equal(fiber_attr_setstacksize(&attr, TEST_STACK), 0);
	assert_int_equal(fiber_attr_setaffinity(&attr, sizeof(w0), &w0), 0);
	atomic_store(&stop_spin, 0);
	atomic_store(&spin_cpu, -1);
	assert_int_equal(fiber_create(&f, &attr, spinner, NULL), 0);
	fiber_attr_destroy(&attr);
	WAIT_FOR(atomic_load(&spin_cpu) >= 0, 60, "the spinner's start");
	return f;
}

/* A spinning thread on worker 0's CPU: the kernel preempts the worker,
 * which lets go of its PU. */
static void test_bind_shared_cpu_unpins(void **state)
{
	int all = affinity_count();
	pthread_t h;
	fiber_t f;

	(void)state;
	if (all < 2)
		skip(); /* unpinning could not widen anything */
	unsetenv("LIBFIBER_BIND");
	runtime_start(2);
	assert_int_equal(fb_rt->params.bind, FB_BIND_AUTO);
	f = start_spinner();
	atomic_store(&stop_hog, 0);
	assert_int_equal(
		pthread_create(&h, NULL, hog,
			       (void *)(intptr_t)atomic_load(&spin_cpu)),
		0);
	assert_true(wait_counter("unpins", 1, 30));
	atomic_store(&stop_hog, 1);
	assert_int_equal(pthread_join(h, NULL), 0);
	atomic_store(&stop_spin, 1);
	assert_int_equal(fiber_join(f, NULL), 0);
	runtime_stop();
}

/*
 * The whole cycle with the preemption count injected, so that other load
 * on the machine cannot make it quiet or noisy: pinned, shared (unpinned:
 * the worker's affinity is the process's), quiet (pinned again: one CPU).
 */
static atomic_long fake_preempts, fake_rate;
static _Thread_local long fake_mine;

static long fake(void)
{
	/* Each worker's check sees exactly @fake_rate new preemptions since
	 * its last: a count shared by the workers would hand a slow worker
	 * the checks of a quick one too (the idle worker checks each 25 ms,
	 * a busy one at its tick), and on a slow host that sum passed
	 * FB_BIND_SHARED_PREEMPTS.  @fake_preempts counts the checks. */
	atomic_fetch_add(&fake_preempts, 1);
	fake_mine += atomic_load(&fake_rate);
	return fake_mine;
}

static void test_bind_cycle_unpin_and_repin(void **state)
{
	int all = affinity_count();
	long (*saved)(void) = fb_bind_preempts;
	fiber_t f;

	(void)state;
	if (all < 2)
		skip();
	unsetenv("LIBFIBER_BIND");
	atomic_store(&fake_rate, 0);
	fb_bind_preempts = fake;
	runtime_start(2);
	f = start_spinner();
	assert_int_equal(probe(), 1);
	atomic_store(&fake_rate, 1000);
	assert_true(wait_probe(all, 30));
	assert_true(fiber_stats_counter("unpins") >= 1);
	atomic_store(&fake_rate, 0);
	assert_true(wait_probe(1, 30));
	assert_true(fiber_stats_counter("repins") >= 1);
	atomic_store(&stop_spin, 1);
	assert_int_equal(fiber_join(f, NULL), 0);
	runtime_stop();
	fb_bind_preempts = saved;
}

/* The wait signal in the runtime: a few injected preemptions per interval
 * unpin a worker only while the injected wait grows by more than
 * FB_BIND_HURT_WAIT_NS per interval. */
static atomic_llong fake_wait_rate;
static _Thread_local int64_t fake_wait_mine;

static atomic_long wait_checks[2]; /* fake_wait's calls, by worker */

static int64_t fake_wait(void)
{
	struct fb_worker *w = fb_worker_self();

	if (w && w->id < 2)
		atomic_fetch_add(&wait_checks[w->id], 1);
	fake_wait_mine += atomic_load(&fake_wait_rate);
	return fake_wait_mine;
}

/* inject - adaptive pinning (LIBFIBER_BIND unset) on injected signals:
 * @rate preemptions and @wait_rate ns of run-queue wait per check. */
static void inject(long rate, long long wait_rate)
{
	unsetenv("LIBFIBER_BIND");
	atomic_store(&fake_rate, rate);
	atomic_store(&fake_wait_rate, wait_rate);
	fb_bind_preempts = fake;
	fb_bind_wait = fake_wait;
}

static void test_bind_runtime_unpins_on_long_waits(void **state)
{
	long (*saved)(void) = fb_bind_preempts;
	int64_t (*saved_wait)(void) = fb_bind_wait;
	int all = affinity_count();
	fiber_t f;

	(void)state;
	if (all < 2)
		skip();
	/* In the window: at least HURT, fewer than SHARED. */
	inject(1, 0);
	runtime_start(2);
	f = start_spinner();
	assert_int_equal(probe(), 1);
	/* Many intervals of few preemptions and no wait: still pinned. */
	{
		long seen = atomic_load(&fake_preempts);

		WAIT_FOR(atomic_load(&fake_preempts) >=
				 seen + 20 * FB_BIND_WINDOW,
			 60, "20 windows of checks");
	}
	assert_int_equal(probe(), 1);
	assert_int_equal(fiber_stats_counter("unpins"), 0);
	atomic_store(&fake_wait_rate, 4 * FB_BIND_HURT_WAIT_NS);
	assert_true(wait_probe(all, 30));
	assert_true(fiber_stats_counter("unpins") >= 1);
	atomic_store(&stop_spin, 1);
	assert_int_equal(fiber_join(f, NULL), 0);
	runtime_stop();
	fb_bind_preempts = saved;
	fb_bind_wait = saved_wait;
}

/* Sleeps a millisecond at a time until told to stop, so that its worker
 * goes idle each time, and each idle wait ends at the worker's own timer:
 * no other thread's wakeup ends it (fiber_create from this thread would:
 * that is a fiber's wakeup to the poll average). */
static atomic_int stop_nap;
static fiber_t nappers[2];

static void *napper(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_nap))
		fiber_usleep(1000);
	return NULL;
}

/* A napper on each of workers 0 and 1. */
/* attr_on - @attr initialised for a test fiber pinned to worker @w. */
static void attr_on(fiber_attr_t *attr, int w)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(w, &set);
	assert_int_equal(fiber_attr_init(attr), 0);
	assert_int_equal(fiber_attr_setstacksize(attr, TEST_STACK), 0);
	assert_int_equal(fiber_attr_setaffinity(attr, sizeof(set), &set), 0);
}

static void naps_start(void)
{
	atomic_store(&stop_nap, 0);
	for (int i = 0; i < 2; i++) {
		fiber_attr_t attr;

		attr_on(&attr, i);
		assert_int_equal(fiber_create(&nappers[i], &attr, napper, NULL),
				 0);
		fiber_attr_destroy(&attr);
	}
}

static void naps_stop(void)
{
	atomic_store(&stop_nap, 1);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_join(nappers[i], NULL), 0);
}

/* Wait until each worker has made @n more checks than *@c0 and *@c1,
 * and move those to now. */
static void wait_checks_past(long *c0, long *c1, long n)
{
	WAIT_FOR(atomic_load(&wait_checks[0]) >= *c0 + n &&
			 atomic_load(&wait_checks[1]) >= *c1 + n,
		 60, "the workers' checks");
	*c0 = atomic_load(&wait_checks[0]);
	*c1 = atomic_load(&wait_checks[1]);
}

/* The crowded verdict in the runtime: while the injected run-queue wait
 * fills FB_POLL_CROWDED_WAIT_NS of the window, a worker going idle does
 * not poll (poll_skips counts it); once the wait stops and the window has
 * moved on, it polls again.  No preemption is injected, so nothing
 * unpins: the poll follows the wait alone. */
static void test_bind_crowded_worker_does_not_poll(void **state)
{
	long long skips;
	long c0, c1;

	(void)state;
	if (affinity_count() < 2)
		skip();
	inject(0, 0);
	runtime_start(2);
	naps_start();
	c0 = atomic_load(&wait_checks[0]);
	c1 = atomic_load(&wait_checks[1]);
	wait_checks_past(&c0, &c1, 2 * FB_BIND_WINDOW);
	assert_int_equal(fiber_stats_counter("poll_skips"), 0);
	atomic_store(&fake_wait_rate, FB_POLL_CROWDED_WAIT_NS);
	WAIT_FOR(fiber_stats_counter("poll_skips") > 0, 60, "a skipped poll");
	assert_int_equal(fiber_stats_counter("unpins"), 0);
	/* Quiet again: once each worker has checked twice a window's
	 * intervals, no idle wait skips its poll for another window. */
	atomic_store(&fake_wait_rate, 0);
	c0 = atomic_load(&wait_checks[0]);
	c1 = atomic_load(&wait_checks[1]);
	wait_checks_past(&c0, &c1, 2 * FB_BIND_WINDOW);
	skips = fiber_stats_counter("poll_skips");
	wait_checks_past(&c0, &c1, FB_BIND_WINDOW);
	assert_int_equal(fiber_stats_counter("poll_skips"), skips);
	naps_stop();
	runtime_stop();
}

/* crowded_start - 2 workers that poll a second at a time, crowded by the
 * injected wait from their first checks. */
static void crowded_start(void)
{
	struct fiber_config c = { 0 };

	inject(0, FB_POLL_CROWDED_WAIT_NS);
	c.workers = 2;
	c.idle_poll_set = 1;
	c.idle_poll_us = 1000000;
	assert_int_equal(fiber_init(&c), 0);
}

struct pp {
	fiber_pipe_t *ab, *ba;
	long rounds;
};

static void *pp_ping(void *arg)
{
	struct pp *p = arg;
	char c = 'x';
	size_t n;

	for (long i = 0; i < p->rounds; i++) {
		assert_int_equal(fiber_pipe_write(p->ab, &c, 1, &n), 0);
		assert_int_equal(fiber_pipe_read(p->ba, &c, 1, &n), 0);
	}
	return NULL;
}

static void *pp_pong(void *arg)
{
	struct pp *p = arg;
	char c;
	size_t n;

	for (long i = 0; i < p->rounds; i++) {
		assert_int_equal(fiber_pipe_read(p->ab, &c, 1, &n), 0);
		assert_int_equal(fiber_pipe_write(p->ba, &c, 1, &n), 0);
	}
	return NULL;
}

/* A crowded worker whose polls end with fibers' wakeups keeps polling: a
 * split ping-pong over fiber pipes between workers 0 and 1, while the
 * injected wait says crowded.  The first idle waits skip their poll
 * (nothing is known of what polling finds), every FB_POLL_SAMPLE-th polls
 * and finds its partner's wakeup, and once those are half of the
 * average's weight the worker polls on: a few dozen skips, not seven of
 * every eight idle waits.  The window is a second, so that no poll runs out on a
 * slow host (a poll that runs out says nothing either way). */
static void test_bind_crowded_worker_polls_for_fiber_wakeups(void **state)
{
	struct pp p = { .rounds = 20000 };
	fiber_attr_t attr[2];
	fiber_t f[2];

	(void)state;
	if (affinity_count() < 2)
		skip();
	crowded_start();
	/* Crowded first: the nappers' waits skip their polls. */
	naps_start();
	WAIT_FOR(fiber_stats_counter("poll_skips") > 0, 60, "a skipped poll");
	naps_stop();
	fiber_stats_reset();
	assert_int_equal(fiber_pipe_create(&p.ab, 0), 0);
	assert_int_equal(fiber_pipe_create(&p.ba, 0), 0);
	for (int i = 0; i < 2; i++)
		attr_on(&attr[i], i);
	assert_int_equal(fiber_create(&f[1], &attr[1], pp_pong, &p), 0);
	assert_int_equal(fiber_create(&f[0], &attr[0], pp_ping, &p), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(fiber_join(f[i], NULL), 0);
		fiber_attr_destroy(&attr[i]);
	}
	fprintf(stderr,
		"# poll_skips %lld, idle_polls_found %lld, poll_wakes %lld, "
		"sleeps %lld\n",
		fiber_stats_counter("poll_skips"),
		fiber_stats_counter("idle_polls_found"),
		fiber_stats_counter("poll_wakes"),
		fiber_stats_counter("sleeps"));
	/* How many waits go idle depends on the host (a preempted worker
	 * finds its partner's reply already there); that the polled ones
	 * outnumber the skipped does not.  Skipping all but the samples
	 * would make it seven skips to one poll. */
	assert_true(fiber_stats_counter("poll_skips") <= 200);
	assert_true(fiber_stats_counter("poll_skips") <
		    fiber_stats_counter("idle_polls_found"));
	assert_int_equal(fiber_pipe_destroy(p.ab), 0);
	assert_int_equal(fiber_pipe_destroy(p.ba), 0);
	runtime_stop();
}

static atomic_int stop_yield;

/* yield_on - pinned: yields until told to stop (keeps its worker's
 * nr_running above one, with nothing another worker may take). */
static void *yield_on(void *arg)
{
	while (!atomic_load(&stop_yield))
		fiber_yield();
	return arg;
}

struct napping_pp {
	struct pp pp;
	long warm;		 /* rounds before the count */
	long long skips_at_warm; /* poll_skips then */
};

static void *npp_ping(void *arg)
{
	struct napping_pp *q = arg;
	char c = 'x';
	size_t n;

	for (long i = 0; i < q->pp.rounds; i++) {
		if (i == q->warm)
			q->skips_at_warm = fiber_stats_counter("poll_skips");
		assert_int_equal(fiber_pipe_write(q->pp.ab, &c, 1, &n), 0);
		assert_int_equal(fiber_pipe_read(q->pp.ba, &c, 1, &n), 0);
	}
	return NULL;
}

/* ...and every 200th round after the warm-up, naps 20 ms first. */
static void *npp_pong(void *arg)
{
	struct napping_pp *q = arg;
	char c;
	size_t n;

	for (long i = 0; i < q->pp.rounds; i++) {
		assert_int_equal(fiber_pipe_read(q->pp.ab, &c, 1, &n), 0);
		if (i > q->warm && i % 200 == 0)
			fiber_usleep(20000);
		assert_int_equal(fiber_pipe_write(q->pp.ba, &c, 1, &n), 0);
	}
	return NULL;
}

/* The steal hint does not weigh against polling: worker 1 keeps two
 * pinned fibers yielding beside the pong, so the hint (another worker's
 * nr_running above one) holds throughout and nothing there may move.
 * Worker 0's long waits for the napping pong poll on (a second's window),
 * cut once a millisecond by the hint.  Sampled as polls that found no
 * fiber's wakeup, those cuts drove the average of the crowded worker
 * below half within a nap, and the rounds after it skipped seven polls
 * in eight; not sampled, no poll is skipped once the warm-up filled the
 * average. */
static void test_bind_crowded_poll_ignores_unmovable_steal_hints(void **state)
{
	struct napping_pp q = { .pp.rounds = 3000, .warm = 1000 };
	fiber_attr_t attr[2];
	fiber_t f[2], y[2];
	long long skips;

	(void)state;
	if (affinity_count() < 2)
		skip();
	crowded_start();
	assert_int_equal(fiber_pipe_create(&q.pp.ab, 0), 0);
	assert_int_equal(fiber_pipe_create(&q.pp.ba, 0), 0);
	for (int i = 0; i < 2; i++)
		attr_on(&attr[i], i);
	atomic_store(&stop_yield, 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_create(&y[i], &attr[1], yield_on, NULL),
				 0);
	/* Crowded from worker 0's first check on (the window's wait). */
	{
		long c0 = atomic_load(&wait_checks[0]);

		WAIT_FOR(atomic_load(&wait_checks[0]) >= c0 + 2, 60,
			 "worker 0's checks");
	}
	assert_int_equal(fiber_create(&f[1], &attr[1], npp_pong, &q), 0);
	assert_int_equal(fiber_create(&f[0], &attr[0], npp_ping, &q), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	skips = fiber_stats_counter("poll_skips") - q.skips_at_warm;
	atomic_store(&stop_yield, 1);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(fiber_join(y[i], NULL), 0);
		fiber_attr_destroy(&attr[i]);
	}
	fprintf(stderr, "# poll_skips after the warm-up %lld\n", skips);
	assert_int_equal(skips, 0);
	assert_int_equal(fiber_pipe_destroy(q.pp.ab), 0);
	assert_int_equal(fiber_pipe_destroy(q.pp.ba), 0);
	runtime_stop();
}

/* schedstat's second number, read with stdio: what fb_bind_wait() must
 * say, between two of these. */
static int64_t schedstat_wait(void)
{
	unsigned long long run, wait;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%llu %llu", &run, &wait), 2);
	fclose(f);
	return (int64_t)wait;
}

/* The real wait reader: this kernel's schedstat file, or -1 without it. */
static void test_bind_wait_reads_schedstat(void **state)
{
	int64_t a, b, lo, hi;
	volatile unsigned long spin = 0;

	(void)state;
	a = fb_bind_wait();
	if (access("/proc/thread-self/schedstat", R_OK)) {
		assert_int_equal(a, -1);
		return;
	}
	assert_true(a >= 0);
	for (unsigned long i = 0; i < 1000000; i++)
		spin += i;
	(void)spin;
	sched_yield();
	b = fb_bind_wait();
	assert_true(b >= a);
	/* The run-queue wait, not the run time before it. */
	lo = schedstat_wait();
	b = fb_bind_wait();
	hi = schedstat_wait();
	assert_true(lo <= b && b <= hi);
}

static void test_bind_forced_stays_pinned_when_shared(void **state)
{
	pthread_t h;
	fiber_t f;

	(void)state;
	if (affinity_count() < 2)
		skip();
	setenv("LIBFIBER_BIND", "1", 1);
	runtime_start(2);
	unsetenv("LIBFIBER_BIND");
	assert_int_equal(fb_rt->params.bind, FB_BIND_ON);
	f = start_spinner();
	atomic_store(&stop_hog, 0);
	assert_int_equal(
		pthread_create(&h, NULL, hog,
			       (void *)(intptr_t)atomic_load(&spin_cpu)),
		0);
	/* Ten windows of sharing: an adaptive worker unpins in one or
	 * two. */
	usleep(10 * FB_BIND_WINDOW * FB_BIND_CHECK_NS / 1000);
	assert_int_equal(probe(), 1);
	atomic_store(&stop_hog, 1);
	assert_int_equal(pthread_join(h, NULL), 0);
	atomic_store(&stop_spin, 1);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(fiber_stats_counter("unpins"), 0);
	runtime_stop();
}

/* Teardown: what a failed assertion left running.  fiber_shutdown waits
 * for runnable fibers, and the spinner runs until told to stop, so a
 * failure in a runtime test must stop it (and the hog) first, or it
 * would hang there instead of reporting. */
static long (*saved_preempts)(void);
static int64_t (*saved_wait)(void);

static int stop_all(void **state)
{
	atomic_store(&stop_spin, 1);
	atomic_store(&stop_hog, 1);
	atomic_store(&stop_nap, 1);
	stop_if_running(state);
	fb_bind_preempts = saved_preempts;
	fb_bind_wait = saved_wait;
	return 0;
}

#define BTEST(fn) cmocka_unit_test_teardown(fn, stop_all)

int main(void)
{
	const struct CMUnitTest tests[] = {
		BTEST(test_bind_pinned_worker_keeps_its_pu_when_rarely_preempted),
		BTEST(test_bind_window_sums_the_last_intervals),
		BTEST(test_bind_few_long_preemptions_unpin),
		BTEST(test_bind_unpinned_worker_repins_after_quiet_intervals),
		BTEST(test_bind_quiet_asked_doubles_up_to_the_bound),
		BTEST(test_bind_shared_verdict_follows_the_window),
		BTEST(test_bind_crowded_verdict_is_the_window_wait),
		BTEST(test_bind_shared_cpu_unpins),
		BTEST(test_bind_cycle_unpin_and_repin),
		BTEST(test_bind_runtime_unpins_on_long_waits),
		BTEST(test_bind_crowded_worker_does_not_poll),
		BTEST(test_bind_crowded_worker_polls_for_fiber_wakeups),
		BTEST(test_bind_crowded_poll_ignores_unmovable_steal_hints),
		BTEST(test_bind_wait_reads_schedstat),
		BTEST(test_bind_forced_stays_pinned_when_shared),
	};

	saved_preempts = fb_bind_preempts;
	saved_wait = fb_bind_wait;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
