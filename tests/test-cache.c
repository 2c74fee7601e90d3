/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-cache.c - what a fiber costs once the caches are warm: a burst of
 * fibers created and then joined takes its descriptors and stacks from the
 * per-worker caches and the pools behind them (sched/handle.c,
 * sched/stack.c), never from the allocator or the kernel; and a fiber
 * joined at once leaves its stack with its descriptor, so the next create
 * takes both from one cache.  White box: the allocator, the stack mapper
 * and the stack cache are counted through link-time wrappers
 * (tests/meson.build).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fiber.h"
#include "harness.h"
#include "sched/sched.h"
#include "sched/stack.h"

/* Counted while @counting: calls of the allocator behind descriptors, of
 * the stack mapper and of the stack cache. */
static atomic_bool counting;
static atomic_long nr_allocs, nr_maps, nr_cache_gets, nr_cache_puts;

void *__real_fb_aligned_alloc(size_t align, size_t size);
void *__wrap_fb_aligned_alloc(size_t align, size_t size);
int __real_fb_stack_map(struct fb_stack *s, size_t size, int node);
int __wrap_fb_stack_map(struct fb_stack *s, size_t size, int node);
bool __real_fb_stack_cache_get(struct fb_stack_cache *c, size_t size,
			       struct fb_stack *s);
bool __wrap_fb_stack_cache_get(struct fb_stack_cache *c, size_t size,
			       struct fb_stack *s);
void __real_fb_stack_cache_put(struct fb_stack_cache *c, struct fb_stack *s);
void __wrap_fb_stack_cache_put(struct fb_stack_cache *c, struct fb_stack *s);

void __wrap_fb_stack_cache_put(struct fb_stack_cache *c, struct fb_stack *s)
{
	if (atomic_load(&counting))
		atomic_fetch_add(&nr_cache_puts, 1);
	__real_fb_stack_cache_put(c, s);
}

bool __wrap_fb_stack_cache_get(struct fb_stack_cache *c, size_t size,
			       struct fb_stack *s)
{
	if (atomic_load(&counting))
		atomic_fetch_add(&nr_cache_gets, 1);
	return __real_fb_stack_cache_get(c, size, s);
}

void *__wrap_fb_aligned_alloc(size_t align, size_t size)
{
	if (atomic_load(&counting))
		atomic_fetch_add(&nr_allocs, 1);
	return __real_fb_aligned_alloc(align, size);
}

int __wrap_fb_stack_map(struct fb_stack *s, size_t size, int node)
{
	if (atomic_load(&counting))
		atomic_fetch_add(&nr_maps, 1);
	return __real_fb_stack_map(s, size, node);
}

/* A burst: more fibers than a worker's caches hold (64), fewer than the
 * pools keep for good (FB_POOL_KEEP, 1024); and one three times that. */
#define BURST 1000
#define BIG_BURST 3000
/* The trim period the trim tests set (fb_pool_trim_ns), for short
 * waits. */
#define TRIM_FAST_NS (20ull * 1000 * 1000)

static void *ret_arg(void *arg)
{
	return arg;
}

/* Create @n fibers, then join them; the number that failed. */
static long burst_of(long n)
{
	static fiber_t f[BIG_BURST];
	long bad = 0;
	void *r;

	for (long i = 0; i < n; i++)
		if (fiber_create(&f[i], NULL, ret_arg, (void *)i))
			bad++;
	for (long i = 0; i < n; i++)
		if (fiber_join(f[i], &r) || r != (void *)i)
			bad++;
	return bad;
}

static long burst(void)
{
	return burst_of(BURST);
}

static void *bursts(void *arg)
{
	long bad = burst(); /* warm */

	(void)arg;
	atomic_store(&counting, true);
	bad += burst();
	atomic_store(&counting, false);
	return (void *)bad;
}

/* Two big bursts, the second counted; @arg: the count of stacks and
 * descriptors pooled after the first, stored there. */
static void *big_bursts(void *arg)
{
	long bad = burst_of(BIG_BURST); /* warm */

	*(unsigned long *)arg = fb_stack_pool_nr() + fb_fiber_pool_nr();
	atomic_store(&counting, true);
	bad += burst_of(BIG_BURST);
	atomic_store(&counting, false);
	return (void *)bad;
}

/* Run @fn(@arg) in a fiber of a fresh one-worker runtime, which it
 * leaves running; @fn returns how many of its checks failed. */
static void run_fiber(void *(*fn)(void *), void *arg)
{
	fiber_t f;
	void *r;

	runtime_start(1);
	assert_int_equal(fiber_create(&f, NULL, fn, arg), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_int_equal((long)r, 0);
}

/* Run @fn(@arg) in a fiber of the running runtime and join it. */
static void run_in(void *(*fn)(void *), void *arg)
{
	fiber_t f;

	assert_int_equal(fiber_create(&f, NULL, fn, arg), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
}

static void test_cache_warm_burst_allocates_nothing(void **state)
{
	(void)state;
	run_fiber(bursts, NULL);
	runtime_stop();
	if (atomic_load(&nr_allocs) || atomic_load(&nr_maps))
		fail_msg("a warm burst of %d fibers: %ld allocations, %ld "
			 "stacks mapped",
			 BURST, atomic_load(&nr_allocs), atomic_load(&nr_maps));
}

/* assert_stacks_stay_put - run @fn in a fresh one-worker runtime: the
 * creates it counts map no stack and take none from the stack cache, and
 * no fiber gives its stack to that cache. */
static void assert_stacks_stay_put(void *(*fn)(void *))
{
	atomic_store(&nr_cache_gets, 0);
	atomic_store(&nr_cache_puts, 0);
	atomic_store(&nr_maps, 0);
	run_fiber(fn, NULL);
	runtime_stop();
	assert_int_equal(atomic_load(&nr_maps), 0);
	assert_int_equal(atomic_load(&nr_cache_gets), 0);
	assert_int_equal(atomic_load(&nr_cache_puts), 0);
}

/* One at a time, each joined at once: the descriptor the join releases
 * brings the stack to the next create. */
static void *one_at_a_time(void *arg)
{
	long bad = 0;
	fiber_t f;
	void *r;

	(void)arg;
	for (long i = 0; i < 100; i++) {
		if (i == 2) /* warm */
			atomic_store(&counting, true);
		if (fiber_create(&f, NULL, ret_arg, (void *)i) ||
		    fiber_join(f, &r) || r != (void *)i)
			bad++;
	}
	atomic_store(&counting, false);
	return (void *)bad;
}

/* A burst whose fibers exit before they are joined, as those of a batch
 * joined in turn do, counted after a warm one: the exited fibers keep
 * their stacks until the joins, which bring them to the next creates with
 * their descriptors, so the stack cache sees none of them. */
static void test_cache_unjoined_fibers_keep_their_stacks(void **state)
{
	(void)state;
	assert_stacks_stay_put(bursts);
}

/* Two bursts of 3,000 counted, after a warm one.  In each, the first
 * fiber's joiner waits for it, and of the 2,999 that exit before their
 * joins, the first FB_KEPT_STACKS_MAX keep their stacks and the others
 * give them to the stack cache; the joins take the kept ones off the
 * count, so the second burst keeps as many as the first. */
static void *big_bursts_kept(void *arg)
{
	long bad = burst_of(BIG_BURST), *puts = arg; /* warm */

	for (int i = 0; i < 2; i++) {
		atomic_store(&nr_cache_puts, 0);
		atomic_store(&counting, true);
		bad += burst_of(BIG_BURST);
		atomic_store(&counting, false);
		puts[i] = atomic_load(&nr_cache_puts);
	}
	return (void *)bad;
}

static void test_cache_kept_stacks_are_bounded(void **state)
{
	long puts[2];

	(void)state;
	run_fiber(big_bursts_kept, puts);
	runtime_stop();
	assert_int_equal(puts[0], BIG_BURST - 1 - FB_KEPT_STACKS_MAX);
	assert_int_equal(puts[1], BIG_BURST - 1 - FB_KEPT_STACKS_MAX);
}

/* The bound per worker: FB_KEPT_STACKS_MAX up to eight workers, then
 * FB_KEPT_STACKS_TOTAL shared, down to 8 each for the most workers. */
static void test_cache_kept_stacks_bound_per_worker(void **state)
{
	(void)state;
	assert_int_equal(fb_kept_stacks_max(1), 1024);
	assert_int_equal(fb_kept_stacks_max(8), 1024);
	assert_int_equal(fb_kept_stacks_max(16), 512);
	assert_int_equal(fb_kept_stacks_max(64), 128);
	assert_int_equal(fb_kept_stacks_max(FIBER_WORKERS_MAX), 8);
	assert_true(fb_kept_stacks_max(FIBER_WORKERS_MAX) * FIBER_WORKERS_MAX <=
		    FB_KEPT_STACKS_TOTAL);
}

/* Fibers that exit on worker 1 unjoined and are joined elsewhere: by a
 * fiber on worker 0, or by a thread that is not a worker.  Bursts of
 * CROSS_BURST, CROSS_ROUNDS of each: the remote joins take the kept
 * stacks off worker 1's count (atomically), so it never reaches
 * FB_KEPT_STACKS_MAX and no exited fiber gives its stack to a cache;
 * joins that did not would fill it by the third burst. */
#define CROSS_BURST 500
#define CROSS_ROUNDS 4
/* The burst of test_cache_kept_stacks_shared_by_workers, and the most
 * pinned_burst() makes. */
#define SHARED_BURST 1000
static atomic_long nr_exited;

static void *count_exit(void *arg)
{
	atomic_fetch_add(&nr_exited, 1);
	return arg;
}

/* pinned_burst - @n (at most SHARED_BURST) fibers on worker @worker,
 * joined by the caller once they have all exited; the number of failed
 * checks. */
static long pinned_burst(int worker, long n)
{
	static fiber_t f[SHARED_BURST];
	fiber_attr_t a;
	cpu_set_t set;
	long bad = 0;
	void *r;

	fiber_attr_init(&a);
	CPU_ZERO(&set);
	CPU_SET(worker, &set);
	assert_int_equal(fiber_attr_setaffinity(&a, sizeof(set), &set), 0);
	atomic_store(&nr_exited, 0);
	for (long i = 0; i < n; i++)
		if (fiber_create(&f[i], &a, count_exit, (void *)i))
			bad++;
	fiber_attr_destroy(&a);
	while (atomic_load(&nr_exited) < n - bad)
		if (fiber_yield() == EPERM) /* not a fiber */
			usleep(1000);
	for (long i = 0; i < n; i++)
		if (fiber_join(f[i], &r) || r != (void *)i)
			bad++;
	return bad;
}

static void *cross_bursts(void *arg)
{
	long bad = 0;

	(void)arg;
	for (int i = 0; i < CROSS_ROUNDS; i++)
		bad += pinned_burst(1, CROSS_BURST);
	return (void *)bad;
}

static void test_cache_remote_joins_uncount_kept_stacks(void **state)
{
	fiber_attr_t a;
	cpu_set_t set;
	fiber_t f;
	void *r;

	(void)state;
	runtime_start(2);
	atomic_store(&nr_cache_puts, 0);
	atomic_store(&counting, true);
	fiber_attr_init(&a);
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	assert_int_equal(fiber_attr_setaffinity(&a, sizeof(set), &set), 0);
	assert_int_equal(fiber_create(&f, &a, cross_bursts, NULL), 0);
	fiber_attr_destroy(&a);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_int_equal((long)r, 0);
	assert_int_equal((long)cross_bursts(NULL), 0);
	atomic_store(&counting, false);
	runtime_stop();
	assert_int_equal(atomic_load(&nr_cache_puts), 0);
}

/* A runtime of 16 workers: 1,000 fibers that exit on worker 0 before a
 * fiber there joins them keep 512 stacks, and the other 488 give theirs
 * to the cache. */
static void *burst_kept(void *arg)
{
	long bad;

	atomic_store(&nr_cache_puts, 0);
	atomic_store(&counting, true);
	bad = pinned_burst(0, SHARED_BURST);
	atomic_store(&counting, false);
	*(long *)arg = atomic_load(&nr_cache_puts);
	return (void *)bad;
}

static void test_cache_kept_stacks_shared_by_workers(void **state)
{
	fiber_attr_t a;
	cpu_set_t set;
	long puts = -1;
	fiber_t f;
	void *r;

	(void)state;
	runtime_start(16);
	fiber_attr_init(&a);
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	assert_int_equal(fiber_attr_setaffinity(&a, sizeof(set), &set), 0);
	assert_int_equal(fiber_create(&f, &a, burst_kept, &puts), 0);
	fiber_attr_destroy(&a);
	assert_int_equal(fiber_join(f, &r), 0);
	runtime_stop();
	assert_int_equal((long)r, 0);
	assert_int_equal(puts, SHARED_BURST - fb_kept_stacks_max(16));
}

static void test_cache_joined_fiber_leaves_its_stack(void **state)
{
	(void)state;
	assert_stacks_stay_put(one_at_a_time);
}

/* A burst three times what the pools keep for good: the pools grew with
 * the first, so the second maps no stack and allocates no descriptor
 * (with pools of a fixed 1024 it mapped and unmapped 2000 stacks). */
static void test_cache_warm_big_burst_maps_nothing(void **state)
{
	unsigned long pooled = 0;

	(void)state;
	atomic_store(&nr_allocs, 0);
	atomic_store(&nr_maps, 0);
	/* No trim meanwhile: under a sanitizer the bursts take seconds, and
	 * a trim between them would rightly give back what sat unused. */
	fb_pool_trim_ns = UINT64_MAX / 4;
	run_fiber(big_bursts, &pooled);
	runtime_stop();
	fb_pool_trim_ns = FB_POOL_TRIM_NS;
	if (atomic_load(&nr_allocs) || atomic_load(&nr_maps))
		fail_msg("a warm burst of %d fibers: %ld allocations, %ld "
			 "stacks mapped",
			 BIG_BURST, atomic_load(&nr_allocs),
			 atomic_load(&nr_maps));
	/* What the caches (64 each) cannot hold waits in the pools. */
	assert_true(pooled >= BIG_BURST - 2 * 64);
}

/* The trim's arithmetic (sched/stack.h), at exact times and counts. */
static void test_pool_trim_count_halves_the_idle_surplus(void **state)
{
	struct fb_pool_trim t = { 0 };
	const uint64_t p = fb_pool_trim_ns;
	unsigned int n, total;

	(void)state;
	/* The first look starts a period: nothing known to be idle yet. */
	assert_int_equal(fb_pool_trim_count(&t, 3000, 5, FB_POOL_TRIM_BATCH),
			 0);
	assert_int_equal(t.low, 3000);
	assert_int_equal(t.next, 5 + p);
	/* Nothing to give back: the next look that can is the period's. */
	assert_true(fb_pool_trim_early(&t, 4 + p));
	assert_false(fb_pool_trim_early(&t, 5 + p));
	assert_int_equal(fb_pool_trim_at(&t, 3000), 5 + p);
	assert_int_equal(fb_pool_trim_at(&t, FB_POOL_KEEP), 0);
	/* Within the period: nothing, whatever the count. */
	assert_int_equal(
		fb_pool_trim_count(&t, 3000, 4 + p, FB_POOL_TRIM_BATCH), 0);
	/* A take lowers the mark: 2500 sat idle through the period. */
	fb_pool_trim_seen(&t, 2500);
	fb_pool_trim_seen(&t, 2800); /* a spill does not raise it */
	assert_int_equal(t.low, 2500);
	/* The next period gives back half of 2500 - 1024, rounded up: 738,
	 * FB_POOL_TRIM_BATCH (128) at a time. */
	total = 0;
	n = 2800;
	for (int i = 0; i < 5; i++) {
		unsigned int k =
			fb_pool_trim_count(&t, n, 5 + p, FB_POOL_TRIM_BATCH);

		assert_int_equal(k, FB_POOL_TRIM_BATCH);
		/* More is left in this period: due again at once. */
		assert_false(fb_pool_trim_early(&t, 5 + p));
		n -= k;
		total += k;
	}
	assert_int_equal(fb_pool_trim_count(&t, n, 5 + p, FB_POOL_TRIM_BATCH),
			 738 - total);
	n -= 738 - total;
	assert_int_equal(n, 2800 - 738);
	assert_int_equal(t.left, 0);
	assert_int_equal(fb_pool_trim_count(&t, n, 5 + p, FB_POOL_TRIM_BATCH),
			 0);
	assert_int_equal(t.low, 2800);
	/* Never below FB_POOL_KEEP: a pool taken down to 1100 in the
	 * meantime gives back 76 of a due 100, then nothing. */
	t = (struct fb_pool_trim){ .low = 1224, .next = 0 };
	assert_int_equal(fb_pool_trim_count(&t, 1100, 1, FB_POOL_TRIM_BATCH),
			 76);
	assert_int_equal(fb_pool_trim_count(&t, 1024, 1, FB_POOL_TRIM_BATCH),
			 0);
	assert_int_equal(t.left, 0);
	/* A pool at or below the mark has no surplus. */
	t = (struct fb_pool_trim){ .low = 1024, .next = 0 };
	assert_int_equal(fb_pool_trim_count(&t, 1024, 1, FB_POOL_TRIM_BATCH),
			 0);
	assert_int_equal(t.left, 0);
}

/* After a big burst, an idle runtime gives the surplus back: its workers
 * sleep with the next trim as a deadline.  Outcomes only: the pools
 * shrink, and never below what they keep for good. */
static void test_cache_idle_runtime_trims_a_burst(void **state)
{
	unsigned long pooled = 0, now_pooled = 0;

	(void)state;
	fb_pool_trim_ns = TRIM_FAST_NS;
	run_fiber(big_bursts, &pooled);
	/* Wait up to 20 s for the first trims (periods of 20 ms). */
	for (int i = 0; i < 400; i++) {
		now_pooled = fb_stack_pool_nr() + fb_fiber_pool_nr();
		if (now_pooled < pooled)
			break;
		usleep(50 * 1000);
	}
	assert_true(now_pooled < pooled);
	assert_true(fb_stack_pool_nr() >= FB_POOL_KEEP ||
		    fb_fiber_pool_nr() >= FB_POOL_KEEP);
	runtime_stop();
	fb_pool_trim_ns = FB_POOL_TRIM_NS;
}

/* Keeps the worker busy (it never sleeps) until the pools hold fewer
 * than *@arg, or 20 s pass; then stores what they hold in *@arg. */
static void *busy_until_trimmed(void *arg)
{
	unsigned long *pooled = arg, now = *pooled;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		fiber_yield();
		now = fb_stack_pool_nr() + fb_fiber_pool_nr();
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (now >= *pooled && t.tv_sec - t0.tv_sec < 20);
	*pooled = now;
	return NULL;
}

/* A runtime whose workers never idle gives a burst's surplus back too:
 * the monitor thread trims while workers are busy. */
static void test_cache_busy_runtime_trims_a_burst(void **state)
{
	unsigned long pooled = 0, after;

	(void)state;
	fb_pool_trim_ns = TRIM_FAST_NS; /* so that the spin is short */
	run_fiber(big_bursts, &pooled);
	after = pooled;
	run_in(busy_until_trimmed, &after);
	assert_true(after < pooled);
	assert_true(fb_stack_pool_nr() >= FB_POOL_KEEP ||
		    fb_fiber_pool_nr() >= FB_POOL_KEEP);
	runtime_stop();
	fb_pool_trim_ns = FB_POOL_TRIM_NS;
}

/*
 * Stacks of one size are mappings (slots) of one size, so their tops
 * would share one cache set; sched/stack.c spreads them with an odd page
 * count and a colour.  64 stacks in a row, guarded and then from slabs:
 * each keeps at least the size asked for, below a 64-byte aligned top,
 * all of it writable, and the tops' lines fall on many L1 sets (the
 * colours).  A guarded stack's mapping spans an odd number of pages.
 * The slabs are of a size no other test uses, so that their slots are
 * carved in a row from one new slab: there the tops also fall on many
 * lines modulo 64 KiB (an L2 way of many cores), which the odd stride
 * gives.  (Guarded mappings land wherever the address space has room,
 * so that count is left to chance for them.)  The size, 252 KiB, makes
 * a slot and its colour page 64 pages, and with the guard a mapping 128:
 * both need the page that makes them odd.  Without the spreading the
 * counts are 1.
 */
#define SPREAD_STACKS 64
#define SPREAD_SIZE (252 * 1024)
static void spread_check(bool guarded)
{
	struct fb_stack s[SPREAD_STACKS];
	bool l1[64] = { false }, l2[1024] = { false };
	int nl1 = 0, nl2 = 0;
	size_t want = SPREAD_SIZE;
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);

	fb_stack_set_guarded(guarded);
	for (int i = 0; i < SPREAD_STACKS; i++) {
		char *top, *low;
		uintptr_t line;

		memset(&s[i], 0, sizeof(s[i]));
		assert_int_equal(fb_stack_map(&s[i], want, -1), 0);
		top = fb_stack_top(&s[i]);
		low = top - s[i].size;
		assert_true(s[i].size >= want);
		assert_int_equal((uintptr_t)top % FB_CACHELINE, 0);
		low[0] = 1; /* the whole stack is writable */
		top[-1] = 1;
		if (guarded) {
			assert_true(fb_stack_guard_contains(&s[i], low - 1));
			assert_false(fb_stack_guard_contains(&s[i], low));
			/* map_len is the mapping's length less the
			 * colour, which is under a page */
			assert_int_equal((s[i].map_len + ps - 1) / ps % 2, 1);
		}
		line = ((uintptr_t)top - FB_CACHELINE) / FB_CACHELINE;
		nl1 += !l1[line % 64];
		l1[line % 64] = true;
		nl2 += !l2[line % 1024];
		l2[line % 1024] = true;
	}
	for (int i = 0; i < SPREAD_STACKS; i++)
		fb_stack_unmap(&s[i]);
	fb_stack_set_guarded(true);
	print_message("# %s: %d L1 sets, %d lines modulo 64 KiB\n",
		      guarded ? "guarded" : "slabs", nl1, nl2);
	assert_true(nl1 >= 16);
	if (!guarded)
		assert_true(nl2 >= 48);
}

static void test_stack_tops_are_spread_over_cache_sets(void **state)
{
	(void)state;
	spread_check(true);
	spread_check(false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_cache_warm_burst_allocates_nothing),
		TEST(test_cache_warm_big_burst_maps_nothing),
		TEST(test_pool_trim_count_halves_the_idle_surplus),
		TEST(test_cache_idle_runtime_trims_a_burst),
		TEST(test_cache_busy_runtime_trims_a_burst),
		TEST(test_cache_joined_fiber_leaves_its_stack),
		TEST(test_cache_unjoined_fibers_keep_their_stacks),
		TEST(test_cache_kept_stacks_are_bounded),
		TEST(test_cache_remote_joins_uncount_kept_stacks),
		TEST(test_cache_kept_stacks_bound_per_worker),
		TEST(test_cache_kept_stacks_shared_by_workers),
		TEST(test_stack_tops_are_spread_over_cache_sets),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
