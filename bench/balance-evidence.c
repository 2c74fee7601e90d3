/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * balance-evidence.c - small runs behind the ASYM_PACKING and
 * NUMA_IMB_AFFINITY measurements (doc/scheduler.md 4.5 and 5.5).
 *
 *   balance-evidence asym N SECONDS    N CPU-bound fibers (ebizzy-like:
 *	copy a 64 KiB record, count it, yield) started on the highest
 *	workers; prints records/s and the workers they ended on.
 *   balance-evidence create AFFINED    fibers created one at a time by a
 *	creator fiber (AFFINED=1: creator and children allowed on
 *	{0,2,8,10}); prints the median create-to-first-run latency, ns.
 *
 * Configure with LIBFIBER_TOPOLOGY, LIBFIBER_WORKERS and
 * LIBFIBER_SCHED_FEATURES, e.g.
 *   LIBFIBER_TOPOLOGY="pack:1 l3:1 core:4 pu:1" LIBFIBER_WORKERS=4 \
 *   LIBFIBER_SCHED_FEATURES=ASYM_PACKING balance-evidence asym 2 2
 *   LIBFIBER_TOPOLOGY="pack:2 numa:1 l3:4 core:2 pu:1" LIBFIBER_WORKERS=16 \
 *   LIBFIBER_SCHED_FEATURES=NO_NUMA_IMB_AFFINITY balance-evidence create 1
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fiber.h"

#define RECORD (64 * 1024)
#define NR_CREATE 200

static atomic_int stop;
static atomic_long records;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *ebizzy(void *arg)
{
	atomic_int *where = arg;
	char *a = malloc(RECORD), *b = malloc(RECORD);
	cpu_set_t all;

	CPU_ZERO(&all);
	for (int i = 0; i < fiber_nr_workers(); i++)
		CPU_SET(i, &all);
	fiber_setaffinity(sizeof(all), &all);
	memset(a, 1, RECORD);
	while (!atomic_load(&stop)) {
		memcpy(b, a, RECORD);
		__asm__ volatile("" ::"r"(b) : "memory");
		atomic_fetch_add_explicit(&records, 1, memory_order_relaxed);
		fiber_yield();
		atomic_store(where, fiber_current_worker());
	}
	free(a);
	free(b);
	return NULL;
}

static int asym(int n, int secs)
{
	int nw = fiber_nr_workers();
	atomic_int *where = calloc((size_t)n, sizeof(*where));
	fiber_t *f = calloc((size_t)n, sizeof(*f));
	long r0;

	if (!where || !f) {
		fprintf(stderr,
			"balance-evidence: out of memory for %d fibers\n", n);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		fiber_attr_t a;
		cpu_set_t s;
		int err;

		CPU_ZERO(&s);
		CPU_SET(nw - 1 - i % nw, &s);
		fiber_attr_init(&a);
		fiber_attr_setaffinity(&a, sizeof(s), &s);
		err = fiber_create(&f[i], &a, ebizzy, &where[i]);
		if (err) {
			fprintf(stderr, "balance-evidence: fiber_create: %s\n",
				strerror(err));
			exit(1);
		}
		fiber_attr_destroy(&a);
	}
	usleep(200000); /* warm-up: placement settles */
	r0 = atomic_load(&records);
	sleep((unsigned)secs);
	printf("records_per_s %.0f workers",
	       (double)(atomic_load(&records) - r0) / secs);
	atomic_store(&stop, 1);
	for (int i = 0; i < n; i++) {
		fiber_join(f[i], NULL);
		printf(" %d", atomic_load(&where[i]));
	}
	printf("\n");
	free(where);
	free(f);
	return 0;
}

struct stamp {
	uint64_t t0, t1;
};

static void *child(void *arg)
{
	struct stamp *s = arg;

	s->t1 = now_ns();
	while (!atomic_load(&stop))
		fiber_yield();
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void *creator(void *arg)
{
	int affined = *(int *)arg;
	struct stamp s[NR_CREATE];
	uint64_t d[NR_CREATE];
	fiber_t f[4];

	/* Batches of 4 running children, as in H4-3 (doc/scheduler.md 5.5). */
	for (int i = 0; i < NR_CREATE; i++) {
		fiber_attr_t a;
		cpu_set_t set;

		fiber_attr_init(&a);
		if (affined) {
			CPU_ZERO(&set);
			CPU_SET(0, &set);
			CPU_SET(2, &set);
			CPU_SET(8, &set);
			CPU_SET(10, &set);
			fiber_attr_setaffinity(&a, sizeof(set), &set);
		}
		s[i].t1 = 0;
		s[i].t0 = now_ns();
		fiber_create(&f[i % 4], &a, child, &s[i]);
		fiber_attr_destroy(&a);
		while (!__atomic_load_n(&s[i].t1, __ATOMIC_ACQUIRE))
			fiber_yield();
		d[i] = s[i].t1 - s[i].t0;
		if (i % 4 == 3) {
			atomic_store(&stop, 1);
			for (int k = 0; k < 4; k++)
				fiber_join(f[k], NULL);
			atomic_store(&stop, 0);
		}
	}
	qsort(d, NR_CREATE, sizeof(d[0]), cmp);
	printf("create_to_run_ns p50 %llu p90 %llu\n",
	       (unsigned long long)d[NR_CREATE / 2],
	       (unsigned long long)d[NR_CREATE * 9 / 10]);
	return NULL;
}

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s asym N SECONDS | create AFFINED\n", prog);
	exit(2);
}

/* number - @val as a whole number from @lo to @hi, or a message that
 * names @what and exit 2. */
static int number(const char *what, const char *val, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(val, &end, 10);
	if (!*val || *end || errno || v < lo || v > hi) {
		fprintf(stderr,
			"balance-evidence: %s: invalid value '%s' (expected a "
			"whole number from %ld to %ld)\n",
			what, val, lo, hi);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char **argv)
{
	int rc = 0, n = 0, secs = 0, affined = 0, err;

	if (argc == 4 && !strcmp(argv[1], "asym")) {
		n = number("N", argv[2], 1, 4096);
		secs = number("SECONDS", argv[3], 1, 3600);
	} else if (argc == 3 && !strcmp(argv[1], "create")) {
		affined = number("AFFINED", argv[2], 0, 1);
	} else {
		usage(argv[0]);
	}
	err = fiber_init(NULL);
	if (err) {
		fprintf(stderr, "balance-evidence: fiber_init: %s\n",
			strerror(err));
		return 1;
	}
	if (n) {
		rc = asym(n, secs);
	} else {
		fiber_attr_t a;
		cpu_set_t set;
		fiber_t f;

		fiber_attr_init(&a);
		if (affined) {
			CPU_ZERO(&set);
			CPU_SET(0, &set);
			CPU_SET(2, &set);
			CPU_SET(8, &set);
			CPU_SET(10, &set);
			fiber_attr_setaffinity(&a, sizeof(set), &set);
		}
		err = fiber_create(&f, &a, creator, &affined);
		if (err) {
			fprintf(stderr, "balance-evidence: fiber_create: %s\n",
				strerror(err));
			return 1;
		}
		fiber_join(f, NULL);
		fiber_attr_destroy(&a);
	}
	fiber_shutdown();
	return rc;
}
