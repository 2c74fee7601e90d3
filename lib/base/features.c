/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * base/features.c - the scheduler feature list (base/features.h) expanded into
 * names, the default mask, and the LIBFIBER_SCHED_FEATURES parser, which
 * follows the kernel's sched_features syntax: NAME turns a feature on,
 * NO_NAME turns it off, words separated by spaces or commas.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "base/common.h"

static const char *const names[FB_FEAT_NR] = {
#define FB_FEAT(name, def) [FB_FEAT_##name] = #name,
#include "base/features.h"
#undef FB_FEAT
};

_Static_assert(FB_FEAT_NR <= 64, "the feature mask is one 64-bit word");

uint64_t fb_features_default(void)
{
	uint64_t m = 0;

#define FB_FEAT(name, def)                                                     \
	if (def)                                                               \
		m |= FB_FEAT_BIT(name);
#include "base/features.h"
#undef FB_FEAT
	return m;
}

_Atomic uint64_t fb_features_mask =
#define FB_FEAT(name, def) ((uint64_t)(def) << FB_FEAT_##name) |
#include "base/features.h"
#undef FB_FEAT
	0;

const char *fb_feature_name(int feat)
{
	return feat >= 0 && feat < FB_FEAT_NR ? names[feat] : NULL;
}

int fb_feature_lookup(const char *word, size_t len)
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
		f = fb_feature_lookup(word, len);
		if (f < 0 && len > 3 && !strncmp(word, "NO_", 3)) {
			f = fb_feature_lookup(word + 3, len - 3);
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
