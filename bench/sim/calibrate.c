// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * calibrate.c - the machine measurements behind fiber-sim's cost model
 * that the runtime's benchmarks cannot give (doc/simulator.md 3), with two
 * threads pinned to CPUs @a and @b:
 *
 *   line_ns        one cache-line transfer: a counter bounced between the
 *                  threads, half a round trip, the median of 21 runs;
 *   futex_wake_ns  the waker's FUTEX_WAKE of a sleeping thread;
 *   wake_run_ns    from that call to the sleeper running.
 *
 * bench/sim/calibrate.sh runs it next to the runtime's benchmarks.
 */
#define _GNU_SOURCE 1
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 20000
#define RUNS 21
#define WAKES 2000

static _Alignas(64) atomic_uint ball;
static _Alignas(64) atomic_uint word;
static _Alignas(64) _Atomic uint64_t stamp;
static int cpu_b;
static uint64_t lat[WAKES];

static uint64_t now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static void *bouncer(void *arg)
{
	(void)arg;
	pin(cpu_b);
	for (unsigned i = 1; i < 2 * ROUNDS * RUNS; i += 2) {
		while (atomic_load_explicit(&ball, memory_order_acquire) != i)
			;
		atomic_store_explicit(&ball, i + 1, memory_order_release);
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void *sleeper(void *arg)
{
	(void)arg;
	pin(cpu_b);
	for (int i = 0; i < WAKES; i++) {
		while (atomic_load(&word) == 0)
			syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, NULL,
				NULL, 0);
		lat[i] = now() - atomic_load(&stamp);
		atomic_store(&word, 0);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t runs[RUNS], wake[WAKES], t;
	pthread_t th;
	unsigned v = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: %s CPU_A CPU_B\n", argv[0]);
		return 2;
	}
	cpu_b = atoi(argv[2]);
	pin(atoi(argv[1]));
	pthread_create(&th, NULL, bouncer, NULL);
	for (int r = 0; r < RUNS; r++) {
		t = now();
		for (int i = 0; i < ROUNDS; i++) {
			atomic_store_explicit(&ball, v + 1,
					      memory_order_release);
			while (atomic_load_explicit(
				       &ball, memory_order_acquire) != v + 2)
				;
			v += 2;
		}
		runs[r] = (now() - t) / ROUNDS / 2;
	}
	pthread_join(th, NULL);
	qsort(runs, RUNS, sizeof(runs[0]), cmp);
	printf("line_ns %llu\n", (unsigned long long)runs[RUNS / 2]);

	pthread_create(&th, NULL, sleeper, NULL);
	for (int i = 0; i < WAKES; i++) {
		usleep(200); /* let it sleep */
		atomic_store(&stamp, now());
		atomic_store(&word, 1);
		t = now();
		syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		wake[i] = now() - t;
		while (atomic_load(&word))
			;
	}
	pthread_join(th, NULL);
	qsort(wake, WAKES, sizeof(wake[0]), cmp);
	qsort(lat, WAKES, sizeof(lat[0]), cmp);
	printf("futex_wake_ns %llu\n", (unsigned long long)wake[WAKES / 2]);
	printf("wake_run_ns %llu\n", (unsigned long long)lat[WAKES / 2]);
	return 0;
}
