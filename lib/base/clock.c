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
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"

struct fb_clock fb_clock;

#ifdef __x86_64__
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
	memset(&fb_clock, 0, sizeof(fb_clock));
	if (kind == FB_CLOCK_MONOTONIC)
		return 0;
	if (!fb_tsc_usable())
		return kind == FB_CLOCK_TSC ? ENOTSUP : 0;
#ifdef __x86_64__
	pthread_once(&tsc_once, calibrate);
	fb_clock = tsc_calibrated;
#endif
	if (!fb_clock.mult && kind == FB_CLOCK_TSC)
		return ENOTSUP;
	return 0;
}

const char *fb_clock_name(void)
{
	return fb_clock.mult ? "tsc" : "monotonic";
}
