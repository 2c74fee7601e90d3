/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pipe-pingpong - the cost of a blocking wakeup round trip, fibers against
 * kernel threads, in the spirit of `perf bench sched pipe`.
 *
 * Each pair has a "ping" and a "pong" side joined by two pipes.  Ping writes
 * a token (a 4-byte unsigned int) into the first pipe and blocks reading the
 * second; pong reads the token, checks that it is the one it expects, and
 * writes it back plus one.  One such exchange is a round trip: two writes,
 * two reads, two blocking waits and two wakeups.  In fiber mode the sides are
 * fibers and the pipes are fiber_pipe objects; in threads mode they are
 * pthreads blocking on OS pipes.
 *
 * Every ping side first does a warm-up of 1% of its round trips, then waits
 * at a start gate (a barrier among the ping sides) so that no pair is timed
 * while others are still being created.  Each ping side reads the monotonic
 * clock after the gate and again after its last round trip; the elapsed time
 * of the run is the latest end minus the earliest start.  Pairs run at the
 * same time, so
 *
 *	ns_per_roundtrip   = elapsed_ns / loops
 *	roundtrips_per_sec = pairs * loops / elapsed_s
 *
 * With one pair they are each other's inverse.  With --duration S instead of
 * --loops, each ping side bounces until S seconds have passed since the gate
 * (it reads the clock every DEADLINE_EVERY round trips), the pairs may end
 * with different counts, and loops above stands for their mean.  At the end
 * ping closes its write end; pong sees end of file and reports how many
 * tokens it echoed, which must be the warm-up plus the measured loops.
 *
 * --latency times every measured round trip on its own (two clock reads,
 * ~20-50 ns, added to each round trip) into a per-pair histogram, merged at
 * the end into the percentiles p50, p90, p99 and p99.9.
 *
 * Placement: "same" puts both sides of pair i on worker i % N, "split" puts
 * ping on worker i % N and pong on worker (i + 1) % N.  The threads baseline
 * pins its threads the same way onto the first N CPUs the process may use,
 * so each row compares like with like.
 *
 * --spin adds the floor of a cross-core wakeup: two kernel threads pinned
 * to the first two CPUs the process may use, each pair's token passed
 * through one word per direction that the receiver spins on (no system
 * call, no sleep).  It runs --loops round trips after the runtime has
 * stopped, and a last line gives fiber / spin, so the ratio of a split
 * fiber ping-pong to the hardware's round trip comes from one run.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* CPU_SET, pthread_attr_setaffinity_np */
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "fiber.h"

#define PROG "pipe-pingpong"
/* Inlined whatever the compiler's size limits: see ping_side(). */
#define ALWAYS_INLINE inline __attribute__((always_inline))
/* Round trips by default: over the 0.2 s below which a run warns that it
 * means little, also at the 64 ns a same-worker round trip takes on a
 * fast host (0.38 s; 3,000,000 fell short there). */
#define LOOPS_DEFAULT 6000000UL
/* A kernel round trip costs ~6-100 us here: cap the baseline's default. */
#define THREAD_LOOPS_CAP 50000UL
#define PIPE_CAPACITY 4096
#define PAIRS_MAX 100000UL
#define LOOPS_MAX 1000000000000UL
#define DURATION_MAX 86400UL
/* Warm-up round trips per pair with --duration (with --loops: 1%). */
#define WARMUP_DURATION 1000UL
/* With --duration, read the clock every this many round trips: ~0.1-5 ms. */
#define DEADLINE_EVERY 64UL
/* Returned by the receive functions at end of file (not an errno). */
#define END_OF_STREAM (-1)

enum placement { PLACE_AUTO, PLACE_SAME, PLACE_SPLIT, PLACE_FREE };
enum dir { TO_PONG, TO_PING, NR_DIRS };

struct options {
	unsigned long pairs;
	unsigned long loops;
	unsigned long thread_loops; /* 0: loops if given, else the cap */
	uint64_t duration_ns;	    /* 0: run --loops round trips */
	unsigned long duration_s;
	int placement; /* enum placement */
	bool os_pipes; /* fibers over OS pipes through the poller */
	bool spin;     /* the spinning two-thread floor */
	bool latency;
	bool loops_set; /* --loops given */
	struct bench_common c;
};

struct pair;

/* How the two sides of a pair talk: fiber pipes or OS pipes. */
struct transport {
	const char *mode;
	int (*send)(struct pair *p, enum dir d, uint32_t token);
	/* 0, END_OF_STREAM or an errno value. */
	int (*recv)(struct pair *p, enum dir d, uint32_t *token);
	void (*close_send)(struct pair *p, enum dir d);
	void (*gate)(void);
};

/*
 * One pair.  The ping side writes start_ns, end_ns and ping_err, the pong
 * side writes echoed and pong_err; main reads them after joining both.
 */
struct pair {
	fiber_pipe_t *pipe[NR_DIRS];
	int fd[NR_DIRS][2]; /* [dir][0] read end, [dir][1] write end */
	/* --spin: 0 empty, SPIN_CLOSED, else the token + 1; own lines. */
	_Alignas(64) _Atomic uint64_t box[NR_DIRS][8];
	unsigned long warmup;
	unsigned long loops;	 /* ULONG_MAX with a duration */
	uint64_t duration_ns;	 /* 0: run @loops round trips */
	struct bench_hist *hist; /* with --latency; ping side only */
	unsigned long done;	 /* measured round trips */
	uint64_t start_ns;
	uint64_t end_ns;
	unsigned long echoed;
	int ping_err;
	int pong_err;
};

struct result {
	const char *mode;
	unsigned long total; /* round trips of every pair */
	uint64_t elapsed_ns;
	struct bench_hist *hist; /* NULL without --latency */
};

const char bench_name[] = PROG;

static fiber_barrier_t fiber_gate;
static pthread_barrier_t thread_gate;

/* Fiber transport. */

static ALWAYS_INLINE int fpipe_send(struct pair *p, enum dir d, uint32_t token)
{
	size_t done = 0;
	int err;

	err = fiber_pipe_write(p->pipe[d], &token, sizeof(token), &done);
	if (!err && done != sizeof(token))
		err = EIO;
	return err;
}

/* The rest of a receive that the first read did not finish: an error,
 * end of file, or a token that came in pieces. */
static __attribute__((noinline)) int fpipe_recv_rest(struct pair *p, enum dir d,
						     uint32_t *token, int err,
						     size_t got)
{
	unsigned char *buf = (unsigned char *)token;
	size_t done;

	for (;;) {
		if (err)
			return err;
		if (got == sizeof(*token))
			return 0;
		done = 0;
		err = fiber_pipe_read(p->pipe[d], buf + got,
				      sizeof(*token) - got, &done);
		if (!err && !done)
			return got ? EPROTO : END_OF_STREAM;
		got += done;
	}
}

/* One read, which takes the whole token in a ping-pong; the rest out of
 * line, so that the measured loop holds only that call. */
static ALWAYS_INLINE int fpipe_recv(struct pair *p, enum dir d, uint32_t *token)
{
	size_t done = 0;
	int err;

	err = fiber_pipe_read(p->pipe[d], token, sizeof(*token), &done);
	if (__builtin_expect(!err && done == sizeof(*token), 1))
		return 0;
	if (!err && !done)
		return END_OF_STREAM;
	return fpipe_recv_rest(p, d, token, err, done);
}

static void fiber_close_send(struct pair *p, enum dir d)
{
	fiber_pipe_close_write(p->pipe[d]);
}

static void fiber_wait_gate(void)
{
	fiber_barrier_wait(&fiber_gate);
}

static const struct transport fiber_transport = {
	.mode = "fiber",
	.send = fpipe_send,
	.recv = fpipe_recv,
	.close_send = fiber_close_send,
	.gate = fiber_wait_gate,
};

/* Thread transport: blocking read(2) and write(2) on OS pipes. */

static int os_send(struct pair *p, enum dir d, uint32_t token)
{
	ssize_t n;

	do
		n = write(p->fd[d][1], &token, sizeof(token));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno;
	return n == sizeof(token) ? 0 : EIO;
}

static int os_recv(struct pair *p, enum dir d, uint32_t *token)
{
	unsigned char *buf = (unsigned char *)token;
	size_t got = 0;
	ssize_t n;

	while (got < sizeof(*token)) {
		n = read(p->fd[d][0], buf + got, sizeof(*token) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (!n)
			return got ? EPROTO : END_OF_STREAM;
		got += n;
	}
	return 0;
}

static void os_close_send(struct pair *p, enum dir d)
{
	close(p->fd[d][1]);
	p->fd[d][1] = -1;
}

static void os_wait_gate(void)
{
	pthread_barrier_wait(&thread_gate);
}

static const struct transport thread_transport = {
	.mode = "threads",
	.send = os_send,
	.recv = os_recv,
	.close_send = os_close_send,
	.gate = os_wait_gate,
};

/* Spin transport: one word per direction, busy-waited on. */

#define SPIN_CLOSED UINT64_MAX

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("pause");
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

static int spin_send(struct pair *p, enum dir d, uint32_t token)
{
	_Atomic uint64_t *b = &p->box[d][0];

	while (atomic_load_explicit(b, memory_order_acquire))
		cpu_relax(); /* never in a ping-pong: the reply emptied it */
	atomic_store_explicit(b, (uint64_t)token + 1, memory_order_release);
	return 0;
}

static int spin_recv(struct pair *p, enum dir d, uint32_t *token)
{
	_Atomic uint64_t *b = &p->box[d][0];
	uint64_t v;

	while (!(v = atomic_load_explicit(b, memory_order_acquire)))
		cpu_relax();
	if (v == SPIN_CLOSED)
		return END_OF_STREAM;
	atomic_store_explicit(b, 0, memory_order_relaxed);
	*token = (uint32_t)(v - 1);
	return 0;
}

static void spin_close_send(struct pair *p, enum dir d)
{
	_Atomic uint64_t *b = &p->box[d][0];

	while (atomic_load_explicit(b, memory_order_acquire))
		cpu_relax(); /* the last token is taken first */
	atomic_store_explicit(b, SPIN_CLOSED, memory_order_release);
}

static const struct transport spin_transport = {
	.mode = "spin",
	.send = spin_send,
	.recv = spin_recv,
	.close_send = spin_close_send,
	.gate = os_wait_gate,
};

/* OS-pipe transport for fibers: fiber_read(2)/fiber_write(2) on
 * non-blocking OS pipes, parking on the runtime's epoll poller. */

static int ospipe_send(struct pair *p, enum dir d, uint32_t token)
{
	ssize_t n = fiber_write(p->fd[d][1], &token, sizeof(token));

	if (n < 0)
		return errno;
	return n == sizeof(token) ? 0 : EIO;
}

static int ospipe_recv(struct pair *p, enum dir d, uint32_t *token)
{
	unsigned char *buf = (unsigned char *)token;
	size_t got = 0;
	ssize_t n;

	while (got < sizeof(*token)) {
		n = fiber_read(p->fd[d][0], buf + got, sizeof(*token) - got);
		if (n < 0)
			return errno;
		if (!n)
			return got ? EPROTO : END_OF_STREAM;
		got += (size_t)n;
	}
	return 0;
}

static const struct transport ospipe_transport = {
	.mode = "os-pipes",
	.send = ospipe_send,
	.recv = ospipe_recv,
	.close_send = os_close_send,
	.gate = fiber_wait_gate,
};

/*
 * The two sides, common to both transports.  They are inlined into one entry
 * point per transport so that the calls through @tp become direct ones, and
 * they keep their counters in locals: the pair's shared fields are written
 * once, at the end, so that the two sides do not bounce a cache line.
 */

/* One round trip: send @token, expect @token + 1 back.  0 or an error. */
static ALWAYS_INLINE int bounce(const struct transport *tp, struct pair *p,
				uint32_t token)
{
	uint32_t reply;
	int err;

	err = tp->send(p, TO_PONG, token);
	if (err)
		return err;
	err = tp->recv(p, TO_PING, &reply);
	if (err == END_OF_STREAM)
		return EPIPE;
	if (!err && reply != token + 1)
		err = EPROTO;
	return err;
}

/*
 * The measured round trips, starting with @token: @p->loops of them, or
 * until the clock passes @deadline (0: none).  Return: how many ran.
 */
static ALWAYS_INLINE unsigned long measure(const struct transport *tp,
					   struct pair *p, uint32_t token,
					   uint64_t deadline, int *errp)
{
	unsigned long i = 0, loops = p->loops;
	uint64_t t0, t1;
	int err = 0;

	if (p->hist) {
		while (!err && i < loops) {
			t0 = bench_now_ns();
			err = bounce(tp, p, token++);
			t1 = bench_now_ns();
			bench_hist_add(p->hist, t1 - t0);
			i++;
			if (deadline && t1 >= deadline)
				break;
		}
	} else if (deadline) {
		while (!err && i < loops) {
			err = bounce(tp, p, token++);
			i++;
			if (!(i % DEADLINE_EVERY) && bench_now_ns() >= deadline)
				break;
		}
	} else {
		/* The plain loop, as lean as the round trip allows. */
		while (!err && i < loops) {
			err = bounce(tp, p, token++);
			i++;
		}
	}
	*errp = err;
	return i;
}

static ALWAYS_INLINE void ping_side(const struct transport *tp, struct pair *p)
{
	uint64_t start, end, deadline = 0;
	uint32_t token = 0;
	unsigned long i;
	int err = 0;

	for (i = 0; i < p->warmup && !err; i++)
		err = bounce(tp, p, token++);
	/* Pass the gate even after an error: the others wait for us. */
	tp->gate();
	start = bench_now_ns();
	if (p->duration_ns)
		deadline = start + p->duration_ns;
	if (!err)
		p->done = measure(tp, p, token, deadline, &err);
	end = bench_now_ns();
	p->start_ns = start;
	p->end_ns = end;
	p->ping_err = err;
	/* Pong sees end of file and stops, also after an error. */
	tp->close_send(p, TO_PONG);
}

static ALWAYS_INLINE void pong_side(const struct transport *tp, struct pair *p)
{
	unsigned long echoed = 0;
	uint32_t token;
	int err;

	for (;;) {
		err = tp->recv(p, TO_PONG, &token);
		if (err == END_OF_STREAM) {
			err = 0;
			break;
		}
		if (!err && token != (uint32_t)echoed)
			err = EPROTO;
		if (!err)
			err = tp->send(p, TO_PING, token + 1);
		if (err)
			break;
		echoed++;
	}
	p->echoed = echoed;
	p->pong_err = err;
	/* On an error this wakes ping, which then gets end of file. */
	tp->close_send(p, TO_PING);
}

static void *fiber_ping(void *arg)
{
	ping_side(&fiber_transport, arg);
	return NULL;
}

static void *fiber_pong(void *arg)
{
	pong_side(&fiber_transport, arg);
	return NULL;
}

static void *thread_ping(void *arg)
{
	ping_side(&thread_transport, arg);
	return NULL;
}

static void *thread_pong(void *arg)
{
	pong_side(&thread_transport, arg);
	return NULL;
}

static void *spin_ping(void *arg)
{
	ping_side(&spin_transport, arg);
	return NULL;
}

static void *spin_pong(void *arg)
{
	pong_side(&spin_transport, arg);
	return NULL;
}

static void *ospipe_ping(void *arg)
{
	ping_side(&ospipe_transport, arg);
	return NULL;
}

static void *ospipe_pong(void *arg)
{
	pong_side(&ospipe_transport, arg);
	return NULL;
}

/* Placement of the two sides of pair @i: worker ids in 0..workers-1, or
 * -1 (free: no affinity, the scheduler places them). */
static int ping_worker(const struct options *o, unsigned long i)
{
	if (o->placement == PLACE_FREE)
		return -1;
	return (int)(i % o->c.workers);
}

static int pong_worker(const struct options *o, unsigned long i)
{
	unsigned long shift = o->placement == PLACE_SPLIT ? 1 : 0;

	if (o->placement == PLACE_FREE)
		return -1;
	return (int)((i + shift) % o->c.workers);
}

static struct pair *pairs_alloc(const struct options *o, unsigned long loops)
{
	struct pair *pairs;
	unsigned long i;

	pairs = calloc(o->pairs, sizeof(*pairs));
	if (!pairs)
		bench_die("out of memory for %lu pairs", o->pairs);
	for (i = 0; i < o->pairs; i++) {
		pairs[i].loops = o->duration_ns ? ULONG_MAX : loops;
		pairs[i].duration_ns = o->duration_ns;
		if (o->duration_ns)
			pairs[i].warmup = WARMUP_DURATION;
		else
			pairs[i].warmup = loops / 100 ? loops / 100 : 1;
		if (o->latency)
			pairs[i].hist = bench_hist_alloc();
	}
	return pairs;
}

/*
 * Check every pair and fill @r: the round trips of every pair, their
 * latency histograms merged, and the elapsed time of the run, the latest
 * end minus the earliest start.  Frees the pairs' histograms.
 */
static void pairs_check(struct pair *pairs, unsigned long nr, const char *mode,
			struct result *r)
{
	uint64_t start = UINT64_MAX, end = 0;
	const struct pair *p;
	unsigned long i;

	for (i = 0; i < nr; i++) {
		p = &pairs[i];
		if (p->ping_err > 0)
			bench_die("%s pair %lu: ping side: %s", mode, i,
				  strerror(p->ping_err));
		if (p->pong_err > 0)
			bench_die("%s pair %lu: pong side: %s", mode, i,
				  strerror(p->pong_err));
		if (p->echoed != p->warmup + p->done)
			bench_die("%s pair %lu: pong echoed %lu, expected %lu",
				  mode, i, p->echoed, p->warmup + p->done);
		start = p->start_ns < start ? p->start_ns : start;
		end = p->end_ns > end ? p->end_ns : end;
		r->total += p->done;
	}
	r->mode = mode;
	r->elapsed_ns = end - start;
	if (!pairs[0].hist)
		return;
	r->hist = pairs[0].hist;
	for (i = 1; i < nr; i++) {
		bench_hist_merge(r->hist, pairs[i].hist);
		free(pairs[i].hist);
	}
	if (r->hist->count != r->total)
		bench_die("%s: %llu round trips timed, %lu run", mode,
			  (unsigned long long)r->hist->count, r->total);
}

/* Fiber mode. */

static fiber_t fiber_start(int worker, void *(*fn)(void *), void *arg)
{
	fiber_attr_t attr;
	cpu_set_t set;
	fiber_t f;
	int err;

	fiber_attr_init(&attr);
	if (worker >= 0) {
		CPU_ZERO(&set);
		CPU_SET(worker, &set);
		fiber_attr_setaffinity(&attr, sizeof(set), &set);
	}
	err = fiber_create(&f, &attr, fn, arg);
	fiber_attr_destroy(&attr);
	if (err)
		bench_die("fiber_create on worker %d: %s", worker,
			  strerror(err));
	return f;
}

static void fiber_join_all(fiber_t *f, unsigned long nr)
{
	unsigned long i;
	int err;

	for (i = 0; i < nr; i++) {
		err = fiber_join(f[i], NULL);
		if (err)
			bench_die("fiber_join: %s", strerror(err));
	}
}

static void run_fibers(const struct options *o, struct result *r)
{
	struct pair *pairs = pairs_alloc(o, o->loops);
	fiber_t *f = calloc(2 * o->pairs, sizeof(*f));
	unsigned long i;
	int d, err;

	if (!f)
		bench_die("out of memory for %lu fibers", 2 * o->pairs);
	fiber_barrier_init(&fiber_gate, o->pairs);
	for (i = 0; i < o->pairs; i++) {
		for (d = 0; d < NR_DIRS; d++) {
			err = fiber_pipe_create(&pairs[i].pipe[d],
						PIPE_CAPACITY);
			if (err)
				bench_die("fiber_pipe_create: %s",
					  strerror(err));
		}
	}
	/* Every pong first, so that the last ping through the gate is also
	 * the last fiber created. */
	for (i = 0; i < o->pairs; i++)
		f[o->pairs + i] =
			fiber_start(pong_worker(o, i), fiber_pong, &pairs[i]);
	for (i = 0; i < o->pairs; i++)
		f[i] = fiber_start(ping_worker(o, i), fiber_ping, &pairs[i]);
	fiber_join_all(f, 2 * o->pairs);

	pairs_check(pairs, o->pairs, "fiber", r);
	for (i = 0; i < o->pairs; i++)
		for (d = 0; d < NR_DIRS; d++)
			fiber_pipe_destroy(pairs[i].pipe[d]);
	fiber_barrier_destroy(&fiber_gate);
	free(f);
	free(pairs);
}

/* OS-pipes mode: fibers, but the pipes are the kernel's (non-blocking). */
static void run_os_pipes(const struct options *o, struct result *r)
{
	struct pair *pairs = pairs_alloc(o, o->loops);
	fiber_t *f = calloc(2 * o->pairs, sizeof(*f));
	unsigned long i;
	int d;

	if (!f)
		bench_die("out of memory for %lu fibers", 2 * o->pairs);
	fiber_barrier_init(&fiber_gate, o->pairs);
	for (i = 0; i < o->pairs; i++)
		for (d = 0; d < NR_DIRS; d++)
			if (pipe2(pairs[i].fd[d], O_NONBLOCK | O_CLOEXEC))
				bench_die("pipe2: %s", strerror(errno));
	for (i = 0; i < o->pairs; i++)
		f[o->pairs + i] =
			fiber_start(pong_worker(o, i), ospipe_pong, &pairs[i]);
	for (i = 0; i < o->pairs; i++)
		f[i] = fiber_start(ping_worker(o, i), ospipe_ping, &pairs[i]);
	fiber_join_all(f, 2 * o->pairs);

	pairs_check(pairs, o->pairs, "os-pipes", r);
	for (i = 0; i < o->pairs; i++)
		for (d = 0; d < NR_DIRS; d++)
			close(pairs[i].fd[d][0]);
	fiber_barrier_destroy(&fiber_gate);
	free(f);
	free(pairs);
}

/* Threads mode. */

static pthread_t thread_start(int worker, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t t;
	cpu_set_t set;
	int err;

	pthread_attr_init(&attr);
	if (worker >= 0) {
		CPU_ZERO(&set);
		CPU_SET(bench_worker_cpu((unsigned int)worker), &set);
		pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	err = pthread_create(&t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	if (err)
		bench_die("pthread_create: %s", strerror(err));
	return t;
}

static unsigned long thread_loops(const struct options *o)
{
	if (o->thread_loops)
		return o->thread_loops;
	if (o->loops_set)
		return o->loops;
	return o->loops < THREAD_LOOPS_CAP ? o->loops : THREAD_LOOPS_CAP;
}

static void run_threads(const struct options *o, struct result *r)
{
	unsigned long i, loops = thread_loops(o);
	struct pair *pairs = pairs_alloc(o, loops);
	pthread_t *t = calloc(2 * o->pairs, sizeof(*t));
	int d;

	if (!t)
		bench_die("out of memory for %lu threads", 2 * o->pairs);
	pthread_barrier_init(&thread_gate, NULL, o->pairs);
	for (i = 0; i < o->pairs; i++) {
		for (d = 0; d < NR_DIRS; d++) {
			if (pipe(pairs[i].fd[d]))
				bench_die("pipe: %s", strerror(errno));
		}
	}
	for (i = 0; i < o->pairs; i++)
		t[o->pairs + i] =
			thread_start(pong_worker(o, i), thread_pong, &pairs[i]);
	for (i = 0; i < o->pairs; i++)
		t[i] = thread_start(ping_worker(o, i), thread_ping, &pairs[i]);
	for (i = 0; i < 2 * o->pairs; i++)
		pthread_join(t[i], NULL);

	pairs_check(pairs, o->pairs, "threads", r);
	for (i = 0; i < o->pairs; i++)
		for (d = 0; d < NR_DIRS; d++)
			close(pairs[i].fd[d][0]);
	pthread_barrier_destroy(&thread_gate);
	free(t);
	free(pairs);
}

/* Spin mode: ping on the first CPU, pong on the second, --loops round
 * trips per pair (pairs share the two CPUs). */
static void run_spin(const struct options *o, struct result *r)
{
	struct pair *pairs = pairs_alloc(o, o->loops);
	pthread_t *t = calloc(2 * o->pairs, sizeof(*t));
	unsigned long i;

	if (!t)
		bench_die("out of memory for %lu threads", 2 * o->pairs);
	pthread_barrier_init(&thread_gate, NULL, o->pairs);
	for (i = 0; i < o->pairs; i++)
		t[o->pairs + i] = thread_start(1, spin_pong, &pairs[i]);
	for (i = 0; i < o->pairs; i++)
		t[i] = thread_start(0, spin_ping, &pairs[i]);
	for (i = 0; i < 2 * o->pairs; i++)
		pthread_join(t[i], NULL);
	pairs_check(pairs, o->pairs, "spin", r);
	pthread_barrier_destroy(&thread_gate);
	free(t);
	free(pairs);
}

/* Output. */

/* The mean round trips per pair (exactly --loops without --duration). */
static double loops_per_pair(const struct options *o, const struct result *r)
{
	return (double)r->total / o->pairs;
}

/* ns_per_roundtrip = elapsed_ns / (total / pairs) */
static double ns_per_roundtrip(const struct options *o, const struct result *r)
{
	return (double)r->elapsed_ns / loops_per_pair(o, r);
}

/* roundtrips_per_sec = total / elapsed_s */
static double roundtrips_per_sec(const struct result *r)
{
	return (double)r->total * 1e9 / r->elapsed_ns;
}

static const char *placement_name(const struct options *o)
{
	static const char *const names[] = { "auto", "same", "split", "free" };

	return names[o->placement];
}

static const double pcts[] = { 50, 90, 99, 99.9 };
static const char *const pct_names[] = { "p50_ns", "p90_ns", "p99_ns",
					 "p99.9_ns" };
#define NR_PCTS (sizeof(pcts) / sizeof(pcts[0]))

static void print_json(const struct options *o, const struct result *r)
{
	unsigned int i;

	bench_json_open("pipe-pingpong", r->mode);
	bench_json_uint("workers", o->c.workers);
	bench_json_uint("pairs", o->pairs);
	bench_json_str("placement", placement_name(o));
	if (o->duration_ns)
		bench_json_double("duration_s", o->duration_ns / 1e9);
	else
		bench_json_uint("loops", r->total / o->pairs);
	bench_json_metrics();
	bench_json_uint("roundtrips", r->total);
	bench_json_double("elapsed_s", r->elapsed_ns / 1e9);
	bench_json_double("ns_per_roundtrip", ns_per_roundtrip(o, r));
	bench_json_double("roundtrips_per_sec", roundtrips_per_sec(r));
	for (i = 0; r->hist && i < NR_PCTS; i++)
		bench_json_uint(pct_names[i],
				bench_hist_percentile(r->hist, pcts[i]));
	if (r->hist) {
		bench_json_uint("min_ns", r->hist->min);
		bench_json_uint("max_ns", r->hist->max);
	}
	bench_json_close();
}

/*
 * The output of `perf bench sched pipe`: loops is one pair's round trips
 * (a round trip is perf's "pipe operation"), usecs/op the time per round
 * trip of a pair, ops/sec the round trips of every pair per second; with
 * one pair, the two are each other's inverse, as in perf.
 */
static void print_compat(const struct options *o, const struct result *r)
{
	const char *between = !strcmp(r->mode, "threads") ? "threads" :
							    "fibers";

	printf("# Running 'sched/pipe' benchmark:\n");
	printf("# Executed %.0f pipe operations between two %s",
	       loops_per_pair(o, r), between);
	if (o->pairs > 1)
		printf(", in each of %lu pairs at once", o->pairs);
	if (!strcmp(r->mode, "os-pipes"))
		printf(" over OS pipes");
	printf("\n\n");
	printf(" %14s: %llu.%03llu [sec]\n\n", "Total time",
	       (unsigned long long)(r->elapsed_ns / 1000000000u),
	       (unsigned long long)(r->elapsed_ns % 1000000000u / 1000000u));
	printf(" %14lf usecs/op\n", ns_per_roundtrip(o, r) / 1e3);
	printf(" %14.0f ops/sec\n", roundtrips_per_sec(r));
}

static void print_latency(const struct result *res, int nr)
{
	unsigned int j;
	int i;

	printf("\nround-trip latency (ns, each round trip timed)\n");
	printf("%-8s %10s %10s", "mode", "samples", "min");
	for (j = 0; j < NR_PCTS; j++)
		printf(" %10.*s", (int)strlen(pct_names[j]) - 3, pct_names[j]);
	printf(" %10s\n", "max");
	for (i = 0; i < nr; i++) {
		printf("%-8s %10llu %10llu", res[i].mode,
		       (unsigned long long)res[i].hist->count,
		       (unsigned long long)res[i].hist->min);
		for (j = 0; j < NR_PCTS; j++)
			printf(" %10llu",
			       (unsigned long long)bench_hist_percentile(
				       res[i].hist, pcts[j]));
		printf(" %10llu\n", (unsigned long long)res[i].hist->max);
	}
}

static void print_table(const struct options *o, const struct result *res,
			int nr, const char *features)
{
	bool capped = false;
	int spin;
	int i;

	printf("pipe-pingpong: 4-byte token, placement %s, features: %s\n",
	       placement_name(o), features);
	printf("%-8s %7s %6s %10s %14s %14s\n", "mode", "workers", "pairs",
	       "loops", "ns/roundtrip", "roundtrips/s");
	for (i = 0; i < nr; i++) {
		bool mark = !strcmp(res[i].mode, "threads") &&
			    !o->thread_loops && !o->loops_set &&
			    !o->duration_ns &&
			    res[i].total < o->loops * o->pairs;

		capped |= mark;
		printf("%-8s %7u %6lu %10.0f%c %13.1f %14.0f\n", res[i].mode,
		       o->c.workers, o->pairs, loops_per_pair(o, &res[i]),
		       mark ? '*' : ' ', ns_per_roundtrip(o, &res[i]),
		       roundtrips_per_sec(&res[i]));
	}
	if (capped)
		printf("* without -l/--loops, threads run %lu round trips (a "
		       "kernel round trip costs ~6-100 us); see --thread-loops\n",
		       THREAD_LOOPS_CAP);
	spin = nr >= 2 && !strcmp(res[nr - 1].mode, "spin");
	if (nr - spin == 2)
		printf("ratio %s/%s: %.2f\n", res[1].mode, res[0].mode,
		       ns_per_roundtrip(o, &res[1]) /
			       ns_per_roundtrip(o, &res[0]));
	if (spin)
		for (i = 0; i < nr - 1; i++)
			printf("ratio %s/spin: %.2f\n", res[i].mode,
			       ns_per_roundtrip(o, &res[i]) /
				       ns_per_roundtrip(o, &res[nr - 1]));
	if (o->latency)
		print_latency(res, nr);
}

/* Command line. */

static const char intro_text[] =
	"Pairs of fibers bounce a 4-byte token through two pipes; the same\n"
	"is measured with two kernel threads per pair over OS pipes, as\n"
	"`perf bench sched pipe`, whose short options these are.\n";

static const char outro_text[] =
	"Each pair warms up with 1% of its round trips, then all start\n"
	"together; elapsed = last pair's end - first pair's start, and\n"
	"  ns_per_roundtrip   = elapsed_ns / loops\n"
	"  roundtrips_per_sec = pairs * loops / elapsed_s\n"
	"(with --duration, loops is the mean over the pairs).\n"
	"Without --fibers or --threads both run, and a last line gives the\n"
	"ratio of their ns_per_roundtrip (threads / fiber).  Threads are\n"
	"pinned the way the fibers' workers are, onto the first N CPUs the\n"
	"process may use (with --placement free, not at all).\n";

static const char *const placement_names[] = { "auto", "same", "split", "free",
					       NULL };

static void parse_args(int argc, char **argv, struct options *o)
{
	const struct bench_opt opts[] = {
		BENCH_ULONG(0, "pairs", "P", &o->pairs, 1, PAIRS_MAX,
			    "pairs bouncing at the same time"),
		BENCH_ULONG_SEEN('l', "loops", "L", &o->loops, 1, LOOPS_MAX,
				 "round trips per pair", &o->loops_set),
		BENCH_ULONG(0, "duration", "S", &o->duration_s, 1, DURATION_MAX,
			    "instead of --loops: bounce for S seconds\n"
			    "(whole number), in each mode"),
		BENCH_ULONG(0, "thread-loops", "T", &o->thread_loops, 1,
			    LOOPS_MAX,
			    "round trips per pair of the threads baseline\n"
			    "(default: L when -l/--loops is given, else\n"
			    "50000: a kernel round trip costs ~6-100 us)"),
		BENCH_CHOICE(0, "placement", "same|split|free", &o->placement,
			     placement_names,
			     "same: both sides of pair i on worker i % N;\n"
			     "split: ping on i % N, pong on (i + 1) % N;\n"
			     "free: no affinity, the scheduler places\n"
			     "them (threads: not pinned);\n"
			     "auto: same with 1 worker, else split"),
		BENCH_OPTS_MODES(&o->c, 'T'),
		BENCH_FLAG(0, "os-pipes", &o->os_pipes,
			   "run fibers over OS pipes (fiber_read and\n"
			   "fiber_write through the epoll poller);\n"
			   "combine with the others"),
		BENCH_FLAG(0, "spin", &o->spin,
			   "also run the floor: two threads on two CPUs\n"
			   "spinning on one word per direction; a last\n"
			   "line gives each mode / spin"),
		BENCH_FLAG(0, "latency", &o->latency,
			   "time every round trip; print percentiles in\n"
			   "ns (adds two clock reads to each)"),
		BENCH_OPTS_RUNTIME(&o->c),
		BENCH_REFUSED('G', "cgroups", "SEND,RECV",
			      "fibers are not kernel tasks"),
	};

	*o = (struct options){ .pairs = 1,
			       .loops = LOOPS_DEFAULT,
			       .c.workers = 1 };
	bench_parse(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
		    intro_text, outro_text);
	bench_common_finish(&o->c, o->os_pipes);
	o->duration_ns = o->duration_s * 1000000000ULL;
	if (o->duration_ns && (o->loops_set || o->thread_loops)) {
		fprintf(stderr, PROG ": --duration replaces --loops and "
				     "--thread-loops: give one of them\n");
		exit(2);
	}
	if (o->placement == PLACE_AUTO)
		o->placement = o->c.workers > 1 ? PLACE_SPLIT : PLACE_SAME;
	if (o->spin && bench_nr_cpus() < 2) {
		fprintf(stderr, PROG ": --spin needs two CPUs\n");
		exit(2);
	}
	if (o->placement == PLACE_SPLIT && o->c.workers < 2)
		bench_bad_arg("--placement", "split",
			      "'same' with --workers 1");
}

int main(int argc, char **argv)
{
	struct result res[4] = { { 0 } };
	struct options o;
	char *features;
	int i, nr = 0, err;

	parse_args(argc, argv, &o);
	features = bench_start_runtime(o.c.workers, o.c.features);
	if (o.c.fibers)
		run_fibers(&o, &res[nr++]);
	if (o.os_pipes)
		run_os_pipes(&o, &res[nr++]);
	/* Stop the workers first: they must not share the CPUs with the
	 * baseline. */
	err = fiber_shutdown();
	if (err)
		bench_die("fiber_shutdown: %s", strerror(err));
	if (o.c.threads)
		run_threads(&o, &res[nr++]);
	if (o.spin)
		run_spin(&o, &res[nr++]);

	for (i = 0; i < nr; i++) {
		bench_check_duration(res[i].mode, res[i].elapsed_ns,
				     "-l/--loops or --duration");
		if (res[i].hist)
			bench_check_tail(res[i].mode, res[i].hist->count, 99.9);
	}
	bench_context_finish();
	if (o.c.format == BENCH_FORMAT_JSON) {
		for (i = 0; i < nr; i++)
			print_json(&o, &res[i]);
	} else if (o.c.format == BENCH_FORMAT_COMPAT) {
		for (i = 0; i < nr; i++)
			print_compat(&o, &res[i]);
	} else {
		print_table(&o, res, nr, features);
		bench_context_line();
	}
	for (i = 0; i < nr; i++)
		free(res[i].hist);
	free(features);
	return 0;
}
