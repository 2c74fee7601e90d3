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

static int load(struct fb_env *env, const struct fiber_config *c, char *err,
		size_t errlen)
{
	const char *v;
	long l;
	bool b;
	int rc;

	if (c && c->workers) {
		if (c->workers > FB_MAX_WORKERS) {
			snprintf(err, errlen,
				 "fiber_config.workers=%u: expected 1 to %d",
				 c->workers, FB_MAX_WORKERS);
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

	v = c && c->topology ? c->topology : var("LIBFIBER_TOPOLOGY");
	if (v && *v) {
		env->topology = strdup(v);
		if (!env->topology)
			return ENOMEM;
	}

	env->bind = -1;
	if (c && c->bind_set) {
		env->bind = c->bind ? 1 : 0;
	} else if ((v = var("LIBFIBER_BIND"))) {
		rc = fb_parse_bool("LIBFIBER_BIND", v, &b, err, errlen);
		if (rc)
			return rc;
		env->bind = b;
	}

	env->stack_size = FB_STACK_DEFAULT;
	if (c && c->stack_size) {
		if (c->stack_size < FIBER_STACK_MIN ||
		    c->stack_size > FB_STACK_MAX) {
			snprintf(err, errlen,
				 "fiber_config.stack_size=%zu: expected %d to "
				 "%ld bytes",
				 c->stack_size, FIBER_STACK_MIN, FB_STACK_MAX);
			return EINVAL;
		}
		env->stack_size = c->stack_size;
	} else if ((v = var("LIBFIBER_STACK_SIZE"))) {
		rc = fb_parse_size("LIBFIBER_STACK_SIZE", v, FIBER_STACK_MIN,
				   FB_STACK_MAX, &env->stack_size, err, errlen);
		if (rc)
			return rc;
	}

	env->features = fb_features_default();
	v = c && c->sched_features ? c->sched_features :
				     var("LIBFIBER_SCHED_FEATURES");
	if (v) {
		rc = fb_features_parse("LIBFIBER_SCHED_FEATURES", v,
				       env->features, &env->features, err,
				       errlen);
		if (rc)
			return rc;
	}

	env->idle_poll_us = FB_IDLE_POLL_DEFAULT_US;
	if (c && c->idle_poll_set) {
		if (c->idle_poll_us < 0 ||
		    c->idle_poll_us > FB_IDLE_POLL_MAX_US) {
			snprintf(err, errlen,
				 "fiber_config.idle_poll_us=%ld: expected 0 to "
				 "%d",
				 c->idle_poll_us, FB_IDLE_POLL_MAX_US);
			return EINVAL;
		}
		env->idle_poll_us = c->idle_poll_us;
	} else if ((v = var("LIBFIBER_IDLE_POLL_US"))) {
		rc = fb_parse_long("LIBFIBER_IDLE_POLL_US", v, 0,
				   FB_IDLE_POLL_MAX_US, &env->idle_poll_us, err,
				   errlen);
		if (rc)
			return rc;
	}

	env->stats = FB_STATS_OFF;
	v = c && c->stats ? c->stats : var("LIBFIBER_STATS");
	if (v) {
		rc = fb_parse_stats(c && c->stats ? "fiber_config.stats" :
						    "LIBFIBER_STATS",
				    v, &env->stats, err, errlen);
		if (rc)
			return rc;
	}

	env->blocked_load_interval_ms = 1;
	if ((v = var("LIBFIBER_BLOCKED_LOAD_INTERVAL_MS"))) {
		rc = fb_parse_long("LIBFIBER_BLOCKED_LOAD_INTERVAL_MS", v, 1,
				   1000, &env->blocked_load_interval_ms, err,
				   errlen);
		if (rc)
			return rc;
	}

	env->clock = FB_CLOCK_AUTO;
	if ((v = var("LIBFIBER_CLOCK"))) {
		rc = fb_parse_clock("LIBFIBER_CLOCK", v, &env->clock, err,
				    errlen);
		if (rc)
			return rc;
	}
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

void fb_env_free(struct fb_env *env)
{
	free(env->topology);
	env->topology = NULL;
}
