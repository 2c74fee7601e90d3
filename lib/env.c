/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * env.c - LIBFIBER_* variables.  Read once at initialisation, validated, and
 * overridden field by field by struct fiber_config.  A bad value is an
 * error that names the variable, the value and what is accepted; nothing
 * is ever silently replaced by a default.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "env.h"
#include "place.h"
#include "topo.h"

/* Write "@var="@value": @what; expected @expected" to @err. */
static int bad(char *err, size_t errlen, const char *var, const char *value,
	       const char *what, const char *expected)
{
	if (err && errlen)
		snprintf(err, errlen, "%s=\"%s\": %s; expected %s", var, value,
			 what, expected);
	return EINVAL;
}

/* What is wrong with @value, which strtol-style parsing refused. */
static const char *not_digits(const char *value, bool negative_ok)
{
	if (!*value)
		return "empty";
	if (*value == '+' || (*value == '-' && !negative_ok))
		return "a sign is not accepted";
	return "not a decimal integer";
}

int fb_parse_long(const char *var, const char *value, long min, long max,
		  long *out, char *err, size_t errlen)
{
	char msg[128], *end;
	const char *p;
	long v;

	snprintf(msg, sizeof(msg), "an integer from %ld to %ld, in digits only",
		 min, max);
	if (!value)
		return bad(err, errlen, var, "", "empty", msg);
	/* Digits only: strtol would also take blanks and a '+' sign. */
	p = value + (*value == '-' && min < 0);
	if (!isdigit((unsigned char)*p) || p[strspn(p, "0123456789")])
		return bad(err, errlen, var, value, not_digits(value, min < 0),
			   msg);
	errno = 0;
	v = strtol(value, &end, 10);
	if (errno || v < min || v > max)
		return bad(err, errlen, var, value, "out of range", msg);
	*out = v;
	return 0;
}

/* The multiplier of the suffix @c (1 for none), 0 if @c is not one. */
static unsigned long long size_suffix(char c)
{
	switch (c) {
	case '\0':
		return 1;
	case 'k':
	case 'K':
		return 1024;
	case 'm':
	case 'M':
		return 1024 * 1024;
	case 'g':
	case 'G':
		return 1024 * 1024 * 1024;
	default:
		return 0;
	}
}

int fb_parse_size(const char *var, const char *value, size_t min, size_t max,
		  size_t *out, char *err, size_t errlen)
{
	char msg[192], *end;
	unsigned long long v, mul;

	snprintf(msg, sizeof(msg),
		 "digits with an optional K, M or G suffix (powers of 1024, "
		 "no B), e.g. 64K or 1M, from %zu to %zu bytes",
		 min, max);
	if (!value)
		return bad(err, errlen, var, "", "empty", msg);
	end = (char *)value + strspn(value, "0123456789");
	mul = size_suffix(*end);
	if (end == value || !mul || (*end && end[1]))
		return bad(err, errlen, var, value,
			   *value ? "not a size" : "empty", msg);
	errno = 0;
	v = strtoull(value, NULL, 10);
	if (errno || v > max / mul || v * mul < min)
		return bad(err, errlen, var, value, "out of range", msg);
	*out = (size_t)(v * mul);
	return 0;
}

int fb_parse_bool(const char *var, const char *value, bool *out, char *err,
		  size_t errlen)
{
	if (value && !strcmp(value, "1")) {
		*out = true;
		return 0;
	}
	if (value && !strcmp(value, "0")) {
		*out = false;
		return 0;
	}
	return bad(err, errlen, var, value ? value : "", "not 0 or 1",
		   "0 or 1");
}

int fb_parse_stats(const char *var, const char *value, enum fb_stats_mode *out,
		   char *err, size_t errlen)
{
	if (value && !strcmp(value, "0"))
		*out = FB_STATS_OFF;
	else if (value && !strcmp(value, "1"))
		*out = FB_STATS_TABLE;
	else if (value && !strcmp(value, "json"))
		*out = FB_STATS_JSON;
	else
		return bad(err, errlen, var, value ? value : "",
			   "not a statistics mode", "0, 1 or json");
	return 0;
}

int fb_parse_clock(const char *var, const char *value, enum fb_clock_kind *out,
		   char *err, size_t errlen)
{
	if (value && !strcmp(value, "auto")) {
		*out = FB_CLOCK_AUTO;
	} else if (value && !strcmp(value, "monotonic")) {
		*out = FB_CLOCK_MONOTONIC;
	} else if (value && !strcmp(value, "tsc")) {
		if (!fb_tsc_usable())
			return bad(err, errlen, var, value,
				   "the kernel's clocksource is not the TSC "
				   "here",
				   "auto or monotonic");
		*out = FB_CLOCK_TSC;
	} else {
		return bad(err, errlen, var, value ? value : "", "not a clock",
			   "auto, tsc or monotonic");
	}
	return 0;
}

/* An environment variable that is set but empty is a value too ("" is
 * refused by every parser except LIBFIBER_SCHED_FEATURES and
 * LIBFIBER_TOPOLOGY, where it means "nothing" / "the machine"). */
static const char *var(const char *name)
{
	return getenv(name);
}

/* fiber_config.workers, else LIBFIBER_WORKERS; 0 when neither is set. */
static int load_workers(struct fb_env *env, const struct fiber_config *c,
			char *err, size_t errlen)
{
	const char *v;
	long l;
	int rc;

	if (c && c->workers) {
		if (c->workers > FB_MAX_WORKERS) {
			snprintf(err, errlen,
				 "fiber_config.workers=%u: more than the %d "
				 "workers libfiber can run; expected 1 to %d, "
				 "or 0 for LIBFIBER_WORKERS",
				 c->workers, FB_MAX_WORKERS, FB_MAX_WORKERS);
			return EINVAL;
		}
		env->workers = (int)c->workers;
	} else if ((v = var("LIBFIBER_WORKERS"))) {
		rc = fb_parse_long("LIBFIBER_WORKERS", v, 1, FB_MAX_WORKERS, &l,
				   err, errlen);
		if (rc)
			return rc;
		env->workers = (int)l;
	}
	return 0;
}

/* fiber_config.bind (when bind_set and not -1), else LIBFIBER_BIND. */
static int load_bind(struct fb_env *env, const struct fiber_config *c,
		     char *err, size_t errlen)
{
	const char *v;
	bool b;
	int rc;

	env->bind = -1;
	if (c && c->bind_set && c->bind != -1) {
		if (c->bind != 0 && c->bind != 1) {
			snprintf(err, errlen,
				 "fiber_config.bind=%d: not a binding mode; "
				 "expected 1 (pin workers), 0 (do not) or -1 "
				 "(LIBFIBER_BIND)",
				 c->bind);
			return EINVAL;
		}
		env->bind = c->bind;
	} else if ((v = var("LIBFIBER_BIND"))) {
		rc = fb_parse_bool("LIBFIBER_BIND", v, &b, err, errlen);
		if (rc)
			return rc;
		env->bind = b;
	}
	return 0;
}

/* fiber_config.stack_size, else LIBFIBER_STACK_SIZE, else the default. */
static int load_stack(struct fb_env *env, const struct fiber_config *c,
		      char *err, size_t errlen)
{
	const char *v;

	env->stack_size = FB_STACK_DEFAULT;
	if (c && c->stack_size) {
		if (c->stack_size < FIBER_STACK_MIN ||
		    c->stack_size > FB_STACK_MAX) {
			snprintf(err, errlen,
				 "fiber_config.stack_size=%zu: out of range; "
				 "expected %d to %ld bytes, or 0 for "
				 "LIBFIBER_STACK_SIZE",
				 c->stack_size, FIBER_STACK_MIN, FB_STACK_MAX);
			return EINVAL;
		}
		env->stack_size = c->stack_size;
	} else if ((v = var("LIBFIBER_STACK_SIZE"))) {
		return fb_parse_size("LIBFIBER_STACK_SIZE", v, FIBER_STACK_MIN,
				     FB_STACK_MAX, &env->stack_size, err,
				     errlen);
	}
	return 0;
}

/* fiber_config.idle_poll_us (when idle_poll_set and not -1), else
 * LIBFIBER_IDLE_POLL_US, else the default. */
static int load_idle_poll(struct fb_env *env, const struct fiber_config *c,
			  char *err, size_t errlen)
{
	const char *v;

	env->idle_poll_us = FB_IDLE_POLL_DEFAULT_US;
	if (c && c->idle_poll_set && c->idle_poll_us != -1) {
		if (c->idle_poll_us < 0 ||
		    c->idle_poll_us > FB_IDLE_POLL_MAX_US) {
			snprintf(err, errlen,
				 "fiber_config.idle_poll_us=%ld: out of range; "
				 "expected 0 to %d, or -1 for "
				 "LIBFIBER_IDLE_POLL_US",
				 c->idle_poll_us, FB_IDLE_POLL_MAX_US);
			return EINVAL;
		}
		env->idle_poll_us = c->idle_poll_us;
	} else if ((v = var("LIBFIBER_IDLE_POLL_US"))) {
		return fb_parse_long("LIBFIBER_IDLE_POLL_US", v, 0,
				     FB_IDLE_POLL_MAX_US, &env->idle_poll_us,
				     err, errlen);
	}
	return 0;
}

/* The strings: a field that is set wins over its variable, and its name is
 * the one an error message gives. */
static int load_strings(struct fb_env *env, const struct fiber_config *c,
			char *err, size_t errlen)
{
	const char *v, *name;
	int rc;

	env->topology_name = "LIBFIBER_TOPOLOGY";
	v = var("LIBFIBER_TOPOLOGY");
	if (c && c->topology) {
		env->topology_name = "fiber_config.topology";
		v = c->topology;
	}
	if (v && *v) {
		env->topology = strdup(v);
		if (!env->topology)
			return ENOMEM;
	}

	env->features = fb_features_default();
	name = "LIBFIBER_SCHED_FEATURES";
	v = var(name);
	if (c && c->sched_features) {
		name = "fiber_config.sched_features";
		v = c->sched_features;
	}
	if (v) {
		rc = fb_features_parse(name, v, env->features, &env->features,
				       err, errlen);
		if (rc)
			return rc;
	}

	env->stats = FB_STATS_OFF;
	name = "LIBFIBER_STATS";
	v = var(name);
	if (c && c->stats) {
		name = "fiber_config.stats";
		v = c->stats;
	}
	return v ? fb_parse_stats(name, v, &env->stats, err, errlen) : 0;
}

static int load(struct fb_env *env, const struct fiber_config *c, char *err,
		size_t errlen)
{
	const char *v;
	int rc;

	rc = load_workers(env, c, err, errlen);
	if (!rc)
		rc = load_strings(env, c, err, errlen);
	if (!rc)
		rc = load_bind(env, c, err, errlen);
	if (!rc)
		rc = load_stack(env, c, err, errlen);
	if (!rc)
		rc = load_idle_poll(env, c, err, errlen);
	if (rc)
		return rc;

	env->blocked_load_interval_ms = 1;
	if ((v = var("LIBFIBER_BLOCKED_LOAD_INTERVAL_MS"))) {
		rc = fb_parse_long("LIBFIBER_BLOCKED_LOAD_INTERVAL_MS", v, 1,
				   1000, &env->blocked_load_interval_ms, err,
				   errlen);
		if (rc)
			return rc;
	}

	env->clock = FB_CLOCK_AUTO;
	if ((v = var("LIBFIBER_CLOCK")))
		return fb_parse_clock("LIBFIBER_CLOCK", v, &env->clock, err,
				      errlen);
	return 0;
}

int fb_env_load(struct fb_env *env, const struct fiber_config *config)
{
	char err[1024] = "";
	int rc;

	memset(env, 0, sizeof(*env));
	rc = load(env, config, err, sizeof(err));
	if (rc) {
		if (rc == EINVAL)
			fprintf(stderr, "libfiber: %s\n", err);
		fb_env_free(env);
	}
	return rc;
}

int fb_env_topo_open(const struct fb_env *env, struct fb_topo **tp)
{
	char err[1024] = "";
	int rc, n;

	rc = fb_topo_open_named(tp, env->topology, env->topology_name, err,
				sizeof(err));
	if (rc) {
		if (rc == EINVAL)
			fprintf(stderr, "libfiber: %s\n", err);
		return rc;
	}
	n = fb_topo_nr_pus(*tp);
	if (env->workers || n <= FB_MAX_WORKERS)
		return 0;
	if (env->topology)
		fprintf(stderr, "libfiber: %s=\"%s\": ", env->topology_name,
			env->topology);
	else
		fprintf(stderr, "libfiber: the machine (LIBFIBER_TOPOLOGY "
				"unset): ");
	fprintf(stderr,
		"%d PUs, more than the %d workers libfiber can run, and no "
		"worker count is set; expected LIBFIBER_WORKERS or "
		"fiber_config.workers from 1 to %d\n",
		n, FB_MAX_WORKERS, FB_MAX_WORKERS);
	fb_topo_close(*tp);
	*tp = NULL;
	return EINVAL;
}

void fb_env_free(struct fb_env *env)
{
	free(env->topology);
	env->topology = NULL;
}
