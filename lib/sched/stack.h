/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sched/stack.h - fiber stacks and the context switch (lib/arch/).
 */
#ifndef FB_STACK_H
#define FB_STACK_H

#include <stdbool.h>
#include <stddef.h>

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

struct fb_stack {
	void *map; /* guard region + stack */
	size_t map_len;
	size_t size; /* usable bytes, at the top of the mapping */
};

/* Stacks kept per worker for reuse; owner worker only. */
#define FB_STACK_CACHE 64
struct fb_stack_cache {
	unsigned int nr;
	struct fb_stack s[FB_STACK_CACHE];
};

/* fb_stack_map - map a stack of @size bytes (rounded up to pages) with a
 * guard region of FB_STACK_GUARD below, preferring NUMA node @node (-1:
 * any).
 * Return: 0; EAGAIN when the mapping fails (address space, map count). */
int fb_stack_map(struct fb_stack *s, size_t size, int node);
void fb_stack_unmap(struct fb_stack *s);
void *fb_stack_top(const struct fb_stack *s);
/* fb_stack_guard_contains - @addr lies in the guard region of @s.
 * Context: any, async-signal-safe (plain loads of @s). */
bool fb_stack_guard_contains(const struct fb_stack *s, const void *addr);
bool fb_stack_cache_get(struct fb_stack_cache *c, size_t size,
			struct fb_stack *s);
/* Keeps @s or unmaps it; @s is empty afterwards. */
void fb_stack_cache_put(struct fb_stack_cache *c, struct fb_stack *s);
void fb_stack_cache_drain(struct fb_stack_cache *c);
/* Unmap the shared pool (runtime shutdown). */
void fb_stack_pool_drain(void);
/* The pool's lock across fork() (FB_ATFORK_*, base/common.h). */
void fb_stack_atfork(int phase);

void fb_ctx_switch(void **save_sp, void *load_sp);
void fb_ctx_trampoline(void);
void *fb_ctx_make(void *top);
/* First C code of every fiber; called by fb_ctx_trampoline. */
void fb_fiber_main(void) __attribute__((noreturn));

#endif /* FB_STACK_H */
