/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * trace.c - the semaphores of the USDT probes (base/trace.h): one per
 * probe, in the ".probes" section, where tracers look for them.
 */
#include "base/trace.h"

#if FB_HAVE_SDT
#define FB_PROBE_SEMAPHORE_DEFINE(name)                                        \
	volatile unsigned short libfiber_##name##_semaphore                    \
		__attribute__((section(".probes")));
FB_PROBE_NAMES(FB_PROBE_SEMAPHORE_DEFINE)
#undef FB_PROBE_SEMAPHORE_DEFINE
#endif
