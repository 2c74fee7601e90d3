/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-shutdown.c - the end of a runtime: fibers that fiber_shutdown()
 * leaves behind, sleepers, creates and joins racing with it, and fork().
 *
 * The guarantees under test:
 *   - fibers still blocked when shutdown runs are abandoned and named on
 *     stderr, shutdown returns EBUSY, and a late post, unlock, signal or
 *     close on what they wait for is harmless; none of them ever runs in
 *     a later runtime;
 *   - sleepers and timed waiters count as blocked: a fiber sleeping for
 *     ever does not hold shutdown up;
 *   - a create racing with shutdown either fails with ESHUTDOWN or its
 *     fiber runs, and a join never hangs (a thread joining an abandoned
 *     fiber gets ESHUTDOWN);
 *   - after fork() the child starts a fresh runtime on its next call,
 *     also when the fork came from a fiber; fork + exec and fork + _exit
 *     work.
 * A broken guarantee shows as a crash, a hang (the test's timeout) or a
 * wrong count; children report through their exit status.
 */
#include <fiber.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static fiber_t spawn_named(void *(*fn)(void *), void *arg, const char *name)
{
	fiber_attr_t a;
	fiber_t f;

	assert_int_equal(fiber_attr_init(&a), 0);
	assert_int_equal(fiber_attr_setstacksize(&a, TEST_STACK), 0);
	if (name)
		assert_int_equal(fiber_attr_setname(&a, name), 0);
	assert_int_equal(fiber_create(&f, &a, fn, arg), 0);
	return f;
}

/* Wait until @n fibers have reached their blocking call (they bump
 * @ready just before it), then give them time to really park: a
 * fiber_shutdown() that comes too early only waits longer. */
static void wait_ready(atomic_int *ready, int n)
{
	while (atomic_load(ready) < n)
		usleep(1000);
	usleep(20000);
}

/* ---- abandoned fibers ---- */

static fiber_sem_t sem;
static fiber_mutex_t mtx = FIBER_MUTEX_INITIALIZER;
static fiber_mutex_t cmtx = FIBER_MUTEX_INITIALIZER;
static fiber_cond_t cond = FIBER_COND_INITIALIZER;
static fiber_chan_t *chan;
static atomic_int ready, resumed;

static void *on_sem(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ready, 1);
	fiber_sem_wait(&sem);
	atomic_fetch_add(&resumed, 1);
	return NULL;
}

static void *on_mutex(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ready, 1);
	fiber_mutex_lock(&mtx);
	atomic_fetch_add(&resumed, 1);
	return NULL;
}

static void *on_cond(void *arg)
{
	(void)arg;
	fiber_mutex_lock(&cmtx);
	atomic_fetch_add(&ready, 1);
	fiber_cond_wait(&cond, &cmtx);
	atomic_fetch_add(&resumed, 1);
	fiber_mutex_unlock(&cmtx);
	return NULL;
}

static void *on_chan(void *arg)
{
	long v;

	(void)arg;
	atomic_fetch_add(&ready, 1);
	fiber_chan_recv(chan, &v);
	atomic_fetch_add(&resumed, 1);
	return NULL;
}

static void *on_sleep(void *arg)
{
	atomic_fetch_add(&ready, 1);
	fiber_sleep(arg ? UINT64_MAX : 5ull * 1000000000);
	atomic_fetch_add(&resumed, 1);
	return NULL;
}

static void *quick(void *arg)
{
	return arg;
}

/* Run @fn with stderr sent to a temporary file; return what it printed. */
static char *capture_stderr(int (*fn)(void), int *rc)
{
	FILE *tmp = tmpfile();
	int saved = dup(2);
	char *buf = calloc(1, 65536);

	assert_non_null(tmp);
	fflush(stderr);
	dup2(fileno(tmp), 2);
	*rc = fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	fread(buf, 1, 65535, tmp);
	fclose(tmp);
	return buf;
}

static void
test_shutdown_abandons_blocked_fibers_and_later_wakes_are_harmless(void **state)
{
	char *out, line[128];
	fiber_t f;
	int rc, v;

	(void)state;
	atomic_store(&ready, 0);
	atomic_store(&resumed, 0);
	fiber_sem_init(&sem, 0);
	runtime_start(2);
	assert_int_equal(fiber_chan_create(&chan, sizeof(long), 0), 0);
	assert_int_equal(fiber_mutex_lock(&mtx), 0); /* main holds it */
	f = spawn_named(on_sem, NULL, "sem \"waiter\"\n");
	spawn_named(on_mutex, NULL, "mutex-waiter");
	spawn_named(on_cond, NULL, "cond-waiter");
	spawn_named(on_chan, NULL, "chan-waiter");
	spawn_named(on_sleep, (void *)1, "sleeps-for-ever");
	wait_ready(&ready, 5);

	out = capture_stderr(fiber_shutdown, &rc);
	assert_int_equal(rc, EBUSY);
	assert_non_null(strstr(out, "5 fibers still blocked are abandoned"));
	snprintf(line, sizeof(line),
		 "fiber %llu \"sem \\\"waiter\\\"\\x0a\": "
		 "waits on sem %p",
		 (unsigned long long)fiber_id(f), (void *)&sem);
	assert_non_null(strstr(out, line));
	assert_non_null(strstr(out, "\"mutex-waiter\": waits on mutex"));
	assert_non_null(strstr(out, "\"cond-waiter\": waits on cond"));
	assert_non_null(strstr(out, "\"chan-waiter\": waits on chan recv"));
	assert_non_null(strstr(out, "\"sleeps-for-ever\": sleeps"));
	free(out);

	/* Wakes after the shutdown: no crash, no lost unit, nobody runs. */
	assert_int_equal(fiber_sem_post(&sem), 0);
	assert_int_equal(fiber_sem_getvalue(&sem, &v), 0);
	assert_int_equal(v, 1); /* the abandoned waiter did not take it */
	assert_int_equal(fiber_mutex_unlock(&mtx), 0);
	assert_int_equal(fiber_mutex_trylock(&mtx), 0);
	assert_int_equal(fiber_mutex_unlock(&mtx), 0);
	assert_int_equal(fiber_cond_signal(&cond), 0);
	assert_int_equal(fiber_cond_broadcast(&cond), 0);
	assert_int_equal(fiber_chan_close(chan), 0);
	/* Only abandoned waiters are left: the objects may be destroyed. */
	assert_int_equal(fiber_sem_destroy(&sem), 0);
	assert_int_equal(fiber_cond_destroy(&cond), 0);
	assert_int_equal(fiber_chan_destroy(chan), 0);
	assert_int_equal(fiber_join(f, NULL), ESHUTDOWN);

	/* A new runtime: none of the old fibers ever runs in it. */
	runtime_start(2);
	fiber_sem_init(&sem, 0);
	assert_int_equal(fiber_sem_post(&sem), 0);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(fiber_create(&f, NULL, quick, NULL), 0);
		assert_int_equal(fiber_join(f, NULL), 0);
	}
	usleep(50000);
	runtime_stop();
	assert_int_equal(atomic_load(&resumed), 0);
}

/* ---- sleepers do not hold shutdown up ---- */

static void test_shutdown_does_not_wait_for_sleepers(void **state)
{
	char *out;
	int rc;

	(void)state;
	atomic_store(&ready, 0);
	atomic_store(&resumed, 0);
	runtime_start(2);
	spawn_named(on_sleep, (void *)1, "forever");
	spawn_named(on_sleep, NULL, "five-seconds");
	wait_ready(&ready, 2);
	out = capture_stderr(fiber_shutdown, &rc);
	assert_int_equal(rc, EBUSY);
	assert_non_null(strstr(out, "\"five-seconds\": sleeps ("));
	assert_non_null(strstr(out, " s left)"));
	free(out);
	assert_int_equal(atomic_load(&resumed), 0);
	assert_int_equal(fiber_shutdown(), ESRCH);
}

/* ---- a fiber abandoned in an fd call gives the fd back ---- */

static int sv[2];

static void *on_fd(void *arg)
{
	char c;

	(void)arg;
	atomic_fetch_add(&ready, 1);
	fiber_read(sv[0], &c, 1);
	atomic_fetch_add(&resumed, 1);
	return NULL;
}

static void *read_one(void *arg)
{
	char c = 0;

	(void)arg;
	return (void *)(intptr_t)(fiber_read(sv[0], &c, 1) == 1 ? c : -1);
}

static void test_shutdown_abandoned_fd_waiter_gives_the_fd_back(void **state)
{
	fiber_t f;
	void *ret;
	int rc;

	(void)state;
	atomic_store(&ready, 0);
	atomic_store(&resumed, 0);
	assert_int_equal(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	runtime_start(2);
	spawn_named(on_fd, NULL, "reader");
	wait_ready(&ready, 1);
	free(capture_stderr(fiber_shutdown, &rc));
	assert_int_equal(rc, EBUSY);

	runtime_start(2);
	assert_int_equal(fiber_create(&f, NULL, read_one, NULL), 0);
	assert_int_equal(write(sv[1], "z", 1), 1);
	assert_int_equal(fiber_join(f, &ret), 0);
	assert_int_equal((intptr_t)ret, 'z');
	assert_int_equal(fiber_close(sv[0]), 0); /* no call left inside */
	runtime_stop();
	close(sv[1]);
	assert_int_equal(atomic_load(&resumed), 0);
}

/* ---- a thread that joins an abandoned fiber ---- */

static void *join_thread(void *arg)
{
	return (void *)(intptr_t)fiber_join(*(fiber_t *)arg, NULL);
}

static void
test_shutdown_wakes_a_thread_joining_an_abandoned_fiber(void **state)
{
	pthread_t t;
	fiber_t f;
	void *rc;
	int src;

	(void)state;
	atomic_store(&ready, 0);
	fiber_sem_init(&sem, 0);
	runtime_start(1);
	f = spawn_named(on_sem, NULL, NULL);
	wait_ready(&ready, 1);
	assert_int_equal(pthread_create(&t, NULL, join_thread, &f), 0);
	usleep(20000); /* it is in fiber_join (or will find it abandoned) */
	free(capture_stderr(fiber_shutdown, &src));
	assert_int_equal(src, EBUSY);
	assert_int_equal(pthread_join(t, &rc), 0);
	assert_int_equal((intptr_t)rc, ESHUTDOWN);
}

/* ---- create and join racing with shutdown ---- */

static atomic_bool creator_stop;
static atomic_long created, refused;

static void *creator(void *arg)
{
	(void)arg;
	while (!atomic_load(&creator_stop)) {
		fiber_t f;
		void *ret = NULL;
		int rc = fiber_create(&f, NULL, quick, (void *)7);

		if (rc == 0) {
			if (fiber_join(f, &ret) != 0 || ret != (void *)7)
				return (void *)1;
			atomic_fetch_add(&created, 1);
		} else if (rc == ESHUTDOWN) {
			atomic_fetch_add(&refused, 1);
		} else {
			return (void *)2;
		}
		usleep(rc ? 50 : 200);
	}
	return NULL;
}

#define CREATORS 3

static void test_shutdown_create_and_join_race_with_it(void **state)
{
	pthread_t t[CREATORS];
	void *res;

	(void)state;
	atomic_store(&creator_stop, false);
	for (int k = 0; k < CREATORS; k++)
		assert_int_equal(pthread_create(&t[k], NULL, creator, NULL), 0);
	for (int i = 0; i < 100; i++) {
		int rc = fiber_init(NULL);

		assert_true(rc == 0 || rc == EBUSY); /* EBUSY: it started one */
		usleep(2000);
		rc = fiber_shutdown();
		assert_true(rc == 0 || rc == ESRCH);
	}
	atomic_store(&creator_stop, true);
	for (int k = 0; k < CREATORS; k++) {
		assert_int_equal(pthread_join(t[k], &res), 0);
		assert_null(res);
	}
	fiber_shutdown();
	assert_true(atomic_load(&created) > 0);
}

/* ---- fork ---- */

/* Where the child may not start threads (harness.h), it checks
 * everything but the fresh runtime. */

/* In the child: what a program does after fork() without exec. */
static int child_uses_fibers(void)
{
	fiber_t f;
	void *ret;

	alarm(20); /* a hang fails the child */
	if (fiber_self() != NULL || fiber_current_worker() != -1)
		return 10;
	if (fiber_shutdown() != ESRCH) /* the parent's is gone */
		return 11;
	if (!CHILD_MAY_START_THREADS)
		return 0;
	for (int i = 0; i < 10; i++) {
		if (fiber_create(&f, NULL, quick, (void *)3))
			return 12;
		if (fiber_join(f, &ret) || ret != (void *)3)
			return 13;
	}
	if (fiber_nr_workers() < 1)
		return 14;
	if (fiber_shutdown() != 0)
		return 15;
	return 0;
}

static int wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFSIGNALED(st))
		return 1000 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

static void test_fork_child_starts_a_fresh_runtime(void **state)
{
	fiber_t f;
	pid_t pid;

	(void)state;
	atomic_store(&ready, 0);
	fiber_sem_init(&sem, 0);
	runtime_start(2);
	f = spawn_named(on_sem, NULL,
			NULL); /* the parent has a blocked fiber */
	wait_ready(&ready, 1);
	pid = fork();
	if (pid == 0)
		_exit(child_uses_fibers());
	assert_true(pid > 0);
	assert_int_equal(wait_child(pid), 0);
	/* The parent's runtime is untouched. */
	assert_int_equal(fiber_sem_post(&sem), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	runtime_stop();
}

static atomic_int fork_result = -1;

static void *forking_fiber(void *arg)
{
	int how = (int)(intptr_t)arg;
	pid_t pid = fork();

	if (pid == 0) {
		if (how == 1)
			execl("/bin/true", "true", (char *)NULL);
		if (how == 2)
			_exit(42);
		_exit(child_uses_fibers());
	}
	atomic_store(&fork_result, pid < 0 ? -1 : wait_child(pid));
	return NULL;
}

static void test_fork_from_a_fiber(void **state)
{
	static const int expect[] = { 0, 0, 42 }; /* fibers, exec, _exit */

	(void)state;
	runtime_start(2);
	for (int how = 0; how < 3; how++) {
		fiber_t f =
			spawn_named(forking_fiber, (void *)(intptr_t)how, NULL);

		assert_int_equal(fiber_join(f, NULL), 0);
		assert_int_equal(atomic_load(&fork_result), expect[how]);
	}
	runtime_stop();
}

/* ---- what the child inherits from the fibers of its parent ---- */

static fiber_mutex_t fork_mtx = FIBER_MUTEX_INITIALIZER;
static fiber_rwlock_t fork_rw = FIBER_RWLOCK_INITIALIZER;

/* child_unlocks - in the child of a fiber that held both locks: the
 * thread goes on as that fiber, so it still holds them. */
static int child_unlocks(void)
{
	alarm(20);
	if (fiber_mutex_unlock(&fork_mtx))
		return 1;
	if (fiber_rwlock_unlock(&fork_rw))
		return 2;
	if (fiber_mutex_trylock(&fork_mtx) || fiber_mutex_unlock(&fork_mtx))
		return 3;
	if (fiber_rwlock_trywrlock(&fork_rw) || fiber_rwlock_unlock(&fork_rw))
		return 4;
	return 0;
}

static void *locks_and_forks(void *arg)
{
	pid_t pid;

	(void)arg;
	if (fiber_mutex_lock(&fork_mtx) || fiber_rwlock_wrlock(&fork_rw))
		return (void *)(intptr_t)-2;
	pid = fork();
	if (pid == 0)
		_exit(child_unlocks());
	fiber_rwlock_unlock(&fork_rw);
	fiber_mutex_unlock(&fork_mtx);
	return (void *)(intptr_t)(pid < 0 ? -1 : wait_child(pid));
}

/* A fiber holds a mutex and a write lock and forks: the child unlocks
 * both ("lock, fork, unlock in parent and child", as with pthreads). */
static void test_fork_from_a_fiber_keeps_its_locks(void **state)
{
	void *rv;
	fiber_t f;

	(void)state;
	runtime_start(2);
	f = spawn_named(locks_and_forks, NULL, NULL);
	assert_int_equal(fiber_join(f, &rv), 0);
	assert_int_equal((intptr_t)rv, 0);
	runtime_stop();
}

static fiber_sem_t fork_sem;

static void *waits_fork_sem(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ready, 1);
	return (void *)(intptr_t)fiber_sem_wait(&fork_sem);
}

/* child_posts - in the child of a parent whose fiber @pf waits on
 * fork_sem: a fiber of the child waits there too, behind it.  The post
 * is the child's fiber's: the parent's never runs here. */
static int child_posts(fiber_t pf)
{
	fiber_t cf;
	void *rv;

	alarm(20);
	if (!CHILD_MAY_START_THREADS) {
		/* No fiber of the child's: the post stays for trywait. */
		if (fiber_sem_post(&fork_sem))
			return 2;
		if (fiber_sem_trywait(&fork_sem))
			return 3; /* the post went to the parent's fiber */
		goto rest;
	}
	atomic_store(&ready, 0);
	if (fiber_create(&cf, NULL, waits_fork_sem, NULL))
		return 1;
	while (atomic_load(&ready) < 1)
		usleep(1000);
	usleep(20000);
	if (fiber_sem_post(&fork_sem))
		return 2;
	if (fiber_join_until(cf, &rv, fiber_now() + 5000000000ull) ||
	    (intptr_t)rv != 0)
		return 3; /* the post went to the parent's fiber */
rest:
	if (fiber_join(pf, NULL) != ESHUTDOWN)
		return 4; /* it never ends here */
	if (fiber_cancel(pf) != ESHUTDOWN)
		return 7; /* as for an abandoned fiber */
	if (fiber_sem_destroy(&fork_sem))
		return 5; /* the parent's fiber keeps it busy */
	if (CHILD_MAY_START_THREADS && fiber_shutdown())
		return 6;
	return 0;
}

static void test_fork_child_skips_the_parents_waiters(void **state)
{
	fiber_t f;
	pid_t pid;

	(void)state;
	atomic_store(&ready, 0);
	assert_int_equal(fiber_sem_init(&fork_sem, 0), 0);
	runtime_start(2);
	f = spawn_named(waits_fork_sem, NULL, NULL);
	wait_ready(&ready, 1);
	pid = fork();
	if (pid == 0)
		_exit(child_posts(f));
	assert_true(pid > 0);
	assert_int_equal(wait_child(pid), 0);
	/* The parent's fiber is the parent's still. */
	assert_int_equal(fiber_sem_post(&fork_sem), 0);
	assert_int_equal(fiber_join(f, NULL), 0);
	runtime_stop();
	assert_int_equal(fiber_sem_destroy(&fork_sem), 0);
}

static fiber_rwlock_t fork_rwq = FIBER_RWLOCK_INITIALIZER;
static atomic_int child_got;

static void *wrlock_unlock(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ready, 1);
	fiber_rwlock_wrlock(&fork_rwq);
	fiber_rwlock_unlock(&fork_rwq);
	return NULL;
}

static void *rdlock_unlock(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ready, 1);
	fiber_rwlock_rdlock(&fork_rwq);
	fiber_rwlock_unlock(&fork_rwq);
	return NULL;
}

static void *thread_wrlocks(void *arg)
{
	(void)arg;
	if (fiber_rwlock_wrlock(&fork_rwq) == 0) {
		atomic_store(&child_got, 1);
		fiber_rwlock_unlock(&fork_rwq);
	}
	return NULL;
}

/* child_rwlock - in the child of a parent whose main thread held
 * fork_rwq (shared if @writer_queued, else exclusive) with a fiber
 * queued behind it for the other kind: the parent's fiber neither keeps
 * readers out nor takes the wake meant for the child's writer. */
static int child_rwlock(bool writer_queued)
{
	pthread_t t;

	alarm(20);
	atomic_store(&child_got, 0);
	if (writer_queued) {
		if (fiber_rwlock_unlock(&fork_rwq))
			return 1;
		if (fiber_rwlock_tryrdlock(&fork_rwq))
			return 2; /* the parent's writer kept it */
		if (fiber_rwlock_unlock(&fork_rwq))
			return 3;
	} else if (!CHILD_MAY_START_THREADS) {
		if (fiber_rwlock_unlock(&fork_rwq))
			return 5;
		if (fiber_rwlock_trywrlock(&fork_rwq) ||
		    fiber_rwlock_unlock(&fork_rwq))
			return 6;
	} else {
		if (pthread_create(&t, NULL, thread_wrlocks, NULL))
			return 4;
		usleep(50000); /* the thread queues */
		if (fiber_rwlock_unlock(&fork_rwq))
			return 5;
		pthread_join(t, NULL); /* hangs if the wake was lost */
		if (!atomic_load(&child_got))
			return 6;
	}
	if (fiber_rwlock_destroy(&fork_rwq))
		return 7;
	return 0;
}

/* A parent's fiber queued on a rwlock, as writer behind a reader or as
 * reader behind a writer, does not block the child's copy. */
static void test_fork_child_rwlock_ignores_the_parents_fibers(void **state)
{
	(void)state;
	for (int writer_queued = 0; writer_queued < 2; writer_queued++) {
		fiber_t f;
		pid_t pid;

		atomic_store(&ready, 0);
		assert_int_equal(fiber_rwlock_init(&fork_rwq), 0);
		runtime_start(2);
		if (writer_queued)
			assert_int_equal(fiber_rwlock_rdlock(&fork_rwq), 0);
		else
			assert_int_equal(fiber_rwlock_wrlock(&fork_rwq), 0);
		f = spawn_named(writer_queued ? wrlock_unlock : rdlock_unlock,
				NULL, NULL);
		wait_ready(&ready, 1);
		pid = fork();
		if (pid == 0)
			_exit(child_rwlock(writer_queued));
		assert_true(pid > 0);
		assert_int_equal(wait_child(pid), 0);
		assert_int_equal(fiber_rwlock_unlock(&fork_rwq), 0);
		assert_int_equal(fiber_join(f, NULL), 0);
		runtime_stop();
	}
}

/* ---- fork while a fiber waits in a select ---- */

static fiber_chan_t *sel_a, *sel_b;
static atomic_int sel_chosen = -1, sel_rc = -1;
static long sel_got;

static void *selecting(void *arg)
{
	struct fiber_select_case c[2] = {
		{ sel_a, FIBER_SELECT_RECV, &sel_got },
		{ sel_b, FIBER_SELECT_RECV, &sel_got },
	};
	size_t chosen = 99;

	(void)arg;
	atomic_fetch_add(&ready, 1);
	atomic_store(&sel_rc,
		     fiber_chan_select(c, 2, FIBER_NO_DEADLINE, &chosen));
	atomic_store(&sel_chosen, (int)chosen);
	return NULL;
}

/* In the child: a select of its own on channels of its own, in the fresh
 * runtime (the parent's channels hold the parent's waiters; the child does
 * not touch them). */
static int child_selects(void)
{
	fiber_chan_t *a, *b;
	struct fiber_select_case c[2];
	long v = 5, got = 0;
	size_t chosen = 99;
	int rc = child_uses_fibers();

	if (rc || !CHILD_MAY_START_THREADS)
		return rc;
	if (fiber_init(NULL) || fiber_chan_create(&a, sizeof(long), 1) ||
	    fiber_chan_create(&b, sizeof(long), 1))
		return 20;
	if (fiber_chan_send(b, &v))
		return 21;
	c[0] = (struct fiber_select_case){ a, FIBER_SELECT_RECV, &got };
	c[1] = (struct fiber_select_case){ b, FIBER_SELECT_RECV, &got };
	if (fiber_chan_select(c, 2, FIBER_NO_DEADLINE, &chosen) ||
	    chosen != 1 || got != 5)
		return 22;
	fiber_chan_destroy(a);
	fiber_chan_destroy(b);
	return fiber_shutdown() ? 23 : 0;
}

static void *forking_selecter(void *arg)
{
	pid_t pid = fork();

	(void)arg;
	if (pid == 0)
		_exit(child_selects());
	atomic_store(&fork_result, pid < 0 ? -1 : wait_child(pid));
	return NULL;
}

/* A fiber forks while another waits in fiber_chan_select: the child runs
 * a select of its own, and the parent's select still completes, with the
 * case that became ready and the value sent. */
static void test_fork_while_a_fiber_selects(void **state)
{
	long v = 42;
	fiber_t s, f;

	(void)state;
	atomic_store(&ready, 0);
	atomic_store(&sel_chosen, -1);
	atomic_store(&sel_rc, -1);
	sel_got = 0;
	runtime_start(2);
	assert_int_equal(fiber_chan_create(&sel_a, sizeof(long), 0), 0);
	assert_int_equal(fiber_chan_create(&sel_b, sizeof(long), 0), 0);
	s = spawn_named(selecting, NULL, "selecting");
	wait_ready(&ready, 1);
	f = spawn_named(forking_selecter, NULL, NULL);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(atomic_load(&fork_result), 0);
	assert_int_equal(atomic_load(&sel_rc), -1); /* still waiting */
	assert_int_equal(fiber_chan_send(sel_b, &v), 0);
	assert_int_equal(fiber_join(s, NULL), 0);
	assert_int_equal(atomic_load(&sel_rc), 0);
	assert_int_equal(atomic_load(&sel_chosen), 1);
	assert_int_equal(sel_got, 42);
	assert_int_equal(fiber_chan_destroy(sel_a), 0);
	assert_int_equal(fiber_chan_destroy(sel_b), 0);
	runtime_stop();
}

/* The child reached exit(): its atexit handlers run.  It leaves with
 * _exit(77) so that a leak checker does not scan a child whose parent's
 * stacks are gone; 77 tells the parent that exit() was called. */
static void child_exit_seen(void)
{
	_exit(77);
}

/* The fiber's function returns in the child: the child exits, as when
 * the last thread of a process ends. */
static void *returns_in_child(void *arg)
{
	pid_t pid = fork();

	(void)arg;
	if (pid == 0) {
		atexit(child_exit_seen);
		return NULL; /* in the child */
	}
	atomic_store(&fork_result, pid < 0 ? -1 : wait_child(pid));
	return NULL;
}

static void test_fork_child_fiber_returning_exits_zero(void **state)
{
	fiber_t f;

	(void)state;
	runtime_start(1);
	f = spawn_named(returns_in_child, NULL, NULL);
	assert_int_equal(fiber_join(f, NULL), 0);
	assert_int_equal(atomic_load(&fork_result), 77);
	runtime_stop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_shutdown_abandons_blocked_fibers_and_later_wakes_are_harmless),
		TEST(test_shutdown_does_not_wait_for_sleepers),
		TEST(test_shutdown_wakes_a_thread_joining_an_abandoned_fiber),
		TEST(test_shutdown_abandoned_fd_waiter_gives_the_fd_back),
		TEST(test_shutdown_create_and_join_race_with_it),
		TEST(test_fork_child_starts_a_fresh_runtime),
		TEST(test_fork_from_a_fiber),
		TEST(test_fork_from_a_fiber_keeps_its_locks),
		TEST(test_fork_child_skips_the_parents_waiters),
		TEST(test_fork_child_rwlock_ignores_the_parents_fibers),
		TEST(test_fork_child_fiber_returning_exits_zero),
		TEST(test_fork_while_a_fiber_selects),
	};

	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
