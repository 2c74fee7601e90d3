/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api/features.c - the public calls on the scheduler features: switch them
 * while the runtime runs (LIBFIBER_SCHED_FEATURES syntax), ask one, print
 * them all.  The list, the mask and the parser are base's
 * (base/features.c); what depends on the mask is rebuilt by the scheduler
 * (fb_sched_features_changed).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <fiber.h>

#include "base/common.h"
#include "sched/sched.h"

int fiber_sched_features_set(const char *spec)
{
	char err[512];
	uint64_t old = fb_load_seqcst(&fb_features_mask), m;
	int rc;

	if (!spec)
		return EINVAL;
	/* The words apply to the mask they were parsed against: a switch of
	 * another thread in between is parsed again, never overwritten.  A
	 * bad word is reported as the caller's argument: the environment
	 * played no part. */
	do {
		rc = fb_features_parse("fiber_sched_features_set: spec", spec,
				       old, &m, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "libfiber: %s\n", err);
			return rc;
		}
	} while (!fb_cas_seqcst(&fb_features_mask, &old, m));
	if (m != old)
		fb_sched_features_changed(old, m);
	return 0;
}

int fiber_sched_feature_get(const char *name)
{
	int f;

	if (!name)
		return -1;
	f = fb_feature_lookup(name, strlen(name));
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
				 fb_feature_name(i));
		used += (size_t)n;
	}
	return (int)used;
}
