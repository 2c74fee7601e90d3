/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * base/clock.h - the scheduler's clock: nanoseconds for load tracking and
 * balancing, cheap enough to read at every context switch.
 *
 * Three sources.  On x86-64, when the kernel itself keeps time with the TSC
 * (its clocksource is "tsc", which it only picks after checking that the
 * counter is invariant and synchronised across CPUs), the clock is
 * rdtsc scaled to nanoseconds by a 32.32 fixed-point factor measured once
 * per process against CLOCK_MONOTONIC.  Elsewhere it is CLOCK_MONOTONIC
 * through the vDSO.  Neither makes a system call.  On the 2-vCPU guest this
 * was written on, rdtsc costs about 20 ns in a loop and the vDSO call about
 * 45 ns; LIBFIBER_CLOCK picks one by hand for measuring.
 *
 * The third is for guests whose kernel keeps time with a paravirtual
 * clock (kvm-clock, as most cloud guests do) on a CPU that says its TSC
 * is invariant: every thread anchors the clock to CLOCK_MONOTONIC and
 * extrapolates from its anchor with the TSC and the same factor, for at
 * most FB_CLOCK_WINDOW_NS; a read past the window, or before the anchor
 * (a TSC that differs on the CPU the thread moved to), takes a new anchor.
 * So whatever the TSC does, a read is never more than the window away
 * from CLOCK_MONOTONIC, and between anchors it drifts by the calibration
 * error over the window (about 10 ns per ms).  Each thread's reads never
 * go back; two threads' reads of the same instant differ by tens of ns, as
 * the TSCs of two CPUs may.  On such a guest (kvm-clock, AMD EPYC) a
 * vDSO read cost 27 ns and rdtsc 11.5, and the one-worker pipe round trip,
 * which reads the clock twice, went from 147 to 93 ns with the TSC.
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
	FB_CLOCK_ANCHORED,  /* the TSC from per-thread CLOCK_MONOTONIC anchors;
			       refused where the TSC is not invariant */
};

/* How long an anchor lasts. */
#define FB_CLOCK_WINDOW_NS 1000000u

struct fb_clock {
	uint64_t tsc0;	 /* TSC at the calibration point */
	uint64_t ns0;	 /* CLOCK_MONOTONIC at that point */
	uint64_t mult;	 /* ns per TSC tick, 32.32 fixed point; 0: no TSC */
	uint64_t window; /* anchored: TSC ticks an anchor lasts; 0: not */
};

extern struct fb_clock fb_clock FB_HIDDEN;

/* A thread's anchor of the anchored clock (all zero: none yet). */
struct fb_clock_anchor {
	uint64_t tsc;  /* TSC at the anchor */
	uint64_t ns;   /* the clock there */
	uint64_t last; /* the latest value this thread was given */
};

extern __thread struct fb_clock_anchor fb_clock_here FB_HIDDEN
	__attribute__((tls_model("initial-exec")));

/*
 * fb_clock_extrapolate - the anchored clock of @c at TSC @t, from anchor
 * @a, in *@ns, never below @a->last; false if @t is before the anchor or
 * more than @c->window ticks after it.  Pure.
 */
static inline bool fb_clock_extrapolate(const struct fb_clock *c,
					const struct fb_clock_anchor *a,
					uint64_t t, uint64_t *ns)
{
	uint64_t d = t - a->tsc; /* before the anchor: huge */
	uint64_t v;

	if (d > c->window)
		return false;
	v = a->ns + (uint64_t)(((unsigned __int128)d * c->mult) >> 32);
	*ns = v < a->last ? a->last : v;
	return true;
}

/*
 * fb_clock_anchor_at - move @a to TSC @t and CLOCK_MONOTONIC @ns; return
 * the clock's value there, which is @ns unless that is below what @a gave
 * before.  Pure.
 */
static inline uint64_t fb_clock_anchor_at(struct fb_clock_anchor *a, uint64_t t,
					  uint64_t ns)
{
	if (ns < a->last)
		ns = a->last;
	a->tsc = t;
	a->ns = ns;
	a->last = ns;
	return ns;
}

/* fb_clock_reanchor - anchor the calling thread now (base/clock.c). */
uint64_t fb_clock_reanchor(void);
/* fb_clock_anchored - the anchored clock at TSC @t for the calling
 * thread (base/clock.c). */
uint64_t fb_clock_anchored(uint64_t t);

/*
 * fb_clock_setup - choose the scheduler clock for the next runtime.
 * The TSC is calibrated on the first call that wants it (about 1 ms of
 * sleeping, once per process).  Return: 0; ENOTSUP when @kind is
 * FB_CLOCK_TSC and the TSC is not usable here.  Context: runtime start-up,
 * before any worker runs.
 */
int fb_clock_setup(enum fb_clock_kind kind);

/* fb_clock_name - "tsc", "anchored" or "monotonic": what fb_sched_clock()
 * reads. */
const char *fb_clock_name(void);

/* fb_tsc_usable - the kernel's clocksource is the TSC (x86-64 only). */
bool fb_tsc_usable(void);

/* fb_tsc_invariant - the CPU says its TSC runs at a constant rate in every
 * state (CPUID 0x80000007, EDX bit 8; x86-64 only). */
bool fb_tsc_invariant(void);

static inline uint64_t fb_sched_clock(void)
{
#ifdef __x86_64__
	if (fb_likely(fb_clock.mult)) {
		uint64_t t = __builtin_ia32_rdtsc();
		int64_t d;

		/* Out of line: a fiber may move to another thread between
		 * two reads, so the anchor's address must be taken afresh
		 * inside a call, never kept across one by the caller. */
		if (fb_clock.window)
			return fb_clock_anchored(t);
		d = (int64_t)(t - fb_clock.tsc0);

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
