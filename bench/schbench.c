/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * schbench - wakeup latency of worker fibers woken by message fibers, in the
 * spirit of `schbench -m M -t T`, against the same with kernel threads.
 *
 * There are M message fibers, each with T worker fibers of its own.  A
 * message fiber repeats, until --runtime seconds have passed: for each of
 * its workers, stamp the clock into the worker and wake it; then wait until
 * all T have reported back.  A woken worker reads the clock (the difference
 * from its stamp is one wakeup latency), serves a request - sleeps for
 * --sleep-us, then does a think time of busy work - reports back and waits
 * again.  Waking and reporting go through semaphores: fiber_sem in fiber
 * mode; in threads mode, unpinned pthreads and a counting semaphore made of
 * a pthread mutex and condvar.
 *
 * The think time is a busy loop of a fixed number of iterations, calibrated
 * before anything starts so that it takes --think-us microseconds on an
 * idle CPU (the fastest of three timings).
 *
 * The clock starts when the first message passes the start gate.  The
 * first --warmup seconds (default: a tenth of the runtime, at most 1 s) are
 * a warm-up: wakeups stamped before it ends are neither timed nor counted.
 * For the rest, as schbench reports them:
 *
 *	wakeup latency   = worker's clock on waking - message's stamp
 *	request latency  = worker's clock when the request is done
 *			   - its clock on waking (the sleep and think time,
 *			   with whatever preempted or moved it meanwhile)
 *	RPS sample       = requests done in one second / that second, one
 *			   per whole second after the warm-up, counted by the
 *			   main thread from the workers' counters
 *	requests_per_sec = sum over messages of requests / window_s
 *
 * where window_s is the time from the end of the warm-up to that message's
 * last round.  Percentiles of the latencies come from histograms per
 * worker, merged at the end; those of the RPS samples are exact.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "fiber.h"

#define PROG "schbench"
#define MESSAGES_MAX 1000UL
#define PER_MESSAGE_MAX 10000UL
#define RUNTIME_DEFAULT 5UL
#define RUNTIME_MAX 86400UL
#define THINK_US_DEFAULT 10UL
#define THINK_US_MAX 1000000UL
#define SLEEP_US_MAX 1000000UL
/* Default warm-up: a tenth of the runtime, at most this long. */
#define WARMUP_MAX_NS 1000000000ULL
/* Fewer RPS samples than this make its percentiles say little. */
#define RPS_SAMPLES_MIN 3

struct options {
	unsigned long messages;
	unsigned long per_message; /* workers per message */
	unsigned long runtime_s;
	unsigned long think_us;
	unsigned long sleep_us;
	unsigned long warmup_s;
	bool warmup_set; /* --warmup given */
	struct bench_common c;
};

/* A counting semaphore for the threads baseline. */
struct tsem {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned long count; /* lock */
};

/* One semaphore of either kind; the transport knows which. */
union sem {
	fiber_sem_t f;
	struct tsem t;
};

struct transport {
	const char *mode;
	void (*post)(union sem *s);
	void (*wait)(union sem *s);
	void (*gate)(void);
	void (*sleep_us)(unsigned int us);
};

struct message;

/*
 * A worker.  wake_ns and the message's stop flag are written by the message
 * before it posts @wake and read by the worker after its wait returns: the
 * semaphore orders them.  The counters and histograms belong to the worker
 * and are read by main after the join; @requests is also read by main
 * while the run goes on (relaxed atomics: only the worker writes it).
 */
struct worker {
	union sem wake;
	struct message *msg;
	uint64_t wake_ns;
	unsigned long woken;	 /* wakeups, warm-up and stop included */
	unsigned long requests;	 /* requests after the warm-up */
	struct bench_hist *hist; /* wakeup latency after the warm-up, ns */
	struct bench_hist *req;	 /* request latency after the warm-up, ns */
};

struct message {
	const struct transport *tp;
	const struct options *o;
	union sem done; /* one post per worker report */
	struct worker *worker;
	bool stop;
	uint64_t measure_ns; /* end of the warm-up */
	uint64_t end_ns;
	unsigned long posted; /* wakeups sent, stop included */
};

/* The RPS samples of a run, sorted at the end. */
struct rps {
	double *v;
	unsigned long nr;
};

struct result {
	const char *mode;
	unsigned long long wakeups;
	unsigned long long requests;
	double requests_per_sec;
	struct bench_hist *hist; /* wakeup latency */
	struct bench_hist *req;	 /* request latency */
	struct rps rps;
};

const char bench_name[] = PROG;

static fiber_barrier_t fiber_gate;
static pthread_barrier_t thread_gate;
/* When the first message passed the gate, the run's time 0; 0 before.
 * Atomic: set once by that message, read by the others and by main. */
static uint64_t gate_ns;
/* Busy-loop iterations per think time; set once before anything runs. */
static uint64_t think_iters;

/* Think time. */

/* A xorshift chain the compiler cannot fold away. */
static uint64_t spin(uint64_t iters)
{
	uint64_t i, x = 0x9e3779b97f4a7c15ULL;

	for (i = 0; i < iters; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

/*
 * Iterations for @us microseconds: time a loop long enough to take ~20 ms,
 * three times, and keep the fastest (the one least disturbed).
 */
static uint64_t calibrate(unsigned long us)
{
	uint64_t iters = 1000, best = UINT64_MAX, t0, ns;
	int tries;

	for (;;) {
		t0 = bench_now_ns();
		spin(iters);
		if (bench_now_ns() - t0 >= 20000000ULL)
			break;
		iters *= 2;
	}
	for (tries = 0; tries < 3; tries++) {
		t0 = bench_now_ns();
		spin(iters);
		ns = bench_now_ns() - t0;
		best = ns < best ? ns : best;
	}
	return (uint64_t)((double)iters * us * 1000.0 / best) + 1;
}

/* Fiber transport. */

static void fsem_post(union sem *s)
{
	int err = fiber_sem_post(&s->f);

	if (err)
		bench_die("fiber_sem_post: %s", strerror(err));
}

static void fsem_wait(union sem *s)
{
	int err = fiber_sem_wait(&s->f);

	if (err)
		bench_die("fiber_sem_wait: %s", strerror(err));
}

static void fiber_wait_gate(void)
{
	fiber_barrier_wait(&fiber_gate);
}

static const struct transport fiber_transport = {
	.mode = "fiber",
	.post = fsem_post,
	.wait = fsem_wait,
	.gate = fiber_wait_gate,
	.sleep_us = fiber_usleep,
};

/* Thread transport. */

static void tsem_post(union sem *s)
{
	pthread_mutex_lock(&s->t.lock);
	s->t.count++;
	pthread_cond_signal(&s->t.cond);
	pthread_mutex_unlock(&s->t.lock);
}

static void tsem_wait(union sem *s)
{
	pthread_mutex_lock(&s->t.lock);
	while (!s->t.count)
		pthread_cond_wait(&s->t.cond, &s->t.lock);
	s->t.count--;
	pthread_mutex_unlock(&s->t.lock);
}

static void thread_wait_gate(void)
{
	pthread_barrier_wait(&thread_gate);
}

static void thread_sleep_us(unsigned int us)
{
	usleep(us);
}

static const struct transport thread_transport = {
	.mode = "threads",
	.post = tsem_post,
	.wait = tsem_wait,
	.gate = thread_wait_gate,
	.sleep_us = thread_sleep_us,
};

static void sem_setup(const struct transport *tp, union sem *s)
{
	memset(s, 0, sizeof(*s));
	if (tp == &fiber_transport) {
		fiber_sem_init(&s->f, 0);
		return;
	}
	pthread_mutex_init(&s->t.lock, NULL);
	pthread_cond_init(&s->t.cond, NULL);
}

static void sem_teardown(const struct transport *tp, union sem *s)
{
	if (tp == &fiber_transport) {
		fiber_sem_destroy(&s->f);
		return;
	}
	pthread_mutex_destroy(&s->t.lock);
	pthread_cond_destroy(&s->t.cond);
}

/* The message and worker loops, common to both transports. */

static uint64_t warmup_ns(const struct options *o)
{
	uint64_t tenth = o->runtime_s * 100000000ULL;

	if (o->warmup_set)
		return o->warmup_s * 1000000000ULL;
	return tenth < WARMUP_MAX_NS ? tenth : WARMUP_MAX_NS;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct message *m = w->msg;
	uint64_t now;
	bool timed;

	for (;;) {
		m->tp->wait(&w->wake);
		now = bench_now_ns();
		w->woken++;
		if (m->stop)
			break;
		timed = w->wake_ns >= m->measure_ns;
		if (timed)
			bench_hist_add(w->hist, now - w->wake_ns);
		if (m->o->sleep_us)
			m->tp->sleep_us(m->o->sleep_us);
		spin(think_iters);
		if (timed) {
			bench_hist_add(w->req, bench_now_ns() - now);
			__atomic_store_n(&w->requests, w->requests + 1,
					 __ATOMIC_RELAXED);
		}
		m->tp->post(&m->done);
	}
	return NULL;
}

/* The run's time 0: the first message through the gate sets it. */
static uint64_t gate_time(void)
{
	uint64_t now = bench_now_ns(), zero = 0;

	if (__atomic_compare_exchange_n(&gate_ns, &zero, now, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return now;
	return zero;
}

static void *message_main(void *arg)
{
	struct message *m = arg;
	unsigned long i, nr = m->o->per_message;
	uint64_t start, deadline, now;

	m->tp->gate();
	start = gate_time();
	m->measure_ns = start + warmup_ns(m->o);
	deadline = start + m->o->runtime_s * 1000000000ULL;
	for (now = start; now < deadline; now = bench_now_ns()) {
		for (i = 0; i < nr; i++) {
			m->worker[i].wake_ns = bench_now_ns();
			m->tp->post(&m->worker[i].wake);
			m->posted++;
		}
		for (i = 0; i < nr; i++)
			m->tp->wait(&m->done);
	}
	m->end_ns = now;
	m->stop = true;
	for (i = 0; i < nr; i++) {
		m->tp->post(&m->worker[i].wake);
		m->posted++;
	}
	return NULL;
}

/* Runs. */

static struct message *messages_alloc(const struct options *o,
				      const struct transport *tp)
{
	struct message *msgs = calloc(o->messages, sizeof(*msgs));
	struct worker *w;
	unsigned long i, j;

	if (!msgs)
		bench_die("out of memory for %lu messages", o->messages);
	for (i = 0; i < o->messages; i++) {
		msgs[i].tp = tp;
		msgs[i].o = o;
		sem_setup(tp, &msgs[i].done);
		msgs[i].worker = calloc(o->per_message, sizeof(*w));
		if (!msgs[i].worker)
			bench_die("out of memory for %lu workers",
				  o->per_message);
		for (j = 0; j < o->per_message; j++) {
			w = &msgs[i].worker[j];
			w->msg = &msgs[i];
			w->hist = bench_hist_alloc();
			w->req = bench_hist_alloc();
			sem_setup(tp, &w->wake);
		}
	}
	return msgs;
}

/*
 * Check the counts, fill @r and free the messages: every wakeup posted was
 * taken, and every request timed once.
 */
static void messages_finish(const struct options *o, struct message *msgs,
			    struct result *r)
{
	unsigned long long posted = 0, requests;
	unsigned long i, j;
	struct worker *w;

	r->hist = bench_hist_alloc();
	r->req = bench_hist_alloc();
	for (i = 0; i < o->messages; i++) {
		posted += msgs[i].posted;
		requests = 0;
		for (j = 0; j < o->per_message; j++) {
			w = &msgs[i].worker[j];
			r->wakeups += w->woken;
			requests += w->requests;
			bench_hist_merge(r->hist, w->hist);
			bench_hist_merge(r->req, w->req);
			free(w->hist);
			free(w->req);
			sem_teardown(msgs[i].tp, &w->wake);
		}
		r->requests += requests;
		if (msgs[i].end_ns > msgs[i].measure_ns)
			r->requests_per_sec +=
				requests * 1e9 /
				(msgs[i].end_ns - msgs[i].measure_ns);
		sem_teardown(msgs[i].tp, &msgs[i].done);
		free(msgs[i].worker);
	}
	free(msgs);
	if (posted != r->wakeups || r->hist->count != r->requests ||
	    r->req->count != r->requests)
		bench_die("%s: %llu wakeups sent, %llu taken; %llu requests, "
			  "%llu and %llu timed",
			  r->mode, posted, r->wakeups, r->requests,
			  (unsigned long long)r->hist->count,
			  (unsigned long long)r->req->count);
}

/* The RPS samples: what the main thread does while the run goes on. */

static void sleep_until(uint64_t ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000u,
			       .tv_nsec = ns % 1000000000u };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
		;
}

static unsigned long long requests_now(const struct options *o,
				       const struct message *msgs)
{
	unsigned long long n = 0;
	unsigned long i, j;

	for (i = 0; i < o->messages; i++)
		for (j = 0; j < o->per_message; j++)
			n += __atomic_load_n(&msgs[i].worker[j].requests,
					     __ATOMIC_RELAXED);
	return n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * Sample the requests done in each whole second after the warm-up, until
 * the runtime is over, into @rps; sorted at the end.
 */
static void sample_rps(const struct options *o, const struct message *msgs,
		       struct rps *rps)
{
	uint64_t start, t, end, now, prev_ns;
	unsigned long long n, prev;

	*rps = (struct rps){ .v = calloc(o->runtime_s + 1, sizeof(double)) };
	if (!rps->v)
		bench_die("out of memory for %lu RPS samples", o->runtime_s);
	while (!(start = __atomic_load_n(&gate_ns, __ATOMIC_ACQUIRE)))
		usleep(1000);
	end = start + o->runtime_s * 1000000000ULL;
	t = start + warmup_ns(o);
	sleep_until(t);
	prev = requests_now(o, msgs);
	prev_ns = bench_now_ns();
	for (t += 1000000000ULL; t <= end; t += 1000000000ULL) {
		sleep_until(t);
		n = requests_now(o, msgs);
		now = bench_now_ns();
		rps->v[rps->nr++] = (n - prev) * 1e9 / (now - prev_ns);
		prev = n;
		prev_ns = now;
	}
	qsort(rps->v, rps->nr, sizeof(double), cmp_double);
}

static void run_fibers(const struct options *o, struct result *r)
{
	struct message *msgs = messages_alloc(o, &fiber_transport);
	unsigned long i, j, n = 0, nr = o->messages * (o->per_message + 1);
	fiber_t *f = calloc(nr, sizeof(*f));
	int err = 0;

	if (!f)
		bench_die("out of memory for %lu fibers", nr);
	fiber_barrier_init(&fiber_gate, o->messages);
	for (i = 0; i < o->messages && !err; i++)
		for (j = 0; j < o->per_message && !err; j++)
			err = fiber_create(&f[n++], NULL, worker_main,
					   &msgs[i].worker[j]);
	__atomic_store_n(&gate_ns, 0, __ATOMIC_RELAXED);
	for (i = 0; i < o->messages && !err; i++)
		err = fiber_create(&f[n++], NULL, message_main, &msgs[i]);
	if (err)
		bench_die("fiber_create: %s", strerror(err));
	sample_rps(o, msgs, &r->rps);
	for (i = 0; i < nr; i++) {
		err = fiber_join(f[i], NULL);
		if (err)
			bench_die("fiber_join: %s", strerror(err));
	}
	fiber_barrier_destroy(&fiber_gate);
	free(f);
	r->mode = "fiber";
	messages_finish(o, msgs, r);
}

static void run_threads(const struct options *o, struct result *r)
{
	struct message *msgs = messages_alloc(o, &thread_transport);
	unsigned long i, j, n = 0, nr = o->messages * (o->per_message + 1);
	pthread_t *t = calloc(nr, sizeof(*t));
	int err = 0;

	if (!t)
		bench_die("out of memory for %lu threads", nr);
	pthread_barrier_init(&thread_gate, NULL, o->messages);
	for (i = 0; i < o->messages && !err; i++)
		for (j = 0; j < o->per_message && !err; j++)
			err = pthread_create(&t[n++], NULL, worker_main,
					     &msgs[i].worker[j]);
	__atomic_store_n(&gate_ns, 0, __ATOMIC_RELAXED);
	for (i = 0; i < o->messages && !err; i++)
		err = pthread_create(&t[n++], NULL, message_main, &msgs[i]);
	if (err)
		bench_die("pthread_create: %s", strerror(err));
	sample_rps(o, msgs, &r->rps);
	for (i = 0; i < nr; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&thread_gate);
	free(t);
	r->mode = "threads";
	messages_finish(o, msgs, r);
}

/* Output. */

static const double pcts[] = { 50, 75, 90, 95, 99, 99.5, 99.9 };
static const char *const pct_names[] = { "p50", "p75",	 "p90",	 "p95",
					 "p99", "p99.5", "p99.9" };
#define NR_PCTS (sizeof(pcts) / sizeof(pcts[0]))
/* The RPS percentiles schbench prints. */
static const double rps_pcts[] = { 20, 50, 90 };
#define NR_RPS_PCTS (sizeof(rps_pcts) / sizeof(rps_pcts[0]))

static double pct_us(const struct bench_hist *h, double p)
{
	return bench_hist_percentile(h, p) / 1e3;
}

/* The nearest-rank percentile @p of the sorted samples; 0 without any. */
static double rps_pct(const struct rps *rps, double p)
{
	unsigned long rank;

	if (!rps->nr)
		return 0;
	rank = (unsigned long)(p / 100.0 * rps->nr + 0.999999);
	return rps->v[rank ? rank - 1 : 0];
}

static void json_latency(const char *what, const struct bench_hist *h)
{
	char key[48];
	unsigned int i;

	for (i = 0; i < NR_PCTS; i++) {
		snprintf(key, sizeof(key), "%s_%s_us", what, pct_names[i]);
		bench_json_double(key, pct_us(h, pcts[i]));
	}
	snprintf(key, sizeof(key), "%s_min_us", what);
	bench_json_double(key, h->count ? h->min / 1e3 : 0);
	snprintf(key, sizeof(key), "%s_max_us", what);
	bench_json_double(key, h->max / 1e3);
}

static void print_json(const struct options *o, const struct result *r)
{
	char key[32];
	unsigned int i;

	bench_json_open("schbench", r->mode);
	bench_json_uint("workers", o->c.workers);
	bench_json_uint("messages", o->messages);
	bench_json_uint("workers_per_message", o->per_message);
	bench_json_uint("runtime_s", o->runtime_s);
	bench_json_double("warmup_s", warmup_ns(o) / 1e9);
	bench_json_uint("think_us", o->think_us);
	bench_json_uint("think_iters", think_iters);
	bench_json_uint("sleep_us", o->sleep_us);
	bench_json_metrics();
	bench_json_uint("wakeups", r->wakeups);
	bench_json_uint("requests", r->requests);
	bench_json_double("requests_per_sec", r->requests_per_sec);
	json_latency("wakeup", r->hist);
	json_latency("request", r->req);
	bench_json_uint("rps_samples", r->rps.nr);
	for (i = 0; r->rps.nr && i < NR_RPS_PCTS; i++) {
		snprintf(key, sizeof(key), "rps_p%g", rps_pcts[i]);
		bench_json_double(key, rps_pct(&r->rps, rps_pcts[i]));
	}
	if (r->rps.nr) {
		bench_json_double("rps_min", r->rps.v[0]);
		bench_json_double("rps_max", r->rps.v[r->rps.nr - 1]);
	}
	bench_json_close();
}

/*
 * schbench's own blocks.  Each percentile line gives its value and, as
 * schbench does, how many samples lie between the previous line's value
 * and this one; "*" marks the headline percentile.
 */
static void compat_line(double p, bool star, unsigned long long v,
			unsigned long long n)
{
	printf("\t%s%.1fth: %-10llu (%llu samples)\n", star ? "* " : "  ", p, v,
	       n);
}

static void compat_latency(const char *label, const struct options *o,
			   const struct bench_hist *h)
{
	static const double list[] = { 50, 90, 99, 99.9 };
	uint64_t v, below = 0, upto;

	printf("%s percentiles (usec) runtime %lu (s) (%llu total samples)\n",
	       label, o->runtime_s, (unsigned long long)h->count);
	for (unsigned int i = 0; h->count && i < 4; i++) {
		v = bench_hist_percentile(h, list[i]);
		upto = bench_hist_count_upto(h, v);
		compat_line(list[i], list[i] == 99, (v + 500) / 1000,
			    upto - below);
		below = upto;
	}
	printf("\t  min=%llu, max=%llu\n",
	       (unsigned long long)(h->count ? (h->min + 500) / 1000 : 0),
	       (unsigned long long)((h->max + 500) / 1000));
}

static void compat_rps(const struct options *o, const struct rps *rps)
{
	unsigned long below = 0, upto;
	double v;

	printf("RPS percentiles (requests) runtime %lu (s) (%lu total "
	       "samples)\n",
	       o->runtime_s, rps->nr);
	for (unsigned int i = 0; rps->nr && i < NR_RPS_PCTS; i++) {
		v = rps_pct(rps, rps_pcts[i]);
		for (upto = below; upto < rps->nr && rps->v[upto] <= v; upto++)
			;
		compat_line(rps_pcts[i], rps_pcts[i] == 50,
			    (unsigned long long)(v + 0.5), upto - below);
		below = upto;
	}
	printf("\t  min=%.0f, max=%.0f\n", rps->nr ? rps->v[0] : 0,
	       rps->nr ? rps->v[rps->nr - 1] : 0);
}

static void print_compat(const struct options *o, const struct result *res,
			 int nr)
{
	for (int i = 0; i < nr; i++) {
		if (nr > 1)
			printf("# mode %s\n", res[i].mode);
		compat_latency("Wakeup Latencies", o, res[i].hist);
		compat_latency("Request Latencies", o, res[i].req);
		compat_rps(o, &res[i].rps);
		printf("average rps: %.2f\n", res[i].requests_per_sec);
	}
}

/* A readable latency table: samples, min, percentiles, max, in us. */
static void table_latency(const char *title, const struct result *res, int nr,
			  bool request)
{
	const struct bench_hist *h;
	unsigned int j;

	printf("%-20s %9s %8s", title, "samples", "min");
	for (j = 0; j < NR_PCTS; j++)
		printf(" %8s", pct_names[j]);
	printf(" %8s\n", "max");
	for (int i = 0; i < nr; i++) {
		h = request ? res[i].req : res[i].hist;
		printf("%-20s %9llu %8.1f", res[i].mode,
		       (unsigned long long)h->count,
		       h->count ? h->min / 1e3 : 0.0);
		for (j = 0; j < NR_PCTS; j++)
			printf(" %8.1f", pct_us(h, pcts[j]));
		printf(" %8.1f\n", h->max / 1e3);
	}
}

/* print_ratio - "@label @a/@b", or "n/a" where a side measured nothing. */
static void print_ratio(const char *label, double a, double b)
{
	if (a > 0 && b > 0)
		printf("%s %.2f", label, a / b);
	else
		printf("%s n/a", label);
}

static void print_table(const struct options *o, const struct result *res,
			int nr, const char *features)
{
	unsigned int j;
	int i;

	printf("schbench: %lu messages x %lu workers, think %lu us "
	       "(%llu iterations), sleep %lu us, %lu s with %.1f s of "
	       "warm-up, features: %s\n",
	       o->messages, o->per_message, o->think_us,
	       (unsigned long long)think_iters, o->sleep_us, o->runtime_s,
	       warmup_ns(o) / 1e9, features);
	table_latency("wakeup latency (us)", res, nr, false);
	table_latency("request latency (us)", res, nr, true);
	printf("%-20s %9s %8s %11s", "requests/s", "samples", "min", "average");
	for (j = 0; j < NR_RPS_PCTS; j++)
		printf(" %8s%g", "p", rps_pcts[j]);
	printf(" %8s   requests\n", "max");
	for (i = 0; i < nr; i++) {
		const struct rps *rps = &res[i].rps;

		printf("%-20s %9lu %8.0f %11.0f", res[i].mode, rps->nr,
		       rps->nr ? rps->v[0] : 0, res[i].requests_per_sec);
		for (j = 0; j < NR_RPS_PCTS; j++)
			printf(" %10.0f", rps_pct(rps, rps_pcts[j]));
		printf(" %8.0f %10llu\n", rps->nr ? rps->v[rps->nr - 1] : 0,
		       res[i].requests);
	}
	if (nr == 2) {
		printf("ratio threads/fiber:");
		print_ratio(" requests/s", res[1].requests_per_sec,
			    res[0].requests_per_sec);
		print_ratio(", wakeup p50", pct_us(res[1].hist, 50),
			    pct_us(res[0].hist, 50));
		print_ratio(", p99", pct_us(res[1].hist, 99),
			    pct_us(res[0].hist, 99));
		printf("\n");
	}
}

/* The warnings of a run: nothing timed, thin tails, too few RPS samples. */
static void check_result(const struct options *o, const struct result *r)
{
	char what[64];

	if (!r->hist->count)
		bench_warn("%s: no request was timed: none started after the "
			   "%.1f s warm-up and ended within the run; raise "
			   "-r/--runtime",
			   r->mode, warmup_ns(o) / 1e9);

	snprintf(what, sizeof(what), "%s wakeup latency", r->mode);
	bench_check_tail(what, r->hist->count, 99.9);
	if (r->rps.nr < RPS_SAMPLES_MIN)
		bench_warn("%s: %lu RPS samples (one per whole second after "
			   "the %.1f s warm-up), fewer than %d: raise "
			   "-r/--runtime",
			   r->mode, r->rps.nr, warmup_ns(o) / 1e9,
			   RPS_SAMPLES_MIN);
}

/* Command line. */

static const char intro_text[] =
	"Message fibers wake worker fibers, which serve a request (sleep,\n"
	"then think: busy work) and report back; prints wakeup and request\n"
	"latency percentiles and requests per second, and the same with\n"
	"kernel threads, as `schbench -m M -t T`, whose short options\n"
	"these are.\n";

static const char outro_text[] =
	"Wakeup latency = worker's clock on waking - message's clock just\n"
	"before waking it; request latency = worker's clock when done -\n"
	"its clock on waking; percentiles p50 p75 p90 p95 p99 p99.5 p99.9\n"
	"in us.  RPS samples: requests done in each whole second after the\n"
	"warm-up; requests_per_sec = requests done after the warm-up /\n"
	"seconds.  Threads are not pinned.\n";

static void parse_args(int argc, char **argv, struct options *o)
{
	const struct bench_opt opts[] = {
		BENCH_ULONG('m', "messages", "M", &o->messages, 1, MESSAGES_MAX,
			    "message fibers (schbench's --message-threads)"),
		BENCH_ULONG('t', "workers-per-message", "T", &o->per_message, 1,
			    PER_MESSAGE_MAX,
			    "worker fibers per message (schbench's\n"
			    "--threads)"),
		BENCH_ULONG('r', "runtime", "S", &o->runtime_s, 1, RUNTIME_MAX,
			    "seconds to run, whole, warm-up included"),
		BENCH_ULONG('c', "think-us", "U", &o->think_us, 0, THINK_US_MAX,
			    "busy work per request in microseconds,\n"
			    "calibrated at start (schbench's --cputime)"),
		BENCH_ULONG('s', "sleep-us", "U", &o->sleep_us, 0, SLEEP_US_MAX,
			    "sleep per request in microseconds, before the\n"
			    "think time (schbench's --sleep_usec)"),
		BENCH_ULONG_SEEN('w', "warmup", "S", &o->warmup_s, 0,
				 RUNTIME_MAX,
				 "seconds of warm-up, less than --runtime\n"
				 "(default a tenth of it, at most 1 s)",
				 &o->warmup_set),
		BENCH_OPTS_MODES(&o->c, 0),
		BENCH_OPTS_RUNTIME(&o->c),
		BENCH_IGNORED('i', "intervaltime", "S",
			      "only the final report is printed"),
		BENCH_REFUSED('p', "pipe", "BYTES", "no pipe mode"),
		BENCH_REFUSED('R', "rps", "COUNT", "no fixed request rate"),
		BENCH_REFUSED('A', "auto-rps", "PERCENT",
			      "no fixed request rate"),
		BENCH_REFUSED('F', "cache_footprint", "KB",
			      "requests are a calibrated busy loop (-c)"),
		BENCH_REFUSED('n', "operations", "N",
			      "requests are a calibrated busy loop (-c)"),
		BENCH_REFUSED('L', "no-locking", NULL,
			      "requests take no per-CPU lock anyway"),
		BENCH_REFUSED('C', "calibrate", NULL,
			      "the busy loop is calibrated at every start"),
		BENCH_REFUSED('M', "message-cpus", "LIST",
			      "fibers are placed by the scheduler"),
		BENCH_REFUSED('W', "worker-cpus", "LIST",
			      "fibers are placed by the scheduler"),
		BENCH_REFUSED('z', "zerotime", "S",
			      "statistics are never zeroed"),
		BENCH_REFUSED('j', NULL, "FILE", "use --format json"),
		BENCH_REFUSED('J', "jobname", "NAME", "use --format json"),
	};

	*o = (struct options){ .messages = 1,
			       .per_message = bench_nr_cpus(),
			       .runtime_s = RUNTIME_DEFAULT,
			       .think_us = THINK_US_DEFAULT,
			       .c.workers = bench_nr_cpus() };
	bench_parse(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
		    intro_text, outro_text);
	bench_common_finish(&o->c, false);
	if (o->warmup_set && o->warmup_s >= o->runtime_s) {
		fprintf(stderr,
			PROG ": --warmup %lu: less than --runtime "
			     "(%lu) is needed\n",
			o->warmup_s, o->runtime_s);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct result res[2] = { { 0 } };
	struct options o;
	char *features;
	int i, nr = 0, err;

	parse_args(argc, argv, &o);
	think_iters = o.think_us ? calibrate(o.think_us) : 0;
	features = bench_start_runtime(o.c.workers, o.c.features);
	if (o.c.fibers)
		run_fibers(&o, &res[nr++]);
	/* The workers must not share the CPUs with the baseline. */
	err = fiber_shutdown();
	if (err)
		bench_die("fiber_shutdown: %s", strerror(err));
	if (o.c.threads)
		run_threads(&o, &res[nr++]);

	for (i = 0; i < nr; i++)
		check_result(&o, &res[i]);
	bench_context_finish();
	if (o.c.format == BENCH_FORMAT_JSON) {
		for (i = 0; i < nr; i++)
			print_json(&o, &res[i]);
	} else if (o.c.format == BENCH_FORMAT_COMPAT) {
		print_compat(&o, res, nr);
	} else {
		print_table(&o, res, nr, features);
		bench_context_line();
	}
	for (i = 0; i < nr; i++) {
		free(res[i].hist);
		free(res[i].req);
		free(res[i].rps.v);
	}
	free(features);
	return 0;
}
