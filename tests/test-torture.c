/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-torture.c - a randomized stress program, in the spirit of the
 * kernel's rcutorture and liburcu's stress tests.
 *
 * Many fibers on many workers do random things to each other: they create,
 * join and detach children, yield, block and wake through every sync
 * object, stream numbered elements through channels and a checked byte
 * stream through fiber pipes, change their affinity, and flip scheduler
 * features at random.  Invariants are checked all the time:
 *   - a per-fiber canary, taken with an atomic exchange whenever the fiber
 *     runs and dropped before it may switch, catches a fiber running on two
 *     workers at once; a pattern on its stack catches a stack someone else
 *     wrote; its worker must not change between two switch points;
 *   - every wakeup is accounted: semaphore posts = waits + what is left,
 *     condition handoffs alternate;
 *   - every element and byte through channels and pipes arrives exactly
 *     once and in order;
 *   - mutual exclusion (mutex, rwlock writers, semaphore permits) holds;
 *   - fiber_once runs each function once; barrier rounds agree;
 *   - the runtime's counters add up (creates = exits = what we created).
 * A watchdog aborts with a dump if nothing progresses for 60 s (a lost
 * wakeup).
 *
 * Usage: test-torture [--duration S] [--fibers N] [--seed X] [--workers W]
 *                     [--topology STR]
 * The seed is printed first so that a failure can be replayed (the random
 * choices replay; the interleavings do not).  Without --topology the run is
 * split between the machine and the synthetic topology
 * "pack:2 numa:1 l3:2 core:4 pu:2" (32 workers).  Output is TAP.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fiber.h"

#define NR_MUTEX 4
#define NR_ONCE 8
#define NR_CHAN 3
#define NR_PIPE 3
#define NR_SQUAD 4 /* barrier squad size */
#define SEM_PERMITS 3
#define MAX_PENDING 4 /* children a chaos fiber keeps to join later */
#define STACK_WORDS 32

static void die(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("not ok - ");
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
	abort();
}

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond))                                                   \
			die(__VA_ARGS__);                                      \
	} while (0)

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- per-fiber state: canary, stack pattern, worker check --------------- */

struct tf {
	atomic_int on; /* canary: 1 while some worker runs us */
	int worker;    /* worker at the last switch point */
	uint64_t rng;
	uint64_t *pattern; /* on our own stack */
	uint64_t pattern_seed;
	int index;
	atomic_int last_action; /* for the watchdog's dump */
};

static void pattern_check(struct tf *t)
{
	for (int i = 0; i < STACK_WORDS; i++)
		CHECK(t->pattern[i] == t->pattern_seed * (uint64_t)(i + 1),
		      "fiber %d: its stack was written by someone else",
		      t->index);
}

/* enter - we are running: take the canary. */
static void enter(struct tf *t)
{
	CHECK(atomic_exchange(&t->on, 1) == 0,
	      "fiber %d runs on two workers at once", t->index);
	t->worker = fiber_current_worker();
	CHECK(t->worker >= 0, "fiber %d: no worker", t->index);
	pattern_check(t);
}

/* leave - we may switch: drop the canary, after checking that we did not
 * change worker without a switch point. */
static void leave(struct tf *t)
{
	CHECK(fiber_current_worker() == t->worker,
	      "fiber %d moved from worker %d to %d without switching", t->index,
	      t->worker, fiber_current_worker());
	pattern_check(t);
	CHECK(atomic_exchange(&t->on, 0) == 1, "fiber %d: canary lost",
	      t->index);
}

/* Wrap a call that may switch. */
#define SWITCHPOINT(t, call)                                                   \
	({                                                                     \
		leave(t);                                                      \
		__typeof__(call) r_ = (call);                                  \
		enter(t);                                                      \
		r_;                                                            \
	})

static unsigned int rnd(struct tf *t, unsigned int n)
{
	return (unsigned int)(splitmix(&t->rng) % n);
}

/* ---- shared objects -------------------------------------------------------- */

static struct {
	atomic_bool stop;
	atomic_ulong progress;
	atomic_long created; /* fibers created by us, all phases */
	atomic_long live_children;
	long max_children;
	int nr_workers;
	int nr_chaos;
	uint64_t seed;

	fiber_mutex_t mutex[NR_MUTEX];
	long guarded[NR_MUTEX][2]; /* mutex[i]: both always equal */
	fiber_rwlock_t rw;
	long rw_a, rw_b; /* rw: equal outside writers */
	atomic_int rw_writers, rw_readers;
	fiber_sem_t permits;
	atomic_int permits_in;
	fiber_sem_t *doorbell; /* one per chaos fiber */
	atomic_long doorbell_posts, doorbell_waits;
	fiber_once_t once[NR_ONCE];
	atomic_int once_runs[NR_ONCE];
	fiber_chan_t *pool; /* try-only token pool */
	atomic_long pool_sent, pool_recv;

	char features[32][48];
	int nr_features;
} g;

/* ---- children ---------------------------------------------------------------- */

static void *child_main(void *arg)
{
	struct tf t = { 0 };
	uint64_t pat[STACK_WORDS];

	t.rng = (uint64_t)(uintptr_t)arg;
	t.index = -1;
	t.pattern = pat;
	t.pattern_seed = splitmix(&t.rng) | 1;
	for (int i = 0; i < STACK_WORDS; i++)
		pat[i] = t.pattern_seed * (uint64_t)(i + 1);
	enter(&t);
	for (unsigned int n = rnd(&t, 4); n--;) {
		unsigned int k = rnd(&t, NR_MUTEX);

		SWITCHPOINT(&t, fiber_yield());
		SWITCHPOINT(&t, fiber_mutex_lock(&g.mutex[k]));
		g.guarded[k][0]++;
		g.guarded[k][1]++;
		fiber_mutex_unlock(&g.mutex[k]);
	}
	leave(&t);
	atomic_fetch_sub(&g.live_children, 1);
	atomic_fetch_add(&g.progress, 1);
	return arg;
}

/* ---- chaos fibers: one random action at a time -------------------------------- */

#define ONCE_FN(i)                                                             \
	static void once_fn_##i(void)                                          \
	{                                                                      \
		atomic_fetch_add(&g.once_runs[i], 1);                          \
	}
/* clang-format off */
ONCE_FN(0) ONCE_FN(1) ONCE_FN(2) ONCE_FN(3)
ONCE_FN(4) ONCE_FN(5) ONCE_FN(6) ONCE_FN(7)
static void (*const once_fns[NR_ONCE])(void) = {
	once_fn_0, once_fn_1, once_fn_2, once_fn_3,
	once_fn_4, once_fn_5, once_fn_6, once_fn_7,
};
/* clang-format on */

static void act_mutex(struct tf *t)
{
	unsigned int k = rnd(t, NR_MUTEX);
	long a;

	if (rnd(t, 4) == 0) {
		if (fiber_mutex_trylock(&g.mutex[k]))
			return;
	} else {
		SWITCHPOINT(t, fiber_mutex_lock(&g.mutex[k]));
	}
	a = ++g.guarded[k][0];
	if (rnd(t, 4) == 0)
		SWITCHPOINT(t, fiber_yield()); /* block while holding it */
	CHECK(g.guarded[k][0] == a, "mutex %u: two holders", k);
	g.guarded[k][1]++;
	CHECK(g.guarded[k][0] == g.guarded[k][1], "mutex %u: torn", k);
	CHECK(fiber_mutex_unlock(&g.mutex[k]) == 0, "mutex unlock");
}

static void act_rwlock(struct tf *t)
{
	if (rnd(t, 3) == 0) {
		SWITCHPOINT(t, fiber_rwlock_wrlock(&g.rw));
		CHECK(atomic_fetch_add(&g.rw_writers, 1) == 0 &&
			      atomic_load(&g.rw_readers) == 0,
		      "rwlock: writer not alone");
		g.rw_a++;
		if (rnd(t, 2))
			SWITCHPOINT(t, fiber_yield());
		g.rw_b++;
		atomic_fetch_sub(&g.rw_writers, 1);
	} else {
		SWITCHPOINT(t, fiber_rwlock_rdlock(&g.rw));
		atomic_fetch_add(&g.rw_readers, 1);
		CHECK(atomic_load(&g.rw_writers) == 0,
		      "rwlock: reader with a writer");
		CHECK(g.rw_a == g.rw_b, "rwlock: reader saw a torn write");
		if (rnd(t, 2))
			SWITCHPOINT(t, fiber_yield());
		atomic_fetch_sub(&g.rw_readers, 1);
	}
	CHECK(fiber_rwlock_unlock(&g.rw) == 0, "rwlock unlock");
}

static void act_permits(struct tf *t)
{
	if (rnd(t, 3) == 0) {
		if (fiber_sem_trywait(&g.permits))
			return;
	} else {
		SWITCHPOINT(t, fiber_sem_wait(&g.permits));
	}
	CHECK(atomic_fetch_add(&g.permits_in, 1) < SEM_PERMITS,
	      "semaphore: more holders than permits");
	if (rnd(t, 2))
		SWITCHPOINT(t, fiber_yield());
	atomic_fetch_sub(&g.permits_in, 1);
	CHECK(fiber_sem_post(&g.permits) == 0, "sem post");
}

/* Wake the next chaos fiber, then wait to be woken (see the stop rule in
 * run_phase). */
static void act_doorbell(struct tf *t)
{
	int next = (t->index + 1) % g.nr_chaos;

	atomic_fetch_add(&g.doorbell_posts, 1);
	CHECK(fiber_sem_post(&g.doorbell[next]) == 0, "doorbell post");
	SWITCHPOINT(t, fiber_sem_wait(&g.doorbell[t->index]));
	atomic_fetch_add(&g.doorbell_waits, 1);
}

static void act_create(struct tf *t, fiber_t *pending, int *nr_pending)
{
	fiber_attr_t a;
	fiber_t f;
	bool detach = rnd(t, 3) == 0;
	uint64_t arg = splitmix(&t->rng) | 1;
	void *r;

	if (atomic_fetch_add(&g.live_children, 1) >= g.max_children) {
		atomic_fetch_sub(&g.live_children, 1);
		return;
	}
	fiber_attr_init(&a);
	fiber_attr_setname(&a, "torture-child");
	if (rnd(t, 4) == 0)
		fiber_attr_setstacksize(&a, FIBER_STACK_MIN);
	if (detach && rnd(t, 2))
		fiber_attr_setdetachstate(&a, FIBER_CREATE_DETACHED);
	else
		detach = false;
	CHECK(fiber_create(&f, &a, child_main, (void *)(uintptr_t)arg) == 0,
	      "create");
	atomic_fetch_add(&g.created, 1);
	if (detach)
		return;
	if (rnd(t, 4) == 0) {
		CHECK(fiber_detach(f) == 0, "detach");
		return;
	}
	if (*nr_pending < MAX_PENDING && rnd(t, 2)) {
		pending[(*nr_pending)++] = f;
		return;
	}
	r = NULL;
	CHECK(SWITCHPOINT(t, fiber_join(f, &r)) == 0, "join");
	CHECK(r == (void *)(uintptr_t)arg, "join: wrong return value");
}

static void act_affinity(struct tf *t)
{
	cpu_set_t set;
	int w;

	CPU_ZERO(&set);
	if (rnd(t, 4) == 0) {
		for (int i = 0; i < g.nr_workers; i++)
			CPU_SET(i, &set);
	} else {
		for (int i = 0; i < g.nr_workers; i++)
			if (rnd(t, 3) == 0)
				CPU_SET(i, &set);
		CPU_SET(rnd(t, (unsigned int)g.nr_workers), &set);
	}
	CHECK(SWITCHPOINT(t, fiber_setaffinity(sizeof(set), &set)) == 0,
	      "setaffinity");
	w = fiber_current_worker();
	CHECK(CPU_ISSET(w, &set), "fiber %d on worker %d outside its affinity",
	      t->index, w);
}

static void act_features(struct tf *t)
{
	char spec[64];

	if (!g.nr_features)
		return;
	snprintf(spec, sizeof(spec), "%s%s", rnd(t, 2) ? "NO_" : "",
		 g.features[rnd(t, (unsigned int)g.nr_features)]);
	CHECK(fiber_sched_features_set(spec) == 0, "features %s", spec);
}

static void act_pool(struct tf *t)
{
	long tok = t->index;

	if (rnd(t, 2)) {
		if (fiber_chan_trysend(g.pool, &tok) == 0)
			atomic_fetch_add(&g.pool_sent, 1);
	} else if (fiber_chan_tryrecv(g.pool, &tok) == 0) {
		atomic_fetch_add(&g.pool_recv, 1);
	}
}

static void *chaos_main(void *arg)
{
	struct tf *t = arg;
	uint64_t pat[STACK_WORDS];
	fiber_t pending[MAX_PENDING];
	int nr_pending = 0;

	t->pattern = pat;
	t->pattern_seed = splitmix(&t->rng) | 1;
	for (int i = 0; i < STACK_WORDS; i++)
		pat[i] = t->pattern_seed * (uint64_t)(i + 1);
	enter(t);
	while (!atomic_load(&g.stop)) {
		unsigned int a = rnd(t, 12);

		atomic_store_explicit(&t->last_action, (int)a,
				      memory_order_relaxed);
		switch (a) {
		case 0:
			SWITCHPOINT(t, fiber_yield());
			break;
		case 1:
		case 2:
			act_mutex(t);
			break;
		case 3:
			act_rwlock(t);
			break;
		case 4:
			act_permits(t);
			break;
		case 5:
			act_doorbell(t);
			break;
		case 6: {
			unsigned int k = rnd(t, NR_ONCE);

			SWITCHPOINT(t, fiber_once(&g.once[k], once_fns[k]));
			CHECK(atomic_load(&g.once_runs[k]) == 1,
			      "once %u: ran %d times", k,
			      atomic_load(&g.once_runs[k]));
			break;
		}
		case 7:
		case 8:
			act_create(t, pending, &nr_pending);
			break;
		case 9:
			act_affinity(t);
			break;
		case 10:
			if (rnd(t, 8) == 0)
				act_features(t);
			break;
		default:
			act_pool(t);
			break;
		}
		if (nr_pending && rnd(t, 4) == 0) {
			void *r;

			nr_pending--;
			CHECK(SWITCHPOINT(t, fiber_join(pending[nr_pending],
							&r)) == 0,
			      "join");
		}
		atomic_fetch_add_explicit(&g.progress, 1, memory_order_relaxed);
	}
	while (nr_pending--)
		CHECK(SWITCHPOINT(t, fiber_join(pending[nr_pending], NULL)) ==
			      0,
		      "join");
	leave(t);
	return NULL;
}

/* ---- streams: channels and pipes, checked end to end ----------------------- */

struct stream {
	fiber_chan_t *chan;
	fiber_pipe_t *pipe;
	atomic_int producers; /* left to finish; the last one closes */
	atomic_long sent, recv;
	atomic_ulong sum_sent, sum_recv;
	uint64_t seed;
	int id;
};

struct elem {
	uint32_t producer;
	uint32_t seq;
};

static void *chan_producer(void *arg)
{
	struct stream *s = arg;
	uint64_t rng = s->seed;
	static atomic_uint next_producer;
	uint32_t me = atomic_fetch_add(&next_producer, 1);
	struct elem e;

	for (uint32_t seq = 0; !atomic_load(&g.stop); seq++) {
		e.producer = me;
		e.seq = seq;
		if (fiber_chan_send(s->chan, &e))
			die("chan %d: send failed before close", s->id);
		atomic_fetch_add(&s->sent, 1);
		atomic_fetch_add(&s->sum_sent, (uint64_t)me * 1000003u + seq);
		if (splitmix(&rng) % 8 == 0)
			fiber_yield();
		atomic_fetch_add_explicit(&g.progress, 1, memory_order_relaxed);
	}
	if (atomic_fetch_sub(&s->producers, 1) == 1)
		fiber_chan_close(s->chan);
	return NULL;
}

/* Each consumer sees every producer's elements in increasing order; all
 * consumers together see each element once (counted and summed). */
static void *chan_consumer(void *arg)
{
	struct stream *s = arg;
	int64_t last[64];
	struct elem e;
	int rc;

	for (int i = 0; i < 64; i++)
		last[i] = -1;
	while ((rc = fiber_chan_recv(s->chan, &e)) == 0) {
		int64_t *l = &last[e.producer % 64];

		CHECK((int64_t)e.seq > *l,
		      "chan %d: producer %u element %u after %lld", s->id,
		      e.producer, e.seq, (long long)*l);
		*l = e.seq;
		atomic_fetch_add(&s->recv, 1);
		atomic_fetch_add(&s->sum_recv,
				 (uint64_t)e.producer * 1000003u + e.seq);
	}
	CHECK(rc == EPIPE, "chan %d: recv %d", s->id, rc);
	return NULL;
}

static uint8_t stream_byte(uint64_t seed, uint64_t i)
{
	uint64_t x = seed ^ (i * 0x9e3779b97f4a7c15ull);

	x ^= x >> 29;
	return (uint8_t)(x * 0xbf58476d1ce4e5b9ull >> 56);
}

static void *pipe_writer(void *arg)
{
	struct stream *s = arg;
	uint64_t rng = s->seed ^ 1, pos = 0;
	uint8_t buf[4096];

	while (!atomic_load(&g.stop)) {
		size_t len = 1 + splitmix(&rng) % sizeof(buf), done = 0;

		for (size_t i = 0; i < len; i++)
			buf[i] = stream_byte(s->seed, pos + i);
		CHECK(fiber_pipe_write(s->pipe, buf, len, &done) == 0 &&
			      done == len,
		      "pipe %d: short write", s->id);
		pos += len;
		atomic_fetch_add_explicit(&g.progress, 1, memory_order_relaxed);
	}
	atomic_store(&s->sent, (long)pos);
	fiber_pipe_close_write(s->pipe);
	return NULL;
}

static void *pipe_reader(void *arg)
{
	struct stream *s = arg;
	uint64_t rng = s->seed ^ 2, pos = 0;
	uint8_t buf[4096];

	for (;;) {
		size_t len = 1 + splitmix(&rng) % sizeof(buf), done = 0;

		CHECK(fiber_pipe_read(s->pipe, buf, len, &done) == 0,
		      "pipe %d: read", s->id);
		if (!done)
			break; /* EOF */
		for (size_t i = 0; i < done; i++)
			CHECK(buf[i] == stream_byte(s->seed, pos + i),
			      "pipe %d: byte %llu wrong", s->id,
			      (unsigned long long)(pos + i));
		pos += done;
	}
	atomic_store(&s->recv, (long)pos);
	return NULL;
}

/* ---- the barrier squad and the condition-variable pair --------------------- */

static struct {
	fiber_barrier_t b;
	long round; /* written by the serial fiber between waits */
	bool done;
} squad;

static void *squad_main(void *arg)
{
	uint64_t rng = (uint64_t)(uintptr_t)arg;

	for (;;) {
		long r = squad.round;
		int serial = 0;

		for (unsigned int n = splitmix(&rng) % 3; n--;)
			fiber_yield();
		if (fiber_barrier_wait(&squad.b) ==
		    FIBER_BARRIER_SERIAL_FIBER) {
			serial++;
			squad.round++;
			squad.done = atomic_load(&g.stop);
		}
		if (fiber_barrier_wait(&squad.b) == FIBER_BARRIER_SERIAL_FIBER)
			serial++;
		CHECK(squad.round == r + 1, "barrier: round %ld, expected %ld",
		      squad.round, r + 1);
		atomic_fetch_add_explicit(&g.progress, 1, memory_order_relaxed);
		/* Nobody writes round or done until all have passed here. */
		if (fiber_barrier_wait(&squad.b) == FIBER_BARRIER_SERIAL_FIBER)
			serial++;
		if (squad.done)
			break;
	}
	return NULL;
}

static struct {
	fiber_mutex_t m;
	fiber_cond_t c;
	int turn;	/* whose turn: 0 or 1; m */
	long passes[2]; /* m */
	bool done;	/* m */
} pair;

static void *pair_main(void *arg)
{
	int me = (int)(uintptr_t)arg;

	fiber_mutex_lock(&pair.m);
	for (;;) {
		while (pair.turn != me && !pair.done)
			fiber_cond_wait(&pair.c, &pair.m);
		if (pair.done)
			break;
		CHECK(pair.turn == me, "cond: woken out of turn");
		pair.passes[me]++;
		pair.turn = !me;
		if (atomic_load(&g.stop))
			pair.done = true;
		if (me)
			fiber_cond_signal(&pair.c);
		else
			fiber_cond_broadcast(&pair.c);
		atomic_fetch_add_explicit(&g.progress, 1, memory_order_relaxed);
	}
	fiber_mutex_unlock(&pair.m);
	return NULL;
}

/* ---- the watchdog ------------------------------------------------------------ */

static struct tf *chaos;
static atomic_bool watching;

static void *watchdog(void *arg)
{
	unsigned long last = 0;
	int still = 0;

	(void)arg;
	while (atomic_load(&watching)) {
		unsigned long p = atomic_load(&g.progress);

		still = p == last ? still + 1 : 0;
		last = p;
		if (still >= 600) {
			printf("# no progress for 60 s; chaos fibers' last "
			       "actions:");
			for (int i = 0; i < g.nr_chaos; i++)
				printf(" %d",
				       atomic_load(&chaos[i].last_action));
			die("stalled (a lost wakeup?), seed %#llx",
			    (unsigned long long)g.seed);
		}
		usleep(100000);
	}
	return NULL;
}

/* ---- one phase: a runtime, the fibers, the checks ----------------------- */

static void load_features(void)
{
	char buf[1024], *save = NULL, *w;

	g.nr_features = 0;
	fiber_sched_features_string(buf, sizeof(buf));
	for (w = strtok_r(buf, " ", &save); w && g.nr_features < 32;
	     w = strtok_r(NULL, " ", &save)) {
		if (!strncmp(w, "NO_", 3))
			w += 3;
		snprintf(g.features[g.nr_features++], sizeof(g.features[0]),
			 "%s", w);
	}
}

static fiber_t spawn(void *(*fn)(void *), void *arg, const char *name)
{
	fiber_attr_t a;
	fiber_t f;

	fiber_attr_init(&a);
	fiber_attr_setname(&a, name);
	CHECK(fiber_create(&f, &a, fn, arg) == 0, "create %s", name);
	atomic_fetch_add(&g.created, 1);
	return f;
}

static void init_objects(void)
{
	for (int i = 0; i < NR_MUTEX; i++) {
		fiber_mutex_init(&g.mutex[i]);
		g.guarded[i][0] = g.guarded[i][1] = 0;
	}
	fiber_rwlock_init(&g.rw);
	fiber_sem_init(&g.permits, SEM_PERMITS);
	g.doorbell = calloc((size_t)g.nr_chaos, sizeof(*g.doorbell));
	CHECK(g.doorbell, "out of memory");
	for (int i = 0; i < g.nr_chaos; i++)
		fiber_sem_init(&g.doorbell[i], 0);
	atomic_store(&g.doorbell_posts, 0);
	atomic_store(&g.doorbell_waits, 0);
	for (int i = 0; i < NR_ONCE; i++) {
		memset(&g.once[i], 0, sizeof(g.once[i]));
		atomic_store(&g.once_runs[i], 0);
	}
	CHECK(fiber_chan_create(&g.pool, sizeof(long), 16) == 0, "pool");
	atomic_store(&g.pool_sent, 0);
	atomic_store(&g.pool_recv, 0);
	memset(&squad, 0, sizeof(squad));
	fiber_barrier_init(&squad.b, NR_SQUAD);
	memset(&pair, 0, sizeof(pair));
	fiber_mutex_init(&pair.m);
	fiber_cond_init(&pair.c);
}

/* check_objects - every count adds up once all fibers are done. */
static void check_objects(void)
{
	long left = 0, tok;
	int v;

	for (int i = 0; i < NR_MUTEX; i++)
		CHECK(g.guarded[i][0] == g.guarded[i][1], "mutex %d torn", i);
	CHECK(g.rw_a == g.rw_b, "rwlock torn");
	CHECK(fiber_sem_getvalue(&g.permits, &v) == 0 && v == SEM_PERMITS,
	      "semaphore: %d permits at the end", v);
	for (int i = 0; i < g.nr_chaos; i++) {
		CHECK(fiber_sem_getvalue(&g.doorbell[i], &v) == 0, "getvalue");
		left += v;
		fiber_sem_destroy(&g.doorbell[i]);
	}
	CHECK(atomic_load(&g.doorbell_posts) ==
		      atomic_load(&g.doorbell_waits) + left,
	      "doorbells: %ld posted, %ld waited, %ld left",
	      atomic_load(&g.doorbell_posts), atomic_load(&g.doorbell_waits),
	      left);
	free(g.doorbell);
	for (int i = 0; i < NR_ONCE; i++)
		CHECK(atomic_load(&g.once_runs[i]) <= 1, "once %d ran %d times",
		      i, atomic_load(&g.once_runs[i]));
	while (fiber_chan_tryrecv(g.pool, &tok) == 0)
		atomic_fetch_add(&g.pool_recv, 1);
	CHECK(atomic_load(&g.pool_sent) == atomic_load(&g.pool_recv),
	      "pool: %ld sent, %ld received", atomic_load(&g.pool_sent),
	      atomic_load(&g.pool_recv));
	fiber_chan_destroy(g.pool);
	CHECK(pair.passes[0] - pair.passes[1] == 0 ||
		      pair.passes[0] - pair.passes[1] == 1,
	      "cond: %ld and %ld passes", pair.passes[0], pair.passes[1]);
	fiber_barrier_destroy(&squad.b);
}

static void check_streams(struct stream *cs, struct stream *ps)
{
	for (int i = 0; i < NR_CHAN; i++) {
		CHECK(atomic_load(&cs[i].sent) == atomic_load(&cs[i].recv) &&
			      atomic_load(&cs[i].sum_sent) ==
				      atomic_load(&cs[i].sum_recv),
		      "chan %d: %ld sent, %ld received", i,
		      atomic_load(&cs[i].sent), atomic_load(&cs[i].recv));
		fiber_chan_destroy(cs[i].chan);
	}
	for (int i = 0; i < NR_PIPE; i++) {
		CHECK(atomic_load(&ps[i].sent) == atomic_load(&ps[i].recv),
		      "pipe %d: %ld bytes written, %ld read", i,
		      atomic_load(&ps[i].sent), atomic_load(&ps[i].recv));
		fiber_pipe_destroy(ps[i].pipe);
	}
}

/* Wait until the runtime counted as many exits as creates: detached
 * children are reaped a little after they signalled their end. */
static void check_counters(long long creates0, long long exits0)
{
	long long c = 0, e = 0;

	for (int i = 0; i < 5000; i++) {
		c = fiber_stats_counter("creates") - creates0;
		e = fiber_stats_counter("exits") - exits0;
		if (c == e && c == atomic_load(&g.created))
			return;
		usleep(1000);
	}
	die("counters: %lld creates, %lld exits, %ld created", c, e,
	    atomic_load(&g.created));
}

static int run_phase(int no, const char *topology, int workers, int nr_fibers,
		     double seconds)
{
	struct fiber_config c = { 0 };
	struct stream cs[NR_CHAN], ps[NR_PIPE];
	fiber_t *f = calloc((size_t)nr_fibers + 64, sizeof(*f));
	int nf = 0;
	long long creates0, exits0;
	struct timespec ts;

	CHECK(f, "out of memory");
	c.topology = topology;
	c.workers = (unsigned int)workers;
	CHECK(fiber_init(&c) == 0, "fiber_init(%s)", topology ? topology : "");
	g.nr_workers = fiber_nr_workers();
	g.nr_chaos = nr_fibers > 8 ? nr_fibers : 8;
	g.max_children = 2L * g.nr_chaos;
	atomic_store(&g.created, 0);
	atomic_store(&g.progress, 0);
	atomic_store(&g.live_children, 0);
	atomic_store(&g.stop, false);
	creates0 = fiber_stats_counter("creates");
	exits0 = fiber_stats_counter("exits");
	load_features();
	init_objects();

	chaos = calloc((size_t)g.nr_chaos, sizeof(*chaos));
	CHECK(chaos, "out of memory");
	for (int i = 0; i < g.nr_chaos; i++) {
		chaos[i].index = i;
		chaos[i].rng =
			g.seed * 1000003u + (uint64_t)no * 7919u + (uint64_t)i;
		f[nf++] = spawn(chaos_main, &chaos[i], "torture-chaos");
	}
	for (int i = 0; i < NR_CHAN; i++) {
		memset(&cs[i], 0, sizeof(cs[i]));
		cs[i].id = i;
		cs[i].seed = g.seed + (uint64_t)i;
		CHECK(fiber_chan_create(&cs[i].chan, sizeof(struct elem),
					(size_t)i * 4) == 0,
		      "chan");
		atomic_store(&cs[i].producers, 2);
		f[nf++] = spawn(chan_producer, &cs[i], "torture-send");
		f[nf++] = spawn(chan_producer, &cs[i], "torture-send");
		f[nf++] = spawn(chan_consumer, &cs[i], "torture-recv");
		f[nf++] = spawn(chan_consumer, &cs[i], "torture-recv");
	}
	for (int i = 0; i < NR_PIPE; i++) {
		memset(&ps[i], 0, sizeof(ps[i]));
		ps[i].id = i;
		ps[i].seed = g.seed ^ ((uint64_t)i << 32);
		CHECK(fiber_pipe_create(&ps[i].pipe, (size_t)(i + 1) * 1000) ==
			      0,
		      "pipe");
		f[nf++] = spawn(pipe_writer, &ps[i], "torture-write");
		f[nf++] = spawn(pipe_reader, &ps[i], "torture-read");
	}
	for (int i = 0; i < NR_SQUAD; i++)
		f[nf++] = spawn(squad_main, (void *)(uintptr_t)(g.seed + i),
				"torture-squad");
	f[nf++] = spawn(pair_main, (void *)0, "torture-pair");
	f[nf++] = spawn(pair_main, (void *)1, "torture-pair");

	ts.tv_sec = (time_t)seconds;
	ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);

	/* Stop.  A chaos fiber checks stop before each action and waits on
	 * its doorbell at most once per action, so one more post each lets
	 * every one of them finish. */
	atomic_store(&g.stop, true);
	for (int i = 0; i < g.nr_chaos; i++) {
		atomic_fetch_add(&g.doorbell_posts, 1);
		fiber_sem_post(&g.doorbell[i]);
	}
	for (int i = 0; i < nf; i++)
		CHECK(fiber_join(f[i], NULL) == 0, "join %d", i);
	while (atomic_load(&g.live_children) > 0)
		usleep(1000);
	check_counters(creates0, exits0);
	check_objects();
	check_streams(cs, ps);
	printf("# phase %d: %d workers, %ld fibers created, %lu steps, "
	       "%lld switches\n",
	       no, g.nr_workers, atomic_load(&g.created),
	       atomic_load(&g.progress), fiber_stats_counter("switches"));
	CHECK(fiber_shutdown() == 0, "shutdown");
	free(chaos);
	chaos = NULL;
	free(f);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "duration", required_argument, NULL, 'd' },
		{ "fibers", required_argument, NULL, 'f' },
		{ "seed", required_argument, NULL, 's' },
		{ "workers", required_argument, NULL, 'w' },
		{ "topology", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	const char *synthetic = "pack:2 numa:1 l3:2 core:4 pu:2";
	const char *topology = NULL;
	double duration = 5;
	int fibers = 32, workers = 0, o;
	pthread_t wd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	g.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	while ((o = getopt_long(argc, argv, "d:f:s:w:t:", opts, NULL)) != -1) {
		switch (o) {
		case 'd':
			duration = strtod(optarg, NULL);
			break;
		case 'f':
			fibers = atoi(optarg);
			break;
		case 's':
			g.seed = strtoull(optarg, NULL, 0);
			break;
		case 'w':
			workers = atoi(optarg);
			break;
		case 't':
			topology = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: %s [--duration S] [--fibers N] "
				"[--seed X] [--workers W] [--topology STR]\n",
				argv[0]);
			return 2;
		}
	}
	if (duration <= 0 || fibers <= 0 || fibers > 100000)
		return 2;
	printf("# torture: seed %#llx, duration %g s, %d fibers (replay: "
	       "--seed %#llx)\n",
	       (unsigned long long)g.seed, duration, fibers,
	       (unsigned long long)g.seed);
	atomic_store(&watching, true);
	pthread_create(&wd, NULL, watchdog, NULL);
	if (topology) {
		printf("1..1\n");
		run_phase(0, topology, workers, fibers, duration);
		printf("ok 1 - torture on \"%s\"\n", topology);
	} else {
		printf("1..2\n");
		run_phase(0, NULL, workers, fibers, duration / 2);
		printf("ok 1 - torture on the machine\n");
		run_phase(1, synthetic, workers, fibers, duration / 2);
		printf("ok 2 - torture on \"%s\"\n", synthetic);
	}
	atomic_store(&watching, false);
	pthread_join(wd, NULL);
	return 0;
}
