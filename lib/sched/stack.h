/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sched/stack.h - fiber stacks and the context switch (lib/arch/).
 */
#ifndef FB_STACK_H
#define FB_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/atomic.h"

/* The default fiber stack, 256 KiB: LIBFIBER_STACK_SIZE's default in
 * api/config.h, for the code that needs it before the runtime runs
 * (test-env checks that the two agree); and the largest stack, 1 GiB. */
#define FB_STACK_DEFAULT (256 * 1024)
#define FB_STACK_MAX (1024L * 1024 * 1024)

/*
 * The PROT_NONE region below every fiber stack: 256 KiB, rounded up to
 * pages.  A frame larger than the guard can step over it unseen (sched/stack.c),
 * so the size is the largest frame caught in code built without
 * -fstack-clash-protection.  Picked: 256 KiB is four times a 64 KiB
 * buffer, a common size for I/O and formatting buffers declared on the
 * stack, and equals the default stack size, so a frame that could jump it
 * would not fit in a default stack anyway.  It costs address space only (no memory,
 * no extra mapping): 32,000 fibers, the vm.max_map_count bound, reserve
 * 8 GiB of the 128 TiB a process has on x86-64.
 */
#define FB_STACK_GUARD (256 * 1024)

/*
 * A stack is either guarded (its own mapping: the PROT_NONE guard region,
 * then the stack; two kernel mappings) or, with LIBFIBER_STACK_GUARD=0,
 * carved from a slab: one mapping holds many stacks (sched/stack.c) and an
 * overflow is caught by the canary word just below the stack, checked at
 * every switch-out (fb_stack_canary_ok).  A guarded stack's canary points
 * at a constant word, so the check is the same load and compare for both.
 */
struct fb_stack {
	void *map; /* guarded: guard region + stack; slab: the stack */
	size_t map_len;
	size_t size;		/* usable bytes, at the top of the mapping */
	size_t slot;		/* the size asked for, rounded up to pages */
	const uint64_t *canary; /* FB_STACK_CANARY while the stack is whole */
	int cls;		/* -1: guarded; else its slab class */
};

/* The canary's value (picked: no zero byte, not a plausible address). */
#define FB_STACK_CANARY 0xa5c3f00dd15ea5e5ULL

/* fb_stack_set_guarded - guarded stacks (true, the default) or slab stacks
 * with a canary for the maps that follow.  Context: runtime creation,
 * before any fiber; stacks already mapped keep their kind. */
void fb_stack_set_guarded(bool guarded);

/* fb_stack_canary_ok - the canary below @s is intact.  Context: any; a
 * load and a compare. */
static inline bool fb_stack_canary_ok(const struct fb_stack *s)
{
	return *s->canary == FB_STACK_CANARY;
}

/* Stacks kept per worker for reuse; owner worker only. */
#define FB_STACK_CACHE 64
struct fb_stack_cache {
	unsigned int nr;
	struct fb_stack s[FB_STACK_CACHE];
};

/* fb_stack_map - map a stack of @size bytes (rounded up to pages) with a
 * guard region of FB_STACK_GUARD below, or carve one from a slab (see
 * fb_stack_set_guarded), preferring NUMA node @node (-1: any).  When the
 * kernel refuses a guarded mapping because the process is at
 * vm.max_map_count, prints once per process a message that names the
 * limit, its value and the ways out.
 * Context: any thread.
 * Return: 0; EAGAIN when the mapping fails (address space, map count). */
int fb_stack_map(struct fb_stack *s, size_t size, int node);
/* fb_stack_unmap - give @s back: a guarded stack is unmapped, a slab stack
 * goes to its class's free list with its pages released (all but the top
 * one, which holds the canary of the stack above).  Context: any thread. */
void fb_stack_unmap(struct fb_stack *s);
/* fb_stack_top - the top of @s: where its first frame goes, a colour below
 * the end of its mapping or slot (sched/stack.c). */
static inline void *fb_stack_top(const struct fb_stack *s)
{
	return (char *)s->map + s->map_len;
}
/* fb_stack_guard_contains - @addr lies in the guard region of @s.
 * Context: any, async-signal-safe (plain loads of @s). */
bool fb_stack_guard_contains(const struct fb_stack *s, const void *addr);
bool fb_stack_cache_get(struct fb_stack_cache *c, size_t size,
			struct fb_stack *s);
/* The page size, set by the first fb_stack_map() (sched/stack.c). */
extern size_t fb_stack_page;

/* fb_stack_fits - mapped stack @s is what a stack of @size bytes would be
 * (the same size rounded to pages).  Context: any. */
static inline bool fb_stack_fits(const struct fb_stack *s, size_t size)
{
	/* slot is a size rounded up to pages: @size rounds up to it when
	 * it lies less than a page below.  @s was mapped, so the page size
	 * is known. */
	return s->slot >= size && s->slot - size < fb_stack_page;
}
/* Keeps @s or unmaps it; @s is empty afterwards. */
void fb_stack_cache_put(struct fb_stack_cache *c, struct fb_stack *s);
void fb_stack_cache_drain(struct fb_stack_cache *c);
/* Unmap the shared pool (runtime shutdown). */
void fb_stack_pool_drain(void);

/*
 * The pools behind the per-worker caches (stacks here, descriptors in
 * sched/handle.c) grow with the bursts they serve and give back, while
 * the process idles, what a burst left in them: the first
 * FB_POOL_KEEP objects stay for good; of those above, half the ones that
 * sat in the pool through a whole period of FB_POOL_TRIM_NS go back in
 * the next period, FB_POOL_TRIM_BATCH at a time: by an idle worker
 * before it sleeps, and while workers are busy by the monitor thread
 * (sched/monitor.c), off the workers.  A server whose bursts recur
 * within the period keeps what they use.
 */
#define FB_POOL_KEEP 1024
#define FB_POOL_MAX (1u << 18)
#define FB_POOL_TRIM_NS (1000ull * 1000 * 1000)
/* The period in use: FB_POOL_TRIM_NS; tests may change it while no
 * runtime runs, so that a trim does not race what they count. */
extern uint64_t fb_pool_trim_ns;
#define FB_POOL_TRIM_BATCH 128u

/* What a pool's trimming remembers; under the pool's lock but @due. */
struct fb_pool_trim {
	unsigned int low;  /* the fewest objects pooled since @next - period */
	unsigned int left; /* still to give back in this period */
	uint64_t next;	   /* when the next period begins (ns) */
	_Atomic uint64_t due; /* when a trim may give something back (ns):
				 @next, or at once while @left; read unlocked */
};

/* fb_pool_trim_early - a trim at @now would find nothing due: a load, so
 * that the callers on every idle entry and monitor look take no lock. */
static inline bool fb_pool_trim_early(struct fb_pool_trim *t, uint64_t now)
{
	return now < fb_load_relaxed(&t->due);
}

/* fb_pool_trim_at - when a pool that holds @nr objects next wants a trim
 * (ns), 0 when it holds no more than it keeps for good.  No lock. */
static inline uint64_t fb_pool_trim_at(struct fb_pool_trim *t, unsigned int nr)
{
	return nr <= FB_POOL_KEEP ? 0 : fb_load_relaxed(&t->due);
}

/* fb_pool_trim_seen - the pool now holds @nr objects (after a take). */
static inline void fb_pool_trim_seen(struct fb_pool_trim *t, unsigned int nr)
{
	if (nr < t->low)
		t->low = nr;
}

/*
 * fb_pool_trim_count - how many of the @nr objects in the pool to give
 * back at @now (ns), at most @max (<= FB_POOL_TRIM_BATCH); the caller takes them
 * out and then reports the count left with fb_pool_trim_seen().  Pure
 * but for @t.  Context: the pool's lock.
 */
static inline unsigned int fb_pool_trim_count(struct fb_pool_trim *t,
					      unsigned int nr, uint64_t now,
					      unsigned int max)
{
	unsigned int n;

	if (now >= t->next) {
		t->left = t->low > FB_POOL_KEEP ?
				  (t->low - FB_POOL_KEEP + 1) / 2 :
				  0;
		t->low = nr;
		t->next = now + fb_pool_trim_ns;
	}
	if (nr <= FB_POOL_KEEP) /* taken meanwhile: nothing above to give */
		t->left = 0;
	n = t->left < max ? t->left : max;
	if (n > nr - FB_POOL_KEEP)
		n = nr - FB_POOL_KEEP;
	t->left -= n;
	/* More to give back in this period: due again at once. */
	fb_store_relaxed(&t->due, t->left ? now : t->next);
	return n;
}

/* fb_stack_pool_trim - give back at @now what fb_pool_trim_count() says
 * of the shared stack pool, at most @max (<= FB_POOL_TRIM_BATCH).
 * Return: how many stacks were unmapped.  Context: an idle worker, the
 * monitor, or any thread; takes the pool's lock. */
unsigned int fb_stack_pool_trim(uint64_t now, unsigned int max);
/* fb_stack_pool_trim_at - when the stack pool next wants a trim (ns),
 * 0 when it holds no more than it keeps for good.  A hint: no lock. */
uint64_t fb_stack_pool_trim_at(void);
/* fb_stack_pool_nr - stacks in the shared pool now (a hint, for tests). */
unsigned int fb_stack_pool_nr(void);
/* The pool's lock across fork() (FB_ATFORK_*, base/common.h). */
void fb_stack_atfork(int phase);

void fb_ctx_switch(void **save_sp, void *load_sp);
void fb_ctx_trampoline(void);
void *fb_ctx_make(void *top);
/* First C code of every fiber; called by fb_ctx_trampoline. */
void fb_fiber_main(void) __attribute__((noreturn));

#endif /* FB_STACK_H */
