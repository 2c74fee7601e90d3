/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bind.c - adaptive pinning: a worker pinned to its PU that finds the CPU
 * shared with other work lets the kernel move it, and takes its PU back
 * once the CPU is quiet again.
 *
 * Pinning pays on a machine the process has to itself: a worker keeps its
 * caches, and the placement layer's idea of where each worker runs (its
 * SMT siblings, its LLC, its node) is true.  On a machine shared with
 * other jobs it costs dearly: the kernel cannot move a pinned worker off a
 * CPU that a CPU-bound process also wants, so the worker gets half of that
 * CPU, in slices of milliseconds, while the fibers queued on it wait,
 * however idle the other CPUs are.  An unpinned thread is moved by the
 * kernel to a free CPU within a tick.
 *
 * The signals are the worker's own involuntary context switches
 * (getrusage(RUSAGE_THREAD), ru_nivcsw): the kernel preempted it because
 * another thread wanted its CPU; and the time it then spent runnable but
 * waiting on the kernel's run queue (the second field of
 * /proc/thread-self/schedstat), which says how much each preemption cost.
 * A worker that runs alone on its CPU is almost never preempted: it blocks
 * by itself (futex, epoll) when idle.  A CPU-bound neighbour preempts it
 * often; a neighbour that sleeps and wakes, like a load generator on the
 * same machine, preempts it rarely but for milliseconds each time, which
 * only the wait shows.  Each worker looks at most every FB_BIND_CHECK_NS,
 * at its busy tick and when it goes idle, so the check costs one clock
 * read at those points and, per interval, one getrusage and one read of
 * the schedstat file (open, read, close: no descriptor is held, so a
 * program that closes descriptors it did not open cannot break it).  The
 * decision looks at the last FB_BIND_WINDOW intervals together, so that
 * sharing is seen within one short interval of reaching the window's
 * threshold while one noisy short interval alone does not count for
 * more than it would in a long one.  LIBFIBER_BIND=1 pins for good and =0
 * never pins; unset (the default) is this adaptive mode.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sched/sched.h"

/* shared - the interval's signals say that another thread took @b's CPU
 * often enough, or for long enough, to be worth letting the kernel move
 * the worker. */
static bool shared(uint64_t preempts, int64_t wait_ns)
{
	if (preempts >= FB_BIND_SHARED_PREEMPTS)
		return true;
	return preempts >= FB_BIND_HURT_PREEMPTS &&
	       wait_ns >= FB_BIND_HURT_WAIT_NS;
}

int fb_bind_decide(struct fb_wbind *b, uint64_t preempts, int64_t wait_ns)
{
	unsigned int slot = b->pos++ % FB_BIND_WINDOW;

	/* The window's sums: this interval's figures replace the oldest. */
	b->win_preempts += preempts - b->ring_preempts[slot];
	b->ring_preempts[slot] = preempts;
	if (wait_ns < 0)
		wait_ns = 0; /* unknown: the count alone decides */
	b->win_wait_ns += wait_ns - b->ring_wait_ns[slot];
	b->ring_wait_ns[slot] = wait_ns;
	preempts = b->win_preempts;
	wait_ns = b->win_wait_ns;
	b->shared = shared(preempts, wait_ns);
	b->crowded = wait_ns >= FB_POLL_CROWDED_WAIT_NS;
	if (b->pinned) {
		b->quiet = 0;
		if (!b->shared)
			return FB_BIND_KEEP;
		/* Each unpin doubles the quiet asked before the next pin, so
		 * a CPU that stays shared is not retried every second. */
		if (!b->quiet_needed)
			b->quiet_needed = FB_BIND_QUIET_CHECKS;
		else if (b->quiet_needed < FB_BIND_QUIET_MAX)
			b->quiet_needed *= 2;
		return FB_BIND_UNPIN;
	}
	if (preempts > FB_BIND_QUIET_PREEMPTS) {
		b->quiet = 0;
		return FB_BIND_KEEP;
	}
	if (++b->quiet < b->quiet_needed)
		return FB_BIND_KEEP;
	b->quiet = 0;
	return FB_BIND_REPIN;
}

/* preempts_so_far - the calling thread's involuntary switches; -1 if the
 * kernel will not say. */
static long preempts_so_far(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru))
		return -1;
	return ru.ru_nivcsw;
}

long (*fb_bind_preempts)(void) = preempts_so_far;

/* next_u64 - the decimal number at *@s after blanks, with *@s moved past
 * it; false if there is none or it does not fit.  What sscanf("%llu")
 * does here for a tenth of its instructions: the check runs every 25 ms
 * of every busy worker. */
static bool next_u64(const char **s, uint64_t *v)
{
	const char *p = *s;
	uint64_t x = 0;

	while (*p == ' ' || *p == '\t')
		p++;
	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	*s = p;
	*v = x;
	return true;
}

/* waited_so_far - the calling thread's run-queue wait in ns (schedstat's
 * run_delay, its second number); -1 if the kernel has no schedstat file
 * or it cannot be read. */
static int64_t waited_so_far(void)
{
	char buf[96];
	const char *p = buf;
	uint64_t run, wait;
	ssize_t n;
	int fd;

	fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (!next_u64(&p, &run) || !next_u64(&p, &wait) || wait > INT64_MAX)
		return -1;
	return (int64_t)wait;
}

int64_t (*fb_bind_wait)(void) = waited_so_far;

void fb_sched_bind_start(struct fb_worker *w)
{
	w->bind.pinned = fb_rt->params.bind != FB_BIND_OFF;
	if (fb_rt->params.bind != FB_BIND_AUTO)
		return;
	w->bind.nivcsw = fb_bind_preempts();
	w->bind.wait_ns = fb_bind_wait();
	w->bind.next_ns = fb_now_coarse_ns() + FB_BIND_CHECK_NS;
}

void fb_sched_bind_check_slow(struct fb_worker *w, uint64_t now)
{
	long n = fb_bind_preempts();
	int64_t wait = fb_bind_wait(), dw = -1;
	uint64_t d;

	w->bind.next_ns = now + FB_BIND_CHECK_NS;
	if (wait >= 0 && w->bind.wait_ns >= 0 && wait >= w->bind.wait_ns)
		dw = wait - w->bind.wait_ns;
	w->bind.wait_ns = wait;
	if (n < 0 || w->bind.nivcsw < 0) {
		w->bind.nivcsw = n;
		return;
	}
	d = (uint64_t)(n - w->bind.nivcsw);
	w->bind.nivcsw = n;
	switch (fb_bind_decide(&w->bind, d, dw)) {
	case FB_BIND_UNPIN:
		if (!pthread_setaffinity_np(pthread_self(), sizeof(fb_rt->cpus),
					    &fb_rt->cpus)) {
			w->bind.pinned = false;
			FB_COUNT(w, unpins);
		}
		break;
	case FB_BIND_REPIN:
		if (!fb_topo_bind_self(fb_rt->topo, w->id)) {
			w->bind.pinned = true;
			FB_COUNT(w, repins);
		}
		break;
	}
}
