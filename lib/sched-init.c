/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sched-init.c - starting and stopping the runtime: configuration, the
 * topology, worker structures and threads, and a shutdown that lets
 * runnable fibers finish.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "sanitizer.h"
#include "sched.h"
#include "topo.h"

static pthread_mutex_t rt_mutex = PTHREAD_MUTEX_INITIALIZER;
/* Fibers abandoned by fiber_shutdown() (below): never freed. */
static struct fb_spinlock graveyard_lock;
static struct fb_list graveyard = FB_LIST_INIT(graveyard); /* live_node */

/* EINVAL once an implicit start refused the configuration, else 0.
 * Written under implicit_mutex, cleared by fiber_init (atomic). */
static pthread_mutex_t implicit_mutex = PTHREAD_MUTEX_INITIALIZER;
static atomic_int implicit_rc;

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
	fb_topo_view_publish(NULL); /* no reader is left: workers stopped */
	fb_free(r->workers);
	fb_free(r->pws);
	fb_topo_close(r->topo);
	fb_env_free(&r->env);
	fb_free(r);
	fb_poll_fini(); /* the poller and fd table (sched-poll.c) */
}

static int runtime_new(const struct fiber_config *config,
		       struct fb_runtime **out)
{
	struct fb_runtime *r = fb_calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return ENOMEM;
	rc = fb_env_load(&r->env, config);
	if (rc)
		goto fail;
	if (fb_clock_setup(r->env.clock)) {
		fprintf(stderr, "libfiber: LIBFIBER_CLOCK=\"tsc\": the TSC "
				"could not be calibrated; expected auto or "
				"monotonic\n");
		rc = EINVAL;
		goto fail;
	}
	rc = fb_env_topo_open(&r->env, &r->topo);
	if (rc)
		goto fail;
	if (r->env.bind < 0)
		r->env.bind = 1; /* synthetic: round-robin on the real PUs */
	r->nr_workers = r->env.workers ? r->env.workers :
					 fb_topo_nr_pus(r->topo);
	r->poll_ns = (uint64_t)r->env.idle_poll_us * 1000;
	r->workers = fb_calloc((size_t)r->nr_workers, sizeof(*r->workers));
	r->pws = fb_calloc((size_t)r->nr_workers, sizeof(*r->pws));
	rc = ENOMEM;
	if (!r->workers || !r->pws)
		goto fail;
	for (int i = 0; i < r->nr_workers; i++) {
		r->workers[i] = worker_new(i, fb_topo_worker_node(r->topo, i));
		if (!r->workers[i])
			goto fail;
		r->pws[i] = &r->workers[i]->pw;
	}
	r->view.nr_workers = r->nr_workers;
	r->view.w = r->pws;
	r->view.g = &r->g;
	r->g.blocked_min_ticks = (unsigned int)r->env.blocked_load_interval_ms;
	rc = fb_topo_view_rebuild(r->topo, r->nr_workers,
				  r->env.features & FB_FEAT_BIT(ASYM_PACKING) ?
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

static void stop_workers(int started)
{
	fb_store_seqcst(&fb_rt->stopping, true);
	for (int i = 0; i < started; i++)
		fb_sched_wake_worker(fb_rt->workers[i], NULL);
	for (int i = 0; i < started; i++)
		pthread_join(fb_rt->workers[i]->thread, NULL);
}

/*
 * fork().  The child has one thread, a copy of every structure, and none
 * of the workers, so the copied runtime can neither run nor be stopped.
 * The child handler drops it (kept reachable, never freed: its locks and
 * lists may be in any state) and resets what the next call needs: the
 * next call that wants a runtime starts a fresh one, fiber_shutdown()
 * says ESRCH, and no fiber of the parent ever runs (fb_rt_epoch moves
 * on).  The calling thread, even if it forked from a fiber, is an
 * ordinary thread of the child: fiber_self() is NULL, blocking calls
 * block it, and if the fiber's function returns the child exits with
 * status 0, as when the last thread of a process ends.  The poller is
 * closed in the child (the parent's epoll set is shared with it) and the
 * RCU machinery stops waiting for the parent's readers (topo-rcu.c).  The
 * prepare handler holds the small process-wide locks (keys, handles, stack pool)
 * over the fork so that the child's copies are whole.  fork() + exec()
 * and fork() + _exit() cost nothing more.
 */
static struct fb_runtime *forked_away; /* the parents' runtimes */

static void atfork_prepare(void)
{
	fb_stack_atfork(FB_ATFORK_PREPARE);
	fb_fiber_atfork(FB_ATFORK_PREPARE);
	fb_handle_atfork(FB_ATFORK_PREPARE);
}

static void atfork_parent(void)
{
	fb_handle_atfork(FB_ATFORK_PARENT);
	fb_fiber_atfork(FB_ATFORK_PARENT);
	fb_stack_atfork(FB_ATFORK_PARENT);
}

static void atfork_child(void)
{
	fb_handle_atfork(FB_ATFORK_CHILD);
	fb_fiber_atfork(FB_ATFORK_CHILD);
	fb_stack_atfork(FB_ATFORK_CHILD);
	pthread_mutex_init(&rt_mutex, NULL);
	pthread_mutex_init(&implicit_mutex, NULL);
	fb_store_relaxed(&implicit_rc, 0);
	fb_store_relaxed(&graveyard_lock.locked, 0);
	if (fb_rt) {
		fb_rt->forked_prev = forked_away;
		forked_away = fb_rt;
	}
	fb_rt = NULL;
	fb_store_relaxed(&fb_rt_open, false);
	fb_store_relaxed(&fb_rt_up, false);
	fb_add(&fb_rt_epoch, 1);
	fb_store_relaxed(&fb_features_mask, fb_features_default());
	fb_rt_atfork_child();
	fb_poll_atfork_child();
	fb_topo_atfork_child();
}

static void atfork_once(void)
{
	if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child))
		fb_die(__FILE__, __LINE__, "pthread_atfork failed");
}

static void atfork_register(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, atfork_once);
}

int fiber_init(const struct fiber_config *config)
{
	struct fb_runtime *r;
	int rc, i;

	fb_store_relaxed(&implicit_rc, 0); /* see fb_runtime_get() */
	pthread_mutex_lock(&rt_mutex);
	rc = EBUSY;
	if (fb_load_acquire(&fb_rt_up))
		goto out;
	atfork_register();
	rc = runtime_new(config, &r);
	if (rc)
		goto out;
	fb_rt = r;
	fb_add(&fb_rt_epoch, 1); /* before any fiber of this runtime exists */
	fb_store_seqcst(&fb_features_mask, r->env.features);
	fb_guard_install();
	for (i = 0; i < r->nr_workers; i++) {
		rc = pthread_create(&r->workers[i]->thread, NULL,
				    fb_worker_main, r->workers[i]);
		if (rc)
			break;
	}
	if (rc) {
		stop_workers(i);
		runtime_free(r);
		fb_rt = NULL;
		rc = EAGAIN;
		goto out;
	}
	fb_runtime_set_facts(r->nr_workers, r->env.stack_size);
	fb_store_seqcst(&fb_rt_open, true);
	fb_store_release(&fb_rt_up, true);
out:
	pthread_mutex_unlock(&rt_mutex);
	return rc;
}

/*
 * An implicit start (fiber_create before fiber_init) that found a bad
 * configuration has printed its message; later implicit starts return
 * EINVAL quietly instead of reading the environment and printing again,
 * until the program calls fiber_init() itself.  Other errors (ENOMEM,
 * EAGAIN) may pass: the next call tries again.
 */
int fb_runtime_get(void)
{
	int rc;

	if (fb_likely(fb_load_acquire(&fb_rt_up)))
		return 0;
	pthread_mutex_lock(&implicit_mutex);
	rc = fb_load_relaxed(&implicit_rc);
	if (!rc) {
		rc = fiber_init(NULL);
		rc = rc == EBUSY ? 0 : rc;
		if (rc == EINVAL)
			fb_store_relaxed(&implicit_rc, rc);
	}
	pthread_mutex_unlock(&implicit_mutex);
	return rc;
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
 * So they are abandoned: each one's waiter is claimed (ABANDONED, sched.h),
 * which makes every waker skip it, and the descriptor and stack move to
 * the graveyard, which nothing frees and the leak checkers can reach.  A
 * join on such a fiber gives ESHUTDOWN.
 */
/* Abandoned fibers named one by one in the report; the rest are counted. */
#define FB_ABANDON_REPORT_MAX 32

/* describe - what @f waits on, into @buf.  Context: workers stopped. */
static void describe(const struct fb_fiber *f, char *buf, size_t len)
{
	const struct fb_waiter *w = fb_load_relaxed(&f->waiter);
	int s = fb_load_relaxed(&f->state);
	uint64_t now = fb_now_ns();

	if ((s != FB_FIBER_PARKED && s != FB_FIBER_PARKING) || !w) {
		snprintf(buf, len, "runnable, but its worker had stopped");
		return;
	}
	switch (w->kind) {
	case FB_WAIT_FD:
		snprintf(buf, len, "waits on fd %d (events 0x%x)",
			 (int)(intptr_t)w->obj, (unsigned int)w->data);
		break;
	case FB_WAIT_SLEEP:
		snprintf(buf, len, "sleeps");
		break;
	case FB_WAIT_JOIN:
		snprintf(buf, len, "joins fiber %llu",
			 (unsigned long long)((const struct fb_fiber *)w->obj)
				 ->id);
		break;
	default:
		snprintf(buf, len, "waits on %s %p", fb_wait_kind_name(w->kind),
			 w->obj);
		break;
	}
	if (w->deadline != FB_NO_DEADLINE && w->deadline > now) {
		size_t n = strlen(buf);

		snprintf(buf + n, len - n, " (%.3f s left)",
			 (double)(w->deadline - now) / 1e9);
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
		describe(f, what, sizeof(what));
		fb_escape(name, sizeof(name), f->name, strlen(f->name));
		fprintf(stderr, "libfiber:   fiber %llu \"%s\": %s\n",
			(unsigned long long)f->id, name, what);
	}
	if ((s == FB_FIBER_PARKED || s == FB_FIBER_PARKING) && w &&
	    fb_waiter_claim(w, FB_CLAIM_ABANDONED) && w->kind == FB_WAIT_FD)
		fb_poll_abandon(w);
	fb_spin_lock(&f->slot->lock);
	f->abandoned = true;
	joiner = f->joiner;
	f->joiner = NULL;
	fb_spin_unlock(&f->slot->lock);
	/* A thread joining it would wait for ever: tell it. */
	if (joiner && !joiner->fiber &&
	    fb_waiter_claim(joiner, FB_CLAIM_WOKEN)) {
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
 * fiber_shutdown - the shutdown protocol:
 *  1. Let runnable fibers finish: wait until every worker is asleep with
 *     nothing to run, twice FB_QUIET_NS apart.  Fibers that sleep or wait
 *     with a deadline count as blocked, so this ends at most about
 *     2 * FB_QUIET_NS plus the idle poll window after the last runnable
 *     fiber finished.
 *  2. Close the gate: creates now fail with ESHUTDOWN; wait until no
 *     foreign thread is inside (a create that got in has queued its
 *     fiber, which the workers run in step 3).
 *  3. Stop the workers: each runs what it has queued, then exits.
 *  4. Abandon the fibers still blocked (above) and report them.
 *  5. Free the runtime.
 */
#define FB_QUIET_NS (20 * 1000 * 1000ull)

int fiber_shutdown(void)
{
	long abandoned;
	int quiet = 0;

	if (fb_worker_self())
		return EPERM;
	pthread_mutex_lock(&rt_mutex);
	if (!fb_load_acquire(&fb_rt_up)) {
		pthread_mutex_unlock(&rt_mutex);
		return ESRCH;
	}
	while (fb_load_acquire(&fb_rt->nr_live) > 0 && quiet < 2) {
		quiet = all_quiet() ? quiet + 1 : 0;
		usleep(quiet ? FB_QUIET_NS / 1000 : 1000);
	}
	fb_store_seqcst(&fb_rt_open, false);
	fb_rt_wait_outside();
	stop_workers(fb_rt->nr_workers);
	fb_rt_wait_outside(); /* wakes that raced with the stop */
	abandoned = abandon_all();
	if (fb_rt->env.stats != FB_STATS_OFF)
		fb_stats_print_now(2, fb_rt->env.stats == FB_STATS_JSON);
	fb_store_release(&fb_rt_up, false);
	fb_runtime_set_facts(0, 0);
	runtime_free(fb_rt);
	fb_rt = NULL;
	fb_store_seqcst(&fb_features_mask, fb_features_default());
	pthread_mutex_unlock(&rt_mutex);
	return abandoned ? EBUSY : 0;
}

void fb_sched_fiber_reaped(void)
{
	fb_sub(&fb_rt->nr_live, 1);
}

/*
 * A feature that changes domain flags (ASYM_PACKING) was switched through
 * the API: rebuild the domain view and publish it with RCU; readers keep
 * the old one until their read section ends.
 */
void fb_sched_features_changed(uint64_t old, uint64_t mask)
{
	uint64_t asym = FB_FEAT_BIT(ASYM_PACKING);

	if (!((old ^ mask) & asym))
		return;
	/* A fiber may switch features while fiber_shutdown() holds the
	 * mutex and waits for that very fiber: never block here.  A switch
	 * racing with start or shutdown keeps the current view. */
	if (pthread_mutex_trylock(&rt_mutex))
		return;
	if (fb_load_acquire(&fb_rt_up))
		fb_topo_view_rebuild(fb_rt->topo, fb_rt->nr_workers,
				     mask & asym ? FB_VIEW_ASYM_PACKING : 0);
	pthread_mutex_unlock(&rt_mutex);
}

/* Accessors for stats.c. */
const struct fb_counters *fb_sched_counters(int worker)
{
	if (worker < 0)
		return &fb_rt->foreign;
	return &fb_rt->workers[worker]->cnt;
}

int fiber_current_worker(void)
{
	struct fb_worker *w = fb_worker_self();

	return w ? w->id : -1;
}

int fiber_nr_workers(void)
{
	return fb_runtime_nr_workers();
}
