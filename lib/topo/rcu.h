/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * rcu.h - the domain view's publication (rcu.c): readers bracket their use
 * with fb_topo_read_lock() / fb_topo_read_unlock() and get it with
 * fb_topo_view_get(); a rebuild (a feature such as ASYM_PACKING switched
 * at run time) publishes a new view and frees the old one after a grace
 * period.  Workers report quiescent states instead of locking (QSBR).
 */
#ifndef FB_TOPO_RCU_H
#define FB_TOPO_RCU_H

#include "topo/view.h"

/* ---- RCU publication (topo/rcu.c) --------------------------------------- */

/* The published view; NULL before the first publication.  Written only by
 * fb_topo_view_publish() (release); read with fb_topo_view_get(). */
extern struct fb_sched_view *_Atomic fb_topo_view_current;

/*
 * Worker readers (QSBR, see topo/rcu.c).  A worker thread that went online
 * reads with free sections and reports quiescent states instead: its
 * counter in fb_topo_qs[its id] is odd while it is online and awake, even
 * while it is offline or asleep, and grows by 2 at every scheduling point.
 * Only the owner worker writes it.
 */
struct fb_topo_qs {
	_Atomic unsigned long ctr fb_cacheline_aligned; /* owner worker;
				   release where it ends read sections */
};
extern struct fb_topo_qs fb_topo_qs[FB_MAX_WORKERS];
/* This thread is an online, awake worker: its read sections are free. */
extern __thread bool fb_topo_qsbr_reader
	__attribute__((tls_model("initial-exec")));

void fb_topo_read_lock_slow(void);
void fb_topo_read_unlock_slow(void);

/*
 * fb_topo_read_lock - enter a read-side section of the view.  On a worker
 * thread (fb_topo_worker_online) a compiler barrier; elsewhere a liburcu
 * read lock, which registers the calling thread on its first call (one
 * mutex round trip, then a thread-local test); the registration is dropped
 * when the thread exits.  Sections nest and are short: nothing inside may
 * park, switch fibers, pass a scheduling point (fb_topo_quiescent) or call
 * fb_topo_view_publish().  Lock and unlock must run on the same kernel
 * thread, so a fiber must not switch between them.
 * Context: any thread (worker, fiber, foreign pthread); never blocks except
 * for the first-call registration of a foreign thread.
 */
static inline void fb_topo_read_lock(void)
{
	if (fb_likely(fb_topo_qsbr_reader)) {
		__asm__ __volatile__("" ::: "memory");
		return;
	}
	fb_topo_read_lock_slow();
}

/* fb_topo_read_unlock - leave the section fb_topo_read_lock() opened. */
static inline void fb_topo_read_unlock(void)
{
	if (fb_likely(fb_topo_qsbr_reader)) {
		__asm__ __volatile__("" ::: "memory");
		return;
	}
	fb_topo_read_unlock_slow();
}

/* fb_topo_quiescent - worker @id holds no read section (a scheduling
 * point).  A load and a release store of its own counter.
 * Context: worker @id only, outside read sections. */
static inline void fb_topo_quiescent(int id)
{
	_Atomic unsigned long *c = &fb_topo_qs[id].ctr;

	fb_store_release(c, fb_load_relaxed(c) + 2);
}

/*
 * fb_topo_worker_online - make the calling thread worker @id's reader: its
 * read sections become free and publishers wait for its quiescent states.
 * Without membarrier(2) it stays a liburcu reader.  fb_topo_worker_offline
 * undoes it; a worker goes offline before its thread exits.
 * Context: the worker's thread, outside read sections, once per start.
 */
void fb_topo_worker_online(int id);
void fb_topo_worker_offline(int id);

/*
 * fb_topo_worker_sleep - worker @id is about to block for a long time (the
 * idle sleep): publishers stop waiting for it.  Until
 * fb_topo_worker_wake(), its read sections (timers and I/O events handled
 * around the sleep) go through liburcu like a foreign thread's.
 * Context: worker @id, outside read sections; no-op if not online.
 */
void fb_topo_worker_sleep(int id);
void fb_topo_worker_wake(int id);

/* fb_topo_view_get - the current view.  Context: inside a read-side
 * section; the view stays valid until the matching unlock. */
static inline struct fb_sched_view *fb_topo_view_get(void)
{
	return fb_load_acquire(&fb_topo_view_current);
}

/*
 * fb_topo_view_publish - make @v (or NULL) the current view, wait for a
 * grace period and free the view it replaced.  A new view with the same
 * LLCs as the old one takes over the old fb_llc_shared objects, so their
 * counters survive the rebuild.  Publishers are serialised by a mutex.
 * Context: any thread outside a read-side section; blocks for one grace
 * period: until every foreign reader left its section and every other
 * online worker passed a scheduling point or slept (the caller's worker
 * runs no fiber meanwhile; a fiber that never yields delays it).
 */
void fb_topo_view_publish(struct fb_sched_view *v);

/*
 * fb_topo_view_rebuild - build a view of @t for @nr_workers with @flags and
 * publish it (for a feature switch such as ASYM_PACKING).  On error the
 * current view stays.  Context: as fb_topo_view_publish().
 * Return: 0; EINVAL, ENOMEM as fb_topo_view_build().
 */
int fb_topo_view_rebuild(const struct fb_topo *t, int nr_workers,
			 unsigned flags);

/*
 * fb_topo_view_switch - fb_topo_view_publish() that never waits for the
 * workers: the view it replaced is freed by a later publish, once every
 * worker has passed a scheduling point or slept since (topo/rcu.c).
 * fb_topo_view_rebuild_nowait - fb_topo_view_rebuild() with it.
 * Context: any thread outside a read-side section; waits only for the
 * foreign readers' sections, which are short.
 */
void fb_topo_view_switch(struct fb_sched_view *v);
int fb_topo_view_rebuild_nowait(const struct fb_topo *t, int nr_workers,
				unsigned flags);
/* Views freed so far, for the tests. */
extern _Atomic long fb_topo_views_freed;
/* fb_topo_rcu_qsbr - do online workers read as QSBR readers (the kernel
 * has membarrier), rather than through liburcu?  Context: any thread. */
bool fb_topo_rcu_qsbr(void);

/* fb_topo_rcu_unregister_thread - drop the calling thread's liburcu
 * registration now (it is otherwise dropped at thread exit).  Context: a
 * thread outside any read-side section; harmless if never registered. */
void fb_topo_rcu_unregister_thread(void);
/* fb_topo_atfork_child - the forked child's RCU state (topo/rcu.c): no
 * reader of the parent is waited for, no view is freed.  Context: the
 * child's only thread, in the atfork handler. */
void fb_topo_atfork_child(void);

#endif /* FB_TOPO_RCU_H */
