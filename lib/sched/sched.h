/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sched/sched.h - the fiber core and the scheduler core: fibers, workers, run
 * queues, wakelists, and the block/wake protocol the sync and I/O layers are
 * built on.  Dependencies point down: sync, io -> core -> sched -> place ->
 * topo (doc/design.md 2).  The opening comment of sched/core.c argues the
 * protocol; doc/design.md 4 summarises it.
 */
#ifndef FB_SCHED_H
#define FB_SCHED_H

#include <fiber.h>

#include <sched.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/clock.h"
#include "base/common.h"
#include "base/list.h"
#include "base/sanitizer.h"
#include "base/trace.h"
#include "place/place.h"
#include "sched/stack.h"
#include "topo/rcu.h"

struct fb_worker;
struct fb_waiter;

/*
 * Fiber states.  Transitions marked (CAS) race with wakers.
 *   NEW      created, not yet queued; only the creator touches it.
 *   RUNNABLE on a run queue or a wakelist, or being put on one by exactly one
 *            waker; owns its stack, may be stolen once on_worker is 0.
 *   RUNNING  the curr of a worker.
 *   PARKING  running, but announced (under a wait-list lock) that it will
 *            park; a waker that finds PARKING turns it back into RUNNING
 *            (CAS) and the fiber never leaves its worker.
 *   PARKED   switched out or switching out, on no run queue; the waker that
 *            CASes PARKED -> RUNNABLE owns the fiber and must place it
 *            (waiting for on_worker == 0 or using the old worker's wakelist).
 *   DEAD     returned; its worker frees the stack after leaving it.
 */
enum fb_fiber_state {
	FB_FIBER_NEW,
	FB_FIBER_RUNNABLE,
	FB_FIBER_RUNNING,
	FB_FIBER_PARKING,
	FB_FIBER_PARKED,
	FB_FIBER_DEAD,
};

/* Join states: fb_fiber.join, protected by the lock of the fiber's handle
 * slot (f->slot->lock). */
enum { FB_JOINABLE, FB_DETACHED, FB_JOINING, FB_JOINED };

/* A fiber-local value and the key it was set under (api/fiber.c). */
struct fb_specific {
	void *value;
	fiber_key_t key;
};

struct fb_fiber {
	void *sp;		/* saved stack pointer; owner worker */
	_Atomic int state;	/* enum fb_fiber_state */
	atomic_uint on_worker;	/* 1 while a worker runs or leaves the stack;
				    release-cleared by that worker */
	struct fb_list rq_node; /* run queue link, under that rq's lock */
	struct fb_fiber *_Atomic wl_next; /* wakelist link */
	struct fb_pfiber pf; /* what placement reads: affinity, prev... */

	struct fb_stack stack;
	void *(*fn)(void *);
	void *arg;
	uint64_t id;

	/* What a join and the reap read, in one cache line. */
	fiber_t self;		     /* its handle; set at create */
	struct fb_handle_slot *slot; /* self's slot; set at create */
	uint8_t join;		     /* FB_JOINABLE...; handle slot lock */
	bool exited;		     /* handle slot lock */
	bool abandoned;	 /* left behind by fiber_shutdown; slot->lock */
	int live_worker; /* set at create, read at reap */
	/* Written under the handle slot lock; peeked at without it at
	 * exit (sched/fiber.c). */
	struct fb_waiter *_Atomic joiner;
	void *retval;

	int fd_errno; /* errno of its last failed fd call (fiber_errno);
			 the fiber itself */
	char name[32];
	/* 1 + the id of the worker that reaped it, exited and not joined
	 * yet, and let it keep its stack (fb_fiber_keep_stack); 0 if none.
	 * Under the handle slot lock, then the releaser's. */
	uint16_t stack_keeper;
	struct fb_specific *specific; /* FIBER_KEYS_MAX values, allocated on
					 first set; the fiber only */
	uint64_t last_ran_ns;
	struct fb_list live_node; /* on workers[live_worker]->live, under
				     its live_lock (debugger registry) */
	struct fb_san_fiber san; /* base/sanitizer.h; creator and reaper only */
	/* The wait it is in or was last in (fb_waiter_prepare); its own
	 * worker writes it, debuggers and the shutdown report read it. */
	struct fb_waiter *_Atomic waiter;
	/* Cancellation (sched/cancel.c).  @wclaim is the claim word of its
	 * cancellable waits (fb_waiter.claimp points here): NONE while it
	 * is in one, which fiber_cancel() may then claim, else the outcome
	 * of the last one (IDLE before the first).  @cancel: a cancellation
	 * is pending; set by fiber_cancel() under slot->lock, cleared by the
	 * fiber when a call reports it, and by the reaper. */
	_Atomic int wclaim;
	atomic_bool cancel;
	uint64_t epoch;		/* fb_rt_epoch at create */
} __attribute__((aligned(16))); /* whole 16-byte stores (sched/handle.c) */

/*
 * What a waiter waits on, for fiber dumps and the shutdown report
 * (fb_waiter.kind; fb_waiter.obj is the object's address, or the fd).
 * One list, expanded where names are needed.
 */
#define FB_WAIT_KINDS(X)                                                       \
	X(NONE, "nothing")                                                     \
	X(MUTEX, "mutex")                                                      \
	X(COND, "cond")                                                        \
	X(SEM, "sem")                                                          \
	X(RWLOCK_RD, "rwlock (read)")                                          \
	X(RWLOCK_WR, "rwlock (write)")                                         \
	X(BARRIER, "barrier")                                                  \
	X(ONCE, "once")                                                        \
	X(CHAN_SEND, "chan send")                                              \
	X(CHAN_RECV, "chan recv")                                              \
	X(PIPE_READ, "pipe read")                                              \
	X(PIPE_WRITE, "pipe write")                                            \
	X(FD, "fd")                                                            \
	X(SLEEP, "sleep")                                                      \
	X(JOIN, "join")                                                        \
	X(WG, "wait group")
enum fb_wait_kind {
#define FB_WAIT_ENUM(name, str) FB_WAIT_##name,
	FB_WAIT_KINDS(FB_WAIT_ENUM)
#undef FB_WAIT_ENUM
};
/* Or'ed into the kind given to fb_waiter_prepare(): the wait is a
 * cancellation point, which fiber_cancel() may end (sched/cancel.c). */
#define FB_WAIT_CANCELLABLE 0x100
/* fb_wait_kind_name - the name of @kind ("mutex", "chan recv"...). */
const char *fb_wait_kind_name(int kind);

/*
 * Who ended a wait (the claim word, *fb_waiter.claimp).  Exactly one party
 * moves a waiter out of NONE, with a CAS, and only that party may wake it:
 *   IDLE      not a waiter's state: a fiber's wclaim before its first
 *             cancellable wait.
 *   NONE      waiting; on its object's wait list.
 *   WOKEN     a waker took it: the waker unlinked it under the object
 *             lock, stored the outcome (result, data) and woke it.  The
 *             waiter returns without touching the object again.
 *   TIMEDOUT  its deadline passed (the timer callback, or a foreign
 *             thread's own futex timeout).  It is still on the wait list:
 *             the waiter unlinks itself under the object lock, which is
 *             why the object cannot be destroyed meanwhile (destroy sees a
 *             waiter and says EBUSY), and why the timer callback never
 *             touches the object.
 *   CANCELED  fiber_cancel() ended a cancellable wait (sched/cancel.c):
 *             as TIMEDOUT, the waiter is still linked and unlinks itself;
 *             nothing was handed to it.
 *   ABANDONED the runtime that ran the fiber shut down without it
 *             (sched/runtime.c): it stays linked and is never woken, so a
 *             late post or unlock is harmless.
 * A waker that finds a waiter it cannot claim leaves it linked and goes
 * on to the next one (fb_waitq_pop), so no post or unlock is lost to a
 * waiter that is leaving.
 */
enum {
	FB_CLAIM_IDLE,
	FB_CLAIM_NONE,
	FB_CLAIM_WOKEN,
	FB_CLAIM_TIMEDOUT,
	FB_CLAIM_ABANDONED,
	FB_CLAIM_CANCELED,
};

/*
 * A wait-list entry.  It lives on the waiting caller's stack and serves a
 * fiber (parks it) or a foreign thread (futex on @futex) alike, so every
 * sync object works from any thread.
 *
 * Protocol for a sync object with lock L and wait list Q:
 *	lock(L); ...decide to wait...
 *	fb_waiter_prepare(&w, kind, obj);  // announces PARKING
 *	fb_list_add_tail(&w.node, &Q);
 *	fb_waiter_wait(&w, &L);		   // unlocks L, parks, returns unlocked
 * and a waker:
 *	lock(L); w = fb_waitq_pop(&Q); w->result = ...; fb_waiter_wake(w, flags);
 *	unlock(L);
 * fb_waiter_wake may be called with L held; it never switches.  After it the
 * waiter may run and its stack frame (w) be gone: the waker must not touch w.
 * Each waiter is woken exactly once, by whoever claimed it (see above).
 *
 * The claim word is the waiter's own, @claim, but for a fiber's
 * cancellable wait: that one uses the fiber's wclaim, which fiber_cancel()
 * can reach without the waiter (sched/cancel.c).
 *
 * Lifetime rule (every object of sync/ keeps it): a woken waiter never
 * touches the object again unless it is still counted by the object, so
 * "last unlock (or close), then destroy and free" is safe as soon as
 * destroy returns 0.
 */
struct fb_waiter {
	struct fb_list node;	/* on the object's wait list; object lock */
	struct fb_fiber *fiber; /* NULL for a foreign thread */
	atomic_uint futex;	/* foreign thread: 0 waiting, 1 woken */
	_Atomic int claim;	/* FB_CLAIM_*, CAS from NONE once */
	_Atomic int *claimp;	/* the claim word: &claim, or see above */
	atomic_uint *futexp;	/* foreign thread: the word it sleeps on */
	int result;		/* by the waker; never ETIMEDOUT/ECANCELED */
	uintptr_t data;		/* object specific (rwlock kind, chan slot) */
	int kind;		/* enum fb_wait_kind; constant */
	const void *obj;	/* what it waits on; constant */
	uint64_t deadline;	/* CLOCK_MONOTONIC ns, FB_NO_DEADLINE if none */
};

/* fb_waiter_claim - take @w for a wake (NONE -> @how).  Returns false if
 * someone else took it first.  Context: any thread; a waker holds the
 * object lock. */
extern _Atomic uint64_t fb_rt_epoch FB_HIDDEN;
/* fb_waiter_stale - is @w a wait of a fiber of an earlier runtime (a fork
 * child's copy of its parent's fibers)?  None of them runs again: every
 * waker skips it (fb_waiter_claim), and no object counts it as a waiter
 * (fb_waitq_waiting) or as busy (fb_waitq_busy). */
static inline bool fb_waiter_stale(const struct fb_waiter *w)
{
	return w->fiber &&
	       fb_unlikely(w->fiber->epoch != fb_load_relaxed(&fb_rt_epoch));
}

/* fb_waiter_claim_cas - fb_waiter_claim() without its look at the epoch,
 * for a waker that made it itself (the pipe's fast path). */
static inline bool fb_waiter_claim_cas(struct fb_waiter *w, int how)
{
	int none = FB_CLAIM_NONE;

	return atomic_compare_exchange_strong_explicit(w->claimp, &none, how,
						       memory_order_acq_rel,
						       memory_order_acquire);
}

static inline bool fb_waiter_claim(struct fb_waiter *w, int how)
{
	/* A waker never takes a stale wait: what the wake hands over
	 * would be lost. */
	if (how == FB_CLAIM_WOKEN && fb_waiter_stale(w))
		return false;
	return fb_waiter_claim_cas(w, how);
}

/*
 * fb_waitq_pop - unlink and return the first waiter of @q that the caller
 * could claim (FB_CLAIM_WOKEN), NULL if there is none.  Waiters that are
 * leaving by themselves (timed out, abandoned) stay linked.
 * Context: the lock that protects @q held; never switches.
 */
static inline struct fb_waiter *fb_waitq_pop(struct fb_list *q)
{
	struct fb_list *n;

	fb_list_for_each (n, q) {
		struct fb_waiter *w =
			fb_container_of(n, struct fb_waiter, node);

		if (fb_waiter_claim(w, FB_CLAIM_WOKEN)) {
			fb_list_del(n);
			return w;
		}
	}
	return NULL;
}

/* A ping-pong pair handing the worker to each other through runnext
 * would starve the run queue: after this many hand-offs in a row the
 * wakee is queued behind the others.  Picked: 64 keeps the queued fibers'
 * wait under 64 switches (a few us). */
#define FB_RUNNEXT_STREAK 64

/* Wake flags. */
#define FB_WF_SYNC 0x1	 /* the waker is about to block (hand-off) */
#define FB_WF_POLLER 0x2 /* the waker hands out events it polled */
/* The wakee queues behind the fibers already runnable where it lands,
 * never in runnext: the waker shares nothing with it that is worth
 * jumping the queue for, and what is queued may be what the wakee will
 * wait for next (the reap's wake of a joiner: sched/fiber.c). */
#define FB_WF_QUEUE 0x4
/* The waker and the wakee share a stream (a pipe, a channel): they may
 * form a wake group (sched/wgroup.c). */
#define FB_WF_GROUP 0x8

/* fb_waiter_prepare(w, kind, obj) is below, inline, after the worker. */
/* fb_waiter_wait - release @lock and sleep until fb_waiter_wake(@w).
 * Context: any thread; parks a fiber, futex-waits a foreign thread.
 * Returns with @lock released. */
void fb_waiter_wait(struct fb_waiter *w, struct fb_spinlock *lock);
/* fb_waiter_wake - wake the owner of @w, which its caller removed from its
 * wait list.  Context: any thread, any lock; never switches. */
void fb_waiter_wake(struct fb_waiter *w, unsigned int flags);

/* fb_fiber_wake - make a PARKING or PARKED fiber runnable (see the states).
 * Returns false if it was not waiting.  Context: any thread; never switches. */
bool fb_fiber_wake(struct fb_fiber *f, unsigned int flags);
/* fb_fiber_park - park the calling fiber until fb_fiber_wake; it must have
 * set PARKING first (fb_waiter_prepare does).  Context: fiber. */
void fb_fiber_park(void);

/*
 * Timers (sched/timer.c).  A timer lives in its user's memory (a waiter's
 * stack frame) and fires @fn once, on the worker whose heap holds it.
 * States: IDLE, ARMED (in a heap), FIRING (taken out, @fn running), DONE.
 */
enum { FB_TIMER_IDLE, FB_TIMER_ARMED, FB_TIMER_FIRING, FB_TIMER_DONE };
struct fb_timer {
	uint64_t deadline; /* CLOCK_MONOTONIC ns; constant while armed */
	void (*fn)(struct fb_timer *t);
	struct fb_timer *child, *next, *prev; /* pairing heap; heap lock */
	struct fb_timer_heap *heap;	      /* where it was armed */
	atomic_uint state; /* FB_TIMER_*; heap lock, DONE with release */
};
/* A worker's armed timers.  Any thread arms or cancels (under @lock); the
 * owner worker fires. */
struct fb_timer_heap {
	struct fb_spinlock lock;
	struct fb_timer *root; /* earliest deadline; @lock */
	_Atomic uint64_t next; /* root's deadline, 0 if none; written under
				   @lock, read relaxed by the owner */
};
/* A deadline that never comes. */
#define FB_NO_DEADLINE UINT64_MAX
/* Scheduling points between two fb_sched_tick() calls of a busy worker
 * (power of two): picked; a tick costs a clock read and, with no poller,
 * one epoll_wait(0). */
#define FB_TICK_SWITCHES 64

/* Counters of one worker (lib/sched/counters.h); owner-written. */
struct fb_counters {
#define FB_COUNTER(name, desc) _Atomic uint64_t name;
#include "sched/counters.h"
#undef FB_COUNTER
};
/*
 * fb_count_inc - one more on the counter @c of the calling worker, which
 * only it writes: not an atomic add, and readers on other threads see
 * the old value or the new one.  On x86-64 one add to memory, which gcc
 * does not make of a relaxed load and store (clang does); the switch
 * path counts four times per context switch.  ThreadSanitizer gets the
 * atomic form, which it can see.
 */
static inline void fb_count_inc(_Atomic uint64_t *c)
{
#if defined(__x86_64__) && !defined(FB_TSAN)
	__asm__ volatile("addq $1, %0" : "+m"(*(uint64_t *)c));
#else
	fb_store_relaxed(c, fb_load_relaxed(c) + 1);
#endif
}
/* FB_COUNT - count one event on worker @w (NULL: a foreign thread). */
#define FB_COUNT(w, name)                                                      \
	do {                                                                   \
		if (w)                                                         \
			fb_count_inc(&(w)->cnt.name);                          \
		else                                                           \
			fb_count_foreign(offsetof(struct fb_counters, name));  \
	} while (0)
void fb_count_foreign(size_t offset);

/* Levels whose balance attempts and pulls are counted per worker. */
#define FB_BAL_LEVELS 8

/* A worker's load-balancing state (sched/balance.c); owner only unless
 * said otherwise. */
struct fb_wbalance {
	uint64_t clock_ns;     /* last clock read at a tick or an idle edge */
	uint64_t next_tick_ns; /* next fb_place_tick() */
	bool busy;	       /* ran fibers since it last went idle */
	int migrate_to;	       /* active balance: the worker prev_switch
				   goes to, -1 none */
	struct fb_fiber *_Atomic push_fiber; /* fiber push_target was asked
				   for; written by the balancer first */
	/* The idle loop's steal (sched/idle.c, doc/scheduler.md 1.9). */
	int steal_src;		/* this idle entry's newly-idle balance chose
				   it but detached nothing; -1 none */
	bool steal_force;	/* the next steal searches whatever the rate
				   limit: about to sleep, or woken */
	uint64_t next_steal_ns; /* the ungated search's rate limit */
	int rescue_next;	/* the next peer the tick looks at (rescue) */
	/* Owner-written with fb_write_once: api/stats.c reads them. */
	uint32_t nr_lb[FB_BAL_LEVELS];	   /* balance attempts per level */
	uint32_t nr_pulled[FB_BAL_LEVELS]; /* fibers pulled per level */
	/* ASYM_PACKING's pulls and push requests per level */
	uint32_t nr_asym[FB_BAL_LEVELS];
	/* newly-idle balances NI_RANDOM skipped per level */
	uint32_t nr_ni_skips[FB_BAL_LEVELS];
};

/* fb_level_counts_add - count one in @nr for each level whose bit is set
 * in @mask (bit d->level, up to 31); levels from FB_BAL_LEVELS - 1 up
 * share the last count.  The set bits only: a newly-idle entry that was
 * gated, as every one of a ping-pong's is, has none, and a loop over all
 * 32 levels was most of fb_sched_balance_idle()'s instructions.
 * Context: the owner of @nr; readers load it relaxed (api/stats.c). */
static inline void fb_level_counts_add(uint32_t nr[FB_BAL_LEVELS],
				       uint32_t mask)
{
	for (; mask; mask &= mask - 1) {
		unsigned l = (unsigned)__builtin_ctz(mask);
		unsigned at = l < FB_BAL_LEVELS - 1 ? l : FB_BAL_LEVELS - 1;

		fb_write_once(&nr[at], nr[at] + 1);
	}
}

/*
 * A worker.  The fields others write (state, wakelist, run queue) sit on
 * their own cache lines in @pw and below; the rest is owner-only.
 */
/* A worker's adaptive pinning (sched/bind.c); owner only. */
/* Adaptive pinning decides on this many check intervals together (see
 * FB_BIND_CHECK_NS below). */
#define FB_BIND_WINDOW 4

struct fb_wbind {
	bool pinned;		   /* bound to its PU now */
	bool shared;		   /* the window's verdict: the CPU is shared */
	bool crowded;		   /* the window's wait: it is crowded */
	unsigned int quiet;	   /* quiet checks in a row while unpinned */
	unsigned int quiet_needed; /* before it pins again; 0 before any unpin */
	long nivcsw;		   /* involuntary switches at the last check */
	int64_t wait_ns;	   /* run-queue wait at the last check; -1 */
	/* The last FB_BIND_WINDOW intervals' figures and their sums. */
	unsigned int pos;
	uint64_t ring_preempts[FB_BIND_WINDOW], win_preempts;
	int64_t ring_wait_ns[FB_BIND_WINDOW], win_wait_ns;
	uint64_t next_ns; /* next check (coarse clock) */
};

struct fb_worker {
	struct fb_pworker pw; /* placement-visible; first member; its first
				 line holds the wakelist (pw.wakelist) */
	struct fb_spinlock rq_lock fb_cacheline_aligned;
	struct fb_list rq; /* rq_lock; FIFO of RUNNABLE fibers */
	/* Registry of the live fibers created for this worker, for debuggers
	 * (lib/libfiber-gdb.py): creators add, reapers remove, any thread. */
	struct fb_spinlock live_lock fb_cacheline_aligned;
	struct fb_list live; /* live_lock; fb_fiber.live_node */
	struct fb_timer_heap timers fb_cacheline_aligned; /* sched/timer.c */

	/* owner only from here */
	int id fb_cacheline_aligned;
	int node;	       /* NUMA node or -1 */
	struct fb_fiber *curr; /* running fiber, NULL in the idle loop */
	int curr_pin; /* curr's pf.pin, for balancers: written with curr */
	struct fb_fiber *runnext;     /* RUNNABLE fiber woken by curr on this
				     worker, runs next; owner only, not in
				     the rq nor in nr_running */
	unsigned int runnext_streak;  /* consecutive runnext hand-offs */
	uint64_t ids_next, ids_end;   /* fiber ids this worker may hand out,
				     taken from the process's counter in
				     blocks (api/fiber.c) */
	struct fb_fiber *prev_switch; /* fiber just switched away from */
	bool migrating;		      /* prev_switch must be placed elsewhere */
	void *idle_sp;		      /* saved context of the idle loop */
	void *idle_stack;	      /* the thread's own stack (sanitizers) */
	size_t idle_stack_size;
	void *idle_tsan; /* TSan context of the idle loop (base/sanitizer.h) */
	void *sigstack;	 /* alternate signal stack (sched/guard.c) */
	pthread_t thread;
	int tid; /* the thread's kernel id; set before it runs a fiber */
	/* What the monitor samples (sched/monitor.c), owner-written with
	 * relaxed stores: the scheduler clock when curr started running
	 * (the `now` of fb_sched_switch_to), and the scheduling points that
	 * did not switch (a yield with nothing else to run). */
	_Atomic uint64_t run_start;
	_Atomic uint64_t points;
	/* LIBFIBER_TRACE's buffer (sched/trace.c); NULL when tracing is off */
	struct fb_trace_buf *trace;
	/* The stall report's backtrace of this thread (sched/monitor.c):
	 * the monitor requests, this thread's signal handler fills. */
	atomic_int bt_state;
	int bt_nr;
	uintptr_t bt_pc[32];
	/* Load tracking (fb_sched_pelt_leave): the nr_running that the
	 * worker's averages were last brought up to date with, and whether
	 * runnext hand-offs have skipped that update since. */
	int pelt_nr;
	bool pelt_skipped;
	/* The runtime's only worker: a wake has nothing to place
	 * (fb_waiter_wake_ret).  Constant. */
	bool solo;
	struct fb_stack_cache stacks;
	/* The fiber its running fiber created last and queued here for it
	 * to block (doc/scheduler.md 1.4.6); a hint, maybe stale: checked
	 * under rq_lock before use. */
	struct fb_fiber *kept;
	/* Unused: descriptors are cached with their handle slots
	 * (sched/handle.c); sched/runtime.c still drains the empty list. */
	uint64_t rng;		      /* per-worker PRNG state */
	uint64_t next_sis_refresh_ns; /* idle_entry's SIS_UTIL cadence */
	unsigned int ticks; /* scheduling points, for fb_sched_tick() */
	/* What its idle polls found lately (sched/idle.c poll_window):
	 * the share, in 1/FB_POLL_FIBER_ONE, that a fiber's wakeup ended (a
	 * moving average that gives each poll 1/2^FB_POLL_AVG_SHIFT of the
	 * weight, so mostly the last 8 or so), and the idle waits skipped
	 * in a row since the last poll. */
	unsigned int poll_fiber_avg;
	unsigned int poll_skipped;
	/* The same for park spins (sched/idle.c fb_sched_park_spin): the
	 * share of the last ones or so that ran out of time, and the
	 * parks that did not spin in a row since the last spin. */
	unsigned int spin_miss_avg;
	unsigned int spin_skipped;
	struct fb_wbind bind;	/* sched/bind.c */
	struct fb_wbalance bal; /* sched/balance.c */
	struct fb_counters cnt;
};

/*
 * The calling worker (NULL on a foreign thread) and fiber (NULL outside).
 * A fiber may resume on another thread after any switch, so the
 * thread-local must be re-read each time, never cached by the compiler.
 * On x86-64 an initial-exec TLS read is one %fs-relative load that a
 * volatile access forces afresh; elsewhere the thread pointer itself could
 * be kept in a register across a switch, so the read is out of line.
 */
extern __thread struct fb_worker *fb_this_worker_tls
	__attribute__((tls_model("initial-exec")));
#ifdef __x86_64__
static inline struct fb_worker *fb_worker_self(void)
{
	return *(struct fb_worker *volatile *)&fb_this_worker_tls;
}
#else
struct fb_worker *fb_worker_self_slow(void);
#define fb_worker_self() fb_worker_self_slow()
#endif
static inline struct fb_fiber *fb_current(void)
{
	struct fb_worker *w = fb_worker_self();

	return w ? w->curr : NULL;
}

/*
 * fb_waiter_prepare - initialise @w for the caller, waiting on @obj (a
 * @kind, enum fb_wait_kind, with FB_WAIT_CANCELLABLE for a cancellation
 * point) and, for a fiber, announce PARKING.  Inline: every wait runs it,
 * and @kind is a constant at each call.
 * Context: any thread, with the object lock held.
 */
static inline void fb_waiter_prepare(struct fb_waiter *w, int kind,
				     const void *obj)
{
	struct fb_worker *self = fb_worker_self();
	struct fb_fiber *f = self ? self->curr : NULL;

	w->fiber = f;
	w->result = 0;
	w->kind = kind & ~FB_WAIT_CANCELLABLE;
	w->obj = obj;
	w->deadline = FB_NO_DEADLINE;
	if (f) {
		fb_store_relaxed(&f->waiter, w);
		fb_store_relaxed(&f->state, FB_FIBER_PARKING);
		if (kind & FB_WAIT_CANCELLABLE) {
			/* Released after PARKING: a canceller that claims it
			 * finds the fiber parking (sched/cancel.c). */
			w->claimp = &f->wclaim;
			fb_store_release(&f->wclaim, FB_CLAIM_NONE);
			return;
		}
	} else {
		w->futexp = &w->futex;
		fb_store_relaxed(&w->futex, 0);
	}
	w->claimp = &w->claim;
	fb_store_relaxed(&w->claim, FB_CLAIM_NONE);
}
/* fb_thread_id - an id of the calling thread for lock ownership, unique
 * for the life of the process (bit 63 set, so it never equals a fiber id;
 * a pthread_t can be reused, this cannot).  Context: any thread. */
uint64_t fb_thread_id(void);

/* fb_sched_select_create - the worker a new fiber @f should start on
 * (inline below, after fb_rt: one worker has nothing to choose; else
 * fb_sched_select_create_slow()).  Context: any thread. */
int fb_sched_select_create_slow(struct fb_fiber *f);
/* fb_sched_enqueue_new - make NEW fiber @f runnable on worker @t.
 * Context: any thread; never switches. */
void fb_sched_enqueue_new(struct fb_fiber *f, int t);
/* fb_sched_yield - requeue the calling fiber behind the runnable ones.
 * Returns false if nothing else was runnable (no switch happened). */
bool fb_sched_yield(void);
/* fb_sched_migrate - move the calling fiber to the worker placement picks
 * (after its affinity changed).  Context: fiber; switches. */
void fb_sched_migrate(void);
/* fb_sched_exit - end the calling fiber (state DEAD); never returns. */
void fb_sched_exit(void) __attribute__((noreturn));
/* Called by a worker once it left a DEAD fiber's stack (api/fiber.c). */
void fb_fiber_reap(struct fb_worker *w, struct fb_fiber *f);
/* fb_stack_release - give stack @s back, if it is mapped: to the calling
 * worker's cache, or unmapped on a foreign thread; @s is empty afterwards
 * (sched/stack.c).  Context: any thread. */
void fb_stack_release(struct fb_stack *s);
/*
 * fb_fiber_exit_handoff - @f, the running fiber of @w, is about to die:
 * if its joiner is a fiber parked on @w, do the join handshake now and
 * make the joiner @w's runnext, so that the dying fiber's switch goes
 * straight to it (sched/fiber.c).  Context: fiber @f, in fb_sched_exit(),
 * which calls it only when @f has a joiner (a fiber without one is the
 * reap's business).
 */
void fb_fiber_exit_handoff(struct fb_worker *w, struct fb_fiber *f);
/*
 * fb_sched_handoff_ok - may @w's running fiber, which is about to block
 * or die, make @f @w's runnext: @f is PARKED and off its stack, last ran
 * on @w, nothing else is queued on @w, and runnext is free with the
 * streak allowing it (@f NULL: only the conditions on @w).
 * fb_sched_handoff - do it: @f passed fb_sched_handoff_ok() and the
 * caller then claimed @f's wait, so nobody else wakes it.
 * Context: worker @w, from its running fiber.
 */
bool fb_sched_handoff_ok(struct fb_worker *w, const struct fb_fiber *f);
void fb_sched_handoff(struct fb_worker *w, struct fb_fiber *f);
/* fb_fiber_registry_add - put NEW fiber @f on the live list of worker @t
 * (api/fiber.c).  Context: any thread; takes that worker's live_lock. */
void fb_fiber_registry_add(struct fb_fiber *f, int t);
/* fb_fiber_exit_self - end the calling fiber with @retval: run its key
 * destructors, then die (api/fiber.c).  Context: a fiber; never returns. */
void fb_fiber_exit_self(void *retval) __attribute__((noreturn));
/* fb_fiber_atfork - the key table's lock across fork() (FB_ATFORK_*). */
void fb_fiber_atfork(int phase);
/* fb_handle_atfork - the handle table across fork() (sched/handle.c). */
void fb_handle_atfork(int phase);
/* fb_poll_atfork_child - the child of fork() forgets the parent's poller:
 * its epoll set is shared with the parent, its waiters are the parent's
 * fibers.  Context: the child's only thread. */
void fb_poll_atfork_child(void);
/* fb_rt_atfork_child - nobody is inside the gate in the child. */
void fb_rt_atfork_child(void);
/* Fiber descriptors with their handles, cached per worker
 * (sched/handle.c): fb_fiber_alloc returns NULL when memory or handles are
 * short; fb_fiber_free takes a descriptor whose handle is retired or was
 * never published.  Context: any thread; never switches. */
struct fb_fiber *fb_fiber_alloc(void);
void fb_fiber_free(struct fb_fiber *f);
/*
 * Exited fibers, not joined yet, that keep their stacks until they are
 * (fb_fiber_keep_stack): at most FB_KEPT_STACKS_MAX reaped on one worker,
 * and FB_KEPT_STACKS_TOTAL in the runtime, split evenly among its workers
 * (fb_kept_stacks_max); the next ones give their stacks to the reaping
 * worker's stack cache.  Picked: a batch of a thousand joined in turn
 * keeps them all on a machine of up to eight workers, while a guarded
 * stack's two mappings per fiber held that way, out of reach of the
 * pools' trim and of the retry of a refused mapping, stay at most 16,384
 * however many workers there are (vm.max_map_count is 65,530 by default).
 */
#define FB_KEPT_STACKS_MAX 1024
#define FB_KEPT_STACKS_TOTAL 8192
/* fb_kept_stacks_max - the bound per worker of a runtime of @nr_workers
 * (at least 1).  Pure. */
static inline unsigned int fb_kept_stacks_max(int nr_workers)
{
	return FB_MIN(FB_KEPT_STACKS_MAX,
		      FB_KEPT_STACKS_TOTAL / (unsigned int)nr_workers);
}
/* fb_fiber_keep_stack - may exited fiber @f, which worker @w reaps and
 * nobody joins yet, keep its stack until it is released?  Counts it
 * against @w's bound if so (sched/handle.c); fb_fiber_free() uncounts it.
 * Context: worker @w, @f's handle slot lock held. */
bool fb_fiber_keep_stack(struct fb_worker *w, struct fb_fiber *f);
/* fb_fiber_pool_trim - give back at @now what fb_pool_trim_count() says
 * of the descriptor pool, with their stacks, at most @max.  Return: how
 * many.  Context: as fb_stack_pool_trim(). */
unsigned int fb_fiber_pool_trim(uint64_t now, unsigned int max);
/* fb_fiber_pool_trim_at - as fb_stack_pool_trim_at(), for descriptors. */
uint64_t fb_fiber_pool_trim_at(void);
/* fb_fiber_pool_shrink - free the pooled descriptors above FB_POOL_KEEP,
 * with their stacks: the pool outlives runtimes, a burst's surplus does
 * not.  Context: runtime shutdown, or any thread. */
void fb_fiber_pool_shrink(void);
/* fb_fiber_pool_nr - descriptors in the pool now (a hint, for tests). */
unsigned int fb_fiber_pool_nr(void);

/*
 * ---- fiber handles (sched/handle.c, whose opening comment argues them) ----
 *
 * A fiber_t is gen << FB_HANDLE_INDEX_BITS | index into a process-wide
 * table of slots; the slot's lock protects the join handshake, and a
 * handle whose generation is not its slot's current one is stale.
 */
#define FB_HANDLE_INDEX_BITS 24
#define FB_HANDLE_SLOTS (1u << FB_HANDLE_INDEX_BITS)
#define FB_HANDLE_GEN_MAX (UINTPTR_MAX >> FB_HANDLE_INDEX_BITS)
#define FB_HANDLE_CHUNK_BITS 10
#define FB_HANDLE_CHUNK (1u << FB_HANDLE_CHUNK_BITS) /* slots per chunk */

struct fb_handle_slot {
	struct fb_spinlock lock;
	uint32_t next; /* link on a list of bare slots; the list's owner */
	/* generation of the live handle, or of the next one while free;
	 * written under @lock (or before the chunk is published) */
	_Atomic uintptr_t gen;
	/* the descriptor; release-stored by fb_handle_publish, cleared under
	 * @lock; NULL while the slot is free or not yet published */
	struct fb_fiber *_Atomic fiber;
} __attribute__((aligned(32)));

/* The chunks made so far; release-stored once under the table's lock. */
extern struct fb_handle_slot
	*_Atomic fb_handle_chunks[FB_HANDLE_SLOTS / FB_HANDLE_CHUNK];

static inline uint32_t fb_handle_index(fiber_t h)
{
	return (uint32_t)((uintptr_t)h & (FB_HANDLE_SLOTS - 1));
}

static inline uintptr_t fb_handle_gen(fiber_t h)
{
	return (uintptr_t)h >> FB_HANDLE_INDEX_BITS;
}

/* fb_handle_slot - the slot @h's index names, live or not; NULL if no
 * chunk holds it.  Context: any thread. */
static inline struct fb_handle_slot *fb_handle_slot(fiber_t h)
{
	uint32_t i = fb_handle_index(h);
	struct fb_handle_slot *c =
		fb_load_acquire(&fb_handle_chunks[i >> FB_HANDLE_CHUNK_BITS]);

	return c ? &c[i & (FB_HANDLE_CHUNK - 1)] : NULL;
}

/*
 * fb_handle_lock - look @h up: lock its slot and return its fiber, with
 * *@slot set; or return NULL, nothing locked, if @h is not a live handle
 * (stale, never made, or any other value).
 * Context: any thread; spins on the slot lock; never switches.
 */
static inline struct fb_fiber *fb_handle_lock(fiber_t h,
					      struct fb_handle_slot **slot)
{
	struct fb_handle_slot *s = fb_handle_slot(h);
	struct fb_fiber *f;

	if (fb_unlikely(!s))
		return NULL;
	fb_spin_lock(&s->lock);
	f = fb_load_acquire(&s->fiber);
	if (fb_unlikely(!f || fb_load_relaxed(&s->gen) != fb_handle_gen(h))) {
		fb_spin_unlock(&s->lock);
		return NULL;
	}
	*slot = s;
	return f;
}

/* fb_handle_publish - make @f's handle (from fb_fiber_alloc) live, once
 * @f is filled in.  Context: its creator, before the fiber can run. */
static inline void fb_handle_publish(struct fb_handle_slot *s,
				     struct fb_fiber *f)
{
	fb_store_release(&s->fiber, f);
}

/* fb_handle_retire_locked - make the handle of @s stale for good: the
 * descriptor is about to be released.  The slot goes back with the
 * descriptor (fb_fiber_free) once its releaser is done with it.
 * Context: @s->lock held. */
static inline void fb_handle_retire_locked(struct fb_handle_slot *s)
{
	uintptr_t g = fb_load_relaxed(&s->gen);

	fb_store_relaxed(&s->gen, g == FB_HANDLE_GEN_MAX ? 1 : g + 1);
	fb_store_relaxed(&s->fiber, NULL);
}

/* Global runtime facts. */
int fb_runtime_nr_workers(void);
size_t fb_runtime_stack_size(void);
struct fb_worker *fb_runtime_worker(int i);

/* ---- scheduler internals, shared by the files of sched/ ---- */

/* What the configuration (api/) makes of the scheduler: the runtime's
 * parameters, constant while it runs. */
struct fb_sched_params {
	int nr_workers;
	int bind;			/* FB_BIND_*: pin workers to PUs */
	uint64_t poll_ns;		/* idle poll window */
	size_t stack_size;		/* the default fiber stack */
	bool stack_guard;		/* guarded stacks, else slabs */
	uint64_t features;		/* the initial feature mask */
	unsigned int blocked_min_ticks; /* blocked-load refresh, in ticks */
	/* Diagnostics (sched/monitor.c, sched/trace.c). */
	uint64_t stall_ns;	   /* stall report threshold; 0: no detector */
	int deadlock;		   /* FB_DEADLOCK_* */
	int dump_signal;	   /* a signal that dumps the fibers; 0: none */
	uint64_t interval_ns;	   /* statistics interval; 0: none */
	void (*interval_fn)(void); /* writes one interval line (api/) */
	const char *trace_path;	   /* LIBFIBER_TRACE; NULL: off */
	int trace_fd; /* @trace_path opened for writing (api/runtime.c) */
};
/* What the monitor does when every fiber is blocked (LIBFIBER_DEADLOCK). */
enum { FB_DEADLOCK_OFF, FB_DEADLOCK_WARN, FB_DEADLOCK_ABORT };

/* The running runtime (one per process). */
/*
 * The wake groups of a runtime (sched/wgroup.c, doc/scheduler.md 1.10):
 * @lock guards every group's fields, @homed and @all; it is taken only
 * when a wake may change a group (a fiber joins) and when a member exits.
 */
struct fb_wgroups {
	struct fb_spinlock lock;
	unsigned int *homed; /* members homed on each worker */
	struct fb_list all;  /* every group, for the runtime's end */
	long live;	     /* groups in @all */
};

struct fb_runtime {
	int nr_workers;
	cpu_set_t cpus; /* the creator's affinity: an unpinned worker's */
	struct fb_worker **workers;
	struct fb_pworker **pws;
	struct fb_place_view view;
	struct fb_topo *topo;
	struct fb_sched_params params;
	uint64_t poll_ns;
	unsigned int kept_stacks_max; /* fb_kept_stacks_max(nr_workers) */
	atomic_int nr_sleepers; /* workers asleep in futex or epoll; polling
				   ones steal by themselves, so a global
				   count of them would only cost a shared
				   line per idle cycle */
	_Atomic long nr_live;	/* fibers created and not yet reaped */
	atomic_bool stopping;
	/* fiber_shutdown() holds the workers still while it takes stock
	 * (sched/runtime.c): odd while it asks them to pause, one more at
	 * each request and each release; @nr_paused counts the held. */
	atomic_uint pausing;
	atomic_int nr_paused;
	struct fb_counters foreign; /* foreign threads' counters (atomic adds) */
	struct fb_place_global g;   /* placement's global state */
	struct fb_wgroups wgroups;  /* sched/wgroup.c */
	struct fb_runtime *forked_prev; /* sched/runtime.c's fork handling */
	struct fb_monitor *mon;		/* sched/monitor.c; NULL: none */
};

extern struct fb_runtime *fb_rt FB_HIDDEN;
extern atomic_bool fb_rt_up;

static inline int fb_sched_select_create(struct fb_fiber *f)
{
	return fb_rt->nr_workers == 1 ? 0 : fb_sched_select_create_slow(f);
}

/* fb_runtime_worker_node - the NUMA node of worker @worker of fb_rt. */
static inline int fb_runtime_worker_node(int worker)
{
	return fb_rt->workers[worker]->node;
}
/*
 * The gate of a running runtime (sched/runtime.c).  fb_rt_open is true from
 * the end of fiber_init() until fiber_shutdown() has made every fiber
 * still blocked unwakeable, just before it stops the workers, so that a
 * wake that gets in always has a worker to run its fiber (creates are
 * refused earlier, with fb_rt_accepting).  A
 * thread that is not a worker brackets every use of fb_rt (a create, a
 * wake, a statistics read) with fb_rt_enter()/fb_rt_leave(), and shutdown
 * waits until no such thread is inside before it stops the workers, and
 * again before it frees the runtime; so a foreign caller either gets in
 * while the runtime is whole or is refused.  Workers need no gate: the
 * runtime outlives them.  fb_rt_epoch counts fiber_init() calls; a fiber
 * of an earlier runtime is never run by a later one.
 */
extern atomic_bool fb_rt_open;
/* fb_rt_accepting - creates and offloads are taken (sched/runtime.c):
 * true from the end of fiber_init() until fiber_shutdown() has let the
 * runnable fibers finish, when the gate still lets wakes in. */
extern atomic_bool fb_rt_accepting;
/*
 * Calls a fiber waits in while the work is done outside the runtime (the
 * api layer's offload pool).  fb_runtime_stop() counts them as busy: it
 * lets them finish before and after it closes the gate, so no such call
 * is abandoned with a thread still about to wake it.  A caller raises it
 * (seq_cst) before it reads fb_rt_accepting, and gives up if it is false.
 */
extern atomic_long fb_rt_nr_outside;
extern _Atomic uint64_t fb_rt_epoch FB_HIDDEN;
/* fb_rt_enter - a foreign thread enters the runtime; false if the gate is
 * closed (then it must not touch fb_rt).  Context: a thread that is not a
 * worker; pair with fb_rt_leave(). */
bool fb_rt_enter(void);
void fb_rt_leave(void);
/* fb_rt_wait_outside - wait until no foreign thread is inside the gate.
 * Context: fiber_shutdown(), the gate closed. */
void fb_rt_wait_outside(void);
/* fb_runtime_set_facts - publish what fb_runtime_nr_workers() and
 * fb_runtime_stack_size() return (0, 0: no runtime). */
void fb_runtime_set_facts(int nr_workers, size_t stack_size);
/* Make sure worker @t notices new work (the IPI replacement).  Context:
 * any thread; after the seq_cst publication of the work. */
void fb_sched_wake_worker(struct fb_worker *t, struct fb_worker *this);
/* Move fibers handed to @w onto its run queue.  Context: owner worker. */
void fb_sched_drain_wakelist(struct fb_worker *w);
/*
 * fb_sched_wakelist_move - take @w's whole wakelist and queue its fibers
 * on @w's run queue, in wake order, raising nr_running by their number
 * and clearing ttwu_pending, under rq_lock.  @remote: the caller is not
 * @w's owner (the monitor, for a stalled worker): nr_running is then
 * raised with a seq_cst RMW, the publication that must come before the
 * caller wakes @w (sched/core.c rule 4).
 * Context: owner worker, or the monitor with @remote; rq_lock not held.
 * Return: how many fibers it moved (0: the wakelist was empty).
 */
int fb_sched_wakelist_move(struct fb_worker *w, bool remote);
/* fb_sched_drain_pick - fb_sched_drain_wakelist(), then the first fiber
 * of @w's run queue taken off it, in one hold of the lock; NULL if the
 * wakelist was empty (the queue is then left alone).  The idle loop's
 * way back to work, on the path of every cross-worker wake.
 * Context: owner worker, rq_lock not held. */
struct fb_fiber *fb_sched_drain_pick(struct fb_worker *w);
/* First thing after every switch, on the new stack. */
void fb_sched_finish_switch(struct fb_worker *w);
/* Switch from @prev (NULL: the idle loop) to RUNNABLE @next at @now (the
 * scheduler clock, for load tracking). */
void fb_sched_switch_to(struct fb_worker *w, struct fb_fiber *prev,
			struct fb_fiber *next, uint64_t now);
/* Entry point of a worker thread (sched/idle.c). */
void *fb_worker_main(void *arg);
/* Stack overflow reports (sched/guard.c): the SIGSEGV handler, installed
 * once from fiber_init, and each worker's alternate signal stack. */
void fb_guard_install(void);
void fb_guard_worker_start(struct fb_worker *w);
/* fb_guard_canary_report - @f overwrote the canary below its stack (a slab
 * stack, sched/stack.c): report it as a guard hit is reported and abort.
 * Context: fiber @f, as it switches out. */
void fb_guard_canary_report(const struct fb_fiber *f)
	__attribute__((noreturn, cold));
void fb_guard_worker_stop(struct fb_worker *w);

/*
 * fb_sched_view_enter - open an RCU read section on the domain view and fill
 * @v for a placement decision; fb_sched_view_exit closes it.  Nothing in
 * between may park or switch.  Context: any thread.
 */
static inline void fb_sched_view_enter(struct fb_place_view *v)
{
	fb_topo_read_lock();
	*v = fb_rt->view;
	v->topo = fb_topo_view_get();
}

static inline void fb_sched_view_exit(void)
{
	fb_topo_read_unlock();
}

static inline bool fb_worker_has_work(struct fb_worker *w)
{
	return fb_load_seqcst(&w->pw.wakelist) ||
	       fb_load_seqcst(&w->pw.nr_running) > 0;
}

static inline void fb_nr_running_add_local(struct fb_worker *w, int d)
{
	fb_store_relaxed(&w->pw.nr_running,
			 fb_load_relaxed(&w->pw.nr_running) + d);
}

/* Test hook: called in the window between a fiber giving up its worker and
 * the switch that leaves its stack; tests widen that window with it. */
extern void (*fb_test_switch_hook)(void) FB_HIDDEN;

/*
 * Wake groups (wgroup.c, doc/scheduler.md 1.10).
 * fb_wgroups_init - @r's registry, empty.  Return: 0; ENOMEM.
 * fb_wgroups_fini - free every group of @r; its fibers are gone or
 * abandoned (a fiber of an ended runtime never runs, so its pointer to a
 * freed group is never read).
 * fb_wgroup_note - @waker woke @wakee through a stream (FB_WF_GROUP): let
 * one join the other's group, or both a new one.  Context: a worker,
 * the waker running there; the caller owns @wakee (it won the wake).
 * fb_wgroup_leave - @f, about to exit, leaves its group (freed when it is
 * the last member).  Context: @f's worker, @f running.
 * fb_wgroups_live - groups of the running runtime, for tests.
 */
int fb_wgroups_init(struct fb_runtime *r);
void fb_wgroups_fini(struct fb_runtime *r);
void fb_wgroup_note(struct fb_worker *this, struct fb_fiber *waker,
		    struct fb_fiber *wakee);
void fb_wgroup_leave(struct fb_fiber *f);
long fb_wgroups_live(void);

/* Bookkeeping hooks between the layers. */
void fb_sched_fiber_reaped(void);
void fb_sched_features_changed(uint64_t old, uint64_t mask);
/* fb_stats_print_now - fiber_stats_print() without the gate, for
 * fiber_shutdown() (api/stats.c).  Context: the runtime is up or stopping. */
int fb_stats_print_now(int fd, int json);
const struct fb_counters *fb_sched_counters(int worker);

/*
 * The runtime's life (runtime.c), as api/runtime.c drives it, all under
 * fb_runtime_lock():
 * fb_runtime_create - a runtime for @p on @topo (owned from now on, also
 * on failure), workers made but not running.  Return: 0; EINVAL for a
 * worker count outside 1 to FIBER_WORKERS_MAX; ENOMEM; the errno of the
 * domain view's build.
 * fb_runtime_start - make @r the running runtime and start its workers.
 * Return: 0; EAGAIN (no thread; @r is freed).
 * fb_runtime_stop - the shutdown protocol (runtime.c's comment): let the
 * runnable fibers finish, close the gate, stop the workers, abandon the
 * fibers left.  Returns how many were abandoned.  Context: a thread that
 * is not a worker.
 * fb_runtime_free_current - free the stopped runtime.
 * fb_runtime_atfork - the runtime's part of pthread_atfork (FB_ATFORK_*).
 */
int fb_runtime_create(const struct fb_sched_params *p, struct fb_topo *topo,
		      struct fb_runtime **out);
int fb_runtime_start(struct fb_runtime *r);
long fb_runtime_stop(void);
void fb_runtime_free_current(void);
void fb_runtime_lock(void);
void fb_runtime_unlock(void);
void fb_runtime_atfork(int phase);

/* fb_runtime_get - start the runtime with the environment's configuration
 * if it is not running.  A bad configuration is reported once: after an
 * EINVAL, later calls return EINVAL without trying (or printing) again
 * until fiber_init() is called.  Context: any thread; may block on the
 * start.  Return: 0 or the errno of fiber_init.  Inline, since every
 * fiber_create() asks: one acquire load while the runtime is up. */
int fb_runtime_get_slow(void);
static inline int fb_runtime_get(void)
{
	if (fb_likely(fb_load_acquire(&fb_rt_up)))
		return 0;
	return fb_runtime_get_slow();
}

/* ---- cancellation (sched/cancel.c, whose opening comment argues it) ---- */

/* Fibers whose cancellation is pending (fb_fiber.cancel set): while it is
 * 0, a cancellation point costs one load.  Atomic, seq_cst RMWs. */
extern atomic_uint fb_nr_cancels_pending FB_HIDDEN;
int fb_cancel_point_slow(void);
/*
 * fb_cancel_point - the entry of a cancellation point: consume a pending
 * cancellation of the calling fiber.
 * Return: 0, or ECANCELED when the call must return it at once.
 * Context: any thread (a foreign thread is never cancelled).
 */
static inline int fb_cancel_point(void)
{
	if (fb_likely(!fb_load_relaxed(&fb_nr_cancels_pending)))
		return 0;
	return fb_cancel_point_slow();
}
/* fb_cancel_request - fiber_cancel() of live, not exited @f: make its
 * cancellation pending and claim the cancellable wait it is in, if any.
 * Return: true if it claimed one: the caller must fb_fiber_wake(@f).
 * Context: any thread, @f->slot->lock held. */
bool fb_cancel_request(struct fb_fiber *f);
/* fb_cancel_consume - the calling fiber reports its pending cancellation
 * (ECANCELED), which ends it.  Context: a fiber. */
void fb_cancel_consume(void);
/* fb_cancel_restore - make the calling fiber's cancellation pending again
 * after a wait consumed it but the call could not report it (a write
 * that returns the bytes it wrote).  Context: a fiber. */
void fb_cancel_restore(void);
/* fb_cancel_drop - forget @f's pending cancellation: it has exited.
 * Context: the reaper, @f->slot->lock held. */
void fb_cancel_drop(struct fb_fiber *f);
/* fb_cancel_park - fb_fiber_park() of @f, PARKED now, found a
 * cancellation pending: claim its cancellable wait itself.  Return: true
 * if it did (then @f is RUNNING again and must not switch).
 * Context: the fiber @f. */
bool fb_cancel_park(struct fb_fiber *f);

/* ---- diagnostics (sched/monitor.c, sched/dump.c, sched/trace.c) ---- */

/* fb_monitor_start - start the monitor thread of @r if its parameters
 * ask for one (a stall threshold, a deadlock mode, a dump signal or a
 * statistics interval).  Return: 0; EAGAIN (no thread).
 * Context: runtime start, workers started. */
int fb_monitor_start(struct fb_runtime *r);
/* fb_monitor_stop - stop and join it.  Context: fiber_shutdown, before
 * the gate closes. */
void fb_monitor_stop(struct fb_runtime *r);
/* fb_monitor_atfork_child - the child of fork() has no monitor: the dump
 * signal's action is the one fiber_init() found again.  Context: the
 * child's atfork handler. */
void fb_monitor_atfork_child(struct fb_runtime *r);
/* fb_monitor_kick - wake a parked monitor.  Context: any thread, also a
 * signal handler (a store and a futex wake). */
void fb_monitor_kick(void);
/* fb_monitor_worker_awake - a worker left its idle sleep: a monitor that
 * sleeps because every worker slept must look again.  Context: that
 * worker, after its seq_cst decrement of nr_sleepers (monitor.c argues
 * the order). */
extern atomic_uint fb_monitor_parked;
static inline void fb_monitor_worker_awake(void)
{
	if (fb_unlikely(fb_load_seqcst(&fb_monitor_parked)))
		fb_monitor_kick();
}
/*
 * A foreign thread that waits without a deadline (fb_waiter_wait) is
 * registered for the deadlock report and the dump: fb_foreign_wait_begin
 * links @fw (on the caller's stack) and kicks a parked monitor;
 * fb_foreign_wait_end unlinks it.  Context: a foreign thread, no lock.
 */
struct fb_foreign_wait {
	struct fb_list node;
	const struct fb_waiter *w;
	int tid;
	uint64_t since; /* CLOCK_MONOTONIC ns */
};
void fb_foreign_wait_begin(struct fb_foreign_wait *fw,
			   const struct fb_waiter *w);
void fb_foreign_wait_end(struct fb_foreign_wait *fw);
/* fb_foreign_wait_dump - one line per registered foreign waiter to @fd;
 * returns how many.  fb_foreign_wait_atfork_child - forget the parent's. */
int fb_foreign_wait_dump(int fd);
void fb_foreign_wait_atfork_child(void);

/* fb_fiber_describe - what @f is doing, for the shutdown report and the
 * dump ("waits on mutex 0x...", "sleeps (0.9 s left)", "joins fiber 7",
 * "waits on fd 5 for reading", "runnable"); @now is CLOCK_MONOTONIC.
 * Context: any thread; @f's stack stays mapped (its worker's live_lock
 * held, or the workers stopped); reads racy fields once. */
void fb_fiber_describe(const struct fb_fiber *f, uint64_t now, char *buf,
		       size_t len);
/* fb_sched_dump - write every live fiber (id, name, state, what it waits
 * on and since when, worker, backtrace) to @fd, after a first line that
 * begins with @title.  Return: 0 or write(2)'s errno.  Context: a worker,
 * the monitor, or a foreign thread inside the gate. */
int fb_sched_dump(int fd, const char *title);
/* fb_bt_walk - follow the frame-pointer chain that starts at @fp, with
 * the frame's own @pc first (0: none), while each record lies inside
 * [@lo, @hi) and the chain goes up; store at most @max return addresses
 * in @out.  Returns how many.  Context: any, async-signal-safe (it reads
 * only inside the bounds). */
int fb_bt_walk(uintptr_t pc, uintptr_t fp, uintptr_t lo, uintptr_t hi,
	       uintptr_t *out, int max);
/* fb_fdprintf - printf to @fd through one write(2) of at most 1023 bytes
 * (longer output is cut), no FILE and no allocation: dprintf() leaks its
 * buffer when the write fails.  Return: 0; write(2)'s errno; EINVAL for a
 * bad format.  Context: any thread but a signal handler. */
int fb_fdprintf(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* fb_bt_print - write "PREFIX#N 0x... function+0xoff (object)" for each of
 * @pc[0..@n) to @fd; frames after the first are return addresses (looked
 * up one byte earlier).  Context: any thread but a signal handler. */
void fb_bt_print(int fd, const char *prefix, const uintptr_t *pc, int n,
		 bool first_is_return);
/* fb_bt_saved - the backtrace of a fiber that is not running, from the
 * context it saved at @sp, bounded by its stack [@sp, @top). */
int fb_bt_saved(const void *sp, const void *top, uintptr_t *out, int max);

/* LIBFIBER_TRACE (sched/trace.c): per-worker buffers of run intervals and
 * wakeups, written as a Chrome trace.  fb_trace_on is read once per
 * switch and per wake; off, the probes cost that one branch. */
extern bool fb_trace_on FB_HIDDEN;
int fb_trace_start(struct fb_runtime *r);
/* fb_trace_write - write the trace to the file LIBFIBER_TRACE names,
 * through the descriptor that the start opened (params.trace_fd; the
 * caller of the start keeps and closes it), once per runtime (the first
 * of shutdown and exit).  Context: any thread. */
void fb_trace_write(void);
void fb_trace_stop(struct fb_runtime *r);
void fb_trace_run_slow(struct fb_worker *w, const struct fb_fiber *f,
		       uint64_t now);
void fb_trace_wake_slow(struct fb_worker *this, const struct fb_fiber *f);
void fb_trace_create_slow(struct fb_worker *this, const struct fb_fiber *f);

/*
 * fb_waiter_wake_ret - fb_waiter_wake(@w, @flags), then return 0, for a
 * waker that is done with the object (its lock released) and returns
 * right after, where @w is the wait of a fiber (w->fiber, not NULL) of
 * this runtime (its epoch checked before the claim).  The one-worker
 * runtime's wake of a parked fiber runs here, inline, without a frame:
 * what wake() in sched/core.c does for it, with the fiber put in
 * runnext, and a store for wake()'s CAS.  Every other case (several
 * workers, a fiber still PARKING, runnext taken, tracing) goes to
 * fb_waiter_wake_tail() or fb_sched_wake_solo_tail(), as tail calls.
 * After a claim the waiter cannot leave by itself, so waking it after the
 * unlock is as good as before it.  Context: as fb_waiter_wake(), @w
 * unlinked and claimed by the caller.
 */
int fb_waiter_wake_tail(struct fb_waiter *w, unsigned int flags);
int fb_sched_wake_solo_tail(struct fb_worker *this, struct fb_fiber *f);
static fb_always_inline int fb_waiter_wake_ret(struct fb_waiter *w,
					       unsigned int flags)
{
	struct fb_worker *this = fb_worker_self();
	/* Loaded again rather than kept from the caller's look: one load
	 * is cheaper than the register it would hold across the copy. */
	struct fb_fiber *f = fb_read_once(&w->fiber);

	if (fb_unlikely(!this || !this->solo ||
			fb_load_relaxed(&f->state) != FB_FIBER_PARKED))
		return fb_waiter_wake_tail(w, flags);
	/* No CAS: the claim made the caller the only one that may move @f
	 * out of PARKED, and @f, off the only worker since before the waker
	 * ran, cannot be PARKING; and @f runs next on this same thread, so
	 * nothing needs ordering either. */
	fb_store_relaxed(&f->state, FB_FIBER_RUNNABLE);
	FB_COUNT(this, wakeups);
	FB_PROBE(wake, f->id, 0, 0, 0, -1);
	if (fb_unlikely(this->runnext || !this->curr ||
			this->runnext_streak >= FB_RUNNEXT_STREAK ||
			fb_trace_on))
		return fb_sched_wake_solo_tail(this, f);
	this->runnext = f;
	this->runnext_streak++;
	FB_COUNT(this, local_enqueues);
	return 0;
}

/* ---- timers and the poller (sched/timer.c, sched/netpoll.c) ---- */

/* fb_timer_arm - arm @t (deadline and fn set) on worker @w's heap.
 * Context: any thread, any lock but @w's heap lock; never switches. */
void fb_timer_arm(struct fb_timer *t, struct fb_worker *w);
/* fb_timer_cancel - disarm @t, or wait until its running callback has
 * returned.  Returns true if it was still armed.  Context: any thread that
 * holds no lock the callback takes. */
bool fb_timer_cancel(struct fb_timer *t);
/* fb_timer_run - fire the timers of @w due at @now.  Context: worker @w,
 * no lock held, not inside a fiber that is switching out. */
void fb_timer_run(struct fb_worker *w, uint64_t now);
/* fb_timer_run_for - fire the timers of @w's heap due at @now on behalf of
 * a stalled @w, counting them on @self (NULL: the foreign row).  Returns
 * how many fired.  Context: any thread but @w, no lock held (timer.c's
 * opening comment argues the race with the owner and with cancel). */
int fb_timer_run_for(struct fb_worker *w, struct fb_worker *self, uint64_t now);
/* fb_timer_next - @w's earliest deadline, 0 if none.  Context: owner. */
uint64_t fb_timer_next(struct fb_worker *w);
/* fb_waiter_wait_timed_slow - fb_waiter_wait_timed() for a foreign thread
 * or with a deadline (sched/timer.c). */
int fb_waiter_wait_timed_slow(struct fb_waiter *w, struct fb_spinlock *lock,
			      uint64_t deadline);
/*
 * fb_waiter_wait_ended - the end of a fiber's wait without a deadline
 * that parked while some cancellation was pending: if fiber_cancel()
 * ended it, take @w off its list under @lock and consume the
 * cancellation.  Return: w->result, or ECANCELED.  Context: the fiber
 * of @w, back from its park, @lock not held.
 */
int fb_waiter_wait_ended(struct fb_waiter *w, struct fb_spinlock *lock);
/*
 * fb_waiter_wait_timed - fb_waiter_wait() that gives up at @deadline
 * (FB_NO_DEADLINE: never) or, for a cancellable wait, at fiber_cancel().
 * @w is on a wait list protected by @lock.
 * Return: w->result as set by the waker, or ETIMEDOUT if the deadline
 * came first, or ECANCELED (consumed) if a cancellation did; then @w was
 * taken off the list under @lock.  Returns with @lock released.
 * Context: any thread, like fb_waiter_wait().
 * Inline: a fiber's wait without a deadline is every sync object's
 * blocking call, and here it parks without two more frames.
 */
static inline int fb_waiter_wait_timed(struct fb_waiter *w,
				       struct fb_spinlock *lock,
				       uint64_t deadline)
{
	if (fb_likely(deadline == FB_NO_DEADLINE && w->fiber)) {
		fb_spin_unlock(lock);
		fb_fiber_park();
		if (fb_likely(!fb_load_relaxed(&fb_nr_cancels_pending)))
			return w->result;
		return fb_waiter_wait_ended(w, lock);
	}
	return fb_waiter_wait_timed_slow(w, lock, deadline);
}
/*
 * fb_waiter_wait_keep - fb_waiter_wait_timed() for objects that must put
 * their state right when a waiter leaves without a waker (a join, a
 * barrier): on ETIMEDOUT or ECANCELED it returns with @lock held again
 * and @w still where it was queued, for the caller to take off and to
 * unlock; the caller consumes the cancellation (fb_cancel_consume) if it
 * reports it.
 * Return: w->result with @lock released, or ETIMEDOUT or ECANCELED with
 * @lock held.  Context: as fb_waiter_wait_timed().
 */
int fb_waiter_wait_keep(struct fb_waiter *w, struct fb_spinlock *lock,
			uint64_t deadline);
/* An absolute CLOCK_MONOTONIC timespec as a deadline; validity check. */
uint64_t fb_deadline_from_timespec(const struct timespec *abstime);
bool fb_timespec_valid(const struct timespec *ts);

/* fb_sched_tick - a busy worker's periodic duty: fire due timers and, if
 * no worker holds the poller, poll epoll without blocking.
 * Context: worker @w at a scheduling point, after the previous fiber was
 * released (fb_sched_finish_switch) or while the current one keeps running. */
void fb_sched_tick(struct fb_worker *w);
/* Load balancing at the same cadence (sched/balance.c). */
void fb_sched_balance_tick(struct fb_worker *w);
/*
 * Adaptive pinning (sched/bind.c).  FB_BIND_OFF never pins, FB_BIND_ON
 * always does, FB_BIND_AUTO pins and lets a worker go while its CPU is
 * shared.  Two signals, summed over the last FB_BIND_WINDOW check
 * intervals (100 ms): the involuntary switches (the kernel took the CPU
 * for another thread) and the time the worker waited on the kernel's run
 * queue while runnable.  FB_BIND_SHARED_PREEMPTS switches in the window
 * unpin it, and so do FB_BIND_HURT_PREEMPTS switches with
 * FB_BIND_HURT_WAIT_NS of waiting; FB_BIND_QUIET_CHECKS checks in a row
 * whose window holds at most FB_BIND_QUIET_PREEMPTS pin it again, twice
 * as many after each later unpin, up to FB_BIND_QUIET_MAX.  The short
 * interval is for the start of a run: with one 100 ms interval, a server
 * whose load generator shares its CPUs stayed pinned for 0.1-0.3 s of a
 * 0.5 s benchmark.  Picked: sharing a CPU with one CPU-bound process preempts a busy worker
 * every few ms (the kernel's slice), 20 or more per 100 ms, while a worker
 * alone on its CPU sees 0-2.  A thread that shares the CPU and is not
 * CPU-bound (a load generator on the same machine, which sleeps and wakes
 * as its requests go) preempts the worker less often, 3-8 times per
 * 100 ms, but each time for milliseconds: 30 ms of every 100 spent
 * waiting, measured with a redis-benchmark client beside a 2-worker
 * server on 2 CPUs.  The wait alone would mislead: it also holds the
 * wakeup latency of a sleeping worker, which on a virtual machine is tens
 * of us per wakeup, hence the preemptions asked for with it.  A second of
 * quiet before re-pinning keeps a job that pauses briefly from flipping
 * the workers back and forth.
 */
enum { FB_BIND_OFF, FB_BIND_ON, FB_BIND_AUTO };
/* While the window says the CPU is shared (struct fb_wbind.shared, in the
 * adaptive mode), an idle worker polls for this fraction of its window
 * before it sleeps: spinning takes the CPU from the thread that shares
 * it, and that thread may be the one that makes the worker's work (a
 * load generator, the other end of a pipe).  Picked: examples/kv on 2
 * workers beside redis-benchmark on 2 CPUs, windows of 0, 10, 50 and
 * 200 us: 51.8k, 53.4k, 49.8k and 45.3k requests/s, p99 0.72, 0.76, 2.75
 * and 3.80 ms; a fifth of the default is the 10 us row. */
#define FB_POLL_SHARED_DIV 5
/* A worker that waited runnable on the kernel's queue for at least this
 * much of its window (FB_BIND_WINDOW intervals, 100 ms) shares its CPU
 * with more threads that want it than the CPU can run: it does not poll
 * at all (struct fb_wbind.crowded).  Every nanosecond it spins is then
 * taken from a thread that has work, maybe the one that makes ours, and
 * is charged to the worker's fair share, so that its next real work waits
 * the longer.  A neighbour that sleeps and wakes, as a load generator
 * does, leaves it far below.  Picked: 2 workers on 2 CPUs, waits per
 * window from one run each (10th, 50th, 90th percentiles): kv beside
 * redis-benchmark 11, 14, 22 ms; httpd under wrk -t2 47, 51, 55 ms; with
 * two CPU-bound loops beside them, kv 27, 35, 39 ms and httpd 54, 60,
 * 71 ms. */
#define FB_POLL_CROWDED_WAIT_NS (30 * 1000000ll)
/* ...unless most of its polls lately ended with a fiber's wakeup (struct
 * fb_worker.poll_fiber_avg at least half of FB_POLL_FIBER_ONE): a waker
 * that finds it polling saves a futex wake, and the fibers on both sides
 * their kernel round trip, while the readiness of a socket reaches a
 * sleeping worker at no one else's cost.  One idle wait in
 * FB_POLL_SAMPLE polls anyway, so that the average follows a change.
 * Picked: 2-worker split ping-pong beside two CPU-bound loops, 8
 * alternating runs, median 8.4 us per round trip polling, 13.5 us not
 * polling; httpd's polls under wrk end with socket readiness 99 times in
 * 100. */
#define FB_POLL_FIBER_ONE 256
#define FB_POLL_AVG_SHIFT 3
#define FB_POLL_SAMPLE 8
/*
 * Park spin (the PARK_SPIN feature, doc/scheduler.md 1.11).  A fiber that
 * blocks while its worker has nothing else to run would leave its stack
 * for the idle loop, which polls the wakelist; instead it first polls its
 * own state for at most FB_PARK_SPIN_NS (and no longer than the idle poll
 * window, nor past the worker's next timer).  A wake that comes meanwhile
 * is wake()'s PARKING -> RUNNING store: the waker writes no line of the
 * worker's and places nothing, and the fiber goes on without a switch.
 * Work that comes for the worker, a pause or a stop ends the spin at
 * once.  Picked: on the 2-worker split ping-pong a partner answers within
 * a microsecond, and a wake later than a few microseconds saves nothing
 * next to the switch it would spare; 5 us is a tenth of the default
 * idle window.  A worker whose spins mostly run out of time
 * (spin_miss_avg, the same moving average as the poll's, at least
 * FB_PARK_SPIN_MISS_MAX of FB_POLL_FIBER_ONE) spins at one park in
 * FB_POLL_SAMPLE only, so a fiber that waits long (a lock held for
 * milliseconds, a client) costs at most a few microseconds per eight
 * parks.  A crowded CPU never spins: every microsecond would be taken from
 * a thread that has work.  Nor do the waits that no fiber ends: sleeps
 * and fd waits, which a timer or the poller (maybe this worker's own)
 * ends.  A wake that a spin saw counts as a scheduling point
 * (point_unswitched in sched/core.c).
 */
#define FB_PARK_SPIN_NS 5000
#define FB_PARK_SPIN_MISS_MAX (FB_POLL_FIBER_ONE * 3 / 4)
/* fb_sched_park_spin - before the park of @f, RUNNING on @w in state
 * PARKING with its wait prepared: poll as above.  Return: true if the
 * wake came (@f is RUNNING again and goes on), false if @f must park.
 * Context: fiber @f on worker @w, no lock held. */
bool fb_sched_park_spin(struct fb_worker *w, struct fb_fiber *f);
/* Test hook: non-zero, the park spin's window in ns instead of the rule
 * above (tests/test-park-spin.c stretches it to catch a fiber spinning). */
extern uint64_t fb_park_spin_test_ns FB_HIDDEN;
enum { FB_BIND_KEEP, FB_BIND_UNPIN, FB_BIND_REPIN };
#define FB_BIND_CHECK_NS (25 * 1000000ull)
#define FB_BIND_SHARED_PREEMPTS 10
#define FB_BIND_HURT_PREEMPTS 3
#define FB_BIND_HURT_WAIT_NS (10 * 1000000ll)
#define FB_BIND_QUIET_PREEMPTS 1
#define FB_BIND_QUIET_CHECKS 40 /* 1 s */
#define FB_BIND_QUIET_MAX 2560	/* 64 s: the most quiet ever asked */
/* fb_bind_decide - what a worker in state @b, preempted @preempts times
 * and kept waiting @wait_ns on the kernel's run queue (-1: unknown) in the
 * last interval, does: FB_BIND_KEEP, _UNPIN or _REPIN (the caller then
 * sets b->pinned).  It adds the interval to @b's window, counts the quiet
 * checks and doubles the quiet asked for at each unpin.  Pure: no system
 * call. */
int fb_bind_decide(struct fb_wbind *b, uint64_t preempts, int64_t wait_ns);
/* fb_sched_bind_start - worker @w's pinning state at its start, after it
 * pinned itself (or not).  Context: worker @w. */
void fb_sched_bind_start(struct fb_worker *w);
/* fb_bind_preempts - the calling thread's involuntary context switches so
 * far, -1 if unknown: getrusage(RUSAGE_THREAD); tests may replace it. */
extern long (*fb_bind_preempts)(void);
/* fb_bind_wait - the calling thread's time spent runnable on the kernel's
 * run queue so far, in ns, -1 if unknown: /proc/thread-self/schedstat;
 * tests may replace it. */
extern int64_t (*fb_bind_wait)(void);
void fb_sched_bind_check_slow(struct fb_worker *w, uint64_t now);
/* fb_sched_bind_check - at most every FB_BIND_CHECK_NS, decide whether
 * @w stays pinned.  Context: worker @w, at its tick or going idle. */
static inline void fb_sched_bind_check(struct fb_worker *w)
{
	uint64_t now;

	if (fb_likely(fb_rt->params.bind != FB_BIND_AUTO))
		return;
	now = fb_now_coarse_ns();
	if (fb_unlikely(now >= w->bind.next_ns))
		fb_sched_bind_check_slow(w, now);
}
static inline void fb_sched_tick_slow(struct fb_worker *w)
{
	fb_sched_tick(w);
	fb_sched_balance_tick(w);
	fb_sched_bind_check(w);
}
static inline void fb_sched_tick_maybe(struct fb_worker *w)
{
	if (fb_unlikely((++w->ticks & (FB_TICK_SWITCHES - 1)) == 0))
		fb_sched_tick_slow(w);
}
/* fb_sched_idle_poll - an idle (POLLING) worker looks at epoll without
 * blocking, if no worker is the poller.  Returns true if it woke fibers.
 * Context: worker @w in its idle loop. */
bool fb_sched_idle_poll(struct fb_worker *w);
/* fb_sched_idle_sleep - the sleep of the idle loop (sched/netpoll.c).
 * Context: worker @w, state POLLING, poll window over. */
void fb_sched_idle_sleep(struct fb_worker *w);
/* fb_sched_poll_kick - wake the worker sleeping in epoll (FB_WS_EPOLL).
 * Context: any thread; after the CAS that set NEED_RESCHED. */
void fb_sched_poll_kick(void);
/* fb_poll_new_file - @fd is a file libfiber just made (accept, socket,
 * signalfd): whatever the entry of the number says of an earlier file (a
 * drained mark, which fiber checked the registration) is dropped
 * ("Reuse of a number", "Drained reads" in sched/netpoll.c).
 * Context: any thread. */
void fb_poll_new_file(int fd);
/*
 * fb_poll_wait_fd - park the calling fiber until @fd reports one of
 * @events (EPOLLIN, EPOLLOUT...; also ERR/HUP) or @deadline, or the
 * fiber_fd_set_deadline() deadline of direction @dldir (FB_IOFD_R,
 * FB_IOFD_W; -1: none), read under the entry's lock, and store what was
 * reported in *@revents.
 * Return: 0; ETIMEDOUT; the errno of epoll_ctl (EPERM: @fd cannot be
 * polled); ENOMEM; EBADF.  Context: fiber.
 */
int fb_poll_wait_fd(int fd, uint32_t events, uint64_t deadline, int dldir,
		    uint32_t *revents);
/* fb_poll_fini - close the poller; the fd table stays for the process.
 * Context: shutdown, every worker stopped. */
void fb_poll_fini(void);
/* fb_poll_abandon - a fiber parked on fd waiter @w (claimed ABANDONED)
 * will never run again: take it out of its fd entry, and its call out of
 * the calls in progress, so that the number works for later calls and a
 * fiber_close() of it does not wait for ever.  Context: fiber_shutdown(),
 * workers stopped. */
void fb_poll_abandon(struct fb_waiter *w);

/* ---- load balancing in the runtime (sched/balance.c) ---- */

/* The tick: at most every FB_TICK_NS a busy worker runs fb_place_tick(). */
#define FB_TICK_NS 1000000ull
/* fb_sched_balance_worker_init - starting values of @w's balancing fields.
 * Context: runtime start, before the worker thread runs. */
void fb_sched_balance_worker_init(struct fb_worker *w);
/* fb_sched_balance_idle - @w's run queue is empty: run a pending kick's
 * sleeper pass and newly-idle balancing.  Return: @w has work.
 * Context: worker @w in its idle loop, no lock held. */
bool fb_sched_balance_idle(struct fb_worker *w);
/* fb_sched_balance_idle_exit - the idle loop of @w found work: avg_idle,
 * the idle interval's PELT sample, leaving the sleeping mask.
 * Context: worker @w in its idle loop. */
void fb_sched_balance_idle_exit(struct fb_worker *w);
/* fb_sched_balance_sleep - @w's poll window is over and it is about to
 * sleep: the idle-entry STATS pass (doc/scheduler.md 6.2.4), then
 * fb_place_sleep_enter() unless it is already in the sleeping mask.
 * Context: worker @w, POLLING, outside read sections. */
void fb_sched_balance_sleep(struct fb_worker *w);
/*
 * fb_sched_take_queued - take up to @max fibers queued on @v that are not
 * on a worker (still being left) and that allow worker @to, in queue
 * order among the first FB_STEAL_SCAN_MAX, into @got, lowering @v's
 * nr_running; nothing if @v's rq_lock is not free at once.  The caller
 * owns them (RUNNABLE, on no queue).  Return: how many.  Context: a
 * worker other than @v (sched/idle.c).
 */
int fb_sched_take_queued(struct fb_worker *v, int to, struct fb_fiber **got,
			 int max);
/* fb_sched_balance_push - the running fiber of @w is at a yield and an
 * active balance asked for it: set w->bal.migrate_to and return true (the
 * caller migrates it), or drop a request that lapsed.  Context: fiber. */
bool fb_sched_balance_push(struct fb_worker *w);
/* fb_sched_balance_migrate_target - where migrate_finish sends @f: the
 * active-balance destination, or -1 for placement's choice. */
int fb_sched_balance_migrate_target(struct fb_worker *w, struct fb_fiber *f);

/*
 * ---- load tracking at scheduling points (sched/balance.c's comment) ----
 *
 * A busy worker owns its averages: it brings them up to date at every
 * switch with one read of the scheduler clock (base/clock.h), without a lock.
 * The interval since the last update is accounted with the state the
 * worker has at the switch (nr_running fibers runnable, one running), the
 * leaving fiber is accounted as running, the arriving one as queued (after
 * a yield or a balancing pull) or blocked (after a wakeup, which does not
 * stamp the wakee: see sched/balance.c).  A fiber whose
 * share sits in another worker's sums, or in none (new, or detached by a
 * balancer), moves them here on its first run (fb_sched_pelt_attach).
 *
 * A park that hands the worker to runnext changes nothing the worker's
 * update depends on (nr_running, busy), so while nr_running stays what
 * the last update saw, the worker's update waits (pelt_skipped): the
 * next one accounts the whole run of hand-offs with that nr_running,
 * which is what an update at each of them would have added up to.  If
 * nr_running moved meanwhile, the update first accounts up to the last
 * hand-off (run_start) with the old value (fb_sched_pelt_catch_up), and
 * only the last interval with the new one, as before.  An update comes
 * at the next switch through the run queue (at most FB_RUNNEXT_STREAK
 * hand-offs later) or at the next tick.
 *
 * The runtime's only worker (solo) keeps no averages: with one worker a
 * wake and a creation have nothing to choose and there is nothing to
 * balance, so nothing would read them.  Its switches leave them as they
 * were (zero) and stamp only last_ran_ns, which fiber_dump reads.
 */
void fb_sched_pelt_attach(struct fb_worker *w, struct fb_fiber *f,
			  uint64_t now);
/* fb_sched_pelt_catch_up - account the hand-offs' interval that
 * fb_sched_pelt_leave skipped: up to run_start with pelt_nr, if
 * nr_running (@nr) is no longer that.  Context: as fb_sched_pelt_worker. */
void fb_sched_pelt_catch_up(struct fb_worker *w, int nr);

/* fb_sched_pelt_worker - account @w's interval up to @now; @busy: a fiber
 * ran during it (else nothing was runnable: fibers queued now arrived at
 * its end, which is why the worker leaves idle).  Context: @w's averages'
 * writer (avg_busy, place/place.h). */
static inline void fb_sched_pelt_worker(struct fb_worker *w, uint64_t now,
					bool busy)
{
	int nr = fb_load_relaxed(&w->pw.nr_running);
	unsigned n = busy ? (unsigned)FB_MAX(nr, 1) : 0;

	if (w->solo)
		return;
	if (fb_unlikely(w->pelt_skipped))
		fb_sched_pelt_catch_up(w, nr);
	if (fb_unlikely(fb_load_relaxed(&w->pw.removed.nr)))
		fb_pelt_fold_removed(&w->pw.avg, &w->pw.removed);
	fb_pelt_update_worker(&w->pw.avg, now, n * FB_PELT_CAPACITY, n, busy);
	w->pelt_nr = nr;
}

/* fb_sched_pelt_can_wait - a park that hands @w to its runnext fiber
 * @next may leave the worker's update for later (see above): nr_running
 * is what that update saw, no removed share waits, and @next's share is
 * already in @w's sums.  Pure loads. */
static inline bool fb_sched_pelt_can_wait(const struct fb_worker *w,
					  const struct fb_fiber *next)
{
	return next->pf.attached == w->id &&
	       fb_load_relaxed(&w->pw.nr_running) == w->pelt_nr &&
	       !fb_load_relaxed(&w->pw.removed.nr);
}

/* fb_sched_pelt_leave - @prev stops running on @w at @now; @queued: it
 * stays runnable (a yield) rather than blocking; @handoff: a park hands
 * the worker to this runnext fiber (NULL: anything else), which lets the
 * worker's own update wait (see above) while the fiber's share is
 * already here.  Context: owner. */
static fb_always_inline void fb_sched_pelt_leave(struct fb_worker *w,
						 struct fb_fiber *prev,
						 uint64_t now, bool queued,
						 const struct fb_fiber *handoff)
{
	if (w->solo) {
		prev->pf.last_ran_ns = now;
		return;
	}
	if (handoff && fb_sched_pelt_can_wait(w, handoff))
		w->pelt_skipped = true;
	else
		fb_sched_pelt_worker(w, now, true);
	fb_pelt_update(&prev->pf.avg, now, prev->pf.weight, true, true);
	prev->pf.avg_queued = queued;
	prev->pf.last_ran_ns = now; /* cache hot? doc/scheduler.md 1.6.6 */
}

/* fb_sched_pelt_enter - @next starts running on @w at @now. */
static inline void fb_sched_pelt_enter(struct fb_worker *w,
				       struct fb_fiber *next, uint64_t now)
{
	if (w->solo)
		return;
	if (fb_unlikely(next->pf.attached != w->id)) {
		fb_sched_pelt_attach(w, next, now);
		return;
	}
	fb_pelt_update(&next->pf.avg, now, next->pf.weight, next->pf.avg_queued,
		       false);
}

#endif /* FB_SCHED_H */
