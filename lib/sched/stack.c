/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sched/stack.c - fiber stacks: mmap'ed with a PROT_NONE guard region below,
 * placed on a NUMA node when the machine has several, cached for reuse, and
 * the initial frame that makes a new stack look like a suspended context.
 *
 * Address space is reserved with MAP_NORESERVE and touched lazily, so a
 * 256 KiB stack costs the pages a fiber really uses.  Each stack is one
 * mmap (PROT_NONE, guard and stack) and one mprotect (the stack part), so
 * two kernel mappings whatever the guard's size: vm.max_map_count (65530
 * by default) bounds the number of live fibers at about 32,000; README.md
 * says so.
 *
 * The guard.  A function whose frame is larger than the guard can move
 * its stack pointer past the guard in one step and write below it, into
 * whatever is mapped there (another stack, a library's data), with no
 * fault at all.  The guard therefore covers FB_STACK_GUARD bytes, not one
 * page: a PROT_NONE region costs address space, never memory, and no
 * extra mapping.  Code built with -fstack-clash-protection (libfiber is;
 * README.md asks the same of fiber code) probes every page of a large
 * frame in order, so any guard catches it; the size matters for code
 * built without it.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#if FB_HAVE_NUMA
#include <numa.h>
#include <numaif.h>
#endif

#include "sched/sched.h"
#include "sched/stack.h"

static size_t page_size(void)
{
	static size_t ps;

	if (!ps)
		ps = (size_t)sysconf(_SC_PAGESIZE);
	return ps;
}

/* The guard below each stack: FB_STACK_GUARD rounded up to pages. */
static size_t guard_size(void)
{
	size_t ps = page_size();

	return (FB_STACK_GUARD + ps - 1) & ~(ps - 1);
}

int fb_stack_map(struct fb_stack *s, size_t size, int node)
{
	size_t ps = page_size(), guard = guard_size(), len;
	void *map;

	size = (size + ps - 1) & ~(ps - 1);
	len = size + guard;
	if (fb_fault_should_fail())
		return EAGAIN;
	map = mmap(NULL, len, PROT_NONE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1,
		   0);
	if (map == MAP_FAILED)
		return EAGAIN;
	if (mprotect((char *)map + guard, size, PROT_READ | PROT_WRITE)) {
		munmap(map, len);
		return EAGAIN;
	}
#if FB_HAVE_NUMA
	if (node >= 0 && numa_available() >= 0 && numa_max_node() > 0) {
		unsigned long mask[16] = { 0 };

		if (node < (int)(sizeof(mask) * 8)) {
			mask[node / (8 * sizeof(long))] |=
				1UL << (node % (8 * sizeof(long)));
			/* Advice only: a failure leaves first-touch placement. */
			mbind((char *)map + guard, size, MPOL_PREFERRED, mask,
			      sizeof(mask) * 8, 0);
		}
	}
#else
	(void)node;
#endif
	s->map = map;
	s->map_len = len;
	s->size = size;
	return 0;
}

void fb_stack_unmap(struct fb_stack *s)
{
	if (s->map)
		munmap(s->map, s->map_len);
	s->map = NULL;
}

void *fb_stack_top(const struct fb_stack *s)
{
	return (char *)s->map + s->map_len;
}

bool fb_stack_guard_contains(const struct fb_stack *s, const void *addr)
{
	const char *a = addr, *g = s->map;

	return s->map && a >= g && a < g + (s->map_len - s->size);
}

/*
 * The shared pool behind the per-worker caches: fibers are often created on
 * one worker and die on another, so full caches spill here and empty ones
 * refill from here.  A spinlock is enough: it is taken once per
 * FB_STACK_CACHE / 2 stacks in the steady state.
 */
#define FB_STACK_POOL 1024
static struct fb_spinlock pool_lock;
static struct fb_stack pool[FB_STACK_POOL];
static _Atomic unsigned int pool_nr; /* pool_lock; read unlocked as a hint */

static void pool_refill(struct fb_stack_cache *c, size_t size)
{
	fb_spin_lock(&pool_lock);
	for (unsigned int i = pool_nr; i-- > 0 && c->nr < FB_STACK_CACHE / 2;) {
		if (pool[i].size != size)
			continue;
		c->s[c->nr++] = pool[i];
		pool[i] = pool[--pool_nr];
	}
	fb_spin_unlock(&pool_lock);
}

static void pool_spill(struct fb_stack_cache *c)
{
	fb_spin_lock(&pool_lock);
	while (c->nr > FB_STACK_CACHE / 2 && pool_nr < FB_STACK_POOL)
		pool[pool_nr++] = c->s[--c->nr];
	fb_spin_unlock(&pool_lock);
	while (c->nr > FB_STACK_CACHE / 2)
		fb_stack_unmap(&c->s[--c->nr]);
}

void fb_stack_pool_drain(void)
{
	fb_spin_lock(&pool_lock);
	while (pool_nr)
		fb_stack_unmap(&pool[--pool_nr]);
	fb_spin_unlock(&pool_lock);
}

static bool cache_take(struct fb_stack_cache *c, size_t size,
		       struct fb_stack *s)
{
	for (unsigned int i = c->nr; i-- > 0;) {
		if (c->s[i].size == size) {
			*s = c->s[i];
			c->s[i] = c->s[--c->nr];
			return true;
		}
	}
	return false;
}

bool fb_stack_cache_get(struct fb_stack_cache *c, size_t size,
			struct fb_stack *s)
{
	if (cache_take(c, size, s))
		return true;
	if (!fb_load_relaxed(&pool_nr))
		return false;
	pool_refill(c, size);
	return cache_take(c, size, s);
}

void fb_stack_cache_put(struct fb_stack_cache *c, struct fb_stack *s)
{
	if (c->nr == FB_STACK_CACHE)
		pool_spill(c);
	c->s[c->nr++] = *s;
	s->map = NULL;
}

void fb_stack_cache_drain(struct fb_stack_cache *c)
{
	while (c->nr)
		fb_stack_unmap(&c->s[--c->nr]);
}

/*
 * fb_ctx_make - lay out an initial frame at the top of a stack so that the
 * first fb_ctx_switch() to it "returns" into fb_ctx_trampoline with the
 * stack aligned as the ABI requires at a function's first instruction.
 */
void *fb_ctx_make(void *top)
{
	uintptr_t t = (uintptr_t)top & ~(uintptr_t)15;
#if defined(__x86_64__)
	/* After ret, rsp = t - 16 (16-aligned), as if the trampoline had
	 * been called... minus the call itself: it calls fb_fiber_main,
	 * which then sees rsp % 16 == 8 like any function. */
	uint64_t *sp = (uint64_t *)(t - 80);

	memset(sp, 0, 80);
	sp[0] = 0x1f80 | ((uint64_t)0x037f << 32); /* MXCSR, x87 CW */
	sp[7] = (uint64_t)(uintptr_t)fb_ctx_trampoline;
	return sp;
#elif defined(__aarch64__)
	uint64_t *sp = (uint64_t *)(t - 176);

	memset(sp, 0, 176);
	sp[11] = (uint64_t)(uintptr_t)fb_ctx_trampoline; /* x30 */
	return sp;
#endif
}

/* The pool across fork(): held over the fork so that the child's copy is
 * whole, released on both sides (sched/runtime.c's atfork handlers). */
void fb_stack_atfork(int phase)
{
	if (phase == FB_ATFORK_PREPARE)
		fb_spin_lock(&pool_lock);
	else
		fb_spin_unlock(&pool_lock);
}
