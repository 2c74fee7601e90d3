/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * base/sanitizer.h - telling the sanitizers and valgrind about fibers.
 *
 * ASan keeps a notion of "the current stack"; without the switch calls it
 * takes a switch for a huge stack overflow and reports nonsense.  TSan keeps
 * a clock and a shadow call stack per thread; its fiber API gives each fiber
 * its own, and a switch with flags 0 orders everything before it on the
 * worker before everything after it (the worker really is sequential).
 * Valgrind must be told which memory is a stack, or it takes every switch
 * for a wild change of the stack pointer.
 *
 * Every wrapper compiles to nothing unless the library is built with
 * -Db_sanitize=address, -Db_sanitize=thread or -Dvalgrind=true.
 */
#ifndef FB_SANITIZER_H
#define FB_SANITIZER_H

#include <stddef.h>

#ifndef FB_HAVE_VALGRIND
#define FB_HAVE_VALGRIND 0
#endif
#if FB_HAVE_VALGRIND
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define FB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FB_ASAN 1
#endif
#endif

#ifdef FB_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>

/* Before a switch to the stack [bottom, bottom + size).  @fake is where
 * the leaving context keeps its fake-stack handle; NULL when it is leaving
 * for good (a dead fiber), so that ASan frees it. */
static inline void fb_san_start_switch(void **fake, const void *bottom,
				       size_t size)
{
	__sanitizer_start_switch_fiber(fake, bottom, size);
}

/* First thing after a switch, in the context that resumed. */
static inline void fb_san_finish_switch(void *fake)
{
	__sanitizer_finish_switch_fiber(fake, NULL, NULL);
}
#else
static inline void fb_san_start_switch(void **fake, const void *bottom,
				       size_t size)
{
	(void)fake;
	(void)bottom;
	(void)size;
}

static inline void fb_san_finish_switch(void *fake)
{
	(void)fake;
}
#endif

/*
 * fb_san_unpoison - a reused stack still carries what the tools recorded
 * of its last user: ASan's poisoned redzones of its frames, and valgrind's
 * "no access" below each stack pointer it had.  Clear both before a new
 * fiber's first frame is laid on it.
 */
static inline void fb_san_unpoison(void *addr, size_t size)
{
#ifdef FB_ASAN
	ASAN_UNPOISON_MEMORY_REGION(addr, size);
#endif
#if FB_HAVE_VALGRIND
	VALGRIND_MAKE_MEM_UNDEFINED(addr, size);
#endif
	(void)addr;
	(void)size;
}

#if defined(__SANITIZE_THREAD__)
#define FB_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FB_TSAN 1
#endif
#endif

/* What the tools know about one fiber; lives in struct fb_fiber, zeroed
 * with it.  Written by the creator and the reaper only. */
struct fb_san_fiber {
	void *tsan;	       /* TSan fiber context */
	unsigned int vg_stack; /* valgrind stack id */
};

#ifdef FB_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* fb_san_fiber_create - a new fiber will run on [@lo, @lo + @size). */
static inline void fb_san_fiber_create(struct fb_san_fiber *sf, void *lo,
				       size_t size)
{
#ifdef FB_TSAN
	sf->tsan = __tsan_create_fiber(0);
#endif
#if FB_HAVE_VALGRIND
	sf->vg_stack = VALGRIND_STACK_REGISTER(lo, (char *)lo + size);
#endif
	(void)sf;
	(void)lo;
	(void)size;
}

/* fb_san_fiber_destroy - the fiber is dead and no longer current. */
static inline void fb_san_fiber_destroy(struct fb_san_fiber *sf)
{
#ifdef FB_TSAN
	if (sf->tsan)
		__tsan_destroy_fiber(sf->tsan);
	sf->tsan = NULL;
#endif
#if FB_HAVE_VALGRIND
	VALGRIND_STACK_DEREGISTER(sf->vg_stack);
#endif
	(void)sf;
}

/* fb_san_thread_context - the TSan context of the calling thread itself
 * (a worker's idle loop); NULL when TSan is off. */
static inline void *fb_san_thread_context(void)
{
#ifdef FB_TSAN
	return __tsan_get_current_fiber();
#else
	return NULL;
#endif
}

/*
 * fb_san_release, fb_san_acquire - tell TSan that everything before a
 * release on @addr happens before everything after a later acquire on it,
 * for ordering it cannot see: liburcu's grace period (membarrier and
 * accesses inside the uninstrumented library).  Releases from several
 * threads accumulate.  No-ops without TSan.
 */
static inline void fb_san_release(void *addr)
{
#ifdef FB_TSAN
	__tsan_release(addr);
#endif
	(void)addr;
}

static inline void fb_san_acquire(void *addr)
{
#ifdef FB_TSAN
	__tsan_acquire(addr);
#endif
	(void)addr;
}

/* fb_san_tsan_switch - immediately before a switch to the context @tsan
 * (a fiber's, or a worker's idle one).  No instrumented code may run
 * between this and the switch itself. */
static inline void fb_san_tsan_switch(void *tsan)
{
#ifdef FB_TSAN
	__tsan_switch_to_fiber(tsan, 0);
#endif
	(void)tsan;
}

#endif /* FB_SANITIZER_H */
