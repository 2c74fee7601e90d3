/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * schbench - wakeup latency of worker fibers woken by message fibers, in the
 * spirit of `schbench -m M -t T`, against the same with kernel threads.
 *
 * There are M message fibers, each with T worker fibers of its own.  A
 * message fiber repeats, until --runtime seconds have passed: for each of
 * its workers, stamp the clock into the worker and wake it; then wait until
 * all T have reported back.  A woken worker reads the clock (the difference
 * from its stamp is one wakeup latency), does a think time of busy work,
 * reports back and sleeps again.  Waking and reporting go through
 * semaphores: fiber_sem in fiber mode; in threads mode, unpinned pthreads
 * and a counting semaphore made of a pthread mutex and condvar.
 *
 * The think time is a busy loop of a fixed number of iterations, calibrated
 * before anything starts so that it takes --think-us microseconds on an
 * idle CPU (the fastest of three timings).
 *
 * The first tenth of the runtime (at most 1 s) is a warm-up: wakeups
 * stamped before it ends are neither timed nor counted.  For the rest,
 *
 *	requests_per_sec = sum over messages of requests / window_s
 *
 * where a request is one woken worker's think time and window_s is the time
 * from the end of that message's warm-up to its last round.  Percentiles of
 * the wakeup latency come from a histogram per worker, merged at the end.
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

#include "fiber.h"
#include "bench.h"

#define PROG "schbench"
#define MESSAGES_MAX 1000UL
#define PER_MESSAGE_MAX 10000UL
#define RUNTIME_DEFAULT 5UL
#define RUNTIME_MAX 86400UL
#define THINK_US_DEFAULT 10UL
#define THINK_US_MAX 1000000UL
/* Warm-up: a tenth of the runtime, at most this long. */
#define WARMUP_MAX_NS 1000000000ULL

struct options {
	unsigned long messages;
	unsigned long per_message; /* workers per message */
	unsigned long runtime_s;
	unsigned long think_us;
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
};

struct message;

/*
 * A worker.  wake_ns and the message's stop flag are written by the message
 * before it posts @wake and read by the worker after its wait returns: the
 * semaphore orders them.  The counters and @hist belong to the worker and
 * are read by main after the join.
 */
struct worker {
	union sem wake;
	struct message *msg;
	uint64_t wake_ns;
	unsigned long woken;	 /* wakeups, warm-up and stop included */
	unsigned long requests;	 /* think times after the warm-up */
	struct bench_hist *hist; /* wakeup latency after the warm-up, ns */
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

struct result {
	const char *mode;
	unsigned long long wakeups;
	unsigned long long requests;
	double requests_per_sec;
	struct bench_hist *hist;
};

const char bench_name[] = PROG;

static fiber_barrier_t fiber_gate;
static pthread_barrier_t thread_gate;
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

static const struct transport thread_transport = {
	.mode = "threads",
	.post = tsem_post,
	.wait = tsem_wait,
	.gate = thread_wait_gate,
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

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct message *m = w->msg;
	uint64_t now;

	for (;;) {
		m->tp->wait(&w->wake);
		now = bench_now_ns();
		w->woken++;
		if (m->stop)
			break;
		if (w->wake_ns >= m->measure_ns) {
			bench_hist_add(w->hist, now - w->wake_ns);
			w->requests++;
		}
		spin(think_iters);
		m->tp->post(&m->done);
	}
	return NULL;
}

static void *message_main(void *arg)
{
	struct message *m = arg;
	unsigned long i, nr = m->o->per_message;
	uint64_t start, warmup, deadline, now;

	m->tp->gate();
	start = bench_now_ns();
	warmup = m->o->runtime_s * 100000000ULL;
	m->measure_ns =
		start + (warmup < WARMUP_MAX_NS ? warmup : WARMUP_MAX_NS);
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
	for (i = 0; i < o->messages; i++) {
		posted += msgs[i].posted;
		requests = 0;
		for (j = 0; j < o->per_message; j++) {
			w = &msgs[i].worker[j];
			r->wakeups += w->woken;
			requests += w->requests;
			bench_hist_merge(r->hist, w->hist);
			free(w->hist);
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
	if (posted != r->wakeups || r->hist->count != r->requests)
		bench_die("%s: %llu wakeups sent, %llu taken; %llu requests, "
			  "%llu timed",
			  r->mode, posted, r->wakeups, r->requests,
			  (unsigned long long)r->hist->count);
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
	for (i = 0; i < o->messages && !err; i++)
		err = fiber_create(&f[n++], NULL, message_main, &msgs[i]);
	if (err)
		bench_die("fiber_create: %s", strerror(err));
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
	for (i = 0; i < o->messages && !err; i++)
		err = pthread_create(&t[n++], NULL, message_main, &msgs[i]);
	if (err)
		bench_die("pthread_create: %s", strerror(err));
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

static double pct_us(const struct result *r, unsigned int i)
{
	return bench_hist_percentile(r->hist, pcts[i]) / 1e3;
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
	bench_json_uint("think_us", o->think_us);
	bench_json_uint("think_iters", think_iters);
	bench_json_metrics();
	bench_json_uint("wakeups", r->wakeups);
	bench_json_uint("requests", r->requests);
	bench_json_double("requests_per_sec", r->requests_per_sec);
	for (i = 0; i < NR_PCTS; i++) {
		snprintf(key, sizeof(key), "wakeup_%s_us", pct_names[i]);
		bench_json_double(key, pct_us(r, i));
	}
	bench_json_close();
}

static void print_table(const struct options *o, const struct result *res,
			int nr, const char *features)
{
	unsigned int j;
	int i;

	printf("schbench: %lu messages x %lu workers, think %lu us "
	       "(%llu iterations), %lu s, features: %s\n",
	       o->messages, o->per_message, o->think_us,
	       (unsigned long long)think_iters, o->runtime_s, features);
	printf("%-8s %7s %10s %11s", "mode", "workers", "requests",
	       "requests/s");
	for (j = 0; j < NR_PCTS; j++)
		printf(" %8s", pct_names[j]);
	printf("  (wakeup latency, us)\n");
	for (i = 0; i < nr; i++) {
		printf("%-8s %7u %10llu %11.0f", res[i].mode, o->c.workers,
		       res[i].requests, res[i].requests_per_sec);
		for (j = 0; j < NR_PCTS; j++)
			printf(" %8.1f", pct_us(&res[i], j));
		printf("\n");
	}
	if (nr == 2)
		printf("ratio threads/fiber: requests/s %.2f, p50 %.2f, "
		       "p99 %.2f\n",
		       res[1].requests_per_sec / res[0].requests_per_sec,
		       pct_us(&res[1], 0) / pct_us(&res[0], 0),
		       pct_us(&res[1], 4) / pct_us(&res[0], 4));
}

/* Command line. */

static const char intro_text[] =
	"Message fibers wake worker fibers, which think (busy work) and\n"
	"report back; prints wakeup latency percentiles and requests per\n"
	"second, and the same with kernel threads, as `schbench -m M -t T`,\n"
	"whose short options these are.\n";

static const char outro_text[] =
	"Wakeup latency = worker's clock on waking - message's clock just\n"
	"before waking it; percentiles p50 p75 p90 p95 p99 p99.5 p99.9 in us.\n"
	"requests_per_sec = think times done after the warm-up / seconds.\n"
	"Threads are not pinned.\n";

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
			    "seconds to run, whole; the first tenth, at\n"
			    "most 1 s, is an untimed warm-up"),
		BENCH_ULONG('c', "think-us", "U", &o->think_us, 1, THINK_US_MAX,
			    "busy work per request in microseconds,\n"
			    "calibrated at start (schbench's --cputime)"),
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
}

int main(int argc, char **argv)
{
	struct result res[2] = { { 0 } };
	struct options o;
	char *features;
	int i, nr = 0, err;

	parse_args(argc, argv, &o);
	think_iters = calibrate(o.think_us);
	features = bench_start_runtime(o.c.workers, o.c.features);
	if (o.c.fibers)
		run_fibers(&o, &res[nr++]);
	/* The workers must not share the CPUs with the baseline. */
	err = fiber_shutdown();
	if (err)
		bench_die("fiber_shutdown: %s", strerror(err));
	if (o.c.threads)
		run_threads(&o, &res[nr++]);

	if (o.c.format == BENCH_FORMAT_JSON) {
		for (i = 0; i < nr; i++)
			print_json(&o, &res[i]);
	} else {
		print_table(&o, res, nr, features);
		bench_context_line();
	}
	for (i = 0; i < nr; i++)
		free(res[i].hist);
	free(features);
	return 0;
}
