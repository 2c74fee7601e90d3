/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * monitor.c - the monitor thread: stall detection and rescue, the deadlock
 * report, the dump on a signal and the interval statistics.
 *
 * Stalls.  A fiber runs until it reaches a scheduling point; one that
 * computes, or blocks the thread in a system call, holds up every fiber
 * queued behind it and every timer of its worker.  The monitor samples,
 * for each worker, two owner-written words that cost the switch path one
 * plain store: the scheduler clock at the last switch to a fiber
 * (run_start, the `now` that fb_sched_switch_to already has) and the
 * worker's switch counter; and a count of the scheduling points that did
 * not switch (a yield with nothing else to run).  While neither moves and
 * the worker has a current fiber, that fiber has been running since
 * run_start (or since the monitor saw the last non-switching point).  A
 * switch that leaves run_start 0 (a hand-off on the runtime's only
 * worker, which reads no clock) is timed from the look that sees it, so
 * such a run is found up to one look late, never early.
 *
 *  - After FB_RESCUE_NS without a scheduling point the worker counts as
 *    stalled for its fibers' sake, and the monitor takes over: it fires
 *    the worker's due timers itself (sched/timer.c argues why a
 *    non-owner may), moves its wakelist onto its run queue and moves
 *    what is queued there to other workers.  So a 10 ms sleep armed on a
 *    worker that then runs a fiber for a second ends within about
 *    FB_RESCUE_NS of its deadline, on another worker.  Fibers pinned to
 *    the stalled worker, and the one in its runnext slot (owner-only,
 *    sched/core.c), wait for it.
 *  - After LIBFIBER_STALL_MS the stall is reported, once: the fiber, the
 *    worker, how long, the thread's state (R: computing, S or D: in the
 *    kernel) and a backtrace of the worker's stack, which the worker's
 *    thread takes itself from a SIGURG handler (below).
 *
 * Signals are not used to preempt: a fiber interrupted at an arbitrary
 * instruction may hold a libc lock (malloc's, stdio's), so switching away
 * from it in a handler deadlocks the next fiber that takes the lock, and
 * C code, unlike Go's, has no safe points the runtime could wait for.
 *
 * Cost.  The monitor sleeps on a futex.  While every worker sleeps it has
 * no timeout (an idle runtime costs nothing), or only the deadlock
 * check's, and a worker that leaves its sleep kicks it (else a worker
 * that then stalled would have its timers rescued a second late): the worker decrements nr_sleepers (seq_cst) and then
 * reads fb_monitor_parked (seq_cst); the monitor stores fb_monitor_parked
 * (seq_cst) and then reads nr_sleepers (seq_cst) before it sleeps, so one
 * of the two sees the other (the Dekker argument of sched/core.c rule 4),
 * and the kick bumps the futex word, so a kick that lands before the
 * futex wait still ends it.  While a worker is awake it wakes every
 * min(LIBFIBER_STALL_MS / 2, FB_MONITOR_BUSY_NS), and FB_RESCUE_NS after
 * the earliest timer deadline of an awake worker, at most every
 * FB_MONITOR_MIN_NS.  The switch path pays one store (run_start).
 *
 * Deadlocks.  Go's runtime knows every goroutine; a C program has threads
 * libfiber never sees.  The report is made only when everything libfiber
 * knows of is stuck for FB_DEADLOCK_NS: every worker asleep with nothing
 * to run and no timer, every live fiber parked without a deadline and not
 * on an fd, and at least one foreign thread waiting in libfiber (a join,
 * a lock, a wait) and none of them with a deadline (its wait ends by
 * itself, as a timer fires); the progress counters did not move
 * meanwhile.  A thread libfiber does not see (computing, or blocked
 * elsewhere) could still end it, which README.md says.
 *
 * The backtrace of a stalled worker.  Its stack is live, so only its own
 * thread can read it coherently: the monitor sends it SIGURG (as Go's
 * runtime does for its preemption: rarely used, ignored by default) and
 * its handler walks the frame pointers from the interrupted context
 * (fb_bt_walk, async-signal-safe: it reads inside the fiber's stack
 * only) into the worker's bt_pc[]; the monitor names the frames.  The
 * handler is installed at the first report only, and not at all when the
 * application has its own SIGURG handler; a SIGURG that libfiber did not
 * request goes on to the previous handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/trace.h"
#include "sched/sched.h"

/* A worker with no scheduling point for this long is rescued (above).
 * Picked: 1 ms is 10^3 to 10^4 ordinary fiber switches, far from a
 * worker merely being busy, and keeps a rescued timer about 1 ms late. */
#define FB_RESCUE_NS (1000 * 1000ull)
/* The monitor's period while a worker is awake, at most (picked: 100
 * wakeups a second, a few microseconds each, ~0.05% of a CPU), and its
 * shortest (picked: bounds its wakeups for timers to 1000 a second). */
#define FB_MONITOR_BUSY_NS (10 * 1000 * 1000ull)
#define FB_MONITOR_MIN_NS (1000 * 1000ull)
/* How long everything must stay stuck before the deadlock report.
 * Picked: long next to any wakeup in flight, short for a person waiting
 * at a hung program. */
#define FB_DEADLOCK_NS (1000 * 1000 * 1000ull)
/* While a worker is awake, how often the deadlock check looks whether all
 * went to sleep (a worker that sleeps does not kick the monitor).  Picked:
 * a tenth of FB_DEADLOCK_NS, 10 wakeups a second. */
#define FB_DEADLOCK_POLL_NS (100 * 1000 * 1000ull)
#define FB_NEVER UINT64_MAX

enum { BT_IDLE, BT_REQUESTED, BT_TAKING, BT_DONE };

/* What the monitor remembers of a worker; the monitor only. */
struct mon_worker {
	uint64_t switches, points;
	uint64_t start; /* scheduler clock: since when curr runs, at least */
	uint64_t cpu;	/* the thread's CPU time when the stall was seen */
	bool stalled;	/* rescued at the last look */
	bool reported;	/* this stall was reported */
};

struct fb_monitor {
	struct fb_runtime *r;
	pthread_t thread;
	uint64_t next_interval; /* CLOCK_MONOTONIC ns */
	uint64_t dl_sig;	/* progress when the candidate was seen */
	uint64_t dl_since;	/* CLOCK_MONOTONIC ns; 0: no candidate */
	bool dl_done;		/* judged (reported or not) for dl_sig */
	struct mon_worker mw[];
};

/* The futex word the monitor sleeps on (bumped by every kick), its
 * parked flag, its stop and dump requests: process-wide, so that a kick
 * never touches a monitor being freed. */
static atomic_uint mon_word;
atomic_uint fb_monitor_parked;
static atomic_bool mon_stop;
static atomic_bool mon_dump;

void fb_monitor_kick(void)
{
	fb_store_relaxed(&fb_monitor_parked, 0);
	fb_add(&mon_word, 1);
	fb_futex_wake(&mon_word, 1);
}

/* ---- foreign waiters ----------------------------------------------------- */

/* Threads waiting in fb_waiter_wait; process-wide, like the objects. */
static struct fb_spinlock fw_lock;
static struct fb_list fw_list = FB_LIST_INIT(fw_list); /* fw_lock */
static atomic_long fw_nr;

void fb_foreign_wait_begin(struct fb_foreign_wait *fw,
			   const struct fb_waiter *w)
{
	static __thread int tid;

	if (!tid)
		tid = (int)gettid();
	fw->w = w;
	fw->tid = tid;
	fw->since = fb_now_ns();
	fb_spin_lock(&fw_lock);
	fb_list_add_tail(&fw->node, &fw_list);
	fb_spin_unlock(&fw_lock);
	fb_add(&fw_nr, 1); /* seq_cst, then the flag: as a worker's wake */
	if (fb_load_seqcst(&fb_monitor_parked))
		fb_monitor_kick();
}

void fb_foreign_wait_end(struct fb_foreign_wait *fw)
{
	fb_spin_lock(&fw_lock);
	fb_list_del(&fw->node);
	fb_spin_unlock(&fw_lock);
	fb_sub(&fw_nr, 1);
}

int fb_foreign_wait_dump(int fd)
{
	uint64_t now = fb_now_ns();
	struct fb_list *n;
	int k = 0;

	fb_spin_lock(&fw_lock);
	fb_list_for_each (n, &fw_list) {
		struct fb_foreign_wait *fw =
			fb_container_of(n, struct fb_foreign_wait, node);
		const struct fb_waiter *w = fw->w;
		int kind = fb_read_once(&w->kind);

		if (kind == FB_WAIT_JOIN)
			fb_fdprintf(fd,
				    "thread %d: joins fiber %llu for %.3f s\n",
				    fw->tid,
				    (unsigned long long)fb_read_once(&w->data),
				    (double)(now - fw->since) / 1e9);
		else
			fb_fdprintf(fd,
				    "thread %d: waits on %s %p for %.3f s\n",
				    fw->tid, fb_wait_kind_name(kind),
				    fb_read_once(&w->obj),
				    (double)(now - fw->since) / 1e9);
		k++;
	}
	fb_spin_unlock(&fw_lock);
	return k;
}

void fb_foreign_wait_atfork_child(void)
{
	fb_store_relaxed(&fw_lock.locked, 0);
	fb_list_init(&fw_list);
	fb_store_relaxed(&fw_nr, 0);
	fb_store_relaxed(&fb_monitor_parked, 0);
}

/* ---- the backtrace of a running worker ----------------------------------- */

static struct sigaction old_urg;
static int urg_state; /* 0 not tried, 1 installed, -1 the application's */

static void on_urg(int sig, siginfo_t *si, void *ucv)
{
	struct fb_worker *w = fb_worker_self();
	int req = BT_REQUESTED, saved = errno;
	const ucontext_t *uc = ucv;
	const struct fb_fiber *f;
	uintptr_t pc, fp, lo, hi;

	if (!w ||
	    !atomic_compare_exchange_strong(&w->bt_state, &req, BT_TAKING)) {
		if (old_urg.sa_flags & SA_SIGINFO)
			old_urg.sa_sigaction(sig, si, ucv);
		else if (old_urg.sa_handler != SIG_DFL &&
			 old_urg.sa_handler != SIG_IGN)
			old_urg.sa_handler(sig);
		return;
	}
#if defined(__x86_64__)
	pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
#elif defined(__aarch64__)
	pc = (uintptr_t)uc->uc_mcontext.pc;
	fp = (uintptr_t)uc->uc_mcontext.regs[29];
#endif
	f = w->curr;
	if (f) {
		lo = (uintptr_t)f->stack.map;
		hi = (uintptr_t)fb_stack_top(&f->stack);
	} else {
		lo = (uintptr_t)w->idle_stack;
		hi = lo + w->idle_stack_size;
	}
	w->bt_nr =
		fb_bt_walk(pc, fp, lo, hi, w->bt_pc, FB_ARRAY_SIZE(w->bt_pc));
	fb_store_release(&w->bt_state, BT_DONE);
	errno = saved;
}

/* urg_install - our SIGURG handler, unless the application has one. */
static bool urg_install(void)
{
	struct sigaction sa;

	if (urg_state)
		return urg_state > 0;
	urg_state = -1;
	if (sigaction(SIGURG, NULL, &old_urg) ||
	    (old_urg.sa_flags & SA_SIGINFO) ||
	    (old_urg.sa_handler != SIG_DFL && old_urg.sa_handler != SIG_IGN))
		return false;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_urg;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGURG, &sa, &old_urg))
		return false;
	urg_state = 1;
	return true;
}

/* capture - @w's thread's backtrace into @pc; -1: no handler, -2: no
 * answer within 100 ms. */
static int capture(struct fb_worker *w, uintptr_t *pc, int max)
{
	int req = BT_REQUESTED, n;

	if (!urg_install())
		return -1;
	fb_store_release(&w->bt_state, BT_REQUESTED);
	if (pthread_kill(w->thread, SIGURG)) {
		fb_store_relaxed(&w->bt_state, BT_IDLE);
		return -2;
	}
	for (int i = 0; i < 100 && fb_load_acquire(&w->bt_state) != BT_DONE;
	     i++)
		usleep(1000);
	if (atomic_compare_exchange_strong(&w->bt_state, &req, BT_IDLE))
		return -2;
	while (fb_load_acquire(&w->bt_state) != BT_DONE) /* taking it now */
		fb_cpu_relax();
	n = FB_MIN(w->bt_nr, max);
	memcpy(pc, w->bt_pc, (size_t)n * sizeof(*pc));
	fb_store_relaxed(&w->bt_state, BT_IDLE);
	return n;
}

/* thread_state - the kernel's one-letter state of thread @tid (R running,
 * S sleeping, D in uninterruptible I/O...), '?' if unknown. */
static char thread_state(int tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

/* ---- stalls ------------------------------------------------------------- */

/* thread_cpu - the CPU time thread @t has used, in ns; 0 if unknown. */
static uint64_t thread_cpu(pthread_t t)
{
	struct timespec ts;
	clockid_t id;

	if (pthread_getcpuclockid(t, &id) || clock_gettime(id, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * computing - whether worker @w, found without a scheduling point since
 * the monitor first saw it stalled, really ran its fiber meanwhile: a
 * thread the kernel did not let run (a loaded host, state R with little
 * CPU time used) holds its fibers up too, but no fiber is at fault, so it
 * is rescued and not reported.  A thread blocked in the kernel (S, D) is.
 */
static bool computing(struct fb_worker *w, const struct mon_worker *mw,
		      uint64_t stall)
{
	uint64_t cpu = thread_cpu(w->thread);

	if (thread_state(fb_read_once(&w->tid)) != 'R' || !cpu || !mw->cpu)
		return true;
	return cpu - mw->cpu >= stall / 2;
}

/* find_fiber - copy the id and name of @f if it is still a live fiber
 * (its registry lock makes it safe to read). */
static bool find_fiber(struct fb_runtime *r, const struct fb_fiber *f,
		       uint64_t *id, char *name, size_t len)
{
	for (int i = 0; i < r->nr_workers; i++) {
		struct fb_worker *w = r->workers[i];
		struct fb_list *n;
		bool found = false;

		fb_spin_lock(&w->live_lock);
		fb_list_for_each (n, &w->live) {
			const struct fb_fiber *x =
				fb_list_entry(n, struct fb_fiber, live_node);

			if (x != f)
				continue;
			*id = x->id;
			fb_escape(name, len, x->name, strlen(x->name));
			found = true;
			break;
		}
		fb_spin_unlock(&w->live_lock);
		if (found)
			return true;
	}
	return false;
}

/* still_stalled - @w has reached no scheduling point since the monitor
 * last sampled it into @mw, and still runs @f. */
static bool still_stalled(struct fb_worker *w, const struct mon_worker *mw,
			  const struct fb_fiber *f)
{
	return fb_load_relaxed(&w->cnt.switches) == mw->switches &&
	       fb_load_relaxed(&w->points) == mw->points &&
	       __atomic_load_n(&w->curr, __ATOMIC_RELAXED) == f;
}

/*
 * report_stall - report @w's stall of @ns in @f, unless it ended while
 * the backtrace was taken: then the backtrace would be of whatever the
 * worker runs now, and a stall that ends at the threshold is no news.
 */
static void report_stall(struct fb_runtime *r, struct fb_worker *w,
			 const struct mon_worker *mw, const struct fb_fiber *f,
			 uint64_t ns)
{
	char name[4 * sizeof(f->name) + 1] = "", state;
	uintptr_t pc[32];
	uint64_t id = 0;
	int n, tid = fb_read_once(&w->tid);

	if (!find_fiber(r, f, &id, name, sizeof(name)))
		return; /* it ended meanwhile */
	state = thread_state(tid);
	n = capture(w, pc, FB_ARRAY_SIZE(pc));
	if (!still_stalled(w, mw, f))
		return;
	FB_PROBE(stall, w->id, id, ns);
	fprintf(stderr,
		"libfiber: stall: fiber %llu \"%s\" has run for %.3f s on "
		"worker %d (thread fiber-w%d, tid %d, state %c) without a "
		"scheduling point; other workers take its queue and timers "
		"meanwhile (LIBFIBER_STALL_MS=%llu)\n",
		(unsigned long long)id, name, (double)ns / 1e9, w->id, w->id,
		tid, state, (unsigned long long)(r->params.stall_ns / 1000000));
	if (n == -1)
		fprintf(stderr, "libfiber:   (no backtrace: the application "
				"handles SIGURG)\n");
	else if (n < 0)
		fprintf(stderr, "libfiber:   (no backtrace: the worker did not "
				"answer)\n");
	else
		fb_bt_print(2, "libfiber:   ", pc, n, false);
	/* Counted once reported: a test may wait for the count. */
	fb_count_foreign(offsetof(struct fb_counters, stalls));
}

/* drain_remote - move @w's wakelist onto its run queue, as its owner's
 * drain does (sched/core.c), so that the fibers handed to a stalled
 * worker can be moved on.  The exchange gives the list to exactly one
 * drainer; every nr_running write is under rq_lock.  Unlike the owner,
 * the monitor must then wake @w: its stall may have ended meanwhile, and
 * its idle loop may have found the wakelist already empty and nr_running
 * not yet raised (sched/core.c rule 4: make the work visible, then read
 * the worker's state). */
static void drain_remote(struct fb_worker *w)
{
	if (fb_sched_wakelist_move(w, true))
		fb_sched_wake_worker(w, NULL);
}

/* target - the worker that is not stalled, allows @f and has the fewest
 * runnable fibers; -1 if none. */
static int target(struct fb_monitor *m, const struct fb_fiber *f)
{
	int best = -1, most = INT32_MAX;

	for (int i = 0; i < m->r->nr_workers; i++) {
		int nr = fb_load_relaxed(&m->r->workers[i]->pw.nr_running);

		if (m->mw[i].stalled || !fb_pfiber_allows(&f->pf, i))
			continue;
		if (nr < most) {
			most = nr;
			best = i;
		}
	}
	return best;
}

#define FB_RESCUE_BATCH 32

/* move_queue - hand @w's queued fibers to other workers, as an idle
 * worker's steal does (sched/idle.c): taken off under @w's rq_lock,
 * queued under the target's, its worker woken. */
static void move_queue(struct fb_monitor *m, struct fb_worker *w)
{
	struct fb_fiber *got[FB_RESCUE_BATCH];
	int to[FB_RESCUE_BATCH], k = 0;
	struct fb_list *n, *tmp;

	fb_spin_lock(&w->rq_lock);
	fb_list_for_each_safe (n, tmp, &w->rq) {
		struct fb_fiber *f = fb_list_entry(n, struct fb_fiber, rq_node);
		int t;

		if (k == FB_RESCUE_BATCH)
			break;
		if (fb_load_acquire(&f->on_worker) || (t = target(m, f)) < 0)
			continue;
		fb_list_del(n);
		atomic_fetch_sub(&w->pw.nr_running, 1);
		got[k] = f;
		to[k++] = t;
	}
	fb_spin_unlock(&w->rq_lock);
	for (int i = 0; i < k; i++) {
		struct fb_worker *t = m->r->workers[to[i]];
		uint64_t id = got[i]->id; /* once queued, it may run and end */

		FB_PROBE(migrate, id, w->id, to[i]);
		fb_spin_lock(&t->rq_lock);
		fb_list_add_tail(&got[i]->rq_node, &t->rq);
		atomic_fetch_add(&t->pw.nr_running, 1);
		fb_spin_unlock(&t->rq_lock);
		fb_sched_wake_worker(t, NULL);
		fb_count_foreign(offsetof(struct fb_counters, stall_moves));
	}
}

static void rescue(struct fb_monitor *m, struct fb_worker *w)
{
	uint64_t next = fb_timer_next(w), now = fb_now_ns();
	int n;

	if (next && next <= now && fb_rt_enter()) {
		/* The callbacks wake fibers as a foreign thread would. */
		n = fb_timer_run_for(w, NULL, now);
		fb_rt_leave();
		while (n-- > 0)
			fb_count_foreign(
				offsetof(struct fb_counters, stall_timers));
	}
	if (fb_load_relaxed(&w->pw.wakelist))
		drain_remote(w);
	if (fb_load_relaxed(&w->pw.nr_running) > 1)
		move_queue(m, w);
}

/* stalls - look at every worker; returns how long the monitor may sleep. */
static uint64_t stalls(struct fb_monitor *m)
{
	struct fb_runtime *r = m->r;
	uint64_t stall = r->params.stall_ns, now = fb_sched_clock(),
		 mono = fb_now_ns(),
		 wait = FB_MIN(stall / 2, FB_MONITOR_BUSY_NS);

	for (int i = 0; i < r->nr_workers; i++) {
		struct fb_worker *w = r->workers[i];
		struct mon_worker *mw = &m->mw[i];
		uint64_t sw = fb_load_relaxed(&w->cnt.switches),
			 pt = fb_load_relaxed(&w->points), ran, next;
		const struct fb_fiber *f =
			__atomic_load_n(&w->curr, __ATOMIC_RELAXED);

		if (sw != mw->switches) {
			mw->switches = sw;
			mw->points = pt;
			/* 0: a one-worker hand-off, which reads no clock
			 * (sched/core.c); timed from this look. */
			mw->start = fb_load_relaxed(&w->run_start);
			if (!mw->start)
				mw->start = now;
			mw->reported = false;
		} else if (pt != mw->points) {
			mw->points = pt;
			mw->start = now;
			mw->reported = false;
		}
		ran = f && now > mw->start ? now - mw->start : 0;
		if (ran >= FB_RESCUE_NS && !mw->stalled)
			mw->cpu = thread_cpu(w->thread);
		mw->stalled = ran >= FB_RESCUE_NS;
		if (ran < stall)
			wait = FB_MIN(wait, stall - ran);
		next = fb_timer_next(w);
		if (f && next) /* look again when its next timer is late */
			wait = FB_MIN(wait, next + FB_RESCUE_NS > mono ?
						    next + FB_RESCUE_NS - mono :
						    0);
	}
	for (int i = 0; i < r->nr_workers; i++) {
		struct fb_worker *w = r->workers[i];
		struct mon_worker *mw = &m->mw[i];
		const struct fb_fiber *f =
			__atomic_load_n(&w->curr, __ATOMIC_RELAXED);

		if (!mw->stalled || !f)
			continue;
		rescue(m, w);
		if (now - mw->start >= stall && !mw->reported &&
		    computing(w, mw, stall)) {
			mw->reported = true;
			report_stall(r, w, mw, f, now - mw->start);
		}
	}
	return FB_MAX(wait, FB_MONITOR_MIN_NS);
}

/* ---- deadlocks ---------------------------------------------------------- */

/* progress - a sum that moves whenever a fiber runs, wakes or times out. */
static uint64_t progress(struct fb_runtime *r)
{
	uint64_t sum = 0;

	for (int i = -1; i < r->nr_workers; i++) {
		const struct fb_counters *c = fb_sched_counters(i);

		sum += fb_load_relaxed(&c->switches) +
		       fb_load_relaxed(&c->wakeups) +
		       fb_load_relaxed(&c->timers_fired) +
		       fb_load_relaxed(&c->creates);
	}
	return sum;
}

/* foreign_timed - does a thread wait in libfiber with a deadline?  Its
 * wait ends by itself, and what it does next may wake a fiber. */
static bool foreign_timed(void)
{
	struct fb_list *n;
	bool timed = false;

	fb_spin_lock(&fw_lock);
	fb_list_for_each (n, &fw_list) {
		struct fb_foreign_wait *fw =
			fb_container_of(n, struct fb_foreign_wait, node);

		if (fb_read_once(&fw->w->deadline) != FB_NO_DEADLINE) {
			timed = true;
			break;
		}
	}
	fb_spin_unlock(&fw_lock);
	return timed;
}

/* all_blocked - nothing libfiber knows of can make progress (above). */
static bool all_blocked(struct fb_runtime *r)
{
	if (foreign_timed())
		return false;
	for (int i = 0; i < r->nr_workers; i++) {
		struct fb_worker *w = r->workers[i];
		struct fb_list *n;
		bool stuck = true;

		if ((fb_load_seqcst(&w->pw.state) & FB_WS_MASK) <
			    FB_WS_SLEEPING ||
		    fb_worker_has_work(w) || fb_timer_next(w))
			return false;
		fb_spin_lock(&w->live_lock);
		fb_list_for_each (n, &w->live) {
			const struct fb_fiber *f =
				fb_list_entry(n, struct fb_fiber, live_node);
			const struct fb_waiter *wt =
				fb_load_relaxed(&f->waiter);

			if (fb_load_relaxed(&f->state) != FB_FIBER_PARKED ||
			    !wt || fb_read_once(&wt->kind) == FB_WAIT_FD ||
			    fb_read_once(&wt->kind) == FB_WAIT_SLEEP ||
			    fb_read_once(&wt->deadline) != FB_NO_DEADLINE) {
				stuck = false;
				break;
			}
		}
		fb_spin_unlock(&w->live_lock);
		if (!stuck)
			return false;
	}
	return true;
}

static void report_deadlock(struct fb_runtime *r)
{
	fb_count_foreign(offsetof(struct fb_counters, deadlocks));
	fprintf(stderr,
		"libfiber: all fibers are blocked: no fiber can run, no timer "
		"is armed, no fd is waited on, and %ld thread(s) wait in "
		"libfiber (LIBFIBER_DEADLOCK=%s)\n",
		fb_load_relaxed(&fw_nr),
		r->params.deadlock == FB_DEADLOCK_ABORT ? "abort" : "warn");
	fb_sched_dump(2, "libfiber: fiber dump");
	if (r->params.deadlock == FB_DEADLOCK_ABORT)
		abort();
}

/* deadlock - the deadlock check of an idle runtime; returns how long the
 * monitor may sleep (FB_NEVER: until kicked). */
static uint64_t deadlock(struct fb_monitor *m, bool busy)
{
	struct fb_runtime *r = m->r;
	uint64_t now = fb_now_ns(), sig;

	if (busy) { /* no kick comes when the last worker sleeps: look */
		m->dl_since = 0;
		return FB_DEADLOCK_POLL_NS;
	}
	if (!fb_load_seqcst(&fw_nr) || fb_load_relaxed(&r->nr_live) <= 0) {
		m->dl_since = 0;
		return FB_NEVER;
	}
	sig = progress(r);
	if (!m->dl_since || sig != m->dl_sig) {
		m->dl_since = now;
		m->dl_sig = sig;
		m->dl_done = false;
		return FB_DEADLOCK_NS;
	}
	if (m->dl_done)
		return FB_NEVER; /* until a worker or a thread kicks */
	if (now - m->dl_since < FB_DEADLOCK_NS)
		return m->dl_since + FB_DEADLOCK_NS - now;
	m->dl_done = true;
	if (all_blocked(r))
		report_deadlock(r);
	return FB_NEVER;
}

/* ---- the thread ------------------------------------------------------- */

/* look - one round; returns how long to sleep (FB_NEVER: until kicked). */
static uint64_t look(struct fb_monitor *m)
{
	struct fb_runtime *r = m->r;
	bool busy = fb_load_seqcst(&r->nr_sleepers) < r->nr_workers;
	uint64_t wait = FB_NEVER, now;

	if (fb_xchg_seqcst(&mon_dump, false))
		fb_sched_dump(2, "libfiber: fiber dump (LIBFIBER_DUMP_SIGNAL)");
	if (r->params.stall_ns && busy)
		wait = stalls(m);
	/* While workers are busy, what a burst left in the pools goes back
	 * from here (sched/stack.h), so that a server that never idles
	 * returns a spike too; idle workers do it before they sleep.  A
	 * load each while nothing is due.  Not from the workers' tick:
	 * measured there, the two calls made create-join in batches of
	 * 1000 3-4% slower, with the same instruction counts. */
	if (busy) {
		now = fb_now_ns();
		fb_stack_pool_trim(now, FB_POOL_TRIM_BATCH);
		fb_fiber_pool_trim(now, FB_POOL_TRIM_BATCH);
	}
	if (r->params.deadlock != FB_DEADLOCK_OFF)
		wait = FB_MIN(wait, deadlock(m, busy));
	if (r->params.interval_ns) {
		now = fb_now_ns();
		if (now >= m->next_interval) {
			r->params.interval_fn();
			fb_count_foreign(
				offsetof(struct fb_counters, stats_intervals));
			m->next_interval += r->params.interval_ns;
			if (m->next_interval <= now)
				m->next_interval = now + r->params.interval_ns;
		}
		wait = FB_MIN(wait, m->next_interval - now);
	}
	return wait;
}

/* watches_workers - whether the monitor must look while workers are
 * awake (stalls, deadlocks); else only a signal, the interval or the stop
 * wakes it. */
static bool watches_workers(const struct fb_runtime *r)
{
	return r->params.stall_ns || r->params.deadlock != FB_DEADLOCK_OFF;
}

static void *monitor_main(void *arg)
{
	struct fb_monitor *m = arg;
	struct fb_runtime *r = m->r;
	struct timespec ts;
	sigset_t all;

	/* Signals are for the application's threads and the workers. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	m->next_interval = fb_now_ns() + r->params.interval_ns;
	while (!fb_load_acquire(&mon_stop)) {
		unsigned int seq = fb_load_acquire(&mon_word);
		uint64_t wait = look(m);

		if (wait == FB_NEVER && !watches_workers(r)) {
			/* Watching nothing, it wants no kick either: a kick
			 * between look() and the wait changed mon_word. */
			fb_futex_wait(&mon_word, seq, NULL);
			continue;
		}
		ts.tv_sec = (time_t)(wait / 1000000000u);
		ts.tv_nsec = (long)(wait % 1000000000u);
		if (wait > FB_MONITOR_BUSY_NS && watches_workers(r)) {
			/* Park, for ever or for the deadlock check's second:
			 * the order argued at the top of the file, so that a
			 * worker that wakes meanwhile kicks us (it may stall,
			 * with timers due).  A worker woke or a thread began
			 * to wait before we parked: look again, after at
			 * most FB_MONITOR_BUSY_NS. */
			fb_store_seqcst(&fb_monitor_parked, 1);
			if (fb_load_seqcst(&mon_stop) ||
			    fb_load_seqcst(&mon_dump)) {
				fb_store_relaxed(&fb_monitor_parked, 0);
				continue;
			}
			if (fb_load_seqcst(&r->nr_sleepers) == r->nr_workers &&
			    (wait != FB_NEVER || !fb_load_seqcst(&fw_nr) ||
			     m->dl_done ||
			     r->params.deadlock == FB_DEADLOCK_OFF ||
			     fb_load_relaxed(&r->nr_live) <= 0)) {
				fb_futex_wait(&mon_word, seq,
					      wait == FB_NEVER ? NULL : &ts);
				fb_store_relaxed(&fb_monitor_parked, 0);
				continue;
			}
			fb_store_relaxed(&fb_monitor_parked, 0);
			wait = FB_MONITOR_BUSY_NS;
			ts.tv_sec = 0;
			ts.tv_nsec = (long)wait;
		}
		fb_futex_wait(&mon_word, seq, &ts);
	}
	return NULL;
}

/* The dump signal's action before the runtime took it over, put back at
 * the stop. */
static struct sigaction old_dump;

/* The dump signal (LIBFIBER_DUMP_SIGNAL): ask the monitor, which dumps
 * outside the handler. */
static void on_dump_signal(int sig)
{
	int saved = errno;

	(void)sig;
	fb_store_seqcst(&mon_dump, true);
	fb_monitor_kick();
	errno = saved;
}

int fb_monitor_start(struct fb_runtime *r)
{
	const struct fb_sched_params *p = &r->params;
	struct fb_monitor *m;
	int rc;

	if (!p->stall_ns && p->deadlock == FB_DEADLOCK_OFF && !p->dump_signal &&
	    !p->interval_ns)
		return 0;
	m = fb_calloc(1, sizeof(*m) + (size_t)r->nr_workers * sizeof(m->mw[0]));
	if (!m)
		return ENOMEM;
	m->r = r;
	fb_store_relaxed(&mon_stop, false);
	fb_store_relaxed(&mon_dump, false);
	rc = pthread_create(&m->thread, NULL, monitor_main, m);
	if (rc) {
		fb_free(m);
		return EAGAIN;
	}
	/* Named by the creator, as the workers are (sched/runtime.c), so
	 * that it carries its name when fiber_init() returns. */
	pthread_setname_np(m->thread, "fiber-monitor");
	r->mon = m;
	if (p->dump_signal) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_dump_signal;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		sigaction(p->dump_signal, &sa, &old_dump);
	}
	return 0;
}

void fb_monitor_atfork_child(struct fb_runtime *r)
{
	if (r->mon && r->params.dump_signal)
		sigaction(r->params.dump_signal, &old_dump, NULL);
}

void fb_monitor_stop(struct fb_runtime *r)
{
	struct fb_monitor *m = r->mon;

	if (!m)
		return;
	if (r->params.dump_signal)
		sigaction(r->params.dump_signal, &old_dump, NULL);
	fb_store_seqcst(&mon_stop, true);
	fb_monitor_kick();
	pthread_join(m->thread, NULL);
	r->mon = NULL;
	fb_free(m);
}
