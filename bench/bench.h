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

struct option;
/*
 * bench_getopt - run getopt_long over @argv with the long options @opts
 * (no short ones), calling @one(@ctx, id, value) for each.  Option id
 * @help prints @usage and exits 0; an unknown option, a missing value or
 * a stray argument is named on stderr and exits 2.
 */
void bench_getopt(int argc, char **argv, const struct option *opts, int help,
		  const char *usage,
		  void (*one)(void *ctx, int c, const char *val), void *ctx);

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

/* bench_nr_cpus - the number of CPUs the process may run on. */
unsigned int bench_nr_cpus(void);

/*
 * bench_worker_cpu - the CPU standing for worker @w in a threads baseline:
 * the (w mod bench_nr_cpus())-th CPU the process may run on.
 */
int bench_worker_cpu(unsigned int w);

/*
 * JSON records: one object per measured configuration, on one line,
 *
 *	{"bench":NAME,"mode":MODE,P...,M...,"features":STR,
 *	 "params":{P...},"metrics":{M...}}
 *
 * with every parameter P and metric M both at the top level (the flat
 * one-line format pipe-pingpong promised first) and in its group (what
 * bench/compare reads), printed as bench_json_open(), the parameters,
 * bench_json_metrics(), the metrics, bench_json_close().  Numbers are
 * printed with %.10g (doubles) or as whole numbers.
 */
void bench_json_open(const char *bench, const char *mode);
void bench_json_uint(const char *key, unsigned long long v);
void bench_json_double(const char *key, double v);
void bench_json_str(const char *key, const char *v);
void bench_json_metrics(void);
void bench_json_close(const char *features);

/*
 * A latency histogram with bounded relative error, for percentiles of
 * values in nanoseconds.  Values below 2^BENCH_HIST_SUB_BITS have a bucket
 * each; above, each power-of-two range [2^m, 2^(m+1)) is cut into
 * 2^BENCH_HIST_SUB_BITS equal buckets, so a bucket's width is at most
 * 1/64 of its lower bound and the reported value, the bucket's middle, is
 * within 0.8% of every value it holds.  32 KiB each; one per fiber or
 * thread, merged at the end (no sharing while measuring).
 */
#define BENCH_HIST_SUB_BITS 6
#define BENCH_HIST_BUCKETS                                                     \
	((64 - BENCH_HIST_SUB_BITS + 1) << BENCH_HIST_SUB_BITS)

struct bench_hist {
	uint64_t count;
	uint64_t min;
	uint64_t max;
	uint64_t bucket[BENCH_HIST_BUCKETS];
};

/* bench_hist_alloc - a zeroed histogram; exits when memory is short. */
struct bench_hist *bench_hist_alloc(void);
void bench_hist_add(struct bench_hist *h, uint64_t v);
/* bench_hist_merge - add every value of @from into @into. */
void bench_hist_merge(struct bench_hist *into, const struct bench_hist *from);
/*
 * bench_hist_percentile - the value at percentile @p (0 < p <= 100): the
 * smallest bucket holding the ceil(p/100 * count)-th value, as its middle
 * clamped to [min, max].  0 for an empty histogram.
 */
uint64_t bench_hist_percentile(const struct bench_hist *h, double p);

#endif /* BENCH_H */
