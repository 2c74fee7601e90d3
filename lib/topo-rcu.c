/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * topo-rcu.c - publishing the domain view with liburcu.
 *
 * Placement reads the view on every wake and create, from workers and from
 * foreign threads (any pthread may wake a fiber), and must not take a lock
 * there.  The view changes rarely: when a feature that changes domain
 * flags (ASYM_PACKING) is switched through the API.  That is RCU's case: a
 * reader brackets its use with fb_topo_read_lock()/fb_topo_read_unlock()
 * and loads fb_topo_view_current with acquire ordering; the publisher
 * stores the new pointer with release ordering, waits for a grace period
 * (every reader that could still hold the old pointer has unlocked) and
 * frees the old view.
 *
 * Flavour: urcu-memb (the library's default flavour, what pkg-config's
 * "liburcu" links).  Its read side is a thread-local counter update and a
 * compiler barrier; the writer pays with membarrier(2) (or falls back to
 * full barriers in readers on kernels without it).  The alternatives:
 *  - urcu-qsbr has free read sides but needs every reader to announce
 *    quiescent states regularly; a foreign thread that wakes one fiber and
 *    then blocks elsewhere for an hour would stall every grace period.
 *  - urcu-bp registers readers by itself, which suits foreign threads, but
 *    its read side is slower and it is a separate library (-lurcu-bp) the
 *    build does not link.
 *  - urcu-mb puts a full barrier in every read side; urcu-signal steals a
 *    signal from the application.
 * memb needs each reader thread registered; we do that lazily: the first
 * fb_topo_read_lock() of a thread registers it (one mutex round trip inside
 * liburcu) and sets a pthread key whose destructor unregisters it when the
 * thread exits, so neither the core nor foreign threads have to call
 * anything.  A thread that stays alive but stops reading may call
 * fb_topo_rcu_unregister_thread().
 *
 * Memory ordering: the release store of the pointer orders the whole
 * construction of the view before its publication; a reader's acquire load
 * orders its reads of the view after it.  urcu_memb_synchronize_rcu()
 * returns only after every reader that might have loaded the old pointer
 * has left its read-side section, so the old view can be freed.
 *
 * The per-LLC counters (struct fb_llc_shared) must not restart when the
 * view is rebuilt while workers sleep, or nr_busy_workers would drift; a
 * new view with the same LLCs therefore takes over the old view's objects
 * (reference counted) before it is published.
 */
#define _LGPL_SOURCE 1
#include <pthread.h>
#include <urcu/urcu-memb.h>

#include "common.h"
#include "topo.h"

struct fb_sched_view *_Atomic fb_topo_view_current;

static __thread bool registered; /* this thread is a liburcu reader */
static pthread_key_t reader_key; /* destructor unregisters */
static pthread_once_t reader_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t publish_lock = PTHREAD_MUTEX_INITIALIZER;

static void reader_exit(void *arg)
{
	(void)arg;
	if (registered) {
		urcu_memb_unregister_thread();
		registered = false;
	}
}

static void reader_key_create(void)
{
	if (pthread_key_create(&reader_key, reader_exit) != 0)
		fb_die(__FILE__, __LINE__,
		       "no pthread key left for the RCU reader registration");
}

static fb_noinline void register_slow(void)
{
	pthread_once(&reader_once, reader_key_create);
	urcu_memb_register_thread();
	pthread_setspecific(reader_key, (void *)1);
	registered = true;
}

void fb_topo_read_lock(void)
{
	if (fb_unlikely(!registered))
		register_slow();
	urcu_memb_read_lock();
}

void fb_topo_read_unlock(void)
{
	urcu_memb_read_unlock();
}

void fb_topo_rcu_unregister_thread(void)
{
	if (!registered)
		return;
	FB_BUG_ON(urcu_memb_read_ongoing());
	pthread_setspecific(reader_key, NULL);
	urcu_memb_unregister_thread();
	registered = false;
}

void fb_topo_view_publish(struct fb_sched_view *v)
{
	struct fb_sched_view *old;

	FB_BUG_ON(registered && urcu_memb_read_ongoing());
	pthread_mutex_lock(&publish_lock);
	old = fb_load_relaxed(&fb_topo_view_current);
	if (v)
		fb_topo_llc_block_adopt(v, old);
	fb_store_release(&fb_topo_view_current, v);
	if (old)
		urcu_memb_synchronize_rcu();
	pthread_mutex_unlock(&publish_lock);
	fb_topo_view_free(old);
}

int fb_topo_view_rebuild(const struct fb_topo *t, int nr_workers,
			 unsigned flags)
{
	struct fb_sched_view *v;
	int rc = fb_topo_view_build(t, nr_workers, flags, &v);

	if (rc)
		return rc;
	fb_topo_view_publish(v);
	return 0;
}
