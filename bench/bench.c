/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench.c - the helpers of bench.h: what every benchmark program needs and
 * should say the same way (error messages, exit statuses, option values,
 * the feature string of its JSON records).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fiber.h"
#include "bench.h"

void bench_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", bench_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void bench_bad_arg(const char *opt, const char *val, const char *expected)
{
	fprintf(stderr, "%s: %s: invalid value '%s' (expected %s)\n",
		bench_name, opt, val, expected);
	fprintf(stderr, "Try '%s --help'.\n", bench_name);
	exit(2);
}

unsigned long bench_parse_count(const char *opt, const char *val,
				unsigned long max)
{
	char expected[64];
	unsigned long v;
	char *end;

	snprintf(expected, sizeof(expected), "a whole number from 1 to %lu",
		 max);
	if (*val < '0' || *val > '9')
		bench_bad_arg(opt, val, expected);
	errno = 0;
	v = strtoul(val, &end, 10);
	if (errno || *end || !v || v > max)
		bench_bad_arg(opt, val, expected);
	return v;
}

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench_json_string(const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
}

static char *features_string(void)
{
	char small[256] = "";
	char *buf;
	int len;

	len = fiber_sched_features_string(small, sizeof(small));
	if (len < 0)
		len = 0;
	buf = malloc(len + 1);
	if (!buf)
		bench_die("out of memory");
	if ((size_t)len < sizeof(small))
		memcpy(buf, small, len + 1);
	else
		fiber_sched_features_string(buf, len + 1);
	return buf;
}

char *bench_start_runtime(unsigned int workers, const char *features)
{
	struct fiber_config cfg = { .workers = workers };
	int err;

	err = fiber_init(&cfg);
	if (err)
		bench_die("fiber_init with %u workers: %s", workers,
			  strerror(err));
	if (fiber_nr_workers() != (int)workers)
		bench_die("asked for %u workers, the runtime has %d", workers,
			  fiber_nr_workers());
	if (features) {
		err = fiber_sched_features_set(features);
		if (err) {
			fprintf(stderr,
				"%s: --features: '%s' rejected: %s (names "
				"separated by spaces or commas, NAME turns "
				"on, NO_NAME turns off)\n",
				bench_name, features, strerror(err));
			fiber_shutdown();
			exit(2);
		}
	}
	return features_string();
}
