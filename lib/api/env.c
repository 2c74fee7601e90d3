/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api/env.c - LIBFIBER_* variables.  api/config.h declares each one: its kind,
 * range, default, the fb_env field it fills and the fiber_config field
 * that overrides it.  Here that table becomes vars[], and one loader walks
 * it, handing each value to the parser of its kind (fb_parse_*).  Read
 * once at initialisation, validated, and overridden field by field by
 * struct fiber_config.  A bad value is an error that names the variable
 * (or the field), the value and what is accepted; nothing is ever
 * silently replaced by a default.  fb_env_describe() prints the result
 * from the same table.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>

#include "api/env.h"
#include "place/place.h"
#include "topo/topo.h"

/* ---- the table ---------------------------------------------------------- */

/* Each kind and the type of the fb_env field it fills. */
enum kind { K_INT, K_SIZE, K_BOOL, K_ENUM, K_TEXT, K_FEATURES };
#define TYPE_INT long
#define TYPE_SIZE size_t
#define TYPE_BOOL int
#define TYPE_ENUM unsigned int /* an enum of non-negative values */
#define TYPE_TEXT char *
#define TYPE_FEATURES uint64_t
/* The kinds whose fiber_config field is a string, parsed as the variable. */
#define STRING_KIND(k) ((k) >= K_ENUM)

/* The type of a fiber_config field. */
enum ctype { T_INT, T_UINT, T_LONG, T_ULONG, T_STR };
#define CTYPE(f)                                                               \
	_Generic(((struct fiber_config *)0)->f, int: T_INT,                    \
		 unsigned int: T_UINT, long: T_LONG, unsigned long: T_ULONG,   \
		 const char *: T_STR)

struct var {
	const char *name; /* "LIBFIBER_WORKERS" */
	enum kind kind;
	long min, max;	   /* K_INT, K_SIZE */
	const char *words; /* K_ENUM: in the enum's order */
	const char *def;   /* spelled as the variable; NULL: none */
	size_t off;	   /* of the field in struct fb_env */
	const char *cname; /* "fiber_config.workers"; NULL: none */
	size_t coff;	   /* of that field in struct fiber_config */
	enum ctype ctype;
	long flag; /* offset of its *_set flag; -1: none, 0 or NULL unsets */
};

enum {
#define FB_CONFIG(name, ...) V_##name,
#include "api/config.h"
#undef FB_CONFIG
	V_NR
};

#define FB_CFG(f) FB_CFG_FLAG(f, -1L)
#define FB_CFG_SET(f, set)                                                     \
	FB_CFG_FLAG(f, (long)offsetof(struct fiber_config, set))
#define FB_CFG_FLAG(f, set)                                                    \
	.cname = "fiber_config." #f, .coff = offsetof(struct fiber_config, f), \
	.ctype = CTYPE(f), .flag = set
#define FB_CFG_NONE .flag = -1
#define FB_CONFIG(n, k, lo, hi, w, d, field, cfg, ...)                         \
	[V_##n] = { .name = "LIBFIBER_" #n,                                    \
		    .kind = K_##k,                                             \
		    .min = lo,                                                 \
		    .max = hi,                                                 \
		    .words = w,                                                \
		    .def = d,                                                  \
		    .off = offsetof(struct fb_env, field),                     \
		    cfg },
static const struct var vars[] = {
#include "api/config.h"
};
#undef FB_CONFIG

/* Each field has the type its kind fills; a fiber_config field is a
 * string exactly when its kind parses one. */
#undef FB_CFG_FLAG
#define FB_CFG_FLAG(f, set) (CTYPE(f) == T_STR)
#undef FB_CFG_NONE
#define FB_CFG_NONE -1
#define FB_CONFIG(n, k, lo, hi, w, d, field, cfg, ...)                         \
	_Static_assert(__builtin_types_compatible_p(                           \
			       __typeof__(((struct fb_env *)0)->field),        \
			       TYPE_##k) &&                                    \
			       (cfg == -1 || cfg == STRING_KIND(K_##k)),       \
		       "LIBFIBER_" #n ": a field of the wrong type");
#include "api/config.h"
#undef FB_CONFIG
#undef FB_CFG
#undef FB_CFG_SET
#undef FB_CFG_FLAG
#undef FB_CFG_NONE

/* ---- the parsers -------------------------------------------------------- */
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

/* The @i-th of @words, its length in *@len; NULL past the last. */
static const char *word_at(const char *words, long i, size_t *len)
{
	const char *p = words + strspn(words, " ");

	for (; *p && i >= 0; p += strspn(p, " ")) {
		*len = strcspn(p, " ");
		if (!i--)
			return p;
		p += *len;
	}
	return NULL;
}

int fb_parse_enum(const char *var, const char *value, const char *words,
		  int *out, char *err, size_t errlen)
{
	char msg[128] = ""; /* "a, b or c" */
	const char *w, *sep;
	size_t n, next, used = 0;

	for (int i = 0; (w = word_at(words, i, &n)); i++) {
		if (value && strlen(value) == n && !strncmp(value, w, n)) {
			*out = i;
			return 0;
		}
		sep = word_at(words, i + 1, &next) ? ", " : " or ";
		if (used < sizeof(msg))
			used += (size_t)snprintf(msg + used, sizeof(msg) - used,
						 "%s%.*s", i ? sep : "", (int)n,
						 w);
	}
	return bad(err, errlen, var, value ? value : "",
		   value && *value ? "unknown value" : "empty", msg);
}

int fb_parse_stats(const char *var, const char *value, enum fb_stats_mode *out,
		   char *err, size_t errlen)
{
	int i, rc;

	rc = fb_parse_enum(var, value, vars[V_STATS].words, &i, err, errlen);
	if (!rc)
		*out = (enum fb_stats_mode)i;
	return rc;
}

/* tsc and anchored are LIBFIBER_CLOCK's words everywhere; tsc runs only
 * where the kernel keeps time with the TSC, anchored where the CPU says its
 * TSC is invariant. */
static int tsc_refused(const char *var, char *err, size_t errlen)
{
	return bad(err, errlen, var, "tsc",
		   "the kernel's clocksource is not the TSC here",
		   "auto or monotonic");
}

static int anchored_refused(const char *var, char *err, size_t errlen)
{
	return bad(err, errlen, var, "anchored",
		   "this CPU does not say its TSC is invariant",
		   "auto or monotonic");
}

/* clock_refused - the kind @k that parses here and is refused all the
 * same, or 0. */
static int clock_refused(const char *var, enum fb_clock_kind k, char *err,
			 size_t errlen)
{
	if (k == FB_CLOCK_TSC && !fb_tsc_usable())
		return tsc_refused(var, err, errlen);
	if (k == FB_CLOCK_ANCHORED && !fb_tsc_invariant())
		return anchored_refused(var, err, errlen);
	return 0;
}

int fb_parse_clock(const char *var, const char *value, enum fb_clock_kind *out,
		   char *err, size_t errlen)
{
	int i, rc;

	rc = fb_parse_enum(var, value, vars[V_CLOCK].words, &i, err, errlen);
	if (rc)
		return rc;
	rc = clock_refused(var, (enum fb_clock_kind)i, err, errlen);
	if (rc)
		return rc;
	*out = (enum fb_clock_kind)i;
	return 0;
}

/* ---- the loader --------------------------------------------------------- */

/* Parse @value, named @name in messages, into @v's field @p. */
static int parse(void *p, const struct var *v, const char *name,
		 const char *value, char *err, size_t errlen)
{
	bool b;
	int i, rc;

	switch (v->kind) {
	case K_INT:
		return fb_parse_long(name, value, v->min, v->max, p, err,
				     errlen);
	case K_SIZE:
		return fb_parse_size(name, value, (size_t)v->min,
				     (size_t)v->max, p, err, errlen);
	case K_BOOL:
		rc = fb_parse_bool(name, value, &b, err, errlen);
		if (!rc)
			*(int *)p = b;
		return rc;
	case K_ENUM:
		rc = fb_parse_enum(name, value, v->words, &i, err, errlen);
		if (!rc)
			*(unsigned int *)p = (unsigned int)i;
		return rc;
	case K_TEXT:
		if (*value && !(*(char **)p = strdup(value)))
			return ENOMEM;
		return 0;
	case K_FEATURES:
		return fb_features_parse(name, value, fb_features_default(), p,
					 err, errlen);
	}
	return 0;
}

/* The number in the fiber_config field @p of type @t (at most LONG_MAX). */
static long cfg_number(const void *p, enum ctype t)
{
	if (t == T_INT)
		return *(const int *)p;
	if (t == T_UINT)
		return *(const unsigned int *)p;
	if (t == T_LONG)
		return *(const long *)p;
	return (long)FB_MIN(*(const unsigned long *)p, (unsigned long)LONG_MAX);
}

/* Whether @c sets @v's field, by its convention (api/config.h); the field's
 * address in *@p. */
static bool cfg_sets(const struct fiber_config *c, const struct var *v,
		     const void **p)
{
	if (!c || !v->cname)
		return false;
	*p = (const char *)c + v->coff;
	if (v->ctype == T_STR)
		return *(const char *const *)*p != NULL;
	if (v->flag >= 0)
		return *(const int *)((const char *)c + v->flag) &&
		       cfg_number(*p, v->ctype) != -1;
	return cfg_number(*p, v->ctype) != 0;
}

/* Store the number in the fiber_config field @p in @v's field @field, or
 * refuse it, naming the field, when it is out of @v's range. */
static int take_number(void *field, const struct var *v, const void *p,
		       char *err, size_t errlen)
{
	bool is_bool = v->kind == K_BOOL;
	long n = cfg_number(p, v->ctype), lo = is_bool ? 0 : v->min,
	     hi = is_bool ? 1 : v->max;
	char text[24], range[64];

	if (n >= lo && n <= hi) {
		if (v->kind == K_INT)
			*(long *)field = n;
		else if (v->kind == K_SIZE)
			*(size_t *)field = (size_t)n;
		else
			*(int *)field = (int)n;
		return 0;
	}
	if (v->ctype == T_ULONG)
		snprintf(text, sizeof(text), "%lu", *(const unsigned long *)p);
	else
		snprintf(text, sizeof(text), "%ld", n);
	snprintf(range, sizeof(range), is_bool ? "0 or 1" : "%ld to %ld%s", lo,
		 hi, v->kind == K_SIZE ? " bytes" : "");
	snprintf(err, errlen, "%s=%s: %s; expected %s, or %d for %s", v->cname,
		 text, is_bool ? "not 0 or 1" : "out of range", range,
		 v->flag >= 0 ? -1 : 0, v->name);
	return EINVAL;
}

/* One variable: @c's field when it sets one, else the environment, else
 * the default; none of them leaves the field unset.  A variable that is
 * set but empty is a value too ("" is refused by every kind but TEXT and
 * FEATURES, where it means none / the defaults). */
static int load_var(struct fb_env *env, const struct var *v,
		    const struct fiber_config *c, char *err, size_t errlen)
{
	const char *name = v->name, *value = getenv(v->name);
	void *field = (char *)env + v->off;
	const void *p;

	if (v->kind == K_BOOL)
		*(int *)field = -1;
	if (cfg_sets(c, v, &p)) {
		if (!STRING_KIND(v->kind))
			return take_number(field, v, p, err, errlen);
		name = v->cname;
		value = *(const char *const *)p;
	}
	if (v == &vars[V_TOPOLOGY])
		env->topology_name = name;
	if (!value)
		value = v->def;
	return value ? parse(field, v, name, value, err, errlen) : 0;
}

/* reserved_refused - EINVAL for a word of @c's reserved[] that is not 0:
 * a later version may give it a meaning, and a program that put
 * something there would then change behaviour (doc/abi.md). */
static int reserved_refused(const struct fiber_config *c, char *err,
			    size_t errlen)
{
	for (size_t i = 0; c && i < FB_ARRAY_SIZE(c->reserved); i++) {
		if (!c->reserved[i])
			continue;
		snprintf(err, errlen,
			 "fiber_config.reserved[%zu]=%u: not 0; expected 0 "
			 "(reserved for later fields: zero the whole struct)",
			 i, c->reserved[i]);
		return EINVAL;
	}
	return 0;
}

static int load(struct fb_env *env, const struct fiber_config *c, char *err,
		size_t errlen)
{
	if (reserved_refused(c, err, errlen))
		return EINVAL;
	for (int i = 0; i < V_NR; i++) {
		int rc = load_var(env, &vars[i], c, err, errlen);

		if (rc)
			return rc;
	}
	/* The values that parse and are refused all the same. */
	return clock_refused(vars[V_CLOCK].name, env->clock, err, errlen);
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
	if (env->workers || n <= FIBER_WORKERS_MAX)
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
		n, FIBER_WORKERS_MAX, FIBER_WORKERS_MAX);
	fb_topo_close(*tp);
	*tp = NULL;
	return EINVAL;
}

void fb_env_free(struct fb_env *env)
{
	for (int i = 0; i < V_NR; i++) {
		char **p = (char **)((char *)env + vars[i].off);

		if (vars[i].kind != K_TEXT)
			continue;
		free(*p);
		*p = NULL;
	}
}

/* ---- the description ---------------------------------------------------- */

struct out {
	char *buf;
	size_t len, used; /* used: the whole length, also past @len */
};

__attribute__((format(printf, 2, 3))) static void add(struct out *o,
						      const char *fmt, ...)
{
	bool room = o->used < o->len;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(room ? o->buf + o->used : NULL,
		      room ? o->len - o->used : 0, fmt, ap);
	va_end(ap);
	o->used += n > 0 ? (size_t)n : 0;
}

/* " NAME=value" for @v, whose field is @p; nothing when the field holds no
 * value the variable accepts. */
static void describe_var(struct out *o, const void *p, const struct var *v)
{
	static const char suffix[][2] = { "", "K", "M", "G" };
	size_t mark = o->used, n;
	const char *s;
	int shift;

	add(o, "%s%s=", mark ? " " : "", v->name);
	switch (v->kind) {
	case K_INT:
		if (*(const long *)p < v->min || *(const long *)p > v->max)
			goto none;
		add(o, "%ld", *(const long *)p);
		return;
	case K_SIZE: /* with the largest suffix that is exact */
		n = *(const size_t *)p;
		if (n < (size_t)v->min || n > (size_t)v->max)
			goto none;
		for (shift = 30; shift && n % ((size_t)1 << shift); shift -= 10)
			;
		add(o, "%zu%s", n >> shift, suffix[shift / 10]);
		return;
	case K_BOOL:
		if (*(const int *)p < 0)
			goto none;
		add(o, "%d", *(const int *)p);
		return;
	case K_ENUM:
		s = word_at(v->words, *(const unsigned int *)p, &n);
		if (!s)
			goto none;
		add(o, "%.*s", (int)n, s);
		return;
	case K_TEXT:
		s = *(char *const *)p;
		if (!s)
			goto none;
		add(o, !*s || strpbrk(s, " \t") ? "\"%s\"" : "%s", s);
		return;
	case K_FEATURES:
		for (int i = 0; i < FB_FEAT_NR; i++)
			add(o, "%s%s%s", i ? " " : "\"",
			    (*(const uint64_t *)p >> i) & 1 ? "" : "NO_",
			    fb_feature_name(i));
		add(o, "\"");
		return;
	}
none:
	o->used = mark;
	if (mark < o->len)
		o->buf[mark] = '\0';
}

size_t fb_env_describe(const struct fb_env *env, char *buf, size_t len)
{
	struct out o = { buf, len, 0 };

	if (len)
		buf[0] = '\0';
	for (int i = 0; i < V_NR; i++)
		describe_var(&o, (const char *)env + vars[i].off, &vars[i]);
	return o.used;
}
