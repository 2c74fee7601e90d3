/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * rcu.c - publishing the domain view: liburcu for foreign threads,
 * quiescent-state reports for workers.
 *
 * Placement reads the view on every wake and create, from workers and from
 * foreign threads (any pthread may wake a fiber), and must not take a lock
 * there.  The view changes rarely: when a feature that changes domain
 * flags (ASYM_PACKING) is switched through the API.  That is RCU's case: a
 * reader brackets its use with fb_topo_read_lock()/fb_topo_read_unlock()
 * and loads fb_topo_view_current with acquire ordering; the publisher
 * stores the new pointer with release ordering, waits for a grace period
 * (every reader that could still hold the old pointer has unlocked) and
 * frees the old view.  There are two kinds of reader, with two ways of
 * waiting for them.
 *
 * Foreign threads: urcu-memb (the library's default flavour, what
 * pkg-config's "liburcu" links).  Its read side is a thread-local counter
 * update and a compiler barrier, but from a shared library that thread
 * local costs a __tls_get_addr() call in every lock and unlock; the writer
 * pays with membarrier(2).  The alternatives:
 *  - urcu-qsbr for every thread: a foreign thread that wakes one fiber and
 *    then blocks elsewhere for an hour would stall every grace period.
 *  - urcu-bp registers readers by itself, which suits foreign threads, but
 *    its read side is slower and it is a separate library (-lurcu-bp) the
 *    build does not link.
 *  - urcu-mb puts a full barrier in every read side; urcu-signal steals a
 *    signal from the application.
 * memb needs each reader thread registered; we do that lazily: the first
 * read section of a thread registers it (one mutex round trip inside
 * liburcu) and sets a pthread key whose destructor unregisters it when the
 * thread exits, so neither the core nor foreign threads have to call
 * anything.  A thread that stays alive but stops reading may call
 * fb_topo_rcu_unregister_thread().
 *
 * Workers: QSBR.  Workers make nearly all the reads (one section per
 * wakeup, on the hot path), and they pass scheduling points all the time,
 * which no read section spans (nothing inside may park or switch).  So a
 * worker thread that went online (fb_topo_worker_online) has an
 * initial-exec thread-local flag that turns its read sections into a
 * compiler barrier, and reports instead that it holds none: its counter
 * fb_topo_qs[id].ctr (its own cache line, written by it alone) grows by 2
 * at each scheduling point (schedule(), each turn of the idle loop and of
 * its poll loop; the scheduler's runnext hand-off, at most 64 in a row,
 * leaves it to the next switch).  The counter is odd while the worker is
 * online and awake, even while it is offline or in its idle sleep, where
 * it may block for ever without reporting anything.  Around that sleep
 * (fb_topo_worker_sleep/wake) it drops its flag and reads through
 * urcu-memb, because it handles timers and I/O events there.
 *
 * The publisher stores the new pointer, waits for liburcu's grace period,
 * calls membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) and then, for each
 * online worker, reads its counter c (acquire) and waits until c is even
 * or has changed.  Why that suffices:
 *  - membarrier runs a full barrier on every running thread of the process
 *    (a sleeping one gets it from the context switch), which splits each
 *    worker's accesses into those before it and those after.  A load after
 *    it sees the new pointer; a store before it is visible once
 *    membarrier has returned.
 *  - A section that may hold the old view loaded the pointer before the
 *    barrier, so the report that preceded the section is visible: c is
 *    that report or a later one.  The next change of c comes after the
 *    section ended, and it is a release store read with acquire, so every
 *    read of the old view happens before the free.
 *  - If c is even, the store that made it even (sleep, offline) came after
 *    all earlier sections, with release; the store that makes it odd
 *    again was not visible, so it comes after the barrier, and so do the
 *    sections behind it: they see the new pointer.
 * The reports need no fence, which is the point: a plain store on x86, a
 * store-release elsewhere.  Without membarrier (old kernels, seccomp) the
 * worker simply stays a urcu-memb reader.
 *
 * The price is liveness: a publish waits until each awake worker reaches a
 * scheduling point, so a fiber that computes without yielding, or blocks
 * in a system call, delays it that long (urcu-memb would not wait for a
 * worker outside a section).  Publishes are rare; a fiber that never
 * yields already starves its worker's other fibers, timers and I/O.  A
 * publisher that is itself a worker counts as asleep for the publish, so
 * it does not wait for itself, and two workers publishing at once do not
 * wait for each other.
 *
 * A feature switch through the API must not wait at all (a fiber that
 * switches ASYM_PACKING while a fiber of another worker spins for it
 * would wait for ever), so it publishes with fb_topo_view_switch(): the
 * memb grace period (foreign sections are short and never block), the
 * membarrier, and then, instead of waiting for each worker, a snapshot of
 * their counters kept with the old view on a deferred list.  Every later
 * publish frees the deferred views whose workers have all moved on
 * (wait_worker()'s test, polled), and a waiting publish frees them all,
 * its own barrier coming after theirs.
 *
 * After fork() the child has one thread, but liburcu's registry still
 * lists the parent's readers, any of which may have been inside a read
 * section at the fork and would stall every grace period for ever; its
 * registry lock may even be held.  So a forked child never waits for a
 * grace period: fb_topo_atfork_child() switches to "retire" mode, in
 * which read sections are compiler barriers and a published view's
 * predecessor is kept (on a list the leak checkers can reach) instead of
 * freed.  A child publishes a view when it starts a runtime and when it
 * stops it, so what it keeps is small and bounded by what it does.
 *
 * The per-LLC counters (struct fb_llc_shared) must not restart when the
 * view is rebuilt while workers sleep, or nr_busy_workers would drift; a
 * new view with the same LLCs therefore takes over the old view's objects
 * (reference counted) before it is published.
 */
#define _LGPL_SOURCE 1
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <urcu/urcu-memb.h>

#include "base/common.h"
#include "base/sanitizer.h"
#include "topo/rcu.h"

struct fb_sched_view *_Atomic fb_topo_view_current;
struct fb_topo_qs fb_topo_qs[FB_MAX_WORKERS];
__thread bool fb_topo_qsbr_reader __attribute__((tls_model("initial-exec")));

static __thread bool registered;  /* this thread is a liburcu reader */
static __thread int qsbr_id = -1; /* online worker id of this thread */
static pthread_key_t reader_key;  /* destructor unregisters */
static pthread_once_t reader_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t publish_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_once_t membarrier_once = PTHREAD_ONCE_INIT;
static bool membarrier_ok; /* set once, before any worker goes online */
static atomic_int qs_hi;   /* 1 + highest id ever online; seq_cst */
/* TSan cannot see liburcu's grace period: every foreign read section ends
 * with a release on this, the publisher acquires it after
 * urcu_memb_synchronize_rcu() (base/sanitizer.h; nothing without TSan). */
static char urcu_gp_sync;
/* A forked child (see above): never free a view, never call liburcu. */
static bool retire_mode;
struct retired {
	struct retired *next;
	struct fb_sched_view *v;
};
static struct retired *retired; /* publish_lock */
/* A view replaced by fb_topo_view_switch(), until its grace period is
 * seen to be over: each online worker's counter as the publisher's
 * membarrier left it (see wait_worker()). */
struct deferred {
	struct deferred *next;
	struct fb_sched_view *v;
	int hi;
	unsigned long snap[];
};
static struct deferred *deferred; /* publish_lock */
_Atomic long fb_topo_views_freed;

/* Wait for a worker: spins with sched_yield() first, then sleeps this many
 * microseconds, doubling up to the cap.  Picked: a busy worker reports
 * every few microseconds. */
#define QS_YIELDS 64
#define QS_SLEEP_MIN_US 20
#define QS_SLEEP_MAX_US 1000

/* ---- foreign readers: urcu-memb ----------------------------------------- */

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

void fb_topo_read_lock_slow(void)
{
	if (fb_unlikely(retire_mode)) {
		atomic_signal_fence(memory_order_seq_cst);
		return;
	}
	if (fb_unlikely(!registered))
		register_slow();
	urcu_memb_read_lock();
}

void fb_topo_read_unlock_slow(void)
{
	if (fb_unlikely(retire_mode)) {
		atomic_signal_fence(memory_order_seq_cst);
		return;
	}
	fb_san_release(&urcu_gp_sync);
	urcu_memb_read_unlock();
}

void fb_topo_rcu_unregister_thread(void)
{
	if (!registered || retire_mode)
		return;
	FB_BUG_ON(urcu_memb_read_ongoing());
	pthread_setspecific(reader_key, NULL);
	urcu_memb_unregister_thread();
	registered = false;
}

/* ---- worker readers: QSBR ----------------------------------------------- */

static void membarrier_init(void)
{
	membarrier_ok = syscall(__NR_membarrier,
				MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
				0) == 0;
}

/* Counter steps: +1 switches awake (odd) and asleep or offline (even), +2
 * is a report (fb_topo_quiescent). */
static void qs_to_awake(int id)
{
	_Atomic unsigned long *c = &fb_topo_qs[id].ctr;

	fb_store_relaxed(c, fb_load_relaxed(c) + 1);
}

static void qs_to_asleep(int id)
{
	_Atomic unsigned long *c = &fb_topo_qs[id].ctr;

	fb_store_release(c, fb_load_relaxed(c) + 1);
}

void fb_topo_worker_online(int id)
{
	int hi;

	FB_ASSERT(id >= 0 && id < FB_MAX_WORKERS);
	FB_ASSERT(qsbr_id < 0);
	pthread_once(&membarrier_once, membarrier_init);
	if (!membarrier_ok)
		return;
	/* qs_hi before the counter: a publisher that misses the id also
	 * misses the odd counter, so the worker read after its barrier. */
	hi = fb_load_seqcst(&qs_hi);
	while (hi < id + 1 && !fb_cas_seqcst(&qs_hi, &hi, id + 1))
		;
	FB_ASSERT(!(fb_load_relaxed(&fb_topo_qs[id].ctr) & 1));
	qs_to_awake(id);
	qsbr_id = id;
	fb_topo_qsbr_reader = true;
}

void fb_topo_worker_offline(int id)
{
	if (qsbr_id != id)
		return;
	fb_topo_qsbr_reader = false;
	qsbr_id = -1;
	qs_to_asleep(id);
}

void fb_topo_worker_sleep(int id)
{
	if (qsbr_id != id)
		return;
	fb_topo_qsbr_reader = false;
	qs_to_asleep(id);
}

void fb_topo_worker_wake(int id)
{
	if (qsbr_id != id)
		return;
	qs_to_awake(id);
	fb_topo_qsbr_reader = true;
}

/* wait_worker - until worker @id holds no section that began before the
 * caller's membarrier (see the opening comment). */
static void wait_worker(int id)
{
	_Atomic unsigned long *c = &fb_topo_qs[id].ctr;
	unsigned long snap = fb_load_acquire(c);
	unsigned int us = QS_SLEEP_MIN_US;

	for (int n = 0; (snap & 1) && fb_load_acquire(c) == snap; n++) {
		if (n < QS_YIELDS) {
			sched_yield();
			continue;
		}
		usleep(us);
		us = FB_MIN(2 * us, QS_SLEEP_MAX_US);
	}
}

/* wait_workers - the QSBR grace period.  Context: publish_lock held. */
static void wait_workers(void)
{
	int hi;

	if (!membarrier_ok)
		return;
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0))
		fb_die(__FILE__, __LINE__,
		       "membarrier(PRIVATE_EXPEDITED) failed after "
		       "registration");
	hi = fb_load_seqcst(&qs_hi);
	for (int id = 0; id < hi; id++)
		wait_worker(id);
}

/* ---- publication --------------------------------------------------------- */

static void view_free(struct fb_sched_view *v)
{
	if (!v)
		return;
	fb_topo_view_free(v);
	fb_add(&fb_topo_views_freed, 1);
}

/* defer - @old, just replaced, waits on the deferred list: membarrier,
 * then each worker's counter.  Context: publish_lock held, after the
 * memb grace period.  Return: false (out of memory: wait instead). */
static bool defer(struct fb_sched_view *old)
{
	int hi = fb_topo_rcu_qsbr() ? fb_load_seqcst(&qs_hi) : 0;
	struct deferred *d =
		malloc(sizeof(*d) + (size_t)hi * sizeof(d->snap[0]));

	if (!d)
		return false;
	if (hi &&
	    syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0))
		fb_die(__FILE__, __LINE__,
		       "membarrier(PRIVATE_EXPEDITED) failed after "
		       "registration");
	d->v = old;
	d->hi = hi;
	for (int id = 0; id < hi; id++)
		d->snap[id] = fb_load_acquire(&fb_topo_qs[id].ctr);
	d->next = deferred;
	deferred = d;
	return true;
}

/* passed - has every worker left the sections that could hold @d's
 * view?  wait_worker()'s test, without the wait. */
static bool passed(const struct deferred *d)
{
	for (int id = 0; id < d->hi; id++)
		if ((d->snap[id] & 1) &&
		    fb_load_acquire(&fb_topo_qs[id].ctr) == d->snap[id])
			return false;
	return true;
}

/* reap - move the deferred views whose grace period is over (all of them
 * if @all: the caller waited for a later one) to *@done.  Context:
 * publish_lock held. */
static void reap(struct deferred **done, bool all)
{
	for (struct deferred **p = &deferred, *d; (d = *p);) {
		if (all || passed(d)) {
			*p = d->next;
			d->next = *done;
			*done = d;
		} else {
			p = &d->next;
		}
	}
}

static void free_done(struct deferred *done)
{
	while (done) {
		struct deferred *next = done->next;

		view_free(done->v);
		free(done);
		done = next;
	}
}

/* publish - fb_topo_view_publish() (@wait) or fb_topo_view_switch(). */
static void publish(struct fb_sched_view *v, bool wait)
{
	struct fb_sched_view *old;
	struct deferred *done = NULL;
	int self = qsbr_id;

	FB_BUG_ON(!retire_mode && registered && urcu_memb_read_ongoing());
	/* A publishing worker counts as asleep: no one waits for it, and it
	 * waits for no one while it blocks on the lock. */
	if (self >= 0)
		fb_topo_worker_sleep(self);
	pthread_mutex_lock(&publish_lock);
	old = fb_load_relaxed(&fb_topo_view_current);
	if (v)
		fb_topo_llc_block_adopt(v, old);
	fb_store_release(&fb_topo_view_current, v);
	if (old && retire_mode) {
		struct retired *r = malloc(sizeof(*r));

		/* Out of memory: leaking it is what retiring does anyway. */
		if (r) {
			r->v = old;
			r->next = retired;
			retired = r;
		}
		old = NULL;
	} else if (old) {
		urcu_memb_synchronize_rcu();
		fb_san_acquire(&urcu_gp_sync);
		if (!wait && defer(old)) {
			old = NULL;
			reap(&done, false);
		} else {
			/* Later than every deferred view's barrier. */
			wait_workers();
			reap(&done, true);
		}
	} else {
		reap(&done, false);
	}
	pthread_mutex_unlock(&publish_lock);
	if (self >= 0)
		fb_topo_worker_wake(self);
	view_free(old);
	free_done(done);
}

bool fb_topo_rcu_qsbr(void)
{
	pthread_once(&membarrier_once, membarrier_init);
	return membarrier_ok;
}

void fb_topo_view_switch(struct fb_sched_view *v)
{
	publish(v, false);
}

void fb_topo_view_publish(struct fb_sched_view *v)
{
	publish(v, true);
}

static int rebuild(const struct fb_topo *t, int nr_workers, unsigned flags,
		   bool wait)
{
	struct fb_sched_view *v;
	int rc = fb_topo_view_build(t, nr_workers, flags, &v);

	if (rc)
		return rc;
	publish(v, wait);
	return 0;
}

int fb_topo_view_rebuild(const struct fb_topo *t, int nr_workers,
			 unsigned flags)
{
	return rebuild(t, nr_workers, flags, true);
}

int fb_topo_view_rebuild_nowait(const struct fb_topo *t, int nr_workers,
				unsigned flags)
{
	return rebuild(t, nr_workers, flags, false);
}

void fb_topo_atfork_child(void)
{
	retire_mode = true;
	pthread_mutex_init(&publish_lock, NULL);
	fb_topo_qsbr_reader = false;
	qsbr_id = -1;
	for (int i = 0; i < fb_load_relaxed(&qs_hi); i++)
		fb_store_relaxed(&fb_topo_qs[i].ctr, 0);
	fb_store_relaxed(&qs_hi, 0);
}
