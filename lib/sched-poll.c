/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sched-poll.c - the I/O poller: one epoll set for the runtime, folded
 * into the idle loop, and the fd wait that the fiber I/O calls (io-fd.c)
 * park on.
 *
 * Who polls when.
 * - An idle worker whose poll window ran out tries to become THE poller
 *   (the atomic flag @busy).  The winner sleeps in epoll_wait instead of
 *   futex_wait, in the worker state FB_WS_EPOLL; the others sleep on their
 *   futex as before.  Both sleeps end at the worker's next timer deadline.
 *   So an idle runtime has exactly one thread that waits for I/O, and no
 *   dedicated poller thread: the hot path (fiber wakes a fiber) never
 *   crosses an extra thread, and a worker that wakes from epoll runs the
 *   fibers it woke itself when placement says so.
 * - A busy worker polls without blocking at its scheduling points, every
 *   FB_TICK_SWITCHES switches, when no worker holds the poller flag.  So
 *   I/O is not starved while every worker is busy, and it costs nothing
 *   while some worker sleeps in epoll (it gets the events first).
 * - A waker interrupts the poller as it would a sleeping worker: it sees
 *   FB_WS_EPOLL (rule 4 of sched-core.c) and writes the eventfd that is in
 *   the epoll set, instead of calling futex_wake.
 *
 * Registration.  Each fd has an entry in a two-level table (fd number ->
 * struct fb_iofd: a lock and a wait list, each waiter with the events it
 * wants in w.data).  A waiting fiber queues itself and (re)arms the fd
 * with EPOLLONESHOT for the union of its waiters' events; the poller that
 * gets the event wakes the waiters it satisfies and re-arms for the rest.
 * Arming an fd that is already ready reports it at once, so readiness that
 * arrived between the EAGAIN and the arm is not lost.  Every wake means
 * "try the system call again", so a stale event (an fd closed and its
 * number reused) costs a retry, never a wrong result; MOD failing with
 * ENOENT (the kernel dropped a closed fd) turns into ADD.
 *
 * errno.  A fiber may resume on another thread after any switch, and
 * glibc declares __errno_location() const, so the compiler may keep the
 * errno address of the thread before a switch.  This file reads errno only
 * right after the system call that set it, in code that does not switch
 * before; io-fd.c's opening comment gives the rule for the fd calls.
 *
 * Alternatives rejected: edge-triggered registration once per fd (one
 * epoll_ctl less per wait, but the table cannot see close(2), so a reused
 * number would wait for an edge on a descriptor epoll no longer watches);
 * a poller thread (a thread hop and a futex wake on every I/O wakeup); an
 * eventfd per worker (fds and epoll entries per worker for nothing: only
 * the poller sleeps in epoll).
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sched.h"

/* fd table: FB_IOFD_CHUNK entries per chunk, allocated on first use. */
#define FB_IOFD_CHUNK 1024
#define FB_IOFD_CHUNKS 1024 /* fds below 1M; picked, like a large ulimit */
/* Events taken from epoll per call: picked. */
#define FB_POLL_EVENTS 64
/* epoll data of the eventfd; fds are below 2^31. */
#define EVFD_KEY UINT64_MAX

struct fb_iofd {
	struct fb_spinlock lock;
	struct fb_list waiters; /* struct fb_waiter, w.data = events; @lock */
};

static struct {
	atomic_bool up;	  /* release once the fds below are valid */
	atomic_bool busy; /* the poller flag: a worker is in epoll_wait */
	int epfd;
	int evfd;
	pthread_mutex_t init_lock; /* creating and freeing */
	struct fb_iofd *_Atomic chunks[FB_IOFD_CHUNKS];
} poller = { .init_lock = PTHREAD_MUTEX_INITIALIZER };

/* ---- setup --------------------------------------------------------------- */

static int poller_start_locked(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = EVFD_KEY };

	poller.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (poller.epfd < 0)
		return errno;
	poller.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (poller.evfd < 0 ||
	    epoll_ctl(poller.epfd, EPOLL_CTL_ADD, poller.evfd, &ev)) {
		int err = errno;

		if (poller.evfd >= 0)
			close(poller.evfd);
		close(poller.epfd);
		return err;
	}
	fb_store_release(&poller.up, true);
	return 0;
}

static int poller_get(void)
{
	int err = 0;

	if (fb_likely(fb_load_acquire(&poller.up)))
		return 0;
	pthread_mutex_lock(&poller.init_lock);
	if (!fb_load_relaxed(&poller.up))
		err = poller_start_locked();
	pthread_mutex_unlock(&poller.init_lock);
	return err;
}

void fb_poll_fini(void)
{
	pthread_mutex_lock(&poller.init_lock);
	if (fb_load_relaxed(&poller.up)) {
		close(poller.evfd);
		close(poller.epfd);
		fb_store_relaxed(&poller.up, false);
	}
	fb_store_relaxed(&poller.busy, false);
	for (int i = 0; i < FB_IOFD_CHUNKS; i++) {
		fb_free(fb_load_relaxed(&poller.chunks[i]));
		fb_store_relaxed(&poller.chunks[i], NULL);
	}
	pthread_mutex_unlock(&poller.init_lock);
}

/* iofd - the entry of @fd; NULL if out of range or out of memory. */
static struct fb_iofd *iofd(int fd, bool create)
{
	struct fb_iofd *c;
	unsigned int i = (unsigned int)fd / FB_IOFD_CHUNK;

	if (fd < 0 || i >= FB_IOFD_CHUNKS)
		return NULL;
	c = fb_load_acquire(&poller.chunks[i]);
	if (!c && create) {
		pthread_mutex_lock(&poller.init_lock);
		c = fb_load_relaxed(&poller.chunks[i]);
		if (!c) {
			c = fb_calloc(FB_IOFD_CHUNK, sizeof(*c));
			fb_store_release(&poller.chunks[i], c);
		}
		pthread_mutex_unlock(&poller.init_lock);
	}
	return c ? &c[(unsigned int)fd % FB_IOFD_CHUNK] : NULL;
}

/* ---- arming and dispatch ------------------------------------------------- */

/* arm_locked - ask epoll for one report of the events @d's waiters want.
 * Return: 0 or the errno of epoll_ctl.  Context: @d->lock held. */
static int arm_locked(int fd, struct fb_iofd *d)
{
	struct epoll_event ev = { .events = EPOLLONESHOT,
				  .data.u64 = (uint64_t)fd };
	struct fb_list *n;

	fb_list_for_each (n, &d->waiters)
		ev.events |=
			(uint32_t)fb_list_entry(n, struct fb_waiter, node)->data;
	if (ev.events == EPOLLONESHOT)
		return 0;
	if (!epoll_ctl(poller.epfd, EPOLL_CTL_MOD, fd, &ev))
		return 0;
	if (errno == ENOENT && !epoll_ctl(poller.epfd, EPOLL_CTL_ADD, fd, &ev))
		return 0;
	return errno;
}

static void dispatch_fd(int fd, uint32_t revents, struct fb_worker *self)
{
	struct fb_iofd *d = iofd(fd, false);
	struct fb_list *n, *tmp;
	struct fb_waiter *w;
	bool left = false;

	if (!d)
		return;
	fb_spin_lock(&d->lock);
	fb_list_for_each_safe (n, tmp, &d->waiters) {
		w = fb_list_entry(n, struct fb_waiter, node);
		if (!(revents & ((uint32_t)w->data | EPOLLERR | EPOLLHUP))) {
			left = true;
			continue;
		}
		fb_list_del(n);
		w->data = revents;
		w->result = 0;
		fb_waiter_wake(w, 0);
		FB_COUNT(self, io_events);
	}
	if (left)
		arm_locked(fd, d);
	fb_spin_unlock(&d->lock);
}

static void dispatch(const struct epoll_event *ev, int n,
		     struct fb_worker *self)
{
	uint64_t drain;

	for (int i = 0; i < n; i++) {
		if (ev[i].data.u64 == EVFD_KEY) {
			if (read(poller.evfd, &drain, sizeof(drain)) < 0)
				(void)0; /* already drained: fine */
			continue;
		}
		dispatch_fd((int)ev[i].data.u64, ev[i].events, self);
	}
}

/* ---- waiting on an fd ---------------------------------------------------- */

int fb_poll_wait_fd(int fd, uint32_t events, uint64_t deadline,
		    uint32_t *revents)
{
	struct fb_iofd *d;
	struct fb_waiter w;
	int err = poller_get();

	if (err)
		return err;
	d = iofd(fd, true);
	if (!d)
		return fd < 0 ? EBADF : ENOMEM;
	fb_spin_lock(&d->lock);
	fb_waiter_prepare(&w);
	w.data = events;
	fb_list_add_tail(&w.node, &d->waiters);
	err = arm_locked(fd, d);
	if (err) {
		fb_list_del(&w.node);
		if (w.fiber)
			fb_store_relaxed(&w.fiber->state, FB_FIBER_RUNNING);
		fb_spin_unlock(&d->lock);
		return err;
	}
	FB_COUNT(fb_worker_self(), io_waits);
	err = fb_waiter_wait_timed(&w, &d->lock, deadline);
	if (!err && revents)
		*revents = (uint32_t)w.data;
	return err;
}

/* ---- the poller's side of the idle loop ---------------------------------- */

void fb_sched_poll_kick(void)
{
	uint64_t one = 1;

	if (write(poller.evfd, &one, sizeof(one)) < 0)
		(void)0; /* counter full: a wake is pending anyway */
}

static bool poller_try_take(void)
{
	return fb_load_acquire(&poller.up) && !fb_load_relaxed(&poller.busy) &&
	       !atomic_exchange_explicit(&poller.busy, true,
					 memory_order_acquire);
}

static void poller_release(void)
{
	fb_store_release(&poller.busy, false);
}

void fb_sched_tick(struct fb_worker *w)
{
	struct epoll_event ev[FB_POLL_EVENTS];
	uint64_t next = fb_timer_next(w), now;
	int n;

	if (next) {
		now = fb_now_ns();
		if (next <= now)
			fb_timer_run(w, now);
	}
	if (!poller_try_take())
		return;
	FB_COUNT(w, epoll_ticks);
	n = epoll_wait(poller.epfd, ev, FB_POLL_EVENTS, 0);
	if (n > 0)
		dispatch(ev, n, w);
	poller_release();
}

bool fb_sched_idle_poll(struct fb_worker *w)
{
	struct epoll_event ev[FB_POLL_EVENTS];
	int n;

	if (!poller_try_take())
		return false;
	n = epoll_wait(poller.epfd, ev, FB_POLL_EVENTS, 0);
	if (n > 0)
		dispatch(ev, n, w);
	poller_release();
	return n > 0;
}

/* The relative timeout of a sleep that must end at @next (0: none). */
static struct timespec *until(uint64_t next, struct timespec *ts)
{
	uint64_t now, d;

	if (!next)
		return NULL;
	now = fb_now_ns();
	d = next > now ? next - now : 0;
	ts->tv_sec = (time_t)(d / 1000000000u);
	ts->tv_nsec = (long)(d % 1000000000u);
	return ts;
}

static void epoll_sleep(struct fb_worker *w, uint64_t next)
{
	struct epoll_event ev[FB_POLL_EVENTS];
	struct timespec ts, *rel = until(next, &ts);
	int n, ms;

	FB_COUNT(w, epoll_sleeps);
	n = epoll_pwait2(poller.epfd, ev, FB_POLL_EVENTS, rel, NULL);
	if (n < 0 && errno == ENOSYS) {
		/* Before Linux 5.11: milliseconds, rounded up. */
		ms = rel ? (int)FB_MIN(
				   (uint64_t)rel->tv_sec * 1000 +
					   ((uint64_t)rel->tv_nsec + 999999) /
						   1000000,
				   (uint64_t)INT32_MAX) :
			   -1;
		n = epoll_wait(poller.epfd, ev, FB_POLL_EVENTS, ms);
	}
	if (n > 0)
		dispatch(ev, n, w);
}

static void futex_sleep(struct fb_worker *w, uint64_t next)
{
	struct timespec ts;

	FB_COUNT(w, sleeps);
	do {
		if (fb_futex_wait(&w->pw.state, FB_WS_SLEEPING,
				  until(next, &ts)) == ETIMEDOUT)
			break;
	} while (fb_load_acquire(&w->pw.state) == FB_WS_SLEEPING);
}

/*
 * fb_sched_idle_sleep - the sleep half of the idle loop (sched-idle.c):
 * the worker is POLLING and its poll window is over.  Become the poller
 * and sleep in epoll, or sleep on the futex; either ends at the next timer
 * deadline, at a wake (rule 4 of sched-core.c) or at I/O readiness.  Then
 * fire the timers that are due.  Returns with the state still idle; the
 * caller stores RUNNING.
 */
void fb_sched_idle_sleep(struct fb_worker *w)
{
	unsigned int s = FB_WS_POLLING;
	uint64_t next = fb_timer_next(w);
	bool as_poller = poller_try_take();

	if (next && next <= fb_now_ns())
		goto out;
	if (!fb_cas_seqcst(&w->pw.state, &s,
			   as_poller ? FB_WS_EPOLL : FB_WS_SLEEPING))
		goto out; /* NEED_RESCHED: a waker saw us polling */
	if (fb_worker_has_work(w) || fb_load_seqcst(&fb_rt->stopping))
		goto out;
	if (as_poller)
		epoll_sleep(w, next);
	else
		futex_sleep(w, next);
out:
	if (as_poller)
		poller_release();
	next = fb_timer_next(w);
	if (next)
		fb_timer_run(w, fb_now_ns());
}
