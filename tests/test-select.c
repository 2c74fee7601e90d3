/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-select.c - fiber_chan_select() through the public API: argument
 * checks; a poll (deadline 0) that moves nothing; the ready case is the
 * one taken; ready cases are chosen uniformly; closed channels complete
 * with EPIPE; a blocked select is served by exactly one channel and leaves
 * no waiter behind on the others; a timeout or a cancellation moves
 * nothing, also when it races with a sender; every element sent to a set
 * of channels read by many selectors arrives exactly once; foreign
 * threads; many cases (the allocated path); a channel in two cases.
 *
 * Fibers never call cmocka assertions (a failure would longjmp off their
 * stack); they count errors and the test thread asserts the counts.
 */
#include <fiber.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define UNDER_VALGRIND (RUNNING_ON_VALGRIND != 0)
#else
#define UNDER_VALGRIND 0
#endif

#define MS 1000000ull

static atomic_int errors;

static fiber_t spawn(void *(*fn)(void *), void *arg)
{
	fiber_attr_t attr;
	fiber_t f;

	assert_int_equal(fiber_attr_init(&attr), 0);
	assert_int_equal(fiber_attr_setstacksize(&attr, TEST_STACK), 0);
	assert_int_equal(fiber_create(&f, &attr, fn, arg), 0);
	fiber_attr_destroy(&attr);
	return f;
}

static long join(fiber_t f)
{
	void *r;

	assert_int_equal(fiber_join(f, &r), 0);
	return (long)(intptr_t)r;
}

static fiber_chan_t *mkchan(size_t cap)
{
	fiber_chan_t *c;

	assert_int_equal(fiber_chan_create(&c, sizeof(int), cap), 0);
	return c;
}

/* ---- arguments and the non-blocking paths ---- */

static void test_select_rejects_bad_arguments(void **state)
{
	fiber_chan_t *c = mkchan(1);
	int v = 7;
	size_t ch = 99;
	struct fiber_select_case k[2] = {
		{ c, FIBER_SELECT_RECV, &v },
		{ c, FIBER_SELECT_SEND, &v },
	};

	(void)state;
	assert_int_equal(fiber_chan_select(NULL, 1, 0, &ch), EINVAL);
	assert_int_equal(fiber_chan_select(k, 0, 0, &ch), EINVAL);
	assert_int_equal(fiber_chan_select(k, 1, 0, NULL), EINVAL);
	assert_int_equal(fiber_chan_select(k, (size_t)FIBER_SELECT_MAX + 1, 0,
					   &ch),
			 EINVAL);
	k[1].chan = NULL;
	assert_int_equal(fiber_chan_select(k, 2, 0, &ch), EINVAL);
	k[1].chan = c;
	k[1].elem = NULL;
	assert_int_equal(fiber_chan_select(k, 2, 0, &ch), EINVAL);
	k[1].elem = &v;
	k[1].op = 0;
	assert_int_equal(fiber_chan_select(k, 2, 0, &ch), EINVAL);
	k[1].op = FIBER_SELECT_RECV | FIBER_SELECT_SEND;
	assert_int_equal(fiber_chan_select(k, 2, 0, &ch), EINVAL);
	/* Nothing was done by any of them. */
	assert_int_equal(ch, 99);
	assert_int_equal(fiber_chan_tryrecv(c, &v), EAGAIN);
	assert_int_equal(fiber_chan_destroy(c), 0);
}

static void test_select_poll_moves_nothing(void **state)
{
	fiber_chan_t *a = mkchan(0), *b = mkchan(1);
	int x = 1, y = 2, r;
	size_t ch = 99;
	struct fiber_select_case k[3] = {
		{ a, FIBER_SELECT_SEND, &x }, /* no receiver */
		{ a, FIBER_SELECT_RECV, &r }, /* no sender */
		{ b, FIBER_SELECT_RECV, &r }, /* empty */
	};

	(void)state;
	assert_int_equal(fiber_chan_select(k, 3, 0, &ch), ETIMEDOUT);
	assert_int_equal(fiber_chan_select(k, 3, fiber_now() - 1, &ch),
			 ETIMEDOUT);
	assert_int_equal(ch, 99);
	/* No waiter was left on either channel. */
	assert_int_equal(fiber_chan_trysend(a, &y), EAGAIN);
	/* A ready case is taken whatever the deadline. */
	assert_int_equal(fiber_chan_trysend(b, &y), 0);
	r = 0;
	assert_int_equal(fiber_chan_select(k, 3, 0, &ch), 0);
	assert_int_equal(ch, 2);
	assert_int_equal(r, 2);
	assert_int_equal(fiber_chan_destroy(a), 0);
	assert_int_equal(fiber_chan_destroy(b), 0);
}

static void test_select_takes_the_ready_case(void **state)
{
	fiber_chan_t *c[4];
	int v[4] = { 0 }, out = 41;
	size_t ch;
	struct fiber_select_case k[5];

	(void)state;
	for (int i = 0; i < 4; i++) {
		c[i] = mkchan(2);
		k[i] = (struct fiber_select_case){ c[i], FIBER_SELECT_RECV,
						   &v[i] };
	}
	/* A send case on a full ring is not ready. */
	assert_int_equal(fiber_chan_trysend(c[0], &out), 0);
	assert_int_equal(fiber_chan_trysend(c[0], &out), 0);
	k[0].op = FIBER_SELECT_SEND;
	k[0].elem = &out;
	k[4] = (struct fiber_select_case){ c[3], FIBER_SELECT_RECV, &v[3] };
	out = 42;
	assert_int_equal(fiber_chan_trysend(c[2], &out), 0);
	for (int round = 0; round < 50; round++) {
		ch = 99;
		v[2] = 0;
		assert_int_equal(fiber_chan_select(k, 5, 0, &ch), 0);
		assert_int_equal(ch, 2);
		assert_int_equal(v[2], 42);
		assert_int_equal(fiber_chan_trysend(c[2], &out), 0);
	}
	assert_int_equal(fiber_chan_tryrecv(c[2], &v[2]), 0);
	/* Room on c[0]: the send case is ready and sends 43. */
	assert_int_equal(fiber_chan_tryrecv(c[0], &v[0]), 0);
	out = 43;
	assert_int_equal(fiber_chan_select(k, 5, 0, &ch), 0);
	assert_int_equal(ch, 0);
	assert_int_equal(fiber_chan_tryrecv(c[0], &v[0]), 0);
	assert_int_equal(fiber_chan_tryrecv(c[0], &v[0]), 0);
	assert_int_equal(v[0], 43);
	for (int i = 0; i < 4; i++)
		assert_int_equal(fiber_chan_destroy(c[i]), 0);
}

/* Four cases always ready: each must be chosen about a quarter of the
 * time (expected 2500 of 10000, sd 43; the bound is 11 sd away). */
static void test_select_chooses_ready_cases_uniformly(void **state)
{
	enum { N = 4, ROUNDS = 10000 };
	fiber_chan_t *c[N];
	int v, seen[N] = { 0 };
	size_t ch;
	struct fiber_select_case k[N];

	(void)state;
	for (int i = 0; i < N; i++) {
		c[i] = mkchan(1);
		k[i] = (struct fiber_select_case){ c[i], FIBER_SELECT_RECV,
						   &v };
		assert_int_equal(fiber_chan_trysend(c[i], &i), 0);
	}
	for (int r = 0; r < ROUNDS; r++) {
		assert_int_equal(fiber_chan_select(k, N, 0, &ch), 0);
		assert_true(ch < N);
		assert_int_equal(v, (int)ch);
		seen[ch]++;
		assert_int_equal(fiber_chan_trysend(c[ch], &v), 0);
	}
	for (int i = 0; i < N; i++) {
		assert_in_range(seen[i], 2000, 3000);
		assert_int_equal(fiber_chan_tryrecv(c[i], &v), 0);
		assert_int_equal(fiber_chan_destroy(c[i]), 0);
	}
}

static void test_select_closed_channels_complete_with_epipe(void **state)
{
	fiber_chan_t *a = mkchan(2), *b = mkchan(0), *e = mkchan(0);
	int v = 5, r = 0;
	size_t ch;
	struct fiber_select_case k[2] = {
		{ e, FIBER_SELECT_RECV, &r }, /* never ready */
		{ a, FIBER_SELECT_RECV, &r },
	};

	(void)state;
	assert_int_equal(fiber_chan_trysend(a, &v), 0);
	assert_int_equal(fiber_chan_close(a), 0);
	/* Buffered elements are still received, then EPIPE. */
	assert_int_equal(fiber_chan_select(k, 2, FIBER_NO_DEADLINE, &ch), 0);
	assert_int_equal(ch, 1);
	assert_int_equal(r, 5);
	r = 0;
	assert_int_equal(fiber_chan_select(k, 2, FIBER_NO_DEADLINE, &ch),
			 EPIPE);
	assert_int_equal(ch, 1);
	assert_int_equal(r, 0);
	/* A send to a closed channel is ready and fails. */
	assert_int_equal(fiber_chan_close(b), 0);
	k[1] = (struct fiber_select_case){ b, FIBER_SELECT_SEND, &v };
	assert_int_equal(fiber_chan_select(k, 2, FIBER_NO_DEADLINE, &ch),
			 EPIPE);
	assert_int_equal(ch, 1);
	assert_int_equal(fiber_chan_destroy(a), 0);
	assert_int_equal(fiber_chan_destroy(b), 0);
	assert_int_equal(fiber_chan_destroy(e), 0);
}

/* ---- blocking ---- */

struct sel {
	struct fiber_select_case *k;
	size_t n;
	uint64_t deadline;
	size_t chosen;
	atomic_int started;
};

static void *select_fiber(void *arg)
{
	struct sel *s = arg;
	int err;

	atomic_store(&s->started, 1);
	err = fiber_chan_select(s->k, s->n, s->deadline, &s->chosen);
	return (void *)(intptr_t)err;
}

static void test_select_blocked_is_served_once_and_unlinks(void **state)
{
	fiber_chan_t *a = mkchan(0), *b = mkchan(0), *c = mkchan(0);
	int ra = -1, rb = -1, out = 9, v = 77;
	struct fiber_select_case k[3] = {
		{ a, FIBER_SELECT_RECV, &ra },
		{ b, FIBER_SELECT_RECV, &rb },
		{ c, FIBER_SELECT_SEND, &out },
	};
	struct sel s = { k, 3, FIBER_NO_DEADLINE, 99, 0 };
	fiber_t f;

	(void)state;
	runtime_start(2);
	f = spawn(select_fiber, &s);
	while (!atomic_load(&s.started))
		sched_yield();
	/* A blocking send: returns only once the selector took it. */
	assert_int_equal(fiber_chan_send(b, &v), 0);
	assert_int_equal(join(f), 0);
	assert_int_equal(s.chosen, 1);
	assert_int_equal(rb, 77);
	assert_int_equal(ra, -1);
	/* The other cases' waiters are gone: nobody receives on a or sends
	 * on c, and the channels can be destroyed. */
	assert_int_equal(fiber_chan_trysend(a, &v), EAGAIN);
	assert_int_equal(fiber_chan_tryrecv(c, &v), EAGAIN);
	assert_int_equal(fiber_chan_destroy(a), 0);
	assert_int_equal(fiber_chan_destroy(b), 0);
	assert_int_equal(fiber_chan_destroy(c), 0);
	runtime_stop();
}

static void test_select_close_wakes_a_blocked_select(void **state)
{
	fiber_chan_t *a = mkchan(0), *b = mkchan(4);
	int r = -1;
	struct fiber_select_case k[2] = {
		{ a, FIBER_SELECT_RECV, &r },
		{ b, FIBER_SELECT_RECV, &r },
	};
	struct sel s = { k, 2, FIBER_NO_DEADLINE, 99, 0 };
	fiber_t f;

	(void)state;
	runtime_start(2);
	f = spawn(select_fiber, &s);
	while (!atomic_load(&s.started))
		sched_yield();
	fiber_sleep(MS);
	assert_int_equal(fiber_chan_close(b), 0);
	assert_int_equal(join(f), EPIPE);
	assert_int_equal(s.chosen, 1);
	assert_int_equal(r, -1);
	assert_int_equal(fiber_chan_destroy(a), 0);
	assert_int_equal(fiber_chan_destroy(b), 0);
	runtime_stop();
}

static void test_select_timeout_leaves_no_waiter(void **state)
{
	fiber_chan_t *a = mkchan(0), *b = mkchan(0);
	int r = -1, v = 3;
	size_t ch = 99;
	struct fiber_select_case k[2] = {
		{ a, FIBER_SELECT_RECV, &r },
		{ b, FIBER_SELECT_SEND, &v },
	};
	struct sel s = { k, 2, 0, 99, 0 };
	fiber_t f;

	(void)state;
	runtime_start(1);
	s.deadline = fiber_now() + 2 * MS;
	f = spawn(select_fiber, &s);
	assert_int_equal(join(f), ETIMEDOUT);
	assert_int_equal(s.chosen, 99);
	assert_int_equal(fiber_chan_trysend(a, &v), EAGAIN);
	assert_int_equal(fiber_chan_tryrecv(b, &r), EAGAIN);
	/* From a thread that runs no fiber, too. */
	assert_int_equal(fiber_chan_select(k, 2, fiber_now() + MS, &ch),
			 ETIMEDOUT);
	assert_int_equal(ch, 99);
	assert_int_equal(fiber_chan_destroy(a), 0);
	assert_int_equal(fiber_chan_destroy(b), 0);
	runtime_stop();
}

static void test_select_cancel_moves_nothing(void **state)
{
	fiber_chan_t *a = mkchan(0), *b = mkchan(0);
	int r = -1, v = 3;
	struct fiber_select_case k[2] = {
		{ a, FIBER_SELECT_RECV, &r },
		{ b, FIBER_SELECT_SEND, &v },
	};
	struct sel s = { k, 2, FIBER_NO_DEADLINE, 99, 0 };
	fiber_t f;

	(void)state;
	runtime_start(2);
	f = spawn(select_fiber, &s);
	while (!atomic_load(&s.started))
		sched_yield();
	fiber_sleep(2 * MS); /* mostly parked by now; either way it counts */
	assert_int_equal(fiber_cancel(f), 0);
	assert_int_equal(join(f), ECANCELED);
	assert_int_equal(s.chosen, 99);
	assert_int_equal(fiber_chan_trysend(a, &v), EAGAIN);
	assert_int_equal(fiber_chan_tryrecv(b, &r), EAGAIN);
	assert_int_equal(fiber_chan_destroy(a), 0);
	assert_int_equal(fiber_chan_destroy(b), 0);
	runtime_stop();
}

/*
 * A sender with a deadline races with the selector's own end (a deadline,
 * or a cancellation): in each round exactly one of "the sender's send
 * returned 0 and the selector got the element" and "the send timed out
 * and the selector got nothing" holds.  A select that reported a timeout
 * or a cancellation after a waker took its element would lose it.
 */
#if defined(__SANITIZE_THREAD__)
#define RACE_ROUNDS 300 /* each fiber carries a heavy TSan context */
#else
#define RACE_ROUNDS 3000
#endif

static fiber_chan_t *race_a, *race_b;
static atomic_int race_sent, race_got;
/* Round i starts (race_start) and the sender's round i ends (race_end). */
static fiber_sem_t race_start, race_end;

static void *race_sender(void *arg)
{
	(void)arg;
	for (int i = 1; i <= RACE_ROUNDS; i++) {
		fiber_sem_wait(&race_start);
		int err = fiber_chan_send_until(race_b, &i,
						fiber_now() + (i % 7) * 20000);

		if (err == 0)
			atomic_fetch_add(&race_sent, 1);
		else if (err != ETIMEDOUT)
			atomic_fetch_add(&errors, 1);
		fiber_sem_post(&race_end);
	}
	return NULL;
}

/*
 * race_driver - the rounds, in a fiber.  The driver and the sender wait
 * for each other on semaphores: they used to spin with fiber_yield (the
 * driver on the test thread, with sched_yield), and on a loaded host
 * (./dev loaded, CI's parallel tests) each of the 3000 rounds then waited
 * for time slices of other processes: over 300 s.  Fibers may not call
 * cmocka's assertions: a wrong outcome counts as an error.
 */
static void *race_driver(void *arg)
{
	int cancel = (int)(intptr_t)arg, r;
	struct fiber_select_case k[2] = {
		{ race_a, FIBER_SELECT_RECV, &r },
		{ race_b, FIBER_SELECT_RECV, &r },
	};

	for (int i = 1; i <= RACE_ROUNDS; i++) {
		struct sel s = { k, 2, FIBER_NO_DEADLINE, 99, 0 };
		fiber_t f;
		void *ret;
		long err;
		int cerr = 0;

		r = 0;
		if (!cancel)
			s.deadline = fiber_now() + (i % 5) * 20000;
		if (fiber_create(&f, NULL, select_fiber, &s)) {
			atomic_fetch_add(&errors, 1);
			break;
		}
		fiber_sem_post(&race_start);
		if (cancel) {
			for (int y = 0; y < i % 4; y++)
				fiber_yield();
			/* ESRCH: the select was served and its fiber ended
			 * first (checked below). */
			cerr = fiber_cancel(f);
			if (cerr != 0 && cerr != ESRCH)
				atomic_fetch_add(&errors, 1);
		}
		if (fiber_join(f, &ret) != 0)
			atomic_fetch_add(&errors, 1);
		err = (long)(intptr_t)ret;
		if (cerr == ESRCH && err != 0)
			atomic_fetch_add(&errors, 1);
		if (err == 0) {
			if (s.chosen != 1 || r != i)
				atomic_fetch_add(&errors, 1);
			atomic_fetch_add(&race_got, 1);
		} else if (err != (cancel ? ECANCELED : ETIMEDOUT) ||
			   s.chosen != 99) {
			atomic_fetch_add(&errors, 1);
		}
		/* The sender's round is over before the next selector. */
		fiber_sem_wait(&race_end);
	}
	return NULL;
}

static void run_race(int cancel)
{
	fiber_t sender, driver;

	runtime_start(2);
	race_a = mkchan(0);
	race_b = mkchan(0);
	assert_int_equal(fiber_sem_init(&race_start, 0), 0);
	assert_int_equal(fiber_sem_init(&race_end, 0), 0);
	atomic_store(&race_sent, 0);
	atomic_store(&race_got, 0);
	atomic_store(&errors, 0);
	sender = spawn(race_sender, NULL);
	driver = spawn(race_driver, (void *)(intptr_t)cancel);
	assert_int_equal(join(driver), 0);
	assert_int_equal(join(sender), 0);
	fprintf(stderr, "# %d of %d rounds served, the others %s\n",
		atomic_load(&race_got), RACE_ROUNDS,
		cancel ? "cancelled" : "timed out");
	assert_int_equal(atomic_load(&errors), 0);
	assert_int_equal(atomic_load(&race_sent), atomic_load(&race_got));
	assert_int_equal(fiber_chan_destroy(race_a), 0);
	assert_int_equal(fiber_chan_destroy(race_b), 0);
	assert_int_equal(fiber_sem_destroy(&race_start), 0);
	assert_int_equal(fiber_sem_destroy(&race_end), 0);
	runtime_stop();
}

static void test_select_timeout_racing_a_sender_loses_nothing(void **state)
{
	(void)state;
	run_race(0);
}

static void test_select_cancel_racing_a_sender_loses_nothing(void **state)
{
	(void)state;
	run_race(1);
}

/*
 * Many senders, each sending its own sequence numbers to channels picked
 * in turn, and many selectors each receiving from all of them: every
 * element arrives exactly once, and each selector ends when every channel
 * is closed and drained.
 */
#define MESH_CHANS 5
#define MESH_SENDERS 4
#define MESH_SELECTORS 6
#if defined(__SANITIZE_THREAD__)
#define MESH_PER_SENDER 500
#else
#define MESH_PER_SENDER 5000
#endif
#define MESH_TOTAL (MESH_SENDERS * MESH_PER_SENDER)

static fiber_chan_t *mesh[MESH_CHANS];
static atomic_uchar mesh_seen[MESH_TOTAL];
static atomic_int mesh_live_senders;

static void *mesh_sender(void *arg)
{
	int id = (int)(intptr_t)arg;

	for (int i = 0; i < MESH_PER_SENDER; i++) {
		int v = id * MESH_PER_SENDER + i;

		if (fiber_chan_send(mesh[(i + id) % MESH_CHANS], &v) != 0)
			atomic_fetch_add(&errors, 1);
	}
	if (atomic_fetch_sub(&mesh_live_senders, 1) == 1)
		for (int c = 0; c < MESH_CHANS; c++)
			fiber_chan_close(mesh[c]);
	return NULL;
}

static void *mesh_selector(void *arg)
{
	struct fiber_select_case k[MESH_CHANS];
	size_t n = MESH_CHANS, ch;
	int v[MESH_CHANS], err;

	(void)arg;
	for (int c = 0; c < MESH_CHANS; c++)
		k[c] = (struct fiber_select_case){ mesh[c], FIBER_SELECT_RECV,
						   &v[c] };
	while (n) {
		err = fiber_chan_select(k, n, FIBER_NO_DEADLINE, &ch);
		if (err == EPIPE) {
			k[ch] = k[--n]; /* drop the closed channel */
			continue;
		}
		if (err != 0 || ch >= n) {
			atomic_fetch_add(&errors, 1);
			break;
		}
		int x = *(int *)k[ch].elem;

		if (x < 0 || x >= MESH_TOTAL ||
		    atomic_fetch_add(&mesh_seen[x], 1) != 0)
			atomic_fetch_add(&errors, 1);
	}
	return NULL;
}

static void run_mesh(unsigned int workers, size_t cap)
{
	fiber_t s[MESH_SENDERS], r[MESH_SELECTORS];

	runtime_start(workers);
	atomic_store(&errors, 0);
	atomic_store(&mesh_live_senders, MESH_SENDERS);
	memset(mesh_seen, 0, sizeof(mesh_seen));
	for (int c = 0; c < MESH_CHANS; c++)
		mesh[c] = mkchan(cap);
	for (int i = 0; i < MESH_SELECTORS; i++)
		r[i] = spawn(mesh_selector, NULL);
	for (int i = 0; i < MESH_SENDERS; i++)
		s[i] = spawn(mesh_sender, (void *)(intptr_t)i);
	for (int i = 0; i < MESH_SENDERS; i++)
		join(s[i]);
	for (int i = 0; i < MESH_SELECTORS; i++)
		join(r[i]);
	assert_int_equal(atomic_load(&errors), 0);
	for (int x = 0; x < MESH_TOTAL; x++)
		if (atomic_load(&mesh_seen[x]) != 1)
			fail_msg("element %d arrived %d times", x,
				 atomic_load(&mesh_seen[x]));
	for (int c = 0; c < MESH_CHANS; c++)
		assert_int_equal(fiber_chan_destroy(mesh[c]), 0);
	runtime_stop();
}

static void test_select_mesh_delivers_each_element_once(void **state)
{
	(void)state;
	run_mesh(2, 0);
	run_mesh(2, 3);
	run_mesh(1, 0);
}

/*
 * A cancellation that lands while the select queues its waiters (many
 * cases make that window wide) must end it: the waiters share the
 * fiber's claim word, and queueing one more must not reset it.
 */
static void test_select_cancel_while_queueing_ends_it(void **state)
{
#if defined(__SANITIZE_THREAD__)
	enum { N = 100, ROUNDS = 20 };
#else
	enum { N = 1000, ROUNDS = 200 };
#endif
	fiber_chan_t **c = calloc(N, sizeof(*c));
	struct fiber_select_case *k = calloc(N, sizeof(*k));
	int v;
	unsigned int seed = 1;

	(void)state;
	assert_non_null(c);
	assert_non_null(k);
	runtime_start(2);
	for (int i = 0; i < N; i++) {
		c[i] = mkchan(0);
		k[i] = (struct fiber_select_case){ c[i], FIBER_SELECT_RECV,
						   &v };
	}
	for (int r = 0; r < ROUNDS; r++) {
		/* The deadline only bounds a lost cancellation (which
		 * then fails as ETIMEDOUT): far enough that a slow or
		 * loaded host never reaches it first. */
		struct sel s = { k, N, fiber_now() + 10000 * MS, 99, 0 };
		fiber_t f = spawn(select_fiber, &s);
		unsigned int spin = rand_r(&seed) % 20000;

		while (!atomic_load(&s.started))
			;
		for (volatile unsigned int x = 0; x < spin; x++)
			;
		assert_int_equal(fiber_cancel(f), 0);
		assert_int_equal(join(f), ECANCELED);
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(fiber_chan_destroy(c[i]), 0);
	free(c);
	free(k);
	runtime_stop();
}

/* A fiber feeds two channels; a foreign thread selects over both. */
static void *feeder(void *arg)
{
	fiber_chan_t **c = arg;

	for (int i = 0; i < 2000; i++)
		if (fiber_chan_send(c[i % 2], &i) != 0)
			atomic_fetch_add(&errors, 1);
	fiber_chan_close(c[0]);
	fiber_chan_close(c[1]);
	return NULL;
}

static void test_select_from_a_foreign_thread(void **state)
{
	fiber_chan_t *c[2] = { mkchan(0), mkchan(1) };
	int v;
	long sum = 0;
	size_t ch, n = 2;
	struct fiber_select_case k[2] = {
		{ c[0], FIBER_SELECT_RECV, &v },
		{ c[1], FIBER_SELECT_RECV, &v },
	};
	fiber_t f;
	int err;

	(void)state;
	runtime_start(2);
	atomic_store(&errors, 0);
	f = spawn(feeder, c);
	while (n) {
		err = fiber_chan_select(k, n, FIBER_NO_DEADLINE, &ch);
		if (err == EPIPE) {
			k[ch] = k[--n];
			continue;
		}
		assert_int_equal(err, 0);
		sum += v;
	}
	join(f);
	assert_int_equal(atomic_load(&errors), 0);
	assert_int_equal(sum, 1999L * 2000 / 2);
	assert_int_equal(fiber_chan_destroy(c[0]), 0);
	assert_int_equal(fiber_chan_destroy(c[1]), 0);
	runtime_stop();
}

/*
 * A foreign thread selects over two channels with deadlines of 0-4 us,
 * which pass while it queues its waiters, while another thread keeps
 * offering elements on one of them: the sender may claim the select
 * (its waiters share one claim word) after the selector dropped that
 * channel's lock and before it gives up.  It must then take the
 * sender's wake as a foreign thread does, and report the element.
 * Every element a try-send placed (capacity 0: only into a waiting
 * select) is received exactly once.
 */
struct offer {
	fiber_chan_t *c;
	atomic_bool stop;
	atomic_long sent;
};

static void *offerer(void *arg)
{
	struct offer *o = arg;
	int v = 1;

	while (!atomic_load(&o->stop))
		if (fiber_chan_trysend(o->c, &v) == 0)
			atomic_fetch_add(&o->sent, 1);
	return NULL;
}

static void test_select_foreign_deadline_racing_a_sender(void **state)
{
	/* TSan and valgrind run the two threads' spinning one step at a
	 * time: fewer rounds (the native run is the one that catches). */
#if defined(__SANITIZE_THREAD__)
	const long ROUNDS = 20000;
#else
	const long ROUNDS = UNDER_VALGRIND ? 20000 : 1000000;
#endif
	fiber_chan_t *c[2] = { mkchan(0), mkchan(0) };
	struct offer o = { .c = c[0] };
	long got = 0, timedout = 0;
	pthread_t t;
	int v;

	(void)state;
	runtime_start(1);
	/* The sender's channel is the one whose lock is dropped first
	 * (locks go in address order; the first stays held). */
	if ((uintptr_t)c[1] > (uintptr_t)c[0])
		o.c = c[1];
	assert_int_equal(pthread_create(&t, NULL, offerer, &o), 0);
	for (long i = 0; i < ROUNDS; i++) {
		struct fiber_select_case k[2] = {
			{ c[0], FIBER_SELECT_RECV, &v },
			{ c[1], FIBER_SELECT_RECV, &v },
		};
		size_t ch = 9;
		int err = fiber_chan_select(k, 2, fiber_now() + i % 4000, &ch);

		if (err == 0 && k[ch].chan == o.c)
			got++;
		else if (err == ETIMEDOUT)
			timedout++;
		else
			fail_msg("select: %d, case %zu", err, ch);
	}
	atomic_store(&o.stop, true);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(got, atomic_load(&o.sent));
	assert_true(timedout > 0);
	assert_int_equal(fiber_chan_destroy(c[0]), 0);
	assert_int_equal(fiber_chan_destroy(c[1]), 0);
	runtime_stop();
}

/* More cases than the caller's stack holds: the allocated path. */
static void test_select_many_cases(void **state)
{
	enum { N = 100 };
	fiber_chan_t *c[N];
	struct fiber_select_case k[N];
	int v[N];
	size_t ch;
	struct sel s = { k, N, FIBER_NO_DEADLINE, 99, 0 };
	fiber_t f;
	int x = 1234;

	(void)state;
	runtime_start(2);
	for (int i = 0; i < N; i++) {
		c[i] = mkchan(0);
		k[i] = (struct fiber_select_case){ c[i], FIBER_SELECT_RECV,
						   &v[i] };
	}
	assert_int_equal(fiber_chan_select(k, N, 0, &ch), ETIMEDOUT);
	f = spawn(select_fiber, &s);
	assert_int_equal(fiber_chan_send(c[77], &x), 0);
	assert_int_equal(join(f), 0);
	assert_int_equal(s.chosen, 77);
	assert_int_equal(v[77], 1234);
	for (int i = 0; i < N; i++)
		assert_int_equal(fiber_chan_destroy(c[i]), 0);
	runtime_stop();
}

/* One channel in a send and a recv case of the same select: whichever
 * side a partner takes, the element moves once. */
static void test_select_same_channel_in_two_cases(void **state)
{
	fiber_chan_t *c = mkchan(0);
	int in = -1, out = 5, v = 6;
	struct fiber_select_case k[2] = {
		{ c, FIBER_SELECT_SEND, &out },
		{ c, FIBER_SELECT_RECV, &in },
	};
	struct sel s = { k, 2, FIBER_NO_DEADLINE, 99, 0 };
	fiber_t f;

	(void)state;
	runtime_start(2);
	f = spawn(select_fiber, &s);
	while (!atomic_load(&s.started))
		sched_yield();
	assert_int_equal(fiber_chan_recv(c, &v), 0);
	assert_int_equal(join(f), 0);
	assert_int_equal(s.chosen, 0);
	assert_int_equal(v, 5);
	assert_int_equal(in, -1);
	s.started = 0;
	f = spawn(select_fiber, &s);
	while (!atomic_load(&s.started))
		sched_yield();
	v = 6;
	assert_int_equal(fiber_chan_send(c, &v), 0);
	assert_int_equal(join(f), 0);
	assert_int_equal(s.chosen, 1);
	assert_int_equal(in, 6);
	assert_int_equal(fiber_chan_destroy(c), 0);
	runtime_stop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_select_rejects_bad_arguments),
		TEST(test_select_poll_moves_nothing),
		TEST(test_select_takes_the_ready_case),
		TEST(test_select_chooses_ready_cases_uniformly),
		TEST(test_select_closed_channels_complete_with_epipe),
		TEST(test_select_blocked_is_served_once_and_unlinks),
		TEST(test_select_close_wakes_a_blocked_select),
		TEST(test_select_timeout_leaves_no_waiter),
		TEST(test_select_cancel_moves_nothing),
		TEST(test_select_timeout_racing_a_sender_loses_nothing),
		TEST(test_select_cancel_racing_a_sender_loses_nothing),
		TEST(test_select_cancel_while_queueing_ends_it),
		TEST(test_select_mesh_delivers_each_element_once),
		TEST(test_select_from_a_foreign_thread),
		TEST(test_select_foreign_deadline_racing_a_sender),
		TEST(test_select_many_cases),
		TEST(test_select_same_channel_in_two_cases),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
