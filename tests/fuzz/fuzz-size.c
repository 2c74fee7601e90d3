/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz-size.c - the size parser behind LIBFIBER_STACK_SIZE (fb_parse_size).
 * Checks: a result is inside [min, max]; *out is untouched on error; the
 * message is terminated.
 */
#include <errno.h>
#include <stdio.h>

#include "api/env.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *v = fuzz_str(data, size, 256), err[512];
	size_t min = FIBER_STACK_MIN, max = FB_STACK_MAX, out = 7;
	int rc;

	if (size && data[0] == '0') {
		min = 0; /* exercise the whole range too */
		max = SIZE_MAX;
	}
	rc = fb_parse_size("LIBFIBER_STACK_SIZE", v, min, max, &out, err,
			   sizeof(err));
	if (rc) {
		if (rc != EINVAL || out != 7 || !memchr(err, '\0', sizeof(err)))
			abort();
	} else if (out < min || out > max) {
		abort();
	}
	free(v);
	return 0;
}
