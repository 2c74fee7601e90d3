/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-bench-hist.c - the latency histogram of bench/bench.c: its
 * percentiles against the nearest rank of the sorted samples.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "bench.h"

const char bench_name[] = "test-bench-hist";

/*
 * A histogram of @low values 1 and @n - @low values 1000000, far apart.
 */
static struct bench_hist *two_values(uint64_t n, uint64_t low)
{
	struct bench_hist *h = bench_hist_alloc();

	for (uint64_t i = 0; i < n; i++)
		bench_hist_add(h, i < low ? 1 : 1000000);
	return h;
}

/*
 * The percentile p of n samples is the sample of rank ceil(p/100 * n):
 * with that many samples of 1 it is 1, with one fewer it is the large
 * value.  p99.9 of 1000 samples is the 999th, though p/100 * n is a hair
 * above 999 in doubles (999.0000000000001), and likewise at 10^4 to 10^6.
 */
static void test_nearest_rank(void **state)
{
	/* percentiles in hundredths, as the programs report them */
	static const uint64_t pcts[] = { 5000, 9000, 9900, 9990, 9999 };
	static const uint64_t counts[] = { 1,	 7,	10,	100,	1000,
					   3000, 10000, 100000, 1000000 };

	(void)state;
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		uint64_t n = counts[c];

		for (size_t k = 0; k < sizeof(pcts) / sizeof(pcts[0]); k++) {
			uint64_t rank = (pcts[k] * n + 9999) / 10000;
			struct bench_hist *h;

			if (rank < 1)
				rank = 1;
			h = two_values(n, rank);
			assert_int_equal(
				bench_hist_percentile(h, pcts[k] / 100.0), 1);
			free(h);
			h = two_values(n, rank - 1);
			assert_int_equal(bench_hist_percentile(h,
							       pcts[k] / 100.0),
					 1000000);
			free(h);
		}
	}
}

/* An empty histogram has 0 for every percentile; p100 is the maximum. */
static void test_ends(void **state)
{
	struct bench_hist *h = bench_hist_alloc();

	(void)state;
	assert_int_equal(bench_hist_percentile(h, 50), 0);
	for (unsigned int i = 1; i <= 1000; i++)
		bench_hist_add(h, i * 1000ull);
	assert_int_equal(bench_hist_percentile(h, 100), 1000000);
	free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nearest_rank),
		cmocka_unit_test(test_ends),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
