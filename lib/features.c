/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * features.c - the scheduler feature list (lib/features.h) expanded into
 * names, the default mask, and the LIBFIBER_SCHED_FEATURES parser, which
 * follows the kernel's sched_features syntax: NAME turns a feature on,
 * NO_NAME turns it off, words separated by spaces or commas.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "fiber.h"

static const char *const names[FB_FEAT_NR] = {
#define FB_FEAT(name, def) [FB_FEAT_##name] = #name,
#include "features.h"
#undef FB_FEAT
};

_Static_assert(FB_FEAT_NR <= 64, "the feature mask is one 64-bit word");

uint64_t fb_features_default(void)
{
	uint64_t m = 0;

#define FB_FEAT(name, def)                                                     \
	if (def)                                                               \
		m |= FB_FEAT_BIT(name);
#include "features.h"
#undef FB_FEAT
	return m;
}

_Atomic uint64_t fb_features_mask =
#define FB_FEAT(name, def) ((uint64_t)(def) << FB_FEAT_##name) |
#include "features.h"
#undef FB_FEAT
	0;

const char *fb_feature_name(int feat)
{
	return feat >= 0 && feat < FB_FEAT_NR ? names[feat] : NULL;
}

static int lookup(const char *word, size_t len)
{
	for (int i = 0; i < FB_FEAT_NR; i++)
		if (strlen(names[i]) == len && !strncmp(names[i], word, len))
			return i;
	return -1;
}

static void accepted(char *err, size_t errlen, size_t used)
{
	for (int i = 0; i < FB_FEAT_NR && used < errlen; i++)
		used += (size_t)snprintf(err + used, errlen - used, "%s%s",
					 i ? " " : "", names[i]);
	if (used < errlen)
		snprintf(err + used, errlen - used,
			 " (each optionally prefixed by NO_)");
}

int fb_features_parse(const char *var, const char *spec, uint64_t base,
		      uint64_t *out, char *err, size_t errlen)
{
	const char *p = spec;
	uint64_t m = base;

	if (!spec)
		goto done;
	while (*p) {
		const char *word;
		size_t len;
		bool on = true;
		int f;

		p += strspn(p, " \t\n,");
		if (!*p)
			break;
		word = p;
		len = strcspn(p, " \t\n,");
		p += len;
		f = lookup(word, len);
		if (f < 0 && len > 3 && !strncmp(word, "NO_", 3)) {
			f = lookup(word + 3, len - 3);
			on = false;
		}
		if (f < 0) {
			if (err && errlen) {
				int n = snprintf(err, errlen,
						 "%s=\"%s\": unknown scheduler "
						 "feature \"%.*s\"; accepted: ",
						 var, spec,
						 (int)FB_MIN(len, 64), word);
				accepted(err, errlen,
					 n < 0 ? 0 : FB_MIN((size_t)n, errlen));
			}
			return EINVAL;
		}
		if (on)
			m |= UINT64_C(1) << f;
		else
			m &= ~(UINT64_C(1) << f);
	}
done:
	*out = m;
	return 0;
}

/* fb_sched_features_changed (sched-core.c) is called after the mask
 * changed through the API; the scheduler rebuilds what depends on it
 * (domain flags for ASYM_PACKING). */
void fb_sched_features_changed(uint64_t old, uint64_t mask);

int fiber_sched_features_set(const char *spec)
{
	char err[512];
	uint64_t old = fb_load_relaxed(&fb_features_mask), m;
	int rc;

	if (!spec)
		return EINVAL;
	rc = fb_features_parse("LIBFIBER_SCHED_FEATURES", spec, old, &m, err,
			       sizeof(err));
	if (rc) {
		fprintf(stderr, "libfiber: %s\n", err);
		return rc;
	}
	fb_store_seqcst(&fb_features_mask, m);
	if (m != old)
		fb_sched_features_changed(old, m);
	return 0;
}

int fiber_sched_feature_get(const char *name)
{
	int f;

	if (!name)
		return -1;
	f = lookup(name, strlen(name));
	if (f < 0)
		return -1;
	return (int)((fb_load_relaxed(&fb_features_mask) >> f) & 1);
}

int fiber_sched_features_string(char *buf, size_t len)
{
	uint64_t m = fb_load_relaxed(&fb_features_mask);
	size_t used = 0;

	if (len && buf)
		buf[0] = '\0';
	for (int i = 0; i < FB_FEAT_NR; i++) {
		int n = snprintf(used < len ? buf + used : NULL,
				 used < len ? len - used : 0, "%s%s%s",
				 i ? " " : "", (m >> i) & 1 ? "" : "NO_",
				 names[i]);
		used += (size_t)n;
	}
	return (int)used;
}
