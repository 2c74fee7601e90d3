/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * base/trace.h - USDT probes (statically defined tracepoints), one macro
 * for all of them.  With <sys/sdt.h> (Debian: systemtap-sdt-dev) at build
 * time, FB_PROBE(name, args...) is a probe "libfiber:name" in libfiber.so:
 * a nop at the call site plus a note (readelf -n lists them under
 * "stapsdt") that perf, bpftrace and systemtap use to attach.  Without
 * <sys/sdt.h> it compiles to nothing (its arguments are not evaluated).
 *
 * Each probe has a semaphore, libfiber_NAME_semaphore in the ".probes"
 * section, whose address the note carries: a tracer that attaches raises
 * it and lowers it when it leaves.  The arguments are computed only while
 * it is non-zero, so a probe nobody attached costs a load and a branch
 * (taken by nothing), not the loads of its arguments.
 * README.md "Diagnostics" lists the probes and their arguments.
 */
#ifndef FB_BASE_TRACE_H
#define FB_BASE_TRACE_H

/* Every probe, once: FB_PROBE_NAMES(X) is X(name) for each. */
#define FB_PROBE_NAMES(X)                                                      \
	X(switch)                                                              \
	X(wake)                                                                \
	X(park)                                                                \
	X(create)                                                              \
	X(migrate)                                                             \
	X(steal)                                                               \
	X(balance_pull)                                                        \
	X(stall)

#if FB_HAVE_SDT
#define _SDT_HAS_SEMAPHORES 1
#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>

/* The semaphores (base/trace.c); tracers write them, hence volatile. */
#define FB_PROBE_SEMAPHORE_DECLARE(name)                                       \
	extern volatile unsigned short libfiber_##name##_semaphore             \
		__attribute__((visibility("hidden")));
FB_PROBE_NAMES(FB_PROBE_SEMAPHORE_DECLARE)
#undef FB_PROBE_SEMAPHORE_DECLARE

#define FB_PROBE(name, ...)                                                    \
	do {                                                                   \
		if (__builtin_expect(libfiber_##name##_semaphore != 0, 0))     \
			STAP_PROBEV(libfiber, name, __VA_ARGS__);              \
	} while (0)
#else
/* No probe; the arguments still count as used (a variable kept only for
 * a probe must not warn), and are never evaluated. */
static inline void fb_probe_none(int unused, ...)
{
	(void)unused;
}
#define FB_PROBE(name, ...)                                                    \
	do {                                                                   \
		if (0)                                                         \
			fb_probe_none(0, __VA_ARGS__);                         \
	} while (0)
#endif

#endif /* FB_BASE_TRACE_H */
