/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pelt.c - PELT-like load and utilisation averages (doc/scheduler.md
 * 1.3).
 *
 * The model.  Time is cut into periods of 1024 units of 1024 ns.  A fiber's
 * history is a geometric series: the current, unfinished period counts in
 * full, the one before it y times, the one before that y^2 times, and so on,
 * with y^32 = 1/2, so what happened 32 ms ago weighs half as much as what
 * happens now.  Three series are kept: load (time runnable), runnable (time
 * runnable, x 1024) and util (time running, x 1024).  Dividing a series by
 * the largest value it can reach gives an average: util_avg = 1024 means
 * "always ran".  That largest value is 1024 x (1 + y + y^2 + ...) computed
 * with the integer arithmetic below, FB_LOAD_AVG_MAX = 47742, minus the part
 * of the current period that has not happened yet: the divider is
 *
 *	divider = FB_LOAD_AVG_MAX - 1024 + period_contrib
 *
 * An update at time t splits the time since the last update into three
 * segments: d1, the rest of the period that was open (1024 - period_contrib
 * units), d2, some whole periods, and d3, the start of the now current
 * period.  Old sums decay by y^p, p the number of boundaries crossed; d1
 * decays by y^p, the whole periods add up to
 *
 *	1024 (y + ... + y^(p-1)) = FB_LOAD_AVG_MAX - decay(FB_LOAD_AVG_MAX, p)
 *				   - 1024
 *
 * and d3 counts in full.  Without a boundary the elapsed units simply add.
 *
 * Workers.  A worker's sums are the sums of those of the fibers attached to it.
 * They are not recomputed from the fibers: the worker runs the same update with
 * the total weight of its runnable fibers and their number, and since decay is
 * linear the result tracks the fibers' sum (up to rounding) as long as the
 * fibers share the worker's period position, which attach forces.  A fiber that
 * blocks stays attached; its share keeps decaying inside the worker's sums, and
 * that remainder is the blocked load (doc/scheduler.md 1.3.3 and 6).  Moving a
 * fiber: sync it to the old worker's clock, detach it there, attach it on the
 * new one.
 *
 * Invariants.  period_contrib < 1024.  last_update only grows, except when
 * a fiber takes its worker's clock on attach and for the backwards clock of
 * fb_pelt_accumulate().  A sum is 0 only if its average is 0, so
 * fb_pelt_is_decayed() implies every average is 0.  For a worker,
 * sum >= avg x FB_PELT_MIN_DIVIDER after a detach.
 *
 * Choices and rejected alternatives.
 * - Averages are derived only when a period boundary is crossed (the
 *   kernel's rule, doc/scheduler.md 1.3.2), not at every update:
 *   three 64-bit divisions at every switch would cost more than the rest of
 *   the update, and within a period the series grows by at most one period,
 *   so the average is at most ~1 ms stale.  Attach and detach keep averages
 *   and sums consistent themselves.
 * - A fiber's load_sum is not weighted and a worker's is, as in the kernel:
 *   a fiber's weight may change without touching its history, and the
 *   worker's load_avg is then the plain sum of its fibers' load_avg.
 * - On attach the fiber takes the worker's clock and period position and
 *   its sums are derived again from its averages with the worker's divider
 *   (avg x divider, divided by the weight for load).  Adding the fiber's own
 *   sums instead would mix two period phases, and the worker's next refresh
 *   would turn the difference into a jump of its averages.
 * - On detach each average and sum goes down by the fiber's share and stops
 *   at 0 (rounding can make the share larger than what is left); the sum is
 *   then raised to at least avg x FB_PELT_MIN_DIVIDER so that the next
 *   refresh does not collapse an average the remaining fibers still carry.
 * - The decay table is computed at load time from square roots of 1/2 in
 *   long double, not shipped as literals nor made by a build-time generator:
 *   y, y^2, y^4, y^8 and y^16 are five correctly rounded square roots, y^i a
 *   product of at most five of them, and every entry lies at least 0.0025
 *   from an integer, so floor() is exact with a wide margin.
 * - 64 x 32-bit multiplications go through unsigned __int128 (GCC and Clang
 *   on every 64-bit target): worker runnable sums exceed 2^32 with ~90
 *   runnable fibers.
 *
 * Concurrency.  The caller serialises writers (the worker's rq lock), but
 * placement reads a worker's averages without it, so the averages are
 * stored with fb_write_once() (a plain move; reads here, under the writer's
 * exclusion, stay plain).  The sums, the clock and period_contrib are read
 * only by writers.  The decay table is written once, by a constructor,
 * before main() and before any thread exists, and only read afterwards.
 */
#include <math.h>

#include "place/pelt.h"

/* y^i as floor((2^32 - 1) y^i), i = 0..31; written once at load time. */
static uint32_t decay_inv[FB_LOAD_AVG_PERIOD];
/* The saturated sum as computed by fb_pelt_init(). */
static uint32_t load_avg_max;

/* Largest n for which fb_pelt_decay() can still be non-zero: 32 x 63. */
#define PELT_DECAY_MAX_N (FB_LOAD_AVG_PERIOD * 63)

static void fill_decay_table(void)
{
	long double root[5]; /* root[b] = y^(2^b) */
	unsigned int i, b;

	root[4] = sqrtl(0.5L);
	for (b = 4; b > 0; b--)
		root[b - 1] = sqrtl(root[b]);
	for (i = 0; i < FB_LOAD_AVG_PERIOD; i++) {
		long double f = 1.0L;

		for (b = 0; b < 5; b++)
			if (i & (1u << b))
				f *= root[b];
		/* Truncation is floor() for a positive value. */
		decay_inv[i] = (uint32_t)(4294967295.0L * f);
	}
}

/* Iterate m = ((m x Y1) >> 32) + 1024 from 1024 to its fixed point. */
static uint32_t converge_load_avg_max(void)
{
	uint64_t m = FB_PELT_PERIOD, next;

	for (;;) {
		next = ((m * decay_inv[1]) >> 32) + FB_PELT_PERIOD;
		if (next == m)
			return (uint32_t)m;
		m = next;
	}
}

void fb_pelt_init(void)
{
	if (decay_inv[0] != 0)
		return;
	fill_decay_table();
	load_avg_max = converge_load_avg_max();
	FB_BUG_ON(decay_inv[1] != 0xfa83b2da);
	FB_BUG_ON(decay_inv[16] != 0xb504f333);
	FB_BUG_ON(load_avg_max != FB_LOAD_AVG_MAX);
}

__attribute__((constructor)) static void pelt_ctor(void)
{
	fb_pelt_init();
}

uint32_t fb_pelt_load_avg_max(void)
{
	return load_avg_max;
}

uint32_t fb_pelt_decay_factor(unsigned int i)
{
	FB_ASSERT(i < FB_LOAD_AVG_PERIOD);
	return decay_inv[i % FB_LOAD_AVG_PERIOD];
}

uint64_t fb_pelt_decay(uint64_t v, uint64_t n)
{
	if (fb_unlikely(n > PELT_DECAY_MAX_N))
		return 0;
	/* y^32 = 1/2: whole half-lives are shifts. */
	v >>= n / FB_LOAD_AVG_PERIOD;
	n %= FB_LOAD_AVG_PERIOD;
	return (uint64_t)(((unsigned __int128)v * decay_inv[n]) >> 32);
}

void fb_pelt_reset(struct fb_pelt *p, uint64_t now_ns)
{
	*p = (struct fb_pelt){ .last_update = now_ns };
}

/*
 * What the elapsed time adds when it crosses @periods boundaries: the tail
 * @d1 of the period that was open, the whole periods in between, and the
 * head @d3 of the current one.
 */
static uint64_t segments(uint64_t periods, uint32_t d1, uint32_t d3)
{
	uint64_t c1 = fb_pelt_decay(d1, periods);
	uint64_t c2 = FB_LOAD_AVG_MAX -
		      fb_pelt_decay(FB_LOAD_AVG_MAX, periods) - FB_PELT_PERIOD;

	return c1 + c2 + d3;
}

/* Averages from sums: avg = weight x sum / divider (weight 1 but for load). */
static void derive(struct fb_pelt *p, unsigned long avg_weight)
{
	uint32_t divider = FB_PELT_MIN_DIVIDER + p->period_contrib;

	fb_write_once(&p->load_avg,
		      (unsigned long)(avg_weight * p->load_sum / divider));
	fb_write_once(&p->runnable_avg,
		      (unsigned long)(p->runnable_sum / divider));
	fb_write_once(&p->util_avg, (unsigned long)(p->util_sum / divider));
}

bool fb_pelt_update_slow(struct fb_pelt *p, uint64_t delta, unsigned long load,
			 unsigned long runnable, bool running,
			 unsigned long avg_weight)
{
	uint64_t d = delta + p->period_contrib;
	uint64_t periods = d / FB_PELT_PERIOD;
	uint32_t rem = (uint32_t)(d % FB_PELT_PERIOD);
	uint64_t contrib = 0;

	fb_write_once(&p->last_update,
		      p->last_update + (delta << FB_PELT_UNIT_SHIFT));
	p->load_sum = fb_pelt_decay(p->load_sum, periods);
	p->runnable_sum = fb_pelt_decay(p->runnable_sum, periods);
	p->util_sum = fb_pelt_decay(p->util_sum, periods);
	if (runnable)
		contrib = segments(periods, FB_PELT_PERIOD - p->period_contrib,
				   rem);
	p->period_contrib = rem;
	fb_pelt_add_sums(p, contrib, load, runnable, running);
	derive(p, avg_weight);
	return true;
}

void fb_pelt_sync_blocked(struct fb_pelt *f, uint64_t now_ns,
			  unsigned long weight)
{
	fb_pelt_update(f, now_ns, weight, false, false);
}

void fb_pelt_attach(struct fb_pelt *w, struct fb_pelt *f, unsigned long weight)
{
	uint64_t divider = FB_PELT_MIN_DIVIDER + w->period_contrib;
	uint64_t load = (uint64_t)f->load_avg * divider;

	f->last_update = w->last_update;
	f->period_contrib = w->period_contrib;
	f->util_sum = (uint64_t)f->util_avg * divider;
	f->runnable_sum = (uint64_t)f->runnable_avg * divider;
	/* Unweighted; kept above 0 while load_avg is, even when
	 * load_avg x divider < weight floors to 0. */
	f->load_sum = weight ? load / weight : 0;
	if (f->load_sum == 0 && f->load_avg != 0)
		f->load_sum = 1;

	w->load_sum += (uint64_t)weight * f->load_sum;
	w->runnable_sum += f->runnable_sum;
	w->util_sum += f->util_sum;
	fb_write_once(&w->load_avg, w->load_avg + f->load_avg);
	fb_write_once(&w->runnable_avg, w->runnable_avg + f->runnable_avg);
	fb_write_once(&w->util_avg, w->util_avg + f->util_avg);
}

/* Lower one sum/average pair by a share, see fb_pelt_detach(). */
static void sub_share(uint64_t *sum, unsigned long *avg, uint64_t dsum,
		      unsigned long davg)
{
	fb_write_once(avg, *avg > davg ? *avg - davg : 0);
	*sum = *sum > dsum ? *sum - dsum : 0;
	*sum = FB_MAX(*sum, (uint64_t)*avg * FB_PELT_MIN_DIVIDER);
}

void fb_pelt_detach(struct fb_pelt *w, const struct fb_pelt *f,
		    unsigned long weight)
{
	sub_share(&w->load_sum, &w->load_avg, (uint64_t)weight * f->load_sum,
		  f->load_avg);
	sub_share(&w->runnable_sum, &w->runnable_avg, f->runnable_sum,
		  f->runnable_avg);
	sub_share(&w->util_sum, &w->util_avg, f->util_sum, f->util_avg);
}

void fb_pelt_remove(struct fb_pelt_removed *r, const struct fb_pelt *f)
{
	atomic_fetch_add_explicit(&r->load_avg, f->load_avg,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&r->runnable_avg, f->runnable_avg,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&r->util_avg, f->util_avg,
				  memory_order_relaxed);
	/* Release: a writer that sees nr sees the shares above. */
	atomic_fetch_add_explicit(&r->nr, 1, memory_order_release);
}

bool fb_pelt_fold_removed(struct fb_pelt *w, struct fb_pelt_removed *r)
{
	uint64_t divider = FB_PELT_MIN_DIVIDER + w->period_contrib;
	unsigned long load, runnable, util;

	if (!atomic_load_explicit(&r->nr, memory_order_relaxed))
		return false;
	atomic_exchange_explicit(&r->nr, 0, memory_order_acquire);
	load = atomic_exchange_explicit(&r->load_avg, 0, memory_order_relaxed);
	runnable = atomic_exchange_explicit(&r->runnable_avg, 0,
					    memory_order_relaxed);
	util = atomic_exchange_explicit(&r->util_avg, 0, memory_order_relaxed);
	sub_share(&w->load_sum, &w->load_avg, (uint64_t)load * divider, load);
	sub_share(&w->runnable_sum, &w->runnable_avg,
		  (uint64_t)runnable * divider, runnable);
	sub_share(&w->util_sum, &w->util_avg, (uint64_t)util * divider, util);
	return true;
}

uint64_t fb_pelt_avg_idle_update(uint64_t avg_idle, uint64_t sample_ns,
				 uint64_t max_idle_balance_cost)
{
	/*
	 * avg += (sample - avg) / 8 with the difference signed and the
	 * division rounding towards 0; split by sign so that no value ever
	 * leaves the unsigned range.
	 */
	if (sample_ns >= avg_idle)
		avg_idle += (sample_ns - avg_idle) / 8;
	else
		avg_idle -= (avg_idle - sample_ns) / 8;
	return FB_MIN(avg_idle, 2 * max_idle_balance_cost);
}
