/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz-env.c - the other LIBFIBER_* parsers: fb_parse_long, fb_parse_bool,
 * fb_parse_stats and fb_parse_clock.  The first input byte picks the parser and the
 * bounds; the rest is the value.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include "api/env.h"
#include "fuzz.h"

static void check_err(int rc, const char *err, size_t len)
{
	if (rc != EINVAL || !memchr(err, '\0', len))
		abort();
}

/* A word that parsed must be the one of @words (in the enum's order)
 * that the value spells exactly. */
static void check_word(const char *const *words, size_t n, int got,
		       const char *v)
{
	if (got < 0 || (size_t)got >= n || strcmp(words[got], v))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const clocks[] = {
		[FB_CLOCK_AUTO] = "auto",
		[FB_CLOCK_TSC] = "tsc",
		[FB_CLOCK_MONOTONIC] = "monotonic",
		[FB_CLOCK_ANCHORED] = "anchored",
	};
	static const char *const stats[] = {
		[FB_STATS_OFF] = "0",
		[FB_STATS_TABLE] = "1",
		[FB_STATS_JSON] = "json",
	};
	static const long bounds[][2] = {
		{ 1, 1024 },
		{ 0, 1000000 },
		{ LONG_MIN, LONG_MAX },
		{ -5, 5 },
	};
	char *v, err[256];
	unsigned int pick;
	long l = 3;
	bool b = true;
	enum fb_stats_mode m = FB_STATS_JSON;
	enum fb_clock_kind k = FB_CLOCK_AUTO;
	int rc;

	if (!size)
		return 0;
	pick = data[0];
	v = fuzz_str(data + 1, size - 1, 256);
	switch (pick % 4) {
	case 0: {
		const long *lim = bounds[(pick / 3) % 4];

		rc = fb_parse_long("LIBFIBER_WORKERS", v, lim[0], lim[1], &l,
				   err, sizeof(err));
		if (rc) {
			check_err(rc, err, sizeof(err));
			if (l != 3)
				abort();
		} else if (l < lim[0] || l > lim[1]) {
			abort();
		}
		break;
	}
	case 1:
		rc = fb_parse_bool("LIBFIBER_BIND", v, &b, err, sizeof(err));
		if (rc)
			check_err(rc, err, sizeof(err));
		else if (b != (v[0] == '1'))
			abort();
		break;
	case 3:
		rc = fb_parse_clock("LIBFIBER_CLOCK", v, &k, err, sizeof(err));
		if (rc)
			check_err(rc, err, sizeof(err));
		else
			check_word(clocks, FB_ARRAY_SIZE(clocks), (int)k, v);
		break;
	default:
		rc = fb_parse_stats("LIBFIBER_STATS", v, &m, err, sizeof(err));
		if (rc)
			check_err(rc, err, sizeof(err));
		else
			check_word(stats, FB_ARRAY_SIZE(stats), (int)m, v);
		break;
	}
	free(v);
	return 0;
}
