/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * core.c - workers, run queues, wakelists, the idle loop, and the
 * block/wake protocol.
 *
 * Model.  Each worker is a kernel thread with a FIFO run queue (rq, under
 * rq_lock), a lock-free multi-producer wakelist that only it drains, and a
 * state word (RUNNING, POLLING, SLEEPING, plus NEED_RESCHED) on which it
 * sleeps with futex_wait.  A fiber runs until it yields, parks or returns;
 * then its worker picks the next fiber from its run queue (after draining
 * the wakelist) and switches straight to it, or to its idle loop, which
 * polls for LIBFIBER_IDLE_POLL_US and then sleeps.
 *
 * The block/wake protocol (no lost wakeup, never two workers on a stack).
 *
 * 1. A fiber that will block announces it under the wait-list lock of the
 *    object it waits on: state = PARKING, then it queues its waiter and
 *    releases the lock.  A waker removes the waiter under that lock and
 *    calls fb_fiber_wake().
 * 2. The fiber then CASes PARKING -> PARKED.  A waker CASes PARKING ->
 *    RUNNING or PARKED -> RUNNABLE.  Exactly one of the three CASes on a
 *    given PARKING value succeeds first:
 *    - waker first (PARKING -> RUNNING): the fiber's own CAS fails, it sees
 *      RUNNING and carries on without ever leaving its worker.  The wakeup
 *      is not lost because it is recorded in the state word itself.
 *    - fiber first (PARKING -> PARKED): the fiber switches away; the waker
 *      then wins PARKED -> RUNNABLE and from that moment owns the fiber and
 *      must put it on some run queue.  Nobody else can: the state is no
 *      longer PARKED.
 *    On a one-worker runtime a fiber that claimed another's waiter finds
 *    it PARKED (it left the only worker before the waker ran), and the
 *    claim leaves nobody else to move it: fb_waiter_wake_ret() stores
 *    RUNNABLE without the CAS.
 * 3. on_worker.  A worker sets f->on_worker = 1 before it switches to f and
 *    clears it with a release store in fb_sched_finish_switch(), once it runs on
 *    another stack.  The waker that owns a PARKED fiber reads on_worker with
 *    acquire (its CAS on state, acq_rel, orders it after the fiber's store
 *    of 1).  While it is 1 the fiber's registers are not yet saved, so the
 *    waker must not let any other worker run it.  It either pushes the fiber
 *    on the wakelist of the worker that is leaving it (drained only at that
 *    worker's next scheduling point, which is after it left the stack, or
 *    by the worker itself, which then simply keeps running it), or spins
 *    until on_worker is 0.  Thieves skip queued fibers whose on_worker is 1.
 * 4. Sleeping workers (Dekker).  A waker makes work visible (a seq_cst push
 *    on the wakelist, or a seq_cst increment of nr_running under rq_lock)
 *    and then reads the target's state (seq_cst).  An idle worker stores
 *    POLLING, or CASes POLLING -> SLEEPING, and then reads its wakelist and
 *    nr_running (seq_cst).  In the single total order of these operations
 *    one side sees the other: either the worker sees the work, or the waker
 *    sees POLLING/SLEEPING and sets NEED_RESCHED (which also makes the
 *    worker's POLLING -> SLEEPING CAS fail) and, for SLEEPING only, calls
 *    futex_wake.  A polling worker costs no system call.
 *    The poller (sched/netpoll.c) is the same argument with another sleep:
 *    the worker CASes POLLING -> EPOLL instead of SLEEPING, re-reads its
 *    work (seq_cst) and calls epoll_wait; a waker that sees EPOLL sets
 *    NEED_RESCHED and writes the runtime's eventfd, which is in the epoll
 *    set.  The eventfd stays readable until the poller reads it, so a write
 *    that lands before epoll_wait is entered still ends it at once.  Only
 *    the worker holding the poller flag ever stores EPOLL, so the one
 *    eventfd reaches the one worker it is meant for; a stale write (the
 *    poller left epoll for I/O just before it) costs the next poller one
 *    empty round.
 * 5. Timers and I/O.  Each worker fires its own timer heap and bounds its
 *    sleep (futex or epoll timeout) by the heap's next deadline; a busy
 *    worker fires due timers and, when no worker is the poller, polls
 *    epoll without blocking every FB_TICK_SWITCHES scheduling points
 *    (fb_sched_tick, from fb_sched_finish_switch once the previous fiber
 *    is released, so a timer or fd event may wake that very fiber).
 *    Readiness and expiry wake fibers through fb_fiber_wake(), so
 *    placement decides where I/O wakeups run, as for any other wakeup.
 *
 * runnext.  A fiber that wakes another on its own worker (the ping-pong of
 * a pipe or a channel) puts it in w->runnext, which only the owner reads
 * and writes: schedule() takes it without the run-queue lock, and since
 * the leaving fiber and the arriving one cancel out, nr_running is not
 * touched.  The wakee has on_worker == 0 (its worker finished leaving it
 * before the waker ran).  Thieves and the balancer do not see runnext, so
 * a streak of FB_RUNNEXT_STREAK hand-offs falls back to the queue, and a
 * yield puts runnext at the head of the queue.
 *
 * Alternatives rejected: a global run queue (one contended lock); waking
 * through a per-worker eventfd (a system call on every remote wake); and
 * letting the switching worker re-check the state after the switch instead
 * of on_worker (it would make every park pay a second atomic RMW).
 *
 * Foreign threads (main, a pthread) have no worker: their wakeups go to a
 * worker's wakelist (TTWU_QUEUE) or run queue; they block on a futex in
 * their fb_waiter.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/sanitizer.h"
#include "base/trace.h"
#include "sched/sched.h"
#include "topo/rcu.h"

struct fb_runtime *fb_rt;
void (*fb_test_switch_hook)(void);
atomic_bool fb_rt_up;
atomic_bool fb_rt_open;
atomic_bool fb_rt_accepting;
atomic_long fb_rt_nr_outside;
_Atomic uint64_t fb_rt_epoch;
/* Foreign threads inside the gate (sched/sched.h); one shared line, touched
 * only by threads that are not workers. */
static atomic_long rt_inside;
/* Facts of the running runtime that any thread may read at any time:
 * set by fiber_init() before the gate opens, cleared by fiber_shutdown()
 * (fb_runtime_set_facts). */
static atomic_int rt_nr_workers;
static _Atomic size_t rt_stack_size;
__thread struct fb_worker *fb_this_worker_tls
	__attribute__((tls_model("initial-exec")));

#ifndef __x86_64__
/* See sched/sched.h: elsewhere the thread pointer may be cached across a
 * switch, so the read lives in a function of its own. */
fb_noinline struct fb_worker *fb_worker_self_slow(void)
{
	return *(struct fb_worker *volatile *)&fb_this_worker_tls;
}
#endif

static __thread uint64_t thread_id; /* fb_thread_id(); 0: not yet */

uint64_t fb_thread_id(void)
{
	static _Atomic uint64_t next = 1;

	if (fb_unlikely(!thread_id))
		thread_id = (UINT64_C(1) << 63) | fb_add_relaxed(&next, 1);
	return thread_id;
}

void fb_count_foreign(size_t offset)
{
	struct fb_runtime *r = fb_rt;

	if (r)
		atomic_fetch_add_explicit(
			(_Atomic uint64_t *)((char *)&r->foreign + offset), 1,
			memory_order_relaxed);
}

bool fb_rt_enter(void)
{
	/* Dekker with fiber_shutdown(): it stores the gate closed (seq_cst)
	 * and then reads rt_inside (seq_cst); we add (seq_cst) and then
	 * read the gate.  One of the two sees the other. */
	atomic_fetch_add(&rt_inside, 1);
	if (fb_likely(fb_load_seqcst(&fb_rt_open)))
		return true;
	atomic_fetch_sub(&rt_inside, 1);
	return false;
}

void fb_rt_leave(void)
{
	atomic_fetch_sub_explicit(&rt_inside, 1, memory_order_release);
}

void fb_rt_atfork_child(void)
{
	struct fb_worker *w = fb_this_worker_tls;

	fb_store_relaxed(&rt_inside, 0);
	fb_runtime_set_facts(0, 0);
	/* Forked from a fiber: the child's thread goes on as that fiber,
	 * so it keeps the fiber's locks (fb_sync_self), as a thread that
	 * forks keeps its pthread mutexes.  The fiber itself never runs
	 * in the child, so nobody else has its id. */
	if (w && w->curr)
		thread_id = w->curr->id;
	fb_this_worker_tls = NULL; /* the child's thread is no worker */
}

void fb_rt_wait_outside(void)
{
	for (unsigned int spins = 0; fb_load_seqcst(&rt_inside);)
		if (++spins < 64)
			sched_yield();
		else
			usleep(100);
}

void fb_runtime_set_facts(int nr_workers, size_t stack_size)
{
	fb_store_relaxed(&rt_stack_size, stack_size);
	fb_store_release(&rt_nr_workers, nr_workers);
}

int fb_runtime_nr_workers(void)
{
	return fb_load_acquire(&rt_nr_workers);
}

size_t fb_runtime_stack_size(void)
{
	size_t s = fb_load_relaxed(&rt_stack_size);

	return s ? s : FB_STACK_DEFAULT;
}

struct fb_worker *fb_runtime_worker(int i)
{
	return fb_rt && i >= 0 && i < fb_rt->nr_workers ? fb_rt->workers[i] :
							  NULL;
}

/* ---- waking workers ---------------------------------------------------- */

/*
 * wake_worker - make sure worker @t notices new work (the IPI replacement).
 * Context: any thread, any lock; must follow the seq_cst publication of the
 * work (rule 4 above).
 */
void fb_sched_wake_worker(struct fb_worker *t, struct fb_worker *this)
{
	unsigned int s = fb_load_seqcst(&t->pw.state);

	for (;;) {
		if ((s & FB_WS_MASK) == FB_WS_RUNNING ||
		    (s & FB_WS_NEED_RESCHED))
			return;
		if (fb_cas_seqcst(&t->pw.state, &s, s | FB_WS_NEED_RESCHED))
			break;
	}
	if ((s & FB_WS_MASK) == FB_WS_SLEEPING) {
		fb_futex_wake(&t->pw.state, 1);
		FB_COUNT(this, futex_wakes);
	} else if ((s & FB_WS_MASK) == FB_WS_EPOLL) {
		fb_sched_poll_kick();
		FB_COUNT(this, eventfd_wakes);
	} else {
		FB_COUNT(this, poll_wakes);
	}
}

/*
 * kick_idle - a worker has a backlog (@t has several runnable fibers) and
 * some worker sleeps: wake an idle one so that it steals (a polling one
 * would find the backlog by itself, but it is nearer, so it goes first).
 */
static fb_noinline void kick_idle(struct fb_worker *t, struct fb_worker *this)
{
	int n = fb_rt->nr_workers;

	for (int k = 1; k < n; k++) {
		struct fb_worker *i = fb_rt->workers[(t->id + k) % n];
		unsigned int s = fb_load_relaxed(&i->pw.state);

		if ((s & FB_WS_MASK) == FB_WS_RUNNING ||
		    (s & FB_WS_NEED_RESCHED))
			continue;
		if (fb_load_relaxed(&i->pw.nr_running))
			continue;
		fb_sched_wake_worker(i, this);
		FB_COUNT(this, kicks);
		return;
	}
}

/* ---- run queues and wakelists ------------------------------------------ */

/* push - hand @f to @t through its wakelist (doc/scheduler.md 3.2.3). */
static void push(struct fb_fiber *f, struct fb_worker *t,
		 struct fb_worker *this)
{
	struct fb_fiber *old = fb_load_relaxed(&t->pw.wakelist);

	fb_store_seqcst(&t->pw.ttwu_pending, 1);
	do {
		fb_store_relaxed(&f->wl_next, old);
	} while (!fb_cas_seqcst(&t->pw.wakelist, &old, f));
	FB_COUNT(this, wakelist_pushes);
	if (!old)
		fb_sched_wake_worker(t, this);
}

/* wakelist_move - fb_sched_wakelist_move(), and with @pop the first
 * fiber of the run queue taken off it in the same hold of the lock
 * (NULL: none, or not asked).  Return: how many fibers it moved. */
static fb_always_inline int wakelist_move(struct fb_worker *w, bool remote,
					  struct fb_fiber **pop)
{
	struct fb_fiber *f = fb_xchg_seqcst(&w->pw.wakelist, NULL), *rev = NULL;
	struct fb_list *head;
	int n = 0;

	if (!f)
		return 0;
	while (f) {
		struct fb_fiber *next = fb_load_relaxed(&f->wl_next);

		fb_store_relaxed(&f->wl_next, rev);
		rev = f;
		f = next;
	}
	fb_spin_lock(&w->rq_lock);
	for (f = rev; f; f = fb_load_relaxed(&f->wl_next)) {
		fb_list_add_tail(&f->rq_node, &w->rq);
		n++;
	}
	if (remote)
		atomic_fetch_add(&w->pw.nr_running, n);
	else
		fb_nr_running_add_local(w, n);
	fb_store_release(&w->pw.ttwu_pending, 0);
	if (pop) {
		head = fb_list_pop(&w->rq);
		*pop = fb_list_entry(head, struct fb_fiber, rq_node);
	}
	fb_spin_unlock(&w->rq_lock);
	return n;
}

int fb_sched_wakelist_move(struct fb_worker *w, bool remote)
{
	return wakelist_move(w, remote, NULL);
}

struct fb_fiber *fb_sched_drain_pick(struct fb_worker *w)
{
	struct fb_fiber *f = NULL;

	if (wakelist_move(w, false, &f))
		FB_COUNT(w, wakelist_drains);
	return f;
}

/*
 * drain_wakelist - move every fiber handed to @w onto its run queue, in
 * wake order.  ttwu_pending is cleared only after they are queued, under
 * the lock, so no waker sees @w idle while handoffs are in flight.
 * Context: owner worker, rq_lock not held.
 */
fb_noinline void fb_sched_drain_wakelist(struct fb_worker *w)
{
	if (fb_sched_wakelist_move(w, false))
		FB_COUNT(w, wakelist_drains);
}

/*
 * enqueue - put RUNNABLE @f on @t's run queue directly.  Context: any
 * thread (@this its worker or NULL); @f is owned by the caller and has
 * on_worker == 0 unless @t is the worker leaving it.
 */
/* set_runnext - a fiber wakes @f on its own worker @this: if runnext is
 * free and the streak allows it, @f runs next, without the run-queue lock
 * (see schedule()).  Return: true if @f went there.  Context: worker
 * @this, @f RUNNABLE and owned by the caller. */
static inline bool set_runnext(struct fb_worker *this, struct fb_fiber *f)
{
	if (!this->curr || this->runnext ||
	    this->runnext_streak >= FB_RUNNEXT_STREAK)
		return false;
	this->runnext = f;
	this->runnext_streak++;
	FB_COUNT(this, local_enqueues);
	return true;
}

/* queue_local - enqueue() onto @this's own run queue, never runnext,
 * where idle workers and the monitor can see @f.  Context: worker
 * @this, @f RUNNABLE and owned by the caller. */
static void queue_local(struct fb_fiber *f, struct fb_worker *this)
{
	int nr;

	fb_spin_lock(&this->rq_lock);
	fb_list_add_tail(&f->rq_node, &this->rq);
	nr = fb_load_relaxed(&this->pw.nr_running) + 1;
	fb_store_relaxed(&this->pw.nr_running, nr);
	fb_spin_unlock(&this->rq_lock);
	FB_COUNT(this, local_enqueues);
	if (fb_unlikely(nr >= 3) && fb_load_relaxed(&fb_rt->nr_sleepers) > 0)
		kick_idle(this, this);
}

static void enqueue(struct fb_fiber *f, struct fb_worker *t,
		    struct fb_worker *this)
{
	int nr;

	if (t == this && set_runnext(this, f))
		return;
	fb_spin_lock(&t->rq_lock);
	fb_list_add_tail(&f->rq_node, &t->rq);
	if (t == this) {
		nr = fb_load_relaxed(&t->pw.nr_running) + 1;
		fb_store_relaxed(&t->pw.nr_running, nr);
	} else {
		nr = atomic_fetch_add(&t->pw.nr_running, 1) + 1;
	}
	fb_spin_unlock(&t->rq_lock);
	if (t == this) {
		FB_COUNT(this, local_enqueues);
	} else {
		FB_COUNT(this, direct_enqueues);
		fb_sched_wake_worker(t, this);
	}
	if (fb_unlikely(nr >= 3) && fb_load_relaxed(&fb_rt->nr_sleepers) > 0)
		kick_idle(t, this);
}

/* deliver - hand RUNNABLE @f to worker @t by the path H2 chooses
 * (doc/scheduler.md 3.2). */
static void deliver(const struct fb_place_view *v, struct fb_fiber *f, int t,
		    struct fb_worker *this)
{
	struct fb_worker *tw = fb_rt->workers[t];

	if (tw != this &&
	    fb_place_use_wakelist(v, &f->pf, t, this ? this->id : -1))
		push(f, tw, this);
	else
		enqueue(f, tw, this);
}

/* ---- the block/wake protocol ------------------------------------------- */

_Static_assert(FB_WF_SYNC == FB_PLACE_WF_SYNC, "wake flags disagree");
_Static_assert(FB_WF_POLLER == FB_PLACE_WF_POLLER, "wake flags disagree");

/* waker_pf - the running fiber's placement record, NULL outside a fiber. */
static struct fb_pfiber *waker_pf(void)
{
	struct fb_fiber *cur = fb_current();

	return cur ? &cur->pf : NULL;
}

/* count_wake - the LIBFIBER_STATS counters of one wake placement. */
static void count_wake(struct fb_worker *this, const struct fb_wake_result *r)
{
	FB_COUNT(this, wake_placements);
	if (r->affine)
		FB_COUNT(this, wake_affine);
	switch (r->pick) {
	case FB_PICK_TARGET:
		FB_COUNT(this, wake_target);
		break;
	case FB_PICK_PREV:
		FB_COUNT(this, wake_prev);
		break;
	case FB_PICK_RECENT:
		FB_COUNT(this, wake_recent);
		break;
	case FB_PICK_SIBLING:
		FB_COUNT(this, wake_idle_sibling);
		break;
	case FB_PICK_IDLE_CORE:
		FB_COUNT(this, wake_idle_core);
		break;
	case FB_PICK_SCAN_HIT:
		FB_COUNT(this, wake_scan_hit);
		break;
	case FB_PICK_SCAN_MISS:
		FB_COUNT(this, wake_scan_miss);
		break;
	case FB_PICK_AFFINITY:
		FB_COUNT(this, wake_affinity);
		break;
	case FB_PICK_PINNED:
		FB_COUNT(this, wake_pinned);
		break;
	}
	if (r->probes) {
		if (this)
			fb_store_relaxed(
				&this->cnt.wake_probes,
				fb_load_relaxed(&this->cnt.wake_probes) +
					(uint64_t)r->probes);
		else
			for (int i = 0; i < r->probes; i++)
				FB_COUNT(this, wake_probes);
	}
	if (r->core_scan)
		FB_COUNT(this, scan_idle_cores);
	if (r->cut_util)
		FB_COUNT(this, scan_cut_sis_util);
	if (r->cut_core_limit)
		FB_COUNT(this, scan_cut_core_limit);
}

static bool wake(struct fb_worker *this, struct fb_fiber *f,
		 unsigned int flags);
static void wake_place(struct fb_worker *this, struct fb_fiber *f,
		       unsigned int flags);

bool fb_fiber_wake(struct fb_fiber *f, unsigned int flags)
{
	struct fb_worker *this = fb_worker_self();
	bool woken;

	if (fb_likely(this))
		return wake(this, f, flags);
	if (!fb_rt_enter()) /* a foreign thread: through the gate */
		return false;
	woken = wake(NULL, f, flags);
	fb_rt_leave();
	return woken;
}

/* wake - fb_fiber_wake() once the waker may use the runtime: the state
 * change and the one-worker hand-off here, inline, so that a pipe's or a
 * channel's ping-pong on one worker pays no call frame for the placement
 * it does not need; the rest in wake_place(). */
static inline bool wake(struct fb_worker *this, struct fb_fiber *f,
			unsigned int flags)
{
	int s = fb_load_acquire(&f->state);

	/* A fiber an earlier runtime abandoned never runs in this one. */
	if (fb_unlikely(f->epoch != fb_load_relaxed(&fb_rt_epoch)))
		return false;
	for (;;) {
		if (s == FB_FIBER_PARKING) {
			if (fb_cas(&f->state, &s, FB_FIBER_RUNNING)) {
				FB_COUNT(this, wake_early);
				return true;
			}
		} else if (s == FB_FIBER_PARKED) {
			if (fb_cas(&f->state, &s, FB_FIBER_RUNNABLE))
				break;
		} else {
			return false;
		}
	}
	FB_COUNT(this, wakeups);
	if (this && this->solo) {
		/* One worker and the waker runs on it: there is nothing to
		 * place, and @f left the worker before the waker ran, so its
		 * on_worker is already 0. */
		FB_PROBE(wake, f->id, 0, 0, 0, -1);
		if (fb_unlikely(flags & FB_WF_QUEUE))
			queue_local(f, this);
		else
			fb_sched_wake_solo_tail(this, f);
		return true;
	}
	wake_place(this, f, flags);
	return true;
}

/* fb_sched_wake_solo_tail - the end of a one-worker wake (wake() and
 * fb_waiter_wake_ret()): runnext if it is free, else the queue. */
int fb_sched_wake_solo_tail(struct fb_worker *this, struct fb_fiber *f)
{
	if (fb_unlikely(fb_trace_on))
		fb_trace_wake_slow(this, f);
	if (!set_runnext(this, f))
		enqueue(f, this, this);
	return 0;
}

int fb_waiter_wake_tail(struct fb_waiter *w, unsigned int flags)
{
	fb_waiter_wake(w, flags);
	return 0;
}

/* wake_place - the rest of wake(): place RUNNABLE @f, which the caller
 * owns, and deliver it. */
static fb_noinline void wake_place(struct fb_worker *this, struct fb_fiber *f,
				   unsigned int flags)
{
	struct fb_place_view v;
	struct fb_wake_result res;
	int t;

	fb_sched_view_enter(&v);
	if (fb_load_acquire(&f->on_worker)) {
		t = f->pf.prev;
		if (fb_place_use_wakelist(&v, &f->pf, t,
					  this ? this->id : -1)) {
			FB_COUNT(this, wake_on_worker);
			FB_PROBE(wake, f->id, t, t, 0, -1);
			if (fb_unlikely(fb_trace_on))
				fb_trace_wake_slow(this, f);
			push(f, fb_rt->workers[t], this);
			fb_sched_view_exit();
			return;
		}
		FB_COUNT(this, on_worker_waits);
		for (unsigned int spins = 0; fb_load_acquire(&f->on_worker);)
			if (++spins < 1024)
				fb_cpu_relax();
			else
				sched_yield();
	}
	if ((flags & FB_WF_GROUP) && this && this->curr &&
	    !fb_place_wgroup_settled(&this->curr->pf, &f->pf))
		fb_wgroup_note(this, this->curr, f);
	t = fb_place_select_wake(&v, &f->pf, waker_pf(), this ? this->id : -1,
				 flags, fb_now_coarse_ns(), &res);
	count_wake(this, &res);
	if (f->pf.group) { /* doc/scheduler.md 1.10 */
		int h = fb_place_wgroup_target(&v, &f->pf, t);

		if (h != t)
			FB_COUNT(this, wake_group);
		t = h;
	}
	/* the placement decision: previous worker, target, probes, why */
	FB_PROBE(wake, f->id, f->pf.prev, t, res.probes, (int)res.pick);
	if (fb_unlikely(fb_trace_on))
		fb_trace_wake_slow(this, f);
	if ((flags & FB_WF_QUEUE) && this && t == this->id)
		queue_local(f, this);
	else
		deliver(&v, f, t, this);
	fb_sched_view_exit();
}

/* ---- waiters ------------------------------------------------------------- */

const char *fb_wait_kind_name(int kind)
{
	static const char *const names[] = {
#define FB_WAIT_NAME(name, str) [FB_WAIT_##name] = str,
		FB_WAIT_KINDS(FB_WAIT_NAME)
#undef FB_WAIT_NAME
	};

	if (kind < 0 || (size_t)kind >= FB_ARRAY_SIZE(names))
		return "?";
	return names[kind];
}

void fb_waiter_wait(struct fb_waiter *w, struct fb_spinlock *lock)
{
	struct fb_foreign_wait fw;

	fb_spin_unlock(lock);
	if (w->fiber) {
		fb_fiber_park();
		return;
	}
	/* Seen by the deadlock report and the dump (sched/monitor.c). */
	fb_foreign_wait_begin(&fw, w);
	while (!fb_load_acquire(w->futexp))
		fb_futex_wait(w->futexp, 0, NULL);
	fb_foreign_wait_end(&fw);
}

void fb_waiter_wake(struct fb_waiter *w, unsigned int flags)
{
	struct fb_fiber *f = w->fiber;
	atomic_uint *u;

	if (f) {
		fb_fiber_wake(f, flags);
		return;
	}
	/* The waiter may return as soon as it sees 1; the futex call may then
	 * hit a dead frame, which costs at most a spurious wakeup of a futex
	 * user that re-checks its condition, as every one here does. */
	u = w->futexp; /* read before the store: then @w may be gone */
	fb_store_release(u, 1);
	fb_futex_wake(u, 1);
}

/* ---- switching ----------------------------------------------------------- */

/*
 * finish_switch - first thing after every switch, on the new stack: release
 * the fiber we left (on_worker = 0) or reap it if it died.
 */
static fb_noinline void migrate_finish(struct fb_worker *w, struct fb_fiber *f)
{
	int t = fb_sched_balance_migrate_target(w, f); /* active balance */
	struct fb_place_view v;

	w->migrating = false;
	fb_sched_view_enter(&v);
	if (t < 0)
		t = fb_place_select_wake(&v, &f->pf, NULL, -1, 0, 0, NULL);
	FB_PROBE(migrate, f->id, w->id, t);
	deliver(&v, f, t, w);
	fb_sched_view_exit();
}

/* finish_switch - fb_sched_finish_switch(), inline in schedule(), which
 * runs it after every switch back to a fiber. */
static fb_always_inline void finish_switch(struct fb_worker *w)
{
	struct fb_fiber *prev = w->prev_switch;

	if (!prev)
		goto tick;
	w->prev_switch = NULL;
	if (fb_load_relaxed(&prev->state) == FB_FIBER_DEAD)
		fb_fiber_reap(w, prev);
	else
		fb_store_release(&prev->on_worker, 0);
	if (fb_unlikely(w->migrating))
		migrate_finish(w, prev);
tick:
	/* Timers and I/O of a busy worker (rule 5); @prev is released, so
	 * what the tick wakes may be @prev itself. */
	fb_sched_tick_maybe(w);
}

void fb_sched_finish_switch(struct fb_worker *w)
{
	finish_switch(w);
}

/* finish_fast - finish_switch() where it is only the release of a fiber
 * that parked: anything else (a dead or migrating fiber, the tick, no
 * fiber left) is fb_sched_finish_switch(), as a tail call, so that the
 * caller keeps nothing across it. */
static fb_always_inline void finish_fast(struct fb_worker *w)
{
	struct fb_fiber *prev = w->prev_switch;
	unsigned int ticks = w->ticks + 1;

	if (fb_unlikely(!prev || !(ticks & (FB_TICK_SWITCHES - 1)) ||
			w->migrating ||
			fb_load_relaxed(&prev->state) == FB_FIBER_DEAD)) {
		fb_sched_finish_switch(w);
		return;
	}
	w->ticks = ticks;
	w->prev_switch = NULL;
	fb_store_release(&prev->on_worker, 0);
}

/* ctx_switch - fb_ctx_switch wrapped in the sanitizers' bookkeeping.
 * @dying: the leaving context never resumes; @tsan: TSan's context of the
 * one we switch to. */
static inline void ctx_switch(void **save, void *load, const void *bottom,
			      size_t size, bool dying, void *tsan)
{
	void *fake = NULL;

	fb_san_start_switch(dying ? NULL : &fake, bottom, size);
	fb_san_tsan_switch(tsan);
	fb_ctx_switch(save, load);
	fb_san_finish_switch(fake);
}

/* switch_go - switch_to() once @next's averages are up to date.
 * @traced: the trace may be on (false where the caller saw it off). */
static fb_always_inline void switch_go(struct fb_worker *w,
				       struct fb_fiber *prev,
				       struct fb_fiber *next, uint64_t now,
				       bool traced)
{
	fb_store_relaxed(&next->state, FB_FIBER_RUNNING);
	fb_store_relaxed(&next->on_worker, 1);
	fb_write_once(&next->pf.prev, w->id); /* fiber_dump reads it */
	__atomic_store_n(&w->curr_pin, fb_read_once(&next->pf.pin),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&w->curr, next,
			 __ATOMIC_RELAXED); /* read by balancers */
	/* The stall detector's stamp: with switches, what the monitor
	 * samples (sched/monitor.c); a store, no atomic RMW. */
	fb_store_relaxed(&w->run_start, now);
	w->prev_switch = prev;
	FB_COUNT(w, switches);
	FB_PROBE(switch, w->id, prev ? prev->id : 0, next->id);
	if (traced && fb_unlikely(fb_trace_on))
		fb_trace_run_slow(w, next, now);
	ctx_switch(prev ? &prev->sp : &w->idle_sp, next->sp, next->stack.map,
		   next->stack.map_len,
		   prev && fb_load_relaxed(&prev->state) == FB_FIBER_DEAD,
		   next->san.tsan);
}

/* switch_to - fb_sched_switch_to(), inline in schedule(). */
static fb_always_inline void switch_to(struct fb_worker *w,
				       struct fb_fiber *prev,
				       struct fb_fiber *next, uint64_t now)
{
	fb_sched_pelt_enter(w, next, now);
	switch_go(w, prev, next, now, true);
}

void fb_sched_switch_to(struct fb_worker *w, struct fb_fiber *prev,
			struct fb_fiber *next, uint64_t now)
{
	switch_to(w, prev, next, now);
}

enum sched_mode { SCHED_YIELD, SCHED_PARK, SCHED_EXIT, SCHED_MIGRATE };

/*
 * schedule - leave the calling fiber and run the next runnable one, or the
 * idle loop.  Context: fiber @prev on worker @w; for SCHED_YIELD the caller
 * has set @prev RUNNABLE, for SCHED_PARK PARKED, for SCHED_EXIT DEAD.
 * @now: the scheduler clock.  Out of line, schedule_at(); the park's
 * common case, a hand-off to runnext, is fb_fiber_park()'s own.
 */
static fb_always_inline void schedule(struct fb_worker *w,
				      struct fb_fiber *prev,
				      enum sched_mode mode, uint64_t now)
{
	struct fb_list *n;
	struct fb_fiber *next = w->runnext;
	/* prev leaves and next runs: nr_running is unchanged, and no lock
	 * is needed, since nobody else sees runnext. */
	bool handoff = next && mode != SCHED_YIELD &&
		       !fb_load_relaxed(&w->pw.wakelist);

	fb_sched_pelt_leave(w, prev, now,
			    mode == SCHED_YIELD || mode == SCHED_MIGRATE,
			    mode == SCHED_PARK && handoff ? next : NULL);
	if (fb_unlikely(mode == SCHED_EXIT) && !w->solo) /* its share goes */
		fb_pelt_detach(&w->pw.avg, &prev->pf.avg, prev->pf.weight);
	if (handoff) {
		w->runnext = NULL;
		goto picked;
	}
	/* A scheduling point (topo/rcu.c); a hand-off leaves the report to
	 * this one, at most FB_RUNNEXT_STREAK hand-offs later. */
	fb_topo_quiescent(w->id);
	if (fb_load_relaxed(&w->pw.wakelist))
		fb_sched_drain_wakelist(w);
	fb_spin_lock(&w->rq_lock);
	if (next) { /* not taken above: it goes first in the queue */
		w->runnext = NULL;
		fb_list_add_head(&next->rq_node, &w->rq);
		fb_nr_running_add_local(w, 1);
		next = NULL;
	}
	w->runnext_streak = 0;
	if (mode == SCHED_YIELD)
		fb_list_add_tail(&prev->rq_node, &w->rq);
	else
		fb_nr_running_add_local(w, -1);
	n = fb_list_pop(&w->rq);
	fb_spin_unlock(&w->rq_lock);
	if (n)
		next = fb_list_entry(n, struct fb_fiber, rq_node);
picked:
	if (next == prev) { /* a scheduling point all the same (monitor.c) */
		fb_store_relaxed(&w->points, fb_load_relaxed(&w->points) + 1);
		fb_store_relaxed(&prev->state, FB_FIBER_RUNNING);
		return;
	}
	/* An overflow of a stack without a guard (sched/stack.c): one load
	 * and a compare; a guarded stack's canary never changes. */
	if (fb_unlikely(!fb_stack_canary_ok(&prev->stack)))
		fb_guard_canary_report(prev);
	w->migrating = mode == SCHED_MIGRATE;
	if (fb_unlikely(fb_test_switch_hook != NULL))
		fb_test_switch_hook();
	if (next) {
		switch_to(w, prev, next, now);
	} else {
		__atomic_store_n(&w->curr, NULL,
				 __ATOMIC_RELAXED); /* read by balancers */
		FB_PROBE(switch, w->id, prev->id, 0);
		if (fb_unlikely(fb_trace_on))
			fb_trace_run_slow(w, NULL, now);
		w->prev_switch = prev;
		ctx_switch(&prev->sp, w->idle_sp, w->idle_stack,
			   w->idle_stack_size, mode == SCHED_EXIT,
			   w->idle_tsan);
	}
	/* Resumed, perhaps on another worker. */
	finish_switch(fb_worker_self());
}

/* schedule_at - schedule(), out of line. */
static fb_noinline void schedule_at(struct fb_worker *w, struct fb_fiber *prev,
				    enum sched_mode mode, uint64_t now)
{
	schedule(w, prev, mode, now);
}

/* schedule_call - schedule_at() now. */
static void schedule_call(struct fb_worker *w, struct fb_fiber *prev,
			  enum sched_mode mode)
{
	schedule_at(w, prev, mode, fb_sched_clock());
}

/* park_pending - the rest of fb_fiber_park() while a cancellation is
 * pending somewhere: out of line, to keep the park's own frame empty. */
static fb_noinline void park_pending(struct fb_worker *w, struct fb_fiber *f)
{
	if (fb_cancel_park(f))
		return;
	FB_COUNT(w, parks);
	schedule_call(w, f, SCHED_PARK);
}

/*
 * handoff_fast - a park of @prev on @w at @now can hand the worker to
 * runnext fiber @next (NULL: none) the short way: schedule() would take
 * its hand-off path and call nothing there.  The worker's update can
 * wait (fb_sched_pelt_can_wait), both fibers' updates cross no period
 * boundary (*@dprev and *@dnext: their units), the stack's canary holds,
 * and neither the trace nor the test hook is on.  Pure loads.
 */
static fb_always_inline bool handoff_fast(struct fb_worker *w,
					  struct fb_fiber *prev,
					  struct fb_fiber *next, uint64_t now,
					  uint64_t *dprev, uint64_t *dnext)
{
	return next && next != prev && !fb_load_relaxed(&w->pw.wakelist) &&
	       fb_sched_pelt_can_wait(w, next) &&
	       fb_pelt_short(&prev->pf.avg, now, dprev) &&
	       fb_pelt_short(&next->pf.avg, now, dnext) &&
	       fb_stack_canary_ok(&prev->stack) && !fb_trace_on &&
	       !fb_test_switch_hook;
}

/*
 * handoff_solo - handoff_fast() for the runtime's only worker, which keeps
 * no load averages (sched/sched.h): only the switch itself must be safe.
 * Pure loads.
 */
static fb_always_inline bool
handoff_solo(struct fb_worker *w, struct fb_fiber *prev, struct fb_fiber *next)
{
	return next && next != prev && !fb_load_relaxed(&w->pw.wakelist) &&
	       fb_stack_canary_ok(&prev->stack) && !fb_trace_on &&
	       !fb_test_switch_hook;
}

/* park - fb_fiber_park() once its spin, if any, is over; @solo is
 * w->solo, which is constant, as a constant where the caller tested it. */
static fb_always_inline void park(struct fb_worker *w, bool solo)
{
	struct fb_fiber *f = w->curr, *next;
	int s = FB_FIBER_PARKING;
	uint64_t now, dprev, dnext;

	if (!fb_cas(&f->state, &s, FB_FIBER_PARKED)) {
		FB_BUG_ON(s != FB_FIBER_RUNNING);
		return; /* woken before we left */
	}
	/* A cancellation that came after the call's entry check: the CAS
	 * above orders the wait's claim word before this load (cancel.c). */
	if (fb_unlikely(fb_load_seqcst(&fb_nr_cancels_pending))) {
		park_pending(w, f);
		return;
	}
	FB_COUNT(w, parks);
	FB_PROBE(park, f->id, w->id, fb_load_relaxed(&f->waiter)->kind,
		 fb_load_relaxed(&f->waiter)->obj);
	/*
	 * The runtime's only worker hands itself to runnext without reading
	 * the clock, which costs about as much as the rest of the hand-off:
	 * it keeps no averages, so the clock would only stamp run_start, for
	 * the stall monitor, which times a run whose start is 0 from its own
	 * first look at it (sched/monitor.c), and last_ran_ns, for
	 * fiber_dump, which takes the worker's last reading instead (its
	 * tick's, at most FB_TICK_SWITCHES switches old).
	 */
	next = w->runnext;
	if (solo && fb_likely(handoff_solo(w, f, next))) {
		w->runnext = NULL;
		f->pf.last_ran_ns = w->bal.clock_ns;
		switch_go(w, f, next, 0, false);
		finish_fast(fb_worker_self());
		return;
	}
	now = fb_sched_clock();
	/* The clock may be a call: nothing is kept across it, nor across
	 * the switch, so that this function has few registers to save. */
	w = fb_worker_self();
	f = w->curr;
	next = w->runnext;
	if (solo) { /* no hand-off after all */
		schedule_at(w, f, SCHED_PARK, now);
		return;
	}
	if (fb_unlikely(!handoff_fast(w, f, next, now, &dprev, &dnext))) {
		schedule_at(w, f, SCHED_PARK, now);
		return;
	}
	/* What schedule() does for this case, without its calls; migrating
	 * is already false, as always while a fiber runs (it is set only
	 * for the switch out of one and cleared after it). */
	w->runnext = NULL;
	w->pelt_skipped = true;
	fb_pelt_add_short(&f->pf.avg, dprev, 1, 1, true);
	f->pf.avg_queued = false;
	f->pf.last_ran_ns = now;
	fb_pelt_add_short(&next->pf.avg, dnext, next->pf.avg_queued,
			  next->pf.avg_queued, false);
	switch_go(w, f, next, now, false);
	finish_fast(fb_worker_self());
}

/* point_unswitched - a scheduling point of worker @w that switched
 * nothing: a yield with nothing else to run, or a park whose spin saw the
 * wake.  A yield loop or a ping-pong of spins must still see its timers
 * and I/O (rule 5), publishers of the view must see it pass (topo/rcu.c),
 * and the stall detector too (sched/monitor.c). */
static void point_unswitched(struct fb_worker *w)
{
	fb_store_relaxed(&w->points, fb_load_relaxed(&w->points) + 1);
	fb_topo_quiescent(w->id);
	fb_sched_tick_maybe(w);
}

/* park_spun - park() on a worker of several with nothing else to run:
 * poll for the wake first (PARK_SPIN).  A wake that the poll sees leaves
 * the fiber RUNNING, as one that comes before park()'s CAS does; the
 * cancellation's check is then fb_waiter_wait_timed()'s, as after that
 * CAS's failure.  Out of line, so that the parks that hand the worker to
 * runnext keep their small frames. */
static fb_noinline void park_spun(struct fb_worker *w)
{
	if (fb_sched_park_spin(w, w->curr))
		point_unswitched(w);
	else
		park(w, false);
}

/* park_many, park_solo - park() on a worker of several and on the
 * runtime's only one: out of line, each with a frame of its own, and
 * entered by fb_fiber_park() as tail calls, before any frame. */
static fb_noinline void park_many(struct fb_worker *w)
{
	if (!w->runnext) {
		park_spun(w);
		return;
	}
	park(w, false);
}

static fb_noinline void park_solo(struct fb_worker *w)
{
	park(w, true);
}

void fb_fiber_park(void)
{
	struct fb_worker *w = fb_worker_self();

	if (fb_unlikely(!w->solo))
		park_many(w);
	else
		park_solo(w);
}

/* place_create - doc/scheduler.md 1.4.4 for new fiber @f of @this (NULL:
 * a foreign thread), counted.  Context: inside the view's section. */
static int place_create(const struct fb_place_view *v, struct fb_fiber *f,
			struct fb_worker *this)
{
	struct fb_create_info info = { 0 };
	int t = fb_place_select_create(v, &f->pf, this ? this->id : -1, &info);

	if (info.nr_numa_imb_kept)
		FB_COUNT(this, create_numa_imb);
	return t;
}

/*
 * place_kept - the running fiber of @w yields: a yield is no block, so
 * the fiber it created last and queued here for it to block (1.4.6), if
 * that one still waits at the head of the queue without having run, is
 * placed now as any creation is (1.4.4).
 */
static fb_noinline void place_kept(struct fb_worker *w)
{
	struct fb_fiber *k = w->kept;
	struct fb_place_view v;
	bool mine;

	w->kept = NULL;
	fb_spin_lock(&w->rq_lock);
	/* At the head of this queue, it is queued here, so alive. */
	mine = w->rq.next == &k->rq_node && fb_read_once(&k->pf.prev) < 0;
	if (mine) {
		fb_list_del(&k->rq_node);
		fb_nr_running_add_local(w, -1);
	}
	fb_spin_unlock(&w->rq_lock);
	if (!mine)
		return;
	FB_COUNT(w, create_placed);
	fb_sched_view_enter(&v);
	deliver(&v, k, place_create(&v, k, w), w);
	fb_sched_view_exit();
}

bool fb_sched_yield(void)
{
	struct fb_worker *w = fb_worker_self();
	struct fb_fiber *f = w->curr;

	if (fb_unlikely(w->kept))
		place_kept(w);

	/* An active balance asked for this fiber (sched/balance.c). */
	if (fb_unlikely(fb_load_relaxed(&w->pw.push_target) >= 0) &&
	    fb_sched_balance_push(w)) {
		fb_sched_migrate();
		return true;
	}
	if (!fb_load_relaxed(&w->pw.wakelist) && !w->runnext &&
	    fb_load_relaxed(&w->pw.nr_running) <= 1) {
		point_unswitched(w);
		return false;
	}
	FB_COUNT(w, yields);
	fb_store_relaxed(&f->state, FB_FIBER_RUNNABLE);
	schedule_call(w, f, SCHED_YIELD);
	return true;
}

void fb_sched_migrate(void)
{
	struct fb_worker *w = fb_worker_self();
	struct fb_fiber *f = w->curr;

	fb_store_relaxed(&f->state, FB_FIBER_RUNNABLE);
	schedule_call(w, f, SCHED_MIGRATE);
}

bool fb_sched_handoff_ok(struct fb_worker *w, const struct fb_fiber *f)
{
	/* PARKED and off its stack: nobody runs it, and only the caller,
	 * which claimed its wait, may wake it.  Only with nothing else
	 * queued: fibers that wait in the queue (a batch created before
	 * the joins) run first, and the reap's wake then lets the joiner
	 * find several of them done at once. */
	if (w->runnext || w->runnext_streak >= FB_RUNNEXT_STREAK ||
	    fb_load_relaxed(&w->pw.nr_running) > 1)
		return false;
	return !f || (fb_load_acquire(&f->state) == FB_FIBER_PARKED &&
		      !fb_load_acquire(&f->on_worker) &&
		      fb_read_once(&f->pf.prev) == w->id &&
		      f->epoch == fb_load_relaxed(&fb_rt_epoch));
}

void fb_sched_handoff(struct fb_worker *w, struct fb_fiber *f)
{
	int s = FB_FIBER_PARKED;

	FB_BUG_ON(!fb_cas(&f->state, &s, FB_FIBER_RUNNABLE));
	/* Not a wakeup by the counters: no placement was decided (README's
	 * wakeups = wake_placements + wake_on_worker). */
	FB_COUNT(w, exit_handoffs);
	FB_PROBE(wake, f->id, w->id, w->id, 0, -1);
	if (fb_unlikely(fb_trace_on))
		fb_trace_wake_slow(w, f);
	FB_BUG_ON(!set_runnext(w, f));
}

void fb_sched_exit(void)
{
	struct fb_worker *w = fb_worker_self();
	struct fb_fiber *f = w->curr;

	FB_COUNT(w, exits);
	if (f->pf.group)
		fb_wgroup_leave(f);
	if (fb_load_relaxed(&f->joiner)) /* see fb_fiber_exit_handoff() */
		fb_fiber_exit_handoff(w, f);
	fb_store_relaxed(&f->state, FB_FIBER_DEAD);
	schedule_call(w, f, SCHED_EXIT);
	fb_die(__FILE__, __LINE__, "a dead fiber was resumed");
}

void fb_fiber_main(void)
{
	struct fb_worker *w = fb_worker_self();
	struct fb_fiber *f;

	fb_san_finish_switch(NULL);
	fb_sched_finish_switch(w);
	f = w->curr;
	f->retval = f->fn(f->arg);
	if (fb_unlikely(!fb_worker_self()))
		exit(0); /* in the child of a fork() (api/runtime.c) */
	fb_fiber_exit_self(f->retval);
}

/* ---- creation ------------------------------------------------------------ */

int fb_sched_select_create_slow(struct fb_fiber *f)
{
	struct fb_worker *this = fb_worker_self();
	struct fb_place_view v;
	int t;

	fb_sched_view_enter(&v);
	if (this && fb_place_create_affine(&v, &f->pf, this->id)) {
		/* doc/scheduler.md 1.4.6: it waits here for its creator */
		FB_COUNT(this, create_affine);
		t = this->id;
	} else {
		t = place_create(&v, f, this);
	}
	fb_sched_view_exit();
	return t;
}

void fb_sched_enqueue_new(struct fb_fiber *f, int t)
{
	struct fb_worker *this = fb_worker_self();
	struct fb_place_view v;

	fb_add_relaxed(&fb_rt->nr_live, 1);
	FB_COUNT(this, creates);
	FB_PROBE(create, f->id, t);
	if (fb_unlikely(fb_trace_on))
		fb_trace_create_slow(this, f);
	fb_store_relaxed(&f->state, FB_FIBER_RUNNABLE);
	if (this && t == this->id) {
		/* No delivery path to choose.  With other workers, the run
		 * queue rather than runnext: an idle worker may steal it,
		 * and the monitor moves it away from a creator that computes
		 * on (doc/scheduler.md 1.4.6). */
		if (fb_rt->nr_workers == 1) {
			enqueue(f, this, this);
		} else {
			queue_local(f, this);
			this->kept = f;
		}
		return;
	}
	fb_sched_view_enter(&v);
	deliver(&v, f, t, this);
	fb_sched_view_exit();
}
