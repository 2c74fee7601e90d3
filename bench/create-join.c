/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * create-join - how many fibers per second the runtime can start and reap.
 *
 * A creator makes fibers in batches of B: it creates B fibers, then joins the
 * B in creation order, and repeats until N fibers have come and gone.  Each
 * fiber only returns its argument, which the join checks, so the figure is
 * the cost of the runtime's own work: allocating (or reusing) the fiber and
 * its stack, placing it, the first switch into it, its exit and the join.
 *
 * --wg: the fibers are created detached; each stores its argument in a
 * slot and calls fiber_wg_done() on the batch's wait group, which the
 * creator waits on once per batch before it checks the slots: the shape
 * of Go's goroutines joined by a sync.WaitGroup (bench/peers/createjoin.go
 * -mode wg).
 *
 * The creator is either a fiber (--from fiber, the default: creation stays
 * inside the runtime, as in a server that starts a fiber per request), pinned
 * to worker 0, or the main thread (--from main: a foreign thread that blocks
 * in fiber_join).  It first runs 1% of N fibers as a warm-up, so that fiber
 * and stack caches are filled, then times the N fibers alone:
 *
 *	ns_per_fiber   = elapsed_ns / fibers
 *	fibers_per_sec = fibers / elapsed_s
 *
 * --park: what a parked fiber costs.  The creator makes all N fibers (no
 * warm-up, no batches), each of which parks on one semaphore; once all N
 * have parked it reads its resident set (VmRSS), then lets them go and
 * joins them:
 *
 *	ns_per_fiber        = time from the first create to the last park / N
 *	rss_per_fiber_bytes = (VmRSS parked - VmRSS before the first create) / N
 *
 * With the default guarded stacks N is bounded by vm.max_map_count / 2;
 * LIBFIBER_STACK_GUARD=0 lifts the bound (a million fibers fit).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* CPU_SET */
#endif
#include <errno.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "fiber.h"

#define PROG "create-join"
#define FIBERS_DEFAULT 1000000UL
#define BATCH_MAX 10000000UL
#define FIBERS_MAX 1000000000000UL

struct options {
	unsigned long fibers;
	unsigned long batch;
	int from; /* index in from_names[] */
	bool from_main;
	bool park;
	bool batch_set; /* --batch given */
	bool wg;
	struct bench_common c;
};

/* Written by the creator, read by main after the creator is done. */
struct run {
	const struct options *o;
	fiber_t *handles; /* one batch */
	uint64_t elapsed_ns;
	unsigned long rss_before_kb, rss_parked_kb; /* --park */
};

/* --park: the fibers wait here; @parked counts those that got there. */
static fiber_sem_t park_sem;
static atomic_ulong parked;

/* --wg: a batch's detached fibers each store their argument in their
 * slot and say they are done here. */
static fiber_wg_t batch_wg;
static uintptr_t *slots;

const char bench_name[] = PROG;

static void *child(void *arg)
{
	return arg;
}

static void *wg_child(void *arg)
{
	uintptr_t i = (uintptr_t)arg;

	slots[i] = i;
	fiber_wg_done(&batch_wg);
	return NULL;
}

/* --wg: create @nr detached fibers, @batch at a time, and wait for each
 * batch with one wait group, as Go's sync.WaitGroup.  Exits on any
 * error. */
static void create_wait(struct run *r, unsigned long nr)
{
	unsigned long done, i, n;
	fiber_attr_t attr;
	fiber_t f;
	int err;

	fiber_attr_init(&attr);
	fiber_attr_setdetachstate(&attr, FIBER_CREATE_DETACHED);
	for (done = 0; done < nr; done += n) {
		n = nr - done < r->o->batch ? nr - done : r->o->batch;
		fiber_wg_add(&batch_wg, (int)n);
		for (i = 0; i < n; i++) {
			err = fiber_create(&f, &attr, wg_child,
					   (void *)(uintptr_t)i);
			if (err)
				bench_die("fiber_create (fiber %lu): %s",
					  done + i, strerror(err));
		}
		err = fiber_wg_wait(&batch_wg);
		if (err)
			bench_die("fiber_wg_wait: %s", strerror(err));
		for (i = 0; i < n; i++)
			if (slots[i] != i)
				bench_die("fiber %lu left %lu in its slot",
					  done + i, (unsigned long)slots[i]);
	}
	fiber_attr_destroy(&attr);
}

/* Create and join @nr fibers, @batch at a time.  Exits on any error. */
static void create_join(struct run *r, unsigned long nr)
{
	unsigned long done, i, n;
	void *ret;
	int err;

	for (done = 0; done < nr; done += n) {
		n = nr - done < r->o->batch ? nr - done : r->o->batch;
		for (i = 0; i < n; i++) {
			err = fiber_create(&r->handles[i], NULL, child,
					   (void *)(uintptr_t)(done + i));
			if (err)
				bench_die("fiber_create (fiber %lu): %s",
					  done + i, strerror(err));
		}
		for (i = 0; i < n; i++) {
			err = fiber_join(r->handles[i], &ret);
			if (err)
				bench_die("fiber_join (fiber %lu): %s",
					  done + i, strerror(err));
			if (ret != (void *)(uintptr_t)(done + i))
				bench_die("fiber %lu returned %p", done + i,
					  ret);
		}
	}
}

/* VmRSS in kB, from /proc/self/status; exits when it cannot be read. */
static unsigned long rss_kb(void)
{
	char line[256];
	unsigned long kb = 0;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		bench_die("/proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lu kB", &kb) == 1)
			break;
	fclose(f);
	if (!kb)
		bench_die("no VmRSS in /proc/self/status");
	return kb;
}

static void *park_child(void *arg)
{
	atomic_fetch_add_explicit(&parked, 1, memory_order_relaxed);
	fiber_sem_wait(&park_sem);
	return arg;
}

/* --park: create N parked fibers, measure, release and join them. */
static void park_run(struct run *r)
{
	unsigned long n = r->o->fibers, i;
	uint64_t start;
	void *ret;
	int err;

	memset(r->handles, 0, n * sizeof(*r->handles)); /* resident now */
	r->rss_before_kb = rss_kb();
	start = bench_now_ns();
	for (i = 0; i < n; i++) {
		err = fiber_create(&r->handles[i], NULL, park_child,
				   (void *)(uintptr_t)i);
		if (err)
			bench_die("fiber_create (fiber %lu of %lu): %s", i, n,
				  strerror(err));
	}
	while (atomic_load_explicit(&parked, memory_order_relaxed) < n)
		fiber_sleep(100 * 1000); /* a fiber or the main thread */
	r->elapsed_ns = bench_now_ns() - start;
	r->rss_parked_kb = rss_kb();
	for (i = 0; i < n; i++)
		fiber_sem_post(&park_sem);
	for (i = 0; i < n; i++) {
		err = fiber_join(r->handles[i], &ret);
		if (err || ret != (void *)(uintptr_t)i)
			bench_die("fiber_join (fiber %lu): %s", i,
				  err ? strerror(err) : "wrong value");
	}
}

/* The creator: warm-up, then the timed run. */
static void *creator(void *arg)
{
	struct run *r = arg;
	unsigned long warmup = r->o->fibers / 100;
	uint64_t start;

	if (r->o->park) {
		park_run(r);
		return NULL;
	}
	if (r->o->wg) {
		create_wait(r, warmup ? warmup : 1);
		start = bench_now_ns();
		create_wait(r, r->o->fibers);
	} else {
		create_join(r, warmup ? warmup : 1);
		start = bench_now_ns();
		create_join(r, r->o->fibers);
	}
	r->elapsed_ns = bench_now_ns() - start;
	return NULL;
}

static void run_from_fiber(struct run *r)
{
	fiber_attr_t attr;
	cpu_set_t set;
	fiber_t f;
	int err;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	fiber_attr_init(&attr);
	fiber_attr_setaffinity(&attr, sizeof(set), &set);
	err = fiber_create(&f, &attr, creator, r);
	fiber_attr_destroy(&attr);
	if (err)
		bench_die("fiber_create (creator): %s", strerror(err));
	err = fiber_join(f, NULL);
	if (err)
		bench_die("fiber_join (creator): %s", strerror(err));
}

static void print_result(const struct options *o, const struct run *r,
			 const char *features)
{
	double ns = (double)r->elapsed_ns / o->fibers;
	double rate = o->fibers * 1e9 / r->elapsed_ns;
	const char *from = o->from_main ? "main" : "fiber";

	double rss = ((double)r->rss_parked_kb - (double)r->rss_before_kb) *
		     1024 / o->fibers;

	bench_check_duration("fiber", r->elapsed_ns, "--fibers");
	bench_context_finish();
	if (o->park && o->c.format != BENCH_FORMAT_JSON) {
		printf("create-join --park: from %s, features: %s\n", from,
		       features);
		printf("%7s %10s %12s %14s %12s\n", "workers", "fibers",
		       "ns/fiber", "rss B/fiber", "rss MiB");
		printf("%7u %10lu %12.1f %14.0f %12.1f\n", o->c.workers,
		       o->fibers, ns, rss, r->rss_parked_kb / 1024.0);
		bench_context_line();
		return;
	}
	/* No tool to imitate: --format compat prints the table. */
	if (o->c.format != BENCH_FORMAT_JSON) {
		printf("create-join: from %s, batch %lu%s, features: %s\n",
		       from, o->batch, o->wg ? " (detached, a wait group)" : "",
		       features);
		printf("%7s %10s %12s %12s\n", "workers", "fibers", "ns/fiber",
		       "fibers/s");
		printf("%7u %10lu %12.1f %12.0f\n", o->c.workers, o->fibers, ns,
		       rate);
		bench_context_line();
		return;
	}
	bench_json_open("create-join", "fiber");
	bench_json_str("from", from);
	bench_json_uint("workers", o->c.workers);
	bench_json_uint("fibers", o->fibers);
	bench_json_uint("batch", o->batch);
	bench_json_str("join", o->wg ? "wg" : "join");
	bench_json_metrics();
	bench_json_double("ns_per_fiber", ns);
	bench_json_double("fibers_per_sec", rate);
	if (o->park) {
		bench_json_double("rss_per_fiber_bytes", rss);
		bench_json_uint("rss_parked_kb", r->rss_parked_kb);
	}
	bench_json_close();
}

static const char intro_text[] =
	"Create fibers that return at once and join them; report fibers\n"
	"per second and nanoseconds per create + join.\n";

static const char outro_text[] =
	"A warm-up of 1% of N fibers runs first, untimed; then\n"
	"  ns_per_fiber   = elapsed_ns / fibers\n"
	"  fibers_per_sec = fibers / elapsed_s\n";

static const char *const from_names[] = { "fiber", "main", NULL };

static void parse_args(int argc, char **argv, struct options *o)
{
	const struct bench_opt opts[] = {
		BENCH_ULONG(0, "fibers", "N", &o->fibers, 1, FIBERS_MAX,
			    "fibers to create and join"),
		BENCH_ULONG_SEEN(0, "batch", "B", &o->batch, 1, BATCH_MAX,
				 "create B fibers, then join the B (1: each\n"
				 "fiber is joined before the next is made)",
				 &o->batch_set),
		BENCH_CHOICE(0, "from", "fiber|main", &o->from, from_names,
			     "who creates: a fiber pinned to worker 0, or\n"
			     "the main thread"),
		BENCH_FLAG(0, "wg", &o->wg,
			   "create the fibers detached and wait for\n"
			   "each batch with one fiber_wg_t, as Go's\n"
			   "sync.WaitGroup, instead of joining them"),
		BENCH_FLAG(0, "park", &o->park,
			   "create all N, each parks on a semaphore;\n"
			   "report creation time and RSS per parked\n"
			   "fiber, then release and join them (not\n"
			   "with --batch or --wg)"),
		BENCH_OPTS_RUNTIME(&o->c),
	};

	*o = (struct options){ .fibers = FIBERS_DEFAULT,
			       .batch = 1,
			       .c.workers = 1 };
	bench_parse(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
		    intro_text, outro_text);
	bench_common_finish(&o->c, false);
	o->from_main = o->from == 1;
	/* A park run makes all N at once and joins each with fiber_join():
	 * a batch or a wait group would be recorded but not used. */
	if (o->park && (o->batch_set || o->wg)) {
		fprintf(stderr,
			PROG ": --park creates all the fibers at once and "
			     "joins each: it does not take %s\n",
			o->wg ? "--wg" : "--batch");
		exit(2);
	}
	if (o->batch > o->fibers || o->park)
		o->batch = o->fibers;
}

int main(int argc, char **argv)
{
	struct options o;
	struct run r;
	char *features;
	int err;

	parse_args(argc, argv, &o);
	r = (struct run){ .o = &o };
	r.handles = calloc(o.batch, sizeof(*r.handles));
	slots = calloc(o.batch, sizeof(*slots));
	if (!r.handles || !slots)
		bench_die("out of memory for a batch of %lu", o.batch);
	features = bench_start_runtime(o.c.workers, o.c.features);
	if (o.park && fiber_sem_init(&park_sem, 0))
		bench_die("fiber_sem_init failed");
	if (o.wg && fiber_wg_init(&batch_wg))
		bench_die("fiber_wg_init failed");
	if (o.from_main)
		creator(&r);
	else
		run_from_fiber(&r);
	err = fiber_shutdown();
	if (err)
		bench_die("fiber_shutdown: %s", strerror(err));
	print_result(&o, &r, features);
	free(features);
	free(r.handles);
	free(slots);
	return 0;
}
