/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench.h - helpers the benchmark programs share: error exits, argument
 * parsing, the clock, JSON strings and starting the runtime.  Benchmarks use
 * the public API only; nothing here reaches into the library.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdint.h>

/* Each program defines its name; messages start with it. */
extern const char bench_name[];

/* bench_die - print "NAME: message" to stderr and exit with status 1. */
void bench_die(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));

/*
 * bench_bad_arg - report that option @opt got the value @val, say what
 * @expected instead, and exit with status 2.
 */
void bench_bad_arg(const char *opt, const char *val, const char *expected)
	__attribute__((noreturn));

/*
 * bench_parse_count - parse @val, the value of option @opt, as a whole
 * number from 1 to @max (decimal digits only).  Exits through
 * bench_bad_arg() when it is anything else.
 */
unsigned long bench_parse_count(const char *opt, const char *val,
				unsigned long max);

/* bench_now_ns - CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* bench_json_string - print @s to stdout as the inside of a JSON string. */
void bench_json_string(const char *s);

/*
 * bench_start_runtime - fiber_init() with @workers workers, then
 * fiber_sched_features_set(@features) when @features is not NULL.  Exits
 * with status 1 when the runtime does not start or has another number of
 * workers, with status 2 when --features is rejected.
 * Return: the feature string of fiber_sched_features_string(), to free().
 */
char *bench_start_runtime(unsigned int workers, const char *features);

#endif /* BENCH_H */
