/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * handle.c - fiber handles (what a fiber_t holds), the table that
 * turns one into a descriptor, and the allocation of descriptors with
 * their handles.
 *
 * The model.  A fiber_t is never a descriptor's address.  It packs a slot
 * index and that slot's generation:
 *
 *	handle = gen << FB_HANDLE_INDEX_BITS | index,	gen >= 1
 *
 * so no handle is NULL.  A slot of the process-wide table holds a spinlock,
 * the generation of its live handle and the descriptor.  A descriptor's
 * life ends (its fiber exited and was joined, or exited detached) with the
 * generation bumped and the descriptor cleared, both under the slot's lock
 * (fb_handle_retire_locked).  From then on every handle made before is
 * stale: a lookup locks the slot, compares generations and finds a
 * mismatch.  The descriptor itself is reused at once for a new fiber, or
 * freed; no old handle leads to it.  The join/detach handshake runs under
 * the same slot lock, so a join or detach that races with the release of a
 * detached fiber sees either the live fiber or a stale handle, never freed
 * memory.
 *
 * Invariants.
 *   - A slot's fiber is non-NULL exactly from fb_handle_publish to the
 *     retirement; its generation changes only at the retirement.
 *   - A handle is live iff its slot's fiber is non-NULL and its slot's
 *     generation equals the handle's.  A free slot's generation is the one
 *     its next handle will get.
 *   - Every slot that is not live is held by exactly one of: a creator
 *     (between fb_fiber_alloc and fb_handle_publish), a releaser (between
 *     the retirement and fb_fiber_free), a descriptor in a worker's cache
 *     (f->slot), a worker's list of bare slots, the global list.
 *
 * The table.  Chunks of FB_HANDLE_CHUNK slots, made on demand, up to
 * FB_HANDLE_SLOTS (2^24) slots.  A chunk is never freed, so a lookup with
 * any value (stale, forged, left over from before a fiber_shutdown) reads
 * only memory that stays valid; the table lives as long as the process,
 * independent of the runtime: handles made before a fiber_shutdown and a
 * fiber_init stay stale after them (and the handle of a fiber that exited
 * unjoined stays joinable).  The chunks are reachable from a static array,
 * so leak checkers see no leak.  Memory: 32 bytes per slot ever in use at
 * once, plus a 128 KiB array of chunk pointers (BSS, touched only as far
 * as chunks exist).
 *
 * Free slots and descriptors.  A descriptor keeps its slot while it waits
 * for reuse, so that one cache serves both: a worker's cache is a LIFO of
 * released descriptors (up to FB_HANDLE_CACHE), each with its retired
 * slot, and a create takes one, with a new generation, without a lock.
 * Besides it, a worker keeps a list of bare slots (without descriptors;
 * up to FB_HANDLE_CACHE), which it fills from the global list of bare
 * slots in batches of FB_HANDLE_CACHE / 2 under a spinlock and spills
 * back to it the same way.  Behind the caches, a pool of up to
 * FB_HANDLE_POOL released descriptors with their slots, under the same
 * lock: a full cache spills half of itself there, an empty one refills
 * half from there, and only what the pool cannot take or give goes to
 * the allocator (a spill frees those descriptors and gives their slots
 * to the global list; a create with no descriptor anywhere takes a bare
 * slot and allocates).  The pool grows and is trimmed as the stack
 * pool is (sched/stack.h).  So a batch of fibers created and then
 * joined on one worker, or created on one worker and reaped on another,
 * calls no allocator once the pool has grown to it.  A foreign thread takes from and
 * gives to the pool and the global list directly.  A released descriptor
 * may hold its last fiber's stack (sched/fiber.c): it keeps it in the
 * caches and the pool, and gives it back (fb_stack_release) only when
 * the descriptor itself is freed.
 *
 * The caches are indexed by worker id in a static array, not kept in
 * struct fb_worker, because workers are freed at fiber_shutdown and the
 * slots of their caches would be lost; worker i of the next runtime finds
 * the cache of worker i of the last one.  Runtimes never overlap
 * (fiber_shutdown joins every worker thread before fiber_init can start
 * new ones), so each cache has one owner at a time.  The cost: the cache
 * of a worker id the current runtime lacks keeps up to FB_HANDLE_CACHE
 * descriptors and FB_HANDLE_CACHE bare slots until a runtime with that
 * many workers comes.
 *
 * Alternatives rejected.  A handle that is the descriptor's address, with
 * a generation kept in the descriptor, cannot be checked once the
 * descriptor is freed.  Descriptors that are never freed (type-stable
 * memory) make that check possible but keep the peak number of
 * descriptors forever, and the join handshake still needs a lock that
 * outlives the fiber: the slot is that lock, in 32 bytes.  Separate
 * caches of descriptors and of slots cost a pop and a push more per
 * create + join.  A generation of 32 bits would wrap after 2^32 fibers in
 * one slot, which a worker reusing the top of its cache reaches in
 * minutes; on 64-bit machines the generation has 40 bits, so at ten
 * million fibers a second through one slot a handle must be kept for over
 * a day before it could alias a new fiber.
 *
 * Memory ordering.  The creator fills the descriptor, then publishes it
 * with a release store of the slot's fiber; lookups load it with acquire
 * under the slot lock, so a lookup that finds the fiber sees it filled.
 * Generation and fiber change only under the slot lock (or before the
 * chunk is published), so the unlock orders them before the next holder's
 * reads; they are atomics, read relaxed, only so that a lookup with a
 * forged handle that runs while a slot changes hands is not a data race.
 * A slot or descriptor passes between threads only through the global
 * list, under its lock, or with its fiber (the reaper and the joiner
 * synchronise on the slot lock).
 */
#include <string.h>

#include "sched/sched.h"

/*
 * Descriptors (and bare slots) per worker cache; a refill or spill moves
 * half of it.  Picked: as many as the stack cache holds, so that a worker
 * that creates and joins fibers in bursts of up to 64 takes no lock and
 * calls no allocator.
 */
#define FB_HANDLE_CACHE 64
#define FB_HANDLE_BATCH (FB_HANDLE_CACHE / 2)
/*
 * Descriptors, with their slots, in the pool behind the caches: up to
 * FB_POOL_MAX, trimmed as the stack pool is (sched/stack.h), so that a
 * burst of fibers (a batch created, then joined) reuses descriptors, and
 * the stacks they hold, instead of calling the allocator and the kernel
 * for each fiber.
 */
#define FB_HANDLE_POOL FB_POOL_MAX
/* End of a list of slots. */
#define FB_HANDLE_NONE UINT32_MAX

struct fb_handle_slot
	*_Atomic fb_handle_chunks[FB_HANDLE_SLOTS / FB_HANDLE_CHUNK];

/* A worker's cache; its owner only, but for @kept_stacks. */
struct handle_cache {
	struct fb_fiber *fibers; /* released descriptors, via wl_next */
	uint32_t nr_fibers;
	uint32_t bare; /* first bare slot (via slot->next), if nr_bare > 0 */
	uint32_t nr_bare;
	/* Exited fibers reaped here that keep their stacks: the owner adds
	 * and takes away with a relaxed load and store, other threads take
	 * away with an atomic subtraction.  A subtraction that falls between
	 * the owner's load and store is lost, so the count is never below
	 * the truth, only above it: the worker then keeps fewer stacks than
	 * it could, never more than fb_rt->kept_stacks_max. */
	_Atomic uint32_t kept_stacks;
} fb_cacheline_aligned;

static struct handle_cache caches[FIBER_WORKERS_MAX];

static struct fb_spinlock global_lock;
static uint32_t global_head = FB_HANDLE_NONE; /* global_lock */
static uint32_t nr_made; /* slots taken from the table so far; global_lock */
/* The pool of released descriptors with their slots, via wl_next. */
static struct fb_fiber *pool;	      /* global_lock */
static _Atomic uint32_t pool_nr;      /* global_lock; read unlocked as a hint */
static struct fb_pool_trim pool_trim; /* global_lock */

/* The slot at @i, which exists.  Relaxed: the caller got @i through a
 * list whose lock, or whose owner, already ordered the chunk's
 * publication. */
static struct fb_handle_slot *slot_at(uint32_t i)
{
	struct fb_handle_slot *c =
		fb_load_relaxed(&fb_handle_chunks[i >> FB_HANDLE_CHUNK_BITS]);

	return &c[i & (FB_HANDLE_CHUNK - 1)];
}

/* A slot never used, from a new chunk if needed.  Context: global_lock
 * held.  Return: false when the table is full or memory is short. */
static bool take_new_locked(uint32_t *i)
{
	struct fb_handle_slot *c;

	if (nr_made == FB_HANDLE_SLOTS)
		return false;
	if (nr_made % FB_HANDLE_CHUNK == 0) {
		c = fb_aligned_alloc(FB_CACHELINE,
				     FB_HANDLE_CHUNK * sizeof(*c));
		if (!c)
			return false;
		memset(c, 0, FB_HANDLE_CHUNK * sizeof(*c));
		for (uint32_t k = 0; k < FB_HANDLE_CHUNK; k++)
			fb_store_relaxed(&c[k].gen, 1);
		fb_store_release(
			&fb_handle_chunks[nr_made >> FB_HANDLE_CHUNK_BITS], c);
	}
	*i = nr_made++;
	return true;
}

/* A bare slot from the global list, else a new one.  Context:
 * global_lock held. */
static bool take_global_locked(uint32_t *i)
{
	if (global_head == FB_HANDLE_NONE)
		return take_new_locked(i);
	*i = global_head;
	global_head = slot_at(*i)->next;
	return true;
}

/* Give the chain of bare slots @first..@last to the global list. */
static void put_global(uint32_t first, uint32_t last)
{
	fb_spin_lock(&global_lock);
	slot_at(last)->next = global_head;
	global_head = first;
	fb_spin_unlock(&global_lock);
}

static void push_bare(struct handle_cache *c, uint32_t i)
{
	slot_at(i)->next = c->bare;
	c->bare = i;
	c->nr_bare++;
}

/* Fill half of @c's empty bare list from the global list.  Return: false
 * if no slot was left. */
static bool refill_bare(struct handle_cache *c)
{
	uint32_t i;

	fb_spin_lock(&global_lock);
	while (c->nr_bare < FB_HANDLE_BATCH && take_global_locked(&i))
		push_bare(c, i);
	fb_spin_unlock(&global_lock);
	return c->nr_bare > 0;
}

/* Move half of @c's full bare list to the global list. */
static void spill_bare(struct handle_cache *c)
{
	uint32_t first = c->bare, last = first;

	for (int n = 1; n < FB_HANDLE_BATCH; n++)
		last = slot_at(last)->next;
	c->bare = slot_at(last)->next;
	c->nr_bare -= FB_HANDLE_BATCH;
	put_global(first, last);
}

/* Move up to @n descriptors of the chain @f to the pool; return the
 * rest of the chain.  Context: global_lock held. */
static struct fb_fiber *pool_put_locked(struct fb_fiber *f, int n)
{
	uint32_t nr = fb_load_relaxed(&pool_nr);

	for (; f && n > 0 && nr < FB_HANDLE_POOL; n--, nr++) {
		struct fb_fiber *next = fb_load_relaxed(&f->wl_next);

		fb_store_relaxed(&f->wl_next, pool);
		pool = f;
		f = next;
	}
	fb_store_relaxed(&pool_nr, nr);
	return f;
}

/* Take a descriptor from the pool, NULL if it is empty.  Context:
 * global_lock held. */
static struct fb_fiber *pool_take_locked(void)
{
	struct fb_fiber *f = pool;

	if (f) {
		uint32_t nr = fb_load_relaxed(&pool_nr) - 1;

		pool = fb_load_relaxed(&f->wl_next);
		fb_store_relaxed(&pool_nr, nr);
		fb_pool_trim_seen(&pool_trim, nr);
	}
	return f;
}

/* Fill half of @c's empty list of descriptors from the pool.  Return:
 * false if the pool had none. */
static fb_noinline bool refill_fibers(struct handle_cache *c)
{
	struct fb_fiber *f;

	fb_spin_lock(&global_lock);
	while (c->nr_fibers < FB_HANDLE_BATCH && (f = pool_take_locked())) {
		fb_store_relaxed(&f->wl_next, c->fibers);
		c->fibers = f;
		c->nr_fibers++;
	}
	fb_spin_unlock(&global_lock);
	return c->fibers != NULL;
}

/* Free the descriptors of the chain @f, give their slots to the global
 * list and their stacks back: to a cache (@unmap false), or to the
 * kernel. */
static void free_chain(struct fb_fiber *f, bool unmap)
{
	uint32_t first = FB_HANDLE_NONE, last = FB_HANDLE_NONE, i;
	struct fb_fiber *rest;

	for (; f; f = rest) {
		rest = fb_load_relaxed(&f->wl_next);
		i = fb_handle_index(f->self);
		if (unmap && f->stack.map)
			fb_stack_unmap(&f->stack);
		else
			fb_stack_release(&f->stack);
		fb_free(f);
		slot_at(i)->next = first;
		first = i;
		if (last == FB_HANDLE_NONE)
			last = i;
	}
	put_global(first, last);
}

/* Move half of @c's full list of descriptors to the pool; what does not
 * fit there is freed, and those slots go to the global list. */
static fb_noinline void spill_fibers(struct handle_cache *c)
{
	struct fb_fiber *f = c->fibers, *rest;
	int n;

	for (n = 1; n < FB_HANDLE_BATCH; n++)
		f = fb_load_relaxed(&f->wl_next);
	rest = fb_load_relaxed(&f->wl_next);
	fb_store_relaxed(&f->wl_next, NULL);
	f = c->fibers;
	c->fibers = rest;
	c->nr_fibers -= FB_HANDLE_BATCH;
	fb_spin_lock(&global_lock);
	f = pool_put_locked(f, FB_HANDLE_BATCH);
	fb_spin_unlock(&global_lock);
	if (f)
		free_chain(f, false);
}

static struct handle_cache *cache_self(void)
{
	struct fb_worker *w = fb_worker_self();

	if (!w)
		return NULL;
	FB_ASSERT(w->id >= 0 && w->id < FIBER_WORKERS_MAX);
	return &caches[w->id];
}

/* A slot for a new descriptor: a bare one, or the slot of a cached
 * descriptor, which is freed (a test armed an allocation failure). */
static bool take_slot(struct handle_cache *c, uint32_t *i)
{
	struct fb_fiber *f;
	bool ok;

	if (!c) {
		fb_spin_lock(&global_lock);
		ok = take_global_locked(i);
		fb_spin_unlock(&global_lock);
		return ok;
	}
	f = c->fibers;
	if (f) {
		c->fibers = fb_load_relaxed(&f->wl_next);
		c->nr_fibers--;
		*i = fb_handle_index(f->self);
		fb_stack_release(&f->stack);
		fb_free(f);
		return true;
	}
	if (!c->nr_bare && !refill_bare(c))
		return false;
	*i = c->bare;
	c->bare = slot_at(*i)->next;
	c->nr_bare--;
	return true;
}

static void put_slot(struct handle_cache *c, uint32_t i)
{
	if (!c) {
		put_global(i, i);
		return;
	}
	if (c->nr_bare == FB_HANDLE_CACHE)
		spill_bare(c);
	push_bare(c, i);
}

/* zero_fiber - memset(@f, 0, sizeof(*f)) in 16-byte stores.  The
 * compiler makes the memset a `rep stos`, whose start-up costs more than
 * the 26 stores on the cores we measured; the empty asm after each store
 * keeps the compiler from turning the loop back into a memset. */
typedef uint64_t fb_zero16 __attribute__((vector_size(16), may_alias));
_Static_assert(sizeof(struct fb_fiber) % 16 == 0, "zero_fiber: whole stores");
static fb_always_inline void zero_fiber(struct fb_fiber *f)
{
	fb_zero16 *p = (fb_zero16 *)(void *)f;

#pragma GCC unroll 32
	for (size_t k = 0; k < sizeof(*f) / 16; k++) {
		p[k] = (fb_zero16){ 0, 0 };
		__asm__("" : : "r"(p + k) : "memory"); /* no memset idiom */
	}
}

/* Zero @f but its stack (a released descriptor may keep its last fiber's,
 * sched/fiber.c) and give it the free slot @s, whose index is @i. */
static struct fb_fiber *attach(struct fb_fiber *f, struct fb_handle_slot *s,
			       uint32_t i)
{
	uintptr_t gen = fb_load_relaxed(&s->gen);
	struct fb_stack stack = f->stack;

	zero_fiber(f);
	f->stack = stack;
	f->slot = s;
	f->self = (fiber_t)(gen << FB_HANDLE_INDEX_BITS | i);
	return f;
}

/* fb_fiber_alloc with a new descriptor: on a foreign thread (@c NULL),
 * with no cached descriptor, or while a test arms an allocation failure. */
static fb_noinline struct fb_fiber *alloc_slow(struct handle_cache *c)
{
	struct fb_fiber *f;
	uint32_t i;

	/* The pool first, unless a test wants the allocator called. */
	if (fb_load_relaxed(&pool_nr) && !fb_fault_armed()) {
		if (c && refill_fibers(c)) {
			f = c->fibers;
			c->fibers = fb_load_relaxed(&f->wl_next);
			c->nr_fibers--;
			return attach(f, f->slot, fb_handle_index(f->self));
		}
		if (!c) {
			fb_spin_lock(&global_lock);
			f = pool_take_locked();
			fb_spin_unlock(&global_lock);
			if (f)
				return attach(f, f->slot,
					      fb_handle_index(f->self));
		}
	}
	if (!take_slot(c, &i))
		return NULL;
	f = fb_aligned_alloc(FB_CACHELINE, sizeof(*f));
	if (!f) {
		put_slot(c, i);
		return NULL;
	}
	f->stack.map = NULL; /* no stack: attach() keeps what is there */
	return attach(f, slot_at(i), i);
}

/*
 * fb_fiber_alloc - a zeroed descriptor with a handle: f->self and f->slot
 * are set, and the handle stays stale until fb_handle_publish.
 * Context: any thread (a worker uses its cache, a foreign thread the
 * global list); may take global_lock; never switches.
 * Return: the descriptor; NULL when memory is short or FB_HANDLE_SLOTS
 * fibers exist.
 */
struct fb_fiber *fb_fiber_alloc(void)
{
	struct handle_cache *c;
	struct fb_fiber *f;

	/* First, so that nothing is live across the call. */
	if (fb_unlikely(fb_fault_armed()))
		return alloc_slow(cache_self());
	c = cache_self();
	if (fb_unlikely(!c || !c->fibers))
		return alloc_slow(c);
	f = c->fibers;
	c->fibers = fb_load_relaxed(&f->wl_next);
	c->nr_fibers--;
	return attach(f, f->slot, fb_handle_index(f->self));
}

/* fb_fiber_free on a foreign thread: to the pool, else to the allocator. */
static fb_noinline void free_foreign(struct fb_fiber *f)
{
	uint32_t i = fb_handle_index(f->self);

	fb_store_relaxed(&f->wl_next, NULL);
	fb_spin_lock(&global_lock);
	f = pool_put_locked(f, 1);
	fb_spin_unlock(&global_lock);
	if (!f)
		return;
	fb_stack_release(&f->stack);
	fb_free(f);
	put_global(i, i);
}

bool fb_fiber_keep_stack(struct fb_worker *w, struct fb_fiber *f)
{
	struct handle_cache *c = &caches[w->id];
	uint32_t n = fb_load_relaxed(&c->kept_stacks);

	if (n >= fb_rt->kept_stacks_max)
		return false;
	fb_store_relaxed(&c->kept_stacks, n + 1);
	f->stack_keeper = (uint16_t)(w->id + 1);
	return true;
}

/* unkeep_stack - @f, whose stack its reaper let it keep, is released by
 * the owner of cache @self (NULL: a foreign thread): take it off its
 * reaper's count (see handle_cache). */
static void unkeep_stack(struct handle_cache *self, struct fb_fiber *f)
{
	struct handle_cache *k = &caches[f->stack_keeper - 1];

	f->stack_keeper = 0;
	if (k == self)
		fb_store_relaxed(&k->kept_stacks,
				 fb_load_relaxed(&k->kept_stacks) - 1);
	else
		atomic_fetch_sub_explicit(&k->kept_stacks, 1,
					  memory_order_relaxed);
}

/*
 * fb_fiber_free - release @f with the slot of its handle, which must be
 * retired (fb_handle_retire_locked) or never published.  A worker keeps
 * both in its cache; a foreign thread frees the descriptor.
 * Context: any thread; may take global_lock; never switches.
 */
void fb_fiber_free(struct fb_fiber *f)
{
	struct handle_cache *c = cache_self();

	if (f->stack_keeper)
		unkeep_stack(c, f);
	if (fb_unlikely(f->pf.allowed)) {
		fb_free(f->pf.allowed);
		f->pf.allowed = NULL;
	}
	if (fb_unlikely(!c)) {
		free_foreign(f);
		return;
	}
	if (fb_unlikely(c->nr_fibers == FB_HANDLE_CACHE))
		spill_fibers(c);
	fb_store_relaxed(&f->wl_next, c->fibers);
	c->fibers = f;
	c->nr_fibers++;
}

unsigned int fb_fiber_pool_trim(uint64_t now, unsigned int max)
{
	struct fb_fiber *chain = NULL, *f;
	unsigned int k, n;

	if (fb_pool_trim_early(&pool_trim, now))
		return 0;
	fb_spin_lock(&global_lock);
	n = fb_load_relaxed(&pool_nr);
	k = fb_pool_trim_count(&pool_trim, n, now, max);
	for (unsigned int i = 0; i < k; i++) {
		f = pool_take_locked();
		fb_store_relaxed(&f->wl_next, chain);
		chain = f;
	}
	fb_spin_unlock(&global_lock);
	if (chain)
		free_chain(chain, true);
	return k;
}

void fb_fiber_pool_shrink(void)
{
	struct fb_fiber *chain = NULL, *f;

	fb_spin_lock(&global_lock);
	while (fb_load_relaxed(&pool_nr) > FB_POOL_KEEP) {
		f = pool_take_locked();
		fb_store_relaxed(&f->wl_next, chain);
		chain = f;
	}
	pool_trim = (struct fb_pool_trim){ 0 };
	fb_spin_unlock(&global_lock);
	if (chain)
		free_chain(chain, true);
}

unsigned int fb_fiber_pool_nr(void)
{
	return fb_load_relaxed(&pool_nr);
}

uint64_t fb_fiber_pool_trim_at(void)
{
	return fb_pool_trim_at(&pool_trim, fb_load_relaxed(&pool_nr));
}

/*
 * fb_handle_atfork - the global list's lock is held over a fork() so the
 * child's copy is whole; in the child the per-worker caches start empty,
 * since a worker of the parent may have been changing its own at the
 * fork (what they held stays allocated, unused).
 */
void fb_handle_atfork(int phase)
{
	if (phase == FB_ATFORK_PREPARE) {
		fb_spin_lock(&global_lock);
		return;
	}
	if (phase == FB_ATFORK_CHILD)
		memset(caches, 0, sizeof(caches));
	fb_spin_unlock(&global_lock);
}
