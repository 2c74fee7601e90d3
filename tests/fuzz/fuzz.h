/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz.h - what every fuzz target shares: the libFuzzer entry point and a
 * helper that turns the raw input into a NUL-terminated string.
 */
#ifndef FB_FUZZ_H
#define FB_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* fuzz_str - a malloc'ed copy of @data with a terminating NUL, cut at
 * @max bytes (the parsers see C strings, never lengths). */
static inline char *fuzz_str(const uint8_t *data, size_t size, size_t max)
{
	char *s;

	if (size > max)
		size = max;
	s = malloc(size + 1);
	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

#endif /* FB_FUZZ_H */
