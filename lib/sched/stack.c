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
 *
 * Slabs (LIBFIBER_STACK_GUARD=0).  Without a guard, stacks of one size are
 * carved many to a mapping: a slab is one page, which holds the canary of
 * its first stack, then up to FB_SLAB_STACKS slots.  The top
 * FB_STACK_GAP bytes of each slot are not part of its stack: they hold
 * the canary of the slot above (the word just below that stack's lowest
 * byte) and, while the slot is free, its free-list link.  A stack that
 * runs off its end overwrites the canary first; the scheduler checks it
 * at every switch-out (sched/core.c), the overflow is reported like a
 * guard hit (sched/guard.c) and the process aborts.  The check misses an
 * overflow that leaves the canary word itself alone (a frame that skips
 * it) and one that has already corrupted another stack and crashed
 * elsewhere before the switch; the guard catches both, which is why it
 * stays the default.  A freed slab stack is never unmapped (that would
 * split the mapping): its pages but the top one go back to the kernel
 * (MADV_DONTNEED) and the slot waits on its class's free list.  Slab
 * stacks get no NUMA advice either, since a policy on part of a mapping
 * splits it: they are placed by first touch.
 *
 * Colours.  The lines just below a stack's top are its hottest: the first
 * frames and the registers saved at every switch.  Stacks of one size are
 * mappings (or slots) of one size, a power of two in the default case
 * (256 KiB of stack under a 256 KiB guard), so without care every top
 * falls at the same offset modulo the cache's way size, in one set: a
 * batch of a thousand fibers then fights over 8 lines of L1 and 8 of L2,
 * and creating and joining them cost 25-40% more (the commit that added
 * this has the table).  Two things spread the tops:
 *   - the stride: a mapping (a slot) spans an odd number of pages, so
 *     consecutive ones start at every page offset modulo any power of two
 *     above the page, and their tops reach every page-sized set group;
 *   - the colour: each stack's top sits FB_STACK_COLOR_STEP times a colour
 *     below the end of the mapping (the slot), the colour counting round
 *     FB_STACK_COLORS, which spreads the tops over the sets within a page.
 * The colour costs no memory: the mapping has a page more than the size
 * asked for, so the stack is never smaller than that size, and the bytes
 * above the top are in the top page, which the fiber touches anyway.  The
 * colours span half a page, so a fiber that parks with less than half a
 * page of stack still touches one page (RSS per parked fiber unchanged).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#if FB_HAVE_NUMA
#include <numa.h>
#include <numaif.h>
#endif

#include "sched/sched.h"
#include "sched/stack.h"

size_t fb_stack_page;

static size_t page_size(void)
{
	if (!fb_stack_page)
		fb_stack_page = (size_t)sysconf(_SC_PAGESIZE);
	return fb_stack_page;
}

/* The guard below each stack: FB_STACK_GUARD rounded up to pages. */
static size_t guard_size(void)
{
	size_t ps = page_size();

	return (FB_STACK_GUARD + ps - 1) & ~(ps - 1);
}

/* The word a guarded stack's canary points at: it never changes. */
static const uint64_t guarded_canary = FB_STACK_CANARY;
static atomic_bool stack_unguarded;

void fb_stack_set_guarded(bool guarded)
{
	fb_store_relaxed(&stack_unguarded, !guarded);
}

/* Count the lines of /proc/self/maps: the process's mappings; -1 when it
 * cannot be read.  A small buffer: the caller may run on a small stack. */
static long count_maps(void)
{
	char buf[512];
	long n = 0;
	ssize_t r;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while ((r = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < r; i++)
			n += buf[i] == '\n';
	close(fd);
	return r < 0 ? -1 : n;
}

/* Read vm.max_map_count; -1 when it cannot be read. */
static long max_map_count(void)
{
	char buf[32];
	ssize_t r;
	int fd = open("/proc/sys/vm/max_map_count", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	return strtol(buf, NULL, 10);
}

/*
 * A mapping refused with ENOMEM: if the process is at vm.max_map_count
 * (within a few mappings, since the count also moves in other threads),
 * say so once per process, with the value and the ways out.  Address
 * space or memory running out is not reported: the caller's EAGAIN says
 * enough.
 */
/* Set while fb_stack_map() makes its first try: a refusal then is
 * answered by giving the pools' stacks back and trying again, and only a
 * refusal of the second try is explained. */
static __thread bool map_first_try;

static void map_count_warn(bool guarded)
{
	static atomic_bool warned;
	long max, n;

	if (map_first_try)
		return;
	max = max_map_count();
	if (max < 0 || fb_load_relaxed(&warned))
		return;
	n = count_maps();
	if (n < 0 || n + 8 < max || fb_xchg(&warned, true))
		return;
	fprintf(stderr,
		"libfiber: cannot map a fiber stack: the process has %ld "
		"mappings and vm.max_map_count is %ld%s; raise the limit "
		"(sysctl -w vm.max_map_count=N, about 2 per fiber)%s\n",
		n, max, guarded ? " (a guarded stack takes 2)" : "",
		guarded ? " or set LIBFIBER_STACK_GUARD=0 (many stacks to a "
			  "mapping, overflow caught by a canary)" :
			  "");
}

/* Stack colours (see the top of this file): FB_STACK_COLORS steps of
 * FB_STACK_COLOR_STEP bytes, under half a 4 KiB page.  Picked: one cache
 * line a step; 31 of them, an odd count, so that the colour and the page
 * offset of consecutive mappings (which the odd page count makes cycle
 * through a power of two) never repeat together before 31 times that
 * cycle; a whole page of colours measured no faster and may push a parked
 * fiber's frames into a second page. */
#define FB_STACK_COLOR_STEP FB_CACHELINE
#define FB_STACK_COLORS 31

/* The next colour's offset below the end of a mapping or a slot. */
static size_t color_next(void)
{
	static atomic_uint seq;
	unsigned int c =
		atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed);

	return (size_t)(c % FB_STACK_COLORS) * FB_STACK_COLOR_STEP;
}

/* The span of a stack of @size bytes (page-rounded) and @extra more: one
 * page for the colour, and one more if needed to make the number of pages
 * odd. */
static size_t colored_span(size_t size, size_t extra)
{
	size_t ps = page_size(), len = size + extra + ps;

	if (!((len / ps) & 1))
		len += ps;
	return len;
}

static int map_guarded(struct fb_stack *s, size_t size, int node)
{
	size_t guard = guard_size(), len = colored_span(size, guard);
	size_t color = color_next();
	void *map;
	int err;

	map = mmap(NULL, len, PROT_NONE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1,
		   0);
	if (map == MAP_FAILED) {
		if (errno == ENOMEM)
			map_count_warn(true);
		return EAGAIN;
	}
	if (mprotect((char *)map + guard, len - guard,
		     PROT_READ | PROT_WRITE)) {
		err = errno;
		munmap(map, len);
		if (err == ENOMEM)
			map_count_warn(true);
		return EAGAIN;
	}
#if FB_HAVE_NUMA
	if (node >= 0 && numa_available() >= 0 && numa_max_node() > 0) {
		unsigned long mask[16] = { 0 };

		if (node < (int)(sizeof(mask) * 8)) {
			mask[node / (8 * sizeof(long))] |=
				1UL << (node % (8 * sizeof(long)));
			/* Advice only: a failure leaves first-touch placement. */
			mbind((char *)map + guard, len - guard, MPOL_PREFERRED,
			      mask, sizeof(mask) * 8, 0);
		}
	}
#else
	(void)node;
#endif
	/* The top, map + map_len, is @color below the mapping's end; the
	 * unmap rounds map_len back up to it. */
	s->map = map;
	s->map_len = len - color;
	s->size = len - color - guard;
	s->slot = size;
	s->canary = &guarded_canary;
	s->cls = -1;
	return 0;
}

/*
 * Slab classes, one per stack size in use: the slab being carved and the
 * free slots.  FB_SLAB_CLASSES sizes at most (picked: programs use one or
 * a few stack sizes); a further size gets slabs of one slot, carved and
 * freed like the others.  slab_lock guards all of it.
 */
#define FB_STACK_GAP 64
#define FB_SLAB_STACKS 256
#define FB_SLAB_BYTES (64UL * 1024 * 1024)
#define FB_SLAB_CLASSES 16
struct slab_class {
	size_t slot;
	char *cur;	   /* next slot of the slab being carved */
	unsigned int left; /* slots left there */
	char *free;	   /* free slots, linked through their gaps */
};
static struct fb_spinlock slab_lock;
static struct slab_class classes[FB_SLAB_CLASSES];
static unsigned int nr_classes;

/* The free-list link of the free slot at @base. */
static char **slot_link(char *base, size_t stride)
{
	return (char **)(base + stride - 2 * sizeof(uint64_t));
}

/* The distance between the slots of a class of @slot bytes: the slot and
 * room for the colour, an odd number of pages. */
static size_t slab_stride(size_t slot)
{
	return colored_span(slot, 0);
}

static struct slab_class *class_of(size_t slot)
{
	for (unsigned int i = 0; i < nr_classes; i++)
		if (classes[i].slot == slot)
			return &classes[i];
	if (nr_classes == FB_SLAB_CLASSES)
		return NULL;
	classes[nr_classes].slot = slot;
	return &classes[nr_classes++];
}

/* A new slab of @n slots @stride bytes apart; its first slot's address. */
static char *slab_new(size_t stride, unsigned int n)
{
	size_t ps = page_size();
	char *map = mmap(
		NULL, ps + stride * n, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);

	if (map == MAP_FAILED) {
		if (errno == ENOMEM)
			map_count_warn(false);
		return NULL;
	}
	return map + ps;
}

static int map_slab(struct fb_stack *s, size_t slot)
{
	size_t stride = slab_stride(slot), color = color_next();
	struct slab_class *c;
	unsigned int n;
	char *base;

	fb_spin_lock(&slab_lock);
	c = class_of(slot);
	if (c && c->free) {
		base = c->free;
		c->free = *slot_link(base, stride);
	} else if (c && c->left) {
		base = c->cur;
		c->cur += stride;
		c->left--;
	} else {
		n = (unsigned int)(FB_SLAB_BYTES / stride);
		n = n < 1 ? 1 : n > FB_SLAB_STACKS ? FB_SLAB_STACKS : n;
		base = slab_new(stride, c ? n : 1);
		if (base && c) {
			c->cur = base + stride;
			c->left = n - 1;
		}
	}
	fb_spin_unlock(&slab_lock);
	if (!base)
		return EAGAIN;
	s->map = base;
	s->map_len = stride - FB_STACK_GAP - color;
	s->size = s->map_len;
	s->slot = slot;
	s->cls = c ? (int)(c - classes) : FB_SLAB_CLASSES;
	s->canary = (uint64_t *)(void *)base - 1;
	*(uint64_t *)(void *)s->canary = FB_STACK_CANARY;
	return 0;
}

static int map_one(struct fb_stack *s, size_t size, int node)
{
	if (fb_load_relaxed(&stack_unguarded))
		return map_slab(s, size);
	return map_guarded(s, size, node);
}

int fb_stack_map(struct fb_stack *s, size_t size, int node)
{
	size_t ps = page_size();
	int err;

	size = (size + ps - 1) & ~(ps - 1);
	if (fb_fault_should_fail())
		return EAGAIN;
	map_first_try = true;
	err = map_one(s, size, node);
	map_first_try = false;
	if (err != EAGAIN)
		return err;
	/* Refused (vm.max_map_count, address space): the pools may hold
	 * thousands of stacks after a burst, two mappings each, waiting for
	 * a reuse that a create of another size never makes.  They go
	 * back, with the stacks of the descriptors pooled above
	 * FB_POOL_KEEP, and the map is tried once more. */
	fb_stack_pool_drain();
	fb_fiber_pool_shrink();
	return map_one(s, size, node);
}

void fb_stack_unmap(struct fb_stack *s)
{
	char *base = s->map;
	size_t ps = page_size(), stride;

	if (!base)
		return;
	s->map = NULL;
	if (s->cls < 0) { /* map_len is short of the end by the colour */
		munmap(base, (s->map_len + ps - 1) & ~(ps - 1));
		return;
	}
	stride = slab_stride(s->slot);
	if (s->cls == FB_SLAB_CLASSES) { /* a slab of its own */
		munmap(base - ps, ps + stride);
		return;
	}
	/* The top page stays: it holds the canary of the slot above. */
	madvise(base, stride - ps, MADV_DONTNEED);
	fb_spin_lock(&slab_lock);
	*slot_link(base, stride) = classes[s->cls].free;
	classes[s->cls].free = base;
	fb_spin_unlock(&slab_lock);
}

bool fb_stack_guard_contains(const struct fb_stack *s, const void *addr)
{
	const char *a = addr, *g = s->map;

	return s->map && s->cls < 0 && a >= g && a < g + (s->map_len - s->size);
}

/*
 * The shared pool behind the per-worker caches: fibers are often created on
 * one worker and die on another, so full caches spill here and empty ones
 * refill from here.  A spinlock is enough: it is taken once per
 * FB_STACK_CACHE / 2 stacks in the steady state.
 *
 * It grows, doubling, up to FB_POOL_MAX stacks, and is trimmed as
 * stack.h says.  A fixed pool of 1024 made every fiber of a larger burst
 * map its stack and unmap it at exit (mmap, mprotect, page faults,
 * munmap and the TLB shootdown that follows): 12 us per fiber in batches
 * of 3000, 40 times a goroutine.  A refill looks at the top FB_POOL_KEEP
 * stacks only, so that a pool of many sizes is not searched whole under
 * the lock; a stack of a rare size deeper down waits for the trim.
 */
uint64_t fb_pool_trim_ns = FB_POOL_TRIM_NS;
static struct fb_spinlock pool_lock;
/* The first FB_POOL_KEEP entries are static, where the fixed pool was,
 * so that a process whose bursts stay within them allocates no array. */
static struct fb_stack pool_static[FB_POOL_KEEP];
static struct fb_stack *pool = pool_static;  /* pool_cap entries; pool_lock */
static unsigned int pool_cap = FB_POOL_KEEP; /* pool_lock */
static _Atomic unsigned int pool_nr;  /* pool_lock; read unlocked as a hint */
static struct fb_pool_trim pool_trim; /* pool_lock */

/* Under pool_lock, pool_nr is counted in a local and stored once:
 * "pool_nr++" on the atomic would be a locked add per stack moved. */
static void pool_refill(struct fb_stack_cache *c, size_t slot)
{
	unsigned int n, stop;

	fb_spin_lock(&pool_lock);
	n = fb_load_relaxed(&pool_nr);
	stop = n > FB_POOL_KEEP ? n - FB_POOL_KEEP : 0;
	for (unsigned int i = n; i-- > stop && c->nr < FB_STACK_CACHE / 2;) {
		if (pool[i].slot != slot)
			continue;
		c->s[c->nr++] = pool[i];
		if (i != --n) /* the top needs no move: the usual case */
			pool[i] = pool[n];
	}
	fb_store_relaxed(&pool_nr, n);
	fb_pool_trim_seen(&pool_trim, n);
	fb_spin_unlock(&pool_lock);
}

/* pool_grow - make room for @want stacks in the pool, at most FB_POOL_MAX.
 * Called with pool_lock held, which it drops around the allocation.
 * Return: the array to free once the lock is dropped (the old one), or
 * NULL. */
static struct fb_stack *pool_grow(unsigned int want)
{
	unsigned int cap = pool_cap;
	struct fb_stack *p, *old;

	while (cap < want && cap < FB_POOL_MAX)
		cap *= 2;
	if (cap <= pool_cap)
		return NULL;
	fb_spin_unlock(&pool_lock);
	p = fb_malloc((size_t)cap * sizeof(*p));
	fb_spin_lock(&pool_lock);
	if (!p || cap <= pool_cap) /* no memory, or another grew it */
		return p;
	old = pool;
	memcpy(p, old, fb_load_relaxed(&pool_nr) * sizeof(*p));
	pool = p;
	pool_cap = cap;
	return old == pool_static ? NULL : old;
}

static void pool_spill(struct fb_stack_cache *c)
{
	struct fb_stack *old = NULL;
	unsigned int n;

	fb_spin_lock(&pool_lock);
	n = fb_load_relaxed(&pool_nr);
	if (n + FB_STACK_CACHE / 2 > pool_cap) {
		old = pool_grow(n + FB_STACK_CACHE / 2);
		n = fb_load_relaxed(&pool_nr);
	}
	while (c->nr > FB_STACK_CACHE / 2 && n < pool_cap)
		pool[n++] = c->s[--c->nr];
	fb_store_relaxed(&pool_nr, n);
	fb_spin_unlock(&pool_lock);
	fb_free(old);
	while (c->nr > FB_STACK_CACHE / 2)
		fb_stack_unmap(&c->s[--c->nr]);
}

unsigned int fb_stack_pool_trim(uint64_t now, unsigned int max)
{
	struct fb_stack out[FB_POOL_TRIM_BATCH];
	unsigned int n, k;

	if (fb_pool_trim_early(&pool_trim, now))
		return 0;
	fb_spin_lock(&pool_lock);
	n = fb_load_relaxed(&pool_nr);
	k = fb_pool_trim_count(&pool_trim, n, now, max);
	for (unsigned int i = 0; i < k; i++)
		out[i] = pool[--n];
	fb_store_relaxed(&pool_nr, n);
	fb_pool_trim_seen(&pool_trim, n);
	fb_spin_unlock(&pool_lock);
	for (unsigned int i = 0; i < k; i++)
		fb_stack_unmap(&out[i]);
	return k;
}

unsigned int fb_stack_pool_nr(void)
{
	return fb_load_relaxed(&pool_nr);
}

uint64_t fb_stack_pool_trim_at(void)
{
	return fb_pool_trim_at(&pool_trim, fb_load_relaxed(&pool_nr));
}

void fb_stack_pool_drain(void)
{
	struct fb_stack *p;
	unsigned int n;

	fb_spin_lock(&pool_lock);
	n = fb_load_relaxed(&pool_nr);
	while (n)
		fb_stack_unmap(&pool[--n]);
	fb_store_relaxed(&pool_nr, 0);
	p = pool == pool_static ? NULL : pool;
	pool = pool_static;
	pool_cap = FB_POOL_KEEP;
	pool_trim = (struct fb_pool_trim){ 0 };
	fb_spin_unlock(&pool_lock);
	fb_free(p);
}

static bool cache_take(struct fb_stack_cache *c, size_t slot,
		       struct fb_stack *s)
{
	for (unsigned int i = c->nr; i-- > 0;) {
		if (c->s[i].slot == slot) {
			*s = c->s[i];
			if (i != --c->nr) /* as in pool_refill() */
				c->s[i] = c->s[c->nr];
			return true;
		}
	}
	return false;
}

void fb_stack_release(struct fb_stack *s)
{
	struct fb_worker *w = fb_worker_self();

	if (!s->map)
		return;
	if (w)
		fb_stack_cache_put(&w->stacks, s);
	else
		fb_stack_unmap(s);
}

bool fb_stack_cache_get(struct fb_stack_cache *c, size_t size,
			struct fb_stack *s)
{
	size_t ps = page_size(), slot = (size + ps - 1) & ~(ps - 1);

	/* Compared rounded, as fb_stack_map() records it. */
	if (cache_take(c, slot, s))
		return true;
	if (!fb_load_relaxed(&pool_nr))
		return false;
	pool_refill(c, slot);
	return cache_take(c, slot, s);
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

/* The pool and the slabs across fork(): held over the fork so that the child's copy is
 * whole, released on both sides (sched/runtime.c's atfork handlers). */
void fb_stack_atfork(int phase)
{
	if (phase == FB_ATFORK_PREPARE) {
		fb_spin_lock(&pool_lock);
		fb_spin_lock(&slab_lock);
	} else {
		fb_spin_unlock(&slab_lock);
		fb_spin_unlock(&pool_lock);
	}
}
