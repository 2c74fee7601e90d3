// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * base/clock.c - choosing and calibrating the scheduler clock (base/clock.h).
 *
 * Calibration takes two (TSC, CLOCK_MONOTONIC) pairs about 1 ms apart.
 * Each pair is the best of a few tries: the TSC is read on both sides of
 * clock_gettime() and the try with the narrowest bracket wins, its TSC
 * taken as the bracket's middle.  The error is then the bracket width
 * (tens of ns) over 1 ms, a few parts in 10^5: 1 us of PELT time goes
 * wrong every few tens of ms, far below what the averages resolve.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"

struct fb_clock fb_clock;
__thread struct fb_clock_anchor fb_clock_here
	__attribute__((tls_model("initial-exec")));

#ifdef __x86_64__
#include <cpuid.h>

static struct fb_clock tsc_calibrated;
static pthread_once_t tsc_once = PTHREAD_ONCE_INIT;

static void sample(uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 8; i++) {
		uint64_t a = __builtin_ia32_rdtsc();
		uint64_t n = fb_now_ns();
		uint64_t b = __builtin_ia32_rdtsc();

		if (b > a && b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = n;
		}
	}
}

static void calibrate(void)
{
	struct timespec ms = { .tv_nsec = 1000000 };
	uint64_t t0 = 0, n0 = 0, t1 = 0, n1 = 0;

	sample(&t0, &n0);
	while (nanosleep(&ms, &ms) == EINTR)
		;
	sample(&t1, &n1);
	if (t1 <= t0 || n1 <= n0)
		return; /* leaves mult 0: the TSC is not used */
	tsc_calibrated = (struct fb_clock){
		.tsc0 = t1,
		.ns0 = n1,
		.mult = (uint64_t)(((unsigned __int128)(n1 - n0) << 32) /
				   (t1 - t0)),
	};
}
#endif

uint64_t fb_clock_reanchor(void)
{
#ifdef __x86_64__
	uint64_t a = __builtin_ia32_rdtsc();
	uint64_t ns = fb_now_ns();
	uint64_t b = __builtin_ia32_rdtsc();

	/* The TSC of the middle of the read; b < a: moved to another CPU. */
	return fb_clock_anchor_at(&fb_clock_here, b > a ? a + (b - a) / 2 : b,
				  ns);
#else
	return fb_now_ns();
#endif
}

fb_noinline uint64_t fb_clock_anchored(uint64_t t)
{
	struct fb_clock_anchor *a = &fb_clock_here;
	uint64_t ns;

	if (fb_unlikely(!fb_clock_extrapolate(&fb_clock, a, t, &ns)))
		return fb_clock_reanchor();
	a->last = ns;
	return ns;
}

bool fb_tsc_invariant(void)
{
#ifdef __x86_64__
	unsigned int a, b, c, d;

	return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8));
#else
	return false;
#endif
}

bool fb_tsc_usable(void)
{
#ifdef __x86_64__
	char buf[32] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/"
			"current_clocksource",
			"re");

	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return strcmp(buf, "tsc\n") == 0;
#else
	return false;
#endif
}

int fb_clock_setup(enum fb_clock_kind kind)
{
	bool anchored;

	memset(&fb_clock, 0, sizeof(fb_clock));
	switch (kind) {
	case FB_CLOCK_MONOTONIC:
		return 0;
	case FB_CLOCK_TSC:
		if (!fb_tsc_usable())
			return ENOTSUP;
		anchored = false;
		break;
	case FB_CLOCK_ANCHORED:
		if (!fb_tsc_invariant())
			return ENOTSUP;
		anchored = true;
		break;
	default: /* auto: the kernel's TSC, else the CPU's invariant one */
		anchored = !fb_tsc_usable();
		if (anchored && !fb_tsc_invariant())
			return 0;
		break;
	}
#ifdef __x86_64__
	pthread_once(&tsc_once, calibrate);
	fb_clock = tsc_calibrated;
#endif
	if (!fb_clock.mult)
		return kind == FB_CLOCK_AUTO ? 0 : ENOTSUP;
	if (anchored) {
		/* Ticks per window; at least one. */
		fb_clock.window =
			(uint64_t)(((unsigned __int128)FB_CLOCK_WINDOW_NS
				    << 32) /
				   fb_clock.mult);
		if (!fb_clock.window)
			fb_clock.window = 1;
	}
	return 0;
}

const char *fb_clock_name(void)
{
	if (!fb_clock.mult)
		return "monotonic";
	return fb_clock.window ? "anchored" : "tsc";
}
