/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sim.h - fiber-sim, a deterministic discrete-event simulator of libfiber's
 * scheduler (doc/simulator.md).
 *
 * The simulator links the library's own topology and placement layers
 * (lib/topo, lib/place: the same objects the runtime links) and plays the
 * scheduler core itself: simulated workers, one per PU of the topology,
 * fill struct fb_pworker, struct fb_pfiber and struct fb_place_view as the
 * runtime does (sched/core.c, sched/idle.c, sched/balance.c), call the
 * placement decisions with a virtual clock, and charge the time each step
 * costs from an explicit cost model (cost.c).  Workloads are fiber state
 * machines (workloads.c) over simulated sync objects (objects.c) that keep
 * the wake rules of lib/sync.
 *
 * Everything is single-threaded and driven by one event heap; every random
 * draw comes from the simulator's own generator, seeded by --seed, and from
 * the workers' placement generators (pw.rng), which it seeds too.  The same
 * seed therefore gives the same output bytes.
 */
#ifndef FB_SIM_H
#define FB_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "place/place.h"
#include "topo/topo.h"
#include "topo/view.h"

/* Mirrors of the scheduler's constants (sched/sched.h); mirror.c checks
 * at compile time that they agree. */
#define SIM_TICK_SWITCHES 64   /* FB_TICK_SWITCHES */
#define SIM_TICK_NS 1000000ull /* FB_TICK_NS */
#define SIM_RUNNEXT_STREAK 64  /* FB_RUNNEXT_STREAK */
#define SIM_BAL_LEVELS 8       /* FB_BAL_LEVELS */
#define SIM_WF_SYNC FB_PLACE_WF_SYNC
#define SIM_MAX_WORKERS FB_MAX_WORKERS
#define SIM_MAX_FIBERS (1 << 18) /* live and dead records of one run */
#define SIM_PARAM_MAX 1e9	 /* the largest workload parameter */

#define SIM_US 1000ull
#define SIM_MS 1000000ull
#define SIM_S 1000000000ull

/* ---- the cost model (cost.c) ---------------------------------------------- */

/* Distance between two workers, for every cost that moves a cache line. */
enum sim_dist {
	SIM_D_SAME, /* the same worker */
	SIM_D_SMT,  /* SMT siblings: one core, shared L1 and L2 */
	SIM_D_LLC,  /* one last-level cache */
	SIM_D_PKG,  /* one package, another LLC (or another sub-NUMA node) */
	SIM_D_NUMA, /* another package */
	SIM_D_NR
};

/*
 * Every parameter, in ns unless its name says otherwise; cost.c has the
 * table with each value's provenance, which --help prints.
 */
struct sim_cost {
	double line[SIM_D_NR]; /* one cache-line transfer, by distance */
	double switch_ns;      /* a fiber switch with schedule()'s path */
	double select_ns;      /* fb_place_select_wake() besides its probes */
	double pipe_op_ns;     /* one fiber_pipe read or write, local */
	double sem_op_ns;      /* one fiber_sem post or wait, local */
	double futex_wake_ns;  /* the waker's FUTEX_WAKE (or eventfd) call */
	double sleep_exit_ns;  /* a woken sleeper: wake to running */
	double poll_pause_ns;  /* the poll loop's granularity */
	double drain_ns;       /* a wakelist drain: lock and unlock */
	double drain_fiber_ns; /* ... per fiber queued */
	double create_ns;      /* fiber_create on the creator */
	double exit_ns;	       /* a fiber's exit and reap */
	double lb_base_ns;     /* one balance() besides reading workers */
	double blocked_update_ns; /* one decay of a worker's blocked load */
	double refill_mlp;	  /* cache misses in flight during a refill */
	double smt_speed[5];	  /* per-thread speed, index = busy threads
				   (or the highest busy thread + 1) */
	double smt_by_index;	  /* 1: a core's mode is set by its highest
				   busy thread (POWER7), 0: by how many */
	double little_speed;	  /* speed of a worker of a lower CPU kind */
	double poll_us;		  /* LIBFIBER_IDLE_POLL_US */
	double victim_check_ns;	  /* legacy idle path: victim_exists()
				   cadence while polling */
	double timer_slack_ns;	  /* a sleeper woken by its own timer */
};

/* One parameter of the table: name, field, unit, where its value comes
 * from. */
struct sim_param {
	const char *name;
	size_t offset; /* in struct sim_cost */
	double def;
	const char *unit;
	const char *source;
};

extern const struct sim_param sim_params[];
extern const int sim_nr_params;

/* sim_cost_default - the table's values into @c. */
void sim_cost_default(struct sim_cost *c);
/* sim_cost_set - "name=value[,name=value...]"; returns 0 or -1 with a
 * message on stderr. */
int sim_cost_set(struct sim_cost *c, const char *spec);
/* sim_cost_help - the table, for --help. */
void sim_cost_help(FILE *out);

/* ---- fibers ------------------------------------------------------------- */

enum sim_fstate { SF_FREE, SF_RUNNABLE, SF_RUNNING, SF_PARKED, SF_DEAD };

/* What a fiber does next (struct sim_prog's answer). */
enum sim_act {
	SIM_COMPUTE, /* f->work ns of computation at full speed, then ask
			again */
	SIM_BLOCK,   /* it queued itself on an object: park */
	SIM_YIELD,   /* fiber_yield() */
	SIM_SLEEP,   /* fiber_sleep(f->work ns): park on a timer */
	SIM_EXIT,    /* return */
};

struct sim;
struct sim_fiber;

/* A workload's fiber: its step function and its kind, for statistics. */
typedef enum sim_act (*sim_step_fn)(struct sim *s, struct sim_fiber *f);

struct sim_fiber {
	struct fb_pfiber pf; /* the placement record placement reads */
	int id;
	enum sim_fstate state;
	int worker; /* where it is queued or runs, -1 */
	int link;   /* next in a run queue, wakelist or wait queue, -1 */
	uint64_t off_worker_at; /* its old worker has left its stack from
				   this time on (on_worker) */
	uint64_t wake_ns;	/* when it was last woken or created */
	bool lat_pending;	/* wake_ns waits to be matched by a run */
	bool first_run;		/* never ran */
	double work;		/* SIM_COMPUTE/SLEEP amount, ns */
	double left;		/* remaining work of the running segment */
	double refill;		/* cache refill owed to its next segment */
	uint64_t seg_start;	/* the segment's current rate began here */
	double rate;		/* its current speed */
	double ws_kb;		/* working set refilled after a migration */
	uint64_t io_got;	/* what a waker handed over (objects.c) */
	bool io_fed;		/* ... and that it did */
	int joiner;		/* fiber waiting in its join, -1 */
	bool exited;		/* finished (for a join that comes later) */
	bool detached;		/* freed at exit; else at its join */
	/* The workload's state. */
	sim_step_fn step;
	int kind; /* workload-defined role */
	int pc;
	long a, b, c, d;
	void *obj;
	uint64_t t0;
};

/* ---- workers ------------------------------------------------------------ */

enum sim_wmode {
	SW_RUN,	  /* a fiber's segment runs */
	SW_POLL,  /* idle, polling */
	SW_SLEEP, /* idle, asleep on the futex (or epoll) */
	SW_WAKE,  /* woken or noticing: its idle loop runs at wake_at */
};

struct sim_timer {
	uint64_t at;
	int fiber;
};

struct sim_counters {
#define FB_COUNTER(name, desc) uint64_t name;
#include "sched/counters.h"
#undef FB_COUNTER
};

struct sim_worker {
	int id;
	int core;	 /* first worker of its core */
	int pkg;	 /* package index */
	int thread;	 /* index among its core's workers */
	int curr;	 /* running fiber, -1 in the idle loop */
	int prev_switch; /* fiber just left for the idle loop, -1 */
	int runnext;
	unsigned runnext_streak;
	int rq_head, rq_tail; /* FIFO of fiber ids */
	int wl_head;	      /* wakelist, LIFO */
	enum sim_wmode mode;
	uint64_t gen;	/* invalidates this worker's pending events */
	uint64_t ticks; /* scheduling points (fb_sched_tick_maybe) */
	uint64_t next_tick_ns;
	uint64_t next_sis_refresh_ns;
	bool busy; /* bal.busy: ran fibers since it last went idle */
	bool migrating;
	int migrate_to;
	int push_fiber;
	bool poller;		/* holds the poller flag while asleep */
	bool steal_force;	/* bal.steal_force: the next steal searches */
	uint64_t next_steal_ns; /* bal.next_steal_ns: the search's limit */
	uint64_t poll_from;	/* its poll loop starts here, after the idle
				   path's own work (balance, decays) */
	double speed;		/* the CPU kind's factor */
	/* timers armed by its fibers */
	struct sim_timer *timers;
	int nr_timers, cap_timers;
	/* statistics */
	uint64_t busy_ns, busy_since;
	struct sim_counters cnt;
	uint32_t nr_lb[SIM_BAL_LEVELS], nr_pulled[SIM_BAL_LEVELS];
	uint32_t nr_asym[SIM_BAL_LEVELS], nr_ni_skips[SIM_BAL_LEVELS];
};

/* ---- metrics ------------------------------------------------------------ */

/* A log-linear histogram of ns values: 64 sub-buckets per power of two
 * (about 1.6% resolution). */
#define SIM_HIST_SUB 64
#define SIM_HIST_BUCKETS (64 * SIM_HIST_SUB)
struct sim_hist {
	uint64_t n, sum, max, min;
	uint32_t *b; /* SIM_HIST_BUCKETS */
};
void sim_hist_add(struct sim_hist *h, uint64_t v);
/* The p-th percentile in ns, or NAN where @h holds no sample: no figure,
 * which the reports print as n/a and null, rather than a latency of 0. */
double sim_hist_pct(const struct sim_hist *h, double p);
/* The mean and the largest sample in ns, NAN the same way. */
double sim_hist_mean(const struct sim_hist *h);
double sim_hist_max(const struct sim_hist *h);
void sim_hist_free(struct sim_hist *h);

/* What every run measures besides the counters. */
struct sim_stats {
	struct sim_hist wake_lat;      /* wake (or create) to first run */
	uint64_t migrations[SIM_D_NR]; /* runs on another worker, by distance */
	uint64_t wakes_llc_kept;       /* target shares prev's LLC */
	uint64_t wakes_idle_core;      /* target's whole core was idle */
	uint64_t wakes_idle_worker;    /* target was idle */
	uint64_t lb_by_kind[3];	       /* balances by fb_idle_kind */
	uint64_t lb_pulled_by_kind[3];
	double lb_cost_ns[3];	  /* simulated time spent balancing */
	uint64_t lb_workers_read; /* worker records group stats read */
	uint64_t idle_entries;	  /* idle loops that found no work */
	uint64_t victim_searches; /* legacy steal/poll searches */
	uint64_t victim_reads;	  /* ... and the records they read */
	double steal_cost_ns;
	uint64_t pushes_requested; /* active-balance requests */
	uint64_t pushes_refused;   /* requests the source could not honour */
	uint64_t events;	   /* events processed */
};

/* ---- the simulator ------------------------------------------------------ */

/* What the workload reports at the end (workloads.c fills it). */
struct sim_result {
	const char *metric; /* the headline's name */
	const char *unit;
	double value;
	bool lower_is_better;
	/* more named values */
	int nr_extra;
	const char *extra_name[8];
	double extra[8];
};

struct sim_workload;

struct sim_opts {
	const char *topology;
	const char *workload; /* NAME[:k=v,...] */
	const char *features; /* LIBFIBER_SCHED_FEATURES syntax */
	const char *cost;     /* name=value,... */
	uint64_t seed;
	uint64_t duration_ns;	   /* 0: until the workload ends */
	int workers;		   /* 0: one per PU */
	bool asym_smt;		   /* ASYM_PACKING on the SMT level too */
	bool legacy_idle;	   /* the idle path before the gated steal:
				      a search at every idle entry and
				      every victim_check of a poll */
	unsigned blocked_interval; /* LIBFIBER_BLOCKED_LOAD_INTERVAL_MS */
	const char *trace;	   /* file, or NULL */
	bool trace_chrome;
	bool json;
	bool quiet;
};

struct sim_event;

struct sim {
	struct sim_opts o;
	struct sim_cost c;
	struct fb_topo *topo;
	struct fb_sched_view *view;
	struct fb_place_global g;
	struct fb_place_view v;
	int n; /* workers */
	struct fb_pworker *pw;
	struct fb_pworker **pp;
	struct sim_worker *w;
	/* fibers, in chunks so that records never move */
	struct sim_fiber **chunk;
	int nr_chunks, nr_fibers, free_fiber, nr_live;
	/* events */
	struct sim_event *heap;
	size_t nr_heap, cap_heap;
	uint64_t seq;
	uint64_t now;	 /* the current event's time */
	uint64_t cursor; /* the acting worker's CPU time within it */
	uint64_t end_ns;
	bool stop;
	bool finished;	   /* the workload called sim_finish() */
	int nr_deadlocked; /* fibers blocked for good at the end (sim_run) */
	uint64_t rng;
	/* the workload */
	const struct sim_workload *wl;
	void *wl_state;
	struct sim_result res;
	struct sim_stats st;
	/* output */
	FILE *trace;
	bool trace_first;
	uint64_t trace_lines;
	int poller_held; /* worker holding the poller flag, -1 */
	int nr_sleeping; /* workers in SW_SLEEP (the runtime's nr_sleepers) */
};

/* engine.c */
int sim_open(struct sim *s, const struct sim_opts *o, char *err, size_t errlen);
/*
 * sim_run - run until the workload ends or the duration is over.  A run
 * whose workload did not end, and in which fibers are blocked while none
 * can run and no timer is armed, is a deadlock: s->nr_deadlocked says how
 * many fibers wait for good, and the result means nothing.
 */
void sim_run(struct sim *s);
void sim_close(struct sim *s);
struct sim_fiber *sim_fiber(struct sim *s, int id);
/* sim_create - a fiber with @step, created by @parent (NULL: foreign,
 * before the run) and allowed on @mask (NULL: everywhere; the fiber takes
 * ownership). */
struct sim_fiber *sim_create(struct sim *s, struct sim_fiber *parent,
			     sim_step_fn step, int kind, cpu_set_t *mask);
/* sim_fiber_release - free an exited fiber that was joined. */
void sim_fiber_release(struct sim *s, struct sim_fiber *f);
/* sim_wake - @waker (the running fiber, or NULL) wakes parked @f. */
void sim_wake(struct sim *s, struct sim_fiber *waker, struct sim_fiber *f,
	      unsigned flags);
/* sim_charge - the running fiber spends @ns of CPU in an operation. */
void sim_charge(struct sim *s, double ns);
/* sim_rand - the simulator's generator: 64 random bits. */
uint64_t sim_rand(struct sim *s);
/* sim_time - the acting worker's clock. */
uint64_t sim_time(const struct sim *s);
/* sim_finish - the workload is done: stop after this event. */
void sim_finish(struct sim *s);
cpu_set_t *sim_mask_range(int from, int to);
int sim_dist(const struct sim *s, int a, int b);

/* objects.c: the sync objects workloads use, with lib/sync's wake rules. */
struct sim_waitq {
	int head, tail; /* fiber ids, linked by sim_fiber.link */
};
struct sim_pipe {
	uint64_t capacity, count;
	struct sim_waitq readers, writers;
	int last; /* worker that last held its lock, -1 */
};
struct sim_sem {
	uint64_t count;
	struct sim_waitq waiters;
	int last;
};
struct sim_barrier {
	unsigned count, arrived;
	struct sim_waitq waiters;
	int last;
};
void sim_pipe_init(struct sim_pipe *p, uint64_t capacity);
void sim_sem_init(struct sim_sem *m, uint64_t count);
void sim_barrier_init(struct sim_barrier *b, unsigned count);
/* Each returns true when the operation completed, false when @f queued
 * itself (the step then returns SIM_BLOCK and calls again when woken). */
bool sim_pipe_write(struct sim *s, struct sim_fiber *f, struct sim_pipe *p,
		    uint64_t *left);
bool sim_pipe_read(struct sim *s, struct sim_fiber *f, struct sim_pipe *p,
		   uint64_t want, uint64_t *got);
void sim_sem_post(struct sim *s, struct sim_fiber *f, struct sim_sem *m);
bool sim_sem_wait(struct sim *s, struct sim_fiber *f, struct sim_sem *m);
bool sim_barrier_wait(struct sim *s, struct sim_fiber *f,
		      struct sim_barrier *b);
/* sim_join - wait for @child to exit. */
bool sim_join(struct sim *s, struct sim_fiber *f, struct sim_fiber *child);

/* workloads.c */
struct sim_workload {
	const char *name;
	const char *help; /* the parameters */
	int (*setup)(struct sim *s, const char *params, char *err,
		     size_t errlen);
	void (*result)(struct sim *s, struct sim_result *r);
	void (*cleanup)(struct sim *s);
};
extern const struct sim_workload *const sim_workloads[];
const struct sim_workload *sim_workload_find(const char *name, size_t len);
/* sim_param_ulong - @key's value in "k=v,k=v" @params, or @def; -1 and a
 * message in @err for a malformed or unknown key (@known: NULL-terminated
 * list of the workload's keys). */
int sim_params_check(const char *params, const char *const *known, char *err,
		     size_t errlen);
double sim_param(const char *params, const char *key, double def);

/* report.c */
/* sim_totals - the counters summed over the workers and the foreign row. */
void sim_totals(struct sim *s, struct sim_counters *t);
void sim_report_json(struct sim *s, FILE *out);
void sim_report_text(struct sim *s, FILE *out);
void sim_trace_wake(struct sim *s, int waker, int prev, int target,
		    const struct fb_wake_result *r, const char *path,
		    int fiber);
void sim_trace_event(struct sim *s, const char *what, int worker, int fiber,
		     int other, long value);
void sim_trace_run(struct sim *s, int worker, int fiber, uint64_t from,
		   uint64_t to);
void sim_trace_open(struct sim *s);
void sim_trace_close(struct sim *s);

/* experiments.c */
/*
 * sim_experiment - run experiment @name ("list": name them) with @base's
 * seed, each case with its feature off and on, and print its table on
 * @out.  @quick: the reduced sizes the test suite runs.  Returns 0, or -1
 * with a message on stderr for an unknown name.
 */
int sim_experiment(const char *name, const struct sim_opts *base, bool quick,
		   FILE *out);
/* sim_experiments_help - one line per experiment, for --help. */
void sim_experiments_help(FILE *out);

#endif /* FB_SIM_H */
