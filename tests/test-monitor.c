/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-monitor.c - the diagnostics: stall detection and rescue, the
 * deadlock report, fiber_dump() and the dump signal, thread names, the
 * interval statistics, the statistics at exit and the trace.  Each
 * detector fires in a scenario made for it and stays silent in one that
 * only looks like it.  Assertions are on counters, on where fibers ran and
 * on what was printed, never on how long something took.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- stderr into a file ------------------------------------------------ */

struct capture {
	char path[64];
	int saved;
};

static void capture_begin(struct capture *c)
{
	int fd;

	snprintf(c->path, sizeof(c->path), "/tmp/test-monitor-XXXXXX");
	fd = mkstemp(c->path);
	assert_true(fd >= 0);
	fflush(stderr);
	c->saved = dup(2);
	dup2(fd, 2);
	close(fd);
}

/* capture_text - what was written so far (malloc'ed). */
static char *capture_text(const struct capture *c)
{
	FILE *f = fopen(c->path, "r");
	char *buf = calloc(1, 1 << 20);
	size_t n;

	assert_non_null(f);
	assert_non_null(buf);
	n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static char *capture_end(struct capture *c)
{
	char *t;

	fflush(stderr);
	dup2(c->saved, 2);
	close(c->saved);
	t = capture_text(c);
	unlink(c->path);
	return t;
}

static void clear_env(void)
{
	static const char *const vars[] = {
		"LIBFIBER_STALL_MS",
		"LIBFIBER_DEADLOCK",
		"LIBFIBER_DUMP_SIGNAL",
		"LIBFIBER_STATS_FILE",
		"LIBFIBER_STATS_INTERVAL_MS",
		"LIBFIBER_TRACE",
		"LIBFIBER_STATS",
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static fiber_t spawn(const char *name, void *(*fn)(void *), void *arg,
		     int only_worker)
{
	fiber_attr_t a;
	fiber_workerset_t set;
	fiber_t f;

	fiber_attr_init(&a);
	fiber_attr_setname(&a, name);
	fiber_attr_setstacksize(&a, TEST_STACK);
	if (only_worker >= 0) {
		fiber_workerset_zero(&set);
		fiber_workerset_add(&set, only_worker);
		assert_int_equal(fiber_attr_setaffinity(&a, sizeof(set), &set),
				 0);
	}
	assert_int_equal(fiber_create(&f, &a, fn, arg), 0);
	fiber_attr_destroy(&a);
	return f;
}

/* ---- stalls ------------------------------------------------------------ */

static atomic_int sleeper_worker = -1, sleeper_armed_on = -1;
static atomic_bool sleeper_woke;
/* When the sleeper armed its timer and when the hog began to compute. */
static _Atomic uint64_t sleeper_armed_ns, hog_started_ns;
/* How long the sleeper sleeps: 10 ms, doubled at each retry (hog_round). */
static _Atomic uint64_t sleeper_ns;

static void *sleeper(void *arg)
{
	fiber_workerset_t all;

	(void)arg;
	/* Start on worker 0 (its affinity), arm the timer there, and be
	 * free to run anywhere when it fires. */
	fiber_workerset_zero(&all);
	fiber_workerset_add(&all, 0);
	fiber_workerset_add(&all, 1);
	assert_int_equal(fiber_setaffinity(sizeof(all), &all), 0);
	atomic_store(&sleeper_armed_on, fiber_current_worker());
	atomic_store(&sleeper_armed_ns, now_ns());
	fiber_sleep(atomic_load(&sleeper_ns));
	atomic_store(&sleeper_worker, fiber_current_worker());
	atomic_store(&sleeper_woke, true);
	return NULL;
}

static atomic_bool release_hog;

/* hog_spin - computes without a scheduling point and without a call, so
 * that every frame has its frame pointer, until main releases it (at most
 * 10 s). */
__attribute__((noinline)) static void hog_spin(void)
{
	uint64_t end = now_ns() + 10ull * 1000000000u;

	for (unsigned long i = 1; !atomic_load(&release_hog); i++)
		if (!(i & 0xfffff) && now_ns() > end)
			break;
	__asm__ volatile("" ::: "memory"); /* no tail call: keep the frame */
}

static void *hog(void *arg)
{
	(void)arg;
	atomic_store(&hog_started_ns, now_ns());
	hog_spin();
	return NULL;
}

/*
 * hog_round - round @round (from 1) of the scenario below, its report in
 * *@err.  Returns whether the hog began computing at least 1 ms before the
 * sleeper's deadline: on a loaded host worker 0 may not run for 10 ms,
 * and then it fires the timer itself before the hog starts, which is no
 * stall.  Each retry doubles the sleep, so that a loaded host (CI's
 * parallel tests under ThreadSanitizer) gets the hog started in time.
 */
static bool hog_round(int round, char **err)
{
	struct capture cap;
	fiber_t s, h;
	uint64_t end;
	bool valid;

	clear_env();
	setenv("LIBFIBER_STALL_MS", "100", 1);
	capture_begin(&cap);
	runtime_start(2);
	atomic_store(&sleeper_ns, (10ull * 1000000) << (round - 1));
	atomic_store(&sleeper_woke, false);
	atomic_store(&hog_started_ns, 0);
	s = spawn("sleeper", sleeper, NULL, 0);
	while (fiber_stats_counter("parks") < 1)
		usleep(100);
	atomic_store(&release_hog, false);
	h = spawn("hog", hog, NULL, 0);
	end = now_ns() + 10ull * 1000000000u;
	while (!(atomic_load(&sleeper_woke) && fiber_stats_counter("stalls")) &&
	       now_ns() < end)
		usleep(1000);
	atomic_store(&release_hog, true);
	assert_int_equal(fiber_join(h, NULL), 0);
	assert_int_equal(fiber_join(s, NULL), 0);
	valid = atomic_load(&hog_started_ns) + 1000000 <
		atomic_load(&sleeper_armed_ns) + atomic_load(&sleeper_ns);
	if (valid) {
		assert_int_equal(fiber_stats_counter("stalls"), 1);
		assert_true(fiber_stats_counter("stall_timers") >= 1);
	}
	runtime_stop();
	*err = capture_end(&cap);
	clear_env();
	return valid;
}

/* What the detector is for: on two workers a fiber computes without
 * yielding on worker 0, where a 10 ms sleeper armed its timer.  The stall
 * is reported once, with a backtrace that names the function, and the
 * sleeper is woken and run by worker 1 while worker 0 is still stuck.
 * A round where the hog started too late is run again (at most 5). */
static void
test_monitor_hog_is_reported_and_its_sleeper_runs_elsewhere(void **state)
{
	char *err = NULL;
	int round = 0;

	(void)state;
	do {
		free(err);
		if (++round > 5)
			fail_msg("the hog never started before the deadline");
	} while (!hog_round(round, &err));
	assert_int_equal(atomic_load(&sleeper_armed_on), 0);
	assert_int_equal(atomic_load(&sleeper_worker), 1);
#if defined(__SANITIZE_THREAD__)
	/* The hog is sampled inside TSan's runtime, which keeps no frame
	 * pointers: the walk stops there. */
	const char *frame = "libfiber:   #0 0x";
#else
	const char *frame = "hog_spin+0x";
#endif
	if (!strstr(err, "libfiber: stall: fiber") ||
	    !strstr(err, "\"hog\" has run for") || !strstr(err, "worker 0") ||
	    !strstr(err, frame))
		fail_msg("no stall report with a backtrace:\n%s", err);
	free(err);
}

static atomic_bool stop_yielders;

static void *yielder(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_yielders))
		fiber_yield();
	return NULL;
}

/* Fibers that compute for longer than the threshold but yield all along
 * are no stall: nothing is reported.  (A worker thread the kernel holds
 * off its CPU for a millisecond on a loaded host is rescued all the same,
 * so stall_moves is not asserted.) */
static void test_monitor_yielding_fibers_are_no_stall(void **state)
{
	fiber_t f[3];
	uint64_t end;

	(void)state;
	clear_env();
	setenv("LIBFIBER_STALL_MS", "20", 1);
	runtime_start(2);
	atomic_store(&stop_yielders, false);
	for (int i = 0; i < 3; i++)
		f[i] = spawn("yielder", yielder, NULL, 0);
	end = now_ns() + 200 * 1000 * 1000ull;
	while (now_ns() < end)
		usleep(1000);
	atomic_store(&stop_yielders, true);
	for (int i = 0; i < 3; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	assert_int_equal(fiber_stats_counter("stalls"), 0);
	runtime_stop();
	clear_env();
}

/* ---- one worker's hand-offs, which read no clock ------------------------ */

#define SOLO_STOP 0xff
#define SOLO_HOG 0xfe

static fiber_pipe_t *solo_pipe[2];
static atomic_bool solo_stop, solo_hog;

/* solo_ping - bounce a byte with solo_pong until told to stop; then, if
 * solo_hog, send SOLO_HOG (pong computes at once, a run begun by this
 * fiber's hand-off), else SOLO_STOP; wait for pong's last byte. */
static void *solo_ping(void *arg)
{
	unsigned char b = 0;
	size_t done;

	(void)arg;
	while (!atomic_load(&solo_stop)) {
		assert_int_equal(fiber_pipe_write(solo_pipe[0], &b, 1, &done),
				 0);
		assert_int_equal(fiber_pipe_read(solo_pipe[1], &b, 1, &done),
				 0);
	}
	b = atomic_load(&solo_hog) ? SOLO_HOG : SOLO_STOP;
	assert_int_equal(fiber_pipe_write(solo_pipe[0], &b, 1, &done), 0);
	assert_int_equal(fiber_pipe_read(solo_pipe[1], &b, 1, &done), 0);
	return NULL;
}

static void *solo_pong(void *arg)
{
	unsigned char b;
	size_t done;

	(void)arg;
	for (;;) {
		assert_int_equal(fiber_pipe_read(solo_pipe[0], &b, 1, &done),
				 0);
		if (b == SOLO_HOG)
			hog_spin();
		assert_int_equal(fiber_pipe_write(solo_pipe[1], &b, 1, &done),
				 0);
		if (b == SOLO_HOG || b == SOLO_STOP)
			return NULL;
	}
}

/*
 * solo_run - one worker, LIBFIBER_STALL_MS=100: ping and pong hand the
 * worker to each other for 300 ms; then, with @hog, pong computes
 * without a scheduling point, in a run that ping's hand-off began, until
 * the stall is counted (at most 10 s).  Returns the stalls counted and
 * what the runtime wrote to stderr in *@err.
 */
static long long solo_run(bool hog, char **err)
{
	struct capture cap;
	fiber_t f[2];
	long long stalls;
	uint64_t end;

	clear_env();
	setenv("LIBFIBER_STALL_MS", "100", 1);
	capture_begin(&cap);
	runtime_start(1);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_pipe_create(&solo_pipe[i], 0), 0);
	atomic_store(&solo_stop, false);
	atomic_store(&solo_hog, hog);
	atomic_store(&release_hog, false);
	f[1] = spawn("pong", solo_pong, NULL, -1);
	f[0] = spawn("ping", solo_ping, NULL, -1);
	end = now_ns() + 300 * 1000 * 1000ull;
	while (now_ns() < end)
		usleep(1000);
	atomic_store(&solo_stop, true);
	end = now_ns() + 10ull * 1000000000u;
	while (hog && !fiber_stats_counter("stalls") && now_ns() < end)
		usleep(1000);
	atomic_store(&release_hog, true);
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	stalls = fiber_stats_counter("stalls");
	for (int i = 0; i < 2; i++)
		assert_int_equal(fiber_pipe_destroy(solo_pipe[i]), 0);
	runtime_stop();
	*err = capture_end(&cap);
	clear_env();
	return stalls;
}

/* The runs that one worker's hand-offs begin carry no clock stamp
 * (sched/core.c): a ping-pong of them is no stall, however long it
 * lasts, and a fiber that computes in one is reported all the same,
 * timed from the monitor's first look at it.  (Taken as a run since time
 * 0, each look would find the ping-pong stalled, rescue it and ask the
 * worker for a backtrace, which only a switch in between keeps out of
 * the report.) */
static void test_monitor_times_one_worker_handoffs(void **state)
{
	char *err;

	(void)state;
	assert_int_equal(solo_run(false, &err), 0);
	if (strstr(err, "libfiber: stall:"))
		fail_msg("a ping-pong reported as a stall:\n%s", err);
	free(err);
	assert_int_equal(solo_run(true, &err), 1);
	if (!strstr(err, "\"pong\" has run for"))
		fail_msg("no stall report for pong:\n%s", err);
	free(err);
}

/* ---- deadlocks ---------------------------------------------------------- */

static fiber_sem_t sem_a, sem_b;

static void *wait_a_post_b(void *arg)
{
	(void)arg;
	fiber_sem_wait(&sem_a);
	fiber_sem_post(&sem_b);
	return NULL;
}

static void *wait_b_post_a(void *arg)
{
	(void)arg;
	fiber_sem_wait(&sem_b);
	fiber_sem_post(&sem_a);
	return NULL;
}

/* deadlock_child - two fibers wait on each other's semaphore and main
 * joins one of them: never returns.  Killed by SIGALRM after 30 s, so
 * that a report that never comes fails the test rather than hangs it. */
static void deadlock_child(const char *mode, int err_fd)
{
	struct rlimit no_core = { 0, 0 };
	fiber_t a;

	alarm(30);
	setrlimit(RLIMIT_CORE, &no_core);
	dup2(err_fd, 2);
	clear_env();
	setenv("LIBFIBER_DEADLOCK", mode, 1);
	fiber_sem_init(&sem_a, 0);
	fiber_sem_init(&sem_b, 0);
	runtime_start(2);
	a = spawn("waits-a", wait_a_post_b, NULL, -1);
	spawn("waits-b", wait_b_post_a, NULL, -1);
	fiber_join(a, NULL);
	_exit(3);
}

/* run_deadlock - fork deadlock_child in @mode and read its stderr until
 * @until appears or it exits; returns the text, *@status its wait status
 * (-1: killed by us, still hanging). */
static char *run_deadlock(const char *mode, const char *until, int *status)
{
	char *buf = calloc(1, 1 << 16);
	size_t n = 0;
	int p[2];
	pid_t pid;

	assert_non_null(buf);
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		close(p[0]);
		deadlock_child(mode, p[1]);
	}
	close(p[1]);
	for (;;) {
		ssize_t k = read(p[0], buf + n, (1 << 16) - 1 - n);

		if (k <= 0)
			break;
		n += (size_t)k;
		buf[n] = '\0';
		if (until && strstr(buf, until))
			break;
	}
	close(p[0]);
	*status = -1;
	if (until && strstr(buf, until)) {
		/* Give the dump after the line time to come, then stop it. */
		usleep(200 * 1000);
		kill(pid, SIGKILL);
		waitpid(pid, status, 0);
		*status = -1;
	} else {
		waitpid(pid, status, 0);
	}
	return buf;
}

/* Two fibers blocked on each other while main joins: the report, with
 * both fibers and what they wait on, and main's join. */
static void test_monitor_deadlock_is_reported(void **state)
{
	int status;
	char *out;

	(void)state;
	/* Main's line comes last; "thread " alone would also match a
	 * sanitizer's report, should one come first. */
	out = run_deadlock("warn", ": joins fiber ", &status);
	if (!strstr(out, "libfiber: all fibers are blocked") ||
	    !strstr(out, "\"waits-a\": parked") ||
	    !strstr(out, "\"waits-b\": parked") ||
	    !strstr(out, "waits on sem 0x") || !strstr(out, ": joins fiber "))
		fail_msg("no deadlock report:\n%s", out);
	free(out);
}

/* LIBFIBER_DEADLOCK=abort: the report, then SIGABRT. */
static void test_monitor_deadlock_abort_aborts(void **state)
{
	int status;
	char *out;

	(void)state;
	out = run_deadlock("abort", NULL, &status);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
	if (!strstr(out, "libfiber: all fibers are blocked"))
		fail_msg("no report before the abort:\n%s", out);
	free(out);
}

static int fd_pair[2];

static void *reads_fd(void *arg)
{
	char c;

	(void)arg;
	return (void *)(intptr_t)fiber_read(fd_pair[0], &c, 1);
}

static void *write_later(void *arg)
{
	(void)arg;
	usleep(1500 * 1000); /* past the report's 1 s window */
	if (write(fd_pair[1], "x", 1) != 1)
		abort();
	return NULL;
}

/* main joins a fiber that waits on an fd which another thread writes:
 * not a deadlock, whatever the time it takes. */
static void test_monitor_fd_waiter_is_no_deadlock(void **state)
{
	pthread_t t;
	void *rv;
	fiber_t f;

	(void)state;
	clear_env();
	setenv("LIBFIBER_DEADLOCK", "abort", 1);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
				    fd_pair),
			 0);
	runtime_start(2);
	f = spawn("reader", reads_fd, NULL, -1);
	assert_int_equal(pthread_create(&t, NULL, write_later, NULL), 0);
	assert_int_equal(fiber_join(f, &rv), 0);
	assert_int_equal((intptr_t)rv, 1);
	pthread_join(t, NULL);
	assert_int_equal(fiber_stats_counter("deadlocks"), 0);
	runtime_stop();
	close(fd_pair[0]);
	close(fd_pair[1]);
	clear_env();
}

static fiber_sem_t timed_sem, posted_sem;

static void *waits_posted(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)fiber_sem_wait(&posted_sem);
}

/* A thread that ends a timed libfiber wait and then posts. */
static void *posts_after_timed_wait(void *arg)
{
	int rc = fiber_sem_wait_until(&timed_sem, fiber_now() + 1500000000ull);

	(void)arg;
	fiber_sem_post(&posted_sem);
	return (void *)(intptr_t)rc;
}

/* main joins a fiber that waits on a semaphore, which a thread posts once
 * its own timed wait in libfiber (past the report's 1 s window) ends: the
 * thread's wait ends by itself, so this is no deadlock either. */
static void test_monitor_thread_in_a_timed_wait_is_no_deadlock(void **state)
{
	pthread_t t;
	void *rv;
	fiber_t f;

	(void)state;
	clear_env();
	setenv("LIBFIBER_DEADLOCK", "abort", 1);
	assert_int_equal(fiber_sem_init(&timed_sem, 0), 0);
	assert_int_equal(fiber_sem_init(&posted_sem, 0), 0);
	runtime_start(2);
	f = spawn("waits-posted", waits_posted, NULL, -1);
	assert_int_equal(pthread_create(&t, NULL, posts_after_timed_wait, NULL),
			 0);
	assert_int_equal(fiber_join(f, &rv), 0);
	assert_int_equal((intptr_t)rv, 0);
	assert_int_equal(pthread_join(t, &rv), 0);
	assert_int_equal((intptr_t)rv, ETIMEDOUT);
	assert_int_equal(fiber_stats_counter("deadlocks"), 0);
	runtime_stop();
	clear_env();
}

/*
 * The monitor's deadlock check sleeps for its second while every worker
 * sleeps and main waits in a join; a worker that wakes then must kick it,
 * so that when it stalls its timers are still rescued.  A fiber sleeps
 * (every worker idle, the monitor parks on the check's second), then
 * starts a hog on worker 0 and waits 10 ms with its timer on worker 0.
 * The hog computes until that wait ends, at most 700 ms: the wait must
 * end while the hog still computes, rescued by the monitor, not when the
 * hog gives up (the monitor's second would be over by then).
 */
static atomic_bool rescued_wait_ended, hog_gave_up;

static void *hog_until_rescued(void *arg)
{
	uint64_t end = fiber_now() + 700000000ull;

	(void)arg;
	while (!atomic_load(&rescued_wait_ended))
		if (fiber_now() > end) {
			atomic_store(&hog_gave_up, true);
			break;
		}
	return NULL;
}

static void *sleeps_then_waits_behind_a_hog(void *arg)
{
	fiber_workerset_t all;
	fiber_sem_t s;
	fiber_t h;
	int rc;

	(void)arg;
	fiber_sleep(100000000); /* every worker sleeps; main joins */
	fiber_workerset_zero(&all);
	fiber_workerset_add(&all, 0);
	fiber_workerset_add(&all, 1);
	assert_int_equal(fiber_setaffinity(sizeof(all), &all), 0);
	h = spawn("hog", hog_until_rescued, NULL, 0);
	assert_int_equal(fiber_sem_init(&s, 0), 0);
	rc = fiber_sem_wait_until(&s, fiber_now() + 10000000ull);
	atomic_store(&rescued_wait_ended, true);
	assert_int_equal(fiber_join(h, NULL), 0);
	return (void *)(intptr_t)rc;
}

static void test_monitor_rescue_is_not_late_while_a_thread_joins(void **state)
{
	void *rv;
	fiber_t f;

	(void)state;
	clear_env();
	setenv("LIBFIBER_STALL_MS", "100", 1);
	atomic_store(&rescued_wait_ended, false);
	atomic_store(&hog_gave_up, false);
	runtime_start(2);
	f = spawn("sleeper", sleeps_then_waits_behind_a_hog, NULL, 0);
	assert_int_equal(fiber_join(f, &rv), 0);
	assert_int_equal((intptr_t)rv, ETIMEDOUT);
	assert_false(atomic_load(&hog_gave_up));
	assert_true(fiber_stats_counter("stall_timers") >= 1);
	runtime_stop();
	clear_env();
}

/* ---- the dump ----------------------------------------------------------- */

static fiber_mutex_t dmutex, cmutex;
static fiber_cond_t dcond;
static fiber_chan_t *dchan;
static fiber_pipe_t *dpipe;
static fiber_t dsleeper;

__attribute__((noinline)) static void park_on_mutex(void)
{
	fiber_mutex_lock(&dmutex);
	fiber_mutex_unlock(&dmutex);
}

__attribute__((noinline)) static void park_on_cond(void)
{
	fiber_mutex_lock(&cmutex);
	fiber_cond_wait(&dcond, &cmutex);
	fiber_mutex_unlock(&cmutex);
}

__attribute__((noinline)) static void park_on_chan(void)
{
	int v;

	fiber_chan_recv(dchan, &v);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void park_on_pipe(void)
{
	char c;
	size_t done;

	fiber_pipe_read(dpipe, &c, 1, &done);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void park_on_fd(void)
{
	char c;

	if (fiber_read(fd_pair[0], &c, 1) != 1)
		abort();
}

__attribute__((noinline)) static void park_in_sleep(void)
{
	fiber_sleep(30ull * 1000000000u);
	__asm__ volatile("" ::: "memory"); /* no tail call: keep the frame */
}

__attribute__((noinline)) static void park_in_join(void)
{
	fiber_join(dsleeper, NULL);
	__asm__ volatile("" ::: "memory");
}

static void *run_it(void *arg)
{
	((void (*)(void))arg)();
	return NULL;
}

/* What the dump must say of each fiber, and the function it parked in. */
static const struct {
	const char *name, *what, *fn;
	void (*body)(void);
} dump_cases[] = {
	{ "on-mutex", "waits on mutex 0x", "park_on_mutex", park_on_mutex },
	{ "on-cond", "waits on cond 0x", "park_on_cond", park_on_cond },
	{ "on-chan", "waits on chan recv 0x", "park_on_chan", park_on_chan },
	{ "on-pipe", "waits on pipe read 0x", "park_on_pipe", park_on_pipe },
	{ "on-fd", "waits on fd ", "park_on_fd", park_on_fd },
	{ "in-sleep", "sleeps (", "park_in_sleep", park_in_sleep },
	{ "in-join", "joins fiber ", "park_in_join", park_in_join },
};
#define NR_DUMP (sizeof(dump_cases) / sizeof(dump_cases[0]))

/* dump_text - fiber_dump() into a string (malloc'ed). */
static char *dump_text(void)
{
	char path[] = "/tmp/test-monitor-dump-XXXXXX";
	int fd = mkstemp(path);
	char *buf = calloc(1, 1 << 20);
	ssize_t n;

	assert_true(fd >= 0);
	assert_non_null(buf);
	assert_int_equal(fiber_dump(fd), 0);
	n = pread(fd, buf, (1 << 20) - 1, 0);
	assert_true(n > 0);
	buf[n] = '\0';
	close(fd);
	unlink(path);
	return buf;
}

/* fiber_line - the line of fiber @name in @dump, with what follows it up
 * to the next fiber's line, NULL if absent. */
static char *fiber_block(const char *dump, const char *name)
{
	char key[64];
	const char *p, *end;

	snprintf(key, sizeof(key), "\"%s\": ", name);
	p = strstr(dump, key);
	if (!p)
		return NULL;
	while (p > dump && p[-1] != '\n')
		p--;
	end = strstr(p + 1, "\nfiber ");
	if (!end)
		end = p + strlen(p);
	return strndup(p, (size_t)(end - p));
}

static bool all_parked(const char *dump)
{
	for (size_t i = 0; i < NR_DUMP; i++) {
		char *b = fiber_block(dump, dump_cases[i].name);
		bool ok = b && strstr(b, ": parked on worker");

		free(b);
		if (!ok)
			return false;
	}
	return true;
}

/* Seven fibers parked seven ways: the dump lists each with its state,
 * what it waits on, and a backtrace through the function it parked in. */
static void test_monitor_dump_lists_every_fiber_and_its_wait(void **state)
{
	fiber_t f[NR_DUMP];
	char *dump = NULL, sleeper_id[64];
	size_t done;
	uint64_t end;
	int rc;

	(void)state;
	clear_env();
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
				    fd_pair),
			 0);
	fiber_mutex_init(&dmutex);
	fiber_mutex_init(&cmutex);
	fiber_cond_init(&dcond);
	runtime_start(2);
	assert_int_equal(fiber_chan_create(&dchan, sizeof(int), 1), 0);
	assert_int_equal(fiber_pipe_create(&dpipe, 16), 0);
	fiber_mutex_lock(&dmutex); /* main holds it */
	for (size_t i = 0; i < NR_DUMP; i++) {
		f[i] = spawn(dump_cases[i].name, run_it,
			     (void *)dump_cases[i].body, -1);
		if (!strcmp(dump_cases[i].name, "in-sleep"))
			dsleeper = f[i];
	}
	end = now_ns() + 10ull * 1000000000u;
	do {
		free(dump);
		usleep(1000);
		dump = dump_text();
	} while (!all_parked(dump) && now_ns() < end);
	snprintf(sleeper_id, sizeof(sleeper_id), "joins fiber %llu",
		 (unsigned long long)fiber_id(dsleeper));
	for (size_t i = 0; i < NR_DUMP; i++) {
		char *b = fiber_block(dump, dump_cases[i].name);

		if (!b || !strstr(b, ": parked on worker") ||
		    !strstr(b, dump_cases[i].what) ||
		    !strstr(b, dump_cases[i].fn) || !strstr(b, "    #0 0x"))
			fail_msg("%s: want \"%s\" and a frame in %s:\n%s",
				 dump_cases[i].name, dump_cases[i].what,
				 dump_cases[i].fn, dump);
		if (!strcmp(dump_cases[i].name, "in-join") &&
		    !strstr(b, sleeper_id))
			fail_msg("in-join: want \"%s\":\n%s", sleeper_id, dump);
		if (!strcmp(dump_cases[i].name, "on-fd") &&
		    !strstr(b, "for reading"))
			fail_msg("on-fd: no direction:\n%s", dump);
		free(b);
	}
	if (!strstr(dump, "libfiber: fiber dump: ") ||
	    !strstr(dump, "worker 0 (fiber-w0): "))
		fail_msg("no header:\n%s", dump);
	free(dump);
	/* Unblock all but the sleeper and its joiner, which are abandoned. */
	fiber_mutex_unlock(&dmutex);
	fiber_mutex_lock(&cmutex);
	fiber_cond_signal(&dcond);
	fiber_mutex_unlock(&cmutex);
	fiber_chan_send(dchan, &(int){ 1 });
	assert_int_equal(fiber_pipe_write(dpipe, "x", 1, &done), 0);
	assert_int_equal(write(fd_pair[1], "x", 1), 1);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	rc = fiber_shutdown();
	assert_int_equal(rc, EBUSY);
	fiber_chan_destroy(dchan);
	fiber_pipe_destroy(dpipe);
	close(fd_pair[0]);
	close(fd_pair[1]);
}

/*
 * fiber_dump() from a thread while fibers park and resume: the dump
 * walks the saved stack of a fiber it saw parked, which may be running
 * again by then, its frames live (the dump is a snapshot, by design).
 * That read must not trip the sanitizers of an instrumented build (ASan
 * saw another frame's redzones).  Counts only.
 */
static atomic_bool churn_stop;

static void *churner(void *arg)
{
	(void)arg;
	while (!atomic_load(&churn_stop))
		fiber_usleep(1);
	return NULL;
}

static void test_monitor_dump_while_fibers_churn(void **state)
{
	enum { FIBERS = 8, DUMPS = 1000 };
	fiber_t f[FIBERS];
	int fd, ok = 0;

	(void)state;
	clear_env();
	runtime_start(2);
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	atomic_store(&churn_stop, false);
	for (int i = 0; i < FIBERS; i++)
		f[i] = spawn("churn", churner, NULL, -1);
	for (int i = 0; i < DUMPS; i++)
		ok += fiber_dump(fd) == 0;
	atomic_store(&churn_stop, true);
	for (int i = 0; i < FIBERS; i++)
		assert_int_equal(fiber_join(f[i], NULL), 0);
	close(fd);
	runtime_stop();
	assert_int_equal(ok, DUMPS);
}

/* fiber_dump() misused: no runtime, a bad fd, a pipe nobody reads (EPIPE,
 * and no SIGPIPE kills the caller, whose action for it is the default). */
static void test_monitor_dump_misuse_returns_errnos(void **state)
{
	int p[2], ro;

	(void)state;
	clear_env();
	assert_int_equal(fiber_dump(1), ESRCH);
	runtime_start(2);
	signal(SIGPIPE, SIG_DFL);
	assert_int_equal(fiber_dump(-1), EBADF);
	ro = open("/dev/null", O_RDONLY);
	assert_true(ro >= 0);
	assert_int_equal(fiber_dump(ro), EBADF);
	close(ro);
	assert_int_equal(pipe(p), 0);
	close(p[0]);
	assert_int_equal(fiber_dump(p[1]), EPIPE);
	close(p[1]);
	runtime_stop();
	assert_int_equal(fiber_dump(1), ESRCH);
}

static int stats_fd;

static void *stats_print_fiber(void *arg)
{
	(void)arg;
	return (void *)(long)fiber_stats_print(stats_fd, 0);
}

/* fiber_stats_print() misused, as fiber_dump() above: a pipe nobody
 * reads gives EPIPE from a fiber and from this thread, whose action for
 * SIGPIPE is the default (a signal would end the test program), and the
 * thread's signal mask is as it was. */
static void test_monitor_stats_print_misuse_returns_errnos(void **state)
{
	sigset_t mask, pending;
	void *r = NULL;
	fiber_t f;
	int p[2];

	(void)state;
	clear_env();
	assert_int_equal(fiber_stats_print(1, 0), ESRCH);
	runtime_start(2);
	signal(SIGPIPE, SIG_DFL);
	assert_int_equal(fiber_stats_print(-1, 0), EBADF);
	assert_int_equal(pipe(p), 0);
	close(p[0]);
	stats_fd = p[1];
	assert_int_equal(fiber_create(&f, NULL, stats_print_fiber, NULL), 0);
	assert_int_equal(fiber_join(f, &r), 0);
	assert_int_equal((long)r, EPIPE);
	assert_int_equal(fiber_stats_print(p[1], 0), EPIPE);
	assert_int_equal(fiber_stats_print(p[1], 1), EPIPE);
	close(p[1]);
	assert_int_equal(pthread_sigmask(SIG_SETMASK, NULL, &mask), 0);
	assert_false(sigismember(&mask, SIGPIPE));
	assert_int_equal(sigpending(&pending), 0);
	assert_false(sigismember(&pending, SIGPIPE));
	runtime_stop();
	assert_int_equal(fiber_stats_print(1, 0), ESRCH);
}

/* LIBFIBER_DUMP_SIGNAL=USR1: the signal prints the dump on stderr. */
static void test_monitor_dump_signal_prints_the_dump(void **state)
{
	struct capture cap;
	uint64_t end;
	char *err = NULL;

	(void)state;
	clear_env();
	setenv("LIBFIBER_DUMP_SIGNAL", "USR1", 1);
	capture_begin(&cap);
	runtime_start(1);
	kill(getpid(), SIGUSR1);
	end = now_ns() + 10ull * 1000000000u;
	do {
		free(err);
		usleep(1000);
		err = capture_text(&cap);
	} while (!strstr(err, "worker 0 (fiber-w0)") && now_ns() < end);
	runtime_stop();
	free(err);
	err = capture_end(&cap);
	if (!strstr(err, "libfiber: fiber dump (LIBFIBER_DUMP_SIGNAL)"))
		fail_msg("no dump:\n%s", err);
	free(err);
	clear_env();
}

static void app_usr2(int sig)
{
	(void)sig;
}

/* The application's own action for the dump signal is back after
 * fiber_shutdown(), and in the child of a fork(), which has no monitor
 * to dump (exit status 0: the action was the application's). */
static void test_monitor_dump_signal_gives_the_action_back(void **state)
{
	struct sigaction sa, now;
	pid_t pid;
	int st;

	(void)state;
	clear_env();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = app_usr2;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR2, &sa, NULL), 0);
	setenv("LIBFIBER_DUMP_SIGNAL", "USR2", 1);
	runtime_start(2);
	assert_int_equal(sigaction(SIGUSR2, NULL, &now), 0);
	assert_true(now.sa_handler != app_usr2);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid)
		_exit(sigaction(SIGUSR2, NULL, &now) ||
		      now.sa_handler != app_usr2);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	runtime_stop();
	assert_int_equal(sigaction(SIGUSR2, NULL, &now), 0);
	assert_true(now.sa_handler == app_usr2);
	signal(SIGUSR2, SIG_DFL);
	clear_env();
}

/* ---- names, statistics, trace -------------------------------------------- */

/* The monitor thread carries a name that top -H and gdb show (test-fiber checks
 * the workers' names). */
static void test_monitor_thread_is_named(void **state)
{
	char path[sizeof(((struct dirent *)0)->d_name) + 32], comm[32];
	char seen[256] = "";
	FILE *f;

	(void)state;
	clear_env();
	runtime_start(2);
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	assert_non_null(d);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f))
			strncat(seen, comm, sizeof(seen) - strlen(seen) - 1);
		fclose(f);
	}
	closedir(d);
	runtime_stop();
	if (!strstr(seen, "fiber-monitor\n"))
		fail_msg("threads: %s", seen);
}

/* monitor_cpu_ns - the CPU time the fiber-monitor thread has used (its
 * schedstat), 0 if there is none. */
static uint64_t monitor_cpu_ns(void)
{
	char path[sizeof(((struct dirent *)0)->d_name) + 32], comm[32];
	unsigned long long ns = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	FILE *f;

	assert_non_null(d);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
		if (strcmp(comm, "fiber-monitor\n"))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat",
			 e->d_name);
		f = fopen(path, "r");
		assert_non_null(f);
		assert_int_equal(fscanf(f, "%llu", &ns), 1);
		fclose(f);
	}
	closedir(d);
	return ns;
}

static atomic_bool stop_ticker;

static void *ticker(void *arg)
{
	while (!atomic_load(&stop_ticker))
		fiber_sleep(1000 * 1000);
	return arg;
}

/* With only the deadlock check on (LIBFIBER_STALL_MS=0) and a worker that
 * keeps waking, the monitor sleeps between its looks: it used to loop
 * without sleeping whenever a worker was awake.  Its CPU time must stay a
 * small share of the time it was watched (a spinning monitor takes all of
 * a CPU, or half of one on a loaded host). */
static void test_monitor_sleeps_with_only_the_deadlock_check(void **state)
{
	uint64_t t0, c0, t1, c1;
	fiber_t f;

	(void)state;
	clear_env();
	setenv("LIBFIBER_STALL_MS", "0", 1);
	runtime_start(2);
	atomic_store(&stop_ticker, false);
	f = spawn("ticker", ticker, NULL, -1);
	t0 = now_ns();
	c0 = monitor_cpu_ns();
	while (now_ns() - t0 < 300 * 1000 * 1000ull)
		usleep(10 * 1000);
	c1 = monitor_cpu_ns();
	t1 = now_ns();
	atomic_store(&stop_ticker, true);
	assert_int_equal(fiber_join(f, NULL), 0);
	runtime_stop();
	clear_env();
	if (c1 - c0 > (t1 - t0) / 10)
		fail_msg("the monitor used %llu ns of CPU in %llu ns",
			 (unsigned long long)(c1 - c0),
			 (unsigned long long)(t1 - t0));
}

static void *ping(void *arg)
{
	for (int i = 0; i < 1000; i++)
		fiber_yield();
	return arg;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 22);
	size_t n;

	assert_non_null(f);
	assert_non_null(buf);
	n = fread(buf, 1, (1 << 22) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* LIBFIBER_STATS_INTERVAL_MS=10 into LIBFIBER_STATS_FILE: one line per
 * interval, as many as the monitor counted, never more than the elapsed
 * time allows. */
static void test_monitor_interval_lines_come_at_the_rate(void **state)
{
	char path[] = "/tmp/test-monitor-stats-XXXXXX", *text, *p;
	long long counted;
	uint64_t t0, elapsed_ms;
	long lines = 0;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	clear_env();
	setenv("LIBFIBER_STATS_INTERVAL_MS", "10", 1);
	setenv("LIBFIBER_STATS_FILE", path, 1);
	t0 = now_ns();
	runtime_start(2);
	while (fiber_stats_counter("stats_intervals") < 3 &&
	       now_ns() - t0 < 20ull * 1000000000u) {
		fiber_t f = spawn("ping", ping, NULL, -1);

		assert_int_equal(fiber_join(f, NULL), 0);
	}
	counted = fiber_stats_counter("stats_intervals");
	assert_true(counted >= 3);
	runtime_stop();
	elapsed_ms = (now_ns() - t0) / 1000000;
	text = read_file(path);
	for (p = text; (p = strstr(p, "libfiber ")); p++) {
		if (p != text && p[-1] != '\n')
			continue;
		if (!strstr(p, "ms: workers=2 idle="))
			fail_msg("not an interval line: %.80s", p);
		lines++;
	}
	if (lines < counted || lines > (long)(elapsed_ms / 10) + 1)
		fail_msg("%ld lines, %lld counted, %llu ms:\n%s", lines,
			 counted, (unsigned long long)elapsed_ms, text);
	free(text);
	unlink(path);
	clear_env();
}

/* fd_open_on - does this process hold a descriptor open on @path? */
static bool fd_open_on(const char *path)
{
	char link[300], target[4096];
	struct dirent *e;
	bool found = false;
	DIR *d = opendir("/proc/self/fd");

	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = '\0';
			found = !strcmp(target, path);
		}
	}
	closedir(d);
	return found;
}

/* A fork child does not keep the parent's LIBFIBER_STATS_FILE open: the
 * file is the parent's to write. */
static void test_monitor_stats_file_is_not_inherited(void **state)
{
	char path[] = "/tmp/test-monitor-stats-XXXXXX";
	int fd = mkstemp(path), st;
	pid_t pid;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	clear_env();
	setenv("LIBFIBER_STATS", "1", 1);
	setenv("LIBFIBER_STATS_FILE", path, 1);
	runtime_start(2);
	assert_true(fd_open_on(path));
	pid = fork();
	if (pid == 0)
		_exit(fd_open_on(path) ? 1 : 0);
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	runtime_stop();
	unlink(path);
	clear_env();
}

/* The interval lines give each counter's change since the line before;
 * after fiber_stats_reset() (counters back at 0) that is the count since
 * the reset, never a wrapped difference. */
static void test_monitor_interval_lines_survive_a_reset(void **state)
{
	char path[] = "/tmp/test-monitor-reset-XXXXXX", *text, *p;
	int fd = mkstemp(path), lines = 0;
	uint64_t t0;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	clear_env();
	setenv("LIBFIBER_STATS_INTERVAL_MS", "10", 1);
	setenv("LIBFIBER_STATS_FILE", path, 1);
	runtime_start(2);
	for (int round = 0; round < 2; round++) {
		t0 = now_ns();
		while (fiber_stats_counter("stats_intervals") < 2 &&
		       now_ns() - t0 < 20ull * 1000000000u)
			assert_int_equal(
				fiber_join(spawn("ping", ping, NULL, -1), NULL),
				0);
		if (!round)
			fiber_stats_reset();
	}
	runtime_stop();
	text = read_file(path);
	for (p = text; (p = strstr(p, "=+")); p += 2) {
		unsigned long long v = strtoull(p + 2, NULL, 10);

		if (v > 1000000000000ull)
			fail_msg("a wrapped change: %.40s\n%s", p - 10, text);
		lines++;
	}
	assert_true(lines > 0);
	free(text);
	unlink(path);
	clear_env();
}

/* LIBFIBER_STATS=1 without fiber_shutdown(): the table comes at exit, in
 * LIBFIBER_STATS_FILE, no line wider than 100 columns.  The program that
 * exits is this one again, exec'd fresh: a child that starts threads
 * after the fork of a process that had threads is what the sanitizers
 * cannot run (harness.h), and its leak check at exit once killed it. */
#define AT_EXIT_CHILD "--stats-at-exit-child"

static int stats_at_exit_child(const char *path)
{
	clear_env();
	setenv("LIBFIBER_STATS", "1", 1);
	setenv("LIBFIBER_STATS_FILE", path, 1);
	runtime_start(2);
	fiber_join(spawn("ping", ping, NULL, -1), NULL);
	exit(0);
}

static void test_monitor_stats_print_at_exit(void **state)
{
	char path[] = "/tmp/test-monitor-exit-XXXXXX", *text, *line;
	int fd = mkstemp(path), status;
	pid_t pid;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		execl("/proc/self/exe", "test-monitor", AT_EXIT_CHILD, path,
		      (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	text = read_file(path);
	if (!strstr(text, "libfiber statistics (2 workers") ||
	    !strstr(text, "worker 1") || !strstr(text, "switches "))
		fail_msg("no table at exit:\n%s", text);
	for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
		if (strlen(line) > 100)
			fail_msg("%zu columns: %s", strlen(line), line);
	free(text);
	unlink(path);
}

static void *sem_waiter(void *arg)
{
	fiber_sem_wait(arg);
	return NULL;
}

/* LIBFIBER_TRACE: run intervals per worker and wakeup arrows. */
static void test_monitor_trace_has_runs_and_wakeups(void **state)
{
	char path[] = "/tmp/test-monitor-trace-XXXXXX", *text;
	int fd = mkstemp(path);
	fiber_sem_t s;
	fiber_t f;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	clear_env();
	setenv("LIBFIBER_TRACE", path, 1);
	fiber_sem_init(&s, 0);
	runtime_start(2);
	f = spawn("traced", sem_waiter, &s, -1);
	while (fiber_stats_counter("parks") < 1)
		usleep(100);
	fiber_sem_post(&s);
	assert_int_equal(fiber_join(f, NULL), 0);
	runtime_stop();
	text = read_file(path);
	if (!strstr(text, "{\"traceEvents\":[") ||
	    !strstr(text, "\"ph\":\"X\",\"name\":\"fiber ") ||
	    !strstr(text, " traced\"") || !strstr(text, "\"ph\":\"s\"") ||
	    !strstr(text, "\"ph\":\"f\"") ||
	    !strstr(text, "\"dropped_events\":0}}"))
		fail_msg("trace:\n%s", text);
	free(text);
	unlink(path);
	clear_env();
}

/* LIBFIBER_TRACE naming a path that cannot be written: fiber_init()
 * refuses it, as LIBFIBER_STATS_FILE's, with the variable, the value and
 * what it expects, and nothing starts; a path that can be written is
 * opened at the start. */
static void test_monitor_trace_to_unwritable_path_is_refused(void **state)
{
	char dir[] = "/tmp/test-monitor-trace-dir-XXXXXX", path[96], want[160];
	struct fiber_config c = { 0 };
	struct capture cap;
	struct stat st;
	char *err;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/no/such/trace.json", dir);
	clear_env();
	setenv("LIBFIBER_TRACE", path, 1);
	c.workers = 2;
	capture_begin(&cap);
	assert_int_equal(fiber_init(&c), EINVAL);
	err = capture_end(&cap);
	snprintf(want, sizeof(want),
		 "libfiber: LIBFIBER_TRACE=\"%s\": cannot open it: ", path);
	if (!strstr(err, want) ||
	    !strstr(err, "; expected a path that can be written\n"))
		fail_msg("message:\n%s", err);
	free(err);
	assert_int_equal(fiber_nr_workers(), 0);
	assert_int_equal(fiber_shutdown(), ESRCH);

	snprintf(path, sizeof(path), "%s/trace.json", dir);
	setenv("LIBFIBER_TRACE", path, 1);
	assert_int_equal(fiber_init(&c), 0);
	assert_int_equal(stat(path, &st), 0);
	runtime_stop();
	err = read_file(path);
	if (!strstr(err, "{\"traceEvents\":[") ||
	    !strstr(err, "\"dropped_events\":0}}\n"))
		fail_msg("trace:\n%s", err);
	free(err);
	unlink(path);
	rmdir(dir);
	clear_env();
}

/* A FIFO that nobody reads, named by LIBFIBER_STATS_FILE or
 * LIBFIBER_TRACE: fiber_init() refuses it at once, saying so, rather
 * than block until a reader comes (a hang fails the test: SIGALRM). */
static void test_monitor_output_fifo_without_reader_is_refused(void **state)
{
	static const char *const vars[] = { "LIBFIBER_STATS_FILE",
					    "LIBFIBER_TRACE" };
	char dir[] = "/tmp/test-monitor-fifo-XXXXXX", path[96], want[160];
	struct fiber_config c = { 0 };
	struct capture cap;
	char *err;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	c.workers = 2;
	for (size_t i = 0; i < 2; i++) {
		clear_env();
		setenv(vars[i], path, 1);
		capture_begin(&cap);
		alarm(20);
		assert_int_equal(fiber_init(&c), EINVAL);
		alarm(0);
		err = capture_end(&cap);
		snprintf(want, sizeof(want),
			 "libfiber: %s=\"%s\": cannot open it: ", vars[i],
			 path);
		if (!strstr(err, want) ||
		    !strstr(err, "(a FIFO that nobody reads)"))
			fail_msg("message:\n%s", err);
		free(err);
		assert_int_equal(fiber_nr_workers(), 0);
	}
	unlink(path);
	rmdir(dir);
	clear_env();
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], AT_EXIT_CHILD))
		return stats_at_exit_child(argv[2]);

	const struct CMUnitTest tests[] = {
		TEST(test_monitor_hog_is_reported_and_its_sleeper_runs_elsewhere),
		TEST(test_monitor_yielding_fibers_are_no_stall),
		TEST(test_monitor_times_one_worker_handoffs),
		TEST(test_monitor_deadlock_is_reported),
		TEST(test_monitor_deadlock_abort_aborts),
		TEST(test_monitor_fd_waiter_is_no_deadlock),
		TEST(test_monitor_thread_in_a_timed_wait_is_no_deadlock),
		TEST(test_monitor_rescue_is_not_late_while_a_thread_joins),
		TEST(test_monitor_dump_lists_every_fiber_and_its_wait),
		TEST(test_monitor_dump_misuse_returns_errnos),
		TEST(test_monitor_stats_print_misuse_returns_errnos),
		TEST(test_monitor_dump_while_fibers_churn),
		TEST(test_monitor_dump_signal_prints_the_dump),
		TEST(test_monitor_dump_signal_gives_the_action_back),
		TEST(test_monitor_thread_is_named),
		TEST(test_monitor_sleeps_with_only_the_deadlock_check),
		TEST(test_monitor_interval_lines_come_at_the_rate),
		TEST(test_monitor_interval_lines_survive_a_reset),
		TEST(test_monitor_stats_file_is_not_inherited),
		TEST(test_monitor_stats_print_at_exit),
		TEST(test_monitor_trace_has_runs_and_wakeups),
		TEST(test_monitor_trace_to_unwritable_path_is_refused),
		TEST(test_monitor_output_fifo_without_reader_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
