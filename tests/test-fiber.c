/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-fiber.c - the fiber API through the public header only: create,
 * join, detach, exit, yield, self, affinity, fiber-local storage, foreign
 * threads, error returns, and the mass tests of the core issue.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fiber.h"
#include "harness.h"

static int start(unsigned int workers)
{
	struct fiber_config c = { 0 };

	c.workers = workers;
	return fiber_init(&c);
}

static void *ret_arg(void *arg)
{
	return arg;
}

static void test_fiber_create_join_returns_value(void **state)
{
	fiber_t f;
	void *r = NULL;

	(void)state;
	assert_int_equal(start(2), 0);
	assert_int_equal(fiber_create(&f, NULL, ret_arg, (void *)0x1234), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_ptr_equal(r, (void *)0x1234);
	assert_int_equal(fiber_shutdown(), 0);
}

static void *exit_early(void *arg)
{
	fiber_exit(arg);
	return NULL;
}

static void *join_self(void *arg)
{
	(void)arg;
	return (void *)(long)fiber_join(fiber_self(), NULL);
}

static void test_fiber_exit_and_join_errors(void **state)
{
	fiber_t f, g;
	void *r;
	fiber_attr_t a;
	int rc;

	(void)state;
	assert_int_equal(start(2), 0);
	assert_int_equal(fiber_create(&f, NULL, exit_early, (void *)5), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_ptr_equal(r, (void *)5);

	assert_int_equal(fiber_create(&f, NULL, join_self, NULL), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_int_equal((long)r, EDEADLK);

	assert_int_equal(fiber_attr_init(&a), 0);
	assert_int_equal(fiber_attr_setdetachstate(&a, FIBER_CREATE_DETACHED),
			 0);
	assert_int_equal(fiber_create(&g, &a, ret_arg, NULL), 0);
	/* Detached: EINVAL while it runs, ESRCH once it is gone. */
	rc = fiber_join(g, NULL);
	assert_true(rc == EINVAL || rc == ESRCH);

	assert_int_equal(fiber_create(&g, NULL, ret_arg, NULL), 0);
	assert_int_equal(fiber_detach(g), 0);

	assert_int_equal(fiber_join(NULL, NULL), ESRCH);
	assert_int_equal(fiber_create(NULL, NULL, ret_arg, NULL), EINVAL);
	assert_int_equal(fiber_create(&f, NULL, NULL, NULL), EINVAL);
	assert_int_equal(fiber_attr_setstacksize(&a, 100), EINVAL);
	assert_int_equal(fiber_attr_setdetachstate(&a, 7), EINVAL);
	assert_int_equal(fiber_yield(), EPERM); /* not a fiber */
	assert_null(fiber_self());
	assert_int_equal(fiber_current_worker(), -1);
	assert_int_equal(fiber_shutdown(), 0);
}

struct yield_log {
	fiber_mutex_t m;
	int order[64];
	int n;
};

static struct yield_log ylog;

static void *yielder(void *arg)
{
	for (int i = 0; i < 3; i++) {
		fiber_mutex_lock(&ylog.m);
		ylog.order[ylog.n++] = (int)(long)arg;
		fiber_mutex_unlock(&ylog.m);
		fiber_yield();
	}
	return NULL;
}

static void *spawn_yielders(void *arg)
{
	fiber_t f[3];

	(void)arg;
	for (long i = 0; i < 3; i++)
		if (fiber_create(&f[i], NULL, yielder, (void *)i))
			return (void *)1;
	for (int i = 0; i < 3; i++)
		fiber_join(f[i], NULL);
	return NULL;
}

/* On one worker, yield is round robin: A B C A B C A B C. */
static void test_fiber_yield_round_robin_on_one_worker(void **state)
{
	fiber_t f;
	void *r;

	(void)state;
	memset(&ylog, 0, sizeof(ylog));
	assert_int_equal(start(1), 0);
	assert_int_equal(fiber_create(&f, NULL, spawn_yielders, NULL), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_null(r);
	assert_int_equal(ylog.n, 9);
	for (int i = 0; i < 9; i++)
		assert_int_equal(ylog.order[i], i % 3);
	assert_int_equal(fiber_shutdown(), 0);
}

static void *where(void *arg)
{
	long bad = 0;

	(void)arg;
	for (int i = 0; i < 100; i++) {
		bad += fiber_current_worker() != 2;
		fiber_yield();
	}
	return (void *)bad;
}

static void *move_self(void *arg)
{
	cpu_set_t s;

	(void)arg;
	CPU_ZERO(&s);
	CPU_SET(1, &s);
	if (fiber_setaffinity(sizeof(s), &s))
		return (void *)-1L;
	return (void *)(long)fiber_current_worker();
}

static void test_fiber_affinity_is_honoured(void **state)
{
	fiber_t f[8];
	fiber_attr_t a;
	cpu_set_t s;
	void *r;

	(void)state;
	assert_int_equal(start(4), 0);
	fiber_attr_init(&a);
	CPU_ZERO(&s);
	CPU_SET(2, &s);
	assert_int_equal(fiber_attr_setaffinity(&a, sizeof(s), &s), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(fiber_create(&f[i], &a, where, NULL), 0);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(fiber_join(f[i], &r), 0);
		assert_int_equal((long)r, 0);
	}
	for (int i = 0; i < 8; i++)
		assert_int_equal(fiber_create(&f[i], NULL, move_self, NULL), 0);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(fiber_join(f[i], &r), 0);
		assert_int_equal((long)r, 1);
	}
	CPU_ZERO(&s);
	CPU_SET(9, &s); /* no such worker */
	assert_int_equal(fiber_attr_setaffinity(&a, sizeof(s), &s), 0);
	assert_int_equal(fiber_create(&f[0], &a, where, NULL), EINVAL);
	assert_int_equal(fiber_shutdown(), 0);
}

static int dtor_calls;
static fiber_key_t key;

static void dtor(void *v)
{
	__atomic_add_fetch(&dtor_calls, (int)(long)v, __ATOMIC_RELAXED);
}

static void *use_key(void *arg)
{
	if (fiber_getspecific(key) != NULL)
		return (void *)1;
	if (fiber_setspecific(key, arg))
		return (void *)2;
	fiber_yield();
	return fiber_getspecific(key) == arg ? NULL : (void *)3;
}

static void test_fiber_keys_with_destructors(void **state)
{
	fiber_t f[10];
	void *r;

	(void)state;
	assert_int_equal(start(2), 0);
	assert_int_equal(fiber_key_create(&key, dtor), 0);
	for (long i = 0; i < 10; i++)
		assert_int_equal(
			fiber_create(&f[i], NULL, use_key, (void *)(i + 1)), 0);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(fiber_join(f[i], &r), 0);
		assert_null(r);
	}
	assert_int_equal(dtor_calls, 55);
	assert_int_equal(fiber_setspecific(key, NULL), EPERM);
	assert_int_equal(fiber_key_delete(key), 0);
	assert_int_equal(fiber_key_delete(key), EINVAL);
	assert_int_equal(fiber_shutdown(), 0);
}

/*
 * Key reuse.  A fiber sets a value under one key, then waits while main
 * deletes that key and makes a new one (which takes the same slot), and
 * reports what it sees through the old and the new key.
 */
static fiber_key_t old_key, new_key;
static fiber_sem_t key_made, key_seen;
static int new_dtor_calls;

static void new_dtor(void *v)
{
	(void)v;
	__atomic_add_fetch(&new_dtor_calls, 1, __ATOMIC_RELAXED);
}

struct key_view {
	void *old_value, *new_value;
	int set_old;
};

static void *hold_value(void *arg)
{
	struct key_view *kv = arg;
	static int x;

	if (fiber_setspecific(old_key, &x))
		return (void *)1;
	fiber_sem_post(&key_seen);
	fiber_sem_wait(&key_made);
	kv->new_value = fiber_getspecific(new_key);
	kv->old_value = fiber_getspecific(old_key);
	kv->set_old = fiber_setspecific(old_key, &x);
	return NULL;
}

/* Run hold_value in one fiber around a delete + create; its view of the
 * keys in @kv, with new_key still alive. */
static void key_made_again(struct key_view *kv)
{
	fiber_t f;
	void *r = NULL;

	memset(kv, 0, sizeof(*kv));
	new_dtor_calls = 0;
	assert_int_equal(fiber_sem_init(&key_made, 0), 0);
	assert_int_equal(fiber_sem_init(&key_seen, 0), 0);
	assert_int_equal(start(2), 0);
	assert_int_equal(fiber_key_create(&old_key, NULL), 0);
	assert_int_equal(fiber_create(&f, NULL, hold_value, kv), 0);
	fiber_sem_wait(&key_seen);
	assert_int_equal(fiber_key_delete(old_key), 0);
	assert_int_equal(fiber_key_create(&new_key, new_dtor), 0);
	fiber_sem_post(&key_made);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_null(r);
	assert_int_equal(fiber_shutdown(), 0);
}

/* POSIX: a new key reads NULL in every fiber, also where the slot it
 * reuses held a value. */
static void test_fiber_key_made_again_reads_null(void **state)
{
	struct key_view kv;

	(void)state;
	key_made_again(&kv);
	assert_null(kv.new_value);
	assert_int_equal(fiber_key_delete(new_key), 0);
}

/* The value set under the deleted key goes to no destructor at exit, in
 * particular not to the new key's. */
static void test_fiber_key_made_again_skips_old_value_at_exit(void **state)
{
	struct key_view kv;

	(void)state;
	key_made_again(&kv);
	assert_int_equal(new_dtor_calls, 0);
	assert_int_equal(fiber_key_delete(new_key), 0);
}

/* A deleted key stays invalid after its slot is reused. */
static void test_fiber_key_stale_handle_is_invalid(void **state)
{
	struct key_view kv;

	(void)state;
	key_made_again(&kv);
	assert_null(kv.old_value);
	assert_int_equal(kv.set_old, EINVAL);
	assert_int_equal(fiber_key_delete(old_key), EINVAL);
	assert_int_equal(fiber_key_delete(new_key), 0);
	assert_int_equal(fiber_key_delete(new_key), EINVAL);
}

/*
 * Stale handles.  A handle names one fiber: once that fiber is joined (or
 * detached and gone), the handle is stale, also after its descriptor was
 * reused for a new fiber or the runtime was restarted.  A stale handle
 * gives ESRCH from join and detach, NULL from fiber_name, 0 from fiber_id.
 */
static void assert_stale(fiber_t f)
{
	assert_int_equal(fiber_join(f, NULL), ESRCH);
	assert_int_equal(fiber_detach(f), ESRCH);
	assert_null(fiber_name(f));
	assert_int_equal(fiber_id(f), 0);
}

/* From main, which frees the descriptor of the fiber it joins: the
 * second join must not read it (ASan). */
static void test_fiber_join_joined_handle_gives_esrch(void **state)
{
	fiber_t f;

	(void)state;
	assert_int_equal(start(2), 0);
	assert_int_equal(fiber_create(&f, NULL, ret_arg, NULL), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(fiber_join(f, NULL), ESRCH);
	assert_int_equal(fiber_shutdown(), 0);
}

static void test_fiber_detach_joined_handle_gives_esrch(void **state)
{
	fiber_t f;

	(void)state;
	assert_int_equal(start(2), 0);
	assert_int_equal(fiber_create(&f, NULL, ret_arg, NULL), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(fiber_detach(f), ESRCH);
	assert_null(fiber_name(f));
	assert_int_equal(fiber_id(f), 0);
	assert_int_equal(fiber_shutdown(), 0);
}

static void test_fiber_handle_from_before_restart_gives_esrch(void **state)
{
	fiber_t f, g;
	void *r = NULL;

	(void)state;
	assert_int_equal(start(2), 0);
	assert_int_equal(fiber_create(&f, NULL, ret_arg, NULL), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(fiber_shutdown(), 0);
	assert_int_equal(start(2), 0);
	assert_stale(f);
	assert_int_equal(fiber_create(&g, NULL, ret_arg, (void *)3), 0);
	assert_stale(f);
	assert_int_equal(fiber_join(g, &r), 0);
	assert_ptr_equal(r, (void *)3);
	assert_int_equal(fiber_shutdown(), 0);
}

static void *self(void *arg)
{
	(void)arg;
	return fiber_self();
}

static void *name_and_park(void *arg)
{
	fiber_sem_wait(arg);
	return (void *)fiber_name(fiber_self());
}

/*
 * In a fiber, where the worker's descriptor cache gives the joined
 * fiber's descriptor to the next fiber at once: the old handle must not
 * reach the new fiber, which stays joinable by its own handle.
 */
static void *recycle(void *arg)
{
	fiber_attr_t a;
	fiber_sem_t sem;
	fiber_t f, g;
	void *r = NULL;
	long bad = 0;

	(void)arg;
	fiber_sem_init(&sem, 0);
	fiber_attr_init(&a);
	fiber_attr_setname(&a, "new");
	if (fiber_create(&f, NULL, self, NULL) || fiber_join(f, &r))
		return (void *)-1L;
	bad += r != f; /* fiber_self() is the creator's handle */
	if (fiber_create(&g, &a, name_and_park, &sem))
		return (void *)-1L;
	/* Detach first: joining g through f would wait for g for good. */
	bad += (fiber_detach(f) != ESRCH) << 1;
	bad += (fiber_join(f, NULL) != ESRCH) << 2;
	bad += (fiber_name(f) != NULL) << 3;
	bad += (fiber_id(f) != 0) << 4;
	bad += (fiber_id(g) == 0) << 5;
	fiber_sem_post(&sem);
	if (fiber_join(g, &r))
		return (void *)-1L;
	bad += (r == NULL || strcmp(r, "new") != 0) << 6;
	return (void *)bad;
}

static void
test_fiber_recycled_descriptor_keeps_new_fiber_joinable(void **state)
{
	fiber_t f;
	void *r = NULL;

	(void)state;
	assert_int_equal(start(1), 0);
	assert_int_equal(fiber_create(&f, NULL, recycle, NULL), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_int_equal((long)r, 0);
	assert_int_equal(fiber_shutdown(), 0);
}

/*
 * A creator fiber runs create + join cycles and publishes each joined
 * handle in a ring; a pthread probes the ring with join, detach, name and
 * id all the while.  Every probe must see a stale handle (and, under ASan,
 * touch no freed memory).
 */
#if defined(__SANITIZE_THREAD__)
#define PROBE_CYCLES 5000L
#else
#define PROBE_CYCLES 50000L
#endif
#define PROBE_RING 64

static struct {
	fiber_t ring[PROBE_RING];
	long published;
	int done;
	long probes, bad;
} probe;

static void *create_join_publish(void *arg)
{
	fiber_t f;

	(void)arg;
	for (long i = 0; i < PROBE_CYCLES; i++) {
		if (fiber_create(&f, NULL, ret_arg, NULL) ||
		    fiber_join(f, NULL))
			return (void *)-1L;
		__atomic_store_n(&probe.ring[i % PROBE_RING], f,
				 __ATOMIC_RELEASE);
		__atomic_store_n(&probe.published, i + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void probe_ring(void)
{
	long n = __atomic_load_n(&probe.published, __ATOMIC_ACQUIRE);

	for (long i = 0; i < PROBE_RING && i < n; i++) {
		fiber_t f = __atomic_load_n(&probe.ring[i], __ATOMIC_ACQUIRE);

		probe.bad += fiber_join(f, NULL) != ESRCH;
		probe.bad += fiber_detach(f) != ESRCH;
		probe.bad += fiber_name(f) != NULL;
		probe.bad += fiber_id(f) != 0;
		probe.probes++;
	}
}

static void *prober(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&probe.done, __ATOMIC_ACQUIRE))
		probe_ring();
	probe_ring();
	return NULL;
}

static void test_fiber_stale_handle_probes_during_create_join(void **state)
{
	pthread_t t;
	fiber_t f;
	void *r = NULL;

	(void)state;
	memset(&probe, 0, sizeof(probe));
	assert_int_equal(start(2), 0);
	assert_int_equal(pthread_create(&t, NULL, prober, NULL), 0);
	assert_int_equal(fiber_create(&f, NULL, create_join_publish, NULL), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	__atomic_store_n(&probe.done, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_null(r);
	assert_int_equal(probe.bad, 0);
	assert_true(probe.probes >= PROBE_RING);
	assert_int_equal(fiber_shutdown(), 0);
}

static void *spin_a_bit(void *arg)
{
	fiber_yield();
	return arg;
}

static void *pthread_joins_fiber(void *arg)
{
	fiber_t f;
	void *r = NULL;

	(void)arg;
	if (fiber_create(&f, NULL, spin_a_bit, (void *)99))
		return NULL;
	if (fiber_join(f, &r))
		return NULL;
	return r;
}

static void test_fiber_pthread_creates_and_joins(void **state)
{
	pthread_t t[4];
	void *r;

	(void)state;
	assert_int_equal(start(2), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL,
						pthread_joins_fiber, NULL),
				 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(t[i], &r), 0);
		assert_ptr_equal(r, (void *)99);
	}
	assert_int_equal(fiber_shutdown(), 0);
}

static long rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void *creator(void *arg)
{
	long n = (long)arg, sum = 0;

	for (long i = 0; i < n; i += 100) {
		fiber_t f[100];
		void *r;

		for (long j = 0; j < 100; j++)
			if (fiber_create(&f[j], NULL, ret_arg, (void *)1))
				return (void *)-1L;
		for (long j = 0; j < 100; j++) {
			fiber_join(f[j], &r);
			sum += (long)r;
		}
	}
	return (void *)sum;
}

/*
 * 1,000,000 fibers created and joined; memory stays bounded (caches).
 * Under TSan, whose per-fiber context makes each create+join cost about
 * 0.4 ms, 100,000: a leak of the 80,000 measured ones would still cost
 * at least 312 MiB of touched stack pages, over the 256 MiB allowed.
 */
#if defined(__SANITIZE_THREAD__)
#define MILLION_PER_CREATOR 40000L
#define MILLION_RSS_KIB (256 * 1024)
#else
#define MILLION_PER_CREATOR 490000L
#define MILLION_RSS_KIB (512 * 1024)
#endif
static void test_fiber_million_create_join_bounded_memory(void **state)
{
	fiber_t c[2];
	long before, after;
	void *r;

	(void)state;
	assert_int_equal(start(2), 0);
	assert_int_equal(fiber_create(&c[0], NULL, creator, (void *)20000L), 0);
	assert_int_equal(fiber_join(c[0], &r), 0);
	before = rss_kib();
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_create(&c[i], NULL, creator,
					      (void *)MILLION_PER_CREATOR),
				 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(fiber_join(c[i], &r), 0);
		assert_int_equal((long)r, MILLION_PER_CREATOR);
	}
	after = rss_kib();
	/* Caches are bounded.  A leak of the 980,000 fibers would cost at
	 * least one touched stack page each (> 3.8 GiB); 512 MiB leaves room
	 * for the sanitizers' quarantine. */
	if (after - before > MILLION_RSS_KIB)
		fail_msg("RSS grew from %ld to %ld KiB", before, after);
	assert_true(fiber_stats_counter("creates") >=
		    20000 + 2 * MILLION_PER_CREATOR);
	assert_int_equal(fiber_shutdown(), 0);
}

/*
 * The exit hand-off (sched/fiber.c): a child joined by a fiber of its own
 * worker switches straight to the joiner when it ends, two switches per
 * create + join and no trip through the idle loop.  On one worker every
 * join but those that meet a full runnext streak is handed off; a joiner
 * that is a foreign thread is not, nor one whose worker has other fibers
 * queued: a batch created before its joins runs back to back, and the
 * reap wakes the joiner behind the queue (FB_WF_QUEUE), so it finds the
 * whole batch done at its one wakeup per batch.
 */
#define HANDOFF_FIBERS 2000L
#define HANDOFF_BATCH 100L
static void *create_join_loop(void *arg)
{
	long n = (long)arg, batch = n < 0 ? HANDOFF_BATCH : 1, bad = 0;
	fiber_t f[HANDOFF_BATCH];

	n = n < 0 ? -n : n;
	for (long i = 0; i < n; i += batch) {
		void *r = NULL;

		for (long j = 0; j < batch; j++)
			if (fiber_create(&f[j], NULL, ret_arg,
					 (void *)(i + j + 1)))
				bad++;
		for (long j = 0; j < batch; j++)
			if (fiber_join(f[j], &r) || r != (void *)(i + j + 1))
				bad++;
	}
	return (void *)bad;
}

static void test_fiber_exit_hands_worker_to_joiner(void **state)
{
	long long handoffs, switches, parks;
	fiber_t f;
	void *r;

	(void)state;
	assert_int_equal(start(1), 0);
	fiber_stats_reset();
	assert_int_equal(fiber_create(&f, NULL, create_join_loop,
				      (void *)HANDOFF_FIBERS),
			 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_int_equal((long)r, 0);
	handoffs = fiber_stats_counter("exit_handoffs");
	switches = fiber_stats_counter("switches");
	/* At most one join in 32 meets the streak of 64 runnext hand-offs
	 * (a create and an exit each count one); the loop's own fiber is
	 * joined from this thread. */
	if (handoffs < HANDOFF_FIBERS - HANDOFF_FIBERS / 16 ||
	    handoffs > HANDOFF_FIBERS)
		fail_msg("%lld exit hand-offs for %ld joins", handoffs,
			 HANDOFF_FIBERS);
	if (switches > 2 * HANDOFF_FIBERS + HANDOFF_FIBERS / 8)
		fail_msg("%lld switches for %ld create + join", switches,
			 HANDOFF_FIBERS);
	/* A foreign joiner: the reap wakes it as before. */
	fiber_stats_reset();
	for (long i = 0; i < 100; i++) {
		assert_int_equal(fiber_create(&f, NULL, ret_arg, (void *)i), 0);
		assert_int_equal(fiber_join(f, &r), 0);
		assert_ptr_equal(r, (void *)i);
	}
	assert_int_equal(fiber_stats_counter("exit_handoffs"), 0);
	/* Batches: the children run back to back, and the joiner parks
	 * once a batch: a switch per child and two per batch. */
	fiber_stats_reset();
	assert_int_equal(fiber_create(&f, NULL, create_join_loop,
				      (void *)-HANDOFF_FIBERS),
			 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_int_equal((long)r, 0);
	switches = fiber_stats_counter("switches");
	parks = fiber_stats_counter("parks");
	if (parks > HANDOFF_FIBERS / HANDOFF_BATCH + 1)
		fail_msg("%lld parks of the joiner for %ld batches", parks,
			 HANDOFF_FIBERS / HANDOFF_BATCH);
	if (switches > HANDOFF_FIBERS + 2 * HANDOFF_FIBERS / HANDOFF_BATCH + 2)
		fail_msg("%lld switches for %ld create + join in batches",
			 switches, HANDOFF_FIBERS);
	assert_int_equal(fiber_shutdown(), 0);
}

/*
 * CREATE_AFFINE (doc/scheduler.md 1.4.6) on two workers of one LLC: a
 * fiber that creates and joins at once keeps its children on its own
 * worker, so a create + join costs no wakelist push, no remote enqueue
 * and no futex wake of the other, idle, worker; the children run where
 * the creator is.  A spawner that creates several fibers before it
 * blocks keeps only the first: the next ones are placed as before, and
 * the idle worker gets some.  A creator that yields instead of blocking
 * has its child placed at the yield.
 */
#define AFFINE_FIBERS 2000
static int child_worker[AFFINE_FIBERS];
static fiber_sem_t spawn_gate;

static void *note_worker(void *arg)
{
	__atomic_store_n(&child_worker[(long)arg], fiber_current_worker(),
			 __ATOMIC_RELEASE);
	return NULL;
}

static void *park_noting_worker(void *arg)
{
	child_worker[(long)arg] = fiber_current_worker();
	fiber_sem_wait(&spawn_gate);
	return NULL;
}

static void *affine_creator(void *arg)
{
	long n = (long)arg, bad = 0, here = fiber_current_worker();
	fiber_t f[8];

	if (n < 0) { /* create, then yield until the child ran */
		child_worker[0] = -1;
		if (fiber_create(&f[0], NULL, note_worker, (void *)0L))
			return (void *)1L;
		while (__atomic_load_n(&child_worker[0], __ATOMIC_ACQUIRE) < 0)
			fiber_yield();
		return (void *)(long)fiber_join(f[0], NULL);
	}
	if (n > 0) {
		for (long i = 0; i < n; i++)
			if (fiber_create(&f[0], NULL, note_worker, (void *)i) ||
			    fiber_join(f[0], NULL))
				bad++;
		for (long i = 0; i < n; i++)
			bad += child_worker[i] != here;
		return (void *)bad;
	}
	for (long i = 0; i < 8; i++)
		if (fiber_create(&f[i], NULL, park_noting_worker, (void *)i))
			bad++;
	for (long i = 0; i < 8; i++)
		fiber_sem_post(&spawn_gate);
	for (long i = 0; i < 8; i++)
		if (fiber_join(f[i], NULL))
			bad++;
	return (void *)bad;
}

static void test_fiber_create_affine_costs_no_wakeup(void **state)
{
	struct fiber_config c = { 0 };
	long long pushes, remote, futex;
	fiber_workerset_t w0;
	fiber_attr_t a;
	fiber_t f;
	void *r;

	(void)state;
	c.workers = 2;
	c.topology = "pack:1 l3:1 core:2 pu:1";
	assert_int_equal(fiber_init(&c), 0);
	assert_int_equal(fiber_sem_init(&spawn_gate, 0), 0);
	fiber_workerset_zero(&w0);
	fiber_workerset_add(&w0, 0);
	assert_int_equal(fiber_attr_init(&a), 0);
	assert_int_equal(fiber_attr_setaffinity(&a, sizeof(w0), &w0), 0);
	/* Let the start-up settle: worker 1 has nothing to run. */
	assert_int_equal(fiber_create(&f, &a, affine_creator, (void *)10L), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	fiber_stats_reset();
	assert_int_equal(fiber_create(&f, &a, affine_creator,
				      (void *)(long)AFFINE_FIBERS),
			 0);
	assert_int_equal(fiber_join(f, &r), 0);
	pushes = fiber_stats_counter("wakelist_pushes");
	remote = fiber_stats_counter("direct_enqueues");
	futex = fiber_stats_counter("futex_wakes");
	/* The foreign join of the creator is the one wake each way; a
	 * child waits in the creator's run queue, where the idle worker may
	 * steal it, once a millisecond at most, while it still polls. */
	if (fiber_stats_counter("create_affine") < AFFINE_FIBERS * 15 / 16 ||
	    (long)r > AFFINE_FIBERS / 16 ||
	    pushes + remote > 2 + AFFINE_FIBERS / 16 ||
	    futex > 2 + AFFINE_FIBERS / 16)
		fail_msg("%d create + join: %lld held, %ld away, %lld pushes, "
			 "%lld remote enqueues, %lld futex wakes",
			 AFFINE_FIBERS, fiber_stats_counter("create_affine"),
			 (long)r, pushes, remote, futex);
	/* The spawner: one kept (more if the idle worker steals from the
	 * creator's queue meanwhile), the rest spread. */
	fiber_stats_reset();
	assert_int_equal(fiber_create(&f, &a, affine_creator, (void *)0L), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_int_equal((long)r, 0);
	assert_true(fiber_stats_counter("create_affine") >= 1);
	assert_true(fiber_stats_counter("create_affine") < 8);
	for (int i = 0; i < 8; i++)
		r = child_worker[i] == 1 ? (void *)1 : r;
	assert_ptr_equal(r, (void *)1);
	/* A creator that yields is no creator that blocks: its child is
	 * placed at the yield, on the idle worker. */
	fiber_stats_reset();
	assert_int_equal(fiber_create(&f, &a, affine_creator, (void *)-1L), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_int_equal((long)r, 0);
	assert_int_equal(child_worker[0], 1);
	assert_true(fiber_stats_counter("create_placed") +
			    fiber_stats_counter("steals") >=
		    1);
	assert_int_equal(fiber_attr_destroy(&a), 0);
	assert_int_equal(fiber_shutdown(), 0);
}

/* Worker threads are named fiber-w0, fiber-w1..., the names top -H, perf
 * and gdb's "info threads" show. */
static void test_fiber_worker_threads_are_named(void **state)
{
	char path[sizeof("/proc/self/task//comm") + 256], comm[32];
	char seen[512] = "";
	struct dirent *e;
	FILE *f;
	DIR *d;

	(void)state;
	assert_int_equal(start(2), 0);
	d = opendir("/proc/self/task");
	assert_non_null(d);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f))
			strncat(seen, comm, sizeof(seen) - strlen(seen) - 1);
		fclose(f);
	}
	closedir(d);
	assert_int_equal(fiber_shutdown(), 0);
	if (!strstr(seen, "fiber-w0\n") || !strstr(seen, "fiber-w1\n"))
		fail_msg("thread names: %s", seen);
}

/* ---- ids ---- */

#define IDS_PER_MAKER 600 /* more than two of a worker's blocks of ids */

struct id_maker {
	uint64_t *ids; /* IDS_PER_MAKER */
	int worker;    /* where the maker must run */
	int bad;
};

static void *id_maker(void *arg)
{
	struct id_maker *m = arg;
	fiber_t f;

	for (int i = 0; i < IDS_PER_MAKER; i++) {
		if (fiber_current_worker() != m->worker ||
		    fiber_create(&f, NULL, ret_arg, NULL)) {
			m->bad++;
			return NULL;
		}
		m->ids[i] = fiber_id(f);
		if (fiber_join(f, NULL))
			m->bad++;
	}
	return NULL;
}

/* make_ids - @nr makers, maker k pinned to worker k, each creating
 * IDS_PER_MAKER fibers, and @foreign fibers created by this thread;
 * their ids go to @ids. */
static void make_ids(uint64_t *ids, int nr, int foreign)
{
	struct id_maker m[2] = { 0 };
	fiber_attr_t a;
	fiber_t f[2];
	cpu_set_t s;

	for (int k = 0; k < nr; k++) {
		m[k].ids = ids + k * IDS_PER_MAKER;
		m[k].worker = k;
		fiber_attr_init(&a);
		CPU_ZERO(&s);
		CPU_SET(k, &s);
		assert_int_equal(fiber_attr_setaffinity(&a, sizeof(s), &s), 0);
		assert_int_equal(fiber_create(&f[k], &a, id_maker, &m[k]), 0);
		fiber_attr_destroy(&a);
	}
	for (int i = 0; i < foreign; i++) {
		fiber_t g;

		assert_int_equal(fiber_create(&g, NULL, ret_arg, NULL), 0);
		ids[nr * IDS_PER_MAKER + i] = fiber_id(g);
		assert_int_equal(fiber_join(g, NULL), 0);
	}
	for (int k = 0; k < nr; k++) {
		assert_int_equal(fiber_join(f[k], NULL), 0);
		assert_int_equal(m[k].bad, 0);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Workers hand out ids from blocks of their own: fibers made on two
 * workers at once, by a foreign thread meanwhile, and by a worker of a
 * second runtime all get ids that are non-zero and all different. */
static void test_fiber_ids_unique_across_workers_and_runtimes(void **state)
{
	enum { FOREIGN = 50 };
	size_t n = 3 * IDS_PER_MAKER + FOREIGN;
	uint64_t *ids = calloc(n, sizeof(*ids));

	(void)state;
	assert_non_null(ids);
	assert_int_equal(start(2), 0);
	make_ids(ids, 2, FOREIGN);
	assert_int_equal(fiber_shutdown(), 0);
	assert_int_equal(start(1), 0);
	make_ids(ids + 2 * IDS_PER_MAKER + FOREIGN, 1, 0);
	assert_int_equal(fiber_shutdown(), 0);
	qsort(ids, n, sizeof(*ids), cmp_u64);
	assert_true(ids[0] != 0);
	for (size_t i = 1; i < n; i++)
		assert_true(ids[i] != ids[i - 1]);
	free(ids);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fiber_create_join_returns_value),
		cmocka_unit_test(test_fiber_exit_and_join_errors),
		cmocka_unit_test(test_fiber_yield_round_robin_on_one_worker),
		cmocka_unit_test(test_fiber_affinity_is_honoured),
		cmocka_unit_test(test_fiber_keys_with_destructors),
		TEST(test_fiber_key_made_again_reads_null),
		TEST(test_fiber_key_made_again_skips_old_value_at_exit),
		TEST(test_fiber_key_stale_handle_is_invalid),
		cmocka_unit_test(test_fiber_pthread_creates_and_joins),
		cmocka_unit_test(test_fiber_worker_threads_are_named),
		TEST(test_fiber_join_joined_handle_gives_esrch),
		TEST(test_fiber_detach_joined_handle_gives_esrch),
		TEST(test_fiber_handle_from_before_restart_gives_esrch),
		TEST(test_fiber_recycled_descriptor_keeps_new_fiber_joinable),
		TEST(test_fiber_stale_handle_probes_during_create_join),
		cmocka_unit_test(test_fiber_million_create_join_bounded_memory),
		TEST(test_fiber_exit_hands_worker_to_joiner),
		TEST(test_fiber_create_affine_costs_no_wakeup),
		TEST(test_fiber_ids_unique_across_workers_and_runtimes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
