/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pipe.c - fiber_pipe_t, in-process byte streams with the semantics
 * of a POSIX pipe.
 *
 * A byte ring of @capacity bytes, a queue of blocked readers, a queue of
 * blocked writers and one flag per end, under one spinlock.
 *
 * The hot path is a ping-pong of small messages between two fibers, so a
 * call takes the spinlock once and wakes at most one waiter there:
 *   - a reader that finds the ring empty queues with a request (buffer,
 *     length, bytes done) in w.data; a writer that finds queued readers
 *     copies straight into their buffers and wakes them, so a woken reader
 *     returns its count without retaking the lock (a request of a few
 *     bytes carries its own buffer, which the reader copies out: the
 *     writer then writes no other line of the reader's);
 *   - a reader that finds bytes copies them out of the ring and, if it
 *     made room while a writer is queued, wakes that writer.
 * Readers queue only while the ring is empty, so a writer always serves
 * them before it fills the ring, and the stream keeps its order.
 *
 * A writer that runs out of room queues and, when woken (by a reader that
 * made room, or by a close), retakes the lock and goes on from where it
 * stopped; write returns when every byte is in, so concurrent writers may
 * interleave (there is no PIPE_BUF atomicity).  A writer that finishes
 * with room left wakes the next queued writer, so a wake is never wasted.
 *
 * Wake flags: a writer wakes readers with FB_WF_SYNC.  It hands them the
 * data and, in the pipe pattern, is about to block itself (on the rest of
 * its write, or on reading the answer), which is why Linux makes pipe
 * wakeups synchronous too.  A reader wakes a writer without it: it keeps
 * running to consume what it read.  Every wake of a reader or a writer
 * carries FB_WF_GROUP: the two share the pipe's lines, and may form a
 * wake group (doc/scheduler.md 1.10).
 *
 * Closing the write end gives EOF (0 bytes) to readers once the ring is
 * drained and stops writes in progress with EBADF; closing the read end
 * discards the ring and makes writes fail with EPIPE.  Either close wakes
 * every waiter, with its outcome, so that none of them touches the pipe
 * again.
 *
 * Lifetime.  A writer woken for room is the one caller that comes back to
 * the pipe after its wake.  The reader that wakes it counts it in
 * @retrying, and the writer takes itself off again when it has the lock,
 * so destroy says EBUSY while a woken writer is on its way back, as it does
 * while anyone waits.  "Close, destroy, free" is therefore safe as soon as
 * destroy returns 0.
 *
 * Pages.  The ring is ordinary heap memory, backed by pages only when
 * first written, and a page fault taken with the spinlock held stalls every
 * other caller of the pipe behind it (on a paravirtualised guest a fault
 * costs microseconds, and the spinning callers end up in sched_yield()).
 * So a writer about to write past the part of the ring known to be backed
 * (@populated; bytes are written in order from the start until the ring
 * first wraps, so that part is a prefix) backs the next quarter of the ring
 * (at most FB_PIPE_POPULATE_MAX bytes past what the write needs)
 * first, with the lock released: one madvise(MADV_POPULATE_WRITE), which
 * faults pages in without changing what is in them, so a concurrent writer
 * loses nothing.  Meanwhile the writer is counted in @retrying, as a
 * woken one is.  A pipe that is never filled never gets its pages; a
 * kernel without MADV_POPULATE_WRITE (before 5.14) takes the faults under
 * the lock, as before.
 */
#include "sync/sync.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Default ring size, that of a Linux pipe (16 pages). */
#define FB_PIPE_DEFAULT_CAPACITY (64 * 1024)
/* The most a writer backs ahead of what it writes: a pipe of a gigabyte
 * that carries a few bytes must not cost a quarter of it in pages. */
#define FB_PIPE_POPULATE_MAX (256 * 1024)

struct fb_pipe {
	struct fb_spinlock lock; /* guards everything but capacity */
	bool read_closed;	 /* @lock */
	bool write_closed;	 /* @lock */
	size_t capacity;	 /* ring bytes; constant */
	size_t head;		 /* offset of the oldest byte; @lock */
	size_t count;		 /* bytes in the ring; @lock */
	struct fb_list readers;	 /* w.data = struct read_req *; @lock */
	struct fb_list writers;	 /* queued writers; @lock */
	unsigned int retrying;	 /* writers woken for room, or backing
				    pages, not back; @lock */
	size_t populated;	 /* ring bytes from its start known to be
				    backed by pages; @lock */
	unsigned char ring[];	 /* @capacity bytes */
};

/* A queued reader's request, filled in by the writer that wakes it.  A
 * request of at most FB_PIPE_SMALL bytes is served into @small, next to
 * the fields the writer writes anyway, and the woken reader copies it
 * out: the writer then touches one cache line of the reader's, not two,
 * which matters when the reader waits on another worker. */
#define FB_PIPE_SMALL 16
struct read_req {
	unsigned char *buf; /* the reader's buffer, or @small */
	size_t len;	    /* > 0 */
	size_t done;	    /* bytes copied into @buf */
	unsigned char small[FB_PIPE_SMALL];
};

/* Sixteen bytes, which the compiler moves with one vector load and store
 * (SSE2 is part of x86-64; elsewhere what the target has). */
typedef unsigned char fb_v16 __attribute__((vector_size(16)));

static inline fb_v16 load16(const unsigned char *p)
{
	fb_v16 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void store16(unsigned char *p, fb_v16 v)
{
	memcpy(p, &v, sizeof(v));
}

/*
 * copy_b16 - copy 16 < @n <= 128 bytes: @k (1, 2 or 4) 16-byte blocks
 * from the start of @src and @k from its end, which overlap in the
 * middle.  Each block is a named value, never an array: an array of
 * them went through the stack, with a loop and an overlap test, and
 * cost three times the instructions.  Every load comes before the
 * stores, so that only the destination overlaps itself.
 */
static fb_always_inline void copy_b16(unsigned char *dst,
				      const unsigned char *src, size_t n, int k)
{
	const unsigned char *se = src + n - 16 * k;
	unsigned char *de = dst + n - 16 * k;
	fb_v16 h0, h1, h2, h3, t0, t1, t2, t3;

	h0 = load16(src);
	t0 = load16(se);
	if (k >= 2) {
		h1 = load16(src + 16);
		t1 = load16(se + 16);
	}
	if (k == 4) {
		h2 = load16(src + 32);
		h3 = load16(src + 48);
		t2 = load16(se + 32);
		t3 = load16(se + 48);
	}
	store16(dst, h0);
	store16(de, t0);
	if (k >= 2) {
		store16(dst + 16, h1);
		store16(de + 16, t1);
	}
	if (k == 4) {
		store16(dst + 32, h2);
		store16(dst + 48, h3);
		store16(de + 32, t2);
		store16(de + 48, t3);
	}
}

/* copy_short - copy() of 1 to 16 bytes, never a call: overlapping loads
 * and stores of the two widest words that fit. */
static inline void copy_short(unsigned char *dst, const unsigned char *src,
			      size_t n)
{
	if (n >= 8) {
		uint64_t a, b;

		memcpy(&a, src, 8);
		memcpy(&b, src + n - 8, 8);
		memcpy(dst, &a, 8);
		memcpy(dst + n - 8, &b, 8);
	} else if (n >= 4) {
		uint32_t a, b;

		memcpy(&a, src, 4);
		memcpy(&b, src + n - 4, 4);
		memcpy(dst, &a, 4);
		memcpy(dst + n - 4, &b, 4);
	} else {
		for (size_t i = 0; i < n; i++)
			dst[i] = src[i];
	}
}

/* The longest copy that copy_inline() does (copy_b16()'s). */
#define FB_PIPE_INLINE_COPY 128

/* copy_inline - copy() of 1 to FB_PIPE_INLINE_COPY bytes, never a call, so
 * that the fast paths that use it need no stack frame. */
static fb_always_inline void copy_inline(unsigned char *dst,
					 const unsigned char *src, size_t n)
{
	if (n <= 16)
		copy_short(dst, src, n);
	else if (n <= 32)
		copy_b16(dst, src, n, 1);
	else if (n <= 64)
		copy_b16(dst, src, n, 2);
	else
		copy_b16(dst, src, n, 4);
}

/* copy - memcpy() of @n bytes between buffers that do not overlap, with
 * the short ones inline: a pipe's messages are often a few bytes (a token,
 * a length) or a few lines (hackbench's 100), and overlapping loads and
 * stores from both ends are cheaper than the call; an empty copy costs a
 * test. */
static inline void copy(unsigned char *dst, const unsigned char *src, size_t n)
{
	if (n - 1 < FB_PIPE_INLINE_COPY)
		copy_inline(dst, src, n);
	else if (n)
		memcpy(dst, src, n);
}

/* Copy up to @len bytes from @src to the tail of the ring; returns how
 * many fitted.  @p->lock held. */
static fb_always_inline size_t ring_put(struct fb_pipe *p,
					const unsigned char *src, size_t len)
{
	size_t n = FB_MIN(len, p->capacity - p->count);
	size_t tail = p->head + p->count;
	size_t first;

	if (tail >= p->capacity) /* head, count < capacity: no division */
		tail -= p->capacity;
	first = FB_MIN(n, p->capacity - tail);

	copy(p->ring + tail, src, first);
	if (fb_unlikely(first < n)) /* wrapped */
		copy(p->ring, src + first, n - first);
	p->count += n;
	return n;
}

/* ring_unbacked - would ring_put() of @len bytes write past the backed
 * prefix of the ring?  A write that wraps filled the end of the ring
 * before.  @p->lock held. */
static inline bool ring_unbacked(const struct fb_pipe *p, size_t len)
{
	size_t tail = p->head + p->count;
	size_t end;

	if (tail >= p->capacity)
		tail -= p->capacity;
	end = tail + FB_MIN(len, p->capacity - p->count);
	return FB_MIN(end, p->capacity) > p->populated;
}

/* page_size - the system's, read once. */
static size_t page_size(void)
{
	static _Atomic size_t ps;
	size_t v = fb_load_relaxed(&ps);

	if (!v) {
		long r = sysconf(_SC_PAGESIZE);

		v = r > 0 ? (size_t)r : 4096;
		fb_store_relaxed(&ps, v);
	}
	return v;
}

/* backed_prefix - how many of @p's ring bytes share a page with its
 * header, which the creation wrote. */
static size_t backed_prefix(const struct fb_pipe *p)
{
	uintptr_t ring = (uintptr_t)p->ring, ps = page_size();
	uintptr_t page_end = ((uintptr_t)p + ps) & ~(ps - 1);

	return page_end > ring ? FB_MIN(p->capacity, page_end - ring) : 0;
}

/*
 * populate - back the ring bytes that ring_put() of @len bytes is about to
 * write, and the rest of the next quarter of the ring (at most
 * FB_PIPE_POPULATE_MAX), with pages, outside
 * the lock (the opening comment).  @p->lock held; released and taken
 * again, so the caller must look at the pipe afresh.
 */
static fb_noinline void populate(struct fb_pipe *p, size_t len)
{
	uintptr_t ps = page_size(), ring = (uintptr_t)p->ring;
	size_t tail = p->head + p->count, goal;
	uintptr_t from, to;
	int err;

	if (tail >= p->capacity)
		tail -= p->capacity;
	goal = FB_MIN(tail + FB_MIN(len, p->capacity - p->count), p->capacity);
	goal = FB_MIN(FB_MAX(goal, p->populated + FB_MIN(p->capacity / 4,
							 FB_PIPE_POPULATE_MAX)),
		      p->capacity);
	/* Whole pages, each holding at least one byte of the pipe. */
	from = (ring + p->populated) & ~(ps - 1);
	to = (ring + goal + ps - 1) & ~(ps - 1);
	p->retrying++;
	fb_spin_unlock(&p->lock);
	err = madvise((void *)from, to - from, MADV_POPULATE_WRITE);
	FB_COUNT(fb_worker_self(), pipe_populates);
	fb_spin_lock(&p->lock);
	p->retrying--;
	if (err) /* no such advice here: fault under the lock, as before */
		p->populated = p->capacity;
	else
		p->populated =
			FB_MAX(p->populated, FB_MIN(to - ring, p->capacity));
}

/* Copy up to @len bytes from the head of the ring to @dst; returns how
 * many.  @p->lock held. */
static size_t ring_get(struct fb_pipe *p, unsigned char *dst, size_t len)
{
	size_t n = FB_MIN(len, p->count);
	size_t first = FB_MIN(n, p->capacity - p->head);

	copy(dst, p->ring + p->head, first);
	if (fb_unlikely(first < n)) /* wrapped */
		copy(dst + first, p->ring, n - first);
	p->head += n;
	if (p->head >= p->capacity)
		p->head -= p->capacity;
	p->count -= n;
	return n;
}

/* Copy up to @len bytes from @src into claimed reader @w's buffer and
 * wake it; returns how many it took.  @p->lock held. */
static inline size_t feed_reader(struct fb_waiter *w, const unsigned char *src,
				 size_t len)
{
	struct read_req *rq = (struct read_req *)w->data;
	size_t k = FB_MIN(rq->len, len);

	copy(rq->buf, src, k);
	rq->done = k;
	w->result = 0;
	fb_waiter_wake(w, FB_WF_SYNC | FB_WF_GROUP);
	return k;
}

/* Copy from @src straight into queued readers and wake them; returns the
 * bytes they took.  @p->lock held. */
static size_t feed_readers(struct fb_pipe *p, const unsigned char *src,
			   size_t len)
{
	struct fb_waiter *w;
	size_t done = 0;

	while (done < len && (w = fb_waitq_pop(&p->readers)))
		done += feed_reader(w, src + done, len - done);
	return done;
}

/* Wake the first queued writer to go on with its write: it will retake
 * the lock, so it is counted until it does.  Inline, and only a load
 * when no writer waits, which is every call of a ping-pong.  @p->lock
 * held. */
static inline void wake_writer(struct fb_pipe *p)
{
	if (!fb_list_empty(&p->writers) &&
	    fb_waitq_wake_one(&p->writers, 0, FB_WF_GROUP))
		p->retrying++;
}

/*
 * fiber_pipe_create - make a pipe that buffers @capacity bytes (0: 64 KiB)
 * and store it in *@pipe; both ends are open.
 * Context: any thread.
 * Return: 0; EINVAL for a NULL @pipe or a @capacity too large to address;
 * ENOMEM.
 */
int fiber_pipe_create(fiber_pipe_t **pipe, size_t capacity)
{
	struct fb_pipe *p;
	size_t bytes;

	if (!pipe)
		return EINVAL;
	if (capacity == 0)
		capacity = FB_PIPE_DEFAULT_CAPACITY;
	if (__builtin_add_overflow(capacity, sizeof(*p), &bytes))
		return EINVAL;
	p = fb_malloc(bytes);
	if (!p)
		return ENOMEM;
	memset(p, 0, sizeof(*p));
	p->capacity = capacity;
	p->populated = backed_prefix(p);
	fb_list_init(&p->readers);
	fb_list_init(&p->writers);
	*pipe = p;
	return 0;
}

/*
 * fiber_pipe_destroy - free @pipe, open or closed, and the bytes left in
 * it.  Context: any thread; nobody may use @pipe afterwards.
 * Return: 0; EINVAL for NULL; EBUSY if callers wait on it or a woken
 * writer has not come back yet (nothing freed).
 */
int fiber_pipe_destroy(fiber_pipe_t *pipe)
{
	struct fb_pipe *p = pipe;
	bool busy;

	if (!p)
		return EINVAL;
	fb_spin_lock(&p->lock);
	busy = p->retrying || fb_waitq_busy(&p->readers) ||
	       fb_waitq_busy(&p->writers);
	fb_spin_unlock(&p->lock);
	if (busy)
		return EBUSY;
	fb_free(p);
	return 0;
}

/* read_ring_all - read_ring()'s general case: any length, a copy that
 * wraps, a writer to wake.  @p->lock held; released here. */
static fb_noinline int read_ring_all(struct fb_pipe *p, void *buf, size_t len,
				     size_t *done)
{
	size_t n = ring_get(p, buf, len);

	if (n)
		wake_writer(p);
	fb_spin_unlock(&p->lock);
	*done = n;
	return 0;
}

/*
 * read_ring - the end of a read that finds bytes (or end of stream, or
 * asks for none): take them and wake a writer waiting for the room.
 * A fan-in's read (hackbench's: a message of up to 128 bytes out of a
 * ring that holds more, nobody to wake) runs here without a stack frame
 * or a call; the rest is read_ring_all()'s, as a tail call.  @p->lock
 * held; released here.
 */
static fb_noinline int read_ring(struct fb_pipe *p, void *buf, size_t len,
				 size_t *done)
{
	size_t n = FB_MIN(len, p->count), head = p->head;

	if (fb_unlikely(n - 1 >= FB_PIPE_INLINE_COPY ||
			n > p->capacity - head || !fb_list_empty(&p->writers)))
		return read_ring_all(p, buf, len, done);
	copy_inline(buf, p->ring + head, n);
	head += n;
	if (head == p->capacity)
		head = 0;
	p->head = head;
	p->count -= n;
	fb_spin_unlock(&p->lock);
	*done = n;
	return 0;
}

/* read_wait - the end of a read that finds the ring empty: queue with a
 * request that a writer fills, and wait.  @p->lock held; released here. */
static fb_noinline int read_wait(struct fb_pipe *p, void *buf, size_t len,
				 size_t *done, uint64_t deadline)
{
	struct read_req rq; /* not zeroed: @small is written before read */
	struct fb_waiter w;
	int err;

	rq.buf = len <= FB_PIPE_SMALL ? rq.small : buf;
	rq.len = len;
	rq.done = 0;
	fb_waiter_prepare(&w, FB_WAIT_PIPE_READ | FB_WAIT_CANCELLABLE, p);
	w.data = (uintptr_t)&rq;
	fb_list_add_tail_init(&w.node, &p->readers);
	err = fb_waiter_wait_timed(&w, &p->lock, deadline);
	if (len <= FB_PIPE_SMALL && rq.done)
		copy_short(buf, rq.small, rq.done);
	*done = rq.done;
	return err;
}

/* read_locked - a read with @p->lock held: released here. */
static fb_always_inline int read_locked(struct fb_pipe *p, void *buf,
					size_t len, size_t *done,
					uint64_t deadline)
{
	if (fb_unlikely(p->read_closed)) {
		fb_spin_unlock(&p->lock);
		*done = 0;
		return EBADF;
	}
	if (p->count || len == 0 || p->write_closed)
		return read_ring(p, buf, len, done);
	return read_wait(p, buf, len, done, deadline);
}

/* read_slow - a read that must pass a pending cancellation's check or
 * wait for the lock. */
static fb_noinline int read_slow(struct fb_pipe *p, void *buf, size_t len,
				 size_t *done, uint64_t deadline)
{
	int err = fb_cancel_point();

	if (err) {
		*done = 0;
		return err;
	}
	fb_spin_lock(&p->lock);
	return read_locked(p, buf, len, done, deadline);
}

/*
 * fiber_pipe_read - read up to @len bytes of @pipe into @buf, waiting
 * until at least one byte is there or the write end is closed, and store
 * the count in *@done (0 at end of stream, or when @len is 0).
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; EINVAL for NULL; EBADF if the read end is closed, before or
 * while the caller waits (*@done is then 0).
 * The entry takes the lock at the first try (no cancellation pending)
 * and decides; the rest runs out of line, as tail calls, so that the
 * entry needs no stack frame.
 */
static fb_always_inline int read_until(fiber_pipe_t *pipe, void *buf,
				       size_t len, size_t *done,
				       uint64_t deadline)
{
	struct fb_pipe *p = pipe;

	if (fb_unlikely(!p || !done || (!buf && len)))
		return EINVAL;
	if (fb_unlikely(fb_load_relaxed(&fb_nr_cancels_pending) ||
			!fb_spin_lock_once(&p->lock)))
		return read_slow(p, buf, len, done, deadline);
	return read_locked(p, buf, len, done, deadline);
}

int fiber_pipe_read(fiber_pipe_t *pipe, void *buf, size_t len, size_t *done)
{
	return read_until(pipe, buf, len, done, FB_NO_DEADLINE);
}

/*
 * fiber_pipe_timedread - fiber_pipe_read() that gives up at @abstime
 * (CLOCK_MONOTONIC) if no byte came.
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ETIMEDOUT (*@done is 0); EINVAL for NULL or a bad @abstime;
 * EBADF if the read end is closed.
 */
int fiber_pipe_timedread(fiber_pipe_t *pipe, void *buf, size_t len,
			 size_t *done, const struct timespec *abstime)
{
	if (!fb_timespec_valid(abstime))
		return EINVAL;
	return read_until(pipe, buf, len, done,
			  fb_deadline_from_timespec(abstime));
}

/*
 * fiber_pipe_read_until - fiber_pipe_read() that gives up when fiber_now()
 * reaches @deadline (CLOCK_MONOTONIC ns; FIBER_NO_DEADLINE: never) if no
 * byte came; bytes that are there are read whatever the deadline.
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ETIMEDOUT (*@done is 0); EINVAL for NULL; EBADF if the read
 * end is closed.
 */
int fiber_pipe_read_until(fiber_pipe_t *pipe, void *buf, size_t len,
			  size_t *done, uint64_t deadline)
{
	return read_until(pipe, buf, len, done, deadline);
}

/* write_locked - a write with @p->lock held, released here: serve the
 * queued readers, then the ring, waiting for room as needed. */
static fb_noinline int write_locked(struct fb_pipe *p, const unsigned char *src,
				    size_t len, size_t *done, uint64_t deadline)
{
	struct fb_waiter w;
	size_t n = 0;
	int err = 0;

	for (;;) {
		if (fb_unlikely(p->write_closed || p->read_closed)) {
			err = p->write_closed ? EBADF : EPIPE;
			break;
		}
		if (!fb_list_empty(&p->readers))
			n += feed_readers(p, src + n, len - n);
		if (n < len) {
			if (fb_unlikely(p->populated < p->capacity) &&
			    ring_unbacked(p, len - n)) {
				populate(p, len - n);
				continue;
			}
			n += ring_put(p, src + n, len - n);
		}
		if (n == len) {
			if (p->count < p->capacity)
				wake_writer(p);
			break;
		}
		fb_waiter_prepare(&w, FB_WAIT_PIPE_WRITE | FB_WAIT_CANCELLABLE,
				  p);
		fb_list_add_tail(&w.node, &p->writers);
		err = fb_waiter_wait_timed(&w, &p->lock, deadline);
		if (err) { /* timed out, cancelled or closed: not counted */
			*done = n;
			return err;
		}
		fb_spin_lock(&p->lock);
		p->retrying--;
	}
	fb_spin_unlock(&p->lock);
	*done = n;
	return err;
}

/* write_ring_all - write_ring()'s copy when it is long or wraps.
 * @p->lock held; released here. */
static fb_noinline int write_ring_all(struct fb_pipe *p,
				      const unsigned char *src, size_t len,
				      size_t *done)
{
	ring_put(p, src, len);
	fb_spin_unlock(&p->lock);
	*done = len;
	return 0;
}

/*
 * write_ring - a write with @p->lock held, released here, that no queued
 * reader takes: the fan-out's case, a message into a ring with room.
 * Straight into the ring when it fits whole and backed, with neither a
 * reader nor a writer queued (so nobody is to be woken, and no writer
 * waits for the room this takes); anything else is write_locked()'s.
 * Out of line from write_until(), and without write_locked()'s waiter
 * on its frame; a copy of up to 128 bytes that does not wrap needs no
 * frame at all (the rest goes on in write_ring_all(), a tail call).
 */
static fb_noinline int write_ring(struct fb_pipe *p, const unsigned char *src,
				  size_t len, size_t *done, uint64_t deadline)
{
	size_t tail;

	if (fb_unlikely(p->write_closed || p->read_closed ||
			!fb_list_empty(&p->readers) ||
			!fb_list_empty(&p->writers) ||
			len > p->capacity - p->count ||
			(p->populated < p->capacity && ring_unbacked(p, len))))
		return write_locked(p, src, len, done, deadline);
	tail = p->head + p->count;
	if (tail >= p->capacity)
		tail -= p->capacity;
	if (fb_unlikely(len - 1 >= FB_PIPE_INLINE_COPY ||
			len > p->capacity - tail))
		return write_ring_all(p, src, len, done);
	copy_inline(p->ring + tail, src, len);
	p->count += len;
	fb_spin_unlock(&p->lock);
	*done = len;
	return 0;
}

/* write_slow - a write that must pass a pending cancellation's check or
 * wait for the lock. */
static fb_noinline int write_slow(struct fb_pipe *p, const unsigned char *src,
				  size_t len, size_t *done, uint64_t deadline)
{
	int err = fb_cancel_point();

	if (err) {
		*done = 0;
		return err;
	}
	fb_spin_lock(&p->lock);
	return write_locked(p, src, len, done, deadline);
}

/*
 * fiber_pipe_write - write the @len bytes at @buf into @pipe, waiting for
 * room as needed, and store in *@done how many got in (all of them on
 * success).
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; EINVAL for NULL; EPIPE if the read end is closed, before or
 * while the caller waits; EBADF if the write end is.
 * The ping-pong's case runs here without a stack frame: the lock taken at
 * the first try (no cancellation pending), one queued reader that takes
 * a short write whole (queued readers mean an empty ring, so there is
 * room), no writer waiting; the reader is woken after the unlock
 * (fb_waiter_wake_ret).  Everything else goes on in write_ring(),
 * write_locked() or write_slow(), as tail calls.
 */
static fb_always_inline int write_until(fiber_pipe_t *pipe, const void *buf,
					size_t len, size_t *done,
					uint64_t deadline)
{
	struct fb_pipe *p = pipe;
	const unsigned char *src = buf;
	struct fb_waiter *rw;
	struct fb_fiber *f;

	if (fb_unlikely(!p || !done || (!buf && len)))
		return EINVAL;
	if (fb_unlikely(fb_load_relaxed(&fb_nr_cancels_pending) ||
			!fb_spin_lock_once(&p->lock)))
		return write_slow(p, src, len, done, deadline);
	if (fb_likely(!p->write_closed && !p->read_closed && len - 1 < 16 &&
		      !fb_list_empty_init(&p->readers) &&
		      fb_list_empty_init(&p->writers))) {
		struct read_req *rq;

		rw = fb_container_of(p->readers.next, struct fb_waiter, node);
		rq = (struct read_req *)rw->data;
		f = rw->fiber;
		/* A fiber of this runtime (fb_waiter_claim()'s look, made
		 * here once for the claim and the wake); a thread's read
		 * takes the long way. */
		if (fb_likely(rq->len >= len && f &&
			      f->epoch == fb_load_relaxed(&fb_rt_epoch) &&
			      fb_waiter_claim_cas(rw, FB_CLAIM_WOKEN))) {
			fb_list_del(&rw->node);
			copy_short(rq->buf, src, len);
			rq->done = len;
			rw->result = 0;
			fb_spin_unlock(&p->lock);
			*done = len;
			return fb_waiter_wake_ret(rw, FB_WF_SYNC | FB_WF_GROUP);
		}
	}
	return write_ring(p, src, len, done, deadline);
}

int fiber_pipe_write(fiber_pipe_t *pipe, const void *buf, size_t len,
		     size_t *done)
{
	return write_until(pipe, buf, len, done, FB_NO_DEADLINE);
}

/*
 * fiber_pipe_timedwrite - fiber_pipe_write() that gives up at @abstime
 * (CLOCK_MONOTONIC), with *@done telling how many bytes got in.
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ETIMEDOUT; EINVAL for NULL or a bad @abstime; EPIPE; EBADF.
 */
int fiber_pipe_timedwrite(fiber_pipe_t *pipe, const void *buf, size_t len,
			  size_t *done, const struct timespec *abstime)
{
	if (!fb_timespec_valid(abstime))
		return EINVAL;
	return write_until(pipe, buf, len, done,
			   fb_deadline_from_timespec(abstime));
}

/*
 * fiber_pipe_write_until - fiber_pipe_write() that gives up when
 * fiber_now() reaches @deadline (CLOCK_MONOTONIC ns; FIBER_NO_DEADLINE:
 * never), with *@done telling how many bytes got in.
 * Context: fiber (parks) or any other thread (blocks).
 * Return: 0; ETIMEDOUT; EINVAL for NULL; EPIPE; EBADF.
 */
int fiber_pipe_write_until(fiber_pipe_t *pipe, const void *buf, size_t len,
			   size_t *done, uint64_t deadline)
{
	return write_until(pipe, buf, len, done, deadline);
}

/*
 * fiber_pipe_close_read - close the read end of @pipe: discard what it
 * holds, wake waiting readers with EBADF and make writes fail with EPIPE.
 * Context: any thread; never switches.
 * Return: 0; EINVAL for NULL; EBADF if it was closed already.
 */
int fiber_pipe_close_read(fiber_pipe_t *pipe)
{
	struct fb_pipe *p = pipe;

	if (!p)
		return EINVAL;
	fb_spin_lock(&p->lock);
	if (p->read_closed) {
		fb_spin_unlock(&p->lock);
		return EBADF;
	}
	p->read_closed = true;
	p->head = 0;
	p->count = 0;
	/* Under the lock: timed waiters (sched/timer.c). */
	fb_waitq_wake_all(&p->readers, EBADF, 0);
	fb_waitq_wake_all(&p->writers, EPIPE, 0);
	fb_spin_unlock(&p->lock);
	return 0;
}

/*
 * fiber_pipe_close_write - close the write end of @pipe: readers get EOF
 * once the buffered bytes are read, and writes in progress stop with
 * EBADF.  Context: any thread; never switches.
 * Return: 0; EINVAL for NULL; EBADF if it was closed already.
 */
int fiber_pipe_close_write(fiber_pipe_t *pipe)
{
	struct fb_pipe *p = pipe;

	if (!p)
		return EINVAL;
	fb_spin_lock(&p->lock);
	if (p->write_closed) {
		fb_spin_unlock(&p->lock);
		return EBADF;
	}
	p->write_closed = true;
	/* Queued readers imply an empty ring: they get EOF. */
	fb_waitq_wake_all(&p->readers, 0, 0);
	fb_waitq_wake_all(&p->writers, EBADF, 0);
	fb_spin_unlock(&p->lock);
	return 0;
}
