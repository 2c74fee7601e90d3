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
 * The signal is the worker's own involuntary context switches
 * (getrusage(RUSAGE_THREAD), ru_nivcsw): the kernel preempted it because
 * another thread wanted its CPU.  A worker that runs alone on its CPU is
 * almost never preempted: it blocks by itself (futex, epoll) when idle.
 * Each worker looks at most every FB_BIND_CHECK_NS, at its busy tick and
 * when it goes idle, so the check costs one clock read at those points and
 * one getrusage per interval.  LIBFIBER_BIND=1 pins for good and =0 never
 * pins; unset (the default) is this adaptive mode.
 */
#include <sched.h>
#include <sys/resource.h>

#include "sched/sched.h"

int fb_bind_decide(struct fb_wbind *b, uint64_t preempts)
{
	if (b->pinned) {
		b->quiet = 0;
		if (preempts < FB_BIND_SHARED_PREEMPTS)
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

void fb_sched_bind_start(struct fb_worker *w)
{
	w->bind.pinned = fb_rt->params.bind != FB_BIND_OFF;
	if (fb_rt->params.bind != FB_BIND_AUTO)
		return;
	w->bind.nivcsw = fb_bind_preempts();
	w->bind.next_ns = fb_now_coarse_ns() + FB_BIND_CHECK_NS;
}

void fb_sched_bind_check_slow(struct fb_worker *w, uint64_t now)
{
	long n = fb_bind_preempts();
	uint64_t d;

	w->bind.next_ns = now + FB_BIND_CHECK_NS;
	if (n < 0 || w->bind.nivcsw < 0) {
		w->bind.nivcsw = n;
		return;
	}
	d = (uint64_t)(n - w->bind.nivcsw);
	w->bind.nivcsw = n;
	switch (fb_bind_decide(&w->bind, d)) {
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
