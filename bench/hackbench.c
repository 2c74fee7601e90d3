/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hackbench - many senders and receivers in groups, fibers against kernel
 * threads, with the parameters of rt-tests' `hackbench -T -p`.
 *
 * A group has F receivers, each reading its own pipe, and F senders.  Every
 * sender writes L messages of D bytes to every receiver of its group, in
 * the order receiver 0, 1, ..., F-1, L times over; so each receiver gets
 * F * L messages (F * L * D bytes) and the run moves
 *
 *	messages = G * F * F * L
 *
 * messages.  Senders of a group share each receiver's pipe; a receiver only
 * counts bytes, so writes from several senders may interleave.  In fiber
 * mode the members are fibers and the pipes fiber_pipe objects, placed by
 * the scheduler (no affinity: waking placement is what this exercises); in
 * threads mode they are unpinned pthreads on OS pipes, as `hackbench -T -p`.
 *
 * Every member waits at a start gate (a barrier of all of them) once it is
 * created; the clock starts when the first passes it and stops when the last
 * receiver has its last byte:
 *
 *	seconds          = (latest receiver end - earliest start) / 1e9
 *	messages_per_sec = messages / seconds
 *
 * --spinners N overloads the fiber mode's LLC the way Abel Wu's mail
 * (doc/scheduler.md 2) is about: fiber i < N is pinned to worker i and
 * holds it for the whole run, so those workers are never idle and their
 * utilisation is 1024.  A spinner sleeps in usleep() between yields: the
 * scheduler sees a fiber running all the time, but it costs no host CPU,
 * which on a machine with fewer CPUs than workers would otherwise be taken
 * from the members.  The groups start SPIN_WARMUP_MS after the spinners,
 * when PELT has saturated.  With --spin-senders as well, senders may run
 * only on the spinners' workers and receivers only on the others: every
 * wakeup of a sender then finds all the workers it may use busy, while
 * the receivers' workers idle between messages and keep setting the
 * has_idle_cores hint (the arrangement of the H1 test in
 * tests/test-wake-runtime.c).  The fiber mode also reports what its wake
 * placements cost (the runtime's counters over the run):
 *
 *	probes_per_wakeup  = wake_probes / wake_placements
 *	core_scans_per_wakeup = scan_idle_cores / wake_placements
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
#include <unistd.h>

#include "bench.h"
#include "fiber.h"

#define PROG "hackbench"
/* Defaults of rt-tests' hackbench. */
#define GROUPS_DEFAULT 10UL
#define FDS_DEFAULT 20UL
#define LOOPS_DEFAULT 100UL
#define DATASIZE_DEFAULT 100UL
#define GROUPS_MAX 10000UL
#define FDS_MAX 1000UL
#define LOOPS_MAX 100000000UL
/* A write of up to PIPE_BUF (4096) bytes is atomic on an OS pipe. */
#define DATASIZE_MAX 4096UL
#define WORKERS_MAX BENCH_WORKERS_MAX
/* Bytes a fiber pipe buffers: 64 KiB, the default size of an OS pipe. */
#define FPIPE_CAPACITY 65536
/* A spinner's usleep() between two yields: picked, short next to a 1 ms
 * tick and long enough that 48 of them cost little host CPU. */
#define SPIN_SLICE_US 500
/* PELT's utilisation is 1024 x (1 - 2^(-t / 32 ms)): 1023 at 320 ms; the
 * margin covers ticks sampled every 64 scheduling points. */
#define SPIN_WARMUP_MS 500

struct options {
	unsigned long groups;
	unsigned long fds;
	unsigned long loops;
	unsigned long datasize;
	unsigned int spinners;
	bool spin_senders;
	bool pipe; /* -p: what runs anyway */
	struct bench_common c;
};

struct run;

/* How members talk: fiber pipes or OS pipes, named by their index in the
 * run (group * fds + receiver).  Both return 0 or an errno. */
struct transport {
	int (*send)(const struct run *run, unsigned long pipe, const void *buf,
		    size_t len);
	/* Reads up to @len bytes into @buf, *@got of them; 0 at end of file. */
	int (*recv)(const struct run *run, unsigned long pipe, void *buf,
		    size_t len, size_t *got);
	void (*gate)(void);
};

/*
 * A sender or a receiver.  Its own fields are written by itself and read by
 * main after the join; the pipes belong to the run.
 */
struct member {
	const struct options *o;
	struct run *run;
	unsigned long group;
	unsigned long index; /* in its group */
	uint64_t start_ns;
	uint64_t end_ns;
	unsigned long long moved; /* messages sent, or bytes received */
	int err;
};

struct run {
	fiber_pipe_t **fpipe;  /* [group * fds + receiver] */
	int (*fd)[2];	       /* [group * fds + receiver]: read, write end */
	struct member *member; /* receivers, then senders */
	unsigned long nr;      /* members */
};

struct result {
	const char *mode;
	unsigned long long sent;
	unsigned long long received;
	uint64_t elapsed_ns;
	/* fiber mode: counter deltas over the run */
	long long placements, probes, core_scans;
};

const char bench_name[] = PROG;

static fiber_barrier_t fiber_gate;
static pthread_barrier_t thread_gate;

static unsigned long pipe_of(const struct member *m, unsigned long receiver)
{
	return m->group * m->o->fds + receiver;
}

/* Fiber transport.  Inlined into the members (see send_all()), as the
 * pipe calls are, so that a message costs the library's call and not
 * one more of this program's around it. */

static inline __attribute__((always_inline)) int
fpipe_send(const struct run *run, unsigned long pipe, const void *buf,
	   size_t len)
{
	size_t done = 0;
	int err = fiber_pipe_write(run->fpipe[pipe], buf, len, &done);

	return !err && done != len ? EIO : err;
}

static inline __attribute__((always_inline)) int
fpipe_recv(const struct run *run, unsigned long pipe, void *buf, size_t len,
	   size_t *got)
{
	*got = 0;
	return fiber_pipe_read(run->fpipe[pipe], buf, len, got);
}

static void fiber_wait_gate(void)
{
	fiber_barrier_wait(&fiber_gate);
}

static const struct transport fiber_transport = {
	.send = fpipe_send,
	.recv = fpipe_recv,
	.gate = fiber_wait_gate,
};

/* Thread transport: blocking write(2) and read(2) on OS pipes. */

static int os_send(const struct run *run, unsigned long pipe, const void *buf,
		   size_t len)
{
	ssize_t n;

	do
		n = write(run->fd[pipe][1], buf, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno;
	return (size_t)n == len ? 0 : EIO;
}

static int os_recv(const struct run *run, unsigned long pipe, void *buf,
		   size_t len, size_t *got)
{
	ssize_t n;

	do
		n = read(run->fd[pipe][0], buf, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno;
	*got = n;
	return 0;
}

static void os_wait_gate(void)
{
	pthread_barrier_wait(&thread_gate);
}

static const struct transport thread_transport = {
	.send = os_send,
	.recv = os_recv,
	.gate = os_wait_gate,
};

/*
 * The members, common to both transports.  Inlined whatever gcc's size
 * limits (plain "inline" was not: each message went through the
 * transport's function pointer and one more call frame), and instantiated
 * once per transport below, so that a message costs the transport's own
 * call -- fiber_pipe_write(), write(2) -- with the member's constants in
 * registers: the figure is the runtime's, not this loop's.
 */

static inline __attribute__((always_inline)) void
send_all(struct member *m, const struct transport *tp)
{
	const struct run *run = m->run;
	unsigned long i, r, fds = m->o->fds, loops = m->o->loops;
	unsigned long first = pipe_of(m, 0);
	unsigned long long sent = 0;
	size_t len = m->o->datasize;
	char buf[DATASIZE_MAX];
	int err = 0;

	memset(buf, 's', len);
	tp->gate();
	m->start_ns = bench_now_ns();
	for (i = 0; i < loops && !err; i++) {
		for (r = 0; r < fds; r++) {
			err = tp->send(run, first + r, buf, len);
			if (err)
				break;
			sent++;
		}
	}
	m->end_ns = bench_now_ns();
	m->moved = sent;
	m->err = err;
}

static inline __attribute__((always_inline)) void
recv_all(struct member *m, const struct transport *tp)
{
	const struct run *run = m->run;
	unsigned long pipe = pipe_of(m, m->index);
	unsigned long long want, got_all = 0;
	size_t got = 0, len = m->o->datasize;
	char buf[DATASIZE_MAX];
	int err = 0;

	want = (unsigned long long)m->o->fds * m->o->loops * len;
	tp->gate();
	m->start_ns = bench_now_ns();
	while (got_all < want) {
		err = tp->recv(run, pipe, buf, len, &got);
		if (!err && !got)
			err = EPIPE;
		if (err)
			break;
		got_all += got;
	}
	m->end_ns = bench_now_ns();
	m->moved = got_all;
	m->err = err;
}

/* The members' entry points, a sender and a receiver per transport. */
#define MEMBER(name, all, tp)                                                  \
	static void *name(void *arg)                                           \
	{                                                                      \
		all(arg, &tp);                                                 \
		return NULL;                                                   \
	}
MEMBER(fiber_sender, send_all, fiber_transport)
MEMBER(fiber_receiver, recv_all, fiber_transport)
MEMBER(thread_sender, send_all, thread_transport)
MEMBER(thread_receiver, recv_all, thread_transport)
#undef MEMBER

static void run_setup(const struct options *o, struct run *run)
{
	unsigned long i, nr_pipes = o->groups * o->fds;
	struct member *m;

	run->nr = 2 * nr_pipes;
	run->member = calloc(run->nr, sizeof(*run->member));
	run->fpipe = calloc(nr_pipes, sizeof(*run->fpipe));
	run->fd = calloc(nr_pipes, sizeof(*run->fd));
	if (!run->member || !run->fpipe || !run->fd)
		bench_die("out of memory for %lu members", run->nr);
	for (i = 0; i < run->nr; i++) {
		m = &run->member[i];
		m->o = o;
		m->run = run;
		m->group = (i % nr_pipes) / o->fds;
		m->index = i % o->fds;
	}
}

static void run_free(struct run *run)
{
	free(run->member);
	free(run->fpipe);
	free(run->fd);
}

/*
 * Check the counts and fill @r: every sender sent fds * loops messages and
 * every receiver got fds * loops * datasize bytes.
 */
static void run_check(const struct options *o, const struct run *run,
		      const char *mode, struct result *r)
{
	unsigned long i, nr_pipes = run->nr / 2;
	uint64_t start = UINT64_MAX, end = 0;
	const struct member *m;

	*r = (struct result){ .mode = mode };
	for (i = 0; i < run->nr; i++) {
		m = &run->member[i];
		if (m->err)
			bench_die("%s %s %lu of group %lu: %s", mode,
				  i < nr_pipes ? "receiver" : "sender",
				  m->index, m->group, strerror(m->err));
		start = m->start_ns < start ? m->start_ns : start;
		if (i < nr_pipes) {
			r->received += m->moved / o->datasize;
			end = m->end_ns > end ? m->end_ns : end;
		} else {
			r->sent += m->moved;
		}
	}
	if (r->sent != r->received ||
	    r->sent != (unsigned long long)nr_pipes * o->fds * o->loops)
		bench_die(
			"%s: %llu messages sent, %llu received, %llu expected",
			mode, r->sent, r->received,
			(unsigned long long)nr_pipes * o->fds * o->loops);
	r->elapsed_ns = end - start;
}

/* Fiber mode. */

struct spinners {
	fiber_t *f;
	unsigned int nr;
	int stop; /* atomic */
};

static void *spinner(void *arg)
{
	const int *stop = arg;

	while (!__atomic_load_n(stop, __ATOMIC_RELAXED)) {
		usleep(SPIN_SLICE_US);
		fiber_yield();
	}
	return NULL;
}

/* spinners_start - one spinner pinned to each of workers 0..nr-1, then
 * wait until their utilisation has saturated. */
static void spinners_start(struct spinners *sp, unsigned int nr)
{
	fiber_attr_t a;
	cpu_set_t set;
	unsigned int i;
	int err;

	*sp = (struct spinners){ .nr = nr };
	if (!nr)
		return;
	sp->f = calloc(nr, sizeof(*sp->f));
	if (!sp->f)
		bench_die("out of memory for %u spinners", nr);
	for (i = 0; i < nr; i++) {
		fiber_attr_init(&a);
		CPU_ZERO(&set);
		CPU_SET(i, &set);
		fiber_attr_setaffinity(&a, sizeof(set), &set);
		err = fiber_create(&sp->f[i], &a, spinner, &sp->stop);
		if (err)
			bench_die("fiber_create (spinner %u): %s", i,
				  strerror(err));
	}
	usleep(SPIN_WARMUP_MS * 1000);
}

static void spinners_stop(struct spinners *sp)
{
	__atomic_store_n(&sp->stop, 1, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < sp->nr; i++)
		fiber_join(sp->f[i], NULL);
	free(sp->f);
}

static void counters_read(long long c[3])
{
	c[0] = fiber_stats_counter("wake_placements");
	c[1] = fiber_stats_counter("wake_probes");
	c[2] = fiber_stats_counter("scan_idle_cores");
}

/* member_attr - where member @i of @nr may run: anywhere, or with
 * --spin-senders senders on the spinners' workers, receivers elsewhere. */
static void member_attr(const struct options *o, unsigned long i,
			unsigned long nr, fiber_attr_t *a)
{
	bool sender = i >= nr / 2;
	cpu_set_t set;
	unsigned int w;

	fiber_attr_init(a);
	if (!o->spin_senders)
		return;
	CPU_ZERO(&set);
	for (w = 0; w < o->c.workers; w++)
		if ((w < o->spinners) == sender)
			CPU_SET(w, &set);
	fiber_attr_setaffinity(a, sizeof(set), &set);
}

static void run_fibers(const struct options *o, struct result *r)
{
	struct run run = { 0 };
	struct spinners sp;
	long long c0[3], c1[3];
	fiber_attr_t a;
	unsigned long i;
	fiber_t *f;
	int err;

	spinners_start(&sp, o->spinners);
	counters_read(c0);
	run_setup(o, &run);
	f = calloc(run.nr, sizeof(*f));
	if (!f)
		bench_die("out of memory for %lu fibers", run.nr);
	for (i = 0; i < run.nr / 2; i++) {
		err = fiber_pipe_create(&run.fpipe[i], FPIPE_CAPACITY);
		if (err)
			bench_die("fiber_pipe_create: %s", strerror(err));
	}
	fiber_barrier_init(&fiber_gate, run.nr);
	for (i = 0; i < run.nr; i++) {
		member_attr(o, i, run.nr, &a);
		err = fiber_create(&f[i], &a,
				   i < run.nr / 2 ? fiber_receiver :
						    fiber_sender,
				   &run.member[i]);
		if (err)
			bench_die("fiber_create: %s", strerror(err));
	}
	for (i = 0; i < run.nr; i++) {
		err = fiber_join(f[i], NULL);
		if (err)
			bench_die("fiber_join: %s", strerror(err));
	}
	counters_read(c1);
	spinners_stop(&sp);
	run_check(o, &run, "fiber", r);
	r->placements = c1[0] - c0[0];
	r->probes = c1[1] - c0[1];
	r->core_scans = c1[2] - c0[2];
	for (i = 0; i < run.nr / 2; i++)
		fiber_pipe_destroy(run.fpipe[i]);
	fiber_barrier_destroy(&fiber_gate);
	free(f);
	run_free(&run);
}

/* Threads mode. */

static void run_threads(const struct options *o, struct result *r)
{
	struct run run = { 0 };
	pthread_attr_t attr;
	unsigned long i;
	pthread_t *t;
	int err;

	run_setup(o, &run);
	t = calloc(run.nr, sizeof(*t));
	if (!t)
		bench_die("out of memory for %lu threads", run.nr);
	for (i = 0; i < run.nr / 2; i++) {
		if (pipe(run.fd[i]))
			bench_die("pipe: %s (try fewer --groups or --fds)",
				  strerror(errno));
	}
	pthread_barrier_init(&thread_gate, NULL, run.nr);
	/* Small stacks, as hackbench: there may be thousands. */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (i = 0; i < run.nr; i++) {
		err = pthread_create(&t[i], &attr,
				     i < run.nr / 2 ? thread_receiver :
						      thread_sender,
				     &run.member[i]);
		if (err)
			bench_die("pthread_create: %s", strerror(err));
	}
	pthread_attr_destroy(&attr);
	for (i = 0; i < run.nr; i++)
		pthread_join(t[i], NULL);
	run_check(o, &run, "threads", r);
	for (i = 0; i < run.nr / 2; i++) {
		close(run.fd[i][0]);
		close(run.fd[i][1]);
	}
	pthread_barrier_destroy(&thread_gate);
	free(t);
	run_free(&run);
}

/* Output. */

static double seconds(const struct result *r)
{
	return r->elapsed_ns / 1e9;
}

static double messages_per_sec(const struct result *r)
{
	return r->received / seconds(r);
}

static double per_wakeup(const struct result *r, long long n)
{
	return r->placements ? (double)n / (double)r->placements : 0.0;
}

static void print_json(const struct options *o, const struct result *r)
{
	bench_json_open("hackbench", r->mode);
	bench_json_uint("workers", o->c.workers);
	bench_json_uint("spinners", o->spinners);
	bench_json_uint("spin_senders", o->spin_senders);
	bench_json_uint("groups", o->groups);
	bench_json_uint("fds", o->fds);
	bench_json_uint("loops", o->loops);
	bench_json_uint("datasize", o->datasize);
	bench_json_metrics();
	bench_json_uint("messages_sent", r->sent);
	bench_json_uint("messages_received", r->received);
	bench_json_double("seconds", seconds(r));
	bench_json_double("messages_per_sec", messages_per_sec(r));
	if (!strcmp(r->mode, "fiber")) {
		bench_json_double("probes_per_wakeup",
				  per_wakeup(r, r->probes));
		bench_json_double("core_scans_per_wakeup",
				  per_wakeup(r, r->core_scans));
	}
	bench_json_close();
}

/*
 * The output of rt-tests' hackbench: its two header lines (tasks: every
 * sender and receiver) and "Time: S.mmm", the seconds of the run.
 */
static void print_compat(const struct options *o, const struct result *r)
{
	bool threads = !strcmp(r->mode, "threads");

	printf("Running in %s mode with %lu groups using %lu file "
	       "descriptors each (== %lu tasks)\n",
	       threads ? "threaded" : "fiber", o->groups, 2 * o->fds,
	       2 * o->groups * o->fds);
	printf("Each sender will pass %lu messages of %lu bytes\n", o->loops,
	       o->datasize);
	printf("Time: %llu.%03llu\n",
	       (unsigned long long)(r->elapsed_ns / 1000000000u),
	       (unsigned long long)(r->elapsed_ns % 1000000000u / 1000000u));
}

static void print_table(const struct options *o, const struct result *res,
			int nr, const char *features)
{
	int i;

	printf("hackbench: %lu groups x (%lu senders -> %lu receivers), "
	       "%lu loops, %lu-byte messages, features: %s\n",
	       o->groups, o->fds, o->fds, o->loops, o->datasize, features);
	printf("%-8s %7s %12s %10s %14s\n", "mode", "workers", "messages",
	       "seconds", "messages/s");
	for (i = 0; i < nr; i++)
		printf("%-8s %7u %12llu %10.3f %14.0f\n", res[i].mode,
		       o->c.workers, res[i].received, seconds(&res[i]),
		       messages_per_sec(&res[i]));
	for (i = 0; i < nr; i++)
		if (!strcmp(res[i].mode, "fiber"))
			printf("fiber wakeups: %lld placed; per wakeup %.2f "
			       "probes, %.3f idle-core scans\n",
			       res[i].placements,
			       per_wakeup(&res[i], res[i].probes),
			       per_wakeup(&res[i], res[i].core_scans));
	if (nr == 2)
		printf("ratio threads/fiber (seconds): %.2f\n",
		       seconds(&res[1]) / seconds(&res[0]));
}

/* Command line. */

static const char intro_text[] =
	"Groups of senders and receivers exchange fixed-size messages over\n"
	"fiber pipes; the same runs with kernel threads over OS pipes, as\n"
	"rt-tests' `hackbench -T -p`, whose short options these are.\n";

static const char outro_text[] =
	"messages = G * F * F * L; the clock runs from the start gate to the\n"
	"last receiver's last byte:\n"
	"  seconds          = elapsed_ns / 1e9\n"
	"  messages_per_sec = messages / seconds\n"
	"Without --fibers or --threads both run, and a last line gives the\n"
	"ratio of their seconds (threads / fiber); threads are not pinned.\n"
	"The fiber mode also reports the runtime's wake-placement counters\n"
	"over the run:\n"
	"  probes_per_wakeup     = wake_probes / wake_placements\n"
	"  core_scans_per_wakeup = scan_idle_cores / wake_placements\n";

static void parse_args(int argc, char **argv, struct options *o)
{
	const struct bench_opt opts[] = {
		BENCH_ULONG('g', "groups", "G", &o->groups, 1, GROUPS_MAX,
			    "groups"),
		BENCH_ULONG('f', "fds", "F", &o->fds, 1, FDS_MAX,
			    "senders and receivers per group"),
		BENCH_ULONG('l', "loops", "L", &o->loops, 1, LOOPS_MAX,
			    "messages each sender sends to each receiver\n"
			    "of its group"),
		BENCH_ULONG('s', "datasize", "D", &o->datasize, 1, DATASIZE_MAX,
			    "bytes per message, at most 4096"),
		BENCH_UINT(0, "spinners", "N", &o->spinners, 0, WORKERS_MAX,
			   "fiber mode: N background fibers, one pinned\n"
			   "to each of workers 0..N-1, keep those workers\n"
			   "busy (they sleep in usleep() between yields,\n"
			   "so they cost no host CPU); the groups start\n"
			   "0.5 s later"),
		BENCH_FLAG(0, "spin-senders", &o->spin_senders,
			   "with --spinners N: senders run only on workers\n"
			   "0..N-1, receivers only on the others"),
		BENCH_OPTS_MODES(&o->c, 'T'),
		BENCH_FLAG('p', "pipe", &o->pipe,
			   "pipes: always, the only transport here"),
		BENCH_OPTS_RUNTIME(&o->c),
		BENCH_REFUSED('P', "process", NULL,
			      "members are fibers, or threads with -T"),
		BENCH_REFUSED('F', "fifo", NULL,
			      "no SCHED_FIFO; fibers have no priorities"),
	};

	*o = (struct options){ .groups = GROUPS_DEFAULT,
			       .fds = FDS_DEFAULT,
			       .loops = LOOPS_DEFAULT,
			       .datasize = DATASIZE_DEFAULT,
			       .c.workers = bench_nr_cpus() };
	bench_parse(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
		    intro_text, outro_text);
	bench_common_finish(&o->c, false);
	if (o->spinners > o->c.workers) {
		fprintf(stderr,
			PROG ": --spinners %u: at most --workers (%u)\n",
			o->spinners, o->c.workers);
		exit(2);
	}
	if (o->spin_senders && (!o->spinners || o->spinners == o->c.workers)) {
		fprintf(stderr, PROG ": --spin-senders needs --spinners "
				     "between 1 and --workers - 1\n");
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct result res[2];
	struct options o;
	char *features;
	int i, nr = 0, err;

	parse_args(argc, argv, &o);
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
		bench_check_duration(res[i].mode, res[i].elapsed_ns,
				     "-l/--loops or -g/--groups");
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
	free(features);
	return 0;
}
