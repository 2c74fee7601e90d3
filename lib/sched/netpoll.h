/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * netpoll.h - the fd entries of the poller (sched/netpoll.c) as the fd
 * calls (io/fd.c) use them: every fiber fd call runs inside the entry of
 * its fd, so that fiber_close() can wake its waiters and wait for it before
 * the number is given back to the kernel.  The protocol is argued in the
 * opening comment of sched/netpoll.c; fb_poll_wait_fd() is in sched/sched.h.
 */
#ifndef FB_SCHED_POLL_H
#define FB_SCHED_POLL_H

#include <stdint.h>

#include "base/atomic.h"
#include "base/common.h"
#include "base/list.h"

/* fd table: FB_IOFD_CHUNK entries per chunk, allocated on first use. */
#define FB_IOFD_CHUNK 1024
#define FB_IOFD_CHUNKS 1024 /* fds below 1M; picked, like a large ulimit */

/* The call word of an entry (struct fb_iofd.calls). */
#define FB_IOFD_CALLS 0xffffffffull /* calls in progress */
#define FB_IOFD_CLOSING (1ull << 32)
#define FB_IOFD_GEN_SHIFT 33 /* generation: fiber_close() calls on the fd */

/* Directions of an fd: indexes of the per-direction fields below, and
 * bits of @ready. */
enum { FB_IOFD_R, FB_IOFD_W };
#define FB_IOFD_READY_R (1u << FB_IOFD_R)
#define FB_IOFD_READY_W (1u << FB_IOFD_W)
/* More of @ready, about the file the entry registered ("Drained reads" in
 * sched/netpoll.c): it is a TCP socket (set at registration); the poller
 * saw a hang-up, an error, the peer's shutdown or urgent data (sticky); a
 * fiber read emptied the stream and no event came since; and, from bit 8,
 * a count of the read events the poller handed out (it wraps). */
#define FB_IOFD_TCP (1u << 2)
#define FB_IOFD_HUP (1u << 3)
#define FB_IOFD_DRAINED_R (1u << 4)
#define FB_IOFD_EVENT_ONE (1u << 8)

/* The poller's state of one fd number.  Every fd call writes @calls; the
 * entry is cache-line aligned so that calls on neighbouring fds from
 * different workers do not share a line. */
struct fb_iofd {
	struct fb_spinlock lock;
	struct fb_list waiters; /* struct fb_waiter, w.data = events; @lock */
	_Atomic uint64_t calls; /* FB_IOFD_*: read-modify-writes only,
				   acquire on enter, release on leave */
	/* FB_IOFD_READY_*: readiness the poller saw that no waiter took;
	 * set under @lock, cleared by the wait that consumes it.  Also
	 * FB_IOFD_TCP and FB_IOFD_HUP (set under @lock) and
	 * FB_IOFD_DRAINED_R (set and cleared by fd calls). */
	_Atomic uint32_t ready;
	uint32_t epoch; /* poller epoch of the registration, 0: none; @lock */
	/* Per direction, the id of the fiber that registered or checked the
	 * registration last; written under @lock. */
	_Atomic uint64_t owner[2];
	/* Per direction, fiber_fd_set_deadline()'s deadline plus one (0:
	 * none, so that a zeroed entry has none). */
	_Atomic uint64_t deadline[2];
	/* Per direction, SO_RCVTIMEO / SO_SNDTIMEO in nanoseconds plus one
	 * (1: none), read at the first wait that needs it; 0: not read.  Only
	 * the @owner of the direction uses it: another fiber may be looking
	 * at a new file under the number (sched/netpoll.c, "Reuse"). */
	_Atomic uint64_t timeo[2];
} fb_cacheline_aligned;

/* The chunks; release-stored once each (under the poller's init lock),
 * freed at shutdown. */
extern struct fb_iofd *_Atomic fb_iofd_chunks[FB_IOFD_CHUNKS];

/* fb_poll_enter_slow - fb_poll_enter() when the chunk of @fd is missing
 * or the CAS failed: allocate, retry.  Context and Return: as
 * fb_poll_enter(). */
int fb_poll_enter_slow(int fd, struct fb_iofd **d, uint32_t *gen);

/*
 * fb_poll_enter - start a call on @fd: count it in progress in the entry
 * of @fd, which is stored in *@d, with the generation it started in (the
 * number of fiber_close() calls on @fd so far) in *@gen.  Every fd call
 * passes here: a load and a CAS, the rest is out of line.
 * Context: any thread; never switches.
 * Return: 0; EBADF (@fd < 0, or a fiber_close() of @fd is running);
 * ENOMEM (no memory for the fd table, or @fd beyond it).
 */
static inline int fb_poll_enter(int fd, struct fb_iofd **d, uint32_t *gen)
{
	unsigned int i = (unsigned int)fd / FB_IOFD_CHUNK;
	struct fb_iofd *c, *e;
	uint64_t v;

	if (fb_likely(i < FB_IOFD_CHUNKS) &&
	    (c = fb_load_acquire(&fb_iofd_chunks[i]))) {
		e = &c[(unsigned int)fd % FB_IOFD_CHUNK];
		v = fb_load_relaxed(&e->calls);
		if (fb_likely(!(v & FB_IOFD_CLOSING)) &&
		    atomic_compare_exchange_weak_explicit(
			    &e->calls, &v, v + 1, memory_order_acquire,
			    memory_order_relaxed)) {
			*d = e;
			*gen = (uint32_t)(v >> FB_IOFD_GEN_SHIFT);
			return 0;
		}
	}
	return fb_poll_enter_slow(fd, d, gen);
}

/* fb_poll_leave - end the call that fb_poll_enter() started on @d.
 * Context: any thread; never switches. */
static inline void fb_poll_leave(struct fb_iofd *d)
{
	atomic_fetch_sub_explicit(&d->calls, 1, memory_order_release);
}

/*
 * fb_poll_read_begin - before a fiber's read system call on @d: the state
 * fb_poll_note_short_read() compares against.
 */
static inline uint32_t fb_poll_read_begin(struct fb_iofd *d)
{
	return fb_load_relaxed(&d->ready);
}

/*
 * fb_poll_note_short_read - the read that began at @before returned fewer
 * bytes than it asked for: if @d is a TCP socket registered with the
 * poller, no hang-up was seen, and nothing changed the entry since
 * @before (no event, no ready bit taken), the socket is empty now and any
 * byte that comes later brings an event, so the next read may wait first
 * ("Drained reads" in sched/netpoll.c).  A change in between leaves the
 * entry unmarked, which costs the next read a system call, nothing more.
 * Context: a fiber, inside a call on @d; never switches.
 */
static inline void fb_poll_note_short_read(struct fb_iofd *d, uint32_t before)
{
	if ((before & (FB_IOFD_TCP | FB_IOFD_HUP | FB_IOFD_DRAINED_R)) ==
	    FB_IOFD_TCP)
		(void)atomic_compare_exchange_strong_explicit(
			&d->ready, &before, before | FB_IOFD_DRAINED_R,
			memory_order_relaxed, memory_order_relaxed);
}

/* fb_poll_take_drained - whether the last read on @d drained it (see
 * above), clearing the mark: the caller then waits for readiness before
 * its system call.  Context: a fiber, inside a call on @d. */
static inline bool fb_poll_take_drained(struct fb_iofd *d)
{
	if (fb_likely(!(fb_load_relaxed(&d->ready) & FB_IOFD_DRAINED_R)))
		return false;
	atomic_fetch_and_explicit(&d->ready, ~FB_IOFD_DRAINED_R,
				  memory_order_relaxed);
	return true;
}

/*
 * fb_poll_reenter - after fb_poll_leave(), count the call in progress on
 * @d again, if no fiber_close() ran or runs since it entered in @gen.  A
 * foreign thread leaves the entry while it blocks in poll(2), so that
 * fiber_close() does not wait for it.
 * Context: any thread; never switches.  Return: 0; EBADF (closed).
 */
int fb_poll_reenter(struct fb_iofd *d, uint32_t gen);
/*
 * fb_poll_close - the poller's half of fiber_close(@fd): wake every call
 * waiting on @fd with EBADF, drop its epoll registration and wait until no
 * call is in progress on it; the caller then closes @fd.  Calls that start
 * meanwhile fail with EBADF.
 * Context: any thread, outside a call on @fd; a fiber yields and sleeps
 * while it waits, a thread sched_yields and sleeps.
 * Return: 0; EBADF (another fiber_close() of @fd is running).
 */
int fb_poll_close(int fd);

/*
 * fb_poll_set_deadline - store fiber_fd_set_deadline()'s deadlines @rd and
 * @wd in @d, the entry of @fd (FB_NO_DEADLINE: none) and wake every fiber
 * waiting on @d with result 0, so that it retries and waits again under
 * the new ones; or with EBADF if the file they wait on is no longer the
 * one at @fd (a plain close(2) and a reuse of the number).
 * Context: any thread, inside a call on @d; never switches.
 */
void fb_poll_set_deadline(int fd, struct fb_iofd *d, uint64_t rd, uint64_t wd);

/* fb_poll_deadline - fiber_fd_set_deadline()'s deadline of direction
 * @dir (FB_IOFD_R, FB_IOFD_W) of @d, FB_NO_DEADLINE if none.
 * Context: any thread, inside a call on @d. */
static inline uint64_t fb_poll_deadline(struct fb_iofd *d, int dir)
{
	return fb_load_acquire(&d->deadline[dir]) - 1;
}

/*
 * The poller flag: at most one worker waits in epoll at a time (the
 * opening comment of netpoll.c).  fb_netpoll_take - take it; false if
 * another worker holds it (or no poller exists yet).  fb_netpoll_release
 * - give it back.  fb_netpoll_wait - with the flag held, wait in epoll
 * for at most @rel (NULL: no limit; zero: just look) and wake the waiters
 * of the fds that are ready; returns how many events came.
 * Context: worker @w (sleep.c).
 */
struct fb_worker;
struct timespec;
bool fb_netpoll_take(void);
void fb_netpoll_release(void);
int fb_netpoll_wait(struct fb_worker *w, const struct timespec *rel);

#endif /* FB_SCHED_POLL_H */
