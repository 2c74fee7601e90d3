/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api/fiber.c - the fiber API: attributes, create, join, detach, exit, yield,
 * affinity, names and ids, the version.  The end of a fiber's life (reap)
 * and fiber-local storage are the scheduler's (sched/fiber.c).
 *
 * Lifetime.  A descriptor lives until the fiber has exited and been joined
 * (joinable) or until it has exited (detached).  The fiber cannot free its
 * own stack while running on it, so the worker that switches away from a
 * DEAD fiber reaps it (fb_fiber_reap): the stack goes to that worker's
 * cache, then the join handshake runs under the lock of the fiber's handle
 * slot (sched/handle.c); after that the worker never touches the
 * descriptor again, so a joiner may free it.  Whoever releases the
 * descriptor (the joiner, the detacher of an exited fiber, or the reaper
 * of a detached one) retires the handle under that lock first, so a join
 * or detach that comes later, or races with the release, finds a stale
 * handle (ESRCH) and never the descriptor, which may already serve another
 * fiber.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "base/sanitizer.h"
#include "sched/sched.h"
#include "version.h"

/* The next fiber id nobody has.  A worker takes a block of FB_ID_BLOCK
 * at a time and hands them out alone, so that a creation on a worker
 * costs no atomic add on a line every worker writes; ids stay unique in
 * the process and never come back, but do not follow the order of
 * creation across workers, as fiber_id(3) says.  A foreign thread takes
 * one at a time. */
#define FB_ID_BLOCK 256
static _Atomic uint64_t next_id = 1;

/* new_id - an id for a fiber that the calling thread creates. */
static uint64_t new_id(void)
{
	struct fb_worker *w = fb_worker_self();

	if (!w)
		return fb_add_relaxed(&next_id, 1);
	if (fb_unlikely(w->ids_next == w->ids_end)) {
		w->ids_next = fb_add_relaxed(&next_id, FB_ID_BLOCK);
		w->ids_end = w->ids_next + FB_ID_BLOCK;
	}
	return w->ids_next++;
}

/* ---- attributes ---------------------------------------------------------- */

/* What a fiber_attr_t holds; @magic says fiber_attr_init() made it. */
struct fb_attr {
	uint32_t magic;
	int detached;
	size_t stack_size; /* 0: the runtime's default */
	char name[32];
	bool has_affinity;
	cpu_set_t affinity; /* over worker ids */
};
#define FB_ATTR_MAGIC 0x66617474u /* "fatt" */
_Static_assert(sizeof(struct fb_attr) <= sizeof(fiber_attr_t),
	       "struct fb_attr does not fit in fiber_attr_t");
_Static_assert(sizeof(cpu_set_t) == sizeof(fiber_workerset_t),
	       "fiber_workerset_t is laid out as cpu_set_t");

/* The attributes behind @a, NULL if @a is NULL or not initialised. */
static struct fb_attr *attr_of(const fiber_attr_t *a)
{
	struct fb_attr *p = (struct fb_attr *)(void *)a;

	return p && p->magic == FB_ATTR_MAGIC ? p : NULL;
}

int fiber_attr_init(fiber_attr_t *attr)
{
	struct fb_attr *a = (struct fb_attr *)(void *)attr;

	if (!attr)
		return EINVAL;
	memset(attr, 0, sizeof(*attr));
	a->magic = FB_ATTR_MAGIC;
	return 0;
}

int fiber_attr_destroy(fiber_attr_t *attr)
{
	struct fb_attr *a = attr_of(attr);

	if (!a)
		return EINVAL;
	a->magic = 0;
	return 0;
}

int fiber_attr_setstacksize(fiber_attr_t *attr, size_t size)
{
	struct fb_attr *a = attr_of(attr);

	if (!a || size < FIBER_STACK_MIN || size > (1UL << 30))
		return EINVAL;
	a->stack_size = size;
	return 0;
}

int fiber_attr_getstacksize(const fiber_attr_t *attr, size_t *size)
{
	struct fb_attr *a = attr_of(attr);

	if (!a || !size)
		return EINVAL;
	*size = a->stack_size ? a->stack_size : fb_runtime_stack_size();
	return 0;
}

int fiber_attr_setname(fiber_attr_t *attr, const char *name)
{
	struct fb_attr *a = attr_of(attr);

	if (!a || !name)
		return EINVAL;
	snprintf(a->name, sizeof(a->name), "%s", name);
	return 0;
}

int fiber_attr_setdetachstate(fiber_attr_t *attr, int state)
{
	struct fb_attr *a = attr_of(attr);

	if (!a ||
	    (state != FIBER_CREATE_JOINABLE && state != FIBER_CREATE_DETACHED))
		return EINVAL;
	a->detached = state;
	return 0;
}

int fiber_attr_setaffinity(fiber_attr_t *attr, size_t setsize, const void *set)
{
	struct fb_attr *a = attr_of(attr);
	cpu_set_t s;

	if (!a || !set || setsize == 0)
		return EINVAL;
	CPU_ZERO(&s);
	memcpy(&s, set, FB_MIN(setsize, sizeof(s)));
	if (CPU_COUNT(&s) == 0)
		return EINVAL; /* the attribute keeps what it had */
	a->affinity = s;
	a->has_affinity = true;
	return 0;
}

const char *fiber_version(void)
{
	return FB_VERSION_STRING; /* version.h, made at build time */
}

/* ---- stacks, affinity, the live-fiber registry ----------------------------- */

static int stack_get(struct fb_fiber *f, size_t size, int t)
{
	struct fb_worker *w = fb_worker_self();
	int node = fb_runtime_worker_node(t);
	/* The per-worker caches serve only stacks of the creator's node. */
	bool cached = w && w->node == node && !fb_fault_armed();

	/* A reused descriptor may bring its last fiber's stack along
	 * (sched/fiber.c). */
	if (f->stack.map) {
		if (cached && fb_stack_fits(&f->stack, size))
			return 0;
		fb_stack_release(&f->stack);
	}
	if (cached && fb_stack_cache_get(&w->stacks, size, &f->stack))
		return 0;
	return fb_stack_map(&f->stack, size, node);
}

/*
 * set_affinity - @pf may run on the workers of @set.  The copy it keeps
 * covers the runtime's workers only, CPU_ALLOC_SIZE(n) bytes with the bits
 * from n on cleared (place/place.h): the runtime's workers all fit in the
 * cpu_set_t (FIBER_WORKERS_MAX), and a small runtime's copy is small.
 */
static int set_affinity(struct fb_pfiber *pf, const cpu_set_t *set)
{
	int n = fb_runtime_nr_workers(), nr = 0;
	size_t size = CPU_ALLOC_SIZE(n);
	cpu_set_t *a;

	_Static_assert(FIBER_WORKERS_MAX <= CPU_SETSIZE &&
			       FIBER_WORKERS_MAX <= FB_MAX_WORKERS,
		       "a runtime's worker ids fit in a cpu_set_t");
	for (int i = 0; i < n; i++)
		nr += CPU_ISSET(i, set) != 0;
	if (nr == 0)
		return EINVAL;
	if (nr == n) {
		fb_free(pf->allowed);
		pf->allowed = NULL;
		pf->nr_allowed = 0;
		pf->custom_affinity = false;
		fb_write_once(&pf->pin, -1);
		return 0;
	}
	a = fb_malloc(size);
	if (!a)
		return ENOMEM;
	memcpy(a, set, size);
	for (size_t i = (size_t)n; i < size * 8; i++)
		CPU_CLR_S(i, size, a);
	fb_free(pf->allowed);
	pf->allowed = a;
	pf->nr_allowed = nr;
	pf->custom_affinity = true;
	fb_write_once(&pf->pin, -1);
	if (nr == 1)
		for (int i = 0; i < n; i++)
			if (CPU_ISSET(i, set))
				fb_write_once(&pf->pin, i);
	return 0;
}

/* ---- create, join, detach, exit -------------------------------------------- */

static int create(fiber_t *fiber, const struct fb_attr *attr,
		  void *(*fn)(void *), void *arg);

int fiber_create(fiber_t *fiber, const fiber_attr_t *attr_pub,
		 void *(*fn)(void *), void *arg)
{
	const struct fb_attr *attr = attr_of(attr_pub);
	bool foreign;
	int rc;

	if (!fiber || !fn || (attr_pub && !attr))
		return EINVAL;
	rc = fb_runtime_get();
	if (rc)
		return rc;
	/* Through the gate (sched/sched.h): a shutdown that has begun refuses. */
	foreign = !fb_worker_self();
	if (foreign ? !fb_rt_enter() : !fb_load_relaxed(&fb_rt_accepting))
		return ESHUTDOWN;
	/* Dekker with fiber_shutdown(), as fb_rt_enter() with the gate. */
	if (foreign && !fb_load_seqcst(&fb_rt_accepting)) {
		fb_rt_leave();
		return ESHUTDOWN;
	}
	rc = create(fiber, attr, fn, arg);
	if (foreign)
		fb_rt_leave();
	return rc;
}

/* create - fiber_create() inside the gate; @attr NULL for defaults. */
static int create(fiber_t *fiber, const struct fb_attr *attr,
		  void *(*fn)(void *), void *arg)
{
	struct fb_fiber *f;
	size_t size;
	int rc, t;

	size = attr && attr->stack_size ? attr->stack_size :
					  fb_runtime_stack_size();
	if (size < FIBER_STACK_MIN)
		return EINVAL;
	f = fb_fiber_alloc();
	if (!f)
		return EAGAIN;
	f->epoch = fb_load_relaxed(&fb_rt_epoch);
	fb_write_once(&f->pf.pin, -1);
	f->pf.prev = -1;
	f->pf.recent_used = -1;
	f->pf.group = NULL;
	f->pf.attached = -1; /* attached where it first runs (sched/sched.h) */
	/* Every fiber weighs 1024 (doc/scheduler.md 1.3.2). */
	f->pf.weight = FB_PELT_CAPACITY;
	if (attr && attr->has_affinity) {
		rc = set_affinity(&f->pf, &attr->affinity);
		if (rc)
			goto fail;
	}
	t = fb_sched_select_create(f);
	rc = stack_get(f, size, t);
	if (rc)
		goto fail;
	fb_san_unpoison((char *)fb_stack_top(&f->stack) - f->stack.size,
			f->stack.size);
	f->sp = fb_ctx_make(fb_stack_top(&f->stack));
	f->fn = fn;
	f->arg = arg;
	f->join = attr && attr->detached ? FB_DETACHED : FB_JOINABLE;
	f->id = new_id();
	if (attr && attr->name[0])
		memcpy(f->name, attr->name, sizeof(f->name));
	fb_san_fiber_create(&f->san,
			    (char *)fb_stack_top(&f->stack) - f->stack.size,
			    f->stack.size);
	fb_fiber_registry_add(f, t);
	*fiber = f->self;
	fb_handle_publish(f->slot, f);
	fb_sched_enqueue_new(f, t);
	return 0;
fail:
	fb_fiber_free(f);
	return rc == ENOMEM ? EAGAIN : rc;
}

/* never_ends - @f was abandoned by a fiber_shutdown(), or is a live fiber
 * of an earlier runtime (a fork child's copy of its parent's fibers).
 * Context: @f's slot lock held. */
static bool never_ends(const struct fb_fiber *f)
{
	return f->abandoned ||
	       (!f->exited && f->epoch != fb_load_relaxed(&fb_rt_epoch));
}

/*
 * join_until - fiber_join() that gives up at @deadline.  A joiner that
 * leaves without the reaper (timed out) does so under the slot lock, and
 * the reaper takes the joiner under that lock too (sched/fiber.c), so
 * either the reaper woke it or it finds its join state as it left it.
 */
static int join_until(fiber_t h, void **retval, uint64_t deadline)
{
	struct fb_fiber *cur = fb_current(), *f;
	struct fb_handle_slot *s;
	struct fb_waiter w;
	int err;

	if (!h)
		return ESRCH;
	if (cur && cur->self == h)
		return EDEADLK;
	err = fb_cancel_point();
	if (err)
		return err;
	f = fb_handle_lock(h, &s);
	if (!f)
		return ESRCH;
	if (never_ends(f)) {
		fb_spin_unlock(&s->lock);
		return ESHUTDOWN;
	}
	if (f->join != FB_JOINABLE) {
		fb_spin_unlock(&s->lock);
		return EINVAL;
	}
	f->join = FB_JOINING;
	if (!f->exited) {
		/* The reaper retires the handle before it wakes us. */
		fb_waiter_prepare(&w, FB_WAIT_JOIN | FB_WAIT_CANCELLABLE, f);
		w.data = (uintptr_t)f->id; /* for the dump: @f may be freed */
		fb_store_relaxed(&f->joiner, &w);
		err = fb_waiter_wait_keep(&w, &s->lock, deadline);
		if (err == ETIMEDOUT || err == ECANCELED) {
			/* s->lock held, f alive: the reaper did not take us */
			fb_store_relaxed(&f->joiner, NULL);
			f->join = FB_JOINABLE;
			fb_spin_unlock(&s->lock);
			if (err == ECANCELED)
				fb_cancel_consume();
			return err;
		}
		if (err) { /* abandoned while we waited */
			fb_spin_lock(&s->lock);
			f->join = FB_JOINABLE;
			fb_spin_unlock(&s->lock);
			return err;
		}
	} else {
		fb_handle_retire_locked(s);
		fb_spin_unlock(&s->lock);
	}
	if (retval)
		*retval = f->retval;
	fb_fiber_free(f);
	return 0;
}

int fiber_join(fiber_t h, void **retval)
{
	return join_until(h, retval, FB_NO_DEADLINE);
}

int fiber_join_until(fiber_t h, void **retval, uint64_t deadline)
{
	return join_until(h, retval, deadline);
}

/*
 * fiber_cancel - make @h's current or next cancellation point return
 * ECANCELED (sched/cancel.c).  The calling fiber may cancel itself.
 * Context: any thread; never switches.
 * Return: 0; ESRCH for NULL, a stale handle or a fiber that has exited;
 * ESHUTDOWN if fiber_shutdown() abandoned it.
 */
int fiber_cancel(fiber_t h)
{
	struct fb_handle_slot *s;
	struct fb_fiber *f;
	bool claimed = false;
	int err = 0;

	if (!h)
		return ESRCH;
	f = fb_handle_lock(h, &s);
	if (!f)
		return ESRCH;
	if (never_ends(f))
		err = ESHUTDOWN;
	else if (f->exited)
		err = ESRCH;
	else
		claimed = fb_cancel_request(f);
	fb_spin_unlock(&s->lock);
	/* A claimed wait cannot end before this wake, so @f is alive. */
	if (claimed)
		fb_fiber_wake(f, 0);
	return err;
}

int fiber_detach(fiber_t h)
{
	struct fb_handle_slot *s;
	struct fb_fiber *f;
	bool free_it;

	if (!h)
		return ESRCH;
	f = fb_handle_lock(h, &s);
	if (!f)
		return ESRCH;
	if (f->join != FB_JOINABLE) {
		fb_spin_unlock(&s->lock);
		return EINVAL;
	}
	f->join = FB_DETACHED;
	free_it = f->exited;
	if (free_it)
		fb_handle_retire_locked(s);
	fb_spin_unlock(&s->lock);
	if (free_it)
		fb_fiber_free(f);
	return 0;
}

void fiber_exit(void *retval)
{
	if (fb_current())
		fb_fiber_exit_self(retval);
}

int fiber_yield(void)
{
	if (!fb_current())
		return EPERM;
	fb_sched_yield();
	return 0;
}

fiber_t fiber_self(void)
{
	struct fb_fiber *f = fb_current();

	return f ? f->self : NULL;
}

uint64_t fiber_id(fiber_t h)
{
	struct fb_handle_slot *s;
	struct fb_fiber *f;
	uint64_t id;

	if (!h || !(f = fb_handle_lock(h, &s)))
		return 0;
	id = f->id;
	fb_spin_unlock(&s->lock);
	return id;
}

const char *fiber_name(fiber_t h)
{
	struct fb_handle_slot *s;
	struct fb_fiber *f;

	if (!h || !(f = fb_handle_lock(h, &s)))
		return NULL;
	fb_spin_unlock(&s->lock);
	return f->name;
}

int fiber_setaffinity(size_t setsize, const void *set)
{
	struct fb_fiber *f = fb_current();
	cpu_set_t s;
	int rc;

	if (!f)
		return EPERM;
	if (!set || !setsize)
		return EINVAL;
	CPU_ZERO(&s);
	memcpy(&s, set, FB_MIN(setsize, sizeof(s)));
	rc = set_affinity(&f->pf, &s);
	if (rc)
		return rc;
	/* what balancers read of the running fiber (sched/balance.c) */
	__atomic_store_n(&fb_worker_self()->curr_pin, f->pf.pin,
			 __ATOMIC_RELAXED);
	if (!fb_pfiber_allows(&f->pf, fiber_current_worker()))
		fb_sched_migrate();
	return 0;
}
