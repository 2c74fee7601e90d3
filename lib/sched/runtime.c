/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * runtime.c - the runtime object: made from its parameters (which the
 * configuration of api/ computes), its worker threads started and stopped,
 * the shutdown protocol with the abandonment of fibers left blocked, and
 * what fork() leaves of it in the child.  The public calls that drive it
 * (fiber_init, fiber_shutdown) are api/runtime.c.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/sanitizer.h"
#include "sched/sched.h"
#include "topo/rcu.h"

/* Serialises start, stop and view rebuilds (fb_runtime_lock). */
static pthread_mutex_t rt_mutex = PTHREAD_MUTEX_INITIALIZER;
/* Fibers abandoned by fiber_shutdown() (below): never freed. */
static struct fb_spinlock graveyard_lock;
static struct fb_list graveyard = FB_LIST_INIT(graveyard); /* live_node */

/* ---- start and stop ------------------------------------------------------ */

static struct fb_worker *worker_new(int id, int node)
{
	struct fb_worker *w = fb_aligned_alloc(FB_CACHELINE, sizeof(*w));

	if (!w)
		return NULL;
	memset(w, 0, sizeof(*w));
	w->id = id;
	w->pw.id = id;
	w->node = node;
	fb_list_init(&w->rq);
	fb_list_init(&w->live);
	w->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
	w->pelt_nr = -1; /* no update yet */
	fb_sched_balance_worker_init(w);
	return w;
}

static void runtime_free(struct fb_runtime *r)
{
	for (int i = 0; r->workers && i < r->nr_workers; i++) {
		struct fb_worker *w = r->workers[i];

		if (!w)
			continue;
		fb_stack_cache_drain(&w->stacks);
		fb_free(w);
	}
	fb_stack_pool_drain();
	fb_fiber_pool_shrink();
	fb_topo_view_publish(NULL); /* no reader is left: workers stopped */
	fb_wgroups_fini(r);
	fb_free(r->workers);
	fb_free(r->pws);
	fb_topo_close(r->topo);
	fb_free(r);
	fb_poll_fini(); /* the poller (netpoll.c) */
}

/* release_workers - end a pause request of fiber_shutdown() (below). */
static void release_workers(void)
{
	if (fb_load_relaxed(&fb_rt->pausing) & 1) {
		fb_add(&fb_rt->pausing, 1);
		fb_futex_wake(&fb_rt->pausing, INT_MAX);
	}
}

static void stop_workers(int started)
{
	fb_store_seqcst(&fb_rt->stopping, true);
	release_workers();
	for (int i = 0; i < started; i++)
		fb_sched_wake_worker(fb_rt->workers[i], NULL);
	for (int i = 0; i < started; i++)
		pthread_join(fb_rt->workers[i]->thread, NULL);
}

/*
 * fb_runtime_create - a runtime for @p on @topo (which it owns from now
 * on, also on failure), its workers made but not started.
 * Return: 0 and *@out; EINVAL for a worker count outside 1 to
 * FIBER_WORKERS_MAX; ENOMEM; the errno of the view's build.
 */
int fb_runtime_create(const struct fb_sched_params *p, struct fb_topo *topo,
		      struct fb_runtime **out)
{
	struct fb_runtime *r;
	int rc = ENOMEM;

	/* The per-worker tables (sched/handle.c) have FIBER_WORKERS_MAX
	 * entries; api/config.h keeps the counts in range already. */
	if (p->nr_workers < 1 || p->nr_workers > FIBER_WORKERS_MAX) {
		fb_topo_close(topo);
		return EINVAL;
	}
	r = fb_calloc(1, sizeof(*r));
	if (!r) {
		fb_topo_close(topo);
		return ENOMEM;
	}
	r->params = *p;
	r->topo = topo;
	/* What an unpinned worker may use: what the caller may. */
	if (sched_getaffinity(0, sizeof(r->cpus), &r->cpus))
		CPU_ZERO(&r->cpus);
	r->nr_workers = p->nr_workers;
	r->poll_ns = p->poll_ns;
	r->kept_stacks_max = fb_kept_stacks_max(r->nr_workers);
	r->workers = fb_calloc((size_t)r->nr_workers, sizeof(*r->workers));
	r->pws = fb_calloc((size_t)r->nr_workers, sizeof(*r->pws));
	if (!r->workers || !r->pws || fb_wgroups_init(r))
		goto fail;
	for (int i = 0; i < r->nr_workers; i++) {
		r->workers[i] = worker_new(i, fb_topo_worker_node(r->topo, i));
		if (!r->workers[i])
			goto fail;
		r->pws[i] = &r->workers[i]->pw;
		r->workers[i]->solo = r->nr_workers == 1;
	}
	r->view.nr_workers = r->nr_workers;
	r->view.w = r->pws;
	r->view.g = &r->g;
	r->g.blocked_min_ticks = p->blocked_min_ticks;
	rc = fb_topo_view_rebuild(r->topo, r->nr_workers,
				  p->features & FB_FEAT_BIT(ASYM_PACKING) ?
					  FB_VIEW_ASYM_PACKING :
					  0);
	if (rc)
		goto fail;
	*out = r;
	return 0;
fail:
	runtime_free(r);
	return rc;
}

/* name_worker - "fiber-w0", "fiber-w1"...: what top -H, perf and gdb's
 * "info threads" show.  Named by the creator, so every worker carries its
 * name when fiber_init() returns; worker ids stay below 1024, so the name
 * fits the kernel's 15 bytes.  A failure only leaves the inherited name. */
static void name_worker(const struct fb_worker *w)
{
	char name[16];

	snprintf(name, sizeof(name), "fiber-w%d", w->id);
	pthread_setname_np(w->thread, name);
}

int fb_runtime_start(struct fb_runtime *r)
{
	int rc = 0, i;

	fb_rt = r;
	fb_add(&fb_rt_epoch, 1); /* before any fiber of this runtime exists */
	fb_store_seqcst(&fb_features_mask, r->params.features);
	fb_guard_install();
	fb_stack_set_guarded(r->params.stack_guard);
	rc = fb_trace_start(r); /* LIBFIBER_TRACE (trace.c) */
	for (i = 0; !rc && i < r->nr_workers; i++) {
		rc = pthread_create(&r->workers[i]->thread, NULL,
				    fb_worker_main, r->workers[i]);
		if (rc)
			break;
		name_worker(r->workers[i]);
	}
	if (!rc)
		rc = fb_monitor_start(r); /* stalls, deadlocks (monitor.c) */
	if (rc) {
		stop_workers(i);
		fb_trace_stop(r);
		runtime_free(r);
		fb_rt = NULL;
		fb_store_seqcst(&fb_features_mask, fb_features_default());
		return rc == ENOMEM ? ENOMEM : EAGAIN;
	}
	fb_runtime_set_facts(r->nr_workers, r->params.stack_size);
	fb_store_seqcst(&fb_rt_open, true);
	fb_store_seqcst(&fb_rt_accepting, true);
	fb_store_release(&fb_rt_up, true);
	return 0;
}

/* A switch of ASYM_PACKING found rt_mutex taken: whoever holds it brings
 * the view in step before it lets go (unlock_synced). */
static atomic_bool view_dirty;

/* sync_view - rebuild the domain view if its ASYM_PACKING is not the
 * mask's.  Context: rt_mutex held. */
static void sync_view(void)
{
	unsigned want = fb_load_seqcst(&fb_features_mask) &
					FB_FEAT_BIT(ASYM_PACKING) ?
				FB_VIEW_ASYM_PACKING :
				0;
	struct fb_sched_view *v;

	if (!fb_load_acquire(&fb_rt_up))
		return;
	v = fb_load_acquire(&fb_topo_view_current);
	if (v && (v->build_flags & FB_VIEW_ASYM_PACKING) == want)
		return;
	/* Never waits: the caller may be a fiber that another fiber, on
	 * another worker, is spinning for (topo/rcu.c). */
	fb_topo_view_rebuild_nowait(fb_rt->topo, fb_rt->nr_workers, want);
}

/* unlock_synced - let rt_mutex go with the view in step with the mask.
 * A switch that finds the mutex taken marks the view dirty after it
 * stored the mask; every holder clears the mark, syncs, unlocks and then
 * looks at the mark again, so the last one to hold the mutex after any
 * switch sees it. */
static void unlock_synced(void)
{
	for (;;) {
		fb_store_seqcst(&view_dirty, false);
		sync_view();
		pthread_mutex_unlock(&rt_mutex);
		if (!fb_load_seqcst(&view_dirty) ||
		    pthread_mutex_trylock(&rt_mutex))
			return;
	}
}

void fb_runtime_lock(void)
{
	pthread_mutex_lock(&rt_mutex);
}

void fb_runtime_unlock(void)
{
	unlock_synced();
}

/* all_quiet - every worker asleep (futex or epoll) with nothing queued or
 * handed off.  Armed timers do not count: a fiber that sleeps or waits
 * with a deadline is blocked like any other. */
static bool all_quiet(void)
{
	for (int i = 0; i < fb_rt->nr_workers; i++) {
		struct fb_worker *w = fb_rt->workers[i];

		if ((fb_load_seqcst(&w->pw.state) & FB_WS_MASK) <
			    FB_WS_SLEEPING ||
		    fb_worker_has_work(w))
			return false;
	}
	return true;
}

/* ---- fibers left behind --------------------------------------------------- */

/*
 * Fibers still blocked when fiber_shutdown() stops the workers cannot be
 * freed: their wait-list entries sit in objects the application owns
 * (a mutex, a channel...) and a late unlock or post would walk into them.
 * So they are abandoned: each one's waiter is claimed (ABANDONED, sched/sched.h),
 * which makes every waker skip it, and the descriptor and stack move to
 * the graveyard, which nothing frees and the leak checkers can reach.  A
 * join on such a fiber gives ESHUTDOWN.
 */
/* Abandoned fibers named one by one in the report; the rest are counted. */
#define FB_ABANDON_REPORT_MAX 32

/*
 * hold - make parked @f unwakeable: claim its waiter ABANDONED, unless a
 * waker claimed it first (then the waker's wake runs it).  Returns
 * whether @f is held.  Context: every worker paused, so no fiber runs
 * and a parked one's waiter stays where it is; @f's worker's live_lock
 * held.
 */
static bool hold(struct fb_fiber *f)
{
	struct fb_waiter *w;
	int c;

	if (fb_load_acquire(&f->state) != FB_FIBER_PARKED)
		return false;
	w = fb_load_relaxed(&f->waiter);
	if (!w)
		return true;
	c = fb_load_acquire(w->claimp);
	if (c == FB_CLAIM_ABANDONED)
		return true;
	if (c != FB_CLAIM_NONE || !fb_waiter_claim(w, FB_CLAIM_ABANDONED))
		return false;
	if (w->kind == FB_WAIT_FD)
		fb_poll_abandon(w);
	return true;
}

/* hold_pass - hold() every live fiber; returns whether all are held.
 * Context: as hold(), without the lock. */
static bool hold_pass(void)
{
	bool all = true;

	for (int i = 0; i < fb_rt->nr_workers; i++) {
		struct fb_worker *w = fb_rt->workers[i];
		struct fb_list *n;

		fb_spin_lock(&w->live_lock);
		fb_list_for_each (n, &w->live)
			if (!hold(fb_list_entry(n, struct fb_fiber, live_node)))
				all = false;
		fb_spin_unlock(&w->live_lock);
	}
	return all;
}

/* any_work - does some worker have a fiber to run?  A paused one does
 * not run it, and a fiber elsewhere may be waiting for it (yielding in a
 * loop until it runs): release them. */
static bool any_work(void)
{
	for (int i = 0; i < fb_rt->nr_workers; i++)
		if (fb_worker_has_work(fb_rt->workers[i]))
			return true;
	return false;
}

/* How long hold_blocked() waits for every worker to pause before it
 * releases those that did and asks again, doubling up to the maximum:
 * a fiber may wait for one that sleeps on a paused worker's timers. */
#define FB_HOLD_WAIT_US 1000
#define FB_HOLD_WAIT_MAX_US (100 * 1000)

/*
 * hold_blocked - make every fiber still blocked unwakeable while the
 * workers can still run one that a waker gets first.  Ask the workers to
 * pause, each once it is out of work; with all of them paused no fiber
 * runs, so a parked fiber's waiter holds still for hold_pass().  If some
 * fiber is runnable, or was claimed by a waker, or a call is served
 * outside the runtime (whose wake must not be lost), or some worker did
 * not pause in time (it may run a fiber that waits for one queued on, or
 * sleeping on the timers of, a paused worker), release them for a
 * millisecond and try again.  Once every fiber is held, no wake can reach
 * one (a waker skips a claimed waiter, and goes on to the next: a foreign
 * thread queued behind an abandoned fiber gets the mutex), no create is
 * taken, and the workers stay paused until stop_workers().
 */
static void hold_blocked(void)
{
	unsigned int limit_us = FB_HOLD_WAIT_US;

	for (;;) {
		unsigned int waited = 0;

		fb_add(&fb_rt->pausing, 1); /* odd: a request */
		for (int i = 0; i < fb_rt->nr_workers; i++)
			fb_sched_wake_worker(fb_rt->workers[i], NULL);
		while (fb_load_seqcst(&fb_rt->nr_paused) < fb_rt->nr_workers &&
		       waited < limit_us && !any_work()) {
			usleep(100);
			waited += 100;
		}
		if (fb_load_seqcst(&fb_rt->nr_paused) == fb_rt->nr_workers &&
		    !fb_load_seqcst(&fb_rt_nr_outside) && hold_pass())
			return;
		limit_us = FB_MIN(2 * limit_us, FB_HOLD_WAIT_MAX_US);
		release_workers();
		/* Every worker out of this pause before the next request,
		 * so that none is counted paused for it while it runs. */
		while (fb_load_seqcst(&fb_rt->nr_paused) > 0)
			usleep(100);
		usleep(1000);
	}
}

/* abandon - leave @f behind (see above) and report it.  Context: workers
 * stopped, the gate closed and no foreign thread inside. */
static void abandon(struct fb_fiber *f, int nth)
{
	struct fb_waiter *w = fb_load_relaxed(&f->waiter), *joiner;
	int s = fb_load_relaxed(&f->state);
	char what[160], name[4 * sizeof(f->name) + 1];

	if (nth < FB_ABANDON_REPORT_MAX) {
		fb_fiber_describe(f, fb_now_ns(), what, sizeof(what));
		fb_escape(name, sizeof(name), f->name, strlen(f->name));
		fprintf(stderr, "libfiber:   fiber %llu \"%s\": %s\n",
			(unsigned long long)f->id, name, what);
	}
	if ((s == FB_FIBER_PARKED || s == FB_FIBER_PARKING) && w &&
	    fb_waiter_claim(w, FB_CLAIM_ABANDONED) && w->kind == FB_WAIT_FD)
		fb_poll_abandon(w);
	fb_spin_lock(&f->slot->lock);
	f->abandoned = true;
	joiner = fb_load_relaxed(&f->joiner);
	fb_store_relaxed(&f->joiner, NULL);
	/* A thread joining it would wait for ever: tell it.  Claimed under
	 * the lock, which a joiner that times out leaves under. */
	if (joiner &&
	    (joiner->fiber || !fb_waiter_claim(joiner, FB_CLAIM_WOKEN)))
		joiner = NULL;
	fb_spin_unlock(&f->slot->lock);
	if (joiner) {
		joiner->result = ESHUTDOWN;
		fb_waiter_wake(joiner, 0);
	}
}

/* abandon_all - abandon every fiber still in the registry; returns how
 * many.  Context: as abandon(). */
static long abandon_all(void)
{
	long n = fb_load_relaxed(&fb_rt->nr_live), k = 0;

	if (n <= 0)
		return 0;
	fprintf(stderr,
		"libfiber: fiber_shutdown: %ld fibers still blocked are "
		"abandoned (their stacks stay allocated):\n",
		n);
	fb_spin_lock(&graveyard_lock);
	for (int i = 0; i < fb_rt->nr_workers; i++) {
		struct fb_worker *w = fb_rt->workers[i];
		struct fb_list *node;

		while ((node = fb_list_pop(&w->live))) {
			abandon(fb_list_entry(node, struct fb_fiber, live_node),
				(int)k++);
			fb_list_add_tail(node, &graveyard);
		}
	}
	fb_spin_unlock(&graveyard_lock);
	if (k > FB_ABANDON_REPORT_MAX)
		fprintf(stderr, "libfiber:   ... and %ld more\n",
			k - FB_ABANDON_REPORT_MAX);
	return k;
}

/*
 * fb_runtime_stop - the shutdown protocol of the running runtime:
 *  1. Let runnable fibers finish: wait until every worker is asleep with
 *     nothing to run, twice FB_QUIET_NS apart.  Fibers that sleep or wait
 *     with a deadline count as blocked, so this ends at most about
 *     2 * FB_QUIET_NS plus the idle poll window after the last runnable
 *     fiber finished.
 *     A call served outside the runtime (fb_rt_nr_outside) counts as
 *     runnable: its fiber will be woken.
 *  2. Refuse creates and offloads (ESHUTDOWN); wait until no foreign
 *     thread is inside the gate (a create that got in has queued its
 *     fiber, which the workers run).
 *  3. Hold the fibers still blocked (hold_blocked): with the workers
 *     paused, claim each parked fiber's waiter ABANDONED, until every
 *     fiber is held and no call is served outside the runtime.  Until
 *     then wakes still get in and their fibers run, so that a wake is
 *     never taken (a mutex handed over, a value delivered) for a fiber
 *     that no worker will run.
 *  4. Close the gate; wait until no foreign thread is inside.
 *  5. Stop the workers: nothing is left for them to run.
 *  6. Abandon the fibers still blocked (above) and report them.
 * The caller then frees the runtime (fb_runtime_free_current).
 */
#define FB_QUIET_NS (20 * 1000 * 1000ull)

long fb_runtime_stop(void)
{
	int quiet = 0;

	while (fb_load_acquire(&fb_rt->nr_live) > 0 && quiet < 2) {
		quiet = all_quiet() && !fb_load_acquire(&fb_rt_nr_outside) ?
				quiet + 1 :
				0;
		usleep(quiet ? FB_QUIET_NS / 1000 : 1000);
	}
	/* The monitor wakes fibers through the gate: stop it first. */
	fb_monitor_stop(fb_rt);
	fb_store_seqcst(&fb_rt_accepting, false);
	fb_rt_wait_outside();
	hold_blocked();
	fb_store_seqcst(&fb_rt_open, false);
	fb_rt_wait_outside();
	stop_workers(fb_rt->nr_workers);
	fb_rt_wait_outside(); /* wakes that raced with the stop */
	fb_trace_write();
	return abandon_all();
}

void fb_runtime_free_current(void)
{
	fb_store_release(&fb_rt_up, false);
	fb_runtime_set_facts(0, 0);
	fb_trace_stop(fb_rt);
	runtime_free(fb_rt);
	fb_rt = NULL;
	fb_store_seqcst(&fb_features_mask, fb_features_default());
}

/*
 * fork().  The child has one thread, a copy of every structure, and none
 * of the workers, so the copied runtime can neither run nor be stopped.
 * The child's handler drops it (kept reachable, never freed: its locks
 * and lists may be in any state) and resets what the next call needs:
 * the next call that wants a runtime starts a fresh one, fiber_shutdown()
 * says ESRCH, and no fiber of the parent ever runs (fb_rt_epoch moves
 * on).  The calling thread, even if it forked from a fiber, is an
 * ordinary thread of the child: fiber_self() is NULL, blocking calls
 * block it, it may run on the CPUs the runtime started with (not its
 * worker's PU), and if the fiber's function returns the child exits with
 * status 0, as when the last thread of a process ends.  The poller is
 * closed in the child (the parent's epoll set is shared with it), the
 * dump signal's action is the application's again, and the RCU machinery
 * stops waiting for the parent's readers (topo/rcu.c).  The
 * prepare handler holds the small process-wide locks (keys, handles,
 * stack pool) over the fork so that the child's copies are whole.
 * fork() + exec() and fork() + _exit() cost nothing more.  api/runtime.c
 * registers the handlers.
 */
static struct fb_runtime *forked_away; /* the parents' runtimes */

void fb_runtime_atfork(int phase)
{
	if (phase == FB_ATFORK_PREPARE) {
		fb_stack_atfork(phase);
		fb_fiber_atfork(phase);
		fb_handle_atfork(phase);
		return;
	}
	fb_handle_atfork(phase);
	fb_fiber_atfork(phase);
	fb_stack_atfork(phase);
	if (phase != FB_ATFORK_CHILD)
		return;
	pthread_mutex_init(&rt_mutex, NULL);
	fb_store_relaxed(&graveyard_lock.locked, 0);
	if (fb_rt) {
		fb_monitor_atfork_child(fb_rt);
		/* Forked from a worker: not pinned to its PU any more. */
		if (fb_worker_self() && CPU_COUNT(&fb_rt->cpus))
			(void)sched_setaffinity(0, sizeof(fb_rt->cpus),
						&fb_rt->cpus);
		fb_rt->forked_prev = forked_away;
		forked_away = fb_rt;
	}
	fb_rt = NULL;
	fb_store_relaxed(&fb_rt_open, false);
	fb_store_relaxed(&fb_rt_accepting, false);
	fb_store_relaxed(&fb_rt_up, false);
	fb_store_relaxed(&fb_rt_nr_outside, 0);
	fb_add(&fb_rt_epoch, 1);
	fb_store_relaxed(&fb_features_mask, fb_features_default());
	fb_rt_atfork_child();
	fb_foreign_wait_atfork_child();
	fb_poll_atfork_child();
	fb_topo_atfork_child();
}

void fb_sched_fiber_reaped(void)
{
	fb_sub(&fb_rt->nr_live, 1);
}

/*
 * A feature that changes domain flags (ASYM_PACKING) was switched through
 * the API: rebuild the domain view and publish it with RCU, without
 * waiting (sync_view); readers keep the old one until their read section
 * ends.
 */
void fb_sched_features_changed(uint64_t old, uint64_t mask)
{
	if (!((old ^ mask) & FB_FEAT_BIT(ASYM_PACKING)))
		return;
	/* A fiber may switch features while fiber_shutdown() holds the
	 * mutex and waits for that very fiber: never block here; the
	 * holder syncs the view (unlock_synced). */
	fb_store_seqcst(&view_dirty, true);
	if (pthread_mutex_trylock(&rt_mutex))
		return;
	unlock_synced();
}

/* Accessors for api/stats.c. */
const struct fb_counters *fb_sched_counters(int worker)
{
	if (worker < 0)
		return &fb_rt->foreign;
	return &fb_rt->workers[worker]->cnt;
}
