// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * engine.c - fiber-sim's event loop and its scheduler core: simulated
 * workers that drive the library's placement layer the way the runtime
 * does (doc/simulator.md 2).
 *
 * The model.  One binary heap of events in virtual time; per-worker state
 * in arrays.  A worker is always in one of four modes: running a fiber's
 * compute segment (SW_RUN), polling (SW_POLL), asleep (SW_SLEEP), or about
 * to run its idle loop after a wake or a notice (SW_WAKE).  An event
 * handler acts for one worker and keeps that worker's CPU clock in
 * s->cursor: every operation it performs (a switch, a wakeup's probes, a
 * remote enqueue, a balance) moves the cursor by its cost, so the next
 * segment starts later and what the cost model says an operation costs is
 * what the simulated run pays.  State changes become visible to other
 * workers at once; their reactions (a polling worker noticing, a sleeper
 * waking) are events at the cursor plus the latency the cost model gives.
 *
 * What mirrors what.  The functions below follow the runtime's call
 * sequence, function by function, with the same counters:
 *   wake, deliver, push, enqueue, drain, wake_worker, kick_idle,
 *   schedule, switch_to, finish_switch, yield   <- sched/core.c
 *   idle_loop, pick_idle, steal, idle_entry, the poll window, sleep
 *                                               <- sched/idle.c, sleep.c
 *   op_balance, detach, attach, push_request, balance_idle,
 *   balance_idle_exit, balance_sleep, balance_tick, balance_push,
 *   pelt_attach, sample                         <- sched/balance.c
 * and call the same placement entry points with the virtual clock.  Where
 * the runtime races (PARKING against a waker, a trylock) the simulator does
 * not: a handler runs to its end before the next event.  doc/simulator.md
 * lists what is left out.
 *
 * SMT.  A worker's speed is its CPU kind's factor times the SMT factor of
 * its core (sim_cost.smt_speed), recomputed for every sibling whenever one
 * of them starts or stops a segment; a running segment's remaining work is
 * then rescaled and its end event moved.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define CHUNK_BITS 10
#define CHUNK (1 << CHUNK_BITS)

enum ev_type {
	EV_SEG_END,    /* the running segment of worker id is done */
	EV_IDLE,       /* worker id runs its idle loop (noticed or woke) */
	EV_POLL_END,   /* worker id's poll window is over */
	EV_POLL_CHECK, /* the poll loop's look every 64 spins: victim_exists()
			  (legacy), steal_due() (gated) */
	EV_END,	       /* --duration-ms is over */
};

struct sim_event {
	uint64_t t, seq, gen;
	int type, id;
};

/* ---- small helpers --------------------------------------------------------- */

struct sim_fiber *sim_fiber(struct sim *s, int id)
{
	return &s->chunk[id >> CHUNK_BITS][id & (CHUNK - 1)];
}

static struct fb_pworker *pw_of(struct sim *s, int w)
{
	return &s->pw[w];
}

static int nr_running(struct sim *s, int w)
{
	return fb_load_relaxed(&s->pw[w].nr_running);
}

static void nr_running_add(struct sim *s, int w, int d)
{
	fb_store_relaxed(&s->pw[w].nr_running, nr_running(s, w) + d);
}

static bool has_work(struct sim *s, int w)
{
	return s->w[w].wl_head >= 0 || nr_running(s, w) > 0;
}

uint64_t sim_time(const struct sim *s)
{
	return s->cursor;
}

void sim_charge(struct sim *s, double ns)
{
	if (ns > 0)
		s->cursor += (uint64_t)llround(ns);
}

uint64_t sim_rand(struct sim *s)
{
	/* splitmix64 */
	uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void sim_finish(struct sim *s)
{
	s->stop = true;
	s->finished = true;
}

/* The counters of the acting worker (@w < 0: the foreign row). */
static struct sim_counters foreign_cnt;
#define COUNT(sim, who, name)                                                  \
	do {                                                                   \
		if ((who) >= 0)                                                \
			(sim)->w[(who)].cnt.name++;                            \
		else                                                           \
			foreign_cnt.name++;                                    \
	} while (0)

int sim_dist(const struct sim *s, int a, int b)
{
	const struct fb_sched_view *t = s->view;

	if (a < 0 || b < 0)
		return SIM_D_LLC;
	if (a == b)
		return SIM_D_SAME;
	if (t->core_id[a] == t->core_id[b])
		return SIM_D_SMT;
	if (t->llc_id[a] == t->llc_id[b])
		return SIM_D_LLC;
	if (s->w[a].pkg == s->w[b].pkg)
		return SIM_D_PKG;
	return SIM_D_NUMA;
}

static double line(struct sim *s, int a, int b)
{
	return s->c.line[sim_dist(s, a, b)];
}

cpu_set_t *sim_mask_range(int from, int to)
{
	cpu_set_t *m = CPU_ALLOC(SIM_MAX_WORKERS);

	CPU_ZERO_S(CPU_ALLOC_SIZE(SIM_MAX_WORKERS), m);
	for (int i = from; i <= to; i++)
		CPU_SET_S((size_t)i, CPU_ALLOC_SIZE(SIM_MAX_WORKERS), m);
	return m;
}

/* ---- the event heap -------------------------------------------------------- */

static bool ev_before(const struct sim_event *a, const struct sim_event *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void ev_push(struct sim *s, uint64_t t, int type, int id, uint64_t gen)
{
	size_t i;

	if (s->nr_heap == s->cap_heap) {
		s->cap_heap = s->cap_heap ? 2 * s->cap_heap : 1024;
		s->heap = realloc(s->heap, s->cap_heap * sizeof(*s->heap));
		if (!s->heap) {
			fprintf(stderr, "fiber-sim: out of memory\n");
			exit(1);
		}
	}
	i = s->nr_heap++;
	s->heap[i] = (struct sim_event){
		.t = t, .seq = s->seq++, .gen = gen, .type = type, .id = id
	};
	while (i > 0) {
		size_t p = (i - 1) / 2;
		struct sim_event tmp;

		if (!ev_before(&s->heap[i], &s->heap[p]))
			break;
		tmp = s->heap[p];
		s->heap[p] = s->heap[i];
		s->heap[i] = tmp;
		i = p;
	}
}

static struct sim_event ev_pop(struct sim *s)
{
	struct sim_event top = s->heap[0];
	size_t i = 0, n = --s->nr_heap;

	s->heap[0] = s->heap[n];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		struct sim_event tmp;

		if (l < n && ev_before(&s->heap[l], &s->heap[m]))
			m = l;
		if (r < n && ev_before(&s->heap[r], &s->heap[m]))
			m = r;
		if (m == i)
			break;
		tmp = s->heap[m];
		s->heap[m] = s->heap[i];
		s->heap[i] = tmp;
		i = m;
	}
	return top;
}

/* ---- run queues and wakelists ---------------------------------------------- */

static void rq_add_tail(struct sim *s, int w, struct sim_fiber *f)
{
	struct sim_worker *x = &s->w[w];

	f->link = -1;
	f->worker = w;
	if (x->rq_tail >= 0)
		sim_fiber(s, x->rq_tail)->link = f->id;
	else
		x->rq_head = f->id;
	x->rq_tail = f->id;
}

static void rq_add_head(struct sim *s, int w, struct sim_fiber *f)
{
	struct sim_worker *x = &s->w[w];

	f->worker = w;
	f->link = x->rq_head;
	x->rq_head = f->id;
	if (x->rq_tail < 0)
		x->rq_tail = f->id;
}

static struct sim_fiber *rq_pop(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	struct sim_fiber *f;

	if (x->rq_head < 0)
		return NULL;
	f = sim_fiber(s, x->rq_head);
	x->rq_head = f->link;
	if (x->rq_head < 0)
		x->rq_tail = -1;
	f->link = -1;
	return f;
}

/* rq_del - take @f (queued on @w) off the queue; @prev its predecessor or
 * NULL. */
static void rq_del(struct sim *s, int w, struct sim_fiber *prev,
		   struct sim_fiber *f)
{
	struct sim_worker *x = &s->w[w];

	if (prev)
		prev->link = f->link;
	else
		x->rq_head = f->link;
	if (x->rq_tail == f->id)
		x->rq_tail = prev ? prev->id : -1;
	f->link = -1;
}

/* on_worker - is @f still on its old worker's stack (doc/design.md 4.2)? */
static bool on_worker(struct sim *s, const struct sim_fiber *f)
{
	return f->state == SF_RUNNING || s->cursor < f->off_worker_at;
}

/* ---- SMT speed ------------------------------------------------------------- */

/* speed_of - worker @w's speed with the busy siblings of its core now. */
static double speed_of(struct sim *s, int w)
{
	const struct fb_wmask *core = s->view->core_span[w];
	int i, k = 0, hi = -1;

	fb_wmask_for_each (i, core) {
		if (i < s->n && s->w[i].mode == SW_RUN) {
			k++;
			hi = s->w[i].thread;
		}
	}
	if (s->c.smt_by_index > 0)
		k = hi + 1;
	k = k < 1 ? 1 : k > 4 ? 4 : k;
	return s->w[w].speed * s->c.smt_speed[k];
}

/*
 * seg_end - when @left ns of work at @rate, from @from, are done: at the
 * end of the clock's range when that is past it (a conversion of a
 * larger double to uint64_t is undefined).
 */
static uint64_t seg_end(uint64_t from, double left, double rate)
{
	double d = ceil(left / rate);

	if (!(d < (double)(UINT64_MAX - from)))
		return UINT64_MAX;
	return from + (uint64_t)d;
}

/* rescale - the segment running on @w changes speed at the cursor. */
static void rescale(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	struct sim_fiber *f;
	uint64_t t = s->cursor, done;
	double r = speed_of(s, w);

	if (x->mode != SW_RUN || x->curr < 0)
		return;
	f = sim_fiber(s, x->curr);
	if (r == f->rate)
		return;
	if (t > f->seg_start) {
		f->left -= (double)(t - f->seg_start) * f->rate;
		if (f->left < 0)
			f->left = 0;
		f->seg_start = t;
	}
	f->rate = r;
	done = seg_end(f->seg_start, f->left, r);
	ev_push(s, done, EV_SEG_END, w, ++x->gen);
}

/* core_changed - @w started or stopped computing: its siblings' speeds. */
static void core_changed(struct sim *s, int w)
{
	const struct fb_wmask *core = s->view->core_span[w];
	int i;

	if (fb_wmask_weight(core) < 2)
		return;
	fb_wmask_for_each (i, core) {
		if (i != w && i < s->n)
			rescale(s, i);
	}
}

static void set_mode(struct sim *s, int w, enum sim_wmode m)
{
	struct sim_worker *x = &s->w[w];
	bool was = x->mode == SW_RUN;

	s->nr_sleeping += (m == SW_SLEEP) - (x->mode == SW_SLEEP);
	x->mode = m;
	x->gen++;
	if (was && m != SW_RUN) {
		x->busy_ns += s->cursor > x->busy_since ?
				      s->cursor - x->busy_since :
				      0;
		core_changed(s, w);
	} else if (!was && m == SW_RUN) {
		x->busy_since = s->now; /* the handler's work counts */
		core_changed(s, w);
	}
}

/* ---- PELT (sched/sched.h, sched/balance.c) ---------------------------------- */

static void pelt_worker(struct sim *s, int w, uint64_t now, bool busy)
{
	struct fb_pworker *p = pw_of(s, w);
	int nr = nr_running(s, w);
	unsigned n = busy ? (unsigned)(nr > 1 ? nr : 1) : 0;

	if (fb_load_relaxed(&p->removed.nr))
		fb_pelt_fold_removed(&p->avg, &p->removed);
	fb_pelt_update_worker(&p->avg, now, n * FB_PELT_CAPACITY, n, busy);
}

static void sample(struct sim *s, int w, uint64_t now, bool busy)
{
	int nr = nr_running(s, w);

	pelt_worker(s, w, now, busy);
	pw_of(s, w)->runnable_weight =
		(unsigned long)(nr > 0 ? nr : 0) * FB_PELT_CAPACITY;
}

static void remove_share(struct sim *s, int self, struct sim_fiber *f, int old)
{
	struct fb_pworker *o = pw_of(s, old);
	struct fb_pelt share = f->pf.avg;
	uint64_t t = fb_pelt_last_update(&o->avg);

	if (t > share.last_update)
		fb_pelt_update(&share, t, f->pf.weight, f->pf.avg_queued,
			       false);
	fb_pelt_remove(&o->removed, &share);
	COUNT(s, self, pelt_migrations);
}

static void pelt_attach(struct sim *s, int w, struct sim_fiber *f, uint64_t now)
{
	struct fb_pelt *a = &f->pf.avg;
	int old = f->pf.attached;

	if (old >= 0 && old < s->n)
		remove_share(s, w, f, old);
	if (!a->last_update)
		fb_pelt_reset(a, now);
	else
		fb_pelt_update(a, now, f->pf.weight, f->pf.avg_queued, false);
	fb_pelt_attach(&pw_of(s, w)->avg, a, f->pf.weight);
	f->pf.attached = w;
}

static void pelt_leave(struct sim *s, int w, struct sim_fiber *prev,
		       uint64_t now, bool queued)
{
	pelt_worker(s, w, now, true);
	fb_pelt_update(&prev->pf.avg, now, prev->pf.weight, true, true);
	prev->pf.avg_queued = queued;
	prev->pf.last_ran_ns = now;
}

static void pelt_enter(struct sim *s, int w, struct sim_fiber *next,
		       uint64_t now)
{
	if (next->pf.attached != w) {
		pelt_attach(s, w, next, now);
		return;
	}
	fb_pelt_update(&next->pf.avg, now, next->pf.weight, next->pf.avg_queued,
		       false);
}

/* ---- waking workers (sched/core.c) ----------------------------------------- */

static void idle_at(struct sim *s, int t, uint64_t when)
{
	set_mode(s, t, SW_WAKE);
	ev_push(s, when, EV_IDLE, t, s->w[t].gen);
}

/*
 * wake_worker - fb_sched_wake_worker(): set NEED_RESCHED unless @t runs
 * or has it; a sleeper costs the waker a futex wake and wakes after the
 * exit latency, a poller notices after the doorbell line has moved.
 */
static void wake_worker(struct sim *s, int t, int this)
{
	struct fb_pworker *p = pw_of(s, t);
	unsigned st = fb_load_relaxed(&p->state);

	if ((st & FB_WS_MASK) == FB_WS_RUNNING || (st & FB_WS_NEED_RESCHED))
		return;
	fb_store_relaxed(&p->state, st | FB_WS_NEED_RESCHED);
	if ((st & FB_WS_MASK) == FB_WS_SLEEPING ||
	    (st & FB_WS_MASK) == FB_WS_EPOLL) {
		if ((st & FB_WS_MASK) == FB_WS_SLEEPING)
			COUNT(s, this, futex_wakes);
		else
			COUNT(s, this, eventfd_wakes);
		sim_charge(s, s->c.futex_wake_ns);
		idle_at(s, t, s->cursor + (uint64_t)s->c.sleep_exit_ns);
		return;
	}
	COUNT(s, this, poll_wakes);
	/* A poller notices once its poll loop runs: not before the work its
	 * idle path was charged (a newly-idle balance, blocked-load decays)
	 * is over. */
	idle_at(s, t,
		FB_MAX(s->cursor, s->w[t].poll_from) +
			(uint64_t)(line(s, this, t) + s->c.poll_pause_ns));
}

/* kick_idle - a backlog on @t while some worker sleeps: wake an idle one. */
static void kick_idle(struct sim *s, int t, int this)
{
	for (int k = 1; k < s->n; k++) {
		int i = (t + k) % s->n;
		unsigned st = fb_load_relaxed(&pw_of(s, i)->state);

		if ((st & FB_WS_MASK) == FB_WS_RUNNING ||
		    (st & FB_WS_NEED_RESCHED))
			continue;
		if (nr_running(s, i))
			continue;
		wake_worker(s, i, this);
		COUNT(s, this, kicks);
		return;
	}
}

static void push(struct sim *s, struct sim_fiber *f, int t, int this)
{
	struct sim_worker *x = &s->w[t];
	bool was_empty = x->wl_head < 0;

	fb_store_relaxed(&pw_of(s, t)->ttwu_pending, 1);
	f->link = x->wl_head;
	f->worker = t;
	x->wl_head = f->id;
	/* The doorbell line holds ttwu_pending and the wakelist head. */
	sim_charge(s, this >= 0 ? line(s, this, t) : s->c.line[SIM_D_LLC]);
	COUNT(s, this, wakelist_pushes);
	if (was_empty)
		wake_worker(s, t, this);
}

/* drain - fb_sched_drain_wakelist(), in wake order. */
static void drain(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	int id = x->wl_head, rev = -1, n = 0;

	if (id < 0)
		return;
	x->wl_head = -1;
	while (id >= 0) {
		struct sim_fiber *f = sim_fiber(s, id);
		int next = f->link;

		f->link = rev;
		rev = id;
		id = next;
	}
	while (rev >= 0) {
		struct sim_fiber *f = sim_fiber(s, rev);

		rev = f->link;
		rq_add_tail(s, w, f);
		n++;
	}
	nr_running_add(s, w, n);
	fb_store_relaxed(&pw_of(s, w)->ttwu_pending, 0);
	sim_charge(s, s->c.drain_ns + n * s->c.drain_fiber_ns);
	COUNT(s, w, wakelist_drains);
}

static void enqueue(struct sim *s, struct sim_fiber *f, int t, int this)
{
	struct sim_worker *x = &s->w[t];
	int nr;

	if (t == this && x->curr >= 0 && x->runnext < 0 &&
	    x->runnext_streak < SIM_RUNNEXT_STREAK) {
		x->runnext = f->id;
		f->worker = t;
		x->runnext_streak++;
		COUNT(s, this, local_enqueues);
		return;
	}
	rq_add_tail(s, t, f);
	nr_running_add(s, t, 1);
	nr = nr_running(s, t);
	if (t == this) {
		COUNT(s, this, local_enqueues);
	} else {
		/* rq_lock, the queue's tail and the doorbell line */
		sim_charge(s, 3 * (this >= 0 ? line(s, this, t) :
					       s->c.line[SIM_D_LLC]));
		COUNT(s, this, direct_enqueues);
		wake_worker(s, t, this);
	}
	if (nr >= 3 && s->nr_sleeping > 0)
		kick_idle(s, t, this);
}

static void deliver(struct sim *s, struct sim_fiber *f, int t, int this,
		    const char **path)
{
	if (t != this && fb_place_use_wakelist(&s->v, &f->pf, t, this)) {
		*path = "wakelist";
		push(s, f, t, this);
	} else {
		*path = t == this ? "local" : "direct";
		enqueue(s, f, t, this);
	}
}

/* ---- the wake path (sched/core.c wake()) ------------------------------------ */

static void count_wake(struct sim *s, int this, const struct fb_wake_result *r)
{
	COUNT(s, this, wake_placements);
	if (r->affine)
		COUNT(s, this, wake_affine);
	switch (r->pick) {
	case FB_PICK_TARGET:
		COUNT(s, this, wake_target);
		break;
	case FB_PICK_PREV:
		COUNT(s, this, wake_prev);
		break;
	case FB_PICK_RECENT:
		COUNT(s, this, wake_recent);
		break;
	case FB_PICK_SIBLING:
		COUNT(s, this, wake_idle_sibling);
		break;
	case FB_PICK_IDLE_CORE:
		COUNT(s, this, wake_idle_core);
		break;
	case FB_PICK_SCAN_HIT:
		COUNT(s, this, wake_scan_hit);
		break;
	case FB_PICK_SCAN_MISS:
		COUNT(s, this, wake_scan_miss);
		break;
	case FB_PICK_AFFINITY:
		COUNT(s, this, wake_affinity);
		break;
	case FB_PICK_PINNED:
		COUNT(s, this, wake_pinned);
		break;
	}
	for (int i = 0; i < r->probes; i++)
		COUNT(s, this, wake_probes);
	if (r->core_scan)
		COUNT(s, this, scan_idle_cores);
	if (r->cut_util)
		COUNT(s, this, scan_cut_sis_util);
	if (r->cut_core_limit)
		COUNT(s, this, scan_cut_core_limit);
}

static bool core_is_idle(struct sim *s, int w)
{
	int i;

	fb_wmask_for_each (i, s->view->core_span[w]) {
		if (i < s->n && !fb_worker_is_idle(pw_of(s, i)))
			return false;
	}
	return true;
}

/* acting - the worker the current handler acts for (-1: foreign). */
static int acting = -1;

static void wake(struct sim *s, struct sim_fiber *waker, struct sim_fiber *f,
		 unsigned flags)
{
	int this = acting, prev, t;
	struct fb_wake_result res;
	const char *path;

	if (f->state != SF_PARKED)
		return;
	f->state = SF_RUNNABLE;
	f->wake_ns = s->cursor;
	f->lat_pending = true;
	COUNT(s, this, wakeups);
	if (s->n == 1 && this >= 0) {
		enqueue(s, f, this, this);
		return;
	}
	if (on_worker(s, f)) {
		t = f->pf.prev;
		if (fb_place_use_wakelist(&s->v, &f->pf, t, this)) {
			COUNT(s, this, wake_on_worker);
			push(s, f, t, this);
			sim_trace_wake(s, this, t, t, NULL, "on_worker", f->id);
			return;
		}
		COUNT(s, this, on_worker_waits);
		if (s->cursor < f->off_worker_at)
			s->cursor = f->off_worker_at;
	}
	prev = f->pf.prev;
	t = fb_place_select_wake(&s->v, &f->pf, waker ? &waker->pf : NULL, this,
				 flags, s->cursor, &res);
	sim_charge(s, s->c.select_ns);
	if (res.probes)
		sim_charge(s, res.probes * (this >= 0 ? line(s, this, t) :
							s->c.line[SIM_D_LLC]));
	count_wake(s, this, &res);
	if (fb_worker_is_idle(pw_of(s, t))) {
		s->st.wakes_idle_worker++;
		if (core_is_idle(s, t))
			s->st.wakes_idle_core++;
	}
	if (prev < 0 || fb_share_llc(s->view, prev, t))
		s->st.wakes_llc_kept++;
	deliver(s, f, t, this, &path);
	sim_trace_wake(s, this, prev, t, &res, path, f->id);
}

void sim_wake(struct sim *s, struct sim_fiber *waker, struct sim_fiber *f,
	      unsigned flags)
{
	wake(s, waker, f, flags);
}

/* ---- creation ---------------------------------------------------------------- */

static struct sim_fiber *fiber_alloc(struct sim *s)
{
	struct sim_fiber *f;
	int id;

	if (s->free_fiber >= 0) {
		id = s->free_fiber;
		f = sim_fiber(s, id);
		s->free_fiber = f->link;
	} else {
		if (s->nr_fibers >= SIM_MAX_FIBERS) {
			fprintf(stderr,
				"fiber-sim: the workload created more than %d "
				"fibers\n",
				SIM_MAX_FIBERS);
			exit(2);
		}
		id = s->nr_fibers++;
		if ((id >> CHUNK_BITS) >= s->nr_chunks) {
			s->chunk =
				realloc(s->chunk, (size_t)(s->nr_chunks + 1) *
							  sizeof(*s->chunk));
			s->chunk[s->nr_chunks] =
				calloc(CHUNK, sizeof(**s->chunk));
			if (!s->chunk[s->nr_chunks]) {
				fprintf(stderr, "fiber-sim: out of memory\n");
				exit(1);
			}
			s->nr_chunks++;
		}
		f = sim_fiber(s, id);
	}
	memset(f, 0, sizeof(*f));
	f->id = id;
	f->worker = -1;
	f->link = -1;
	f->joiner = -1;
	f->pf.pin = -1;
	f->pf.prev = -1;
	f->pf.recent_used = -1;
	f->pf.attached = -1;
	f->pf.weight = 1024;
	return f;
}

static void fiber_free(struct sim *s, struct sim_fiber *f)
{
	if (f->pf.allowed)
		CPU_FREE(f->pf.allowed);
	f->pf.allowed = NULL;
	f->state = SF_FREE;
	f->link = s->free_fiber;
	s->free_fiber = f->id;
}

void sim_fiber_release(struct sim *s, struct sim_fiber *f)
{
	fiber_free(s, f);
}

struct sim_fiber *sim_create(struct sim *s, struct sim_fiber *parent,
			     sim_step_fn step, int kind, cpu_set_t *mask)
{
	struct sim_fiber *f = fiber_alloc(s);
	struct fb_create_info info = { 0 };
	const char *path;
	int this = parent ? acting : -1, t;

	f->step = step;
	f->kind = kind;
	if (mask) {
		int nr = CPU_COUNT_S(CPU_ALLOC_SIZE(SIM_MAX_WORKERS), mask);

		if (nr >= s->n) {
			CPU_FREE(mask);
		} else {
			f->pf.allowed = mask;
			f->pf.nr_allowed = nr;
			f->pf.custom_affinity = true;
			/* As fiber_attr_setaffinity(): one worker is a pin. */
			for (int i = 0; nr == 1 && i < s->n; i++)
				if (CPU_ISSET_S((size_t)i,
						CPU_ALLOC_SIZE(SIM_MAX_WORKERS),
						mask))
					f->pf.pin = i;
		}
	}
	t = fb_place_select_create(&s->v, &f->pf, this, &info);
	if (info.nr_numa_imb_kept)
		COUNT(s, this, create_numa_imb);
	COUNT(s, this, creates);
	sim_charge(s, s->c.create_ns);
	s->nr_live++;
	f->state = SF_RUNNABLE;
	f->first_run = true;
	f->wake_ns = s->cursor;
	f->lat_pending = true;
	deliver(s, f, t, this, &path);
	sim_trace_event(s, "create", t, f->id, this, 0);
	return f;
}

/* ---- timers -------------------------------------------------------------------- */

static void timer_arm(struct sim *s, int w, struct sim_fiber *f, uint64_t at)
{
	struct sim_worker *x = &s->w[w];

	if (x->nr_timers == x->cap_timers) {
		x->cap_timers = x->cap_timers ? 2 * x->cap_timers : 8;
		x->timers = realloc(x->timers,
				    (size_t)x->cap_timers * sizeof(*x->timers));
	}
	x->timers[x->nr_timers++] =
		(struct sim_timer){ .at = at, .fiber = f->id };
}

static uint64_t timer_next(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	uint64_t next = 0;

	for (int i = 0; i < x->nr_timers; i++)
		if (!next || x->timers[i].at < next)
			next = x->timers[i].at;
	return next;
}

/* timers_run - fire @w's due timers (fb_timer_run); the wakes come from
 * @w with its current fiber as the waker, as in the runtime. */
static void timers_run(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	struct sim_fiber *cur = x->curr >= 0 ? sim_fiber(s, x->curr) : NULL;

	for (int i = 0; i < x->nr_timers;) {
		if (x->timers[i].at > s->cursor) {
			i++;
			continue;
		}
		int id = x->timers[i].fiber;

		x->timers[i] = x->timers[--x->nr_timers];
		COUNT(s, w, timers_fired);
		wake(s, cur, sim_fiber(s, id), 0);
	}
}

/* ---- balancing glue (sched/balance.c) ------------------------------------------ */

/* The balancing operation in progress: the acting worker and its clock. */
static uint64_t bal_now, bal_tick;
static int steal_victim = -1;

static int level_of(const struct fb_domain *d)
{
	return d->level < SIM_BAL_LEVELS - 1 ? d->level : SIM_BAL_LEVELS - 1;
}

static uint64_t op_clock(void *arg)
{
	return ((struct sim *)arg)->cursor;
}

static void op_decay(void *arg, int i)
{
	struct sim *s = arg;

	sim_charge(s, s->c.blocked_update_ns);
	fb_place_decay_blocked(pw_of(s, i), bal_now, bal_tick);
	if (i == acting)
		COUNT(s, acting, blocked_decays);
	else
		COUNT(s, acting, sleeper_decays);
}

static bool refresh(struct sim *s, int i)
{
	struct fb_pworker *p = pw_of(s, i);
	uint64_t before;
	bool left;

	if (fb_load_relaxed(&p->avg_busy))
		return false;
	before = p->nr_blocked_decays;
	left = fb_place_refresh_sleeping(&s->v, i, bal_now, bal_tick);
	if (p->nr_blocked_decays != before) {
		sim_charge(s, s->c.blocked_update_ns + line(s, acting, i));
		COUNT(s, acting, sleeper_decays);
	}
	return left;
}

static bool op_refresh(void *arg, int i)
{
	return refresh(arg, i);
}

static void lb_refresh(struct fb_lb_env *env, int i)
{
	refresh(env->arg, i);
}

static bool op_has_work(void *arg, int i)
{
	return has_work(arg, i);
}

/* reads - the cost of the group statistics of @d: every worker's record. */
static double reads(struct sim *s, const struct fb_domain *d)
{
	double ns = 0;
	int i;

	fb_wmask_for_each (i, &d->span) {
		if (i >= s->n)
			break;
		ns += line(s, acting, i);
		s->st.lb_workers_read++;
	}
	return ns;
}

static int detach(struct sim *s, struct fb_lb_env *env, struct sim_fiber **out)
{
	struct fb_lb_candidate cand[FB_LB_NR_MIGRATE + 1];
	struct sim_fiber *fl[FB_LB_NR_MIGRATE + 1];
	struct sim_worker *src = &s->w[env->src];
	int k = 0, moved = 0;

	for (int id = src->rq_head; id >= 0 && k < FB_LB_NR_MIGRATE;) {
		struct sim_fiber *f = sim_fiber(s, id);

		cand[k] =
			(struct fb_lb_candidate){ .pf = &f->pf,
						  .running = on_worker(s, f) };
		fl[k++] = f;
		id = f->link;
	}
	if (src->curr >= 0) {
		cand[k] = (struct fb_lb_candidate){
			.pf = &sim_fiber(s, src->curr)->pf, .running = true
		};
		fl[k++] = NULL;
	}
	sim_charge(s, 2 * line(s, acting, env->src)); /* its lock and queue */
	if (!fb_place_lb_detach(env, cand, k))
		return 0;
	for (int i = 0; i < k; i++) {
		struct sim_fiber *f = fl[i], *p = NULL;
		int old;

		if (!cand[i].move || !f)
			continue;
		for (int id = src->rq_head; id >= 0 && id != f->id;
		     id = sim_fiber(s, id)->link)
			p = sim_fiber(s, id);
		rq_del(s, env->src, p, f);
		nr_running_add(s, env->src, -1);
		old = f->pf.attached;
		if (old >= 0 && old < s->n)
			remove_share(s, acting, f, old);
		fb_pelt_update(&f->pf.avg, bal_now, f->pf.weight,
			       f->pf.avg_queued, false);
		f->pf.avg_queued = true;
		f->pf.attached = -1;
		out[moved++] = f;
	}
	return moved;
}

static void attach(struct sim *s, int dst, struct sim_fiber **f, int n)
{
	for (int i = 0; i < n; i++)
		rq_add_tail(s, dst, f[i]);
	nr_running_add(s, dst, n);
	sim_charge(s, 2 * line(s, acting, dst));
	if (dst != acting)
		wake_worker(s, dst, acting);
}

static void push_request(struct sim *s, const struct fb_lb_env *env)
{
	struct sim_worker *src = &s->w[env->src];

	if (src->curr < 0)
		return;
	src->push_fiber = src->curr;
	fb_place_request_push(&s->v, env->src, env->dst);
	s->st.pushes_requested++;
	sim_trace_event(s, "push_request", env->src, src->curr, env->dst, 0);
}

static int op_balance(void *arg, int dst, struct fb_domain *d,
		      enum fb_idle_kind kind, bool *stop)
{
	struct sim *s = arg;
	struct sim_fiber *moved[FB_LB_NR_MIGRATE + 1];
	const struct fb_pfiber *running = NULL;
	uint64_t t0 = s->cursor;
	struct fb_lb_env env;
	enum fb_lb_verdict r;
	int n = 0, lv = level_of(d);
	bool asym;

	fb_place_lb_init(&env, &s->v, d, dst, kind, bal_now, bal_tick);
	env.refresh = lb_refresh;
	env.arg = s;
	r = fb_place_lb_find(&env);
	sim_charge(s, s->c.lb_base_ns + reads(s, d));
	COUNT(s, acting, lb_balances);
	s->w[acting].nr_lb[lv]++;
	s->st.lb_by_kind[kind]++;
	if (r == FB_LB_SKIP)
		*stop = true;
	asym = r == FB_LB_PULL && env.busiest.type == FB_GROUP_ASYM_PACKING;
	if (r == FB_LB_PULL) {
		struct sim_worker *src = &s->w[env.src];

		n = detach(s, &env, moved);
		env.nr_moved = n;
		if (n)
			attach(s, dst, moved, n);
		else if (kind == FB_LB_NEWLY_IDLE && dst == acting)
			steal_victim = env.src;
		if (src->curr >= 0)
			running = &sim_fiber(s, src->curr)->pf;
	}
	fb_place_lb_finish(&env, r, running);
	if (env.active)
		push_request(s, &env);
	for (int i = 0; i < n; i++) {
		COUNT(s, acting, lb_pulled);
		sim_trace_event(s, "pull", dst, moved[i]->id, env.src,
				d->level);
	}
	s->w[acting].nr_pulled[lv] += (uint32_t)n;
	s->st.lb_pulled_by_kind[kind] += (uint64_t)n;
	if (asym) {
		unsigned k = (unsigned)n + (env.active ? 1 : 0);

		for (unsigned i = 0; i < k; i++)
			COUNT(s, acting, lb_asym_pulls);
		s->w[acting].nr_asym[lv] += k;
	}
	s->st.lb_cost_ns[kind] += (double)(s->cursor - t0);
	return n;
}

static struct fb_balance_ops ops_of(struct sim *s)
{
	return (struct fb_balance_ops){ .balance = op_balance,
					.clock = op_clock,
					.decay = op_decay,
					.refresh = op_refresh,
					.has_work = op_has_work,
					.arg = s };
}

static void bal_enter(struct sim *s)
{
	bal_now = s->cursor;
	bal_tick = bal_now / SIM_TICK_NS;
}

static void balance_tick(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	struct fb_balance_ops ops = ops_of(s);
	int t;

	if (!x->busy)
		return;
	sample(s, w, s->cursor, x->curr >= 0);
	if (x->curr >= 0) {
		struct sim_fiber *cur = sim_fiber(s, x->curr);

		fb_pelt_update(&cur->pf.avg, s->cursor, cur->pf.weight, true,
			       true);
		cur->pf.last_ran_ns = s->cursor;
	}
	if (s->cursor < x->next_tick_ns)
		return;
	x->next_tick_ns = s->cursor + SIM_TICK_NS;
	bal_enter(s);
	t = fb_place_tick(&s->v, w, bal_now, bal_tick, SIM_TICK_NS, &ops);
	if (t >= 0) {
		COUNT(s, w, nohz_kicks);
		wake_worker(s, t, w);
	}
}

/* tick_maybe - fb_sched_tick_maybe(): timers and balancing every 64
 * scheduling points. */
static void tick_maybe(struct sim *s, int w)
{
	if ((++s->w[w].ticks & (SIM_TICK_SWITCHES - 1)) == 0) {
		timers_run(s, w);
		balance_tick(s, w);
	}
}

static void kicked(struct sim *s, int w, unsigned flags)
{
	struct fb_balance_ops ops = ops_of(s);
	struct fb_nohz_result res;

	COUNT(s, w, nohz_passes);
	fb_place_nohz_pass(&s->v, w, flags, bal_now, bal_tick, SIM_TICK_NS,
			   &ops, &res);
}

/* balance_idle - fb_sched_balance_idle(): the kick's pass, then newly-idle
 * balancing.  Returns whether @w has work. */
static bool balance_idle(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	struct fb_pworker *p = pw_of(s, w);
	struct fb_balance_ops ops = ops_of(s);
	struct fb_newidle_result res;
	unsigned flags;
	int t = -1;

	fb_store_relaxed(&p->push_target, -1);
	if (x->busy) {
		sample(s, w, s->cursor, false);
		fb_store_relaxed(&p->avg_busy, false);
		x->busy = false;
	}
	bal_enter(s);
	flags = fb_load_relaxed(&p->kick_flags) & FB_KICK_MASK;
	fb_store_relaxed(&p->kick_flags, fb_load_relaxed(&p->kick_flags) &
						 ~(unsigned)FB_KICK_MASK);
	if (flags)
		kicked(s, w, flags);
	steal_victim = -1;
	if (!has_work(s, w)) {
		fb_place_newidle(&s->v, w, bal_now, bal_tick, &ops, &res);
		if (res.gated)
			COUNT(s, w, newidle_gated);
		else if (res.nr_balances)
			COUNT(s, w, newidle_balances);
		for (unsigned i = 0; i < res.nr_skipped; i++)
			COUNT(s, w, newidle_ni_skips);
		for (unsigned l = 0; l < 32; l++)
			if (res.skipped_levels & (1u << l))
				x->nr_ni_skips[l < SIM_BAL_LEVELS ?
						       l :
						       SIM_BAL_LEVELS - 1]++;
		if (res.idle_entry == FB_IDLE_ENTRY_KICK)
			t = fb_place_kick(&s->v, w, FB_KICK_STATS, bal_now,
					  SIM_TICK_NS);
	}
	if (t >= 0) {
		COUNT(s, w, nohz_kicks);
		wake_worker(s, t, w);
	}
	return has_work(s, w);
}

static void balance_idle_exit(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	struct fb_pworker *p = pw_of(s, w);
	uint64_t stamp;

	if (x->busy) {
		sample(s, w, s->cursor, false);
		return;
	}
	stamp = fb_load_relaxed(&p->idle_stamp);
	if (stamp && s->cursor > stamp)
		p->avg_idle = fb_pelt_avg_idle_update(p->avg_idle,
						      s->cursor - stamp,
						      p->max_idle_balance_cost);
	fb_store_relaxed(&p->idle_stamp, 0);
	sample(s, w, s->cursor, false);
	fb_store_relaxed(&p->avg_busy, true);
	x->busy = true;
	if (fb_place_is_sleeping(&s->g, w))
		fb_place_sleep_exit(&s->v, w);
}

static void balance_sleep(struct sim *s, int w)
{
	bal_enter(s);
	if (fb_place_sleep_stats_due(&s->v, w, has_work(s, w)))
		kicked(s, w, FB_KICK_STATS);
	if (!fb_place_is_sleeping(&s->g, w))
		fb_place_sleep_enter(&s->v, w);
}

/* balance_push - fb_sched_balance_push(): honour an active balance? */
static bool balance_push(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	struct fb_pworker *p = pw_of(s, w);
	int t = fb_load_relaxed(&p->push_target);
	struct sim_fiber *f = sim_fiber(s, x->curr);

	fb_store_relaxed(&p->push_target, -1);
	if (t < 0 || t == w || t >= s->n || x->push_fiber != x->curr ||
	    !fb_pfiber_allows(&f->pf, t)) {
		s->st.pushes_refused++;
		return false;
	}
	x->migrate_to = t;
	COUNT(s, w, lb_pushes);
	return true;
}

/* ---- switching (sched/core.c) --------------------------------------------------- */

static void reap(struct sim *s, int w, struct sim_fiber *f)
{
	struct sim_worker *x = &s->w[w];
	struct sim_fiber *cur = x->curr >= 0 ? sim_fiber(s, x->curr) : NULL;

	sim_charge(s, s->c.exit_ns);
	s->nr_live--;
	f->exited = true;
	if (f->joiner >= 0) {
		struct sim_fiber *j = sim_fiber(s, f->joiner);

		f->joiner = -1;
		wake(s, cur, j, 0);
	}
	if (f->detached)
		fiber_free(s, f);
}

static void migrate_finish(struct sim *s, int w, struct sim_fiber *f)
{
	struct sim_worker *x = &s->w[w];
	int t = x->migrate_to;
	const char *path;

	x->migrate_to = -1;
	x->migrating = false;
	if (t >= 0 && !fb_pfiber_allows(&f->pf, t))
		t = -1;
	if (t < 0)
		t = fb_place_select_wake(&s->v, &f->pf, NULL, -1, 0, 0, NULL);
	deliver(s, f, t, w, &path);
	sim_trace_event(s, "migrate", t, f->id, w, 0);
}

/* finish_switch - fb_sched_finish_switch() on the new context. */
static void finish_switch(struct sim *s, int w, struct sim_fiber *prev)
{
	if (prev) {
		if (prev->state == SF_DEAD)
			reap(s, w, prev);
		else
			prev->off_worker_at = s->cursor;
		if (s->w[w].migrating)
			migrate_finish(s, w, prev);
	}
	tick_maybe(s, w);
}

static void switch_to(struct sim *s, int w, struct sim_fiber *next)
{
	struct sim_worker *x = &s->w[w];
	int old = next->pf.prev;

	pelt_enter(s, w, next, s->cursor);
	next->state = SF_RUNNING;
	next->worker = w;
	if (old >= 0 && old != w) {
		int d = sim_dist(s, old, w);

		s->st.migrations[d]++;
		/* its working set's lines, from the old worker's caches */
		if (s->c.refill_mlp > 0 && next->ws_kb > 0)
			next->refill += next->ws_kb * 1024 / 64 * s->c.line[d] /
					s->c.refill_mlp;
	}
	next->pf.prev = w;
	x->curr = next->id;
	/* A waker's step may run ahead of this worker's clock: the fiber is
	 * there only from the moment it was handed over. */
	if (next->wake_ns > s->cursor)
		s->cursor = next->wake_ns;
	COUNT(s, w, switches);
	sim_charge(s, s->c.switch_ns);
	if (next->lat_pending) {
		next->lat_pending = false;
		sim_hist_add(&s->st.wake_lat, s->cursor - next->wake_ns);
	}
	next->first_run = false;
}

enum mode { M_YIELD, M_PARK, M_EXIT, M_MIGRATE };

/*
 * schedule - leave @prev on @w and pick the next fiber (or none: the idle
 * loop).  Returns the fiber to run, or NULL; @prev itself when it keeps
 * running after a yield.
 */
static struct sim_fiber *schedule(struct sim *s, int w, struct sim_fiber *prev,
				  enum mode mode)
{
	struct sim_worker *x = &s->w[w];
	struct sim_fiber *next = NULL;

	pelt_leave(s, w, prev, s->cursor, mode == M_YIELD || mode == M_MIGRATE);
	if (mode == M_EXIT)
		fb_pelt_detach(&pw_of(s, w)->avg, &prev->pf.avg,
			       prev->pf.weight);
	if (x->runnext >= 0 && mode != M_YIELD && x->wl_head < 0) {
		next = sim_fiber(s, x->runnext);
		x->runnext = -1;
		goto picked;
	}
	if (x->wl_head >= 0)
		drain(s, w);
	if (x->runnext >= 0) {
		rq_add_head(s, w, sim_fiber(s, x->runnext));
		x->runnext = -1;
		nr_running_add(s, w, 1);
	}
	x->runnext_streak = 0;
	if (mode == M_YIELD)
		rq_add_tail(s, w, prev);
	else
		nr_running_add(s, w, -1);
	next = rq_pop(s, w);
picked:
	if (next == prev) {
		prev->state = SF_RUNNING;
		return prev;
	}
	x->migrating = mode == M_MIGRATE;
	if (mode == M_PARK)
		prev->worker = -1;
	if (!next) {
		/* to the idle stack: the idle loop finishes the switch */
		x->curr = -1;
		x->prev_switch = prev->id;
		sim_charge(s, s->c.switch_ns);
		return NULL;
	}
	switch_to(s, w, next);
	finish_switch(s, w, prev);
	return next;
}

/* yield - fb_sched_yield(); NULL: @f keeps running. */
static struct sim_fiber *yield(struct sim *s, int w, struct sim_fiber *f,
			       bool *switched)
{
	struct sim_worker *x = &s->w[w];

	*switched = false;
	if (fb_load_relaxed(&pw_of(s, w)->push_target) >= 0 &&
	    balance_push(s, w)) {
		f->state = SF_RUNNABLE;
		*switched = true;
		return schedule(s, w, f, M_MIGRATE);
	}
	if (x->wl_head < 0 && x->runnext < 0 && nr_running(s, w) <= 1) {
		tick_maybe(s, w);
		return f;
	}
	COUNT(s, w, yields);
	f->state = SF_RUNNABLE;
	*switched = true;
	return schedule(s, w, f, M_YIELD);
}

/* ---- the idle loop (sched/idle.c) --------------------------------------------------- */

static struct sim_fiber *pick_idle(struct sim *s, int w)
{
	if (s->w[w].wl_head >= 0)
		drain(s, w);
	if (!nr_running(s, w))
		return NULL;
	return rq_pop(s, w);
}

static struct sim_fiber *steal_from(struct sim *s, int w, int vid)
{
	struct sim_fiber *p = NULL;
	int looked = 0;

	sim_charge(s, 2 * line(s, w, vid));
	for (int id = s->w[vid].rq_head;
	     id >= 0 && looked++ < FB_STEAL_SCAN_MAX;) {
		struct sim_fiber *f = sim_fiber(s, id);

		if (!on_worker(s, f) && fb_pfiber_allows(&f->pf, w)) {
			rq_del(s, vid, p, f);
			nr_running_add(s, vid, -1);
			nr_running_add(s, w, 1);
			COUNT(s, w, steals);
			sim_trace_event(s, "steal", w, f->id, vid, 0);
			return f;
		}
		p = f;
		id = f->link;
	}
	return NULL;
}

/* steal_any - sched/idle.c take_one(): from @vid, else from the workers
 * fb_place_steal_retry() names, in turn. */
static struct sim_fiber *steal_any(struct sim *s, int w, int vid)
{
	struct sim_fiber *f = steal_from(s, w, vid);
	int ids[FB_STEAL_RETRY_MAX], n;

	if (f)
		return f;
	n = fb_place_steal_retry(&s->v, w, vid, ids, FB_STEAL_RETRY_MAX);
	for (int i = 0; !f && i < n; i++)
		f = steal_from(s, w, ids[i]);
	return f;
}

/* movable - sched/idle.c movable(): a fiber queued on @v, among the first
 * FB_STEAL_SCAN_MAX, that @w may take. */
static bool movable(struct sim *s, int w, int v)
{
	int looked = 0;

	for (int id = s->w[v].rq_head; id >= 0 && looked++ < FB_STEAL_SCAN_MAX;
	     id = sim_fiber(s, id)->link) {
		struct sim_fiber *f = sim_fiber(s, id);

		if (!on_worker(s, f) && fb_pfiber_allows(&f->pf, w))
			return true;
	}
	return false;
}

/* victim_movable - victim_exists()'s look at the queues: @vid's, then
 * those fb_place_steal_retry() names. */
static bool victim_movable(struct sim *s, int w, int vid)
{
	int ids[FB_STEAL_RETRY_MAX], n;

	if (movable(s, w, vid))
		return true;
	n = fb_place_steal_retry(&s->v, w, vid, ids, FB_STEAL_RETRY_MAX);
	for (int i = 0; i < n; i++) {
		if (movable(s, w, ids[i]))
			return true;
	}
	return false;
}

/* charge_search - the records an fb_place_pick_victim() by @w that answered
 * @v read. */
static void charge_search(struct sim *s, int w, int v)
{
	uint64_t before = s->cursor;
	struct fb_domain *d;

	s->st.victim_searches++;
	/* pick_victim walks w's BALANCE_NEWIDLE levels bottom up until a
	 * PULL or a SKIP; charge every level up to the one that answered. */
	fb_for_each_domain (s->view, w, d) {
		if (!(d->flags & FB_SD_BALANCE_NEWIDLE))
			continue;
		s->cursor += (uint64_t)llround(reads(s, d));
		s->st.victim_reads += (uint64_t)d->span_weight;
		if (v >= 0 && fb_wmask_test(&d->span, v))
			break;
	}
	s->st.steal_cost_ns += (double)(s->cursor - before);
}

/* victim_search - the legacy idle path's fb_place_pick_victim(), with the
 * records it read charged. */
static int victim_search(struct sim *s, int w)
{
	int v = fb_place_pick_victim(&s->v, w);

	charge_search(s, w, v);
	return v;
}

/* steal_hint - fb_place_steal_hint() with every worker's nr_running line
 * charged. */
static bool steal_hint(struct sim *s, int w)
{
	uint64_t before = s->cursor;

	for (int i = 0; i < s->n; i++)
		if (i != w)
			sim_charge(s, line(s, w, i));
	s->st.steal_cost_ns += (double)(s->cursor - before);
	return fb_place_steal_hint(&s->v, w);
}

/* steal_due - the poll loop's look (sched/idle.c): the hint once the rate
 * limit allows, and a forced search in steal() if it holds. */
static bool steal_due(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];

	if (s->cursor < x->next_steal_ns)
		return false;
	x->next_steal_ns = s->cursor + FB_STEAL_PERIOD_NS;
	x->steal_force = steal_hint(s, w);
	return x->steal_force;
}

/* steal - after newly-idle balancing found nothing (sched/idle.c): from the
 * worker the balance chose but could not detach from, else the rate-limited
 * or forced ungated search of fb_place_idle_steal(); the legacy path
 * searched at every idle entry. */
static struct sim_fiber *steal(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	bool searched = false;
	int vid;

	if (s->o.legacy_idle) {
		vid = victim_search(s, w);
	} else {
		bool lb_ok = steal_victim >= 0 && steal_victim != w &&
			     nr_running(s, steal_victim) > 1;

		if (!lb_ok && (x->steal_force || s->cursor >= x->next_steal_ns))
			(void)steal_hint(s, w); /* charged; decided below */
		vid = fb_place_idle_steal(&s->v, w, steal_victim,
					  x->steal_force, s->cursor,
					  &x->next_steal_ns, &searched);
		x->steal_force = false;
		if (searched) {
			COUNT(s, w, steal_searches);
			charge_search(s, w, vid);
		}
	}
	steal_victim = -1;
	if (vid < 0 || vid == w)
		return NULL;
	if (s->o.legacy_idle)
		return nr_running(s, vid) < 2 ? NULL : steal_from(s, w, vid);
	return steal_any(s, w, vid);
}

static void idle_entry(struct sim *s, int w)
{
	const struct fb_sched_view *t = s->view;
	struct sim_worker *x = &s->w[w];

	fb_place_update_idle_core(&s->v, w);
	if (t->sd_llc[w] && s->cursor >= x->next_sis_refresh_ns) {
		x->next_sis_refresh_ns =
			s->cursor + (uint64_t)t->llc_size[w] * SIM_MS;
		fb_place_update_idle_scan(&s->v, w, t->sd_llc[w],
					  fb_place_llc_util(&s->v, w), false);
	}
}

static void poll_start(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	uint64_t end = s->cursor + (uint64_t)(s->c.poll_us * SIM_US);
	uint64_t next = timer_next(s, w);

	fb_store_relaxed(&pw_of(s, w)->idle_stamp, s->cursor);
	fb_store_relaxed(&pw_of(s, w)->state, FB_WS_POLLING);
	set_mode(s, w, SW_POLL);
	x->poll_from = s->cursor;
	if (next && next < end)
		end = next;
	ev_push(s, end, EV_POLL_END, w, x->gen);
	ev_push(s, s->cursor, EV_POLL_CHECK, w, x->gen);
}

/*
 * idle_loop - one pass of fb_worker_main()'s loop with nothing running.
 * Returns the fiber it switched to, or NULL after it started polling.
 */
static struct sim_fiber *idle_loop(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	struct sim_fiber *next;

	next = x->prev_switch >= 0 ? sim_fiber(s, x->prev_switch) : NULL;
	x->prev_switch = -1;
	finish_switch(s, w, next);
	next = pick_idle(s, w);
	if (!next && balance_idle(s, w))
		next = pick_idle(s, w);
	if (!next)
		next = steal(s, w);
	if (next) {
		x->steal_force = false;
		balance_idle_exit(s, w);
		switch_to(s, w, next);
		tick_maybe(s, w);
		return next;
	}
	s->st.idle_entries++;
	idle_entry(s, w);
	poll_start(s, w);
	return NULL;
}

/* ---- running fibers ------------------------------------------------------------------ */

static void start_segment(struct sim *s, int w, struct sim_fiber *f,
			  double work)
{
	struct sim_worker *x = &s->w[w];

	if (x->mode != SW_RUN)
		set_mode(s, w, SW_RUN);
	else
		x->gen++;
	f->left = work > 0 ? work : 0;
	f->seg_start = s->cursor;
	f->rate = speed_of(s, w);
	ev_push(s, seg_end(s->cursor, f->left, f->rate), EV_SEG_END, w, x->gen);
}

/*
 * run - worker @w at the cursor: run fibers' steps until one computes, or
 * the worker goes idle.
 */
static void run(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	struct sim_fiber *f, *next;
	enum sim_act a;
	bool switched;
	int spins = 0;

	acting = w;
	for (;;) {
		if (x->curr < 0) {
			if (x->mode == SW_RUN)
				set_mode(s, w, SW_WAKE);
			if (!idle_loop(s, w))
				return;
		}
		f = sim_fiber(s, x->curr);
		/* Each step runs at an event of its own time: what it does
		 * becomes visible to the other workers then, not at the time
		 * this handler started. */
		if (s->cursor > s->now) {
			start_segment(s, w, f, 0);
			return;
		}
		a = f->step(s, f);
		if (s->stop)
			return;
		switch (a) {
		case SIM_COMPUTE:
			start_segment(s, w, f, f->work + f->refill);
			f->refill = 0;
			return;
		case SIM_YIELD:
			next = yield(s, w, f, &switched);
			if (!switched && ++spins > 1000000) {
				fprintf(stderr,
					"fiber-sim: fiber %d yields "
					"without computing\n",
					f->id);
				exit(1);
			}
			break;
		case SIM_SLEEP:
			timer_arm(s, w, f,
				  s->cursor + (uint64_t)llround(f->work));
			__attribute__((fallthrough));
		case SIM_BLOCK:
			f->state = SF_PARKED;
			COUNT(s, w, parks);
			next = schedule(s, w, f, M_PARK);
			break;
		case SIM_EXIT:
			COUNT(s, w, exits);
			f->state = SF_DEAD;
			next = schedule(s, w, f, M_EXIT);
			break;
		default:
			next = NULL;
			break;
		}
		(void)next;
		if (x->curr < 0 && x->mode == SW_RUN)
			set_mode(s, w, SW_WAKE);
	}
}

/* ---- event handlers ---------------------------------------------------------------- */

static void on_seg_end(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	struct sim_fiber *f = sim_fiber(s, x->curr);

	sim_trace_run(s, w, f->id, f->seg_start, s->cursor);
	f->left = 0;
	/* Still SW_RUN: a fiber that computes again keeps its siblings'
	 * speeds; run() leaves the mode otherwise. */
	run(s, w);
}

/* idle_sleep - fb_sched_idle_sleep() once the poll window is over. */
static void idle_sleep(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	struct fb_pworker *p = pw_of(s, w);
	uint64_t next = timer_next(s, w);
	bool as_poller = s->poller_held < 0;

	acting = w;
	if (!s->o.legacy_idle && steal_hint(s, w)) {
		/* victim_exists(): the one search before sleeping */
		int v = fb_place_pick_victim(&s->v, w);

		COUNT(s, w, steal_searches);
		charge_search(s, w, v);
		if (v >= 0 && v != w && victim_movable(s, w, v)) {
			x->steal_force = true;
			COUNT(s, w, idle_polls_found);
			fb_store_relaxed(&p->state, FB_WS_RUNNING);
			set_mode(s, w, SW_WAKE);
			run(s, w);
			return;
		}
	}
	balance_sleep(s, w);
	if (next && next <= s->cursor)
		goto out;
	if (fb_load_relaxed(&p->state) & FB_WS_NEED_RESCHED)
		return; /* a waker saw it polling: its EV_IDLE comes */
	fb_store_relaxed(&p->state, as_poller ? FB_WS_EPOLL : FB_WS_SLEEPING);
	if (has_work(s, w))
		goto out;
	if (as_poller) {
		s->poller_held = w;
		COUNT(s, w, epoll_sleeps);
	} else {
		COUNT(s, w, sleeps);
	}
	x->poller = as_poller;
	set_mode(s, w, SW_SLEEP);
	if (next)
		ev_push(s, next + (uint64_t)s->c.timer_slack_ns, EV_IDLE, w,
			x->gen);
	return;
out:
	fb_store_relaxed(&p->state, FB_WS_RUNNING);
	set_mode(s, w, SW_WAKE);
	timers_run(s, w);
	run(s, w);
}

static void on_idle(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];
	unsigned st = fb_load_relaxed(&pw_of(s, w)->state) & FB_WS_MASK;

	acting = w;
	/* Woken from its sleep, or a kick or a wake ended its poll:
	 * steal() searches once (sched/idle.c). */
	x->steal_force = true;
	if (st == FB_WS_POLLING)
		COUNT(s, w, idle_polls_found);
	if (x->poller) {
		x->poller = false;
		s->poller_held = -1;
	}
	fb_store_relaxed(&pw_of(s, w)->state, FB_WS_RUNNING);
	timers_run(s, w);
	run(s, w);
}

static void on_poll_check(struct sim *s, int w)
{
	struct sim_worker *x = &s->w[w];

	acting = w;
	if (s->o.legacy_idle ? victim_search(s, w) >= 0 : steal_due(s, w)) {
		COUNT(s, w, idle_polls_found);
		fb_store_relaxed(&pw_of(s, w)->state, FB_WS_RUNNING);
		set_mode(s, w, SW_WAKE);
		run(s, w);
		return;
	}
	ev_push(s, s->cursor + (uint64_t)s->c.victim_check_ns, EV_POLL_CHECK, w,
		x->gen);
}

static void dispatch(struct sim *s, const struct sim_event *e)
{
	struct sim_worker *x;

	s->now = e->t;
	s->cursor = e->t;
	if (e->type == EV_END) {
		s->stop = true;
		return;
	}
	x = &s->w[e->id];
	if (e->gen != x->gen)
		return;
	switch (e->type) {
	case EV_SEG_END:
		on_seg_end(s, e->id);
		break;
	case EV_IDLE:
		on_idle(s, e->id);
		break;
	case EV_POLL_END:
		if (x->mode == SW_POLL)
			idle_sleep(s, e->id);
		break;
	case EV_POLL_CHECK:
		if (x->mode == SW_POLL)
			on_poll_check(s, e->id);
		break;
	}
}

/* ---- setup and the run ------------------------------------------------------------------ */

static int view_flags(const struct sim_opts *o)
{
	unsigned f = 0;

	if (fb_feat(ASYM_PACKING))
		f |= FB_VIEW_ASYM_PACKING;
	if (o->asym_smt)
		f |= FB_VIEW_ASYM_SMT;
	return (int)f;
}

int sim_open(struct sim *s, const struct sim_opts *o, char *err, size_t errlen)
{
	uint64_t mask;
	int rc;

	memset(s, 0, sizeof(*s));
	memset(&foreign_cnt, 0, sizeof(foreign_cnt));
	s->o = *o;
	s->free_fiber = -1;
	s->poller_held = -1;
	s->rng = o->seed ? o->seed : 1;
	sim_cost_default(&s->c);
	if (o->cost && sim_cost_set(&s->c, o->cost)) {
		snprintf(err, errlen, "bad --cost");
		return EINVAL;
	}
	rc = fb_features_parse("--features", o->features ? o->features : "",
			       fb_features_default(), &mask, err, errlen);
	if (rc)
		return rc;
	fb_store_relaxed(&fb_features_mask, mask);
	/* NULL or "" is the host to fb_topo_open(): a run would depend on
	 * the machine it runs on (doc/simulator.md, Determinism). */
	if (!o->topology || !*o->topology) {
		snprintf(
			err, errlen,
			"--topology \"%s\": empty; expected an hwloc synthetic "
			"description such as \"pack:2 numa:1 l3:2 core:4 "
			"pu:2\" or the path of an hwloc XML file (fiber-sim "
			"does not simulate the host it runs on)",
			o->topology ? o->topology : "");
		return EINVAL;
	}
	rc = fb_topo_open_named(&s->topo, o->topology, "--topology", err,
				errlen);
	if (rc)
		return rc;
	if (!o->workers && fb_topo_nr_pus(s->topo) > SIM_MAX_WORKERS) {
		snprintf(err, errlen,
			 "--topology \"%s\": %d PUs, more than the %d workers "
			 "fiber-sim can simulate (one per PU); give --workers "
			 "from 1 to %d",
			 o->topology, fb_topo_nr_pus(s->topo), SIM_MAX_WORKERS,
			 SIM_MAX_WORKERS);
		rc = EINVAL;
		goto fail_topo;
	}
	rc = fb_topo_view_build(s->topo, o->workers, (unsigned)view_flags(o),
				&s->view);
	if (rc) {
		snprintf(err, errlen, "cannot build the domain view: %s",
			 strerror(rc));
		goto fail_topo;
	}
	s->n = s->view->nr_workers;
	s->pw = aligned_alloc(FB_CACHELINE, sizeof(*s->pw) * (size_t)s->n);
	s->pp = calloc((size_t)s->n, sizeof(*s->pp));
	s->w = calloc((size_t)s->n, sizeof(*s->w));
	if (!s->pw || !s->pp || !s->w) {
		snprintf(err, errlen, "out of memory");
		return ENOMEM;
	}
	memset(s->pw, 0, sizeof(*s->pw) * (size_t)s->n);
	s->g.blocked_min_ticks = o->blocked_interval;
	for (int i = 0; i < s->n; i++) {
		struct fb_pworker *p = &s->pw[i];
		struct sim_worker *x = &s->w[i];
		const struct fb_topo_pu *pu =
			fb_topo_pu(s->topo, i % s->view->nr_pus);
		int k;

		s->pp[i] = p;
		p->id = i;
		p->avg_idle = FB_AVG_IDLE_INIT_NS;
		p->max_idle_balance_cost = FB_MAX_IDLE_BALANCE_COST_INIT_NS;
		p->push_target = -1;
		p->state = FB_WS_RUNNING;
		p->avg_busy = true;
		p->rng = sim_rand(s) | 1;
		x->id = i;
		x->core = s->view->core_id[i];
		x->pkg = pu->pkg;
		x->thread = 0;
		fb_wmask_for_each (k, s->view->core_span[i]) {
			if (k == i)
				break;
			x->thread++;
		}
		x->curr = x->runnext = x->prev_switch = -1;
		x->rq_head = x->rq_tail = x->wl_head = -1;
		x->migrate_to = -1;
		x->push_fiber = -1;
		x->busy = true;
		x->mode = SW_WAKE;
	}
	/* CPU kinds: every worker below the highest kind runs slower. */
	{
		int top = 0;

		for (int i = 0; i < s->n; i++)
			if (fb_topo_pu(s->topo, i % s->view->nr_pus)->kind >
			    top)
				top = fb_topo_pu(s->topo, i % s->view->nr_pus)
					      ->kind;
		for (int i = 0; i < s->n; i++)
			s->w[i].speed =
				fb_topo_pu(s->topo, i % s->view->nr_pus)->kind <
						top ?
					s->c.little_speed :
					1.0;
	}
	s->v.nr_workers = s->n;
	s->v.w = s->pp;
	s->v.topo = s->view;
	s->v.g = &s->g;
	s->st.wake_lat.b = calloc(SIM_HIST_BUCKETS, sizeof(uint32_t));
	s->st.wake_lat.min = UINT64_MAX;
	return 0;
fail_topo:
	fb_topo_close(s->topo);
	s->topo = NULL;
	return rc;
}

/*
 * deadlocked - how many fibers are parked with nothing left that could
 * wake them: no fiber runnable or running and no timer armed (a wake
 * makes its fiber runnable at once, and only fibers and timers wake).
 * 0 when some fiber can still run.
 */
static int deadlocked(struct sim *s)
{
	int parked = 0;

	for (int i = 0; i < s->n; i++)
		if (s->w[i].nr_timers)
			return 0;
	for (int i = 0; i < s->nr_fibers; i++) {
		const struct sim_fiber *f = sim_fiber(s, i);

		if (f->state == SF_RUNNABLE || f->state == SF_RUNNING)
			return 0;
		if (f->state == SF_PARKED)
			parked++;
	}
	return parked;
}

/* More events than this at one virtual time are a run that cannot
 * advance: 64 for each fiber of the largest run. */
#define SIM_MAX_SAME_TIME (64 * SIM_MAX_FIBERS)

void sim_run(struct sim *s)
{
	char err[256];
	int same_time = 0;

	sim_trace_open(s);
	s->cursor = 0;
	acting = -1;
	if (s->o.duration_ns)
		ev_push(s, s->o.duration_ns, EV_END, 0, 0);
	/* Every worker starts in its idle loop at time 0, as the runtime's
	 * threads do once they are up. */
	for (int i = 0; i < s->n; i++)
		ev_push(s, 0, EV_IDLE, i, ++s->w[i].gen);
	if (s->wl->setup(s, s->o.workload, err, sizeof(err))) {
		fprintf(stderr, "fiber-sim: %s\n", err);
		exit(2);
	}
	while (s->nr_heap && !s->stop) {
		struct sim_event e = ev_pop(s);

		/* A workload that does no work at no cost (every work and
		 * every cost 0) runs for ever at one instant and never
		 * reaches --duration-ms. */
		if (e.t != s->now || !s->st.events)
			same_time = 0;
		else if (++same_time > SIM_MAX_SAME_TIME) {
			fprintf(stderr,
				"fiber-sim: %s: no progress: %d events at "
				"%.3f virtual ms without the clock moving "
				"(work and costs all 0?)\n",
				s->o.workload, SIM_MAX_SAME_TIME, s->now / 1e6);
			exit(1);
		}
		s->st.events++;
		dispatch(s, &e);
	}
	/* Ended by the duration or with no event left, not by the
	 * workload: see whether its fibers wait for each other. */
	if (!s->finished)
		s->nr_deadlocked = deadlocked(s);
	s->end_ns = s->cursor > s->now ? s->cursor : s->now;
	if (s->o.duration_ns && s->end_ns > s->o.duration_ns)
		s->end_ns = s->o.duration_ns;
	for (int i = 0; i < s->n; i++) {
		struct sim_worker *x = &s->w[i];

		if (x->mode == SW_RUN && s->end_ns > x->busy_since)
			x->busy_ns += s->end_ns - x->busy_since;
		x->mode = SW_WAKE;
	}
	s->wl->result(s, &s->res);
	sim_trace_close(s);
}

const struct sim_counters *sim_foreign_counters(void);
const struct sim_counters *sim_foreign_counters(void)
{
	return &foreign_cnt;
}

void sim_close(struct sim *s)
{
	if (s->wl && s->wl->cleanup)
		s->wl->cleanup(s);
	for (int i = 0; i < s->nr_fibers; i++) {
		struct sim_fiber *f = sim_fiber(s, i);

		if (f->pf.allowed)
			CPU_FREE(f->pf.allowed);
	}
	for (int i = 0; i < s->nr_chunks; i++)
		free(s->chunk[i]);
	free(s->chunk);
	if (s->w)
		for (int i = 0; i < s->n; i++)
			free(s->w[i].timers);
	free(s->w);
	free(s->pw);
	free(s->pp);
	free(s->heap);
	sim_hist_free(&s->st.wake_lat);
	fb_topo_view_free(s->view);
	fb_topo_close(s->topo);
	memset(s, 0, sizeof(*s));
}

void sim_dump(struct sim *s, FILE *out);
void sim_dump(struct sim *s, FILE *out)
{
	for (int i = 0; i < s->n; i++) {
		struct sim_worker *x = &s->w[i];

		fprintf(out,
			"w%d mode %d state %u curr %d runnext %d rq %d wl %d nr %d gen %llu\n",
			i, x->mode, fb_load_relaxed(&s->pw[i].state), x->curr,
			x->runnext, x->rq_head, x->wl_head, nr_running(s, i),
			(unsigned long long)x->gen);
	}
	for (int i = 0; i < s->nr_fibers; i++) {
		struct sim_fiber *f = sim_fiber(s, i);

		fprintf(out, "f%d state %d worker %d pc %d kind %d\n", i,
			f->state, f->worker, f->pc, f->kind);
	}
}
