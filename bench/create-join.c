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
 * The creator is either a fiber (--from fiber, the default: creation stays
 * inside the runtime, as in a server that starts a fiber per request), pinned
 * to worker 0, or the main thread (--from main: a foreign thread that blocks
 * in fiber_join).  It first runs 1% of N fibers as a warm-up, so that fiber
 * and stack caches are filled, then times the N fibers alone:
 *
 *	ns_per_fiber   = elapsed_ns / fibers
 *	fibers_per_sec = fibers / elapsed_s
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* CPU_SET */
#endif
#include <errno.h>
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
	struct bench_common c;
};

/* Written by the creator, read by main after the creator is done. */
struct run {
	const struct options *o;
	fiber_t *handles; /* one batch */
	uint64_t elapsed_ns;
};

const char bench_name[] = PROG;

static void *child(void *arg)
{
	return arg;
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

/* The creator: warm-up, then the timed run. */
static void *creator(void *arg)
{
	struct run *r = arg;
	unsigned long warmup = r->o->fibers / 100;
	uint64_t start;

	create_join(r, warmup ? warmup : 1);
	start = bench_now_ns();
	create_join(r, r->o->fibers);
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

	bench_check_duration("fiber", r->elapsed_ns, "--fibers");
	bench_context_finish();
	/* No tool to imitate: --format compat prints the table. */
	if (o->c.format != BENCH_FORMAT_JSON) {
		printf("create-join: from %s, batch %lu, features: %s\n", from,
		       o->batch, features);
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
	bench_json_metrics();
	bench_json_double("ns_per_fiber", ns);
	bench_json_double("fibers_per_sec", rate);
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
		BENCH_ULONG(0, "batch", "B", &o->batch, 1, BATCH_MAX,
			    "create B fibers, then join the B (1: each\n"
			    "fiber is joined before the next is made)"),
		BENCH_CHOICE(0, "from", "fiber|main", &o->from, from_names,
			     "who creates: a fiber pinned to worker 0, or\n"
			     "the main thread"),
		BENCH_OPTS_RUNTIME(&o->c),
	};

	*o = (struct options){ .fibers = FIBERS_DEFAULT,
			       .batch = 1,
			       .c.workers = 1 };
	bench_parse(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
		    intro_text, outro_text);
	bench_common_finish(&o->c, false);
	o->from_main = o->from == 1;
	if (o->batch > o->fibers)
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
	if (!r.handles)
		bench_die("out of memory for a batch of %lu", o.batch);
	features = bench_start_runtime(o.c.workers, o.c.features);
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
	return 0;
}
