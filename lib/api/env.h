/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api/env.h - the runtime's configuration: the LIBFIBER_* variables, parsed and
 * validated once, merged with struct fiber_config.
 */
#ifndef FB_ENV_H
#define FB_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <fiber.h>

#include "base/clock.h"
#include "sched/stack.h"

/* FB_STACK_DEFAULT and FB_STACK_MAX: sched/stack.h. */

enum fb_stats_mode { FB_STATS_OFF, FB_STATS_TABLE, FB_STATS_JSON };
/* LIBFIBER_DUMP_SIGNAL's words, in api/config.h's order. */
enum fb_dump_signal { FB_DUMP_OFF, FB_DUMP_QUIT, FB_DUMP_USR1, FB_DUMP_USR2 };

/* Filled by fb_env_load() from the table in api/config.h, which gives each
 * field's variable, default and fiber_config counterpart. */
struct fb_env {
	long workers;		   /* 0: one per PU */
	char *topology;		   /* NULL: the machine */
	const char *topology_name; /* where @topology came from, for messages:
				      "LIBFIBER_TOPOLOGY" or
				      "fiber_config.topology" */
	int bind;		   /* -1: default (the runtime makes it 1) */
	size_t stack_size;
	int stack_guard; /* -1: default (guarded) */
	uint64_t features;
	long idle_poll_us;
	enum fb_stats_mode stats;
	long blocked_load_interval_ms;
	enum fb_clock_kind clock;
	long offload_threads;
	long stall_ms;
	unsigned int deadlock; /* FB_DEADLOCK_* (sched/sched.h) */
	enum fb_dump_signal dump_signal;
	char *stats_file; /* NULL: stderr */
	long stats_interval_ms;
	char *trace; /* NULL: no trace */
};

struct fb_topo;

/*
 * fb_env_load - fill @env from @config and the environment.  A field of
 * @config that is set wins over its variable, and an error names the field
 * (fiber_config.NAME) rather than the variable.
 * Context: any thread; starts nothing.
 * Return: 0; EINVAL with the message (variable or field, value, accepted
 * values) printed to stderr; ENOMEM.
 */
int fb_env_load(struct fb_env *env, const struct fiber_config *config);

/*
 * fb_env_topo_open - load the topology @env names (fb_topo_open_named) and
 * check that it can be run: without a worker count (LIBFIBER_WORKERS or
 * fiber_config.workers), one worker per PU must fit in FIBER_WORKERS_MAX.
 * Context: any thread, before the runtime starts; starts no thread.
 * Return: 0 and *@tp; EINVAL with the message printed to stderr (nothing
 * is left open); ENOMEM.
 */
int fb_env_topo_open(const struct fb_env *env, struct fb_topo **tp);

/* fb_env_free - free what fb_env_load() allocated in @env. */
void fb_env_free(struct fb_env *env);

/*
 * fb_env_describe - write @env as NAME=value pairs, in api/config.h's order,
 * separated by spaces, to @buf (at most @len bytes with the NUL; @buf may
 * be NULL when @len is 0).  Each value is spelled as its variable accepts
 * it, in double quotes when it is empty or holds a blank; a variable whose
 * field holds no value (no worker count, the machine's topology, bind -1)
 * is left out.  Context: any thread; reads @env only.
 * Return: the length of the whole description, as snprintf() does.
 */
size_t fb_env_describe(const struct fb_env *env, char *buf, size_t len);

/* Parsers, exposed for the tests and the fuzzers.  Each returns 0 or EINVAL
 * and writes a message naming @var, @value, what is wrong and what is
 * accepted to @err, leaving *@out untouched.  Integers are decimal digits
 * only (no blank, no '+'; a '-' only when @min is negative); sizes are
 * digits with an optional K, M or G suffix (powers of 1024, either case). */
int fb_parse_long(const char *var, const char *value, long min, long max,
		  long *out, char *err, size_t errlen);
int fb_parse_size(const char *var, const char *value, size_t min, size_t max,
		  size_t *out, char *err, size_t errlen);
int fb_parse_bool(const char *var, const char *value, bool *out, char *err,
		  size_t errlen);
/* One of @words (separated by spaces, case matters): *@out is its index. */
int fb_parse_enum(const char *var, const char *value, const char *words,
		  int *out, char *err, size_t errlen);
/* LIBFIBER_STATS: 0, 1 or json (api/config.h's words). */
int fb_parse_stats(const char *var, const char *value, enum fb_stats_mode *out,
		   char *err, size_t errlen);
/* LIBFIBER_CLOCK: auto, tsc, monotonic or anchored (api/config.h's words);
 * tsc is refused (EINVAL) where the kernel does not keep time with the TSC,
 * anchored where the CPU does not say its TSC is invariant
 * (base/clock.h). */
int fb_parse_clock(const char *var, const char *value, enum fb_clock_kind *out,
		   char *err, size_t errlen);

/*
 * Statistics output (api/stats.c).  fb_stats_open - send the output where
 * @env says (LIBFIBER_STATS_FILE, opened and truncated now; stderr
 * otherwise) in its mode.  Return: 0; EINVAL with the message printed.
 * fb_stats_close - close that file.  fb_stats_print_out - the
 * LIBFIBER_STATS output, there.  fb_stats_interval_fn - the monitor's
 * interval hook (struct fb_sched_params.interval_fn), reset.  Context:
 * runtime start and stop, under the runtime lock; print_out also at exit.
 */
int fb_stats_open(const struct fb_env *env);
void fb_stats_close(void);
int fb_stats_print_out(void);
void (*fb_stats_interval_fn(void))(void);

#endif /* FB_ENV_H */
