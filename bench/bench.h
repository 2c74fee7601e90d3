/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench.h - helpers the benchmark programs share: error exits, argument
 * parsing, the clock, JSON strings and starting the runtime.  Benchmarks use
 * the public API only; nothing here reaches into the library.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <fiber.h>

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
 * bench_parse_ulong - parse @val, the value of option @opt, as a whole
 * number from @min to @max (decimal digits only).  Exits through
 * bench_bad_arg() when it is anything else.
 */
unsigned long bench_parse_ulong(const char *opt, const char *val,
				unsigned long min, unsigned long max);

/*
 * The command line: every program declares its options once, in one table
 * of struct bench_opt, each entry with its short name (that of the tool the
 * program imitates, or 0), long name, kind of argument, help text and the
 * variable it sets.  bench_parse() builds getopt_long's tables and the
 * --help text from it.  The options every program shares are the
 * BENCH_OPTS_* entries below, declared here once.
 */
enum bench_arg {
	BENCH_ARG_FLAG,	   /* no value; sets a bool */
	BENCH_ARG_UINT,	   /* a whole number from min to max: unsigned int */
	BENCH_ARG_ULONG,   /* the same: unsigned long */
	BENCH_ARG_STR,	   /* any string: const char * */
	BENCH_ARG_CHOICE,  /* one of choices[]: its index, an int */
	BENCH_ARG_IGNORED, /* the original tool's option, accepted; no effect */
	BENCH_ARG_REFUSED, /* the original tool's option, refused: exit 2 */
};

struct bench_opt {
	int short_name;	       /* 0: none */
	const char *long_name; /* NULL: none */
	enum bench_arg kind;
	const char *metavar; /* the value's name in --help; NULL: no value */
	const char *help;    /* lines of at most 54 characters */
	void *target;	     /* NULL for IGNORED and REFUSED */
	unsigned long min, max;
	const char *const *choices; /* CHOICE: NULL-terminated */
	bool *given; /* set to true when the option is given; or NULL */
};

/* A compile-time check that @p has type @type, as an untyped pointer. */
#define BENCH_PTR(p, type) ((void *)(1 ? (p) : (type)0))

#define BENCH_FLAG(s, l, var, h)                                               \
	{                                                                      \
		.short_name = (s), .long_name = (l), .kind = BENCH_ARG_FLAG,   \
		.help = (h), .target = BENCH_PTR(var, bool *)                  \
	}
#define BENCH_UINT(s, l, mv, var, lo, hi, h)                                   \
	{                                                                      \
		.short_name = (s), .long_name = (l), .kind = BENCH_ARG_UINT,   \
		.metavar = (mv), .help = (h),                                  \
		.target = BENCH_PTR(var, unsigned int *), .min = (lo),         \
		.max = (hi)                                                    \
	}
#define BENCH_ULONG(s, l, mv, var, lo, hi, h)                                  \
	{                                                                      \
		.short_name = (s), .long_name = (l), .kind = BENCH_ARG_ULONG,  \
		.metavar = (mv), .help = (h),                                  \
		.target = BENCH_PTR(var, unsigned long *), .min = (lo),        \
		.max = (hi)                                                    \
	}
#define BENCH_STR(s, l, mv, var, h)                                            \
	{                                                                      \
		.short_name = (s), .long_name = (l), .kind = BENCH_ARG_STR,    \
		.metavar = (mv), .help = (h),                                  \
		.target = BENCH_PTR(var, const char **)                        \
	}
#define BENCH_CHOICE(s, l, mv, var, names, h)                                  \
	{                                                                      \
		.short_name = (s), .long_name = (l), .kind = BENCH_ARG_CHOICE, \
		.metavar = (mv), .help = (h), .target = BENCH_PTR(var, int *), \
		.choices = (names)                                             \
	}
/* The original tool's options: @mv non-NULL when they take a value. */
#define BENCH_IGNORED(s, l, mv, h)                                             \
	{                                                                      \
		.short_name = (s), .long_name = (l),                           \
		.kind = BENCH_ARG_IGNORED, .metavar = (mv), .help = (h)        \
	}
#define BENCH_REFUSED(s, l, mv, h)                                             \
	{                                                                      \
		.short_name = (s), .long_name = (l),                           \
		.kind = BENCH_ARG_REFUSED, .metavar = (mv), .help = (h)        \
	}
/* BENCH_ULONG that also sets *@seen when the option is given. */
#define BENCH_ULONG_SEEN(s, l, mv, var, lo, hi, h, seen)                       \
	{                                                                      \
		.short_name = (s), .long_name = (l), .kind = BENCH_ARG_ULONG,  \
		.metavar = (mv), .help = (h),                                  \
		.target = BENCH_PTR(var, unsigned long *), .min = (lo),        \
		.max = (hi), .given = BENCH_PTR(seen, bool *)                  \
	}

/* How results are printed. */
enum bench_format {
	BENCH_FORMAT_TABLE,  /* readable tables */
	BENCH_FORMAT_COMPAT, /* the imitated tool's own output */
	BENCH_FORMAT_JSON,   /* one JSON record per mode */
};

/* What every program's command line sets. */
struct bench_common {
	unsigned int workers;
	bool fibers;  /* --fibers */
	bool threads; /* --threads: the kernel-thread baseline */
	int format;   /* enum bench_format */
	bool json;    /* --json, the same as --format json */
	const char *features;
};

/* The runtime's limit (fiber_init() refuses more), so that --workers is
 * refused with its own name and exit 2 rather than by fiber_init(). */
#define BENCH_WORKERS_MAX FIBER_WORKERS_MAX

/* --workers, --features, --format, --json. */
#define BENCH_OPTS_RUNTIME(c)                                                  \
	BENCH_UINT(0, "workers", "N", &(c)->workers, 1, BENCH_WORKERS_MAX,     \
		   "fiber workers, 1 to 1024 (FIBER_WORKERS_MAX)"),            \
		BENCH_STR(0, "features", "STR", &(c)->features,                \
			  "fiber_sched_features_set(STR) after fiber_init\n"   \
			  "(LIBFIBER_SCHED_FEATURES syntax)"),                 \
		BENCH_CHOICE(0, "format", "FMT", &(c)->format,                 \
			     bench_format_names,                               \
			     "table: readable tables; compat: the output\n"    \
			     "of the imitated tool, for its parsers (the\n"    \
			     "fiber mode only, unless --threads is given);\n"  \
			     "json: one JSON record per mode"),                \
		BENCH_FLAG(0, "json", &(c)->json, "the same as --format json")

/* --fibers and --threads (short name @t, or 0). */
#define BENCH_OPTS_MODES(c, t)                                                 \
	BENCH_FLAG(0, "fibers", &(c)->fibers, "run the fiber mode only"),      \
		BENCH_FLAG(t, "threads", &(c)->threads,                        \
			   "run the kernel-thread baseline only")

extern const char *const bench_format_names[];

/*
 * bench_parse - parse @argv with the @nr options of @opts, plus -h/--help,
 * which prints "Usage: NAME [OPTION]...", @intro, the options with their
 * help and the current value of their variable as the default, then
 * @outro, and exits 0.  An unknown option, a missing or bad value, a
 * refused option or a stray argument is named on stderr and exits 2; an
 * ignored one is named on stderr and parsing goes on.
 */
void bench_parse(int argc, char **argv, const struct bench_opt *opts, size_t nr,
		 const char *intro, const char *outro);

/*
 * bench_common_finish - after bench_parse(): --json means --format json;
 * without --fibers, --threads or a mode of the program's own
 * (@other_mode), run both, or only the fiber mode with --format compat
 * (the imitated tool prints one result).  A --features word that is no
 * feature's NAME or NO_NAME is named on stderr, with the names, and exits 2.
 */
void bench_common_finish(struct bench_common *c, bool other_mode);

/* bench_now_ns - CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

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
 *	{"schema":BENCH_SCHEMA,"bench":NAME,"mode":MODE,"params":{P...},
 *	 "metrics":{M...},"warnings":[W...],"context":{C...}}
 *
 * printed as bench_json_open(), the parameters P, bench_json_metrics(),
 * the metrics M, bench_json_close(), which adds the warnings W of the run
 * (bench_warn()) and its context C (bench_context_print()).  Each member
 * appears once.  Numbers are printed with %.10g (doubles) or as whole
 * numbers.  Main thread only.
 */
#define BENCH_SCHEMA 2
void bench_json_open(const char *bench, const char *mode);
void bench_json_uint(const char *key, unsigned long long v);
void bench_json_double(const char *key, double v);
void bench_json_str(const char *key, const char *v);
void bench_json_metrics(void);
void bench_json_close(void);

/* bench_json_string - print @s to stdout as the inside of a JSON string. */
void bench_json_string(const char *s);

/*
 * The context of a run, in every record: host name, kernel, CPU model and
 * count, load averages before and after, the CPU time other processes took
 * during the run, libfiber's version and git revision, the scheduler clock,
 * the topology, the features, the LIBFIBER_* variables, the command line
 * and the date.  Main thread only.
 *
 * bench_context_start - note the command line, the load and the CPU times
 * before the run; bench_parse() calls it.
 * bench_context_runtime - note the running runtime's scheduler clock and
 * @features; bench_start_runtime() calls it.
 * bench_context_finish - note the load and CPU times after the run; the
 * first call counts, later ones do nothing.  The output functions call it.
 * bench_context_print - the context as a JSON object, to stdout.
 * bench_context_line - the context in one readable line, to stdout.
 */
void bench_context_start(int argc, char **argv);
void bench_context_runtime(const char *features);
void bench_context_finish(void);
void bench_context_print(void);
void bench_context_line(void);

/*
 * Warnings about what a result is worth: printed to stderr as "NAME:
 * warning: ..." and kept for the "warnings" member of the JSON records.
 * bench_warn - one warning.
 * bench_check_duration - warn when the measured part of @mode lasted less
 * than BENCH_MIN_RUN_NS; @raise names the option that makes it longer.
 * bench_check_tail - warn when fewer than BENCH_MIN_TAIL of the @count
 * samples of @what lie above its percentile @p.
 * bench_context_finish() warns when other processes took more than
 * BENCH_MAX_BUSY_OTHERS of the CPUs during the run.
 */
#define BENCH_MIN_RUN_NS 200000000ULL
#define BENCH_MIN_TAIL 10
#define BENCH_MAX_BUSY_OTHERS 0.10
void bench_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void bench_check_duration(const char *mode, uint64_t elapsed_ns,
			  const char *raise);
void bench_check_tail(const char *what, uint64_t count, double p);

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
/*
 * bench_hist_count_upto - how many values lie in the buckets up to the one
 * of @v, @v's included: the values at most @v, within a bucket's width.
 */
uint64_t bench_hist_count_upto(const struct bench_hist *h, uint64_t v);

#endif /* BENCH_H */
