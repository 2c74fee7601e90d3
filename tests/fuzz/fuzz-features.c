/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz-features.c - LIBFIBER_SCHED_FEATURES parser (fb_features_parse).
 * Checks, beyond "no crash": the error message is a terminated string that
 * fits its buffer, *out is untouched on error, and parsing is idempotent
 * (applying the same string twice gives the same mask).
 */
#include <errno.h>
#include <stdio.h>

#include "base/common.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *spec = fuzz_str(data, size, 4096), err[256];
	uint64_t base = size ? data[0] * UINT64_C(0x9e3779b97f4a7c15) : 0;
	uint64_t out = 42, again = 0;
	size_t errlen = size > 1 ? data[1] % sizeof(err) : sizeof(err);
	int rc;

	memset(err, 'x', sizeof(err));
	rc = fb_features_parse("LIBFIBER_SCHED_FEATURES", spec, base, &out, err,
			       errlen);
	if (rc) {
		if (rc != EINVAL || out != 42)
			abort();
		if (errlen && !memchr(err, '\0', errlen))
			abort();
	} else {
		if (fb_features_parse("V", spec, out, &again, NULL, 0) ||
		    again != out)
			abort();
		if (FB_FEAT_NR < 64 &&
		    (out & ~base & ~((UINT64_C(1) << (FB_FEAT_NR % 64)) - 1)))
			abort();
	}
	free(spec);
	return 0;
}
