/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pelt.h - PELT-like load and utilisation averages (doc/scheduler.md
 * 1.3).
 *
 * Each fiber and each worker carries a struct fb_pelt: three geometric sums
 * of the time it was runnable (load, runnable) and running (util), decayed
 * by y per period of 1024 units of 1024 ns (about 1 ms), with y^32 = 1/2, and
 * the averages derived from them.  Everything here is pure: time is an
 * argument, nothing reads a clock, takes a lock or allocates.  The only
 * global state is the decay table, filled once at start-up.
 *
 * A struct fb_pelt is plain data.  Its writer provides the exclusion: a
 * worker's averages and those of the fibers attached to it are written by
 * whoever holds that worker's rq lock.  Placement reads a worker's three
 * averages without that lock, so every store to an average is a relaxed
 * atomic one (fb_write_once) and lock-free readers go through
 * fb_pelt_load(), fb_pelt_runnable() and fb_pelt_util().  See place/pelt.c
 * for the model.
 */
#ifndef FB_PLACE_PELT_H
#define FB_PLACE_PELT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"

/* Time unit: 1024 ns (about 1 us), as a shift of nanoseconds. */
#define FB_PELT_UNIT_SHIFT 10
/* Period: 1024 units = 1048576 ns (about 1 ms). */
#define FB_PELT_PERIOD 1024u
#define FB_PELT_PERIOD_NS ((uint64_t)FB_PELT_PERIOD << FB_PELT_UNIT_SHIFT)
/* Half-life in periods: y^32 = 1/2 (kernel LOAD_AVG_PERIOD). */
#define FB_LOAD_AVG_PERIOD 32u
/*
 * Saturated sum, 1024 x (1 + y + y^2 + ...) in the integer arithmetic of
 * fb_pelt_decay() (kernel LOAD_AVG_MAX).  fb_pelt_init() recomputes it and
 * stops the process if the two disagree.
 */
#define FB_LOAD_AVG_MAX 47742u
/* Smallest divider, at a period boundary: FB_LOAD_AVG_MAX - 1024. */
#define FB_PELT_MIN_DIVIDER (FB_LOAD_AVG_MAX - FB_PELT_PERIOD)
/* Capacity of one worker (kernel SCHED_CAPACITY_SCALE); util is in 1/1024. */
#define FB_PELT_CAPACITY_SHIFT 10
#define FB_PELT_CAPACITY (1ul << FB_PELT_CAPACITY_SHIFT)

/* avg_idle start values (doc/scheduler.md 1.3.5): 1 ms and 500 us. */
#define FB_AVG_IDLE_INIT_NS 1000000ull
#define FB_MAX_IDLE_BALANCE_COST_INIT_NS 500000ull

/*
 * One set of averages.  For a fiber, load_sum is not weighted: the weight is
 * applied when load_avg is derived, so a weight change needs no rescan.  For
 * a worker, load_sum is the sum of weight x load_sum over attached fibers
 * and its averages are derived with weight 1, as the kernel does for a run
 * queue.  runnable_sum and util_sum are in units << FB_PELT_CAPACITY_SHIFT.
 *
 * The averages are refreshed when an update crosses a period boundary (and
 * by attach/detach); in between only the sums grow, so an average may be up
 * to one period stale.  Invariant kept by every function here: a sum is 0
 * only if its average is 0.
 */
struct fb_pelt {
	uint64_t last_update;	 /* ns; advances in whole units of 1024 ns,
				   the remainder waits for the next update;
				   stored relaxed, read by fb_pelt_last_update */
	uint32_t period_contrib; /* units already in the current period,
				   0..1023 */
	uint64_t load_sum;
	uint64_t runnable_sum;
	uint64_t util_sum;
	unsigned long load_avg;
	unsigned long runnable_avg;
	unsigned long util_avg;
};

/*
 * fb_pelt_init - fill the decay table and check FB_LOAD_AVG_MAX.
 * Runs by itself at load time (a constructor); calling it again is safe from
 * any thread and does nothing.  Stops the process (fb_die) if the table or
 * the saturated sum does not come out as doc/scheduler.md 1.3.1 says.
 */
void fb_pelt_init(void);

/* fb_pelt_load_avg_max - the saturated sum as computed by fb_pelt_init(). */
uint32_t fb_pelt_load_avg_max(void);

/*
 * fb_pelt_decay_factor - y^@i as a 32-bit fraction, floor((2^32 - 1) y^i).
 * @i: 0..31.
 */
uint32_t fb_pelt_decay_factor(unsigned int i);

/*
 * fb_pelt_decay - @v x y^@n in fixed point: 0 when @n > 32 x 63; otherwise
 * @v halved n / 32 times, then scaled by y^(n % 32).  Context: any.
 */
uint64_t fb_pelt_decay(uint64_t v, uint64_t n);

/* fb_pelt_reset - zero @p; its history starts at @now_ns. */
void fb_pelt_reset(struct fb_pelt *p, uint64_t now_ns);

/*
 * fb_pelt_update_slow - the period-crossing half of the update functions
 * below; not for direct use.  @delta is in units and crosses a boundary.
 * Return: true.
 */
bool fb_pelt_update_slow(struct fb_pelt *p, uint64_t delta, unsigned long load,
			 unsigned long runnable, bool running,
			 unsigned long avg_weight);

/*
 * fb_pelt_accumulate - fast path shared by the two update functions below.
 * @load weighs the load sum, @runnable the runnable sum and @running adds to
 * the util sum; none counts unless @runnable is non-zero.  @avg_weight is the
 * weight the averages are derived with.  A time before last_update (a fiber
 * that took a worker's clock on attach and is then updated with its own)
 * only moves last_update back and accounts nothing, as the kernel does.
 */
/* fb_pelt_add_sums - add @units of time in the state (@load, @runnable,
 * @running; see fb_pelt_accumulate()) to @p's sums. */
static inline void fb_pelt_add_sums(struct fb_pelt *p, uint64_t units,
				    unsigned long load, unsigned long runnable,
				    bool running)
{
	if (!runnable)
		return;
	p->load_sum += (uint64_t)load * units;
	p->runnable_sum += ((uint64_t)runnable * units)
			   << FB_PELT_CAPACITY_SHIFT;
	if (running)
		p->util_sum += units << FB_PELT_CAPACITY_SHIFT;
}

/*
 * fb_pelt_add_short - the fast path's accounting of @delta units that
 * cross no period boundary (fb_pelt_short() said so): the sums grow, the
 * averages stay.  @load, @runnable, @running: as fb_pelt_accumulate().
 */
static inline void fb_pelt_add_short(struct fb_pelt *p, uint64_t delta,
				     unsigned long load, unsigned long runnable,
				     bool running)
{
	if (!delta) /* within the same unit: nothing to account yet */
		return;
	fb_write_once(&p->last_update,
		      p->last_update + (delta << FB_PELT_UNIT_SHIFT));
	p->period_contrib += (uint32_t)delta;
	fb_pelt_add_sums(p, delta, load, runnable, running);
}

/*
 * fb_pelt_short - an update of @p to @now_ns would take
 * fb_pelt_accumulate()'s fast path: the clock did not go back and no
 * period boundary is crossed.  Then *@delta is the units it accounts, for
 * fb_pelt_add_short().  Pure, for callers that decide before they write.
 */
static inline bool fb_pelt_short(const struct fb_pelt *p, uint64_t now_ns,
				 uint64_t *delta)
{
	uint64_t d = now_ns - p->last_update;

	*delta = d >> FB_PELT_UNIT_SHIFT;
	return (int64_t)d >= 0 && *delta + p->period_contrib < FB_PELT_PERIOD;
}

static inline bool fb_pelt_accumulate(struct fb_pelt *p, uint64_t now_ns,
				      unsigned long load,
				      unsigned long runnable, bool running,
				      unsigned long avg_weight)
{
	uint64_t delta = now_ns - p->last_update;

	if (fb_unlikely((int64_t)delta < 0)) {
		fb_write_once(&p->last_update, now_ns);
		return false;
	}
	delta >>= FB_PELT_UNIT_SHIFT;
	if (!delta) /* within the same unit: nothing to account yet */
		return false;
	if (fb_unlikely(delta + p->period_contrib >= FB_PELT_PERIOD))
		return fb_pelt_update_slow(p, delta, load, runnable, running,
					   avg_weight);
	fb_pelt_add_short(p, delta, load, runnable, running);
	return false;
}

/*
 * fb_pelt_update - account a fiber's time from its last update to @now_ns.
 * @weight: the fiber's weight (1024 by default).
 * @runnable: it was queued or running during that time.
 * @running: it was running (ignored unless @runnable).
 * Call at every enqueue, dequeue and switch, with the state the fiber had
 * *before* the event.  Without a period boundary this is a few adds; across
 * one the sums decay and the averages are derived again.
 * Return: true iff a period boundary was crossed (averages refreshed).
 * Context: the fiber's worker's rq lock (or a private copy); never blocks.
 */
static inline bool fb_pelt_update(struct fb_pelt *avg, uint64_t now_ns,
				  unsigned long weight, bool runnable,
				  bool running)
{
	return fb_pelt_accumulate(avg, now_ns, runnable, runnable, running,
				  weight);
}

/*
 * fb_pelt_update_worker - account a worker's time to @now_ns.
 * @load_weight: sum of the weights of its runnable fibers.
 * @nr_runnable: its runnable fibers, the running one included.
 * @running: a fiber was running.
 * Blocked fibers stay attached and need no call: their share decays inside
 * the worker's sums.  Return: true iff a period boundary was crossed.
 * Context: the worker's rq lock; never blocks.
 */
static inline bool fb_pelt_update_worker(struct fb_pelt *w, uint64_t now_ns,
					 unsigned long load_weight,
					 unsigned int nr_runnable, bool running)
{
	return fb_pelt_accumulate(w, now_ns, load_weight, nr_runnable, running,
				  1);
}

/*
 * fb_pelt_sync_blocked - bring a blocked fiber's averages up to @now_ns.
 * Before moving a woken fiber off its old worker, pass that worker's
 * last_update, so that what fb_pelt_detach() removes is what the worker's
 * sums hold for it.  Context: as fb_pelt_update().
 */
void fb_pelt_sync_blocked(struct fb_pelt *f, uint64_t now_ns,
			  unsigned long weight);

/*
 * fb_pelt_attach - add fiber @f (weight @weight) to worker @w's sums.
 * @w must be up to date (fb_pelt_update_worker() at this time).  @f takes
 * @w's clock and period position; its sums are derived again from its
 * averages with @w's divider, so both stay consistent, then added to @w.
 * Context: @w's rq lock.
 */
void fb_pelt_attach(struct fb_pelt *w, struct fb_pelt *f, unsigned long weight);

/*
 * fb_pelt_detach - remove fiber @f (weight @weight) from worker @w's sums.
 * @f should be synced to @w's clock (fb_pelt_sync_blocked()).  Each sum and
 * average is lowered, stopping at 0; a sum is then kept at least as large
 * as its average x FB_PELT_MIN_DIVIDER, so rounding cannot make the next
 * refresh drop an average that other fibers still hold.
 * Context: @w's rq lock.
 */
void fb_pelt_detach(struct fb_pelt *w, const struct fb_pelt *f,
		    unsigned long weight);

/*
 * Shares of fibers that left a worker, waiting to be subtracted from its
 * sums (the kernel's cfs_rq->removed).  Whoever moves a fiber off a worker
 * adds the fiber's averages here with atomic adds, without the worker's
 * lock; the worker's writer folds them in at its next update.  Only the
 * averages travel: the sums lose average x divider, as in the kernel.
 * @nr is non-zero while something is waiting, so that the writer's check
 * is one relaxed load.
 */
struct fb_pelt_removed {
	_Atomic unsigned long nr;
	_Atomic unsigned long load_avg;
	_Atomic unsigned long runnable_avg;
	_Atomic unsigned long util_avg;
};

/*
 * fb_pelt_remove - queue fiber @f's share for removal from
 * the worker whose @r this is.  @f should be brought up to date first
 * (fb_pelt_update() to the time of the move).  Context: any thread.
 */
void fb_pelt_remove(struct fb_pelt_removed *r, const struct fb_pelt *f);

/*
 * fb_pelt_fold_removed - subtract what @r has collected from worker @w's
 * sums (as fb_pelt_detach() does) and empty @r.  A share added while this
 * runs is folded now or at the next call, never lost.
 * Return: true if anything was folded.  Context: @w's writer.
 */
bool fb_pelt_fold_removed(struct fb_pelt *w, struct fb_pelt_removed *r);

/*
 * fb_pelt_load, fb_pelt_runnable - a worker's load_avg and runnable_avg for
 * placement: relaxed loads, for readers without the worker's rq lock.
 */
/* fb_pelt_last_update - the time @p's sums are at, read without its
 * writer's exclusion (a worker's, by the worker a fiber moves to). */
static inline uint64_t fb_pelt_last_update(const struct fb_pelt *p)
{
	return fb_read_once(&p->last_update);
}

static inline unsigned long fb_pelt_load(const struct fb_pelt *w)
{
	return fb_read_once(&w->load_avg);
}

static inline unsigned long fb_pelt_runnable(const struct fb_pelt *w)
{
	return fb_read_once(&w->runnable_avg);
}

/* fb_pelt_util - a worker's utilisation for placement, 0..1024; a relaxed
 * load like fb_pelt_load(). */
static inline unsigned long fb_pelt_util(const struct fb_pelt *w)
{
	return FB_MIN(fb_read_once(&w->util_avg), FB_PELT_CAPACITY);
}

/*
 * fb_pelt_is_decayed - every sum is 0: nothing left to decay, so the
 * worker's has_blocked_load may be cleared (doc/scheduler.md 1.3.3).
 */
static inline bool fb_pelt_is_decayed(const struct fb_pelt *p)
{
	return (p->load_sum | p->runnable_sum | p->util_sum) == 0;
}

/*
 * fb_pelt_avg_idle_update - fold one idle period into avg_idle.
 * @avg_idle: current average, ns.  @sample_ns: now - idle_stamp.
 * @max_idle_balance_cost: ns; the result is at most twice this.
 * Return: avg_idle + (sample - avg_idle) / 8 (signed, rounded towards 0),
 * capped at 2 x @max_idle_balance_cost.
 */
uint64_t fb_pelt_avg_idle_update(uint64_t avg_idle, uint64_t sample_ns,
				 uint64_t max_idle_balance_cost);

#endif /* FB_PLACE_PELT_H */
