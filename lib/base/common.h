/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * base/common.h - small things every layer uses: assertions, cache-line layout,
 * the allocation wrappers (with the fault-injection hook of the tests) and
 * the spinlock that protects run queues and wait lists.
 */
#ifndef FB_COMMON_H
#define FB_COMMON_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/atomic.h"

#define FB_CACHELINE 64
#define fb_cacheline_aligned __attribute__((aligned(FB_CACHELINE)))
#define fb_likely(x) __builtin_expect(!!(x), 1)
#define fb_unlikely(x) __builtin_expect(!!(x), 0)
#define fb_noinline __attribute__((noinline))
#define fb_always_inline inline __attribute__((always_inline))
/* On the declaration of a variable the hot paths read: the library's own
 * (it is built with hidden visibility), so it is addressed directly, not
 * through the GOT. */
#define FB_HIDDEN __attribute__((visibility("hidden")))
#define fb_unused __attribute__((unused))
#define FB_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define fb_container_of(ptr, type, member)                                     \
	((type *)((char *)(ptr)-offsetof(type, member)))
#define FB_MIN(a, b) ((a) < (b) ? (a) : (b))
#define FB_MAX(a, b) ((a) > (b) ? (a) : (b))

/* fb_die - print "libfiber: file:line: what" and abort.  For broken
 * invariants (bugs), never for errors a caller can cause. */
void fb_die(const char *file, int line, const char *what)
	__attribute__((noreturn, cold));
#define FB_BUG_ON(cond)                                                        \
	do {                                                                   \
		if (fb_unlikely(cond))                                         \
			fb_die(__FILE__, __LINE__, #cond);                     \
	} while (0)
#ifdef FB_DEBUG_CHECKS
#define FB_ASSERT(cond) FB_BUG_ON(!(cond))
#else
#define FB_ASSERT(cond) ((void)0)
#endif

/*
 * Allocation.  Every allocation and stack mapping of the library goes
 * through these so that the tests can make the Nth one fail
 * (fb_fault_fail_nth) and check that the caller returns ENOMEM/EAGAIN and
 * leaks nothing.
 */
void *fb_malloc(size_t size);
void *fb_calloc(size_t n, size_t size);
void *fb_aligned_alloc(size_t align, size_t size);
void fb_free(void *p);
/* Returns true when the current allocation should fail (test hook). */
bool fb_fault_should_fail(void);
/* The allocations left before the one that fails; 0: none (base/common.c). */
extern _Atomic long fb_fail_countdown;
/* True while a failure is pending: caches step aside so that the
 * allocation they would save can fail (test hook; one relaxed load, inline
 * because fiber_create asks twice). */
static inline bool fb_fault_armed(void)
{
	return fb_unlikely(fb_load_relaxed(&fb_fail_countdown) > 0);
}
/* fb_fault_fail_nth - make the @n-th allocation from now fail (0 disables).
 * Test use only; exported to the internal library. */
void fb_fault_fail_nth(long n);

/*
 * A test-and-test-and-set spinlock.  Held only for a few dozen instructions
 * (run-queue and wait-list updates), never across a context switch except
 * where a function's contract says it releases it after the switch.
 */
struct fb_spinlock {
	atomic_uint locked; /* 0 free, 1 held */
};

static inline bool fb_spin_trylock(struct fb_spinlock *l)
{
	return fb_load_relaxed(&l->locked) == 0 &&
	       atomic_exchange_explicit(&l->locked, 1, memory_order_acquire) ==
		       0;
}

void fb_spin_lock_slow(struct fb_spinlock *l);

/* fb_spin_lock_once - fb_spin_lock()'s first try alone: one exchange.
 * Return: true if it took @l; false if @l was held (nothing changed),
 * for a caller that then goes its slow way with fb_spin_lock(). */
static inline bool fb_spin_lock_once(struct fb_spinlock *l)
{
	return atomic_exchange_explicit(&l->locked, 1, memory_order_acquire) ==
	       0;
}

static inline void fb_spin_lock(struct fb_spinlock *l)
{
	if (fb_likely(atomic_exchange_explicit(&l->locked, 1,
					       memory_order_acquire) == 0))
		return;
	fb_spin_lock_slow(l);
}

static inline void fb_spin_unlock(struct fb_spinlock *l)
{
	atomic_store_explicit(&l->locked, 0, memory_order_release);
}

/*
 * fb_escape - copy @n bytes of @src to @dst (room for @len bytes, always
 * NUL-terminated) with every byte outside printable ASCII, the double
 * quote and the backslash written as \xNN, \" and \\, so that a name
 * prints as one unambiguous line.  Returns the length written.
 * Async-signal-safe.  A @len of 4 * @n + 1 always suffices.
 */
size_t fb_escape(char *dst, size_t len, const char *src, size_t n);

/*
 * fb_nopipe_begin, fb_nopipe_end - around writes to a descriptor that may
 * be a pipe or socket whose reader left, so that they fail with EPIPE and
 * no SIGPIPE reaches the process: the calling thread blocks SIGPIPE
 * meanwhile, and one that the writes raised is taken back; one pending
 * before is left alone.  The process's disposition is not touched.
 * Context: any thread (the workers block SIGPIPE for good, sched/idle.c).
 */
struct fb_nopipe {
	sigset_t old;
	bool had;
};
void fb_nopipe_begin(struct fb_nopipe *s);
void fb_nopipe_end(const struct fb_nopipe *s);

/*
 * fb_open_output - open @path, named by variable @var, for writing,
 * created or truncated, close-on-exec, for a file the application names
 * in a variable (LIBFIBER_STATS_FILE, LIBFIBER_TRACE).  A FIFO that
 * nobody reads fails at once with ENXIO instead of blocking the caller
 * (fiber_init()) until someone does; writes to what it opens block as
 * usual.  On failure it prints the error, naming @var, @path and what is
 * expected.
 * Return: the descriptor, or -1 (the message printed).
 */
int fb_open_output(const char *var, const char *path);

/* The three moments of a pthread_atfork() handler, for the per-module
 * hooks that sched/runtime.c calls. */
enum { FB_ATFORK_PREPARE, FB_ATFORK_PARENT, FB_ATFORK_CHILD };

/* Monotonic clock in nanoseconds (vDSO clock_gettime: no system call). */
uint64_t fb_now_ns(void);
/* The same at tick resolution (CLOCK_MONOTONIC_COARSE, a few ns to read);
 * for once-a-second decays on the wake path. */
uint64_t fb_now_coarse_ns(void);

/* futex helpers on a 32-bit word, process private. */
int fb_futex_wait(atomic_uint *word, unsigned int expected,
		  const struct timespec *rel);
int fb_futex_wake(atomic_uint *word, int nr);

/*
 * Scheduler features (lib/base/features.h).  Code asks fb_feat(NAME); a misspelt
 * name does not compile.  The mask is global, written by the parser and
 * fiber_sched_features_set(), read relaxed everywhere.
 */
enum fb_feat {
#define FB_FEAT(name, def) FB_FEAT_##name,
#include "base/features.h"
#undef FB_FEAT
	FB_FEAT_NR
};
extern _Atomic uint64_t fb_features_mask;
#define fb_feat(name)                                                          \
	((fb_load_relaxed(&fb_features_mask) >> FB_FEAT_##name) & 1)
#define FB_FEAT_BIT(name) (UINT64_C(1) << FB_FEAT_##name)
uint64_t fb_features_default(void);
const char *fb_feature_name(int feat);
/* fb_feature_lookup - the feature named by the @len bytes at @word, or -1. */
int fb_feature_lookup(const char *word, size_t len);
/*
 * fb_features_parse - apply a LIBFIBER_SCHED_FEATURES string to @base.
 * Names are separated by spaces or commas; NAME sets, NO_NAME clears.
 * Return: 0 and *@out; EINVAL with a message in @err naming @var (where
 * @spec came from: the variable, the fiber_config field or the call's
 * argument), the bad word and the accepted names (*@out untouched).
 */
int fb_features_parse(const char *var, const char *spec, uint64_t base,
		      uint64_t *out, char *err, size_t errlen);

#endif /* FB_COMMON_H */
