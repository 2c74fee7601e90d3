/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * offload.c - fiber_offload(): a blocking function run on a helper kernel
 * thread while the calling fiber parks, and fiber_getaddrinfo() on it.
 *
 * The pool is one FIFO of jobs under one mutex, served by at most
 * LIBFIBER_OFFLOAD_THREADS detached threads.  A thread is created when a
 * job is queued and no thread is idle (below the bound), so a program that
 * never offloads has none; an idle thread exits after FB_OFFLOAD_IDLE_S.
 * Helper threads block every signal, so a signal blocked in the workers
 * and the main thread stays pending for fiber_signal_wait-style readers.
 *
 * A job lives on the heap with two references, the caller's and the
 * helper's: the helper posts the caller's semaphore and then drops its
 * reference, and fiber_sem_post() may still touch the semaphore after the
 * woken caller has returned, so neither side may own the memory alone.
 *
 * Cancellation: a caller cancelled while its job is still queued takes the
 * job out and returns ECANCELED (fn never runs).  Once fn has started it
 * cannot be stopped, and its result is written into the caller's frame,
 * so the caller waits for it and returns 0; the cancellation is raised
 * again on the caller, for its next cancellation point to report.
 *
 * Shutdown: each call is counted in fb_rt_nr_outside from before it reads
 * fb_rt_accepting until its fiber is woken; fb_runtime_stop() abandons no
 * fiber while the count is above 0, so no caller is abandoned with a
 * helper about to wake it.  A call once shutdown refuses new work
 * (fb_rt_accepting false) returns ESHUTDOWN.
 *
 * fork(): the child has none of the helpers.  The prepare handler holds
 * the pool mutex; the child's handler forgets the threads and the queued
 * jobs (their callers are fibers of the parent, which never run in the
 * child), and the next offload creates threads again.
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include <fiber.h>

#include "api/offload.h"
#include "sched/sched.h"

/* 10 s.  Picked: long enough that a server resolving names now and then
 * keeps its threads, short enough that a burst's threads go soon after. */
#define FB_OFFLOAD_IDLE_S 10

enum job_state {
	JOB_QUEUED,  /* on pool.queue; the caller may take it back */
	JOB_RUNNING, /* a helper runs fn; the caller must wait */
	JOB_DONE,    /* ret is set and the caller's semaphore posted */
};

struct job {
	struct fb_list node; /* pool.queue; pool.mutex */
	void *(*fn)(void *);
	void *arg;
	void *ret;
	enum job_state state; /* pool.mutex */
	atomic_int refs;      /* the caller's and the helper's */
	fiber_sem_t done;     /* posted once fn returned */
};

static struct {
	pthread_mutex_t mutex;
	pthread_cond_t cond; /* a job was queued */
	struct fb_list queue;
	unsigned int nr_threads; /* mutex */
	unsigned int nr_idle;	 /* mutex: threads waiting on cond */
	unsigned int nr_queued;	 /* mutex: jobs on queue */
	unsigned int max_threads;
	bool cond_ready; /* cond uses CLOCK_MONOTONIC */
} pool = {
	.mutex = PTHREAD_MUTEX_INITIALIZER,
	.queue = FB_LIST_INIT(pool.queue),
	.max_threads = FB_OFFLOAD_THREADS_DEFAULT,
};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void pool_init(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pool.cond, &ca);
	pthread_condattr_destroy(&ca);
	pool.cond_ready = true;
}

static void job_put(struct job *j)
{
	if (atomic_fetch_sub(&j->refs, 1) == 1)
		free(j);
}

/* Set on the helpers, for fiber_shutdown()'s check. */
static __thread bool in_helper;

bool fb_offload_in_helper(void)
{
	return in_helper;
}

static void *helper_main(void *unused)
{
	struct timespec until;
	struct job *j;

	(void)unused;
	in_helper = true;
	/* Named apart from the worker that created it, whose name a new
	 * thread inherits: top -H and gdb tell blocking calls from fibers. */
	pthread_setname_np(pthread_self(), "fiber-offload");
	pthread_mutex_lock(&pool.mutex);
	for (;;) {
		if (fb_list_empty(&pool.queue)) {
			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_sec += FB_OFFLOAD_IDLE_S;
			pool.nr_idle++;
			while (fb_list_empty(&pool.queue) &&
			       pthread_cond_timedwait(&pool.cond, &pool.mutex,
						      &until) != ETIMEDOUT)
				;
			pool.nr_idle--;
			if (fb_list_empty(&pool.queue))
				break;
		}
		j = fb_list_entry(fb_list_pop(&pool.queue), struct job, node);
		pool.nr_queued--;
		j->state = JOB_RUNNING;
		pthread_mutex_unlock(&pool.mutex);
		j->ret = j->fn(j->arg);
		pthread_mutex_lock(&pool.mutex);
		j->state = JOB_DONE;
		pthread_mutex_unlock(&pool.mutex);
		fiber_sem_post(&j->done);
		job_put(j);
		pthread_mutex_lock(&pool.mutex);
	}
	pool.nr_threads--;
	pthread_mutex_unlock(&pool.mutex);
	return NULL;
}

/* spawn - one more helper.  Context: pool.mutex held.
 * Return: 0; EAGAIN/ENOMEM from pthread_create. */
static int spawn(void)
{
	sigset_t all, old;
	pthread_attr_t a;
	pthread_t t;
	int rc;

	sigfillset(&all);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	/* A thread inherits its creator's CPUs, and a worker's may be one
	 * PU: the helper would then compete with that worker's fibers for
	 * it.  It gets the CPUs the runtime started with, as an unpinned
	 * worker does. */
	if (fb_worker_self() && CPU_COUNT(&fb_rt->cpus))
		pthread_attr_setaffinity_np(&a, sizeof(fb_rt->cpus),
					    &fb_rt->cpus);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, &a, helper_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (!rc)
		pool.nr_threads++;
	return rc;
}

/* submit - queue @j, making a helper if no idle one is left for it and
 * the bound allows.  An idle helper that was signalled still counts in
 * nr_idle until it wakes, so the jobs already queued are its: comparing
 * nr_idle with them, not with 0, keeps a burst of submissions from all
 * waiting for the one idle helper.
 * Return: 0; EAGAIN if there is no helper and none could be made. */
static int submit(struct job *j)
{
	int rc = 0;

	pthread_mutex_lock(&pool.mutex);
	if (pool.nr_queued >= pool.nr_idle &&
	    pool.nr_threads < pool.max_threads && spawn() &&
	    pool.nr_threads == 0)
		rc = EAGAIN;
	if (!rc) {
		j->state = JOB_QUEUED;
		fb_list_add_tail(&j->node, &pool.queue);
		pool.nr_queued++;
		pthread_cond_signal(&pool.cond);
	}
	pthread_mutex_unlock(&pool.mutex);
	return rc;
}

/* wait_done - park until @j is done; a cancellation that finds @j queued
 * takes it back.  Return: 0 (done); ECANCELED (@j never ran). */
static int wait_done(struct job *j)
{
	bool recancel = false;
	int rc;

	while ((rc = fiber_sem_wait(&j->done)) == ECANCELED) {
		pthread_mutex_lock(&pool.mutex);
		if (j->state == JOB_QUEUED) {
			fb_list_del(&j->node);
			pool.nr_queued--;
			pthread_mutex_unlock(&pool.mutex);
			job_put(j); /* the helper's reference */
			return ECANCELED;
		}
		pthread_mutex_unlock(&pool.mutex);
		recancel = true;
	}
	if (recancel)
		fiber_cancel(fiber_self());
	return rc;
}

int fiber_offload(void *(*fn)(void *), void *arg, void **ret)
{
	struct job *j;
	int rc;

	if (!fn)
		return EINVAL;
	if (!fb_worker_self()) {
		void *r = fn(arg);

		if (ret)
			*ret = r;
		return 0;
	}
	pthread_once(&pool_once, pool_init);
	atomic_fetch_add(&fb_rt_nr_outside, 1);
	if (!fb_load_seqcst(&fb_rt_accepting)) {
		rc = ESHUTDOWN;
		goto out;
	}
	rc = ENOMEM;
	j = calloc(1, sizeof(*j));
	if (!j)
		goto out;
	j->fn = fn;
	j->arg = arg;
	atomic_init(&j->refs, 2);
	rc = submit(j);
	if (rc) {
		free(j);
		goto out;
	}
	rc = wait_done(j);
	if (!rc && ret)
		*ret = j->ret;
	job_put(j);
out:
	atomic_fetch_sub(&fb_rt_nr_outside, 1);
	return rc;
}

struct gai_call {
	const char *node, *service;
	const struct addrinfo *hints;
	struct addrinfo **res;
	int rc, err;
};

static void *gai_run(void *p)
{
	struct gai_call *c = p;

	c->rc = getaddrinfo(c->node, c->service, c->hints, c->res);
	c->err = errno;
	return NULL;
}

/* errno's address looked up afresh: the caller may resume on another
 * thread, and glibc lets the compiler keep the address from before a call
 * (include/fiber.h, the fd calls). */
static int *(*volatile errno_at)(void) = __errno_location;

int fiber_getaddrinfo(const char *node, const char *service,
		      const struct addrinfo *hints, struct addrinfo **res)
{
	struct gai_call c = { node, service, hints, res, 0, 0 };
	int rc;

	if (!res) {
		*errno_at() = EINVAL;
		return EAI_SYSTEM;
	}
	rc = fiber_offload(gai_run, &c, NULL);
	if (rc) {
		*errno_at() = rc;
		return EAI_SYSTEM;
	}
	if (c.rc == EAI_SYSTEM)
		*errno_at() = c.err;
	return c.rc;
}

void fb_offload_configure(unsigned int max_threads)
{
	pthread_mutex_lock(&pool.mutex);
	pool.max_threads = max_threads;
	pthread_mutex_unlock(&pool.mutex);
}

void fb_offload_atfork(int phase)
{
	if (phase == FB_ATFORK_PREPARE) {
		pthread_mutex_lock(&pool.mutex);
		return;
	}
	if (phase == FB_ATFORK_PARENT) {
		pthread_mutex_unlock(&pool.mutex);
		return;
	}
	/* The child's only thread is the one that locked pool.mutex in the
	 * prepare handler: unlocking it, rather than initialising it again,
	 * keeps the lock's history whole for checkers such as TSan, which
	 * would otherwise see it held for ever and report every later lock
	 * taken in the child as ordered after it. */
	pthread_mutex_unlock(&pool.mutex);
	if (pool.cond_ready) {
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&pool.cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	fb_list_init(&pool.queue);
	pool.nr_threads = 0;
	pool.nr_idle = 0;
	pool.nr_queued = 0;
}
