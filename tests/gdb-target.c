/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gdb-target.c - the program tests/test-gdb.sh debugs: a few named fibers
 * parked in a known function on a semaphore, one asleep until a deadline
 * it prints, one joining the first sleeper; then a stop in gdb_stop_here().
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "fiber.h"

#define NR 3

static fiber_sem_t sem;

/* Not a tail call: the frame must stay for "fiber bt" to find, whatever
 * the library's calls inline. */
__attribute__((noinline)) static void parked_in_here(void)
{
	int err = fiber_sem_wait(&sem);

	__asm__ volatile("" ::"r"(err));
}

static void *sleeper(void *arg)
{
	(void)arg;
	parked_in_here();
	return NULL;
}

/* Asleep for an hour, until canceled. */
static void *napper(void *arg)
{
	int rc = fiber_sleep_until(*(uint64_t *)arg);

	return rc == ECANCELED ? NULL : arg;
}

static void *joiner(void *arg)
{
	return (void *)(intptr_t)fiber_join(*(fiber_t *)arg, NULL);
}

__attribute__((noinline)) void gdb_stop_here(void);
__attribute__((noinline)) void gdb_stop_here(void)
{
	__asm__ volatile("" ::: "memory");
}

int main(void)
{
	struct fiber_config c = { 0 };
	fiber_attr_t a;
	fiber_t f[NR], nap, join;
	char name[32];
	uint64_t until;
	void *ret = NULL, *jret = NULL;
	int v = 0;

	c.workers = 2;
	if (fiber_init(&c) || fiber_sem_init(&sem, 0))
		return 1;
	for (int i = 0; i < NR; i++) {
		fiber_attr_init(&a);
		snprintf(name, sizeof(name), "gdb-sleeper-%d", i);
		fiber_attr_setname(&a, name);
		if (fiber_create(&f[i], &a, sleeper, NULL))
			return 1;
	}
	until = fiber_now() + 3600ull * 1000000000;
	fiber_attr_init(&a);
	fiber_attr_setname(&a, "gdb-napper");
	if (fiber_create(&nap, &a, napper, &until))
		return 1;
	fiber_attr_init(&a);
	fiber_attr_setname(&a, "gdb-joiner");
	if (fiber_create(&join, &a, joiner, &f[0]))
		return 1;
	/* Wait until all are parked: created and switched out. */
	while (fiber_stats_counter("parks") < NR + 2)
		fiber_sem_getvalue(&sem, &v);
	printf("first-id %llu\n", (unsigned long long)fiber_id(f[0]));
	printf("first-handle %p\n", (void *)f[0]);
	printf("napper-until %.6f\n", (double)until / 1e9);
	fflush(stdout);
	gdb_stop_here();
	fiber_cancel(nap);
	for (int i = 0; i < NR; i++)
		fiber_sem_post(&sem);
	for (int i = 1; i < NR; i++)
		fiber_join(f[i], NULL);
	fiber_join(join, &jret);
	fiber_join(nap, &ret);
	fiber_shutdown();
	return ret || jret;
}
