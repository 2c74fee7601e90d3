/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * base/trace.h - USDT probes (statically defined tracepoints), one macro
 * for all of them.  With <sys/sdt.h> (Debian: systemtap-sdt-dev) at build
 * time, FB_PROBE(name, args...) is a probe "libfiber:name" in libfiber.so:
 * a nop at the call site plus a note (readelf -n lists them under
 * "stapsdt") that perf, bpftrace and systemtap use to attach.  Not
 * attached, a probe costs its nop and keeping its arguments in registers
 * or memory operands; without <sys/sdt.h> it compiles to nothing.
 * README.md "Diagnostics" lists the probes and their arguments.
 */
#ifndef FB_BASE_TRACE_H
#define FB_BASE_TRACE_H

#if FB_HAVE_SDT
#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>
#define FB_PROBE(...) STAP_PROBEV(libfiber, __VA_ARGS__)
#else
#define FB_PROBE(...)                                                          \
	do {                                                                   \
	} while (0)
#endif

#endif /* FB_BASE_TRACE_H */
