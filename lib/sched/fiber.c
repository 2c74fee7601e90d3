/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api/fiber.c - the end of a fiber's life and what lives with it: the registry
 * of live fibers (for debuggers and the shutdown report), the reap that
 * frees a dead fiber's stack and runs the join handshake, the exit path
 * with its key destructors, and fiber-local storage (fiber_key_*).  The
 * lifetime argument is in api/fiber.c's opening comment.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <fiber.h>

#include "base/sanitizer.h"
#include "sched/sched.h"

/*
 * The registry of live fibers, for debuggers (lib/libfiber-gdb.py, "info
 * fibers"): each fiber is on the list of the worker it was created for
 * from fiber_create until its reap.  Cost: one spinlock round trip on that
 * worker's live_lock (its own cache line) at create and one at exit, no
 * allocation; contended only when several workers create for, or reap
 * fibers of, the same worker at once.  Always on, because the debugger is
 * most needed on the build that was not prepared for it.
 */
void fb_fiber_registry_add(struct fb_fiber *f, int t)
{
	struct fb_worker *w = fb_rt->workers[t]; /* t: a worker of fb_rt */

	f->live_worker = t;
	fb_spin_lock(&w->live_lock);
	fb_list_add_tail(&f->live_node, &w->live);
	fb_spin_unlock(&w->live_lock);
}

static void registry_del(struct fb_fiber *f)
{
	struct fb_worker *w = fb_rt->workers[f->live_worker];

	fb_spin_lock(&w->live_lock);
	fb_list_del(&f->live_node);
	fb_spin_unlock(&w->live_lock);
}

static void run_key_destructors(struct fb_fiber *f);

/*
 * The exit hand-off.  A fiber joined by a fiber of its own worker (create
 * and join in one fiber, the commonest join) would otherwise die into the
 * idle loop, which reaps it, wakes the joiner and switches again.  The
 * dying fiber does the join handshake itself instead, under the slot
 * lock as the reaper would, and makes the joiner its worker's runnext;
 * its last switch goes to the joiner, whose finish_switch reaps the
 * stack before the join returns.  Nothing else can reach @f meanwhile:
 * its handle is retired, and the joiner, who frees it, does not run
 * before that reap.  The joiner must be parked off its stack on this
 * worker (fb_sched_handoff_ok), else the reap wakes it as before.
 */
void fb_fiber_exit_handoff(struct fb_worker *w, struct fb_fiber *f)
{
	struct fb_handle_slot *s = f->slot;
	struct fb_waiter *joiner;

	/* The caller saw a joiner; one that leaves meanwhile (timed out)
	 * is seen under the lock below, and one that comes later finds the
	 * fiber not exited and waits for the reap. */
	if (!fb_sched_handoff_ok(w, NULL))
		return;
	fb_spin_lock(&s->lock);
	joiner = fb_load_relaxed(&f->joiner);
	if (!joiner || !joiner->fiber ||
	    !fb_sched_handoff_ok(w, joiner->fiber) ||
	    !fb_waiter_claim(joiner, FB_CLAIM_WOKEN)) {
		fb_spin_unlock(&s->lock);
		return;
	}
	f->exited = true; /* tells the reap that this is done */
	fb_cancel_drop(f);
	fb_handle_retire_locked(s);
	fb_spin_unlock(&s->lock);
	fb_sched_handoff(w, joiner->fiber);
}

/*
 * The stack.  A descriptor keeps its stack, which goes with it to the
 * descriptor caches (sched/handle.c) when it is released and serves the
 * next create that takes it: one cache operation instead of two per
 * fiber.  That holds for a descriptor released at once (detached, or its
 * joiner is there) and for a fiber that nobody joins yet, as a thread's
 * stack stays until pthread_join(), up to a bound per reaping worker
 * (fb_fiber_keep_stack): past it, such a fiber gives its stack to this
 * worker's stack cache, under the slot lock's protection, since a join
 * that comes once the lock is dropped may free the descriptor at once.
 */
void fb_fiber_reap(struct fb_worker *w, struct fb_fiber *f)
{
	struct fb_handle_slot *s = f->slot;
	struct fb_stack stack = { 0 };
	struct fb_waiter *joiner;
	bool free_it;

	registry_del(f);
	fb_san_fiber_destroy(&f->san);
	if (f->exited) { /* fb_fiber_exit_handoff() did the rest */
		fb_sched_fiber_reaped();
		return;
	}
	fb_spin_lock(&s->lock);
	f->exited = true;
	fb_cancel_drop(f); /* fiber_cancel() says ESRCH from now on */
	joiner = fb_load_relaxed(&f->joiner);
	/* Claimed under the lock: a joiner that timed out leaves under it
	 * (api/fiber.c), and then the fiber stays joinable. */
	if (joiner && !fb_waiter_claim(joiner, FB_CLAIM_WOKEN))
		joiner = NULL;
	free_it = f->join == FB_DETACHED;
	if (joiner || free_it) {
		fb_handle_retire_locked(s);
	} else if (!fb_fiber_keep_stack(w, f)) {
		stack = f->stack;
		f->stack.map = NULL;
	}
	fb_spin_unlock(&s->lock);
	if (stack.map)
		fb_stack_cache_put(&w->stacks, &stack);
	fb_sched_fiber_reaped();
	/* Behind the queue: a joiner that joins a batch in turn finds the
	 * rest of it done when it runs, instead of waking once a fiber. */
	if (joiner)
		fb_waiter_wake(joiner, FB_WF_QUEUE);
	else if (free_it)
		fb_fiber_free(f);
}

void fb_fiber_exit_self(void *retval)
{
	struct fb_fiber *f = fb_current();

	f->retval = retval;
	run_key_destructors(f);
	fb_sched_exit();
}

/* ---- fiber-local storage ----------------------------------------------------- */

/*
 * A key names a slot of keys[] and the generation that slot had when the
 * key was made:
 *
 *	key = gen * FIBER_KEYS_MAX + slot,	1 <= gen <= KEY_GEN_MAX
 *
 * so 0 is never a key.  Deleting a key frees its slot; the next key made
 * there gets the next generation, and the deleted key's value, which
 * differs, matches no live key again (until the generation wraps, after
 * KEY_GEN_MAX keys made in one slot).  Each fiber's value records the key
 * it was set under: a value whose key is not its slot's live key reads as
 * NULL and goes to no destructor, so a new key reads NULL in every fiber,
 * as POSIX asks.
 *
 * keys[].live is written under keys_lock and read without it (relaxed) by
 * fiber_getspecific and fiber_setspecific, which only compare it with the
 * caller's key.  A fiber that uses a key while another thread deletes it
 * sees the key either alive or deleted; nothing else is read through it.
 * The destructor is read under keys_lock together with live, so a value is
 * never passed to the destructor of a key made after its own was deleted.
 */
#define KEY_GEN_MAX (UINT_MAX / FIBER_KEYS_MAX)

static struct fb_spinlock keys_lock;
static struct {
	_Atomic fiber_key_t live; /* the key made here, 0 while free */
	unsigned int gen;	  /* of the last key made here; keys_lock */
	void (*dtor)(void *);	  /* keys_lock */
} keys[FIBER_KEYS_MAX];

static unsigned int key_slot(fiber_key_t key)
{
	return key % FIBER_KEYS_MAX;
}

static bool key_live(fiber_key_t key)
{
	return key && fb_load_relaxed(&keys[key_slot(key)].live) == key;
}

int fiber_key_create(fiber_key_t *key, void (*destructor)(void *))
{
	if (!key)
		return EINVAL;
	fb_spin_lock(&keys_lock);
	for (unsigned int i = 0; i < FIBER_KEYS_MAX; i++) {
		fiber_key_t k;

		if (fb_load_relaxed(&keys[i].live))
			continue;
		keys[i].gen = keys[i].gen % KEY_GEN_MAX + 1;
		keys[i].dtor = destructor;
		k = keys[i].gen * FIBER_KEYS_MAX + i;
		fb_store_relaxed(&keys[i].live, k);
		fb_spin_unlock(&keys_lock);
		*key = k;
		return 0;
	}
	fb_spin_unlock(&keys_lock);
	return EAGAIN;
}

int fiber_key_delete(fiber_key_t key)
{
	unsigned int i = key_slot(key);
	int rc = 0;

	fb_spin_lock(&keys_lock);
	if (key_live(key)) {
		fb_store_relaxed(&keys[i].live, 0);
		keys[i].dtor = NULL;
	} else {
		rc = EINVAL;
	}
	fb_spin_unlock(&keys_lock);
	return rc;
}

void *fiber_getspecific(fiber_key_t key)
{
	struct fb_fiber *f = fb_current();
	struct fb_specific *v;

	if (!f || !f->specific || !key_live(key))
		return NULL;
	v = &f->specific[key_slot(key)];
	return v->key == key ? v->value : NULL;
}

int fiber_setspecific(fiber_key_t key, const void *value)
{
	struct fb_fiber *f = fb_current();
	struct fb_specific *v;

	if (!f)
		return EPERM;
	if (!key_live(key))
		return EINVAL;
	if (!f->specific) {
		f->specific = fb_calloc(FIBER_KEYS_MAX, sizeof(*f->specific));
		if (!f->specific)
			return ENOMEM;
	}
	v = &f->specific[key_slot(key)];
	v->value = (void *)value;
	v->key = key;
	return 0;
}

/* The destructor of @key if it is still alive, else NULL. */
static void (*key_dtor(fiber_key_t key))(void *)
{
	void (*dtor)(void *) = NULL;

	fb_spin_lock(&keys_lock);
	if (key_live(key))
		dtor = keys[key_slot(key)].dtor;
	fb_spin_unlock(&keys_lock);
	return dtor;
}

/* As pthreads: call each non-NULL value's destructor, with the slot
 * cleared first; repeat while destructors ran (at most 4 rounds, POSIX's
 * PTHREAD_DESTRUCTOR_ITERATIONS).  A value set under a key that was
 * deleted since is dropped. */
static void run_key_destructors(struct fb_fiber *f)
{
	if (!f->specific)
		return;
	for (int round = 0; round < 4; round++) {
		bool again = false;

		for (unsigned int i = 0; i < FIBER_KEYS_MAX; i++) {
			struct fb_specific *v = &f->specific[i];
			void *value = v->value;
			void (*dtor)(void *);

			if (!value)
				continue;
			v->value = NULL;
			dtor = key_dtor(v->key);
			if (dtor) {
				dtor(value);
				again = true;
			}
		}
		if (!again)
			break;
	}
	fb_free(f->specific);
	f->specific = NULL;
}

/* The key table across fork(): held over it so the child's copy is
 * whole (sched/runtime.c's atfork handlers). */
void fb_fiber_atfork(int phase)
{
	if (phase == FB_ATFORK_PREPARE)
		fb_spin_lock(&keys_lock);
	else
		fb_spin_unlock(&keys_lock);
}
