/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * netpoll.c - the I/O poller: one epoll set for the runtime, folded
 * into the idle loop, and the fd wait that the fiber I/O calls (io/fd.c)
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
 *   FB_WS_EPOLL (rule 4 of sched/core.c) and writes the eventfd that is in
 *   the epoll set, instead of calling futex_wake.
 *
 * Registration.  Each fd has an entry in a two-level table (fd number ->
 * struct fb_iofd: a lock, a wait list, each waiter with the events it
 * wants in w.data, and the call word below).  A waiting fiber queues itself
 * and (re)arms the fd with EPOLLONESHOT for the union of its waiters'
 * events; the poller that gets the event wakes the waiters it satisfies
 * and re-arms for the rest.  Arming an fd that is already ready reports it
 * at once, so readiness that arrived between the EAGAIN and the arm is not
 * lost.  Every wake means "try the system call again", so a stale event
 * costs a retry, never a wrong result.
 *
 * Reuse of a number.  epoll drops a registration when its file is closed
 * (its last descriptor), and keys registrations by file, not by number.  So
 * when EPOLL_CTL_MOD fails with ENOENT while waiters are queued, the file
 * they armed for is gone from this number: a plain close(2) ran under them.
 * They are stale; arm_locked() fails them with EBADF before it ADDs the
 * new file.  A waiter parked on a closed fd therefore never gets the bytes
 * of the file that reuses the number, and never keeps the new file's
 * readers waiting; until the number is reused it stays parked (close(2)
 * tells epoll nothing we could see), which is why fiber_close() exists.
 *
 * Closing.  The call word of an entry (@calls, one atomic 64-bit word)
 * holds the number of fd calls in progress (bits 0-31), CLOSING (bit 32)
 * and a generation (bits 33-63) that each fiber_close() bumps.  Every fd
 * call (io/fd.c) enters the entry before its first system call and leaves
 * it after its last one: entering is a CAS that adds one while CLOSING is
 * clear, and fails with EBADF while it is set.  fb_poll_close() sets
 * CLOSING, then under the entry lock wakes every waiter with EBADF and
 * drops the registration (EPOLL_CTL_DEL: a file that lives on in a dup or
 * a child would keep it), then waits until the count is 0, then clears
 * CLOSING and bumps the generation; fiber_close() then calls close(2).  A
 * fiber keeps its count while it is parked, and checks CLOSING before it
 * queues (under the lock, so either the closer sees it queued or it sees
 * CLOSING) and after it wakes, so it never retries its system call once a
 * close began, and close(2) never runs under a call in progress: the
 * number cannot be reused under it.  A foreign thread blocks in poll(2),
 * which a close does not interrupt; it leaves the entry while it polls (so
 * the close does not wait for it) and re-enters only if the generation is
 * still the one it started in, else it fails with EBADF.  Models: Go's
 * netFD close (fdMutex: a reference count and a closing bit in one word).
 *
 * errno.  A fiber may resume on another thread after any switch, and
 * glibc declares __errno_location() const, so the compiler may keep the
 * errno address of the thread before a switch.  This file reads errno only
 * right after the system call that set it, in code that does not switch
 * before; io/fd.c's opening comment gives the rule for the fd calls.
 *
 * Alternatives rejected: edge-triggered registration once per fd (one
 * epoll_ctl less per wait, but the table cannot see close(2), so a reused
 * number would wait for an edge on a descriptor epoll no longer watches);
 * a poller thread (a thread hop and a futex wake on every I/O wakeup); an
 * eventfd per worker (fds and epoll entries per worker for nothing: only
 * the poller sleeps in epoll).
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sched/netpoll.h"
#include "sched/sched.h"

/* Events taken from epoll per call: picked. */
#define FB_POLL_EVENTS 64
/* epoll data of the eventfd; fds are below 2^31. */
#define EVFD_KEY UINT64_MAX

/* fb_poll_close() waits for calls with this many yields, then sleeps of
 * IOFD_DRAIN_SLEEP_NS: picked; a woken fiber returns within a switch. */
#define IOFD_DRAIN_YIELDS 64
#define IOFD_DRAIN_SLEEP_NS 50000u

static struct {
	atomic_bool up;	  /* release once the fds below are valid */
	atomic_bool busy; /* the poller flag: a worker is in epoll_wait */
	int epfd;
	int evfd;
	pthread_mutex_t init_lock; /* creating and freeing, fd table too */
} poller = { .init_lock = PTHREAD_MUTEX_INITIALIZER };

struct fb_iofd *_Atomic fb_iofd_chunks[FB_IOFD_CHUNKS];

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
	/* The fd table stays: a thread may be inside an fd call (in
	 * poll(2)) across the shutdown and come back to its entry. */
	pthread_mutex_unlock(&poller.init_lock);
}

/* iofd_alloc - the entry of @fd, allocating its chunk; NULL if out of
 * memory.  Context: @fd in range. */
static fb_noinline struct fb_iofd *iofd_alloc(int fd)
{
	struct fb_iofd *c;
	unsigned int i = (unsigned int)fd / FB_IOFD_CHUNK;

	pthread_mutex_lock(&poller.init_lock);
	c = fb_load_relaxed(&fb_iofd_chunks[i]);
	if (!c) {
		c = fb_aligned_alloc(FB_CACHELINE, FB_IOFD_CHUNK * sizeof(*c));
		if (c)
			memset(c, 0, FB_IOFD_CHUNK * sizeof(*c));
		fb_store_release(&fb_iofd_chunks[i], c);
	}
	pthread_mutex_unlock(&poller.init_lock);
	return c ? &c[(unsigned int)fd % FB_IOFD_CHUNK] : NULL;
}

/* iofd - the entry of @fd; NULL if out of range, or not there and not
 * @create, or out of memory.  Every fd call looks it up: keep it small. */
static inline struct fb_iofd *iofd(int fd, bool create)
{
	struct fb_iofd *c;
	unsigned int i = (unsigned int)fd / FB_IOFD_CHUNK;

	if (fb_unlikely(i >= FB_IOFD_CHUNKS)) /* fd < 0 too */
		return NULL;
	c = fb_load_acquire(&fb_iofd_chunks[i]);
	if (fb_likely(c))
		return &c[(unsigned int)fd % FB_IOFD_CHUNK];
	return create ? iofd_alloc(fd) : NULL;
}

/* ---- calls in progress (see "Closing") --------------------------------- */

/* The rest of fb_poll_enter(): allocate the chunk, retry a failed CAS. */
int fb_poll_enter_slow(int fd, struct fb_iofd **dp, uint32_t *gen)
{
	struct fb_iofd *d = iofd(fd, true);
	uint64_t v;

	if (!d)
		return fd < 0 ? EBADF : ENOMEM;
	v = fb_load_relaxed(&d->calls);
	do {
		if (v & FB_IOFD_CLOSING)
			return EBADF;
	} while (!atomic_compare_exchange_weak_explicit(&d->calls, &v, v + 1,
							memory_order_acquire,
							memory_order_relaxed));
	*dp = d;
	*gen = (uint32_t)(v >> FB_IOFD_GEN_SHIFT);
	return 0;
}

int fb_poll_reenter(struct fb_iofd *d, uint32_t gen)
{
	uint64_t v = fb_load_relaxed(&d->calls);

	do {
		if ((v & FB_IOFD_CLOSING) ||
		    (uint32_t)(v >> FB_IOFD_GEN_SHIFT) != gen)
			return EBADF;
	} while (!atomic_compare_exchange_weak_explicit(&d->calls, &v, v + 1,
							memory_order_acquire,
							memory_order_relaxed));
	return 0;
}

/* wake_all_locked - take every waiter but @keep off @d and wake it with
 * @result.  Return: whether there was one.  Context: @d->lock held. */
static bool wake_all_locked(struct fb_iofd *d, struct fb_waiter *keep,
			    int result)
{
	struct fb_list *n, *tmp;
	struct fb_waiter *w;
	bool any = false;

	fb_list_for_each_safe (n, tmp, &d->waiters) {
		w = fb_list_entry(n, struct fb_waiter, node);
		if (w == keep || !fb_waiter_claim(w, FB_CLAIM_WOKEN))
			continue; /* a timed-out one leaves by itself */
		fb_list_del(n);
		w->result = result;
		fb_waiter_wake(w, 0);
		any = true;
	}
	return any;
}

/* The events @d's waiters want, with EPOLLONESHOT. */
static uint32_t wanted_locked(struct fb_iofd *d)
{
	uint32_t events = EPOLLONESHOT;
	struct fb_list *n;

	fb_list_for_each (n, &d->waiters)
		events |=
			(uint32_t)fb_list_entry(n, struct fb_waiter, node)->data;
	return events;
}

int fb_poll_close(int fd)
{
	struct fb_iofd *d = iofd(fd, false);
	uint64_t v;

	if (!d)
		return 0; /* no fiber call ever looked at this chunk */
	v = fb_load_relaxed(&d->calls);
	do {
		if (v & FB_IOFD_CLOSING)
			return EBADF;
	} while (!fb_cas(&d->calls, &v, v | FB_IOFD_CLOSING));
	fb_spin_lock(&d->lock);
	wake_all_locked(d, NULL, EBADF);
	if (fb_load_acquire(&poller.up))
		(void)epoll_ctl(poller.epfd, EPOLL_CTL_DEL, fd, NULL);
	fb_spin_unlock(&d->lock);
	for (unsigned int i = 0; fb_load_acquire(&d->calls) & FB_IOFD_CALLS;
	     i++) {
		if (i >= IOFD_DRAIN_YIELDS)
			fiber_sleep(IOFD_DRAIN_SLEEP_NS); /* a thread too */
		else if (fb_current())
			fb_sched_yield();
		else
			sched_yield();
	}
	/* Nobody else writes the word while CLOSING is set and no call is
	 * in progress. */
	fb_store_release(&d->calls, ((v >> FB_IOFD_GEN_SHIFT) + 1)
					    << FB_IOFD_GEN_SHIFT);
	return 0;
}

/* ---- arming and dispatch ------------------------------------------------- */

/*
 * arm_locked - ask epoll for one report of the events @d's waiters want.
 * If no registration is left for the file now at @fd while waiters are
 * queued, the file they waited on was closed: fail them with EBADF, but
 * not @self (the waiter that arms now, or NULL), and register the new one.
 * Return: 0 or the errno of epoll_ctl.  Context: @d->lock held.
 */
static int arm_locked(int fd, struct fb_iofd *d, struct fb_waiter *self)
{
	struct epoll_event ev = { .events = wanted_locked(d),
				  .data.u64 = (uint64_t)fd };

	if (ev.events == EPOLLONESHOT)
		return 0;
	if (!epoll_ctl(poller.epfd, EPOLL_CTL_MOD, fd, &ev))
		return 0;
	if (errno != ENOENT)
		return errno;
	if (wake_all_locked(d, self, EBADF))
		ev.events = wanted_locked(d);
	if (ev.events == EPOLLONESHOT ||
	    !epoll_ctl(poller.epfd, EPOLL_CTL_ADD, fd, &ev))
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
		if (!fb_waiter_claim(w, FB_CLAIM_WOKEN))
			continue; /* timed out: it unlinks itself */
		fb_list_del(n);
		w->data = revents;
		w->result = 0;
		fb_waiter_wake(w, 0);
		FB_COUNT(self, io_events);
	}
	if (left)
		arm_locked(fd, d, NULL);
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

/* Inside a call on @fd (fb_poll_enter), so fb_poll_close() waits for it:
 * it checks CLOSING before it queues and after it wakes. */
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
	if (fb_load_relaxed(&d->calls) & FB_IOFD_CLOSING) {
		fb_spin_unlock(&d->lock);
		return EBADF;
	}
	fb_waiter_prepare(&w, FB_WAIT_FD | FB_WAIT_CANCELLABLE,
			  (const void *)(intptr_t)fd);
	w.data = events;
	fb_list_add_tail(&w.node, &d->waiters);
	err = arm_locked(fd, d, &w);
	if (err) {
		/* Give the wait up as a deadline already past would; a
		 * cancellation that claimed it stays pending. */
		fb_waiter_wait_keep(&w, &d->lock, 0);
		fb_list_del(&w.node);
		fb_spin_unlock(&d->lock);
		return err;
	}
	FB_COUNT(fb_worker_self(), io_waits);
	err = fb_waiter_wait_timed(&w, &d->lock, deadline);
	if (!err && (fb_load_acquire(&d->calls) & FB_IOFD_CLOSING))
		return EBADF; /* woken by the fd, but a close began since */
	if (!err && revents)
		*revents = (uint32_t)w.data;
	return err;
}

/* ---- the poller flag and the wait (the idle loop's, sleep.c) ------------ */

void fb_sched_poll_kick(void)
{
	uint64_t one = 1;

	if (write(poller.evfd, &one, sizeof(one)) < 0)
		(void)0; /* counter full: a wake is pending anyway */
}

bool fb_netpoll_take(void)
{
	return fb_load_acquire(&poller.up) && !fb_load_relaxed(&poller.busy) &&
	       !atomic_exchange_explicit(&poller.busy, true,
					 memory_order_acquire);
}

void fb_netpoll_release(void)
{
	fb_store_release(&poller.busy, false);
}

int fb_netpoll_wait(struct fb_worker *w, const struct timespec *rel)
{
	struct epoll_event ev[FB_POLL_EVENTS];
	int n, ms;

	if (rel && !rel->tv_sec && !rel->tv_nsec) {
		n = epoll_wait(poller.epfd, ev, FB_POLL_EVENTS, 0);
	} else {
		n = epoll_pwait2(poller.epfd, ev, FB_POLL_EVENTS, rel, NULL);
		if (n < 0 && errno == ENOSYS) {
			/* Before Linux 5.11: milliseconds, rounded up. */
			ms = rel ? (int)FB_MIN((uint64_t)rel->tv_sec * 1000 +
						       ((uint64_t)rel->tv_nsec +
							999999) /
							       1000000,
					       (uint64_t)INT32_MAX) :
				   -1;
			n = epoll_wait(poller.epfd, ev, FB_POLL_EVENTS, ms);
		}
	}
	if (n > 0)
		dispatch(ev, n, w);
	return n > 0 ? n : 0;
}

void fb_poll_atfork_child(void)
{
	pthread_mutex_init(&poller.init_lock, NULL);
	if (fb_load_relaxed(&poller.up)) {
		close(poller.evfd);
		close(poller.epfd);
		fb_store_relaxed(&poller.up, false);
	}
	fb_store_relaxed(&poller.busy, false);
	for (int i = 0; i < FB_IOFD_CHUNKS; i++) {
		fb_free(fb_load_relaxed(&fb_iofd_chunks[i]));
		fb_store_relaxed(&fb_iofd_chunks[i], NULL);
	}
}

void fb_poll_abandon(struct fb_waiter *w)
{
	struct fb_iofd *d = iofd((int)(intptr_t)w->obj, false);

	if (!d)
		return;
	fb_spin_lock(&d->lock);
	if (w->node.next != &w->node)
		fb_list_del(&w->node);
	fb_spin_unlock(&d->lock);
	fb_poll_leave(d); /* the call it was inside */
}
