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
 * wants in w.data, the call word below, a ready bit per direction).  The
 * first wait that has to park registers the fd once, edge-triggered
 * (EPOLLET) for both directions; it stays registered until fiber_close().
 * The poller that gets an event wakes every waiter of the directions it
 * reports; a direction with no waiter to take it sets its ready bit
 * instead.  A wait (after the EAGAIN of its system call) first consumes
 * the ready bits of its directions: if one was set it returns at once
 * without a system call, and the caller retries.  Else, under the entry
 * lock, it looks at the bits again and queues itself: the poller sets bits
 * and wakes waiters under the same lock, so an edge that arrives between
 * the EAGAIN and the queueing is seen either by the wait (the bit) or by
 * the poller (the waiter), never lost.  Registering an fd that is ready
 * reports it at once, so the first wait loses nothing either.  Every wake
 * means "try the system call again", so a stale bit or event costs a
 * retry, never a wrong result.  Two fibers waiting on the same fd and
 * direction both wake: an edge comes once, and a woken fiber that then
 * finds nothing (the other took it) parks again, while one that was woken
 * alone and left (timed out, cancelled) would have taken the edge away
 * from the other.
 *
 * Reuse of a number.  epoll drops a registration when its file is closed
 * (its last descriptor), and keys registrations by file, not by number, so
 * after a plain close(2) the entry still says "registered" for a number
 * whose new file epoll does not watch.  A fiber parking on a registered
 * entry therefore checks the registration (EPOLL_CTL_MOD, which also
 * reports the current state again) unless it is the fiber that registered
 * or checked it last for that direction (@owner): a connection served by
 * one fiber costs one epoll_ctl, a fiber that finds a number reused under
 * it costs one more.  ENOENT means the file the queued waiters waited on
 * is gone: they are stale, fail with EBADF, and the new file is ADDed.
 * fiber_fd_set_deadline() wakes the waiters to retry, so it checks the
 * same way first (while someone waits); a file libfiber makes
 * (fb_poll_new_file) fails whoever waits on its number at once.  A waiter
 * parked on a closed fd therefore does not get the bytes of the file that
 * reuses the number, and never keeps the new file's readers waiting;
 * until one of those happens it stays parked (close(2) tells epoll
 * nothing we could see), which is why fiber_close() exists.  The one way
 * around it: the old file lives on (a dup, a child keeps it registered
 * under the number) and becomes ready first; the waiter then retries its
 * call on whatever file has the number.  The
 * files libfiber makes (fiber_accept(), the TCP helpers, the signalfd of
 * fiber_signal_wait()) clear @owner of their number, so the first wait
 * on one checks the registration whoever waits: a fiber that serves
 * connections one after the other and close(2)s each does not wait on an
 * unregistered file.  The one case the check misses: the very fiber that
 * registered a number close(2)s it and waits on a file made elsewhere
 * (socket(2), open(2)) at the same number with no fiber_close() in
 * between; that new file is never registered and the wait lasts until its
 * deadline.  Use fiber_close().
 *
 * Drained reads.  A request-response connection reads a request, answers
 * it and reads again; that read finds the socket empty, and its EAGAIN is
 * a system call that only says "wait".  A fiber read on a stream socket
 * that returns fewer bytes than it asked for has emptied the socket, and
 * every byte that arrives after that brings an edge; so it marks the entry
 * (FB_IOFD_DRAINED_R), and the next read waits first: it consumes a ready
 * bit if an edge came meanwhile (then reads), else parks.  The mark means
 * "empty at the short read, and no read event handed out since": the
 * poller clears it with every read event it takes, before it wakes a
 * waiter or sets a ready bit, and counts the event in the same word; the
 * reader loads the word before its system call and sets the mark with a
 * compare-and-swap against that load, so an event (or any other change of
 * the word) during the read leaves the entry unmarked, at the cost of one
 * system call later.  So a mark is never set where an earlier edge's bytes
 * could still be in the socket, whoever took that edge (a peek, a second
 * reader, a foreign thread).  Only a registered TCP socket is marked
 * (FB_IOFD_TCP, from SO_PROTOCOL once at registration): a short datagram
 * read leaves the next datagram queued, a terminal hands out a line at a
 * time, and an AF_UNIX stream read stops short at a message that carries
 * SCM_RIGHTS or new credentials, with bytes queued behind it.  A TCP read
 * stops short at the urgent mark too, and an end of stream or an error
 * that came with the bytes brings no later edge, and the read after the
 * bytes must see it: an event with EPOLLRDHUP, EPOLLHUP, EPOLLERR or
 * EPOLLPRI (urgent data) sets FB_IOFD_HUP (sticky until the entry is
 * forgotten), and an entry with it is never marked.  A stale mark
 * (a plain close(2) and a new file at the number) costs another fiber a
 * wait that registers the new file, which reports its state: the same as
 * a wait after EAGAIN.  For the fiber that registered the old file no
 * check would run ("Reuse of a number"), so the new files libfiber makes
 * (fiber_accept(), the TCP helpers) drop the mark of their number: a
 * server that serves connections one by one and close(2)s them does not
 * wait for bytes that came before the accept.  A wait-first that times
 * out still tries the read once, so bytes that are there are read whatever
 * the deadline.  The model is Tokio, which clears a socket's read
 * readiness after a short read.
 *
 * Epochs.  A registration belongs to one epoll set: the entry records the
 * poller epoch it was made in, and a new poller (after fiber_shutdown(), in
 * a fork child) has a new epoch, so every fd registers again there; a
 * child that inherited registered fds from its parent registers them in
 * its own set at its first wait.
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
 * Alternatives rejected: EPOLLONESHOT, re-armed for every wait (what this
 * file did first: one epoll_ctl per wait, and it could see a reuse at
 * every arm); a check of the registration at every park (the same cost);
 * a poller thread (a thread hop and a futex wake on every I/O wakeup); an
 * eventfd per worker (fds and epoll entries per worker for nothing: only
 * the poller sleeps in epoll).
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
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
	uint32_t epoch; /* of this epoll set, never 0; under init_lock */
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
	if (!++poller.epoch)
		poller.epoch = 1;
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
	/* The next poller has the next epoch: entries register again. */
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
		w->data = 0; /* no events: retry */
		w->result = result;
		fb_waiter_wake(w, 0);
		any = true;
	}
	return any;
}

/* The directions (FB_IOFD_READY_*) of epoll events @ev. */
static inline uint32_t dirs_of(uint32_t ev)
{
	return ((ev & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) ?
			FB_IOFD_READY_R :
			0) |
	       ((ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) ? FB_IOFD_READY_W : 0);
}

/* forget_locked - drop what @d knows of the file at its number: the
 * registration, readiness and the cached socket timeouts.  Context:
 * @d->lock held. */
static void forget_locked(struct fb_iofd *d)
{
	d->epoch = 0;
	fb_store_relaxed(&d->owner[0], 0);
	fb_store_relaxed(&d->owner[1], 0);
	fb_store_relaxed(&d->ready, 0);
	fb_store_relaxed(&d->timeo[0], 0);
	fb_store_relaxed(&d->timeo[1], 0);
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
	if (fb_load_acquire(&poller.up) && d->epoch == poller.epoch) {
		(void)epoll_ctl(poller.epfd, EPOLL_CTL_DEL, fd, NULL);
		FB_COUNT(fb_worker_self(), epoll_ctls);
	}
	forget_locked(d);
	fb_store_relaxed(&d->deadline[0], 0);
	fb_store_relaxed(&d->deadline[1], 0);
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

static int ctl(int op, int fd);

void fb_poll_set_deadline(int fd, struct fb_iofd *d, uint64_t rd, uint64_t wd)
{
	fb_spin_lock(&d->lock);
	/* The waiters retry their system call when woken below: if a plain
	 * close(2) took their file and the number is another file's now,
	 * they must fail instead ("Reuse of a number").  One epoll_ctl, and
	 * only while someone waits. */
	if (!fb_list_empty(&d->waiters) && fb_load_acquire(&poller.up) &&
	    d->epoch == poller.epoch && ctl(EPOLL_CTL_MOD, fd) == ENOENT) {
		wake_all_locked(d, NULL, EBADF);
		forget_locked(d);
	}
	fb_store_release(&d->deadline[FB_IOFD_R], rd + 1);
	fb_store_release(&d->deadline[FB_IOFD_W], wd + 1);
	wake_all_locked(d, NULL, 0);
	fb_spin_unlock(&d->lock);
}

/* ---- registration and dispatch ------------------------------------------- */

/* What an fd is registered for, once. */
#define FB_IOFD_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET)

static int ctl(int op, int fd)
{
	struct epoll_event ev = { .events = FB_IOFD_EVENTS,
				  .data.u64 = (uint64_t)fd };

	FB_COUNT(fb_worker_self(), epoll_ctls);
	return epoll_ctl(poller.epfd, op, fd, &ev) ? errno : 0;
}

/* is_tcp - the file at @fd is a TCP socket, where a read that returns
 * less than it asked for emptied it, but at the urgent mark ("Drained
 * reads" above). */
static bool is_tcp(int fd)
{
	int proto = 0;
	socklen_t len = sizeof(proto);

	return !getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) &&
	       proto == IPPROTO_TCP;
}

/*
 * register_locked - make sure the file now at @fd is registered before
 * @self, a waiter for directions @dirs, parks ("Registration" and "Reuse
 * of a number" above): register it if the entry is not, check the
 * registration if another fiber made it.  If the file the entry registered
 * is gone, fail the other waiters with EBADF and register the new one.
 * Return: 0 or the errno of epoll_ctl.  Context: a fiber, @d->lock held.
 */
static int register_locked(int fd, struct fb_iofd *d, struct fb_waiter *self,
			   uint32_t dirs)
{
	uint64_t me = fb_current()->id;
	int err;

	if (d->epoch == poller.epoch) {
		if ((!(dirs & FB_IOFD_READY_R) ||
		     fb_load_relaxed(&d->owner[FB_IOFD_R]) == me) &&
		    (!(dirs & FB_IOFD_READY_W) ||
		     fb_load_relaxed(&d->owner[FB_IOFD_W]) == me))
			return 0;
		err = ctl(EPOLL_CTL_MOD, fd);
		if (err && err != ENOENT)
			return err;
		if (err) {
			/* The registered file was closed under the entry:
			 * whoever waits is waiting on it. */
			wake_all_locked(d, self, EBADF);
			forget_locked(d);
		}
	}
	if (d->epoch != poller.epoch) {
		err = ctl(EPOLL_CTL_ADD, fd);
		/* EEXIST: registered in this set, the entry forgot it (a
		 * fiber_close() of a dup's number): take it over. */
		if (err == EEXIST)
			err = ctl(EPOLL_CTL_MOD, fd);
		if (err)
			return err;
		if (is_tcp(fd))
			atomic_fetch_or_explicit(&d->ready, FB_IOFD_TCP,
						 memory_order_relaxed);
		d->epoch = poller.epoch;
	}
	if (dirs & FB_IOFD_READY_R)
		fb_store_relaxed(&d->owner[FB_IOFD_R], me);
	if (dirs & FB_IOFD_READY_W)
		fb_store_relaxed(&d->owner[FB_IOFD_W], me);
	return 0;
}

/* note_read_event - the poller got read events @revents for @d: before
 * any waiter wakes or ready bit shows, end a drained mark, count the
 * event, and remember a hang-up or urgent data ("Drained reads"). */
static void note_read_event(struct fb_iofd *d, uint32_t revents)
{
	uint32_t hup =
		(revents & (EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLPRI)) ?
			FB_IOFD_HUP :
			0;
	uint32_t v = fb_load_relaxed(&d->ready);

	while (!atomic_compare_exchange_weak_explicit(
		&d->ready, &v,
		((v & ~FB_IOFD_DRAINED_R) + FB_IOFD_EVENT_ONE) | hup,
		memory_order_relaxed, memory_order_relaxed))
		;
}

/* dispatch_fd - the poller got @revents for @fd: wake the waiters of the
 * directions it reports; a direction nobody took stays ready. */
static void dispatch_fd(int fd, uint32_t revents, struct fb_worker *self)
{
	struct fb_iofd *d = iofd(fd, false);
	uint32_t dirs = dirs_of(revents), wd, served = 0;
	struct fb_list *n, *tmp;
	struct fb_waiter *w;

	if (!d)
		return;
	fb_spin_lock(&d->lock);
	if (dirs & FB_IOFD_READY_R)
		note_read_event(d, revents);
	fb_list_for_each_safe (n, tmp, &d->waiters) {
		w = fb_list_entry(n, struct fb_waiter, node);
		wd = dirs_of((uint32_t)w->data) & dirs;
		/* An error or hang-up wakes all, as poll(2) reports them
		 * whatever was asked. */
		if (!wd && !(revents & (EPOLLERR | EPOLLHUP)))
			continue;
		if (!fb_waiter_claim(w, FB_CLAIM_WOKEN))
			continue; /* timed out: it unlinks itself */
		fb_list_del(n);
		w->data = revents;
		w->result = 0;
		fb_waiter_wake(w, FB_WF_POLLER);
		served |= wd;
		FB_COUNT(self, io_events);
	}
	if (dirs & ~served)
		atomic_fetch_or_explicit(&d->ready, dirs & ~served,
					 memory_order_relaxed);
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

/* take_ready - consume the ready bits of @dirs in @d; whether one was
 * set. */
static inline bool take_ready(struct fb_iofd *d, uint32_t dirs)
{
	uint32_t got = fb_load_relaxed(&d->ready) & dirs;

	if (fb_likely(!got))
		return false;
	atomic_fetch_and_explicit(&d->ready, ~got, memory_order_relaxed);
	return true;
}

void fb_poll_new_file(int fd)
{
	struct fb_iofd *d = iofd(fd, false);

	if (!d)
		return;
	fb_spin_lock(&d->lock);
	/* Whoever waits now waits on a file a plain close(2) took away:
	 * woken, it would retry its call on this one. */
	if (!fb_list_empty(&d->waiters)) {
		wake_all_locked(d, NULL, EBADF);
		forget_locked(d);
	}
	/* Whoever waits next checks the registration, even the fiber that
	 * made the last one (a plain close(2) came in between). */
	fb_store_relaxed(&d->owner[0], 0);
	fb_store_relaxed(&d->owner[1], 0);
	atomic_fetch_and_explicit(&d->ready, ~FB_IOFD_DRAINED_R,
				  memory_order_relaxed);
	fb_spin_unlock(&d->lock);
}

/* Inside a call on @fd (fb_poll_enter), so fb_poll_close() waits for it:
 * it checks CLOSING before it queues and after it wakes. */
int fb_poll_wait_fd(int fd, uint32_t events, uint64_t deadline, int dldir,
		    uint32_t *revents)
{
	uint32_t dirs = dirs_of(events);
	struct fb_iofd *d;
	struct fb_waiter w;
	int err = poller_get();

	if (err)
		return err;
	d = iofd(fd, true);
	if (!d)
		return fd < 0 ? EBADF : ENOMEM;
	if (revents)
		*revents = 0;
	/* An edge came since: retry, without a system call, unless a close
	 * began (no retry then, as after a wake). */
	if (take_ready(d, dirs)) {
		if (fb_load_relaxed(&d->calls) & FB_IOFD_CLOSING)
			return EBADF;
		return 0;
	}
	fb_spin_lock(&d->lock);
	if (fb_load_relaxed(&d->calls) & FB_IOFD_CLOSING) {
		fb_spin_unlock(&d->lock);
		return EBADF;
	}
	if (take_ready(d, dirs)) {
		fb_spin_unlock(&d->lock);
		return 0;
	}
	/* fiber_fd_set_deadline() stores under the lock, then wakes the
	 * queued waiters: a deadline read before the lock may be stale,
	 * and this waiter, not queued yet, would not be woken for it. */
	if (dldir >= 0)
		deadline = FB_MIN(deadline, fb_poll_deadline(d, dldir));
	fb_waiter_prepare(&w, FB_WAIT_FD | FB_WAIT_CANCELLABLE,
			  (const void *)(intptr_t)fd);
	w.data = events;
	fb_list_add_tail(&w.node, &d->waiters);
	err = register_locked(fd, d, &w, dirs);
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
