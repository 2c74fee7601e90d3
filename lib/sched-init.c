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
		while (w->free_fibers) {
			struct fb_fiber *f = w->free_fibers;

			w->free_fibers = fb_load_relaxed(&f->wl_next);
			fb_free(f);
		}
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

int fiber_init(const struct fiber_config *config)
{
	struct fb_runtime *r;
	int rc, i;

	fb_store_relaxed(&implicit_rc, 0); /* see fb_runtime_get() */
	pthread_mutex_lock(&rt_mutex);
	rc = EBUSY;
	if (fb_load_acquire(&fb_rt_up))
		goto out;
	rc = runtime_new(config, &r);
	if (rc)
		goto out;
	fb_rt = r;
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
 * handed off and no timer armed. */
static bool all_quiet(void)
{
	for (int i = 0; i < fb_rt->nr_workers; i++) {
		struct fb_worker *w = fb_rt->workers[i];

		if ((fb_load_seqcst(&w->pw.state) & FB_WS_MASK) <
			    FB_WS_SLEEPING ||
		    fb_worker_has_work(w) || fb_timer_next(w))
			return false;
	}
	return true;
}

void fb_stats_dump_at_exit(void);

int fiber_shutdown(void)
{
	int quiet = 0;

	if (fb_worker_self())
		return EPERM;
	pthread_mutex_lock(&rt_mutex);
	if (!fb_load_acquire(&fb_rt_up)) {
		pthread_mutex_unlock(&rt_mutex);
		return ESRCH;
	}
	/* Let runnable fibers finish.  Fibers blocked for good (all workers
	 * asleep, twice in a row) are left behind and reported. */
	while (fb_load_acquire(&fb_rt->nr_live) > 0 && quiet < 2) {
		quiet = all_quiet() ? quiet + 1 : 0;
		usleep(quiet ? 20000 : 1000);
	}
	if (fb_load_acquire(&fb_rt->nr_live) > 0)
		fprintf(stderr,
			"libfiber: fiber_shutdown: %ld fibers still blocked "
			"are abandoned\n",
			fb_load_acquire(&fb_rt->nr_live));
	stop_workers(fb_rt->nr_workers);
	if (fb_rt->env.stats != FB_STATS_OFF)
		fiber_stats_print(2, fb_rt->env.stats == FB_STATS_JSON);
	fb_store_release(&fb_rt_up, false);
	runtime_free(fb_rt);
	fb_rt = NULL;
	fb_store_seqcst(&fb_features_mask, fb_features_default());
	pthread_mutex_unlock(&rt_mutex);
	return 0;
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
