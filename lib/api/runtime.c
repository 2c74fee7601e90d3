/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * runtime.c - fiber_init() and fiber_shutdown(): the configuration (the
 * environment and struct fiber_config, api/env.c) turned into the scheduler's
 * parameters, the topology opened, the runtime made and started
 * (sched/runtime.c); the implicit start of the first call that needs a
 * runtime; and the fork handlers.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fiber.h>

#include "api/cgroup.h"
#include "api/env.h"
#include "api/offload.h"
#include "sched/sched.h"
#include "topo/topo.h"

/* The running runtime's configuration (the statistics mode at shutdown);
 * fb_runtime_lock. */
static struct fb_env rt_env;

/* EINVAL once an implicit start refused the configuration, else 0.
 * Written under implicit_mutex, cleared by fiber_init (atomic). */
static pthread_mutex_t implicit_mutex = PTHREAD_MUTEX_INITIALIZER;
static atomic_int implicit_rc;

/* LIBFIBER_TRACE's file, opened by the start (trace_open) and written
 * through by sched/trace.c; -1: none.  fb_runtime_lock. */
static int trace_fd = -1;

static void atfork_prepare(void)
{
	fb_runtime_atfork(FB_ATFORK_PREPARE);
	fb_offload_atfork(FB_ATFORK_PREPARE);
}

static void atfork_parent(void)
{
	fb_offload_atfork(FB_ATFORK_PARENT);
	fb_runtime_atfork(FB_ATFORK_PARENT);
}

static void atfork_child(void)
{
	pthread_mutex_init(&implicit_mutex, NULL);
	fb_store_relaxed(&implicit_rc, 0);
	fb_env_free(&rt_env);
	/* The parent's trace and statistics are the parent's to write. */
	if (trace_fd >= 0)
		close(trace_fd);
	trace_fd = -1;
	fb_stats_close();
	fb_offload_atfork(FB_ATFORK_CHILD);
	fb_runtime_atfork(FB_ATFORK_CHILD);
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

/*
 * At exit, a runtime still running (the program returned from main, or
 * called exit(), without fiber_shutdown()) still gives its statistics
 * and its trace, as a server stopped by a signal that it handles by
 * exiting would want.  Registered once, at the first start that asks for
 * either; it does nothing once the runtime is shut down.
 */
static void at_exit(void)
{
	bool worker = fb_worker_self() != NULL;

	if (!fb_load_acquire(&fb_rt_up) || (!worker && !fb_rt_enter()))
		return;
	if (rt_env.stats != FB_STATS_OFF)
		fb_stats_print_out();
	fb_trace_write();
	if (!worker)
		fb_rt_leave();
}

static void at_exit_register(const struct fb_env *env)
{
	static bool done;

	if (done || (env->stats == FB_STATS_OFF && !env->trace))
		return;
	done = !atexit(at_exit);
}

/* The signal numbers of LIBFIBER_DUMP_SIGNAL's words. */
static const int dump_signals[] = {
	[FB_DUMP_OFF] = 0,
	[FB_DUMP_QUIT] = SIGQUIT,
	[FB_DUMP_USR1] = SIGUSR1,
	[FB_DUMP_USR2] = SIGUSR2,
};

/*
 * trace_open - open LIBFIBER_TRACE's file (created, or truncated), so that
 * a path that cannot be written is refused before the run rather than
 * found out at its end, as LIBFIBER_STATS_FILE's.  A run that writes no
 * trace (the process is killed) leaves the file empty.
 * Return: 0; EINVAL with the message printed.
 */
static int trace_open(const struct fb_env *env)
{
	if (!env->trace)
		return 0;
	trace_fd = fb_open_output("LIBFIBER_TRACE", env->trace);
	return trace_fd < 0 ? EINVAL : 0;
}

static void trace_close(void)
{
	if (trace_fd >= 0)
		close(trace_fd);
	trace_fd = -1;
}

/* The default worker count: one per PU the process may use (its
 * affinity, which the kernel narrows to the cpuset), but no more than the
 * cgroup's CPU bandwidth limit allows (api/cgroup.c). */
static int default_workers(const struct fb_topo *topo)
{
	int n = fb_topo_nr_pus(topo), limit = fb_cgroup_cpu_limit();

	return limit && limit < n ? limit : n;
}

/* start - a runtime for @config.  Context: fb_runtime_lock held. */
static int start(const struct fiber_config *config)
{
	struct fb_sched_params p = { 0 };
	struct fb_runtime *r;
	struct fb_topo *topo;
	struct fb_env env;
	int rc;

	rc = fb_env_load(&env, config);
	if (rc)
		return rc;
	if (fb_clock_setup(env.clock)) {
		fprintf(stderr,
			"libfiber: LIBFIBER_CLOCK=\"%s\": the TSC could not be "
			"calibrated; expected auto or monotonic\n",
			env.clock == FB_CLOCK_ANCHORED ? "anchored" : "tsc");
		rc = EINVAL;
		goto fail;
	}
	rc = fb_env_topo_open(&env, &topo);
	if (rc)
		goto fail;
	/* bind -1 (not set): pin, round-robin on the real PUs for a
	 * synthetic topology, and unpin while a CPU is shared (sched/bind.c). */
	p.bind = env.bind < 0 ? FB_BIND_AUTO :
		 env.bind     ? FB_BIND_ON :
				FB_BIND_OFF;
	p.nr_workers = env.workers ? (int)env.workers : default_workers(topo);
	p.poll_ns = (uint64_t)env.idle_poll_us * 1000;
	p.stack_size = env.stack_size;
	p.stack_guard = env.stack_guard != 0; /* -1, not set: guarded */
	p.features = env.features;
	p.blocked_min_ticks = (unsigned int)env.blocked_load_interval_ms;
	p.stall_ns = (uint64_t)env.stall_ms * 1000000;
	p.deadlock = (int)env.deadlock;
	p.dump_signal = dump_signals[env.dump_signal];
	p.interval_ns = (uint64_t)env.stats_interval_ms * 1000000;
	p.interval_fn = fb_stats_interval_fn();
	p.trace_path = env.trace; /* env lives as long as the runtime */
	rc = fb_stats_open(&env);
	if (!rc) {
		rc = trace_open(&env);
		if (rc)
			fb_stats_close();
	}
	if (rc) {
		fb_topo_close(topo);
		goto fail;
	}
	p.trace_fd = trace_fd;
	rc = fb_runtime_create(&p, topo, &r);
	if (!rc)
		rc = fb_runtime_start(r);
	if (rc) {
		fb_stats_close();
		trace_close();
		goto fail;
	}
	fb_offload_configure((unsigned int)env.offload_threads);
	rt_env = env;
	at_exit_register(&env);
	return 0;
fail:
	fb_env_free(&env);
	return rc;
}

int fiber_init(const struct fiber_config *config)
{
	int rc = EBUSY;

	fb_store_relaxed(&implicit_rc, 0); /* see fb_runtime_get() */
	fb_runtime_lock();
	if (!fb_load_acquire(&fb_rt_up)) {
		atfork_register();
		rc = start(config);
	}
	fb_runtime_unlock();
	return rc;
}

/*
 * An implicit start (fiber_create before fiber_init) that found a bad
 * configuration has printed its message; later implicit starts return
 * EINVAL quietly instead of reading the environment and printing again,
 * until the program calls fiber_init() itself.  Other errors (ENOMEM,
 * EAGAIN) may pass: the next call tries again.
 */
int fb_runtime_get_slow(void)
{
	int rc;

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

int fiber_shutdown(void)
{
	long abandoned;

	if (fb_worker_self())
		return EPERM;
	/* A job of fiber_offload() is a call in progress that the stop
	 * waits for (fb_rt_nr_outside): it would wait for itself. */
	if (fb_offload_in_helper())
		return EDEADLK;
	fb_runtime_lock();
	if (!fb_load_acquire(&fb_rt_up)) {
		fb_runtime_unlock();
		return ESRCH;
	}
	abandoned = fb_runtime_stop(); /* sched/runtime.c: the protocol */
	if (rt_env.stats != FB_STATS_OFF)
		fb_stats_print_out();
	fb_runtime_free_current();
	fb_stats_close();
	trace_close();
	fb_env_free(&rt_env);
	fb_runtime_unlock();
	return abandoned ? EBUSY : 0;
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
