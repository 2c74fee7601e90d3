/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * base/clock.h - the scheduler's clock: nanoseconds for load tracking and
 * balancing, cheap enough to read at every context switch.
 *
 * Two sources.  On x86-64, when the kernel itself keeps time with the TSC
 * (its clocksource is "tsc", which it only picks after checking that the
 * counter is invariant and synchronised across CPUs), the clock is
 * rdtsc scaled to nanoseconds by a 32.32 fixed-point factor measured once
 * per process against CLOCK_MONOTONIC.  Elsewhere it is CLOCK_MONOTONIC
 * through the vDSO.  Neither makes a system call.  On the 2-vCPU guest this
 * was written on, rdtsc costs about 20 ns in a loop and the vDSO call about
 * 45 ns; LIBFIBER_CLOCK picks one by hand for measuring.
 *
 * The TSC clock runs at the rate the calibration measured, so it drifts
 * from CLOCK_MONOTONIC by the calibration error (a few parts in 10^5).  That
 * is why it is a clock of its own: everything that compares against it
 * (PELT's last_update, balance and tick deadlines, idle stamps) reads it,
 * and everything that users see (timers, sleeps, timeouts) keeps reading
 * CLOCK_MONOTONIC.  It never goes back: a read that would come out before
 * the calibration point (a core whose TSC lags by a few cycles) returns the
 * calibration point.
 */
#ifndef FB_CLOCK_H
#define FB_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "base/common.h"

enum fb_clock_kind {
	FB_CLOCK_AUTO,	    /* the TSC where the kernel trusts it */
	FB_CLOCK_TSC,	    /* the TSC; refused where the kernel does not */
	FB_CLOCK_MONOTONIC, /* CLOCK_MONOTONIC through the vDSO */
};

struct fb_clock {
	uint64_t tsc0; /* TSC at the calibration point */
	uint64_t ns0;  /* CLOCK_MONOTONIC at that point */
	uint64_t mult; /* ns per TSC tick, 32.32 fixed point; 0: no TSC */
};

extern struct fb_clock fb_clock FB_HIDDEN;

/*
 * fb_clock_setup - choose the scheduler clock for the next runtime.
 * The TSC is calibrated on the first call that wants it (about 1 ms of
 * sleeping, once per process).  Return: 0; ENOTSUP when @kind is
 * FB_CLOCK_TSC and the TSC is not usable here.  Context: runtime start-up,
 * before any worker runs.
 */
int fb_clock_setup(enum fb_clock_kind kind);

/* fb_clock_name - "tsc" or "monotonic": what fb_sched_clock() reads. */
const char *fb_clock_name(void);

/* fb_tsc_usable - the kernel's clocksource is the TSC (x86-64 only). */
bool fb_tsc_usable(void);

static inline uint64_t fb_sched_clock(void)
{
#ifdef __x86_64__
	if (fb_likely(fb_clock.mult)) {
		int64_t d = (int64_t)(__builtin_ia32_rdtsc() - fb_clock.tsc0);

		if (fb_unlikely(d < 0))
			d = 0;
		return fb_clock.ns0 +
		       (uint64_t)(((unsigned __int128)d * fb_clock.mult) >> 32);
	}
#endif
	/* fb_now_ns(), inline: read at every switch, where its frame
	 * showed. */
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif /* FB_CLOCK_H */
