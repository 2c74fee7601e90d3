/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-offload.c - fiber_offload() and fiber_getaddrinfo() through the
 * public API: a result comes back; no more functions run at once than
 * LIBFIBER_OFFLOAD_THREADS (2 here) however many fibers call; the caller's
 * worker runs other fibers while the function blocks (with one worker,
 * the function waits for another fiber's progress); a cancellation finds
 * a queued call (ECANCELED, the function never runs) or a running one (the
 * call waits, returns the result, and the next cancellation point reports
 * it); a thread that is not a worker runs the function itself; shutdown
 * waits for a running call instead of abandoning its fiber; a forked
 * child makes helpers again; getaddrinfo's results and errors; and a
 * call made after the shutdown stopped taking new work is ESHUTDOWN with
 * the function never run.  That last test shuts the door itself
 * (sched/sched.h's fb_rt_accepting), so this test links the internal
 * layers.
 *
 * Helper functions block on a condition the test thread releases, so
 * every count asserted is reached by construction, not by timing.
 */
#include <fiber.h>

#include <errno.h>
#include <netdb.h>
#include <sched.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#include "sched/sched.h"

#define NR_HELPERS 2

static pthread_mutex_t gate_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static atomic_int running, max_running, started, submitted;

static void start_runtime(unsigned int workers)
{
	struct fiber_config c = { 0 };

	c.workers = workers;
	assert_int_equal(fiber_init(&c), 0);
	gate_open = false;
	atomic_store(&running, 0);
	atomic_store(&max_running, 0);
	atomic_store(&started, 0);
	atomic_store(&submitted, 0);
}

static void open_gate(void)
{
	pthread_mutex_lock(&gate_mutex);
	gate_open = true;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_mutex);
}

static void wait_for(atomic_int *v, int n)
{
	while (atomic_load(v) < n)
		usleep(1000);
}

/* On a helper: count itself in, wait for the gate, return @arg + 1. */
static void *gated(void *arg)
{
	int now = atomic_fetch_add(&running, 1) + 1;
	int max = atomic_load(&max_running);

	while (now > max &&
	       !atomic_compare_exchange_weak(&max_running, &max, now))
		;
	atomic_fetch_add(&started, 1);
	pthread_mutex_lock(&gate_mutex);
	while (!gate_open)
		pthread_cond_wait(&gate_cond, &gate_mutex);
	pthread_mutex_unlock(&gate_mutex);
	atomic_fetch_sub(&running, 1);
	return (void *)((intptr_t)arg + 1);
}

struct call {
	intptr_t arg;
	intptr_t got;
	int rc;
	int rc_after; /* the next cancellation point's result */
};

static void *offloader(void *p)
{
	struct call *c = p;
	void *ret = (void *)-1;

	atomic_fetch_add(&submitted, 1);
	c->rc = fiber_offload(gated, (void *)c->arg, &ret);
	c->got = (intptr_t)ret;
	return NULL;
}

static fiber_t spawn(void *(*fn)(void *), void *arg)
{
	fiber_t f;

	assert_int_equal(fiber_create(&f, NULL, fn, arg), 0);
	return f;
}

static void test_offload_returns_the_result(void **state)
{
	struct call c = { .arg = 41 };
	fiber_t f;

	(void)state;
	start_runtime(2);
	open_gate();
	f = spawn(offloader, &c);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.got, 42);
	assert_int_equal(fiber_shutdown(), 0);
}

#define NR_CALLERS 12

static void test_offload_parallelism_is_bounded_by_the_pool(void **state)
{
	struct call c[NR_CALLERS];
	fiber_t f[NR_CALLERS];

	(void)state;
	start_runtime(2);
	for (int i = 0; i < NR_CALLERS; i++) {
		c[i] = (struct call){ .arg = i };
		f[i] = spawn(offloader, &c[i]);
	}
	wait_for(&submitted, NR_CALLERS);
	wait_for(&started, NR_HELPERS);
	usleep(20000); /* room for a helper above the bound to show up */
	assert_int_equal(atomic_load(&started), NR_HELPERS);
	open_gate();
	for (int i = 0; i < NR_CALLERS; i++) {
		assert_int_equal(fiber_join(f[i], NULL), 0);
		assert_int_equal(c[i].rc, 0);
		assert_int_equal(c[i].got, i + 1);
	}
	assert_int_equal(atomic_load(&max_running), NR_HELPERS);
	assert_int_equal(atomic_load(&started), NR_CALLERS);
	assert_int_equal(fiber_shutdown(), 0);
}

/* With one worker: the helper's function waits until another fiber on
 * that worker counted to 1000; a worker blocked in the call never would. */
static atomic_int progress;

static void *wait_progress(void *arg)
{
	(void)arg;
	while (atomic_load(&progress) < 1000)
		usleep(100);
	return (void *)7;
}

static void *progress_caller(void *p)
{
	struct call *c = p;
	void *ret = NULL;

	c->rc = fiber_offload(wait_progress, NULL, &ret);
	c->got = (intptr_t)ret;
	return NULL;
}

static void *counter(void *arg)
{
	(void)arg;
	while (atomic_load(&progress) < 1000) {
		atomic_fetch_add(&progress, 1);
		fiber_yield();
	}
	return NULL;
}

static void test_offload_caller_worker_runs_other_fibers(void **state)
{
	struct call c = { 0 };
	fiber_t a, b;

	(void)state;
	alarm(60); /* a worker blocked in the call hangs: fail instead */
	start_runtime(1);
	atomic_store(&progress, 0);
	a = spawn(progress_caller, &c);
	b = spawn(counter, NULL);
	assert_int_equal(fiber_join(a, NULL), 0);
	assert_int_equal(fiber_join(b, NULL), 0);
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.got, 7);
	assert_int_equal(fiber_shutdown(), 0);
	alarm(0);
}

static void *after_cancel(void *p)
{
	struct call *c = p;
	fiber_sem_t s;

	offloader(c);
	fiber_sem_init(&s, 0);
	c->rc_after = fiber_sem_wait(&s);
	return NULL;
}

static void test_offload_cancel_takes_a_queued_call_back(void **state)
{
	struct call busy[NR_HELPERS], q = { .arg = 100 };
	fiber_t fb[NR_HELPERS], fq;

	(void)state;
	start_runtime(2);
	for (int i = 0; i < NR_HELPERS; i++) {
		busy[i] = (struct call){ .arg = i };
		fb[i] = spawn(offloader, &busy[i]);
	}
	wait_for(&started, NR_HELPERS);
	fq = spawn(offloader, &q);
	wait_for(&submitted, NR_HELPERS + 1);
	usleep(10000); /* let it queue; a cancel before the call is the same */
	assert_int_equal(fiber_cancel(fq), 0);
	assert_int_equal(fiber_join(fq, NULL), 0);
	assert_int_equal(q.rc, ECANCELED);
	assert_int_equal(q.got, -1); /* *ret untouched */
	open_gate();
	for (int i = 0; i < NR_HELPERS; i++) {
		assert_int_equal(fiber_join(fb[i], NULL), 0);
		assert_int_equal(busy[i].rc, 0);
	}
	assert_int_equal(atomic_load(&started), NR_HELPERS); /* never ran */
	assert_int_equal(fiber_shutdown(), 0);
}

static void test_offload_cancel_waits_for_a_running_call(void **state)
{
	struct call c = { .arg = 5 };
	fiber_t f;

	(void)state;
	start_runtime(2);
	f = spawn(after_cancel, &c);
	wait_for(&started, 1);
	assert_int_equal(fiber_cancel(f), 0);
	usleep(10000); /* the caller sees the cancellation first */
	open_gate();
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.got, 6);
	assert_int_equal(c.rc_after, ECANCELED); /* kept for the next point */
	assert_int_equal(fiber_shutdown(), 0);
}

static void *whoami(void *arg)
{
	(void)arg;
	return (void *)pthread_self();
}

static void test_offload_from_a_thread_runs_inline(void **state)
{
	void *ret = NULL;

	(void)state;
	assert_int_equal(fiber_offload(whoami, NULL, &ret), 0);
	assert_true(pthread_equal((pthread_t)ret, pthread_self()));
	assert_int_equal(fiber_offload(NULL, NULL, &ret), EINVAL);
	start_runtime(1);
	assert_int_equal(fiber_offload(whoami, NULL, &ret), 0);
	assert_true(pthread_equal((pthread_t)ret, pthread_self()));
	assert_int_equal(fiber_shutdown(), 0);
}

/* Shutdown while a call runs: the caller is not abandoned (EBUSY), it
 * gets its result. */
static void *slow(void *arg)
{
	atomic_fetch_add(&started, 1);
	usleep(200000);
	return arg;
}

static void *slow_caller(void *p)
{
	struct call *c = p;
	void *ret = NULL;

	c->rc = fiber_offload(slow, (void *)c->arg, &ret);
	c->got = (intptr_t)ret;
	return NULL;
}

static void test_offload_shutdown_waits_for_running_calls(void **state)
{
	struct call c = { .arg = 9, .rc = -1 };
	fiber_attr_t attr;
	fiber_t f;

	(void)state;
	start_runtime(2);
	fiber_attr_init(&attr);
	fiber_attr_setdetachstate(&attr, FIBER_CREATE_DETACHED);
	assert_int_equal(fiber_create(&f, &attr, slow_caller, &c), 0);
	fiber_attr_destroy(&attr);
	wait_for(&started, 1);
	assert_int_equal(fiber_shutdown(), 0);
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.got, 9);
}

static void *plain(void *arg)
{
	return arg;
}

static void *plain_caller(void *p)
{
	struct call *c = p;
	void *ret = NULL;

	c->rc = fiber_offload(plain, (void *)c->arg, &ret);
	c->got = (intptr_t)ret;
	return NULL;
}

static int child_offloads(void)
{
	struct call c = { .arg = 3, .rc = -1 };
	fiber_t f;

	alarm(20);
	if (fiber_create(&f, NULL, plain_caller, &c) || fiber_join(f, NULL))
		return 10;
	if (c.rc != 0 || c.got != 3)
		return 11;
	return fiber_shutdown() ? 12 : 0;
}

static void test_offload_fork_child_makes_new_helpers(void **state)
{
	struct call c = { .arg = 1 };
	fiber_t f;
	pid_t pid;
	int st;

	(void)state;
	start_runtime(2);
	f = spawn(plain_caller, &c); /* the parent has helpers now */
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(c.rc, 0);
	if (CHILD_MAY_START_THREADS) {
		pid = fork();
		if (pid == 0)
			_exit(child_offloads());
		assert_true(pid > 0);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	assert_int_equal(fiber_shutdown(), 0);
}

/*
 * A thread inherits its creator's CPUs.  A helper made by a pinned worker,
 * and the child of a fork() from a fiber, must not keep that worker's
 * one PU: they get the CPUs the process had when the runtime started.
 */
static int nr_cpus(void)
{
	cpu_set_t s;

	return sched_getaffinity(0, sizeof(s), &s) ? -1 : CPU_COUNT(&s);
}

static void *cpus_of_caller(void *p)
{
	(void)p;
	return (void *)(intptr_t)nr_cpus();
}

struct cpus {
	int worker, helper, child;
};

static void *pinned_caller(void *p)
{
	struct cpus *c = p;
	void *ret = NULL;
	pid_t pid;
	int st;

	c->worker = nr_cpus();
	if (fiber_offload(cpus_of_caller, NULL, &ret) == 0)
		c->helper = (int)(intptr_t)ret;
	pid = fork();
	if (pid == 0)
		_exit(nr_cpus() & 0x7f);
	if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st))
		c->child = WEXITSTATUS(st);
	return NULL;
}

static void test_offload_helpers_and_fork_children_are_not_pinned(void **state)
{
	struct fiber_config cfg = { .workers = 2, .bind = 1, .bind_set = 1 };
	struct cpus c = { -1, -1, -1 };
	int all = nr_cpus();
	fiber_t f;

	(void)state;
	if (all < 2 || all > 0x7f)
		skip(); /* one CPU: nothing to tell apart */
	assert_int_equal(fiber_init(&cfg), 0);
	f = spawn(pinned_caller, &c);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(fiber_shutdown(), 0);
	if (c.worker != 1)
		print_message("# the worker was not pinned (%d CPUs): a loaded "
			      "host unpins it\n",
			      c.worker);
	assert_int_equal(c.helper, all);
	assert_int_equal(c.child, all);
}

/* fiber_shutdown() from an offloaded function would wait for that very
 * call: EDEADLK, and the runtime runs on. */
static void *shutdown_inside(void *p)
{
	(void)p;
	return (void *)(intptr_t)fiber_shutdown();
}

static void *shutdown_offloader(void *p)
{
	struct call *c = p;
	void *ret = NULL;

	c->rc = fiber_offload(shutdown_inside, NULL, &ret);
	c->got = (intptr_t)ret;
	return NULL;
}

static void test_offload_shutdown_from_a_helper_is_edeadlk(void **state)
{
	struct call c = { .rc = -1 }, d = { .arg = 5, .rc = -1 };
	fiber_t f;

	(void)state;
	start_runtime(2);
	f = spawn(shutdown_offloader, &c);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.got, EDEADLK);
	f = spawn(plain_caller, &d); /* still running */
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.got, 5);
	assert_int_equal(fiber_shutdown(), 0);
}

struct gai {
	const char *node;
	int rc, family, err;
};

static void *resolver(void *p)
{
	struct gai *g = p;
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;

	g->rc = fiber_getaddrinfo(g->node, "80", &hints, &res);
	if (!g->rc) {
		g->family = res->ai_family;
		freeaddrinfo(res);
	}
	if (fiber_getaddrinfo("127.0.0.1", "80", &hints, NULL) == EAI_SYSTEM)
		g->err = errno;
	return NULL;
}

static void test_getaddrinfo_results_and_errors(void **state)
{
	struct gai a = { "127.0.0.1" }, b = { "::1" }, c = { "no such" };
	fiber_t f[3];

	(void)state;
	start_runtime(2);
	f[0] = spawn(resolver, &a);
	f[1] = spawn(resolver, &b);
	f[2] = spawn(resolver, &c);
	for (int i = 0; i < 3; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	assert_int_equal(a.rc, 0);
	assert_int_equal(a.family, AF_INET);
	assert_int_equal(b.rc, 0);
	assert_int_equal(b.family, AF_INET6);
	assert_int_equal(c.rc, EAI_NONAME);
	assert_int_equal(a.err, EINVAL);
	assert_int_equal(fiber_shutdown(), 0);
}

/* On a helper: its own thread name, into @arg (16 bytes). */
static void *own_name(void *arg)
{
	if (pthread_getname_np(pthread_self(), arg, 16))
		strcpy(arg, "?");
	return NULL;
}

static void *name_caller(void *arg)
{
	return (void *)(intptr_t)fiber_offload(own_name, arg, NULL);
}

/* Helpers are named fiber-offload, not after the worker that made them. */
static void test_offload_helpers_are_named(void **state)
{
	char name[16] = "";
	void *rc = (void *)-1;

	(void)state;
	start_runtime(1);
	assert_int_equal(fiber_join(spawn(name_caller, name), &rc), 0);
	assert_ptr_equal(rc, NULL);
	assert_string_equal(name, "fiber-offload");
	assert_int_equal(fiber_shutdown(), 0);
}

static atomic_int ran_after_close;

static void *must_not_run(void *arg)
{
	atomic_fetch_add(&ran_after_close, 1);
	return arg;
}

struct closed_call {
	int rc, gai_rc, gai_err;
	void *ret;
};

/* closed_gate_caller - what fiber_shutdown()'s step 2 leaves a fiber
 * that runs after it refused new work (woken by a call served outside,
 * or created just before): it refuses it, calls, and takes it again. */
static void *closed_gate_caller(void *p)
{
	struct closed_call *c = p;
	struct addrinfo *res = NULL;

	c->ret = (void *)7;
	fb_store_seqcst(&fb_rt_accepting, false);
	c->rc = fiber_offload(must_not_run, (void *)1, &c->ret);
	c->gai_rc = fiber_getaddrinfo("127.0.0.1", NULL, NULL, &res);
	c->gai_err = errno;
	fb_store_seqcst(&fb_rt_accepting, true);
	if (res)
		freeaddrinfo(res);
	return NULL;
}

static void test_offload_after_the_gate_closed_is_eshutdown(void **state)
{
	struct closed_call c = { -1, 0, 0, NULL };

	(void)state;
	start_runtime(2);
	assert_int_equal(fiber_join(spawn(closed_gate_caller, &c), NULL), 0);
	assert_int_equal(c.rc, ESHUTDOWN);
	assert_ptr_equal(c.ret, (void *)7); /* untouched on error */
	assert_int_equal(c.gai_rc, EAI_SYSTEM);
	assert_int_equal(c.gai_err, ESHUTDOWN);
	assert_int_equal(atomic_load(&ran_after_close), 0);
	assert_int_equal(fb_load_seqcst(&fb_rt_nr_outside), 0);
	assert_int_equal(fiber_shutdown(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_offload_returns_the_result),
		TEST(test_offload_parallelism_is_bounded_by_the_pool),
		TEST(test_offload_caller_worker_runs_other_fibers),
		TEST(test_offload_cancel_takes_a_queued_call_back),
		TEST(test_offload_cancel_waits_for_a_running_call),
		TEST(test_offload_from_a_thread_runs_inline),
		TEST(test_offload_shutdown_waits_for_running_calls),
		TEST(test_offload_fork_child_makes_new_helpers),
		TEST(test_offload_helpers_and_fork_children_are_not_pinned),
		TEST(test_offload_shutdown_from_a_helper_is_edeadlk),
		TEST(test_getaddrinfo_results_and_errors),
		TEST(test_offload_after_the_gate_closed_is_eshutdown),
		TEST(test_offload_helpers_are_named),
	};

	setenv("LIBFIBER_OFFLOAD_THREADS", "2", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
