/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-lifetime.c - "wake, then destroy and free" for every sync object.
 *
 * A waker may destroy and free an object as soon as destroy says 0, even
 * though the callers it woke have not run yet: a woken caller must never
 * touch the object again unless the object still counts it (and then
 * destroy says EBUSY).  The patterns:
 *   - last unlock, then destroy and free (mutex, rwlock);
 *   - close, destroy, free (pipe, chan) with callers blocked on both ends;
 *   - signal or post, then destroy and free, while the woken caller's
 *     deadline timer is still armed and fires before it runs (cond, sem,
 *     chan, pipe): the timer must not touch the object.
 * Each runs 10,000 times.  On one worker the order is exact: the woken
 * caller runs only when the driver yields, and the driver makes the
 * waiter's timer due and the next switch fire it (fire_at_next_switch).  The object is then
 * overwritten with a poison pattern (or freed and its chunk reallocated
 * and poisoned), so a late touch either spins on a poisoned spinlock (the
 * test times out) or breaks the pattern (counted); under ASan the free is
 * a use-after-free report.  On two workers the same patterns run as a
 * stress, with real frees.
 *
 * Fibers count what they saw; the test thread asserts on the counts.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "sched/sched.h"

/* ThreadSanitizer gives each fiber a heavy context: fewer rounds. */
#if defined(__SANITIZE_THREAD__)
#define ROUNDS 1000
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ROUNDS 1000
#endif
#endif
#ifndef ROUNDS
#define ROUNDS 10000
#endif
#define POISON 0xa5

static atomic_long errors;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond))                                                   \
			atomic_fetch_add(&errors, 1);                          \
	} while (0)

static fiber_t spawn(void *(*fn)(void *), void *arg)
{
	fiber_attr_t a;
	fiber_t f = NULL;

	fiber_attr_init(&a);
	fiber_attr_setstacksize(&a, TEST_STACK);
	CHECK(fiber_create(&f, &a, fn, arg) == 0);
	return f;
}

/* Run @driver(@arg) in a fiber on a runtime of @workers workers; assert
 * that nothing was counted as wrong. */
static void run_arg(unsigned int workers, void *(*driver)(void *), void *arg)
{
	fiber_t d;

	atomic_store(&errors, 0);
	runtime_start(workers);
	assert_int_equal(fiber_create(&d, NULL, driver, arg), 0);
	assert_int_equal(fiber_join(d, NULL), 0);
	runtime_stop();
	assert_int_equal(atomic_load(&errors), 0);
}

static void run(unsigned int workers, void *(*driver)(void *))
{
	run_arg(workers, driver, NULL);
}

/* The object's memory after destroy: nobody may write it any more. */
static void poison(void *p, size_t n)
{
	memset(p, POISON, n);
}

static bool poisoned(const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		if (c[i] != POISON)
			return false;
	return true;
}

/*
 * Make the one timer armed on this worker due now, and the next
 * scheduling point of the worker fire it: so the timer of a waiter that
 * was just woken fires before the waiter runs, without waiting for time
 * to pass.
 */
static void fire_at_next_switch(void)
{
	struct fb_worker *w = fb_worker_self();
	struct fb_timer_heap *h = &w->timers;

	fb_spin_lock(&h->lock);
	CHECK(h->root && !h->root->child);
	if (h->root) {
		h->root->deadline = 1;
		fb_store_relaxed(&h->next, 1);
	}
	fb_spin_unlock(&h->lock);
	w->ticks = FB_TICK_SWITCHES - 1;
}

static struct timespec ts_of(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u),
			       (long)(ns % 1000000000u) };

	return ts;
}

/* ---- mutex: unlock, then destroy while the woken locker comes back ---- */

static void *locker(void *arg)
{
	fiber_mutex_t *m = arg;

	CHECK(fiber_mutex_lock(m) == 0);
	CHECK(fiber_mutex_unlock(m) == 0);
	return NULL;
}

static void *mutex_driver(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		fiber_mutex_t *m = malloc(sizeof(*m));
		fiber_t b;
		int busy = 0;

		fiber_mutex_init(m);
		CHECK(fiber_mutex_lock(m) == 0);
		b = spawn(locker, m);
		fiber_yield();			   /* b runs and queues on m */
		CHECK(fiber_mutex_unlock(m) == 0); /* wakes b */
		while (fiber_mutex_destroy(m) == EBUSY) {
			busy++;
			fiber_yield();
		}
		CHECK(busy > 0); /* b had not come back yet */
		poison(m, sizeof(*m));
		fiber_yield();
		CHECK(fiber_join(b, NULL) == 0);
		CHECK(poisoned(m, sizeof(*m)));
		free(m);
	}
	return NULL;
}

static void
test_lifetime_mutex_destroy_is_busy_until_woken_locker_is_back(void **state)
{
	(void)state;
	run(1, mutex_driver);
}

/* The refcount pattern: whoever drops the last reference frees. */
struct refobj {
	fiber_mutex_t m;
	int refs; /* m */
	char payload[40];
};

static void *unref(void *arg)
{
	struct refobj *o = arg;
	bool last;

	CHECK(fiber_mutex_lock(&o->m) == 0);
	o->payload[0]++;
	last = --o->refs == 0;
	CHECK(fiber_mutex_unlock(&o->m) == 0);
	if (last) {
		CHECK(fiber_mutex_destroy(&o->m) == 0);
		free(o);
	}
	return NULL;
}

static void *refcount_driver(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		struct refobj *o = calloc(1, sizeof(*o));
		fiber_t f[3];

		o->refs = 3;
		for (int k = 0; k < 3; k++)
			f[k] = spawn(unref, o);
		for (int k = 0; k < 3; k++)
			CHECK(fiber_join(f[k], NULL) == 0);
	}
	return NULL;
}

static void test_lifetime_mutex_last_unlock_then_free(void **state)
{
	(void)state;
	run(2, refcount_driver);
}

/* ---- rwlock: the unlock hands over, so the new holder keeps it busy ---- */

static void *rw_writer(void *arg)
{
	fiber_rwlock_t *rw = arg;

	CHECK(fiber_rwlock_wrlock(rw) == 0);
	CHECK(fiber_rwlock_unlock(rw) == 0);
	return NULL;
}

static void *rwlock_driver(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		fiber_rwlock_t *rw = malloc(sizeof(*rw));
		fiber_t b;

		fiber_rwlock_init(rw);
		CHECK(fiber_rwlock_rdlock(rw) == 0);
		b = spawn(rw_writer, rw);
		fiber_yield(); /* b queues as a writer */
		CHECK(fiber_rwlock_unlock(rw) == 0);
		while (fiber_rwlock_destroy(rw) == EBUSY)
			fiber_yield();
		poison(rw, sizeof(*rw));
		fiber_yield();
		CHECK(fiber_join(b, NULL) == 0);
		CHECK(poisoned(rw, sizeof(*rw)));
		free(rw);
	}
	return NULL;
}

static void test_lifetime_rwlock_unlock_then_destroy(void **state)
{
	(void)state;
	run(1, rwlock_driver);
}

/* ---- pipe: close, destroy, free with a writer blocked or woken ---- */

struct pipe_io {
	fiber_pipe_t *p;
	size_t done;
	int rc;
};

static void *pipe_writer(void *arg)
{
	struct pipe_io *io = arg;
	char buf[64] = { 1 };

	io->rc = fiber_pipe_write(io->p, buf, sizeof(buf), &io->done);
	return NULL;
}

/*
 * After a library object (pipe, chan) is freed by its destroy: allocate
 * chunks of the sizes it may have had, so that malloc hands its chunk back
 * (glibc reuses the last freed chunk of a size first), and poison them.
 */
#define REUSE_SIZES 12
struct reuse {
	unsigned char *p[REUSE_SIZES];
};

static struct reuse *reuse_chunks(void)
{
	struct reuse *r = malloc(sizeof(*r));

	for (int i = 0; i < REUSE_SIZES; i++) {
		r->p[i] = malloc(48 + 16 * (size_t)i);
		poison(r->p[i], 48 + 16 * (size_t)i);
	}
	return r;
}

/* Nobody wrote the reused chunks; free them. */
static bool reuse_done(struct reuse *r)
{
	bool ok = true;

	for (int i = 0; i < REUSE_SIZES; i++) {
		ok = ok && poisoned(r->p[i], 48 + 16 * (size_t)i);
		free(r->p[i]);
	}
	free(r);
	return ok;
}

static void *pipe_close_driver(void *arg)
{
	bool read_first = arg != NULL;

	for (int i = 0; i < ROUNDS; i++) {
		struct pipe_io io = { 0 };
		char buf[16];
		size_t n;
		struct reuse *q;
		fiber_t w;

		CHECK(fiber_pipe_create(&io.p, 16) == 0);
		w = spawn(pipe_writer, &io);
		fiber_yield();	/* w fills the ring and blocks */
		if (read_first) /* wake w for room: it comes back */
			CHECK(fiber_pipe_read(io.p, buf, sizeof(buf), &n) == 0);
		CHECK(fiber_pipe_close_read(io.p) == 0);
		if (read_first) {
			CHECK(fiber_pipe_destroy(io.p) == EBUSY);
			while (fiber_pipe_destroy(io.p) == EBUSY)
				fiber_yield();
		} else {
			CHECK(fiber_pipe_destroy(io.p) == 0);
		}
		q = reuse_chunks();
		fiber_yield();
		CHECK(fiber_join(w, NULL) == 0);
		CHECK(io.rc == EPIPE);
		CHECK(io.done == 16); /* the first ring-full got in */
		CHECK(reuse_done(q));
	}
	return NULL;
}

static void test_lifetime_pipe_close_destroy_with_blocked_writer(void **state)
{
	(void)state;
	run(1, pipe_close_driver);
}

static void
test_lifetime_pipe_destroy_busy_while_woken_writer_returns(void **state)
{
	(void)state;
	run_arg(1, pipe_close_driver, (void *)1);
}

/* ---- chan: close, destroy, free with senders and receivers blocked ---- */

struct chan_io {
	fiber_chan_t *ch;
	int rc;
};

static void *chan_sender(void *arg)
{
	struct chan_io *io = arg;
	long v = 7;

	io->rc = fiber_chan_send(io->ch, &v);
	return NULL;
}

static void *chan_receiver(void *arg)
{
	struct chan_io *io = arg;
	long v;

	io->rc = fiber_chan_recv(io->ch, &v);
	return NULL;
}

static void *chan_close_driver(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		struct chan_io io[2] = { { 0 } };
		struct reuse *q;
		fiber_t f[2];

		CHECK(fiber_chan_create(&io[0].ch, sizeof(long), 0) == 0);
		io[1].ch = io[0].ch;
		/* capacity 0 and no receiver: both senders block */
		f[0] = spawn(chan_sender, &io[0]);
		f[1] = spawn(chan_sender, &io[1]);
		fiber_yield();
		CHECK(fiber_chan_close(io[0].ch) == 0);
		CHECK(fiber_chan_destroy(io[0].ch) == 0);
		q = reuse_chunks();
		for (int k = 0; k < 2; k++) {
			CHECK(fiber_join(f[k], NULL) == 0);
			CHECK(io[k].rc == EPIPE);
		}
		CHECK(reuse_done(q));
		CHECK(fiber_chan_create(&io[0].ch, sizeof(long), 1) == 0);
		io[1].ch = io[0].ch;
		f[0] = spawn(chan_receiver, &io[0]);
		f[1] = spawn(chan_receiver, &io[1]);
		fiber_yield();
		CHECK(fiber_chan_close(io[0].ch) == 0);
		CHECK(fiber_chan_destroy(io[0].ch) == 0);
		q = reuse_chunks();
		for (int k = 0; k < 2; k++) {
			CHECK(fiber_join(f[k], NULL) == 0);
			CHECK(io[k].rc == EPIPE);
		}
		CHECK(reuse_done(q));
	}
	return NULL;
}

static void test_lifetime_chan_close_destroy_with_blocked_callers(void **state)
{
	(void)state;
	run(1, chan_close_driver);
}

/*
 * select: the case that won is on a channel the waker may free.
 *
 * A select parked on channel A alone (or on A and B) is woken by a close
 * or a send on A, which takes its waiter off A: destroy(A) says 0 at once
 * and A is freed.  The woken select must unlink its other waiters (on B)
 * without touching A.  B still holds one of them until the select is
 * back, so destroy(B) says EBUSY until then.
 */
struct sel_io {
	fiber_chan_t *a, *b; /* b: NULL for a one-case select */
	long v;
	size_t chosen;
	int rc;
};

static void *selector(void *arg)
{
	struct sel_io *io = arg;
	struct fiber_select_case c[2] = {
		{ .chan = io->a, .op = FIBER_SELECT_RECV, .elem = &io->v },
		{ .chan = io->b, .op = FIBER_SELECT_RECV, .elem = &io->v },
	};

	io->rc = fiber_chan_select(c, io->b ? 2 : 1, FIBER_NO_DEADLINE,
				   &io->chosen);
	return NULL;
}

static void *select_driver(void *arg)
{
	bool two = arg != NULL;

	for (int i = 0; i < ROUNDS; i++) {
		struct sel_io io = { .chosen = 9 };
		bool send = i & 1;
		long v = 42;
		struct reuse *q;
		fiber_t f;
		int busy = 0;

		CHECK(fiber_chan_create(&io.a, sizeof(long), 0) == 0);
		if (two)
			CHECK(fiber_chan_create(&io.b, sizeof(long), 0) == 0);
		f = spawn(selector, &io);
		fiber_yield(); /* f queues on a (and b) and parks */
		if (send)
			CHECK(fiber_chan_send(io.a, &v) == 0);
		else
			CHECK(fiber_chan_close(io.a) == 0);
		CHECK(fiber_chan_destroy(io.a) == 0);
		q = reuse_chunks();
		if (two) {
			while (fiber_chan_destroy(io.b) == EBUSY) {
				busy++;
				fiber_yield();
			}
			CHECK(busy > 0); /* f had not unlinked itself yet */
		}
		CHECK(fiber_join(f, NULL) == 0);
		CHECK(io.rc == (send ? 0 : EPIPE));
		CHECK(io.chosen == 0);
		CHECK(!send || io.v == 42);
		CHECK(reuse_done(q));
	}
	return NULL;
}

static void test_lifetime_select_winner_channel_freed_at_once(void **state)
{
	(void)state;
	run(1, select_driver);
}

static void test_lifetime_select_other_channels_busy_until_back(void **state)
{
	(void)state;
	run_arg(1, select_driver, (void *)1);
}

/* ---- timed waits: woken, then the deadline timer fires before it runs ---- */

enum { T_COND, T_SEM, T_CHAN, T_PIPE };

struct timed {
	int kind;
	uint64_t deadline;
	fiber_mutex_t m;
	fiber_cond_t *cond;
	fiber_sem_t *sem;
	fiber_chan_t *ch;
	fiber_pipe_t *p;
	int rc;
	bool parked; /* m */
};

static void *timed_waiter(void *arg)
{
	struct timed *t = arg;
	struct timespec ts = ts_of(t->deadline);
	char c;
	size_t n;
	long v;

	switch (t->kind) {
	case T_COND:
		fiber_mutex_lock(&t->m);
		t->parked = true;
		t->rc = fiber_cond_timedwait(t->cond, &t->m, &ts);
		fiber_mutex_unlock(&t->m);
		break;
	case T_SEM:
		t->rc = fiber_sem_timedwait(t->sem, &ts);
		break;
	case T_CHAN:
		t->rc = fiber_chan_timedrecv(t->ch, &v, &ts);
		break;
	case T_PIPE:
		t->rc = fiber_pipe_timedread(t->p, &c, 1, &n, &ts);
		break;
	}
	return NULL;
}

/* Wake the waiter of @t and destroy the object, then poison its memory
 * (a user object in place; a freed library object through reused chunks,
 * returned). */
static struct reuse *wake_and_destroy(struct timed *t)
{
	long v = 1;
	size_t n;

	switch (t->kind) {
	case T_COND:
		fiber_mutex_lock(&t->m);
		CHECK(t->parked);
		CHECK(fiber_cond_signal(t->cond) == 0);
		fiber_mutex_unlock(&t->m);
		CHECK(fiber_cond_destroy(t->cond) == 0);
		poison(t->cond, sizeof(*t->cond));
		return NULL;
	case T_SEM:
		CHECK(fiber_sem_post(t->sem) == 0);
		CHECK(fiber_sem_destroy(t->sem) == 0);
		poison(t->sem, sizeof(*t->sem));
		return NULL;
	case T_CHAN:
		CHECK(fiber_chan_send(t->ch, &v) == 0);
		CHECK(fiber_chan_destroy(t->ch) == 0);
		return reuse_chunks();
	default:
		CHECK(fiber_pipe_write(t->p, "x", 1, &n) == 0);
		CHECK(fiber_pipe_destroy(t->p) == 0);
		return reuse_chunks();
	}
}

static void *timed_driver(void *arg)
{
	int kind = (int)(intptr_t)arg;

	for (int i = 0; i < ROUNDS / 4; i++) {
		struct timed t = { .kind = kind };
		struct reuse *q;
		fiber_t w;

		t.cond = malloc(sizeof(*t.cond));
		t.sem = malloc(sizeof(*t.sem));
		fiber_cond_init(t.cond);
		fiber_sem_init(t.sem, 0);
		CHECK(fiber_chan_create(&t.ch, sizeof(long), 0) == 0);
		CHECK(fiber_pipe_create(&t.p, 16) == 0);
		t.deadline = fb_now_ns() + 60 * 1000000000ull;
		w = spawn(timed_waiter, &t);
		fiber_yield(); /* it parks with its timer armed */
		q = wake_and_destroy(&t);
		fire_at_next_switch();
		fiber_yield(); /* the timer fires, then the waiter runs */
		CHECK(fiber_join(w, NULL) == 0);
		CHECK(t.rc == 0);
		if (kind == T_COND)
			CHECK(poisoned(t.cond, sizeof(*t.cond)));
		if (kind == T_SEM)
			CHECK(poisoned(t.sem, sizeof(*t.sem)));
		if (q)
			CHECK(reuse_done(q));
		if (kind != T_CHAN)
			fiber_chan_destroy(t.ch);
		if (kind != T_PIPE)
			fiber_pipe_destroy(t.p);
		free(t.cond);
		free(t.sem);
	}
	return NULL;
}

static void test_lifetime_timed_waits_survive_a_late_timer(void **state)
{
	(void)state;
	for (int kind = T_COND; kind <= T_PIPE; kind++) {
		fiber_t d;

		atomic_store(&errors, 0);
		runtime_start(1);
		assert_int_equal(fiber_create(&d, NULL, timed_driver,
					      (void *)(intptr_t)kind),
				 0);
		assert_int_equal(fiber_join(d, NULL), 0);
		runtime_stop();
		assert_int_equal(atomic_load(&errors), 0);
	}
}

/* A timed wait that does time out leaves the object usable and the
 * count consistent: the unit posted after the timeout is not lost. */
static void *timeout_driver(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100; i++) {
		fiber_sem_t s;
		struct timespec ts = ts_of(fb_now_ns() + 10 * 1000);
		int v;

		fiber_sem_init(&s, 0);
		CHECK(fiber_sem_timedwait(&s, &ts) == ETIMEDOUT);
		CHECK(fiber_sem_post(&s) == 0);
		CHECK(fiber_sem_getvalue(&s, &v) == 0 && v == 1);
		CHECK(fiber_sem_destroy(&s) == 0);
	}
	return NULL;
}

static void test_lifetime_timed_out_waiter_leaves_the_object_clean(void **state)
{
	(void)state;
	run(2, timeout_driver);
}

/* ---- stress on two workers, with real frees ---- */

static void *cond_signaller(void *arg)
{
	struct timed *t = arg;

	fiber_mutex_lock(&t->m);
	fiber_cond_signal(t->cond);
	fiber_mutex_unlock(&t->m);
	return NULL;
}

static void *stress_driver(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		struct timed t = { .kind = T_SEM };
		fiber_t w, s;

		t.sem = malloc(sizeof(*t.sem));
		fiber_sem_init(t.sem, 0);
		/* A deadline that races with the post. */
		t.deadline = fb_now_ns() + (uint64_t)(i % 7) * 1000;
		w = spawn(timed_waiter, &t);
		fiber_sem_post(t.sem);
		CHECK(fiber_join(w, NULL) == 0);
		CHECK(t.rc == 0 || t.rc == ETIMEDOUT);
		while (fiber_sem_destroy(t.sem) == EBUSY)
			fiber_yield();
		free(t.sem);

		t.cond = malloc(sizeof(*t.cond));
		fiber_cond_init(t.cond);
		fiber_mutex_init(&t.m);
		t.kind = T_COND;
		t.parked = false;
		w = spawn(timed_waiter, &t);
		s = spawn(cond_signaller, &t);
		CHECK(fiber_join(s, NULL) == 0);
		CHECK(fiber_join(w, NULL) == 0);
		while (fiber_cond_destroy(t.cond) == EBUSY)
			fiber_yield();
		free(t.cond);
	}
	return NULL;
}

static void test_lifetime_stress_two_workers(void **state)
{
	(void)state;
	run(2, stress_driver);
}

/* ---- wait group: the released waiter frees it while done() returns ---- */

static void *doner(void *arg)
{
	CHECK(fiber_wg_done(arg) == 0);
	return NULL;
}

static fiber_t spawn_on(unsigned int worker, void *(*fn)(void *), void *arg)
{
	fiber_workerset_t set;
	fiber_attr_t a;
	fiber_t f = NULL;

	fiber_attr_init(&a);
	fiber_attr_setstacksize(&a, TEST_STACK);
	fiber_workerset_zero(&set);
	fiber_workerset_add(&set, worker);
	fiber_attr_setaffinity(&a, sizeof(set), &set);
	CHECK(fiber_create(&f, &a, fn, arg) == 0);
	fiber_attr_destroy(&a);
	return f;
}

/* The driver (worker 0) waits; a fiber on worker 1 calls done(); the
 * moment the wait returns the driver destroys and poisons the group, so a
 * done() that still touched it after the wake (an unlock after the wake,
 * say) leaves an unpoisoned byte, or a use after free under ASan. */
static void *wg_driver(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		fiber_wg_t *wg = malloc(sizeof(*wg));
		fiber_t d;

		CHECK(fiber_wg_init(wg) == 0);
		CHECK(fiber_wg_add(wg, 1) == 0);
		d = spawn_on(1, doner, wg);
		CHECK(fiber_wg_wait(wg) == 0);
		CHECK(fiber_wg_destroy(wg) == 0);
		poison(wg, sizeof(*wg));
		CHECK(fiber_join(d, NULL) == 0);
		CHECK(poisoned(wg, sizeof(*wg)));
		free(wg);
	}
	return NULL;
}

static void test_lifetime_wg_waiter_frees_while_done_returns(void **state)
{
	fiber_workerset_t set;
	fiber_attr_t a;
	fiber_t d;

	(void)state;
	atomic_store(&errors, 0);
	runtime_start(2);
	fiber_attr_init(&a);
	fiber_workerset_zero(&set);
	fiber_workerset_add(&set, 0);
	fiber_attr_setaffinity(&a, sizeof(set), &set);
	assert_int_equal(fiber_create(&d, &a, wg_driver, NULL), 0);
	fiber_attr_destroy(&a);
	assert_int_equal(fiber_join(d, NULL), 0);
	runtime_stop();
	assert_int_equal(atomic_load(&errors), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_lifetime_mutex_destroy_is_busy_until_woken_locker_is_back),
		TEST(test_lifetime_mutex_last_unlock_then_free),
		TEST(test_lifetime_rwlock_unlock_then_destroy),
		TEST(test_lifetime_pipe_close_destroy_with_blocked_writer),
		TEST(test_lifetime_pipe_destroy_busy_while_woken_writer_returns),
		TEST(test_lifetime_chan_close_destroy_with_blocked_callers),
		TEST(test_lifetime_select_winner_channel_freed_at_once),
		TEST(test_lifetime_select_other_channels_busy_until_back),
		TEST(test_lifetime_timed_waits_survive_a_late_timer),
		TEST(test_lifetime_timed_out_waiter_leaves_the_object_clean),
		TEST(test_lifetime_stress_two_workers),
		TEST(test_lifetime_wg_waiter_frees_while_done_returns),
	};

	if (getenv("TEST_FILTER")) /* run some: TEST_FILTER='*pipe*' */
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
